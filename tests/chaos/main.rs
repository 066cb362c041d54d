//! Chaos with a ledger (docs/reliability.md): Servers, PostgreSQL, Runners and the
//! links between them under seeded random faults while submissions stream in,
//! then quiescence and a checker of the invariants the lease promises.
//!
//! Two runs, both `#[ignore]`d (they take minutes): `chaos_postgres` (two `serve`
//! on one PostgreSQL the harness owns) and `chaos_sqlite` (one `serve`). Each has
//! three `daemon`s with disjoint box ranges and one shared package cache, every
//! daemon reaching the Servers through its own fault proxy, and a forwarding
//! Runner (`judge-runner forward`) judging at a Server B of its own (forward.rs).
//!
//!     JUDGE_CHAOS_SECONDS=300 JUDGE_CHAOS_SEED=42 cargo test --test chaos -- --ignored --nocapture
//!
//! The seed is printed first; the same seed replays the same fault schedule.
//! `JUDGE_CHAOS_REPORT=FILE` writes the figures as JSON.
#![allow(
    dead_code,
    clippy::cast_possible_truncation,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

#[path = "../e2e_common/mod.rs"]
mod e2e_common;

mod checker;
mod db;
mod forward;
mod pg;
mod proxy;
mod receiver;
mod system;
mod workload;

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use system::{Backend, Fault, System};

/// Seconds of faults (`JUDGE_CHAOS_SECONDS`, default 300).
fn seconds() -> u64 {
    std::env::var("JUDGE_CHAOS_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

/// `JUDGE_CHAOS_SEED`, or one drawn now (printed either way).
fn seed() -> u64 {
    std::env::var("JUDGE_CHAOS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| rand::rng().random())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "minutes long: .ci/run runs it with JUDGE_CHAOS_SECONDS"]
async fn chaos_postgres() {
    chaos(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "minutes long: .ci/run runs it with JUDGE_CHAOS_SECONDS"]
async fn chaos_sqlite() {
    chaos(Backend::Sqlite).await;
}

async fn chaos(backend: Backend) {
    let seed = seed();
    let seconds = seconds();
    eprintln!(
        "chaos: backend {backend:?}, seed {seed}, {seconds} s of faults (JUDGE_CHAOS_SEED={seed} replays it)"
    );
    let Some(mut sys) = System::start(backend, seed).await else {
        assert!(
            std::env::var("CI").is_err(),
            "chaos {backend:?}: PostgreSQL is missing, and CI requires it"
        );
        eprintln!("chaos: SKIPPED on {backend:?}: no PostgreSQL on this host");
        return;
    };

    // Fault-free first: every candidate once, for its verdict and its time.
    let mut work = workload::Workload::prepare(&mut sys).await;
    work.baseline(&mut sys).await;
    eprintln!(
        "chaos: fault-free baseline of {} candidates done",
        work.candidates.len()
    );

    // Then faults while submissions stream in.
    let mut faults = StdRng::seed_from_u64(seed);
    let mut stream = StdRng::seed_from_u64(seed ^ 0x5eed_5eed);
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut next_fault = Instant::now() + Duration::from_secs(2);
    let mut next_submission = Instant::now();
    while Instant::now() < end {
        sys.tick().await;
        if Instant::now() >= next_fault {
            if let Some(fault) = sys.pick_fault(&mut faults) {
                eprintln!("chaos: t={:>4}s {fault:?}", sys.elapsed());
                sys.inject(fault, &mut faults).await;
            }
            next_fault = Instant::now() + Duration::from_millis(faults.random_range(2000..5000));
        }
        if Instant::now() >= next_submission {
            work.step(&mut sys, &mut stream).await;
            next_submission =
                Instant::now() + Duration::from_millis(stream.random_range(300..1200));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    eprintln!("chaos: t={:>4}s faults stop; healing", sys.elapsed());
    sys.heal().await;
    work.wait_settled(&mut sys, Duration::from_secs(300)).await;
    let report = checker::check(&mut sys, &work).await;
    eprintln!("{}", report.table());
    if let Ok(path) = std::env::var("JUDGE_CHAOS_REPORT") {
        std::fs::write(path, report.json(seed, seconds, backend).to_string()).unwrap();
    }
    sys.stop().await;
    let leftovers = checker::leftovers(&sys);
    assert!(
        report.violations.is_empty() && leftovers.is_empty(),
        "chaos {backend:?} seed {seed}: {} violation(s), {} leftover(s):\n{}\n{}\nlogs in {}",
        report.violations.len(),
        leftovers.len(),
        report.violations.join("\n"),
        leftovers.join("\n"),
        sys.keep_logs()
    );
}

/// Found by the harness: with PostgreSQL down a Server hung for the pool's 30 s
/// and then answered 500. It answers 503 `unavailable` within seconds now, stays
/// up, and serves again by itself once the database is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_503_while_postgres_is_down_and_recovers() {
    let Some(pg) = pg::Postgres::start() else {
        assert!(std::env::var("CI").is_err(), "CI requires PostgreSQL");
        eprintln!("SKIPPED: no PostgreSQL on this host");
        return;
    };
    let scene = e2e_common::Scene::new("pg-down");
    let opts = e2e_common::ServeOpts {
        database: pg.url(),
        storage: scene.path("storage"),
        lease_seconds: 30,
        listen: "127.0.0.1:0".to_string(),
    };
    let mut serve = e2e_common::Serve::start(&opts, &scene.path("serve.log"));
    let get = |url: String| async move {
        let started = Instant::now();
        let r = reqwest::Client::new()
            .get(url)
            .bearer_auth(e2e_common::TOKEN)
            .timeout(Duration::from_secs(20))
            .send()
            .await
            .unwrap();
        (
            r.status().as_u16(),
            r.text().await.unwrap(),
            started.elapsed(),
        )
    };
    let job = format!("{}/api/jobs/1", serve.url);
    assert_eq!(get(job.clone()).await.0, 404);

    assert!(pg.stop_immediate());
    for _ in 0..2 {
        let (status, body, took) = get(job.clone()).await;
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("\"unavailable\""), "{body}");
        assert!(took < Duration::from_secs(10), "answered after {took:?}");
    }
    assert!(!serve.exited(), "serve exited while the database was down");

    assert!(pg.start_again());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body, _) = get(job.clone()).await;
        if status == 404 {
            break;
        }
        assert!(Instant::now() < deadline, "not recovered: {status} {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Found by the harness: an upload to a full `--storage` was a 500. It is 503
/// `unavailable` now, leaves no partial file, and the same upload succeeds once
/// there is room again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_to_a_full_storage_is_refused_and_leaves_nothing() {
    let scene = e2e_common::Scene::new("storage-full");
    let storage = scene.path("storage");
    let _tmpfs = e2e_common::disk::Tmpfs::mount(&storage, "4m");
    let mut opts = e2e_common::ServeOpts::sqlite(scene.dir.path(), 30);
    opts.storage = storage.clone();
    let serve = e2e_common::Serve::start(&opts, &scene.path("serve.log"));
    let package =
        judge_runner::demo::examples::tar_gz(&e2e_common::examples_dir().join("addition")).unwrap();
    let upload = || async {
        let r = reqwest::Client::new()
            .post(format!("{}/api/problems", serve.url))
            .bearer_auth(e2e_common::TOKEN)
            .body(package.clone())
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    };
    let fill = storage.join("fill");
    e2e_common::disk::fill(&fill);
    let before = system::files_under(&storage);
    let (status, body) = upload().await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("\"unavailable\"") && body.contains("full"),
        "{body}"
    );
    assert_eq!(
        system::files_under(&storage),
        before,
        "a partial file was kept"
    );
    std::fs::remove_file(&fill).unwrap();
    assert_eq!(upload().await.0, 201);
}

/// The classes of fault, for the figures.
pub fn class(fault: &Fault) -> &'static str {
    fault.class()
}

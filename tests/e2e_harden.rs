//! The daemon's hardening, end to end (real `serve` and `daemon` processes on
//! loopback): box ids held for the daemon's life, the Runner key only to the
//! Server's origin, a revoked key during a job, SIGTERM during a claim.
//!
//! Box ids: 3600 + 10·k for test k (validators at +500 stay below 4600).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod e2e_common;

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use e2e_common::*;
use judge_runner::protocol::JobState;
use nix::sys::signal::Signal;

const LONG: Duration = Duration::from_secs(90);

/// `--first-box 3600 --slots 2` holds 3600, 3601, 4100, 4101: a daemon with
/// `--first-box 3601` (3601 and 4101) exits 1 before its first claim, naming
/// the ids and the daemon holding them; so does a `judge` on box 3600. Once the
/// first daemon is gone, the second starts.
#[tokio::test(flavor = "multi_thread")]
async fn overlapping_box_ids_refused_naming_them() {
    let scene = Scene::new("overlap");
    let serve = scene.serve(30);
    let manager = serve.manager();
    let a = manager.create_runner("a").await.unwrap();
    let b = manager.create_runner("b").await.unwrap();
    let first = Daemon::start(
        &DaemonOpts {
            server: &serve.url,
            key: &a.key,
            first_box: 3600,
            slots: 2,
            cache: &scene.path("cache"),
            cgroup_parent: &scene.cgroup_parent,
            tmp: scene.dir.path(),
        },
        &scene.path("a.log"),
    );
    first.wait_started().await;

    let mut second = scene.daemon(&serve.url, &b.key, 3601, "b.log");
    let status = second
        .wait_exit(Duration::from_secs(60))
        .expect("the overlapping daemon exits");
    assert_eq!(status.code(), Some(1), "{}", second.log_text());
    let log = second.log_text();
    let holder = format!("daemon pid {}", first.pid());
    assert!(log.contains("3601, 4101"), "names the ids: {log}");
    assert!(log.contains(&holder), "names who holds them: {log}");
    assert!(!log.contains("runner started"), "{log}");

    // `judge` takes the same locks.
    let source = scene.path("a.py");
    std::fs::write(&source, "print(sum(map(int, input().split())))\n").unwrap();
    let judge = Command::new(BIN)
        .args(["judge", "--box-id", "3600", "--cgroup-parent"])
        .arg(&scene.cgroup_parent)
        .arg("--problem")
        .arg(examples_dir().join("addition"))
        .arg(&source)
        .env(
            judge_runner::sandbox::BOX_LOCK_DIR_ENV,
            scene.dir.path().join("box-locks"),
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&judge.stderr);
    assert_eq!(judge.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("3600") && stderr.contains(&holder),
        "{stderr}"
    );

    drop(first);
    let third = scene.daemon(&serve.url, &b.key, 3601, "c.log");
    third.wait_started().await;
    third.signal(Signal::SIGTERM);
}

/// A tiny HTTP server on another port (another origin): serves `bytes` on any
/// path and records the `Authorization` header of every request.
async fn cdn(bytes: Vec<u8>) -> (String, Arc<Mutex<Vec<Option<String>>>>) {
    let seen: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let record = Arc::clone(&seen);
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
        let record = Arc::clone(&record);
        let bytes = bytes.clone();
        async move {
            record.lock().unwrap().push(
                headers
                    .get(axum::http::header::AUTHORIZATION)
                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
            );
            bytes
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), seen)
}

/// The Server hands out package URLs on another origin (`--public-url` naming
/// a CDN on another port): the daemon fetches the package there without its
/// key, and judges the job to Accepted.
#[tokio::test(flavor = "multi_thread")]
async fn package_on_another_origin_gets_no_key() {
    let scene = Scene::new("origin");
    let package = slow_problem(scene.dir.path(), 1);
    let bytes = judge_runner::demo::examples::tar_gz(&package).unwrap();
    let (cdn_url, seen) = cdn(bytes).await;
    let serve = Serve::start_with(
        &ServeOpts::sqlite(scene.dir.path(), 30),
        &scene.path("serve.log"),
        &["--public-url", &cdn_url],
    );
    let manager = serve.manager();
    let (problem, _) = upload(&manager, &package).await;
    let a = manager.create_runner("a").await.unwrap();
    let job = submit_echo(&manager, problem, 0.0).await;
    let _daemon = scene.daemon(&serve.url, &a.key, 3610, "a.log");
    let done = wait_job(&manager, job, LONG, "final", is_final).await;
    assert_eq!(done.state, JobState::Completed, "{}", scene.logs());
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen, vec![None], "the CDN was asked once, without the key");
    assert!(!scene.logs().contains(&a.key), "the key is never logged");
}

/// `DELETE /api/runners/{id}` while its daemon judges a test that sleeps an
/// hour: the next lease call is answered 401 `auth.revoked`, which is a lost
/// lease: the sandbox is stopped, nothing is reported,
/// and the job stays where the revocation put it (Queued, no Result).
#[tokio::test(flavor = "multi_thread")]
async fn revoked_key_stops_the_running_job() {
    let scene = Scene::new("revoked");
    let serve = scene.serve(3);
    let manager = serve.manager();
    let (slow, _) = upload(&manager, &slow_problem_with(scene.dir.path(), 1, 900)).await;
    let a = manager.create_runner("a").await.unwrap();
    let job = submit_echo(&manager, slow, 3600.0).await;
    let daemon = scene.daemon(&serve.url, &a.key, 3620, "a.log");
    wait_job(&manager, job, LONG, "running", |v| {
        v.state == JobState::Running
    })
    .await;
    wait_for("the test to start", || {
        !processes_in(&scene.cgroup_parent).is_empty()
    })
    .await;
    let revoked = reqwest::Client::new()
        .delete(format!("{}/api/runners/{}", serve.url, a.runner_id))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert!(revoked.status().is_success(), "{revoked:?}");
    // Stopped: the sandbox is gone while its test would sleep for an hour.
    wait_for("the sandbox to stop", || {
        processes_in(&scene.cgroup_parent).is_empty()
    })
    .await;
    wait_for("the daemon to count the lost lease", || {
        daemon.log_text().contains("lease lost")
    })
    .await;
    let view = manager.job(job).await.unwrap();
    assert_eq!(view.state, JobState::Queued, "{}", scene.logs());
    assert!(view.result.is_none());
    assert_eq!(
        daemon.metric("judge_runner_leases_lost_total").await,
        Some(1.0),
        "{}",
        daemon.log_text()
    );
}

/// Polls `done` every 50 ms for up to 60 s; panics naming `what` after that.
async fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "waited for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// SIGTERM while the daemon's only slot waits in a long-poll claim, then a
/// job submitted: the Server hands it to the claim still in flight, and the
/// stopping daemon releases it (releases 1, back to Queued, its delivery given
/// back) and exits 0, instead of dropping the claim and leaving the job
/// Running (or never delivered) until a lease expired.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_during_a_claim_releases_what_it_brings() {
    let scene = Scene::new("claimterm");
    let serve = scene.serve(60);
    let manager = serve.manager();
    let (problem, _) = upload(&manager, &slow_problem(scene.dir.path(), 1)).await;
    let a = manager.create_runner("a").await.unwrap();
    let mut daemon = scene.daemon(&serve.url, &a.key, 3630, "a.log");
    daemon.wait_started().await;
    // Its first claim (a 5 s long poll) is on its way by now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    daemon.signal(Signal::SIGTERM);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let job = submit_echo(&manager, problem, 0.0).await;
    let status = daemon
        .wait_exit(Duration::from_secs(30))
        .expect("the daemon exits");
    assert!(status.success(), "{status:?}: {}", daemon.log_text());
    let view = manager.job(job).await.unwrap();
    assert_eq!(view.state, JobState::Queued, "{}", scene.logs());
    assert_eq!(view.releases, 1, "delivered and released: {}", scene.logs());
    assert_eq!(view.deliveries, 0, "the release gave the delivery back");
    assert!(
        daemon.log_text().contains("claimed while stopping"),
        "{}",
        daemon.log_text()
    );
}

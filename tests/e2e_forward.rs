//! The forwarding Runner end to end, all real processes: Server A (`serve`),
//! Server B (`serve`) with a `daemon` of its own, and `judge-runner forward`
//! between them. SQLite; the fault tests also on PostgreSQL when
//! `DATABASE_URL_POSTGRES` is set (both Servers on databases of their own).
//! What B holds is counted in B's database itself.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod e2e_common;

use e2e_common::postgres::{admin, postgres_url, with_database};

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use e2e_common::{
    Daemon, Forwarder, Scene, Serve, ServeOpts, TOKEN, free_port, is_final, metric_value,
    slow_echo, slow_problem, upload, wait_job,
};
use judge_runner::protocol::{Id, JobState, JobView, SubmissionFile};
use nix::sys::signal::Signal;
use sqlx::Connection as _;

const LONG: Duration = Duration::from_secs(180);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}

/// Rows of a table of a Server's database, read from the database itself.
async fn rows(database: &str, table: &str) -> i64 {
    let sql: &'static str = match table {
        "submissions" => "SELECT COUNT(*) FROM submissions",
        "jobs" => "SELECT COUNT(*) FROM jobs",
        "problems" => "SELECT COUNT(*) FROM problems",
        other => panic!("no count for {other}"),
    };
    if database.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(database).await.unwrap();
        let n: i64 = sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap();
        conn.close().await.unwrap();
        n
    } else {
        let mut conn = sqlx::PgConnection::connect(database).await.unwrap();
        let n: i64 = sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap();
        conn.close().await.unwrap();
        n
    }
}

/// The submission B made for A's job (through the key the forwarder sent):
/// `(submission_id, first job_id)`.
async fn remote_of(database: &str, a_job: Id) -> Option<(i64, i64)> {
    const SQL: &str = "SELECT first_id, second_id FROM idempotency_keys \
                       WHERE route = 'submissions' AND client_key LIKE $1";
    let pattern = format!("judge-runner-forward:%:job-{a_job}:attempt-1");
    if database.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(database).await.unwrap();
        let row = sqlx::query_as(SQL)
            .bind(pattern)
            .fetch_optional(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
        row
    } else {
        let mut conn = sqlx::PgConnection::connect(database).await.unwrap();
        let row = sqlx::query_as(SQL)
            .bind(pattern)
            .fetch_optional(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
        row
    }
}

/// Waits until B holds the submission it made for A's job `a_job`: its
/// `(submission_id, first job_id)`.
async fn wait_remote(fed: &Federation, a_job: Id) -> (i64, i64) {
    let start = Instant::now();
    loop {
        if let Some(found) = remote_of(&fed.b_opts.database, a_job).await {
            return found;
        }
        assert!(
            start.elapsed() < LONG,
            "B never got A's job {a_job}:\n{}",
            fed.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A and B, a daemon on B, a Runner key for the forwarder at A.
struct Federation {
    scene: Scene,
    a: Serve,
    b: Serve,
    a_opts: ServeOpts,
    b_opts: ServeOpts,
    b_daemon: Option<Daemon>,
    /// The forwarder's Runner key at A (another: `runner_key`).
    key: String,
    postgres: Option<(String, Vec<String>)>,
}

struct Setup<'a> {
    name: &'a str,
    backend: Backend,
    a_lease: u64,
    a_extra: &'a [&'a str],
    b_extra: &'a [&'a str],
    first_box: u32,
}

impl Federation {
    /// `None` when the backend is PostgreSQL and there is none.
    async fn start(setup: Setup<'_>) -> Option<Federation> {
        let scene = Scene::new(setup.name);
        let (a_db, b_db, postgres) = match setup.backend {
            Backend::Sqlite => {
                let db = |n: &str| format!("sqlite://{}", scene.path(n).display());
                (db("a.db"), db("b.db"), None)
            }
            Backend::Postgres => {
                let Some(url) = postgres_url() else {
                    eprintln!("skipped: DATABASE_URL_POSTGRES is unset");
                    return None;
                };
                let names: Vec<String> = ["a", "b"]
                    .iter()
                    .map(|s| format!("fwd_{s}_{}_{}", std::process::id(), rand::random::<u32>()))
                    .collect();
                for name in &names {
                    admin(&url, format!("CREATE DATABASE {name}")).await;
                }
                let (a, b) = (
                    with_database(&url, &names[0]),
                    with_database(&url, &names[1]),
                );
                (a, b, Some((url, names)))
            }
        };
        let a_opts = ServeOpts {
            database: a_db,
            storage: scene.path("a-storage"),
            lease_seconds: setup.a_lease,
            listen: "127.0.0.1:0".to_string(),
        };
        let b_opts = ServeOpts {
            database: b_db,
            storage: scene.path("b-storage"),
            lease_seconds: 60,
            listen: "127.0.0.1:0".to_string(),
        };
        let a = Serve::start_with(&a_opts, &scene.path("a.log"), setup.a_extra);
        let b = Serve::start_with(&b_opts, &scene.path("b.log"), setup.b_extra);
        let b_key = b.manager().create_runner("b-daemon").await.unwrap().key;
        let b_daemon = scene.daemon(&b.url, &b_key, setup.first_box, "b-daemon.log");
        let key = a.manager().create_runner("forwarder").await.unwrap().key;
        b_daemon.wait_started().await;
        Some(Federation {
            scene,
            a,
            b,
            a_opts,
            b_opts,
            b_daemon: Some(b_daemon),
            key,
            postgres,
        })
    }

    fn forwarder(&self, key: &str, log: &str, extra: &[&str]) -> Forwarder {
        Forwarder::start(
            &self.scene,
            &self.a.url,
            key,
            &self.b.url,
            TOKEN,
            log,
            extra,
        )
    }

    fn logs(&self) -> String {
        self.scene.logs()
    }

    async fn at_b(&self, table: &str) -> i64 {
        rows(&self.b_opts.database, table).await
    }

    async fn cleanup(mut self) {
        self.b_daemon.take();
        if let Some((url, names)) = self.postgres.take() {
            self.a.kill();
            self.b.kill();
            for name in names {
                admin(&url, format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
            }
        }
    }
}

fn example(problem: &str, folder: &str, file: &str) -> (PathBuf, String, Vec<SubmissionFile>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/problems");
    let source = fs::read(
        root.join(problem)
            .join("submissions")
            .join(folder)
            .join(file),
    )
    .unwrap();
    let language = match file.rsplit_once('.').unwrap().1 {
        "py" => "python3",
        "c" => "c",
        "cpp" => "cpp",
        other => panic!("no language for .{other}"),
    };
    (
        root.join(problem),
        language.to_string(),
        vec![SubmissionFile::from_bytes(file, &source)],
    )
}

/// `(name, verdict)` of each per-test row of a `details` document.
fn tests_of(details: &[u8]) -> Vec<(String, String)> {
    let rows: Vec<serde_json::Value> = serde_json::from_slice(details).unwrap();
    rows.iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap_or_default().to_string(),
                r["verdict"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// A pass-fail, a scoring, an interactive submission and one that does not
/// compile, through the forwarder (polling B), arrive at A with the verdicts and
/// scores of the same files judged at B directly, with B's `details` and `log`
/// byte for byte and a `runner_version` naming the forwarder and B's Runner.
#[tokio::test(flavor = "multi_thread")]
async fn forwarded_verdicts_are_those_judged_at_b() {
    let fed = Federation::start(Setup {
        name: "fwd-verdicts",
        backend: Backend::Sqlite,
        a_lease: 30,
        a_extra: &[],
        b_extra: &[],
        first_box: 3800,
    })
    .await
    .unwrap();
    let (a, b) = (fed.a.manager(), fed.b.manager());
    let forwarder = fed.forwarder(&fed.key, "forward.log", &[]);
    forwarder.wait_started().await;
    let cases = [
        example("addition", "wrong_answer", "concat.py"),
        example("groups", "partially_accepted", "int32.py"),
        example("guess", "accepted", "bisect.py"),
        example("addition", "compile_error", "syntax.py"),
    ];
    let mut pairs = Vec::new();
    for (dir, language, files) in &cases {
        let (a_problem, _) = upload(&a, dir).await;
        let (b_problem, _) = upload(&b, dir).await;
        let forwarded = a.submit(a_problem, language, files.clone()).await.unwrap();
        let direct = b.submit(b_problem, language, files.clone()).await.unwrap();
        pairs.push((forwarded.job_id, direct.job_id));
    }
    for (forwarded, direct) in pairs {
        let at_a = wait_job(&a, forwarded, LONG, "final at A", is_final).await;
        let at_b = wait_job(&b, direct, LONG, "final at B", is_final).await;
        assert_eq!(at_a.state, JobState::Completed, "{}", fed.logs());
        assert_eq!(at_b.state, JobState::Completed, "{}", fed.logs());
        let (ra, rb) = (at_a.result.clone().unwrap(), at_b.result.clone().unwrap());
        assert_eq!(
            (&ra.verdict, ra.score, ra.max_score, &ra.extra, &ra.props),
            (&rb.verdict, rb.score, rb.max_score, &rb.extra, &rb.props),
            "job {forwarded} at A against job {direct} judged at B directly"
        );
        let version = ra.runner_version.clone().unwrap();
        let b_runner = rb.runner_version.clone().unwrap();
        assert!(
            version.starts_with("judge-runner-forward ") && version.contains(&b_runner),
            "{version:?} names the forwarder and B's Runner {b_runner:?}"
        );
        // B's own job for the forwarded submission: its files, byte for byte.
        let (_, remote_job) = remote_of(&fed.b_opts.database, forwarded).await.unwrap();
        let remote = b.job(remote_job).await.unwrap();
        assert_eq!(remote.result.as_ref().unwrap().verdict, ra.verdict);
        for name in ["details", "log"] {
            assert_eq!(
                a.file(forwarded, name).await.unwrap(),
                b.file(remote_job, name).await.unwrap(),
                "{name} of job {forwarded}"
            );
        }
        assert_eq!(
            tests_of(&a.file(forwarded, "details").await.unwrap()),
            tests_of(&b.file(direct, "details").await.unwrap()),
            "the same tests with the same verdicts as judged at B directly"
        );
        if ra.verdict == "Compilation Error" {
            assert!(!a.file(forwarded, "log").await.unwrap().is_empty());
        }
        assert_eq!((at_a.deliveries, at_a.releases), (1, 0));
    }
    assert_eq!(fed.at_b("submissions").await, 8, "4 forwarded, 4 direct");
    assert_eq!(
        forwarder
            .metric("judge_forward_submissions_total{outcome=\"created\"}")
            .await,
        Some(4.0)
    );
    assert_eq!(
        forwarder.metric("judge_forward_webhooks_total").await,
        Some(0.0)
    );
    assert_eq!(
        forwarder
            .metric("judge_runner_jobs_done_total{verdict=\"Wrong Answer\"}")
            .await,
        Some(1.0)
    );
    fed.cleanup().await;
}

/// With `--callback-listen`, B's `attempt.ended` webhook reaches the forwarder
/// (counted on both sides) and the job completes.
#[tokio::test(flavor = "multi_thread")]
async fn webhooks_from_b_wake_the_forwarder() {
    let fed = Federation::start(Setup {
        name: "fwd-webhooks",
        backend: Backend::Sqlite,
        a_lease: 30,
        a_extra: &[],
        b_extra: &["--webhook-secret", "e2e-secret", "--webhook-allow-private"],
        first_box: 3810,
    })
    .await
    .unwrap();
    let a = fed.a.manager();
    let listen = format!("127.0.0.1:{}", free_port());
    let forwarder = fed.forwarder(&fed.key, "forward.log", &["--callback-listen", &listen]);
    forwarder.wait_started().await;
    let (dir, language, files) = example("addition", "accepted", "add.py");
    let (problem, _) = upload(&a, &dir).await;
    let job = a.submit(problem, &language, files).await.unwrap().job_id;
    let done = wait_job(&a, job, LONG, "final", is_final).await;
    assert_eq!(done.state, JobState::Completed, "{}", fed.logs());
    assert_eq!(done.result.unwrap().verdict, "Accepted");
    // B counts its delivery once the forwarder has answered it, which may be
    // after A's job is Completed: waited for, not read once.
    let start = Instant::now();
    loop {
        let b_metrics = fed.b.manager().metrics().await.unwrap();
        let delivered = metric_value(
            &b_metrics,
            "judge_webhook_deliveries_total{outcome=\"delivered\"}",
        );
        if delivered.is_some_and(|n| n >= 1.0) {
            break;
        }
        assert!(start.elapsed() < LONG, "B delivered the event: {b_metrics}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let start = Instant::now();
    while forwarder.metric("judge_forward_webhooks_total").await < Some(1.0) {
        assert!(
            start.elapsed() < LONG,
            "no webhook counted:\n{}",
            fed.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    fed.cleanup().await;
}

/// The forwarder is SIGKILLed while B judges; a new one (another key at A)
/// takes the re-delivered job and waits on the same B submission: one
/// submission and one attempt at B, A's job Completed once with two deliveries.
async fn killed_forwarder_spends_no_second_submission(backend: Backend, first_box: u32) {
    let Some(fed) = Federation::start(Setup {
        name: "fwd-kill",
        backend,
        a_lease: 3,
        a_extra: &[],
        b_extra: &[],
        first_box,
    })
    .await
    else {
        return;
    };
    let a = fed.a.manager();
    let (problem, _) = upload(&a, &slow_problem(fed.scene.dir.path(), 4)).await;
    let job = a
        .submit(problem, "python3", slow_echo(1.5))
        .await
        .unwrap()
        .job_id;
    let mut first = fed.forwarder(&fed.key, "forward-1.log", &[]);
    wait_remote(&fed, job).await;
    first.signal(Signal::SIGKILL);
    first.wait_exit(Duration::from_secs(10)).unwrap();
    let other = a.create_runner("forwarder-2").await.unwrap();
    let second = fed.forwarder(&other.key, "forward-2.log", &[]);
    let done = wait_job(&a, job, LONG, "final", is_final).await;
    assert_eq!(done.state, JobState::Completed, "{}", fed.logs());
    assert_eq!(done.runner_id, Some(other.runner_id));
    // Two claims; the first is refunded when the killed forwarder was never
    // heard from at A (it had made no lease call yet), as for a daemon.
    assert_eq!(done.deliveries + done.refunds, 2, "{done:?}");
    assert_eq!(done.result.as_ref().unwrap().verdict, "Accepted");
    assert_eq!(fed.at_b("submissions").await, 1, "{}", fed.logs());
    assert_eq!(fed.at_b("jobs").await, 1, "one attempt at B");
    assert_eq!(
        second
            .metric("judge_forward_submissions_total{outcome=\"replayed\"}")
            .await,
        Some(1.0)
    );
    assert_eq!(
        second
            .metric("judge_forward_submissions_total{outcome=\"created\"}")
            .await,
        Some(0.0)
    );
    fed.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_forwarder_spends_no_second_submission_sqlite() {
    killed_forwarder_spends_no_second_submission(Backend::Sqlite, 3820).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_forwarder_spends_no_second_submission_postgres() {
    killed_forwarder_spends_no_second_submission(Backend::Postgres, 3825).await;
}

/// A's lease runs out while B judges (the forwarder stopped past it): A refuses
/// what the forwarder sends under the old token and counts it, B's attempt is
/// not cancelled, and the re-delivered job completes from the same B submission.
async fn lost_lease_leaves_b_judging(backend: Backend, first_box: u32) {
    let Some(fed) = Federation::start(Setup {
        name: "fwd-lost",
        backend,
        a_lease: 2,
        a_extra: &[],
        b_extra: &[],
        first_box,
    })
    .await
    else {
        return;
    };
    let (a, b) = (fed.a.manager(), fed.b.manager());
    let (problem, _) = upload(&a, &slow_problem(fed.scene.dir.path(), 4)).await;
    let job = a
        .submit(problem, "python3", slow_echo(1.5))
        .await
        .unwrap()
        .job_id;
    let forwarder = fed.forwarder(&fed.key, "forward.log", &[]);
    let (_, remote) = wait_remote(&fed, job).await;
    forwarder.signal(Signal::SIGSTOP);
    wait_job(&a, job, LONG, "requeued at A", |v| {
        v.state == JobState::Queued
    })
    .await;
    forwarder.signal(Signal::SIGCONT);
    let done = wait_job(&a, job, LONG, "final", is_final).await;
    assert_eq!(done.state, JobState::Completed, "{}", fed.logs());
    // Claimed again after the expiry (the first claim, never heard from, is
    // refunded; a claim answered while the forwarder was stopped may be too).
    assert!(
        done.deliveries + done.refunds >= 2,
        "claimed again: {done:?}"
    );
    let a_metrics = a.metrics().await.unwrap();
    assert!(
        metric_value(&a_metrics, "judge_stale_result_dropped_total").is_some_and(|n| n >= 1.0),
        "A refused the stale call: {a_metrics}"
    );
    assert!(forwarder.metric("judge_runner_leases_lost_total").await >= Some(1.0));
    let at_b = b.job(remote).await.unwrap();
    assert_eq!(
        at_b.state,
        JobState::Completed,
        "B's attempt was not cancelled"
    );
    assert_eq!(fed.at_b("submissions").await, 1);
    assert_eq!(fed.at_b("jobs").await, 1);
    assert_eq!(done.result.unwrap().verdict, at_b.result.unwrap().verdict);
    assert!(
        forwarder
            .metric("judge_forward_submissions_total{outcome=\"replayed\"}")
            .await
            >= Some(1.0)
    );
    fed.cleanup().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn lost_lease_leaves_b_judging_sqlite() {
    lost_lease_leaves_b_judging(Backend::Sqlite, 3830).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn lost_lease_leaves_b_judging_postgres() {
    lost_lease_leaves_b_judging(Backend::Postgres, 3835).await;
}

/// B goes away for longer than A's lease: the forwarder gives the job back
/// (Queued at A, released, no Result); B back on the same address and
/// database, the job completes from the submission B already had.
#[tokio::test(flavor = "multi_thread")]
async fn b_away_longer_than_the_lease_sends_the_job_back() {
    let mut fed = Federation::start(Setup {
        name: "fwd-away",
        backend: Backend::Sqlite,
        a_lease: 3,
        a_extra: &[],
        b_extra: &[],
        first_box: 3840,
    })
    .await
    .unwrap();
    let a = fed.a.manager();
    let (problem, _) = upload(&a, &slow_problem(fed.scene.dir.path(), 4)).await;
    let job = a
        .submit(problem, "python3", slow_echo(1.5))
        .await
        .unwrap()
        .job_id;
    let forwarder = fed.forwarder(&fed.key, "forward.log", &[]);
    wait_remote(&fed, job).await;
    fed.b.kill();
    let back = wait_job(&a, job, LONG, "given back to A", |v| {
        v.state == JobState::Queued && v.releases >= 1
    })
    .await;
    assert!(back.result.is_none());
    assert!(
        forwarder
            .metric("judge_forward_service_unavailable_total")
            .await
            > Some(0.0)
    );
    let b_opts = ServeOpts {
        listen: fed.b.listen.clone(),
        ..fed.b_opts.clone()
    };
    fed.b = Serve::start(&b_opts, &fed.scene.path("b-again.log"));
    let done = wait_job(&a, job, LONG, "final", is_final).await;
    assert_eq!(done.state, JobState::Completed, "{}", fed.logs());
    assert_eq!(done.result.unwrap().verdict, "Accepted");
    assert_eq!(fed.at_b("submissions").await, 1, "nothing submitted twice");
    assert_eq!(fed.at_b("jobs").await, 1);
    assert!(
        forwarder
            .metric("judge_forward_submissions_total{outcome=\"replayed\"}")
            .await
            >= Some(1.0)
    );
    fed.cleanup().await;
}

/// A package whose bytes do not hash to the claim's SHA-256: A's job ends
/// Failed with `package.checksum_mismatch`, without a Result; B never sees it.
#[tokio::test(flavor = "multi_thread")]
async fn a_corrupted_package_fails_the_job_without_a_verdict() {
    let fed = Federation::start(Setup {
        name: "fwd-corrupt",
        backend: Backend::Sqlite,
        a_lease: 30,
        a_extra: &[],
        b_extra: &[],
        first_box: 3850,
    })
    .await
    .unwrap();
    let a = fed.a.manager();
    let (problem, sha) = upload(&a, &slow_problem(fed.scene.dir.path(), 2)).await;
    let stored = fed.a_opts.storage.join(format!("packages/{sha}.tar.gz"));
    let mut bytes = fs::read(&stored).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    fs::write(&stored, &bytes).unwrap();
    let job = a
        .submit(problem, "python3", slow_echo(0.0))
        .await
        .unwrap()
        .job_id;
    let forwarder = fed.forwarder(&fed.key, "forward.log", &[]);
    let done = wait_job(&a, job, LONG, "final", is_final).await;
    assert_eq!(done.state, JobState::Failed, "{}", fed.logs());
    assert_eq!(
        done.failure_reason.as_deref(),
        Some("package.checksum_mismatch")
    );
    assert!(done.result.is_none());
    assert_eq!(done.deliveries, 1, "not retried");
    assert_eq!(fed.at_b("problems").await, 0);
    assert_eq!(fed.at_b("submissions").await, 0);
    assert_eq!(
        forwarder
            .metric("judge_runner_job_failures_total{reason=\"package.checksum_mismatch\"}")
            .await,
        Some(1.0)
    );
    fed.cleanup().await;
}

/// B does not take the job's language: A's job fails retryably with
/// `language.unavailable` at each delivery (A's cap of 2 then ends it), never
/// a verdict, and nothing is submitted at B.
#[tokio::test(flavor = "multi_thread")]
async fn a_language_b_lacks_fails_retryably() {
    let fed = Federation::start(Setup {
        name: "fwd-language",
        backend: Backend::Sqlite,
        a_lease: 30,
        a_extra: &["--delivery-cap", "2"],
        b_extra: &["--languages", "c,cpp"],
        first_box: 3860,
    })
    .await
    .unwrap();
    let a = fed.a.manager();
    let (dir, language, files) = example("addition", "accepted", "add.py");
    let (problem, _) = upload(&a, &dir).await;
    let job = a.submit(problem, &language, files).await.unwrap().job_id;
    let forwarder = fed.forwarder(&fed.key, "forward.log", &[]);
    let done = wait_job(&a, job, LONG, "final", is_final).await;
    assert_eq!(done.state, JobState::Failed, "{}", fed.logs());
    assert_eq!(done.failure_reason.as_deref(), Some("deliveries.exhausted"));
    assert_eq!(done.deliveries, 2, "retried: the failure was retryable");
    assert!(done.result.is_none());
    assert_eq!(
        forwarder
            .metric("judge_runner_job_failures_total{reason=\"language.unavailable\"}")
            .await,
        Some(2.0)
    );
    assert_eq!(fed.at_b("submissions").await, 0);
    fed.cleanup().await;
}

/// A token B does not let submit ends the forwarder at start-up (exit 1, a
/// message naming the flag and the scope), before it claims anything; the
/// manager token (the other tests) starts.
#[tokio::test(flavor = "multi_thread")]
async fn a_token_that_cannot_submit_is_refused_at_start() {
    let fed = Federation::start(Setup {
        name: "fwd-token",
        backend: Backend::Sqlite,
        a_lease: 30,
        a_extra: &[],
        b_extra: &[],
        first_box: 3870,
    })
    .await
    .unwrap();
    let client = reqwest::Client::new();
    let trial_only: serde_json::Value = client
        .post(format!("{}/api/tokens", fed.b.url))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"scopes": ["trial:run"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let trial_only = trial_only["token"].as_str().unwrap().to_string();
    for (token, log) in [
        ("not-a-token", "bogus.log"),
        (trial_only.as_str(), "scoped.log"),
    ] {
        let mut refused = Forwarder::start(
            &fed.scene,
            &fed.a.url,
            &fed.key,
            &fed.b.url,
            token,
            log,
            &[],
        );
        let status = refused.wait_exit(Duration::from_secs(60));
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(1),
            "{}",
            refused.log_text()
        );
        let text = refused.log_text();
        assert!(
            text.contains("--to-token") && text.contains("submissions:write"),
            "{text}"
        );
    }
    let a = fed.a.manager();
    let (dir, language, files) = example("addition", "accepted", "add.py");
    let (problem, _) = upload(&a, &dir).await;
    let job = a.submit(problem, &language, files).await.unwrap().job_id;
    let view: JobView = a.job(job).await.unwrap();
    assert_eq!((view.state, view.deliveries), (JobState::Queued, 0));
    fed.cleanup().await;
}

/// SIGTERM: a job B accepted is finished within `--grace` (then exit 0); with
/// no grace it is released at once, and B's attempt goes on to its end.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_finishes_within_grace_else_releases() {
    let fed = Federation::start(Setup {
        name: "fwd-sigterm",
        backend: Backend::Sqlite,
        a_lease: 30,
        a_extra: &[],
        b_extra: &[],
        first_box: 3880,
    })
    .await
    .unwrap();
    let (a, b) = (fed.a.manager(), fed.b.manager());
    let (problem, _) = upload(&a, &slow_problem(fed.scene.dir.path(), 3)).await;

    let job = a
        .submit(problem, "python3", slow_echo(1.0))
        .await
        .unwrap()
        .job_id;
    let mut patient = fed.forwarder(&fed.key, "patient.log", &["--grace", "120"]);
    wait_remote(&fed, job).await;
    patient.signal(Signal::SIGTERM);
    let status = patient.wait_exit(LONG).expect("exits once the job is done");
    assert!(status.success(), "{}", patient.log_text());
    let done = a.job(job).await.unwrap();
    assert_eq!(done.state, JobState::Completed, "{}", fed.logs());
    assert_eq!((done.deliveries, done.releases), (1, 0));

    let job = a
        .submit(problem, "python3", slow_echo(1.0))
        .await
        .unwrap()
        .job_id;
    let mut hasty = fed.forwarder(&fed.key, "hasty.log", &[]);
    let (_, remote_job) = wait_remote(&fed, job).await;
    hasty.signal(Signal::SIGTERM);
    let status = hasty.wait_exit(LONG).expect("exits");
    assert!(status.success(), "{}", hasty.log_text());
    let back = a.job(job).await.unwrap();
    // Released at once (and once more when the other lane's claim in flight
    // brought it straight back while stopping).
    assert_eq!(back.state, JobState::Queued, "{}", fed.logs());
    assert!(back.releases >= 1, "{back:?}");
    assert!(back.result.is_none());
    let at_b = wait_job(&b, remote_job, LONG, "final at B", is_final).await;
    assert_eq!(at_b.state, JobState::Completed, "B's attempt goes on");
    fed.cleanup().await;
}

/// B's token with exactly the scopes the forwarder needs (`problems:write`,
/// `submissions:write`, `console:read`) forwards a job; one without
/// `submissions:write` is refused at start naming it.
#[tokio::test(flavor = "multi_thread")]
async fn a_scoped_token_forwards_once_scopes_exist() {
    let fed = Federation::start(Setup {
        name: "fwd-scoped",
        backend: Backend::Sqlite,
        a_lease: 30,
        a_extra: &[],
        b_extra: &[],
        first_box: 3890,
    })
    .await
    .unwrap();
    let token = |scopes: &'static [&'static str]| {
        let url = format!("{}/api/tokens", fed.b.url);
        async move {
            let answer = reqwest::Client::new()
                .post(url)
                .bearer_auth(TOKEN)
                .json(&serde_json::json!({ "scopes": scopes }))
                .send()
                .await
                .unwrap();
            if answer.status() != 201 {
                return None;
            }
            let body: serde_json::Value = answer.json().await.unwrap();
            Some(body["token"].as_str().unwrap().to_string())
        }
    };
    let scoped = token(&["problems:write", "submissions:write", "console:read"])
        .await
        .expect("B grants the forwarder's scopes (CONTRACT §7)");
    let reader = token(&["problems:write", "console:read"]).await.unwrap();
    let mut refused = Forwarder::start(
        &fed.scene,
        &fed.a.url,
        &fed.key,
        &fed.b.url,
        &reader,
        "refused.log",
        &[],
    );
    let status = refused.wait_exit(Duration::from_secs(60));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(1),
        "{}",
        refused.log_text()
    );
    assert!(
        refused.log_text().contains("missing: submissions:write"),
        "{}",
        refused.log_text()
    );

    let forwarder = Forwarder::start(
        &fed.scene,
        &fed.a.url,
        &fed.key,
        &fed.b.url,
        &scoped,
        "forward.log",
        &[],
    );
    let a = fed.a.manager();
    let (dir, language, files) = example("addition", "accepted", "add.py");
    let (problem, _) = upload(&a, &dir).await;
    let job = a.submit(problem, &language, files).await.unwrap().job_id;
    let done = wait_job(&a, job, LONG, "final", is_final).await;
    assert_eq!(done.state, JobState::Completed, "{}", fed.logs());
    assert_eq!(done.result.unwrap().verdict, "Accepted");
    assert!(
        a.file(job, "details").await.is_ok(),
        "details read at B with console:read"
    );
    drop(forwarder);
    fed.cleanup().await;
}

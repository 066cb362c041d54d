//! Scaling out and the other kinds of work, end to end: two `serve` processes
//! on one PostgreSQL database with a daemon on each (when `DATABASE_URL_POSTGRES`
//! is set; skipped otherwise, unless `CI=true`), a Trial, and the second signal.
//!
//! Box ids: 3200 + 10·k for test k.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod e2e_common;

use e2e_common::postgres::{admin, postgres_url, with_database};

use std::time::{Duration, Instant};

use e2e_common::*;
use judge_runner::protocol::{JobState, TrialView};
use nix::sys::signal::Signal;

const LONG: Duration = Duration::from_secs(90);

/// Two Servers share one PostgreSQL database and one storage directory, a
/// daemon on each: a job whose daemon is killed on Server 1 is reaped and
/// completed through Server 2, once.
#[tokio::test(flavor = "multi_thread")]
async fn two_servers_on_postgres_hand_work_between_daemons() {
    let Some(url) = postgres_url() else {
        eprintln!("skipped: DATABASE_URL_POSTGRES is unset");
        return;
    };
    let name = format!("e2e_{}_{}", std::process::id(), rand::random::<u32>());
    admin(&url, format!("CREATE DATABASE {name}")).await;
    let scene = Scene::new("postgres");
    let opts = ServeOpts {
        database: with_database(&url, &name),
        storage: scene.path("storage"),
        lease_seconds: 3,
        listen: "127.0.0.1:0".to_string(),
    };
    let one = Serve::start(&opts, &scene.path("serve1.log"));
    let two = Serve::start(&opts, &scene.path("serve2.log"));
    let manager = one.manager();
    let (problem, _) = upload(&manager, &slow_problem(scene.dir.path(), 6)).await;
    let a = manager.create_runner("a").await.unwrap();
    let b = two.manager().create_runner("b").await.unwrap();
    let job = submit_echo(&manager, problem, 0.4).await;

    let mut first = scene.daemon(&one.url, &a.key, 3200, "a.log");
    wait_job(&manager, job, LONG, "progress on a", |v| {
        v.progress.as_ref().is_some_and(|p| p.done >= 1)
    })
    .await;
    first.signal(Signal::SIGKILL);
    first.wait_exit(Duration::from_secs(5)).unwrap();
    let _second = scene.daemon(&two.url, &b.key, 3201, "b.log");
    let done = wait_job(&two.manager(), job, LONG, "final", is_final).await;
    assert_eq!(done.state, JobState::Completed, "{}", scene.logs());
    assert_eq!(done.runner_id, Some(b.runner_id));
    assert_eq!(done.deliveries, 2);
    assert_eq!(
        manager.job(job).await.unwrap().result,
        done.result,
        "both Servers see one Result"
    );
    drop((one, two));
    admin(&url, format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
}

/// A Trial is claimed and run like a job, every test run (no stop at the first
/// failure), and reports timings instead of a verdict.
#[tokio::test(flavor = "multi_thread")]
async fn trial_reports_timings_of_every_test() {
    let scene = Scene::new("trial");
    let serve = scene.serve(30);
    let manager = serve.manager();
    let package = judge_runner::demo::examples::tar_gz(&slow_problem(scene.dir.path(), 4)).unwrap();
    // Echoes only "0": test 00 passes, the rest fail, and a trial still runs all four.
    let source = b"print(0)\n";
    let boundary = "e2e-trial-boundary";
    let mut body = Vec::new();
    let mut part = |headers: &str, bytes: &[u8]| {
        body.extend_from_slice(format!("--{boundary}\r\n{headers}\r\n\r\n").as_bytes());
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    };
    part(
        "Content-Disposition: form-data; name=\"package\"; filename=\"p.tar.gz\"\r\nContent-Type: application/gzip",
        &package,
    );
    part(
        "Content-Disposition: form-data; name=\"language\"",
        b"python3",
    );
    part(
        "Content-Disposition: form-data; name=\"file\"; filename=\"zero.py\"",
        source,
    );
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    let http = reqwest::Client::new();
    let created: serde_json::Value = http
        .post(format!("{}/api/trials", serve.url))
        .bearer_auth(TOKEN)
        .header(
            "Content-Type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let trial = created["trial_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("{created}"));
    let runner = manager.create_runner("t").await.unwrap();
    let daemon = scene.daemon(&serve.url, &runner.key, 3210, "a.log");
    let start = Instant::now();
    let view = loop {
        let view: TrialView = http
            .get(format!("{}/api/trials/{trial}", serve.url))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if view.state.is_final() {
            break view;
        }
        assert!(start.elapsed() < LONG, "trial unfinished: {view:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(view.state, JobState::Completed, "{}", scene.logs());
    assert_eq!(view.timings.len(), 4, "every test ran: {:?}", view.timings);
    assert!(
        view.timings
            .iter()
            .all(|t| t.status == "ok" && t.wall_seconds > 0.0),
        "{:?}",
        view.timings
    );
    assert!(
        daemon
            .metric("judge_runner_trials_done_total")
            .await
            .is_some_and(|n| n == 1.0)
    );
}

/// SIGTERM while the Server is down makes the daemon try to release for a
/// while; a second SIGTERM makes it exit at once, with status 0.
#[tokio::test(flavor = "multi_thread")]
async fn second_signal_exits_at_once() {
    let scene = Scene::new("twosignals");
    let mut serve = scene.serve(60);
    let manager = serve.manager();
    let (problem, _) = upload(&manager, &slow_problem(scene.dir.path(), 20)).await;
    let a = manager.create_runner("a").await.unwrap();
    let job = submit_echo(&manager, problem, 0.5).await;
    let mut daemon = scene.daemon(&serve.url, &a.key, 3220, "a.log");
    wait_job(&manager, job, LONG, "progress", |v| {
        v.progress.as_ref().is_some_and(|p| p.done >= 1)
    })
    .await;
    serve.kill();
    daemon.signal(Signal::SIGTERM);
    assert!(
        daemon.wait_exit(Duration::from_secs(2)).is_none(),
        "gave up on the release at once"
    );
    let second = Instant::now();
    daemon.signal(Signal::SIGTERM);
    let status = daemon
        .wait_exit(Duration::from_secs(8))
        .expect("exits after the second signal");
    assert!(
        second.elapsed() < Duration::from_secs(6),
        "took {:?}",
        second.elapsed()
    );
    assert!(status.success(), "{status:?}");
    assert!(
        daemon.log_text().contains("second signal"),
        "{}",
        daemon.log_text()
    );
    assert_eq!(
        processes_in(&scene.cgroup_parent),
        Vec::<i32>::new(),
        "stray sandboxed processes"
    );
}

/// Box ids past the judge's largest are refused before anything starts: a
/// `--first-box` out of range is a usage error (2), slots running past it a
/// start-up failure (1).
#[test]
fn box_ids_past_the_largest_are_refused() {
    let max = judge_runner::judge::MAX_BOX_ID;
    let run = |first: u32, slots: &str| {
        std::process::Command::new(BIN)
            .args(["daemon", "--server", "http://127.0.0.1:9", "--key", "k"])
            .args(["--first-box", &first.to_string(), "--slots", slots])
            .args(["--cache", "/nonexistent/never-created"])
            .output()
            .unwrap()
    };
    let past = run(max + 1, "1");
    assert_eq!(past.status.code(), Some(2), "{past:?}");
    let overflow = run(max, "2");
    assert_eq!(overflow.status.code(), Some(1), "{overflow:?}");
    assert!(
        String::from_utf8_lossy(&overflow.stderr).contains("box ids"),
        "{overflow:?}"
    );
}

/// `--slots 0` is a bad argument (exit 2), not silently one slot.
#[test]
fn zero_slots_is_a_usage_error() {
    let run = |command: &str, slots: &str| {
        let mut cmd = std::process::Command::new(BIN);
        cmd.arg(command);
        if command == "daemon" {
            cmd.args(["--server", "http://127.0.0.1:9", "--key", "k"])
                .args(["--cache", "/nonexistent/never-created"]);
        }
        cmd.args(["--slots", slots, "--help"]).output().unwrap()
    };
    for command in ["daemon", "demo"] {
        let zero = run(command, "0");
        assert_eq!(zero.status.code(), Some(2), "{command}: {zero:?}");
        let one = run(command, "1");
        assert_eq!(
            one.status.code(),
            Some(0),
            "{command} (twin, --help): {one:?}"
        );
    }
}

/// `JUDGE_LOG_FORMAT=json`: every log line of a real `serve` is one JSON object
/// with a level and a message; without it (the twin), plain text.
#[test]
fn json_logs_on_request() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::{Command, Stdio};
    for json in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--database"])
            .arg(format!(
                "sqlite://{}",
                dir.path().join("judge.db").display()
            ))
            .arg("--storage")
            .arg(dir.path().join("storage"))
            .env("JUDGE_MANAGER_TOKEN", "t")
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if json {
            cmd.env("JUDGE_LOG_FORMAT", "json");
        } else {
            cmd.env_remove("JUDGE_LOG_FORMAT");
        }
        let mut child = cmd.spawn().unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(first.starts_with("listening on "), "{first:?}");
        // Its first log line comes right after; SIGTERM before it would race
        // the signal handler's installation.
        let mut errors = BufReader::new(child.stderr.take().unwrap());
        let mut stderr = String::new();
        errors.read_line(&mut stderr).unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
            Signal::SIGTERM,
        )
        .unwrap();
        errors.read_to_string(&mut stderr).unwrap();
        child.wait().unwrap();
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(!lines.is_empty(), "serve logged nothing");
        for line in lines {
            let parsed = serde_json::from_str::<serde_json::Value>(line);
            if json {
                let v = parsed.unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                assert!(v["level"].is_string(), "{line}");
                assert!(v["fields"]["message"].is_string(), "{line}");
            } else {
                assert!(parsed.is_err(), "plain text expected: {line}");
                assert!(!line.contains('\u{1b}'), "no colours into a pipe: {line:?}");
            }
        }
    }
}

/// One daemon with two slots: two jobs are judged at once (both slots busy,
/// each in its own box), every job completes once, and the daemon leaves
/// nothing behind when it stops.
#[tokio::test(flavor = "multi_thread")]
async fn two_slots_judge_two_jobs_at_once() {
    let scene = Scene::new("twoslots");
    let serve = scene.serve(30);
    let manager = serve.manager();
    let (problem, _) = upload(&manager, &slow_problem(scene.dir.path(), 3)).await;
    let a = manager.create_runner("a").await.unwrap();
    let mut jobs = Vec::new();
    for _ in 0..4 {
        jobs.push(submit_echo(&manager, problem, 0.4).await);
    }
    let mut daemon = Daemon::start(
        &DaemonOpts {
            server: &serve.url,
            key: &a.key,
            first_box: 3230,
            slots: 2,
            cache: &scene.path("cache"),
            cgroup_parent: &scene.cgroup_parent,
            tmp: scene.dir.path(),
        },
        &scene.path("a.log"),
    );
    daemon.wait_started().await;
    assert_eq!(daemon.metric("judge_runner_slots").await, Some(2.0));
    let mut busiest = 0.0f64;
    let deadline = Instant::now() + LONG;
    loop {
        if let Some(busy) = daemon.metric("judge_runner_busy_slots").await {
            busiest = busiest.max(busy);
        }
        let mut done = 0;
        for &job in &jobs {
            if is_final(&manager.job(job).await.unwrap()) {
                done += 1;
            }
        }
        if done == jobs.len() {
            break;
        }
        assert!(Instant::now() < deadline, "not done: {}", scene.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(busiest, 2.0, "both slots never held work at once");
    for &job in &jobs {
        let view = manager.job(job).await.unwrap();
        assert_eq!(view.state, JobState::Completed, "{}", scene.logs());
        assert_eq!(view.deliveries, 1);
        assert_eq!(view.result.as_ref().unwrap().verdict, "Accepted");
    }
    assert_eq!(daemon.metric("judge_runner_claims_total").await, Some(4.0));
    daemon.signal(Signal::SIGTERM);
    let status = daemon
        .wait_exit(Duration::from_secs(20))
        .expect("stopped daemon exits");
    assert!(status.success(), "{status:?}");
    assert!(!scene.dir.path().join("judge-runner-work-3230").exists());
    assert_eq!(processes_in(&scene.cgroup_parent), Vec::<i32>::new());
}

/// SIGTERM while the daemon is still starting (self-test, toolchain probes):
/// it stops cleanly (exit 0, nothing claimed, no work directory left), not
/// killed by the signal's default action.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_during_start_up_stops_cleanly() {
    let scene = Scene::new("earlyterm");
    let serve = scene.serve(30);
    let manager = serve.manager();
    let (problem, _) = upload(&manager, &slow_problem(scene.dir.path(), 1)).await;
    let a = manager.create_runner("a").await.unwrap();
    let job = submit_echo(&manager, problem, 0.0).await;
    let mut daemon = scene.daemon(&serve.url, &a.key, 3240, "a.log");
    // Well inside start-up (it takes about a second here: a sandbox self-test per
    // box, a version probe per language), well after the handlers exist.
    tokio::time::sleep(Duration::from_millis(150)).await;
    daemon.signal(Signal::SIGTERM);
    let status = daemon
        .wait_exit(Duration::from_secs(30))
        .expect("the daemon exits");
    assert!(status.success(), "{status:?}: {}", daemon.log_text());
    assert!(!scene.dir.path().join("judge-runner-work-3240").exists());
    let view = manager.job(job).await.unwrap();
    assert_eq!(view.state, JobState::Queued, "{}", scene.logs());
    assert_eq!(
        view.deliveries, 0,
        "nothing claimed, or a claim made while stopping released (and given back)"
    );
}

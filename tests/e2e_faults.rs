//! The Runner when things go wrong, end to end: real `serve` and `daemon`
//! processes on loopback (SQLite), each test with its own box ids and cgroup
//! parent so they run in parallel.
//!
//! Box ids: 3100 + 10·k for test k (validators at +500 never reach the next test),
//! k < 10 (3200 on are e2e_scale's); 3400 for the late-Result test, 3450 for
//! the full-cache test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod e2e_common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use e2e_common::disk::{Tmpfs, fill};
use e2e_common::*;
use judge_runner::protocol::JobState;
use nix::sys::signal::Signal;

const LONG: Duration = Duration::from_secs(90);

/// kill -9 a daemon mid-job: the reaper requeues the job, a second daemon
/// completes it, exactly once; the killed daemon's sandboxes die with it.
#[tokio::test(flavor = "multi_thread")]
async fn killed_daemon_job_is_requeued_and_completed_once() {
    let scene = Scene::new("kill9");
    let serve = scene.serve(3);
    let manager = serve.manager();
    let (problem, _) = upload(&manager, &slow_problem(scene.dir.path(), 6)).await;
    let a = manager.create_runner("a").await.unwrap();
    let b = manager.create_runner("b").await.unwrap();
    let job = submit_echo(&manager, problem, 0.5).await;

    let mut first = scene.daemon(&serve.url, &a.key, 3100, "a.log");
    wait_job(&manager, job, LONG, "progress on runner a", |v| {
        v.state == JobState::Running && v.progress.as_ref().is_some_and(|p| p.done >= 1)
    })
    .await;
    first.signal(Signal::SIGKILL);
    first
        .wait_exit(Duration::from_secs(5))
        .expect("killed daemon exits");
    // PDEATHSIG: the box's processes die with their daemon.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_in(&scene.cgroup_parent).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        processes_in(&scene.cgroup_parent),
        Vec::<i32>::new(),
        "stray sandboxed processes"
    );

    // What the killed daemon was working on is still on disk; a daemon started
    // with the same box ids (a restart) removes it before its first job.
    let work = scene.dir.path().join("judge-runner-work-3100");
    let left: Vec<PathBuf> = std::fs::read_dir(&work)
        .expect("the killed daemon's work directory")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(!left.is_empty(), "the killed daemon left its work behind");

    let second = scene.daemon(&serve.url, &b.key, 3100, "b.log");
    let done = wait_job(&manager, job, LONG, "final", is_final).await;
    for path in &left {
        assert!(!path.exists(), "{} outlived a restart", path.display());
    }
    assert_eq!(done.state, JobState::Completed, "{}", scene.logs());
    assert_eq!(done.runner_id, Some(b.runner_id));
    assert_eq!(done.deliveries, 2, "one delivery each");
    assert_eq!(done.result.as_ref().unwrap().verdict, "Accepted");
    assert!(done.files.contains(&"details".to_string()) && done.files.contains(&"log".to_string()));
    let submission = manager.submission(done.submission_id).await.unwrap();
    assert_eq!(submission.jobs.len(), 1, "no second attempt was made");
    assert_eq!(submission.result.unwrap().evaluation_job_id, job);
    let mut second = second;
    second.signal(Signal::SIGTERM);
    second
        .wait_exit(Duration::from_secs(20))
        .expect("stopped daemon exits");
    assert!(
        !work.exists(),
        "a daemon that stops removes its work directory"
    );
}

/// SIGTERM mid-job: the daemon releases the job and exits 0; another daemon
/// completes it long before the 60 s lease could have expired.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_releases_the_job_to_another_daemon() {
    let scene = Scene::new("sigterm");
    let serve = scene.serve(60);
    let manager = serve.manager();
    let (problem, _) = upload(&manager, &slow_problem(scene.dir.path(), 8)).await;
    let a = manager.create_runner("a").await.unwrap();
    let b = manager.create_runner("b").await.unwrap();
    let job = submit_echo(&manager, problem, 0.5).await;

    let mut first = scene.daemon(&serve.url, &a.key, 3110, "a.log");
    wait_job(&manager, job, LONG, "running on a", |v| {
        v.state == JobState::Running && v.runner_id == Some(a.runner_id)
    })
    .await;
    let _second = scene.daemon(&serve.url, &b.key, 3111, "b.log");
    let stopped_at = Instant::now();
    first.signal(Signal::SIGTERM);
    let status = first
        .wait_exit(Duration::from_secs(15))
        .expect("daemon exits after SIGTERM");
    assert!(status.success(), "exit status {status:?}; {}", scene.logs());
    assert!(
        first.log_text().contains("released"),
        "{}",
        first.log_text()
    );

    let done = wait_job(&manager, job, LONG, "final", is_final).await;
    assert!(
        stopped_at.elapsed() < Duration::from_secs(40),
        "took {:?}: waited for the lease?",
        stopped_at.elapsed()
    );
    assert_eq!(done.state, JobState::Completed, "{}", scene.logs());
    assert_eq!(done.runner_id, Some(b.runner_id));
    assert_eq!(done.releases, 1);
    assert_eq!(done.result.unwrap().verdict, "Accepted");
    assert_eq!(processes_in(&scene.cgroup_parent), Vec::<i32>::new());
}

/// A daemon stopped (SIGSTOP) past its lease: another daemon completes the job;
/// when the first resumes, its late calls are refused with lease.lost and the
/// first Result stands.
#[tokio::test(flavor = "multi_thread")]
async fn stopped_daemon_late_result_is_refused() {
    let scene = Scene::new("sigstop");
    let serve = scene.serve(2);
    let manager = serve.manager();
    let (problem, _) = upload(&manager, &slow_problem(scene.dir.path(), 8)).await;
    let a = manager.create_runner("a").await.unwrap();
    let b = manager.create_runner("b").await.unwrap();
    let job = submit_echo(&manager, problem, 0.4).await;

    let first = scene.daemon(&serve.url, &a.key, 3120, "a.log");
    wait_job(&manager, job, LONG, "progress on runner a", |v| {
        v.runner_id == Some(a.runner_id) && v.progress.as_ref().is_some_and(|p| p.done >= 1)
    })
    .await;
    first.signal(Signal::SIGSTOP);
    let second = scene.daemon(&serve.url, &b.key, 3121, "b.log");
    let done = wait_job(&manager, job, LONG, "final", is_final).await;
    assert_eq!(done.state, JobState::Completed, "{}", scene.logs());
    assert_eq!(done.runner_id, Some(b.runner_id));
    let standing = done.result.clone().unwrap();
    drop(second);

    first.signal(Signal::SIGCONT);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if first
            .metric("judge_runner_leases_lost_total")
            .await
            .is_some_and(|n| n >= 1.0)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the resumed daemon never met lease.lost: {}",
            first.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let dropped = metric_value(
        &manager.metrics().await.unwrap(),
        "judge_stale_result_dropped_total",
    );
    assert!(
        dropped.is_some_and(|n| n >= 1.0),
        "server counted no stale call: {dropped:?}"
    );
    let after = manager.job(job).await.unwrap();
    assert_eq!(after.state, JobState::Completed);
    assert_eq!(after.runner_id, Some(b.runner_id));
    assert_eq!(after.result.unwrap(), standing, "the first Result stands");
    let text = first.metrics_text().await;
    assert!(
        !text.contains("judge_runner_jobs_done_total{"),
        "the resumed daemon had a Result accepted: {text}"
    );
}

/// A daemon that finished judging while its Server was away past the lease:
/// the Result it sends once the Server is back is refused with lease.lost, and
/// the daemon counts it in `judge_runner_leases_lost_total`, like a lease lost
/// while judging (deploy/docker/e2e.sh's partitioned Runner found it uncounted).
#[tokio::test(flavor = "multi_thread")]
async fn result_refused_after_the_lease_expired_is_counted_lost() {
    let scene = Scene::new("late-result");
    let mut opts = ServeOpts::sqlite(scene.dir.path(), 2);
    let mut serve = Serve::start(&opts, &scene.path("serve.log"));
    let manager = serve.manager();
    let (problem, _) = upload(&manager, &slow_problem(scene.dir.path(), 3)).await;
    let a = manager.create_runner("a").await.unwrap();
    let job = submit_echo(&manager, problem, 0.5).await;
    let daemon = scene.daemon(&serve.url, &a.key, 3400, "a.log");
    wait_job(&manager, job, LONG, "progress", |v| {
        v.progress.as_ref().is_some_and(|p| p.done >= 1)
    })
    .await;

    serve.kill();
    let killed = Instant::now();
    // Judged with the Server away: the lease keeper has stopped, the daemon is
    // retrying its Result.
    let deadline = Instant::now() + LONG;
    while !daemon
        .metric("judge_runner_judge_seconds_total")
        .await
        .is_some_and(|s| s > 0.0)
    {
        assert!(Instant::now() < deadline, "never judged: {}", scene.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // No renewal reached the Server after the kill: 2 s later the lease is over.
    tokio::time::sleep_until((killed + Duration::from_secs(3)).into()).await;
    opts.listen.clone_from(&serve.listen);
    let _serve = Serve::start(&opts, &scene.path("serve.log"));

    let deadline = Instant::now() + LONG;
    while !daemon
        .metric("judge_runner_leases_lost_total")
        .await
        .is_some_and(|n| n >= 1.0)
    {
        assert!(
            Instant::now() < deadline,
            "the refused Result was not counted: {}",
            scene.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The job went back to the queue and the same daemon judged it again.
    let done = wait_job(&manager, job, LONG, "final", is_final).await;
    assert_eq!(done.state, JobState::Completed, "{}", scene.logs());
    assert_eq!(done.deliveries, 2, "{}", scene.logs());
    assert_eq!(done.result.unwrap().verdict, "Accepted");
    assert_eq!(
        daemon.metric("judge_runner_leases_lost_total").await,
        Some(1.0),
        "counted once"
    );
}

/// The Server goes away for 5 s while a job is judged, and comes back on the
/// same address and database: the job still completes, with no re-delivery.
#[tokio::test(flavor = "multi_thread")]
async fn job_completes_across_a_server_restart() {
    let scene = Scene::new("restart");
    let mut opts = ServeOpts::sqlite(scene.dir.path(), 30);
    let mut serve = Serve::start(&opts, &scene.path("serve.log"));
    let manager = serve.manager();
    let (problem, _) = upload(&manager, &slow_problem(scene.dir.path(), 8)).await;
    let a = manager.create_runner("a").await.unwrap();
    let job = submit_echo(&manager, problem, 0.4).await;
    let daemon = scene.daemon(&serve.url, &a.key, 3130, "a.log");
    wait_job(&manager, job, LONG, "progress", |v| {
        v.progress.as_ref().is_some_and(|p| p.done >= 1)
    })
    .await;

    serve.kill();
    tokio::time::sleep(Duration::from_secs(5)).await;
    opts.listen.clone_from(&serve.listen);
    let _serve = Serve::start(&opts, &scene.path("serve.log"));

    let done = wait_job(&manager, job, LONG, "final", is_final).await;
    assert_eq!(done.state, JobState::Completed, "{}", scene.logs());
    assert_eq!(done.deliveries, 1, "judged once, not re-delivered");
    assert_eq!(done.result.unwrap().verdict, "Accepted");
    assert!(done.files.contains(&"details".to_string()));
    assert!(
        daemon
            .metric("judge_runner_server_unreachable_total")
            .await
            .is_some_and(|n| n >= 1.0)
    );
}

/// Package bytes corrupted on the Server: the job fails with
/// package.checksum_mismatch, not retried, and has no Result.
#[tokio::test(flavor = "multi_thread")]
async fn corrupted_package_fails_the_job_without_a_result() {
    let scene = Scene::new("corrupt");
    let serve = scene.serve(30);
    let manager = serve.manager();
    let (problem, sha) = upload(&manager, &slow_problem(scene.dir.path(), 2)).await;
    let stored = scene.path(&format!("storage/packages/{sha}.tar.gz"));
    let mut bytes = std::fs::read(&stored).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&stored, &bytes).unwrap();

    let a = manager.create_runner("a").await.unwrap();
    let job = submit_echo(&manager, problem, 0.0).await;
    let daemon = scene.daemon(&serve.url, &a.key, 3140, "a.log");
    let done = wait_job(&manager, job, LONG, "final", is_final).await;
    assert_eq!(done.state, JobState::Failed, "{}", scene.logs());
    assert_eq!(
        done.failure_reason.as_deref(),
        Some("package.checksum_mismatch")
    );
    assert!(done.result.is_none());
    assert!(done.files.is_empty());
    assert_eq!(done.deliveries, 1, "not retryable");
    let text = daemon.metrics_text().await;
    assert!(
        text.contains("judge_runner_job_failures_total{reason=\"package.checksum_mismatch\"} 1"),
        "{text}"
    );
}

/// A rejudge while the first attempt runs: the new attempt waits (a second
/// daemon sits idle) and runs after the old one finishes; both keep their Result.
#[tokio::test(flavor = "multi_thread")]
async fn rejudge_while_running_waits_for_the_running_attempt() {
    let scene = Scene::new("rejudge");
    let serve = scene.serve(30);
    let manager = serve.manager();
    let (problem, _) = upload(&manager, &slow_problem(scene.dir.path(), 6)).await;
    let a = manager.create_runner("a").await.unwrap();
    let b = manager.create_runner("b").await.unwrap();
    let first = manager
        .submit(problem, "python3", slow_echo(0.4))
        .await
        .unwrap();
    let da = scene.daemon(&serve.url, &a.key, 3150, "a.log");
    let db = scene.daemon(&serve.url, &b.key, 3151, "b.log");
    // Both up: the second attempt must wait although a daemon is idle.
    da.wait_started().await;
    db.wait_started().await;
    wait_job(&manager, first.job_id, LONG, "running", |v| {
        v.state == JobState::Running
    })
    .await;
    let second = manager.rejudge(first.submission_id).await.unwrap();
    assert_eq!(second.attempt, 2);

    let start = Instant::now();
    let mut second_waited = false;
    loop {
        let (one, two) = (
            manager.job(first.job_id).await.unwrap(),
            manager.job(second.job_id).await.unwrap(),
        );
        assert!(
            !(one.state == JobState::Running && two.state == JobState::Running),
            "two attempts of one submission ran at once"
        );
        second_waited |= one.state == JobState::Running && two.state == JobState::Queued;
        if one.state.is_final() && two.state.is_final() {
            assert_eq!(one.state, JobState::Completed, "{}", scene.logs());
            assert_eq!(two.state, JobState::Completed);
            assert!(one.result.is_some() && two.result.is_some());
            break;
        }
        assert!(
            start.elapsed() < LONG,
            "attempts unfinished: {one:?} {two:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(second_waited, "the new attempt was never seen waiting");
    let submission = manager.submission(first.submission_id).await.unwrap();
    assert_eq!(
        submission.result.unwrap().evaluation_job_id,
        second.job_id,
        "the latest Result is the rejudge's"
    );
}

/// Two daemons sharing one cache directory, both judging jobs of one package
/// at once: the package is downloaded once.
#[tokio::test(flavor = "multi_thread")]
async fn two_daemons_sharing_a_cache_download_once() {
    let scene = Scene::new("sharedcache");
    let serve = scene.serve(30);
    let manager = serve.manager();
    let (problem, sha) = upload(&manager, &slow_problem(scene.dir.path(), 3)).await;
    let a = manager.create_runner("a").await.unwrap();
    let b = manager.create_runner("b").await.unwrap();
    let cache = scene.path("shared-cache");
    let da = scene.daemon_with_cache(&serve.url, &a.key, 3160, "a.log", &cache);
    let db = scene.daemon_with_cache(&serve.url, &b.key, 3161, "b.log", &cache);
    // Both started (self-test, probes) and asking before there is work, so
    // neither can take it all while the other is still starting.
    da.wait_started().await;
    db.wait_started().await;
    let mut jobs = Vec::new();
    for _ in 0..4 {
        jobs.push(submit_echo(&manager, problem, 0.3).await);
    }
    let mut runners = Vec::new();
    for job in jobs {
        let done = wait_job(&manager, job, LONG, "final", is_final).await;
        assert_eq!(done.state, JobState::Completed, "{}", scene.logs());
        runners.push(done.runner_id.unwrap());
    }
    assert!(
        runners.contains(&a.runner_id) && runners.contains(&b.runner_id),
        "one daemon did all the work: {runners:?}"
    );
    let downloads = [da.log_text(), db.log_text()]
        .iter()
        .map(|log| log.lines().filter(|l| l.contains("package cached")).count())
        .sum::<usize>();
    assert_eq!(downloads, 1, "{}", scene.logs());
    assert!(cache.join(&sha).is_dir());
}

/// A job cancelled by a manager while its test runs: the daemon's next lease
/// call is answered lease.lost, and the running sandbox is gone within a
/// renewal period (1 s with a 3 s lease) plus one second; the slot then goes on
/// with the next job.
#[tokio::test(flavor = "multi_thread")]
async fn lost_lease_stops_the_running_sandbox_promptly() {
    let scene = Scene::new("cancel");
    let serve = scene.serve(3);
    let manager = serve.manager();
    let (slow, _) = upload(&manager, &slow_problem_with(scene.dir.path(), 1, 20)).await;
    let a = manager.create_runner("a").await.unwrap();
    let job = submit_echo(&manager, slow, 30.0).await;
    let daemon = scene.daemon(&serve.url, &a.key, 3170, "a.log");
    wait_job(&manager, job, LONG, "running", |v| {
        v.state == JobState::Running
    })
    .await;
    let deadline = Instant::now() + LONG;
    while processes_in(&scene.cgroup_parent).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the test never started: {}",
            scene.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    manager.cancel(job).await.unwrap();
    let cancelled = Instant::now();
    while !processes_in(&scene.cgroup_parent).is_empty() {
        assert!(
            cancelled.elapsed() < Duration::from_millis(2500),
            "sandbox still running {:?} after the cancel: {}",
            cancelled.elapsed(),
            daemon.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(manager.job(job).await.unwrap().state, JobState::Cancelled);
    let quick = submit_echo(&manager, slow, 0.0).await;
    let done = wait_job(&manager, quick, LONG, "final", is_final).await;
    assert_eq!(done.state, JobState::Completed, "{}", scene.logs());
    assert_eq!(
        daemon.metric("judge_runner_leases_lost_total").await,
        Some(1.0)
    );
}

/// The shortest lease the Server grants (1 s) outlives a 3 s test with no progress
/// in between: the keeper renews every third of it, ahead of `lease_expires_at`
/// (an expired lease is lease.lost at once, swept or not).
#[tokio::test(flavor = "multi_thread")]
async fn one_second_lease_outlives_a_slow_test() {
    let scene = Scene::new("short-lease");
    let serve = scene.serve(1);
    let manager = serve.manager();
    let (slow, _) = upload(&manager, &slow_problem_with(scene.dir.path(), 1, 10)).await;
    let a = manager.create_runner("a").await.unwrap();
    let job = submit_echo(&manager, slow, 3.0).await;
    let daemon = scene.daemon(&serve.url, &a.key, 3180, "a.log");
    let done = wait_job(&manager, job, LONG, "final", is_final).await;
    assert_eq!(done.state, JobState::Completed, "{}", scene.logs());
    assert_eq!(done.deliveries, 1, "never lost, never re-delivered");
    assert_eq!(done.result.unwrap().verdict, "Accepted");
    assert_eq!(
        daemon.metric("judge_runner_leases_lost_total").await,
        Some(0.0)
    );
}

/// A sandbox that cannot work on the host: the daemon refuses to start (its
/// self-test), and once started, a slot whose jobs fail in the sandbox three
/// times in a row stops claiming for a while instead of burning every job's
/// deliveries; when the sandbox works again the job completes.
#[tokio::test(flavor = "multi_thread")]
async fn broken_sandbox_refused_at_start_and_pauses_claims() {
    use judge_runner::sandbox::SandboxSlot;
    let scene = Scene::new("broken");
    let serve = scene.serve(30);
    let manager = serve.manager();
    let (problem, _) = upload(&manager, &slow_problem(scene.dir.path(), 2)).await;
    let a = manager.create_runner("a").await.unwrap();

    // Box 3190 held by another process (here: this test) — the sandbox refuses
    // a second slot of a box id, so the daemon's self-test fails.
    let held = SandboxSlot::new(3190, &scene.cgroup_parent, None).unwrap();
    let mut refused = scene.daemon(&serve.url, &a.key, 3190, "refused.log");
    let status = refused
        .wait_exit(Duration::from_secs(30))
        .expect("a daemon whose sandbox fails its self-test exits");
    assert_eq!(status.code(), Some(1), "{}", refused.log_text());
    assert!(
        refused
            .log_text()
            .contains("the sandbox does not work on this host"),
        "{}",
        refused.log_text()
    );
    held.close().unwrap();

    // The twin: the box is free, the daemon starts (metrics answer once it runs).
    let daemon = scene.daemon(&serve.url, &a.key, 3190, "a.log");
    daemon.wait_started().await;
    // Now the sandbox breaks under it (the box taken while the slot is idle).
    let held = SandboxSlot::new(3190, &scene.cgroup_parent, None).unwrap();
    let job = submit_echo(&manager, problem, 0.0).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while daemon
        .metric("judge_runner_slot_pauses_total")
        .await
        .is_none_or(|n| n < 1.0)
    {
        assert!(
            Instant::now() < deadline,
            "slot never paused: {}",
            scene.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let view = manager.job(job).await.unwrap();
    assert_eq!(view.state, JobState::Queued, "{}", scene.logs());
    assert_eq!(view.deliveries, 3, "three sandbox failures, then no claim");
    assert_eq!(
        daemon.metric("judge_runner_slot_pauses_total").await,
        Some(1.0)
    );

    held.close().unwrap();
    let done = wait_job(&manager, job, LONG, "final after the pause", is_final).await;
    assert_eq!(done.state, JobState::Completed, "{}", scene.logs());
    assert_eq!(done.result.as_ref().unwrap().verdict, "Accepted");
    assert_eq!(done.deliveries, 4);
}

/// The package cache's file system full when a job's package must be fetched:
/// the host's fault, not the job's. The daemon hands the job back (a release:
/// the first three give the delivery back) and pauses claiming, growing its
/// pause while the disk stays full, so no delivery goes on the full disk and the
/// job is not Failed; once there is room it is judged. (Before, the fetch failed
/// retryably at once and the slot claimed again: the job's deliveries were all
/// spent within a second — found by the chaos harness.)
#[tokio::test(flavor = "multi_thread")]
async fn full_cache_disk_hands_the_job_back_without_spending_deliveries() {
    let scene = Scene::new("fullcache");
    let serve = scene.serve(30);
    let manager = serve.manager();
    let (problem, _) = upload(&manager, &slow_problem(scene.dir.path(), 2)).await;
    let a = manager.create_runner("a").await.unwrap();
    let disk = Tmpfs::mount(&scene.path("small-cache"), "4m");
    let cache = disk.0.join("cache");
    let daemon = scene.daemon_with_cache(&serve.url, &a.key, 3450, "a.log", &cache);
    daemon.wait_started().await;
    let filler = disk.0.join("filler");
    fill(&filler);

    let job = submit_echo(&manager, problem, 0.0).await;
    let deadline = Instant::now() + LONG;
    let view = loop {
        let view = manager.job(job).await.unwrap();
        assert!(
            !matches!(view.state, JobState::Failed | JobState::Completed),
            "{:?} while the cache was full: {}",
            view.state,
            scene.logs()
        );
        if view.releases >= 3 {
            break view;
        }
        assert!(
            Instant::now() < deadline,
            "never handed back 3 times: {}",
            scene.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    std::fs::remove_file(&filler).unwrap();
    assert!(view.failure_reason.is_none());
    assert!(view.deliveries <= 1, "{view:?}");
    assert!(
        daemon.log_text().contains("the package cache is full"),
        "{}",
        daemon.log_text()
    );
    assert!(
        daemon
            .metric("judge_runner_slot_pauses_total")
            .await
            .is_some_and(|n| n >= 3.0)
    );

    let done = wait_job(&manager, job, LONG, "final once there is room", is_final).await;
    assert_eq!(done.state, JobState::Completed, "{}", scene.logs());
    assert_eq!(done.result.as_ref().unwrap().verdict, "Accepted");
    assert_eq!(done.releases, 3);
    // The three hand-backs gave their deliveries back; at most one more (claimed
    // in the moment before the disk had room again) was spent.
    assert!(done.deliveries <= 2, "{done:?}");
    drop(daemon);
}

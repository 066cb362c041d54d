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
use std::time::Duration;

use e2e_common::*;
use nix::sys::signal::Signal;

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

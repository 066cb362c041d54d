//! Core behaviour of `sandbox::run`: endings, limits, measurements.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod sandbox_common;

use std::time::Duration;

use judge_runner::sandbox::{Status, Stdio};
use sandbox_common::{Ctx, slow};

#[test]
fn ok_run() {
    let cx = Ctx::new("ok");
    let r = cx.run(&cx.plan("/bin/true"));
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!((r.exit_code, r.signal), (Some(0), None));
    assert!(r.wall_seconds > 0.0 && r.wall_seconds < 5.0 * slow());
}

#[test]
fn exit_code_reported() {
    let cx = Ctx::new("exit");
    let r = cx.run(&cx.plan("/bin/sh").args(["-c", "exit 7"]));
    assert_eq!(r.status, Status::NonzeroExit);
    assert_eq!((r.exit_code, r.signal), (Some(7), None));
}

#[test]
fn signal_reported() {
    let cx = Ctx::new("signal");
    let r = cx.run(&cx.plan("/bin/sh").args(["-c", "kill -SEGV $$"]));
    assert_eq!(r.status, Status::Signaled);
    assert_eq!((r.exit_code, r.signal), (None, Some(11)));
}

#[test]
fn cpu_time_limit_busy_loop_denied() {
    let cx = Ctx::new("cpu_denied");
    let plan = cx
        .plan("/bin/sh")
        .args(["-c", "while :; do :; done"])
        .cpu_time(Duration::from_millis(300));
    let r = cx.run(&plan);
    assert_eq!(r.status, Status::TimeLimit, "{r:?}");
    assert!(
        r.cpu_seconds >= 0.3 && r.cpu_seconds < 0.3 + 0.1 * slow(),
        "{r:?}"
    );
}

#[test]
fn cpu_time_limit_short_loop_allowed() {
    let cx = Ctx::new("cpu_allowed");
    let plan = cx
        .plan("/bin/sh")
        .args(["-c", "i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done"])
        .cpu_time(Duration::from_secs(5));
    let r = cx.run(&plan);
    assert_eq!(r.status, Status::Ok, "{r:?}");
}

#[test]
fn wall_time_limit_sleep_denied() {
    let cx = Ctx::new("wall_denied");
    let r = cx.run(
        &cx.plan("/bin/sleep")
            .arg("5")
            .wall_time(Duration::from_millis(300)),
    );
    assert_eq!(r.status, Status::WallTimeLimit, "{r:?}");
    assert!(
        r.wall_seconds >= 0.3 && r.wall_seconds < 0.3 + 0.5 * slow(),
        "{r:?}"
    );
    assert!(r.cpu_seconds < 0.1 * slow());
}

#[test]
fn wall_time_limit_sleep_allowed() {
    let cx = Ctx::new("wall_allowed");
    let r = cx.run(
        &cx.plan("/bin/sleep")
            .arg("0.1")
            .wall_time(Duration::from_secs(3)),
    );
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(r.wall_seconds >= 0.1);
}

#[test]
fn stdin_and_stdout_files() {
    let cx = Ctx::new("stdio");
    let input = cx
        .dir
        .path()
        .parent()
        .unwrap()
        .join(format!("sbx-in-{}", std::process::id()));
    std::fs::write(&input, "hello sandbox\n").unwrap();
    let out = tempfile::NamedTempFile::new().unwrap();
    let plan = cx
        .plan("/usr/bin/tr")
        .args(["a-z", "A-Z"])
        .stdin(Stdio::File(input.clone()))
        .stdout(Stdio::File(out.path().to_path_buf()));
    let r = cx.run(&plan);
    std::fs::remove_file(&input).unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(out.path()).unwrap(),
        "HELLO SANDBOX\n"
    );
}

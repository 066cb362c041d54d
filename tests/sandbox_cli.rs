//! `judge-runner sandbox` as a command: report JSON, exit statuses, non-root,
//! bad arguments.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod sandbox_common;

use std::process::{Command, Output};

use sandbox_common::{Ctx, ReachableCopy};

fn judge_runner(cx: &Ctx, args: &[&str]) -> Command {
    sandbox_command(Command::new(env!("CARGO_BIN_EXE_judge-runner")), cx, args)
}

/// `c` with `sandbox`, the test's cgroup parent and box id, then `args`.
fn sandbox_command(mut c: Command, cx: &Ctx, args: &[&str]) -> Command {
    c.args([
        "sandbox",
        "--cgroup-parent",
        &cx.parent,
        "--box-id",
        &cx.box_id.to_string(),
    ])
    .args(args);
    c
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn report_on_stdout_has_the_contract_fields() {
    let cx = Ctx::new("cli_report");
    let out = judge_runner(&cx, &["--report", "-", "--", "/bin/sh", "-c", "exit 3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "a report was produced");
    let v = json(&out);
    let mut keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "cpu_seconds",
            "exit_code",
            "memory_bytes",
            "message",
            "signal",
            "status",
            "wall_seconds"
        ]
    );
    assert_eq!(v["status"], "nonzero_exit");
    assert_eq!(v["exit_code"], 3);
    assert!(v["signal"].is_null());
}

#[test]
fn report_to_a_file_and_stdio_files() {
    let cx = Ctx::new("cli_files");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("in"), "abc\n").unwrap();
    let mut c = judge_runner(
        &cx,
        &[
            "--stdin",
            "in",
            "--stdout",
            "out",
            "--report",
            "report.json",
            "--env",
            "X=1",
            "--",
            "/bin/sh",
            "-c",
            "cat; echo $X",
        ],
    );
    let out = c.current_dir(dir.path()).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(v["status"], "ok");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out")).unwrap(),
        "abc\n1\n"
    );
}

#[test]
fn human_summary_on_stderr_without_report() {
    let cx = Ctx::new("cli_summary");
    let out = judge_runner(&cx, &["--", "/bin/true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("status ok"));
}

#[test]
fn program_that_cannot_run_is_a_sandbox_error_exit_1() {
    let cx = Ctx::new("cli_noexec");
    let out = judge_runner(&cx, &["--report", "-", "--", "no-such-program-xyz"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["status"], "sandbox_error");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("no-such-program-xyz"),
        "{v}"
    );
}

#[test]
fn non_root_refused_with_exit_1() {
    let cx = Ctx::new("cli_nonroot");
    let bin = ReachableCopy::of_judge_runner();
    let as_other = bin.command_as_other_uid("judge-runner");
    let out = sandbox_command(as_other, &cx, &["--", "/bin/true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("root"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn root_allowed_with_exit_0() {
    let cx = Ctx::new("cli_root");
    let out = judge_runner(&cx, &["--", "/bin/true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn bad_arguments_exit_2() {
    let cx = Ctx::new("cli_badargs");
    for args in [
        &["--memory", "lots", "--", "/bin/true"][..],
        &["--time", "-1", "--", "/bin/true"],
        &["--bind", "nocolon", "--", "/bin/true"],
        &["--no-such-flag", "--", "/bin/true"],
        &[],
        &["--cgroup-parent", "../escape", "--", "/bin/true"],
    ] {
        let out = judge_runner(&cx, args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

//! `judge-runner judge` as a user runs it: exit statuses, report, details and log
//! files, and the infrastructure failures that must give exit 1 and no verdict.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod judge_common;

use std::path::{Path, PathBuf};
use std::process::Output;

const EXE: &str = env!("CARGO_BIN_EXE_judge-runner");

/// Runs the CLI on its own box and cgroup parent (removed afterwards).
fn cli(box_id: u32, args: &[&str]) -> Output {
    let parent = format!("judge-runner-test-{}-cli{box_id}", std::process::id());
    let out = std::process::Command::new(EXE)
        .arg("judge")
        .args(["--box-id", &box_id.to_string(), "--cgroup-parent", &parent])
        .args(args)
        .output()
        .unwrap();
    let _ = judge_runner::sandbox::remove_parent(&parent);
    out
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn example(name: &str) -> String {
    judge_common::examples_dir()
        .join(name)
        .display()
        .to_string()
}

fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn verdict_report_details_and_log() {
    let tmp = tempfile::tempdir().unwrap();
    let (report, details, log) = (
        tmp.path().join("r.json"),
        tmp.path().join("d.json"),
        tmp.path().join("c.log"),
    );
    let sub = format!("{}/submissions/wrong_answer/minus.cpp", example("addition"));
    let out = cli(
        410,
        &[
            "--problem",
            &example("addition"),
            "--report",
            report.to_str().unwrap(),
            "--details",
            details.to_str().unwrap(),
            "--log",
            log.to_str().unwrap(),
            &sub,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let keys: Vec<&String> = r.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "extra",
            "max_score",
            "props",
            "runner_version",
            "score",
            "verdict"
        ]
    );
    assert_eq!(r["verdict"], "Wrong Answer");
    assert_eq!(
        (r["score"].as_f64(), r["max_score"].as_f64()),
        (Some(0.0), Some(1.0))
    );
    assert!(r["extra"].is_null() && r["props"].is_null());
    assert!(r["runner_version"].as_str().unwrap().starts_with("0.1.0+"));
    let d: serde_json::Value = serde_json::from_slice(&std::fs::read(&details).unwrap()).unwrap();
    let tests = d.as_array().unwrap();
    assert_eq!(tests.len(), 1, "pass-fail stops at the failing sample");
    assert_eq!(tests[0]["name"], "sample/1");
    assert_eq!(tests[0]["group"], "sample");
    assert_eq!(tests[0]["verdict"], "Wrong Answer");
    assert!(log.exists(), "the log is always written");
    // Progress: one line per test, then the summary.
    let err = stderr(&out);
    assert!(err.contains("sample/1") && err.contains("WA"), "{err}");
    assert!(err.contains("Wrong Answer: score 0 of 1"), "{err}");
}

#[test]
fn report_to_stdout_and_language_from_extension() {
    let sub = format!("{}/submissions/accepted/area.py", example("circle"));
    let out = cli(
        411,
        &["--problem", &example("circle"), "--report", "-", &sub],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["verdict"], "Accepted");
    assert_eq!(r["score"], 1.0);
}

/// `-` means stdout for `--details` and `--log` too, as for `--report`: never a
/// file named `-`.
#[test]
fn details_and_log_to_stdout() {
    let tmp = tempfile::tempdir().unwrap();
    let sub = format!("{}/submissions/compile_error/syntax.c", example("addition"));
    let out = std::process::Command::new(EXE)
        .current_dir(tmp.path())
        .arg("judge")
        .args(["--box-id", "418", "--cgroup-parent"])
        .arg(format!("judge-runner-test-{}-cli418", std::process::id()))
        .args(["--problem", &example("addition"), "--log", "-", &sub])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("error"),
        "the compiler output on stdout: {text}"
    );
    let sub = format!("{}/submissions/accepted/area.py", example("circle"));
    let out = std::process::Command::new(EXE)
        .current_dir(tmp.path())
        .arg("judge")
        .args(["--box-id", "418", "--cgroup-parent"])
        .arg(format!("judge-runner-test-{}-cli418", std::process::id()))
        .args(["--problem", &example("circle"), "--details", "-", &sub])
        .output()
        .unwrap();
    let _ = judge_runner::sandbox::remove_parent(&format!(
        "judge-runner-test-{}-cli418",
        std::process::id()
    ));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let details: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!details.as_array().unwrap().is_empty());
    assert_eq!(details[0]["verdict"], "Accepted");
    assert!(!tmp.path().join("-").exists(), "no file named -");
}

#[test]
fn compilation_error_has_its_log() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("c.log");
    let sub = format!("{}/submissions/compile_error/syntax.c", example("addition"));
    let out = cli(
        412,
        &[
            "--problem",
            &example("addition"),
            "--report",
            "-",
            "--log",
            log.to_str().unwrap(),
            &sub,
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["verdict"], "Compilation Error");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("error"), "{text}");
}

#[test]
fn unknown_language_is_a_usage_error() {
    let sub = format!("{}/submissions/accepted/add.c", example("addition"));
    let out = cli(
        413,
        &[
            "--problem",
            &example("addition"),
            "--language",
            "cobol",
            "--report",
            "-",
            &sub,
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown language"),
        "{}",
        stderr(&out)
    );
    assert!(out.stdout.is_empty());
}

/// The largest box id runs, validator box (N+500, uid 60000+N+500) included;
/// one more would leave the validator no uid, and is refused as an argument.
#[test]
fn box_id_bound_allowed() {
    let sub = format!("{}/submissions/accepted/n_first.py", example("twosum"));
    let out = cli(
        judge_runner::judge::MAX_BOX_ID,
        &["--problem", &example("twosum"), "--report", "-", &sub],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["verdict"], "Accepted");
}

#[test]
fn box_id_bound_denied() {
    let sub = format!("{}/submissions/accepted/n_first.py", example("twosum"));
    let out = cli(
        judge_runner::judge::MAX_BOX_ID + 1,
        &["--problem", &example("twosum"), "--report", "-", &sub],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--box-id"), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
}

#[test]
fn broken_package_exits_1_without_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "problem.yaml", "name: [unclosed\n");
    write(tmp.path(), "data/secret/1.in", "1\n");
    write(tmp.path(), "data/secret/1.ans", "1\n");
    let sub = write(tmp.path(), "a.py", "print(1)\n");
    let out = cli(
        414,
        &[
            "--problem",
            tmp.path().to_str().unwrap(),
            "--report",
            "-",
            sub.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("package.invalid"), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "no report");
}

#[test]
fn missing_toolchain_exits_2_naming_the_language_and_the_command() {
    let tmp = tempfile::tempdir().unwrap();
    let table = write(
        tmp.path(),
        "languages.yaml",
        "ghost:\n  name: Ghost\n  extensions: [gh]\n  run: ghost {mainfile}\n  version: ghost-lang-not-installed --version\n",
    );
    let sub = write(tmp.path(), "a.gh", "boo\n");
    let out = cli(
        415,
        &[
            "--problem",
            &example("addition"),
            "--languages",
            table.to_str().unwrap(),
            "--report",
            "-",
            sub.to_str().unwrap(),
        ],
    );
    // Issue 24: refused as bad arguments, never a verdict or an
    // infrastructure failure.
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    for said in [
        "language.unavailable",
        "\"ghost\"",
        "ghost-lang-not-installed",
    ] {
        assert!(stderr(&out).contains(said), "{said}: {}", stderr(&out));
    }
    assert!(out.stdout.is_empty());
}

#[test]
fn validator_crash_exits_1_without_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path();
    write(p, "problem.yaml", "name: Crash\nvalidation: custom\n");
    write(p, "data/secret/1.in", "1\n");
    write(p, "data/secret/1.ans", "1\n");
    write(
        p,
        "output_validators/crash/crash.py",
        "import sys\nsys.stdin.read()\nraise RuntimeError('validator bug')\n",
    );
    let sub = write(p, "a.py", "print(1)\n");
    let out = cli(
        416,
        &[
            "--problem",
            p.to_str().unwrap(),
            "--report",
            "-",
            sub.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("validator.failed") && err.contains("validator bug"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no report");
}

#[test]
fn validator_that_does_not_compile_is_a_bad_package() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path();
    write(
        p,
        "problem.yaml",
        "name: Broken validator\nvalidation: custom\n",
    );
    write(p, "data/secret/1.in", "1\n");
    write(p, "data/secret/1.ans", "1\n");
    write(p, "output_validators/v/v.c", "int main(void) { return }\n");
    let sub = write(p, "a.py", "print(1)\n");
    let out = cli(
        417,
        &[
            "--problem",
            p.to_str().unwrap(),
            "--report",
            "-",
            sub.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("package.invalid"), "{}", stderr(&out));
}

//! `judge-runner check` (CONTRACT §3b) and the sandbox's host checks behind it,
//! as root on this host's cgroups (v1 here, v2 in the CI guest).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod sandbox_common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use judge_runner::sandbox::{self, host};
use sandbox_common::{Ctx, ReachableCopy};

/// A language table whose one language's "toolchain" every host has (`uname`),
/// beside one that no host has: the check must pass on the busybox guest too.
const LANGUAGES: &str = "\
shell:
  name: POSIX shell
  extensions: [sh]
  run: sh {mainfile}
  version: uname -s
missing:
  name: Missing
  extensions: [missing]
  run: \"{binary}\"
  version: no-such-compiler-judge-runner-test --version
broken:
  name: Broken
  extensions: [broken]
  run: \"{binary}\"
  version: false
";

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn check(cx: &Ctx, languages: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_judge-runner"))
        .args(["check", "--cgroup-parent", &cx.parent])
        .args(["--box-id", &cx.box_id.to_string(), "--languages", languages])
        .args(extra)
        // Box locks of this test only, whatever else runs on the host.
        .env(judge_runner::sandbox::BOX_LOCK_DIR_ENV, cx.path("locks"))
        .output()
        .unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn status_of<'a>(v: &'a serde_json::Value, name: &str) -> &'a str {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {v}"))["status"]
        .as_str()
        .unwrap()
}

#[test]
fn the_sandbox_checks_pass_here_and_name_the_cgroup_version() {
    let cx = Ctx::new("check_lib");
    let checks = host::checks(&cx.parent, cx.box_id);
    let failed: Vec<_> = checks
        .iter()
        .filter(|c| c.status == host::CheckStatus::Fail)
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    for name in [
        "root",
        "kernel",
        "namespaces",
        "seccomp",
        "cgroup",
        "memory-peak",
        "box-uids",
        "sandbox-run",
    ] {
        assert!(
            checks.iter().any(|c| c.name == name),
            "no {name}: {checks:?}"
        );
    }
    let version = sandbox::cgroup_version().unwrap();
    let cgroup = checks.iter().find(|c| c.name == "cgroup").unwrap();
    assert!(cgroup.detail.starts_with(version), "{cgroup:?}");
    // v2 hosts also say whether runs start inside their cgroup.
    assert_eq!(
        checks.iter().any(|c| c.name == "clone-into-cgroup"),
        version == "v2"
    );
}

#[test]
fn the_overhead_is_two_medians_and_their_ratio() {
    let cx = Ctx::new("check_overhead");
    let o = host::measure_overhead(15, &cx.parent, cx.box_id).unwrap();
    assert_eq!(o.runs, 15);
    assert!(o.plain_ms > 0.0 && o.slot_ms > 0.0, "{o:?}");
    assert!((o.ratio - o.slot_ms / o.plain_ms).abs() < 1e-9, "{o:?}");
}

#[test]
fn json_report_has_the_contract_shape_and_exit_0() {
    let cx = Ctx::new("check_json");
    let langs = write(cx.dir.path(), "langs.yaml", LANGUAGES);
    let out = check(&cx, &langs, &["--json", "--runs", "10"]);
    let v = json(&out);
    assert_eq!(out.status.code(), Some(0), "{v}");
    for c in v["checks"].as_array().unwrap() {
        assert!(c["name"].is_string() && c["detail"].is_string(), "{c}");
        assert!(
            ["ok", "warn", "FAIL", "missing", "fail"].contains(&c["status"].as_str().unwrap()),
            "{c}"
        );
    }
    assert_eq!(status_of(&v, "language-shell"), "ok");
    // A language whose toolchain is missing is not offered: `missing`, naming
    // the command, not a failure of the host; one whose probe fails is `fail`.
    assert_eq!(status_of(&v, "language-missing"), "missing");
    let detail = |name: &str| {
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .map(|c| c["detail"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert!(
        detail("language-missing").contains("no-such-compiler-judge-runner-test"),
        "{v}"
    );
    assert_eq!(status_of(&v, "language-broken"), "fail");
    assert!(detail("language-broken").contains("false"), "{v}");
    let o = &v["overhead"];
    assert_eq!(o["runs"], 10, "{v}");
    for key in ["plain_ms", "slot_ms", "ratio"] {
        assert!(o[key].as_f64().unwrap() > 0.0, "{key}: {v}");
    }
}

#[test]
fn human_output_is_one_line_per_check_then_the_overhead() {
    let cx = Ctx::new("check_human");
    let langs = write(cx.dir.path(), "langs.yaml", LANGUAGES);
    let out = check(&cx, &langs, &["--runs", "5"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.lines().any(|l| l.starts_with("ok    root ")), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("overhead: ") && l.ends_with('x')),
        "{text}"
    );
    assert_eq!(text.lines().last(), Some("this host can judge"), "{text}");
}

#[test]
fn no_language_with_a_toolchain_is_a_failure_with_exit_1() {
    let cx = Ctx::new("check_nolang");
    let langs = write(
        cx.dir.path(),
        "langs.yaml",
        "missing:\n  name: Missing\n  extensions: [missing]\n  run: \"{binary}\"\n  version: no-such-compiler-judge-runner-test --version\n",
    );
    let out = check(&cx, &langs, &["--json", "--runs", "5"]);
    let v = json(&out);
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!(status_of(&v, "languages"), "FAIL");
    assert!(
        v["overhead"].is_null(),
        "no overhead where the host cannot judge: {v}"
    );
}

#[test]
fn as_non_root_it_fails_the_root_check_with_exit_1() {
    let cx = Ctx::new("check_nonroot");
    let bin = ReachableCopy::of_judge_runner();
    let langs = write(bin.dir(), "langs.yaml", LANGUAGES);
    std::fs::set_permissions(&langs, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = bin
        .command_as_other_uid("judge-runner")
        .args([
            "check",
            "--json",
            "--runs",
            "5",
            "--cgroup-parent",
            &cx.parent,
        ])
        .args(["--box-id", &cx.box_id.to_string(), "--languages", &langs])
        .output()
        .unwrap();
    let v = json(&out);
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!(status_of(&v, "root"), "FAIL");
    assert!(v["overhead"].is_null(), "{v}");
}

#[test]
fn zero_runs_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_judge-runner"))
        .args(["check", "--runs", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_box_another_command_holds_is_refused() {
    let cx = Ctx::new("check_boxlock");
    let locks = tempfile::tempdir().unwrap();
    let _held =
        judge_runner::sandbox::BoxLock::acquire_in(locks.path(), [cx.box_id], "test").unwrap();
    let langs = write(cx.dir.path(), "langs.yaml", LANGUAGES);
    let out = Command::new(env!("CARGO_BIN_EXE_judge-runner"))
        .args([
            "check",
            "--json",
            "--runs",
            "5",
            "--cgroup-parent",
            &cx.parent,
        ])
        .args(["--box-id", &cx.box_id.to_string(), "--languages", &langs])
        .env(judge_runner::sandbox::BOX_LOCK_DIR_ENV, locks.path())
        .output()
        .unwrap();
    let v = json(&out);
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!(status_of(&v, "box-lock"), "FAIL");
    let c = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "box-lock")
        .unwrap();
    assert!(
        c["detail"]
            .as_str()
            .unwrap()
            .contains(&cx.box_id.to_string()),
        "{c}"
    );
}

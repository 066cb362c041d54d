//! Real package shapes judged as the reference tools judge them (issue 10,
//! package half), through `judge-runner judge` as a user runs it, on the packages
//! in `tests/fixtures/problems/`:
//! - a 2023-07 interactive package whose validator sits in a subdirectory of
//!   `output_validator/` (problemtools' `guess` layout);
//! - `include/default/` and `include/<language>/` copied into submissions, never
//!   over the submission's own files;
//! - a legacy scoring package whose samples score like any group (unless
//!   `ignore_sample`), while 2023-07 samples score 0;
//! - hexadecimal floats at the exponent and precision edges, with a hex tolerance.
//!
//! Needs root (real sandboxes). Each test runs on its own box ids and cgroup parent.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Mutex;

const EXE: &str = env!("CARGO_BIN_EXE_judge-runner");

/// One judging at a time in this binary: on a 2-core machine parallel judgings
/// would steal each other's CPU (the verdicts here do not depend on time, but
/// the run should not crawl either).
static SERIAL: Mutex<()> = Mutex::new(());

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/problems")
        .join(name)
}

/// `judge-runner judge` on box `box_id` and a cgroup parent of its own (removed
/// afterwards); returns the process output and the parsed report.
fn judge(box_id: u32, problem: &Path, sources: &[PathBuf]) -> (Output, serde_json::Value) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let parent = format!("judge-runner-test-{}-fid{box_id}", std::process::id());
    let out = std::process::Command::new(EXE)
        .arg("judge")
        .args(["--box-id", &box_id.to_string(), "--cgroup-parent", &parent])
        .arg("--problem")
        .arg(problem)
        .args(["--report", "-"])
        .args(sources)
        .output()
        .unwrap();
    let _ = judge_runner::sandbox::remove_parent(&parent);
    let report = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out, report)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts exit 0 and returns (verdict, score, max_score).
fn verdict(box_id: u32, problem: &Path, sources: &[PathBuf]) -> (String, f64, f64) {
    let (out, report) = judge(box_id, problem, sources);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    (
        report["verdict"].as_str().unwrap().to_string(),
        report["score"].as_f64().unwrap(),
        report["max_score"].as_f64().unwrap(),
    )
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

#[test]
fn interactive_2023_07_validator_in_a_subdirectory() {
    let problem = fixture("guess_2023");
    let parsed = judge_runner::package::parse(&problem).unwrap();
    match &parsed.validator {
        judge_runner::package::OutputValidator::Custom(v) => {
            assert!(
                v.path.ends_with("output_validator/guess_validator"),
                "{v:?}"
            );
        }
        other => panic!("expected the custom validator, got {other:?}"),
    }
    let accepted = [problem.join("submissions/accepted/bisect.py")];
    let (v, score, max) = verdict(470, &problem, &accepted);
    assert_eq!((v.as_str(), score, max), ("Accepted", 1.0, 1.0));
    let wrong = [problem.join("submissions/wrong_answer/linear.py")];
    let (v, score, _) = verdict(471, &problem, &wrong);
    assert_eq!((v.as_str(), score), ("Wrong Answer", 0.0));
}

#[test]
fn include_files_join_every_submission_of_their_language() {
    let problem = fixture("include_2023");
    let subs = problem.join("submissions");
    // The grader (main) comes from include/cpp/, the header from include/default/.
    let (v, ..) = verdict(472, &problem, &[subs.join("accepted/add.cpp")]);
    assert_eq!(v, "Accepted");
    let (v, ..) = verdict(473, &problem, &[subs.join("accepted/add.c")]);
    assert_eq!(v, "Accepted", "include/c/ and include/default/ for C");
    let (v, ..) = verdict(474, &problem, &[subs.join("wrong_answer/add_int.cpp")]);
    assert_eq!(v, "Wrong Answer");
    // The submission's own grader.cpp is not overwritten by the include's (whose
    // main would call this submission's wrong add()).
    let own = subs.join("accepted/own_grader");
    let (v, ..) = verdict(
        475,
        &problem,
        &[own.join("add.cpp"), own.join("grader.cpp")],
    );
    assert_eq!(
        v, "Accepted",
        "the include overwrote the submission's own file"
    );
}

#[test]
fn legacy_samples_score_like_any_group_unless_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let solution = fixture("legacy_scoring").join("submissions/accepted/double.py");
    let partial = fixture("legacy_scoring").join("submissions/partially_accepted/only_small.py");
    // Legacy, no testdata.yaml: 2 samples + 3 secret tests, 1 point each.
    let legacy = fixture("legacy_scoring");
    assert_eq!(
        verdict(476, &legacy, std::slice::from_ref(&solution)),
        ("Accepted".into(), 5.0, 5.0)
    );
    let (v, score, max) = verdict(476, &legacy, std::slice::from_ref(&partial));
    assert_eq!((score, max), (3.0, 5.0), "{v}");
    // The root's grader_flags: ignore_sample: the secret group alone counts.
    let ignoring = tmp.path().join("ignoring");
    copy_tree(&legacy, &ignoring);
    std::fs::write(
        ignoring.join("data/testdata.yaml"),
        "grader_flags: ignore_sample\n",
    )
    .unwrap();
    assert_eq!(
        verdict(477, &ignoring, std::slice::from_ref(&solution)),
        ("Accepted".into(), 3.0, 3.0)
    );
    // The same package in 2023-07: samples score 0.
    let modern = tmp.path().join("modern");
    copy_tree(&legacy, &modern);
    let yaml = std::fs::read_to_string(legacy.join("problem.yaml")).unwrap();
    std::fs::write(
        modern.join("problem.yaml"),
        format!("problem_format_version: 2023-07-draft\n{yaml}"),
    )
    .unwrap();
    assert_eq!(
        verdict(478, &modern, std::slice::from_ref(&solution)),
        ("Accepted".into(), 3.0, 3.0)
    );
}

#[test]
fn hexadecimal_answers_at_the_edges() {
    let problem = fixture("hexfloat");
    let subs = problem.join("submissions");
    let (v, ..) = verdict(479, &problem, &[subs.join("accepted/exact.py")]);
    assert_eq!(v, "Accepted");
    let (v, ..) = verdict(479, &problem, &[subs.join("wrong_answer/one_ulp_off.py")]);
    assert_eq!(v, "Wrong Answer");
}

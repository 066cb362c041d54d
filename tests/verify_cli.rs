//! `judge-runner verify` as a problem setter runs it (contract §3a), on packages
//! written here: every folder, a wrong expectation, a multi-file and a
//! tag-annotated submission, skipped languages, hostile submissions, the report's
//! shape, the computed time limit, exit statuses. Real sandboxes, as root.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

use std::path::Path;
use std::process::Output;

use serde_json::Value;

const EXE: &str = env!("CARGO_BIN_EXE_judge-runner");

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
}

/// Runs `verify` on its own cgroup parent (removed afterwards).
fn verify(tag: &str, args: &[&str]) -> Output {
    let parent = format!("judge-runner-test-{}-verify-{tag}", std::process::id());
    let out = std::process::Command::new(EXE)
        .arg("verify")
        .args(["--cgroup-parent", &parent])
        .args(args)
        .output()
        .unwrap();
    let _ = judge_runner::sandbox::remove_parent(&parent);
    out
}

fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn report(path: &Path) -> Vec<Value> {
    serde_json::from_slice::<Value>(&std::fs::read(path).unwrap())
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn row<'a>(rows: &'a [Value], submission: &str) -> &'a Value {
    rows.iter()
        .find(|r| r["submission"] == submission)
        .unwrap_or_else(|| panic!("no row {submission} in {rows:?}"))
}

/// "Add two numbers", legacy format, 1 s, 64 MiB, 1 MiB of output.
fn addition(dir: &Path, yaml: &str) {
    write(dir, "problem.yaml", yaml);
    write(dir, "data/sample/1.in", "1 2\n");
    write(dir, "data/sample/1.ans", "3\n");
    write(dir, "data/secret/1.in", "20 22\n");
    write(dir, "data/secret/1.ans", "42\n");
    write(dir, "data/secret/2.in", "-5 5\n");
    write(dir, "data/secret/2.ans", "0\n");
}

const ADD_C: &str = "#include <stdio.h>\nint main(void){long a,b;scanf(\"%ld %ld\",&a,&b);printf(\"%ld\\n\",a+b);return 0;}\n";
const SPIN_C: &str = "int main(void){volatile unsigned long x=0;for(;;)x++;}\n";

/// Whether a process of box uid `60000 + id` is alive.
fn box_processes(ids: std::ops::Range<u32>) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|u| u.parse::<u32>().ok());
        let in_box = |u: u32| {
            u.checked_sub(60000)
                .is_some_and(|b| ids.contains(&b) || ids.contains(&b.saturating_sub(500)))
        };
        if uid.is_some_and(in_box) {
            found.push(status.lines().next().unwrap_or_default().to_string());
        }
    }
    found
}

#[test]
fn every_folder_a_wrong_expectation_and_hostile_submissions() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("addition");
    addition(
        &pkg,
        "name: Addition\nlimits:\n  time_limit: 1\n  memory: 64\n  output: 1\n",
    );
    let s = "submissions";
    write(&pkg, &format!("{s}/accepted/add.c"), ADD_C);
    // Multi-file: main.c calls sum() of sum.c, declared in sum.h.
    write(
        &pkg,
        &format!("{s}/accepted/multi/main.c"),
        "#include <stdio.h>\n#include \"sum.h\"\nint main(void){long a,b;scanf(\"%ld %ld\",&a,&b);printf(\"%ld\\n\",sum(a,b));}\n",
    );
    write(
        &pkg,
        &format!("{s}/accepted/multi/sum.c"),
        "#include \"sum.h\"\nlong sum(long a,long b){return a+b;}\n",
    );
    write(
        &pkg,
        &format!("{s}/accepted/multi/sum.h"),
        "long sum(long a,long b);\n",
    );
    // No configured language: listed as skipped.
    write(
        &pkg,
        &format!("{s}/accepted/add.cob"),
        "       IDENTIFICATION DIVISION.\n       PROGRAM-ID. ADD.\n",
    );
    write(
        &pkg,
        &format!("{s}/wrong_answer/minus.py"),
        "a, b = map(int, input().split())\nprint(a - b)\n",
    );
    // The tag overrides the folder: correct, and expected so.
    write(
        &pkg,
        &format!("{s}/wrong_answer/tagged.c"),
        &format!("/* @EXPECTED_RESULTS@: CORRECT */\n{ADD_C}"),
    );
    // The wrong expectation: correct, in wrong_answer/, no tag.
    write(&pkg, &format!("{s}/wrong_answer/oops.c"), ADD_C);
    write(&pkg, &format!("{s}/time_limit_exceeded/spin.c"), SPIN_C);
    // Hostile: a fork bomb (its forks fail at the process limit; it spins on).
    write(
        &pkg,
        &format!("{s}/time_limit_exceeded/forkbomb.c"),
        "// @EXPECTED_RESULTS@: TIMELIMIT, RUN-ERROR, MEMORY-LIMIT\n#include <unistd.h>\nint main(void){for(;;)fork();}\n",
    );
    write(
        &pkg,
        &format!("{s}/run_time_error/crash.c"),
        "int main(void){return 3;}\n",
    );
    // Ends Memory Limit Exceeded: counts as expected in run_time_error/.
    write(
        &pkg,
        &format!("{s}/run_time_error/hog.c"),
        "#include <stdlib.h>\n#include <string.h>\nint main(void){for(;;){char*p=malloc(1<<20);if(!p)return 1;memset(p,1,1<<20);}}\n",
    );
    // Hostile: fills /tmp (a tmpfs of its own) until a write fails (the
    // output limit, the memory limit or a full tmpfs, whichever comes first).
    write(
        &pkg,
        &format!("{s}/run_time_error/fill_tmp.c"),
        "// @EXPECTED_RESULTS@: RUN-ERROR, OUTPUT-LIMIT, MEMORY-LIMIT\n#include <stdio.h>\nint main(void){FILE*f=fopen(\"/tmp/judge-runner-verify-fill\",\"w\");if(!f)return 2;static char b[1<<16];for(;;){if(fwrite(b,1,sizeof b,f)!=sizeof b||fflush(f))return 1;}}\n",
    );
    write(
        &pkg,
        &format!("{s}/output_limit_exceeded/flood.c"),
        "#include <stdio.h>\nint main(void){for(;;)puts(\"yes yes yes yes yes yes yes yes\");}\n",
    );
    write(
        &pkg,
        &format!("{s}/compile_error/broken.c"),
        "int main(void){ return }\n",
    );
    // A folder naming no verdict: judged and listed, never a mismatch.
    write(&pkg, &format!("{s}/slow_accepted/add.c"), ADD_C);

    let report_path = tmp.path().join("report.json");
    let out = verify(
        "every",
        &[
            pkg.to_str().unwrap(),
            "--slots",
            "2",
            "--first-box",
            "5000",
            "--report",
            report_path.to_str().unwrap(),
        ],
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "the wrong expectation: {all}");
    let rows = report(&report_path);
    assert_eq!(rows.len(), 14, "{rows:#?}");
    // The report's shape: exactly the contract's fields.
    for r in &rows {
        let mut keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "expected",
                "language",
                "max_cpu_seconds",
                "max_score",
                "ok",
                "score",
                "skipped",
                "submission",
                "verdict"
            ]
        );
        assert!(r["expected"].is_array() && r["ok"].is_boolean() && r["skipped"].is_boolean());
    }
    let bad: Vec<&str> = rows
        .iter()
        .filter(|r| r["ok"] == false)
        .map(|r| r["submission"].as_str().unwrap())
        .collect();
    assert_eq!(bad, ["wrong_answer/oops.c"], "{all}");
    let oops = row(&rows, "wrong_answer/oops.c");
    assert_eq!(oops["verdict"], "Accepted");
    assert_eq!(oops["expected"], serde_json::json!(["Wrong Answer"]));
    assert!(all.contains("<-- MISMATCH"), "{all}");

    let multi = row(&rows, "accepted/multi");
    assert_eq!(multi["verdict"], "Accepted", "{all}");
    assert_eq!(multi["language"], "c");
    assert_eq!(
        (multi["score"].as_f64(), multi["max_score"].as_f64()),
        (Some(1.0), Some(1.0))
    );
    assert!(multi["max_cpu_seconds"].as_f64().unwrap() >= 0.0);

    let tagged = row(&rows, "wrong_answer/tagged.c");
    assert_eq!(tagged["expected"], serde_json::json!(["Accepted"]));
    assert_eq!(tagged["verdict"], "Accepted");

    let cob = row(&rows, "accepted/add.cob");
    assert_eq!(cob["skipped"], true);
    assert_eq!(cob["verdict"], Value::Null);
    assert_eq!(cob["language"], "cob");
    assert!(
        all.contains("skipped: no configured language for .cob"),
        "{all}"
    );

    assert_eq!(
        row(&rows, "wrong_answer/minus.py")["verdict"],
        "Wrong Answer"
    );
    assert_eq!(row(&rows, "wrong_answer/minus.py")["language"], "python3");
    assert_eq!(
        row(&rows, "time_limit_exceeded/spin.c")["verdict"],
        "Time Limit Exceeded"
    );
    assert_eq!(
        row(&rows, "run_time_error/crash.c")["verdict"],
        "Run-Time Error"
    );
    assert_eq!(
        row(&rows, "run_time_error/hog.c")["verdict"],
        "Memory Limit Exceeded"
    );
    assert_eq!(
        row(&rows, "run_time_error/hog.c")["expected"],
        serde_json::json!(["Run-Time Error", "Memory Limit Exceeded"])
    );
    assert_eq!(
        row(&rows, "output_limit_exceeded/flood.c")["verdict"],
        "Output Limit Exceeded"
    );
    let ce = row(&rows, "compile_error/broken.c");
    assert_eq!(ce["verdict"], "Compilation Error");
    assert_eq!(ce["max_cpu_seconds"], Value::Null);
    let slow = row(&rows, "slow_accepted/add.c");
    assert_eq!(
        (slow["verdict"].as_str(), slow["ok"].as_bool()),
        (Some("Accepted"), Some(true))
    );
    assert_eq!(slow["expected"], serde_json::json!([]));

    // The hostile ones were contained: judged, nothing left running, the host's
    // /tmp untouched.
    for hostile in [
        "time_limit_exceeded/forkbomb.c",
        "run_time_error/fill_tmp.c",
    ] {
        assert_eq!(row(&rows, hostile)["ok"], true, "{hostile}: {all}");
    }
    assert!(!Path::new("/tmp/judge-runner-verify-fill").exists());
    let left = box_processes(5000..5002);
    assert!(left.is_empty(), "box processes left: {left:?}");

    // The summary: the time limit, the time column named, the total line.
    assert!(all.contains("time limit 1 s (from the package)"), "{all}");
    assert!(all.contains("slowest test CPU"), "{all}");
    assert!(
        all.contains("total: 14 submissions, 11 matched, 1 mismatched, 1 skipped, 1 in folders that expect nothing"),
        "{all}"
    );
}

#[test]
fn a_missing_time_limit_is_computed_from_the_accepted_submissions() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("burn");
    // Legacy, no time limit: slowest accepted test x 5, rounded up.
    addition(&pkg, "name: Burn\n");
    let s = "submissions";
    write(
        &pkg,
        &format!("{s}/accepted/burn.c"),
        "#include <stdio.h>\nint main(void){long a,b;scanf(\"%ld %ld\",&a,&b);volatile unsigned long x=0;for(unsigned long i=0;i<150000000UL;i++)x+=i;printf(\"%ld\\n\",a+b);}\n",
    );
    write(&pkg, &format!("{s}/accepted/add.c"), ADD_C);
    write(&pkg, &format!("{s}/time_limit_exceeded/spin.c"), SPIN_C);
    // Configured by default, but not in the table this test passes.
    write(
        &pkg,
        &format!("{s}/accepted/add.py"),
        "print(sum(map(int, input().split())))\n",
    );
    let languages = tmp.path().join("languages.yaml");
    std::fs::write(
        &languages,
        "c:\n  name: C\n  extensions: [c]\n  compile: gcc -O2 -static -o {binary} {files}\n  run: \"{binary}\"\n  version: gcc --version\n",
    )
    .unwrap();
    let report_path = tmp.path().join("report.json");
    let out = verify(
        "computed",
        &[
            pkg.to_str().unwrap(),
            "--slots",
            "1",
            "--first-box",
            "5010",
            "--languages",
            languages.to_str().unwrap(),
            "--report",
            report_path.to_str().unwrap(),
        ],
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    let rows = report(&report_path);
    let slowest = ["accepted/burn.c", "accepted/add.c"]
        .iter()
        .map(|s| row(&rows, s)["max_cpu_seconds"].as_f64().unwrap())
        .fold(0.0, f64::max);
    let expected = (slowest * 5.0 - 1e-9).ceil().max(1.0);
    let line = format!(
        "time limit {expected} s, computed: slowest accepted test {slowest:.3} s (accepted/burn.c) x 5, rounded up"
    );
    assert!(all.contains(&line), "want {line:?} in {all}");
    let spin = row(&rows, "time_limit_exceeded/spin.c");
    assert_eq!(spin["verdict"], "Time Limit Exceeded");
    // It ran against the computed limit, not the provisional one.
    assert!(
        spin["max_cpu_seconds"].as_f64().unwrap() < expected + 1.0,
        "{all}"
    );
    let py = row(&rows, "accepted/add.py");
    assert_eq!(
        (py["skipped"].as_bool(), py["ok"].as_bool()),
        (Some(true), Some(true))
    );
    assert!(
        all.contains("skipped: no configured language for .py"),
        "{all}"
    );

    // --only: just the matching submissions, same exit rule.
    let only = tmp.path().join("only.json");
    let out = verify(
        "only",
        &[
            pkg.to_str().unwrap(),
            "--slots",
            "1",
            "--first-box",
            "5010",
            "--time-limit",
            "1",
            "--only",
            "*/add.?",
            "--report",
            only.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let rows = report(&only);
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["submission"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["accepted/add.c"]);
    assert!(text(&out).contains("time limit 1 s (--time-limit)"));
}

#[test]
fn the_multipliers_are_parsed_per_format() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        ("name: x\n", 5.0),
        ("name: x\nlimits:\n  time_multiplier: 3\n", 3.0),
        ("problem_format_version: 2023-07-draft\nname: x\n", 2.0),
        (
            "problem_format_version: 2023-07-draft\nname: x\nlimits:\n  time_multipliers:\n    ac_to_time_limit: 1.5\n    time_limit_to_tle: 2\n",
            1.5,
        ),
    ];
    for (i, (yaml, want)) in cases.iter().enumerate() {
        let dir = tmp.path().join(i.to_string());
        addition(&dir, yaml);
        let problem = judge_runner::package::parse(&dir).unwrap();
        assert_eq!(problem.ac_to_time_limit(), *want, "{yaml}");
    }
    let bad = tmp.path().join("bad");
    addition(&bad, "name: x\nlimits:\n  time_multiplier: -1\n");
    assert!(judge_runner::package::parse(&bad).is_err());
}

#[test]
fn a_package_that_does_not_parse_and_bad_arguments() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("broken");
    addition(&pkg, "name: x\nlimits:\n  time_limit: soon\n");
    write(&pkg, "submissions/accepted/add.c", ADD_C);
    let out = verify("broken", &[pkg.to_str().unwrap(), "--first-box", "5020"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    // package check's message, word for word.
    let check = std::process::Command::new(EXE)
        .args(["package", "check", pkg.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(1));
    let check_msg = String::from_utf8_lossy(&check.stderr);
    let message = check_msg
        .trim()
        .strip_prefix("judge-runner package check: ")
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(message),
        "{message:?} in {}",
        text(&out)
    );
    let good = tmp.path().join("good");
    addition(&good, "name: x\n");
    let out = verify("usage", &[good.to_str().unwrap(), "--slots", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let out = verify("usage", &[good.to_str().unwrap(), "--only", "nothing*"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn box_ids_in_use_are_refused_naming_their_holder() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("p");
    addition(&pkg, "name: x\nlimits:\n  time_limit: 1\n");
    write(&pkg, "submissions/accepted/add.c", ADD_C);
    let locks = tmp.path().join("box-locks");
    // Slot 1's validator box of `--first-box 5030 --slots 2`.
    let held = judge_runner::sandbox::BoxLock::acquire_in(&locks, [5531], "a test").unwrap();
    let run = || {
        std::process::Command::new(EXE)
            .args([
                "verify",
                pkg.to_str().unwrap(),
                "--first-box",
                "5030",
                "--slots",
                "2",
            ])
            .args([
                "--cgroup-parent",
                &format!("judge-runner-test-{}-verify-lock", std::process::id()),
            ])
            .env(judge_runner::sandbox::BOX_LOCK_DIR_ENV, &locks)
            .output()
            .unwrap()
    };
    let out = run();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("5531") && err.contains("a test pid"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("accepted/add.c"));
    // Twin: released, the same command judges.
    drop(held);
    let out = run();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let _ = judge_runner::sandbox::remove_parent(&format!(
        "judge-runner-test-{}-verify-lock",
        std::process::id()
    ));
}

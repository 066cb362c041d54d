//! The languages beyond the contract's five (contract §7): Kotlin, PyPy, Go,
//! JavaScript (Node) and C# (Mono), each judged through the real binary with
//! real programs (`tests/fixtures/languages/<id>/`): Accepted, Wrong Answer,
//! Time Limit Exceeded, Memory Limit Exceeded, Run-Time Error, Compilation
//! Error (Kotlin and C#: also a source without an entry point), and 10 MB of
//! input read in time. A language must be in the built-in table (its test
//! fails otherwise); only when its toolchain is not on this host does its test
//! skip, saying why. The cgroup-v2 guest of `.ci/run` has no toolchains: these
//! tests run on the host only.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod judge_common;

use std::path::{Path, PathBuf};
use std::process::Output;

use judge_runner::judge::{LanguageTable, language};

const EXE: &str = env!("CARGO_BIN_EXE_judge-runner");
/// The box of every run here (the tests take turns: `judge_common::serial`).
const BOX_ID: &str = "440";
const MEMORY_MIB: u64 = 256;

fn fixture(language: &str, file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/languages")
        .join(language)
        .join(file)
}

/// "Sum the integers": a sample, a small secret test and, with `big`, a
/// secret test of 10 MiB (1.3 million integers); 3 s, 256 MiB.
fn sum_problem(big: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(
        p.join("problem.yaml"),
        format!("problem_format_version: 2023-07-draft\nname: Sum\nlimits: {{time_limit: 3, memory: {MEMORY_MIB}}}\n"),
    )
    .unwrap();
    for d in ["data/sample", "data/secret"] {
        std::fs::create_dir_all(p.join(d)).unwrap();
    }
    std::fs::write(p.join("data/sample/1.in"), "1 2 3\n-4 5\n").unwrap();
    std::fs::write(p.join("data/sample/1.ans"), "7\n").unwrap();
    std::fs::write(p.join("data/secret/1.in"), "10 20\n").unwrap();
    std::fs::write(p.join("data/secret/1.ans"), "30\n").unwrap();
    if big {
        let (input, sum) = big_input(10 << 20);
        assert!(input.len() >= 10 << 20);
        std::fs::write(p.join("data/secret/2-big.in"), input).unwrap();
        std::fs::write(p.join("data/secret/2-big.ans"), format!("{sum}\n")).unwrap();
    }
    dir
}

/// At least `size` bytes of signed integers, ten to a line, and their sum.
fn big_input(size: usize) -> (String, i64) {
    let mut text = String::with_capacity(size + 128);
    let mut sum = 0i64;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut i = 0u64;
    while text.len() < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let v = (x % 2_000_000_001) as i64 - 1_000_000_000;
        sum += v;
        text.push_str(&v.to_string());
        i += 1;
        text.push(if i.is_multiple_of(10) { '\n' } else { ' ' });
    }
    text.push('\n');
    (text, sum)
}

struct Judged {
    verdict: String,
    details: serde_json::Value,
    log: String,
    stderr: String,
}

impl std::fmt::Debug for Judged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}\nlog:\n{}\nstderr:\n{}\ndetails: {}",
            self.verdict, self.log, self.stderr, self.details
        )
    }
}

fn run(args: &[&str]) -> Output {
    std::process::Command::new(EXE)
        .arg("judge")
        .args(["--box-id", BOX_ID])
        .args(["--cgroup-parent", &judge_common::cgroup_parent()])
        .args(args)
        .output()
        .unwrap()
}

/// `judge-runner judge` of one fixture; exit 0 and a verdict expected.
fn judge(problem: &Path, language: &str, file: &str, extra: &[&str]) -> Judged {
    let tmp = tempfile::tempdir().unwrap();
    let (report, details, log) = (
        tmp.path().join("report.json"),
        tmp.path().join("details.json"),
        tmp.path().join("compile.log"),
    );
    let source = fixture(language, file);
    let mut args = vec![
        "--problem",
        problem.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--details",
        details.to_str().unwrap(),
        "--log",
        log.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.push(source.to_str().unwrap());
    let out = run(&args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{language}/{file}: {stderr}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    Judged {
        verdict: report["verdict"].as_str().unwrap().to_string(),
        details: serde_json::from_slice(&std::fs::read(&details).unwrap()).unwrap(),
        log: std::fs::read_to_string(&log).unwrap(),
        stderr,
    }
}

/// Whether `id` can be tested here: it must be in the built-in table; `false`
/// (with the reason printed) when its toolchain is not on this host.
fn available(id: &str) -> bool {
    let table = LanguageTable::builtin().unwrap();
    let lang = table
        .get(id)
        .unwrap_or_else(|| panic!("{id} is not in the built-in language table"));
    match language::probe(lang) {
        Ok(_) => true,
        Err(why) => {
            eprintln!("skipping the {id} tests: {why}");
            false
        }
    }
}

fn expect(j: &Judged, verdict: &str) {
    assert_eq!(j.verdict, verdict, "{j:?}");
}

/// A runtime with a heap bounded by the memory limit (JVM, V8, Mono, PyPy)
/// may fail on its own out-of-memory error before the cgroup does: Memory
/// Limit Exceeded, or Run-Time Error with the memory used near the limit.
fn expect_memory_limit(j: &Judged) {
    match j.verdict.as_str() {
        "Memory Limit Exceeded" => {}
        "Run-Time Error" => {
            let peak = j.details.as_array().unwrap().last().unwrap()["memory_bytes"]
                .as_u64()
                .unwrap();
            assert!(
                peak > (MEMORY_MIB << 20) / 2,
                "a Run-Time Error with only {peak} bytes used: {j:?}"
            );
        }
        _ => panic!("expected Memory Limit Exceeded: {j:?}"),
    }
}

/// The cases every language has, in the fixture names of its directory.
fn judge_all(id: &str, ext: &str, extra: &[&str]) {
    let problem = sum_problem(false);
    let p = problem.path();
    let file = |case: &str| format!("{case}.{ext}");
    expect(&judge(p, id, &file("accepted"), extra), "Accepted");
    expect(&judge(p, id, &file("wrong_answer"), extra), "Wrong Answer");
    expect(
        &judge(p, id, &file("time_limit"), extra),
        "Time Limit Exceeded",
    );
    expect_memory_limit(&judge(p, id, &file("memory_limit"), extra));
    let rte = judge(p, id, &file("run_time_error"), extra);
    expect(&rte, "Run-Time Error");
    let ce = judge(p, id, &file("compile_error"), extra);
    expect(&ce, "Compilation Error");
    assert!(!ce.log.trim().is_empty(), "no compiler output: {ce:?}");
    // 10 MiB of input, read and summed within the 3 s.
    let big = sum_problem(true);
    let j = judge(big.path(), id, &file("accepted"), extra);
    expect(&j, "Accepted");
    let rows = j.details.as_array().unwrap();
    assert!(
        rows.iter().any(|r| r["name"] == "secret/2-big"),
        "the big test did not run: {j:?}"
    );
}

#[test]
fn kotlin() {
    let _serial = judge_common::serial();
    if !available("kotlin") {
        return;
    }
    judge_all("kotlin", "kt", &[]);
    let problem = sum_problem(false);
    // The entry point is the class of the top-level `main` (`AcceptedKt`) or a
    // `@JvmStatic main` in an object, found from the class files; none at all
    // is a Compilation Error.
    expect(
        &judge(problem.path(), "kotlin", "object_main.kt", &[]),
        "Accepted",
    );
    let none = judge(problem.path(), "kotlin", "no_main.kt", &[]);
    expect(&none, "Compilation Error");
    assert!(none.log.contains("main"), "{none:?}");
}

#[test]
fn pypy3() {
    let _serial = judge_common::serial();
    if !available("pypy3") {
        return;
    }
    // `.py` is python3 (CPython): PyPy only when named. The accepted fixture
    // refuses to run under CPython, so these verdicts are PyPy's.
    judge_all("pypy3", "py", &["--language", "pypy3"]);
    let problem = sum_problem(false);
    let cpython = judge(problem.path(), "pypy3", "accepted.py", &[]);
    expect(&cpython, "Run-Time Error");
    // Kattis' behaviour: Python 3 submissions judged by PyPy.
    let mapped = judge(
        problem.path(),
        "pypy3",
        "accepted.py",
        &["--map-language", "python3=pypy3"],
    );
    expect(&mapped, "Accepted");
}

#[test]
fn go() {
    let _serial = judge_common::serial();
    if !available("go") {
        return;
    }
    judge_all("go", "go", &[]);
}

#[test]
fn javascript() {
    let _serial = judge_common::serial();
    if !available("javascript") {
        return;
    }
    judge_all("javascript", "js", &[]);
}

#[test]
fn csharp() {
    let _serial = judge_common::serial();
    if !available("csharp") {
        return;
    }
    judge_all("csharp", "cs", &[]);
    let problem = sum_problem(false);
    let none = judge(problem.path(), "csharp", "no_main.cs", &[]);
    expect(&none, "Compilation Error");
    assert!(none.log.contains("CS5001"), "{none:?}");
}

/// A language whose toolchain is absent is refused with exit 2, naming the
/// language and the missing command (a table of the tests' own naming a
/// compiler no host has).
#[test]
fn a_language_without_its_toolchain_is_refused_with_exit_2() {
    let _serial = judge_common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let table = tmp.path().join("languages.yaml");
    std::fs::write(
        &table,
        "absent:\n  name: Absent\n  extensions: [abs]\n  compile: no-such-compiler-judge-runner-test {files}\n  run: \"{binary}\"\n  version: no-such-compiler-judge-runner-test --version\n",
    )
    .unwrap();
    let source = tmp.path().join("sum.abs");
    std::fs::write(&source, "print sum\n").unwrap();
    let problem = sum_problem(false);
    let out = run(&[
        "--problem",
        problem.path().to_str().unwrap(),
        "--languages",
        table.to_str().unwrap(),
        source.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("\"absent\""), "{stderr}");
    assert!(
        stderr.contains("no-such-compiler-judge-runner-test"),
        "{stderr}"
    );
    // A mapping to a language that is not configured is bad arguments too.
    let out = run(&[
        "--problem",
        problem.path().to_str().unwrap(),
        "--map-language",
        "python3=nope",
        fixture("pypy3", "accepted.py").to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("\"nope\""), "{stderr}");
}

fn verify(args: &[&str]) -> Output {
    std::process::Command::new(EXE)
        .arg("verify")
        .args(["--first-box", BOX_ID, "--slots", "1"])
        .args(["--cgroup-parent", &judge_common::cgroup_parent()])
        .args(args)
        .output()
        .unwrap()
}

/// `verify --map-language python3=pypy3` judges a package's `.py` examples
/// with PyPy; without it they are CPython's (the fixture refuses CPython).
#[test]
fn verify_maps_python3_to_pypy3() {
    let _serial = judge_common::serial();
    if !available("pypy3") {
        return;
    }
    let problem = sum_problem(false);
    let dir = problem.path().join("submissions/accepted");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixture("pypy3", "accepted.py"), dir.join("sum.py")).unwrap();
    let pkg = problem.path().to_str().unwrap();
    let out = verify(&[pkg, "--map-language", "python3=pypy3"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("pypy3"), "{stdout}");
    let out = verify(&[pkg]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("Run-Time Error"), "{stdout}");
}

/// verify lists a submission whose language's toolchain is absent as skipped,
/// naming the missing command, and refuses (exit 2) when that leaves nothing.
#[test]
fn verify_refuses_when_no_toolchain_is_here() {
    let _serial = judge_common::serial();
    let tmp = tempfile::tempdir().unwrap();
    let table = tmp.path().join("languages.yaml");
    std::fs::write(
        &table,
        "absent:\n  name: Absent\n  extensions: [abs]\n  run: \"{binary}\"\n  version: no-such-compiler-judge-runner-test --version\nshell:\n  name: Shell\n  extensions: [sh]\n  run: sh {mainfile}\n  version: sh -c true\n",
    )
    .unwrap();
    let problem = sum_problem(false);
    let dir = problem.path().join("submissions/accepted");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("sum.abs"), "sum\n").unwrap();
    let pkg = problem.path().to_str().unwrap();
    let out = verify(&[pkg, "--languages", table.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("absent") && stderr.contains("no-such-compiler-judge-runner-test"),
        "{stderr}"
    );
    // Beside a submission that can be judged, it is skipped, and said.
    std::fs::write(
        dir.join("sum.sh"),
        "tr -s ' \\n' '\\n\\n' | awk '{s+=$1} END {print s}'\n",
    )
    .unwrap();
    let out = verify(&[pkg, "--languages", table.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("no-such-compiler-judge-runner-test"),
        "{stderr}"
    );
    assert!(stdout.contains("skipped"), "{stdout}");
}

//! Packages the judge has not seen: generated here, in both formats, with the
//! shapes problemtools accepts (validators as one file, a directory, or
//! build/run scripts; `.timelimit`; samples only; group validator flags; custom
//! scores), multi-file submissions in every language, cancellation and trials.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod judge_common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use judge_runner::judge::{
    CancelHandle, JudgeError, Options, Outcome, SourceFile, Submission, Verdict,
};
use judge_runner::package;

fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

/// An "echo the number" problem: `problem.yaml` as given, one sample, two secret tests.
fn echo_problem(yaml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    write(p, "problem.yaml", yaml);
    write(p, "data/sample/1.in", "7\n");
    write(p, "data/sample/1.ans", "7\n");
    write(p, "data/secret/a.in", "42\n");
    write(p, "data/secret/a.ans", "42\n");
    write(p, "data/secret/b.in", "-3\n");
    write(p, "data/secret/b.ans", "-3\n");
    dir
}

fn run(dir: &Path, submission: &Submission, options: &Options) -> Result<Outcome, JudgeError> {
    let problem = package::parse(dir).unwrap();
    judge_common::judge().judge(&problem, submission, options, &mut |_| {})
}

fn verdict(dir: &Path, submission: &Submission) -> Verdict {
    run(dir, submission, &Options::default()).unwrap().verdict
}

fn echo_py() -> Submission {
    judge_common::source("python3", "echo.py", "print(input())\n")
}

const CHECK_C: &str = r#"#include <stdio.h>
/* accepts when the output number equals the answer's, whatever the spacing */
int main(int argc, char **argv) {
    long a, b;
    FILE *ans = fopen(argv[2], "r");
    if (!ans || fscanf(ans, "%ld", &a) != 1) return 1;
    if (scanf("%ld", &b) != 1) return 43;
    return a == b ? 42 : 43;
}
"#;

#[test]
fn validator_as_a_single_file() {
    let _serial = judge_common::serial();
    let dir = echo_problem("name: One file\nvalidation: custom\n");
    write(
        dir.path(),
        "output_validators/check.py",
        "import sys\nans = open(sys.argv[2]).read().split()\nout = sys.stdin.read().split()\nsys.exit(42 if ans == out else 43)\n",
    );
    assert_eq!(verdict(dir.path(), &echo_py()), Verdict::Accepted);
    let wrong = judge_common::source("python3", "w.py", "print(int(input()) + 1)\n");
    assert_eq!(verdict(dir.path(), &wrong), Verdict::WrongAnswer);
}

#[test]
fn validator_with_build_and_run_scripts() {
    let _serial = judge_common::serial();
    let dir =
        echo_problem("problem_format_version: 2023-07-draft\nname: Scripts\ntype: pass-fail\n");
    let v = dir.path().join("output_validator");
    write(&v, "check.c", CHECK_C);
    let build = write(&v, "build", "#!/bin/sh\nset -e\ngcc -O2 -o check check.c\n");
    std::fs::set_permissions(&build, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Not executable: run through /bin/sh.
    write(
        &v,
        "run",
        "#!/bin/sh\nexec \"$(dirname \"$0\")/check\" \"$@\"\n",
    );
    // The 2023-07 layout has no `validation:` key: the directory decides.
    assert_eq!(verdict(dir.path(), &echo_py()), Verdict::Accepted);
    let spaced = judge_common::source("python3", "s.py", "print('   ' + input() + '   ')\n");
    assert_eq!(verdict(dir.path(), &spaced), Verdict::Accepted);
    let wrong = judge_common::source("python3", "w.py", "print(0)\n");
    assert_eq!(verdict(dir.path(), &wrong), Verdict::WrongAnswer);
}

#[test]
fn timelimit_file_beats_the_fallback() {
    let _serial = judge_common::serial();
    let dir = echo_problem("name: Timelimit\n");
    write(dir.path(), ".timelimit", "0.5\n");
    // ~1.2 s of CPU: fine under the 5 s fallback, over the package's 0.5 s.
    let slow = judge_common::source(
        "c",
        "slow.c",
        "#include <stdio.h>\n#include <time.h>\nint main(void){long x; if(scanf(\"%ld\",&x)!=1) return 1; while (clock() < 1.2*CLOCKS_PER_SEC); printf(\"%ld\\n\", x); return 0;}\n",
    );
    let options = Options {
        time_limit: Some(5.0),
        ..Options::default()
    };
    let o = run(dir.path(), &slow, &options).unwrap();
    assert_eq!(o.verdict, Verdict::TimeLimitExceeded);
    assert!(
        o.details[0].cpu_seconds < 1.2,
        "{}",
        o.details[0].cpu_seconds
    );
    std::fs::remove_file(dir.path().join(".timelimit")).unwrap();
    assert_eq!(
        run(dir.path(), &slow, &options).unwrap().verdict,
        Verdict::Accepted
    );
}

#[test]
fn samples_only_package_is_judged_on_samples() {
    let _serial = judge_common::serial();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "problem.yaml", "name: Samples only\n");
    write(dir.path(), "data/sample/1.in", "5\n");
    write(dir.path(), "data/sample/1.ans", "5\n");
    let o = run(dir.path(), &echo_py(), &Options::default()).unwrap();
    assert_eq!((o.verdict, o.details.len()), (Verdict::Accepted, 1));
    let wrong = judge_common::source("python3", "w.py", "print(6)\n");
    assert_eq!(verdict(dir.path(), &wrong), Verdict::WrongAnswer);
}

#[test]
fn group_validator_flags_apply_to_their_group() {
    let _serial = judge_common::serial();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "problem.yaml", "name: Case\n");
    write(dir.path(), "data/sample/1.in", "x\n");
    write(dir.path(), "data/sample/1.ans", "Yes\n");
    write(
        dir.path(),
        "data/secret/testdata.yaml",
        "output_validator_flags: case_sensitive\n",
    );
    write(dir.path(), "data/secret/1.in", "x\n");
    write(dir.path(), "data/secret/1.ans", "Yes\n");
    let o = run(
        dir.path(),
        &judge_common::source("python3", "y.py", "print('YES')\n"),
        &Options::default(),
    )
    .unwrap();
    assert_eq!(
        o.details[0].verdict,
        Verdict::Accepted,
        "samples ignore case"
    );
    assert_eq!(o.verdict, Verdict::WrongAnswer, "secret is case sensitive");
}

#[test]
fn custom_scores_from_score_txt() {
    let _serial = judge_common::serial();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    write(
        p,
        "problem.yaml",
        "name: Scored\ntype: scoring\nvalidation: custom score\n",
    );
    write(p, "data/secret/1.in", "10\n");
    write(p, "data/secret/1.ans", "10\n");
    write(p, "data/secret/2.in", "20\n");
    write(p, "data/secret/2.ans", "20\n");
    // Score = the number printed, capped at the answer.
    write(
        p,
        "output_validators/score/score.py",
        "import sys\nans = int(open(sys.argv[2]).read())\nout = int(sys.stdin.read() or 0)\n\
open(sys.argv[3] + 'score.txt', 'w').write(str(min(out, ans)))\nsys.exit(42)\n",
    );
    let half = judge_common::source("python3", "h.py", "print(int(input()) // 2)\n");
    let o = run(p, &half, &Options::default()).unwrap();
    assert_eq!((o.verdict, o.score), (Verdict::Accepted, 15.0));
    assert_eq!(
        o.details.iter().map(|d| d.score).collect::<Vec<_>>(),
        [5.0, 10.0]
    );
}

fn files(language: &str, list: &[(&str, &str)]) -> Submission {
    Submission {
        language: language.to_string(),
        files: list
            .iter()
            .map(|(n, t)| SourceFile {
                name: n.to_string(),
                content: t.as_bytes().to_vec(),
            })
            .collect(),
    }
}

#[test]
fn multi_file_submissions_in_every_language() {
    let _serial = judge_common::serial();
    let dir = echo_problem("name: Multi\n");
    let judge = judge_common::judge();
    let available: Vec<String> = judge
        .available_languages()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let c = files(
        "c",
        &[
            (
                "main.c",
                "#include <stdio.h>\n#include \"util.h\"\nint main(void){long x; if(scanf(\"%ld\",&x)!=1) return 1; printf(\"%ld\\n\", same(x)); return 0;}\n",
            ),
            (
                "util.c",
                "#include \"util.h\"\nlong same(long x){return x;}\n",
            ),
            ("util.h", "long same(long x);\n"),
        ],
    );
    let cpp = files(
        "cpp",
        &[
            (
                "a.cpp",
                "#include <iostream>\nlong same(long);\nint main(){long x; std::cin >> x; std::cout << same(x) << '\\n';}\n",
            ),
            ("b.cc", "long same(long x){return x;}\n"),
        ],
    );
    let py = files(
        "python3",
        &[
            ("helper.py", "def same(x):\n    return x\n"),
            ("main.py", "from helper import same\nprint(same(input()))\n"),
        ],
    );
    let java = files(
        "java",
        &[
            (
                "Main.java",
                "import java.util.Scanner;\npublic class Main { public static void main(String[] a) { System.out.println(Helper.same(new Scanner(System.in).nextLong())); } }\n",
            ),
            (
                "Helper.java",
                "public class Helper { static long same(long x) { return x; } }\n",
            ),
        ],
    );
    let rust = files(
        "rust",
        &[(
            "main.rs",
            "fn main(){let mut s=String::new();std::io::stdin().read_line(&mut s).unwrap();println!(\"{}\", s.trim());}\n",
        )],
    );
    let options = Options {
        time_limit: Some(5.0),
        ..Options::default()
    };
    let problem = package::parse(dir.path()).unwrap();
    for sub in [c, cpp, py, java, rust] {
        if !available.contains(&sub.language) {
            assert!(!["c", "cpp", "python3"].contains(&sub.language.as_str()));
            eprintln!("skipping {}: toolchain not on this host", sub.language);
            continue;
        }
        let o = judge.judge(&problem, &sub, &options, &mut |_| {}).unwrap();
        assert_eq!(
            o.verdict,
            Verdict::Accepted,
            "{}: {}",
            sub.language,
            o.compile_log
        );
    }
}

#[test]
fn bad_file_names_are_compilation_errors() {
    let _serial = judge_common::serial();
    let dir = echo_problem("name: Names\n");
    let sub = files("python3", &[("../evil.py", "print(1)\n")]);
    let o = run(dir.path(), &sub, &Options::default()).unwrap();
    assert_eq!(o.verdict, Verdict::CompilationError);
    assert!(
        o.compile_log.contains("invalid file name"),
        "{}",
        o.compile_log
    );
    let none = files("c", &[("notes.txt", "hi\n")]);
    assert_eq!(verdict(dir.path(), &none), Verdict::CompilationError);
}

#[test]
fn cancel_stops_a_running_judging_quickly() {
    let _serial = judge_common::serial();
    let dir = echo_problem("name: Cancel\n");
    let sleeper = judge_common::source("python3", "z.py", "import time\ntime.sleep(30)\n");
    let cancel = CancelHandle::new();
    let options = Options {
        time_limit: Some(20.0),
        cancel: cancel.clone(),
        ..Options::default()
    };
    let trigger = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        cancel.cancel();
    });
    let started = Instant::now();
    let err = run(dir.path(), &sleeper, &options).unwrap_err();
    trigger.join().unwrap();
    assert!(matches!(err, JudgeError::Cancelled), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn trials_run_every_test_with_the_same_verdict() {
    let _serial = judge_common::serial();
    let dir = echo_problem("name: Trial\n");
    let wrong_on_a = judge_common::source(
        "python3",
        "w.py",
        "x = input()\nprint(0 if x == '42' else x)\n",
    );
    let normal = run(dir.path(), &wrong_on_a, &Options::default()).unwrap();
    let trial = run(
        dir.path(),
        &wrong_on_a,
        &Options {
            run_all: true,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(normal.details.len(), 2);
    assert_eq!(trial.details.len(), 3);
    assert_eq!((trial.verdict, trial.score), (normal.verdict, normal.score));
    let timings = trial.timings();
    assert_eq!(timings.len(), 3);
    assert_eq!(timings[2].test, "secret/b");
    assert_eq!(timings[2].status, "ok");
}

//! Multi-pass problems (contract §7) and legacy `output_validators/` with
//! several programs, judged for real (real sandboxes, real validators): every
//! pass reported in `details`, limits applying to each pass, the feedback
//! directory kept and `nextpass.in` taken out between passes, and the bad
//! validators (`nextpass.in` with exit 43 or 0, too many passes, a link) as
//! `validator.failed`, never a verdict.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod judge_common;

use std::path::{Path, PathBuf};

use judge_runner::judge::{JudgeError, Options, Outcome, Submission, TestDetail, Verdict, reason};
use judge_runner::package;

fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

fn judge(dir: &Path, submission: &Submission) -> Result<Outcome, JudgeError> {
    let problem = package::parse(dir).unwrap();
    judge_common::judge().judge(&problem, submission, &Options::default(), &mut |_| {})
}

fn example(problem: &str, submission: &str) -> Outcome {
    let dir = judge_common::examples_dir().join(problem);
    let path = dir.join("submissions").join(submission);
    let language = match path.extension().and_then(|e| e.to_str()) {
        Some("py") => "python3",
        Some("c") => "c",
        _ => "cpp",
    };
    let submission = judge_common::submission_from(language, &[path]);
    judge(&dir, &submission).unwrap_or_else(|e| panic!("{problem}/{submission:?}: {e}"))
}

/// The test's own row is its last pass (contract §7).
fn assert_row_is_last_pass(d: &TestDetail) {
    let last = d.passes.last().unwrap();
    assert_eq!(d.status, last.status, "{}", d.name);
    assert_eq!(d.cpu_seconds, last.cpu_seconds, "{}", d.name);
    assert_eq!(d.wall_seconds, last.wall_seconds, "{}", d.name);
    assert_eq!(d.memory_bytes, last.memory_bytes, "{}", d.name);
    for (i, pass) in d.passes.iter().enumerate() {
        assert_eq!(usize::try_from(pass.pass).unwrap(), i + 1, "{}", d.name);
    }
}

/// A 2023-07 multi-pass problem with one secret test and `validator` (Python).
fn multi_pass(extra_yaml: &str, validator: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "problem.yaml",
        &format!("problem_format_version: 2023-07-draft\ntype: multi-pass\n{extra_yaml}"),
    );
    write(dir.path(), "data/secret/1.in", "1\n");
    write(dir.path(), "data/secret/1.ans", "done\n");
    write(dir.path(), "output_validator/validate.py", validator);
    dir
}

/// Prints the number it reads (its pass, as these validators number them).
fn echo() -> Submission {
    judge_common::source("python3", "echo.py", "print(input())\n")
}

// ---------------------------------------------------------------- passes

#[test]
fn guesstwice_reports_both_passes_of_every_test() {
    let _serial = judge_common::serial();
    let outcome = example("guesstwice", "accepted/from_one.py");
    assert_eq!(outcome.verdict, Verdict::Accepted);
    assert_eq!(outcome.details.len(), 6, "a sample and five secret tests");
    for d in &outcome.details {
        assert_eq!(d.passes.len(), 2, "{}: {:?}", d.name, d.passes);
        assert_row_is_last_pass(d);
        assert!(d.passes.iter().all(|p| p.status == "ok"), "{:?}", d.passes);
        // Each pass's message is what it appended; the row has the whole file.
        assert!(
            d.passes[0].message.starts_with("pass 1: guessed 1"),
            "{:?}",
            d.passes
        );
        assert!(
            d.passes[1].message.starts_with("pass 2: found"),
            "{:?}",
            d.passes
        );
        assert_eq!(
            d.judge_message,
            format!("{}{}", d.passes[0].message, d.passes[1].message)
        );
    }
    let json = serde_json::to_value(&outcome.details).unwrap();
    let pass = &json[0]["passes"][1];
    for key in [
        "pass",
        "status",
        "cpu_seconds",
        "wall_seconds",
        "memory_bytes",
        "message",
    ] {
        assert!(pass.get(key).is_some(), "{key} missing from {pass}");
    }
    assert_eq!(pass["pass"], 2);

    // Rejected in the first pass: one pass, no second run.
    let outcome = example("guesstwice", "wrong_answer/zero.c");
    assert_eq!(outcome.verdict, Verdict::WrongAnswer);
    let d = &outcome.details[0];
    assert_eq!(d.passes.len(), 1, "{:?}", d.passes);
    assert_row_is_last_pass(d);
    assert!(
        d.passes[0].message.contains("not in 1..10"),
        "{:?}",
        d.passes
    );

    // Over the time limit in the second pass: the row is that pass.
    let outcome = example("guesstwice", "time_limit_exceeded/second_spin.cpp");
    assert_eq!(outcome.verdict, Verdict::TimeLimitExceeded);
    let d = &outcome.details[0];
    assert_eq!(d.passes.len(), 2, "{:?}", d.passes);
    assert_row_is_last_pass(d);
    assert_eq!(d.passes[0].status, "ok");
    assert!(d.status.contains("time_limit"), "{}", d.status);
}

#[test]
fn rematch_reports_both_interactive_passes() {
    let _serial = judge_common::serial();
    let outcome = example("rematch", "accepted/bisect.c");
    assert_eq!(outcome.verdict, Verdict::Accepted);
    for d in &outcome.details {
        assert_eq!(d.passes.len(), 2, "{}: {:?}", d.name, d.passes);
        assert_row_is_last_pass(d);
        assert!(
            d.passes[0].message.starts_with("game 1: found"),
            "{:?}",
            d.passes
        );
        assert!(
            d.passes[1].message.starts_with("game 2: found"),
            "{:?}",
            d.passes
        );
    }
    // The second game is played on what the first decided: a submission that
    // assumes 1..1000 loses it (or the sample's first, on 1..10).
    let outcome = example("rematch", "run_time_error/second_game_crash.py");
    assert_eq!(outcome.verdict, Verdict::RunTimeError);
    let d = &outcome.details[0];
    assert_eq!(d.passes.len(), 2, "{:?}", d.passes);
    assert_eq!(d.passes[0].status, "ok");
    assert_row_is_last_pass(d);
}

/// Pass k writes `nextpass.in` holding k+1 until pass `last`; checks on the
/// way that its state file stayed, that `nextpass.in` was taken out, and that
/// `input_file` is the input of this pass.
const COUNTING: &str = r#"
import os, sys
input_file, answer_file, feedback = sys.argv[1:4]
LAST = int(open(answer_file).read().split()[1]) if len(open(answer_file).read().split()) > 1 else 2
def done(code, message):
    open(os.path.join(feedback, "judgemessage.txt"), "a").write(message + "\n")
    sys.exit(code)
this = int(open(input_file).read())
said = int(sys.stdin.read())
state = os.path.join(feedback, "state.txt")
seen = int(open(state).read()) if os.path.exists(state) else 0
if seen != this - 1:
    done(43, "state.txt says %d before pass %d" % (seen, this))
if os.path.exists(os.path.join(feedback, "nextpass.in")):
    done(43, "nextpass.in is still there in pass %d" % this)
if said != this:
    done(43, "pass %d: the submission said %d" % (this, said))
open(state, "w").write(str(this))
if this < LAST:
    open(os.path.join(feedback, "nextpass.in"), "w").write("%d\n" % (this + 1))
done(42, "pass %d" % this)
"#;

#[test]
fn feedback_files_persist_and_nextpass_is_taken_out_up_to_the_cap() {
    let _serial = judge_common::serial();
    // Three passes asked for, three allowed.
    let dir = multi_pass("limits: {validation_passes: 3}\n", COUNTING);
    write(dir.path(), "data/secret/1.ans", "last 3\n");
    let outcome = judge(dir.path(), &echo()).unwrap();
    assert_eq!(outcome.verdict, Verdict::Accepted, "{:?}", outcome.details);
    let d = &outcome.details[0];
    assert_eq!(d.passes.len(), 3, "{:?}", d.passes);
    assert_row_is_last_pass(d);
    let messages: Vec<&str> = d.passes.iter().map(|p| p.message.trim()).collect();
    assert_eq!(messages, ["pass 1", "pass 2", "pass 3"]);

    // The same validator under the default cap of 2: asking for a third pass
    // is a judge error, not a verdict.
    let dir = multi_pass("", COUNTING);
    write(dir.path(), "data/secret/1.ans", "last 3\n");
    let err = judge(dir.path(), &echo()).unwrap_err();
    assert_eq!(err.reason(), reason::VALIDATOR_FAILED, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("pass 3") && text.contains("validation_passes is 2"),
        "{text}"
    );
}

#[test]
fn nextpass_with_another_exit_code_is_validator_failed() {
    let _serial = judge_common::serial();
    for code in [43, 0] {
        let validator = format!(
            "import sys\nopen(sys.argv[3] + 'nextpass.in', 'w').write('2\\n')\nsys.exit({code})\n"
        );
        let dir = multi_pass("", &validator);
        let err = judge(dir.path(), &echo()).unwrap_err();
        assert_eq!(err.reason(), reason::VALIDATOR_FAILED, "exit {code}: {err}");
        assert!(
            err.to_string().contains("nextpass.in"),
            "exit {code}: {err}"
        );
    }
    // Wrong Answer without nextpass.in is the verdict, in the first pass.
    let dir = multi_pass("", "import sys\nsys.exit(43)\n");
    let outcome = judge(dir.path(), &echo()).unwrap();
    assert_eq!(outcome.verdict, Verdict::WrongAnswer);
    assert_eq!(outcome.details[0].passes.len(), 1);
}

#[test]
fn a_nextpass_link_is_never_followed() {
    let _serial = judge_common::serial();
    // A link out of the feedback directory: read by the judge (root), it
    // would hand a host file to the submission.
    let validator =
        "import os, sys\nos.symlink('/etc/hostname', sys.argv[3] + 'nextpass.in')\nsys.exit(42)\n";
    let dir = multi_pass("", validator);
    let err = judge(dir.path(), &echo()).unwrap_err();
    assert_eq!(err.reason(), reason::VALIDATOR_FAILED, "{err}");
    assert!(err.to_string().contains("not a regular file"), "{err}");
}

#[test]
fn an_interactive_validator_writing_nextpass_and_rejecting_is_validator_failed() {
    let _serial = judge_common::serial();
    let dir = multi_pass(
        "",
        "import sys\nprint(1, flush=True)\nsys.stdin.readline()\n\
         open(sys.argv[3] + 'nextpass.in', 'w').write('2\\n')\nsys.exit(43)\n",
    );
    let yaml = "problem_format_version: 2023-07-draft\ntype: [interactive, multi-pass]\n";
    write(dir.path(), "problem.yaml", yaml);
    let err = judge(dir.path(), &echo()).unwrap_err();
    assert_eq!(err.reason(), reason::VALIDATOR_FAILED, "{err}");
    assert!(err.to_string().contains("exited with 43"), "{err}");
}

// ---------------------------------------------------------------- limits

/// Accepts every pass, asking for pass 2 and 3 (`validation_passes: 3`).
const THREE_PASSES: &str = r#"
import os, sys
input_file, _, feedback = sys.argv[1:4]
this = int(open(input_file).read())
sys.stdin.read()
if this < 3:
    open(os.path.join(feedback, "nextpass.in"), "w").write("%d\n" % (this + 1))
sys.exit(42)
"#;

#[test]
fn the_output_limit_applies_to_each_pass() {
    let _serial = judge_common::serial();
    let dir = multi_pass("limits: {validation_passes: 3, output: 1}\n", THREE_PASSES);
    // 700 KiB in each pass: 2.1 MiB in all, over the 1 MiB limit of one pass.
    let each = judge_common::source(
        "python3",
        "each.py",
        "import sys\nsys.stdin.read()\nsys.stdout.write(' ' * (700 * 1024) + '\\n')\n",
    );
    let outcome = judge(dir.path(), &each).unwrap();
    assert_eq!(outcome.verdict, Verdict::Accepted, "{:?}", outcome.details);
    assert_eq!(outcome.details[0].passes.len(), 3);
    // 1.2 MiB in the third pass alone is over it: that pass's verdict.
    let third = judge_common::source(
        "python3",
        "third.py",
        "import sys\nn = int(sys.stdin.read())\nsys.stdout.write(' ' * ((1200 if n == 3 else 1) * 1024) + '\\n')\n",
    );
    let outcome = judge(dir.path(), &third).unwrap();
    assert_eq!(outcome.verdict, Verdict::OutputLimitExceeded);
    let d = &outcome.details[0];
    assert_eq!(d.passes.len(), 3, "{:?}", d.passes);
    assert_eq!(d.passes[2].status, "output_limit");
    assert_row_is_last_pass(d);
}

#[test]
fn the_time_limit_applies_to_each_pass() {
    let _serial = judge_common::serial();
    let dir = multi_pass(
        "limits: {validation_passes: 3, time_limit: 2}\n",
        THREE_PASSES,
    );
    // 0.8 s of CPU in each pass: 2.4 s in all, over the 2 s of one pass (wide
    // margins both ways: CPU time, not wall time, and 5 s of wall per pass).
    let burn = judge_common::source(
        "c",
        "burn.c",
        "#include <stdio.h>\n#include <time.h>\n\
         int main(void) { int n; if (scanf(\"%d\", &n) != 1) return 1;\n\
         struct timespec t; volatile unsigned long x = 0;\n\
         do { x++; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); } while (t.tv_sec * 1000000000L + t.tv_nsec < 800000000L);\n\
         printf(\"%d\\n\", n); return 0; }\n",
    );
    let outcome = judge(dir.path(), &burn).unwrap();
    assert_eq!(outcome.verdict, Verdict::Accepted, "{:?}", outcome.details);
    let d = &outcome.details[0];
    assert_eq!(d.passes.len(), 3);
    let total: f64 = d.passes.iter().map(|p| p.cpu_seconds).sum();
    assert!(total > 2.0, "{total} s of CPU in all: {:?}", d.passes);
    assert!(
        (d.slowest_cpu_seconds() - 0.8).abs() < 0.5,
        "{:?}",
        d.passes
    );
}

// ---------------------------------------------------------------- legacy validators

/// A legacy package (`validation: custom`) with these files beside its test.
fn legacy(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "problem.yaml",
        "name: legacy\nvalidation: custom\n",
    );
    write(dir.path(), "data/secret/1.in", "1\n");
    write(dir.path(), "data/secret/1.ans", "1\n");
    for (rel, text) in files {
        write(dir.path(), rel, text);
    }
    dir
}

/// A Python validator that rejects outputs `reject` says, with `name` in its
/// message.
fn judging(name: &str, reject: &str) -> String {
    format!(
        "import sys\nout = sys.stdin.read().strip()\n\
         ok = not ({reject})\n\
         open(sys.argv[3] + 'judgemessage.txt', 'w').write('{name} ' + ('accepts' if ok else 'rejects') + '\\n')\n\
         sys.exit(42 if ok else 43)\n"
    )
}

fn prints(text: &str) -> Submission {
    judge_common::source("python3", "p.py", &format!("input()\nprint({text:?})\n"))
}

#[test]
fn several_legacy_validators_run_in_order_and_the_first_rejection_decides() {
    let _serial = judge_common::serial();
    let dir = legacy(&[
        (
            "output_validators/a_number.py",
            &judging("a", "not out.isdigit()"),
        ),
        (
            "output_validators/b_even/check.py",
            &judging("b", "int(out) % 2 == 1"),
        ),
        ("output_validators/shared.h", "// not a program\n"),
        ("output_validators/README", "notes\n"),
    ]);
    let problem = package::parse(dir.path()).unwrap();
    assert_eq!(problem.validator.custom_programs().len(), 2);

    let outcome = judge(dir.path(), &prints("4")).unwrap();
    assert_eq!(outcome.verdict, Verdict::Accepted);
    assert_eq!(outcome.details[0].judge_message, "a accepts\nb accepts\n");
    // The second one rejects.
    let outcome = judge(dir.path(), &prints("3")).unwrap();
    assert_eq!(outcome.verdict, Verdict::WrongAnswer);
    assert_eq!(outcome.details[0].judge_message, "b rejects\n");
    // Both would reject: the first one's message, the second never ran.
    let outcome = judge(dir.path(), &prints("x")).unwrap();
    assert_eq!(outcome.verdict, Verdict::WrongAnswer);
    assert_eq!(outcome.details[0].judge_message, "a rejects\n");

    // One of them failing is an infrastructure failure naming it.
    let dir = legacy(&[
        ("output_validators/a_number.py", &judging("a", "False")),
        ("output_validators/b_broken.py", "import sys\nsys.exit(3)\n"),
    ]);
    let err = judge(dir.path(), &prints("4")).unwrap_err();
    assert_eq!(err.reason(), reason::VALIDATOR_FAILED, "{err}");
    assert!(err.to_string().contains("b_broken"), "{err}");
}

#[test]
fn a_legacy_validator_with_its_header_beside_it_builds_and_judges() {
    let _serial = judge_common::serial();
    // As a public interactive package keeps it: validate.cpp and the header
    // it includes directly in output_validators/, no subfolder.
    let header = "#include <cstdlib>\ninline int verdict(bool ok) { return ok ? 42 : 43; }\n";
    let source = "#include <iostream>\n#include <string>\n#include \"validate.h\"\n\
                  int main() { std::string word; std::cin >> word; return verdict(word == \"yes\"); }\n";
    let dir = legacy(&[
        ("output_validators/validate.cpp", source),
        ("output_validators/validate.h", header),
    ]);
    let problem = package::parse(dir.path()).unwrap();
    assert!(
        problem.warnings.iter().any(|w| w.contains("validate.h")),
        "{:?}",
        problem.warnings
    );
    assert_eq!(
        judge(dir.path(), &prints("yes")).unwrap().verdict,
        Verdict::Accepted
    );
    assert_eq!(
        judge(dir.path(), &prints("no")).unwrap().verdict,
        Verdict::WrongAnswer
    );
}

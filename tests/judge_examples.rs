//! Every example submission shipped in `examples/problems/` gets the verdict of
//! the folder it sits in (`accepted`, `wrong_answer`, ...), judged for real: real
//! compilers, real sandboxes, real validators. One test per problem, so the test
//! harness spreads them over the cores.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod judge_common;

use judge_runner::judge::{Options, Verdict};
use judge_runner::package;

fn judge_examples(problem_name: &str, min_submissions: usize) {
    let _serial = judge_common::serial();
    let dir = judge_common::examples_dir().join(problem_name);
    let problem = package::parse(&dir).unwrap();
    assert!(
        problem.submissions.len() >= min_submissions,
        "{problem_name}: only {} example submissions",
        problem.submissions.len()
    );
    let judge = judge_common::judge();
    let languages = judge.config().languages.clone();
    let mut failures = Vec::new();
    for sub in &problem.submissions {
        let expected = Verdict::from_folder(&sub.expected)
            .unwrap_or_else(|| panic!("{}: folder {:?} names no verdict", sub.name, sub.expected));
        let first = sub.files[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let language = languages.detect(&first).unwrap().id.clone();
        let submission = judge_common::submission_from(&language, &sub.files);
        let outcome = judge
            .judge(&problem, &submission, &Options::default(), &mut |_| {})
            .unwrap_or_else(|e| panic!("{problem_name}/{}/{}: {e}", sub.expected, sub.name));
        let label = format!("{problem_name}/{}/{}", sub.expected, sub.name);
        eprintln!(
            "{label}: {} {}/{}",
            outcome.verdict, outcome.score, outcome.max_score
        );
        if outcome.verdict != expected {
            let last = outcome.details.last();
            failures.push(format!(
                "{label}: got {} (last test {:?}: {:?} {:?}); log: {}",
                outcome.verdict,
                last.map(|d| &d.name),
                last.map(|d| &d.status),
                last.map(|d| &d.judge_message),
                outcome.compile_log
            ));
            continue;
        }
        match sub.expected.as_str() {
            "accepted" => assert_eq!(outcome.score, outcome.max_score, "{label}"),
            "partially_accepted" => {
                assert!(
                    outcome.score > 0.0 && outcome.score < outcome.max_score,
                    "{label}: {}",
                    outcome.score
                )
            }
            _ if expected != Verdict::Accepted => {
                assert!(outcome.score < outcome.max_score, "{label}")
            }
            _ => {}
        }
        if expected == Verdict::CompilationError {
            assert!(
                !outcome.compile_log.is_empty(),
                "{label}: empty compile log"
            );
            assert!(outcome.details.is_empty());
        } else {
            assert!(!outcome.details.is_empty(), "{label}: no test ran");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn addition_pass_fail_every_verdict() {
    judge_examples("addition", 21);
}

#[test]
fn circle_float_tolerance() {
    judge_examples("circle", 6);
}

#[test]
fn twosum_custom_validator() {
    judge_examples("twosum", 9);
}

#[test]
fn guess_interactive() {
    judge_examples("guess", 12);
}

#[test]
fn groups_scoring() {
    judge_examples("groups", 9);
}

#[test]
fn guesstwice_multi_pass() {
    judge_examples("guesstwice", 7);
}

#[test]
fn rematch_interactive_multi_pass() {
    judge_examples("rematch", 7);
}

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use super::*;
use crate::package::{Grading, ScoreAggregation, VerdictAggregation};

/// A runner whose verdict per test name is scripted; records what it ran.
struct Scripted {
    wrong: Vec<&'static str>,
    ran: Vec<String>,
}

impl CaseRunner for Scripted {
    fn run_case(&mut self, case: &TestCase, _group: &TestGroup) -> Result<CaseRun, JudgeError> {
        self.ran.push(case.name.clone());
        let verdict = if self.wrong.iter().any(|w| *w == case.name) {
            Verdict::WrongAnswer
        } else {
            Verdict::Accepted
        };
        Ok(CaseRun {
            verdict,
            custom_score: None,
            cpu_seconds: 0.0,
            wall_seconds: 0.0,
            memory_bytes: 0,
            exit_code: Some(0),
            signal: None,
            status: "ok".into(),
            judge_message: String::new(),
            stderr: String::new(),
            stderr_bytes: 0,
            passes: Vec::new(),
        })
    }
    fn cancelled(&self) -> bool {
        false
    }
}

fn case(name: &str) -> TestItem {
    // Paths that do not exist: no reuse key, every test runs.
    TestItem::Case(TestCase {
        name: name.into(),
        input: PathBuf::from(format!("/nonexistent/{name}.in")),
        answer: PathBuf::from(format!("/nonexistent/{name}.ans")),
    })
}

fn group(name: &str, grading: Grading, items: Vec<TestItem>) -> TestGroup {
    TestGroup {
        name: name.into(),
        path: PathBuf::from(name),
        grading,
        items,
    }
}

/// The grading tree of an oddecho-shaped problem (two subtasks under secret), resolved as the parser
/// resolves inheritance.
fn oddecho() -> TestGroup {
    let root_g = Grading {
        on_reject: OnReject::Continue,
        range: (0.0, 100.0),
        ignore_sample: true,
        ..Grading::default()
    };
    let sample_g = Grading {
        on_reject: OnReject::Continue,
        range: (0.0, 0.0),
        accept_score: 0.0,
        verdict_aggregation: VerdictAggregation::FirstError,
        ..Grading::default()
    };
    let secret_g = Grading {
        on_reject: OnReject::Continue,
        range: (0.0, 100.0),
        verdict_aggregation: VerdictAggregation::FirstError,
        accept_if_any_accepted: true,
        ..Grading::default()
    };
    let sub_g = Grading {
        on_reject: OnReject::Break,
        accept_score: 50.0,
        range: (0.0, 50.0),
        score_aggregation: ScoreAggregation::Min,
        ..Grading::default()
    };
    let sub1 = group(
        "secret/subtask1",
        sub_g.clone(),
        ["1", "2", "3"]
            .iter()
            .map(|n| case(&format!("secret/subtask1/{n}")))
            .collect(),
    );
    let sub2 = group(
        "secret/subtask2",
        sub_g,
        ["01", "02", "03", "1", "2", "3"]
            .iter()
            .map(|n| case(&format!("secret/subtask2/{n}")))
            .collect(),
    );
    group(
        "",
        root_g,
        vec![
            TestItem::Group(group(
                "sample",
                sample_g,
                vec![case("sample/1"), case("sample/2")],
            )),
            TestItem::Group(group(
                "secret",
                secret_g,
                vec![TestItem::Group(sub1), TestItem::Group(sub2)],
            )),
        ],
    )
}

fn walk(root: &TestGroup, wrong: Vec<&'static str>, mode: WalkMode) -> (Walked, Vec<String>) {
    let mut runner = Scripted {
        wrong,
        ran: Vec::new(),
    };
    let mut seen = 0;
    let mut progress = |p: Progress| {
        seen += 1;
        assert_eq!(p.done, seen);
    };
    let walked = Walk::new(&mut runner, mode, root.cases().len(), &mut progress)
        .run(root)
        .unwrap();
    (walked, runner.ran)
}

const SCORING: WalkMode = WalkMode {
    pass_fail: false,
    run_all: false,
};

#[test]
fn oddecho_full_solution_scores_100() {
    let root = oddecho();
    let (w, ran) = walk(&root, vec![], SCORING);
    assert_eq!(w.root, Graded::new(Verdict::Accepted, 100.0));
    assert_eq!(ran.len(), 11);
    assert_eq!(grading::max_score(&root), 100.0);
}

#[test]
fn oddecho_partial_solution_scores_50_accepted() {
    let root = oddecho();
    // Correct only when n = 5: sample 2 and every subtask2 test but 05 fail.
    let (w, ran) = walk(&root, vec!["sample/2", "secret/subtask2/01"], SCORING);
    assert_eq!(w.root, Graded::new(Verdict::Accepted, 50.0));
    // subtask2 breaks at its first failure.
    assert!(!ran.contains(&"secret/subtask2/02".to_string()));
    assert!(ran.contains(&"sample/2".to_string()), "samples continue");
}

#[test]
fn oddecho_wrong_everywhere_is_wrong_answer() {
    let root = oddecho();
    let (w, _) = walk(
        &root,
        vec!["secret/subtask1/1", "secret/subtask2/01"],
        SCORING,
    );
    assert_eq!(w.root, Graded::new(Verdict::WrongAnswer, 0.0));
}

#[test]
fn pass_fail_stops_at_first_failure() {
    let root = group(
        "",
        Grading::default(),
        vec![
            TestItem::Group(group("sample", Grading::default(), vec![case("sample/1")])),
            TestItem::Group(group(
                "secret",
                Grading {
                    on_reject: OnReject::Continue,
                    ..Grading::default()
                },
                vec![case("secret/a"), case("secret/b"), case("secret/c")],
            )),
        ],
    );
    let mode = WalkMode {
        pass_fail: true,
        run_all: false,
    };
    let (w, ran) = walk(&root, vec!["secret/b", "secret/c"], mode);
    assert_eq!(w.first_failure, Some(Verdict::WrongAnswer));
    assert_eq!(ran, ["sample/1", "secret/a", "secret/b"]);

    // Trials run everything, but the verdict is still the first failure's.
    let mode = WalkMode {
        pass_fail: true,
        run_all: true,
    };
    let (w, ran) = walk(&root, vec!["secret/b"], mode);
    assert_eq!(ran.len(), 4);
    assert_eq!(w.details.len(), 4);
    assert_eq!(w.first_failure, Some(Verdict::WrongAnswer));
}

#[test]
fn run_all_does_not_change_scores() {
    let root = oddecho();
    let mode = WalkMode {
        pass_fail: false,
        run_all: true,
    };
    let (w, ran) = walk(&root, vec!["sample/2", "secret/subtask2/01"], mode);
    assert_eq!(ran.len(), 11);
    assert_eq!(w.root, Graded::new(Verdict::Accepted, 50.0));
}

//! Walks the test data in judging order (samples, then secret groups, items by
//! name), decides what to run and what to skip, and grades groups on the way
//! up, as problemtools' `TestCaseGroup.run_submission` does.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::package::{OnReject, TestCase, TestGroup, TestItem};

use super::Progress;
use super::boxed::BoxReport;
use super::capture::Captured;
use super::details::{PassDetail, TestDetail, cut_message};
use super::error::JudgeError;
use super::grading::{self, Graded};
use super::verdict::Verdict;

/// Judge messages kept in details are cut to this size.
const MESSAGE_MAX: usize = 4096;

/// What one run of the submission on one test produced, before scoring.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CaseRun {
    pub verdict: Verdict,
    /// `score.txt` of a custom validator, when it wrote one.
    pub custom_score: Option<f64>,
    pub cpu_seconds: f64,
    pub wall_seconds: f64,
    pub memory_bytes: u64,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub status: String,
    pub judge_message: String,
    /// The first 64 KiB of the submission's stderr (never a verdict).
    pub stderr: String,
    /// How many bytes it wrote to stderr in all.
    pub stderr_bytes: u64,
    /// The passes of a multi-pass test (the fields above are its last pass's);
    /// empty otherwise.
    pub passes: Vec<PassDetail>,
}

impl CaseRun {
    /// A test's run from the submission's sandbox report and captured stderr,
    /// with what decided it.
    pub(crate) fn new(
        report: &BoxReport,
        stderr: &Captured,
        verdict: Verdict,
        custom_score: Option<f64>,
        judge_message: String,
    ) -> Self {
        CaseRun {
            stderr: stderr.text(),
            stderr_bytes: stderr.total,
            verdict,
            custom_score,
            cpu_seconds: report.cpu_seconds,
            wall_seconds: report.wall_seconds,
            memory_bytes: report.memory_bytes,
            exit_code: report.exit_code,
            signal: report.signal,
            status: report.status.as_str().to_string(),
            judge_message,
            passes: Vec::new(),
        }
    }
}

/// Runs the submission on one test (sandbox, validator). Implemented by the
/// judge; tests of the walk use a scripted one.
pub(crate) trait CaseRunner {
    fn run_case(&mut self, case: &TestCase, group: &TestGroup) -> Result<CaseRun, JudgeError>;
    /// Checked before each test: the caller may cancel between tests.
    fn cancelled(&self) -> bool;
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct WalkMode {
    /// Pass-fail: stop at the first failing test; its verdict is the verdict.
    pub pass_fail: bool,
    /// Run every test even past a break (trials want all timings); the grading
    /// still ignores what a break would have skipped.
    pub run_all: bool,
}

/// The result of a walk: the root's grade, the first failure in judging order
/// among the tests that counted, and the details of every test run.
pub(crate) struct Walked {
    pub root: Graded,
    pub first_failure: Option<Verdict>,
    pub details: Vec<TestDetail>,
}

type ReuseKey = (PathBuf, PathBuf, Vec<String>);

pub(crate) struct Walk<'a> {
    runner: &'a mut dyn CaseRunner,
    mode: WalkMode,
    progress: &'a mut dyn FnMut(Progress),
    total: usize,
    details: Vec<TestDetail>,
    reuse: HashMap<ReuseKey, CaseRun>,
    first_failure: Option<Verdict>,
}

impl<'a> Walk<'a> {
    pub fn new(
        runner: &'a mut dyn CaseRunner,
        mode: WalkMode,
        total: usize,
        progress: &'a mut dyn FnMut(Progress),
    ) -> Self {
        Walk {
            runner,
            mode,
            progress,
            total,
            details: Vec::new(),
            reuse: HashMap::new(),
            first_failure: None,
        }
    }

    pub fn run(mut self, root: &TestGroup) -> Result<Walked, JudgeError> {
        let graded = self.group(root, true, true)?;
        Ok(Walked {
            root: graded,
            first_failure: self.first_failure,
            details: self.details,
        })
    }

    /// `counts`: whether this group's results can still reach the verdict (false
    /// once an ancestor broke off and we only run on for timings).
    fn group(&mut self, group: &TestGroup, root: bool, counts: bool) -> Result<Graded, JudgeError> {
        let breaks = self.mode.pass_fail || group.grading.on_reject == OnReject::Break;
        let mut results = Vec::with_capacity(group.items.len());
        let mut active = true;
        for item in &group.items {
            if !active && !self.mode.run_all {
                break;
            }
            let graded = match item {
                TestItem::Case(case) => self.case(case, group, counts && active)?,
                TestItem::Group(sub) => self.group(sub, false, counts && active)?,
            };
            if active {
                results.push(graded);
            }
            if breaks && !graded.verdict.is_accepted() {
                active = false;
            }
        }
        let ignore_sample = root && group.grading.ignore_sample;
        Ok(grading::aggregate(&group.grading, &results, ignore_sample))
    }

    fn case(
        &mut self,
        case: &TestCase,
        group: &TestGroup,
        counts: bool,
    ) -> Result<Graded, JudgeError> {
        if self.runner.cancelled() {
            return Err(JudgeError::Cancelled);
        }
        let key = reuse_key(case, group);
        let (run, reused) = match key.as_ref().and_then(|k| self.reuse.get(k)) {
            Some(run) => (run.clone(), true),
            None => {
                let run = self.runner.run_case(case, group)?;
                if let Some(k) = key {
                    self.reuse.insert(k, run.clone());
                }
                (run, false)
            }
        };
        let score = grading::test_score(group, run.verdict, run.custom_score);
        if counts && self.first_failure.is_none() && !run.verdict.is_accepted() {
            self.first_failure = Some(run.verdict);
        }
        let detail = TestDetail {
            name: case.name.clone(),
            group: group.name.clone(),
            verdict: run.verdict,
            cpu_seconds: run.cpu_seconds,
            wall_seconds: run.wall_seconds,
            memory_bytes: run.memory_bytes,
            exit_code: run.exit_code,
            signal: run.signal,
            score,
            judge_message: cut_message(run.judge_message, MESSAGE_MAX),
            status: run.status,
            reused,
            stderr: run.stderr,
            stderr_bytes: run.stderr_bytes,
            passes: run
                .passes
                .into_iter()
                .map(|p| PassDetail {
                    message: cut_message(p.message, MESSAGE_MAX),
                    ..p
                })
                .collect(),
        };
        self.details.push(detail.clone());
        (self.progress)(Progress {
            done: self.details.len(),
            total: self.total,
            last: detail,
        });
        Ok(Graded::new(run.verdict, score))
    }
}

/// Tests whose input and answer are the same files (symlinks) and whose groups
/// pass the same validator flags give the same result: problemtools reuses it.
fn reuse_key(case: &TestCase, group: &TestGroup) -> Option<ReuseKey> {
    let input = case.input.canonicalize().ok()?;
    let answer = case.answer.canonicalize().ok()?;
    Some((input, answer, group.grading.output_validator_flags.clone()))
}

#[cfg(test)]
mod tests;

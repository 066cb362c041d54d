//! Running the submission on one test in the sandbox and judging its output:
//! the sandbox status decides first (time, memory, output, crash), then the
//! output validator (each of them in order, when a legacy package has several).
//! Also what every way of running a test shares: the judging's context
//! ([`SandboxCases`]) and one pass of a test ([`Pass`], [`PassRun`]).

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::package::{Problem, TestCase, TestGroup};

use super::Options;
use super::boxed::{BoxLimits, BoxReport, BoxRun, BoxStatus, JudgeSlot, Stream, WorkDir};
use super::capture::{self, Captured};
use super::compile::Program;
use super::default_validator;
use super::engine::CaseRun;
use super::error::JudgeError;
use super::validator::{self, BuiltValidator, ValidatorBox};
use super::verdict::{Verdict, status_verdict};

const MIB: u64 = 1 << 20;

/// Everything a test run needs, for the whole judging.
pub(crate) struct SandboxCases<'a> {
    pub slot: &'a JudgeSlot,
    pub work: &'a WorkDir,
    pub problem: &'a Problem,
    pub program: &'a Program,
    /// The custom validators in the order they run; empty for the default one.
    pub validators: &'a [Arc<BuiltValidator>],
    pub limits: BoxLimits,
}

/// One run of the submission on a test (a multi-pass test has several).
pub(crate) struct Pass<'a> {
    /// What the submission reads: `None` for the test's own `.in`; from the
    /// second pass of a multi-pass test on, the judge's copy of the
    /// `nextpass.in` the validator wrote in the pass before.
    pub input: Option<&'a Path>,
    /// One box per validator, in order (none for the default validator): the
    /// feedback directories last for the whole test, every pass of it.
    pub vboxes: &'a [ValidatorBox],
}

/// What one pass produced: the test's run so far, and how the (last)
/// validator ended, which says whether it may ask for another pass.
pub(crate) struct PassRun {
    pub run: CaseRun,
    /// The validator's exit code when it exited (0 included); `None` when it
    /// did not run, or was killed.
    pub validator_exit: Option<i32>,
}

impl PassRun {
    /// A pass the submission's own end decided; no validator ran.
    fn without_validator(run: CaseRun) -> Self {
        PassRun {
            run,
            validator_exit: None,
        }
    }
}

/// A run's exit code when it exited by itself: 0, or the non-zero code.
pub(crate) fn exit_code(report: &BoxReport) -> Option<i32> {
    match report.status {
        BoxStatus::Ok => Some(0),
        BoxStatus::NonzeroExit => report.exit_code,
        _ => None,
    }
}

impl<'a> SandboxCases<'a> {
    pub fn new(
        slot: &'a JudgeSlot,
        work: &'a WorkDir,
        problem: &'a Problem,
        options: &Options,
        program: &'a Program,
        validators: &'a [Arc<BuiltValidator>],
    ) -> Self {
        let time = problem.time_limit(options.time_limit);
        let limits = BoxLimits {
            time,
            wall: 2.0 * time + 1.0,
            memory_bytes: problem.limits.memory_mib * MIB,
            processes: program.processes,
            output_bytes: problem.limits.output_mib.max(1) * MIB,
        };
        SandboxCases {
            slot,
            work,
            problem,
            program,
            validators,
            limits,
        }
    }

    /// Fresh boxes for the test's validators, one each (their feedback
    /// directories start empty).
    pub fn validator_boxes(&self) -> Result<Vec<ValidatorBox>, JudgeError> {
        (0..self.validators.len())
            .map(|i| {
                ValidatorBox::create(
                    self.work.fresh(&format!("validator-{i}"))?,
                    self.work.path().join("validator.err"),
                )
            })
            .collect()
    }

    /// The submission's run on a test: its box, stdio and limits.
    pub fn submission_run<'b>(
        &self,
        box_dir: &'b Path,
        stdin: Stream,
        stdout: Stream,
        stderr: Stream,
    ) -> BoxRun<'b> {
        BoxRun {
            argv: self.program.argv.clone(),
            box_dir,
            validator_box: false,
            binds: self.program.binds.clone(),
            stdin,
            stdout,
            stderr,
            limits: self.limits,
            env: self.program.env.clone(),
        }
    }

    /// One pass of a test of a problem that is not interactive: the
    /// submission, then each output validator on what it wrote, in order, until
    /// one rejects it.
    pub fn run_plain(
        &self,
        case: &TestCase,
        group: &TestGroup,
        pass: &Pass<'_>,
    ) -> Result<PassRun, JudgeError> {
        let box_dir = self.work.fresh("box")?;
        let output = self.work.path().join("output");
        // stderr through a pipe: kept to 64 KiB, never an output limit.
        let (mut stderr, capture) = capture::start(1)?;
        let stderr = stderr.pop().unwrap_or(Stream::Null);
        let input = pass.input.unwrap_or(&case.input).to_path_buf();
        let run = self.submission_run(
            &box_dir,
            Stream::Path(input),
            Stream::Path(output.clone()),
            stderr,
        );
        let report = self.slot.run("running the submission", run)?;
        let stderr = capture.finish()?;
        if let Some(verdict) = status_verdict(report.status) {
            let run = CaseRun::new(&report, &stderr, verdict, None, String::new());
            return Ok(PassRun::without_validator(run));
        }
        if self.validators.is_empty() {
            let run = self.default_validate(case, group, &report, &stderr, output)?;
            return Ok(PassRun::without_validator(run));
        }
        let mut accepted_messages = String::new();
        let mut score = None;
        let mut validator_exit = None;
        for (validator, vbox) in self.validators.iter().zip(pass.vboxes) {
            let run = validator.box_run(validator::RunSpec {
                problem: self.problem,
                case,
                group,
                vbox,
                pass_input: pass.input,
                stdin: Stream::Path(output.clone()),
                stdout: Stream::Null,
                wall: None,
                validator_box: true,
            })?;
            let vreport = self.slot.run("running the output validator", run)?;
            validator_exit = exit_code(&vreport);
            let said = validator::interpret(&vreport, vbox, self.problem.kind, &case.name)
                .map_err(|e| match e {
                    // Say which one when there are several.
                    JudgeError::Validator { test, message } if self.validators.len() > 1 => {
                        JudgeError::Validator {
                            test,
                            message: format!("{}: {message}", validator.name),
                        }
                    }
                    e => e,
                })?;
            if !said.verdict.is_accepted() {
                // The first rejection decides (legacy: every validator must accept).
                let run = CaseRun::new(
                    &report,
                    &stderr,
                    said.verdict,
                    said.score,
                    said.judge_message,
                );
                return Ok(PassRun {
                    run,
                    validator_exit,
                });
            }
            accepted_messages.push_str(&said.judge_message);
            // Several validators: the first `score.txt` in their order counts.
            score = score.or(said.score);
        }
        Ok(PassRun {
            run: CaseRun::new(
                &report,
                &stderr,
                Verdict::Accepted,
                score,
                accepted_messages,
            ),
            validator_exit,
        })
    }

    fn default_validate(
        &self,
        case: &TestCase,
        group: &TestGroup,
        report: &BoxReport,
        stderr: &Captured,
        output: PathBuf,
    ) -> Result<CaseRun, JudgeError> {
        // The problem's flags with the group's `output_validator_flags` on top.
        let flags = match self.problem.default_validator_flags(group) {
            Some(Ok(flags)) => flags,
            Some(Err(e)) => {
                return Err(JudgeError::package(format!("group {}: {e}", group.name)));
            }
            None => {
                return Err(JudgeError::package(
                    "a custom validator was expected but not built",
                ));
            }
        };
        let answer = std::fs::File::open(&case.answer)
            .map_err(|e| JudgeError::package(format!("{}: {e}", case.answer.display())))?;
        let out = std::fs::File::open(&output).map_err(|e| JudgeError::io(&output, e))?;
        let judged = default_validator::validate(
            BufReader::with_capacity(1 << 16, answer),
            BufReader::with_capacity(1 << 16, out),
            &flags,
        )
        .map_err(|e| JudgeError::io(&output, e))?;
        let verdict = if judged.accepted {
            Verdict::Accepted
        } else {
            Verdict::WrongAnswer
        };
        Ok(CaseRun::new(report, stderr, verdict, None, judged.message))
    }
}

//! Running the submission on one test in the sandbox and judging its output:
//! the sandbox status decides first (time, memory, output, crash), then the
//! output validator.

use std::io::BufReader;
use std::path::PathBuf;

use crate::package::{Problem, TestCase, TestGroup};

use super::Options;
use super::boxed::{BoxLimits, BoxReport, BoxRun, Slot, Stream, WorkDir};
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
    pub slot: &'a Slot,
    pub work: &'a WorkDir,
    pub problem: &'a Problem,
    pub program: &'a Program,
    pub validator: Option<&'a BuiltValidator>,
    pub limits: BoxLimits,
}

impl<'a> SandboxCases<'a> {
    pub fn new(
        slot: &'a Slot,
        work: &'a WorkDir,
        problem: &'a Problem,
        options: &Options,
        program: &'a Program,
        validator: Option<&'a BuiltValidator>,
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
            validator,
            limits,
        }
    }

    /// The submission's run on a test: its box, stdio and limits.
    pub fn submission_run<'b>(
        &self,
        box_dir: &'b std::path::Path,
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

    /// Runs a test of a problem that is not interactive: the submission, then
    /// the output validator on what it wrote.
    pub fn run_plain(&self, case: &TestCase, group: &TestGroup) -> Result<CaseRun, JudgeError> {
        let box_dir = self.work.fresh("box")?;
        let output = self.work.path().join("output");
        // stderr through a pipe: kept to 64 KiB, never an output limit.
        let (mut stderr, capture) = capture::start(1)?;
        let stderr = stderr.pop().unwrap_or(Stream::Null);
        let run = self.submission_run(
            &box_dir,
            Stream::Path(case.input.clone()),
            Stream::Path(output.clone()),
            stderr,
        );
        let report = self.slot.run("running the submission", run)?;
        let stderr = capture.finish()?;
        if let Some(verdict) = status_verdict(report.status) {
            return Ok(CaseRun::new(&report, &stderr, verdict, None, String::new()));
        }
        match self.validator {
            None => self.default_validate(case, group, &report, &stderr, output),
            Some(v) => {
                let vbox = ValidatorBox::create(
                    self.work.fresh("validator")?,
                    self.work.path().join("validator.err"),
                )?;
                let run = v.box_run(validator::RunSpec {
                    problem: self.problem,
                    case,
                    group,
                    vbox: &vbox,
                    stdin: Stream::Path(output),
                    stdout: Stream::Null,
                    wall: None,
                    validator_box: true,
                })?;
                let vreport = self.slot.run("running the output validator", run)?;
                let said = validator::interpret(&vreport, &vbox, self.problem.kind, &case.name)?;
                Ok(CaseRun::new(
                    &report,
                    &stderr,
                    said.verdict,
                    said.score,
                    said.judge_message,
                ))
            }
        }
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

//! Interactive problems: the validator's stdout is the submission's stdin and
//! the other way round, both sandboxed, each on its own thread. Who decides
//! follows problemtools (`support/interactive/interactive.cc` and
//! `validate_interactive`) as contract §2 states it.

use std::os::fd::{AsFd, OwnedFd};
use std::time::Instant;

use nix::fcntl::{FcntlArg, OFlag, fcntl};

use crate::package::{TestCase, TestGroup};

use super::boxed::{BoxReport, BoxStatus, Stream};
use super::cases::{SandboxCases, case_run, status_verdict};
use super::engine::CaseRun;
use super::error::JudgeError;
use super::validator::{self, BuiltValidator, RunSpec, ValidatorBox, ValidatorVerdict};
use super::verdict::Verdict;

/// interactive.cc asks for 1 MiB pipes (the unprivileged maximum).
const PIPE_SIZE: i32 = 1 << 20;
const SIGPIPE: i32 = 13;

fn pipe() -> Result<(OwnedFd, OwnedFd), JudgeError> {
    // O_CLOEXEC: the other sandbox, forked at the same moment from this
    // process, must not keep a copy of these ends past its exec.
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| JudgeError::Sandbox {
        what: "creating the interactive pipes".to_string(),
        message: e.to_string(),
    })?;
    // Best effort, as interactive.cc: a smaller pipe only costs speed.
    let _ = fcntl(read.as_fd(), FcntlArg::F_SETPIPE_SZ(PIPE_SIZE));
    Ok((read, write))
}

/// Who decides, in contract order: the validator's Wrong Answer when it exited
/// first; else the submission's time limit; else its crash (a SIGPIPE from
/// writing to a validator that has finished is not one); else the validator.
pub(crate) fn decide(
    validator: Result<ValidatorVerdict, JudgeError>,
    submission: &BoxReport,
    validator_first: bool,
) -> Result<(Verdict, Option<f64>, String), JudgeError> {
    // A validator that crashed is a judge error whoever finished first.
    let said = validator?;
    if validator_first && said.verdict == Verdict::WrongAnswer {
        return Ok((Verdict::WrongAnswer, None, said.judge_message));
    }
    let broken_pipe =
        submission.status == BoxStatus::Signaled && submission.signal == Some(SIGPIPE);
    if let Some(verdict) = status_verdict(submission.status).filter(|_| !broken_pipe) {
        return Ok((verdict, None, said.judge_message));
    }
    Ok((said.verdict, said.score, said.judge_message))
}

fn dup(fd: &OwnedFd) -> Result<OwnedFd, JudgeError> {
    fd.try_clone().map_err(|e| JudgeError::Sandbox {
        what: "duplicating an interactive pipe end".to_string(),
        message: e.to_string(),
    })
}

pub(crate) fn run(
    cases: &SandboxCases<'_>,
    validator: &BuiltValidator,
    case: &TestCase,
    group: &TestGroup,
) -> Result<CaseRun, JudgeError> {
    let (to_submission_read, to_submission_write) = pipe()?;
    let (to_validator_read, to_validator_write) = pipe()?;
    // The sandbox closes its own copies of the ends it hands over as soon as the
    // program holds them. Like interactive.cc, we keep a copy of each program's
    // ends until that program's run has returned and its end time is taken: the
    // peer then sees EOF (or SIGPIPE) only after that, so "who ended first" is
    // cause and effect, not a race between two supervisors.
    let validator_ends = [dup(&to_submission_write)?, dup(&to_validator_read)?];
    let submission_ends = [dup(&to_validator_write)?];
    // Never closed before both end (interactive.cc): a validator writing to a
    // submission that has finished is not killed by SIGPIPE.
    let keep_reader = dup(&to_submission_read)?;

    let sub_box = cases.work.fresh("box")?;
    let vbox = ValidatorBox::create(
        cases.work.fresh("validator")?,
        cases.work.path().join("validator.err"),
    )?;
    let sub_run = cases.submission_run(
        &sub_box,
        Stream::Fd(to_submission_read),
        Stream::Fd(to_validator_write),
        Stream::Path(cases.work.path().join("stderr")),
    );
    let validation_time = cases.problem.limits.validation_time.unwrap_or(30.0);
    let val_run = validator.box_run(RunSpec {
        problem: cases.problem,
        case,
        group,
        vbox: &vbox,
        stdin: Stream::Fd(to_validator_read),
        stdout: Stream::Fd(to_submission_write),
        // The submission's wall limit must end a deadlock first (as TLE).
        wall: Some(cases.limits.wall + validation_time),
        validator_box: true,
    })?;
    let slot = cases.slot;
    let (val_result, sub_result) = std::thread::scope(|s| {
        let val = s.spawn(move || {
            let ended = slot.run_timed("running the interactive validator", val_run);
            drop(validator_ends);
            ended
        });
        let sub = s.spawn(move || {
            let ended = slot.run_timed("running the submission", sub_run);
            drop(submission_ends);
            ended
        });
        (join(val), join(sub))
    });
    drop(keep_reader);
    let (sub_report, sub_end) = sub_result?;
    let (val_report, val_end) = val_result?;
    let validator_first = val_end < sub_end;
    let said = validator::interpret(&val_report, &vbox, cases.problem.kind, &case.name);
    let (verdict, score, message) = decide(said, &sub_report, validator_first)?;
    Ok(case_run(&sub_report, verdict, score, message))
}

type Timed = Result<(BoxReport, Instant), JudgeError>;

fn join(handle: std::thread::ScopedJoinHandle<'_, Timed>) -> Timed {
    handle.join().unwrap_or_else(|_| {
        Err(JudgeError::Sandbox {
            what: "an interactive run".to_string(),
            message: "its thread panicked".to_string(),
        })
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn report(status: BoxStatus, signal: Option<i32>) -> BoxReport {
        BoxReport {
            status,
            exit_code: if status == BoxStatus::Ok {
                Some(0)
            } else {
                None
            },
            signal,
            cpu_seconds: 0.0,
            wall_seconds: 0.0,
            memory_bytes: 0,
        }
    }

    fn said(verdict: Verdict) -> Result<ValidatorVerdict, JudgeError> {
        Ok(ValidatorVerdict {
            verdict,
            score: None,
            judge_message: String::new(),
        })
    }

    #[test]
    fn validator_wrong_answer_first_beats_sigpipe_and_tle() {
        let sub = report(BoxStatus::Signaled, Some(SIGPIPE));
        assert_eq!(
            decide(said(Verdict::WrongAnswer), &sub, true).unwrap().0,
            Verdict::WrongAnswer
        );
        let sub = report(BoxStatus::WallTimeLimit, None);
        assert_eq!(
            decide(said(Verdict::WrongAnswer), &sub, true).unwrap().0,
            Verdict::WrongAnswer
        );
    }

    #[test]
    fn submission_tle_stands_when_it_ended_first() {
        let sub = report(BoxStatus::TimeLimit, None);
        assert_eq!(
            decide(said(Verdict::WrongAnswer), &sub, false).unwrap().0,
            Verdict::TimeLimitExceeded
        );
        assert_eq!(
            decide(said(Verdict::Accepted), &sub, true).unwrap().0,
            Verdict::TimeLimitExceeded
        );
    }

    #[test]
    fn crash_then_validator() {
        let sub = report(BoxStatus::Signaled, Some(11));
        assert_eq!(
            decide(said(Verdict::Accepted), &sub, false).unwrap().0,
            Verdict::RunTimeError
        );
        let sub = report(BoxStatus::Signaled, Some(SIGPIPE));
        assert_eq!(
            decide(said(Verdict::Accepted), &sub, false).unwrap().0,
            Verdict::Accepted
        );
        let sub = report(BoxStatus::Ok, None);
        assert_eq!(
            decide(said(Verdict::WrongAnswer), &sub, false).unwrap().0,
            Verdict::WrongAnswer
        );
    }

    #[test]
    fn validator_crash_is_an_infrastructure_failure() {
        let sub = report(BoxStatus::Ok, None);
        let crashed = Err(JudgeError::Validator {
            test: "t".into(),
            message: "exited with 1".into(),
        });
        assert!(decide(crashed, &sub, true).is_err());
    }
}

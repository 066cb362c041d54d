//! Interactive problems: the validator's stdout is the submission's stdin and
//! the other way round, both sandboxed, each on its own thread. Who decides
//! follows problemtools (`support/interactive/interactive.cc` and
//! `validate_interactive`) as contract §2 states it.

use std::os::fd::{AsFd, OwnedFd};
use std::time::Instant;

use nix::fcntl::{FcntlArg, OFlag, fcntl};

use crate::package::{TestCase, TestGroup};

use super::boxed::{BoxReport, BoxStatus, Stream};
use super::capture;
use super::cases::{Pass, PassRun, SandboxCases, exit_code};
use super::engine::CaseRun;
use super::error::JudgeError;
use super::validator::{self, RunSpec, ValidatorVerdict};
use super::verdict::{Verdict, status_verdict};

/// interactive.cc asks for 1 MiB pipes (the unprivileged maximum).
const PIPE_SIZE: i32 = 1 << 20;
const SIGPIPE: i32 = 13;

fn pipe() -> Result<(OwnedFd, OwnedFd), JudgeError> {
    // O_CLOEXEC: the other sandbox, forked at the same moment from this
    // process, must not keep a copy of these ends past its exec.
    let (read, write) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| JudgeError::RunFailed {
            what: "creating the interactive pipes".to_string(),
            message: e.to_string(),
        })?;
    // Best effort, as interactive.cc: a smaller pipe only costs speed.
    let _ = fcntl(read.as_fd(), FcntlArg::F_SETPIPE_SZ(PIPE_SIZE));
    Ok((read, write))
}

/// What a verdict from [`decide`] is made of.
pub(crate) type Decided = (Verdict, Option<f64>, String);

/// Who decides, in contract order (§2 and §3 "Interactive"):
/// - a validator that answered (42/43): its Wrong Answer when it exited first;
///   else the submission's time limit; else its crash (a SIGPIPE from writing
///   to a validator that has finished is not one); else the validator's verdict;
/// - a validator that did not answer (another exit, a signal, a limit) failed
///   on its own, an infrastructure failure, only when it ended first and not by
///   a limit. Otherwise the submission made it stop. When the validator ran into
///   a limit while the submission was still running (a flood): Time Limit
///   Exceeded, or the submission's own memory or output limit (its crash after
///   the validator had gone, EPIPE or SIGPIPE, is a consequence). When the
///   submission had ended first: its own verdict, else Wrong Answer (it stopped
///   talking before the validator was satisfied).
pub(crate) fn decide(
    said: Result<ValidatorVerdict, JudgeError>,
    validator: &BoxReport,
    submission: &BoxReport,
    validator_first: bool,
) -> Result<Decided, JudgeError> {
    let broken_pipe =
        submission.status == BoxStatus::Signaled && submission.signal == Some(SIGPIPE);
    let own = status_verdict(submission.status).filter(|_| !broken_pipe);
    let answered =
        validator.status == BoxStatus::NonzeroExit && matches!(validator.exit_code, Some(42 | 43));
    if answered {
        // A bad score.txt of an answering validator is still its own failure.
        let said = said?;
        if validator_first && said.verdict == Verdict::WrongAnswer {
            return Ok((Verdict::WrongAnswer, None, said.judge_message));
        }
        if let Some(verdict) = own {
            return Ok((verdict, None, said.judge_message));
        }
        return Ok((said.verdict, said.score, said.judge_message));
    }
    let by_limit = matches!(
        validator.status,
        BoxStatus::TimeLimit
            | BoxStatus::WallTimeLimit
            | BoxStatus::MemoryLimit
            | BoxStatus::OutputLimit
    );
    if validator_first && !by_limit {
        return Err(match said {
            Err(e) => e,
            Ok(_) => JudgeError::Validator {
                test: String::new(),
                message: "the validator gave no verdict".to_string(),
            },
        });
    }
    let why = match &said {
        Err(JudgeError::Validator { message, .. }) => message.clone(),
        Err(e) => e.to_string(),
        Ok(_) => String::new(),
    };
    let when = if validator_first {
        "while the submission was running"
    } else {
        "after the submission had ended"
    };
    let message = format!("judge: the validator gave no verdict {when}: {why}");
    let verdict = if validator_first {
        // Flooded: the submission's own limit if it hit one, else TLE; how it
        // died after the validator had gone (EPIPE, SIGPIPE) is a consequence.
        match own {
            Some(
                v @ (Verdict::TimeLimitExceeded
                | Verdict::MemoryLimitExceeded
                | Verdict::OutputLimitExceeded),
            ) => v,
            _ => Verdict::TimeLimitExceeded,
        }
    } else {
        own.unwrap_or(Verdict::WrongAnswer)
    };
    Ok((verdict, None, message))
}

fn dup(fd: &OwnedFd) -> Result<OwnedFd, JudgeError> {
    fd.try_clone().map_err(|e| JudgeError::RunFailed {
        what: "duplicating an interactive pipe end".to_string(),
        message: e.to_string(),
    })
}

/// Reads and discards what the validator still writes once the submission has
/// ended, until the validator's end: a validator answering a submission that
/// flooded it and stopped reading is never left blocked on a full pipe (nor
/// killed by SIGPIPE: the read end stays open until it ends, as interactive.cc
/// keeps it).
fn drain(reader: OwnedFd) {
    use std::io::Read;
    let mut file = std::fs::File::from(reader);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// One pass of an interactive test: the submission and the problem's one
/// validator, talking.
pub(crate) fn run(
    cases: &SandboxCases<'_>,
    case: &TestCase,
    group: &TestGroup,
    pass: &Pass<'_>,
) -> Result<PassRun, JudgeError> {
    let (Some(validator), Some(vbox)) = (cases.validators.first(), pass.vboxes.first()) else {
        return Err(JudgeError::package(
            "an interactive problem needs an output validator",
        ));
    };
    if cases.validators.len() > 1 {
        return Err(JudgeError::package(
            "an interactive problem takes exactly one output validator",
        ));
    }
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
    // submission that has finished is not killed by SIGPIPE; once the
    // submission has ended it is drained (`drain`).
    let keep_reader = dup(&to_submission_read)?;

    let sub_box = cases.work.fresh("box")?;
    let (mut stderr, capture) = capture::start(1)?;
    let sub_run = cases.submission_run(
        &sub_box,
        Stream::Fd(to_submission_read),
        Stream::Fd(to_validator_write),
        stderr.pop().unwrap_or(Stream::Null),
    );
    let mut val_run = validator.box_run(RunSpec {
        problem: cases.problem,
        case,
        group,
        vbox,
        pass_input: pass.input,
        stdin: Stream::Fd(to_validator_read),
        stdout: Stream::Fd(to_submission_write),
        wall: None,
        validator_box: true,
    })?;
    // The validator's limits outlast the submission's (contract §3): the
    // submission's wall limit ends a deadlock first (as its TLE), and a
    // validator busy with a submission's flood is not stopped before it.
    let outlast = cases.limits.wall + cases.problem.limits.validation_time.unwrap_or(30.0);
    val_run.limits.time = val_run.limits.time.max(outlast);
    val_run.limits.wall = val_run.limits.wall.max(outlast);
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
            drain(keep_reader);
            ended
        });
        (join(val), join(sub))
    });
    let (sub_report, sub_end) = sub_result?;
    let (val_report, val_end) = val_result?;
    let stderr = capture.finish()?;
    let validator_first = val_end < sub_end;
    let said = validator::interpret(&val_report, vbox, cases.problem.kind, &case.name);
    let (verdict, score, message) = decide(said, &val_report, &sub_report, validator_first)?;
    Ok(PassRun {
        run: CaseRun::new(&sub_report, &stderr, verdict, score, message),
        validator_exit: exit_code(&val_report),
    })
}

type Timed = Result<(BoxReport, Instant), JudgeError>;

fn join(handle: std::thread::ScopedJoinHandle<'_, Timed>) -> Timed {
    handle.join().unwrap_or_else(|_| {
        Err(JudgeError::RunFailed {
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
        exited(
            status,
            if status == BoxStatus::Ok {
                Some(0)
            } else {
                None
            },
            signal,
        )
    }

    fn exited(status: BoxStatus, exit_code: Option<i32>, signal: Option<i32>) -> BoxReport {
        BoxReport {
            status,
            exit_code,
            signal,
            cpu_seconds: 0.0,
            wall_seconds: 0.0,
            memory_bytes: 0,
        }
    }

    /// A validator that answered: its report and what `interpret` made of it.
    fn answered(verdict: Verdict) -> (Result<ValidatorVerdict, JudgeError>, BoxReport) {
        let code = if verdict == Verdict::Accepted { 42 } else { 43 };
        (
            Ok(ValidatorVerdict {
                verdict,
                score: None,
                judge_message: String::new(),
            }),
            exited(BoxStatus::NonzeroExit, Some(code), None),
        )
    }

    /// A validator that gave no verdict, ended as `report` says.
    fn failed(report: BoxReport) -> (Result<ValidatorVerdict, JudgeError>, BoxReport) {
        (
            Err(JudgeError::Validator {
                test: "t".into(),
                message: "exited with 1".into(),
            }),
            report,
        )
    }

    fn verdict(
        v: (Result<ValidatorVerdict, JudgeError>, BoxReport),
        sub: &BoxReport,
        validator_first: bool,
    ) -> Verdict {
        decide(v.0, &v.1, sub, validator_first).unwrap().0
    }

    #[test]
    fn validator_wrong_answer_first_beats_sigpipe_and_tle() {
        let sub = report(BoxStatus::Signaled, Some(SIGPIPE));
        assert_eq!(
            verdict(answered(Verdict::WrongAnswer), &sub, true),
            Verdict::WrongAnswer
        );
        let sub = report(BoxStatus::WallTimeLimit, None);
        assert_eq!(
            verdict(answered(Verdict::WrongAnswer), &sub, true),
            Verdict::WrongAnswer
        );
    }

    #[test]
    fn submission_tle_stands_when_it_ended_first() {
        let sub = report(BoxStatus::TimeLimit, None);
        assert_eq!(
            verdict(answered(Verdict::WrongAnswer), &sub, false),
            Verdict::TimeLimitExceeded
        );
        assert_eq!(
            verdict(answered(Verdict::Accepted), &sub, true),
            Verdict::TimeLimitExceeded
        );
    }

    #[test]
    fn crash_then_validator() {
        let sub = report(BoxStatus::Signaled, Some(11));
        assert_eq!(
            verdict(answered(Verdict::Accepted), &sub, false),
            Verdict::RunTimeError
        );
        let sub = report(BoxStatus::Signaled, Some(SIGPIPE));
        assert_eq!(
            verdict(answered(Verdict::Accepted), &sub, false),
            Verdict::Accepted
        );
        let sub = report(BoxStatus::Ok, None);
        assert_eq!(
            verdict(answered(Verdict::WrongAnswer), &sub, false),
            Verdict::WrongAnswer
        );
    }

    #[test]
    fn a_validator_failing_on_its_own_is_an_infrastructure_failure() {
        let sub = report(BoxStatus::Ok, None);
        let crash = failed(exited(BoxStatus::NonzeroExit, Some(1), None));
        assert!(decide(crash.0, &crash.1, &sub, true).is_err());
        // Whatever the submission did after the validator crashed first.
        let sub = report(BoxStatus::TimeLimit, None);
        let crash = failed(exited(BoxStatus::Signaled, None, Some(11)));
        assert!(decide(crash.0, &crash.1, &sub, true).is_err());
        // An answering validator's bad score.txt is its own failure too.
        let bad_score = (
            Err(JudgeError::Validator {
                test: "t".into(),
                message: "score.txt".into(),
            }),
            exited(BoxStatus::NonzeroExit, Some(42), None),
        );
        assert!(decide(bad_score.0, &bad_score.1, &sub, false).is_err());
    }

    #[test]
    fn a_validator_the_submission_stopped_is_the_submissions_verdict() {
        // Stopped talking: the submission ended, then the validator crashed.
        let sub = report(BoxStatus::Ok, None);
        let crash = failed(exited(BoxStatus::NonzeroExit, Some(1), None));
        assert_eq!(verdict(crash, &sub, false), Verdict::WrongAnswer);
        // A submission over its limit, the validator then failing or stuck.
        for status in [BoxStatus::WallTimeLimit, BoxStatus::TimeLimit] {
            let sub = report(status, None);
            let stuck = failed(report(BoxStatus::WallTimeLimit, None));
            assert_eq!(verdict(stuck, &sub, false), Verdict::TimeLimitExceeded);
            let crash = failed(exited(BoxStatus::NonzeroExit, Some(1), None));
            assert_eq!(verdict(crash, &sub, false), Verdict::TimeLimitExceeded);
        }
        let sub = report(BoxStatus::MemoryLimit, None);
        let crash = failed(exited(BoxStatus::Signaled, None, Some(6)));
        assert_eq!(verdict(crash, &sub, false), Verdict::MemoryLimitExceeded);
        // Flooded: the validator ran into a limit first; the submission then
        // died writing to it.
        let sub = report(BoxStatus::Signaled, Some(SIGPIPE));
        for status in [
            BoxStatus::MemoryLimit,
            BoxStatus::OutputLimit,
            BoxStatus::WallTimeLimit,
        ] {
            let flooded = failed(report(status, None));
            assert_eq!(verdict(flooded, &sub, true), Verdict::TimeLimitExceeded);
        }
        // ... or exited on EPIPE (Python's BrokenPipeError): still the flood.
        let sub = exited(BoxStatus::NonzeroExit, Some(1), None);
        let flooded = failed(report(BoxStatus::MemoryLimit, None));
        assert_eq!(verdict(flooded, &sub, true), Verdict::TimeLimitExceeded);
        // Its own memory limit while flooding stands.
        let sub = report(BoxStatus::MemoryLimit, None);
        let flooded = failed(report(BoxStatus::MemoryLimit, None));
        assert_eq!(verdict(flooded, &sub, true), Verdict::MemoryLimitExceeded);
    }
}

//! Multi-pass tests (2023-07 `type: multi-pass`, alone or with `interactive`):
//! the submission runs again on the input its validator wrote to `nextpass.in`.
//!
//! As the format defines it: a validator asks for another pass by exiting 42
//! with `nextpass.in` in its feedback directory; the judge takes the file out
//! (it is gone before the next pass) and every other feedback file stays;
//! time and memory limits apply to each pass; `limits.validation_passes` caps
//! the passes. A `nextpass.in` with any other exit, or asking for a pass past
//! the cap, is a judge error (`validator.failed`), never a verdict.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::package::TestCase;

use super::cases::{Pass, PassRun, SandboxCases};
use super::details::PassDetail;
use super::engine::CaseRun;
use super::error::JudgeError;
use super::validator::ValidatorBox;
use super::verdict::Verdict;

/// The file a validator writes to ask for another pass.
const NEXTPASS: &str = "nextpass.in";

/// Runs the passes of one test, `one_pass` running each (plain or
/// interactive). The test's run is its last pass's, with every pass listed.
pub(crate) fn run(
    cases: &SandboxCases<'_>,
    case: &TestCase,
    vboxes: &[ValidatorBox],
    one_pass: &mut dyn FnMut(&Pass<'_>) -> Result<PassRun, JudgeError>,
) -> Result<CaseRun, JudgeError> {
    let [vbox] = vboxes else {
        return Err(JudgeError::package(
            "a multi-pass problem takes exactly one output validator",
        ));
    };
    let cap = cases.problem.limits.validation_passes.max(1);
    let nextpass = vbox.feedback().join(NEXTPASS);
    let mut passes = Vec::new();
    let mut input: Option<PathBuf> = None;
    let mut message_before = String::new();
    let mut number = 1;
    loop {
        if cases.slot.cancelled() {
            return Err(JudgeError::Cancelled);
        }
        let pass = Pass {
            input: input.as_deref(),
            vboxes,
        };
        let PassRun {
            mut run,
            validator_exit,
        } = match one_pass(&pass) {
            Ok(ran) => ran,
            // A validator that failed (exit 0 included) and asked for more.
            Err(JudgeError::Validator { test, message }) if nextpass.symlink_metadata().is_ok() => {
                return Err(JudgeError::Validator {
                    test,
                    message: format!(
                        "pass {number}: {message}; it also wrote {NEXTPASS} \
                         (only exit code 42 may ask for another pass)"
                    ),
                });
            }
            Err(e) => return Err(e),
        };
        passes.push(PassDetail {
            pass: number,
            status: run.status.clone(),
            cpu_seconds: run.cpu_seconds,
            wall_seconds: run.wall_seconds,
            memory_bytes: run.memory_bytes,
            message: added(&message_before, &run.judge_message),
        });
        let asked = nextpass.symlink_metadata().is_ok();
        if asked && validator_exit != Some(42) {
            let how = validator_exit.map_or("did not exit by itself".to_string(), |code| {
                format!("exited with {code}")
            });
            return Err(judge_error(
                case,
                format!(
                    "pass {number}: the validator wrote {NEXTPASS} but {how} \
                     (only exit code 42 may ask for another pass)"
                ),
            ));
        }
        // Accepted without a next pass is the test's verdict; so is anything
        // that rejected the pass (the submission's own end, or the validator's
        // Wrong Answer), whatever an interactive validator left behind.
        if !asked || run.verdict != Verdict::Accepted {
            run.passes = passes;
            return Ok(run);
        }
        if number >= cap {
            return Err(judge_error(
                case,
                format!(
                    "pass {number}: the validator asks for pass {} but limits.validation_passes is {cap}",
                    number + 1
                ),
            ));
        }
        number += 1;
        let next = cases
            .work
            .fresh(&format!("pass-{number}"))?
            .join("input.in");
        take_nextpass(case, &nextpass, &next)?;
        input = Some(next);
        message_before = run.judge_message;
    }
}

/// What a pass added to the judge message: validators append to
/// `judgemessage.txt`, which lasts for the whole test; a message that does not
/// continue the one before (the judge's own, a rewritten file) is taken whole.
fn added(before: &str, now: &str) -> String {
    match now.strip_prefix(before) {
        Some(rest) if !before.is_empty() => rest.to_string(),
        _ => now.to_string(),
    }
}

fn judge_error(case: &TestCase, message: String) -> JudgeError {
    JudgeError::Validator {
        test: case.name.clone(),
        message,
    }
}

/// Moves the validator's `nextpass.in` into `to`, the judge's own copy that
/// the next pass reads. Opened without following a link: the validator, not
/// the judge, chose what that name is, and the judge reads it as root; only a
/// regular file the validator wrote is taken.
fn take_nextpass(case: &TestCase, nextpass: &Path, to: &Path) -> Result<(), JudgeError> {
    let not_a_file = || {
        judge_error(
            case,
            format!("the validator's {NEXTPASS} is not a regular file"),
        )
    };
    let mut from = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(nextpass)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => not_a_file(),
            _ => JudgeError::io(nextpass, e),
        })?;
    let meta = from.metadata().map_err(|e| JudgeError::io(nextpass, e))?;
    if !meta.is_file() {
        return Err(not_a_file());
    }
    let mut copy = File::create(to).map_err(|e| JudgeError::io(to, e))?;
    std::io::copy(&mut from, &mut copy).map_err(|e| JudgeError::io(to, e))?;
    drop(from);
    std::fs::remove_file(nextpass).map_err(|e| JudgeError::io(nextpass, e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn case() -> TestCase {
        TestCase {
            name: "secret/1".into(),
            input: PathBuf::from("1.in"),
            answer: PathBuf::from("1.ans"),
        }
    }

    #[test]
    fn a_pass_message_is_what_the_pass_added() {
        assert_eq!(added("", "first\n"), "first\n");
        assert_eq!(added("first\n", "first\nsecond\n"), "second\n");
        assert_eq!(added("first\n", "rewritten\n"), "rewritten\n");
        assert_eq!(added("first\n", "first\n"), "");
    }

    #[test]
    fn nextpass_is_moved_and_only_a_regular_file_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let nextpass = dir.path().join(NEXTPASS);
        let to = dir.path().join("input.in");
        std::fs::write(&nextpass, "42\n").unwrap();
        take_nextpass(&case(), &nextpass, &to).unwrap();
        assert_eq!(std::fs::read_to_string(&to).unwrap(), "42\n");
        assert!(!nextpass.exists(), "removed before the next pass");

        let secret = dir.path().join("secret");
        std::fs::write(&secret, "not for the submission").unwrap();
        std::os::unix::fs::symlink(&secret, &nextpass).unwrap();
        let err = take_nextpass(&case(), &nextpass, &to).unwrap_err();
        assert!(
            matches!(&err, JudgeError::Validator { message, .. } if message.contains("not a regular file")),
            "{err}"
        );
        std::fs::remove_file(&nextpass).unwrap();
        std::fs::create_dir(&nextpass).unwrap();
        assert!(matches!(
            take_nextpass(&case(), &nextpass, &to),
            Err(JudgeError::Validator { .. })
        ));
    }
}

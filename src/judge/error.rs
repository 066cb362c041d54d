//! `JudgeError`: the judging infrastructure failed, so there is no verdict.
//! Anything the submission did is a verdict, never one of these.

use std::path::PathBuf;

/// Stable reason codes, equal to `protocol::codes::reason::*` (the judge does not
/// import `protocol`; `tests/judge_units.rs` checks they agree).
pub mod reason {
    pub const PACKAGE_INVALID: &str = "package.invalid";
    pub const SANDBOX_FAILED: &str = "sandbox.failed";
    pub const VALIDATOR_FAILED: &str = "validator.failed";
    pub const LANGUAGE_UNAVAILABLE: &str = "language.unavailable";
    /// Not a contract reason: the caller cancelled the job (its lease was lost), so
    /// nothing is reported to the Server.
    pub const CANCELLED: &str = "judge.cancelled";
}

#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    /// The problem cannot be judged as it is (no tests, a test file that cannot be
    /// read, a validator that does not compile, `grading: custom`, ...).
    #[error("invalid problem package: {message}")]
    PackageInvalid { message: String },

    /// The submission's language is not configured here, or its toolchain is missing.
    #[error("language {language:?} is not available on this host: {why}")]
    LanguageUnavailable { language: String, why: String },

    /// The sandbox itself failed while running `what` (not the program in it);
    /// its typed error is kept as the source.
    #[error("sandbox failed while {what}: {source}")]
    Sandbox {
        what: String,
        #[source]
        source: crate::sandbox::SandboxError,
    },

    /// The judge's plumbing around a sandboxed run failed (a pipe, a capture
    /// thread, a run the sandbox reported as `sandbox_error`): as much an
    /// infrastructure failure as [`JudgeError::Sandbox`], without a typed source.
    #[error("sandbox failed while {what}: {message}")]
    RunFailed { what: String, message: String },

    /// The output validator crashed, broke a limit, or answered something other
    /// than 42/43 (or wrote an unreadable `score.txt`).
    #[error("output validator failed on test {test}: {message}")]
    Validator { test: String, message: String },

    /// A file of the judge's own work directory could not be read or written.
    #[error("judge i/o error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The caller cancelled the evaluation (e.g. the daemon lost its lease).
    #[error("judging was cancelled")]
    Cancelled,
}

impl JudgeError {
    /// The reason code a Runner reports to `/failure`.
    pub fn reason(&self) -> &'static str {
        match self {
            JudgeError::PackageInvalid { .. } => reason::PACKAGE_INVALID,
            JudgeError::LanguageUnavailable { .. } => reason::LANGUAGE_UNAVAILABLE,
            JudgeError::Sandbox { .. } | JudgeError::RunFailed { .. } | JudgeError::Io { .. } => {
                reason::SANDBOX_FAILED
            }
            JudgeError::Validator { .. } => reason::VALIDATOR_FAILED,
            JudgeError::Cancelled => reason::CANCELLED,
        }
    }

    /// Whether another attempt (maybe on another Runner) could succeed.
    pub fn retryable(&self) -> bool {
        !matches!(self, JudgeError::PackageInvalid { .. })
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        JudgeError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn package(message: impl Into<String>) -> Self {
        JudgeError::PackageInvalid {
            message: message.into(),
        }
    }
}

//! The strings of the contract: job states, error codes, failure reasons, verdicts.
//! Matched exactly by clients; never change one without changing CONTRACT.md.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// State of an EvaluationJob (and of a Trial). Completed, Failed, Cancelled and
/// Superseded are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
pub enum JobState {
    Queued,
    Running,
    Completed,
    Failed,
    Cancelled,
    Superseded,
}

impl JobState {
    pub const ALL: [JobState; 6] = [
        JobState::Queued,
        JobState::Running,
        JobState::Completed,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Superseded,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "Queued",
            JobState::Running => "Running",
            JobState::Completed => "Completed",
            JobState::Failed => "Failed",
            JobState::Cancelled => "Cancelled",
            JobState::Superseded => "Superseded",
        }
    }

    /// A final state never changes again.
    pub const fn is_final(self) -> bool {
        !matches!(self, JobState::Queued | JobState::Running)
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown job state {0:?}")]
pub struct UnknownJobState(pub String);

impl FromStr for JobState {
    type Err = UnknownJobState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownJobState(s.to_string()))
    }
}

/// `{"error": "<code>"}` values. The contract names the first group; the rest are
/// ours for cases the contract leaves open (documented in README.md).
pub mod error {
    pub const AUTH_REQUIRED: &str = "auth.required";
    pub const AUTH_FORBIDDEN: &str = "auth.forbidden";
    pub const AUTH_REVOKED: &str = "auth.revoked";
    pub const LEASE_LOST: &str = "lease.lost";
    pub const ATTEMPT_FINISHED: &str = "attempt.finished";
    pub const ATTEMPT_CONFLICT: &str = "attempt.conflict";
    pub const RESULT_EXTRA_TOO_LARGE: &str = "result.extra_too_large";
    /// 422: a submission or trial in a language the Server does not accept, or a
    /// claim none of whose languages it accepts.
    pub const LANGUAGE_UNKNOWN: &str = "language.unknown";

    /// Body is not valid JSON, or misses a field, or has a field of the wrong type.
    pub const REQUEST_INVALID: &str = "request.invalid";
    /// 409: an `Idempotency-Key` already answered another request (CONTRACT §7).
    pub const REQUEST_CONFLICT: &str = "request.conflict";
    /// Body over the configured limit.
    pub const REQUEST_TOO_LARGE: &str = "request.too_large";
    /// No such runner, problem, submission, job, trial, package or file.
    pub const NOT_FOUND: &str = "not_found";
    /// An uploaded package is not a valid problem package.
    pub const PACKAGE_INVALID: &str = "package.invalid";
    /// The database is not answering (pool exhausted or down); retry later.
    pub const UNAVAILABLE: &str = "unavailable";
    /// A `callback_url` that is not `http`/`https`, or names the Server itself, a
    /// loopback or a private address (without `--webhook-allow-private`).
    pub const CALLBACK_URL_INVALID: &str = "callback_url.invalid";
    /// A `callback_url` on a Server without `JUDGE_WEBHOOK_SECRET`: it could not sign.
    pub const CALLBACK_URL_NO_SECRET: &str = "callback_url.no_secret";
    /// Something failed on the Server; the cause is logged, not echoed.
    pub const INTERNAL: &str = "internal";
}

/// `failure_reason` values.
pub mod reason {
    /// The reaper (or a retryable failure) found the job at its delivery cap.
    pub const DELIVERIES_EXHAUSTED: &str = "deliveries.exhausted";
    /// The package bytes did not hash to the SHA-256 the claim named (not retryable).
    pub const PACKAGE_CHECKSUM_MISMATCH: &str = "package.checksum_mismatch";
    /// The package could not be downloaded (retryable).
    pub const PACKAGE_FETCH_FAILED: &str = "package.fetch_failed";
    /// The package is not a valid problem package (not retryable).
    pub const PACKAGE_INVALID: &str = "package.invalid";
    /// The sandbox failed, not the program (retryable).
    pub const SANDBOX_FAILED: &str = "sandbox.failed";
    /// The output validator crashed or answered something other than 42/43 (retryable).
    pub const VALIDATOR_FAILED: &str = "validator.failed";
    /// The submission's language is not available on this Runner (retryable).
    pub const LANGUAGE_UNAVAILABLE: &str = "language.unavailable";
}

/// Verdict strings a Runner produces. The Server never parses them.
pub mod verdict {
    pub const ACCEPTED: &str = "Accepted";
    pub const WRONG_ANSWER: &str = "Wrong Answer";
    pub const TIME_LIMIT_EXCEEDED: &str = "Time Limit Exceeded";
    pub const RUN_TIME_ERROR: &str = "Run-Time Error";
    pub const MEMORY_LIMIT_EXCEEDED: &str = "Memory Limit Exceeded";
    pub const OUTPUT_LIMIT_EXCEEDED: &str = "Output Limit Exceeded";
    pub const COMPILATION_ERROR: &str = "Compilation Error";
}

/// Token scopes.
pub mod scope {
    /// `POST /api/trials`, `GET /api/trials/{id}`.
    pub const TRIAL_RUN: &str = "trial:run";
    /// Every manager `GET` (views, attachments, listings, the queue).
    pub const CONSOLE_READ: &str = "console:read";
    /// `POST /api/problems` (upload packages).
    pub const PROBLEMS_WRITE: &str = "problems:write";
    /// `POST /api/submissions`, rejudge, cancel.
    pub const SUBMISSIONS_WRITE: &str = "submissions:write";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_state_round_trips_as_contract_strings() {
        for st in JobState::ALL {
            let json = serde_json::to_string(&st).unwrap();
            assert_eq!(json, format!("\"{}\"", st.as_str()));
            assert_eq!(st.as_str().parse::<JobState>().unwrap(), st);
        }
        assert!("queued".parse::<JobState>().is_err());
        assert!(!JobState::Running.is_final());
        assert!(JobState::Superseded.is_final());
    }
}

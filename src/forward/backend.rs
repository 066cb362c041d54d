//! The seam between the forwarder and the service that judges for it: a small
//! trait, [`Backend`], and the values that cross it. One implementation is
//! built, `JudgeServer` (another judge-runner Server, module `judge_server`).
//!
//! Adding another service (a Judge0 or DOMjudge instance, a cloud queue) means
//! one more implementation of these five calls, each answering either a value,
//! [`BackendError::Unavailable`] (no answer, a 5xx, an answer that is not what
//! the service promises: retried with backoff, never turned into a verdict) or
//! [`BackendError::Failed`] (the job cannot be judged there: A's job fails with
//! that reason and retryability). What it must promise, so the lease rules hold
//! across the hop:
//!
//! - `submit` is idempotent under [`ForwardedJob::key`]: called again with the same
//!   key (a retry, a restarted forwarder, a re-delivered job) it answers the
//!   attempt it started the first time, never a second one;
//! - `status` only reads; a forwarder that drops a job (its lease at A lost, a
//!   shutdown) never cancels the remote attempt;
//! - a `Done` result is the service's own, copied to A unchanged.

use std::future::Future;

use crate::protocol::{PackageRef, SubmissionFile};

/// One job as the forwarder hands it on.
#[derive(Debug, Clone)]
pub struct ForwardedJob {
    /// The idempotency key of this attempt (A's identity, job id, attempt).
    pub key: String,
    /// The package at A: where it is (absolute URL) and what it must hash to.
    pub package: PackageRef,
    /// A's fallback time limit for a package that names none.
    pub time_limit: Option<f64>,
    pub language: String,
    pub files: Vec<SubmissionFile>,
}

/// The attempt a service is judging for a forwarded job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteAttempt {
    pub submission_id: i64,
    pub job_id: i64,
}

/// What `submit` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Submitted {
    pub attempt: RemoteAttempt,
    /// The service already had this key: an earlier delivery (or forwarder)
    /// submitted it.
    pub replayed: bool,
}

/// The remote attempt's outcome, as A takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteResult {
    pub score: f64,
    pub max_score: f64,
    pub verdict: String,
    pub extra: Option<serde_json::Value>,
    pub props: Option<serde_json::Value>,
    /// The remote Runner's own `runner_version`.
    pub runner_version: Option<String>,
    /// `details`, `log`: the remote attempt's attachments, byte for byte.
    pub attachments: Vec<(&'static str, Vec<u8>)>,
}

/// Where a remote attempt stands.
#[derive(Debug, Clone, PartialEq)]
pub enum RemoteState {
    /// Queued or being judged; `progress` is `(done, total)` when known.
    Waiting {
        attempt: RemoteAttempt,
        progress: Option<(u64, u64)>,
    },
    /// Judged: the Result to copy to A.
    Done(Box<RemoteResult>),
    /// Ended without a Result.
    Failed { reason: String, retryable: bool },
}

/// Why a call to the service did not give an answer to use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// No answer, a temporary one, or one that is not what the service promises:
    /// try again later.
    #[error("the judging service is unavailable: {detail}")]
    Unavailable { detail: String },
    /// The job cannot be judged there (reason codes as A's `/failure` takes them).
    #[error("the judging service cannot judge this job: {reason}: {message}")]
    Failed {
        reason: String,
        retryable: bool,
        message: String,
    },
}

/// A service that judges forwarded jobs. See the module documentation for what
/// an implementation must promise.
pub trait Backend: Send + Sync + 'static {
    /// At start-up: may this forwarder submit there? `Err` is a message for the
    /// operator (the forwarder exits 1); an unanswered check is `Ok` with a
    /// warning (the forwarder starts, its claims wait for the service).
    fn check_access(&self) -> impl Future<Output = Result<(), String>> + Send;

    /// Is the service answering (and taking this forwarder's credentials) now?
    /// Claims at A pause while it is not.
    fn ready(&self) -> impl Future<Output = bool> + Send;

    /// Starts (or, under a known key, finds) the remote attempt of `job`, bringing
    /// the package over when the service lacks it.
    fn submit(
        &self,
        job: &ForwardedJob,
    ) -> impl Future<Output = Result<Submitted, BackendError>> + Send;

    /// Where the attempt stands now (a finished attempt answers its Result with
    /// its attachments). An attempt superseded there is followed to its newest.
    fn status(
        &self,
        attempt: RemoteAttempt,
    ) -> impl Future<Output = Result<RemoteState, BackendError>> + Send;

    /// A name for `runner_version` and the logs (`judge-runner Server at URL`).
    fn describe(&self) -> String;
}

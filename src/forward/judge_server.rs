//! The one [`Backend`] built: another judge-runner Server ("B"), driven through
//! its manager API with `--to-token` (the manager token, or a token with the
//! scopes `problems:write`, `submissions:write` and `console:read`).
//!
//! - **Packages by SHA-256, remembered by B.** A package is uploaded with `POST
//!   /api/problems` under the `Idempotency-Key`
//!   `judge-runner-forward:package:<sha256>:<time limit>`: the first upload
//!   makes B's problem, every later one (another forwarder, this one after a
//!   restart) answers that same problem, so A's version ↔ B's problem lives in B
//!   and nowhere else. Within a process a map skips the upload.
//!   The bytes are fetched from A and checked against the claim's SHA-256
//!   before B sees them (a mismatch is `package.checksum_mismatch`, not
//!   retryable); B's own digest of the upload is compared too.
//! - **One submission per attempt.** `POST /api/submissions` carries the job's
//!   `Idempotency-Key`; a replayed answer (`Idempotent-Replayed: true`) whose
//!   attempt ended without a Result for a reason worth retrying (a retryable
//!   failure, a cancel at B) is rejudged at B with `expected_attempt`, so two
//!   forwarders meeting there start one new attempt, not two.
//! - **Waiting** reads `GET /api/submissions/{id}` and follows its newest
//!   attempt; a finished one's `details` and `log` are read byte for byte.
//! - **Answers** that are not what the contract promises (a 5xx, no answer,
//!   JSON that does not parse) are [`BackendError::Unavailable`]: retried, never
//!   a verdict.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use reqwest::{Method, StatusCode};

use crate::package::{FetchPolicy, ServerKey};
use crate::protocol::codes::error as code;
use crate::protocol::codes::reason;
use crate::protocol::{
    AttemptCreated, CreateSubmission, ErrorBody, JobState, JobView, ProblemCreated, RejudgeRequest,
    SubmissionView,
};

use super::backend::{
    Backend, BackendError, ForwardedJob, RemoteAttempt, RemoteResult, RemoteState, Submitted,
};

mod http;
use http::{CALL_TIMEOUT, Http, Refusal, success};

/// How long a package upload to B may take.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(600);
/// The reasons of B's `Failed` attempts that another attempt may mend (the
/// contract's retryable reasons, and B's own cap on them).
const RETRYABLE_REASONS: [&str; 5] = [
    reason::SANDBOX_FAILED,
    reason::VALIDATOR_FAILED,
    reason::LANGUAGE_UNAVAILABLE,
    reason::PACKAGE_FETCH_FAILED,
    reason::DELIVERIES_EXHAUSTED,
];
/// A's failure reason when B's attempt was cancelled there (retryable: the
/// next delivery rejudges it at B).
pub const REMOTE_CANCELLED: &str = "forward.remote_cancelled";
/// A start-up probe: method, path, the scope it needs, how its request is made.
type Probe = (
    Method,
    &'static str,
    &'static str,
    fn(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
);
/// The attachments copied from B to A.
const ATTACHMENTS: [&str; 2] = ["details", "log"];

/// Where the forwarder gets A's packages from.
#[derive(Debug, Clone)]
pub struct PackageSource {
    /// A's Runner key, for A's origin only.
    pub key: Option<ServerKey>,
    /// Where a package waits between A and B (removed after each upload).
    pub staging: PathBuf,
    pub max_bytes: u64,
    pub policy: FetchPolicy,
}

/// Another judge-runner Server.
pub struct JudgeServer {
    http: Http,
    /// B's `callback_url` for the forwarder's webhook listener, while B takes it.
    callback_url: Option<String>,
    callbacks_refused: AtomicBool,
    packages: PackageSource,
    /// Package key → B's problem id, as B answered it.
    problems: Mutex<HashMap<String, i64>>,
}

impl JudgeServer {
    /// `base` is B's URL; `callback_url` the URL B should POST `attempt.ended`
    /// events to (the forwarder's listener), if any.
    pub fn new(
        base: &str,
        token: &str,
        callback_url: Option<String>,
        packages: PackageSource,
    ) -> Result<JudgeServer, String> {
        Ok(JudgeServer {
            http: Http::new(base, token)?,
            callback_url,
            callbacks_refused: AtomicBool::new(false),
            packages,
            problems: Mutex::new(HashMap::new()),
        })
    }

    /// B's problem for the job's package: remembered, else uploaded under the
    /// package's key (B answers the problem it made the first time).
    async fn problem(&self, job: &ForwardedJob) -> Result<i64, BackendError> {
        let key = package_key(&job.package.sha256, job.time_limit);
        if let Some(id) = self.known_problem(&key) {
            return Ok(id);
        }
        let staged = tempfile::Builder::new()
            .prefix("package-")
            .tempfile_in(&self.packages.staging)
            .map_err(|e| BackendError::Failed {
                reason: reason::PACKAGE_FETCH_FAILED.to_string(),
                retryable: true,
                message: format!("cannot stage the package: {e}"),
            })?;
        let size = crate::package::fetch_archive(
            &job.package.url,
            &job.package.sha256,
            self.packages.key.as_ref(),
            staged.path(),
            self.packages.max_bytes,
            &self.packages.policy,
        )
        .await
        .map_err(|e| BackendError::Failed {
            reason: e.code().to_string(),
            retryable: e.retryable(),
            message: e.to_string(),
        })?;
        let file =
            tokio::fs::File::open(staged.path())
                .await
                .map_err(|e| BackendError::Failed {
                    reason: reason::PACKAGE_FETCH_FAILED.to_string(),
                    retryable: true,
                    message: format!("cannot read the staged package: {e}"),
                })?;
        let path = match job.time_limit {
            Some(t) => format!("api/problems?time_limit={t}"),
            None => "api/problems".to_string(),
        };
        let (status, _, bytes) = self
            .http
            .call(Method::POST, &path, UPLOAD_TIMEOUT, |r| {
                r.header("Idempotency-Key", &key)
                    .header(reqwest::header::CONTENT_TYPE, "application/gzip")
                    .header(reqwest::header::CONTENT_LENGTH, size)
                    .body(reqwest::Body::wrap_stream(
                        tokio_util::io::ReaderStream::new(file),
                    ))
            })
            .await?;
        drop(staged);
        let created: ProblemCreated = success(&path, status, &bytes)?;
        if !created.sha256.eq_ignore_ascii_case(&job.package.sha256) {
            return Err(BackendError::Failed {
                reason: reason::PACKAGE_CHECKSUM_MISMATCH.to_string(),
                retryable: false,
                message: format!(
                    "B stored the package as SHA-256 {}, the claim names {}",
                    created.sha256, job.package.sha256
                ),
            });
        }
        tracing::info!(sha256 = %created.sha256, problem = created.problem_id, "package at B");
        self.problems
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, created.problem_id);
        Ok(created.problem_id)
    }

    fn known_problem(&self, key: &str) -> Option<i64> {
        self.problems
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .copied()
    }

    fn forget_problem(&self, job: &ForwardedJob) {
        let key = package_key(&job.package.sha256, job.time_limit);
        self.problems
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
    }

    /// `POST /api/submissions` under the job's key.
    async fn create(
        &self,
        job: &ForwardedJob,
        problem_id: i64,
        callback_url: Option<String>,
    ) -> Result<(AttemptCreated, bool), Refusal> {
        let body = CreateSubmission {
            problem_id,
            language: job.language.clone(),
            files: job.files.clone(),
            callback_url,
        };
        let (created, headers) = self
            .http
            .json::<AttemptCreated>(Method::POST, "api/submissions", |r| {
                r.header("Idempotency-Key", &job.key).json(&body)
            })
            .await?;
        let replayed = headers
            .get("Idempotent-Replayed")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"));
        Ok((created, replayed))
    }

    /// A replayed submission whose newest attempt ended without a Result for a
    /// reason worth retrying is judged again at B (one new attempt, whoever
    /// asks first: `expected_attempt`).
    async fn resume(&self, attempt: RemoteAttempt) -> Result<RemoteAttempt, BackendError> {
        let view = self.submission(attempt.submission_id).await?;
        let Some(newest) = view.jobs.last() else {
            return Err(garbage("a submission without attempts"));
        };
        let worth_retrying = match newest.state {
            JobState::Cancelled => true,
            JobState::Failed => newest
                .failure_reason
                .as_deref()
                .is_some_and(is_retryable_reason),
            _ => false,
        };
        let newest_attempt = RemoteAttempt {
            submission_id: attempt.submission_id,
            job_id: newest.id,
        };
        if !worth_retrying {
            return Ok(newest_attempt);
        }
        let path = format!("api/submissions/{}/rejudge", attempt.submission_id);
        let body = RejudgeRequest {
            expected_attempt: Some(newest.attempt),
        };
        match self
            .http
            .json::<AttemptCreated>(Method::POST, &path, |r| r.json(&body))
            .await
        {
            Ok((created, _)) => {
                tracing::info!(
                    submission = attempt.submission_id,
                    attempt = created.attempt,
                    "rejudged at B"
                );
                Ok(RemoteAttempt {
                    submission_id: attempt.submission_id,
                    job_id: created.job_id,
                })
            }
            // Another forwarder rejudged it a moment ago: wait on the newest.
            Err(Refusal::Refused { code: c, .. }) if c == code::ATTEMPT_CONFLICT => {
                let view = self.submission(attempt.submission_id).await?;
                let newest = view.jobs.last().ok_or_else(|| garbage("no attempts"))?;
                Ok(RemoteAttempt {
                    submission_id: attempt.submission_id,
                    job_id: newest.id,
                })
            }
            Err(refusal) => Err(refusal.into()),
        }
    }

    async fn submission(&self, id: i64) -> Result<SubmissionView, BackendError> {
        let path = format!("api/submissions/{id}");
        Ok(self.http.json(Method::GET, &path, |r| r).await?.0)
    }

    /// A finished attempt's Result and attachments.
    async fn finished(&self, job: &JobView) -> Result<RemoteState, BackendError> {
        let Some(result) = &job.result else {
            return Err(garbage("a Completed attempt without a Result"));
        };
        let mut attachments = Vec::new();
        for name in ATTACHMENTS {
            if job.files.iter().any(|f| f == name) {
                let path = format!("api/jobs/{}/files/{name}", job.id);
                attachments.push((name, self.http.bytes(&path).await?));
            }
        }
        Ok(RemoteState::Done(Box::new(RemoteResult {
            score: result.score,
            max_score: result.max_score,
            verdict: result.verdict.clone(),
            extra: result.extra.clone(),
            props: result.props.clone(),
            runner_version: result.runner_version.clone(),
            attachments,
        })))
    }
}

impl Backend for JudgeServer {
    /// Three calls that change nothing, one per scope the forwarder needs: an
    /// empty submission (`submissions:write`; 400), an empty upload
    /// (`problems:write`; 422), submission 0 (`console:read`; 404). A 401 or 403
    /// to any is a refusal naming the scope.
    async fn check_access(&self) -> Result<(), String> {
        let probes: [Probe; 3] = [
            (Method::POST, "api/submissions", "submissions:write", |r| {
                r.header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body("{}")
            }),
            (Method::POST, "api/problems", "problems:write", |r| {
                r.body(Vec::new())
            }),
            (Method::GET, "api/submissions/0", "console:read", |r| r),
        ];
        for (method, path, scope, build) in probes {
            match self
                .http
                .call(method.clone(), path, CALL_TIMEOUT, build)
                .await
            {
                Err(Refusal::Unavailable(detail)) => {
                    tracing::warn!(to = %self.http.base, %detail, "cannot check the token now: B does not answer; starting anyway");
                    return Ok(());
                }
                Err(Refusal::Refused { .. }) => {}
                Ok((status, _, bytes))
                    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN =>
                {
                    let error: Option<ErrorBody> = serde_json::from_slice(&bytes).ok();
                    let (c, message) = error.map(|e| (e.error, e.message)).unwrap_or_default();
                    return Err(format!(
                        "the Server at {} refuses this token for {method} /{path} ({} {c}: {message}); \
                         the forwarder needs the manager token or a token with the scopes \
                         problems:write, submissions:write and console:read (missing: {scope}); \
                         check --to-token / JUDGE_FORWARD_TOKEN",
                        self.http.base,
                        status.as_u16()
                    ));
                }
                Ok(_) => {}
            }
        }
        Ok(())
    }

    async fn ready(&self) -> bool {
        match self
            .http
            .call(Method::GET, "api/submissions/0", CALL_TIMEOUT, |r| r)
            .await
        {
            Ok((status, _, _)) => {
                !(status.is_server_error()
                    || status == StatusCode::UNAUTHORIZED
                    || status == StatusCode::FORBIDDEN
                    || status == StatusCode::TOO_MANY_REQUESTS)
            }
            Err(_) => false,
        }
    }

    async fn submit(&self, job: &ForwardedJob) -> Result<Submitted, BackendError> {
        let problem_id = self.problem(job).await?;
        let callback = self
            .callback_url
            .clone()
            .filter(|_| !self.callbacks_refused.load(Ordering::Relaxed));
        let created = match self.create(job, problem_id, callback.clone()).await {
            Err(Refusal::Refused {
                code: c, message, ..
            }) if callback.is_some()
                && (c == code::CALLBACK_URL_INVALID || c == code::CALLBACK_URL_NO_SECRET) =>
            {
                // A refused request records nothing under its key, so the same
                // key without the callback is a first request, not a conflict.
                tracing::error!(to = %self.http.base, code = %c, %message, "B refuses the callback URL: waiting on B by polling from now on");
                self.callbacks_refused.store(true, Ordering::Relaxed);
                self.create(job, problem_id, None).await
            }
            other => other,
        };
        let (created, replayed) = match created {
            Ok(created) => created,
            Err(Refusal::Refused {
                code: c, message, ..
            }) if c == code::LANGUAGE_UNKNOWN => {
                return Err(BackendError::Failed {
                    reason: reason::LANGUAGE_UNAVAILABLE.to_string(),
                    retryable: true,
                    message: format!("B does not take language {:?}: {message}", job.language),
                });
            }
            Err(Refusal::Refused {
                code: c, message, ..
            }) if c == code::REQUEST_CONFLICT => {
                return Err(BackendError::Failed {
                    reason: code::REQUEST_CONFLICT.to_string(),
                    retryable: true,
                    message: format!(
                        "B holds another submission under this job's key ({message}); \
                         was the forwarder restarted with another --callback-listen?"
                    ),
                });
            }
            Err(Refusal::Refused { status: 404, .. }) => {
                // B lost the problem (its database replaced?): upload again next time.
                self.forget_problem(job);
                return Err(BackendError::Unavailable {
                    detail: format!("B does not know problem {problem_id} any more"),
                });
            }
            Err(refusal) => return Err(refusal.into()),
        };
        let attempt = RemoteAttempt {
            submission_id: created.submission_id,
            job_id: created.job_id,
        };
        let attempt = if replayed {
            self.resume(attempt).await?
        } else {
            attempt
        };
        Ok(Submitted { attempt, replayed })
    }

    async fn status(&self, attempt: RemoteAttempt) -> Result<RemoteState, BackendError> {
        let view = self.submission(attempt.submission_id).await?;
        // A rejudge at B (by us on a replay, or by B's manager) adds attempts; the
        // newest is the one that counts.
        let Some(newest) = view.jobs.last() else {
            return Err(garbage("a submission without attempts"));
        };
        let now = RemoteAttempt {
            submission_id: attempt.submission_id,
            job_id: newest.id,
        };
        match newest.state {
            JobState::Queued | JobState::Running => Ok(RemoteState::Waiting {
                attempt: now,
                progress: newest.progress.as_ref().map(|p| (p.done, p.total)),
            }),
            JobState::Completed => self.finished(newest).await,
            JobState::Failed => {
                let reason = newest
                    .failure_reason
                    .clone()
                    .unwrap_or_else(|| "forward.remote_failed".to_string());
                Ok(RemoteState::Failed {
                    retryable: is_retryable_reason(&reason),
                    reason,
                })
            }
            JobState::Cancelled | JobState::Superseded => Ok(RemoteState::Failed {
                reason: REMOTE_CANCELLED.to_string(),
                retryable: true,
            }),
        }
    }

    fn describe(&self) -> String {
        format!("the judge-runner Server at {}", self.http.base)
    }
}

/// The `Idempotency-Key` a package is uploaded to B under.
pub fn package_key(sha256: &str, time_limit: Option<f64>) -> String {
    let limit = time_limit.map_or_else(|| "-".to_string(), |t| t.to_string());
    format!(
        "judge-runner-forward:package:{}:{limit}",
        sha256.to_ascii_lowercase()
    )
}

fn is_retryable_reason(reason: &str) -> bool {
    RETRYABLE_REASONS.contains(&reason)
}

fn garbage(what: &str) -> BackendError {
    BackendError::Unavailable {
        detail: format!("B answered {what}"),
    }
}

#[cfg(test)]
mod tests;

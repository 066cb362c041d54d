//! Wire types of the Server/Runner protocol (`../shared/CONTRACT.md` §4), shared by
//! `server` and `runner`. Types and their (de)serialisation only: no I/O, and no
//! import of any other module of ours.
//!
//! Ids are integers. Times are RFC 3339 UTC (`chrono::DateTime<Utc>`). `null` means
//! none for optional fields; request bodies refuse unknown fields where a typo would
//! otherwise be silently lost (results, failures, submissions).

pub mod codes;

use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use codes::JobState;

pub type Id = i64;
pub type Timestamp = DateTime<Utc>;

/// Every error answer: `{"error": "<code>", "message": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: String,
    pub message: String,
}

/// A file of a submission or trial: UTF-8 `content`, or `content_base64` for any bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmissionFile {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_base64: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileContentError {
    #[error("file {name:?} has neither content nor content_base64")]
    Missing { name: String },
    #[error("file {name:?} has both content and content_base64")]
    Both { name: String },
    #[error("file {name:?}: content_base64 is not valid base64")]
    BadBase64 { name: String },
}

impl SubmissionFile {
    /// Text files travel as `content`, anything else as `content_base64`.
    pub fn from_bytes(name: impl Into<String>, bytes: &[u8]) -> Self {
        let name = name.into();
        match std::str::from_utf8(bytes) {
            Ok(text) => SubmissionFile {
                name,
                content: Some(text.to_string()),
                content_base64: None,
            },
            Err(_) => SubmissionFile {
                name,
                content: None,
                content_base64: Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
            },
        }
    }

    pub fn bytes(&self) -> Result<Vec<u8>, FileContentError> {
        match (&self.content, &self.content_base64) {
            (Some(text), None) => Ok(text.as_bytes().to_vec()),
            (None, Some(b64)) => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|_| FileContentError::BadBase64 {
                    name: self.name.clone(),
                }),
            (None, None) => Err(FileContentError::Missing {
                name: self.name.clone(),
            }),
            (Some(_), Some(_)) => Err(FileContentError::Both {
                name: self.name.clone(),
            }),
        }
    }
}

// ----------------------------------------------------------------------------------
// Runner calls

/// `POST /api/jobs/claim`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ClaimRequest {
    pub languages: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<u64>,
}

/// Where a Runner gets the package of a claim. `url` may be absolute or relative to
/// the Server's base URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PackageRef {
    pub url: String,
    pub sha256: String,
    pub size: u64,
}

/// `200` answer of a claim: a job or a trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Claim {
    Job(JobClaim),
    Trial(TrialClaim),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct JobClaim {
    pub job_id: i64,
    pub submission_id: i64,
    pub attempt: i64,
    pub lease_token: String,
    pub lease_seconds: u64,
    pub lease_expires_at: DateTime<Utc>,
    pub problem_version_id: i64,
    pub package: PackageRef,
    /// The version's time limit for a package that names none (seconds).
    pub time_limit: Option<f64>,
    pub language: String,
    pub files: Vec<SubmissionFile>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TrialClaim {
    pub trial_id: i64,
    pub lease_token: String,
    pub lease_seconds: u64,
    pub lease_expires_at: DateTime<Utc>,
    pub package: PackageRef,
    #[serde(default)]
    pub time_limit: Option<f64>,
    pub language: String,
    pub files: Vec<SubmissionFile>,
}

/// `POST /api/{jobs,trials}/{id}/lease`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseRenewal {
    pub lease_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<u64>,
    /// The attempt the call is about (optional; the job id already pins it, so a
    /// different one is `409 lease.lost`). Ignored on trials, which have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LeaseRenewed {
    pub lease_expires_at: DateTime<Utc>,
}

/// `POST /api/{jobs,trials}/{id}/progress`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProgressBody {
    pub lease_token: String,
    pub done: u64,
    pub total: u64,
    /// The attempt the call is about (optional; the job id already pins it, so a
    /// different one is `409 lease.lost`). Ignored on trials, which have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<i64>,
}

/// `POST /api/{jobs,trials}/{id}/release`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseBody {
    pub lease_token: String,
    /// The attempt the call is about (optional; the job id already pins it, so a
    /// different one is `409 lease.lost`). Ignored on trials, which have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<i64>,
}

/// `POST /api/jobs/{id}/result`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultBody {
    pub lease_token: String,
    pub score: f64,
    pub max_score: f64,
    pub verdict: String,
    #[serde(default)]
    pub extra: Option<serde_json::Value>,
    #[serde(default)]
    pub props: Option<serde_json::Value>,
    #[serde(default)]
    pub runner_version: Option<String>,
    /// The attempt the result is for (optional; the job id already pins it, so a
    /// different one is `409 lease.lost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<i64>,
}

/// `POST /api/{jobs,trials}/{id}/failure`: an infrastructure failure, never a verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailureBody {
    pub lease_token: String,
    pub reason: String,
    pub retryable: bool,
    /// The attempt the call is about (optional; the job id already pins it, so a
    /// different one is `409 lease.lost`). Ignored on trials, which have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<i64>,
}

/// One test's timing in a Trial result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Timing {
    pub test: String,
    pub status: String,
    pub cpu_seconds: f64,
    pub wall_seconds: f64,
    pub memory_bytes: u64,
}

/// `POST /api/trials/{id}/result`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TrialResultBody {
    pub lease_token: String,
    pub timings: Vec<Timing>,
}

/// `200` answer of a release, failure or result: the state the call left the
/// job (or trial) in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StateAnswer {
    pub state: JobState,
}

/// `200` answer of `PUT /api/jobs/{id}/files/{name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FileStored {
    pub name: String,
    pub size: u64,
}

// ----------------------------------------------------------------------------------
// Manager calls

/// `POST /api/runners`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRunner {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunnerCreated {
    pub runner_id: i64,
    /// Shown once; the Server keeps only its SHA-256.
    pub key: String,
}

/// `200` answer of `DELETE /api/runners/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunnerRevoked {
    pub runner_id: i64,
    pub revoked: bool,
    /// Jobs and trials the runner held that went back to Queued (or Failed at the cap).
    pub requeued: u64,
}

/// `201` answer of `POST /api/problems`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ProblemCreated {
    pub problem_id: i64,
    pub problem_version_id: i64,
    pub sha256: String,
}

/// `POST /api/submissions`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSubmission {
    pub problem_id: i64,
    pub language: String,
    pub files: Vec<SubmissionFile>,
    /// `http`/`https` URL that gets an `attempt.ended` event (`AttemptEnded`)
    /// every time an attempt of this submission ends; a rejudge inherits it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
}

/// The webhook body POSTed to a submission's `callback_url` when one of its
/// attempts ends, signed `X-Judge-Signature: sha256=<hex HMAC-SHA256 of the body>`
/// and identified by `X-Judge-Delivery` (the same on every retry).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AttemptEnded {
    /// Always `attempt.ended`.
    pub event: String,
    pub submission_id: i64,
    pub job_id: i64,
    pub attempt: i64,
    /// Completed, Failed, Cancelled or Superseded.
    pub state: JobState,
    pub failure_reason: Option<String>,
    /// The Result of a Completed attempt, else null.
    pub result: Option<ResultView>,
}

/// `201` answer of a submission or a rejudge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AttemptCreated {
    pub submission_id: i64,
    pub job_id: i64,
    pub attempt: i64,
}

/// `POST /api/submissions/{id}/rejudge`
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RejudgeRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_attempt: Option<i64>,
}

/// `POST /api/tokens`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    pub scopes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TokenCreated {
    pub token: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TrialCreated {
    pub trial_id: i64,
}

// ----------------------------------------------------------------------------------
// Views

/// `GET /healthz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Health {
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Progress {
    pub done: u64,
    pub total: u64,
}

/// The outcome of one completed job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ResultView {
    pub evaluation_job_id: i64,
    pub problem_version_id: i64,
    pub score: f64,
    pub max_score: f64,
    pub verdict: String,
    pub extra: Option<serde_json::Value>,
    pub props: Option<serde_json::Value>,
    pub runner_version: Option<String>,
}

/// `GET /api/jobs/{id}`: every field of the job, its progress and its Result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct JobView {
    pub id: i64,
    pub submission_id: i64,
    pub attempt: i64,
    pub problem_version_id: i64,
    pub runner_id: Option<i64>,
    pub state: JobState,
    pub lease_token: Option<String>,
    pub lease_seconds: Option<u64>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub deliveries: i64,
    pub acknowledged_at: Option<DateTime<Utc>>,
    pub refunds: i64,
    pub releases: i64,
    pub failure_reason: Option<String>,
    pub row_version: i64,
    /// Names of the attached files (`details`, `log`).
    pub files: Vec<String>,
    pub progress: Option<Progress>,
    pub result: Option<ResultView>,
}

/// `GET /api/submissions/{id}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SubmissionView {
    pub submission_id: i64,
    pub problem_id: i64,
    pub language: String,
    /// Oldest attempt first.
    pub jobs: Vec<JobView>,
    /// The latest Result, or null.
    pub result: Option<ResultView>,
}

/// `GET /api/trials/{id}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TrialView {
    pub trial_id: i64,
    pub state: JobState,
    pub timings: Vec<Timing>,
    pub failure_reason: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_is_tagged_by_kind() {
        let json = serde_json::json!({
            "kind": "job", "job_id": 7, "submission_id": 3, "attempt": 1,
            "lease_token": "t", "lease_seconds": 120,
            "lease_expires_at": "2026-11-29T12:00:00Z", "problem_version_id": 2,
            "package": {"url": "/api/packages/ab", "sha256": "ab", "size": 10},
            "time_limit": null, "language": "c",
            "files": [{"name": "a.c", "content": "int main(){}"}]
        });
        let claim: Claim = serde_json::from_value(json).unwrap();
        let Claim::Job(job) = claim else {
            panic!("expected a job claim")
        };
        assert_eq!(job.job_id, 7);
        assert_eq!(job.files[0].bytes().unwrap(), b"int main(){}");
        let back = serde_json::to_value(Claim::Job(job)).unwrap();
        assert_eq!(back["kind"], "job");
    }

    #[test]
    fn files_travel_as_text_or_base64() {
        let text = SubmissionFile::from_bytes("a.py", b"print(1)\n");
        assert_eq!(text.content.as_deref(), Some("print(1)\n"));
        let bin = SubmissionFile::from_bytes("a.bin", &[0xff, 0x00]);
        assert!(bin.content.is_none());
        assert_eq!(bin.bytes().unwrap(), vec![0xff, 0x00]);
        let both = SubmissionFile {
            name: "x".into(),
            content: Some("a".into()),
            content_base64: Some("YQ==".into()),
        };
        assert!(both.bytes().is_err());
    }

    #[test]
    fn result_body_refuses_unknown_fields() {
        let ok = serde_json::json!({"lease_token": "t", "score": 1.0, "max_score": 1.0, "verdict": "Accepted"});
        let body: ResultBody = serde_json::from_value(ok).unwrap();
        assert!(body.extra.is_none());
        let typo = serde_json::json!({"lease_token": "t", "score": 1.0, "max_score": 1.0, "verdict": "Accepted", "extras": {}});
        assert!(serde_json::from_value::<ResultBody>(typo).is_err());
    }
}

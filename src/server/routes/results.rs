//! The end of a lease with an outcome: a job's Result, a trial's timings. Both are
//! idempotent for the token that completed the work, and `409 lease.lost` for any
//! other.

use axum::Json;

use crate::protocol::{JobState, ResultBody, StateAnswer, TrialResultBody};
use crate::server::auth::RunnerAuth;
use crate::server::db::WorkKind;
use crate::server::db::jobs::{NewResult, ResultOutcome};
use crate::server::db::lease::Fence;
use crate::server::error::ApiError;
use crate::server::state::AppState;
use crate::server::storage::Storage;

/// `extra` is public and rides in every list: at most this many bytes of JSON.
pub const MAX_EXTRA_BYTES: usize = 2048;

/// The `extra` of a result body exactly as the client wrote it.
#[derive(serde::Deserialize)]
struct RawExtra<'a> {
    #[serde(borrow, default)]
    extra: Option<&'a serde_json::value::RawValue>,
}

/// How many bytes of JSON `extra` is, measured on the request as sent (so the
/// limit means what the client measured, whatever its serialiser's spacing or
/// escaping), never on our own re-serialisation of it.
fn extra_bytes_sent(raw_body: &[u8]) -> Result<usize, ApiError> {
    let raw: RawExtra<'_> = serde_json::from_slice(raw_body)
        .map_err(|e| ApiError::invalid(format!("invalid JSON body: {e}")))?;
    Ok(raw.extra.map_or(0, |v| v.get().len()))
}

/// `null` and `{}` both mean none and are stored as NULL; anything else as its
/// compact JSON text.
fn normalised(value: Option<serde_json::Value>) -> Result<Option<String>, ApiError> {
    match value {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Object(map)) if map.is_empty() => Ok(None),
        Some(v) => serde_json::to_string(&v)
            .map(Some)
            .map_err(|e| ApiError::invalid(format!("value does not serialise: {e}"))),
    }
}

/// `POST /api/jobs/{id}/result`.
pub async fn job_result(
    state: &AppState,
    runner: RunnerAuth,
    job_id: i64,
    body: ResultBody,
    raw_body: &[u8],
) -> Result<Json<StateAnswer>, ApiError> {
    if body.verdict.is_empty() {
        return Err(ApiError::invalid("verdict must not be empty"));
    }
    let extra = normalised(body.extra)?;
    let sent = extra_bytes_sent(raw_body)?;
    if extra.is_some() && sent > MAX_EXTRA_BYTES {
        return Err(ApiError::ExtraTooLarge {
            size: sent,
            limit: MAX_EXTRA_BYTES,
        });
    }
    let props = normalised(body.props)?;
    let result = NewResult {
        score: body.score,
        max_score: body.max_score,
        verdict: &body.verdict,
        extra: extra.as_deref(),
        props: props.as_deref(),
        runner_version: body.runner_version.as_deref(),
    };
    let fence = Fence {
        work: WorkKind::Job,
        id: job_id,
        lease_token: &body.lease_token,
        runner_id: runner.runner_id,
        attempt: body.attempt,
    };
    let outcome = state
        .db
        .complete_job(fence, state.now_ms(), &result)
        .await?;
    if outcome == ResultOutcome::AlreadyStored {
        tracing::debug!(
            job_id,
            "result resent under the same lease token: already stored"
        );
    }
    Ok(Json(StateAnswer {
        state: JobState::Completed,
    }))
}

/// `POST /api/trials/{id}/result`: timings, no Result; the package is deleted.
pub async fn trial_result(
    state: &AppState,
    runner: RunnerAuth,
    trial_id: i64,
    body: TrialResultBody,
) -> Result<Json<StateAnswer>, ApiError> {
    let timings = serde_json::to_string(&body.timings)
        .map_err(|e| ApiError::invalid(format!("timings do not serialise: {e}")))?;
    let fence = Fence {
        work: WorkKind::Trial,
        id: trial_id,
        lease_token: &body.lease_token,
        runner_id: runner.runner_id,
        attempt: None,
    };
    let (_, file) = state
        .db
        .complete_trial(fence, state.now_ms(), &timings)
        .await?;
    if let Some(file) = file {
        Storage::remove(&state.storage.trial_package_path(&file)).await;
    }
    Ok(Json(StateAnswer {
        state: JobState::Completed,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_object_and_null_are_none() {
        assert_eq!(normalised(None).unwrap(), None);
        assert_eq!(normalised(Some(json!(null))).unwrap(), None);
        assert_eq!(normalised(Some(json!({}))).unwrap(), None);
        assert_eq!(
            normalised(Some(json!({"a": 1}))).unwrap().as_deref(),
            Some(r#"{"a":1}"#)
        );
        assert_eq!(normalised(Some(json!([]))).unwrap().as_deref(), Some("[]"));
    }

    #[test]
    fn extra_is_measured_as_sent() {
        let spaced = br#"{"lease_token": "t", "extra": {"k": "\u00e9"}, "verdict": "x"}"#;
        assert_eq!(
            extra_bytes_sent(spaced).unwrap(),
            r#"{"k": "\u00e9"}"#.len()
        );
        assert_eq!(extra_bytes_sent(br#"{"extra": null}"#).unwrap(), 0);
        assert_eq!(extra_bytes_sent(br#"{"lease_token": "t"}"#).unwrap(), 0);
    }
}

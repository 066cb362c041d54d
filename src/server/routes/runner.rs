//! Runner calls: claim, packages, and the lease-bearing calls (lease, progress,
//! release, failure, result, attachments) for jobs and trials alike.

use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST, USER_AGENT};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::time::Instant;

use crate::protocol::{
    Claim, ClaimRequest, FailureBody, FileStored, JobClaim, LeaseRenewal, LeaseRenewed, PackageRef,
    ProgressBody, ReleaseBody, StateAnswer, SubmissionFile, TrialClaim,
};
use crate::server::activity::{self, ClaimNote, version_of};
use crate::server::auth::{PackageAuth, RunnerAuth, new_lease_token};
use crate::server::clock::{after_seconds, to_datetime};
use crate::server::db::WorkKind;
use crate::server::db::claim::{Claimed, ClaimedJob, ClaimedTrial, NewLease};
use crate::server::db::lease::Fence;
use crate::server::error::ApiError;
use crate::server::extract::{ApiJson, ApiPath};
use crate::server::routes::openapi::{AUTHED, BODY, Binary, LEASE, MISSING, SERVER, errors};
use crate::server::state::AppState;
use crate::server::storage::{Storage, is_sha256_hex};

/// A claim whose `languages` are refused ([`claim_languages`]).
const CLAIM_LANGUAGES: crate::server::routes::openapi::Codes = &[(
    422,
    &[
        crate::protocol::codes::error::REQUEST_INVALID,
        crate::protocol::codes::error::LANGUAGE_UNKNOWN,
    ],
)];
errors!(ClaimErrors: AUTHED, BODY, CLAIM_LANGUAGES, SERVER);
errors!(PackageErrors: AUTHED, MISSING, SERVER);
errors!(PutFileErrors: AUTHED, BODY, MISSING, LEASE, SERVER);

/// Longest renewal a Runner may ask for in one call.
pub const MAX_RENEW_SECONDS: u64 = 7 * 24 * 3600;
/// Longest reason string kept for a failure.
const MAX_REASON_LEN: usize = 200;
/// How often a waiting claim looks again for work queued by another server.
const CLAIM_POLL: Duration = Duration::from_millis(500);
/// The attachments a job may have.
pub const ATTACHMENT_NAMES: [&str; 2] = ["details", "log"];

/// `POST /api/jobs/claim`: a job (oldest first), else a trial, else 204 after
/// waiting up to `wait_seconds`.
#[utoipa::path(
    post,
    path = "/api/jobs/claim",
    tag = "runner",
    security(("runner_key" = [])),
    request_body = ClaimRequest,
    responses(
        (status = 200, description = "A job or a trial, tagged by `kind`", body = Claim),
        (status = 204, description = "Nothing claimable (after waiting up to `wait_seconds`)"),
        ClaimErrors
    )
)]
pub async fn claim(
    state: axum::extract::State<AppState>,
    runner: RunnerAuth,
    headers: HeaderMap,
    ApiJson(request): ApiJson<ClaimRequest>,
) -> Result<Response, ApiError> {
    let languages = claim_languages(&request.languages)?;
    // A claim none of whose languages this Server accepts (`--languages`) could
    // never be answered: refused, so the Runner's operator hears of it. Beside
    // an accepted one, a name this Server does not accept is kept: it finds
    // nothing here (one index probe), and Servers sharing a database may
    // accept different lists.
    if !languages.iter().any(|l| state.config.languages.contains(l)) {
        return Err(ApiError::Unprocessable {
            code: crate::protocol::codes::error::LANGUAGE_UNKNOWN,
            message: format!(
                "this Server accepts none of the languages [{}]; accepted: {}",
                languages.join(", "),
                state.config.languages.join(", ")
            ),
        });
    }
    // What this claim offers, for GET /api/runners (written only when it changed
    // or a few seconds passed: see server::activity).
    let note = ClaimNote {
        languages: languages.clone(),
        version: version_of(headers.get(USER_AGENT).and_then(|v| v.to_str().ok())),
    };
    activity::note(
        &state.db,
        &state.runner_activity,
        runner.runner_id,
        state.now_ms(),
        Some(note),
    )
    .await;
    let wait =
        Duration::from_secs(request.wait_seconds.unwrap_or(0)).min(state.config.max_claim_wait);
    let deadline = Instant::now() + wait;
    let base = base_url(&state, &headers);
    loop {
        let notified = state.queue_changed.notified();
        let mut notified = std::pin::pin!(notified);
        notified.as_mut().enable();
        if let Some(claim) = try_claim(&state, runner.runner_id, &languages, &base).await? {
            return Ok(Json(claim).into_response());
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        let nap = (deadline - now).min(CLAIM_POLL);
        tokio::select! {
            () = notified => {}
            () = tokio::time::sleep(nap) => {}
        }
    }
}

/// Most languages one claim may offer.
pub const MAX_CLAIM_LANGUAGES: usize = 32;
/// Longest language name a claim may offer.
const MAX_LANGUAGE_LEN: usize = 32;

/// The claim's languages, checked and without repeats: 422 `request.invalid` for
/// an empty list, too many, or a name no language could have (so a claim never
/// asks the database about garbage).
fn claim_languages(offered: &[String]) -> Result<Vec<String>, ApiError> {
    let refuse = |message: String| ApiError::Unprocessable {
        code: crate::protocol::codes::error::REQUEST_INVALID,
        message,
    };
    if offered.is_empty() {
        return Err(refuse(
            "languages must name at least one language".to_string(),
        ));
    }
    if offered.len() > MAX_CLAIM_LANGUAGES {
        return Err(refuse(format!(
            "languages may name at most {MAX_CLAIM_LANGUAGES} languages, not {}",
            offered.len()
        )));
    }
    let mut languages: Vec<String> = Vec::with_capacity(offered.len());
    for language in offered {
        let plausible = !language.is_empty()
            && language.len() <= MAX_LANGUAGE_LEN
            && language
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+-_.".contains(&b));
        if !plausible {
            return Err(refuse(format!(
                "{language:?} is not a language name (1 to {MAX_LANGUAGE_LEN} of a-z, 0-9, + - _ .)"
            )));
        }
        if !languages.contains(language) {
            languages.push(language.clone());
        }
    }
    Ok(languages)
}

async fn try_claim(
    state: &AppState,
    runner_id: i64,
    languages: &[String],
    base: &str,
) -> Result<Option<Claim>, ApiError> {
    let now = state.now_ms();
    let lease_seconds = state.config.lease_seconds;
    let token = new_lease_token();
    let lease = NewLease {
        runner_id,
        lease_token: &token,
        lease_seconds: i64::try_from(lease_seconds).unwrap_or(i64::MAX),
        now,
        expires_ms: after_seconds(now, lease_seconds),
    };
    Ok(match state.db.claim_work(languages, lease).await? {
        Some(Claimed::Job(job)) => Some(Claim::Job(job_claim(job, &token, lease_seconds, base)?)),
        Some(Claimed::Trial(trial)) => Some(Claim::Trial(trial_claim(
            trial,
            &token,
            lease_seconds,
            base,
        )?)),
        None => None,
    })
}

fn job_claim(
    job: ClaimedJob,
    token: &str,
    lease_seconds: u64,
    base: &str,
) -> Result<JobClaim, ApiError> {
    Ok(JobClaim {
        job_id: job.id,
        submission_id: job.submission_id,
        attempt: job.attempt,
        lease_token: token.to_string(),
        lease_seconds,
        lease_expires_at: to_datetime(job.lease_expires_ms),
        problem_version_id: job.problem_version_id,
        package: package_ref(base, job.sha256, job.size),
        time_limit: job.time_limit,
        language: job.language,
        files: stored_files(&job.files)?,
    })
}

fn trial_claim(
    trial: ClaimedTrial,
    token: &str,
    lease_seconds: u64,
    base: &str,
) -> Result<TrialClaim, ApiError> {
    Ok(TrialClaim {
        trial_id: trial.id,
        lease_token: token.to_string(),
        lease_seconds,
        lease_expires_at: to_datetime(trial.lease_expires_ms),
        package: package_ref(base, trial.package_sha256, trial.package_size),
        time_limit: trial.time_limit,
        language: trial.language,
        files: stored_files(&trial.files)?,
    })
}

fn package_ref(base: &str, sha256: String, size: i64) -> PackageRef {
    PackageRef {
        url: format!("{base}/api/packages/{sha256}"),
        sha256,
        size: u64::try_from(size).unwrap_or(0),
    }
}

fn stored_files(json: &str) -> Result<Vec<SubmissionFile>, ApiError> {
    serde_json::from_str(json)
        .map_err(|e| ApiError::Internal(format!("stored files do not parse: {e}")))
}

/// `--public-url`, else `http://` + the request's `Host`, else the listen address.
fn base_url(state: &AppState, headers: &HeaderMap) -> String {
    if let Some(url) = &state.config.public_url {
        return url.trim_end_matches('/').to_string();
    }
    let host = headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && !h.contains(['/', ' ']))
        .unwrap_or(&state.config.listen);
    format!("http://{host}")
}

/// `GET /api/packages/{sha256}`: streamed from storage (a live trial's package too).
#[utoipa::path(
    get,
    path = "/api/packages/{sha256}",
    tag = "runner",
    security(("runner_key" = []), ("manager_token" = [])),
    params(("sha256" = String, Path, description = "the package's SHA-256, hex")),
    responses((status = 200, description = "The package bytes", content_type = "application/gzip", body = Binary), PackageErrors)
)]
pub async fn package(
    state: axum::extract::State<AppState>,
    _auth: PackageAuth,
    ApiPath(sha256): ApiPath<String>,
) -> Result<Response, ApiError> {
    if !is_sha256_hex(&sha256) {
        return Err(ApiError::not_found(format!("no package {sha256:?}")));
    }
    let mut found = Storage::stream(&state.storage.package_path(&sha256)).await?;
    if found.is_none()
        && let Some(file) = state.db.live_trial_package(&sha256).await?
    {
        found = Storage::stream(&state.storage.trial_package_path(&file)).await?;
    }
    let (body, len) = found.ok_or_else(|| ApiError::not_found(format!("no package {sha256}")))?;
    Ok((
        [
            (CONTENT_TYPE, "application/gzip".to_string()),
            (CONTENT_LENGTH, len.to_string()),
        ],
        body,
    )
        .into_response())
}

/// The lease a call presents; `attempt` counts for jobs only (trials have none).
fn fence<'a>(
    work: WorkKind,
    id: i64,
    token: &'a str,
    attempt: Option<i64>,
    runner: RunnerAuth,
) -> Fence<'a> {
    Fence {
        work,
        id,
        lease_token: token,
        runner_id: runner.runner_id,
        attempt: attempt.filter(|_| work == WorkKind::Job),
    }
}

fn to_i64(n: u64, what: &str) -> Result<i64, ApiError> {
    i64::try_from(n).map_err(|_| ApiError::invalid(format!("{what} is too large")))
}

pub async fn renew(
    state: &AppState,
    work: WorkKind,
    runner: RunnerAuth,
    id: i64,
    body: LeaseRenewal,
) -> Result<Json<LeaseRenewed>, ApiError> {
    if let Some(s) = body.seconds
        && (s == 0 || s > MAX_RENEW_SECONDS)
    {
        return Err(ApiError::invalid(format!(
            "seconds must be between 1 and {MAX_RENEW_SECONDS}"
        )));
    }
    let seconds = body.seconds.map(|s| to_i64(s, "seconds")).transpose()?;
    let fence = fence(work, id, &body.lease_token, body.attempt, runner);
    let expires = state.db.renew_lease(fence, state.now_ms(), seconds).await?;
    Ok(Json(LeaseRenewed {
        lease_expires_at: to_datetime(expires),
    }))
}

pub async fn progress(
    state: &AppState,
    work: WorkKind,
    runner: RunnerAuth,
    id: i64,
    body: ProgressBody,
) -> Result<Json<LeaseRenewed>, ApiError> {
    let (done, total) = (to_i64(body.done, "done")?, to_i64(body.total, "total")?);
    let fence = fence(work, id, &body.lease_token, body.attempt, runner);
    let expires = state
        .db
        .record_progress(fence, state.now_ms(), done, total)
        .await?;
    Ok(Json(LeaseRenewed {
        lease_expires_at: to_datetime(expires),
    }))
}

pub async fn release(
    state: &AppState,
    work: WorkKind,
    runner: RunnerAuth,
    id: i64,
    body: ReleaseBody,
) -> Result<Json<StateAnswer>, ApiError> {
    let fence = fence(work, id, &body.lease_token, body.attempt, runner);
    let new_state = state.db.release(fence, state.now_ms()).await?;
    after_lease_end(state, work, id, new_state).await?;
    Ok(Json(StateAnswer { state: new_state }))
}

pub async fn failure(
    state: &AppState,
    work: WorkKind,
    runner: RunnerAuth,
    id: i64,
    body: FailureBody,
) -> Result<Json<StateAnswer>, ApiError> {
    let reason = body.reason.trim();
    if reason.is_empty() || reason.len() > MAX_REASON_LEN {
        return Err(ApiError::invalid(format!(
            "reason must be 1 to {MAX_REASON_LEN} bytes"
        )));
    }
    let fence = fence(work, id, &body.lease_token, body.attempt, runner);
    let new_state = state
        .db
        .record_failure(fence, state.now_ms(), reason, body.retryable)
        .await?;
    after_lease_end(state, work, id, new_state).await?;
    Ok(Json(StateAnswer { state: new_state }))
}

/// Work went back to the queue (wake waiting claims) or ended (a trial's package
/// goes).
async fn after_lease_end(
    state: &AppState,
    work: WorkKind,
    id: i64,
    new_state: crate::protocol::JobState,
) -> Result<(), ApiError> {
    match (new_state, work) {
        (crate::protocol::JobState::Queued, _) => state.notify_queue(),
        (crate::protocol::JobState::Failed, WorkKind::Trial) => {
            if let Some(file) = state.db.trial_package_file(id).await? {
                Storage::remove(&state.storage.trial_package_path(&file)).await;
            }
        }
        _ => {}
    }
    Ok(())
}

/// `PUT /api/jobs/{id}/files/{name}` with `X-Lease-Token`: attach `details` or `log`.
#[utoipa::path(
    put,
    path = "/api/jobs/{id}/files/{name}",
    tag = "runner",
    security(("runner_key" = [])),
    params(
        ("id" = i64, Path, description = "job id"),
        ("name" = String, Path, description = "`details` or `log`"),
        ("X-Lease-Token" = String, Header, description = "the job's lease token")
    ),
    request_body(content = Binary, content_type = "application/octet-stream"),
    responses((status = 200, description = "OK", body = FileStored), PutFileErrors)
)]
pub async fn put_file(
    state: axum::extract::State<AppState>,
    runner: RunnerAuth,
    ApiPath((job_id, name)): ApiPath<(i64, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<FileStored>, ApiError> {
    if !ATTACHMENT_NAMES.contains(&name.as_str()) {
        return Err(ApiError::invalid(format!(
            "attachment name must be one of {ATTACHMENT_NAMES:?}, not {name:?}"
        )));
    }
    let token = headers
        .get("x-lease-token")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| ApiError::invalid("the X-Lease-Token header is missing"))?
        .to_string();
    let received = state
        .storage
        .receive(body.into_data_stream(), state.config.max_upload)
        .await?;
    let size = received.size;
    let dest = state.storage.job_file_path(job_id, &name);
    state
        .db
        .attach_job_file(
            fence(WorkKind::Job, job_id, &token, None, runner),
            state.now_ms(),
            &name,
            to_i64(size, "size")?,
            move || Storage::place(received.temp, &dest),
        )
        .await?;
    Ok(Json(FileStored { name, size }))
}

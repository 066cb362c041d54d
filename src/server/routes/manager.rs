//! Manager calls: runners, tokens, problems, submissions, rejudge, cancel, reads.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::protocol::{
    AttemptCreated, CreateRunner, CreateSubmission, JobView, ProblemCreated, RejudgeRequest,
    RunnerCreated, RunnerRevoked, SubmissionFile, SubmissionView, TokenCreated, TokenRequest,
};
use crate::server::auth::{
    API_TOKEN_PREFIX, GRANTABLE_SCOPES, ManagerAuth, ProblemsWriteAuth, RUNNER_KEY_PREFIX,
    ReadAuth, SubmissionsWriteAuth, digest_hex, new_secret,
};
use crate::server::db::idempotency::KeyedRoute;
use crate::server::db::lease::Sweep;
use crate::server::db::records::NewVersion;
use crate::server::db::{DbError, WorkKind};
use crate::server::error::ApiError;
use crate::server::extract::{ApiJson, ApiPath, ApiQuery, OptionalJson};
use crate::server::idempotency::{self, Keyed};
use crate::server::packages;
use crate::server::routes::openapi::{
    AUTHED, BODY, Binary, KEYED, LANGUAGE, MISSING, PACKAGE, SERVER, errors,
};
use crate::server::state::AppState;
use crate::server::storage::{Received, Storage};

errors!(JsonErrors: AUTHED, BODY, SERVER);
errors!(PathErrors: AUTHED, MISSING, SERVER);
errors!(ProblemErrors: AUTHED, BODY, MISSING, PACKAGE, SERVER, KEYED);
errors!(SubmissionErrors: AUTHED, BODY, MISSING, SERVER, LANGUAGE, KEYED, &[(422, &[
    crate::protocol::codes::error::CALLBACK_URL_INVALID,
    crate::protocol::codes::error::CALLBACK_URL_NO_SECRET,
])]);
errors!(RejudgeErrors: AUTHED, BODY, MISSING, SERVER, &[(409, &[crate::protocol::codes::error::ATTEMPT_CONFLICT])]);
errors!(CancelErrors: AUTHED, MISSING, SERVER, &[(409, &[crate::protocol::codes::error::ATTEMPT_FINISHED])]);

/// Longest runner name, language name or file name accepted.
const MAX_NAME_LEN: usize = 255;

type Created<T> = (StatusCode, Json<T>);

fn created<T>(body: T) -> Created<T> {
    (StatusCode::CREATED, Json(body))
}

#[utoipa::path(
    post,
    path = "/api/runners",
    tag = "manager",
    security(("manager_token" = [])),
    request_body = CreateRunner,
    responses((status = 201, description = "The key is shown once", body = RunnerCreated), JsonErrors)
)]
pub async fn create_runner(
    State(state): State<AppState>,
    _: ManagerAuth,
    ApiJson(body): ApiJson<CreateRunner>,
) -> Result<Created<RunnerCreated>, ApiError> {
    check_name("name", &body.name)?;
    let key = new_secret(RUNNER_KEY_PREFIX);
    let runner_id = state
        .db
        .create_runner(&body.name, &digest_hex(&key), state.now_ms())
        .await?;
    Ok(created(RunnerCreated { runner_id, key }))
}

/// Revokes the key; the runner's Running work goes back to Queued as if its lease
/// had just expired (same refund and cap rules as the reaper).
#[utoipa::path(
    delete,
    path = "/api/runners/{id}",
    tag = "manager",
    security(("manager_token" = [])),
    params(("id" = i64, Path, description = "runner id")),
    responses((status = 200, description = "OK", body = RunnerRevoked), PathErrors)
)]
pub async fn revoke_runner(
    State(state): State<AppState>,
    _: ManagerAuth,
    ApiPath(runner_id): ApiPath<i64>,
) -> Result<Json<RunnerRevoked>, ApiError> {
    revoke(&state, runner_id).await.map(Json)
}

/// Revokes a Runner's key and requeues what it held (the API and the console).
pub async fn revoke(state: &AppState, runner_id: i64) -> Result<RunnerRevoked, ApiError> {
    if !state
        .db
        .mark_runner_revoked(runner_id, state.now_ms())
        .await?
    {
        return Err(ApiError::not_found(format!(
            "runner {runner_id} does not exist"
        )));
    }
    let jobs = state
        .db
        .requeue(WorkKind::Job, Sweep::OfRunner(runner_id))
        .await?;
    let trials = state
        .db
        .requeue(WorkKind::Trial, Sweep::OfRunner(runner_id))
        .await?;
    crate::server::reaper::after_requeue(state, &jobs, &trials).await;
    Ok(RunnerRevoked {
        runner_id,
        revoked: true,
        requeued: (jobs.len() + trials.len()) as u64,
    })
}

#[utoipa::path(
    post,
    path = "/api/tokens",
    tag = "manager",
    security(("manager_token" = [])),
    request_body = TokenRequest,
    responses((status = 201, description = "Created", body = TokenCreated), JsonErrors)
)]
pub async fn create_token(
    State(state): State<AppState>,
    _: ManagerAuth,
    ApiJson(body): ApiJson<TokenRequest>,
) -> Result<Created<crate::protocol::TokenCreated>, ApiError> {
    if body.scopes.is_empty() {
        return Err(ApiError::invalid("scopes must name at least one scope"));
    }
    if let Some(bad) = body
        .scopes
        .iter()
        .find(|s| !GRANTABLE_SCOPES.contains(&s.as_str()))
    {
        return Err(ApiError::invalid(format!(
            "unknown scope {bad:?}; grantable: {GRANTABLE_SCOPES:?}"
        )));
    }
    let token = new_secret(API_TOKEN_PREFIX);
    state
        .db
        .create_api_token(&digest_hex(&token), &body.scopes, state.now_ms())
        .await?;
    Ok(created(TokenCreated { token }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ProblemQuery {
    /// Adds a version to this problem instead of creating one.
    problem_id: Option<i64>,
    /// Seconds, for a package that names no time limit (stored on the version).
    time_limit: Option<f64>,
}

/// Receives a package upload into a temp file and checks it is a problem package.
pub async fn receive_package(state: &AppState, body: Body) -> Result<Received, ApiError> {
    let received = state
        .storage
        .receive(body.into_data_stream(), state.config.max_upload)
        .await?;
    let path = received.temp.to_path_buf();
    tokio::task::spawn_blocking(move || packages::validate(&path, "the uploaded package"))
        .await
        .map_err(|e| ApiError::Internal(format!("package check panicked: {e}")))?
        .map_err(ApiError::PackageInvalid)?;
    Ok(received)
}

/// `POST /api/problems`: the body is the package `.tar.gz`.
#[utoipa::path(
    post,
    path = "/api/problems",
    tag = "manager",
    security(("manager_token" = []), ("scoped_token" = ["problems:write"])),
    params(ProblemQuery, IdempotencyKeyHeader),
    request_body(content = Binary, content_type = "application/octet-stream", description = "The package `.tar.gz` (any `Content-Type` is accepted)"),
    responses((status = 201, description = "Created (or, under a known `Idempotency-Key`, the first answer again)", body = ProblemCreated, headers(("Idempotent-Replayed" = String, description = "`true` on an answer replayed from an `Idempotency-Key`"))), ProblemErrors)
)]
pub async fn create_problem(
    State(state): State<AppState>,
    _: ProblemsWriteAuth,
    ApiQuery(query): ApiQuery<ProblemQuery>,
    headers: axum::http::HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let time_limit = query.time_limit.map(check_time_limit).transpose()?;
    let received = receive_package(&state, body).await?;
    let sha256 = received.sha256.clone();
    // The same package under the same query is the same request.
    let keyed = Keyed::from_headers(&headers, KeyedRoute::Problems, || {
        let problem = query
            .problem_id
            .map(|id| id.to_string())
            .unwrap_or_default();
        let limit = time_limit.map(|t| t.to_string()).unwrap_or_default();
        idempotency::request_digest(&[sha256.as_bytes(), problem.as_bytes(), limit.as_bytes()])
    })?;
    let problem_created = |(problem_id, problem_version_id), replayed| {
        let body = ProblemCreated {
            problem_id,
            problem_version_id,
            sha256: sha256.clone(),
        };
        idempotency::created(body, replayed)
    };
    if let Some(keyed) = &keyed
        && let Some(first) = keyed.first_answer(&state.db).await?
    {
        return Ok(problem_created(first, true));
    }
    let dest = state.storage.package_path(&sha256);
    Storage::place_if_missing(received.temp, &dest)
        .map_err(|e| ApiError::Internal(format!("cannot store package {sha256}: {e}")))?;
    let version = NewVersion {
        sha256: &sha256,
        size: i64::try_from(received.size).unwrap_or(i64::MAX),
        time_limit,
    };
    let now = state.now_ms();
    let remember = keyed.as_ref().map(Keyed::remember);
    let made = match query.problem_id {
        None => {
            state
                .db
                .create_problem(&version, remember.as_ref(), now)
                .await
        }
        Some(id) => state
            .db
            .add_problem_version(id, &version, remember.as_ref(), now)
            .await
            .and_then(|v| {
                v.map(|version_id| (id, version_id))
                    .ok_or(DbError::NotFound {
                        what: "problem",
                        id,
                    })
            }),
    };
    match (made, &keyed) {
        (Err(DbError::KeyTaken), Some(keyed)) => {
            Ok(problem_created(keyed.twin_answer(&state.db).await?, true))
        }
        (made, _) => Ok(problem_created(made?, false)),
    }
}

pub fn check_time_limit(t: f64) -> Result<f64, ApiError> {
    if t.is_finite() && t > 0.0 && t <= 3600.0 {
        Ok(t)
    } else {
        Err(ApiError::invalid(
            "time_limit must be a number of seconds in (0, 3600]",
        ))
    }
}

pub fn check_name(what: &str, name: &str) -> Result<(), ApiError> {
    if name.trim().is_empty() || name.len() > MAX_NAME_LEN {
        return Err(ApiError::invalid(format!(
            "{what} must be 1 to {MAX_NAME_LEN} bytes"
        )));
    }
    Ok(())
}

/// Files a Runner writes into its box: plain names only, decodable content.
pub fn check_files(files: &[SubmissionFile]) -> Result<(), ApiError> {
    if files.is_empty() {
        return Err(ApiError::invalid("files must hold at least one file"));
    }
    for file in files {
        check_name("a file name", &file.name)?;
        if file.name.contains(['/', '\\', '\0']) || file.name == "." || file.name == ".." {
            return Err(ApiError::invalid(format!(
                "file name {:?} must be a plain name (no directories)",
                file.name
            )));
        }
        file.bytes().map_err(|e| ApiError::invalid(e.to_string()))?;
    }
    Ok(())
}

#[utoipa::path(
    post,
    path = "/api/submissions",
    tag = "manager",
    security(("manager_token" = []), ("scoped_token" = ["submissions:write"])),
    params(IdempotencyKeyHeader),
    request_body = CreateSubmission,
    responses((status = 201, description = "Created (or, under a known `Idempotency-Key`, the first answer again)", body = AttemptCreated, headers(("Idempotent-Replayed" = String, description = "`true` on an answer replayed from an `Idempotency-Key`"))), SubmissionErrors)
)]
pub async fn create_submission(
    State(state): State<AppState>,
    _: SubmissionsWriteAuth,
    headers: axum::http::HeaderMap,
    ApiJson(body): ApiJson<CreateSubmission>,
) -> Result<Response, ApiError> {
    let keyed = Keyed::from_headers(&headers, KeyedRoute::Submissions, || {
        idempotency::json_digest(&body)
    })?;
    let attempt_created = |(submission_id, job_id), replayed| {
        let body = AttemptCreated {
            submission_id,
            job_id,
            attempt: 1,
        };
        idempotency::created(body, replayed)
    };
    if let Some(keyed) = &keyed
        && let Some(first) = keyed.first_answer(&state.db).await?
    {
        return Ok(attempt_created(first, true));
    }
    check_name("language", &body.language)?;
    let language = state.check_language(&body.language)?;
    check_files(&body.files)?;
    if let Some(url) = &body.callback_url {
        let host = headers
            .get(axum::http::header::HOST)
            .and_then(|h| h.to_str().ok());
        crate::server::webhooks::check_callback_url(&state, url, host).await?;
    }
    let files_json = serde_json::to_string(&body.files)
        .map_err(|e| ApiError::Internal(format!("files do not serialise: {e}")))?;
    let remember = keyed.as_ref().map(Keyed::remember);
    let created_ids = state
        .db
        .create_submission(
            body.problem_id,
            &language,
            &files_json,
            body.callback_url.as_deref(),
            remember.as_ref(),
            state.now_ms(),
        )
        .await;
    let created_ids = match (created_ids, &keyed) {
        (Err(DbError::KeyTaken), Some(keyed)) => {
            return Ok(attempt_created(keyed.twin_answer(&state.db).await?, true));
        }
        (created_ids, _) => created_ids?,
    };
    let ids = created_ids.ok_or_else(|| {
        ApiError::not_found(format!("problem {} does not exist", body.problem_id))
    })?;
    state.notify_queue();
    Ok(attempt_created(ids, false))
}

/// The `Idempotency-Key` request header, for the OpenAPI document.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // a schema only: the handlers read the header themselves
pub struct IdempotencyKeyHeader {
    /// 1 to 255 printable ASCII characters naming this request: the same key with
    /// the same request answers the first answer again (201, the same ids, header
    /// `Idempotent-Replayed: true`); with another request, 409 `request.conflict`.
    #[serde(rename = "Idempotency-Key")]
    #[param(
        rename = "Idempotency-Key",
        max_length = 255,
        min_length = 1,
        pattern = "^[!-~]([ -~]*[!-~])?$",
        nullable = false
    )]
    idempotency_key: Option<String>,
}

#[utoipa::path(
    post,
    path = "/api/submissions/{id}/rejudge",
    tag = "manager",
    security(("manager_token" = []), ("scoped_token" = ["submissions:write"])),
    params(("id" = i64, Path, description = "submission id")),
    request_body(content = Option<RejudgeRequest>, description = "May be left out"),
    responses((status = 201, description = "Created", body = AttemptCreated), RejudgeErrors)
)]
pub async fn rejudge(
    State(state): State<AppState>,
    _: SubmissionsWriteAuth,
    ApiPath(submission_id): ApiPath<i64>,
    OptionalJson(body): OptionalJson<RejudgeRequest>,
) -> Result<Created<AttemptCreated>, ApiError> {
    let (job_id, attempt) = state
        .db
        .rejudge(submission_id, body.expected_attempt, state.now_ms())
        .await?;
    state.notify_queue();
    Ok(created(AttemptCreated {
        submission_id,
        job_id,
        attempt,
    }))
}

#[utoipa::path(
    post,
    path = "/api/jobs/{id}/cancel",
    tag = "manager",
    security(("manager_token" = []), ("scoped_token" = ["submissions:write"])),
    params(("id" = i64, Path, description = "job id")),
    responses((status = 200, description = "The cancelled job", body = JobView), CancelErrors)
)]
pub async fn cancel(
    State(state): State<AppState>,
    _: SubmissionsWriteAuth,
    ApiPath(job_id): ApiPath<i64>,
) -> Result<Json<JobView>, ApiError> {
    state.db.cancel_job(job_id).await?;
    get_job_view(&state, job_id).await.map(Json)
}

async fn get_job_view(state: &AppState, job_id: i64) -> Result<JobView, ApiError> {
    state.db.job_view(job_id).await?.ok_or_else(|| {
        DbError::NotFound {
            what: "job",
            id: job_id,
        }
        .into()
    })
}

#[utoipa::path(
    get,
    path = "/api/jobs/{id}",
    tag = "manager",
    security(("manager_token" = []), ("scoped_token" = ["console:read"])),
    params(("id" = i64, Path, description = "job id")),
    responses((status = 200, description = "OK", body = JobView), PathErrors)
)]
pub async fn get_job(
    State(state): State<AppState>,
    _: ReadAuth,
    ApiPath(job_id): ApiPath<i64>,
) -> Result<Json<JobView>, ApiError> {
    get_job_view(&state, job_id).await.map(Json)
}

#[utoipa::path(
    get,
    path = "/api/submissions/{id}",
    tag = "manager",
    security(("manager_token" = []), ("scoped_token" = ["console:read"])),
    params(("id" = i64, Path, description = "submission id")),
    responses((status = 200, description = "OK", body = SubmissionView), PathErrors)
)]
pub async fn get_submission(
    State(state): State<AppState>,
    _: ReadAuth,
    ApiPath(submission_id): ApiPath<i64>,
) -> Result<Json<SubmissionView>, ApiError> {
    let view = state.db.submission_view(submission_id).await?;
    view.map(Json).ok_or_else(|| {
        DbError::NotFound {
            what: "submission",
            id: submission_id,
        }
        .into()
    })
}

/// `GET /api/jobs/{id}/files/{name}`: an attachment's bytes, streamed.
#[utoipa::path(
    get,
    path = "/api/jobs/{id}/files/{name}",
    tag = "manager",
    security(("manager_token" = []), ("scoped_token" = ["console:read"])),
    params(("id" = i64, Path, description = "job id"), ("name" = String, Path, description = "`details` or `log`")),
    responses((status = 200, description = "The attachment's bytes", content_type = "application/octet-stream", body = Binary), PathErrors)
)]
pub async fn get_file(
    State(state): State<AppState>,
    _: ReadAuth,
    ApiPath((job_id, name)): ApiPath<(i64, String)>,
) -> Result<Response, ApiError> {
    let missing = || ApiError::not_found(format!("job {job_id} has no attachment {name:?}"));
    if state.db.job_file_size(job_id, &name).await?.is_none() {
        return Err(missing());
    }
    let (body, len) = Storage::stream(&state.storage.job_file_path(job_id, &name))
        .await?
        .ok_or_else(missing)?;
    Ok((
        [
            (CONTENT_TYPE, "application/octet-stream".to_string()),
            (CONTENT_LENGTH, len.to_string()),
        ],
        body,
    )
        .into_response())
}

//! The listing routes (CONTRACT §7): `GET /api/jobs`, `/api/submissions`,
//! `/api/runners`, `/api/problems` (keyset pages, newest first) and `/api/queue`.
//! The manager token or a `console:read` token. The reads are
//! [`crate::server::db::listing`]; this module checks the query and answers JSON.

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::protocol::JobState;
use crate::server::auth::ReadAuth;
use crate::server::db::listing::{
    JobItem, Listing, Page, PageError, PageRequest, ProblemItem, QueueSummary, RunnerItem,
    SubmissionItem, WorkFilter,
};
use crate::server::error::ApiError;
use crate::server::extract::ApiQuery;
use crate::server::routes::openapi::{AUTHED, BODY, SERVER, errors};
use crate::server::state::AppState;

errors!(ListErrors: AUTHED, BODY, SERVER);
errors!(QueueErrors: AUTHED, SERVER);

/// Longest `?verdict=` accepted (verdicts are opaque strings, matched exactly).
const MAX_VERDICT_LEN: usize = 128;

impl From<PageError> for ApiError {
    fn from(e: PageError) -> Self {
        ApiError::invalid(e.to_string())
    }
}

/// The query of `GET /api/jobs` and `GET /api/submissions`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct WorkQuery {
    /// Only this state (`Queued`, `Running`, `Completed`, `Failed`, `Cancelled`,
    /// `Superseded`); on submissions, their latest attempt's.
    state: Option<String>,
    /// Only this language (one this Server accepts, `serve --languages`).
    language: Option<String>,
    /// Only this problem's (an existing problem id).
    problem_id: Option<i64>,
    /// Only jobs this Runner holds or held (an existing runner id); on
    /// submissions, their latest attempt's.
    runner_id: Option<i64>,
    /// Only jobs whose Result has exactly this verdict; on submissions, their
    /// latest attempt's.
    verdict: Option<String>,
    /// Only those created at or after this time (RFC 3339).
    since: Option<DateTime<Utc>>,
    /// Only those created before this time (RFC 3339).
    until: Option<DateTime<Utc>>,
    /// Items per page: 1 to 500, default 50.
    limit: Option<i64>,
    /// `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// The query of `GET /api/runners` and `GET /api/problems`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Items per page: 1 to 500, default 50.
    limit: Option<i64>,
    /// `next_cursor` of the previous page.
    cursor: Option<String>,
}

/// A page of jobs (the `Page` of [`crate::server::db::listing`], for the document).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // a schema only
pub struct JobPage {
    items: Vec<JobItem>,
    /// Pass as `?cursor=` for the next page; null on the last page.
    next_cursor: Option<String>,
}

/// A page of submissions.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // a schema only
pub struct SubmissionPage {
    items: Vec<SubmissionItem>,
    /// Pass as `?cursor=` for the next page; null on the last page.
    next_cursor: Option<String>,
}

/// A page of Runners.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // a schema only
pub struct RunnerPage {
    items: Vec<RunnerItem>,
    /// Pass as `?cursor=` for the next page; null on the last page.
    next_cursor: Option<String>,
}

/// A page of problems.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // a schema only
pub struct ProblemPage {
    items: Vec<ProblemItem>,
    /// Pass as `?cursor=` for the next page; null on the last page.
    next_cursor: Option<String>,
}

/// Checks a work query's filters: 400 `request.invalid` for a state that is none,
/// a language this Server does not accept, a problem or runner that does not
/// exist, an empty or overlong verdict, or `since` after `until`.
pub async fn work_filter(state: &AppState, q: &WorkQuery) -> Result<WorkFilter, ApiError> {
    let job_state = q
        .state
        .as_deref()
        .map(|s| {
            s.parse::<JobState>().map_err(|_| {
                ApiError::invalid(format!(
                    "unknown state {s:?}; states: {}",
                    JobState::ALL.map(JobState::as_str).join(", ")
                ))
            })
        })
        .transpose()?;
    if let Some(language) = &q.language
        && !state.config.languages.iter().any(|l| l == language)
    {
        return Err(ApiError::invalid(format!(
            "unknown language {language:?}; this Server accepts: {}",
            state.config.languages.join(", ")
        )));
    }
    if let Some(verdict) = &q.verdict
        && (verdict.is_empty() || verdict.len() > MAX_VERDICT_LEN)
    {
        return Err(ApiError::invalid(format!(
            "verdict must be 1 to {MAX_VERDICT_LEN} bytes"
        )));
    }
    if let Some(id) = q.problem_id
        && !state.db.problem_exists(id).await?
    {
        return Err(ApiError::invalid(format!("unknown problem_id {id}")));
    }
    if let Some(id) = q.runner_id
        && !state.db.runner_exists(id).await?
    {
        return Err(ApiError::invalid(format!("unknown runner_id {id}")));
    }
    let since_ms = q.since.map(|t| t.timestamp_millis());
    let until_ms = q.until.map(|t| t.timestamp_millis());
    if let (Some(s), Some(u)) = (since_ms, until_ms)
        && s > u
    {
        return Err(ApiError::invalid("since is after until"));
    }
    Ok(WorkFilter {
        state: job_state,
        language: q.language.clone(),
        problem_id: q.problem_id,
        runner_id: q.runner_id,
        verdict: q.verdict.clone(),
        since_ms,
        until_ms,
    })
}

/// `GET /api/jobs`: jobs newest first, filtered, one keyset page.
#[utoipa::path(
    get,
    path = "/api/jobs",
    tag = "manager",
    security(("manager_token" = []), ("scoped_token" = ["console:read"])),
    params(WorkQuery),
    responses((status = 200, description = "One page of jobs, newest first", body = JobPage), ListErrors)
)]
pub async fn list_jobs(
    State(state): State<AppState>,
    _: ReadAuth,
    ApiQuery(q): ApiQuery<WorkQuery>,
) -> Result<Json<Page<JobItem>>, ApiError> {
    let page = PageRequest::parse(Listing::Jobs, q.limit, q.cursor.as_deref())?;
    let filter = work_filter(&state, &q).await?;
    Ok(Json(state.db.list_jobs(&filter, page).await?))
}

/// `GET /api/submissions`: submissions newest first with their latest attempt.
#[utoipa::path(
    get,
    path = "/api/submissions",
    tag = "manager",
    security(("manager_token" = []), ("scoped_token" = ["console:read"])),
    params(WorkQuery),
    responses((status = 200, description = "One page of submissions, newest first", body = SubmissionPage), ListErrors)
)]
pub async fn list_submissions(
    State(state): State<AppState>,
    _: ReadAuth,
    ApiQuery(q): ApiQuery<WorkQuery>,
) -> Result<Json<Page<SubmissionItem>>, ApiError> {
    let page = PageRequest::parse(Listing::Submissions, q.limit, q.cursor.as_deref())?;
    let filter = work_filter(&state, &q).await?;
    Ok(Json(state.db.list_submissions(&filter, page).await?))
}

/// `GET /api/runners`: Runners newest first, revoked ones too.
#[utoipa::path(
    get,
    path = "/api/runners",
    tag = "manager",
    security(("manager_token" = []), ("scoped_token" = ["console:read"])),
    params(PageQuery),
    responses((status = 200, description = "One page of Runners, newest first", body = RunnerPage), ListErrors)
)]
pub async fn list_runners(
    State(state): State<AppState>,
    _: ReadAuth,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<Json<Page<RunnerItem>>, ApiError> {
    let page = PageRequest::parse(Listing::Runners, q.limit, q.cursor.as_deref())?;
    Ok(Json(state.db.list_runners(page).await?))
}

/// `GET /api/problems`: problems newest first with their versions.
#[utoipa::path(
    get,
    path = "/api/problems",
    tag = "manager",
    security(("manager_token" = []), ("scoped_token" = ["console:read"])),
    params(PageQuery),
    responses((status = 200, description = "One page of problems, newest first", body = ProblemPage), ListErrors)
)]
pub async fn list_problems(
    State(state): State<AppState>,
    _: ReadAuth,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<Json<Page<ProblemItem>>, ApiError> {
    let page = PageRequest::parse(Listing::Problems, q.limit, q.cursor.as_deref())?;
    Ok(Json(state.db.list_problems(page).await?))
}

/// `GET /api/queue`: jobs per state, Queued jobs per language, the oldest Queued
/// job's age, and claims and Results per minute over the last hour.
#[utoipa::path(
    get,
    path = "/api/queue",
    tag = "manager",
    security(("manager_token" = []), ("scoped_token" = ["console:read"])),
    responses((status = 200, description = "The queue now", body = QueueSummary), QueueErrors)
)]
pub async fn queue(
    State(state): State<AppState>,
    _: ReadAuth,
) -> Result<Json<QueueSummary>, ApiError> {
    Ok(Json(state.db.queue_summary(state.now_ms()).await?))
}

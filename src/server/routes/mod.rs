//! The HTTP surface (`../shared/CONTRACT.md` §4), handlers grouped by caller.

pub mod listing;
pub mod manager;
pub mod openapi;
pub mod ops;
pub mod results;
pub mod runner;
pub mod trials;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::protocol::{
    FailureBody, LeaseRenewal, ProgressBody, ReleaseBody, ResultBody, TrialResultBody,
};
use crate::server::auth::RunnerAuth;
use crate::server::db::WorkKind;
use crate::server::extract::{ApiJson, ApiJsonWithBytes, ApiPath};
use crate::server::state::AppState;

use crate::server::routes::openapi::{AUTHED, BODY, LEASE, MISSING, SERVER, errors};

errors!(LeaseErrors: AUTHED, BODY, MISSING, LEASE, SERVER);
errors!(ResultErrors: AUTHED, BODY, MISSING, LEASE, SERVER, &[(422, &[crate::protocol::codes::error::RESULT_EXTRA_TOO_LARGE])]);

/// The same lease-bearing handler for jobs and trials: `$name` for `$work` at
/// `$path`, documented with `$what`.
macro_rules! lease_handler {
    ($name:ident, $path:literal, $tag:literal, $what:literal, $work:expr, $body:ty, $answer:ty, $target:path) => {
        #[doc = $what]
        #[utoipa::path(
                    post,
                    path = $path,
                    tag = $tag,
                    description = $what,
                    security(("runner_key" = [])),
                    params(("id" = i64, Path)),
                    request_body = $body,
                    responses((status = 200, description = "OK", body = $answer), LeaseErrors)
                )]
        async fn $name(
            State(state): State<AppState>,
            runner: RunnerAuth,
            ApiPath(id): ApiPath<i64>,
            ApiJson(body): ApiJson<$body>,
        ) -> Result<axum::Json<$answer>, crate::server::error::ApiError> {
            $target(&state, $work, runner, id, body).await
        }
    };
}

use crate::protocol::{LeaseRenewed, StateAnswer};
lease_handler!(
    job_lease,
    "/api/jobs/{id}/lease",
    "runner",
    "Renews the lease by `seconds`, else by the job's `lease_seconds`.",
    WorkKind::Job,
    LeaseRenewal,
    LeaseRenewed,
    runner::renew
);
lease_handler!(
    trial_lease,
    "/api/trials/{id}/lease",
    "runner",
    "Renews a trial's lease by `seconds`, else by its `lease_seconds`.",
    WorkKind::Trial,
    LeaseRenewal,
    LeaseRenewed,
    runner::renew
);
lease_handler!(
    job_progress,
    "/api/jobs/{id}/progress",
    "runner",
    "Stores progress and renews the lease by `lease_seconds`.",
    WorkKind::Job,
    ProgressBody,
    LeaseRenewed,
    runner::progress
);
lease_handler!(
    trial_progress,
    "/api/trials/{id}/progress",
    "runner",
    "Stores a trial's progress and renews its lease.",
    WorkKind::Trial,
    ProgressBody,
    LeaseRenewed,
    runner::progress
);
lease_handler!(
    job_release,
    "/api/jobs/{id}/release",
    "runner",
    "Gives the job back to the queue (the Runner is stopping).",
    WorkKind::Job,
    ReleaseBody,
    StateAnswer,
    runner::release
);
lease_handler!(
    trial_release,
    "/api/trials/{id}/release",
    "runner",
    "Gives the trial back to the queue (the Runner is stopping).",
    WorkKind::Trial,
    ReleaseBody,
    StateAnswer,
    runner::release
);
lease_handler!(
    job_failure,
    "/api/jobs/{id}/failure",
    "runner",
    "An infrastructure failure: Queued again if retryable and under the delivery cap, else Failed with `failure_reason`.",
    WorkKind::Job,
    FailureBody,
    StateAnswer,
    runner::failure
);
lease_handler!(
    trial_failure,
    "/api/trials/{id}/failure",
    "runner",
    "An infrastructure failure of a trial.",
    WorkKind::Trial,
    FailureBody,
    StateAnswer,
    runner::failure
);

/// The job's Result; the same lease token again is idempotent.
#[utoipa::path(
    post,
    path = "/api/jobs/{id}/result",
    tag = "runner",
    security(("runner_key" = [])),
    params(("id" = i64, Path)),
    request_body = ResultBody,
    responses((status = 200, description = "OK", body = StateAnswer), ResultErrors)
)]
async fn job_result(
    State(state): State<AppState>,
    runner: RunnerAuth,
    ApiPath(id): ApiPath<i64>,
    ApiJsonWithBytes(body, raw): ApiJsonWithBytes<ResultBody>,
) -> Result<axum::Json<StateAnswer>, crate::server::error::ApiError> {
    results::job_result(&state, runner, id, body, &raw).await
}

/// A trial's timings; its package is deleted.
#[utoipa::path(
    post,
    path = "/api/trials/{id}/result",
    tag = "runner",
    security(("runner_key" = [])),
    params(("id" = i64, Path)),
    request_body = TrialResultBody,
    responses((status = 200, description = "OK", body = StateAnswer), LeaseErrors)
)]
async fn trial_result(
    State(state): State<AppState>,
    runner: RunnerAuth,
    ApiPath(id): ApiPath<i64>,
    ApiJson(body): ApiJson<TrialResultBody>,
) -> Result<axum::Json<StateAnswer>, crate::server::error::ApiError> {
    results::trial_result(&state, runner, id, body).await
}

/// Every documented route, as an `OpenApiRouter` (routes and document from the
/// same handlers). JSON bodies are limited to `max_body` and uploads to
/// `max_upload` by [`router`], which knows the configuration.
pub fn api_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .merge(json_routes())
        .merge(upload_routes())
        .merge(ops_routes())
}

fn json_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(manager::create_runner, listing::list_runners))
        .routes(routes!(manager::revoke_runner))
        .routes(routes!(manager::create_token))
        .routes(routes!(
            manager::create_submission,
            listing::list_submissions
        ))
        .routes(routes!(manager::get_submission))
        .routes(routes!(manager::rejudge))
        .routes(routes!(runner::claim))
        .routes(routes!(manager::get_job))
        .routes(routes!(listing::list_jobs))
        .routes(routes!(listing::queue))
        .routes(routes!(manager::cancel))
        .routes(routes!(job_lease))
        .routes(routes!(job_progress))
        .routes(routes!(job_release))
        .routes(routes!(job_failure))
        .routes(routes!(job_result))
        .routes(routes!(trials::get))
        .routes(routes!(trial_lease))
        .routes(routes!(trial_progress))
        .routes(routes!(trial_release))
        .routes(routes!(trial_failure))
        .routes(routes!(trial_result))
        .routes(routes!(runner::package))
}

fn upload_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(manager::create_problem, listing::list_problems))
        .routes(routes!(trials::create))
        .routes(routes!(manager::get_file, runner::put_file))
}

fn ops_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(ops::metrics))
        .routes(routes!(ops::healthz))
        .routes(routes!(openapi::openapi_json))
}

/// Every route of the contract. JSON bodies are limited to `max_body`; package
/// and attachment uploads to `max_upload` (streamed to disk, never held whole).
pub fn router(state: AppState) -> Router {
    let json_limit = usize::try_from(state.config.max_body).unwrap_or(usize::MAX);
    let upload_limit = usize::try_from(state.config.max_upload).unwrap_or(usize::MAX);
    let (json, _) = json_routes()
        .layer(DefaultBodyLimit::max(json_limit))
        .split_for_parts();
    let (uploads, _) = upload_routes()
        .layer(DefaultBodyLimit::max(upload_limit))
        .split_for_parts();
    let (ops, _) = ops_routes().split_for_parts();
    Router::new()
        .merge(json)
        .merge(uploads)
        .merge(ops)
        .merge(crate::server::console::router(state.config.max_upload))
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        .with_state(state)
        .layer(axum::middleware::from_fn(log_request))
}

/// Logs every request at info once answered (CONTRACT §4): method, the route
/// template (`/api/jobs/{id}/lease`, not the ids, never a query or a header, so
/// never a token), status and milliseconds.
async fn log_request(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or_else(|| "(no route)".to_string(), |m| m.as_str().to_string());
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    tracing::info!(
        %method,
        route = %route,
        status = response.status().as_u16(),
        ms = format_args!("{ms:.1}"),
        "request"
    );
    response
}

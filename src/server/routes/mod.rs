//! The HTTP surface (`../shared/CONTRACT.md` §4), handlers grouped by caller.

pub mod manager;
pub mod ops;
pub mod results;
pub mod runner;
pub mod trials;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::routing::{delete, get, post};

use crate::protocol::{
    FailureBody, LeaseRenewal, ProgressBody, ReleaseBody, ResultBody, TrialResultBody,
};
use crate::server::auth::RunnerAuth;
use crate::server::db::Work;
use crate::server::extract::{ApiJson, ApiJsonWithBytes, ApiPath};
use crate::server::state::AppState;

/// The same lease-bearing handler for jobs and trials: `$name` for `$work`.
macro_rules! lease_handler {
    ($name:ident, $work:expr, $body:ty, $answer:ty, $target:path) => {
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
    Work::Job,
    LeaseRenewal,
    LeaseRenewed,
    runner::renew
);
lease_handler!(
    trial_lease,
    Work::Trial,
    LeaseRenewal,
    LeaseRenewed,
    runner::renew
);
lease_handler!(
    job_progress,
    Work::Job,
    ProgressBody,
    LeaseRenewed,
    runner::progress
);
lease_handler!(
    trial_progress,
    Work::Trial,
    ProgressBody,
    LeaseRenewed,
    runner::progress
);
lease_handler!(
    job_release,
    Work::Job,
    ReleaseBody,
    StateAnswer,
    runner::release
);
lease_handler!(
    trial_release,
    Work::Trial,
    ReleaseBody,
    StateAnswer,
    runner::release
);
lease_handler!(
    job_failure,
    Work::Job,
    FailureBody,
    StateAnswer,
    runner::failure
);
lease_handler!(
    trial_failure,
    Work::Trial,
    FailureBody,
    StateAnswer,
    runner::failure
);

async fn job_result(
    State(state): State<AppState>,
    runner: RunnerAuth,
    ApiPath(id): ApiPath<i64>,
    ApiJsonWithBytes(body, raw): ApiJsonWithBytes<ResultBody>,
) -> Result<axum::Json<StateAnswer>, crate::server::error::ApiError> {
    results::job_result(&state, runner, id, body, &raw).await
}

async fn trial_result(
    State(state): State<AppState>,
    runner: RunnerAuth,
    ApiPath(id): ApiPath<i64>,
    ApiJson(body): ApiJson<TrialResultBody>,
) -> Result<axum::Json<StateAnswer>, crate::server::error::ApiError> {
    results::trial_result(&state, runner, id, body).await
}

/// Every route of the contract. JSON bodies are limited to `max_body`; package
/// and attachment uploads to `max_upload` (streamed to disk, never held whole).
pub fn router(state: AppState) -> Router {
    let json_limit = usize::try_from(state.config.max_body).unwrap_or(usize::MAX);
    let upload_limit = usize::try_from(state.config.max_upload).unwrap_or(usize::MAX);
    let uploads = Router::new()
        .route("/api/problems", post(manager::create_problem))
        .route("/api/trials", post(trials::create))
        .route(
            "/api/jobs/{id}/files/{name}",
            get(manager::get_file).put(runner::put_file),
        )
        .layer(DefaultBodyLimit::max(upload_limit));
    Router::new()
        .route("/api/runners", post(manager::create_runner))
        .route("/api/runners/{id}", delete(manager::revoke_runner))
        .route("/api/tokens", post(manager::create_token))
        .route("/api/submissions", post(manager::create_submission))
        .route("/api/submissions/{id}", get(manager::get_submission))
        .route("/api/submissions/{id}/rejudge", post(manager::rejudge))
        .route("/api/jobs/claim", post(runner::claim))
        .route("/api/jobs/{id}", get(manager::get_job))
        .route("/api/jobs/{id}/cancel", post(manager::cancel))
        .route("/api/jobs/{id}/lease", post(job_lease))
        .route("/api/jobs/{id}/progress", post(job_progress))
        .route("/api/jobs/{id}/release", post(job_release))
        .route("/api/jobs/{id}/failure", post(job_failure))
        .route("/api/jobs/{id}/result", post(job_result))
        .route("/api/trials/{id}", get(trials::get))
        .route("/api/trials/{id}/lease", post(trial_lease))
        .route("/api/trials/{id}/progress", post(trial_progress))
        .route("/api/trials/{id}/release", post(trial_release))
        .route("/api/trials/{id}/failure", post(trial_failure))
        .route("/api/trials/{id}/result", post(trial_result))
        .route("/api/packages/{sha256}", get(runner::package))
        .layer(DefaultBodyLimit::max(json_limit))
        .merge(uploads)
        .route("/metrics", get(ops::metrics))
        .route("/healthz", get(ops::healthz))
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        .with_state(state)
}

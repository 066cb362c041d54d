//! `GET /metrics`, `GET /healthz` and the answers for unknown routes; no token.

use axum::Json;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use crate::protocol::{Health, JobState};
use crate::server::db::{DbError, WorkKind, parse_state};
use crate::server::error::ApiError;
use crate::server::routes::openapi::ServerErrors;
use crate::server::state::AppState;

async fn states(state: &AppState, work: WorkKind) -> Result<Vec<(JobState, i64)>, DbError> {
    state
        .db
        .count_by_state(work)
        .await?
        .into_iter()
        .map(|(s, n)| Ok((parse_state(&s)?, n)))
        .collect()
}

#[utoipa::path(
    get,
    path = "/metrics",
    tag = "ops",
    responses((status = 200, description = "Prometheus text", content_type = "text/plain", body = String), ServerErrors)
)]
pub async fn metrics(State(state): State<AppState>) -> Result<Response, ApiError> {
    let jobs = states(&state, WorkKind::Job).await?;
    let trials = states(&state, WorkKind::Trial).await?;
    let mut text = state.metrics.render(&jobs, &trials);
    text.push_str(
        &state
            .metrics
            .render_webhooks(state.db.webhooks_pending().await?),
    );
    Ok((
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        text,
    )
        .into_response())
}

/// 200 when the database answers, 503 `unavailable` when it does not.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "ops",
    responses((status = 200, description = "OK", body = Health), ServerErrors)
)]
pub async fn healthz(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    state
        .db
        .ping()
        .await
        .map_err(|e| ApiError::Unavailable(format!("the database is not answering: {e}")))?;
    Ok(Json(Health {
        status: "ok".to_string(),
    }))
}

pub async fn not_found(uri: Uri) -> ApiError {
    ApiError::not_found(format!("no route {}", uri.path()))
}

pub async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    let err = ApiError::invalid(format!("{method} is not allowed on {}", uri.path()));
    let mut response = err.into_response();
    *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    response
}

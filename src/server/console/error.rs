//! What can go wrong on a console page, answered as an HTML page with its status
//! (or, for a missing or expired session, a redirect to the login page). Causes
//! of 5xx answers are logged, never shown.

use askama::Template;
use axum::http::header::{CACHE_CONTROL, LOCATION};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};

use crate::server::db::DbError;
use crate::server::error::ApiError;

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// No session, or an expired or unknown one: to the login page.
    #[error("log in first")]
    Login { expired: bool, next: String },
    /// The login form's token is not the manager token nor one with console:read.
    #[error("that token does not open the console")]
    LoginRefused,
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Unprocessable(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("internal server error")]
    Internal(String),
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    status: u16,
    title: &'a str,
    message: String,
}

impl ConsoleError {
    pub fn status(&self) -> StatusCode {
        match self {
            ConsoleError::Login { .. } => StatusCode::SEE_OTHER,
            ConsoleError::LoginRefused => StatusCode::UNAUTHORIZED,
            ConsoleError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ConsoleError::Forbidden(_) => StatusCode::FORBIDDEN,
            ConsoleError::NotFound(_) => StatusCode::NOT_FOUND,
            ConsoleError::Conflict(_) => StatusCode::CONFLICT,
            ConsoleError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ConsoleError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ConsoleError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn title(&self) -> &'static str {
        match self {
            ConsoleError::Login { .. } | ConsoleError::LoginRefused => "Not logged in",
            ConsoleError::BadRequest(_) => "Bad request",
            ConsoleError::Forbidden(_) => "Not allowed",
            ConsoleError::NotFound(_) => "Not found",
            ConsoleError::Conflict(_) => "Conflict",
            ConsoleError::Unprocessable(_) => "Refused",
            ConsoleError::Unavailable(_) => "Unavailable",
            ConsoleError::Internal(_) => "Server error",
        }
    }
}

/// Where the login page sends the browser back to: only a console path.
pub fn safe_next(next: &str) -> Option<&str> {
    let ok = next.starts_with("/console/")
        && !next.starts_with("/console//")
        && next
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/-_.".contains(&b));
    ok.then_some(next)
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        if let ConsoleError::Login { expired, next } = &self {
            let mut to = "/console/login".to_string();
            let mut sep = '?';
            if *expired {
                to.push_str("?expired=1");
                sep = '&';
            }
            if let Some(next) = safe_next(next) {
                to.push(sep);
                to.push_str("next=");
                to.push_str(next);
            }
            let mut response = StatusCode::SEE_OTHER.into_response();
            if let Ok(v) = HeaderValue::from_str(&to) {
                response.headers_mut().insert(LOCATION, v);
            }
            return response;
        }
        if let ConsoleError::Internal(cause) = &self {
            tracing::error!(%cause, "console page failed");
        }
        let status = self.status();
        let page = ErrorPage {
            status: status.as_u16(),
            title: self.title(),
            message: self.to_string(),
        };
        let body = page
            .render()
            .unwrap_or_else(|_| "<!doctype html><title>error</title>".to_string());
        let mut response = (status, Html(body)).into_response();
        response
            .headers_mut()
            .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}

impl From<DbError> for ConsoleError {
    fn from(err: DbError) -> Self {
        ApiError::from(err).into()
    }
}

impl From<ApiError> for ConsoleError {
    fn from(err: ApiError) -> Self {
        let message = err.to_string();
        match err.status() {
            StatusCode::BAD_REQUEST => ConsoleError::BadRequest(message),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => ConsoleError::Forbidden(message),
            StatusCode::NOT_FOUND => ConsoleError::NotFound(message),
            StatusCode::CONFLICT => ConsoleError::Conflict(message),
            StatusCode::UNPROCESSABLE_ENTITY | StatusCode::PAYLOAD_TOO_LARGE => {
                ConsoleError::Unprocessable(message)
            }
            StatusCode::SERVICE_UNAVAILABLE => ConsoleError::Unavailable(message),
            _ => match err {
                ApiError::Internal(cause) => ConsoleError::Internal(cause),
                other => ConsoleError::Internal(other.to_string()),
            },
        }
    }
}

impl From<askama::Error> for ConsoleError {
    fn from(err: askama::Error) -> Self {
        ConsoleError::Internal(format!("template: {err}"))
    }
}

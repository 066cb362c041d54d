//! `ApiError`: every failure a request can meet, answered as the contract's
//! `{"error": "<code>", "message": "..."}` with its status. Causes of 5xx answers
//! are logged, never echoed.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::protocol::ErrorBody;
use crate::protocol::codes::error as code;
use crate::server::db::DbError;
use crate::server::storage::StorageError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("no or an unknown bearer token")]
    AuthRequired,
    #[error("this token does not have the scope this call needs")]
    AuthForbidden,
    #[error("this runner key has been revoked")]
    AuthRevoked,
    #[error("{0}")]
    LeaseLost(String),
    #[error("{0}")]
    AttemptFinished(String),
    #[error("{0}")]
    AttemptConflict(String),
    /// An `Idempotency-Key` already answered another request.
    #[error("{0}")]
    RequestConflict(String),
    #[error("extra is {size} bytes of JSON; at most {limit} are accepted")]
    ExtraTooLarge { size: usize, limit: usize },
    #[error("language {language:?} is not accepted here; accepted: {}", accepted.join(", "))]
    LanguageUnknown {
        language: String,
        accepted: Vec<String>,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    CallbackInvalid(String),
    #[error("callback_url needs a webhook secret: start the Server with JUDGE_WEBHOOK_SECRET set")]
    CallbackNoSecret,
    /// Well-formed but refused (422) with its own code.
    #[error("{message}")]
    Unprocessable { code: &'static str, message: String },
    #[error("the request body is larger than the {limit}-byte limit")]
    TooLarge { limit: u64 },
    #[error("{0}")]
    NotFound(String),
    #[error("not a valid problem package: {0}")]
    PackageInvalid(String),
    #[error("{0}")]
    Unavailable(String),
    /// The cause is logged; the answer says only that the Server failed.
    #[error("internal server error")]
    Internal(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::AuthRequired | ApiError::AuthRevoked => StatusCode::UNAUTHORIZED,
            ApiError::AuthForbidden => StatusCode::FORBIDDEN,
            ApiError::LeaseLost(_)
            | ApiError::AttemptFinished(_)
            | ApiError::AttemptConflict(_)
            | ApiError::RequestConflict(_) => StatusCode::CONFLICT,
            ApiError::ExtraTooLarge { .. }
            | ApiError::LanguageUnknown { .. }
            | ApiError::PackageInvalid(_)
            | ApiError::CallbackInvalid(_)
            | ApiError::CallbackNoSecret => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Invalid(_) => StatusCode::BAD_REQUEST,
            ApiError::Unprocessable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::AuthRequired => code::AUTH_REQUIRED,
            ApiError::AuthForbidden => code::AUTH_FORBIDDEN,
            ApiError::AuthRevoked => code::AUTH_REVOKED,
            ApiError::LeaseLost(_) => code::LEASE_LOST,
            ApiError::AttemptFinished(_) => code::ATTEMPT_FINISHED,
            ApiError::AttemptConflict(_) => code::ATTEMPT_CONFLICT,
            ApiError::RequestConflict(_) => code::REQUEST_CONFLICT,
            ApiError::ExtraTooLarge { .. } => code::RESULT_EXTRA_TOO_LARGE,
            ApiError::LanguageUnknown { .. } => code::LANGUAGE_UNKNOWN,
            ApiError::Invalid(_) => code::REQUEST_INVALID,
            ApiError::CallbackInvalid(_) => code::CALLBACK_URL_INVALID,
            ApiError::CallbackNoSecret => code::CALLBACK_URL_NO_SECRET,
            ApiError::Unprocessable { code, .. } => code,
            ApiError::TooLarge { .. } => code::REQUEST_TOO_LARGE,
            ApiError::NotFound(_) => code::NOT_FOUND,
            ApiError::PackageInvalid(_) => code::PACKAGE_INVALID,
            ApiError::Unavailable(_) => code::UNAVAILABLE,
            ApiError::Internal(_) => code::INTERNAL,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        ApiError::Invalid(message.into())
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::NotFound(message.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(cause) = &self {
            tracing::error!(%cause, "request failed");
        }
        let body = ErrorBody {
            error: self.code().to_string(),
            message: self.to_string(),
        };
        (self.status(), Json(body)).into_response()
    }
}

impl From<DbError> for ApiError {
    fn from(err: DbError) -> Self {
        match err {
            DbError::LeaseLost => ApiError::LeaseLost(err.to_string()),
            DbError::RunnerRevoked { .. } => ApiError::AuthRevoked,
            DbError::NotFound { .. } => ApiError::NotFound(err.to_string()),
            DbError::AttemptConflict { .. } => ApiError::AttemptConflict(err.to_string()),
            DbError::AttemptFinished { .. } => ApiError::AttemptFinished(err.to_string()),
            other if other.is_unavailable() => {
                ApiError::Unavailable("the database is not answering; try again".to_string())
            }
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl From<StorageError> for ApiError {
    fn from(err: StorageError) -> Self {
        match err {
            StorageError::TooLarge { limit } => ApiError::TooLarge { limit },
            StorageError::Body { .. } => ApiError::invalid(err.to_string()),
            // A full --storage refuses the upload (its temporary file is already
            // gone) as a temporary condition, like a database that does not answer.
            other if other.is_full() => {
                ApiError::Unavailable("the Server's storage is full; try again later".to_string())
            }
            other => ApiError::Internal(other.to_string()),
        }
    }
}

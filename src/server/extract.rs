//! Extractors whose rejections speak the contract's error shape: malformed JSON,
//! missing or unknown fields, oversized bodies and bad path or query parameters
//! all answer `{"error", "message"}`, never axum's plain-text rejections or a 500.
//! JSON bodies are read whatever their `Content-Type` says.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use super::state::AppState;

/// A JSON body.
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

/// A JSON body and the bytes it was parsed from, for limits that are measured on
/// what the client sent (the Result's `extra`).
#[derive(Debug, Clone)]
pub struct ApiJsonWithBytes<T>(pub T, pub Bytes);

/// A JSON body that may be left out entirely (then `T::default()`).
#[derive(Debug, Clone)]
pub struct OptionalJson<T>(pub T);

/// Path parameters; a parameter that does not parse names no existing thing: 404.
#[derive(Debug, Clone)]
pub struct ApiPath<T>(pub T);

/// Query parameters.
#[derive(Debug, Clone)]
pub struct ApiQuery<T>(pub T);

fn body_error(rejection: BytesRejection, state: &AppState) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::TooLarge {
            limit: state.config.max_body,
        }
    } else {
        ApiError::invalid(format!("the request body could not be read: {rejection}"))
    }
}

fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| ApiError::invalid(format!("invalid JSON body: {e}")))
}

impl<T: DeserializeOwned> FromRequest<AppState> for ApiJson<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|r| body_error(r, state))?;
        parse_json(&bytes).map(ApiJson)
    }
}

impl<T: DeserializeOwned> FromRequest<AppState> for ApiJsonWithBytes<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|r| body_error(r, state))?;
        let value = parse_json(&bytes)?;
        Ok(ApiJsonWithBytes(value, bytes))
    }
}

impl<T: DeserializeOwned + Default> FromRequest<AppState> for OptionalJson<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|r| body_error(r, state))?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(T::default()));
        }
        parse_json(&bytes).map(OptionalJson)
    }
}

impl<T: DeserializeOwned + Send> FromRequestParts<AppState> for ApiPath<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(v)| ApiPath(v))
            .map_err(|e| ApiError::not_found(format!("no such resource: {e}")))
    }
}

impl<T: DeserializeOwned + Send> FromRequestParts<AppState> for ApiQuery<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| ApiQuery(v))
            .map_err(|e| ApiError::invalid(format!("invalid query: {e}")))
    }
}

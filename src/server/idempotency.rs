//! `Idempotency-Key` (CONTRACT §7): a client that retries a creation after a lost
//! answer names it with a key, and gets the first answer again instead of a
//! second creation. On `POST /api/submissions` (the contract's) and `POST
//! /api/problems` (ours, so a forwarding Runner finds the problem it uploaded
//! before a restart without a database of its own; docs/server.md).
//!
//! - the same key with the same request answers 201 with the first ids again,
//!   and the header `Idempotent-Replayed: true`;
//! - the same key with another request is 409 `request.conflict`;
//! - "the same request" is a digest: of the parsed JSON body re-serialised
//!   (submissions; so whitespace and key order do not matter), of the package's
//!   SHA-256 and the query (problems);
//! - only creations are remembered: a refused request (404, 422, ...) leaves no
//!   trace, and its retry is judged afresh;
//! - keys live in one space per route on a Server (not per token: every caller
//!   of these routes manages the Server); a row is kept as long as the Server's
//!   database, at least the 24 h the contract asks.
//!
//! Concurrent twins are settled by the database (`db::idempotency`): the key is
//! recorded in the creation's own transaction, and the loser's transaction is
//! rolled back, so two requests racing with one key create one thing.

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use crate::server::db::Db;
use crate::server::db::idempotency::{KeyedRoute, Remember};
use crate::server::error::ApiError;

/// The request header naming a key.
pub const HEADER: &str = "Idempotency-Key";
/// The answer header set (to `true`) on an answer replayed from a key.
pub const REPLAYED_HEADER: &str = "Idempotent-Replayed";
/// The longest key accepted, in bytes.
pub const MAX_KEY_LEN: usize = 255;

/// A keyed request: its route, the client's key, the digest of the request.
#[derive(Debug, Clone)]
pub struct Keyed {
    route: KeyedRoute,
    key: String,
    request_sha256: String,
}

impl Keyed {
    /// The request's key, `None` without the header. `request` computes the
    /// request's digest (only called when there is a key). A key that is empty,
    /// longer than [`MAX_KEY_LEN`], not printable ASCII, or sent twice is 400
    /// `request.invalid`.
    pub fn from_headers(
        headers: &HeaderMap,
        route: KeyedRoute,
        request: impl FnOnce() -> String,
    ) -> Result<Option<Keyed>, ApiError> {
        let mut values = headers.get_all(HEADER).iter();
        let Some(value) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(ApiError::invalid(format!(
                "{HEADER} is given more than once"
            )));
        }
        let key = value
            .to_str()
            .ok()
            .map(str::trim)
            .filter(|k| !k.is_empty() && k.len() <= MAX_KEY_LEN)
            .filter(|k| k.bytes().all(|b| (b' '..=b'~').contains(&b)))
            .ok_or_else(|| {
                ApiError::invalid(format!(
                    "{HEADER} must be 1 to {MAX_KEY_LEN} printable ASCII characters"
                ))
            })?;
        Ok(Some(Keyed {
            route,
            key: key.to_string(),
            request_sha256: request(),
        }))
    }

    /// What the creation records in its transaction.
    pub fn remember(&self) -> Remember<'_> {
        Remember {
            route: self.route,
            key: &self.key,
            request_sha256: &self.request_sha256,
        }
    }

    /// The ids this key answered first, when it answered this same request;
    /// `None` when the key is new; 409 `request.conflict` when it answered
    /// another request.
    pub async fn first_answer(&self, db: &Db) -> Result<Option<(i64, i64)>, ApiError> {
        let Some(first) = db.remembered(self.route, &self.key).await? else {
            return Ok(None);
        };
        if first.request_sha256 != self.request_sha256 {
            return Err(ApiError::RequestConflict(format!(
                "{HEADER} {:?} was first sent with another request; a new request needs a new key",
                self.key
            )));
        }
        Ok(Some((first.first_id, first.second_id)))
    }

    /// After [`crate::server::db::DbError::KeyTaken`]: the concurrent twin's ids
    /// (or 409 when the twin was another request).
    pub async fn twin_answer(&self, db: &Db) -> Result<(i64, i64), ApiError> {
        self.first_answer(db).await?.ok_or_else(|| {
            ApiError::Internal(format!(
                "idempotency key {:?} was taken but is not recorded",
                self.key
            ))
        })
    }
}

/// The SHA-256 (hex) of `parts`, each length-prefixed so that no two lists of
/// parts give the same bytes.
pub fn request_digest(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    hex::encode(hasher.finalize())
}

/// The digest of a JSON body as the Server parsed it: field order and whitespace
/// of the client's bytes do not matter, the values do.
pub fn json_digest<T: Serialize>(body: &T) -> String {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    request_digest(&[&bytes])
}

/// `201` with `body`, marked `Idempotent-Replayed: true` when it is a replay.
pub fn created<T: Serialize>(body: T, replayed: bool) -> Response {
    let mut response = (StatusCode::CREATED, Json(body)).into_response();
    if replayed {
        response
            .headers_mut()
            .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(HEADER, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    #[test]
    fn keys_are_checked() {
        let digest = || "d".to_string();
        let route = KeyedRoute::Submissions;
        assert!(
            Keyed::from_headers(&headers(&[]), route, digest)
                .unwrap()
                .is_none()
        );
        let keyed = Keyed::from_headers(&headers(&["job-7/attempt-1"]), route, digest)
            .unwrap()
            .unwrap();
        assert_eq!(keyed.remember().key, "job-7/attempt-1");
        assert_eq!(keyed.remember().request_sha256, "d");
        for bad in [vec![""], vec!["a", "b"], vec![&*"k".repeat(256)]] {
            let err = Keyed::from_headers(&headers(&bad), route, digest).unwrap_err();
            assert_eq!(err.status(), StatusCode::BAD_REQUEST, "{bad:?}");
        }
        let mut high = HeaderMap::new();
        high.insert(HEADER, HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap());
        assert!(Keyed::from_headers(&high, route, digest).is_err());
    }

    #[test]
    fn digests_separate_their_parts() {
        assert_ne!(
            request_digest(&[b"ab", b"c"]),
            request_digest(&[b"a", b"bc"])
        );
        assert_eq!(request_digest(&[b"x"]), request_digest(&[b"x"]));
        #[derive(Serialize)]
        struct Body {
            a: u32,
        }
        assert_eq!(json_digest(&Body { a: 1 }), json_digest(&Body { a: 1 }));
        assert_ne!(json_digest(&Body { a: 1 }), json_digest(&Body { a: 2 }));
    }
}

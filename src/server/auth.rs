//! Who is calling: the manager (token from `JUDGE_MANAGER_TOKEN`, every scope), a
//! Runner (a key from `POST /api/runners`), or an API token (`POST /api/tokens`,
//! only its scopes). Keys and tokens are stored as SHA-256 digests and compared in
//! constant time. No or an unknown token: 401 `auth.required`; the wrong kind: 403
//! `auth.forbidden`; a revoked runner key: 401 `auth.revoked`.
//!
//! Secrets carry a prefix saying what they are (`jrk_` runner key, `jrt_` API
//! token), so one lookup identifies a caller.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use rand::RngCore as _;
use subtle::ConstantTimeEq as _;

use super::activity;
use super::error::ApiError;
use super::state::{AppState, digest};
use crate::protocol::codes::scope;

pub const RUNNER_KEY_PREFIX: &str = "jrk_";
pub const API_TOKEN_PREFIX: &str = "jrt_";

/// The scopes `POST /api/tokens` can grant (CONTRACT §7). The manager token has
/// every one; creating runners and tokens stays the manager's alone.
pub const GRANTABLE_SCOPES: [&str; 4] = [
    scope::TRIAL_RUN,
    scope::CONSOLE_READ,
    scope::PROBLEMS_WRITE,
    scope::SUBMISSIONS_WRITE,
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    Manager,
    Runner { runner_id: i64 },
    Token { token_id: i64, scopes: Vec<String> },
}

/// A fresh secret: `prefix` + 256 random bits in hex.
pub fn new_secret(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{prefix}{}", hex::encode(bytes))
}

/// A fresh lease token (128 random bits in hex).
pub fn new_lease_token() -> String {
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

pub fn digest_hex(secret: &str) -> String {
    hex::encode(digest(secret))
}

fn same_digest(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// The secret a request presents, from where the contract allows one: the
/// `Authorization: Bearer` header (the console's session cookie is the only other
/// place CONTRACT §7 allows; a query string never is). Every extractor below
/// reads the caller through this one function.
fn presented_secret(parts: &Parts) -> Option<&str> {
    bearer(parts)
}

fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// How a runner key is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunnerCheck {
    /// Read the key and its revocation from the database.
    Fresh,
    /// A key already seen on this server maps to its runner without a query. Only
    /// for routes where the database itself refuses a revoked runner: the claim
    /// (filter 3) and every fenced call (revocation requeued all the runner held,
    /// and [`crate::server::db::Db::fenced`] answers 401 for a revoked key).
    Cached,
}

/// Identifies the caller of a request, or refuses it (401).
pub async fn identify(parts: &Parts, state: &AppState) -> Result<Caller, ApiError> {
    identify_with(parts, state, RunnerCheck::Fresh).await
}

async fn identify_with(
    parts: &Parts,
    state: &AppState,
    check: RunnerCheck,
) -> Result<Caller, ApiError> {
    let token = presented_secret(parts).ok_or(ApiError::AuthRequired)?;
    identify_secret(token, state, check).await
}

/// Identifies the holder of a secret given some other way than the header: the
/// console's login form.
pub async fn identify_token(token: &str, state: &AppState) -> Result<Caller, ApiError> {
    identify_secret(token.trim(), state, RunnerCheck::Fresh).await
}

async fn identify_secret(
    token: &str,
    state: &AppState,
    check: RunnerCheck,
) -> Result<Caller, ApiError> {
    if token.is_empty() {
        return Err(ApiError::AuthRequired);
    }
    let presented = digest(token);
    if same_digest(&presented, state.manager_token_digest()) {
        return Ok(Caller::Manager);
    }
    let presented_hex = hex::encode(presented);
    if token.starts_with(RUNNER_KEY_PREFIX) {
        if check == RunnerCheck::Cached
            && let Some(runner_id) = state.runner_keys.get(&presented_hex)
        {
            return Ok(Caller::Runner { runner_id });
        }
        let key = state.db.runner_by_key_hash(&presented_hex).await?;
        return match key {
            Some(k) if same_digest(k.key_hash.as_bytes(), presented_hex.as_bytes()) => {
                if k.revoked {
                    Err(ApiError::AuthRevoked)
                } else {
                    state.runner_keys.insert(presented_hex, k.runner_id);
                    Ok(Caller::Runner {
                        runner_id: k.runner_id,
                    })
                }
            }
            _ => Err(ApiError::AuthRequired),
        };
    }
    if token.starts_with(API_TOKEN_PREFIX) {
        let found = state.db.api_token_by_hash(&presented_hex).await?;
        if let Some(t) = found
            && same_digest(t.token_hash.as_bytes(), presented_hex.as_bytes())
        {
            return Ok(Caller::Token {
                token_id: t.token_id,
                scopes: t.scopes,
            });
        }
    }
    Err(ApiError::AuthRequired)
}

/// The manager token.
#[derive(Debug, Clone, Copy)]
pub struct ManagerAuth;

/// A Runner's key. Revocation is enforced by the database on every route that
/// takes this (see [`RunnerCheck::Cached`]).
#[derive(Debug, Clone, Copy)]
pub struct RunnerAuth {
    pub runner_id: i64,
}

/// Scope `trial:run`: the manager (`token_id: None`) or an API token with it.
#[derive(Debug, Clone, Copy)]
pub struct TrialAuth {
    pub token_id: Option<i64>,
}

impl Caller {
    /// Does this caller hold `scope`? The manager holds every scope, a Runner none.
    pub fn has_scope(&self, scope: &str) -> bool {
        match self {
            Caller::Manager => true,
            Caller::Runner { .. } => false,
            Caller::Token { scopes, .. } => scopes.iter().any(|s| s == scope),
        }
    }

    /// The API token's id, `None` for the manager or a Runner.
    pub fn token_id(&self) -> Option<i64> {
        match self {
            Caller::Token { token_id, .. } => Some(*token_id),
            _ => None,
        }
    }
}

/// `scoped_auth!(Name, SCOPE, "doc")`: an extractor admitting the manager or an
/// API token holding `SCOPE`; anyone else with a valid token is 403
/// `auth.forbidden`.
macro_rules! scoped_auth {
    ($name:ident, $scope:expr, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug, Clone, Copy)]
        pub struct $name {
            /// The API token's id; `None` for the manager.
            pub token_id: Option<i64>,
        }

        impl FromRequestParts<AppState> for $name {
            type Rejection = ApiError;
            async fn from_request_parts(
                parts: &mut Parts,
                state: &AppState,
            ) -> Result<Self, ApiError> {
                let caller = identify(parts, state).await?;
                if caller.has_scope($scope) {
                    Ok($name {
                        token_id: caller.token_id(),
                    })
                } else {
                    Err(ApiError::AuthForbidden)
                }
            }
        }
    };
}

scoped_auth!(
    ReadAuth,
    scope::CONSOLE_READ,
    "Scope `console:read`: every manager `GET` (the manager or a token with it)."
);
scoped_auth!(
    ProblemsWriteAuth,
    scope::PROBLEMS_WRITE,
    "Scope `problems:write`: `POST /api/problems` (the manager or a token with it)."
);
scoped_auth!(
    SubmissionsWriteAuth,
    scope::SUBMISSIONS_WRITE,
    "Scope `submissions:write`: create submissions, rejudge, cancel (the manager or a token with it)."
);

/// Who may download packages: a Runner or the manager.
#[derive(Debug, Clone, Copy)]
pub struct PackageAuth;

impl FromRequestParts<AppState> for ManagerAuth {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match identify(parts, state).await? {
            Caller::Manager => Ok(ManagerAuth),
            _ => Err(ApiError::AuthForbidden),
        }
    }
}

impl FromRequestParts<AppState> for RunnerAuth {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match identify_with(parts, state, RunnerCheck::Cached).await? {
            Caller::Runner { runner_id } => {
                // "Last heard from" (GET /api/runners): a map lookup, and a write
                // at most every few seconds per Runner.
                activity::note(
                    &state.db,
                    &state.runner_activity,
                    runner_id,
                    state.now_ms(),
                    None,
                )
                .await;
                Ok(RunnerAuth { runner_id })
            }
            _ => Err(ApiError::AuthForbidden),
        }
    }
}

impl FromRequestParts<AppState> for TrialAuth {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match identify(parts, state).await? {
            Caller::Manager => Ok(TrialAuth { token_id: None }),
            Caller::Token { token_id, scopes } if scopes.iter().any(|s| s == scope::TRIAL_RUN) => {
                Ok(TrialAuth {
                    token_id: Some(token_id),
                })
            }
            _ => Err(ApiError::AuthForbidden),
        }
    }
}

impl FromRequestParts<AppState> for PackageAuth {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match identify(parts, state).await? {
            Caller::Manager | Caller::Runner { .. } => Ok(PackageAuth),
            Caller::Token { .. } => Err(ApiError::AuthForbidden),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_prefixed_random_and_digests_compare() {
        let a = new_secret(RUNNER_KEY_PREFIX);
        let b = new_secret(RUNNER_KEY_PREFIX);
        assert!(a.starts_with("jrk_") && a.len() == 4 + 64);
        assert_ne!(a, b);
        assert_eq!(new_lease_token().len(), 32);
        assert!(same_digest(&digest(&a), &digest(&a)));
        assert!(!same_digest(&digest(&a), &digest(&b)));
        assert_eq!(digest_hex("abc").len(), 64);
    }
}

//! Console sessions: a login exchanges a token for a random secret in a cookie;
//! only the secret's digest is stored (migration 0008). The CSRF token of a
//! session is derived from its secret (a digest under its own label), so it is
//! per session, needs no storage, and cannot be computed without the cookie.
//!
//! The token itself is read once, from the login form's body, and never put in
//! a URL, a page or a log.

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::header::COOKIE;
use axum::http::request::Parts;
use subtle::ConstantTimeEq as _;

use super::error::ConsoleError;
use crate::protocol::codes::scope as scopes;
use crate::server::auth::{Caller, new_secret};
use crate::server::clock::Millis;
use crate::server::state::{AppState, digest};

/// The cookie's name. Not `__Host-`: that prefix needs `Secure`, and a console on
/// plain HTTP (localhost, a private network) must work too.
pub const COOKIE_NAME: &str = "jr_console";
/// How long a session lives after login (absolute, not sliding).
pub const SESSION_SECONDS: i64 = 8 * 3600;
/// What the `scopes` column holds for the manager token (every scope).
const MANAGER: &str = "manager";
const SECRET_PREFIX: &str = "jrs_";

/// A logged-in console user.
#[derive(Debug, Clone)]
pub struct Session {
    secret_hash: String,
    /// The per-session CSRF token every POST form carries.
    pub csrf: String,
    manager: bool,
    scopes: Vec<String>,
    pub expires_ms: Millis,
}

impl Session {
    /// May this session use an action that needs `scope`? The manager may do
    /// everything; revoking a Runner needs the manager (`scope` = `None`).
    pub fn may(&self, scope: Option<&str>) -> bool {
        self.manager || scope.is_some_and(|s| self.scopes.iter().any(|have| have == s))
    }

    /// Read-only: no action of the console is open to it.
    pub fn read_only(&self) -> bool {
        !self.may(Some(scopes::SUBMISSIONS_WRITE)) && !self.may(Some(scopes::PROBLEMS_WRITE))
    }

    /// What the page header says the session is.
    pub fn role(&self) -> String {
        if self.manager {
            "manager".to_string()
        } else {
            self.scopes.join(" ")
        }
    }

    /// Refuses a POST whose form does not carry this session's CSRF token.
    pub fn check_csrf(&self, presented: Option<&str>) -> Result<(), ConsoleError> {
        let ok = presented.is_some_and(|p| p.as_bytes().ct_eq(self.csrf.as_bytes()).into());
        if ok {
            Ok(())
        } else {
            Err(ConsoleError::Forbidden(
                "this form's CSRF token is missing or not this session's; reload the page and try again"
                    .to_string(),
            ))
        }
    }

    /// Refuses an action the session's token may not take.
    pub fn require(&self, scope: Option<&str>) -> Result<(), ConsoleError> {
        if self.may(scope) {
            return Ok(());
        }
        Err(ConsoleError::Forbidden(match scope {
            Some(s) => format!("this session is read-only for this action: it needs scope {s}"),
            None => "only the manager token may do this".to_string(),
        }))
    }

    pub async fn logout(&self, state: &AppState) -> Result<(), ConsoleError> {
        state.db.delete_console_session(&self.secret_hash).await?;
        Ok(())
    }
}

fn csrf_of(secret: &str) -> String {
    hex::encode(digest(&format!("judge-runner console csrf\0{secret}")))
}

/// The session cookie's secret, when the request has one.
fn cookie_secret(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Is the console reached over TLS (directly or through a proxy that says so)?
/// Then the cookie is `Secure`.
pub fn behind_tls(headers: &HeaderMap, state: &AppState) -> bool {
    let forwarded = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"));
    let public = state
        .config
        .public_url
        .as_deref()
        .is_some_and(|u| u.starts_with("https://"));
    forwarded || public
}

/// The `Set-Cookie` value for a new session secret: host-only (no `Domain`),
/// for `/console` only, never readable by scripts.
fn set_cookie(secret: &str, secure: bool) -> String {
    format!(
        "{COOKIE_NAME}={secret}; Path=/console; Max-Age={SESSION_SECONDS}; HttpOnly; SameSite=Strict{}",
        if secure { "; Secure" } else { "" }
    )
}

/// The `Set-Cookie` value that removes the cookie.
pub fn clear_cookie(secure: bool) -> String {
    format!(
        "{COOKIE_NAME}=; Path=/console; Max-Age=0; HttpOnly; SameSite=Strict{}",
        if secure { "; Secure" } else { "" }
    )
}

/// Logs in with a token: the manager token or a token with `console:read`.
/// Answers the `Set-Cookie` header value.
pub async fn login(
    state: &AppState,
    headers: &HeaderMap,
    token: &str,
) -> Result<String, ConsoleError> {
    let caller = crate::server::auth::identify_token(token, state)
        .await
        .map_err(|_| ConsoleError::LoginRefused)?;
    let (scopes, token_id) = match caller {
        Caller::Manager => (MANAGER.to_string(), None),
        Caller::Token { token_id, scopes } if scopes.iter().any(|s| s == scopes::CONSOLE_READ) => {
            (scopes.join(" "), Some(token_id))
        }
        _ => return Err(ConsoleError::LoginRefused),
    };
    let secret = new_secret(SECRET_PREFIX);
    let now = state.now_ms();
    state
        .db
        .create_console_session(
            &hex::encode(digest(&secret)),
            &scopes,
            token_id,
            now,
            now + SESSION_SECONDS * 1000,
        )
        .await?;
    Ok(set_cookie(&secret, behind_tls(headers, state)))
}

/// The session of a request: none, unknown or expired sends the browser to the
/// login page (never an error page, never a 500).
impl FromRequestParts<AppState> for Session {
    type Rejection = ConsoleError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ConsoleError> {
        let next = parts.uri.path().to_string();
        let Some(secret) = cookie_secret(&parts.headers) else {
            return Err(ConsoleError::Login {
                expired: false,
                next,
            });
        };
        let secret_hash = hex::encode(digest(&secret));
        let Some(row) = state.db.console_session(&secret_hash).await? else {
            return Err(ConsoleError::Login {
                expired: true,
                next,
            });
        };
        if row.expires_ms <= state.now_ms() {
            state.db.delete_console_session(&secret_hash).await?;
            return Err(ConsoleError::Login {
                expired: true,
                next,
            });
        }
        let manager = row.scopes == MANAGER;
        Ok(Session {
            secret_hash,
            csrf: csrf_of(&secret),
            manager,
            scopes: if manager {
                Vec::new()
            } else {
                row.scopes.split_whitespace().map(String::from).collect()
            },
            expires_ms: row.expires_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn the_cookie_is_found_among_others_and_its_attributes_are_strict() {
        let mut headers = HeaderMap::new();
        headers.insert(
            COOKIE,
            HeaderValue::from_static("a=b; jr_console=jrs_abc ; c=d"),
        );
        assert_eq!(cookie_secret(&headers).as_deref(), Some("jrs_abc"));
        let c = set_cookie("s", false);
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Strict") && !c.contains("Secure"));
        assert!(set_cookie("s", true).ends_with("; Secure"));
        assert_ne!(csrf_of("a"), csrf_of("b"));
    }
}

//! The operator's console: HTML pages under `/console/` (CONTRACT §7 "Console";
//! docs/console.md). Server-rendered with askama templates compiled into the
//! binary; CSS and a small script embedded too (no CDN, no build step).
//!
//! - [`session`]: login with a token → a session cookie (HttpOnly,
//!   SameSite=Strict, Secure behind TLS, expiring; stored hashed), the per-session
//!   CSRF token every POST carries, and what a session may do;
//! - [`pages`]: the pages and actions; [`view`]: how values and charts look;
//! - [`error`]: error pages (400, 403, 404, ...) and the redirect to the login
//!   page for a missing or expired session.
//!
//! Every answer under `/console/` carries a strict Content-Security-Policy (no
//! inline script or style, nothing from another origin, no framing).

pub mod error;
pub mod pages;
pub mod session;
pub mod view;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::HeaderValue;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use crate::server::state::AppState;

/// No inline script or style, nothing from elsewhere, no framing, forms only to
/// this origin.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; form-action 'self'; \
     frame-ancestors 'none'; base-uri 'none'";

const CSS: &str = include_str!("assets/console.css");
const JS: &str = include_str!("assets/console.js");

/// The console's routes, each under `/console`.
pub fn router(max_upload: u64) -> Router<AppState> {
    let upload_limit = usize::try_from(max_upload).unwrap_or(usize::MAX);
    Router::new()
        .route("/console", get(|| async { Redirect::to("/console/") }))
        .route("/console/", get(pages::overview))
        .route("/console/login", get(pages::login_page).post(pages::login))
        .route("/console/logout", post(pages::logout))
        .route("/console/runners", get(pages::runners))
        .route(
            "/console/runners/{id}/revoke",
            get(pages::revoke_confirm).post(pages::revoke),
        )
        .route("/console/jobs", get(pages::jobs))
        .route("/console/jobs/{id}", get(pages::job))
        .route("/console/jobs/{id}/cancel", post(pages::cancel))
        .route("/console/submissions/{id}/rejudge", post(pages::rejudge))
        .route(
            "/console/problems",
            get(pages::problems)
                .post(pages::upload)
                .layer(DefaultBodyLimit::max(upload_limit)),
        )
        .route("/console/trials", get(pages::trials))
        .route("/console/assets/console.css", get(css))
        .route("/console/assets/console.js", get(js))
        .route(
            "/console/{*rest}",
            get(pages::not_found).post(pages::not_found),
        )
        .layer(axum::middleware::map_response(secure_headers))
}

async fn css() -> Response {
    asset("text/css; charset=utf-8", CSS)
}

async fn js() -> Response {
    asset("text/javascript; charset=utf-8", JS)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// CSP, no framing, no sniffing, no referrer; pages are never cached.
async fn secure_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers
        .entry(CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

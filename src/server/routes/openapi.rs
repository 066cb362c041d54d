//! `GET /api/openapi.json`: the OpenAPI 3.1 document of every route, generated
//! from the handlers' own `#[utoipa::path]` attributes and the wire types'
//! `ToSchema` derives. The router itself is built from the same handlers
//! (`utoipa_axum::routes!`), so a route cannot be served without being
//! documented; `tests/server_openapi.rs` checks the two agree.
//!
//! Error answers are documented per route and status, each with the exact
//! `error` codes it can carry (an `enum` on the `error` field), built from the
//! groups below.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, ObjectBuilder, RefOr, ResponseBuilder, Type, response::Response as Answer,
};
use utoipa::{IntoResponses, Modify, OpenApi};

use crate::protocol::codes::error as code;

/// The security scheme names used in the handlers' `security(...)`.
pub const MANAGER_TOKEN: &str = "manager_token";
pub const RUNNER_KEY: &str = "runner_key";
pub const SCOPED_TOKEN: &str = "scoped_token";

/// Statuses and the error codes each can carry.
pub type Codes = &'static [(u16, &'static [&'static str])];

/// Any route that takes a token.
pub const AUTHED: Codes = &[
    (401, &[code::AUTH_REQUIRED, code::AUTH_REVOKED]),
    (403, &[code::AUTH_FORBIDDEN]),
];
/// Any route that reads a body (JSON, query or upload).
pub const BODY: Codes = &[
    (400, &[code::REQUEST_INVALID]),
    (413, &[code::REQUEST_TOO_LARGE]),
];
/// Any route that touches the database.
pub const SERVER: Codes = &[(500, &[code::INTERNAL]), (503, &[code::UNAVAILABLE])];
/// A route naming a resource by path.
pub const MISSING: Codes = &[(404, &[code::NOT_FOUND])];
/// A lease-bearing call.
pub const LEASE: Codes = &[(409, &[code::LEASE_LOST])];
/// An uploaded package.
pub const PACKAGE: Codes = &[(422, &[code::PACKAGE_INVALID])];
/// A creation taking an `Idempotency-Key` (`server::idempotency`).
pub const KEYED: Codes = &[(409, &[code::REQUEST_CONFLICT])];
/// A submission or trial naming its language (`serve --languages`).
pub const LANGUAGE: Codes = &[(422, &[code::LANGUAGE_UNKNOWN])];

/// The responses of `groups`, one per status, the codes of a status merged.
pub fn error_responses(groups: &[Codes]) -> BTreeMap<String, RefOr<Answer>> {
    let mut merged: BTreeMap<u16, Vec<&'static str>> = BTreeMap::new();
    for group in groups {
        for (status, codes) in group.iter() {
            let entry = merged.entry(*status).or_default();
            for c in codes.iter() {
                if !entry.contains(c) {
                    entry.push(c);
                }
            }
        }
    }
    merged
        .into_iter()
        .map(|(status, codes)| {
            let schema = ObjectBuilder::new()
                .schema_type(Type::Object)
                .property(
                    "error",
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .enum_values(Some(codes.clone())),
                )
                .required("error")
                .property("message", ObjectBuilder::new().schema_type(Type::String))
                .required("message");
            let description = codes
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ");
            let response = ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    ContentBuilder::new().schema(Some(schema)).build(),
                )
                .build();
            (status.to_string(), RefOr::T(response))
        })
        .collect()
}

/// `errors!(Name: GROUP, GROUP, ...)`: a type whose `IntoResponses` are those
/// groups' error answers, for a handler's `responses(...)`.
macro_rules! errors {
    ($name:ident: $($group:expr),+ $(,)?) => {
        pub struct $name;
        impl utoipa::IntoResponses for $name {
            fn responses() -> std::collections::BTreeMap<
                String,
                utoipa::openapi::RefOr<utoipa::openapi::response::Response>,
            > {
                $crate::server::routes::openapi::error_responses(&[$($group),+])
            }
        }
    };
}
pub(crate) use errors;

/// Only the database can fail (`/healthz`, `/metrics`).
pub struct ServerErrors;
impl IntoResponses for ServerErrors {
    fn responses() -> BTreeMap<String, RefOr<Answer>> {
        error_responses(&[SERVER])
    }
}

/// Raw bytes (packages, attachments).
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct Binary(pub Vec<u8>);

/// The `multipart/form-data` parts of `POST /api/trials`.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // a schema only: the handler reads the parts as they stream
pub struct TrialUpload {
    /// The problem package (`.tar.gz`).
    #[schema(value_type = String, format = Binary)]
    package: Vec<u8>,
    language: String,
    /// One part per file; each needs a `filename`.
    #[schema(value_type = Vec<String>, format = Binary)]
    file: Vec<Vec<u8>>,
    /// Seconds, for a package that names no time limit.
    time_limit: Option<f64>,
}

/// Info, tags and the three security schemes; the paths come from the router.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "judge-runner Server",
        description = "The Server of judge-runner (`judge-runner serve`): problems, submissions, \
            evaluation jobs under fenced leases, Results and trials. Every error is \
            `{\"error\": \"<code>\", \"message\": \"...\"}`.",
        license(name = "MIT OR Apache-2.0")
    ),
    modifiers(&SecuritySchemes),
    components(schemas(crate::protocol::AttemptEnded)),
    tags(
        (name = "manager", description = "The manager token (`JUDGE_MANAGER_TOKEN`)"),
        (name = "runner", description = "A Runner key (`POST /api/runners`)"),
        (name = "trials", description = "Scope `trial:run` (the manager token or a scoped token)"),
        (name = "ops", description = "No token")
    )
)]
pub struct ApiDoc;

struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let bearer = |description: &str| {
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(description.to_string()))
                    .build(),
            )
        };
        components.add_security_scheme(
            MANAGER_TOKEN,
            bearer("`Authorization: Bearer $JUDGE_MANAGER_TOKEN`: every scope"),
        );
        components.add_security_scheme(
            RUNNER_KEY,
            bearer("`Authorization: Bearer <runner key>` (`jrk_...`, from `POST /api/runners`)"),
        );
        components.add_security_scheme(
            SCOPED_TOKEN,
            bearer("`Authorization: Bearer <token>` (`jrt_...`, from `POST /api/tokens`): only its scopes"),
        );
    }
}

/// The document, built once per process from the router's handlers.
pub fn document() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        super::api_router()
            .into_openapi()
            .to_json()
            .unwrap_or_else(|e| format!("{{\"error\": \"internal\", \"message\": \"{e}\"}}"))
    })
}

/// `GET /api/openapi.json` (no token).
#[utoipa::path(
    get,
    path = "/api/openapi.json",
    tag = "ops",
    responses((status = 200, description = "This OpenAPI 3.1 document", content_type = "application/json", body = Object))
)]
pub async fn openapi_json() -> Response {
    ([(CONTENT_TYPE, "application/json")], document()).into_response()
}

//! `GET /api/openapi.json`: served without a token, OpenAPI 3.1, and true: every
//! route of the contract is in it and the router serves exactly what it lists
//! (each documented operation reaches its handler, every other method on a
//! documented path is 405), every `$ref` resolves, every token-taking operation
//! names its security scheme and its 401/403, and the wire types' fields are the
//! contract's.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod server_common;

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use judge_runner::server::{AppState, ManualClock, router};
use serde_json::Value;
use server_common::{Backend, TestDb, test_config};
use tower::ServiceExt as _;

/// CONTRACT.md §4, route by route (method, path).
const CONTRACT_ROUTES: &[(&str, &str)] = &[
    ("post", "/api/runners"),
    ("delete", "/api/runners/{id}"),
    ("post", "/api/problems"),
    ("post", "/api/submissions"),
    ("get", "/api/submissions/{id}"),
    ("post", "/api/submissions/{id}/rejudge"),
    ("post", "/api/jobs/{id}/cancel"),
    ("get", "/api/jobs/{id}"),
    ("get", "/api/jobs/{id}/files/{name}"),
    ("put", "/api/jobs/{id}/files/{name}"),
    ("post", "/api/tokens"),
    ("post", "/api/trials"),
    ("get", "/api/trials/{id}"),
    ("post", "/api/jobs/claim"),
    ("get", "/api/packages/{sha256}"),
    ("post", "/api/jobs/{id}/lease"),
    ("post", "/api/jobs/{id}/progress"),
    ("post", "/api/jobs/{id}/release"),
    ("post", "/api/jobs/{id}/failure"),
    ("post", "/api/jobs/{id}/result"),
    ("post", "/api/trials/{id}/lease"),
    ("post", "/api/trials/{id}/progress"),
    ("post", "/api/trials/{id}/release"),
    ("post", "/api/trials/{id}/failure"),
    ("post", "/api/trials/{id}/result"),
    // §7: the listing routes.
    ("get", "/api/jobs"),
    ("get", "/api/submissions"),
    ("get", "/api/runners"),
    ("get", "/api/problems"),
    ("get", "/api/queue"),
    ("get", "/metrics"),
    ("get", "/healthz"),
    ("get", "/api/openapi.json"),
];

const METHODS: [&str; 5] = ["get", "post", "put", "delete", "patch"];

fn operations(doc: &Value) -> BTreeSet<(String, String)> {
    let mut ops = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in METHODS {
            if item.get(method).is_some() {
                ops.insert((method.to_string(), path.clone()));
            }
        }
    }
    ops
}

/// A concrete URL for a templated path.
fn concrete(path: &str) -> String {
    path.replace("{id}", "1")
        .replace("{name}", "details")
        .replace("{sha256}", &"0".repeat(64))
}

async fn app() -> (axum::Router, TestDb) {
    let db = TestDb::new(Backend::Sqlite).await;
    let state = AppState::open(test_config(&db), Arc::new(ManualClock::starting_now()))
        .await
        .unwrap();
    (router(state), db)
}

async fn send(app: &axum::Router, method: &str, uri: &str) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method.to_uppercase().as_str())
        .uri(uri)
        .body(Body::empty())
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn served_document(app: &axum::Router) -> Value {
    let (status, doc) = send(app, "get", "/api/openapi.json").await;
    assert_eq!(status, StatusCode::OK, "served without a token");
    doc
}

#[tokio::test]
async fn document_is_openapi_3_1_and_lists_every_contract_route() {
    let (app, db) = app().await;
    let doc = served_document(&app).await;
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3.1"),
        "{}",
        doc["openapi"]
    );
    let documented = operations(&doc);
    let contract: BTreeSet<(String, String)> = CONTRACT_ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    let missing: Vec<_> = contract.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&contract).collect();
    assert!(
        missing.is_empty(),
        "contract routes not documented: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "documented routes not in the contract: {extra:?}"
    );
    db.cleanup().await;
}

#[tokio::test]
async fn router_serves_exactly_the_documented_operations() {
    let (app, db) = app().await;
    let doc = served_document(&app).await;
    let documented = operations(&doc);
    let paths: BTreeSet<&String> = documented.iter().map(|(_, p)| p).collect();
    for path in paths {
        let uri = concrete(path);
        for method in METHODS {
            let (status, body) = send(&app, method, &uri).await;
            let is_documented = documented.contains(&(method.to_string(), path.clone()));
            let fell_through = status == StatusCode::METHOD_NOT_ALLOWED
                || body["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("no route"));
            if is_documented {
                assert!(
                    !fell_through,
                    "{method} {uri} is documented but the router has no handler: {status} {body}"
                );
            } else {
                assert_eq!(
                    status,
                    StatusCode::METHOD_NOT_ALLOWED,
                    "{method} {uri} is served but not documented: {body}"
                );
            }
        }
    }
    // A path the document does not have is the router's fallback.
    let (status, body) = send(&app, "get", "/api/nothing-here").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"], "not_found");
    db.cleanup().await;
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "$ref" {
                    out.push(v.as_str().unwrap().to_string());
                } else {
                    collect_refs(v, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

#[tokio::test]
async fn every_ref_resolves_and_every_token_route_names_its_scheme_and_errors() {
    let (app, db) = app().await;
    let doc = served_document(&app).await;
    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    assert!(!refs.is_empty());
    let primitives = ["i64", "u64", "String", "f64", "bool"];
    for r in refs {
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("unexpected $ref {r}"));
        assert!(
            !primitives.contains(&name),
            "$ref {r}: a type alias leaked as a schema"
        );
        assert!(
            doc["components"]["schemas"].get(name).is_some(),
            "$ref {r} does not resolve"
        );
    }
    let schemes = doc["components"]["securitySchemes"].as_object().unwrap();
    for name in ["manager_token", "runner_key", "scoped_token"] {
        assert_eq!(schemes[name]["type"], "http", "{name}");
        assert_eq!(schemes[name]["scheme"], "bearer", "{name}");
    }
    for (method, path) in operations(&doc) {
        let op = &doc["paths"][&path][&method];
        let responses = op["responses"].as_object().unwrap();
        for (status, response) in responses {
            assert!(
                response["description"].is_string(),
                "{method} {path} {status}: a response needs a description (OpenAPI)"
            );
        }
        let open = path == "/metrics" || path == "/healthz" || path == "/api/openapi.json";
        if open {
            assert!(
                op.get("security").is_none(),
                "{method} {path} needs no token"
            );
            assert!(!responses.contains_key("401"), "{method} {path}");
            continue;
        }
        let security = op["security"].as_array().unwrap_or_else(|| {
            panic!("{method} {path} takes a token but names no security scheme")
        });
        for requirement in security {
            for scheme in requirement.as_object().unwrap().keys() {
                assert!(schemes.contains_key(scheme), "{method} {path}: {scheme}");
            }
        }
        let codes = |status: &str| -> Vec<String> {
            let schema = &responses[status]["content"]["application/json"]["schema"];
            schema["properties"]["error"]["enum"]
                .as_array()
                .unwrap_or_else(|| panic!("{method} {path} {status}: no error codes"))
                .iter()
                .map(|c| c.as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(
            codes("401"),
            ["auth.required", "auth.revoked"],
            "{method} {path}"
        );
        assert_eq!(codes("403"), ["auth.forbidden"], "{method} {path}");
        assert_eq!(codes("500"), ["internal"], "{method} {path}");
        if path.contains('{') {
            assert_eq!(codes("404"), ["not_found"], "{method} {path}");
        }
        let lease_bearing = ["/lease", "/progress", "/release", "/failure", "/result"]
            .iter()
            .any(|s| path.ends_with(s))
            || method == "put";
        if lease_bearing {
            assert_eq!(codes("409"), ["lease.lost"], "{method} {path}");
        }
    }
    let op = |m: &str, p: &str| doc["paths"][p][m].clone();
    assert!(
        op("post", "/api/jobs/{id}/result")["responses"]["422"]["content"]["application/json"]
            ["schema"]["properties"]["error"]["enum"]
            .as_array()
            .unwrap()
            .contains(&Value::from("result.extra_too_large"))
    );
    let cancel_409 = &op("post", "/api/jobs/{id}/cancel")["responses"]["409"];
    assert_eq!(
        cancel_409["content"]["application/json"]["schema"]["properties"]["error"]["enum"],
        serde_json::json!(["attempt.finished"])
    );
    let rejudge_409 = &op("post", "/api/submissions/{id}/rejudge")["responses"]["409"];
    assert_eq!(
        rejudge_409["content"]["application/json"]["schema"]["properties"]["error"]["enum"],
        serde_json::json!(["attempt.conflict"])
    );
    db.cleanup().await;
}

/// schemathesis found `POST /api/problems` documented as `application/gzip`, a
/// media type no client library serialises: every request body is JSON, multipart
/// or plain bytes (`application/octet-stream`), and so is every success body but
/// the package download and the metrics text.
#[tokio::test]
async fn request_bodies_use_media_types_clients_can_send() {
    let (app, db) = app().await;
    let doc = served_document(&app).await;
    let sendable = [
        "application/json",
        "multipart/form-data",
        "application/octet-stream",
    ];
    for (method, path) in operations(&doc) {
        let op = &doc["paths"][&path][&method];
        if let Some(content) = op["requestBody"]["content"].as_object() {
            for media in content.keys() {
                assert!(
                    sendable.contains(&media.as_str()),
                    "{method} {path}: {media}"
                );
            }
        }
    }
    db.cleanup().await;
}

fn properties(doc: &Value, schema: &str) -> BTreeSet<String> {
    doc["components"]["schemas"][schema]["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("no schema {schema}"))
        .keys()
        .cloned()
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn wire_types_have_the_contracts_fields() {
    let (app, db) = app().await;
    let doc = served_document(&app).await;
    assert_eq!(
        properties(&doc, "JobView"),
        set(&[
            "id",
            "submission_id",
            "attempt",
            "problem_version_id",
            "runner_id",
            "state",
            "lease_token",
            "lease_seconds",
            "lease_expires_at",
            "deliveries",
            "acknowledged_at",
            "refunds",
            "releases",
            "failure_reason",
            "row_version",
            "files",
            "progress",
            "result",
        ])
    );
    assert_eq!(
        properties(&doc, "ResultView"),
        set(&[
            "evaluation_job_id",
            "problem_version_id",
            "score",
            "max_score",
            "verdict",
            "extra",
            "props",
            "runner_version",
        ])
    );
    assert_eq!(
        properties(&doc, "SubmissionView"),
        set(&["submission_id", "problem_id", "language", "jobs", "result"])
    );
    assert_eq!(
        properties(&doc, "TrialView"),
        set(&["trial_id", "state", "timings", "failure_reason"])
    );
    assert_eq!(
        properties(&doc, "Timing"),
        set(&[
            "test",
            "status",
            "cpu_seconds",
            "wall_seconds",
            "memory_bytes"
        ])
    );
    assert_eq!(
        properties(&doc, "AttemptEnded"),
        set(&[
            "event",
            "submission_id",
            "job_id",
            "attempt",
            "state",
            "failure_reason",
            "result",
        ])
    );
    assert!(properties(&doc, "CreateSubmission").contains("callback_url"));
    let submit_422 = &doc["paths"]["/api/submissions"]["post"]["responses"]["422"];
    let codes = &submit_422["content"]["application/json"]["schema"]["properties"]["error"]["enum"];
    for code in ["callback_url.invalid", "callback_url.no_secret"] {
        assert!(
            codes.as_array().unwrap().contains(&Value::from(code)),
            "{code}"
        );
    }
    let states = &doc["components"]["schemas"]["JobState"]["enum"];
    assert_eq!(
        states,
        &serde_json::json!([
            "Queued",
            "Running",
            "Completed",
            "Failed",
            "Cancelled",
            "Superseded"
        ])
    );
    // A request body that refuses unknown fields says so.
    assert_eq!(
        doc["components"]["schemas"]["ResultBody"]["additionalProperties"],
        Value::Bool(false)
    );
    let required = &doc["components"]["schemas"]["CreateSubmission"]["required"];
    for field in ["problem_id", "language", "files"] {
        assert!(
            required.as_array().unwrap().contains(&Value::from(field)),
            "{field}"
        );
    }
    db.cleanup().await;
}

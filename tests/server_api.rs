//! The HTTP surface on SQLite and PostgreSQL: authentication and scopes, the error
//! shape for bad input (driven with `oneshot`, no socket), body limits, metrics and
//! health, package URLs, and claims that wait.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod server_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use judge_runner::server::{AppState, ManualClock, router};
use serde_json::{Value, json};
use server_common::{Backend, MANAGER, TestDb, TestServer, lease_of, test_config};
use tower::ServiceExt as _;

backend_tests!(
    auth_required_forbidden_and_revoked,
    bad_input_answers_the_error_shape_never_a_500,
    oversized_json_body_is_refused_with_413,
    oversized_upload_is_refused_with_413,
    metrics_and_healthz_need_no_token,
    package_url_follows_public_url,
    claim_waits_for_work_up_to_wait_seconds,
);

async fn auth_required_forbidden_and_revoked(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (runner_id, key) = s.runner("r").await;
    let (status, body) = s
        .post("/api/tokens", MANAGER, json!({"scopes": ["trial:run"]}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let trial_token = body["token"].as_str().unwrap().to_string();
    let cases = [
        (
            "GET",
            "/api/jobs/1",
            "",
            StatusCode::UNAUTHORIZED,
            "auth.required",
        ),
        (
            "GET",
            "/api/jobs/1",
            "not-a-token",
            StatusCode::UNAUTHORIZED,
            "auth.required",
        ),
        (
            "GET",
            "/api/jobs/1",
            "jrk_0123",
            StatusCode::UNAUTHORIZED,
            "auth.required",
        ),
        (
            "GET",
            "/api/jobs/1",
            key.as_str(),
            StatusCode::FORBIDDEN,
            "auth.forbidden",
        ),
        (
            "GET",
            "/api/jobs/1",
            trial_token.as_str(),
            StatusCode::FORBIDDEN,
            "auth.forbidden",
        ),
        (
            "POST",
            "/api/runners",
            key.as_str(),
            StatusCode::FORBIDDEN,
            "auth.forbidden",
        ),
        (
            "POST",
            "/api/jobs/claim",
            MANAGER,
            StatusCode::FORBIDDEN,
            "auth.forbidden",
        ),
        (
            "POST",
            "/api/jobs/claim",
            trial_token.as_str(),
            StatusCode::FORBIDDEN,
            "auth.forbidden",
        ),
        (
            "GET",
            "/api/trials/1",
            key.as_str(),
            StatusCode::FORBIDDEN,
            "auth.forbidden",
        ),
    ];
    for (method, path, token, want, code) in cases {
        let body = (method == "POST").then(|| json!({"languages": ["c"], "name": "x"}));
        let (status, answer) = s.call(method, path, token, body).await;
        assert_eq!(
            (status, answer["error"].as_str()),
            (want, Some(code)),
            "{method} {path} with {token:?}"
        );
        assert!(answer["message"].is_string());
    }
    // Allowed twins: the right token passes.
    assert_eq!(s.get("/api/jobs/1", MANAGER).await.0, StatusCode::NOT_FOUND);
    assert!(s.claim(&key, &["c"]).await.is_none());
    assert_eq!(
        s.get("/api/trials/1", &trial_token).await.0,
        StatusCode::NOT_FOUND
    );
    let (status, body) = s
        .post("/api/tokens", MANAGER, json!({"scopes": ["manager"]}))
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("request.invalid"))
    );
    s.call(
        "DELETE",
        &format!("/api/runners/{runner_id}"),
        MANAGER,
        None,
    )
    .await;
    let (status, answer) = s
        .post("/api/jobs/claim", &key, json!({"languages": ["c"]}))
        .await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("auth.revoked"))
    );
    s.stop().await;
}

async fn oneshot_state(
    backend: Backend,
    tweak: impl FnOnce(&mut judge_runner::server::Config),
) -> (AppState, TestDb) {
    let db = TestDb::new(backend).await;
    let mut config = test_config(&db);
    tweak(&mut config);
    let state = AppState::open(config, Arc::new(ManualClock::starting_now()))
        .await
        .unwrap();
    (state, db)
}

async fn send(
    state: &AppState,
    method: &str,
    path: &str,
    token: &str,
    body: impl Into<Body>,
) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(body.into())
        .unwrap();
    let resp = router(state.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let value = serde_json::from_slice(&bytes).unwrap_or_else(|_| panic!("not JSON: {bytes:?}"));
    (status, value)
}

async fn bad_input_answers_the_error_shape_never_a_500(backend: Backend) {
    let (state, db) = oneshot_state(backend, |_| {}).await;
    let (_, runner) = send(&state, "POST", "/api/runners", MANAGER, r#"{"name":"r"}"#).await;
    let key = runner["key"].as_str().unwrap().to_string();
    let cases: [(&str, &str, &str, &str, StatusCode); 10] = [
        (
            "POST",
            "/api/runners",
            MANAGER,
            "{not json",
            StatusCode::BAD_REQUEST,
        ),
        ("POST", "/api/runners", MANAGER, "", StatusCode::BAD_REQUEST),
        (
            "POST",
            "/api/runners",
            MANAGER,
            r#"{"name": 7}"#,
            StatusCode::BAD_REQUEST,
        ),
        (
            "POST",
            "/api/runners",
            MANAGER,
            r#"{"name": "x", "extra": 1}"#,
            StatusCode::BAD_REQUEST,
        ),
        (
            "POST",
            "/api/jobs/claim",
            &key,
            r#"{"languages": "c"}"#,
            StatusCode::BAD_REQUEST,
        ),
        (
            "POST",
            "/api/jobs/claim",
            &key,
            r#"{"languages": []}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "POST",
            "/api/jobs/1/result",
            &key,
            r#"{"lease_token": "t", "score": 1}"#,
            StatusCode::BAD_REQUEST,
        ),
        ("GET", "/api/jobs/abc", MANAGER, "", StatusCode::NOT_FOUND),
        (
            "GET",
            "/api/no/such/route",
            MANAGER,
            "",
            StatusCode::NOT_FOUND,
        ),
        (
            "DELETE",
            "/api/jobs/claim",
            &key,
            "",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
    ];
    for (method, path, token, body, want) in cases {
        let (status, answer) = send(&state, method, path, token, body.to_string()).await;
        assert_eq!(status, want, "{method} {path} {body}: {answer}");
        assert!(
            answer["error"].is_string() && answer["message"].is_string(),
            "{answer}"
        );
    }
    let (status, answer) = send(
        &state,
        "POST",
        "/api/jobs/1/lease",
        &key,
        r#"{"lease_token": "t", "seconds": 0}"#,
    )
    .await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("request.invalid"))
    );
    state.db.close().await;
    db.cleanup().await;
}

async fn oversized_json_body_is_refused_with_413(backend: Backend) {
    let (state, db) = oneshot_state(backend, |c| c.max_body = 1024).await;
    let big = json!({"name": "x".repeat(2000)}).to_string();
    let (status, answer) = send(&state, "POST", "/api/runners", MANAGER, big).await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("request.too_large"))
    );
    let small = json!({"name": "x".repeat(100)}).to_string();
    assert_eq!(
        send(&state, "POST", "/api/runners", MANAGER, small).await.0,
        StatusCode::CREATED
    );
    state.db.close().await;
    db.cleanup().await;
}

async fn oversized_upload_is_refused_with_413(backend: Backend) {
    let s = TestServer::start_with(backend, |c| c.max_upload = 4096).await;
    let big = server_common::tar_gz(&[
        ("problem.yaml", b"x"),
        ("data/secret/big.in", &rand_bytes(64 * 1024)),
    ]);
    let (status, body) = s.upload(big, "").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("request.too_large"))
    );
    let small = server_common::hello_package();
    assert!(small.len() < 4096, "greet is {} bytes", small.len());
    let (status, _) = s.upload(small, "").await;
    assert_eq!(status, StatusCode::CREATED, "under the limit");
    assert_eq!(
        std::fs::read_dir(s.db.dir().join("storage/tmp"))
            .unwrap()
            .count(),
        0
    );
    s.stop().await;
}

fn rand_bytes(n: usize) -> Vec<u8> {
    (0..n).map(|_| rand::random::<u8>()).collect()
}

async fn metrics_and_healthz_need_no_token(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    s.submit(problem, "c").await;
    s.submit(problem, "c").await;
    let (_, key) = s.runner("r").await;
    s.claim(&key, &["c"]).await.unwrap();
    let resp = s.http.get(s.url("/metrics")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let text = resp.text().await.unwrap();
    for name in [
        "judge_claims_total",
        "judge_leases_expired_total",
        "judge_refunds_total",
        "judge_releases_total",
        "judge_stale_result_dropped_total",
    ] {
        assert!(text.contains(&format!("# TYPE {name} counter")), "{name}");
    }
    assert_eq!(
        server_common::metric_value(&text, "judge_jobs{state=\"Queued\"}"),
        1.0
    );
    assert_eq!(
        server_common::metric_value(&text, "judge_jobs{state=\"Running\"}"),
        1.0
    );
    assert_eq!(
        server_common::metric_value(&text, "judge_claims_total"),
        1.0
    );
    let (status, body) = s.get("/healthz", "").await;
    assert_eq!(
        (status, body["status"].as_str()),
        (StatusCode::OK, Some("ok"))
    );
    s.stop().await;
}

async fn package_url_follows_public_url(backend: Backend) {
    let s = TestServer::start_with(backend, |c| {
        c.public_url = Some("https://judge.example/base/".into())
    })
    .await;
    let (problem, _, sha) = s.problem().await;
    s.submit(problem, "c").await;
    let (_, key) = s.runner("r").await;
    let claim = s.claim(&key, &["c"]).await.unwrap();
    assert_eq!(
        claim["package"]["url"],
        format!("https://judge.example/base/api/packages/{sha}")
    );
    s.stop().await;
}

async fn claim_waits_for_work_up_to_wait_seconds(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, key) = s.runner("r").await;
    let started = Instant::now();
    let (status, _) = s
        .post(
            "/api/jobs/claim",
            &key,
            json!({"languages": ["c"], "wait_seconds": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "waited about a second"
    );
    let waiting = s.post(
        "/api/jobs/claim",
        &key,
        json!({"languages": ["c"], "wait_seconds": 20}),
    );
    let submit = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        s.submit(problem, "c").await
    };
    let started = Instant::now();
    let ((status, claim), (_, job)) = tokio::join!(waiting, submit);
    assert_eq!(status, StatusCode::OK);
    assert_eq!(lease_of(&claim).0, job);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "woken by the new job, not the deadline"
    );
    s.stop().await;
}

//! `Idempotency-Key` on `POST /api/submissions` (CONTRACT §7) and `POST
//! /api/problems` (our addition): the same key with the same request answers the
//! first ids again, another request under the key is 409 `request.conflict`,
//! concurrent twins create one thing; on SQLite and PostgreSQL, counted in the
//! database itself.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod server_common;

use reqwest::StatusCode;
use serde_json::{Value, json};
use server_common::{Backend, MANAGER, TestServer, hello_package, package_of};

backend_tests!(
    same_key_same_submission_answers_the_first_ids,
    same_key_another_submission_is_a_conflict,
    without_a_key_every_submission_is_created,
    a_refused_submission_leaves_its_key_unused,
    concurrent_twins_create_one_submission,
    a_key_still_answers_a_day_later,
    malformed_keys_are_refused,
    same_key_same_package_answers_the_first_problem,
    concurrent_package_twins_create_one_problem,
);

/// A POST with an optional `Idempotency-Key`: `(status, replayed, body)`.
async fn keyed_post(
    s: &TestServer,
    path: &str,
    key: Option<&str>,
    body: reqwest::Body,
    json: bool,
) -> (StatusCode, bool, Value) {
    let mut request = s.http.post(s.url(path)).bearer_auth(MANAGER).body(body);
    if json {
        request = request.header("content-type", "application/json");
    }
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let replayed = response
        .headers()
        .get("Idempotent-Replayed")
        .is_some_and(|v| v == "true");
    let body = response.json().await.unwrap_or(Value::Null);
    (status, replayed, body)
}

async fn submit_keyed(s: &TestServer, key: Option<&str>, body: &str) -> (StatusCode, bool, Value) {
    keyed_post(s, "/api/submissions", key, body.to_string().into(), true).await
}

async fn upload_keyed(
    s: &TestServer,
    key: Option<&str>,
    query: &str,
    bytes: Vec<u8>,
) -> (StatusCode, bool, Value) {
    let path = format!("/api/problems{query}");
    keyed_post(s, &path, key, bytes.into(), false).await
}

fn submission(problem_id: i64, source: &str) -> String {
    json!({"problem_id": problem_id, "language": "python3",
        "files": [{"name": "hello.py", "content": source}]})
    .to_string()
}

/// Rows of `table` (submissions, jobs, problems, problem_versions), from the
/// database itself.
async fn rows(s: &TestServer, backend: Backend, table: &str) -> i64 {
    use sqlx::Connection as _;
    let sql: &'static str = match table {
        "submissions" => "SELECT COUNT(*) FROM submissions",
        "jobs" => "SELECT COUNT(*) FROM jobs",
        "problems" => "SELECT COUNT(*) FROM problems",
        "problem_versions" => "SELECT COUNT(*) FROM problem_versions",
        other => panic!("no count for {other}"),
    };
    macro_rules! count_on {
        ($connection:ty) => {{
            let mut conn = <$connection>::connect(&s.db.url).await.unwrap();
            let n: i64 = sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap();
            conn.close().await.unwrap();
            n
        }};
    }
    match backend {
        Backend::Sqlite => count_on!(sqlx::SqliteConnection),
        Backend::Postgres => count_on!(sqlx::PgConnection),
    }
}

async fn same_key_same_submission_answers_the_first_ids(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, _, _) = s.problem().await;
    let body = submission(problem, "print('Hello World!')\n");
    let (status, replayed, first) = submit_keyed(&s, Some("forward:a:7:1"), &body).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert!(!replayed, "a first answer is not a replay");
    for _ in 0..2 {
        let (status, replayed, again) = submit_keyed(&s, Some("forward:a:7:1"), &body).await;
        assert_eq!(status, StatusCode::CREATED, "{again}");
        assert!(replayed, "the header marks a replay");
        assert_eq!(again, first);
    }
    // The same values in another order and spacing are the same request.
    let reordered = format!(
        "{{ \"files\": [{{\"content\": \"print('Hello World!')\\n\", \"name\": \"hello.py\"}}],\n \
         \"language\": \"python3\", \"problem_id\": {problem} }}"
    );
    let (status, replayed, again) = submit_keyed(&s, Some("forward:a:7:1"), &reordered).await;
    assert_eq!((status, replayed), (StatusCode::CREATED, true), "{again}");
    assert_eq!(again, first);
    assert_eq!(rows(&s, backend, "submissions").await, 1);
    assert_eq!(rows(&s, backend, "jobs").await, 1);
    let (_, key) = s.runner("r").await;
    assert!(s.claim(&key, &["python3"]).await.is_some());
    assert!(s.claim(&key, &["python3"]).await.is_none(), "one job only");
    s.stop().await;
}

async fn same_key_another_submission_is_a_conflict(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, _, _) = s.problem().await;
    let (status, _, first) =
        submit_keyed(&s, Some("k-1"), &submission(problem, "print(1)\n")).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let (status, replayed, body) =
        submit_keyed(&s, Some("k-1"), &submission(problem, "print(2)\n")).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(!replayed);
    assert_eq!(body["error"], "request.conflict", "{body}");
    assert!(body["message"].as_str().unwrap().contains("k-1"), "{body}");
    // Another key is another submission.
    let (status, _, other) =
        submit_keyed(&s, Some("k-2"), &submission(problem, "print(2)\n")).await;
    assert_eq!(status, StatusCode::CREATED, "{other}");
    assert_ne!(other["submission_id"], first["submission_id"]);
    // The key of a submission is not a key of a problem: the routes' spaces differ.
    let (status, replayed, _) = upload_keyed(&s, Some("k-1"), "", hello_package()).await;
    assert_eq!((status, replayed), (StatusCode::CREATED, false));
    assert_eq!(rows(&s, backend, "submissions").await, 2);
    s.stop().await;
}

/// The twin of the first test: without the header, the same body twice is two
/// submissions.
async fn without_a_key_every_submission_is_created(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, _, _) = s.problem().await;
    let body = submission(problem, "print(1)\n");
    let (_, _, first) = submit_keyed(&s, None, &body).await;
    let (status, replayed, second) = submit_keyed(&s, None, &body).await;
    assert_eq!((status, replayed), (StatusCode::CREATED, false));
    assert_ne!(first["submission_id"], second["submission_id"]);
    assert_eq!(rows(&s, backend, "submissions").await, 2);
    s.stop().await;
}

/// Only creations are remembered: a refused request leaves its key free.
async fn a_refused_submission_leaves_its_key_unused(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (status, _, body) = submit_keyed(&s, Some("early"), &submission(999, "print(1)\n")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (problem, _, _) = s.problem().await;
    let (status, replayed, body) =
        submit_keyed(&s, Some("early"), &submission(problem, "print(1)\n")).await;
    assert_eq!((status, replayed), (StatusCode::CREATED, false), "{body}");
    s.stop().await;
}

/// Sixteen requests with one key at once: one submission, one job, sixteen
/// answers naming it.
async fn concurrent_twins_create_one_submission(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, _, _) = s.problem().await;
    let body = submission(problem, "print('twins')\n");
    let answers =
        futures_util::future::join_all((0..16).map(|_| submit_keyed(&s, Some("twins"), &body)))
            .await;
    let ids: Vec<&Value> = answers
        .iter()
        .map(|(_, _, b)| &b["submission_id"])
        .collect();
    for (status, _, body) in &answers {
        assert_eq!(*status, StatusCode::CREATED, "{body}");
        assert_eq!(body, &answers[0].2);
    }
    assert_eq!(
        answers.iter().filter(|(_, replayed, _)| !replayed).count(),
        1,
        "exactly one answer is the creation: {ids:?}"
    );
    assert_eq!(rows(&s, backend, "submissions").await, 1);
    assert_eq!(rows(&s, backend, "jobs").await, 1);
    s.stop().await;
}

/// The contract asks for at least 24 h: a day and an hour later (the Server's
/// clock moved), the key still answers.
async fn a_key_still_answers_a_day_later(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, _, _) = s.problem().await;
    let body = submission(problem, "print(1)\n");
    let (_, _, first) = submit_keyed(&s, Some("day"), &body).await;
    s.advance(25 * 3600);
    s.reap().await;
    let (status, replayed, again) = submit_keyed(&s, Some("day"), &body).await;
    assert_eq!((status, replayed), (StatusCode::CREATED, true), "{again}");
    assert_eq!(again, first);
    s.stop().await;
}

async fn malformed_keys_are_refused(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, _, _) = s.problem().await;
    let body = submission(problem, "print(1)\n");
    let long = "k".repeat(256);
    for key in ["", "   ", long.as_str()] {
        let (status, _, answer) = submit_keyed(&s, Some(key), &body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{key:?}: {answer}");
        assert_eq!(answer["error"], "request.invalid");
    }
    let (status, _, _) = submit_keyed(&s, Some(&"k".repeat(255)), &body).await;
    assert_eq!(status, StatusCode::CREATED, "255 bytes are fine");
    assert_eq!(rows(&s, backend, "submissions").await, 1);
    s.stop().await;
}

async fn same_key_same_package_answers_the_first_problem(backend: Backend) {
    let s = TestServer::start(backend).await;
    let key = Some("package:greet");
    let (status, replayed, first) = upload_keyed(&s, key, "", hello_package()).await;
    assert_eq!((status, replayed), (StatusCode::CREATED, false), "{first}");
    let (status, replayed, again) = upload_keyed(&s, key, "", hello_package()).await;
    assert_eq!((status, replayed), (StatusCode::CREATED, true), "{again}");
    assert_eq!(again, first);
    // Another package, or the same one with another query, is another request.
    let (status, _, body) = upload_keyed(&s, key, "", package_of("legacy_scoring")).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"], "request.conflict");
    let (status, _, body) = upload_keyed(&s, key, "?time_limit=3", hello_package()).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(rows(&s, backend, "problems").await, 1);
    // A version added under a key answers its version again.
    let query = format!("?problem_id={}", first["problem_id"]);
    let (status, _, version) =
        upload_keyed(&s, Some("v2"), &query, package_of("legacy_scoring")).await;
    assert_eq!(status, StatusCode::CREATED, "{version}");
    let (status, replayed, again) =
        upload_keyed(&s, Some("v2"), &query, package_of("legacy_scoring")).await;
    assert_eq!((status, replayed), (StatusCode::CREATED, true));
    assert_eq!(again, version);
    assert_eq!(rows(&s, backend, "problem_versions").await, 2);
    // Without a key, the same package is a new problem each time (the twin).
    let (_, replayed, fresh) = upload_keyed(&s, None, "", hello_package()).await;
    assert!(!replayed);
    assert_ne!(fresh["problem_id"], first["problem_id"]);
    s.stop().await;
}

async fn concurrent_package_twins_create_one_problem(backend: Backend) {
    let s = TestServer::start(backend).await;
    let answers = futures_util::future::join_all(
        (0..8).map(|_| upload_keyed(&s, Some("package:twins"), "", hello_package())),
    )
    .await;
    for (status, _, body) in &answers {
        assert_eq!(*status, StatusCode::CREATED, "{body}");
        assert_eq!(body, &answers[0].2);
    }
    assert_eq!(rows(&s, backend, "problems").await, 1);
    assert_eq!(rows(&s, backend, "problem_versions").await, 1);
    s.stop().await;
}

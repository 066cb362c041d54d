//! The Server's accepted languages (contract §7): `serve --languages` names
//! the ones beyond the default five, and `--map-language python3=pypy3` (Kattis'
//! Python 3) stores a Python 3 submission as PyPy's, so only Runners offering
//! pypy3 claim it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod server_common;

use reqwest::StatusCode;
use serde_json::json;
use server_common::{Backend, MANAGER, TestServer};

backend_tests!(
    a_mapped_language_is_stored_and_claimed_as_its_target,
    a_mapping_to_a_language_not_accepted_is_refused,
);

async fn a_mapped_language_is_stored_and_claimed_as_its_target(backend: Backend) {
    let s = TestServer::start_with(backend, |c| {
        c.languages = ["c", "cpp", "pypy3", "kotlin"].map(String::from).to_vec();
        c.language_map = vec![("python3".to_string(), "pypy3".to_string())];
    })
    .await;
    let (problem_id, _, _) = s.problem().await;
    let (_, _) = s.submit(problem_id, "python3").await;
    let (_, _) = s.submit(problem_id, "kotlin").await;
    // java is not accepted here (the operator named the list).
    let body = json!({"problem_id": problem_id, "language": "java",
        "files": [{"name": "Main.java", "content": "class Main {}\n"}]});
    let (status, body) = s.post("/api/submissions", MANAGER, body).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"], "language.unknown", "{body}");
    let (_, key) = s.runner("pypy").await;
    // A Runner offering only c finds nothing; the Python 3 submission is pypy3's.
    assert!(s.claim(&key, &["c"]).await.is_none());
    let claim = s.claim(&key, &["pypy3"]).await.expect("the mapped job");
    assert_eq!(claim["language"], "pypy3", "{claim}");
    let claim = s.claim(&key, &["kotlin"]).await.expect("the kotlin job");
    assert_eq!(claim["language"], "kotlin", "{claim}");
    s.stop().await;
}

async fn a_mapping_to_a_language_not_accepted_is_refused(backend: Backend) {
    let db = server_common::TestDb::new(backend).await;
    let mut config = server_common::test_config(&db);
    config.language_map = vec![("python3".to_string(), "pypy3".to_string())];
    let err = config.check().unwrap_err().to_string();
    assert!(err.contains("pypy3"), "{err}");
    db.cleanup().await;
}

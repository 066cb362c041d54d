//! The judge-runner Server backend against a stand-in B whose answers each test
//! sets: what becomes a result, a failure, or "unavailable".

use super::*;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as Status};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

const PACKAGE: &[u8] = b"not really a tar.gz, but bytes with a SHA-256";

fn sha() -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(PACKAGE))
}

/// What the stand-in B answers, changed by the test between calls.
#[derive(Clone)]
struct Answers {
    submit: Arc<Mutex<(u16, String, bool)>>,
    view: Arc<Mutex<(Status, String)>>,
    rejudged: Arc<Mutex<Vec<Value>>>,
}

fn answer(status: u16, body: &str, replayed: bool) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    if replayed {
        headers.insert("Idempotent-Replayed", "true".parse().unwrap());
    }
    (Status::from_u16(status).unwrap(), headers, body.to_string()).into_response()
}

/// A job view as B answers it.
fn job_view(id: i64, attempt: i64, state: &str, reason: Option<&str>, result: Value) -> Value {
    json!({"id": id, "submission_id": 1, "attempt": attempt, "problem_version_id": 1,
        "runner_id": 1, "state": state, "lease_token": null, "lease_seconds": null,
        "lease_expires_at": null, "deliveries": 1, "acknowledged_at": null, "refunds": 0,
        "releases": 0, "failure_reason": reason, "row_version": 1,
        "files": ["details", "log"], "progress": {"done": 2, "total": 5}, "result": result})
}

fn view(jobs: Vec<Value>) -> String {
    json!({"submission_id": 1, "problem_id": 1, "language": "python3", "jobs": jobs,
        "result": null})
    .to_string()
}

async fn stand_in() -> (JudgeServer, Answers, tempfile::TempDir) {
    let answers = Answers {
        submit: Arc::new(Mutex::new((
            201,
            r#"{"submission_id":1,"job_id":1,"attempt":1}"#.to_string(),
            false,
        ))),
        view: Arc::new(Mutex::new((Status::OK, view(vec![])))),
        rejudged: Arc::new(Mutex::new(Vec::new())),
    };
    let app = axum::Router::new()
        .route("/package", get(|| async { PACKAGE.to_vec() }))
        .route(
            "/api/problems",
            post(|| async {
                Json(json!({"problem_id": 4, "problem_version_id": 4, "sha256": sha()}))
            }),
        )
        .route(
            "/api/submissions",
            post(|State(a): State<Answers>| async move {
                let (status, body, replayed) = a.submit.lock().unwrap().clone();
                answer(status, &body, replayed)
            }),
        )
        .route(
            "/api/submissions/{id}",
            get(|State(a): State<Answers>| async move {
                let (status, body) = a.view.lock().unwrap().clone();
                answer(status.as_u16(), &body, false)
            }),
        )
        .route(
            "/api/submissions/{id}/rejudge",
            post(
                |State(a): State<Answers>, Json(body): Json<Value>| async move {
                    a.rejudged.lock().unwrap().push(body);
                    answer(201, r#"{"submission_id":1,"job_id":2,"attempt":2}"#, false)
                },
            ),
        )
        .route(
            "/api/jobs/{id}/files/{name}",
            get(
                |axum::extract::Path((id, name)): axum::extract::Path<(i64, String)>| async move {
                    format!("{name} of {id}")
                },
            ),
        )
        .with_state(answers.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let staging = tempfile::tempdir().unwrap();
    let server = JudgeServer::new(
        &format!("http://{addr}"),
        "t",
        None,
        PackageSource {
            key: None,
            staging: staging.path().to_path_buf(),
            max_bytes: 1 << 20,
            policy: FetchPolicy::default(),
        },
    )
    .unwrap();
    (server, answers, staging)
}

fn forwarded(server: &JudgeServer) -> ForwardedJob {
    ForwardedJob {
        key: "judge-runner-forward:0:job-1:attempt-1".into(),
        package: crate::protocol::PackageRef {
            url: server.http.base.join("package").unwrap().to_string(),
            sha256: sha(),
            size: PACKAGE.len() as u64,
        },
        time_limit: None,
        language: "python3".into(),
        files: vec![crate::protocol::SubmissionFile::from_bytes(
            "a.py",
            b"print(1)",
        )],
    }
}

fn unavailable<T: std::fmt::Debug>(r: Result<T, BackendError>) -> bool {
    matches!(r, Err(BackendError::Unavailable { .. }))
}

/// A 5xx, a success whose body is not JSON, a Completed attempt without a
/// Result: each is "unavailable" (retried), never a result; the twin, a
/// proper answer, is one.
#[tokio::test]
async fn five_hundreds_and_garbage_are_never_a_verdict() {
    let (server, answers, _staging) = stand_in().await;
    let forwarded_job = forwarded(&server);
    *answers.submit.lock().unwrap() = (
        503,
        r#"{"error":"unavailable","message":"m"}"#.to_string(),
        false,
    );
    assert!(unavailable(server.submit(&forwarded_job).await));
    *answers.submit.lock().unwrap() = (201, "<html>oops</html>".to_string(), false);
    assert!(unavailable(server.submit(&forwarded_job).await));
    *answers.submit.lock().unwrap() = (
        201,
        r#"{"submission_id":1,"job_id":1,"attempt":1}"#.to_string(),
        false,
    );
    let submitted = server.submit(&forwarded_job).await.unwrap();
    assert_eq!(
        submitted.attempt,
        RemoteAttempt {
            submission_id: 1,
            job_id: 1
        }
    );
    assert!(!submitted.replayed);

    let attempt = submitted.attempt;
    *answers.view.lock().unwrap() = (Status::OK, "garbage".into());
    assert!(unavailable(server.status(attempt).await));
    *answers.view.lock().unwrap() = (Status::BAD_GATEWAY, "bad gateway".into());
    assert!(unavailable(server.status(attempt).await));
    let no_result = view(vec![job_view(1, 1, "Completed", None, Value::Null)]);
    *answers.view.lock().unwrap() = (Status::OK, no_result);
    assert!(unavailable(server.status(attempt).await));

    let running = view(vec![job_view(1, 1, "Running", None, Value::Null)]);
    *answers.view.lock().unwrap() = (Status::OK, running);
    assert!(matches!(
        server.status(attempt).await,
        Ok(RemoteState::Waiting {
            progress: Some((2, 5)),
            ..
        })
    ));
    let result = json!({"evaluation_job_id": 1, "problem_version_id": 1, "score": 1.0,
        "max_score": 1.0, "verdict": "Accepted", "extra": {"a": 1}, "props": null,
        "runner_version": "0.1.0+b"});
    *answers.view.lock().unwrap() = (
        Status::OK,
        view(vec![job_view(1, 1, "Completed", None, result)]),
    );
    let Ok(RemoteState::Done(done)) = server.status(attempt).await else {
        panic!("a proper Completed answer is a result");
    };
    assert_eq!(done.verdict, "Accepted");
    assert_eq!(done.extra, Some(json!({"a": 1})));
    assert_eq!(done.runner_version.as_deref(), Some("0.1.0+b"));
    assert_eq!(
        done.attachments,
        vec![
            ("details", b"details of 1".to_vec()),
            ("log", b"log of 1".to_vec())
        ]
    );
}

/// A replayed submission whose attempt ended in a retryable failure is
/// rejudged once, naming the attempt it saw; a non-retryable one is not, and
/// its failure is A's with its reason.
#[tokio::test]
async fn a_replay_rejudges_only_a_retryable_failure() {
    let (server, answers, _staging) = stand_in().await;
    let forwarded_job = forwarded(&server);
    *answers.submit.lock().unwrap() = (
        201,
        r#"{"submission_id":1,"job_id":1,"attempt":1}"#.to_string(),
        true,
    );
    let exhausted = view(vec![job_view(
        1,
        1,
        "Failed",
        Some("deliveries.exhausted"),
        Value::Null,
    )]);
    *answers.view.lock().unwrap() = (Status::OK, exhausted);
    let submitted = server.submit(&forwarded_job).await.unwrap();
    assert!(submitted.replayed);
    assert_eq!(submitted.attempt.job_id, 2, "waits on the new attempt");
    assert_eq!(
        *answers.rejudged.lock().unwrap(),
        vec![json!({"expected_attempt": 1})]
    );

    let invalid = view(vec![job_view(
        1,
        1,
        "Failed",
        Some("package.invalid"),
        Value::Null,
    )]);
    *answers.view.lock().unwrap() = (Status::OK, invalid);
    let submitted = server.submit(&forwarded_job).await.unwrap();
    assert_eq!(submitted.attempt.job_id, 1);
    assert_eq!(
        answers.rejudged.lock().unwrap().len(),
        1,
        "no second rejudge"
    );
    assert_eq!(
        server.status(submitted.attempt).await.unwrap(),
        RemoteState::Failed {
            reason: "package.invalid".into(),
            retryable: false
        }
    );
}

/// B's language refusal is A's retryable `language.unavailable`; a package
/// whose bytes do not match is `package.checksum_mismatch` before B sees it.
#[tokio::test]
async fn refusals_become_the_contract_reasons() {
    let (server, answers, _staging) = stand_in().await;
    let mut forwarded_job = forwarded(&server);
    *answers.submit.lock().unwrap() = (
        422,
        r#"{"error":"language.unknown","message":"accepted: c"}"#.to_string(),
        false,
    );
    let Err(BackendError::Failed {
        reason, retryable, ..
    }) = server.submit(&forwarded_job).await
    else {
        panic!("a language B lacks is a failure");
    };
    assert_eq!((reason.as_str(), retryable), ("language.unavailable", true));
    forwarded_job.package.sha256 = "0".repeat(64);
    let Err(BackendError::Failed {
        reason, retryable, ..
    }) = server.submit(&forwarded_job).await
    else {
        panic!("a mismatching package is a failure");
    };
    assert_eq!(
        (reason.as_str(), retryable),
        ("package.checksum_mismatch", false)
    );
}

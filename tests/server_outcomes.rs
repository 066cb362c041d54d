//! How a lease ends, on SQLite and PostgreSQL: the Result (idempotent for the
//! same token, `extra` at most 2048 bytes, `{}` stored as null), release with its
//! three free deliveries and the cap, infrastructure failures retryable or not.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod server_common;

use reqwest::StatusCode;
use serde_json::{Value, json};
use server_common::{Backend, MANAGER, TestServer, lease_of};

backend_tests!(
    result_is_idempotent_for_the_same_token,
    release_gives_the_delivery_back_three_times_then_meets_the_cap,
    failure_retryable_requeues,
    failure_not_retryable_fails_with_its_reason,
    extra_within_2048_bytes_allowed,
    extra_over_2048_bytes_denied,
    extra_of_2048_bytes_as_sent_allowed,
    extra_of_2049_bytes_as_sent_denied,
    lease_calls_naming_their_attempt_allowed,
    lease_calls_naming_another_attempt_denied,
    rejudge_losing_the_attempt_race_names_the_real_latest,
);

async fn result_is_idempotent_for_the_same_token(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, version, _) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    let body = json!({"lease_token": token, "score": 0.5, "max_score": 2.0, "verdict": "Partially Fine",
        "extra": {"tests": 3}, "props": {}, "runner_version": "0.1.0+abc1234"});
    let (status, answer) = s
        .post(&format!("/api/jobs/{job}/result"), &key, body.clone())
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (status, answer) = s
        .post(&format!("/api/jobs/{job}/result"), &key, body.clone())
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a resend with the same token: {answer}"
    );
    let view = s.job(job).await;
    assert_eq!(view["state"], "Completed");
    let result = &view["result"];
    assert_eq!(result["evaluation_job_id"], job);
    assert_eq!(result["problem_version_id"], version);
    assert_eq!(result["score"], 0.5);
    assert_eq!(result["max_score"], 2.0);
    assert_eq!(
        result["verdict"], "Partially Fine",
        "opaque, stored exactly"
    );
    assert_eq!(result["extra"], json!({"tests": 3}));
    assert_eq!(
        result["props"],
        serde_json::Value::Null,
        "{{}} is stored as null"
    );
    assert_eq!(result["runner_version"], "0.1.0+abc1234");
    assert_eq!(s.metric("judge_stale_result_dropped_total").await, 0.0);
    let mut other = body;
    other["lease_token"] = json!("ffffffffffffffffffffffffffffffff");
    let (status, _) = s
        .post(&format!("/api/jobs/{job}/result"), &key, other)
        .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "another token is not a resend"
    );
    s.stop().await;
}

async fn release_gives_the_delivery_back_three_times_then_meets_the_cap(backend: Backend) {
    let s = TestServer::start_with(backend, |c| c.delivery_cap = 2).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let expected = [
        ("Queued", 0, 1),
        ("Queued", 0, 2),
        ("Queued", 0, 3),
        ("Queued", 1, 3), // fourth release: the delivery is spent, 1 < cap 2
        ("Failed", 2, 3), // fifth: 2 deliveries reached the cap on the way back to Queued
    ];
    for (round, (state, deliveries, releases)) in expected.into_iter().enumerate() {
        let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
        let (status, body) = s
            .post(
                &format!("/api/jobs/{job}/release"),
                &key,
                json!({"lease_token": token}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "round {round}: {body}");
        assert_eq!(body["state"], state, "round {round}");
        let view = s.job(job).await;
        assert_eq!(view["state"], state, "round {round}");
        assert_eq!(view["deliveries"], deliveries, "round {round}");
        assert_eq!(view["releases"], releases, "round {round}");
    }
    assert_eq!(s.job(job).await["failure_reason"], "deliveries.exhausted");
    assert_eq!(s.metric("judge_releases_total").await, 5.0);
    s.stop().await;
}

async fn failure_retryable_requeues(backend: Backend) {
    let s = TestServer::start_with(backend, |c| c.delivery_cap = 2).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let body = |t: &str| json!({"lease_token": t, "reason": "sandbox.failed", "retryable": true});
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    let (status, answer) = s
        .post(&format!("/api/jobs/{job}/failure"), &key, body(&token))
        .await;
    assert_eq!(
        (status, answer["state"].as_str()),
        (StatusCode::OK, Some("Queued"))
    );
    let view = s.job(job).await;
    assert_eq!(
        (view["state"].as_str(), view["deliveries"].as_i64()),
        (Some("Queued"), Some(1))
    );
    assert_eq!(view["failure_reason"], serde_json::Value::Null);
    // At the cap, a retryable failure fails the job instead.
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    let (status, answer) = s
        .post(&format!("/api/jobs/{job}/failure"), &key, body(&token))
        .await;
    assert_eq!(
        (status, answer["state"].as_str()),
        (StatusCode::OK, Some("Failed"))
    );
    assert_eq!(s.job(job).await["failure_reason"], "deliveries.exhausted");
    s.stop().await;
}

async fn failure_not_retryable_fails_with_its_reason(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    let body =
        json!({"lease_token": token, "reason": "package.checksum_mismatch", "retryable": false});
    let (status, answer) = s
        .post(&format!("/api/jobs/{job}/failure"), &key, body)
        .await;
    assert_eq!(
        (status, answer["state"].as_str()),
        (StatusCode::OK, Some("Failed"))
    );
    let view = s.job(job).await;
    assert_eq!(view["state"], "Failed");
    assert_eq!(view["failure_reason"], "package.checksum_mismatch");
    assert_eq!(
        view["result"],
        serde_json::Value::Null,
        "an infrastructure failure is never a verdict"
    );
    let (status, _) = s.result(job, &token, &key, "Accepted").await;
    assert_eq!(status, StatusCode::CONFLICT);
    s.stop().await;
}

/// `{"k": "xxx..."}` whose compact JSON is exactly `bytes` long.
fn extra_of(bytes: usize) -> serde_json::Value {
    json!({"k": "x".repeat(bytes - r#"{"k":""}"#.len())})
}

async fn extra_within_2048_bytes_allowed(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    let extra = extra_of(2048);
    let body = json!({"lease_token": token, "score": 1.0, "max_score": 1.0, "verdict": "Accepted", "extra": extra});
    let (status, answer) = s.post(&format!("/api/jobs/{job}/result"), &key, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(
        s.job(job).await["result"]["extra"],
        extra,
        "stored whole, never truncated"
    );
    s.stop().await;
}

async fn extra_over_2048_bytes_denied(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    let body = json!({"lease_token": token, "score": 1.0, "max_score": 1.0, "verdict": "Accepted", "extra": extra_of(2049)});
    let (status, answer) = s.post(&format!("/api/jobs/{job}/result"), &key, body).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(answer["error"], "result.extra_too_large");
    let view = s.job(job).await;
    assert_eq!(view["state"], "Running", "refused, nothing stored");
    assert_eq!(view["result"], serde_json::Value::Null);
    s.stop().await;
}

/// A result body as a client with spaced separators (Python's `json.dumps`) writes
/// it, with an `extra` of exactly `bytes` bytes as sent (one byte fewer compact).
fn spaced_result_body(token: &str, bytes: usize) -> String {
    let filler = "x".repeat(bytes - r#"{"k": ""}"#.len());
    format!(
        r#"{{"lease_token": "{token}", "score": 1.0, "max_score": 1.0, "verdict": "Accepted", "extra": {{"k": "{filler}"}}}}"#
    )
}

async fn post_raw(s: &TestServer, path: &str, key: &str, body: String) -> (StatusCode, Value) {
    let resp = s
        .http
        .post(s.url(path))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn extra_of_2048_bytes_as_sent_allowed(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    let body = spaced_result_body(&token, 2048);
    let (status, answer) = post_raw(&s, &format!("/api/jobs/{job}/result"), &key, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(
        s.job(job).await["result"]["extra"]["k"]
            .as_str()
            .unwrap()
            .len(),
        2039
    );
    s.stop().await;
}

/// 2049 bytes as sent is refused even though its compact form is 2048 bytes: the
/// limit is on the JSON the client wrote.
async fn extra_of_2049_bytes_as_sent_denied(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    let body = spaced_result_body(&token, 2049);
    let (status, answer) = post_raw(&s, &format!("/api/jobs/{job}/result"), &key, body).await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("result.extra_too_large")
        )
    );
    assert_eq!(
        s.job(job).await["state"],
        "Running",
        "refused, nothing stored"
    );
    s.stop().await;
}

/// Every lease-bearing body may name its attempt (the contract's "and attempt").
async fn lease_calls_naming_their_attempt_allowed(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    let calls = [
        (
            "lease",
            json!({"lease_token": token, "attempt": 1, "seconds": 30}),
        ),
        (
            "progress",
            json!({"lease_token": token, "attempt": 1, "done": 1, "total": 1}),
        ),
        (
            "result",
            json!({"lease_token": token, "attempt": 1, "score": 1.0, "max_score": 1.0,
            "verdict": "Accepted", "extra": null, "props": null, "runner_version": "t"}),
        ),
    ];
    for (call, body) in calls {
        let (status, answer) = s.post(&format!("/api/jobs/{job}/{call}"), &key, body).await;
        assert_eq!(status, StatusCode::OK, "{call}: {answer}");
    }
    assert_eq!(s.job(job).await["state"], "Completed");
    let (_, job) = s.submit(problem, "python3").await;
    for call in ["release", "failure"] {
        let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
        let body = json!({"lease_token": token, "attempt": 1, "reason": "sandbox.failed", "retryable": true});
        let body = if call == "release" {
            json!({"lease_token": token, "attempt": 1})
        } else {
            body
        };
        let (status, answer) = s.post(&format!("/api/jobs/{job}/{call}"), &key, body).await;
        assert_eq!(
            (status, answer["state"].as_str()),
            (StatusCode::OK, Some("Queued")),
            "{call}"
        );
    }
    s.stop().await;
}

async fn lease_calls_naming_another_attempt_denied(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    let calls = [
        ("lease", json!({"lease_token": token, "attempt": 2})),
        (
            "progress",
            json!({"lease_token": token, "attempt": 2, "done": 1, "total": 1}),
        ),
        ("release", json!({"lease_token": token, "attempt": 2})),
        (
            "failure",
            json!({"lease_token": token, "attempt": 2, "reason": "x", "retryable": false}),
        ),
        (
            "result",
            json!({"lease_token": token, "attempt": 2, "score": 1.0, "max_score": 1.0,
            "verdict": "Accepted"}),
        ),
    ];
    for (call, body) in calls {
        let (status, answer) = s.post(&format!("/api/jobs/{job}/{call}"), &key, body).await;
        assert_eq!(
            (status, answer["error"].as_str()),
            (StatusCode::CONFLICT, Some("lease.lost")),
            "{call}"
        );
    }
    let view = s.job(job).await;
    assert_eq!(view["state"], "Running", "nothing changed");
    assert_eq!(view["row_version"], 0);
    assert_eq!(s.metric("judge_stale_result_dropped_total").await, 5.0);
    s.stop().await;
}

/// Two rejudges racing for one attempt number: the loser's insert is a unique
/// violation, answered 409 `attempt.conflict` naming the real latest attempt
/// (read after the winner), never a made-up one. The race is forced with a
/// trigger that inserts attempt 3 itself just before the rejudge's own insert.
async fn rejudge_losing_the_attempt_race_names_the_real_latest(backend: Backend) {
    use sqlx::Connection as _;
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (submission, _) = s.submit(problem, "python3").await;
    let path = format!("/api/submissions/{submission}/rejudge");
    let rejudge = |expected: i64| s.post(&path, MANAGER, json!({"expected_attempt": expected}));
    let (status, answer) = rejudge(1).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(answer["attempt"], 2);

    // A copy of attempt 1 as attempt 3, inserted by a trigger ahead of the
    // rejudge's own attempt 3 (committed or not, the rejudge then collides).
    let race = |columns: &[String]| {
        let list = columns.join(", ");
        let values = columns
            .iter()
            .map(|c| {
                if c == "attempt" {
                    "NEW.attempt".to_string()
                } else {
                    c.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "INSERT INTO jobs ({list}) SELECT {values} FROM jobs \
             WHERE submission_id = NEW.submission_id AND attempt = 1"
        )
    };
    match backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&s.db.url).await.unwrap();
            let columns: Vec<String> =
                sqlx::query_scalar("SELECT name FROM pragma_table_info('jobs') WHERE name <> 'id'")
                    .fetch_all(&mut conn)
                    .await
                    .unwrap();
            let sql = format!(
                "CREATE TRIGGER race BEFORE INSERT ON jobs WHEN NEW.attempt = 3 BEGIN {}; END",
                race(&columns)
            );
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&mut conn)
                .await
                .unwrap();
            conn.close().await.unwrap();
        }
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&s.db.url).await.unwrap();
            let columns: Vec<String> = sqlx::query_scalar(
                "SELECT column_name::text FROM information_schema.columns \
                 WHERE table_name = 'jobs' AND column_name <> 'id' \
                 AND is_generated = 'NEVER' ORDER BY ordinal_position",
            )
            .fetch_all(&mut conn)
            .await
            .unwrap();
            let sql = format!(
                "CREATE FUNCTION race() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 IF pg_trigger_depth() = 1 AND NEW.attempt = 3 THEN {}; END IF; \
                 RETURN NEW; END $$; \
                 CREATE TRIGGER race BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION race()",
                race(&columns)
            );
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&mut conn)
                .await
                .unwrap();
            conn.close().await.unwrap();
        }
    }
    let (status, answer) = rejudge(2).await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (StatusCode::CONFLICT, Some("attempt.conflict")),
        "{answer}"
    );
    let message = answer["message"].as_str().unwrap();
    // Everything of the losing transaction rolled back: 2 is still the latest.
    assert!(message.contains("(latest: 2)"), "{message}");
    assert!(!message.contains("-1"), "{message}");
    s.stop().await;
}

//! Trials on SQLite and PostgreSQL: scope `trial:run`, their own kind of claimable
//! work under the same lease rules, timings instead of a Result, the package gone
//! once the trial ends, and never part of a job, submission, result or count.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod server_common;

use reqwest::StatusCode;
use serde_json::{Value, json};
use server_common::{Backend, MANAGER, TestServer, hello_package, lease_of, multipart};

backend_tests!(
    trial_scope_allowed,
    trial_scope_denied,
    trial_is_claimed_after_jobs_and_completes_with_timings,
    trial_lease_rules_match_jobs,
    trials_never_appear_in_jobs_submissions_results_or_counts,
);

async fn trial_token(s: &TestServer) -> String {
    let (status, body) = s
        .post("/api/tokens", MANAGER, json!({"scopes": ["trial:run"]}))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    body["token"].as_str().unwrap().to_string()
}

async fn create_trial(s: &TestServer, token: &str, language: &str) -> (StatusCode, Value) {
    let pkg = hello_package();
    let (content_type, body) = multipart(&[
        ("package", Some("hello.tar.gz"), &pkg),
        ("language", None, language.as_bytes()),
        ("file", Some("hello.py"), b"print('Hello World!')\n"),
        ("file", Some("util.bin"), &[0xff, 0x00]),
    ]);
    let resp = s
        .http
        .post(s.url("/api/trials"))
        .bearer_auth(token)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

fn trial_files(s: &TestServer) -> usize {
    std::fs::read_dir(s.db.dir().join("storage/trials"))
        .unwrap()
        .count()
}

async fn trial_scope_allowed(backend: Backend) {
    let s = TestServer::start(backend).await;
    let token = trial_token(&s).await;
    let (status, body) = create_trial(&s, &token, "python3").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["trial_id"].as_i64().unwrap();
    let (status, view) = s.get(&format!("/api/trials/{id}"), &token).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        view,
        json!({"trial_id": id, "state": "Queued", "timings": [], "failure_reason": null})
    );
    assert_eq!(
        s.get(&format!("/api/trials/{id}"), MANAGER).await.0,
        StatusCode::OK,
        "the manager has every scope"
    );
    let (status, _) = create_trial(&s, MANAGER, "python3").await;
    assert_eq!(status, StatusCode::CREATED);
    s.stop().await;
}

async fn trial_scope_denied(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (_, key) = s.runner("r").await;
    let (status, body) = create_trial(&s, &key, "python3").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("auth.forbidden"))
    );
    let (status, body) = create_trial(&s, "jrt_nope", "python3").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("auth.required"))
    );
    // A token sees only the trials it asked for.
    let mine = trial_token(&s).await;
    let other = trial_token(&s).await;
    let (_, body) = create_trial(&s, &mine, "python3").await;
    let id = body["trial_id"].as_i64().unwrap();
    assert_eq!(
        s.get(&format!("/api/trials/{id}"), &other).await.0,
        StatusCode::NOT_FOUND
    );
    // A trial token is not a manager.
    assert_eq!(
        s.post("/api/runners", &mine, json!({"name": "x"})).await.0,
        StatusCode::FORBIDDEN
    );
    // An invalid package is refused like an upload.
    let (ct, body) = multipart(&[
        ("package", Some("p"), b"junk"),
        ("language", None, b"c"),
        ("file", Some("a.c"), b""),
    ]);
    let resp = s
        .http
        .post(s.url("/api/trials"))
        .bearer_auth(&mine)
        .header("content-type", ct)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        trial_files(&s),
        1,
        "only the valid trial's package is stored"
    );
    s.stop().await;
}

async fn trial_is_claimed_after_jobs_and_completes_with_timings(backend: Backend) {
    let s = TestServer::start(backend).await;
    let token = trial_token(&s).await;
    let (_, body) = create_trial(&s, &token, "python3").await;
    let trial_id = body["trial_id"].as_i64().unwrap();
    // A problem whose package differs from the trial's, so the trial's is served
    // from the trial's own file.
    let other = server_common::tar_gz(&[
        ("problem.yaml", b"name: other\n"),
        ("data/secret/1.in", b""),
        ("data/secret/1.ans", b"x\n"),
    ]);
    let (status, body) = s.upload(other, "").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let problem = body["problem_id"].as_i64().unwrap();
    let (_, job) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let first = s.claim(&key, &["python3"]).await.unwrap();
    assert_eq!(
        (first["kind"].as_str(), first["job_id"].as_i64()),
        (Some("job"), Some(job)),
        "jobs first"
    );
    let claim = s.claim(&key, &["python3"]).await.unwrap();
    assert_eq!(claim["kind"], "trial");
    assert_eq!(claim["trial_id"], trial_id);
    assert_eq!(claim["language"], "python3");
    assert_eq!(
        claim["files"][0],
        json!({"name": "hello.py", "content": "print('Hello World!')\n"})
    );
    assert_eq!(
        claim["files"][1],
        json!({"name": "util.bin", "content_base64": "/wA="})
    );
    let url = claim["package"]["url"].as_str().unwrap();
    let bytes = s
        .http
        .get(url)
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(
        bytes.as_ref(),
        hello_package().as_slice(),
        "the trial's package is served by digest"
    );
    let (_, lease) = lease_of(&claim);
    let timings = json!([{"test": "secret/judge", "status": "ok", "cpu_seconds": 0.01,
        "wall_seconds": 0.02, "memory_bytes": 1048576}]);
    let body = json!({"lease_token": lease, "timings": timings});
    let (status, answer) = s
        .post(
            &format!("/api/trials/{trial_id}/result"),
            &key,
            body.clone(),
        )
        .await;
    assert_eq!(
        (status, answer["state"].as_str()),
        (StatusCode::OK, Some("Completed"))
    );
    let (status, _) = s
        .post(&format!("/api/trials/{trial_id}/result"), &key, body)
        .await;
    assert_eq!(status, StatusCode::OK, "idempotent for the same token");
    let (_, view) = s.get(&format!("/api/trials/{trial_id}"), &token).await;
    assert_eq!(view["state"], "Completed");
    assert_eq!(view["timings"], timings);
    assert_eq!(
        trial_files(&s),
        0,
        "the package is deleted once the trial ends"
    );
    assert_eq!(
        s.http
            .get(url)
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::NOT_FOUND
    );
    s.stop().await;
}

async fn trial_lease_rules_match_jobs(backend: Backend) {
    let s = TestServer::start_with(backend, |c| c.delivery_cap = 2).await;
    let token = trial_token(&s).await;
    let (_, body) = create_trial(&s, &token, "c").await;
    let id = body["trial_id"].as_i64().unwrap();
    let (_, key) = s.runner("r").await;
    let (_, lease) = lease_of(&s.claim(&key, &["c"]).await.unwrap());
    let stale = json!({"lease_token": "feedfeedfeedfeedfeedfeedfeedfeed"});
    let (status, answer) = s
        .post(&format!("/api/trials/{id}/lease"), &key, stale)
        .await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (StatusCode::CONFLICT, Some("lease.lost"))
    );
    assert_eq!(
        s.metric("judge_trial_stale_result_dropped_total").await,
        1.0
    );
    assert_eq!(
        s.metric("judge_stale_result_dropped_total").await,
        0.0,
        "trials are counted apart"
    );
    let (status, _) = s
        .post(
            &format!("/api/trials/{id}/progress"),
            &key,
            json!({"lease_token": lease, "done": 1, "total": 2}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    s.advance(61);
    let reaped = s.reap().await;
    assert_eq!(reaped.trials.len(), 1);
    assert_eq!(
        s.get(&format!("/api/trials/{id}"), &token).await.1["state"],
        "Queued"
    );
    let (_, lease) = lease_of(&s.claim(&key, &["c"]).await.unwrap());
    let (status, answer) = s
        .post(
            &format!("/api/trials/{id}/release"),
            &key,
            json!({"lease_token": lease}),
        )
        .await;
    assert_eq!(
        (status, answer["state"].as_str()),
        (StatusCode::OK, Some("Queued"))
    );
    let (_, lease) = lease_of(&s.claim(&key, &["c"]).await.unwrap());
    let failure =
        json!({"lease_token": lease, "reason": "package.checksum_mismatch", "retryable": false});
    let (status, answer) = s
        .post(&format!("/api/trials/{id}/failure"), &key, failure)
        .await;
    assert_eq!(
        (status, answer["state"].as_str()),
        (StatusCode::OK, Some("Failed"))
    );
    let (_, view) = s.get(&format!("/api/trials/{id}"), &token).await;
    assert_eq!(
        (view["state"].as_str(), view["failure_reason"].as_str()),
        (Some("Failed"), Some("package.checksum_mismatch"))
    );
    assert_eq!(
        trial_files(&s),
        0,
        "a failed trial's package is deleted too"
    );
    s.stop().await;
}

async fn trials_never_appear_in_jobs_submissions_results_or_counts(backend: Backend) {
    let s = TestServer::start(backend).await;
    let token = trial_token(&s).await;
    for _ in 0..3 {
        create_trial(&s, &token, "c").await;
    }
    let (_, key) = s.runner("r").await;
    let claim = s.claim(&key, &["c"]).await.unwrap();
    assert_eq!(claim["kind"], "trial");
    let text = s
        .http
        .get(s.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for state in ["Queued", "Running", "Completed"] {
        let line = format!("judge_jobs{{state=\"{state}\"}}");
        assert_eq!(server_common::metric_value(&text, &line), 0.0, "{line}");
    }
    assert_eq!(
        server_common::metric_value(&text, "judge_claims_total"),
        0.0
    );
    assert_eq!(
        server_common::metric_value(&text, "judge_trial_claims_total"),
        1.0
    );
    assert_eq!(
        server_common::metric_value(&text, "judge_trials{state=\"Queued\"}"),
        2.0
    );
    for id in 1..=3 {
        assert_eq!(
            s.get(&format!("/api/jobs/{id}"), MANAGER).await.0,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            s.get(&format!("/api/submissions/{id}"), MANAGER).await.0,
            StatusCode::NOT_FOUND
        );
    }
    let (problem, ..) = s.problem().await;
    let (sub, job) = s.submit(problem, "c").await;
    let (_, view) = s.get(&format!("/api/submissions/{sub}"), MANAGER).await;
    assert_eq!(view["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(view["jobs"][0]["id"], job);
    s.stop().await;
}

//! The lease rules (CONTRACT §4) on SQLite and PostgreSQL: the claim and its four
//! filters, the fence on every lease-bearing call, acknowledgement, expiry and
//! re-claim, the reaper with refunds and the delivery cap, revocation. Time is
//! moved with the test's clock; nothing sleeps. (How a lease ends: server_outcomes.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod server_common;

use judge_runner::server::Clock as _;
use reqwest::StatusCode;
use serde_json::json;
use server_common::{Backend, MANAGER, TestServer, lease_of};

backend_tests!(
    claim_hands_out_the_oldest_job_with_its_lease_and_package,
    claim_language_allowed,
    claim_language_denied,
    claim_waits_behind_a_running_sibling,
    concurrent_claims_never_run_two_attempts_of_a_submission,
    revoked_runner_is_refused_and_its_jobs_requeued,
    lease_calls_acknowledge_once_and_bump_row_version,
    stale_token_gets_lease_lost_changes_nothing_and_is_counted,
    expired_lease_reclaimed_then_late_result_is_lost_and_newer_stands,
    lease_call_before_expiry_allowed,
    lease_call_after_expiry_denied_before_any_sweep,
    reaper_refunds_only_unacknowledged_claims_three_times,
    delivery_cap_fails_the_job_with_deliveries_exhausted,
);

async fn claim_hands_out_the_oldest_job_with_its_lease_and_package(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, version, sha) = s.problem().await;
    let (sub1, job1) = s.submit(problem, "python3").await;
    let (_, job2) = s.submit(problem, "python3").await;
    let (runner_id, key) = s.runner("r1").await;
    let now = s.clock.now_ms();
    let claim = s.claim(&key, &["python3"]).await.unwrap();
    assert_eq!(claim["kind"], "job");
    assert_eq!(claim["job_id"], job1);
    assert_eq!(claim["submission_id"], sub1);
    assert_eq!(claim["attempt"], 1);
    assert_eq!(claim["problem_version_id"], version);
    assert_eq!(claim["lease_seconds"], 60);
    let expires =
        chrono::DateTime::parse_from_rfc3339(claim["lease_expires_at"].as_str().unwrap()).unwrap();
    assert_eq!(expires.timestamp_millis(), now + 60_000);
    assert_eq!(claim["package"]["sha256"], sha.as_str());
    let url = claim["package"]["url"].as_str().unwrap();
    assert_eq!(
        url,
        s.url(&format!("/api/packages/{sha}")),
        "absolute, from the Host header"
    );
    assert!(claim["package"]["size"].as_u64().unwrap() > 0);
    assert_eq!(claim["time_limit"], serde_json::Value::Null);
    assert_eq!(claim["language"], "python3");
    assert_eq!(claim["files"][0]["name"], "hello.py");
    assert_eq!(claim["files"][0]["content"], "print('Hello World!')\n");
    assert!(claim["lease_token"].as_str().unwrap().len() >= 32);

    let job = s.job(job1).await;
    assert_eq!(job["state"], "Running");
    assert_eq!(job["runner_id"], runner_id);
    assert_eq!(job["deliveries"], 1);
    assert_eq!(job["acknowledged_at"], serde_json::Value::Null);
    assert_eq!(job["row_version"], 0, "the claim does not bump row_version");
    let next = s.claim(&key, &["python3"]).await.unwrap();
    assert_eq!(next["job_id"], job2, "oldest first");
    assert!(
        s.claim(&key, &["python3"]).await.is_none(),
        "204 when nothing is claimable"
    );
    assert_eq!(s.metric("judge_claims_total").await, 2.0);
    s.stop().await;
}

async fn claim_language_allowed(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "cpp").await;
    let (_, key) = s.runner("r").await;
    let claim = s.claim(&key, &["c", "cpp"]).await.unwrap();
    assert_eq!(claim["job_id"], job);
    s.stop().await;
}

async fn claim_language_denied(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "cpp").await;
    let (_, key) = s.runner("r").await;
    assert!(s.claim(&key, &["c", "python3"]).await.is_none());
    assert_eq!(s.job(job).await["state"], "Queued");
    s.stop().await;
}

async fn claim_waits_behind_a_running_sibling(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (sub, job1) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let (_, token1) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    let (status, rejudged) = s
        .post(
            &format!("/api/submissions/{sub}/rejudge"),
            MANAGER,
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{rejudged}");
    assert_eq!(rejudged["attempt"], 2);
    let job2 = rejudged["job_id"].as_i64().unwrap();
    assert_eq!(
        s.job(job1).await["state"],
        "Running",
        "a running attempt is left to finish"
    );
    assert!(
        s.claim(&key, &["python3"]).await.is_none(),
        "denied: attempt 1 is still running"
    );
    let (status, _) = s.result(job1, &token1, &key, "Accepted").await;
    assert_eq!(status, StatusCode::OK);
    let claim = s.claim(&key, &["python3"]).await.unwrap();
    assert_eq!(claim["job_id"], job2, "allowed once attempt 1 finished");
    assert_eq!(claim["attempt"], 2);
    s.stop().await;
}

async fn concurrent_claims_never_run_two_attempts_of_a_submission(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (sub, job1) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    s.claim(&key, &["python3"]).await.unwrap();
    let (_, a2) = s
        .post(
            &format!("/api/submissions/{sub}/rejudge"),
            MANAGER,
            json!({}),
        )
        .await;
    let job2 = a2["job_id"].as_i64().unwrap();
    s.advance(61);
    s.reap().await;
    // Both attempts are Queued now: attempt 1 by expiry, attempt 2 by the rejudge.
    assert_eq!(s.job(job1).await["state"], "Queued");
    assert_eq!(s.job(job2).await["state"], "Queued");
    let claims = (0..8).map(|_| s.post("/api/jobs/claim", &key, json!({"languages": ["python3"]})));
    let answers = futures_util::future::join_all(claims).await;
    let claimed: Vec<_> = answers
        .iter()
        .filter(|(st, _)| *st == StatusCode::OK)
        .collect();
    assert_eq!(claimed.len(), 1, "one attempt at a time: {answers:?}");
    assert_eq!(claimed[0].1["job_id"], job1, "the older attempt first");
    assert_eq!(s.job(job2).await["state"], "Queued");
    s.stop().await;
}

async fn revoked_runner_is_refused_and_its_jobs_requeued(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (a_id, a_key) = s.runner("a").await;
    let (_, b_key) = s.runner("b").await;
    let (_, token) = lease_of(&s.claim(&a_key, &["python3"]).await.unwrap());
    let (status, body) = s
        .call("DELETE", &format!("/api/runners/{a_id}"), MANAGER, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["requeued"], 1);
    let view = s.job(job).await;
    assert_eq!(view["state"], "Queued");
    assert_eq!(
        view["deliveries"], 0,
        "an unacknowledged claim is refunded, as on expiry"
    );
    let (status, body) = s
        .post("/api/jobs/claim", &a_key, json!({"languages": ["python3"]}))
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("auth.revoked"))
    );
    let (status, body) = s.result(job, &token, &a_key, "Accepted").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("auth.revoked"))
    );
    let claim = s.claim(&b_key, &["python3"]).await.unwrap();
    assert_eq!(
        claim["job_id"], job,
        "another runner takes the requeued job"
    );
    let (status, _) = s.call("DELETE", "/api/runners/999999", MANAGER, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    s.stop().await;
}

async fn lease_calls_acknowledge_once_and_bump_row_version(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    s.advance(5);
    let first_ack = s.clock.now_ms();
    let (status, body) = s.renew(job, &key, &token).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let expires =
        chrono::DateTime::parse_from_rfc3339(body["lease_expires_at"].as_str().unwrap()).unwrap();
    assert_eq!(
        expires.timestamp_millis(),
        first_ack + 60_000,
        "renewed by lease_seconds"
    );
    let view = s.job(job).await;
    let acked =
        chrono::DateTime::parse_from_rfc3339(view["acknowledged_at"].as_str().unwrap()).unwrap();
    assert_eq!(acked.timestamp_millis(), first_ack);
    assert_eq!(view["row_version"], 1);

    s.advance(5);
    let (status, body) = s
        .post(
            &format!("/api/jobs/{job}/lease"),
            &key,
            json!({"lease_token": token, "seconds": 10}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let expires =
        chrono::DateTime::parse_from_rfc3339(body["lease_expires_at"].as_str().unwrap()).unwrap();
    assert_eq!(
        expires.timestamp_millis(),
        s.clock.now_ms() + 10_000,
        "renewed by seconds"
    );
    let (status, _) = s
        .post(
            &format!("/api/jobs/{job}/progress"),
            &key,
            json!({"lease_token": token, "done": 3, "total": 7}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let view = s.job(job).await;
    assert_eq!(view["progress"], json!({"done": 3, "total": 7}));
    assert_eq!(view["row_version"], 3);
    assert_eq!(view["lease_seconds"], 60, "lease_seconds stays as granted");
    let acked =
        chrono::DateTime::parse_from_rfc3339(view["acknowledged_at"].as_str().unwrap()).unwrap();
    assert_eq!(
        acked.timestamp_millis(),
        first_ack,
        "set by the first lease-bearing call only"
    );
    let expires =
        chrono::DateTime::parse_from_rfc3339(view["lease_expires_at"].as_str().unwrap()).unwrap();
    assert_eq!(
        expires.timestamp_millis(),
        s.clock.now_ms() + 60_000,
        "progress renews by lease_seconds"
    );
    s.stop().await;
}

async fn stale_token_gets_lease_lost_changes_nothing_and_is_counted(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    s.claim(&key, &["python3"]).await.unwrap();
    let before = s.job(job).await;
    let bad = "0000000000000000000000000000dead";
    let calls = [
        ("lease", json!({"lease_token": bad})),
        (
            "progress",
            json!({"lease_token": bad, "done": 1, "total": 2}),
        ),
        ("release", json!({"lease_token": bad})),
        (
            "failure",
            json!({"lease_token": bad, "reason": "sandbox.failed", "retryable": true}),
        ),
        (
            "result",
            json!({"lease_token": bad, "score": 0.0, "max_score": 1.0, "verdict": "Wrong Answer"}),
        ),
    ];
    for (call, body) in calls {
        let (status, answer) = s.post(&format!("/api/jobs/{job}/{call}"), &key, body).await;
        assert_eq!(status, StatusCode::CONFLICT, "{call}: {answer}");
        assert_eq!(answer["error"], "lease.lost", "{call}");
        assert!(answer["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    let resp = s
        .http
        .put(s.url(&format!("/api/jobs/{job}/files/details")))
        .bearer_auth(&key)
        .header("X-Lease-Token", bad)
        .body("[]")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    assert_eq!(
        s.job(job).await,
        before,
        "a lease.lost call changes nothing"
    );
    assert_eq!(s.metric("judge_stale_result_dropped_total").await, 6.0);
    s.stop().await;
}

async fn expired_lease_reclaimed_then_late_result_is_lost_and_newer_stands(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (_, a) = s.runner("a").await;
    let (_, b) = s.runner("b").await;
    let (_, old_token) = lease_of(&s.claim(&a, &["python3"]).await.unwrap());
    let (status, _) = s.renew(job, &a, &old_token).await;
    assert_eq!(status, StatusCode::OK);
    s.advance(59);
    assert!(s.reap().await.jobs.is_empty(), "not expired yet");
    s.advance(2);
    let reaped = s.reap().await;
    assert_eq!(reaped.jobs.len(), 1);
    assert_eq!(s.job(job).await["state"], "Queued");
    let (_, new_token) = lease_of(&s.claim(&b, &["python3"]).await.unwrap());
    assert_ne!(old_token, new_token);
    assert_eq!(
        s.job(job).await["acknowledged_at"],
        serde_json::Value::Null,
        "cleared by the re-claim"
    );
    let (status, body) = s.result(job, &old_token, &a, "Wrong Answer").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("lease.lost"))
    );
    let (status, _) = s.result(job, &new_token, &b, "Accepted").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = s.result(job, &old_token, &a, "Wrong Answer").await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "still lost after the newer result"
    );
    let view = s.job(job).await;
    assert_eq!(
        view["result"]["verdict"], "Accepted",
        "the newer result stands"
    );
    assert_eq!(view["deliveries"], 2);
    assert_eq!(s.metric("judge_leases_expired_total").await, 1.0);
    assert_eq!(s.metric("judge_stale_result_dropped_total").await, 2.0);
    s.stop().await;
}

/// Twin of the next test: a call one second before `lease_expires_at` holds.
async fn lease_call_before_expiry_allowed(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    s.advance(59);
    let (status, body) = s.result(job, &token, &key, "Accepted").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(s.job(job).await["state"], "Completed");
    s.stop().await;
}

/// A lease past its `lease_expires_at` is dead even though no reaper has swept it
/// yet: every lease-bearing call is `409 lease.lost`, changes nothing and is
/// counted; the sweep then requeues the job.
async fn lease_call_after_expiry_denied_before_any_sweep(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    s.advance(60);
    let calls = [
        ("lease", json!({"lease_token": token})),
        (
            "progress",
            json!({"lease_token": token, "done": 1, "total": 2}),
        ),
        ("release", json!({"lease_token": token})),
        (
            "failure",
            json!({"lease_token": token, "reason": "sandbox.failed", "retryable": true}),
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
    let (status, answer) = s.result(job, &token, &key, "Accepted").await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (StatusCode::CONFLICT, Some("lease.lost"))
    );
    let view = s.job(job).await;
    assert_eq!(view["state"], "Running", "nothing changed: not swept yet");
    assert_eq!(view["acknowledged_at"], serde_json::Value::Null);
    assert_eq!(view["row_version"], 0);
    assert_eq!(view["result"], serde_json::Value::Null);
    assert_eq!(s.metric("judge_stale_result_dropped_total").await, 5.0);
    s.reap().await;
    assert_eq!(s.job(job).await["state"], "Queued");
    s.stop().await;
}

async fn reaper_refunds_only_unacknowledged_claims_three_times(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    for round in 1..=4 {
        s.claim(&key, &["python3"]).await.unwrap();
        s.advance(61);
        s.reap().await;
        let view = s.job(job).await;
        assert_eq!(view["state"], "Queued", "round {round}");
        let refunded = round <= 3;
        assert_eq!(view["refunds"], round.min(3), "round {round}");
        assert_eq!(
            view["deliveries"],
            if refunded { 0 } else { 1 },
            "round {round}"
        );
    }
    assert_eq!(s.metric("judge_refunds_total").await, 3.0);
    assert_eq!(s.metric("judge_leases_expired_total").await, 4.0);

    // Twin: an acknowledged claim that expires is not refunded.
    let (_, job2) = s.submit(problem, "python3").await;
    let (id, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    assert_eq!(id, job);
    let (_, token2) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    for (j, t) in [(job, &token), (job2, &token2)] {
        let (status, _) = s.renew(j, &key, t).await;
        assert_eq!(status, StatusCode::OK);
    }
    s.advance(61);
    s.reap().await;
    let view = s.job(job2).await;
    assert_eq!(
        (view["deliveries"].as_i64(), view["refunds"].as_i64()),
        (Some(1), Some(0))
    );
    s.stop().await;
}

async fn delivery_cap_fails_the_job_with_deliveries_exhausted(backend: Backend) {
    let s = TestServer::start_with(backend, |c| c.delivery_cap = 3).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    for round in 1..=3 {
        let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
        let (status, _) = s.renew(job, &key, &token).await;
        assert_eq!(status, StatusCode::OK);
        s.advance(61);
        s.reap().await;
        let view = s.job(job).await;
        if round < 3 {
            assert_eq!(view["state"], "Queued", "round {round}: under the cap");
            assert_eq!(view["failure_reason"], serde_json::Value::Null);
        } else {
            assert_eq!(view["state"], "Failed");
            assert_eq!(view["failure_reason"], "deliveries.exhausted");
            assert_eq!(view["result"], serde_json::Value::Null);
        }
    }
    assert!(
        s.claim(&key, &["python3"]).await.is_none(),
        "Failed never changes again"
    );
    let (status, body) = s
        .post(&format!("/api/jobs/{job}/cancel"), MANAGER, json!({}))
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("attempt.finished"))
    );
    assert_eq!(s.metric("judge_deliveries_exhausted_total").await, 1.0);
    s.stop().await;
}

//! The claim under a deep queue, on SQLite and PostgreSQL: a rejudged attempt
//! waiting behind a running sibling is claimable the moment that sibling ends, by
//! every path that ends it, and not before (the claimable index never holds it
//! while it waits); the claim's languages are checked (422); the metrics gauges
//! follow every state change; a mass expiry is swept in batches; a claim storm
//! far beyond the connection pool is answered, never with a 5xx.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod server_common;

use reqwest::StatusCode;
use serde_json::{Value, json};
use server_common::{Backend, MANAGER, TestServer, lease_of};

backend_tests!(
    waiter_is_claimable_once_its_sibling_ends_by_any_path,
    waiter_stays_blocked_while_its_sibling_goes_back_to_the_queue,
    waiter_is_claimable_once_its_sibling_meets_the_delivery_cap,
    waiter_is_found_past_other_languages_and_in_id_order,
    claim_languages_are_checked,
    metrics_gauges_follow_every_state_change,
    mass_expiry_is_swept_in_batches,
    claim_storm_is_answered_by_the_pool,
);

/// How a Running attempt stops being Running.
#[derive(Debug, Clone, Copy)]
enum End {
    Result,
    FailureNotRetryable,
    Cancel,
    /// Each of these puts it back in the queue (live) when under the cap.
    Release,
    FailureRetryable,
    Expiry,
    Revoke,
}

/// Submits, claims attempt 1 (and acknowledges it by a renewal), rejudges:
/// `(submission, attempt-1 job, its token, attempt-2 job)`. Checks that the
/// waiting attempt is not claimable while attempt 1 runs.
async fn running_with_waiter(s: &TestServer, problem: i64, key: &str) -> (i64, i64, String, i64) {
    let (sub, first) = s.submit(problem, "python3").await;
    let claim = s
        .claim(key, &["python3"])
        .await
        .expect("attempt 1 claimable");
    let (job, token) = lease_of(&claim);
    assert_eq!(job, first);
    let (status, body) = s.renew(job, key, &token).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = s
        .post(
            &format!("/api/submissions/{sub}/rejudge"),
            MANAGER,
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let waiter = body["job_id"].as_i64().unwrap();
    assert_eq!(s.job(waiter).await["state"], "Queued");
    assert!(
        s.claim(key, &["python3"]).await.is_none(),
        "attempt 2 waits behind the running attempt 1"
    );
    (sub, job, token, waiter)
}

/// Ends (or requeues) `job` by `end`: the state it is in afterwards.
async fn end(s: &TestServer, end: End, job: i64, token: &str, key: &str, runner: i64) -> String {
    let lease = |extra: Value| {
        let mut body = json!({"lease_token": token});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let (status, body) = match end {
        End::Result => s.result(job, token, key, "Accepted").await,
        End::FailureNotRetryable => {
            s.post(
                &format!("/api/jobs/{job}/failure"),
                key,
                lease(json!({"reason": "disk on fire", "retryable": false})),
            )
            .await
        }
        End::FailureRetryable => {
            s.post(
                &format!("/api/jobs/{job}/failure"),
                key,
                lease(json!({"reason": "try again", "retryable": true})),
            )
            .await
        }
        End::Cancel => {
            s.post(&format!("/api/jobs/{job}/cancel"), MANAGER, json!({}))
                .await
        }
        End::Release => {
            s.post(&format!("/api/jobs/{job}/release"), key, lease(json!({})))
                .await
        }
        End::Expiry => {
            s.advance(61);
            let reaped = s.reap().await;
            assert!(reaped.jobs.iter().any(|r| r.id == job), "{reaped:?}");
            (StatusCode::OK, Value::Null)
        }
        End::Revoke => {
            s.call("DELETE", &format!("/api/runners/{runner}"), MANAGER, None)
                .await
        }
    };
    assert!(status.is_success(), "{end:?}: {status} {body}");
    s.job(job).await["state"].as_str().unwrap().to_string()
}

async fn waiter_is_claimable_once_its_sibling_ends_by_any_path(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    for how in [End::Result, End::FailureNotRetryable, End::Cancel] {
        let (runner, key) = s.runner("r").await;
        let (_, job, token, waiter) = running_with_waiter(&s, problem, &key).await;
        let state = end(&s, how, job, &token, &key, runner).await;
        assert_ne!(state, "Running", "{how:?}");
        assert_ne!(state, "Queued", "{how:?}");
        let claim = s
            .claim(&key, &["python3"])
            .await
            .unwrap_or_else(|| panic!("after {how:?} attempt 2 is claimable"));
        assert_eq!(claim["job_id"], waiter, "{how:?}");
        assert_eq!(claim["attempt"], 2, "{how:?}");
        let (_, token) = lease_of(&claim);
        let (status, body) = s.result(waiter, &token, &key, "Accepted").await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    s.stop().await;
}

async fn waiter_stays_blocked_while_its_sibling_goes_back_to_the_queue(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    for how in [
        End::Release,
        End::FailureRetryable,
        End::Expiry,
        End::Revoke,
    ] {
        let (runner, key) = s.runner("r").await;
        let (_, job, token, waiter) = running_with_waiter(&s, problem, &key).await;
        let state = end(&s, how, job, &token, &key, runner).await;
        assert_eq!(state, "Queued", "{how:?}");
        // A revoked key can claim no more: the next claims come from another.
        let (_, key) = s.runner("r2").await;
        let claim = s.claim(&key, &["python3"]).await.expect("attempt 1 again");
        assert_eq!(claim["job_id"], job, "{how:?}: attempt 1 first, oldest");
        assert!(
            s.claim(&key, &["python3"]).await.is_none(),
            "{how:?}: attempt 2 still waits while attempt 1 runs again"
        );
        let (_, token) = lease_of(&claim);
        let (status, body) = s.result(job, &token, &key, "Accepted").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let claim = s.claim(&key, &["python3"]).await.expect("then attempt 2");
        assert_eq!(claim["job_id"], waiter, "{how:?}");
        let (_, token) = lease_of(&claim);
        let (status, body) = s.result(waiter, &token, &key, "Accepted").await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    s.stop().await;
}

async fn waiter_is_claimable_once_its_sibling_meets_the_delivery_cap(backend: Backend) {
    // Cap 1: an acknowledged delivery that comes back is the last one.
    let s = TestServer::start_with(backend, |c| c.delivery_cap = 1).await;
    let (problem, ..) = s.problem().await;
    for how in [End::FailureRetryable, End::Expiry, End::Revoke] {
        let (runner, key) = s.runner("r").await;
        let (_, job, token, waiter) = running_with_waiter(&s, problem, &key).await;
        let state = end(&s, how, job, &token, &key, runner).await;
        assert_eq!(state, "Failed", "{how:?}");
        assert_eq!(
            s.job(job).await["failure_reason"],
            "deliveries.exhausted",
            "{how:?}"
        );
        let (_, key) = s.runner("r2").await;
        let claim = s
            .claim(&key, &["python3"])
            .await
            .unwrap_or_else(|| panic!("after {how:?} at the cap attempt 2 is claimable"));
        assert_eq!(claim["job_id"], waiter, "{how:?}");
        let (_, token) = lease_of(&claim);
        let (status, body) = s.result(waiter, &token, &key, "Accepted").await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    s.stop().await;
}

async fn waiter_is_found_past_other_languages_and_in_id_order(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, key) = s.runner("r").await;
    // A waiter (python3) behind a running attempt, then jobs in three languages.
    let (_, job, token, waiter) = running_with_waiter(&s, problem, &key).await;
    let mut queued = Vec::new();
    for language in ["cpp", "c", "java", "c", "cpp"] {
        queued.push((s.submit(problem, language).await.1, language));
    }
    // Oldest first across the offered languages; java is not offered.
    let offered = ["c", "cpp", "python3", "rust"];
    let mut got = Vec::new();
    while let Some(claim) = s.claim(&key, &offered).await {
        got.push(claim["job_id"].as_i64().unwrap());
    }
    let want: Vec<i64> = queued
        .iter()
        .filter(|(_, l)| *l != "java")
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(got, want, "oldest first, never the waiter, never java");
    let (status, body) = s.result(job, &token, &key, "Accepted").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let claim = s.claim(&key, &offered).await.expect("the waiter, now");
    assert_eq!(claim["job_id"], waiter);
    let claim = s.claim(&key, &["java", "java"]).await.expect("java");
    assert_eq!(claim["job_id"], queued[2].0);
    assert!(s.claim(&key, &offered).await.is_none());
    s.stop().await;
}

async fn claim_languages_are_checked(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, key) = s.runner("r").await;
    s.submit(problem, "c").await;
    let many: Vec<String> = (0..33).map(|i| format!("l{i}")).collect();
    for languages in [
        json!([]),
        json!([""]),
        json!(["c", "no such/language"]),
        json!(["x".repeat(33)]),
        json!(many),
    ] {
        let (status, body) = s
            .post("/api/jobs/claim", &key, json!({"languages": languages}))
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{languages}");
        assert_eq!(body["error"], "request.invalid", "{body}");
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    // Languages the Server does not accept (--languages): refused when nothing
    // else is offered, the message naming what it accepts; beside one it
    // accepts, harmless (they find nothing).
    for languages in [json!(["kotlin"]), json!(["kotlin", "cobol", "kotlin"])] {
        let (status, body) = s
            .post("/api/jobs/claim", &key, json!({"languages": languages}))
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{languages}");
        assert_eq!(body["error"], "language.unknown", "{body}");
        assert!(
            body["message"].as_str().unwrap().contains("python3"),
            "{body}"
        );
    }
    // An accepted language no job is in is an empty claim, not an error.
    assert!(s.claim(&key, &["java"]).await.is_none());
    assert!(s.claim(&key, &["kotlin", "c"]).await.is_some());
    s.stop().await;
}

async fn metrics_gauges_follow_every_state_change(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, key) = s.runner("r").await;
    let gauge = |state: &'static str| format!("judge_jobs{{state=\"{state}\"}}");
    let (sub, _) = s.submit(problem, "c").await;
    for _ in 0..3 {
        s.submit(problem, "c").await;
    }
    assert_eq!(s.metric(&gauge("Queued")).await, 4.0);
    let (job, token) = lease_of(&s.claim(&key, &["c"]).await.unwrap());
    assert_eq!(s.metric(&gauge("Queued")).await, 3.0);
    assert_eq!(s.metric(&gauge("Running")).await, 1.0);
    // Running attempt 1 of `sub`: a rejudge adds a Queued attempt 2.
    let (status, _) = s
        .post(
            &format!("/api/submissions/{sub}/rejudge"),
            MANAGER,
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(s.metric(&gauge("Queued")).await, 4.0);
    let (status, _) = s.result(job, &token, &key, "Accepted").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(s.metric(&gauge("Running")).await, 0.0);
    assert_eq!(s.metric(&gauge("Completed")).await, 1.0);
    // A second rejudge supersedes the Queued attempt 2.
    let (status, _) = s
        .post(
            &format!("/api/submissions/{sub}/rejudge"),
            MANAGER,
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(s.metric(&gauge("Superseded")).await, 1.0);
    assert_eq!(s.metric(&gauge("Queued")).await, 4.0);
    let (job, _) = lease_of(&s.claim(&key, &["c"]).await.unwrap());
    let (status, _) = s
        .post(&format!("/api/jobs/{job}/cancel"), MANAGER, json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(s.metric(&gauge("Cancelled")).await, 1.0);
    // Expired claims go back (reaper), at the cap they fail.
    let (job, _) = lease_of(&s.claim(&key, &["c"]).await.unwrap());
    s.advance(61);
    s.reap().await;
    assert_eq!(s.job(job).await["state"], "Queued");
    assert_eq!(s.metric(&gauge("Running")).await, 0.0);
    assert_eq!(s.metric(&gauge("Queued")).await, 3.0);
    assert_eq!(s.metric(&gauge("Failed")).await, 0.0);
    let mut sum = 0.0;
    for st in [
        "Queued",
        "Running",
        "Completed",
        "Failed",
        "Cancelled",
        "Superseded",
    ] {
        sum += s.metric(&gauge(st)).await;
    }
    assert_eq!(sum, 6.0, "four submissions, two rejudges: six attempts");
    s.stop().await;
}

async fn mass_expiry_is_swept_in_batches(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, key) = s.runner("r").await;
    let batch = usize::try_from(judge_runner::server::db::lease::REQUEUE_BATCH).unwrap();
    let n = batch + 7;
    for _ in 0..n {
        s.submit(problem, "c").await;
    }
    let mut claimed = Vec::new();
    while let Some(claim) = s.claim(&key, &["c"]).await {
        claimed.push(lease_of(&claim).0);
    }
    assert_eq!(claimed.len(), n);
    s.advance(61);
    let reaped = s.reap().await;
    let mut ids: Vec<i64> = reaped.jobs.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, claimed, "every expired lease, each once");
    assert!(reaped.jobs.iter().all(|r| r.refunded));
    assert_eq!(s.metric("judge_leases_expired_total").await, n as f64);
    assert_eq!(s.metric("judge_jobs{state=\"Queued\"}").await, n as f64);
    assert!(s.reap().await.jobs.is_empty());
    s.stop().await;
}

async fn claim_storm_is_answered_by_the_pool(backend: Backend) {
    // Two connections for hundreds of claims at once: they queue for the pool.
    let s = TestServer::start_with(backend, |c| c.max_connections = 2).await;
    let (problem, ..) = s.problem().await;
    let mut keys = Vec::new();
    for i in 0..8 {
        keys.push(s.runner(&format!("r{i}")).await.1);
    }
    let jobs = 40;
    for _ in 0..jobs {
        s.submit(problem, "c").await;
    }
    let calls = (0..400).map(|i| {
        let key = keys[i % keys.len()].clone();
        let languages = if i % 3 == 0 {
            vec!["java"]
        } else {
            vec!["c", "java"]
        };
        let s = &s;
        async move {
            s.post("/api/jobs/claim", &key, json!({"languages": languages}))
                .await
        }
    });
    let answers = futures_util::future::join_all(calls).await;
    let mut got = Vec::new();
    for (status, body) in answers {
        assert!(
            status == StatusCode::OK || status == StatusCode::NO_CONTENT,
            "{status} {body}"
        );
        if status == StatusCode::OK {
            got.push(body["job_id"].as_i64().unwrap());
        }
    }
    let mut unique = got.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), got.len(), "no job handed out twice");
    assert_eq!(got.len(), jobs, "every job handed out");
    s.stop().await;
}

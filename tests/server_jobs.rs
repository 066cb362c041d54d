//! Manager-side rules on SQLite and PostgreSQL: rejudge with its compare-and-set,
//! cancel, submission and job views, problem versions pinned onto Results,
//! packages stored content-addressed and streamed, attachments under the lease.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod server_common;

use reqwest::StatusCode;
use serde_json::{Value, json};
use server_common::{Backend, MANAGER, TestServer, lease_of, tar_gz};

backend_tests!(
    rejudge_supersedes_a_queued_sibling_and_leaves_a_running_one,
    rejudge_with_a_stale_expected_attempt_conflicts,
    cancel_queued_and_running_then_finished_refuses,
    submission_view_lists_attempts_oldest_first_with_latest_result,
    new_problem_version_is_pinned_onto_the_result,
    package_is_stored_by_digest_and_streamed_back,
    invalid_package_allowed_when_valid,
    invalid_package_denied,
    attachments_are_stored_replaced_and_served,
    submission_input_is_checked,
);

async fn rejudge_supersedes_a_queued_sibling_and_leaves_a_running_one(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (sub, job1) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    s.claim(&key, &["python3"]).await.unwrap();
    let rejudge = format!("/api/submissions/{sub}/rejudge");
    let (status, a2) = s
        .post(&rejudge, MANAGER, json!({"expected_attempt": 1}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{a2}");
    assert_eq!(
        (a2["submission_id"].as_i64(), a2["attempt"].as_i64()),
        (Some(sub), Some(2))
    );
    let job2 = a2["job_id"].as_i64().unwrap();
    // No body at all is a rejudge without a compare-and-set.
    let resp = s
        .http
        .post(s.url(&rejudge))
        .bearer_auth(MANAGER)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let a3: Value = resp.json().await.unwrap();
    assert_eq!(a3["attempt"], 3);
    let job2_view = s.job(job2).await;
    assert_eq!(
        job2_view["state"], "Superseded",
        "the Queued sibling is superseded"
    );
    assert_eq!(job2_view["row_version"], 1);
    assert_eq!(
        s.job(job1).await["state"],
        "Running",
        "the Running one is left to finish"
    );
    let (status, body) = s
        .post(&format!("/api/jobs/{job2}/cancel"), MANAGER, json!({}))
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("attempt.finished"))
    );
    let (status, _) = s
        .post("/api/submissions/424242/rejudge", MANAGER, json!({}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    s.stop().await;
}

async fn rejudge_with_a_stale_expected_attempt_conflicts(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (sub, _) = s.submit(problem, "python3").await;
    let rejudge = format!("/api/submissions/{sub}/rejudge");
    let (status, _) = s
        .post(&rejudge, MANAGER, json!({"expected_attempt": 1}))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, body) = s
        .post(&rejudge, MANAGER, json!({"expected_attempt": 1}))
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("attempt.conflict"))
    );
    let (status, body) = s.get(&format!("/api/submissions/{sub}"), MANAGER).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body["jobs"].as_array().unwrap().len(),
        2,
        "the conflict created nothing"
    );
    // Racing rejudges with the same expectation: exactly one wins.
    let bodies = (0..6).map(|_| s.post(&rejudge, MANAGER, json!({"expected_attempt": 2})));
    let answers = futures_util::future::join_all(bodies).await;
    let wins = answers
        .iter()
        .filter(|(st, _)| *st == StatusCode::CREATED)
        .count();
    let conflicts = answers
        .iter()
        .filter(|(st, _)| *st == StatusCode::CONFLICT)
        .count();
    assert_eq!((wins, conflicts), (1, 5), "{answers:?}");
    s.stop().await;
}

async fn cancel_queued_and_running_then_finished_refuses(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, queued) = s.submit(problem, "python3").await;
    let (status, view) = s
        .post(&format!("/api/jobs/{queued}/cancel"), MANAGER, json!({}))
        .await;
    assert_eq!(
        (status, view["state"].as_str()),
        (StatusCode::OK, Some("Cancelled"))
    );
    let (status, body) = s
        .post(&format!("/api/jobs/{queued}/cancel"), MANAGER, json!({}))
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("attempt.finished"))
    );

    let (_, running) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    let (status, _) = s
        .post(&format!("/api/jobs/{running}/cancel"), MANAGER, json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = s.result(running, &token, &key, "Accepted").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("lease.lost"))
    );
    assert_eq!(s.job(running).await["result"], Value::Null);

    let (_, done) = s.submit(problem, "python3").await;
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    assert_eq!(
        s.result(done, &token, &key, "Accepted").await.0,
        StatusCode::OK
    );
    let (status, body) = s
        .post(&format!("/api/jobs/{done}/cancel"), MANAGER, json!({}))
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("attempt.finished"))
    );
    assert_eq!(s.job(done).await["state"], "Completed");
    let (status, body) = s.post("/api/jobs/777777/cancel", MANAGER, json!({})).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
    s.stop().await;
}

async fn submission_view_lists_attempts_oldest_first_with_latest_result(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (sub, job1) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    assert_eq!(
        s.result(job1, &token, &key, "Wrong Answer").await.0,
        StatusCode::OK
    );
    let (_, a2) = s
        .post(
            &format!("/api/submissions/{sub}/rejudge"),
            MANAGER,
            json!({}),
        )
        .await;
    let job2 = a2["job_id"].as_i64().unwrap();
    let (status, view) = s.get(&format!("/api/submissions/{sub}"), MANAGER).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(view["submission_id"], sub);
    assert_eq!(view["problem_id"], problem);
    assert_eq!(view["language"], "python3");
    let ids: Vec<_> = view["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![job1, job2]);
    assert_eq!(
        view["result"]["verdict"], "Wrong Answer",
        "latest Result while attempt 2 is queued"
    );
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    assert_eq!(
        s.result(job2, &token, &key, "Accepted").await.0,
        StatusCode::OK
    );
    let (_, view) = s.get(&format!("/api/submissions/{sub}"), MANAGER).await;
    assert_eq!(view["result"]["verdict"], "Accepted");
    assert_eq!(view["result"]["evaluation_job_id"], job2);
    assert_eq!(view["jobs"][0]["result"]["verdict"], "Wrong Answer");
    for field in [
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
    ] {
        assert!(
            view["jobs"][0].get(field).is_some(),
            "job object lacks {field}"
        );
    }
    let (status, _) = s.get("/api/submissions/999999", MANAGER).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    s.stop().await;
}

async fn new_problem_version_is_pinned_onto_the_result(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, v1, _) = s.problem().await;
    let (sub, job1) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    let pkg = tar_gz(&[
        ("problem.yaml", b"name: hello v2\n"),
        ("data/secret/1.in", b""),
        ("data/secret/1.ans", b"x\n"),
    ]);
    let (status, body) = s
        .upload(pkg, &format!("?problem_id={problem}&time_limit=2.5"))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["problem_id"], problem);
    let v2 = body["problem_version_id"].as_i64().unwrap();
    assert_ne!(v1, v2);
    assert_eq!(
        s.result(job1, &token, &key, "Accepted").await.0,
        StatusCode::OK
    );
    let (_, a2) = s
        .post(
            &format!("/api/submissions/{sub}/rejudge"),
            MANAGER,
            json!({}),
        )
        .await;
    let job2 = a2["job_id"].as_i64().unwrap();
    let claim = s.claim(&key, &["python3"]).await.unwrap();
    assert_eq!(
        claim["problem_version_id"], v2,
        "a rejudge runs on the latest version"
    );
    assert_eq!(
        claim["time_limit"], 2.5,
        "the version's time limit travels in the claim"
    );
    let (_, token) = lease_of(&claim);
    assert_eq!(
        s.result(job2, &token, &key, "Accepted").await.0,
        StatusCode::OK
    );
    assert_eq!(s.job(job1).await["result"]["problem_version_id"], v1);
    assert_eq!(s.job(job2).await["result"]["problem_version_id"], v2);
    let (status, _) = s
        .upload(server_common::hello_package(), "?problem_id=555555")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = s
        .upload(server_common::hello_package(), "?time_limit=-1")
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("request.invalid"))
    );
    s.stop().await;
}

async fn package_is_stored_by_digest_and_streamed_back(backend: Backend) {
    let s = TestServer::start(backend).await;
    let bytes = server_common::hello_package();
    let (_, _, sha) = s.problem().await;
    let expected = {
        use sha2::Digest as _;
        hex::encode(sha2::Sha256::digest(&bytes))
    };
    assert_eq!(sha, expected);
    let stored =
        s.db.dir()
            .join("storage/packages")
            .join(format!("{sha}.tar.gz"));
    assert_eq!(std::fs::read(&stored).unwrap(), bytes);
    let (_, key) = s.runner("r").await;
    let resp = s
        .http
        .get(s.url(&format!("/api/packages/{sha}")))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        resp.headers()["content-length"],
        bytes.len().to_string().as_str()
    );
    assert_eq!(resp.bytes().await.unwrap().as_ref(), bytes.as_slice());
    // The same package again is one file.
    let (_, _, sha_again) = s.problem().await;
    assert_eq!(sha_again, sha);
    let tmp_left = std::fs::read_dir(s.db.dir().join("storage/tmp"))
        .unwrap()
        .count();
    assert_eq!(tmp_left, 0, "no temp file left behind");
    let missing = format!("/api/packages/{}", "0".repeat(64));
    assert_eq!(s.get(&missing, &key).await.0, StatusCode::NOT_FOUND);
    assert_eq!(
        s.get("/api/packages/..%2F..%2Fetc%2Fpasswd", &key).await.0,
        StatusCode::NOT_FOUND
    );
    let resp = s
        .http
        .get(s.url(&format!("/api/packages/{sha}")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    s.stop().await;
}

async fn invalid_package_allowed_when_valid(backend: Backend) {
    let s = TestServer::start(backend).await;
    for pkg in [
        tar_gz(&[
            ("problem.yaml", b"name: x\n"),
            ("data/secret/a.in", b"1\n"),
            ("data/secret/a.ans", b"1\n"),
        ]),
        tar_gz(&[
            ("top/problem.yaml", b"name: x\n"),
            ("top/data/secret/a.in", b"1\n"),
            ("top/data/secret/a.ans", b"1\n"),
        ]),
        tar_gz(&[
            ("./data/sample/1.in", b"1\n"),
            ("./data/sample/1.ans", b"1\n"),
        ]),
    ] {
        let (status, body) = s.upload(pkg, "").await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    s.stop().await;
}

async fn invalid_package_denied(backend: Backend) {
    let s = TestServer::start(backend).await;
    let not_gzip = b"this is not a tarball".to_vec();
    let no_problem = tar_gz(&[("README", b"hi\n")]);
    let two_tops = tar_gz(&[("a/problem.yaml", b"x"), ("b/problem.yaml", b"y")]);
    // Well-formed archives whose content is not a judgeable problem.
    let no_tests = tar_gz(&[("problem.yaml", b"name: x\n")]);
    let missing_answer = tar_gz(&[("problem.yaml", b"name: x\n"), ("data/secret/a.in", b"1\n")]);
    for (what, pkg) in [
        ("not gzip", not_gzip),
        ("no problem", no_problem),
        ("two tops", two_tops),
        ("no tests", no_tests),
        ("missing answer", missing_answer),
    ] {
        let (status, body) = s.upload(pkg, "").await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{what}: {body}");
        assert_eq!(body["error"], "package.invalid", "{what}");
        assert!(
            body["message"].as_str().unwrap().contains("package"),
            "{what}: {body}"
        );
    }
    assert_eq!(
        std::fs::read_dir(s.db.dir().join("storage/packages"))
            .unwrap()
            .count(),
        0
    );
    assert_eq!(
        std::fs::read_dir(s.db.dir().join("storage/tmp"))
            .unwrap()
            .count(),
        0
    );
    s.stop().await;
}

async fn attachments_are_stored_replaced_and_served(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let (_, job) = s.submit(problem, "python3").await;
    let (_, key) = s.runner("r").await;
    let (_, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    let put = |name: &str, token: Option<&str>, body: &'static [u8]| {
        let mut req = s
            .http
            .put(s.url(&format!("/api/jobs/{job}/files/{name}")))
            .bearer_auth(&key)
            .body(body);
        if let Some(t) = token {
            req = req.header("X-Lease-Token", t);
        }
        req.send()
    };
    let resp = put("details", Some(&token), b"[{\"name\":\"1\"}]")
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        resp.json::<Value>().await.unwrap(),
        json!({"name": "details", "size": 14})
    );
    assert_eq!(
        put("log", Some(&token), b"").await.unwrap().status(),
        StatusCode::OK
    );
    assert_eq!(
        put("details", Some(&token), b"[]").await.unwrap().status(),
        StatusCode::OK,
        "replaced"
    );
    assert_eq!(
        put("evil", Some(&token), b"x").await.unwrap().status(),
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        put("details", None, b"x").await.unwrap().status(),
        StatusCode::BAD_REQUEST
    );
    let get = |name: &str| {
        s.http
            .get(s.url(&format!("/api/jobs/{job}/files/{name}")))
            .bearer_auth(MANAGER)
            .send()
    };
    let resp = get("details").await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.bytes().await.unwrap().as_ref(), b"[]");
    assert_eq!(get("log").await.unwrap().bytes().await.unwrap().len(), 0);
    assert_eq!(
        get("nothing").await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    let view = s.job(job).await;
    assert_eq!(view["files"], json!(["details", "log"]));
    assert!(
        view["acknowledged_at"].is_string(),
        "an attachment is a lease-bearing call"
    );
    assert_eq!(
        s.result(job, &token, &key, "Accepted").await.0,
        StatusCode::OK
    );
    let resp = put("details", Some(&token), b"late").await.unwrap();
    assert_eq!(
        resp.status(),
        StatusCode::CONFLICT,
        "no attachment after the lease ended"
    );
    assert_eq!(
        get("details")
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
            .as_ref(),
        b"[]"
    );
    s.stop().await;
}

async fn submission_input_is_checked(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (problem, ..) = s.problem().await;
    let bad = [
        json!({"problem_id": problem, "language": "c", "files": []}),
        json!({"problem_id": problem, "language": "", "files": [{"name": "a.c", "content": ""}]}),
        json!({"problem_id": problem, "language": "c", "files": [{"name": "../a.c", "content": ""}]}),
        json!({"problem_id": problem, "language": "c", "files": [{"name": "a.c"}]}),
        json!({"problem_id": problem, "language": "c", "files": [{"name": "a.c", "content_base64": "!!"}]}),
        json!({"problem_id": problem, "language": "c", "files": [{"name": "a.c", "content": ""}], "typo": 1}),
    ];
    for body in bad {
        let (status, answer) = s.post("/api/submissions", MANAGER, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body} -> {answer}");
        assert_eq!(answer["error"], "request.invalid");
    }
    let (status, _) = s
        .post(
            "/api/submissions",
            MANAGER,
            json!({"problem_id": 31337, "language": "c",
            "files": [{"name": "a.c", "content": ""}]}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Bytes that are not UTF-8 travel as base64 and come back the same way.
    let body = json!({"problem_id": problem, "language": "c",
        "files": [{"name": "a.bin", "content_base64": "/wA="}]});
    let (status, _) = s.post("/api/submissions", MANAGER, body).await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, key) = s.runner("r").await;
    let claim = s.claim(&key, &["c"]).await.unwrap();
    assert_eq!(
        claim["files"],
        json!([{"name": "a.bin", "content_base64": "/wA="}])
    );
    s.stop().await;
}

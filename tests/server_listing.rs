//! The listing routes and token scopes of CONTRACT §7 on SQLite and PostgreSQL:
//! each scope admits exactly its routes; `GET /api/jobs` and `/api/submissions`
//! filter and page by keyset without duplicates or gaps while jobs arrive;
//! `GET /api/runners` shows what a Runner last told the Server and the jobs it
//! holds; `GET /api/problems` shows versions; `GET /api/queue` counts; bad queries
//! are 400 `request.invalid`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod server_common;

use std::collections::{BTreeSet, HashSet};

use reqwest::StatusCode;
use serde_json::{Value, json};
use server_common::{Backend, MANAGER, TestServer, hello_package, lease_of};

backend_tests!(
    each_scope_admits_exactly_its_routes,
    jobs_filter_by_every_field,
    pages_have_no_duplicates_or_gaps_while_jobs_arrive,
    submissions_list_their_latest_attempt,
    runners_show_last_heard_languages_version_and_held_jobs,
    problems_list_their_versions,
    queue_counts_states_languages_age_and_rates,
    bad_queries_are_400_request_invalid,
);

async fn token(s: &TestServer, scopes: &[&str]) -> String {
    let (status, body) = s
        .post("/api/tokens", MANAGER, json!({ "scopes": scopes }))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["token"].as_str().unwrap().to_string()
}

/// The ids of a page's items under `field`.
fn ids(page: &Value, field: &str) -> Vec<i64> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i[field].as_i64().unwrap())
        .collect()
}

/// Every id of a listing under `query`, walking the pages of `limit`.
async fn walk(s: &TestServer, path: &str, query: &str, field: &str, limit: u32) -> Vec<i64> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("{path}?limit={limit}{query}");
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let (status, page) = s.get(&url, MANAGER).await;
        assert_eq!(status, StatusCode::OK, "{url}: {page}");
        assert!(page["items"].as_array().unwrap().len() <= limit as usize);
        all.extend(ids(&page, field));
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return all,
        }
    }
}

async fn each_scope_admits_exactly_its_routes(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (_, key) = s.runner("r").await;
    let scopes = [
        "trial:run",
        "console:read",
        "problems:write",
        "submissions:write",
    ];
    let mut tokens = Vec::new();
    for scope in scopes {
        tokens.push((scope, token(&s, &[scope]).await));
    }
    // (method, path, the scope it needs; None: the manager only)
    let routes: [(&str, &str, Option<&str>); 17] = [
        ("GET", "/api/jobs", Some("console:read")),
        ("GET", "/api/submissions", Some("console:read")),
        ("GET", "/api/runners", Some("console:read")),
        ("GET", "/api/problems", Some("console:read")),
        ("GET", "/api/queue", Some("console:read")),
        ("GET", "/api/jobs/1", Some("console:read")),
        ("GET", "/api/submissions/1", Some("console:read")),
        ("GET", "/api/jobs/1/files/log", Some("console:read")),
        ("POST", "/api/problems", Some("problems:write")),
        ("POST", "/api/submissions", Some("submissions:write")),
        (
            "POST",
            "/api/submissions/1/rejudge",
            Some("submissions:write"),
        ),
        ("POST", "/api/jobs/1/cancel", Some("submissions:write")),
        ("POST", "/api/trials", Some("trial:run")),
        ("GET", "/api/trials/1", Some("trial:run")),
        ("POST", "/api/runners", None),
        ("DELETE", "/api/runners/1", None),
        ("POST", "/api/tokens", None),
    ];
    for (method, path, needs) in routes {
        let body = (method == "POST").then(|| json!({}));
        for (scope, tok) in &tokens {
            let (status, answer) = s.call(method, path, tok, body.clone()).await;
            if needs == Some(*scope) {
                assert!(
                    status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN,
                    "{method} {path} with {scope}: {status} {answer}"
                );
            } else {
                assert_eq!(
                    (status, answer["error"].as_str()),
                    (StatusCode::FORBIDDEN, Some("auth.forbidden")),
                    "{method} {path} with {scope}"
                );
            }
        }
        // A Runner key has none of these scopes.
        let (status, answer) = s.call(method, path, &key, body.clone()).await;
        assert_eq!(
            (status, answer["error"].as_str()),
            (StatusCode::FORBIDDEN, Some("auth.forbidden")),
            "{method} {path} with a runner key"
        );
    }
    // A token with several scopes has each; one in the query string is no token.
    let both = token(&s, &["console:read", "submissions:write"]).await;
    let (p, _, _) = s.problem().await;
    let body = json!({"problem_id": p, "language": "python3",
        "files": [{"name": "a.py", "content": "print(1)\n"}]});
    let (status, created) = s.post("/api/submissions", &both, body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let (status, page) = s.get("/api/jobs", &both).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ids(&page, "id"), [created["job_id"].as_i64().unwrap()]);
    let answer = s
        .http
        .get(s.url(&format!("/api/queue?token={both}")))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
    // Granting an unknown scope is refused.
    let (status, body) = s
        .post("/api/tokens", MANAGER, json!({"scopes": ["console:write"]}))
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("request.invalid"))
    );
    s.stop().await;
}

/// One job the test made, with what it knows of it.
#[derive(Debug, Clone)]
struct Made {
    job: i64,
    problem: i64,
    language: &'static str,
    runner: Option<i64>,
    state: &'static str,
    verdict: Option<&'static str>,
    batch: u8,
}

async fn jobs_filter_by_every_field(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (p1, _, _) = s.problem().await;
    let (p2, _, _) = s.problem().await;
    let (r1, k1) = s.runner("one").await;
    let (r2, k2) = s.runner("two").await;
    let mut made: Vec<Made> = Vec::new();
    let languages = ["c", "cpp", "python3"];
    for i in 0..18usize {
        let problem = if i % 2 == 0 { p1 } else { p2 };
        let language = languages[i % 3];
        let (_, job) = s.submit(problem, language).await;
        made.push(Made {
            job,
            problem,
            language,
            runner: None,
            state: "Queued",
            verdict: None,
            batch: 0,
        });
    }
    let t1 = s.state().now_ms();
    s.advance(60);
    for i in 0..6usize {
        let (_, job) = s.submit(p1, languages[i % 3]).await;
        made.push(Made {
            job,
            problem: p1,
            language: languages[i % 3],
            runner: None,
            state: "Queued",
            verdict: None,
            batch: 1,
        });
    }
    // Runner one takes the c jobs (oldest first) and judges four of them;
    // runner two takes two cpp jobs and holds them.
    let verdicts = [
        "Accepted",
        "Wrong Answer",
        "Accepted",
        "Time Limit Exceeded",
    ];
    for v in verdicts {
        let claim = s.claim(&k1, &["c"]).await.unwrap();
        let (job, lease) = lease_of(&claim);
        let (status, body) = s.result(job, &lease, &k1, v).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let m = made.iter_mut().find(|m| m.job == job).unwrap();
        (m.runner, m.state, m.verdict) = (Some(r1), "Completed", Some(v));
    }
    for _ in 0..2 {
        let (job, _) = lease_of(&s.claim(&k2, &["cpp"]).await.unwrap());
        let m = made.iter_mut().find(|m| m.job == job).unwrap();
        (m.runner, m.state) = (Some(r2), "Running");
    }
    let cancelled = made.iter().find(|m| m.state == "Queued").unwrap().job;
    let (status, _) = s
        .post(&format!("/api/jobs/{cancelled}/cancel"), MANAGER, json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    made.iter_mut().find(|m| m.job == cancelled).unwrap().state = "Cancelled";

    let expect = |keep: &dyn Fn(&Made) -> bool| -> Vec<i64> {
        let mut v: Vec<i64> = made.iter().filter(|m| keep(m)).map(|m| m.job).collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v
    };
    let since = chrono::DateTime::from_timestamp_millis(t1 + 1)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        .replace('+', "%2B");
    let cases: Vec<(String, Vec<i64>)> = vec![
        (String::new(), expect(&|_| true)),
        ("&state=Queued".into(), expect(&|m| m.state == "Queued")),
        ("&state=Running".into(), expect(&|m| m.state == "Running")),
        (
            "&state=Completed".into(),
            expect(&|m| m.state == "Completed"),
        ),
        (
            "&state=Cancelled".into(),
            expect(&|m| m.state == "Cancelled"),
        ),
        ("&state=Failed".into(), vec![]),
        ("&language=cpp".into(), expect(&|m| m.language == "cpp")),
        ("&language=rust".into(), vec![]),
        (format!("&problem_id={p2}"), expect(&|m| m.problem == p2)),
        (
            format!("&runner_id={r1}"),
            expect(&|m| m.runner == Some(r1)),
        ),
        (
            format!("&runner_id={r2}"),
            expect(&|m| m.runner == Some(r2)),
        ),
        (
            "&verdict=Accepted".into(),
            expect(&|m| m.verdict == Some("Accepted")),
        ),
        (
            "&verdict=Wrong%20Answer".into(),
            expect(&|m| m.verdict == Some("Wrong Answer")),
        ),
        ("&verdict=Nobody".into(), vec![]),
        (format!("&since={since}"), expect(&|m| m.batch == 1)),
        (format!("&until={since}"), expect(&|m| m.batch == 0)),
        (
            format!("&state=Queued&language=c&problem_id={p1}"),
            expect(&|m| m.state == "Queued" && m.language == "c" && m.problem == p1),
        ),
        (
            format!("&verdict=Accepted&problem_id={p1}&runner_id={r1}"),
            expect(&|m| m.verdict == Some("Accepted") && m.problem == p1),
        ),
    ];
    for (query, want) in cases {
        for limit in [2, 500] {
            let got = walk(&s, "/api/jobs", &query, "id", limit).await;
            assert_eq!(got, want, "GET /api/jobs?{query} (limit {limit})");
        }
    }
    // An item carries what the filters matched on.
    let (_, page) = s.get("/api/jobs?verdict=Accepted&limit=1", MANAGER).await;
    let item = &page["items"][0];
    assert_eq!(item["state"], "Completed");
    assert_eq!(item["verdict"], "Accepted");
    assert_eq!(item["runner_id"], r1);
    assert_eq!(item["language"], "c");
    assert_eq!(item["score"], 1.0);
    assert!(item["created_at"].as_str().unwrap().ends_with('Z'));
    s.stop().await;
}

async fn pages_have_no_duplicates_or_gaps_while_jobs_arrive(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (p, _, _) = s.problem().await;
    let mut before = Vec::new();
    for _ in 0..23 {
        before.push(s.submit(p, "python3").await.1);
    }
    before.reverse();
    // Walk by hand, submitting two jobs between pages.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let url = match &cursor {
            Some(c) => format!("/api/jobs?limit=5&cursor={c}"),
            None => "/api/jobs?limit=5".to_string(),
        };
        let (status, page) = s.get(&url, MANAGER).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        seen.extend(ids(&page, "id"));
        pages += 1;
        s.submit(p, "python3").await;
        s.submit(p, "c").await;
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(pages, 5);
    assert_eq!(
        seen, before,
        "every job present at the start, once, newest first"
    );
    // The same walk over submissions.
    let all = walk(&s, "/api/submissions", "", "submission_id", 7).await;
    let unique: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(unique.len(), all.len());
    assert_eq!(all.len(), 23 + 2 * 5);
    assert!(all.windows(2).all(|w| w[0] > w[1]));
    // A page exactly as long as what is left ends the walk (no empty last page).
    let (_, page) = s.get("/api/jobs?limit=500", MANAGER).await;
    assert_eq!(page["items"].as_array().unwrap().len(), 33);
    assert!(page["next_cursor"].is_null());
    let (_, page) = s.get("/api/jobs?limit=32", MANAGER).await;
    let cursor = page["next_cursor"].as_str().unwrap().to_string();
    let (_, last) = s
        .get(&format!("/api/jobs?limit=1&cursor={cursor}"), MANAGER)
        .await;
    assert_eq!(last["items"].as_array().unwrap().len(), 1);
    assert!(last["next_cursor"].is_null());
    // Default page size is 50.
    for _ in 0..20 {
        s.submit(p, "python3").await;
    }
    let (_, page) = s.get("/api/jobs", MANAGER).await;
    assert_eq!(page["items"].as_array().unwrap().len(), 50);
    assert!(page["next_cursor"].is_string());
    s.stop().await;
}

async fn submissions_list_their_latest_attempt(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (p, _, _) = s.problem().await;
    let (_, key) = s.runner("r").await;
    let (s1, _) = s.submit(p, "c").await;
    let (s2, _) = s.submit(p, "cpp").await;
    // s1 is judged Accepted, then rejudged: its latest attempt is Queued again.
    let (job, lease) = lease_of(&s.claim(&key, &["c"]).await.unwrap());
    assert_eq!(
        s.result(job, &lease, &key, "Accepted").await.0,
        StatusCode::OK
    );
    let (status, rejudged) = s
        .post(
            &format!("/api/submissions/{s1}/rejudge"),
            MANAGER,
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{rejudged}");
    let (_, page) = s.get("/api/submissions", MANAGER).await;
    assert_eq!(ids(&page, "submission_id"), [s2, s1]);
    let first = &page["items"][1];
    assert_eq!(first["attempt"], 2);
    assert_eq!(first["job_id"], rejudged["job_id"]);
    assert_eq!(first["state"], "Queued");
    assert!(first["verdict"].is_null());
    assert_eq!(first["problem_id"], p);
    assert_eq!(first["language"], "c");
    // Filters read the latest attempt: the old Accepted one no longer matches.
    let (_, page) = s.get("/api/submissions?verdict=Accepted", MANAGER).await;
    assert_eq!(ids(&page, "submission_id"), Vec::<i64>::new());
    let (_, page) = s.get("/api/submissions?state=Queued", MANAGER).await;
    assert_eq!(ids(&page, "submission_id"), [s2, s1]);
    // ... and the state too: s1's first attempt is Completed, its latest is not.
    let (_, page) = s.get("/api/submissions?state=Completed", MANAGER).await;
    assert_eq!(ids(&page, "submission_id"), Vec::<i64>::new());
    // A state's pages walk by submission, newest first, with a cursor.
    let (_, page) = s
        .get("/api/submissions?state=Queued&limit=1", MANAGER)
        .await;
    assert_eq!(ids(&page, "submission_id"), [s2]);
    let cursor = page["next_cursor"]
        .as_str()
        .expect("a second page")
        .to_string();
    let (_, page) = s
        .get(
            &format!("/api/submissions?state=Queued&limit=1&cursor={cursor}"),
            MANAGER,
        )
        .await;
    assert_eq!(ids(&page, "submission_id"), [s1]);
    assert!(page["next_cursor"].is_null());
    let (_, page) = s.get("/api/submissions?language=cpp", MANAGER).await;
    assert_eq!(ids(&page, "submission_id"), [s2]);
    let (_, page) = s.get("/api/jobs?verdict=Accepted", MANAGER).await;
    assert_eq!(
        ids(&page, "id"),
        [job],
        "the job listing keeps every attempt"
    );
    s.stop().await;
}

async fn runners_show_last_heard_languages_version_and_held_jobs(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (p, _, _) = s.problem().await;
    let (r1, k1) = s.runner("busy").await;
    let (r2, _) = s.runner("never-seen").await;
    let (r3, k3) = s.runner("revoked").await;
    let (_, j1) = s.submit(p, "c").await;
    let (_, j2) = s.submit(p, "c").await;
    s.submit(p, "java").await;

    let claim = |key: String, languages: Value| {
        let req = s
            .http
            .post(s.url("/api/jobs/claim"))
            .bearer_auth(key)
            .header("User-Agent", "judge-runner/9.9.9 (test)")
            .json(&json!({ "languages": languages }));
        async move {
            let answer = req.send().await.unwrap();
            assert_eq!(answer.status(), StatusCode::OK);
            answer.json::<Value>().await.unwrap()
        }
    };
    let heard = s.state().now_ms();
    let c1 = claim(k1.clone(), json!(["c", "python3"])).await;
    let c2 = claim(k1.clone(), json!(["c", "python3"])).await;
    assert_eq!(
        BTreeSet::from([lease_of(&c1).0, lease_of(&c2).0]),
        BTreeSet::from([j1, j2])
    );
    assert!(s.claim(&k3, &["java"]).await.is_some());
    let (status, _) = s
        .call("DELETE", &format!("/api/runners/{r3}"), MANAGER, None)
        .await;
    assert_eq!(status, StatusCode::OK);

    let (status, page) = s.get("/api/runners", MANAGER).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(ids(&page, "runner_id"), [r3, r2, r1]);
    let busy = &page["items"][2];
    assert_eq!(busy["name"], "busy");
    assert_eq!(busy["languages"], json!(["c", "python3"]));
    assert_eq!(busy["runner_version"], "judge-runner/9.9.9 (test)");
    assert_eq!(busy["jobs"], json!([j1, j2]));
    assert!(busy["revoked_at"].is_null());
    let at = |v: &Value| {
        chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap())
            .unwrap()
            .timestamp_millis()
    };
    assert_eq!(at(&busy["last_seen_at"]), heard);
    let never = &page["items"][1];
    assert!(never["last_seen_at"].is_null());
    assert_eq!(never["languages"], json!([]));
    assert!(never["runner_version"].is_null());
    assert_eq!(never["jobs"], json!([]));
    let revoked = &page["items"][0];
    assert!(revoked["revoked_at"].is_string());
    assert_eq!(revoked["jobs"], json!([]), "revocation requeued its job");
    assert_eq!(revoked["languages"], json!(["java"]));

    // Later: a renewal is heard (the claim's languages stay), a finished job is
    // no longer held.
    s.advance(30);
    let (job, lease) = lease_of(&c1);
    assert_eq!(s.renew(job, &k1, &lease).await.0, StatusCode::OK);
    assert_eq!(
        s.result(job, &lease, &k1, "Accepted").await.0,
        StatusCode::OK
    );
    let (_, page) = s.get("/api/runners", MANAGER).await;
    let busy = &page["items"][2];
    assert_eq!(at(&busy["last_seen_at"]), heard + 30_000);
    assert_eq!(busy["languages"], json!(["c", "python3"]));
    assert_eq!(busy["jobs"], json!([lease_of(&c2).0]));
    // Pages of runners.
    let all = walk(&s, "/api/runners", "", "runner_id", 2).await;
    assert_eq!(all, [r3, r2, r1]);
    s.stop().await;
}

async fn problems_list_their_versions(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (p1, v1, sha) = s.problem().await;
    let (p2, v2, _) = s.problem().await;
    let (status, body) = s
        .upload(hello_package(), &format!("?problem_id={p1}&time_limit=3"))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let v3 = body["problem_version_id"].as_i64().unwrap();
    let (_, page) = s.get("/api/problems", MANAGER).await;
    assert_eq!(ids(&page, "problem_id"), [p2, p1]);
    let versions: Vec<i64> = page["items"][1]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["problem_version_id"].as_i64().unwrap())
        .collect();
    assert_eq!(versions, [v1, v3]);
    assert_eq!(page["items"][1]["versions"][0]["sha256"], sha.as_str());
    assert_eq!(page["items"][1]["versions"][1]["time_limit"], 3.0);
    assert_eq!(
        page["items"][0]["versions"][0]["problem_version_id"], v2,
        "{page}"
    );
    // One per page: each page still has exactly its own versions.
    let (_, first) = s.get("/api/problems?limit=1", MANAGER).await;
    assert_eq!(first["items"][0]["versions"].as_array().unwrap().len(), 1);
    let cursor = first["next_cursor"].as_str().unwrap();
    let (_, second) = s
        .get(&format!("/api/problems?limit=1&cursor={cursor}"), MANAGER)
        .await;
    assert_eq!(ids(&second, "problem_id"), [p1]);
    assert_eq!(second["items"][0]["versions"].as_array().unwrap().len(), 2);
    assert!(second["next_cursor"].is_null());
    s.stop().await;
}

async fn queue_counts_states_languages_age_and_rates(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (p, _, _) = s.problem().await;
    let (_, key) = s.runner("r").await;
    for language in ["c", "c", "c", "cpp", "java"] {
        s.submit(p, language).await;
    }
    s.advance(90);
    for i in 0..3 {
        let (job, lease) = lease_of(&s.claim(&key, &["c"]).await.unwrap());
        if i < 2 {
            assert_eq!(
                s.result(job, &lease, &key, "Accepted").await.0,
                StatusCode::OK
            );
        }
    }
    let (status, q) = s.get("/api/queue", MANAGER).await;
    assert_eq!(status, StatusCode::OK, "{q}");
    assert_eq!(
        q["by_state"],
        json!({"Queued": 2, "Running": 1, "Completed": 2, "Failed": 0, "Cancelled": 0, "Superseded": 0})
    );
    assert_eq!(q["by_language"], json!({"cpp": 1, "java": 1}));
    assert_eq!(q["oldest_queued_seconds"], 90.0);
    assert_eq!(q["claims_per_minute"], 3.0 / 60.0);
    assert_eq!(q["results_per_minute"], 2.0 / 60.0);
    // An hour later the rates are empty and the queue has aged.
    s.advance(3601);
    let (_, q) = s.get("/api/queue", MANAGER).await;
    assert_eq!(q["claims_per_minute"], 0.0);
    assert_eq!(q["results_per_minute"], 0.0);
    assert_eq!(q["oldest_queued_seconds"], 3691.0);
    s.stop().await;
}

async fn bad_queries_are_400_request_invalid(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (p, _, _) = s.problem().await;
    s.submit(p, "c").await;
    s.submit(p, "c").await;
    let (_, page) = s.get("/api/jobs?limit=1", MANAGER).await;
    let jobs_cursor = page["next_cursor"].as_str().unwrap().to_string();
    let bad = [
        "/api/jobs?state=queued".to_string(),
        "/api/jobs?state=".to_string(),
        "/api/jobs?language=cobol".to_string(),
        "/api/jobs?problem_id=999".to_string(),
        "/api/jobs?problem_id=x".to_string(),
        "/api/jobs?runner_id=999".to_string(),
        "/api/jobs?verdict=".to_string(),
        "/api/jobs?since=yesterday".to_string(),
        "/api/jobs?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z".to_string(),
        "/api/jobs?limit=0".to_string(),
        "/api/jobs?limit=501".to_string(),
        "/api/jobs?limit=-1".to_string(),
        "/api/jobs?limit=ten".to_string(),
        "/api/jobs?cursor=%%%".to_string(),
        "/api/jobs?cursor=bm90IGEgY3Vyc29y".to_string(),
        "/api/jobs?offset=10".to_string(),
        format!("/api/submissions?cursor={jobs_cursor}"),
        format!("/api/runners?cursor={jobs_cursor}"),
        "/api/submissions?state=Done".to_string(),
        "/api/runners?limit=1000".to_string(),
        "/api/problems?cursor=x".to_string(),
        "/api/problems?state=Queued".to_string(),
    ];
    for url in bad {
        let (status, body) = s.get(&url, MANAGER).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::BAD_REQUEST, Some("request.invalid")),
            "{url}: {body}"
        );
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    // The good twins.
    for url in [
        format!("/api/jobs?cursor={jobs_cursor}"),
        format!("/api/jobs?problem_id={p}&state=Queued&language=c&limit=500"),
        "/api/jobs?since=2026-01-01T00:00:00Z".to_string(),
    ] {
        assert_eq!(s.get(&url, MANAGER).await.0, StatusCode::OK, "{url}");
    }
    s.stop().await;
}

//! Result webhooks (`callback_url`, CONTRACT §4 2026-12) against a real receiver
//! (an HTTP server in the test) on SQLite and PostgreSQL: retried until a 2xx
//! with the same `X-Judge-Delivery` and a signature that verifies; one event per
//! ended attempt on every path (Completed, Failed, Cancelled, Superseded), the
//! rejudge inheriting the URL; refusals (no secret, loopback, bad scheme); a
//! Server killed mid-delivery delivers after restart; two Servers on one
//! PostgreSQL deliver each event exactly once; docs/server.md's Python receiver
//! verifies the signature (and refuses it under another secret).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod server_common;

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use judge_runner::server::webhooks::signature;
use reqwest::StatusCode as Status;
use serde_json::{Value, json};
use server_common::{Backend, MANAGER, TestServer, lease_of};

const SECRET: &str = "webhook-test-secret";

/// What the receiver answers: a status per request in order, then 200; `hang`
/// answers nothing to the first `hang` requests (the connection stays open).
#[derive(Default)]
struct Script {
    statuses: VecDeque<u16>,
    hang: usize,
    got: Vec<(String, String, Bytes)>, // (delivery id, signature, body)
}

#[derive(Clone)]
struct Receiver {
    url: String,
    script: Arc<Mutex<Script>>,
}

async fn receive(
    State(script): State<Arc<Mutex<Script>>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let (status, hang) = {
        let mut s = script.lock().unwrap();
        s.got.push((
            header("x-judge-delivery"),
            header("x-judge-signature"),
            body,
        ));
        if s.hang > 0 {
            s.hang -= 1;
            (200, true)
        } else {
            (s.statuses.pop_front().unwrap_or(200), false)
        }
    };
    if hang {
        std::future::pending::<()>().await;
    }
    StatusCode::from_u16(status).unwrap()
}

impl Receiver {
    async fn start(statuses: &[u16], hang: usize) -> Receiver {
        let script = Arc::new(Mutex::new(Script {
            statuses: statuses.iter().copied().collect(),
            hang,
            got: Vec::new(),
        }));
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { url, script }
    }

    fn got(&self) -> Vec<(String, String, Value)> {
        self.script
            .lock()
            .unwrap()
            .got
            .iter()
            .map(|(d, s, b)| (d.clone(), s.clone(), serde_json::from_slice(b).unwrap()))
            .collect()
    }

    /// Every request's signature is the HMAC of its exact body.
    fn assert_signed(&self) {
        for (delivery, sig, body) in self.script.lock().unwrap().got.iter() {
            assert!(delivery.starts_with("whd_"), "{delivery}");
            assert_eq!(sig, &signature(SECRET, body), "signature of {delivery}");
        }
    }

    /// Waits (bounded only against a hang) until `n` requests arrived.
    async fn wait_for(&self, n: usize) -> Vec<(String, String, Value)> {
        for _ in 0..1200 {
            let got = self.got();
            if got.len() >= n {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "the receiver got {} requests, expected {n}",
            self.got().len()
        );
    }
}

/// Waits (bounded only against a hang) until no event is left to deliver: every
/// one is delivered (or given up), so no further request can come.
async fn wait_settled(s: &TestServer) {
    for _ in 0..1200 {
        if s.metric("judge_webhook_outbox_pending").await == 0.0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("events still pending");
}

fn webhooks_on(config: &mut judge_runner::server::Config) {
    config.webhooks.secret = Some(SECRET.to_string());
    config.webhooks.allow_private = true;
    config.webhooks.backoff = Duration::from_millis(50);
    config.webhooks.poll = Duration::from_millis(50);
}

async fn submit_with(s: &TestServer, problem_id: i64, url: &str) -> (Status, Value) {
    let body = json!({"problem_id": problem_id, "language": "python3", "callback_url": url,
        "files": [{"name": "a.py", "content": "print(1)\n"}]});
    s.post("/api/submissions", MANAGER, body).await
}

async fn submit_ok(s: &TestServer, problem_id: i64, url: &str) -> (i64, i64) {
    let (status, body) = submit_with(s, problem_id, url).await;
    assert_eq!(status, Status::CREATED, "{body}");
    (
        body["submission_id"].as_i64().unwrap(),
        body["job_id"].as_i64().unwrap(),
    )
}

backend_tests!(
    retried_until_2xx_with_one_delivery_id_and_a_valid_signature,
    every_way_an_attempt_ends_sends_one_event,
    callback_url_refused_without_secret_on_loopback_or_bad_scheme,
    two_servers_deliver_each_event_exactly_once,
    a_server_killed_mid_delivery_delivers_after_restart,
    settled_events_are_deleted_after_the_retention_pending_ones_never,
);

/// One event's outbox row: (created_ms, delivered_ms, gave_up_ms), read from the
/// database itself; `None` once it is deleted.
async fn outbox_row(
    s: &TestServer,
    backend: Backend,
    job_id: i64,
) -> Option<(i64, Option<i64>, Option<i64>)> {
    use sqlx::Connection as _;
    const SQL: &str =
        "SELECT created_ms, delivered_ms, gave_up_ms FROM webhook_outbox WHERE job_id = $1";
    macro_rules! fetch_on {
        ($connection:ty) => {{
            let mut conn = <$connection>::connect(&s.db.url).await.unwrap();
            let row = sqlx::query_as(SQL)
                .bind(job_id)
                .fetch_optional(&mut conn)
                .await
                .unwrap();
            conn.close().await.unwrap();
            row
        }};
    }
    match backend {
        Backend::Sqlite => fetch_on!(sqlx::SqliteConnection),
        Backend::Postgres => fetch_on!(sqlx::PgConnection),
    }
}

/// The runner claims the next job and reports it Accepted (its attempt ends).
async fn accept_next(s: &TestServer, key: &str) {
    let claim = s.claim(key, &["python3"]).await.unwrap();
    let (job_id, token) = lease_of(&claim);
    let (status, body) = s.result(job_id, &token, key, "Accepted").await;
    assert_eq!(status, Status::OK, "{body}");
}

fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    i64::try_from(since.unwrap().as_millis()).unwrap()
}

/// Waits (bounded only against a hang) until `job_id`'s row is deleted.
async fn wait_deleted(s: &TestServer, backend: Backend, job_id: i64) {
    for _ in 0..1200 {
        if outbox_row(s, backend, job_id).await.is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the outbox row of job {job_id} is still there");
}

async fn settled_events_are_deleted_after_the_retention_pending_ones_never(backend: Backend) {
    const RETENTION: Duration = Duration::from_millis(300);
    let retention_ms = i64::try_from(RETENTION.as_millis()).unwrap();
    let accepting = Receiver::start(&[], 0).await;
    let failing = Receiver::start(&[500; 10_000], 0).await;
    let short_retention = |c: &mut judge_runner::server::Config| {
        webhooks_on(c);
        c.webhooks.retention = RETENTION;
        c.webhooks.prune_every = Duration::from_millis(50);
    };
    // Delivered, and one that keeps failing (retried for 24 h).
    let s = TestServer::start_with(backend, short_retention).await;
    let (_, key) = s.runner("r").await;
    let (problem_id, _, _) = s.problem().await;
    let (_, delivered_job) = submit_ok(&s, problem_id, &accepting.url).await;
    let (_, failing_job) = submit_ok(&s, problem_id, &failing.url).await;
    accept_next(&s, &key).await;
    accept_next(&s, &key).await;
    accepting.wait_for(1).await;
    failing.wait_for(2).await;
    // The delivered event goes once the retention has passed since its delivery.
    wait_deleted(&s, backend, delivered_job).await;
    // The failing one is older than that by now, and older than twice the
    // retention after a while more; still pending, it stays: age alone deletes
    // nothing.
    loop {
        let (created, delivered, gave_up) = outbox_row(&s, backend, failing_job)
            .await
            .expect("a pending event is kept");
        assert_eq!((delivered, gave_up), (None, None));
        if created < now_ms() - 2 * retention_ms {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Some prunes later (every 50 ms), still there.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        outbox_row(&s, backend, failing_job).await.is_some(),
        "a pending event is kept"
    );
    assert_eq!(s.metric("judge_webhook_outbox_pending").await, 1.0);
    s.stop().await;

    // Given up (at its first failure here), then deleted after the retention too.
    let s = TestServer::start_with(backend, |c| {
        short_retention(c);
        c.webhooks.give_up_after = Duration::ZERO;
    })
    .await;
    let (_, key) = s.runner("r").await;
    let (problem_id, _, _) = s.problem().await;
    let (_, given_up_job) = submit_ok(&s, problem_id, &failing.url).await;
    accept_next(&s, &key).await;
    wait_deleted(&s, backend, given_up_job).await;
    assert_eq!(
        s.metric("judge_webhook_deliveries_total{outcome=\"gave_up\"}")
            .await,
        1.0
    );
    assert_eq!(s.metric("judge_webhook_outbox_pending").await, 0.0);
    s.stop().await;
}

async fn retried_until_2xx_with_one_delivery_id_and_a_valid_signature(backend: Backend) {
    let receiver = Receiver::start(&[500, 500], 0).await;
    let s = TestServer::start_with(backend, webhooks_on).await;
    let (_, key) = s.runner("r").await;
    let (problem_id, version_id, _) = s.problem().await;
    let (submission_id, job_id) = submit_ok(&s, problem_id, &receiver.url).await;
    let claim = s.claim(&key, &["python3"]).await.unwrap();
    let (claimed, token) = lease_of(&claim);
    assert_eq!(claimed, job_id);
    let (status, body) = s.result(job_id, &token, &key, "Accepted").await;
    assert_eq!(status, Status::OK, "{body}");
    let got = receiver.wait_for(3).await;
    // Give a wrongly repeated delivery the chance to show up, then count.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got_after = receiver.got();
    assert_eq!(
        got_after.len(),
        3,
        "500, 500, then 200: three tries, no more"
    );
    let ids: Vec<&String> = got.iter().map(|(d, _, _)| d).collect();
    assert!(ids.iter().all(|d| *d == ids[0]), "one delivery id: {ids:?}");
    receiver.assert_signed();
    for (_, _, event) in &got {
        assert_eq!(event, &got[0].2, "the same body every time");
    }
    let event = &got[0].2;
    assert_eq!(event["event"], "attempt.ended");
    assert_eq!(event["submission_id"], submission_id);
    assert_eq!(event["job_id"], job_id);
    assert_eq!(event["attempt"], 1);
    assert_eq!(event["state"], "Completed");
    assert_eq!(event["failure_reason"], Value::Null);
    assert_eq!(event["result"]["verdict"], "Accepted");
    assert_eq!(event["result"]["evaluation_job_id"], job_id);
    assert_eq!(event["result"]["problem_version_id"], version_id);
    assert_eq!(
        s.metric("judge_webhook_deliveries_total{outcome=\"failed\"}")
            .await,
        2.0
    );
    assert_eq!(
        s.metric("judge_webhook_deliveries_total{outcome=\"delivered\"}")
            .await,
        1.0
    );
    assert_eq!(s.metric("judge_webhook_outbox_pending").await, 0.0);
    s.stop().await;
}

async fn every_way_an_attempt_ends_sends_one_event(backend: Backend) {
    let receiver = Receiver::start(&[], 0).await;
    let s = TestServer::start_with(backend, |c| {
        webhooks_on(c);
        c.delivery_cap = 5;
    })
    .await;
    let (_, key) = s.runner("r").await;
    let (problem_id, _, _) = s.problem().await;
    // Failed: a non-retryable failure.
    let (_, failed_job) = submit_ok(&s, problem_id, &receiver.url).await;
    let (job, token) = lease_of(&s.claim(&key, &["python3"]).await.unwrap());
    assert_eq!(job, failed_job);
    let (status, body) = s
        .post(
            &format!("/api/jobs/{job}/failure"),
            &key,
            json!({"lease_token": token, "reason": "package.invalid", "retryable": false}),
        )
        .await;
    assert_eq!(status, Status::OK, "{body}");
    // Cancelled: a Queued attempt.
    let (_, cancelled_job) = submit_ok(&s, problem_id, &receiver.url).await;
    let (status, body) = s
        .post(
            &format!("/api/jobs/{cancelled_job}/cancel"),
            MANAGER,
            json!({}),
        )
        .await;
    assert_eq!(status, Status::OK, "{body}");
    // Superseded: a Queued attempt rejudged; the new attempt inherits the URL
    // and its cancellation sends an event too.
    let (submission, superseded_job) = submit_ok(&s, problem_id, &receiver.url).await;
    let (status, body) = s
        .post(
            &format!("/api/submissions/{submission}/rejudge"),
            MANAGER,
            json!({}),
        )
        .await;
    assert_eq!(status, Status::CREATED, "{body}");
    let second = body["job_id"].as_i64().unwrap();
    let (status, body) = s
        .post(&format!("/api/jobs/{second}/cancel"), MANAGER, json!({}))
        .await;
    assert_eq!(status, Status::OK, "{body}");
    // A submission without callback_url sends nothing.
    let (_, quiet) = s.submit(problem_id, "python3").await;
    s.post(&format!("/api/jobs/{quiet}/cancel"), MANAGER, json!({}))
        .await;

    let got = receiver.wait_for(4).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = if receiver.got().len() > got.len() {
        receiver.got()
    } else {
        got
    };
    let by_job: BTreeMap<i64, (String, Value)> = got
        .iter()
        .map(|(_, _, e)| {
            (
                e["job_id"].as_i64().unwrap(),
                (e["state"].as_str().unwrap().to_string(), e.clone()),
            )
        })
        .collect();
    assert_eq!(got.len(), 4, "one event per ended attempt: {by_job:?}");
    assert_eq!(by_job[&failed_job].0, "Failed");
    assert_eq!(by_job[&failed_job].1["failure_reason"], "package.invalid");
    assert_eq!(by_job[&failed_job].1["result"], Value::Null);
    assert_eq!(by_job[&cancelled_job].0, "Cancelled");
    assert_eq!(by_job[&superseded_job].0, "Superseded");
    assert_eq!(by_job[&second].0, "Cancelled");
    assert_eq!(by_job[&second].1["attempt"], 2);
    assert!(!by_job.contains_key(&quiet));
    receiver.assert_signed();
    s.stop().await;
}

async fn callback_url_refused_without_secret_on_loopback_or_bad_scheme(backend: Backend) {
    // A secret, but private addresses not allowed (the default).
    let s = TestServer::start_with(backend, |c| {
        c.webhooks.secret = Some(SECRET.to_string());
    })
    .await;
    let (problem_id, _, _) = s.problem().await;
    for url in [
        "http://127.0.0.1:9/hook",
        "http://localhost:9/hook",
        "http://[::1]:9/hook",
        "http://10.0.0.7/hook",
        "http://169.254.169.254/latest/meta-data",
        &s.url("/hook"),
    ] {
        let (status, body) = submit_with(&s, problem_id, url).await;
        assert_eq!(status, Status::UNPROCESSABLE_ENTITY, "{url}: {body}");
        assert_eq!(body["error"], "callback_url.invalid", "{url}");
    }
    for url in ["ftp://example.com/x", "file:///etc/passwd", "not a url"] {
        let (status, body) = submit_with(&s, problem_id, url).await;
        assert_eq!(status, Status::UNPROCESSABLE_ENTITY, "{url}: {body}");
        assert_eq!(body["error"], "callback_url.invalid", "{url}");
    }
    // Nothing was stored by the refusals.
    let (status, _) = s.get("/api/submissions/1", MANAGER).await;
    assert_eq!(status, Status::NOT_FOUND);
    // The same loopback URL is accepted with --webhook-allow-private (its twin).
    s.stop().await;
    let s = TestServer::start_with(backend, webhooks_on).await;
    let (problem_id, _, _) = s.problem().await;
    let (status, body) = submit_with(&s, problem_id, "http://127.0.0.1:9/hook").await;
    assert_eq!(status, Status::CREATED, "{body}");
    s.stop().await;
    // No secret: refused whatever the URL.
    let s = TestServer::start_with(backend, |c| c.webhooks.allow_private = true).await;
    let (problem_id, _, _) = s.problem().await;
    let (status, body) = submit_with(&s, problem_id, "http://127.0.0.1:9/hook").await;
    assert_eq!(status, Status::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"], "callback_url.no_secret");
    s.stop().await;
}

async fn two_servers_deliver_each_event_exactly_once(backend: Backend) {
    if backend != Backend::Postgres {
        return; // several Servers share PostgreSQL only
    }
    let receiver = Receiver::start(&[], 0).await;
    let a = TestServer::start_with(backend, webhooks_on).await;
    let mut config = server_common::test_config(&a.db);
    webhooks_on(&mut config);
    let b = judge_runner::server::start(
        config,
        Arc::new(judge_runner::server::ManualClock::starting_now()),
    )
    .await
    .unwrap();
    let (problem_id, _, _) = a.problem().await;
    let mut jobs = Vec::new();
    for _ in 0..40 {
        let (_, job) = submit_ok(&a, problem_id, &receiver.url).await;
        jobs.push(job);
    }
    let http = reqwest::Client::new();
    for (i, job) in jobs.iter().enumerate() {
        // Half the cancellations through each Server.
        let base = if i % 2 == 0 {
            a.handle.base_url()
        } else {
            b.base_url()
        };
        let r = http
            .post(format!("{base}/api/jobs/{job}/cancel"))
            .bearer_auth(MANAGER)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), Status::OK);
    }
    receiver.wait_for(40).await;
    wait_settled(&a).await;
    let got = receiver.got();
    let mut per_job: BTreeMap<i64, usize> = BTreeMap::new();
    for (_, _, e) in &got {
        *per_job.entry(e["job_id"].as_i64().unwrap()).or_default() += 1;
    }
    assert_eq!(got.len(), 40, "each event exactly once: {per_job:?}");
    assert!(per_job.values().all(|n| *n == 1));
    b.shutdown().await.unwrap();
    a.stop().await;
}

/// A `judge-runner serve` child with webhooks on, killed (SIGKILL) when dropped.
struct Serve {
    child: Child,
    base: String,
}

impl Serve {
    fn start(database: &str, storage: &std::path::Path) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_judge-runner"))
            .args(["serve", "--listen", "127.0.0.1:0", "--database", database])
            .arg("--storage")
            .arg(storage)
            .args([
                "--webhook-allow-private",
                "--webhook-timeout",
                "1",
                "--webhook-backoff",
                "0.05",
            ])
            .env("JUDGE_MANAGER_TOKEN", MANAGER)
            .env("JUDGE_WEBHOOK_SECRET", SECRET)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap()
            .to_string();
        Serve { child, base }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Between the commit of the state change and the receiver's 2xx: the event is
/// in the outbox, its first try is in flight (the receiver holds it), and the
/// `serve` process is SIGKILLed. Another `serve` on the same database sends it.
async fn a_server_killed_mid_delivery_delivers_after_restart(backend: Backend) {
    // The first request hangs: the Server is killed while it waits.
    let receiver = Receiver::start(&[], 1).await;
    let db = server_common::TestDb::new(backend).await;
    let storage = db.dir().join("storage");
    let http = reqwest::Client::new();
    let first = Serve::start(&db.url, &storage);
    let package = server_common::hello_package();
    let r = http
        .post(format!("{}/api/problems", first.base))
        .bearer_auth(MANAGER)
        .body(package)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), Status::CREATED);
    let problem: Value = r.json().await.unwrap();
    let r = http
        .post(format!("{}/api/submissions", first.base))
        .bearer_auth(MANAGER)
        .json(
            &json!({"problem_id": problem["problem_id"], "language": "python3",
            "callback_url": receiver.url, "files": [{"name": "a.py", "content": "1"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), Status::CREATED);
    let job = r.json::<Value>().await.unwrap()["job_id"].as_i64().unwrap();
    let r = http
        .post(format!("{}/api/jobs/{job}/cancel", first.base))
        .bearer_auth(MANAGER)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), Status::OK);
    let hung = receiver.wait_for(1).await;
    drop(first); // SIGKILL while the delivery is in flight
    let second = Serve::start(&db.url, &storage);
    let got = receiver.wait_for(2).await;
    assert_eq!(
        got[1].0, hung[0].0,
        "the same delivery id after the restart"
    );
    assert_eq!(got[1].2["job_id"], job);
    assert_eq!(got[1].2["state"], "Cancelled");
    receiver.assert_signed();
    let mut pending = 1.0;
    for _ in 0..1200 {
        let metrics = http
            .get(format!("{}/metrics", second.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        pending = server_common::metric_value(&metrics, "judge_webhook_outbox_pending");
        if pending == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(pending, 0.0, "delivered after the restart");
    assert_eq!(receiver.got().len(), 2, "delivered once after the restart");
    drop(second);
    db.cleanup().await;
}

/// docs/server.md's ten-line Python receiver, as printed there (only its port
/// replaced by a free one), run by python3 against a real Server.
struct DocReceiver {
    child: Child,
    url: String,
    lines: Arc<Mutex<Vec<String>>>,
}

impl DocReceiver {
    fn start(secret: &str) -> DocReceiver {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/server.md"))
            .unwrap();
        let guide = &doc[doc.find("## Integrating a platform").expect("the guide")..];
        let start = guide.find("```python\n").expect("the Python receiver") + "```python\n".len();
        let code = &guide[start..start + guide[start..].find("```").unwrap()];
        assert!(
            code.lines().count() <= 11,
            "the receiver stays about ten lines:\n{code}"
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        assert!(code.contains("(\"\", 8000)"), "{code}");
        let code = code.replace("(\"\", 8000)", &format!("(\"127.0.0.1\", {port})"));
        let mut child = Command::new("python3")
            .args(["-c", &code])
            .env("JUDGE_WEBHOOK_SECRET", secret)
            .env("PYTHONUNBUFFERED", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = BufReader::new(child.stdout.take().unwrap());
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        // Ready when it accepts a connection.
        for _ in 0..400 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        DocReceiver {
            child,
            url: format!("http://127.0.0.1:{port}/hook"),
            lines,
        }
    }
}

impl Drop for DocReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_docs_python_receiver_verifies_our_signature() {
    let good = DocReceiver::start(SECRET);
    let wrong = DocReceiver::start("not-the-secret");
    let s = TestServer::start_with(Backend::Sqlite, webhooks_on).await;
    let (problem_id, _, _) = s.problem().await;
    let (_, job) = submit_ok(&s, problem_id, &good.url).await;
    let (_, refused) = submit_ok(&s, problem_id, &wrong.url).await;
    for j in [job, refused] {
        let (status, body) = s
            .post(&format!("/api/jobs/{j}/cancel"), MANAGER, json!({}))
            .await;
        assert_eq!(status, Status::OK, "{body}");
    }
    // The good one answers 204 (delivered); the wrong secret's answers 401, so
    // that event is retried (failed at least once) and never delivered.
    for _ in 0..1200 {
        let delivered = s
            .metric("judge_webhook_deliveries_total{outcome=\"delivered\"}")
            .await;
        let failed = s
            .metric("judge_webhook_deliveries_total{outcome=\"failed\"}")
            .await;
        if delivered >= 1.0 && failed >= 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let printed = good.lines.lock().unwrap().clone();
    assert_eq!(printed.len(), 1, "{printed:?}");
    assert!(printed[0].contains("'attempt.ended'"), "{printed:?}");
    assert!(
        printed[0].contains(&format!("'job_id': {job}")),
        "{printed:?}"
    );
    assert!(wrong.lines.lock().unwrap().is_empty());
    assert_eq!(
        s.metric("judge_webhook_deliveries_total{outcome=\"delivered\"}")
            .await,
        1.0
    );
    assert!(
        s.metric("judge_webhook_deliveries_total{outcome=\"failed\"}")
            .await
            >= 1.0
    );
    s.stop().await;
}

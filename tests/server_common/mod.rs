//! Shared by the `server_*` tests: a fresh database per test (a SQLite file in a
//! temp dir, or a new PostgreSQL database on `DATABASE_URL_POSTGRES`), a Server
//! started on 127.0.0.1:0 with a clock the test moves, and small HTTP helpers.
//!
//! PostgreSQL tests skip when `DATABASE_URL_POSTGRES` is unset, unless `CI=true`:
//! then a missing PostgreSQL fails the run.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use judge_runner::server::{self, Config, ManualClock, ServerHandle};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::Connection as _;

pub const MANAGER: &str = "test-manager-token-0123456789";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The PostgreSQL server URL, or `None` to skip (panics under `CI=true`).
pub fn postgres_url() -> Option<String> {
    match std::env::var("DATABASE_URL_POSTGRES") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true but DATABASE_URL_POSTGRES is not set: PostgreSQL tests cannot run")
        }
        _ => None,
    }
}

/// Generates `sqlite::NAME` and `postgres::NAME` tests from `async fn NAME(Backend)`.
#[macro_export]
macro_rules! backend_tests {
    ($($name:ident),* $(,)?) => {
        #[cfg(test)]
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name($crate::server_common::Backend::Sqlite).await
                }
            )*
        }
        #[cfg(test)]
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    if $crate::server_common::postgres_url().is_none() {
                        eprintln!("skipped: DATABASE_URL_POSTGRES is not set");
                        return;
                    }
                    super::$name($crate::server_common::Backend::Postgres).await
                }
            )*
        }
    };
}

/// A database of its own for one test.
pub struct TestDb {
    pub url: String,
    dir: tempfile::TempDir,
    pg: Option<(String, String)>, // (admin url, database name)
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

impl TestDb {
    pub async fn new(backend: Backend) -> TestDb {
        let dir = tempfile::tempdir().unwrap();
        match backend {
            Backend::Sqlite => TestDb {
                url: format!("sqlite://{}", dir.path().join("judge.db").display()),
                dir,
                pg: None,
            },
            Backend::Postgres => {
                let admin = postgres_url().expect("postgres tests need DATABASE_URL_POSTGRES");
                let name = format!(
                    "judge_t_{}_{}_{}",
                    std::process::id(),
                    COUNTER.fetch_add(1, Ordering::SeqCst),
                    rand::random::<u32>()
                );
                let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap();
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                    .execute(&mut conn)
                    .await
                    .unwrap();
                conn.close().await.unwrap();
                TestDb {
                    url: with_database(&admin, &name),
                    dir,
                    pg: Some((admin, name)),
                }
            }
        }
    }

    /// A directory that lives as long as this database (storage, scratch).
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// Drops the PostgreSQL database (the SQLite file goes with the temp dir).
    pub async fn cleanup(self) {
        if let Some((admin, name)) = &self.pg {
            let mut conn = sqlx::PgConnection::connect(admin).await.unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
            )))
            .execute(&mut conn)
            .await
            .unwrap();
            conn.close().await.unwrap();
        }
    }
}

/// `postgres://u@h:p/old?x` with the database name replaced.
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let slash = base.rfind('/').unwrap();
    let base = if base[..slash].ends_with('/') {
        base
    } else {
        &base[..slash]
    };
    format!("{base}/{name}{query}")
}

/// A Server on 127.0.0.1:0 with a manual clock and a reaper that never runs on
/// its own (tests call `reap`).
pub struct TestServer {
    pub handle: ServerHandle,
    pub clock: Arc<ManualClock>,
    pub http: reqwest::Client,
    pub db: TestDb,
}

pub fn test_config(db: &TestDb) -> Config {
    let mut config = Config::new(db.url.clone(), db.dir().join("storage"), MANAGER);
    config.listen = "127.0.0.1:0".to_string();
    config.lease_seconds = 60;
    config.delivery_cap = 5;
    config.reap_interval = Duration::from_secs(3600);
    config.max_connections = 8;
    config
}

impl TestServer {
    pub async fn start(backend: Backend) -> TestServer {
        Self::start_with(backend, |_| {}).await
    }

    pub async fn start_with(backend: Backend, tweak: impl FnOnce(&mut Config)) -> TestServer {
        let db = TestDb::new(backend).await;
        let mut config = test_config(&db);
        tweak(&mut config);
        let clock = Arc::new(ManualClock::starting_now());
        let handle = server::start(config, clock.clone()).await.unwrap();
        TestServer {
            handle,
            clock,
            http: reqwest::Client::new(),
            db,
        }
    }

    pub async fn stop(self) {
        self.handle.shutdown().await.unwrap();
        self.db.cleanup().await;
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.handle.base_url())
    }

    pub fn state(&self) -> &server::AppState {
        self.handle.state()
    }

    pub async fn reap(&self) -> server::reaper::Reaped {
        server::reaper::reap_once(self.state()).await.unwrap()
    }

    pub fn advance(&self, seconds: u64) {
        self.clock.advance(Duration::from_secs(seconds));
    }

    /// A JSON call with a bearer token: `(status, body or Null)`.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self.http.request(method, self.url(path)).bearer_auth(token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let bytes = resp.bytes().await.unwrap();
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        };
        (status, value)
    }

    pub async fn post(&self, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
        self.call("POST", path, token, Some(body)).await
    }

    pub async fn get(&self, path: &str, token: &str) -> (StatusCode, Value) {
        self.call("GET", path, token, None).await
    }

    /// A new runner: `(runner_id, key)`.
    pub async fn runner(&self, name: &str) -> (i64, String) {
        let (status, body) = self
            .post("/api/runners", MANAGER, json!({"name": name}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        (
            body["runner_id"].as_i64().unwrap(),
            body["key"].as_str().unwrap().to_string(),
        )
    }

    /// Uploads a package: `(status, body)`.
    pub async fn upload(&self, bytes: Vec<u8>, query: &str) -> (StatusCode, Value) {
        let resp = self
            .http
            .post(self.url(&format!("/api/problems{query}")))
            .bearer_auth(MANAGER)
            .body(bytes)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// The `greet` fixture problem: `(problem_id, problem_version_id, sha256)`.
    pub async fn problem(&self) -> (i64, i64, String) {
        let (status, body) = self.upload(hello_package(), "").await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        (
            body["problem_id"].as_i64().unwrap(),
            body["problem_version_id"].as_i64().unwrap(),
            body["sha256"].as_str().unwrap().to_string(),
        )
    }

    /// A submission in `language`: `(submission_id, job_id)`.
    pub async fn submit(&self, problem_id: i64, language: &str) -> (i64, i64) {
        let body = json!({"problem_id": problem_id, "language": language,
            "files": [{"name": "hello.py", "content": "print('Hello World!')\n"}]});
        let (status, body) = self.post("/api/submissions", MANAGER, body).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        (
            body["submission_id"].as_i64().unwrap(),
            body["job_id"].as_i64().unwrap(),
        )
    }

    /// Claims once without waiting: the claim, or `None` on 204.
    pub async fn claim(&self, key: &str, languages: &[&str]) -> Option<Value> {
        let (status, body) = self
            .post("/api/jobs/claim", key, json!({"languages": languages}))
            .await;
        match status {
            StatusCode::OK => Some(body),
            StatusCode::NO_CONTENT => None,
            other => panic!("claim answered {other}: {body}"),
        }
    }

    /// Renews job `job_id`'s lease with `token`: the answer.
    pub async fn renew(&self, job_id: i64, key: &str, token: &str) -> (StatusCode, Value) {
        self.post(
            &format!("/api/jobs/{job_id}/lease"),
            key,
            json!({"lease_token": token}),
        )
        .await
    }

    pub async fn job(&self, job_id: i64) -> Value {
        let (status, body) = self.get(&format!("/api/jobs/{job_id}"), MANAGER).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }

    pub async fn result(
        &self,
        job_id: i64,
        token: &str,
        key: &str,
        verdict: &str,
    ) -> (StatusCode, Value) {
        let body = json!({"lease_token": token, "score": 1.0, "max_score": 1.0,
            "verdict": verdict, "extra": null, "props": null, "runner_version": "test"});
        self.post(&format!("/api/jobs/{job_id}/result"), key, body)
            .await
    }

    pub async fn metric(&self, name: &str) -> f64 {
        let text = self
            .http
            .get(self.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        metric_value(&text, name)
    }
}

/// The value of one sample line `name value` in Prometheus text.
pub fn metric_value(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

/// `tests/fixtures/problems/NAME` (the problems the tests own) as `.tar.gz` bytes.
pub fn package_of(name: &str) -> Vec<u8> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/problems")
        .join(name);
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    tar.follow_symlinks(false);
    tar.append_dir_all(".", &dir).unwrap();
    tar.into_inner().unwrap().finish().unwrap()
}

/// The legacy pass-fail fixture `greet`, packed.
pub fn hello_package() -> Vec<u8> {
    package_of("greet")
}

/// A `.tar.gz` holding the given `(path, bytes)` files.
pub fn tar_gz(files: &[(&str, &[u8])]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for (path, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, path, *bytes).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

/// A multipart/form-data body: `(content type, bytes)`. Parts are `(name,
/// filename, bytes)`.
pub fn multipart(parts: &[(&str, Option<&str>, &[u8])]) -> (String, Vec<u8>) {
    let boundary = "judge-runner-test-boundary-7f3a";
    let mut body = Vec::new();
    for (name, filename, bytes) in parts {
        write!(
            body,
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\""
        )
        .unwrap();
        if let Some(f) = filename {
            write!(body, "; filename=\"{f}\"").unwrap();
        }
        write!(body, "\r\nContent-Type: application/octet-stream\r\n\r\n").unwrap();
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    write!(body, "--{boundary}--\r\n").unwrap();
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// Claim fields every test reads.
pub fn lease_of(claim: &Value) -> (i64, String) {
    let id = claim["job_id"]
        .as_i64()
        .or_else(|| claim["trial_id"].as_i64())
        .unwrap();
    (id, claim["lease_token"].as_str().unwrap().to_string())
}

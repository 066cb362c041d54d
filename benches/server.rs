//! Claim → lease renew → result cycles per second with 64 concurrent simulated
//! Runners, SQLite and PostgreSQL side by side in one run, rounds interleaved
//! (S P S P ...). Every round drains a fresh queue of jobs and asserts that no job
//! was claimed twice and that every result was accepted.
//!
//!     DATABASE_URL_POSTGRES=postgres://... cargo bench --bench server
//!
//! Without `DATABASE_URL_POSTGRES` only SQLite is measured. Knobs (env):
//! `BENCH_JOBS` per round (default 3000), `BENCH_ROUNDS` per backend (default 3),
//! `BENCH_RUNNERS` (default 64), `BENCH_PG_CONNECTIONS` (32), `BENCH_SQLITE_CONNECTIONS` (8).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use judge_runner::server::{self, Config, ServerHandle, SystemClock};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::Connection as _;

const MANAGER: &str = "bench-manager-token";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Backend {
    name: &'static str,
    handle: ServerHandle,
    problem: i64,
    keys: Vec<String>,
    rates: Vec<f64>,
}

/// The `greet` fixture problem, packed (the Server validates what it is given).
fn hello_package() -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    tar.append_dir_all(
        ".",
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/problems/greet"),
    )
    .unwrap();
    tar.into_inner().unwrap().finish().unwrap()
}

async fn start(
    name: &'static str,
    url: String,
    dir: &std::path::Path,
    runners: usize,
    http: &reqwest::Client,
) -> Backend {
    let mut config = Config::new(url, dir.join(name), MANAGER);
    config.listen = "127.0.0.1:0".into();
    let connections = if name == "postgres" {
        env_usize("BENCH_PG_CONNECTIONS", 32)
    } else {
        env_usize("BENCH_SQLITE_CONNECTIONS", 8)
    };
    config.max_connections = u32::try_from(connections).unwrap();
    let handle = server::start(config, Arc::new(SystemClock)).await.unwrap();
    let base = handle.base_url();
    let resp = http
        .post(format!("{base}/api/problems"))
        .bearer_auth(MANAGER)
        .body(hello_package())
        .send()
        .await
        .unwrap();
    let problem = resp.json::<Value>().await.unwrap()["problem_id"]
        .as_i64()
        .unwrap();
    let mut keys = Vec::new();
    for i in 0..runners {
        let resp = http
            .post(format!("{base}/api/runners"))
            .bearer_auth(MANAGER)
            .json(&json!({"name": format!("bench-{i}")}))
            .send()
            .await
            .unwrap();
        keys.push(
            resp.json::<Value>().await.unwrap()["key"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    Backend {
        name,
        handle,
        problem,
        keys,
        rates: Vec::new(),
    }
}

async fn fill(http: &reqwest::Client, base: &str, problem: i64, jobs: usize) {
    let body = json!({"problem_id": problem, "language": "c", "files": [{"name": "a.c", "content": "int main(){return 0;}"}]});
    let mut left = jobs;
    while left > 0 {
        let n = left.min(32);
        let calls = (0..n).map(|_| {
            http.post(format!("{base}/api/submissions"))
                .bearer_auth(MANAGER)
                .json(&body)
                .send()
        });
        for resp in futures_util::future::join_all(calls).await {
            assert_eq!(resp.unwrap().status(), StatusCode::CREATED);
        }
        left -= n;
    }
}

/// One simulated Runner: claim → renew → result until the queue is empty.
async fn runner(http: reqwest::Client, base: String, key: String) -> Vec<i64> {
    let mut done = Vec::new();
    loop {
        let resp = http
            .post(format!("{base}/api/jobs/claim"))
            .bearer_auth(&key)
            .json(&json!({"languages": ["c"]}))
            .send()
            .await
            .unwrap();
        if resp.status() == StatusCode::NO_CONTENT {
            return done;
        }
        assert_eq!(resp.status(), StatusCode::OK);
        let claim: Value = resp.json().await.unwrap();
        let id = claim["job_id"].as_i64().unwrap();
        let token = claim["lease_token"].as_str().unwrap();
        let renew = http
            .post(format!("{base}/api/jobs/{id}/lease"))
            .bearer_auth(&key)
            .json(&json!({"lease_token": token}))
            .send()
            .await
            .unwrap();
        assert_eq!(renew.status(), StatusCode::OK);
        let result = json!({"lease_token": token, "score": 1.0, "max_score": 1.0, "verdict": "Accepted", "runner_version": "bench"});
        let resp = http
            .post(format!("{base}/api/jobs/{id}/result"))
            .bearer_auth(&key)
            .json(&result)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "result refused");
        done.push(id);
    }
}

/// Drains `jobs` fresh jobs; answers cycles per second.
async fn round(http: &reqwest::Client, b: &Backend, jobs: usize) -> f64 {
    let base = b.handle.base_url();
    fill(http, &base, b.problem, jobs).await;
    let started = Instant::now();
    let tasks: Vec<_> = b
        .keys
        .iter()
        .map(|k| tokio::spawn(runner(http.clone(), base.clone(), k.clone())))
        .collect();
    let mut ids = Vec::new();
    for t in tasks {
        ids.extend(t.await.unwrap());
    }
    let elapsed = started.elapsed();
    let unique: HashSet<i64> = ids.iter().copied().collect();
    assert_eq!(
        unique.len(),
        ids.len(),
        "{}: a job was claimed twice",
        b.name
    );
    assert_eq!(ids.len(), jobs, "{}: every job completed once", b.name);
    jobs as f64 / elapsed.as_secs_f64()
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

async fn fresh_pg_database(admin: &str) -> (String, String) {
    let name = format!("judge_bench_{}", std::process::id());
    let mut conn = sqlx::PgConnection::connect(admin).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .unwrap();
    let slash = admin.rfind('/').unwrap();
    (format!("{}/{name}", &admin[..slash]), name)
}

async fn drop_pg_database(admin: &str, name: &str) {
    let mut conn = sqlx::PgConnection::connect(admin).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&mut conn)
    .await
    .unwrap();
}

#[tokio::main]
async fn main() {
    let jobs = env_usize("BENCH_JOBS", 3000);
    let rounds = env_usize("BENCH_ROUNDS", 3);
    let runners = env_usize("BENCH_RUNNERS", 64);
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let mut backends = vec![
        start(
            "sqlite",
            format!("sqlite://{}", dir.path().join("bench.db").display()),
            dir.path(),
            runners,
            &http,
        )
        .await,
    ];
    let pg_admin = std::env::var("DATABASE_URL_POSTGRES")
        .ok()
        .filter(|u| !u.is_empty());
    let mut pg_name = None;
    if let Some(admin) = &pg_admin {
        let (url, name) = fresh_pg_database(admin).await;
        pg_name = Some(name);
        backends.push(start("postgres", url, dir.path(), runners, &http).await);
    } else {
        println!("DATABASE_URL_POSTGRES is not set: measuring SQLite only");
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "server bench: {runners} runners, {jobs} jobs per round, {rounds} rounds per backend, interleaved; load before: {}",
        load.trim()
    );
    for r in 0..rounds {
        for b in &mut backends {
            let rate = round(&http, b, jobs).await;
            println!("  round {r} {:<8} {rate:>8.0} cycles/s", b.name);
            b.rates.push(rate);
        }
    }
    println!("\nmedian claim->renew->result cycles/s (zero double claims asserted):");
    for b in &backends {
        println!(
            "  {:<8} {:>8.0}   (rounds: {:?})",
            b.name,
            median(&b.rates),
            b.rates.iter().map(|r| r.round()).collect::<Vec<_>>()
        );
    }
    if backends.len() == 2 {
        println!(
            "  postgres / sqlite = {:.2}",
            median(&backends[1].rates) / median(&backends[0].rates)
        );
    }
    for b in backends {
        b.handle.shutdown().await.unwrap();
    }
    if let (Some(admin), Some(name)) = (pg_admin, pg_name) {
        drop_pg_database(&admin, &name).await;
    }
}

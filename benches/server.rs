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
    let rounds = if std::env::var("BENCH_THROUGHPUT").is_ok_and(|v| v == "0") {
        0
    } else {
        rounds
    };
    for r in 0..rounds {
        for b in &mut backends {
            let rate = round(&http, b, jobs).await;
            println!("  round {r} {:<8} {rate:>8.0} cycles/s", b.name);
            b.rates.push(rate);
        }
    }
    if rounds > 0 {
        println!("\nmedian claim->renew->result cycles/s (zero double claims asserted):");
    }
    for b in backends.iter().filter(|_| rounds > 0) {
        println!(
            "  {:<8} {:>8.0}   (rounds: {:?})",
            b.name,
            median(&b.rates),
            b.rates.iter().map(|r| r.round()).collect::<Vec<_>>()
        );
    }
    if backends.len() == 2 && rounds > 0 {
        println!(
            "  postgres / sqlite = {:.2}",
            median(&backends[1].rates) / median(&backends[0].rates)
        );
    }
    for b in backends {
        b.handle.shutdown().await.unwrap();
    }
    if let (Some(admin), Some(name)) = (&pg_admin, pg_name) {
        drop_pg_database(admin, &name).await;
    }
    deep(&http, pg_admin.as_deref()).await;
}

// ---------------------------------------------------------------------------------
// The deep queue (issue 17): N Queued jobs made by SQL in the set-up, then the
// claim's latency by 1 and 16 Runners, with and without a Runner polling for a
// language no job has, the empty claim, `/metrics`, and a mass expiry of leases
// swept while 16 Runners claim.

/// Files of every job the set-up makes.
const FILES: &str = r#"[{"name": "a.c", "content": "int main(){return 0;}"}]"#;

/// The `per_mille`-th value of `v` (500: the median).
fn percentile(v: &[f64], per_mille: usize) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let i = ((s.len() - 1) * per_mille + 500) / 1000;
    s[i]
}

fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// A direct connection to the benchmark's database, for the set-up's SQL.
enum SetupDb {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
}

impl SetupDb {
    async fn open(url: &str) -> SetupDb {
        if url.starts_with("sqlite:") {
            SetupDb::Sqlite(sqlx::SqliteConnection::connect(url).await.unwrap())
        } else {
            SetupDb::Postgres(sqlx::PgConnection::connect(url).await.unwrap())
        }
    }

    /// `n` more Queued C jobs (one submission each), oldest first by id.
    async fn queue(&mut self, problem: i64, version: i64, n: i64) {
        let now = now_ms();
        match self {
            SetupDb::Sqlite(c) => {
                let last: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) FROM submissions")
                    .fetch_one(&mut *c)
                    .await
                    .unwrap();
                sqlx::query(
                    "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < $1) \
                     INSERT INTO submissions (problem_id, language, files, created_ms) \
                     SELECT $2, 'c', $3, $4 FROM n",
                )
                .bind(n)
                .bind(problem)
                .bind(FILES)
                .bind(now)
                .execute(&mut *c)
                .await
                .unwrap();
                sqlx::query(
                    "INSERT INTO jobs (submission_id, attempt, problem_version_id, language, \
                     state, created_ms) SELECT id, 1, $2, 'c', 'Queued', $3 FROM submissions \
                     WHERE id > $1 ORDER BY id",
                )
                .bind(last)
                .bind(version)
                .bind(now)
                .execute(&mut *c)
                .await
                .unwrap();
            }
            SetupDb::Postgres(c) => {
                // The state-count triggers are per row: one bulk statement would
                // update one counter row n times in one transaction. The set-up
                // turns triggers off and counts afterwards instead.
                sqlx::query("SET session_replication_role = replica")
                    .execute(&mut *c)
                    .await
                    .unwrap();
                let last: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) FROM submissions")
                    .fetch_one(&mut *c)
                    .await
                    .unwrap();
                sqlx::query(
                    "INSERT INTO submissions (problem_id, language, files, created_ms) \
                     SELECT $2, 'c', $3, $4 FROM generate_series(1, $1)",
                )
                .bind(n)
                .bind(problem)
                .bind(FILES)
                .bind(now)
                .execute(&mut *c)
                .await
                .unwrap();
                sqlx::query(
                    "INSERT INTO jobs (submission_id, attempt, problem_version_id, language, \
                     state, created_ms) SELECT id, 1, $2, 'c', 'Queued', $3 FROM submissions \
                     WHERE id > $1 ORDER BY id",
                )
                .bind(last)
                .bind(version)
                .bind(now)
                .execute(&mut *c)
                .await
                .unwrap();
                self.recount().await;
            }
        }
    }

    /// The `limit` oldest Queued jobs become Running on `runner` with leases that
    /// expired a second ago (never acknowledged: the sweep refunds them).
    async fn expire_leases(&mut self, runner: i64, limit: i64) {
        const SQL: &str = "UPDATE jobs SET state = 'Running', runner_id = $1, \
             lease_token = 'bench-' || id, lease_seconds = 60, lease_expires_ms = $2, \
             deliveries = deliveries + 1 \
             WHERE id IN (SELECT id FROM jobs WHERE state = 'Queued' ORDER BY id LIMIT $3)";
        let past = now_ms() - 1000;
        match self {
            SetupDb::Sqlite(c) => {
                sqlx::query(SQL)
                    .bind(runner)
                    .bind(past)
                    .bind(limit)
                    .execute(&mut *c)
                    .await
                    .unwrap();
            }
            SetupDb::Postgres(c) => {
                sqlx::query(SQL)
                    .bind(runner)
                    .bind(past)
                    .bind(limit)
                    .execute(&mut *c)
                    .await
                    .unwrap();
                self.recount().await;
            }
        }
    }

    /// PostgreSQL: the counters rebuilt from the rows, and `ANALYZE`.
    async fn recount(&mut self) {
        let SetupDb::Postgres(c) = self else { return };
        for sql in [
            "DELETE FROM state_counts WHERE kind = 'job'",
            "INSERT INTO state_counts (kind, state, shard, n) \
             SELECT 'job', state, 0, COUNT(*) FROM jobs GROUP BY state",
            "SET session_replication_role = origin",
            "ANALYZE jobs",
            "ANALYZE submissions",
        ] {
            sqlx::query(sql).execute(&mut *c).await.unwrap();
        }
    }
}

struct DeepServer {
    handle: ServerHandle,
    url: String,
    problem: i64,
    version: i64,
    keys: Vec<(i64, String)>,
    pg_name: Option<String>,
}

async fn deep_server(
    name: &'static str,
    dir: &std::path::Path,
    size: usize,
    pg_admin: Option<&str>,
    http: &reqwest::Client,
) -> DeepServer {
    let (url, pg_name) = match pg_admin {
        None => (
            format!("sqlite://{}", dir.join(format!("deep-{size}.db")).display()),
            None,
        ),
        Some(admin) => {
            let (url, name) = fresh_pg_database(admin).await;
            (url, Some(name))
        }
    };
    let mut config = Config::new(
        url.clone(),
        dir.join(format!("{name}-deep-{size}")),
        MANAGER,
    );
    config.listen = "127.0.0.1:0".into();
    config.max_connections = u32::try_from(if pg_admin.is_some() {
        env_usize("BENCH_PG_CONNECTIONS", 32)
    } else {
        env_usize("BENCH_SQLITE_CONNECTIONS", 8)
    })
    .unwrap();
    // The benchmark sweeps itself, when it means to.
    config.reap_interval = Duration::from_secs(24 * 3600);
    let handle = server::start(config, Arc::new(SystemClock)).await.unwrap();
    let base = handle.base_url();
    let resp = http
        .post(format!("{base}/api/problems"))
        .bearer_auth(MANAGER)
        .body(hello_package())
        .send()
        .await
        .unwrap();
    let body = resp.json::<Value>().await.unwrap();
    let (problem, version) = (
        body["problem_id"].as_i64().unwrap(),
        body["problem_version_id"].as_i64().unwrap(),
    );
    let mut keys = Vec::new();
    for i in 0..18 {
        let body = http
            .post(format!("{base}/api/runners"))
            .bearer_auth(MANAGER)
            .json(&json!({"name": format!("deep-{i}")}))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap();
        keys.push((
            body["runner_id"].as_i64().unwrap(),
            body["key"].as_str().unwrap().to_string(),
        ));
    }
    DeepServer {
        handle,
        url,
        problem,
        version,
        keys,
        pg_name,
    }
}

/// One claim: its latency in ms and the job, if any.
async fn timed_claim(
    http: &reqwest::Client,
    base: &str,
    key: &str,
    language: &str,
) -> (f64, Option<(i64, String)>) {
    let started = Instant::now();
    let resp = http
        .post(format!("{base}/api/jobs/claim"))
        .bearer_auth(key)
        .json(&json!({"languages": [language], "wait_seconds": 0}))
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let body = resp.bytes().await.unwrap();
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    match status {
        StatusCode::NO_CONTENT => (ms, None),
        StatusCode::OK => {
            let claim: Value = serde_json::from_slice(&body).unwrap();
            (
                ms,
                Some((
                    claim["job_id"].as_i64().unwrap(),
                    claim["lease_token"].as_str().unwrap().to_string(),
                )),
            )
        }
        other => panic!("claim answered {other}: {}", String::from_utf8_lossy(&body)),
    }
}

async fn post_result(http: &reqwest::Client, base: &str, key: &str, id: i64, token: &str) {
    let result = json!({"lease_token": token, "score": 1.0, "max_score": 1.0, "verdict": "Accepted", "runner_version": "bench"});
    let resp = http
        .post(format!("{base}/api/jobs/{id}/result"))
        .bearer_auth(key)
        .json(&result)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK, "result refused");
}

/// What claiming Runners saw: each claim's latency and when it finished.
#[derive(Default)]
struct Claims {
    ms: Vec<f64>,
    done_at: Vec<Instant>,
}

/// `runners` Runners claim → result (C) until `stop`; with `java_poller`, one more
/// polls for `java` (no such job) with `wait_seconds: 0` meanwhile, and its empty
/// claims are returned too.
async fn claim_loop(
    http: &reqwest::Client,
    s: &DeepServer,
    runners: usize,
    java_poller: bool,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> (Claims, Vec<f64>) {
    use std::sync::atomic::Ordering;
    let base = s.handle.base_url();
    let tasks: Vec<_> = (0..runners)
        .map(|i| {
            let (http, base, key, stop) = (
                http.clone(),
                base.clone(),
                s.keys[i].1.clone(),
                stop.clone(),
            );
            tokio::spawn(async move {
                let mut seen = Claims::default();
                while !stop.load(Ordering::Relaxed) {
                    let (ms, job) = timed_claim(&http, &base, &key, "c").await;
                    seen.ms.push(ms);
                    seen.done_at.push(Instant::now());
                    let Some((id, token)) = job else { continue };
                    post_result(&http, &base, &key, id, &token).await;
                }
                seen
            })
        })
        .collect();
    let poller = java_poller.then(|| {
        let (http, base, key, stop) = (
            http.clone(),
            base.clone(),
            s.keys[16].1.clone(),
            stop.clone(),
        );
        tokio::spawn(async move {
            let mut ms = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let (t, job) = timed_claim(&http, &base, &key, "java").await;
                assert!(job.is_none(), "no java job exists");
                ms.push(t);
            }
            ms
        })
    });
    let mut all = Claims::default();
    for t in tasks {
        let c = t.await.unwrap();
        all.ms.extend(c.ms);
        all.done_at.extend(c.done_at);
    }
    let empty = match poller {
        Some(p) => p.await.unwrap(),
        None => Vec::new(),
    };
    (all, empty)
}

/// Runs `claim_loop` for `seconds`: (claims, claims/s, empty claims of the poller).
async fn claim_for(
    http: &reqwest::Client,
    s: &DeepServer,
    runners: usize,
    java_poller: bool,
    seconds: f64,
) -> (Claims, f64, Vec<f64>) {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let started = Instant::now();
    let run = claim_loop(http, s, runners, java_poller, stop.clone());
    let timer = async {
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    };
    let ((claims, empty), ()) = tokio::join!(run, timer);
    let rate = claims.ms.len() as f64 / started.elapsed().as_secs_f64();
    (claims, rate, empty)
}

fn ms3(v: &[f64]) -> String {
    format!(
        "p50 {:>7.3}  p95 {:>7.3}  max {:>8.3} ms  (n={})",
        percentile(v, 500),
        percentile(v, 950),
        percentile(v, 1000),
        v.len()
    )
}

/// The longest stretch in `[from, to]` with no claim finishing.
fn longest_gap(done_at: &[Instant], from: Instant, to: Instant) -> Duration {
    let mut t: Vec<Instant> = done_at
        .iter()
        .copied()
        .filter(|t| *t >= from && *t <= to)
        .collect();
    t.sort();
    let mut gap = Duration::ZERO;
    let mut last = from;
    for x in t.into_iter().chain(std::iter::once(to)) {
        gap = gap.max(x - last);
        last = x;
    }
    gap
}

/// Every measurement of one backend at one depth, printed as it goes.
async fn deep_round(
    http: &reqwest::Client,
    name: &'static str,
    dir: &std::path::Path,
    size: usize,
    pg_admin: Option<&str>,
    seconds: f64,
    expire: usize,
) {
    let s = deep_server(name, dir, size, pg_admin, http).await;
    let base = s.handle.base_url();
    let mut db = SetupDb::open(&s.url).await;
    let started = Instant::now();
    db.queue(s.problem, s.version, i64::try_from(size).unwrap())
        .await;
    println!(
        "\n[{name} {size} Queued] set-up by SQL: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // Warm-up: the first claims after a bulk load read cold pages.
    for _ in 0..20 {
        let (_, job) = timed_claim(http, &base, &s.keys[0].1, "c").await;
        let (id, token) = job.unwrap();
        post_result(http, &base, &s.keys[0].1, id, &token).await;
    }
    let mut empty = Vec::new();
    let mut metrics = Vec::new();
    for _ in 0..200 {
        empty.push(timed_claim(http, &base, &s.keys[17].1, "java").await.0);
        let started = Instant::now();
        let resp = http.get(format!("{base}/metrics")).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let text = resp.text().await.unwrap();
        metrics.push(started.elapsed().as_secs_f64() * 1000.0);
        assert!(text.contains("judge_jobs{state=\"Queued\"}"));
    }
    println!("  empty claim (java), 1 Runner:     {}", ms3(&empty));
    println!("  GET /metrics:                     {}", ms3(&metrics));
    let (one, rate1, _) = claim_for(http, &s, 1, false, seconds).await;
    println!(
        "  claim, 1 Runner:                  {}  {rate1:.0} claims/s",
        ms3(&one.ms)
    );
    let mut rates = [Vec::new(), Vec::new()];
    let mut lat = [Vec::new(), Vec::new()];
    let mut polled = Vec::new();
    // 16 Runners without and with a java poller, interleaved, twice each.
    for _ in 0..2 {
        for (i, poller) in [false, true].into_iter().enumerate() {
            let (c, rate, e) = claim_for(http, &s, 16, poller, seconds).await;
            rates[i].push(rate);
            lat[i].extend(c.ms);
            polled.extend(e);
        }
    }
    println!(
        "  claim, 16 Runners:                {}  {:.0} claims/s {:?}",
        ms3(&lat[0]),
        median(&rates[0]),
        rates[0].iter().map(|r| r.round()).collect::<Vec<_>>()
    );
    println!(
        "  claim, 16 Runners + java poller:  {}  {:.0} claims/s {:?}  ({:+.1} %)",
        ms3(&lat[1]),
        median(&rates[1]),
        rates[1].iter().map(|r| r.round()).collect::<Vec<_>>(),
        (median(&rates[1]) / median(&rates[0]) - 1.0) * 100.0
    );
    println!("  the java poller's empty claims:   {}", ms3(&polled));
    // A mass expiry swept while 16 Runners claim.
    let expire = expire.min(size / 2);
    db.expire_leases(s.keys[17].0, i64::try_from(expire).unwrap())
        .await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let claims = claim_loop(http, &s, 16, false, stop.clone());
    let sweep = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let from = Instant::now();
        let reaped = server::reaper::reap_once(s.handle.state()).await.unwrap();
        let to = Instant::now();
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (reaped.jobs.len(), from, to)
    };
    let ((claims, _), (reaped, from, to)) = tokio::join!(claims, sweep);
    assert_eq!(reaped, expire, "every expired lease swept once");
    let during: Vec<f64> = claims
        .ms
        .iter()
        .zip(&claims.done_at)
        .filter(|(_, t)| **t >= from && **t <= to)
        .map(|(ms, _)| *ms)
        .collect();
    println!(
        "  mass expiry of {expire} leases: swept in {:.2} s while 16 Runners claimed; \
         longest stretch with no claim finishing {:.1} ms; claims during it: {}",
        (to - from).as_secs_f64(),
        longest_gap(&claims.done_at, from, to).as_secs_f64() * 1000.0,
        ms3(&during)
    );
    drop(db);
    s.handle.shutdown().await.unwrap();
    if let (Some(admin), Some(name)) = (pg_admin, &s.pg_name) {
        drop_pg_database(admin, name).await;
    }
}

/// `BENCH_DEEP` sizes (default 100000; `100000,1000000` adds the million; 0 skips).
async fn deep(http: &reqwest::Client, pg_admin: Option<&str>) {
    let sizes: Vec<usize> = std::env::var("BENCH_DEEP")
        .unwrap_or_else(|_| "100000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .filter(|n| *n > 0)
        .collect();
    if sizes.is_empty() {
        return;
    }
    let seconds = std::env::var("BENCH_DEEP_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3.0);
    let expire = env_usize("BENCH_DEEP_EXPIRE", 100_000);
    let dir = tempfile::tempdir().unwrap();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "\ndeep queue: sizes {sizes:?}, {seconds} s per claim phase, {expire} leases expired at once; load before: {}",
        load.trim()
    );
    for size in sizes {
        deep_round(http, "sqlite", dir.path(), size, None, seconds, expire).await;
        if pg_admin.is_some() {
            deep_round(
                http,
                "postgres",
                dir.path(),
                size,
                pg_admin,
                seconds,
                expire,
            )
            .await;
        }
    }
}

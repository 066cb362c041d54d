//! The listing routes at depth (issue 26): `GET /api/jobs`, `/api/submissions`,
//! `/api/runners`, `/api/problems` and `/api/queue` over HTTP against a Server
//! whose database holds N jobs (default 1,000,000) made by bulk SQL in the
//! set-up. SQLite and PostgreSQL side by side, requests interleaved (S P S P ...);
//! each listing's p50 and p90 in milliseconds, end to end (HTTP + JSON + SQL).
//!
//!     DATABASE_URL_POSTGRES=postgres://... cargo bench --bench listing
//!
//! Knobs (env): `BENCH_LISTING_JOBS` (1000000), `BENCH_LISTING_REQUESTS` per
//! listing and backend (30). Without `DATABASE_URL_POSTGRES` only SQLite runs.
//!
//! The history it makes: one submission per job, languages c, cpp, python3, java,
//! rust in turn; 1 % Queued, 0.1 % Failed, a few Running, the rest Completed with
//! a Result (1/7 `Wrong Answer`, 1/7 `Time Limit Exceeded`, else `Accepted`),
//! spread over 8 Runners; one job every 10 ms of creation time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use judge_runner::server::db::listing::{Listing, encode_cursor};
use judge_runner::server::{self, Config, ServerHandle, SystemClock};
use serde_json::{Value, json};
use sqlx::Connection as _;

const MANAGER: &str = "bench-manager-token";
const FILES: &str = r#"[{"name": "a.c", "content": "int main(){return 0;}"}]"#;
const RUNNERS: i64 = 8;
const CHUNK: i64 = 250_000;
/// Creation time between two jobs.
const STEP_MS: i64 = 10;

fn env_i64(name: &str, default: i64) -> i64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(v: &[f64], per_mille: usize) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() - 1) * per_mille + 500) / 1000]
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

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

/// The history, by bulk SQL, numbers `$1` to `$2` (submission and job ids are
/// number + 1 in the fresh database). Submissions: `$3` problem, `$4` creation
/// time of number 0, `$5` files; `{numbers}` is the backend's series of `x` from
/// `$1` to `$2`. Jobs: `$3` version, `$4` the first runner's id.
const SUBMISSIONS: &str = "INSERT INTO submissions (problem_id, language, files, created_ms) \
     SELECT $3, CASE x % 5 WHEN 0 THEN 'c' WHEN 1 THEN 'cpp' WHEN 2 THEN 'python3' \
     WHEN 3 THEN 'java' ELSE 'rust' END, $5, $4 + x * 10 FROM {numbers}";
const JOBS: &str = "INSERT INTO jobs (submission_id, attempt, problem_version_id, language, \
     state, runner_id, lease_token, created_ms, claimed_ms, deliveries) \
     SELECT id, 1, $3, language, \
     CASE WHEN id % 100 = 0 THEN 'Queued' WHEN id % 997 = 0 THEN 'Failed' \
          WHEN id % 50000 = 1 THEN 'Running' ELSE 'Completed' END, \
     CASE WHEN id % 100 = 0 THEN NULL ELSE $4 + id % 8 END, \
     CASE WHEN id % 50000 = 1 AND id % 100 <> 0 THEN 'bench' ELSE NULL END, \
     created_ms, CASE WHEN id % 100 = 0 THEN NULL ELSE created_ms + 1000 END, \
     CASE WHEN id % 100 = 0 THEN 0 ELSE 1 END \
     FROM submissions WHERE id >= $1 + 1 AND id <= $2 + 1 ORDER BY id";
const RESULTS: &str = "INSERT INTO results (evaluation_job_id, problem_version_id, score, \
     max_score, verdict, runner_version, created_ms) \
     SELECT id, problem_version_id, 1, 1, CASE id % 7 WHEN 0 THEN 'Wrong Answer' \
     WHEN 3 THEN 'Time Limit Exceeded' ELSE 'Accepted' END, 'bench', created_ms + 2000 \
     FROM jobs WHERE state = 'Completed' AND id >= $1 + 1 AND id <= $2 + 1";

struct Side {
    name: &'static str,
    handle: ServerHandle,
    pg_name: Option<String>,
    problem: i64,
    first_runner: i64,
    start_ms: i64,
    times: Vec<Vec<f64>>,
}

async fn seed(url: &str, pg: bool, problem: i64, version: i64, first_runner: i64, n: i64) -> i64 {
    let start_ms = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
        - n * STEP_MS
        - 60_000;
    let numbers = if pg {
        "generate_series($1::bigint, $2::bigint) AS g (x)"
    } else {
        "(WITH RECURSIVE n(x) AS (SELECT $1 UNION ALL SELECT x + 1 FROM n WHERE x < $2) \
         SELECT x FROM n)"
    };
    let submissions = SUBMISSIONS.replace("{numbers}", numbers);
    let started = Instant::now();
    macro_rules! run_all {
        ($conn:expr) => {{
            let mut from = 0;
            while from < n {
                let to = (from + CHUNK).min(n) - 1;
                sqlx::query(sqlx::AssertSqlSafe(submissions.clone()))
                    .bind(from)
                    .bind(to)
                    .bind(problem)
                    .bind(start_ms)
                    .bind(FILES)
                    .execute(&mut *$conn)
                    .await
                    .unwrap();
                sqlx::query(JOBS)
                    .bind(from)
                    .bind(to)
                    .bind(version)
                    .bind(first_runner)
                    .execute(&mut *$conn)
                    .await
                    .unwrap();
                sqlx::query(RESULTS)
                    .bind(from)
                    .bind(to)
                    .execute(&mut *$conn)
                    .await
                    .unwrap();
                from = to + 1;
                println!(
                    "  seeded {from} jobs ({:.0} s)",
                    started.elapsed().as_secs_f64()
                );
            }
        }};
    }
    if pg {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        // Per-row triggers off during the bulk load; the counters are rebuilt after.
        sqlx::query("SET session_replication_role = replica")
            .execute(&mut c)
            .await
            .unwrap();
        run_all!(&mut c);
        for sql in [
            "DELETE FROM state_counts WHERE kind = 'job'",
            "INSERT INTO state_counts (kind, state, shard, n) \
             SELECT 'job', state, 0, COUNT(*) FROM jobs GROUP BY state",
            "SET session_replication_role = origin",
            "VACUUM ANALYZE jobs",
            "VACUUM ANALYZE submissions",
            "VACUUM ANALYZE results",
        ] {
            sqlx::query(sql).execute(&mut c).await.unwrap();
        }
    } else {
        let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::query("PRAGMA journal_mode = WAL")
            .execute(&mut c)
            .await
            .unwrap();
        run_all!(&mut c);
        sqlx::query("ANALYZE").execute(&mut c).await.unwrap();
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&mut c)
            .await
            .unwrap();
    }
    start_ms
}

async fn side(
    name: &'static str,
    admin: Option<&str>,
    dir: &std::path::Path,
    n: i64,
    http: &reqwest::Client,
) -> Side {
    let (url, pg_name) = match admin {
        None => (
            format!("sqlite://{}", dir.join("listing.db").display()),
            None,
        ),
        Some(admin) => {
            let db = format!("judge_listing_bench_{}", std::process::id());
            let mut conn = sqlx::PgConnection::connect(admin).await.unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {db} WITH (FORCE)"
            )))
            .execute(&mut conn)
            .await
            .unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}")))
                .execute(&mut conn)
                .await
                .unwrap();
            let (base, _) = admin.rsplit_once('/').unwrap();
            (format!("{base}/{db}"), Some(db))
        }
    };
    let mut config = Config::new(url.clone(), dir.join(name), MANAGER);
    config.listen = "127.0.0.1:0".into();
    config.reap_interval = Duration::from_secs(24 * 3600);
    let handle = server::start(config, Arc::new(SystemClock)).await.unwrap();
    let base = handle.base_url();
    let body: Value = http
        .post(format!("{base}/api/problems"))
        .bearer_auth(MANAGER)
        .body(hello_package())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (problem, version) = (
        body["problem_id"].as_i64().unwrap(),
        body["problem_version_id"].as_i64().unwrap(),
    );
    let mut first_runner = 0;
    for i in 0..RUNNERS {
        let body: Value = http
            .post(format!("{base}/api/runners"))
            .bearer_auth(MANAGER)
            .json(&json!({"name": format!("bench-{i}")}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if i == 0 {
            first_runner = body["runner_id"].as_i64().unwrap();
        }
    }
    println!("{name}: seeding {n} jobs (load {})", load());
    let start_ms = seed(&url, admin.is_some(), problem, version, first_runner, n).await;
    Side {
        name,
        handle,
        pg_name,
        problem,
        first_runner,
        start_ms,
        times: Vec::new(),
    }
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The listings measured: (label, path and query).
fn queries(s: &Side, n: i64) -> Vec<(String, String)> {
    let mid = n / 2;
    let jobs_mid = encode_cursor(Listing::Jobs, mid);
    let subs_mid = encode_cursor(Listing::Submissions, mid);
    let since = rfc3339(s.start_ms + (n / 4) * STEP_MS);
    let until = rfc3339(s.start_ms + (n / 4 + 2000) * STEP_MS);
    vec![
        ("jobs, first page".into(), "/api/jobs".into()),
        (
            "jobs, page at depth n/2".into(),
            format!("/api/jobs?cursor={jobs_mid}"),
        ),
        (
            "jobs ?state=Queued at n/2".into(),
            format!("/api/jobs?state=Queued&cursor={jobs_mid}"),
        ),
        (
            "jobs ?state=Failed (0.1 %)".into(),
            "/api/jobs?state=Failed".into(),
        ),
        (
            "jobs ?language=cpp at n/2".into(),
            format!("/api/jobs?language=cpp&cursor={jobs_mid}"),
        ),
        (
            "jobs ?verdict=Wrong Answer at n/2".into(),
            format!("/api/jobs?verdict=Wrong%20Answer&cursor={jobs_mid}"),
        ),
        (
            "jobs ?runner_id at n/2".into(),
            format!(
                "/api/jobs?runner_id={}&cursor={jobs_mid}",
                s.first_runner + 3
            ),
        ),
        (
            "jobs ?problem_id".into(),
            format!("/api/jobs?problem_id={}", s.problem),
        ),
        (
            "jobs ?since&until (20 s at n/4)".into(),
            format!("/api/jobs?since={since}&until={until}"),
        ),
        (
            "jobs ?state=Queued&language=c".into(),
            "/api/jobs?state=Queued&language=c".into(),
        ),
        ("jobs, limit=500".into(), "/api/jobs?limit=500".into()),
        ("submissions, first page".into(), "/api/submissions".into()),
        (
            "submissions at n/2".into(),
            format!("/api/submissions?cursor={subs_mid}"),
        ),
        (
            "submissions ?language=java at n/2".into(),
            format!("/api/submissions?language=java&cursor={subs_mid}"),
        ),
        (
            "submissions ?state=Queued".into(),
            "/api/submissions?state=Queued".into(),
        ),
        ("runners".into(), "/api/runners".into()),
        ("problems".into(), "/api/problems".into()),
        ("queue".into(), "/api/queue".into()),
    ]
}

#[tokio::main]
async fn main() {
    let n = env_i64("BENCH_LISTING_JOBS", 1_000_000);
    let requests = env_i64("BENCH_LISTING_REQUESTS", 30);
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::new();
    let admin = std::env::var("DATABASE_URL_POSTGRES")
        .ok()
        .filter(|u| !u.is_empty());
    let mut sides = vec![side("sqlite", None, dir.path(), n, &http).await];
    if let Some(admin) = admin.as_deref() {
        sides.push(side("postgres", Some(admin), dir.path(), n, &http).await);
    }
    let labels: Vec<String> = queries(&sides[0], n).into_iter().map(|q| q.0).collect();
    for s in &mut sides {
        s.times = vec![Vec::new(); labels.len()];
    }
    println!(
        "measuring: {requests} requests per listing and backend, interleaved (load {})",
        load()
    );
    for (i, _) in labels.iter().enumerate() {
        // One warm-up each, then S P S P ...
        for round in 0..=requests {
            for s in &mut sides {
                let (_, path) = &queries(s, n)[i];
                let url = format!("{}{path}", s.handle.base_url());
                let t = Instant::now();
                let resp = http.get(&url).bearer_auth(MANAGER).send().await.unwrap();
                let status = resp.status();
                let body = resp.bytes().await.unwrap();
                let ms = t.elapsed().as_secs_f64() * 1000.0;
                assert!(status.is_success(), "{} {path}: {status}", s.name);
                assert!(!body.is_empty());
                if round > 0 {
                    s.times[i].push(ms);
                }
            }
        }
    }
    println!("\n{n} jobs; p50 / p90 in ms (load after: {})", load());
    let header: Vec<String> = sides.iter().map(|s| format!("{:>19}", s.name)).collect();
    println!("{:<38}{}", "listing", header.join(""));
    for (i, label) in labels.iter().enumerate() {
        let cells: Vec<String> = sides
            .iter()
            .map(|s| {
                format!(
                    "{:>10.2} / {:>6.2}",
                    percentile(&s.times[i], 500),
                    percentile(&s.times[i], 900)
                )
            })
            .collect();
        println!("{label:<38}{}", cells.join(""));
    }
    for s in sides {
        s.handle.shutdown().await.unwrap();
        if let (Some(admin), Some(db)) = (admin.as_deref(), s.pg_name) {
            let mut conn = sqlx::PgConnection::connect(admin).await.unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {db} WITH (FORCE)"
            )))
            .execute(&mut conn)
            .await
            .unwrap();
        }
    }
}

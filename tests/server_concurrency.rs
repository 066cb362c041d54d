//! Concurrency on real databases: 32 claimers against 500 jobs on each backend
//! (every job claimed exactly once), and two `serve` processes (the real binary)
//! with their reapers on one PostgreSQL: no double claim, no double reap.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod server_common;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use server_common::{Backend, MANAGER, TestDb, TestServer, hello_package, lease_of, metric_value};

backend_tests!(thirty_two_claimers_claim_500_jobs_exactly_once);

/// Claims until the queue answers 204 twice in a row; returns the claims, each
/// with the key that made it.
async fn drain(http: reqwest::Client, urls: Vec<String>, key: String) -> Vec<(Value, String)> {
    let mut got = Vec::new();
    let mut empty = 0;
    let mut turn = 0;
    while empty < 2 {
        let url = &urls[turn % urls.len()];
        turn += 1;
        let resp = http
            .post(format!("{url}/api/jobs/claim"))
            .bearer_auth(&key)
            .json(&json!({"languages": ["c"]}))
            .send()
            .await
            .unwrap();
        match resp.status() {
            StatusCode::OK => {
                empty = 0;
                got.push((resp.json().await.unwrap(), key.clone()));
            }
            StatusCode::NO_CONTENT => empty += 1,
            other => panic!("claim answered {other}: {}", resp.text().await.unwrap()),
        }
    }
    got
}

/// `n` submissions of problem `problem`, 16 at a time.
async fn submit_many(http: &reqwest::Client, base: &str, problem: i64, n: usize) -> Vec<i64> {
    let mut jobs = Vec::new();
    for chunk in (0..n).collect::<Vec<_>>().chunks(16) {
        let calls = chunk.iter().map(|_| {
            http.post(format!("{base}/api/submissions"))
                .bearer_auth(MANAGER)
                .json(&json!({"problem_id": problem, "language": "c",
                    "files": [{"name": "a.c", "content": "int main(){return 0;}"}]}))
                .send()
        });
        for resp in futures_util::future::join_all(calls).await {
            let resp = resp.unwrap();
            assert_eq!(resp.status(), StatusCode::CREATED);
            jobs.push(
                resp.json::<Value>().await.unwrap()["job_id"]
                    .as_i64()
                    .unwrap(),
            );
        }
    }
    jobs
}

fn assert_each_claimed_once(claims: &[(Value, String)], jobs: &[i64]) {
    let mut seen = HashMap::new();
    for (c, _) in claims {
        *seen.entry(lease_of(c).0).or_insert(0) += 1;
    }
    let doubles: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(doubles.is_empty(), "claimed more than once: {doubles:?}");
    let claimed: HashSet<i64> = seen.keys().copied().collect();
    let expected: HashSet<i64> = jobs.iter().copied().collect();
    assert_eq!(claimed, expected, "every job claimed");
}

async fn thirty_two_claimers_claim_500_jobs_exactly_once(backend: Backend) {
    let s = TestServer::start_with(backend, |c| c.max_connections = 16).await;
    let (problem, ..) = s.problem().await;
    let jobs = submit_many(&s.http, &s.handle.base_url(), problem, 500).await;
    let mut keys = Vec::new();
    for i in 0..4 {
        keys.push(s.runner(&format!("r{i}")).await.1);
    }
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            tokio::spawn(drain(
                s.http.clone(),
                vec![s.handle.base_url()],
                keys[i % 4].clone(),
            ))
        })
        .collect();
    let mut claims = Vec::new();
    for t in tasks {
        claims.extend(t.await.unwrap());
    }
    assert_eq!(claims.len(), 500);
    assert_each_claimed_once(&claims, &jobs);
    assert_eq!(s.metric("judge_claims_total").await, 500.0);
    assert_eq!(s.metric("judge_jobs{state=\"Running\"}").await, 500.0);
    for job in [jobs[0], jobs[250], jobs[499]] {
        assert_eq!(s.job(job).await["deliveries"], 1);
    }
    s.stop().await;
}

/// A `judge-runner serve` child process, killed when dropped.
struct ServeProcess {
    child: Child,
    base: String,
}

impl ServeProcess {
    fn start(database: &str, storage: &std::path::Path) -> ServeProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_judge-runner"))
            .args(["serve", "--listen", "127.0.0.1:0", "--database", database])
            .arg("--storage")
            .arg(storage)
            .args([
                "--lease-seconds",
                "60",
                "--reap-interval",
                "0.1",
                "--db-connections",
                "8",
            ])
            .env("JUDGE_MANAGER_TOKEN", MANAGER)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let base = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected: {line:?}"));
        ServeProcess {
            base: base.to_string(),
            child,
        }
    }

    /// SIGTERM, then wait: a clean shutdown exits 0.
    fn stop(mut self) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "serve exited {status}");
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn metrics_of(http: &reqwest::Client, base: &str) -> String {
    http.get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[cfg(test)]
mod multi_server {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn two_serve_processes_on_one_postgres_never_double_claim_or_reap() {
        if server_common::postgres_url().is_none() {
            eprintln!("skipped: DATABASE_URL_POSTGRES is not set");
            return;
        }
        let db = TestDb::new(Backend::Postgres).await;
        let storage = db.dir().join("shared-storage");
        let a = ServeProcess::start(&db.url, &storage);
        let b = ServeProcess::start(&db.url, &storage);
        let http = reqwest::Client::new();
        let resp = http
            .post(format!("{}/api/problems", a.base))
            .bearer_auth(MANAGER)
            .body(hello_package())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::CREATED);
        let problem = resp.json::<Value>().await.unwrap()["problem_id"]
            .as_i64()
            .unwrap();
        let jobs = submit_many(&http, &b.base, problem, 200).await;
        let mut keys = Vec::new();
        for i in 0..4 {
            let resp = http
                .post(format!("{}/api/runners", a.base))
                .bearer_auth(MANAGER)
                .json(&json!({"name": format!("r{i}")}))
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
        let urls = vec![a.base.clone(), b.base.clone()];

        // Round 1: 16 claimers spread over both servers; each job claimed once.
        let tasks: Vec<_> = (0..16)
            .map(|i| tokio::spawn(drain(http.clone(), urls.clone(), keys[i % 4].clone())))
            .collect();
        let mut claims = Vec::new();
        for t in tasks {
            claims.extend(t.await.unwrap());
        }
        assert_each_claimed_once(&claims, &jobs);
        let claims_total = metric_value(&metrics_of(&http, &a.base).await, "judge_claims_total")
            + metric_value(&metrics_of(&http, &b.base).await, "judge_claims_total");
        assert_eq!(claims_total, 200.0);

        // Shorten every lease to one second; both reapers race for the expired rows.
        let renewals = claims.iter().enumerate().map(|(i, (c, key))| {
            let (id, token) = lease_of(c);
            http.post(format!("{}/api/jobs/{id}/lease", urls[i % 2]))
                .bearer_auth(key)
                .json(&json!({"lease_token": token, "seconds": 1}))
                .send()
        });
        for resp in futures_util::future::join_all(renewals).await {
            assert_eq!(resp.unwrap().status(), StatusCode::OK);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = metrics_of(&http, &a.base).await;
            if metric_value(&text, "judge_jobs{state=\"Queued\"}") == 200.0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "leases were not reaped in time:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (ta, tb) = (
            metrics_of(&http, &a.base).await,
            metrics_of(&http, &b.base).await,
        );
        let expired = metric_value(&ta, "judge_leases_expired_total")
            + metric_value(&tb, "judge_leases_expired_total");
        assert_eq!(
            expired, 200.0,
            "each expired lease reaped exactly once across both servers"
        );
        let refunds =
            metric_value(&ta, "judge_refunds_total") + metric_value(&tb, "judge_refunds_total");
        assert_eq!(refunds, 0.0, "acknowledged claims are not refunded");

        // Round 2: claim again over both servers and finish every job.
        let tasks: Vec<_> = (0..16)
            .map(|i| tokio::spawn(drain(http.clone(), urls.clone(), keys[i % 4].clone())))
            .collect();
        let mut second = Vec::new();
        for t in tasks {
            second.extend(t.await.unwrap());
        }
        assert_each_claimed_once(&second, &jobs);
        let view = http
            .get(format!("{}/api/jobs/{}", b.base, jobs[7]))
            .bearer_auth(MANAGER)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap();
        assert_eq!(
            (view["deliveries"].as_i64(), view["refunds"].as_i64()),
            (Some(2), Some(0))
        );
        a.stop();
        b.stop();
        db.cleanup().await;
    }
}

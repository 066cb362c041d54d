//! The forwarding Runner in the chaos run: `judge-runner forward` claims from the
//! Servers under test (through a fault proxy of its own, like a daemon) and judges
//! at Server B, a `serve` on SQLite with one `daemon` of its own. The faults done
//! to it are a kill -9 (restarted after seconds) and a SIGSTOP past A's lease;
//! B itself is left alone (its own faults are the faults above, one hop away).
//!
//! What the checker asks of B afterwards: no submission spent twice (every B
//! submission made under exactly one idempotency key, and every key names one A
//! attempt), and nothing left running there.

use std::net::SocketAddr;
use std::time::Duration;

use nix::sys::signal::Signal;

use super::db::Db;
use super::e2e_common::{Daemon, DaemonOpts, Forwarder, Scene, Serve, ServeOpts, TOKEN};
use super::proxy::Proxy;

/// B's daemon: its box and validator box (+500) clear of every other daemon of
/// both backends' runs (100..330 and 600..830).
pub fn b_first_box(sqlite: bool) -> u32 {
    900 + if sqlite { 30 } else { 0 }
}

pub struct ForwardSide {
    pub b: Serve,
    pub b_database: String,
    pub b_daemon: Option<Daemon>,
    pub b_first_box: u32,
    /// The forwarder's Runner key at A, and its runner id there.
    pub key: String,
    pub runner_id: i64,
    pub proxy: Proxy,
    pub forwarder: Option<Forwarder>,
    pub stopped: bool,
    pub starts: u32,
}

impl ForwardSide {
    pub async fn start(
        scene: &Scene,
        upstreams: Vec<SocketAddr>,
        key: String,
        runner_id: i64,
        seed: u64,
        sqlite: bool,
    ) -> ForwardSide {
        let opts = ServeOpts::sqlite(&scene.path("server-b"), 30);
        let b_database = opts.database.clone();
        std::fs::create_dir_all(scene.path("server-b")).unwrap();
        let b = Serve::start(&opts, &scene.path("server-b.log"));
        let b_key = b.manager().create_runner("b-daemon").await.unwrap().key;
        let first_box = b_first_box(sqlite);
        let b_daemon = Daemon::start(
            &DaemonOpts {
                server: &b.url,
                key: &b_key,
                first_box,
                slots: 1,
                cache: &scene.path("b-cache"),
                cgroup_parent: &scene.cgroup_parent,
                tmp: scene.dir.path(),
            },
            &scene.path("b-daemon.log"),
        );
        b_daemon.wait_started().await;
        let proxy = Proxy::start(upstreams, seed ^ 0xf0f0).await;
        let mut side = ForwardSide {
            b,
            b_database,
            b_daemon: Some(b_daemon),
            b_first_box: first_box,
            key,
            runner_id,
            proxy,
            forwarder: None,
            stopped: false,
            starts: 0,
        };
        side.start_forwarder(scene);
        side.forwarder.as_ref().unwrap().wait_started().await;
        side
    }

    pub fn start_forwarder(&mut self, scene: &Scene) {
        self.starts += 1;
        let forwarder = Forwarder::start(
            scene,
            &self.proxy.url(),
            &self.key,
            &self.b.url,
            TOKEN,
            &format!("forwarder-{}.log", self.starts),
            &["--languages", "c,cpp,python3"],
        );
        self.forwarder = Some(forwarder);
        self.stopped = false;
    }

    pub fn kill(&mut self) {
        if let Some(mut f) = self.forwarder.take() {
            f.signal(Signal::SIGKILL);
            f.wait_exit(Duration::from_secs(10));
        }
        self.stopped = false;
    }

    pub fn stop(&mut self) {
        if let Some(f) = &self.forwarder {
            f.signal(Signal::SIGSTOP);
            self.stopped = true;
        }
    }

    pub fn cont(&mut self) {
        if let Some(f) = &self.forwarder {
            f.signal(Signal::SIGCONT);
        }
        self.stopped = false;
    }

    /// SIGTERM to the forwarder, then to B's daemon; each finishes or releases what
    /// it holds and exits.
    pub fn shut_down(&mut self) {
        if let Some(mut f) = self.forwarder.take() {
            f.signal(Signal::SIGCONT);
            f.signal(Signal::SIGTERM);
            if f.wait_exit(Duration::from_secs(90)).is_none() {
                f.signal(Signal::SIGKILL);
                f.wait_exit(Duration::from_secs(10));
            }
        }
        if let Some(mut d) = self.b_daemon.take() {
            d.signal(Signal::SIGTERM);
            if d.wait_exit(Duration::from_secs(60)).is_none() {
                d.signal(Signal::SIGKILL);
                d.wait_exit(Duration::from_secs(10));
            }
        }
    }
}

/// What B holds after the run.
#[derive(Debug, Default)]
pub struct BLedger {
    pub submissions: usize,
    pub violations: Vec<String>,
}

/// Every submission at B was made under exactly one `Idempotency-Key`, and every
/// key names one attempt at A, so no A attempt was spent at B twice; every B
/// submission's latest attempt has ended.
/// B's own daemon may still be judging a submission whose A attempt ended
/// (cancelled at A, or judged by B after A took the job back): waited for first.
pub async fn check_b(side: &ForwardSide) -> BLedger {
    let db = Db::connect(&side.b_database).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    while std::time::Instant::now() < deadline
        && db
            .jobs()
            .await
            .iter()
            .any(|j| matches!(j.state.as_str(), "Queued" | "Running"))
    {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let submissions = db.submissions().await;
    let keys = db.submission_keys().await;
    let jobs = db.jobs().await;
    let mut ledger = BLedger {
        submissions: submissions.len(),
        violations: Vec::new(),
    };
    let mut by_submission = std::collections::BTreeMap::<i64, Vec<&str>>::new();
    for (key, submission) in &keys {
        by_submission.entry(*submission).or_default().push(key);
    }
    let mut attempts = std::collections::BTreeSet::new();
    for (key, _) in &keys {
        // judge-runner-forward:<origin>:job-<id>:attempt-<n>
        let tail: Vec<&str> = key.rsplitn(3, ':').collect();
        if tail.len() != 3 || !tail[0].starts_with("attempt-") || !tail[1].starts_with("job-") {
            ledger
                .violations
                .push(format!("B: key {key:?} names no attempt at A"));
        } else if !attempts.insert((tail[1].to_string(), tail[0].to_string())) {
            ledger
                .violations
                .push(format!("B: A's {} {} has two keys", tail[1], tail[0]));
        }
    }
    for s in &submissions {
        match by_submission.get(&s.id).map(Vec::len) {
            Some(1) => {}
            n => ledger.violations.push(format!(
                "B: submission {} made under {} idempotency key(s): spent twice or from nowhere",
                s.id,
                n.unwrap_or(0)
            )),
        }
        let latest = jobs
            .iter()
            .filter(|j| j.submission_id == s.id)
            .max_by_key(|j| j.attempt);
        if let Some(j) = latest
            && matches!(j.state.as_str(), "Queued" | "Running")
        {
            ledger.violations.push(format!(
                "B: submission {} still {} after the run",
                s.id, j.state
            ));
        }
    }
    ledger
}

//! A `judge-runner forward` process for the end-to-end tests (tests/e2e_forward.rs)
//! and the chaos harness (tests/chaos).

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::{BIN, Scene, free_port, metric_value};

/// A `judge-runner forward` process; its log is a file.
pub struct Forwarder {
    child: Child,
    pub log: PathBuf,
    pub metrics: String,
}

impl Forwarder {
    pub fn start(
        scene: &Scene,
        a: &str,
        key: &str,
        b: &str,
        token: &str,
        log: &str,
        extra: &[&str],
    ) -> Self {
        let log = scene.path(log);
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let metrics = format!("127.0.0.1:{}", free_port());
        let child = Command::new(BIN)
            .args(["forward", "--server", a, "--to", b, "--in-flight", "2"])
            .args(["--metrics", &metrics])
            .args(extra)
            .env("JUDGE_RUNNER_KEY", key)
            .env("JUDGE_FORWARD_TOKEN", token)
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .env("TMPDIR", scene.dir.path())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        Forwarder {
            child,
            log,
            metrics,
        }
    }

    pub fn signal(&self, signal: Signal) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        nix::sys::signal::kill(pid, signal).unwrap();
    }

    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        super::wait_exit(&mut self.child, timeout)
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// One sample (`name` with its labels), `None` while it does not answer.
    pub async fn metric(&self, name: &str) -> Option<f64> {
        let text = reqwest::get(format!("http://{}/metrics", self.metrics))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        metric_value(&text, name)
    }

    pub async fn wait_started(&self) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while self.metric("judge_runner_slots").await.is_none() {
            assert!(
                Instant::now() < deadline,
                "forwarder not started: {}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

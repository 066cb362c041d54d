//! End-to-end helpers: real `judge-runner serve` and `judge-runner daemon`
//! processes on loopback, a manager client, slow test packages, cleanup of the
//! cgroups a test's daemons made.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use judge_runner::demo::manager::Manager;
use judge_runner::protocol::{Id, JobView, SubmissionFile};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

pub mod disk;
mod forwarder;
pub mod postgres;
#[allow(unused_imports)] // used by e2e_forward and chaos only
pub use forwarder::Forwarder;

pub const BIN: &str = env!("CARGO_BIN_EXE_judge-runner");
pub const TOKEN: &str = "e2e-manager-token";

pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/problems")
}

/// A port nobody listens on right now (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The child's exit status once it has exited, or `None` after `timeout`.
pub fn wait_exit(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// A `judge-runner serve` process.
pub struct Serve {
    child: Child,
    pub url: String,
    pub listen: String,
    pub log: PathBuf,
}

#[derive(Clone)]
pub struct ServeOpts {
    pub database: String,
    pub storage: PathBuf,
    pub lease_seconds: u64,
    pub listen: String,
}

impl ServeOpts {
    /// SQLite in `dir`, a free port, short leases.
    pub fn sqlite(dir: &Path, lease_seconds: u64) -> ServeOpts {
        ServeOpts {
            database: format!("sqlite://{}", dir.join("judge.db").display()),
            storage: dir.join("storage"),
            lease_seconds,
            listen: "127.0.0.1:0".to_string(),
        }
    }
}

impl Serve {
    pub fn start(opts: &ServeOpts, log: &Path) -> Serve {
        Serve::start_with(opts, log, &[])
    }

    /// [`Serve::start`] with more flags (`--public-url URL`, ...).
    pub fn start_with(opts: &ServeOpts, log: &Path, extra: &[&str]) -> Serve {
        let stderr = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let mut child = Command::new(BIN)
            .args([
                "serve",
                "--listen",
                &opts.listen,
                "--database",
                &opts.database,
            ])
            .arg("--storage")
            .arg(&opts.storage)
            .args(["--lease-seconds", &opts.lease_seconds.to_string()])
            .args(["--reap-interval", "0.5"])
            .args(extra)
            .env("JUDGE_MANAGER_TOKEN", TOKEN)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| {
                panic!(
                    "serve did not say where it listens; log: {}",
                    fs::read_to_string(log).unwrap_or_default()
                )
            });
        let url = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line of serve: {line:?}"))
            .trim()
            .to_string();
        let listen = url.trim_start_matches("http://").to_string();
        Serve {
            child,
            url,
            listen,
            log: log.to_path_buf(),
        }
    }

    pub fn manager(&self) -> Manager {
        Manager::new(&self.url, TOKEN)
    }

    /// Whether the process has exited (it is reaped if so).
    pub fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A `judge-runner daemon` process; its log is a file.
pub struct Daemon {
    child: Child,
    pub log: PathBuf,
    pub metrics: String,
    pub cgroup_parent: String,
}

pub struct DaemonOpts<'a> {
    pub server: &'a str,
    pub key: &'a str,
    pub first_box: u32,
    pub slots: u32,
    pub cache: &'a Path,
    pub cgroup_parent: &'a str,
    /// The daemon's `TMPDIR`: its work directory goes there, and with the scene.
    pub tmp: &'a Path,
}

impl Daemon {
    pub fn start(opts: &DaemonOpts<'_>, log: &Path) -> Daemon {
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let metrics = format!("127.0.0.1:{}", free_port());
        let child = Command::new(BIN)
            .args(["daemon", "--server", opts.server, "--key", opts.key])
            .args(["--first-box", &opts.first_box.to_string()])
            .args(["--slots", &opts.slots.to_string()])
            .arg("--cache")
            .arg(opts.cache)
            .args(["--cgroup-parent", opts.cgroup_parent])
            .args(["--metrics", &metrics])
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .env("TMPDIR", opts.tmp)
            // The scene's own box locks: daemons of one scene meet there, and
            // tests of another checkout on this host never refuse ours.
            .env(
                judge_runner::sandbox::BOX_LOCK_DIR_ENV,
                opts.tmp.join("box-locks"),
            )
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        Daemon {
            child,
            log: log.to_path_buf(),
            metrics,
            cgroup_parent: opts.cgroup_parent.to_string(),
        }
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).unwrap())
    }

    pub fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).unwrap();
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        wait_exit(&mut self.child, timeout)
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The daemon's Prometheus text, empty while it does not answer.
    pub async fn metrics_text(&self) -> String {
        match reqwest::get(format!("http://{}/metrics", self.metrics)).await {
            Ok(response) => response.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// Waits until the daemon has started (self-test and probes done: its
    /// metrics answer), at most 90 s.
    pub async fn wait_started(&self) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while self.metric("judge_runner_slots").await.is_none() {
            assert!(
                Instant::now() < deadline,
                "daemon not started: {}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// One unlabelled sample of the daemon's metrics, `None` while it does not answer.
    pub async fn metric(&self, name: &str) -> Option<f64> {
        metric_value(&self.metrics_text().await, name)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of an unlabelled sample in Prometheus text.
pub fn metric_value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// A test's private scene: temp dir, cgroup parent, cleanup of both.
pub struct Scene {
    pub dir: tempfile::TempDir,
    pub cgroup_parent: String,
}

impl Scene {
    pub fn new(name: &str) -> Scene {
        Scene {
            dir: tempfile::Builder::new()
                .prefix(&format!("e2e-{name}-"))
                .tempdir()
                .unwrap(),
            cgroup_parent: format!("judge-runner-test-{}-{name}", std::process::id()),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A Server on SQLite in the scene's directory, logging to `serve.log`.
    pub fn serve(&self, lease_seconds: u64) -> Serve {
        Serve::start(
            &ServeOpts::sqlite(self.dir.path(), lease_seconds),
            &self.path("serve.log"),
        )
    }

    pub fn daemon(&self, server: &str, key: &str, first_box: u32, log: &str) -> Daemon {
        self.daemon_with_cache(server, key, first_box, log, &self.path("cache"))
    }

    pub fn daemon_with_cache(
        &self,
        server: &str,
        key: &str,
        first_box: u32,
        log: &str,
        cache: &Path,
    ) -> Daemon {
        Daemon::start(
            &DaemonOpts {
                server,
                key,
                first_box,
                slots: 1,
                cache,
                cgroup_parent: &self.cgroup_parent,
                tmp: self.dir.path(),
            },
            &self.path(log),
        )
    }

    /// The logs of every process of the scene, for a failing assertion.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        if let Ok(entries) = fs::read_dir(self.dir.path()) {
            for e in entries.flatten() {
                if e.path().extension().is_some_and(|x| x == "log") {
                    out.push_str(&format!(
                        "==== {}\n{}\n",
                        e.path().display(),
                        fs::read_to_string(e.path()).unwrap_or_default()
                    ));
                }
            }
        }
        out
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        remove_cgroups(&self.cgroup_parent);
    }
}

/// Kills what is left in the cgroups under `parent` and removes them (a daemon
/// killed with SIGKILL leaves its empty box cgroups behind).
pub fn remove_cgroups(parent: &str) {
    let Ok(roots) = fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    let mut dirs: Vec<PathBuf> = roots
        .flatten()
        .map(|e| e.path().join(parent))
        .filter(|p| p.is_dir())
        .collect();
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        dirs.push(Path::new("/sys/fs/cgroup").join(parent));
    }
    for dir in dirs {
        if let Ok(children) = fs::read_dir(&dir) {
            for child in children.flatten().filter(|c| c.path().is_dir()) {
                kill_procs(&child.path());
                let _ = fs::remove_dir(child.path());
            }
        }
        let _ = fs::remove_dir(&dir);
    }
}

fn kill_procs(cgroup: &Path) {
    for _ in 0..50 {
        let procs = fs::read_to_string(cgroup.join("cgroup.procs")).unwrap_or_default();
        let pids: Vec<i32> = procs
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The processes still in the cgroups under `parent` (all hierarchies).
pub fn processes_in(parent: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    let Ok(roots) = fs::read_dir("/sys/fs/cgroup") else {
        return pids;
    };
    for root in roots.flatten() {
        let Ok(children) = fs::read_dir(root.path().join(parent)) else {
            continue;
        };
        for child in children.flatten() {
            let procs = fs::read_to_string(child.path().join("cgroup.procs")).unwrap_or_default();
            pids.extend(procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        }
    }
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// A pass-fail package whose every test makes the reference solution sleep:
/// `tests` tests, each answered after `sleep` seconds of wall time (no CPU).
pub fn slow_problem(dir: &Path, tests: usize) -> PathBuf {
    slow_problem_with(dir, tests, 2)
}

/// [`slow_problem`] with its own time limit (the wall limit is twice it plus 1 s).
pub fn slow_problem_with(dir: &Path, tests: usize, time_limit: u32) -> PathBuf {
    let root = dir.join(format!("slow-{tests}-{time_limit}"));
    fs::create_dir_all(root.join("data/secret")).unwrap();
    fs::write(
        root.join("problem.yaml"),
        format!("name: Slow Echo\nlimits:\n  time_limit: {time_limit}\n  memory: 256\n"),
    )
    .unwrap();
    for i in 0..tests {
        fs::write(
            root.join(format!("data/secret/{i:02}.in")),
            format!("{i}\n"),
        )
        .unwrap();
        fs::write(
            root.join(format!("data/secret/{i:02}.ans")),
            format!("{i}\n"),
        )
        .unwrap();
    }
    root
}

/// The submission for [`slow_problem`]: echoes its input after `sleep` seconds.
pub fn slow_echo(sleep: f64) -> Vec<SubmissionFile> {
    let source =
        format!("import sys, time\ntime.sleep({sleep})\nsys.stdout.write(sys.stdin.read())\n");
    vec![SubmissionFile::from_bytes("echo.py", source.as_bytes())]
}

/// Uploads a package directory; answers its problem id and SHA-256.
/// Submits `slow_echo(sleep)` in python3 to `problem`: its job id.
pub async fn submit_echo(manager: &Manager, problem: Id, sleep: f64) -> Id {
    manager
        .submit(problem, "python3", slow_echo(sleep))
        .await
        .unwrap()
        .job_id
}

pub async fn upload(manager: &Manager, dir: &Path) -> (Id, String) {
    let bytes = judge_runner::demo::examples::tar_gz(dir).unwrap();
    let created = manager.upload_problem(bytes, None).await.unwrap();
    (created.problem_id, created.sha256)
}

/// Polls the job until `done` holds for it, or panics after `timeout`.
pub async fn wait_job(
    manager: &Manager,
    job: Id,
    timeout: Duration,
    what: &str,
    done: impl Fn(&JobView) -> bool,
) -> JobView {
    let start = Instant::now();
    loop {
        if let Ok(view) = manager.job(job).await
            && done(&view)
        {
            return view;
        }
        assert!(
            start.elapsed() < timeout,
            "job {job}: {what} not reached within {timeout:?}: {:?}",
            manager.job(job).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The job is final.
pub fn is_final(view: &JobView) -> bool {
    view.state.is_final()
}

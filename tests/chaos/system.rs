//! The system under test and the faults done to it: Servers, PostgreSQL, daemons
//! behind their proxies, and the small file systems under `--storage` and the cache.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use rand::Rng;
use rand::rngs::StdRng;

use super::e2e_common::disk::{Tmpfs, fill};
use super::e2e_common::{Daemon, DaemonOpts, Scene, Serve, ServeOpts, TOKEN, free_port};
use super::forward::ForwardSide;
use super::pg::Postgres;
use super::proxy::{Link, Proxy};
use super::receiver::Receiver;
use judge_runner::demo::manager::Manager;

pub const LEASE_SECONDS: u64 = 5;
pub const DAEMONS: usize = 3;
/// High enough that the faults of a run never exhaust a job's deliveries: a job
/// Failed with `deliveries.exhausted` would be the contract working, not a loss,
/// but it would hide the verdict the checker compares.
pub const DELIVERY_CAP: u32 = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    KillDaemon(usize),
    StopDaemon(usize),
    KillServer(usize),
    RestartPostgres,
    PostgresOutage,
    RevokeKey(usize),
    FillStorage,
    FillCache,
    Delay(usize),
    Loss(usize),
    Partition(usize),
    KillForwarder,
    StopForwarder,
}

impl Fault {
    pub fn class(&self) -> &'static str {
        match self {
            Fault::KillDaemon(_) => "kill -9 daemon",
            Fault::StopDaemon(_) => "SIGSTOP daemon past its lease",
            Fault::KillServer(_) => "kill -9 serve",
            Fault::RestartPostgres => "pg_ctl restart -m immediate",
            Fault::PostgresOutage => "PostgreSQL down for seconds",
            Fault::RevokeKey(_) => "Runner key revoked, new key",
            Fault::FillStorage => "--storage file system full",
            Fault::FillCache => "package cache file system full",
            Fault::Delay(_) => "link delay",
            Fault::Loss(_) => "link loss",
            Fault::Partition(_) => "link partition",
            Fault::KillForwarder => "kill -9 forwarder",
            Fault::StopForwarder => "SIGSTOP forwarder past its lease",
        }
    }
}

/// What a fault left to undo, and when.
#[derive(Debug)]
enum Undo {
    StartDaemon(usize),
    ContDaemon(usize),
    StartServer(usize),
    Heal(usize),
    Unfill(PathBuf),
    StartPostgres,
    StartForwarder,
    ContForwarder,
}

pub struct ServerSlot {
    pub opts: ServeOpts,
    pub serve: Option<Serve>,
    /// Which start of this Server (its log is `server-<i>-<start>.log`).
    pub starts: u32,
    /// The last metrics read from each start.
    pub last_metrics: BTreeMap<u32, String>,
}

pub struct DaemonSlot {
    pub first_box: u32,
    pub key: String,
    pub runner_id: i64,
    pub proxy: Proxy,
    pub daemon: Option<Daemon>,
    pub stopped: bool,
    pub starts: u32,
}

pub struct System {
    pub backend: Backend,
    pub scene: Scene,
    pub pg: Option<Postgres>,
    pub servers: Vec<ServerSlot>,
    pub daemons: Vec<DaemonSlot>,
    /// The forwarding Runner and its Server B.
    pub forward: Option<ForwardSide>,
    pub receiver: Receiver,
    pub storage: PathBuf,
    pub cache: PathBuf,
    pub started: Instant,
    pub injected: BTreeMap<&'static str, u32>,
    /// What the probes made of the Servers during a fault (a hang, a 500, a
    /// partial file): each a violation.
    pub probe_violations: Vec<String>,
    pending: Vec<(Instant, Undo)>,
    /// Unmounted when the run ends (dropped after the processes are stopped).
    mounts: Vec<Tmpfs>,
    keep: bool,
}

impl System {
    pub async fn start(backend: Backend, seed: u64) -> Option<System> {
        let pg = match backend {
            Backend::Postgres => Some(Postgres::start()?),
            Backend::Sqlite => None,
        };
        let scene = Scene::new(&format!("chaos-{}", seed % 10_000));
        let storage = scene.path("storage");
        let cache = scene.path("cache");
        let mounts = vec![Tmpfs::mount(&storage, "48m"), Tmpfs::mount(&cache, "48m")];
        let receiver = Receiver::start().await;
        let database = match &pg {
            Some(pg) => pg.url(),
            None => format!("sqlite://{}", scene.path("judge.db").display()),
        };
        let count = if pg.is_some() { 2 } else { 1 };
        let servers = (0..count)
            .map(|_| ServerSlot {
                opts: ServeOpts {
                    database: database.clone(),
                    storage: storage.clone(),
                    lease_seconds: LEASE_SECONDS,
                    listen: format!("127.0.0.1:{}", free_port()),
                },
                serve: None,
                starts: 0,
                last_metrics: BTreeMap::new(),
            })
            .collect();
        let mut sys = System {
            backend,
            scene,
            pg,
            servers,
            daemons: Vec::new(),
            forward: None,
            receiver,
            storage,
            cache,
            started: Instant::now(),
            injected: BTreeMap::new(),
            probe_violations: Vec::new(),
            pending: Vec::new(),
            mounts,
            keep: false,
        };
        for i in 0..sys.servers.len() {
            sys.start_server(i);
        }
        let upstreams: Vec<SocketAddr> = sys
            .servers
            .iter()
            .map(|s| s.opts.listen.parse().unwrap())
            .collect();
        for i in 0..DAEMONS {
            let created = sys
                .manager()
                .create_runner(&format!("chaos-{i}"))
                .await
                .unwrap();
            let proxy = Proxy::start(upstreams.clone(), seed.wrapping_add(i as u64)).await;
            sys.daemons.push(DaemonSlot {
                // Disjoint from the other backend's run, which may run beside it.
                first_box: 100 * (i as u32 + 1) + if backend == Backend::Sqlite { 30 } else { 0 },
                key: created.key,
                runner_id: created.runner_id,
                proxy,
                daemon: None,
                stopped: false,
                starts: 0,
            });
            sys.start_daemon(i);
        }
        for d in &sys.daemons {
            d.daemon.as_ref().unwrap().wait_started().await;
        }
        let created = sys
            .manager()
            .create_runner("chaos-forwarder")
            .await
            .unwrap();
        let side = ForwardSide::start(
            &sys.scene,
            upstreams,
            created.key,
            created.runner_id,
            seed,
            backend == Backend::Sqlite,
        )
        .await;
        sys.forward = Some(side);
        Some(sys)
    }

    pub fn elapsed(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    fn start_server(&mut self, i: usize) {
        let slot = &mut self.servers[i];
        slot.starts += 1;
        let log = self.scene.path(&format!("server-{i}-{}.log", slot.starts));
        let cap = DELIVERY_CAP.to_string();
        let serve = Serve::start_with(
            &slot.opts,
            &log,
            &[
                "--delivery-cap",
                &cap,
                "--webhook-secret",
                "chaos-webhook-secret",
                "--webhook-allow-private",
                "--webhook-backoff",
                "0.5",
                "--webhook-timeout",
                "3",
            ],
        );
        slot.serve = Some(serve);
    }

    fn start_daemon(&mut self, i: usize) {
        let slot = &mut self.daemons[i];
        slot.starts += 1;
        let url = slot.proxy.url();
        let daemon = Daemon::start(
            &DaemonOpts {
                server: &url,
                key: &slot.key,
                first_box: slot.first_box,
                slots: 1,
                cache: &self.cache,
                cgroup_parent: &self.scene.cgroup_parent,
                tmp: self.scene.dir.path(),
            },
            &self.scene.path(&format!("daemon-{i}-{}.log", slot.starts)),
        );
        slot.daemon = Some(daemon);
        slot.stopped = false;
    }

    /// A manager on a Server that is up.
    pub fn manager(&self) -> Manager {
        self.managers().into_iter().next().expect("a Server is up")
    }

    /// Managers on every Server that is up, first the lowest.
    pub fn managers(&self) -> Vec<Manager> {
        self.servers
            .iter()
            .filter_map(|s| s.serve.as_ref())
            .map(|s| Manager::new(&s.url, TOKEN))
            .collect()
    }

    pub fn server_urls(&self) -> Vec<String> {
        self.servers
            .iter()
            .filter_map(|s| s.serve.as_ref().map(|s| s.url.clone()))
            .collect()
    }

    /// Reads every live Server's metrics (the ledger keeps the last of each start),
    /// and undoes the faults that are due.
    pub async fn tick(&mut self) {
        self.read_metrics().await;
        let now = Instant::now();
        let due: Vec<Undo> = {
            let (due, keep): (Vec<_>, Vec<_>) =
                self.pending.drain(..).partition(|(at, _)| *at <= now);
            self.pending = keep;
            due.into_iter().map(|(_, u)| u).collect()
        };
        for undo in due {
            self.undo(undo);
        }
    }

    async fn read_metrics(&mut self) {
        for slot in &mut self.servers {
            let Some(serve) = &slot.serve else { continue };
            let url = format!("{}/metrics", serve.url);
            let text = async {
                reqwest::Client::new()
                    .get(&url)
                    .timeout(Duration::from_secs(2))
                    .send()
                    .await
                    .ok()?
                    .text()
                    .await
                    .ok()
            }
            .await;
            if let Some(text) = text.filter(|t| t.contains("judge_claims_total")) {
                slot.last_metrics.insert(slot.starts, text);
            }
        }
    }

    fn undo(&mut self, undo: Undo) {
        match undo {
            Undo::StartDaemon(i) => self.start_daemon(i),
            Undo::ContDaemon(i) => {
                if let Some(d) = &self.daemons[i].daemon {
                    d.signal(Signal::SIGCONT);
                }
                self.daemons[i].stopped = false;
            }
            Undo::StartServer(i) => self.start_server(i),
            Undo::Heal(i) => self.daemons[i].proxy.set(Link::Normal),
            Undo::Unfill(file) => {
                let _ = std::fs::remove_file(file);
            }
            Undo::StartPostgres => {
                if let Some(pg) = &self.pg {
                    assert!(pg.start_again(), "pg_ctl start failed");
                }
            }
            Undo::StartForwarder => {
                if let Some(f) = &mut self.forward {
                    f.start_forwarder(&self.scene);
                }
            }
            Undo::ContForwarder => {
                if let Some(f) = &mut self.forward {
                    f.cont();
                }
            }
        }
    }

    fn daemon_busy(&self, i: usize) -> bool {
        self.pending.iter().any(|(_, u)| {
            matches!(u, Undo::StartDaemon(j) | Undo::ContDaemon(j) | Undo::Heal(j) if *j == i)
        })
    }

    /// A fault the system can take now (never all of it down at once): at most one
    /// Server down, at most two of the three daemons hit, one fill at a time.
    pub fn pick_fault(&self, rng: &mut StdRng) -> Option<Fault> {
        let d = rng.random_range(0..DAEMONS);
        let s = rng.random_range(0..self.servers.len());
        let fault = match rng.random_range(0..12) {
            0 => Fault::KillDaemon(d),
            1 => Fault::StopDaemon(d),
            2 => Fault::KillServer(s),
            3 if self.pg.is_some() && rng.random_bool(0.5) => Fault::RestartPostgres,
            3 if self.pg.is_some() => Fault::PostgresOutage,
            3 => Fault::KillServer(s),
            4 => Fault::RevokeKey(d),
            5 if rng.random_bool(0.5) => Fault::FillStorage,
            5 => Fault::FillCache,
            6 => Fault::Delay(d),
            7 => Fault::Loss(d),
            8 | 9 => Fault::Partition(d),
            10 => Fault::KillForwarder,
            _ => Fault::StopForwarder,
        };
        let daemons_hit = (0..DAEMONS).filter(|&j| self.daemon_busy(j)).count();
        let ok = match fault {
            Fault::KillDaemon(i)
            | Fault::StopDaemon(i)
            | Fault::RevokeKey(i)
            | Fault::Delay(i)
            | Fault::Loss(i)
            | Fault::Partition(i) => !self.daemon_busy(i) && daemons_hit < DAEMONS - 1,
            Fault::KillServer(i) => {
                // A Server starting while the database is down exits (a unit
                // manager restarts it); the harness restarts it once it is up.
                self.servers.iter().all(|s| s.serve.is_some())
                    && !self
                        .pending
                        .iter()
                        .any(|(_, u)| matches!(u, Undo::StartPostgres))
                    && !self
                        .pending
                        .iter()
                        .any(|(_, u)| matches!(u, Undo::StartServer(_)))
                    && self.servers[i].serve.is_some()
            }
            Fault::RestartPostgres | Fault::PostgresOutage => {
                self.servers.iter().all(|s| s.serve.is_some())
                    && !self
                        .pending
                        .iter()
                        .any(|(_, u)| matches!(u, Undo::StartPostgres))
            }
            Fault::FillStorage | Fault::FillCache => !self
                .pending
                .iter()
                .any(|(_, u)| matches!(u, Undo::Unfill(_))),
            Fault::KillForwarder | Fault::StopForwarder => {
                self.forward.is_some()
                    && !self
                        .pending
                        .iter()
                        .any(|(_, u)| matches!(u, Undo::StartForwarder | Undo::ContForwarder))
            }
        };
        ok.then_some(fault)
    }

    pub async fn inject(&mut self, fault: Fault, rng: &mut StdRng) {
        *self.injected.entry(fault.class()).or_default() += 1;
        let now = Instant::now();
        let secs = |rng: &mut StdRng, lo: u64, hi: u64| {
            now + Duration::from_millis(rng.random_range(lo * 1000..hi * 1000))
        };
        match fault {
            Fault::KillDaemon(i) => {
                if let Some(mut d) = self.daemons[i].daemon.take() {
                    d.signal(Signal::SIGKILL);
                    d.wait_exit(Duration::from_secs(10));
                }
                self.pending.push((secs(rng, 1, 4), Undo::StartDaemon(i)));
            }
            Fault::StopDaemon(i) => {
                if let Some(d) = &self.daemons[i].daemon {
                    d.signal(Signal::SIGSTOP);
                    self.daemons[i].stopped = true;
                }
                let past = LEASE_SECONDS + 2;
                self.pending
                    .push((secs(rng, past, past + 3), Undo::ContDaemon(i)));
            }
            Fault::KillServer(i) => {
                self.read_metrics().await;
                if let Some(mut s) = self.servers[i].serve.take() {
                    s.kill();
                }
                self.pending.push((secs(rng, 1, 3), Undo::StartServer(i)));
            }
            Fault::RestartPostgres => {
                if let Some(pg) = &self.pg {
                    assert!(pg.restart_immediate(), "pg_ctl restart failed");
                }
            }
            Fault::PostgresOutage => {
                if let Some(pg) = &self.pg {
                    assert!(pg.stop_immediate(), "pg_ctl stop failed");
                }
                self.probe_unavailable("PostgreSQL is down").await;
                self.pending.push((secs(rng, 2, 6), Undo::StartPostgres));
            }
            Fault::RevokeKey(i) => self.revoke_and_renew(i).await,
            Fault::FillStorage | Fault::FillCache => {
                let dir = if fault == Fault::FillStorage {
                    &self.storage
                } else {
                    &self.cache
                };
                let file = dir.join(".chaos-fill");
                fill(&file);
                if fault == Fault::FillStorage {
                    self.probe_full_storage().await;
                }
                self.pending.push((secs(rng, 2, 8), Undo::Unfill(file)));
            }
            Fault::Delay(i) => {
                let ms = rng.random_range(50..800);
                self.daemons[i]
                    .proxy
                    .set(Link::Delay(Duration::from_millis(ms)));
                self.pending.push((secs(rng, 3, 10), Undo::Heal(i)));
            }
            Fault::Loss(i) => {
                let p = rng.random_range(0.05..0.4);
                self.daemons[i].proxy.set(Link::Loss(p));
                self.pending.push((secs(rng, 3, 10), Undo::Heal(i)));
            }
            Fault::Partition(i) => {
                self.daemons[i].proxy.set(Link::Partition);
                self.pending.push((secs(rng, 2, 12), Undo::Heal(i)));
            }
            Fault::KillForwarder => {
                if let Some(f) = &mut self.forward {
                    f.kill();
                }
                self.pending.push((secs(rng, 1, 5), Undo::StartForwarder));
            }
            Fault::StopForwarder => {
                if let Some(f) = &mut self.forward {
                    f.stop();
                }
                let past = LEASE_SECONDS + 2;
                self.pending
                    .push((secs(rng, past, past + 3), Undo::ContForwarder));
            }
        }
    }

    /// While the database is down every Server still answers, at once and with
    /// 503 `unavailable`, never a hang, a 500 or a crash.
    async fn probe_unavailable(&mut self, why: &str) {
        for (i, slot) in self.servers.iter_mut().enumerate() {
            let Some(serve) = &mut slot.serve else {
                continue;
            };
            let started = Instant::now();
            let answer = reqwest::Client::new()
                .get(format!("{}/api/jobs/1", serve.url))
                .bearer_auth(TOKEN)
                .timeout(Duration::from_secs(15))
                .send()
                .await;
            let took = started.elapsed();
            let status = answer.as_ref().map(|r| r.status().as_u16()).ok();
            let body = match answer {
                Ok(r) => r.text().await.unwrap_or_default(),
                Err(e) => e.to_string(),
            };
            if status != Some(503)
                || took > Duration::from_secs(10)
                || !body.contains("unavailable")
            {
                self.probe_violations.push(format!(
                    "server {i} while {why}: {status:?} after {took:?}: {body}"
                ));
            }
            if serve.exited() {
                self.probe_violations
                    .push(format!("server {i} exited while {why}"));
            }
        }
    }

    /// With `--storage` full an upload is refused with 503 or 507 and leaves no
    /// partial file.
    async fn probe_full_storage(&mut self) {
        let before = files_under(&self.storage);
        let copy = self.scene.path("full-disk-upload");
        let _ = std::fs::remove_dir_all(&copy);
        super::workload::copy_dir(&super::e2e_common::examples_dir().join("groups"), &copy);
        // Big enough not to fit in the last bytes a fill leaves, and random, so
        // that gzip cannot make it small.
        let padding: Vec<u8> = (0..256 * 1024).map(|_| rand::random::<u8>()).collect();
        std::fs::write(copy.join("data/padding.bin"), padding).unwrap();
        let bytes = judge_runner::demo::examples::tar_gz(&copy).unwrap();
        let _ = std::fs::remove_dir_all(&copy);
        // The one Server of the SQLite run may be down (killed just before).
        let Some(m) = self.managers().into_iter().next() else {
            return;
        };
        let answer = reqwest::Client::new()
            .post(format!("{}/api/problems", m.base_url()))
            .bearer_auth(TOKEN)
            .body(bytes)
            .timeout(Duration::from_secs(15))
            .send()
            .await;
        let status = answer.as_ref().map(|r| r.status().as_u16()).ok();
        if !matches!(status, Some(503 | 507)) {
            self.probe_violations.push(format!(
                "an upload to a full --storage answered {status:?}, not 503 or 507"
            ));
        }
        // Only what an upload writes: Runners go on attaching (empty) logs meanwhile.
        let after = files_under(&self.storage);
        let new: Vec<_> = after
            .difference(&before)
            .filter(|p| {
                p.starts_with(self.storage.join("packages"))
                    || p.starts_with(self.storage.join("tmp"))
            })
            .collect();
        if !new.is_empty() {
            self.probe_violations
                .push(format!("a refused upload left {new:?} in --storage"));
        }
    }

    /// The Runner's key is revoked while its daemon runs (its held job goes back to
    /// Queued, its calls get 401 and it stops); a new key is issued and the daemon
    /// started again with it, as an operator would.
    async fn revoke_and_renew(&mut self, i: usize) {
        let old = self.daemons[i].runner_id;
        let mut revoked = false;
        let created = loop {
            // The one Server of the SQLite run may be down (killed just before):
            // wait for its restart, which tick() does when it is due.
            let Some(m) = self.managers().into_iter().next() else {
                self.tick().await;
                tokio::time::sleep(Duration::from_millis(300)).await;
                continue;
            };
            if !revoked {
                revoked = reqwest::Client::new()
                    .delete(format!("{}/api/runners/{old}", m.base_url()))
                    .bearer_auth(TOKEN)
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
            }
            if revoked && let Ok(c) = m.create_runner(&format!("chaos-{i}-renewed")).await {
                break c;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        };
        self.daemons[i].key = created.key;
        self.daemons[i].runner_id = created.runner_id;
        if let Some(mut d) = self.daemons[i].daemon.take() {
            // A stopped one cannot hear its 401; it is killed like an old host.
            if self.daemons[i].stopped {
                d.signal(Signal::SIGKILL);
            }
            if d.wait_exit(Duration::from_secs(3)).is_none() {
                d.signal(Signal::SIGKILL);
                d.wait_exit(Duration::from_secs(10));
            }
        }
        self.start_daemon(i);
    }

    /// Ends every fault: daemons continued and started, Servers up, links normal,
    /// file systems emptied.
    pub async fn heal(&mut self) {
        let pending: Vec<Undo> = self.pending.drain(..).map(|(_, u)| u).collect();
        for undo in pending {
            self.undo(undo);
        }
        for i in 0..self.servers.len() {
            if self.servers[i].serve.is_none() {
                self.start_server(i);
            }
        }
        for i in 0..DAEMONS {
            self.daemons[i].proxy.set(Link::Normal);
            if self.daemons[i].daemon.is_none() {
                self.start_daemon(i);
            }
        }
        if let Some(f) = &mut self.forward
            && f.forwarder.is_none()
        {
            f.start_forwarder(&self.scene);
        }
    }

    /// SIGTERM to every daemon (each releases or finishes what it holds and exits),
    /// then the last metrics of the Servers.
    pub async fn stop(&mut self) {
        if let Some(f) = &mut self.forward {
            f.shut_down();
        }
        for slot in &mut self.daemons {
            if let Some(d) = &slot.daemon {
                d.signal(Signal::SIGTERM);
            }
        }
        for slot in &mut self.daemons {
            if let Some(mut d) = slot.daemon.take()
                && d.wait_exit(Duration::from_secs(60)).is_none()
            {
                d.signal(Signal::SIGKILL);
                d.wait_exit(Duration::from_secs(10));
            }
        }
        self.read_metrics().await;
    }

    /// Keeps the scene's directory (logs, database) for a failed run; its path.
    pub fn keep_logs(&mut self) -> String {
        self.keep = true;
        self.scene.dir.path().display().to_string()
    }
}

pub fn files_under(dir: &Path) -> std::collections::BTreeSet<PathBuf> {
    let mut out = std::collections::BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            } else {
                out.insert(e.path());
            }
        }
    }
    out
}

impl Drop for System {
    fn drop(&mut self) {
        for d in &mut self.daemons {
            if let Some(mut d) = d.daemon.take() {
                d.signal(Signal::SIGCONT);
                d.signal(Signal::SIGKILL);
                d.wait_exit(Duration::from_secs(10));
            }
        }
        for s in &mut self.servers {
            s.serve.take();
        }
        self.mounts.clear();
        if self.keep {
            let kept = self.scene.dir.path().to_path_buf();
            let _ = std::mem::replace(
                &mut self.scene.dir,
                tempfile::Builder::new()
                    .prefix("chaos-moved-")
                    .tempdir()
                    .unwrap(),
            )
            .keep();
            eprintln!("chaos: logs kept in {}", kept.display());
        }
    }
}

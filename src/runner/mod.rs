//! The Runner daemon (`judge-runner daemon`): claims jobs and trials from a
//! Server, evaluates them through `judge`, keeps their leases alive, attaches
//! `details` and `log`, reports the Result (`../shared/CONTRACT.md` §5).
//!
//! - [`client`]: the protocol calls; `lease.lost` and "unreachable" typed;
//! - [`lease`]: one keeper task per held job (progress, renewals, loss);
//! - [`claim_loop`]: claiming (long poll, backoff, drain), shared with the forwarder;
//! - [`slot`]: one claim loop per slot, pinned to a CPU and a box id;
//! - [`job`]: one claimed piece of work, from package to Result;
//! - [`settle`]: how held work ends at the Server (Result, failure, release);
//! - [`shutdown`]: the three stages of stopping; [`metrics`]: Prometheus text.
//!
//! Imports `judge`, `package` and `protocol`; never `server`. The forwarder
//! (`judge-runner forward`) reuses its client, claim loop, lease keeper, settling,
//! shutdown and metrics.

pub mod backoff;
pub mod claim_loop;
pub mod client;
mod job;
pub mod lease;
pub mod metrics;
mod privileges;
pub mod settle;
pub mod shutdown;
mod slot;
mod work;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::judge::{Judge, JudgeConfig, LanguageConfigError, LanguageTable, ValidatorCache};
use crate::package::{Cache, FetchPolicy, PackageError, ServerKey, UnpackLimits};

pub use client::{Client, ClientError, WorkRef};
pub use metrics::Metrics;
pub use shutdown::Shutdown;
pub use slot::plan_cpus;

/// Everything a daemon needs, independent of clap (the demo builds one too).
#[derive(Debug, Clone)]
pub struct Config {
    /// Base URL of the Server.
    pub server: String,
    /// This Runner's key.
    pub key: String,
    /// Slots evaluating in parallel; `None`: CPUs − 1, at least 1.
    pub slots: Option<u32>,
    /// Box id of the first slot; slot `i` uses `first_box + i`.
    pub first_box: u32,
    pub cache_dir: PathBuf,
    pub cache_size: u64,
    pub unpack: UnpackLimits,
    /// Languages to offer; `None`: every configured language whose toolchain is here.
    pub languages: Option<Vec<String>>,
    /// A language table replacing the built-in one.
    pub language_config: Option<PathBuf>,
    pub cgroup_parent: String,
    /// Serve Prometheus text on this address.
    pub metrics: Option<SocketAddr>,
    /// How long a claim waits on the Server for work (long poll).
    pub claim_wait: Duration,
    /// Pin each slot's sandboxes to a CPU of its own.
    pub pin_cpus: bool,
    /// Where the work directory and its lock go; `None`: the temp dir.
    pub work_base: Option<PathBuf>,
}

impl Config {
    /// The contract's defaults for this Server and key.
    pub fn new(server: impl Into<String>, key: impl Into<String>) -> Self {
        Config {
            server: server.into(),
            key: key.into(),
            slots: None,
            first_box: 0,
            cache_dir: PathBuf::from("packages-cache"),
            cache_size: 10 << 30,
            unpack: UnpackLimits::default(),
            languages: None,
            language_config: None,
            cgroup_parent: crate::sandbox::DEFAULT_CGROUP_PARENT.to_string(),
            metrics: None,
            // Short enough that a stopping daemon, which waits for the answer
            // of a claim in flight (it may bring work), exits within seconds.
            claim_wait: Duration::from_secs(5),
            pin_cpus: true,
            work_base: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("cannot open the package cache: {0}")]
    Cache(#[from] PackageError),
    /// The Server answered 401 (or 403) to this daemon's key at start-up.
    #[error(
        "the Server at {server} refuses this Runner key ({status} {code}: {message}); check --key / JUDGE_RUNNER_KEY (a key comes from POST /api/runners)"
    )]
    KeyRefused {
        server: String,
        status: u16,
        code: String,
        message: String,
    },
    #[error("cannot load the language table: {0}")]
    Languages(#[from] LanguageConfigError),
    #[error("no language to offer: {detail}")]
    NoLanguages { detail: String },
    #[error("box ids {first}..{first}+{slots} go past {max} (lower --first-box or --slots)")]
    BoxIds { first: u32, slots: usize, max: u32 },
    /// Another daemon, `judge` or `verify` holds some of this daemon's box ids.
    #[error("cannot take this daemon's box ids: {0}")]
    Boxes(#[from] crate::judge::BoxLockError),
    #[error("work directory {}: {source}", path.display())]
    WorkDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("another daemon holds {} (its box ids are in use; choose another --first-box)", path.display())]
    WorkDirBusy { path: PathBuf },
    /// `hint`: what this process visibly lacks (`privileges::diagnose`), as
    /// "; missing ..." or empty.
    #[error("slot {slot}: the sandbox does not work on this host: {source}{hint}")]
    SelfTest {
        slot: usize,
        source: crate::judge::JudgeError,
        hint: String,
    },
    #[error("cannot serve metrics on {addr}: {source}")]
    Metrics {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// A daemon ready to run: its slots built, its languages probed.
pub struct Daemon {
    slots: Vec<slot::RunnerSlot>,
    languages: Vec<String>,
    metrics: Arc<Metrics>,
    metrics_addr: Option<SocketAddr>,
    /// Removed when the daemon ends, after every slot.
    work: work::WorkRoot,
    /// The slots' and validators' box ids, released last.
    boxes: crate::judge::BoxLock,
}

impl Daemon {
    /// Opens the cache, probes the toolchains, plans the slots. Blocking work
    /// (toolchain probes) runs on a blocking thread.
    pub async fn build(config: Config) -> Result<Daemon, RunnerError> {
        let client = Client::new(&config.server, &config.key)?;
        check_key(&client, &config.server).await?;
        let table = match &config.language_config {
            Some(path) => LanguageTable::from_file(path)?,
            None => LanguageTable::builtin()?,
        };
        let slot_count = config
            .slots
            .map_or_else(default_slots, |n| n.max(1) as usize);
        let last_box = u64::from(config.first_box) + slot_count as u64 - 1;
        if last_box > u64::from(crate::judge::MAX_BOX_ID) {
            return Err(RunnerError::BoxIds {
                first: config.first_box,
                slots: slot_count,
                max: crate::judge::MAX_BOX_ID,
            });
        }
        // Every box id for the daemon's life, before anything touches one.
        let slots_u32 = u32::try_from(slot_count).unwrap_or(u32::MAX);
        let boxes = crate::judge::BoxLock::acquire(
            crate::judge::slot_box_ids(config.first_box, slots_u32),
            "daemon",
        )?;
        let work = work::WorkRoot::claim(config.work_base.as_deref(), config.first_box)?;
        let cache = open_cache(&config, &client)?;
        let cpus = slot::plan_cpus(slot_count, config.pin_cpus);
        let validators = Arc::new(ValidatorCache::in_dir(work.path().to_path_buf()));
        let judges: Vec<Arc<Judge>> = (0..slot_count)
            .map(|i| {
                let offset = u32::try_from(i).unwrap_or(u32::MAX);
                let mut judge =
                    JudgeConfig::new(table.clone(), config.first_box.saturating_add(offset));
                judge.cpu = cpus[i];
                judge.cgroup_parent = config.cgroup_parent.clone();
                judge.validators = Arc::clone(&validators);
                judge.work_root = Some(work.path().to_path_buf());
                Arc::new(Judge::new(judge))
            })
            .collect();
        let testing = judges.clone();
        tokio::task::spawn_blocking(move || {
            testing.iter().enumerate().try_for_each(|(slot, judge)| {
                judge.self_test().map_err(|source| RunnerError::SelfTest {
                    slot,
                    source,
                    hint: privileges::diagnose()
                        .map(|d| format!("; {d}"))
                        .unwrap_or_default(),
                })
            })
        })
        .await
        .map_err(|e| RunnerError::SelfTest {
            slot: 0,
            hint: String::new(),
            source: crate::judge::JudgeError::RunFailed {
                what: "running the start-up self-test".to_string(),
                message: e.to_string(),
            },
        })??;
        let probe = Arc::clone(&judges[0]);
        let wanted = config.languages.clone();
        let languages = tokio::task::spawn_blocking(move || offered_languages(&probe, wanted))
            .await
            .map_err(|e| RunnerError::NoLanguages {
                detail: e.to_string(),
            })??;
        let metrics = Arc::new(Metrics::default());
        let shared = Arc::new(slot::Shared {
            client,
            cache,
            metrics: Arc::clone(&metrics),
            languages: languages.clone(),
            claim_wait: config.claim_wait,
            problems: job::ProblemMemo::default(),
        });
        let slots = judges
            .into_iter()
            .enumerate()
            .map(|(index, judge)| slot::RunnerSlot::new(index, judge, Arc::clone(&shared)))
            .collect();
        Ok(Daemon {
            slots,
            languages,
            metrics,
            metrics_addr: config.metrics,
            work,
            boxes,
        })
    }

    pub fn languages(&self) -> &[String] {
        &self.languages
    }

    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.metrics)
    }

    /// Runs every slot until `shutdown` has drained them; held work is reported
    /// or released first.
    pub async fn run(self, shutdown: Shutdown) -> Result<(), RunnerError> {
        let stop_metrics = CancellationToken::new();
        if let Some(addr) = self.metrics_addr {
            let bound = metrics::serve(
                addr,
                Arc::clone(&self.metrics),
                self.slots.len(),
                stop_metrics.clone(),
            )
            .await
            .map_err(|source| RunnerError::Metrics { addr, source })?;
            tracing::info!(addr = %bound, "metrics on /metrics");
        }
        tracing::info!(
            slots = self.slots.len(),
            languages = %self.languages.join(","),
            "runner started"
        );
        let tasks: Vec<_> = self
            .slots
            .into_iter()
            .map(|slot| tokio::spawn(slot.run(shutdown.clone())))
            .collect();
        for task in tasks {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "a slot task ended abnormally");
            }
        }
        stop_metrics.cancel();
        drop(self.work);
        drop(self.boxes);
        tracing::info!("runner stopped");
        Ok(())
    }
}

/// A key the Server refuses at start-up ends the daemon (CONTRACT §5); a Server
/// that does not answer does not: the daemon starts and its claims keep trying.
pub async fn check_key(client: &Client, server: &str) -> Result<(), RunnerError> {
    match client.check_key().await {
        Ok(()) => Ok(()),
        Err(ClientError::Refused {
            status,
            code,
            message,
            ..
        }) => Err(RunnerError::KeyRefused {
            server: server.to_string(),
            status,
            code,
            message,
        }),
        Err(err) => {
            tracing::warn!(error = %err, "cannot check the key now: the Server does not answer; starting anyway");
            Ok(())
        }
    }
}

/// CPUs − 1 (one is left to the daemon, the Server, the kernel), at least 1.
pub fn default_slots() -> usize {
    crate::sandbox::usable_cpus().len().saturating_sub(1).max(1)
}

/// Downloads from the Server's origin carry the Runner key (`GET
/// /api/packages/{sha256}` is a Runner call); a package URL on another origin
/// (a CDN, an object store) is fetched without it (CONTRACT §5).
fn open_cache(config: &Config, client: &Client) -> Result<Cache, RunnerError> {
    let key = ServerKey::new(client.base_url().as_str(), &config.key).map_err(|e| {
        RunnerError::Client(ClientError::BadUrl {
            url: config.server.clone(),
            detail: e.detail,
        })
    })?;
    Ok(Cache::open_with_key(
        &config.cache_dir,
        config.cache_size,
        config.unpack,
        FetchPolicy::default(),
        Some(key),
    )?)
}

/// The configured languages whose toolchain is on this host, narrowed to
/// `wanted` when given (a wanted one that is missing is a warning, not an error:
/// the host may lack one toolchain and still serve the rest).
fn offered_languages(
    judge: &Judge,
    wanted: Option<Vec<String>>,
) -> Result<Vec<String>, RunnerError> {
    let available: Vec<String> = judge
        .available_languages()
        .into_iter()
        .map(|(id, toolchain)| {
            tracing::info!(language = %id, toolchain = %toolchain, "toolchain found");
            id
        })
        .collect();
    let offered: Vec<String> = match wanted {
        None => available.clone(),
        Some(wanted) => wanted
            .into_iter()
            .filter(|id| {
                let here = available.contains(id);
                if !here {
                    tracing::warn!(language = %id, "not offered: not configured or its toolchain is missing");
                }
                here
            })
            .collect(),
    };
    if offered.is_empty() {
        return Err(RunnerError::NoLanguages {
            detail: format!(
                "toolchains found for [{}]; check --languages and the language table",
                available.join(", ")
            ),
        });
    }
    Ok(offered)
}

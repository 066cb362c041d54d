//! The forwarding Runner (`judge-runner forward`, CONTRACT §7): claims jobs from
//! a Server ("A") exactly as a daemon does — the same key check, claim loop,
//! long poll, backoff, lease keeper, settling and shutdown stages from
//! `runner` — but judges each at another judging service ("B") instead of in
//! sandboxes of its own, under A's lease rules (docs/runner.md, "Forwarding").
//!
//! - [`backend`]: the trait a judging service is reached through;
//! - [`judge_server`]: the one built, another judge-runner Server;
//! - [`job`]: one claimed job, from submission to A's Result;
//! - [`callbacks`]: the webhook listener (`--callback-listen`);
//! - [`metrics`]: its counters beside the Runner's;
//! - `staging`: where A's packages are checked before B gets them.
//!
//! Imports `runner` (client, claim loop, lease keeper, settle, shutdown,
//! metrics), `package` (fetching A's packages) and `protocol`; never `server`,
//! `judge` or `sandbox`. Only `commands` and `demo` import it.

pub mod backend;
pub mod callbacks;
mod job;
pub mod judge_server;
pub mod metrics;
mod staging;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use sha2::{Digest as _, Sha256};
use tokio_util::sync::CancellationToken;

use crate::package::{FetchPolicy, ServerKey};
use crate::runner::backoff::Backoff;
use crate::runner::claim_loop::ClaimLoop;
use crate::runner::{Client, ClientError, Metrics, RunnerError, Shutdown};

use backend::Backend as _;
use callbacks::Waiters;
use job::{Context, Lane};
use judge_server::{JudgeServer, PackageSource};
use metrics::ForwardCounters;

pub use job::job_key;

/// Everything a forwarder needs, independent of clap.
#[derive(Debug, Clone)]
pub struct Config {
    /// A: the Server jobs are claimed from.
    pub server: String,
    /// The forwarder's Runner key at A.
    pub key: String,
    /// B: the Server jobs are judged at.
    pub to: String,
    /// The forwarder's token at B.
    pub to_token: String,
    /// Jobs held at once (the daemon's slots).
    pub in_flight: u32,
    /// Where B's `attempt.ended` webhooks are received; `None`: polling only.
    pub callback_listen: Option<SocketAddr>,
    /// The URL B is given for them; `None`: `http://<callback_listen>/attempt-ended`.
    pub callback_url: Option<String>,
    /// Languages offered to A.
    pub languages: Vec<String>,
    /// Serve Prometheus text on this address.
    pub metrics: Option<SocketAddr>,
    /// How long a claim waits on A for work (long poll).
    pub claim_wait: Duration,
    /// Where packages wait between A and B; `None`: the temp dir.
    pub staging: Option<PathBuf>,
    /// The largest package handed on.
    pub max_package: u64,
}

impl Config {
    pub fn new(
        server: impl Into<String>,
        key: impl Into<String>,
        to: impl Into<String>,
        to_token: impl Into<String>,
        languages: Vec<String>,
    ) -> Self {
        Config {
            server: server.into(),
            key: key.into(),
            to: to.into(),
            to_token: to_token.into(),
            in_flight: DEFAULT_IN_FLIGHT,
            callback_listen: None,
            callback_url: None,
            languages,
            metrics: None,
            claim_wait: Duration::from_secs(5),
            staging: None,
            max_package: 4 << 30,
        }
    }
}

/// Jobs a forwarder holds at once unless told (`--in-flight`): waiting on B
/// costs a connection and a timer, not a CPU.
pub const DEFAULT_IN_FLIGHT: u32 = 8;

#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// A refuses the Runner key, or A's URL is unusable (the daemon's errors).
    #[error(transparent)]
    Runner(#[from] RunnerError),
    /// B refuses the token (or its URL is unusable).
    #[error("{0}")]
    Service(String),
    #[error("{0}")]
    Config(String),
    #[error("cannot make a staging directory in {}: {source}", path.display())]
    Staging {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot serve {what} on {addr}: {source}")]
    Listen {
        what: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
}

impl From<ClientError> for ForwardError {
    fn from(err: ClientError) -> Self {
        ForwardError::Runner(RunnerError::Client(err))
    }
}

/// A forwarder ready to run: both ends checked.
pub struct Forwarder {
    ctx: Arc<Context<JudgeServer>>,
    lanes: usize,
    languages: Vec<String>,
    claim_wait: Duration,
    metrics_addr: Option<SocketAddr>,
    callback_listen: Option<SocketAddr>,
    /// Removed when the forwarder ends (or by the next one, after a SIGKILL).
    _staging: staging::Staging,
}

impl Forwarder {
    /// Checks A's key and B's token (either refused: an error, exit 1).
    pub async fn build(config: Config) -> Result<Forwarder, ForwardError> {
        if config.languages.is_empty() {
            return Err(ForwardError::Config(
                "--languages names no language".to_string(),
            ));
        }
        let client = Client::new(&config.server, &config.key)?;
        crate::runner::check_key(&client, &config.server).await?;
        let staging_parent = config.staging.clone().unwrap_or_else(std::env::temp_dir);
        let staging =
            staging::Staging::create(&staging_parent).map_err(|source| ForwardError::Staging {
                path: staging_parent,
                source,
            })?;
        let key = ServerKey::new(client.base_url().as_str(), &config.key)
            .map_err(|e| ForwardError::Config(e.to_string()))?;
        let backend = JudgeServer::new(
            &config.to,
            &config.to_token,
            callback_url(&config)?,
            PackageSource {
                key: Some(key),
                staging: staging.path().to_path_buf(),
                max_bytes: config.max_package,
                policy: FetchPolicy::default(),
            },
        )
        .map_err(ForwardError::Config)?;
        backend
            .check_access()
            .await
            .map_err(ForwardError::Service)?;
        let waiters = config.callback_listen.map(|_| Arc::new(Waiters::default()));
        let ctx = Context {
            origin: origin(client.base_url().as_str()),
            client,
            metrics: Arc::new(Metrics::default()),
            counters: Arc::new(ForwardCounters::default()),
            backend,
            waiters,
            suspect: AtomicBool::new(false),
        };
        Ok(Forwarder {
            ctx: Arc::new(ctx),
            lanes: config.in_flight.max(1) as usize,
            languages: config.languages,
            claim_wait: config.claim_wait,
            metrics_addr: config.metrics,
            callback_listen: config.callback_listen,
            _staging: staging,
        })
    }

    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.ctx.metrics)
    }

    /// Runs every lane until `shutdown` has drained them.
    pub async fn run(self, shutdown: Shutdown) -> Result<(), ForwardError> {
        let stop = CancellationToken::new();
        if let (Some(addr), Some(waiters)) = (self.callback_listen, &self.ctx.waiters) {
            let bound = callbacks::serve(addr, Arc::clone(waiters), stop.clone())
                .await
                .map_err(|source| ForwardError::Listen {
                    what: "the webhook listener",
                    addr,
                    source,
                })?;
            tracing::info!(addr = %bound, "webhooks from the judging service on {}", callbacks::PATH);
        }
        if let Some(addr) = self.metrics_addr {
            let ctx = Arc::clone(&self.ctx);
            let lanes = self.lanes;
            let render = move || {
                if let Some(waiters) = &ctx.waiters {
                    ctx.counters.set_webhooks(waiters.received());
                }
                ctx.metrics.render(lanes) + &ctx.counters.render()
            };
            let bound = crate::runner::metrics::serve_text(addr, render, stop.clone())
                .await
                .map_err(|source| ForwardError::Listen {
                    what: "metrics",
                    addr,
                    source,
                })?;
            tracing::info!(addr = %bound, "metrics on /metrics");
        }
        tracing::info!(
            in_flight = self.lanes,
            languages = %self.languages.join(","),
            to = %self.ctx.backend.describe(),
            webhooks = self.ctx.waiters.is_some(),
            "forwarder started"
        );
        let languages = Arc::new(self.languages);
        let tasks: Vec<_> = (0..self.lanes)
            .map(|index| {
                let (ctx, languages, shutdown) = (
                    Arc::clone(&self.ctx),
                    Arc::clone(&languages),
                    shutdown.clone(),
                );
                let claim_wait = self.claim_wait;
                tokio::spawn(async move {
                    let claims = ClaimLoop {
                        client: &ctx.client,
                        metrics: &ctx.metrics,
                        languages: &languages,
                        claim_wait,
                        slot: index,
                    };
                    let mut lane = Lane {
                        ctx: &ctx,
                        index,
                        waiting_for_service: Backoff::new(
                            Duration::from_millis(500),
                            Duration::from_secs(30),
                        ),
                    };
                    claims.run(&mut lane, &shutdown).await;
                })
            })
            .collect();
        for task in tasks {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "a lane ended abnormally");
            }
        }
        stop.cancel();
        tracing::info!("forwarder stopped");
        Ok(())
    }
}

/// The URL B is to POST webhooks to, if any.
fn callback_url(config: &Config) -> Result<Option<String>, ForwardError> {
    match (&config.callback_url, config.callback_listen) {
        (Some(url), Some(_)) => Ok(Some(url.clone())),
        (Some(_), None) => Err(ForwardError::Config(
            "--callback-url needs --callback-listen (the address the forwarder listens on)"
                .to_string(),
        )),
        (None, Some(addr)) if addr.ip().is_unspecified() => Err(ForwardError::Config(format!(
            "--callback-listen {addr} names no address B could reach; give --callback-url too"
        ))),
        (None, Some(addr)) => Ok(Some(format!("http://{addr}{}", callbacks::PATH))),
        (None, None) => Ok(None),
    }
}

/// A's identity in idempotency keys: the first 16 hex digits of the SHA-256 of
/// its base URL (every forwarder of A must name it by the same URL).
fn origin(base_url: &str) -> String {
    let digest = hex::encode(Sha256::digest(base_url.as_bytes()));
    digest[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_callback_url_follows_the_listener() {
        let mut config = Config::new("http://a", "k", "http://b", "t", vec!["c".into()]);
        assert_eq!(callback_url(&config).unwrap(), None);
        config.callback_listen = Some("127.0.0.1:9000".parse().unwrap());
        assert_eq!(
            callback_url(&config).unwrap().as_deref(),
            Some("http://127.0.0.1:9000/attempt-ended")
        );
        config.callback_listen = Some("0.0.0.0:9000".parse().unwrap());
        assert!(
            callback_url(&config).is_err(),
            "0.0.0.0 is nowhere B can reach"
        );
        config.callback_url = Some("http://forwarder.internal:9000/attempt-ended".into());
        assert_eq!(
            callback_url(&config).unwrap().as_deref(),
            Some("http://forwarder.internal:9000/attempt-ended")
        );
        config.callback_listen = None;
        assert!(callback_url(&config).is_err());
    }

    #[test]
    fn origins_are_short_and_stable() {
        assert_eq!(origin("http://a:8080/"), origin("http://a:8080/"));
        assert_ne!(origin("http://a:8080/"), origin("http://b:8080/"));
        assert_eq!(origin("http://a:8080/").len(), 16);
    }
}

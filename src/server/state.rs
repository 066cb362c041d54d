//! `Config` (a plain struct: the CLI, the demo and tests all build one) and
//! `AppState`, what every handler shares.

use std::ops::Deref;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest as _, Sha256};
use tokio::sync::Notify;

use super::ServerError;
use super::clock::{Clock, SystemClock};
use super::db::Db;
use super::metrics::Metrics;
use super::storage::Storage;

/// Everything `serve` needs, independent of clap.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on, e.g. `127.0.0.1:8080` (`:0` picks a free port).
    pub listen: String,
    /// `sqlite://FILE` (created when missing) or `postgres://...`.
    pub database: String,
    pub storage: PathBuf,
    /// Lease granted on a claim.
    pub lease_seconds: u64,
    /// Deliveries after which work goes to Failed (`deliveries.exhausted`).
    pub delivery_cap: u32,
    pub reap_interval: Duration,
    /// Base URL Runners reach this Server at, for package URLs in claims; `None`:
    /// from each claim request's `Host` header.
    pub public_url: Option<String>,
    /// Largest JSON body accepted.
    pub max_body: u64,
    /// Largest package or attachment upload accepted.
    pub max_upload: u64,
    /// The manager token (every scope). Must not be empty.
    pub manager_token: String,
    /// Database connections this server may hold.
    pub max_connections: u32,
    /// Longest `wait_seconds` a claim may ask for.
    pub max_claim_wait: Duration,
    /// Languages a submission or trial may name (`--languages`); any other is
    /// refused with 422 `language.unknown`.
    pub languages: Vec<String>,
    /// `--map-language FROM=TO`: a submission or trial naming FROM is stored
    /// (and judged) as TO, which must be in `languages` (python3 → pypy3 is
    /// Kattis' Python 3). The first mapping of a language wins.
    pub language_map: Vec<(String, String)>,
    /// Webhook settings (`callback_url`).
    pub webhooks: WebhookConfig,
}

/// How `attempt.ended` events are signed and delivered.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// `JUDGE_WEBHOOK_SECRET`: the HMAC-SHA256 key. Without it `callback_url` is refused.
    pub secret: Option<String>,
    /// Accept callback URLs on loopback, private and link-local addresses and the
    /// Server's own host (`--webhook-allow-private`; tests, private networks).
    pub allow_private: bool,
    /// One delivery's time limit (connect + answer).
    pub timeout: Duration,
    /// First retry delay; doubled per failure (capped at `max_backoff`), with jitter.
    pub backoff: Duration,
    pub max_backoff: Duration,
    /// Retries stop this long after the event was written.
    pub give_up_after: Duration,
    /// How often the sender looks for due events.
    pub poll: Duration,
    /// Settled events (delivered or given up) are deleted this long after they
    /// settled (`--webhook-retention`); pending ones never.
    pub retention: Duration,
    /// How often a sender deletes what is past `retention`.
    pub prune_every: Duration,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        WebhookConfig {
            secret: None,
            allow_private: false,
            timeout: Duration::from_secs(10),
            backoff: Duration::from_secs(2),
            max_backoff: Duration::from_secs(3600),
            give_up_after: Duration::from_secs(24 * 3600),
            poll: Duration::from_millis(500),
            retention: Duration::from_secs(7 * 24 * 3600),
            prune_every: Duration::from_secs(60),
        }
    }
}

/// `serve --languages`' default (CONTRACT §4) as the flag writes it: the
/// contract's five, all in the Runner's built-in language table (a test in
/// `cli.rs` checks that; the Server itself never reads that table).
pub const DEFAULT_LANGUAGES: &str = "c,cpp,python3,rust,java";

impl Config {
    /// The contract's defaults, with the three things nobody can default.
    pub fn new(
        database: impl Into<String>,
        storage: impl Into<PathBuf>,
        manager_token: impl Into<String>,
    ) -> Self {
        Config {
            listen: "127.0.0.1:8080".to_string(),
            database: database.into(),
            storage: storage.into(),
            lease_seconds: 120,
            delivery_cap: 5,
            reap_interval: Duration::from_secs(2),
            public_url: None,
            max_body: 16 << 20,
            max_upload: 1 << 30,
            manager_token: manager_token.into(),
            max_connections: 16,
            max_claim_wait: Duration::from_secs(60),
            languages: DEFAULT_LANGUAGES.split(',').map(String::from).collect(),
            language_map: Vec::new(),
            webhooks: WebhookConfig::default(),
        }
    }
}

impl Config {
    /// Refuses settings the Server cannot honour.
    pub fn check(&self) -> Result<(), ServerError> {
        if self.manager_token.trim().is_empty() {
            return Err(ServerError::NoManagerToken);
        }
        let bad = |what: &str| Err(ServerError::Config(what.to_string()));
        if self.lease_seconds == 0 || self.lease_seconds > 7 * 24 * 3600 {
            return bad("--lease-seconds must be between 1 and 604800");
        }
        if self.delivery_cap == 0 {
            return bad("--delivery-cap must be at least 1");
        }
        if self.languages.is_empty() || self.languages.iter().any(|l| l.trim().is_empty()) {
            return bad("--languages must name at least one language, without empty names");
        }
        if let Some((from, to)) = self
            .language_map
            .iter()
            .find(|(from, to)| from == to || !self.languages.contains(to))
        {
            return Err(ServerError::Config(format!(
                "--map-language {from}={to}: {to} must be one of --languages (and differ from {from})"
            )));
        }
        if self.webhooks.secret.as_ref().is_some_and(|s| s.is_empty()) {
            return bad("JUDGE_WEBHOOK_SECRET must not be empty when set");
        }
        if let Some(url) = &self.public_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return bad("--public-url must start with http:// or https://");
        }
        Ok(())
    }
}

/// Shared by every handler and the reaper; cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

pub struct Shared {
    pub db: Db,
    pub storage: Storage,
    pub metrics: Arc<Metrics>,
    pub clock: Arc<dyn Clock>,
    pub config: Config,
    /// Woken when work may have become claimable on this server, so waiting
    /// claims answer at once instead of at their next poll.
    pub queue_changed: Notify,
    /// Runner keys already seen on this server (see [`RunnerKeyCache`]).
    pub runner_keys: RunnerKeyCache,
    /// What this server last wrote of each Runner's calls (`GET /api/runners`).
    pub runner_activity: crate::server::activity::RunnerActivity,
    manager_token_digest: [u8; 32],
}

impl Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl Shared {
    /// The language a submission naming `language` is stored under
    /// (`--map-language`), or 422 when this Server does not accept it
    /// (`--languages`; a mapped language is accepted when its target is).
    pub fn check_language(&self, language: &str) -> Result<String, crate::server::error::ApiError> {
        let mapped = self
            .config
            .language_map
            .iter()
            .find(|(from, _)| from == language)
            .map_or(language, |(_, to)| to.as_str());
        if self.config.languages.iter().any(|l| l == mapped) {
            return Ok(mapped.to_string());
        }
        Err(crate::server::error::ApiError::LanguageUnknown {
            language: language.to_string(),
            accepted: self.config.languages.clone(),
        })
    }
}

impl AppState {
    /// Connects and migrates the database and opens the storage directory.
    pub async fn open(config: Config, clock: Arc<dyn Clock>) -> Result<AppState, ServerError> {
        config.check()?;
        let metrics = Arc::new(Metrics::default());
        let db = Db::connect(
            &config.database,
            config.max_connections,
            config.delivery_cap,
            metrics.clone(),
        )
        .await?;
        let storage = Storage::open(&config.storage).await?;
        Ok(AppState(Arc::new(Shared {
            db,
            storage,
            metrics,
            clock,
            manager_token_digest: digest(&config.manager_token),
            config,
            queue_changed: Notify::new(),
            runner_keys: RunnerKeyCache::default(),
            runner_activity: Default::default(),
        })))
    }

    /// [`AppState::open`] on the wall clock.
    pub async fn open_with_system_clock(config: Config) -> Result<AppState, ServerError> {
        Self::open(config, Arc::new(SystemClock)).await
    }

    pub fn manager_token_digest(&self) -> &[u8; 32] {
        &self.manager_token_digest
    }

    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Work may have become claimable: wake this server's waiting claims.
    pub fn notify_queue(&self) {
        self.queue_changed.notify_waiters();
    }
}

/// Runner keys seen on this server: digest → runner id. The mapping never
/// changes (a key belongs to one runner for ever), so it needs no expiry;
/// revocation is not cached here but read from the database where it matters.
#[derive(Debug, Default)]
pub struct RunnerKeyCache {
    keys: std::sync::RwLock<std::collections::HashMap<String, i64>>,
}

impl RunnerKeyCache {
    pub(super) fn get(&self, key_hash: &str) -> Option<i64> {
        self.keys.read().ok()?.get(key_hash).copied()
    }

    pub(super) fn insert(&self, key_hash: String, runner_id: i64) {
        if let Ok(mut keys) = self.keys.write() {
            keys.insert(key_hash, runner_id);
        }
    }

    /// Forgets a revoked runner's keys (tidiness: the database refuses it anyway).
    pub fn forget_runner(&self, runner_id: i64) {
        if let Ok(mut keys) = self.keys.write() {
            keys.retain(|_, id| *id != runner_id);
        }
    }
}

/// The SHA-256 of a secret (the manager token, a runner key, an API token): what
/// is stored and compared, never the secret itself.
pub fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

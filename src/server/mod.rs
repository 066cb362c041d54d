//! The Server (`judge-runner serve`): jobs, leases, fencing, reaper, results and
//! trials over HTTP, on SQLite or PostgreSQL. Never imports `runner`, `judge` or
//! `sandbox`.
//!
//! - [`router`] builds the axum router over an [`AppState`] (tests drive it with
//!   `oneshot`);
//! - [`start`] opens the state, binds, and runs the router and the reaper in the
//!   background, answering a [`ServerHandle`] (tests, the demo);
//! - [`serve`] is `start` until SIGINT/SIGTERM (the `serve` command).

pub mod activity;
pub mod auth;
pub mod clock;
pub mod console;
pub mod db;
pub mod error;
pub mod extract;
pub mod idempotency;
pub mod metrics;
pub mod packages;
pub mod reaper;
pub mod routes;
pub mod state;
pub mod storage;
pub mod webhooks;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use clock::{Clock, ManualClock, SystemClock};
pub use routes::router;
pub use state::{AppState, Config, DEFAULT_LANGUAGES, WebhookConfig};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(
        "no manager token: set JUDGE_MANAGER_TOKEN (e.g. `export JUDGE_MANAGER_TOKEN=$(head -c 32 /dev/urandom | base64)`); \
         the Server refuses to start without one"
    )]
    NoManagerToken,
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Db(#[from] db::DbError),
    #[error(transparent)]
    Storage(#[from] storage::StorageError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("the HTTP server failed: {0}")]
    Serve(std::io::Error),
}

/// A running Server: its address, its state, and the way to stop it.
pub struct ServerHandle {
    addr: SocketAddr,
    state: AppState,
    stop: CancellationToken,
    http: JoinHandle<std::io::Result<()>>,
    reaper: JoinHandle<()>,
    webhooks: JoinHandle<()>,
}

impl ServerHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`, what Runners and clients are given.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Stops accepting, lets in-flight requests finish, stops the reaper, closes
    /// the database pool.
    pub async fn shutdown(self) -> Result<(), ServerError> {
        self.stop.cancel();
        let served = self.http.await;
        let _ = self.reaper.await;
        let _ = self.webhooks.await;
        self.state.db.close().await;
        match served {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ServerError::Serve(e)),
            Err(e) => Err(ServerError::Serve(std::io::Error::other(e))),
        }
    }

    /// Waits until the HTTP server ends on its own (it only does on error).
    async fn wait_or(self, stop: impl Future<Output = ()>) -> Result<(), ServerError> {
        stop.await;
        self.shutdown().await
    }
}

/// Opens the database and storage, binds `config.listen`, and serves in the
/// background with the reaper, on `clock`.
pub async fn start(config: Config, clock: Arc<dyn Clock>) -> Result<ServerHandle, ServerError> {
    let listen = config.listen.clone();
    let reap_interval = config.reap_interval;
    let state = AppState::open(config, clock).await?;
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .map_err(|source| ServerError::Bind {
            addr: listen.clone(),
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServerError::Bind {
        addr: listen,
        source,
    })?;
    let stop = CancellationToken::new();
    let app = router(state.clone());
    let http = tokio::spawn(
        axum::serve(listener, app)
            .with_graceful_shutdown(stop.clone().cancelled_owned())
            .into_future(),
    );
    let reaper = tokio::spawn(reaper::run(state.clone(), reap_interval, stop.clone()));
    let webhooks = tokio::spawn(webhooks::run(state.clone(), stop.clone()));
    Ok(ServerHandle {
        addr,
        state,
        stop,
        http,
        reaper,
        webhooks,
    })
}

/// `judge-runner serve`: runs until SIGINT or SIGTERM, then shuts down cleanly.
/// Prints `listening on http://ADDR` on stdout once it accepts connections.
pub async fn serve(config: Config) -> Result<(), ServerError> {
    // The handlers are installed before the address is announced: a SIGTERM
    // sent as soon as `listening on` appears must shut down, not kill.
    let stop = shutdown_signal();
    let handle = start(config, Arc::new(SystemClock)).await?;
    println!("listening on {}", handle.base_url());
    tracing::info!(addr = %handle.addr(), "judge-runner serve: listening");
    handle.wait_or(stop).await?;
    tracing::info!("judge-runner serve: stopped");
    Ok(())
}

/// Installs the SIGINT and SIGTERM handlers now; the future ends at the first
/// of them (never, for one that could not be installed).
fn shutdown_signal() -> impl Future<Output = ()> {
    use tokio::signal::unix::{Signal, SignalKind, signal};
    let wait = |sig: Option<Signal>| async move {
        match sig {
            Some(mut sig) => {
                sig.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    let term = wait(signal(SignalKind::terminate()).ok());
    let interrupt = wait(signal(SignalKind::interrupt()).ok());
    async move {
        tokio::select! {
            () = term => {}
            () = interrupt => {}
        }
    }
}

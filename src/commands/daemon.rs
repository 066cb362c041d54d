//! `judge-runner daemon`: flags → `runner::Config`, signals → `runner::Shutdown`.
//!
//! First SIGTERM/SIGINT: stop claiming; after `--grace` (0 by default) cancel
//! what still runs and release it; exit 0. A second signal: release at once
//! (one short try each) and exit.

use std::process::ExitCode;
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::cli::DaemonArgs;
use crate::package::UnpackLimits;
use crate::runner::{Config, Daemon, Shutdown};

use super::EXIT_FAILURE;

pub fn config_from(args: &DaemonArgs) -> Config {
    let mut config = Config::new(args.server.clone(), args.key.clone());
    config.slots = args.slots;
    config.first_box = args.first_box;
    config.cache_dir = args.cache.clone();
    config.cache_size = args.cache_size.bytes();
    config.unpack = UnpackLimits {
        max_entries: args.unpack.max_entries,
        max_unpacked: args.unpack.max_unpacked.bytes(),
    };
    config.languages = args.languages.clone();
    config.language_config = args.language_config.clone();
    config.cgroup_parent = args.cgroup_parent.clone();
    config.metrics = args.metrics;
    config
}

pub fn run(args: DaemonArgs) -> ExitCode {
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("judge-runner daemon: must run as root (it creates namespaces and cgroups)");
        return ExitCode::from(EXIT_FAILURE);
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("judge-runner daemon: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    let grace = args.grace.duration();
    let config = config_from(&args);
    let outcome = runtime.block_on(async move {
        // Installed before the (seconds long) start-up: a SIGTERM during the
        // self-test or the toolchain probes is kept and stops the daemon before
        // its first claim, instead of killing it mid-setup.
        let signals = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        );
        let daemon = Daemon::build(config).await?;
        let shutdown = Shutdown::new();
        tokio::spawn(watch_signals(signals, shutdown.clone(), grace));
        daemon.run(shutdown).await
    });
    // Blocking judge threads are cancelled by now; do not wait on stragglers.
    runtime.shutdown_timeout(Duration::from_secs(5));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("judge-runner daemon: {e}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

pub(super) async fn watch_signals(
    signals: (std::io::Result<Signal>, std::io::Result<Signal>),
    shutdown: Shutdown,
    grace: Duration,
) {
    let (Ok(mut term), Ok(mut int)) = signals else {
        tracing::error!("cannot install signal handlers; stop the daemon with SIGKILL");
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!(
        grace_seconds = grace.as_secs_f64(),
        "stopping: no more claims; held work will be released"
    );
    shutdown.begin(grace);
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::warn!("second signal: releasing held work and exiting now");
    shutdown.now();
}

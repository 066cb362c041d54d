//! `judge-runner forward`: flags → `forward::Config`, signals → `runner::Shutdown`
//! (the daemon's: first SIGTERM/SIGINT stops claiming, `--grace` lets jobs B has
//! accepted finish, then they are released; a second signal releases at once).

use std::process::ExitCode;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use crate::cli::ForwardArgs;
use crate::forward::{Config, Forwarder};
use crate::runner::Shutdown;

use super::EXIT_FAILURE;

pub fn config_from(args: &ForwardArgs) -> Config {
    let mut config = Config::new(
        args.server.clone(),
        args.key.clone(),
        args.to.clone(),
        args.to_token.clone(),
        args.languages.clone(),
    );
    config.in_flight = args.in_flight;
    config.callback_listen = args.callback_listen;
    config.callback_url = args.callback_url.clone();
    config.metrics = args.metrics;
    config
}

pub fn run(args: ForwardArgs) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("judge-runner forward: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    let grace = args.grace.duration();
    let config = config_from(&args);
    let outcome = runtime.block_on(async move {
        // Installed before the start-up checks: a signal during them is kept.
        let signals = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        );
        let forwarder = Forwarder::build(config).await?;
        let shutdown = Shutdown::new();
        tokio::spawn(super::daemon::watch_signals(
            signals,
            shutdown.clone(),
            grace,
        ));
        forwarder.run(shutdown).await
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("judge-runner forward: {e}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

//! `judge-runner serve`: the command line into a `server::Config`, then serve
//! until SIGINT/SIGTERM. Exit 0 after a clean shutdown, 1 when the Server failed,
//! 2 when its configuration is unusable (no manager token, a zero lease, ...).

use std::process::ExitCode;

use crate::cli::ServeArgs;
use crate::server::{self, Config, ServerError};

pub fn config_from(args: ServeArgs) -> Config {
    let mut config = Config::new(
        args.database,
        args.storage,
        args.manager_token.unwrap_or_default(),
    );
    config.listen = args.listen;
    config.lease_seconds = args.lease_seconds;
    config.delivery_cap = args.delivery_cap;
    config.reap_interval = args.reap_interval.duration();
    config.public_url = args.public_url;
    config.max_body = args.max_body.bytes();
    config.max_upload = args.max_upload.bytes();
    config.max_connections = args.db_connections;
    config.languages = args.languages;
    config.language_map = args
        .map_language
        .into_iter()
        .map(|m| (m.from, m.to))
        .collect();
    config.max_claim_wait = args.max_claim_wait.duration();
    config.webhooks.secret = args.webhook_secret;
    config.webhooks.allow_private = args.webhook_allow_private;
    config.webhooks.timeout = args.webhook_timeout.duration();
    config.webhooks.backoff = args.webhook_backoff.duration();
    config.webhooks.retention = args.webhook_retention.duration();
    config
}

pub fn run(args: ServeArgs) -> ExitCode {
    let config = config_from(args);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("judge-runner serve: cannot start the async runtime: {e}");
            return ExitCode::from(super::EXIT_FAILURE);
        }
    };
    match runtime.block_on(server::serve(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ (ServerError::NoManagerToken | ServerError::Config(_))) => {
            eprintln!("judge-runner serve: {e}");
            ExitCode::from(super::EXIT_USAGE)
        }
        Err(e) => {
            eprintln!("judge-runner serve: {e}");
            ExitCode::from(super::EXIT_FAILURE)
        }
    }
}

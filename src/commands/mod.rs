//! One entry per subcommand: turn parsed arguments into calls of the modules, print
//! what the contract says, and answer an exit status. Sits on top of every module.

mod check;
mod daemon;
mod demo;
mod forward;
mod judge;
mod package;
mod sandbox;
mod serve;
mod verify;

use std::io::IsTerminal as _;
use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

use crate::cli::{Cli, Command};

/// Exit status of a command that failed because of its arguments.
pub const EXIT_USAGE: u8 = 2;
/// Exit status of a command that failed for another reason.
pub const EXIT_FAILURE: u8 = 1;

/// Logs go to stderr (`JUDGE_LOG_FORMAT=json`: one JSON object a line). One-shot
/// commands log warnings only, so their own stderr output (progress, summaries)
/// stays readable; `RUST_LOG` overrides.
pub fn init_tracing(command: &Command) {
    let default = match command {
        Command::Serve(_) | Command::Daemon(_) | Command::Forward(_) => "info",
        Command::Sandbox(_)
        | Command::Judge(_)
        | Command::Package(_)
        | Command::Demo(_)
        | Command::Check(_)
        | Command::Verify(_) => "warn",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    // Colours only for a person at a terminal: journald and files get plain text.
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    // One JSON object per line for log shippers (Loki, Elasticsearch, journald's
    // JSON mode); a variable, not a flag, because the contract owns the flags.
    let _ = if std::env::var("JUDGE_LOG_FORMAT").is_ok_and(|f| f == "json") {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// `--language-config FILE`'s table, or the built-in one.
fn language_table(
    config: Option<&std::path::Path>,
) -> Result<crate::judge::LanguageTable, crate::judge::LanguageConfigError> {
    match config {
        Some(path) => crate::judge::LanguageTable::from_file(path),
        None => crate::judge::LanguageTable::builtin(),
    }
}

pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Sandbox(args) => sandbox::run(args),
        Command::Judge(args) => judge::run(args),
        Command::Package(cmd) => package::run(cmd),
        Command::Serve(args) => serve::run(args),
        Command::Daemon(args) => daemon::run(args),
        Command::Forward(args) => forward::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Check(args) => check::run(args),
        Command::Verify(args) => verify::run(&args),
    }
}

//! Thin entry: parse the command line, start logging, run one subcommand, map its
//! outcome to the exit status (0 done, 1 failed, 2 bad arguments).

use std::process::ExitCode;

use clap::Parser;
use judge_runner::cli::Cli;
use judge_runner::commands;

fn main() -> ExitCode {
    // clap exits with status 2 on bad arguments, as the contract asks.
    let cli = Cli::parse();
    commands::init_tracing(&cli.command);
    commands::run(cli)
}

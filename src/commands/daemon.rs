//! `judge-runner daemon`.

use std::process::ExitCode;

use crate::cli::DaemonArgs;

pub fn run(_args: DaemonArgs) -> ExitCode {
    super::not_yet_implemented("daemon")
}

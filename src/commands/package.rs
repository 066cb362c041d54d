//! `judge-runner package`.

use std::process::ExitCode;

use crate::cli::PackageCommand;

pub fn run(_args: PackageCommand) -> ExitCode {
    super::not_yet_implemented("package")
}

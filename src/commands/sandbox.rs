//! `judge-runner sandbox`.

use std::process::ExitCode;

use crate::cli::SandboxArgs;

pub fn run(_args: SandboxArgs) -> ExitCode {
    super::not_yet_implemented("sandbox")
}

//! `judge-runner serve`.

use std::process::ExitCode;

use crate::cli::ServeArgs;

pub fn run(_args: ServeArgs) -> ExitCode {
    super::not_yet_implemented("serve")
}

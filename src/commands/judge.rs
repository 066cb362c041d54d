//! `judge-runner judge`.

use std::process::ExitCode;

use crate::cli::JudgeArgs;

pub fn run(_args: JudgeArgs) -> ExitCode {
    super::not_yet_implemented("judge")
}

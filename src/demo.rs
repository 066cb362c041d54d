//! `judge-runner demo`: an embedded Server on SQLite in a temp dir, a Runner, the
//! bundled example problems and their submissions, a live progress display and a
//! final table. Sits on top of every module.

use std::process::ExitCode;

use crate::cli::DemoArgs;

pub fn run(_args: DemoArgs) -> ExitCode {
    crate::commands::not_yet_implemented("demo")
}

//! `judge-runner demo`: the flags into [`crate::demo::Options`], the demo's
//! answer into an exit status (0 every verdict matched, 1 otherwise).

use std::process::ExitCode;

use crate::cli::DemoArgs;
use crate::demo::{self, Options};

use super::EXIT_FAILURE;

pub fn run(args: DemoArgs) -> ExitCode {
    let options = Options {
        slots: args.slots,
        keep: args.keep,
        problems: args.problems,
        forward: args.forward,
    };
    match demo::run(options) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(EXIT_FAILURE),
        Err(e) => {
            eprintln!("judge-runner demo: {e:#}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

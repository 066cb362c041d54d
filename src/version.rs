//! The build's identity, reported as a Result's `runner_version`.

/// `0.1.0+abc1234`: crate version plus the git commit it was built from.
pub const RUNNER_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "+",
    env!("JUDGE_RUNNER_GIT_HASH")
);

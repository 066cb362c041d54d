//! Stamps the build with the git commit, so a Result's `runner_version`
//! ("0.1.0+abc1234") names the exact build that produced it.
use std::process::Command;

fn main() {
    let hash = std::env::var("JUDGE_RUNNER_GIT_HASH")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(git_hash)
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=JUDGE_RUNNER_GIT_HASH={hash}");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    println!("cargo:rerun-if-env-changed=JUDGE_RUNNER_GIT_HASH");
}

fn git_hash() -> Option<String> {
    Command::new("git")
        .args(["rev-parse", "--short=7", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

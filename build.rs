//! Stamps the build with the git commit, so a Result's `runner_version`
//! ("0.1.0+abc1234") names the exact build that produced it; and compiles the
//! built-in seccomp policy (`seccomp/default*.json`) to BPF for the target, so a
//! one-shot `judge-runner sandbox` call installs it without compiling it (about
//! 0.8 ms per call). The same code compiles it at run time for a policy file; a
//! unit test checks that both give the same programs.
// A build script fails the build by panicking, naming what went wrong.
#![allow(clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

#[path = "src/sandbox/seccomp/dispatch.rs"]
#[allow(dead_code)]
mod dispatch;

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
    seccomp_default();
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

/// `$OUT_DIR/seccomp_default.bpf`: the built-in policy's filters as the runtime
/// installs them (`src/sandbox/seccomp/prebuilt.rs` reads the format), or an
/// empty file for a target without a built-in policy (compiled at run time then,
/// which reports the error).
fn seccomp_default() {
    for f in [
        "seccomp/default.json",
        "seccomp/default.aarch64.json",
        "src/sandbox/seccomp/dispatch.rs",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("seccomp_default.bpf");
    let target = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let (arch, file) = match target.as_str() {
        "x86_64" => (seccompiler::TargetArch::x86_64, "seccomp/default.json"),
        "aarch64" => (
            seccompiler::TargetArch::aarch64,
            "seccomp/default.aarch64.json",
        ),
        _ => {
            std::fs::write(&out, []).expect("write the seccomp blob");
            return;
        }
    };
    let json = std::fs::read_to_string(file).expect("read the built-in seccomp policy");
    let map = seccompiler::compile_from_json(json.as_bytes(), arch)
        .unwrap_or_else(|e| panic!("{file} does not compile: {e}"));
    let mut named: Vec<_> = map.into_iter().collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let stack: Vec<_> = named.into_iter().map(|(_, prog)| prog).collect();
    // As `seccomp::ready` does at run time.
    let filters: Vec<_> = match dispatch::merged(&json, arch) {
        Some(one) => vec![one],
        None => std::iter::once(dispatch::guard(arch))
            .chain(stack)
            .collect(),
    };
    let mut bytes = Vec::new();
    push_u32(&mut bytes, filters.len());
    for prog in &filters {
        push_u32(&mut bytes, prog.len());
        for insn in prog {
            bytes.extend_from_slice(&insn.code.to_le_bytes());
            bytes.push(insn.jt);
            bytes.push(insn.jf);
            bytes.extend_from_slice(&insn.k.to_le_bytes());
        }
    }
    std::fs::write(&out, bytes).expect("write the seccomp blob");
}

fn push_u32(bytes: &mut Vec<u8>, n: usize) {
    let n = u32::try_from(n).expect("a BPF program is far shorter than 4G");
    bytes.extend_from_slice(&n.to_le_bytes());
}

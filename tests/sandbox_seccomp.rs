//! The seccomp policy: every refused syscall, through a static C probe, in twins:
//! denied by the built-in policy, reaching the kernel without a filter.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod sandbox_common;

use std::collections::BTreeMap;

use judge_runner::sandbox::{self, SeccompPolicy, Status, TargetArch};
use sandbox_common::Ctx;

const EPERM: i32 = 1;
const ENOSYS: i32 = 38;

/// Syscalls the probe calls with arguments whose unfiltered answer is not EPERM.
const REACH_KERNEL: &[&str] = &[
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "process_madvise",
    "kcmp",
    "mount",
    "umount2",
    "chroot",
    "fsconfig",
    "open_tree",
    "mount_setattr",
    "unshare",
    "setns",
    "keyctl",
    "add_key",
    "request_key",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "quotactl",
    "name_to_handle_at",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "clone_newuser",
    "clone3",
];

fn probe_results(policy: SeccompPolicy, test: &str) -> BTreeMap<String, i32> {
    let cx = Ctx::new(test);
    let prog = cx.probe("syscalls");
    let out = cx.path("out.txt");
    let plan = cx
        .plan(&prog)
        .seccomp(policy)
        .stdout(sandbox::Stdio::File(out.clone()));
    let r = cx.run(&plan);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let text = std::fs::read_to_string(&out).unwrap();
    let map: BTreeMap<String, i32> = text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.trim().parse().unwrap()))
        .collect();
    assert!(map.len() > 50, "probe output incomplete:\n{text}");
    map
}

#[test]
fn refused_syscalls_denied_by_default_policy() {
    let got = probe_results(SeccompPolicy::Default, "seccomp_denied");
    for (name, errno) in &got {
        let want = match name.as_str() {
            "clone_plain" => 0,
            "clone3" => ENOSYS,
            _ => EPERM,
        };
        assert_eq!(
            *errno, want,
            "{name}: got errno {errno}, want {want}; all: {got:?}"
        );
    }
}

#[test]
fn refused_syscalls_reach_the_kernel_without_a_filter_allowed() {
    let got = probe_results(SeccompPolicy::None, "seccomp_allowed");
    for name in REACH_KERNEL {
        let errno = got[*name];
        assert_ne!(
            errno, EPERM,
            "{name} answered EPERM without a filter: {got:?}"
        );
        assert_ne!(
            errno, ENOSYS,
            "{name} answered ENOSYS without a filter: {got:?}"
        );
    }
    assert_eq!(got["clone_plain"], 0);
}

/// Every rule of the built-in policy matches its syscall: with the deny action
/// rewritten to a distinctive errno, every probed call answers that errno, even the
/// ones the kernel would refuse with EPERM for lack of capabilities anyway.
#[test]
fn every_rule_matches_its_syscall_denied() {
    let mut policy: serde_json::Value = serde_json::from_str(sandbox::DEFAULT_X86_64).unwrap();
    policy["deny"]["match_action"] = serde_json::json!({"errno": 131});
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), policy.to_string()).unwrap();
    let got = probe_results(
        SeccompPolicy::File(file.path().to_path_buf()),
        "seccomp_rules",
    );
    for (name, errno) in &got {
        let want = match name.as_str() {
            "clone_plain" => 0,
            "clone3" => ENOSYS,
            _ => 131,
        };
        assert_eq!(*errno, want, "{name}: {got:?}");
    }
}

#[test]
fn policies_compile_for_x86_64_and_aarch64() {
    let x86 =
        sandbox::compile_seccomp_policy(sandbox::DEFAULT_X86_64, TargetArch::x86_64, "x86_64")
            .unwrap();
    let arm =
        sandbox::compile_seccomp_policy(sandbox::DEFAULT_AARCH64, TargetArch::aarch64, "aarch64")
            .unwrap();
    assert_eq!(x86.len(), 2);
    assert_eq!(arm.len(), 2);
    // x86-only names are refused on aarch64: a policy names only real syscalls.
    assert!(
        sandbox::compile_seccomp_policy(sandbox::DEFAULT_X86_64, TargetArch::aarch64, "x").is_err()
    );
}

#[test]
fn every_rule_has_a_comment() {
    for json in [sandbox::DEFAULT_X86_64, sandbox::DEFAULT_AARCH64] {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        for (name, filter) in v.as_object().unwrap() {
            for rule in filter["filter"].as_array().unwrap() {
                let comment = rule["comment"].as_str().unwrap_or_default();
                assert!(comment.len() > 10, "rule {rule} of {name} has no comment");
            }
        }
    }
}

#[test]
fn unknown_syscall_name_is_an_error() {
    let bad = r#"{"deny":{"mismatch_action":"allow","match_action":{"errno":1},"filter":[{"syscall":"no_such_call"}]}}"#;
    assert!(sandbox::compile_seccomp_policy(bad, TargetArch::x86_64, "bad").is_err());
}

/// A `--seccomp FILE` policy that does not merge into one dispatched program (two
/// filters list the same syscall) still refuses x32 calls: `ENOSYS`, as from a
/// kernel without x32. On a kernel built with `CONFIG_X86_X32_ABI` the calls
/// succeed without the guard (the deny lists compare plain numbers); the
/// architecture-independent check is the unit test
/// `unmergeable_policies_refuse_x32_and_foreign_arches`.
#[test]
#[cfg(target_arch = "x86_64")]
fn x32_refused_under_an_unmergeable_policy() {
    let twice = r#"{
        "a": {"mismatch_action": "allow", "match_action": {"errno": 131}, "filter": [{"syscall": "getppid"}]},
        "b": {"mismatch_action": "allow", "match_action": {"errno": 132}, "filter": [{"syscall": "getppid"}]}
    }"#;
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), twice).unwrap();
    let cx = Ctx::new("seccomp_x32");
    let prog = cx.probe("x32");
    let out = cx.path("out.txt");
    let plan = cx
        .plan(&prog)
        .seccomp(SeccompPolicy::File(file.path().to_path_buf()))
        .stdout(sandbox::Stdio::File(out.clone()));
    let r = cx.run(&plan);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("getpid 0\n"), "{text}");
    assert!(text.contains("x32_getpid 38\n"), "{text}");
    assert!(text.contains("x32_getppid 38\n"), "{text}");
}

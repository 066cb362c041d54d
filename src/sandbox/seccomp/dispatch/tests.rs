#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The dispatched program answers exactly like seccompiler's stack of filters:
//! both run through a small classic-BPF interpreter (the seccomp subset) for every
//! syscall number, both architectures and the argument values the rules test.

use super::*;
use crate::sandbox::seccomp::{DEFAULT_AARCH64, DEFAULT_X86_64, compile};

const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const AUDIT_ARCH_I386: u32 = 0x4000_0003;
const AUDIT_ARCH_AARCH64: u32 = 0xc000_00b7;
const AUDIT_ARCH_ARM: u32 = 0x4000_0028;

/// `struct seccomp_data`: nr, arch, instruction pointer, six arguments.
fn data(nr: u32, arch: u32, args: [u64; 6]) -> Vec<u8> {
    let mut d = Vec::with_capacity(64);
    d.extend_from_slice(&nr.to_ne_bytes());
    d.extend_from_slice(&arch.to_ne_bytes());
    d.extend_from_slice(&0u64.to_ne_bytes());
    for a in args {
        d.extend_from_slice(&a.to_ne_bytes());
    }
    d
}

/// Run one classic-BPF seccomp program (the instructions seccompiler emits).
fn run(prog: &[sock_filter], data: &[u8]) -> u32 {
    let (mut a, mut pc) = (0u32, 0usize);
    loop {
        let ins = &prog[pc];
        pc += 1;
        match ins.code {
            0x20 => {
                let off = ins.k as usize;
                a = u32::from_ne_bytes(data[off..off + 4].try_into().unwrap());
            }
            0x54 => a &= ins.k,
            0x06 => return ins.k,
            0x05 => pc += ins.k as usize,
            code if code & 0x07 == 0x05 => {
                let taken = match code & 0xf0 {
                    0x10 => a == ins.k,
                    0x20 => a > ins.k,
                    0x30 => a >= ins.k,
                    0x40 => a & ins.k != 0,
                    other => panic!("jump op {other:#x} not interpreted"),
                };
                pc += usize::from(if taken { ins.jt } else { ins.jf });
            }
            other => panic!("opcode {other:#x} not interpreted"),
        }
    }
}

/// The kernel's rule for stacked filters: the action of lowest value (as i32,
/// so KILL_PROCESS first) wins; on a tie the most recently installed filter's.
fn run_stack(stack: &[BpfProgram], data: &[u8]) -> u32 {
    let action = |r: u32| (r & 0xffff_0000).cast_signed();
    let mut ret = 0x7fff_0000u32; // ALLOW
    for prog in stack.iter().rev() {
        let cur = run(prog, data);
        if action(cur) < action(ret) {
            ret = cur;
        }
    }
    ret
}

fn arg_values() -> Vec<u64> {
    let mut v = vec![0, 1, u64::MAX, 0x1_0000_0000, 0x11];
    for bit in 0..64 {
        v.push(1u64 << bit);
    }
    v
}

fn equivalent(json: &str, arch: TargetArch, arches: [u32; 2], x32_guard: bool) {
    let stack = compile(json, arch, "test").unwrap();
    let one = merged(json, arch).expect("the default policy merges");
    let args = arg_values();
    let mut checked = 0;
    for audit in arches.into_iter().chain([0x1234_5678]) {
        for nr in (0..1024).chain([u32::MAX, 0x7fff_ffff]) {
            for &a0 in &args {
                let d = data(nr, audit, [a0, a0, 0, 0, 0, 0]);
                let want = if x32_guard && audit == arches[0] && nr >= X32_SYSCALL_BIT {
                    SECCOMP_RET_ERRNO | 38
                } else {
                    run_stack(&stack, &d)
                };
                assert_eq!(run(&one, &d), want, "nr {nr} arch {audit:#x} arg {a0:#x}");
                checked += 1;
            }
        }
        for nr in [
            X32_SYSCALL_BIT,
            X32_SYSCALL_BIT | 101,
            X32_SYSCALL_BIT | 272,
        ] {
            let d = data(nr, audit, [0; 6]);
            let want = if x32_guard && audit == arches[0] {
                SECCOMP_RET_ERRNO | 38
            } else {
                run_stack(&stack, &d)
            };
            assert_eq!(run(&one, &d), want, "x32 nr {nr:#x}");
        }
    }
    assert!(checked > 100_000);
}

#[test]
fn dispatch_answers_like_the_stack_x86_64() {
    equivalent(
        DEFAULT_X86_64,
        TargetArch::x86_64,
        [AUDIT_ARCH_X86_64, AUDIT_ARCH_I386],
        true,
    );
}

#[test]
fn dispatch_answers_like_the_stack_aarch64() {
    equivalent(
        DEFAULT_AARCH64,
        TargetArch::aarch64,
        [AUDIT_ARCH_AARCH64, AUDIT_ARCH_ARM],
        false,
    );
}

#[test]
fn dispatch_is_short() {
    let one = merged(DEFAULT_X86_64, TargetArch::x86_64).unwrap();
    let stack = compile(DEFAULT_X86_64, TargetArch::x86_64, "t").unwrap();
    // The path of an unlisted call: arch check, x32 guard, ~7 comparisons, the
    // block's own comparison and its exit.
    let steps = |prog: &[sock_filter], nr: u32| {
        let d = data(nr, AUDIT_ARCH_X86_64, [0; 6]);
        let (mut a, mut pc, mut n) = (0u32, 0usize, 0);
        loop {
            let ins = &prog[pc];
            n += 1;
            pc += 1;
            match ins.code {
                0x20 => a = u32::from_ne_bytes(d[ins.k as usize..][..4].try_into().unwrap()),
                0x06 => return n,
                0x05 => pc += ins.k as usize,
                0x15 => pc += usize::from(if a == ins.k { ins.jt } else { ins.jf }),
                0x35 => pc += usize::from(if a >= ins.k { ins.jt } else { ins.jf }),
                0x54 => a &= ins.k,
                c => panic!("{c:#x}"),
            }
        }
    };
    let fast = steps(&one, 0);
    let slow: usize = stack.iter().map(|p| steps(p, 0)).sum();
    assert!(fast <= 16, "read(2) takes {fast} steps");
    assert!(slow > 5 * fast, "stack {slow} vs dispatched {fast}");
}

#[test]
fn unmergeable_policies_are_left_alone() {
    // Two filters that both list getpid: stacking decides, not a merge.
    let twice = r#"{
        "a": {"mismatch_action": "allow", "match_action": {"errno": 1}, "filter": [{"syscall": "getpid"}]},
        "b": {"mismatch_action": "allow", "match_action": {"errno": 2}, "filter": [{"syscall": "getpid"}]}
    }"#;
    assert!(merged(twice, TargetArch::x86_64).is_none());
    // Different mismatch actions.
    let mixed = r#"{
        "a": {"mismatch_action": "allow", "match_action": {"errno": 1}, "filter": [{"syscall": "getpid"}]},
        "b": {"mismatch_action": {"errno": 3}, "match_action": "allow", "filter": [{"syscall": "read"}]}
    }"#;
    assert!(merged(mixed, TargetArch::x86_64).is_none());
}

/// A policy that does not merge still refuses x32 (ENOSYS) and kills foreign
/// architectures: the guard goes in front of seccompiler's programs.
#[test]
fn unmergeable_policies_refuse_x32_and_foreign_arches() {
    let twice = r#"{
        "a": {"mismatch_action": "allow", "match_action": {"errno": 1}, "filter": [{"syscall": "getpid"}]},
        "b": {"mismatch_action": "allow", "match_action": {"errno": 2}, "filter": [{"syscall": "getpid"}]}
    }"#;
    assert!(merged(twice, TargetArch::x86_64).is_none());
    let stack = crate::sandbox::seccomp::ready(twice, TargetArch::x86_64, "t").unwrap();
    let getpid = 39;
    for nr in [getpid, 0, 101, 272, 0x3fff_ffff, u32::MAX] {
        let x32 = nr | X32_SYSCALL_BIT;
        let d = data(x32, AUDIT_ARCH_X86_64, [0; 6]);
        assert_eq!(
            run_stack(&stack, &d),
            SECCOMP_RET_ERRNO | 38,
            "x32 {x32:#x}"
        );
        for foreign in [AUDIT_ARCH_I386, AUDIT_ARCH_AARCH64, 0x1234_5678] {
            let d = data(nr, foreign, [0; 6]);
            assert_eq!(
                run_stack(&stack, &d),
                SECCOMP_RET_KILL_PROCESS,
                "arch {foreign:#x}"
            );
        }
    }
    // The policy's own answers are untouched (a tie: the last filter's, "b").
    let d = data(getpid, AUDIT_ARCH_X86_64, [0; 6]);
    assert_eq!(run_stack(&stack, &d), SECCOMP_RET_ERRNO | 2);
    let d = data(0, AUDIT_ARCH_X86_64, [0; 6]);
    assert_eq!(run_stack(&stack, &d), SECCOMP_RET_ALLOW);
    // aarch64: no x32, foreign arches killed.
    let stack = crate::sandbox::seccomp::ready(twice, TargetArch::aarch64, "t").unwrap();
    let d = data(172, AUDIT_ARCH_ARM, [0; 6]);
    assert_eq!(run_stack(&stack, &d), SECCOMP_RET_KILL_PROCESS);
}

//! One filter with a binary-search dispatch instead of seccompiler's stack of
//! linear chains: same decisions, a fraction of the cost.
//!
//! # Why
//! seccompiler compiles a filter into one linear chain: a call is compared with
//! every listed syscall in turn (about 130 instructions for the 64 of the default
//! deny list). Attaching a filter makes the kernel run it once per syscall number
//! and architecture to build its allow-cache (`seccomp_cache_prepare`, under a
//! spin lock with interrupts off): ~190 µs per run for the two default filters,
//! the largest single CPU cost of a sandboxed run. At run time every call that is
//! not cached walks the chains of both filters.
//!
//! # How
//! seccompiler still compiles every rule: each syscall's rules are compiled on
//! their own (a one-syscall filter), and the block seccompiler emits for them is
//! kept byte for byte. Only the dispatch around the blocks is ours: the same
//! architecture check, then a balanced tree of `JGE` over the ranges of syscall
//! numbers that share an answer (~7 comparisons): a leaf returns the action of a
//! call listed without argument rules (or the mismatch action of a gap), or jumps
//! to the block of a call whose rules look at its arguments, which is followed by
//! the mismatch action. Filters of one policy merge into one program when they
//! share their mismatch action and list disjoint syscalls (stacked filters would
//! give the same answers then). Anything else — a block that jumps outside itself,
//! a tree too deep for BPF's 8-bit jumps — keeps seccompiler's programs unchanged.
//! A unit test runs both through a BPF interpreter for every syscall number.
//!
//! On x86_64 the dispatch also refuses the x32 ABI (syscall numbers with bit 30
//! set, `ENOSYS` as from a kernel without x32): x32 calls carry the x86_64 audit
//! architecture, so a deny list that compares numbers would otherwise let
//! `ptrace | 0x40000000` through on a kernel built with x32 enabled. A policy
//! that does not merge gets the same refusal from [`guard`], a filter installed
//! before seccompiler's programs: no policy, built-in or `--seccomp FILE`, lets
//! an x32 or foreign-architecture call through.

use std::collections::BTreeMap;

use seccompiler::{BpfProgram, TargetArch, sock_filter};
use serde_json::{Map, Value};

const BPF_JMP: u16 = 0x05;
const BPF_JA: u16 = 0x00;
const BPF_JEQ: u16 = 0x10;
const BPF_JGE: u16 = 0x30;
const BPF_RET: u16 = 0x06;
const BPF_K: u16 = 0x00;
const BPF_MAXINSNS: usize = 4096;
/// seccompiler's prefix: load arch, compare, kill on mismatch, load the number.
const PREFIX_LEN: usize = 4;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// One syscall's block as seccompiler emits it, with the filter's mismatch action.
struct Block {
    nr: u32,
    code: Vec<sock_filter>,
}

/// What the per-syscall compilation found: the common prefix, the mismatch action
/// and every block.
struct Parts {
    prefix: Vec<sock_filter>,
    mismatch: u32,
    blocks: Vec<Block>,
}

/// `AUDIT_ARCH_*` of the architectures we compile for.
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const AUDIT_ARCH_AARCH64: u32 = 0xc000_00b7;
const BPF_LD_W_ABS: u16 = 0x20;
const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
/// `offsetof(struct seccomp_data, arch)`; `nr` is at 0.
const ARCH_OFFSET: u32 = 4;

/// The guard installed in front of a policy that does not merge: kill a call of
/// any foreign architecture (i386 `int 0x80`, arm32 compat), refuse an x32 call
/// on x86_64 with `ENOSYS` exactly as the dispatched program does, allow the
/// rest (the policy's own filters decide). Stacked filters answer with the most
/// restrictive action, so the guard's refusal holds whatever the policy says.
pub(crate) fn guard(arch: TargetArch) -> BpfProgram {
    let audit = match arch {
        TargetArch::aarch64 => AUDIT_ARCH_AARCH64,
        _ => AUDIT_ARCH_X86_64,
    };
    let mut out = vec![
        stmt(BPF_LD_W_ABS, ARCH_OFFSET),
        jump(BPF_JMP | BPF_JEQ | BPF_K, audit, 1, 0),
        stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    ];
    if matches!(arch, TargetArch::x86_64) {
        out.push(stmt(BPF_LD_W_ABS, 0));
        out.push(jump(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 0, 1));
        out.push(stmt(
            BPF_RET | BPF_K,
            SECCOMP_RET_ERRNO | libc::ENOSYS.unsigned_abs(),
        ));
    }
    out.push(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    out
}

/// The policy `json` as one dispatched program, or `None` when it cannot be merged
/// (the caller then installs the guard and seccompiler's programs as they are).
pub(crate) fn merged(json: &str, arch: TargetArch) -> Option<BpfProgram> {
    let parts = split(json, arch)?;
    assemble(&parts, arch)
}

/// Compile each syscall of each filter on its own and keep its block.
fn split(json: &str, arch: TargetArch) -> Option<Parts> {
    let filters: Map<String, Value> = serde_json::from_str(json).ok()?;
    let mut prefix: Option<Vec<sock_filter>> = None;
    let mut mismatch: Option<u32> = None;
    let mut blocks: BTreeMap<u32, Block> = BTreeMap::new();
    for filter in filters.values() {
        for group in syscall_groups(filter)? {
            let one = serde_json::json!({ "f": {
                "mismatch_action": filter.get("mismatch_action")?,
                "match_action": filter.get("match_action")?,
                "filter": group,
            }});
            let prog = seccompiler::compile_from_json(one.to_string().as_bytes(), arch)
                .ok()?
                .remove("f")?;
            let (head, block, last) = cut(&prog)?;
            if *prefix.get_or_insert_with(|| head.to_vec()) != head
                || *mismatch.get_or_insert(last) != last
            {
                return None;
            }
            let nr = block
                .first()
                .filter(|i| i.code == BPF_JMP | BPF_JEQ | BPF_K)?
                .k;
            if !jumps_stay_inside(block) || blocks.contains_key(&nr) {
                return None;
            }
            blocks.insert(
                nr,
                Block {
                    nr,
                    code: block.to_vec(),
                },
            );
        }
    }
    Some(Parts {
        prefix: prefix?,
        mismatch: mismatch?,
        blocks: blocks.into_values().collect(),
    })
}

/// A filter's entries grouped by syscall name, in order of first appearance
/// (several entries for one name are that syscall's alternative rules).
fn syscall_groups(filter: &Value) -> Option<Vec<Vec<Value>>> {
    let mut order: Vec<&str> = Vec::new();
    let mut groups: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for entry in filter.get("filter")?.as_array()? {
        let name = entry.get("syscall")?.as_str()?;
        if !groups.contains_key(name) {
            order.push(name);
        }
        groups.entry(name).or_default().push(entry.clone());
    }
    order.into_iter().map(|n| groups.remove(n)).collect()
}

/// (prefix, block, mismatch action) of a one-syscall program:
/// `[arch check ×3][load nr][block...][ret mismatch]`.
fn cut(prog: &[sock_filter]) -> Option<(&[sock_filter], &[sock_filter], u32)> {
    let (last, rest) = prog.split_last()?;
    if last.code != BPF_RET | BPF_K || rest.len() <= PREFIX_LEN {
        return None;
    }
    let (head, block) = rest.split_at(PREFIX_LEN);
    Some((head, block, last.k))
}

/// Every jump of `block` lands inside it or just after its end (where the
/// assembled program puts the mismatch action).
fn jumps_stay_inside(block: &[sock_filter]) -> bool {
    block.iter().enumerate().all(|(i, ins)| {
        if ins.code & 0x07 != BPF_JMP {
            return true;
        }
        let next = i + 1;
        let targets = if ins.code & 0xf0 == BPF_JA {
            vec![usize::try_from(ins.k).map_or(usize::MAX, |k| next.saturating_add(k))]
        } else {
            vec![next + usize::from(ins.jt), next + usize::from(ins.jf)]
        };
        targets.into_iter().all(|t| t <= block.len())
    })
}

/// A leaf of the dispatch tree, for a range of syscall numbers: an action (a
/// listed call without argument rules, or the gaps between listed calls), or the
/// block of a call whose rules look at its arguments.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Leaf {
    Ret(u32),
    Block(usize),
}

/// seccompiler's block for a call without argument rules:
/// `[jeq nr][ja 1][ja 2][ret match][ret mismatch]`; its action, if it is one.
fn plain_action(block: &[sock_filter], mismatch: u32) -> Option<u32> {
    match block {
        [eq, enter, skip, hit, miss]
            if eq.code == BPF_JMP | BPF_JEQ | BPF_K
                && (eq.jt, eq.jf) == (0, 1)
                && *enter == stmt(BPF_JMP | BPF_JA, 1)
                && *skip == stmt(BPF_JMP | BPF_JA, 2)
                && hit.code == BPF_RET | BPF_K
                && *miss == stmt(BPF_RET | BPF_K, mismatch) =>
        {
            Some(hit.k)
        }
        _ => None,
    }
}

/// The number line cut into ranges `(first number, leaf)`, adjacent ranges with
/// the same action merged.
fn ranges(parts: &Parts) -> Vec<(u32, Leaf)> {
    let mut out: Vec<(u32, Leaf)> = vec![(0, Leaf::Ret(parts.mismatch))];
    let mut push = |start: u32, leaf: Leaf| {
        if out.last().is_some_and(|(at, _)| *at == start) {
            out.pop();
        }
        if out.last().is_none_or(|(_, last)| *last != leaf) {
            out.push((start, leaf));
        }
    };
    for (i, b) in parts.blocks.iter().enumerate() {
        let leaf = plain_action(&b.code, parts.mismatch).map_or(Leaf::Block(i), Leaf::Ret);
        push(b.nr, leaf);
        if let Some(next) = b.nr.checked_add(1) {
            push(next, Leaf::Ret(parts.mismatch));
        }
    }
    out
}

fn tree_len(leaves: usize) -> usize {
    2 * leaves - 1
}

/// Emit the tree over `leaves` (keys: the first number of each leaf's range).
/// Block jumps are placeholders patched once the blocks are laid out.
fn emit_tree(
    leaves: &[(u32, Leaf)],
    out: &mut Vec<sock_filter>,
    patches: &mut Vec<(usize, usize)>,
) -> Option<()> {
    match leaves {
        [] => None,
        [(_, Leaf::Ret(action))] => {
            out.push(stmt(BPF_RET | BPF_K, *action));
            Some(())
        }
        [(_, Leaf::Block(b))] => {
            patches.push((out.len(), *b));
            out.push(stmt(BPF_JMP | BPF_JA, 0));
            Some(())
        }
        _ => {
            let (left, right) = leaves.split_at(leaves.len() / 2);
            let skip = u8::try_from(tree_len(left.len())).ok()?;
            out.push(jump(BPF_JMP | BPF_JGE | BPF_K, right.first()?.0, skip, 0));
            emit_tree(left, out, patches)?;
            emit_tree(right, out, patches)
        }
    }
}

fn assemble(parts: &Parts, arch: TargetArch) -> Option<BpfProgram> {
    let mut out: BpfProgram = parts.prefix.clone();
    if matches!(arch, TargetArch::x86_64) {
        out.push(jump(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 0, 1));
        out.push(stmt(
            BPF_RET | BPF_K,
            SECCOMP_RET_ERRNO | libc::ENOSYS.unsigned_abs(),
        ));
    }
    let mut patches = Vec::new();
    emit_tree(&ranges(parts), &mut out, &mut patches)?;
    let mut starts = BTreeMap::new();
    for (at, block) in patches {
        let start = match starts.get(&block) {
            Some(s) => *s,
            None => {
                let s = out.len();
                out.extend_from_slice(&parts.blocks.get(block)?.code);
                out.push(stmt(BPF_RET | BPF_K, parts.mismatch));
                starts.insert(block, s);
                s
            }
        };
        let offset = start.checked_sub(at + 1)?;
        out.get_mut(at)?.k = u32::try_from(offset).ok()?;
    }
    (out.len() <= BPF_MAXINSNS).then_some(out)
}

// Spelled out: build.rs includes this file by path too (where a bare `mod
// tests;` would be looked for beside it).
#[cfg(test)]
#[path = "dispatch/tests.rs"]
mod tests;

//! The built-in policy as build.rs compiled it for this target (the same
//! seccompiler passes and `dispatch.rs` as at run time): a one-shot run installs
//! it without compiling the JSON. Format: u32 count of filters, then per filter
//! a u32 count of instructions, each `code` u16, `jt` u8, `jf` u8, `k` u32, all
//! little-endian. Empty for a target without a built-in policy.

use seccompiler::sock_filter;

use super::Filters;

const BLOB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/seccomp_default.bpf"));

/// The built-in filters, or `None` when the build made none for this target.
pub(super) fn default_filters() -> Option<Filters> {
    decode(BLOB)
}

fn decode(blob: &[u8]) -> Option<Filters> {
    let mut rest = blob;
    let mut take = |n: usize| -> Option<&[u8]> {
        let (head, tail) = rest.split_at_checked(n)?;
        rest = tail;
        Some(head)
    };
    let word = |b: &[u8]| -> Option<u32> { Some(u32::from_le_bytes(b.try_into().ok()?)) };
    let count = word(take(4)?)?;
    let mut filters = Vec::new();
    for _ in 0..count {
        let len = word(take(4)?)?;
        let mut prog = Vec::new();
        for _ in 0..len {
            let i = take(8)?;
            prog.push(sock_filter {
                code: u16::from_le_bytes([*i.first()?, *i.get(1)?]),
                jt: *i.get(2)?,
                jf: *i.get(3)?,
                k: word(i.get(4..8)?)?,
            });
        }
        filters.push(prog);
    }
    (rest.is_empty() && !filters.is_empty()).then_some(filters)
}

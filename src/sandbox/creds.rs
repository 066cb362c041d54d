//! Credentials: who the program runs as. The box's uid and gid (one per box id),
//! no supplementary groups, and every capability set empty (bounding, ambient,
//! permitted, effective, inheritable), before `no_new_privs` and seccomp.
//!
//! [`last_cap`] runs in the supervisor (before clone); [`drop_to`] in the
//! program's process, between its fork and its execve: child-safe calls only.

use std::sync::OnceLock;

use super::record::Step;
use super::sys::{self, CResult};

/// The highest capability number this kernel knows (the `caps` crate asks it).
pub(crate) fn last_cap() -> u32 {
    static LAST: OnceLock<u32> = OnceLock::new();
    *LAST.get_or_init(|| {
        caps::runtime::thread_all_supported()
            .iter()
            .map(|c| u32::from(c.index()))
            .max()
            .unwrap_or(63)
            .max(40)
    })
}

/// Become box user `uid` with no privilege left: no supplementary groups, gid
/// and uid `uid`, every capability set emptied. The bounding set (`0..=last_cap`)
/// must go while we still hold CAP_SETPCAP, i.e. before setresuid; a launcher's
/// children start with it empty (`bounding_set_empty`) and skip that. On failure:
/// the step, the errno and (the bounding set) which capability.
pub(crate) fn drop_to(
    uid: u32,
    last_cap: u32,
    bounding_set_empty: bool,
) -> Result<(), (Step, i32, u32)> {
    let at = |step: Step| move |e: i32| (step, e, 0);
    sys::c_setgroups_empty().map_err(at(Step::Groups))?;
    sys::c_setresgid(uid).map_err(at(Step::Gid))?;
    // Each drop allocates a new `cred`.
    if !bounding_set_empty {
        for cap in 0..=last_cap {
            match sys::c_prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap)) {
                Ok(()) | Err(libc::EINVAL) => {}
                Err(e) => return Err((Step::BoundingSet, e, cap)),
            }
        }
    }
    ambient_clear().map_err(at(Step::Ambient))?;
    sys::c_setresuid(uid).map_err(at(Step::Uid))?;
    sys::c_capset_none().map_err(at(Step::Capabilities))
}

fn ambient_clear() -> CResult {
    let clear_all = libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong;
    match sys::c_prctl(libc::PR_CAP_AMBIENT, clear_all) {
        Err(libc::EINVAL) => Ok(()), // kernel without ambient capabilities
        other => other,
    }
}

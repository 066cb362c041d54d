//! Resource limits of the program's process: stack, file size (the output
//! limit), open files, no core dumps, and a per-process CPU backstop.
//!
//! [`for_plan`] runs in the supervisor (before clone); [`apply`] in the
//! program's process before its execve: child-safe calls only.

use super::plan::Plan;
use super::sys::{self, CResult};

/// One limit: (resource, soft, hard).
pub(crate) type Rlimit = (libc::__rlimit_resource_t, u64, u64);

/// The limits a run's program gets.
pub(crate) fn for_plan(plan: &Plan) -> Vec<Rlimit> {
    let l = &plan.limits;
    let mut v = vec![
        (libc::RLIMIT_STACK, l.effective_stack(), l.effective_stack()),
        (libc::RLIMIT_FSIZE, l.output_bytes, l.output_bytes),
        (
            libc::RLIMIT_NOFILE,
            u64::from(l.open_files),
            u64::from(l.open_files),
        ),
        (libc::RLIMIT_CORE, 0, 0),
    ];
    if let Some(cpu) = l.cpu_time {
        // A per-process backstop only: the cgroup enforces the run-wide limit.
        let soft = cpu.as_secs() + 2;
        v.push((libc::RLIMIT_CPU, soft, soft + 1));
    }
    v
}

/// Set every limit of `limits` on the calling process.
pub(crate) fn apply(limits: &[Rlimit]) -> CResult {
    for (resource, soft, hard) in limits {
        sys::c_setrlimit(*resource, *soft, *hard)?;
    }
    Ok(())
}

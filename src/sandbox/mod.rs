//! One program, one run: fresh namespaces, its own cgroup, a per-box uid, no
//! capabilities, seccomp, rlimits; a report of what the program did.
//! Knows nothing of packages, jobs or HTTP; imports no other module of ours.
//!
//! Public surface, shaped like `std::process`: [`Plan`] (builder) → [`run`] →
//! [`Report`] / [`SandboxError`]; [`SandboxSlot`] pays per-slot setup once for many runs;
//! [`Cancel`] stops a run from another thread.

mod boxlock;
mod cgroup;
mod child;
mod cpus;
mod creds;
mod error;
pub mod host;
mod launcher;
mod mount;
mod net;
mod plan;
mod prepare;
mod record;
mod report;
mod rlimit;
mod seccomp;
mod slot;
mod spawn;
mod sys;

pub use boxlock::{BOX_LOCK_DIR_ENV, BoxHolder, BoxLock, BoxLockError, DEFAULT_BOX_LOCK_DIR};
pub use cgroup::{
    CgroupFacts, children_of_parent, facts as cgroup_facts, remove_parent,
    version as cgroup_version,
};
pub use cpus::{plan_cpus, usable_cpus};
pub use error::SandboxError;
pub use plan::{
    BOX_UID_BASE, Bind, Cancel, DEFAULT_CGROUP_PARENT, Limits, Plan, SeccompPolicy, Stdio,
};
pub use report::{Report, Status};
pub use seccomp::{DEFAULT_AARCH64, DEFAULT_X86_64, compile as compile_seccomp_policy};
pub use seccompiler::TargetArch;
pub use slot::SandboxSlot;

/// Give the calling thread the short scheduler slice of a slot run's control
/// path (Linux 6.12+; nothing on older kernels), for good: for a thread that
/// only waits on a run and has little to do when it wakes, e.g. one draining a
/// run's output pipe. (The thread that runs a slot has it during each run.)
/// Its CPU share is unchanged; on a busy host it is served at wake-up instead
/// of after a running task's slice. Processes it starts inherit it.
pub fn prefer_short_slice() {
    let _ = sys::c_sched_slice(launcher::CONTROL_SLICE_NS);
}

/// Give the calling thread the host's default scheduler slice back (a thread
/// inherits its creator's slice, and so does a process it starts).
pub fn default_slice() {
    let _ = sys::c_sched_slice(0);
}

/// Run `plan` once. `Ok` whatever the program did; `Err` only when the sandbox
/// itself failed (or the run was cancelled). Safe to call from several threads at
/// once with distinct box ids. Creates the box's cgroup and removes it afterwards.
pub fn run(plan: &Plan) -> Result<Report, SandboxError> {
    let mut slot = SandboxSlot::one_shot(plan.box_id, &plan.cgroup_parent, plan.cpu)?;
    let result = slot.run(plan);
    let closed = slot.close();
    SandboxError::with_cleanup(result, closed)
}

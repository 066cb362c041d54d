//! The child side: what runs between `clone` and `execve`, in a copy of a possibly
//! multi-threaded supervisor. Only child-safe calls (`sys::c_*`): no allocation, no
//! locks, no panics. Everything it needs was built by the supervisor beforehand
//! (`ChildSpec`); a failure is reported as a fixed-size record on the report pipe.
//!
//! Two processes live here:
//! - **init** (pid 1 of the new PID namespace): builds the root, the network and
//!   the hostname, forks the program, then only reaps. When the program ends,
//!   init reports its wait status and exits, and the kernel kills everything else
//!   left in the namespace.
//! - **the program** (pid 2): joins the run's cgroup, then drops to the box user
//!   and execs. Only from its first step on is anything counted or limited, so
//!   the run's cpu, memory and process figures are the program's alone.

use std::cell::Cell;
use std::ffi::{CStr, CString};
use std::os::fd::RawFd;

use seccompiler::BpfProgram;

use super::cgroup::MemoryFds;
use super::creds;
use super::mount::{self, MountPlan};
use super::net::{self, Net};
use super::record::{Record, Step};
use super::rlimit::{self, Rlimit};
use super::seccomp;
use super::sys::{self, CResult};

/// Stack the program starts on (vfork-like, until its execve).
pub(crate) const PROGRAM_STACK: usize = 128 * 1024;

/// How init came to be, which decides what it and the program still do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StartPath {
    /// `sandbox::run`: the supervisor cloned init into fresh namespaces (with
    /// CLONE_NEWNS). init builds the root on a fresh tmpfs and pivots into it; the
    /// program enters the run's cgroup (`cgroup`), then makes the cgroup
    /// namespace, and resets the signals and the capability bounding set itself.
    OneShot { cgroup: CgroupEntry },
    /// A slot's launcher cloned init inside a private copy of the slot's prepared
    /// root and in the run's cgroup (v1: the launcher lives there; v2:
    /// `CLONE_INTO_CGROUP`). init adds the per-run mounts and makes the cgroup
    /// namespace. `clean`: the launcher already emptied the capability bounding
    /// set and put every signal at its default, once for all its children.
    Launched { clean: bool },
}

/// How a one-shot run's program enters the run's cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CgroupEntry {
    /// v2: forked straight into this cgroup directory (clone3), where the kernel can.
    pub into: Option<RawFd>,
    /// Else it joins by writing `0` into these (v1: every hierarchy's `tasks`;
    /// v2: the run's `cgroup.procs`).
    pub join: Vec<RawFd>,
}

impl StartPath {
    /// The launcher reset the signals and emptied the bounding set already.
    fn launcher_clean(&self) -> bool {
        matches!(self, StartPath::Launched { clean: true })
    }
}

/// Everything the child needs, built by the supervisor before clone.
pub(crate) struct ChildSpec<'a> {
    pub start: StartPath,
    pub mounts: &'a MountPlan,
    pub net: Net,
    /// Descriptors for 0, 1, 2 (None = keep the inherited one).
    pub stdio: [Option<RawFd>; 3],
    pub rlimits: Vec<Rlimit>,
    pub uid: u32,
    pub last_cap: u32,
    pub filters: &'a [BpfProgram],
    pub exec_paths: Vec<CString>,
    pub argv: sys::CStrArray<'a>,
    pub envp: sys::CStrArray<'a>,
    pub report_fd: RawFd,
    /// A stack reserved for the program's start (vfork-like), taken by the one
    /// start that uses it; `None`: fork.
    pub program_stack: Cell<Option<sys::VforkStack<'a>>>,
    /// The cgroup files to set the run's exact memory limit with, and that limit.
    pub memory: Option<MemoryFds>,
    pub memory_bytes: u64,
}

fn report(fd: RawFd, record: Record) {
    let _ = sys::c_write_all(fd, &record.encode());
}

fn fail(spec: &ChildSpec<'_>, step: Step, errno: i32, aux: u32) -> ! {
    report(spec.report_fd, Record::failed(step, errno, aux));
    sys::c_exit(127)
}

fn try_step(spec: &ChildSpec<'_>, step: Step, r: CResult) {
    if let Err(e) = r {
        fail(spec, step, e, 0);
    }
}

/// init: pid 1 of the run's namespaces. The ordered recipe; returns only by exit.
///
/// # Safety
/// Only as the child of a clone made for it (`clone_child`, the launcher's
/// `clone_fork`), with one thread: it closes every descriptor but the report
/// pipe, which anywhere else would pull them from under their owners, and it
/// starts the program vfork-like in its own memory. (It makes only
/// async-signal-safe calls, as such a child must.)
pub(crate) unsafe fn init_main(spec: &ChildSpec<'_>) -> isize {
    try_step(
        spec,
        Step::DeathSignal,
        sys::c_prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong),
    );
    match spec.start {
        StartPath::OneShot { .. } => {
            try_step(spec, Step::MakePrivate, mount::make_private());
            enter_mounts(spec);
            try_step(spec, Step::PivotRoot, mount::pivot(spec.mounts.root()));
        }
        StartPath::Launched { .. } => {
            enter_mounts(spec);
            // Born in the run's cgroup: the namespace is rooted there already.
            cgroup_namespace(spec);
        }
    }
    if let Err((step, e)) = net::enter(spec.net) {
        fail(spec, step, e, 0);
    }
    try_step(spec, Step::Hostname, sys::c_sethostname(c"box"));
    // SAFETY: we are init, a one-thread clone made for this (see # Safety).
    let program = match unsafe { start_program(spec) } {
        Ok(pid) => pid,
        Err(e) => fail(spec, Step::Fork, e, 0),
    };
    // init keeps nothing of the supervisor's but the report pipe: a copy of a pipe
    // end held here would keep the other side of an interactive run from seeing EOF.
    let fd = u32::try_from(spec.report_fd).unwrap_or(u32::MAX);
    // SAFETY: init is a clone made for this (see # Safety): what it closes are
    // copies of the supervisor's descriptors that nothing running here uses again
    // (init ends in `c_exit`, never returning into the copied frames).
    let _ = unsafe { sys::c_close_range(0, fd.saturating_sub(1)) };
    // SAFETY: as above.
    let _ = unsafe { sys::c_close_range(fd.saturating_add(1), u32::MAX) };
    reap_until(spec, program)
}

fn enter_mounts(spec: &ChildSpec<'_>) {
    if let Err((index, e)) = spec.mounts.enter() {
        fail(
            spec,
            Step::Mount,
            e,
            u32::try_from(index).unwrap_or(u32::MAX),
        );
    }
}

/// The process that builds a slot's prepared root: make the tree private, build
/// the root, pivot into it, say so on `ready_fd` (one byte, or a failure record),
/// then wait until `hold_fd` reaches EOF while the supervisor opens our mount
/// namespace. Child-safe like everything here.
pub(crate) fn template_main(mounts: &MountPlan, ready_fd: RawFd, hold_fd: RawFd) -> isize {
    let failed = |step: Step, e: i32, aux: u32| -> isize {
        report(ready_fd, Record::failed(step, e, aux));
        1
    };
    if let Err(e) = sys::c_prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) {
        return failed(Step::DeathSignal, e, 0);
    }
    if let Err(e) = mount::make_private() {
        return failed(Step::MakePrivate, e, 0);
    }
    if let Err((index, e)) = mounts.enter() {
        return failed(Step::Mount, e, u32::try_from(index).unwrap_or(u32::MAX));
    }
    if let Err(e) = mount::pivot_keep_writable(mounts.root()) {
        return failed(Step::PivotRoot, e, 0);
    }
    let _ = sys::c_write_all(ready_fd, b"R");
    let mut byte = [0u8; 1];
    let _ = sys::c_read(hold_fd, &mut byte);
    0
}

/// Reap every child until the program itself ends, then report and exit; the
/// kernel then kills whatever else is left in the namespace.
fn reap_until(spec: &ChildSpec<'_>, program: libc::pid_t) -> ! {
    loop {
        match sys::c_wait_any() {
            // Only an ending counts: a stop (a ptraced child) is not one.
            Ok((pid, status, max_rss_kib))
                if pid == program && (libc::WIFEXITED(status) || libc::WIFSIGNALED(status)) =>
            {
                let time = Record::Time {
                    ns: sys::c_monotonic_ns(),
                };
                let exited = Record::Exited {
                    status,
                    max_rss_kib: u32::try_from(max_rss_kib).unwrap_or(u32::MAX),
                };
                // One write, so the supervisor wakes once for both.
                let mut recs = [0u8; 2 * Record::LEN];
                let (first, second) = recs.split_at_mut(Record::LEN);
                first.copy_from_slice(&time.encode());
                second.copy_from_slice(&exited.encode());
                let _ = sys::c_write_all(spec.report_fd, &recs);
                sys::c_exit(0)
            }
            Ok(_) => {}
            Err(e) => fail(spec, Step::Reap, e, 0),
        }
    }
}

/// Start the program: on v2 one-shot runs forked straight into the run's cgroup
/// where the kernel can, else vfork-like on the stack the spec reserved (it
/// shares init's memory until its execve, and init waits: no copy of the
/// address space), else a plain fork. Returns its pid; the child never returns.
///
/// # Safety
/// Only in init ([`init_main`]), which has one thread: the vfork-like start runs
/// the program's first steps in init's memory.
unsafe fn start_program(spec: &ChildSpec<'_>) -> CResult<libc::pid_t> {
    if let StartPath::OneShot {
        cgroup: CgroupEntry {
            into: Some(dir), ..
        },
    } = spec.start
    {
        // SAFETY: the child runs `program_main` alone: async-signal-safe calls
        // ending in execve or `c_exit`, never returning here.
        match unsafe { sys::c_fork_into_cgroup(dir) } {
            // SAFETY: this is the program's own process, just forked.
            Ok(0) => unsafe { program_main(spec, true) },
            Ok(pid) => return Ok(pid),
            Err(libc::ENOSYS | libc::EINVAL | libc::E2BIG) => {} // kernel < 5.7
            Err(e) => return Err(e),
        }
    }
    if let Some(stack) = spec.program_stack.take() {
        // SAFETY: this closure runs as the program's own process, just started.
        let mut program = || unsafe { program_main(spec, false) };
        // SAFETY: init has one thread (see # Safety), and the child runs
        // `program_main` alone: async-signal-safe calls ending in execve or exit.
        return unsafe { sys::c_vfork_on(&mut program, stack) };
    }
    // SAFETY: as for the fork into the cgroup above.
    match unsafe { sys::c_fork() }? {
        // SAFETY: this is the program's own process, just forked.
        0 => unsafe { program_main(spec, false) },
        pid => Ok(pid),
    }
}

/// The program's process: join the cgroup, become the box user, exec.
///
/// # Safety
/// Only in the program's own process, just forked (or vfork-started) by init:
/// it puts the run's descriptors on 0, 1 and 2, closing what was there, which
/// nothing running in that process uses again (it execs or exits).
unsafe fn program_main(spec: &ChildSpec<'_>, joined: bool) -> ! {
    if let StartPath::OneShot { cgroup } = &spec.start {
        if !joined {
            for fd in &cgroup.join {
                try_step(spec, Step::JoinCgroup, sys::c_write_all(*fd, b"0\n"));
            }
        }
        cgroup_namespace(spec);
    }
    // The OOM killer picks the run's processes before the slot's launcher and
    // init (which could lower their own score only with CAP_SYS_RESOURCE);
    // raising one's own score needs no privilege, but must happen while still
    // root (/proc/self is no longer ours once the uid changes).
    try_step(
        spec,
        Step::OomScore,
        sys::c_write_existing(c"/proc/self/oom_score_adj", b"1000"),
    );
    if let Some(fds) = &spec.memory {
        set_memory_limit(spec, fds);
    }
    if !spec.start.launcher_clean() {
        // A clone of the supervisor; a launcher's children start clean.
        sys::c_reset_signals();
    }
    sys::c_setsid();
    // A slot's init runs with the control path's short slice (as its launcher
    // does), a one-shot init with its caller's; the program is scheduled as it
    // would be outside.
    let _ = sys::c_sched_slice(0);
    for (target, fd) in spec.stdio.iter().enumerate() {
        if let Some(fd) = fd {
            let target = i32::try_from(target).unwrap_or(0);
            // SAFETY: 0, 1 and 2 of the program's process are used by nothing
            // that runs here before the execve (see # Safety).
            try_step(spec, Step::Stdio, unsafe { sys::c_dup2(*fd, target) });
        }
    }
    try_step(spec, Step::CloseFds, sys::c_cloexec_from(3));
    try_step(spec, Step::Rlimit, rlimit::apply(&spec.rlimits));
    try_step(spec, Step::Chdir, sys::c_chdir(c"/box"));
    let bounding_set_empty = spec.start.launcher_clean();
    if let Err((step, e, aux)) = creds::drop_to(spec.uid, spec.last_cap, bounding_set_empty) {
        fail(spec, step, e, aux);
    }
    try_step(
        spec,
        Step::NoNewPrivs,
        sys::c_prctl(libc::PR_SET_NO_NEW_PRIVS, 1),
    );
    try_step(spec, Step::Seccomp, seccomp::install(spec.filters));
    exec_program(spec)
}

/// The run's exact memory limit: its own plus what is charged now (the slot's
/// processes, init's and our kernel objects), which is also the peak's baseline
/// (reset to now, reported). The limit only comes down here (the slot set it
/// with room for the setup), so memory before memsw.
fn set_memory_limit(spec: &ChildSpec<'_>, fds: &MemoryFds) {
    let mut buf = [0u8; 32];
    let usage = match sys::c_pread0(fds.usage, &mut buf) {
        Ok(n) => parse_u64(buf.get(..n).unwrap_or_default()),
        Err(e) => fail(spec, Step::MemoryLimit, e, 0),
    };
    let limit = usage.saturating_add(spec.memory_bytes);
    let mut text = [0u8; 24];
    let text = format_u64(limit, &mut text);
    try_step(spec, Step::MemoryLimit, sys::c_pwrite0(fds.limit, text));
    if let Some(swap) = fds.swap_limit {
        try_step(spec, Step::MemoryLimit, sys::c_pwrite0(swap, text));
    }
    if let Some(peak) = fds.peak_reset {
        // v2 kernels before 6.12 cannot reset memory.peak (a fresh cgroup then).
        let _ = sys::c_pwrite0(peak, b"0");
    }
    report(spec.report_fd, Record::Base { bytes: usage });
}

/// The decimal number at the start of `bytes` (0 if none).
fn parse_u64(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0u64, |n, b| {
            n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
        })
}

/// `n` in decimal, in `buf`.
fn format_u64(mut n: u64, buf: &mut [u8; 24]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        if let Some(d) = buf.get_mut(i) {
            *d = b'0' + u8::try_from(n % 10).unwrap_or(0);
        }
        n /= 10;
        if n == 0 || i == 0 {
            break;
        }
    }
    buf.get(i..).unwrap_or_default()
}

/// A cgroup namespace rooted at the run's cgroup; absent on old kernels.
fn cgroup_namespace(spec: &ChildSpec<'_>) {
    match sys::c_unshare(libc::CLONE_NEWCGROUP) {
        Err(libc::EINVAL) | Ok(()) => {}
        Err(e) => fail(spec, Step::JoinCgroup, e, 0),
    }
}

/// Try each candidate path (a name is looked up in the box's PATH); ENOENT moves
/// on to the next, any other error is kept as the most telling one.
fn exec_program(spec: &ChildSpec<'_>) -> ! {
    let mut telling = libc::ENOENT;
    for path in &spec.exec_paths {
        let e = sys::c_execve(path, &spec.argv, &spec.envp);
        if e != libc::ENOENT && e != libc::ENOTDIR {
            telling = e;
        }
    }
    fail(spec, Step::Exec, telling, 0)
}

/// The program's name for messages.
pub(crate) fn describe_exec(paths: &[CString]) -> String {
    paths
        .iter()
        .map(|p| CStr::to_string_lossy(p).into_owned())
        .collect::<Vec<_>>()
        .join(", ")
}

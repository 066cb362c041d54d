//! The only `unsafe` of the crate: thin wrappers over the system calls the sandbox
//! makes. Two kinds:
//!
//! - **child-safe** wrappers (the `c_*` functions) run in the cloned child of a
//!   possibly multi-threaded process, before `execve`. They are async-signal-safe:
//!   raw system calls on pre-built `CStr`s and slices, no allocation, no locks, no
//!   panics; an error is the bare errno (`i32`).
//! - host wrappers (`supervisor.rs`, `launch.rs`) return `std::io::Result` and may
//!   allocate: the supervisor's and the launcher's side.
//!
//! Most wrappers are safe because their types rule misuse out. Those whose
//! soundness depends on what the caller does around them are `unsafe fn` with a
//! `# Safety` section: the forks (`c_fork`, `c_fork_into_cgroup`, `c_vfork_on`,
//! `clone_child`, `clone_fork`, `run_as_vfork_child`: what may run in the child,
//! and in how many threads) and the raw descriptor closers (`c_close`, `c_dup2`,
//! `c_close_range`: they can close a descriptor an `OwnedFd` owns). Their callers
//! outside `sys/` say in a SAFETY note why the duty holds.

use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::os::fd::RawFd;

/// The namespace flags `clone_child` and `clone_fork` accept: with anything else
/// (`CLONE_VM`, `CLONE_THREAD`, `CLONE_SETTLS`, ...) the child would share or
/// corrupt our memory, which those safe wrappers must rule out.
pub(crate) const NAMESPACE_FLAGS: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWCGROUP) as u64;

/// Errno of the last failed call, without allocating.
fn errno() -> i32 {
    // SAFETY: __errno_location returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() }
}

/// Child-safe result: the errno on failure.
pub(crate) type CResult<T = ()> = Result<T, i32>;

fn check(rc: libc::c_int) -> CResult {
    if rc < 0 { Err(errno()) } else { Ok(()) }
}

fn opt_ptr(s: Option<&CStr>) -> *const libc::c_char {
    s.map_or(std::ptr::null(), CStr::as_ptr)
}

pub(crate) fn c_mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> CResult {
    // SAFETY: every pointer is a NUL-terminated string that outlives the call, or null
    // where mount(2) accepts null; no allocation (child-safe).
    check(unsafe {
        libc::mount(
            opt_ptr(source),
            target.as_ptr(),
            opt_ptr(fstype),
            flags,
            opt_ptr(data).cast(),
        )
    })
}

/// Attach the detached mount `tree` (from `open_tree`) at `target`.
pub(crate) fn c_move_mount(tree: RawFd, target: &CStr) -> CResult {
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
    // SAFETY: raw move_mount(2): an fd we hold, an empty source path, a valid target.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if rc < 0 { Err(errno()) } else { Ok(()) }
}

pub(crate) fn c_umount_detach(target: &CStr) -> CResult {
    // SAFETY: valid NUL-terminated path; child-safe system call.
    check(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) })
}

pub(crate) fn c_mkdir(path: &CStr, mode: libc::mode_t) -> CResult {
    // SAFETY: valid NUL-terminated path; child-safe system call.
    match check(unsafe { libc::mkdir(path.as_ptr(), mode) }) {
        Err(libc::EEXIST) => Ok(()),
        other => other,
    }
}

pub(crate) fn c_symlink(target: &CStr, link: &CStr) -> CResult {
    // SAFETY: valid NUL-terminated paths; child-safe system call.
    check(unsafe { libc::symlink(target.as_ptr(), link.as_ptr()) })
}

/// Create (or truncate) `path` and write all of `contents` to it.
pub(crate) fn c_write_file(path: &CStr, contents: &[u8], mode: libc::mode_t) -> CResult {
    // SAFETY: valid NUL-terminated path; the fd is closed below on every path.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            libc::c_uint::from(mode),
        )
    };
    if fd < 0 {
        return Err(errno());
    }
    let written = c_write_all(fd, contents);
    // SAFETY: `fd` was opened above and is used no more.
    unsafe { c_close(fd) };
    written
}

/// Create `path` as an empty file unless it exists (a bind mount target).
pub(crate) fn c_write_file_if_missing(path: &CStr) -> CResult {
    // SAFETY: valid NUL-terminated path; the fd is closed right away.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_CREAT | libc::O_CLOEXEC,
            0o644 as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: `fd` was opened above and is used no more.
    unsafe { c_close(fd) };
    Ok(())
}

pub(crate) fn c_write_all(fd: RawFd, mut bytes: &[u8]) -> CResult {
    while !bytes.is_empty() {
        // SAFETY: the pointer and length describe a live slice; child-safe system call.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            let e = errno();
            if e == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        bytes = bytes.get(n.unsigned_abs()..).unwrap_or_default();
    }
    Ok(())
}

/// close(2), errors ignored.
///
/// # Safety
/// `fd` is a descriptor the caller owns and nothing will use or close again: no
/// `OwnedFd`, `File` or socket of this process may hold it.
unsafe fn c_close(fd: RawFd) {
    // SAFETY: the caller owns `fd` and gives it up (see # Safety).
    unsafe { libc::close(fd) };
}

pub(crate) fn c_chdir(path: &CStr) -> CResult {
    // SAFETY: valid NUL-terminated path; child-safe system call.
    check(unsafe { libc::chdir(path.as_ptr()) })
}

pub(crate) fn c_pivot_root_here() -> CResult {
    let dot = c".";
    // SAFETY: pivot_root(".", ".") stacks the old root on the new one (see
    // pivot_root(2) NOTES); valid strings; child-safe raw system call.
    let rc = unsafe { libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()) };
    if rc < 0 { Err(errno()) } else { Ok(()) }
}

pub(crate) fn c_sethostname(name: &CStr) -> CResult {
    let bytes = name.to_bytes();
    // SAFETY: pointer and length of a live byte slice; child-safe system call.
    check(unsafe { libc::sethostname(bytes.as_ptr().cast(), bytes.len()) })
}

pub(crate) fn c_unshare(flags: libc::c_int) -> CResult {
    // SAFETY: plain system call with an integer argument.
    check(unsafe { libc::unshare(flags) })
}

pub(crate) fn c_setns(fd: RawFd, nstype: libc::c_int) -> CResult {
    // SAFETY: plain system call on a descriptor the supervisor keeps open.
    check(unsafe { libc::setns(fd, nstype) })
}

/// IFF_UP (1) as the `short` that `ifreq.ifr_flags` is.
const IFF_UP: libc::c_short = 1;

/// Bring the loopback device of the current network namespace up.
pub(crate) fn c_loopback_up() -> CResult {
    // SAFETY: socket(2) with constant arguments; the fd is closed on every path.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(errno());
    }
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = libc::c_char::from_ne_bytes([*src]);
    }
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write the ifreq we own.
    let rc = unsafe {
        if libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut req) < 0 {
            -1
        } else {
            req.ifr_ifru.ifru_flags |= IFF_UP;
            libc::ioctl(sock, libc::SIOCSIFFLAGS, &req)
        }
    };
    let result = check(rc);
    // SAFETY: `sock` was opened above and is used no more.
    unsafe { c_close(sock) };
    result
}

/// fork(2) by the raw system call: glibc's `fork()` takes malloc's arena locks in
/// its atfork handling, and in the clone of a multi-threaded process one of them
/// may be held forever by a thread that does not exist here. The raw call takes no
/// lock; the child only makes raw system calls afterwards.
///
/// # Safety
/// In the child (`Ok(0)`), until it execs or exits: when the calling process may
/// have more than one thread, only async-signal-safe calls (the `c_*` wrappers:
/// no allocation, no locks, no panics), since a lock another thread held at the
/// fork stays held for ever in the copy; and the child never returns into frames
/// whose drops would act on what the parent owns (it ends in `c_exit`).
pub(crate) unsafe fn c_fork() -> CResult<libc::pid_t> {
    // SAFETY: clone(SIGCHLD) without CLONE_VM is fork: the child gets a private copy
    // of the address space and continues on its copy of this stack.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::c_long::from(libc::SIGCHLD),
            0,
            0,
            0,
            0,
        )
    };
    if rc < 0 {
        Err(errno())
    } else {
        libc::pid_t::try_from(rc).map_err(|_| libc::EOVERFLOW)
    }
}

/// fork(2) straight into the cgroup `cgroup_dir` (clone3 with CLONE_INTO_CGROUP,
/// Linux 5.7+, cgroup v2): the child is born there, so no migration is needed —
/// a migration waits for an RCU grace period (the cgroup threadgroup rwsem),
/// which is most of a short run's wall time. Raw for the same reason as c_fork.
///
/// # Safety
/// As for [`c_fork`]: the child makes only async-signal-safe calls until it
/// execs or exits, and never returns into the parent's frames.
pub(crate) unsafe fn c_fork_into_cgroup(cgroup_dir: RawFd) -> CResult<libc::pid_t> {
    #[repr(C)]
    struct CloneArgs {
        flags: u64,
        pidfd: u64,
        child_tid: u64,
        parent_tid: u64,
        exit_signal: u64,
        stack: u64,
        stack_size: u64,
        tls: u64,
        set_tid: u64,
        set_tid_size: u64,
        cgroup: u64,
    }
    const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
    let args = CloneArgs {
        flags: CLONE_INTO_CGROUP,
        pidfd: 0,
        child_tid: 0,
        parent_tid: 0,
        exit_signal: libc::SIGCHLD.unsigned_abs().into(),
        stack: 0,
        stack_size: 0,
        tls: 0,
        set_tid: 0,
        set_tid_size: 0,
        cgroup: u64::from(cgroup_dir.unsigned_abs()),
    };
    // SAFETY: clone3 without CLONE_VM and without a stack is fork: the child gets a
    // private copy of memory and continues on its copy of this stack; `args` is a
    // live clone_args of the size we pass.
    let rc = unsafe { libc::syscall(libc::SYS_clone3, &args, std::mem::size_of::<CloneArgs>()) };
    if rc < 0 {
        Err(errno())
    } else {
        libc::pid_t::try_from(rc).map_err(|_| libc::EOVERFLOW)
    }
}

/// wait4 on any child, retrying on EINTR. Returns (pid, wait status, the
/// child's `ru_maxrss` in KiB: the largest resident set of it and of the
/// children it reaped).
pub(crate) fn c_wait_any() -> CResult<(libc::pid_t, libc::c_int, u64)> {
    loop {
        let mut status = 0;
        // SAFETY: all-zero is a valid rusage (plain integers and timevals).
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: status and usage point to live values of the types wait4
        // writes; child-safe system call.
        let pid = unsafe { libc::wait4(-1, &mut status, libc::__WALL, &mut usage) };
        if pid >= 0 {
            return Ok((pid, status, u64::try_from(usage.ru_maxrss).unwrap_or(0)));
        }
        let e = errno();
        if e != libc::EINTR {
            return Err(e);
        }
    }
}

pub(crate) fn c_setsid() {
    // SAFETY: plain system call; failure (already a leader) is harmless.
    unsafe { libc::setsid() };
}

/// dup2(2): `from` duplicated onto `to`, closing what `to` was.
///
/// # Safety
/// `to` is not a descriptor anything else owns (an `OwnedFd`, a `File`): dup2
/// closes it silently, and the owner would later use or close another file.
pub(crate) unsafe fn c_dup2(from: RawFd, to: RawFd) -> CResult {
    // SAFETY: nothing else owns `to` (see # Safety); `from` is only read.
    check(unsafe { libc::dup2(from, to) })
}

/// close_range(first, last, 0): closes every descriptor in `first..=last`.
///
/// # Safety
/// No descriptor in the range is owned by anything (an `OwnedFd`, a `File`)
/// that will use or close it afterwards.
pub(crate) unsafe fn c_close_range(first: u32, last: u32) -> CResult {
    // SAFETY: the caller gives up every descriptor of the range (see # Safety).
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0u32) };
    if rc < 0 { Err(errno()) } else { Ok(()) }
}

/// close_range(first, ~0, CLOSE_RANGE_CLOEXEC): every descriptor from `first` on
/// closes at the next execve. Nothing is closed now, so no owner is surprised.
pub(crate) fn c_cloexec_from(first: u32) -> CResult {
    // SAFETY: marking close-on-exec closes nothing in this process; integer
    // arguments only.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc < 0 { Err(errno()) } else { Ok(()) }
}

pub(crate) fn c_setrlimit(resource: libc::__rlimit_resource_t, soft: u64, hard: u64) -> CResult {
    let lim = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: lim is a live struct; child-safe system call.
    check(unsafe { libc::setrlimit(resource, &lim) })
}

pub(crate) fn c_setgroups_empty() -> CResult {
    // SAFETY: raw system call with an empty list (size 0, null pointer). Not glibc's
    // setgroups(): like every set*id wrapper it takes a lock and signals every
    // thread it knows of, and in this clone those threads do not exist and that
    // lock may be held forever.
    let rc = unsafe { libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) };
    if rc < 0 { Err(errno()) } else { Ok(()) }
}

pub(crate) fn c_setresgid(gid: u32) -> CResult {
    // SAFETY: raw system call (not glibc's setxid broadcast to other threads, which
    // would signal threads that do not exist in this clone).
    let rc = unsafe { libc::syscall(libc::SYS_setresgid, gid, gid, gid) };
    if rc < 0 { Err(errno()) } else { Ok(()) }
}

pub(crate) fn c_setresuid(uid: u32) -> CResult {
    // SAFETY: raw system call, see c_setresgid.
    let rc = unsafe { libc::syscall(libc::SYS_setresuid, uid, uid, uid) };
    if rc < 0 { Err(errno()) } else { Ok(()) }
}

pub(crate) fn c_prctl(option: libc::c_int, arg2: libc::c_ulong) -> CResult {
    // SAFETY: prctl options used here take integer arguments only.
    check(unsafe {
        libc::prctl(
            option,
            arg2,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    })
}

/// Empty the permitted, effective and inheritable sets of this thread.
pub(crate) fn c_capset_none() -> CResult {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: header and a two-element data array as capset(2) v3 expects, both live.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) };
    if rc < 0 { Err(errno()) } else { Ok(()) }
}

/// A null-terminated array of pointers to C strings, as execve(2) reads `argv`
/// and `envp`: built once (before clone) from strings it borrows, so it cannot
/// lack its terminating null nor outlive what it points into.
#[derive(Debug)]
pub(crate) struct CStrArray<'a> {
    ptrs: Vec<*const libc::c_char>,
    _strings: PhantomData<&'a [CString]>,
}

impl<'a> CStrArray<'a> {
    pub(crate) fn new(strings: &'a [CString]) -> Self {
        let ptrs = strings
            .iter()
            .map(|s| s.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect();
        CStrArray {
            ptrs,
            _strings: PhantomData,
        }
    }
}

pub(crate) fn c_execve(path: &CStr, argv: &CStrArray<'_>, envp: &CStrArray<'_>) -> i32 {
    // SAFETY: `CStrArray` guarantees both arrays end with a null pointer and that
    // every other pointer is into a `CString` borrowed for the array's life.
    unsafe { libc::execve(path.as_ptr(), argv.ptrs.as_ptr(), envp.ptrs.as_ptr()) };
    errno()
}

/// read(2) once, retrying on EINTR; 0 = EOF.
pub(crate) fn c_read(fd: RawFd, buf: &mut [u8]) -> CResult<usize> {
    loop {
        // SAFETY: buf is a live mutable slice of the given length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n.unsigned_abs());
        }
        let e = errno();
        if e != libc::EINTR {
            return Err(e);
        }
    }
}

pub(crate) fn c_exit(code: i32) -> ! {
    // SAFETY: _exit ends the process without running atexit handlers or destructors,
    // which belong to the supervisor this process was cloned from.
    unsafe { libc::_exit(code) }
}

mod launch;
mod supervisor;

pub(crate) use launch::*;
pub(crate) use supervisor::*;

/// CLOCK_MONOTONIC in nanoseconds (0 when unreadable); the clock `Instant` uses.
pub(crate) fn c_monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: raw clock_gettime(2) into a live timespec; child-safe.
    let rc = unsafe { libc::syscall(libc::SYS_clock_gettime, libc::CLOCK_MONOTONIC, &raw mut ts) };
    if rc < 0 {
        return 0;
    }
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// A stack for one vfork-like child ([`c_vfork_on`]): it borrows its memory
/// exclusively for `'a` (nobody else can touch it meanwhile), has at least
/// [`VforkStack::MIN`] bytes, and is consumed by the one child that runs on it,
/// so two children can never share it.
#[derive(Debug)]
pub(crate) struct VforkStack<'a> {
    top: *mut u8,
    _memory: PhantomData<&'a mut [u8]>,
}

impl<'a> VforkStack<'a> {
    /// The smallest stack accepted: the child's frames before its execve.
    pub(crate) const MIN: usize = 16 * 1024;

    /// `None` when `memory` is smaller than [`VforkStack::MIN`].
    pub(crate) fn new(memory: &'a mut [u8]) -> Option<Self> {
        let top = memory.as_mut_ptr_range().end;
        (memory.len() >= Self::MIN).then_some(VforkStack {
            top,
            _memory: PhantomData,
        })
    }
}

/// Start `child` like vfork(2) on `stack`: it shares our memory until it calls
/// execve or exits, and we are suspended until then. No copy of the address
/// space is made (a fork copies page tables and write-protects every private
/// page, then the child's first writes fault). Through glibc's `clone()`
/// wrapper, which takes no lock.
///
/// # Safety
/// `child` runs in our memory while only the calling thread is suspended: the
/// calling process has one thread (init), or `child` touches nothing another
/// thread may use. It makes only async-signal-safe calls and ends in execve or
/// exit, never unwinding.
pub(crate) unsafe fn c_vfork_on(
    child: &mut dyn FnMut() -> isize,
    stack: VforkStack<'_>,
) -> CResult<libc::pid_t> {
    extern "C" fn trampoline(data: *mut libc::c_void) -> libc::c_int {
        // SAFETY: data is the &mut dyn FnMut on the suspended parent's stack, which
        // the child shares (CLONE_VM) and which stays put until the child execs.
        let f = unsafe { &mut *data.cast::<&mut dyn FnMut() -> isize>() };
        let code = f();
        libc::c_int::try_from(code).unwrap_or(1)
    }
    let mut data: &mut dyn FnMut() -> isize = child;
    let top = stack.top as usize;
    let aligned = stack.top.wrapping_sub(top % 16);
    // SAFETY: `stack` is memory borrowed exclusively for this child alone, at
    // least `VforkStack::MIN` bytes, consumed here so no other child can run on
    // it; it outlives the child's use of it, because CLONE_VFORK suspends us
    // until the child has exec'd or exited. glibc's clone() runs `trampoline` on
    // it; `data` and the closure it points to stay borrowed by this call.
    let pid = unsafe {
        libc::clone(
            trampoline,
            aligned.cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&raw mut data).cast(),
        )
    };
    if pid < 0 { Err(errno()) } else { Ok(pid) }
}

/// Write `bytes` into the existing file `path` (a /proc knob).
pub(crate) fn c_write_existing(path: &CStr, bytes: &[u8]) -> CResult {
    // SAFETY: valid NUL-terminated path; the fd is closed below on every path.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    let written = c_write_all(fd, bytes);
    // SAFETY: `fd` was opened above and is used no more.
    unsafe { c_close(fd) };
    written
}

/// Every signal to its default action and none blocked: a program must not
/// inherit the supervisor's choices (Rust programs ignore SIGPIPE, a tokio
/// thread may block signals). Handlers need no reset: execve does that; ignored
/// and blocked signals survive it. Raw system calls: glibc's wrappers refuse the
/// two signals it keeps for itself (32, 33), which may be ignored all the same.
pub(crate) fn c_reset_signals() {
    // The kernel's struct sigaction, all zero: SIG_DFL, no flags, empty mask.
    let action = [0u64; 4];
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: raw rt_sigaction(2) with a live zeroed struct and the kernel's
        // sigset size; no old action is read back.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                action.as_ptr(),
                std::ptr::null_mut::<u64>(),
                8usize,
            )
        };
    }
    let empty = 0u64;
    // SAFETY: raw rt_sigprocmask(2) setting this thread's mask to an empty set.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &raw const empty,
            std::ptr::null_mut::<u64>(),
            8usize,
        )
    };
}

/// pread(2) at offset 0 into `buf`; the bytes read.
pub(crate) fn c_pread0(fd: RawFd, buf: &mut [u8]) -> CResult<usize> {
    // SAFETY: pointer and length of a live mutable slice; child-safe system call.
    let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        Err(errno())
    } else {
        Ok(n.unsigned_abs())
    }
}

/// pwrite(2) all of `bytes` at offset 0 (a cgroup control file: one write).
pub(crate) fn c_pwrite0(fd: RawFd, bytes: &[u8]) -> CResult {
    // SAFETY: pointer and length of a live slice; child-safe system call.
    let n = unsafe { libc::pwrite(fd, bytes.as_ptr().cast(), bytes.len(), 0) };
    if n < 0 {
        Err(errno())
    } else if n.unsigned_abs() == bytes.len() {
        Ok(())
    } else {
        Err(libc::EIO)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn clone_wrappers_take_namespace_flags_only() {
        let mut stack = vec![0u8; 64 * 1024];
        // CLONE_PTRACE is harmless to try; CLONE_VM would share our memory.
        for flag in [libc::CLONE_PTRACE, libc::CLONE_VM, libc::CLONE_THREAD] {
            let mut child = || 0isize;
            // SAFETY: the child would make no call at all (and the flag is
            // refused before any clone).
            let e = unsafe { clone_child(&mut child, &mut stack, flag) }.unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{flag:#x}");
            // SAFETY: refused before any clone: no child exists to run anything.
            let e = unsafe { clone_fork(u64::try_from(flag).unwrap(), None) }.unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{flag:#x}");
        }
        let mut child = || 0isize;
        // SAFETY: as above: the child would make no call; refused before any clone.
        let e = unsafe { clone_child(&mut child, &mut stack[..1024], 0) }.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    }

    #[test]
    fn a_vfork_stack_has_room() {
        assert!(VforkStack::new(&mut [0u8; 1024]).is_none());
        let mut mem = vec![0u8; VforkStack::MIN];
        let end = mem.as_mut_ptr_range().end;
        assert_eq!(VforkStack::new(&mut mem).unwrap().top, end);
    }

    #[test]
    fn an_argv_ends_with_null() {
        let strings = [CString::new("a").unwrap(), CString::new("b").unwrap()];
        let argv = CStrArray::new(&strings);
        assert_eq!(argv.ptrs.len(), 3);
        assert_eq!(argv.ptrs[0], strings[0].as_ptr());
        assert!(argv.ptrs[2].is_null());
        assert!(CStrArray::new(&[]).ptrs == [std::ptr::null()]);
    }
}

/// `struct sched_attr` as the kernel defines it (first version, 48 bytes; the
/// kernel accepts any size it knows).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// Set the calling thread's scheduler slice (EEVDF's request size, kernel 6.12
/// and later: `sched_attr.sched_runtime` of a fair-class task; `0` restores the
/// host's default), keeping its policy, nice value and reset-on-fork flag. A
/// thread of a real-time or deadline class is left alone. Older kernels accept
/// and ignore the slice.
pub(crate) fn c_sched_slice(runtime_ns: u64) -> CResult {
    const SCHED_FLAG_RESET_ON_FORK: u64 = 1;
    let mut attr = SchedAttr::default();
    let size = u32::try_from(std::mem::size_of::<SchedAttr>()).unwrap_or(48);
    // SAFETY: the kernel writes at most `size` bytes into our live struct.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &raw mut attr,
            libc::c_ulong::from(size),
            0,
        )
    };
    if rc < 0 {
        return Err(errno());
    }
    let fair = [libc::SCHED_OTHER, libc::SCHED_BATCH, libc::SCHED_IDLE]
        .iter()
        .any(|p| u32::try_from(*p).is_ok_and(|p| p == attr.policy));
    if !fair {
        return Ok(());
    }
    let wanted = SchedAttr {
        size,
        policy: attr.policy,
        flags: attr.flags & SCHED_FLAG_RESET_ON_FORK,
        nice: attr.nice,
        runtime: runtime_ns,
        ..SchedAttr::default()
    };
    // SAFETY: the kernel reads `size` bytes of our live struct.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &raw const wanted, 0) };
    if rc < 0 { Err(errno()) } else { Ok(()) }
}

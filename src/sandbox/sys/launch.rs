//! Host-side wrappers the slot's launcher needs: a socket that carries
//! descriptors, a memfd, fork-like clones into namespaces (and a cgroup), CPU
//! clocks of a process, signal reset. The launcher is a freshly exec'd,
//! single-threaded process, so these may allocate.

use std::ffi::CStr;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

fn last_err<T>() -> io::Result<T> {
    Err(io::Error::last_os_error())
}

fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return last_err();
    }
    // SAFETY: the kernel just returned this descriptor; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A connected `SOCK_SEQPACKET` pair (message boundaries kept), close-on-exec.
pub(crate) fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    let kind = libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC;
    // SAFETY: fds is a live two-element array, as socketpair(2) expects.
    if unsafe { libc::socketpair(libc::AF_UNIX, kind, 0, fds.as_mut_ptr()) } < 0 {
        return last_err();
    }
    Ok((owned(fds[0])?, owned(fds[1])?))
}

/// Whether `fd` is a `SOCK_SEQPACKET` socket (the launcher's control channel).
pub(crate) fn is_seqpacket(fd: RawFd) -> bool {
    let mut kind: libc::c_int = 0;
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>()).unwrap_or(4);
    // SAFETY: getsockopt writes at most `len` bytes into `kind`, which we own.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&raw mut kind).cast(),
            &raw mut len,
        )
    };
    rc == 0 && kind == libc::SOCK_SEQPACKET
}

/// An anonymous memory file, close-on-exec.
pub(crate) fn memfd(name: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: a valid NUL-terminated name; the result is a new descriptor.
    owned(unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) })
}

/// Send one message with `fds` attached (SCM_RIGHTS).
pub(crate) fn send_msg(sock: RawFd, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let fd_bytes = std::mem::size_of_val(fds);
    let space_len = u32::try_from(fd_bytes).map_err(|_| io::Error::other("too many fds"))?;
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(space_len) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr().cast_mut().cast(),
        iov_len: bytes.len(),
    };
    // SAFETY: msghdr is plain old data; all-zero is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        // SAFETY: msg_control points to `space` bytes we own, enough for one
        // cmsghdr carrying `fds`; CMSG_* only compute addresses inside it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(space_len) as usize;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast(), fds.len());
        }
    }
    loop {
        // SAFETY: msg describes live buffers (bytes, control) for the whole call.
        let n = unsafe { libc::sendmsg(sock, &raw const msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Receive one message (0 bytes: the peer is gone) and the descriptors attached
/// to it, close-on-exec. A truncated message or descriptor list is an error.
pub(crate) fn recv_msg(
    sock: RawFd,
    buf: &mut [u8],
    max_fds: usize,
) -> io::Result<(usize, Vec<OwnedFd>)> {
    let fd_bytes = u32::try_from(max_fds * std::mem::size_of::<RawFd>())
        .map_err(|_| io::Error::other("too many fds"))?;
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain old data; all-zero is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space;
    let n = loop {
        // SAFETY: msg describes live buffers (buf, control) for the whole call.
        let n = unsafe { libc::recvmsg(sock, &raw mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n.unsigned_abs();
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut fds = Vec::new();
    // SAFETY: the kernel filled msg_control with well-formed cmsghdrs; the CMSG_*
    // macros walk them within msg_controllen. Each SCM_RIGHTS descriptor is new
    // and ours.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                let len = (*cmsg).cmsg_len - libc::CMSG_LEN(0) as usize;
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&raw const msg, cmsg);
        }
    }
    if msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        return Err(io::Error::other("message or descriptors truncated"));
    }
    Ok((n, fds))
}

/// pwrite(2) the whole of `bytes` at `offset`.
pub(crate) fn pwrite_all(fd: RawFd, mut bytes: &[u8], mut offset: i64) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: pointer and length of a live slice.
        let n = unsafe { libc::pwrite(fd, bytes.as_ptr().cast(), bytes.len(), offset) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let n = n.unsigned_abs();
        bytes = bytes.get(n..).unwrap_or_default();
        offset += i64::try_from(n).map_err(io::Error::other)?;
    }
    Ok(())
}

/// pread(2) exactly `buf.len()` bytes from `offset`.
pub(crate) fn pread_exact(fd: RawFd, buf: &mut [u8], mut offset: i64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let rest = buf.get_mut(done..).unwrap_or_default();
        // SAFETY: pointer and length of a live mutable slice.
        let n = unsafe { libc::pread(fd, rest.as_mut_ptr().cast(), rest.len(), offset) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        done += n.unsigned_abs();
        offset += i64::try_from(n).map_err(io::Error::other)?;
    }
    Ok(())
}

/// Whether environment variable `name` is set (before `main`: libc's environ).
pub(crate) fn env_is_set(name: &CStr) -> bool {
    // SAFETY: getenv with a valid NUL-terminated name; we only test the pointer.
    !unsafe { libc::getenv(name.as_ptr()) }.is_null()
}

/// A fork-like clone (the child continues here on a copy of this stack, returning
/// 0) into new namespaces `flags`, and straight into the cgroup `cgroup` when
/// given (clone3 `CLONE_INTO_CGROUP`, Linux 5.7+, cgroup v2). For the launcher
/// only: it is single-threaded, so the copy holds no lock another thread owns.
///
/// Only namespace flags are accepted (`NAMESPACE_FLAGS`): with `CLONE_VM` (or
/// `CLONE_THREAD`, `CLONE_SETTLS`, ...) and no stack of its own the child would
/// run on our stack, which is undefined behaviour; those are `InvalidInput`.
///
/// # Safety
/// The calling process has one thread (the launcher), so the child's copy holds
/// no lock another thread owns; otherwise the child (`Ok(0)`) may make only
/// async-signal-safe calls until it execs or exits.
pub(crate) unsafe fn clone_fork(flags: u64, cgroup: Option<RawFd>) -> io::Result<libc::pid_t> {
    const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
    if flags & !super::NAMESPACE_FLAGS != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("clone_fork takes namespace flags only, not {flags:#x}"),
        ));
    }
    let rc = match cgroup {
        Some(dir) => {
            let mut args = [0u64; 11];
            args[0] = flags | CLONE_INTO_CGROUP;
            args[4] = u64::from(libc::SIGCHLD.unsigned_abs());
            args[10] = u64::from(dir.unsigned_abs());
            // SAFETY: clone3 without CLONE_VM (only namespace flags, checked
            // above) and without a stack is fork; `args` is
            // a live clone_args (11 u64 fields, CLONE_ARGS_SIZE_VER2) of that size.
            unsafe {
                libc::syscall(
                    libc::SYS_clone3,
                    args.as_ptr(),
                    std::mem::size_of_val(&args),
                )
            }
        }
        None => {
            let flags = libc::c_ulong::try_from(flags).map_err(io::Error::other)?
                | libc::c_ulong::from(libc::SIGCHLD.unsigned_abs());
            // SAFETY: clone without CLONE_VM (only namespace flags, checked above)
            // and without a new stack is fork.
            unsafe { libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0) }
        }
    };
    if rc < 0 {
        return last_err();
    }
    libc::pid_t::try_from(rc).map_err(io::Error::other)
}

/// Wait until child `pid` has ended without reaping it (its pid stays reserved
/// and its CPU clock readable).
pub(crate) fn wait_exited_nowait(pid: libc::pid_t) -> io::Result<()> {
    let id = libc::id_t::try_from(pid).map_err(io::Error::other)?;
    loop {
        // SAFETY: siginfo_t is plain old data; waitid writes into it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WNOWAIT | libc::__WALL;
        // SAFETY: a live siginfo_t; pid is our own child.
        if unsafe { libc::waitid(libc::P_PID, id, &raw mut info, flags) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn clock(id: libc::clockid_t) -> io::Result<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a live timespec; a CPU clock id.
    if unsafe { libc::clock_gettime(id, &raw mut ts) } < 0 {
        return last_err();
    }
    let secs = u64::try_from(ts.tv_sec).map_err(io::Error::other)?;
    let nanos = u32::try_from(ts.tv_nsec).map_err(io::Error::other)?;
    Ok(Duration::new(secs, nanos))
}

/// CPU time of process `pid` itself (not its children): its scheduler clock
/// (`MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)`), also readable while it is
/// an unreaped zombie.
pub(crate) fn process_cpu_time(pid: libc::pid_t) -> io::Result<Duration> {
    const CPUCLOCK_SCHED: libc::clockid_t = 2;
    clock(((!pid) << 3) | CPUCLOCK_SCHED)
}

/// CPU time of the calling thread.
pub(crate) fn thread_cpu_time() -> Duration {
    clock(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or_default()
}

pub(crate) fn setns(fd: RawFd, nstype: libc::c_int) -> io::Result<()> {
    // SAFETY: plain system call on a descriptor we hold.
    if unsafe { libc::setns(fd, nstype) } < 0 {
        return last_err();
    }
    Ok(())
}

pub(crate) fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: plain system call with an integer argument.
    if unsafe { libc::unshare(flags) } < 0 {
        return last_err();
    }
    Ok(())
}

/// Every signal back to its default action and none blocked, so that what the
/// launcher starts does not inherit the supervisor's choices (Rust programs
/// ignore SIGPIPE; a judged program must die of it as anywhere else).
pub(crate) fn reset_signals() {
    super::c_reset_signals();
}

/// End the launcher now, without running anything of the program it was
/// exec'd from (no atexit handlers, no destructors).
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit ends the process; nothing of ours needs unwinding.
    unsafe { libc::_exit(code) }
}

/// Empty this process's capability bounding set (its effective and permitted
/// sets stay: it never execs). Children inherit the empty set, so each run's
/// program need not drop 41 capabilities one `prctl` (one new `cred`) at a time.
/// Returns whether the set is empty afterwards.
pub(crate) fn drop_bounding_set() -> bool {
    (0..64).all(|cap: libc::c_ulong| {
        // SAFETY: PR_CAPBSET_DROP/READ take an integer; numbers past the last
        // capability fail with EINVAL, harmlessly.
        unsafe {
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
            libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) <= 0
        }
    })
}

/// open(2) `path` relative to the directory `dir`, read-only, close-on-exec.
pub(crate) fn open_at(dir: RawFd, path: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: a directory descriptor we hold and a valid NUL-terminated path.
    owned(unsafe { libc::openat(dir, path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) })
}

/// A pidfd for our own (unreaped) child `pid`: readable once it has ended.
pub(crate) fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: raw pidfd_open(2) with integer arguments; the result is a new fd.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    owned(libc::c_int::try_from(fd).unwrap_or(-1))
}

/// Wait until `a` or `b` (if given) is readable or hung up; (a ready, b ready).
pub(crate) fn poll_either(a: RawFd, b: Option<RawFd>) -> io::Result<(bool, bool)> {
    let mut fds = [
        libc::pollfd {
            fd: a,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: b.unwrap_or(-1),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: two live pollfds; a negative fd is ignored by poll(2).
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if rc >= 0 {
            return Ok((fds[0].revents != 0, fds[1].revents != 0));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// One pread(2) at offset 0 (a small counter file).
pub(crate) fn pread_some(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: pointer and length of a live mutable slice.
    let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return last_err();
    }
    Ok(n.unsigned_abs())
}

/// Run `child` as a vfork child of this process that never execs: it shares
/// our memory and we stay suspended until it exits; its exit status is
/// returned. Why (the launcher): the OOM killer never picks a task "in vfork"
/// (one that shares its parent's memory before an execve: `in_vfork()` in
/// `oom_badness`), and that task's page faults are charged to the memory's
/// owner, this process, which stays outside the run's cgroup. `stack` bytes of
/// stack are mapped for it (lazily).
///
/// # Safety
/// The calling process has one thread: the child runs in our memory (CLONE_VM)
/// and CLONE_VFORK suspends only the calling thread, so any other thread would
/// run beside it on the same heap and data.
pub(crate) unsafe fn run_as_vfork_child(child: fn() -> i32, stack: usize) -> io::Result<i32> {
    extern "C" fn trampoline(data: *mut libc::c_void) -> libc::c_int {
        // SAFETY: data is the fn pointer passed below, on our (shared) stack,
        // which stays put while we are suspended.
        let f = unsafe { *data.cast::<fn() -> i32>() };
        f()
    }
    // SAFETY: a fresh private anonymous mapping of `stack` bytes; checked below.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            stack,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return last_err();
    }
    // A guard page at the bottom: an overflow faults instead of writing into
    // whatever is mapped below.
    // SAFETY: the first page of the mapping we just made.
    if unsafe { libc::mprotect(base, 4096, libc::PROT_NONE) } < 0 {
        return last_err();
    }
    let top = (base as usize + stack) & !15;
    let mut data = child;
    // SAFETY: the child runs `trampoline` on the new stack in our memory
    // (CLONE_VM) while we are suspended (CLONE_VFORK): nothing of ours runs
    // meanwhile, so it may use our heap and thread state as its own.
    let pid = unsafe {
        libc::clone(
            trampoline,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&raw mut data).cast(),
        )
    };
    if pid < 0 {
        return last_err();
    }
    let status = super::supervisor::wait_pid(pid)?;
    Ok(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        1
    })
}

/// Die with SIGKILL when our parent does (the launcher: its suspended parent).
pub(crate) fn die_with_parent() {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
}

/// What identifies the namespace behind an nsfs descriptor: (device, inode).
pub(crate) fn ns_id(fd: RawFd) -> io::Result<(u64, u64)> {
    // SAFETY: stat is plain old data; fstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a descriptor we hold and a live stat buffer.
    if unsafe { libc::fstat(fd, &raw mut st) } < 0 {
        return last_err();
    }
    Ok((st.st_dev, st.st_ino))
}

pub(crate) fn sethostname(name: &CStr) -> io::Result<()> {
    let bytes = name.to_bytes();
    // SAFETY: pointer and length of a live byte slice.
    if unsafe { libc::sethostname(bytes.as_ptr().cast(), bytes.len()) } < 0 {
        return last_err();
    }
    Ok(())
}

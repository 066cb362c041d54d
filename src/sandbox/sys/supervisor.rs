//! Host-side wrappers (the supervisor and the launcher): `std::io::Result`, may
//! allocate. Never called between clone and execve.

use std::ffi::CStr;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// A pipe whose both ends are close-on-exec: (read, write).
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a live two-element array, as pipe2(2) expects.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 just returned these two descriptors; nobody else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A detached clone of the mount at `path` (open_tree with OPEN_TREE_CLONE), to be
/// attached in another mount namespace with `c_move_mount`.
pub(crate) fn open_tree_clone(path: &CStr) -> io::Result<OwnedFd> {
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    let flags = OPEN_TREE_CLONE | libc::O_CLOEXEC.cast_unsigned();
    // SAFETY: raw open_tree(2) on a valid path; the result is a new descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = RawFd::try_from(fd).map_err(|_| io::Error::other("descriptor out of range"))?;
    // SAFETY: open_tree just returned this descriptor; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Duplicate `fd` to a number ≥ `min`, close-on-exec.
pub(crate) fn dup_cloexec_at_least(fd: RawFd, min: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor the caller holds.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, min) };
    if new < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fcntl just created this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Wait for readability of `fd` for at most `timeout_ms`; true when readable or hung up.
pub(crate) fn poll_readable(fd: RawFd, timeout_ms: i32) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one live pollfd.
    let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    match rc {
        n if n > 0 => Ok(true),
        0 => Ok(false),
        _ => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            }
        }
    }
}

pub(crate) fn read_some(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: buf is a live mutable slice of the given length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n.unsigned_abs());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

pub(crate) fn kill(pid: libc::pid_t, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: plain system call.
    if unsafe { libc::kill(pid, sig) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Block until child `pid` ends; returns its wait status.
pub(crate) fn wait_pid(pid: libc::pid_t) -> io::Result<libc::c_int> {
    loop {
        let mut status = 0;
        // SAFETY: status is a live c_int; pid is our own child.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
        if rc >= 0 {
            return Ok(status);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

pub(crate) fn geteuid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// Clone the calling process into new namespaces; the child runs `child` on
/// `stack` and exits with its return value. Returns the child's pid. Only
/// namespace flags are accepted (`NAMESPACE_FLAGS`; anything else, `CLONE_VM`
/// above all, is `InvalidInput`), and a stack of at least `VforkStack::MIN`
/// bytes, so the child always works on its own copy of our memory.
///
/// # Why clone and not a re-exec
/// See the module docs of `spawn.rs`: the child runs only child-safe code.
///
/// # Safety
/// `child` runs in a copy of this possibly multi-threaded process with one
/// thread: it makes only async-signal-safe calls (the `c_*` wrappers: no
/// allocation, no locks, no panics), since a lock another thread held at the
/// clone stays held for ever in the copy.
pub(crate) unsafe fn clone_child(
    child: &mut dyn FnMut() -> isize,
    stack: &mut [u8],
    flags: libc::c_int,
) -> io::Result<libc::pid_t> {
    extern "C" fn trampoline(data: *mut libc::c_void) -> libc::c_int {
        // SAFETY: data points to `data` in clone_child's frame as it was at the
        // clone; without CLONE_VM the child has its own copy of that frame and of
        // the closure it refers to, which nothing else in the child touches.
        let f = unsafe { &mut *data.cast::<&mut dyn FnMut() -> isize>() };
        let code = f();
        libc::c_int::try_from(code).unwrap_or(1)
    }
    let namespaces = u64::try_from(flags).map_err(|_| io::ErrorKind::InvalidInput)?;
    if namespaces & !super::NAMESPACE_FLAGS != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("clone_child takes namespace flags only, not {flags:#x}"),
        ));
    }
    if stack.len() < super::VforkStack::MIN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "clone_child needs a stack of at least 16 KiB",
        ));
    }
    let mut data: &mut dyn FnMut() -> isize = child;
    let top = stack.as_mut_ptr_range().end;
    let aligned = top.wrapping_sub(top as usize % 16);
    // SAFETY: only namespace flags (checked above), so no CLONE_VM: the child
    // gets a private copy of our memory and runs `trampoline` on its copy of
    // `stack` (at least 16 KiB, 16-byte aligned top), which this call borrows
    // exclusively, so nothing of ours runs on it; we never look at it again
    // after clone returns. glibc's clone() wrapper takes no lock.
    let pid = unsafe {
        libc::clone(
            trampoline,
            aligned.cast(),
            flags | libc::SIGCHLD,
            (&raw mut data).cast(),
        )
    };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid)
}

/// write(2) all of `bytes` to `fd`.
pub(crate) fn write_all_fd(fd: RawFd, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: pointer and length of a live slice.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        bytes = bytes.get(n.unsigned_abs()..).unwrap_or_default();
    }
    Ok(())
}

/// CLOCK_MONOTONIC in nanoseconds: the clock init stamps the program's end with.
pub(crate) fn monotonic_ns() -> u64 {
    super::c_monotonic_ns()
}

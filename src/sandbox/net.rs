//! The network a run sees: by default a namespace with only `lo`, up (no route
//! out); with `--network` the host's. A slot makes its namespace once and every
//! run joins it; a one-shot run's init makes a fresh one.
//!
//! [`loopback_namespace`] runs in the supervisor; [`enter`] in init, between
//! clone and execve: child-safe calls only.

use std::os::fd::{OwnedFd, RawFd};

use super::error::SandboxError;
use super::record::Step;
use super::sys;

/// How the box reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Net {
    /// A fresh namespace (CLONE_NEWNET) whose loopback init brings up.
    Fresh,
    /// A prepared loopback-only namespace kept open by a slot.
    Join(RawFd),
    /// The host's network (`--network`).
    Host,
}

/// init's part: bring up `lo` in a fresh namespace, or join the slot's. On
/// failure: the step and the errno.
pub(crate) fn enter(net: Net) -> Result<(), (Step, i32)> {
    match net {
        Net::Fresh => sys::c_loopback_up().map_err(|e| (Step::Loopback, e)),
        Net::Join(fd) => sys::c_setns(fd, libc::CLONE_NEWNET).map_err(|e| (Step::JoinNetwork, e)),
        Net::Host => Ok(()),
    }
}

/// A new network namespace with only `lo`, up; kept alive by the returned fd.
/// Made on a short-lived thread: the namespace switch affects only that thread.
pub(crate) fn loopback_namespace() -> Result<OwnedFd, SandboxError> {
    let worker = std::thread::Builder::new()
        .name("judge-netns".into())
        .spawn(|| -> Result<OwnedFd, SandboxError> {
            sys::c_unshare(libc::CLONE_NEWNET).map_err(|e| {
                SandboxError::sys(
                    "create a network namespace",
                    std::io::Error::from_raw_os_error(e),
                )
            })?;
            sys::c_loopback_up().map_err(|e| {
                SandboxError::sys(
                    "bring up lo in the slot's namespace",
                    std::io::Error::from_raw_os_error(e),
                )
            })?;
            std::fs::File::open("/proc/thread-self/ns/net")
                .map(OwnedFd::from)
                .map_err(|e| SandboxError::io("open", "/proc/thread-self/ns/net", e))
        })
        .map_err(|e| SandboxError::sys("start the namespace thread", e))?;
    worker
        .join()
        .map_err(|_| SandboxError::sys("namespace thread", std::io::Error::other("panicked")))?
}

//! A slot's launcher: a small process that lives in the slot's cgroup and clones
//! each run's init there, so the run's processes are born in the cgroup.
//!
//! # Why a launcher
//! On cgroup v1 a process can enter a cgroup only by migration (a write to
//! `cgroup.procs`), and a migration waits for an RCU grace period: 5-18 ms on a
//! loaded host, most of a short run's wall time. A child is born in its parent's
//! cgroups, so a process that already lives in the slot's cgroups (migrated once,
//! when the slot starts it) can fork every run's init there without any
//! migration. On v2 it clones init straight into the run cgroup
//! (`clone3(CLONE_INTO_CGROUP)`) from outside. Either way the supervisor no
//! longer forks itself per run: a multi-threaded daemon's fork copies its page
//! tables and sends TLB shootdowns to its other threads; the launcher is small.
//!
//! # Why an exec'd process, not a clone of the supervisor
//! A clone of a multi-threaded supervisor may run only raw system calls on data
//! prepared before it was made (the rule that fixed the concurrency bug): it could
//! never allocate, and each run's data would have to reach it through memory
//! shared in advance, with pointers valid in both. Instead the slot execs
//! `/proc/self/exe` once, and an ELF constructor of this crate (`entry.rs`) turns
//! that process into the launcher before the program's `main` runs: a fresh,
//! single-threaded process that may allocate and fork freely. Each run's data
//! travels as bytes (`spec.rs`) through a memfd, its descriptors through a unix
//! socket (SCM_RIGHTS). The exec costs a few milliseconds once per slot; the
//! children the launcher clones keep the child-safe discipline anyway
//! (`child.rs`).
//!
//! # What a run cannot do to it
//! The launcher is outside the run's PID namespace (no signal reaches it), has
//! `oom_score_adj` -1000 and a memory of its own (a run's OOM kill never picks
//! it, nor kills it as sharer of a victim's memory), and only waits on its
//! socket while a run goes on. Its CPU time in the cgroup is measured and left
//! out of the run's, like init's (`serve.rs`).

mod entry;
mod serve;
pub(crate) mod spec;

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::error::SandboxError;
use super::sys;

/// Environment variable that makes `/proc/self/exe` a launcher (its value: the
/// control socket's descriptor number).
const ENV: &std::ffi::CStr = c"JUDGE_RUNNER_LAUNCHER";
/// The scheduler slice of the processes on a slot run's control path (the
/// launcher, init, and the thread that runs the slot while a run goes on): the
/// kernel's shortest, 0.1 ms. See `spawn::ShortSlice`.
pub(crate) const CONTROL_SLICE_NS: u64 = 100_000;
/// How long the supervisor waits for an answer before giving the launcher up.
pub(crate) const ANSWER_TIMEOUT: Duration = Duration::from_secs(20);

/// Message kinds, both ways: `[kind, a: u32, b, c, d, e: u64]`, 40 bytes.
pub(crate) mod msg {
    pub const HELLO: u32 = 1;
    pub const READY: u32 = 2;
    pub const RUN: u32 = 3;
    pub const FAILED: u32 = 5;
    pub const END: u32 = 6;
    pub const ENDED: u32 = 7;
    pub const LEN: usize = 40;

    pub type Fields = (u32, u32, u64, u64, u64, u64);

    pub fn encode(kind: u32, a: u32, b: u64, c: u64, d: u64, e: u64) -> [u8; LEN] {
        let mut m = [0u8; LEN];
        m[0..4].copy_from_slice(&kind.to_le_bytes());
        m[4..8].copy_from_slice(&a.to_le_bytes());
        for (i, v) in [b, c, d, e].into_iter().enumerate() {
            m[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        m
    }

    /// The fields, or `None` when `m` is not a message.
    pub fn decode(m: &[u8]) -> Option<Fields> {
        let u32_at = |i: usize| Some(u32::from_le_bytes(m.get(i..i + 4)?.try_into().ok()?));
        let u64_at = |i: usize| Some(u64::from_le_bytes(m.get(i..i + 8)?.try_into().ok()?));
        if m.len() != LEN {
            return None;
        }
        Some((
            u32_at(0)?,
            u32_at(4)?,
            u64_at(8)?,
            u64_at(16)?,
            u64_at(24)?,
            u64_at(32)?,
        ))
    }
}

/// Launcher-side failure steps (`FAILED`'s `a`).
pub(crate) mod step {
    pub const DECODE: u32 = 1;
    pub const ENTER_ROOT: u32 = 2;
    pub const CLONE: u32 = 3;
    pub const RETURN_HOME: u32 = 4;
    pub const JOIN_CGROUP: u32 = 5;

    pub fn name(step: u32) -> &'static str {
        match step {
            DECODE => "read the run's description",
            ENTER_ROOT => "copy the slot's prepared root",
            CLONE => "clone into new namespaces",
            RETURN_HOME => "return to its own mount namespace",
            JOIN_CGROUP => "join the slot's cgroup",
            _ => "an unknown step",
        }
    }
}

/// init is dead and reaped, and with it every process of the run.
pub(crate) struct Ended {
    pub init_cpu: Duration,
    pub launcher_cpu: Duration,
    /// v1: the CPU time the slot's cgroup counted between the launcher taking
    /// the run and answering (both read by the launcher, so its own time around
    /// them is `launcher_cpu` exactly); `None` when it was given no counter.
    pub counted: Option<Duration>,
}

/// The supervisor's handle on a slot's launcher.
#[derive(Debug)]
pub(crate) struct Launcher {
    child: Child,
    /// Our end of the control socket; closing it tells the launcher to exit.
    ctl: Option<OwnedFd>,
    spec: File,
    /// It failed to answer as it should: the slot replaces it.
    broken: bool,
    /// The launcher proper: the vfork child of `child`, which stays suspended.
    pid: u32,
}

impl Launcher {
    /// Start the launcher and wait until it answers. `counter`: the cgroup's CPU
    /// counter (`cpuacct.usage`) when the launcher lives in the cgroup (v1);
    /// `join`: the cgroup files (v1 `tasks`) it joins by writing `0` before it
    /// answers, itself, so the kernel's fast path for a thread moving itself
    /// applies (a supervisor moving it by pid waits for an RCU grace period).
    pub(crate) fn spawn(counter: Option<RawFd>, join: &[RawFd]) -> Result<Launcher, SandboxError> {
        entry::linked();
        let fail = |e| SandboxError::sys("start the slot's launcher", e);
        let (ctl, theirs) = sys::seqpacket_pair().map_err(fail)?;
        let memfd = sys::memfd(c"judge-runner-run").map_err(fail)?;
        let child = Command::new("/proc/self/exe")
            .arg0("judge-runner-launcher")
            .env_clear()
            .env(
                ENV.to_str().unwrap_or("JUDGE_RUNNER_LAUNCHER"),
                serve::CONTROL_FD.to_string(),
            )
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .spawn()
            .map_err(fail)?;
        let mut launcher = Launcher {
            child,
            ctl: Some(ctl),
            spec: File::from(memfd),
            broken: false,
            pid: 0,
        };
        let joins = u64::try_from(join.len()).unwrap_or(0);
        let hello = msg::encode(msg::HELLO, spec::VERSION, joins, 0, 0, 0);
        let mut fds = vec![launcher.spec.as_raw_fd()];
        fds.extend_from_slice(join);
        fds.extend(counter);
        sys::send_msg(launcher.ctl_fd(), &hello, &fds).map_err(fail)?;
        match launcher.answer(ANSWER_TIMEOUT)? {
            (msg::READY, v, pid, ..) if v == spec::VERSION => {
                launcher.pid = u32::try_from(pid).unwrap_or(0);
                Ok(launcher)
            }
            (msg::FAILED, step::JOIN_CGROUP, errno, ..) => {
                launcher.broken = true;
                let errno = i32::try_from(errno).unwrap_or(libc::EIO);
                Err(SandboxError::sys(
                    "move the slot's launcher into its cgroup",
                    std::io::Error::from_raw_os_error(errno),
                ))
            }
            other => Err(launcher.unexpected("start", other)),
        }
    }

    /// The launcher's pid (the process in the slot's cgroup).
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether it stopped answering as it should (then the slot starts another).
    pub(crate) fn is_broken(&self) -> bool {
        self.broken
    }

    fn ctl_fd(&self) -> RawFd {
        self.ctl.as_ref().map_or(-1, AsRawFd::as_raw_fd)
    }

    /// Hand the launcher one run (`bytes` and the descriptors they name). No
    /// answer is awaited: the run's init reports on the run's own pipe, and the
    /// launcher answers once, with `ENDED` or `FAILED` (see [`Launcher::end`]).
    /// Our copies of the descriptors may be closed as soon as this returns (the
    /// message in flight holds its own).
    pub(crate) fn start(&mut self, bytes: &[u8], fds: &[RawFd]) -> Result<(), SandboxError> {
        let fail = |e| SandboxError::sys("hand the run to the slot's launcher", e);
        sys::pwrite_all(self.spec.as_raw_fd(), bytes, 0).map_err(fail)?;
        let len = u32::try_from(bytes.len()).map_err(|e| fail(std::io::Error::other(e)))?;
        let run = msg::encode(msg::RUN, len, 0, 0, 0, 0);
        let sent = sys::send_msg(self.ctl_fd(), &run, fds);
        self.broken |= sent.is_err();
        sent.map_err(fail)
    }

    /// The launcher's socket, readable when it answers (to wait on beside
    /// the supervision ticks).
    pub(crate) fn socket(&self) -> RawFd {
        self.ctl_fd()
    }

    /// Ask the launcher to stop the run now (a limit, a cancellation): it kills
    /// init, and the kernel the rest of the PID namespace.
    pub(crate) fn stop(&mut self) -> Result<(), SandboxError> {
        self.send_end()
    }

    /// The run's answer, once its init is dead and reaped (and with it every
    /// process of the run): `ENDED`, sent by the launcher as soon as init has
    /// exited (or after [`Launcher::stop`]); or `FAILED`. Waits at most `within`
    /// before asking with `END` (kernels without pidfds), then the full timeout.
    pub(crate) fn ended(&mut self, within: Duration) -> Result<Ended, SandboxError> {
        let answer = match self.read_answer(within) {
            Ok(Some(a)) => a,
            Ok(None) => {
                self.send_end()?;
                self.answer(ANSWER_TIMEOUT)?
            }
            Err(e) => {
                self.broken = true;
                return Err(e);
            }
        };
        match answer {
            (msg::ENDED, flags, init, launcher, before, after) => Ok(Ended {
                init_cpu: Duration::from_nanos(init),
                launcher_cpu: Duration::from_nanos(launcher),
                counted: (flags & 1 != 0)
                    .then(|| Duration::from_nanos(after.saturating_sub(before))),
            }),
            (msg::FAILED, at, errno, ..) => Err(SandboxError::Child {
                step: format!("the slot's launcher could not {}", step::name(at)),
                source: std::io::Error::from_raw_os_error(i32::try_from(errno).unwrap_or(0)),
            }),
            other => Err(self.unexpected("end a run", other)),
        }
    }

    fn send_end(&mut self) -> Result<(), SandboxError> {
        let end = msg::encode(msg::END, 0, 0, 0, 0, 0);
        let sent = sys::send_msg(self.ctl_fd(), &end, &[]);
        self.broken |= sent.is_err();
        sent.map_err(|e| SandboxError::sys("ask the slot's launcher to end the run", e))
    }

    /// The next answer, waiting at most `within`.
    fn answer(&mut self, within: Duration) -> Result<msg::Fields, SandboxError> {
        let answer = self.read_answer(within).and_then(|got| {
            got.ok_or_else(|| SandboxError::LostChild {
                detail: format!(
                    "the slot's launcher did not answer within {:.1} s",
                    within.as_secs_f64()
                ),
            })
        });
        self.broken |= answer.is_err();
        answer
    }

    /// `Ok(None)`: nothing within `within`.
    fn read_answer(&mut self, within: Duration) -> Result<Option<msg::Fields>, SandboxError> {
        let timeout = i32::try_from(within.as_millis()).unwrap_or(i32::MAX);
        let ready = sys::poll_readable(self.ctl_fd(), timeout)
            .map_err(|e| SandboxError::sys("wait for the slot's launcher", e))?;
        if !ready {
            return Ok(None);
        }
        let mut buf = [0u8; msg::LEN];
        let (n, _) = sys::recv_msg(self.ctl_fd(), &mut buf, 0)
            .map_err(|e| SandboxError::sys("read the slot's launcher's answer", e))?;
        match msg::decode(buf.get(..n).unwrap_or_default()) {
            Some(m) => Ok(Some(m)),
            None => Err(SandboxError::LostChild {
                detail: if n == 0 {
                    "the slot's launcher is gone".into()
                } else {
                    format!("the slot's launcher sent {n} bytes that are no message")
                },
            }),
        }
    }

    fn unexpected(&mut self, what: &str, got: msg::Fields) -> SandboxError {
        self.broken = true;
        SandboxError::LostChild {
            detail: format!(
                "the slot's launcher answered {:?} when asked to {what}",
                got.0
            ),
        }
    }

    /// Stop the launcher: close its socket (it exits on EOF, killing a run still
    /// going) and reap it; kill it if it does not go within a second.
    pub(crate) fn shutdown(mut self) -> Result<(), SandboxError> {
        drop(self.ctl.take());
        for _ in 0..1000 {
            match self.child.try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => return Err(SandboxError::sys("reap the slot's launcher", e)),
            }
        }
        let _ = self.child.kill();
        self.child
            .wait()
            .map(|_| ())
            .map_err(|e| SandboxError::sys("reap the slot's launcher", e))
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

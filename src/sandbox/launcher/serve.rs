//! The launcher's side (a freshly exec'd, single-threaded process; see `mod.rs`).
//!
//! For each run: read its description, take a private copy of the slot's
//! prepared root (joining it, then `unshare(CLONE_NEWNS)`), clone init into new
//! namespaces from inside that copy — straight into the run cgroup on v2 — and
//! return to its own mount namespace. No answer yet: init reports on the run's
//! own pipe. When init ends on its own (it exits right after reporting the
//! program's status) or at `END` (the supervisor stops the run: init is killed,
//! the kernel then kills the rest of the PID namespace, and init exits only once
//! all of it is gone), it reads init's CPU time from its scheduler clock while
//! it is a zombie, reaps it, and answers `ENDED`: init's CPU time, its own, and
//! (v1) the cgroup's CPU counter when it took the run and now, so the run's
//! figure is the counter's difference minus exactly these two. A run that cannot
//! start is answered `FAILED`; nothing else is answered. It keeps a descriptor
//! of the run's mount namespace until the answer is sent, so the copy's
//! teardown (an RCU grace period) overlaps with the supervisor's own work.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use super::msg;
use super::spec::{self, Decoded, Reader};
use super::step;
use crate::sandbox::child;
use crate::sandbox::sys;

/// The control socket: the launcher's stdin.
pub(super) const CONTROL_FD: RawFd = 0;

/// A run going on (or ended and not yet released).
struct Run {
    init: libc::pid_t,
    /// `ENDED` is sent.
    ended: bool,
    /// Readable when init has ended (none on kernels without pidfd_open, < 5.3:
    /// then only `END` ends the run).
    pidfd: Option<OwnedFd>,
    /// The run's mount namespace, kept until the run is answered.
    _root: Option<OwnedFd>,
}

/// What the launcher makes for the next run right after answering the last one,
/// off the path from a run's start to its program's execve.
#[derive(Default)]
struct Ahead {
    /// A private copy of the slot's prepared root, and which root it copies.
    root: Option<((u64, u64), OwnedFd)>,
    /// We are in a fresh IPC namespace no run has seen (init inherits it).
    ipc: bool,
    /// Our next child starts a fresh PID namespace (as its pid 1).
    pid: bool,
}

struct Server {
    spec: Option<OwnedFd>,
    /// The last run's prepared root, to copy ahead for the next one.
    template: Option<((u64, u64), OwnedFd)>,
    ahead: Ahead,
    /// v1: the slot cgroup's `cpuacct.usage`, read when a run is taken and when
    /// it is answered.
    counter: Option<OwnedFd>,
    /// Its value when the current run was taken.
    counted_from: u64,
    home: OwnedFd,
    /// Our own PID namespace (where our children go unless one is made ahead).
    home_pid: OwnedFd,
    /// The host's /proc: after joining a prepared root (whose /proc is empty)
    /// the run's mount namespace is still reachable through it.
    proc: OwnedFd,
    /// Our capability bounding set is empty (so every run's is).
    launcher_clean: bool,
    run: Option<Run>,
    /// Our CPU time when the current run was handed to us.
    mark: Duration,
    /// Our UTS namespace is the slot's ("box"): init needs no new one.
    uts_ready: bool,
}

/// Serve the supervisor until it closes the socket (or dies); the exit code.
pub(super) fn main() -> i32 {
    sys::die_with_parent();
    sys::reset_signals();
    let launcher_clean = sys::drop_bounding_set();
    // On every run's control path, and so is init (our clone); see
    // `spawn::ShortSlice`.
    let _ = sys::c_sched_slice(super::CONTROL_SLICE_NS);
    // Never the OOM killer's choice anyway (a vfork child: see entry.rs); where
    // the host lets us (CAP_SYS_RESOURCE), say so too.
    let _ = std::fs::write("/proc/self/oom_score_adj", "-1000");
    let (Ok(home), Ok(home_pid), Ok(proc)) = (
        File::open("/proc/self/ns/mnt"),
        File::open("/proc/self/ns/pid"),
        File::open("/proc"),
    ) else {
        return 1;
    };
    // One UTS namespace for all runs of the slot: its name is "box" and no run
    // can change it (that needs CAP_SYS_ADMIN), so there is nothing to renew.
    let uts = sys::unshare(libc::CLONE_NEWUTS).and_then(|()| sys::sethostname(c"box"));
    let mut server = Server {
        spec: None,
        template: None,
        ahead: Ahead::default(),
        counter: None,
        counted_from: 0,
        home: home.into(),
        home_pid: home_pid.into(),
        proc: proc.into(),
        launcher_clean,
        run: None,
        mark: Duration::ZERO,
        uts_ready: uts.is_ok(),
    };
    server.prepare_ahead();
    server.serve();
    server.release();
    0
}

impl Server {
    /// Wait for a message or for init's end, whichever comes first: the end of a
    /// run is answered as soon as it happens, while the supervisor is still
    /// reading the program's status, not after another round trip.
    fn serve(&mut self) {
        loop {
            let pidfd = self
                .run
                .as_ref()
                .filter(|r| !r.ended)
                .and_then(|r| r.pidfd.as_ref())
                .map(AsRawFd::as_raw_fd);
            let Ok((message, init_ended)) = sys::poll_either(CONTROL_FD, pidfd) else {
                return;
            };
            if init_ended && !self.finish_run() {
                return;
            }
            if message && !self.handle_message() {
                return;
            }
        }
    }

    /// One message from the supervisor; false when it is gone.
    fn handle_message(&mut self) -> bool {
        let mut buf = [0u8; msg::LEN];
        let Ok((n, fds)) = sys::recv_msg(CONTROL_FD, &mut buf, spec::MAX_FDS) else {
            return false;
        };
        let Some((kind, a, b, ..)) = msg::decode(buf.get(..n).unwrap_or_default()) else {
            return false; // EOF (the supervisor is gone) or garbage
        };
        match kind {
            msg::HELLO => {
                let mut fds = fds.into_iter();
                self.spec = fds.next();
                let joins = usize::try_from(b).unwrap_or(0);
                for file in fds.by_ref().take(joins) {
                    // We are one thread (a vfork child): moving it moves us.
                    if let Err(e) = sys::write_all_fd(file.as_raw_fd(), b"0") {
                        let failed = Self::failed(step::JOIN_CGROUP, &e);
                        return sys::send_msg(CONTROL_FD, &failed, &[]).is_ok();
                    }
                }
                self.counter = fds.next();
                let pid = u64::from(std::process::id());
                let ready = msg::encode(msg::READY, spec::VERSION, pid, 0, 0, 0);
                sys::send_msg(CONTROL_FD, &ready, &[]).is_ok()
            }
            msg::RUN => {
                self.release();
                match self.start(usize::try_from(a).unwrap_or(0), &fds) {
                    Some(failed) => sys::send_msg(CONTROL_FD, &failed, &[]).is_ok(),
                    None => true,
                }
            }
            msg::END => self.finish_run(),
            _ => false,
        }
    }

    fn failed(step: u32, e: &std::io::Error) -> [u8; msg::LEN] {
        let errno = e.raw_os_error().unwrap_or(libc::EIO);
        msg::encode(msg::FAILED, step, u64::from(errno.unsigned_abs()), 0, 0, 0)
    }

    /// Clone the run's init; `Some(FAILED message)` when that could not be done.
    fn start(&mut self, len: usize, fds: &[OwnedFd]) -> Option<[u8; msg::LEN]> {
        self.counted_from = self.count();
        self.mark = sys::thread_cpu_time();
        let mut bytes = vec![0u8; len];
        let read = match &self.spec {
            Some(memfd) => sys::pread_exact(memfd.as_raw_fd(), &mut bytes, 0),
            None => Err(std::io::ErrorKind::NotFound.into()),
        };
        let decoded = read.ok().and_then(|()| {
            let mut r = Reader::new(&bytes, fds);
            Decoded::decode(&mut r)
        });
        let Some(mut decoded) = decoded else {
            let e = std::io::Error::from_raw_os_error(libc::EINVAL);
            return Some(Self::failed(step::DECODE, &e));
        };
        let root = match self.enter_root(decoded.template) {
            Ok(root) => root,
            Err(e) => {
                self.go_home();
                return Some(Self::failed(step::ENTER_ROOT, &e));
            }
        };
        let (mut flags, cgroup) = (decoded.clone_flags, decoded.cgroup);
        for (made, flag) in [
            (self.ahead.pid, libc::CLONE_NEWPID),
            (self.ahead.ipc, libc::CLONE_NEWIPC),
            (self.uts_ready, libc::CLONE_NEWUTS),
        ] {
            if made {
                flags &= !u64::from(flag.unsigned_abs());
            }
        }
        if !self.ahead.pid {
            // CLONE_NEWPID works only while our children would be in our own.
            let _ = sys::setns(self.home_pid.as_raw_fd(), libc::CLONE_NEWPID);
        }
        let spec = decoded.child_spec(self.launcher_clean);
        // SAFETY: the launcher has one thread (started by an ELF constructor
        // before any `main`, it starts none), and the child runs init alone.
        let cloned = unsafe { sys::clone_fork(flags, cgroup) };
        if let Ok(0) = cloned {
            // SAFETY: we are the clone's child, one thread, made for init.
            let code = unsafe { child::init_main(&spec) };
            sys::exit_now(i32::try_from(code).unwrap_or(1));
        }
        self.go_home();
        let init = match cloned {
            Ok(init) => init,
            Err(e) => return Some(Self::failed(step::CLONE, &e)),
        };
        self.ahead.pid = false;
        self.ahead.ipc = false;
        // init is our unreaped child: its pid cannot be reused, the pidfd is sure.
        self.run = Some(Run {
            init,
            ended: false,
            pidfd: sys::pidfd_open(init).ok(),
            _root: Some(root),
        });
        None
    }

    /// Enter a private copy of the prepared root `template`: the one made ahead
    /// if it copies that root, else a new one. Returns its descriptor; keeps
    /// `template` to copy ahead for the next run.
    fn enter_root(&mut self, template: RawFd) -> std::io::Result<OwnedFd> {
        let id = sys::ns_id(template)?;
        if self.template.as_ref().is_none_or(|(t, _)| *t != id) {
            self.template = Some((id, sys::dup_cloexec_at_least(template, 3)?));
        }
        match self.ahead.root.take() {
            Some((made_for, copy)) if made_for == id => {
                sys::setns(copy.as_raw_fd(), libc::CLONE_NEWNS)?;
                Ok(copy)
            }
            _ => self.copy_root(template),
        }
    }

    /// Join `template`, take a private copy of it (we stay in the copy) and
    /// return the copy's descriptor (through the host's /proc: the copy's own
    /// /proc is empty).
    fn copy_root(&self, template: RawFd) -> std::io::Result<OwnedFd> {
        sys::setns(template, libc::CLONE_NEWNS)?;
        sys::unshare(libc::CLONE_NEWNS)?;
        sys::open_at(self.proc.as_raw_fd(), c"thread-self/ns/mnt")
    }

    /// Make the next run's namespaces now (a fresh IPC namespace to be in, a
    /// fresh PID namespace for our next child, a copy of the prepared root), so
    /// that its start only joins them. What fails here is simply made at the
    /// start instead.
    fn prepare_ahead(&mut self) {
        if !self.ahead.ipc {
            self.ahead.ipc = sys::unshare(libc::CLONE_NEWIPC).is_ok();
        }
        if !self.ahead.pid {
            // Only from our own PID namespace can a new one be made.
            self.ahead.pid = sys::setns(self.home_pid.as_raw_fd(), libc::CLONE_NEWPID)
                .and_then(|()| sys::unshare(libc::CLONE_NEWPID))
                .is_ok();
        }
        if self.ahead.root.is_none()
            && let Some((id, template)) = &self.template
        {
            let (id, template) = (*id, template.as_raw_fd());
            let copy = self.copy_root(template);
            self.go_home();
            self.ahead.root = copy.ok().map(|c| (id, c));
        }
    }

    /// Back to our own mount namespace; a launcher that cannot is of no further
    /// use (the next run would start from the wrong tree), so it exits and the
    /// slot starts another.
    fn go_home(&mut self) {
        if let Err(e) = sys::setns(self.home.as_raw_fd(), libc::CLONE_NEWNS) {
            let _ = sys::send_msg(CONTROL_FD, &Self::failed(step::RETURN_HOME, &e), &[]);
            self.release();
            sys::exit_now(1);
        }
    }

    /// End the run (if it has not ended yet) and answer `ENDED`, once per run;
    /// false when the supervisor is gone. Then drop the run's mount namespace:
    /// its teardown (an RCU grace period) overlaps with the supervisor's work,
    /// after the counter was read.
    fn finish_run(&mut self) -> bool {
        let Some(run) = self.run.as_mut().filter(|r| !r.ended) else {
            return true; // nothing going on, or answered already
        };
        run.ended = true;
        run.pidfd = None;
        let init_cpu = finish(run.init);
        let ours = sys::thread_cpu_time().saturating_sub(self.mark);
        let counted_to = self.count();
        let flags = u32::from(self.counter.is_some());
        let ended = msg::encode(
            msg::ENDED,
            flags,
            nanos(init_cpu),
            nanos(ours),
            self.counted_from,
            counted_to,
        );
        let sent = sys::send_msg(CONTROL_FD, &ended, &[]).is_ok();
        self.run = None;
        self.prepare_ahead();
        sent
    }

    /// The cgroup's CPU counter (ns), 0 without one.
    fn count(&self) -> u64 {
        let mut buf = [0u8; 32];
        self.counter
            .as_ref()
            .and_then(|f| sys::pread_some(f.as_raw_fd(), &mut buf).ok())
            .and_then(|n| std::str::from_utf8(buf.get(..n)?).ok()?.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Forget the run: end it if it is still going, drop its mount namespace.
    fn release(&mut self) {
        if let Some(run) = self.run.take()
            && !run.ended
        {
            finish(run.init);
        }
    }
}

/// Kill init, wait until it (and so its whole PID namespace) is gone, read its
/// CPU time while it is a zombie, reap it.
fn finish(init: libc::pid_t) -> Duration {
    let _ = sys::kill(init, libc::SIGKILL);
    let _ = sys::wait_exited_nowait(init);
    let cpu = sys::process_cpu_time(init).unwrap_or_default();
    let _ = sys::wait_pid(init);
    cpu
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

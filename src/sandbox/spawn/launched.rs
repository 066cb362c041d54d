//! A slot's run: its launcher clones init in (or, v2, into) the slot's cgroup.
//!
//! The supervisor hands the run over and then waits on the launcher's socket,
//! not on the run's report pipe: the launcher answers `ENDED` once init has
//! exited, which it does right after writing the program's status, so one
//! wakeup brings both (one handoff fewer than waking for the status and then
//! asking for the end). Ticks between (CPU time, wall clock, cancellation)
//! are as in a one-shot run; stopping the run is a message to the launcher.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use super::{
    Start, Watched, child_spec, finish_report, own_memory_limit, read_records, tick, tick_timeout,
    wall,
};
use crate::sandbox::cgroup::{Baseline, SlotCgroup};
use crate::sandbox::child::StartPath;
use crate::sandbox::error::SandboxError;
use crate::sandbox::launcher::{ANSWER_TIMEOUT, Ended, Launcher, spec};
use crate::sandbox::net::Net;
use crate::sandbox::plan::Plan;
use crate::sandbox::prepare::Prepared;
use crate::sandbox::record::Record;
use crate::sandbox::report::Report;
use crate::sandbox::sys;

/// What a slot's own processes are assumed to spend in the cgroup on its first
/// run, before any run measured it (about 1 ms here, a few under emulation):
/// a first run is stopped at most this much late, and early only when its
/// set-up cost more than this.
const FIRST_RUN_ALLOWANCE: Duration = Duration::from_millis(10);

/// How the launcher is to start a run.
pub(super) struct Via {
    pub template: RawFd,
    pub netns: Option<RawFd>,
    /// The launcher lives in the cgroup (v1) and so counts in it.
    pub inside: bool,
}

pub(super) fn run(
    plan: &Plan,
    prepared: &mut Prepared,
    cgroup: &mut SlotCgroup,
    base: &Baseline,
    launcher: &mut Launcher,
    via: &Via,
    ours: &mut Duration,
) -> Result<Report, SandboxError> {
    let (report_r, report_w) =
        sys::pipe().map_err(|e| SandboxError::sys("create the report pipe", e))?;
    let w = encode(plan, prepared, cgroup, base, via, report_w.as_raw_fd())?;
    let start = Start::now();
    launcher.start(&w.bytes, &w.fds)?;
    // The message in flight holds its own copies of every descriptor.
    drop(report_w);
    prepared.parts.close_stdio();
    // A slot's first run has no measured overhead yet; the allowance keeps the
    // ticks from counting init's set-up as the program's and killing it short of
    // its limit (the final figure leaves that set-up out exactly).
    let estimate = if ours.is_zero() {
        FIRST_RUN_ALLOWANCE
    } else {
        *ours
    };
    let (watched, ended) = watch(plan, launcher, cgroup, base, start, estimate)?;
    // init's end takes the whole PID namespace; the cgroup holding anything else
    // of the run afterwards would be a bug, so it is checked (and cleared).
    let cleared = cgroup.kill_all_but(via.inside.then(|| launcher.pid()));
    let ended = ended?;
    cleared?;
    let mut watched = watched;
    drain(&report_r, &mut watched)?;
    watched.wall = wall(&watched, start).min(watched.wall);
    let spent = ended.init_cpu
        + if via.inside {
            ended.launcher_cpu
        } else {
            Duration::ZERO
        };
    *ours = spent;
    let measured = cgroup.measure(base, watched.memory_base)?;
    let cpu = ended.counted.unwrap_or(measured.cpu).saturating_sub(spent);
    finish_report(plan, prepared, watched, &measured, cpu)
}

/// The run as bytes and descriptors for the launcher.
fn encode(
    plan: &Plan,
    prepared: &Prepared,
    cgroup: &SlotCgroup,
    base: &Baseline,
    via: &Via,
    report_fd: RawFd,
) -> Result<spec::Writer, SandboxError> {
    let net = via.netns.map_or(Net::Host, Net::Join);
    // Whether the launcher's children start clean is the launcher's to say.
    let path = StartPath::Launched { clean: false };
    let mut child = child_spec(plan, prepared, path, net, report_fd);
    child.memory = cgroup.memory_fds();
    child.memory_bytes = own_memory_limit(plan, base);
    // The launcher's own 0-2 are not the caller's: "inherit" sends ours along.
    for (i, s) in child.stdio.iter_mut().enumerate() {
        s.get_or_insert(RawFd::try_from(i).unwrap_or(0));
    }
    let flags = libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    let w = spec::encode(&spec::Encode {
        clone_flags: u64::try_from(flags).unwrap_or(0),
        template: via.template,
        cgroup: cgroup.dir_fd(),
        netns: via.netns,
        child: &child,
        argv: &prepared.parts.argv,
        envp: &prepared.parts.envp,
    });
    if w.fds.len() > spec::MAX_FDS {
        return Err(SandboxError::invalid(format!(
            "a run may pass at most {} descriptors (binds, stdio) to its slot; this one needs {}",
            spec::MAX_FDS,
            w.fds.len()
        )));
    }
    Ok(w)
}

/// Wait for the launcher's answer, ticking; stop the run when a tick says so.
/// `ours`: the estimate of the CPU time the slot's own processes spend in the
/// cgroup, left out of the ticks' figure.
fn watch(
    plan: &Plan,
    launcher: &mut Launcher,
    cgroup: &mut SlotCgroup,
    base: &Baseline,
    start: Start,
    ours: Duration,
) -> Result<(Watched, Result<Ended, SandboxError>), SandboxError> {
    let mut w = Watched::default();
    let mut stopped: Option<Instant> = None;
    loop {
        if sys::poll_readable(launcher.socket(), tick_timeout(plan, start))
            .map_err(|e| SandboxError::sys("wait for the slot's launcher", e))?
        {
            w.wall = start.at.elapsed();
            return Ok((w, launcher.ended(ANSWER_TIMEOUT)));
        }
        match stopped {
            None => {
                if tick(plan, cgroup, base, start, ours, &mut w)? {
                    w.wall = start.at.elapsed();
                    launcher.stop()?;
                    stopped = Some(Instant::now());
                }
            }
            Some(at) if at.elapsed() > ANSWER_TIMEOUT => {
                return Ok((w, launcher.ended(Duration::ZERO)));
            }
            Some(_) => {}
        }
    }
}

/// Every record init wrote (it is gone: the pipe ends).
fn drain(report: &OwnedFd, w: &mut Watched) -> Result<(), SandboxError> {
    let mut buf = Vec::with_capacity(Record::LEN * 2);
    while !read_records(report.as_raw_fd(), &mut buf, w)? {}
    Ok(())
}

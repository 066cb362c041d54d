//! Supervisor side of one run: start init (itself, or through the slot's
//! launcher), watch the run (report pipe, cgroup CPU, wall clock, cancellation)
//! every ≤ 10 ms, kill everything at the end, measure, classify.
//!
//! # Two ways to start a run
//! - **Direct** (`sandbox::run`, one run per slot): the supervisor clones init
//!   into new namespaces itself, and the program joins the cgroup (v1: a
//!   migration; v2: init forks it straight into the cgroup). The clone of a
//!   possibly multi-threaded supervisor runs only child-safe code (`child.rs`):
//!   every string, descriptor, mount operation and BPF program is built here
//!   first (`prepare.rs`); no allocation, no glibc `fork()`, no set*id broadcast.
//! - **Launched** (a `Slot`): the slot's launcher (`launcher/`), a process that
//!   lives in the slot's cgroup, clones init there, so nothing migrates per run.
//!   init and the launcher then spend some CPU time in the run's cgroup; both
//!   measure it and it is left out of the run's figure.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::cgroup::{Baseline, CgroupLimits, SlotCgroup};
use super::child::{
    self, ChildSpec, Net, REC_EXITED, REC_FAILED, REC_STARTED, RECORD_LEN, Root, Step,
};
use super::error::SandboxError;
use super::launcher::{Launcher, spec};
use super::plan::Plan;
use super::prepare::{self, Prepared};
use super::report::{Ending, Observed, Report, classify};
use super::sys;

/// How often the supervisor looks at CPU time, wall time and cancellation.
pub(crate) const TICK: Duration = Duration::from_millis(5);
const CHILD_STACK: usize = 256 * 1024;

/// How init is started.
pub(crate) enum Launch<'a> {
    /// The supervisor clones it (one-shot runs).
    Direct { net: Net, root: Root },
    /// The slot's launcher clones it from a private copy of `template`.
    Launched {
        launcher: &'a mut Launcher,
        template: RawFd,
        /// The slot's network namespace; `None`: the host's.
        netns: Option<RawFd>,
        /// The launcher lives in the cgroup (v1) and so counts in it.
        inside: bool,
    },
}

/// What watching the run found.
#[derive(Default)]
struct Watched {
    ending: Option<Ending>,
    failure: Option<(u32, u32, u32)>,
    /// CPU time of init and (launched runs) the launcher up to the program's
    /// start (`REC_STARTED`).
    init_setup: Duration,
    launcher_setup: Duration,
    /// The report pipe reached EOF (init is gone).
    eof: bool,
    cpu_over: bool,
    wall_over: bool,
    cancelled: bool,
    wall: Duration,
}

/// Run `plan` in `cgroup` (the slot's, kept between runs).
pub(crate) fn run_in(
    plan: &Plan,
    cgroup: &mut SlotCgroup,
    launch: Launch<'_>,
) -> Result<Report, SandboxError> {
    let launched = matches!(launch, Launch::Launched { .. });
    let mut prepared = Prepared::new(plan, launched)?;
    let ours = match &launch {
        Launch::Direct { .. } => 0,
        Launch::Launched { inside: true, .. } => 2,
        Launch::Launched { inside: false, .. } => 1,
    };
    let limits = CgroupLimits {
        memory: plan.limits.memory_bytes,
        pids: plan.limits.processes,
    };
    let result = cgroup.begin(&limits, ours).and_then(|base| match launch {
        Launch::Direct { net, root } => direct(plan, &mut prepared, cgroup, &base, net, root),
        Launch::Launched {
            launcher,
            template,
            netns,
            inside,
        } => {
            let how = Via {
                template,
                netns,
                inside,
            };
            launched_run(plan, &mut prepared, cgroup, &base, launcher, &how)
        }
    });
    let finished = prepared.box_dir.finish();
    match (result, finished) {
        (Ok(report), Ok(())) => Ok(report),
        (Err(e), Ok(())) => Err(e),
        (Ok(_), Err(cleanup)) => Err(cleanup),
        (Err(run), Err(cleanup)) => Err(SandboxError::WithCleanup {
            run: Box::new(run),
            cleanup: Box::new(cleanup),
        }),
    }
}

fn child_spec<'a>(
    plan: &Plan,
    prepared: &'a Prepared,
    root: Root,
    net: Net,
    report_fd: RawFd,
) -> ChildSpec<'a> {
    let parts = &prepared.parts;
    ChildSpec {
        root,
        mounts: &parts.mounts,
        net,
        procs_fds: Vec::new(),
        cgroup_dir: None,
        stdio: [0, 1, 2].map(|i| parts.stdio[i].as_ref().map(AsRawFd::as_raw_fd)),
        rlimits: parts.rlimits.clone(),
        uid: plan.box_uid(),
        last_cap: prepare::last_cap(),
        filters: &parts.filters,
        exec_paths: parts.exec_paths.clone(),
        argv: spec::null_terminated(&parts.argv),
        envp: spec::null_terminated(&parts.envp),
        report_fd,
        cgroupns_in_init: false,
        program_stack_top: 0,
        bounding_set_empty: false,
        launcher_setup: Duration::ZERO,
    }
}

/// Stack the program starts on (vfork-like, until its execve).
pub(crate) const PROGRAM_STACK: usize = 128 * 1024;

/// The address just past `stack`, where a downward-growing stack starts.
pub(crate) fn stack_top(stack: &mut [u8]) -> usize {
    stack.as_mut_ptr_range().end as usize
}

fn direct(
    plan: &Plan,
    prepared: &mut Prepared,
    cgroup: &mut SlotCgroup,
    base: &Baseline,
    net: Net,
    root: Root,
) -> Result<Report, SandboxError> {
    let (report_r, report_w) =
        sys::pipe().map_err(|e| SandboxError::sys("create the report pipe", e))?;
    let mut spec = child_spec(plan, prepared, root, net, report_w.as_raw_fd());
    spec.procs_fds = cgroup.procs_fds().iter().map(AsRawFd::as_raw_fd).collect();
    spec.cgroup_dir = cgroup.dir_fd();
    let mut flags = libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    if matches!(root, Root::Fresh) {
        flags |= libc::CLONE_NEWNS;
    }
    if matches!(net, Net::Fresh) {
        flags |= libc::CLONE_NEWNET;
    }
    let mut program_stack = vec![0u8; PROGRAM_STACK];
    spec.program_stack_top = stack_top(&mut program_stack);
    let mut stack = vec![0u8; CHILD_STACK];
    let start = Instant::now();
    let mut init = || child::init_main(&spec);
    let pid = sys::clone_child(&mut init, &mut stack, flags)
        .map_err(|e| SandboxError::sys("clone into new namespaces", e))?;
    drop((stack, program_stack));
    drop(report_w);
    prepared.parts.close_stdio();
    let watched = watch(plan, &report_r, cgroup, base, start, None);
    let _ = sys::kill(pid, libc::SIGKILL);
    let reaped = sys::wait_pid(pid)
        .map(drop)
        .map_err(|e| SandboxError::sys("reap the sandbox's init", e))
        .and_then(|()| cgroup.kill_all_but(None));
    let watched = watched?;
    reaped?;
    finish_report(plan, prepared, cgroup, base, watched, Duration::ZERO)
}

/// How the launcher is to start a run.
struct Via {
    template: RawFd,
    netns: Option<RawFd>,
    inside: bool,
}

fn launched_run(
    plan: &Plan,
    prepared: &mut Prepared,
    cgroup: &mut SlotCgroup,
    base: &Baseline,
    launcher: &mut Launcher,
    via: &Via,
) -> Result<Report, SandboxError> {
    let (report_r, report_w) =
        sys::pipe().map_err(|e| SandboxError::sys("create the report pipe", e))?;
    let net = via.netns.map_or(Net::Host, Net::Join);
    let mut child = child_spec(plan, prepared, Root::Entered, net, report_w.as_raw_fd());
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
    let start = Instant::now();
    launcher.start(&w.bytes, &w.fds)?;
    drop(report_w);
    prepared.parts.close_stdio();
    let watched = watch(plan, &report_r, cgroup, base, start, Some(via.inside));
    let ended_itself = watched
        .as_ref()
        .is_ok_and(|w| w.ending.is_some() || w.failure.is_some() || w.eof);
    // init's end takes the whole PID namespace; the cgroup holding anything else
    // of the run afterwards would be a bug, so it is checked (and cleared).
    let ended = launcher.end(!ended_itself);
    let cleared = cgroup.kill_all_but(via.inside.then(|| launcher.pid()));
    let watched = watched?;
    let ended = ended?;
    cleared?;
    let ours = ended.init_cpu
        + if via.inside {
            ended.launcher_cpu
        } else {
            Duration::ZERO
        };
    let report = finish_report(plan, prepared, cgroup, base, watched, ours);
    launcher.release();
    report
}

fn watch(
    plan: &Plan,
    report: &OwnedFd,
    cgroup: &mut SlotCgroup,
    base: &Baseline,
    start: Instant,
    launched: Option<bool>,
) -> Result<Watched, SandboxError> {
    let wall_limit = plan.limits.effective_wall_time();
    let mut w = Watched::default();
    let mut buf = Vec::with_capacity(RECORD_LEN * 2);
    loop {
        let left = wall_limit.saturating_sub(start.elapsed());
        let timeout = i32::try_from(left.min(TICK).as_millis())
            .unwrap_or(5)
            .max(1);
        if sys::poll_readable(report.as_raw_fd(), timeout)
            .map_err(|e| SandboxError::sys("poll the report pipe", e))?
            && read_records(report.as_raw_fd(), &mut buf, &mut w)?
        {
            w.wall = start.elapsed();
            return Ok(w);
        }
        if let Some(limit) = plan.limits.cpu_time {
            let raw = cgroup
                .cpu_since(base)
                .map_err(|e| SandboxError::sys("read the run's cpu time", e))?;
            let ours = launched.map_or(Duration::ZERO, |inside| {
                w.init_setup
                    + if inside {
                        w.launcher_setup
                    } else {
                        Duration::ZERO
                    }
            });
            if raw.saturating_sub(ours) > limit {
                w.cpu_over = true;
            }
        }
        cgroup.sample();
        if start.elapsed() >= wall_limit {
            w.wall_over = true;
        }
        if plan.cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
            w.cancelled = true;
        }
        if w.cpu_over || w.wall_over || w.cancelled {
            w.wall = start.elapsed();
            return Ok(w);
        }
    }
}

/// Read what is available; true when the run is over (a final record or EOF).
fn read_records(fd: RawFd, buf: &mut Vec<u8>, w: &mut Watched) -> Result<bool, SandboxError> {
    let mut chunk = [0u8; 64];
    let n =
        sys::read_some(fd, &mut chunk).map_err(|e| SandboxError::sys("read the report pipe", e))?;
    if n == 0 {
        w.eof = true;
        return Ok(true);
    }
    buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
    while buf.len() >= RECORD_LEN {
        let rec: Vec<u32> = buf
            .drain(..RECORD_LEN)
            .collect::<Vec<u8>>()
            .chunks_exact(4)
            .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        match rec.as_slice() {
            [REC_STARTED, low, high, launcher_us] => {
                w.init_setup = Duration::from_nanos(u64::from(*low) | (u64::from(*high) << 32));
                w.launcher_setup = Duration::from_micros(u64::from(*launcher_us));
            }
            [REC_EXITED, _, status, _] => {
                let status = status.cast_signed();
                w.ending = Some(if libc::WIFSIGNALED(status) {
                    Ending::Signaled(libc::WTERMSIG(status))
                } else {
                    Ending::Exited(libc::WEXITSTATUS(status))
                });
                return Ok(true);
            }
            [REC_FAILED, step, errno, aux] => {
                w.failure = Some((*step, *errno, *aux));
                return Ok(true);
            }
            _ => {}
        }
    }
    Ok(false)
}

/// `ours`: CPU time the slot's own processes (init, launcher) spent in the cgroup.
fn finish_report(
    plan: &Plan,
    prepared: &Prepared,
    cgroup: &mut SlotCgroup,
    base: &Baseline,
    w: Watched,
    ours: Duration,
) -> Result<Report, SandboxError> {
    if w.cancelled {
        return Err(SandboxError::Cancelled);
    }
    if let Some((step, errno, aux)) = w.failure {
        return Err(child_error(plan, prepared, step, errno, aux));
    }
    let measured = cgroup.measure(base)?;
    let cpu = measured.cpu.saturating_sub(ours);
    // No status from init: killed at a limit by us, or by the OOM killer (as the
    // sharer of a program killed between its start and its execve).
    let killed = w.cpu_over || w.wall_over || measured.oom_kills > 0;
    let ending = match (w.ending, killed) {
        (Some(e), _) => e,
        (None, true) => Ending::Signaled(libc::SIGKILL),
        (None, false) => {
            return Err(SandboxError::LostChild {
                detail: "init ended without a status record".into(),
            });
        }
    };
    let limits = &plan.limits;
    let observed = Observed {
        ending,
        oom_killed: measured.oom_kills > 0,
        peak_reached_limit: measured.limit_reached,
        cpu_over: w.cpu_over || limits.cpu_time.is_some_and(|l| cpu > l),
        wall_over: w.wall_over,
        // A file that reached the limit exactly is no hit when the program then
        // exited 0 (writing exactly the limit is allowed); otherwise it is the
        // trace of a write refused with EFBIG by a program that ignored SIGXFSZ.
        output_hit: ending != Ending::Exited(0)
            && output_hit(&prepared.parts.output_files, limits.output_bytes),
    };
    let status = classify(&observed);
    let (exit_code, signal) = match ending {
        Ending::Exited(c) => (Some(c), None),
        Ending::Signaled(s) => (None, Some(s)),
    };
    Ok(Report {
        status,
        exit_code,
        signal,
        cpu_seconds: cpu.as_secs_f64(),
        wall_seconds: w.wall.as_secs_f64(),
        memory_bytes: measured.peak_memory,
        message: String::new(),
    })
}

fn output_hit(files: &[PathBuf], limit: u64) -> bool {
    files
        .iter()
        .any(|f| std::fs::metadata(f).is_ok_and(|m| m.len() >= limit))
}

fn child_error(plan: &Plan, prepared: &Prepared, step: u32, errno: u32, aux: u32) -> SandboxError {
    let source = std::io::Error::from_raw_os_error(errno.cast_signed());
    match Step::from_u32(step) {
        Some(Step::Exec) => SandboxError::Exec {
            program: plan.program.clone(),
            tried: child::describe_exec(&prepared.parts.exec_paths),
            source,
        },
        Some(Step::Mount) => SandboxError::Child {
            step: format!(
                "build the root: {}",
                prepared.parts.mounts.step_name(aux as usize)
            ),
            source,
        },
        Some(s) => SandboxError::Child {
            step: s.name().to_string(),
            source,
        },
        None => SandboxError::Child {
            step: format!("unknown step {step}"),
            source,
        },
    }
}

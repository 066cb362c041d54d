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
//! - **Launched** (a `SandboxSlot`): the slot's launcher (`launcher/`), a process that
//!   lives in the slot's cgroup, clones init there, so nothing migrates per run.
//!   init and the launcher then spend some CPU time in the run's cgroup; both
//!   measure it and it is left out of the run's figure.

use std::cell::Cell;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::cgroup::{Baseline, CgroupLimits, Measured, SlotCgroup};
use super::child::{self, CgroupEntry, ChildSpec, StartPath};
use super::creds;
use super::error::SandboxError;
use super::launcher::{CONTROL_SLICE_NS, Launcher};
use super::net::Net;
use super::plan::Plan;
use super::prepare::Prepared;
use super::record::{Record, Step};
use super::report::{Ending, Observed, Report, classify};
use super::sys;

mod launched;

/// How often the supervisor looks at CPU time, wall time and cancellation.
pub(crate) const TICK: Duration = Duration::from_millis(5);
const CHILD_STACK: usize = 256 * 1024;

/// The calling thread has the control path's short scheduler slice while this
/// lives, and the host's default again when it drops.
///
/// A slot run is a chain of hand-offs (this thread, the launcher, init, the
/// program, init, the launcher, this thread), each a wake-up that does a few
/// microseconds of work. On a host whose cores are busy (every slot judging), a
/// woken task with the default slice (0.7-3 ms) waits for the running task's
/// slice to end: six waits per run. EEVDF (Linux 6.12+) lets a task with a
/// shorter slice preempt at wake-up instead; its share of the CPU (its weight,
/// its nice value) is unchanged, it is only served sooner and in smaller
/// pieces. Smaller pieces are a loss for long bursts of work under contention,
/// so the thread has the slice only during a run (not while its caller
/// compares outputs, say), and a one-shot run, whose supervisor does
/// milliseconds of set-up, does not ask for it. The program gets the host's
/// default back before its execve (`child::program_main`): it is scheduled as
/// it would be outside. A thread's own custom slice, if it had one, is not
/// restored.
pub(crate) struct ShortSlice(());

impl ShortSlice {
    pub(crate) fn ask() -> ShortSlice {
        let _ = sys::c_sched_slice(CONTROL_SLICE_NS);
        ShortSlice(())
    }
}

impl Drop for ShortSlice {
    fn drop(&mut self) {
        let _ = sys::c_sched_slice(0);
    }
}

/// How init is started.
pub(crate) enum Launch<'a> {
    /// The supervisor clones it (one-shot runs).
    Direct { net: Net },
    /// The slot's launcher clones it from a private copy of `template`.
    Launched {
        launcher: &'a mut Launcher,
        template: RawFd,
        /// The slot's network namespace; `None`: the host's.
        netns: Option<RawFd>,
        /// The launcher lives in the cgroup (v1) and so counts in it.
        inside: bool,
        /// CPU time init and the launcher spent in the cgroup in the slot's last
        /// run: the estimate the supervision ticks leave out (updated here).
        ours: &'a mut Duration,
    },
}

/// What watching the run found.
#[derive(Default)]
struct Watched {
    ending: Option<Ending>,
    failure: Option<(u32, u32, u32)>,
    /// When the program ended (CLOCK_MONOTONIC ns, `Record::Time`).
    ended_at: Option<u64>,
    /// Memory charged when the program started (`Record::Base`).
    memory_base: Option<u64>,
    /// The program's largest resident set (wait4's `ru_maxrss`, `Record::Exited`).
    max_rss: u64,
    cpu_over: bool,
    wall_over: bool,
    cancelled: bool,
    wall: Duration,
}

/// When the run started, on both clocks.
#[derive(Clone, Copy)]
struct Start {
    at: Instant,
    monotonic_ns: u64,
}

impl Start {
    fn now() -> Start {
        Start {
            at: Instant::now(),
            monotonic_ns: sys::monotonic_ns(),
        }
    }
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
        Launch::Direct { net } => direct(plan, &mut prepared, cgroup, &base, net),
        Launch::Launched {
            launcher,
            template,
            netns,
            inside,
            ours,
        } => {
            let how = launched::Via {
                template,
                netns,
                inside,
            };
            launched::run(plan, &mut prepared, cgroup, &base, launcher, &how, ours)
        }
    });
    let finished = prepared.box_dir.finish();
    SandboxError::with_cleanup(result, finished)
}

fn child_spec<'a>(
    plan: &Plan,
    prepared: &'a Prepared,
    start: StartPath,
    net: Net,
    report_fd: RawFd,
) -> ChildSpec<'a> {
    let parts = &prepared.parts;
    ChildSpec {
        start,
        mounts: &parts.mounts,
        net,
        stdio: [0, 1, 2].map(|i| parts.stdio[i].as_ref().map(AsRawFd::as_raw_fd)),
        rlimits: parts.rlimits.clone(),
        uid: plan.box_uid(),
        last_cap: creds::last_cap(),
        filters: &parts.filters,
        exec_paths: parts.exec_paths.clone(),
        argv: sys::CStrArray::new(&parts.argv),
        envp: sys::CStrArray::new(&parts.envp),
        report_fd,
        program_stack: Cell::new(None),
        memory: None,
        memory_bytes: plan.limits.memory_bytes,
    }
}

/// The limit the program sets over what is charged when it starts: its own,
/// less the earlier runs' clean page cache in that charge, which the kernel
/// reclaims for it (`Baseline::reclaimable`).
pub(super) fn own_memory_limit(plan: &Plan, base: &Baseline) -> u64 {
    plan.limits.memory_bytes.saturating_sub(base.reclaimable)
}

fn direct(
    plan: &Plan,
    prepared: &mut Prepared,
    cgroup: &mut SlotCgroup,
    base: &Baseline,
    net: Net,
) -> Result<Report, SandboxError> {
    let (report_r, report_w) =
        sys::pipe().map_err(|e| SandboxError::sys("create the report pipe", e))?;
    let mut program_stack = vec![0u8; child::PROGRAM_STACK];
    let path = StartPath::OneShot {
        cgroup: CgroupEntry {
            into: cgroup.dir_fd(),
            join: cgroup.join_fds().iter().map(AsRawFd::as_raw_fd).collect(),
        },
    };
    let mut spec = child_spec(plan, prepared, path, net, report_w.as_raw_fd());
    spec.memory = cgroup.memory_fds();
    spec.memory_bytes = own_memory_limit(plan, base);
    let mut flags =
        libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    if matches!(net, Net::Fresh) {
        flags |= libc::CLONE_NEWNET;
    }
    spec.program_stack = Cell::new(sys::VforkStack::new(&mut program_stack));
    let mut stack = vec![0u8; CHILD_STACK];
    let start = Start::now();
    // SAFETY: this closure runs only as the clone's child below, one thread,
    // made for it.
    let mut init = || unsafe { child::init_main(&spec) };
    // SAFETY: init makes only async-signal-safe calls (child.rs: the `c_*`
    // wrappers on what `spec` holds, built here beforehand).
    let pid = unsafe { sys::clone_child(&mut init, &mut stack, flags) }
        .map_err(|e| SandboxError::sys("clone into new namespaces", e))?;
    drop(stack);
    drop(report_w);
    prepared.parts.close_stdio();
    let watched = watch_pipe(plan, &report_r, cgroup, base, start);
    let _ = sys::kill(pid, libc::SIGKILL);
    let reaped = sys::wait_pid(pid)
        .map(drop)
        .map_err(|e| SandboxError::sys("reap the sandbox's init", e))
        .and_then(|()| cgroup.kill_all_but(None));
    let watched = watched?;
    reaped?;
    let measured = cgroup.measure(base, watched.memory_base)?;
    finish_report(plan, prepared, watched, &measured, measured.cpu)
}

/// Watch a run whose init reports on `report`: until its final record or EOF,
/// or until a limit or cancellation stops it.
fn watch_pipe(
    plan: &Plan,
    report: &OwnedFd,
    cgroup: &mut SlotCgroup,
    base: &Baseline,
    start: Start,
) -> Result<Watched, SandboxError> {
    let mut w = Watched::default();
    let mut buf = Vec::with_capacity(Record::LEN * 2);
    loop {
        if sys::poll_readable(report.as_raw_fd(), tick_timeout(plan, start))
            .map_err(|e| SandboxError::sys("poll the report pipe", e))?
            && read_records(report.as_raw_fd(), &mut buf, &mut w)?
        {
            w.wall = wall(&w, start);
            return Ok(w);
        }
        if tick(plan, cgroup, base, start, Duration::ZERO, &mut w)? {
            w.wall = start.at.elapsed();
            return Ok(w);
        }
    }
}

/// How long to wait before the next supervision tick (≤ TICK, not past the wall
/// limit).
fn tick_timeout(plan: &Plan, start: Start) -> i32 {
    let left = plan
        .limits
        .effective_wall_time()
        .saturating_sub(start.at.elapsed());
    i32::try_from(left.min(TICK).as_millis())
        .unwrap_or(5)
        .max(1)
}

/// One supervision tick: CPU time (less `ours`, what the slot's own processes
/// spent in the cgroup), the wall clock, cancellation. True: stop the run.
fn tick(
    plan: &Plan,
    cgroup: &mut SlotCgroup,
    base: &Baseline,
    start: Start,
    ours: Duration,
    w: &mut Watched,
) -> Result<bool, SandboxError> {
    if let Some(limit) = plan.limits.cpu_time {
        let raw = cgroup
            .cpu_since(base)
            .map_err(|e| SandboxError::sys("read the run's cpu time", e))?;
        w.cpu_over |= raw.saturating_sub(ours) > limit;
    }
    cgroup.sample();
    w.wall_over |= start.at.elapsed() >= plan.limits.effective_wall_time();
    w.cancelled |= plan.cancel.as_ref().is_some_and(|c| c.is_cancelled());
    Ok(w.cpu_over || w.wall_over || w.cancelled)
}

/// The run's wall time: up to the program's end as init stamped it, else now.
fn wall(w: &Watched, start: Start) -> Duration {
    match w.ended_at {
        Some(ns) if ns >= start.monotonic_ns => Duration::from_nanos(ns - start.monotonic_ns),
        _ => start.at.elapsed(),
    }
}

/// Read what is available; true when the run is over (a final record or EOF).
fn read_records(fd: RawFd, buf: &mut Vec<u8>, w: &mut Watched) -> Result<bool, SandboxError> {
    let mut chunk = [0u8; 64];
    let n =
        sys::read_some(fd, &mut chunk).map_err(|e| SandboxError::sys("read the report pipe", e))?;
    if n == 0 {
        return Ok(true);
    }
    buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
    while buf.len() >= Record::LEN {
        let mut bytes = [0u8; Record::LEN];
        for (dst, src) in bytes.iter_mut().zip(buf.drain(..Record::LEN)) {
            *dst = src;
        }
        match Record::decode(&bytes) {
            Some(Record::Time { ns }) => w.ended_at = Some(ns),
            Some(Record::Base { bytes }) => w.memory_base = Some(bytes),
            Some(Record::Exited {
                status,
                max_rss_kib,
            }) => {
                w.max_rss = u64::from(max_rss_kib).saturating_mul(1024);
                w.ending = Some(if libc::WIFSIGNALED(status) {
                    Ending::Signaled(libc::WTERMSIG(status))
                } else {
                    Ending::Exited(libc::WEXITSTATUS(status))
                });
                return Ok(true);
            }
            Some(Record::Failed { step, errno, aux }) => {
                w.failure = Some((step, errno, aux));
                return Ok(true);
            }
            None => {}
        }
    }
    Ok(false)
}

/// `cpu`: the run's CPU time (the cgroup's, less what the slot's own processes
/// spent in it).
fn finish_report(
    plan: &Plan,
    prepared: &Prepared,
    w: Watched,
    measured: &Measured,
    cpu: Duration,
) -> Result<Report, SandboxError> {
    if w.cancelled {
        return Err(SandboxError::Cancelled);
    }
    if let Some((step, errno, aux)) = w.failure {
        return Err(child_error(plan, prepared, step, errno, aux));
    }
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
        memory_bytes: memory_bytes(measured.peak_memory, w.max_rss),
        message: String::new(),
    })
}

/// The run's `memory_bytes`: the cgroup's peak over the program's start; below
/// [`RSS_BELOW`] the program's own largest resident set when that is larger.
/// The cgroup sees memory in the kernel's per-CPU charge batches (256 KiB) and
/// not the pages the program shares with the page cache (its binary, libc), so
/// a tiny program reads 0 there; its resident set counts those pages (and, for
/// a program of a few pages, what its parent's memory held before the execve,
/// about 1 MiB here). Above the threshold the cgroup's figure is kept: within a
/// batch of what the program allocated, where its resident set would add its
/// mapped files.
fn memory_bytes(cgroup_peak: u64, max_rss: u64) -> u64 {
    if cgroup_peak >= RSS_BELOW {
        cgroup_peak
    } else {
        cgroup_peak.max(max_rss)
    }
}

/// Below this cgroup peak a run reports its program's max RSS when larger.
const RSS_BELOW: u64 = 1 << 20;

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

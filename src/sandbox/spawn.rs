//! Supervisor side of one run: clone into new namespaces, watch the run (report
//! pipe, cgroup CPU, wall clock, cancellation) every ≤ 10 ms, kill everything at
//! the end, measure, classify.
//!
//! # Why clone and not a re-exec of a helper binary
//! The library is called in-process by the daemon (a multi-threaded tokio
//! process), by cargo's test binaries and by the CLI. Re-executing
//! `/proc/self/exe` only works when the current executable *is* judge-runner, and
//! an exec of a large binary plus its runtime start costs about as much as the
//! whole per-run budget (≤ 2× a plain fork+exec). So the child is a `clone` of the
//! caller and does only async-signal-safe work before `execve`: every string,
//! descriptor, mount operation and BPF program is built here first
//! (`prepare.rs`), and the child (`child.rs`) makes raw system calls only — no
//! allocation (a malloc lock held by another thread at clone time would deadlock
//! it), no glibc `fork()` (whose atfork handling takes those locks), no
//! glibc set*id broadcast (it signals threads that do not exist in the copy).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::cgroup::RunCgroup;
use super::child::{self, ChildSpec, Net, REC_EXITED, REC_FAILED, RECORD_LEN, Root, Step};
use super::error::SandboxError;
use super::plan::Plan;
use super::prepare::{self, Prepared};
use super::report::{Ending, Observed, Report, classify};
use super::sys;

/// How often the supervisor looks at CPU time, wall time and cancellation.
pub(crate) const TICK: Duration = Duration::from_millis(5);
const CHILD_STACK: usize = 256 * 1024;

/// What watching the run found.
struct Watched {
    ending: Option<Ending>,
    failure: Option<(u32, u32, u32)>,
    cpu_over: bool,
    wall_over: bool,
    cancelled: bool,
    wall: Duration,
}

/// Run `plan` in `cgroup` (already created with the plan's limits).
pub(crate) fn run_in(
    plan: &Plan,
    cgroup: &mut RunCgroup,
    net: Net,
    root: Root,
) -> Result<Report, SandboxError> {
    let mut prepared = Prepared::new(plan, matches!(root, Root::Prepared(_)))?;
    let result = clone_and_watch(plan, &mut prepared, cgroup, net, root);
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

fn clone_and_watch(
    plan: &Plan,
    prepared: &mut Prepared,
    cgroup: &mut RunCgroup,
    net: Net,
    root: Root,
) -> Result<Report, SandboxError> {
    let (report_r, report_w) =
        sys::pipe().map_err(|e| SandboxError::sys("create the report pipe", e))?;
    let parts = &prepared.parts;
    let argv = null_terminated(&parts.argv);
    let envp = null_terminated(&parts.envp);
    let spec = ChildSpec {
        root,
        mounts: &parts.mounts,
        net,
        procs_fds: cgroup.procs_fds().iter().map(AsRawFd::as_raw_fd).collect(),
        cgroup_dir: cgroup.dir_fd(),
        stdio: [0, 1, 2].map(|i| parts.stdio[i].as_ref().map(AsRawFd::as_raw_fd)),
        rlimits: parts.rlimits.clone(),
        uid: plan.box_uid(),
        last_cap: prepare::last_cap(),
        filters: &parts.filters,
        exec_paths: parts.exec_paths.clone(),
        argv,
        envp,
        report_fd: report_w.as_raw_fd(),
    };
    let mut flags = libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    if matches!(root, Root::Fresh) {
        flags |= libc::CLONE_NEWNS;
    }
    if matches!(net, Net::Fresh) {
        flags |= libc::CLONE_NEWNET;
    }
    let mut stack = vec![0u8; CHILD_STACK];
    let start = Instant::now();
    let mut init = || child::init_main(&spec);
    let pid = sys::clone_child(&mut init, &mut stack, flags)
        .map_err(|e| SandboxError::sys("clone into new namespaces", e))?;
    drop(stack);
    drop(report_w);
    prepared.parts.close_stdio();
    let watched = watch(plan, &report_r, cgroup, start);
    let reaped = end_run(pid, cgroup);
    let watched = watched?;
    reaped?;
    finish_report(plan, prepared, cgroup, watched)
}

fn null_terminated(strings: &[std::ffi::CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// Kill init (and with it the whole PID namespace), reap it, then make sure the
/// cgroup is empty.
fn end_run(pid: libc::pid_t, cgroup: &RunCgroup) -> Result<(), SandboxError> {
    let _ = sys::kill(pid, libc::SIGKILL);
    sys::wait_pid(pid).map_err(|e| SandboxError::sys("reap the sandbox's init", e))?;
    cgroup.kill_all()
}

fn watch(
    plan: &Plan,
    report: &OwnedFd,
    cgroup: &mut RunCgroup,
    start: Instant,
) -> Result<Watched, SandboxError> {
    let wall_limit = plan.limits.effective_wall_time();
    let mut w = Watched {
        ending: None,
        failure: None,
        cpu_over: false,
        wall_over: false,
        cancelled: false,
        wall: Duration::ZERO,
    };
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
            let cpu = cgroup
                .cpu_time()
                .map_err(|e| SandboxError::sys("read the run's cpu time", e))?;
            if cpu > limit {
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

fn finish_report(
    plan: &Plan,
    prepared: &Prepared,
    cgroup: &mut RunCgroup,
    w: Watched,
) -> Result<Report, SandboxError> {
    if w.cancelled {
        return Err(SandboxError::Cancelled);
    }
    if let Some((step, errno, aux)) = w.failure {
        return Err(child_error(plan, prepared, step, errno, aux));
    }
    let usage = cgroup.usage()?;
    let ending = match (w.ending, w.cpu_over || w.wall_over) {
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
        oom_killed: usage.oom_kills > 0,
        peak_reached_limit: usage.peak_memory >= limits.memory_bytes,
        cpu_over: w.cpu_over || limits.cpu_time.is_some_and(|l| usage.cpu > l),
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
        cpu_seconds: usage.cpu.as_secs_f64(),
        wall_seconds: w.wall.as_secs_f64(),
        memory_bytes: usage.peak_memory,
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

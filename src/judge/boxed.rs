//! The judge's one door to the sandbox: a run described in the judge's terms,
//! turned into a `sandbox::Plan`, and its report turned back. Also the judge's
//! private work directory.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sandbox::{self, SandboxError};

use super::error::JudgeError;
use super::{CancelHandle, JudgeConfig};

/// Where a sandboxed program's standard stream goes.
#[derive(Debug)]
pub(crate) enum Stream {
    Null,
    /// A host file: read for stdin, created/truncated for stdout/stderr.
    Path(PathBuf),
    /// A pipe end (interactive problems).
    Fd(OwnedFd),
}

/// A read-only (unless `writable`) bind mount.
#[derive(Debug, Clone)]
pub(crate) struct Bind {
    pub host: PathBuf,
    pub inside: PathBuf,
    pub writable: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct BoxLimits {
    /// CPU seconds.
    pub time: f64,
    /// Wall seconds.
    pub wall: f64,
    pub memory_bytes: u64,
    pub processes: u32,
    pub output_bytes: u64,
}

/// One sandboxed run, in the judge's terms.
#[derive(Debug)]
pub(crate) struct BoxRun<'a> {
    pub argv: Vec<String>,
    /// Mounted read-write at `/box`, the working directory.
    pub box_dir: &'a Path,
    /// Which of the slot's two boxes.
    pub validator_box: bool,
    pub binds: Vec<Bind>,
    pub stdin: Stream,
    pub stdout: Stream,
    pub stderr: Stream,
    pub limits: BoxLimits,
    pub env: Vec<(String, String)>,
}

/// How a sandboxed run ended (contract §1 statuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BoxStatus {
    Ok,
    NonzeroExit,
    Signaled,
    TimeLimit,
    WallTimeLimit,
    MemoryLimit,
    OutputLimit,
}

impl BoxStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            BoxStatus::Ok => "ok",
            BoxStatus::NonzeroExit => "nonzero_exit",
            BoxStatus::Signaled => "signaled",
            BoxStatus::TimeLimit => "time_limit",
            BoxStatus::WallTimeLimit => "wall_time_limit",
            BoxStatus::MemoryLimit => "memory_limit",
            BoxStatus::OutputLimit => "output_limit",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BoxReport {
    pub status: BoxStatus,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub cpu_seconds: f64,
    pub wall_seconds: f64,
    pub memory_bytes: u64,
}

/// Open files a run may hold; JVMs and compilers open more than the contract's
/// default of 64.
const OPEN_FILES: u32 = 256;

/// The sandbox slot a judging runs in: two boxes (the submission's, and a
/// validator's that may run beside it), CPU, cgroup parent, cancel handle. Each
/// box is a `sandbox::SandboxSlot`, set up once and reused for every run of the
/// judging (it keeps its network namespace between runs).
#[derive(Debug)]
pub(crate) struct JudgeSlot {
    box_id: u32,
    validator_box_id: u32,
    cpu: Option<u32>,
    cgroup_parent: String,
    cancel: sandbox::Cancel,
    submission_box: Mutex<Option<sandbox::SandboxSlot>>,
    validator_box: Mutex<Option<sandbox::SandboxSlot>>,
}

fn sandbox_error(what: &str, e: SandboxError) -> JudgeError {
    match e {
        SandboxError::Cancelled => JudgeError::Cancelled,
        source => JudgeError::Sandbox {
            what: what.to_string(),
            source,
        },
    }
}

/// The judge's view of a sandbox report; a `sandbox_error` status is an error.
fn box_report(what: &str, report: sandbox::Report) -> Result<BoxReport, JudgeError> {
    let status = match report.status {
        sandbox::Status::Ok => BoxStatus::Ok,
        sandbox::Status::NonzeroExit => BoxStatus::NonzeroExit,
        sandbox::Status::Signaled => BoxStatus::Signaled,
        sandbox::Status::TimeLimit => BoxStatus::TimeLimit,
        sandbox::Status::WallTimeLimit => BoxStatus::WallTimeLimit,
        sandbox::Status::MemoryLimit => BoxStatus::MemoryLimit,
        sandbox::Status::OutputLimit => BoxStatus::OutputLimit,
        sandbox::Status::SandboxError => {
            return Err(JudgeError::RunFailed {
                what: what.to_string(),
                message: report.message,
            });
        }
    };
    Ok(BoxReport {
        status,
        exit_code: report.exit_code,
        signal: report.signal,
        cpu_seconds: report.cpu_seconds,
        wall_seconds: report.wall_seconds,
        memory_bytes: report.memory_bytes,
    })
}

fn stdio(stream: Stream) -> sandbox::Stdio {
    match stream {
        Stream::Null => sandbox::Stdio::Null,
        Stream::Path(p) => sandbox::Stdio::File(p),
        Stream::Fd(fd) => sandbox::Stdio::fd(fd),
    }
}

fn seconds(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.max(0.001)).unwrap_or(Duration::from_secs(3600))
}

impl JudgeSlot {
    pub fn new(config: &JudgeConfig, cancel: &CancelHandle) -> Self {
        JudgeSlot {
            box_id: config.box_id,
            validator_box_id: config.validator_box_id,
            cpu: config.cpu,
            cgroup_parent: config.cgroup_parent.clone(),
            cancel: cancel.sandbox_cancel(),
            submission_box: Mutex::new(None),
            validator_box: Mutex::new(None),
        }
    }

    pub fn cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Runs one program in the sandbox. `Err` when the sandbox failed, or the
    /// run was cancelled; anything the program did is in the report.
    pub fn run(&self, what: &str, run: BoxRun<'_>) -> Result<BoxReport, JudgeError> {
        self.run_timed(what, run).map(|(report, _)| report)
    }

    /// `run`, also answering when the run ended (read as soon as the sandbox
    /// returns, before the caller closes anything).
    pub fn run_timed(
        &self,
        what: &str,
        run: BoxRun<'_>,
    ) -> Result<(BoxReport, Instant), JudgeError> {
        if self.cancelled() {
            return Err(JudgeError::Cancelled);
        }
        let (cell, box_id) = if run.validator_box {
            (&self.validator_box, self.validator_box_id)
        } else {
            (&self.submission_box, self.box_id)
        };
        let plan = self.plan(run);
        let mut guard = cell.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            let slot = sandbox::SandboxSlot::new(box_id, &self.cgroup_parent, self.cpu)
                .map_err(|e| sandbox_error(what, e))?;
            *guard = Some(slot);
        }
        let Some(slot) = guard.as_mut() else {
            return Err(JudgeError::RunFailed {
                what: what.to_string(),
                message: "no sandbox slot".to_string(),
            });
        };
        let result = slot.run(&plan);
        let ended = Instant::now();
        let report = result.map_err(|e| sandbox_error(what, e))?;
        Ok((box_report(what, report)?, ended))
    }

    fn plan(&self, run: BoxRun<'_>) -> sandbox::Plan {
        let BoxRun {
            argv,
            box_dir,
            validator_box: _,
            binds,
            stdin,
            stdout,
            stderr,
            limits,
            env,
        } = run;
        let mut argv = argv.into_iter();
        let program = argv.next().unwrap_or_default();
        let mut plan = sandbox::Plan::new(program)
            .args(argv)
            .limits(sandbox::Limits {
                cpu_time: Some(seconds(limits.time)),
                wall_time: Some(seconds(limits.wall)),
                memory_bytes: limits.memory_bytes,
                processes: limits.processes,
                output_bytes: limits.output_bytes,
                open_files: OPEN_FILES,
                ..sandbox::Limits::default()
            })
            .box_dir(box_dir)
            .stdin(stdio(stdin))
            .stdout(stdio(stdout))
            .stderr(stdio(stderr))
            .cancel(self.cancel.clone());
        for bind in binds {
            plan = plan.bind(bind.host, bind.inside, bind.writable);
        }
        for (name, value) in env {
            plan = plan.env(name, value);
        }
        plan
    }
}

impl Drop for JudgeSlot {
    fn drop(&mut self) {
        for cell in [&self.submission_box, &self.validator_box] {
            let slot = cell.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(Err(e)) = slot.map(sandbox::SandboxSlot::close) {
                tracing::warn!(error = %e, "closing a sandbox slot failed");
            }
        }
    }
}

/// The judge's private directory for one judging: removed when dropped.
#[derive(Debug)]
pub(crate) struct WorkDir {
    dir: tempfile::TempDir,
}

impl WorkDir {
    pub fn new(root: Option<&Path>) -> Result<Self, JudgeError> {
        let builder = {
            let mut b = tempfile::Builder::new();
            b.prefix("judge-");
            b
        };
        let dir = match root {
            Some(root) => {
                std::fs::create_dir_all(root).map_err(|e| JudgeError::io(root, e))?;
                builder.tempdir_in(root)
            }
            None => builder.tempdir(),
        }
        .map_err(|e| JudgeError::io(root.unwrap_or(Path::new("/tmp")), e))?;
        Ok(WorkDir { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A fresh, empty subdirectory (a new one each time: nothing a run left, not
    /// even the directory's own attributes, reaches the next).
    pub fn fresh(&self, name: &str) -> Result<PathBuf, JudgeError> {
        let path = self.dir.path().join(name);
        // Most runs leave their box empty: one rmdir, not a walk of it.
        match std::fs::remove_dir(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => std::fs::remove_dir_all(&path).map_err(|e| JudgeError::io(&path, e))?,
        }
        std::fs::create_dir(&path).map_err(|e| JudgeError::io(&path, e))?;
        Ok(path)
    }
}

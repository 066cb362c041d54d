//! The judge's one door to the sandbox: a run described in the judge's terms,
//! turned into a `sandbox::Plan`, and its report turned back. Also the judge's
//! private work directory.

// TEMPORARY until the sandbox module lands on main: the stub below reads no field.
#![allow(dead_code)]

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

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

/// The sandbox slot a judging runs in: box ids, CPU, cgroup parent, cancel flag.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    pub box_id: u32,
    pub validator_box_id: u32,
    pub cpu: Option<u32>,
    pub cgroup_parent: String,
    pub cancel: Arc<AtomicBool>,
}

impl Slot {
    pub fn new(config: &JudgeConfig, cancel: &CancelHandle) -> Self {
        Slot {
            box_id: config.box_id,
            validator_box_id: config.validator_box_id,
            cpu: config.cpu,
            cgroup_parent: config.cgroup_parent.clone(),
            cancel: cancel.flag(),
        }
    }

    pub fn cancelled(&self) -> bool {
        self.cancel.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Runs one program in the sandbox. `Err` when the sandbox failed, or the
    /// run was cancelled; anything the program did is in the report.
    pub fn run(&self, what: &str, run: BoxRun<'_>) -> Result<BoxReport, JudgeError> {
        self.run_timed(what, run).map(|(report, _)| report)
    }

    /// `run`, also answering when the run ended: taken before the run's pipe
    /// ends are closed, so a peer that saw them close ended later.
    pub fn run_timed(
        &self,
        what: &str,
        run: BoxRun<'_>,
    ) -> Result<(BoxReport, Instant), JudgeError> {
        let _ = run;
        Err(JudgeError::Sandbox {
            what: what.to_string(),
            message: "sandbox module not merged yet".to_string(),
        })
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

    /// A fresh, empty subdirectory.
    pub fn fresh(&self, name: &str) -> Result<PathBuf, JudgeError> {
        let path = self.dir.path().join(name);
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(|e| JudgeError::io(&path, e))?;
        }
        std::fs::create_dir(&path).map_err(|e| JudgeError::io(&path, e))?;
        Ok(path)
    }
}

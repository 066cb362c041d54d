//! `SandboxError`: the sandbox failed, never the program. Every variant names the
//! step that failed so an operator knows where to look.

use std::path::PathBuf;

/// The sandbox itself failed; what the program did is always an `Ok(Report)`.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the sandbox needs root (effective uid is {euid}); run judge-runner as root")]
    NotRoot { euid: u32 },
    #[error("invalid plan: {reason}")]
    InvalidPlan { reason: String },
    #[error("{step} {}: {source}", path.display())]
    Io {
        step: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{step}: {source}")]
    Sys {
        step: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("cgroup {step} {}: {source}", path.display())]
    Cgroup {
        step: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cgroup setup: {reason}")]
    CgroupSetup { reason: String },
    #[error("seccomp policy {origin}: {reason}")]
    Seccomp { origin: String, reason: String },
    #[error("sandbox setup failed inside the box at step `{step}`: {source}")]
    Child {
        step: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot execute {program:?} inside the sandbox (tried {tried}): {source}")]
    Exec {
        program: String,
        tried: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the sandbox's init process ended without reporting the program's status ({detail})")]
    LostChild { detail: String },
    #[error("could not kill every process of the run: {remaining} still in its cgroup")]
    KillFailed { remaining: usize },
    #[error("{0} stdio descriptor was already taken by an earlier run of this plan")]
    StdioTaken(&'static str),
    #[error("the run was cancelled")]
    Cancelled,
    #[error("host check: {reason}")]
    HostCheck { reason: String },
    #[error("{run}; cleanup also failed: {cleanup}")]
    WithCleanup {
        run: Box<SandboxError>,
        cleanup: Box<SandboxError>,
    },
}

impl SandboxError {
    /// What a step followed by its cleanup answers: the step's value when both
    /// went well, else the error (both, when both failed: the step's first).
    pub(crate) fn with_cleanup<T>(
        run: Result<T, SandboxError>,
        cleanup: Result<(), SandboxError>,
    ) -> Result<T, SandboxError> {
        match (run, cleanup) {
            (Ok(value), Ok(())) => Ok(value),
            (Err(e), Ok(())) | (Ok(_), Err(e)) => Err(e),
            (Err(run), Err(cleanup)) => Err(SandboxError::WithCleanup {
                run: Box::new(run),
                cleanup: Box::new(cleanup),
            }),
        }
    }

    pub(crate) fn io(step: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SandboxError::Io {
            step,
            path: path.into(),
            source,
        }
    }
    pub(crate) fn sys(step: &'static str, source: std::io::Error) -> Self {
        SandboxError::Sys { step, source }
    }
    pub(crate) fn invalid(reason: impl Into<String>) -> Self {
        SandboxError::InvalidPlan {
            reason: reason.into(),
        }
    }
}

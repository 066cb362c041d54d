//! The report of one run (exactly the contract's JSON fields) and `classify()`,
//! the pure "first that applies wins" rule that turns measurements into a status.

use serde::{Deserialize, Serialize};

/// What happened to the program, exactly the contract's strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The sandbox failed, not the program; `message` says why.
    SandboxError,
    /// The kernel OOM-killed a process of the run, or the peak reached the limit and
    /// the run did not end ok.
    MemoryLimit,
    /// CPU time over the limit.
    TimeLimit,
    /// Wall-clock time over the limit.
    WallTimeLimit,
    /// A write hit the output limit.
    OutputLimit,
    /// Killed by `signal`.
    Signaled,
    /// Exited with a non-zero code.
    NonzeroExit,
    /// Exited with 0 within every limit.
    Ok,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::SandboxError => "sandbox_error",
            Status::MemoryLimit => "memory_limit",
            Status::TimeLimit => "time_limit",
            Status::WallTimeLimit => "wall_time_limit",
            Status::OutputLimit => "output_limit",
            Status::Signaled => "signaled",
            Status::NonzeroExit => "nonzero_exit",
            Status::Ok => "ok",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The report, serialized exactly as CONTRACT.md §1 shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub status: Status,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub cpu_seconds: f64,
    pub wall_seconds: f64,
    pub memory_bytes: u64,
    pub message: String,
}

impl Report {
    /// The report of a run whose sandbox failed.
    pub fn sandbox_error(message: impl Into<String>) -> Self {
        Report {
            status: Status::SandboxError,
            exit_code: None,
            signal: None,
            cpu_seconds: 0.0,
            wall_seconds: 0.0,
            memory_bytes: 0,
            message: message.into(),
        }
    }
}

/// How the program's main process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    Exited(i32),
    Signaled(i32),
}

/// Everything `classify` looks at, measured by the supervisor.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Observed {
    pub ending: Ending,
    pub oom_killed: bool,
    pub peak_reached_limit: bool,
    pub cpu_over: bool,
    pub wall_over: bool,
    pub output_hit: bool,
}

/// First that applies wins (CONTRACT.md §1). Pure, so every order is unit-tested.
pub(crate) fn classify(o: &Observed) -> Status {
    let ended_ok = o.ending == Ending::Exited(0);
    if o.oom_killed || (o.peak_reached_limit && !ended_ok) {
        Status::MemoryLimit
    } else if o.cpu_over {
        Status::TimeLimit
    } else if o.wall_over {
        Status::WallTimeLimit
    } else if o.output_hit || o.ending == Ending::Signaled(libc::SIGXFSZ) {
        Status::OutputLimit
    } else {
        match o.ending {
            Ending::Signaled(_) => Status::Signaled,
            Ending::Exited(0) => Status::Ok,
            Ending::Exited(_) => Status::NonzeroExit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed(ending: Ending) -> Observed {
        Observed {
            ending,
            oom_killed: false,
            peak_reached_limit: false,
            cpu_over: false,
            wall_over: false,
            output_hit: false,
        }
    }

    #[test]
    fn plain_endings() {
        assert_eq!(classify(&observed(Ending::Exited(0))), Status::Ok);
        assert_eq!(classify(&observed(Ending::Exited(3))), Status::NonzeroExit);
        assert_eq!(classify(&observed(Ending::Signaled(11))), Status::Signaled);
        assert_eq!(
            classify(&observed(Ending::Signaled(libc::SIGXFSZ))),
            Status::OutputLimit
        );
    }

    #[test]
    fn precedence_first_that_applies_wins() {
        let mut o = observed(Ending::Signaled(9));
        o.output_hit = true;
        assert_eq!(classify(&o), Status::OutputLimit);
        o.wall_over = true;
        assert_eq!(classify(&o), Status::WallTimeLimit);
        o.cpu_over = true;
        assert_eq!(classify(&o), Status::TimeLimit);
        o.oom_killed = true;
        assert_eq!(classify(&o), Status::MemoryLimit);
    }

    #[test]
    fn peak_at_limit_counts_only_when_the_run_did_not_end_ok() {
        let mut o = observed(Ending::Exited(0));
        o.peak_reached_limit = true;
        assert_eq!(classify(&o), Status::Ok);
        o.ending = Ending::Exited(1);
        assert_eq!(classify(&o), Status::MemoryLimit);
    }

    #[test]
    fn report_json_has_exactly_the_contract_fields() {
        let r = Report {
            status: Status::WallTimeLimit,
            exit_code: None,
            signal: Some(9),
            cpu_seconds: 0.5,
            wall_seconds: 1.0,
            memory_bytes: 42,
            message: String::new(),
        };
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        let mut keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "cpu_seconds",
                "exit_code",
                "memory_bytes",
                "message",
                "signal",
                "status",
                "wall_seconds"
            ]
        );
        assert_eq!(v["status"], "wall_time_limit");
        for s in [
            Status::SandboxError,
            Status::MemoryLimit,
            Status::TimeLimit,
            Status::WallTimeLimit,
            Status::OutputLimit,
            Status::Signaled,
            Status::NonzeroExit,
            Status::Ok,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }
}

//! Verdicts: the contract's strings (§3) and problemtools' ordering of errors.

use std::fmt;

use serde::{Serialize, Serializer};

use super::boxed::BoxStatus;

/// The verdict of a test, a group or a whole submission. The strings are the
/// contract's; they must stay equal to `protocol::codes::verdict::*` (the judge
/// does not import `protocol`; `tests/judge_units.rs` checks they agree).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    Accepted,
    WrongAnswer,
    TimeLimitExceeded,
    RunTimeError,
    MemoryLimitExceeded,
    OutputLimitExceeded,
    CompilationError,
}

impl Verdict {
    pub const ALL: [Verdict; 7] = [
        Verdict::Accepted,
        Verdict::WrongAnswer,
        Verdict::TimeLimitExceeded,
        Verdict::RunTimeError,
        Verdict::MemoryLimitExceeded,
        Verdict::OutputLimitExceeded,
        Verdict::CompilationError,
    ];

    /// The contract's string, e.g. `Wrong Answer`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Verdict::Accepted => "Accepted",
            Verdict::WrongAnswer => "Wrong Answer",
            Verdict::TimeLimitExceeded => "Time Limit Exceeded",
            Verdict::RunTimeError => "Run-Time Error",
            Verdict::MemoryLimitExceeded => "Memory Limit Exceeded",
            Verdict::OutputLimitExceeded => "Output Limit Exceeded",
            Verdict::CompilationError => "Compilation Error",
        }
    }

    /// problemtools' short name (`AC`, `WA`, ...), used in progress lines.
    pub const fn short(self) -> &'static str {
        match self {
            Verdict::Accepted => "AC",
            Verdict::WrongAnswer => "WA",
            Verdict::TimeLimitExceeded => "TLE",
            Verdict::RunTimeError => "RTE",
            Verdict::MemoryLimitExceeded => "MLE",
            Verdict::OutputLimitExceeded => "OLE",
            Verdict::CompilationError => "CE",
        }
    }

    /// The folder name example submissions with this verdict sit in
    /// (`submissions/wrong_answer/`, ...).
    pub const fn folder(self) -> &'static str {
        match self {
            Verdict::Accepted => "accepted",
            Verdict::WrongAnswer => "wrong_answer",
            Verdict::TimeLimitExceeded => "time_limit_exceeded",
            Verdict::RunTimeError => "run_time_error",
            Verdict::MemoryLimitExceeded => "memory_limit_exceeded",
            Verdict::OutputLimitExceeded => "output_limit_exceeded",
            Verdict::CompilationError => "compile_error",
        }
    }

    /// The verdict an example-submission folder stands for, if it names one.
    pub fn from_folder(folder: &str) -> Option<Verdict> {
        match folder {
            "partially_accepted" => Some(Verdict::Accepted),
            "compilation_error" => Some(Verdict::CompilationError),
            _ => Verdict::ALL.into_iter().find(|v| v.folder() == folder),
        }
    }

    /// Rank in problemtools' `worst_error` order (`RTE MLE TLE OLE WA AC`): lower
    /// is worse. A compilation error never reaches a grader; it ranks worst.
    pub(crate) const fn severity(self) -> u8 {
        match self {
            Verdict::CompilationError => 0,
            Verdict::RunTimeError => 1,
            Verdict::MemoryLimitExceeded => 2,
            Verdict::TimeLimitExceeded => 3,
            Verdict::OutputLimitExceeded => 4,
            Verdict::WrongAnswer => 5,
            Verdict::Accepted => 6,
        }
    }

    pub const fn is_accepted(self) -> bool {
        matches!(self, Verdict::Accepted)
    }
}

/// The verdict a sandbox status of the submission's run stands for when it
/// decides alone (time, memory, output, crash); `None` for a clean exit, which
/// the output validator judges.
pub(crate) fn status_verdict(status: BoxStatus) -> Option<Verdict> {
    match status {
        BoxStatus::TimeLimit | BoxStatus::WallTimeLimit => Some(Verdict::TimeLimitExceeded),
        BoxStatus::MemoryLimit => Some(Verdict::MemoryLimitExceeded),
        BoxStatus::OutputLimit => Some(Verdict::OutputLimitExceeded),
        BoxStatus::Signaled | BoxStatus::NonzeroExit => Some(Verdict::RunTimeError),
        BoxStatus::Ok => None,
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Verdict {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_round_trip() {
        for v in Verdict::ALL {
            assert_eq!(Verdict::from_folder(v.folder()), Some(v));
        }
        assert_eq!(
            Verdict::from_folder("partially_accepted"),
            Some(Verdict::Accepted)
        );
        assert_eq!(Verdict::from_folder("misc"), None);
    }
}

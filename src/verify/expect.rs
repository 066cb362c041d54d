//! What an example submission is expected to get: its folder's verdict
//! (`submissions/<folder>/`), or DOMjudge's `@EXPECTED_RESULTS@:` tag in one of
//! its sources, which overrides the folder (contract §3a).

use crate::judge::Verdict;

/// What a submission must get for its verification to pass.
#[derive(Debug, Clone, PartialEq)]
pub enum Expected {
    /// Any of these verdicts. `full_score`: a scoring problem's submission must
    /// also score the maximum (`accepted/`, a tag of `CORRECT` alone).
    Verdicts {
        verdicts: Vec<Verdict>,
        full_score: bool,
    },
    /// `partially_accepted/` (`partial/`): any verdict with a score strictly
    /// between 0 and the maximum.
    Partial,
    /// A folder naming no verdict (`slow_accepted/`, `check_manually/`): judged
    /// and listed, never a mismatch.
    Unknown,
}

/// The name `partially_accepted` has in the `expected` list of `--report`.
pub const PARTIAL: &str = "Partially Accepted";

impl Expected {
    /// What `submissions/<folder>/` promises.
    pub fn from_folder(folder: &str) -> Expected {
        let one = |v: Verdict| Expected::Verdicts {
            verdicts: vec![v],
            full_score: v == Verdict::Accepted,
        };
        match folder {
            "accepted" => one(Verdict::Accepted),
            "wrong_answer" => one(Verdict::WrongAnswer),
            "time_limit_exceeded" => one(Verdict::TimeLimitExceeded),
            // problemtools calls both Run-Time Error.
            "run_time_error" => Expected::Verdicts {
                verdicts: vec![Verdict::RunTimeError, Verdict::MemoryLimitExceeded],
                full_score: false,
            },
            "memory_limit_exceeded" => one(Verdict::MemoryLimitExceeded),
            "output_limit_exceeded" => one(Verdict::OutputLimitExceeded),
            "compile_error" | "compilation_error" => one(Verdict::CompilationError),
            "partially_accepted" | "partial" => Expected::Partial,
            _ => Expected::Unknown,
        }
    }

    /// The `@EXPECTED_RESULTS@:` tag of the first source that has one (`None`
    /// when none has, or its names are all unknown; unknown names are returned
    /// in the second field so the caller can warn).
    pub fn from_tag<'a>(
        sources: impl IntoIterator<Item = &'a [u8]>,
    ) -> Option<(Expected, Vec<String>)> {
        let (known, unknown) = sources.into_iter().find_map(tag_names)?;
        if known.is_empty() {
            return None;
        }
        let full_score = known == [Verdict::Accepted];
        Some((
            Expected::Verdicts {
                verdicts: known,
                full_score,
            },
            unknown,
        ))
    }

    /// Whether `verdict` with `score` of `max_score` is what was expected;
    /// `None` for an unknown folder (nothing to compare with).
    pub fn matches(&self, verdict: Verdict, score: f64, max_score: f64) -> Option<bool> {
        match self {
            Expected::Verdicts {
                verdicts,
                full_score,
            } => Some(verdicts.contains(&verdict) && (!full_score || score >= max_score)),
            Expected::Partial => Some(score > 0.0 && score < max_score),
            Expected::Unknown => None,
        }
    }

    /// Whether it expects exactly Accepted (the submissions a computed time
    /// limit is taken from).
    pub fn is_accepted(&self) -> bool {
        matches!(self, Expected::Verdicts { verdicts, .. } if verdicts == &[Verdict::Accepted])
    }

    /// Whether a slow end is expected (judged first: the longest jobs start first).
    pub fn expects_time_limit(&self) -> bool {
        matches!(self, Expected::Verdicts { verdicts, .. } if verdicts.contains(&Verdict::TimeLimitExceeded))
    }

    /// The `expected` list of `--report`: the contract's verdict strings,
    /// `Partially Accepted`, nothing for an unknown folder.
    pub fn names(&self) -> Vec<&'static str> {
        match self {
            Expected::Verdicts { verdicts, .. } => verdicts.iter().map(|v| v.as_str()).collect(),
            Expected::Partial => vec![PARTIAL],
            Expected::Unknown => Vec::new(),
        }
    }

    /// Short form for tables: `AC`, `RTE/MLE`, `partial`, `?`.
    pub fn short(&self) -> String {
        match self {
            Expected::Verdicts { verdicts, .. } => verdicts
                .iter()
                .map(|v| v.short())
                .collect::<Vec<_>>()
                .join("/"),
            Expected::Partial => "partial".to_string(),
            Expected::Unknown => "?".to_string(),
        }
    }
}

/// DOMjudge's result names, as its `@EXPECTED_RESULTS@` tags write them.
fn domjudge_verdict(name: &str) -> Option<Verdict> {
    Some(match name {
        "CORRECT" => Verdict::Accepted,
        "WRONG-ANSWER" | "NO-OUTPUT" => Verdict::WrongAnswer,
        "TIMELIMIT" => Verdict::TimeLimitExceeded,
        "RUN-ERROR" => Verdict::RunTimeError,
        "COMPILER-ERROR" => Verdict::CompilationError,
        "OUTPUT-LIMIT" => Verdict::OutputLimitExceeded,
        "MEMORY-LIMIT" => Verdict::MemoryLimitExceeded,
        _ => return None,
    })
}

const TAG: &[u8] = b"@EXPECTED_RESULTS@";

/// The names after the first `@EXPECTED_RESULTS@` of `source`: the rest of its
/// line, `:` optional, names split on commas and blanks, case-insensitive
/// (DOMjudge upper-cases them), a comment's closing `*/`, `-->` or `-}` dropped.
fn tag_names(source: &[u8]) -> Option<(Vec<Verdict>, Vec<String>)> {
    let at = source.windows(TAG.len()).position(|w| w == TAG)?;
    let rest = &source[at + TAG.len()..];
    let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let line = line.trim_start().strip_prefix(':').unwrap_or(&line);
    let mut known = Vec::new();
    let mut unknown = Vec::new();
    for word in line.split(|c: char| c == ',' || c.is_whitespace()) {
        let word = word.trim().to_ascii_uppercase();
        if word.is_empty() || matches!(word.as_str(), "*/" | "-->" | "-}" | "\"\"\"" | "'''") {
            continue;
        }
        match domjudge_verdict(&word) {
            Some(v) if !known.contains(&v) => known.push(v),
            Some(_) => {}
            None => unknown.push(word),
        }
    }
    Some((known, unknown))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_time_error_folder_accepts_memory_limit_too() {
        let e = Expected::from_folder("run_time_error");
        assert_eq!(
            e.matches(Verdict::MemoryLimitExceeded, 0.0, 1.0),
            Some(true)
        );
        assert_eq!(e.matches(Verdict::RunTimeError, 0.0, 1.0), Some(true));
        assert_eq!(e.matches(Verdict::WrongAnswer, 0.0, 1.0), Some(false));
        let mle = Expected::from_folder("memory_limit_exceeded");
        assert_eq!(mle.matches(Verdict::RunTimeError, 0.0, 1.0), Some(false));
    }

    #[test]
    fn accepted_needs_the_full_score_and_partial_a_partial_one() {
        let ac = Expected::from_folder("accepted");
        assert_eq!(ac.matches(Verdict::Accepted, 100.0, 100.0), Some(true));
        assert_eq!(ac.matches(Verdict::Accepted, 50.0, 100.0), Some(false));
        let partial = Expected::from_folder("partially_accepted");
        assert_eq!(partial.matches(Verdict::Accepted, 50.0, 100.0), Some(true));
        assert_eq!(
            partial.matches(Verdict::WrongAnswer, 50.0, 100.0),
            Some(true)
        );
        assert_eq!(
            partial.matches(Verdict::Accepted, 100.0, 100.0),
            Some(false)
        );
        assert_eq!(
            partial.matches(Verdict::WrongAnswer, 0.0, 100.0),
            Some(false)
        );
        assert_eq!(Expected::from_folder("partial"), Expected::Partial);
    }

    #[test]
    fn unknown_folders_are_never_a_mismatch() {
        for folder in ["slow_accepted", "check_manually"] {
            let e = Expected::from_folder(folder);
            assert_eq!(e, Expected::Unknown);
            assert_eq!(e.matches(Verdict::WrongAnswer, 0.0, 1.0), None);
            assert!(e.names().is_empty());
        }
    }

    #[test]
    fn tags_override_with_any_of_their_names() {
        let src = b"// @EXPECTED_RESULTS@: TIMELIMIT, wrong-answer,RUN-ERROR\nint main(){}\n";
        let (e, unknown) = Expected::from_tag([&src[..]]).unwrap();
        assert!(unknown.is_empty());
        assert_eq!(
            e.names(),
            ["Time Limit Exceeded", "Wrong Answer", "Run-Time Error"]
        );
        assert_eq!(e.matches(Verdict::WrongAnswer, 0.0, 1.0), Some(true));
        assert_eq!(e.matches(Verdict::Accepted, 1.0, 1.0), Some(false));
    }

    #[test]
    fn a_tag_in_a_block_comment_with_no_colon_and_unknown_names() {
        let src = b"/* @EXPECTED_RESULTS@ CORRECT BOGUS */";
        let (e, unknown) = Expected::from_tag([&b"no tag"[..], &src[..]]).unwrap();
        assert!(e.is_accepted());
        assert_eq!(unknown, ["BOGUS"]);
        assert_eq!(
            Expected::from_tag([&b"# @EXPECTED_RESULTS@: NO-OUTPUT"[..]])
                .unwrap()
                .0
                .names(),
            ["Wrong Answer"]
        );
        assert!(Expected::from_tag([&b"@EXPECTED_RESULTS@: MAYBE"[..]]).is_none());
        assert!(Expected::from_tag([&b"int main(){}"[..]]).is_none());
    }
}

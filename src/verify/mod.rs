//! Verifying a package's own example submissions (contract §3a): every file or
//! directory under `submissions/<folder>/` judged, N at a time on slots with
//! their own box ids and CPUs, each verdict compared with what its folder (or
//! its `@EXPECTED_RESULTS@` tag) expects. `judge-runner verify` runs it locally;
//! the demo judges through a Server and a Runner but lists, compares and
//! tabulates with the same [`plan`], [`Expected`] and [`table`].
//!
//! Sits on `judge` and `package` (like `runner`, beside it): never imports
//! `runner`, `server`, `protocol` or `sandbox`. Everything a submission or a
//! validator runs goes through [`crate::judge::Judge`], so through the sandbox.

pub mod expect;
pub mod plan;
mod pool;
pub mod table;

use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use crate::judge::usable_cpus;
pub use expect::Expected;
pub use plan::Entry;

use crate::judge::{LanguageTable, Verdict};
use crate::package::Problem;

/// The time limit the accepted submissions run with while a limit is being
/// computed (problemtools gives them 300 s; a minute keeps a looping "accepted"
/// example from holding a slot for five).
pub const PROVISIONAL_TIME_LIMIT: f64 = 60.0;

/// How to verify.
#[derive(Debug, Clone)]
pub struct Config {
    pub languages: LanguageTable,
    /// Judges side by side (at least 1).
    pub slots: usize,
    /// Box id of the first slot; slot i uses `first_box + i`, its validator
    /// `first_box + i + 500`.
    pub first_box: u32,
    /// Pin each slot to its own CPU.
    pub pin_cpus: bool,
    pub cgroup_parent: String,
    /// Where the judges' work directories go (a temp dir by default).
    pub work_root: Option<PathBuf>,
    /// `--time-limit`: used when the package names none.
    pub time_limit: Option<f64>,
}

impl Config {
    pub fn new(languages: LanguageTable) -> Config {
        Config {
            languages,
            slots: default_slots(),
            first_box: 0,
            pin_cpus: true,
            cgroup_parent: "judge-runner".to_string(),
            work_root: None,
            time_limit: None,
        }
    }
}

/// CPUs − 1, at least 1.
pub fn default_slots() -> usize {
    usable_cpus().len().saturating_sub(1).max(1)
}

/// What became of one example submission.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `folder/name` (the demo prefixes its problem).
    pub label: String,
    pub folder: String,
    pub language: String,
    pub expected: Expected,
    /// `None` when skipped or when the infrastructure failed.
    pub verdict: Option<Verdict>,
    pub score: Option<f64>,
    pub max_score: Option<f64>,
    /// The slowest test's CPU time; `None` when no test ran.
    pub max_cpu_seconds: Option<f64>,
    /// Not a mismatch: the expected verdict, an unknown folder, or skipped.
    pub ok: bool,
    /// Why it was not judged (no such language here).
    pub skipped: Option<String>,
    /// The infrastructure failure that left it without a verdict.
    pub error: Option<String>,
}

impl Row {
    /// A row not judged yet: `ok` until a verdict says otherwise.
    pub fn new(entry: &Entry) -> Row {
        Row {
            label: entry.label.clone(),
            folder: entry.folder.clone(),
            language: entry.language.clone(),
            expected: entry.expected.clone(),
            verdict: None,
            score: None,
            max_score: None,
            max_cpu_seconds: None,
            ok: true,
            skipped: entry.skip.clone(),
            error: None,
        }
    }

    /// Whether its folder names nothing to compare with.
    pub fn unchecked(&self) -> bool {
        self.expected == Expected::Unknown && self.skipped.is_none()
    }

    /// The `--report` object (contract §3a's fields, exactly).
    pub fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "submission": self.label,
            "language": self.language,
            "expected": self.expected.names(),
            "verdict": self.verdict.map(Verdict::as_str),
            "score": self.score,
            "max_score": self.max_score,
            "max_cpu_seconds": self.max_cpu_seconds,
            "ok": self.ok,
            "skipped": self.skipped.is_some(),
        })
    }
}

/// Where the time limit came from.
#[derive(Debug, Clone, PartialEq)]
pub enum TimeLimitSource {
    /// `limits.time_limit` or `.timelimit`.
    Package,
    /// `--time-limit`.
    Option,
    /// The slowest accepted submission's slowest test × the multiplier, rounded up.
    Computed {
        slowest: f64,
        submission: String,
        multiplier: f64,
    },
    /// Nothing to compute it from: no accepted submission was judged Accepted.
    Default,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TimeLimit {
    pub seconds: f64,
    pub source: TimeLimitSource,
}

impl std::fmt::Display for TimeLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = self.seconds;
        match &self.source {
            TimeLimitSource::Package => write!(f, "time limit {secs} s (from the package)"),
            TimeLimitSource::Option => write!(f, "time limit {secs} s (--time-limit)"),
            TimeLimitSource::Computed {
                slowest,
                submission,
                multiplier,
            } => write!(
                f,
                "time limit {secs} s, computed: slowest accepted test {slowest:.3} s \
                 ({submission}) x {multiplier}, rounded up"
            ),
            TimeLimitSource::Default => write!(
                f,
                "time limit {secs} s (the default: no accepted submission to compute it from)"
            ),
        }
    }
}

/// problemtools' rule with the contract's rounding: `slowest × multiplier`
/// rounded up to a whole second, at least 1 s; with a 2023-07
/// `limits.time_resolution` R, rounded up to a multiple of R, at least R (as
/// problemtools computes it: `max(1, ceil(t / R)) × R`).
pub fn computed_time_limit(slowest: f64, multiplier: f64, resolution: Option<f64>) -> f64 {
    let res = resolution.filter(|r| *r > 0.0).unwrap_or(1.0);
    // A hair of slack so 0.5 s × 2 is 1 s, not 2 s from float noise.
    (slowest * multiplier / res - 1e-9).ceil().max(1.0) * res
}

/// Everything verified.
#[derive(Debug, Clone)]
pub struct Summary {
    /// In the package's order.
    pub rows: Vec<Row>,
    pub time_limit: TimeLimit,
    pub wall: Duration,
}

impl Summary {
    /// Exit 0 material: every judged submission got an expected verdict and
    /// nothing failed.
    pub fn all_ok(&self) -> bool {
        self.rows.iter().all(|r| r.ok)
    }
}

/// Judges every entry (skipped ones excepted) and compares. `time_limit` is
/// printed through `on_time_limit` as soon as it is known (after the accepted
/// submissions when it is computed); `on_row` sees each row as it finishes.
pub fn verify(
    problem: &Problem,
    entries: &[Entry],
    config: &Config,
    on_time_limit: &mut dyn FnMut(&TimeLimit),
    on_row: &mut dyn FnMut(&Row),
) -> Summary {
    let started = Instant::now();
    let slots = config.slots.max(1);
    let config = Config {
        slots,
        ..config.clone()
    };
    let judges = pool::judges(&config);
    let mut rows: Vec<Row> = entries.iter().map(Row::new).collect();
    // A configured language whose toolchain this host lacks is skipped too.
    for (row, entry) in rows.iter_mut().zip(entries) {
        if row.skipped.is_none()
            && let Some(judge) = judges.first()
            && let Err(e) = judge.toolchain(&entry.language)
        {
            row.skipped = Some(e.to_string());
        }
    }
    let to_judge = |keep: &dyn Fn(&Entry) -> bool, rows: &[Row]| -> Vec<usize> {
        let mut batch: Vec<usize> = (0..entries.len())
            .filter(|&i| rows[i].skipped.is_none() && keep(&entries[i]))
            .collect();
        // The longest jobs first, so the last to finish is a short one.
        batch.sort_by_key(|&i| !entries[i].expected.expects_time_limit());
        batch
    };
    let mut record = |rows: &mut Vec<Row>, i: usize, row: Row| {
        on_row(&row);
        rows[i] = row;
    };
    let fixed = match (problem.limits.time_limit, config.time_limit) {
        (Some(s), _) => Some(TimeLimit {
            seconds: s,
            source: TimeLimitSource::Package,
        }),
        (None, Some(s)) => Some(TimeLimit {
            seconds: s,
            source: TimeLimitSource::Option,
        }),
        (None, None) => None,
    };
    let time_limit = match fixed {
        Some(limit) => {
            on_time_limit(&limit);
            let batch = to_judge(&|_| true, &rows);
            pool::judge_all(
                &judges,
                problem,
                entries,
                batch,
                Some(limit.seconds),
                &mut |i, row| record(&mut rows, i, row),
            );
            limit
        }
        None => {
            let accepted = to_judge(&|e| e.expected.is_accepted(), &rows);
            pool::judge_all(
                &judges,
                problem,
                entries,
                accepted.clone(),
                Some(PROVISIONAL_TIME_LIMIT),
                &mut |i, row| record(&mut rows, i, row),
            );
            let limit = compute(problem, &rows, &accepted);
            on_time_limit(&limit);
            let rest = to_judge(&|e| !e.expected.is_accepted(), &rows);
            pool::judge_all(
                &judges,
                problem,
                entries,
                rest,
                Some(limit.seconds),
                &mut |i, row| record(&mut rows, i, row),
            );
            limit
        }
    };
    Summary {
        rows,
        time_limit,
        wall: started.elapsed(),
    }
}

/// The limit from the accepted submissions' runs (those judged Accepted).
fn compute(problem: &Problem, rows: &[Row], accepted: &[usize]) -> TimeLimit {
    let slowest = accepted
        .iter()
        .map(|&i| &rows[i])
        .filter(|r| r.verdict == Some(Verdict::Accepted))
        .filter_map(|r| r.max_cpu_seconds.map(|t| (t, r)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match slowest {
        Some((slowest, row)) => {
            let multiplier = problem.ac_to_time_limit();
            TimeLimit {
                seconds: computed_time_limit(slowest, multiplier, problem.limits.time_resolution),
                source: TimeLimitSource::Computed {
                    slowest,
                    submission: row.label.clone(),
                    multiplier,
                },
            }
        }
        None => TimeLimit {
            seconds: problem.time_limit(None),
            source: TimeLimitSource::Default,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn computed_limits_round_up_to_a_whole_second() {
        assert_eq!(computed_time_limit(0.012, 5.0, None), 1.0);
        assert_eq!(computed_time_limit(0.5, 2.0, None), 1.0);
        assert_eq!(computed_time_limit(0.51, 2.0, None), 2.0);
        assert_eq!(computed_time_limit(0.3, 5.0, None), 2.0);
        assert_eq!(computed_time_limit(0.0, 2.0, None), 1.0);
        // 2023-07 `limits.time_resolution`.
        assert_eq!(computed_time_limit(0.3, 2.0, Some(0.5)), 1.0);
        assert_eq!(computed_time_limit(0.1, 2.0, Some(0.5)), 0.5);
        assert_eq!(computed_time_limit(1.3, 2.0, Some(2.0)), 4.0);
        assert_eq!(computed_time_limit(0.0, 2.0, Some(0.25)), 0.25);
    }
}

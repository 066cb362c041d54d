//! The parsed problem: what the judge needs to know of a package, and nothing of
//! where it came from. Built by `parse` from `problem.yaml`, `.timelimit`,
//! `data/**/testdata.yaml` and the directory tree (`../shared/CONTRACT.md` §2).
//!
//! The shape of these types is shared with `judge`: add fields freely, but do not
//! rename or remove one without changing its users.

use std::path::PathBuf;

/// Which revision of the Kattis/ICPC format a package follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatVersion {
    /// No `problem_format_version`, or `legacy`.
    Legacy,
    /// `problem_format_version: 2023-07-draft` (and the later 2025-09 where it is a superset).
    V2023_07,
}

/// Pass-fail or scoring; whether it is interactive is a separate flag, since
/// 2023-07 allows `type: [scoring, interactive]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    PassFail,
    Scoring,
}

/// Limits as the package states them. The time limit is `None` when the package
/// names none: the caller then falls back to its `--time-limit`/claim value, then 1 s.
#[derive(Debug, Clone, PartialEq)]
pub struct ProblemLimits {
    /// `limits.time_limit`, else `.timelimit`, in seconds.
    pub time_limit: Option<f64>,
    /// `limits.memory` in MiB (default 1024).
    pub memory_mib: u64,
    /// `limits.output` in MiB (default 8, as problemtools).
    pub output_mib: u64,
    /// `limits.compilation_time` in seconds when given.
    pub compilation_time: Option<f64>,
    /// `limits.compilation_memory` in MiB when given.
    pub compilation_memory_mib: Option<u64>,
    /// `limits.validation_time` in seconds when given.
    pub validation_time: Option<f64>,
    /// `limits.validation_memory` in MiB when given.
    pub validation_memory_mib: Option<u64>,
}

/// Flags of the default output validator.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DefaultValidatorFlags {
    pub case_sensitive: bool,
    pub space_change_sensitive: bool,
    /// Set by `float_relative_tolerance E` or `float_tolerance E`.
    pub float_relative_tolerance: Option<f64>,
    /// Set by `float_absolute_tolerance E` or `float_tolerance E`.
    pub float_absolute_tolerance: Option<f64>,
}

/// How a test's output is judged.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputValidator {
    /// The built-in default validator with its flags.
    Default(DefaultValidatorFlags),
    /// A custom validator: a single source file, or a directory (several sources,
    /// headers, or `build`/`run` scripts). Legacy `output_validators/NAME/` or
    /// 2023-07 `output_validator/`.
    Custom(CustomValidator),
}

#[derive(Debug, Clone, PartialEq)]
pub struct CustomValidator {
    /// The validator's directory (or single source file) inside the package.
    pub path: PathBuf,
    /// Its name (the folder name, e.g. `validate`).
    pub name: String,
    /// Extra arguments after `input answer feedback_dir`: legacy `validator_flags`
    /// or 2023-07 `output_validator_args`, split like a shell would.
    pub args: Vec<String>,
}

/// Score aggregation of a group (`grader_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScoreAggregation {
    #[default]
    Sum,
    Min,
    Max,
    Avg,
}

/// Verdict aggregation of a group (`grader_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VerdictAggregation {
    /// The verdict of the first non-accepted item (problemtools' default in legacy
    /// testdata.yaml is `worst_error`; the parser fills in what the file says).
    FirstError,
    #[default]
    WorstError,
    AlwaysAccept,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnReject {
    /// Stop judging the group at its first rejected item (problemtools' default).
    #[default]
    Break,
    Continue,
}

/// The grading of one group: its own `testdata.yaml` on top of its parent's
/// (missing keys are inherited), on top of problemtools' defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Grading {
    pub score_aggregation: ScoreAggregation,
    pub verdict_aggregation: VerdictAggregation,
    /// Root only: the sample group's result is ignored, verdict and score.
    pub ignore_sample: bool,
    pub accept_if_any_accepted: bool,
    /// Score of an accepted test with no `score.txt` (default 1).
    pub accept_score: f64,
    /// Score of a rejected test (default 0).
    pub reject_score: f64,
    /// `range: MIN MAX` (default -inf +inf).
    pub range: (f64, f64),
    pub on_reject: OnReject,
    /// `output_validator_flags` of this group, appended to the validator's args.
    pub output_validator_flags: Vec<String>,
    /// `grading: custom` was asked for (not supported: the parser reports it).
    pub custom: bool,
}

impl Default for Grading {
    fn default() -> Self {
        Grading {
            score_aggregation: ScoreAggregation::Sum,
            verdict_aggregation: VerdictAggregation::WorstError,
            ignore_sample: false,
            accept_if_any_accepted: false,
            accept_score: 1.0,
            reject_score: 0.0,
            range: (f64::NEG_INFINITY, f64::INFINITY),
            on_reject: OnReject::Break,
            output_validator_flags: Vec::new(),
            custom: false,
        }
    }
}

/// One test case: `NAME.in` and `NAME.ans` (symlinks resolved inside the package).
#[derive(Debug, Clone, PartialEq)]
pub struct TestCase {
    /// Path under `data/` without extension, e.g. `secret/subtask1/01`.
    pub name: String,
    pub input: PathBuf,
    pub answer: PathBuf,
}

/// An item of a group, in the order problemtools judges them: the group's
/// directory listing sorted by name, test cases and subgroups interleaved.
#[derive(Debug, Clone, PartialEq)]
pub enum TestItem {
    Case(TestCase),
    Group(TestGroup),
}

/// A directory under `data/` (the root `data` itself, `sample`, `secret`, and
/// nested groups below `secret`).
#[derive(Debug, Clone, PartialEq)]
pub struct TestGroup {
    /// Path under `data/`: `""` for the root, `sample`, `secret/subtask1`.
    pub name: String,
    pub path: PathBuf,
    pub grading: Grading,
    pub items: Vec<TestItem>,
}

impl TestGroup {
    /// Every test case below this group, depth first, in judging order.
    pub fn cases(&self) -> Vec<&TestCase> {
        let mut out = Vec::new();
        self.collect_cases(&mut out);
        out
    }

    fn collect_cases<'a>(&'a self, out: &mut Vec<&'a TestCase>) {
        for item in &self.items {
            match item {
                TestItem::Case(case) => out.push(case),
                TestItem::Group(group) => group.collect_cases(out),
            }
        }
    }

    /// The direct subgroup named `name` (its last path component), if any.
    pub fn subgroup(&self, name: &str) -> Option<&TestGroup> {
        self.items.iter().find_map(|item| match item {
            TestItem::Group(g) if g.name.rsplit('/').next() == Some(name) => Some(g),
            _ => None,
        })
    }
}

/// An example submission shipped in `submissions/<verdict folder>/`: a single
/// file, or a directory holding a multi-file submission.
#[derive(Debug, Clone, PartialEq)]
pub struct ExampleSubmission {
    /// The folder it sits in: `accepted`, `wrong_answer`, `time_limit_exceeded`,
    /// `run_time_error`, `memory_limit_exceeded`, `output_limit_exceeded`,
    /// `compile_error`, `partially_accepted`, ...
    pub expected: String,
    /// File or directory name.
    pub name: String,
    /// Its source files.
    pub files: Vec<PathBuf>,
}

/// A parsed problem package.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// The package's root directory (where `problem.yaml` and `data/` are).
    pub root: PathBuf,
    /// `name` of problem.yaml (the `en` entry, or the first, of a map), else the
    /// directory name.
    pub name: String,
    pub format: FormatVersion,
    pub kind: ProblemKind,
    pub interactive: bool,
    pub limits: ProblemLimits,
    pub validator: OutputValidator,
    /// The root of the test data (`data/`), with `sample` and `secret` as items.
    pub data: TestGroup,
    pub submissions: Vec<ExampleSubmission>,
}

impl Problem {
    /// The time limit to judge with: the package's own, else `fallback` (the
    /// command's `--time-limit`, or the claim's `time_limit`), else 1 s.
    pub fn time_limit(&self, fallback: Option<f64>) -> f64 {
        self.limits.time_limit.or(fallback).unwrap_or(1.0)
    }

    /// Every test case in judging order (samples first, then secret groups).
    pub fn cases(&self) -> Vec<&TestCase> {
        self.data.cases()
    }
}

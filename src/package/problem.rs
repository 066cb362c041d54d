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
    /// How many times the slowest accepted submission's slowest test the time
    /// limit is, when the package names none (`verify` computes it): 2023-07
    /// `limits.time_multipliers.ac_to_time_limit`, legacy `limits.time_multiplier`,
    /// when given. [`Problem::ac_to_time_limit`] applies the format's default.
    pub ac_to_time_limit: Option<f64>,
    /// 2023-07 `limits.time_resolution` (seconds): a computed time limit is
    /// rounded up to a multiple of it. `None`: 1 s.
    pub time_resolution: Option<f64>,
    /// 2023-07 `limits.validation_passes`: the most passes a multi-pass test
    /// may run (default 2, at least 2). Read for multi-pass problems only.
    pub validation_passes: u32,
}

impl Default for ProblemLimits {
    /// problemtools' system defaults: 1024 MiB of memory, 8 MiB of output.
    fn default() -> Self {
        ProblemLimits {
            time_limit: None,
            memory_mib: 1024,
            output_mib: 8,
            compilation_time: None,
            compilation_memory_mib: None,
            validation_time: None,
            validation_memory_mib: None,
            ac_to_time_limit: None,
            time_resolution: None,
            validation_passes: 2,
        }
    }
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

/// A word the default validator does not understand.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidatorFlagError {
    #[error("unknown default validator flag {0:?}")]
    Unknown(String),
    #[error("default validator flag {flag:?} needs a non-negative number, got {value:?}")]
    BadNumber { flag: String, value: Option<String> },
}

impl DefaultValidatorFlags {
    /// These flags with `args` applied on top, in order (later words win), as the
    /// default validator reads its command line.
    pub fn with_args(&self, args: &[String]) -> Result<Self, ValidatorFlagError> {
        let mut flags = self.clone();
        let mut words = args.iter();
        while let Some(word) = words.next() {
            match word.as_str() {
                "case_sensitive" => flags.case_sensitive = true,
                "space_change_sensitive" => flags.space_change_sensitive = true,
                "float_relative_tolerance" | "float_absolute_tolerance" | "float_tolerance" => {
                    let value = words.next();
                    let tolerance = value
                        .and_then(|v| crate::cfloat::parse_finite(v.trim()))
                        .filter(|v| v.is_finite() && *v >= 0.0)
                        .ok_or_else(|| ValidatorFlagError::BadNumber {
                            flag: word.clone(),
                            value: value.cloned(),
                        })?;
                    if word != "float_absolute_tolerance" {
                        flags.float_relative_tolerance = Some(tolerance);
                    }
                    if word != "float_relative_tolerance" {
                        flags.float_absolute_tolerance = Some(tolerance);
                    }
                }
                other => return Err(ValidatorFlagError::Unknown(other.to_string())),
            }
        }
        Ok(flags)
    }
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
    /// Legacy `output_validators/` holding several programs (at least two), in
    /// name order: each one judges every output, and the first that rejects it
    /// decides (the legacy format: "validation fails if any validator fails").
    /// Never for interactive or multi-pass problems (the parser refuses that).
    Several(Vec<CustomValidator>),
}

impl OutputValidator {
    /// The custom validator programs in the order they run; empty for the
    /// default validator.
    pub fn custom_programs(&self) -> &[CustomValidator] {
        match self {
            OutputValidator::Default(_) => &[],
            OutputValidator::Custom(custom) => std::slice::from_ref(custom),
            OutputValidator::Several(programs) => programs,
        }
    }
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
    /// Files built beside a single-file program though not part of it: the
    /// headers lying next to it in a legacy flat `output_validators/` (so an
    /// `#include "validate.h"` compiles). Empty otherwise.
    pub companions: Vec<PathBuf>,
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
    /// Every test of this group scores 0 whatever its verdict: the samples of a
    /// 2023-07 package (contract §2). Legacy samples score like any group.
    pub zero_score: bool,
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
            zero_score: false,
        }
    }
}

/// One test case: `NAME.in` and `NAME.ans` (symlinks and symlink stubs resolved
/// inside the package).
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

    fn collect_groups<'a>(&'a self, out: &mut Vec<&'a TestGroup>) {
        for item in &self.items {
            if let TestItem::Group(group) = item {
                out.push(group);
                group.collect_groups(out);
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

/// One file of `include/<language>/` (2023-07): added to every submission of
/// that language before compiling (`include/default/`: of every language).
#[derive(Debug, Clone, PartialEq)]
pub struct IncludeFile {
    /// The language id the directory is named after (`cpp`, `python3`, ...), or
    /// `default`.
    pub language: String,
    /// Its path below `include/<language>/` (`grader.cpp`, `lib/vec.h`): where it
    /// goes in the submission's directory.
    pub path: PathBuf,
    /// The file inside the package (links resolved).
    pub source: PathBuf,
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
    /// 2023-07 `type: multi-pass`: the submission runs again on the input the
    /// validator writes to `nextpass.in`, up to `limits.validation_passes` times.
    pub multi_pass: bool,
    pub limits: ProblemLimits,
    pub validator: OutputValidator,
    /// The root of the test data (`data/`), with `sample` and `secret` as items.
    pub data: TestGroup,
    pub submissions: Vec<ExampleSubmission>,
    /// `include/<language>/` and `include/default/` files, by language then path.
    pub includes: Vec<IncludeFile>,
    /// What the parser noticed but judged harmless (unknown keys, ignored files),
    /// one line each, naming the file.
    pub warnings: Vec<String>,
}

impl Problem {
    /// The time limit to judge with: the package's own, else `fallback` (the
    /// command's `--time-limit`, or the claim's `time_limit`), else 1 s.
    pub fn time_limit(&self, fallback: Option<f64>) -> f64 {
        self.limits.time_limit.or(fallback).unwrap_or(1.0)
    }

    /// The multiplier from the slowest accepted submission's slowest test to the
    /// time limit, as problemtools computes a limit: the package's own, else 2
    /// (2023-07 `ac_to_time_limit`) or 5 (legacy `time_multiplier`).
    pub fn ac_to_time_limit(&self) -> f64 {
        self.limits.ac_to_time_limit.unwrap_or(match self.format {
            FormatVersion::Legacy => 5.0,
            FormatVersion::V2023_07 => 2.0,
        })
    }

    /// The include files a submission in `language` gets: `include/default/`'s,
    /// then `include/<language>/`'s (the parser refused packages where both
    /// name the same path).
    pub fn includes_for(&self, language: &str) -> Vec<&IncludeFile> {
        let defaults = self.includes.iter().filter(|f| f.language == "default");
        let own = self.includes.iter().filter(|f| f.language == language);
        defaults.chain(own).collect()
    }

    /// Every test case in judging order (samples first, then secret groups).
    pub fn cases(&self) -> Vec<&TestCase> {
        self.data.cases()
    }

    /// Every group, depth first in judging order, the root `data` group first.
    pub fn groups(&self) -> Vec<&TestGroup> {
        let mut out = vec![&self.data];
        self.data.collect_groups(&mut out);
        out
    }

    /// The arguments a custom validator gets after `input answer feedback_dir` for
    /// the tests of `group`: the problem's, then the group's `output_validator_flags`.
    pub fn validator_args(&self, group: &TestGroup) -> Vec<String> {
        // Every program of `Several` has the problem's arguments.
        let mut args = self
            .validator
            .custom_programs()
            .first()
            .map(|custom| custom.args.clone())
            .unwrap_or_default();
        args.extend(group.grading.output_validator_flags.iter().cloned());
        args
    }

    /// The default validator's flags for the tests of `group`: the problem's, with
    /// the group's `output_validator_flags` on top. `None` for a custom validator.
    /// The parser checked every group's flags, so this only fails for a `Problem`
    /// built by hand.
    pub fn default_validator_flags(
        &self,
        group: &TestGroup,
    ) -> Option<Result<DefaultValidatorFlags, ValidatorFlagError>> {
        match &self.validator {
            OutputValidator::Default(flags) => {
                Some(flags.with_args(&group.grading.output_validator_flags))
            }
            OutputValidator::Custom(_) | OutputValidator::Several(_) => None,
        }
    }
}

// The words an operator reads (`package check`, logs): the package format's own
// spellings, never a Rust type name.

impl FormatVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            FormatVersion::Legacy => "legacy",
            FormatVersion::V2023_07 => "2023-07",
        }
    }
}

impl ScoreAggregation {
    pub fn as_str(self) -> &'static str {
        match self {
            ScoreAggregation::Sum => "sum",
            ScoreAggregation::Min => "min",
            ScoreAggregation::Max => "max",
            ScoreAggregation::Avg => "avg",
        }
    }
}

impl VerdictAggregation {
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictAggregation::FirstError => "first_error",
            VerdictAggregation::WorstError => "worst_error",
            VerdictAggregation::AlwaysAccept => "always_accept",
        }
    }
}

impl OnReject {
    pub fn as_str(self) -> &'static str {
        match self {
            OnReject::Break => "break",
            OnReject::Continue => "continue",
        }
    }
}

macro_rules! display_as_str {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )*};
}
display_as_str!(
    FormatVersion,
    ScoreAggregation,
    VerdictAggregation,
    OnReject
);

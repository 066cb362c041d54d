//! `testdata.yaml` → `Grading`, with problemtools' semantics: a group's file is
//! laid over its parent's effective settings (every key inherits, `grader_flags` as
//! one whole string), the legacy problem-wide `grading` keys override, then the
//! defaults fill the rest (`on_reject: break`, `accept_score: 1`, `reject_score: 0`,
//! `range: -inf +inf`, sum of scores, worst error).

use std::path::Path;

use serde_yaml_ng::Mapping;

use super::config::ProblemGrading;
use super::yaml::{Doc, keys, parse_float, scalar_string};
use crate::package::error::PackageError;
use crate::package::problem::{
    Grading, OnReject, ProblemKind, ScoreAggregation, VerdictAggregation,
};

const KNOWN_KEYS: &[&str] = &[
    "on_reject",
    "grading",
    "grader_flags",
    "accept_score",
    "reject_score",
    "range",
    "input_validator_flags",
    "output_validator_flags",
    "input_validator_args",
    "output_validator_args",
    "full_feedback",
    "hint",
    "description",
    "args",
    "max_score",
    "score_aggregation",
    "require_pass",
    "static_validation_score",
    "static_validator_args",
    "input_visualizer_args",
    "output_visualizer_args",
];

/// 2025-09's group scoring keys: a different scoring model from the legacy
/// and 2023-07-draft grader's, not supported (refused in scoring problems,
/// where they would change the score; warned about in pass-fail ones).
const SCORING_2025_KEYS: &[&str] = &[
    "max_score",
    "score_aggregation",
    "require_pass",
    "static_validation_score",
];

/// Warnings for keys of one group's own file that nothing reads.
pub(super) fn unknown_keys(path: &Path, own: &Mapping) -> Vec<String> {
    keys(own)
        .filter(|k| !KNOWN_KEYS.contains(&k.as_str()))
        .map(|k| format!("{}: unknown key `{k}`", path.display()))
        .collect()
}

/// `own` laid over `parent` (both raw `testdata.yaml` mappings).
pub(super) fn inherit(parent: &Mapping, own: &Mapping) -> Mapping {
    let mut merged = parent.clone();
    for (key, value) in own {
        merged.insert(key.clone(), value.clone());
    }
    merged
}

/// Where a group's settings come from, for the grading of one group.
pub(super) struct GradingInput<'a> {
    /// The file errors name (the nearest `testdata.yaml`, or `data/`).
    pub path: &'a Path,
    pub effective: &'a Mapping,
    pub is_root: bool,
    pub kind: ProblemKind,
    pub problem: &'a ProblemGrading,
}

pub(super) fn grading(
    input: &GradingInput<'_>,
    warnings: &mut Vec<String>,
) -> Result<Grading, PackageError> {
    let doc = Doc {
        path: input.path,
        map: input.effective,
    };
    refuse_unsupported(&doc, input, warnings)?;
    let mut grading = Grading::default();
    let on_reject = match input.problem.on_reject {
        Some(value) => Some(value.to_string()),
        None => doc.string("on_reject")?,
    };
    grading.on_reject = match on_reject.as_deref() {
        None | Some("break") => OnReject::Break,
        Some("continue") => OnReject::Continue,
        Some(_) => return Err(doc.error("on_reject", "break or continue")),
    };
    match doc.string("grading")?.as_deref() {
        None | Some("default") => {}
        Some("custom") if input.kind == ProblemKind::Scoring => {
            return Err(PackageError::invalid(
                input.path,
                "`grading: custom` (a custom grader) is not supported",
            ));
        }
        Some("custom") => {
            grading.custom = true;
            warnings.push(format!(
                "{}: `grading: custom` ignored in a pass-fail problem",
                input.path.display()
            ));
        }
        Some(_) => return Err(doc.error("grading", "default or custom")),
    }
    if let Some(flags) = doc.string("grader_flags")? {
        grader_flags(&mut grading, &flags, input, warnings);
    }
    grading.accept_score = score(&doc, "accept_score", input.problem.accept_score, 1.0)?;
    grading.reject_score = score(&doc, "reject_score", input.problem.reject_score, 0.0)?;
    let range = match &input.problem.range {
        Some(range) => Some(range.clone()),
        None => doc.get("range").and_then(scalar_string),
    };
    if let Some(range) = range {
        grading.range = parse_range(&range)
            .ok_or_else(|| doc.error("range", "two numbers `MIN MAX` with MIN <= MAX"))?;
    }
    let mut flags = doc.words("output_validator_flags")?.unwrap_or_default();
    flags.extend(doc.words("output_validator_args")?.unwrap_or_default());
    grading.output_validator_flags = flags;
    Ok(grading)
}

/// Keys that would change the judging in ways this judge does not implement.
fn refuse_unsupported(
    doc: &Doc<'_>,
    input: &GradingInput<'_>,
    warnings: &mut Vec<String>,
) -> Result<(), PackageError> {
    if let Some(args) = doc.words("args")?
        && !args.is_empty()
    {
        return Err(PackageError::invalid(
            input.path,
            "`args` (command-line arguments for the submission) is not supported",
        ));
    }
    for key in SCORING_2025_KEYS {
        if doc.get(key).is_none() {
            continue;
        }
        if input.kind == ProblemKind::Scoring {
            return Err(PackageError::invalid(
                input.path,
                format!("`{key}` (2025-09 group scoring) is not supported"),
            ));
        }
        let warning = format!(
            "{}: `{key}` ignored in a pass-fail problem",
            input.path.display()
        );
        if !warnings.contains(&warning) {
            warnings.push(warning);
        }
    }
    Ok(())
}

fn score(
    doc: &Doc<'_>,
    key: &str,
    problem_wide: Option<f64>,
    default: f64,
) -> Result<f64, PackageError> {
    match problem_wide {
        Some(value) => Ok(value),
        None => Ok(doc.number(key)?.unwrap_or(default)),
    }
}

/// Each word of `grader_flags` sets what it names; the last one of a kind wins.
fn grader_flags(
    grading: &mut Grading,
    flags: &str,
    input: &GradingInput<'_>,
    warnings: &mut Vec<String>,
) {
    for flag in flags.split_whitespace() {
        match flag {
            "sum" => grading.score_aggregation = ScoreAggregation::Sum,
            "min" => grading.score_aggregation = ScoreAggregation::Min,
            "max" => grading.score_aggregation = ScoreAggregation::Max,
            "avg" => grading.score_aggregation = ScoreAggregation::Avg,
            "first_error" => grading.verdict_aggregation = VerdictAggregation::FirstError,
            "worst_error" | "no_errors" => {
                grading.verdict_aggregation = VerdictAggregation::WorstError;
            }
            "always_accept" => grading.verdict_aggregation = VerdictAggregation::AlwaysAccept,
            "accept_if_any_accepted" => grading.accept_if_any_accepted = true,
            // Meaningful at the root only: a child inherits the root's string
            // whole, and must not start ignoring its own first item.
            "ignore_sample" => grading.ignore_sample = input.is_root,
            other => warnings.push(format!(
                "{}: unknown grader flag {other:?} ignored",
                input.path.display()
            )),
        }
    }
}

fn parse_range(text: &str) -> Option<(f64, f64)> {
    let mut parts = text.split_whitespace();
    let min = parse_float(parts.next()?)?;
    let max = parse_float(parts.next()?)?;
    (parts.next().is_none() && min <= max).then_some((min, max))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn map(yaml: &str) -> Mapping {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn grade(effective: &Mapping, is_root: bool) -> Result<Grading, PackageError> {
        let input = GradingInput {
            path: Path::new("data/testdata.yaml"),
            effective,
            is_root,
            kind: ProblemKind::Scoring,
            problem: &ProblemGrading::default(),
        };
        grading(&input, &mut Vec::new())
    }

    #[test]
    fn defaults_are_problemtools() {
        let g = grade(&Mapping::new(), true).unwrap();
        assert_eq!(g, Grading::default());
        assert_eq!(g.on_reject, OnReject::Break);
        assert_eq!(g.verdict_aggregation, VerdictAggregation::WorstError);
    }

    #[test]
    fn children_inherit_whole_values() {
        let root = map("on_reject: continue\nrange: 0 100\ngrader_flags: ignore_sample");
        let child = inherit(
            &root,
            &map("accept_score: 50\ngrader_flags: min first_error"),
        );
        let g = grade(&child, false).unwrap();
        assert_eq!(g.on_reject, OnReject::Continue);
        assert_eq!(g.range, (0.0, 100.0));
        assert_eq!(g.accept_score, 50.0);
        assert_eq!(g.score_aggregation, ScoreAggregation::Min);
        assert_eq!(g.verdict_aggregation, VerdictAggregation::FirstError);
        let root_only = inherit(&root, &Mapping::new());
        assert!(grade(&root_only, true).unwrap().ignore_sample);
        assert!(!grade(&root_only, false).unwrap().ignore_sample);
    }

    #[test]
    fn bad_values_name_the_key() {
        let err = grade(&map("on_reject: maybe"), true).unwrap_err();
        assert!(err.to_string().contains("on_reject"), "{err}");
        assert!(grade(&map("range: 5 1"), true).is_err());
        assert!(grade(&map("range: 5"), true).is_err());
        assert!(grade(&map("grading: custom"), true).is_err());
        let g = grade(
            &map("output_validator_args: [float_tolerance, '1e-6']"),
            true,
        )
        .unwrap();
        assert_eq!(g.output_validator_flags, ["float_tolerance", "1e-6"]);
    }
}

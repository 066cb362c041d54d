//! `problem.yaml`: name, format version, type, validation, limits, validator flags
//! and the legacy problem-wide grading keys. Every key is optional.

use std::path::Path;

use serde_yaml_ng::{Mapping, Value};

use super::yaml::{Doc, keys, scalar_string};
use crate::package::error::PackageError;
use crate::package::problem::{FormatVersion, ProblemKind, ProblemLimits};

const KNOWN_KEYS: &[&str] = &[
    "problem_format_version",
    "type",
    "name",
    "uuid",
    "version",
    "author",
    "credits",
    "source",
    "source_url",
    "license",
    "rights_owner",
    "embargo_until",
    "limits",
    "validation",
    "validator_flags",
    "output_validator_args",
    "grading",
    "keywords",
    "languages",
    "libraries",
    "allow_file_writing",
    "constants",
];

/// How `problem.yaml` asks for the output to be judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Validation {
    /// Legacy `validation: default` (or no `validation` in a legacy package).
    Default,
    /// Legacy `validation: custom ...`: a validator must be present.
    Custom,
    /// 2023-07: a custom validator when `output_validator/` exists.
    FromLayout,
}

/// Legacy problem-wide grading keys that override every group's `testdata.yaml`
/// (problemtools keeps them "during a transition period").
#[derive(Debug, Clone, Default)]
pub(super) struct ProblemGrading {
    pub accept_score: Option<f64>,
    pub reject_score: Option<f64>,
    pub range: Option<String>,
    /// `first_error` → break, `grade` → continue.
    pub on_reject: Option<&'static str>,
}

#[derive(Debug, Clone)]
pub(super) struct Config {
    pub name: Option<String>,
    pub format: FormatVersion,
    pub kind: ProblemKind,
    pub interactive: bool,
    pub multi_pass: bool,
    pub validation: Validation,
    /// Legacy `validator_flags` (or `output_validator_args` at the top level).
    pub validator_args: Vec<String>,
    pub limits: ProblemLimits,
    pub grading: ProblemGrading,
    pub warnings: Vec<String>,
}

/// Parses `problem.yaml` (`map` is empty when the file does not exist).
pub(super) fn parse_config(path: &Path, map: &Mapping) -> Result<Config, PackageError> {
    let doc = Doc { path, map };
    let mut warnings: Vec<String> = keys(map)
        .filter(|k| !KNOWN_KEYS.contains(&k.as_str()))
        .map(|k| format!("{}: unknown key `{k}`", path.display()))
        .collect();
    let format = format_version(&doc)?;
    let ProblemType {
        kind,
        mut interactive,
        multi_pass,
    } = problem_type(&doc)?;
    unenforced_keys(&doc, &mut warnings)?;
    let version = doc.string("problem_format_version")?;
    if kind == ProblemKind::Scoring && version.as_deref().is_some_and(|v| v.starts_with("2025-09"))
    {
        // 2025-09 scores groups by `max_score`/`score_aggregation`/`require_pass`
        // (secret: 100 points by default), not by the grader the earlier
        // versions share: judging it as those would give wrong scores.
        return Err(PackageError::invalid(
            path,
            "`type: scoring` with problem_format_version 2025-09 is not supported \
             (its test_group.yaml scoring model: max_score, score_aggregation, require_pass); \
             legacy and 2023-07-draft scoring are",
        ));
    }
    let validation = match doc.string("validation")? {
        Some(text) => {
            if format == FormatVersion::V2023_07 {
                warnings.push(format!(
                    "{}: `validation` is legacy; honoured anyway",
                    path.display()
                ));
            }
            let (validation, legacy_interactive) = legacy_validation(&doc, &text)?;
            interactive |= legacy_interactive;
            validation
        }
        None if format == FormatVersion::Legacy => Validation::Default,
        None => Validation::FromLayout,
    };
    let mut validator_args = doc.words("validator_flags")?.unwrap_or_default();
    validator_args.extend(doc.words("output_validator_args")?.unwrap_or_default());
    Ok(Config {
        name: name(&doc)?,
        format,
        kind,
        interactive,
        multi_pass,
        validation,
        validator_args,
        limits: limits(&doc, format, multi_pass, &mut warnings)?,
        grading: grading(&doc)?,
        warnings,
    })
}

fn format_version(doc: &Doc<'_>) -> Result<FormatVersion, PackageError> {
    match doc.string("problem_format_version")?.as_deref() {
        None | Some("legacy") | Some("legacy-icpc") => Ok(FormatVersion::Legacy),
        Some("2023-07-draft" | "2023-07" | "2025-09" | "2025-09-draft" | "draft") => {
            Ok(FormatVersion::V2023_07)
        }
        Some(other) => Err(PackageError::invalid(
            doc.path,
            format!(
                "unsupported problem_format_version {other:?} \
                 (legacy, 2023-07-draft and 2025-09 are)"
            ),
        )),
    }
}

/// 2023-07/2025-09 keys that change nothing here: refused when ignoring them
/// would judge wrongly, warned about when it only makes the judge more lenient.
fn unenforced_keys(doc: &Doc<'_>, warnings: &mut Vec<String>) -> Result<(), PackageError> {
    // 2025-09 `constants` are substituted for `{{name}}` in problem.yaml, the test
    // group files, validators and statements; without the substitution a
    // validator argument or an include would be judged as the literal text.
    match doc.get("constants") {
        None | Some(Value::Null) => {}
        Some(Value::Mapping(map)) if map.is_empty() => {}
        Some(_) => {
            return Err(PackageError::invalid(
                doc.path,
                "`constants` is not supported (their `{{name}}` substitution is not done)",
            ));
        }
    }
    match doc.get("languages") {
        None | Some(Value::Null) => {}
        Some(v) if scalar_string(v).as_deref() == Some("all") => {}
        Some(_) => warnings.push(format!(
            "{}: `languages` is not enforced: a submission in any configured language is judged",
            doc.path.display()
        )),
    }
    if matches!(doc.get("allow_file_writing"), Some(Value::Bool(false))) {
        warnings.push(format!(
            "{}: `allow_file_writing: false` is not enforced: a submission may write in its working directory",
            doc.path.display()
        ));
    }
    Ok(())
}

/// What `type` names.
struct ProblemType {
    kind: ProblemKind,
    interactive: bool,
    multi_pass: bool,
}

/// `type`: one string or a list; `pass-fail` unless `scoring` is named.
fn problem_type(doc: &Doc<'_>) -> Result<ProblemType, PackageError> {
    let names: Vec<String> = match doc.get("type") {
        None => Vec::new(),
        Some(Value::Sequence(seq)) if !seq.is_empty() => seq
            .iter()
            .map(|v| scalar_string(v).ok_or_else(|| doc.error("type", "strings")))
            .collect::<Result<_, _>>()?,
        Some(v) => vec![scalar_string(v).ok_or_else(|| doc.error("type", "a string or a list"))?],
    };
    let (mut pass_fail, mut scoring, mut interactive, mut multi_pass) =
        (false, false, false, false);
    for name in &names {
        match name.as_str() {
            "pass-fail" => pass_fail = true,
            "scoring" => scoring = true,
            "interactive" => interactive = true,
            "multi-pass" => multi_pass = true,
            "submit-answer" => {
                return Err(PackageError::invalid(
                    doc.path,
                    format!("problem type `{name}` is not supported"),
                ));
            }
            other => {
                return Err(PackageError::invalid(
                    doc.path,
                    format!("unknown problem type {other:?}"),
                ));
            }
        }
    }
    if pass_fail && scoring {
        return Err(PackageError::invalid(
            doc.path,
            "`type` names both pass-fail and scoring",
        ));
    }
    let kind = if scoring {
        ProblemKind::Scoring
    } else {
        ProblemKind::PassFail
    };
    Ok(ProblemType {
        kind,
        interactive,
        multi_pass,
    })
}

/// Legacy `validation: default | custom [interactive] [score]`.
fn legacy_validation(doc: &Doc<'_>, text: &str) -> Result<(Validation, bool), PackageError> {
    let mut words = text.split_whitespace();
    let validation = match words.next() {
        Some("default") | None => Validation::Default,
        Some("custom") => Validation::Custom,
        Some(other) => {
            return Err(PackageError::invalid(
                doc.path,
                format!("`validation`: unknown mode {other:?} (default or custom)"),
            ));
        }
    };
    let mut interactive = false;
    for param in words {
        match (validation, param) {
            (Validation::Custom, "interactive") => interactive = true,
            // The validator writes score.txt; nothing else changes for the judge.
            (Validation::Custom, "score") => {}
            _ => {
                return Err(PackageError::invalid(
                    doc.path,
                    format!("`validation`: unsupported parameter {param:?} in {text:?}"),
                ));
            }
        }
    }
    Ok((validation, interactive))
}

/// `name`: a string, or a map of language → name (`en`, else the first).
fn name(doc: &Doc<'_>) -> Result<Option<String>, PackageError> {
    match doc.get("name") {
        None => Ok(None),
        Some(Value::Mapping(names)) => {
            let en = names.get("en").and_then(scalar_string);
            let first = names.values().find_map(scalar_string);
            Ok(en.or(first))
        }
        Some(v) => scalar_string(v)
            .map(Some)
            .ok_or_else(|| doc.error("name", "a string or a map of languages to names")),
    }
}

/// `limits` keys that are read (by this parser, or by `verify` for the time
/// limit), and those known but not enforced (warned about).
const LIMIT_KEYS: &[&str] = &[
    "time_limit",
    "memory",
    "output",
    "compilation_time",
    "compilation_memory",
    "validation_time",
    "validation_memory",
    "time_multiplier",
    "time_multipliers",
    "time_safety_margin",
    "time_resolution",
    "validation_passes",
];
const LIMIT_KEYS_NOT_ENFORCED: &[&str] = &["code", "validation_output"];

fn warn_limits(path: &Path, map: &Mapping, warnings: &mut Vec<String>) {
    for key in keys(map) {
        if LIMIT_KEYS_NOT_ENFORCED.contains(&key.as_str()) {
            warnings.push(format!(
                "{}: `limits.{key}` is not enforced by this judge",
                path.display()
            ));
        } else if !LIMIT_KEYS.contains(&key.as_str()) {
            warnings.push(format!("{}: unknown key `limits.{key}`", path.display()));
        }
    }
}

fn limits(
    doc: &Doc<'_>,
    format: FormatVersion,
    multi_pass: bool,
    warnings: &mut Vec<String>,
) -> Result<ProblemLimits, PackageError> {
    let mut limits = ProblemLimits::default();
    let Some(map) = doc.mapping("limits")? else {
        return Ok(limits);
    };
    let sub = Doc {
        path: doc.path,
        map,
    };
    let mib = |key: &str| -> Result<Option<u64>, PackageError> {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Ok(sub.positive(key)?.map(|v| v.ceil() as u64))
    };
    limits.time_limit = sub.positive("time_limit")?;
    if format == FormatVersion::Legacy && limits.time_limit.is_some() {
        warnings.push(format!(
            "{}: `limits.time_limit` is a 2023-07 key (problemtools refuses it in a legacy \
             package, whose time limit is `.timelimit`); honoured anyway",
            doc.path.display()
        ));
    }
    warn_limits(doc.path, map, warnings);
    if let Some(memory) = mib("memory")? {
        limits.memory_mib = memory;
    }
    if let Some(output) = mib("output")? {
        limits.output_mib = output;
    }
    limits.compilation_time = sub.positive("compilation_time")?;
    limits.compilation_memory_mib = mib("compilation_memory")?;
    limits.validation_time = sub.positive("validation_time")?;
    limits.validation_memory_mib = mib("validation_memory")?;
    // Each format has its own key; the other one is not read (problemtools reads
    // only its format's key too).
    limits.ac_to_time_limit = match format {
        FormatVersion::Legacy => sub.positive("time_multiplier")?,
        FormatVersion::V2023_07 => match sub.mapping("time_multipliers")? {
            Some(map) => Doc {
                path: doc.path,
                map,
            }
            .positive("ac_to_time_limit")?,
            None => None,
        },
    };
    // problemtools reads it in 2023-07 packages only (legacy has no such key).
    if format == FormatVersion::V2023_07 {
        limits.time_resolution = sub.positive("time_resolution")?;
    }
    if let Some(passes) = validation_passes(&sub)? {
        if multi_pass {
            limits.validation_passes = passes;
        } else {
            warnings.push(format!(
                "{}: `limits.validation_passes` is read for multi-pass problems only; ignored",
                doc.path.display()
            ));
        }
    }
    Ok(limits)
}

/// `limits.validation_passes`: a whole number of at least 2 (the format's
/// minimum: one pass is not multi-pass).
fn validation_passes(limits: &Doc<'_>) -> Result<Option<u32>, PackageError> {
    let Some(value) = limits.number("validation_passes")? else {
        return Ok(None);
    };
    if value.fract() != 0.0 || !(2.0..=f64::from(u32::MAX)).contains(&value) {
        return Err(limits.error("limits.validation_passes", "a whole number of at least 2"));
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(Some(value as u32))
}

fn grading(doc: &Doc<'_>) -> Result<ProblemGrading, PackageError> {
    let Some(map) = doc.mapping("grading")? else {
        return Ok(ProblemGrading::default());
    };
    let sub = Doc {
        path: doc.path,
        map,
    };
    let on_reject = match sub.string("on_reject")?.as_deref() {
        Some("first_error") => Some("break"),
        Some("grade") => Some("continue"),
        _ => None,
    };
    Ok(ProblemGrading {
        accept_score: sub.number("accept_score")?,
        reject_score: sub.number("reject_score")?,
        range: sub.string("range")?,
        on_reject,
    })
}

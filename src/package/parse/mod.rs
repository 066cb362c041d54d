//! Reading a package directory into a `Problem`: `problem.yaml` (config), the
//! time limit (`limits.time_limit`, then `.timelimit`), the output validator, the
//! test groups with their grading, the example submissions.

mod config;
mod grading;
mod includes;
mod programs;
mod stubs;
mod testdata;
pub(crate) mod words;
mod yaml;

use std::fs;
use std::path::{Path, PathBuf};

use serde_yaml_ng::Mapping;

use super::error::PackageError;
use super::problem::{OutputValidator, Problem};
use config::parse_config;
use testdata::Walker;

/// Parses the package in `dir`: its root, or a directory holding the root as its
/// single top-level folder. A broken package is an error naming the file.
pub fn parse(dir: &Path) -> Result<Problem, PackageError> {
    let root = find_problem_root(dir)?;
    let root = fs::canonicalize(&root)
        .map_err(|e| PackageError::invalid(&root, format!("cannot resolve: {e}")))?;
    let yaml_path = root.join("problem.yaml");
    let map = yaml::load_mapping(&yaml_path)?.unwrap_or_else(Mapping::new);
    let mut config = parse_config(&yaml_path, &map)?;
    if config.limits.time_limit.is_none() {
        config.limits.time_limit = dot_timelimit(&root)?;
    }
    let static_validator = root.join("static_validator");
    if static_validator.exists() {
        return Err(PackageError::invalid(
            static_validator,
            "static validators (2025-09) are not supported",
        ));
    }
    let mut warnings = std::mem::take(&mut config.warnings);
    let validator = programs::output_validator(&root, &config, &mut warnings)?;
    let default_flags = match &validator {
        OutputValidator::Default(flags) => Some(flags),
        OutputValidator::Custom(_) | OutputValidator::Several(_) => None,
    };
    let mut walker = Walker::new(
        &root,
        config.kind,
        config.format,
        &config.grading,
        default_flags,
    );
    let data = walker.data()?;
    warnings.append(&mut walker.warnings);
    if data.cases().is_empty() {
        return Err(PackageError::invalid(
            root.join("data"),
            "no test cases in data/sample or data/secret",
        ));
    }
    let name = config
        .name
        .clone()
        .or_else(|| statement_name(&root))
        .unwrap_or_else(|| {
            root.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
    Ok(Problem {
        submissions: programs::example_submissions(&root)?,
        includes: includes::includes(&root, config.format)?,
        root,
        name,
        format: config.format,
        kind: config.kind,
        interactive: config.interactive,
        multi_pass: config.multi_pass,
        limits: config.limits,
        validator,
        data,
        warnings,
    })
}

fn is_problem_root(dir: &Path) -> bool {
    dir.join("problem.yaml").is_file() || dir.join("data").is_dir()
}

/// `dir` itself when it holds `problem.yaml` or `data/`; else its single
/// top-level folder when that does (hidden names are not counted).
pub fn find_problem_root(dir: &Path) -> Result<PathBuf, PackageError> {
    if is_problem_root(dir) {
        return Ok(dir.to_path_buf());
    }
    let entries: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| PackageError::invalid(dir, format!("cannot list: {e}")))?
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    match entries.as_slice() {
        [single] if single.is_dir() && is_problem_root(single) => Ok(single.clone()),
        _ => Err(PackageError::invalid(
            dir,
            "not a problem package: no problem.yaml or data/ here or in a single top-level folder",
        )),
    }
}

/// `.timelimit` at the package root: one number of seconds.
fn dot_timelimit(root: &Path) -> Result<Option<f64>, PackageError> {
    let path = root.join(".timelimit");
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(PackageError::invalid(&path, format!("cannot read: {e}"))),
    };
    match yaml::parse_float(&text) {
        Some(seconds) if seconds > 0.0 && seconds.is_finite() => Ok(Some(seconds)),
        _ => Err(PackageError::invalid(
            &path,
            format!("expected a time limit in seconds, found {:?}", text.trim()),
        )),
    }
}

/// The name a legacy LaTeX statement gives with `\problemname{...}`.
fn statement_name(root: &Path) -> Option<String> {
    let candidates = [
        "problem_statement/problem.en.tex",
        "problem_statement/problem.tex",
        "statement/problem.en.tex",
    ];
    candidates.iter().find_map(|file| {
        let text = fs::read_to_string(root.join(file)).ok()?;
        let start = text.find("\\problemname{")? + "\\problemname{".len();
        let mut depth = 1;
        for (i, c) in text[start..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        let name = text[start..start + i].trim();
                        return (!name.is_empty()).then(|| name.to_string());
                    }
                }
                _ => {}
            }
        }
        None
    })
}

//! The `data/` tree → `TestGroup`s, in problemtools' order: each directory's
//! listing sorted by name, subgroups and test cases interleaved. A test case is a
//! `NAME.ans` with its `NAME.in`; a `NAME.in` without its answer is an error.
//! `*.interaction`, `*.yaml`, images and `*.files/` beside the tests are not tests.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde_yaml_ng::Mapping;

use super::config::ProblemGrading;
use super::grading::{GradingInput, grading, inherit, unknown_keys};
use super::stubs::{self, Stub};
use super::yaml::load_mapping;
use crate::package::error::PackageError;
use crate::package::problem::{
    DefaultValidatorFlags, FormatVersion, ProblemKind, TestCase, TestGroup, TestItem,
};

/// Deeper than any real package nests its groups.
const MAX_DEPTH: usize = 32;
/// Chains of symlink stubs are followed this far (a loop ends here).
const MAX_STUB_HOPS: usize = 8;
/// Directories of `data/` that hold validator tests, not tests of submissions.
const VALIDATION_DIRS: &[&str] = &["invalid_input", "invalid_output", "valid_output", "bad"];

pub(super) struct Walker<'a> {
    /// The canonical package root; nothing a test reads may lie outside it.
    pub root: &'a Path,
    pub kind: ProblemKind,
    pub format: FormatVersion,
    pub problem_grading: &'a ProblemGrading,
    /// The default validator's flags, to check each group's flags against; `None`
    /// with a custom validator (whose flags are its own business).
    pub default_flags: Option<&'a DefaultValidatorFlags>,
    pub warnings: Vec<String>,
    /// Canonical directories being walked (a symlinked group must not loop).
    visiting: HashSet<PathBuf>,
}

impl<'a> Walker<'a> {
    pub fn new(
        root: &'a Path,
        kind: ProblemKind,
        format: FormatVersion,
        problem_grading: &'a ProblemGrading,
        default_flags: Option<&'a DefaultValidatorFlags>,
    ) -> Self {
        Walker {
            root,
            kind,
            format,
            problem_grading,
            default_flags,
            warnings: Vec::new(),
            visiting: HashSet::new(),
        }
    }

    /// Walks `data/`.
    pub fn data(&mut self) -> Result<TestGroup, PackageError> {
        let dir = self.root.join("data");
        if !dir.is_dir() {
            return Err(PackageError::invalid(&dir, "no data/ directory"));
        }
        self.group(&dir, String::new(), &Mapping::new(), 0)
    }

    fn group(
        &mut self,
        dir: &Path,
        name: String,
        parent: &Mapping,
        depth: usize,
    ) -> Result<TestGroup, PackageError> {
        let canonical = self.inside(dir)?;
        if depth > MAX_DEPTH || !self.visiting.insert(canonical.clone()) {
            return Err(PackageError::invalid(
                dir,
                "test groups nest too deep or loop",
            ));
        }
        let (config_path, own) = group_config(dir)?;
        self.warnings.extend(unknown_keys(&config_path, &own));
        let effective = inherit(parent, &own);
        let mut grading = grading(
            &GradingInput {
                path: &config_path,
                effective: &effective,
                is_root: name.is_empty(),
                kind: self.kind,
                problem: self.problem_grading,
            },
            &mut self.warnings,
        )?;
        // 2023-07 on: samples score 0; legacy: like any group (problemtools).
        grading.zero_score = self.format != FormatVersion::Legacy
            && (name == "sample" || name.starts_with("sample/"));
        if let Some(flags) = self.default_flags {
            flags
                .with_args(&grading.output_validator_flags)
                .map_err(|e| PackageError::invalid(&config_path, e.to_string()))?;
        }
        let mut items = Vec::new();
        for entry in sorted_entries(dir)? {
            if let Some(item) = self.item(dir, &name, &entry, &effective, depth)? {
                items.push(item);
            }
        }
        self.visiting.remove(&canonical);
        Ok(TestGroup {
            name,
            path: dir.to_path_buf(),
            grading,
            items,
        })
    }

    fn item(
        &mut self,
        dir: &Path,
        group: &str,
        entry: &OsString,
        effective: &Mapping,
        depth: usize,
    ) -> Result<Option<TestItem>, PackageError> {
        let path = dir.join(entry);
        let text = entry.to_string_lossy();
        let meta = fs::metadata(&path)
            .map_err(|e| PackageError::invalid(&path, format!("cannot read: {e}")))?;
        if !meta.is_dir() {
            return self.case(dir, group, &text);
        }
        if text.ends_with(".files") {
            if !sorted_entries(&path)?.is_empty() {
                return Err(PackageError::invalid(
                    &path,
                    "input files for the submission (`NAME.files/`) are not supported",
                ));
            }
            return Ok(None);
        }
        if group.is_empty() && text != "sample" && text != "secret" {
            if !VALIDATION_DIRS.contains(&text.as_ref()) {
                self.warnings.push(format!(
                    "{}: not a test group (only data/sample and data/secret are judged)",
                    path.display()
                ));
            }
            return Ok(None);
        }
        let sub = self.group(&path, join_name(group, &text), effective, depth + 1)?;
        Ok(Some(TestItem::Group(sub)))
    }

    /// The test case a file of the group's listing stands for, if any.
    fn case(
        &mut self,
        dir: &Path,
        group: &str,
        file: &str,
    ) -> Result<Option<TestItem>, PackageError> {
        let Some(stem) = file
            .strip_suffix(".ans")
            .or_else(|| file.strip_suffix(".in"))
        else {
            return Ok(None);
        };
        let path = dir.join(file);
        let input = dir.join(format!("{stem}.in"));
        let answer = dir.join(format!("{stem}.ans"));
        if group.is_empty() {
            self.warnings.push(format!(
                "{}: test files directly in data/ are not judged",
                path.display()
            ));
            return Ok(None);
        }
        if file.ends_with(".in") {
            return if answer.exists() {
                Ok(None) // listed at its `.ans`, as problemtools does
            } else {
                Err(PackageError::invalid(
                    &path,
                    format!("no answer file {stem}.ans for this input"),
                ))
            };
        }
        if !input.is_file() {
            self.warnings.push(format!(
                "{}: answer file without {stem}.in, not a test",
                path.display()
            ));
            return Ok(None);
        }
        let settings = dir.join(format!("{stem}.yaml"));
        if settings.exists() {
            self.case_settings(&settings)?;
        }
        Ok(Some(TestItem::Case(TestCase {
            name: join_name(group, stem),
            input: self.test_file(&input)?,
            answer: self.test_file(&answer)?,
        })))
    }

    /// `path` with every link resolved, which must lie inside the package.
    fn inside(&self, path: &Path) -> Result<PathBuf, PackageError> {
        let resolved = fs::canonicalize(path)
            .map_err(|e| PackageError::invalid(path, format!("cannot resolve: {e}")))?;
        if !resolved.starts_with(self.root) {
            return Err(PackageError::invalid(
                path,
                format!("links outside the package (to {})", resolved.display()),
            ));
        }
        Ok(resolved)
    }
}

/// Keys of a test case's `NAME.yaml` that change how it is judged; the others
/// (`hint`, `description`, `full_feedback`, `input_validator_args`, ...) do not.
const CASE_JUDGING_KEYS: &[&str] = &["args", "output_validator_args", "output_validator_flags"];

impl Walker<'_> {
    /// A test case's own `NAME.yaml` (2023-07): refused when it asks for
    /// something that changes the judging (per-case arguments), since those are
    /// not supported; harmless keys are ignored with a warning.
    fn case_settings(&mut self, path: &Path) -> Result<(), PackageError> {
        let map = load_mapping(path)?.unwrap_or_default();
        for (key, value) in &map {
            let key = key.as_str().unwrap_or_default();
            let empty = match value {
                serde_yaml_ng::Value::Null => true,
                serde_yaml_ng::Value::Sequence(seq) => seq.is_empty(),
                serde_yaml_ng::Value::String(text) => text.trim().is_empty(),
                _ => false,
            };
            if CASE_JUDGING_KEYS.contains(&key) && !empty {
                return Err(PackageError::invalid(
                    path,
                    format!("`{key}` for a single test case is not supported"),
                ));
            }
        }
        self.warnings.push(format!(
            "{}: per-test-case settings other than arguments do not change judging; ignored",
            path.display()
        ));
        Ok(())
    }

    /// A test file with its links resolved and then its symlink stubs followed
    /// (`stubs.rs`), each hop held to the rule of `inside`.
    fn test_file(&mut self, path: &Path) -> Result<PathBuf, PackageError> {
        let mut current = self.inside(path)?;
        let mut first_text = None;
        for _ in 0..=MAX_STUB_HOPS {
            let Some((text, next)) = self.stub_hop(path, &current)? else {
                if let Some(text) = first_text {
                    let to = current.strip_prefix(self.root).unwrap_or(&current);
                    self.warnings.push(format!(
                        "{}: a symlink stub holding {text:?}, followed to {} as the symlink it stands for",
                        path.display(),
                        to.display()
                    ));
                }
                return Ok(current);
            };
            first_text.get_or_insert(text);
            current = next;
        }
        Err(PackageError::invalid(
            path,
            "symlink stubs chained too long (or in a loop)",
        ))
    }

    /// The file the stub `current` (reached from the test file `path`) names,
    /// resolved; `None` when `current` is test data.
    fn stub_hop(
        &mut self,
        path: &Path,
        current: &Path,
    ) -> Result<Option<(String, PathBuf)>, PackageError> {
        let stub_error = |text: &str, what: String| {
            PackageError::invalid(
                path,
                format!("a symlink stub holding {text:?}, which {what}"),
            )
        };
        let (text, target) = match stubs::read(current, self.root) {
            Stub::Data => return Ok(None),
            Stub::Outside { text } => {
                return Err(stub_error(&text, "points outside the package".into()));
            }
            Stub::Inside { text, target } => (text, target),
        };
        match fs::canonicalize(&target) {
            Ok(next) if next.is_file() => {
                if next.starts_with(self.root) {
                    Ok(Some((text, next)))
                } else {
                    let to = format!("links outside the package (to {})", next.display());
                    Err(stub_error(&text, to))
                }
            }
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(stub_error(&text, format!("cannot be resolved: {e}")))
            }
            _ => {
                self.warnings.push(format!(
                    "{}: holds only {text:?}, like a symlink stub, but names no file; judged as test data",
                    current.display()
                ));
                Ok(None)
            }
        }
    }
}

fn join_name(group: &str, name: &str) -> String {
    if group.is_empty() {
        name.to_string()
    } else {
        format!("{group}/{name}")
    }
}

/// The group's own settings: `testdata.yaml`, or 2023-07's `test_group.yaml`.
fn group_config(dir: &Path) -> Result<(PathBuf, Mapping), PackageError> {
    for file in ["testdata.yaml", "test_group.yaml"] {
        let path = dir.join(file);
        if let Some(map) = load_mapping(&path)? {
            return Ok((path, map));
        }
    }
    Ok((dir.to_path_buf(), Mapping::new()))
}

/// The directory's entries sorted bytewise (Python's `sorted(os.listdir())` on
/// UTF-8 names); hidden names are skipped.
fn sorted_entries(dir: &Path) -> Result<Vec<OsString>, PackageError> {
    let read =
        fs::read_dir(dir).map_err(|e| PackageError::invalid(dir, format!("cannot list: {e}")))?;
    let mut names = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| PackageError::invalid(dir, format!("cannot list: {e}")))?;
        let name = entry.file_name();
        if !name.as_bytes().starts_with(b".") {
            names.push(name);
        }
    }
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    Ok(names)
}

//! The package's programs: the output validator (legacy `output_validators/NAME`,
//! 2023-07 `output_validator/`) and the example submissions
//! (`submissions/<expected verdict>/<file or directory>`).

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::config::{Config, Validation};
use crate::package::error::PackageError;
use crate::package::problem::{
    CustomValidator, DefaultValidatorFlags, ExampleSubmission, OutputValidator,
};

/// Non-hidden entries of `dir`, sorted; empty when `dir` does not exist.
fn listing(dir: &Path) -> Result<Vec<PathBuf>, PackageError> {
    let read = match fs::read_dir(dir) {
        Ok(read) => read,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(PackageError::invalid(dir, format!("cannot list: {e}"))),
    };
    let mut paths = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| PackageError::invalid(dir, format!("cannot list: {e}")))?;
        if !entry.file_name().as_bytes().starts_with(b".") {
            paths.push(entry.path());
        }
    }
    paths.sort();
    Ok(paths)
}

fn program_name(path: &Path) -> String {
    let name = if path.is_dir() {
        path.file_name()
    } else {
        path.file_stem()
    };
    name.map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The custom output validator the layout provides, if any.
fn find_custom(root: &Path) -> Result<Option<PathBuf>, PackageError> {
    let singular = root.join("output_validator");
    if singular.is_dir() {
        return single_program_dir(&singular).map(Some);
    }
    let plural = root.join("output_validators");
    let mut found = listing(&plural)?;
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        _ => Err(PackageError::invalid(
            &plural,
            "more than one output validator; only one is supported",
        )),
    }
}

/// Files that document a program rather than belong to it.
fn is_documentation(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    name.starts_with("readme") || name.starts_with("license") || name.ends_with(".md")
}

/// The program in the 2023-07 `output_validator/`: the directory itself, or,
/// when it holds exactly one subdirectory and no file of its own (documentation
/// aside), that subdirectory, as problemtools' 2023-07 examples lay it out
/// (`output_validator/guess_validator/validate.cc`): the same program.
fn single_program_dir(dir: &Path) -> Result<PathBuf, PackageError> {
    let entries = listing(dir)?;
    let (dirs, files): (Vec<&PathBuf>, Vec<&PathBuf>) = entries.iter().partition(|p| p.is_dir());
    let own_files = files.iter().filter(|f| !is_documentation(f)).count();
    match (dirs.as_slice(), own_files) {
        ([single], 0) => Ok((*single).clone()),
        ([_, _, ..], 0) => Err(PackageError::invalid(
            dir,
            format!(
                "holds {} subdirectories and no program of its own; \
                 the output validator must be one program",
                dirs.len()
            ),
        )),
        _ => Ok(dir.to_path_buf()),
    }
}

/// Decides how output is judged, from `problem.yaml` and the layout.
pub(super) fn output_validator(
    root: &Path,
    config: &Config,
    warnings: &mut Vec<String>,
) -> Result<OutputValidator, PackageError> {
    let found = find_custom(root)?;
    let yaml = root.join("problem.yaml");
    let custom = match (config.validation, found) {
        (Validation::Default, Some(path)) if !config.interactive => {
            warnings.push(format!(
                "{}: present but problem.yaml asks for the default validator",
                path.display()
            ));
            None
        }
        (Validation::Default, None) if !config.interactive => None,
        (_, Some(path)) => Some(path),
        (Validation::FromLayout, None) if !config.interactive => None,
        (_, None) => {
            return Err(PackageError::invalid(
                &yaml,
                "a custom (or interactive) validator is asked for, \
                 but there is no output_validator/ or output_validators/NAME",
            ));
        }
    };
    match custom {
        Some(path) => Ok(OutputValidator::Custom(CustomValidator {
            name: program_name(&path),
            path,
            args: config.validator_args.clone(),
        })),
        None => DefaultValidatorFlags::default()
            .with_args(&config.validator_args)
            .map(OutputValidator::Default)
            .map_err(|e| PackageError::invalid(&yaml, e.to_string())),
    }
}

/// Every example submission under `submissions/`, by verdict folder then name.
pub(super) fn example_submissions(root: &Path) -> Result<Vec<ExampleSubmission>, PackageError> {
    let mut out = Vec::new();
    for folder in listing(&root.join("submissions"))? {
        if !folder.is_dir() {
            continue; // submissions.yaml and the like
        }
        let expected = folder
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for program in listing(&folder)? {
            let mut files = Vec::new();
            collect_files(&program, &mut files, 0)?;
            if files.is_empty() {
                continue;
            }
            out.push(ExampleSubmission {
                expected: expected.clone(),
                name: program
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                files,
            });
        }
    }
    Ok(out)
}

fn collect_files(path: &Path, out: &mut Vec<PathBuf>, depth: usize) -> Result<(), PackageError> {
    if path.is_file() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    if !path.is_dir() || depth > 8 {
        return Ok(());
    }
    for child in listing(path)? {
        collect_files(&child, out, depth + 1)?;
    }
    Ok(())
}

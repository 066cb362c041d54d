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

/// File endings that make a file a program, from the format's languages table
/// (those that determine a language): problemtools builds an entry of a legacy
/// `output_validators/` only when it recognises its language, so a header or a
/// note beside the validators is no program.
const PROGRAM_ENDINGS: &[&str] = &[
    "4th", "a68", "adb", "ads", "apl", "c", "c++", "cc", "cl", "cob", "cpp", "cr", "cs", "cxx",
    "d", "dart", "def", "erl", "ex", "f90", "forth", "frt", "fs", "fth", "go", "hs", "java", "jl",
    "js", "kt", "lisp", "lua", "m", "ml", "mod", "nim", "odin", "pas", "php", "pl", "pm", "py",
    "py2", "py3", "rb", "rkt", "rs", "scala", "sh", "sim", "sno", "ss", "st", "swift", "ts", "vb",
    "zig",
];

/// Endings of C and C++ headers: kept beside a single-file program of a legacy
/// flat `output_validators/` so its `#include "x.h"` finds them.
const HEADER_ENDINGS: &[&str] = &["h", "hh", "hpp", "hxx", "h++", "inc"];

fn ending(path: &Path) -> Option<&str> {
    path.extension().and_then(|e| e.to_str())
}

fn is_program_file(path: &Path) -> bool {
    ending(path).is_some_and(|e| e == "C" || PROGRAM_ENDINGS.contains(&e))
}

fn is_header(path: &Path) -> bool {
    ending(path).is_some_and(|e| HEADER_ENDINGS.contains(&e.to_ascii_lowercase().as_str()))
}

/// The custom output validator programs the layout provides, in the order
/// they run, each with the files built beside it.
struct Found {
    programs: Vec<PathBuf>,
    /// Headers beside single-file programs (legacy flat layout).
    companions: Vec<PathBuf>,
}

fn find_custom(root: &Path, warnings: &mut Vec<String>) -> Result<Found, PackageError> {
    let singular = root.join("output_validator");
    if singular.is_dir() {
        return Ok(Found {
            programs: vec![single_program_dir(&singular)?],
            companions: Vec::new(),
        });
    }
    legacy_programs(&root.join("output_validators"), warnings)
}

/// Legacy `output_validators/` as problemtools reads it: each entry is one
/// program (a directory, or a source file of a known language); documentation
/// is skipped, and any other file (a header, a note) is not a program: warned
/// about, a header kept for the single-file programs beside it.
fn legacy_programs(dir: &Path, warnings: &mut Vec<String>) -> Result<Found, PackageError> {
    let mut found = Found {
        programs: Vec::new(),
        companions: Vec::new(),
    };
    for entry in listing(dir)? {
        if entry.is_dir() || is_program_file(&entry) {
            found.programs.push(entry);
        } else if is_documentation(&entry) {
            continue;
        } else if is_header(&entry) {
            warnings.push(format!(
                "{}: a header, not a program: not run as an output validator \
                 (it is built beside the single-file validators)",
                entry.display()
            ));
            found.companions.push(entry);
        } else {
            warnings.push(format!(
                "{}: not a program (no source file of a known language): \
                 not run as an output validator",
                entry.display()
            ));
        }
    }
    Ok(found)
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
    let found = find_custom(root, warnings)?;
    let yaml = root.join("problem.yaml");
    // The default validator can neither talk to a submission nor ask for
    // another pass.
    let needs_custom = config.interactive || config.multi_pass;
    let use_custom = match config.validation {
        Validation::Default if !needs_custom => {
            for path in &found.programs {
                warnings.push(format!(
                    "{}: present but problem.yaml asks for the default validator",
                    path.display()
                ));
            }
            false
        }
        _ if !found.programs.is_empty() => true,
        Validation::FromLayout if !needs_custom => false,
        _ => {
            return Err(PackageError::invalid(
                &yaml,
                "a custom (or interactive, or multi-pass) validator is asked for, \
                 but there is no output_validator/ or program in output_validators/",
            ));
        }
    };
    if !use_custom {
        return DefaultValidatorFlags::default()
            .with_args(&config.validator_args)
            .map(OutputValidator::Default)
            .map_err(|e| PackageError::invalid(&yaml, e.to_string()));
    }
    let companions = found.companions;
    let mut programs: Vec<CustomValidator> = found
        .programs
        .into_iter()
        .map(|path| CustomValidator {
            name: program_name(&path),
            companions: if path.is_file() {
                companions.clone()
            } else {
                Vec::new()
            },
            path,
            args: config.validator_args.clone(),
        })
        .collect();
    if programs.len() == 1 {
        return Ok(OutputValidator::Custom(programs.remove(0)));
    }
    if needs_custom {
        let what = if config.interactive {
            "an interactive"
        } else {
            "a multi-pass"
        };
        let names: Vec<&str> = programs.iter().map(|p| p.name.as_str()).collect();
        return Err(PackageError::invalid(
            root.join("output_validators"),
            format!(
                "{what} problem takes exactly one output validator; this folder holds \
                 {} programs ({})",
                programs.len(),
                names.join(", ")
            ),
        ));
    }
    Ok(OutputValidator::Several(programs))
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

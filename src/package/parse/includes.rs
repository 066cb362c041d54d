//! `include/<language>/` and `include/default/` (2023-07; legacy packages know
//! `include/<language>/` only): files added to every submission of a language
//! before it is compiled. The judge copies them without overwriting the
//! submission's own files.

use std::collections::HashSet;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::package::error::PackageError;
use crate::package::problem::{FormatVersion, IncludeFile};

/// Deeper than any include tree nests.
const MAX_DEPTH: usize = 16;
/// More files than any include directory holds.
const MAX_FILES: usize = 1000;

/// Every include file of the package, by language directory then path.
pub(super) fn includes(
    root: &Path,
    format: FormatVersion,
) -> Result<Vec<IncludeFile>, PackageError> {
    let dir = root.join("include");
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for language_dir in sorted(&dir)? {
        if !language_dir.is_dir() {
            continue;
        }
        let language = name_of(&language_dir);
        if language == "default" && format == FormatVersion::Legacy {
            return Err(PackageError::invalid(
                &language_dir,
                "`include/default/` is a 2023-07 feature; a legacy package names a language",
            ));
        }
        let mut files = Vec::new();
        collect(root, &language_dir, Path::new(""), &mut files, 0)?;
        out.extend(files.into_iter().map(|(path, source)| IncludeFile {
            language: language.clone(),
            path,
            source,
        }));
    }
    let defaults: HashSet<&Path> = out
        .iter()
        .filter(|f| f.language == "default")
        .map(|f| f.path.as_path())
        .collect();
    if let Some(clash) = out
        .iter()
        .find(|f| f.language != "default" && defaults.contains(f.path.as_path()))
    {
        return Err(PackageError::invalid(
            dir.join(&clash.language).join(&clash.path),
            "also in include/default/: a submission cannot get both",
        ));
    }
    Ok(out)
}

fn name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Non-hidden entries of `dir`, sorted bytewise.
fn sorted(dir: &Path) -> Result<Vec<PathBuf>, PackageError> {
    let read =
        fs::read_dir(dir).map_err(|e| PackageError::invalid(dir, format!("cannot list: {e}")))?;
    let mut paths = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| PackageError::invalid(dir, format!("cannot list: {e}")))?;
        if !entry.file_name().as_bytes().starts_with(b".") {
            paths.push(entry.path());
        }
    }
    paths.sort_by(|a, b| a.as_os_str().as_bytes().cmp(b.as_os_str().as_bytes()));
    Ok(paths)
}

/// The files below `dir` (whose path below the language directory is `rel`),
/// each resolved inside the package.
fn collect(
    root: &Path,
    dir: &Path,
    rel: &Path,
    out: &mut Vec<(PathBuf, PathBuf)>,
    depth: usize,
) -> Result<(), PackageError> {
    if depth > MAX_DEPTH {
        return Err(PackageError::invalid(dir, "include files nest too deep"));
    }
    for path in sorted(dir)? {
        let resolved = fs::canonicalize(&path)
            .map_err(|e| PackageError::invalid(&path, format!("cannot resolve: {e}")))?;
        if !resolved.starts_with(root) {
            return Err(PackageError::invalid(
                &path,
                format!("links outside the package (to {})", resolved.display()),
            ));
        }
        let rel = rel.join(name_of(&path));
        if resolved.is_dir() {
            collect(root, &path, &rel, out, depth + 1)?;
        } else {
            if out.len() >= MAX_FILES {
                return Err(PackageError::invalid(dir, "more than 1000 include files"));
            }
            out.push((rel, resolved));
        }
    }
    Ok(())
}

//! Checking an uploaded package before it is stored: the one seam between the
//! Server and the package parser.
//!
//! TEMPORARY: the `package` module's parser (`package::load`) is being written in
//! parallel. Until it lands, [`validate`] does a minimal structural check (gzip +
//! tar readable, safe entry paths, size/count bombs refused, a `problem.yaml` or
//! `data/` at the root or inside one top-level folder). When merging, replace the
//! body of [`validate`] with `package::load(path, &UnpackLimits::default())` and map
//! its `Problem` into [`PackageSummary`]; nothing else in the Server changes.

use std::collections::BTreeSet;
use std::path::{Component, Path};

use flate2::read::GzDecoder;

/// The contract's default unpacking limits (`--max-entries`, `--max-unpacked`).
const MAX_ENTRIES: u64 = 100_000;
const MAX_UNPACKED: u64 = 4 << 30;

/// What the Server learns of a valid package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageSummary {
    pub entries: u64,
    pub unpacked_bytes: u64,
    /// Whether a `problem.yaml` was found (a package may have only `data/`).
    pub has_problem_yaml: bool,
}

/// Is the `.tar.gz` at `path` a problem package? `Err` says what is wrong, in
/// words an uploader can act on. Blocking: call it from `spawn_blocking`.
pub fn validate(path: &Path) -> Result<PackageSummary, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open the upload: {e}"))?;
    let mut archive = tar::Archive::new(GzDecoder::new(std::io::BufReader::new(file)));
    let entries = archive
        .entries()
        .map_err(|e| format!("not a gzip-compressed tar archive: {e}"))?;
    let mut names: BTreeSet<Vec<String>> = BTreeSet::new();
    let (mut count, mut unpacked) = (0_u64, 0_u64);
    for entry in entries {
        let entry =
            entry.map_err(|e| format!("not a readable gzip-compressed tar archive: {e}"))?;
        count += 1;
        if count > MAX_ENTRIES {
            return Err(format!("more than {MAX_ENTRIES} entries"));
        }
        unpacked = unpacked.saturating_add(entry.header().size().unwrap_or(0));
        if unpacked > MAX_UNPACKED {
            return Err(format!("more than {MAX_UNPACKED} bytes unpacked"));
        }
        let path = entry
            .path()
            .map_err(|e| format!("an entry has an unreadable path: {e}"))?
            .into_owned();
        check_entry(&entry, &path)?;
        let parts = components(&path)?;
        if !parts.is_empty() {
            names.insert(parts);
        }
    }
    let has_problem_yaml = find_root(&names)?;
    Ok(PackageSummary {
        entries: count,
        unpacked_bytes: unpacked,
        has_problem_yaml,
    })
}

fn check_entry<R: std::io::Read>(entry: &tar::Entry<'_, R>, path: &Path) -> Result<(), String> {
    use tar::EntryType;
    let kind = entry.header().entry_type();
    match kind {
        EntryType::Regular | EntryType::Directory | EntryType::Continuous => Ok(()),
        EntryType::Symlink | EntryType::Link => {
            let target = entry
                .link_name()
                .map_err(|e| format!("{}: unreadable link target: {e}", path.display()))?
                .ok_or_else(|| format!("{}: link without a target", path.display()))?;
            if link_escapes(path, &target, kind == EntryType::Symlink) {
                Err(format!(
                    "{}: link to {} points outside the package",
                    path.display(),
                    target.display()
                ))
            } else {
                Ok(())
            }
        }
        EntryType::XHeader
        | EntryType::XGlobalHeader
        | EntryType::GNULongName
        | EntryType::GNULongLink => Ok(()),
        other => Err(format!(
            "{}: entries of type {other:?} (devices, fifos, ...) are not allowed",
            path.display()
        )),
    }
}

/// The normal components of an entry path; absolute paths and `..` are refused.
fn components(path: &Path) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(s) => out.push(s.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => return Err(format!("{}: `..` is not allowed", path.display())),
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!(
                    "{}: absolute paths are not allowed",
                    path.display()
                ));
            }
        }
    }
    Ok(out)
}

/// Does a link at `path` to `target` leave the archive? Symlinks resolve from the
/// link's directory, hard links from the archive root.
fn link_escapes(path: &Path, target: &Path, symlink: bool) -> bool {
    if target.is_absolute() {
        return true;
    }
    let mut depth: i64 = if symlink {
        path.components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .count() as i64
            - 1
    } else {
        0
    };
    for c in target.components() {
        match c {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return true;
        }
    }
    false
}

/// Finds `problem.yaml` or `data/` at the root or inside a single top-level folder.
fn find_root(names: &BTreeSet<Vec<String>>) -> Result<bool, String> {
    let has = |prefix: &[String], name: &str| {
        names
            .iter()
            .any(|n| n.len() > prefix.len() && n.starts_with(prefix) && n[prefix.len()] == name)
    };
    let yaml_at = |prefix: &[String]| {
        names.iter().any(|n| {
            n.len() == prefix.len() + 1
                && n.starts_with(prefix)
                && n[prefix.len()] == "problem.yaml"
        })
    };
    if yaml_at(&[]) || has(&[], "data") {
        return Ok(yaml_at(&[]));
    }
    let tops: BTreeSet<&String> = names.iter().filter_map(|n| n.first()).collect();
    if let [top] = tops.into_iter().collect::<Vec<_>>().as_slice() {
        let prefix = [(*top).clone()];
        if yaml_at(&prefix) || has(&prefix, "data") {
            return Ok(yaml_at(&prefix));
        }
    }
    Err("no problem.yaml or data/ at the archive root or inside a single top-level folder".into())
}

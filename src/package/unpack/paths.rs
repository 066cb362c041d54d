//! Entry names and link targets of an archive, checked before anything is written:
//! a path is a list of plain components below the package root, never absolute,
//! never `..`.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::package::error::UnpackRefusal;

/// A path relative to the package root made of plain components only.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct RelPath(Vec<OsString>);

impl RelPath {
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn to_path(&self) -> PathBuf {
        self.0.iter().collect()
    }

    /// Every proper ancestor, shortest first (`a`, `a/b` for `a/b/c`).
    pub(super) fn ancestors(&self) -> impl Iterator<Item = RelPath> + '_ {
        (1..self.0.len()).map(|n| RelPath(self.0[..n].to_vec()))
    }
}

/// The entry name as shown in errors.
pub(super) fn display(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An entry's own path: `./` prefixes are fine; absolute paths and `..` are refused.
pub(super) fn entry_path(bytes: &[u8]) -> Result<RelPath, UnpackRefusal> {
    let entry = display(bytes);
    let path = Path::new(OsStr::from_bytes(bytes));
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => parts.push(name.to_os_string()),
            Component::CurDir => {}
            Component::ParentDir => return Err(UnpackRefusal::ParentComponent { entry }),
            Component::RootDir | Component::Prefix(_) => {
                return Err(UnpackRefusal::AbsolutePath { entry });
            }
        }
    }
    Ok(RelPath(parts))
}

/// A hardlink's target: an earlier entry of the archive, named from the root.
pub(super) fn hardlink_target(entry: &str, target: &[u8]) -> Result<RelPath, UnpackRefusal> {
    let outside = || UnpackRefusal::LinkOutside {
        entry: entry.to_string(),
        target: display(target),
    };
    match entry_path(target) {
        Ok(path) if !path.is_empty() => Ok(path),
        _ => Err(outside()),
    }
}

/// A symlink's target is resolved later, on disk (links may chain); here only the
/// forms that can never stay inside are refused.
pub(super) fn symlink_target_is_plausible(target: &[u8]) -> bool {
    !target.is_empty() && !target.starts_with(b"/") && !target.contains(&0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_prefix_is_stripped() {
        let p = entry_path(b"./hello/problem.yaml").unwrap();
        assert_eq!(p.to_path(), PathBuf::from("hello/problem.yaml"));
        assert!(entry_path(b"./").unwrap().is_empty());
    }

    #[test]
    fn absolute_and_parent_are_refused() {
        assert!(matches!(
            entry_path(b"/etc/passwd"),
            Err(UnpackRefusal::AbsolutePath { .. })
        ));
        assert!(matches!(
            entry_path(b"a/../../x"),
            Err(UnpackRefusal::ParentComponent { .. })
        ));
        assert!(hardlink_target("x", b"../y").is_err());
        assert!(hardlink_target("x", b"/y").is_err());
        assert!(hardlink_target("x", b"").is_err());
    }

    #[test]
    fn ancestors_are_listed_shortest_first() {
        let p = entry_path(b"a/b/c").unwrap();
        let ancestors: Vec<PathBuf> = p.ancestors().map(|a| a.to_path()).collect();
        assert_eq!(ancestors, [PathBuf::from("a"), PathBuf::from("a/b")]);
    }
}

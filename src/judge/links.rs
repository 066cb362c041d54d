//! Symlink stubs: a repository checked out without symlink support (git's
//! `core.symlinks=false`, some archivers) turns a symlinked test file into a
//! small regular file holding only the link's target, e.g. `../subtask1/1.in`.
//! problemtools sees real symlinks there, so the judge follows such stubs.

use std::path::{Path, PathBuf};

use crate::package::{Problem, TestGroup, TestItem};

/// A stub is no bigger than a path.
const STUB_MAX: u64 = 1024;
/// Chains of stubs are followed this far.
const MAX_HOPS: usize = 8;

/// What `path` stands for: the file a stub names (transitively), else itself.
/// A stub must name, by a relative path, an existing regular file inside
/// `root` with the same extension.
pub(crate) fn resolve(path: &Path, root: &Path) -> PathBuf {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_HOPS {
        match stub_target(&current, root) {
            Some(next) => current = next,
            None => break,
        }
    }
    current
}

fn stub_target(path: &Path, root: &Path) -> Option<PathBuf> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() == 0 || meta.len() > STUB_MAX {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    if text.starts_with('/') || text.contains(['\n', '\r', '\0', ' ']) {
        return None;
    }
    let target = path.parent()?.join(text);
    if target.extension() != path.extension() || !target.is_file() {
        return None;
    }
    let real = target.canonicalize().ok()?;
    let root = root.canonicalize().ok()?;
    real.starts_with(&root).then_some(real)
}

/// The problem with every test's input and answer resolved through stubs.
pub(crate) fn resolve_stubs(problem: &Problem) -> Problem {
    let mut resolved = problem.clone();
    resolve_group(&mut resolved.data, &problem.root);
    resolved
}

fn resolve_group(group: &mut TestGroup, root: &Path) {
    for item in &mut group.items {
        match item {
            TestItem::Case(case) => {
                case.input = resolve(&case.input, root);
                case.answer = resolve(&case.answer, root);
            }
            TestItem::Group(sub) => resolve_group(sub, root),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn stubs_are_followed_inside_the_package_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("data/a")).unwrap();
        std::fs::create_dir_all(root.join("data/b")).unwrap();
        std::fs::write(root.join("data/a/1.in"), "5\n1 2 3 4 5\n").unwrap();
        std::fs::write(root.join("data/b/1.in"), "../a/1.in").unwrap();
        std::fs::write(root.join("data/b/2.in"), "../b/1.in").unwrap();
        std::fs::write(root.join("data/b/3.in"), "../a/missing.in").unwrap();
        std::fs::write(root.join("data/b/4.in"), "../a/1.ans").unwrap();
        std::fs::write(root.join("data/b/5.in"), "../../../etc/hostname.in").unwrap();
        let real = root.join("data/a/1.in").canonicalize().unwrap();
        assert_eq!(resolve(&root.join("data/b/1.in"), root), real);
        assert_eq!(resolve(&root.join("data/b/2.in"), root), real, "chains");
        for plain in ["data/a/1.in", "data/b/3.in", "data/b/4.in", "data/b/5.in"] {
            assert_eq!(
                resolve(&root.join(plain), root),
                root.join(plain),
                "{plain}"
            );
        }
    }
}

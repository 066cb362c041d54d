//! Symlink stubs: a repository checked out without symlink support (git's
//! `core.symlinks=false`, some archivers) turns a symlinked test file into a
//! small regular file holding only the link's target, e.g. `../subtask1/1.in`
//! (as `../shared/problems/oddecho/data/secret/subtask2/1.in`). problemtools sees
//! real symlinks there, so the parser follows a stub as the symlink it stands for,
//! under the same containment rule: what it names must lie inside the package.

use std::fs;
use std::path::{Component, Path, PathBuf};

/// A stub is no bigger than a path.
const STUB_MAX: u64 = 1024;

/// What a test file says about itself.
#[derive(Debug, PartialEq)]
pub(super) enum Stub {
    /// Not stub-shaped: test data.
    Data,
    /// Stub-shaped, and the path it holds stays inside the package: `target` is
    /// that path joined to the stub's directory (not yet resolved).
    Inside { text: String, target: PathBuf },
    /// Stub-shaped, and the path it holds leaves the package (absolute, or too
    /// many `..`). Decided on the text alone, so nothing outside is ever probed.
    Outside { text: String },
}

/// Reads `path` (a canonical file inside the canonical `root`) as a possible
/// stub. Stub-shaped means: a regular file of at most 1 KiB whose whole content
/// (no newline: git writes none, and test data nearly always ends with one) is a
/// path without whitespace or control characters ending in the file's own
/// extension (`.in` names an `.in`).
pub(super) fn read(path: &Path, root: &Path) -> Stub {
    let Some(text) = stub_text(path) else {
        return Stub::Data;
    };
    let own = path.extension();
    if own.is_none() || Path::new(&text).extension() != own {
        return Stub::Data;
    }
    let Some(dir) = path.parent() else {
        return Stub::Data;
    };
    match normalize(&dir.join(&text)) {
        Some(target) if target.starts_with(root) && target != root => Stub::Inside { text, target },
        _ => Stub::Outside { text },
    }
}

fn stub_text(path: &Path) -> Option<String> {
    let meta = fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() == 0 || meta.len() > STUB_MAX {
        return None;
    }
    let text = String::from_utf8(fs::read(path).ok()?).ok()?;
    let path_like = !text.ends_with('/')
        && text
            .chars()
            .all(|c| !c.is_whitespace() && !c.is_control() && c != '\\');
    path_like.then_some(text)
}

/// `path` with `.` and `..` applied lexically; `None` when `..` climbs past `/`.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::RootDir | Component::Prefix(_) => out.push(component),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(name) => out.push(name),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn stub(root: &Path, rel: &str, content: &str) -> Stub {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, content).unwrap();
        read(&path, root)
    }

    #[test]
    fn stub_shapes() {
        let dir = tempfile::tempdir().unwrap();
        let root = &dir.path().canonicalize().unwrap().join("pkg");
        let inside = |text: &str, target: &str| Stub::Inside {
            text: text.to_string(),
            target: root.join(target),
        };
        let outside = |text: &str| Stub::Outside {
            text: text.to_string(),
        };
        let b = "data/secret/b";
        assert_eq!(
            stub(root, "data/secret/b/1.in", "../a/1.in"),
            inside("../a/1.in", "data/secret/a/1.in")
        );
        assert_eq!(
            stub(root, "data/secret/b/2.ans", "./1.ans"),
            inside("./1.ans", &format!("{b}/1.ans"))
        );
        for data in ["../a/1.in\n", "1 2.in", "../a/1.ans", "", "../a/", "5"] {
            assert_eq!(
                stub(root, "data/secret/b/3.in", data),
                Stub::Data,
                "{data:?}"
            );
        }
        assert_eq!(stub(root, "data/secret/b/4", "../a/4"), Stub::Data);
        assert_eq!(
            stub(
                root,
                "data/secret/b/5.in",
                &format!("{}1.in", "./".repeat(600))
            ),
            Stub::Data,
            "over 1 KiB"
        );
        for escape in ["../../../../x.in", "/etc/x.in", "../../../../pkg2/x.in"] {
            assert_eq!(
                stub(root, "data/secret/b/6.in", escape),
                outside(escape),
                "{escape}"
            );
        }
    }
}

//! Symlink resolution inside an unpacked tree, step by step as the kernel does it,
//! refusing the moment a step would leave the root.
//!
//! Checking a link's target lexically is not enough: with `d/l -> ../..` (inside),
//! `x -> d/l/..` looks inside on paper but resolves to the root's parent. And
//! `canonicalize` is not enough either: `../<tmpname>/f` leaves the temporary
//! directory and comes back into it, which would dangle (or worse, point into
//! another cache entry) once the tree is renamed into place.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs;
use std::path::{Component, Path, PathBuf};

/// How many links one resolution may follow (the kernel's `MAXSYMLINKS`).
const MAX_HOPS: u32 = 40;

enum Step {
    Parent,
    Name(OsString),
}

fn push_front_components(pending: &mut VecDeque<Step>, path: &Path) -> Result<(), ()> {
    let mut steps = Vec::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => steps.push(Step::Parent),
            Component::Normal(name) => steps.push(Step::Name(name.to_os_string())),
            Component::RootDir | Component::Prefix(_) => return Err(()),
        }
    }
    for step in steps.into_iter().rev() {
        pending.push_front(step);
    }
    Ok(())
}

/// Resolves `rel` (relative to `root`) following every symlink on the way. Returns
/// the resolved path relative to `root`, or `Err(())` when a step leaves `root`, a
/// link is absolute, a component does not exist, or there are too many links.
pub(super) fn resolve_inside(root: &Path, rel: &Path) -> Result<PathBuf, ()> {
    let mut pending = VecDeque::new();
    push_front_components(&mut pending, rel)?;
    let mut current: Vec<OsString> = Vec::new();
    let mut hops = 0;
    while let Some(step) = pending.pop_front() {
        let name = match step {
            Step::Parent => {
                current.pop().ok_or(())?;
                continue;
            }
            Step::Name(name) => name,
        };
        current.push(name);
        let full = root.join(current.iter().collect::<PathBuf>());
        let meta = fs::symlink_metadata(&full).map_err(|_| ())?;
        if meta.file_type().is_symlink() {
            hops += 1;
            if hops > MAX_HOPS {
                return Err(());
            }
            let target = fs::read_link(&full).map_err(|_| ())?;
            current.pop();
            push_front_components(&mut pending, &target)?;
        } else if !meta.is_dir() && !pending.is_empty() {
            return Err(());
        }
    }
    Ok(current.iter().collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn chains_that_leave_the_root_are_caught() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("d/e")).unwrap();
        fs::write(root.join("f"), "x").unwrap();
        symlink("../..", root.join("d/e/l")).unwrap();
        symlink("d/e/l/f", root.join("ok")).unwrap();
        symlink("d/e/l/..", root.join("escape")).unwrap();
        symlink("loop", root.join("loop")).unwrap();
        assert_eq!(
            resolve_inside(root, Path::new("ok")),
            Ok(PathBuf::from("f"))
        );
        assert_eq!(resolve_inside(root, Path::new("escape")), Err(()));
        assert_eq!(resolve_inside(root, Path::new("loop")), Err(()));
        assert_eq!(resolve_inside(root, Path::new("missing")), Err(()));
        assert_eq!(resolve_inside(root, Path::new("f/x")), Err(()));
    }
}

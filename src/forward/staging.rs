//! The forwarder's staging directory, where A's packages are downloaded (and
//! checked against A's SHA-256) before they go to B: `<parent>/judge-runner-forward-<random>`,
//! removed when the forwarder ends.
//!
//! A forwarder killed with SIGKILL cannot remove its own, and its name is random,
//! so the next one could never find it by name (the chaos harness counted one
//! left behind per kill). Each holds an exclusive lock on a `.lock` file inside its
//! directory for its whole life; a starting forwarder removes every
//! `judge-runner-forward-*` directory of the same parent whose lock it can take
//! (its owner is dead), or that has no lock file and is older than a minute (its
//! owner died before making one, or is making it right now: hence the minute).

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

const PREFIX: &str = "judge-runner-forward-";
const LOCK: &str = ".lock";
/// How old a directory with no lock file must be before it counts as left behind.
const UNLOCKED_GRACE: Duration = Duration::from_secs(60);

/// A live forwarder's staging directory; removed on drop.
#[derive(Debug)]
pub(crate) struct Staging {
    dir: tempfile::TempDir,
    /// Held, never read: the lock lives as long as the file is open.
    _lock: File,
}

impl Staging {
    /// Removes what dead forwarders left in `parent`, then makes this one's.
    pub fn create(parent: &Path) -> io::Result<Staging> {
        for left in left_behind(parent) {
            match std::fs::remove_dir_all(&left) {
                Ok(()) => {
                    tracing::info!(path = %left.display(), "removed a dead forwarder's staging directory")
                }
                Err(err) => {
                    tracing::warn!(path = %left.display(), error = %err, "cannot remove a dead forwarder's staging directory")
                }
            }
        }
        let dir = tempfile::Builder::new().prefix(PREFIX).tempdir_in(parent)?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.path().join(LOCK))?;
        lock.try_lock().map_err(|e| match e {
            TryLockError::Error(err) => err,
            TryLockError::WouldBlock => io::Error::other("a fresh staging directory is locked"),
        })?;
        Ok(Staging { dir, _lock: lock })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// The staging directories in `parent` whose forwarder is gone.
fn left_behind(parent: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(PREFIX))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|dir| match File::open(dir.join(LOCK)) {
            // Taken: its owner is dead (the lock goes with the process). The
            // lock is dropped with the file at once.
            Ok(lock) => lock.try_lock().is_ok(),
            Err(_) => std::fs::metadata(dir)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .is_some_and(|age| age > UNLOCKED_GRACE),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_forwarders_directory_is_removed_a_live_ones_kept() {
        let parent = tempfile::tempdir().unwrap();
        let live = Staging::create(parent.path()).unwrap();
        // A dead one: a directory whose lock file nobody holds.
        let dead = parent.path().join(format!("{PREFIX}dead"));
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join(LOCK), b"").unwrap();
        std::fs::write(dead.join("package.tar.gz"), b"bytes").unwrap();
        // One being made right now: no lock file yet, young.
        let young = parent.path().join(format!("{PREFIX}young"));
        std::fs::create_dir(&young).unwrap();
        // Not ours.
        let other = parent.path().join("something-else");
        std::fs::create_dir(&other).unwrap();

        let next = Staging::create(parent.path()).unwrap();
        assert!(!dead.exists(), "a dead forwarder's directory was kept");
        assert!(
            live.path().is_dir(),
            "a live forwarder's directory was removed"
        );
        assert!(young.is_dir() && other.is_dir());
        let (live_path, next_path) = (live.path().to_path_buf(), next.path().to_path_buf());
        drop(live);
        drop(next);
        assert!(
            !live_path.exists() && !next_path.exists(),
            "removed on drop"
        );
    }
}

//! The daemon's work directory: compiled programs, boxes and built validators of
//! every slot live below `<temp dir>/judge-runner-work-<first box>`.
//!
//! A daemon killed with SIGKILL (or by a power cut) cannot remove what it was
//! working on; the next daemon with the same box ids finds it at a known place
//! and removes it before its first job. An exclusive lock on the `.lock` file
//! beside the directory, held for the daemon's life, keeps a second daemon with
//! the same box ids from removing a live daemon's work.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use super::RunnerError;

#[derive(Debug)]
pub(crate) struct WorkRoot {
    path: PathBuf,
    /// Held, never read: the lock lives as long as the file is open.
    _lock: File,
}

impl WorkRoot {
    /// Takes the work directory of the box ids starting at `first_box` in
    /// `base` (the temp dir when `None`), emptied of whatever an earlier daemon
    /// left there.
    pub fn claim(base: Option<&Path>, first_box: u32) -> Result<WorkRoot, RunnerError> {
        match base {
            Some(base) => Self::claim_in(base, first_box),
            None => Self::claim_in(&std::env::temp_dir(), first_box),
        }
    }

    fn claim_in(base: &Path, first_box: u32) -> Result<WorkRoot, RunnerError> {
        let path = base.join(format!("judge-runner-work-{first_box}"));
        let lock_path = base.join(format!("judge-runner-work-{first_box}.lock"));
        let io = |source| RunnerError::WorkDir {
            path: path.clone(),
            source,
        };
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(io)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(RunnerError::WorkDirBusy { path: lock_path });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        match std::fs::remove_dir_all(&path) {
            Ok(()) => {
                tracing::info!(path = %path.display(), "removed the work an earlier daemon left")
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        std::fs::create_dir_all(&path).map_err(io)?;
        Ok(WorkRoot { path, _lock: lock })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for WorkRoot {
    fn drop(&mut self) {
        // The lock file stays: removing it would let a daemon starting now lock
        // a file nobody else can see.
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot remove the work directory");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftovers_removed_and_second_claim_refused() -> Result<(), Box<dyn std::error::Error>> {
        let base = tempfile::tempdir()?;
        let left = base.path().join("judge-runner-work-7/judge-x/box");
        std::fs::create_dir_all(&left)?;
        std::fs::write(left.join("a.out"), b"old")?;

        let work = WorkRoot::claim_in(base.path(), 7)?;
        assert!(work.path().is_dir());
        assert!(!left.exists(), "an earlier daemon's work is removed");
        assert!(matches!(
            WorkRoot::claim_in(base.path(), 7),
            Err(RunnerError::WorkDirBusy { .. })
        ));
        let other = WorkRoot::claim_in(base.path(), 8)?;
        std::fs::write(work.path().join("f"), b"x")?;
        let path = work.path().to_path_buf();
        drop(work);
        assert!(!path.exists(), "a daemon's work goes with it");
        assert!(other.path().is_dir());
        let again = WorkRoot::claim_in(base.path(), 7)?;
        assert!(again.path().is_dir());
        Ok(())
    }
}

//! Host-wide ownership of box ids: one `flock`ed file per id, held for as long
//! as a process (a `daemon`, `judge`, `verify`) may use the id.
//!
//! A box id names a uid (60000 + id) and a cgroup (`<parent>/box-<id>`), both
//! shared by every process on the host. Two processes using one id at once fail
//! each other intermittently (a cgroup already in use, processes of the other's
//! uid), so every command that judges takes [`BoxLock::acquire`] on all the ids
//! it will use before its first run, and keeps the [`BoxLock`] until it exits:
//!
//! ```no_run
//! # use judge_runner::sandbox::BoxLock;
//! // a daemon with slots 300 and 301, validators on +500:
//! let ids = [300, 301, 800, 801];
//! let _held = BoxLock::acquire(ids, "daemon")?; // refused if any id is taken
//! # Ok::<(), judge_runner::sandbox::BoxLockError>(())
//! ```
//!
//! The files live in [`BoxLock::default_dir`] (`/run/judge-runner/boxes`, or
//! `$JUDGE_RUNNER_BOX_LOCKS` when set); each holds a line naming its holder
//! (`daemon pid 1234`), read back to say who holds an id when it is refused. A
//! process that dies drops its locks with its descriptors: nothing is stale.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

/// Environment variable naming another directory for the lock files (tests,
/// or a host where `/run` is not writable).
pub const BOX_LOCK_DIR_ENV: &str = "JUDGE_RUNNER_BOX_LOCKS";

/// Where the lock files live unless [`BOX_LOCK_DIR_ENV`] says otherwise.
pub const DEFAULT_BOX_LOCK_DIR: &str = "/run/judge-runner/boxes";

/// One box id somebody else holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoxHolder {
    pub id: u32,
    /// The holder's line (`daemon pid 1234`), or `an unknown process` when it
    /// has not written it yet.
    pub holder: String,
}

#[derive(Debug, thiserror::Error)]
pub enum BoxLockError {
    /// Some of the ids are held by another process; none were taken.
    #[error(
        "box ids {} are in use ({}): choose other box ids",
        list_ids(held),
        list_holders(held)
    )]
    Busy { held: Vec<BoxHolder> },
    #[error("box lock {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

fn list_ids(held: &[BoxHolder]) -> String {
    held.iter()
        .map(|h| h.id.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn list_holders(held: &[BoxHolder]) -> String {
    held.iter()
        .map(|h| format!("{} held by {}", h.id, h.holder))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Box ids held by this process; dropping it releases them.
#[derive(Debug)]
pub struct BoxLock {
    /// (id, its locked file), ascending by id.
    held: Vec<(u32, File)>,
}

impl BoxLock {
    /// `$JUDGE_RUNNER_BOX_LOCKS` when set and not empty, else `/run/judge-runner/boxes`.
    pub fn default_dir() -> PathBuf {
        match std::env::var_os(BOX_LOCK_DIR_ENV) {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => PathBuf::from(DEFAULT_BOX_LOCK_DIR),
        }
    }

    /// Locks every id in `ids` in [`BoxLock::default_dir`], or none of them.
    /// `holder` names the command (`daemon`, `judge`, `verify`); the pid is added.
    pub fn acquire(
        ids: impl IntoIterator<Item = u32>,
        holder: &str,
    ) -> Result<BoxLock, BoxLockError> {
        Self::acquire_in(&Self::default_dir(), ids, holder)
    }

    /// [`BoxLock::acquire`] with the lock files in `dir` (created when missing).
    pub fn acquire_in(
        dir: &Path,
        ids: impl IntoIterator<Item = u32>,
        holder: &str,
    ) -> Result<BoxLock, BoxLockError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| BoxLockError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let mut ids: Vec<u32> = ids.into_iter().collect();
        ids.sort_unstable();
        ids.dedup();
        let line = format!("{holder} pid {}\n", std::process::id());
        let mut held = Vec::with_capacity(ids.len());
        let mut busy = Vec::new();
        for id in ids {
            let path = dir.join(format!("box-{id}.lock"));
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(io(&path))?;
            match file.try_lock() {
                Ok(()) => {
                    // Who holds it, for the refusal of the next one asking.
                    file.set_len(0)
                        .and_then(|()| file.rewind())
                        .and_then(|()| file.write_all(line.as_bytes()))
                        .map_err(io(&path))?;
                    held.push((id, file));
                }
                Err(TryLockError::WouldBlock) => {
                    let mut text = String::new();
                    let holder = match file.read_to_string(&mut text) {
                        Ok(_) if !text.trim().is_empty() => text.trim().to_string(),
                        _ => "an unknown process".to_string(),
                    };
                    busy.push(BoxHolder { id, holder });
                }
                Err(TryLockError::Error(e)) => return Err(io(&path)(e)),
            }
        }
        if busy.is_empty() {
            Ok(BoxLock { held })
        } else {
            // `held` drops here: none of the ids stay taken.
            Err(BoxLockError::Busy { held: busy })
        }
    }

    /// The ids held, ascending.
    pub fn ids(&self) -> Vec<u32> {
        self.held.iter().map(|(id, _)| *id).collect()
    }
}

impl Drop for BoxLock {
    fn drop(&mut self) {
        // The files stay (removing one would let a process starting now lock a
        // file nobody else sees); an empty file is a free id.
        for (_, file) in &self.held {
            let _ = file.set_len(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_ranges_refused_naming_the_ids() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let first = BoxLock::acquire_in(dir.path(), [300, 301, 800, 801], "daemon")?;
        assert_eq!(first.ids(), vec![300, 301, 800, 801]);
        let refused = BoxLock::acquire_in(dir.path(), [301, 302, 801, 802], "judge");
        let Err(BoxLockError::Busy { held }) = refused else {
            panic!("an overlapping range is refused: {refused:?}");
        };
        assert_eq!(
            held.iter().map(|h| h.id).collect::<Vec<_>>(),
            vec![301, 801]
        );
        let me = format!("daemon pid {}", std::process::id());
        assert!(held.iter().all(|h| h.holder == me), "{held:?}");
        let message = BoxLockError::Busy { held }.to_string();
        assert!(message.contains("301, 801"), "{message}");
        assert!(message.contains(&me), "{message}");

        // Nothing of the refused range stayed taken: 302 and 802 are free.
        let free = BoxLock::acquire_in(dir.path(), [302, 802], "judge")?;
        drop(free);
        drop(first);
        let again = BoxLock::acquire_in(dir.path(), [300, 301, 302], "verify")?;
        assert_eq!(again.ids(), vec![300, 301, 302]);
        Ok(())
    }
}

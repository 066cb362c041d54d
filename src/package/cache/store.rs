//! The cache directory on disk and the blocking operations on it. Shared by every
//! process that opens the same root, so all coordination goes through files:
//!
//! ```text
//! ROOT/<sha256>/                    an entry: the unpacked package, with
//! ROOT/<sha256>/.judge-runner-complete   its marker, written into the staged tree
//!                                   before the one rename that makes it visible
//! ROOT/tmp/<sha256>.<kind>.<pid>.<n> downloads, staging trees, evicted entries
//! ROOT/locks/<sha256>.lock          flock: shared = entry in use (a pin),
//!                                   exclusive = being installed or evicted
//! ROOT/locks/evict.lock             one eviction pass at a time
//! ```
//!
//! A process that dies drops its flocks, so anything in `tmp/` or any entry
//! without a marker whose lock can be taken is garbage.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::SystemTime;

use crate::package::error::PackageError;
use crate::package::hash::is_sha256_hex;

pub(super) const MARKER: &str = ".judge-runner-complete";

/// A lock file held open: dropping it releases the flock.
pub(super) struct Lock(pub File);

#[derive(Debug)]
pub(super) struct Store {
    pub root: PathBuf,
    /// Deletions still running in the background; joined when the store goes.
    discards: Mutex<Vec<JoinHandle<()>>>,
}

/// A complete entry as eviction sees it.
pub(super) struct EntryInfo {
    pub sha256: String,
    pub bytes: u64,
    pub last_used: SystemTime,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Store {
    /// Creates the layout if needed.
    pub fn open(root: &Path) -> Result<Store, PackageError> {
        for dir in [root.to_path_buf(), root.join("tmp"), root.join("locks")] {
            fs::create_dir_all(&dir).map_err(|e| PackageError::io("create", &dir, e))?;
        }
        Ok(Store {
            root: root.to_path_buf(),
            discards: Mutex::new(Vec::new()),
        })
    }

    pub fn entry_dir(&self, sha: &str) -> PathBuf {
        self.root.join(sha)
    }

    pub fn marker(&self, sha: &str) -> PathBuf {
        self.entry_dir(sha).join(MARKER)
    }

    pub fn is_complete(&self, sha: &str) -> bool {
        self.marker(sha).is_file()
    }

    /// A fresh path in `tmp/` attributed to `sha` (so start-up cleanup knows
    /// whose lock guards it).
    pub fn temp_path(&self, sha: &str, kind: &str) -> PathBuf {
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        self.root
            .join("tmp")
            .join(format!("{sha}.{kind}.{}.{n}", std::process::id()))
    }

    fn lock_file(&self, name: &str) -> Result<File, PackageError> {
        let path = self.root.join("locks").join(name);
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| PackageError::io("open lock", &path, e))
    }

    /// Waits for the exclusive lock of `name`.
    pub fn lock_exclusive(&self, name: &str) -> Result<Lock, PackageError> {
        let file = self.lock_file(name)?;
        file.lock()
            .map_err(|e| PackageError::io("lock", self.root.join("locks").join(name), e))?;
        Ok(Lock(file))
    }

    /// The exclusive lock of `name` if nobody holds any lock on it.
    pub fn try_lock_exclusive(&self, name: &str) -> Result<Option<Lock>, PackageError> {
        let file = self.lock_file(name)?;
        Ok(file.try_lock().is_ok().then_some(Lock(file)))
    }

    /// A shared lock of `name` unless somebody holds it exclusively.
    pub fn try_lock_shared(&self, name: &str) -> Result<Option<Lock>, PackageError> {
        let file = self.lock_file(name)?;
        Ok(file.try_lock_shared().is_ok().then_some(Lock(file)))
    }

    /// Marks a staged tree complete: the marker records its size, its mtime the
    /// last use. A file of that name the archive brought is replaced, never
    /// followed (`O_NOFOLLOW` + `O_EXCL`).
    pub fn write_marker(&self, tree: &Path, bytes: u64) -> Result<(), PackageError> {
        let path = tree.join(MARKER);
        remove_any(&path).map_err(|e| PackageError::io("replace", &path, e))?;
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| PackageError::io("create", &path, e))?;
        writeln!(file, "{{\"bytes\": {bytes}}}").map_err(|e| PackageError::io("write", &path, e))
    }

    /// Makes the renames in the cache root durable.
    pub fn sync_root(&self) -> Result<(), PackageError> {
        File::open(&self.root)
            .and_then(|d| d.sync_all())
            .map_err(|e| PackageError::io("sync", &self.root, e))
    }

    /// Records a use of the entry (its marker's mtime), for LRU eviction.
    pub fn touch(&self, sha: &str) {
        let path = self.marker(sha);
        let touched = OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(SystemTime::now()));
        if let Err(err) = touched {
            tracing::warn!(path = %path.display(), %err, "cannot record use of cache entry");
        }
    }

    /// Every complete entry with its size and last use.
    pub fn complete_entries(&self) -> Vec<EntryInfo> {
        let Ok(read) = fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in read.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !is_sha256_hex(&name) {
                continue;
            }
            let marker = self.marker(&name);
            let Ok(meta) = fs::metadata(&marker) else {
                continue;
            };
            out.push(EntryInfo {
                bytes: read_marker_bytes(&marker),
                last_used: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                sha256: name,
            });
        }
        out
    }

    /// Moves `path` into `tmp/` (one rename: it disappears at once) and deletes it
    /// on a thread of its own, holding `lock` until it is gone: deleting a tree of
    /// many files can take seconds, and nobody should wait for it.
    pub fn discard_in_background(
        &self,
        sha: &str,
        path: &Path,
        lock: Lock,
    ) -> Result<(), PackageError> {
        let grave = self.temp_path(sha, "discard");
        fs::rename(path, &grave).map_err(|e| PackageError::io("move away", path, e))?;
        let spawned = std::thread::Builder::new()
            .name("cache-discard".into())
            .spawn(move || {
                remove_quietly(&grave);
                drop(lock);
            });
        match spawned {
            Ok(handle) => {
                let mut discards = self.discards.lock().unwrap_or_else(PoisonError::into_inner);
                discards.retain(|h| !h.is_finished());
                discards.push(handle);
            }
            // Without a thread the tree stays in tmp/ until the next start-up cleanup.
            Err(err) => tracing::warn!(%err, "cannot start a thread to delete an evicted entry"),
        }
        Ok(())
    }

    /// Moves `path` into `tmp/` (one rename: it disappears at once) and deletes it.
    pub fn discard(&self, sha: &str, path: &Path) -> Result<(), PackageError> {
        let grave = self.temp_path(sha, "discard");
        fs::rename(path, &grave).map_err(|e| PackageError::io("move away", path, e))?;
        remove_any(&grave).map_err(|e| PackageError::io("remove", &grave, e))
    }

    /// Start-up: removes what dead processes left (temporary files, entries without
    /// their marker) and keeps complete entries. Items another live process is
    /// working on are locked, and left alone.
    pub fn clean_up(&self) -> Result<(), PackageError> {
        let tmp = self.root.join("tmp");
        let read = fs::read_dir(&tmp).map_err(|e| PackageError::io("list", &tmp, e))?;
        for item in read.filter_map(Result::ok) {
            let name = item.file_name().to_string_lossy().into_owned();
            let sha = name.split('.').next().unwrap_or_default().to_string();
            let _lock = if is_sha256_hex(&sha) {
                match self.try_lock_exclusive(&format!("{sha}.lock"))? {
                    Some(lock) => lock,
                    None => continue,
                }
            } else {
                continue;
            };
            let path = item.path();
            if let Err(err) = remove_any(&path) {
                tracing::warn!(path = %path.display(), %err, "cannot remove temporary file");
            }
        }
        self.clean_incomplete_entries()
    }

    fn clean_incomplete_entries(&self) -> Result<(), PackageError> {
        let read = fs::read_dir(&self.root).map_err(|e| PackageError::io("list", &self.root, e))?;
        for item in read.filter_map(Result::ok) {
            let sha = item.file_name().to_string_lossy().into_owned();
            if !is_sha256_hex(&sha) || self.is_complete(&sha) {
                continue;
            }
            let Some(_lock) = self.try_lock_exclusive(&format!("{sha}.lock"))? else {
                continue;
            };
            if !self.is_complete(&sha) {
                tracing::info!(%sha, "removing incomplete cache entry");
                self.discard(&sha, &item.path())?;
            }
        }
        Ok(())
    }
}

impl Drop for Store {
    /// A short-lived process (`package fetch`) finishes its deletions before it
    /// exits, rather than leaving half-deleted trees to the next start-up.
    fn drop(&mut self) {
        let discards = std::mem::take(
            self.discards
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for handle in discards {
            let _ = handle.join();
        }
    }
}

fn read_marker_bytes(marker: &Path) -> u64 {
    fs::read_to_string(marker)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|v| v.get("bytes").and_then(serde_json::Value::as_u64))
        .unwrap_or(0)
}

fn remove_any(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Removes a file or tree, logging instead of failing (cleanup on an error path).
pub(super) fn remove_quietly(path: &Path) {
    if let Err(err) = remove_any(path) {
        tracing::warn!(path = %path.display(), %err, "cannot remove");
    }
}

//! `packages-cache/<sha256>/`: each package downloaded once, checked against its
//! SHA-256 while streaming, unpacked atomically, kept within a size budget.
//!
//! Single flight: tasks of one process asking for one SHA-256 share one download
//! (a shared future); processes sharing the directory serialise on the entry's
//! file lock and find the entry complete once the first one is done. A returned
//! `CacheEntry` pins its entry (a shared file lock) until dropped: eviction only
//! removes entries whose lock it can take exclusively.

mod store;

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::future::{BoxFuture, FutureExt, Shared};

use super::error::PackageError;
use super::fetch::{Downloaded, ServerKey, download};
use super::hash::is_sha256_hex;
use super::parse::find_problem_root;
use super::unpack::{UnpackLimits, UnpackSummary, unpack_into};
use store::{Lock, Store, remove_quietly};

pub use super::fetch::FetchPolicy;

/// How often `get` re-installs an entry that another process evicted meanwhile.
const INSTALL_ROUNDS: u32 = 3;

type Flight = Shared<BoxFuture<'static, Result<(), PackageError>>>;

/// The package cache of a Runner. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Cache {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    budget: u64,
    limits: UnpackLimits,
    policy: FetchPolicy,
    client: reqwest::Client,
    /// Sent with downloads from its origin only.
    key: Option<ServerKey>,
    flights: Mutex<HashMap<String, Flight>>,
}

/// A complete cache entry, pinned (never evicted) while this value lives.
#[derive(Debug)]
pub struct CacheEntry {
    sha256: String,
    path: PathBuf,
    _pin: File,
}

impl CacheEntry {
    /// `packages-cache/<sha256>/`: the unpacked archive.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// Where `problem.yaml`/`data/` are: the entry, or its single top-level folder.
    pub fn problem_root(&self) -> Result<PathBuf, PackageError> {
        find_problem_root(&self.path)
    }
}

impl Cache {
    /// Opens (creating if needed) the cache at `root`, removing what crashed
    /// processes left behind, with the default download policy.
    pub fn open(
        root: &Path,
        size_budget: u64,
        limits: UnpackLimits,
    ) -> Result<Cache, PackageError> {
        Cache::open_with(root, size_budget, limits, FetchPolicy::default())
    }

    /// Like `open`, with a download policy (attempts, backoff, timeouts).
    pub fn open_with(
        root: &Path,
        size_budget: u64,
        limits: UnpackLimits,
        policy: FetchPolicy,
    ) -> Result<Cache, PackageError> {
        Cache::open_with_key(root, size_budget, limits, policy, None)
    }

    /// Like `open_with`, sending `key` as bearer token with the downloads from
    /// its origin (a Runner's key to its Server: `GET /api/packages/{sha256}`
    /// needs it), and with no other: a package URL on another origin is fetched
    /// without it.
    pub fn open_with_key(
        root: &Path,
        size_budget: u64,
        limits: UnpackLimits,
        policy: FetchPolicy,
        key: Option<ServerKey>,
    ) -> Result<Cache, PackageError> {
        let client = policy.client()?;
        let store = Store::open(root)?;
        store.clean_up()?;
        let cache = Cache {
            inner: Arc::new(Inner {
                store,
                budget: size_budget,
                limits,
                client,
                key,
                policy,
                flights: Mutex::new(HashMap::new()),
            }),
        };
        cache.inner.evict_to_budget(None)?;
        Ok(cache)
    }

    pub fn root(&self) -> &Path {
        &self.inner.store.root
    }

    /// The complete entries, with the bytes each holds.
    pub fn entries(&self) -> Vec<(String, u64)> {
        let mut entries: Vec<(String, u64)> = self
            .inner
            .store
            .complete_entries()
            .into_iter()
            .map(|e| (e.sha256, e.bytes))
            .collect();
        entries.sort();
        entries
    }

    /// The package with this SHA-256, downloaded from `url` unless cached. The
    /// entry stays pinned while the returned value lives.
    pub async fn get(&self, url: &str, sha256: &str) -> Result<CacheEntry, PackageError> {
        if !is_sha256_hex(sha256) {
            return Err(PackageError::BadSha256 {
                given: sha256.to_string(),
            });
        }
        let sha = sha256.to_ascii_lowercase();
        for _ in 0..INSTALL_ROUNDS {
            if let Some(entry) = self.pin(&sha).await? {
                return Ok(entry);
            }
            self.install_once(url, &sha).await?;
        }
        Err(PackageError::io(
            "keep",
            self.inner.store.entry_dir(&sha),
            std::io::Error::other("the entry was evicted as soon as it was installed"),
        ))
    }

    /// A pin on the entry if it is complete.
    async fn pin(&self, sha: &str) -> Result<Option<CacheEntry>, PackageError> {
        let inner = Arc::clone(&self.inner);
        let sha = sha.to_string();
        run_blocking(move || {
            let store = &inner.store;
            if !store.is_complete(&sha) {
                return Ok(None);
            }
            let Some(Lock(pin)) = store.try_lock_shared(&format!("{sha}.lock"))? else {
                return Ok(None); // being installed or evicted right now
            };
            if !store.is_complete(&sha) {
                return Ok(None);
            }
            store.touch(&sha);
            Ok(Some(CacheEntry {
                path: store.entry_dir(&sha),
                sha256: sha,
                _pin: pin,
            }))
        })
        .await
    }

    /// Installs the entry, sharing one installation among this process's tasks.
    /// The installation runs on its own task: a caller that gives up does not
    /// cancel it for the others.
    async fn install_once(&self, url: &str, sha: &str) -> Result<(), PackageError> {
        let flight = {
            let mut flights = self
                .inner
                .flights
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            flights
                .entry(sha.to_string())
                .or_insert_with(|| {
                    let inner = Arc::clone(&self.inner);
                    let (url, sha) = (url.to_string(), sha.to_string());
                    let task = tokio::spawn(async move {
                        // Removed however the installation ends (even by a panic),
                        // so a later `get` starts afresh.
                        let _landed = Landed {
                            inner: Arc::clone(&inner),
                            sha: sha.clone(),
                        };
                        inner.install(&url, &sha).await
                    });
                    task.map(|joined| joined.unwrap_or_else(|e| Err(join_error(e))))
                        .boxed()
                        .shared()
                })
                .clone()
        };
        flight.await
    }
}

/// Forgets a flight when its task ends.
struct Landed {
    inner: Arc<Inner>,
    sha: String,
}

impl Drop for Landed {
    fn drop(&mut self) {
        self.inner
            .flights
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.sha);
    }
}

impl Inner {
    /// Downloads, verifies and unpacks one entry under its exclusive lock, unless
    /// another process completed it while this one waited for the lock.
    async fn install(self: &Arc<Self>, url: &str, sha: &str) -> Result<(), PackageError> {
        let this = Arc::clone(self);
        let sha_owned = sha.to_string();
        let lock = run_blocking(move || {
            let lock = this.store.lock_exclusive(&format!("{sha_owned}.lock"))?;
            let dir = this.store.entry_dir(&sha_owned);
            if this.store.is_complete(&sha_owned) {
                return Ok(None);
            }
            if dir.exists() {
                this.store.discard(&sha_owned, &dir)?; // left by a crash
            }
            Ok(Some(lock))
        })
        .await?;
        let Some(lock) = lock else {
            return Ok(());
        };
        let archive = self.store.temp_path(sha, "download");
        let downloaded = download(
            &self.client,
            self.key.as_ref(),
            url,
            &archive,
            self.limits.max_unpacked,
            &self.policy,
        )
        .await;
        let this = Arc::clone(self);
        let (url, sha) = (url.to_string(), sha.to_string());
        run_blocking(move || {
            let result = downloaded.and_then(|d| this.finish_install(&url, &sha, &archive, &d));
            remove_quietly(&archive);
            drop(lock);
            result?;
            this.evict_to_budget(Some(&sha))
        })
        .await
    }

    /// Checks the digest, then stages, marks, flushes and renames the entry into
    /// place (`stage_and_rename`); a failed staging tree is removed.
    fn finish_install(
        &self,
        url: &str,
        sha: &str,
        archive: &Path,
        downloaded: &Downloaded,
    ) -> Result<(), PackageError> {
        if downloaded.sha256 != sha {
            return Err(PackageError::ChecksumMismatch {
                url: url.to_string(),
                expected: sha.to_string(),
                actual: downloaded.sha256.clone(),
            });
        }
        let staging = self.store.temp_path(sha, "unpack");
        std::fs::create_dir(&staging).map_err(|e| PackageError::io("create", &staging, e))?;
        let installed = self.stage_and_rename(archive, &staging, sha);
        if installed.is_err() {
            remove_quietly(&staging);
        }
        let summary = installed?;
        tracing::info!(
            %sha,
            downloaded = downloaded.bytes,
            bytes = summary.bytes,
            entries = summary.entries,
            "package cached"
        );
        Ok(())
    }

    /// Unpacks into `staging`, marks it complete, flushes everything to disk, then
    /// renames it into place: the entry appears complete, durably, or not at all.
    fn stage_and_rename(
        &self,
        archive: &Path,
        staging: &Path,
        sha: &str,
    ) -> Result<UnpackSummary, PackageError> {
        let summary = unpack_into(archive, staging, &self.limits)?;
        self.store.write_marker(staging, summary.bytes)?;
        File::open(staging)
            .and_then(|dir| nix::unistd::syncfs(&dir).map_err(std::io::Error::from))
            .map_err(|e| PackageError::io("flush", staging, e))?;
        let dest = self.store.entry_dir(sha);
        std::fs::rename(staging, &dest)
            .map_err(|e| PackageError::io("rename into place", &dest, e))?;
        self.store.sync_root()?;
        Ok(summary)
    }

    /// Evicts least recently used entries until the cache fits its budget, never
    /// `keep` nor an entry somebody pinned.
    fn evict_to_budget(&self, keep: Option<&str>) -> Result<(), PackageError> {
        let _pass = self.store.lock_exclusive("evict.lock")?;
        let mut entries = self.store.complete_entries();
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        if total <= self.budget {
            return Ok(());
        }
        entries.sort_by_key(|e| e.last_used);
        for entry in entries {
            if total <= self.budget {
                break;
            }
            if Some(entry.sha256.as_str()) == keep {
                continue;
            }
            let Some(lock) = self
                .store
                .try_lock_exclusive(&format!("{}.lock", entry.sha256))?
            else {
                continue; // pinned by a job
            };
            if !self.store.is_complete(&entry.sha256) {
                continue;
            }
            let dir = self.store.entry_dir(&entry.sha256);
            self.store
                .discard_in_background(&entry.sha256, &dir, lock)?;
            total = total.saturating_sub(entry.bytes);
            tracing::info!(sha = %entry.sha256, bytes = entry.bytes, "evicted package");
        }
        if total > self.budget {
            tracing::warn!(
                total,
                budget = self.budget,
                "package cache over budget: entries in use"
            );
        }
        Ok(())
    }
}

async fn run_blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, PackageError> + Send + 'static,
) -> Result<T, PackageError> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(join_error(e)))
}

fn join_error(err: tokio::task::JoinError) -> PackageError {
    PackageError::io(
        "finish",
        PathBuf::from("package cache task"),
        std::io::Error::other(err.to_string()),
    )
}

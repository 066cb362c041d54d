//! Files under `--storage`: packages content-addressed at
//! `packages/<sha256>.tar.gz`, trial packages at `trials/<name>`, attachments at
//! `jobs/<job_id>/<name>`. Every file is written under a temporary name in
//! `tmp/` (same file system), synced, then renamed into place, so servers sharing
//! one storage directory (e.g. over NFS) never serve a partial file. Bytes are
//! streamed in and out, never held whole in memory.

use std::path::{Path, PathBuf};

use axum::body::{Body, Bytes};
use futures_util::{Stream, StreamExt as _};
use sha2::{Digest as _, Sha256};
use tempfile::TempPath;
use tokio::io::AsyncWriteExt as _;
use tokio_util::io::ReaderStream;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("cannot create storage directory {path}: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the upload is larger than the {limit}-byte limit")]
    TooLarge { limit: u64 },
    #[error("the request body could not be read: {detail}")]
    Body { detail: String },
}

impl StorageError {
    /// The file system under `--storage` is out of space (or quota).
    pub fn is_full(&self) -> bool {
        match self {
            StorageError::Create { source, .. } | StorageError::Write { source, .. } => matches!(
                source.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            ),
            _ => false,
        }
    }
}

/// An upload received into a temporary file (removed on drop unless placed).
#[derive(Debug)]
pub struct Received {
    pub temp: TempPath,
    pub sha256: String,
    pub size: u64,
}

#[derive(Debug, Clone)]
pub struct Storage {
    root: PathBuf,
}

const SUBDIRS: [&str; 4] = ["packages", "trials", "jobs", "tmp"];

impl Storage {
    /// Opens (creating when missing) the storage directory.
    pub async fn open(root: &Path) -> Result<Storage, StorageError> {
        for sub in SUBDIRS {
            let path = root.join(sub);
            tokio::fs::create_dir_all(&path)
                .await
                .map_err(|source| StorageError::Create { path, source })?;
        }
        Ok(Storage {
            root: root.to_path_buf(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn package_path(&self, sha256: &str) -> PathBuf {
        self.root.join("packages").join(format!("{sha256}.tar.gz"))
    }

    pub fn trial_package_path(&self, file: &str) -> PathBuf {
        self.root.join("trials").join(file)
    }

    pub fn job_file_path(&self, job_id: i64, name: &str) -> PathBuf {
        self.root.join("jobs").join(job_id.to_string()).join(name)
    }

    /// Streams a body into a temporary file, hashing as it goes; refuses more
    /// than `limit` bytes.
    pub async fn receive<S, E>(&self, stream: S, limit: u64) -> Result<Received, StorageError>
    where
        S: Stream<Item = Result<Bytes, E>>,
        E: std::fmt::Display,
    {
        let tmp_dir = self.root.join("tmp");
        let write_err = |source| StorageError::Write {
            path: tmp_dir.clone(),
            source,
        };
        let (file, temp) = tempfile::Builder::new()
            .prefix(".upload-")
            .tempfile_in(&tmp_dir)
            .map_err(write_err)?
            .into_parts();
        let mut file = tokio::fs::File::from_std(file);
        let mut hasher = Sha256::new();
        let mut size: u64 = 0;
        let mut stream = std::pin::pin!(stream);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| StorageError::Body {
                detail: e.to_string(),
            })?;
            size += chunk.len() as u64;
            if size > limit {
                drain(&mut stream, size).await;
                return Err(StorageError::TooLarge { limit });
            }
            hasher.update(&chunk);
            file.write_all(&chunk).await.map_err(write_err)?;
        }
        file.flush().await.map_err(write_err)?;
        file.sync_all().await.map_err(write_err)?;
        Ok(Received {
            temp,
            sha256: hex::encode(hasher.finalize()),
            size,
        })
    }

    /// Renames a received file into place (creating its directory), replacing
    /// what was there. Synchronous: callers may hold a database lock around it.
    pub fn place(temp: TempPath, dest: &Path) -> std::io::Result<()> {
        if let Some(dir) = dest.parent() {
            std::fs::create_dir_all(dir)?;
        }
        temp.persist(dest).map_err(|e| e.error)
    }

    /// Places a content-addressed file unless an identical one is already there.
    pub fn place_if_missing(temp: TempPath, dest: &Path) -> std::io::Result<()> {
        if dest.exists() {
            return Ok(()); // same digest, same bytes; `temp` is removed on drop
        }
        Self::place(temp, dest)
    }

    /// A file as a streamed body, with its length; `None` when it does not exist.
    pub async fn stream(path: &Path) -> Result<Option<(Body, u64)>, StorageError> {
        let read_err = |source| StorageError::Read {
            path: path.to_path_buf(),
            source,
        };
        let file = match tokio::fs::File::open(path).await {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(read_err(e)),
        };
        let len = file.metadata().await.map_err(read_err)?.len();
        Ok(Some((Body::from_stream(ReaderStream::new(file)), len)))
    }

    /// Removes a file that is no longer needed; a missing file is fine.
    pub async fn remove(path: &Path) {
        match tokio::fs::remove_file(path).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(path = %path.display(), error = %e, "cannot remove file"),
        }
    }
}

/// Bytes of an oversized upload read and dropped before answering 413: a client
/// still sending gets the answer instead of a reset connection. Past this, the
/// connection is dropped.
const DRAIN_AT_MOST: u64 = 64 << 20;

async fn drain<S, E>(stream: &mut std::pin::Pin<&mut S>, mut seen: u64)
where
    S: Stream<Item = Result<Bytes, E>>,
{
    let stop = seen.saturating_add(DRAIN_AT_MOST);
    while seen < stop {
        match stream.next().await {
            Some(Ok(chunk)) => seen += chunk.len() as u64,
            _ => return,
        }
    }
}

/// A lower-case 64-digit hex SHA-256: the only names `packages/` holds.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

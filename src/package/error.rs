//! `PackageError`: everything that can go wrong bringing a package to a judge, with
//! the stable reason string (`code()`) a Runner reports to `/failure` and whether
//! another attempt could succeed (`retryable()`).
//!
//! The strings equal `protocol::codes::reason::PACKAGE_*`; `package` does not import
//! `protocol` (see `lib.rs`), a unit test keeps them in step.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// The package bytes did not hash to the SHA-256 that was asked for (not retryable).
pub const CHECKSUM_MISMATCH: &str = "package.checksum_mismatch";
/// The package could not be brought into the cache: download or local I/O (retryable).
pub const FETCH_FAILED: &str = "package.fetch_failed";
/// The package is not a valid, safe problem package (not retryable).
pub const INVALID: &str = "package.invalid";

/// Why a package could not be used. Cheap to clone, so one failed download can be
/// handed to every task that waited for it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PackageError {
    #[error("package from {url} has SHA-256 {actual}, expected {expected}")]
    ChecksumMismatch {
        url: String,
        expected: String,
        actual: String,
    },

    #[error("could not download package from {url} ({attempts} attempt(s)): {failure}")]
    Fetch {
        url: String,
        attempts: u32,
        failure: FetchFailure,
    },

    #[error("invalid SHA-256 {given:?}: expected 64 hexadecimal digits")]
    BadSha256 { given: String },

    /// The archive holds something a package must not: refused before anything of
    /// it became visible.
    #[error("refused to unpack {archive}: {refusal}")]
    Unsafe {
        archive: PathBuf,
        refusal: UnpackRefusal,
    },

    /// The archive is not a readable `.tar.gz` (bad gzip, bad tar header, ...).
    #[error("cannot read archive {archive}: {detail}")]
    CorruptArchive { archive: PathBuf, detail: String },

    /// The package's content is not a valid problem package; `path` names the file.
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },

    /// Local I/O on the cache or a temporary directory failed (disk full, ...).
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: Arc<io::Error>,
    },
}

impl PackageError {
    /// The same error with a file path inside `root` made relative to it: errors of
    /// a package unpacked into a temporary directory name the file as it is in the
    /// archive, not where the archive happened to be unpacked.
    pub fn relative_to(self, root: &std::path::Path) -> Self {
        match self {
            PackageError::Invalid { path, reason } => {
                let path = match path.strip_prefix(root) {
                    Ok(rel) if rel.as_os_str().is_empty() => PathBuf::from("."),
                    Ok(rel) => rel.to_path_buf(),
                    Err(_) => path,
                };
                PackageError::Invalid { path, reason }
            }
            other => other,
        }
    }

    /// The stable reason string of the contract (`failure_reason` of a job).
    pub fn code(&self) -> &'static str {
        match self {
            PackageError::ChecksumMismatch { .. } => CHECKSUM_MISMATCH,
            // Bigger than this Runner may unpack: another attempt cannot help.
            PackageError::Fetch {
                failure: FetchFailure::TooLarge { .. },
                ..
            } => INVALID,
            PackageError::Fetch { .. } | PackageError::Io { .. } => FETCH_FAILED,
            PackageError::BadSha256 { .. }
            | PackageError::Unsafe { .. }
            | PackageError::CorruptArchive { .. }
            | PackageError::Invalid { .. } => INVALID,
        }
    }

    /// Whether another attempt (a later delivery of the job) could succeed.
    pub fn retryable(&self) -> bool {
        self.code() == FETCH_FAILED
    }

    /// Whether the local file system ran out of space (or quota) under the cache:
    /// the host's fault, not the job's. A Runner hands such work back instead of
    /// failing it, so a full disk never spends a job's deliveries.
    pub fn is_storage_full(&self) -> bool {
        matches!(self, PackageError::Io { source, .. }
            if matches!(source.kind(), io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded))
    }

    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        PackageError::Io {
            action,
            path: path.into(),
            source: Arc::new(source),
        }
    }

    pub(crate) fn invalid(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        PackageError::Invalid {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// Why a download failed after its retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchFailure {
    /// The server answered with this HTTP status.
    Status(u16),
    /// Connecting, or reading the body, failed.
    Transport(String),
    /// The body ended before the announced `Content-Length`.
    Truncated { expected: u64, received: u64 },
    /// The body grew past the most a package may unpack to.
    TooLarge { limit: u64 },
}

impl fmt::Display for FetchFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchFailure::Status(code) => write!(f, "HTTP status {code}"),
            FetchFailure::Transport(detail) => f.write_str(detail),
            FetchFailure::Truncated { expected, received } => {
                write!(f, "body truncated after {received} of {expected} bytes")
            }
            FetchFailure::TooLarge { limit } => {
                write!(f, "body larger than {limit} bytes (--max-unpacked)")
            }
        }
    }
}

/// What an archive held that unpacking refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnpackRefusal {
    AbsolutePath {
        entry: String,
    },
    ParentComponent {
        entry: String,
    },
    /// A symlink or hardlink whose target is absolute, escapes the package, or
    /// does not resolve to anything inside it.
    LinkOutside {
        entry: String,
        target: String,
    },
    /// A path that goes through a symlink of the archive (`dir -> x`, then `dir/f`).
    ThroughLink {
        entry: String,
    },
    /// Character or block device, fifo, GNU sparse file, or an unknown entry type.
    SpecialFile {
        entry: String,
        kind: String,
    },
    SetId {
        entry: String,
        mode: u32,
    },
    /// One entry is a directory here and something else there.
    Conflict {
        entry: String,
    },
    TooManyEntries {
        limit: u64,
    },
    TooLarge {
        limit: u64,
    },
    /// A PAX/GNU extension header that is oversized or contradicts its entry.
    BadExtension {
        entry: String,
        detail: String,
    },
}

impl fmt::Display for UnpackRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnpackRefusal::AbsolutePath { entry } => write!(f, "absolute path {entry:?}"),
            UnpackRefusal::ParentComponent { entry } => {
                write!(f, "path {entry:?} contains '..'")
            }
            UnpackRefusal::LinkOutside { entry, target } => write!(
                f,
                "link {entry:?} -> {target:?} does not resolve inside the package"
            ),
            UnpackRefusal::ThroughLink { entry } => {
                write!(f, "path {entry:?} goes through a symlink of the archive")
            }
            UnpackRefusal::SpecialFile { entry, kind } => {
                write!(
                    f,
                    "{kind} entry {entry:?} (only files, directories and links)"
                )
            }
            UnpackRefusal::SetId { entry, mode } => {
                write!(f, "setuid/setgid bit on {entry:?} (mode {mode:o})")
            }
            UnpackRefusal::Conflict { entry } => {
                write!(f, "entry {entry:?} conflicts with an earlier entry")
            }
            UnpackRefusal::TooManyEntries { limit } => {
                write!(f, "more than {limit} entries (raise --max-entries)")
            }
            UnpackRefusal::TooLarge { limit } => {
                write!(
                    f,
                    "unpacks to more than {limit} bytes (raise --max-unpacked)"
                )
            }
            UnpackRefusal::BadExtension { entry, detail } => {
                write!(f, "bad extension header at {entry:?}: {detail}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::codes::reason;

    #[test]
    fn codes_equal_the_protocol_reasons() {
        assert_eq!(CHECKSUM_MISMATCH, reason::PACKAGE_CHECKSUM_MISMATCH);
        assert_eq!(FETCH_FAILED, reason::PACKAGE_FETCH_FAILED);
        assert_eq!(INVALID, reason::PACKAGE_INVALID);
    }

    #[test]
    fn retryable_follows_the_code() {
        let mismatch = PackageError::ChecksumMismatch {
            url: "u".into(),
            expected: "a".into(),
            actual: "b".into(),
        };
        assert_eq!(mismatch.code(), CHECKSUM_MISMATCH);
        assert!(!mismatch.retryable());
        let fetch = PackageError::Fetch {
            url: "u".into(),
            attempts: 3,
            failure: FetchFailure::Status(503),
        };
        assert_eq!(fetch.code(), FETCH_FAILED);
        assert!(fetch.retryable());
        let invalid = PackageError::invalid("data/secret/1.in", "no answer file");
        assert_eq!(invalid.code(), INVALID);
        assert!(!invalid.retryable());
        assert_eq!(invalid.to_string(), "data/secret/1.in: no answer file");
    }

    #[test]
    fn storage_full_is_told_apart_from_other_local_errors() {
        let full = PackageError::io(
            "write",
            "/cache/x",
            io::Error::from_raw_os_error(libc::ENOSPC),
        );
        assert!(full.is_storage_full());
        assert!(full.retryable());
        let quota = PackageError::io(
            "write",
            "/cache/x",
            io::Error::from_raw_os_error(libc::EDQUOT),
        );
        assert!(quota.is_storage_full());
        let denied = PackageError::io(
            "write",
            "/cache/x",
            io::Error::from_raw_os_error(libc::EACCES),
        );
        assert!(!denied.is_storage_full());
        let fetch = PackageError::Fetch {
            url: "u".into(),
            attempts: 1,
            failure: FetchFailure::Status(507),
        };
        assert!(!fetch.is_storage_full());
    }
}

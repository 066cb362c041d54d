//! Safe `.tar.gz` extraction. Everything is written into a fresh directory that
//! only becomes the destination by one rename once the whole archive was accepted;
//! any refusal removes it, so nothing of a refused archive is ever visible.
//!
//! Refused: absolute paths, `..`, links that do not resolve inside the package,
//! paths through a link of the archive, devices, fifos, sparse and unknown entry
//! types, setuid/setgid bits, more than `max_entries` entries, more than
//! `max_unpacked` bytes (checked against each entry's declared size before it is
//! written, and on the decompressed stream itself, so a bomb stops at the limit).
//!
//! Extension headers (PAX, GNU long names) are read here rather than by the `tar`
//! crate, because the crate buffers them whole in memory whatever their size.

mod extract;
mod links;
mod paths;
mod stream;

use std::fs;
use std::path::Path;

use super::error::PackageError;

pub(crate) use extract::unpack_into;

/// Limits on what one package may unpack to (`--max-entries`, `--max-unpacked`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnpackLimits {
    /// Most entries (files, directories, links) an archive may hold.
    pub max_entries: u64,
    /// Most bytes its regular files may add up to.
    pub max_unpacked: u64,
}

impl Default for UnpackLimits {
    fn default() -> Self {
        UnpackLimits {
            max_entries: 100_000,
            max_unpacked: 4 << 30,
        }
    }
}

/// What an accepted archive unpacked to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UnpackSummary {
    /// Entries created (files, directories, links).
    pub entries: u64,
    /// Bytes of regular files written (hardlinked data counted once).
    pub bytes: u64,
}

/// Unpacks `tar_gz` to `dest`, which must not exist yet. `dest` appears complete
/// (one rename) or not at all.
pub fn unpack(
    tar_gz: &Path,
    dest: &Path,
    limits: &UnpackLimits,
) -> Result<UnpackSummary, PackageError> {
    if fs::symlink_metadata(dest).is_ok() {
        return Err(PackageError::io(
            "unpack into",
            dest,
            std::io::Error::from(std::io::ErrorKind::AlreadyExists),
        ));
    }
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = dest.file_name().map_or_else(
        || "package".to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{name}.partial-"))
        .tempdir_in(parent)
        .map_err(|e| PackageError::io("create a directory in", parent, e))?;
    let summary = unpack_into(tar_gz, staging.path(), limits)?;
    let staged = staging.keep();
    if let Err(err) = fs::rename(&staged, dest) {
        let _ = fs::remove_dir_all(&staged);
        return Err(PackageError::io("rename into place", dest, err));
    }
    Ok(summary)
}

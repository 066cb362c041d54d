//! A package from a local path: a directory is parsed in place, a `.tar.gz` is
//! unpacked (with the same refusals as the cache) into a temporary directory that
//! lives as long as the returned `LoadedPackage`.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use tempfile::TempDir;

use super::error::PackageError;
use super::parse::parse;
use super::problem::Problem;
use super::unpack::{UnpackLimits, unpack_into};

/// A parsed package; when it came from an archive, its unpacked files stay on disk
/// until this value is dropped.
#[derive(Debug)]
pub struct LoadedPackage {
    pub problem: Problem,
    unpacked: Option<TempDir>,
}

impl LoadedPackage {
    /// The temporary directory the archive was unpacked into, if it was one.
    pub fn unpacked_dir(&self) -> Option<&Path> {
        self.unpacked.as_ref().map(TempDir::path)
    }
}

/// Loads a package directory, or a `.tar.gz` (recognised by its gzip magic).
pub fn load(path: &Path, limits: &UnpackLimits) -> Result<LoadedPackage, PackageError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| PackageError::invalid(path, format!("cannot open: {e}")))?;
    if meta.is_dir() {
        return Ok(LoadedPackage {
            problem: parse(path)?,
            unpacked: None,
        });
    }
    if !is_gzip(path)? {
        return Err(PackageError::invalid(
            path,
            "neither a directory nor a .tar.gz (no gzip header)",
        ));
    }
    let dir = tempfile::Builder::new()
        .prefix("judge-runner-package-")
        .tempdir()
        .map_err(|e| {
            PackageError::io("create a temporary directory in", std::env::temp_dir(), e)
        })?;
    unpack_into(path, dir.path(), limits)?;
    Ok(LoadedPackage {
        problem: parse(dir.path()).map_err(|e| e.relative_to(dir.path()))?,
        unpacked: Some(dir),
    })
}

fn is_gzip(path: &Path) -> Result<bool, PackageError> {
    let mut magic = [0u8; 2];
    let mut file =
        File::open(path).map_err(|e| PackageError::invalid(path, format!("cannot open: {e}")))?;
    match file.read_exact(&mut magic) {
        Ok(()) => Ok(magic == [0x1f, 0x8b]),
        Err(_) => Ok(false),
    }
}

//! The extraction loop: one pass over the raw tar headers, files and directories
//! written as they come, hardlinks to earlier files, symlinks created last (so no
//! write can ever go through one) and then resolved one by one.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use tar::{Archive, Entry, EntryType, PaxExtensions};

use super::links::resolve_inside;
use super::paths::{self, RelPath};
use super::stream::Inflated;
use super::{UnpackLimits, UnpackSummary};
use crate::package::error::{PackageError, UnpackRefusal};

/// Largest PAX or GNU long-name header accepted (real ones are a few hundred bytes).
const MAX_EXTENSION: u64 = 1 << 20;
/// Room on the decompressed stream for headers, padding and extensions, on top of
/// `max_unpacked`: a tar header and its padding are at most ~2 KiB per entry.
const OVERHEAD_PER_ENTRY: u64 = 2048;
const OVERHEAD_FIXED: u64 = 16 << 20;
const WRITE_BUFFER: usize = 256 * 1024;

/// Unpacks `tar_gz` into the existing, empty directory `root`. On error `root` may
/// hold a partial tree: the caller removes it.
pub(crate) fn unpack_into(
    tar_gz: &Path,
    root: &Path,
    limits: &UnpackLimits,
) -> Result<UnpackSummary, PackageError> {
    let cap = limits
        .max_unpacked
        .saturating_add(limits.max_entries.saturating_mul(OVERHEAD_PER_ENTRY))
        .saturating_add(OVERHEAD_FIXED);
    let stream =
        Inflated::open(tar_gz, cap).map_err(|e| PackageError::io("open archive", tar_gz, e))?;
    let mut extractor = Extractor {
        archive: tar_gz,
        root,
        limits,
        summary: UnpackSummary::default(),
        headers: 0,
        dirs: HashSet::new(),
        symlinks: Vec::new(),
        buffer: vec![0; WRITE_BUFFER],
    };
    let mut archive = Archive::new(stream);
    let result = extractor.run(&mut archive);
    let crossed = archive.into_inner().cap_crossed();
    match result {
        Err(Failure::Io(_)) if crossed => Err(extractor.refuse(UnpackRefusal::TooLarge {
            limit: limits.max_unpacked,
        })),
        Err(failure) => Err(extractor.error(failure)),
        Ok(()) => {
            extractor.finish_links()?;
            fs::set_permissions(root, Permissions::from_mode(0o755))
                .map_err(|e| PackageError::io("set permissions of", root, e))?;
            Ok(extractor.summary)
        }
    }
}

/// Why the loop stopped, before it is given the archive's name.
enum Failure {
    Refused(UnpackRefusal),
    /// Reading the archive failed (corrupt gzip or tar).
    Io(io::Error),
    /// Writing the tree failed.
    Local(PackageError),
}

impl From<UnpackRefusal> for Failure {
    fn from(refusal: UnpackRefusal) -> Self {
        Failure::Refused(refusal)
    }
}

/// Extension headers seen since the last real entry.
#[derive(Default)]
struct Pending {
    long_name: Option<Vec<u8>>,
    long_link: Option<Vec<u8>>,
    pax: Option<Vec<u8>>,
}

struct Extractor<'a> {
    archive: &'a Path,
    root: &'a Path,
    limits: &'a UnpackLimits,
    summary: UnpackSummary,
    headers: u64,
    /// Directories known to be real directories of this tree (not links).
    dirs: HashSet<RelPath>,
    symlinks: Vec<(RelPath, PathBuf, String)>,
    buffer: Vec<u8>,
}

impl Extractor<'_> {
    fn refuse(&self, refusal: UnpackRefusal) -> PackageError {
        PackageError::Unsafe {
            archive: self.archive.to_path_buf(),
            refusal,
        }
    }

    fn error(&self, failure: Failure) -> PackageError {
        match failure {
            Failure::Refused(refusal) => self.refuse(refusal),
            Failure::Io(err) => PackageError::CorruptArchive {
                archive: self.archive.to_path_buf(),
                detail: err.to_string(),
            },
            Failure::Local(err) => err,
        }
    }

    fn run<R: Read>(&mut self, archive: &mut Archive<R>) -> Result<(), Failure> {
        let mut pending = Pending::default();
        for entry in archive.entries().map_err(Failure::Io)?.raw(true) {
            let mut entry = entry.map_err(Failure::Io)?;
            self.headers += 1;
            // Extension headers describe the next entry; allow a few per entry.
            if self.headers > self.limits.max_entries.saturating_mul(4).saturating_add(16) {
                return Err(UnpackRefusal::TooManyEntries {
                    limit: self.limits.max_entries,
                }
                .into());
            }
            match entry.header().entry_type() {
                EntryType::GNULongName => pending.long_name = Some(read_extension(&mut entry)?),
                EntryType::GNULongLink => pending.long_link = Some(read_extension(&mut entry)?),
                EntryType::XHeader => pending.pax = Some(read_extension(&mut entry)?),
                EntryType::XGlobalHeader => {
                    read_extension(&mut entry)?;
                }
                _ => self.entry(&mut entry, std::mem::take(&mut pending))?,
            }
        }
        Ok(())
    }

    fn entry<R: Read>(&mut self, entry: &mut Entry<'_, R>, ext: Pending) -> Result<(), Failure> {
        let name_bytes = entry_name(entry, &ext);
        let name = paths::display(&name_bytes);
        check_pax_size(entry, &ext, &name)?;
        let path = paths::entry_path(&name_bytes)?;
        self.summary.entries += 1;
        if self.summary.entries > self.limits.max_entries {
            return Err(UnpackRefusal::TooManyEntries {
                limit: self.limits.max_entries,
            }
            .into());
        }
        let mode = entry.header().mode().map_err(Failure::Io)?;
        if mode & 0o6000 != 0 {
            return Err(UnpackRefusal::SetId { entry: name, mode }.into());
        }
        let kind = entry.header().entry_type();
        match kind {
            EntryType::Regular | EntryType::Continuous => self.file(entry, &path, &name, mode),
            EntryType::Directory => self.directory(&path, &name),
            EntryType::Link => {
                let target = link_name(entry, &ext).unwrap_or_default();
                self.hardlink(&path, &name, &target)
            }
            EntryType::Symlink => {
                let target = link_name(entry, &ext).unwrap_or_default();
                self.defer_symlink(path, name, &target)
            }
            other => Err(UnpackRefusal::SpecialFile {
                entry: name,
                kind: kind_name(other),
            }
            .into()),
        }
    }

    /// Makes sure every ancestor of `path` is a real directory of the tree.
    fn parents(&mut self, path: &RelPath, name: &str) -> Result<(), Failure> {
        for ancestor in path.ancestors() {
            if self.dirs.contains(&ancestor) {
                continue;
            }
            self.make_dir(&ancestor, name)?;
        }
        Ok(())
    }

    fn make_dir(&mut self, dir: &RelPath, name: &str) -> Result<(), Failure> {
        let full = self.root.join(dir.to_path());
        match fs::symlink_metadata(&full) {
            Ok(meta) if meta.file_type().is_dir() => {}
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(UnpackRefusal::ThroughLink {
                    entry: name.to_string(),
                }
                .into());
            }
            Ok(_) => {
                return Err(UnpackRefusal::Conflict {
                    entry: name.to_string(),
                }
                .into());
            }
            Err(_) => {
                fs::create_dir(&full).map_err(|e| local("create directory", &full, e))?;
                fs::set_permissions(&full, Permissions::from_mode(0o755))
                    .map_err(|e| local("set permissions of", &full, e))?;
            }
        }
        self.dirs.insert(dir.clone());
        Ok(())
    }

    fn directory(&mut self, path: &RelPath, name: &str) -> Result<(), Failure> {
        if path.is_empty() {
            return Ok(());
        }
        self.parents(path, name)?;
        if !self.dirs.contains(path) {
            self.make_dir(path, name)?;
        }
        Ok(())
    }

    fn file<R: Read>(
        &mut self,
        entry: &mut Entry<'_, R>,
        path: &RelPath,
        name: &str,
        mode: u32,
    ) -> Result<(), Failure> {
        if path.is_empty() || self.dirs.contains(path) {
            return Err(UnpackRefusal::Conflict {
                entry: name.to_string(),
            }
            .into());
        }
        let declared = entry.size();
        if self.summary.bytes.saturating_add(declared) > self.limits.max_unpacked {
            return Err(UnpackRefusal::TooLarge {
                limit: self.limits.max_unpacked,
            }
            .into());
        }
        self.parents(path, name)?;
        let full = self.root.join(path.to_path());
        let perm = if mode & 0o111 != 0 { 0o755 } else { 0o644 };
        let mut out = create_file(&full, perm).map_err(|e| match e.raw_os_error() {
            Some(libc::EISDIR) | Some(libc::ELOOP) => Failure::Refused(UnpackRefusal::Conflict {
                entry: name.to_string(),
            }),
            _ => local("create", &full, e),
        })?;
        let written = copy(entry, &mut out, &mut self.buffer).map_err(|e| match e {
            CopyError::Read(e) => Failure::Io(e),
            CopyError::Write(e) => local("write", &full, e),
        })?;
        if written != declared {
            return Err(Failure::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{name}: archive ends inside this file"),
            )));
        }
        self.summary.bytes += written;
        Ok(())
    }

    fn hardlink(&mut self, path: &RelPath, name: &str, target: &[u8]) -> Result<(), Failure> {
        let target = paths::hardlink_target(name, target)?;
        let full_target = self.root.join(target.to_path());
        // No symlink exists yet, so the target's path cannot lead outside.
        match fs::symlink_metadata(&full_target) {
            Ok(meta) if meta.file_type().is_file() => {}
            _ => {
                return Err(UnpackRefusal::LinkOutside {
                    entry: name.to_string(),
                    target: target.to_path().display().to_string(),
                }
                .into());
            }
        }
        if path.is_empty() || self.dirs.contains(path) {
            return Err(UnpackRefusal::Conflict {
                entry: name.to_string(),
            }
            .into());
        }
        self.parents(path, name)?;
        let full = self.root.join(path.to_path());
        if full == full_target {
            return Ok(());
        }
        match fs::symlink_metadata(&full) {
            Ok(meta) if meta.file_type().is_file() => {
                fs::remove_file(&full).map_err(|e| local("replace", &full, e))?;
            }
            Ok(_) => {
                return Err(UnpackRefusal::Conflict {
                    entry: name.to_string(),
                }
                .into());
            }
            Err(_) => {}
        }
        fs::hard_link(&full_target, &full).map_err(|e| local("link", &full, e))
    }

    fn defer_symlink(&mut self, path: RelPath, name: String, target: &[u8]) -> Result<(), Failure> {
        if path.is_empty() || !paths::symlink_target_is_plausible(target) {
            return Err(UnpackRefusal::LinkOutside {
                entry: name,
                target: paths::display(target),
            }
            .into());
        }
        let target = PathBuf::from(OsStr::from_bytes(target));
        self.symlinks.push((path, target, name));
        Ok(())
    }

    /// Creates the symlinks, then checks each resolves to something inside.
    fn finish_links(&mut self) -> Result<(), PackageError> {
        let links = std::mem::take(&mut self.symlinks);
        for (path, target, name) in &links {
            self.parents(path, name).map_err(|f| self.error(f))?;
            let full = self.root.join(path.to_path());
            if fs::symlink_metadata(&full).is_ok() {
                return Err(self.refuse(UnpackRefusal::Conflict {
                    entry: name.clone(),
                }));
            }
            symlink(target, &full).map_err(|e| PackageError::io("create symlink", &full, e))?;
        }
        for (path, target, name) in &links {
            if resolve_inside(self.root, &path.to_path()).is_err() {
                return Err(self.refuse(UnpackRefusal::LinkOutside {
                    entry: name.clone(),
                    target: target.display().to_string(),
                }));
            }
        }
        Ok(())
    }
}

fn local(action: &'static str, path: &Path, err: io::Error) -> Failure {
    Failure::Local(PackageError::io(action, path, err))
}

fn read_extension<R: Read>(entry: &mut Entry<'_, R>) -> Result<Vec<u8>, Failure> {
    let name = paths::display(&entry.path_bytes());
    if entry.size() > MAX_EXTENSION {
        return Err(UnpackRefusal::BadExtension {
            entry: name,
            detail: format!("{} bytes", entry.size()),
        }
        .into());
    }
    let mut data = Vec::new();
    entry.read_to_end(&mut data).map_err(Failure::Io)?;
    Ok(data)
}

fn pax_value<'a>(pax: &'a [u8], key: &str) -> Option<&'a [u8]> {
    PaxExtensions::new(pax)
        .filter_map(Result::ok)
        .filter(|ext| ext.key_bytes() == key.as_bytes())
        .last()
        .map(|ext| ext.value_bytes())
}

fn strip_nul(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

/// The entry's name: PAX `path`, else a GNU long name, else the header's.
fn entry_name<R: Read>(entry: &Entry<'_, R>, ext: &Pending) -> Vec<u8> {
    if let Some(path) = ext.pax.as_deref().and_then(|p| pax_value(p, "path")) {
        return path.to_vec();
    }
    if let Some(long) = &ext.long_name {
        return strip_nul(long).to_vec();
    }
    entry.header().path_bytes().into_owned()
}

fn link_name<R: Read>(entry: &Entry<'_, R>, ext: &Pending) -> Option<Vec<u8>> {
    if let Some(path) = ext.pax.as_deref().and_then(|p| pax_value(p, "linkpath")) {
        return Some(path.to_vec());
    }
    if let Some(long) = &ext.long_link {
        return Some(strip_nul(long).to_vec());
    }
    entry.header().link_name_bytes().map(|b| b.into_owned())
}

/// A PAX `size` that disagrees with the header would make two readers see two
/// different archives; refuse rather than pick one.
fn check_pax_size<R: Read>(entry: &Entry<'_, R>, ext: &Pending, name: &str) -> Result<(), Failure> {
    let Some(value) = ext.pax.as_deref().and_then(|p| pax_value(p, "size")) else {
        return Ok(());
    };
    let parsed = std::str::from_utf8(value)
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    if parsed != Some(entry.size()) {
        return Err(UnpackRefusal::BadExtension {
            entry: name.to_string(),
            detail: format!(
                "PAX size {} differs from the header's",
                paths::display(value)
            ),
        }
        .into());
    }
    Ok(())
}

fn kind_name(kind: EntryType) -> String {
    match kind {
        EntryType::Char => "character device".into(),
        EntryType::Block => "block device".into(),
        EntryType::Fifo => "fifo".into(),
        EntryType::GNUSparse => "sparse file".into(),
        other => format!("type {:?}", other.as_byte() as char),
    }
}

fn create_file(path: &Path, perm: u32) -> io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(perm)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    // Explicit, whatever the umask: the sandboxed programs read these as another uid.
    file.set_permissions(Permissions::from_mode(perm))?;
    Ok(file)
}

enum CopyError {
    Read(io::Error),
    Write(io::Error),
}

fn copy(from: &mut impl Read, to: &mut File, buffer: &mut [u8]) -> Result<u64, CopyError> {
    let mut total = 0;
    loop {
        let n = match from.read(buffer) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CopyError::Read(e)),
        };
        to.write_all(&buffer[..n]).map_err(CopyError::Write)?;
        total += n as u64;
    }
}

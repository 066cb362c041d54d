//! Small file helpers shared by v1 and v2: each error names the file; counters
//! are read through kept-open descriptors without allocating per read; `flock`s
//! that make a slot's cgroup its own.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::sandbox::error::SandboxError;

pub(super) fn cgroup_err(step: &'static str, path: &Path, source: io::Error) -> SandboxError {
    SandboxError::Cgroup {
        step,
        path: path.to_path_buf(),
        source,
    }
}

pub(super) fn write_file(path: &Path, value: &str, step: &'static str) -> Result<(), SandboxError> {
    std::fs::write(path, value).map_err(|e| cgroup_err(step, path, e))
}

pub(super) fn read_string(path: &Path) -> Result<String, SandboxError> {
    std::fs::read_to_string(path).map_err(|e| cgroup_err("read", path, e))
}

/// Read a whole small file from offset 0 through a kept-open descriptor: one
/// `pread` (no seek, no size query), into a buffer kept between reads.
pub(super) fn read_text<'b>(file: &File, buf: &'b mut Vec<u8>) -> io::Result<&'b str> {
    buf.resize(buf.capacity().max(512), 0);
    let mut n = 0;
    loop {
        if n == buf.len() {
            buf.resize(n * 2, 0);
        }
        let got = file.read_at(buf.get_mut(n..).unwrap_or_default(), n as u64)?;
        if got == 0 {
            break;
        }
        n += got;
    }
    std::str::from_utf8(buf.get(..n).unwrap_or_default()).map_err(io::Error::other)
}

/// A number file (`memory.usage_in_bytes`, `cpuacct.usage`...) through its descriptor.
pub(super) fn read_u64(file: &File, buf: &mut Vec<u8>) -> io::Result<u64> {
    read_text(file, buf)?
        .trim()
        .parse()
        .map_err(io::Error::other)
}

/// Write `value` at offset 0 of a kept-open control file (one `pwrite`).
pub(super) fn rewrite(file: &File, value: &str) -> io::Result<()> {
    let n = file.write_at(value.as_bytes(), 0)?;
    if n == value.len() {
        Ok(())
    } else {
        Err(io::Error::other("short write"))
    }
}

/// The pids in a kept-open `cgroup.procs`.
pub(super) fn pids_of(file: &File, buf: &mut Vec<u8>) -> Vec<i32> {
    read_text(file, buf)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

pub(super) fn open_read(path: &Path) -> Result<File, SandboxError> {
    File::open(path).map_err(|e| cgroup_err("open", path, e))
}

pub(super) fn open_rw(path: &Path) -> Result<File, SandboxError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| cgroup_err("open", path, e))
}

pub(super) fn open_procs(dir: &Path) -> Result<OwnedFd, SandboxError> {
    open_for_joining(dir, "cgroup.procs")
}

/// A cgroup v1 hierarchy's `tasks`, for a single-threaded process to join by
/// writing `0`. The kernel moves one thread that is the writer itself without
/// taking the global threadgroup lock, whose write side waits for an RCU grace
/// period: here 0.04 ms against 11-15 ms per hierarchy through `cgroup.procs`
/// (BENCHMARKS.md). A process of one thread is the whole process.
pub(super) fn open_tasks(dir: &Path) -> Result<OwnedFd, SandboxError> {
    open_for_joining(dir, "tasks")
}

fn open_for_joining(dir: &Path, name: &str) -> Result<OwnedFd, SandboxError> {
    let path = dir.join(name);
    OpenOptions::new()
        .write(true)
        .open(&path)
        .map(OwnedFd::from)
        .map_err(|e| cgroup_err("open", &path, e))
}

/// `key value` lines (memory.events, memory.oom_control, cpu.stat).
pub(super) fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        if k == key {
            v.trim().parse().ok()
        } else {
            None
        }
    })
}

pub(super) fn pids_in(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// rmdir, retrying briefly: the kernel may still be releasing the last task.
pub(super) fn rmdir_retry(dir: &Path) -> Result<(), SandboxError> {
    let mut last = None;
    for attempt in 0..100u32 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(u64::from(attempt.min(10)) + 1));
    }
    Err(cgroup_err(
        "remove",
        dir,
        last.unwrap_or_else(|| io::Error::other("rmdir kept failing")),
    ))
}

/// Make `dir` and every missing ancestor up to (not including) `root`, calling
/// `on_new` on each directory created, top-down.
pub(super) fn create_chain(
    root: &Path,
    rel: &str,
    mut on_new: impl FnMut(&Path) -> Result<(), SandboxError>,
) -> Result<PathBuf, SandboxError> {
    let mut dir = root.to_path_buf();
    for comp in rel.split('/') {
        dir.push(comp);
        match std::fs::create_dir(&dir) {
            Ok(()) => on_new(&dir)?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(cgroup_err("create", &dir, e)),
        }
    }
    Ok(dir)
}

/// An exclusive lock on `dir`, waiting for it: creators and removers of a
/// parent's slots take turns, so a slot's directory is never seen half made.
pub(super) fn lock_parent(dir: &Path) -> Result<File, SandboxError> {
    let file = File::open(dir).map_err(|e| cgroup_err("open", dir, e))?;
    file.lock().map_err(|e| cgroup_err("lock", dir, e))?;
    Ok(file)
}

/// An exclusive lock on `dir` if nobody holds one (`None`: a live slot does).
pub(super) fn try_lock(dir: &Path) -> Result<Option<File>, SandboxError> {
    let file = File::open(dir).map_err(|e| cgroup_err("open", dir, e))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => Err(cgroup_err("lock", dir, e)),
    }
}

pub(super) fn in_use(dir: &Path) -> SandboxError {
    SandboxError::CgroupSetup {
        reason: format!(
            "{} belongs to a live slot: is another run using this box id?",
            dir.display()
        ),
    }
}

/// A directory of a slot's name left by a crashed process: removed when it holds
/// no process, refused otherwise.
pub(super) fn take_over_leftover(dir: &Path) -> Result<(), SandboxError> {
    if !dir.exists() {
        return Ok(());
    }
    if !pids_in(dir).is_empty() {
        return Err(SandboxError::CgroupSetup {
            reason: format!(
                "{} exists and has processes: is another run using this box id?",
                dir.display()
            ),
        });
    }
    rmdir_retry(dir)
}

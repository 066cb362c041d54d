//! The run's cgroup: v1 (memory, cpuacct, pids, freezer, cpuset hierarchies) or v2
//! (one unified tree), detected once per process, behind one small type with only
//! the operations a run needs: create, limit, usage, kill all, remove.
//!
//! Every cgroup is `<parent>/box-<id>` below a parent the runner owns, so cleanup
//! knows what it owns; a run always removes its own, even on errors.
//! Runs in the supervisor only; the child joins by writing `0` to the
//! `cgroup.procs` descriptors opened here.

mod v1;
mod v2;

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use cgroups_rs::fs::hierarchies;

use super::error::SandboxError;

/// Which cgroup hierarchy this host has.
#[derive(Debug)]
pub(crate) enum Hierarchy {
    V1(v1::Mounts),
    V2(v2::Base),
}

static HIERARCHY: OnceLock<Result<Hierarchy, String>> = OnceLock::new();

/// The host's hierarchy, detected (and on v2 prepared) once per process.
pub(crate) fn hierarchy() -> Result<&'static Hierarchy, SandboxError> {
    let detected = HIERARCHY.get_or_init(|| {
        if hierarchies::is_cgroup2_unified_mode() {
            v2::Base::prepare().map(Hierarchy::V2)
        } else {
            v1::Mounts::find().map(Hierarchy::V1)
        }
    });
    detected
        .as_ref()
        .map_err(|reason| SandboxError::CgroupSetup {
            reason: reason.clone(),
        })
}

/// Which cgroup version is in use ("v1" or "v2"), for reports and tests.
pub fn version() -> Result<&'static str, SandboxError> {
    Ok(match hierarchy()? {
        Hierarchy::V1(_) => "v1",
        Hierarchy::V2(_) => "v2",
    })
}

/// What a run's cgroup enforces.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CgroupLimits {
    pub memory: u64,
    pub pids: u32,
    pub cpu: Option<u32>,
}

/// What the cgroup measured.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Usage {
    pub cpu: Duration,
    pub peak_memory: u64,
    pub oom_kills: u64,
}

/// One run's cgroup.
#[derive(Debug)]
pub(crate) enum RunCgroup {
    V1(v1::Group),
    V2(v2::Group),
}

impl RunCgroup {
    /// Create `<parent>/<name>` with `limits`. A leftover of the same name without
    /// processes (a crashed earlier run) is removed first.
    pub fn create(parent: &str, name: &str, limits: &CgroupLimits) -> Result<Self, SandboxError> {
        validate_name(parent)?;
        Ok(match hierarchy()? {
            Hierarchy::V1(mounts) => {
                RunCgroup::V1(v1::Group::create(mounts, parent, name, limits)?)
            }
            Hierarchy::V2(base) => RunCgroup::V2(v2::Group::create(base, parent, name, limits)?),
        })
    }

    /// Descriptors of every `cgroup.procs` to join (opened write-only, close-on-exec).
    pub fn procs_fds(&self) -> &[OwnedFd] {
        match self {
            RunCgroup::V1(g) => g.procs_fds(),
            RunCgroup::V2(g) => g.procs_fds(),
        }
    }

    /// v2: a descriptor of the run's cgroup directory (for CLONE_INTO_CGROUP).
    pub fn dir_fd(&self) -> Option<std::os::fd::RawFd> {
        match self {
            RunCgroup::V1(_) => None,
            RunCgroup::V2(g) => Some(g.dir_fd()),
        }
    }

    /// CPU time so far (cheap; called every supervision tick).
    pub fn cpu_time(&mut self) -> io::Result<Duration> {
        match self {
            RunCgroup::V1(g) => g.cpu_time(),
            RunCgroup::V2(g) => g.cpu_time(),
        }
    }

    /// Called every tick: v2 without `memory.peak` samples `memory.current` here.
    pub fn sample(&mut self) {
        if let RunCgroup::V2(g) = self {
            g.sample();
        }
    }

    pub fn usage(&mut self) -> Result<Usage, SandboxError> {
        match self {
            RunCgroup::V1(g) => g.usage(),
            RunCgroup::V2(g) => g.usage(),
        }
    }

    /// Kill every process in the cgroup and wait until it is empty.
    pub fn kill_all(&self) -> Result<(), SandboxError> {
        match self {
            RunCgroup::V1(g) => g.kill_all(),
            RunCgroup::V2(g) => g.kill_all(),
        }
    }

    /// Kill what is left and remove the cgroup.
    pub fn remove(self) -> Result<(), SandboxError> {
        let killed = self.kill_all();
        let removed = match self {
            RunCgroup::V1(g) => g.remove(),
            RunCgroup::V2(g) => g.remove(),
        };
        killed.and(removed)
    }
}

/// Remove the cgroup parent `name` (every hierarchy) if it holds no cgroups.
/// For tests and for a daemon shutting down; runs never remove their parent.
pub fn remove_parent(name: &str) -> Result<(), SandboxError> {
    validate_name(name)?;
    match hierarchy()? {
        Hierarchy::V1(mounts) => mounts.remove_parent(name),
        Hierarchy::V2(base) => base.remove_parent(name),
    }
}

/// Names of the cgroups left under parent `name` (empty when it does not exist).
pub fn children_of_parent(name: &str) -> Result<Vec<String>, SandboxError> {
    validate_name(name)?;
    let dirs = match hierarchy()? {
        Hierarchy::V1(mounts) => mounts.parent_dirs(name),
        Hierarchy::V2(base) => vec![base.path().join(name)],
    };
    let mut names = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                names.push(format!(
                    "{}/{}",
                    dir.display(),
                    e.file_name().to_string_lossy()
                ));
            }
        }
    }
    Ok(names)
}

fn validate_name(name: &str) -> Result<(), SandboxError> {
    let ok = !name.is_empty()
        && !name.starts_with('/')
        && name
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..");
    if ok {
        Ok(())
    } else {
        Err(SandboxError::invalid(format!(
            "cgroup parent {name:?} must be a relative name like judge-runner (no '..', no leading '/')"
        )))
    }
}

// ---- small file helpers shared by v1 and v2 ----------------------------------

pub(super) fn write_file(path: &Path, value: &str, step: &'static str) -> Result<(), SandboxError> {
    std::fs::write(path, value).map_err(|source| SandboxError::Cgroup {
        step,
        path: path.to_path_buf(),
        source,
    })
}

pub(super) fn read_string(path: &Path) -> Result<String, SandboxError> {
    std::fs::read_to_string(path).map_err(|source| SandboxError::Cgroup {
        step: "read",
        path: path.to_path_buf(),
        source,
    })
}

/// Read a whole small file from offset 0 through a kept-open descriptor.
pub(super) fn reread(file: &mut File, buf: &mut String) -> io::Result<()> {
    buf.clear();
    file.seek(SeekFrom::Start(0))?;
    file.read_to_string(buf)?;
    Ok(())
}

pub(super) fn open_read(path: &Path) -> Result<File, SandboxError> {
    File::open(path).map_err(|source| SandboxError::Cgroup {
        step: "open",
        path: path.to_path_buf(),
        source,
    })
}

pub(super) fn open_procs(dir: &Path) -> Result<OwnedFd, SandboxError> {
    let path = dir.join("cgroup.procs");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .map(OwnedFd::from)
        .map_err(|source| SandboxError::Cgroup {
            step: "open",
            path,
            source,
        })
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
    Err(SandboxError::Cgroup {
        step: "remove",
        path: dir.to_path_buf(),
        source: last.unwrap_or_else(|| io::Error::other("rmdir kept failing")),
    })
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
            Err(source) => {
                return Err(SandboxError::Cgroup {
                    step: "create",
                    path: dir,
                    source,
                });
            }
        }
    }
    Ok(dir)
}

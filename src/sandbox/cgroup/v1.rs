//! cgroup v1: one directory per controller hierarchy (memory, cpuacct, pids,
//! freezer, and cpuset when pinned). This host's layout.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cgroups_rs::fs::Controllers;
use cgroups_rs::fs::hierarchies::V1;

use super::{
    CgroupLimits, Usage, create_chain, keyed, open_procs, open_read, pids_in, read_string, reread,
    rmdir_retry, write_file,
};
use crate::sandbox::error::SandboxError;

/// Where each v1 controller we use is mounted.
#[derive(Debug)]
pub(crate) struct Mounts {
    memory: PathBuf,
    cpuacct: PathBuf,
    pids: PathBuf,
    freezer: PathBuf,
    cpuset: Option<PathBuf>,
}

impl Mounts {
    pub(crate) fn find() -> Result<Self, String> {
        let v1 = V1::new();
        let need = |c: Controllers| {
            v1.get_mount_point(c.clone())
                .map(|(mount, _root)| mount)
                .ok_or_else(|| {
                    format!(
                        "cgroup v1 controller `{c}` is not mounted; mount it or boot with cgroup v2"
                    )
                })
        };
        Ok(Mounts {
            memory: need(Controllers::Mem)?,
            cpuacct: need(Controllers::CpuAcct)?,
            pids: need(Controllers::Pids)?,
            freezer: need(Controllers::Freezer)?,
            cpuset: need(Controllers::CpuSet).ok(),
        })
    }

    pub(crate) fn parent_dirs(&self, parent: &str) -> Vec<PathBuf> {
        let mut roots = vec![&self.memory, &self.cpuacct, &self.pids, &self.freezer];
        roots.extend(self.cpuset.as_ref());
        roots.into_iter().map(|r| r.join(parent)).collect()
    }

    pub(crate) fn remove_parent(&self, parent: &str) -> Result<(), SandboxError> {
        for dir in self.parent_dirs(parent) {
            // Remove the chain bottom-up, stopping at a level that still has children.
            let mut d = dir.as_path();
            for _ in parent.split('/') {
                match std::fs::remove_dir(d) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(source) => {
                        return Err(SandboxError::Cgroup {
                            step: "remove parent",
                            path: d.to_path_buf(),
                            source,
                        });
                    }
                }
                match d.parent() {
                    Some(p) => d = p,
                    None => break,
                }
            }
        }
        Ok(())
    }
}

/// One run's cgroups, one per hierarchy, with the files read every tick kept open.
#[derive(Debug)]
pub(crate) struct Group {
    dirs: Vec<PathBuf>,
    memory: PathBuf,
    freezer: PathBuf,
    procs: Vec<OwnedFd>,
    cpuacct_usage: File,
    buf: String,
}

impl Group {
    pub(crate) fn create(
        mounts: &Mounts,
        parent: &str,
        name: &str,
        limits: &CgroupLimits,
    ) -> Result<Self, SandboxError> {
        let rel = format!("{parent}/{name}");
        let mut roots = vec![
            &mounts.memory,
            &mounts.cpuacct,
            &mounts.pids,
            &mounts.freezer,
        ];
        match (limits.cpu, &mounts.cpuset) {
            (Some(_), Some(root)) => roots.push(root),
            (Some(_), None) => {
                return Err(SandboxError::CgroupSetup {
                    reason: "--cpu needs the cpuset controller, which is not mounted".into(),
                });
            }
            (None, _) => {}
        }
        let mut dirs = Vec::new();
        let built = Self::build(mounts, &roots, &rel, limits, &mut dirs);
        if built.is_err() {
            for dir in dirs.iter().rev() {
                let _ = rmdir_retry(dir);
            }
        }
        built
    }

    fn build(
        mounts: &Mounts,
        roots: &[&PathBuf],
        rel: &str,
        limits: &CgroupLimits,
        dirs: &mut Vec<PathBuf>,
    ) -> Result<Self, SandboxError> {
        for root in roots {
            let dir = root.join(rel);
            take_over_leftover(&dir)?;
            let is_cpuset = mounts.cpuset.as_ref() == Some(*root);
            create_chain(root, rel, |d| {
                if is_cpuset { inherit_cpuset(d) } else { Ok(()) }
            })?;
            dirs.push(dir);
        }
        let memory = mounts.memory.join(rel);
        set_memory(&memory, limits.memory)?;
        write_file(
            &mounts.pids.join(rel).join("pids.max"),
            &limits.pids.to_string(),
            "set pids.max",
        )?;
        if let (Some(cpu), Some(root)) = (limits.cpu, &mounts.cpuset) {
            write_file(
                &root.join(rel).join("cpuset.cpus"),
                &cpu.to_string(),
                "set cpuset.cpus",
            )?;
        }
        let procs = dirs
            .iter()
            .map(|d| open_procs(d))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Group {
            dirs: dirs.clone(),
            memory,
            freezer: mounts.freezer.join(rel),
            procs,
            cpuacct_usage: open_read(&mounts.cpuacct.join(rel).join("cpuacct.usage"))?,
            buf: String::new(),
        })
    }

    pub(crate) fn procs_fds(&self) -> &[OwnedFd] {
        &self.procs
    }

    pub(crate) fn cpu_time(&mut self) -> io::Result<Duration> {
        reread(&mut self.cpuacct_usage, &mut self.buf)?;
        let ns: u64 = self.buf.trim().parse().map_err(io::Error::other)?;
        Ok(Duration::from_nanos(ns))
    }

    pub(crate) fn usage(&mut self) -> Result<Usage, SandboxError> {
        let cpu = self.cpu_time().map_err(|source| SandboxError::Cgroup {
            step: "read cpuacct.usage of",
            path: self.dirs.get(1).cloned().unwrap_or_default(),
            source,
        })?;
        let peak = read_string(&self.memory.join("memory.max_usage_in_bytes"))?;
        let oom = read_string(&self.memory.join("memory.oom_control"))?;
        Ok(Usage {
            cpu,
            peak_memory: peak.trim().parse().unwrap_or(0),
            oom_kills: keyed(&oom, "oom_kill").unwrap_or(0),
        })
    }

    /// Freeze, SIGKILL every member, thaw; until `cgroup.procs` is empty.
    pub(crate) fn kill_all(&self) -> Result<(), SandboxError> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut left: Vec<i32> = self.dirs.iter().flat_map(|d| pids_in(d)).collect();
            left.sort_unstable();
            left.dedup();
            if left.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(SandboxError::KillFailed {
                    remaining: left.len(),
                });
            }
            let state = self.freezer.join("freezer.state");
            let _ = std::fs::write(&state, "FROZEN");
            for pid in pids_in(&self.freezer) {
                let _ = crate::sandbox::sys::kill(pid, libc::SIGKILL);
            }
            let _ = std::fs::write(&state, "THAWED");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    pub(crate) fn remove(self) -> Result<(), SandboxError> {
        let mut first_err = None;
        for dir in &self.dirs {
            if let Err(e) = rmdir_retry(dir) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// A directory of the same name left by a crashed run: removed when it holds no
/// process, refused otherwise (another run is using this box id).
fn take_over_leftover(dir: &Path) -> Result<(), SandboxError> {
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

/// A new v1 cpuset cgroup starts with empty `cpus`/`mems`; copy its parent's.
fn inherit_cpuset(dir: &Path) -> Result<(), SandboxError> {
    let parent = dir.parent().unwrap_or(dir);
    for file in ["cpuset.cpus", "cpuset.mems"] {
        let value = read_string(&parent.join(file))?;
        write_file(&dir.join(file), value.trim(), "inherit cpuset")?;
    }
    Ok(())
}

/// memory limit, and memsw (memory+swap) at the same value so swap is no escape.
/// The kernel insists memsw ≥ memory at every moment, so the order depends on
/// whether the limit goes up or down; trying one order then the other covers both.
fn set_memory(dir: &Path, bytes: u64) -> Result<(), SandboxError> {
    let value = bytes.to_string();
    let mem = dir.join("memory.limit_in_bytes");
    let memsw = dir.join("memory.memsw.limit_in_bytes");
    if !memsw.exists() {
        return write_file(&mem, &value, "set memory.limit_in_bytes");
    }
    if std::fs::write(&mem, &value).is_ok() {
        return write_file(&memsw, &value, "set memory.memsw.limit_in_bytes");
    }
    write_file(&memsw, &value, "set memory.memsw.limit_in_bytes")?;
    write_file(&mem, &value, "set memory.limit_in_bytes")
}

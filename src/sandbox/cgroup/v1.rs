//! cgroup v1: one directory per controller hierarchy (memory, cpuacct, pids,
//! freezer, and cpuset when pinned). This host's layout.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cgroups_rs::fs::Controllers;
use cgroups_rs::fs::hierarchies::V1;

use super::files::{
    cgroup_err, create_chain, in_use, keyed, lock_parent, open_read, open_rw, open_tasks, pids_in,
    pids_of, read_string, read_text, read_u64, rewrite, rmdir_retry, take_over_leftover, try_lock,
    write_file,
};
use super::{
    Baseline, CLEAN_LEFTOVER, CgroupLimits, KMEM_LEFTOVER, LEFTOVER, Measured, MemoryFds,
    SETUP_HEADROOM,
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

    pub(crate) fn facts(&self) -> super::CgroupFacts {
        let mut controllers = vec!["memory", "cpuacct", "pids", "freezer"];
        let mut missing_optional = Vec::new();
        match self.cpuset {
            Some(_) => controllers.push("cpuset"),
            None => missing_optional.push("cpuset".to_string()),
        }
        super::CgroupFacts {
            version: "v1",
            base: self.memory.clone(),
            controllers: controllers.into_iter().map(str::to_string).collect(),
            missing_optional,
            swap_accounted: self.memory.join("memory.memsw.limit_in_bytes").exists(),
            memory_peak: None,
        }
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
                    Err(e) => return Err(cgroup_err("remove parent", d, e)),
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

/// A slot's cgroups, one per hierarchy, with the files read every run kept open.
#[derive(Debug)]
pub(crate) struct SlotGroup {
    dirs: Vec<PathBuf>,
    memory: PathBuf,
    freezer: PathBuf,
    /// `flock` on the memory directory, held for the slot's life.
    _lock: File,
    /// Every hierarchy's `tasks`: the program joins by writing `0` (see
    /// `files::open_tasks`).
    join_files: Vec<OwnedFd>,
    cpuacct_usage: File,
    usage: File,
    /// `memory.kmem.usage_in_bytes` (absent when the kernel does not account it).
    kmem: Option<File>,
    max_usage: File,
    oom_control: File,
    force_empty: File,
    pids_max: File,
    memory_max: File,
    memsw_limit: Option<File>,
    /// The freezer's `cgroup.procs` (who is left after a run).
    members: File,
    /// `memory.stat` (how much of the usage is clean page cache).
    stat: File,
    /// The memory limit in force (`None`: unknown, a program lowered it).
    memory_limit: Option<u64>,
    pids_limit: u32,
    /// The lowest usage (without kernel objects) seen at a run's start: what the
    /// slot's own processes hold.
    floor: u64,
    buf: Vec<u8>,
}

impl SlotGroup {
    pub(crate) fn create(
        mounts: &Mounts,
        parent: &str,
        name: &str,
        cpu: Option<u32>,
    ) -> Result<Self, SandboxError> {
        let mut roots = vec![
            &mounts.memory,
            &mounts.cpuacct,
            &mounts.pids,
            &mounts.freezer,
        ];
        match (cpu, &mounts.cpuset) {
            (Some(_), Some(root)) => roots.push(root),
            (Some(_), None) => {
                return Err(SandboxError::CgroupSetup {
                    reason: "--cpu needs the cpuset controller, which is not mounted".into(),
                });
            }
            (None, _) => {}
        }
        for root in &roots {
            let is_cpuset = mounts.cpuset.as_ref() == Some(*root);
            create_chain(root, parent, |d| {
                if is_cpuset { inherit_cpuset(d) } else { Ok(()) }
            })?;
        }
        let _turn = lock_parent(&mounts.memory.join(parent))?;
        let rel = format!("{parent}/{name}");
        let memory = mounts.memory.join(&rel);
        if memory.exists() && try_lock(&memory)?.is_none() {
            return Err(in_use(&memory));
        }
        let mut dirs = Vec::new();
        let built = Self::build(mounts, &roots, &rel, cpu, &mut dirs);
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
        cpu: Option<u32>,
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
        if let (Some(cpu), Some(root)) = (cpu, &mounts.cpuset) {
            write_file(
                &root.join(rel).join("cpuset.cpus"),
                &cpu.to_string(),
                "set cpuset.cpus",
            )?;
        }
        let memory = mounts.memory.join(rel);
        let lock = try_lock(&memory)?.ok_or_else(|| in_use(&memory))?;
        let join_files = dirs
            .iter()
            .map(|d| open_tasks(d))
            .collect::<Result<Vec<_>, _>>()?;
        let file = |name: &str| memory.join(name);
        Ok(SlotGroup {
            dirs: dirs.clone(),
            freezer: mounts.freezer.join(rel),
            _lock: lock,
            join_files,
            cpuacct_usage: open_read(&mounts.cpuacct.join(rel).join("cpuacct.usage"))?,
            usage: open_read(&file("memory.usage_in_bytes"))?,
            kmem: open_read(&file("memory.kmem.usage_in_bytes")).ok(),
            max_usage: open_rw(&file("memory.max_usage_in_bytes"))?,
            oom_control: open_read(&file("memory.oom_control"))?,
            force_empty: open_rw(&file("memory.force_empty"))?,
            pids_max: open_rw(&mounts.pids.join(rel).join("pids.max"))?,
            memory_max: open_rw(&file("memory.limit_in_bytes"))?,
            memsw_limit: open_rw(&file("memory.memsw.limit_in_bytes")).ok(),
            members: open_read(&mounts.freezer.join(rel).join("cgroup.procs"))?,
            stat: open_read(&file("memory.stat"))?,
            memory_limit: Some(u64::MAX),
            pids_limit: 0,
            floor: u64::MAX,
            buf: Vec::with_capacity(512),
            memory,
        })
    }

    pub(crate) fn cpu_counter(&self) -> std::os::fd::RawFd {
        self.cpuacct_usage.as_raw_fd()
    }

    pub(crate) fn join_fds(&self) -> &[OwnedFd] {
        &self.join_files
    }

    pub(crate) fn begin(
        &mut self,
        limits: &CgroupLimits,
        ours: u32,
    ) -> Result<Baseline, SandboxError> {
        let mut usage = self.read_usage()?;
        // Clean page cache up to a bound is no reason to reclaim: reclaiming it
        // (as before every run of a judging) evicted the program's own file and
        // the test data the last run read, so every run read them from disk.
        let tolerated = (limits.memory / 16).min(CLEAN_LEFTOVER);
        let mut clean = self.clean_cache()?.min(tolerated);
        if self.leftover(usage, clean)? {
            // Dirty or anonymous memory, more clean cache than tolerated, or many
            // kernel objects of the last run: reclaim first.
            rewrite(&self.force_empty, "0")
                .map_err(|e| cgroup_err("write memory.force_empty of", &self.memory, e))?;
            usage = self.read_usage()?;
            clean = self.clean_cache()?.min(tolerated);
            self.leftover(usage, clean)?;
        }
        let room = limits.memory.saturating_add(SETUP_HEADROOM);
        self.set_memory(room.saturating_add(usage))?;
        let pids = limits.pids.saturating_add(ours);
        if pids != self.pids_limit {
            rewrite(&self.pids_max, &pids.to_string())
                .map_err(|e| cgroup_err("set pids.max of", &self.memory, e))?;
            self.pids_limit = pids;
        }
        rewrite(&self.max_usage, "0")
            .map_err(|e| cgroup_err("reset memory.max_usage_in_bytes of", &self.memory, e))?;
        Ok(Baseline {
            cpu: self
                .cpu_total()
                .map_err(|e| self.err("read cpuacct.usage of", e))?,
            oom_kills: self.oom_kills()?,
            memory: usage,
            memory_limit: limits.memory,
            reclaimable: clean.min(usage),
        })
    }

    /// Clean page cache charged to the cgroup: file pages that are neither dirty
    /// nor under writeback (`memory.stat`, this cgroup's own counters).
    fn clean_cache(&mut self) -> Result<u64, SandboxError> {
        let text = read_text(&self.stat, &mut self.buf)
            .map_err(|e| cgroup_err("read memory.stat of", &self.memory, e))?;
        let key = |k| keyed(text, k).unwrap_or(0);
        let file = key("active_file").saturating_add(key("inactive_file"));
        Ok(file.saturating_sub(key("dirty").saturating_add(key("writeback"))))
    }

    /// Whether the last run left more than [`LEFTOVER`] of page cache or anonymous
    /// memory above what the slot's own processes hold (the floor), not counting
    /// `clean` (the tolerated clean page cache), or more than
    /// [`KMEM_LEFTOVER`] of kernel objects. Kernel objects of a finished run wait
    /// for an RCU grace period before they are freed (a few hundred KiB per run,
    /// more after many forks): reclaim cannot hurry them, so only a pile-up counts.
    fn leftover(&mut self, usage: u64, clean: u64) -> Result<bool, SandboxError> {
        let kmem = match &mut self.kmem {
            Some(f) => read_u64(f, &mut self.buf)
                .map_err(|e| cgroup_err("read memory.kmem.usage_in_bytes of", &self.memory, e))?,
            None => 0,
        };
        let user = usage.saturating_sub(kmem).saturating_sub(clean);
        self.floor = self.floor.min(user);
        Ok(user > self.floor.saturating_add(LEFTOVER) || kmem > KMEM_LEFTOVER)
    }

    fn err(&self, step: &'static str, e: io::Error) -> SandboxError {
        cgroup_err(step, &self.memory, e)
    }

    fn read_usage(&mut self) -> Result<u64, SandboxError> {
        read_u64(&self.usage, &mut self.buf)
            .map_err(|e| cgroup_err("read memory.usage_in_bytes of", &self.memory, e))
    }

    fn oom_kills(&mut self) -> Result<u64, SandboxError> {
        let text = read_text(&self.oom_control, &mut self.buf)
            .map_err(|e| cgroup_err("read memory.oom_control of", &self.memory, e))?;
        Ok(keyed(text, "oom_kill").unwrap_or(0))
    }

    fn cpu_total(&mut self) -> io::Result<Duration> {
        read_u64(&self.cpuacct_usage, &mut self.buf).map(Duration::from_nanos)
    }

    pub(crate) fn cpu_since(&mut self, base: &Baseline) -> io::Result<Duration> {
        Ok(self.cpu_total()?.saturating_sub(base.cpu))
    }

    pub(crate) fn measure(&mut self, base: &Baseline) -> Result<Measured, SandboxError> {
        let cpu = self
            .cpu_since(base)
            .map_err(|e| self.err("read cpuacct.usage of", e))?;
        let peak = read_u64(&self.max_usage, &mut self.buf)
            .map_err(|e| cgroup_err("read memory.max_usage_in_bytes of", &self.memory, e))?;
        // The earlier runs' clean cache the kernel reclaimed for this run made
        // room its peak does not show. (Clean cache the run added itself hides a
        // little of that; the kernel reclaims only when the run reaches its limit.)
        let reclaimed = if base.reclaimable > 0 {
            base.reclaimable.saturating_sub(self.clean_cache()?)
        } else {
            0
        };
        // The program set its own limit (lower than ours) before its execve.
        self.memory_limit = None;
        Ok(Measured {
            cpu,
            peak_memory: peak,
            oom_kills: self.oom_kills()?.saturating_sub(base.oom_kills),
            limit_reached: false,
            reclaimed,
        })
    }

    pub(crate) fn memory_fds(&self) -> MemoryFds {
        MemoryFds {
            usage: self.usage.as_raw_fd(),
            limit: self.memory_max.as_raw_fd(),
            swap_limit: self.memsw_limit.as_ref().map(AsRawFd::as_raw_fd),
            peak_reset: Some(self.max_usage.as_raw_fd()),
        }
    }

    /// memory limit, and memsw (memory+swap) at the same value so swap is no
    /// escape. The kernel insists memsw ≥ memory at every moment: going up, memsw
    /// first; going down, memory first. After a run the limit is unknown (its
    /// program lowered it): one order is tried, then the other.
    fn set_memory(&mut self, bytes: u64) -> Result<(), SandboxError> {
        if self.memory_limit == Some(bytes) {
            return Ok(());
        }
        let value = bytes.to_string();
        let set = |f: &File, name: &'static str| {
            rewrite(f, &value).map_err(|e| cgroup_err(name, &self.memory, e))
        };
        let mem = |()| set(&self.memory_max, "set memory.limit_in_bytes of");
        match (&self.memsw_limit, self.memory_limit) {
            (None, _) => mem(())?,
            (Some(sw), Some(now)) if bytes > now => {
                set(sw, "set memory.memsw.limit_in_bytes of").and_then(mem)?;
            }
            (Some(sw), Some(_)) => {
                mem(())?;
                set(sw, "set memory.memsw.limit_in_bytes of")?;
            }
            (Some(sw), None) => {
                if mem(()).is_ok() {
                    set(sw, "set memory.memsw.limit_in_bytes of")?;
                } else {
                    set(sw, "set memory.memsw.limit_in_bytes of").and_then(mem)?;
                }
            }
        }
        self.memory_limit = Some(bytes);
        Ok(())
    }

    /// Freeze, SIGKILL every member but `keep`, thaw; until only `keep` is left.
    pub(crate) fn kill_all_but(&self, keep: Option<u32>) -> Result<(), SandboxError> {
        let keep = keep.and_then(|p| i32::try_from(p).ok());
        // Every process of a run is born in all of the slot's hierarchies, so one
        // holding nothing else means they all do: the usual case, one read.
        let mut buf = Vec::with_capacity(64);
        if pids_of(&self.members, &mut buf)
            .iter()
            .all(|p| Some(*p) == keep)
        {
            return Ok(());
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut left: Vec<i32> = self.dirs.iter().flat_map(|d| pids_in(d)).collect();
            left.retain(|p| Some(*p) != keep);
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
                if Some(pid) != keep {
                    let _ = crate::sandbox::sys::kill(pid, libc::SIGKILL);
                }
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

/// A new v1 cpuset cgroup starts with empty `cpus`/`mems`; copy its parent's.
fn inherit_cpuset(dir: &Path) -> Result<(), SandboxError> {
    let parent = dir.parent().unwrap_or(dir);
    for file in ["cpuset.cpus", "cpuset.mems"] {
        let value = read_string(&parent.join(file))?;
        write_file(&dir.join(file), value.trim(), "inherit cpuset")?;
    }
    Ok(())
}

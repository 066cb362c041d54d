//! A slot's cgroup: v1 (memory, cpuacct, pids, freezer, cpuset hierarchies) or v2
//! (one unified tree), detected once per process, behind one small type with only
//! the operations a slot needs: create, begin a run (limits, a baseline of every
//! counter), measure since the baseline, kill everything, remove.
//!
//! # Kept for the slot's life, measured as differences
//! Making and removing a cgroup per run costs CPU (a memory cgroup allocates
//! per-CPU statistics: ~0.1-0.2 ms for the v1 hierarchies together), and on v1
//! the run's processes could only enter it by migration, which waits for an RCU
//! grace period (5-18 ms on a loaded host). So a slot keeps its cgroup, and each
//! run starts from a [`Baseline`]: CPU time, OOM kills and memory usage are read
//! as differences from it; the memory watermark is reset to the current usage
//! (v1 `memory.max_usage_in_bytes`, v2 `memory.peak` through its own descriptor,
//! Linux ≥ 6.12); on v2 kernels whose peak cannot be reset, the run cgroup is
//! made anew per run instead (cheap there: nothing has to migrate into it).
//!
//! Memory a run leaves charged to the cgroup (page cache of its output, kernel
//! objects still waiting for RCU) would shift the next run's baseline and, once
//! reclaimed under pressure, let that run use more than its limit. So a run
//! starts only when the usage is within [`LEFTOVER`] of the slot's own floor;
//! above it the slot first reclaims (v1 `memory.force_empty`) or, on v2, starts
//! from a fresh run cgroup.
//!
//! Every cgroup lives under `<parent>` (the runner's); a slot's is
//! `<parent>/box-<id>` and holds a `flock` on its directory for its whole life,
//! so a second slot of the same box id fails with `CgroupSetup` and never
//! disturbs the first.

mod files;
mod v1;
mod v2;

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;
use std::time::Duration;

use cgroups_rs::fs::hierarchies;

use super::error::SandboxError;

/// Memory a finished run may leave behind before the next run first reclaims it;
/// above the kernel's charge batching (256 KiB per CPU), far below what a
/// program's peak is judged on.
pub(crate) const LEFTOVER: u64 = 1 << 20;
/// Clean page cache earlier runs may leave charged (v1) before the next run
/// first reclaims it: the program's own file, test data, an interpreter's
/// library, which every run reads again. At most this, and at most 1/16 of the
/// run's limit ([`Baseline::reclaimable`] says how it stays out of the run's
/// limit and peak).
pub(crate) const CLEAN_LEFTOVER: u64 = 16 << 20;
/// Kernel objects a finished run may leave charged (most wait for an RCU grace
/// period, a few hundred KiB per run) before the next run first reclaims them.
pub(crate) const KMEM_LEFTOVER: u64 = 16 << 20;

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

/// Room over the run's memory limit while the slot sets the run up (init's
/// clone, mounts, namespaces): those are charged to the cgroup too, and a limit
/// smaller than what they take would have the OOM killer choose between the
/// launcher and init before any process of the program exists. The program
/// itself sets the exact limit just before its execve ([`MemoryFds`]).
pub(crate) const SETUP_HEADROOM: u64 = 8 << 20;

/// The cgroup files the program uses just before its execve, when it is still
/// root and its OOM score already the highest: read what is charged now (the
/// slot's processes, init's and its own kernel objects), set the memory limit to
/// the run's plus that, reset the peak to now, and report that usage (the
/// baseline of its peak).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemoryFds {
    /// v1 `memory.usage_in_bytes`, v2 `memory.current`.
    pub usage: RawFd,
    /// v1 `memory.limit_in_bytes`, v2 `memory.max`.
    pub limit: RawFd,
    /// v1 `memory.memsw.limit_in_bytes` (set after `limit`: it comes down).
    pub swap_limit: Option<RawFd>,
    /// v1 `memory.max_usage_in_bytes`, v2 `memory.peak` (a write resets it).
    pub peak_reset: Option<RawFd>,
}

/// What a run's cgroup enforces. `pids` counts the program's processes and
/// threads only; the slot adds its own (launcher, init) that live in the cgroup.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CgroupLimits {
    pub memory: u64,
    pub pids: u32,
}

/// The counters at the start of a run.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Baseline {
    pub cpu: Duration,
    pub oom_kills: u64,
    /// Memory charged at the start (the peak's baseline unless the program
    /// reported its own, just before its execve).
    pub memory: u64,
    /// The run's own memory limit (over the baseline).
    pub memory_limit: u64,
    /// Clean page cache earlier runs left in `memory` (v1, at most
    /// [`CLEAN_LEFTOVER`]; 0 on v2). The kernel reclaims it for the run, so the
    /// program's own limit leaves it out, and what was reclaimed by the end is
    /// added back to the peak: the run gets exactly its limit and its peak is
    /// its own.
    pub reclaimable: u64,
}

/// What the cgroup measured since the baseline (CPU of every process in it,
/// including the slot's own, which the caller subtracts).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Measured {
    pub cpu: Duration,
    pub peak_memory: u64,
    pub oom_kills: u64,
    /// The usage reached the limit in force (the run's own limit, over the baseline).
    pub limit_reached: bool,
    /// Of [`Baseline::reclaimable`], what the kernel reclaimed during the run.
    pub reclaimed: u64,
}

/// A slot's cgroup.
#[derive(Debug)]
pub(crate) enum SlotCgroup {
    V1(v1::SlotGroup),
    V2(v2::SlotGroup),
}

impl SlotCgroup {
    /// Create `<parent>/<name>`, pinned to `cpu` if given. A leftover of the same
    /// name (a crashed process's) is taken over; one held by a live slot is refused.
    pub fn create(parent: &str, name: &str, cpu: Option<u32>) -> Result<Self, SandboxError> {
        validate_name(parent)?;
        Ok(match hierarchy()? {
            Hierarchy::V1(mounts) => {
                SlotCgroup::V1(v1::SlotGroup::create(mounts, parent, name, cpu)?)
            }
            Hierarchy::V2(base) => SlotCgroup::V2(v2::SlotGroup::create(base, parent, name, cpu)?),
        })
    }

    /// Set the run's limits (`ours`: the slot's own processes that will be in the
    /// cgroup during the run) and take the baseline every figure is measured from.
    pub fn begin(&mut self, limits: &CgroupLimits, ours: u32) -> Result<Baseline, SandboxError> {
        match self {
            SlotCgroup::V1(g) => g.begin(limits, ours),
            SlotCgroup::V2(s) => s.begin(limits, ours),
        }
    }

    /// The files the slot's launcher joins the cgroup through, itself, once
    /// (v1 only: on v2 the launcher stays outside and clones each run's init
    /// straight into it).
    pub fn launcher_join_fds(&self) -> Vec<RawFd> {
        match self {
            SlotCgroup::V1(g) => g.join_fds().iter().map(AsRawFd::as_raw_fd).collect(),
            SlotCgroup::V2(_) => Vec::new(),
        }
    }

    /// The files a process joins the cgroup through by writing `0` (v1: every
    /// hierarchy's `tasks`, see `files::open_tasks`; v2: the run's `cgroup.procs`).
    pub fn join_fds(&self) -> &[OwnedFd] {
        match self {
            SlotCgroup::V1(g) => g.join_fds(),
            SlotCgroup::V2(s) => s.join_fds(),
        }
    }

    /// v2: the run cgroup's directory, for `clone3(CLONE_INTO_CGROUP)`.
    pub fn dir_fd(&self) -> Option<RawFd> {
        match self {
            SlotCgroup::V1(_) => None,
            SlotCgroup::V2(s) => s.dir_fd(),
        }
    }

    /// v1: the `cpuacct.usage` descriptor, for a launcher living in the cgroup
    /// to read around its own work.
    pub fn cpu_counter(&self) -> Option<RawFd> {
        match self {
            SlotCgroup::V1(g) => Some(g.cpu_counter()),
            SlotCgroup::V2(_) => None,
        }
    }

    /// CPU time since the baseline (cheap; called every supervision tick).
    pub fn cpu_since(&mut self, base: &Baseline) -> std::io::Result<Duration> {
        match self {
            SlotCgroup::V1(g) => g.cpu_since(base),
            SlotCgroup::V2(s) => s.cpu_since(base),
        }
    }

    /// Called every tick: v2 without `memory.peak` samples `memory.current` here.
    pub fn sample(&mut self) {
        if let SlotCgroup::V2(s) = self {
            s.sample();
        }
    }

    /// The files the program sets its exact memory limit with.
    pub fn memory_fds(&self) -> Option<MemoryFds> {
        match self {
            SlotCgroup::V1(g) => Some(g.memory_fds()),
            SlotCgroup::V2(s) => s.memory_fds(),
        }
    }

    /// Everything measured since the baseline, once the run's processes are gone.
    /// `program_base`: the memory charged when the program started, as it reported.
    pub fn measure(
        &mut self,
        base: &Baseline,
        program_base: Option<u64>,
    ) -> Result<Measured, SandboxError> {
        let memory = program_base.unwrap_or(base.memory);
        let mut m = match self {
            SlotCgroup::V1(g) => g.measure(base)?,
            SlotCgroup::V2(s) => s.measure(base)?,
        };
        // `peak_memory` comes back as the raw peak. The program's limit was its
        // own less the reclaimable cache; what was reclaimed was room it used.
        let limit = base.memory_limit.saturating_sub(base.reclaimable);
        m.limit_reached = m.peak_memory >= memory.saturating_add(limit);
        m.peak_memory = m
            .peak_memory
            .saturating_sub(memory)
            .saturating_add(m.reclaimed);
        Ok(m)
    }

    /// Kill every process in the cgroup but `keep` (the launcher) and wait until
    /// none is left.
    pub fn kill_all_but(&self, keep: Option<u32>) -> Result<(), SandboxError> {
        match self {
            SlotCgroup::V1(g) => g.kill_all_but(keep),
            SlotCgroup::V2(s) => s.kill_all(),
        }
    }

    /// Kill what is left and remove the cgroup.
    pub fn remove(self) -> Result<(), SandboxError> {
        let killed = self.kill_all_but(None);
        let removed = match self {
            SlotCgroup::V1(g) => g.remove(),
            SlotCgroup::V2(s) => s.remove(),
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

/// What `judge-runner check` reports of the host's cgroups: the version, the
/// controllers a slot gets, and the optional features the sandbox uses when the
/// kernel has them.
#[derive(Debug, Clone)]
pub struct CgroupFacts {
    /// "v1" or "v2".
    pub version: &'static str,
    /// Where the runs' cgroups live (v2: the delegated base; v1: the memory mount).
    pub base: std::path::PathBuf,
    /// The controllers a run's cgroup gets.
    pub controllers: Vec<String>,
    /// Controllers the sandbox uses when present but can do without (pinning).
    pub missing_optional: Vec<String>,
    /// v1: `memory.memsw.*` exists, so the memory limit also bounds swap.
    pub swap_accounted: bool,
    /// v2: `memory.peak` exists (Linux ≥ 5.19); else the peak is sampled.
    pub memory_peak: Option<bool>,
}

/// Detects (and on v2 prepares, as every slot would) the hierarchy and describes it.
pub fn facts() -> Result<CgroupFacts, SandboxError> {
    Ok(match hierarchy()? {
        Hierarchy::V1(m) => m.facts(),
        Hierarchy::V2(b) => b.facts(),
    })
}

//! cgroup v2: one unified tree. The process may live in a delegated subtree (a
//! systemd `Delegate=yes` unit, the CI VM's `ci` cgroup), where two rules bite:
//!
//! - **no internal processes**: a cgroup that enables controllers for its children
//!   (`cgroup.subtree_control`) may not hold processes itself. So before enabling
//!   anything, the supervisor moves itself into a leaf `<base>/supervisor`, and
//!   the runs' cgroups live beside it under `<base>/<parent>/`.
//! - `memory.peak` only exists since Linux 5.19: without it the peak is the
//!   largest `memory.current` sampled every supervision tick (≤ 10 ms), which can
//!   miss a spike shorter than a tick; the OOM counter still catches the limit.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::files::{
    cgroup_err, create_chain, in_use, keyed, lock_parent, open_procs, open_read, open_rw, pids_in,
    read_text, read_u64, rewrite, rmdir_retry, take_over_leftover, try_lock, write_file,
};
use super::{Baseline, CgroupLimits, LEFTOVER, Measured, MemoryFds, SETUP_HEADROOM};
use crate::sandbox::error::SandboxError;

const MOUNT: &str = "/sys/fs/cgroup";
/// Controllers a run's cgroup needs, when the tree offers them.
const WANTED: [&str; 4] = ["memory", "pids", "cpu", "cpuset"];

/// The delegated cgroup the process started in, prepared to hold runs.
#[derive(Debug)]
pub(crate) struct Base {
    path: PathBuf,
    controllers: String,
}

impl Base {
    /// Detect our own cgroup, move into a leaf if needed, enable the controllers.
    pub(crate) fn prepare() -> Result<Self, String> {
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("read /proc/self/cgroup: {e}"))?;
        let rel = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .ok_or("no cgroup v2 entry in /proc/self/cgroup")?
            .trim()
            .trim_start_matches('/')
            .to_string();
        let path = Path::new(MOUNT).join(&rel);
        let available = std::fs::read_to_string(path.join("cgroup.controllers"))
            .map_err(|e| format!("read {}/cgroup.controllers: {e}", path.display()))?;
        let controllers: Vec<&str> = WANTED
            .iter()
            .copied()
            .filter(|c| available.split_whitespace().any(|a| a == *c))
            .collect();
        for need in ["memory", "pids"] {
            if !controllers.contains(&need) {
                return Err(format!(
                    "controller `{need}` is not delegated to {}; Hint: Delegate=yes or enable it in the parent's cgroup.subtree_control",
                    path.display()
                ));
            }
        }
        let controllers = controllers
            .iter()
            .map(|c| format!("+{c}"))
            .collect::<Vec<_>>()
            .join(" ");
        // A process started by a supervisor inherits its leaf: the base is then the
        // leaf's parent, already prepared, and nothing needs to move.
        if let Some(parent) = path.parent().filter(|_| path.ends_with(LEAF))
            && enabled_in(parent, &["memory", "pids"])
        {
            return Ok(Base {
                path: parent.to_path_buf(),
                controllers,
            });
        }
        if !rel.is_empty() {
            move_self_into_leaf(&path)?;
        }
        enable(&path, &controllers)?;
        Ok(Base { path, controllers })
    }

    pub(crate) fn facts(&self) -> super::CgroupFacts {
        let controllers: Vec<String> = self
            .controllers
            .split_whitespace()
            .map(|c| c.trim_start_matches('+').to_string())
            .collect();
        let missing_optional = ["cpu", "cpuset"]
            .iter()
            .filter(|c| !controllers.iter().any(|have| have == *c))
            .map(|c| c.to_string())
            .collect();
        super::CgroupFacts {
            version: "v2",
            base: self.path.clone(),
            controllers,
            missing_optional,
            // Each run sets memory.swap.max to 0 where the kernel has it.
            swap_accounted: self.path.join("memory.swap.max").exists(),
            memory_peak: Some(!disable_peak_for_tests() && self.path.join("memory.peak").exists()),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn remove_parent(&self, parent: &str) -> Result<(), SandboxError> {
        let mut dir = self.path.join(parent);
        for _ in parent.split('/') {
            match std::fs::remove_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(cgroup_err("remove parent", &dir, e)),
            }
            dir.pop();
        }
        Ok(())
    }
}

/// The test suite's knob to exercise the fallback for kernels without memory.peak.
fn disable_peak_for_tests() -> bool {
    std::env::var_os("JUDGE_RUNNER_CGROUP_NO_PEAK").is_some_and(|v| v == "1")
}

/// Name of the leaf the supervisor moves into.
const LEAF: &str = "supervisor";

fn enabled_in(dir: &Path, controllers: &[&str]) -> bool {
    let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
    controllers
        .iter()
        .all(|c| enabled.split_whitespace().any(|e| e == *c))
}

/// The no-internal-processes rule: leave `base` for `base/supervisor`.
fn move_self_into_leaf(base: &Path) -> Result<(), String> {
    let leaf = base.join(LEAF);
    match std::fs::create_dir(&leaf) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("create {}: {e}", leaf.display())),
    }
    std::fs::write(leaf.join("cgroup.procs"), std::process::id().to_string())
        .map_err(|e| format!("move the supervisor into {}: {e}", leaf.display()))
}

fn enable(dir: &Path, controllers: &str) -> Result<(), String> {
    std::fs::write(dir.join("cgroup.subtree_control"), controllers).map_err(|e| {
        format!(
            "enable `{controllers}` in {}/cgroup.subtree_control: {e} (other processes in that cgroup? \
             Hint: start judge-runner in a cgroup of its own)",
            dir.display()
        )
    })
}

/// A slot's cgroup: `<base>/<parent>/box-<id>`, a domain with the controllers
/// enabled for its one child, the run cgroup `run` that each run's processes are
/// cloned into. The slot's launcher stays outside (in the supervisor's leaf).
#[derive(Debug)]
pub(crate) struct SlotGroup {
    dir: PathBuf,
    controllers: String,
    cpu: Option<u32>,
    /// `flock` on `dir`, held for the slot's life.
    _lock: File,
    run: Option<Group>,
    /// Whether `memory.peak` can be reset (Linux ≥ 6.12); unknown until tried.
    peak_resettable: Option<bool>,
}

impl SlotGroup {
    pub(crate) fn create(
        base: &Base,
        parent: &str,
        name: &str,
        cpu: Option<u32>,
    ) -> Result<Self, SandboxError> {
        let parent_dir = create_chain(&base.path, parent, |d| {
            enable(d, &base.controllers).map_err(|reason| SandboxError::CgroupSetup { reason })
        })?;
        let _turn = lock_parent(&parent_dir)?;
        let dir = parent_dir.join(name);
        if dir.exists() {
            if try_lock(&dir)?.is_none() {
                return Err(in_use(&dir));
            }
            take_over_leftover(&dir.join(RUN))?;
            take_over_leftover(&dir)?;
        }
        create_chain(&parent_dir, name, |_| Ok(()))?;
        let made = enable(&dir, &base.controllers)
            .map_err(|reason| SandboxError::CgroupSetup { reason })
            .and_then(|()| try_lock(&dir)?.ok_or_else(|| in_use(&dir)));
        match made {
            Ok(lock) => Ok(SlotGroup {
                dir,
                controllers: base.controllers.clone(),
                cpu,
                _lock: lock,
                run: None,
                peak_resettable: None,
            }),
            Err(e) => {
                let _ = rmdir_retry(&dir);
                Err(e)
            }
        }
    }

    pub(crate) fn begin(
        &mut self,
        limits: &CgroupLimits,
        ours: u32,
    ) -> Result<Baseline, SandboxError> {
        let pids = limits.pids.saturating_add(ours);
        let memory = limits.memory.saturating_add(SETUP_HEADROOM);
        if let Some(run) = &mut self.run
            && self.peak_resettable != Some(false)
            && run.has_peak
            && run.current()? <= LEFTOVER
        {
            let reset = run.reset_peak();
            self.peak_resettable = Some(reset);
            if reset {
                return run.rebase(memory, pids, limits.memory);
            }
        }
        if let Some(old) = self.run.take() {
            old.remove()?;
        }
        let run = self
            .run
            .insert(Group::create(&self.dir.join(RUN), memory, pids, self.cpu)?);
        run.rebase(memory, pids, limits.memory)
    }

    fn group(&self) -> Result<&Group, SandboxError> {
        self.run.as_ref().ok_or_else(|| SandboxError::CgroupSetup {
            reason: format!("{}: no run cgroup yet", self.dir.display()),
        })
    }

    pub(crate) fn join_fds(&self) -> &[OwnedFd] {
        self.run
            .as_ref()
            .map_or(&[], |g| std::slice::from_ref(&g.procs))
    }

    pub(crate) fn dir_fd(&self) -> Option<RawFd> {
        self.run.as_ref().map(|g| g.dir_fd.as_raw_fd())
    }

    pub(crate) fn memory_fds(&self) -> Option<MemoryFds> {
        self.run.as_ref().map(|g| MemoryFds {
            usage: g.current.as_raw_fd(),
            limit: g.max.as_raw_fd(),
            swap_limit: None,
            peak_reset: g.peak.as_ref().map(AsRawFd::as_raw_fd),
        })
    }

    pub(crate) fn cpu_since(&mut self, base: &Baseline) -> io::Result<Duration> {
        match &mut self.run {
            Some(g) => Ok(g.cpu_total()?.saturating_sub(base.cpu)),
            None => Ok(Duration::ZERO),
        }
    }

    pub(crate) fn sample(&mut self) {
        if let Some(g) = &mut self.run {
            g.sample();
        }
    }

    pub(crate) fn measure(&mut self, base: &Baseline) -> Result<Measured, SandboxError> {
        match &mut self.run {
            Some(g) => g.measure(base),
            None => self.group().map(|_| Measured::default()),
        }
    }

    pub(crate) fn kill_all(&self) -> Result<(), SandboxError> {
        self.run.as_ref().map_or(Ok(()), Group::kill_all)
    }

    pub(crate) fn remove(mut self) -> Result<(), SandboxError> {
        let run = self.run.take().map_or(Ok(()), Group::remove);
        let _ = &self.controllers;
        run.and(rmdir_retry(&self.dir))
    }
}

/// Name of a slot's run cgroup.
const RUN: &str = "run";

/// One run cgroup with the files read every tick kept open.
#[derive(Debug)]
struct Group {
    dir: PathBuf,
    dir_fd: OwnedFd,
    procs: OwnedFd,
    cpu_stat: File,
    current: File,
    /// `memory.peak`, read and reset through this descriptor (absent: < 5.19).
    peak: Option<File>,
    events: File,
    /// `memory.max`, lowered by each run's program before its execve.
    max: File,
    memory_limit: u64,
    pids_limit: u32,
    sampled_peak: u64,
    has_peak: bool,
    buf: Vec<u8>,
}

impl Group {
    fn create(dir: &Path, memory: u64, pids: u32, cpu: Option<u32>) -> Result<Self, SandboxError> {
        std::fs::create_dir(dir).map_err(|e| cgroup_err("create", dir, e))?;
        let built = Self::build(dir, memory, pids, cpu);
        if built.is_err() {
            let _ = rmdir_retry(dir);
        }
        built
    }

    fn build(dir: &Path, memory: u64, pids: u32, cpu: Option<u32>) -> Result<Self, SandboxError> {
        let swap = dir.join("memory.swap.max");
        if swap.exists() {
            write_file(&swap, "0", "set memory.swap.max")?;
        }
        if let Some(cpu) = cpu {
            write_file(
                &dir.join("cpuset.cpus"),
                &cpu.to_string(),
                "set cpuset.cpus",
            )?;
        }
        let has_peak = !disable_peak_for_tests() && dir.join("memory.peak").exists();
        let dir_fd = File::open(dir)
            .map(OwnedFd::from)
            .map_err(|e| cgroup_err("open", dir, e))?;
        let mut group = Group {
            dir_fd,
            procs: open_procs(dir)?,
            cpu_stat: open_read(&dir.join("cpu.stat"))?,
            current: open_read(&dir.join("memory.current"))?,
            peak: if has_peak {
                Some(open_rw(&dir.join("memory.peak"))?)
            } else {
                None
            },
            events: open_read(&dir.join("memory.events"))?,
            max: open_rw(&dir.join("memory.max"))?,
            memory_limit: 0,
            pids_limit: 0,
            sampled_peak: 0,
            has_peak,
            buf: Vec::with_capacity(512),
            dir: dir.to_path_buf(),
        };
        group.set_limits(memory, pids)?;
        Ok(group)
    }

    fn err(&self, step: &'static str, e: io::Error) -> SandboxError {
        cgroup_err(step, &self.dir, e)
    }

    fn set_limits(&mut self, memory: u64, pids: u32) -> Result<(), SandboxError> {
        if memory != self.memory_limit {
            rewrite(&self.max, &memory.to_string())
                .map_err(|e| cgroup_err("set memory.max of", &self.dir, e))?;
            self.memory_limit = memory;
        }
        if pids != self.pids_limit {
            write_file(
                &self.dir.join("pids.max"),
                &pids.to_string(),
                "set pids.max",
            )?;
            self.pids_limit = pids;
        }
        Ok(())
    }

    fn current(&mut self) -> Result<u64, SandboxError> {
        read_u64(&self.current, &mut self.buf)
            .map_err(|e| cgroup_err("read memory.current of", &self.dir, e))
    }

    /// Reset `memory.peak` to the current usage for reads through our descriptor
    /// (Linux ≥ 6.12); false when this kernel cannot.
    fn reset_peak(&mut self) -> bool {
        self.peak
            .as_mut()
            .is_some_and(|f| rewrite(f, "reset\n").is_ok())
    }

    /// The limits for the next run's setup (over what is charged now) and its
    /// baseline; `own`: the run's own memory limit.
    fn rebase(&mut self, memory: u64, pids: u32, own: u64) -> Result<Baseline, SandboxError> {
        let usage = self.current()?;
        self.set_limits(memory.saturating_add(usage), pids)?;
        self.sampled_peak = usage;
        let events = read_text(&self.events, &mut self.buf)
            .map_err(|e| cgroup_err("read memory.events of", &self.dir, e))?;
        let oom_kills = keyed(events, "oom_kill").unwrap_or(0);
        Ok(Baseline {
            cpu: self
                .cpu_total()
                .map_err(|e| self.err("read cpu.stat of", e))?,
            oom_kills,
            memory: usage,
            memory_limit: own,
            reclaimable: 0,
        })
    }

    fn cpu_total(&mut self) -> io::Result<Duration> {
        let stat = read_text(&self.cpu_stat, &mut self.buf)?;
        let us = keyed(stat, "usage_usec")
            .ok_or_else(|| io::Error::other("no usage_usec in cpu.stat"))?;
        Ok(Duration::from_micros(us))
    }

    fn sample(&mut self) {
        if !self.has_peak
            && let Ok(v) = read_u64(&self.current, &mut self.buf)
        {
            self.sampled_peak = self.sampled_peak.max(v);
        }
    }

    fn measure(&mut self, base: &Baseline) -> Result<Measured, SandboxError> {
        self.sample();
        let cpu = self
            .cpu_total()
            .map_err(|e| self.err("read cpu.stat of", e))?
            .saturating_sub(base.cpu);
        let peak = match &mut self.peak {
            Some(f) => read_u64(f, &mut self.buf)
                .map_err(|e| cgroup_err("read memory.peak of", &self.dir, e))?,
            None => self.sampled_peak,
        };
        let events = read_text(&self.events, &mut self.buf)
            .map_err(|e| cgroup_err("read memory.events of", &self.dir, e))?;
        let oom_kills = keyed(events, "oom_kill").unwrap_or(0);
        // The program lowered the limit before its execve: ours is unknown now.
        self.memory_limit = 0;
        Ok(Measured {
            cpu,
            peak_memory: peak,
            oom_kills: oom_kills.saturating_sub(base.oom_kills),
            limit_reached: false,
            reclaimed: 0,
        })
    }

    /// `cgroup.kill` (Linux 5.14+), else freeze + SIGKILL + thaw; until empty.
    fn kill_all(&self) -> Result<(), SandboxError> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let kill_file = self.dir.join("cgroup.kill");
        loop {
            let left = pids_in(&self.dir);
            if left.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(SandboxError::KillFailed {
                    remaining: left.len(),
                });
            }
            if std::fs::write(&kill_file, "1").is_err() {
                let _ = std::fs::write(self.dir.join("cgroup.freeze"), "1");
                for pid in left {
                    let _ = crate::sandbox::sys::kill(pid, libc::SIGKILL);
                }
                let _ = std::fs::write(self.dir.join("cgroup.freeze"), "0");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn remove(self) -> Result<(), SandboxError> {
        let killed = self.kill_all();
        killed.and(rmdir_retry(&self.dir))
    }
}

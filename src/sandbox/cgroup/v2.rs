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
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{
    CgroupLimits, Usage, create_chain, keyed, open_procs, open_read, pids_in, read_string, reread,
    rmdir_retry, write_file,
};
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

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn remove_parent(&self, parent: &str) -> Result<(), SandboxError> {
        let mut dir = self.path.join(parent);
        for _ in parent.split('/') {
            match std::fs::remove_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(SandboxError::Cgroup {
                        step: "remove parent",
                        path: dir,
                        source,
                    });
                }
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

/// One run's cgroup with the files read every tick kept open.
#[derive(Debug)]
pub(crate) struct Group {
    dir: PathBuf,
    dir_fd: OwnedFd,
    procs: Vec<OwnedFd>,
    cpu_stat: File,
    current: Option<File>,
    sampled_peak: u64,
    has_peak: bool,
    buf: String,
}

impl Group {
    pub(crate) fn create(
        base: &Base,
        parent: &str,
        name: &str,
        limits: &CgroupLimits,
    ) -> Result<Self, SandboxError> {
        let parent_dir = create_chain(&base.path, parent, |d| {
            enable(d, &base.controllers).map_err(|reason| SandboxError::CgroupSetup { reason })
        })?;
        let dir = parent_dir.join(name);
        if dir.exists() {
            if !pids_in(&dir).is_empty() {
                return Err(SandboxError::CgroupSetup {
                    reason: format!(
                        "{} exists and has processes: is another run using this box id?",
                        dir.display()
                    ),
                });
            }
            rmdir_retry(&dir)?;
        }
        create_chain(&parent_dir, name, |_| Ok(()))?;
        let built = Self::build(dir.clone(), limits);
        if built.is_err() {
            let _ = rmdir_retry(&dir);
        }
        built
    }

    fn build(dir: PathBuf, limits: &CgroupLimits) -> Result<Self, SandboxError> {
        write_file(
            &dir.join("memory.max"),
            &limits.memory.to_string(),
            "set memory.max",
        )?;
        let swap = dir.join("memory.swap.max");
        if swap.exists() {
            write_file(&swap, "0", "set memory.swap.max")?;
        }
        write_file(
            &dir.join("pids.max"),
            &limits.pids.to_string(),
            "set pids.max",
        )?;
        if let Some(cpu) = limits.cpu {
            write_file(
                &dir.join("cpuset.cpus"),
                &cpu.to_string(),
                "set cpuset.cpus",
            )?;
        }
        let has_peak = !disable_peak_for_tests() && dir.join("memory.peak").exists();
        let dir_fd = std::fs::File::open(&dir)
            .map(OwnedFd::from)
            .map_err(|source| SandboxError::Cgroup {
                step: "open",
                path: dir.clone(),
                source,
            })?;
        Ok(Group {
            dir_fd,
            procs: vec![open_procs(&dir)?],
            cpu_stat: open_read(&dir.join("cpu.stat"))?,
            current: if has_peak {
                None
            } else {
                Some(open_read(&dir.join("memory.current"))?)
            },
            sampled_peak: 0,
            has_peak,
            buf: String::new(),
            dir,
        })
    }

    pub(crate) fn dir_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.dir_fd.as_raw_fd()
    }

    pub(crate) fn procs_fds(&self) -> &[OwnedFd] {
        &self.procs
    }

    pub(crate) fn cpu_time(&mut self) -> io::Result<Duration> {
        reread(&mut self.cpu_stat, &mut self.buf)?;
        let us = keyed(&self.buf, "usage_usec")
            .ok_or_else(|| io::Error::other("no usage_usec in cpu.stat"))?;
        Ok(Duration::from_micros(us))
    }

    pub(crate) fn sample(&mut self) {
        if let Some(file) = &mut self.current
            && reread(file, &mut self.buf).is_ok()
            && let Ok(v) = self.buf.trim().parse::<u64>()
        {
            self.sampled_peak = self.sampled_peak.max(v);
        }
    }

    pub(crate) fn usage(&mut self) -> Result<Usage, SandboxError> {
        self.sample();
        let cpu = self.cpu_time().map_err(|source| SandboxError::Cgroup {
            step: "read cpu.stat of",
            path: self.dir.clone(),
            source,
        })?;
        let peak_memory = if self.has_peak {
            read_string(&self.dir.join("memory.peak"))?
                .trim()
                .parse()
                .unwrap_or(0)
        } else {
            self.sampled_peak
        };
        let events = read_string(&self.dir.join("memory.events"))?;
        Ok(Usage {
            cpu,
            peak_memory,
            oom_kills: keyed(&events, "oom_kill").unwrap_or(0),
        })
    }

    /// `cgroup.kill` (Linux 5.14+), else freeze + SIGKILL + thaw; until empty.
    pub(crate) fn kill_all(&self) -> Result<(), SandboxError> {
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

    pub(crate) fn remove(self) -> Result<(), SandboxError> {
        rmdir_retry(&self.dir)
    }
}

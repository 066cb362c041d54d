//! `Slot`: one box id used for many runs, paying per-slot setup once. A slot keeps
//! a loopback-only network namespace open and has each run join it with `setns`
//! instead of creating a fresh one (the single most expensive namespace: about
//! 0.6-0.8 ms CPU per creation on this kernel).

use std::os::fd::{AsRawFd, OwnedFd};

use super::cgroup::{self, CgroupLimits, RunCgroup};
use super::child::{self, Net, Root};
use super::error::SandboxError;
use super::mount::{MountPlan, RootSpec};
use super::plan::Plan;
use super::spawn;
use super::sys;
use std::path::Path;

/// A reusable sandbox slot: `Slot::new(box_id, cgroup_parent, cpu)`, then
/// `slot.run(&plan)` as often as needed (one run at a time), then `close()`.
/// The slot's box id, cgroup parent and CPU replace the plan's.
#[derive(Debug)]
pub struct Slot {
    box_id: u32,
    parent: String,
    cpu: Option<u32>,
    netns: Option<OwnedFd>,
    /// The prepared root (a kept mount namespace) and the `--network` setting it
    /// was built for (its /etc differs).
    root: Option<(bool, OwnedFd)>,
    /// One-shot use (`sandbox::run`): a fresh network namespace per run is
    /// cheaper than preparing one to keep.
    fresh_network: bool,
}

impl Slot {
    /// A slot for box `box_id` whose runs' cgroups live under `cgroup_parent`,
    /// optionally pinned to CPU `cpu`. Needs root.
    pub fn new(box_id: u32, cgroup_parent: &str, cpu: Option<u32>) -> Result<Slot, SandboxError> {
        let euid = sys::geteuid();
        if euid != 0 {
            return Err(SandboxError::NotRoot { euid });
        }
        cgroup::hierarchy()?;
        Ok(Slot {
            box_id,
            parent: cgroup_parent.to_string(),
            cpu,
            netns: None,
            root: None,
            fresh_network: false,
        })
    }

    pub(crate) fn fresh_network(&mut self, fresh: bool) {
        self.fresh_network = fresh;
    }

    pub fn box_id(&self) -> u32 {
        self.box_id
    }

    /// Run `plan` in this slot (see [`crate::sandbox::run`] for the contract).
    pub fn run(&mut self, plan: &Plan) -> Result<Report, SandboxError> {
        let mut plan = plan.clone();
        plan.box_id = self.box_id;
        plan.cpu = self.cpu;
        plan.cgroup_parent.clone_from(&self.parent);
        let net = self.network_for(&plan)?;
        let limits = CgroupLimits {
            memory: plan.limits.memory_bytes,
            pids: plan.limits.processes,
            cpu: self.cpu,
        };
        let mut cg = RunCgroup::create(&self.parent, &format!("box-{}", self.box_id), &limits)?;
        let result = self
            .root_for(&plan)
            .and_then(|root| spawn::run_in(&plan, &mut cg, net, root));
        let removed = cg.remove();
        match (result, removed) {
            (Ok(r), Ok(())) => Ok(r),
            (Err(e), Ok(())) => Err(e),
            (Ok(_), Err(c)) => Err(c),
            (Err(run), Err(c)) => Err(SandboxError::WithCleanup {
                run: Box::new(run),
                cleanup: Box::new(c),
            }),
        }
    }

    fn network_for(&mut self, plan: &Plan) -> Result<Net, SandboxError> {
        if plan.network {
            return Ok(Net::Host);
        }
        if self.fresh_network {
            return Ok(Net::Fresh);
        }
        if self.netns.is_none() {
            self.netns = Some(loopback_namespace()?);
        }
        Ok(self
            .netns
            .as_ref()
            .map_or(Net::Fresh, |fd| Net::Join(fd.as_raw_fd())))
    }

    /// One-shot runs build their root fresh; a slot prepares it once (per
    /// `--network` setting) and each run joins a private copy of it.
    fn root_for(&mut self, plan: &Plan) -> Result<Root, SandboxError> {
        if self.fresh_network {
            return Ok(Root::Fresh);
        }
        if self
            .root
            .as_ref()
            .is_none_or(|(net, _)| *net != plan.network)
        {
            self.root = None;
            self.root = Some((plan.network, prepare_root(plan)?));
        }
        Ok(self
            .root
            .as_ref()
            .map_or(Root::Fresh, |(_, fd)| Root::Prepared(fd.as_raw_fd())))
    }

    /// Release what the slot keeps (its network and mount namespaces).
    pub fn close(self) -> Result<(), SandboxError> {
        drop(self.netns);
        drop(self.root);
        Ok(())
    }
}

use super::report::Report;

/// Build a slot's root once in a short-lived process with its own mount
/// namespace, and keep that namespace (not the process) through a descriptor.
fn prepare_root(plan: &Plan) -> Result<OwnedFd, SandboxError> {
    let mounts = MountPlan::template(&RootSpec {
        box_dir: Path::new("/"),
        uid: plan.box_uid(),
        tmp_bytes: 0,
        binds: &[],
        network: plan.network,
    })?;
    let (ready_r, ready_w) = sys::pipe().map_err(|e| SandboxError::sys("create a pipe", e))?;
    let (hold_r, hold_w) = sys::pipe().map_err(|e| SandboxError::sys("create a pipe", e))?;
    let (ready_fd, hold_fd) = (ready_w.as_raw_fd(), hold_r.as_raw_fd());
    let mut stack = vec![0u8; 128 * 1024];
    let mut builder = || child::template_main(&mounts, ready_fd, hold_fd);
    let pid = sys::clone_child(&mut builder, &mut stack, libc::CLONE_NEWNS)
        .map_err(|e| SandboxError::sys("clone the root builder", e))?;
    drop((ready_w, hold_r));
    let mut answer = [0u8; child::RECORD_LEN];
    let n = sys::read_some(ready_r.as_raw_fd(), &mut answer).unwrap_or(0);
    let opened = if n == 1 {
        std::fs::File::open(format!("/proc/{pid}/ns/mnt"))
            .map(OwnedFd::from)
            .map_err(|e| SandboxError::io("open", format!("/proc/{pid}/ns/mnt"), e))
    } else {
        Err(template_error(&mounts, &answer, n))
    };
    drop(hold_w);
    let _ = sys::kill(pid, libc::SIGKILL);
    sys::wait_pid(pid).map_err(|e| SandboxError::sys("reap the root builder", e))?;
    opened
}

fn template_error(mounts: &MountPlan, rec: &[u8; child::RECORD_LEN], n: usize) -> SandboxError {
    let word =
        |i: usize| u32::from_ne_bytes([rec[i * 4], rec[i * 4 + 1], rec[i * 4 + 2], rec[i * 4 + 3]]);
    if n < child::RECORD_LEN {
        return SandboxError::LostChild {
            detail: "the root builder ended without a word".into(),
        };
    }
    let source = std::io::Error::from_raw_os_error(word(2).cast_signed());
    let step = match child::Step::from_u32(word(1)) {
        Some(child::Step::Mount) => format!(
            "prepare the slot's root: {}",
            mounts.step_name(word(3) as usize)
        ),
        Some(s) => format!("prepare the slot's root: {}", s.name()),
        None => "prepare the slot's root".to_string(),
    };
    SandboxError::Child { step, source }
}

/// A new network namespace with only `lo`, up; kept alive by the returned fd.
/// Made on a short-lived thread: the namespace switch affects only that thread.
fn loopback_namespace() -> Result<OwnedFd, SandboxError> {
    let worker = std::thread::Builder::new()
        .name("judge-netns".into())
        .spawn(|| -> Result<OwnedFd, SandboxError> {
            sys::c_unshare(libc::CLONE_NEWNET).map_err(|e| {
                SandboxError::sys(
                    "create a network namespace",
                    std::io::Error::from_raw_os_error(e),
                )
            })?;
            sys::c_loopback_up().map_err(|e| {
                SandboxError::sys(
                    "bring up lo in the slot's namespace",
                    std::io::Error::from_raw_os_error(e),
                )
            })?;
            std::fs::File::open("/proc/thread-self/ns/net")
                .map(OwnedFd::from)
                .map_err(|e| SandboxError::io("open", "/proc/thread-self/ns/net", e))
        })
        .map_err(|e| SandboxError::sys("start the namespace thread", e))?;
    worker
        .join()
        .map_err(|_| SandboxError::sys("namespace thread", std::io::Error::other("panicked")))?
}

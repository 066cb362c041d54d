//! `SandboxSlot`: one box id used for many runs, paying per-slot setup once: its cgroup
//! (kept, each run measured from a baseline: `cgroup/`), a launcher that lives
//! in that cgroup and clones each run's init there (`launcher/`), a
//! loopback-only network namespace each run joins (creating one costs about
//! 0.6-0.8 ms CPU), and a prepared root each run takes a private copy of.
//!
//! `sandbox::run` uses a one-shot slot instead: no launcher (starting one would
//! cost as much as it saves once), a fresh root and network namespace, and a
//! cgroup of its own name (`box-<id>-once`), so a one-shot run may use the box
//! id of a slot that lives meanwhile, as it always could.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::cgroup::SlotCgroup;
use super::child;
use super::error::SandboxError;
use super::launcher::Launcher;
use super::mount::{MountPlan, RootSpec, mount_points};
use super::net::{self, Net};
use super::plan::Plan;
use super::record::{Record, Step};
use super::report::Report;
use super::spawn::{self, Launch};
use super::sys;

/// A reusable sandbox slot: `SandboxSlot::new(box_id, cgroup_parent, cpu)`, then
/// `slot.run(&plan)` as often as needed (one run at a time), then `close()`
/// (dropping it cleans up too, ignoring errors). The slot's box id, cgroup
/// parent and CPU replace the plan's.
#[derive(Debug)]
pub struct SandboxSlot {
    box_id: u32,
    parent: String,
    cpu: Option<u32>,
    one_shot: bool,
    cgroup: Option<SlotCgroup>,
    launcher: Option<Launcher>,
    netns: Option<OwnedFd>,
    /// The prepared root (a kept mount namespace) and what it was built for.
    root: Option<(RootKey, OwnedFd)>,
    /// CPU time init and the launcher spent in the cgroup in the last run.
    ours: Duration,
}

/// What a prepared root depends on: the `--network` setting (its /etc differs)
/// and the mount points of the extra binds (created in it, never by a run).
#[derive(Debug, PartialEq, Eq)]
struct RootKey {
    network: bool,
    points: Vec<(PathBuf, bool)>,
}

impl SandboxSlot {
    /// A slot for box `box_id` whose cgroup lives under `cgroup_parent`,
    /// optionally pinned to CPU `cpu`. Needs root. Fails with `CgroupSetup` when
    /// another live slot has this box id.
    pub fn new(
        box_id: u32,
        cgroup_parent: &str,
        cpu: Option<u32>,
    ) -> Result<SandboxSlot, SandboxError> {
        Self::with_cgroup(box_id, cgroup_parent, cpu, false)
    }

    /// The slot `sandbox::run` uses for its one run.
    pub(crate) fn one_shot(
        box_id: u32,
        cgroup_parent: &str,
        cpu: Option<u32>,
    ) -> Result<SandboxSlot, SandboxError> {
        Self::with_cgroup(box_id, cgroup_parent, cpu, true)
    }

    fn with_cgroup(
        box_id: u32,
        parent: &str,
        cpu: Option<u32>,
        one_shot: bool,
    ) -> Result<SandboxSlot, SandboxError> {
        let euid = sys::geteuid();
        if euid != 0 {
            return Err(SandboxError::NotRoot { euid });
        }
        let name = if one_shot {
            format!("box-{box_id}-once")
        } else {
            format!("box-{box_id}")
        };
        Ok(SandboxSlot {
            box_id,
            parent: parent.to_string(),
            cpu,
            one_shot,
            cgroup: Some(SlotCgroup::create(parent, &name, cpu)?),
            launcher: None,
            netns: None,
            root: None,
            ours: Duration::ZERO,
        })
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
        if self.one_shot {
            let net = if plan.network { Net::Host } else { Net::Fresh };
            let cgroup = self.cgroup.as_mut().ok_or_else(closed)?;
            return spawn::run_in(&plan, cgroup, Launch::Direct { net });
        }
        let netns = if plan.network {
            None
        } else {
            Some(self.netns_fd()?)
        };
        let template = self.root_for(&plan)?;
        self.ensure_launcher()?;
        let (Some(cgroup), Some(launcher)) = (self.cgroup.as_mut(), self.launcher.as_mut()) else {
            return Err(closed());
        };
        let inside = matches!(cgroup, SlotCgroup::V1(_));
        let _served_at_wake_up = spawn::ShortSlice::ask();
        let result = spawn::run_in(
            &plan,
            cgroup,
            Launch::Launched {
                launcher,
                template,
                netns,
                inside,
                ours: &mut self.ours,
            },
        );
        if launcher.is_broken() {
            self.drop_launcher();
        }
        result
    }

    /// Start the launcher if there is none; on v1 it joins the cgroup itself.
    fn ensure_launcher(&mut self) -> Result<(), SandboxError> {
        if self.launcher.is_some() {
            return Ok(());
        }
        let cgroup = self.cgroup.as_ref().ok_or_else(closed)?;
        match Launcher::spawn(cgroup.cpu_counter(), &cgroup.launcher_join_fds()) {
            Ok(launcher) => {
                self.launcher = Some(launcher);
                Ok(())
            }
            Err(e) => {
                let _ = cgroup.kill_all_but(None);
                Err(e)
            }
        }
    }

    /// A launcher that stopped answering as it should: stop it, and clear
    /// whatever of a run may be left in the cgroup.
    fn drop_launcher(&mut self) {
        if let Some(l) = self.launcher.take() {
            let _ = l.shutdown();
        }
        if let Some(cg) = &self.cgroup {
            let _ = cg.kill_all_but(None);
        }
    }

    fn netns_fd(&mut self) -> Result<RawFd, SandboxError> {
        if self.netns.is_none() {
            self.netns = Some(net::loopback_namespace()?);
        }
        self.netns
            .as_ref()
            .map(AsRawFd::as_raw_fd)
            .ok_or_else(closed)
    }

    /// The slot's prepared root for the plan's `--network` setting and bind
    /// mount points, built once per such pair.
    fn root_for(&mut self, plan: &Plan) -> Result<RawFd, SandboxError> {
        let key = RootKey {
            network: plan.network,
            points: mount_points(&plan.binds)?,
        };
        if self.root.as_ref().is_none_or(|(k, _)| *k != key) {
            self.root = None;
            self.root = Some((key, prepare_root(plan)?));
        }
        self.root
            .as_ref()
            .map(|(_, fd)| fd.as_raw_fd())
            .ok_or_else(closed)
    }

    /// Stop the launcher, remove the cgroup, release the namespaces.
    pub fn close(mut self) -> Result<(), SandboxError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), SandboxError> {
        let stopped = self.launcher.take().map_or(Ok(()), Launcher::shutdown);
        let removed = self.cgroup.take().map_or(Ok(()), SlotCgroup::remove);
        self.netns = None;
        self.root = None;
        SandboxError::with_cleanup(stopped, removed)
    }
}

impl Drop for SandboxSlot {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

fn closed() -> SandboxError {
    SandboxError::invalid("the slot is closed")
}

/// Build a slot's root once in a short-lived process with its own mount
/// namespace, and keep that namespace (not the process) through a descriptor.
fn prepare_root(plan: &Plan) -> Result<OwnedFd, SandboxError> {
    let mounts = MountPlan::template(&RootSpec {
        box_dir: Path::new("/"),
        uid: plan.box_uid(),
        tmp_bytes: 0,
        binds: &plan.binds,
        network: plan.network,
    })?;
    let (ready_r, ready_w) = sys::pipe().map_err(|e| SandboxError::sys("create a pipe", e))?;
    let (hold_r, hold_w) = sys::pipe().map_err(|e| SandboxError::sys("create a pipe", e))?;
    let (ready_fd, hold_fd) = (ready_w.as_raw_fd(), hold_r.as_raw_fd());
    let mut stack = vec![0u8; 128 * 1024];
    let mut builder = || child::template_main(&mounts, ready_fd, hold_fd);
    // SAFETY: the root builder makes only async-signal-safe calls (child.rs's
    // `template_main`: the `c_*` wrappers on the mount plan built here).
    let pid = unsafe { sys::clone_child(&mut builder, &mut stack, libc::CLONE_NEWNS) }
        .map_err(|e| SandboxError::sys("clone the root builder", e))?;
    drop((ready_w, hold_r));
    let mut answer = [0u8; Record::LEN];
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

fn template_error(mounts: &MountPlan, rec: &[u8; Record::LEN], n: usize) -> SandboxError {
    let failed = (n == Record::LEN).then(|| Record::decode(rec)).flatten();
    let Some(Record::Failed { step, errno, aux }) = failed else {
        return SandboxError::LostChild {
            detail: "the root builder ended without a word".into(),
        };
    };
    let source = std::io::Error::from_raw_os_error(errno.cast_signed());
    let step = match Step::from_u32(step) {
        Some(Step::Mount) => format!(
            "prepare the slot's root: {}",
            mounts.step_name(aux as usize)
        ),
        Some(s) => format!("prepare the slot's root: {}", s.name()),
        None => "prepare the slot's root".to_string(),
    };
    SandboxError::Child { step, source }
}

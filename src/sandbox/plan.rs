//! What to run and under which limits: the `Plan` builder, with the contract's
//! defaults (CONTRACT.md §1). Pure data; nothing here touches the system.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Resource limits of one run. Every run-wide limit (cpu, memory, processes) covers
/// all processes and threads of the run together.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// CPU time (user+system of the whole run); `None` = unlimited.
    pub cpu_time: Option<Duration>,
    /// Wall-clock time; `None` = `2*cpu_time+1s` with a cpu limit, else 30 s.
    pub wall_time: Option<Duration>,
    /// Memory of the whole run's cgroup, `/tmp` pages included.
    pub memory_bytes: u64,
    /// Processes + threads alive at once.
    pub processes: u32,
    /// Largest file the program may write (RLIMIT_FSIZE), stdout/stderr included.
    pub output_bytes: u64,
    /// Stack rlimit; `None` = unlimited (contract §1, 2026-12): the memory
    /// cgroup bounds the stack, so a deep recursion may use the whole memory
    /// limit while threads get the C library's default stack (glibc: 2 MiB,
    /// which it uses when `RLIMIT_STACK` is unlimited).
    pub stack_bytes: Option<u64>,
    /// Open file descriptors (RLIMIT_NOFILE).
    pub open_files: u32,
    /// Size of the `/tmp` tmpfs.
    pub tmp_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpu_time: None,
            wall_time: None,
            memory_bytes: 512 << 20,
            processes: 64,
            output_bytes: 64 << 20,
            stack_bytes: None,
            open_files: 64,
            tmp_bytes: 64 << 20,
        }
    }
}

/// `RLIM_INFINITY` on Linux: the stack rlimit when none is asked for.
pub const STACK_UNLIMITED: u64 = u64::MAX;

impl Limits {
    /// The wall-clock limit in force: explicit, else `2*cpu+1s`, else 30 s.
    pub fn effective_wall_time(&self) -> Duration {
        match (self.wall_time, self.cpu_time) {
            (Some(w), _) => w,
            (None, Some(cpu)) => cpu * 2 + Duration::from_secs(1),
            (None, None) => Duration::from_secs(30),
        }
    }

    /// The stack rlimit in force (`u64::MAX` = `RLIM_INFINITY`).
    pub fn effective_stack(&self) -> u64 {
        self.stack_bytes.unwrap_or(STACK_UNLIMITED)
    }
}

/// Where one of the program's standard streams goes.
#[derive(Debug, Clone, Default)]
pub enum Stdio {
    /// `/dev/null`.
    #[default]
    Null,
    /// The caller's own stream of the same number.
    Inherit,
    /// A host path: read for stdin; created or truncated for stdout/stderr.
    File(PathBuf),
    /// An already-open descriptor (e.g. one end of a pipe). It is *moved* into the
    /// run: the supervisor closes its own copy as soon as the sandbox holds one, so
    /// the other end sees EOF when the program closes it. A plan holding one can
    /// therefore run once; a second run fails with `SandboxError::StdioTaken`.
    Fd(SharedFd),
}

impl Stdio {
    /// Wrap an open descriptor (see [`Stdio::Fd`]).
    pub fn fd(fd: OwnedFd) -> Self {
        Stdio::Fd(SharedFd(Arc::new(Mutex::new(Some(fd)))))
    }
}

/// An open descriptor that the first run takes out of the plan.
#[derive(Debug, Clone)]
pub struct SharedFd(Arc<Mutex<Option<OwnedFd>>>);

impl SharedFd {
    pub(crate) fn take(&self) -> Option<OwnedFd> {
        match self.0.lock() {
            Ok(mut guard) => guard.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        }
    }
}

/// An extra bind mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    pub host: PathBuf,
    /// Absolute path inside the sandbox.
    pub inside: PathBuf,
    pub writable: bool,
}

/// Which seccomp policy the run gets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SeccompPolicy {
    /// `seccomp/default.json`, compiled into the binary.
    #[default]
    Default,
    /// No filter at all (still `no_new_privs`, no capabilities).
    None,
    /// A seccompiler JSON file; every filter in it is installed.
    File(PathBuf),
}

/// Stops a run from another thread. Cloneable, `Send + Sync`. A cancelled run
/// kills the whole run within one supervision tick (≤ 10 ms) and returns
/// `Err(SandboxError::Cancelled)`: its figures would describe a run that was cut
/// short by the caller, not by the program or a limit.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn new() -> Self {
        Self::default()
    }
    /// Ask every run holding this handle to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Everything about one run. Build with [`Plan::new`] and the chained setters.
#[derive(Debug, Clone)]
pub struct Plan {
    pub(crate) program: String,
    pub(crate) args: Vec<String>,
    pub(crate) limits: Limits,
    pub(crate) box_dir: Option<PathBuf>,
    pub(crate) box_id: u32,
    pub(crate) cpu: Option<u32>,
    pub(crate) binds: Vec<Bind>,
    pub(crate) stdin: Stdio,
    pub(crate) stdout: Stdio,
    pub(crate) stderr: Stdio,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) seccomp: SeccompPolicy,
    pub(crate) network: bool,
    pub(crate) cgroup_parent: String,
    pub(crate) cancel: Option<Cancel>,
}

/// First uid/gid of the boxes: box N runs as 60000+N.
pub const BOX_UID_BASE: u32 = 60000;
/// The cgroup parent when none is given.
pub const DEFAULT_CGROUP_PARENT: &str = "judge-runner";

impl Plan {
    /// A plan with the contract's defaults: stdin `/dev/null`, stdout/stderr
    /// inherited, box id 0, a fresh temporary box dir, the default seccomp policy,
    /// an isolated network, cgroup parent `judge-runner`.
    pub fn new(program: impl Into<String>) -> Self {
        Plan {
            program: program.into(),
            args: Vec::new(),
            limits: Limits::default(),
            box_dir: None,
            box_id: 0,
            cpu: None,
            binds: Vec::new(),
            stdin: Stdio::Null,
            stdout: Stdio::Inherit,
            stderr: Stdio::Inherit,
            env: Vec::new(),
            seccomp: SeccompPolicy::Default,
            network: false,
            cgroup_parent: DEFAULT_CGROUP_PARENT.to_string(),
            cancel: None,
        }
    }
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
    pub fn cpu_time(mut self, t: Duration) -> Self {
        self.limits.cpu_time = Some(t);
        self
    }
    pub fn wall_time(mut self, t: Duration) -> Self {
        self.limits.wall_time = Some(t);
        self
    }
    pub fn memory(mut self, bytes: u64) -> Self {
        self.limits.memory_bytes = bytes;
        self
    }
    pub fn processes(mut self, n: u32) -> Self {
        self.limits.processes = n;
        self
    }
    pub fn output(mut self, bytes: u64) -> Self {
        self.limits.output_bytes = bytes;
        self
    }
    pub fn stack(mut self, bytes: u64) -> Self {
        self.limits.stack_bytes = Some(bytes);
        self
    }
    pub fn open_files(mut self, n: u32) -> Self {
        self.limits.open_files = n;
        self
    }
    pub fn tmp_size(mut self, bytes: u64) -> Self {
        self.limits.tmp_bytes = bytes;
        self
    }
    /// Host dir mounted read-write at `/box` (and made writable by the box uid for
    /// the run); without it, a fresh temporary dir is used and removed afterwards.
    pub fn box_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.box_dir = Some(dir.into());
        self
    }
    pub fn box_id(mut self, id: u32) -> Self {
        self.box_id = id;
        self
    }
    pub fn cpu(mut self, cpu: u32) -> Self {
        self.cpu = Some(cpu);
        self
    }
    pub fn bind(
        mut self,
        host: impl Into<PathBuf>,
        inside: impl Into<PathBuf>,
        writable: bool,
    ) -> Self {
        self.binds.push(Bind {
            host: host.into(),
            inside: inside.into(),
            writable,
        });
        self
    }
    pub fn stdin(mut self, s: Stdio) -> Self {
        self.stdin = s;
        self
    }
    pub fn stdout(mut self, s: Stdio) -> Self {
        self.stdout = s;
        self
    }
    pub fn stderr(mut self, s: Stdio) -> Self {
        self.stderr = s;
        self
    }
    /// Add (or replace) one environment variable.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }
    pub fn seccomp(mut self, policy: SeccompPolicy) -> Self {
        self.seccomp = policy;
        self
    }
    /// Keep the host's network (default: only a loopback device).
    pub fn network(mut self, on: bool) -> Self {
        self.network = on;
        self
    }
    pub fn cgroup_parent(mut self, name: impl Into<String>) -> Self {
        self.cgroup_parent = name.into();
        self
    }
    pub fn cancel(mut self, cancel: Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    pub fn program(&self) -> &str {
        &self.program
    }
    pub fn get_limits(&self) -> &Limits {
        &self.limits
    }
    pub fn get_box_id(&self) -> u32 {
        self.box_id
    }
    pub fn get_cpu(&self) -> Option<u32> {
        self.cpu
    }
    pub fn get_box_dir(&self) -> Option<&Path> {
        self.box_dir.as_deref()
    }
    /// The uid and gid the program runs as.
    pub fn box_uid(&self) -> u32 {
        BOX_UID_BASE.saturating_add(self.box_id)
    }
}

//! Helpers for the sandbox tests: a cgroup parent unique to each test (removed at
//! the end), distinct box ids, a box dir, static C probes compiled with the host
//! gcc (or taken prebuilt from `JUDGE_PROBES_DIR`, as in the cgroup-v2 VM).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use judge_runner::sandbox::{self, Plan, Report, SandboxSlot};

/// One test's sandbox context: its own cgroup parent and box id.
pub struct Ctx {
    pub parent: String,
    pub box_id: u32,
    pub dir: tempfile::TempDir,
}

static NEXT_BOX: AtomicU32 = AtomicU32::new(1);

/// Timing assertions get this factor of room (the cgroup-v2 VM runs under TCG).
pub fn slow() -> f64 {
    std::env::var("JUDGE_TEST_SLOWDOWN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.0)
}

impl Ctx {
    pub fn new(test: &str) -> Ctx {
        assert_eq!(
            nix::unistd::geteuid().as_raw(),
            0,
            "sandbox tests run as root"
        );
        // Detect (on v2: prepare) the hierarchy in this process first, so that a
        // `judge-runner` child started by a test finds it prepared.
        sandbox::cgroup_version().unwrap();
        Ctx {
            parent: format!("judge-runner-test-{}-{test}", std::process::id()),
            box_id: NEXT_BOX.fetch_add(1, Ordering::SeqCst),
            dir: tempfile::Builder::new()
                .prefix("sbx-test-")
                .tempdir()
                .unwrap(),
        }
    }

    /// A plan for this test: its box id, cgroup parent and box dir.
    pub fn plan(&self, program: &str) -> Plan {
        Plan::new(program)
            .box_id(self.box_id)
            .cgroup_parent(self.parent.clone())
            .box_dir(self.dir.path())
    }

    /// Run `plan`: tests with an odd box id go through a `SandboxSlot` (prepared root,
    /// kept network namespace), the others through `sandbox::run` (fresh root), so
    /// the suite covers both paths.
    pub fn run(&self, plan: &Plan) -> Report {
        let result = if self.via_slot() {
            let mut slot = SandboxSlot::new(self.box_id, &self.parent, plan.get_cpu()).unwrap();
            let r = slot.run(plan);
            slot.close().unwrap();
            r
        } else {
            sandbox::run(plan)
        };
        result.unwrap_or_else(|e| panic!("sandbox failed: {e}"))
    }

    pub fn via_slot(&self) -> bool {
        self.box_id % 2 == 1
    }

    /// Copy probe `name` into the box as `/box/<name>` and return its inside path.
    pub fn probe(&self, name: &str) -> String {
        let bin = probe(name);
        let dst = self.dir.path().join(name);
        std::fs::copy(&bin, &dst).unwrap();
        format!("/box/{name}")
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap_or_default()
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        let left = sandbox::children_of_parent(&self.parent).unwrap_or_default();
        let removed = sandbox::remove_parent(&self.parent);
        if !std::thread::panicking() {
            assert!(left.is_empty(), "cgroups left behind: {left:?}");
            removed.unwrap();
        }
    }
}

static BUILD_LOCK: Mutex<()> = Mutex::new(());

/// Path of the static probe binary `name` (from tests/probes/<name>.c).
pub fn probe(name: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("JUDGE_PROBES_DIR") {
        let p = Path::new(&dir).join(name);
        assert!(p.exists(), "prebuilt probe {} missing", p.display());
        return p;
    }
    let _guard = BUILD_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("probes");
    std::fs::create_dir_all(&out_dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/probes")
        .join(format!("{name}.c"));
    let out = out_dir.join(name);
    let fresh = match (std::fs::metadata(&out), std::fs::metadata(&src)) {
        (Ok(o), Ok(s)) => o.modified().unwrap() >= s.modified().unwrap(),
        _ => false,
    };
    if !fresh {
        let tmp = out_dir.join(format!("{name}.tmp{}", std::process::id()));
        let st = Command::new("gcc")
            .args(["-static", "-O1", "-pthread", "-o"])
            .arg(&tmp)
            .arg(&src)
            .status()
            .expect("gcc");
        assert!(st.success(), "gcc failed for {name}");
        std::fs::rename(&tmp, &out).unwrap();
    }
    out
}

/// Compile every probe (used by .ci/run to prepare the cgroup-v2 VM).
pub fn all_probe_names() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/probes");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".c")
                .map(str::to_string)
        })
        .collect();
    names.sort();
    names
}

/// The slot's launcher on cgroup v1: the one process its cgroup holds between
/// runs (on v2 the launcher lives outside the run cgroup: `None`).
pub fn launcher_pid(cx: &Ctx) -> Option<u32> {
    let procs = Path::new("/sys/fs/cgroup/pids")
        .join(&cx.parent)
        .join(format!("box-{}", cx.box_id))
        .join("cgroup.procs");
    let text = std::fs::read_to_string(procs).ok()?;
    let pids: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    match pids.as_slice() {
        [pid] => Some(*pid),
        _ => None,
    }
}

/// Run `plan` in `slot` with stdout captured; (report, stdout).
pub fn capture_in(slot: &mut SandboxSlot, plan: Plan) -> (Report, String) {
    let out = tempfile::NamedTempFile::new().unwrap();
    let plan = plan.stdout(judge_runner::sandbox::Stdio::File(out.path().to_path_buf()));
    let r = slot
        .run(&plan)
        .unwrap_or_else(|e| panic!("sandbox failed: {e}"));
    (r, std::fs::read_to_string(out.path()).unwrap())
}

/// The uid (and gid) of the tests that run our binary as somebody else.
pub const OTHER_UID: u32 = 65534;

/// Our binary, copied where [`OTHER_UID`] can reach it. The clone may sit under a
/// directory that uid cannot enter (root's home is mode 0700), so every test that
/// runs the binary (or a probe) as another uid goes through this one helper.
pub struct ReachableCopy {
    dir: tempfile::TempDir,
}

impl ReachableCopy {
    /// Copy `judge-runner` into a fresh mode-0755 directory under the temp dir.
    pub fn of_judge_runner() -> ReachableCopy {
        Self::of(Path::new(env!("CARGO_BIN_EXE_judge-runner")))
    }

    /// Copy the executable `src` into a fresh mode-0755 directory under the temp
    /// dir (checked: every directory above it lets others through).
    pub fn of(src: &Path) -> ReachableCopy {
        let dir = tempfile::Builder::new()
            .prefix("jr-other-uid-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        for up in dir.path().ancestors().skip(1) {
            let mode = std::fs::metadata(up).unwrap().permissions().mode();
            assert!(
                mode & 0o001 != 0,
                "{} (mode {mode:o}) keeps uid {OTHER_UID} out: set TMPDIR to a directory it can reach",
                up.display()
            );
        }
        let copy = ReachableCopy { dir };
        let dst = copy.path(src.file_name().unwrap().to_str().unwrap());
        std::fs::copy(src, &dst).unwrap();
        std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o755)).unwrap();
        copy
    }

    /// The copy's directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A path in the copy's directory (for files the other uid must read too).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A command running the copied executable `name` as [`OTHER_UID`], in `/`.
    pub fn command_as_other_uid(&self, name: &str) -> Command {
        let mut c = Command::new(self.path(name));
        c.uid(OTHER_UID).gid(OTHER_UID).current_dir("/");
        c
    }
}

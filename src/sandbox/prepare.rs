//! Supervisor side, before clone: turn a `Plan` into everything the child needs
//! ready-made (open descriptors, C strings, mount operations, compiled filters),
//! so the child never allocates. Also owns the box dir for the run's duration.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::error::SandboxError;
use super::mount::{MountPlan, RootSpec};
use super::plan::{Plan, Stdio};
use super::rlimit::{self, Rlimit};
use super::seccomp::{self, Filters};
use super::sys;

/// The box dir for one run: a fresh temp dir (removed on drop) or the caller's dir,
/// whose owner and mode are restored after the run.
#[derive(Debug)]
pub(crate) enum BoxDir {
    Temp(tempfile::TempDir),
    Given {
        path: PathBuf,
        uid: u32,
        gid: u32,
        mode: u32,
    },
}

impl BoxDir {
    fn open(plan: &Plan) -> Result<Self, SandboxError> {
        let uid = plan.box_uid();
        match &plan.box_dir {
            None => {
                let dir = tempfile::Builder::new()
                    .prefix("judge-runner-box-")
                    .tempdir()
                    .map_err(|e| SandboxError::io("create the box dir", std::env::temp_dir(), e))?;
                std::os::unix::fs::chown(dir.path(), Some(uid), Some(uid))
                    .map_err(|e| SandboxError::io("chown the box dir", dir.path(), e))?;
                Ok(BoxDir::Temp(dir))
            }
            Some(given) => {
                let path = std::fs::canonicalize(given)
                    .map_err(|e| SandboxError::io("open the box dir", given, e))?;
                let meta = std::fs::metadata(&path)
                    .map_err(|e| SandboxError::io("stat the box dir", &path, e))?;
                if !meta.is_dir() {
                    return Err(SandboxError::invalid(format!(
                        "box {} is not a directory",
                        path.display()
                    )));
                }
                std::os::unix::fs::chown(&path, Some(uid), Some(uid))
                    .map_err(|e| SandboxError::io("chown the box dir", &path, e))?;
                Ok(BoxDir::Given {
                    path,
                    uid: meta.uid(),
                    gid: meta.gid(),
                    mode: meta.mode(),
                })
            }
        }
    }

    pub(crate) fn path(&self) -> &Path {
        match self {
            BoxDir::Temp(t) => t.path(),
            BoxDir::Given { path, .. } => path,
        }
    }

    /// Give the caller's dir back as it was; remove a temp dir.
    pub(crate) fn finish(self) -> Result<(), SandboxError> {
        match self {
            BoxDir::Temp(t) => {
                let path = t.path().to_path_buf();
                t.close()
                    .map_err(|e| SandboxError::io("remove the box dir", path, e))
            }
            BoxDir::Given {
                path,
                uid,
                gid,
                mode,
            } => {
                std::os::unix::fs::chown(&path, Some(uid), Some(gid))
                    .map_err(|e| SandboxError::io("restore the box dir owner", &path, e))?;
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o7777))
                    .map_err(|e| SandboxError::io("restore the box dir mode", &path, e))
            }
        }
    }
}

/// Everything prepared for one run.
pub(crate) struct Prepared {
    pub box_dir: BoxDir,
    pub parts: Parts,
}

/// The ready-made pieces the child uses.
pub(crate) struct Parts {
    /// Descriptors for 0, 1, 2 (None = inherit); each ≥ 3, close-on-exec.
    pub stdio: [Option<OwnedFd>; 3],
    /// Host files the program writes to as stdout/stderr (output-limit check).
    pub output_files: Vec<PathBuf>,
    pub mounts: MountPlan,
    pub filters: Filters,
    pub exec_paths: Vec<CString>,
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
    pub rlimits: Vec<Rlimit>,
}

impl Prepared {
    /// `prepared_root`: the run joins a slot's prepared root, so only the per-run
    /// mounts are planned.
    pub(crate) fn new(plan: &Plan, prepared_root: bool) -> Result<Self, SandboxError> {
        if plan.program.is_empty() {
            return Err(SandboxError::invalid("no program to run"));
        }
        let filters = seccomp::filters_for(&plan.seccomp)?;
        let box_dir = BoxDir::open(plan)?;
        match Parts::build(plan, box_dir.path(), filters, prepared_root) {
            Ok(parts) => Ok(Prepared { box_dir, parts }),
            Err(e) => {
                let _ = box_dir.finish();
                Err(e)
            }
        }
    }
}

impl Parts {
    fn build(
        plan: &Plan,
        box_path: &Path,
        filters: Filters,
        prepared_root: bool,
    ) -> Result<Self, SandboxError> {
        let stdio = [
            open_stdio(&plan.stdin, "stdin", false)?,
            open_stdio(&plan.stdout, "stdout", true)?,
            open_stdio(&plan.stderr, "stderr", true)?,
        ];
        let output_files = [&plan.stdout, &plan.stderr]
            .into_iter()
            .filter_map(|s| match s {
                Stdio::File(p) => Some(p.clone()),
                _ => None,
            })
            .collect();
        let root = RootSpec {
            box_dir: box_path,
            uid: plan.box_uid(),
            tmp_bytes: plan.limits.tmp_bytes,
            binds: &plan.binds,
            network: plan.network,
        };
        let mounts = if prepared_root {
            MountPlan::per_run(&root)?
        } else {
            MountPlan::build(&root)?
        };
        let env = environment(plan);
        let path_var = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        Ok(Parts {
            stdio,
            output_files,
            mounts,
            filters,
            exec_paths: exec_candidates(&plan.program, &path_var)?,
            argv: std::iter::once(&plan.program)
                .chain(&plan.args)
                .map(|a| c_string(a, "argument"))
                .collect::<Result<_, _>>()?,
            envp: env
                .iter()
                .map(|(k, v)| c_string(&format!("{k}={v}"), "environment entry"))
                .collect::<Result<_, _>>()?,
            rlimits: rlimit::for_plan(plan),
        })
    }

    /// Close the supervisor's copies of the stdio descriptors (after clone).
    pub(crate) fn close_stdio(&mut self) {
        self.stdio = [None, None, None];
    }
}

fn c_string(s: &str, what: &str) -> Result<CString, SandboxError> {
    CString::new(s).map_err(|_| SandboxError::invalid(format!("{what} {s:?} contains a NUL byte")))
}

/// The contract's environment, then the plan's entries (a later one replaces an
/// earlier one of the same name).
fn environment(plan: &Plan) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = [
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("HOME", "/box"),
        ("LANG", "C.UTF-8"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (k, v) in &plan.env {
        match env.iter_mut().find(|(name, _)| name == k) {
            Some(slot) => slot.1 = v.clone(),
            None => env.push((k.clone(), v.clone())),
        }
    }
    env
}

/// A name with a `/` is used as is (relative to `/box`); a bare name is looked up
/// in the box's PATH, like execvp does, but with the paths built here.
fn exec_candidates(program: &str, path_var: &str) -> Result<Vec<CString>, SandboxError> {
    if program.contains('/') {
        return Ok(vec![c_string(program, "program")?]);
    }
    path_var
        .split(':')
        .map(|dir| if dir.is_empty() { "." } else { dir })
        .map(|dir| {
            c_string(
                &format!("{}/{program}", dir.trim_end_matches('/')),
                "program",
            )
        })
        .collect()
}

fn open_stdio(
    s: &Stdio,
    which: &'static str,
    write: bool,
) -> Result<Option<OwnedFd>, SandboxError> {
    let fd: OwnedFd = match s {
        Stdio::Inherit => return Ok(None),
        Stdio::Null => File::options()
            .read(true)
            .write(true)
            .open("/dev/null")
            .map_err(|e| SandboxError::io("open", "/dev/null", e))?
            .into(),
        Stdio::File(path) => {
            let file = if write {
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(path)
            } else {
                File::open(path)
            };
            file.map_err(|e| SandboxError::io(which, path, e))?.into()
        }
        Stdio::Fd(shared) => shared.take().ok_or(SandboxError::StdioTaken(which))?,
    };
    // Numbers 0-2 would be overwritten by the child's dup2 of another stream.
    if fd.as_raw_fd() < 3 {
        return sys::dup_cloexec_at_least(fd.as_raw_fd(), 3)
            .map(Some)
            .map_err(|e| SandboxError::sys("duplicate a stdio descriptor", e));
    }
    Ok(Some(fd))
}

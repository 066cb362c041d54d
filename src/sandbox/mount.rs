//! The fresh root. `MountPlan::build` (supervisor, before clone) turns the plan into
//! a list of ready-made operations with every path already a `CString`;
//! `MountPlan::enter` (child, pid 1 of the new namespaces) performs them with raw
//! system calls only, then `pivot_root`s into the result.
//!
//! The new root is a small tmpfs mounted over a fixed empty directory of the host
//! (`staging_dir()`); every run mounts its own tmpfs there inside its private mount
//! namespace, so concurrent runs never see each other's and the host sees nothing.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::error::SandboxError;
use super::plan::Bind;
use super::sys;

const RO: libc::c_ulong = libc::MS_RDONLY;
const NOSUID_NODEV: libc::c_ulong = libc::MS_NOSUID | libc::MS_NODEV;

/// Host directories shared read-only (or re-created as the same symlink).
const SYSTEM_DIRS: [&str; 8] = [
    "/usr",
    "/usr/local",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
];
/// The parts of `/etc` programs need: the dynamic loader's cache, `alternatives`
/// (python3, java and others are links through it), TLS certificates, the JVM's
/// configuration, Mono's (`/etc/mono/config` maps `System.Native` to
/// `libmono-native.so`: without it no C# program opens a file), time zone and
/// name-service switch.
const ETC_ENTRIES: [&str; 11] = [
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "ssl",
    "ca-certificates",
    "java-17-openjdk",
    "java-21-openjdk",
    "mono",
    "localtime",
    "nsswitch.conf",
];
const DEV_NODES: [&str; 5] = ["null", "zero", "full", "random", "urandom"];

/// One step of building the root, all arguments ready for the child.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Tmpfs {
        target: CString,
        flags: libc::c_ulong,
        data: CString,
    },
    /// Bind `source` on `target` (a dir, or an empty file created first), then apply
    /// `flags` (read-only, nosuid, nodev...) with a bind remount.
    Bind {
        source: CString,
        target: CString,
        file: bool,
        flags: libc::c_ulong,
    },
    Mkdir {
        path: CString,
    },
    Symlink {
        target: CString,
        link: CString,
    },
    File {
        path: CString,
        contents: Vec<u8>,
    },
    Proc {
        target: CString,
    },
    Remount {
        target: CString,
        flags: libc::c_ulong,
    },
    /// Attach a detached mount (from `open_tree`) at `target` (a dir, or an empty
    /// file created first), then apply `flags` with a bind remount.
    Attach {
        tree: RawFd,
        target: CString,
        file: bool,
        flags: libc::c_ulong,
    },
}

/// Every operation of the run's root, with a description per step for errors.
#[derive(Debug)]
pub(crate) struct MountPlan {
    root: CString,
    ops: Vec<Op>,
    names: Vec<String>,
    /// Detached clones of host mounts (`open_tree`) that `Op::Attach` uses.
    trees: Vec<OwnedFd>,
}

/// The host directory every run mounts its fresh root tmpfs over.
pub(crate) fn staging_dir() -> PathBuf {
    if Path::new("/run").is_dir() {
        PathBuf::from("/run/judge-runner-root")
    } else {
        std::env::temp_dir().join("judge-runner-root")
    }
}

fn cstr(p: &Path) -> Result<CString, SandboxError> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| SandboxError::invalid(format!("path {} contains a NUL byte", p.display())))
}

/// What goes into the box besides the program's own choices.
pub(crate) struct RootSpec<'a> {
    pub box_dir: &'a Path,
    pub uid: u32,
    pub tmp_bytes: u64,
    pub binds: &'a [Bind],
    pub network: bool,
}

impl MountPlan {
    /// Supervisor side, fresh-root path: every mount of the run, built by the
    /// child on a tmpfs over the staging dir, then `pivot()`.
    pub(crate) fn build(spec: &RootSpec<'_>) -> Result<Self, SandboxError> {
        let mut plan = Self::base(spec)?;
        let staging = staging_dir();
        plan.bind(spec.box_dir, &staging.join("box"), "/box", NOSUID_NODEV)?;
        let tmp = format!("size={},mode=1777", spec.tmp_bytes.max(4096));
        plan.tmpfs(&staging.join("tmp"), "/tmp", &tmp, NOSUID_NODEV)?;
        plan.push(
            "mount proc on /proc".to_string(),
            Op::Proc {
                target: cstr(&staging.join("proc"))?,
            },
        );
        for b in spec.binds {
            plan.extra_bind(&staging, b)?;
        }
        Ok(plan)
    }

    /// A slot's prepared root: everything that does not change between its runs
    /// (system dirs, /etc, /dev, the mount points), built once in a mount
    /// namespace the slot keeps.
    ///
    /// The mount points of the spec's extra binds are created here too: the runs'
    /// copies of this root share its tmpfs, so a point `per_run` had to create
    /// would persist into every later run. The slot keeps one template per set of
    /// points (`mount_points`), so a run never adds to the root it starts from.
    pub(crate) fn template(spec: &RootSpec<'_>) -> Result<Self, SandboxError> {
        let mut plan = Self::base(spec)?;
        let staging = staging_dir();
        for (inside, file) in mount_points(spec.binds)? {
            plan.mkdir_parents(&staging, &inside)?;
            let path = cstr(&staging.join(inside.strip_prefix("/").unwrap_or(&inside)))?;
            let name = format!("create {}", inside.display());
            if file {
                plan.push(
                    name,
                    Op::File {
                        path,
                        contents: Vec::new(),
                    },
                );
            } else {
                plan.push(name, Op::Mkdir { path });
            }
        }
        Ok(plan)
    }

    /// Supervisor side, slot path: the per-run mounts on top of the slot's
    /// prepared root, in the run's private copy of it. The box dir and extra binds
    /// are cloned here (`open_tree`) while the host's tree is still reachable and
    /// attached by the child (`move_mount`); `/tmp` and `/proc` are fresh; then
    /// the root is made read-only.
    pub(crate) fn per_run(spec: &RootSpec<'_>) -> Result<Self, SandboxError> {
        let mut plan = MountPlan {
            root: CString::from(c"/"),
            ops: Vec::new(),
            names: Vec::new(),
            trees: Vec::new(),
        };
        let root = Path::new("/");
        plan.attach(spec.box_dir, Path::new("/box"), NOSUID_NODEV)?;
        let tmp = format!("size={},mode=1777", spec.tmp_bytes.max(4096));
        plan.tmpfs(Path::new("/tmp"), "/tmp", &tmp, NOSUID_NODEV)?;
        plan.push(
            "mount proc on /proc".to_string(),
            Op::Proc {
                target: CString::from(c"/proc"),
            },
        );
        for b in spec.binds {
            let source = checked_bind(b)?;
            plan.mkdir_parents(root, &b.inside)?;
            let flags = if b.writable {
                NOSUID_NODEV
            } else {
                RO | NOSUID_NODEV
            };
            plan.attach(&source, &b.inside, flags)?;
        }
        plan.push(
            "make / read-only".to_string(),
            Op::Remount {
                target: CString::from(c"/"),
                flags: RO | NOSUID_NODEV,
            },
        );
        Ok(plan)
    }

    /// What every root has: the tmpfs, system dirs, /etc, /dev, mount points.
    fn base(spec: &RootSpec<'_>) -> Result<Self, SandboxError> {
        let staging = staging_dir();
        match std::fs::create_dir_all(&staging) {
            Ok(()) => {}
            Err(e) => return Err(SandboxError::io("create the staging dir", &staging, e)),
        }
        let mut plan = MountPlan {
            root: cstr(&staging)?,
            ops: Vec::new(),
            names: Vec::new(),
            trees: Vec::new(),
        };
        plan.tmpfs(
            &staging,
            "/",
            "size=4m,nr_inodes=4096,mode=755",
            NOSUID_NODEV,
        )?;
        for dir in SYSTEM_DIRS {
            plan.system_dir(&staging, Path::new(dir))?;
        }
        plan.etc(&staging, spec)?;
        plan.dev(&staging)?;
        for dir in ["/box", "/tmp", "/proc"] {
            plan.mkdir(&staging, dir)?;
        }
        Ok(plan)
    }

    /// Clone `source` (supervisor) for the child to attach at `target`.
    fn attach(
        &mut self,
        source: &Path,
        target: &Path,
        flags: libc::c_ulong,
    ) -> Result<(), SandboxError> {
        let file = !std::fs::metadata(source)
            .map_err(|e| SandboxError::io("bind source", source, e))?
            .is_dir();
        let tree = sys::open_tree_clone(&cstr(source)?)
            .map_err(|e| SandboxError::io("clone the mount of", source, e))?;
        self.push(
            format!("bind {} on {}", source.display(), target.display()),
            Op::Attach {
                tree: tree.as_raw_fd(),
                target: cstr(target)?,
                file,
                flags,
            },
        );
        self.trees.push(tree);
        Ok(())
    }

    fn mkdir_parents(&mut self, root: &Path, inside: &Path) -> Result<(), SandboxError> {
        let rel = inside.strip_prefix("/").unwrap_or(inside);
        let parts: Vec<_> = rel.components().collect();
        let mut dir = root.to_path_buf();
        for comp in parts.iter().take(parts.len().saturating_sub(1)) {
            dir.push(comp);
            self.push(
                format!("create {}", dir.display()),
                Op::Mkdir { path: cstr(&dir)? },
            );
        }
        Ok(())
    }

    fn push(&mut self, name: String, op: Op) {
        self.names.push(name);
        self.ops.push(op);
    }

    fn tmpfs(
        &mut self,
        target: &Path,
        inside: &str,
        data: &str,
        flags: libc::c_ulong,
    ) -> Result<(), SandboxError> {
        let data = CString::new(data).map_err(|_| SandboxError::invalid("tmpfs options"))?;
        self.push(
            format!("mount tmpfs on {inside}"),
            Op::Tmpfs {
                target: cstr(target)?,
                flags,
                data,
            },
        );
        Ok(())
    }

    fn mkdir(&mut self, staging: &Path, inside: &str) -> Result<(), SandboxError> {
        let path = staging.join(inside.trim_start_matches('/'));
        self.push(format!("create {inside}"), Op::Mkdir { path: cstr(&path)? });
        Ok(())
    }

    fn bind(
        &mut self,
        source: &Path,
        target: &Path,
        inside: &str,
        flags: libc::c_ulong,
    ) -> Result<(), SandboxError> {
        let meta =
            std::fs::metadata(source).map_err(|e| SandboxError::io("bind source", source, e))?;
        self.push(
            format!("bind {} on {inside}", source.display()),
            Op::Bind {
                source: cstr(source)?,
                target: cstr(target)?,
                file: !meta.is_dir(),
                flags,
            },
        );
        Ok(())
    }

    /// A system dir: the same symlink when the host has one (merged /usr), a
    /// read-only bind when it is a directory, nothing when it is absent.
    fn system_dir(&mut self, staging: &Path, dir: &Path) -> Result<(), SandboxError> {
        let Ok(meta) = std::fs::symlink_metadata(dir) else {
            return Ok(());
        };
        let inside = dir.display().to_string();
        let target = staging.join(dir.strip_prefix("/").unwrap_or(dir));
        if meta.file_type().is_symlink() {
            let link =
                std::fs::read_link(dir).map_err(|e| SandboxError::io("read link", dir, e))?;
            self.push(
                format!("link {inside}"),
                Op::Symlink {
                    target: cstr(&link)?,
                    link: cstr(&target)?,
                },
            );
        } else if meta.is_dir() {
            if dir.starts_with("/usr") && dir != Path::new("/usr") && !is_mount_point(dir) {
                return Ok(()); // already visible through the /usr bind
            }
            self.push(
                format!("create {inside}"),
                Op::Mkdir {
                    path: cstr(&target)?,
                },
            );
            self.bind(dir, &target, &inside, RO | NOSUID_NODEV)?;
        }
        Ok(())
    }

    fn etc(&mut self, staging: &Path, spec: &RootSpec<'_>) -> Result<(), SandboxError> {
        self.mkdir(staging, "/etc")?;
        let etc = staging.join("etc");
        let mut entries: Vec<&str> = ETC_ENTRIES.to_vec();
        if spec.network {
            entries.extend(["resolv.conf", "hosts", "gai.conf"]);
        }
        for name in entries {
            let host = Path::new("/etc").join(name);
            let Ok(meta) = std::fs::symlink_metadata(&host) else {
                continue;
            };
            let target = etc.join(name);
            if meta.file_type().is_symlink() {
                let link = std::fs::read_link(&host)
                    .map_err(|e| SandboxError::io("read link", &host, e))?;
                self.push(
                    format!("link /etc/{name}"),
                    Op::Symlink {
                        target: cstr(&link)?,
                        link: cstr(&target)?,
                    },
                );
            } else {
                if meta.is_dir() {
                    self.push(
                        format!("create /etc/{name}"),
                        Op::Mkdir {
                            path: cstr(&target)?,
                        },
                    );
                }
                self.bind(&host, &target, &format!("/etc/{name}"), RO | NOSUID_NODEV)?;
            }
        }
        let uid = spec.uid;
        let files = [
            (
                "passwd",
                format!(
                    "root:x:0:0:root:/root:/bin/sh\nbox:x:{uid}:{uid}:box:/box:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
                ),
            ),
            (
                "group",
                format!("root:x:0:\nbox:x:{uid}:\nnogroup:x:65534:\n"),
            ),
            ("hostname", "box\n".to_string()),
        ];
        for (name, contents) in files {
            self.push(
                format!("write /etc/{name}"),
                Op::File {
                    path: cstr(&etc.join(name))?,
                    contents: contents.into_bytes(),
                },
            );
        }
        if !spec.network {
            let hosts =
                b"127.0.0.1\tlocalhost box\n::1\tlocalhost ip6-localhost ip6-loopback\n".to_vec();
            self.push(
                "write /etc/hosts".into(),
                Op::File {
                    path: cstr(&etc.join("hosts"))?,
                    contents: hosts,
                },
            );
        }
        Ok(())
    }

    /// A minimal /dev: the five harmless nodes bound from the host, the usual links.
    fn dev(&mut self, staging: &Path) -> Result<(), SandboxError> {
        let dev = staging.join("dev");
        self.mkdir(staging, "/dev")?;
        self.tmpfs(
            &dev,
            "/dev",
            "size=64k,nr_inodes=64,mode=755",
            libc::MS_NOSUID | libc::MS_NOEXEC,
        )?;
        for node in DEV_NODES {
            let host = Path::new("/dev").join(node);
            self.bind(
                &host,
                &dev.join(node),
                &format!("/dev/{node}"),
                libc::MS_NOSUID | libc::MS_NOEXEC,
            )?;
        }
        for (name, to) in [
            ("fd", "/proc/self/fd"),
            ("stdin", "/proc/self/fd/0"),
            ("stdout", "/proc/self/fd/1"),
            ("stderr", "/proc/self/fd/2"),
        ] {
            self.push(
                format!("link /dev/{name}"),
                Op::Symlink {
                    target: cstr(Path::new(to))?,
                    link: cstr(&dev.join(name))?,
                },
            );
        }
        let flags = RO | libc::MS_NOSUID | libc::MS_NOEXEC;
        self.push(
            "make /dev read-only".into(),
            Op::Remount {
                target: cstr(&dev)?,
                flags,
            },
        );
        Ok(())
    }

    fn extra_bind(&mut self, staging: &Path, b: &Bind) -> Result<(), SandboxError> {
        let source = checked_bind(b)?;
        let rel = b.inside.strip_prefix("/").unwrap_or(&b.inside);
        self.mkdir_parents(staging, &b.inside)?;
        let flags = if b.writable {
            NOSUID_NODEV
        } else {
            RO | NOSUID_NODEV
        };
        let inside = b.inside.display().to_string();
        let target = staging.join(rel);
        if source.is_dir() {
            self.push(
                format!("create {inside}"),
                Op::Mkdir {
                    path: cstr(&target)?,
                },
            );
        }
        self.bind(&source, &target, &inside, flags)
    }

    /// Description of step `i`, for the error message.
    pub(crate) fn step_name(&self, i: usize) -> String {
        self.names
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("mount step {i}"))
    }

    pub(crate) fn root(&self) -> &CStr {
        &self.root
    }

    /// The operations, in order (to send them to a slot's launcher).
    pub(crate) fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// A plan rebuilt from operations received by a slot's launcher (descriptors
    /// in `Op::Attach` belong to the caller; names are the supervisor's business).
    pub(crate) fn from_ops(root: CString, ops: Vec<Op>) -> Self {
        MountPlan {
            root,
            ops,
            names: Vec::new(),
            trees: Vec::new(),
        }
    }

    /// Child side: perform every op; on failure, the index of the failing op.
    pub(crate) fn enter(&self) -> Result<(), (usize, i32)> {
        for (i, op) in self.ops.iter().enumerate() {
            run_op(op).map_err(|e| (i, e))?;
        }
        Ok(())
    }
}

fn run_op(op: &Op) -> sys::CResult {
    match op {
        Op::Tmpfs {
            target,
            flags,
            data,
        } => sys::c_mount(Some(c"tmpfs"), target, Some(c"tmpfs"), *flags, Some(data)),
        Op::Bind {
            source,
            target,
            file,
            flags,
        } => {
            if *file {
                sys::c_write_file_if_missing(target)?;
            } else {
                sys::c_mkdir(target, 0o755)?;
            }
            sys::c_mount(Some(source), target, None, libc::MS_BIND, None)?;
            sys::c_mount(
                None,
                target,
                None,
                libc::MS_REMOUNT | libc::MS_BIND | flags,
                None,
            )
        }
        Op::Mkdir { path } => sys::c_mkdir(path, 0o755),
        Op::Symlink { target, link } => sys::c_symlink(target, link),
        Op::File { path, contents } => sys::c_write_file(path, contents, 0o644),
        Op::Proc { target } => sys::c_mount(
            Some(c"proc"),
            target,
            Some(c"proc"),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            None,
        ),
        Op::Attach {
            tree,
            target,
            file,
            flags,
        } => {
            if *file {
                sys::c_write_file_if_missing(target)?;
            } else {
                sys::c_mkdir(target, 0o755)?;
            }
            sys::c_move_mount(*tree, target)?;
            sys::c_mount(
                None,
                target,
                None,
                libc::MS_REMOUNT | libc::MS_BIND | flags,
                None,
            )
        }
        Op::Remount { target, flags } => sys::c_mount(
            None,
            target,
            None,
            libc::MS_REMOUNT | libc::MS_BIND | flags,
            None,
        ),
    }
}

/// The mount points extra binds need in a slot's prepared root: each inside path
/// and whether it is a file (the bind's source is not a directory).
pub(crate) fn mount_points(binds: &[Bind]) -> Result<Vec<(PathBuf, bool)>, SandboxError> {
    binds
        .iter()
        .map(|b| Ok((b.inside.clone(), !checked_bind(b)?.is_dir())))
        .collect()
}

/// An extra bind's canonical host source, after checking its inside path.
fn checked_bind(b: &Bind) -> Result<PathBuf, SandboxError> {
    if !b.inside.is_absolute()
        || b.inside
            .components()
            .any(|c| matches!(c, Component::ParentDir))
    {
        return Err(SandboxError::invalid(format!(
            "bind target {} must be an absolute path without '..'",
            b.inside.display()
        )));
    }
    std::fs::canonicalize(&b.host).map_err(|e| SandboxError::io("bind source", &b.host, e))
}

/// Child side: our mounts must not propagate to the host.
pub(crate) fn make_private() -> sys::CResult {
    sys::c_mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None)
}

/// Child side: make `root` the root and drop the host's tree from view.
pub(crate) fn pivot(root: &CStr) -> sys::CResult {
    pivot_keep_writable(root)?;
    sys::c_mount(
        None,
        c"/",
        None,
        libc::MS_REMOUNT | libc::MS_BIND | RO | NOSUID_NODEV,
        None,
    )
}

/// pivot_root into `root` and detach the old tree; `/` stays writable (a slot's
/// prepared root: each run adds its mount points, then makes its copy read-only).
pub(crate) fn pivot_keep_writable(root: &CStr) -> sys::CResult {
    sys::c_chdir(root)?;
    sys::c_pivot_root_here()?;
    sys::c_umount_detach(c".")?;
    sys::c_chdir(c"/")
}

fn is_mount_point(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(dir), dir.parent().map(std::fs::metadata)) {
        (Ok(a), Some(Ok(b))) => a.dev() != b.dev(),
        _ => false,
    }
}

//! What this process lacks for the sandbox, in the words of whoever starts the
//! daemon. Read only when the start-up self-test failed, so that the error says
//! what is missing (a container started without `--privileged`, a read-only
//! cgroup mount) and not only which system call was refused.

use std::path::Path;

/// Capabilities the sandbox cannot work without (bit, name, what for). Docker's
/// default set lacks `CAP_SYS_ADMIN`; the others are there, listed so that a
/// stricter `--cap-drop` is named too.
const NEEDED: &[(u32, &str, &str)] = &[
    (21, "CAP_SYS_ADMIN", "namespaces, mounts"),
    (7, "CAP_SETUID", "the box uid"),
    (6, "CAP_SETGID", "the box gid"),
    (18, "CAP_SYS_CHROOT", "the box root"),
    (5, "CAP_KILL", "stopping runs"),
];

/// What the host looks like from here.
#[derive(Debug, Default)]
struct Findings {
    /// `/proc/self/status`.
    status: String,
    /// Cgroup directories the sandbox writes under that are read-only.
    read_only_cgroups: Vec<String>,
    /// A container runtime's marker file exists.
    in_container: bool,
}

/// One sentence naming what is missing, or `None` when nothing visible is.
pub fn diagnose() -> Option<String> {
    let cgroup_dirs = [
        "/sys/fs/cgroup",
        "/sys/fs/cgroup/memory",
        "/sys/fs/cgroup/cpu",
    ];
    let findings = Findings {
        status: std::fs::read_to_string("/proc/self/status").unwrap_or_default(),
        read_only_cgroups: cgroup_dirs
            .iter()
            .filter(|d| is_read_only(Path::new(d)))
            .map(|d| (*d).to_string())
            .collect(),
        in_container: ["/.dockerenv", "/run/.containerenv"]
            .iter()
            .any(|p| Path::new(p).exists()),
    };
    describe(&findings)
}

/// A directory that exists but whose file system is mounted read-only.
fn is_read_only(dir: &Path) -> bool {
    match nix::sys::statvfs::statvfs(dir) {
        Ok(s) => s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY),
        Err(_) => false,
    }
}

fn status_field<'a>(status: &'a str, name: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

fn describe(f: &Findings) -> Option<String> {
    let mut missing = Vec::new();
    if let Some(eff) =
        status_field(&f.status, "CapEff").and_then(|h| u64::from_str_radix(h, 16).ok())
    {
        let caps: Vec<String> = NEEDED
            .iter()
            .filter(|(bit, _, _)| eff & (1u64 << bit) == 0)
            .map(|(_, name, why)| format!("{name} ({why})"))
            .collect();
        missing.extend(caps);
    }
    // 2: a seccomp filter, such as a container runtime's default profile
    // (Docker's refuses pivot_root, mount and unshare to a container).
    if status_field(&f.status, "Seccomp") == Some("2") {
        missing.push("a process free of seccomp filters (one is active)".to_string());
    }
    if !f.read_only_cgroups.is_empty() {
        missing.push(format!(
            "a writable cgroup file system ({} is read-only)",
            f.read_only_cgroups.join(", ")
        ));
    }
    if missing.is_empty() {
        return None;
    }
    let advice = if f.in_container {
        "; in a container: run it with --privileged (a cgroup-v1 host also needs \
         --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw, a cgroup-v2 host \
         --cgroupns=private; docs/runner.md, \"Docker\")"
    } else {
        "; run the daemon as root with every capability"
    };
    Some(format!(
        "missing what the sandbox needs: {}{advice}",
        missing.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Docker's default capability set (no CAP_SYS_ADMIN) and its seccomp profile.
    const DOCKER_DEFAULT: &str =
        "Name:\tjudge-runner\nCapEff:\t00000000a80425fb\nNoNewPrivs:\t0\nSeccomp:\t2\n";
    const PRIVILEGED: &str = "Name:\tjudge-runner\nCapEff:\t000001fffeffffff\nSeccomp:\t0\n";

    #[test]
    fn a_default_container_is_told_to_run_privileged() {
        let found = describe(&Findings {
            status: DOCKER_DEFAULT.to_string(),
            read_only_cgroups: vec!["/sys/fs/cgroup".to_string()],
            in_container: true,
        })
        .unwrap();
        assert!(found.contains("CAP_SYS_ADMIN"), "{found}");
        assert!(!found.contains("CAP_SETUID"), "{found}");
        assert!(found.contains("seccomp"), "{found}");
        assert!(found.contains("/sys/fs/cgroup is read-only"), "{found}");
        assert!(found.contains("--privileged"), "{found}");
    }

    #[test]
    fn nothing_missing_is_no_hint() {
        let f = Findings {
            status: PRIVILEGED.to_string(),
            read_only_cgroups: Vec::new(),
            in_container: true,
        };
        assert_eq!(describe(&f), None);
    }

    #[test]
    fn outside_a_container_no_docker_advice() {
        let found = describe(&Findings {
            status: "CapEff:\t0000000000000000\nSeccomp:\t0\n".to_string(),
            read_only_cgroups: Vec::new(),
            in_container: false,
        })
        .unwrap();
        assert!(
            found.contains("CAP_SYS_ADMIN") && found.contains("CAP_SETUID"),
            "{found}"
        );
        assert!(!found.contains("--privileged"), "{found}");
    }
}

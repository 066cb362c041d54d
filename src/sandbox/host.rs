//! Can this host run the sandbox, and how fast is it here? The checks behind
//! `judge-runner check` (CONTRACT §3b), like isolate's `isolate-check-environment`:
//! each names what it found and, when something is wrong, what to do about it.
//! Then the overhead: `/bin/true` in a [`SandboxSlot`] against a plain fork+exec,
//! interleaved, medians.
//!
//! Only read-only probes of the host, one slot under the given cgroup parent
//! (made and removed like a daemon's), and the runs themselves.

use std::process::Command;
use std::time::{Duration, Instant};

use super::cgroup;
use super::plan::{BOX_UID_BASE, Plan};
use super::report::Status;
use super::seccomp;
use super::slot::SandboxSlot;
use super::sys;

/// How a check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckStatus {
    /// Works as the sandbox needs it.
    Ok,
    /// Works, with less than the best (a fallback, a missing optional feature).
    Warn,
    /// The sandbox cannot work (or is unsafe) until this is fixed.
    Fail,
    /// A language whose toolchain is not on this host: not offered (contract
    /// §7), the host can still judge the others.
    Missing,
    /// A language whose toolchain is there but does not answer its version
    /// probe: not offered either; `fail`, in lower case, unlike a host FAIL.
    Broken,
}

impl CheckStatus {
    /// The word printed and written to JSON: `ok`, `warn`, `FAIL`; a
    /// language's `missing` or `fail`.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Ok => "ok",
            CheckStatus::Warn => "warn",
            CheckStatus::Fail => "FAIL",
            CheckStatus::Missing => "missing",
            CheckStatus::Broken => "fail",
        }
    }
}

/// One line of the check: its name, how it ended, what was found or what to do.
#[derive(Debug, Clone)]
pub struct HostCheck {
    pub name: String,
    pub status: CheckStatus,
    pub detail: String,
}

impl HostCheck {
    pub fn new(name: &str, status: CheckStatus, detail: impl Into<String>) -> Self {
        HostCheck {
            name: name.to_string(),
            status,
            detail: detail.into(),
        }
    }
}

/// The box ids whose uids a check looks for among host accounts: every box a
/// daemon with default settings or up to a few hundred slots uses, with the
/// validator boxes 500 above them.
pub const CHECKED_BOXES: std::ops::Range<u32> = 0..1000;

/// The host checks of the sandbox itself (not the languages, which the judge
/// knows): root, kernel, namespaces, seccomp, cgroups and their features, the
/// box uids, and a real run in a slot of box `box_id` under `cgroup_parent`.
pub fn checks(cgroup_parent: &str, box_id: u32) -> Vec<HostCheck> {
    let mut out = Vec::new();
    let euid = sys::geteuid();
    let root = euid == 0;
    out.push(if root {
        HostCheck::new("root", CheckStatus::Ok, "running as root")
    } else {
        HostCheck::new(
            "root",
            CheckStatus::Fail,
            format!("running as uid {euid}: the sandbox needs root (run it with sudo, or as a root service)"),
        )
    });
    let release = kernel_release();
    out.push(kernel_check(&release));
    out.push(namespaces_check());
    out.push(seccomp_check());
    let facts = if root { Some(cgroup::facts()) } else { None };
    match &facts {
        None => out.push(HostCheck::new(
            "cgroup",
            CheckStatus::Fail,
            "not checked: needs root",
        )),
        Some(Err(e)) => out.push(HostCheck::new("cgroup", CheckStatus::Fail, e.to_string())),
        Some(Ok(f)) => out.extend(cgroup_checks(f, &release)),
    }
    out.push(box_uid_check(
        &std::fs::read_to_string("/etc/passwd").unwrap_or_default(),
        &std::fs::read_to_string("/etc/group").unwrap_or_default(),
        CHECKED_BOXES,
    ));
    out.push(if root && matches!(facts, Some(Ok(_))) {
        slot_run_check(cgroup_parent, box_id)
    } else {
        HostCheck::new(
            "sandbox-run",
            CheckStatus::Fail,
            "not run: needs root and working cgroups",
        )
    });
    out
}

fn kernel_release() -> String {
    nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `6.1.0-18-amd64` → (6, 1).
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

fn kernel_check(release: &str) -> HostCheck {
    match kernel_version(release) {
        Some(v) if v >= (5, 0) => HostCheck::new(
            "kernel",
            CheckStatus::Ok,
            format!("Linux {release} ({})", std::env::consts::ARCH),
        ),
        Some(_) => HostCheck::new(
            "kernel",
            CheckStatus::Fail,
            format!("Linux {release}: the sandbox needs Linux 5.0 or later"),
        ),
        None => HostCheck::new(
            "kernel",
            CheckStatus::Warn,
            format!("cannot read the kernel version ({release:?})"),
        ),
    }
}

const NAMESPACES: [&str; 6] = ["pid", "mnt", "net", "ipc", "uts", "cgroup"];

fn namespaces_check() -> HostCheck {
    let mut missing = Vec::new();
    for ns in NAMESPACES {
        let present = std::path::Path::new("/proc/self/ns").join(ns).exists();
        // A zero limit disables a namespace type for everybody (a hardened sysctl).
        let limit = std::fs::read_to_string(format!("/proc/sys/user/max_{ns}_namespaces"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok());
        if !present || limit == Some(0) {
            missing.push(ns);
        }
    }
    if missing.is_empty() {
        HostCheck::new("namespaces", CheckStatus::Ok, NAMESPACES.join(" "))
    } else {
        HostCheck::new(
            "namespaces",
            CheckStatus::Fail,
            format!(
                "not available: {} (a kernel without them, or user.max_<ns>_namespaces = 0: raise it with sysctl)",
                missing.join(" ")
            ),
        )
    }
}

fn seccomp_check() -> HostCheck {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if !status.lines().any(|l| l.starts_with("Seccomp:")) {
        return HostCheck::new(
            "seccomp",
            CheckStatus::Fail,
            "the kernel has no seccomp (CONFIG_SECCOMP_FILTER): runs cannot be filtered",
        );
    }
    match seccomp::filters_for(&super::plan::SeccompPolicy::Default) {
        Ok(_) => HostCheck::new(
            "seccomp",
            CheckStatus::Ok,
            format!(
                "filter mode available; the built-in policy compiles for {}",
                std::env::consts::ARCH
            ),
        ),
        Err(e) => HostCheck::new("seccomp", CheckStatus::Fail, e.to_string()),
    }
}

fn host_has_swap() -> bool {
    std::fs::read_to_string("/proc/swaps")
        .map(|s| s.lines().count() > 1)
        .unwrap_or(false)
}

fn cgroup_checks(f: &cgroup::CgroupFacts, release: &str) -> Vec<HostCheck> {
    let mut out = vec![HostCheck::new(
        "cgroup",
        CheckStatus::Ok,
        format!(
            "{} at {}: {}",
            f.version,
            f.base.display(),
            f.controllers.join(" ")
        ),
    )];
    out.push(if f.missing_optional.is_empty() {
        HostCheck::new("cgroup-cpu", CheckStatus::Ok, "slots can be pinned to CPUs")
    } else {
        HostCheck::new(
            "cgroup-cpu",
            CheckStatus::Warn,
            format!(
                "no {} controller: slots are not pinned to their CPUs (enable it for steadier timings)",
                f.missing_optional.join("/")
            ),
        )
    });
    out.push(if f.swap_accounted || !host_has_swap() {
        HostCheck::new(
            "cgroup-swap",
            CheckStatus::Ok,
            if f.swap_accounted {
                "swap is limited with memory"
            } else {
                "no swap on this host"
            },
        )
    } else {
        HostCheck::new(
            "cgroup-swap",
            CheckStatus::Warn,
            "swap is not accounted (boot with swapaccount=1 or turn swap off): a run may swap past its memory limit",
        )
    });
    let v = kernel_version(release).unwrap_or((0, 0));
    match f.memory_peak {
        None => out.push(HostCheck::new(
            "memory-peak",
            CheckStatus::Ok,
            "v1: memory.max_usage_in_bytes, reset per run",
        )),
        Some(true) => out.push(HostCheck::new(
            "memory-peak",
            CheckStatus::Ok,
            if v >= (6, 12) {
                "memory.peak, resettable (Linux >= 6.12): one kept cgroup per slot"
            } else {
                "memory.peak (Linux >= 5.19); not resettable before 6.12: a fresh run cgroup per run"
            },
        )),
        Some(false) => out.push(HostCheck::new(
            "memory-peak",
            CheckStatus::Warn,
            "no memory.peak (Linux < 5.19): the peak is sampled every tick and may miss a short spike",
        )),
    }
    if f.version == "v2" {
        out.push(if v >= (5, 7) {
            HostCheck::new(
                "clone-into-cgroup",
                CheckStatus::Ok,
                "CLONE_INTO_CGROUP (Linux >= 5.7): runs start inside their cgroup",
            )
        } else {
            HostCheck::new(
                "clone-into-cgroup",
                CheckStatus::Warn,
                "no CLONE_INTO_CGROUP (Linux < 5.7): runs are moved into their cgroup after clone",
            )
        });
    }
    out
}

/// Accounts (users or groups) of `/etc/passwd` and `/etc/group` whose id is the
/// uid/gid of a box in `boxes`: a box's programs would run as that account.
pub fn box_uid_check(passwd: &str, group: &str, boxes: std::ops::Range<u32>) -> HostCheck {
    let lo = BOX_UID_BASE.saturating_add(boxes.start);
    let hi = BOX_UID_BASE.saturating_add(boxes.end);
    let mut clashes = Vec::new();
    for (file, text) in [("user", passwd), ("group", group)] {
        for line in text.lines() {
            let mut fields = line.split(':');
            let (Some(name), Some(_), Some(id)) = (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            if let Ok(id) = id.trim().parse::<u32>()
                && (lo..hi).contains(&id)
            {
                clashes.push(format!("{file} {name} ({id} = box {})", id - BOX_UID_BASE));
            }
        }
    }
    if clashes.is_empty() {
        HostCheck::new(
            "box-uids",
            CheckStatus::Ok,
            format!("no host account in {lo}-{}", hi - 1),
        )
    } else {
        HostCheck::new(
            "box-uids",
            CheckStatus::Warn,
            format!(
                "host accounts use box ids: {}; programs in those boxes run as them (move the accounts or use --first-box above them)",
                clashes.join(", ")
            ),
        )
    }
}

fn true_plan() -> Plan {
    Plan::new("/bin/true")
        .memory(64 << 20)
        .processes(8)
        .cpu_time(Duration::from_secs(5))
}

fn slot_run_check(parent: &str, box_id: u32) -> HostCheck {
    let outcome = SandboxSlot::new(box_id, parent, None).and_then(|mut slot| {
        let report = slot.run(&true_plan());
        let closed = slot.close();
        let report = report?;
        closed?;
        Ok(report)
    });
    // Best effort: the parent goes only when empty (a daemon may share it).
    let _ = cgroup::remove_parent(parent);
    match outcome {
        Ok(r) if r.status == Status::Ok => HostCheck::new(
            "sandbox-run",
            CheckStatus::Ok,
            format!("/bin/true in box {box_id} under cgroup parent {parent}: ok"),
        ),
        Ok(r) => HostCheck::new(
            "sandbox-run",
            CheckStatus::Fail,
            format!(
                "/bin/true in box {box_id} ended {}: {}",
                r.status.as_str(),
                r.message
            ),
        ),
        Err(e) => HostCheck::new(
            "sandbox-run",
            CheckStatus::Fail,
            format!("/bin/true in box {box_id} under cgroup parent {parent}: {e}"),
        ),
    }
}

/// `/bin/true` in a slot against a plain fork+exec, `runs` times each, interleaved.
#[derive(Debug, Clone, Copy)]
pub struct Overhead {
    pub runs: usize,
    /// Median wall time of a plain fork+exec+wait, ms.
    pub plain_ms: f64,
    /// Median wall time of a slot run, ms.
    pub slot_ms: f64,
    /// `slot_ms / plain_ms`.
    pub ratio: f64,
}

/// Measures [`Overhead`] in a slot of box `box_id` under `cgroup_parent` (made
/// and removed here). Ten warm-up runs of each first.
pub fn measure_overhead(
    runs: usize,
    cgroup_parent: &str,
    box_id: u32,
) -> Result<Overhead, super::SandboxError> {
    let runs = runs.max(1);
    let plan = true_plan();
    let mut slot = SandboxSlot::new(box_id, cgroup_parent, None)?;
    let measured = (|| {
        let plain = || -> Result<Duration, super::SandboxError> {
            let start = Instant::now();
            let status = Command::new("/bin/true").status();
            let took = start.elapsed();
            match status {
                Ok(s) if s.success() => Ok(took),
                Ok(s) => Err(super::SandboxError::HostCheck {
                    reason: format!("plain /bin/true ended {s}"),
                }),
                Err(e) => Err(super::SandboxError::HostCheck {
                    reason: format!("plain /bin/true: {e}"),
                }),
            }
        };
        let sandboxed = |slot: &mut SandboxSlot| -> Result<Duration, super::SandboxError> {
            let start = Instant::now();
            let report = slot.run(&plan)?;
            let took = start.elapsed();
            if report.status != Status::Ok {
                return Err(super::SandboxError::HostCheck {
                    reason: format!("/bin/true in the slot ended {}", report.status.as_str()),
                });
            }
            Ok(took)
        };
        for _ in 0..10 {
            plain()?;
            sandboxed(&mut slot)?;
        }
        let (mut p, mut s) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
        for i in 0..runs {
            // Alternate which goes first, so neither always runs right after the other.
            if i % 2 == 0 {
                p.push(plain()?);
                s.push(sandboxed(&mut slot)?);
            } else {
                s.push(sandboxed(&mut slot)?);
                p.push(plain()?);
            }
        }
        Ok((median(&mut p), median(&mut s)))
    })();
    let closed = slot.close();
    let _ = cgroup::remove_parent(cgroup_parent);
    let (plain, sandboxed) = measured?;
    closed?;
    let plain_ms = plain.as_secs_f64() * 1e3;
    let slot_ms = sandboxed.as_secs_f64() * 1e3;
    Ok(Overhead {
        runs,
        plain_ms,
        slot_ms,
        ratio: if plain_ms > 0.0 {
            slot_ms / plain_ms
        } else {
            0.0
        },
    })
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_uid_check_names_accounts_in_the_box_range_only() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534::/:/bin/false\n\
                      judge:x:60007:100::/home/judge:/bin/sh\nbroken line\n";
        let group = "root:x:0:\nboxers:x:60999:\nfar:x:61000:\n";
        let c = box_uid_check(passwd, group, 0..1000);
        assert_eq!(c.status, CheckStatus::Warn);
        assert!(
            c.detail.contains("user judge (60007 = box 7)"),
            "{}",
            c.detail
        );
        assert!(
            c.detail.contains("group boxers (60999 = box 999)"),
            "{}",
            c.detail
        );
        assert!(!c.detail.contains("far"), "{}", c.detail);
        assert!(!c.detail.contains("nobody"), "{}", c.detail);
        let clean = box_uid_check("root:x:0:0::/:/bin/sh\n", "root:x:0:\n", 0..1000);
        assert_eq!(clean.status, CheckStatus::Ok, "{}", clean.detail);
    }

    #[test]
    fn kernel_versions_parse_from_distribution_releases() {
        assert_eq!(kernel_version("6.1.0-18-amd64"), Some((6, 1)));
        assert_eq!(kernel_version("5.19.17"), Some((5, 19)));
        assert_eq!(kernel_version("4.19.0+"), Some((4, 19)));
        assert_eq!(kernel_version(""), None);
        assert_eq!(kernel_check("4.19.0").status, CheckStatus::Fail);
        assert_eq!(kernel_check("6.12.1").status, CheckStatus::Ok);
    }
}

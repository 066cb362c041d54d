//! The seccomp policy: seccompiler JSON (`seccomp/default.json`, reviewed data with
//! a comment on every rule) compiled to BPF for the native architecture. Compiling
//! happens in the supervisor; the child only installs the ready programs, as the
//! very last step before `execve`. Every filter in a file is installed (in name
//! order): stacking lets one filter answer EPERM and another ENOSYS.

use std::sync::{Mutex, OnceLock, PoisonError};

use seccompiler::{BpfProgram, TargetArch};

use super::error::SandboxError;
use super::plan::SeccompPolicy;

mod dispatch;
mod prebuilt;

/// The built-in policy for x86_64.
pub const DEFAULT_X86_64: &str = include_str!("../../../seccomp/default.json");
/// The built-in policy for aarch64 (no `iopl`/`ioperm` and other x86-only calls).
pub const DEFAULT_AARCH64: &str = include_str!("../../../seccomp/default.aarch64.json");

/// Compiled filters, installed in order.
pub(crate) type Filters = Vec<BpfProgram>;

fn native() -> Result<(TargetArch, &'static str), SandboxError> {
    match std::env::consts::ARCH {
        "x86_64" => Ok((TargetArch::x86_64, DEFAULT_X86_64)),
        "aarch64" => Ok((TargetArch::aarch64, DEFAULT_AARCH64)),
        other => Err(SandboxError::Seccomp {
            origin: "built-in".into(),
            reason: format!("no policy for architecture {other}"),
        }),
    }
}

/// Compile a seccompiler JSON policy for `arch`; filters sorted by name. Unknown
/// syscall names are an error (seccompiler refuses them), never silently skipped.
pub fn compile(json: &str, arch: TargetArch, origin: &str) -> Result<Filters, SandboxError> {
    let map = seccompiler::compile_from_json(json.as_bytes(), arch).map_err(|e| {
        SandboxError::Seccomp {
            origin: origin.to_string(),
            reason: e.to_string(),
        }
    })?;
    let mut named: Vec<_> = map.into_iter().collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(named.into_iter().map(|(_, prog)| prog).collect())
}

/// The filters a policy asks for, ready to install: one dispatched program when
/// the policy merges (`dispatch.rs`), else the x32/foreign-architecture guard
/// followed by seccompiler's programs as they are.
/// The built-in policy comes compiled by build.rs (else it is compiled once per
/// process); a file's is compiled once per content.
pub(crate) fn filters_for(policy: &SeccompPolicy) -> Result<Filters, SandboxError> {
    static DEFAULT: OnceLock<Result<Filters, String>> = OnceLock::new();
    match policy {
        SeccompPolicy::None => Ok(Vec::new()),
        SeccompPolicy::Default => DEFAULT
            .get_or_init(|| {
                if let Some(filters) = prebuilt::default_filters() {
                    return Ok(filters);
                }
                let (arch, json) = native().map_err(|e| e.to_string())?;
                ready(json, arch, "built-in seccomp/default.json").map_err(|e| e.to_string())
            })
            .clone()
            .map_err(|reason| SandboxError::Seccomp {
                origin: "built-in".into(),
                reason,
            }),
        SeccompPolicy::File(path) => {
            let json = std::fs::read_to_string(path)
                .map_err(|e| SandboxError::io("read seccomp policy", path, e))?;
            let (arch, _) = native()?;
            from_file_cache(&json, || ready(&json, arch, &path.display().to_string()))
        }
    }
}

/// One dispatched program (it refuses x32 and foreign architectures itself), or
/// the guard followed by seccompiler's programs.
fn ready(json: &str, arch: TargetArch, origin: &str) -> Result<Filters, SandboxError> {
    let stack = compile(json, arch, origin)?;
    Ok(match dispatch::merged(json, arch) {
        Some(one) => vec![one],
        None => std::iter::once(dispatch::guard(arch))
            .chain(stack)
            .collect(),
    })
}

/// Policies from files, by content: compiling one takes a few milliseconds (one
/// seccompiler pass per syscall), a judge runs the same file many times.
fn from_file_cache(
    json: &str,
    build: impl FnOnce() -> Result<Filters, SandboxError>,
) -> Result<Filters, SandboxError> {
    static CACHE: Mutex<Vec<(String, Filters)>> = Mutex::new(Vec::new());
    let lock = || CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, f)) = lock().iter().find(|(j, _)| j == json) {
        return Ok(f.clone());
    }
    let filters = build()?;
    let mut cache = lock();
    if cache.len() >= 8 {
        cache.remove(0);
    }
    cache.push((json.to_string(), filters.clone()));
    Ok(filters)
}

/// Child side: install every filter. Allocation-free (seccompiler builds the
/// `sock_fprog` on the stack); also sets `no_new_privs`, which we did already.
pub(crate) fn install(filters: &[BpfProgram]) -> Result<(), i32> {
    for f in filters {
        if let Err(e) = seccompiler::apply_filter(f) {
            return Err(match e {
                seccompiler::Error::Seccomp(io) | seccompiler::Error::Prctl(io) => {
                    io.raw_os_error().unwrap_or(libc::EINVAL)
                }
                _ => libc::EINVAL,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{native, prebuilt, ready};

    /// What build.rs compiled is what the JSON compiles to now: the same
    /// seccompiler passes and dispatch, for this target.
    #[test]
    fn the_prebuilt_default_is_the_json_compiled() {
        let (arch, json) = native().unwrap();
        let now = ready(json, arch, "built-in").unwrap();
        let built = prebuilt::default_filters().unwrap();
        assert_eq!(built.len(), now.len());
        assert!(built.iter().all(|p| !p.is_empty()));
        assert_eq!(built, now);
    }
}

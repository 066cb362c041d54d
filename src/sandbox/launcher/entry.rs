//! The launcher's way in: an ELF constructor (`.init_array`) of this crate, in
//! every binary that links it (the daemon, the CLI, test and bench binaries).
//! The C library runs it before `main`; in a process exec'd by a slot with
//! [`ENV`](super::ENV) set and a control socket on the descriptor it names, it
//! serves as that slot's launcher and never returns, so nothing of the host
//! program (its `main`, a test harness) ever runs there. Anywhere else it
//! returns at once (one `getenv`). runc's `nsexec` uses the same device.

use super::{ENV, serve};
use crate::sandbox::sys;

extern "C" fn launcher_entry() {
    if !sys::env_is_set(ENV) || !sys::is_seqpacket(serve::CONTROL_FD) {
        return;
    }
    // This process only stays suspended while its vfork child serves: the OOM
    // killer never picks that child, nor charges its memory to the runs'
    // cgroup (`sys::run_as_vfork_child`). It exits when the child does.
    // SAFETY: an ELF constructor runs before `main` on the process's only
    // thread: nothing has started another (ours start none before main).
    let code = unsafe { sys::run_as_vfork_child(serve::main, STACK) }.unwrap_or(1);
    sys::exit_now(code)
}

/// The launcher's stack (mapped lazily; init starts on a copy of it).
const STACK: usize = 8 << 20;

// SAFETY: `.init_array` holds pointers to functions the C library calls once,
// before `main`, on the only thread, as `void (*)(int, char **, char **)`; a C
// function of no parameters ignores those arguments. `launcher_entry` is such a
// function: `extern "C"` (a panic aborts instead of unwinding into the C
// library), and it needs nothing `main` sets up (no arguments, no std runtime
// state): it reads the environment and a descriptor, and in a launcher never
// returns.
#[used]
#[unsafe(link_section = ".init_array")]
static LAUNCHER_ENTRY: extern "C" fn() = launcher_entry;

/// Called by `Launcher::spawn`: a reference from code that runs keeps the object
/// holding the constructor in every binary that can start a launcher.
pub(super) fn linked() {
    std::hint::black_box(&LAUNCHER_ENTRY);
}

//! A slot's runs one after another: what one run leaves cannot reach the next,
//! counters start from zero for each run, a hostile run cannot harm the slot's
//! launcher, CPU time is the program's alone, and a slot — closed, or dropped
//! after failed runs — leaves nothing behind.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod sandbox_common;

use std::path::Path;
use std::time::Duration;

use judge_runner::sandbox::{self, SandboxError, SandboxSlot, Status};
use sandbox_common::{Ctx, capture_in, launcher_pid, probe, slow};

const MIB: u64 = 1 << 20;

fn slot(cx: &Ctx) -> SandboxSlot {
    SandboxSlot::new(cx.box_id, &cx.parent, None).unwrap()
}

fn within_5_percent_of_100_mib(bytes: u64) -> bool {
    (0.95..=1.05).contains(&(bytes as f64 / (100 * MIB) as f64))
}

#[test]
fn next_run_sees_nothing_of_the_last_denied() {
    let cx = Ctx::new("slot_isolated");
    let prog = cx.probe("leave");
    let mut slot = slot(&cx);
    let (r, out) = capture_in(&mut slot, cx.plan(&prog).arg("leave"));
    assert_eq!((r.status, out.as_str()), (Status::Ok, "left\n"), "{r:?}");
    let (r, out) = capture_in(&mut slot, cx.plan(&prog).arg("look"));
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(
        out, "clean\n",
        "/tmp, IPC objects or processes carried over"
    );
    slot.close().unwrap();
}

#[test]
fn a_run_sees_what_it_left_itself_allowed() {
    let cx = Ctx::new("slot_own_leftovers");
    let prog = cx.probe("leave");
    let mut slot = slot(&cx);
    let script = format!("{prog} leave >/dev/null; {prog} look");
    let (r, out) = capture_in(&mut slot, cx.plan("/bin/sh").args(["-c", &script]));
    assert_eq!(r.status, Status::Ok, "{r:?}");
    for want in ["tmp", "shm 1", "msg 1"] {
        assert!(out.lines().any(|l| l == want), "{want} missing in\n{out}");
    }
    slot.close().unwrap();
}

#[test]
fn counters_start_from_zero_each_run() {
    let cx = Ctx::new("slot_counters");
    let (burn, mem) = (cx.probe("burn"), cx.probe("mem"));
    let mut slot = slot(&cx);
    let first = slot.run(&cx.plan(&mem).args(["100", "50"])).unwrap();
    assert_eq!(first.status, Status::Ok, "{first:?}");
    let r = slot.run(&cx.plan(&burn).args(["one", "1000"])).unwrap();
    assert!(r.cpu_seconds >= 0.99, "{r:?}");
    let again = slot.run(&cx.plan(&mem).args(["100", "50"])).unwrap();
    assert_eq!(again.status, Status::Ok, "{again:?}");
    assert!(within_5_percent_of_100_mib(again.memory_bytes), "{again:?}");
    // The same program as the first run, after a run of 1 s of CPU time.
    assert!(
        (again.cpu_seconds - first.cpu_seconds).abs() < 0.5,
        "the last run's CPU time carried over: {first:?} then {again:?}"
    );
    let r = slot.run(&cx.plan(&mem).arg("1")).unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(
        r.memory_bytes < 16 * MIB,
        "the last run's peak carried over: {r:?}"
    );
    slot.close().unwrap();
}

#[test]
fn an_oom_kill_is_not_the_next_runs() {
    let cx = Ctx::new("slot_oom_counter");
    let mem = cx.probe("mem");
    let mut slot = slot(&cx);
    let r = slot
        .run(&cx.plan(&mem).arg("200").memory(64 * MIB))
        .unwrap();
    assert_eq!(r.status, Status::MemoryLimit, "{r:?}");
    let r = slot.run(&cx.plan(&mem).arg("20").memory(64 * MIB)).unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}");
    slot.close().unwrap();
}

/// A run's output stays in the page cache, charged to the slot's cgroup; the
/// next run's peak must not include it, nor its limit lose it.
#[test]
fn page_cache_left_by_a_run_does_not_skew_the_next_peak() {
    let cx = Ctx::new("slot_page_cache");
    let (writer, mem) = (cx.probe("writer"), cx.probe("mem"));
    let mut slot = slot(&cx);
    for limit in [512 * MIB, 128 * MIB] {
        let big = (64 * MIB).to_string();
        let r = slot
            .run(&cx.plan(&writer).args(["/box/big", &big]).memory(limit))
            .unwrap();
        assert_eq!(r.status, Status::Ok, "{r:?}");
        let r = slot
            .run(&cx.plan(&mem).args(["100", "50"]).memory(limit))
            .unwrap();
        assert_eq!(r.status, Status::Ok, "limit {limit}: {r:?}");
        assert!(
            within_5_percent_of_100_mib(r.memory_bytes),
            "limit {limit}: peak {} = {:.3} of 100 MiB",
            r.memory_bytes,
            r.memory_bytes as f64 / (100 * MIB) as f64
        );
    }
    slot.close().unwrap();
}

#[test]
fn launcher_survives_hostile_runs() {
    let cx = Ctx::new("slot_hostile");
    let (killall, forker, mem) = (cx.probe("killall"), cx.probe("forker"), cx.probe("mem"));
    let mut slot = slot(&cx);
    assert_eq!(slot.run(&cx.plan("/bin/true")).unwrap().status, Status::Ok);
    let launcher = launcher_pid(&cx);
    // Signals: its own init (refused), every process it may signal.
    let r = slot
        .run(
            &cx.plan("/bin/sh")
                .args(["-c", "kill -9 1; kill -9 -1; exit 3"]),
        )
        .unwrap();
    assert_eq!(r.exit_code, Some(3), "{r:?}");
    let r = slot.run(&cx.plan(&killall)).unwrap();
    assert!(matches!(r.status, Status::Signaled | Status::Ok), "{r:?}");
    // Processes: a fork bomb.
    let r = slot
        .run(&cx.plan(&forker).arg("10000").processes(10))
        .unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}");
    // Memory: OOM kills under a tight limit and a tiny one (before its execve).
    for limit in [8 * MIB, MIB] {
        let r = slot.run(&cx.plan(&mem).arg("50").memory(limit)).unwrap();
        assert_eq!(r.status, Status::MemoryLimit, "limit {limit}: {r:?}");
    }
    let r = slot.run(&cx.plan("/bin/true")).unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(launcher_pid(&cx), launcher, "the launcher was replaced");
    slot.close().unwrap();
}

/// The cgroup counts the launcher's and init's work too; the run's figure must
/// be the program's alone: what it measures itself (getrusage, exec included).
#[test]
fn slot_cpu_time_is_the_programs_alone() {
    let cx = Ctx::new("slot_cpu_own");
    let burn = cx.probe("burn");
    let mut slot = slot(&cx);
    let mut extra = Vec::new();
    for _ in 0..10 {
        let (r, out) = capture_in(&mut slot, cx.plan(&burn).args(["one", "30", "report"]));
        assert_eq!(r.status, Status::Ok, "{r:?}");
        let own: f64 = out
            .trim()
            .strip_prefix("self_us ")
            .unwrap()
            .parse()
            .unwrap();
        extra.push(r.cpu_seconds - own / 1e6);
    }
    extra.sort_by(f64::total_cmp);
    // The same program unsandboxed, beside the slot runs: what its exit costs on
    // this host at this moment (wait4's rusage minus what it measured itself).
    let exit = plain_exit_seconds(&probe("burn"), 10);
    // At least the program's own time; beyond it only its exit (no launcher's or
    // init's work, which take several hundred microseconds per run). The least
    // of ten: noise only adds. The allowance is over the plain exit measured in
    // the same minute, so a loaded host (which slows every exit) moves both.
    assert!(
        extra[0] > -0.001,
        "less than the program measured: {extra:?}"
    );
    // Without python3 (the cgroup-v2 guest: busybox under emulation, where one
    // exit costs milliseconds) there is no control to compare with: the upper
    // bound is the host's test.
    if let Some(mut exit) = exit {
        exit.sort_by(f64::total_cmp);
        assert!(
            extra[0] < exit[0] + 0.00025 * slow(),
            "more than the program's: {extra:?} (plain exits {exit:?})"
        );
    }
    slot.close().unwrap();
}

/// `runs` times: the CPU time wait4 reports for the probe run outside any
/// sandbox, minus the CPU time it measured itself (its exit, mostly); `None`
/// where there is no python3 to measure with.
fn plain_exit_seconds(burn: &Path, runs: usize) -> Option<Vec<f64>> {
    if std::process::Command::new("python3")
        .arg("-c")
        .arg("")
        .status()
        .is_err()
    {
        return None;
    }
    const WAIT4: &str = "import os, sys\n\
        r, w = os.pipe()\n\
        pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, w, 1)])\n\
        os.close(w)\n\
        out = os.fdopen(r).read()\n\
        _, _, ru = os.wait4(pid, 0)\n\
        print(ru.ru_utime + ru.ru_stime - int(out.split()[1]) / 1e6)\n";
    let exits = (0..runs)
        .map(|_| {
            let out = std::process::Command::new("python3")
                .args(["-c", WAIT4])
                .arg(burn)
                .args(["one", "30", "report"])
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout)
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        })
        .collect();
    Some(exits)
}

#[test]
fn closed_slot_leaves_nothing() {
    let cx = Ctx::new("slot_closed");
    let mut slot = slot(&cx);
    assert_eq!(slot.run(&cx.plan("/bin/true")).unwrap().status, Status::Ok);
    let launcher = launcher_pid(&cx);
    slot.close().unwrap();
    assert_eq!(
        sandbox::children_of_parent(&cx.parent).unwrap(),
        Vec::<String>::new()
    );
    if let Some(pid) = launcher {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "launcher {pid} left"
        );
    }
}

/// Runs that fail in every way, then the slot is dropped without `close`.
#[test]
fn dropped_slot_leaves_nothing_after_failed_runs() {
    let cx = Ctx::new("slot_dropped");
    let mut slot = slot(&cx);
    let missing = slot.run(&cx.plan("/box/no-such-program"));
    assert!(
        matches!(missing, Err(SandboxError::Exec { .. })),
        "{missing:?}"
    );
    let bad_bind = slot.run(&cx.plan("/bin/true").bind("/no/such/dir", "/x", false));
    assert!(bad_bind.is_err(), "{bad_bind:?}");
    let r = slot
        .run(
            &cx.plan("/bin/sh")
                .args(["-c", "sleep 30 & sleep 30"])
                .wall_time(Duration::from_millis(200)),
        )
        .unwrap();
    assert_eq!(r.status, Status::WallTimeLimit, "{r:?}");
    assert_eq!(slot.run(&cx.plan("/bin/true")).unwrap().status, Status::Ok);
    let launcher = launcher_pid(&cx);
    drop(slot);
    assert_eq!(
        sandbox::children_of_parent(&cx.parent).unwrap(),
        Vec::<String>::new()
    );
    if let Some(pid) = launcher {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "launcher {pid} left"
        );
    }
}

/// A second live slot with a box id in use is refused; the first goes on.
#[test]
fn second_slot_of_a_box_id_denied() {
    let cx = Ctx::new("slot_twice");
    let mut first = slot(&cx);
    assert_eq!(first.run(&cx.plan("/bin/true")).unwrap().status, Status::Ok);
    let second = SandboxSlot::new(cx.box_id, &cx.parent, None);
    assert!(
        matches!(second, Err(SandboxError::CgroupSetup { .. })),
        "{second:?}"
    );
    assert_eq!(first.run(&cx.plan("/bin/true")).unwrap().status, Status::Ok);
    first.close().unwrap();
    let mut again = slot(&cx);
    assert_eq!(again.run(&cx.plan("/bin/true")).unwrap().status, Status::Ok);
    again.close().unwrap();
}

#[test]
fn signals_start_at_their_defaults() {
    // One Ctx per path: odd box ids run through a slot, even ones one-shot.
    let (a, b) = (Ctx::new("signals_a"), Ctx::new("signals_b"));
    for cx in [&a, &b] {
        let out = tempfile::NamedTempFile::new().unwrap();
        let plan = cx
            .plan("/bin/grep")
            .args(["-E", "^Sig(Ign|Blk):", "/proc/self/status"])
            .stdout(sandbox::Stdio::File(out.path().to_path_buf()));
        let r = cx.run(&plan);
        assert_eq!(r.status, Status::Ok, "{r:?}");
        let text = std::fs::read_to_string(out.path()).unwrap();
        for line in text.lines() {
            assert!(
                line.ends_with("0000000000000000"),
                "{line} (slot: {})",
                cx.via_slot()
            );
        }
        assert_eq!(text.lines().count(), 2, "{text}");
    }
}

/// Every run of a slot starts from the same root: the mount point a bind of run 1
/// needed (and its parent) is not in run 2's root, which has no such bind.
#[test]
fn a_bind_target_of_one_run_is_absent_in_the_next() {
    let cx = Ctx::new("slot_bind_target");
    let host = cx.path("shared");
    std::fs::create_dir_all(&host).unwrap();
    let file = cx.path("one-file");
    std::fs::write(&file, "x").unwrap();
    let mut slot = slot(&cx);
    let look = "for p in /bindtest /bindtest/inner /bindfile; do \
                if [ -e $p ]; then echo \"$p here\"; else echo \"$p absent\"; fi; done";
    let with = |cx: &Ctx| {
        cx.plan("/bin/sh")
            .args(["-c", look])
            .bind(&host, "/bindtest/inner", false)
            .bind(&file, "/bindfile", false)
    };
    let (r, out) = capture_in(&mut slot, with(&cx));
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(
        out, "/bindtest here\n/bindtest/inner here\n/bindfile here\n",
        "{r:?}"
    );
    let (r, out) = capture_in(&mut slot, cx.plan("/bin/sh").args(["-c", look]));
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(
        out, "/bindtest absent\n/bindtest/inner absent\n/bindfile absent\n",
        "a bind target of the last run persisted in the slot's root"
    );
    let (r, out) = capture_in(&mut slot, with(&cx));
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(
        out,
        "/bindtest here\n/bindtest/inner here\n/bindfile here\n"
    );
    slot.close().unwrap();
}

/// Pages of `file` in the page cache, by `fincore` (util-linux); `None` without it.
fn cached_pages(file: &Path) -> Option<u64> {
    let out = std::process::Command::new("fincore")
        .args(["--noheadings", "--bytes", "--output", "PAGES"])
        .arg(file)
        .output()
        .ok()?;
    String::from_utf8(out.stdout).ok()?.trim().parse().ok()
}

/// Drop `file` from the page cache (coreutils dd: `iflag=nocache`); false where
/// dd cannot (busybox's, in the cgroup-v2 guest).
fn drop_from_cache(file: &Path) -> bool {
    std::process::Command::new("dd")
        .arg(format!("if={}", file.display()))
        .args(["iflag=nocache", "count=0", "status=none"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|st| st.success())
}

/// `<box>/data/input` of `bytes` bytes, written, synced and dropped from the
/// page cache where dd can (true then), so the first run that reads it charges
/// its pages to the slot. Returns the data dir (for a bind) and the file.
fn uncached_input(cx: &Ctx, bytes: usize) -> (std::path::PathBuf, std::path::PathBuf, bool) {
    let data = cx.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let file = data.join("input");
    std::fs::write(&file, vec![b'x'; bytes]).unwrap();
    nix::unistd::sync();
    let dropped = drop_from_cache(&file);
    (data, file, dropped)
}

/// `cat /data/input` with `data` bound at `/data`.
fn cat_input(cx: &Ctx, data: &Path) -> sandbox::Plan {
    cx.plan("/bin/cat")
        .arg("/data/input")
        .bind(data, "/data", false)
        .stdout(sandbox::Stdio::Null)
}

/// A file a run read stays in the page cache for the next run (v1 reclaimed
/// the slot's cgroup before every run that found clean cache above 1 MiB in
/// it, so a judging read its program and data from disk on every test).
#[test]
fn a_file_the_last_run_read_stays_cached() {
    let cx = Ctx::new("slot_keeps_cache");
    let (data, file, dropped) = uncached_input(&cx, 4 << 20);
    let Some(before) = cached_pages(&file).filter(|_| dropped) else {
        eprintln!("no fincore or no dd iflag=nocache here: nothing to check");
        return;
    };
    assert!(
        before < 64,
        "{before} pages still cached after dropping them"
    );
    let mut slot = slot(&cx);
    let r = slot.run(&cat_input(&cx, &data)).unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let read = cached_pages(&file).unwrap();
    assert!(read >= 1000, "the run's read cached only {read} pages");
    for _ in 0..3 {
        let r = slot.run(&cx.plan("/bin/true")).unwrap();
        assert_eq!(r.status, Status::Ok, "{r:?}");
    }
    let after = cached_pages(&file).unwrap();
    slot.close().unwrap();
    assert!(
        after >= read,
        "{read} pages cached after the reading run, {after} after three more runs"
    );
}

/// Clean page cache an earlier run left in the slot's cgroup is no extra room:
/// with 6 MiB of it charged, a run still gets exactly its limit (a program
/// 3 MiB over it is stopped) and its peak is its own.
#[test]
fn clean_cache_left_by_a_run_is_no_extra_room() {
    let cx = Ctx::new("slot_cache_room");
    let mem = cx.probe("mem");
    // Where the cache cannot be dropped the cat's read charges nothing to the
    // slot and the checks below hold trivially; they still must hold.
    let (data, file, dropped) = uncached_input(&cx, 6 << 20);
    let mut slot = slot(&cx);
    let limit = 128 * MIB;
    let r = slot.run(&cat_input(&cx, &data).memory(limit)).unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let r = slot.run(&cx.plan(&mem).arg("100").memory(limit)).unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(
        within_5_percent_of_100_mib(r.memory_bytes),
        "peak {} = {:.3} of 100 MiB",
        r.memory_bytes,
        r.memory_bytes as f64 / (100 * MIB) as f64
    );
    if let Some(pages) = cached_pages(&file).filter(|_| dropped) {
        assert!(
            pages >= 1000,
            "the cache was not left in place ({pages} pages)"
        );
    }
    let r = slot.run(&cx.plan(&mem).arg("131").memory(limit)).unwrap();
    assert_eq!(r.status, Status::MemoryLimit, "{r:?}");
    slot.close().unwrap();
}

/// The slice (ns) a `/proc/<pid>/sched` text shows; `None` before EEVDF (6.6).
fn slice_ns(sched: &str) -> Option<u64> {
    sched
        .lines()
        .find_map(|l| l.strip_prefix("se.slice"))
        .and_then(|rest| rest.trim_start().strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

fn own_slice() -> Option<u64> {
    slice_ns(&std::fs::read_to_string("/proc/thread-self/sched").unwrap())
}

/// The kernel's shortest slice, which a run's control path asks for.
const CONTROL_SLICE_NS: u64 = 100_000;

/// A slot run's control path (the thread that runs it, during the run; the
/// launcher; init) has the kernel's shortest scheduler slice, so a busy host
/// serves each hand-off at wake-up; the program itself is scheduled as it would
/// be outside, with the host's default slice, in a slot and in a one-shot run;
/// and the thread that ran gets its default back.
#[test]
fn a_program_gets_the_hosts_scheduler_slice() {
    let cx = Ctx::new("slot_slice");
    sandbox::prefer_short_slice();
    let honoured = own_slice() == Some(CONTROL_SLICE_NS);
    sandbox::default_slice();
    let Some(default) = own_slice() else {
        eprintln!("no se.slice in /proc (a kernel before EEVDF): nothing to check");
        return;
    };
    if !honoured {
        eprintln!("this kernel keeps no custom slice for a fair task (before 6.12)");
    }
    assert_ne!(default, CONTROL_SLICE_NS, "the host's default slice");
    let mut slot = slot(&cx);
    let (r, out) = capture_in(&mut slot, cx.plan("/bin/cat").arg("/proc/self/sched"));
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let in_slot = slice_ns(&out).expect("the program's se.slice");
    assert_eq!(
        own_slice(),
        Some(default),
        "the slot's caller after the run"
    );
    if honoured && let Some(pid) = launcher_pid(&cx) {
        let launcher = std::fs::read_to_string(format!("/proc/{pid}/sched")).unwrap();
        assert_eq!(
            slice_ns(&launcher),
            Some(CONTROL_SLICE_NS),
            "the launcher's slice"
        );
    }
    let file = cx.dir.path().join("one-shot-sched");
    let plan = cx
        .plan("/bin/cat")
        .arg("/proc/self/sched")
        .stdout(sandbox::Stdio::File(file.clone()));
    let r = sandbox::run(&plan).unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let one_shot = slice_ns(&std::fs::read_to_string(&file).unwrap())
        .expect("the one-shot program's se.slice");
    assert_eq!(in_slot, default, "the slot program's slice");
    assert_eq!(one_shot, default, "the one-shot program's slice");
}

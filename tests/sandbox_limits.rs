//! Limits and measurements: memory (OOM, peak), output, processes, /tmp, CPU
//! accounting of threads and children, nothing alive after the run.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod sandbox_common;

use std::time::Duration;

use judge_runner::sandbox::{Report, Status, Stdio};
use sandbox_common::{Ctx, slow};

const MIB: u64 = 1 << 20;

#[test]
fn memory_limit_oom_denied() {
    let cx = Ctx::new("oom_denied");
    let prog = cx.probe("mem");
    let r = cx.run(&cx.plan(&prog).arg("200").memory(64 * MIB));
    assert_eq!(r.status, Status::MemoryLimit, "{r:?}");
    assert!(
        r.memory_bytes >= 60 * MIB && r.memory_bytes <= 64 * MIB,
        "{r:?}"
    );
}

#[test]
fn memory_within_limit_allowed() {
    let cx = Ctx::new("oom_allowed");
    let prog = cx.probe("mem");
    let r = cx.run(&cx.plan(&prog).arg("20").memory(64 * MIB));
    assert_eq!(r.status, Status::Ok, "{r:?}");
}

#[test]
fn peak_of_a_100_mib_program_within_5_percent() {
    let cx = Ctx::new("peak");
    let prog = cx.probe("mem");
    let r = cx.run(&cx.plan(&prog).args(["100", "50"]));
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let want = 100.0 * MIB as f64;
    let ratio = r.memory_bytes as f64 / want;
    assert!(
        (0.95..=1.05).contains(&ratio),
        "peak {} bytes = {ratio:.3} of 100 MiB",
        r.memory_bytes
    );
}

fn write_stdout(cx: &Ctx, bytes: u64, limit: u64) -> (Report, u64) {
    let prog = cx.probe("writer");
    let out = tempfile::NamedTempFile::new().unwrap();
    let plan = cx
        .plan(&prog)
        .args(["-", &bytes.to_string()])
        .output(limit)
        .stdout(Stdio::File(out.path().to_path_buf()));
    let r = cx.run(&plan);
    (r, std::fs::metadata(out.path()).unwrap().len())
}

#[test]
fn output_limit_denied() {
    let cx = Ctx::new("output_denied");
    let (r, len) = write_stdout(&cx, 3 * MIB, MIB);
    assert_eq!(r.status, Status::OutputLimit, "{r:?}");
    assert_eq!(len, MIB);
}

#[test]
fn output_within_limit_allowed() {
    let cx = Ctx::new("output_allowed");
    let (r, len) = write_stdout(&cx, MIB / 2, MIB);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(len, MIB / 2);
}

fn fork(cx: &Ctx, want: u32, limit: u32) -> (Report, String) {
    let prog = cx.probe("forker");
    let out = tempfile::NamedTempFile::new().unwrap();
    let plan = cx
        .plan(&prog)
        .arg(want.to_string())
        .processes(limit)
        .stdout(Stdio::File(out.path().to_path_buf()));
    let r = cx.run(&plan);
    (r, std::fs::read_to_string(out.path()).unwrap())
}

#[test]
fn fork_bomb_bounded_by_processes_denied() {
    let cx = Ctx::new("forkbomb_denied");
    let (r, out) = fork(&cx, 10_000, 10);
    assert_eq!(r.status, Status::Ok, "the run goes on: {r:?}");
    // The probe itself is one of the 10.
    assert_eq!(out.trim(), "forked 9 errno 11", "EAGAIN after the limit");
}

#[test]
fn forks_under_processes_allowed() {
    let cx = Ctx::new("forkbomb_allowed");
    let (r, out) = fork(&cx, 5, 10);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(out.trim(), "forked 5 errno 0");
}

fn fill_tmp(cx: &Ctx, bytes: u64) -> String {
    let prog = cx.probe("writer");
    let err = tempfile::NamedTempFile::new().unwrap();
    let plan = cx
        .plan(&prog)
        .args(["/tmp/fill", &bytes.to_string()])
        .tmp_size(8 * MIB)
        .memory(256 * MIB)
        .stderr(Stdio::File(err.path().to_path_buf()));
    let r = cx.run(&plan);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    std::fs::read_to_string(err.path()).unwrap()
}

#[test]
fn filling_tmp_stops_at_its_size_denied() {
    let cx = Ctx::new("tmp_denied");
    let out = fill_tmp(&cx, 64 * MIB);
    assert_eq!(
        out.trim(),
        format!("written {} errno 28", 8 * MIB),
        "ENOSPC at the tmpfs size"
    );
}

#[test]
fn writing_tmp_below_its_size_allowed() {
    let cx = Ctx::new("tmp_allowed");
    let out = fill_tmp(&cx, 4 * MIB);
    assert_eq!(out.trim(), format!("written {} errno 0", 4 * MIB));
}

#[test]
fn tmp_pages_count_against_memory() {
    let cx = Ctx::new("tmp_memory");
    let prog = cx.probe("writer");
    let plan = cx
        .plan(&prog)
        .args(["/tmp/fill", &(48 * MIB).to_string()])
        .tmp_size(64 * MIB)
        .memory(32 * MIB);
    let r = cx.run(&plan);
    assert_eq!(r.status, Status::MemoryLimit, "{r:?}");
}

#[test]
fn cpu_of_two_threads_counted() {
    let cx = Ctx::new("cpu_threads");
    let prog = cx.probe("burn");
    let r = cx.run(&cx.plan(&prog).args(["threads", "200"]));
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(r.cpu_seconds >= 0.39, "both threads' 0.2 s counted: {r:?}");
}

#[test]
fn cpu_of_a_child_process_counted() {
    let cx = Ctx::new("cpu_child");
    let prog = cx.probe("burn");
    let r = cx.run(&cx.plan(&prog).args(["child", "200"]));
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(
        r.cpu_seconds >= 0.39,
        "parent's and child's 0.2 s counted: {r:?}"
    );
}

#[test]
fn cpu_limit_counts_all_threads_denied() {
    let cx = Ctx::new("cpu_threads_denied");
    let prog = cx.probe("burn");
    // Each thread alone stays under 0.3 s, together they do not.
    let r = cx.run(
        &cx.plan(&prog)
            .args(["threads", "250"])
            .cpu_time(Duration::from_millis(300)),
    );
    assert_eq!(r.status, Status::TimeLimit, "{r:?}");
    assert!(
        r.cpu_seconds < 0.3 + 0.1 * slow(),
        "stopped within a tick or two: {r:?}"
    );
}

/// Processes on the host whose command line contains `marker`.
fn host_processes_with(marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(marker))
                .unwrap_or(false)
        })
        .count()
}

#[test]
fn double_forked_setsid_daemon_dead_after_run() {
    let cx = Ctx::new("daemon");
    let marker = format!("judge-daemon-{}", std::process::id());
    let prog = cx.probe("daemon");
    // The shell's own command line must not hold the marker, or the shell
    // would pass for the daemon: it is put together by the shell.
    let plan = cx.plan("/bin/sh").args([
        "-c",
        &format!(
            "m=judge-daemon; {prog} \"$m-{}\"; sleep 3",
            std::process::id()
        ),
    ]);
    let started = std::time::Instant::now();
    let runner = std::thread::spawn(move || {
        let r = cx.run(&plan);
        drop(cx);
        r
    });
    // Alive during the run (the twin that proves the probe works). The probe's
    // parent, which holds the marker too, exits 100 ms after forking: only
    // what is seen after 600 ms is the daemon.
    std::thread::sleep(Duration::from_millis(600));
    let mut seen = 0;
    while seen == 0 && started.elapsed() < Duration::from_millis(2500) {
        seen = host_processes_with(&marker);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(seen >= 1, "the daemon never showed up");
    let r = runner.join().unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}");
    // ...and dead once the run has returned.
    assert_eq!(
        host_processes_with(&marker),
        0,
        "the daemon outlived the run"
    );
}

#[test]
fn output_exactly_at_the_limit_allowed() {
    let cx = Ctx::new("output_exact");
    let (r, len) = write_stdout(&cx, MIB, MIB);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(len, MIB);
}

/// A tiny program allocates less than the cgroup's charge batch, so the cgroup
/// alone reads 0 for it; its own largest resident set is reported then. A
/// program that allocates 100 MiB still reads its allocation, in a slot and in a
/// one-shot run alike.
#[test]
fn a_tiny_program_reports_memory_a_big_one_its_allocation() {
    let cx = Ctx::new("tiny_memory");
    let prog = cx.probe("mem");
    let mut slot = judge_runner::sandbox::SandboxSlot::new(cx.box_id, &cx.parent, None).unwrap();
    for via_slot in [false, true] {
        let mut run = |plan: judge_runner::sandbox::Plan| {
            let r = if via_slot {
                slot.run(&plan)
            } else {
                judge_runner::sandbox::run(&plan)
            };
            let r = r.unwrap();
            assert_eq!(r.status, Status::Ok, "{r:?}");
            r
        };
        let tiny = run(cx.plan(&prog).arg("1"));
        let true_run = run(cx.plan("/bin/true"));
        let big = run(cx.plan(&prog).args(["100", "50"]));
        eprintln!(
            "slot {via_slot}: mem 1 {} /bin/true {} mem 100 {}",
            tiny.memory_bytes, true_run.memory_bytes, big.memory_bytes
        );
        assert!(true_run.memory_bytes > 0, "slot {via_slot}: {true_run:?}");
        assert!(
            true_run.memory_bytes < 16 * MIB,
            "slot {via_slot}: {true_run:?}"
        );
        assert!(
            tiny.memory_bytes >= MIB && tiny.memory_bytes < 16 * MIB,
            "slot {via_slot}: {tiny:?}"
        );
        assert!(
            // The cgroup's figure, within a MiB either way (charges served from
            // a per-CPU stock taken before the reset can make it read under).
            big.memory_bytes >= 99 * MIB && big.memory_bytes <= 101 * MIB,
            "slot {via_slot}: {big:?}"
        );
    }
    slot.close().unwrap();
}

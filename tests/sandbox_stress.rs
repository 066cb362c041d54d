//! Many runs, concurrent runs, cancellation, pipes between two sandboxes, real
//! language runtimes, and nothing left behind.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod sandbox_common;

use std::path::Path;
use std::time::{Duration, Instant};

use judge_runner::sandbox::{self, Cancel, SandboxError, SandboxSlot, Status, Stdio};
use sandbox_common::{Ctx, slow};

/// Processes on the host running as `uid`.
fn processes_of(uid: u32) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
        .filter(|s| {
            s.lines().any(|l| {
                l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some(&uid.to_string())
            })
        })
        .count()
}

fn host_mounts_mentioning(word: &str) -> usize {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(word))
        .count()
}

fn box_temp_dirs() -> usize {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("judge-runner-box-")
        })
        .count()
}

#[test]
fn thousand_runs_leave_nothing_behind() {
    let cx = Ctx::new("thousand");
    let runs: usize = std::env::var("JUDGE_TEST_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let mounts_before = host_mounts_mentioning("judge-runner");
    let start = Instant::now();
    // Half through one long-lived slot (prepared root, kept netns), half one-shot
    // (fresh root), alternating; one-shot runs alternate the temp and a given box.
    let mut slot = SandboxSlot::new(cx.box_id, &cx.parent, None).unwrap();
    for i in 0..runs {
        let mut plan = sandbox::Plan::new("/bin/true")
            .box_id(cx.box_id)
            .cgroup_parent(cx.parent.clone());
        if i % 4 == 1 {
            plan = plan.box_dir(cx.dir.path());
        }
        let r = if i % 2 == 0 {
            slot.run(&plan)
        } else {
            sandbox::run(&plan)
        }
        .unwrap();
        assert_eq!(r.status, Status::Ok, "run {i}: {r:?}");
    }
    slot.close().unwrap();
    eprintln!("{runs} runs in {:.2} s", start.elapsed().as_secs_f64());
    assert_eq!(
        sandbox::children_of_parent(&cx.parent).unwrap(),
        Vec::<String>::new(),
        "cgroups left"
    );
    assert_eq!(processes_of(60000 + cx.box_id), 0, "processes left");
    assert_eq!(
        host_mounts_mentioning("judge-runner"),
        mounts_before,
        "mounts left"
    );
    assert_eq!(
        std::fs::read_dir(cx.dir.path()).unwrap().count(),
        0,
        "files left in the box"
    );
}

#[test]
fn temp_box_dir_removed_after_the_run() {
    let cx = Ctx::new("tempbox");
    let before = box_temp_dirs();
    let plan = sandbox::Plan::new("/bin/sh")
        .args(["-c", "echo x > /box/file"])
        .box_id(cx.box_id)
        .cgroup_parent(cx.parent.clone());
    assert_eq!(sandbox::run(&plan).unwrap().status, Status::Ok);
    assert!(box_temp_dirs() <= before, "a temp box dir is left");
}

#[test]
fn concurrent_runs_from_many_threads() {
    let ctxs: Vec<Ctx> = (0..4)
        .map(|i| Ctx::new(&format!("concurrent{i}")))
        .collect();
    std::thread::scope(|s| {
        for cx in &ctxs {
            s.spawn(move || {
                for _ in 0..15 {
                    let r = cx.run(
                        &cx.plan("/bin/sh")
                            .args(["-c", "echo $$ > /box/pid; ls /proc | grep -c '^[0-9]'"]),
                    );
                    assert_eq!(r.status, Status::Ok, "{r:?}");
                }
            });
        }
    });
}

#[test]
fn concurrent_runs_inside_a_tokio_runtime() {
    let ctxs: Vec<Ctx> = (0..8).map(|i| Ctx::new(&format!("tokio{i}"))).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let handles: Vec<_> = ctxs
            .iter()
            .map(|cx| {
                let plan = cx.plan("/bin/sh").args(["-c", "sleep 0.1"]);
                tokio::task::spawn_blocking(move || sandbox::run(&plan))
            })
            .collect();
        for h in handles {
            let r = h.await.unwrap().unwrap();
            assert_eq!(r.status, Status::Ok, "{r:?}");
        }
    });
}

#[test]
fn cancel_stops_a_run_promptly() {
    let cx = Ctx::new("cancel");
    let cancel = Cancel::new();
    let plan = cx
        .plan("/bin/sh")
        .args(["-c", "sleep 30 & sleep 30"])
        .cancel(cancel.clone());
    let t = std::thread::spawn(move || sandbox::run(&plan));
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    cancel.cancel();
    let result = t.join().unwrap();
    assert!(
        asked.elapsed() < Duration::from_secs_f64(slow()),
        "took {:?}",
        asked.elapsed()
    );
    assert!(matches!(result, Err(SandboxError::Cancelled)), "{result:?}");
    assert_eq!(processes_of(60000 + cx.box_id), 0);
}

#[test]
fn uncancelled_run_completes() {
    let cx = Ctx::new("nocancel");
    let plan = cx.plan("/bin/sleep").arg("0.2").cancel(Cancel::new());
    assert_eq!(cx.run(&plan).status, Status::Ok);
}

/// Two sandboxes connected by pipes, as in an interactive problem: when one side
/// exits, the other sees EOF at once (no copy of a pipe end lingers anywhere).
#[test]
fn two_sandboxes_talk_through_pipes() {
    let a = Ctx::new("pipe_a");
    let b = Ctx::new("pipe_b");
    let (a_in, b_out) = std::io::pipe().unwrap();
    let (b_in, a_out) = std::io::pipe().unwrap();
    let echo = a
        .plan("/bin/cat")
        .stdin(Stdio::fd(a_in.into()))
        .stdout(Stdio::fd(a_out.into()))
        .wall_time(Duration::from_secs(10));
    let talker = b
        .plan("/bin/sh")
        .args([
            "-c",
            "echo hello; read line; echo \"got $line\" > /box/reply",
        ])
        .stdin(Stdio::fd(b_in.into()))
        .stdout(Stdio::fd(b_out.into()))
        .wall_time(Duration::from_secs(10));
    let start = Instant::now();
    let (ra, rb) = std::thread::scope(|s| {
        let ta = s.spawn(|| sandbox::run(&echo).unwrap());
        let tb = s.spawn(|| sandbox::run(&talker).unwrap());
        (ta.join().unwrap(), tb.join().unwrap())
    });
    assert_eq!(rb.status, Status::Ok, "{rb:?}");
    assert_eq!(ra.status, Status::Ok, "cat saw EOF: {ra:?}");
    assert!(start.elapsed() < Duration::from_secs_f64(3.0 * slow()));
    assert_eq!(b.read("reply"), "got hello\n");
    assert!(
        matches!(sandbox::run(&echo), Err(SandboxError::StdioTaken(_))),
        "a moved fd runs once"
    );
}

#[test]
fn slot_runs_many_times_with_a_kept_network_namespace() {
    let cx = Ctx::new("slot");
    let mut slot = SandboxSlot::new(cx.box_id, &cx.parent, None).unwrap();
    for _ in 0..20 {
        let r = slot
            .run(
                &cx.plan("/bin/sh")
                    .args(["-c", "cat /proc/net/dev | grep -c :"]),
            )
            .unwrap();
        assert_eq!(r.status, Status::Ok);
    }
    let out = tempfile::NamedTempFile::new().unwrap();
    let plan = cx
        .plan("/bin/sh")
        .args(["-c", "cat /proc/net/dev | grep : | cut -d: -f1"])
        .stdout(Stdio::File(out.path().into()));
    assert_eq!(slot.run(&plan).unwrap().status, Status::Ok);
    assert_eq!(
        std::fs::read_to_string(out.path()).unwrap().trim(),
        "lo",
        "only a loopback device"
    );
    slot.close().unwrap();
}

fn have(tool: &str) -> bool {
    Path::new(tool).exists()
}

#[test]
fn python3_runs() {
    if !have("/usr/bin/python3") {
        eprintln!("skipped: no /usr/bin/python3 on this host");
        return;
    }
    let cx = Ctx::new("python");
    let out = tempfile::NamedTempFile::new().unwrap();
    let plan = cx
        .plan("python3")
        .args(["-c", "import threading, json, os; t = threading.Thread(target=print, args=('thread',)); t.start(); t.join(); print(json.dumps(os.getuid() > 0))"])
        .stdout(Stdio::File(out.path().into()));
    let r = cx.run(&plan);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(out.path()).unwrap(),
        "thread\ntrue\n"
    );
}

#[test]
fn compiled_cpp_program_runs() {
    if !have("/usr/bin/g++") {
        eprintln!("skipped: no g++ on this host");
        return;
    }
    let cx = Ctx::new("cpp");
    let src = cx.path("main.cpp");
    std::fs::write(&src, "#include <iostream>\n#include <thread>\n#include <vector>\nint main(){std::vector<int> v(1000,1);int s=0;std::thread t([&]{for(int x:v)s+=x;});t.join();std::cout<<s<<std::endl;}\n").unwrap();
    let st = std::process::Command::new("g++")
        .args(["-O2", "-pthread", "-o"])
        .arg(cx.path("main"))
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    let out = tempfile::NamedTempFile::new().unwrap();
    let r = cx.run(&cx.plan("./main").stdout(Stdio::File(out.path().into())));
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(std::fs::read_to_string(out.path()).unwrap(), "1000\n");
}

#[test]
fn java_runs_under_the_default_policy() {
    if !have("/usr/bin/java") || !have("/usr/bin/javac") {
        eprintln!("skipped: no JDK on this host");
        return;
    }
    let cx = Ctx::new("java");
    std::fs::write(cx.path("Main.java"), "public class Main { public static void main(String[] a) throws Exception { Thread t = new Thread(() -> System.out.println(\"hi from java\")); t.start(); t.join(); } }\n").unwrap();
    let st = std::process::Command::new("javac")
        .arg(cx.path("Main.java"))
        .status()
        .unwrap();
    assert!(st.success());
    let out = tempfile::NamedTempFile::new().unwrap();
    let plan = cx
        .plan("java")
        .args(["-Xss64m", "-cp", "/box", "Main"])
        .memory(1 << 30)
        .processes(128)
        .stdout(Stdio::File(out.path().into()));
    let r = cx.run(&plan);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(out.path()).unwrap(),
        "hi from java\n"
    );
}

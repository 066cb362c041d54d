//! What the program can see and do: identity, capabilities, file tree, network,
//! processes, signals, environment. Restrictions come in `_allowed`/`_denied` twins.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod sandbox_common;

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

use judge_runner::sandbox::{Plan, Report, Status, Stdio};
use sandbox_common::{Ctx, slow};

/// Run `plan` with stdout captured to a file in the box; returns (report, stdout).
fn capture(cx: &Ctx, plan: Plan) -> (Report, String) {
    let out = tempfile::NamedTempFile::new().unwrap();
    let r = cx.run(&plan.stdout(Stdio::File(out.path().to_path_buf())));
    (r, std::fs::read_to_string(out.path()).unwrap())
}

fn sh(cx: &Ctx, script: &str) -> (Report, String) {
    capture(cx, cx.plan("/bin/sh").args(["-c", script]))
}

fn info(cx: &Ctx) -> HashMap<String, Vec<String>> {
    let prog = cx.probe("info");
    let (r, out) = capture(cx, cx.plan(&prog));
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let mut map: HashMap<String, Vec<String>> = HashMap::new();
    for line in out.lines() {
        let (k, v) = line.split_once(' ').unwrap_or((line, ""));
        map.entry(k.to_string())
            .or_default()
            .push(v.trim().to_string());
    }
    map
}

#[test]
fn runs_as_box_uid_without_capabilities() {
    let cx = Ctx::new("identity");
    let i = info(&cx);
    let uid = (60000 + cx.box_id).to_string();
    assert_eq!(i["uid"][0], uid);
    assert_eq!(i["euid"][0], uid);
    assert_eq!(i["gid"][0], uid);
    assert_eq!(i["Groups"], [""], "no supplementary groups");
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(i[set], ["0000000000000000"], "{set}");
    }
    assert_eq!(i["NoNewPrivs"], ["1"]);
    assert_eq!(i["Seccomp"], ["2"]);
    assert_eq!(i["hostname"], ["box"]);
    assert_eq!(i["cwd"], ["/box"]);
}

#[test]
fn rlimits_follow_the_plan() {
    let cx = Ctx::new("rlimits");
    let prog = cx.probe("info");
    let plan = cx
        .plan(&prog)
        .output(1 << 20)
        .open_files(33)
        .memory(128 << 20);
    let (_, out) = capture(&cx, plan);
    for want in [
        "rlimit_fsize 1048576",
        "rlimit_nofile 33",
        "rlimit_core 0",
        // Unlimited by default (contract §1, 2026-12): the cgroup bounds it.
        "rlimit_stack -1",
        "rlimit_cpu -1",
    ] {
        assert!(out.lines().any(|l| l == want), "{want} missing in\n{out}");
    }
    // Its twin: an explicit --stack is the rlimit.
    let plan = cx.plan(&prog).memory(128 << 20).stack(8 << 20);
    let (_, out) = capture(&cx, plan);
    assert!(
        out.lines().any(|l| l == "rlimit_stack 8388608"),
        "explicit stack missing in\n{out}"
    );
}

#[test]
fn proc_shows_only_the_runs_processes() {
    let cx = Ctx::new("proc");
    let i = info(&cx);
    // init (pid 1) and the probe itself.
    assert_eq!(i["procs"], ["2"], "{i:?}");
    assert_eq!(i["pid"], ["2"]);
}

#[test]
fn mounts_are_the_fresh_root_only() {
    let cx = Ctx::new("mounts");
    let i = info(&cx);
    let mounts: Vec<&str> = i["mount"].iter().map(String::as_str).collect();
    for m in &mounts {
        let top = m.split('/').nth(1).unwrap_or("");
        assert!(
            [
                "", "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "box", "tmp",
                "dev", "proc"
            ]
            .contains(&top),
            "unexpected mount {m} in {mounts:?}"
        );
    }
    for needed in ["/", "/box", "/tmp", "/proc", "/dev/null"] {
        assert!(mounts.contains(&needed), "{needed} not mounted: {mounts:?}");
    }
}

#[test]
fn host_files_invisible_denied() {
    let cx = Ctx::new("hidden_denied");
    let repo = env!("CARGO_MANIFEST_DIR");
    let script = format!(
        "for p in /root {repo} /home /var /run /sys /etc/shadow; do [ -e $p ] && echo visible $p; done; echo done"
    );
    let (r, out) = sh(&cx, &script);
    assert_eq!(r.status, Status::Ok);
    assert_eq!(out, "done\n");
}

#[test]
fn host_files_visible_through_bind_allowed() {
    let cx = Ctx::new("hidden_allowed");
    let repo = env!("CARGO_MANIFEST_DIR");
    let plan = cx
        .plan("/bin/sh")
        .args(["-c", "cat /repo/Cargo.toml | head -1"])
        .bind(repo, "/repo", false);
    let (r, out) = capture(&cx, plan);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(out, "[package]\n");
}

#[test]
fn system_dirs_read_only_denied() {
    let cx = Ctx::new("ro_denied");
    let (r, out) = sh(
        &cx,
        "for d in /usr /bin /etc /lib / /dev; do touch $d/x 2>/dev/null && echo wrote $d; done; echo done",
    );
    assert_eq!(r.status, Status::Ok);
    assert_eq!(out, "done\n");
}

#[test]
fn box_and_tmp_writable_allowed() {
    let cx = Ctx::new("rw_allowed");
    let (r, out) = sh(&cx, "echo hi > /box/f && echo hi > /tmp/f && echo ok");
    assert_eq!((r.status, out.as_str()), (Status::Ok, "ok\n"));
    let meta = std::fs::metadata(cx.path("f")).unwrap();
    assert_eq!(
        meta.uid(),
        60000 + cx.box_id,
        "files in /box belong to the box uid"
    );
}

#[test]
fn box_dir_owned_by_box_uid_during_run_and_restored_after() {
    let cx = Ctx::new("box_owner");
    let before = std::fs::metadata(cx.dir.path()).unwrap();
    let (r, out) = sh(&cx, "ls -nd /box | awk '{print $3}'");
    assert_eq!(r.status, Status::Ok);
    assert_eq!(out.trim(), (60000 + cx.box_id).to_string());
    let after = std::fs::metadata(cx.dir.path()).unwrap();
    assert_eq!((after.uid(), after.mode()), (before.uid(), before.mode()));
}

#[test]
fn environment_is_exactly_the_contracts() {
    let cx = Ctx::new("env");
    let (r, out) = capture(&cx, cx.plan("/usr/bin/env").env("EXTRA", "a=b c"));
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "EXTRA=a=b c",
            "HOME=/box",
            "LANG=C.UTF-8",
            "PATH=/usr/local/bin:/usr/bin:/bin"
        ]
    );
}

fn listener() -> (std::net::TcpListener, u16) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

#[test]
fn network_isolated_denied() {
    let cx = Ctx::new("net_denied");
    let (_l, port) = listener();
    let prog = cx.probe("net");
    let (r, out) = capture(&cx, cx.plan(&prog).arg(port.to_string()));
    assert_eq!(r.status, Status::Ok);
    assert_eq!(
        out.trim(),
        "connect 111",
        "ECONNREFUSED: nothing listens on the box's own loopback"
    );
}

#[test]
fn network_kept_with_flag_allowed() {
    let cx = Ctx::new("net_allowed");
    let (_l, port) = listener();
    let prog = cx.probe("net");
    let (r, out) = capture(&cx, cx.plan(&prog).arg(port.to_string()).network(true));
    assert_eq!(r.status, Status::Ok);
    assert_eq!(out.trim(), "connect 0");
}

#[test]
fn kill_all_harms_nothing_outside_denied() {
    let cx = Ctx::new("killall_denied");
    let other = Ctx::new("killall_other");
    let mut host_child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let other_plan = other.plan("/bin/sleep").arg("1");
    let neighbour = std::thread::spawn(move || {
        let r = other.run(&other_plan);
        drop(other);
        r
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    let prog = cx.probe("killall");
    let (r, out) = capture(&cx, cx.plan(&prog));
    assert!(out.contains("about to kill -1"), "{out}");
    assert_eq!(
        host_child.try_wait().unwrap(),
        None,
        "a host process was killed"
    );
    host_child.kill().unwrap();
    host_child.wait().unwrap();
    let n = neighbour.join().unwrap();
    assert_eq!(
        n.status,
        Status::Ok,
        "the neighbouring box was harmed: {n:?}"
    );
    // The probe killed itself along with everything else it could signal.
    assert!(matches!(r.status, Status::Signaled | Status::Ok), "{r:?}");
}

#[test]
fn kill_all_reaches_the_runs_own_processes_allowed() {
    let cx = Ctx::new("killall_allowed");
    let prog = cx.probe("killall");
    let script = format!("sleep 20 & {prog}; wait; echo waited");
    let (r, _) = sh(&cx, &script);
    // The shell itself is killed too: the run ends at once, long before 20 s.
    assert_eq!(r.status, Status::Signaled, "{r:?}");
    assert!(r.wall_seconds < 5.0 * slow());
}

fn cpus_allowed(cx: &Ctx, plan: Plan) -> String {
    let (r, out) = capture(
        cx,
        plan.args(["-c", "grep Cpus_allowed_list /proc/self/status | cut -f2"]),
    );
    assert_eq!(r.status, Status::Ok, "{r:?}");
    out.trim().to_string()
}

#[test]
fn cpu_pinning_denies_other_cpus() {
    let cx = Ctx::new("pin_denied");
    assert_eq!(cpus_allowed(&cx, cx.plan("/bin/sh").cpu(0)), "0");
}

#[test]
fn unpinned_run_may_use_every_cpu_allowed() {
    let cx = Ctx::new("pin_allowed");
    let host = std::fs::read_to_string("/proc/self/status").unwrap();
    let want = host
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string();
    assert_eq!(cpus_allowed(&cx, cx.plan("/bin/sh")), want);
}

/// The fresh-root and the prepared-root (slot) paths build the same box.
#[test]
fn slot_and_one_shot_roots_look_the_same() {
    let cx = Ctx::new("roots_same");
    let script = "cat /proc/self/mountinfo | cut -d' ' -f5,6 | sort; ls -la / /etc /dev | sort";
    let once = {
        let out = tempfile::NamedTempFile::new().unwrap();
        let plan = cx
            .plan("/bin/sh")
            .args(["-c", script])
            .stdout(Stdio::File(out.path().into()));
        assert_eq!(
            judge_runner::sandbox::run(&plan).unwrap().status,
            Status::Ok
        );
        std::fs::read_to_string(out.path()).unwrap()
    };
    let slotted = {
        let out = tempfile::NamedTempFile::new().unwrap();
        let plan = cx
            .plan("/bin/sh")
            .args(["-c", script])
            .stdout(Stdio::File(out.path().into()));
        let mut slot =
            judge_runner::sandbox::SandboxSlot::new(cx.box_id, &cx.parent, None).unwrap();
        assert_eq!(slot.run(&plan).unwrap().status, Status::Ok);
        slot.close().unwrap();
        std::fs::read_to_string(out.path()).unwrap()
    };
    let strip_times = |s: &str| -> Vec<String> {
        s.lines()
            .map(|l| {
                l.split_whitespace()
                    .filter(|w| !w.contains(':') || w.starts_with('/'))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    };
    assert_eq!(
        strip_times(&once).len(),
        strip_times(&slotted).len(),
        "once:\n{once}\nslot:\n{slotted}"
    );
    let mounts = |s: &str| {
        s.lines()
            .filter(|l| l.starts_with('/'))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(mounts(&once), mounts(&slotted));
}

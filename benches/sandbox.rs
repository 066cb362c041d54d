//! Per-run overhead of the sandbox against a plain fork+exec, and CPU-time accuracy.
//! `cargo bench --bench sandbox` (as root). Everything is interleaved (A B C A B C
//! ...) in one run, so the machine's noise hits every variant alike; ratios are the
//! figures that mean something (see BENCHMARKS.md).
//!
//! CPU time is that of every process a run costs (the benchmark, a slot's
//! launcher, init, the program), read from a cgroup the whole benchmark runs in.
//!
//! The per-run overhead runs twice: quiet, then "loaded", with a busy loop on
//! every CPU beside it (moved out of the benchmark's cgroup, so CPU per run
//! stays that of the runs). The one-call CLI variants (`judge-runner sandbox`
//! with the built-in policy build.rs compiled, the same policy as a file that
//! the call compiles, `--seccomp none`, and `judge-runner --version` for the
//! binary's start-up alone) say where a one-shot call's time goes.
//!
//! Environment: BENCH_RUNS (default 500), BENCH_LOOP_RUNS (default 20).
//! Arguments: `--cpu-only`, `--overhead-only`, `--quiet-only`, `--loaded-only`,
//! `--profile-slot` (back-to-back slot runs only, for `perf record`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss
)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use judge_runner::sandbox::{self, Plan, SandboxSlot, Status};

#[path = "common/load.rs"]
mod load;

/// The binary under test, built by cargo for this benchmark.
const JUDGE_RUNNER: &str = env!("CARGO_BIN_EXE_judge-runner");

/// CPU time of everything a run costs: this process, the slot's launcher, init
/// and the program. A slot's launcher is not this process's child once it has
/// reaped init, so `getrusage` would miss it; instead the whole benchmark runs
/// below one cgroup of its own and reads that cgroup's (hierarchical) counter.
struct Meter {
    /// v1: `cpuacct.usage` (ns) of the benchmark's cgroup; v2: its `cpu.stat`.
    file: Option<std::path::PathBuf>,
    /// v1: the leaf this process moved into (moved back out at the end).
    leaf: Option<std::path::PathBuf>,
}

impl Meter {
    /// Returns the meter and the cgroup parent the benchmark's slots use.
    fn new() -> (Meter, String) {
        let name = format!("judge-runner-bench-{}", std::process::id());
        if sandbox::cgroup_version().unwrap() == "v2" {
            // The sandbox moved this process into `<own>/supervisor`; its runs live
            // in `<own>/<parent>`: `<own>` holds them all.
            let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
            let rel = own
                .lines()
                .find_map(|l| l.strip_prefix("0::"))
                .unwrap()
                .trim();
            let dir = Path::new("/sys/fs/cgroup")
                .join(rel.trim_start_matches('/'))
                .parent()
                .unwrap()
                .to_path_buf();
            let file = Some(dir.join("cpu.stat"));
            return (Meter { file, leaf: None }, name);
        }
        let root = Path::new("/sys/fs/cgroup/cpuacct");
        let leaf = root.join(&name).join("self");
        std::fs::create_dir_all(&leaf).unwrap();
        std::fs::write(leaf.join("cgroup.procs"), std::process::id().to_string()).unwrap();
        let meter = Meter {
            file: Some(root.join(&name).join("cpuacct.usage")),
            leaf: Some(leaf),
        };
        (meter, format!("{name}/runs"))
    }

    fn now(&self) -> Duration {
        let Some(file) = &self.file else {
            return Duration::ZERO;
        };
        let text = std::fs::read_to_string(file).unwrap();
        match text.lines().find_map(|l| l.strip_prefix("usage_usec ")) {
            Some(us) => Duration::from_micros(us.trim().parse().unwrap()),
            None => Duration::from_nanos(text.trim().parse().unwrap()),
        }
    }

    fn close(self, parent: &str) {
        if let Some(leaf) = self.leaf {
            let root = leaf.parent().unwrap().parent().unwrap();
            std::fs::write(root.join("cgroup.procs"), std::process::id().to_string()).unwrap();
            std::fs::remove_dir(&leaf).unwrap();
        }
        sandbox::remove_parent(parent).unwrap();
    }
}

/// (wall, cpu) of one call.
fn measure(meter: &Meter, f: &mut dyn FnMut()) -> (Duration, Duration) {
    let (c0, w0) = (meter.now(), Instant::now());
    f();
    (w0.elapsed(), meter.now().saturating_sub(c0))
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn stats(xs: &[f64]) -> (f64, f64) {
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (xs.len() as f64 - 1.0);
    (mean, var.sqrt() / mean * 100.0)
}

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A named way of running /bin/true once.
type Variant<'a> = (&'static str, Box<dyn FnMut() + 'a>);

fn limited(plan: Plan) -> Plan {
    plan.memory(256 << 20)
        .processes(16)
        .cpu_time(Duration::from_secs(2))
}

/// The `cgroup.procs` a busy loop moves to, outside the benchmark's cgroup.
fn outside_procs() -> std::path::PathBuf {
    if sandbox::cgroup_version().unwrap() == "v2" {
        Path::new("/sys/fs/cgroup/cgroup.procs").to_path_buf()
    } else {
        Path::new("/sys/fs/cgroup/cpuacct/cgroup.procs").to_path_buf()
    }
}

/// One `judge-runner` process; `args` after the binary.
fn cli(args: &[&str]) {
    let st = Command::new(JUDGE_RUNNER)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "judge-runner {args:?}: {st}");
}

fn overhead(meter: &Meter, parent: &str, loaded: bool) {
    let runs = env_num("BENCH_RUNS", 500);
    let load = loaded.then(|| load::Load::start(Some(&outside_procs())));
    let mut slot = SandboxSlot::new(1, parent, None).unwrap();
    let plan = limited(Plan::new("/bin/true"));
    let one_shot = limited(Plan::new("/bin/true"))
        .box_id(2)
        .cgroup_parent(parent);
    let policy_file = concat!(env!("CARGO_MANIFEST_DIR"), "/seccomp/default.json");
    let cli_args = |seccomp: Option<&'static str>| {
        let mut a = vec![
            "sandbox",
            "--box-id",
            "6",
            "--cgroup-parent",
            parent,
            "--memory",
            "256M",
            "--processes",
            "16",
            "--time",
            "2",
            "--report",
            "-",
        ];
        if let Some(policy) = seccomp {
            a.extend(["--seccomp", policy]);
        }
        a.extend(["--", "/bin/true"]);
        a
    };
    let with_policy = cli_args(None);
    let compiling = cli_args(Some(policy_file));
    let without_policy = cli_args(Some("none"));
    let mut variants: Vec<Variant> = vec![
        (
            "plain fork+exec",
            Box::new(|| assert!(Command::new("/bin/true").status().unwrap().success())),
        ),
        (
            "sandbox SandboxSlot::run",
            Box::new(|| assert_eq!(slot.run(&plan).unwrap().status, Status::Ok)),
        ),
        (
            "sandbox::run (one-shot)",
            Box::new(|| assert_eq!(sandbox::run(&one_shot).unwrap().status, Status::Ok)),
        ),
        ("CLI judge-runner sandbox", Box::new(|| cli(&with_policy))),
        ("CLI, policy JSON compiled", Box::new(|| cli(&compiling))),
        ("CLI --seccomp none", Box::new(|| cli(&without_policy))),
        (
            "CLI judge-runner --version",
            Box::new(|| cli(&["--version"])),
        ),
    ];
    for (_, f) in variants.iter_mut() {
        for _ in 0..20 {
            f(); // warm-up
        }
    }
    let mut walls = vec![Vec::with_capacity(runs); variants.len()];
    let mut cpus = vec![Vec::with_capacity(runs); variants.len()];
    for _ in 0..runs {
        for (i, (_, f)) in variants.iter_mut().enumerate() {
            let (w, c) = measure(meter, f.as_mut());
            walls[i].push(w);
            cpus[i].push(c);
        }
    }
    let base = pct(&mut walls[0].clone(), 0.5);
    let condition = match &load {
        Some(l) => format!("LOADED: a busy loop on each of {} CPUs beside it", l.cpus()),
        None => "quiet".to_string(),
    };
    println!(
        "\nper-run cost of /bin/true, {runs} runs each, interleaved (memory 256M, processes 16, time 2 s), {condition}:"
    );
    println!(
        "{:<28} {:>10} {:>10} {:>12} {:>10}",
        "variant", "wall p50", "wall p90", "CPU p50", "ratio p50"
    );
    for (i, (name, _)) in variants.iter().enumerate() {
        let (w50, w90) = (pct(&mut walls[i], 0.5), pct(&mut walls[i], 0.9));
        let c50 = pct(&mut cpus[i], 0.5);
        println!(
            "{name:<28} {:>8.3}ms {:>8.3}ms {:>10.3}ms {:>9.2}x",
            ms(w50),
            ms(w90),
            ms(c50),
            w50.as_secs_f64() / base.as_secs_f64()
        );
    }
    drop(variants);
    slot.close().unwrap();
    drop(load);
}

/// Back-to-back runs through one slot, as a judge runs a test set: runs per
/// second. Interleaved in blocks of 10 (10 sandboxed, 10 plain, ...), so both see
/// the same load.
fn throughput(parent: &str) {
    let runs = env_num("BENCH_RUNS", 500);
    let mut slot = SandboxSlot::new(4, parent, None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plan = limited(Plan::new("/bin/true")).box_dir(dir.path());
    let (mut sandboxed, mut plain) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..runs.div_ceil(10) {
        let start = Instant::now();
        for _ in 0..10 {
            assert_eq!(slot.run(&plan).unwrap().status, Status::Ok);
        }
        sandboxed += start.elapsed();
        let start = Instant::now();
        for _ in 0..10 {
            assert!(Command::new("/bin/true").status().unwrap().success());
        }
        plain += start.elapsed();
    }
    slot.close().unwrap();
    let runs = runs.div_ceil(10) * 10;
    println!(
        "\nback to back, {runs} runs of /bin/true in one slot (with a box dir), in blocks of 10 interleaved with plain ones:"
    );
    println!(
        "sandbox {:.0} runs/s ({:.3} ms/run), plain fork+exec {:.0} runs/s ({:.3} ms/run), ratio {:.2}x",
        runs as f64 / sandboxed.as_secs_f64(),
        ms(sandboxed) / runs as f64,
        runs as f64 / plain.as_secs_f64(),
        ms(plain) / runs as f64,
        sandboxed.as_secs_f64() / plain.as_secs_f64()
    );
}

fn cpu_accuracy(meter: &Meter, parent: &str) {
    let runs = env_num("BENCH_LOOP_RUNS", 20);
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("loop.c");
    std::fs::write(&src, "int main(int c,char**v){volatile unsigned long x=0;unsigned long n=strtoul(v[1],0,10);for(unsigned long i=0;i<n;i++)x+=i;return 0;}\n#include <stdlib.h>\n").unwrap();
    let bin = dir.path().join("loop");
    assert!(
        Command::new("gcc")
            .args(["-O1", "-static", "-include", "stdlib.h", "-o"])
            .arg(&bin)
            .arg(&src)
            .status()
            .unwrap()
            .success()
    );
    // Calibrate the iteration count to about 0.3 s of CPU.
    let iters_for = |n: u64| {
        let (_, c) = measure(meter, &mut || {
            assert!(
                Command::new(&bin)
                    .arg(n.to_string())
                    .status()
                    .unwrap()
                    .success()
            )
        });
        c.as_secs_f64()
    };
    let probe = 50_000_000u64;
    let iters = (probe as f64 * 0.3 / iters_for(probe).max(1e-3)) as u64;
    let mut slot = SandboxSlot::new(3, parent, None).unwrap();
    let plan = Plan::new("/box/loop")
        .arg(iters.to_string())
        .box_dir(dir.path());
    let (mut plain, mut boxed) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        plain.push(iters_for(iters));
        let r = slot.run(&plan).unwrap();
        assert_eq!(r.status, Status::Ok);
        boxed.push(r.cpu_seconds);
    }
    slot.close().unwrap();
    let (pm, pc) = stats(&plain);
    let (bm, bc) = stats(&boxed);
    println!("\nCPU time of a fixed ~0.3 s loop, {runs} runs each, interleaved:");
    println!(
        "plain (getrusage of the child): mean {:.4} s, CoV {pc:.2} %",
        pm
    );
    println!(
        "sandbox (cgroup cpu_seconds):   mean {:.4} s, CoV {bc:.2} %",
        bm
    );
    println!(
        "ratio sandbox/plain: {:.4} ({:+.2} %)",
        bm / pm,
        (bm / pm - 1.0) * 100.0
    );
}

/// Back-to-back slot runs and nothing else, to profile (`perf record`, `strace`).
fn profile_slot(parent: &str) {
    let runs = env_num("BENCH_RUNS", 500);
    let mut slot = SandboxSlot::new(5, parent, None).unwrap();
    let plan = limited(Plan::new("/bin/true"));
    for _ in 0..runs {
        assert_eq!(slot.run(&plan).unwrap().status, Status::Ok);
    }
    slot.close().unwrap();
}

fn main() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("the sandbox benchmark needs root");
        std::process::exit(1);
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "load average at start: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let (meter, parent) = Meter::new();
    let arg = |a: &str| std::env::args().any(|x| x == a);
    if arg("--profile-slot") {
        profile_slot(&parent);
    } else if arg("--cpu-only") {
        cpu_accuracy(&meter, &parent);
    } else if arg("--quiet-only") {
        overhead(&meter, &parent, false);
    } else if arg("--loaded-only") {
        overhead(&meter, &parent, true);
    } else if arg("--overhead-only") {
        // e.g. in the cgroup-v2 VM, which has no gcc for the loop program
        overhead(&meter, &parent, false);
        overhead(&meter, &parent, true);
        throughput(&parent);
    } else {
        overhead(&meter, &parent, false);
        overhead(&meter, &parent, true);
        throughput(&parent);
        cpu_accuracy(&meter, &parent);
    }
    meter.close(&parent);
}

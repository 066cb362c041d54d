//! End to end: 200 submissions of a 50-test problem through a real `serve` and
//! one real `daemon` with all its slots (CPUs − 1 by default).
//!
//!     cargo bench --bench e2e            # JUDGE_BENCH_SUBMISSIONS=N to change 200
//!
//! Prints submissions per minute, and where the slots' time went: the
//! submissions' own test runs, the rest of judging (sandbox set-up, compile,
//! validation: the judge's overhead), and outside judging altogether (claim,
//! package, attachments, Result: the protocol's overhead). Figures come from the
//! daemon's own counters (`--metrics`), the wall clock from this process.
//!
//! Side by side, interleaved in 10 rounds: the same submissions judged by
//! `judge-runner judge` (no Server, no Runner; same CPU pin) one after another,
//! so the ratio shows what the daemon and the protocol add to judging itself.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use judge_runner::demo::manager::Manager;
use judge_runner::protocol::SubmissionFile;

const BIN: &str = env!("CARGO_BIN_EXE_judge-runner");
const TOKEN: &str = "bench-token";
const TESTS: usize = 50;

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn problem(dir: &Path) -> Vec<u8> {
    let root = dir.join("echo50");
    fs::create_dir_all(root.join("data/secret")).unwrap();
    fs::write(
        root.join("problem.yaml"),
        "name: Echo 50\nlimits:\n  time_limit: 1\n  memory: 256\n",
    )
    .unwrap();
    for i in 0..TESTS {
        fs::write(
            root.join(format!("data/secret/{i:02}.in")),
            format!("{i}\n"),
        )
        .unwrap();
        fs::write(
            root.join(format!("data/secret/{i:02}.ans")),
            format!("{i}\n"),
        )
        .unwrap();
    }
    judge_runner::demo::examples::tar_gz(&root).unwrap()
}

const SOURCE: &str = "#include <stdio.h>\nint main(void){long x; if(scanf(\"%ld\",&x)==1) printf(\"%ld\\n\",x); return 0;}\n";

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0)
}

fn main() {
    let submissions: usize = std::env::var("JUDGE_BENCH_SUBMISSIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let rounds = 10.min(submissions);
    let dir = tempfile::Builder::new()
        .prefix("bench-e2e-")
        .tempdir()
        .unwrap();
    let package = problem(dir.path());
    let source = dir.path().join("echo.c");
    fs::write(&source, SOURCE).unwrap();
    let serve_log = fs::File::create(dir.path().join("serve.log")).unwrap();
    let mut serve = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .arg("--database")
        .arg(format!(
            "sqlite://{}",
            dir.path().join("judge.db").display()
        ))
        .arg("--storage")
        .arg(dir.path().join("storage"))
        .env("JUDGE_MANAGER_TOKEN", TOKEN)
        .stdout(Stdio::piped())
        .stderr(serve_log)
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(serve.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    let _serve = Killed(serve);
    let url = first.trim().trim_start_matches("listening on ").to_string();
    let parent = format!("judge-runner-bench-{}", std::process::id());
    let slots = judge_runner::runner::default_slots();
    let cpu = judge_runner::runner::plan_cpus(slots, true)[0];
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let manager = Manager::new(&url, TOKEN);
        let created = manager.upload_problem(package, None).await.unwrap();
        let runner = manager.create_runner("bench").await.unwrap();
        let metrics_addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let daemon = Killed(
            Command::new(BIN)
                .args([
                    "daemon",
                    "--server",
                    &url,
                    "--key",
                    &runner.key,
                    "--first-box",
                    "3300",
                ])
                .arg("--cache")
                .arg(dir.path().join("cache"))
                .args([
                    "--cgroup-parent",
                    &parent,
                    "--metrics",
                    &metrics_addr.to_string(),
                ])
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .stderr(fs::File::create(dir.path().join("daemon.log")).unwrap())
                .spawn()
                .unwrap(),
        );
        let (mut e2e, mut local, mut accepted) = (Duration::ZERO, Duration::ZERO, 0);
        for round in 0..rounds {
            let batch = submissions / rounds + usize::from(round < submissions % rounds);
            let started = Instant::now();
            let mut jobs = Vec::new();
            for _ in 0..batch {
                let files = vec![SubmissionFile::from_bytes("echo.c", SOURCE.as_bytes())];
                jobs.push(
                    manager
                        .submit(created.problem_id, "c", files)
                        .await
                        .unwrap()
                        .job_id,
                );
            }
            for job in &jobs {
                loop {
                    let view = manager.job(*job).await.unwrap();
                    if view.state.is_final() {
                        accepted +=
                            usize::from(view.result.is_some_and(|r| r.verdict == "Accepted"));
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            e2e += started.elapsed();
            let started = Instant::now();
            for _ in 0..batch {
                local_judge(&dir.path().join("echo50"), &source, cpu, &parent);
            }
            local += started.elapsed();
        }
        let text = reqwest::get(format!("http://{metrics_addr}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        drop(daemon);
        let _ = judge_runner::sandbox::remove_parent(&parent);
        report(
            submissions,
            accepted,
            e2e.as_secs_f64(),
            local.as_secs_f64(),
            &text,
        );
    });
}

/// One `judge-runner judge` of the submission, as a local user would run it.
fn local_judge(problem: &Path, source: &Path, cpu: Option<u32>, parent: &str) {
    let mut judge = Command::new(BIN);
    judge.arg("judge").arg("--problem").arg(problem).args([
        "--language",
        "c",
        "--box-id",
        "3310",
        "--cgroup-parent",
        parent,
    ]);
    if let Some(cpu) = cpu {
        judge.args(["--cpu", &cpu.to_string()]);
    }
    let out = judge
        .args(["--report", "-"])
        .arg(source)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("\"Accepted\""),
        "local judge: {out:?}"
    );
}

fn report(submissions: usize, accepted: usize, elapsed: f64, local: f64, text: &str) {
    let slots = metric(text, "judge_runner_slots");
    let judging = metric(text, "judge_runner_judge_seconds_total");
    let programs = metric(text, "judge_runner_program_seconds_total");
    let tests = metric(text, "judge_runner_tests_run_total");
    let progress = metric(text, "judge_runner_progress_reports_total");
    let slot_time = elapsed * slots;
    println!(
        "e2e: {submissions} submissions x {TESTS} tests (C), serve + 1 daemon with {slots} slot(s), SQLite"
    );
    println!("  accepted                 {accepted}/{submissions}");
    println!("  wall (e2e)               {elapsed:.1} s");
    println!(
        "  submissions per minute   {:.1}",
        submissions as f64 * 60.0 / elapsed
    );
    println!("  tests per second         {:.1}", tests / elapsed);
    println!(
        "  progress calls per test  {:.3}",
        progress / tests.max(1.0)
    );
    println!(
        "  slot time in the submissions' test runs                               {:5.1} %",
        100.0 * programs / slot_time
    );
    println!(
        "  slot time judging outside them (sandbox set-up, compile, validation)  {:5.1} %",
        100.0 * (judging - programs) / slot_time
    );
    println!(
        "  slot time outside judging (claim, package, attachments, Result)      {:5.1} %",
        100.0 * (slot_time - judging) / slot_time
    );
    println!(
        "  => share of time outside the sandboxed programs: {:.1} %",
        100.0 * (1.0 - programs / slot_time)
    );
    println!(
        "side by side, interleaved: the same {submissions} by `judge-runner judge`, one after another"
    );
    println!(
        "  wall (local judge)       {local:.1} s, {:.1} per minute",
        submissions as f64 * 60.0 / local
    );
    println!(
        "  e2e / local (wall, x slots for a fair one-CPU comparison)  {:.3}",
        elapsed * slots / local
    );
}

//! Judging throughput: a generated pass-fail problem with 1,000 tiny tests and a
//! trivial C solution. Measures tests per second end to end (compile included,
//! and the walk alone), and the per-test overhead of the judge over a bare
//! sandbox run of the same program with the same stdio, limits and mounts.
//! Runs A (judge) and B (bare) interleaved, several rounds; prints medians.
//!
//! Then the ratio of issue 13: the judge end to end (compile included) against
//! a bare, unsandboxed judge loop over the same tests (fork+exec of the same
//! static binary per test, stdin from the test's file, stdout through a pipe,
//! compared token by token with the answer, as `judge-throughput.py` does in
//! Python), interleaved, quiet and with a busy loop on every CPU.
//!
//!     cargo bench --bench judge            (as root; JUDGE_BENCH_TESTS, JUDGE_BENCH_ROUNDS)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use judge_runner::judge::{
    Judge, JudgeConfig, LanguageTable, Options, SourceFile, Submission, Verdict,
};
use judge_runner::{package, sandbox};

#[path = "common/load.rs"]
mod load;

const SOLUTION: &str = "#include <stdio.h>\nint main(void){long a,b; if(scanf(\"%ld %ld\",&a,&b)!=2) return 1; printf(\"%ld\\n\",a+b); return 0;}\n";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn generate(dir: &Path, tests: usize) {
    std::fs::write(
        dir.join("problem.yaml"),
        "name: Bench\nlimits:\n  time_limit: 1\n  memory: 256\n",
    )
    .unwrap();
    let secret = dir.join("data/secret");
    std::fs::create_dir_all(&secret).unwrap();
    for i in 0..tests {
        std::fs::write(
            secret.join(format!("t{i:05}.in")),
            format!("{i} {}\n", i * 7),
        )
        .unwrap();
        std::fs::write(secret.join(format!("t{i:05}.ans")), format!("{}\n", i * 8)).unwrap();
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One judging: (total seconds, seconds from the first test's end to the last's).
fn judge_once(judge: &Judge, problem: &package::Problem, tests: usize) -> (f64, f64) {
    let submission = Submission {
        language: "c".into(),
        files: vec![SourceFile {
            name: "sum.c".into(),
            content: SOLUTION.as_bytes().to_vec(),
        }],
    };
    let start = Instant::now();
    let mut first: Option<Instant> = None;
    let mut last = start;
    let outcome = judge
        .judge(problem, &submission, &Options::default(), &mut |p| {
            let now = Instant::now();
            first.get_or_insert(now);
            last = now;
            assert_eq!(p.last.verdict, Verdict::Accepted);
        })
        .unwrap();
    assert_eq!(outcome.verdict, Verdict::Accepted);
    assert_eq!(outcome.details.len(), tests);
    let walk = last.duration_since(first.unwrap_or(start)).as_secs_f64() / (tests - 1) as f64;
    (start.elapsed().as_secs_f64(), walk)
}

/// `runs` bare sandbox runs of the compiled solution, as the judge runs a test
/// (program dir bound read-only, fresh box, stdin/stdout files), seconds per run.
fn bare_runs(slot: &mut sandbox::SandboxSlot, work: &Path, problem_dir: &Path, runs: usize) -> f64 {
    let secret = problem_dir.join("data/secret");
    let start = Instant::now();
    for i in 0..runs {
        let box_dir = work.join("box");
        let _ = std::fs::remove_dir_all(&box_dir);
        std::fs::create_dir(&box_dir).unwrap();
        let plan = sandbox::Plan::new("/submission/program")
            .cpu_time(Duration::from_secs(1))
            .wall_time(Duration::from_secs(3))
            .memory(256 << 20)
            .processes(16)
            .output(8 << 20)
            .open_files(256)
            .box_dir(&box_dir)
            .bind(work.join("program"), "/submission", false)
            .stdin(sandbox::Stdio::File(secret.join(format!("t{i:05}.in"))))
            .stdout(sandbox::Stdio::File(work.join("output")))
            .stderr(sandbox::Stdio::File(work.join("stderr")));
        let report = slot.run(&plan).unwrap();
        assert_eq!(report.status, sandbox::Status::Ok);
    }
    start.elapsed().as_secs_f64() / runs as f64
}

/// The bare unsandboxed judge loop: per test, fork+exec the binary with the
/// test's input on stdin and its stdout through a pipe, compare the output's
/// whitespace-separated tokens with the answer's. Seconds for all tests.
fn bare_loop(binary: &Path, problem_dir: &Path, tests: usize) -> f64 {
    let secret = problem_dir.join("data/secret");
    let start = Instant::now();
    for i in 0..tests {
        let input = std::fs::File::open(secret.join(format!("t{i:05}.in"))).unwrap();
        let out = std::process::Command::new(binary)
            .stdin(input)
            .stderr(std::process::Stdio::null())
            .output()
            .unwrap();
        let answer = std::fs::read(secret.join(format!("t{i:05}.ans"))).unwrap();
        let tokens = |b: &[u8]| {
            b.split(u8::is_ascii_whitespace)
                .filter(|t| !t.is_empty())
                .map(<[u8]>::to_vec)
                .collect::<Vec<_>>()
        };
        assert!(
            out.status.success() && tokens(&out.stdout) == tokens(&answer),
            "bare loop: wrong answer on test {i}"
        );
    }
    start.elapsed().as_secs_f64()
}

/// Judge end to end against the bare loop, interleaved, quiet then loaded;
/// returns the worse ratio.
fn against_bare_loop(
    judge: &Judge,
    problem: &package::Problem,
    binary: &Path,
    problem_dir: &Path,
    tests: usize,
    rounds: usize,
) -> f64 {
    let mut worst: f64 = 0.0;
    for loaded in [false, true] {
        let load = loaded.then(|| load::Load::start(None));
        let (mut judged, mut bare) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            bare.push(bare_loop(binary, problem_dir, tests));
            judged.push(judge_once(judge, problem, tests).0);
        }
        let condition = match &load {
            Some(l) => format!("loaded ({} busy loops)", l.cpus()),
            None => "quiet".to_string(),
        };
        drop(load);
        let (j, b) = (median(judged), median(bare));
        let ratio = j / b;
        worst = worst.max(ratio);
        println!(
            "{condition}: {tests} tests, bare unsandboxed loop {b:.2} s ({:.0} tests/s), judge {j:.2} s ({:.0} tests/s, compile included); ratio {ratio:.2}",
            tests as f64 / b,
            tests as f64 / j
        );
    }
    println!("judge / bare unsandboxed loop, worse of quiet and loaded: {worst:.2} (goal <= 1.5)");
    worst
}

fn main() {
    let tests = env_usize("JUDGE_BENCH_TESTS", 1000);
    let rounds = env_usize("JUDGE_BENCH_ROUNDS", 3);
    let parent = format!("judge-runner-bench-{}", std::process::id());
    let problem_dir = tempfile::tempdir().unwrap();
    generate(problem_dir.path(), tests);
    let problem = package::parse(problem_dir.path()).unwrap();

    let mut config = JudgeConfig::new(LanguageTable::builtin().unwrap(), 700);
    config.validator_box_id = 701;
    config.cgroup_parent = parent.clone();
    let judge = Judge::new(config);

    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir(work.path().join("program")).unwrap();
    std::fs::write(work.path().join("sum.c"), SOLUTION).unwrap();
    let gcc = std::process::Command::new("gcc")
        .args(["-O2", "-static", "-o"])
        .arg(work.path().join("program/program"))
        .arg(work.path().join("sum.c"))
        .status()
        .unwrap();
    assert!(gcc.success());
    let mut slot = sandbox::SandboxSlot::new(702, &parent, None).unwrap();

    println!("judge bench: {tests} tests, {rounds} rounds, interleaved judge / bare sandbox");
    let (mut totals, mut walks, mut bares) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (total, walk) = judge_once(&judge, &problem, tests);
        let bare = bare_runs(&mut slot, work.path(), problem_dir.path(), tests);
        println!(
            "  round {round}: judge {total:.2} s ({:.0} tests/s end to end, {:.3} ms/test in the walk); bare sandbox {:.3} ms/run",
            tests as f64 / total,
            walk * 1e3,
            bare * 1e3
        );
        totals.push(total);
        walks.push(walk);
        bares.push(bare);
    }
    let (total, walk, bare) = (median(totals), median(walks), median(bares));
    println!(
        "median: {:.0} tests/s end to end (compile included)",
        tests as f64 / total
    );
    println!(
        "median: {:.0} tests/s in the walk ({:.3} ms/test)",
        1.0 / walk,
        walk * 1e3
    );
    println!(
        "median: bare sandbox run {:.3} ms; judge overhead per test {:.3} ms ({:.2}x the bare run)",
        bare * 1e3,
        (walk - bare) * 1e3,
        walk / bare
    );
    println!(
        "\njudge end to end against a bare unsandboxed judge loop, {rounds} rounds each, interleaved:"
    );
    against_bare_loop(
        &judge,
        &problem,
        &work.path().join("program/program"),
        problem_dir.path(),
        tests,
        rounds,
    );
    drop(judge);
    slot.close().unwrap();
    let _ = sandbox::remove_parent(&parent);
}

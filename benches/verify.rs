//! `judge-runner verify` on the project's example problems (`examples/problems/`)
//! against the same packages judged by `judge-runner judge` called once per
//! submission, and against problemtools' `verifyproblem -p submissions` with the
//! same time limit where problemtools is installed. Every variant is a real
//! process of the release binary (or of problemtools), timed by its wall clock;
//! the variants run interleaved (A B C … then B C … A, rounds rotating who goes
//! first), and medians and ratios are printed, quiet and with every CPU busy.
//!
//!     cargo bench --bench verify                    (as root)
//!
//! - `VERIFY_BENCH_ROUNDS` (3): rounds per package and load.
//! - `VERIFY_BENCH_PROBLEMS` (all): comma-separated names under examples/problems.
//! - `VERIFY_BENCH_SLOTS` (1, CPUs, 2×CPUs): the `--slots` values timed.
//! - `VERIFY_BENCH_LOAD` (`both`): `quiet`, `loaded` (a busy loop per CPU beside
//!   the benchmark) or `both`.
//! - `VERIFY_BENCH_ALL_FOLDERS` (unset): judge every folder; by default the
//!   copies keep only the folders problemtools judges, so all three judge the
//!   same submissions.
//! - `VERIFY_BENCH_PROBLEMTOOLS`: the `verifyproblem` to compare with, or the
//!   venv `tests/problemtools/venv.sh` prints (default: `verifyproblem` on
//!   PATH; without one the comparison is skipped, and said so).
//!
//! problemtools runs Python with `pypy3` by default; the benchmark gives it a
//! languages.yaml (through `XDG_CONFIG_HOME`: the venv's `config/`, else one of
//! its own unless XDG_CONFIG_HOME is set) that runs `python3`, as
//! `judge-runner` does, so both judge with the same interpreter.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use judge_runner::judge::LanguageTable;
use judge_runner::{package, verify};

const BIN: &str = env!("CARGO_BIN_EXE_judge-runner");
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/problems");
/// Clear of the tests' boxes (verify_cli uses 5000+, e2e_harden lower) and of
/// the other benchmarks' (700s).
const FIRST_BOX: u32 = 820;
const JUDGE_BOX: u32 = 830;
/// The PATH a sandboxed program gets (contract §1).
const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Variant {
    Verify(usize),
    JudgeEach,
    Problemtools,
}

impl Variant {
    fn name(&self) -> String {
        match self {
            Variant::Verify(n) => format!("verify --slots {n}"),
            Variant::JudgeEach => "judge x each".to_string(),
            Variant::Problemtools => "verifyproblem".to_string(),
        }
    }
}

/// One package as all three tools see it.
struct Package {
    name: String,
    dir: PathBuf,
    time_limit: f64,
    /// (label, language, files) of each submission `verify` judges.
    submissions: Vec<(String, String, Vec<PathBuf>)>,
}

/// The folders problemtools 1.20260907 judges (its legacy policy); it refuses
/// `compile_error/`, `memory_limit_exceeded/`, `output_limit_exceeded/` and
/// judges nothing there.
const PROBLEMTOOLS_FOLDERS: &[&str] = &[
    "accepted",
    "partially_accepted",
    "wrong_answer",
    "run_time_error",
    "time_limit_exceeded",
];

/// A copy of example problem `name` (only the folders problemtools judges,
/// unless `all_folders`).
fn load(name: &str, copy_root: &Path, all_folders: bool) -> Package {
    // problemtools takes the short name from the directory: keep it.
    let dir = copy_root.join(name);
    let status = Command::new("cp")
        .arg("-a")
        .arg(Path::new(EXAMPLES).join(name))
        .arg(&dir)
        .status()
        .unwrap();
    assert!(status.success(), "cp {name}");
    if !all_folders {
        for folder in std::fs::read_dir(dir.join("submissions")).unwrap() {
            let folder = folder.unwrap();
            let known = folder
                .file_name()
                .to_str()
                .is_some_and(|n| PROBLEMTOOLS_FOLDERS.contains(&n));
            if !known {
                std::fs::remove_dir_all(folder.path()).unwrap();
            }
        }
    }
    let problem = package::parse(&dir).unwrap();
    let languages = LanguageTable::builtin().unwrap();
    let mut warnings = Vec::new();
    let entries = verify::plan::entries(&problem, &languages, &mut warnings).unwrap();
    let submissions = problem
        .submissions
        .iter()
        .zip(&entries)
        .filter(|(_, e)| e.skip.is_none())
        .map(|(s, e)| (e.label.clone(), e.language.clone(), s.files.clone()))
        .collect();
    Package {
        name: name.to_string(),
        time_limit: problem.time_limit(None),
        dir,
        submissions,
    }
}

/// What one timed run gave: seconds, and a note when something disagreed.
struct Run {
    seconds: f64,
    note: Option<String>,
    /// label → verdict (verify's report, or the judge calls').
    verdicts: BTreeMap<String, String>,
}

fn run_verify(pkg: &Package, slots: usize, work: &Path) -> Run {
    let report = work.join(format!("verify-{}-{slots}.json", pkg.name));
    let start = Instant::now();
    let out = Command::new(BIN)
        .arg("verify")
        .arg(&pkg.dir)
        .args(["--slots", &slots.to_string()])
        .args(["--first-box", &FIRST_BOX.to_string()])
        .arg("--report")
        .arg(&report)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let seconds = start.elapsed().as_secs_f64();
    let mut verdicts = BTreeMap::new();
    let mut note = None;
    if out.status.code() != Some(0) {
        note = Some(format!(
            "verify exit {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    if let Ok(text) = std::fs::read(&report) {
        let rows: Vec<serde_json::Value> = serde_json::from_slice(&text).unwrap();
        for row in rows {
            if let (Some(label), Some(verdict)) =
                (row["submission"].as_str(), row["verdict"].as_str())
            {
                verdicts.insert(label.to_string(), verdict.to_string());
            }
        }
    }
    Run {
        seconds,
        note,
        verdicts,
    }
}

fn run_judge_each(pkg: &Package, cpu: u32) -> Run {
    let mut verdicts = BTreeMap::new();
    let mut notes = Vec::new();
    let start = Instant::now();
    for (label, language, files) in &pkg.submissions {
        let out = Command::new(BIN)
            .arg("judge")
            .arg("--problem")
            .arg(&pkg.dir)
            .args(["--language", language])
            .args(["--box-id", &JUDGE_BOX.to_string()])
            .args(["--cpu", &cpu.to_string()])
            .args(["--report", "-"])
            .args(files)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        if out.status.code() != Some(0) {
            notes.push(format!("{label}: judge exit {:?}", out.status.code()));
            continue;
        }
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if let Some(v) = report["verdict"].as_str() {
            verdicts.insert(label.clone(), v.to_string());
        }
    }
    Run {
        seconds: start.elapsed().as_secs_f64(),
        note: (!notes.is_empty()).then(|| notes.join("; ")),
        verdicts,
    }
}

fn run_problemtools(pkg: &Package, verifyproblem: &Path, xdg: Option<&Path>) -> Run {
    let mut cmd = Command::new(verifyproblem);
    cmd.args(["-p", "submissions"])
        .args(["-t", &format!("{}", pkg.time_limit)])
        .arg(&pkg.dir)
        .stdin(Stdio::null());
    if let Some(xdg) = xdg {
        cmd.env("XDG_CONFIG_HOME", xdg);
    }
    // The PATH our sandbox gives a submission (so `python3` is the same
    // interpreter, not a version manager's shim), after verifyproblem's own bin.
    let bin = verifyproblem.parent().unwrap_or(Path::new("/"));
    cmd.env("PATH", format!("{}:{SANDBOX_PATH}", bin.display()));
    let start = Instant::now();
    let out = cmd.output().unwrap();
    let seconds = start.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&out.stdout);
    let errors = text.lines().filter(|l| l.contains("ERROR")).count();
    let note = (out.status.code() != Some(0) || errors > 0).then(|| {
        let first = text
            .lines()
            .find(|l| l.contains("ERROR"))
            .unwrap_or("")
            .trim()
            .to_string();
        format!(
            "verifyproblem exit {:?}, {errors} ERROR line(s){}",
            out.status.code(),
            if first.is_empty() {
                String::new()
            } else {
                format!(": {first}")
            }
        )
    });
    Run {
        seconds,
        note,
        verdicts: BTreeMap::new(),
    }
}

/// A busy loop per CPU until dropped.
struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(cpus: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..cpus)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x: u64 = 1;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..10_000 {
                            x = std::hint::black_box(
                                x.wrapping_mul(6364136223846793005).wrapping_add(1),
                            );
                        }
                    }
                })
            })
            .collect();
        Load { stop, threads }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The `verifyproblem` to compare with and the `XDG_CONFIG_HOME` to give it:
/// `VERIFY_BENCH_PROBLEMTOOLS` names the program or a venv
/// (`tests/problemtools/venv.sh` prints one: `bin/verifyproblem`, and its
/// `config/` holding the python3 override); else `verifyproblem` on PATH.
fn find_verifyproblem(work: &Path) -> Option<(PathBuf, Option<PathBuf>)> {
    let program = match std::env::var_os("VERIFY_BENCH_PROBLEMTOOLS") {
        Some(p) => PathBuf::from(p),
        None => {
            let path = std::env::var_os("PATH")?;
            std::env::split_paths(&path)
                .map(|d| d.join("verifyproblem"))
                .find(|p| p.is_file())?
        }
    };
    let (program, venv_config) = if program.is_dir() {
        let config = program.join("config");
        (
            program.join("bin/verifyproblem"),
            config.is_dir().then_some(config),
        )
    } else {
        (program, None)
    };
    let xdg = match (venv_config, std::env::var_os("XDG_CONFIG_HOME")) {
        (Some(config), _) => Some(config),
        (None, Some(_)) => None,
        (None, None) => Some(problemtools_config(work)),
    };
    Some((program, xdg))
}

/// problemtools' languages.yaml override: Python 3 run by `python3` (its
/// default is pypy3), as `judge-runner` runs it.
fn problemtools_config(root: &Path) -> PathBuf {
    let dir = root.join("xdg");
    std::fs::create_dir_all(dir.join("problemtools")).unwrap();
    std::fs::write(
        dir.join("problemtools/languages.yaml"),
        "python3:\n  name: 'Python 3'\n  compile: 'python3 -m py_compile {files}'\n  run: 'python3 \"{mainfile}\"'\n",
    )
    .unwrap();
    dir
}

fn main() {
    let rounds: usize = env_or("VERIFY_BENCH_ROUNDS", "3").parse().unwrap();
    let cpus = verify::usable_cpus();
    let default_slots = format!("1,{},{}", cpus.len(), 2 * cpus.len());
    let mut slots: Vec<usize> = env_or("VERIFY_BENCH_SLOTS", &default_slots)
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect();
    slots.dedup();
    let loads: Vec<bool> = match env_or("VERIFY_BENCH_LOAD", "both").as_str() {
        "quiet" => vec![false],
        "loaded" => vec![true],
        _ => vec![false, true],
    };
    let mut names: Vec<String> = match std::env::var("VERIFY_BENCH_PROBLEMS") {
        Ok(list) => list.split(',').map(|s| s.trim().to_string()).collect(),
        Err(_) => std::fs::read_dir(EXAMPLES)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
    };
    names.sort();

    let all_folders = std::env::var_os("VERIFY_BENCH_ALL_FOLDERS").is_some();
    let work = tempfile::Builder::new()
        .prefix("bench-verify-")
        .tempdir()
        .unwrap();
    let packages: Vec<Package> = names
        .iter()
        .map(|n| load(n, work.path(), all_folders))
        .collect();
    let found = find_verifyproblem(work.path());
    let (verifyproblem, xdg) = match found {
        Some((p, x)) => (Some(p), x),
        None => (None, None),
    };
    let mut variants: Vec<Variant> = slots.iter().map(|&n| Variant::Verify(n)).collect();
    variants.push(Variant::JudgeEach);
    match &verifyproblem {
        Some(p) => {
            variants.push(Variant::Problemtools);
            let version = Command::new(p.parent().unwrap_or(Path::new(".")).join("pip"))
                .args(["show", "problemtools"])
                .output()
                .ok()
                .and_then(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .find_map(|l| l.strip_prefix("Version: ").map(str::to_string))
                })
                .unwrap_or_else(|| "version unknown".to_string());
            println!("problemtools: {} ({version})", p.display());
        }
        None => println!(
            "problemtools: no verifyproblem (set VERIFY_BENCH_PROBLEMTOOLS or put it on PATH): not compared"
        ),
    }
    // `judge` once per submission runs where `verify --slots 1` runs its slot.
    let judge_cpu = *cpus.last().unwrap();
    println!(
        "verify bench: {} package(s), {rounds} round(s), {} CPU(s), variants: {}",
        packages.len(),
        cpus.len(),
        variants
            .iter()
            .map(Variant::name)
            .collect::<Vec<_>>()
            .join(", ")
    );

    // (loaded, package, variant) → seconds of each round.
    let mut times: BTreeMap<(bool, String, Variant), Vec<f64>> = BTreeMap::new();
    for &loaded in &loads {
        let label = if loaded { "loaded" } else { "quiet" };
        let _load = loaded.then(|| Load::start(cpus.len()));
        println!(
            "\n== {label}{}: load average {}",
            if loaded {
                format!(" ({} busy loops beside the benchmark)", cpus.len())
            } else {
                String::new()
            },
            loadavg()
        );
        for pkg in &packages {
            println!(
                "-- {}: {} submissions judged, time limit {} s",
                pkg.name,
                pkg.submissions.len(),
                pkg.time_limit
            );
            // A warm-up: compilers, interpreters and the package in the page cache.
            let _ = run_verify(pkg, *slots.last().unwrap(), work.path());
            for round in 0..rounds {
                let mut order = variants.clone();
                order.rotate_left(round % variants.len());
                let mut reference: Option<BTreeMap<String, String>> = None;
                let mut line = Vec::new();
                for v in order {
                    let run = match &v {
                        Variant::Verify(n) => run_verify(pkg, *n, work.path()),
                        Variant::JudgeEach => run_judge_each(pkg, judge_cpu),
                        Variant::Problemtools => {
                            run_problemtools(pkg, verifyproblem.as_deref().unwrap(), xdg.as_deref())
                        }
                    };
                    println!("   round {round}: {} {:.2} s", v.name(), run.seconds);
                    line.push(format!("{} {:.2} s", v.name(), run.seconds));
                    if let Some(note) = &run.note {
                        println!("   note, round {round}, {}: {note}", v.name());
                    }
                    if !run.verdicts.is_empty() {
                        match &reference {
                            None => reference = Some(run.verdicts.clone()),
                            Some(r) if *r != run.verdicts => {
                                let differ: Vec<_> = r
                                    .iter()
                                    .filter(|(k, val)| run.verdicts.get(*k) != Some(*val))
                                    .map(|(k, val)| {
                                        format!("{k} {val} vs {:?}", run.verdicts.get(k))
                                    })
                                    .collect();
                                println!(
                                    "   note, round {round}, {}: verdicts differ: {}",
                                    v.name(),
                                    differ.join(", ")
                                );
                            }
                            Some(_) => {}
                        }
                    }
                    times
                        .entry((loaded, pkg.name.clone(), v))
                        .or_default()
                        .push(run.seconds);
                }
                println!("   round {round}: {}", line.join(", "));
            }
        }
        println!("   load average at the end: {}", loadavg());
    }

    println!("\nmedians (s) and ratios (other / verify; higher is better for verify):");
    for &loaded in &loads {
        let label = if loaded { "loaded" } else { "quiet" };
        for pkg in &packages {
            let get = |v: &Variant| {
                times
                    .get(&(loaded, pkg.name.clone(), v.clone()))
                    .map(|t| median(t))
            };
            let one = get(&Variant::Verify(slots[0]));
            let judge = get(&Variant::JudgeEach);
            let pt = get(&Variant::Problemtools);
            let mut cells = vec![format!(
                "{label:6} {:9} ({:2} subs)",
                pkg.name,
                pkg.submissions.len()
            )];
            for &n in &slots {
                let Some(t) = get(&Variant::Verify(n)) else {
                    continue;
                };
                let mut cell = format!("verify/{n} {t:.2}");
                if let (Some(one), true) = (one, n != slots[0]) {
                    cell.push_str(&format!(" (x{:.2} vs {} slot)", one / t, slots[0]));
                }
                cells.push(cell);
            }
            if let Some(j) = judge {
                cells.push(format!("judge-each {j:.2}"));
            }
            if let Some(p) = pt {
                cells.push(format!("verifyproblem {p:.2}"));
            }
            println!("  {}", cells.join(" | "));
            let mut ratios = Vec::new();
            for &n in &slots {
                let Some(t) = get(&Variant::Verify(n)) else {
                    continue;
                };
                if let Some(p) = pt {
                    ratios.push(format!("problemtools/verify{n} {:.2}", p / t));
                }
                if let Some(j) = judge {
                    ratios.push(format!("judge-each/verify{n} {:.2}", j / t));
                }
            }
            println!("  {:27} {}", "", ratios.join(", "));
        }
    }
}

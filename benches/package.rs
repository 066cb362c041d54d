//! Unpack and hash throughput against the system tools, side by side in one run.
//!
//!     cargo bench --bench package [-- --rounds N --mib M]
//!
//! Generates a ~200 MiB problem package (test data text in a few hundred files,
//! archived with the system `tar -czf`), then interleaves, round by round:
//! `package::unpack` vs `tar -xzf` of the same archive, inflating alone (the
//! gzip backend `unpack` uses vs `gzip -dc`), and `package::sha256_file` vs
//! `sha256sum` of the same uncompressed tar. Prints the medians and the ratios
//! (tool time / our time: > 1 means we are faster).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use flate2::read::MultiGzDecoder;
use judge_runner::package::{self, UnpackLimits};

struct Options {
    rounds: usize,
    mib: usize,
}

fn options() -> Options {
    let mut opts = Options {
        rounds: 7,
        mib: 200,
    };
    let args: Vec<String> = std::env::args().collect();
    for pair in args.windows(2) {
        match pair[0].as_str() {
            "--rounds" => opts.rounds = pair[1].parse().unwrap(),
            "--mib" => opts.mib = pair[1].parse().unwrap(),
            _ => {}
        }
    }
    opts
}

/// xorshift: deterministic test data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A package tree: `data/secret/NNN.in/.ans` of numbers (compresses about 2-3x
/// like real test data), a few big ones and many small ones.
fn generate(dir: &Path, total: usize) {
    fs::write(
        dir.join("problem.yaml"),
        "name: Bench\nlimits:\n  memory: 512\n",
    )
    .unwrap();
    let secret = dir.join("data/secret");
    fs::create_dir_all(&secret).unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut written = 0;
    let mut index = 0;
    while written < total {
        let size = if index % 10 == 0 { 8 << 20 } else { 64 << 10 };
        let mut text = Vec::with_capacity(size + 32);
        while text.len() < size {
            writeln!(text, "{} {}", rng.next() % 1_000_000_007, rng.next() % 1000).unwrap();
        }
        fs::write(secret.join(format!("{index:04}.in")), &text).unwrap();
        fs::write(
            secret.join(format!("{index:04}.ans")),
            format!("{}\n", text.len()),
        )
        .unwrap();
        written += text.len();
        index += 1;
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn timed(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

fn run_ok(cmd: &mut Command) {
    let status = cmd.status().unwrap();
    assert!(status.success(), "{cmd:?} failed");
}

fn mib_per_s(bytes: u64, time: Duration) -> f64 {
    bytes as f64 / (1 << 20) as f64 / time.as_secs_f64()
}

/// The archive (`.tar.gz` by the system tar) and the same tar uncompressed.
fn build_package(work: &Path, mib: usize) -> (PathBuf, PathBuf) {
    let tree = work.join("pkg");
    fs::create_dir(&tree).unwrap();
    generate(&tree, mib << 20);
    let archive = work.join("pkg.tar.gz");
    let plain = work.join("pkg.tar");
    run_ok(
        Command::new("tar")
            .arg("-czf")
            .arg(&archive)
            .arg("-C")
            .arg(&tree)
            .arg("."),
    );
    run_ok(
        Command::new("tar")
            .arg("-cf")
            .arg(&plain)
            .arg("-C")
            .arg(&tree)
            .arg("."),
    );
    fs::remove_dir_all(&tree).unwrap();
    (archive, plain)
}

/// Medians of each pair, measured A B / B A alternately, round by round.
#[derive(Default)]
struct Samples {
    ours: Vec<Duration>,
    tool: Vec<Duration>,
}

impl Samples {
    fn pair(&mut self, round: usize, ours: impl FnOnce(), tool: impl FnOnce()) {
        // Alternate who goes first, so neither always inherits the other's writeback.
        if round.is_multiple_of(2) {
            self.ours.push(timed(ours));
            self.tool.push(timed(tool));
        } else {
            self.tool.push(timed(tool));
            self.ours.push(timed(ours));
        }
    }

    fn report(self, what: &str, ours: &str, tool: &str, bytes: u64) {
        let (o, t) = (median(self.ours), median(self.tool));
        println!(
            "{what:<8}{ours:<16}{:>8.1} ms ({:>5.0} MiB/s)   {tool:<14}{:>8.1} ms ({:>5.0} MiB/s)   ratio {:.2}",
            o.as_secs_f64() * 1e3,
            mib_per_s(bytes, o),
            t.as_secs_f64() * 1e3,
            mib_per_s(bytes, t),
            t.as_secs_f64() / o.as_secs_f64()
        );
    }
}

/// Inflates the archive to nowhere with the crate's gzip backend.
fn inflate_only(archive: &Path) {
    let file = fs::File::open(archive).unwrap();
    let mut decoder = MultiGzDecoder::new(std::io::BufReader::with_capacity(256 << 10, file));
    std::io::copy(&mut decoder, &mut std::io::sink()).unwrap();
}

fn main() {
    let opts = options();
    let work = tempfile::Builder::new()
        .prefix("judge-runner-bench-")
        .tempdir()
        .unwrap();
    let (archive, plain) = build_package(work.path(), opts.mib);
    let packed = fs::metadata(&archive).unwrap().len();
    let unpacked = fs::metadata(&plain).unwrap().len();
    println!(
        "package: {:.1} MiB unpacked, {:.1} MiB as .tar.gz; {} rounds, interleaved",
        unpacked as f64 / (1 << 20) as f64,
        packed as f64 / (1 << 20) as f64,
        opts.rounds
    );
    let limits = UnpackLimits::default();
    let expected = package::sha256_file(&plain).unwrap();
    let (mut unpack, mut inflate, mut hash) =
        (Samples::default(), Samples::default(), Samples::default());
    for round in 0..opts.rounds {
        let ours_dir = work.path().join(format!("ours{round}"));
        let tar_dir = work.path().join(format!("tar{round}"));
        fs::create_dir(&tar_dir).unwrap();
        unpack.pair(
            round,
            || {
                package::unpack(&archive, &ours_dir, &limits).unwrap();
            },
            || {
                run_ok(
                    Command::new("tar")
                        .arg("-xzf")
                        .arg(&archive)
                        .arg("-C")
                        .arg(&tar_dir),
                )
            },
        );
        fs::remove_dir_all(&ours_dir).unwrap();
        fs::remove_dir_all(&tar_dir).unwrap();
        inflate.pair(
            round,
            || inflate_only(&archive),
            || {
                run_ok(
                    Command::new("sh")
                        .arg("-c")
                        .arg(format!("gzip -dc '{}' > /dev/null", archive.display())),
                )
            },
        );
        hash.pair(
            round,
            || assert_eq!(package::sha256_file(&plain).unwrap(), expected),
            || {
                let out = Command::new("sha256sum").arg(&plain).output().unwrap();
                assert!(String::from_utf8_lossy(&out.stdout).starts_with(&expected));
            },
        );
    }
    unpack.report("unpack", "package::unpack", "tar -xzf", unpacked);
    inflate.report("inflate", "flate2", "gzip -dc", unpacked);
    hash.report("sha256", "sha256_file", "sha256sum", unpacked);
    println!(
        "(ratio = tool time / our time; >= 0.8 is the target; load: {})",
        load()
    );
}

fn load() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

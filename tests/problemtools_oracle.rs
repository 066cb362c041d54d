//! problemtools as an oracle (issue 10): our default validator against
//! problemtools' compiled `default_validator` on thousands of generated
//! (answer, output, flags) cases.
//!
//! Needs the venv that `tests/problemtools/venv.sh` creates; the test finds it
//! through `JUDGE_PROBLEMTOOLS` (the venv's directory; `.ci/run` sets it). When the
//! variable is unset, as under a plain `cargo test`, the test prints that it is
//! skipped and passes. `JUDGE_ORACLE_CASES` changes the number of cases (default
//! 6000) and `JUDGE_ORACLE_SEED` the seed (default fixed, so a run is repeatable).
//!
//! Every disagreement must be one of [`KNOWN`]: a place where problemtools' C++
//! validator is lax and we agree with BAPCtools instead (docs/judge.md).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use judge_runner::judge::default_validator::validate;
use judge_runner::package::DefaultValidatorFlags;

/// The venv of `tests/problemtools/venv.sh`, or `None` (the test is skipped).
fn problemtools() -> Option<PathBuf> {
    let dir = std::env::var_os("JUDGE_PROBLEMTOOLS").filter(|d| !d.is_empty())?;
    let dir = PathBuf::from(dir);
    assert!(
        dir.join("bin/default_validator").exists(),
        "JUDGE_PROBLEMTOOLS={} holds no bin/default_validator (run tests/problemtools/venv.sh)",
        dir.display()
    );
    Some(dir)
}

/// Says so on the real stderr (not the test harness's captured one), so a plain
/// `cargo test` shows it.
fn skipped(what: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {what}: JUDGE_PROBLEMTOOLS is not set (run `export JUDGE_PROBLEMTOOLS=$(tests/problemtools/venv.sh)`; .ci/run does)"
    );
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// splitmix64: a small seeded generator, the same on every platform and version.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// One generated case.
#[derive(Debug, Clone)]
struct Case {
    answer: Vec<u8>,
    output: Vec<u8>,
    args: Vec<String>,
}

const WORDS: &[&str] = &[
    "yes",
    "YES",
    "No",
    "impossible",
    "Impossible",
    "a",
    "abc",
    "x1",
    "-",
    "+",
    ".",
    "e",
    "E",
    "inf",
    "INF",
    "Infinity",
    "nan",
    "NaN",
    "nan(1)",
    "0x",
    "0x1p",
    "é",
    "ÄÖ",
    "1,5",
    "1_000",
    "--1",
    "+-1",
    "1..2",
    "1e",
    "1E+",
    "2e-",
    ".e1",
    "0e",
    "1.e",
    "\u{feff}1",
];

/// A number as text, in one of many forms.
fn number(rng: &mut Rng) -> String {
    let sign = *rng.pick(&["", "", "-", "+"]);
    match rng.below(12) {
        0 => format!("{sign}{}", rng.below(10)),
        1 => format!("{sign}{}", rng.next() % 1_000_000_007),
        2 => format!("{sign}{}", rng.next()),
        3 => format!("{sign}{}", rng.next() as i64),
        4 => {
            let x = (rng.next() % 2_000_000) as f64 / 1000.0;
            format!("{sign}{x:.*}", rng.below(9))
        }
        5 => {
            let x = (rng.next() % 1_000_000) as f64 / 7.0;
            format!("{sign}{x:e}")
        }
        6 => {
            let e = rng.below(700) as i64 - 350;
            let m = rng.below(100_000);
            let exp = *rng.pick(&["e", "E"]);
            let esign = *rng.pick(&["", "+", "-"]);
            format!("{sign}{m}{exp}{esign}{}", e.unsigned_abs())
        }
        7 => format!(
            "{sign}{}",
            rng.pick(&["0", "0.0", "00", "0.", ".0", "-0", "0e0"])
        ),
        8 => format!(
            "{sign}{}",
            rng.pick(&["inf", "nan", "infinity", "INF", "NaN", "Inf", "nan(x)"])
        ),
        9 => format!(
            "{sign}0x{:x}{}p{}{}",
            rng.next() % 4096,
            rng.pick(&["", ".8", ".f", ".000001"]),
            rng.pick(&["", "-", "+"]),
            rng.below(1100)
        ),
        10 => format!(
            "{sign}{}",
            rng.pick(&[
                "1e400",
                "1e-400",
                "4.9e-324",
                "2.2250738585072014e-308",
                "1.7976931348623157e308",
                "1.7976931348623159e308",
                "0.1",
                "0.30000000000000004",
                "123456789012345678901234567890",
            ])
        ),
        _ => format!("{sign}{}.{:03}", rng.below(100), rng.below(1000)),
    }
}

fn token(rng: &mut Rng) -> String {
    if rng.chance(70) {
        number(rng)
    } else {
        rng.pick(WORDS).to_string()
    }
}

/// The same value written differently, or a nearby value.
fn variant(rng: &mut Rng, tok: &str) -> String {
    let parsed: Option<f64> = tok.parse().ok();
    match (rng.below(10), parsed) {
        (0, _) => tok.to_uppercase(),
        (1, _) => tok.to_lowercase(),
        (2, Some(x)) => format!("{x:e}"),
        (3, Some(x)) => format!("{:.*}", rng.below(12), x),
        (4, Some(x)) => {
            let eps = *rng.pick(&[1e-12, 1e-9, 1e-7, 1e-6, 1e-4, 1e-3, 0.01, 0.5, 1.0, 2.0]);
            let x = if rng.chance(50) {
                x + eps
            } else {
                x * (1.0 + eps)
            };
            format!("{x}")
        }
        (5, Some(x)) => format!("+{x}"),
        (6, _) => format!("{tok}0"),
        (7, _) if tok.chars().count() > 1 => {
            let mut cut = tok.chars();
            cut.next_back();
            cut.as_str().to_string()
        }
        (8, _) => token(rng),
        _ => format!(
            "{tok}{}",
            rng.pick(&["e", "e+", "E-", ".", "x", "\0", "\0junk"])
        ),
    }
}

/// A whitespace run, mostly ordinary.
fn space(rng: &mut Rng, newline: bool) -> String {
    if rng.chance(80) {
        return if newline { "\n" } else { " " }.to_string();
    }
    let pieces = [
        " ", "  ", "\t", "\n", "\r\n", "\n\n", "\x0b", "\x0c", " \n", "\r",
    ];
    let mut s = String::new();
    for _ in 0..=rng.below(3) {
        let piece: &&str = rng.pick(&pieces);
        s.push_str(piece);
    }
    s
}

fn join(rng: &mut Rng, tokens: &[String], lines: bool) -> Vec<u8> {
    let mut s = String::new();
    if rng.chance(5) {
        s.push_str(&space(rng, false));
    }
    for (i, t) in tokens.iter().enumerate() {
        if i > 0 {
            let newline = lines && rng.chance(30);
            s.push_str(&space(rng, newline));
        }
        s.push_str(t);
    }
    match rng.below(10) {
        0 => {}
        1 => s.push_str("\n\n"),
        2 => s.push_str(" \n"),
        _ => s.push('\n'),
    }
    s.into_bytes()
}

const TOLERANCES: &[&str] = &[
    "0", "1e-9", "1e-6", "0.000001", "1e-4", "1e-3", "0.01", "0.5", "1", "0x1p-10", "1e300",
];

/// Every combination of the flags, cycled through by `index`; tolerances drawn.
fn flags_for(rng: &mut Rng, index: usize) -> Vec<String> {
    let mut args = Vec::new();
    if index & 1 != 0 {
        args.push("case_sensitive".to_string());
    }
    if index & 2 != 0 {
        args.push("space_change_sensitive".to_string());
    }
    let mut tol = |args: &mut Vec<String>, key: &str| {
        args.push(key.to_string());
        args.push(rng.pick(TOLERANCES).to_string());
    };
    match (index >> 2) % 6 {
        0 => {}
        1 => tol(&mut args, "float_tolerance"),
        2 => tol(&mut args, "float_absolute_tolerance"),
        3 => tol(&mut args, "float_relative_tolerance"),
        4 => {
            tol(&mut args, "float_absolute_tolerance");
            tol(&mut args, "float_relative_tolerance");
        }
        _ => {
            tol(&mut args, "float_tolerance");
            tol(&mut args, "float_absolute_tolerance");
        }
    }
    args
}

fn generate(rng: &mut Rng, index: usize) -> Case {
    let most = if rng.chance(20) { 12 } else { 4 };
    let n = 1 + rng.below(most);
    let judge: Vec<String> = (0..n).map(|_| token(rng)).collect();
    let mut user = judge.clone();
    // Mutations of the submission's tokens; about a third of cases get none.
    if !rng.chance(33) {
        for _ in 0..=rng.below(2) {
            let i = rng.below(user.len());
            match rng.below(6) {
                0..=2 => user[i] = variant(rng, &user[i].clone()),
                3 => user.push(token(rng)),
                4 => {
                    user.remove(i);
                    if user.is_empty() {
                        break;
                    }
                }
                _ => {
                    let j = rng.below(user.len());
                    user.swap(i, j);
                }
            }
        }
    }
    let lines = rng.chance(50);
    let answer = join(rng, &judge, lines);
    let output = if rng.chance(25) {
        // Whitespace alone changed, or nothing at all.
        if rng.chance(50) {
            answer.clone()
        } else {
            join(rng, &user, !lines)
        }
    } else {
        join(rng, &user, lines)
    };
    let output = if rng.chance(2) { Vec::new() } else { output };
    Case {
        answer,
        output,
        args: flags_for(rng, index),
    }
}

/// problemtools' verdict: true for Accepted (exit 42), false for Wrong Answer (43).
fn theirs(validator: &Path, dir: &Path, case: &Case) -> bool {
    std::fs::write(dir.join("in"), b"").unwrap();
    std::fs::write(dir.join("ans"), &case.answer).unwrap();
    let feedback = dir.join("feedback");
    std::fs::create_dir_all(&feedback).unwrap();
    let mut child = Command::new(validator)
        .arg(dir.join("in"))
        .arg(dir.join("ans"))
        .arg(&feedback)
        .args(&case.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // The validator may stop reading early (a wrong token): a broken pipe is fine.
    let _ = stdin.write_all(&case.output);
    drop(stdin);
    let status = child.wait().unwrap();
    match status.code() {
        Some(42) => true,
        Some(43) => false,
        other => panic!("problemtools' default_validator exited {other:?} on {case:?}"),
    }
}

fn ours(case: &Case) -> bool {
    let flags = DefaultValidatorFlags::default()
        .with_args(&case.args)
        .unwrap_or_else(|e| panic!("our flags refused {:?}: {e}", case.args));
    validate(&case.answer[..], &case.output[..], &flags)
        .unwrap()
        .accepted
}

/// The known disagreements, each with the reason we differ ([`known_reason`]
/// decides which one a disagreeing case shows).
const KNOWN: &[(&str, &str)] = &[
    (
        "NUL byte",
        "problemtools' C++ validator ends a token at a NUL byte (it compares C strings); \
         we and BAPCtools compare the whole whitespace-delimited token",
    ),
    (
        "incomplete exponent",
        "problemtools' C++ validator reads a number whose exponent has no digits \
         (`1e`, `2e-`, `1.E+`, `0x1p`) as a float (glibc's scanf consumes the marker and \
         succeeds); we, like strtod and BAPCtools, read such a token as not a float, so \
         it must match as a string",
    ),
];

/// Which [`KNOWN`] reason explains a disagreement, if any: a NUL byte in either
/// file, or a token that is a decimal or hexadecimal number followed by an
/// exponent marker with no exponent digits.
fn known_reason(case: &Case) -> Option<usize> {
    let both = [&case.answer, &case.output];
    if both.iter().any(|b| b.contains(&0)) {
        return Some(0);
    }
    let incomplete_exponent = |tok: &[u8]| {
        let t = std::str::from_utf8(tok).unwrap_or("");
        let t = t.trim_start_matches(['+', '-']);
        let (digits, t, marker): (fn(u8) -> bool, &str, &[char]) =
            match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                Some(hex) => (|b: u8| b.is_ascii_hexdigit(), hex, &['p', 'P']),
                None => (|b: u8| b.is_ascii_digit(), t, &['e', 'E']),
            };
        let Some(at) = t.find(marker) else {
            return false;
        };
        let (mant, exp) = t.split_at(at);
        let exp = exp[1..].trim_start_matches(['+', '-']);
        exp.is_empty() && mant.bytes().any(digits) && mant.bytes().all(|b| digits(b) || b == b'.')
    };
    let has = |b: &[u8]| {
        b.split(|&c| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
            .any(incomplete_exponent)
    };
    if both.iter().any(|b| has(b)) {
        return Some(1);
    }
    None
}

#[test]
fn default_validator_agrees_with_problemtools() {
    let Some(pt) = problemtools() else {
        skipped("default_validator_agrees_with_problemtools");
        return;
    };
    let validator = pt.join("bin/default_validator");
    let count = usize::try_from(env_num("JUDGE_ORACLE_CASES", 6000)).unwrap_or(6000);
    let seed = env_num("JUDGE_ORACLE_SEED", 0x1d0_2026);
    let mut rng = Rng(seed);
    let cases: Vec<Case> = (0..count).map(|i| generate(&mut rng, i)).collect();

    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(1, 4));
    let tmp = std::env::temp_dir().join(format!("judge-oracle-{}", std::process::id()));
    let verdicts: Vec<(usize, bool)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let dir = tmp.join(t.to_string());
                let (cases, validator) = (&cases, &validator);
                s.spawn(move || {
                    std::fs::create_dir_all(&dir).unwrap();
                    (t..cases.len())
                        .step_by(threads)
                        .map(|i| (i, theirs(validator, &dir, &cases[i])))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    std::fs::remove_dir_all(&tmp).ok();

    let mut accepted = 0;
    let mut explained = vec![0usize; KNOWN.len()];
    let mut unexplained = Vec::new();
    for &(i, their) in &verdicts {
        let case = &cases[i];
        let our = ours(case);
        accepted += usize::from(our);
        if our != their {
            match known_reason(case) {
                Some(k) => explained[k] += 1,
                None => unexplained.push((i, our, their)),
            }
        }
    }
    eprintln!(
        "{} cases (seed {seed:#x}): we accept {accepted}, reject {}; disagreements explained: {}; unexplained: {}",
        cases.len(),
        cases.len() - accepted,
        KNOWN
            .iter()
            .zip(&explained)
            .map(|((k, _), n)| format!("{k:?}: {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        unexplained.len()
    );
    for &(i, our, their) in unexplained.iter().take(20) {
        let c = &cases[i];
        eprintln!(
            "case {i}: ours {} problemtools {}\n  args {:?}\n  answer {:?}\n  output {:?}",
            if our { "AC" } else { "WA" },
            if their { "AC" } else { "WA" },
            c.args,
            String::from_utf8_lossy(&c.answer),
            String::from_utf8_lossy(&c.output)
        );
    }
    assert_eq!(verdicts.len(), cases.len());
    // The generator must exercise both verdicts in earnest.
    assert!(
        accepted > cases.len() / 5 && accepted < cases.len() * 4 / 5,
        "the generator is lopsided: {accepted} of {} accepted",
        cases.len()
    );
    assert!(
        unexplained.is_empty(),
        "{} disagreements with problemtools that no KNOWN reason explains (first ones above)",
        unexplained.len()
    );
}

/// The short verdict of one of ours, as both reference tools write them
/// (`verifyproblem` and `bt` have no memory or output limit verdicts: see
/// [`EQUIVALENT`]).
fn short(verdict: &str) -> &'static str {
    match verdict {
        "Accepted" => "AC",
        "Wrong Answer" => "WA",
        "Time Limit Exceeded" => "TLE",
        "Run-Time Error" => "RTE",
        "Memory Limit Exceeded" => "MLE",
        "Output Limit Exceeded" => "OLE",
        "Compilation Error" => "CE",
        _ => "?",
    }
}

/// A reference tool the example problems are compared with.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Tool {
    Problemtools,
    Bapctools,
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::Problemtools => "problemtools",
            Tool::Bapctools => "BAPCtools",
        }
    }
}

/// Our verdict and a tool's that are the same outcome told apart
/// differently, with the reason (docs/judge.md, "Reference tools").
const EQUIVALENT: &[(Tool, &str, &str, &str)] = &[
    (
        Tool::Problemtools,
        "MLE",
        "RTE",
        "problemtools has no Memory Limit Exceeded: a program killed at its memory limit is RTE there",
    ),
    (
        Tool::Bapctools,
        "MLE",
        "RTE",
        "BAPCtools has no Memory Limit Exceeded: a program killed at its memory limit is RTE there",
    ),
    (
        Tool::Bapctools,
        "OLE",
        "WA",
        "BAPCtools enforces no output limit while judging: an output flood is judged by its content, Wrong Answer",
    ),
];

/// Disagreements that are known and written down (docs/judge.md, "Reference
/// tools"): the tool, the package, the submission, our verdict, theirs, and
/// which one follows the spec.
const KNOWN_VERDICTS: &[(Tool, &str, &str, &str, &str, &str)] = &[
    (
        Tool::Problemtools,
        "include_2023",
        "accepted/own_grader",
        "AC",
        "WA",
        OWN_FILE_WINS,
    ),
    (
        Tool::Problemtools,
        "addition",
        "accepted/Add.java",
        "AC",
        "CE",
        JAVA_21,
    ),
    (
        Tool::Problemtools,
        "addition",
        "accepted/add.go",
        "AC",
        "CE",
        GCCGO,
    ),
    (
        Tool::Problemtools,
        "guess",
        "accepted/bisect.go",
        "AC",
        "CE",
        GCCGO,
    ),
    (
        Tool::Problemtools,
        "addition",
        "accepted/add.js",
        "AC",
        "RTE",
        NODE_ADDRESS_SPACE,
    ),
    (
        Tool::Bapctools,
        "hexfloat",
        "accepted/exact.py",
        "AC",
        "WA",
        HEX_ANSWERS,
    ),
    (
        Tool::Bapctools,
        "include_2023",
        "accepted/add.c",
        "AC",
        "CE",
        NO_INCLUDES,
    ),
    (
        Tool::Bapctools,
        "include_2023",
        "accepted/add.cpp",
        "AC",
        "CE",
        NO_INCLUDES,
    ),
    (
        Tool::Bapctools,
        "include_2023",
        "wrong_answer/add_int.cpp",
        "WA",
        "CE",
        NO_INCLUDES,
    ),
];

const OWN_FILE_WINS: &str = "a submission bringing its own file of an include file's name \
     (`grader.cpp`): the 2025-09 spec and problemtools overwrite it with the package's; the \
     contract (§2) says never to, and we follow the contract";

const JAVA_21: &str = "problemtools 1.20260907 compiles Java with `javac -source 21`, which \
     the JDK 17 of Debian 12 (the one we ship and test with) refuses: every Java submission is \
     a Compilation Error there; ours compiles with javac 17's own default";

const GCCGO: &str = "problemtools compiles Go with `gccgo`, which is not installed here: our \
     table uses Debian's `golang-go` (`go build`, as DOMjudge does)";

const NODE_ADDRESS_SPACE: &str = "problemtools bounds a run's address space (RLIMIT_AS) by the \
     memory limit; Node.js reserves more virtual memory than addition's 128 MiB when it \
     starts and dies there (at guess's 256 MiB it starts). We bound resident memory with the \
     cgroup, as DOMjudge does, and V8's heap with --max-old-space-size";

const HEX_ANSWERS: &str = "a legacy package whose answers are C99 hexadecimal floats: the legacy \
     format accepts any float formatting and problemtools reads them, as we do; `bt upgrade` \
     makes it 2025-09, whose float grammar is decimal only, so BAPCtools compares the hex \
     token as a string (right for 2025-09, not for the package's own format)";

const NO_INCLUDES: &str = "BAPCtools does not copy 2023-07 `include/` files into a submission \
     (the spec says they must be, and problemtools does): the submission lacks `task.h`, a \
     Compilation Error there; we follow the spec";

/// Packages a tool judges nothing of, and why (docs/judge.md, "Reference
/// tools"): each is listed, and must still be refused, so the list stays true.
const REFUSED: &[(Tool, &str, &str)] = &[
    (Tool::Bapctools, "groups", NO_SCORING),
    (Tool::Bapctools, "legacy_scoring", NO_SCORING),
    (
        Tool::Bapctools,
        "guess_2023",
        "BAPCtools takes `output_validator/` itself as the program and refuses the \
         validator in a subdirectory of it (`output_validator/guess_validator/`), as the spec \
         has it; we judge that layout as problemtools' own 2023-07 examples have it (contract §2)",
    ),
];

const NO_SCORING: &str = "BAPCtools 2026.10.0 judges `pass-fail`, `interactive` and \
     `multi-pass` problems only (`type: scoring` is 'unrecognized'); problemtools compares \
     them";

/// `verifyproblem -p submissions` lines → submission → verdict:
/// `   accepted/a.c (C) OK: AC [...]`, `... OK with extra time: TLE [...]`,
/// `ERROR ... wrong_answer/b.py (Python 3) got AC [...]`, `Compile error for x/c.cpp (C++)`.
fn parse_verifyproblem(text: &str) -> Vec<(String, String, Option<f64>)> {
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.split("Compile error for ").nth(1) {
            if let Some(name) = rest.split(" (").next() {
                out.push((name.trim().to_string(), "CE".to_string(), None));
            }
            continue;
        }
        let Some(open) = line.find(" (") else {
            continue;
        };
        let Some(close) = line[open..].find(") ").map(|c| open + c) else {
            continue;
        };
        let name = line[..open].rsplit(' ').next().unwrap_or("").to_string();
        let tail = &line[close + 2..];
        let verdict = ["OK: ", "OK with extra time: ", "got "]
            .iter()
            .find_map(|p| tail.strip_prefix(p));
        if let (true, Some(v)) = (name.contains('/'), verdict) {
            let mut words = v.split(' ');
            let verdict = words.next().unwrap_or("").to_string();
            // A scoring problem's result: `AC (41) [...]`.
            let score = words
                .next()
                .and_then(|w| w.strip_prefix('(')?.strip_suffix(')')?.parse().ok());
            out.push((name, verdict, score));
        }
    }
    out
}

/// Removes terminal colour sequences (`ESC [ ... m`), which `bt` writes.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `bt run --no-bar` lines → submission → verdict:
/// `accepted/add.c:      AC 0.004s @ secret/02`, and
/// `Build submissions: compile_error/syntax.c   Failed` for a compile error.
fn parse_bt_run(text: &str) -> Vec<(String, String)> {
    const VERDICTS: &[&str] = &["AC", "WA", "TLE", "RTE", "VC", "CE"];
    let mut out = Vec::new();
    for line in strip_ansi(text).lines() {
        if let Some(rest) = line.strip_prefix("Build submissions: ") {
            let mut words = rest.split_whitespace();
            if let (Some(name), Some("Failed")) = (words.next(), words.last()) {
                out.push((name.trim_end_matches('/').to_string(), "CE".to_string()));
            }
            continue;
        }
        let Some((name, tail)) = line.split_once(": ") else {
            continue;
        };
        let name = name.trim().trim_end_matches('/');
        let verdict = tail.split_whitespace().next().unwrap_or("");
        if name.contains('/') && !name.contains(' ') && VERDICTS.contains(&verdict) {
            // A submission's result line can come twice (a line explaining an
            // unexpected verdict, then the result): one entry, the last.
            out.retain(|(n, _)| n != name);
            out.push((name.to_string(), verdict.to_string()));
        }
    }
    out
}

/// The package's time limit as `.timelimit` or `limits.time_limit` says (every
/// tool is given it: problemtools does not read `.timelimit`).
fn time_limit(pkg: &Path) -> Option<String> {
    if let Ok(t) = std::fs::read_to_string(pkg.join(".timelimit")) {
        return Some(t.trim().to_string());
    }
    let yaml = std::fs::read_to_string(pkg.join("problem.yaml")).ok()?;
    yaml.lines()
        .find_map(|l| l.trim().strip_prefix("time_limit:"))
        .map(|t| t.trim().to_string())
}

/// Every problem of the project that has example submissions: the bundled
/// examples and the test fixtures, as `(label, directory)`.
fn packages() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for (label, dir) in [
        ("examples", root.join("examples/problems")),
        ("fixtures", root.join("tests/fixtures/problems")),
    ] {
        let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("problem.yaml").exists() && p.join("submissions").is_dir())
            .collect();
        found.sort();
        out.extend(found.into_iter().map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            (format!("{label}/{name}"), p)
        }));
    }
    out
}

/// One tool's oracle run at a time in this binary (and `verify` before
/// them): side by side they would steal each other's CPU and make time-limit
/// verdicts flaky on a small machine.
static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `judge-runner verify --report` on every package, run once for both tools:
/// package label → its report rows.
fn verify_reports() -> &'static [(String, serde_json::Value)] {
    static OURS: std::sync::OnceLock<Vec<(String, serde_json::Value)>> = std::sync::OnceLock::new();
    OURS.get_or_init(|| {
        let tmp = std::env::temp_dir().join(format!("judge-oracle-ours-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let mut out = Vec::new();
        for (label, pkg) in packages() {
            let report = tmp.join("report.json");
            let parent = format!("judge-runner-test-{}-oracle", std::process::id());
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_judge-runner"));
            cmd.arg("verify")
                .arg(&pkg)
                .args([
                    "--cgroup-parent",
                    &parent,
                    "--first-box",
                    "7000",
                    "--slots",
                    "1",
                ])
                .arg("--report")
                .arg(&report);
            if let Some(tl) = time_limit(&pkg) {
                cmd.args(["--time-limit", &tl]);
            }
            let output = cmd.output().unwrap();
            let _ = judge_runner::sandbox::remove_parent(&parent);
            let rows: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&report).unwrap_or_else(|e| {
                    panic!(
                        "no report from judge-runner verify on {label} ({e}): {}",
                        String::from_utf8_lossy(&output.stderr)
                    )
                }))
                .unwrap();
            std::fs::remove_file(&report).ok();
            out.push((label, rows));
        }
        std::fs::remove_dir_all(&tmp).ok();
        out
    })
}

/// What one tool said about one package: submission, verdict, score if any.
type Theirs = Vec<(String, String, Option<f64>)>;

fn run_problemtools(pt: &Path, pkg: &Path, tmp: &Path) -> (Theirs, String) {
    // On the package itself: it writes nothing there.
    let mut cmd = Command::new(pt.join("bin/verifyproblem"));
    cmd.env("XDG_CONFIG_HOME", pt.join("config"))
        .current_dir(tmp)
        .args(["-p", "submissions"]);
    if let Some(tl) = time_limit(pkg) {
        cmd.args(["-t", &tl]);
    }
    let output = cmd.arg(pkg).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    (parse_verifyproblem(&text), text)
}

/// BAPCtools's own language table runs `.py` files with PyPy (`pypy3`) whenever
/// it is installed (its `python3` entry; CPython is `cpython3`, one priority
/// lower), as Kattis does — and PyPy does not even start under BAPCtools's
/// address-space limit (RLIMIT_AS = the memory limit), so every `.py` was a
/// Run-Time Error there. judge-runner's `python3` is CPython (the contract;
/// PyPy is `pypy3`), so the comparison points BAPCtools's `python3` at CPython
/// through its per-user configuration (`$XDG_CONFIG_HOME/bapctools/languages.yaml`,
/// merged over its own): both tools run the same interpreter, on hosts with
/// PyPy and without. Answers the `XDG_CONFIG_HOME` to give it.
fn bapctools_config(tmp: &Path) -> PathBuf {
    let config = tmp.join("bapctools-config");
    std::fs::create_dir_all(config.join("bapctools")).unwrap();
    std::fs::write(
        config.join("bapctools/languages.yaml"),
        "python3:\n    name: 'Python 3 (CPython, as judge-runner runs python3)'\n    \
         compile: 'python3 -m py_compile {files}'\n    run: 'python3 \"{mainfile}\"'\n",
    )
    .unwrap();
    config
}

fn run_bapctools(bt: &Path, pkg: &Path, tmp: &Path) -> (Theirs, String) {
    // BAPCtools reads only the 2025-09 format and writes into the problem
    // (`bt upgrade`, a uuid, its build files): a copy, upgraded first.
    let name = pkg.file_name().unwrap();
    let copy = tmp.join(name);
    let _ = std::fs::remove_dir_all(&copy);
    let status = Command::new("cp")
        .arg("-a")
        .arg(pkg)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success(), "copying {}", pkg.display());
    let config = bapctools_config(tmp);
    let upgrade = Command::new(bt.join("bin/bt"))
        .arg("upgrade")
        .current_dir(&copy)
        .env("TMPDIR", tmp)
        .env("XDG_CONFIG_HOME", &config)
        .output()
        .unwrap();
    let mut cmd = Command::new(bt.join("bin/bt"));
    // Its build directory (`bapctools_*`) goes into the test's, removed after.
    cmd.args(["run", "--no-bar"])
        .current_dir(&copy)
        .env("TMPDIR", tmp)
        .env("XDG_CONFIG_HOME", &config);
    if let Some(tl) = time_limit(pkg) {
        cmd.args(["--time-limit", &tl]);
    }
    let output = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&upgrade.stderr).to_string()
        + &String::from_utf8_lossy(&output.stdout)
        + &String::from_utf8_lossy(&output.stderr);
    let _ = std::fs::remove_dir_all(&copy);
    let verdicts = parse_bt_run(&text)
        .into_iter()
        .map(|(sub, verdict)| (sub, verdict, None))
        .collect();
    (verdicts, text)
}

/// Judges every package with `tool` and compares with `verify`: every
/// submission the tool judges gets the same verdict (and, from problemtools,
/// the same score), or the difference is in [`EQUIVALENT`] or
/// [`KNOWN_VERDICTS`].
fn compare_with(tool: Tool, dir: &Path) {
    let _heavy = HEAVY.lock().unwrap_or_else(|p| p.into_inner());
    let ours = verify_reports();
    let tmp = std::env::temp_dir().join(format!(
        "judge-oracle-{}-{}",
        tool.name(),
        std::process::id()
    ));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut table = Vec::new();
    let mut differences = Vec::new();
    let mut compared = 0;
    for (label, pkg) in packages() {
        let (theirs, text) = match tool {
            Tool::Problemtools => run_problemtools(dir, &pkg, &tmp),
            Tool::Bapctools => run_bapctools(dir, &pkg, &tmp),
        };
        let name = label.rsplit('/').next().unwrap_or(&label);
        if let Some((_, _, why)) = REFUSED.iter().find(|(t, p, _)| *t == tool && *p == name) {
            assert!(
                theirs.is_empty(),
                "{} judges {label} now: take it off REFUSED\n{text}",
                tool.name()
            );
            table.push(format!("{label}: not judged by {} ({why})", tool.name()));
            continue;
        }
        assert!(
            !theirs.is_empty(),
            "no verdicts read from {} on {label}:\n{text}",
            tool.name()
        );
        let rows = &ours.iter().find(|(l, _)| *l == label).unwrap().1;
        // 2023-07 samples score 0 here (contract §2); problemtools 1.20260907
        // adds their points (1 each) and then reports the total out of range.
        let format_2023 = std::fs::read_to_string(pkg.join("problem.yaml"))
            .unwrap()
            .contains("problem_format_version: 2023-07");
        let samples = std::fs::read_dir(pkg.join("data/sample")).map_or(0, |d| {
            d.filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "in"))
            })
            .count()
        }) as f64;
        for (sub, their, their_score) in &theirs {
            compared += 1;
            let row = rows
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["submission"] == sub.as_str());
            let our = row
                .and_then(|r| r["verdict"].as_str())
                .map_or("-", short)
                .to_string();
            let why = EQUIVALENT
                .iter()
                .find(|(t, o, th, _)| *t == tool && *o == our && th == their)
                .map(|e| e.3)
                .or_else(|| {
                    KNOWN_VERDICTS
                        .iter()
                        .find(|(t, p, s, o, th, _)| {
                            *t == tool && *p == name && s == sub && *o == our && th == their
                        })
                        .map(|k| k.5)
                });
            table.push(format!(
                "{label}/{sub}: ours {our} {} {their}{}",
                tool.name(),
                why.map_or(String::new(), |why| format!(" ({why})"))
            ));
            if our != *their && why.is_none() {
                differences.push(format!(
                    "{label}/{sub}: ours {our}, {} {their}",
                    tool.name()
                ));
            }
            let our_score = row.and_then(|r| r["score"].as_f64());
            if let (Some(t), Some(o)) = (their_score, our_score) {
                let sample_points = format_2023 && (t - o - samples).abs() < 1e-9;
                table.push(format!(
                    "  score: ours {o} {} {t}{}",
                    tool.name(),
                    if sample_points {
                        " (2023-07 samples score 0 here, problemtools adds them)"
                    } else {
                        ""
                    }
                ));
                if (t - o).abs() > 1e-9 && !sample_points {
                    differences.push(format!(
                        "{label}/{sub}: score ours {o}, {} {t}",
                        tool.name()
                    ));
                }
            }
        }
    }
    std::fs::remove_dir_all(&tmp).ok();
    eprintln!(
        "{} submissions compared with {}:\n{}",
        compared,
        tool.name(),
        table.join("\n")
    );
    assert!(
        differences.is_empty(),
        "verdicts that differ from {}'s:\n{}",
        tool.name(),
        differences.join("\n")
    );
}

#[test]
fn verifyproblem_and_verify_agree_on_the_example_problems() {
    let Some(pt) = problemtools() else {
        skipped("verifyproblem_and_verify_agree_on_the_example_problems");
        return;
    };
    assert!(packages().len() >= 10, "{:?}", packages());
    compare_with(Tool::Problemtools, &pt);
}

/// The venv of `tests/bapctools/venv.sh` (`JUDGE_BAPCTOOLS`), or `None` (the
/// test is skipped).
fn bapctools() -> Option<PathBuf> {
    let dir = std::env::var_os("JUDGE_BAPCTOOLS").filter(|d| !d.is_empty())?;
    let dir = PathBuf::from(dir);
    assert!(
        dir.join("bin/bt").exists(),
        "JUDGE_BAPCTOOLS={} holds no bin/bt (run tests/bapctools/venv.sh)",
        dir.display()
    );
    Some(dir)
}

#[test]
fn bapctools_and_verify_agree_on_the_example_problems() {
    let Some(bt) = bapctools() else {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED bapctools_and_verify_agree_on_the_example_problems: JUDGE_BAPCTOOLS is not set \
             (run `export JUDGE_BAPCTOOLS=$(tests/bapctools/venv.sh)`; .ci/run does)"
        );
        return;
    };
    compare_with(Tool::Bapctools, &bt);
}

#[test]
fn reference_tool_outputs_are_read() {
    let pt = "   accepted/add.c (C) OK: AC [CPU: 0.01s @ test case secret/1]\n\
              ERROR in submissions: wrong_answer/x.py (Python 3 (python3)) got AC [...]\n\
              Compile error for compile_error/syntax.cpp (C++)\n\
              partially_accepted/half.py (Python 3) OK: AC (41) [...]\n";
    assert_eq!(
        parse_verifyproblem(pt),
        [
            ("accepted/add.c".to_string(), "AC".to_string(), None),
            ("wrong_answer/x.py".to_string(), "AC".to_string(), None),
            (
                "compile_error/syntax.cpp".to_string(),
                "CE".to_string(),
                None
            ),
            (
                "partially_accepted/half.py".to_string(),
                "AC".to_string(),
                Some(41.0)
            ),
        ]
    );
    let bt = "Build submissions: compile_error/syntax.c          Failed\n\
              accepted/add.c:                   \u{1b}[32mAC\u{1b}[0m 0.004s @ secret/02-big \n\
              accepted/bisect.cpp: secret/05     Validator exited first with AC\n\
              time_limit_exceeded/spin.py:     TLE 2.055s @ sample/1\n\
              accepted/exact.py:   WA 0.049s @ sample/1  permitted: [AC]\n\
              accepted/own_grader/:             AC 0.01s @ sample/1\n\
              accepted/exact.py:   WA 0.049s @ sample/1\n";
    assert_eq!(
        parse_bt_run(bt),
        [
            ("compile_error/syntax.c".to_string(), "CE".to_string()),
            ("accepted/add.c".to_string(), "AC".to_string()),
            ("time_limit_exceeded/spin.py".to_string(), "TLE".to_string()),
            ("accepted/own_grader".to_string(), "AC".to_string()),
            ("accepted/exact.py".to_string(), "WA".to_string()),
        ]
    );
}

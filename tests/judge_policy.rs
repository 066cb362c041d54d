//! The judging policy of contract §1 and §3 (2026-12), on packages written
//! here: the submission's stderr is never a verdict, thread stacks are the C
//! library's default while a deep recursion gets the memory limit, compiling
//! has limits of its own (a flooding compiler is a Compilation Error within
//! them, a large static array compiles), the wall limit of a test is
//! `2*time_limit+1`, and interactive runs end in the submission's verdict
//! whoever stops talking, floods or deadlocks, and in `validator.failed` only
//! when the validator fails on its own.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod judge_common;

use std::path::{Path, PathBuf};

use judge_runner::judge::{
    Judge, JudgeError, LanguageTable, Options, Outcome, Submission, Verdict, reason,
};
use judge_runner::package;

fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

/// A pass-fail problem with one secret test: input `input`, answer `answer`.
fn problem(yaml: &str, input: &str, answer: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "problem.yaml", yaml);
    write(dir.path(), "data/secret/1.in", input);
    write(dir.path(), "data/secret/1.ans", answer);
    dir
}

fn judge_with(judge: &Judge, dir: &Path, submission: &Submission) -> Result<Outcome, JudgeError> {
    let problem = package::parse(dir).unwrap();
    judge.judge(&problem, submission, &Options::default(), &mut |_| {})
}

fn judge(dir: &Path, submission: &Submission) -> Result<Outcome, JudgeError> {
    judge_with(&judge_common::judge(), dir, submission)
}

// ---------------------------------------------------------------- stderr

#[test]
fn stderr_is_kept_to_64_kib_and_never_a_verdict() {
    let _serial = judge_common::serial();
    let dir = problem(
        "name: stderr\nlimits: {time_limit: 1, output: 1}\n",
        "5\n",
        "5\n",
    );
    // 3 MiB of stderr (more than the 1 MiB output limit), then the answer.
    let noisy = judge_common::source(
        "python3",
        "noisy.py",
        "import sys\nfor i in range(48):\n    sys.stderr.write(chr(65 + i % 26) * 65536)\nprint(input())\n",
    );
    let out = judge(dir.path(), &noisy).unwrap();
    assert_eq!(out.verdict, Verdict::Accepted, "{:?}", out.details);
    let d = &out.details[0];
    assert_eq!(d.stderr.len(), 65536, "the first 64 KiB are kept");
    assert!(
        d.stderr.bytes().all(|b| b == b'A'),
        "and they are the first"
    );
    assert_eq!(d.stderr_bytes, 48 * 65536, "the rest was read");
    let json = serde_json::to_value(d).unwrap();
    assert_eq!(json["stderr"].as_str().unwrap().len(), 65536);

    // Its twin on stdout is the output limit.
    let loud = judge_common::source(
        "python3",
        "loud.py",
        "import sys\nsys.stdout.write('A' * (3 << 20))\n",
    );
    let out = judge(dir.path(), &loud).unwrap();
    assert_eq!(out.verdict, Verdict::OutputLimitExceeded);
}

#[test]
fn writing_stderr_forever_runs_into_the_time_limit() {
    let _serial = judge_common::serial();
    let dir = problem(
        "name: stderr flood\nlimits: {time_limit: 0.5}\n",
        "5\n",
        "5\n",
    );
    let flood = judge_common::source(
        "python3",
        "flood.py",
        "import sys\nwhile True:\n    sys.stderr.write('x' * 65536)\n",
    );
    let out = judge(dir.path(), &flood).unwrap();
    assert_eq!(out.verdict, Verdict::TimeLimitExceeded, "{:?}", out.details);
    let d = &out.details[0];
    assert!(d.status == "time_limit" || d.status == "wall_time_limit");
    assert_eq!(d.stderr.len(), 65536);
    assert!(d.stderr_bytes > 65536);
}

// ---------------------------------------------------------------- stack

const STACK_PROBE: &str = r#"#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>

/* Not a tail call: each frame keeps its pad until the callee returns. */
static long deep(long n) {
    volatile char pad[200];
    pad[0] = (char)n;
    if (n == 0) return 0;
    return deep(n - 1) + (pad[0] & 1);
}

static void *thread_main(void *arg) { return arg; }

int main(void) {
    pthread_attr_t attr;
    size_t size = 0;
    if (pthread_getattr_default_np(&attr) != 0) return 2;
    if (pthread_attr_getstacksize(&attr, &size) != 0) return 3;
    pthread_t t; /* a thread with the default stack starts */
    if (pthread_create(&t, NULL, thread_main, NULL) != 0) return 4;
    pthread_join(t, NULL);
    /* about 250 MB of stack: far past any usual stack rlimit */
    long odd = deep(1000000);
    printf("%zu %ld\n", size, odd);
    return 0;
}
"#;

#[test]
fn threads_get_the_default_stack_and_recursion_the_memory_limit() {
    let _serial = judge_common::serial();
    // 2 MiB: glibc's default thread stack when the stack rlimit is unlimited
    // (with the old rlimit = memory limit it was 1 GiB).
    let dir = problem(
        "name: stack\nlimits: {time_limit: 5, memory: 1024}\n",
        "",
        "2097152 500000\n",
    );
    let probe = judge_common::source("c", "stack.c", STACK_PROBE);
    let out = judge(dir.path(), &probe).unwrap();
    assert_eq!(
        out.verdict,
        Verdict::Accepted,
        "{:?} {}",
        out.details,
        out.compile_log
    );
    assert!(out.details[0].memory_bytes > 200 << 20, "the recursion ran");
}

// ---------------------------------------------------------------- compiling

/// The built-in table with C++'s compile CPU limit replaced (a short limit
/// keeps the flood test short; the built-in one is 30 s). The wall limit stays
/// far above it: on a loaded host a few seconds of wall time may pass before
/// the compiler has written a byte, and the test is about the CPU limit
/// stopping a compiler that has flooded its log.
fn judge_with_cpp_compile_limit(seconds: u32) -> Judge {
    let table = judge_runner::judge::language::BUILTIN_LANGUAGES.replace(
        "compile_limits: {time: 30, wall: 30, memory: 2048, processes: 32}\n  run_processes: 16\n\npython3",
        &format!(
            "compile_limits: {{time: {seconds}, wall: 600, memory: 2048, processes: 32}}\n  run_processes: 16\n\npython3"
        ),
    );
    assert_ne!(table, judge_runner::judge::language::BUILTIN_LANGUAGES);
    let mut config = judge_common::judge().config().clone();
    config.languages = LanguageTable::from_yaml(&table).unwrap();
    Judge::new(config)
}

/// The built-in table with C++'s compile limited to one process: g++ cannot
/// start `cc1plus`, so every C++ compile under it fails.
fn judge_with_one_process_cpp_compiles() -> Judge {
    let table = judge_runner::judge::language::BUILTIN_LANGUAGES.replace(
        "compile_limits: {time: 30, wall: 30, memory: 2048, processes: 32}\n  run_processes: 16\n\npython3",
        "compile_limits: {time: 30, wall: 30, memory: 2048, processes: 1}\n  run_processes: 16\n\npython3",
    );
    assert_ne!(table, judge_runner::judge::language::BUILTIN_LANGUAGES);
    let mut config = judge_common::judge().config().clone();
    config.languages = LanguageTable::from_yaml(&table).unwrap();
    Judge::new(config)
}

/// An output validator is compiled with its language's compile limits from the
/// table, like a submission (it once had fixed limits of its own): with C++
/// compiles limited to one process, a C++ validator does not compile, and the
/// package is invalid (not a verdict).
#[test]
fn a_validator_is_compiled_with_the_language_tables_limits() {
    let _serial = judge_common::serial();
    let dir = problem("name: checked\nvalidation: custom\n", "1\n", "1\n");
    write(
        dir.path(),
        "output_validators/check/check.cpp",
        "int main() { return 42; }\n",
    );
    let ok = judge_common::source("python3", "ok.py", "print(1)\n");
    // The same package under the built-in table: the validator compiles.
    let out = judge(dir.path(), &ok).unwrap();
    assert_eq!(out.verdict, Verdict::Accepted, "{:?}", out.details);
    let dir = problem("name: checked\nvalidation: custom\n", "1\n", "1\n");
    write(
        dir.path(),
        "output_validators/check/check.cpp",
        "int main() { return 42; }\n",
    );
    let err = judge_with(&judge_with_one_process_cpp_compiles(), dir.path(), &ok).unwrap_err();
    assert_eq!(err.reason(), "package.invalid", "{err}");
    assert!(err.to_string().contains("does not compile"), "{err}");
}

/// A million `1=1;` errors, each with its macro expansion notes: g++ writes
/// about 10 MB/s of diagnostics, for minutes.
const COMPILER_FLOOD: &str = "#define X1 1=1;
#define X2 X1 X1 X1 X1 X1 X1 X1 X1 X1 X1
#define X3 X2 X2 X2 X2 X2 X2 X2 X2 X2 X2
#define X4 X3 X3 X3 X3 X3 X3 X3 X3 X3 X3
#define X5 X4 X4 X4 X4 X4 X4 X4 X4 X4 X4
#define X6 X5 X5 X5 X5 X5 X5 X5 X5 X5 X5
void f() { X6 X6 X6 X6 X6 X6 X6 X6 X6 X6 }
int main() {}
";

#[test]
fn a_flooding_compiler_is_a_compilation_error_within_the_compile_limit() {
    let _serial = judge_common::serial();
    let dir = problem("name: flood\n", "1\n", "1\n");
    let judge = judge_with_cpp_compile_limit(3);
    let flood = judge_common::source("cpp", "flood.cpp", COMPILER_FLOOD);
    let out = judge_with(&judge, dir.path(), &flood).unwrap();
    assert_eq!(out.verdict, Verdict::CompilationError);
    let log = &out.compile_log;
    assert!(
        log.starts_with("flood.cpp:"),
        "{}",
        &log[..200.min(log.len())]
    );
    let tail = &log[65536.min(log.len())..];
    assert!(
        log.len() < 65536 + 300,
        "the log keeps 64 KiB: {}",
        log.len()
    );
    assert!(
        tail.contains("[compiler output truncated:"),
        "truncation is said: {tail}"
    );
    assert!(tail.contains("the compiler ran out of time"), "{tail}");
}

#[test]
fn a_program_with_a_512_mib_static_array_compiles() {
    let _serial = judge_common::serial();
    let dir = problem(
        "name: big\nlimits: {time_limit: 2, memory: 1024}\n",
        "",
        "2\n",
    );
    let big = judge_common::source(
        "c",
        "big.c",
        "#include <stdio.h>\n#define N (512 << 20)\nstatic char big[N] = {1};\nint main(void) { big[N - 1] = 1; printf(\"%d\\n\", big[0] + big[N - 1]); return 0; }\n",
    );
    let out = judge(dir.path(), &big).unwrap();
    assert_eq!(
        out.verdict,
        Verdict::Accepted,
        "{} {:?}",
        out.compile_log,
        out.details
    );
}

#[test]
fn compile_limits_default_to_30_seconds() {
    let table = LanguageTable::builtin().unwrap();
    for language in table.iter() {
        let l = language.compile_limits;
        assert_eq!(l.time, 30.0, "{}", language.id);
        assert_eq!(l.effective_wall(), 30.0, "{}", language.id);
    }
}

// ---------------------------------------------------------------- time

#[test]
fn the_wall_limit_of_a_test_is_twice_the_time_limit_plus_one() {
    let _serial = judge_common::serial();
    let dir = problem("name: sleepy\nlimits: {time_limit: 1}\n", "5\n", "5\n");
    // Sleeping uses no CPU: past the time limit, within 2*1+1 s, it is judged.
    let nap = judge_common::source(
        "python3",
        "nap.py",
        "import time\ntime.sleep(1.5)\nprint(input())\n",
    );
    let out = judge(dir.path(), &nap).unwrap();
    assert_eq!(out.verdict, Verdict::Accepted, "{:?}", out.details);
    assert!(out.details[0].wall_seconds > 1.0);
    let sleeper = judge_common::source("python3", "sleep.py", "import time\ntime.sleep(60)\n");
    let out = judge(dir.path(), &sleeper).unwrap();
    assert_eq!(out.verdict, Verdict::TimeLimitExceeded);
    let d = &out.details[0];
    assert_eq!(d.status, "wall_time_limit");
    assert!(
        d.wall_seconds >= 3.0,
        "stopped at 2*1+1 s, not before: {d:?}"
    );
    assert!(d.wall_seconds < 30.0, "{d:?}");
}

// ---------------------------------------------------------------- interactive

/// The validator of a tiny guessing game: `? x` is answered `yes` or `no`,
/// `! x` ends it. It reads with `input()`, so a submission that stops talking
/// makes it die of EOFError (exit 1) — the submission's doing, not a validator
/// failure.
const GUESS_VALIDATOR: &str = r#"import sys
secret = int(open(sys.argv[1]).read())
while True:
    line = input().split()
    if line[0] == "?":
        print("yes" if int(line[1]) == secret else "no", flush=True)
    elif line[0] == "!":
        sys.exit(42 if int(line[1]) == secret else 43)
    else:
        sys.exit(43)
"#;

/// An interactive problem; `validation_time` keeps the old behaviour (waiting
/// for the validator's own limits) short enough to fail rather than hang.
fn interactive_problem(validator: &str) -> tempfile::TempDir {
    let dir = problem(
        "name: guess\nvalidation: custom interactive\nlimits: {time_limit: 0.5, validation_time: 5}\n",
        "7\n",
        "7\n",
    );
    write(dir.path(), "output_validators/guess/guess.py", validator);
    dir
}

const GUESS_OK: &str = r#"for x in range(1, 11):
    print("?", x, flush=True)
    if input() == "yes":
        print("!", x, flush=True)
        break
"#;

#[test]
fn interactive_flood_deadlock_and_early_exit_are_the_submissions_verdicts() {
    let _serial = judge_common::serial();
    let dir = interactive_problem(GUESS_VALIDATOR);
    let cases = [
        ("ok.py", GUESS_OK, Verdict::Accepted),
        (
            // Queries forever, never reads an answer: the validator blocks on
            // its full pipe, then the submission on its own.
            "flood.py",
            "import sys\nwhile True:\n    sys.stdout.write('? 1\\n' * 1000)\n",
            Verdict::TimeLimitExceeded,
        ),
        (
            // Both wait for the other: the submission's wall limit ends it.
            "deadlock.py",
            "input()\n",
            Verdict::TimeLimitExceeded,
        ),
        // Says nothing and exits: the validator dies of EOF after it.
        ("quiet.py", "pass\n", Verdict::WrongAnswer),
        (
            "crash.py",
            "import sys\nprint('? 3', flush=True)\nsys.exit(3)\n",
            Verdict::RunTimeError,
        ),
        (
            "wrong.py",
            "print('! 3', flush=True)\n",
            Verdict::WrongAnswer,
        ),
    ];
    for (name, text, want) in cases {
        let sub = judge_common::source("python3", name, text);
        let out = judge(dir.path(), &sub).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(out.verdict, want, "{name}: {:?}", out.details);
    }
}

#[test]
fn a_flood_that_stops_the_validator_by_its_limit_is_tle() {
    let _serial = judge_common::serial();
    // Keeps everything it reads: a flood runs it into its 64 MiB limit while
    // the submission still writes (then dies of EPIPE: BrokenPipeError).
    let dir = problem(
        "name: hoard\nvalidation: custom interactive\nlimits: {time_limit: 0.5, validation_time: 5, validation_memory: 64}\n",
        "7\n",
        "7\n",
    );
    write(
        dir.path(),
        "output_validators/hoard/hoard.py",
        "import sys\ndata = sys.stdin.buffer.read()\nsys.exit(43)\n",
    );
    let flood = judge_common::source(
        "python3",
        "flood.py",
        "import sys\nwhile True:\n    sys.stdout.write('? 1\\n' * 100000)\n",
    );
    let out = judge(dir.path(), &flood).unwrap();
    assert_eq!(out.verdict, Verdict::TimeLimitExceeded, "{:?}", out.details);
}

#[test]
fn an_interactive_validator_failing_on_its_own_is_validator_failed() {
    let _serial = judge_common::serial();
    // Crashes before reading anything, while the submission waits for it.
    let dir = interactive_problem("import sys\nsys.exit(1)\n");
    let sub = judge_common::source("python3", "ok.py", GUESS_OK);
    let err = judge(dir.path(), &sub).unwrap_err();
    assert_eq!(err.reason(), reason::VALIDATOR_FAILED, "{err}");
    // A validator killed by a signal of its own making, likewise.
    let dir = interactive_problem("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n");
    let err = judge(dir.path(), &sub).unwrap_err();
    assert_eq!(err.reason(), reason::VALIDATOR_FAILED, "{err}");
}

#[test]
fn an_interactive_submissions_stderr_is_kept() {
    let _serial = judge_common::serial();
    let dir = interactive_problem(GUESS_VALIDATOR);
    let text = format!("import sys\nsys.stderr.write('e' * 200000)\n{GUESS_OK}");
    let sub = judge_common::source("python3", "noisy.py", &text);
    let out = judge(dir.path(), &sub).unwrap();
    assert_eq!(out.verdict, Verdict::Accepted, "{:?}", out.details);
    assert_eq!(out.details[0].stderr.len(), 65536);
    assert_eq!(out.details[0].stderr_bytes, 200000);
}

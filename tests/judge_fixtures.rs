//! The fixture problems of `tests/fixtures/problems` judged with our own
//! submissions: greet (legacy pass-fail, `limits.memory`) and tally (2023-07
//! scoring, subtask2's tests symlinked into subtask1), the verdicts and scores
//! their README states.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod judge_common;

use judge_runner::judge::{Options, Outcome, Submission, Verdict};
use judge_runner::package;

fn judge_fixture(name: &str, time_limit: f64, submission: &Submission) -> Outcome {
    let problem = package::parse(&judge_common::fixture(name)).unwrap();
    let options = Options {
        time_limit: Some(time_limit),
        ..Options::default()
    };
    judge_common::judge()
        .judge(&problem, submission, &options, &mut |_| {})
        .unwrap()
}

#[test]
fn greet_verdicts() {
    let _serial = judge_common::serial();
    let hello = |s: &Submission| judge_fixture("greet", 2.0, s);
    let ok = judge_common::source(
        "c",
        "greet.c",
        "#include <stdio.h>\nint main(void){char n[64];if(scanf(\"%63s\",n)!=1)return 1;printf(\"Hello, %s!\\n\",n);return 0;}\n",
    );
    let o = hello(&ok);
    assert_eq!(
        (o.verdict, o.score, o.max_score),
        (Verdict::Accepted, 1.0, 1.0)
    );
    assert_eq!(o.details.len(), 1);
    assert_eq!(o.details[0].name, "secret/judge");

    let wrong = judge_common::source("python3", "greet.py", "print('Hello', input() + '!')\n");
    let o = hello(&wrong);
    assert_eq!((o.verdict, o.score), (Verdict::WrongAnswer, 0.0));
    assert!(
        o.details[0]
            .judge_message
            .contains("String tokens mismatch"),
        "{}",
        o.details[0].judge_message
    );

    // limits.memory: 256 — touching 512 MiB is over it.
    let hog = judge_common::source(
        "cpp",
        "hog.cpp",
        "#include <vector>\n#include <cstdio>\nint main(){std::vector<char> v(512u<<20, 1); std::printf(\"%d\\n\", v[12345]);}\n",
    );
    let o = hello(&hog);
    assert!(
        matches!(
            o.verdict,
            Verdict::MemoryLimitExceeded | Verdict::RunTimeError
        ),
        "{:?}",
        o.verdict
    );
    assert!(
        o.details[0].memory_bytes >= 250 << 20,
        "{}",
        o.details[0].memory_bytes
    );

    let slow = judge_common::source(
        "c",
        "slow.c",
        "int main(void){volatile long n=0;for(;;)n++;}\n",
    );
    let o = hello(&slow);
    assert_eq!(o.verdict, Verdict::TimeLimitExceeded);
    // Stopped by the CPU limit, or (on a loaded machine) by the wall limit
    // first: either way it ran past the 2 s it was given.
    let d = &o.details[0];
    assert!(
        d.cpu_seconds >= 1.9 || d.wall_seconds >= 2.0,
        "cpu {} s, wall {} s",
        d.cpu_seconds,
        d.wall_seconds
    );

    let crash = judge_common::source(
        "c",
        "crash.c",
        "#include <stdlib.h>\nint main(void){abort();}\n",
    );
    let o = hello(&crash);
    assert_eq!(o.verdict, Verdict::RunTimeError);
    assert_eq!(o.details[0].signal, Some(6));
}

const TALLY_FULL: &str = r#"#include <iostream>
int main() { long n; std::cin >> n; long long sum = 0; for (long i = 0; i < n; i++) { long long x; std::cin >> x; sum += x; } std::cout << sum << "\n"; }
"#;

/// Right only when n <= 4 (subtask 1): sums the first four numbers.
const TALLY_PARTIAL: &str = "input()\nprint(sum(int(x) for x in input().split()[:4]))\n";

#[test]
fn tally_full_partial_and_wrong() {
    let _serial = judge_common::serial();
    let full = judge_fixture(
        "tally",
        1.0,
        &judge_common::source("cpp", "tally.cpp", TALLY_FULL),
    );
    assert_eq!(
        (full.verdict, full.score, full.max_score),
        (Verdict::Accepted, 100.0, 100.0)
    );
    // 2 samples + 3 in subtask1 + 8 in subtask2 (1-3 are symlinks into subtask1, reused).
    assert_eq!(full.details.len(), 13);
    let reused: Vec<&str> = full
        .details
        .iter()
        .filter(|d| d.reused)
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(
        reused,
        [
            "secret/subtask2/1",
            "secret/subtask2/2",
            "secret/subtask2/3"
        ]
    );
    assert!(full.details.iter().all(|d| d.verdict == Verdict::Accepted));
    let sample_scores: f64 = full
        .details
        .iter()
        .filter(|d| d.group == "sample")
        .map(|d| d.score)
        .sum();
    assert_eq!(sample_scores, 0.0);

    let partial = judge_fixture(
        "tally",
        1.0,
        &judge_common::source("python3", "tally.py", TALLY_PARTIAL),
    );
    assert_eq!(
        (partial.verdict, partial.score, partial.max_score),
        (Verdict::Accepted, 40.0, 100.0)
    );
    // subtask2 breaks at its first failure (on_reject: break): 01 (n = 3) is
    // right by luck, 02 (n = 6) is wrong, nothing after it runs.
    let sub2: Vec<_> = partial
        .details
        .iter()
        .filter(|d| d.group == "secret/subtask2")
        .collect();
    assert_eq!(sub2.len(), 2);
    assert_eq!(sub2[1].name, "secret/subtask2/02");
    assert_eq!(sub2[1].verdict, Verdict::WrongAnswer);

    let wrong = judge_fixture(
        "tally",
        1.0,
        &judge_common::source("python3", "w.py", "print(input())\n"),
    );
    assert_eq!((wrong.verdict, wrong.score), (Verdict::WrongAnswer, 0.0));

    let slow = judge_common::source(
        "c",
        "s.c",
        "int main(void){volatile long n=0;for(;;)n++;}\n",
    );
    let slow = judge_fixture("tally", 1.0, &slow);
    assert_eq!(
        (slow.verdict, slow.score),
        (Verdict::TimeLimitExceeded, 0.0)
    );

    let crash = judge_common::source("python3", "c.py", "raise ValueError('no')\n");
    let crash = judge_fixture("tally", 1.0, &crash);
    assert_eq!((crash.verdict, crash.score), (Verdict::RunTimeError, 0.0));
}

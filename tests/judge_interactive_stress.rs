//! The judge runs both programs of an interactive test in this process, on two
//! threads, each through its own `sandbox::SandboxSlot`. Sandbox M1 could deadlock that
//! way (glibc's set*id broadcast in a clone of a threaded process: the program's
//! process hung on a futex before exec, in ~60% of 30 tries). These tests are the
//! judge's repro, kept as a guard: any hang ends by a wall limit and fails them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod judge_common;

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use judge_runner::judge::{CancelHandle, JudgeError, Options, Verdict};
use judge_runner::package;
use judge_runner::sandbox::{Plan, SandboxSlot, Status, Stdio};

/// Box ids of the raw slots; `judge_common::judge()` hands out 100.. and 300..
const TALKER_BOX: u32 = 900;
const ANSWERER_BOX: u32 = 901;
const ITERATIONS: usize = 30;
/// No run of the repro needs more than a fraction of this; a hang reaches it.
const WALL: Duration = Duration::from_secs(5);

fn plan(program: &str, dir: &std::path::Path, stdin: OwnedFd, stdout: OwnedFd) -> Plan {
    Plan::new(program)
        .box_dir(dir)
        .wall_time(WALL)
        .cpu_time(Duration::from_secs(2))
        .stdin(Stdio::fd(stdin))
        .stdout(Stdio::fd(stdout))
}

#[test]
fn two_slots_on_two_threads_talk_through_pipes_without_hanging() {
    let _serial = judge_common::serial();
    let parent = judge_common::cgroup_parent();
    let mut talker = SandboxSlot::new(TALKER_BOX, &parent, None).unwrap();
    let mut answerer = SandboxSlot::new(ANSWERER_BOX, &parent, None).unwrap();
    let start = Instant::now();
    let mut slowest = Duration::ZERO;
    for i in 0..ITERATIONS {
        let talker_dir = tempfile::tempdir().unwrap();
        let answerer_dir = tempfile::tempdir().unwrap();
        let (to_answerer_r, to_answerer_w) = std::io::pipe().unwrap();
        let (to_talker_r, to_talker_w) = std::io::pipe().unwrap();
        let talk = plan(
            "/bin/sh",
            talker_dir.path(),
            to_talker_r.into(),
            to_answerer_w.into(),
        )
        .args(["-c", "echo 1; read x; echo \"$x\" > /box/reply"]);
        let answer = plan(
            "python3",
            answerer_dir.path(),
            to_answerer_r.into(),
            to_talker_w.into(),
        )
        .args([
            "-c",
            "import sys; n = sys.stdin.readline(); print('ok', n.strip())",
        ]);
        let began = Instant::now();
        let (t, a) = std::thread::scope(|s| {
            let t = s.spawn(|| talker.run(&talk).unwrap());
            let a = s.spawn(|| answerer.run(&answer).unwrap());
            (t.join().unwrap(), a.join().unwrap())
        });
        slowest = slowest.max(began.elapsed());
        assert_eq!(t.status, Status::Ok, "iteration {i}: sh {t:?}");
        assert_eq!(a.status, Status::Ok, "iteration {i}: python3 {a:?}");
        let reply = std::fs::read_to_string(talker_dir.path().join("reply")).unwrap();
        assert_eq!(reply, "ok 1\n", "iteration {i}");
    }
    talker.close().unwrap();
    answerer.close().unwrap();
    eprintln!(
        "{ITERATIONS} iterations in {:.2?}, slowest {slowest:.2?}",
        start.elapsed()
    );
    assert!(slowest < WALL, "an iteration reached the wall limit");
}

/// The daemon's case: two slots (two judges, four boxes) judging interactive
/// problems at the same time, every run in this process.
#[test]
fn two_judges_judge_interactive_problems_at_once() {
    let _serial = judge_common::serial();
    let dir = judge_common::examples_dir().join("guess");
    let problem = package::parse(&dir).unwrap();
    let accepted = dir.join("submissions/accepted/bisect.c");
    let wrong = dir.join("submissions/wrong_answer/linear.c");
    let judges = [judge_common::judge(), judge_common::judge()];
    let cases = [
        (
            judge_common::submission_from("c", &[accepted]),
            Verdict::Accepted,
        ),
        (
            judge_common::submission_from("c", &[wrong]),
            Verdict::WrongAnswer,
        ),
    ];
    for round in 0..3 {
        std::thread::scope(|s| {
            let running: Vec<_> = judges
                .iter()
                .zip(&cases)
                .map(|(judge, (submission, expected))| {
                    let problem = &problem;
                    s.spawn(move || {
                        let outcome = judge
                            .judge(problem, submission, &Options::default(), &mut |_| {})
                            .unwrap();
                        assert_eq!(outcome.verdict, *expected, "round {round}: {outcome:?}");
                        for detail in &outcome.details {
                            assert!(
                                detail.wall_seconds < 1.0,
                                "round {round}: {} took {} s",
                                detail.name,
                                detail.wall_seconds
                            );
                        }
                    })
                })
                .collect();
            for handle in running {
                handle.join().unwrap();
            }
        });
    }
}

/// Cancelling stops an interactive test's two in-process runs long before the
/// submission's wall limit (3 s here) would.
#[test]
fn cancel_stops_an_interactive_test_quickly() {
    let _serial = judge_common::serial();
    let problem = package::parse(&judge_common::examples_dir().join("guess")).unwrap();
    let sleeper = judge_common::source("python3", "z.py", "import time\ntime.sleep(30)\n");
    let judge = judge_common::judge();
    let cancel = CancelHandle::new();
    let options = Options {
        cancel: cancel.clone(),
        ..Options::default()
    };
    let started = Instant::now();
    let mut ran = 0;
    let outcome = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(1200));
            cancel.cancel();
        });
        judge.judge(&problem, &sleeper, &options, &mut |_| ran += 1)
    });
    let elapsed = started.elapsed();
    assert!(matches!(outcome, Err(JudgeError::Cancelled)), "{outcome:?}");
    assert_eq!(ran, 0, "no test finished: the first one was cancelled");
    assert!(elapsed < Duration::from_millis(2500), "{elapsed:?}");
}

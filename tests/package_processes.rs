//! Real processes: two `judge-runner package fetch` sharing a cache download once;
//! a fetch killed with SIGKILL mid-unpack leaves no visible entry and the next
//! start cleans up; `package check`/`fetch` exit statuses and messages.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod package_common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use judge_runner::package::{Cache, UnpackLimits};
use package_common::{
    Item, TestServer, problem_dir, sha256_hex, tar_gz_bytes, tar_gz_of_dir, tree,
};

const BIN: &str = env!("CARGO_BIN_EXE_judge-runner");

fn fetch_command(url: &str, sha: &str, cache: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["package", "fetch", url, "--sha256", sha, "--cache"])
        .arg(cache)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

async fn wait(child: std::process::Child) -> Output {
    tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_download_once() {
    let server = TestServer::start().await;
    let bytes = tar_gz_of_dir(&problem_dir("tally"), "tally/");
    let sha = sha256_hex(&bytes);
    server.add("tally", bytes);
    server.delay_all(Duration::from_millis(500));
    let cache = tempfile::tempdir().unwrap();
    let first = fetch_command(&server.url("tally"), &sha, cache.path())
        .spawn()
        .unwrap();
    let second = fetch_command(&server.url("tally"), &sha, cache.path())
        .spawn()
        .unwrap();
    let (a, b) = (wait(first).await, wait(second).await);
    for out in [&a, &b] {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let expected = format!("{}\n", cache.path().join(&sha).display());
    assert_eq!(String::from_utf8_lossy(&a.stdout), expected);
    assert_eq!(String::from_utf8_lossy(&b.stdout), expected);
    assert_eq!(
        server.hits("tally"),
        1,
        "the second process waited for the first"
    );
    assert!(tree(&cache.path().join("tmp")).is_empty());
}

/// Many small files, so unpacking takes long enough to be interrupted.
fn many_files_package() -> (Vec<u8>, String) {
    let names: Vec<String> = (0..3_000)
        .map(|i| format!("data/secret/{i:05}.in"))
        .collect();
    let items: Vec<Item<'_>> = names.iter().map(|n| Item::File(n, b"0123456789")).collect();
    let bytes = tar_gz_bytes(&items);
    let sha = sha256_hex(&bytes);
    (bytes, sha)
}

/// The staging directory of an unpack in progress, once it holds files.
fn unpacking(tmp: &Path) -> bool {
    let Ok(read) = std::fs::read_dir(tmp) else {
        return false;
    };
    read.filter_map(Result::ok).any(|e| {
        e.file_name().to_string_lossy().contains(".unpack.")
            && e.path().join("data/secret").is_dir()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_unpack_leaves_no_entry_and_next_start_cleans_up() {
    let server = TestServer::start().await;
    let (bytes, sha) = many_files_package();
    server.add("many", bytes);
    let cache = tempfile::tempdir().unwrap();
    let mut child = fetch_command(&server.url("many"), &sha, cache.path())
        .spawn()
        .unwrap();
    let tmp = cache.path().join("tmp");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !unpacking(&tmp) {
        assert!(Instant::now() < deadline, "unpack never started");
        assert!(
            child.try_wait().unwrap().is_none(),
            "fetch finished before it could be killed"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // Freeze it first, so it cannot finish between the look and the kill.
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    assert!(unpacking(&tmp), "stopped mid-unpack");
    child.kill().unwrap(); // SIGKILL
    let status = wait(child).await.status;
    assert!(!status.success());

    assert!(
        !cache.path().join(&sha).exists(),
        "no visible entry after the crash"
    );
    assert!(!tree(&tmp).is_empty(), "the crash left its staging tree");
    let reopened = Cache::open(cache.path(), 1 << 30, UnpackLimits::default()).unwrap();
    assert!(reopened.entries().is_empty());
    assert!(tree(&tmp).is_empty(), "start-up removed the leftovers");

    let entry = reopened.get(&server.url("many"), &sha).await.unwrap();
    assert_eq!(
        std::fs::read_dir(entry.path().join("data/secret"))
            .unwrap()
            .count(),
        3_000
    );
    assert_eq!(server.hits("many"), 2);
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

#[test]
fn check_prints_the_problem_or_what_is_wrong() {
    let greet = problem_dir("greet");
    let out = run(&[
        "package",
        "check",
        greet.to_str().unwrap(),
        "--time-limit",
        "2",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "Greet the Judge",
        "format:     legacy",
        "pass-fail",
        "time 2 s",
        "memory 256 MiB",
        "tests:      1",
        "secret",
    ] {
        assert!(text.contains(expected), "{expected:?} missing in:\n{text}");
    }

    let broken = tempfile::tempdir().unwrap();
    package_common::write_file(&broken.path().join("data/secret/1.in"), b"");
    let out = run(&["package", "check", broken.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("data/secret/1.in") && err.contains("package.invalid"),
        "{err}"
    );
}

#[test]
fn check_shows_the_symlink_stubs_it_followed() {
    let stubs = problem_dir("tally-stubs");
    let out = run(&["package", "check", stubs.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("tests:      13"));
    let err = String::from_utf8_lossy(&out.stderr);
    for file in ["subtask2/1.in", "subtask2/3.ans"] {
        assert!(
            err.lines().any(|l| l.starts_with("warning: ")
                && l.contains(file)
                && l.contains("symlink stub")
                && l.contains(&format!("data/secret/subtask1/{}", &file[9..]))),
            "no warning for {file}:\n{err}"
        );
    }
}

#[test]
fn check_reads_archives_and_refuses_hostile_ones() {
    let work = tempfile::tempdir().unwrap();
    let good = work.path().join("tally.tar.gz");
    std::fs::write(&good, tar_gz_of_dir(&problem_dir("tally"), "./")).unwrap();
    let out = run(&["package", "check", good.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("scoring") && text.contains("tests:      13"),
        "{text}"
    );
    // The package format's words, never a Rust type name (a Debug dump).
    for word in [
        "format:     2023-07",
        "on_reject break",
        "min of scores",
        "worst_error",
        "first_error",
        "accept_if_any_accepted",
    ] {
        assert!(text.contains(word), "{word:?} missing in:\n{text}");
    }
    for dump in [
        "V2023_07",
        "WorstError",
        "FirstError",
        "Min of",
        "Sum of",
        "Break",
    ] {
        assert!(!text.contains(dump), "{dump:?} in:\n{text}");
    }

    let evil = work.path().join("evil.tar.gz");
    std::fs::write(&evil, tar_gz_bytes(&[Item::File("../escape", b"x")])).unwrap();
    let out = run(&[
        "package",
        "check",
        evil.to_str().unwrap(),
        "--max-entries",
        "5",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains(".."));
    assert!(!work.path().join("escape").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_exit_statuses() {
    let server = TestServer::start().await;
    let (bytes, _) = (tar_gz_of_dir(&problem_dir("greet"), ""), ());
    server.add("hello", bytes);
    let cache = tempfile::tempdir().unwrap();
    let out = wait(
        fetch_command(&server.url("hello"), "xyz", cache.path())
            .spawn()
            .unwrap(),
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(2),
        "a malformed --sha256 is a bad argument"
    );

    let wrong = sha256_hex(b"wrong");
    let out = wait(
        fetch_command(&server.url("hello"), &wrong, cache.path())
            .spawn()
            .unwrap(),
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("package.checksum_mismatch"));
    assert!(!cache.path().join(&wrong).exists());
}

//! Helpers shared by the judge's integration tests: where the packages are, a
//! judge on its own cgroup parent and box ids, and submissions from files.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

use judge_runner::judge::{Judge, JudgeConfig, LanguageTable, SourceFile, Submission};

/// `tests/fixtures/problems/NAME`: the problems the tests own (see its README).
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/problems")
        .join(name)
}

pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/problems")
}

/// Box ids unique within this test binary (tests run in parallel threads).
static NEXT_BOX: AtomicU32 = AtomicU32::new(0);

/// A judge with its own box ids and a cgroup parent unique to this process, so
/// concurrent test binaries (of other engineers too) never collide.
pub fn judge() -> Judge {
    let n = NEXT_BOX.fetch_add(1, Ordering::SeqCst);
    let mut config = JudgeConfig::new(LanguageTable::builtin().unwrap(), 100 + n);
    config.validator_box_id = 300 + n;
    config.cgroup_parent = cgroup_parent();
    Judge::new(config)
}

/// The cgroup parent of this test process (removed by [`Serial`]'s drop).
pub fn cgroup_parent() -> String {
    format!("judge-runner-test-{}", std::process::id())
}

static SERIAL: Mutex<()> = Mutex::new(());

/// Held by every test that runs sandboxes, so the tests of one binary take
/// turns: on this 2-core machine, judgings running side by side would steal each
/// other's CPU and make time-limit verdicts flaky, and every test shares this
/// process's cgroup parent, which the guard removes when dropped (declare it
/// first, so it is dropped last). Concurrency itself is tested on purpose in
/// `judge_interactive_stress.rs`.
pub struct Serial {
    _lock: MutexGuard<'static, ()>,
}

pub fn serial() -> Serial {
    Serial {
        _lock: SERIAL.lock().unwrap_or_else(|p| p.into_inner()),
    }
}

impl Drop for Serial {
    fn drop(&mut self) {
        let _ = judge_runner::sandbox::remove_parent(&cgroup_parent());
    }
}

pub fn submission_from(language: &str, paths: &[PathBuf]) -> Submission {
    let files = paths
        .iter()
        .map(|p| SourceFile {
            name: p.file_name().unwrap().to_string_lossy().into_owned(),
            content: std::fs::read(p).unwrap(),
        })
        .collect();
    Submission {
        language: language.to_string(),
        files,
    }
}

pub fn source(language: &str, name: &str, text: &str) -> Submission {
    Submission {
        language: language.to_string(),
        files: vec![SourceFile {
            name: name.to_string(),
            content: text.as_bytes().to_vec(),
        }],
    }
}

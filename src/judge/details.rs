//! The per-test details document (contract §3 `--details`), the trial timings,
//! and the progress line printed for each test.

use serde::Serialize;

use super::verdict::Verdict;

/// One judged test, as the `details` attachment lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestDetail {
    /// Path under `data/` without extension, e.g. `secret/subtask1/01`.
    pub name: String,
    /// The test's group, path under `data/` (`sample`, `secret/subtask1`).
    pub group: String,
    pub verdict: Verdict,
    pub cpu_seconds: f64,
    pub wall_seconds: f64,
    pub memory_bytes: u64,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub score: f64,
    /// The validator's `judgemessage.txt` (the default validator's message), cut
    /// to a few KiB; empty when it wrote nothing.
    pub judge_message: String,
    /// The sandbox status of the submission's run (`ok`, `time_limit`, ...).
    pub status: String,
    /// The result was taken from an identical earlier test (a symlink to it), as
    /// problemtools does, instead of running again.
    pub reused: bool,
    /// The first 64 KiB of what the submission wrote to stderr (lossy UTF-8);
    /// the rest was read and discarded. Kept for diagnosis, never a verdict.
    pub stderr: String,
    /// How many bytes the submission wrote to stderr in all.
    pub stderr_bytes: u64,
}

impl TestDetail {
    /// The one-line progress report of this test.
    pub fn progress_line(&self, done: usize, total: usize) -> String {
        format!(
            "[{done:>width$}/{total}] {name:<24} {verdict:<4} {cpu:>6.3}s {mem:>7.1}MiB",
            width = total.to_string().len(),
            name = self.name,
            verdict = self.verdict.short(),
            cpu = self.cpu_seconds,
            mem = self.memory_bytes as f64 / (1024.0 * 1024.0),
        )
    }
}

/// A test's resource use, for Trials (timings, not a verdict).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestTiming {
    pub test: String,
    /// The sandbox status of the run (contract §1 strings).
    pub status: String,
    pub cpu_seconds: f64,
    pub wall_seconds: f64,
    pub memory_bytes: u64,
}

impl From<&TestDetail> for TestTiming {
    fn from(d: &TestDetail) -> Self {
        TestTiming {
            test: d.name.clone(),
            status: d.status.clone(),
            cpu_seconds: d.cpu_seconds,
            wall_seconds: d.wall_seconds,
            memory_bytes: d.memory_bytes,
        }
    }
}

/// Cuts a judge message to `max` bytes on a character boundary.
pub fn cut_message(mut message: String, max: usize) -> String {
    if message.len() > max {
        let mut end = max;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str("\n[...truncated]");
    }
    message
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn detail_serializes_with_contract_fields() {
        let d = TestDetail {
            name: "secret/1".into(),
            group: "secret".into(),
            verdict: Verdict::WrongAnswer,
            cpu_seconds: 0.01,
            wall_seconds: 0.02,
            memory_bytes: 1 << 20,
            exit_code: Some(0),
            signal: None,
            score: 0.0,
            judge_message: "x".into(),
            status: "ok".into(),
            reused: false,
            stderr: "e".into(),
            stderr_bytes: 1,
        };
        let v = serde_json::to_value(&d).unwrap();
        for key in [
            "name",
            "group",
            "verdict",
            "cpu_seconds",
            "wall_seconds",
            "memory_bytes",
            "exit_code",
            "signal",
            "score",
            "judge_message",
            "stderr",
        ] {
            assert!(v.get(key).is_some(), "{key} missing");
        }
        assert_eq!(v["verdict"], "Wrong Answer");
        assert!(v["signal"].is_null());
        assert!(d.progress_line(3, 12).contains("WA"));
    }

    #[test]
    fn messages_are_cut_on_char_boundaries() {
        let s = cut_message("ééééé".to_string(), 3);
        assert!(s.starts_with('é'));
        assert!(s.ends_with("[...truncated]"));
        assert_eq!(cut_message("ok".into(), 10), "ok");
    }
}

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
    /// Every pass of a multi-pass test, in order (contract §7); the test's own
    /// fields are its last pass's. Empty, and left out of the document, for a
    /// test of any other problem.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub passes: Vec<PassDetail>,
}

/// One pass of a multi-pass test: one run of the submission (and its
/// validator), on the test's input (pass 1) or on the `nextpass.in` the
/// validator wrote in the pass before.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PassDetail {
    /// 1 for the first pass.
    pub pass: u32,
    /// The sandbox status of the submission's run in this pass.
    pub status: String,
    pub cpu_seconds: f64,
    pub wall_seconds: f64,
    pub memory_bytes: u64,
    /// What this pass added to `judgemessage.txt` (the file persists between
    /// passes and validators append to it), or the judge's own message; cut to
    /// a few KiB.
    pub message: String,
}

impl TestDetail {
    /// The most CPU time one run of this test took: its only run, or its
    /// slowest pass (time limits apply to each pass).
    pub fn slowest_cpu_seconds(&self) -> f64 {
        self.passes
            .iter()
            .map(|p| p.cpu_seconds)
            .fold(self.cpu_seconds, f64::max)
    }

    /// The one-line progress report of this test.
    pub fn progress_line(&self, done: usize, total: usize) -> String {
        format!(
            "[{done:>width$}/{total}] {name:<24} {verdict:<4} {cpu:>6.3}s {mem:>7.1}MiB",
            width = total.to_string().len(),
            name = self.name,
            verdict = self.verdict.short(),
            cpu = self.cpu_seconds,
            mem = self.memory_bytes as f64 / (1024.0 * 1024.0),
        ) + &match self.passes.len() {
            0 => String::new(),
            1 => " (1 pass)".to_string(),
            n => format!(" ({n} passes)"),
        }
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
            passes: Vec::new(),
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
        assert!(v.get("passes").is_none(), "not a multi-pass test");
        assert!(d.progress_line(3, 12).contains("WA"));
    }

    #[test]
    fn a_multi_pass_test_lists_its_passes() {
        let pass = |pass: u32, cpu: f64| PassDetail {
            pass,
            status: "ok".into(),
            cpu_seconds: cpu,
            wall_seconds: cpu,
            memory_bytes: 1 << 20,
            message: format!("pass {pass}"),
        };
        let d = TestDetail {
            name: "secret/1".into(),
            group: "secret".into(),
            verdict: Verdict::Accepted,
            cpu_seconds: 0.1,
            wall_seconds: 0.1,
            memory_bytes: 1 << 20,
            exit_code: Some(0),
            signal: None,
            score: 1.0,
            judge_message: "pass 1pass 2".into(),
            status: "ok".into(),
            reused: false,
            stderr: String::new(),
            stderr_bytes: 0,
            passes: vec![pass(1, 0.5), pass(2, 0.1)],
        };
        let v = serde_json::to_value(&d).unwrap();
        let passes = v["passes"].as_array().unwrap();
        assert_eq!(passes.len(), 2);
        for key in [
            "pass",
            "status",
            "cpu_seconds",
            "wall_seconds",
            "memory_bytes",
            "message",
        ] {
            assert!(passes[0].get(key).is_some(), "{key} missing");
        }
        assert_eq!(passes[1]["pass"], 2);
        assert_eq!(d.slowest_cpu_seconds(), 0.5);
        assert!(d.progress_line(1, 1).ends_with("(2 passes)"));
    }

    #[test]
    fn messages_are_cut_on_char_boundaries() {
        let s = cut_message("ééééé".to_string(), 3);
        assert!(s.starts_with('é'));
        assert!(s.ends_with("[...truncated]"));
        assert_eq!(cut_message("ok".into(), 10), "ok");
    }
}

//! The stream of submissions: candidates from the example problems (pass-fail,
//! scoring, interactive, a custom validator, a float tolerance; C, C++, Python),
//! each judged once without faults first; then submissions at random, a few with a
//! `callback_url`, a few rejudges and cancels, and some for a package whose stored
//! bytes were corrupted after upload.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use judge_runner::demo::manager::Manager;
use judge_runner::protocol::{Id, SubmissionFile};
use rand::Rng;
use rand::rngs::StdRng;

use super::db::Db;
use super::e2e_common::{TOKEN, examples_dir};
use super::system::System;

/// Submissions for this problem must end Failed with this reason.
pub const CORRUPT_REASON: &str = "package.checksum_mismatch";

const CANDIDATES: &[(&str, &str)] = &[
    ("addition", "accepted/add.c"),
    ("addition", "accepted/add.py"),
    ("addition", "wrong_answer/minus.cpp"),
    ("addition", "compile_error/syntax.c"),
    ("addition", "run_time_error/segfault.c"),
    ("addition", "time_limit_exceeded/spin.c"),
    ("groups", "accepted/sum.cpp"),
    ("groups", "partially_accepted/int32.py"),
    ("groups", "wrong_answer/count.c"),
    ("guess", "accepted/bisect.c"),
    ("guess", "accepted/bisect.py"),
    ("guess", "wrong_answer/linear.c"),
    ("guess", "run_time_error/crash.py"),
    ("twosum", "accepted/halves.cpp"),
    ("twosum", "wrong_answer/negative.c"),
    ("circle", "accepted/area.py"),
    ("circle", "wrong_answer/pi3.c"),
];

pub struct Candidate {
    pub problem: &'static str,
    pub file: &'static str,
    pub problem_id: Id,
    pub language: &'static str,
    pub files: Vec<SubmissionFile>,
    /// The fault-free run's verdict, score and seconds from submission to Result.
    pub verdict: String,
    pub score: f64,
    pub seconds: f64,
}

pub struct Workload {
    pub candidates: Vec<Candidate>,
    pub corrupt_problem: Id,
    /// Submission id → candidate index (usize::MAX: the corrupted package's).
    pub submitted: BTreeMap<Id, usize>,
    pub rejudged: Vec<Id>,
    pub cancelled: Vec<Id>,
    /// Submissions whose answer was lost (a Server died): the checker finds them.
    pub unanswered: u32,
}

fn language_of(file: &str) -> &'static str {
    match Path::new(file).extension().and_then(|e| e.to_str()) {
        Some("c") => "c",
        Some("cpp") => "cpp",
        Some("py") => "python3",
        other => panic!("no language for {other:?}"),
    }
}

async fn any<T, F, Fut>(sys: &System, mut call: F) -> Option<T>
where
    F: FnMut(Manager) -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for m in sys.managers() {
        if let Some(t) = call(m).await {
            return Some(t);
        }
    }
    None
}

impl Workload {
    pub async fn prepare(sys: &mut System) -> Workload {
        let mut ids = BTreeMap::new();
        let mut candidates = Vec::new();
        for (problem, file) in CANDIDATES {
            if !ids.contains_key(problem) {
                let dir = examples_dir().join(problem);
                let bytes = judge_runner::demo::examples::tar_gz(&dir).unwrap();
                let created = sys.manager().upload_problem(bytes, None).await.unwrap();
                ids.insert(*problem, created.problem_id);
            }
            let path = examples_dir().join(problem).join("submissions").join(file);
            let name = path.file_name().unwrap().to_str().unwrap();
            candidates.push(Candidate {
                problem,
                file,
                problem_id: ids[problem],
                language: language_of(file),
                files: vec![SubmissionFile::from_bytes(
                    name,
                    &std::fs::read(&path).unwrap(),
                )],
                verdict: String::new(),
                score: 0.0,
                seconds: 0.0,
            });
        }
        let corrupt_problem = upload_corrupted(sys).await;
        Workload {
            candidates,
            corrupt_problem,
            submitted: BTreeMap::new(),
            rejudged: Vec::new(),
            cancelled: Vec::new(),
            unanswered: 0,
        }
    }

    /// Every candidate once, without faults: the verdicts the chaos run must match.
    pub async fn baseline(&mut self, sys: &mut System) {
        let m = sys.manager();
        let mut jobs = Vec::new();
        for c in &self.candidates {
            let started = Instant::now();
            let created = m
                .submit(c.problem_id, c.language, c.files.clone())
                .await
                .unwrap();
            jobs.push((created.job_id, started));
        }
        for (i, (job, started)) in jobs.into_iter().enumerate() {
            let deadline = Instant::now() + Duration::from_secs(300);
            let view = loop {
                let view = m.job(job).await.unwrap();
                if view.state.is_final() {
                    break view;
                }
                assert!(Instant::now() < deadline, "baseline job {job} not done");
                tokio::time::sleep(Duration::from_millis(100)).await;
            };
            let result = view.result.unwrap_or_else(|| {
                panic!(
                    "baseline {}/{}: {:?} {:?}",
                    self.candidates[i].problem,
                    self.candidates[i].file,
                    view.state,
                    view.failure_reason
                )
            });
            let c = &mut self.candidates[i];
            c.verdict = result.verdict;
            c.score = result.score;
            c.seconds = started.elapsed().as_secs_f64();
        }
    }

    /// One step of the stream: mostly a new submission, sometimes a rejudge or a
    /// cancel; every call goes to whichever Server answers.
    pub async fn step(&mut self, sys: &mut System, rng: &mut StdRng) {
        let roll = rng.random_range(0..100);
        if roll < 8 && !self.submitted.is_empty() {
            let ids: Vec<Id> = self.submitted.keys().copied().collect();
            let id = ids[rng.random_range(0..ids.len())];
            if any(sys, |m| async move { m.rejudge(id).await.ok() })
                .await
                .is_some()
            {
                self.rejudged.push(id);
            }
            return;
        }
        if roll < 12 && !self.submitted.is_empty() {
            let ids: Vec<Id> = self.submitted.keys().copied().collect();
            let id = ids[rng.random_range(0..ids.len())];
            let latest = any(sys, |m| async move {
                m.submission(id).await.ok()?.jobs.last().map(|j| j.id)
            })
            .await;
            if let Some(job) = latest
                && any(sys, |m| async move { m.cancel(job).await.ok() })
                    .await
                    .is_some()
            {
                self.cancelled.push(id);
            }
            return;
        }
        let (index, problem, language, files) = if roll < 15 {
            let c = &self.candidates[0];
            (
                usize::MAX,
                self.corrupt_problem,
                c.language,
                c.files.clone(),
            )
        } else {
            let i = rng.random_range(0..self.candidates.len());
            let c = &self.candidates[i];
            (i, c.problem_id, c.language, c.files.clone())
        };
        let callback = rng.random_bool(0.3).then(|| sys.receiver.url());
        let body = serde_json::json!({
            "problem_id": problem,
            "language": language,
            "files": files,
            "callback_url": callback,
        });
        let created = any(sys, |m| {
            let body = body.clone();
            async move {
                let r = reqwest::Client::new()
                    .post(format!("{}/api/submissions", m.base_url()))
                    .bearer_auth(TOKEN)
                    .json(&body)
                    .timeout(Duration::from_secs(10))
                    .send()
                    .await
                    .ok()?;
                if r.status().as_u16() != 201 {
                    return None;
                }
                r.json::<serde_json::Value>().await.ok()
            }
        })
        .await;
        match created.and_then(|v| v["submission_id"].as_i64()) {
            Some(id) => {
                self.submitted.insert(id, index);
            }
            None => self.unanswered += 1,
        }
    }

    /// Waits until every submission's latest attempt has ended, or `timeout`.
    pub async fn wait_settled(&self, sys: &mut System, timeout: Duration) {
        let db = Db::connect(&sys.servers[0].opts.database).await;
        let deadline = Instant::now() + timeout;
        loop {
            sys.tick().await;
            let jobs = db.jobs().await;
            let mut latest: BTreeMap<i64, &str> = BTreeMap::new();
            for j in &jobs {
                latest.insert(j.submission_id, &j.state);
            }
            let open = latest
                .values()
                .filter(|s| matches!(**s, "Queued" | "Running"))
                .count();
            if open == 0 {
                return;
            }
            if Instant::now() > deadline {
                eprintln!("chaos: {open} submission(s) still open after {timeout:?}");
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// Uploads a copy of `addition` under another name and then corrupts the bytes
/// the Servers store for it: every Runner's download fails its checksum.
async fn upload_corrupted(sys: &mut System) -> Id {
    let copy = sys.scene.path("corrupt-addition");
    copy_dir(&examples_dir().join("addition"), &copy);
    let yaml = copy.join("problem.yaml");
    let text = std::fs::read_to_string(&yaml).unwrap();
    std::fs::write(
        &yaml,
        text.replace("name: Addition", "name: Addition (corrupted)"),
    )
    .unwrap();
    let bytes = judge_runner::demo::examples::tar_gz(&copy).unwrap();
    let created = sys.manager().upload_problem(bytes, None).await.unwrap();
    let stored: PathBuf = sys
        .storage
        .join("packages")
        .join(format!("{}.tar.gz", created.sha256));
    let mut data = std::fs::read(&stored).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 0xff;
    std::fs::write(&stored, data).unwrap();
    created.problem_id
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

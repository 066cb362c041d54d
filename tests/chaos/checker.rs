//! The checker: after quiescence, the database, the Servers' metrics and request
//! logs, the webhook receiver's log and the host are held against what the lease
//! promises. Every broken promise is one line in `violations`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use super::db::{Db, JobRow};
use super::e2e_common::{metric_value, processes_in};
use super::system::{Backend, System};
use super::workload::{CORRUPT_REASON, Workload};

pub struct Report {
    pub submissions: usize,
    pub attempts: usize,
    pub faults: BTreeMap<&'static str, u32>,
    pub lost: usize,
    pub double_counted: usize,
    pub wrong_verdicts: usize,
    pub stale_refused: u64,
    pub deliveries: i64,
    pub claims_counted: u64,
    pub webhook_events: usize,
    pub longest_wait_past_fault_free: f64,
    /// A's jobs the forwarding Runner completed, and the submissions B holds.
    pub forwarded: usize,
    pub b_submissions: usize,
    pub violations: Vec<String>,
}

const ENDED: [&str; 4] = ["Completed", "Failed", "Cancelled", "Superseded"];

/// Lease-bearing routes: a 409 there is a refused stale call.
const LEASE_ROUTES: [&str; 6] = [
    "/api/jobs/{id}/lease",
    "/api/jobs/{id}/progress",
    "/api/jobs/{id}/release",
    "/api/jobs/{id}/files/{name}",
    "/api/jobs/{id}/result",
    "/api/jobs/{id}/failure",
];

fn counter(text: &str, name: &str) -> u64 {
    metric_value(text, name).map_or(0, |v| v.round().max(0.0) as u64)
}

/// 200 answers to `/release` in one Server log: every release it took.
fn releases_in_log(text: &str) -> u64 {
    text.lines()
        .filter(|l| l.contains("status=200") && l.contains("route=/api/jobs/{id}/release "))
        .count() as u64
}

/// 409 answers to lease-bearing calls in one Server log.
fn stale_in_log(text: &str) -> u64 {
    text.lines()
        .filter(|l| l.contains("status=409"))
        .filter(|l| {
            LEASE_ROUTES
                .iter()
                .any(|r| l.contains(&format!("route={r} ")))
        })
        .count() as u64
}

pub async fn check(sys: &mut System, work: &Workload) -> Report {
    let db = Db::connect(&sys.servers[0].opts.database).await;
    wait_outbox(sys, &db).await;
    let submissions = db.submissions().await;
    let jobs = db.jobs().await;
    let results = db.results().await;
    let outbox = db.outbox().await;
    let mut v = sys.probe_violations.clone();

    let mut by_submission: BTreeMap<i64, Vec<&JobRow>> = BTreeMap::new();
    for j in &jobs {
        by_submission.entry(j.submission_id).or_default().push(j);
    }
    let result_of: BTreeMap<i64, _> = results.iter().map(|r| (r.job_id, r)).collect();
    let files_of = |s: &super::db::SubmissionRow| -> serde_json::Value {
        serde_json::from_str(&s.files).unwrap_or_default()
    };
    let candidate_of = |s: &super::db::SubmissionRow| -> Option<usize> {
        work.candidates.iter().position(|c| {
            c.problem_id == s.problem_id && serde_json::to_value(&c.files).ok() == Some(files_of(s))
        })
    };

    // Every submission's latest attempt ended, as the run allows it to.
    let mut lost = 0;
    let mut wrong = 0;
    let mut longest: f64 = 0.0;
    for s in &submissions {
        let Some(attempts) = by_submission.get(&s.id) else {
            v.push(format!("submission {} has no attempt", s.id));
            lost += 1;
            continue;
        };
        let latest = attempts.iter().max_by_key(|j| j.attempt).unwrap();
        let corrupt = s.problem_id == work.corrupt_problem;
        let fine = match latest.state.as_str() {
            "Completed" => !corrupt,
            "Cancelled" => true,
            "Failed" => corrupt && latest.failure_reason.as_deref() == Some(CORRUPT_REASON),
            _ => false,
        };
        if !fine {
            lost += 1;
            v.push(format!(
                "submission {} (problem {}): latest attempt {} is {} ({:?})",
                s.id, s.problem_id, latest.attempt, latest.state, latest.failure_reason
            ));
        }
        // Every Completed attempt has the fault-free verdict.
        if let Some(c) = candidate_of(s).map(|i| &work.candidates[i]) {
            for j in attempts.iter().filter(|j| j.state == "Completed") {
                if let Some(r) = result_of.get(&j.id)
                    && (r.verdict != c.verdict || (r.score - c.score).abs() > 1e-9)
                {
                    wrong += 1;
                    v.push(format!(
                        "job {} ({}/{}): {} {} where the fault-free run gave {} {}",
                        j.id, c.problem, c.file, r.verdict, r.score, c.verdict, c.score
                    ));
                }
            }
            if attempts.len() == 1
                && latest.state == "Completed"
                && let Some(r) = result_of.get(&latest.id)
            {
                let waited = (r.created_ms - s.created_ms) as f64 / 1000.0;
                longest = longest.max(waited - c.seconds);
            }
        } else if !s.problem_id.eq(&work.corrupt_problem) {
            v.push(format!("submission {} matches no candidate", s.id));
        }
    }

    // Exactly one Result per Completed job, none for any other.
    let mut double = 0;
    for j in &jobs {
        let has = result_of.contains_key(&j.id);
        if (j.state == "Completed") != has {
            if has {
                double += 1;
            } else {
                lost += 1;
            }
            v.push(format!(
                "job {}: state {} but result {}",
                j.id, j.state, has
            ));
        }
        // `deliveries` is net: a refund and each of the first three releases give
        // one back. Each refund and release still needs a claim of its own.
        let claims = j.deliveries + j.refunds + j.releases.min(3);
        if j.deliveries < 0 || claims < j.refunds + j.releases {
            v.push(format!(
                "job {}: {} deliveries, {} refunds, {} releases",
                j.id, j.deliveries, j.refunds, j.releases
            ));
        }
        if j.state == "Completed" && j.deliveries < 1 {
            v.push(format!("job {}: Completed without a delivery", j.id));
        }
    }

    // The ledger: what the Servers counted against what the database holds. A
    // Server killed with -9 was read just before; what it did in that instant is
    // the slack (at most one claim, release or refund per daemon per kill).
    let kills = sys
        .injected
        .get("kill -9 serve")
        .copied()
        .unwrap_or_default() as u64;
    let slack = kills * 3;
    let mut sums: BTreeMap<&str, u64> = BTreeMap::new();
    let mut stale_logged = 0;
    for (i, slot) in sys.servers.iter().enumerate() {
        for (start, text) in &slot.last_metrics {
            for name in [
                "judge_claims_total",
                "judge_releases_total",
                "judge_refunds_total",
                "judge_stale_result_dropped_total",
            ] {
                *sums.entry(name).or_default() += counter(text, name);
            }
            let log = std::fs::read_to_string(sys.scene.path(&format!("server-{i}-{start}.log")))
                .unwrap_or_default();
            let logged = stale_in_log(&log);
            stale_logged += logged;
            let counted = counter(text, "judge_stale_result_dropped_total");
            let alive = slot.serve.is_some() && *start == slot.starts;
            if (alive && counted != logged) || counted > logged {
                v.push(format!(
                    "server {i} start {start}: {logged} stale calls refused in its log, {counted} counted"
                ));
            }
            // Every release the Server took is counted, the fourth and later of a
            // job too (which the job's `releases` column, counting the free
            // ones, does not hold).
            let released = releases_in_log(&log);
            let counted = counter(text, "judge_releases_total");
            if (alive && counted != released) || counted > released {
                v.push(format!(
                    "server {i} start {start}: {released} releases taken in its log, {counted} counted"
                ));
            }
        }
    }
    let total = |f: fn(&JobRow) -> i64| jobs.iter().map(f).sum::<i64>() as u64;
    for (name, in_db) in [
        // A refund, and each of a job's first three releases, give a delivery back.
        (
            "judge_claims_total",
            total(|j| j.deliveries + j.refunds + j.releases.min(3)),
        ),
        ("judge_releases_total", total(|j| j.releases)),
        ("judge_refunds_total", total(|j| j.refunds)),
    ] {
        let counted = sums.get(name).copied().unwrap_or_default();
        // A job's `releases` holds its free releases only (at most three: the
        // ones that gave a delivery back); the Servers count every release, and
        // their logs above account for the rest.
        let more_than_held = name == "judge_releases_total"
            && jobs.iter().any(|j| j.releases >= 3)
            && counted >= in_db;
        if (counted > in_db && !more_than_held) || in_db > counted + slack {
            v.push(format!(
                "{name}: the Servers counted {counted}, the jobs hold {in_db} (slack {slack})"
            ));
        }
    }

    // Webhooks: every ended attempt with a callback_url delivered at least once,
    // every delivery of one event under one id.
    let callback: BTreeSet<i64> = submissions
        .iter()
        .filter(|s| s.callback_url.is_some())
        .map(|s| s.id)
        .collect();
    let received = sys.receiver.deliveries();
    let mut events = 0;
    for j in jobs
        .iter()
        .filter(|j| callback.contains(&j.submission_id) && ENDED.contains(&j.state.as_str()))
    {
        events += 1;
        let rows: Vec<_> = outbox.iter().filter(|o| o.job_id == j.id).collect();
        let Some(row) = rows.iter().find(|o| o.state == j.state) else {
            v.push(format!(
                "job {} ended {} with no webhook event",
                j.id, j.state
            ));
            continue;
        };
        let got: Vec<_> = received
            .iter()
            .filter(|d| d.job_id == j.id && d.state == j.state)
            .collect();
        if !row.delivered || got.is_empty() {
            v.push(format!(
                "job {} {}: webhook delivered={} received {} time(s)",
                j.id,
                j.state,
                row.delivered,
                got.len()
            ));
        }
        if got.iter().any(|d| Some(&d.id) != row.delivery_id.as_ref()) {
            v.push(format!(
                "job {} {}: delivery ids {:?}, stored {:?}",
                j.id,
                j.state,
                got.iter().map(|d| &d.id).collect::<Vec<_>>(),
                row.delivery_id
            ));
        }
    }

    // The forwarder: A's jobs it completed, and B's ledger (no attempt spent twice).
    let mut forwarded = 0;
    let mut b_submissions = 0;
    if let Some(side) = &sys.forward {
        forwarded = jobs
            .iter()
            .filter(|j| j.state == "Completed" && j.runner_id == Some(side.runner_id))
            .count();
        let b = super::forward::check_b(side).await;
        b_submissions = b.submissions;
        v.extend(b.violations);
        if forwarded == 0 && submissions.len() >= 50 {
            v.push(format!(
                "the forwarder completed none of {} submissions' jobs",
                submissions.len()
            ));
        }
    }

    Report {
        submissions: submissions.len(),
        attempts: jobs.len(),
        faults: sys.injected.clone(),
        lost,
        double_counted: double,
        wrong_verdicts: wrong,
        stale_refused: stale_logged,
        deliveries: total(|j| j.deliveries + j.refunds + j.releases.min(3)) as i64,
        claims_counted: sums.get("judge_claims_total").copied().unwrap_or_default(),
        webhook_events: events,
        longest_wait_past_fault_free: longest,
        forwarded,
        b_submissions,
        violations: v,
    }
}

/// Waits (at most 90 s) until no webhook event is pending.
async fn wait_outbox(sys: &mut System, db: &Db) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while Instant::now() < deadline {
        sys.tick().await;
        if db.outbox().await.iter().all(|o| o.delivered || o.gave_up) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What the run left on the host once every daemon has stopped: processes of the
/// box uids, cgroups, mounts under the scene, temp files beside the logs.
pub fn leftovers(sys: &System) -> Vec<String> {
    let mut out = Vec::new();
    for pid in processes_in(&sys.scene.cgroup_parent) {
        out.push(format!("process {pid} in the run's cgroups"));
    }
    if let Ok(roots) = std::fs::read_dir("/sys/fs/cgroup") {
        for root in roots.flatten() {
            let parent = root.path().join(&sys.scene.cgroup_parent);
            for child in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
                if child.path().is_dir() {
                    out.push(format!("cgroup {}", child.path().display()));
                }
            }
        }
    }
    // Each daemon's one slot and its validator box (+500), B's daemon's too.
    let boxes: Vec<u32> = sys
        .daemons
        .iter()
        .map(|d| d.first_box)
        .chain(sys.forward.as_ref().map(|f| f.b_first_box))
        .flat_map(|b| [60_000 + b, 60_000 + b + 500])
        .collect();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|u| u.parse::<u32>().ok());
        if let Some(uid) = uid.filter(|u| boxes.contains(u)) {
            out.push(format!(
                "process {} of box uid {uid}",
                entry.file_name().to_string_lossy()
            ));
        }
    }
    let scene = sys.scene.dir.path();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for line in mountinfo.lines() {
        let point = line.split(' ').nth(4).unwrap_or_default();
        if Path::new(point).starts_with(scene)
            && Path::new(point) != sys.storage
            && Path::new(point) != sys.cache
        {
            out.push(format!("mount {point}"));
        }
    }
    let expected = |name: &str| {
        // A daemon's work-directory lock file stays by design (runner/work.rs).
        (name.starts_with("judge-runner-work-") && name.ends_with(".lock"))
            || name.ends_with(".log")
            || name.starts_with("judge.db")
            || matches!(
                name,
                "storage" | "cache" | "corrupt-addition" | "box-locks" | "server-b" | "b-cache"
            )
    };
    for e in std::fs::read_dir(scene).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !expected(&name) {
            out.push(format!("left in the daemons' TMPDIR: {name}"));
        }
    }
    out
}

impl Report {
    pub fn table(&self) -> String {
        let mut t = String::from("chaos figures\n");
        t += &format!("  submissions                      {}\n", self.submissions);
        t += &format!("  attempts                         {}\n", self.attempts);
        for (class, n) in &self.faults {
            t += &format!("  fault: {class:<34} {n}\n");
        }
        t += &format!("  results lost                     {}\n", self.lost);
        t += &format!(
            "  results double-counted           {}\n",
            self.double_counted
        );
        t += &format!(
            "  verdicts unlike the fault-free   {}\n",
            self.wrong_verdicts
        );
        t += &format!(
            "  stale results refused            {}\n",
            self.stale_refused
        );
        t += &format!(
            "  claims (jobs' ledger / counted)   {} / {}\n",
            self.deliveries, self.claims_counted
        );
        t += &format!(
            "  webhook events checked           {}\n",
            self.webhook_events
        );
        t += &format!(
            "  longest wait past fault-free     {:.1} s\n",
            self.longest_wait_past_fault_free
        );
        t += &format!(
            "  jobs forwarded (A) / B submissions {} / {}\n",
            self.forwarded, self.b_submissions
        );
        t += &format!(
            "  violations                       {}\n",
            self.violations.len()
        );
        t
    }

    pub fn json(&self, seed: u64, seconds: u64, backend: Backend) -> serde_json::Value {
        serde_json::json!({
            "backend": format!("{backend:?}"),
            "seed": seed,
            "seconds": seconds,
            "submissions": self.submissions,
            "attempts": self.attempts,
            "faults": self.faults,
            "results_lost": self.lost,
            "results_double_counted": self.double_counted,
            "wrong_verdicts": self.wrong_verdicts,
            "stale_results_refused": self.stale_refused,
            "deliveries": self.deliveries,
            "claims_counted": self.claims_counted,
            "webhook_events": self.webhook_events,
            "longest_wait_past_fault_free_seconds": self.longest_wait_past_fault_free,
            "jobs_forwarded": self.forwarded,
            "b_submissions": self.b_submissions,
            "violations": self.violations,
        })
    }
}

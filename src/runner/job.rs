//! One claimed piece of work (a job or a trial), from claim to the Server's
//! answer: package through the cache, parse, judge on a blocking thread with the
//! lease kept alive, then attachments and Result, or `/failure`, or `/release`.
//!
//! Every way out is one of four [`Evaluated`] values, settled in one place
//! ([`settle`](super::settle)): a verdict is reported, an infrastructure failure
//! goes to `/failure` (never as a verdict), a lost lease drops everything, a
//! stopping daemon releases.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::judge::{
    CancelHandle, Judge, JudgeError, Options, Outcome, SourceFile, Submission, Verdict,
};
use crate::package::{Cache, CacheEntry, PackageError, Problem};
use crate::protocol::{Claim, PackageRef, ResultBody, SubmissionFile, Timing, TrialResultBody};

use super::client::{Client, WorkRef};
use super::lease::{Lease, LeaseKeeper};
use super::metrics::{JudgeTime, Metrics};
use super::settle::{self, Ending};
use super::shutdown::Shutdown;

/// The reason a claim whose files cannot be decoded is failed with (not
/// retryable: every Runner would decode the same bytes).
pub const SUBMISSION_INVALID: &str = "submission.invalid";
/// The name of the pseudo-test a trial reports when its submission does not compile.
pub const TRIAL_COMPILE_TEST: &str = "compile";

/// Parsed problems by package SHA-256: a package is content-addressed, so one
/// parse serves every later job of it. Small and cleared when full; a miss
/// costs one parse.
#[derive(Default)]
pub(crate) struct ProblemMemo(Mutex<HashMap<String, Arc<Problem>>>);

const PROBLEM_MEMO_SIZE: usize = 64;

impl ProblemMemo {
    pub fn get(&self, sha256: &str) -> Option<Arc<Problem>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(sha256)
            .cloned()
    }

    pub fn insert(&self, sha256: &str, problem: Arc<Problem>) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= PROBLEM_MEMO_SIZE {
            map.clear();
        }
        map.insert(sha256.to_string(), problem);
    }
}

/// What evaluating one claim needs of the slot it runs on: its index (for the
/// logs), its judge (CPU and box id) and what every slot of the daemon shares.
pub(crate) struct JobContext<'a> {
    pub slot: usize,
    pub judge: &'a Arc<Judge>,
    pub client: &'a Client,
    pub cache: &'a Cache,
    pub metrics: &'a Arc<Metrics>,
    pub problems: &'a ProblemMemo,
}

/// A job or a trial, as far as evaluating it goes.
struct ClaimedWork {
    work: WorkRef,
    token: String,
    lease_seconds: u64,
    package: PackageRef,
    time_limit: Option<f64>,
    language: String,
    files: Vec<SubmissionFile>,
}

impl From<Claim> for ClaimedWork {
    fn from(claim: Claim) -> Self {
        match claim {
            Claim::Job(c) => ClaimedWork {
                work: WorkRef::Job(c.job_id),
                token: c.lease_token,
                lease_seconds: c.lease_seconds,
                package: c.package,
                time_limit: c.time_limit,
                language: c.language,
                files: c.files,
            },
            Claim::Trial(c) => ClaimedWork {
                work: WorkRef::Trial(c.trial_id),
                token: c.lease_token,
                lease_seconds: c.lease_seconds,
                package: c.package,
                time_limit: c.time_limit,
                language: c.language,
                files: c.files,
            },
        }
    }
}

enum Evaluated {
    Judged(Box<Outcome>, JudgeTime),
    Failed {
        reason: String,
        retryable: bool,
        message: String,
    },
    /// The Server gave the lease to someone else: drop the work.
    Lost,
    /// The daemon is stopping: hand the work back.
    Abandoned,
    /// This host's package cache has no room: the host's fault, not the job's.
    /// Handed back (a release gives the delivery back), and the slot pauses.
    StorageFull {
        message: String,
    },
}

/// How a piece of work ended, as far as the health of the slot goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotHealth {
    /// Judged, failed for a reason of the job's own, lost or released.
    Fine,
    /// The sandbox failed: this host is suspect (the slot's breaker counts it).
    SandboxFailed,
    /// The package cache's file system is full: released, claims pause.
    StorageFull,
}

impl Evaluated {
    fn package(err: &PackageError) -> Self {
        if err.is_storage_full() {
            return Evaluated::StorageFull {
                message: err.to_string(),
            };
        }
        Evaluated::Failed {
            reason: err.code().to_string(),
            retryable: err.retryable(),
            message: err.to_string(),
        }
    }
}

/// Evaluates one claim to the end. Answers whether it ended in a failure of this
/// host (the sandbox, a full cache) rather than of the job, for the slot's breaker.
pub(crate) async fn evaluate(
    ctx: &JobContext<'_>,
    claim: Claim,
    shutdown: &Shutdown,
) -> SlotHealth {
    let work = ClaimedWork::from(claim);
    let started = Instant::now();
    tracing::info!(work = %work.work, slot = ctx.slot, language = %work.language, package = %work.package.sha256, "claimed");
    let keeper = LeaseKeeper::start(
        ctx.client.clone(),
        Lease {
            work: work.work,
            token: work.token.clone(),
            seconds: work.lease_seconds,
        },
        Arc::clone(ctx.metrics),
    );
    let evaluated = run(ctx, &work, &keeper, shutdown).await;
    let lost = keeper.lost().clone();
    // The keeper stops before the report: a progress call racing the Result would
    // reach a job that is no longer Running and be refused as stale.
    keeper.finish().await;
    // A lease lost while the last test ran is still lost, whatever judging said.
    let evaluated = if lost.is_cancelled() {
        Evaluated::Lost
    } else {
        evaluated
    };
    let health = match &evaluated {
        Evaluated::Failed { reason, .. } if reason == crate::judge::reason::SANDBOX_FAILED => {
            SlotHealth::SandboxFailed
        }
        Evaluated::StorageFull { .. } => SlotHealth::StorageFull,
        _ => SlotHealth::Fine,
    };
    settle(ctx, &work, evaluated, shutdown).await;
    tracing::debug!(work = %work.work, seconds = started.elapsed().as_secs_f64(), "done with the work");
    health
}

/// A claim answered after the daemon began stopping: released at once, unjudged.
pub(crate) async fn hand_back(ctx: &JobContext<'_>, claim: Claim, shutdown: &Shutdown) {
    let work = ClaimedWork::from(claim);
    tracing::info!(work = %work.work, slot = ctx.slot, "claimed while stopping: releasing it");
    settle(ctx, &work, Evaluated::Abandoned, shutdown).await;
}

async fn run(
    ctx: &JobContext<'_>,
    work: &ClaimedWork,
    keeper: &LeaseKeeper,
    shutdown: &Shutdown,
) -> Evaluated {
    let prepared = tokio::select! {
        biased;
        () = keeper.lost().cancelled() => return Evaluated::Lost,
        () = shutdown.abandon().cancelled() => return Evaluated::Abandoned,
        prepared = prepare(ctx, work) => prepared,
    };
    let (entry, problem, submission) = match prepared {
        Ok(prepared) => prepared,
        Err(failed) => return failed,
    };
    let evaluated = judge(ctx, work, keeper, shutdown, problem, submission).await;
    drop(entry); // the package stayed pinned in the cache while it was judged
    evaluated
}

/// The package (cached, parsed once per SHA-256) and the submission's files.
async fn prepare(
    ctx: &JobContext<'_>,
    work: &ClaimedWork,
) -> Result<(CacheEntry, Arc<Problem>, Submission), Evaluated> {
    let url = ctx
        .client
        .package_url(&work.package)
        .map_err(|e| Evaluated::Failed {
            reason: crate::package::error::INVALID.to_string(),
            retryable: false,
            message: e.to_string(),
        })?;
    let entry = ctx
        .cache
        .get(&url, &work.package.sha256)
        .await
        .map_err(|e| Evaluated::package(&e))?;
    let problem = match ctx.problems.get(entry.sha256()) {
        Some(problem) => problem,
        None => {
            let root = entry.problem_root().map_err(|e| Evaluated::package(&e))?;
            let parsed = tokio::task::spawn_blocking(move || crate::package::parse(&root))
                .await
                .map_err(|e| Evaluated::Failed {
                    reason: crate::package::error::INVALID.to_string(),
                    retryable: true,
                    message: format!("parsing the package panicked: {e}"),
                })?
                .map_err(|e| Evaluated::package(&e))?;
            let parsed = Arc::new(parsed);
            ctx.problems.insert(entry.sha256(), Arc::clone(&parsed));
            parsed
        }
    };
    let submission = submission(work).map_err(|message| Evaluated::Failed {
        reason: SUBMISSION_INVALID.to_string(),
        retryable: false,
        message,
    })?;
    Ok((entry, problem, submission))
}

fn submission(work: &ClaimedWork) -> Result<Submission, String> {
    let files = work
        .files
        .iter()
        .map(|f| {
            let content = f.bytes().map_err(|e| e.to_string())?;
            if f.name.is_empty() || f.name.contains(['/', '\0']) || f.name == "." || f.name == ".."
            {
                return Err(format!("file name {:?} is not a plain file name", f.name));
            }
            Ok(SourceFile {
                name: f.name.clone(),
                content,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    if files.is_empty() {
        return Err("the submission has no files".to_string());
    }
    Ok(Submission {
        language: work.language.clone(),
        files,
    })
}

/// Judges on a blocking thread; a lost lease or an abandoning daemon cancels the
/// sandboxes through the judge's cancel handle (killed within one supervision tick).
async fn judge(
    ctx: &JobContext<'_>,
    work: &ClaimedWork,
    keeper: &LeaseKeeper,
    shutdown: &Shutdown,
    problem: Arc<Problem>,
    submission: Submission,
) -> Evaluated {
    let cancel = CancelHandle::new();
    let options = Options {
        time_limit: work.time_limit,
        cancel: cancel.clone(),
        run_all: matches!(work.work, WorkRef::Trial(_)),
    };
    let watcher = {
        let (lost, abandon, cancel) = (
            keeper.lost().clone(),
            shutdown.abandon().clone(),
            cancel.clone(),
        );
        tokio::spawn(async move {
            tokio::select! {
                () = lost.cancelled() => {}
                () = abandon.cancelled() => {}
            }
            cancel.cancel();
        })
    };
    let judge = Arc::clone(ctx.judge);
    let progress = keeper.progress_sender();
    let metrics = Arc::clone(ctx.metrics);
    let started = Instant::now();
    let judged = tokio::task::spawn_blocking(move || {
        judge.judge(&problem, &submission, &options, &mut |p| {
            metrics.test_run();
            progress.send_replace(Some((p.done as u64, p.total as u64)));
        })
    })
    .await;
    watcher.abort();
    let judging = started.elapsed();
    match judged {
        Ok(Ok(outcome)) => {
            let programs: f64 = outcome
                .details
                .iter()
                .filter(|d| !d.reused)
                .map(|d| d.wall_seconds)
                .sum();
            let time = JudgeTime {
                judging,
                programs: Duration::from_secs_f64(programs.max(0.0)),
            };
            Evaluated::Judged(Box::new(outcome), time)
        }
        Ok(Err(JudgeError::Cancelled)) if keeper.lost().is_cancelled() => Evaluated::Lost,
        Ok(Err(JudgeError::Cancelled)) => Evaluated::Abandoned,
        Ok(Err(err)) => Evaluated::Failed {
            reason: err.reason().to_string(),
            retryable: err.retryable(),
            message: err.to_string(),
        },
        Err(join) => Evaluated::Failed {
            reason: crate::judge::reason::SANDBOX_FAILED.to_string(),
            retryable: true,
            message: format!("the judge panicked: {join}"),
        },
    }
}

/// Tells the Server how it ended (`settle`), retrying while it is unreachable.
async fn settle(
    ctx: &JobContext<'_>,
    work: &ClaimedWork,
    evaluated: Evaluated,
    shutdown: &Shutdown,
) {
    let ending = match evaluated {
        Evaluated::Judged(outcome, time) => {
            ctx.metrics.judged(time);
            report(work, &outcome)
        }
        Evaluated::Failed {
            reason,
            retryable,
            message,
        } => Ending::Failed {
            reason,
            retryable,
            message,
        },
        Evaluated::Lost => Ending::Lost,
        Evaluated::Abandoned => Ending::Abandoned,
        Evaluated::StorageFull { message } => {
            tracing::error!(work = %work.work, slot = ctx.slot, %message, "the package cache is full: handing the work back");
            Ending::Abandoned
        }
    };
    settle::settle(
        ctx.client,
        ctx.metrics,
        work.work,
        &work.token,
        ending,
        shutdown,
    )
    .await;
}

/// A verdict as the Server takes it: attachments and the Result (jobs), timings
/// (trials).
fn report(work: &ClaimedWork, outcome: &Outcome) -> Ending {
    if let WorkRef::Trial(_) = work.work {
        return Ending::TrialResult(TrialResultBody {
            lease_token: work.token.clone(),
            timings: trial_timings(outcome),
        });
    }
    // A details list that does not serialise is left out (and logged), never
    // replaced by `[]`, which would claim the job had no tests.
    let details = json_attachment(&outcome.details)
        .map_err(|e| {
            tracing::error!(work = %work.work, error = %e, "details do not serialise; not attached");
        })
        .ok();
    let attachments = details
        .map(|d| ("details", d))
        .into_iter()
        .chain([("log", outcome.compile_log.clone().into_bytes())])
        .collect();
    let result = ResultBody {
        lease_token: work.token.clone(),
        score: outcome.score,
        max_score: outcome.max_score,
        verdict: outcome.verdict.as_str().to_string(),
        extra: None,
        props: None,
        runner_version: Some(crate::version::RUNNER_VERSION.to_string()),
        attempt: None,
    };
    Ending::JobResult {
        attachments,
        result: Box::new(result),
    }
}

/// A trial reports timings, not a verdict; one that does not compile reports a
/// single `compile` entry saying so.
fn trial_timings(outcome: &Outcome) -> Vec<Timing> {
    if outcome.verdict == Verdict::CompilationError {
        return vec![Timing {
            test: TRIAL_COMPILE_TEST.to_string(),
            status: "compile_error".to_string(),
            cpu_seconds: 0.0,
            wall_seconds: 0.0,
            memory_bytes: 0,
        }];
    }
    outcome
        .timings()
        .into_iter()
        .map(|t| Timing {
            test: t.test,
            status: t.status,
            cpu_seconds: t.cpu_seconds,
            wall_seconds: t.wall_seconds,
            memory_bytes: t.memory_bytes,
        })
        .collect()
}

/// An attachment's JSON bytes, or why `value` does not serialise.
fn json_attachment<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(value)
}

#[cfg(test)]
mod attachment_tests {
    #![allow(clippy::unwrap_used)]
    use super::json_attachment;

    /// A value whose serialisation fails, as a details list with a map keyed by
    /// something other than a string would.
    struct Unserialisable;

    impl serde::Serialize for Unserialisable {
        fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("not serialisable"))
        }
    }

    #[test]
    fn a_failing_serialisation_is_an_error_not_an_empty_list() {
        assert!(json_attachment(&Unserialisable).is_err());
        assert!(json_attachment(&[Unserialisable]).is_err());
        assert_eq!(json_attachment(&Vec::<u8>::new()).unwrap(), b"[]");
    }
}

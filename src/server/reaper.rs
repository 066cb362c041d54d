//! The reaper, in every `serve`: every `--reap-interval`, Running work whose lease
//! expired goes back to Queued (or Failed at the delivery cap), with the delivery
//! given back to claims nobody was heard from about. Several servers may reap one
//! database at once: each row is moved by exactly one of them (see
//! [`crate::server::db::lease`]).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::db::lease::{REQUEUE_BATCH, Requeued, Sweep};
use super::db::{DbError, WorkKind};
use super::state::AppState;
use super::storage::Storage;
use crate::protocol::JobState;

/// What one sweep did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reaped {
    pub jobs: Vec<Requeued>,
    pub trials: Vec<Requeued>,
}

/// One sweep at the clock's "now", in batches of [`REQUEUE_BATCH`] rows: each
/// batch is its own statement (claims interleave with a mass expiry instead of
/// waiting for all of it), and waiting claims are woken after each.
pub async fn reap_once(state: &AppState) -> Result<Reaped, DbError> {
    let now = state.now_ms();
    let mut reaped = Reaped::default();
    for work in [WorkKind::Job, WorkKind::Trial] {
        loop {
            let batch = state.db.requeue_batch(work, Sweep::ExpiredAt(now)).await?;
            let more = batch.len() >= usize::try_from(REQUEUE_BATCH).unwrap_or(usize::MAX);
            match work {
                WorkKind::Job => after_requeue(state, &batch, &[]).await,
                WorkKind::Trial => after_requeue(state, &[], &batch).await,
            }
            let into = match work {
                WorkKind::Job => &mut reaped.jobs,
                WorkKind::Trial => &mut reaped.trials,
            };
            into.extend(batch);
            if !more {
                break;
            }
            tokio::task::yield_now().await;
        }
    }
    let Reaped { jobs, trials } = &reaped;
    if !jobs.is_empty() || !trials.is_empty() {
        tracing::info!(
            jobs = jobs.len(),
            trials = trials.len(),
            "expired leases reaped"
        );
    }
    Ok(reaped)
}

/// Wakes waiting claims for requeued work and deletes the packages of trials that
/// ended Failed.
pub async fn after_requeue(state: &AppState, jobs: &[Requeued], trials: &[Requeued]) {
    let queued = |rows: &[Requeued]| rows.iter().any(|r| r.state == JobState::Queued);
    if queued(jobs) || queued(trials) {
        state.notify_queue();
    }
    for trial in trials.iter().filter(|t| t.state == JobState::Failed) {
        if let Some(file) = &trial.package_file {
            Storage::remove(&state.storage.trial_package_path(file)).await;
        }
    }
}

/// How often at most the reaper asks PostgreSQL to refresh planner statistics
/// (an `ANALYZE` under churn took 0.14–0.9 s; every tick was too often).
const PLANNER_STATS_EVERY: Duration = Duration::from_secs(60);

/// Sweeps every `interval` until `stop` is cancelled; errors are logged and the
/// next sweep tries again.
pub async fn run(state: AppState, interval: Duration, stop: CancellationToken) {
    let interval = interval.max(Duration::from_millis(10));
    let mut stats_due = tokio::time::Instant::now();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        if let Err(e) = reap_once(&state).await {
            tracing::warn!(error = %e, "reaper sweep failed; retrying next interval");
        }
        if tokio::time::Instant::now() >= stats_due {
            stats_due = tokio::time::Instant::now() + PLANNER_STATS_EVERY;
            if let Err(e) = state.db.refresh_planner_stats().await {
                tracing::warn!(error = %e, "refreshing planner statistics failed");
            }
        }
    }
}

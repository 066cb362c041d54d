//! The lease rules shared by jobs and trials: every lease-bearing statement, the
//! reaper's expiry sweep and the requeue of a revoked Runner's work.
//!
//! Every lease-bearing statement is built by [`fenced!`]: ONE conditional `UPDATE`
//! on `id + lease_token + runner_id + state = 'Running'`, an unexpired lease
//! (`lease_expires_ms > now`) and, when the call names one, the job's `attempt`
//! (no read before the update: the attempt is one more condition of it), that also sets `acknowledged_at` (first call only) and
//! bumps `row_version`. A `None` from it is turned into `409 lease.lost` by
//! [`Db::fenced`], nowhere else. The expiry is part of the fence so that a lease
//! past its `lease_expires_at` is dead at once, whether or not a reaper has swept it
//! yet: what a Runner sees never depends on when the last sweep ran.
//!
//! Going back to Queued always checks the delivery cap in the same statement: a row
//! whose deliveries (after any give-back) reached the cap goes to Failed with
//! `deliveries.exhausted` instead. `3` in the SQL is the contract's three free
//! refunds and three free releases.

use super::{Db, DbError, WorkKind, on_pool, parse_state};
use crate::protocol::JobState;
use crate::server::clock::Millis;

/// The fenced statement on `$table`: `$1` id, `$2` lease token, `$3` runner, `$4`
/// now, `$5` the attempt the call names (NULL: none); further arguments from `$6`.
macro_rules! fenced {
    ($table:tt, $set:literal, $returning:literal) => {
        concat!(
            "UPDATE ",
            $table,
            " SET acknowledged_ms = COALESCE(acknowledged_ms, $4), row_version = row_version + 1",
            $set,
            " WHERE id = $1 AND lease_token = $2 AND runner_id = $3 AND state = 'Running'",
            " AND lease_expires_ms > $4",
            $crate::server::db::lease::attempt_fence!($table),
            " RETURNING ",
            $returning
        )
    };
}
pub(crate) use fenced;

/// The attempt in the fence: a job's call that names an attempt holds only for
/// that attempt. Trials have none: their calls bind NULL.
macro_rules! attempt_fence {
    ("jobs") => {
        " AND ($5 IS NULL OR attempt = $5)"
    };
    ("trials") => {
        " AND $5 IS NULL"
    };
}
pub(crate) use attempt_fence;

/// The same statement for both tables, indexed by [`WorkKind`].
macro_rules! both_tables {
    ($set:literal, $returning:literal) => {
        [
            fenced!("jobs", $set, $returning),
            fenced!("trials", $set, $returning),
        ]
    };
}

const fn pick(statements: &[&'static str; 2], work: WorkKind) -> &'static str {
    match work {
        WorkKind::Job => statements[0],
        WorkKind::Trial => statements[1],
    }
}

/// Which lease a call presents.
#[derive(Debug, Clone, Copy)]
pub struct Fence<'a> {
    pub work: WorkKind,
    pub id: i64,
    pub lease_token: &'a str,
    pub runner_id: i64,
    /// The attempt the call names (`attempt` of its body), part of the fence:
    /// another attempt's job is `lease.lost`. Always `None` for a trial.
    pub attempt: Option<i64>,
}

const RENEW: [&str; 2] = both_tables!(
    ", lease_expires_ms = $4 + COALESCE($6, lease_seconds) * 1000",
    "lease_expires_ms"
);
const PROGRESS: [&str; 2] = both_tables!(
    ", lease_expires_ms = $4 + lease_seconds * 1000, progress_done = $6, progress_total = $7",
    "lease_expires_ms"
);
const TOUCH: [&str; 2] = both_tables!("", "id");
const RELEASE: [&str; 2] = both_tables!(
    ", state = CASE WHEN deliveries - (CASE WHEN releases < 3 THEN 1 ELSE 0 END) >= $6 \
        THEN 'Failed' ELSE 'Queued' END, \
     failure_reason = CASE WHEN deliveries - (CASE WHEN releases < 3 THEN 1 ELSE 0 END) >= $6 \
        THEN 'deliveries.exhausted' ELSE NULL END, \
     deliveries = deliveries - (CASE WHEN releases < 3 THEN 1 ELSE 0 END), \
     releases = releases + (CASE WHEN releases < 3 THEN 1 ELSE 0 END)",
    "state"
);
const FAILURE: [&str; 2] = both_tables!(
    ", state = CASE WHEN $7 = 1 AND deliveries < $6 THEN 'Queued' ELSE 'Failed' END, \
     failure_reason = CASE WHEN $7 = 1 AND deliveries < $6 THEN NULL \
        WHEN $7 = 1 THEN 'deliveries.exhausted' ELSE $8 END",
    "state"
);

/// At most `$3` Running rows of `$table` matching `$cond` and `$where`, in
/// `$order`: a sweep works in bounded batches, so a mass expiry never holds the
/// database (SQLite's one write lock above all) for more than one batch at a time.
/// The outer conditions are checked again on the row itself, so a row another
/// sweeper or a renewal changed in between is left alone.
macro_rules! batch_of {
    ($table:literal, $cond:literal, $where:literal, $order:literal) => {
        concat!(
            " WHERE id IN (SELECT id FROM ",
            $table,
            " WHERE state = 'Running' AND ",
            $cond,
            " AND ",
            $where,
            " ORDER BY ",
            $order,
            " LIMIT $3) AND state = 'Running' AND ",
            $cond,
            " AND ",
            $where
        )
    };
}

/// Back to Queued (or Failed at the cap) with the delivery given back: `$1` cap.
/// Claims nobody was heard from about, with refunds to spare.
macro_rules! requeue_refunded {
    ($table:literal, $where:literal, $order:literal, $returning:literal) => {
        concat!(
            "UPDATE ",
            $table,
            " SET refunds = refunds + 1, deliveries = deliveries - 1, \
              state = CASE WHEN deliveries - 1 >= $1 THEN 'Failed' ELSE 'Queued' END, \
              failure_reason = CASE WHEN deliveries - 1 >= $1 THEN 'deliveries.exhausted' ELSE NULL END, \
              row_version = row_version + 1",
            batch_of!($table, "acknowledged_ms IS NULL AND refunds < 3", $where, $order),
            " RETURNING ",
            $returning
        )
    };
}

/// Back to Queued (or Failed at the cap), the delivery spent: `$1` cap. Never a
/// row the refunding statement would take.
macro_rules! requeue_spent {
    ($table:literal, $where:literal, $order:literal, $returning:literal) => {
        concat!(
            "UPDATE ",
            $table,
            " SET state = CASE WHEN deliveries >= $1 THEN 'Failed' ELSE 'Queued' END, \
              failure_reason = CASE WHEN deliveries >= $1 THEN 'deliveries.exhausted' ELSE NULL END, \
              row_version = row_version + 1",
            batch_of!(
                $table,
                "NOT (acknowledged_ms IS NULL AND refunds < 3)",
                $where,
                $order
            ),
            " RETURNING ",
            $returning
        )
    };
}

/// `[refunded, spent]` statements for one condition on both tables: `$1` cap,
/// `$2` the condition's argument, `$3` the batch size.
macro_rules! requeue_statements {
    ($where:literal, $order:literal) => {
        [
            [
                requeue_refunded!("jobs", $where, $order, "id, state, NULL AS package_file"),
                requeue_spent!("jobs", $where, $order, "id, state, NULL AS package_file"),
            ],
            [
                requeue_refunded!("trials", $where, $order, "id, state, package_file"),
                requeue_spent!("trials", $where, $order, "id, state, package_file"),
            ],
        ]
    };
}

/// The reaper's sweep reads `jobs_lease_expiry` (Running rows by expiry) only as
/// far as what expired; a revocation's reads `jobs_running_by_runner`.
const REQUEUE_EXPIRED: [[&str; 2]; 2] =
    requeue_statements!("lease_expires_ms <= $2", "lease_expires_ms");
const REQUEUE_OF_RUNNER: [[&str; 2]; 2] = requeue_statements!("runner_id = $2", "id");

/// Rows one requeue statement moves at most.
pub const REQUEUE_BATCH: i64 = 500;

/// One row the reaper (or a revocation) put back in the queue or failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Requeued {
    pub id: i64,
    pub state: JobState,
    pub refunded: bool,
    /// A trial's package file, to delete when the trial ended (Failed).
    pub package_file: Option<String>,
}

/// What a requeue sweep matches.
#[derive(Debug, Clone, Copy)]
pub enum Sweep {
    /// Running with `lease_expires_at <= now` (the reaper).
    ExpiredAt(Millis),
    /// Running on this runner (its key was revoked).
    OfRunner(i64),
}

impl Db {
    /// Renews by `seconds`, else by the lease's own `lease_seconds`.
    pub async fn renew_lease(
        &self,
        fence: Fence<'_>,
        now: Millis,
        seconds: Option<i64>,
    ) -> Result<Millis, DbError> {
        let sql = pick(&RENEW, fence.work);
        let row: Option<i64> = on_pool!(self, pool => sqlx::query_scalar(sql)
            .bind(fence.id).bind(fence.lease_token).bind(fence.runner_id).bind(now)
            .bind(fence.attempt)
            .bind(seconds)
            .fetch_optional(pool).await)?;
        self.fenced(fence, row).await
    }

    /// Stores progress and renews by the lease's own `lease_seconds`.
    pub async fn record_progress(
        &self,
        fence: Fence<'_>,
        now: Millis,
        done: i64,
        total: i64,
    ) -> Result<Millis, DbError> {
        let sql = pick(&PROGRESS, fence.work);
        let row: Option<i64> = on_pool!(self, pool => sqlx::query_scalar(sql)
            .bind(fence.id).bind(fence.lease_token).bind(fence.runner_id).bind(now)
            .bind(fence.attempt)
            .bind(done).bind(total)
            .fetch_optional(pool).await)?;
        self.fenced(fence, row).await
    }

    /// The Runner hands the work back: Queued, the delivery given back for the
    /// first three releases; Failed when the cap is reached without one.
    pub async fn release(&self, fence: Fence<'_>, now: Millis) -> Result<JobState, DbError> {
        let sql = pick(&RELEASE, fence.work);
        let row: Option<String> = on_pool!(self, pool => sqlx::query_scalar(sql)
            .bind(fence.id).bind(fence.lease_token).bind(fence.runner_id).bind(now)
            .bind(fence.attempt)
            .bind(self.delivery_cap())
            .fetch_optional(pool).await)?;
        let state = parse_state(&self.fenced(fence, row).await?)?;
        let counters = self.counters(fence.work);
        counters.releases.inc();
        if state == JobState::Failed {
            counters.deliveries_exhausted.inc();
        }
        Ok(state)
    }

    /// An infrastructure failure: Queued again when retryable and under the cap,
    /// else Failed (`deliveries.exhausted` at the cap, else the Runner's reason).
    pub async fn record_failure(
        &self,
        fence: Fence<'_>,
        now: Millis,
        failure_reason: &str,
        retryable: bool,
    ) -> Result<JobState, DbError> {
        let sql = pick(&FAILURE, fence.work);
        let row: Option<String> = on_pool!(self, pool => sqlx::query_scalar(sql)
            .bind(fence.id).bind(fence.lease_token).bind(fence.runner_id).bind(now)
            .bind(fence.attempt)
            .bind(self.delivery_cap()).bind(i64::from(retryable)).bind(failure_reason)
            .fetch_optional(pool).await)?;
        let state = parse_state(&self.fenced(fence, row).await?)?;
        if state == JobState::Failed && retryable {
            self.counters(fence.work).deliveries_exhausted.inc();
        }
        Ok(state)
    }

    /// Requeues (or fails at the cap) every Running row the sweep matches, giving
    /// the delivery back to unacknowledged claims with refunds to spare: batch
    /// after batch of [`REQUEUE_BATCH`] until none is left.
    pub async fn requeue(&self, work: WorkKind, sweep: Sweep) -> Result<Vec<Requeued>, DbError> {
        let mut out = Vec::new();
        loop {
            let batch = self.requeue_batch(work, sweep).await?;
            let more = batch.len() >= usize::try_from(REQUEUE_BATCH).unwrap_or(usize::MAX);
            out.extend(batch);
            if !more {
                return Ok(out);
            }
        }
    }

    /// One bounded step of [`Db::requeue`]: at most [`REQUEUE_BATCH`] rows of
    /// each kind (refunded, spent); fewer than that of both means the sweep is
    /// done. Each statement is safe against a concurrent sweep on another server:
    /// the row lock makes the second sweeper re-check the row and skip it.
    pub async fn requeue_batch(
        &self,
        work: WorkKind,
        sweep: Sweep,
    ) -> Result<Vec<Requeued>, DbError> {
        let (statements, arg) = match sweep {
            Sweep::ExpiredAt(now) => (&REQUEUE_EXPIRED, now),
            Sweep::OfRunner(runner_id) => (&REQUEUE_OF_RUNNER, runner_id),
        };
        let statements = match work {
            WorkKind::Job => statements[0],
            WorkKind::Trial => statements[1],
        };
        let mut out = Vec::new();
        for (sql, refunded) in [(statements[0], true), (statements[1], false)] {
            let rows: Vec<(i64, String, Option<String>)> = on_pool!(self, pool => sqlx::query_as(sql)
                .bind(self.delivery_cap()).bind(arg).bind(REQUEUE_BATCH)
                .fetch_all(pool).await)?;
            for (id, state, package_file) in rows {
                out.push(Requeued {
                    id,
                    state: parse_state(&state)?,
                    refunded,
                    package_file,
                });
            }
        }
        self.count_requeued(work, sweep, &out);
        Ok(out)
    }

    fn count_requeued(&self, work: WorkKind, sweep: Sweep, rows: &[Requeued]) {
        let counters = self.counters(work);
        if matches!(sweep, Sweep::ExpiredAt(_)) {
            counters.leases_expired.add(rows.len() as u64);
        }
        counters
            .refunds
            .add(rows.iter().filter(|r| r.refunded).count() as u64);
        counters
            .deliveries_exhausted
            .add(rows.iter().filter(|r| r.state == JobState::Failed).count() as u64);
    }
}

/// Touches the lease inside a caller's transaction (attachments): acknowledges and
/// bumps `row_version`, so the row stays locked until the file is in place.
pub(crate) const TOUCH_JOB: &str = TOUCH[0];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::codes::reason;

    #[test]
    fn statements_name_the_contract_reason_and_fence() {
        for sql in RELEASE
            .iter()
            .chain(&FAILURE)
            .chain(REQUEUE_EXPIRED.iter().flatten())
        {
            assert!(sql.contains(reason::DELIVERIES_EXHAUSTED), "{sql}");
        }
        for sql in RENEW
            .iter()
            .chain(&PROGRESS)
            .chain(&TOUCH)
            .chain(&RELEASE)
            .chain(&FAILURE)
        {
            assert!(
                sql.contains(
                    "WHERE id = $1 AND lease_token = $2 AND runner_id = $3 AND state = 'Running' \
                     AND lease_expires_ms > $4 AND"
                ),
                "{sql}"
            );
            assert!(sql.contains("row_version = row_version + 1"), "{sql}");
        }
        // The attempt is in the one conditional update, not a read before it.
        for [jobs, trials] in [RENEW, PROGRESS, TOUCH, RELEASE, FAILURE] {
            assert!(
                jobs.contains("AND ($5 IS NULL OR attempt = $5) RETURNING"),
                "{jobs}"
            );
            assert!(trials.contains("AND $5 IS NULL RETURNING"), "{trials}");
        }
        for sql in [
            super::super::jobs::COMPLETE,
            super::super::jobs::COMPLETE_WITH_RESULT_PG,
        ] {
            assert!(
                sql.contains("AND ($5 IS NULL OR attempt = $5) RETURNING"),
                "{sql}"
            );
        }
    }
}

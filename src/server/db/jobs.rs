//! The life of an EvaluationJob beyond the shared lease rules and the claim
//! ([`super::claim`]): the result (Completed + Result row under the fence),
//! attachments, cancel and rejudge.

use sqlx::postgres::PgPool;
use sqlx::sqlite::SqlitePool;

use super::lease::{Fence, TOUCH_JOB, fenced};
use super::records::{INSERT_JOB, LATEST_VERSION};
use super::{BeginWrite as _, Db, DbError, Pool, is_unique_violation, on_pool, parse_state};
use crate::server::clock::Millis;

/// A Result as stored; `extra`/`props` are JSON text or NULL.
#[derive(Debug, Clone)]
pub struct NewResult<'a> {
    pub score: f64,
    pub max_score: f64,
    pub verdict: &'a str,
    pub extra: Option<&'a str>,
    pub props: Option<&'a str>,
    pub runner_version: Option<&'a str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultOutcome {
    Stored,
    /// The same lease token already completed this job: an idempotent resend.
    AlreadyStored,
}

pub(super) const COMPLETE: &str = fenced!("jobs", ", state = 'Completed'", "problem_version_id");
/// SQLite, after `COMPLETE` in the same `BEGIN IMMEDIATE` transaction.
const INSERT_RESULT: &str = "INSERT INTO results (evaluation_job_id, problem_version_id, \
     score, max_score, verdict, extra, props, runner_version, created_ms) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
/// PostgreSQL: the fenced update and the Result insert as one statement; the
/// insert sees only the row the fence let through.
pub(super) const COMPLETE_WITH_RESULT_PG: &str = concat!(
    "WITH done AS (",
    fenced!("jobs", ", state = 'Completed'", "id, problem_version_id"),
    ") INSERT INTO results (evaluation_job_id, problem_version_id, \
     score, max_score, verdict, extra, props, runner_version, created_ms) \
     SELECT id, problem_version_id, $6, $7, $8, $9, $10, $11, $4 FROM done \
     RETURNING evaluation_job_id"
);
/// A resend is recognised by the token the job was completed under: only a result
/// call moves a job to Completed, and a Completed job never gets a new token.
const COMPLETED_BY: &str = "SELECT id FROM jobs \
     WHERE id = $1 AND lease_token = $2 AND runner_id = $3 AND state = 'Completed' \
     AND ($4 IS NULL OR attempt = $4)";

const UPSERT_FILE: &str = "INSERT INTO job_files (job_id, name, size, updated_ms) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (job_id, name) \
     DO UPDATE SET size = excluded.size, updated_ms = excluded.updated_ms";

const CANCEL: &str = "UPDATE jobs SET state = 'Cancelled', row_version = row_version + 1 \
     WHERE id = $1 AND state IN ('Queued', 'Running') RETURNING id";
const STATE_OF: &str = "SELECT state FROM jobs WHERE id = $1";

const LOCK_SUBMISSION_SQLITE: &str = "SELECT problem_id, language FROM submissions WHERE id = $1";
const LOCK_SUBMISSION_PG: &str =
    "SELECT problem_id, language FROM submissions WHERE id = $1 FOR NO KEY UPDATE";
/// The submission's live attempts, locked in id order before any of them changes:
/// the order in which a sibling's end (its row, then its waiter's, by the trigger)
/// takes them, so a rejudge and an ending never deadlock, and an attempt cannot end
/// between this rejudge reading it Running and its new attempt being created
/// `blocked` behind it. SQLite's write lock already does this.
const LOCK_LIVE_SQLITE: &str =
    "SELECT id FROM jobs WHERE submission_id = $1 AND state IN ('Queued', 'Running') ORDER BY id";
const LOCK_LIVE_PG: &str = "SELECT id FROM jobs \
     WHERE submission_id = $1 AND state IN ('Queued', 'Running') ORDER BY id FOR UPDATE";
/// After the Queued siblings are superseded, the one still live (Running), if any.
const LIVE_SIBLING: &str =
    "SELECT MAX(id) FROM jobs WHERE submission_id = $1 AND state IN ('Queued', 'Running')";
const LATEST_ATTEMPT: &str = "SELECT MAX(attempt) FROM jobs WHERE submission_id = $1";
const SUPERSEDE_QUEUED: &str = "UPDATE jobs SET state = 'Superseded', \
     row_version = row_version + 1 WHERE submission_id = $1 AND state = 'Queued'";

/// The rejudge transaction, with the backend's way of locking the submission row.
macro_rules! rejudge_in {
    ($pool:expr, $lock:expr, $lock_live:expr, $submission_id:expr, $expected:expr, $now:expr) => {
        async {
            let mut tx = $pool.begin_write().await?;
            let submission: Option<(i64, String)> = sqlx::query_as($lock)
                .bind($submission_id)
                .fetch_optional(&mut *tx)
                .await?;
            let Some((problem_id, language)) = submission else {
                return Err(DbError::NotFound {
                    what: "submission",
                    id: $submission_id,
                });
            };
            let latest: Option<i64> = sqlx::query_scalar(LATEST_ATTEMPT)
                .bind($submission_id)
                .fetch_one(&mut *tx)
                .await?;
            let latest = latest.unwrap_or(0);
            if let Some(expected) = $expected {
                if expected != latest {
                    return Err(DbError::AttemptConflict {
                        submission_id: $submission_id,
                        expected,
                        latest,
                    });
                }
            }
            let _live: Vec<i64> = sqlx::query_scalar($lock_live)
                .bind($submission_id)
                .fetch_all(&mut *tx)
                .await?;
            sqlx::query(SUPERSEDE_QUEUED)
                .bind($submission_id)
                .execute(&mut *tx)
                .await?;
            let waits_for: Option<i64> = sqlx::query_scalar(LIVE_SIBLING)
                .bind($submission_id)
                .fetch_one(&mut *tx)
                .await?;
            let version_id: i64 = sqlx::query_scalar(LATEST_VERSION)
                .bind(problem_id)
                .fetch_one(&mut *tx)
                .await?;
            let attempt = latest + 1;
            let job_id: i64 = sqlx::query_scalar(INSERT_JOB)
                .bind($submission_id)
                .bind(attempt)
                .bind(version_id)
                .bind(language)
                .bind(waits_for)
                .bind($now)
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok::<_, DbError>((job_id, attempt))
        }
        .await
    };
}

impl Db {
    /// Completed + the Result row, both conditioned on the lease: one statement on
    /// PostgreSQL, one write transaction on SQLite. A call that touched nothing is
    /// a resend when this very token completed the job.
    pub async fn complete_job(
        &self,
        fence: Fence<'_>,
        now: Millis,
        result: &NewResult<'_>,
    ) -> Result<ResultOutcome, DbError> {
        let stored = match self.pool() {
            Pool::Sqlite(pool) => complete_job_sqlite(pool, fence, now, result).await?,
            Pool::Postgres(pool) => complete_job_pg(pool, fence, now, result).await?,
        };
        if stored {
            return Ok(ResultOutcome::Stored);
        }
        let resent: Option<i64> = on_pool!(self, pool => sqlx::query_scalar(COMPLETED_BY)
            .bind(fence.id).bind(fence.lease_token).bind(fence.runner_id).bind(fence.attempt)
            .fetch_optional(pool).await)?;
        match resent {
            Some(_) if !self.runner_revoked(fence.runner_id).await? => {
                Ok(ResultOutcome::AlreadyStored)
            }
            _ => self.fenced(fence, None).await,
        }
    }

    /// Attaches a file under the fence: the row stays locked while `place` puts the
    /// file in its final place, so a re-claim cannot slip in between the check and
    /// the rename.
    pub async fn attach_job_file(
        &self,
        fence: Fence<'_>,
        now: Millis,
        name: &str,
        size: i64,
        place: impl FnOnce() -> std::io::Result<()>,
    ) -> Result<(), DbError> {
        let held: Option<()> = on_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let touched: Option<i64> = sqlx::query_scalar(TOUCH_JOB)
                .bind(fence.id).bind(fence.lease_token).bind(fence.runner_id).bind(now)
                .bind(fence.attempt)
                .fetch_optional(&mut *tx).await?;
            if touched.is_some() {
                place().map_err(|source| DbError::FilePlacement { source })?;
                sqlx::query(UPSERT_FILE)
                    .bind(fence.id).bind(name).bind(size).bind(now)
                    .execute(&mut *tx).await?;
                tx.commit().await?;
            }
            touched.map(|_| ())
        });
        self.fenced(fence, held).await
    }

    /// Queued or Running → Cancelled; a finished attempt answers `AttemptFinished`.
    pub async fn cancel_job(&self, job_id: i64) -> Result<(), DbError> {
        let done: Option<i64> = on_pool!(self, pool => sqlx::query_scalar(CANCEL)
            .bind(job_id).fetch_optional(pool).await)?;
        if done.is_some() {
            return Ok(());
        }
        let state: Option<String> = on_pool!(self, pool => sqlx::query_scalar(STATE_OF)
            .bind(job_id).fetch_optional(pool).await)?;
        match state {
            Some(state) => Err(DbError::AttemptFinished {
                job_id,
                state: parse_state(&state)?,
            }),
            None => Err(DbError::NotFound {
                what: "job",
                id: job_id,
            }),
        }
    }

    /// A new attempt on the problem's latest version, superseding a Queued sibling;
    /// a Running one is left to finish. `expected_attempt` is a compare-and-set on
    /// the latest attempt. Returns `(job_id, attempt)`.
    pub async fn rejudge(
        &self,
        submission_id: i64,
        expected_attempt: Option<i64>,
        now: Millis,
    ) -> Result<(i64, i64), DbError> {
        let outcome = match self.pool() {
            Pool::Sqlite(pool) => {
                rejudge_in!(
                    pool,
                    LOCK_SUBMISSION_SQLITE,
                    LOCK_LIVE_SQLITE,
                    submission_id,
                    expected_attempt,
                    now
                )
            }
            Pool::Postgres(pool) => {
                rejudge_in!(
                    pool,
                    LOCK_SUBMISSION_PG,
                    LOCK_LIVE_PG,
                    submission_id,
                    expected_attempt,
                    now
                )
            }
        };
        match outcome {
            // Another rejudge took the same attempt number first: the conflict
            // names the attempt that is now the latest, read after it committed.
            Err(DbError::Sql(e)) if is_unique_violation(&e) => {
                let latest: Option<i64> = on_pool!(self, pool => sqlx::query_scalar(LATEST_ATTEMPT)
                    .bind(submission_id)
                    .fetch_one(pool).await)?;
                Err(DbError::AttemptConflict {
                    submission_id,
                    expected: expected_attempt.unwrap_or(0),
                    latest: latest.unwrap_or(0),
                })
            }
            other => other,
        }
    }
}

async fn complete_job_sqlite(
    pool: &SqlitePool,
    fence: Fence<'_>,
    now: Millis,
    result: &NewResult<'_>,
) -> Result<bool, DbError> {
    let mut tx = pool.begin_write().await?;
    let version: Option<i64> = sqlx::query_scalar(COMPLETE)
        .bind(fence.id)
        .bind(fence.lease_token)
        .bind(fence.runner_id)
        .bind(now)
        .bind(fence.attempt)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(version_id) = version else {
        return Ok(false);
    };
    sqlx::query(INSERT_RESULT)
        .bind(fence.id)
        .bind(version_id)
        .bind(result.score)
        .bind(result.max_score)
        .bind(result.verdict)
        .bind(result.extra)
        .bind(result.props)
        .bind(result.runner_version)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(true)
}

async fn complete_job_pg(
    pool: &PgPool,
    fence: Fence<'_>,
    now: Millis,
    result: &NewResult<'_>,
) -> Result<bool, DbError> {
    let stored: Option<i64> = sqlx::query_scalar(COMPLETE_WITH_RESULT_PG)
        .bind(fence.id)
        .bind(fence.lease_token)
        .bind(fence.runner_id)
        .bind(now)
        .bind(fence.attempt)
        .bind(result.score)
        .bind(result.max_score)
        .bind(result.verdict)
        .bind(result.extra)
        .bind(result.props)
        .bind(result.runner_version)
        .fetch_optional(pool)
        .await?;
    Ok(stored.is_some())
}

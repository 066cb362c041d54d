//! The life of an EvaluationJob beyond the shared lease rules: the claim with its
//! four filters, the result (Completed + Result row under the fence), attachments,
//! cancel and rejudge.

use sqlx::FromRow;
use sqlx::postgres::PgPool;
use sqlx::sqlite::SqlitePool;

use super::lease::{Fence, TOUCH_JOB, fenced};
use super::records::{INSERT_JOB, LATEST_VERSION};
use super::{BeginWrite as _, Db, DbError, Pool, Work, is_unique_violation, on_pool, parse_state};
use crate::server::clock::Millis;

/// What a claim hands out, besides the lease token and duration the caller chose.
#[derive(Debug, Clone, FromRow)]
pub struct ClaimedJob {
    pub id: i64,
    pub submission_id: i64,
    pub attempt: i64,
    pub problem_version_id: i64,
    pub lease_expires_ms: i64,
    pub language: String,
    /// The submission's files as the wire JSON array.
    pub files: String,
    pub sha256: String,
    pub size: i64,
    pub time_limit: Option<f64>,
}

/// The lease a claim grants.
#[derive(Debug, Clone, Copy)]
pub struct NewLease<'a> {
    pub runner_id: i64,
    pub lease_token: &'a str,
    pub lease_seconds: i64,
    pub now: Millis,
    pub expires_ms: Millis,
}

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

/// Columns of a [`ClaimedJob`], read from the row the claim just updated.
macro_rules! claim_returning {
    () => {
        " RETURNING id, submission_id, attempt, problem_version_id, lease_expires_ms, \
         (SELECT s.language FROM submissions s WHERE s.id = jobs.submission_id) AS language, \
         (SELECT s.files FROM submissions s WHERE s.id = jobs.submission_id) AS files, \
         (SELECT v.sha256 FROM problem_versions v WHERE v.id = jobs.problem_version_id) AS sha256, \
         (SELECT v.size FROM problem_versions v WHERE v.id = jobs.problem_version_id) AS size, \
         (SELECT v.time_limit FROM problem_versions v WHERE v.id = jobs.problem_version_id) AS time_limit"
    };
}

/// `$1` runner, `$2` token, `$3` lease seconds, `$4` expiry. Every claim:
/// `deliveries += 1`, a new token, `acknowledged_at = null`; no `row_version` bump.
macro_rules! claim_update {
    () => {
        "UPDATE jobs SET state = 'Running', runner_id = $1, lease_token = $2, lease_seconds = $3, \
         lease_expires_ms = $4, deliveries = deliveries + 1, acknowledged_ms = NULL, \
         progress_done = NULL, progress_total = NULL "
    };
}

/// Filter (4): no other attempt of the same submission is Running.
macro_rules! no_running_sibling {
    ($job:literal) => {
        concat!(
            "NOT EXISTS (SELECT 1 FROM jobs r WHERE r.submission_id = ",
            $job,
            ".submission_id AND r.state = 'Running')"
        )
    };
}

/// Filter (3): the claiming Runner's key is not revoked.
const RUNNER_ACTIVE_SQLITE: &str = "SELECT id FROM runners WHERE id = $1 AND revoked_ms IS NULL";
/// On PostgreSQL the runner row is share-locked, so a revocation (which updates it)
/// waits for this claim to commit and then requeues what it claimed.
const RUNNER_ACTIVE_PG: &str =
    "SELECT id FROM runners WHERE id = $1 AND revoked_ms IS NULL FOR SHARE";

/// SQLite: the whole claim is one statement inside `BEGIN IMMEDIATE`, which holds
/// the database's single write lock, so the filters cannot change under it.
/// Filters (1) Queued, (2) language in `$5` (a JSON array), (4) no running sibling.
const CLAIM_SQLITE: &str = concat!(
    claim_update!(),
    "WHERE id = (SELECT j.id FROM jobs j JOIN submissions s ON s.id = j.submission_id \
     WHERE j.state = 'Queued' AND s.language IN (SELECT value FROM json_each($5)) AND ",
    no_running_sibling!("j"),
    " ORDER BY j.id LIMIT 1)",
    claim_returning!()
);

/// PostgreSQL, step 1: lock the oldest claimable job AND its submission, skipping
/// rows other claimers hold. Locking the submission serialises claims of sibling
/// attempts (and rejudges), which filter (4) needs: its NOT EXISTS reads this
/// statement's snapshot, blind to a sibling claimed a moment ago.
const CLAIM_PICK_PG: &str = concat!(
    "SELECT j.id FROM jobs j JOIN submissions s ON s.id = j.submission_id \
     WHERE j.state = 'Queued' AND s.language = ANY($1) AND ",
    no_running_sibling!("j"),
    " ORDER BY j.id LIMIT 1 FOR NO KEY UPDATE OF j, s SKIP LOCKED"
);

/// PostgreSQL, step 2: with both locks held, a fresh snapshot re-checks filter (4)
/// and takes the job. `$5` the picked job.
const CLAIM_TAKE_PG: &str = concat!(
    claim_update!(),
    "WHERE id = $5 AND state = 'Queued' AND ",
    no_running_sibling!("jobs"),
    claim_returning!()
);

/// How often a PostgreSQL claim retries when a sibling won the race for its pick.
const CLAIM_RETRIES: usize = 8;

const COMPLETE: &str = fenced!("jobs", ", state = 'Completed'", "problem_version_id");
const INSERT_RESULT: &str = "INSERT INTO results (evaluation_job_id, problem_version_id, \
     score, max_score, verdict, extra, props, runner_version, created_ms) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
/// A resend is recognised by the token the job was completed under: only a result
/// call moves a job to Completed, and a Completed job never gets a new token.
const COMPLETED_BY: &str = "SELECT id FROM jobs \
     WHERE id = $1 AND lease_token = $2 AND runner_id = $3 AND state = 'Completed'";

const UPSERT_FILE: &str = "INSERT INTO job_files (job_id, name, size, updated_ms) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (job_id, name) \
     DO UPDATE SET size = excluded.size, updated_ms = excluded.updated_ms";

const CANCEL: &str = "UPDATE jobs SET state = 'Cancelled', row_version = row_version + 1 \
     WHERE id = $1 AND state IN ('Queued', 'Running') RETURNING id";
const STATE_OF: &str = "SELECT state FROM jobs WHERE id = $1";

const LOCK_SUBMISSION_SQLITE: &str = "SELECT problem_id FROM submissions WHERE id = $1";
const LOCK_SUBMISSION_PG: &str =
    "SELECT problem_id FROM submissions WHERE id = $1 FOR NO KEY UPDATE";
const LATEST_ATTEMPT: &str = "SELECT MAX(attempt) FROM jobs WHERE submission_id = $1";
const SUPERSEDE_QUEUED: &str = "UPDATE jobs SET state = 'Superseded', \
     row_version = row_version + 1 WHERE submission_id = $1 AND state = 'Queued'";

/// The rejudge transaction, with the backend's way of locking the submission row.
macro_rules! rejudge_in {
    ($pool:expr, $lock:expr, $submission_id:expr, $expected:expr, $now:expr) => {
        async {
            let mut tx = $pool.begin_write().await?;
            let problem_id: Option<i64> = sqlx::query_scalar($lock)
                .bind($submission_id)
                .fetch_optional(&mut *tx)
                .await?;
            let Some(problem_id) = problem_id else {
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
            sqlx::query(SUPERSEDE_QUEUED)
                .bind($submission_id)
                .execute(&mut *tx)
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
    /// Claims the oldest claimable job for this Runner, or `None`.
    pub async fn claim_job(
        &self,
        languages: &[String],
        lease: NewLease<'_>,
    ) -> Result<Option<ClaimedJob>, DbError> {
        let claimed = match self.pool() {
            Pool::Sqlite(pool) => claim_job_sqlite(pool, languages, lease).await?,
            Pool::Postgres(pool) => claim_job_pg(pool, languages, lease).await?,
        };
        if claimed.is_some() {
            self.counters(Work::Job).claims.inc();
        }
        Ok(claimed)
    }

    /// Completed + the Result row, in one transaction conditioned on the lease.
    pub async fn complete_job(
        &self,
        fence: Fence<'_>,
        now: Millis,
        result: &NewResult<'_>,
    ) -> Result<ResultOutcome, DbError> {
        let stored: Option<ResultOutcome> = on_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let version: Option<i64> = sqlx::query_scalar(COMPLETE)
                .bind(fence.id).bind(fence.lease_token).bind(fence.runner_id).bind(now)
                .fetch_optional(&mut *tx).await?;
            match version {
                Some(version_id) => {
                    sqlx::query(INSERT_RESULT)
                        .bind(fence.id).bind(version_id).bind(result.score)
                        .bind(result.max_score).bind(result.verdict).bind(result.extra)
                        .bind(result.props).bind(result.runner_version).bind(now)
                        .execute(&mut *tx).await?;
                    tx.commit().await?;
                    Some(ResultOutcome::Stored)
                }
                None => {
                    let resent: Option<i64> = sqlx::query_scalar(COMPLETED_BY)
                        .bind(fence.id).bind(fence.lease_token).bind(fence.runner_id)
                        .fetch_optional(&mut *tx).await?;
                    tx.rollback().await?;
                    resent.map(|_| ResultOutcome::AlreadyStored)
                }
            }
        });
        stored.ok_or_else(|| self.lease_lost(Work::Job))
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
        let held: bool = on_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let touched: Option<i64> = sqlx::query_scalar(TOUCH_JOB)
                .bind(fence.id).bind(fence.lease_token).bind(fence.runner_id).bind(now)
                .fetch_optional(&mut *tx).await?;
            if touched.is_some() {
                place().map_err(|source| DbError::FilePlacement { source })?;
                sqlx::query(UPSERT_FILE)
                    .bind(fence.id).bind(name).bind(size).bind(now)
                    .execute(&mut *tx).await?;
                tx.commit().await?;
            }
            touched.is_some()
        });
        if held {
            Ok(())
        } else {
            Err(self.lease_lost(Work::Job))
        }
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
                    submission_id,
                    expected_attempt,
                    now
                )
            }
            Pool::Postgres(pool) => {
                rejudge_in!(
                    pool,
                    LOCK_SUBMISSION_PG,
                    submission_id,
                    expected_attempt,
                    now
                )
            }
        };
        outcome.map_err(|err| match err {
            DbError::Sql(e) if is_unique_violation(&e) => DbError::AttemptConflict {
                submission_id,
                expected: expected_attempt.unwrap_or(0),
                latest: -1,
            },
            other => other,
        })
    }
}

async fn claim_job_sqlite(
    pool: &SqlitePool,
    languages: &[String],
    lease: NewLease<'_>,
) -> Result<Option<ClaimedJob>, DbError> {
    let languages_json = serde_json::to_string(languages).map_err(|e| DbError::Corrupt {
        detail: format!("languages do not serialise: {e}"),
    })?;
    let mut tx = pool.begin_write().await?;
    let active: Option<i64> = sqlx::query_scalar(RUNNER_ACTIVE_SQLITE)
        .bind(lease.runner_id)
        .fetch_optional(&mut *tx)
        .await?;
    if active.is_none() {
        return Err(DbError::RunnerRevoked {
            runner_id: lease.runner_id,
        });
    }
    let claimed: Option<ClaimedJob> = sqlx::query_as(CLAIM_SQLITE)
        .bind(lease.runner_id)
        .bind(lease.lease_token)
        .bind(lease.lease_seconds)
        .bind(lease.expires_ms)
        .bind(languages_json)
        .fetch_optional(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(claimed)
}

async fn claim_job_pg(
    pool: &PgPool,
    languages: &[String],
    lease: NewLease<'_>,
) -> Result<Option<ClaimedJob>, DbError> {
    for _ in 0..CLAIM_RETRIES {
        let mut tx = pool.begin_write().await?;
        let active: Option<i64> = sqlx::query_scalar(RUNNER_ACTIVE_PG)
            .bind(lease.runner_id)
            .fetch_optional(&mut *tx)
            .await?;
        if active.is_none() {
            return Err(DbError::RunnerRevoked {
                runner_id: lease.runner_id,
            });
        }
        let picked: Option<i64> = sqlx::query_scalar(CLAIM_PICK_PG)
            .bind(languages)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(job_id) = picked else {
            return Ok(None);
        };
        let claimed: Option<ClaimedJob> = sqlx::query_as(CLAIM_TAKE_PG)
            .bind(lease.runner_id)
            .bind(lease.lease_token)
            .bind(lease.lease_seconds)
            .bind(lease.expires_ms)
            .bind(job_id)
            .fetch_optional(&mut *tx)
            .await?;
        if claimed.is_some() {
            tx.commit().await?;
            return Ok(claimed);
        }
        // A sibling attempt was claimed between our snapshot and our lock: pick again.
        tx.rollback().await?;
    }
    Ok(None)
}

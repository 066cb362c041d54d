//! The claim, of a job and of a trial: each table's claim statement with its
//! filters, what a claim returns ([`ClaimedJob`], [`ClaimedTrial`]) and the lease
//! it grants ([`NewLease`]).
//!
//! The lookup, shared by jobs and trials: the oldest claimable row in any
//! of the Runner's languages, found by one `ORDER BY id LIMIT 1` probe of the
//! `(language, id)` partial index per offered language, the smallest id winning.
//! A claim never walks past rows it cannot take, so one that finds nothing costs a
//! few index probes however deep the queue is. Jobs waiting behind a live sibling
//! are outside the index (`blocked = 1`, cleared by a trigger in the statement that
//! ends the sibling: see migration 0002).
//!
//! SQLite: one probe (jobs, trials, the runner's key) runs on a reader connection
//! first; only when it finds a row does the claim take the writer (`BEGIN
//! IMMEDIATE`) and pick again under the lock, so an empty claim never holds, nor
//! waits for, the write lock.
//!
//! PostgreSQL: one statement. The oldest head among the offered languages picks the
//! language, then `FOR UPDATE SKIP LOCKED` walks that language's index from its
//! head, passing over rows other claimers are taking (the same walk the contract
//! asks for, within one language). When every row of that language was being
//! taken, the probe is asked whether anything is left and the claim tries again.
//! An empty job claim is followed by the same probe, which also says whether a
//! trial is there and whether the runner's key still holds.

use sqlx::FromRow;
use sqlx::postgres::{PgPool, PgRow};
use sqlx::sqlite::{SqlitePool, SqliteRow};

use super::{BeginWrite as _, Db, DbError, Pool, WorkKind};
use crate::server::clock::Millis;

/// The id of the oldest claimable row of `$table` in the languages `$langs`
/// (a JSON array), or NULL. `$ready` adds conditions on the alias `h`.
macro_rules! sqlite_pick {
    ($table:literal, $ready:literal, $langs:literal) => {
        concat!(
            "SELECT MIN((SELECT h.id FROM ",
            $table,
            " h WHERE h.state = 'Queued'",
            $ready,
            " AND h.language = l.value ORDER BY h.id LIMIT 1)) FROM json_each(",
            $langs,
            ") AS l"
        )
    };
}

/// The oldest claimable row of `$table` in one of `$langs` (a text array) per
/// language, as the relation `head (id, language)`. Each head is one probe of
/// the `(language, id)` claimable index: the first row at or after
/// `(language, 0)`, kept when it is of that language. (Written as
/// `language = l.language ORDER BY id`, PostgreSQL walked the primary key
/// filtering on the language instead, which for a language no Queued job has
/// read every Queued row: 0.5-1.1 s at 1M, 0.2 ms this way.)
macro_rules! pg_heads {
    ($table:literal, $ready:literal, $langs:literal) => {
        concat!(
            "unnest(",
            $langs,
            "::text[]) AS l (language) CROSS JOIN LATERAL (SELECT h.id, h.language FROM ",
            $table,
            " h WHERE h.state = 'Queued'",
            $ready,
            " AND (h.language, h.id) > (l.language, 0) ORDER BY h.language, h.id LIMIT 1) AS head \
             WHERE head.language = l.language"
        )
    };
}

/// The row to claim, locked: the language of the oldest head, walked from its head
/// with `SKIP LOCKED`. `$ready_j` / `$ready_h` are the extra conditions on the
/// aliases `j` and `h`. The walk is a range of the claimable index from
/// `(language, 0)` (see [`pg_heads`]); with no head the range is empty.
macro_rules! pg_pick {
    ($table:literal, $ready_j:literal, $ready_h:literal, $langs:literal) => {
        concat!(
            "WITH pick AS MATERIALIZED (SELECT h.language FROM ",
            $table,
            " h WHERE h.id = (SELECT MIN(head.id) FROM ",
            pg_heads!($table, $ready_h, $langs),
            ")) SELECT j.id FROM ",
            $table,
            " j WHERE j.state = 'Queued'",
            $ready_j,
            " AND (j.language, j.id) > ((SELECT language FROM pick), 0) \
             AND j.language = (SELECT language FROM pick) \
             ORDER BY j.language, j.id LIMIT 1 FOR UPDATE OF j SKIP LOCKED"
        )
    };
}

/// The claim statement of one table: `$1` runner, `$2` lease token, `$3` lease
/// seconds, `$4` expiry, `$5` the languages (a JSON array on SQLite, an array on
/// PostgreSQL). Picks the oldest claimable row and leases it, all in one.
struct ClaimSql {
    pub sqlite: &'static str,
    pub postgres: &'static str,
}

/// What a job claim hands out, besides the lease token and duration the caller chose.
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

/// What a trial claim hands out, besides the lease token and duration the caller chose.
#[derive(Debug, Clone, FromRow)]
pub struct ClaimedTrial {
    pub id: i64,
    pub lease_expires_ms: i64,
    pub language: String,
    pub files: String,
    pub package_sha256: String,
    pub package_size: i64,
    pub time_limit: Option<f64>,
}

/// Columns of a [`ClaimedJob`], read from the row the claim just updated.
macro_rules! claim_returning {
    () => {
        " RETURNING id, submission_id, attempt, problem_version_id, lease_expires_ms, \
         language, \
         (SELECT s.files FROM submissions s WHERE s.id = jobs.submission_id) AS files, \
         (SELECT v.sha256 FROM problem_versions v WHERE v.id = jobs.problem_version_id) AS sha256, \
         (SELECT v.size FROM problem_versions v WHERE v.id = jobs.problem_version_id) AS size, \
         (SELECT v.time_limit FROM problem_versions v WHERE v.id = jobs.problem_version_id) AS time_limit"
    };
}

/// `$1` runner, `$2` token, `$3` lease seconds, `$4` expiry. Every claim:
/// `deliveries += 1`, a new token, `acknowledged_at = null`; no `row_version` bump.
/// `claimed_ms` (the claim's time: expiry minus lease) feeds `GET /api/queue`.
macro_rules! claim_update {
    () => {
        "UPDATE jobs SET state = 'Running', runner_id = $1, lease_token = $2, lease_seconds = $3, \
         lease_expires_ms = $4, deliveries = deliveries + 1, acknowledged_ms = NULL, \
         progress_done = NULL, progress_total = NULL, claimed_ms = $4 - $3 * 1000 "
    };
}

/// The claim's four filters: (1) Queued, (2) a language the Runner offers (`$5`),
/// (3) the Runner not revoked (in the statement), and (4) no other attempt of its
/// submission Running: a job created while a sibling was live is `blocked` until
/// that sibling ends (see `waits_for` in the schema and migration 0002), and the
/// `jobs_claimable` index holds only `blocked = 0` rows. Oldest first: the
/// smallest id among the heads of the offered languages (above).
const JOB_CLAIM: ClaimSql = ClaimSql {
    // SQLite: one statement inside `BEGIN IMMEDIATE` (the database's one write
    // lock), so nothing changes under the filters.
    sqlite: concat!(
        claim_update!(),
        "WHERE id = (",
        sqlite_pick!("jobs", " AND h.blocked = 0", "$5"),
        ") AND EXISTS (SELECT 1 FROM runners WHERE id = $1 AND revoked_ms IS NULL)",
        claim_returning!()
    ),
    // PostgreSQL: one statement. `SKIP LOCKED` passes over jobs other claimers
    // are taking; filter (3) share-locks the runner row, so a revocation (which
    // updates that row) waits for this claim to commit and then requeues what it
    // took, and a claim that waited for a revocation re-reads the row and takes
    // nothing. A sibling's end clears `blocked` in its own transaction, so a claim
    // sees the waiter claimable only once the sibling's end committed.
    postgres: concat!(
        claim_update!(),
        "WHERE id = (",
        pg_pick!("jobs", " AND j.blocked = 0", " AND h.blocked = 0", "$5"),
        ") AND EXISTS (SELECT 1 FROM runners WHERE id = $1 AND revoked_ms IS NULL FOR SHARE)",
        claim_returning!()
    ),
};

/// `$1` runner, `$2` token, `$3` lease seconds, `$4` expiry.
macro_rules! claim_trial_update {
    () => {
        "UPDATE trials SET state = 'Running', runner_id = $1, lease_token = $2, \
         lease_seconds = $3, lease_expires_ms = $4, deliveries = deliveries + 1, \
         acknowledged_ms = NULL, progress_done = NULL, progress_total = NULL "
    };
}
macro_rules! claim_trial_returning {
    () => {
        " RETURNING id, lease_expires_ms, language, files, package_sha256, package_size, time_limit"
    };
}

/// The oldest Queued trial in one of the Runner's languages (`$5`), by the same
/// lookup as the job claim; filter (3) share-locks the runner
/// row on PostgreSQL as the job claim does. Trials never wait for a sibling.
const TRIAL_CLAIM: ClaimSql = ClaimSql {
    sqlite: concat!(
        claim_trial_update!(),
        "WHERE id = (",
        sqlite_pick!("trials", "", "$5"),
        ") AND EXISTS (SELECT 1 FROM runners WHERE id = $1 AND revoked_ms IS NULL)",
        claim_trial_returning!()
    ),
    postgres: concat!(
        claim_trial_update!(),
        "WHERE id = (",
        pg_pick!("trials", "", "", "$5"),
        ") AND EXISTS (SELECT 1 FROM runners WHERE id = $1 AND revoked_ms IS NULL FOR SHARE)",
        claim_trial_returning!()
    ),
};

/// What is there to claim, in one read: the oldest claimable job and trial (or
/// NULL) for the languages `$1`, and whether runner `$2` is still active.
const PROBE_SQLITE: &str = concat!(
    "SELECT (",
    sqlite_pick!("jobs", " AND h.blocked = 0", "$1"),
    "), (",
    sqlite_pick!("trials", "", "$1"),
    "), EXISTS (SELECT 1 FROM runners WHERE id = $2 AND revoked_ms IS NULL)"
);
const PROBE_PG: &str = concat!(
    "SELECT (SELECT MIN(head.id) FROM ",
    pg_heads!("jobs", " AND h.blocked = 0", "$1"),
    "), (SELECT MIN(head.id) FROM ",
    pg_heads!("trials", "", "$1"),
    "), EXISTS (SELECT 1 FROM runners WHERE id = $2 AND revoked_ms IS NULL)"
);

/// How often a PostgreSQL claim tries again when every row of the language it
/// picked was being taken by others while the probe still sees work.
const PG_TRIES: usize = 4;

/// What a claim hands out: a job, else a trial.
#[derive(Debug, Clone)]
pub enum Claimed {
    Job(ClaimedJob),
    Trial(ClaimedTrial),
}

/// `(oldest job, oldest trial, runner active)`.
type Probe = (Option<i64>, Option<i64>, bool);

impl Db {
    /// Claims the oldest claimable job for this Runner, else the oldest trial, else
    /// `None`; a revoked Runner is told so instead of being left to poll for ever.
    /// An empty claim costs one read on SQLite (no write lock), and on PostgreSQL
    /// the job statement plus one read.
    pub async fn claim_work(
        &self,
        languages: &[String],
        lease: NewLease<'_>,
    ) -> Result<Option<Claimed>, DbError> {
        let claimed = match self.pool() {
            Pool::Sqlite(writer) => self.claim_sqlite(writer, languages, lease).await?,
            Pool::Postgres(pool) => self.claim_pg(pool, languages, lease).await?,
        };
        match &claimed {
            Some(Claimed::Job(_)) => self.counters(WorkKind::Job).claims.inc(),
            Some(Claimed::Trial(_)) => self.counters(WorkKind::Trial).claims.inc(),
            None => {}
        }
        Ok(claimed)
    }

    async fn claim_sqlite(
        &self,
        writer: &SqlitePool,
        languages: &[String],
        lease: NewLease<'_>,
    ) -> Result<Option<Claimed>, DbError> {
        let languages = serde_json::to_string(languages).map_err(|e| DbError::Corrupt {
            detail: format!("languages do not serialise: {e}"),
        })?;
        let (job, trial, active): Probe = sqlx::query_as(PROBE_SQLITE)
            .bind(&languages)
            .bind(lease.runner_id)
            .fetch_one(self.sqlite_reader.as_ref().unwrap_or(writer))
            .await?;
        if !active {
            return Err(DbError::RunnerRevoked {
                runner_id: lease.runner_id,
            });
        }
        if job.is_some()
            && let Some(job) = claim_sqlite_one(writer, &JOB_CLAIM, &languages, lease).await?
        {
            return Ok(Some(Claimed::Job(job)));
        }
        if trial.is_some()
            && let Some(trial) = claim_sqlite_one(writer, &TRIAL_CLAIM, &languages, lease).await?
        {
            return Ok(Some(Claimed::Trial(trial)));
        }
        Ok(None)
    }

    async fn claim_pg(
        &self,
        pool: &PgPool,
        languages: &[String],
        lease: NewLease<'_>,
    ) -> Result<Option<Claimed>, DbError> {
        if let Some(job) = claim_pg_one(pool, &JOB_CLAIM, languages, lease).await? {
            return Ok(Some(Claimed::Job(job)));
        }
        for _ in 0..PG_TRIES {
            let (job, trial, active): Probe = sqlx::query_as(PROBE_PG)
                .bind(languages)
                .bind(lease.runner_id)
                .fetch_one(pool)
                .await?;
            if !active {
                return Err(DbError::RunnerRevoked {
                    runner_id: lease.runner_id,
                });
            }
            if job.is_some() {
                if let Some(job) = claim_pg_one(pool, &JOB_CLAIM, languages, lease).await? {
                    return Ok(Some(Claimed::Job(job)));
                }
            } else if trial.is_some() {
                if let Some(trial) = claim_pg_one(pool, &TRIAL_CLAIM, languages, lease).await? {
                    return Ok(Some(Claimed::Trial(trial)));
                }
            } else {
                return Ok(None);
            }
        }
        Ok(None)
    }
}

/// One claim statement inside `BEGIN IMMEDIATE` on the writer: the write lock
/// from the start, so two claims never both read the same Queued row.
async fn claim_sqlite_one<T>(
    writer: &SqlitePool,
    sql: &ClaimSql,
    languages_json: &str,
    lease: NewLease<'_>,
) -> Result<Option<T>, DbError>
where
    T: Send + Unpin + for<'r> FromRow<'r, SqliteRow>,
{
    let mut tx = writer.begin_write().await?;
    let claimed = sqlx::query_as(sql.sqlite)
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

async fn claim_pg_one<T>(
    pool: &PgPool,
    sql: &ClaimSql,
    languages: &[String],
    lease: NewLease<'_>,
) -> Result<Option<T>, DbError>
where
    T: Send + Unpin + for<'r> FromRow<'r, PgRow>,
{
    Ok(sqlx::query_as(sql.postgres)
        .bind(lease.runner_id)
        .bind(lease.lease_token)
        .bind(lease.lease_seconds)
        .bind(lease.expires_ms)
        .bind(languages)
        .fetch_optional(pool)
        .await?)
}

//! What only the console (`/console/`) reads or writes: its sessions (migration
//! 0008), and the few aggregates its overview draws that no API route answers
//! (results per minute over the last hour, failures by reason). The listings
//! themselves come from [`super::listing`]; nothing here repeats them.

use super::{Db, DbError, on_pool, on_reader};
use crate::server::clock::Millis;

/// A console session found by the digest of its cookie's secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    /// Space-separated scopes, or `manager` for every scope.
    pub scopes: String,
    pub token_id: Option<i64>,
    pub created_ms: Millis,
    pub expires_ms: Millis,
}

/// A submission's stored files (the wire JSON array) and its identity.
#[derive(Debug, Clone)]
pub struct SubmissionSource {
    pub problem_id: i64,
    pub language: String,
    pub files_json: String,
    pub created_ms: Millis,
}

impl Db {
    /// Stores a new session (its secret's digest) and deletes the expired ones.
    pub async fn create_console_session(
        &self,
        secret_hash: &str,
        scopes: &str,
        token_id: Option<i64>,
        now: Millis,
        expires_ms: Millis,
    ) -> Result<(), DbError> {
        const PRUNE: &str = "DELETE FROM console_sessions WHERE expires_ms <= $1";
        const INSERT: &str = "INSERT INTO console_sessions \
             (secret_hash, scopes, token_id, created_ms, expires_ms) VALUES ($1, $2, $3, $4, $5)";
        on_pool!(self, pool => sqlx::query(PRUNE).bind(now).execute(pool).await.map(|_| ()))?;
        on_pool!(self, pool => sqlx::query(INSERT)
            .bind(secret_hash).bind(scopes).bind(token_id).bind(now).bind(expires_ms)
            .execute(pool).await.map(|_| ()))?;
        Ok(())
    }

    /// The session whose secret has this digest, expired or not (the caller tells
    /// an expired session from an unknown one).
    pub async fn console_session(&self, secret_hash: &str) -> Result<Option<SessionRow>, DbError> {
        const SQL: &str = "SELECT scopes, token_id, created_ms, expires_ms \
             FROM console_sessions WHERE secret_hash = $1";
        let row: Option<(String, Option<i64>, i64, i64)> = on_reader!(self, pool =>
            sqlx::query_as(SQL).bind(secret_hash).fetch_optional(pool).await)?;
        Ok(
            row.map(|(scopes, token_id, created_ms, expires_ms)| SessionRow {
                scopes,
                token_id,
                created_ms,
                expires_ms,
            }),
        )
    }

    /// Logout (or an expired session met): the row goes.
    pub async fn delete_console_session(&self, secret_hash: &str) -> Result<(), DbError> {
        const SQL: &str = "DELETE FROM console_sessions WHERE secret_hash = $1";
        on_pool!(self, pool => sqlx::query(SQL).bind(secret_hash).execute(pool).await.map(|_| ()))?;
        Ok(())
    }

    /// Results stored per minute over the `minutes` minutes before `now`, oldest
    /// minute first (always `minutes` entries, zeros included).
    pub async fn results_per_minute(
        &self,
        now: Millis,
        minutes: usize,
    ) -> Result<Vec<i64>, DbError> {
        const SQL: &str = "SELECT created_ms FROM results WHERE created_ms > $1";
        let span = i64::try_from(minutes).unwrap_or(60) * 60_000;
        let since = now - span;
        let times: Vec<i64> = on_reader!(self, pool =>
            sqlx::query_scalar(SQL).bind(since).fetch_all(pool).await)?;
        let mut buckets = vec![0i64; minutes];
        for t in times {
            let age = now - t;
            if (0..span).contains(&age) {
                let back = usize::try_from(age / 60_000).unwrap_or(0);
                if let Some(slot) = minutes
                    .checked_sub(back + 1)
                    .and_then(|i| buckets.get_mut(i))
                {
                    *slot += 1;
                }
            }
        }
        Ok(buckets)
    }

    /// Failed jobs by `failure_reason`, most frequent first.
    pub async fn failures_by_reason(&self) -> Result<Vec<(String, i64)>, DbError> {
        const SQL: &str = "SELECT COALESCE(failure_reason, '(none)') AS reason, \
             CAST(COUNT(*) AS BIGINT) AS n FROM jobs WHERE state = 'Failed' \
             GROUP BY COALESCE(failure_reason, '(none)') ORDER BY n DESC, reason";
        Ok(on_reader!(self, pool => sqlx::query_as(SQL).fetch_all(pool).await)?)
    }

    /// The submission's files as stored, for the job page (shown escaped).
    pub async fn submission_source(
        &self,
        submission_id: i64,
    ) -> Result<Option<SubmissionSource>, DbError> {
        const SQL: &str =
            "SELECT problem_id, language, files, created_ms FROM submissions WHERE id = $1";
        let row: Option<(i64, String, String, i64)> = on_reader!(self, pool =>
            sqlx::query_as(SQL).bind(submission_id).fetch_optional(pool).await)?;
        Ok(row.map(
            |(problem_id, language, files_json, created_ms)| SubmissionSource {
                problem_id,
                language,
                files_json,
                created_ms,
            },
        ))
    }

    /// When a job was created (its age on the job page).
    pub async fn job_created_ms(&self, job_id: i64) -> Result<Option<Millis>, DbError> {
        const SQL: &str = "SELECT created_ms FROM jobs WHERE id = $1";
        Ok(on_reader!(self, pool =>
            sqlx::query_scalar(SQL).bind(job_id).fetch_optional(pool).await)?)
    }

    /// A problem version's time limit (seconds), for the per-test chart.
    pub async fn version_time_limit(&self, version_id: i64) -> Result<Option<f64>, DbError> {
        const SQL: &str = "SELECT time_limit FROM problem_versions WHERE id = $1";
        let row: Option<Option<f64>> = on_reader!(self, pool =>
            sqlx::query_scalar(SQL).bind(version_id).fetch_optional(pool).await)?;
        Ok(row.flatten())
    }

    /// Refunds and releases of the given jobs (the listing's rows carry
    /// deliveries only), by job id.
    pub async fn job_give_backs(&self, ids: &[i64]) -> Result<Vec<(i64, i64, i64)>, DbError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let (low, high) = (
            ids.iter().copied().min().unwrap_or(0),
            ids.iter().copied().max().unwrap_or(0),
        );
        const SQL: &str = "SELECT id, refunds, releases FROM jobs WHERE id >= $1 AND id <= $2";
        let rows: Vec<(i64, i64, i64)> = on_reader!(self, pool =>
            sqlx::query_as(SQL).bind(low).bind(high).fetch_all(pool).await)?;
        Ok(rows.into_iter().filter(|r| ids.contains(&r.0)).collect())
    }

    /// Per problem version: jobs still live (Queued or Running) and all jobs.
    pub async fn jobs_per_version(&self) -> Result<Vec<(i64, i64, i64)>, DbError> {
        const SQL: &str = "SELECT problem_version_id, \
             CAST(SUM(CASE WHEN state IN ('Queued', 'Running') THEN 1 ELSE 0 END) AS BIGINT), \
             CAST(COUNT(*) AS BIGINT) FROM jobs GROUP BY problem_version_id";
        Ok(on_reader!(self, pool => sqlx::query_as(SQL).fetch_all(pool).await)?)
    }

    /// The newest `limit` trials, newest first.
    pub async fn recent_trials(&self, limit: i64) -> Result<Vec<TrialLine>, DbError> {
        const SQL: &str = "SELECT id, language, state, runner_id, deliveries, failure_reason, \
             timings, created_ms FROM trials ORDER BY id DESC LIMIT $1";
        let rows: Vec<TrialLine> = on_reader!(self, pool =>
            sqlx::query_as(SQL).bind(limit).fetch_all(pool).await)?;
        Ok(rows)
    }
}

/// One trial as the console lists it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TrialLine {
    pub id: i64,
    pub language: String,
    pub state: String,
    pub runner_id: Option<i64>,
    pub deliveries: i64,
    pub failure_reason: Option<String>,
    pub timings: Option<String>,
    pub created_ms: i64,
}

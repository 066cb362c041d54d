//! Runners, API tokens, problems and their versions, submissions: creating them and
//! finding them by credential. One function per statement or transaction.

use super::idempotency::{Remember, remember};
use super::{BeginWrite as _, Db, DbError, WorkKind, on_pool, on_reader};
use crate::server::clock::Millis;

/// A runner key found by its digest.
#[derive(Debug, Clone)]
pub struct RunnerKey {
    pub runner_id: i64,
    pub key_hash: String,
    pub revoked: bool,
}

/// An API token (`POST /api/tokens`) found by its digest.
#[derive(Debug, Clone)]
pub struct ApiToken {
    pub token_id: i64,
    pub token_hash: String,
    pub scopes: Vec<String>,
}

/// A stored problem version's package.
#[derive(Debug, Clone)]
pub struct NewVersion<'a> {
    pub sha256: &'a str,
    pub size: i64,
    pub time_limit: Option<f64>,
}

/// Inserts a problem version inside a transaction (same SQL on both backends).
macro_rules! insert_version {
    ($conn:expr, $problem_id:expr, $version:expr, $now:expr) => {
        sqlx::query_scalar::<_, i64>(
            "INSERT INTO problem_versions (problem_id, sha256, size, time_limit, created_ms) \
             VALUES ($1, $2, $3, $4, $5) RETURNING id",
        )
        .bind($problem_id)
        .bind($version.sha256)
        .bind($version.size)
        .bind($version.time_limit)
        .bind($now)
        .fetch_one($conn)
        .await
    };
}

impl Db {
    pub async fn create_runner(
        &self,
        name: &str,
        key_hash: &str,
        now: Millis,
    ) -> Result<i64, DbError> {
        const SQL: &str =
            "INSERT INTO runners (name, key_hash, created_ms) VALUES ($1, $2, $3) RETURNING id";
        Ok(on_pool!(self, pool => sqlx::query_scalar(SQL)
            .bind(name).bind(key_hash).bind(now)
            .fetch_one(pool).await)?)
    }

    /// Marks the runner revoked (the first revocation's time is kept). `false`
    /// when there is no such runner.
    pub async fn mark_runner_revoked(&self, runner_id: i64, now: Millis) -> Result<bool, DbError> {
        const SQL: &str = "UPDATE runners SET revoked_ms = COALESCE(revoked_ms, $2) WHERE id = $1";
        let done = on_pool!(self, pool => sqlx::query(SQL)
            .bind(runner_id).bind(now)
            .execute(pool).await.map(|r| r.rows_affected()))?;
        Ok(done == 1)
    }

    pub async fn runner_by_key_hash(&self, key_hash: &str) -> Result<Option<RunnerKey>, DbError> {
        const SQL: &str = "SELECT id, key_hash, revoked_ms FROM runners WHERE key_hash = $1";
        let row: Option<(i64, String, Option<i64>)> = on_reader!(self, pool => sqlx::query_as(SQL)
            .bind(key_hash)
            .fetch_optional(pool).await)?;
        Ok(row.map(|(runner_id, key_hash, revoked_ms)| RunnerKey {
            runner_id,
            key_hash,
            revoked: revoked_ms.is_some(),
        }))
    }

    pub async fn create_api_token(
        &self,
        token_hash: &str,
        scopes: &[String],
        now: Millis,
    ) -> Result<i64, DbError> {
        const SQL: &str = "INSERT INTO api_tokens (token_hash, scopes, created_ms) \
                           VALUES ($1, $2, $3) RETURNING id";
        Ok(on_pool!(self, pool => sqlx::query_scalar(SQL)
            .bind(token_hash).bind(scopes.join(" ")).bind(now)
            .fetch_one(pool).await)?)
    }

    pub async fn api_token_by_hash(&self, token_hash: &str) -> Result<Option<ApiToken>, DbError> {
        const SQL: &str = "SELECT id, token_hash, scopes FROM api_tokens WHERE token_hash = $1";
        let row: Option<(i64, String, String)> = on_reader!(self, pool => sqlx::query_as(SQL)
            .bind(token_hash)
            .fetch_optional(pool).await)?;
        Ok(row.map(|(token_id, token_hash, scopes)| ApiToken {
            token_id,
            token_hash,
            scopes: scopes.split_whitespace().map(str::to_string).collect(),
        }))
    }

    /// A new problem with its first version: `(problem_id, problem_version_id)`.
    /// With `key`, the key is recorded in the same transaction
    /// ([`DbError::KeyTaken`] when a concurrent twin recorded it first).
    pub async fn create_problem(
        &self,
        version: &NewVersion<'_>,
        key: Option<&Remember<'_>>,
        now: Millis,
    ) -> Result<(i64, i64), DbError> {
        const PROBLEM: &str = "INSERT INTO problems (created_ms) VALUES ($1) RETURNING id";
        on_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let problem_id: i64 = sqlx::query_scalar(PROBLEM).bind(now).fetch_one(&mut *tx).await?;
            let version_id = insert_version!(&mut *tx, problem_id, version, now)?;
            remember!(&mut *tx, key, problem_id, version_id, now)?;
            tx.commit().await?;
            Ok((problem_id, version_id))
        })
    }

    /// A new version of an existing problem; `None` when there is no such problem.
    /// `key` as for [`Db::create_problem`].
    pub async fn add_problem_version(
        &self,
        problem_id: i64,
        version: &NewVersion<'_>,
        key: Option<&Remember<'_>>,
        now: Millis,
    ) -> Result<Option<i64>, DbError> {
        const EXISTS: &str = "SELECT id FROM problems WHERE id = $1";
        on_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let found: Option<i64> = sqlx::query_scalar(EXISTS).bind(problem_id)
                .fetch_optional(&mut *tx).await?;
            if found.is_none() {
                return Ok(None);
            }
            let version_id = insert_version!(&mut *tx, problem_id, version, now)?;
            remember!(&mut *tx, key, problem_id, version_id, now)?;
            tx.commit().await?;
            Ok(Some(version_id))
        })
    }

    /// A submission and its first attempt, on the problem's latest version:
    /// `(submission_id, job_id)`, or `None` when there is no such problem.
    /// `key` as for [`Db::create_problem`].
    pub async fn create_submission(
        &self,
        problem_id: i64,
        language: &str,
        files_json: &str,
        callback_url: Option<&str>,
        key: Option<&Remember<'_>>,
        now: Millis,
    ) -> Result<Option<(i64, i64)>, DbError> {
        const SUBMISSION: &str = "INSERT INTO submissions (problem_id, language, files, created_ms, callback_url) \
                                  VALUES ($1, $2, $3, $4, $5) RETURNING id";
        on_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let version: Option<i64> = sqlx::query_scalar(LATEST_VERSION).bind(problem_id)
                .fetch_optional(&mut *tx).await?;
            let Some(version_id) = version else { return Ok(None) };
            let submission_id: i64 = sqlx::query_scalar(SUBMISSION)
                .bind(problem_id).bind(language).bind(files_json).bind(now).bind(callback_url)
                .fetch_one(&mut *tx).await?;
            let job_id: i64 = sqlx::query_scalar(INSERT_JOB)
                .bind(submission_id).bind(1_i64).bind(version_id).bind(language)
                .bind(None::<i64>).bind(now)
                .fetch_one(&mut *tx).await?;
            remember!(&mut *tx, key, submission_id, job_id, now)?;
            tx.commit().await?;
            Ok(Some((submission_id, job_id)))
        })
    }

    /// Is a package with this digest referenced by a problem version?
    pub async fn version_package_exists(&self, sha256: &str) -> Result<bool, DbError> {
        const SQL: &str = "SELECT id FROM problem_versions WHERE sha256 = $1 LIMIT 1";
        let row: Option<i64> = on_reader!(self, pool => sqlx::query_scalar(SQL)
            .bind(sha256).fetch_optional(pool).await)?;
        Ok(row.is_some())
    }

    /// Counts of rows per state, for the metrics gauges: the counters the state
    /// triggers keep (migration 0002), so this never reads the jobs themselves.
    pub async fn count_by_state(&self, work: WorkKind) -> Result<Vec<(String, i64)>, DbError> {
        const SQL: &str = "SELECT state, CAST(SUM(n) AS BIGINT) AS n FROM state_counts \
             WHERE kind = $1 GROUP BY state";
        let kind = match work {
            WorkKind::Job => "job",
            WorkKind::Trial => "trial",
        };
        Ok(on_reader!(self, pool => sqlx::query_as(SQL).bind(kind).fetch_all(pool).await)?)
    }
}

/// The newest version of a problem: what a new attempt is evaluated against.
pub(crate) const LATEST_VERSION: &str =
    "SELECT id FROM problem_versions WHERE problem_id = $1 ORDER BY id DESC LIMIT 1";

/// A new Queued attempt: `$1` submission, `$2` attempt, `$3` version, `$4`
/// language, `$5` the running sibling it waits for, `$6` now.
/// A job with a live sibling to wait for starts `blocked` (out of the claimable
/// index) until the sibling ends.
pub(crate) const INSERT_JOB: &str = "INSERT INTO jobs \
     (submission_id, attempt, problem_version_id, language, waits_for, blocked, state, created_ms) \
     VALUES ($1, $2, $3, $4, $5, CASE WHEN $5 IS NULL THEN 0 ELSE 1 END, 'Queued', $6) RETURNING id";

//! Trials: a package somebody asked to have run, attached to no problem. Their own
//! table, claimed by Runners as their own kind of work under the same lease rules
//! ([`super::lease`]), producing timings and never a Result.

use sqlx::FromRow;

use super::jobs::ResultOutcome;
use super::lease::{Fence, fenced};
use super::{Db, DbError, on_pool, on_reader};
use crate::server::clock::Millis;

#[derive(Debug, Clone)]
pub struct NewTrial<'a> {
    /// The API token that asked; `None` for the manager.
    pub token_id: Option<i64>,
    pub language: &'a str,
    pub files_json: &'a str,
    pub sha256: &'a str,
    pub size: i64,
    pub package_file: &'a str,
    pub time_limit: Option<f64>,
}

#[derive(Debug, Clone, FromRow)]
pub struct TrialRow {
    pub id: i64,
    pub token_id: Option<i64>,
    pub state: String,
    pub timings: Option<String>,
    pub failure_reason: Option<String>,
}

const COMPLETE: &str = fenced!(
    "trials",
    ", state = 'Completed', timings = $6",
    "package_file"
);
const COMPLETED_BY: &str = "SELECT id FROM trials \
     WHERE id = $1 AND lease_token = $2 AND runner_id = $3 AND state = 'Completed'";

impl Db {
    pub async fn create_trial(&self, trial: &NewTrial<'_>, now: Millis) -> Result<i64, DbError> {
        const SQL: &str = "INSERT INTO trials (token_id, language, files, package_sha256, \
             package_size, package_file, time_limit, state, created_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'Queued', $8) RETURNING id";
        Ok(on_pool!(self, pool => sqlx::query_scalar(SQL)
            .bind(trial.token_id).bind(trial.language).bind(trial.files_json)
            .bind(trial.sha256).bind(trial.size).bind(trial.package_file)
            .bind(trial.time_limit).bind(now)
            .fetch_one(pool).await)?)
    }

    /// Completed with its timings, under the fence; answers the package file to
    /// delete (`None` for an idempotent resend).
    pub async fn complete_trial(
        &self,
        fence: Fence<'_>,
        now: Millis,
        timings_json: &str,
    ) -> Result<(ResultOutcome, Option<String>), DbError> {
        let file: Option<String> = on_pool!(self, pool => sqlx::query_scalar(COMPLETE)
            .bind(fence.id).bind(fence.lease_token).bind(fence.runner_id).bind(now)
            .bind(fence.attempt).bind(timings_json)
            .fetch_optional(pool).await)?;
        if let Some(file) = file {
            return Ok((ResultOutcome::Stored, Some(file)));
        }
        let resent: Option<i64> = on_pool!(self, pool => sqlx::query_scalar(COMPLETED_BY)
            .bind(fence.id).bind(fence.lease_token).bind(fence.runner_id)
            .fetch_optional(pool).await)?;
        match resent {
            Some(_) if !self.runner_revoked(fence.runner_id).await? => {
                Ok((ResultOutcome::AlreadyStored, None))
            }
            _ => self.fenced(fence, None).await,
        }
    }

    pub async fn trial(&self, trial_id: i64) -> Result<Option<TrialRow>, DbError> {
        const SQL: &str =
            "SELECT id, token_id, state, timings, failure_reason FROM trials WHERE id = $1";
        Ok(on_reader!(self, pool => sqlx::query_as(SQL)
            .bind(trial_id).fetch_optional(pool).await)?)
    }

    pub async fn trial_package_file(&self, trial_id: i64) -> Result<Option<String>, DbError> {
        const SQL: &str = "SELECT package_file FROM trials WHERE id = $1";
        Ok(on_reader!(self, pool => sqlx::query_scalar(SQL)
            .bind(trial_id).fetch_optional(pool).await)?)
    }

    /// The package file of a trial still in play whose package has this digest.
    pub async fn live_trial_package(&self, sha256: &str) -> Result<Option<String>, DbError> {
        const SQL: &str = "SELECT package_file FROM trials \
             WHERE package_sha256 = $1 AND state IN ('Queued', 'Running') ORDER BY id LIMIT 1";
        Ok(on_reader!(self, pool => sqlx::query_scalar(SQL)
            .bind(sha256).fetch_optional(pool).await)?)
    }
}

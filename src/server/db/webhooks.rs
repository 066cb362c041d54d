//! The outbox of `attempt.ended` events. Rows are written by the
//! `jobs_attempt_ended` trigger (migration 0003) inside the statement that ends
//! an attempt; here they are claimed, filled and settled by the sender
//! (`server::webhooks`). Times here are wall-clock milliseconds, like the
//! trigger's `created_ms`.

use super::{Db, DbError, Pool, on_pool};

/// A due event a sender now holds until `claimed_until_ms`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OutboxRow {
    pub id: i64,
    pub job_id: i64,
    pub callback_url: String,
    pub created_ms: i64,
    pub delivery_id: Option<String>,
    pub payload: Option<String>,
    pub tries: i64,
}

/// The claim, one statement on both backends; PostgreSQL's takes the due rows
/// `FOR UPDATE SKIP LOCKED`.
macro_rules! claim_sql {
    ($lock:literal) => {
        concat!(
            "UPDATE webhook_outbox SET claimed_until_ms = $2, tries = tries + 1 \
             WHERE id IN (SELECT id FROM webhook_outbox \
               WHERE delivered_ms IS NULL AND gave_up_ms IS NULL AND next_try_ms <= $1 \
                 AND (claimed_until_ms IS NULL OR claimed_until_ms <= $1) \
               ORDER BY next_try_ms, id LIMIT $3",
            $lock,
            ") RETURNING id, job_id, callback_url, created_ms, delivery_id, payload, tries"
        )
    };
}
const CLAIM_SQLITE: &str = claim_sql!("");
const CLAIM_PG: &str = claim_sql!(" FOR UPDATE SKIP LOCKED");

/// Settled rows (delivered or given up) settled before `$1`, oldest first, at
/// most `$2`: one statement on both backends, walking the settled index
/// (migration 0004) and never touching a pending row; PostgreSQL skips rows
/// another Server is deleting at the same moment.
macro_rules! prune_sql {
    ($lock:literal) => {
        concat!(
            "DELETE FROM webhook_outbox WHERE id IN (SELECT id FROM webhook_outbox \
               WHERE (delivered_ms IS NOT NULL OR gave_up_ms IS NOT NULL) \
                 AND COALESCE(delivered_ms, gave_up_ms) < $1 \
               ORDER BY COALESCE(delivered_ms, gave_up_ms) LIMIT $2",
            $lock,
            ")"
        )
    };
}
const PRUNE_SQLITE: &str = prune_sql!("");
const PRUNE_PG: &str = prune_sql!(" FOR UPDATE SKIP LOCKED");

/// Pending = written and neither delivered nor given up.
const PENDING: &str =
    "SELECT COUNT(*) FROM webhook_outbox WHERE delivered_ms IS NULL AND gave_up_ms IS NULL";
/// The first try fixes the delivery id and the exact body; retries reuse them.
const FILL: &str = "UPDATE webhook_outbox SET delivery_id = COALESCE(delivery_id, $2), \
     payload = COALESCE(payload, $3) WHERE id = $1 RETURNING delivery_id, payload";
const DELIVERED: &str = "UPDATE webhook_outbox SET delivered_ms = $2, claimed_until_ms = NULL, \
     last_error = NULL WHERE id = $1";
const RETRY: &str = "UPDATE webhook_outbox SET next_try_ms = $2, claimed_until_ms = NULL, \
     last_error = $3 WHERE id = $1";
const GAVE_UP: &str = "UPDATE webhook_outbox SET gave_up_ms = $2, claimed_until_ms = NULL, \
     last_error = $3 WHERE id = $1";

impl Db {
    /// Claims up to `limit` due events, holding each until `hold_until`: one
    /// statement, whose subquery takes the rows `FOR UPDATE SKIP LOCKED` on
    /// PostgreSQL, so concurrent senders on several Servers never take one row
    /// together; on SQLite the one writer serialises it. Counts a try per row.
    pub async fn claim_webhooks(
        &self,
        now: i64,
        hold_until: i64,
        limit: i64,
    ) -> Result<Vec<OutboxRow>, DbError> {
        let rows = match self.pool() {
            Pool::Sqlite(pool) => {
                sqlx::query_as(CLAIM_SQLITE)
                    .bind(now)
                    .bind(hold_until)
                    .bind(limit)
                    .fetch_all(pool)
                    .await?
            }
            Pool::Postgres(pool) => {
                sqlx::query_as(CLAIM_PG)
                    .bind(now)
                    .bind(hold_until)
                    .bind(limit)
                    .fetch_all(pool)
                    .await?
            }
        };
        Ok(rows)
    }

    /// Sets the delivery id and body unless an earlier try did; answers the stored ones.
    pub async fn fill_webhook(
        &self,
        id: i64,
        delivery_id: &str,
        payload: &str,
    ) -> Result<(String, String), DbError> {
        let row: (Option<String>, Option<String>) = on_pool!(self, pool => sqlx::query_as(FILL)
            .bind(id).bind(delivery_id).bind(payload).fetch_one(pool).await)?;
        match row {
            (Some(d), Some(p)) => Ok((d, p)),
            _ => Err(DbError::Corrupt {
                detail: format!("webhook {id} has no delivery id or payload after filling"),
            }),
        }
    }

    pub async fn webhook_delivered(&self, id: i64, now: i64) -> Result<(), DbError> {
        on_pool!(self, pool => sqlx::query(DELIVERED).bind(id).bind(now).execute(pool).await.map(|_| ()))?;
        Ok(())
    }

    pub async fn webhook_retry(&self, id: i64, next_try: i64, error: &str) -> Result<(), DbError> {
        on_pool!(self, pool => sqlx::query(RETRY).bind(id).bind(next_try).bind(error)
            .execute(pool).await.map(|_| ()))?;
        Ok(())
    }

    pub async fn webhook_gave_up(&self, id: i64, now: i64, error: &str) -> Result<(), DbError> {
        on_pool!(self, pool => sqlx::query(GAVE_UP).bind(id).bind(now).bind(error)
            .execute(pool).await.map(|_| ()))?;
        Ok(())
    }

    /// Deletes up to `limit` settled events that settled before `settled_before`
    /// (wall-clock ms); answers how many it deleted. A pending event is never
    /// deleted, whatever its age.
    pub async fn prune_webhooks(&self, settled_before: i64, limit: i64) -> Result<u64, DbError> {
        let sql = match self.pool() {
            Pool::Sqlite(_) => PRUNE_SQLITE,
            Pool::Postgres(_) => PRUNE_PG,
        };
        let deleted = on_pool!(self, pool => sqlx::query(sql).bind(settled_before).bind(limit)
            .execute(pool).await.map(|done| done.rows_affected()))?;
        Ok(deleted)
    }

    /// `judge_webhook_outbox_pending`.
    pub async fn webhooks_pending(&self) -> Result<i64, DbError> {
        let n: i64 = on_pool!(self, pool => sqlx::query_scalar(PENDING).fetch_one(pool).await)?;
        Ok(n)
    }
}

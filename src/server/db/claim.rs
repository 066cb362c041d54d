//! The claim's lookup, shared by jobs and trials: the oldest claimable row in any
//! of the Runner's languages, found by one `ORDER BY id LIMIT 1` probe of the
//! `(language, id)` partial index per offered language, the smallest id winning.
//! A claim never walks past rows it cannot take, so one that finds nothing costs a
//! few index probes however deep the queue is. Jobs waiting behind a live sibling
//! are outside the index (`blocked = 1`, cleared by a trigger in the statement that
//! ends the sibling: see migration 0002).
//!
//! SQLite: the probe runs on a reader connection first; only when it finds a row
//! does the claim take the writer (`BEGIN IMMEDIATE`) and re-pick under the lock, so
//! an empty claim never holds, nor waits for, the write lock.
//!
//! PostgreSQL: one statement. The oldest head among the offered languages picks the
//! language, then `FOR UPDATE SKIP LOCKED` walks that language's index from its
//! head, passing over rows other claimers are taking (the same walk the contract
//! asks for, within one language). When every row of that language was being
//! taken, the probe is asked whether anything is left and the claim tries again.

use sqlx::FromRow;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use super::jobs::NewLease;
use super::{BeginWrite as _, Db, DbError, Pool, Work};

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
pub(crate) use sqlite_pick;

/// The oldest claimable row of `$table` in one of `$langs` (a text array) per
/// language, as the relation `head (id)`.
macro_rules! pg_heads {
    ($table:literal, $ready:literal, $langs:literal) => {
        concat!(
            "unnest(",
            $langs,
            "::text[]) AS l (language) CROSS JOIN LATERAL (SELECT h.id FROM ",
            $table,
            " h WHERE h.state = 'Queued'",
            $ready,
            " AND h.language = l.language ORDER BY h.id LIMIT 1) AS head"
        )
    };
}
pub(crate) use pg_heads;

/// The row to claim, locked: the language of the oldest head, walked from its head
/// with `SKIP LOCKED`. `$ready_j` / `$ready_h` are the extra conditions on the
/// aliases `j` and `h`.
macro_rules! pg_pick {
    ($table:literal, $ready_j:literal, $ready_h:literal, $langs:literal) => {
        concat!(
            "SELECT j.id FROM ",
            $table,
            " j WHERE j.state = 'Queued'",
            $ready_j,
            " AND j.language = (SELECT h.language FROM ",
            $table,
            " h WHERE h.id = (SELECT MIN(head.id) FROM ",
            $crate::server::db::claim::pg_heads!($table, $ready_h, $langs),
            ")) ORDER BY j.id LIMIT 1 FOR UPDATE OF j SKIP LOCKED"
        )
    };
}
pub(crate) use pg_pick;

/// The claim statements of one table: `$1` runner, `$2` lease token, `$3` lease
/// seconds, `$4` expiry, `$5` the languages (a JSON array on SQLite, an array on
/// PostgreSQL) for the claims; `$1` the languages for the probes, which answer the
/// id of the oldest claimable row or NULL.
pub(crate) struct ClaimSql {
    pub sqlite: &'static str,
    pub sqlite_probe: &'static str,
    pub postgres: &'static str,
    pub postgres_probe: &'static str,
}

/// How often a PostgreSQL claim tries again when every row of the language it
/// picked was being taken by others while the probe still sees work.
const PG_TRIES: usize = 4;

impl Db {
    /// Runs one claim for `work`: the leased row, or `None` (then a revoked
    /// Runner is told so instead of being left to poll for ever).
    pub(super) async fn claim<T>(
        &self,
        work: Work,
        sql: &ClaimSql,
        languages: &[String],
        lease: NewLease<'_>,
    ) -> Result<Option<T>, DbError>
    where
        T: Send + Unpin + for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow>,
    {
        let claimed: Option<T> = match self.pool() {
            Pool::Sqlite(writer) => {
                let languages_json =
                    serde_json::to_string(languages).map_err(|e| DbError::Corrupt {
                        detail: format!("languages do not serialise: {e}"),
                    })?;
                let candidate: Option<i64> = sqlx::query_scalar(sql.sqlite_probe)
                    .bind(&languages_json)
                    .fetch_one(self.sqlite_reader.as_ref().unwrap_or(writer))
                    .await?;
                if candidate.is_none() {
                    None
                } else {
                    // BEGIN IMMEDIATE: the write lock from the start, so two
                    // claims never both read the same Queued row.
                    let mut tx = writer.begin_write().await?;
                    let claimed = sqlx::query_as(sql.sqlite)
                        .bind(lease.runner_id)
                        .bind(lease.lease_token)
                        .bind(lease.lease_seconds)
                        .bind(lease.expires_ms)
                        .bind(&languages_json)
                        .fetch_optional(&mut *tx)
                        .await?;
                    tx.commit().await?;
                    claimed
                }
            }
            Pool::Postgres(pool) => {
                let mut claimed = None;
                for _ in 0..PG_TRIES {
                    claimed = sqlx::query_as(sql.postgres)
                        .bind(lease.runner_id)
                        .bind(lease.lease_token)
                        .bind(lease.lease_seconds)
                        .bind(lease.expires_ms)
                        .bind(languages)
                        .fetch_optional(pool)
                        .await?;
                    if claimed.is_some() {
                        break;
                    }
                    let left: Option<i64> = sqlx::query_scalar(sql.postgres_probe)
                        .bind(languages)
                        .fetch_one(pool)
                        .await?;
                    if left.is_none() || self.runner_revoked(lease.runner_id).await? {
                        break;
                    }
                }
                claimed
            }
        };
        if claimed.is_some() {
            self.counters(work).claims.inc();
        } else if self.runner_revoked(lease.runner_id).await? {
            return Err(DbError::RunnerRevoked {
                runner_id: lease.runner_id,
            });
        }
        Ok(claimed)
    }
}

//! `Idempotency-Key` rows (migration 0006): the first answer to a keyed request.
//!
//! A keyed creation writes its row with [`remember!`] inside the creation's own
//! transaction, last: when a concurrent twin committed the key first, the insert
//! finds its row (`ON CONFLICT DO NOTHING` returns nothing; on PostgreSQL it waits
//! for the twin's transaction to end first), the creation answers
//! [`DbError::KeyTaken`] and its transaction is rolled back, so exactly one
//! creation survives; the caller then answers with the twin's row.

use super::{Db, DbError, on_pool};

/// The routes that take an `Idempotency-Key`; each has its own key space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyedRoute {
    /// `POST /api/submissions`: ids are `(submission_id, job_id)`.
    Submissions,
    /// `POST /api/problems`: ids are `(problem_id, problem_version_id)`.
    Problems,
}

impl KeyedRoute {
    pub const fn as_str(self) -> &'static str {
        match self {
            KeyedRoute::Submissions => "submissions",
            KeyedRoute::Problems => "problems",
        }
    }
}

/// A key a creation records: which route, the client's key, the digest of the
/// request it came with.
#[derive(Debug, Clone, Copy)]
pub struct Remember<'a> {
    pub route: KeyedRoute,
    pub key: &'a str,
    pub request_sha256: &'a str,
}

/// What a key answered first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remembered {
    pub request_sha256: String,
    pub first_id: i64,
    pub second_id: i64,
}

/// Records `$key` (an `Option<&Remember>`) with the ids `$first`, `$second` in
/// the transaction `$conn`; `Err(DbError::KeyTaken)` when a twin holds the key.
macro_rules! remember {
    ($conn:expr, $key:expr, $first:expr, $second:expr, $now:expr) => {
        match $key {
            None => Ok(()),
            Some(key) => {
                let inserted: Option<String> = sqlx::query_scalar(
                    "INSERT INTO idempotency_keys \
                     (route, client_key, request_sha256, first_id, second_id, created_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6) \
                     ON CONFLICT (route, client_key) DO NOTHING RETURNING route",
                )
                .bind(key.route.as_str())
                .bind(key.key)
                .bind(key.request_sha256)
                .bind($first)
                .bind($second)
                .bind($now)
                .fetch_optional($conn)
                .await?;
                match inserted {
                    Some(_) => Ok(()),
                    None => Err($crate::server::db::DbError::KeyTaken),
                }
            }
        }
    };
}
pub(crate) use remember;

impl Db {
    /// The first answer recorded under `key` on `route`, if any. Read on the
    /// writer (SQLite) / the pool (PostgreSQL): a twin's row committed a moment
    /// ago must be seen.
    pub async fn remembered(
        &self,
        route: KeyedRoute,
        key: &str,
    ) -> Result<Option<Remembered>, DbError> {
        const SQL: &str = "SELECT request_sha256, first_id, second_id FROM idempotency_keys \
                           WHERE route = $1 AND client_key = $2";
        let row: Option<(String, i64, i64)> = on_pool!(self, pool => sqlx::query_as(SQL)
            .bind(route.as_str()).bind(key)
            .fetch_optional(pool).await)?;
        Ok(row.map(|(request_sha256, first_id, second_id)| Remembered {
            request_sha256,
            first_id,
            second_id,
        }))
    }
}

//! The database: SQLite (embedded default) or PostgreSQL (several `serve` processes
//! on one database), with runtime queries only, so one code path serves both.
//!
//! Every SQL statement lives in this module, one function per statement (or per
//! transaction, where a rule needs one). The fence is here too: every lease-bearing
//! call is one conditional `UPDATE ... WHERE id AND lease_token AND state =
//! 'Running' AND runner_id`, and [`Db::fenced`] is the one place a zero-row
//! answer becomes [`DbError::LeaseLost`] and is counted.
//!
//! Times are integer milliseconds (see [`crate::server::clock`]). Placeholders are
//! `$N` on both backends (SQLite reads `$N` as the N-th argument).

pub mod claim;
pub mod console;
pub mod idempotency;
pub mod jobs;
pub mod lease;
pub mod listing;
pub mod records;
pub mod trials;
pub mod views;
pub mod webhooks;

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Postgres, Sqlite, Transaction};

use crate::protocol::JobState;
use crate::server::metrics::{Metrics, WorkCounters};
use lease::Fence;

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("src/server/migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator =
    sqlx::migrate!("src/server/migrations/postgres");

/// How long a SQLite writer waits for the write lock before giving up.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a request waits for a PostgreSQL connection. While the database is
/// down sqlx keeps trying to connect until then: past it the request is answered
/// 503 `unavailable` instead of hanging (a Runner retries a 503 with backoff).
const POSTGRES_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The lease token no longer holds the work (`409 lease.lost`).
    #[error(
        "the lease token no longer holds this work: it expired, was re-claimed, released, cancelled or finished"
    )]
    LeaseLost,
    #[error("runner {runner_id} has been revoked")]
    RunnerRevoked { runner_id: i64 },
    #[error("{what} {id} does not exist")]
    NotFound { what: &'static str, id: i64 },
    #[error(
        "attempt {expected} is not the latest attempt of submission {submission_id} (latest: {latest})"
    )]
    AttemptConflict {
        submission_id: i64,
        expected: i64,
        latest: i64,
    },
    /// A concurrent request with the same `Idempotency-Key` committed first; this
    /// one's transaction was rolled back (the caller answers with the first's ids).
    #[error("the idempotency key was recorded by a concurrent request")]
    KeyTaken,
    #[error("job {job_id} is {state}, which never changes again")]
    AttemptFinished { job_id: i64, state: JobState },
    #[error("could not put an attachment in place: {source}")]
    FilePlacement { source: std::io::Error },
    #[error("unsupported database URL {url:?}: expected sqlite://FILE or postgres://...")]
    UnsupportedUrl { url: String },
    #[error("stored value is not what the schema promises: {detail}")]
    Corrupt { detail: String },
    #[error("database error: {0}")]
    Sql(#[from] sqlx::Error),
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl DbError {
    /// The database cannot be reached right now (down, restarting, every
    /// connection busy): the request may succeed later, so it is answered 503
    /// `unavailable`, never 500. PostgreSQL's SQLSTATE classes 08 (connection
    /// exception) and 57P (operator intervention: shutdown, crash recovery) mean
    /// the same when a pooled connection meets a restarting server.
    pub fn is_unavailable(&self) -> bool {
        match self {
            DbError::Sql(
                sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::Io(_)
                | sqlx::Error::WorkerCrashed,
            ) => true,
            DbError::Sql(sqlx::Error::Database(e)) => e
                .code()
                .is_some_and(|c| c.starts_with("08") || c.starts_with("57P")),
            DbError::FilePlacement { source } => matches!(
                source.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            ),
            _ => false,
        }
    }
}

#[derive(Debug, Clone)]
pub enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Which table a piece of claimable work lives in. Trials are their own table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkKind {
    Job,
    Trial,
}

#[derive(Debug, Clone)]
pub struct Db {
    /// On SQLite the one writer connection: every write, and what reads go with
    /// it, queue here in arrival order (the pool's fair semaphore) instead of
    /// meeting in SQLite's busy handler, whose back-off sleeps made the tail.
    pool: Pool,
    /// SQLite only: read-only connections for reads that need not queue behind
    /// the writer (the claim's probe, authentication, views, metrics). WAL lets
    /// them run while the writer writes.
    sqlite_reader: Option<SqlitePool>,
    metrics: Arc<Metrics>,
    delivery_cap: i64,
}

/// Runs `$body` with `$pool` bound to the concrete pool of either backend: the body
/// is compiled once per backend, so runtime queries stay typed without `AnyPool`.
macro_rules! on_pool {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db.pool() {
            $crate::server::db::Pool::Sqlite($pool) => $body,
            $crate::server::db::Pool::Postgres($pool) => $body,
        }
    };
}
pub(crate) use on_pool;

/// [`on_pool!`] for reads that need not queue behind SQLite's one writer: the
/// reader pool on SQLite, the one pool on PostgreSQL.
macro_rules! on_reader {
    ($db:expr, $pool:ident => $body:expr) => {
        match ($db.pool(), $db.sqlite_reader.as_ref()) {
            ($crate::server::db::Pool::Sqlite(_), Some($pool))
            | ($crate::server::db::Pool::Sqlite($pool), None) => $body,
            ($crate::server::db::Pool::Postgres($pool), _) => $body,
        }
    };
}
pub(crate) use on_reader;

/// A write transaction that takes the write lock up front: `BEGIN IMMEDIATE` on
/// SQLite (so a read-then-write transaction never fails to upgrade its lock), a
/// plain `BEGIN` on PostgreSQL (row locks do the work there).
pub(crate) trait BeginWrite {
    type Database: sqlx::Database;
    fn begin_write(
        &self,
    ) -> impl Future<Output = Result<Transaction<'static, Self::Database>, sqlx::Error>> + Send;
}

impl BeginWrite for SqlitePool {
    type Database = Sqlite;
    fn begin_write(
        &self,
    ) -> impl Future<Output = Result<Transaction<'static, Sqlite>, sqlx::Error>> + Send {
        self.begin_with("BEGIN IMMEDIATE")
    }
}

impl BeginWrite for PgPool {
    type Database = Postgres;
    fn begin_write(
        &self,
    ) -> impl Future<Output = Result<Transaction<'static, Postgres>, sqlx::Error>> + Send {
        self.begin()
    }
}

impl Db {
    /// Connects (creating a SQLite file when missing) and applies the migrations.
    pub async fn connect(
        url: &str,
        max_connections: u32,
        delivery_cap: u32,
        metrics: Arc<Metrics>,
    ) -> Result<Db, DbError> {
        let (pool, sqlite_reader) = if url.starts_with("sqlite:") {
            let (writer, reader) = connect_sqlite(url, max_connections).await?;
            (Pool::Sqlite(writer), Some(reader))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            (
                Pool::Postgres(connect_postgres(url, max_connections).await?),
                None,
            )
        } else {
            return Err(DbError::UnsupportedUrl {
                url: url.to_string(),
            });
        };
        Ok(Db {
            pool,
            sqlite_reader,
            metrics,
            delivery_cap: i64::from(delivery_cap),
        })
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    pub fn delivery_cap(&self) -> i64 {
        self.delivery_cap
    }

    pub fn counters(&self, work: WorkKind) -> &WorkCounters {
        match work {
            WorkKind::Job => &self.metrics.jobs,
            WorkKind::Trial => &self.metrics.trials,
        }
    }

    /// The one place a lease-bearing call's answer is judged. A row means the
    /// fence held. No row means the call changed nothing: `409 lease.lost`,
    /// counted as a dropped stale call, unless the caller's key has been revoked
    /// (`401 auth.revoked`: revocation requeued everything the runner held, so
    /// this is where a revoked key meets the database on every lease call).
    pub async fn fenced<T>(&self, fence: Fence<'_>, row: Option<T>) -> Result<T, DbError> {
        if let Some(row) = row {
            return Ok(row);
        }
        if self.runner_revoked(fence.runner_id).await? {
            return Err(DbError::RunnerRevoked {
                runner_id: fence.runner_id,
            });
        }
        self.counters(fence.work).stale_dropped.inc();
        Err(DbError::LeaseLost)
    }

    /// Is this runner's key revoked (or the runner unknown)?
    pub async fn runner_revoked(&self, runner_id: i64) -> Result<bool, DbError> {
        const SQL: &str = "SELECT id FROM runners WHERE id = $1 AND revoked_ms IS NULL";
        let active: Option<i64> = on_reader!(self, pool => sqlx::query_scalar(SQL)
            .bind(runner_id).fetch_optional(pool).await)?;
        Ok(active.is_none())
    }

    /// `SELECT 1`: is the database answering?
    pub async fn ping(&self) -> Result<(), DbError> {
        const SQL: &str = "SELECT 1";
        on_reader!(self, pool => sqlx::query(SQL).execute(pool).await.map(|_| ()))?;
        Ok(())
    }

    /// PostgreSQL plans the claim well only with fresh statistics (with none, it
    /// sorts every Queued row on each claim). Autovacuum refreshes them within a
    /// minute or so; a burst of submissions on a young table should not wait that
    /// long, so the reaper calls this and it runs `ANALYZE` on the claim's tables
    /// once a tenth of their rows changed. A no-op on SQLite.
    pub async fn refresh_planner_stats(&self) -> Result<(), DbError> {
        const STALE: &str = "SELECT s.relname::text FROM pg_stat_user_tables s \
             WHERE s.relid IN ('jobs'::regclass, 'trials'::regclass) \
             AND s.n_mod_since_analyze > 200 AND s.n_mod_since_analyze > s.n_live_tup / 10";
        const ANALYZE_JOBS: &str = "ANALYZE jobs";
        const ANALYZE_TRIALS: &str = "ANALYZE trials";
        let Pool::Postgres(pool) = &self.pool else {
            return Ok(());
        };
        let stale: Vec<String> = sqlx::query_scalar(STALE).fetch_all(pool).await?;
        for table in stale {
            let sql = if table == "jobs" {
                ANALYZE_JOBS
            } else {
                ANALYZE_TRIALS
            };
            sqlx::query(sql).execute(pool).await?;
        }
        Ok(())
    }

    pub async fn close(&self) {
        if let Some(reader) = &self.sqlite_reader {
            reader.close().await;
        }
        on_pool!(self, pool => pool.close().await);
    }
}

/// The writer (one connection, which also migrates) and the readers (read-only,
/// `max_connections` of them).
async fn connect_sqlite(
    url: &str,
    max_connections: u32,
) -> Result<(SqlitePool, SqlitePool), DbError> {
    let options: SqliteConnectOptions = url.parse()?;
    let writer_options = options
        .clone()
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(SQLITE_BUSY_TIMEOUT)
        .foreign_keys(true);
    let writer = SqlitePoolOptions::new()
        .max_connections(1)
        .acquire_timeout(SQLITE_BUSY_TIMEOUT)
        .connect_with(writer_options)
        .await?;
    SQLITE_MIGRATIONS.run(&writer).await?;
    let reader_options = options.read_only(true).busy_timeout(SQLITE_BUSY_TIMEOUT);
    let reader = SqlitePoolOptions::new()
        .max_connections(max_connections.max(1))
        .acquire_timeout(SQLITE_BUSY_TIMEOUT)
        .connect_with(reader_options)
        .await?;
    Ok((writer, reader))
}

async fn connect_postgres(url: &str, max_connections: u32) -> Result<PgPool, DbError> {
    let options: PgConnectOptions = url.parse()?;
    let pool = PgPoolOptions::new()
        .max_connections(max_connections.max(1))
        .acquire_timeout(POSTGRES_ACQUIRE_TIMEOUT)
        .connect_with(options)
        .await?;
    // sqlx takes an advisory lock, so servers starting together migrate once.
    POSTGRES_MIGRATIONS.run(&pool).await?;
    Ok(pool)
}

/// A stored state string back into a [`JobState`].
pub(crate) fn parse_state(s: &str) -> Result<JobState, DbError> {
    s.parse().map_err(|_| DbError::Corrupt {
        detail: format!("unknown state {s:?}"),
    })
}

/// Is this error a unique-constraint violation (two writers raced for one key)?
pub(crate) fn is_unique_violation(err: &sqlx::Error) -> bool {
    err.as_database_error()
        .is_some_and(|e| e.is_unique_violation())
}

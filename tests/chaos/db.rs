//! The checker reads the Server's database itself: the ledger is what was stored,
//! not what an API answer says of it.

use sqlx::Row;

pub enum Db {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

#[derive(Debug, Clone)]
pub struct SubmissionRow {
    pub id: i64,
    pub problem_id: i64,
    pub language: String,
    pub files: String,
    pub callback_url: Option<String>,
    pub created_ms: i64,
}

#[derive(Debug, Clone)]
pub struct JobRow {
    pub id: i64,
    pub submission_id: i64,
    pub attempt: i64,
    pub state: String,
    pub deliveries: i64,
    pub refunds: i64,
    pub releases: i64,
    pub failure_reason: Option<String>,
    pub runner_id: Option<i64>,
}

#[derive(Debug, Clone)]
pub struct ResultRow {
    pub job_id: i64,
    pub verdict: String,
    pub score: f64,
    pub created_ms: i64,
}

#[derive(Debug, Clone)]
pub struct OutboxRow {
    pub job_id: i64,
    pub state: String,
    pub delivery_id: Option<String>,
    pub delivered: bool,
    pub gave_up: bool,
}

const SUBMISSIONS: &str =
    "SELECT id, problem_id, language, files, callback_url, created_ms FROM submissions ORDER BY id";
const JOBS: &str = "SELECT id, submission_id, attempt, state, deliveries, refunds, releases, failure_reason, runner_id FROM jobs ORDER BY id";
const RESULTS: &str =
    "SELECT evaluation_job_id, verdict, score, created_ms FROM results ORDER BY evaluation_job_id";
const SUBMISSION_KEYS: &str = "SELECT client_key, first_id FROM idempotency_keys WHERE route = 'submissions' ORDER BY client_key";
const OUTBOX: &str = "SELECT job_id, state, delivery_id, delivered_ms IS NOT NULL AS delivered, gave_up_ms IS NOT NULL AS gave_up FROM webhook_outbox ORDER BY id";

macro_rules! rows {
    ($db:expr, $sql:expr, |$row:ident| $make:expr) => {
        match $db {
            Db::Sqlite(pool) => sqlx::query($sql)
                .fetch_all(pool)
                .await
                .unwrap()
                .iter()
                .map(|$row| $make)
                .collect::<Vec<_>>(),
            Db::Postgres(pool) => sqlx::query($sql)
                .fetch_all(pool)
                .await
                .unwrap()
                .iter()
                .map(|$row| $make)
                .collect::<Vec<_>>(),
        }
    };
}

impl Db {
    pub async fn connect(url: &str) -> Db {
        if url.starts_with("sqlite:") {
            Db::Sqlite(sqlx::SqlitePool::connect(url).await.unwrap())
        } else {
            Db::Postgres(sqlx::PgPool::connect(url).await.unwrap())
        }
    }

    pub async fn submissions(&self) -> Vec<SubmissionRow> {
        rows!(self, SUBMISSIONS, |r| SubmissionRow {
            id: r.get(0),
            problem_id: r.get(1),
            language: r.get(2),
            files: r.get(3),
            callback_url: r.get(4),
            created_ms: r.get(5),
        })
    }

    pub async fn jobs(&self) -> Vec<JobRow> {
        rows!(self, JOBS, |r| JobRow {
            id: r.get(0),
            submission_id: r.get(1),
            attempt: r.get(2),
            state: r.get(3),
            deliveries: r.get(4),
            refunds: r.get(5),
            releases: r.get(6),
            failure_reason: r.get(7),
            runner_id: r.get(8),
        })
    }

    pub async fn results(&self) -> Vec<ResultRow> {
        rows!(self, RESULTS, |r| ResultRow {
            job_id: r.get(0),
            verdict: r.get(1),
            score: r.get(2),
            created_ms: r.get(3),
        })
    }

    /// `(client_key, submission_id)` of every `Idempotency-Key` of a submission.
    pub async fn submission_keys(&self) -> Vec<(String, i64)> {
        rows!(self, SUBMISSION_KEYS, |r| (r.get(0), r.get(1)))
    }

    pub async fn outbox(&self) -> Vec<OutboxRow> {
        rows!(self, OUTBOX, |r| OutboxRow {
            job_id: r.get(0),
            state: r.get(1),
            delivery_id: r.get(2),
            delivered: r.get(3),
            gave_up: r.get(4),
        })
    }
}

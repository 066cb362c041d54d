//! The listing reads behind `GET /api/jobs`, `/api/submissions`, `/api/runners`,
//! `/api/problems` and `/api/queue` (CONTRACT §7), shared by the JSON routes and
//! the HTML console. Reads only, on the reader connections; none can see a trial.
//!
//! Pages are keysets, newest first: a page is `id < cursor ORDER BY id DESC LIMIT
//! n`, never an `OFFSET`, so a page costs the same at any depth, and rows created
//! while a client walks the pages never shift it (they are newer than every cursor
//! it holds: no duplicates, no gaps). The cursor is opaque on the wire
//! ([`encode_cursor`]): base64url of `<listing>:<id>`, so a cursor of one listing is
//! refused by another.
//!
//! Each filter has an index (migration 0007): `jobs (state, id)`, `(language,
//! id)`, `(runner_id, id)`, `results (verdict,
//! evaluation_job_id)`, `submissions (language, id)`, `(problem_id, id)`; and
//! (migration 0009) `jobs (state, language, id)` for both filters together and
//! `jobs (state, submission_id)` for a submissions page of one state.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::FromRow;

use super::{Db, DbError, on_reader, parse_state};
use crate::protocol::JobState;
use crate::server::clock::{Millis, to_datetime};

/// Items per page when `?limit=` is absent.
pub const DEFAULT_LIMIT: u32 = 50;
/// Most items one page may hold.
pub const MAX_LIMIT: u32 = 500;
/// The window of the queue summary's per-minute rates.
pub const RATE_WINDOW_MS: Millis = 3_600_000;

/// Most jobs a `since`/`until` window may hold to be read by its index and sorted
/// on PostgreSQL ([`Db::narrow_window`]).
const NARROW_WINDOW: i64 = 5_000;

/// Which listing a cursor belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    Jobs,
    Submissions,
    Runners,
    Problems,
}

impl Listing {
    const fn tag(self) -> &'static str {
        match self {
            Listing::Jobs => "jobs",
            Listing::Submissions => "submissions",
            Listing::Runners => "runners",
            Listing::Problems => "problems",
        }
    }
}

/// A request's `?limit=` or `?cursor=` is not acceptable (400 `request.invalid`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    #[error("limit must be between 1 and {MAX_LIMIT}, not {0}")]
    Limit(i64),
    #[error("cursor is not a cursor of this listing (take next_cursor from the previous page)")]
    Cursor,
}

/// Which page to read: at most `limit` items older than `before` (an id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    pub limit: u32,
    /// The id the previous page ended at; `None` for the first page.
    pub before: Option<i64>,
}

impl PageRequest {
    /// Checks `?limit=` (default [`DEFAULT_LIMIT`], 1 to [`MAX_LIMIT`]) and decodes
    /// `?cursor=` (it must come from the same listing).
    pub fn parse(
        listing: Listing,
        limit: Option<i64>,
        cursor: Option<&str>,
    ) -> Result<PageRequest, PageError> {
        let limit = match limit {
            None => DEFAULT_LIMIT,
            Some(n) if (1..=i64::from(MAX_LIMIT)).contains(&n) => {
                u32::try_from(n).map_err(|_| PageError::Limit(n))?
            }
            Some(n) => return Err(PageError::Limit(n)),
        };
        let before = cursor.map(|c| decode_cursor(listing, c)).transpose()?;
        Ok(PageRequest { limit, before })
    }

    /// The first page of `limit` items.
    pub fn first(limit: u32) -> PageRequest {
        PageRequest {
            limit: limit.clamp(1, MAX_LIMIT),
            before: None,
        }
    }
}

/// The opaque `next_cursor` for a page that ended at `id`.
pub fn encode_cursor(listing: Listing, id: i64) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}:{id}", listing.tag()))
}

/// The id a cursor of `listing` stands for.
pub fn decode_cursor(listing: Listing, cursor: &str) -> Result<i64, PageError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(cursor.as_bytes())
        .map_err(|_| PageError::Cursor)?;
    let text = std::str::from_utf8(&bytes).map_err(|_| PageError::Cursor)?;
    let (tag, id) = text.split_once(':').ok_or(PageError::Cursor)?;
    if tag != listing.tag() {
        return Err(PageError::Cursor);
    }
    // Only what encode_cursor writes: a positive decimal id, no sign or padding.
    if id.is_empty() || id.len() > 19 || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(PageError::Cursor);
    }
    id.parse::<i64>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or(PageError::Cursor)
}

/// One page of a listing: `{"items": [...], "next_cursor": string|null}`.
/// `next_cursor` is null on the last page.
#[derive(Debug, Clone, Serialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

/// The filters of `GET /api/jobs` and `GET /api/submissions`; every one that is
/// set must hold. On submissions, `state`, `runner_id` and `verdict` are those of
/// the submission's latest attempt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkFilter {
    pub state: Option<JobState>,
    pub language: Option<String>,
    pub problem_id: Option<i64>,
    pub runner_id: Option<i64>,
    pub verdict: Option<String>,
    /// Created at or after (milliseconds).
    pub since_ms: Option<Millis>,
    /// Created before (milliseconds).
    pub until_ms: Option<Millis>,
}

/// One row of `GET /api/jobs`: the job's state and where it runs, its submission's
/// problem and language, and its Result's verdict and score once Completed.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct JobItem {
    /// The job id.
    pub id: i64,
    pub submission_id: i64,
    pub attempt: i64,
    pub problem_id: i64,
    pub problem_version_id: i64,
    pub language: String,
    pub state: JobState,
    pub runner_id: Option<i64>,
    pub deliveries: i64,
    pub failure_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub verdict: Option<String>,
    pub score: Option<f64>,
    pub max_score: Option<f64>,
}

/// One row of `GET /api/submissions`: the submission and its latest attempt.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct SubmissionItem {
    pub submission_id: i64,
    pub problem_id: i64,
    pub language: String,
    pub created_at: DateTime<Utc>,
    /// The latest attempt's job.
    pub job_id: i64,
    pub attempt: i64,
    pub state: JobState,
    pub runner_id: Option<i64>,
    pub verdict: Option<String>,
    pub score: Option<f64>,
    pub max_score: Option<f64>,
}

/// One row of `GET /api/runners`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RunnerItem {
    pub runner_id: i64,
    pub name: String,
    pub created_at: DateTime<Utc>,
    /// When its key was revoked, or null.
    pub revoked_at: Option<DateTime<Utc>>,
    /// Its latest call to this Server (claim, lease, result, package...), to
    /// within a few seconds; null when never heard from.
    pub last_seen_at: Option<DateTime<Utc>>,
    /// The languages its latest claim offered.
    pub languages: Vec<String>,
    /// The version its latest claim named (its `User-Agent`), or null.
    pub runner_version: Option<String>,
    /// The ids of the jobs it holds now (Running under its lease), oldest first.
    pub jobs: Vec<i64>,
}

/// One version of a problem in `GET /api/problems`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ProblemVersionItem {
    pub problem_version_id: i64,
    pub sha256: String,
    pub size: i64,
    pub time_limit: Option<f64>,
    pub created_at: DateTime<Utc>,
}

/// One row of `GET /api/problems`: the problem and its versions, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ProblemItem {
    pub problem_id: i64,
    pub created_at: DateTime<Utc>,
    pub versions: Vec<ProblemVersionItem>,
}

/// `GET /api/queue`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct QueueSummary {
    /// Jobs in each state, every state named (0 when none).
    pub by_state: BTreeMap<String, i64>,
    /// Queued jobs per language (languages with none are left out).
    pub by_language: BTreeMap<String, i64>,
    /// How long the oldest Queued job has existed, in seconds; 0 when none is Queued.
    pub oldest_queued_seconds: f64,
    /// Jobs claimed in the last hour, per minute (a job claimed twice in the hour
    /// counts once: its latest claim).
    pub claims_per_minute: f64,
    /// Results stored in the last hour, per minute.
    pub results_per_minute: f64,
}

/// Counts per state, Queued per language, the oldest Queued job's creation, the
/// claims and the Results of the window.
type QueueRows = (
    Vec<(String, i64)>,
    Vec<(String, i64)>,
    Option<i64>,
    i64,
    i64,
);

/// A value bound to a `$N` placeholder of a built query.
#[derive(Debug, Clone)]
enum Arg {
    Int(i64),
    Text(String),
}

/// A `WHERE` clause built from filters, its placeholders numbered in order.
#[derive(Debug, Default)]
struct Conditions {
    sql: Vec<String>,
    args: Vec<Arg>,
}

impl Conditions {
    /// Adds `template` with `{}` replaced by the next placeholder.
    fn push(&mut self, template: &str, arg: Arg) {
        self.args.push(arg);
        self.sql
            .push(template.replace("{}", &format!("${}", self.args.len())));
    }

    fn where_clause(&self) -> String {
        if self.sql.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", self.sql.join(" AND "))
        }
    }

    /// `LIMIT` as the next placeholder.
    fn limit(&mut self, n: u32) -> String {
        self.args.push(Arg::Int(i64::from(n)));
        format!(" LIMIT ${}", self.args.len())
    }
}

/// Runs a built query on the reader and maps every row with `FromRow`.
macro_rules! fetch_built {
    ($db:expr, $row:ty, $sql:expr, $args:expr) => {{
        let sql: &str = $sql;
        let args: &[Arg] = $args;
        on_reader!($db, pool => {
            // Built from this module's own fragments only; every value is bound.
            // Not a prepared statement kept per connection: PostgreSQL then plans
            // each page with its values (a generic plan does not know that a
            // verdict, a state or a time window is rare, and walked the whole
            // history for one).
            let mut q = sqlx::query_as::<_, $row>(sqlx::AssertSqlSafe(sql.to_string()))
                .persistent(false);
            for a in args {
                q = match a {
                    Arg::Int(n) => q.bind(*n),
                    Arg::Text(t) => q.bind(t.clone()),
                };
            }
            q.fetch_all(pool).await
        })
    }};
}

#[derive(Debug, FromRow)]
struct JobRow {
    id: i64,
    submission_id: i64,
    attempt: i64,
    problem_id: i64,
    problem_version_id: i64,
    language: String,
    state: String,
    runner_id: Option<i64>,
    deliveries: i64,
    failure_reason: Option<String>,
    created_ms: i64,
    verdict: Option<String>,
    score: Option<f64>,
    max_score: Option<f64>,
}

#[derive(Debug, FromRow)]
struct SubmissionRow {
    submission_id: i64,
    problem_id: i64,
    language: String,
    created_ms: i64,
    job_id: i64,
    attempt: i64,
    state: String,
    runner_id: Option<i64>,
    verdict: Option<String>,
    score: Option<f64>,
    max_score: Option<f64>,
}

#[derive(Debug, FromRow)]
struct RunnerRow {
    id: i64,
    name: String,
    created_ms: i64,
    revoked_ms: Option<i64>,
    last_seen_ms: Option<i64>,
    last_languages: Option<String>,
    runner_version: Option<String>,
}

#[derive(Debug, FromRow)]
struct ProblemRow {
    id: i64,
    created_ms: i64,
}

#[derive(Debug, FromRow)]
struct VersionRow {
    id: i64,
    problem_id: i64,
    sha256: String,
    size: i64,
    time_limit: Option<f64>,
    created_ms: i64,
}

/// Adds the filters of jobs (alias `j`), submissions (`s`) and results (`r`).
/// `own` is the alias whose `created_ms` the time filters read.
fn work_conditions(filter: &WorkFilter, own: &str, problem: &str) -> Conditions {
    let mut c = Conditions::default();
    if let Some(state) = filter.state {
        c.push("j.state = {}", Arg::Text(state.as_str().to_string()));
    }
    if let Some(language) = &filter.language {
        c.push(
            &format!("{own}.language = {{}}"),
            Arg::Text(language.clone()),
        );
    }
    if let Some(problem_id) = filter.problem_id {
        c.push(problem, Arg::Int(problem_id));
    }
    if let Some(runner_id) = filter.runner_id {
        c.push("j.runner_id = {}", Arg::Int(runner_id));
    }
    if let Some(verdict) = &filter.verdict {
        c.push("r.verdict = {}", Arg::Text(verdict.clone()));
    }
    if let Some(since) = filter.since_ms {
        c.push(&format!("{own}.created_ms >= {{}}"), Arg::Int(since));
    }
    if let Some(until) = filter.until_ms {
        c.push(&format!("{own}.created_ms < {{}}"), Arg::Int(until));
    }
    c
}

/// The page's items and, when a further row exists, the cursor after the last.
fn paged<T>(mut items: Vec<T>, limit: u32, listing: Listing, id_of: impl Fn(&T) -> i64) -> Page<T> {
    let limit = limit as usize;
    let more = items.len() > limit;
    items.truncate(limit);
    let next_cursor = if more {
        items.last().map(|last| encode_cursor(listing, id_of(last)))
    } else {
        None
    };
    Page { items, next_cursor }
}

impl Db {
    /// `GET /api/jobs`: one page of jobs matching `filter`, newest first.
    pub async fn list_jobs(
        &self,
        filter: &WorkFilter,
        page: PageRequest,
    ) -> Result<Page<JobItem>, DbError> {
        // The problem is kept out of index choice (`+`): SQLite otherwise walked
        // the submissions of the problem and sorted every job of it; newest jobs
        // first, keeping those of the problem, is the page.
        let mut c = work_conditions(filter, "j", "+s.problem_id = {}");
        if let Some(before) = page.before {
            // With a verdict the walk is of the results index: its bound there.
            if filter.verdict.is_some() {
                c.push("r.evaluation_job_id < {}", Arg::Int(before));
                // The same bound on the jobs side (r.evaluation_job_id = j.id):
                // PostgreSQL merge-joins the two indexes backwards, and without it
                // walked every job newer than the cursor to reach the first one.
                c.push("j.id < {}", Arg::Int(before));
            } else {
                c.push("j.id < {}", Arg::Int(before));
            }
        }
        // A verdict filter starts from its index of results; otherwise the
        // results are a lookup per row.
        let from = if filter.verdict.is_some() {
            "FROM results r JOIN jobs j ON j.id = r.evaluation_job_id \
             JOIN submissions s ON s.id = j.submission_id"
        } else {
            "FROM jobs j JOIN submissions s ON s.id = j.submission_id \
             LEFT JOIN results r ON r.evaluation_job_id = j.id"
        };
        let order = if filter.verdict.is_some() {
            " ORDER BY r.evaluation_job_id DESC"
        } else if self.narrow_window(filter).await? {
            // Few jobs in the window: read them by `jobs_by_created` and sort
            // them (`+ 0` keeps the primary key out of the order's choice).
            " ORDER BY j.id + 0 DESC"
        } else {
            " ORDER BY j.id DESC"
        };
        let limit = c.limit(page.limit + 1);
        let sql = format!(
            "SELECT j.id, j.submission_id, j.attempt, s.problem_id, j.problem_version_id, \
             j.language, j.state, j.runner_id, j.deliveries, j.failure_reason, j.created_ms, \
             r.verdict, r.score, r.max_score {from}{}{order}{limit}",
            c.where_clause()
        );
        let rows: Vec<JobRow> = fetch_built!(self, JobRow, &sql, &c.args)?;
        let items = rows
            .into_iter()
            .map(|r| {
                Ok(JobItem {
                    id: r.id,
                    submission_id: r.submission_id,
                    attempt: r.attempt,
                    problem_id: r.problem_id,
                    problem_version_id: r.problem_version_id,
                    language: r.language,
                    state: parse_state(&r.state)?,
                    runner_id: r.runner_id,
                    deliveries: r.deliveries,
                    failure_reason: r.failure_reason,
                    created_at: to_datetime(r.created_ms),
                    verdict: r.verdict,
                    score: r.score,
                    max_score: r.max_score,
                })
            })
            .collect::<Result<Vec<_>, DbError>>()?;
        Ok(paged(items, page.limit, Listing::Jobs, |j| j.id))
    }

    /// On PostgreSQL, does `filter`'s `since`/`until` window hold at most
    /// [`NARROW_WINDOW`] jobs? One bounded index-only count of `jobs_by_created`.
    /// PostgreSQL's planner takes the jobs as spread evenly over the ids and walks
    /// the primary key newest first for a page of a window deep in the history
    /// (every newer job read and dropped); a narrow window is cheaper read by its
    /// own index and sorted. SQLite picks the window's index by itself.
    async fn narrow_window(&self, filter: &WorkFilter) -> Result<bool, DbError> {
        if filter.since_ms.is_none() && filter.until_ms.is_none() {
            return Ok(false);
        }
        let super::Pool::Postgres(pool) = self.pool() else {
            return Ok(false);
        };
        const SQL: &str = "SELECT COUNT(*) FROM (SELECT 1 FROM jobs WHERE created_ms >= $1 \
             AND created_ms < $2 LIMIT $3) w";
        let n: i64 = sqlx::query_scalar(SQL)
            .bind(filter.since_ms.unwrap_or(i64::MIN))
            .bind(filter.until_ms.unwrap_or(i64::MAX))
            .bind(NARROW_WINDOW + 1)
            .persistent(false)
            .fetch_one(pool)
            .await?;
        Ok(n <= NARROW_WINDOW)
    }

    /// `GET /api/submissions`: one page of submissions matching `filter` (state,
    /// runner and verdict of their latest attempt), newest first.
    pub async fn list_submissions(
        &self,
        filter: &WorkFilter,
        page: PageRequest,
    ) -> Result<Page<SubmissionItem>, DbError> {
        // With a state: walk that state's jobs by submission, newest first
        // (`jobs_by_state_submission`, migration 0009), keeping those that are
        // their submission's latest attempt; not every submission, newest first,
        // with a probe of its latest attempt each (a rare state read ~100 of them
        // per item: 83 ms on SQLite at 1M jobs).
        let by_state = filter.state.is_some();
        let indexed_by = match self.pool() {
            super::Pool::Sqlite(_) => " INDEXED BY jobs_by_state_submission",
            super::Pool::Postgres(_) => "",
        };
        let mut c = work_conditions(filter, "s", "s.problem_id = {}");
        if let Some(before) = page.before {
            if by_state {
                c.push("j.submission_id < {}", Arg::Int(before));
            } else {
                c.push("s.id < {}", Arg::Int(before));
            }
        }
        let limit = c.limit(page.limit + 1);
        // The latest attempt: one probe of UNIQUE (submission_id, attempt) per
        // submission, walked newest first (a LATERAL join on PostgreSQL, whose
        // planner otherwise aggregated every job).
        let latest = match self.pool() {
            super::Pool::Sqlite(_) => {
                "JOIN jobs j ON j.submission_id = s.id AND j.attempt = \
                 (SELECT MAX(a.attempt) FROM jobs a WHERE a.submission_id = s.id)"
            }
            super::Pool::Postgres(_) => {
                "CROSS JOIN LATERAL (SELECT a.id, a.attempt, a.state, a.runner_id FROM jobs a \
                 WHERE a.submission_id = s.id ORDER BY a.attempt DESC LIMIT 1) j"
            }
        };
        let columns = "SELECT s.id AS submission_id, s.problem_id, s.language, s.created_ms, \
             j.id AS job_id, j.attempt, j.state, j.runner_id, r.verdict, r.score, r.max_score";
        let sql = if by_state {
            format!(
                "{columns} FROM jobs j{indexed_by} \
                 JOIN submissions s ON s.id = j.submission_id \
                 LEFT JOIN results r ON r.evaluation_job_id = j.id{} AND j.attempt = \
                 (SELECT MAX(a.attempt) FROM jobs a WHERE a.submission_id = j.submission_id) \
                 ORDER BY j.submission_id DESC{limit}",
                c.where_clause()
            )
        } else {
            format!(
                "{columns} FROM submissions s {latest} \
                 LEFT JOIN results r ON r.evaluation_job_id = j.id{} ORDER BY s.id DESC{limit}",
                c.where_clause()
            )
        };
        let rows: Vec<SubmissionRow> = fetch_built!(self, SubmissionRow, &sql, &c.args)?;
        let items = rows
            .into_iter()
            .map(|r| {
                Ok(SubmissionItem {
                    submission_id: r.submission_id,
                    problem_id: r.problem_id,
                    language: r.language,
                    created_at: to_datetime(r.created_ms),
                    job_id: r.job_id,
                    attempt: r.attempt,
                    state: parse_state(&r.state)?,
                    runner_id: r.runner_id,
                    verdict: r.verdict,
                    score: r.score,
                    max_score: r.max_score,
                })
            })
            .collect::<Result<Vec<_>, DbError>>()?;
        Ok(paged(items, page.limit, Listing::Submissions, |s| {
            s.submission_id
        }))
    }

    /// `GET /api/runners`: one page of Runners (revoked ones too), newest first,
    /// each with what it last told this Server and the jobs it holds now.
    pub async fn list_runners(&self, page: PageRequest) -> Result<Page<RunnerItem>, DbError> {
        let mut c = Conditions::default();
        if let Some(before) = page.before {
            c.push("id < {}", Arg::Int(before));
        }
        let limit = c.limit(page.limit + 1);
        let sql = format!(
            "SELECT id, name, created_ms, revoked_ms, last_seen_ms, last_languages, \
             runner_version FROM runners{} ORDER BY id DESC{limit}",
            c.where_clause()
        );
        let rows: Vec<RunnerRow> = fetch_built!(self, RunnerRow, &sql, &c.args)?;
        let page = paged(rows, page.limit, Listing::Runners, |r| r.id);
        // The page's ids are contiguous among runners: one range read of the
        // Running jobs (the `jobs_running_by_runner` index) covers exactly them.
        let held: Vec<(i64, i64)> = match (page.items.last(), page.items.first()) {
            (Some(low), Some(high)) => {
                const HELD: &str = "SELECT runner_id, id FROM jobs WHERE state = 'Running' \
                     AND runner_id BETWEEN $1 AND $2 ORDER BY id";
                on_reader!(self, pool => sqlx::query_as(HELD)
                    .bind(low.id).bind(high.id).fetch_all(pool).await)?
            }
            _ => Vec::new(),
        };
        let items = page
            .items
            .into_iter()
            .map(|r| {
                let languages = match &r.last_languages {
                    Some(json) => serde_json::from_str(json).map_err(|e| DbError::Corrupt {
                        detail: format!("runner {} languages: {e}", r.id),
                    })?,
                    None => Vec::new(),
                };
                Ok(RunnerItem {
                    runner_id: r.id,
                    jobs: held
                        .iter()
                        .filter(|(runner, _)| *runner == r.id)
                        .map(|(_, job)| *job)
                        .collect(),
                    name: r.name,
                    created_at: to_datetime(r.created_ms),
                    revoked_at: r.revoked_ms.map(to_datetime),
                    last_seen_at: r.last_seen_ms.map(to_datetime),
                    languages,
                    runner_version: r.runner_version,
                })
            })
            .collect::<Result<Vec<_>, DbError>>()?;
        Ok(Page {
            items,
            next_cursor: page.next_cursor,
        })
    }

    /// `GET /api/problems`: one page of problems, newest first, each with its
    /// versions oldest first.
    pub async fn list_problems(&self, page: PageRequest) -> Result<Page<ProblemItem>, DbError> {
        let mut c = Conditions::default();
        if let Some(before) = page.before {
            c.push("id < {}", Arg::Int(before));
        }
        let limit = c.limit(page.limit + 1);
        let sql = format!(
            "SELECT id, created_ms FROM problems{} ORDER BY id DESC{limit}",
            c.where_clause()
        );
        let rows: Vec<ProblemRow> = fetch_built!(self, ProblemRow, &sql, &c.args)?;
        let page = paged(rows, page.limit, Listing::Problems, |p| p.id);
        let versions: Vec<VersionRow> = match (page.items.last(), page.items.first()) {
            (Some(low), Some(high)) => {
                const VERSIONS: &str = "SELECT id, problem_id, sha256, size, time_limit, \
                     created_ms FROM problem_versions WHERE problem_id BETWEEN $1 AND $2 \
                     ORDER BY id";
                on_reader!(self, pool => sqlx::query_as(VERSIONS)
                    .bind(low.id).bind(high.id).fetch_all(pool).await)?
            }
            _ => Vec::new(),
        };
        let items = page
            .items
            .into_iter()
            .map(|p| ProblemItem {
                problem_id: p.id,
                created_at: to_datetime(p.created_ms),
                versions: versions
                    .iter()
                    .filter(|v| v.problem_id == p.id)
                    .map(|v| ProblemVersionItem {
                        problem_version_id: v.id,
                        sha256: v.sha256.clone(),
                        size: v.size,
                        time_limit: v.time_limit,
                        created_at: to_datetime(v.created_ms),
                    })
                    .collect(),
            })
            .collect();
        Ok(Page {
            items,
            next_cursor: page.next_cursor,
        })
    }

    /// `GET /api/queue` at time `now`: jobs per state (the trigger-kept counters),
    /// Queued jobs per language, the oldest Queued job's age, and the claims and
    /// Results of the last hour per minute.
    pub async fn queue_summary(&self, now: Millis) -> Result<QueueSummary, DbError> {
        const BY_STATE: &str = "SELECT state, CAST(SUM(n) AS BIGINT) FROM state_counts \
             WHERE kind = 'job' GROUP BY state";
        const BY_LANGUAGE: &str = "SELECT language, COUNT(*) FROM jobs WHERE state = 'Queued' \
             GROUP BY language";
        const OLDEST: &str =
            "SELECT created_ms FROM jobs WHERE state = 'Queued' ORDER BY id LIMIT 1";
        const CLAIMS: &str = "SELECT COUNT(*) FROM jobs WHERE claimed_ms >= $1";
        const RESULTS: &str = "SELECT COUNT(*) FROM results WHERE created_ms >= $1";
        let since = now.saturating_sub(RATE_WINDOW_MS);
        // Five statements at once, each on its own reader connection (they were
        // never one snapshot): the two counts of the window's claims and Results
        // are most of the time (an index-only count of every claim and Result of
        // the last hour; see BENCHMARKS.md "Listing").
        let (states, languages, oldest, claims, results): QueueRows = on_reader!(self, pool => {
            tokio::try_join!(
                sqlx::query_as(BY_STATE).fetch_all(pool),
                sqlx::query_as(BY_LANGUAGE).fetch_all(pool),
                sqlx::query_scalar(OLDEST).fetch_optional(pool),
                sqlx::query_scalar(CLAIMS).bind(since).fetch_one(pool),
                sqlx::query_scalar(RESULTS).bind(since).fetch_one(pool),
            )
        })?;
        let mut by_state: BTreeMap<String, i64> = JobState::ALL
            .iter()
            .map(|s| (s.as_str().to_string(), 0))
            .collect();
        for (state, n) in states {
            by_state.insert(state, n);
        }
        let window_minutes = (RATE_WINDOW_MS / 60_000) as f64;
        Ok(QueueSummary {
            by_state,
            by_language: languages.into_iter().collect(),
            oldest_queued_seconds: oldest
                .map(|ms| (now.saturating_sub(ms)).max(0) as f64 / 1000.0)
                .unwrap_or(0.0),
            claims_per_minute: claims as f64 / window_minutes,
            results_per_minute: results as f64 / window_minutes,
        })
    }

    /// Does problem `id` exist?
    pub async fn problem_exists(&self, id: i64) -> Result<bool, DbError> {
        const SQL: &str = "SELECT id FROM problems WHERE id = $1";
        let found: Option<i64> = on_reader!(self, pool => sqlx::query_scalar(SQL)
            .bind(id).fetch_optional(pool).await)?;
        Ok(found.is_some())
    }

    /// Does runner `id` exist (revoked or not)?
    pub async fn runner_exists(&self, id: i64) -> Result<bool, DbError> {
        const SQL: &str = "SELECT id FROM runners WHERE id = $1";
        let found: Option<i64> = on_reader!(self, pool => sqlx::query_scalar(SQL)
            .bind(id).fetch_optional(pool).await)?;
        Ok(found.is_some())
    }

    /// Records a Runner's call at `now` (and, from a claim, its languages and
    /// version). One `UPDATE` of its row; the caller throttles how often.
    pub async fn note_runner_activity(
        &self,
        runner_id: i64,
        now: Millis,
        claim: Option<(&[String], Option<&str>)>,
    ) -> Result<(), DbError> {
        const SEEN: &str = "UPDATE runners SET last_seen_ms = $2 WHERE id = $1";
        const CLAIMED: &str = "UPDATE runners SET last_seen_ms = $2, last_languages = $3, \
             runner_version = $4 WHERE id = $1";
        match claim {
            None => {
                super::on_pool!(self, pool => sqlx::query(SEEN)
                    .bind(runner_id).bind(now).execute(pool).await.map(|_| ()))?;
            }
            Some((languages, version)) => {
                let languages = serde_json::to_string(languages).map_err(|e| DbError::Corrupt {
                    detail: format!("languages do not serialise: {e}"),
                })?;
                super::on_pool!(self, pool => sqlx::query(CLAIMED)
                    .bind(runner_id).bind(now).bind(languages).bind(version)
                    .execute(pool).await.map(|_| ()))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_belong_to_one_listing() {
        let c = encode_cursor(Listing::Jobs, 42);
        assert_eq!(decode_cursor(Listing::Jobs, &c), Ok(42));
        assert_eq!(decode_cursor(Listing::Runners, &c), Err(PageError::Cursor));
        for bad in ["", "x", "!!!", &URL_SAFE_NO_PAD.encode("jobs:-1")] {
            assert_eq!(decode_cursor(Listing::Jobs, bad), Err(PageError::Cursor));
        }
        assert_eq!(
            decode_cursor(Listing::Jobs, &URL_SAFE_NO_PAD.encode("jobs:0")),
            Err(PageError::Cursor)
        );
    }

    #[test]
    fn limits_default_and_are_bounded() {
        let p = PageRequest::parse(Listing::Jobs, None, None).unwrap();
        assert_eq!((p.limit, p.before), (DEFAULT_LIMIT, None));
        assert!(PageRequest::parse(Listing::Jobs, Some(500), None).is_ok());
        assert_eq!(
            PageRequest::parse(Listing::Jobs, Some(501), None),
            Err(PageError::Limit(501))
        );
        assert_eq!(
            PageRequest::parse(Listing::Jobs, Some(0), None),
            Err(PageError::Limit(0))
        );
    }

    #[test]
    fn conditions_number_their_placeholders() {
        let f = WorkFilter {
            state: Some(JobState::Queued),
            verdict: Some("Accepted".into()),
            ..WorkFilter::default()
        };
        let mut c = work_conditions(&f, "j", "s.problem_id = {}");
        let limit = c.limit(51);
        assert_eq!(c.where_clause(), " WHERE j.state = $1 AND r.verdict = $2");
        assert_eq!(limit, " LIMIT $3");
    }
}

//! The console's pages and actions. Reads come from the listing layer
//! ([`crate::server::db::listing`]) and the views the API answers with; actions
//! call what the API's handlers call. Every action is a POST carrying the
//! session's CSRF token, answered with a redirect (or a page saying what
//! happened), and refused (403) to a session whose token lacks its scope.

use askama::Template;
use axum::Form;
use axum::extract::{Multipart, Path, Query, State};
use axum::http::header::{LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;

use super::error::{ConsoleError, safe_next};
use super::session::{self, Session};
use super::view::{
    Badge, Chart, When, bar_chart, bytes, duration, runner_badge, score, state_badge, verdict_badge,
};
use crate::protocol::codes::scope as scopes;
use crate::protocol::{JobState, SubmissionFile};
use crate::server::db::listing::{Listing, PageRequest};
use crate::server::db::records::NewVersion;
use crate::server::state::AppState;
use crate::server::storage::Storage;

/// How often a live page re-reads itself (with the script; without it, never).
const LIVE_SECONDS: u32 = 5;
/// Rows per console table page.
const PAGE_ROWS: u32 = 50;
/// Attachments and sources are shown up to this many bytes.
const SHOW_BYTES: usize = 256 << 10;
/// A `details` attachment larger than this is not parsed for the page.
const DETAILS_BYTES: u64 = 16 << 20;
/// A Runner heard from within this long is online (or within half a lease, when
/// that is longer: a busy Runner calls at least every third of one); before
/// that, stale.
const ONLINE_MS: i64 = 60_000;

fn online_ms(state: &AppState) -> i64 {
    i64::try_from(state.config.lease_seconds.saturating_mul(500))
        .unwrap_or(i64::MAX)
        .max(ONLINE_MS)
}

type Page = Result<Response, ConsoleError>;

/// What every page's frame shows.
pub struct Chrome {
    pub role: String,
    pub csrf: String,
    pub read_only: bool,
    pub active: &'static str,
    pub now: String,
    pub live: bool,
    pub live_seconds: u32,
}

impl Chrome {
    fn new(session: &Session, state: &AppState, active: &'static str, live: bool) -> Chrome {
        Chrome {
            role: session.role(),
            csrf: session.csrf.clone(),
            read_only: session.read_only(),
            active,
            now: super::view::absolute(state.now_ms()),
            live,
            live_seconds: LIVE_SECONDS,
        }
    }
}

fn render(page: &impl Template) -> Page {
    Ok(Html(page.render()?).into_response())
}

fn see_other(to: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        response.headers_mut().insert(LOCATION, v);
    }
    response
}

/// A path id: anything but a positive integer is a page that does not exist.
fn path_id(what: &str, raw: &str) -> Result<i64, ConsoleError> {
    raw.parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| ConsoleError::NotFound(format!("there is no {what} {raw:?}")))
}

/// A form body, or 400.
fn form<T>(
    body: Result<Form<T>, axum::extract::rejection::FormRejection>,
) -> Result<T, ConsoleError> {
    body.map(|Form(v)| v).map_err(|e| {
        ConsoleError::BadRequest(format!("this form is not what the console sent: {e}"))
    })
}

fn query<T>(
    q: Result<Query<T>, axum::extract::rejection::QueryRejection>,
) -> Result<T, ConsoleError> {
    q.map(|Query(v)| v)
        .map_err(|e| ConsoleError::BadRequest(format!("invalid query: {e}")))
}

/// Percent-encodes a query value (everything but unreserved characters).
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

// --- login / logout -------------------------------------------------------------

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    expired: bool,
    refused: bool,
    next: String,
}

#[derive(Debug, Deserialize, Default)]
pub struct LoginQuery {
    #[serde(default)]
    expired: Option<String>,
    #[serde(default)]
    next: Option<String>,
}

pub async fn login_page(
    q: Result<Query<LoginQuery>, axum::extract::rejection::QueryRejection>,
) -> Page {
    let q = q.map(|Query(v)| v).unwrap_or_default();
    render(&LoginPage {
        expired: q.expired.is_some(),
        refused: false,
        next: q
            .next
            .as_deref()
            .and_then(safe_next)
            .unwrap_or("")
            .to_string(),
    })
}

#[derive(Debug, Deserialize)]
pub struct LoginForm {
    token: String,
    #[serde(default)]
    next: String,
}

pub async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Form<LoginForm>, axum::extract::rejection::FormRejection>,
) -> Page {
    let body = form(body)?;
    match session::login(&state, &headers, &body.token).await {
        Ok(cookie) => {
            let mut response = see_other(safe_next(&body.next).unwrap_or("/console/"));
            let cookie = HeaderValue::from_str(&cookie)
                .map_err(|e| ConsoleError::Internal(format!("cookie header: {e}")))?;
            response.headers_mut().insert(SET_COOKIE, cookie);
            Ok(response)
        }
        Err(ConsoleError::LoginRefused) => {
            let mut response = render(&LoginPage {
                expired: false,
                refused: true,
                next: safe_next(&body.next).unwrap_or("").to_string(),
            })?;
            *response.status_mut() = StatusCode::UNAUTHORIZED;
            Ok(response)
        }
        Err(other) => Err(other),
    }
}

#[derive(Debug, Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    csrf: Option<String>,
}

pub async fn logout(
    State(state): State<AppState>,
    session: Session,
    headers: HeaderMap,
    body: Result<Form<CsrfForm>, axum::extract::rejection::FormRejection>,
) -> Page {
    let body = form(body)?;
    session.check_csrf(body.csrf.as_deref())?;
    session.logout(&state).await?;
    let mut response = see_other("/console/login");
    let cookie = session::clear_cookie(session::behind_tls(&headers, &state));
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(SET_COOKIE, v);
    }
    Ok(response)
}

// --- overview -------------------------------------------------------------------

pub struct Count {
    key: String,
    badge: Badge,
    count: i64,
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewPage {
    chrome: Chrome,
    by_state: Vec<Count>,
    by_language: Vec<Count>,
    oldest_waiting: String,
    runners: Vec<Count>,
    failures: Vec<Count>,
    claims_per_minute: String,
    results_per_minute: String,
    throughput: Chart,
}

fn runner_status(revoked: bool, last_seen_ms: Option<i64>, now: i64, online: i64) -> &'static str {
    match (revoked, last_seen_ms) {
        (true, _) => "revoked",
        (false, None) => "never seen",
        (false, Some(t)) if now - t <= online => "online",
        (false, Some(_)) => "stale",
    }
}

pub async fn overview(State(state): State<AppState>, session: Session) -> Page {
    let now = state.now_ms();
    let queue = state.db.queue_summary(now).await?;
    let by_state = JobState::ALL
        .iter()
        .map(|s| Count {
            key: s.as_str().to_string(),
            badge: state_badge(s.as_str()),
            count: queue.by_state.get(s.as_str()).copied().unwrap_or(0),
        })
        .collect();
    let by_language = queue
        .by_language
        .iter()
        .map(|(l, n)| Count {
            key: l.clone(),
            badge: state_badge("Queued"),
            count: *n,
        })
        .collect();
    // Every Runner, page by page (a judge has tens of them, not thousands).
    let mut tally = [0i64; 4];
    let mut page = PageRequest::first(500);
    loop {
        let runners = state.db.list_runners(page).await?;
        for r in &runners.items {
            let status = runner_status(
                r.revoked_at.is_some(),
                r.last_seen_at.map(|t| t.timestamp_millis()),
                now,
                online_ms(&state),
            );
            let i = ["online", "stale", "revoked", "never seen"]
                .iter()
                .position(|s| *s == status)
                .unwrap_or(3);
            tally[i] += 1;
        }
        match (runners.next_cursor, runners.items.last()) {
            (Some(_), Some(last)) => page.before = Some(last.runner_id),
            _ => break,
        }
    }
    let runners = ["online", "stale", "revoked", "never seen"]
        .iter()
        .zip(tally)
        .map(|(s, n)| Count {
            key: (*s).to_string(),
            badge: runner_badge(s),
            count: n,
        })
        .collect();
    let failures = state
        .db
        .failures_by_reason()
        .await?
        .into_iter()
        .map(|(reason, n)| Count {
            badge: state_badge("Failed"),
            key: reason,
            count: n,
        })
        .collect();
    let minutes = state.db.results_per_minute(now, 60).await?;
    let values: Vec<(String, f64)> = minutes
        .iter()
        .enumerate()
        .map(|(i, n)| (format!("{} min ago", 60 - i), *n as f64))
        .collect();
    let total: i64 = minutes.iter().sum();
    let throughput = bar_chart(
        &values,
        None,
        |v| format!("{v:.0} Results"),
        format!("Results stored per minute, oldest minute on the left; {total} in the last hour."),
    );
    render(&OverviewPage {
        chrome: Chrome::new(&session, &state, "overview", true),
        by_state,
        by_language,
        oldest_waiting: if queue.by_state.get("Queued").copied().unwrap_or(0) == 0 {
            "nothing is waiting".to_string()
        } else {
            duration(whole(queue.oldest_queued_seconds))
        },
        runners,
        failures,
        claims_per_minute: format!("{:.2}", queue.claims_per_minute),
        results_per_minute: format!("{:.2}", queue.results_per_minute),
        throughput,
    })
}

// --- runners --------------------------------------------------------------------

struct RunnerLine {
    id: i64,
    name: String,
    status: Badge,
    revoked: bool,
    last_seen: Option<When>,
    languages: String,
    version: String,
    jobs: Vec<i64>,
    created: When,
}

#[derive(Template)]
#[template(path = "runners.html")]
struct RunnersPage {
    chrome: Chrome,
    runners: Vec<RunnerLine>,
    can_revoke: bool,
    next_cursor: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CursorQuery {
    #[serde(default)]
    cursor: Option<String>,
}

fn page_of(listing: Listing, cursor: Option<&str>) -> Result<PageRequest, ConsoleError> {
    PageRequest::parse(
        listing,
        Some(i64::from(PAGE_ROWS)),
        cursor.filter(|c| !c.is_empty()),
    )
    .map_err(|e| ConsoleError::BadRequest(e.to_string()))
}

pub async fn runners(
    State(state): State<AppState>,
    session: Session,
    q: Result<Query<CursorQuery>, axum::extract::rejection::QueryRejection>,
) -> Page {
    let q = query(q)?;
    let page = page_of(Listing::Runners, q.cursor.as_deref())?;
    let now = state.now_ms();
    let listed = state.db.list_runners(page).await?;
    let runners = listed
        .items
        .into_iter()
        .map(|r| {
            let seen = r.last_seen_at.map(|t| t.timestamp_millis());
            RunnerLine {
                id: r.runner_id,
                status: runner_badge(runner_status(
                    r.revoked_at.is_some(),
                    seen,
                    now,
                    online_ms(&state),
                )),
                revoked: r.revoked_at.is_some(),
                last_seen: seen.map(|t| When::at(t, now)),
                languages: r.languages.join(" "),
                version: r.runner_version.unwrap_or_default(),
                jobs: r.jobs,
                created: When::of(&r.created_at, now),
                name: r.name,
            }
        })
        .collect();
    render(&RunnersPage {
        chrome: Chrome::new(&session, &state, "runners", true),
        runners,
        can_revoke: session.may(None),
        next_cursor: listed.next_cursor,
    })
}

#[derive(Template)]
#[template(path = "confirm.html")]
struct ConfirmPage {
    chrome: Chrome,
    heading: String,
    question: String,
    action: String,
    button: String,
    back: String,
}

/// The confirmation step of a revocation (a page, so it works without script).
pub async fn revoke_confirm(
    State(state): State<AppState>,
    session: Session,
    Path(raw): Path<String>,
) -> Page {
    let id = path_id("runner", &raw)?;
    session.require(None)?;
    render(&ConfirmPage {
        chrome: Chrome::new(&session, &state, "runners", false),
        heading: format!("Revoke Runner {id}?"),
        question: format!(
            "Runner {id}'s key stops working at once and every job it holds goes back to Queued. This cannot be undone: the Runner needs a new key."
        ),
        action: format!("/console/runners/{id}/revoke"),
        button: format!("Revoke Runner {id}"),
        back: "/console/runners".to_string(),
    })
}

pub async fn revoke(
    State(state): State<AppState>,
    session: Session,
    Path(raw): Path<String>,
    body: Result<Form<CsrfForm>, axum::extract::rejection::FormRejection>,
) -> Page {
    let id = path_id("runner", &raw)?;
    let body = form(body)?;
    session.check_csrf(body.csrf.as_deref())?;
    session.require(None)?;
    crate::server::routes::manager::revoke(&state, id).await?;
    Ok(see_other("/console/runners"))
}

// --- jobs -----------------------------------------------------------------------

/// The filter form's fields, to show them again (the API's `WorkQuery` checks
/// the query itself, unknown fields included).
#[derive(Debug, Deserialize, Default)]
pub struct JobsQuery {
    #[serde(default)]
    state: String,
    #[serde(default)]
    language: String,
    #[serde(default)]
    problem_id: String,
    #[serde(default)]
    runner_id: String,
    #[serde(default)]
    verdict: String,
    #[serde(default)]
    limit: Option<String>,
    #[serde(default)]
    cursor: Option<String>,
}

struct JobLine {
    id: i64,
    submission_id: i64,
    attempt: i64,
    problem_id: i64,
    language: String,
    state: Badge,
    failure_reason: Option<String>,
    verdict: Option<Badge>,
    score: String,
    counts: String,
    runner_id: Option<i64>,
    created: When,
}

#[derive(Template)]
#[template(path = "jobs.html")]
struct JobsPage {
    chrome: Chrome,
    states: Vec<&'static str>,
    filter: JobsQuery,
    jobs: Vec<JobLine>,
    next_page: Option<String>,
}

/// The query without its empty fields (an HTML filter form sends every field,
/// most of them empty; "any" is the field left out).
fn without_empty(raw: Option<&str>) -> String {
    raw.unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty() && !pair.ends_with('='))
        .collect::<Vec<_>>()
        .join("&")
}

/// Reads `query` as `T` the way axum's `Query` would, 400 on anything else.
fn parse_query<T: serde::de::DeserializeOwned>(query: &str) -> Result<T, ConsoleError> {
    let uri: axum::http::Uri = format!("/?{query}")
        .parse()
        .map_err(|_| ConsoleError::BadRequest("the query is not a valid URI query".to_string()))?;
    Query::<T>::try_from_uri(&uri)
        .map(|Query(v)| v)
        .map_err(|e| ConsoleError::BadRequest(format!("invalid query: {e}")))
}

pub async fn jobs(
    State(state): State<AppState>,
    session: Session,
    axum::extract::RawQuery(raw): axum::extract::RawQuery,
) -> Page {
    let cleaned = without_empty(raw.as_deref());
    let q: JobsQuery = parse_query(&cleaned)?;
    // The API's own filter check (GET /api/jobs): unknown values are 400 here too.
    let api: crate::server::routes::listing::WorkQuery = parse_query(&cleaned)?;
    let filter = crate::server::routes::listing::work_filter(&state, &api).await?;
    let limit = q.limit.as_deref().and_then(|l| l.parse::<i64>().ok());
    let page = PageRequest::parse(
        Listing::Jobs,
        Some(limit.unwrap_or(i64::from(PAGE_ROWS))),
        q.cursor.as_deref(),
    )
    .map_err(|e| ConsoleError::BadRequest(e.to_string()))?;
    let listed = state.db.list_jobs(&filter, page).await?;
    let ids: Vec<i64> = listed.items.iter().map(|j| j.id).collect();
    let give_backs = state.db.job_give_backs(&ids).await?;
    let now = state.now_ms();
    let jobs = listed
        .items
        .into_iter()
        .map(|j| {
            let (refunds, releases) = give_backs
                .iter()
                .find(|g| g.0 == j.id)
                .map_or((0, 0), |g| (g.1, g.2));
            JobLine {
                id: j.id,
                submission_id: j.submission_id,
                attempt: j.attempt,
                problem_id: j.problem_id,
                state: state_badge(j.state.as_str()),
                failure_reason: j.failure_reason,
                verdict: j.verdict.as_deref().map(verdict_badge),
                score: match (j.score, j.max_score) {
                    (Some(s), Some(m)) => format!("{} / {}", score(s), score(m)),
                    _ => "—".to_string(),
                },
                counts: format!("{} / {refunds} / {releases}", j.deliveries),
                runner_id: j.runner_id,
                created: When::of(&j.created_at, now),
                language: j.language,
            }
        })
        .collect();
    let next_page = listed.next_cursor.map(|c| {
        let kept: Vec<&str> = cleaned
            .split('&')
            .filter(|p| !p.is_empty() && !p.starts_with("cursor="))
            .collect();
        let mut url = String::from("/console/jobs?");
        for pair in kept {
            url.push_str(pair);
            url.push('&');
        }
        url.push_str(&format!("cursor={}", encode(&c)));
        url
    });
    render(&JobsPage {
        chrome: Chrome::new(&session, &state, "jobs", q.cursor.is_none()),
        states: JobState::ALL.iter().map(|s| s.as_str()).collect(),
        filter: q,
        jobs,
        next_page,
    })
}

// --- one job --------------------------------------------------------------------

pub struct Field {
    name: &'static str,
    value: String,
    pre: bool,
}

fn field(name: &'static str, value: impl Into<String>) -> Field {
    Field {
        name,
        value: value.into(),
        pre: false,
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "null".to_string(), |v| v.to_string())
}

struct AttemptLine {
    attempt: i64,
    job_id: i64,
    state: Badge,
    verdict: Option<Badge>,
    score: String,
    deliveries: i64,
    runner: String,
    current: bool,
}

struct TestLine {
    name: String,
    group: String,
    verdict: Badge,
    status: String,
    cpu: String,
    wall: String,
    memory: String,
    score: String,
    message: String,
}

struct SourceFile {
    name: String,
    content: String,
}

#[derive(Template)]
#[template(path = "job.html")]
struct JobPage {
    chrome: Chrome,
    job_id: i64,
    submission_id: i64,
    problem_id: i64,
    language: String,
    attempt: i64,
    latest_attempt: i64,
    created: When,
    state: Badge,
    verdict: Option<Badge>,
    can_rejudge: bool,
    can_cancel: bool,
    job_fields: Vec<Field>,
    result_fields: Vec<Field>,
    attempts: Vec<AttemptLine>,
    tests: Vec<TestLine>,
    details_note: String,
    cpu_chart: Chart,
    mem_chart: Chart,
    log: Option<String>,
    sources: Vec<SourceFile>,
}

/// Up to [`SHOW_BYTES`] of some bytes as text (lossy), saying what was cut.
fn shown(bytes_: &[u8]) -> String {
    let cut = bytes_.len() > SHOW_BYTES;
    let mut text = String::from_utf8_lossy(&bytes_[..bytes_.len().min(SHOW_BYTES)]).into_owned();
    if cut {
        text.push_str(&format!(
            "\n… ({} more bytes not shown)",
            bytes_.len() - SHOW_BYTES
        ));
    }
    text
}

fn json_text(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

fn num(row: &serde_json::Value, key: &str) -> f64 {
    row.get(key)
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(0.0)
}

fn text(row: &serde_json::Value, key: &str) -> String {
    match row.get(key) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Named values for a chart.
type Series = Vec<(String, f64)>;

/// A non-negative float, whole (saturating; NaN is 0).
fn whole(x: f64) -> i64 {
    #[allow(clippy::cast_possible_truncation)] // saturating by definition of `as`
    let n = x.max(0.0).round() as i64;
    n
}

/// The per-test rows of a `details` attachment (read leniently: the Server never
/// depends on the Runner's document beyond showing it).
fn test_lines(details: &serde_json::Value) -> (Vec<TestLine>, Series, Series) {
    let rows = details
        .as_array()
        .cloned()
        .or_else(|| details.get("tests").and_then(|t| t.as_array().cloned()))
        .unwrap_or_default();
    let mut lines = Vec::new();
    let mut cpu = Vec::new();
    let mut mem = Vec::new();
    for row in &rows {
        let name = text(row, "name");
        let passes = row.get("passes").and_then(|p| p.as_array());
        let slowest = passes
            .into_iter()
            .flatten()
            .map(|p| num(p, "cpu_seconds"))
            .fold(num(row, "cpu_seconds"), f64::max);
        let memory = num(row, "memory_bytes");
        cpu.push((name.clone(), slowest));
        mem.push((name.clone(), memory / (1024.0 * 1024.0)));
        let message = text(row, "judge_message");
        lines.push(TestLine {
            group: text(row, "group"),
            verdict: verdict_badge(&text(row, "verdict")),
            status: text(row, "status"),
            cpu: format!("{:.3} s", num(row, "cpu_seconds")),
            wall: format!("{:.3} s", num(row, "wall_seconds")),
            memory: bytes(u64::try_from(whole(memory)).unwrap_or(0)),
            score: score(num(row, "score")),
            message: match passes {
                Some(p) if !p.is_empty() => format!("{} passes. {message}", p.len()),
                _ => message,
            },
            name,
        });
    }
    (lines, cpu, mem)
}

async fn read_capped(path: &std::path::Path, cap: u64) -> Option<Vec<u8>> {
    let meta = tokio::fs::metadata(path).await.ok()?;
    if meta.len() > cap {
        use tokio::io::AsyncReadExt as _;
        let file = tokio::fs::File::open(path).await.ok()?;
        let mut buf = Vec::new();
        file.take(cap).read_to_end(&mut buf).await.ok()?;
        return Some(buf);
    }
    tokio::fs::read(path).await.ok()
}

pub async fn job(State(state): State<AppState>, session: Session, Path(raw): Path<String>) -> Page {
    let id = path_id("job", &raw)?;
    let view = state
        .db
        .job_view(id)
        .await?
        .ok_or_else(|| ConsoleError::NotFound(format!("there is no job {id}")))?;
    let submission = state
        .db
        .submission_view(view.submission_id)
        .await?
        .ok_or_else(|| ConsoleError::NotFound(format!("job {id} has no submission")))?;
    let source = state.db.submission_source(view.submission_id).await?;
    let now = state.now_ms();
    let created = state.db.job_created_ms(id).await?.unwrap_or(now);
    let latest_attempt = submission.jobs.iter().map(|j| j.attempt).max().unwrap_or(1);

    let job_fields = vec![
        field("id", view.id.to_string()),
        field("submission_id", view.submission_id.to_string()),
        field("attempt", view.attempt.to_string()),
        field("problem_version_id", view.problem_version_id.to_string()),
        field("runner_id", opt(view.runner_id)),
        field("state", view.state.as_str()),
        field("lease_token", opt(view.lease_token.as_deref())),
        field("lease_seconds", opt(view.lease_seconds)),
        field(
            "lease_expires_at",
            view.lease_expires_at.map_or("null".to_string(), |t| {
                let w = When::of(&t, now);
                format!("{} ({})", w.absolute, w.relative)
            }),
        ),
        field("deliveries", view.deliveries.to_string()),
        field(
            "acknowledged_at",
            view.acknowledged_at.map_or("null".to_string(), |t| {
                let w = When::of(&t, now);
                format!("{} ({})", w.absolute, w.relative)
            }),
        ),
        field("refunds", view.refunds.to_string()),
        field("releases", view.releases.to_string()),
        field("failure_reason", opt(view.failure_reason.as_deref())),
        field("row_version", view.row_version.to_string()),
        field("files", view.files.join(", ")),
        field(
            "progress",
            view.progress.as_ref().map_or("null".to_string(), |p| {
                format!("{} of {} tests", p.done, p.total)
            }),
        ),
    ];
    let result_fields = match &view.result {
        None => Vec::new(),
        Some(r) => vec![
            field("evaluation_job_id", r.evaluation_job_id.to_string()),
            field("problem_version_id", r.problem_version_id.to_string()),
            field("score", score(r.score)),
            field("max_score", score(r.max_score)),
            field("verdict", r.verdict.clone()),
            Field {
                name: "extra",
                value: r.extra.as_ref().map_or("null".to_string(), json_text),
                pre: r.extra.is_some(),
            },
            Field {
                name: "props",
                value: r.props.as_ref().map_or("null".to_string(), json_text),
                pre: r.props.is_some(),
            },
            field("runner_version", opt(r.runner_version.as_deref())),
        ],
    };
    let attempts = submission
        .jobs
        .iter()
        .map(|j| AttemptLine {
            attempt: j.attempt,
            job_id: j.id,
            state: state_badge(j.state.as_str()),
            verdict: j.result.as_ref().map(|r| verdict_badge(&r.verdict)),
            score: j.result.as_ref().map_or("—".to_string(), |r| {
                format!("{} / {}", score(r.score), score(r.max_score))
            }),
            deliveries: j.deliveries,
            runner: opt(j.runner_id),
            current: j.id == id,
        })
        .collect();

    let mut details_note = String::new();
    let mut tests = Vec::new();
    let (mut cpu, mut mem) = (Vec::new(), Vec::new());
    if view.files.iter().any(|f| f == "details") {
        let path = state.storage.job_file_path(id, "details");
        match read_capped(&path, DETAILS_BYTES + 1).await {
            Some(b) if b.len() as u64 > DETAILS_BYTES => {
                details_note = format!("larger than {}; not shown", bytes(DETAILS_BYTES));
            }
            Some(b) => match serde_json::from_slice::<serde_json::Value>(&b) {
                Ok(v) => (tests, cpu, mem) = test_lines(&v),
                Err(_) => details_note = "it is not JSON".to_string(),
            },
            None => details_note = "it could not be read".to_string(),
        }
    }
    let limit = state.db.version_time_limit(view.problem_version_id).await?;
    let cpu_chart = bar_chart(
        &cpu,
        limit,
        |v| format!("{v:.3} s"),
        match limit {
            Some(l) => format!("CPU time per test (the slowest pass of a multi-pass test) against the time limit of {l} s."),
            None => "CPU time per test (the slowest pass of a multi-pass test); the time limit is the package's own (the Server does not store it).".to_string(),
        },
    );
    let mem_chart = bar_chart(
        &mem,
        None,
        |v| format!("{v:.1} MiB"),
        "Memory per test.".to_string(),
    );
    let log = if view.files.iter().any(|f| f == "log") {
        read_capped(
            &state.storage.job_file_path(id, "log"),
            SHOW_BYTES as u64 + 1,
        )
        .await
        .map(|b| shown(&b))
    } else {
        None
    };
    let (language, problem_id, sources) = match source {
        Some(s) => {
            let files: Vec<SubmissionFile> =
                serde_json::from_str(&s.files_json).unwrap_or_default();
            let sources = files
                .iter()
                .map(|f| SourceFile {
                    name: f.name.clone(),
                    content: match f.bytes() {
                        Ok(b) if std::str::from_utf8(&b).is_ok() => shown(&b),
                        Ok(b) => {
                            format!("({} of binary content, not shown)", bytes(b.len() as u64))
                        }
                        Err(e) => format!("(unreadable: {e})"),
                    },
                })
                .collect();
            (s.language, s.problem_id, sources)
        }
        None => (
            submission.language.clone(),
            submission.problem_id,
            Vec::new(),
        ),
    };
    let live = !view.state.is_final();
    render(&JobPage {
        chrome: Chrome::new(&session, &state, "jobs", live),
        job_id: id,
        submission_id: view.submission_id,
        problem_id,
        language,
        attempt: view.attempt,
        latest_attempt,
        created: When::at(created, now),
        state: state_badge(view.state.as_str()),
        verdict: view.result.as_ref().map(|r| verdict_badge(&r.verdict)),
        can_rejudge: session.may(Some(scopes::SUBMISSIONS_WRITE)),
        can_cancel: session.may(Some(scopes::SUBMISSIONS_WRITE)) && !view.state.is_final(),
        job_fields,
        result_fields,
        attempts,
        tests,
        details_note,
        cpu_chart,
        mem_chart,
        log,
        sources,
    })
}

pub async fn cancel(
    State(state): State<AppState>,
    session: Session,
    Path(raw): Path<String>,
    body: Result<Form<CsrfForm>, axum::extract::rejection::FormRejection>,
) -> Page {
    let id = path_id("job", &raw)?;
    let body = form(body)?;
    session.check_csrf(body.csrf.as_deref())?;
    session.require(Some(scopes::SUBMISSIONS_WRITE))?;
    state
        .db
        .cancel_job(id)
        .await
        .map_err(crate::server::error::ApiError::from)?;
    Ok(see_other(&format!("/console/jobs/{id}")))
}

#[derive(Debug, Deserialize)]
pub struct RejudgeForm {
    #[serde(default)]
    csrf: Option<String>,
    #[serde(default)]
    expected_attempt: Option<String>,
}

pub async fn rejudge(
    State(state): State<AppState>,
    session: Session,
    Path(raw): Path<String>,
    body: Result<Form<RejudgeForm>, axum::extract::rejection::FormRejection>,
) -> Page {
    let id = path_id("submission", &raw)?;
    let body = form(body)?;
    session.check_csrf(body.csrf.as_deref())?;
    session.require(Some(scopes::SUBMISSIONS_WRITE))?;
    let expected = match body.expected_attempt.as_deref() {
        None | Some("") => None,
        Some(v) => Some(v.parse::<i64>().map_err(|_| {
            ConsoleError::BadRequest(format!("expected_attempt {v:?} is not a number"))
        })?),
    };
    let (job_id, _) = state.db.rejudge(id, expected, state.now_ms()).await?;
    state.notify_queue();
    Ok(see_other(&format!("/console/jobs/{job_id}")))
}

// --- problems -------------------------------------------------------------------

struct VersionLine {
    id: i64,
    latest: bool,
    sha256: String,
    sha_short: String,
    size: String,
    time_limit: String,
    created: When,
    live: i64,
    total: i64,
}

struct ProblemLine {
    id: i64,
    versions: Vec<VersionLine>,
}

#[derive(Template)]
#[template(path = "problems.html")]
struct ProblemsPage {
    chrome: Chrome,
    can_upload: bool,
    problems: Vec<ProblemLine>,
    next_cursor: Option<String>,
}

pub async fn problems(
    State(state): State<AppState>,
    session: Session,
    q: Result<Query<CursorQuery>, axum::extract::rejection::QueryRejection>,
) -> Page {
    let q = query(q)?;
    let page = page_of(Listing::Problems, q.cursor.as_deref())?;
    let listed = state.db.list_problems(page).await?;
    let usage = state.db.jobs_per_version().await?;
    let now = state.now_ms();
    let problems = listed
        .items
        .into_iter()
        .map(|p| {
            let last = p.versions.iter().map(|v| v.problem_version_id).max();
            ProblemLine {
                id: p.problem_id,
                versions: p
                    .versions
                    .into_iter()
                    .rev()
                    .map(|v| {
                        let (live, total) = usage
                            .iter()
                            .find(|u| u.0 == v.problem_version_id)
                            .map_or((0, 0), |u| (u.1, u.2));
                        VersionLine {
                            id: v.problem_version_id,
                            latest: Some(v.problem_version_id) == last,
                            sha_short: v.sha256.chars().take(12).collect(),
                            sha256: v.sha256,
                            size: bytes(u64::try_from(v.size).unwrap_or(0)),
                            time_limit: v
                                .time_limit
                                .map_or("package's".to_string(), |t| format!("{t} s")),
                            created: When::of(&v.created_at, now),
                            live,
                            total,
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    render(&ProblemsPage {
        chrome: Chrome::new(&session, &state, "problems", false),
        can_upload: session.may(Some(scopes::PROBLEMS_WRITE)),
        problems,
        next_cursor: listed.next_cursor,
    })
}

#[derive(Template)]
#[template(path = "done.html")]
struct DonePage {
    chrome: Chrome,
    heading: String,
    message: String,
    next: String,
    next_label: String,
}

/// `POST /console/problems` (multipart): the CSRF field comes first in the form,
/// so a forged upload is refused before a byte of its package is stored.
pub async fn upload(
    State(state): State<AppState>,
    session: Session,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Page {
    let mut multipart =
        multipart.map_err(|e| ConsoleError::BadRequest(format!("not a multipart form: {e}")))?;
    let bad = |e: axum::extract::multipart::MultipartError| {
        ConsoleError::BadRequest(format!("the form could not be read: {e}"))
    };
    let mut csrf_ok = false;
    let mut problem_id: Option<i64> = None;
    let mut time_limit: Option<f64> = None;
    let mut received = None;
    while let Some(field) = multipart.next_field().await.map_err(bad)? {
        let name = field.name().unwrap_or_default().to_string();
        if !csrf_ok {
            let value = if name == "csrf" {
                Some(field.text().await.map_err(bad)?)
            } else {
                None
            };
            session.check_csrf(value.as_deref())?;
            session.require(Some(scopes::PROBLEMS_WRITE))?;
            csrf_ok = true;
            continue;
        }
        match name.as_str() {
            "problem_id" => {
                let v = field.text().await.map_err(bad)?;
                let v = v.trim();
                if !v.is_empty() {
                    problem_id = Some(v.parse().map_err(|_| {
                        ConsoleError::BadRequest(format!("problem {v:?} is not a problem id"))
                    })?);
                }
            }
            "time_limit" => {
                let v = field.text().await.map_err(bad)?;
                let v = v.trim();
                if !v.is_empty() {
                    let t: f64 = v.parse().map_err(|_| {
                        ConsoleError::BadRequest(format!("time limit {v:?} is not a number"))
                    })?;
                    time_limit = Some(crate::server::routes::manager::check_time_limit(t)?);
                }
            }
            "package" => {
                let r = state
                    .storage
                    .receive(field, state.config.max_upload)
                    .await
                    .map_err(crate::server::error::ApiError::from)?;
                received = Some(r);
            }
            other => {
                return Err(ConsoleError::BadRequest(format!(
                    "unexpected form field {other:?}"
                )));
            }
        }
    }
    if !csrf_ok {
        session.check_csrf(None)?;
    }
    let received =
        received.ok_or_else(|| ConsoleError::BadRequest("no package was sent".to_string()))?;
    let path = received.temp.to_path_buf();
    tokio::task::spawn_blocking(move || {
        crate::server::packages::validate(&path, "the uploaded package")
    })
    .await
    .map_err(|e| ConsoleError::Internal(format!("package check panicked: {e}")))?
    .map_err(|e| ConsoleError::Unprocessable(format!("not a valid problem package: {e}")))?;
    let sha256 = received.sha256.clone();
    Storage::place_if_missing(received.temp, &state.storage.package_path(&sha256))
        .map_err(|e| ConsoleError::Internal(format!("cannot store package {sha256}: {e}")))?;
    let version = NewVersion {
        sha256: &sha256,
        size: i64::try_from(received.size).unwrap_or(i64::MAX),
        time_limit,
    };
    let now = state.now_ms();
    let (pid, vid) = match problem_id {
        None => state.db.create_problem(&version, None, now).await?,
        Some(pid) => {
            let vid = state
                .db
                .add_problem_version(pid, &version, None, now)
                .await?
                .ok_or_else(|| ConsoleError::NotFound(format!("there is no problem {pid}")))?;
            (pid, vid)
        }
    };
    let mut response = render(&DonePage {
        chrome: Chrome::new(&session, &state, "problems", false),
        heading: "Package stored".to_string(),
        message: format!("Problem {pid}, version {vid}, SHA-256 {sha256}."),
        next: "/console/problems".to_string(),
        next_label: "Back to the problems".to_string(),
    })?;
    *response.status_mut() = StatusCode::CREATED;
    Ok(response)
}

// --- trials ---------------------------------------------------------------------

struct TrialLine {
    id: i64,
    language: String,
    state: Badge,
    failure_reason: Option<String>,
    tests: String,
    deliveries: i64,
    runner: String,
    created: When,
}

#[derive(Template)]
#[template(path = "trials.html")]
struct TrialsPage {
    chrome: Chrome,
    trials: Vec<TrialLine>,
}

pub async fn trials(State(state): State<AppState>, session: Session) -> Page {
    let now = state.now_ms();
    let trials = state
        .db
        .recent_trials(i64::from(PAGE_ROWS) * 2)
        .await?
        .into_iter()
        .map(|t| TrialLine {
            id: t.id,
            state: state_badge(&t.state),
            failure_reason: t.failure_reason,
            tests: t
                .timings
                .as_deref()
                .and_then(|s| serde_json::from_str::<Vec<serde_json::Value>>(s).ok())
                .map_or("—".to_string(), |v| v.len().to_string()),
            deliveries: t.deliveries,
            runner: opt(t.runner_id),
            created: When::at(t.created_ms, now),
            language: t.language,
        })
        .collect();
    render(&TrialsPage {
        chrome: Chrome::new(&session, &state, "trials", true),
        trials,
    })
}

/// Any other path under `/console/`: a 404 page (behind a login, so it tells
/// nothing to a stranger).
pub async fn not_found(_session: Session, uri: axum::http::Uri) -> ConsoleError {
    ConsoleError::NotFound(format!("there is no console page {}", uri.path()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_filter_fields_are_left_out_and_runners_age_into_stale() {
        assert_eq!(
            without_empty(Some("state=&language=python3&problem_id=&verdict=Accepted")),
            "language=python3&verdict=Accepted"
        );
        assert_eq!(without_empty(None), "");
        assert_eq!(runner_status(false, Some(1_000), 30_000, 60_000), "online");
        assert_eq!(runner_status(false, Some(1_000), 90_000, 60_000), "stale");
        assert_eq!(runner_status(false, None, 90_000, 60_000), "never seen");
        assert_eq!(runner_status(true, Some(89_000), 90_000, 60_000), "revoked");
        assert_eq!(encode("a b/é"), "a%20b%2F%C3%A9");
    }
}

//! Reading jobs, submissions and results back as the wire's view objects. Reads
//! only; none of these can see a trial.

use std::collections::HashMap;

use sqlx::FromRow;

use super::{Db, DbError, on_reader, parse_state};
use crate::protocol::{JobView, Progress, ResultView, SubmissionView};
use crate::server::clock::to_datetime;

#[derive(Debug, Clone, FromRow)]
struct JobRow {
    id: i64,
    submission_id: i64,
    attempt: i64,
    problem_version_id: i64,
    runner_id: Option<i64>,
    state: String,
    lease_token: Option<String>,
    lease_seconds: Option<i64>,
    lease_expires_ms: Option<i64>,
    deliveries: i64,
    acknowledged_ms: Option<i64>,
    refunds: i64,
    releases: i64,
    failure_reason: Option<String>,
    row_version: i64,
    progress_done: Option<i64>,
    progress_total: Option<i64>,
}

#[derive(Debug, Clone, FromRow)]
struct ResultRow {
    evaluation_job_id: i64,
    problem_version_id: i64,
    score: f64,
    max_score: f64,
    verdict: String,
    extra: Option<String>,
    props: Option<String>,
    runner_version: Option<String>,
}

#[derive(Debug, Clone, FromRow)]
struct FileRow {
    job_id: i64,
    name: String,
}

#[derive(Debug, Clone, FromRow)]
struct SubmissionRow {
    id: i64,
    problem_id: i64,
    language: String,
}

macro_rules! job_columns {
    () => {
        "SELECT id, submission_id, attempt, problem_version_id, runner_id, state, lease_token, \
         lease_seconds, lease_expires_ms, deliveries, acknowledged_ms, refunds, releases, \
         failure_reason, row_version, progress_done, progress_total FROM jobs "
    };
}
macro_rules! result_columns {
    () => {
        "SELECT r.evaluation_job_id, r.problem_version_id, r.score, r.max_score, r.verdict, \
         r.extra, r.props, r.runner_version FROM results r "
    };
}

const JOB: &str = concat!(job_columns!(), "WHERE id = $1");
const JOBS_OF_SUBMISSION: &str =
    concat!(job_columns!(), "WHERE submission_id = $1 ORDER BY attempt");
const RESULT_OF_JOB: &str = concat!(result_columns!(), "WHERE r.evaluation_job_id = $1");
const RESULTS_OF_SUBMISSION: &str = concat!(
    result_columns!(),
    "JOIN jobs j ON j.id = r.evaluation_job_id WHERE j.submission_id = $1"
);
const FILES_OF_JOB: &str = "SELECT job_id, name FROM job_files WHERE job_id = $1 ORDER BY name";
const FILES_OF_SUBMISSION: &str = "SELECT f.job_id, f.name FROM job_files f \
     JOIN jobs j ON j.id = f.job_id WHERE j.submission_id = $1 ORDER BY f.name";
const SUBMISSION: &str = "SELECT id, problem_id, language FROM submissions WHERE id = $1";
const FILE_SIZE: &str = "SELECT size FROM job_files WHERE job_id = $1 AND name = $2";

impl Db {
    /// `GET /api/jobs/{id}`: the job with its progress, Result and attachment names.
    pub async fn job_view(&self, job_id: i64) -> Result<Option<JobView>, DbError> {
        let row: Option<JobRow> = on_reader!(self, pool => sqlx::query_as(JOB)
            .bind(job_id).fetch_optional(pool).await)?;
        let Some(row) = row else { return Ok(None) };
        let result: Option<ResultRow> = on_reader!(self, pool => sqlx::query_as(RESULT_OF_JOB)
            .bind(job_id).fetch_optional(pool).await)?;
        let files: Vec<FileRow> = on_reader!(self, pool => sqlx::query_as(FILES_OF_JOB)
            .bind(job_id).fetch_all(pool).await)?;
        let result = result.map(result_view).transpose()?;
        let names = files.into_iter().map(|f| f.name).collect();
        Ok(Some(job_view(row, names, result)?))
    }

    /// `GET /api/submissions/{id}`: every attempt, oldest first, and the Result of
    /// the latest attempt that has one.
    pub async fn submission_view(
        &self,
        submission_id: i64,
    ) -> Result<Option<SubmissionView>, DbError> {
        let sub: Option<SubmissionRow> = on_reader!(self, pool => sqlx::query_as(SUBMISSION)
            .bind(submission_id).fetch_optional(pool).await)?;
        let Some(sub) = sub else { return Ok(None) };
        let rows: Vec<JobRow> = on_reader!(self, pool => sqlx::query_as(JOBS_OF_SUBMISSION)
            .bind(submission_id).fetch_all(pool).await)?;
        let results: Vec<ResultRow> = on_reader!(self, pool => sqlx::query_as(RESULTS_OF_SUBMISSION)
            .bind(submission_id).fetch_all(pool).await)?;
        let files: Vec<FileRow> = on_reader!(self, pool => sqlx::query_as(FILES_OF_SUBMISSION)
            .bind(submission_id).fetch_all(pool).await)?;
        let mut results: HashMap<i64, ResultView> = results
            .into_iter()
            .map(|r| Ok((r.evaluation_job_id, result_view(r)?)))
            .collect::<Result<_, DbError>>()?;
        let mut names: HashMap<i64, Vec<String>> = HashMap::new();
        for f in files {
            names.entry(f.job_id).or_default().push(f.name);
        }
        let jobs = rows
            .into_iter()
            .map(|row| {
                let (id, files) = (row.id, names.remove(&row.id).unwrap_or_default());
                job_view(row, files, results.remove(&id))
            })
            .collect::<Result<Vec<_>, DbError>>()?;
        let latest = jobs.iter().rev().find_map(|j| j.result.clone());
        Ok(Some(SubmissionView {
            submission_id: sub.id,
            problem_id: sub.problem_id,
            language: sub.language,
            jobs,
            result: latest,
        }))
    }

    /// The stored size of an attachment, when it exists.
    pub async fn job_file_size(&self, job_id: i64, name: &str) -> Result<Option<i64>, DbError> {
        Ok(on_reader!(self, pool => sqlx::query_scalar(FILE_SIZE)
            .bind(job_id).bind(name).fetch_optional(pool).await)?)
    }
}

fn job_view(
    row: JobRow,
    files: Vec<String>,
    result: Option<ResultView>,
) -> Result<JobView, DbError> {
    let progress = match (row.progress_done, row.progress_total) {
        (Some(done), Some(total)) => Some(Progress {
            done: non_negative(done),
            total: non_negative(total),
        }),
        _ => None,
    };
    Ok(JobView {
        id: row.id,
        submission_id: row.submission_id,
        attempt: row.attempt,
        problem_version_id: row.problem_version_id,
        runner_id: row.runner_id,
        state: parse_state(&row.state)?,
        lease_token: row.lease_token,
        lease_seconds: row.lease_seconds.map(non_negative),
        lease_expires_at: row.lease_expires_ms.map(to_datetime),
        deliveries: row.deliveries,
        acknowledged_at: row.acknowledged_ms.map(to_datetime),
        refunds: row.refunds,
        releases: row.releases,
        failure_reason: row.failure_reason,
        row_version: row.row_version,
        files,
        progress,
        result,
    })
}

fn result_view(row: ResultRow) -> Result<ResultView, DbError> {
    Ok(ResultView {
        evaluation_job_id: row.evaluation_job_id,
        problem_version_id: row.problem_version_id,
        score: row.score,
        max_score: row.max_score,
        verdict: row.verdict,
        extra: parse_json(row.extra)?,
        props: parse_json(row.props)?,
        runner_version: row.runner_version,
    })
}

fn parse_json(text: Option<String>) -> Result<Option<serde_json::Value>, DbError> {
    text.map(|t| {
        serde_json::from_str(&t).map_err(|e| DbError::Corrupt {
            detail: format!("stored JSON does not parse: {e}"),
        })
    })
    .transpose()
}

fn non_negative(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

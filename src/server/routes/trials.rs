//! `POST /api/trials` and `GET /api/trials/{id}` (scope `trial:run`). A trial's
//! package is stored apart from problem packages (`trials/`), because it is
//! deleted when the trial ends while a problem package with the same digest stays.

use axum::Json;
use axum::extract::multipart::Field;
use axum::extract::{FromRequest as _, Multipart, Request, State};
use axum::http::StatusCode;

use crate::protocol::{SubmissionFile, Timing, TrialCreated, TrialView};
use crate::server::auth::{TrialAuth, new_lease_token};
use crate::server::db::parse_state;
use crate::server::db::trials::NewTrial;
use crate::server::error::ApiError;
use crate::server::extract::ApiPath;
use crate::server::packages;
use crate::server::routes::manager::{check_files, check_name, check_time_limit};
use crate::server::routes::openapi::{
    AUTHED, BODY, LANGUAGE, MISSING, PACKAGE, SERVER, TrialUpload, errors,
};
use crate::server::state::AppState;
use crate::server::storage::{Received, Storage};

errors!(CreateErrors: AUTHED, BODY, PACKAGE, SERVER, LANGUAGE);
errors!(GetErrors: AUTHED, MISSING, SERVER);

/// The parts of a trial upload.
#[derive(Default)]
struct TrialForm {
    package: Option<Received>,
    language: Option<String>,
    files: Vec<SubmissionFile>,
    time_limit: Option<f64>,
}

fn multipart_error(e: axum::extract::multipart::MultipartError, state: &AppState) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::TooLarge {
            limit: state.config.max_upload,
        }
    } else {
        ApiError::invalid(format!("invalid multipart body: {e}"))
    }
}

async fn text(field: Field<'_>, state: &AppState) -> Result<String, ApiError> {
    field.text().await.map_err(|e| multipart_error(e, state))
}

async fn read_form(state: &AppState, mut multipart: Multipart) -> Result<TrialForm, ApiError> {
    let mut form = TrialForm::default();
    while let Some(field) = multipart
        .next_field()
        .await
        .map_err(|e| multipart_error(e, state))?
    {
        let name = field.name().unwrap_or_default().to_string();
        match name.as_str() {
            "package" => {
                let received = state
                    .storage
                    .receive(field, state.config.max_upload)
                    .await?;
                form.package = Some(received);
            }
            "language" => form.language = Some(text(field, state).await?),
            "time_limit" => {
                let t = text(field, state).await?;
                let t = t
                    .trim()
                    .parse()
                    .map_err(|_| ApiError::invalid("time_limit must be a number"))?;
                form.time_limit = Some(check_time_limit(t)?);
            }
            "file" => {
                let file_name = field
                    .file_name()
                    .map(str::to_string)
                    .ok_or_else(|| ApiError::invalid("each `file` part needs a filename"))?;
                let bytes = field.bytes().await.map_err(|e| multipart_error(e, state))?;
                form.files
                    .push(SubmissionFile::from_bytes(file_name, &bytes));
            }
            other => {
                return Err(ApiError::invalid(format!(
                    "unknown part {other:?}; expected package, language, file, time_limit"
                )));
            }
        }
    }
    Ok(form)
}

/// `POST /api/trials` (multipart: `package`, `language`, one or more `file`).
#[utoipa::path(
    post,
    path = "/api/trials",
    tag = "trials",
    security(("scoped_token" = ["trial:run"]), ("manager_token" = [])),
    request_body(content = TrialUpload, content_type = "multipart/form-data"),
    responses((status = 201, description = "Created", body = TrialCreated), CreateErrors)
)]
pub async fn create(
    State(state): State<AppState>,
    auth: TrialAuth,
    request: Request,
) -> Result<(StatusCode, Json<TrialCreated>), ApiError> {
    let multipart = Multipart::from_request(request, &state)
        .await
        .map_err(|e| ApiError::invalid(format!("expected a multipart/form-data body: {e}")))?;
    let form = read_form(&state, multipart).await?;
    let package = form
        .package
        .ok_or_else(|| ApiError::invalid("the `package` part is missing"))?;
    let language = form
        .language
        .ok_or_else(|| ApiError::invalid("the `language` part is missing"))?;
    check_name("language", &language)?;
    let language = state.check_language(&language)?;
    check_files(&form.files)?;
    let path = package.temp.to_path_buf();
    tokio::task::spawn_blocking(move || packages::validate(&path, "the `package` part"))
        .await
        .map_err(|e| ApiError::Internal(format!("package check panicked: {e}")))?
        .map_err(ApiError::PackageInvalid)?;
    let file = format!("{}.{}.tar.gz", package.sha256, new_lease_token());
    let dest = state.storage.trial_package_path(&file);
    Storage::place(package.temp, &dest)
        .map_err(|e| ApiError::Internal(format!("cannot store trial package: {e}")))?;
    let files_json = serde_json::to_string(&form.files)
        .map_err(|e| ApiError::Internal(format!("files do not serialise: {e}")))?;
    let trial = NewTrial {
        token_id: auth.token_id,
        language: &language,
        files_json: &files_json,
        sha256: &package.sha256,
        size: i64::try_from(package.size).unwrap_or(i64::MAX),
        package_file: &file,
        time_limit: form.time_limit,
    };
    let trial_id = match state.db.create_trial(&trial, state.now_ms()).await {
        Ok(id) => id,
        Err(e) => {
            Storage::remove(&dest).await;
            return Err(e.into());
        }
    };
    state.notify_queue();
    Ok((StatusCode::CREATED, Json(TrialCreated { trial_id })))
}

/// `GET /api/trials/{id}`: an API token sees only the trials it asked for.
#[utoipa::path(
    get,
    path = "/api/trials/{id}",
    tag = "trials",
    security(("scoped_token" = ["trial:run"]), ("manager_token" = [])),
    params(("id" = i64, Path, description = "trial id")),
    responses((status = 200, description = "OK", body = TrialView), GetErrors)
)]
pub async fn get(
    State(state): State<AppState>,
    auth: TrialAuth,
    ApiPath(trial_id): ApiPath<i64>,
) -> Result<Json<TrialView>, ApiError> {
    let missing = || ApiError::not_found(format!("trial {trial_id} does not exist"));
    let row = state.db.trial(trial_id).await?.ok_or_else(missing)?;
    if auth.token_id.is_some() && auth.token_id != row.token_id {
        return Err(missing());
    }
    let timings: Vec<Timing> = match &row.timings {
        Some(text) => serde_json::from_str(text)
            .map_err(|e| ApiError::Internal(format!("stored timings do not parse: {e}")))?,
        None => Vec::new(),
    };
    Ok(Json(TrialView {
        trial_id: row.id,
        state: parse_state(&row.state)?,
        timings,
        failure_reason: row.failure_reason,
    }))
}

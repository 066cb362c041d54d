//! A manager's client of the Server (the calls under `Authorization: Bearer
//! $JUDGE_MANAGER_TOKEN`): what the demo and the end-to-end tests drive a Server
//! with. Plain `reqwest` over the `protocol` types.

use serde::de::DeserializeOwned;

use crate::protocol::{
    AttemptCreated, CreateRunner, CreateSubmission, ErrorBody, Id, JobView, ProblemCreated,
    RejudgeRequest, RunnerCreated, SubmissionFile, SubmissionView,
};

#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    #[error("{call}: {source}")]
    Http {
        call: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{call}: {status} {code}: {message}")]
    Refused {
        call: String,
        status: u16,
        code: String,
        message: String,
    },
}

impl ManagerError {
    /// The contract's error code of a refusal (`lease.lost`, ...); empty otherwise.
    pub fn code(&self) -> &str {
        match self {
            ManagerError::Refused { code, .. } => code,
            ManagerError::Http { .. } => "",
        }
    }
}

/// A manager connected to one Server.
#[derive(Debug, Clone)]
pub struct Manager {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Manager {
    pub fn new(base: &str, token: &str) -> Manager {
        Manager {
            http: reqwest::Client::new(),
            base: base.trim_end_matches('/').to_string(),
            token: token.to_string(),
        }
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// `POST /api/runners` → the new Runner's id and key.
    pub async fn create_runner(&self, name: &str) -> Result<RunnerCreated, ManagerError> {
        let body = CreateRunner {
            name: name.to_string(),
        };
        self.send("create runner", self.post("/api/runners").json(&body))
            .await
    }

    /// `POST /api/problems` with the package's `.tar.gz` bytes.
    pub async fn upload_problem(
        &self,
        tar_gz: Vec<u8>,
        time_limit: Option<f64>,
    ) -> Result<ProblemCreated, ManagerError> {
        let path = match time_limit {
            Some(t) => format!("/api/problems?time_limit={t}"),
            None => "/api/problems".to_string(),
        };
        self.send("upload problem", self.post(&path).body(tar_gz))
            .await
    }

    pub async fn submit(
        &self,
        problem_id: Id,
        language: &str,
        files: Vec<SubmissionFile>,
    ) -> Result<AttemptCreated, ManagerError> {
        let body = CreateSubmission {
            problem_id,
            language: language.to_string(),
            files,
            callback_url: None,
        };
        self.send("submit", self.post("/api/submissions").json(&body))
            .await
    }

    pub async fn rejudge(&self, submission: Id) -> Result<AttemptCreated, ManagerError> {
        let path = format!("/api/submissions/{submission}/rejudge");
        self.send("rejudge", self.post(&path).json(&RejudgeRequest::default()))
            .await
    }

    /// `POST /api/jobs/{id}/cancel`.
    pub async fn cancel(&self, job: Id) -> Result<(), ManagerError> {
        let path = format!("/api/jobs/{job}/cancel");
        self.send::<serde_json::Value>("cancel", self.post(&path))
            .await
            .map(drop)
    }

    pub async fn job(&self, job: Id) -> Result<JobView, ManagerError> {
        self.get_json("job", &format!("/api/jobs/{job}")).await
    }

    pub async fn submission(&self, submission: Id) -> Result<SubmissionView, ManagerError> {
        self.get_json("submission", &format!("/api/submissions/{submission}"))
            .await
    }

    /// An attachment's bytes (`details`, `log`).
    pub async fn file(&self, job: Id, name: &str) -> Result<Vec<u8>, ManagerError> {
        let path = format!("/api/jobs/{job}/files/{name}");
        self.get_bytes(&format!("file {name} of job {job}"), &path)
            .await
    }

    /// `GET /metrics`: Prometheus text.
    pub async fn metrics(&self) -> Result<String, ManagerError> {
        let bytes = self.get_bytes("metrics", "/metrics").await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    async fn get_bytes(&self, call: &str, path: &str) -> Result<Vec<u8>, ManagerError> {
        let http = |source| ManagerError::Http {
            call: call.to_string(),
            source,
        };
        let request = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        let response = check(call, request.send().await.map_err(http)?).await?;
        Ok(response.bytes().await.map_err(http)?.to_vec())
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
    }

    async fn get_json<T: DeserializeOwned>(
        &self,
        call: &str,
        path: &str,
    ) -> Result<T, ManagerError> {
        let request = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        self.send(call, request).await
    }

    async fn send<T: DeserializeOwned>(
        &self,
        call: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<T, ManagerError> {
        let http = |source| ManagerError::Http {
            call: call.to_string(),
            source,
        };
        let response = request.send().await.map_err(http)?;
        check(call, response).await?.json().await.map_err(http)
    }
}

async fn check(call: &str, response: reqwest::Response) -> Result<reqwest::Response, ManagerError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let text = response.text().await.unwrap_or_default();
    let (code, message) = match serde_json::from_str::<ErrorBody>(&text) {
        Ok(e) => (e.error, e.message),
        Err(_) => (String::new(), text),
    };
    Err(ManagerError::Refused {
        call: call.to_string(),
        status: status.as_u16(),
        code,
        message,
    })
}

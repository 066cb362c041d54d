//! The judge-runner Server backend's HTTP: one call to B with the token, and
//! the one place an answer becomes a value, a refusal with the contract's code,
//! or "unavailable" (no answer, 5xx, 408, 429, a body that is not the contract's).

use std::time::Duration;

use reqwest::{Method, StatusCode, Url};
use serde::de::DeserializeOwned;

use crate::protocol::ErrorBody;

use super::super::backend::BackendError;

/// How long one call to B may take (uploads say their own).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// B's base URL and the forwarder's token there.
pub struct Http {
    client: reqwest::Client,
    pub base: Url,
    token: String,
}

/// A call's answer that is not a success.
pub enum Refusal {
    /// No answer, 5xx, 408/429, or a body that does not parse.
    Unavailable(String),
    /// A 4xx with the contract's error code.
    Refused {
        status: u16,
        code: String,
        message: String,
    },
}

impl From<Refusal> for BackendError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Unavailable(detail) => BackendError::Unavailable { detail },
            // Credentials B no longer takes: not the job's fault. The claims
            // pause (`ready`) until an operator mends it; held jobs go back to A.
            Refusal::Refused {
                status: 401 | 403,
                code,
                message,
            } => BackendError::Unavailable {
                detail: format!("B refuses the forwarder's token ({code}: {message})"),
            },
            Refusal::Refused { code, message, .. } => BackendError::Failed {
                reason: if code.is_empty() {
                    "forward.refused".to_string()
                } else {
                    code
                },
                retryable: false,
                message,
            },
        }
    }
}

impl Http {
    pub fn new(base: &str, token: &str) -> Result<Http, String> {
        let with_slash = if base.ends_with('/') {
            base.to_string()
        } else {
            format!("{base}/")
        };
        let base = Url::parse(&with_slash).map_err(|e| format!("--to {base:?}: {e}"))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(format!("--to {base}: expected an http:// or https:// URL"));
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .user_agent(concat!("judge-runner-forward/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Http {
            client,
            base,
            token: token.to_string(),
        })
    }

    fn url(&self, path: &str) -> Result<Url, Refusal> {
        self.base
            .join(path)
            .map_err(|e| Refusal::Unavailable(format!("bad path {path:?}: {e}")))
    }

    /// One call: the answer's status and bytes, or no answer.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        timeout: Duration,
        build: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Result<(StatusCode, reqwest::header::HeaderMap, bytes::Bytes), Refusal> {
        let request = self
            .client
            .request(method, self.url(path)?)
            .bearer_auth(&self.token)
            .timeout(timeout);
        let unanswered =
            |e: reqwest::Error| Refusal::Unavailable(format!("{path}: {}", describe(&e)));
        let response = build(request).send().await.map_err(unanswered)?;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.map_err(unanswered)?;
        Ok((status, headers, bytes))
    }

    /// A call whose success is JSON of type `T`.
    pub async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        build: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Result<(T, reqwest::header::HeaderMap), Refusal> {
        let (status, headers, bytes) = self.call(method, path, CALL_TIMEOUT, build).await?;
        let value = success(path, status, &bytes)?;
        Ok((value, headers))
    }

    /// The bytes of a successful GET.
    pub async fn bytes(&self, path: &str) -> Result<Vec<u8>, Refusal> {
        let (status, _, bytes) = self.call(Method::GET, path, CALL_TIMEOUT, |r| r).await?;
        if status.is_success() {
            return Ok(bytes.to_vec());
        }
        Err(refusal(path, status, &bytes))
    }
}

/// A success's JSON, or the refusal it is.
pub fn success<T: DeserializeOwned>(
    path: &str,
    status: StatusCode,
    bytes: &[u8],
) -> Result<T, Refusal> {
    if !status.is_success() {
        return Err(refusal(path, status, bytes));
    }
    serde_json::from_slice(bytes).map_err(|e| {
        Refusal::Unavailable(format!(
            "{path}: {status} with a body that is not the contract's: {e}"
        ))
    })
}

fn refusal(path: &str, status: StatusCode, bytes: &[u8]) -> Refusal {
    let error: Option<ErrorBody> = serde_json::from_slice(bytes).ok();
    let (code, message) = match error {
        Some(e) => (e.error, e.message),
        None => (
            String::new(),
            String::from_utf8_lossy(bytes).chars().take(200).collect(),
        ),
    };
    if status.is_server_error()
        || status == StatusCode::REQUEST_TIMEOUT
        || status == StatusCode::TOO_MANY_REQUESTS
    {
        return Refusal::Unavailable(format!("{path}: {status} {code}: {message}"));
    }
    Refusal::Refused {
        status: status.as_u16(),
        code,
        message,
    }
}

fn describe(err: &reqwest::Error) -> String {
    crate::package::describe_http_error(err)
}

//! The Runner's side of the protocol (`../shared/CONTRACT.md` §4): one method per
//! call, over `reqwest`, with the Runner key as bearer token.
//!
//! Answers become typed errors in one place ([`Client::answer`]): `409 lease.lost`
//! is [`ClientError::LeaseLost`], and so is `401 auth.revoked` on a lease-bearing
//! call (revoking the key requeued the work); no answer at all, a 5xx, 408 or 429 is
//! [`ClientError::Unreachable`] (worth another try); any other refusal is
//! [`ClientError::Refused`]. [`Client::until_answered`] retries the first kind
//! with backoff until the Server answers or the caller gives up.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use reqwest::{Method, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::backoff::Backoff;
use crate::package::describe_http_error;
use crate::protocol::codes::error as code;
use crate::protocol::{
    Claim, ClaimRequest, ErrorBody, FailureBody, Id, LeaseRenewal, LeaseRenewed, PackageRef,
    ProgressBody, ReleaseBody, ResultBody, TrialResultBody,
};

/// How long one ordinary call may take before it counts as unanswered.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the start-up key check waits for the Server.
const KEY_CHECK_TIMEOUT: Duration = Duration::from_secs(10);
/// A claim waits `wait_seconds` on the Server; this much more is the network's.
const CLAIM_SLACK: Duration = Duration::from_secs(10);

/// What a lease-bearing call is about: a job or a trial (their calls live under
/// `/api/jobs/{id}` and `/api/trials/{id}` with the same rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkRef {
    Job(Id),
    Trial(Id),
}

impl WorkRef {
    fn path(self, call: &str) -> String {
        match self {
            WorkRef::Job(id) => format!("api/jobs/{id}/{call}"),
            WorkRef::Trial(id) => format!("api/trials/{id}/{call}"),
        }
    }
}

impl fmt::Display for WorkRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkRef::Job(id) => write!(f, "job {id}"),
            WorkRef::Trial(id) => write!(f, "trial {id}"),
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// The Server no longer holds this lease for us: drop the work.
    #[error("the lease on {work} is lost")]
    LeaseLost { work: WorkRef },

    /// No answer (connection refused, timeout) or a temporary one (5xx, 408, 429).
    #[error("server unreachable on {call}: {detail}")]
    Unreachable { call: String, detail: String },

    /// The Server answered with a refusal another try would not change.
    #[error("server refused {call}: {status} {code}: {message}")]
    Refused {
        call: String,
        status: u16,
        code: String,
        message: String,
    },

    /// A success whose body was not what the contract says.
    #[error("unexpected answer to {call}: {detail}")]
    BadAnswer { call: String, detail: String },

    /// The caller gave up waiting for an answer (shutting down).
    #[error("gave up on {call}")]
    GaveUp { call: String },

    #[error("invalid server URL {url:?}: {detail}")]
    BadUrl { url: String, detail: String },
}

impl ClientError {
    /// Whether the same call may succeed later.
    pub fn is_transient(&self) -> bool {
        matches!(self, ClientError::Unreachable { .. })
    }
}

/// A Runner's connection to its Server. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: Url,
    key: String,
}

impl Client {
    /// `server` is the base URL (`http://host:port`, a path prefix allowed).
    pub fn new(server: &str, key: &str) -> Result<Client, ClientError> {
        let bad = |detail: String| ClientError::BadUrl {
            url: server.to_string(),
            detail,
        };
        let with_slash = if server.ends_with('/') {
            server.to_string()
        } else {
            format!("{server}/")
        };
        let base = Url::parse(&with_slash).map_err(|e| bad(e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(bad("expected http:// or https://".to_string()));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .user_agent(concat!("judge-runner/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| bad(e.to_string()))?;
        Ok(Client {
            http,
            base,
            key: key.to_string(),
        })
    }

    pub fn base_url(&self) -> &Url {
        &self.base
    }

    /// The package's URL made absolute (the contract allows a relative one).
    pub fn package_url(&self, package: &PackageRef) -> Result<String, ClientError> {
        self.base
            .join(&package.url)
            .map(String::from)
            .map_err(|e| ClientError::BadUrl {
                url: package.url.clone(),
                detail: e.to_string(),
            })
    }

    /// Start-up check of the key (CONTRACT §5): `GET /api/packages/{64 zeros}`, a
    /// Runner call that changes nothing. Any answer but a refusal of the key
    /// (404: no such package) means the Server takes it; 401 `auth.required` /
    /// `auth.revoked` (or 403: not a Runner key) is `Refused`; no answer is
    /// `Unreachable` (the daemon starts anyway and keeps trying).
    pub async fn check_key(&self) -> Result<(), ClientError> {
        let path = format!("api/packages/{}", "0".repeat(64));
        let response = self
            .send(Method::GET, &path, KEY_CHECK_TIMEOUT, |r| r)
            .await?;
        let status = response.status();
        if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
            return Ok(());
        }
        match self
            .answer::<serde_json::Value>("the key check", None, response)
            .await
        {
            Ok(_) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// `POST /api/jobs/claim`: a job or trial, or `None` when nothing was
    /// claimable within `wait_seconds`.
    pub async fn claim(&self, request: &ClaimRequest) -> Result<Option<Claim>, ClientError> {
        let wait = Duration::from_secs(request.wait_seconds.unwrap_or(0));
        let response = self
            .send(Method::POST, "api/jobs/claim", wait + CLAIM_SLACK, |r| {
                r.json(request)
            })
            .await?;
        if response.status() == StatusCode::NO_CONTENT {
            return Ok(None);
        }
        self.answer("claim", None, response).await.map(Some)
    }

    /// `POST …/lease`: renews by the lease's own length.
    pub async fn renew(&self, work: WorkRef, token: &str) -> Result<LeaseRenewed, ClientError> {
        let body = LeaseRenewal {
            lease_token: token.to_string(),
            seconds: None,
            attempt: None,
        };
        self.post_json(work, "lease", &body).await
    }

    /// `POST …/progress`: stores progress and renews the lease.
    pub async fn progress(
        &self,
        work: WorkRef,
        token: &str,
        done: u64,
        total: u64,
    ) -> Result<(), ClientError> {
        let body = ProgressBody {
            lease_token: token.to_string(),
            done,
            total,
            attempt: None,
        };
        self.post_json::<serde_json::Value>(work, "progress", &body)
            .await
            .map(drop)
    }

    /// `POST …/release`: hands the work back (this Runner is stopping).
    pub async fn release(&self, work: WorkRef, token: &str) -> Result<(), ClientError> {
        let body = ReleaseBody {
            lease_token: token.to_string(),
            attempt: None,
        };
        self.post_json::<serde_json::Value>(work, "release", &body)
            .await
            .map(drop)
    }

    /// `POST …/failure`: an infrastructure failure, never a verdict.
    pub async fn failure(
        &self,
        work: WorkRef,
        token: &str,
        reason: &str,
        retryable: bool,
    ) -> Result<(), ClientError> {
        let body = FailureBody {
            lease_token: token.to_string(),
            reason: reason.to_string(),
            retryable,
            attempt: None,
        };
        self.post_json::<serde_json::Value>(work, "failure", &body)
            .await
            .map(drop)
    }

    /// `PUT /api/jobs/{id}/files/{name}` with the lease token in `X-Lease-Token`.
    pub async fn put_file(
        &self,
        job: Id,
        token: &str,
        name: &str,
        bytes: Vec<u8>,
    ) -> Result<(), ClientError> {
        let work = WorkRef::Job(job);
        let path = work.path(&format!("files/{name}"));
        let response = self
            .send(Method::PUT, &path, CALL_TIMEOUT, |r| {
                r.header("X-Lease-Token", token)
                    .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
                    .body(bytes.clone())
            })
            .await?;
        self.answer::<serde_json::Value>(&path, Some(work), response)
            .await
            .map(drop)
    }

    /// `POST /api/jobs/{id}/result`; the same token again is answered 200.
    pub async fn result(&self, job: Id, body: &ResultBody) -> Result<(), ClientError> {
        self.post_json::<serde_json::Value>(WorkRef::Job(job), "result", body)
            .await
            .map(drop)
    }

    /// `POST /api/trials/{id}/result` with the trial's timings.
    pub async fn trial_result(&self, trial: Id, body: &TrialResultBody) -> Result<(), ClientError> {
        self.post_json::<serde_json::Value>(WorkRef::Trial(trial), "result", body)
            .await
            .map(drop)
    }

    /// Repeats `call` while the Server is unreachable, with backoff, until it
    /// answers (success or refusal) or `give_up` is cancelled.
    pub async fn until_answered<T, F, Fut>(
        what: &str,
        give_up: &CancellationToken,
        backoff: &mut Backoff,
        mut call: F,
    ) -> Result<T, ClientError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ClientError>>,
    {
        loop {
            let outcome = tokio::select! {
                biased;
                () = give_up.cancelled() => return Err(ClientError::GaveUp { call: what.to_string() }),
                outcome = call() => outcome,
            };
            match outcome {
                Err(err) if err.is_transient() => {
                    let pause = backoff.next_delay();
                    tracing::warn!(call = what, error = %err, retry_in = ?pause, "server unreachable, will retry");
                    tokio::select! {
                        () = give_up.cancelled() => return Err(ClientError::GaveUp { call: what.to_string() }),
                        () = tokio::time::sleep(pause) => {}
                    }
                }
                other => return other,
            }
        }
    }

    async fn post_json<T: DeserializeOwned>(
        &self,
        work: WorkRef,
        call: &str,
        body: &impl Serialize,
    ) -> Result<T, ClientError> {
        let path = work.path(call);
        let response = self
            .send(Method::POST, &path, CALL_TIMEOUT, |r| r.json(body))
            .await?;
        self.answer(&path, Some(work), response).await
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        timeout: Duration,
        build: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ClientError> {
        let url = self.base.join(path).map_err(|e| ClientError::BadUrl {
            url: path.to_string(),
            detail: e.to_string(),
        })?;
        let request = self
            .http
            .request(method, url)
            .bearer_auth(&self.key)
            .timeout(timeout);
        build(request)
            .send()
            .await
            .map_err(|e| ClientError::Unreachable {
                call: path.to_string(),
                detail: describe_http_error(&e),
            })
    }

    /// The one place answers become values or typed errors.
    async fn answer<T: DeserializeOwned>(
        &self,
        call: &str,
        work: Option<WorkRef>,
        response: reqwest::Response,
    ) -> Result<T, ClientError> {
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| ClientError::Unreachable {
                call: call.to_string(),
                detail: describe_http_error(&e),
            })?;
        if status.is_success() {
            return serde_json::from_slice(&bytes).map_err(|e| ClientError::BadAnswer {
                call: call.to_string(),
                detail: format!("{status}: {e}"),
            });
        }
        let error: Option<ErrorBody> = serde_json::from_slice(&bytes).ok();
        let (error_code, message) = match error {
            Some(e) => (e.error, e.message),
            None => (
                String::new(),
                String::from_utf8_lossy(&bytes).chars().take(200).collect(),
            ),
        };
        // A revoked key on a lease-bearing call is a lost lease too: revoking
        // sent this Runner's Running work back to the queue (CONTRACT §5).
        let lost = (status == StatusCode::CONFLICT && error_code == code::LEASE_LOST)
            || (status == StatusCode::UNAUTHORIZED && error_code == code::AUTH_REVOKED);
        if lost && let Some(work) = work {
            return Err(ClientError::LeaseLost { work });
        }
        if status.is_server_error()
            || status == StatusCode::REQUEST_TIMEOUT
            || status == StatusCode::TOO_MANY_REQUESTS
        {
            return Err(ClientError::Unreachable {
                call: call.to_string(),
                detail: format!("{status} {error_code}: {message}"),
            });
        }
        Err(ClientError::Refused {
            call: call.to_string(),
            status: status.as_u16(),
            code: error_code,
            message,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_the_kind_of_work() {
        assert_eq!(WorkRef::Job(7).path("lease"), "api/jobs/7/lease");
        assert_eq!(WorkRef::Trial(3).path("result"), "api/trials/3/result");
        assert_eq!(WorkRef::Job(1).to_string(), "job 1");
    }

    #[test]
    fn package_urls_resolve_against_the_server() {
        let client = Client::new("http://127.0.0.1:9/prefix", "k").unwrap();
        let rel = PackageRef {
            url: "api/packages/ab".into(),
            sha256: "ab".into(),
            size: 1,
        };
        assert_eq!(
            client.package_url(&rel).unwrap(),
            "http://127.0.0.1:9/prefix/api/packages/ab"
        );
        let abs = PackageRef {
            url: "http://other:1/api/packages/ab".into(),
            ..rel
        };
        assert_eq!(
            client.package_url(&abs).unwrap(),
            "http://other:1/api/packages/ab"
        );
        assert!(Client::new("ftp://x", "k").is_err());
    }

    /// A stand-in Server answering every call with `status` and error `code`.
    async fn answering(status: u16, code: &'static str) -> Client {
        use axum::http::StatusCode;
        let app = axum::Router::new().fallback(move || async move {
            (
                StatusCode::from_u16(status).unwrap(),
                axum::Json(serde_json::json!({"error": code, "message": "m"})),
            )
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Client::new(&format!("http://{addr}"), "k").unwrap()
    }

    #[tokio::test]
    async fn answers_are_typed() {
        let lost = answering(409, "lease.lost").await;
        let err = lost.renew(WorkRef::Trial(4), "t").await.unwrap_err();
        assert!(
            matches!(
                err,
                ClientError::LeaseLost {
                    work: WorkRef::Trial(4)
                }
            ),
            "{err}"
        );
        // Another conflict is a refusal, not a lost lease.
        let other = answering(409, "attempt.finished").await;
        let err = other.release(WorkRef::Job(1), "t").await.unwrap_err();
        assert!(
            matches!(&err, ClientError::Refused { status: 409, code, .. } if code == "attempt.finished"),
            "{err}"
        );
        let busy = answering(503, "unavailable").await;
        assert!(
            busy.progress(WorkRef::Job(1), "t", 1, 2)
                .await
                .unwrap_err()
                .is_transient()
        );
        let revoked = answering(401, "auth.revoked").await;
        // On a lease-bearing call, a revoked key is a lost lease: stop the job.
        for err in [
            revoked.renew(WorkRef::Job(5), "t").await.unwrap_err(),
            revoked
                .progress(WorkRef::Job(5), "t", 1, 2)
                .await
                .unwrap_err(),
            revoked
                .put_file(5, "t", "log", Vec::new())
                .await
                .unwrap_err(),
        ] {
            assert!(
                matches!(
                    err,
                    ClientError::LeaseLost {
                        work: WorkRef::Job(5)
                    }
                ),
                "{err}"
            );
        }
        // A claim holds no lease: a refusal.
        let err = revoked
            .claim(&ClaimRequest {
                languages: vec!["c".into()],
                wait_seconds: None,
            })
            .await
            .unwrap_err();
        assert!(!err.is_transient());
        assert!(
            matches!(&err, ClientError::Refused { code, .. } if code == "auth.revoked"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn an_unreachable_server_is_transient() {
        // Port 9 (discard) on loopback is closed here: the connection is refused.
        let client = Client::new("http://127.0.0.1:9", "k").unwrap();
        let err = client.renew(WorkRef::Job(1), "t").await.unwrap_err();
        assert!(err.is_transient(), "{err}");
        let give_up = CancellationToken::new();
        let mut backoff = Backoff::new(Duration::from_millis(5), Duration::from_millis(20));
        // Given up on the third attempt (counted, not timed: a loaded machine
        // makes fewer attempts in a given time).
        let mut attempts = 0;
        let outcome = Client::until_answered("renew", &give_up, &mut backoff, || {
            attempts += 1;
            if attempts == 3 {
                give_up.cancel();
            }
            client.renew(WorkRef::Job(1), "t")
        })
        .await;
        assert!(matches!(outcome, Err(ClientError::GaveUp { .. })));
        assert_eq!(attempts, 3);
        assert_eq!(
            backoff.failures(),
            2,
            "both failed attempts were retried with backoff"
        );
    }
}

//! Downloading one package: streamed to a file while it is hashed (on a blocking
//! thread, so the runtime's threads only move bytes), retried with jittered
//! exponential backoff on failures another attempt could fix (no connection, 5xx,
//! 408/429, a body cut short), never on other 4xx.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::Rng;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use super::error::{FetchFailure, PackageError};

/// How hard to try to download a package.
#[derive(Debug, Clone)]
pub struct FetchPolicy {
    /// Attempts in all (at least 1).
    pub attempts: u32,
    /// Pause before the second attempt; doubled for each further one (±25 %).
    pub first_backoff: Duration,
    /// Longest pause between attempts.
    pub max_backoff: Duration,
    pub connect_timeout: Duration,
    /// Longest silence while reading the body.
    pub read_timeout: Duration,
}

impl Default for FetchPolicy {
    fn default() -> Self {
        FetchPolicy {
            attempts: 4,
            first_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(60),
        }
    }
}

impl FetchPolicy {
    pub(crate) fn client(&self) -> Result<reqwest::Client, PackageError> {
        reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .read_timeout(self.read_timeout)
            .build()
            .map_err(|e| PackageError::Fetch {
                url: String::new(),
                attempts: 0,
                failure: FetchFailure::Transport(describe(&e)),
            })
    }

    fn backoff(&self, retry: u32) -> Duration {
        let base = self
            .first_backoff
            .saturating_mul(1u32 << retry.min(16))
            .min(self.max_backoff);
        base.mul_f64(rand::rng().random_range(0.75..1.25))
    }
}

/// A bearer key sent with a download only when the URL is on one origin (the
/// Server's: scheme, host and port of `--server`), never to another (a CDN, an
/// object store a package URL may name). A redirect to another origin drops it
/// too (reqwest strips `Authorization` when the host, port or scheme changes).
#[derive(Clone)]
pub struct ServerKey {
    origin: reqwest::Url,
    header: reqwest::header::HeaderValue,
}

impl std::fmt::Debug for ServerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerKey")
            .field("origin", &self.origin.origin().ascii_serialization())
            .finish_non_exhaustive()
    }
}

impl ServerKey {
    /// `key` for URLs on the origin of `server` (an absolute http(s) URL).
    pub fn new(server: &str, key: &str) -> Result<ServerKey, ServerKeyError> {
        let bad = |detail: String| ServerKeyError {
            server: server.to_string(),
            detail,
        };
        let origin = reqwest::Url::parse(server).map_err(|e| bad(e.to_string()))?;
        if !matches!(origin.scheme(), "http" | "https") || origin.host().is_none() {
            return Err(bad(
                "expected an http:// or https:// URL with a host".to_string()
            ));
        }
        let mut header = reqwest::header::HeaderValue::from_str(&format!("Bearer {key}"))
            .map_err(|_| bad("the key is not a valid HTTP header value".to_string()))?;
        header.set_sensitive(true);
        Ok(ServerKey { origin, header })
    }

    /// Whether `url` is on the key's origin (scheme, host, port; a default
    /// port written out or left implicit is the same port).
    pub fn applies_to(&self, url: &str) -> bool {
        reqwest::Url::parse(url).is_ok_and(|u| u.origin() == self.origin.origin())
    }
}

/// A `--server` URL or key [`ServerKey::new`] cannot use.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot send the key to {server:?}: {detail}")]
pub struct ServerKeyError {
    pub server: String,
    pub detail: String,
}

/// Downloads the package at `url` to `dest` (created or truncated), at most
/// `max_bytes`, and checks that its bytes hash to `sha256`: a package handed on
/// as it is, never unpacked (the forwarding Runner uploads it to another Server).
/// The key goes to its own origin only, as for the cache. Answers the size.
pub async fn fetch_archive(
    url: &str,
    sha256: &str,
    key: Option<&ServerKey>,
    dest: &Path,
    max_bytes: u64,
    policy: &FetchPolicy,
) -> Result<u64, PackageError> {
    if !super::is_sha256_hex(sha256) {
        return Err(PackageError::BadSha256 {
            given: sha256.to_string(),
        });
    }
    let client = policy.client()?;
    let downloaded = download(&client, key, url, dest, max_bytes, policy).await?;
    if !downloaded.sha256.eq_ignore_ascii_case(sha256) {
        return Err(PackageError::ChecksumMismatch {
            url: url.to_string(),
            expected: sha256.to_ascii_lowercase(),
            actual: downloaded.sha256,
        });
    }
    Ok(downloaded.bytes)
}

/// What one attempt left behind.
enum AttemptError {
    /// Another attempt may succeed.
    Transient(FetchFailure),
    /// Another attempt would fail the same way.
    Final(FetchFailure),
    Local(PackageError),
}

/// A downloaded file and the SHA-256 of its bytes.
pub(crate) struct Downloaded {
    pub sha256: String,
    pub bytes: u64,
}

/// Downloads `url` to `dest` (created or truncated), at most `max_bytes`.
pub(crate) async fn download(
    client: &reqwest::Client,
    key: Option<&ServerKey>,
    url: &str,
    dest: &Path,
    max_bytes: u64,
    policy: &FetchPolicy,
) -> Result<Downloaded, PackageError> {
    let attempts = policy.attempts.max(1);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let failure = match attempt_once(client, key, url, dest, max_bytes).await {
            Ok(done) => return Ok(done),
            Err(AttemptError::Local(err)) => return Err(err),
            Err(AttemptError::Final(failure)) => failure,
            Err(AttemptError::Transient(failure)) if attempt < attempts => {
                tracing::warn!(%url, attempt, %failure, "package download failed, retrying");
                tokio::time::sleep(policy.backoff(attempt - 1)).await;
                continue;
            }
            Err(AttemptError::Transient(failure)) => failure,
        };
        return Err(PackageError::Fetch {
            url: url.to_string(),
            attempts: attempt,
            failure,
        });
    }
}

async fn attempt_once(
    client: &reqwest::Client,
    key: Option<&ServerKey>,
    url: &str,
    dest: &Path,
    max_bytes: u64,
) -> Result<Downloaded, AttemptError> {
    let transport = |e: reqwest::Error| {
        let failure = FetchFailure::Transport(describe(&e));
        // A malformed URL fails the same way every time.
        if e.is_builder() {
            AttemptError::Final(failure)
        } else {
            AttemptError::Transient(failure)
        }
    };
    let mut request = client.get(url);
    if let Some(key) = key.filter(|k| k.applies_to(url)) {
        request = request.header(reqwest::header::AUTHORIZATION, key.header.clone());
    }
    let mut response = request.send().await.map_err(transport)?;
    let status = response.status();
    if !status.is_success() {
        let failure = FetchFailure::Status(status.as_u16());
        let transient = status.is_server_error() || matches!(status.as_u16(), 408 | 429);
        return Err(if transient {
            AttemptError::Transient(failure)
        } else {
            AttemptError::Final(failure)
        });
    }
    let announced = response.content_length();
    if announced.is_some_and(|len| len > max_bytes) {
        return Err(AttemptError::Final(FetchFailure::TooLarge {
            limit: max_bytes,
        }));
    }
    let (sender, writer) = spawn_writer(dest.to_path_buf());
    let mut received: u64 = 0;
    let streamed = async {
        while let Some(chunk) = response.chunk().await.map_err(transport)? {
            received += chunk.len() as u64;
            if received > max_bytes {
                return Err(AttemptError::Final(FetchFailure::TooLarge {
                    limit: max_bytes,
                }));
            }
            if sender.send(chunk).await.is_err() {
                break; // the writer failed; its error is reported below
            }
        }
        Ok(())
    }
    .await;
    drop(sender);
    let written = writer.await;
    streamed?;
    let sha256 = match written {
        Ok(Ok(digest)) => digest,
        Ok(Err(err)) => return Err(AttemptError::Local(PackageError::io("write", dest, err))),
        Err(join) => {
            return Err(AttemptError::Local(PackageError::io(
                "write",
                dest,
                std::io::Error::other(join.to_string()),
            )));
        }
    };
    if let Some(expected) = announced.filter(|&len| received < len) {
        return Err(AttemptError::Transient(FetchFailure::Truncated {
            expected,
            received,
        }));
    }
    Ok(Downloaded {
        sha256,
        bytes: received,
    })
}

type Writer = tokio::task::JoinHandle<std::io::Result<String>>;

/// A blocking thread that writes the chunks it is sent to `dest` and hashes them.
fn spawn_writer(dest: PathBuf) -> (mpsc::Sender<bytes::Bytes>, Writer) {
    let (sender, mut receiver) = mpsc::channel::<bytes::Bytes>(32);
    let writer = tokio::task::spawn_blocking(move || {
        let mut out = BufWriter::with_capacity(1 << 20, File::create(&dest)?);
        let mut hasher = Sha256::new();
        while let Some(chunk) = receiver.blocking_recv() {
            hasher.update(&chunk);
            out.write_all(&chunk)?;
        }
        out.into_inner().map_err(|e| e.into_error())?.flush()?;
        Ok(hex::encode(hasher.finalize()))
    });
    (sender, writer)
}

/// reqwest's error with its causes: its own message rarely says what failed
/// (refused, reset, timed out, a certificate); the causes do.
pub(crate) fn describe(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

//! Helpers of the package tests: the fixture problems, archives built entry by
//! entry (hostile names written raw into `tar::Header`s), and a real HTTP server
//! on 127.0.0.1:0 that counts requests and fails or truncates on demand.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use flate2::Compression;
use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};
use tar::{EntryType, Header};

/// `tests/fixtures/problems/NAME`: the problems the tests own (see its README).
pub fn problem_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/problems")
        .join(name)
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// One entry of a test archive. Names and link targets go into the header raw,
/// so absolute paths and `..` can be written.
pub enum Item<'a> {
    File(&'a str, &'a [u8]),
    FileMode(&'a str, &'a [u8], u32),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
    Hardlink(&'a str, &'a str),
    Special(&'a str, EntryType),
    /// A file entry that declares `size` bytes but carries `data`.
    Declared(&'a str, u64, &'a [u8]),
}

pub fn raw_header(name: &str, kind: EntryType, size: u64, mode: u32, link: &str) -> Header {
    let mut header = Header::new_gnu();
    {
        let old = header.as_old_mut();
        old.name = [0; 100];
        old.name[..name.len()].copy_from_slice(name.as_bytes());
        old.linkname = [0; 100];
        old.linkname[..link.len()].copy_from_slice(link.as_bytes());
    }
    header.set_entry_type(kind);
    header.set_size(size);
    header.set_mode(mode);
    header.set_mtime(1_700_000_000);
    header.set_cksum();
    header
}

/// Writes the tar stream of `items` (without compression) to `out`.
pub fn write_tar(out: impl Write, items: &[Item<'_>]) -> impl Write {
    let mut builder = tar::Builder::new(out);
    for item in items {
        let (header, data): (Header, &[u8]) = match item {
            Item::File(name, data) => (
                raw_header(name, EntryType::Regular, data.len() as u64, 0o644, ""),
                data,
            ),
            Item::FileMode(name, data, mode) => (
                raw_header(name, EntryType::Regular, data.len() as u64, *mode, ""),
                data,
            ),
            Item::Dir(name) => (raw_header(name, EntryType::Directory, 0, 0o755, ""), &[]),
            Item::Symlink(name, target) => {
                (raw_header(name, EntryType::Symlink, 0, 0o777, target), &[])
            }
            Item::Hardlink(name, target) => {
                (raw_header(name, EntryType::Link, 0, 0o644, target), &[])
            }
            Item::Special(name, kind) => (raw_header(name, *kind, 0, 0o644, ""), &[]),
            Item::Declared(name, size, data) => {
                let header = raw_header(name, EntryType::Regular, *size, 0o644, "");
                builder.get_mut().write_all(header.as_bytes()).unwrap();
                builder.get_mut().write_all(data).unwrap();
                let pad = (512 - data.len() % 512) % 512;
                builder.get_mut().write_all(&vec![0; pad]).unwrap();
                continue;
            }
        };
        builder.append(&header, data).unwrap();
    }
    builder.into_inner().unwrap()
}

/// A `.tar.gz` of `items`, as bytes.
pub fn tar_gz_bytes(items: &[Item<'_>]) -> Vec<u8> {
    let mut tar = Vec::new();
    write_tar(&mut tar, items);
    gzip(&tar)
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

/// A `.tar.gz` of the directory `dir`, its content under `prefix` (`""`, `"./"`
/// or `"name/"`); symlinks are archived as symlinks.
pub fn tar_gz_of_dir(dir: &Path, prefix: &str) -> Vec<u8> {
    let mut builder = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast()));
    builder.follow_symlinks(false);
    let name = if prefix.is_empty() {
        "."
    } else {
        prefix.trim_end_matches('/')
    };
    builder.append_dir_all(name, dir).unwrap();
    builder.into_inner().unwrap().finish().unwrap()
}

pub fn write_file(path: &Path, bytes: &[u8]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    File::create(path).unwrap().write_all(bytes).unwrap();
}

/// Copies a directory tree (regular files and directories).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
            let mut perm = std::fs::metadata(&target).unwrap().permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o644);
            std::fs::set_permissions(&target, perm).unwrap();
        }
    }
}

/// Every path below `dir` (relative), sorted: "nothing written outside" checks.
pub fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(read) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in read {
            let entry = entry.unwrap();
            let path = entry.path();
            out.push(path.strip_prefix(base).unwrap().display().to_string());
            if entry.file_type().unwrap().is_dir() {
                walk(base, &path, out);
            }
        }
    }
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// What the test server answers to one request for a package.
#[derive(Debug, Clone)]
pub enum Reply {
    /// The package, whole.
    Full,
    Status(u16),
    /// `Content-Length` of the whole package, then half of it, then the
    /// connection is dropped.
    Truncated,
    /// These bytes instead of the package.
    Other(Vec<u8>),
    /// Waits, then sends the package whole.
    Slow(Duration),
    /// `302 Found` to this URL.
    Redirect(String),
}

#[derive(Default)]
struct ServerState {
    packages: Mutex<HashMap<String, Vec<u8>>>,
    scripts: Mutex<HashMap<String, VecDeque<Reply>>>,
    default_delay: Mutex<Option<Duration>>,
    token: Mutex<Option<String>>,
    hits: Mutex<HashMap<String, Arc<AtomicUsize>>>,
    /// The `Authorization` header of every request, in order.
    authorizations: Mutex<Vec<Option<String>>>,
}

/// A real HTTP server on 127.0.0.1:0, serving `/pkg/{name}`.
pub struct TestServer {
    pub addr: SocketAddr,
    state: Arc<ServerState>,
    task: tokio::task::JoinHandle<()>,
}

impl TestServer {
    pub async fn start() -> TestServer {
        let state = Arc::new(ServerState::default());
        let app = Router::new()
            .route("/pkg/{name}", get(serve_package))
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        TestServer { addr, state, task }
    }

    pub fn add(&self, name: &str, bytes: Vec<u8>) {
        self.state
            .packages
            .lock()
            .unwrap()
            .insert(name.to_string(), bytes);
    }

    /// The next replies for `name`, in order; afterwards `Full`.
    pub fn script(&self, name: &str, replies: Vec<Reply>) {
        self.state
            .scripts
            .lock()
            .unwrap()
            .insert(name.to_string(), replies.into());
    }

    /// Every `Full` reply waits this long first (to make downloads overlap).
    pub fn delay_all(&self, delay: Duration) {
        *self.state.default_delay.lock().unwrap() = Some(delay);
    }

    /// From now on, requests without `Authorization: Bearer <token>` get 401.
    pub fn require_token(&self, token: &str) {
        *self.state.token.lock().unwrap() = Some(token.to_string());
    }

    pub fn url(&self, name: &str) -> String {
        format!("http://{}/pkg/{name}", self.addr)
    }

    /// The `Authorization` header of every request so far (`None`: none sent).
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.state.authorizations.lock().unwrap().clone()
    }

    pub fn hits(&self, name: &str) -> usize {
        self.state
            .hits
            .lock()
            .unwrap()
            .get(name)
            .map_or(0, |h| h.load(Ordering::SeqCst))
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve_package(
    State(state): State<Arc<ServerState>>,
    UrlPath(name): UrlPath<String>,
    headers: axum::http::HeaderMap,
) -> Response {
    state
        .hits
        .lock()
        .unwrap()
        .entry(name.clone())
        .or_default()
        .fetch_add(1, Ordering::SeqCst);
    state.authorizations.lock().unwrap().push(
        headers
            .get(header::AUTHORIZATION)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
    );
    let reply = state
        .scripts
        .lock()
        .unwrap()
        .get_mut(&name)
        .and_then(VecDeque::pop_front)
        .unwrap_or(Reply::Full);
    let required = state.token.lock().unwrap().clone();
    if let Some(token) = required {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if given != Some(format!("Bearer {token}").as_str()) {
            return StatusCode::UNAUTHORIZED.into_response();
        }
    }
    let Some(bytes) = state.packages.lock().unwrap().get(&name).cloned() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let delay = *state.default_delay.lock().unwrap();
    match reply {
        Reply::Full => {
            if let Some(delay) = delay {
                tokio::time::sleep(delay).await;
            }
            bytes.into_response()
        }
        Reply::Slow(delay) => {
            tokio::time::sleep(delay).await;
            bytes.into_response()
        }
        Reply::Status(code) => StatusCode::from_u16(code).unwrap().into_response(),
        Reply::Other(other) => other.into_response(),
        Reply::Redirect(to) => (StatusCode::FOUND, [(header::LOCATION, to)]).into_response(),
        Reply::Truncated => {
            let half = bytes[..bytes.len() / 2].to_vec();
            let chunks: Vec<Result<Vec<u8>, std::io::Error>> = vec![
                Ok(half),
                Err(std::io::Error::other("connection dropped on purpose")),
            ];
            Response::builder()
                .header(header::CONTENT_LENGTH, bytes.len())
                .body(Body::from_stream(futures_util::stream::iter(chunks)))
                .unwrap()
        }
    }
}

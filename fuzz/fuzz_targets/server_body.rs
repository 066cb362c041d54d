//! The Server's request bodies through the real router (SQLite in a temporary
//! directory, no socket): whatever bytes a client sends to a JSON route — or as
//! a package upload — the answer is never a 5xx, and a refusal has the
//! contract's error shape `{"error", "message"}`. The first input byte picks the
//! route, the rest is the body. One Server lives for the whole fuzzing run
//! (a problem, a submission and its job exist), so state accumulates: a crash is
//! replayed from the same set-up (`cargo fuzz run server_body CRASH`).
#![no_main]

use std::io::Write;
use std::sync::OnceLock;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use judge_runner::server::{self, AppState, Config};
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt;

const MANAGER: &str = "fuzz-manager-token";

struct Server {
    rt: tokio::runtime::Runtime,
    app: Router,
    runner_key: String,
    _dir: tempfile::TempDir,
}

/// The routes that read a body: (method, path, manager auth?).
const ROUTES: &[(&str, &str, bool)] = &[
    ("POST", "/api/runners", true),
    ("POST", "/api/tokens", true),
    ("POST", "/api/submissions", true),
    ("POST", "/api/submissions/1/rejudge", true),
    ("POST", "/api/jobs/claim", false),
    ("POST", "/api/jobs/1/lease", false),
    ("POST", "/api/jobs/1/progress", false),
    ("POST", "/api/jobs/1/release", false),
    ("POST", "/api/jobs/1/failure", false),
    ("POST", "/api/jobs/1/result", false),
    ("POST", "/api/trials/1/lease", false),
    ("POST", "/api/trials/1/progress", false),
    ("POST", "/api/trials/1/release", false),
    ("POST", "/api/trials/1/failure", false),
    ("POST", "/api/trials/1/result", false),
    ("POST", "/api/problems", true),
    ("POST", "/api/problems?time_limit=2", true),
];

fn package() -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    for (name, body) in [
        ("problem.yaml", "name: fuzz\n"),
        ("data/secret/1.in", "1\n"),
        ("data/secret/1.ans", "1\n"),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_size(body.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        tar.append_data(&mut h, name, body.as_bytes()).expect("tar");
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar.into_inner().expect("tar")).expect("gzip");
    gz.finish().expect("gzip")
}

async fn call(
    app: &Router,
    method: &str,
    path: &str,
    auth: &str,
    body: Vec<u8>,
) -> (StatusCode, Vec<u8>) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {auth}"))
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("request");
    let resp = app.clone().oneshot(req).await.expect("infallible");
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .expect("body");
    (status, bytes.to_vec())
}

fn server() -> &'static Server {
    static S: OnceLock<Server> = OnceLock::new();
    S.get_or_init(|| {
        // Statics are never dropped and libFuzzer ends with exit(): a temporary
        // directory would be left in /tmp by every run. One fixed directory in
        // the fuzz crate's own (ignored) target/ instead, emptied at start.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target")
            .join(format!("server_body-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("state dir");
        let dir = tempfile::TempDir::with_prefix_in("run-", &dir).expect("tempdir");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let mut config = Config::new(
            format!("sqlite://{}", dir.path().join("db.sqlite").display()),
            dir.path().join("storage"),
            MANAGER,
        );
        config.max_claim_wait = std::time::Duration::ZERO;
        config.max_body = 1 << 20;
        config.max_upload = 1 << 20;
        let (app, runner_key) = rt.block_on(async {
            let state = AppState::open_with_system_clock(config).await.expect("open");
            let app = server::routes::router(state);
            let (s, b) = call(&app, "POST", "/api/runners", MANAGER, br#"{"name":"fuzz"}"#.to_vec()).await;
            assert_eq!(s, StatusCode::CREATED, "{}", String::from_utf8_lossy(&b));
            let v: serde_json::Value = serde_json::from_slice(&b).expect("json");
            let key = v["key"].as_str().expect("key").to_string();
            let (s, b) = call(&app, "POST", "/api/problems", MANAGER, package()).await;
            assert_eq!(s, StatusCode::CREATED, "{}", String::from_utf8_lossy(&b));
            let sub = br#"{"problem_id":1,"language":"c","files":[{"name":"a.c","content":"int main(){}"}]}"#;
            let (s, b) = call(&app, "POST", "/api/submissions", MANAGER, sub.to_vec()).await;
            assert_eq!(s, StatusCode::CREATED, "{}", String::from_utf8_lossy(&b));
            (app, key)
        });
        Server {
            rt,
            app,
            runner_key,
            _dir: dir,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let s = server();
    let (method, path, manager) = ROUTES[usize::from(pick) % ROUTES.len()];
    let auth = if manager {
        MANAGER
    } else {
        s.runner_key.as_str()
    };
    let (status, answer) =
        s.rt.block_on(call(&s.app, method, path, auth, body.to_vec()));
    assert!(
        !status.is_server_error(),
        "{method} {path} answered {status}: {}",
        String::from_utf8_lossy(&answer)
    );
    if !status.is_success() {
        let v: serde_json::Value = serde_json::from_slice(&answer).unwrap_or_else(|e| {
            panic!(
                "{method} {path} {status}: not JSON ({e}): {}",
                String::from_utf8_lossy(&answer)
            )
        });
        assert!(
            v["error"].is_string() && v["message"].is_string(),
            "{method} {path} {status}: not the error shape: {v}"
        );
    }
});

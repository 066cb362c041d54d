//! What a new operator meets in the first hour, on real `serve`, `daemon` and
//! `package fetch` processes: a daemon whose key the Server refuses exits 1 at
//! start-up; `serve --languages` refuses other languages with 422
//! `language.unknown`, and a daemon whose languages it accepts none of says so
//! and backs off; `package fetch --key` downloads from a Server's own
//! package URL; a bad upload's message names what the client sent, never a path
//! of the Server's disk; every request is logged (method, route, status, ms),
//! never a token; the daemon logs toolchains in words, not a Debug dump.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod e2e_common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use e2e_common::{BIN, Scene, ServeOpts, TOKEN};
use serde_json::{Value, json};

/// The `greet` fixture, packed as an operator would (`tar -czf p.tar.gz -C dir .`).
fn greet_package() -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/problems/greet");
    judge_runner::demo::examples::tar_gz(&dir).unwrap()
}

async fn post_json(url: &str, token: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn upload(url: &str, bytes: Vec<u8>) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{url}/api/problems"))
        .bearer_auth(TOKEN)
        .body(bytes)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A trial in `language` (multipart, as the contract has it): status and body.
async fn trial(url: &str, language: &str) -> (u16, Value) {
    let boundary = "first-hour-boundary";
    let mut body = Vec::new();
    let mut part = |headers: &str, bytes: &[u8]| {
        body.extend_from_slice(format!("--{boundary}\r\n{headers}\r\n\r\n").as_bytes());
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    };
    part(
        "Content-Disposition: form-data; name=\"package\"; filename=\"p.tar.gz\"\r\nContent-Type: application/gzip",
        &greet_package(),
    );
    part(
        "Content-Disposition: form-data; name=\"language\"",
        language.as_bytes(),
    );
    part(
        "Content-Disposition: form-data; name=\"file\"; filename=\"a.src\"",
        b"x\n",
    );
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    let response = reqwest::Client::new()
        .post(format!("{url}/api/trials"))
        .bearer_auth(TOKEN)
        .header(
            "Content-Type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn submission(problem: i64, language: &str) -> Value {
    json!({"problem_id": problem, "language": language,
        "files": [{"name": "a.src", "content": "x\n"}]})
}

/// (1) CONTRACT §5: a key the Server answers 401 to at start-up ends the daemon
/// with exit 1 and a clear message: an unknown key (`auth.required`) and a
/// revoked one (`auth.revoked`). A good key starts, and logs its toolchains in
/// words (5).
#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_whose_key_is_refused_exits_1_at_start_up() {
    let scene = Scene::new("first-hour-key");
    let serve = scene.serve(30);
    let manager = serve.manager();

    let mut bogus = scene.daemon(&serve.url, "jrk_bogus", 3700, "bogus.log");
    let status = bogus
        .wait_exit(Duration::from_secs(120))
        .unwrap_or_else(|| panic!("still running with a bogus key: {}", scene.logs()));
    assert_eq!(status.code(), Some(1), "{}", bogus.log_text());
    let text = bogus.log_text();
    assert!(
        text.contains("refuses this Runner key") && text.contains("auth.required"),
        "{text}"
    );

    let revoked = manager.create_runner("soon revoked").await.unwrap();
    let answer = reqwest::Client::new()
        .delete(format!("{}/api/runners/{}", serve.url, revoked.runner_id))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert!(answer.status().is_success(), "{}", answer.status());
    let mut refused = scene.daemon(&serve.url, &revoked.key, 3700, "revoked.log");
    let status = refused
        .wait_exit(Duration::from_secs(120))
        .unwrap_or_else(|| panic!("still running with a revoked key: {}", scene.logs()));
    assert_eq!(status.code(), Some(1), "{}", refused.log_text());
    let text = refused.log_text();
    assert!(
        text.contains("refuses this Runner key") && text.contains("auth.revoked"),
        "{text}"
    );

    let good = manager.create_runner("good").await.unwrap();
    let mut daemon = scene.daemon(&serve.url, &good.key, 3700, "good.log");
    daemon.wait_started().await;
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    let status = daemon.wait_exit(Duration::from_secs(60)).unwrap();
    assert_eq!(status.code(), Some(0), "{}", daemon.log_text());
    let text = daemon.log_text();
    assert!(text.contains("toolchain found"), "{text}");
    assert!(!text.contains("refuses"), "{text}");
    // Words an operator reads, not a Rust Debug dump.
    assert!(
        !text.contains("Toolchain {") && !text.contains("dir: "),
        "{text}"
    );
}

/// (2) CONTRACT §4: `serve --languages` names what the Server accepts; a
/// submission or trial in another language is 422 `language.unknown`, whose
/// message lists the accepted ones. The default is c, cpp, python3, rust, java.
#[tokio::test(flavor = "multi_thread")]
async fn serve_refuses_a_language_it_does_not_accept() {
    let scene = Scene::new("first-hour-lang");
    let serve = e2e_common::Serve::start_with(
        &ServeOpts::sqlite(scene.dir.path(), 30),
        &scene.path("serve.log"),
        &["--languages", "c,python3"],
    );
    let (status, created) = upload(&serve.url, greet_package()).await;
    assert_eq!(status, 201, "{created}");
    let problem = created["problem_id"].as_i64().unwrap();
    let url = format!("{}/api/submissions", serve.url);
    for language in ["cpp", "python", "pascal"] {
        let (status, body) = post_json(&url, TOKEN, submission(problem, language)).await;
        assert_eq!(status, 422, "{language}: {body}");
        assert_eq!(body["error"], "language.unknown", "{body}");
        let message = body["message"].as_str().unwrap();
        assert!(
            message.contains(language) && message.contains("c, python3"),
            "{message}"
        );
        let (status, body) = trial(&serve.url, language).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (422, Some("language.unknown")),
            "trial in {language}: {body}"
        );
    }
    let (status, body) = post_json(&url, TOKEN, submission(problem, "python3")).await;
    assert_eq!(status, 201, "{body}");
    // The OpenAPI document says so too.
    let doc: Value = reqwest::get(format!("{}/api/openapi.json", serve.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for path in ["/api/submissions", "/api/trials"] {
        let answer = doc["paths"][path]["post"]["responses"]["422"].to_string();
        assert!(answer.contains("language.unknown"), "{path}: {answer}");
    }
    drop(serve);

    std::fs::create_dir_all(scene.path("default")).unwrap();
    let default = e2e_common::Serve::start(
        &ServeOpts::sqlite(&scene.path("default"), 30),
        &scene.path("default.log"),
    );
    let (_, created) = upload(&default.url, greet_package()).await;
    let problem = created["problem_id"].as_i64().unwrap();
    let url = format!("{}/api/submissions", default.url);
    let (status, body) = post_json(&url, TOKEN, submission(problem, "pascal")).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("c, cpp, python3, rust, java"),
        "{body}"
    );
    for language in ["c", "cpp", "python3", "rust", "java"] {
        let (status, body) = post_json(&url, TOKEN, submission(problem, language)).await;
        assert_eq!(status, 201, "{language}: {body}");
    }
}

/// (2b) A claim none of whose languages the Server accepts is 422
/// `language.unknown` (issue 17); the daemon says so in words naming both flags
/// and asks again after a pause (its backoff), never in a hot loop; it keeps
/// running (the Server may be reconfigured) and SIGTERM still ends it with 0.
#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_whose_languages_the_server_refuses_says_so_and_backs_off() {
    let scene = Scene::new("first-hour-claim-lang");
    let serve = e2e_common::Serve::start_with(
        &ServeOpts::sqlite(scene.dir.path(), 30),
        &scene.path("serve.log"),
        &["--languages", "pascal"],
    );
    let runner = serve.manager().create_runner("mismatched").await.unwrap();
    let mut daemon = scene.daemon(&serve.url, &runner.key, 3710, "daemon.log");
    daemon.wait_started().await;
    const LINE: &str = "the Server accepts none of this Runner's languages";
    // Counted, not timed: three refusals, each logged with its pause.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while daemon.log_text().matches(LINE).count() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "no refusal logged: {}",
            scene.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        daemon.wait_exit(Duration::from_millis(10)).is_none(),
        "the daemon exited: {}",
        daemon.log_text()
    );
    daemon.signal(nix::sys::signal::Signal::SIGTERM);
    let status = daemon.wait_exit(Duration::from_secs(60)).unwrap();
    assert_eq!(status.code(), Some(0), "{}", daemon.log_text());
    let text = daemon.log_text();
    let refusals: Vec<&str> = text.lines().filter(|l| l.contains(LINE)).collect();
    for line in &refusals {
        assert!(
            line.contains("ERROR")
                && line.contains("language.unknown")
                && line.contains("accepted: pascal")
                && line.contains("serve --languages and daemon --languages")
                && line.contains("retry_in="),
            "{line}"
        );
    }
    // Every refused claim the Server logged is one the daemon logged with a
    // pause after it: no silent retries (but the one a SIGTERM may have met in
    // flight, whose answer a draining daemon drops).
    let log = std::fs::read_to_string(&serve.log).unwrap();
    let refused = log
        .lines()
        .filter(|l| l.contains("route=/api/jobs/claim") && l.contains("status=422"))
        .count();
    assert!(
        (refusals.len()..=refusals.len() + 1).contains(&refused),
        "{refused} refused claims, {} logged: {log}",
        refusals.len()
    );
}

fn fetch(url: &str, sha: &str, cache: &Path, key: Option<&str>, env_key: Option<&str>) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(["package", "fetch", url, "--sha256", sha, "--cache"])
        .arg(cache)
        .env_remove("JUDGE_RUNNER_KEY");
    if let Some(key) = key {
        cmd.args(["--key", key]);
    }
    if let Some(key) = env_key {
        cmd.env("JUDGE_RUNNER_KEY", key);
    }
    cmd.output().unwrap()
}

/// (3) CONTRACT §5: `package fetch --key` (or `JUDGE_RUNNER_KEY`) sends the key
/// as bearer token, so a Server's own `/api/packages/{sha256}` URL works.
/// (6) Every request is in serve's log at info, never with a token.
#[tokio::test(flavor = "multi_thread")]
async fn package_fetch_with_a_key_downloads_from_a_server_and_requests_are_logged() {
    let scene = Scene::new("first-hour-fetch");
    let serve = scene.serve(30);
    let (status, created) = upload(&serve.url, greet_package()).await;
    assert_eq!(status, 201, "{created}");
    let sha = created["sha256"].as_str().unwrap().to_string();
    let runner = serve.manager().create_runner("fetcher").await.unwrap();
    let url = format!("{}/api/packages/{sha}", serve.url);

    let out = fetch(&url, &sha, &scene.path("no-key"), None, None);
    assert_eq!(
        out.status.code(),
        Some(1),
        "without a key the Server says 401"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("401"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    for (cache, flag, env) in [
        ("flag", Some(runner.key.as_str()), None),
        ("env", None, Some(runner.key.as_str())),
    ] {
        let cache = scene.path(cache);
        let out = fetch(&url, &sha, &cache, flag, env);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let entry = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert_eq!(entry, cache.join(&sha).display().to_string());
        assert!(Path::new(&entry).join("problem.yaml").is_file());
    }

    // A 404 (a valid key, no such package) too, so the log has several routes.
    let (status, _) = post_json(
        &format!("{}/api/submissions", serve.url),
        TOKEN,
        submission(999, "c"),
    )
    .await;
    assert_eq!(status, 404);

    let log = std::fs::read_to_string(&serve.log).unwrap();
    let requests: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" request ") || l.ends_with(" request"))
        .collect();
    for (method, route, status) in [
        ("POST", "/api/problems", 201),
        ("POST", "/api/runners", 201),
        ("GET", "/api/packages/{sha256}", 401),
        ("GET", "/api/packages/{sha256}", 200),
        ("POST", "/api/submissions", 404),
    ] {
        assert!(
            requests.iter().any(|l| l.contains("INFO")
                && l.contains(&format!("method={method}"))
                && l.contains(&format!("route={route}"))
                && l.contains(&format!("status={status}"))
                && l.contains("ms=")),
            "no {method} {route} {status} in:\n{log}"
        );
    }
    assert!(!log.contains(TOKEN), "the manager token is in the log");
    assert!(!log.contains(&runner.key), "a runner key is in the log");
    assert!(!log.contains(&sha), "routes are logged as templates");
}

/// (4) CONTRACT §4: a bad upload's 422 names what the client sent, never a
/// path of the Server's own disk.
#[tokio::test(flavor = "multi_thread")]
async fn a_bad_upload_is_refused_without_a_server_path() {
    let scene = Scene::new("first-hour-upload");
    let serve = scene.serve(30);
    let storage = scene.path("storage").canonicalize().unwrap();
    let not_a_package = judge_runner::demo::examples::tar_gz(&{
        let dir = scene.path("broken");
        std::fs::create_dir_all(dir.join("data/secret")).unwrap();
        std::fs::write(dir.join("data/secret/1.in"), b"1\n").unwrap();
        dir
    })
    .unwrap();
    let mut corrupt = greet_package();
    corrupt.truncate(corrupt.len() / 2);
    for (what, bytes, says) in [
        (
            "not gzip",
            b"garbage".to_vec(),
            "the uploaded package: neither a directory nor a .tar.gz",
        ),
        ("truncated", corrupt, "cannot read the uploaded package"),
        ("no problem", not_a_package, "1.in"),
    ] {
        let (status, body) = upload(&serve.url, bytes).await;
        assert_eq!(status, 422, "{what}: {body}");
        assert_eq!(body["error"], "package.invalid", "{what}: {body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(says), "{what}: {message}");
        for place in [
            storage.display().to_string(),
            scene.dir.path().display().to_string(),
            std::env::temp_dir().display().to_string(),
            ".upload-".to_string(),
        ] {
            assert!(!message.contains(&place), "{what}: {place} in {message}");
        }
    }
}

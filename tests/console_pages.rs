//! The console (`/console/`) of a real `judge-runner serve` process over HTTP, on
//! SQLite and on PostgreSQL (when `DATABASE_URL_POSTGRES` is set; CI sets it):
//! login and the session cookie's attributes, the security headers, CSRF
//! refusal, a read-only session (no action forms, its POSTs refused), escaping
//! of a submission's source, and the 400 / 404 / expired-session answers.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod e2e_common;

use e2e_common::postgres::{admin, postgres_url, with_database};

use std::time::Duration;

use e2e_common::{Scene, Serve, ServeOpts, TOKEN, slow_problem, upload};
use judge_runner::protocol::{JobState, SubmissionFile};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_SECURITY_POLICY, CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use sqlx::Connection as _;

const SCRIPT: &str = "<script>alert(1)</script>";

/// Every console session of the Server's database ends now (written in the
/// database itself, as time passing would).
async fn expire_sessions(database: &str) {
    const SQL: &str = "UPDATE console_sessions SET expires_ms = 0";
    if database.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(database).await.unwrap();
        sqlx::query(SQL).execute(&mut conn).await.unwrap();
        conn.close().await.unwrap();
    } else {
        let mut conn = sqlx::PgConnection::connect(database).await.unwrap();
        sqlx::query(SQL).execute(&mut conn).await.unwrap();
        conn.close().await.unwrap();
    }
}

/// `application/x-www-form-urlencoded`, as a browser writes it.
fn form_body(form: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                    char::from(b).to_string()
                }
                b' ' => "+".to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    form.iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// A browser-less console user: no redirects followed, the cookie kept by hand.
struct User {
    http: reqwest::Client,
    base: String,
    cookie: Option<String>,
}

impl User {
    fn new(base: &str) -> User {
        User {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            base: base.to_string(),
            cookie: None,
        }
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        let mut req = self.http.get(format!("{}{path}", self.base));
        if let Some(c) = &self.cookie {
            req = req.header(COOKIE, c);
        }
        req.send().await.unwrap()
    }

    async fn page(&self, path: &str) -> String {
        let r = self.get(path).await;
        assert_eq!(r.status(), StatusCode::OK, "GET {path}");
        check_headers(&r);
        r.text().await.unwrap()
    }

    async fn post(&self, path: &str, form: &[(&str, &str)]) -> reqwest::Response {
        let mut req = self
            .http
            .post(format!("{}{path}", self.base))
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(form_body(form));
        if let Some(c) = &self.cookie {
            req = req.header(COOKIE, c);
        }
        req.send().await.unwrap()
    }

    /// `POST /console/problems` as the upload form sends it: `fields` in order,
    /// then the package.
    async fn upload(&self, fields: &[(&str, &[u8])], package: &[u8]) -> reqwest::Response {
        const B: &str = "----console-test-boundary";
        let mut body = Vec::new();
        for (name, value) in fields {
            body.extend_from_slice(
                format!("--{B}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n")
                    .as_bytes(),
            );
            body.extend_from_slice(value);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(
            format!(
                "--{B}\r\nContent-Disposition: form-data; name=\"package\"; filename=\"p.tar.gz\"\r\n\
                 Content-Type: application/gzip\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(package);
        body.extend_from_slice(format!("\r\n--{B}--\r\n").as_bytes());
        let mut req = self
            .http
            .post(format!("{}/console/problems", self.base))
            .header(CONTENT_TYPE, format!("multipart/form-data; boundary={B}"))
            .body(body);
        if let Some(c) = &self.cookie {
            req = req.header(COOKIE, c);
        }
        req.send().await.unwrap()
    }

    /// Logs in; answers the `Set-Cookie` header.
    async fn login(&mut self, token: &str) -> String {
        let r = self
            .post(
                "/console/login",
                &[("token", token), ("next", "/console/jobs")],
            )
            .await;
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        assert_eq!(r.headers()[LOCATION], "/console/jobs");
        let set = r.headers()[SET_COOKIE].to_str().unwrap().to_string();
        self.cookie = Some(set.split(';').next().unwrap().to_string());
        set
    }

    /// The session's CSRF token, as its pages carry it.
    async fn csrf(&self) -> String {
        let page = self.page("/console/").await;
        let at = page.find("name=\"csrf\" value=\"").expect("a CSRF field") + 19;
        page[at..at + 64].to_string()
    }
}

/// The security headers every console answer carries.
fn check_headers(r: &reqwest::Response) {
    let csp = r.headers()[CONTENT_SECURITY_POLICY].to_str().unwrap();
    for part in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ] {
        assert!(csp.contains(part), "CSP {csp:?} lacks {part}");
    }
    assert!(
        !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
        "{csp}"
    );
    assert_eq!(r.headers()["x-frame-options"], "DENY");
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
}

/// Action forms on a page: every POST form but the logout one.
fn action_forms(page: &str) -> Vec<String> {
    page.match_indices("<form method=\"post\" action=\"")
        .map(|(i, m)| {
            let rest = &page[i + m.len()..];
            rest[..rest.find('"').unwrap()].to_string()
        })
        .filter(|a| a != "/console/logout")
        .collect()
}

async fn scenario(name: &str, database: String) {
    let scene = Scene::new(name);
    let opts = ServeOpts {
        database: database.clone(),
        ..ServeOpts::sqlite(scene.dir.path(), 60)
    };
    let serve = Serve::start(&opts, &scene.path("serve.log"));
    let manager = serve.manager();

    // Not logged in: every page sends the browser to the login page.
    let mut user = User::new(&serve.url);
    let r = user.get("/console/jobs").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()[LOCATION], "/console/login?next=/console/jobs");
    check_headers(&r);
    let r = user.post("/console/jobs/1/cancel", &[("csrf", "x")]).await;
    assert_eq!(
        r.status(),
        StatusCode::SEE_OTHER,
        "a POST without a session"
    );
    let login = user.page("/console/login").await;
    assert!(login.contains("name=\"token\"") && login.contains("type=\"password\""));
    assert!(
        !login.contains("<script>") && !login.contains("style="),
        "no inline script or style"
    );

    // A wrong token is refused and gets no cookie; the assets are served.
    let r = user
        .post("/console/login", &[("token", "not-the-token")])
        .await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.headers().get(SET_COOKIE).is_none());
    let css = user.get("/console/assets/console.css").await;
    assert_eq!(css.status(), StatusCode::OK);
    assert!(
        css.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/css")
    );

    // Login: the cookie is HttpOnly, SameSite=Strict, scoped, expiring; Secure
    // only behind TLS.
    let set = user.login(TOKEN).await;
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/console", "Max-Age="] {
        assert!(set.contains(attr), "{set:?} lacks {attr}");
    }
    assert!(!set.contains("Secure"), "plain HTTP: {set:?}");
    assert!(!set.contains(TOKEN), "the cookie is not the token");
    let behind_tls = user
        .http
        .post(format!("{}/console/login", serve.url))
        .header("X-Forwarded-Proto", "https")
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(form_body(&[("token", TOKEN)]))
        .send()
        .await
        .unwrap();
    assert!(
        behind_tls.headers()[SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("; Secure")
    );

    // Work to look at: a submission whose source is a script tag.
    let (problem, _) = upload(&manager, &slow_problem(scene.dir.path(), 2)).await;
    let source = format!("# {SCRIPT}\nprint(input())\n");
    let created = manager
        .submit(
            problem,
            "python3",
            vec![SubmissionFile::from_bytes("evil.py", source.as_bytes())],
        )
        .await
        .unwrap();
    let job = created.job_id;
    let runner = manager.create_runner("idle").await.unwrap().runner_id;

    for path in [
        "/console/",
        "/console/runners",
        "/console/jobs",
        "/console/jobs?state=Queued&language=python3",
        "/console/problems",
        "/console/trials",
    ] {
        let page = user.page(path).await;
        assert!(!page.contains(TOKEN), "{path} shows the manager token");
        assert!(
            !page.contains(" style=\"") && !page.contains("<script>"),
            "{path}: inline style or script"
        );
    }
    let jobs = user.page("/console/jobs").await;
    assert!(jobs.contains(&format!("href=\"/console/jobs/{job}\"")));
    let page = user.page(&format!("/console/jobs/{job}")).await;
    assert!(
        page.contains("&#60;script&#62;alert(1)&#60;/script&#62;")
            || page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "the source is shown escaped"
    );
    assert!(!page.contains(SCRIPT), "the source is never HTML");
    assert!(page.contains("Rejudge submission") && page.contains("Cancel job"));

    // CSRF: no token or another one is refused and changes nothing.
    let csrf = user.csrf().await;
    let cancel = format!("/console/jobs/{job}/cancel");
    for form in [vec![], vec![("csrf", "0".repeat(64))]] {
        let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = user.post(&cancel, &form).await;
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        check_headers(&r);
    }
    assert_eq!(manager.job(job).await.unwrap().state, JobState::Queued);
    let r = user
        .post(&format!("/console/runners/{runner}/revoke"), &[])
        .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);

    // Bad input: 400 and 404 pages, never a 500.
    for (path, status) in [
        ("/console/jobs?state=Bogus", StatusCode::BAD_REQUEST),
        ("/console/jobs?language=cobol", StatusCode::BAD_REQUEST),
        ("/console/jobs?problem_id=x", StatusCode::BAD_REQUEST),
        ("/console/jobs?cursor=not-a-cursor", StatusCode::BAD_REQUEST),
        ("/console/jobs?nonsense=1", StatusCode::BAD_REQUEST),
        ("/console/runners?cursor=%00", StatusCode::BAD_REQUEST),
        ("/console/jobs/987654", StatusCode::NOT_FOUND),
        ("/console/jobs/abc", StatusCode::NOT_FOUND),
        ("/console/no-such-page", StatusCode::NOT_FOUND),
    ] {
        let r = user.get(path).await;
        assert_eq!(r.status(), status, "GET {path}");
        check_headers(&r);
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
    }
    let r = user
        .post(
            "/console/submissions/987654/rejudge",
            &[("csrf", csrf.as_str())],
        )
        .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // Uploading a package from the console: refused without the CSRF token
    // (nothing stored), accepted with it as a new version of the problem.
    let package = judge_runner::demo::examples::tar_gz(&slow_problem(scene.dir.path(), 3)).unwrap();
    let forged = user
        .upload(&[("problem_id", problem.to_string().as_bytes())], &package)
        .await;
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    let stored = user
        .upload(
            &[
                ("csrf", csrf.as_bytes()),
                ("problem_id", problem.to_string().as_bytes()),
                ("time_limit", b"2"),
            ],
            &package,
        )
        .await;
    assert_eq!(stored.status(), StatusCode::CREATED);
    let problems = user.page("/console/problems").await;
    assert!(
        problems.contains("latest") && problems.contains("2 s"),
        "a second version with its limit"
    );
    let bad = user
        .upload(&[("csrf", csrf.as_bytes())], b"not a tar.gz")
        .await;
    assert_eq!(bad.status(), StatusCode::UNPROCESSABLE_ENTITY);

    // With the token: the action works and lands on the job.
    let r = user.post(&cancel, &[("csrf", csrf.as_str())]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(manager.job(job).await.unwrap().state, JobState::Cancelled);
    let r = user
        .post(
            &format!("/console/submissions/{}/rejudge", created.submission_id),
            &[("csrf", csrf.as_str())],
        )
        .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let rejudged = manager.submission(created.submission_id).await.unwrap();
    assert_eq!(rejudged.jobs.len(), 2);

    // A read-only session: sees everything, is offered no action, and its
    // POSTs are refused even with its own CSRF token.
    let read_token = create_token(&serve, &["console:read"]).await;
    let mut reader = User::new(&serve.url);
    reader.login(&read_token).await;
    for path in [
        "/console/",
        "/console/runners",
        "/console/jobs",
        &format!("/console/jobs/{job}"),
        "/console/problems",
        "/console/trials",
    ] {
        let page = reader.page(path).await;
        assert!(
            action_forms(&page).is_empty(),
            "{path}: {:?}",
            action_forms(&page)
        );
        for word in ["Rejudge", "Cancel job", "Revoke", "Upload a package"] {
            assert!(!page.contains(word), "{path} offers {word}");
        }
        assert!(!page.contains(&read_token));
    }
    let reader_csrf = reader.csrf().await;
    assert_ne!(reader_csrf, csrf, "CSRF tokens are per session");
    let new_job = rejudged.jobs[1].id;
    for path in [
        format!("/console/jobs/{new_job}/cancel"),
        format!("/console/submissions/{}/rejudge", created.submission_id),
        format!("/console/runners/{runner}/revoke"),
    ] {
        let r = reader.post(&path, &[("csrf", reader_csrf.as_str())]).await;
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "read-only POST {path}");
    }
    let r = reader
        .upload(&[("csrf", reader_csrf.as_bytes())], &package)
        .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN, "read-only upload");
    let r = reader
        .get(&format!("/console/runners/{runner}/revoke"))
        .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(manager.job(new_job).await.unwrap().state, JobState::Queued);
    // A token without console:read opens no session.
    let trial_token = create_token(&serve, &["trial:run"]).await;
    let r = User::new(&serve.url)
        .post("/console/login", &[("token", trial_token.as_str())])
        .await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // The manager revokes the Runner through the confirmation page.
    let confirm = user
        .page(&format!("/console/runners/{runner}/revoke"))
        .await;
    assert!(confirm.contains(&format!("Revoke Runner {runner}")));
    let r = user
        .post(
            &format!("/console/runners/{runner}/revoke"),
            &[("csrf", csrf.as_str())],
        )
        .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let runners = user.page("/console/runners").await;
    assert!(runners.contains("revoked"));

    // An expired session lands on the login page, never on an error.
    expire_sessions(&database).await;
    let r = user.get("/console/jobs").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        r.headers()[LOCATION],
        "/console/login?expired=1&next=/console/jobs"
    );
    let r = user.post(&cancel, &[("csrf", csrf.as_str())]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let again = user.page("/console/login?expired=1").await;
    assert!(again.contains("session has ended"));

    // Logout ends the session on the Server.
    user.login(TOKEN).await;
    let csrf = user.csrf().await;
    let r = user
        .post("/console/logout", &[("csrf", csrf.as_str())])
        .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(
        r.headers()[SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    let r = user.get("/console/").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    drop(serve);
    tokio::time::sleep(Duration::from_millis(10)).await;
}

async fn create_token(serve: &Serve, scopes: &[&str]) -> String {
    let r = reqwest::Client::new()
        .post(format!("{}/api/tokens", serve.url))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({ "scopes": scopes }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED, "{:?}", r.text().await);
    let body: serde_json::Value = r.json().await.unwrap();
    body["token"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn console_pages_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("console.db").display());
    scenario("console-sqlite", db).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn console_pages_on_postgres() {
    let Some(url) = postgres_url() else {
        eprintln!("skipped: DATABASE_URL_POSTGRES is unset");
        return;
    };
    let name = format!("console_{}_{}", std::process::id(), rand::random::<u32>());
    admin(&url, format!("CREATE DATABASE {name}")).await;
    scenario("console-postgres", with_database(&url, &name)).await;
    admin(&url, format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
}

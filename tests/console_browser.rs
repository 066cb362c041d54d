//! The console in a real Chromium (headless, driven through chromedriver with
//! WebDriver), against a real `judge-runner serve` and `judge-runner daemon`:
//! log in; watch a submission go from Queued to Completed on the job page (its
//! live refresh, no reload); its per-test chart; rejudge it; revoke the Runner
//! while it runs a job and see the job back in Queued; a forged POST without the
//! CSRF token refused; the script in a source shown as text; a read-only session
//! offered no action. It takes screenshots of the main pages (each a PNG
//! checked for its signature): into `docs/console/*.png`, which docs/console.md
//! shows, when `JUDGE_CONSOLE_SCREENSHOTS=1` is set (how they are remade), else
//! into the test's own temporary directory, so a `cargo test` leaves the
//! checkout as it found it.
//!
//! Needs root (the daemon) and `chromedriver` + `chromium` (Debian packages
//! `chromium-driver`, `chromium`): without chromedriver it prints why and passes
//! as skipped. Nothing waits a fixed time:
//! every wait polls with a generous deadline.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod e2e_common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use e2e_common::{Scene, TOKEN, free_port, slow_problem_with, upload};
use fantoccini::{Client, ClientBuilder, Locator};
use judge_runner::protocol::{Id, JobState, SubmissionFile};

const LONG: Duration = Duration::from_secs(180);
const SCRIPT: &str = "<script>alert(1)</script>";

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// chromedriver on a free port; killed on drop.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    async fn start(binary: &Path, log: &Path) -> Driver {
        let port = free_port();
        let child = Command::new(binary)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        loop {
            if let Ok(r) = reqwest::get(format!("{url}/status")).await
                && r.status().is_success()
            {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "chromedriver did not answer"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Driver { child, url }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn browser(driver: &Driver) -> Client {
    let mut args = vec![
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--force-prefers-reduced-motion",
    ];
    args.push("--hide-scrollbars");
    let mut options = serde_json::json!({ "args": args });
    if let Some(chromium) = which("chromium") {
        options["binary"] = serde_json::json!(chromium);
    }
    let caps: serde_json::Map<String, serde_json::Value> =
        serde_json::from_value(serde_json::json!({
            "browserName": "chrome",
            "goog:chromeOptions": options,
            "unhandledPromptBehavior": "ignore",
        }))
        .unwrap();
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a Chromium session through chromedriver")
}

/// Polls `probe` (on the page as it is, never reloading) until it answers true.
async fn wait_until<F, Fut>(what: &str, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !probe().await {
        assert!(
            started.elapsed() < LONG,
            "not reached within {LONG:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn text_of(c: &Client, css: &str) -> String {
    match c.find(Locator::Css(css)).await {
        Ok(e) => e.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

async fn path_of(c: &Client) -> String {
    c.current_url().await.unwrap().path().to_string()
}

/// Where the screenshots go: docs/console when asked for, else a directory of
/// this test run's own (removed at the end).
fn screenshot_dir() -> PathBuf {
    if std::env::var_os("JUDGE_CONSOLE_SCREENSHOTS").is_some() {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/console")
    } else {
        std::env::temp_dir().join(format!("judge-runner-console-{}", std::process::id()))
    }
}

async fn screenshot(c: &Client, name: &str) {
    let dir = screenshot_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let png = c.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "{name}: not a PNG");
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

async fn login(c: &Client, base: &str, token: &str) {
    c.goto(&format!("{base}/console/")).await.unwrap();
    assert_eq!(path_of(c).await, "/console/login", "sent to the login page");
    let field = c.find(Locator::Id("token")).await.unwrap();
    field.send_keys(token).await.unwrap();
    c.find(Locator::Css("form.login button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_until("logged in", || async { path_of(c).await == "/console/" }).await;
    let url = c.current_url().await.unwrap();
    assert!(!url.as_str().contains(token), "the token is never in a URL");
}

/// The `action`s of the page's POST forms, the logout form left out.
async fn action_forms(c: &Client) -> Vec<String> {
    let forms = c.find_all(Locator::Css("form[method=post]")).await.unwrap();
    let mut actions = Vec::new();
    for f in forms {
        let action = f.attr("action").await.unwrap().unwrap_or_default();
        if action != "/console/logout" {
            actions.push(action);
        }
    }
    actions
}

#[tokio::test(flavor = "multi_thread")]
async fn console_in_a_real_browser() {
    let Some(chromedriver) = which("chromedriver") else {
        eprintln!(
            "SKIPPED console_in_a_real_browser: chromedriver is not on PATH (install the Debian packages chromium and chromium-driver)"
        );
        return;
    };
    let scene = Scene::new("console-browser");
    let serve = scene.serve(10);
    let base = serve.url.clone();
    let manager = serve.manager();
    let driver = Driver::start(&chromedriver, &scene.path("chromedriver.log")).await;
    let c = browser(&driver).await;

    // The login page, then a logged-in overview.
    c.goto(&format!("{base}/console/login")).await.unwrap();
    screenshot(&c, "login").await;
    login(&c, &base, TOKEN).await;

    // A Runner and a submission whose source holds a script tag.
    let key = manager.create_runner("browser-runner").await.unwrap().key;
    let daemon = scene.daemon(&base, &key, 700, "daemon.log");
    daemon.wait_started().await;
    let (problem, _) = upload(&manager, &slow_problem_with(scene.dir.path(), 4, 30)).await;
    let source = format!(
        "# {SCRIPT}\nimport sys, time\ntime.sleep(0.3)\nsys.stdout.write(sys.stdin.read())\n"
    );
    let created = manager
        .submit(
            problem,
            "python3",
            vec![SubmissionFile::from_bytes("echo.py", source.as_bytes())],
        )
        .await
        .unwrap();
    let job = created.job_id;

    // The job page follows the job to Completed by itself (its live refresh).
    c.goto(&format!("{base}/console/jobs/{job}")).await.unwrap();
    wait_until("the job page shows Completed without a reload", || async {
        text_of(&c, "main h1").await.contains("Completed")
    })
    .await;
    assert!(
        text_of(&c, "main h1").await.contains("Accepted"),
        "{}",
        scene.logs()
    );
    // The live refresh swapped <main>, not the page: the URL is the same.
    assert_eq!(path_of(&c).await, format!("/console/jobs/{job}"));

    // The per-test chart: one bar per test, with its time as a tooltip, and the table.
    let bars = c
        .find_all(Locator::Css("figure.chart svg rect.bar"))
        .await
        .unwrap();
    assert_eq!(bars.len(), 2 * 4, "a CPU bar and a memory bar per test");
    let rows = c.find_all(Locator::Css("#tests tbody tr")).await.unwrap();
    assert_eq!(rows.len(), 4);
    // The script in the source is text, not markup: no alert, the text shown.
    let shown = text_of(&c, "pre.source").await;
    assert!(shown.contains(SCRIPT), "source shown as text: {shown:?}");
    assert!(c.get_alert_text().await.is_err(), "no alert ran");
    screenshot(&c, "job").await;
    c.execute(
        "document.getElementById('h-tests').scrollIntoView()",
        vec![],
    )
    .await
    .unwrap();
    screenshot(&c, "job-tests").await;

    // A forged POST without the CSRF token, from the page itself, is refused.
    let status = c
        .execute(
            "return fetch('/console/jobs/' + arguments[0] + '/cancel', \
             {method: 'POST', credentials: 'same-origin', \
              headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: ''}) \
             .then(r => r.status)",
            vec![serde_json::json!(job)],
        )
        .await
        .unwrap();
    assert_eq!(status, serde_json::json!(403));

    // Rejudge from the page: a new attempt, which completes too.
    c.find(Locator::Css("form[action$='/rejudge'] button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_until("on the new attempt's page", || async {
        path_of(&c).await != format!("/console/jobs/{job}")
    })
    .await;
    let second: Id = path_of(&c)
        .await
        .rsplit('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(manager.job(second).await.unwrap().attempt, 2);
    wait_until("the rejudge completes", || async {
        text_of(&c, "main h1").await.contains("Completed")
    })
    .await;

    // A long job on the Runner; revoke the Runner from the console while it runs.
    let slow = "import sys, time\ntime.sleep(25)\nsys.stdout.write(sys.stdin.read())\n";
    let long = manager
        .submit(
            problem,
            "python3",
            vec![SubmissionFile::from_bytes("slow.py", slow.as_bytes())],
        )
        .await
        .unwrap()
        .job_id;
    let started = Instant::now();
    let runner = loop {
        let view = manager.job(long).await.unwrap();
        if view.state == JobState::Running
            && let Some(r) = view.runner_id
        {
            break r;
        }
        assert!(started.elapsed() < LONG, "the long job never ran: {view:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    c.goto(&format!("{base}/console/jobs")).await.unwrap();
    screenshot(&c, "jobs").await;
    c.goto(&format!("{base}/console/")).await.unwrap();
    screenshot(&c, "overview").await;
    c.goto(&format!("{base}/console/runners")).await.unwrap();
    screenshot(&c, "runners").await;
    c.find(Locator::Css(&format!(
        "a[href='/console/runners/{runner}/revoke']"
    )))
    .await
    .unwrap()
    .click()
    .await
    .unwrap();
    let confirm = c.find(Locator::Css("form.confirm button")).await.unwrap();
    assert!(confirm.text().await.unwrap().contains("Revoke Runner"));
    confirm.click().await.unwrap();
    wait_until("back on the Runners page", || async {
        path_of(&c).await == "/console/runners"
    })
    .await;
    assert!(text_of(&c, "#runners").await.contains("revoked"));
    c.goto(&format!("{base}/console/jobs/{long}"))
        .await
        .unwrap();
    wait_until("the revoked Runner's job is Queued again", || async {
        text_of(&c, "main h1").await.contains("Queued")
    })
    .await;
    assert_eq!(manager.job(long).await.unwrap().state, JobState::Queued);

    c.goto(&format!("{base}/console/problems")).await.unwrap();
    screenshot(&c, "problems").await;

    // Log out; a read-only session sees the same pages with no action.
    c.find(Locator::Css("form[action='/console/logout'] button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_until("logged out", || async {
        path_of(&c).await == "/console/login"
    })
    .await;
    let read_token = {
        let r = reqwest::Client::new()
            .post(format!("{base}/api/tokens"))
            .bearer_auth(TOKEN)
            .json(&serde_json::json!({"scopes": ["console:read"]}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), reqwest::StatusCode::CREATED);
        let body: serde_json::Value = r.json().await.unwrap();
        body["token"].as_str().unwrap().to_string()
    };
    login(&c, &base, &read_token).await;
    for path in [
        "/console/".to_string(),
        "/console/runners".to_string(),
        "/console/jobs".to_string(),
        format!("/console/jobs/{long}"),
        format!("/console/jobs/{second}"),
        "/console/problems".to_string(),
    ] {
        c.goto(&format!("{base}{path}")).await.unwrap();
        assert_eq!(action_forms(&c).await, Vec::<String>::new(), "{path}");
        let buttons = c
            .find_all(Locator::Css("main form[method=post] button, main a.button"))
            .await
            .unwrap();
        assert!(
            buttons.is_empty(),
            "{path} offers an action to a read-only session"
        );
    }
    assert!(text_of(&c, ".role").await.contains("read-only"));

    c.close().await.unwrap();
    drop(daemon);
    drop(serve);
    if std::env::var_os("JUDGE_CONSOLE_SCREENSHOTS").is_none() {
        let _ = std::fs::remove_dir_all(screenshot_dir());
    }
}

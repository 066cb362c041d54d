//! `judge-runner demo`: an embedded Server on SQLite in a temp dir, a Runner in
//! the same process, the bundled example problems and every example submission,
//! a live progress display and a final table. Exit 0 only when every verdict
//! matched the folder its submission sits in. Sits on top of every module.
//!
//! The demo drives the system only through the protocol, as an operator would:
//! the Server and the Runner talk HTTP on loopback, the demo is a manager client.

pub mod examples;
pub mod manager;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use rand::Rng;

use crate::judge::{LanguageTable, Verdict};
use crate::protocol::{Id, JobView};
use crate::runner::{Daemon, Shutdown};
use crate::server;
use crate::verify;
use examples::{ExampleCase, ExampleProblem};
use manager::Manager;

/// The demo gives up when judging everything takes longer than this.
const DEADLINE: Duration = Duration::from_secs(15 * 60);
const POLL: Duration = Duration::from_millis(300);

/// What `judge-runner demo` was asked for (the command fills it from its flags).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Slots of the demo's Runner; `None`: CPUs - 1, at least 1.
    pub slots: Option<u32>,
    /// Keep the temporary directory (database, storage, cache) and say where it is.
    pub keep: bool,
    /// Example problems to judge; `None`: the bundled `examples/problems`.
    pub problems: Option<PathBuf>,
    /// Judge through a forwarding Runner and a second Server.
    pub forward: bool,
}

/// Runs the demo to the end. `Ok(true)` when every verdict matched the folder
/// its submission sits in, `Ok(false)` when one did not; `Err` when the demo
/// itself could not run (the command turns each into an exit status).
pub fn run(options: Options) -> anyhow::Result<bool> {
    if !nix::unistd::Uid::effective().is_root() {
        bail!("must run as root (the Runner creates namespaces and cgroups)");
    }
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let outcome = runtime.block_on(demo(options));
    runtime.shutdown_timeout(Duration::from_secs(5));
    outcome
}

/// One submitted example and what became of it: `row` is `verify`'s row,
/// filled from the job's result.
struct Tracked {
    case: ExampleCase,
    job: Option<Id>,
    final_view: Option<JobView>,
    row: verify::Row,
}

async fn demo(options: Options) -> anyhow::Result<bool> {
    let root = match &options.problems {
        Some(dir) => dir.clone(),
        None => examples::find_examples_dir().context(
            "cannot find the example problems: run from the repository, or set JUDGE_EXAMPLES_DIR, or pass --problems DIR",
        )?,
    };
    let languages = LanguageTable::builtin()?;
    let problems = examples::load_examples(&root, &languages)?;
    let total: usize = problems.iter().map(|p| p.cases.len()).sum();
    if total == 0 {
        bail!("no example submissions under {}", root.display());
    }
    let work = tempfile::Builder::new()
        .prefix("judge-runner-demo-")
        .tempdir()?;
    let work_dir = work.path().to_path_buf();
    eprintln!(
        "judge-runner demo: {} problems, {total} example submissions from {}",
        problems.len(),
        root.display()
    );

    let token = hex::encode(rand::rng().random::<[u8; 16]>());
    let mut config = server::Config::new(
        format!("sqlite://{}", work_dir.join("judge.db").display()),
        work_dir.join("storage"),
        token.clone(),
    );
    config.listen = "127.0.0.1:0".to_string();
    // Every language of the table, not the contract's default five: the
    // examples are in all of them.
    config.languages = languages.ids().map(String::from).collect();
    let server = server::start(config, Arc::new(server::SystemClock)).await?;
    let manager = Manager::new(&server.base_url(), &token);
    // Where to look while it runs (the console, the API with this token).
    eprintln!(
        "judge-runner demo: Server listening on {} (manager token {token}; SQLite in {})",
        server.base_url(),
        work_dir.display()
    );

    // With --forward the daemon serves a second Server (B) and a forwarder
    // brings it the work submitted to the first (A).
    let judging = if options.forward {
        let mut config = server::Config::new(
            format!("sqlite://{}", work_dir.join("judge-b.db").display()),
            work_dir.join("storage-b"),
            token.clone(),
        );
        config.listen = "127.0.0.1:0".to_string();
        config.languages = languages.ids().map(String::from).collect();
        let b = server::start(config, Arc::new(server::SystemClock)).await?;
        eprintln!(
            "judge-runner demo: judged at a second Server on {}, through a forwarding Runner",
            b.base_url()
        );
        Some(b)
    } else {
        None
    };
    let daemon_server = judging
        .as_ref()
        .map_or_else(|| server.base_url(), server::ServerHandle::base_url);
    let runner = Manager::new(&daemon_server, &token)
        .create_runner("demo")
        .await?;
    let cgroup_parent = format!("judge-runner-demo-{}", std::process::id());
    // Removed however the demo ends, a failed start included.
    let _parent = ParentCgroup(cgroup_parent.clone());
    let mut daemon_config = crate::runner::Config::new(daemon_server.clone(), runner.key);
    daemon_config.slots = options.slots;
    daemon_config.cache_dir = work_dir.join("packages-cache");
    daemon_config.work_base = Some(work_dir.clone());
    daemon_config.cgroup_parent.clone_from(&cgroup_parent);
    // A RunnerError's message already ends with its cause; as a source too it
    // would be printed twice by `{:#}`.
    let daemon = Daemon::build(daemon_config)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let offered = daemon.languages().to_vec();
    eprintln!(
        "judge-runner demo: Runner with {} slot(s); {}",
        daemon.slot_count(),
        banner_languages(&problems, &offered)
    );
    let shutdown = Shutdown::new();
    let daemon_task = tokio::spawn(daemon.run(shutdown.clone()));
    let forward_task = match &judging {
        Some(b) => {
            let key = manager.create_runner("demo-forward").await?.key;
            let mut config = crate::forward::Config::new(
                server.base_url(),
                key,
                b.base_url(),
                token.clone(),
                offered.clone(),
            );
            config.staging = Some(work_dir.clone());
            let forwarder = crate::forward::Forwarder::build(config)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            Some(tokio::spawn(forwarder.run(shutdown.clone())))
        }
        None => None,
    };

    let started = Instant::now();
    let judged = submit_and_watch(&manager, &problems, &offered).await;
    let wall = started.elapsed();
    shutdown.now();
    if let Some(task) = forward_task {
        let _ = task.await;
    }
    let _ = daemon_task.await;
    server.shutdown().await?;
    if let Some(b) = judging {
        b.shutdown().await?;
    }
    let tracked = judged?;
    let all_matched = print_table(&tracked, wall);
    if options.keep {
        let kept = work.keep();
        eprintln!("judge-runner demo: kept {}", kept.display());
        eprintln!("{}", serve_again(&kept, &token));
    }
    Ok(all_matched)
}

/// How to look at a kept demo later: a Server on its database and storage, with
/// the demo's manager token (the Server is gone once the demo ends).
fn serve_again(kept: &Path, token: &str) -> String {
    format!(
        "judge-runner demo: to open it again: JUDGE_MANAGER_TOKEN={token} judge-runner serve --database sqlite://{} --storage {}",
        kept.join("judge.db").display(),
        kept.join("storage").display()
    )
}

/// The demo's own cgroup parent, removed when dropped (it is empty by then:
/// every slot has closed).
struct ParentCgroup(String);

impl Drop for ParentCgroup {
    fn drop(&mut self) {
        if let Err(e) = crate::sandbox::remove_parent(&self.0) {
            tracing::warn!(parent = %self.0, error = %e, "cannot remove the demo's cgroup parent");
        }
    }
}

async fn submit_and_watch(
    manager: &Manager,
    problems: &[ExampleProblem],
    offered: &[String],
) -> anyhow::Result<Vec<Tracked>> {
    let mut tracked = Vec::new();
    for problem in problems {
        let bytes = examples::tar_gz(&problem.dir)?;
        let created = manager.upload_problem(bytes, None).await?;
        for case in &problem.cases {
            let mut row = verify::Row::new(&case.entry);
            row.label.clone_from(&case.label);
            if row.skipped.is_none() && !offered.contains(&case.language) {
                row.skipped = Some(format!("no {} toolchain here", case.language));
            }
            let job = if row.skipped.is_none() {
                let attempt = manager
                    .submit(created.problem_id, &case.language, case.files.clone())
                    .await?;
                Some(attempt.job_id)
            } else {
                None
            };
            tracked.push(Tracked {
                case: case.clone(),
                job,
                final_view: None,
                row,
            });
        }
    }
    watch(manager, &mut tracked).await?;
    Ok(tracked)
}

/// Polls the Server until every job is final, showing progress.
async fn watch(manager: &Manager, tracked: &mut [Tracked]) -> anyhow::Result<()> {
    let bar = ProgressBar::new(tracked.len() as u64).with_style(ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:32} {pos}/{len} {wide_msg}",
    )?);
    bar.enable_steady_tick(Duration::from_millis(120));
    let say = |line: String| {
        if bar.is_hidden() {
            eprintln!("{line}");
        } else {
            bar.println(line);
        }
    };
    let width = verify::table::label_width(tracked.iter().map(|t| t.row.label.as_str()));
    for t in tracked.iter().filter(|t| t.job.is_none()) {
        say(verify::table::line(&t.row, width));
        bar.inc(1);
    }
    let started = Instant::now();
    loop {
        let mut running = Vec::new();
        for t in tracked.iter_mut().filter(|t| t.final_view.is_none()) {
            let Some(job) = t.job else { continue };
            let view = manager.job(job).await?;
            if view.state.is_final() {
                let time = max_cpu_seconds(manager, job, &view).await;
                fill_row(&mut t.row, &view, time);
                say(verify::table::line(&t.row, width));
                t.final_view = Some(view);
                bar.inc(1);
            } else if view.state == crate::protocol::JobState::Running {
                running.push(match &view.progress {
                    Some(p) => format!("{} {}/{}", t.case.label, p.done, p.total),
                    None => format!("{} (compiling)", t.case.label),
                });
            }
        }
        bar.set_message(running.join("  "));
        if tracked
            .iter()
            .all(|t| t.job.is_none() || t.final_view.is_some())
        {
            break;
        }
        if started.elapsed() > DEADLINE {
            bar.abandon();
            bail!(
                "gave up after {} s: jobs still unfinished",
                DEADLINE.as_secs()
            );
        }
        tokio::time::sleep(POLL).await;
    }
    bar.finish_and_clear();
    Ok(())
}

fn verdict_of(view: &JobView) -> String {
    match (&view.result, &view.failure_reason) {
        (Some(r), _) => r.verdict.clone(),
        (None, Some(reason)) => format!("{} ({reason})", view.state),
        (None, None) => view.state.to_string(),
    }
}

/// `verify`'s row from a final job: its verdict compared as `verify` compares,
/// or an error when the job ended without a verdict `verify` knows.
fn fill_row(row: &mut verify::Row, view: &JobView, time: Option<f64>) {
    row.max_cpu_seconds = time;
    let Some(result) = &view.result else {
        row.ok = false;
        row.error = Some(verdict_of(view));
        return;
    };
    row.score = Some(result.score);
    row.max_score = Some(result.max_score);
    match Verdict::ALL
        .into_iter()
        .find(|v| v.as_str() == result.verdict)
    {
        Some(verdict) => {
            row.verdict = Some(verdict);
            row.ok = row
                .expected
                .matches(verdict, result.score, result.max_score)
                .unwrap_or(true);
        }
        None => {
            row.ok = false;
            row.error = Some(format!("verdict {:?}", result.verdict));
        }
    }
}

/// The languages of the banner: those the examples are written in (a language
/// the Runner offers but no example uses is not worth naming), and which of
/// them this host cannot judge.
fn banner_languages(problems: &[ExampleProblem], offered: &[String]) -> String {
    let used: std::collections::BTreeSet<&str> = problems
        .iter()
        .flat_map(|p| &p.cases)
        .map(|c| c.language.as_str())
        .collect();
    let used: Vec<&str> = used.into_iter().collect();
    let missing: Vec<&str> = used
        .iter()
        .copied()
        .filter(|l| !offered.iter().any(|o| o == l))
        .collect();
    let mut text = format!("the examples are in {}", used.join(", "));
    if !missing.is_empty() {
        text.push_str(&format!(" (no toolchain here for {})", missing.join(", ")));
    }
    text
}

/// The submission's time as judges quote it: the slowest test's CPU time.
async fn max_cpu_seconds(manager: &Manager, job: Id, view: &JobView) -> Option<f64> {
    if !view.files.iter().any(|f| f == "details") {
        return None;
    }
    let bytes = manager.file(job, "details").await.ok()?;
    let details: Vec<serde_json::Value> = serde_json::from_slice(&bytes).ok()?;
    details
        .iter()
        .filter_map(|d| d.get("cpu_seconds").and_then(serde_json::Value::as_f64))
        .reduce(f64::max)
}

/// The final table (`verify`'s); answers whether every verdict matched.
fn print_table(tracked: &[Tracked], wall: Duration) -> bool {
    let rows: Vec<verify::Row> = tracked.iter().map(|t| t.row.clone()).collect();
    println!();
    print!("{}", verify::table::table(&rows, wall));
    rows.iter().all(|r| r.ok)
}

/// Used by tests: the examples under `root`, with the built-in languages.
pub fn load(root: &Path) -> anyhow::Result<Vec<ExampleProblem>> {
    Ok(examples::load_examples(root, &LanguageTable::builtin()?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_banner_names_only_languages_the_examples_use() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/problems");
        let problems = load(&root).unwrap();
        let offered: Vec<String> = LanguageTable::builtin()
            .unwrap()
            .ids()
            .map(String::from)
            .collect();
        let banner = banner_languages(&problems, &offered);
        // Every language of the table has examples (contract §7).
        assert_eq!(
            banner,
            "the examples are in c, cpp, csharp, go, java, javascript, kotlin, pypy3, python3, rust"
        );
        let banner = banner_languages(&problems, &offered[..2]);
        assert!(
            banner.ends_with(
                "(no toolchain here for csharp, go, java, javascript, kotlin, pypy3, python3, rust)"
            ),
            "{banner}"
        );
    }
}

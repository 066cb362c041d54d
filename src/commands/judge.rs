//! `judge-runner judge`: evaluate one submission locally (contract §3).

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use serde::Serialize;

use crate::cli::JudgeArgs;
use crate::judge::{BoxLock, Judge, JudgeConfig, Options, Outcome, SourceFile, Submission};
use crate::package::{self, LoadedPackage, UnpackLimits};

use super::{EXIT_FAILURE, EXIT_USAGE};

/// The report, exactly the contract's fields.
#[derive(Debug, Serialize)]
struct Report<'a> {
    verdict: &'a str,
    score: f64,
    max_score: f64,
    extra: Option<()>,
    props: Option<()>,
    runner_version: &'a str,
}

fn usage(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("judge-runner judge: {message}");
    ExitCode::from(EXIT_USAGE)
}

fn failure(reason: &str, message: impl std::fmt::Display) -> ExitCode {
    eprintln!("judge-runner judge: {reason}: {message}");
    ExitCode::from(EXIT_FAILURE)
}

pub fn run(args: JudgeArgs) -> ExitCode {
    let languages = match super::language_table(args.language_config.as_deref()) {
        Ok(t) => t,
        Err(e) => return usage(e),
    };
    let language = match &args.language {
        Some(id) if languages.get(id).is_some() => id.clone(),
        Some(id) => {
            let known: Vec<&str> = languages.ids().collect();
            return usage(format!(
                "unknown language {id:?} (configured: {})",
                known.join(", ")
            ));
        }
        None => {
            let first = args.sources[0]
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            match languages.detect(&first) {
                Some(l) => l.id.clone(),
                None => {
                    return usage(format!(
                        "cannot tell the language of {first:?}: pass --language"
                    ));
                }
            }
        }
    };
    // `--map-language FROM=TO`: both configured, the submission judged as TO.
    for map in &args.map_language {
        for id in [&map.from, &map.to] {
            if languages.get(id).is_none() {
                return usage(format!(
                    "--map-language {}={}: unknown language {id:?}",
                    map.from, map.to
                ));
            }
        }
    }
    let language = crate::cli::map_language(&args.map_language, &language).to_string();
    let submission = match read_sources(&args.sources, language) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    let problem = match load_problem(&args) {
        Ok(p) => p,
        Err(e) => return failure(crate::judge::reason::PACKAGE_INVALID, e),
    };
    let mut config = JudgeConfig::new(languages, args.box_id);
    config.cpu = args.cpu;
    config.cgroup_parent = args.cgroup_parent.clone();
    // Held until the judging ends: no daemon, `judge` or `verify` shares the boxes.
    let _boxes = match BoxLock::acquire(config.box_ids(), "judge") {
        Ok(lock) => lock,
        Err(e) => return failure(crate::judge::reason::SANDBOX_FAILED, e),
    };
    let judge = Judge::new(config);
    // A language whose toolchain this host lacks is refused as bad arguments,
    // naming the language and the command that is missing.
    if let Err(e) = judge.toolchain(&submission.language) {
        return usage(format!("{}: {e}", e.reason()));
    }
    let options = Options {
        time_limit: args.time_limit.map(|t| t.0),
        ..Options::default()
    };
    let started = Instant::now();
    let mut progress =
        |p: crate::judge::Progress| eprintln!("{}", p.last.progress_line(p.done, p.total));
    let outcome = match judge.judge(&problem.problem, &submission, &options, &mut progress) {
        Ok(o) => o,
        Err(e) => return failure(e.reason(), e),
    };
    eprintln!(
        "{}: score {} of {}, {} tests in {:.2} s",
        outcome.verdict,
        outcome.score,
        outcome.max_score,
        outcome.details.len(),
        started.elapsed().as_secs_f64()
    );
    match write_outputs(&args, &outcome) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => failure("output", e),
    }
}

fn read_sources(paths: &[std::path::PathBuf], language: String) -> Result<Submission, String> {
    let mut files = Vec::with_capacity(paths.len());
    for path in paths {
        let content =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| format!("{} is not a file", path.display()))?;
        files.push(SourceFile { name, content });
    }
    Ok(Submission { language, files })
}

fn load_problem(args: &JudgeArgs) -> Result<LoadedPackage, String> {
    let limits = UnpackLimits {
        max_entries: args.unpack.max_entries,
        max_unpacked: args.unpack.max_unpacked.bytes(),
    };
    let loaded = package::load(&args.problem, &limits).map_err(|e| e.to_string())?;
    for warning in &loaded.problem.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(loaded)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// `-` is stdout for every output, as for `--report` (never a file named `-`).
fn write_target(target: &Path, bytes: &[u8]) -> Result<(), String> {
    if target == Path::new("-") {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        return out
            .write_all(bytes)
            .and_then(|()| out.flush())
            .map_err(|e| format!("cannot write to stdout: {e}"));
    }
    write_file(target, bytes)
}

fn write_outputs(args: &JudgeArgs, outcome: &Outcome) -> Result<(), String> {
    if let Some(path) = &args.log {
        write_target(path, outcome.compile_log.as_bytes())?;
    }
    if let Some(path) = &args.details {
        let mut json = serde_json::to_vec_pretty(&outcome.details).map_err(|e| e.to_string())?;
        json.push(b'\n');
        write_target(path, &json)?;
    }
    if let Some(target) = &args.report {
        let report = Report {
            verdict: outcome.verdict.as_str(),
            score: outcome.score,
            max_score: outcome.max_score,
            extra: None,
            props: None,
            runner_version: crate::version::RUNNER_VERSION,
        };
        let mut json = serde_json::to_string(&report).map_err(|e| e.to_string())?;
        json.push('\n');
        write_target(Path::new(target), json.as_bytes())?;
    }
    Ok(())
}

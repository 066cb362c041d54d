//! `judge-runner verify PACKAGE`: judge a package's own example submissions
//! and compare each verdict with its folder (contract §3a).

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use crate::cli::VerifyArgs;
use crate::judge::{BoxLock, LanguageTable, MAX_BOX_ID, slot_box_ids};
use crate::package::{self, LoadedPackage, UnpackLimits};
use crate::verify::{self, Config, Entry, Summary, table};

use super::{EXIT_FAILURE, EXIT_USAGE};

fn usage(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("judge-runner verify: {message}");
    ExitCode::from(EXIT_USAGE)
}

fn failure(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("judge-runner verify: {message}");
    ExitCode::from(EXIT_FAILURE)
}

/// Where the human output goes: stdout, or stderr when `--report -` takes stdout.
struct Out {
    to_stderr: bool,
}

impl Out {
    fn say(&self, text: &str) {
        if self.to_stderr {
            eprintln!("{text}");
        } else {
            println!("{text}");
            let _ = std::io::stdout().flush();
        }
    }
}

pub fn run(args: &VerifyArgs) -> ExitCode {
    let languages = match super::language_table(args.language_config.as_deref()) {
        Ok(t) => t,
        Err(e) => return usage(e),
    };
    let slots = args
        .slots
        .map_or_else(verify::default_slots, |n| n as usize);
    let last_box = u64::from(args.first_box) + slots as u64 - 1;
    if last_box > u64::from(MAX_BOX_ID) {
        return usage(format!(
            "--first-box {} with {slots} slots needs box ids up to {last_box}; the largest is {MAX_BOX_ID}",
            args.first_box
        ));
    }
    if !nix::unistd::Uid::effective().is_root() {
        return failure("must run as root (the sandbox creates namespaces and cgroups)");
    }
    let (loaded, entries) = match load(args, &languages) {
        Ok(loaded) => loaded,
        Err(status) => return status,
    };
    let problem = &loaded.problem;
    let out = Out {
        to_stderr: args.report.as_deref() == Some("-"),
    };
    if entries.is_empty() {
        out.say(&format!(
            "{}: no example submissions under submissions/: nothing to verify",
            args.package.display()
        ));
        return match write_report(args.report.as_deref(), &[]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => failure(e),
        };
    }
    // Held until verifying ends: no daemon, `judge` or other `verify` shares
    // the slots' boxes or their validators'.
    let slot_count = u32::try_from(slots).unwrap_or(u32::MAX);
    let _boxes = match BoxLock::acquire(slot_box_ids(args.first_box, slot_count), "verify") {
        Ok(lock) => lock,
        Err(e) => return failure(e),
    };
    let config = Config {
        slots,
        first_box: args.first_box,
        cgroup_parent: args.cgroup_parent.clone(),
        time_limit: args.time_limit.map(|t| t.0),
        ..Config::new(languages)
    };
    out.say(&format!(
        "verify {}: {} example submissions, {slots} slot(s) on boxes {}..{last_box} (validators {}..{})",
        problem.name,
        entries.len(),
        args.first_box,
        u64::from(args.first_box) + 500,
        last_box + 500,
    ));
    let width = table::label_width(entries.iter().map(|e| e.label.as_str()));
    let summary = verify::verify(
        problem,
        &entries,
        &config,
        &mut |limit| out.say(&limit.to_string()),
        &mut |row| out.say(&table::line(row, width)),
    );
    finish(&out, args, &summary)
}

/// The package (its warnings said) and the example submissions to verify,
/// `--only` applied; or the exit status saying why not.
fn load(
    args: &VerifyArgs,
    languages: &LanguageTable,
) -> Result<(LoadedPackage, Vec<Entry>), ExitCode> {
    let limits = UnpackLimits {
        max_entries: args.unpack.max_entries,
        max_unpacked: args.unpack.max_unpacked.bytes(),
    };
    // The same loading as `judge` and the same message as `package check`.
    let loaded = package::load(&args.package, &limits)
        .map_err(|err| failure(format!("{err} [{}]", err.code())))?;
    for warning in &loaded.problem.warnings {
        eprintln!("warning: {warning}");
    }
    let mut warnings = Vec::new();
    let mut entries =
        verify::plan::entries(&loaded.problem, languages, &mut warnings).map_err(failure)?;
    for warning in &warnings {
        eprintln!("warning: {warning}");
    }
    if let Some(glob) = &args.only {
        entries.retain(|e| verify::plan::glob_matches(glob, &e.label));
        if entries.is_empty() {
            return Err(usage(format!(
                "--only {glob:?} matches no example submission"
            )));
        }
    }
    map_languages(args, languages, &mut entries)?;
    refuse_missing_toolchains(languages, &entries)?;
    Ok((loaded, entries))
}

/// `--map-language FROM=TO`: both must be configured; a submission detected as
/// FROM is judged as TO.
fn map_languages(
    args: &VerifyArgs,
    languages: &LanguageTable,
    entries: &mut [Entry],
) -> Result<(), ExitCode> {
    for map in &args.map_language {
        for id in [&map.from, &map.to] {
            if languages.get(id).is_none() {
                return Err(usage(format!(
                    "--map-language {}={}: unknown language {id:?}",
                    map.from, map.to
                )));
            }
        }
    }
    for entry in entries.iter_mut().filter(|e| e.skip.is_none()) {
        let to = crate::cli::map_language(&args.map_language, &entry.language).to_string();
        entry.submission.language.clone_from(&to);
        entry.language = to;
    }
    Ok(())
}

/// Submissions in a configured language whose toolchain this host lacks are
/// listed as skipped (the others are still verified), each language said once
/// here with the command that is missing; when that leaves nothing to judge,
/// verify refuses as for bad arguments (exit 2).
fn refuse_missing_toolchains(languages: &LanguageTable, entries: &[Entry]) -> Result<(), ExitCode> {
    let mut missing: Vec<(String, String)> = Vec::new();
    let mut judgeable = 0usize;
    let mut probed: std::collections::BTreeMap<&str, bool> = std::collections::BTreeMap::new();
    for entry in entries.iter().filter(|e| e.skip.is_none()) {
        let ok = *probed.entry(entry.language.as_str()).or_insert_with(|| {
            let Some(language) = languages.get(&entry.language) else {
                return false;
            };
            match crate::judge::language::probe(language) {
                Ok(_) => true,
                Err(why) => {
                    missing.push((entry.language.clone(), why));
                    false
                }
            }
        });
        judgeable += usize::from(ok);
    }
    for (id, why) in &missing {
        eprintln!("warning: submissions in {id} are skipped: {why}");
    }
    if judgeable == 0 && !missing.is_empty() {
        let said: Vec<String> = missing
            .iter()
            .map(|(id, why)| format!("{id}: {why}"))
            .collect();
        return Err(usage(format!(
            "no submission can be judged on this host: {}",
            said.join("; ")
        )));
    }
    Ok(())
}

/// The table, each row's error, the JSON report; 0 when every verdict matched.
fn finish(out: &Out, args: &VerifyArgs, summary: &Summary) -> ExitCode {
    out.say("");
    out.say(summary.time_limit.to_string().as_str());
    out.say(table::table(&summary.rows, summary.wall).trim_end());
    for row in &summary.rows {
        if let Some(error) = &row.error {
            eprintln!("judge-runner verify: {}: {error}", row.label);
        }
    }
    let reports: Vec<serde_json::Value> = summary.rows.iter().map(verify::Row::report).collect();
    if let Err(e) = write_report(args.report.as_deref(), &reports) {
        return failure(e);
    }
    if summary.all_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILURE)
    }
}

fn write_report(target: Option<&str>, rows: &[serde_json::Value]) -> Result<(), String> {
    let Some(target) = target else {
        return Ok(());
    };
    let mut json = serde_json::to_vec_pretty(rows).map_err(|e| e.to_string())?;
    json.push(b'\n');
    if target == "-" {
        let mut stdout = std::io::stdout().lock();
        return stdout
            .write_all(&json)
            .and_then(|()| stdout.flush())
            .map_err(|e| format!("cannot write to stdout: {e}"));
    }
    std::fs::write(Path::new(target), &json).map_err(|e| format!("cannot write {target}: {e}"))
}

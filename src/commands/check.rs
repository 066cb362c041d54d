//! `judge-runner check` (CONTRACT §3b): can this host judge, and how fast is its
//! sandbox here? The sandbox's own checks (`sandbox::host`), each configured
//! language's toolchain, then `/bin/true` in a slot against a plain fork+exec.
//! Exit 0 when nothing FAILed, 1 otherwise.

use std::process::ExitCode;

use serde_json::json;

use crate::cli::CheckArgs;
use crate::judge::{LanguageTable, language};
use crate::sandbox::BoxLock;
use crate::sandbox::host::{self, CheckStatus, HostCheck, Overhead};

pub fn run(args: CheckArgs) -> ExitCode {
    // The check's box is locked like a judging's, so it never runs beside a
    // daemon, `judge` or `verify` that holds the same id (as root only: the
    // lock directory is root's).
    let mut lock_check = None;
    let _box_lock = if nix::unistd::geteuid().is_root() {
        match BoxLock::acquire([args.box_id], "check") {
            Ok(lock) => Some(lock),
            Err(e) => {
                lock_check = Some(HostCheck::new(
                    "box-lock",
                    CheckStatus::Fail,
                    format!("{e} (--box-id picks another)"),
                ));
                None
            }
        }
    } else {
        None
    };
    let mut checks: Vec<HostCheck> = lock_check.into_iter().collect();
    checks.extend(host::checks(&args.cgroup_parent, args.box_id));
    checks.extend(language_checks(args.languages.as_deref()));
    let can_judge = checks.iter().all(|c| c.status != CheckStatus::Fail);
    // The overhead only means something where the sandbox works.
    let overhead = if can_judge {
        match host::measure_overhead(args.runs as usize, &args.cgroup_parent, args.box_id) {
            Ok(o) => Some(o),
            Err(e) => {
                checks.push(HostCheck::new(
                    "overhead",
                    CheckStatus::Fail,
                    format!("measuring /bin/true in a slot: {e}"),
                ));
                None
            }
        }
    } else {
        None
    };
    let can_judge = checks.iter().all(|c| c.status != CheckStatus::Fail);
    if args.json {
        println!("{}", to_json(&checks, overhead.as_ref()));
    } else {
        print_human(&checks, overhead.as_ref(), can_judge);
    }
    if can_judge {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(super::EXIT_FAILURE)
    }
}

/// One check per configured language (contract §7): `ok` and its version,
/// `missing` (a command it needs is not on this host) or `fail` (its version
/// probe failed), each with why; neither stops the host judging the others.
/// No language at all is a FAIL.
fn language_checks(table_file: Option<&std::path::Path>) -> Vec<HostCheck> {
    let table = match table_file {
        Some(path) => LanguageTable::from_file(path),
        None => LanguageTable::builtin(),
    };
    let table = match table {
        Ok(t) => t,
        Err(e) => {
            return vec![HostCheck::new(
                "languages",
                CheckStatus::Fail,
                e.to_string(),
            )];
        }
    };
    let mut out = Vec::new();
    let mut available = 0;
    for lang in table.iter() {
        let name = format!("language-{}", lang.id);
        out.push(match language::probe_status(lang) {
            Ok(t) => {
                available += 1;
                HostCheck::new(&name, CheckStatus::Ok, t.to_string())
            }
            Err(why @ language::ProbeError::Missing { .. }) => {
                HostCheck::new(&name, CheckStatus::Missing, format!("not offered: {why}"))
            }
            Err(why @ language::ProbeError::Failed(_)) => HostCheck::new(
                &name,
                CheckStatus::Broken,
                format!("not offered: its version probe failed: {why}"),
            ),
        });
    }
    if available == 0 {
        out.push(HostCheck::new(
            "languages",
            CheckStatus::Fail,
            "no configured language has its toolchain on this host",
        ));
    }
    out
}

fn to_json(checks: &[HostCheck], overhead: Option<&Overhead>) -> serde_json::Value {
    json!({
        "checks": checks.iter().map(|c| json!({
            "name": c.name,
            "status": c.status.as_str(),
            "detail": c.detail,
        })).collect::<Vec<_>>(),
        "overhead": overhead.map(|o| json!({
            "runs": o.runs,
            "plain_ms": round3(o.plain_ms),
            "slot_ms": round3(o.slot_ms),
            "ratio": round3(o.ratio),
        })),
    })
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn print_human(checks: &[HostCheck], overhead: Option<&Overhead>, can_judge: bool) {
    let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for c in checks {
        println!("{:<4}  {:<width$}  {}", c.status.as_str(), c.name, c.detail);
    }
    if let Some(o) = overhead {
        println!(
            "overhead: /bin/true, {} runs each, interleaved: plain fork+exec {:.3} ms, slot {:.3} ms (medians): {:.2}x",
            o.runs, o.plain_ms, o.slot_ms, o.ratio
        );
    }
    let failed = checks
        .iter()
        .filter(|c| c.status == CheckStatus::Fail)
        .count();
    if can_judge {
        println!("this host can judge");
    } else {
        println!("this host cannot judge: {failed} check(s) FAILed");
    }
}

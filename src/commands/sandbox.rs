//! `judge-runner sandbox`: CLI flags → `sandbox::Plan`, run it, write the report.
//! Exit 0 when a report was produced (whatever the program did), 1 when the
//! sandbox failed (a `sandbox_error` report is still written), 2 for bad arguments.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use crate::cli::SandboxArgs;
use crate::sandbox::{self, Plan, Report, SandboxError, SeccompPolicy, Stdio};

pub fn run(args: SandboxArgs) -> ExitCode {
    let plan = match plan_from(&args) {
        Ok(plan) => plan,
        Err(msg) => {
            eprintln!("judge-runner sandbox: {msg}");
            return ExitCode::from(super::EXIT_USAGE);
        }
    };
    let (report, code) = match sandbox::run(&plan) {
        Ok(report) => (report, 0),
        Err(SandboxError::InvalidPlan { reason }) => {
            eprintln!("judge-runner sandbox: {reason}");
            return ExitCode::from(super::EXIT_USAGE);
        }
        Err(e) => {
            eprintln!("judge-runner sandbox: {e}");
            (Report::sandbox_error(e.to_string()), super::EXIT_FAILURE)
        }
    };
    match write_report(&report, args.report.as_deref()) {
        Ok(()) => ExitCode::from(code),
        Err(e) => {
            eprintln!("judge-runner sandbox: cannot write the report: {e}");
            ExitCode::from(super::EXIT_FAILURE)
        }
    }
}

/// Relative host paths are relative to the current directory.
fn host_path(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

fn plan_from(a: &SandboxArgs) -> Result<Plan, String> {
    let (program, rest) = a.command.split_first().ok_or("no PROGRAM given")?;
    let secs =
        |s: crate::units::Seconds| Duration::try_from_secs_f64(s.0).map_err(|e| e.to_string());
    let mut plan = Plan::new(program.clone())
        .args(rest.iter().cloned())
        .memory(a.memory.bytes())
        .processes(a.processes)
        .output(a.output.bytes())
        .open_files(a.open_files)
        .tmp_size(a.tmp_size.bytes())
        .box_id(a.box_id)
        .network(a.network)
        .cgroup_parent(a.cgroup_parent.clone());
    if let Some(t) = a.time {
        plan = plan.cpu_time(secs(t)?);
    }
    if let Some(t) = a.wall_time {
        plan = plan.wall_time(secs(t)?);
    }
    if let Some(s) = a.stack {
        plan = plan.stack(s.bytes());
    }
    if let Some(d) = &a.box_dir {
        plan = plan.box_dir(host_path(d));
    }
    if let Some(c) = a.cpu {
        plan = plan.cpu(c);
    }
    for b in &a.bind {
        plan = plan.bind(host_path(&b.host), b.inside.clone(), b.writable);
    }
    let file = |p: &Option<PathBuf>, default: Stdio| {
        p.as_ref().map_or(default, |p| Stdio::File(host_path(p)))
    };
    plan = plan
        .stdin(file(&a.stdin, Stdio::Null))
        .stdout(file(&a.stdout, Stdio::Inherit))
        .stderr(file(&a.stderr, Stdio::Inherit));
    for e in &a.env {
        plan = plan.env(e.name.clone(), e.value.clone());
    }
    plan = plan.seccomp(match a.seccomp.as_deref() {
        None => SeccompPolicy::Default,
        Some("none") => SeccompPolicy::None,
        Some(f) => SeccompPolicy::File(host_path(Path::new(f))),
    });
    Ok(plan)
}

fn write_report(report: &Report, to: Option<&str>) -> std::io::Result<()> {
    match to {
        Some("-") => {
            let mut out = std::io::stdout().lock();
            serde_json::to_writer(&mut out, report)?;
            writeln!(out)
        }
        Some(path) => {
            let mut json = serde_json::to_vec(report)?;
            json.push(b'\n');
            std::fs::write(host_path(Path::new(path)), json)
        }
        None => {
            let code = report.exit_code.map_or("-".to_string(), |c| c.to_string());
            let signal = report.signal.map_or("-".to_string(), |s| s.to_string());
            let mut line = format!(
                "status {} exit {code} signal {signal} cpu {:.3}s wall {:.3}s memory {} KiB",
                report.status,
                report.cpu_seconds,
                report.wall_seconds,
                report.memory_bytes / 1024
            );
            if !report.message.is_empty() {
                line.push_str(&format!(" ({})", report.message));
            }
            eprintln!("{line}");
            Ok(())
        }
    }
}

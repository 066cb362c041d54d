//! `judge-runner package check PATH` and `judge-runner package fetch URL --sha256 HEX`.

use std::fmt::Write as _;
use std::process::ExitCode;

use super::{EXIT_FAILURE, EXIT_USAGE};
use crate::cli::{PackageCheckArgs, PackageCommand, PackageFetchArgs, UnpackLimitArgs};
use crate::package::{
    self, Cache, Grading, OutputValidator, PackageError, Problem, ProblemKind, TestGroup, TestItem,
    UnpackLimits,
};

pub fn run(args: PackageCommand) -> ExitCode {
    match args {
        PackageCommand::Check(args) => check(&args),
        PackageCommand::Fetch(args) => fetch(&args),
    }
}

fn limits(args: &UnpackLimitArgs) -> UnpackLimits {
    UnpackLimits {
        max_entries: args.max_entries,
        max_unpacked: args.max_unpacked.bytes(),
    }
}

fn fail(command: &str, err: &PackageError) -> ExitCode {
    eprintln!("judge-runner package {command}: {err} [{}]", err.code());
    ExitCode::from(EXIT_FAILURE)
}

fn check(args: &PackageCheckArgs) -> ExitCode {
    let loaded = match package::load(&args.path, &limits(&args.unpack)) {
        Ok(loaded) => loaded,
        Err(err) => return fail("check", &err),
    };
    for warning in &loaded.problem.warnings {
        eprintln!("warning: {warning}");
    }
    print!(
        "{}",
        describe(&loaded.problem, args.time_limit.map(|s| s.0))
    );
    ExitCode::SUCCESS
}

fn fetch(args: &PackageFetchArgs) -> ExitCode {
    if !package::is_sha256_hex(&args.sha256) {
        eprintln!(
            "judge-runner package fetch: --sha256 {:?} is not 64 hexadecimal digits",
            args.sha256
        );
        return ExitCode::from(EXIT_USAGE);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("judge-runner package fetch: cannot start the runtime: {err}");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    let key = match args
        .key
        .as_deref()
        .map(|k| package::ServerKey::new(&args.url, k))
    {
        None => None,
        Some(Ok(key)) => Some(key),
        Some(Err(err)) => {
            eprintln!("judge-runner package fetch: {err}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let cache = match Cache::open_with_key(
        &args.cache,
        args.cache_size.bytes(),
        limits(&args.unpack),
        package::FetchPolicy::default(),
        key,
    ) {
        Ok(cache) => cache,
        Err(err) => return fail("fetch", &err),
    };
    match runtime.block_on(cache.get(&args.url, &args.sha256)) {
        Ok(entry) => {
            println!("{}", entry.path().display());
            ExitCode::SUCCESS
        }
        Err(err) => fail("fetch", &err),
    }
}

/// The human summary `package check` prints.
pub fn describe(problem: &Problem, time_limit: Option<f64>) -> String {
    let mut out = String::new();
    let mut kind = String::from(match problem.kind {
        ProblemKind::PassFail => "pass-fail",
        ProblemKind::Scoring => "scoring",
    });
    if problem.interactive {
        kind.push_str(", interactive");
    }
    if problem.multi_pass {
        let _ = write!(
            kind,
            ", multi-pass (at most {} passes)",
            problem.limits.validation_passes
        );
    }
    let source = match (problem.limits.time_limit, time_limit) {
        (Some(_), _) => "from the package",
        (None, Some(_)) => "from --time-limit",
        (None, None) => "default",
    };
    let cases = problem.cases();
    let _ = writeln!(out, "problem:    {}", problem.name);
    let _ = writeln!(out, "root:       {}", problem.root.display());
    let _ = writeln!(out, "format:     {}", problem.format);
    let _ = writeln!(out, "type:       {kind}");
    let _ = writeln!(
        out,
        "limits:     time {} s ({source}), memory {} MiB, output {} MiB",
        problem.time_limit(time_limit),
        problem.limits.memory_mib,
        problem.limits.output_mib
    );
    let _ = writeln!(out, "validator:  {}", validator(problem));
    let _ = writeln!(out, "tests:      {}", cases.len());
    let _ = writeln!(out, "groups:");
    group_lines(&mut out, &problem.data, problem.kind, 1);
    if !problem.submissions.is_empty() {
        let _ = writeln!(out, "submissions:");
        for sub in &problem.submissions {
            let _ = writeln!(
                out,
                "  {}/{} ({} file(s))",
                sub.expected,
                sub.name,
                sub.files.len()
            );
        }
    }
    out
}

fn validator(problem: &Problem) -> String {
    match &problem.validator {
        OutputValidator::Default(flags) => {
            let mut text = String::from("default");
            if flags.case_sensitive {
                text.push_str(", case_sensitive");
            }
            if flags.space_change_sensitive {
                text.push_str(", space_change_sensitive");
            }
            if let Some(tol) = flags.float_relative_tolerance {
                let _ = write!(text, ", float_relative_tolerance {tol}");
            }
            if let Some(tol) = flags.float_absolute_tolerance {
                let _ = write!(text, ", float_absolute_tolerance {tol}");
            }
            text
        }
        OutputValidator::Custom(_) | OutputValidator::Several(_) => {
            let programs: Vec<String> = problem
                .validator
                .custom_programs()
                .iter()
                .map(|custom| {
                    let path = custom
                        .path
                        .strip_prefix(&problem.root)
                        .unwrap_or(&custom.path);
                    if custom.args.is_empty() {
                        format!("custom {}", path.display())
                    } else {
                        format!("custom {} {}", path.display(), custom.args.join(" "))
                    }
                })
                .collect();
            // Several (legacy `output_validators/`): each runs, in this order.
            programs.join("; then ")
        }
    }
}

fn group_lines(out: &mut String, group: &TestGroup, kind: ProblemKind, depth: usize) {
    let name = if group.name.is_empty() {
        "data"
    } else {
        group.name.as_str()
    };
    let direct = group
        .items
        .iter()
        .filter(|i| matches!(i, TestItem::Case(_)))
        .count();
    let _ = writeln!(
        out,
        "{:indent$}{name}: {} test(s), {direct} here; {}",
        "",
        group.cases().len(),
        grading(&group.grading, kind),
        indent = depth * 2
    );
    for item in &group.items {
        if let TestItem::Group(sub) = item {
            group_lines(out, sub, kind, depth + 1);
        }
    }
}

fn grading(g: &Grading, kind: ProblemKind) -> String {
    let mut text = format!("on_reject {}", g.on_reject);
    if kind == ProblemKind::Scoring {
        let _ = write!(
            text,
            ", {} of scores, {}, accept {} reject {}, range {} {}",
            g.score_aggregation,
            g.verdict_aggregation,
            g.accept_score,
            g.reject_score,
            g.range.0,
            g.range.1
        );
        if g.ignore_sample {
            text.push_str(", ignore_sample");
        }
        if g.accept_if_any_accepted {
            text.push_str(", accept_if_any_accepted");
        }
    }
    if !g.output_validator_flags.is_empty() {
        let _ = write!(
            text,
            ", validator flags {}",
            g.output_validator_flags.join(" ")
        );
    }
    text
}

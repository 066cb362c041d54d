//! Compiling a submission in the sandbox: its files are written into a fresh
//! box, the language's compile command runs there, and the box becomes the
//! program's read-only directory for the test runs.

use std::path::{Path, PathBuf};

use crate::package::Problem;

use super::boxed::{Bind, BoxLimits, BoxRun, BoxStatus, Slot, Stream, WorkDir};
use super::error::JudgeError;
use super::language::{self, Language, Toolchain, Vars};
use super::{SourceFile, Submission};

/// Where the compiled program is mounted in test runs.
pub(crate) const PROGRAM_DIR: &str = "/submission";
const MIB: u64 = 1 << 20;
/// The compiler's output is kept up to this size.
const LOG_MAX: u64 = 64 * 1024;

/// A program ready to run: its directory, command, mounts and environment.
#[derive(Debug, Clone)]
pub(crate) struct Program {
    pub argv: Vec<String>,
    pub binds: Vec<Bind>,
    pub env: Vec<(String, String)>,
    pub processes: u32,
    pub log: String,
}

pub(crate) enum Compiled {
    Program(Program),
    Failed { log: String },
}

/// Checks the names a submission's files would be written under.
fn check_names(files: &[SourceFile]) -> Result<(), String> {
    if files.is_empty() {
        return Err("the submission has no files".to_string());
    }
    let mut seen = std::collections::HashSet::new();
    for f in files {
        let bad = f.name.is_empty()
            || f.name == "."
            || f.name == ".."
            || f.name.contains(['/', '\0'])
            || f.name.len() > 255;
        if bad {
            return Err(format!(
                "invalid file name {:?}: plain file names only",
                f.name
            ));
        }
        if !seen.insert(f.name.as_str()) {
            return Err(format!("file name {:?} appears twice", f.name));
        }
    }
    Ok(())
}

pub(crate) fn compile(
    slot: &Slot,
    work: &WorkDir,
    language: &Language,
    toolchain: &Toolchain,
    submission: &Submission,
    problem: &Problem,
) -> Result<Compiled, JudgeError> {
    if let Err(why) = check_names(&submission.files) {
        return Ok(Compiled::Failed { log: why });
    }
    let mut sources: Vec<String> = submission
        .files
        .iter()
        .filter(|f| language.is_source(&f.name))
        .map(|f| f.name.clone())
        .collect();
    sources.sort();
    if sources.is_empty() {
        return Ok(Compiled::Failed {
            log: format!(
                "no {} source file (*.{}) in the submission",
                language.name,
                language.extensions.join(", *.")
            ),
        });
    }
    let dir = work.fresh("program")?;
    for f in &submission.files {
        let path = dir.join(&f.name);
        std::fs::write(&path, &f.content).map_err(|e| JudgeError::io(&path, e))?;
    }
    let memlim = problem.limits.memory_mib;
    let toolchain_binds = toolchain.binds();
    let log = match &language.compile {
        None => String::new(),
        Some(template) => {
            let vars = Vars::for_program(
                "/box",
                &sources,
                language.compile_limits.memory,
                toolchain.dir.clone(),
            );
            let argv = language::expand(template, &vars);
            match run_compiler(slot, work, &dir, language, argv, &toolchain_binds, problem)? {
                Ok(log) => log,
                Err(log) => return Ok(Compiled::Failed { log }),
            }
        }
    };
    let vars = Vars::for_program(PROGRAM_DIR, &sources, memlim, toolchain.dir.clone());
    let mut binds = vec![Bind {
        host: dir.clone(),
        inside: PathBuf::from(PROGRAM_DIR),
        writable: false,
    }];
    binds.extend(toolchain_binds);
    Ok(Compiled::Program(Program {
        argv: language::expand(&language.run, &vars),
        binds,
        env: language.env.clone(),
        processes: language.run_processes,
        log,
    }))
}

/// Runs the compile command; `Ok(Err(log))` is a compilation error.
fn run_compiler(
    slot: &Slot,
    work: &WorkDir,
    dir: &Path,
    language: &Language,
    argv: Vec<String>,
    binds: &[Bind],
    problem: &Problem,
) -> Result<Result<String, String>, JudgeError> {
    let out = work.path().join("compile.out");
    let err = work.path().join("compile.err");
    let limits = &language.compile_limits;
    let time = problem.limits.compilation_time.unwrap_or(limits.time);
    let memory = problem
        .limits
        .compilation_memory_mib
        .unwrap_or(limits.memory);
    let report = slot.run(
        "compiling the submission",
        BoxRun {
            argv,
            box_dir: dir,
            validator_box: false,
            binds: binds.to_vec(),
            stdin: Stream::Null,
            stdout: Stream::Path(out.clone()),
            stderr: Stream::Path(err.clone()),
            limits: BoxLimits {
                time,
                wall: 2.0 * time + 5.0,
                memory_bytes: memory * MIB,
                processes: limits.processes,
                output_bytes: 256 * MIB,
            },
            env: language.env.clone(),
        },
    )?;
    let mut log = read_capped(&out)?;
    log.push_str(&read_capped(&err)?);
    let why = match report.status {
        BoxStatus::Ok => return Ok(Ok(log)),
        BoxStatus::NonzeroExit | BoxStatus::Signaled => None,
        BoxStatus::TimeLimit | BoxStatus::WallTimeLimit => Some("the compiler ran out of time"),
        BoxStatus::MemoryLimit => Some("the compiler ran out of memory"),
        BoxStatus::OutputLimit => Some("the compiler wrote too much"),
    };
    if let Some(why) = why {
        if !log.is_empty() && !log.ends_with('\n') {
            log.push('\n');
        }
        log.push_str(why);
        log.push('\n');
    }
    Ok(Err(log))
}

/// Reads a log file, keeping its first `LOG_MAX` bytes (lossy UTF-8).
pub(crate) fn read_capped(path: &Path) -> Result<String, JudgeError> {
    use std::io::Read;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
        Err(e) => return Err(JudgeError::io(path, e)),
    };
    let mut bytes = Vec::new();
    file.take(LOG_MAX)
        .read_to_end(&mut bytes)
        .map_err(|e| JudgeError::io(path, e))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

//! Compiling a submission in the sandbox: its files are written into a fresh
//! box, the language's compile command runs there, and the box becomes the
//! program's read-only directory for the test runs.

use std::path::{Path, PathBuf};

use crate::package::Problem;

use super::boxed::{Bind, BoxLimits, BoxRun, BoxStatus, JudgeSlot, Stream, WorkDir};
use super::capture;
use super::error::JudgeError;
use super::java;
use super::language::{self, Language, MainClassRule, Toolchain, Vars};
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
    slot: &JudgeSlot,
    work: &WorkDir,
    language: &Language,
    toolchain: &Toolchain,
    submission: &Submission,
    problem: &Problem,
) -> Result<Compiled, JudgeError> {
    if let Err(why) = check_names(&submission.files) {
        return Ok(Compiled::Failed { log: why });
    }
    // The names the files are written under (Java: after their public class;
    // javac's rule, so only `.java` files: a Kotlin file keeps its name, which
    // names its `FooKt` class).
    let names: Vec<String> = match language.main_class {
        MainClassRule::ClassFiles => java::file_names(&submission.files, |n| {
            language.is_source(n) && n.ends_with(".java")
        }),
        MainClassRule::FileName => submission.files.iter().map(|f| f.name.clone()).collect(),
    };
    // In the order given: the first source's main class wins (Java).
    let given: Vec<String> = names
        .iter()
        .filter(|n| language.is_source(n))
        .cloned()
        .collect();
    let mut sources = given.clone();
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
    for (f, name) in submission.files.iter().zip(&names) {
        let path = dir.join(name);
        std::fs::write(&path, &f.content).map_err(|e| JudgeError::io(&path, e))?;
    }
    sources.extend(add_includes(&dir, problem, language)?);
    sources.sort();
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
            let env = language::expand_env(&language.env, &vars);
            let limits = &language.compile_limits;
            // A package's `limits.compilation_time` is both limits, like the table's.
            let (time, wall) = match problem.limits.compilation_time {
                Some(t) => (t, t),
                None => (limits.time, limits.effective_wall()),
            };
            let build = Build {
                what: "compiling the submission",
                dir: &dir,
                argv,
                binds: &toolchain_binds,
                env: &env,
                time,
                wall,
                memory_mib: problem
                    .limits
                    .compilation_memory_mib
                    .unwrap_or(limits.memory),
                processes: limits.processes,
            };
            match build_in_box(slot, build)? {
                Ok(log) => log,
                Err(log) => return Ok(Compiled::Failed { log }),
            }
        }
    };
    let mut vars = Vars::for_program(PROGRAM_DIR, &sources, memlim, toolchain.dir.clone());
    if language.main_class == MainClassRule::ClassFiles {
        match java::main_class(&dir, &given) {
            Ok(class) => vars.mainclass = class,
            Err(why) => {
                let mut log = log;
                if !log.is_empty() && !log.ends_with('\n') {
                    log.push('\n');
                }
                log.push_str(&why);
                log.push('\n');
                return Ok(Compiled::Failed { log });
            }
        }
    }
    let mut binds = vec![Bind {
        host: dir.clone(),
        inside: PathBuf::from(PROGRAM_DIR),
        writable: false,
    }];
    binds.extend(toolchain_binds);
    Ok(Compiled::Program(Program {
        argv: language::expand(&language.run, &vars),
        binds,
        env: language::expand_env(&language.env, &vars),
        processes: language.run_processes,
        log,
    }))
}

/// Copies the package's `include/default/` and `include/<language>/` files into
/// the submission's directory (contract §2), never over a file the submission
/// has; returns the names of those that are sources of `language`.
fn add_includes(
    dir: &Path,
    problem: &Problem,
    language: &Language,
) -> Result<Vec<String>, JudgeError> {
    let mut sources = Vec::new();
    for include in problem.includes_for(&language.id) {
        let dest = dir.join(&include.path);
        if dest.symlink_metadata().is_ok() {
            continue; // the submission's own file wins
        }
        if let Some(parent) = dest.parent() {
            if parent.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
                continue; // a submission's file where the include wants a directory
            }
            std::fs::create_dir_all(parent).map_err(|e| JudgeError::io(parent, e))?;
        }
        std::fs::copy(&include.source, &dest).map_err(|e| JudgeError::io(&include.source, e))?;
        let name = include.path.to_string_lossy().into_owned();
        if language.is_source(&name) {
            sources.push(name);
        }
    }
    Ok(sources)
}

/// The largest file a compiler may write (contract §3: a program with a large
/// initialised static array compiles).
const COMPILE_FILE_MAX: u64 = 2 << 30;

/// One sandboxed build: a submission's compile, or an output validator's
/// compile or `build` script, with the limits its caller chose (the language
/// table's, a package's `limits.compilation_*`, or the build script's own).
pub(crate) struct Build<'a> {
    /// What the run is, for errors ("compiling the submission").
    pub what: &'a str,
    /// Mounted at `/box`, writable: the sources in, the program out.
    pub dir: &'a Path,
    pub argv: Vec<String>,
    pub binds: &'a [Bind],
    pub env: &'a [(String, String)],
    /// CPU seconds.
    pub time: f64,
    /// Wall seconds.
    pub wall: f64,
    pub memory_mib: u64,
    pub processes: u32,
}

/// Runs the compile command; `Ok(Err(log))` is a compilation error. Its stdout
/// and stderr share one pipe (their order kept, as on a terminal), of which the
/// first 64 KiB become the log; the rest is read and discarded, so a compiler
/// flooding its output runs into its time limit, not an output limit.
pub(crate) fn build_in_box(
    slot: &JudgeSlot,
    build: Build<'_>,
) -> Result<Result<String, String>, JudgeError> {
    let Build {
        what,
        dir,
        argv,
        binds,
        env,
        time,
        wall,
        memory_mib: memory,
        processes,
    } = build;
    let (mut ends, capture) = capture::start(2)?;
    let stderr = ends.pop().unwrap_or(Stream::Null);
    let stdout = ends.pop().unwrap_or(Stream::Null);
    let mut env = env.to_vec();
    // Temporary files (gcc's object files) in the box, on disk: the 64 MiB
    // `/tmp` of a sandbox cannot hold a large program's.
    if !env.iter().any(|(k, _)| k == "TMPDIR") {
        env.push(("TMPDIR".to_string(), "/box".to_string()));
    }
    let report = slot.run(
        what,
        BoxRun {
            argv,
            box_dir: dir,
            validator_box: false,
            binds: binds.to_vec(),
            stdin: Stream::Null,
            stdout,
            stderr,
            limits: BoxLimits {
                time,
                wall,
                memory_bytes: memory * MIB,
                processes,
                output_bytes: COMPILE_FILE_MAX,
            },
            env,
        },
    )?;
    let output = capture.finish()?;
    let mut log = output.text();
    if output.truncated() {
        if !log.ends_with('\n') {
            log.push('\n');
        }
        log.push_str(&format!(
            "[compiler output truncated: {} bytes written, the first {} kept]\n",
            output.total,
            output.kept.len()
        ));
    }
    let why = match report.status {
        BoxStatus::Ok => return Ok(Ok(log)),
        BoxStatus::NonzeroExit | BoxStatus::Signaled => None,
        BoxStatus::TimeLimit => Some(format!("the compiler ran out of time ({time} s of CPU)")),
        BoxStatus::WallTimeLimit => Some(format!(
            "the compiler ran out of time ({} s of wall time)",
            wall
        )),
        BoxStatus::MemoryLimit => Some(format!("the compiler ran out of memory ({memory} MiB)")),
        BoxStatus::OutputLimit => Some(format!(
            "the compiler wrote a file larger than {} MiB",
            COMPILE_FILE_MAX / MIB
        )),
    };
    if let Some(why) = why {
        if !log.is_empty() && !log.ends_with('\n') {
            log.push('\n');
        }
        log.push_str(&why);
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

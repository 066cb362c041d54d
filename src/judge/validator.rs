//! Custom output validators (Kattis interface): built once per package and
//! cached for every slot, run sandboxed as
//! `VALIDATOR input answer feedback_dir/ [args] < output`; 42 accepts, 43 rejects,
//! anything else is an infrastructure failure.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::package::{CustomValidator, Problem, ProblemKind, TestCase, TestGroup};

use super::boxed::{Bind, BoxLimits, BoxReport, BoxRun, BoxStatus, JudgeSlot, Stream};
use super::compile::{Build, build_in_box, read_capped};
use super::error::JudgeError;
use super::language::{self, CompileLimits, LanguageTable, Toolchain, Vars};
use super::verdict::Verdict;

/// Where a built validator is mounted.
pub(crate) const VALIDATOR_DIR: &str = "/validator";
/// Where the package is mounted for a validator (inputs and answers).
pub(crate) const PROBLEM_DIR: &str = "/problem";
/// Where a later pass's input is mounted for a multi-pass validator.
pub(crate) const PASS_DIR: &str = "/pass";
/// The feedback directory inside the validator's box (with the trailing `/`
/// that Kattis validators expect).
pub(crate) const FEEDBACK_INSIDE: &str = "/box/feedback/";
const MIB: u64 = 1 << 20;
const DEFAULT_VALIDATION_TIME: f64 = 30.0;
const DEFAULT_VALIDATION_MEMORY_MIB: u64 = 1024;

/// A validator ready to run.
#[derive(Debug)]
pub(crate) struct BuiltValidator {
    /// Its name in the package (`validate`, the folder or file stem).
    pub name: String,
    /// Host directory holding the built validator (kept by the cache).
    dir: PathBuf,
    argv: Vec<String>,
    binds: Vec<Bind>,
    env: Vec<(String, String)>,
    args: Vec<String>,
}

type Key = (PathBuf, Vec<(PathBuf, u64, i64)>);
/// One validator's slot in the cache: empty until its first build succeeds.
type Entry = Arc<Mutex<Option<Arc<BuiltValidator>>>>;

/// Built validators, keyed by their source (path and every file's size and
/// mtime): each is built once, even when several slots ask at the same time.
#[derive(Debug, Default)]
pub struct ValidatorCache {
    /// Where the cache's directory is made; the temp dir when `None`.
    base: Option<PathBuf>,
    root: Mutex<Option<tempfile::TempDir>>,
    entries: Mutex<HashMap<Key, Entry>>,
}

impl ValidatorCache {
    /// A cache whose built validators live below `base` (made on first use).
    pub fn in_dir(base: PathBuf) -> Self {
        ValidatorCache {
            base: Some(base),
            ..ValidatorCache::default()
        }
    }

    /// The problem's custom validators in the order they run, each built (or
    /// taken from the cache); none for the default validator.
    pub(crate) fn prepare(
        &self,
        problem: &Problem,
        languages: &LanguageTable,
        slot: &JudgeSlot,
        toolchain: impl Fn(&str) -> Result<Toolchain, JudgeError>,
    ) -> Result<Vec<Arc<BuiltValidator>>, JudgeError> {
        problem
            .validator
            .custom_programs()
            .iter()
            .map(|custom| self.prepare_one(custom, languages, slot, &toolchain))
            .collect()
    }

    fn prepare_one(
        &self,
        custom: &CustomValidator,
        languages: &LanguageTable,
        slot: &JudgeSlot,
        toolchain: &dyn Fn(&str) -> Result<Toolchain, JudgeError>,
    ) -> Result<Arc<BuiltValidator>, JudgeError> {
        let key = fingerprint(&custom.path, &custom.companions)?;
        let cell = {
            let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(entries.entry(key).or_default())
        };
        // Held while building: a second slot asking for the same validator waits
        // for the first build instead of starting its own.
        let mut built = cell.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = built.as_ref() {
            return Ok(Arc::clone(v));
        }
        let dir = self.new_dir()?;
        let v = Arc::new(build(custom, languages, slot, toolchain, dir)?);
        *built = Some(Arc::clone(&v));
        Ok(v)
    }

    fn new_dir(&self) -> Result<PathBuf, JudgeError> {
        let mut root = self.root.lock().unwrap_or_else(|p| p.into_inner());
        if root.is_none() {
            let base = self.base.clone().unwrap_or_else(std::env::temp_dir);
            std::fs::create_dir_all(&base).map_err(|e| JudgeError::io(&base, e))?;
            let dir = tempfile::Builder::new()
                .prefix("judge-validators-")
                .tempdir_in(&base)
                .map_err(|e| JudgeError::io(&base, e))?;
            *root = Some(dir);
        }
        let parent = root
            .as_ref()
            .map(|d| d.path().to_path_buf())
            .unwrap_or_default();
        tempfile::Builder::new()
            .prefix("v")
            .tempdir_in(&parent)
            .map(tempfile::TempDir::keep)
            .map_err(|e| JudgeError::io(parent, e))
    }
}

/// What a built validator depends on: its path, and the size and mtime of each
/// of its files and companions.
fn fingerprint(path: &Path, companions: &[PathBuf]) -> Result<Key, JudgeError> {
    let resolve = |path: &Path| {
        path.canonicalize()
            .map_err(|e| JudgeError::package(format!("output validator {}: {e}", path.display())))
    };
    let canonical = resolve(path)?;
    let mut files = Vec::new();
    let mut stack = vec![canonical.clone()];
    for companion in companions {
        stack.push(resolve(companion)?);
    }
    while let Some(p) = stack.pop() {
        let meta = std::fs::metadata(&p).map_err(|e| JudgeError::io(&p, e))?;
        if meta.is_dir() {
            for entry in std::fs::read_dir(&p).map_err(|e| JudgeError::io(&p, e))? {
                stack.push(entry.map_err(|e| JudgeError::io(&p, e))?.path());
            }
        } else {
            use std::os::unix::fs::MetadataExt;
            files.push((p, meta.len(), meta.mtime()));
        }
    }
    files.sort();
    Ok((canonical, files))
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), JudgeError> {
    let meta = std::fs::metadata(from).map_err(|e| JudgeError::io(from, e))?;
    if meta.is_dir() {
        std::fs::create_dir_all(to).map_err(|e| JudgeError::io(to, e))?;
        for entry in std::fs::read_dir(from).map_err(|e| JudgeError::io(from, e))? {
            let entry = entry.map_err(|e| JudgeError::io(from, e))?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
    } else {
        std::fs::copy(from, to).map_err(|e| JudgeError::io(from, e))?;
    }
    Ok(())
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A script run as itself when executable, else through `/bin/sh`.
fn script_argv(inside: &str, host: &Path) -> Vec<String> {
    if is_executable(host) {
        vec![inside.to_string()]
    } else {
        vec!["/bin/sh".to_string(), inside.to_string()]
    }
}

fn build(
    custom: &CustomValidator,
    languages: &LanguageTable,
    slot: &JudgeSlot,
    toolchain: &dyn Fn(&str) -> Result<Toolchain, JudgeError>,
    dir: PathBuf,
) -> Result<BuiltValidator, JudgeError> {
    let src_is_dir = custom.path.is_dir();
    if src_is_dir {
        copy_tree(&custom.path, &dir)?;
    } else {
        // Its headers first: the program's own file wins a name they share.
        for companion in &custom.companions {
            let name = companion.file_name().unwrap_or_default();
            copy_tree(companion, &dir.join(name))?;
        }
        let name = custom.path.file_name().unwrap_or_default();
        copy_tree(&custom.path, &dir.join(name))?;
    }
    let fail =
        |why: String| JudgeError::package(format!("output validator {}: {why}", custom.name));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| JudgeError::io(&dir, e))?
        .filter_map(|e| e.ok().and_then(|e| e.file_name().into_string().ok()))
        .collect();
    names.sort();
    let base = BuiltValidator {
        name: custom.name.clone(),
        dir: dir.clone(),
        argv: Vec::new(),
        binds: Vec::new(),
        env: Vec::new(),
        args: custom.args.clone(),
    };
    let has = |n: &str| names.iter().any(|x| x == n);
    if src_is_dir && (has("build") || has("run")) {
        if has("build") {
            let build = Build {
                what: "building the output validator",
                dir: &dir,
                argv: script_argv("/box/build", &dir.join("build")),
                binds: &[],
                env: &[],
                time: BUILD_SCRIPT_LIMITS.time,
                wall: BUILD_SCRIPT_LIMITS.effective_wall(),
                memory_mib: BUILD_SCRIPT_LIMITS.memory,
                processes: BUILD_SCRIPT_LIMITS.processes,
            };
            if let Err(log) = build_in_box(slot, build)? {
                return Err(fail(format!("`build` failed:\n{log}")));
            }
        }
        if !dir.join("run").is_file() {
            return Err(fail(
                "has a `build` script but no `run` script after building".to_string(),
            ));
        }
        let argv = script_argv(&format!("{VALIDATOR_DIR}/run"), &dir.join("run"));
        return Ok(BuiltValidator { argv, ..base });
    }
    let language = languages
        .detect_program(names.iter().map(String::as_str))
        .ok_or_else(|| {
            fail(format!(
                "no source file of a configured language among {names:?}"
            ))
        })?;
    let tc = toolchain(&language.id).map_err(|e| fail(e.to_string()))?;
    let sources: Vec<String> = names
        .iter()
        .filter(|n| language.is_source(n))
        .cloned()
        .collect();
    let binds = tc.binds();
    if let Some(template) = &language.compile {
        let vars = Vars::for_program(
            "/box",
            &sources,
            language.compile_limits.memory,
            tc.dir.clone(),
        );
        // The language table's compile limits, as for a submission (a
        // package's `limits.compilation_*` are the submissions').
        let limits = &language.compile_limits;
        let build = Build {
            what: "compiling the output validator",
            dir: &dir,
            argv: language::expand(template, &vars),
            binds: &binds,
            env: &language::expand_env(&language.env, &vars),
            time: limits.time,
            wall: limits.effective_wall(),
            memory_mib: limits.memory,
            processes: limits.processes,
        };
        if let Err(log) = build_in_box(slot, build)? {
            return Err(fail(format!("does not compile:\n{log}")));
        }
    }
    let vars = Vars::for_program(
        VALIDATOR_DIR,
        &sources,
        DEFAULT_VALIDATION_MEMORY_MIB,
        tc.dir.clone(),
    );
    Ok(BuiltValidator {
        argv: language::expand(&language.run, &vars),
        env: language::expand_env(&language.env, &vars),
        binds,
        ..base
    })
}

/// A validator's `build` script has no language table entry: its own limits
/// (a build may fetch nothing, but may compile several programs).
const BUILD_SCRIPT_LIMITS: CompileLimits = CompileLimits {
    time: 60.0,
    wall: Some(180.0),
    memory: 2048,
    processes: 64,
};

/// What the validator said about one test.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ValidatorVerdict {
    pub verdict: Verdict,
    pub score: Option<f64>,
    pub judge_message: String,
}

/// The files a validator run reads and writes on the host.
pub(crate) struct ValidatorBox {
    /// Mounted at `/box`; `feedback/` inside is the feedback directory.
    pub box_dir: PathBuf,
    pub stderr: PathBuf,
}

impl ValidatorBox {
    /// The feedback directory on the host.
    pub fn feedback(&self) -> PathBuf {
        self.box_dir.join("feedback")
    }

    pub fn create(box_dir: PathBuf, stderr: PathBuf) -> Result<Self, JudgeError> {
        let feedback = box_dir.join("feedback");
        std::fs::create_dir(&feedback).map_err(|e| JudgeError::io(&feedback, e))?;
        // The validator runs as its box's uid; this directory is only visible in
        // its sandbox, so world-writable is as private as the box itself.
        std::fs::set_permissions(&feedback, std::fs::Permissions::from_mode(0o777))
            .map_err(|e| JudgeError::io(&feedback, e))?;
        Ok(ValidatorBox { box_dir, stderr })
    }
}

/// One run of a validator on one test.
pub(crate) struct RunSpec<'a> {
    pub problem: &'a Problem,
    pub case: &'a TestCase,
    pub group: &'a TestGroup,
    pub vbox: &'a ValidatorBox,
    /// The input the submission read, when it is not the test's own `.in`: a
    /// later pass of a multi-pass test reads what the validator wrote to
    /// `nextpass.in`, and the validator is given that file as `input_file`
    /// (the spec: the input "given on standard input to the program whose
    /// results are being validated").
    pub pass_input: Option<&'a Path>,
    pub stdin: Stream,
    pub stdout: Stream,
    /// Wall limit; 2 × the validation time + 1 s when `None`.
    pub wall: Option<f64>,
    pub validator_box: bool,
}

impl BuiltValidator {
    /// The sandboxed run of this validator on one test.
    pub fn box_run<'a>(&self, spec: RunSpec<'a>) -> Result<BoxRun<'a>, JudgeError> {
        let RunSpec {
            problem,
            case,
            group,
            vbox,
            pass_input,
            stdin,
            stdout,
            wall,
            validator_box,
        } = spec;
        let root = problem.root.canonicalize().map_err(|e| {
            JudgeError::package(format!("package root {}: {e}", problem.root.display()))
        })?;
        let inside = |file: &Path| -> Result<String, JudgeError> {
            let real = file
                .canonicalize()
                .map_err(|e| JudgeError::package(format!("{}: {e}", file.display())))?;
            let rel = real.strip_prefix(&root).map_err(|_| {
                JudgeError::package(format!("{} lies outside the package", file.display()))
            })?;
            Ok(format!("{PROBLEM_DIR}/{}", rel.display()))
        };
        let mut argv = self.argv.clone();
        let mut binds = Vec::new();
        match pass_input {
            None => argv.push(inside(&case.input)?),
            Some(input) => {
                // Its own directory (the judge's, holding only this file), read-only.
                let (Some(dir), Some(name)) = (input.parent(), input.file_name()) else {
                    return Err(JudgeError::io(
                        input,
                        std::io::Error::from(std::io::ErrorKind::InvalidInput),
                    ));
                };
                argv.push(format!("{PASS_DIR}/{}", name.to_string_lossy()));
                binds.push(Bind {
                    host: dir.to_path_buf(),
                    inside: PathBuf::from(PASS_DIR),
                    writable: false,
                });
            }
        }
        argv.push(inside(&case.answer)?);
        argv.push(FEEDBACK_INSIDE.to_string());
        argv.extend(self.args.iter().cloned());
        argv.extend(group.grading.output_validator_flags.iter().cloned());
        binds.extend([
            Bind {
                host: root,
                inside: PathBuf::from(PROBLEM_DIR),
                writable: false,
            },
            Bind {
                host: self.dir.clone(),
                inside: PathBuf::from(VALIDATOR_DIR),
                writable: false,
            },
        ]);
        binds.extend(self.binds.iter().cloned());
        let time = problem
            .limits
            .validation_time
            .unwrap_or(DEFAULT_VALIDATION_TIME);
        let memory = problem
            .limits
            .validation_memory_mib
            .unwrap_or(DEFAULT_VALIDATION_MEMORY_MIB);
        Ok(BoxRun {
            argv,
            box_dir: &vbox.box_dir,
            validator_box,
            binds,
            stdin,
            stdout,
            stderr: Stream::Path(vbox.stderr.clone()),
            limits: BoxLimits {
                time,
                wall: wall.unwrap_or(2.0 * time + 1.0).max(1.0),
                memory_bytes: memory * MIB,
                processes: 16,
                output_bytes: 64 * MIB,
            },
            env: self.env.clone(),
        })
    }
}

/// How a validator's run ended, for a judge error: `exited with 0`, `was
/// killed by signal 9`, `stopped: wall_time_limit`.
pub(crate) fn how_it_ended(report: &BoxReport) -> String {
    match (report.status, report.exit_code, report.signal) {
        (BoxStatus::Ok, _, _) => "exited with 0".to_string(),
        (BoxStatus::NonzeroExit, Some(c), _) => format!("exited with {c}"),
        (BoxStatus::Signaled, _, Some(s)) => format!("was killed by signal {s}"),
        (status, _, _) => format!("stopped: {}", status.as_str()),
    }
}

/// Reads what the validator decided: 42/43, `judgemessage.txt`, `score.txt`.
pub(crate) fn interpret(
    report: &BoxReport,
    vbox: &ValidatorBox,
    kind: ProblemKind,
    test: &str,
) -> Result<ValidatorVerdict, JudgeError> {
    let feedback = vbox.feedback();
    let judge_message = read_capped(&feedback.join("judgemessage.txt"))?;
    let verdict = match (report.status, report.exit_code) {
        (BoxStatus::NonzeroExit, Some(42)) => Verdict::Accepted,
        (BoxStatus::NonzeroExit, Some(43)) => Verdict::WrongAnswer,
        _ => {
            let stderr = read_capped(&vbox.stderr)?;
            let how = how_it_ended(report);
            return Err(JudgeError::Validator {
                test: test.to_string(),
                message: format!(
                    "the validator {how} (expected 42 or 43); stderr: {}{}",
                    stderr.trim_end(),
                    judge_message.trim_end()
                ),
            });
        }
    };
    let score_file = feedback.join("score.txt");
    let score = if kind == ProblemKind::Scoring && score_file.is_file() {
        let text = read_capped(&score_file)?;
        let score = text
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite())
            .ok_or_else(|| JudgeError::Validator {
                test: test.to_string(),
                message: format!("score.txt holds {:?}, not a number", text.trim()),
            })?;
        Some(score)
    } else {
        None
    };
    Ok(ValidatorVerdict {
        verdict,
        score,
        judge_message,
    })
}

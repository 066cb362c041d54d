//! The language table: how each language's sources are named, compiled and run,
//! with which limits, and how to tell whether its toolchain is on this host.
//! Embedded by default (`languages.yaml`), replaceable by a file of the same form.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

/// The built-in table.
pub const BUILTIN_LANGUAGES: &str = include_str!("languages.yaml");
/// The PATH every sandboxed program sees (contract §1); commands are resolved
/// against it on the host, so a probe sees what a sandbox will see.
pub const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// Host directories a sandbox mounts; a resolved program outside them is not used.
const VISIBLE_ROOTS: [&str; 5] = ["/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/"];
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Debug, thiserror::Error)]
pub enum LanguageConfigError {
    #[error("cannot read language table {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid language table: {source}")]
    Parse {
        #[source]
        source: serde_yaml_ng::Error,
    },
    #[error("language {id:?}: {problem}")]
    Invalid { id: String, problem: &'static str },
}

/// Limits of a compile step.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompileLimits {
    /// CPU seconds.
    pub time: f64,
    /// Wall seconds; the CPU limit when absent (contract §3: 30 s and 30 s by
    /// default).
    #[serde(default)]
    pub wall: Option<f64>,
    /// MiB.
    pub memory: u64,
    pub processes: u32,
}

impl CompileLimits {
    /// The wall-clock limit in force.
    pub fn effective_wall(&self) -> f64 {
        self.wall.unwrap_or(self.time)
    }
}

impl Default for CompileLimits {
    fn default() -> Self {
        CompileLimits {
            time: 30.0,
            wall: None,
            memory: 1024,
            processes: 32,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct LanguageSpec {
    name: String,
    extensions: Vec<String>,
    #[serde(default)]
    priority: i64,
    compile: Option<String>,
    run: String,
    version: String,
    toolchain: Option<String>,
    #[serde(default)]
    compile_limits: CompileLimits,
    run_processes: Option<u32>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    main_class: MainClassRule,
}

/// Where `{mainclass}` comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MainClassRule {
    /// problemtools': `{mainfile}` without its extension.
    #[default]
    FileName,
    /// Java (contract §2): the class whose class file, written by the compile
    /// step, declares `public static void main(String[])`, package-qualified;
    /// none is a Compilation Error.
    ClassFiles,
}

/// One configured language.
#[derive(Debug, Clone, PartialEq)]
pub struct Language {
    pub id: String,
    pub name: String,
    pub extensions: Vec<String>,
    pub priority: i64,
    /// Command templates, split on whitespace.
    pub compile: Option<Vec<String>>,
    pub run: Vec<String>,
    pub version: Vec<String>,
    pub toolchain: Option<Vec<String>>,
    pub compile_limits: CompileLimits,
    pub run_processes: u32,
    pub env: Vec<(String, String)>,
    pub main_class: MainClassRule,
}

fn split(template: &str) -> Vec<String> {
    template.split_whitespace().map(str::to_string).collect()
}

impl Language {
    fn from_spec(id: String, spec: LanguageSpec) -> Result<Self, LanguageConfigError> {
        let invalid = |problem| LanguageConfigError::Invalid {
            id: id.clone(),
            problem,
        };
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(invalid("ids are letters, digits and '_'"));
        }
        if spec.extensions.is_empty() {
            return Err(invalid("needs at least one extension"));
        }
        if spec.run.trim().is_empty() || spec.version.trim().is_empty() {
            return Err(invalid("`run` and `version` must not be empty"));
        }
        Ok(Language {
            name: spec.name,
            extensions: spec.extensions,
            priority: spec.priority,
            compile: spec.compile.as_deref().map(split).filter(|c| !c.is_empty()),
            run: split(&spec.run),
            version: split(&spec.version),
            toolchain: spec
                .toolchain
                .as_deref()
                .map(split)
                .filter(|c| !c.is_empty()),
            compile_limits: spec.compile_limits,
            run_processes: spec.run_processes.unwrap_or(64),
            env: spec.env.into_iter().collect(),
            main_class: spec.main_class,
            id,
        })
    }

    /// Whether `file_name` is a source file of this language.
    pub fn is_source(&self, file_name: &str) -> bool {
        extension(file_name).is_some_and(|ext| self.extensions.iter().any(|e| e == ext))
    }
}

fn extension(file_name: &str) -> Option<&str> {
    let (stem, ext) = file_name.rsplit_once('.')?;
    (!stem.is_empty() && !ext.is_empty()).then_some(ext)
}

/// Every configured language, by id.
#[derive(Debug, Clone, PartialEq)]
pub struct LanguageTable {
    languages: BTreeMap<String, Language>,
}

impl LanguageTable {
    pub fn builtin() -> Result<Self, LanguageConfigError> {
        Self::from_yaml(BUILTIN_LANGUAGES)
    }

    pub fn from_file(path: &Path) -> Result<Self, LanguageConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| LanguageConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_yaml(&text)
    }

    pub fn from_yaml(text: &str) -> Result<Self, LanguageConfigError> {
        let specs: BTreeMap<String, LanguageSpec> = serde_yaml_ng::from_str(text)
            .map_err(|source| LanguageConfigError::Parse { source })?;
        let languages = specs
            .into_iter()
            .map(|(id, spec)| Ok((id.clone(), Language::from_spec(id, spec)?)))
            .collect::<Result<_, LanguageConfigError>>()?;
        Ok(LanguageTable { languages })
    }

    pub fn get(&self, id: &str) -> Option<&Language> {
        self.languages.get(id)
    }

    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.languages.keys().map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Language> {
        self.languages.values()
    }

    /// The language a file belongs to by its extension (highest priority wins).
    pub fn detect(&self, file_name: &str) -> Option<&Language> {
        self.languages
            .values()
            .filter(|l| l.is_source(file_name))
            .max_by_key(|l| l.priority)
    }

    /// The language of a program made of several files (a validator directory):
    /// the one claiming the most files, ties broken by priority (problemtools).
    pub fn detect_program<'a>(
        &self,
        file_names: impl Iterator<Item = &'a str> + Clone,
    ) -> Option<&Language> {
        self.languages
            .values()
            .map(|l| (file_names.clone().filter(|f| l.is_source(f)).count(), l))
            .filter(|(n, _)| *n > 0)
            .max_by_key(|(n, l)| (*n, l.priority))
            .map(|(_, l)| l)
    }
}

/// A language whose toolchain was found on this host.
#[derive(Debug, Clone, PartialEq)]
pub struct Toolchain {
    /// The directory `toolchain` printed, mounted read-only in its sandboxes.
    pub dir: Option<PathBuf>,
    /// The first line the version probe printed.
    pub version: String,
}

/// What an operator reads in a log: the version line, and the directory when
/// the toolchain names one (`gcc (Debian 12.2.0-14) 12.2.0`,
/// `openjdk 17.0.13 in /usr/lib/jvm/java-17-openjdk-amd64`).
impl std::fmt::Display for Toolchain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let version = if self.version.is_empty() {
            "version unknown"
        } else {
            self.version.as_str()
        };
        match &self.dir {
            Some(dir) => write!(f, "{version} in {}", dir.display()),
            None => f.write_str(version),
        }
    }
}

impl Toolchain {
    /// The toolchain's directory, read-only at the same path in a box.
    pub(crate) fn binds(&self) -> Vec<super::boxed::Bind> {
        self.dir
            .iter()
            .map(|d| super::boxed::Bind {
                host: d.clone(),
                inside: d.clone(),
                writable: false,
            })
            .collect()
    }
}

/// Why a language's toolchain is not offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeError {
    /// A command the language needs is not on this host.
    Missing { command: String },
    /// The toolchain is there but its probe failed (exit status, timeout,
    /// a `toolchain` command printing no directory).
    Failed(String),
}

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeError::Missing { command } => write!(
                f,
                "command `{command}` not found (looked in {SANDBOX_PATH}): install its toolchain"
            ),
            ProbeError::Failed(why) => f.write_str(why),
        }
    }
}

/// Finds the language's toolchain and runs its version probe, on the host.
pub fn probe(language: &Language) -> Result<Toolchain, String> {
    probe_status(language).map_err(|e| e.to_string())
}

/// [`probe`], telling a missing toolchain from one that does not work.
pub fn probe_status(language: &Language) -> Result<Toolchain, ProbeError> {
    let dir = match &language.toolchain {
        Some(cmd) => {
            let out = host_output(cmd, None)?;
            let dir = PathBuf::from(out.trim());
            if !dir.is_absolute() || !dir.is_dir() {
                return Err(ProbeError::Failed(format!(
                    "toolchain command printed {dir:?}, not a directory"
                )));
            }
            Some(dir)
        }
        None => None,
    };
    let vars = Vars {
        toolchain: dir.clone(),
        ..Vars::default()
    };
    let version = expand(&language.version, &vars);
    let out = host_output(&version, Some(SANDBOX_PATH))?;
    Ok(Toolchain {
        dir,
        version: version_line(&out),
    })
}

/// The first line of a version probe's output that says something: not empty,
/// not a JVM's warning about its options (Debian's kotlinc passes `-noverify`,
/// which JDK 13 and later warn about before kotlinc prints its version).
fn version_line(out: &str) -> String {
    out.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.contains("VM warning:"))
        .unwrap_or("")
        .to_string()
}

/// Runs a command on the host and answers its stdout (stderr when stdout is
/// empty: `javac -version` prints there), or why it failed.
fn host_output(argv: &[String], path_env: Option<&str>) -> Result<String, ProbeError> {
    let Some((program, args)) = argv.split_first() else {
        return Err(ProbeError::Failed("empty command".to_string()));
    };
    let program = match path_env {
        Some(_) => resolve_program(program),
        None => program.clone(),
    };
    let mut cmd = Command::new(&program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(p) = path_env {
        cmd.env("PATH", p);
    }
    let child = cmd.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            ProbeError::Missing {
                command: program.clone(),
            }
        } else {
            ProbeError::Failed(format!("cannot run {program}: {e}"))
        }
    })?;
    let output = wait_with_timeout(child, PROBE_TIMEOUT)
        .map_err(|e| ProbeError::Failed(format!("{program}: {e}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let said = version_line(&stderr);
        let said = if said.is_empty() {
            String::new()
        } else {
            format!(": {said}")
        };
        return Err(ProbeError::Failed(format!(
            "`{}` failed ({}){said}",
            argv.join(" "),
            output.status
        )));
    }
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if stdout.trim().is_empty() {
        return Ok(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    Ok(stdout)
}

fn wait_with_timeout(
    mut child: std::process::Child,
    timeout: Duration,
) -> std::io::Result<std::process::Output> {
    let deadline = Instant::now() + timeout;
    loop {
        if child.try_wait()?.is_some() {
            return child.wait_with_output();
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "timed out",
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A program name without a `/` is looked up in the sandbox's PATH on this host.
/// Its symbolic links are resolved only when one of them leaves the directories
/// every sandbox mounts (so `/usr/bin/java → /etc/alternatives/... →
/// /usr/lib/jvm/...` works in a sandbox that does not mount `/etc/alternatives`),
/// and then only to a target inside them. A chain the sandbox can follow itself
/// is kept as it is: a multi-call binary (busybox: `uname → busybox`) picks what
/// to do by the name it was started under.
pub fn resolve_program(program: &str) -> String {
    if program.contains('/') {
        return program.to_string();
    }
    let visible = |p: &Path| {
        let s = p.to_string_lossy();
        VISIBLE_ROOTS.iter().any(|root| s.starts_with(root))
    };
    for dir in SANDBOX_PATH.split(':') {
        let candidate = Path::new(dir).join(program);
        if !candidate.is_file() {
            continue;
        }
        let mut hop = candidate.clone();
        let mut leaves = false;
        for _ in 0..40 {
            let Ok(target) = std::fs::read_link(&hop) else {
                break;
            };
            hop = match hop.parent() {
                Some(parent) if target.is_relative() => parent.join(target),
                _ => target,
            };
            if !visible(&hop) {
                leaves = true;
                break;
            }
        }
        if leaves
            && let Ok(real) = candidate.canonicalize()
            && visible(&real)
        {
            return real.to_string_lossy().into_owned();
        }
        return candidate.to_string_lossy().into_owned();
    }
    program.to_string()
}

/// Values of the metavariables.
#[derive(Debug, Clone, Default)]
pub struct Vars {
    pub path: String,
    pub files: Vec<String>,
    pub binary: String,
    pub mainfile: String,
    pub mainclass: String,
    pub memlim_mib: u64,
    pub toolchain: Option<PathBuf>,
}

impl Vars {
    /// The variables of a program in `path` made of `files` (sorted names).
    pub fn for_program(
        path: &str,
        files: &[String],
        memlim_mib: u64,
        toolchain: Option<PathBuf>,
    ) -> Self {
        let main = main_file(files).unwrap_or_default();
        let mainclass = main
            .rsplit_once('.')
            .map_or(main.as_str(), |(stem, _)| stem)
            .to_string();
        Vars {
            path: path.to_string(),
            files: files.to_vec(),
            binary: format!("{path}/program"),
            mainfile: format!("{path}/{main}"),
            mainclass,
            memlim_mib,
            toolchain,
        }
    }
}

/// problemtools' {mainfile}: the only file, else one named `main.*` (any case),
/// else the first by name.
pub fn main_file(files: &[String]) -> Option<String> {
    if let [only] = files {
        return Some(only.clone());
    }
    let mut sorted: Vec<&String> = files.iter().collect();
    sorted.sort();
    sorted
        .iter()
        .find(|f| {
            f.split_once('.')
                .is_some_and(|(stem, _)| stem.eq_ignore_ascii_case("main"))
        })
        .or(sorted.first())
        .map(|f| (*f).clone())
}

impl Vars {
    /// One argument (or environment value) with its metavariables replaced.
    fn substitute(&self, token: &str) -> String {
        let capital = {
            let mut c = self.mainclass.chars();
            c.next()
                .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
                .unwrap_or_default()
        };
        let toolchain = self
            .toolchain
            .as_ref()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_default();
        token
            .replace("{path}", &self.path)
            .replace("{binary}", &self.binary)
            .replace("{mainfile}", &self.mainfile)
            .replace("{Mainclass}", &capital)
            .replace("{mainclass}", &self.mainclass)
            .replace("{memlim}", &self.memlim_mib.to_string())
            .replace("{toolchain}", &toolchain)
    }
}

/// Expands a command template: `{files}` alone becomes one argument per file;
/// other metavariables are replaced inside their argument.
pub fn expand(template: &[String], vars: &Vars) -> Vec<String> {
    let mut out = Vec::with_capacity(template.len() + vars.files.len());
    for token in template {
        if token == "{files}" {
            out.extend(vars.files.iter().cloned());
            continue;
        }
        out.push(vars.substitute(token));
    }
    if let Some(first) = out.first_mut() {
        *first = resolve_program(first);
    }
    out
}

/// A language's `env` with the metavariables of its values replaced (`{memlim}`:
/// the compile step's memory in a compile, the problem's in a run), so a
/// runtime's heap follows the limit (`PYPY_GC_MAX`, `GOMEMLIMIT`,
/// `MONO_GC_PARAMS`).
pub fn expand_env(env: &[(String, String)], vars: &Vars) -> Vec<(String, String)> {
    env.iter()
        .map(|(k, v)| (k.clone(), vars.substitute(v)))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn builtin_table_has_the_contract_languages() {
        let t = LanguageTable::builtin().unwrap();
        let ids: Vec<&str> = t.ids().collect();
        assert_eq!(
            ids,
            [
                "c",
                "cpp",
                "csharp",
                "go",
                "java",
                "javascript",
                "kotlin",
                "pypy3",
                "python3",
                "rust"
            ]
        );
        // Contract §7: a `.py` file is python3 (CPython) unless pypy3 is named.
        assert_eq!(t.detect("x.py").unwrap().id, "python3");
        assert_eq!(t.detect("Main.kt").unwrap().id, "kotlin");
        assert_eq!(t.detect("main.go").unwrap().id, "go");
        assert_eq!(t.detect("a.js").unwrap().id, "javascript");
        assert_eq!(t.detect("Program.cs").unwrap().id, "csharp");
        let py = ["a.py", "b.py"];
        assert_eq!(t.detect_program(py.iter().copied()).unwrap().id, "python3");
        assert_eq!(t.detect("a.c").unwrap().id, "c");
        assert_eq!(t.detect("a.cpp").unwrap().id, "cpp");
        assert_eq!(t.detect("a.cc").unwrap().id, "cpp");
        assert_eq!(t.detect("x.py").unwrap().id, "python3");
        assert_eq!(t.detect("Main.java").unwrap().id, "java");
        assert_eq!(t.detect("m.rs").unwrap().id, "rust");
        assert!(t.detect("notes.txt").is_none());
        assert!(t.detect("c").is_none());
        assert!(t.detect(".c").is_none());
    }

    #[test]
    fn program_detection_counts_files() {
        let t = LanguageTable::builtin().unwrap();
        let files = ["validate.cpp", "validate.h", "util.cc"];
        assert_eq!(t.detect_program(files.iter().copied()).unwrap().id, "cpp");
        let files = ["a.c", "b.c", "c.cpp"];
        assert_eq!(t.detect_program(files.iter().copied()).unwrap().id, "c");
        assert!(t.detect_program(["build", "run"].iter().copied()).is_none());
    }

    #[test]
    fn main_file_rules() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(main_file(&s(&["x.py"])).unwrap(), "x.py");
        assert_eq!(
            main_file(&s(&["b.py", "Main.py", "a.py"])).unwrap(),
            "Main.py"
        );
        assert_eq!(main_file(&s(&["b.py", "a.py"])).unwrap(), "a.py");
        assert!(main_file(&[]).is_none());
    }

    #[test]
    fn expansion() {
        let vars = Vars::for_program("/box", &["Main.java".into(), "B.java".into()], 256, None);
        let t = LanguageTable::builtin().unwrap();
        let java = t.get("java").unwrap();
        let run = expand(&java.run, &vars);
        assert!(run.contains(&"-Xmx256m".to_string()), "{run:?}");
        assert_eq!(run.last().unwrap(), "Main");
        let compile = expand(java.compile.as_ref().unwrap(), &vars);
        assert!(compile.ends_with(&["Main.java".to_string(), "B.java".to_string()]));
    }

    #[test]
    fn runtime_heaps_follow_the_memory_limit() {
        let t = LanguageTable::builtin().unwrap();
        let vars = Vars::for_program("/submission", &["a.x".into()], 300, None);
        let env = |id: &str| expand_env(&t.get(id).unwrap().env, &vars);
        let has = |id: &str, k: &str, v: &str| {
            assert!(
                env(id).iter().any(|(a, b)| a == k && b == v),
                "{id}: {:?}",
                env(id)
            );
        };
        has("pypy3", "PYPY_GC_MAX", "300MB");
        has("go", "GOMEMLIMIT", "300MiB");
        has("go", "GOCACHE", "/box/.cache/go-build");
        has("csharp", "MONO_GC_PARAMS", "max-heap-size=300m");
        let run = |id: &str| expand(&t.get(id).unwrap().run, &vars);
        assert!(run("javascript").contains(&"--max-old-space-size=300".to_string()));
        assert!(run("kotlin").contains(&"-J-Xmx300m".to_string()));
        assert_eq!(
            t.get("kotlin").unwrap().main_class,
            MainClassRule::ClassFiles
        );
    }

    #[test]
    fn a_jvm_warning_is_not_the_version() {
        let out = "OpenJDK 64-Bit Server VM warning: Options -Xverify:none and -noverify were deprecated\ninfo: kotlinc-jvm 1.3.31\n";
        assert_eq!(version_line(out), "info: kotlinc-jvm 1.3.31");
        assert_eq!(version_line("\n  go version go1.19\n"), "go version go1.19");
    }

    #[test]
    fn bad_tables_are_refused() {
        assert!(LanguageTable::from_yaml("c: {name: C}").is_err());
        assert!(
            LanguageTable::from_yaml("c: {name: C, extensions: [], run: x, version: x}").is_err()
        );
        assert!(
            LanguageTable::from_yaml("c: {name: C, extensions: [c], run: x, version: x, bogus: 1}")
                .is_err()
        );
        let t = LanguageTable::from_yaml(
            "c: {name: C, extensions: [c], run: '{binary}', version: gcc --version}",
        )
        .unwrap();
        assert!(t.get("c").unwrap().compile.is_none());
    }

    #[test]
    fn missing_toolchain_is_reported_not_a_crash() {
        let t = LanguageTable::from_yaml(
            "nope: {name: Nope, extensions: [nope], run: x, version: definitely-not-installed-xyz --version}",
        )
        .unwrap();
        let err = probe(t.get("nope").unwrap()).unwrap_err();
        assert!(err.contains("definitely-not-installed-xyz"), "{err}");
        assert_eq!(
            probe_status(t.get("nope").unwrap()).unwrap_err(),
            ProbeError::Missing {
                command: "definitely-not-installed-xyz".to_string()
            }
        );
        let t = LanguageTable::from_yaml(
            "broken: {name: Broken, extensions: [b], run: x, version: false}",
        )
        .unwrap();
        assert!(matches!(
            probe_status(t.get("broken").unwrap()).unwrap_err(),
            ProbeError::Failed(_)
        ));
    }
}

//! The bundled example problems (`examples/problems/`) and their example
//! submissions, as the demo and the end-to-end tests submit them.

use std::path::{Path, PathBuf};

use crate::judge::{LanguageTable, Verdict};
use crate::package::{self, PackageError, Problem};
use crate::protocol::SubmissionFile;
use crate::verify;

/// Where the example problems are looked for, first found wins:
/// `$JUDGE_EXAMPLES_DIR`; `examples/problems` in the current directory (the
/// repository); beside the binary and up to three levels above it
/// (`target/release/judge-runner` in a checkout); `/usr/share/judge-runner/
/// examples/problems` (the Docker image).
pub fn find_examples_dir() -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(dir) = std::env::var_os("JUDGE_EXAMPLES_DIR") {
        candidates.push(PathBuf::from(dir));
    }
    candidates.push(PathBuf::from("examples/problems"));
    if let Ok(exe) = std::env::current_exe() {
        let mut dir = exe.parent().map(Path::to_path_buf);
        for _ in 0..4 {
            let Some(d) = dir else { break };
            candidates.push(d.join("examples/problems"));
            dir = d.parent().map(Path::to_path_buf);
        }
    }
    candidates.push(PathBuf::from("/usr/share/judge-runner/examples/problems"));
    candidates.into_iter().find(|d| d.is_dir())
}

/// One example submission, ready to submit.
#[derive(Debug, Clone)]
pub struct ExampleCase {
    /// The problem's folder name.
    pub problem: String,
    /// `problem/folder/name`, as the table shows it.
    pub label: String,
    /// The folder it sits in (`accepted`, `partially_accepted`, ...).
    pub folder: String,
    /// What `verify` makes of it: language, what it expects (folder or
    /// `@EXPECTED_RESULTS@` tag), whether it can be judged.
    pub entry: verify::Entry,
    pub language: String,
    pub files: Vec<SubmissionFile>,
}

impl ExampleCase {
    /// Whether `verdict` with `score` of `max_score` is what it expects (as
    /// `verify` decides: `partially_accepted` wants a partial score,
    /// `run_time_error` takes Memory Limit Exceeded too, a folder naming no
    /// verdict takes anything).
    pub fn matches(&self, verdict: &str, score: f64, max_score: f64) -> bool {
        let Some(verdict) = Verdict::ALL.into_iter().find(|v| v.as_str() == verdict) else {
            return false;
        };
        self.entry
            .expected
            .matches(verdict, score, max_score)
            .unwrap_or(true)
    }
}

/// One example problem and its submissions.
#[derive(Debug)]
pub struct ExampleProblem {
    pub name: String,
    pub dir: PathBuf,
    pub problem: Problem,
    pub cases: Vec<ExampleCase>,
}

#[derive(Debug, thiserror::Error)]
pub enum ExampleError {
    #[error("{dir}: {source}")]
    Package {
        dir: PathBuf,
        #[source]
        source: PackageError,
    },
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Read(#[from] verify::plan::ReadError),
}

/// Every problem folder under `root` (sorted by name) with its example
/// submissions, as `verify` lists them.
pub fn load_examples(
    root: &Path,
    languages: &LanguageTable,
) -> Result<Vec<ExampleProblem>, ExampleError> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .map_err(io_at(root))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("problem.yaml").is_file())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|dir| load_problem(&dir, languages))
        .collect()
}

fn load_problem(dir: &Path, languages: &LanguageTable) -> Result<ExampleProblem, ExampleError> {
    let problem = package::parse(dir).map_err(|source| ExampleError::Package {
        dir: dir.to_path_buf(),
        source,
    })?;
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut warnings = Vec::new();
    let entries = verify::plan::entries(&problem, languages, &mut warnings)?;
    for warning in warnings {
        tracing::warn!("{name}: {warning}");
    }
    let cases: Vec<ExampleCase> = entries
        .into_iter()
        .flat_map(|entry| with_pypy(entry, languages))
        .map(|entry| ExampleCase {
            problem: name.clone(),
            label: format!("{name}/{}", entry.label),
            folder: entry.folder.clone(),
            language: entry.language.clone(),
            files: entry
                .submission
                .files
                .iter()
                .map(|f| SubmissionFile::from_bytes(f.name.clone(), &f.content))
                .collect(),
            entry,
        })
        .collect();
    Ok(ExampleProblem {
        name,
        dir: dir.to_path_buf(),
        problem,
        cases,
    })
}

/// The language `.py` examples are judged in again, PyPy (Kattis' Python 3).
const PYPY: &str = "pypy3";

/// An example, and when it is an accepted Python 3 one and the table has
/// PyPy, the same source as a pypy3 submission too (labelled `... [pypy3]`):
/// `.py` means python3 (contract §7), so without this no example would show
/// PyPy.
fn with_pypy(entry: verify::Entry, languages: &LanguageTable) -> Vec<verify::Entry> {
    let twin = (entry.language == "python3"
        && entry.folder == "accepted"
        && entry.skip.is_none()
        && languages.get(PYPY).is_some())
    .then(|| {
        let mut twin = entry.clone();
        twin.label = format!("{} [{PYPY}]", entry.label);
        twin.language = PYPY.to_string();
        twin.submission.language = PYPY.to_string();
        twin
    });
    std::iter::once(entry).chain(twin).collect()
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> ExampleError {
    let path = path.to_path_buf();
    move |source| ExampleError::Io { path, source }
}

/// The package directory as `.tar.gz` bytes, what `POST /api/problems` takes.
/// Symlinks stay symlinks (packages may hold them); `submissions/` is left out:
/// judging never needs it, and it is the submitters' code.
pub fn tar_gz(dir: &Path) -> Result<Vec<u8>, ExampleError> {
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut builder = tar::Builder::new(encoder);
    builder.follow_symlinks(false);
    let entries = std::fs::read_dir(dir).map_err(io_at(dir))?;
    let mut names: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    names.sort();
    for name in names {
        if name == "submissions" {
            continue;
        }
        let path = dir.join(&name);
        let added = if path.is_dir() && !path.is_symlink() {
            builder.append_dir_all(&name, &path)
        } else {
            builder.append_path_with_name(&path, &name)
        };
        added.map_err(io_at(&path))?;
    }
    let encoder = builder.into_inner().map_err(io_at(dir))?;
    encoder.finish().map_err(io_at(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(folder: &str) -> ExampleCase {
        let entry = verify::Entry {
            label: format!("{folder}/x.c"),
            folder: folder.into(),
            expected: verify::Expected::from_folder(folder),
            tagged: false,
            language: "c".into(),
            skip: None,
            submission: crate::judge::Submission {
                language: "c".into(),
                files: vec![],
            },
        };
        ExampleCase {
            problem: "p".into(),
            label: format!("p/{folder}/x.c"),
            folder: folder.into(),
            entry,
            language: "c".into(),
            files: vec![],
        }
    }

    #[test]
    fn partially_accepted_needs_a_partial_score() {
        let case = case("partially_accepted");
        assert!(case.matches("Accepted", 50.0, 100.0));
        assert!(!case.matches("Accepted", 100.0, 100.0));
        assert!(!case.matches("Accepted", 0.0, 100.0));
    }

    #[test]
    fn the_demo_compares_as_verify_does() {
        assert!(case("run_time_error").matches("Memory Limit Exceeded", 0.0, 1.0));
        assert!(case("slow_accepted").matches("Wrong Answer", 0.0, 1.0));
        assert!(!case("accepted").matches("Failed", 0.0, 1.0));
    }
}

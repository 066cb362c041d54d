//! The bundled example problems (`examples/problems/`) and their example
//! submissions, as the demo and the end-to-end tests submit them.

use std::path::{Path, PathBuf};

use crate::judge::{LanguageTable, Verdict};
use crate::package::{self, PackageError, Problem};
use crate::protocol::SubmissionFile;

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
    pub expected: Verdict,
    pub language: String,
    pub files: Vec<SubmissionFile>,
}

impl ExampleCase {
    /// Whether `verdict` with `score` of `max_score` is what the folder promises
    /// (`partially_accepted`: Accepted with a score strictly between 0 and max).
    pub fn matches(&self, verdict: &str, score: f64, max_score: f64) -> bool {
        if verdict != self.expected.as_str() {
            return false;
        }
        match self.folder.as_str() {
            "partially_accepted" => score > 0.0 && score < max_score,
            "accepted" => score == max_score,
            _ => true,
        }
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
    #[error("{label}: {why}")]
    Unusable { label: String, why: String },
}

/// Every problem folder under `root` (sorted by name) with its example
/// submissions; submissions in folders that name no verdict are left out.
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
    let mut cases = Vec::new();
    for sub in &problem.submissions {
        let Some(expected) = Verdict::from_folder(&sub.expected) else {
            continue;
        };
        let label = format!("{name}/{}/{}", sub.expected, sub.name);
        let unusable = |why: &str| ExampleError::Unusable {
            label: label.clone(),
            why: why.to_string(),
        };
        let first = sub
            .files
            .first()
            .and_then(|f| f.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| unusable("no source file"))?;
        let language = languages
            .detect(&first)
            .ok_or_else(|| unusable("no configured language for its extension"))?
            .id
            .clone();
        let files = sub
            .files
            .iter()
            .map(|path| {
                let bytes = std::fs::read(path).map_err(io_at(path))?;
                let file_name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                Ok(SubmissionFile::from_bytes(file_name, &bytes))
            })
            .collect::<Result<Vec<_>, ExampleError>>()?;
        cases.push(ExampleCase {
            problem: name.clone(),
            label,
            folder: sub.expected.clone(),
            expected,
            language,
            files,
        });
    }
    Ok(ExampleProblem {
        name,
        dir: dir.to_path_buf(),
        problem,
        cases,
    })
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

    #[test]
    fn partially_accepted_needs_a_partial_score() {
        let case = ExampleCase {
            problem: "p".into(),
            label: "p/partially_accepted/x".into(),
            folder: "partially_accepted".into(),
            expected: Verdict::Accepted,
            language: "c".into(),
            files: vec![],
        };
        assert!(case.matches("Accepted", 50.0, 100.0));
        assert!(!case.matches("Accepted", 100.0, 100.0));
        assert!(!case.matches("Wrong Answer", 50.0, 100.0));
    }
}

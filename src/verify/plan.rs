//! Which example submissions a package holds and what each must get: one
//! [`Entry`] per file or directory under `submissions/<folder>/`.

use std::path::Path;

use super::expect::Expected;
use crate::judge::{LanguageTable, SourceFile, Submission};
use crate::package::Problem;

/// One example submission, read and ready to judge.
#[derive(Debug, Clone)]
pub struct Entry {
    /// `folder/name`, as tables and reports show it.
    pub label: String,
    /// The folder it sits in (`accepted`, `slow_accepted`, ...).
    pub folder: String,
    /// What it must get: the folder's verdict, or its `@EXPECTED_RESULTS@` tag.
    pub expected: Expected,
    /// Whether `expected` came from a tag.
    pub tagged: bool,
    /// The configured language of its sources; when none claims them, the first
    /// file's extension (the entry is then skipped).
    pub language: String,
    /// `None` when it can be judged here; else why not (the language is not
    /// configured, or its toolchain is not on this host).
    pub skip: Option<String>,
    pub submission: Submission,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot read {path}: {source}")]
pub struct ReadError {
    pub path: std::path::PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Every example submission of `problem`, by folder then name (the package's
/// order). A file a tag names nothing known in is reported in `warnings`.
pub fn entries(
    problem: &Problem,
    languages: &LanguageTable,
    warnings: &mut Vec<String>,
) -> Result<Vec<Entry>, ReadError> {
    let mut out = Vec::new();
    for sub in &problem.submissions {
        let label = format!("{}/{}", sub.expected, sub.name);
        let mut files = Vec::with_capacity(sub.files.len());
        for path in &sub.files {
            let content = std::fs::read(path).map_err(|source| ReadError {
                path: path.clone(),
                source,
            })?;
            files.push(SourceFile {
                name: file_name(path),
                content,
            });
        }
        let names = files.iter().map(|f| f.name.as_str());
        let (language, skip) = match languages.detect_program(names) {
            Some(l) => (l.id.clone(), None),
            None => {
                let ext = files
                    .first()
                    .and_then(|f| f.name.rsplit_once('.'))
                    .map_or_else(|| "?".to_string(), |(_, ext)| ext.to_string());
                let why = format!("no configured language for .{ext}");
                (ext, Some(why))
            }
        };
        let (expected, tagged) =
            match Expected::from_tag(files.iter().map(|f| f.content.as_slice())) {
                Some((expected, unknown)) => {
                    if !unknown.is_empty() {
                        warnings.push(format!(
                            "{label}: @EXPECTED_RESULTS@ names unknown results {}",
                            unknown.join(", ")
                        ));
                    }
                    (expected, true)
                }
                None => (Expected::from_folder(&sub.expected), false),
            };
        out.push(Entry {
            label,
            folder: sub.expected.clone(),
            expected,
            tagged,
            submission: Submission {
                language: language.clone(),
                files,
            },
            language,
            skip,
        });
    }
    Ok(out)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Whether `label` (`folder/name`) matches `glob`: `*` any run of characters
/// (`/` included, so `*.py` and `accepted/*` both work), `?` one character.
pub fn glob_matches(glob: &str, label: &str) -> bool {
    let (g, l): (Vec<char>, Vec<char>) = (glob.chars().collect(), label.chars().collect());
    // Iterative wildcard matching with one backtrack point (the last `*`).
    let (mut gi, mut li) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while li < l.len() {
        if gi < g.len() && (g[gi] == '?' || g[gi] == l[li]) {
            gi += 1;
            li += 1;
        } else if gi < g.len() && g[gi] == '*' {
            star = Some((gi, li));
            gi += 1;
        } else if let Some((sg, sl)) = star {
            gi = sg + 1;
            li = sl + 1;
            star = Some((sg, sl + 1));
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::glob_matches;

    #[test]
    fn globs_match_folder_and_name() {
        assert!(glob_matches("accepted/*", "accepted/add.c"));
        assert!(glob_matches("*.py", "wrong_answer/x.py"));
        assert!(glob_matches("*/add.?", "accepted/add.c"));
        assert!(glob_matches("accepted/add.c", "accepted/add.c"));
        assert!(!glob_matches("accepted/*", "wrong_answer/add.c"));
        assert!(!glob_matches("*.py", "accepted/add.c"));
        assert!(glob_matches("*", ""));
    }
}

//! Checking an uploaded package before it is stored: the one seam between the
//! Server and the package parser. An upload is stored only when `package::load`
//! parses it as a problem package, so a Runner never claims a job whose package
//! cannot be judged.

use std::path::Path;

use crate::package::{self, PackageError, ProblemKind, UnpackLimits};

/// What the Server learns of a valid package.
#[derive(Debug, Clone, PartialEq)]
pub struct PackageSummary {
    pub name: String,
    pub kind: ProblemKind,
    pub interactive: bool,
    pub tests: usize,
    /// The package's own time limit, when it names one.
    pub time_limit: Option<f64>,
}

/// Is the `.tar.gz` at `path` a problem package? `Err` says what is wrong, in
/// words an uploader can act on, naming the upload as `sent` (what the client
/// sent: "the uploaded package", "the `package` part") and files by their path
/// inside the package, never by where the Server keeps them (CONTRACT §4).
/// Blocking: call it from `spawn_blocking`.
pub fn validate(path: &Path, sent: &str) -> Result<PackageSummary, String> {
    let loaded =
        package::load(path, &UnpackLimits::default()).map_err(|e| describe(&e, path, sent))?;
    let problem = &loaded.problem;
    Ok(PackageSummary {
        name: problem.name.clone(),
        kind: problem.kind,
        interactive: problem.interactive,
        tests: problem.cases().len(),
        time_limit: problem.limits.time_limit,
    })
}

/// `err` in the uploader's words: the temp file is `sent`, a temporary
/// directory is not named at all.
fn describe(err: &PackageError, upload: &Path, sent: &str) -> String {
    let message = match err {
        PackageError::Invalid { path, reason } if path == upload => format!("{sent}: {reason}"),
        PackageError::Invalid { path, reason } if path.is_absolute() => {
            format!("{sent}: {reason}")
        }
        PackageError::Unsafe { refusal, .. } => format!("refused to unpack {sent}: {refusal}"),
        PackageError::CorruptArchive { detail, .. } => format!("cannot read {sent}: {detail}"),
        PackageError::Io { action, source, .. } => {
            format!("the Server could not {action} a directory to check {sent}: {source}")
        }
        other => other.to_string(),
    };
    scrub(&message, upload, sent)
}

/// Belt and braces: no path of the Server's own disk survives in a message.
fn scrub(message: &str, upload: &Path, sent: &str) -> String {
    let mut out = message.replace(&upload.display().to_string(), sent);
    let mut places = vec![std::env::temp_dir()];
    if let Some(dir) = upload.parent() {
        places.push(dir.to_path_buf());
    }
    for place in places {
        let place = place.display().to_string();
        if place.len() > 1 {
            out = out.replace(&place, "…");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_upload_is_named_as_the_client_sent_it() {
        let dir = tempfile::tempdir().unwrap();
        let upload = dir.path().join(".upload-XYZ");
        std::fs::write(&upload, b"not a package").unwrap();
        let message = validate(&upload, "the uploaded package").unwrap_err();
        assert!(message.starts_with("the uploaded package: "), "{message}");
        assert!(
            message.contains("neither a directory nor a .tar.gz"),
            "{message}"
        );
        assert!(
            !message.contains(&dir.path().display().to_string()),
            "{message}"
        );
        assert!(!message.contains(".upload-XYZ"), "{message}");
    }
}

//! Checking an uploaded package before it is stored: the one seam between the
//! Server and the package parser. An upload is stored only when `package::load`
//! parses it as a problem package, so a Runner never claims a job whose package
//! cannot be judged.

use std::path::Path;

use crate::package::{self, ProblemKind, UnpackLimits};

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
/// words an uploader can act on. Blocking: call it from `spawn_blocking`.
pub fn validate(path: &Path) -> Result<PackageSummary, String> {
    let loaded = package::load(path, &UnpackLimits::default()).map_err(|e| e.to_string())?;
    let problem = &loaded.problem;
    Ok(PackageSummary {
        name: problem.name.clone(),
        kind: problem.kind,
        interactive: problem.interactive,
        tests: problem.cases().len(),
        time_limit: problem.limits.time_limit,
    })
}

//! Problem packages: fetch (SHA-256 checked while streaming), unpack safely and
//! atomically into the shared cache, parse the Kattis/ICPC format into a `Problem`.
//!
//! One job per file: `fetch` downloads, `hash` verifies, `unpack` extracts,
//! `cache` keeps `packages-cache/<sha256>/`, `parse` reads the format, `load` opens
//! a local directory or `.tar.gz`. Imports nothing of ours but `units`-free std
//! and crates: `judge`, `runner` and `server` build on it.

pub mod cache;
pub mod error;
mod fetch;
mod hash;
mod load;
mod parse;
pub mod problem;
mod unpack;

pub use cache::{Cache, CacheEntry, FetchPolicy};
pub use error::{FetchFailure, PackageError, UnpackRefusal};
pub(crate) use fetch::describe as describe_http_error;
pub use fetch::{ServerKey, ServerKeyError, fetch_archive};
pub use hash::{is_sha256_hex, sha256_file};
pub use load::{LoadedPackage, load};
pub use parse::{find_problem_root, parse};
pub use problem::{
    CustomValidator, DefaultValidatorFlags, ExampleSubmission, FormatVersion, Grading, IncludeFile,
    OnReject, OutputValidator, Problem, ProblemKind, ProblemLimits, ScoreAggregation, TestCase,
    TestGroup, TestItem, ValidatorFlagError, VerdictAggregation,
};
pub use unpack::{UnpackLimits, UnpackSummary, unpack};

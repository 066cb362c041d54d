//! Problem packages: fetch (SHA-256 checked while streaming), unpack safely and
//! atomically into the shared cache, parse the Kattis/ICPC format into a `Problem`.

pub mod problem;

pub use problem::{
    CustomValidator, DefaultValidatorFlags, ExampleSubmission, FormatVersion, Grading, OnReject,
    OutputValidator, Problem, ProblemKind, ProblemLimits, ScoreAggregation, TestCase, TestGroup,
    TestItem, VerdictAggregation,
};

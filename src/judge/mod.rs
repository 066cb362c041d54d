//! Judging one submission: languages, compile, run tests, validate, score.
//! Talks to the sandbox only through `sandbox`'s public API; uses `package` types.

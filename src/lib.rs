//! judge-runner: a Runner daemon that evaluates submissions in sandboxes, the Server
//! it claims jobs from, and the tools around them (`../shared/CONTRACT.md`).
//!
//! # Modules and the dependency rule
//!
//! | module | its one job |
//! |---|---|
//! | [`sandbox`] | run one program once: namespaces, cgroup, seccomp, limits, report |
//! | [`package`] | fetch, verify, unpack, cache and parse problem packages |
//! | [`judge`] | languages, compile, run tests, validate, score |
//! | [`protocol`] | wire types shared by the Server and the Runner; no I/O |
//! | [`server`] | `serve`: jobs, leases, results over HTTP on SQLite/PostgreSQL |
//! | [`runner`] | `daemon`: claim, evaluate, renew, report |
//! | [`forward`] | `forward`: claim like a daemon, judge at another Server under the same lease rules |
//! | [`verify`] | `verify`: judge a package's example submissions in parallel, compare with their folders |
//! | [`units`] | sizes and durations as written on the command line (a leaf) |
//! | [`cfloat`] | floats as C's `strtod` reads them: validator tokens and tolerances (a leaf) |
//!
//! Data flows one way, and imports follow it:
//!
//! - `runner → judge → sandbox`; `runner → package`; `judge → package` (types only);
//! - `verify → judge`, `verify → package` (beside `runner`; neither imports the other);
//! - `runner → protocol ← server`; `server → package` (to refuse invalid uploads);
//! - `forward → runner`, `forward → package`, `forward → protocol` (beside `runner`;
//!   never `server`, `judge` or `sandbox`; only `commands` and `demo` import it);
//! - `server` never imports `runner`, `judge` or `sandbox`;
//! - `sandbox` imports no other module of ours; `protocol` only `units` at most;
//!   `units` and `cfloat` import nothing of ours;
//! - `cli`, `commands` and `demo` sit on top of everything (the demo lists, compares
//!   and tabulates with `verify`); nothing imports them.

pub mod cfloat;
pub mod cli;
pub mod commands;
pub mod demo;
pub mod forward;
pub mod judge;
pub mod package;
pub mod protocol;
pub mod runner;
pub mod sandbox;
pub mod server;
pub mod units;
pub mod verify;
pub mod version;

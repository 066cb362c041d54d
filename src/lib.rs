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

//!
//! # Where things are
//!
//! The rooms, top to bottom, with the file to open for the usual changes:
//!
//! ```text
//! main.rs, cli.rs           the command line (flags exactly as the contract)
//! commands/<command>.rs     one entry per subcommand: flags in, exit status out
//! demo/                     `demo`: a Server and a Runner on one machine
//! runner/                   `daemon`: mod.rs (start, slots, drain), slot.rs (claim loop),
//!                           job.rs (one claim: fetch, judge, report), lease.rs, client.rs (HTTP)
//! verify/                   `verify`: plan.rs (which submissions), pool.rs (slots), table.rs
//! judge/                    mod.rs (Judge::judge), language.rs + languages.yaml (the language
//!                           table), compile.rs, cases.rs / interactive.rs (running tests),
//!                           validator.rs + default_validator/ (checking output), grading.rs
//! package/                  fetch.rs, cache/, unpack/ (archives), parse/ + problem.rs (the model)
//! protocol/                 wire types (mod.rs) and the contract's strings (codes.rs)
//! server/                   routes/ (handlers by caller, routes/mod.rs the router), db/ (all
//!                           SQL: claim.rs, jobs.rs, trials.rs, lease.rs the fence), auth.rs,
//!                           state.rs (Config, AppState), webhooks.rs, reaper.rs, migrations/,
//!                           console/ (the HTML console under /console/: session.rs, pages.rs,
//!                           templates/, assets/)
//! sandbox/                  mod.rs (run), plan.rs (Plan, Limits), slot.rs (SandboxSlot),
//!                           spawn/ (the supervisor), child.rs (init's and the program's recipe),
//!                           mount.rs, net.rs, rlimit.rs, creds.rs, seccomp/ (one per concern),
//!                           cgroup/ (v1.rs, v2.rs behind mod.rs), launcher/, sys/ (all unsafe)
//! ```
//!
//! - **A new language**: an entry in `judge/languages.yaml` (compile and run
//!   commands, version probe); a language needing more than commands gets a
//!   module beside `judge/java.rs`. The Server accepts it once `serve
//!   --languages` names it.
//! - **A new route**: a handler in `server/routes/<caller>.rs` (its
//!   `#[utoipa::path]` attribute feeds the OpenAPI document), its line in
//!   `server/routes/mod.rs`'s router, wire types in `protocol/`, error codes in
//!   `protocol/codes.rs`, SQL as one function per statement in `server/db/`.
//! - **A new cgroup controller**: the run's limits are `cgroup::CgroupLimits`
//!   (`sandbox/cgroup/mod.rs`), set per version in `cgroup/v1.rs` (one hierarchy
//!   per controller) and `cgroup/v2.rs` (`WANTED` controllers, enabled for the
//!   run cgroup); what a run measures comes back as `Measured`.

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

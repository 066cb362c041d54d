//! The Server (`judge-runner serve`): jobs, leases, fencing, reaper, results and
//! trials over HTTP, on SQLite or PostgreSQL. Never imports `runner`, `judge` or
//! `sandbox`.

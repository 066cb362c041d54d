//! The Runner daemon (`judge-runner daemon`): claims jobs, evaluates them through
//! `judge`, renews leases, attaches details and log, reports the Result.

//! Prometheus counters of this `serve` process, and the text exposition of
//! `GET /metrics`. Counters are per process (each server of a shared database
//! exposes its own; Prometheus sums them). Gauges (jobs by state) come from the
//! database and so are the same on every server.
//!
//! Trials are counted apart (`judge_trial_*`) so no job count ever includes one.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::protocol::JobState;

#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn inc(&self) {
        self.add(1);
    }
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The counters of one kind of work (jobs or trials).
#[derive(Debug, Default)]
pub struct WorkCounters {
    pub claims: Counter,
    pub leases_expired: Counter,
    pub refunds: Counter,
    pub releases: Counter,
    pub stale_dropped: Counter,
    pub deliveries_exhausted: Counter,
}

/// `judge_webhook_deliveries_total{outcome}`.
#[derive(Debug, Default)]
pub struct WebhookCounters {
    /// Answered 2xx.
    pub delivered: Counter,
    /// Any other answer, or none: retried later.
    pub failed: Counter,
    /// Failed with no retry left inside the 24 h window.
    pub gave_up: Counter,
}

#[derive(Debug, Default)]
pub struct Metrics {
    pub jobs: WorkCounters,
    pub trials: WorkCounters,
    pub webhooks: WebhookCounters,
}

/// One counter family: name, help, and how to read it from a `WorkCounters`.
struct Family {
    name: &'static str,
    help: &'static str,
    read: fn(&WorkCounters) -> u64,
}

const FAMILIES: [Family; 6] = [
    Family {
        name: "claims_total",
        help: "claims answered with work",
        read: |c| c.claims.get(),
    },
    Family {
        name: "leases_expired_total",
        help: "Running leases the reaper found expired",
        read: |c| c.leases_expired.get(),
    },
    Family {
        name: "refunds_total",
        help: "deliveries given back for claims nobody was heard from about",
        read: |c| c.refunds.get(),
    },
    Family {
        name: "releases_total",
        help: "work handed back by a stopping Runner",
        read: |c| c.releases.get(),
    },
    Family {
        name: "stale_result_dropped_total",
        help: "lease-bearing calls refused with lease.lost",
        read: |c| c.stale_dropped.get(),
    },
    Family {
        name: "deliveries_exhausted_total",
        help: "work failed with deliveries.exhausted",
        read: |c| c.deliveries_exhausted.get(),
    },
];

impl Metrics {
    /// The Prometheus text format: counters, then the state gauges read from the
    /// database (`jobs` and `trials`: counts per state, every state present).
    pub fn render(&self, jobs: &[(JobState, i64)], trials: &[(JobState, i64)]) -> String {
        let mut out = String::new();
        for (prefix, counters) in [("judge_", &self.jobs), ("judge_trial_", &self.trials)] {
            for family in &FAMILIES {
                let name = format!("{prefix}{}", family.name);
                let _ = writeln!(out, "# HELP {name} {}", family.help);
                let _ = writeln!(out, "# TYPE {name} counter");
                let _ = writeln!(out, "{name} {}", (family.read)(counters));
            }
        }
        render_states(&mut out, "judge_jobs", "evaluation jobs by state", jobs);
        render_states(&mut out, "judge_trials", "trials by state", trials);
        out
    }
}

impl Metrics {
    /// The webhook families: deliveries of this process by outcome, and the
    /// outbox rows still to deliver (from the database).
    pub fn render_webhooks(&self, pending: i64) -> String {
        let mut out = String::new();
        let name = "judge_webhook_deliveries_total";
        let _ = writeln!(
            out,
            "# HELP {name} webhook deliveries tried by this process, by outcome"
        );
        let _ = writeln!(out, "# TYPE {name} counter");
        let w = &self.webhooks;
        for (outcome, c) in [
            ("delivered", &w.delivered),
            ("failed", &w.failed),
            ("gave_up", &w.gave_up),
        ] {
            let _ = writeln!(out, "{name}{{outcome=\"{outcome}\"}} {}", c.get());
        }
        let name = "judge_webhook_outbox_pending";
        let _ = writeln!(
            out,
            "# HELP {name} attempt.ended events neither delivered nor given up"
        );
        let _ = writeln!(out, "# TYPE {name} gauge");
        let _ = writeln!(out, "{name} {pending}");
        out
    }
}

fn render_states(out: &mut String, name: &str, help: &str, counts: &[(JobState, i64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
    for state in JobState::ALL {
        let n = counts
            .iter()
            .find(|(s, _)| *s == state)
            .map_or(0, |(_, n)| *n);
        let _ = writeln!(out, "{name}{{state=\"{state}\"}} {n}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family_and_state() {
        let m = Metrics::default();
        m.jobs.stale_dropped.add(3);
        m.trials.claims.inc();
        let text = m.render(&[(JobState::Queued, 5)], &[]);
        assert!(text.contains("judge_stale_result_dropped_total 3\n"));
        assert!(text.contains("judge_trial_claims_total 1\n"));
        assert!(text.contains("judge_claims_total 0\n"));
        assert!(text.contains("judge_jobs{state=\"Queued\"} 5\n"));
        assert!(text.contains("judge_jobs{state=\"Superseded\"} 0\n"));
        assert!(text.contains("judge_trials{state=\"Running\"} 0\n"));
    }
}

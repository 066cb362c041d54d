//! The forwarder's own counters, appended to the Runner's (`judge_runner_*`,
//! which a forwarder keeps like a daemon: claims, renewals, leases lost, jobs
//! done by verdict, failures by reason, releases) on `--metrics ADDR`.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::runner::metrics::family;

#[derive(Debug, Default)]
pub struct ForwardCounters {
    created: AtomicU64,
    replayed: AtomicU64,
    unavailable: AtomicU64,
    webhooks: AtomicU64,
}

impl ForwardCounters {
    /// A job reached the service: a new remote submission, or (`replayed`) the
    /// one an earlier delivery made.
    pub fn submitted(&self, replayed: bool) {
        let counter = if replayed {
            &self.replayed
        } else {
            &self.created
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A call to the service found it unavailable.
    pub fn unavailable(&self) {
        self.unavailable.fetch_add(1, Ordering::Relaxed);
    }

    /// The webhook listener's count, read when rendering.
    pub fn set_webhooks(&self, received: u64) {
        self.webhooks.store(received, Ordering::Relaxed);
    }

    /// Prometheus text of these counters.
    pub fn render(&self) -> String {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed).to_string();
        let mut out = String::new();
        family(
            &mut out,
            "judge_forward_submissions_total",
            "counter",
            "Jobs that reached the judging service: a new remote submission (created) or the one an earlier delivery made (replayed)",
            &[
                ("{outcome=\"created\"}".to_string(), load(&self.created)),
                ("{outcome=\"replayed\"}".to_string(), load(&self.replayed)),
            ],
        );
        family(
            &mut out,
            "judge_forward_service_unavailable_total",
            "counter",
            "Calls that found the judging service unavailable (no answer, 5xx, an answer not as promised)",
            &[(String::new(), load(&self.unavailable))],
        );
        family(
            &mut out,
            "judge_forward_webhooks_total",
            "counter",
            "attempt.ended events received from the judging service",
            &[(String::new(), load(&self.webhooks))],
        );
        out
    }
}

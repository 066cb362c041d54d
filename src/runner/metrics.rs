//! The daemon's counters, as Prometheus text on `--metrics ADDR` (`GET /metrics`).
//!
//! Hand-written rather than a metrics crate: a dozen counters, two labelled
//! families, one text format; a dependency would not make it shorter.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Every counter of a daemon; shared by its slots.
#[derive(Debug, Default)]
pub struct Metrics {
    claims: AtomicU64,
    trials_done: AtomicU64,
    tests_run: AtomicU64,
    lease_renewals: AtomicU64,
    progress_reports: AtomicU64,
    leases_lost: AtomicU64,
    releases: AtomicU64,
    server_unreachable: AtomicU64,
    slot_pauses: AtomicU64,
    busy_slots: AtomicU64,
    /// Wall time of judging (compile + every test + validation), microseconds.
    judge_micros: AtomicU64,
    /// Wall time of the submission's own test runs, microseconds.
    program_micros: AtomicU64,
    jobs_by_verdict: Mutex<BTreeMap<String, u64>>,
    failures_by_reason: Mutex<BTreeMap<String, u64>>,
}

/// One evaluation's time split, for the overhead counters.
#[derive(Debug, Clone, Copy, Default)]
pub struct JudgeTime {
    pub judging: Duration,
    pub programs: Duration,
}

impl Metrics {
    pub fn claimed(&self) {
        self.claims.fetch_add(1, Ordering::Relaxed);
    }
    pub fn test_run(&self) {
        self.tests_run.fetch_add(1, Ordering::Relaxed);
    }
    pub fn lease_renewed(&self) {
        self.lease_renewals.fetch_add(1, Ordering::Relaxed);
    }
    pub fn progress_reported(&self) {
        self.progress_reports.fetch_add(1, Ordering::Relaxed);
    }
    pub fn lease_lost(&self) {
        self.leases_lost.fetch_add(1, Ordering::Relaxed);
    }
    pub fn released(&self) {
        self.releases.fetch_add(1, Ordering::Relaxed);
    }
    pub fn unreachable(&self) {
        self.server_unreachable.fetch_add(1, Ordering::Relaxed);
    }
    pub fn paused(&self) {
        self.slot_pauses.fetch_add(1, Ordering::Relaxed);
    }
    pub fn trial_done(&self) {
        self.trials_done.fetch_add(1, Ordering::Relaxed);
    }

    /// A slot starts (`true`) or stops (`false`) holding work.
    pub fn busy(&self, busy: bool) {
        if busy {
            self.busy_slots.fetch_add(1, Ordering::Relaxed);
        } else {
            self.busy_slots.fetch_sub(1, Ordering::Relaxed);
        }
    }

    pub fn judged(&self, time: JudgeTime) {
        let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.judge_micros
            .fetch_add(micros(time.judging), Ordering::Relaxed);
        self.program_micros
            .fetch_add(micros(time.programs), Ordering::Relaxed);
    }

    /// A job's Result was accepted by the Server.
    pub fn job_done(&self, verdict: &str) {
        bump(&self.jobs_by_verdict, verdict);
    }

    /// An infrastructure failure was reported to `/failure`.
    pub fn failed(&self, reason: &str) {
        bump(&self.failures_by_reason, reason);
    }

    pub fn tests_run(&self) -> u64 {
        self.tests_run.load(Ordering::Relaxed)
    }

    pub fn lease_renewals(&self) -> u64 {
        self.lease_renewals.load(Ordering::Relaxed)
    }

    pub fn leases_lost(&self) -> u64 {
        self.leases_lost.load(Ordering::Relaxed)
    }

    /// Prometheus text exposition format 0.0.4.
    pub fn render(&self, slots: usize) -> String {
        let mut out = String::new();
        family(
            &mut out,
            "judge_runner_jobs_done_total",
            "counter",
            "Job Results the Server accepted, by verdict",
            &labelled(&self.jobs_by_verdict, "verdict"),
        );
        family(
            &mut out,
            "judge_runner_job_failures_total",
            "counter",
            "Infrastructure failures reported to /failure, by reason",
            &labelled(&self.failures_by_reason, "reason"),
        );
        let busy = (
            "judge_runner_busy_slots",
            "gauge",
            "Slots holding work right now",
            self.busy_slots.load(Ordering::Relaxed).to_string(),
        );
        let plain = self
            .event_counters()
            .into_iter()
            .chain(self.time_counters());
        for (name, kind, help, value) in plain.chain([busy]) {
            family(&mut out, name, kind, help, &[(String::new(), value)]);
        }
        family(
            &mut out,
            "judge_runner_slots",
            "gauge",
            "Slots of this daemon",
            &[(String::new(), slots.to_string())],
        );
        out
    }

    /// The counters of things that happened, one sample each.
    fn event_counters(&self) -> [Plain; 9] {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        [
            (
                "judge_runner_claims_total",
                "counter",
                "Jobs and trials claimed",
                load(&self.claims).to_string(),
            ),
            (
                "judge_runner_trials_done_total",
                "counter",
                "Trial results the Server accepted",
                load(&self.trials_done).to_string(),
            ),
            (
                "judge_runner_tests_run_total",
                "counter",
                "Test cases run",
                load(&self.tests_run).to_string(),
            ),
            (
                "judge_runner_lease_renewals_total",
                "counter",
                "Leases renewed, by /lease or /progress",
                load(&self.lease_renewals).to_string(),
            ),
            (
                "judge_runner_progress_reports_total",
                "counter",
                "Progress calls the Server accepted",
                load(&self.progress_reports).to_string(),
            ),
            (
                "judge_runner_leases_lost_total",
                "counter",
                "Work dropped because the Server answered lease.lost",
                load(&self.leases_lost).to_string(),
            ),
            (
                "judge_runner_releases_total",
                "counter",
                "Work handed back because the daemon was stopping",
                load(&self.releases).to_string(),
            ),
            (
                "judge_runner_server_unreachable_total",
                "counter",
                "Calls that found the Server unreachable",
                load(&self.server_unreachable).to_string(),
            ),
            (
                "judge_runner_slot_pauses_total",
                "counter",
                "Times a slot stopped claiming after sandbox failures in a row",
                load(&self.slot_pauses).to_string(),
            ),
        ]
    }

    /// Where judging's wall time went, in seconds.
    fn time_counters(&self) -> [Plain; 3] {
        let secs = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64 / 1e6;
        [
            (
                "judge_runner_judge_seconds_total",
                "counter",
                "Wall time spent judging (compile, tests, validation)",
                format!("{:.6}", secs(&self.judge_micros)),
            ),
            (
                "judge_runner_program_seconds_total",
                "counter",
                "Wall time of the submissions' own test runs",
                format!("{:.6}", secs(&self.program_micros)),
            ),
            (
                "judge_runner_sandbox_overhead_seconds_total",
                "counter",
                "Judging wall time outside the submissions' test runs (sandbox set-up, compile, validation)",
                format!(
                    "{:.6}",
                    (secs(&self.judge_micros) - secs(&self.program_micros)).max(0.0)
                ),
            ),
        ]
    }
}

/// A metric family without labels: name, type, help, its one value.
type Plain = (&'static str, &'static str, &'static str, String);

fn bump(map: &Mutex<BTreeMap<String, u64>>, key: &str) {
    let mut map = map.lock().unwrap_or_else(PoisonError::into_inner);
    *map.entry(key.to_string()).or_default() += 1;
}

fn labelled(map: &Mutex<BTreeMap<String, u64>>, label: &str) -> Vec<(String, String)> {
    let map = map.lock().unwrap_or_else(PoisonError::into_inner);
    map.iter()
        .map(|(k, v)| (format!("{{{label}=\"{}\"}}", escape(k)), v.to_string()))
        .collect()
}

/// One metric family in Prometheus text: `# HELP`, `# TYPE`, its samples (`(labels, value)`).
pub fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, String)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{labels} {value}");
    }
}

/// Label values escape `\`, `"` and newlines.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Serves `GET /metrics` on `addr` until `stop`; answers the bound address.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    slots: usize,
    stop: CancellationToken,
) -> std::io::Result<SocketAddr> {
    serve_text(addr, move || metrics.render(slots), stop).await
}

/// Serves `GET /metrics` answering `render()` (Prometheus text) on `addr` until
/// `stop` (the forwarder appends its own counters to the daemon's).
pub async fn serve_text(
    addr: SocketAddr,
    render: impl Fn() -> String + Clone + Send + Sync + 'static,
    stop: CancellationToken,
) -> std::io::Result<SocketAddr> {
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let render = render.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    render(),
                )
            }
        }),
    );
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "metrics endpoint failed");
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = Metrics::default();
        m.job_done("Accepted");
        m.job_done("Accepted");
        m.job_done("Wrong Answer");
        m.failed("package.checksum_mismatch");
        m.test_run();
        m.lease_renewed();
        m.judged(JudgeTime {
            judging: Duration::from_millis(1500),
            programs: Duration::from_millis(1000),
        });
        let text = m.render(3);
        assert!(
            text.contains("judge_runner_jobs_done_total{verdict=\"Accepted\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("judge_runner_jobs_done_total{verdict=\"Wrong Answer\"} 1\n"));
        assert!(
            text.contains(
                "judge_runner_job_failures_total{reason=\"package.checksum_mismatch\"} 1\n"
            )
        );
        assert!(text.contains("judge_runner_tests_run_total 1\n"));
        assert!(text.contains("judge_runner_lease_renewals_total 1\n"));
        assert!(text.contains("judge_runner_sandbox_overhead_seconds_total 0.500000\n"));
        assert!(text.contains("judge_runner_slots 3\n"));
        assert!(text.contains("# TYPE judge_runner_leases_lost_total counter\n"));
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}

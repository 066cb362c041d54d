//! One slot: a loop that claims work (long poll), evaluates it on its own CPU
//! and box id, and reports; it backs off with jitter while the Server is down
//! or has nothing to give.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::judge::Judge;
use crate::package::Cache;
use crate::protocol::ClaimRequest;
use crate::protocol::codes::error::LANGUAGE_UNKNOWN;

use super::backoff::Backoff;
use super::client::{Client, ClientError};
use super::job::{self, JobContext, ProblemMemo};
use super::metrics::Metrics;
use super::shutdown::Shutdown;

/// What every slot of a daemon shares.
pub(crate) struct Shared {
    pub client: Client,
    pub cache: Cache,
    pub metrics: Arc<Metrics>,
    pub languages: Vec<String>,
    pub claim_wait: Duration,
    pub problems: ProblemMemo,
}

/// Sandbox failures in a row after which a slot pauses claiming.
const SANDBOX_FAILURES_IN_A_ROW: u32 = 3;

pub(crate) struct RunnerSlot {
    pub index: usize,
    pub judge: Arc<Judge>,
    pub shared: Arc<Shared>,
}

impl RunnerSlot {
    pub fn new(index: usize, judge: Arc<Judge>, shared: Arc<Shared>) -> RunnerSlot {
        RunnerSlot {
            index,
            judge,
            shared,
        }
    }

    /// What a job evaluated on this slot needs of it.
    fn job_context(&self) -> JobContext<'_> {
        JobContext {
            slot: self.index,
            judge: &self.judge,
            client: &self.shared.client,
            cache: &self.shared.cache,
            metrics: &self.shared.metrics,
            problems: &self.shared.problems,
        }
    }

    /// Claims and evaluates until the daemon drains.
    pub async fn run(self, shutdown: Shutdown) {
        let request = ClaimRequest {
            languages: self.shared.languages.clone(),
            wait_seconds: Some(self.shared.claim_wait.as_secs()),
        };
        // Server down: from 0.5 s up to 30 s. Nothing to do although the Server
        // did not wait (an old Server, or a refused wait): from 0.2 s up to 5 s.
        let mut down = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
        let mut idle = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
        // The breaker: after SANDBOX_FAILURES_IN_A_ROW jobs that failed in the
        // sandbox, this host is the likelier culprit than the jobs; each further
        // claim would burn one of some job's deliveries. Claims pause, from 30 s
        // up to 10 min, until a job ends any other way.
        let mut sick = Backoff::new(Duration::from_secs(30), Duration::from_secs(600));
        let mut sandbox_failures = 0u32;
        let box_id = self.judge.config().box_id;
        tracing::debug!(slot = self.index, box_id, cpu = ?self.judge.config().cpu, "slot started");
        loop {
            let asked = Instant::now();
            // Not sent until first polled: a daemon already draining sends none.
            let sent = AtomicBool::new(false);
            let claim = async {
                sent.store(true, Ordering::Relaxed);
                self.shared.client.claim(&request).await
            };
            tokio::pin!(claim);
            let claimed = tokio::select! {
                biased;
                () = shutdown.draining().cancelled() => {
                    if !sent.load(Ordering::Relaxed) {
                        break;
                    }
                    // A claim in flight may bring work the Server has already
                    // handed to us; dropping it would leave that work Running
                    // until its lease expired. Wait for the answer (at most the
                    // long poll) and hand back what it brings.
                    tokio::select! {
                        biased;
                        () = shutdown.hurry().cancelled() => {}
                        claimed = &mut claim => {
                            if let Ok(Some(claim)) = claimed {
                                self.shared.metrics.claimed();
                                job::hand_back(&self.job_context(), claim, &shutdown).await;
                            }
                        }
                    }
                    break;
                }
                claimed = &mut claim => claimed,
            };
            let pause = match claimed {
                Ok(Some(claim)) => {
                    down.reset();
                    idle.reset();
                    self.shared.metrics.claimed();
                    self.shared.metrics.busy(true);
                    let sandbox_failed = job::evaluate(&self.job_context(), claim, &shutdown).await;
                    self.shared.metrics.busy(false);
                    if sandbox_failed {
                        sandbox_failures += 1;
                    } else {
                        sandbox_failures = 0;
                        sick.reset();
                    }
                    (sandbox_failures >= SANDBOX_FAILURES_IN_A_ROW).then(|| {
                        let pause = sick.next_delay();
                        self.shared.metrics.paused();
                        tracing::error!(
                            slot = self.index,
                            failures = sandbox_failures,
                            pause = ?pause,
                            "sandbox failures in a row: this slot stops claiming for a while"
                        );
                        pause
                    })
                }
                Ok(None) => {
                    down.reset();
                    let waited = asked.elapsed() >= self.shared.claim_wait / 2;
                    if waited {
                        idle.reset();
                        None
                    } else {
                        Some(idle.next_delay())
                    }
                }
                Err(err) => Some(self.claim_failed(&err, &mut down)),
            };
            if let Some(pause) = pause {
                tokio::select! {
                    () = shutdown.draining().cancelled() => break,
                    () = tokio::time::sleep(pause) => {}
                }
            }
        }
        tracing::debug!(slot = self.index, "slot stopped");
    }

    fn claim_failed(&self, err: &ClientError, down: &mut Backoff) -> Duration {
        let pause = down.next_delay();
        if err.is_transient() {
            self.shared.metrics.unreachable();
            tracing::warn!(slot = self.index, error = %err, retry_in = ?pause, "cannot claim: server unreachable");
        } else if matches!(err, ClientError::Refused { code, .. } if code == LANGUAGE_UNKNOWN) {
            // The Server accepts none of the languages this host offers: no claim
            // can succeed until `serve --languages` or `daemon --languages`
            // changes. Said in those words, and asked again slowly (the backoff
            // grows to 30 s), never in a hot loop.
            tracing::error!(
                slot = self.index,
                languages = %self.shared.languages.join(","),
                error = %err,
                retry_in = ?pause,
                "claim refused: the Server accepts none of this Runner's languages; check serve --languages and daemon --languages"
            );
        } else {
            // A revoked key, a wrong URL: nothing this slot can fix, but an operator
            // can; keep asking slowly rather than exit.
            tracing::error!(slot = self.index, error = %err, retry_in = ?pause, "claim refused");
        }
        pause
    }
}

/// The CPU of each slot ([`crate::sandbox::plan_cpus`]), with a warning when
/// slots must share CPUs (measurements get noisier).
pub fn plan_cpus(slots: usize, pin: bool) -> Vec<Option<u32>> {
    let cpus = crate::sandbox::usable_cpus().len();
    if pin && slots > cpus {
        tracing::warn!(
            slots,
            cpus,
            "more slots than CPUs: slots share CPUs and timings get noisier"
        );
    }
    crate::sandbox::plan_cpus(slots, pin)
}

//! One slot: a claim loop ([`ClaimLoop`]: long poll, backoff with jitter while
//! the Server is down or has nothing to give) whose work is evaluated on the
//! slot's own CPU and box id and reported, with a breaker for a broken sandbox.

use std::sync::Arc;
use std::time::Duration;

use crate::judge::Judge;
use crate::package::Cache;
use crate::protocol::Claim;

use super::backoff::Backoff;
use super::claim_loop::{ClaimHandler, ClaimLoop};
use super::client::Client;
use super::job::{self, JobContext, ProblemMemo, SlotHealth};
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
        let box_id = self.judge.config().box_id;
        tracing::debug!(slot = self.index, box_id, cpu = ?self.judge.config().cpu, "slot started");
        let shared = Arc::clone(&self.shared);
        let claims = ClaimLoop {
            client: &shared.client,
            metrics: &shared.metrics,
            languages: &shared.languages,
            claim_wait: shared.claim_wait,
            slot: self.index,
        };
        let mut evaluator = Evaluator {
            slot: &self,
            sick: Backoff::new(Duration::from_secs(30), Duration::from_secs(600)),
            sandbox_failures: 0,
            full: Backoff::new(Duration::from_secs(2), Duration::from_secs(60)),
        };
        claims.run(&mut evaluator, &shutdown).await;
        tracing::debug!(slot = self.index, "slot stopped");
    }
}

/// What a slot does with a claim: judge it, and keep the breaker. After
/// [`SANDBOX_FAILURES_IN_A_ROW`] jobs that failed in the sandbox, this host is
/// the likelier culprit than the jobs; each further claim would burn one of some
/// job's deliveries. Claims pause, from 30 s up to 10 min, until a job ends any
/// other way.
///
/// A job handed back because the package cache's file system is full pauses
/// claims at once (a jittered pause growing from 2 s to a minute while it stays
/// full): every claim meanwhile would be handed back too.
struct Evaluator<'a> {
    slot: &'a RunnerSlot,
    sick: Backoff,
    sandbox_failures: u32,
    full: Backoff,
}

impl ClaimHandler for Evaluator<'_> {
    async fn handle(&mut self, claim: Claim, shutdown: &Shutdown) -> Option<Duration> {
        let health = job::evaluate(&self.slot.job_context(), claim, shutdown).await;
        if health == SlotHealth::StorageFull {
            let pause = self.full.next_delay();
            self.slot.shared.metrics.paused();
            tracing::error!(
                slot = self.slot.index,
                pause = ?pause,
                "the package cache's file system is full: this slot stops claiming for a while"
            );
            return Some(pause);
        }
        self.full.reset();
        if health == SlotHealth::SandboxFailed {
            self.sandbox_failures += 1;
        } else {
            self.sandbox_failures = 0;
            self.sick.reset();
        }
        (self.sandbox_failures >= SANDBOX_FAILURES_IN_A_ROW).then(|| {
            let pause = self.sick.next_delay();
            self.slot.shared.metrics.paused();
            tracing::error!(
                slot = self.slot.index,
                failures = self.sandbox_failures,
                pause = ?pause,
                "sandbox failures in a row: this slot stops claiming for a while"
            );
            pause
        })
    }

    async fn hand_back(&mut self, claim: Claim, shutdown: &Shutdown) {
        job::hand_back(&self.slot.job_context(), claim, shutdown).await;
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

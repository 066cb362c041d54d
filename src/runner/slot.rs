//! One slot: a claim loop ([`ClaimLoop`]: long poll, backoff with jitter while
//! the Server is down or has nothing to give) whose work is evaluated on the
//! slot's own CPU and box id and reported, with a breaker for a broken sandbox.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::judge::Judge;
use crate::package::{Cache, Problem};
use crate::protocol::Claim;

use super::backoff::Backoff;
use super::claim_loop::{ClaimHandler, ClaimLoop};
use super::client::Client;
use super::job;
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

/// Parsed problems by package SHA-256: a package is content-addressed, so one
/// parse serves every later job of it. Small and cleared when full; a miss
/// costs one parse.
#[derive(Default)]
pub(crate) struct ProblemMemo(Mutex<HashMap<String, Arc<Problem>>>);

const PROBLEM_MEMO_SIZE: usize = 64;

impl ProblemMemo {
    pub fn get(&self, sha256: &str) -> Option<Arc<Problem>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(sha256)
            .cloned()
    }

    pub fn insert(&self, sha256: &str, problem: Arc<Problem>) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= PROBLEM_MEMO_SIZE {
            map.clear();
        }
        map.insert(sha256.to_string(), problem);
    }
}

/// Sandbox failures in a row after which a slot pauses claiming.
const SANDBOX_FAILURES_IN_A_ROW: u32 = 3;

pub(crate) struct Slot {
    pub index: usize,
    pub judge: Arc<Judge>,
    pub shared: Arc<Shared>,
}

impl Slot {
    pub fn new(index: usize, judge: Arc<Judge>, shared: Arc<Shared>) -> Slot {
        Slot {
            index,
            judge,
            shared,
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
struct Evaluator<'a> {
    slot: &'a Slot,
    sick: Backoff,
    sandbox_failures: u32,
}

impl ClaimHandler for Evaluator<'_> {
    async fn handle(&mut self, claim: Claim, shutdown: &Shutdown) -> Option<Duration> {
        let sandbox_failed = job::evaluate(self.slot, claim, shutdown).await;
        if sandbox_failed {
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
        job::hand_back(self.slot, claim, shutdown).await;
    }
}

/// The CPUs this process may run on (its affinity mask), lowest first.
pub fn usable_cpus() -> Vec<u32> {
    let Ok(set) = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) else {
        return vec![0];
    };
    let cpus: Vec<u32> = (0..nix::sched::CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .filter_map(|cpu| u32::try_from(cpu).ok())
        .collect();
    if cpus.is_empty() { vec![0] } else { cpus }
}

/// The CPU of each slot. With fewer slots than CPUs, slots take the highest
/// CPUs and leave the lowest to the daemon, the Server and interrupts; with more,
/// they share round-robin (measurements get noisier: a warning says so).
pub fn plan_cpus(slots: usize, pin: bool) -> Vec<Option<u32>> {
    if !pin {
        return vec![None; slots];
    }
    let cpus = usable_cpus();
    if slots > cpus.len() {
        tracing::warn!(
            slots,
            cpus = cpus.len(),
            "more slots than CPUs: slots share CPUs and timings get noisier"
        );
    }
    let skip = cpus.len().saturating_sub(slots);
    (0..slots)
        .map(|i| Some(cpus[(skip + i) % cpus.len()]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_get_distinct_cpus_from_the_top() {
        let cpus = usable_cpus();
        assert!(!cpus.is_empty());
        let plan = plan_cpus(cpus.len().saturating_sub(1).max(1), true);
        let mut seen: Vec<u32> = plan.iter().map(|c| c.unwrap()).collect();
        assert!(seen.iter().all(|c| cpus.contains(c)));
        let n = seen.len();
        seen.dedup();
        assert_eq!(seen.len(), n, "a CPU given twice: {plan:?}");
        if cpus.len() > 1 {
            assert!(
                !plan.contains(&Some(cpus[0])),
                "the lowest CPU is left free"
            );
        }
        assert_eq!(plan_cpus(3, false), vec![None, None, None]);
        assert_eq!(plan_cpus(cpus.len() + 2, true).len(), cpus.len() + 2);
    }
}

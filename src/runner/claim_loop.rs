//! The claim loop every worker of a Runner runs: claim with a long poll, hand
//! the claim to its [`ClaimHandler`], back off with jitter while the Server is
//! down or has nothing to give, and stop claiming when the Runner drains. A
//! daemon's slot judges what it claims; the forwarder (`judge-runner forward`) sends it
//! to another judging service. Both claim exactly this way.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::protocol::codes::error::LANGUAGE_UNKNOWN;
use crate::protocol::{Claim, ClaimRequest};

use super::backoff::Backoff;
use super::client::{Client, ClientError};
use super::metrics::Metrics;
use super::shutdown::Shutdown;

/// What a worker does with the work its loop claims.
pub trait ClaimHandler {
    /// Handles one claim to its end (reported, failed, released or lost).
    /// Answers a pause before the next claim (`None`: claim again at once).
    fn handle(
        &mut self,
        claim: Claim,
        shutdown: &Shutdown,
    ) -> impl Future<Output = Option<Duration>> + Send;

    /// A claim answered after the Runner began stopping: hand it back unworked.
    fn hand_back(&mut self, claim: Claim, shutdown: &Shutdown) -> impl Future<Output = ()> + Send;

    /// Asked before each claim: a pause when this worker cannot take work now
    /// (the forwarder's judging service is unreachable), `None` to claim.
    fn ready(&mut self) -> impl Future<Output = Option<Duration>> + Send {
        async { None }
    }
}

/// One worker's claiming: its Server, its languages, its long poll.
pub struct ClaimLoop<'a> {
    pub client: &'a Client,
    pub metrics: &'a Metrics,
    pub languages: &'a [String],
    /// How long a claim waits on the Server for work (long poll).
    pub claim_wait: Duration,
    /// The worker's number, for the logs (`slot = N`).
    pub slot: usize,
}

impl ClaimLoop<'_> {
    /// Claims and hands over until `shutdown` drains.
    pub async fn run(&self, handler: &mut impl ClaimHandler, shutdown: &Shutdown) {
        let request = ClaimRequest {
            languages: self.languages.to_vec(),
            wait_seconds: Some(self.claim_wait.as_secs()),
        };
        // Server down: from 0.5 s up to 30 s. Nothing to do although the Server
        // did not wait (an old Server, or a refused wait): from 0.2 s up to 5 s.
        let mut down = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
        let mut idle = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
        loop {
            if let Some(pause) = handler.ready().await {
                if self.pause(pause, shutdown).await {
                    break;
                }
                continue;
            }
            let asked = Instant::now();
            // Not sent until first polled: a Runner already draining sends none.
            let sent = AtomicBool::new(false);
            let claim = async {
                sent.store(true, Ordering::Relaxed);
                self.client.claim(&request).await
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
                                self.metrics.claimed();
                                handler.hand_back(claim, shutdown).await;
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
                    self.metrics.claimed();
                    self.metrics.busy(true);
                    let pause = handler.handle(claim, shutdown).await;
                    self.metrics.busy(false);
                    pause
                }
                Ok(None) => {
                    down.reset();
                    let waited = asked.elapsed() >= self.claim_wait / 2;
                    if waited {
                        idle.reset();
                        None
                    } else {
                        Some(idle.next_delay())
                    }
                }
                Err(err) => Some(self.claim_failed(&err, &mut down)),
            };
            if let Some(pause) = pause
                && self.pause(pause, shutdown).await
            {
                break;
            }
        }
    }

    /// Sleeps `pause`; answers whether the Runner began draining meanwhile.
    async fn pause(&self, pause: Duration, shutdown: &Shutdown) -> bool {
        tokio::select! {
            () = shutdown.draining().cancelled() => true,
            () = tokio::time::sleep(pause) => false,
        }
    }

    fn claim_failed(&self, err: &ClientError, down: &mut Backoff) -> Duration {
        let pause = down.next_delay();
        if err.is_transient() {
            self.metrics.unreachable();
            tracing::warn!(slot = self.slot, error = %err, retry_in = ?pause, "cannot claim: server unreachable");
        } else if matches!(err, ClientError::Refused { code, .. } if code == LANGUAGE_UNKNOWN) {
            // The Server accepts none of the languages this host offers: no claim
            // can succeed until `serve --languages` or `daemon --languages`
            // changes. Said in those words, and asked again slowly (the backoff
            // grows to 30 s), never in a hot loop.
            tracing::error!(
                slot = self.slot,
                languages = %self.languages.join(","),
                error = %err,
                retry_in = ?pause,
                "claim refused: the Server accepts none of this Runner's languages; check serve --languages and daemon --languages"
            );
        } else {
            // A revoked key, a wrong URL: nothing this worker can fix, but an
            // operator can; keep asking slowly rather than exit.
            tracing::error!(slot = self.slot, error = %err, retry_in = ?pause, "claim refused");
        }
        pause
    }
}

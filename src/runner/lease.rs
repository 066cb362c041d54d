//! The lease keeper: one task per held job (or trial) that keeps its lease alive
//! while the slot works, and raises the alarm when the Server says it is lost.
//!
//! - Progress after each test: the slot only stores the latest `(done, total)` in a
//!   `watch` channel and never waits; the keeper posts it. While a progress call
//!   is in flight, newer values overwrite each other in the channel, so at most
//!   one call is outstanding and the next one carries the latest value: a burst of
//!   a hundred fast tests costs a few calls, never a queue of a hundred.
//! - A progress call renews the lease too, so a plain `/lease` renewal is sent only
//!   when nothing was sent for `lease_seconds / 3`: at most every third of the lease.
//! - While the Server is unreachable the keeper retries with backoff and the work
//!   goes on (the lease may still be valid, and the Result will tell).
//! - `409 lease.lost` on any of its calls fires the `lost` token at once, and so
//!   does `401 auth.revoked` (revoking the key requeued the work; the client
//!   types both as [`ClientError::LeaseLost`]); the slot turns that into a cancel
//!   of the job's sandboxes.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::backoff::Backoff;
use super::client::{Client, ClientError, WorkRef};
use super::metrics::Metrics;

/// The shortest quiet time between two renewals.
pub const MIN_RENEWAL_PERIOD: Duration = Duration::from_millis(100);

/// How long [`LeaseKeeper::finish`] waits for a call in flight.
pub const FINISH_WAIT: Duration = Duration::from_secs(5);

/// What is held: which work, under which token, for how long at a time.
#[derive(Debug, Clone)]
pub struct Lease {
    pub work: WorkRef,
    pub token: String,
    pub seconds: u64,
}

impl Lease {
    /// The longest quiet time before a renewal: a third of the lease, so even the
    /// shortest lease (1 s) is renewed well before its `lease_expires_at`, past
    /// which the Server answers `lease.lost` whether or not it has swept it yet.
    /// At least [`MIN_RENEWAL_PERIOD`], so a zero lease cannot make a busy loop.
    pub fn renewal_period(&self) -> Duration {
        Duration::from_millis(self.seconds.saturating_mul(1000) / 3).max(MIN_RENEWAL_PERIOD)
    }
}

/// Keeps one lease alive until stopped.
pub struct LeaseKeeper {
    progress: watch::Sender<Option<(u64, u64)>>,
    lost: CancellationToken,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl LeaseKeeper {
    pub fn start(client: Client, lease: Lease, metrics: Arc<Metrics>) -> LeaseKeeper {
        let (progress, updates) = watch::channel(None);
        let lost = CancellationToken::new();
        let stop = CancellationToken::new();
        let keeper = Keeper {
            client,
            lease,
            metrics,
            lost: lost.clone(),
            stop: stop.clone(),
        };
        let task = tokio::spawn(keeper.run(updates));
        LeaseKeeper {
            progress,
            lost,
            stop,
            task,
        }
    }

    /// Records progress; the keeper posts the latest value when it can. Never blocks.
    pub fn progress(&self, done: u64, total: u64) {
        self.progress.send_replace(Some((done, total)));
    }

    /// A handle to record progress from a blocking thread.
    pub fn progress_sender(&self) -> watch::Sender<Option<(u64, u64)>> {
        self.progress.clone()
    }

    /// Fired when the Server answered `lease.lost`.
    pub fn lost(&self) -> &CancellationToken {
        &self.lost
    }

    /// Stops renewing, after the call in flight (if any) is answered, so that no
    /// progress call of this lease can reach the Server after the Result (where
    /// it would be refused as stale). A Server that does not answer within
    /// [`FINISH_WAIT`] is not waited for.
    pub async fn finish(mut self) {
        self.stop.cancel();
        if tokio::time::timeout(FINISH_WAIT, &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
            let _ = self.task.await;
        }
    }
}

struct Keeper {
    client: Client,
    lease: Lease,
    metrics: Arc<Metrics>,
    lost: CancellationToken,
    stop: CancellationToken,
}

impl Keeper {
    async fn run(self, mut updates: watch::Receiver<Option<(u64, u64)>>) {
        let period = self.lease.renewal_period();
        let mut backoff = Backoff::new(Duration::from_millis(250), period);
        let mut next_renewal = Instant::now() + period;
        let mut progress_open = true;
        loop {
            let sent = tokio::select! {
                biased;
                () = self.stop.cancelled() => return,
                changed = updates.changed(), if progress_open => {
                    if changed.is_err() {
                        progress_open = false; // the slot dropped its sender; renewals go on
                        continue;
                    }
                    let Some((done, total)) = *updates.borrow_and_update() else { continue };
                    self.send_progress(done, total).await
                }
                () = tokio::time::sleep_until(next_renewal) => self.send_renewal().await,
            };
            match sent {
                Ok(()) => {
                    backoff.reset();
                    next_renewal = Instant::now() + period;
                }
                Err(ClientError::LeaseLost { .. }) => {
                    tracing::warn!(work = %self.lease.work, "lease lost: dropping the work");
                    self.metrics.lease_lost();
                    self.lost.cancel();
                    return;
                }
                Err(err) => {
                    // Unreachable, or another refusal: try again soon, the work
                    // goes on; the Result call will settle it.
                    if err.is_transient() {
                        self.metrics.unreachable();
                    }
                    let pause = backoff.next_delay();
                    tracing::warn!(work = %self.lease.work, error = %err, retry_in = ?pause, "lease renewal failed");
                    next_renewal = Instant::now() + pause;
                }
            }
        }
    }

    async fn send_progress(&self, done: u64, total: u64) -> Result<(), ClientError> {
        let lease = &self.lease;
        self.client
            .progress(lease.work, &lease.token, done, total)
            .await?;
        self.metrics.progress_reported();
        self.metrics.lease_renewed();
        Ok(())
    }

    async fn send_renewal(&self) -> Result<(), ClientError> {
        let lease = &self.lease;
        self.client.renew(lease.work, &lease.token).await?;
        self.metrics.lease_renewed();
        tracing::debug!(work = %lease.work, "lease renewed");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};

    use axum::Json;
    use axum::http::StatusCode;
    use axum::routing::post;

    /// What a stand-in Server saw: progress values in order, renewals (and
    /// when), how many progress calls were in flight at most.
    #[derive(Default)]
    struct Seen {
        progress: Mutex<Vec<(u64, u64)>>,
        renewals: AtomicU64,
        renewed_at: Mutex<Vec<Instant>>,
        in_flight: AtomicU64,
        max_in_flight: AtomicU64,
    }

    /// Holds the stand-in's progress answers until opened.
    fn closed_gate() -> Arc<tokio::sync::Semaphore> {
        Arc::new(tokio::sync::Semaphore::new(0))
    }

    fn open_gate() -> Arc<tokio::sync::Semaphore> {
        Arc::new(tokio::sync::Semaphore::new(
            tokio::sync::Semaphore::MAX_PERMITS,
        ))
    }

    /// Polls `done` until it holds; a generous deadline only against a hang.
    async fn eventually(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(Instant::now() < deadline, "never: {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// A Server that answers progress once `gate` gives it a permit, renewals at
    /// once, and `lease.lost` to everything once `lose` is set.
    async fn stand_in(gate: Arc<tokio::sync::Semaphore>, lose: bool) -> (Client, Arc<Seen>) {
        let seen = Arc::new(Seen::default());
        let (p, r) = (Arc::clone(&seen), Arc::clone(&seen));
        let lost = || {
            (
                StatusCode::CONFLICT,
                Json(serde_json::json!({"error": "lease.lost", "message": "gone"})),
            )
        };
        let app = axum::Router::new()
            .route(
                "/api/jobs/1/progress",
                post(move |Json(body): Json<serde_json::Value>| {
                    let (p, gate) = (Arc::clone(&p), Arc::clone(&gate));
                    async move {
                        let now = p.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        p.max_in_flight.fetch_max(now, Ordering::SeqCst);
                        gate.acquire().await.unwrap().forget();
                        p.in_flight.fetch_sub(1, Ordering::SeqCst);
                        if lose {
                            return lost();
                        }
                        let done = body["done"].as_u64().unwrap_or(0);
                        let total = body["total"].as_u64().unwrap_or(0);
                        p.progress.lock().unwrap().push((done, total));
                        (
                            StatusCode::OK,
                            Json(serde_json::json!({"lease_expires_at": "2026-11-30T00:00:00Z"})),
                        )
                    }
                }),
            )
            .route(
                "/api/jobs/1/lease",
                post(move || {
                    let r = Arc::clone(&r);
                    async move {
                        if lose {
                            return lost();
                        }
                        r.renewed_at.lock().unwrap().push(Instant::now());
                        r.renewals.fetch_add(1, Ordering::SeqCst);
                        (
                            StatusCode::OK,
                            Json(serde_json::json!({"lease_expires_at": "2026-11-30T00:00:00Z"})),
                        )
                    }
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (Client::new(&format!("http://{addr}"), "k").unwrap(), seen)
    }

    fn lease(seconds: u64) -> Lease {
        Lease {
            work: WorkRef::Job(1),
            token: "t".into(),
            seconds,
        }
    }

    /// While a progress call is in flight no other is sent, and the next one
    /// carries the latest value: a burst of 99 values behind a call the Server
    /// holds costs exactly one more call. The Server is held by a gate, not a
    /// delay, so the count does not depend on how busy the machine is.
    #[tokio::test]
    async fn a_burst_of_progress_is_coalesced_while_a_call_is_in_flight() {
        let gate = closed_gate();
        let (client, seen) = stand_in(Arc::clone(&gate), false).await;
        let metrics = Arc::new(Metrics::default());
        let keeper = LeaseKeeper::start(client, lease(120), Arc::clone(&metrics));
        keeper.progress(1, 100);
        eventually("the first progress call reaches the Server", || {
            seen.in_flight.load(Ordering::SeqCst) == 1
        })
        .await;
        for done in 2..=100 {
            keeper.progress(done, 100);
            tokio::task::yield_now().await;
        }
        gate.add_permits(1_000);
        eventually("the latest value is delivered", || {
            seen.progress.lock().unwrap().last() == Some(&(100, 100))
        })
        .await;
        keeper.finish().await;
        let progress = seen.progress.lock().unwrap().clone();
        assert_eq!(progress, [(1, 100), (100, 100)]);
        assert_eq!(
            seen.max_in_flight.load(Ordering::SeqCst),
            1,
            "one call at a time"
        );
        assert_eq!(
            seen.renewals.load(Ordering::SeqCst),
            0,
            "progress renews; no /lease needed"
        );
    }

    /// With nothing else sent, renewals come, and never sooner than a third of
    /// the lease after the previous one (a loaded machine may make them later).
    #[tokio::test]
    async fn renewals_come_every_third_of_the_lease_when_nothing_else_is_sent() {
        let (client, seen) = stand_in(open_gate(), false).await;
        let metrics = Arc::new(Metrics::default());
        let started = Instant::now();
        let lease = lease(3);
        let period = lease.renewal_period();
        let keeper = LeaseKeeper::start(client, lease, Arc::clone(&metrics));
        eventually("two renewals", || seen.renewals.load(Ordering::SeqCst) >= 2).await;
        keeper.finish().await;
        let at = seen.renewed_at.lock().unwrap().clone();
        let mut previous = started;
        for (n, when) in at.iter().enumerate() {
            assert!(
                *when >= previous + period,
                "renewal {n} came {:?} after the previous one (period {period:?})",
                *when - previous
            );
            previous = *when;
        }
        assert_eq!(
            metrics.lease_renewals(),
            seen.renewals.load(Ordering::SeqCst)
        );
        assert!(seen.progress.lock().unwrap().is_empty());
    }

    /// `lease.lost` stops the work at once: well before the first renewal is due.
    #[tokio::test]
    async fn lease_lost_fires_at_once() {
        let (client, _) = stand_in(open_gate(), true).await;
        let metrics = Arc::new(Metrics::default());
        let lease = lease(120);
        let period = lease.renewal_period();
        let keeper = LeaseKeeper::start(client, lease, Arc::clone(&metrics));
        keeper.progress(1, 10);
        let fired = tokio::time::timeout(period / 2, keeper.lost().cancelled()).await;
        assert!(
            fired.is_ok(),
            "lease.lost not noticed within {:?}",
            period / 2
        );
        assert_eq!(metrics.leases_lost(), 1);
        keeper.finish().await;
    }

    #[test]
    fn renewal_period_is_a_third_of_the_lease() {
        let lease = |seconds| Lease {
            work: WorkRef::Job(1),
            token: "t".into(),
            seconds,
        };
        assert_eq!(lease(120).renewal_period(), Duration::from_secs(40));
        assert_eq!(lease(6).renewal_period(), Duration::from_secs(2));
        // A 1 s lease used to wait a full second, renewing only as it expired.
        assert_eq!(lease(1).renewal_period(), Duration::from_millis(333));
        assert_eq!(lease(0).renewal_period(), MIN_RENEWAL_PERIOD);
    }
}

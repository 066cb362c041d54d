//! One claimed job, forwarded: submitted to the judging service under its
//! idempotency key, waited on while A's lease is kept alive (A's `progress`
//! follows the remote attempt's), and settled at A the way a daemon settles
//! (`runner::settle`): the remote Result with its `details` and `log`, the
//! remote failure with its reason and retryability, a release, or nothing at all
//! when A's lease is lost.
//!
//! The lease rules across the hop:
//! - A's lease lost (expiry, revocation): stop renewing, drop the job, and leave
//!   the remote attempt alone: it is work already spent, and the re-delivered job
//!   (same job id and attempt, so the same key) waits on that same attempt.
//! - Stopping: a job the service has not accepted yet is released at once; one
//!   it has accepted is waited for until `--grace` runs out, then released (the
//!   remote attempt goes on; the next delivery picks it up through the key).
//! - The service unavailable for longer than A's lease: the job is released, so
//!   it does not sit Running at A while nobody can judge it; claims pause until
//!   the service answers again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::protocol::{Claim, JobClaim, ResultBody};
use crate::runner::backoff::Backoff;
use crate::runner::claim_loop::ClaimHandler;
use crate::runner::client::{Client, WorkRef};
use crate::runner::lease::{Lease, LeaseKeeper};
use crate::runner::metrics::Metrics;
use crate::runner::settle::{Ending, settle};
use crate::runner::shutdown::Shutdown;

use super::backend::{Backend, BackendError, ForwardedJob, RemoteResult, RemoteState};
use super::callbacks::Waiters;
use super::metrics::ForwardCounters;

/// How long a lane that claimed a trial waits before it claims again: trials are
/// not forwarded (module `forward`), so a daemon at A should get the chance.
const TRIAL_PAUSE: Duration = Duration::from_secs(30);

/// What every lane of a forwarder shares.
pub(crate) struct Context<B> {
    /// A's client (the forwarder's Runner key).
    pub client: Client,
    pub metrics: Arc<Metrics>,
    pub counters: Arc<ForwardCounters>,
    pub backend: B,
    /// The webhook listener's waiters, when there is one.
    pub waiters: Option<Arc<Waiters>>,
    /// A's identity in idempotency keys (a digest of A's URL).
    pub origin: String,
    /// Set when a call to the service found it unavailable; claims then wait
    /// for [`Backend::ready`].
    pub suspect: AtomicBool,
}

/// One lane: a claim loop's handler that forwards what it claims.
pub(crate) struct Lane<'a, B> {
    pub ctx: &'a Context<B>,
    pub index: usize,
    /// The pause before asking the service again whether it is back.
    pub waiting_for_service: Backoff,
}

impl<B: Backend> ClaimHandler for Lane<'_, B> {
    async fn handle(&mut self, claim: Claim, shutdown: &Shutdown) -> Option<Duration> {
        match claim {
            Claim::Job(job) => {
                forward(self.ctx, self.index, job, shutdown).await;
                None
            }
            Claim::Trial(trial) => {
                tracing::warn!(trial = trial.trial_id, slot = self.index, pause = ?TRIAL_PAUSE, "trials are not forwarded: releasing it");
                let work = WorkRef::Trial(trial.trial_id);
                let ctx = self.ctx;
                settle(
                    &ctx.client,
                    &ctx.metrics,
                    work,
                    &trial.lease_token,
                    Ending::Abandoned,
                    shutdown,
                )
                .await;
                Some(TRIAL_PAUSE)
            }
        }
    }

    async fn hand_back(&mut self, claim: Claim, shutdown: &Shutdown) {
        let (work, token) = match &claim {
            Claim::Job(j) => (WorkRef::Job(j.job_id), &j.lease_token),
            Claim::Trial(t) => (WorkRef::Trial(t.trial_id), &t.lease_token),
        };
        tracing::info!(%work, slot = self.index, "claimed while stopping: releasing it");
        let ctx = self.ctx;
        settle(
            &ctx.client,
            &ctx.metrics,
            work,
            token,
            Ending::Abandoned,
            shutdown,
        )
        .await;
    }

    async fn ready(&mut self) -> Option<Duration> {
        if !self.ctx.suspect.load(Ordering::Relaxed) {
            return None;
        }
        if self.ctx.backend.ready().await {
            tracing::info!(slot = self.index, service = %self.ctx.backend.describe(), "the judging service answers again: claiming");
            self.ctx.suspect.store(false, Ordering::Relaxed);
            self.waiting_for_service.reset();
            return None;
        }
        let pause = self.waiting_for_service.next_delay();
        tracing::warn!(slot = self.index, service = %self.ctx.backend.describe(), retry_in = ?pause, "the judging service does not answer: not claiming");
        Some(pause)
    }
}

/// Forwards one job to its end at A.
async fn forward<B: Backend>(ctx: &Context<B>, slot: usize, claim: JobClaim, shutdown: &Shutdown) {
    let work = WorkRef::Job(claim.job_id);
    tracing::info!(%work, slot, attempt = claim.attempt, language = %claim.language, package = %claim.package.sha256, "claimed");
    let keeper = LeaseKeeper::start(
        ctx.client.clone(),
        Lease {
            work,
            token: claim.lease_token.clone(),
            seconds: claim.lease_seconds,
        },
        Arc::clone(&ctx.metrics),
    );
    let ending = Forwarding {
        ctx,
        claim: &claim,
        keeper: &keeper,
        shutdown,
    }
    .run()
    .await;
    let lost = keeper.lost().is_cancelled();
    // The keeper stops before the report: a progress call racing the Result would
    // reach a job that is no longer Running and be refused as stale.
    keeper.finish().await;
    let ending = if lost || matches!(ending, Ending::Lost) {
        tracing::warn!(%work, "lease at A lost: the remote attempt is left to finish; a re-delivery picks it up");
        Ending::Lost
    } else {
        ending
    };
    settle(
        &ctx.client,
        &ctx.metrics,
        work,
        &claim.lease_token,
        ending,
        shutdown,
    )
    .await;
}

/// One job on its way through the service.
struct Forwarding<'a, B> {
    ctx: &'a Context<B>,
    claim: &'a JobClaim,
    keeper: &'a LeaseKeeper,
    shutdown: &'a Shutdown,
}

/// What a wait for the service ended in.
enum Waited<T> {
    Answer(T),
    /// End the job this way (lost, released).
    End(Ending),
}

impl<B: Backend> Forwarding<'_, B> {
    async fn run(&self) -> Ending {
        let job = match self.job() {
            Ok(job) => job,
            Err(ending) => return ending,
        };
        // How long the service may stay unavailable before the job goes back to
        // A: as long as A would wait for a silent Runner.
        let patience = Duration::from_secs(self.claim.lease_seconds.max(1));
        let submitted = match self.submit(&job, patience).await {
            Ok(submitted) => submitted,
            Err(ending) => return ending,
        };
        self.ctx.counters.submitted(submitted.replayed);
        tracing::info!(
            work = %WorkRef::Job(self.claim.job_id),
            remote_submission = submitted.attempt.submission_id,
            remote_job = submitted.attempt.job_id,
            replayed = submitted.replayed,
            "at the judging service"
        );
        self.wait(submitted.attempt, patience).await
    }

    /// The job as the backend takes it (the package URL made absolute).
    fn job(&self) -> Result<ForwardedJob, Ending> {
        let claim = self.claim;
        let mut package = claim.package.clone();
        package.url = self
            .ctx
            .client
            .package_url(&claim.package)
            .map_err(|e| Ending::Failed {
                reason: crate::package::error::INVALID.to_string(),
                retryable: false,
                message: e.to_string(),
            })?;
        Ok(ForwardedJob {
            key: job_key(&self.ctx.origin, claim.job_id, claim.attempt),
            package,
            time_limit: claim.time_limit,
            language: claim.language.clone(),
            files: claim.files.clone(),
        })
    }

    /// Submits until the service answers; released when the Runner stops first
    /// (the job is not at the service yet) or the service stays away too long.
    async fn submit(
        &self,
        job: &ForwardedJob,
        patience: Duration,
    ) -> Result<super::backend::Submitted, Ending> {
        let mut backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(10));
        let mut unavailable_since: Option<Instant> = None;
        loop {
            let submitted = tokio::select! {
                biased;
                () = self.keeper.lost().cancelled() => return Err(Ending::Lost),
                () = self.shutdown.draining().cancelled() => return Err(Ending::Abandoned),
                submitted = self.ctx.backend.submit(job) => submitted,
            };
            match submitted {
                Ok(submitted) => return Ok(submitted),
                Err(BackendError::Failed {
                    reason,
                    retryable,
                    message,
                }) => {
                    return Err(Ending::Failed {
                        reason,
                        retryable,
                        message,
                    });
                }
                Err(BackendError::Unavailable { detail }) => {
                    self.unavailable(&mut unavailable_since, patience, &detail)?;
                    let pause = backoff.next_delay();
                    tracing::warn!(work = %WorkRef::Job(self.claim.job_id), %detail, retry_in = ?pause, "cannot submit: the judging service is unavailable");
                    tokio::select! {
                        biased;
                        () = self.keeper.lost().cancelled() => return Err(Ending::Lost),
                        () = self.shutdown.draining().cancelled() => return Err(Ending::Abandoned),
                        () = tokio::time::sleep(pause) => {}
                    }
                }
            }
        }
    }

    /// Counts an unavailable answer; `Err(Abandoned)` once the service has been
    /// away for longer than `patience`.
    fn unavailable(
        &self,
        since: &mut Option<Instant>,
        patience: Duration,
        detail: &str,
    ) -> Result<(), Ending> {
        self.ctx.counters.unavailable();
        self.ctx.suspect.store(true, Ordering::Relaxed);
        let first = *since.get_or_insert_with(Instant::now);
        if first.elapsed() >= patience {
            tracing::warn!(
                work = %WorkRef::Job(self.claim.job_id),
                %detail,
                away = ?first.elapsed(),
                "the judging service has been unavailable for longer than A's lease: giving the job back to A"
            );
            return Err(Ending::Abandoned);
        }
        Ok(())
    }

    /// Waits for the remote attempt to end: a webhook or the next poll, whichever
    /// comes first; progress goes on to A.
    async fn wait(&self, mut attempt: super::backend::RemoteAttempt, patience: Duration) -> Ending {
        let registration = self
            .ctx
            .waiters
            .as_ref()
            .map(|w| w.register(attempt.submission_id));
        // Polling is the whole wait without webhooks (from 0.25 s up to 5 s) and
        // a safety net beside them (from 2 s up to 10 s); both start over when the
        // remote progress moves.
        let mut poll = if registration.is_some() {
            Backoff::new(Duration::from_secs(2), Duration::from_secs(10))
        } else {
            Backoff::new(Duration::from_millis(250), Duration::from_secs(5))
        };
        let mut unavailable_since: Option<Instant> = None;
        let mut last_progress = None;
        loop {
            let status = match self.interruptible(self.ctx.backend.status(attempt)).await {
                Waited::Answer(status) => status,
                Waited::End(ending) => return ending,
            };
            match status {
                Ok(RemoteState::Waiting {
                    attempt: now,
                    progress,
                }) => {
                    unavailable_since = None;
                    attempt = now;
                    if progress.is_some() && progress != last_progress {
                        if let Some((done, total)) = progress {
                            self.keeper.progress(done, total);
                        }
                        last_progress = progress;
                        poll.reset();
                    }
                }
                Ok(RemoteState::Done(result)) => return self.result(*result),
                Ok(RemoteState::Failed { reason, retryable }) => {
                    return Ending::Failed {
                        message: format!("the remote attempt ended Failed ({reason})"),
                        reason,
                        retryable,
                    };
                }
                Err(BackendError::Failed {
                    reason,
                    retryable,
                    message,
                }) => {
                    return Ending::Failed {
                        reason,
                        retryable,
                        message,
                    };
                }
                Err(BackendError::Unavailable { detail }) => {
                    if let Err(ending) = self.unavailable(&mut unavailable_since, patience, &detail)
                    {
                        return ending;
                    }
                    tracing::warn!(work = %WorkRef::Job(self.claim.job_id), %detail, "cannot read the remote attempt: will retry");
                }
            }
            let pause = poll.next_delay();
            let woken = async {
                match &registration {
                    Some(r) => r.woken().await,
                    None => std::future::pending().await,
                }
            };
            let waited = self
                .interruptible(async {
                    tokio::select! {
                        () = woken => {}
                        () = tokio::time::sleep(pause) => {}
                    }
                })
                .await;
            if let Waited::End(ending) = waited {
                return ending;
            }
        }
    }

    /// `work` unless A's lease is lost (drop) or the Runner abandons held work
    /// (release; the remote attempt goes on).
    async fn interruptible<T>(&self, work: impl std::future::Future<Output = T>) -> Waited<T> {
        tokio::select! {
            biased;
            () = self.keeper.lost().cancelled() => Waited::End(Ending::Lost),
            () = self.shutdown.abandon().cancelled() => Waited::End(Ending::Abandoned),
            answer = work => Waited::Answer(answer),
        }
    }

    /// The remote Result as A takes it: values unchanged, `runner_version`
    /// naming the forwarder and the remote Runner.
    fn result(&self, remote: RemoteResult) -> Ending {
        let remote_runner = remote
            .runner_version
            .unwrap_or_else(|| "an unnamed Runner".to_string());
        Ending::JobResult {
            attachments: remote.attachments,
            result: Box::new(ResultBody {
                lease_token: self.claim.lease_token.clone(),
                score: remote.score,
                max_score: remote.max_score,
                verdict: remote.verdict,
                extra: remote.extra,
                props: remote.props,
                runner_version: Some(format!(
                    "judge-runner-forward {} via {} ({remote_runner})",
                    crate::version::RUNNER_VERSION,
                    self.ctx.backend.describe()
                )),
                attempt: Some(self.claim.attempt),
            }),
        }
    }
}

/// The idempotency key of one attempt at A: A's identity, its job id and attempt.
/// Every forwarder of A derives the same key for the same attempt, so a killed
/// one's successor finds the submission it made.
pub fn job_key(origin: &str, job_id: i64, attempt: i64) -> String {
    format!("judge-runner-forward:{origin}:job-{job_id}:attempt-{attempt}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_the_server_the_job_and_the_attempt() {
        let key = job_key("0123456789abcdef", 42, 2);
        assert_eq!(
            key,
            "judge-runner-forward:0123456789abcdef:job-42:attempt-2"
        );
        assert_ne!(key, job_key("0123456789abcdef", 42, 3));
        assert_ne!(key, job_key("fedcba9876543210", 42, 2));
        assert!(key.len() <= 255, "a key is at most 255 bytes");
    }
}

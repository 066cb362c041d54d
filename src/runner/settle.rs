//! How a claimed piece of work ends at the Server, in one place for the daemon's
//! slots and the forwarder (`judge-runner forward`): a verdict is reported (attachments,
//! then the Result), an infrastructure failure goes to `/failure` (never as a
//! verdict), a lost lease drops everything, a stopping Runner releases. Each call
//! is retried with backoff while the Server is unreachable, until the shutdown's
//! patience runs out ([`Shutdown::give_up`]).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::protocol::{ResultBody, TrialResultBody};

use super::backoff::Backoff;
use super::client::{Client, ClientError, WorkRef};
use super::metrics::Metrics;
use super::shutdown::Shutdown;

/// The one way a held piece of work ends.
#[derive(Debug)]
pub enum Ending {
    /// A job's verdict: `attachments` (`details`, `log`) first, then the Result.
    JobResult {
        attachments: Vec<(&'static str, Vec<u8>)>,
        result: Box<ResultBody>,
    },
    /// A trial's timings.
    TrialResult(TrialResultBody),
    /// An infrastructure failure, with its stable reason code.
    Failed {
        reason: String,
        retryable: bool,
        message: String,
    },
    /// The Server gave the lease to someone else (already counted by the lease
    /// keeper that noticed): drop the work.
    Lost,
    /// The Runner is stopping: hand the work back.
    Abandoned,
}

/// Tells the Server how `work` (held under `token`) ended, and counts it.
pub async fn settle(
    client: &Client,
    metrics: &Metrics,
    work: WorkRef,
    token: &str,
    ending: Ending,
    shutdown: &Shutdown,
) {
    let give_up = shutdown.give_up();
    let give_up = give_up.token();
    let mut backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(10));
    // A lease the keeper lost was counted there; one lost on a call made here
    // (the Server away past the lease, then back) is counted below.
    let counted = matches!(ending, Ending::Lost);
    let sent = match ending {
        Ending::JobResult {
            attachments,
            result,
        } => {
            let WorkRef::Job(job) = work else {
                tracing::error!(%work, "a job Result for a trial: dropped");
                return;
            };
            let sent = report(client, job, attachments, &result, give_up, &mut backoff).await;
            if sent.is_ok() {
                metrics.job_done(&result.verdict);
                tracing::info!(%work, verdict = %result.verdict, score = result.score, "reported");
            }
            sent
        }
        Ending::TrialResult(body) => {
            let WorkRef::Trial(trial) = work else {
                tracing::error!(%work, "trial timings for a job: dropped");
                return;
            };
            let sent = Client::until_answered("trial result", give_up, &mut backoff, || {
                client.trial_result(trial, &body)
            })
            .await;
            if sent.is_ok() {
                metrics.trial_done();
                tracing::info!(%work, "reported");
            }
            sent
        }
        Ending::Failed {
            reason,
            retryable,
            message,
        } => {
            tracing::warn!(%work, %reason, retryable, %message, "infrastructure failure");
            let sent = Client::until_answered("failure", give_up, &mut backoff, || {
                client.failure(work, token, &reason, retryable)
            })
            .await;
            if sent.is_ok() {
                metrics.failed(&reason);
            }
            sent
        }
        Ending::Lost => Err(ClientError::LeaseLost { work }),
        Ending::Abandoned => {
            let released = release(client, work, token, shutdown, give_up, &mut backoff).await;
            if released.is_ok() {
                metrics.released();
            }
            released
        }
    };
    match sent {
        Ok(()) => {}
        Err(ClientError::LeaseLost { .. }) => {
            if !counted {
                metrics.lease_lost();
            }
            tracing::warn!(%work, "lease lost: work dropped");
        }
        Err(err) => {
            tracing::error!(%work, error = %err, "could not tell the server; the lease will expire")
        }
    }
}

async fn release(
    client: &Client,
    work: WorkRef,
    token: &str,
    shutdown: &Shutdown,
    give_up: &CancellationToken,
    backoff: &mut Backoff,
) -> Result<(), ClientError> {
    let released = if shutdown.hurry().is_cancelled() {
        // Exiting now: one short try, no waiting for a Server that is not there.
        tokio::time::timeout(Duration::from_secs(2), client.release(work, token))
            .await
            .unwrap_or_else(|_| {
                Err(ClientError::GaveUp {
                    call: "release".to_string(),
                })
            })
    } else {
        Client::until_answered("release", give_up, backoff, || client.release(work, token)).await
    };
    if released.is_ok() {
        tracing::info!(%work, "released");
    }
    released
}

/// Attachments first, then the Result. A refused attachment (too large, say) is
/// logged and does not cost the Result; a refused Result ends the job as a
/// non-retryable failure with the Server's own code.
async fn report(
    client: &Client,
    job: crate::protocol::Id,
    attachments: Vec<(&'static str, Vec<u8>)>,
    result: &ResultBody,
    give_up: &CancellationToken,
    backoff: &mut Backoff,
) -> Result<(), ClientError> {
    let work = WorkRef::Job(job);
    let token = &result.lease_token;
    for (name, bytes) in attachments {
        let attached = Client::until_answered(name, give_up, backoff, || {
            client.put_file(job, token, name, bytes.clone())
        })
        .await;
        match attached {
            Err(e @ ClientError::Refused { .. }) => {
                tracing::error!(%work, attachment = name, error = %e, "attachment refused");
            }
            other => other?,
        }
    }
    let sent =
        Client::until_answered("result", give_up, backoff, || client.result(job, result)).await;
    let Err(ClientError::Refused { code, .. }) = &sent else {
        return sent;
    };
    // The Server will never take this Result (its own code says why): end the job
    // as an infrastructure failure now rather than let it expire and be redone.
    tracing::error!(%work, error = ?sent, "result refused");
    let reason = if code.is_empty() {
        "result.refused"
    } else {
        code.as_str()
    };
    Client::until_answered("failure", give_up, backoff, || {
        client.failure(work, token, reason, false)
    })
    .await
}

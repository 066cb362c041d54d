//! The forwarder's webhook listener (`--callback-listen ADDR`): B POSTs an
//! `attempt.ended` event to it whenever an attempt of a forwarded submission
//! ends, and the job waiting on that submission looks at B at once instead of
//! at its next poll.
//!
//! An event is a hint, never a result: the waiter reads the attempt from B's API
//! under its own token. So the listener needs no webhook secret, and a forged or
//! replayed event costs one read of B, never a wrong verdict. Every well-formed
//! event is answered 204 (also for a submission nobody waits on any more: B
//! would otherwise retry it for a day); a body without a `submission_id` is 400.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::http::StatusCode;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The path B is given (`http://ADDR/attempt-ended` unless `--callback-url`).
pub const PATH: &str = "/attempt-ended";

/// Waiters by B's submission id.
#[derive(Debug, Default)]
pub struct Waiters {
    waiting: Mutex<HashMap<i64, Arc<Notify>>>,
    received: AtomicU64,
}

impl Waiters {
    /// A wake-up for `submission_id`, registered until the guard is dropped. An
    /// event that comes before the waiter waits is kept (one permit).
    pub fn register(self: &Arc<Self>, submission_id: i64) -> Registration {
        let notify = Arc::clone(
            self.waiting
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(submission_id)
                .or_default(),
        );
        Registration {
            waiters: Arc::clone(self),
            submission_id,
            notify,
        }
    }

    /// Events received (`judge_forward_webhooks_total`).
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    fn wake(&self, submission_id: i64) {
        self.received.fetch_add(1, Ordering::Relaxed);
        let waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(notify) = waiting.get(&submission_id) {
            notify.notify_one();
        }
    }
}

/// One job's wake-up; deregisters on drop.
pub struct Registration {
    waiters: Arc<Waiters>,
    submission_id: i64,
    notify: Arc<Notify>,
}

impl Registration {
    pub async fn woken(&self) {
        self.notify.notified().await;
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut waiting = self
            .waiters
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Another job of the same submission (two lanes, one re-delivered job)
        // may hold the same Notify; remove it only when this was the last.
        if Arc::strong_count(&self.notify) <= 2 {
            waiting.remove(&self.submission_id);
        }
    }
}

/// Serves the listener on `addr` until `stop`; answers the bound address.
pub async fn serve(
    addr: SocketAddr,
    waiters: Arc<Waiters>,
    stop: CancellationToken,
) -> std::io::Result<SocketAddr> {
    use axum::routing::post;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = axum::Router::new().route(
        PATH,
        post(move |body: axum::body::Bytes| {
            let waiters = Arc::clone(&waiters);
            async move {
                let event: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
                match event.as_ref().and_then(|e| e["submission_id"].as_i64()) {
                    Some(id) => {
                        tracing::debug!(submission = id, "attempt.ended from B");
                        waiters.wake(id);
                        StatusCode::NO_CONTENT
                    }
                    None => StatusCode::BAD_REQUEST,
                }
            }
        }),
    );
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "webhook listener failed");
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn an_event_wakes_its_waiter_even_when_it_came_first() {
        let waiters = Arc::new(Waiters::default());
        let stop = CancellationToken::new();
        let addr = serve(
            "127.0.0.1:0".parse().unwrap(),
            Arc::clone(&waiters),
            stop.clone(),
        )
        .await
        .unwrap();
        let waiting = waiters.register(7);
        let other = waiters.register(8);
        let http = reqwest::Client::new();
        let url = format!("http://{addr}{PATH}");
        let answer = http
            .post(&url)
            .body(r#"{"event":"attempt.ended","submission_id":7,"job_id":9}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 204);
        // The event came before anyone waited: the permit is kept.
        tokio::time::timeout(Duration::from_secs(10), waiting.woken())
            .await
            .expect("submission 7's waiter is woken");
        assert!(
            tokio::time::timeout(Duration::from_millis(200), other.woken())
                .await
                .is_err(),
            "submission 8's waiter is not"
        );
        let bad = http.post(&url).body("not json").send().await.unwrap();
        assert_eq!(bad.status(), 400);
        assert_eq!(waiters.received(), 1);
        drop(waiting);
        drop(other);
        assert!(waiters.waiting.lock().unwrap().is_empty());
        stop.cancel();
    }
}

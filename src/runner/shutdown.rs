//! How a daemon stops: three stages, each a token the slots watch.
//!
//! 1. `draining` (first SIGTERM/SIGINT): claim nothing more.
//! 2. `abandon` (after the grace period, zero by default): cancel the sandboxes of
//!    the work still running and release it to the Server, so another Runner
//!    takes it at once instead of waiting for the lease to expire. Work already
//!    judged is still reported: its Result is worth more than a release.
//! 3. `hurry` (a second signal): stop waiting for an unreachable Server; one
//!    quick release attempt per held job, then exit.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// After `abandon`, how long a slot keeps trying to reach an unreachable Server
/// to report or release before it gives up (the lease then expires on its own).
pub const REPORT_PATIENCE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    draining: CancellationToken,
    abandon: CancellationToken,
    hurry: CancellationToken,
}

impl Shutdown {
    pub fn new() -> Self {
        Self::default()
    }

    /// The first signal: stop claiming now, abandon held work after `grace`.
    pub fn begin(&self, grace: Duration) {
        self.draining.cancel();
        if grace.is_zero() {
            self.abandon.cancel();
            return;
        }
        let abandon = self.abandon.clone();
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            abandon.cancel();
        });
    }

    /// The second signal: everything at once.
    pub fn now(&self) {
        self.draining.cancel();
        self.abandon.cancel();
        self.hurry.cancel();
    }

    pub fn draining(&self) -> &CancellationToken {
        &self.draining
    }

    pub fn abandon(&self) -> &CancellationToken {
        &self.abandon
    }

    pub fn hurry(&self) -> &CancellationToken {
        &self.hurry
    }

    /// Fires when a slot should stop waiting for the Server: at `hurry`, or
    /// [`REPORT_PATIENCE`] after `abandon`. Its watcher task ends when the
    /// returned value is dropped.
    pub fn give_up(&self) -> GiveUp {
        let give_up = CancellationToken::new();
        let (fire, abandon, hurry) = (give_up.clone(), self.abandon.clone(), self.hurry.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = hurry.cancelled() => {}
                () = async {
                    abandon.cancelled().await;
                    tokio::time::sleep(REPORT_PATIENCE).await;
                } => {}
                () = fire.cancelled() => {}
            }
            fire.cancel();
        });
        GiveUp(give_up)
    }
}

/// A token that fires when the slot should stop waiting; cancelled on drop so
/// its watcher task never outlives the job.
#[derive(Debug)]
pub struct GiveUp(CancellationToken);

impl GiveUp {
    pub fn token(&self) -> &CancellationToken {
        &self.0
    }
}

impl Drop for GiveUp {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn stages_fire_in_order() {
        let s = Shutdown::new();
        let give_up = s.give_up();
        s.begin(Duration::from_secs(5));
        assert!(s.draining().is_cancelled());
        assert!(!s.abandon().is_cancelled());
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert!(s.abandon().is_cancelled());
        assert!(!give_up.token().is_cancelled());
        tokio::time::sleep(REPORT_PATIENCE).await;
        tokio::task::yield_now().await;
        assert!(give_up.token().is_cancelled());
        assert!(!s.hurry().is_cancelled());
        s.now();
        assert!(s.hurry().is_cancelled());
    }
}

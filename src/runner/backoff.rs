//! Exponential backoff with full jitter: how long a Runner waits before it asks
//! again after the Server was unreachable or had nothing to give.
//!
//! Full jitter (a uniform pick in `[0, cap]`) rather than a fixed doubling: many
//! Runners that lost the Server at the same instant must not come back in step,
//! or a restarting Server meets them all in the same millisecond.

use std::time::Duration;

use rand::Rng;

/// The next pause grows from `first` by doubling up to `max`; `reset` after success.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    failures: u32,
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Self {
        Backoff {
            first,
            max: max.max(first),
            failures: 0,
        }
    }

    /// The pause before the next try; each call counts one more failure.
    pub fn next_delay(&mut self) -> Duration {
        let cap = self.cap();
        self.failures = self.failures.saturating_add(1);
        // Never below a tenth of `first`: a zero pause would turn a dead Server
        // into a busy loop.
        let floor = self.first / 10;
        let picked = cap.mul_f64(rand::rng().random_range(0.0..=1.0));
        picked.max(floor)
    }

    /// The largest pause the next call may answer.
    pub fn cap(&self) -> Duration {
        self.first
            .saturating_mul(1u32 << self.failures.min(20))
            .min(self.max)
    }

    pub fn failures(&self) -> u32 {
        self.failures
    }

    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_to_the_cap_and_stay_jittered() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        assert_eq!(b.cap(), Duration::from_millis(100));
        let mut seen = Vec::new();
        for _ in 0..12 {
            let cap = b.cap();
            let d = b.next_delay();
            assert!(d <= cap, "{d:?} over its cap {cap:?}");
            assert!(d >= Duration::from_millis(10), "{d:?} under the floor");
            seen.push(d);
        }
        assert_eq!(b.cap(), Duration::from_secs(2));
        assert_eq!(b.failures(), 12);
        // Jitter: twelve picks are not all the same.
        seen.sort();
        seen.dedup();
        assert!(seen.len() > 1);
        b.reset();
        assert_eq!(b.cap(), Duration::from_millis(100));
    }
}

//! The Server's notion of "now", injectable so lease-expiry tests move time instead
//! of sleeping. Every lease deadline and timestamp the Server writes comes from here.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};

/// Milliseconds since the Unix epoch (UTC): how every time is stored.
pub type Millis = i64;

pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> Millis;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        Utc::now().timestamp_millis()
    }
}

/// A clock that moves only when told to (tests, simulations).
#[derive(Debug)]
pub struct ManualClock {
    now: AtomicI64,
}

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        ManualClock {
            now: AtomicI64::new(start.timestamp_millis()),
        }
    }

    /// Starts at the current wall-clock time.
    pub fn starting_now() -> Self {
        Self::new(Utc::now())
    }

    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.now.fetch_add(ms, Ordering::SeqCst);
    }

    pub fn set(&self, to: DateTime<Utc>) {
        self.now.store(to.timestamp_millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> Millis {
        self.now.load(Ordering::SeqCst)
    }
}

/// A stored time as it goes on the wire (RFC 3339 UTC).
pub fn to_datetime(ms: Millis) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or(DateTime::<Utc>::UNIX_EPOCH)
}

/// `seconds` after `from`, saturating instead of overflowing on absurd inputs.
pub fn after_seconds(from: Millis, seconds: u64) -> Millis {
    let ms = i64::try_from(seconds)
        .unwrap_or(i64::MAX)
        .saturating_mul(1000);
    from.saturating_add(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(to_datetime(1_000));
        assert_eq!(clock.now_ms(), 1_000);
        clock.advance(Duration::from_secs(2));
        assert_eq!(clock.now_ms(), 3_000);
        assert_eq!(after_seconds(clock.now_ms(), 120), 123_000);
        assert_eq!(after_seconds(i64::MAX - 1, u64::MAX), i64::MAX);
    }
}

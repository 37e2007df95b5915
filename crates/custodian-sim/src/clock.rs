//! The double's injectable clock: real time plus an offset that `POST /sim/clock` moves forward.
//!
//! Every timed behaviour of the providers (the authorization window, lookup and status lags,
//! webhook delays, the idempotency window) reads this clock and waits on it, so that a test can
//! skip a wait instead of sleeping. Request authentication (JWT `exp`, Prime's timestamp window)
//! is checked against real time instead: the clients sign with their own wall clock.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

/// Real time plus a movable offset, in milliseconds since the Unix epoch.
#[derive(Debug)]
pub struct Clock {
    offset_ms: watch::Sender<i64>,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// A clock equal to real time.
    pub fn new() -> Clock {
        Clock {
            offset_ms: watch::Sender::new(0),
        }
    }

    /// Real time, in milliseconds since the Unix epoch.
    pub fn real_ms() -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }

    /// The double's time, in milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        Self::real_ms().saturating_add(self.offset())
    }

    /// How far the clock is ahead of real time, in milliseconds.
    pub fn offset(&self) -> i64 {
        *self.offset_ms.borrow()
    }

    /// Moves the clock forward by `ms` milliseconds and wakes every waiter.
    pub fn advance(&self, ms: i64) {
        self.offset_ms
            .send_modify(|offset| *offset = offset.saturating_add(ms.max(0)));
    }

    /// Waits until the double's time reaches `at_ms` (real sleeping, cut short by advances).
    pub async fn sleep_until(&self, at_ms: i64) {
        let mut changes = self.offset_ms.subscribe();
        loop {
            let left = at_ms.saturating_sub(self.now_ms());
            if left <= 0 {
                return;
            }
            // At most an hour at a time: a far target never overflows a timer.
            let wait = Duration::from_millis(u64::try_from(left.min(3_600_000)).unwrap_or(0));
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                changed = changes.changed() => {
                    if changed.is_err() {
                        tokio::time::sleep(wait).await;
                    }
                }
            }
        }
    }
}

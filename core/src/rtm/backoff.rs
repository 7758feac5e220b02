//! Reconnect backoff and fail counting: the reference SDK's exponential scheme, but the
//! count resets only once a connection proved stable, with jitter, an attempt budget
//! that means exactly the number of reconnect attempts, and an explicit first-connect
//! policy.
//!
//! The delay before reconnect attempt *n+1* is measured from the **start** of attempt *n*
//! (the reference SDK's timing), or — with `Config::wait_before_first_reconnect`, the SDK
//! contract's reading of `reconnect_interval` — the first one after a stable connection
//! dropped from the drop:
//!
//! ```text
//! base   = min(reconnect_interval · 2^fail_count, max_reconnect_interval)
//! jitter = uniform in [0, base / 4]   (0 when jitter_seed == 0)
//! next   = max(reference + base − jitter, now)
//! ```
//!
//! Jitter is *subtracted* so the cap stays a cap and clients that failed together spread
//! out instead of hammering the server in lock-step. `fail_count` counts consecutive
//! failed attempts (a refused connect, a failed auth restore, or a connection that closed
//! before it proved stable); it goes back to zero only once a connection proved stable.

use core::time::Duration;

use crate::time::{micros, Instant};

/// Fail counter, attempt budget and jitter source of one client.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    /// Consecutive failed attempts; the exponent of the delay.
    fail_count: u32,
    /// Reconnect attempts still allowed before giving up (`None` = unlimited).
    attempts_left: Option<u32>,
    /// The reference point of the next delay: the start of the latest connect attempt,
    /// or the drop of a stable connection (see [`dropped`](Self::dropped)).
    reference: Option<Instant>,
    /// splitmix64 state; `None` disables jitter.
    rng: Option<u64>,
}

impl Backoff {
    pub(crate) const fn new(jitter_seed: u64) -> Self {
        Backoff {
            fail_count: 0,
            attempts_left: None,
            reference: None,
            rng: if jitter_seed != 0 {
                Some(jitter_seed)
            } else {
                None
            },
        }
    }

    /// Forget all failures and allow `threshold` more reconnect attempts.
    pub(crate) const fn reset(&mut self, threshold: Option<u32>) {
        self.fail_count = 0;
        self.attempts_left = threshold;
    }

    /// Allow exactly `attempts` more reconnect attempts (keeps the fail count).
    pub(crate) fn set_attempts(&mut self, attempts: Option<u32>) {
        self.attempts_left = attempts;
    }

    /// One more failed attempt: the next delay doubles.
    pub(crate) fn record_failure(&mut self) {
        self.fail_count = self.fail_count.saturating_add(1);
    }

    /// A stable connection dropped now: the next wait counts from here.
    pub(crate) fn dropped(&mut self, now: Instant) {
        self.reference = Some(now);
    }

    /// Whether another reconnect attempt is allowed.
    pub(crate) fn may_retry(&self) -> bool {
        self.attempts_left != Some(0)
    }

    /// A connect attempt starts now; a scheduled reconnect (not a user `start`) uses up
    /// one attempt of the budget.
    pub(crate) fn attempt_started(&mut self, now: Instant, consumes_budget: bool) {
        self.reference = Some(now);
        if consumes_budget {
            self.attempts_left = self.attempts_left.map(|n| n.saturating_sub(1));
        }
    }

    #[cfg(test)]
    pub(crate) fn fail_count(&self) -> u32 {
        self.fail_count
    }

    /// `min(interval · 2^fail_count, max)`, without overflow.
    /// `min(interval · 2^fail_count, max)`, in microseconds (a duration past `u64`
    /// microseconds counts as `u64::MAX`).
    pub(crate) fn base_delay(&self, interval: Duration, max: Duration) -> u64 {
        let max = micros(max).unwrap_or(u64::MAX);
        let mut delay = micros(interval).unwrap_or(u64::MAX);
        for _ in 0..self.fail_count {
            if delay >= max {
                break;
            }
            delay = delay.saturating_add(delay);
        }
        delay.min(max)
    }

    /// When the next attempt should start (see the module docs), advancing the jitter
    /// generator.
    pub(crate) fn next_attempt_at(
        &mut self,
        now: Instant,
        interval: Duration,
        max: Duration,
    ) -> Instant {
        let base_us = self.base_delay(interval, max);
        let jitter_us = match self.rng.as_mut() {
            Some(state) => below(splitmix64(state), (base_us / 4).saturating_add(1)),
            None => 0,
        };
        // In microseconds throughout, as `Instant` counts: no 64-bit division (a Cortex-M
        // has none in hardware, and the library routine is most of a kilobyte of flash).
        let reference = self.reference.unwrap_or(now);
        let at = reference
            .as_micros()
            .saturating_add(base_us.saturating_sub(jitter_us));
        Instant::from_micros(at).max(now)
    }
}

/// A uniform random `r` mapped onto `0..n` by a multiply and a shift (Lemire's method)
/// rather than `r % n`, which is a 64-bit division.
fn below(r: u64, n: u64) -> u64 {
    ((u128::from(r) * u128::from(n)) >> 64) as u64
}

/// The splitmix64 generator: tiny, fast, and good enough to decorrelate reconnects.
pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests;

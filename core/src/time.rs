//! Time as a value: the core never reads a clock.
//!
//! Every state machine in this crate that has deadlines (reconnect backoff, request
//! timeouts) takes the current time as an [`Instant`] argument and reports its next
//! deadline as an [`Instant`]. The adapter owns the clock (`std::time::Instant`,
//! `embassy_time::Instant`, a test's counter) and converts at the edge. Microseconds in a
//! `u64` cover 584 000 years from any origin, so overflow is not a practical concern, and
//! all arithmetic here is still checked or saturating so that no input can panic.
//!
//! ```
//! use benchlink_core::time::Instant;
//! use core::time::Duration;
//! let t0 = Instant::from_micros(1_000);
//! let t1 = t0 + Duration::from_millis(2);
//! assert_eq!(t1.as_micros(), 3_000);
//! assert_eq!(t1 - t0, Duration::from_millis(2));
//! assert_eq!(t0.saturating_duration_since(t1), Duration::ZERO);
//! assert!(t0 < t1);
//! ```

use core::ops::{Add, AddAssign, Sub};
use core::time::Duration;

/// A point in time: microseconds since an origin the adapter chooses (boot, process
/// start, a test's zero). Only differences between two instants of the same origin mean
/// anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Instant(u64);

impl Instant {
    /// The origin itself.
    ///
    /// ```
    /// use benchlink_core::time::Instant;
    /// assert_eq!(Instant::ZERO.as_micros(), 0);
    /// ```
    pub const ZERO: Instant = Instant(0);

    /// The latest representable instant; arithmetic saturates here.
    ///
    /// ```
    /// use benchlink_core::time::Instant;
    /// use core::time::Duration;
    /// assert_eq!(Instant::MAX.saturating_add(Duration::from_secs(1)), Instant::MAX);
    /// ```
    pub const MAX: Instant = Instant(u64::MAX);

    /// An instant `micros` microseconds after the origin.
    ///
    /// ```
    /// use benchlink_core::time::Instant;
    /// assert_eq!(Instant::from_micros(7).as_micros(), 7);
    /// ```
    pub const fn from_micros(micros: u64) -> Self {
        Instant(micros)
    }

    /// An instant `millis` milliseconds after the origin (saturating).
    ///
    /// ```
    /// use benchlink_core::time::Instant;
    /// assert_eq!(Instant::from_millis(7).as_micros(), 7_000);
    /// ```
    pub const fn from_millis(millis: u64) -> Self {
        Instant(millis.saturating_mul(1_000))
    }

    /// An instant `secs` seconds after the origin (saturating).
    ///
    /// ```
    /// use benchlink_core::time::Instant;
    /// assert_eq!(Instant::from_secs(2).as_micros(), 2_000_000);
    /// ```
    pub const fn from_secs(secs: u64) -> Self {
        Instant(secs.saturating_mul(1_000_000))
    }

    /// Microseconds since the origin.
    ///
    /// ```
    /// use benchlink_core::time::Instant;
    /// assert_eq!(Instant::from_millis(3).as_micros(), 3_000);
    /// ```
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Milliseconds since the origin, rounded down.
    ///
    /// ```
    /// use benchlink_core::time::Instant;
    /// assert_eq!(Instant::from_micros(2_999).as_millis(), 2);
    /// ```
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000
    }

    /// `self + d`, or `None` past [`Instant::MAX`].
    ///
    /// ```
    /// use benchlink_core::time::Instant;
    /// use core::time::Duration;
    /// assert_eq!(Instant::MAX.checked_add(Duration::from_micros(1)), None);
    /// ```
    pub fn checked_add(self, d: Duration) -> Option<Instant> {
        let micros = micros(d)?;
        self.0.checked_add(micros).map(Instant)
    }

    /// `self + d`, clamped to [`Instant::MAX`].
    ///
    /// ```
    /// use benchlink_core::time::Instant;
    /// use core::time::Duration;
    /// assert_eq!(Instant::ZERO.saturating_add(Duration::from_micros(5)).as_micros(), 5);
    /// ```
    pub fn saturating_add(self, d: Duration) -> Instant {
        self.checked_add(d).unwrap_or(Instant::MAX)
    }

    /// `self - d`, or `None` before the origin.
    ///
    /// ```
    /// use benchlink_core::time::Instant;
    /// use core::time::Duration;
    /// assert_eq!(Instant::ZERO.checked_sub(Duration::from_micros(1)), None);
    /// ```
    pub fn checked_sub(self, d: Duration) -> Option<Instant> {
        let micros = micros(d)?;
        self.0.checked_sub(micros).map(Instant)
    }

    /// `self - d`, clamped to [`Instant::ZERO`].
    ///
    /// ```
    /// use benchlink_core::time::Instant;
    /// use core::time::Duration;
    /// assert_eq!(Instant::from_micros(3).saturating_sub(Duration::from_secs(1)), Instant::ZERO);
    /// ```
    pub fn saturating_sub(self, d: Duration) -> Instant {
        self.checked_sub(d).unwrap_or(Instant::ZERO)
    }

    /// The time from `earlier` to `self`, or `None` when `earlier` is later.
    ///
    /// ```
    /// use benchlink_core::time::Instant;
    /// use core::time::Duration;
    /// let (a, b) = (Instant::from_micros(1), Instant::from_micros(4));
    /// assert_eq!(b.checked_duration_since(a), Some(Duration::from_micros(3)));
    /// assert_eq!(a.checked_duration_since(b), None);
    /// ```
    pub fn checked_duration_since(self, earlier: Instant) -> Option<Duration> {
        self.0.checked_sub(earlier.0).map(duration_from_micros)
    }

    /// The time from `earlier` to `self`, zero when `earlier` is later.
    ///
    /// ```
    /// use benchlink_core::time::Instant;
    /// use core::time::Duration;
    /// assert_eq!(Instant::ZERO.saturating_duration_since(Instant::MAX), Duration::ZERO);
    /// ```
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        self.checked_duration_since(earlier)
            .unwrap_or(Duration::ZERO)
    }
}

/// `Duration::from_micros` without a 64-bit division (on a 32-bit MCU that is a library
/// routine of most of a kilobyte): 1 000 000 = 64 × 15 625, so a shift by 6, then long
/// division by 15 625 over 16-bit limbs, where every step fits in 32 bits.
fn duration_from_micros(micros: u64) -> Duration {
    let x = micros >> 6;
    let (mut secs, mut rem) = (0u64, 0u32);
    for shift in [48u32, 32, 16, 0] {
        // rem < 15 625 < 2^14, so `cur` < 2^30.
        let cur = rem << 16 | (x >> shift) as u32 & 0xFFFF;
        secs = secs << 16 | u64::from(cur / 15_625);
        rem = cur % 15_625;
    }
    let sub_micros = rem * 64 + (micros as u32 & 63);
    Duration::new(secs, sub_micros * 1000)
}

/// Saturating: an instant never wraps around.
impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        self.saturating_add(d)
    }
}

/// Saturating, like [`Add`].
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = self.saturating_add(d);
    }
}

/// Saturating: clamps at the origin.
impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        self.saturating_sub(d)
    }
}

/// The (saturating) duration between two instants: zero when the right side is later.
impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

/// `d` in whole microseconds, `None` past `u64`: seconds and the sub-second part apart,
/// so a 32-bit target multiplies in 64 bits instead of linking `Duration::as_micros`'s
/// 128-bit arithmetic.
// Out of line: every deadline is a configured `Duration` added to `now`, and one copy of
// the conversion serves them all (60 bytes less on a Cortex-M).
#[inline(never)]
pub(crate) fn micros(d: Duration) -> Option<u64> {
    d.as_secs()
        .checked_mul(1_000_000)?
        .checked_add(u64::from(d.subsec_micros()))
}

/// The earlier of two optional deadlines, `None` meaning none (later than any instant):
/// how every machine merges the deadlines it tracks into its next wake-up.
///
/// ```
/// use benchlink_core::time::{earliest, Instant};
/// let (a, b) = (Instant::from_millis(1), Instant::from_millis(2));
/// assert_eq!(earliest(Some(b), Some(a)), Some(a));
/// assert_eq!(earliest(None, Some(b)), Some(b));
/// assert_eq!(earliest(None, None), None);
/// ```
pub fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    // One of the two, picked: no new `Option` built.
    match (a, b) {
        (Some(x), Some(y)) if y < x => b,
        (None, _) => b,
        _ => a,
    }
}

#[cfg(test)]
mod tests;

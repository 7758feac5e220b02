//! When a cutting relay cuts: intervals drawn from a seeded generator, so that a run with
//! the same seed meets the same intervals (the order connections arrive in does not
//! change them: the schedule is the relay's, not each connection's).

use std::time::Duration;

/// Random cuts: every interval is drawn uniformly from `min..=max` (whole milliseconds)
/// by a SplitMix64 generator started from `seed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutSchedule {
    /// The generator's seed: the same seed, the same intervals.
    pub seed: u64,
    /// Shortest interval between two cuts.
    pub min: Duration,
    /// Longest interval between two cuts (at least `min`).
    pub max: Duration,
}

impl CutSchedule {
    /// Intervals of `min_ms..=max_ms` milliseconds from `seed` (the bounds swapped if
    /// given in the wrong order).
    #[must_use]
    pub fn new(seed: u64, min_ms: u64, max_ms: u64) -> CutSchedule {
        CutSchedule {
            seed,
            min: Duration::from_millis(min_ms.min(max_ms)),
            max: Duration::from_millis(max_ms.max(min_ms)),
        }
    }

    /// The intervals, first to last (endless): the time from the relay's start to the
    /// first cut, then from each cut to the next.
    pub fn intervals(&self) -> impl Iterator<Item = Duration> {
        let min = millis(self.min);
        let span = millis(self.max).saturating_sub(min).saturating_add(1);
        let mut state = self.seed;
        std::iter::repeat_with(move || {
            let draw = splitmix64(&mut state) % span;
            Duration::from_millis(min.saturating_add(draw))
        })
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// SplitMix64 (Steele, Lea, Flood 2014): a small, well-mixed generator whose whole state
/// is one word, so that a printed seed is all it takes to repeat a run.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

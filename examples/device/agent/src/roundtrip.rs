//! Which samples came back on the subscription.
//!
//! Every sample the agent publishes carries its number (`"n"`), so the subscriber side
//! can tell a sample from its duplicate: a publish that was in flight when the
//! connection dropped may or may not have reached the server, so the agent publishes it
//! again, and the subscription may then deliver it twice. Counting distinct numbers is
//! what makes "every sample made the round trip" a fact rather than a count that a
//! duplicate can make up for a loss.

/// Distinct sample numbers below `WORDS * 32`, one bit each.
///
/// ```
/// use benchlink_device_agent::roundtrip::Seen;
/// let mut seen: Seen<2> = Seen::new();
/// assert_eq!(seen.mark(3), Some(true));
/// assert_eq!(seen.mark(3), Some(false)); // a duplicate
/// assert_eq!(seen.mark(64), None); // past capacity
/// assert_eq!((seen.distinct(), seen.duplicates()), (1, 1));
/// ```
pub struct Seen<const WORDS: usize> {
    bits: [u32; WORDS],
    distinct: u32,
    duplicates: u32,
}

impl<const WORDS: usize> Default for Seen<WORDS> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const WORDS: usize> Seen<WORDS> {
    /// How many sample numbers can be told apart.
    pub const CAPACITY: u32 = (WORDS * 32) as u32;

    /// Nothing seen.
    pub const fn new() -> Self {
        Seen {
            bits: [0; WORDS],
            distinct: 0,
            duplicates: 0,
        }
    }

    /// Marks sample `n`: `Some(true)` the first time, `Some(false)` for a duplicate,
    /// `None` when `n` is past [`CAPACITY`](Self::CAPACITY).
    pub fn mark(&mut self, n: u32) -> Option<bool> {
        let word = self.bits.get_mut((n / 32) as usize)?;
        let bit = 1u32 << (n % 32);
        let new = *word & bit == 0;
        *word |= bit;
        if new {
            self.distinct += 1;
        } else {
            self.duplicates += 1;
        }
        Some(new)
    }

    /// Distinct samples seen.
    pub fn distinct(&self) -> u32 {
        self.distinct
    }

    /// Samples seen again.
    pub fn duplicates(&self) -> u32 {
        self.duplicates
    }
}

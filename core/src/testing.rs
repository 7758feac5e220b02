//! What the core's unit tests share.

/// The xorshift64 generator of the randomized tests: a deterministic stream of numbers
/// from its (non-zero) seed, so that a failing case replays exactly.
pub(crate) struct Xorshift(pub(crate) u64);

impl Xorshift {
    /// The next number.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// The next number below `n` (which must not be 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

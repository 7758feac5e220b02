//! Byte searches eight bytes at a time ("SIMD within a register"), for the hot loops of
//! the line splitter and the JSON scanner. Plain integer arithmetic: no `unsafe`, no
//! target features, the same on a Cortex-M as on a desktop.

/// `b` in every byte of a word.
pub(crate) const fn repeat(b: u8) -> u64 {
    u64::from_le_bytes([b; 8])
}

/// Flags (high bit) the zero bytes of `x`. The lowest flag is always right; higher ones
/// may be false alarms from a borrow, which is why callers only use the lowest.
pub(crate) const fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(repeat(1)) & !x & repeat(0x80)
}

/// Flags (high bit) the bytes of `x` below `n` (`n` at most 128); lowest flag right.
pub(crate) const fn bytes_below(x: u64, n: u8) -> u64 {
    x.wrapping_sub(repeat(n)) & !x & repeat(0x80)
}

/// The index of the first byte of `data` that `hits` flags in its word, or that `is`
/// holds for among the last `len % 8` bytes. `hits` and `is` must agree.
pub(crate) fn find(
    data: &[u8],
    hits: impl Fn(u64) -> u64,
    is: impl Fn(u8) -> bool,
) -> Option<usize> {
    let mut base = 0usize;
    let mut words = data.chunks_exact(8);
    for word in &mut words {
        let Ok(bytes) = <[u8; 8]>::try_from(word) else {
            break;
        };
        let h = hits(u64::from_le_bytes(bytes));
        if h != 0 {
            return Some(base + (h.trailing_zeros() / 8) as usize);
        }
        base += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&b| is(b))
        .map(|i| base + i)
}

/// The index of the first `needle` in `data`.
pub(crate) fn find_byte(data: &[u8], needle: u8) -> Option<usize> {
    find(data, |w| zero_bytes(w ^ repeat(needle)), |b| b == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_match_at_every_offset() {
        let mut seed = 0x853C_49E6_748F_EA9Bu64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 40) as usize;
            let data: std::vec::Vec<u8> = (0..len)
                .map(|i| {
                    [b'a', b'"', b'\\', 0, 1, 0x1f, 0x20, 0x80, 0xff]
                        [(seed >> (i % 60)) as usize % 9]
                })
                .collect();
            for needle in [b'"', b'\\', 0, 0x80] {
                assert_eq!(
                    find_byte(&data, needle),
                    data.iter().position(|&b| b == needle)
                );
            }
            let below = find(&data, |w| bytes_below(w, 0x20), |b| b < 0x20);
            assert_eq!(below, data.iter().position(|&b| b < 0x20), "{data:?}");
        }
    }
}

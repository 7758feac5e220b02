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

/// Flags (high bit) exactly the bytes of `x` equal to `b`: no false alarms, so every
/// flag may be used, not only the lowest.
pub(crate) const fn eq_bytes(x: u64, b: u8) -> u64 {
    let t = x ^ repeat(b);
    !(((t & repeat(0x7f)) + repeat(0x7f)) | t) & repeat(0x80)
}

/// Each byte's flag (high bit) XOR the flags of the bytes before it: with quotes flagged,
/// the bytes from an opening quote up to (not including) its closing one.
pub(crate) const fn prefix_xor(flags: u64) -> u64 {
    let x = flags ^ (flags << 8);
    let x = x ^ (x << 16);
    x ^ (x << 32)
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

/// Flags (high bit) the bytes of `x` that are not ASCII digits; the lowest flag is right.
pub(crate) const fn non_digits(x: u64) -> u64 {
    (x | x.wrapping_sub(repeat(b'0')) | x.wrapping_add(repeat(0x7f - b'9'))) & repeat(0x80)
}

/// How many ASCII digits `data` starts with.
pub(crate) fn digit_run(data: &[u8]) -> usize {
    find(data, non_digits, |b| !b.is_ascii_digit()).unwrap_or(data.len())
}

/// The value of up to 19 ASCII digits (the caller checked that they are digits), eight
/// at a time.
pub(crate) fn decimal(digits: &[u8]) -> u64 {
    let mut value = 0u64;
    let mut words = digits.chunks_exact(8);
    for word in &mut words {
        let Ok(bytes) = <[u8; 8]>::try_from(word) else {
            break;
        };
        // Big-endian digit order in a little-endian word: pair, then quad, then octet.
        let x = u64::from_le_bytes(bytes).wrapping_sub(repeat(b'0'));
        let x = (x.wrapping_mul(10) + (x >> 8)) & 0x00ff_00ff_00ff_00ff;
        let x = (x.wrapping_mul(100) + (x >> 16)) & 0x0000_ffff_0000_ffff;
        let x = (x.wrapping_mul(10_000) + (x >> 32)) & 0xffff_ffff;
        value = value.wrapping_mul(100_000_000).wrapping_add(x);
    }
    for &b in words.remainder() {
        value = value
            .wrapping_mul(10)
            .wrapping_add(u64::from(b.wrapping_sub(b'0')));
    }
    value
}

#[cfg(test)]
mod tests;

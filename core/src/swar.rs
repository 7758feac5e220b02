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
mod tests {
    use super::*;

    #[test]
    fn digits_eight_at_a_time() {
        for text in [
            "0",
            "7",
            "12345678",
            "123456789",
            "1439245024",
            "9999999999999999999",
            "0000000000000001",
        ] {
            assert_eq!(
                decimal(text.as_bytes()),
                text.parse::<u64>().unwrap(),
                "{text}"
            );
        }
        for (text, run) in [
            ("", 0),
            ("1", 1),
            ("12345678x", 8),
            ("123456789\t", 9),
            ("/:0", 0),
            ("01234567:", 8),
            ("0123456\u{7f}", 7),
            ("0123456789abcdef", 10),
        ] {
            assert_eq!(digit_run(text.as_bytes()), run, "{text:?}");
        }
        for b in 0..=255u8 {
            let word = [b'5', b'5', b'5', b, b'5', b'5', b'5', b'5'];
            let expected = if b.is_ascii_digit() { 8 } else { 3 };
            assert_eq!(digit_run(&word), expected, "{b}");
        }
    }

    #[test]
    fn exact_masks() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            // Bytes near the interesting ones, so that borrows would show.
            let bytes: [u8; 8] = core::array::from_fn(|i| {
                [b'"', b'!', b'#', b'\\', b'[', b'{', 0, 0x80, 0xa2, 0xff]
                    [(seed >> (i * 7)) as usize % 10]
            });
            let w = u64::from_le_bytes(bytes);
            let flags = |f: &dyn Fn(u8) -> bool| {
                (0..8).fold(0u64, |m, i| m | (u64::from(f(bytes[i])) << (i * 8 + 7)))
            };
            for b in [b'"', b'\\', b'{', 0, 0x80, 0xff] {
                assert_eq!(eq_bytes(w, b), flags(&|x| x == b), "{bytes:?} {b}");
            }
            let quotes = eq_bytes(w, b'"');
            let inside = flags(&|_| false)
                | (0..8).fold(0u64, |m, i| {
                    let before = bytes[..=i].iter().filter(|&&x| x == b'"').count();
                    m | (((before % 2) as u64) << (i * 8 + 7))
                });
            assert_eq!(prefix_xor(quotes), inside, "{bytes:?}");
        }
    }

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

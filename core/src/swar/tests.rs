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

/// The masks of a word of either width against byte-by-byte truth: the 32-bit word a
/// Cortex-M uses and the 64-bit one of a desktop.
fn exact_masks_at<W: Word + core::fmt::Debug>(to: impl Fn(u64) -> W) {
    let n = W::BYTES;
    let mut rng = crate::testing::Xorshift(0x2545_F491_4F6C_DD1D);
    for _ in 0..20_000 {
        let seed = rng.next();
        // Bytes near the interesting ones, so that borrows would show.
        let bytes: [u8; 8] = core::array::from_fn(|i| {
            [b'"', b'!', b'#', b'\\', b'[', b'{', 0, 0x80, 0xa2, 0xff]
                [(seed >> (i * 7)) as usize % 10]
        });
        let bytes = &bytes[..n];
        let w = W::load(bytes).unwrap();
        let flags = |f: &dyn Fn(usize) -> bool| {
            to((0..n).fold(0u64, |m, i| m | (u64::from(f(i)) << (i * 8 + 7))))
        };
        for b in [b'"', b'\\', b'{', 0, 0x80, 0xff] {
            assert_eq!(eq_bytes(w, b), flags(&|i| bytes[i] == b), "{bytes:?} {b}");
        }
        let quotes = eq_bytes(w, b'"');
        let inside = flags(&|i| bytes[..=i].iter().filter(|&&x| x == b'"').count() % 2 == 1);
        assert_eq!(prefix_xor(quotes), inside, "{bytes:?}");
        // The lowest flag of the approximate masks is the first byte that matches.
        let first = |f: &dyn Fn(u8) -> bool| bytes.iter().position(|&b| f(b));
        let lowest = |m: W| (m != W::ZERO).then(|| flag_byte(m));
        assert_eq!(lowest(zero_bytes(w)), first(&|b| b == 0), "{bytes:?}");
        assert_eq!(
            lowest(bytes_below(w, 0x20)),
            first(&|b| b < 0x20),
            "{bytes:?}"
        );
        assert_eq!(
            lowest(non_digits(w)),
            first(&|b| !b.is_ascii_digit()),
            "{bytes:?}"
        );
    }
}

#[test]
fn exact_masks() {
    exact_masks_at::<u32>(|m| m as u32);
    exact_masks_at::<u64>(|m| m);
}

#[test]
fn finds_the_first_match_at_every_offset() {
    let mut rng = crate::testing::Xorshift(0x853C_49E6_748F_EA9B);
    for _ in 0..20_000 {
        let seed = rng.next();
        let len = (seed % 40) as usize;
        let data: std::vec::Vec<u8> = (0..len)
            .map(|i| {
                [b'a', b'"', b'\\', 0, 1, 0x1f, 0x20, 0x80, 0xff][(seed >> (i % 60)) as usize % 9]
            })
            .collect();
        for needle in [b'"', b'\\', 0, 0x80] {
            assert_eq!(
                find_byte(&data, needle),
                data.iter().position(|&b| b == needle)
            );
        }
        let want = data.iter().position(|&b| b < 0x20);
        assert_eq!(
            find(&data, |w: u32| bytes_below(w, 0x20), |b| b < 0x20),
            want
        );
        assert_eq!(
            find(&data, |w: u64| bytes_below(w, 0x20), |b| b < 0x20),
            want
        );
    }
}

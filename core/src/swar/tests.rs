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
                [b'a', b'"', b'\\', 0, 1, 0x1f, 0x20, 0x80, 0xff][(seed >> (i % 60)) as usize % 9]
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

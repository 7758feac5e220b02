use super::Cursor;
use std::string::ToString;
use std::vec::Vec;

#[test]
fn push_u64_writes_every_width_in_decimal() {
    let mut values: Vec<u64> = Vec::from([0, 65_535, 65_536, u64::from(u32::MAX), u64::MAX]);
    let mut p = 1u64;
    while let Some(next) = p.checked_mul(10) {
        values.extend([p - 1, p, p + 1]);
        p = next;
    }
    let mut x = 0x1234_5678_9abc_def0u64;
    for _ in 0..10_000 {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        values.push(x >> (x >> 58));
    }
    for n in values {
        let mut buf = [0u8; 20];
        let mut out = Cursor::new(&mut buf);
        out.push_u64(n).unwrap();
        assert_eq!(out.written(), n.to_string().as_bytes());
    }
}

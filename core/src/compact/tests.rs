use super::{to_end, to_front};

/// Every region of a 12-byte buffer moved to the front: the bytes arrive in order and the
/// returned length is the region's.
#[test]
fn moves_every_region_in_order() {
    for start in 0..=12 {
        for end in start..=12 {
            let mut buf: [u8; 12] = core::array::from_fn(|i| i as u8);
            let len = to_front(&mut buf, start, end);
            assert_eq!(len, end - start);
            let want: [u8; 12] = core::array::from_fn(|i| i as u8);
            assert_eq!(&buf[..len], &want[start..end], "start {start} end {end}");
        }
    }
}

/// Bounds past the buffer are clamped, never a panic.
#[test]
fn clamps_out_of_range_bounds() {
    let mut buf = *b"abcdef";
    assert_eq!(to_front(&mut buf, 4, 99), 2);
    assert_eq!(&buf[..2], b"ef");
    assert_eq!(to_front(&mut buf, 9, 99), 0);
    assert_eq!(to_front(&mut buf, 5, 3), 0);
}

/// `to_end` then dropping the last element is `Vec::remove`; an index past the end
/// changes nothing.
#[test]
fn to_end_keeps_the_order_of_the_rest() {
    for len in 0..6u8 {
        for i in 0..7 {
            let mut v: Vec<u8> = (0..len).collect();
            let mut want: Vec<u8> = (0..len).collect();
            to_end(&mut v, i);
            if i < want.len() {
                let x = want.remove(i);
                want.push(x);
            }
            assert_eq!(v, want, "len {len} i {i}");
        }
    }
}

use super::*;

#[test]
fn crc32_check_value() {
    let mut c = Crc32::new();
    c.update(b"123456789");
    assert_eq!(c.value(), 0xCBF4_3926);
}

/// A header with every optional field, FHCRC computed over the rest.
fn full_header() -> ([u8; 64], usize) {
    let mut h = [0u8; 64];
    let fixed = [
        0x1F,
        0x8B,
        8,
        FEXTRA | FNAME | FCOMMENT | FHCRC,
        1,
        2,
        3,
        4,
        0,
        3,
    ];
    let rest: &[u8] = &[3, 0, b'a', b'b', b'c', b'f', b'.', b't', 0, b'h', b'i', 0];
    h[..10].copy_from_slice(&fixed);
    h[10..10 + rest.len()].copy_from_slice(rest);
    let n = 10 + rest.len();
    let mut crc = Crc32::new();
    crc.update(&h[..n]);
    h[n..n + 2].copy_from_slice(&((crc.value() & 0xFFFF) as u16).to_le_bytes());
    (h, n + 2)
}

#[test]
fn header_with_all_fields_any_split() {
    let (h, n) = full_header();
    let mut input = [0u8; 70];
    input[..n].copy_from_slice(&h[..n]);
    input[n] = 0xAA; // first deflate byte, must not be consumed
    for split in 0..=n + 1 {
        let mut p = GzipHeader::new();
        let (a, done) = p.push(&input[..split]).unwrap();
        assert_eq!(done, split >= n);
        if !done {
            let (b, done) = p.push(&input[a..n + 1]).unwrap();
            assert!(done);
            assert_eq!(a + b, n);
        }
    }
}

#[test]
fn header_errors() {
    assert_eq!(
        GzipHeader::new().push(&[0x1F, 0x8C]),
        Err(GzipError::BadMagic)
    );
    assert_eq!(
        GzipHeader::new().push(&[0x1F, 0x8B, 8, 0x20]),
        Err(GzipError::ReservedFlags)
    );
    let (mut h, n) = full_header();
    h[n - 1] ^= 1;
    assert_eq!(GzipHeader::new().push(&h[..n]), Err(GzipError::HeaderCrc));
    let minimal = [0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 255];
    assert_eq!(GzipHeader::new().push(&minimal), Ok((10, true)));
}

#[test]
fn trailer_checks_crc_and_size() {
    let mut t = GzipTrailer::new();
    assert_eq!(t.push(&[1, 0, 0, 0], 1, 5), Ok((4, false)));
    assert_eq!(t.push(&[5, 0, 0, 0, 9], 1, 5), Ok((4, true)));
    assert_eq!(
        GzipTrailer::new().push(&[2, 0, 0, 0, 5, 0, 0, 0], 1, 5),
        Err(GzipError::Crc)
    );
    assert_eq!(
        GzipTrailer::new().push(&[1, 0, 0, 0, 6, 0, 0, 0], 1, 5),
        Err(GzipError::Size)
    );
}

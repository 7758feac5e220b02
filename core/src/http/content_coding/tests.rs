use super::*;

#[test]
fn zlib_header_detection() {
    assert!(is_zlib_header(0x78, 0x9C));
    assert!(is_zlib_header(0x78, 0x01));
    assert!(is_zlib_header(0x78, 0xDA));
    assert!(is_zlib_header(0x08, 0x1D));
    assert!(!is_zlib_header(0x78, 0x9D));
    assert!(!is_zlib_header(0xF3, 0x48));
    assert!(!is_zlib_header(0x78, 0xBB)); // preset dictionary
}

#[test]
fn encodings_combine() {
    assert_eq!(
        ContentEncoding::Identity.then(ContentEncoding::Gzip),
        ContentEncoding::Gzip
    );
    assert_eq!(
        ContentEncoding::Gzip.then(ContentEncoding::Identity),
        ContentEncoding::Gzip
    );
    assert_eq!(
        ContentEncoding::Gzip.then(ContentEncoding::Deflate),
        ContentEncoding::Other
    );
    assert_eq!(ContentEncoding::from_header(b""), ContentEncoding::Identity);
}

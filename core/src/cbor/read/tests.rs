use super::*;

#[test]
fn nested_indefinite_containers_and_tags() {
    // {_ "a": [_ 1, [2]], "b": 1("x")} then a definite map nested in it.
    let bytes = [
        0xbf, 0x61, b'a', 0x9f, 0x01, 0x81, 0x02, 0xff, 0x61, b'b', 0xc1, 0x61, b'x', 0xff,
    ];
    let item = parse(&bytes, 3).unwrap();
    assert_eq!(parse(&bytes, 2).unwrap_err().kind, ErrorKind::TooDeep);
    let a = item.get("a").unwrap();
    assert_eq!(a.as_raw(), &[0x9f, 0x01, 0x81, 0x02, 0xff]);
    let inner: Vec<_> = a.elements().collect();
    assert_eq!(inner.len(), 2);
    assert_eq!(inner[1].elements().next().unwrap().as_u64(), Some(2));
    assert_eq!(item.get("b").unwrap().as_str(), Some("x"));
    assert_eq!(item.entries().count(), 2);
}

#[test]
fn every_truncation_is_an_error_and_no_input_panics() {
    let bytes = [
        0xa2, 0x61, b'k', 0x9f, 0x7f, 0x61, b'x', 0xff, 0xfb, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0x61,
        b'z', 0xc2, 0x41, 0x01,
    ];
    assert!(parse(&bytes, 4).is_ok());
    for end in 0..bytes.len() {
        assert!(parse(&bytes[..end], 4).is_err(), "{end}");
    }
    // Every byte value at every position: an error or an item, never a panic.
    for at in 0..bytes.len() {
        for b in 0..=255u8 {
            let mut v = bytes;
            v[at] = b;
            if let Ok(item) = parse(&v, 4) {
                let _ = item.entries().count() + item.elements().count();
            }
        }
    }
}

#[test]
fn hostile_inputs() {
    // A stray break, a reserved head, invalid UTF-8, deep nesting past the hard cap,
    // a huge length claimed by a short input.
    assert_eq!(parse(&[0xff], 4).unwrap_err().kind, ErrorKind::Malformed);
    assert_eq!(parse(&[0x1c], 4).unwrap_err().kind, ErrorKind::Malformed);
    assert_eq!(
        parse(&[0x61, 0xff], 4).unwrap_err().kind,
        ErrorKind::Malformed
    );
    let deep = [0x81u8; 200];
    assert_eq!(parse(&deep, 1000).unwrap_err().kind, ErrorKind::TooDeep);
    let deep_indef = [0x9fu8; 200];
    assert_eq!(
        parse(&deep_indef, 1000).unwrap_err().kind,
        ErrorKind::TooDeep
    );
    assert!(parse(&[0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], 4).is_err());
    assert!(parse(&[0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], 4).is_err());
    assert!(parse(&[], 4).is_err());
}

use super::*;

fn written(f: impl FnOnce(&mut Cursor<'_>) -> Result<(), WriteError>) -> Vec<u8> {
    let mut buf = [0u8; 128];
    let mut out = Cursor::new(&mut buf);
    f(&mut out).unwrap();
    out.written().to_vec()
}

#[test]
fn integers_at_every_width_edge() {
    for (n, bytes) in [
        (0u64, &[0x00][..]),
        (23, &[0x17]),
        (24, &[0x18, 24]),
        (255, &[0x18, 0xff]),
        (256, &[0x19, 0x01, 0x00]),
        (65535, &[0x19, 0xff, 0xff]),
        (65536, &[0x1a, 0, 1, 0, 0]),
        (u64::from(u32::MAX), &[0x1a, 0xff, 0xff, 0xff, 0xff]),
        (
            u64::MAX,
            &[0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        ),
    ] {
        assert_eq!(written(|o| Ok(u64(o, n)?)), bytes, "{n}");
    }
    assert_eq!(written(|o| Ok(i64(o, -1)?)), [0x20]);
    assert_eq!(written(|o| Ok(i64(o, -500)?)), [0x39, 0x01, 0xf3]);
    assert_eq!(
        written(|o| Ok(i64(o, i64::MIN)?)),
        [0x3b, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
    );
}

#[test]
fn json_values_transcode_and_read_back() {
    let text = r#"{"a":[1,-2,3.25,"x\n",true,false,null,{}],"big":18446744073709551615,"neg":-9223372036854775809,"e":1e2}"#;
    let bytes = written(|o| json(o, text));
    let item = crate::cbor::parse(&bytes, 8).unwrap();
    let a: Vec<_> = item.get("a").unwrap().elements().collect();
    assert_eq!(a.len(), 8);
    assert_eq!(a[0].as_u64(), Some(1));
    assert_eq!(a[1].as_raw(), [0x21]);
    assert_eq!(a[2].as_raw(), [0xfb, 0x40, 0x0a, 0, 0, 0, 0, 0, 0]);
    assert_eq!(a[3].as_str(), Some("x\n"));
    assert_eq!(a[4].as_raw(), [0xf5]);
    assert!(a[6].is_null() && a[7].is_map() && a[7].is_empty());
    assert_eq!(item.get("big").unwrap().as_u64(), Some(u64::MAX));
    // Beyond 64-bit integers: a float, as the JSON reader reads it.
    assert_eq!(item.get("neg").unwrap().as_raw()[0], 0xfb);
    assert_eq!(item.get("e").unwrap().as_raw()[0], 0xfb);
}

#[test]
fn full_buffers_and_deep_values_are_errors() {
    let text = r#"{"k":["a","b",{"c":1.5}]}"#;
    let need = written(|o| json(o, text)).len();
    for size in 0..need {
        let mut buf = vec![0u8; size];
        assert!(matches!(
            json(&mut Cursor::new(&mut buf), text),
            Err(WriteError::Encode(_))
        ));
    }
    let deep = "[".repeat(40) + &"]".repeat(40);
    let mut buf = [0u8; 64];
    assert!(matches!(
        json(&mut Cursor::new(&mut buf), &deep),
        Err(WriteError::InvalidJson {
            kind: ErrorKind::TooDeep,
            ..
        })
    ));
}

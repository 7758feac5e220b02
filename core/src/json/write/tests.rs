use super::*;
use crate::json::{parse, testing::Buf};

fn written<const N: usize>(f: impl FnOnce(&mut Cursor<'_>) -> Result<(), WriteError>) -> Buf<N> {
    let mut buf = [0u8; N];
    let mut out = Cursor::new(&mut buf);
    f(&mut out).unwrap();
    let mut b = Buf::new();
    b.push(out.written());
    b
}

#[test]
fn every_control_character_is_escaped() {
    let mut all = Buf::<64>::new();
    for b in 0u8..0x20 {
        all.push(&[b]);
    }
    let out = written::<256>(|o| string(o, all.as_str()));
    assert_eq!(
        out,
        r#""\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f""#
    );
    // Round trip through the reader.
    let v = parse(out.as_str(), 0).unwrap();
    assert!(v.as_str().unwrap() == all.as_str());
}

#[test]
fn quotes_backslashes_and_utf8() {
    for s in [
        "",
        "plain",
        "\"",
        "\\",
        "a\"b\\c/d",
        "héllo wörld 😀 \u{7f} \u{2028}",
        "\"\\\"\\",
    ] {
        let out = written::<128>(|o| string(o, s));
        let v = parse(out.as_str(), 0).unwrap();
        assert!(v.as_str().unwrap() == s, "{s:?} -> {out:?}");
    }
    assert_eq!(written::<32>(|o| string(o, "é\"😀")), "\"é\\\"😀\"");
}

/// Strings are copied a word at a time between escapes: every escape at every offset
/// of a word, alone and with one at the end, is written as the plain rule of one byte at
/// a time says (the forms themselves are pinned above), and reads back as the text.
#[test]
fn escapes_at_every_offset_are_written_as_byte_by_byte() {
    /// The rule, a byte at a time: `"` and `\\` escaped, control characters in their
    /// short or `\u00XX` form, everything else as it is.
    fn by_byte(text: &str) -> Buf<256> {
        let mut b = Buf::new();
        b.push(b"\"");
        for &c in text.as_bytes() {
            match c {
                b'"' => b.push(b"\\\""),
                b'\\' => b.push(b"\\\\"),
                b'\n' => b.push(b"\\n"),
                b'\t' => b.push(b"\\t"),
                b'\r' => b.push(b"\\r"),
                0x08 => b.push(b"\\b"),
                0x0c => b.push(b"\\f"),
                0..=0x1f => b
                    .push(b"\\u00")
                    .push(&[HEX[usize::from(c >> 4)], HEX[usize::from(c & 15)]]),
                _ => b.push(&[c]),
            };
        }
        b.push(b"\"");
        b
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for len in 0..20 {
        for at in 0..len {
            for special in [
                '"', '\\', '\n', '\r', '\u{8}', '\u{1}', '\u{1f}', 'é', '\u{7f}', '😀',
            ] {
                for also_last in [false, true] {
                    let mut text = Buf::<128>::new();
                    for i in 0..len {
                        let c = if i == at { special } else { 'x' };
                        text.push(c.encode_utf8(&mut [0; 4]).as_bytes());
                    }
                    if also_last {
                        text.push(b"\t");
                    }
                    let out = written::<256>(|o| string(o, text.as_str()));
                    assert_eq!(
                        out.as_str(),
                        by_byte(text.as_str()).as_str(),
                        "{:?}",
                        text.as_str()
                    );
                    let v = parse(out.as_str(), 0).unwrap();
                    assert!(v.as_str().unwrap() == text.as_str());
                }
            }
        }
    }
}

#[test]
fn integers_at_the_edges() {
    let out = written::<128>(|o| {
        array(o, |a| {
            a.u64(0)?
                .u64(u64::MAX)?
                .i64(i64::MIN)?
                .i64(i64::MAX)?
                .i64(-1)?;
            Ok(())
        })
    });
    assert_eq!(
        out,
        "[0,18446744073709551615,-9223372036854775808,9223372036854775807,-1]"
    );
}

#[test]
fn nesting_and_commas() {
    let out = written::<128>(|o| {
        object(o, |w| {
            w.object("a", |_| Ok(()))?;
            w.array("b", |a| {
                a.array(|_| Ok(()))?.object(|o| {
                    o.null("n")?.bool("f", false)?;
                    Ok(())
                })?;
                Ok(())
            })?;
            w.raw("c", "\t\"x\" ")?;
            Ok(())
        })
    });
    assert_eq!(out, r#"{"a":{},"b":[[],{"n":null,"f":false}],"c":"x"}"#);
    assert!(parse(out.as_str(), 8).is_ok());
}

#[test]
fn invalid_raw_values_are_rejected_before_writing() {
    let mut buf = [0u8; 64];
    let mut out = Cursor::new(&mut buf);
    for (bad, offset, kind) in [
        ("", 0, ErrorKind::UnexpectedEnd),
        ("{\"a\":}", 5, ErrorKind::ExpectedValue),
        ("1 2", 2, ErrorKind::TrailingData),
        ("\"\n\"", 1, ErrorKind::ControlCharacter),
    ] {
        assert_eq!(
            raw(&mut out, bad),
            Err(WriteError::InvalidJson { offset, kind })
        );
    }
    let r = object(&mut out, |o| {
        o.u64("ok", 1)?.raw("bad", "[")?;
        Ok(())
    });
    assert!(matches!(r, Err(WriteError::InvalidJson { .. })));
    // Only the part before the failing member was written.
    assert_eq!(out.written(), br#"{"ok":1"#);
}

#[test]
fn full_buffers_fail_at_every_size() {
    let doc = |o: &mut Cursor<'_>| {
        object(o, |w| {
            w.string("channel", "a\"\u{1}é")?
                .u64("id", 12345)?
                .i64("n", -5)?;
            w.array("x", |a| {
                a.raw("{\"k\":[1]}")?.null()?;
                Ok(())
            })?;
            Ok(())
        })
    };
    let full = written::<128>(doc);
    for cap in 0..full.len() {
        let mut buf = [0u8; 128];
        let mut out = Cursor::new(&mut buf[..cap]);
        assert_eq!(
            doc(&mut out),
            Err(WriteError::Encode(EncodeError::BufferTooSmall {
                capacity: cap
            }))
        );
    }
}

#[test]
fn extras_override_and_deduplicate() {
    let extras = parse_object(r#"{"x":1,"b":"B","x":2,"\u0061":"A"}"#).unwrap();
    let out = written::<128>(|o| {
        object_with_extras(o, Some(extras), |w| {
            w.string("a", "typed")?
                .object("b", |_| Ok(()))?
                .u64("c", 3)?;
            Ok(())
        })
    });
    assert_eq!(out, r#"{"c":3,"b":"B","x":2,"\u0061":"A"}"#);
    assert_eq!(parse_object("{}").map(|o| o.is_empty()), Ok(true));
    let out = written::<32>(|o| object_with_extras(o, Some(parse_object("{}")?), |_| Ok(())));
    assert_eq!(out, "{}");
    assert_eq!(parse_object("null"), Err(WriteError::NotAnObject));
    assert!(matches!(
        parse_object("{"),
        Err(WriteError::InvalidJson { offset: 1, .. })
    ));
}

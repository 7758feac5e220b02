//! Writing CBOR into a [`Cursor`]: heads with minimal-width arguments, definite lengths,
//! text keys, 64-bit floats — the choices of the Python SDK's encoder, so PDUs match it
//! byte for byte — and [`json`](fn@json), the transcoder from a JSON value to CBOR.
//!
//! ```
//! use benchlink_core::cbor::write;
//! use benchlink_core::http::Cursor;
//! let mut buf = [0u8; 32];
//! let mut out = Cursor::new(&mut buf);
//! write::json(&mut out, r#"{"n": 7, "f": 1.5, "s": "\u00e9"}"#).unwrap();
//! assert_eq!(
//!     out.written(),
//!     &[0xa3, 0x61, b'n', 0x07, 0x61, b'f', 0xfb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0x61, b's', 0x62, 0xc3, 0xa9]
//! );
//! ```

use crate::http::{Cursor, EncodeError};
use crate::json::{self, ErrorKind, JsonStr, Value, WriteError};

const UNSIGNED: u8 = 0x00;
const NEGATIVE: u8 = 0x20;
const BYTES: u8 = 0x40;
pub(super) const TEXT: u8 = 0x60;
pub(super) const ARRAY: u8 = 0x80;
pub(super) const MAP: u8 = 0xa0;

/// A head: major type and its argument, in the fewest bytes.
pub(super) fn head(out: &mut Cursor<'_>, major: u8, n: u64) -> Result<(), EncodeError> {
    let be = n.to_be_bytes();
    let (info, tail) = match n {
        // Arguments below 24 live in the head byte itself.
        0..=23 => (n as u8, &be[8..]),
        24..=0xff => (24, &be[7..]),
        0x100..=0xffff => (25, &be[6..]),
        0x1_0000..=0xffff_ffff => (26, &be[4..]),
        _ => (27, &be[..]),
    };
    out.push(&[major | info])?;
    out.push(tail)
}

/// An unsigned integer.
///
/// ```
/// # use benchlink_core::{cbor::write, http::Cursor};
/// let mut buf = [0u8; 9];
/// let mut out = Cursor::new(&mut buf);
/// write::u64(&mut out, 500).unwrap();
/// assert_eq!(out.written(), &[0x19, 0x01, 0xf4]);
/// ```
pub fn u64(out: &mut Cursor<'_>, n: u64) -> Result<(), EncodeError> {
    head(out, UNSIGNED, n)
}

/// A signed integer.
pub fn i64(out: &mut Cursor<'_>, n: i64) -> Result<(), EncodeError> {
    match u64::try_from(n) {
        Ok(n) => head(out, UNSIGNED, n),
        // -1 - n, without overflow for i64::MIN.
        Err(_) => head(out, NEGATIVE, !(n as u64)),
    }
}

/// A 32-bit float (`fa` + 4 bytes): what a typed `f32` is written as, exactly.
pub fn f32(out: &mut Cursor<'_>, x: f32) -> Result<(), EncodeError> {
    out.push(&[0xfa])?;
    out.push(&x.to_bits().to_be_bytes())
}

/// A 64-bit float (`fb` + 8 bytes), as the Python SDK writes every float.
pub fn f64(out: &mut Cursor<'_>, x: f64) -> Result<(), EncodeError> {
    out.push(&[0xfb])?;
    out.push(&x.to_bits().to_be_bytes())
}

/// `true` or `false`.
pub fn bool(out: &mut Cursor<'_>, b: bool) -> Result<(), EncodeError> {
    out.push(&[if b { 0xf5 } else { 0xf4 }])
}

/// `null`.
pub fn null(out: &mut Cursor<'_>) -> Result<(), EncodeError> {
    out.push(&[0xf6])
}

/// A text string.
pub fn str(out: &mut Cursor<'_>, s: &str) -> Result<(), EncodeError> {
    head(out, TEXT, s.len() as u64)?;
    out.push_str(s)
}

/// A byte string.
pub fn bytes(out: &mut Cursor<'_>, b: &[u8]) -> Result<(), EncodeError> {
    head(out, BYTES, b.len() as u64)?;
    out.push(b)
}

/// The head of a definite-length map of `len` members; the members follow.
///
/// ```
/// # use benchlink_core::{cbor::write, http::Cursor};
/// let mut buf = [0u8; 16];
/// let mut out = Cursor::new(&mut buf);
/// write::map(&mut out, 2).unwrap();
/// write::str(&mut out, "k").unwrap();
/// write::bytes(&mut out, &[0x00, 0xff]).unwrap();
/// write::str(&mut out, "n").unwrap();
/// write::i64(&mut out, -1).unwrap();
/// assert_eq!(out.written(), &[0xa2, 0x61, b'k', 0x42, 0x00, 0xff, 0x61, b'n', 0x20]);
/// ```
pub fn map(out: &mut Cursor<'_>, len: u64) -> Result<(), EncodeError> {
    head(out, MAP, len)
}

/// The head of a definite-length array of `len` elements; the elements follow.
pub fn array(out: &mut Cursor<'_>, len: u64) -> Result<(), EncodeError> {
    head(out, ARRAY, len)
}

/// A JSON string's decoded text as a CBOR text string (escapes resolved).
pub fn json_str(out: &mut Cursor<'_>, s: JsonStr<'_>) -> Result<(), EncodeError> {
    match s.as_plain() {
        Some(plain) => str(out, plain),
        None => {
            let len = s.chars().map(char::len_utf8).sum::<usize>();
            head(out, TEXT, len as u64)?;
            s.chars()
                .try_for_each(|c| out.push_str(c.encode_utf8(&mut [0; 4])))
        }
    }
}

/// Validates `text` as one JSON value and writes its CBOR form: integers that fit 64 bits
/// as integers, other numbers as 64-bit floats, objects as maps with text keys in their
/// order, arrays as arrays. Nesting is limited to [`super::DEFAULT_MAX_DEPTH`] levels
/// (what a CBOR peer of the RTM protocol reads back).
///
/// ```
/// # use benchlink_core::{cbor::write, http::Cursor, json::WriteError};
/// let mut buf = [0u8; 16];
/// assert!(matches!(write::json(&mut Cursor::new(&mut buf), "[1,"), Err(WriteError::InvalidJson { .. })));
/// ```
pub fn json(out: &mut Cursor<'_>, text: &str) -> Result<(), WriteError> {
    let value =
        json::parse(text, super::DEFAULT_MAX_DEPTH).map_err(|e| WriteError::InvalidJson {
            offset: e.offset,
            kind: e.kind,
        })?;
    json_value(out, value, super::DEFAULT_MAX_DEPTH)
}

/// Writes a parsed JSON value; `depth` is how many more containers may open (the value
/// was parsed with that limit, so it is only a guard for the recursion).
pub fn json_value(out: &mut Cursor<'_>, value: Value<'_>, depth: usize) -> Result<(), WriteError> {
    let too_deep = || WriteError::InvalidJson {
        offset: 0,
        kind: ErrorKind::TooDeep,
    };
    if let Some(object) = value.as_object() {
        let inner = depth.checked_sub(1).ok_or_else(too_deep)?;
        map(out, object.members().count() as u64)?;
        for (key, member) in object.members() {
            json_str(out, key)?;
            json_value(out, member, inner)?;
        }
    } else if let Some(elements) = value.as_array() {
        let inner = depth.checked_sub(1).ok_or_else(too_deep)?;
        array(out, elements.elements().count() as u64)?;
        for element in elements.elements() {
            json_value(out, element, inner)?;
        }
    } else if let Some(s) = value.as_str() {
        json_str(out, s)?;
    } else if let Some(b) = value.as_bool() {
        bool(out, b)?;
    } else if value.is_null() {
        null(out)?;
    } else if let Some(n) = value.as_number() {
        match (n.as_u64(), n.as_i64()) {
            (Some(u), _) if n.is_integer() => u64(out, u)?,
            (_, Some(i)) if n.is_integer() => i64(out, i)?,
            _ => f64(out, n.as_f64())?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
}

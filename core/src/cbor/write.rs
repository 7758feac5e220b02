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
mod tests;

//! A JSON writer over a [`Cursor`]: objects and arrays with automatic commas, strings
//! escaped per RFC 8259, integers without float code, and pre-serialized values that are
//! validated before they are spliced in — so whatever this module writes is valid JSON.
//!
//! Why closures: a container is opened, filled by the caller's closure and closed by the
//! writer, so brackets always balance and commas are never forgotten, without a stack of
//! open containers (the nesting lives on the call stack of the caller's code).
//!
//! Escaping follows the C SDK's escaper: `"` and `\` are escaped, control characters
//! below U+0020 become `\b \f \n \r \t` or `\u00XX`, and everything else — UTF-8
//! included — passes through unchanged. Channel names get the same treatment as any
//! other string (the Python SDK splices them in unescaped), so no input can break the
//! document.
//!
//! ```
//! use benchlink_core::http::Cursor;
//! use benchlink_core::json::write;
//! let mut buf = [0u8; 96];
//! let mut out = Cursor::new(&mut buf);
//! write::object(&mut out, |o| {
//!     o.string("channel", "a\"b")?.u64("n", 7)?.raw("msg", r#" {"x": [1, 2]} "#)?;
//!     o.array("tags", |a| {
//!         a.string("é\n")?.bool(true)?.null()?;
//!         Ok(())
//!     })?;
//!     Ok(())
//! })
//! .unwrap();
//! assert_eq!(
//!     out.written(),
//!     r#"{"channel":"a\"b","n":7,"msg":{"x": [1, 2]},"tags":["é\n",true,null]}"#.as_bytes()
//! );
//! ```

use core::fmt;

use super::{ErrorKind, Object, MAX_DEPTH};
use crate::http::{Cursor, EncodeError};

/// Why a value could not be written.
///
/// ```
/// use benchlink_core::http::{Cursor, EncodeError};
/// use benchlink_core::json::{write, ErrorKind, WriteError};
/// let mut buf = [0u8; 4];
/// assert_eq!(
///     write::string(&mut Cursor::new(&mut buf), "hello"),
///     Err(WriteError::Encode(EncodeError::BufferTooSmall { capacity: 4 }))
/// );
/// assert_eq!(
///     write::raw(&mut Cursor::new(&mut buf), "[1,"),
///     Err(WriteError::InvalidJson { offset: 3, kind: ErrorKind::UnexpectedEnd })
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WriteError {
    /// The output did not fit ([`EncodeError::BufferTooSmall`]). What was written so far is
    /// a truncated document: discard it and retry with a larger buffer.
    Encode(EncodeError),
    /// A pre-serialized value handed to [`raw`] (or a `raw` member) is not one valid JSON
    /// value; `offset` is the byte offset into that value's text.
    InvalidJson {
        /// Where in the caller's text the problem is.
        offset: usize,
        /// What is wrong there.
        kind: ErrorKind,
    },
    /// Pre-serialized members (extra arguments, a request body) must be a JSON object;
    /// this is some other valid JSON value.
    NotAnObject,
    /// A typed value (feature `serde`) has no JSON form: its `Serialize` implementation
    /// reported an error, a map key is not a string, number, bool or unit variant, or an
    /// integer is beyond 64 bits.
    Unserializable,
    /// A pre-serialized CBOR value (a message) is not one well-formed CBOR item;
    /// `offset` is the byte offset into it.
    InvalidCbor {
        /// Where in the caller's bytes the problem is.
        offset: usize,
    },
    /// A typed value (feature `serde`) serialized longer than the `max` bytes it was
    /// written under (the messaging client's
    /// [`Config::max_message_size`](crate::rtm::Config::max_message_size)).
    TooLarge {
        /// The limit.
        max: usize,
    },
}

impl From<EncodeError> for WriteError {
    fn from(e: EncodeError) -> Self {
        WriteError::Encode(e)
    }
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Encode(e) => fmt::Display::fmt(e, f),
            WriteError::InvalidJson { offset, kind } => {
                let e = super::Error {
                    offset: *offset,
                    kind: *kind,
                };
                write!(f, "pre-serialized value: {e}")
            }
            WriteError::NotAnObject => f.write_str("pre-serialized members are not a JSON object"),
            WriteError::Unserializable => f.write_str("value has no JSON form"),
            WriteError::InvalidCbor { offset } => {
                write!(
                    f,
                    "pre-serialized value: not well-formed CBOR at byte {offset}"
                )
            }
            WriteError::TooLarge { max } => write!(f, "value longer than {max} bytes"),
        }
    }
}

impl core::error::Error for WriteError {}

/// Validates `json` as one JSON value (any nesting up to [`MAX_DEPTH`]) and returns it
/// without surrounding whitespace.
fn validate(json: &str) -> Result<&str, WriteError> {
    super::parse(json, MAX_DEPTH)
        .map(|v| v.as_raw())
        .map_err(|e| WriteError::InvalidJson {
            offset: e.offset,
            kind: e.kind,
        })
}

/// Validates `json` as a JSON object, for members to merge into one being written.
///
/// ```
/// use benchlink_core::json::{write, WriteError};
/// assert_eq!(write::parse_object(r#" {"a":1} "#).map(|o| o.as_raw()), Ok(r#"{"a":1}"#));
/// assert_eq!(write::parse_object("[1]"), Err(WriteError::NotAnObject));
/// ```
pub fn parse_object(json: &str) -> Result<Object<'_>, WriteError> {
    let raw = validate(json)?;
    super::Value::new(raw)
        .as_object()
        .ok_or(WriteError::NotAnObject)
}

/// Writes `s` as a quoted JSON string, escaped (see the [module docs](self)).
///
/// ```
/// use benchlink_core::http::Cursor;
/// let mut buf = [0u8; 32];
/// let mut out = Cursor::new(&mut buf);
/// benchlink_core::json::write::string(&mut out, "q\"\\\u{1}\t€").unwrap();
/// assert_eq!(out.written(), "\"q\\\"\\\\\\u0001\\t€\"".as_bytes());
/// ```
pub fn string(out: &mut Cursor<'_>, s: &str) -> Result<(), WriteError> {
    out.push(b"\"")?;
    escaped(out, s)?;
    Ok(out.push(b"\"")?)
}

/// Writes the escaped content of a JSON string, without the quotes.
pub(crate) fn escaped(out: &mut Cursor<'_>, s: &str) -> Result<(), WriteError> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hex = |n: u8| HEX.get(usize::from(n & 0xF)).copied().unwrap_or(b'0');
    let mut rest = s.as_bytes();
    while let Some(i) = super::plain_run(rest, true) {
        let b = rest.get(i).copied().unwrap_or_default();
        // The letter after the backslash and the escape's length: a few comparisons,
        // not a jump table over every byte up to `\`.
        let (letter, len) = match b {
            b'"' | b'\\' => (b, 2),
            b'\n' => (b'n', 2),
            b'\r' => (b'r', 2),
            b'\t' => (b't', 2),
            0x08 => (b'b', 2),
            0x0C => (b'f', 2),
            _ => (b'u', 6),
        };
        let escape = [b'\\', letter, b'0', b'0', hex(b >> 4), hex(b)];
        out.push(rest.get(..i).unwrap_or_default())?;
        out.push(escape.get(..len).unwrap_or_default())?;
        rest = rest.get(i.saturating_add(1)..).unwrap_or_default();
    }
    Ok(out.push(rest)?)
}

/// Writes a signed integer in decimal without `core::fmt`.
fn int(out: &mut Cursor<'_>, n: i64) -> Result<(), WriteError> {
    if n < 0 {
        out.push(b"-")?;
    }
    Ok(out.push_u64(n.unsigned_abs())?)
}

/// Writes a pre-serialized JSON value — a user's message, say — after checking that it is
/// exactly one valid JSON value, so the document stays valid whatever the caller passes.
/// Surrounding whitespace is dropped; the value itself is copied byte for byte.
///
/// ```
/// use benchlink_core::http::Cursor;
/// let mut buf = [0u8; 16];
/// let mut out = Cursor::new(&mut buf);
/// benchlink_core::json::write::raw(&mut out, " [1, \"a\"]\n").unwrap();
/// assert_eq!(out.written(), br#"[1, "a"]"#);
/// ```
pub fn raw(out: &mut Cursor<'_>, json: &str) -> Result<(), WriteError> {
    let value = validate(json)?;
    Ok(out.push_str(value)?)
}

/// Writes an object: `{`, the members `f` writes, `}`.
///
/// ```
/// use benchlink_core::http::Cursor;
/// let mut buf = [0u8; 32];
/// let mut out = Cursor::new(&mut buf);
/// benchlink_core::json::write::object(&mut out, |o| {
///     o.i64("t", -3)?.object("e", |_| Ok(()))?;
///     Ok(())
/// })
/// .unwrap();
/// assert_eq!(out.written(), br#"{"t":-3,"e":{}}"#);
/// ```
pub fn object<F>(out: &mut Cursor<'_>, f: F) -> Result<(), WriteError>
where
    F: FnOnce(&mut ObjectWriter<'_, '_>) -> Result<(), WriteError>,
{
    object_with_extras(out, None, f)
}

/// Writes an object whose members are those `f` writes, updated by `extras` the way a
/// Python `dict.update(extras)` would: a member of `f` whose key `extras` also has is
/// dropped, then every member of `extras` is written (when `extras` repeats a key, only
/// its last occurrence is kept). The result never has duplicate keys as long as `f` does
/// not write one key twice.
///
/// This is how caller-supplied extra arguments (`rtm/subscribe` options, `rtm/read`
/// arguments) override the typed ones.
///
/// ```
/// use benchlink_core::http::Cursor;
/// use benchlink_core::json::write;
/// let extras = write::parse_object(r#"{"b":2,"c":3,"c":4}"#).unwrap();
/// let mut buf = [0u8; 32];
/// let mut out = Cursor::new(&mut buf);
/// write::object_with_extras(&mut out, Some(extras), |o| {
///     o.u64("a", 1)?.u64("b", 0)?;
///     Ok(())
/// })
/// .unwrap();
/// assert_eq!(out.written(), br#"{"a":1,"b":2,"c":4}"#);
/// ```
pub fn object_with_extras<F>(
    out: &mut Cursor<'_>,
    extras: Option<Object<'_>>,
    f: F,
) -> Result<(), WriteError>
where
    F: FnOnce(&mut ObjectWriter<'_, '_>) -> Result<(), WriteError>,
{
    out.push(b"{")?;
    let mut w = ObjectWriter {
        out,
        first: true,
        extras,
    };
    f(&mut w)?;
    w.finish()
}

/// Writes an array: `[`, the elements `f` writes, `]`.
///
/// ```
/// use benchlink_core::http::Cursor;
/// let mut buf = [0u8; 16];
/// let mut out = Cursor::new(&mut buf);
/// benchlink_core::json::write::array(&mut out, |a| {
///     a.u64(1)?.array(|_| Ok(()))?;
///     Ok(())
/// })
/// .unwrap();
/// assert_eq!(out.written(), b"[1,[]]");
/// ```
pub fn array<F>(out: &mut Cursor<'_>, f: F) -> Result<(), WriteError>
where
    F: FnOnce(&mut ArrayWriter<'_, '_>) -> Result<(), WriteError>,
{
    out.push(b"[")?;
    let mut w = ArrayWriter { out, first: true };
    f(&mut w)?;
    Ok(w.out.push(b"]")?)
}

/// Writes the members of one object; made by [`object`] and its nested variants. Every
/// method writes one `"key":value` member (with the comma before it when needed) and
/// returns the writer again for chaining.
#[derive(Debug)]
pub struct ObjectWriter<'w, 'b> {
    out: &'w mut Cursor<'b>,
    first: bool,
    /// Members that will be written at the end and override same-named ones before.
    extras: Option<Object<'w>>,
}

impl<'b> ObjectWriter<'_, 'b> {
    /// The extras (the last of each key) and `}`: out of the generic callers, one copy.
    fn finish(&mut self) -> Result<(), WriteError> {
        if let Some(extras) = self.extras.take() {
            let mut members = extras.members();
            while let Some((key, value)) = members.next() {
                // The members after this one: where the iterator is now.
                let repeated_later = members.clone().any(|(later, _)| later == key);
                if !repeated_later {
                    self.separator()?;
                    // Keys and values of a validated object are valid JSON text already.
                    self.out.push(b"\"")?;
                    self.out.push_str(key.as_raw())?;
                    self.out.push(b"\":")?;
                    self.out.push_str(value.as_raw())?;
                }
            }
        }
        Ok(self.out.push(b"}")?)
    }

    fn separator(&mut self) -> Result<(), WriteError> {
        if !core::mem::replace(&mut self.first, false) {
            self.out.push(b",")?;
        }
        Ok(())
    }

    /// Writes `,"key":` unless `extras` overrides `key`; says whether the value follows.
    fn key(&mut self, key: &str) -> Result<bool, WriteError> {
        if self.extras.is_some_and(|e| e.get(key).is_some()) {
            return Ok(false);
        }
        self.separator()?;
        string(self.out, key)?;
        self.out.push(b":")?;
        Ok(true)
    }

    /// Writes `key` and then whatever `value` writes, unless `key` is overridden.
    pub(crate) fn member(
        &mut self,
        key: &str,
        value: impl FnOnce(&mut Cursor<'b>) -> Result<(), WriteError>,
    ) -> Result<&mut Self, WriteError> {
        if self.key(key)? {
            value(self.out)?;
        }
        Ok(self)
    }

    /// A string member (key and value escaped).
    ///
    /// ```
    /// # use benchlink_core::{http::Cursor, json::write};
    /// let mut buf = [0u8; 32];
    /// let mut out = Cursor::new(&mut buf);
    /// write::object(&mut out, |o| { o.string("k\n", "v\"")?; Ok(()) }).unwrap();
    /// assert_eq!(out.written(), br#"{"k\n":"v\""}"#);
    /// ```
    pub fn string(&mut self, key: &str, value: &str) -> Result<&mut Self, WriteError> {
        self.member(key, |out| string(out, value))
    }

    /// An unsigned integer member (ids, counts, seconds).
    ///
    /// ```
    /// # use benchlink_core::{http::Cursor, json::write};
    /// let mut buf = [0u8; 32];
    /// let mut out = Cursor::new(&mut buf);
    /// write::object(&mut out, |o| { o.u64("id", u64::MAX)?; Ok(()) }).unwrap();
    /// assert_eq!(out.written(), br#"{"id":18446744073709551615}"#);
    /// ```
    pub fn u64(&mut self, key: &str, value: u64) -> Result<&mut Self, WriteError> {
        self.member(key, |out| Ok(out.push_u64(value)?))
    }

    /// A signed integer member.
    ///
    /// ```
    /// # use benchlink_core::{http::Cursor, json::write};
    /// let mut buf = [0u8; 32];
    /// let mut out = Cursor::new(&mut buf);
    /// write::object(&mut out, |o| { o.i64("n", i64::MIN)?; Ok(()) }).unwrap();
    /// assert_eq!(out.written(), br#"{"n":-9223372036854775808}"#);
    /// ```
    pub fn i64(&mut self, key: &str, value: i64) -> Result<&mut Self, WriteError> {
        self.member(key, |out| int(out, value))
    }

    /// A `true`/`false` member.
    ///
    /// ```
    /// # use benchlink_core::{http::Cursor, json::write};
    /// let mut buf = [0u8; 32];
    /// let mut out = Cursor::new(&mut buf);
    /// write::object(&mut out, |o| { o.bool("ff", true)?; Ok(()) }).unwrap();
    /// assert_eq!(out.written(), br#"{"ff":true}"#);
    /// ```
    pub fn bool(&mut self, key: &str, value: bool) -> Result<&mut Self, WriteError> {
        let text: &[u8] = if value { b"true" } else { b"false" };
        self.member(key, |out| Ok(out.push(text)?))
    }

    /// A `null` member.
    ///
    /// ```
    /// # use benchlink_core::{http::Cursor, json::write};
    /// let mut buf = [0u8; 32];
    /// let mut out = Cursor::new(&mut buf);
    /// write::object(&mut out, |o| { o.null("x")?; Ok(()) }).unwrap();
    /// assert_eq!(out.written(), br#"{"x":null}"#);
    /// ```
    pub fn null(&mut self, key: &str) -> Result<&mut Self, WriteError> {
        self.member(key, |out| Ok(out.push(b"null")?))
    }

    /// A member whose value is pre-serialized JSON, validated first (see [`raw`]); on
    /// [`WriteError::InvalidJson`] nothing of the member is written.
    ///
    /// ```
    /// # use benchlink_core::{http::Cursor, json::write};
    /// let mut buf = [0u8; 32];
    /// let mut out = Cursor::new(&mut buf);
    /// write::object(&mut out, |o| { o.raw("message", r#"{"k": 1}"#)?; Ok(()) }).unwrap();
    /// assert_eq!(out.written(), br#"{"message":{"k": 1}}"#);
    /// ```
    pub fn raw(&mut self, key: &str, json: &str) -> Result<&mut Self, WriteError> {
        let value = validate(json)?;
        self.member(key, |out| Ok(out.push_str(value)?))
    }

    /// A member whose value is `value` serialized in place (feature `serde`; see
    /// [`typed::serialize`](super::typed::serialize)).
    ///
    /// ```
    /// # use benchlink_core::{http::Cursor, json::write};
    /// let mut buf = [0u8; 32];
    /// let mut out = Cursor::new(&mut buf);
    /// write::object(&mut out, |o| { o.serialized("m", &("a\n", 2))?; Ok(()) }).unwrap();
    /// assert_eq!(out.written(), br#"{"m":["a\n",2]}"#);
    /// ```
    #[cfg(feature = "serde")]
    pub fn serialized<T: serde::Serialize + ?Sized>(
        &mut self,
        key: &str,
        value: &T,
    ) -> Result<&mut Self, WriteError> {
        self.member(key, |out| super::typed::serialize(out, value))
    }

    /// A nested object member filled by `f` (not called when `key` is overridden).
    ///
    /// ```
    /// # use benchlink_core::{http::Cursor, json::write};
    /// let mut buf = [0u8; 32];
    /// let mut out = Cursor::new(&mut buf);
    /// write::object(&mut out, |o| { o.object("h", |h| { h.u64("count", 1)?; Ok(()) })?; Ok(()) }).unwrap();
    /// assert_eq!(out.written(), br#"{"h":{"count":1}}"#);
    /// ```
    pub fn object<F>(&mut self, key: &str, f: F) -> Result<&mut Self, WriteError>
    where
        F: FnOnce(&mut ObjectWriter<'_, '_>) -> Result<(), WriteError>,
    {
        self.object_with_extras(key, None, f)
    }

    /// A nested object member built like [`object_with_extras`](fn@object_with_extras).
    ///
    /// ```
    /// # use benchlink_core::{http::Cursor, json::write};
    /// let extras = write::parse_object(r#"{"a":"x"}"#).unwrap();
    /// let mut buf = [0u8; 32];
    /// let mut out = Cursor::new(&mut buf);
    /// write::object(&mut out, |o| {
    ///     o.object_with_extras("body", Some(extras), |b| { b.u64("a", 1)?.u64("b", 2)?; Ok(()) })?;
    ///     Ok(())
    /// })
    /// .unwrap();
    /// assert_eq!(out.written(), br#"{"body":{"b":2,"a":"x"}}"#);
    /// ```
    pub fn object_with_extras<F>(
        &mut self,
        key: &str,
        extras: Option<Object<'_>>,
        f: F,
    ) -> Result<&mut Self, WriteError>
    where
        F: FnOnce(&mut ObjectWriter<'_, '_>) -> Result<(), WriteError>,
    {
        self.member(key, |out| object_with_extras(out, extras, f))
    }

    /// A nested array member filled by `f`.
    ///
    /// ```
    /// # use benchlink_core::{http::Cursor, json::write};
    /// let mut buf = [0u8; 32];
    /// let mut out = Cursor::new(&mut buf);
    /// write::object(&mut out, |o| { o.array("c", |a| { a.string("x")?; Ok(()) })?; Ok(()) }).unwrap();
    /// assert_eq!(out.written(), br#"{"c":["x"]}"#);
    /// ```
    pub fn array<F>(&mut self, key: &str, f: F) -> Result<&mut Self, WriteError>
    where
        F: FnOnce(&mut ArrayWriter<'_, '_>) -> Result<(), WriteError>,
    {
        self.member(key, |out| array(out, f))
    }
}

/// Writes the elements of one array; made by [`array`](fn@array) and [`ObjectWriter::array`]. Every
/// method writes one element (with the comma before it when needed).
#[derive(Debug)]
pub struct ArrayWriter<'w, 'b> {
    out: &'w mut Cursor<'b>,
    first: bool,
}

impl<'b> ArrayWriter<'_, 'b> {
    fn element(
        &mut self,
        value: impl FnOnce(&mut Cursor<'b>) -> Result<(), WriteError>,
    ) -> Result<&mut Self, WriteError> {
        if !core::mem::replace(&mut self.first, false) {
            self.out.push(b",")?;
        }
        value(self.out)?;
        Ok(self)
    }

    /// A string element (escaped).
    ///
    /// ```
    /// # use benchlink_core::{http::Cursor, json::write};
    /// let mut buf = [0u8; 16];
    /// let mut out = Cursor::new(&mut buf);
    /// write::array(&mut out, |a| { a.string("a")?.string("\\")?; Ok(()) }).unwrap();
    /// assert_eq!(out.written(), br#"["a","\\"]"#);
    /// ```
    pub fn string(&mut self, value: &str) -> Result<&mut Self, WriteError> {
        self.element(|out| string(out, value))
    }

    /// An unsigned integer element.
    ///
    /// ```
    /// # use benchlink_core::{http::Cursor, json::write};
    /// let mut buf = [0u8; 16];
    /// let mut out = Cursor::new(&mut buf);
    /// write::array(&mut out, |a| { a.u64(0)?.u64(10)?; Ok(()) }).unwrap();
    /// assert_eq!(out.written(), b"[0,10]");
    /// ```
    pub fn u64(&mut self, value: u64) -> Result<&mut Self, WriteError> {
        self.element(|out| Ok(out.push_u64(value)?))
    }

    /// A signed integer element.
    ///
    /// ```
    /// # use benchlink_core::{http::Cursor, json::write};
    /// let mut buf = [0u8; 16];
    /// let mut out = Cursor::new(&mut buf);
    /// write::array(&mut out, |a| { a.i64(-1)?.i64(0)?; Ok(()) }).unwrap();
    /// assert_eq!(out.written(), b"[-1,0]");
    /// ```
    pub fn i64(&mut self, value: i64) -> Result<&mut Self, WriteError> {
        self.element(|out| int(out, value))
    }

    /// A `true`/`false` element.
    ///
    /// ```
    /// # use benchlink_core::{http::Cursor, json::write};
    /// let mut buf = [0u8; 16];
    /// let mut out = Cursor::new(&mut buf);
    /// write::array(&mut out, |a| { a.bool(false)?; Ok(()) }).unwrap();
    /// assert_eq!(out.written(), b"[false]");
    /// ```
    pub fn bool(&mut self, value: bool) -> Result<&mut Self, WriteError> {
        let text: &[u8] = if value { b"true" } else { b"false" };
        self.element(|out| Ok(out.push(text)?))
    }

    /// A `null` element.
    ///
    /// ```
    /// # use benchlink_core::{http::Cursor, json::write};
    /// let mut buf = [0u8; 16];
    /// let mut out = Cursor::new(&mut buf);
    /// write::array(&mut out, |a| { a.null()?; Ok(()) }).unwrap();
    /// assert_eq!(out.written(), b"[null]");
    /// ```
    pub fn null(&mut self) -> Result<&mut Self, WriteError> {
        self.element(|out| Ok(out.push(b"null")?))
    }

    /// A pre-serialized element, validated first (see [`raw`]).
    ///
    /// ```
    /// # use benchlink_core::{http::Cursor, json::write};
    /// let mut buf = [0u8; 16];
    /// let mut out = Cursor::new(&mut buf);
    /// write::array(&mut out, |a| { a.raw(" {} ")?; Ok(()) }).unwrap();
    /// assert_eq!(out.written(), b"[{}]");
    /// ```
    pub fn raw(&mut self, json: &str) -> Result<&mut Self, WriteError> {
        let value = validate(json)?;
        self.element(|out| Ok(out.push_str(value)?))
    }

    /// A nested object element filled by `f`.
    ///
    /// ```
    /// # use benchlink_core::{http::Cursor, json::write};
    /// let mut buf = [0u8; 16];
    /// let mut out = Cursor::new(&mut buf);
    /// write::array(&mut out, |a| { a.object(|o| { o.u64("a", 1)?; Ok(()) })?; Ok(()) }).unwrap();
    /// assert_eq!(out.written(), br#"[{"a":1}]"#);
    /// ```
    pub fn object<F>(&mut self, f: F) -> Result<&mut Self, WriteError>
    where
        F: FnOnce(&mut ObjectWriter<'_, '_>) -> Result<(), WriteError>,
    {
        self.element(|out| object(out, f))
    }

    /// A nested array element filled by `f`.
    ///
    /// ```
    /// # use benchlink_core::{http::Cursor, json::write};
    /// let mut buf = [0u8; 16];
    /// let mut out = Cursor::new(&mut buf);
    /// write::array(&mut out, |a| { a.array(|b| { b.u64(1)?; Ok(()) })?; Ok(()) }).unwrap();
    /// assert_eq!(out.written(), b"[[1]]");
    /// ```
    pub fn array<F>(&mut self, f: F) -> Result<&mut Self, WriteError>
    where
        F: FnOnce(&mut ArrayWriter<'_, '_>) -> Result<(), WriteError>,
    {
        self.element(|out| array(out, f))
    }
}

#[cfg(test)]
mod tests;

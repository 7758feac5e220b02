//! Typed values (feature `serde`): any `T: Serialize` written as JSON straight into a
//! [`Cursor`], and any received [`Value`] read into a `T: Deserialize<'a>` that borrows
//! from the receive buffer. No heap.
//!
//! Writing goes through this module's own serializer over the escaping writer of
//! [`write`](mod@super::write), so a serialized value gets exactly the escaping of every other
//! string core writes (quotes, backslashes, control characters) and never panics: a
//! `char` is a one-character string, a byte array an array of numbers, a non-finite float
//! `null` (as serde_json does), and what JSON cannot express (a map key that is not a
//! string, number, bool or unit variant; an error raised by a `Serialize` impl) is
//! [`WriteError::Unserializable`]. Reading is serde-json-core's.
//!
//! ```
//! use benchlink_core::http::Cursor;
//! use benchlink_core::json::{self, typed};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize, Debug, PartialEq)]
//! struct Sample<'a> { metric: &'a str, value: i32 }
//!
//! let mut buf = [0u8; 64];
//! let mut out = Cursor::new(&mut buf);
//! typed::serialize(&mut out, &Sample { metric: "a\"b", value: -3 }).unwrap();
//! assert_eq!(out.written(), br#"{"metric":"a\"b","value":-3}"#);
//!
//! let v = json::parse(r#"{"metric":"rx","value":7}"#, 8).unwrap();
//! assert_eq!(v.deserialize::<Sample>(), Ok(Sample { metric: "rx", value: 7 }));
//! ```

use serde::ser::{self, Serialize};

use super::write::{self, WriteError};
use super::Value;
use crate::http::Cursor;

/// Why a received value could not be read into the requested type (serde-json-core's
/// error): a type mismatch, a missing field, or — without a scratch buffer — a string
/// with escapes where a borrowed `&str` was asked for
/// ([`EscapedStringIsTooLong`](DeserializeError::EscapedStringIsTooLong)).
pub use serde_json_core::de::Error as DeserializeError;

/// Writes `value` as JSON at the end of `out`. On error the cursor holds a truncated
/// prefix: discard it (the RTM client does, so nothing half-written is ever sent).
///
/// ```
/// use benchlink_core::http::{Cursor, EncodeError};
/// use benchlink_core::json::{typed, WriteError};
/// let mut buf = [0u8; 64];
/// let mut out = Cursor::new(&mut buf);
/// typed::serialize(&mut out, &("q\"\\\u{1}", [1u8, 2], 'c', Some(1.5))).unwrap();
/// assert_eq!(out.written(), br#"["q\"\\\u0001",[1,2],"c",1.5]"#);
/// let mut small = [0u8; 4];
/// assert_eq!(
///     typed::serialize(&mut Cursor::new(&mut small), &"hello"),
///     Err(WriteError::Encode(EncodeError::BufferTooSmall { capacity: 4 }))
/// );
/// ```
pub fn serialize<T: Serialize + ?Sized>(out: &mut Cursor<'_>, value: &T) -> Result<(), WriteError> {
    value.serialize(Serializer { out })
}

impl<'a> Value<'a> {
    /// Reads this value into `T`, borrowing strings from the received text: a `&'a str`
    /// field points into the receive buffer, nothing is copied. A string containing
    /// escapes cannot be borrowed as it is; it fails with
    /// [`DeserializeError::EscapedStringIsTooLong`] (never handed out still escaped) —
    /// use [`deserialize_unescaped`](Self::deserialize_unescaped) and an owned string
    /// type for text that may hold escapes.
    ///
    /// Object keys must be strings (struct fields and string-keyed maps): serde-json-core
    /// does not read other key types.
    ///
    /// ```
    /// use benchlink_core::json::{self, typed::DeserializeError};
    /// #[derive(serde::Deserialize, Debug, PartialEq)]
    /// struct Reading<'a> { sensor: &'a str, celsius: f32 }
    /// let v = json::parse(r#"{"sensor":"t1","celsius":21.5}"#, 8).unwrap();
    /// let r: Reading = v.deserialize().unwrap();
    /// assert_eq!(r, Reading { sensor: "t1", celsius: 21.5 });
    /// assert!(core::ptr::eq(r.sensor.as_ptr(), v.as_raw()[11..].as_ptr())); // borrowed
    /// let escaped = json::parse(r#"{"sensor":"t\"1","celsius":0}"#, 8).unwrap();
    /// assert_eq!(escaped.deserialize::<Reading>(), Err(DeserializeError::EscapedStringIsTooLong));
    /// ```
    pub fn deserialize<T: serde::Deserialize<'a>>(&self) -> Result<T, DeserializeError> {
        self.deserialize_unescaped(&mut [])
    }

    /// [`deserialize`](Self::deserialize) with a scratch buffer where strings with
    /// escapes are unescaped for owned string fields (`heapless::String`, a fixed array):
    /// strings without escapes are still borrowed, and an escaped string longer than
    /// `scratch` is [`DeserializeError::EscapedStringIsTooLong`].
    ///
    /// ```
    /// use benchlink_core::json;
    /// #[derive(serde::Deserialize)]
    /// struct Note { text: String } // on no_std: heapless::String (its `serde` feature)
    /// let v = json::parse(r#"{"text":"a\"b\u00e9"}"#, 8).unwrap();
    /// let mut scratch = [0u8; 16];
    /// let note: Note = v.deserialize_unescaped(&mut scratch).unwrap();
    /// assert_eq!(note.text, "a\"bé");
    /// ```
    pub fn deserialize_unescaped<T: serde::Deserialize<'a>>(
        &self,
        scratch: &mut [u8],
    ) -> Result<T, DeserializeError> {
        // The value is one known-good JSON value, so nothing trails it.
        serde_json_core::from_str_escaped(self.as_raw(), scratch).map(|(value, _)| value)
    }
}

impl ser::Error for WriteError {
    fn custom<T: core::fmt::Display>(_msg: T) -> Self {
        WriteError::Unserializable
    }
}

/// Writes one value into a cursor.
struct Serializer<'c, 'b> {
    out: &'c mut Cursor<'b>,
}

impl<'c, 'b> Serializer<'c, 'b> {
    fn push(self, bytes: &[u8]) -> Result<(), WriteError> {
        Ok(self.out.push(bytes)?)
    }

    fn int(self, negative: bool, magnitude: u64) -> Result<(), WriteError> {
        if negative {
            self.out.push(b"-")?;
        }
        Ok(self.out.push_u64(magnitude)?)
    }

    fn float(
        self,
        finite: bool,
        f: impl FnOnce(&mut ryu::Buffer) -> &str,
    ) -> Result<(), WriteError> {
        if !finite {
            return self.push(b"null");
        }
        let mut buf = ryu::Buffer::new();
        let text = f(&mut buf);
        Ok(self.out.push_str(text)?)
    }

    /// Opens a container and returns the writer of its elements.
    fn open(
        self,
        open: &'static [u8],
        close: &'static [u8],
    ) -> Result<Compound<'c, 'b>, WriteError> {
        self.out.push(open)?;
        Ok(Compound {
            out: self.out,
            first: true,
            close,
            raw: false,
        })
    }

    /// `{"variant":` … then a container: closed by two brackets.
    fn open_variant(
        self,
        variant: &str,
        open: &'static [u8],
        close: &'static [u8],
    ) -> Result<Compound<'c, 'b>, WriteError> {
        self.out.push(b"{")?;
        write::string(self.out, variant)?;
        self.out.push(b":")?;
        self.out.push(open)?;
        Ok(Compound {
            out: self.out,
            first: true,
            close,
            raw: false,
        })
    }
}

/// The elements or members of an array or object being written.
struct Compound<'c, 'b> {
    out: &'c mut Cursor<'b>,
    first: bool,
    /// What closes it: `]`, `}`, or `]}`/`}}` for a variant.
    close: &'static [u8],
    /// A serde_json `RawValue` ([`SERDE_JSON_RAW`]): its one field is spliced in.
    raw: bool,
}

impl Compound<'_, '_> {
    fn separator(&mut self) -> Result<(), WriteError> {
        if !core::mem::replace(&mut self.first, false) {
            self.out.push(b",")?;
        }
        Ok(())
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WriteError> {
        self.separator()?;
        value.serialize(Serializer { out: self.out })
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), WriteError> {
        self.key(key)?;
        value.serialize(Serializer { out: self.out })
    }

    /// `,"key":`: out of line, one copy for every field of every type.
    #[inline(never)]
    fn key(&mut self, key: &str) -> Result<(), WriteError> {
        self.separator()?;
        write::string(self.out, key)?;
        Ok(self.out.push(b":")?)
    }

    fn close(self) -> Result<(), WriteError> {
        Ok(self.out.push(self.close)?)
    }
}

impl<'c, 'b> ser::Serializer for Serializer<'c, 'b> {
    type Ok = ();
    type Error = WriteError;
    type SerializeSeq = Compound<'c, 'b>;
    type SerializeTuple = Compound<'c, 'b>;
    type SerializeTupleStruct = Compound<'c, 'b>;
    type SerializeTupleVariant = Compound<'c, 'b>;
    type SerializeMap = Compound<'c, 'b>;
    type SerializeStruct = Compound<'c, 'b>;
    type SerializeStructVariant = Compound<'c, 'b>;

    fn serialize_bool(self, v: bool) -> Result<(), WriteError> {
        self.push(if v { b"true" } else { b"false" })
    }
    fn serialize_i8(self, v: i8) -> Result<(), WriteError> {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<(), WriteError> {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<(), WriteError> {
        self.serialize_i64(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<(), WriteError> {
        self.int(v < 0, v.unsigned_abs())
    }
    fn serialize_i128(self, v: i128) -> Result<(), WriteError> {
        let magnitude = u64::try_from(v.unsigned_abs()).map_err(|_| WriteError::Unserializable)?;
        self.int(v < 0, magnitude)
    }
    fn serialize_u8(self, v: u8) -> Result<(), WriteError> {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<(), WriteError> {
        self.serialize_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<(), WriteError> {
        self.serialize_u64(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<(), WriteError> {
        self.int(false, v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), WriteError> {
        let v = u64::try_from(v).map_err(|_| WriteError::Unserializable)?;
        self.int(false, v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), WriteError> {
        self.float(v.is_finite(), |b| b.format_finite(v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), WriteError> {
        self.float(v.is_finite(), |b| b.format_finite(v))
    }
    fn serialize_char(self, v: char) -> Result<(), WriteError> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), WriteError> {
        write::string(self.out, v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), WriteError> {
        let mut seq = self.open(b"[", b"]")?;
        for b in v {
            seq.element(b)?;
        }
        seq.close()
    }
    fn serialize_none(self) -> Result<(), WriteError> {
        self.push(b"null")
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), WriteError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), WriteError> {
        self.push(b"null")
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), WriteError> {
        self.push(b"null")
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), WriteError> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<(), WriteError> {
        if name == RAW_JSON {
            return value.serialize(RawSink {
                out: self.out,
                write: write::raw,
            });
        }
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), WriteError> {
        let mut map = self.open(b"{", b"}")?;
        map.field(variant, value)?;
        map.close()
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'c, 'b>, WriteError> {
        self.open(b"[", b"]")
    }
    fn serialize_tuple(self, _len: usize) -> Result<Compound<'c, 'b>, WriteError> {
        self.open(b"[", b"]")
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Compound<'c, 'b>, WriteError> {
        self.open(b"[", b"]")
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'c, 'b>, WriteError> {
        self.open_variant(variant, b"[", b"]}")
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'c, 'b>, WriteError> {
        self.open(b"{", b"}")
    }
    fn serialize_struct(
        self,
        name: &'static str,
        _len: usize,
    ) -> Result<Compound<'c, 'b>, WriteError> {
        if name == SERDE_JSON_RAW {
            return Ok(Compound {
                out: self.out,
                first: true,
                close: b"",
                raw: true,
            });
        }
        self.open(b"{", b"}")
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'c, 'b>, WriteError> {
        self.open_variant(variant, b"{", b"}}")
    }
    fn collect_str<T: core::fmt::Display + ?Sized>(self, value: &T) -> Result<(), WriteError> {
        // Formatted straight into the cursor through the escaping writer, one piece at a
        // time: no intermediate string.
        struct Escaping<'c, 'b> {
            out: &'c mut Cursor<'b>,
            error: Option<WriteError>,
        }
        impl core::fmt::Write for Escaping<'_, '_> {
            fn write_str(&mut self, s: &str) -> core::fmt::Result {
                write::escaped(self.out, s).map_err(|e| {
                    self.error = Some(e);
                    core::fmt::Error
                })
            }
        }
        self.out.push(b"\"")?;
        let mut w = Escaping {
            out: self.out,
            error: None,
        };
        if core::fmt::write(&mut w, format_args!("{value}")).is_err() {
            return Err(w.error.unwrap_or(WriteError::Unserializable));
        }
        Ok(w.out.push(b"\"")?)
    }
}

impl ser::SerializeSeq for Compound<'_, '_> {
    type Ok = ();
    type Error = WriteError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WriteError> {
        self.element(value)
    }
    fn end(self) -> Result<(), WriteError> {
        self.close()
    }
}

impl ser::SerializeTuple for Compound<'_, '_> {
    type Ok = ();
    type Error = WriteError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WriteError> {
        self.element(value)
    }
    fn end(self) -> Result<(), WriteError> {
        self.close()
    }
}

impl ser::SerializeTupleStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = WriteError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WriteError> {
        self.element(value)
    }
    fn end(self) -> Result<(), WriteError> {
        self.close()
    }
}

impl ser::SerializeTupleVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = WriteError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WriteError> {
        self.element(value)
    }
    fn end(self) -> Result<(), WriteError> {
        self.close()
    }
}

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = WriteError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), WriteError> {
        self.separator()?;
        key.serialize(KeySerializer { out: self.out })?;
        Ok(self.out.push(b":")?)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WriteError> {
        value.serialize(Serializer { out: self.out })
    }
    fn end(self) -> Result<(), WriteError> {
        self.close()
    }
}

impl ser::SerializeStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = WriteError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), WriteError> {
        if self.raw {
            return value.serialize(RawSink {
                out: self.out,
                write: write::raw,
            });
        }
        self.field(key, value)
    }
    fn end(self) -> Result<(), WriteError> {
        self.close()
    }
}

impl ser::SerializeStructVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = WriteError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), WriteError> {
        self.field(key, value)
    }
    fn end(self) -> Result<(), WriteError> {
        self.close()
    }
}

/// Methods of a restricted serializer that refuse their value: it has no JSON form there.
macro_rules! refuse {
    ($($method:ident($($arg:ty),*) -> $ret:ty;)*) => {$(
        fn $method(self, $(_: $arg),*) -> Result<$ret, WriteError> {
            Err(WriteError::Unserializable)
        }
    )*};
}

/// The containers a restricted serializer refuses.
macro_rules! refuse_containers {
    () => {
        type SerializeSeq = ser::Impossible<(), WriteError>;
        type SerializeTuple = ser::Impossible<(), WriteError>;
        type SerializeTupleStruct = ser::Impossible<(), WriteError>;
        type SerializeTupleVariant = ser::Impossible<(), WriteError>;
        type SerializeMap = ser::Impossible<(), WriteError>;
        type SerializeStruct = ser::Impossible<(), WriteError>;
        type SerializeStructVariant = ser::Impossible<(), WriteError>;

        refuse! {
            serialize_f32(f32) -> ();
            serialize_f64(f64) -> ();
            serialize_bytes(&[u8]) -> ();
            serialize_none() -> ();
            serialize_unit() -> ();
            serialize_unit_struct(&'static str) -> ();
            serialize_seq(Option<usize>) -> Self::SerializeSeq;
            serialize_tuple(usize) -> Self::SerializeTuple;
            serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct;
            serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Self::SerializeTupleVariant;
            serialize_map(Option<usize>) -> Self::SerializeMap;
            serialize_struct(&'static str, usize) -> Self::SerializeStruct;
            serialize_struct_variant(&'static str, u32, &'static str, usize) -> Self::SerializeStructVariant;
        }

        fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<(), WriteError> {
            Err(WriteError::Unserializable)
        }

        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _name: &'static str,
            _index: u32,
            _variant: &'static str,
            _value: &T,
        ) -> Result<(), WriteError> {
            Err(WriteError::Unserializable)
        }
    };
}

/// Writes a map key: JSON keys are strings, so strings, chars, unit variants, integers
/// and bools are written as strings (as serde_json does); anything else is
/// [`WriteError::Unserializable`].
struct KeySerializer<'c, 'b> {
    out: &'c mut Cursor<'b>,
}

impl KeySerializer<'_, '_> {
    fn quoted(
        self,
        f: impl FnOnce(Serializer<'_, '_>) -> Result<(), WriteError>,
    ) -> Result<(), WriteError> {
        self.out.push(b"\"")?;
        f(Serializer { out: self.out })?;
        Ok(self.out.push(b"\"")?)
    }
}

impl ser::Serializer for KeySerializer<'_, '_> {
    type Ok = ();
    type Error = WriteError;
    refuse_containers!();

    fn serialize_bool(self, v: bool) -> Result<(), WriteError> {
        self.quoted(|s| ser::Serializer::serialize_bool(s, v))
    }
    fn serialize_i8(self, v: i8) -> Result<(), WriteError> {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<(), WriteError> {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<(), WriteError> {
        self.serialize_i64(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<(), WriteError> {
        self.quoted(|s| ser::Serializer::serialize_i64(s, v))
    }
    fn serialize_i128(self, v: i128) -> Result<(), WriteError> {
        self.quoted(|s| ser::Serializer::serialize_i128(s, v))
    }
    fn serialize_u8(self, v: u8) -> Result<(), WriteError> {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<(), WriteError> {
        self.serialize_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<(), WriteError> {
        self.serialize_u64(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<(), WriteError> {
        self.quoted(|s| ser::Serializer::serialize_u64(s, v))
    }
    fn serialize_u128(self, v: u128) -> Result<(), WriteError> {
        self.quoted(|s| ser::Serializer::serialize_u128(s, v))
    }
    fn serialize_char(self, v: char) -> Result<(), WriteError> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), WriteError> {
        write::string(self.out, v)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), WriteError> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), WriteError> {
        value.serialize(self)
    }
    fn collect_str<T: core::fmt::Display + ?Sized>(self, value: &T) -> Result<(), WriteError> {
        ser::Serializer::collect_str(Serializer { out: self.out }, value)
    }
}

/// Pre-serialized JSON inside a typed value — a number forwarded as the server wrote
/// it, a document built elsewhere — written verbatim after the same validation as
/// [`write::raw`] (invalid text is [`WriteError::InvalidJson`]). The borrowed
/// counterpart of serde_json's `RawValue`; other serializers write it as a string.
///
/// ```
/// use benchlink_core::http::Cursor;
/// use benchlink_core::json::typed::{self, RawJson};
/// #[derive(serde::Serialize)]
/// struct Sample<'a> { metric: &'a str, value: RawJson<'a> }
/// let mut buf = [0u8; 64];
/// let mut out = Cursor::new(&mut buf);
/// typed::serialize(&mut out, &Sample { metric: "rx", value: RawJson("1.5e3") }).unwrap();
/// assert_eq!(out.written(), br#"{"metric":"rx","value":1.5e3}"#);
/// let mut out = Cursor::new(&mut buf);
/// assert!(typed::serialize(&mut out, &RawJson("1.5e")).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawJson<'a>(pub &'a str);

/// The newtype name that tells core's serializers a [`RawJson`] is coming.
pub(crate) const RAW_JSON: &str = "$benchlink::json::RawJson";

/// The struct name of serde_json's `RawValue` (its `raw_value` feature), which serializes
/// as a struct of this name with one field holding its text: core's serializers splice
/// that text in as they do a [`RawJson`]'s, so that a value holding a `RawValue` means
/// the same to core as to serde_json.
pub(crate) const SERDE_JSON_RAW: &str = "$serde_json::private::RawValue";

impl Serialize for RawJson<'_> {
    fn serialize<S: ser::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_newtype_struct(RAW_JSON, self.0)
    }
}

/// Takes the text of a [`RawJson`] and hands it to `write`: JSON splices it in after
/// validating it, CBOR transcodes it.
pub(crate) struct RawSink<'c, 'b> {
    pub(crate) out: &'c mut Cursor<'b>,
    pub(crate) write: fn(&mut Cursor<'_>, &str) -> Result<(), WriteError>,
}

impl ser::Serializer for RawSink<'_, '_> {
    type Ok = ();
    type Error = WriteError;
    refuse_containers!();
    refuse! {
        serialize_bool(bool) -> ();
        serialize_i8(i8) -> ();
        serialize_i16(i16) -> ();
        serialize_i32(i32) -> ();
        serialize_i64(i64) -> ();
        serialize_u8(u8) -> ();
        serialize_u16(u16) -> ();
        serialize_u32(u32) -> ();
        serialize_u64(u64) -> ();
        serialize_char(char) -> ();
        serialize_unit_variant(&'static str, u32, &'static str) -> ();
    }

    fn serialize_str(self, v: &str) -> Result<(), WriteError> {
        (self.write)(self.out, v)
    }
    fn collect_str<T: core::fmt::Display + ?Sized>(self, _value: &T) -> Result<(), WriteError> {
        Err(WriteError::Unserializable)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _value: &T,
    ) -> Result<(), WriteError> {
        Err(WriteError::Unserializable)
    }
}

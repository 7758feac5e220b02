//! Typed values in CBOR (features `cbor` and `serde`): any `T: Serialize` written as CBOR
//! straight into a [`Cursor`], and any received [`Item`] read into a
//! `T: Deserialize<'a>` that borrows from the receive buffer. No heap.
//!
//! The forms are the JSON serializer's ([`json::typed`](crate::json::typed)), so a CBOR
//! publisher and a JSON subscriber see the same value: structs and maps are maps with
//! their keys in order, sequences and tuples arrays, `None` and `()` `null`, a `char` a
//! one-character text string, a unit variant its name, any other variant a map of one
//! member `{name: value}`. Where CBOR says more than JSON it does: a byte string
//! (`serialize_bytes`, as `serde_bytes` asks for) is a byte string, an `f32` a 32-bit
//! float (exact), a non-finite float itself. A container of unknown length (an iterator
//! serialized as a sequence) is written with indefinite length; one whose `Serialize`
//! impl announces a length and writes another is [`WriteError::Unserializable`], so what
//! is written is always well-formed. A [`RawJson`](crate::json::typed::RawJson) is
//! transcoded ([`write::json`](fn@super::write::json)).
//!
//! Reading is as lenient as the JSON reader: a float field takes any number (the Python
//! SDK writes every float with 64 bits, JSON publishers write `2` for `2.0`), an integer
//! field any integer that fits it; tags are looked through. A text string borrowed as a
//! `&'a str` points into the receive buffer. Errors are JSON's
//! [`DeserializeError`]: the item is not of the type
//! ([`InvalidType`](DeserializeError::InvalidType)), a number does not fit
//! ([`InvalidNumber`](DeserializeError::InvalidNumber)), a container holds more than the
//! type reads ([`TrailingCharacters`](DeserializeError::TrailingCharacters)), or serde's
//! own check failed (a missing field: [`CustomError`](DeserializeError::CustomError)).
//! A chunked (indefinite-length) string cannot be borrowed and is `InvalidType`.
//!
//! Why not minicbor-serde (0.4, for the minicbor in use): without `alloc` it refuses
//! `collect_str`, writes a `char` as an integer and `()` as an empty array, and its
//! reader takes only a float of the field's own width into a float field — an `f32` field
//! cannot read the 64-bit floats the Python SDK sends, nor a float field an integer.
//!
//! ```
//! use benchlink_core::cbor::{self, typed};
//! use benchlink_core::http::Cursor;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize, Debug, PartialEq)]
//! struct Sample<'a> { metric: &'a str, value: i32 }
//!
//! let mut buf = [0u8; 32];
//! let mut out = Cursor::new(&mut buf);
//! typed::serialize(&mut out, &Sample { metric: "rx", value: -3 }).unwrap();
//! // {"metric": "rx", "value": -3}
//! let bytes = [0xa2, 0x66, b'm', b'e', b't', b'r', b'i', b'c', 0x62, b'r', b'x', 0x65, b'v', b'a', b'l', b'u', b'e', 0x22];
//! assert_eq!(out.written(), bytes);
//!
//! let item = cbor::parse(&bytes, cbor::DEFAULT_MAX_DEPTH).unwrap();
//! assert_eq!(item.deserialize::<Sample>(), Ok(Sample { metric: "rx", value: -3 }));
//! ```

use core::fmt;

use minicbor::data::Type;
use minicbor::Decoder;
use serde::de::{self, Visitor};
use serde::ser::{self, Serialize};

use super::write::{self, ARRAY, MAP, TEXT};
use super::Item;
use crate::http::Cursor;
use crate::json::typed::{RawSink, RAW_JSON, SERDE_JSON_RAW};
use crate::json::WriteError;

pub use crate::json::typed::DeserializeError;

/// The low bits of a head that opens an indefinite-length container, or breaks one.
const INDEFINITE: u8 = 0x1f;

/// Writes `value` as one CBOR item at the end of `out`. On error the cursor holds a
/// truncated prefix: discard it (the RTM client does, so nothing half-written is sent).
///
/// ```
/// use benchlink_core::cbor::typed;
/// use benchlink_core::http::{Cursor, EncodeError};
/// use benchlink_core::json::WriteError;
/// let mut buf = [0u8; 16];
/// let mut out = Cursor::new(&mut buf);
/// typed::serialize(&mut out, &('c', Some(1.5f32), ())).unwrap();
/// assert_eq!(out.written(), [0x83, 0x61, b'c', 0xfa, 0x3f, 0xc0, 0, 0, 0xf6]);
/// let mut small = [0u8; 4];
/// assert_eq!(
///     typed::serialize(&mut Cursor::new(&mut small), &"hello"),
///     Err(WriteError::Encode(EncodeError::BufferTooSmall { capacity: 4 }))
/// );
/// ```
pub fn serialize<T: Serialize + ?Sized>(out: &mut Cursor<'_>, value: &T) -> Result<(), WriteError> {
    value.serialize(Serializer { out })
}

impl<'a> Item<'a> {
    /// Reads this item into `T`, borrowing text and byte strings from the input (see the
    /// [module docs](self) for what each type accepts).
    ///
    /// ```
    /// use benchlink_core::cbor::{self, typed::DeserializeError};
    /// #[derive(serde::Deserialize, Debug, PartialEq)]
    /// struct Reading<'a> { sensor: &'a str, celsius: f32 }
    /// // {"sensor": "t1", "celsius": 21.5 as a 64-bit float}
    /// let bytes = [0xa2, 0x66, b's', b'e', b'n', b's', b'o', b'r', 0x62, b't', b'1',
    ///     0x67, b'c', b'e', b'l', b's', b'i', b'u', b's', 0xfb, 0x40, 0x35, 0x80, 0, 0, 0, 0, 0];
    /// let item = cbor::parse(&bytes, 8).unwrap();
    /// let r: Reading = item.deserialize().unwrap();
    /// assert_eq!(r, Reading { sensor: "t1", celsius: 21.5 });
    /// assert!(core::ptr::eq(r.sensor.as_ptr(), bytes[9..].as_ptr())); // borrowed
    /// assert_eq!(item.deserialize::<u32>(), Err(DeserializeError::InvalidType));
    /// ```
    pub fn deserialize<T: de::Deserialize<'a>>(&self) -> Result<T, DeserializeError> {
        T::deserialize(&mut Reader {
            d: Decoder::new(self.as_raw()),
        })
    }
}

/// Writes one value into a cursor.
struct Serializer<'c, 'b> {
    out: &'c mut Cursor<'b>,
}

impl<'c, 'b> Serializer<'c, 'b> {
    /// Opens a container of `len` items (map members count once), or of unknown length.
    fn open(self, major: u8, len: Option<usize>) -> Result<Compound<'c, 'b>, WriteError> {
        match len {
            Some(n) => write::head(self.out, major, n as u64)?,
            None => self.out.push(&[major | INDEFINITE])?,
        }
        Ok(Compound {
            out: self.out,
            left: len.map(|n| n as u64),
            raw: false,
        })
    }

    /// `{variant: …}`: the map of one member that holds a variant's content.
    fn variant(self, variant: &str) -> Result<Self, WriteError> {
        write::map(self.out, 1)?;
        write::str(self.out, variant)?;
        Ok(self)
    }
}

/// The items of an array or map being written.
struct Compound<'c, 'b> {
    out: &'c mut Cursor<'b>,
    /// Items still due in a definite-length container; `None` for an indefinite one.
    left: Option<u64>,
    /// A serde_json `RawValue`: its one field, JSON text, is transcoded in place.
    raw: bool,
}

impl Compound<'_, '_> {
    /// Counts one item (one member of a map) against the announced length.
    fn count(&mut self) -> Result<(), WriteError> {
        if let Some(left) = self.left.as_mut() {
            *left = left.checked_sub(1).ok_or(WriteError::Unserializable)?;
        }
        Ok(())
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WriteError> {
        self.count()?;
        value.serialize(Serializer { out: self.out })
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), WriteError> {
        self.count()?;
        write::str(self.out, key)?;
        value.serialize(Serializer { out: self.out })
    }

    fn close(self) -> Result<(), WriteError> {
        match self.left {
            Some(0) => Ok(()),
            Some(_) => Err(WriteError::Unserializable),
            None => Ok(self.out.push(&[0xe0 | INDEFINITE])?),
        }
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
        Ok(write::bool(self.out, v)?)
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
        Ok(write::i64(self.out, v)?)
    }
    fn serialize_i128(self, v: i128) -> Result<(), WriteError> {
        self.serialize_i64(i64::try_from(v).map_err(|_| WriteError::Unserializable)?)
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
        Ok(write::u64(self.out, v)?)
    }
    fn serialize_u128(self, v: u128) -> Result<(), WriteError> {
        self.serialize_u64(u64::try_from(v).map_err(|_| WriteError::Unserializable)?)
    }
    fn serialize_f32(self, v: f32) -> Result<(), WriteError> {
        Ok(write::f32(self.out, v)?)
    }
    fn serialize_f64(self, v: f64) -> Result<(), WriteError> {
        Ok(write::f64(self.out, v)?)
    }
    fn serialize_char(self, v: char) -> Result<(), WriteError> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), WriteError> {
        Ok(write::str(self.out, v)?)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), WriteError> {
        Ok(write::bytes(self.out, v)?)
    }
    fn serialize_none(self) -> Result<(), WriteError> {
        Ok(write::null(self.out)?)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), WriteError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), WriteError> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), WriteError> {
        self.serialize_none()
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
                write: write::json,
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
        value.serialize(self.variant(variant)?)
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Compound<'c, 'b>, WriteError> {
        self.open(ARRAY, len)
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'c, 'b>, WriteError> {
        self.open(ARRAY, Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'c, 'b>, WriteError> {
        self.open(ARRAY, Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'c, 'b>, WriteError> {
        self.variant(variant)?.open(ARRAY, Some(len))
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Compound<'c, 'b>, WriteError> {
        self.open(MAP, len)
    }
    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Compound<'c, 'b>, WriteError> {
        if name == SERDE_JSON_RAW {
            return Ok(Compound {
                out: self.out,
                left: Some(1),
                raw: true,
            });
        }
        self.open(MAP, Some(len))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'c, 'b>, WriteError> {
        self.variant(variant)?.open(MAP, Some(len))
    }
    fn collect_str<T: fmt::Display + ?Sized>(self, value: &T) -> Result<(), WriteError> {
        // A text string's length comes first: the value is formatted twice, once to
        // measure it and once straight into the cursor (no intermediate string). A value
        // that formats differently the second time is refused.
        struct Pieces<'c, 'b> {
            out: Option<&'c mut Cursor<'b>>,
            len: usize,
            error: Option<WriteError>,
        }
        impl fmt::Write for Pieces<'_, '_> {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                let Some(out) = self.out.as_mut() else {
                    self.len = self.len.saturating_add(s.len());
                    return Ok(());
                };
                self.len = self.len.checked_sub(s.len()).ok_or(fmt::Error)?;
                out.push_str(s).map_err(|e| {
                    self.error = Some(e.into());
                    fmt::Error
                })
            }
        }
        let mut measure = Pieces {
            out: None,
            len: 0,
            error: None,
        };
        fmt::write(&mut measure, format_args!("{value}"))
            .map_err(|_| WriteError::Unserializable)?;
        write::head(self.out, TEXT, measure.len as u64)?;
        let mut text = Pieces {
            out: Some(self.out),
            len: measure.len,
            error: None,
        };
        match fmt::write(&mut text, format_args!("{value}")) {
            Ok(()) if text.len == 0 => Ok(()),
            Ok(()) => Err(WriteError::Unserializable),
            Err(_) => Err(text.error.unwrap_or(WriteError::Unserializable)),
        }
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
        self.element(key)
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
            self.count()?;
            return value.serialize(RawSink {
                out: self.out,
                write: write::json,
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

/// Reads values from one item that [`super::parse`] validated, so its nesting is bounded
/// and every length it claims is there; a decoding error still is an error, not a panic.
struct Reader<'de> {
    d: Decoder<'de>,
}

/// Any failure to decode what was validated (which cannot happen) reads as a type error.
fn invalid<E>(_: E) -> DeserializeError {
    DeserializeError::InvalidType
}

/// A number as it was written.
enum Number {
    Int(i128),
    Float(f64),
}

impl<'de> Reader<'de> {
    /// The type of the next item, past any tags.
    fn peek(&mut self) -> Result<Type, DeserializeError> {
        loop {
            match self.d.datatype().map_err(invalid)? {
                Type::Tag => {
                    self.d.tag().map_err(invalid)?;
                }
                ty => return Ok(ty),
            }
        }
    }

    fn number(&mut self) -> Result<Number, DeserializeError> {
        match self.peek()? {
            Type::U8 | Type::U16 | Type::U32 | Type::U64 => {
                Ok(Number::Int(self.d.u64().map_err(invalid)?.into()))
            }
            Type::I8 | Type::I16 | Type::I32 | Type::I64 | Type::Int => {
                Ok(Number::Int(self.d.int().map_err(invalid)?.into()))
            }
            Type::F16 => {
                // `f9` + 2 bytes; minicbor reads half floats only with its `half` feature.
                let at = self.d.position();
                let bits = self
                    .d
                    .input()
                    .get(at.saturating_add(1)..at.saturating_add(3))
                    .and_then(|b| <[u8; 2]>::try_from(b).ok())
                    .ok_or(DeserializeError::InvalidType)?;
                self.d.set_position(at.saturating_add(3));
                Ok(Number::Float(half(u16::from_be_bytes(bits))))
            }
            Type::F32 | Type::F64 => Ok(Number::Float(self.d.f64().map_err(invalid)?)),
            _ => Err(DeserializeError::InvalidType),
        }
    }

    fn integer<T: TryFrom<i128>>(&mut self) -> Result<T, DeserializeError> {
        match self.number()? {
            Number::Int(n) => T::try_from(n).map_err(|_| DeserializeError::InvalidNumber),
            Number::Float(_) => Err(DeserializeError::InvalidType),
        }
    }

    fn float(&mut self) -> Result<f64, DeserializeError> {
        Ok(match self.number()? {
            Number::Int(n) => n as f64,
            Number::Float(x) => x,
        })
    }

    /// Steps over `null` (or `undefined`), if it is next.
    fn null(&mut self) -> Result<bool, DeserializeError> {
        let null = matches!(self.peek()?, Type::Null | Type::Undefined);
        if null {
            self.d.skip().map_err(invalid)?;
        }
        Ok(null)
    }

    /// Hands the items of the array (`map` false) or map that comes next to `visit`,
    /// then checks that it read them all.
    fn container<V>(
        &mut self,
        map: bool,
        visit: impl FnOnce(&mut Items<'_, 'de>) -> Result<V, DeserializeError>,
    ) -> Result<V, DeserializeError> {
        let left = match (map, self.peek()?) {
            (false, Type::Array | Type::ArrayIndef) => self.d.array().map_err(invalid)?,
            (true, Type::Map | Type::MapIndef) => self.d.map().map_err(invalid)?,
            _ => return Err(DeserializeError::InvalidType),
        };
        let mut items = Items { r: self, left };
        let value = visit(&mut items)?;
        if items.next()? {
            return Err(DeserializeError::TrailingCharacters);
        }
        Ok(value)
    }
}

/// The value of an IEEE 754 half-precision float.
fn half(bits: u16) -> f64 {
    let sign = if bits & 0x8000 == 0 { 1.0 } else { -1.0 };
    let exponent = (bits >> 10) & 0x1f;
    let fraction = f64::from(bits & 0x3ff);
    sign * match exponent {
        0 => fraction / (1u64 << 24) as f64,
        0x1f if fraction == 0.0 => f64::INFINITY,
        0x1f => f64::NAN,
        // (1 + fraction / 2^10) × 2^(exponent - 15), exactly.
        e => (fraction + 1024.0) * f64::from_bits((u64::from(e) + 1023 - 25) << 52),
    }
}

/// The items left in a container being read (a map's members count once).
struct Items<'r, 'de> {
    r: &'r mut Reader<'de>,
    /// `None` in an indefinite container, until its break has been read.
    left: Option<u64>,
}

impl Items<'_, '_> {
    /// True (and counted) if another item follows; reads the break of an indefinite
    /// container.
    fn next(&mut self) -> Result<bool, DeserializeError> {
        match self.left.as_mut() {
            Some(0) => Ok(false),
            Some(n) => {
                *n = n.saturating_sub(1);
                Ok(true)
            }
            None if self.r.d.datatype().map_err(invalid)? == Type::Break => {
                self.r.d.set_position(self.r.d.position().saturating_add(1));
                self.left = Some(0);
                Ok(false)
            }
            None => Ok(true),
        }
    }
}

impl<'de> de::SeqAccess<'de> for Items<'_, 'de> {
    type Error = DeserializeError;

    fn next_element_seed<T: de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeserializeError> {
        if !self.next()? {
            return Ok(None);
        }
        seed.deserialize(&mut *self.r).map(Some)
    }
}

impl<'de> de::MapAccess<'de> for Items<'_, 'de> {
    type Error = DeserializeError;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeserializeError> {
        if !self.next()? {
            return Ok(None);
        }
        seed.deserialize(&mut *self.r).map(Some)
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, DeserializeError> {
        seed.deserialize(&mut *self.r)
    }
}

/// A variant written as a map of one member: its name, then its content.
impl<'de> de::EnumAccess<'de> for &mut Items<'_, 'de> {
    type Error = DeserializeError;
    type Variant = Self;

    fn variant_seed<V: de::DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Self), DeserializeError> {
        if !self.next()? {
            return Err(DeserializeError::InvalidType);
        }
        Ok((seed.deserialize(&mut *self.r)?, self))
    }
}

impl<'de> de::VariantAccess<'de> for &mut Items<'_, 'de> {
    type Error = DeserializeError;

    fn unit_variant(self) -> Result<(), DeserializeError> {
        de::Deserialize::deserialize(&mut *self.r)
    }
    fn newtype_variant_seed<T: de::DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, DeserializeError> {
        seed.deserialize(&mut *self.r)
    }
    fn tuple_variant<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, DeserializeError> {
        de::Deserializer::deserialize_tuple(&mut *self.r, len, visitor)
    }
    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeserializeError> {
        de::Deserializer::deserialize_map(&mut *self.r, visitor)
    }
}

/// An integer type's method: any integer that fits.
macro_rules! integers {
    ($($method:ident => $visit:ident: $ty:ty,)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeserializeError> {
            visitor.$visit(self.integer::<$ty>()?)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for &mut Reader<'de> {
    type Error = DeserializeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeserializeError> {
        match self.peek()? {
            Type::Bool => self.deserialize_bool(visitor),
            Type::U8 | Type::U16 | Type::U32 | Type::U64 => self.deserialize_u64(visitor),
            Type::I8 | Type::I16 | Type::I32 | Type::I64 => self.deserialize_i64(visitor),
            Type::Int => self.deserialize_i128(visitor),
            Type::F16 | Type::F32 | Type::F64 => self.deserialize_f64(visitor),
            Type::String => self.deserialize_str(visitor),
            Type::Bytes => visitor.visit_borrowed_bytes(self.d.bytes().map_err(invalid)?),
            Type::Null | Type::Undefined => self.deserialize_unit(visitor),
            Type::Array | Type::ArrayIndef => self.deserialize_seq(visitor),
            Type::Map | Type::MapIndef => self.deserialize_map(visitor),
            _ => Err(DeserializeError::InvalidType),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeserializeError> {
        match self.peek()? {
            Type::Bool => visitor.visit_bool(self.d.bool().map_err(invalid)?),
            _ => Err(DeserializeError::InvalidType),
        }
    }

    integers! {
        deserialize_i8 => visit_i8: i8,
        deserialize_i16 => visit_i16: i16,
        deserialize_i32 => visit_i32: i32,
        deserialize_i64 => visit_i64: i64,
        deserialize_i128 => visit_i128: i128,
        deserialize_u8 => visit_u8: u8,
        deserialize_u16 => visit_u16: u16,
        deserialize_u32 => visit_u32: u32,
        deserialize_u64 => visit_u64: u64,
        deserialize_u128 => visit_u128: u128,
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeserializeError> {
        visitor.visit_f32(self.float()? as f32)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeserializeError> {
        visitor.visit_f64(self.float()?)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeserializeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeserializeError> {
        match self.peek()? {
            Type::String => visitor.visit_borrowed_str(self.d.str().map_err(invalid)?),
            _ => Err(DeserializeError::InvalidType),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeserializeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeserializeError> {
        // A byte string, or what a JSON publisher sends for bytes: an array of numbers.
        self.deserialize_any(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, DeserializeError> {
        self.deserialize_any(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeserializeError> {
        if self.null()? {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeserializeError> {
        if self.null()? {
            visitor.visit_unit()
        } else {
            Err(DeserializeError::InvalidType)
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeserializeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeserializeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeserializeError> {
        self.container(false, |items| visitor.visit_seq(items))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeserializeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeserializeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeserializeError> {
        self.container(true, |items| visitor.visit_map(items))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeserializeError> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeserializeError> {
        match self.peek()? {
            Type::String => {
                let name = self.d.str().map_err(invalid)?;
                visitor.visit_enum(de::value::BorrowedStrDeserializer::new(name))
            }
            _ => self.container(true, |items| visitor.visit_enum(items)),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, DeserializeError> {
        self.deserialize_any(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, DeserializeError> {
        super::read::skip(&mut self.d, super::MAX_DEPTH).map_err(invalid)?;
        visitor.visit_unit()
    }
}

#[cfg(test)]
mod tests;

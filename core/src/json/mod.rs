//! A small zero-copy JSON reader: validate once, then walk borrowed slices — and, in
//! [`write`](mod@write), the matching writer that escapes everything it is given.
//!
//! Why not serde-json-core: it cannot hand out the raw text of a nested value (the
//! real-time messaging PDUs must give users each message as a `&str` slice of JSON, to
//! deserialize with whatever they like), and it needs fixed-capacity maps for objects whose
//! keys are data (the metric names of `/results`). This reader needs neither a heap nor a
//! schema.
//!
//! How it works: [`parse`] validates the whole text against the JSON grammar (RFC 8259)
//! with an explicit nesting limit, without recursion (a 256-bit stack of container kinds
//! replaces the call stack). The [`Value`] it returns is the raw slice of a known-good
//! value, so everything after that — walking [`Object`] members or [`Array`] elements,
//! comparing and decoding [`JsonStr`] strings, reading numbers — cannot fail and never
//! copies. Malformed input is an [`Error`] with a byte offset; no input panics.
//!
//! ```
//! use benchlink_core::json;
//! let v = json::parse(r#"{"id":3,"tags":["a\u00e9"],"msg":{"x":[1,2]}}"#, 8).unwrap();
//! assert_eq!(v.get("id").and_then(|v| v.as_u64()), Some(3));
//! let tag = v.get("tags").and_then(|t| t.as_array()).and_then(|a| a.elements().next());
//! assert!(tag.and_then(|t| t.as_str()).is_some_and(|s| s == "aé"));
//! // Nested values stay raw text, ready for another deserializer.
//! assert_eq!(v.get("msg").map(|m| m.as_raw()), Some(r#"{"x":[1,2]}"#));
//! ```

use core::fmt::{self, Write as _};

use crate::http::{Cursor, EncodeError};

#[cfg(feature = "serde")]
pub mod typed;
pub mod write;

pub use write::WriteError;

/// The deepest nesting any caller may ask for. Validation keeps one bit per open
/// container, so this bounds its stack use to 32 bytes whatever the input.
pub const MAX_DEPTH: usize = 256;

/// A nesting limit that fits every benchlink protocol message with room to spare.
pub const DEFAULT_MAX_DEPTH: usize = 32;

/// Why a text is not acceptable JSON, and where.
///
/// ```
/// use benchlink_core::json::{self, Error, ErrorKind};
/// assert_eq!(json::parse("[1,]", 8), Err(Error { offset: 3, kind: ErrorKind::ExpectedValue }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Error {
    /// Byte offset into the input where the problem was found (the input length when the
    /// input ended too early).
    pub offset: usize,
    /// What was wrong there.
    pub kind: ErrorKind,
}

/// The kinds of [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input ended inside a value (truncated input, or empty input).
    UnexpectedEnd,
    /// A value was expected but this byte cannot start one.
    ExpectedValue,
    /// An object member must start with a string key.
    ExpectedKey,
    /// An object key must be followed by `:`.
    ExpectedColon,
    /// After a value inside a container only `,` or the matching close bracket may follow.
    ExpectedCommaOrEnd,
    /// Something starting like `true`, `false` or `null` that is not one of them.
    InvalidLiteral,
    /// A number not in the JSON grammar (leading zero, missing digits, `+`, `.5`, …).
    InvalidNumber,
    /// A backslash escape other than `\" \\ \/ \b \f \n \r \t \uXXXX`.
    InvalidEscape,
    /// A raw control character (below U+0020) inside a string: JSON requires escaping it.
    ControlCharacter,
    /// Opening this container would exceed the caller's nesting limit.
    TooDeep,
    /// A complete value is followed by more than whitespace.
    TrailingData,
    /// The input bytes are not UTF-8 (only from [`parse_bytes`]).
    InvalidUtf8,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            ErrorKind::UnexpectedEnd => "unexpected end of input",
            ErrorKind::ExpectedValue => "expected a value",
            ErrorKind::ExpectedKey => "expected a string key",
            ErrorKind::ExpectedColon => "expected `:`",
            ErrorKind::ExpectedCommaOrEnd => "expected `,` or a closing bracket",
            ErrorKind::InvalidLiteral => "invalid literal",
            ErrorKind::InvalidNumber => "invalid number",
            ErrorKind::InvalidEscape => "invalid escape",
            ErrorKind::ControlCharacter => "unescaped control character in string",
            ErrorKind::TooDeep => "nesting too deep",
            ErrorKind::TrailingData => "trailing data after the value",
            ErrorKind::InvalidUtf8 => "invalid UTF-8",
        };
        write!(f, "JSON: {what} at byte {}", self.offset)
    }
}

impl core::error::Error for Error {}

/// Validates `text` as exactly one JSON value (surrounding whitespace allowed) nested at
/// most `max_depth` containers deep (clamped to [`MAX_DEPTH`]; `0` admits only scalars),
/// and returns it.
///
/// ```
/// use benchlink_core::json::{self, ErrorKind, Kind};
/// assert_eq!(json::parse(" [[1]] ", 2).map(|v| v.kind()), Ok(Kind::Array));
/// assert_eq!(json::parse("[[1]]", 1).map_err(|e| e.kind), Err(ErrorKind::TooDeep));
/// assert_eq!(json::parse(r#"{"a":"#, 8).map_err(|e| e.kind), Err(ErrorKind::UnexpectedEnd));
/// ```
pub fn parse(text: &str, max_depth: usize) -> Result<Value<'_>, Error> {
    let mut json = Validator::new(text);
    let value = json.value(max_depth)?;
    json.end()?;
    Ok(value)
}

/// [`parse`] taken apart, for a reader that wants more than the value: it validates one
/// value at a time, and an object member by member, so the reader learns where each
/// member's value ends without stepping over it again. Validating a text with it accepts
/// and rejects exactly what [`parse`] does, with the same errors.
pub(crate) struct Validator<'a> {
    s: Scanner<'a>,
    text: &'a str,
}

impl<'a> Validator<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Validator {
            s: Scanner::new(text, 0),
            text,
        }
    }

    /// Validates the next value (after optional whitespace), at most `max_depth`
    /// containers deep, and returns it.
    pub(crate) fn value(&mut self, max_depth: usize) -> Result<Value<'a>, Error> {
        self.s.skip_ws();
        let start = self.s.pos;
        self.s.value(max_depth)?;
        Ok(Value::new(
            self.text.get(start..self.s.pos).unwrap_or_default(),
        ))
    }

    /// If the next value is an object, validates it member by member and returns it,
    /// remembering where the values of its first members end; otherwise validates
    /// nothing and returns `None`. `member` gets each member's key and the depth left for
    /// its value (`max_depth - 1`), and must validate that value with
    /// [`value`](Self::value) or `object`.
    pub(crate) fn object(
        &mut self,
        max_depth: usize,
        mut member: impl FnMut(&mut Self, JsonStr<'a>, usize) -> Result<(), Error>,
    ) -> Result<Option<Object<'a>>, Error> {
        self.s.skip_ws();
        if self.s.peek() != Some(b'{') {
            return Ok(None);
        }
        let max_depth = max_depth.min(MAX_DEPTH);
        let Some(inner) = max_depth.checked_sub(1) else {
            return Err(self.s.error(ErrorKind::TooDeep));
        };
        let start = self.s.pos;
        self.s.step();
        self.s.skip_ws();
        let mut ends = Ends::default();
        if self.s.peek() == Some(b'}') {
            self.s.step();
        } else {
            for index in 0.. {
                let (from, to) = self.s.key()?;
                let key = JsonStr {
                    raw: self.text.get(from..to).unwrap_or_default(),
                };
                member(self, key, inner)?;
                ends.push(index, self.s.pos.saturating_sub(start));
                self.s.skip_ws();
                match self.s.peek() {
                    Some(b',') => self.s.step(),
                    Some(b'}') => {
                        self.s.step();
                        break;
                    }
                    _ => return Err(self.s.error(ErrorKind::ExpectedCommaOrEnd)),
                }
            }
        }
        let raw = self.text.get(start..self.s.pos).unwrap_or_default();
        Ok(Some(Object { raw, ends }))
    }

    /// Checks that only whitespace follows the value.
    pub(crate) fn end(&mut self) -> Result<(), Error> {
        self.s.skip_ws();
        if self.s.pos < self.text.len() {
            return Err(self.s.error(ErrorKind::TrailingData));
        }
        Ok(())
    }
}

/// [`parse`] for bytes straight off the wire: they must be UTF-8 as well as JSON.
///
/// ```
/// use benchlink_core::json::{self, Error, ErrorKind};
/// assert!(json::parse_bytes(b"{}", 8).is_ok());
/// assert_eq!(json::parse_bytes(b"\"\xff\"", 8), Err(Error { offset: 1, kind: ErrorKind::InvalidUtf8 }));
/// ```
pub fn parse_bytes(bytes: &[u8], max_depth: usize) -> Result<Value<'_>, Error> {
    let text = core::str::from_utf8(bytes).map_err(|e| Error {
        offset: e.valid_up_to(),
        kind: ErrorKind::InvalidUtf8,
    })?;
    parse(text, max_depth)
}

/// What a [`Value`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Kind {
    /// `{…}`
    Object,
    /// `[…]`
    Array,
    /// `"…"`
    String,
    /// A number such as `-1`, `2.5` or `1.0e-5`.
    Number,
    /// `true` or `false`
    Bool,
    /// `null`
    Null,
}

/// One validated JSON value: its raw text, exactly as it appeared in the input, and its
/// [`Kind`]. Only the parser makes values, so the text is always well-formed.
///
/// ```
/// use benchlink_core::json::{self, Kind};
/// let v = json::parse(r#"{"n":-2,"f":2.5,"b":true,"z":null}"#, 4).unwrap();
/// assert_eq!(v.get("n").and_then(|n| n.as_i64()), Some(-2));
/// assert_eq!(v.get("f").and_then(|n| n.as_f64()), Some(2.5));
/// assert_eq!(v.get("b").and_then(|b| b.as_bool()), Some(true));
/// assert!(v.get("z").is_some_and(|z| z.is_null()));
/// assert_eq!(v.get("f").map(|f| f.kind()), Some(Kind::Number));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Value<'a> {
    raw: &'a str,
}

impl<'a> Value<'a> {
    fn new(raw: &'a str) -> Self {
        Value { raw }
    }

    /// The value's JSON text, borrowed from the input: hand it to any deserializer.
    ///
    /// ```
    /// let v = benchlink_core::json::parse(" [1, 2] ", 4).unwrap();
    /// assert_eq!(v.as_raw(), "[1, 2]");
    /// ```
    pub fn as_raw(&self) -> &'a str {
        self.raw
    }

    /// What kind of value this is (read from its first byte).
    ///
    /// ```
    /// use benchlink_core::json::{parse, Kind};
    /// assert_eq!(parse("\"x\"", 0).unwrap().kind(), Kind::String);
    /// ```
    pub fn kind(&self) -> Kind {
        match self.raw.as_bytes().first() {
            Some(b'{') => Kind::Object,
            Some(b'[') => Kind::Array,
            Some(b'"') => Kind::String,
            Some(b't' | b'f') => Kind::Bool,
            Some(b'n') => Kind::Null,
            _ => Kind::Number,
        }
    }

    /// The value as an object, if it is one.
    ///
    /// ```
    /// let v = benchlink_core::json::parse(r#"{"a":1}"#, 4).unwrap();
    /// assert_eq!(v.as_object().map(|o| o.members().count()), Some(1));
    /// ```
    pub fn as_object(&self) -> Option<Object<'a>> {
        (self.kind() == Kind::Object).then_some(Object {
            raw: self.raw,
            ends: Ends::default(),
        })
    }

    /// The value as an array, if it is one.
    ///
    /// ```
    /// let v = benchlink_core::json::parse("[1,[2],3]", 4).unwrap();
    /// assert_eq!(v.as_array().map(|a| a.elements().count()), Some(3));
    /// ```
    pub fn as_array(&self) -> Option<Array<'a>> {
        (self.kind() == Kind::Array).then_some(Array { raw: self.raw })
    }

    /// The value as a string, if it is one (still escaped; see [`JsonStr`]).
    ///
    /// ```
    /// let v = benchlink_core::json::parse(r#""a\nb""#, 0).unwrap();
    /// assert_eq!(v.as_str().map(|s| s.as_raw()), Some(r"a\nb"));
    /// ```
    pub fn as_str(&self) -> Option<JsonStr<'a>> {
        match self.kind() {
            Kind::String => self
                .raw
                .get(1..self.raw.len().saturating_sub(1))
                .map(|raw| JsonStr { raw }),
            _ => None,
        }
    }

    /// The value as a boolean, if it is one.
    ///
    /// ```
    /// assert_eq!(benchlink_core::json::parse("false", 0).unwrap().as_bool(), Some(false));
    /// ```
    pub fn as_bool(&self) -> Option<bool> {
        match self.raw {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }

    /// True for `null`.
    ///
    /// ```
    /// assert!(benchlink_core::json::parse("null", 0).unwrap().is_null());
    /// ```
    pub fn is_null(&self) -> bool {
        self.raw == "null"
    }

    /// The value as a number, if it is one: its text, converted only on request (see
    /// [`Number`]).
    ///
    /// ```
    /// use benchlink_core::json::parse;
    /// let n = parse("1.0e-5", 0).unwrap().as_number().unwrap();
    /// assert_eq!((n.as_str(), n.as_f64()), ("1.0e-5", 1.0e-5));
    /// ```
    pub fn as_number(&self) -> Option<Number<'a>> {
        (self.kind() == Kind::Number).then_some(Number { text: self.raw })
    }

    /// The value as an `i64`, if it is an integer in range (no fraction, no exponent).
    ///
    /// ```
    /// assert_eq!(benchlink_core::json::parse("-7", 0).unwrap().as_i64(), Some(-7));
    /// assert_eq!(benchlink_core::json::parse("7.0", 0).unwrap().as_i64(), None);
    /// ```
    pub fn as_i64(&self) -> Option<i64> {
        self.as_number()?.as_i64()
    }

    /// The value as a `u64`, if it is a non-negative integer in range (ids, counts,
    /// Unix seconds).
    ///
    /// ```
    /// assert_eq!(benchlink_core::json::parse("18446744073709551615", 0).unwrap().as_u64(), Some(u64::MAX));
    /// assert_eq!(benchlink_core::json::parse("-1", 0).unwrap().as_u64(), None);
    /// ```
    pub fn as_u64(&self) -> Option<u64> {
        self.as_number()?.as_u64()
    }

    /// The value as an `f64`, if it is a number (integers convert, possibly rounding).
    ///
    /// ```
    /// assert_eq!(benchlink_core::json::parse("3", 0).unwrap().as_f64(), Some(3.0));
    /// ```
    pub fn as_f64(&self) -> Option<f64> {
        self.as_number().map(|n| n.as_f64())
    }

    /// Shorthand for `as_object()` then [`Object::get`].
    ///
    /// ```
    /// let v = benchlink_core::json::parse(r#"{"a":{"b":1}}"#, 4).unwrap();
    /// assert_eq!(v.get("a").and_then(|a| a.get("b")).and_then(|b| b.as_u64()), Some(1));
    /// ```
    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        self.as_object()?.get(key)
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Value<'_> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "{=str}", self.raw)
    }
}

/// A validated JSON object, walked lazily in input order.
///
/// ```
/// let v = benchlink_core::json::parse(r#"{"b":1,"a":[2]}"#, 4).unwrap();
/// let obj = v.as_object().unwrap();
/// let keys: Vec<String> = obj.members().map(|(k, _)| k.to_string()).collect();
/// assert_eq!(keys, ["b", "a"]);
/// ```
#[derive(Clone, Copy)]
pub struct Object<'a> {
    raw: &'a str,
    /// Where its first members' values end, when it was validated member by member.
    ends: Ends,
}

/// Compares the text: the index is only a shortcut through it.
impl PartialEq for Object<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

impl Eq for Object<'_> {}

impl fmt::Debug for Object<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Object").field("raw", &self.raw).finish()
    }
}

impl<'a> Object<'a> {
    /// The object whose text is `raw`, which a validator accepted before (not indexed).
    pub(crate) fn validated(raw: &'a str) -> Self {
        Object {
            raw,
            ends: Ends::default(),
        }
    }

    /// An iterator over `(key, value)` pairs in input order, duplicates included.
    ///
    /// ```
    /// let v = benchlink_core::json::parse(r#"{"a":1}"#, 4).unwrap();
    /// let (k, v) = v.as_object().unwrap().members().next().unwrap();
    /// assert!(k == "a" && v.as_u64() == Some(1));
    /// ```
    pub fn members(&self) -> Members<'a> {
        Members {
            items: Items::new(self.raw, self.ends),
        }
    }

    /// The value of the first member named `key` (compared after unescaping, so
    /// `"\u0069d"` matches `id`). Linear in the object's size: objects here are small.
    ///
    /// ```
    /// let v = benchlink_core::json::parse(r#"{"\u0069d":5,"id":6}"#, 4).unwrap();
    /// assert_eq!(v.as_object().unwrap().get("id").and_then(|v| v.as_u64()), Some(5));
    /// ```
    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        self.members().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// True for `{}`.
    ///
    /// ```
    /// assert!(benchlink_core::json::parse("{ }", 4).unwrap().as_object().unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.members().next().is_none()
    }

    /// The object's raw JSON text.
    ///
    /// ```
    /// let v = benchlink_core::json::parse(r#"{"a":1}"#, 4).unwrap();
    /// assert_eq!(v.as_object().unwrap().as_raw(), r#"{"a":1}"#);
    /// ```
    pub fn as_raw(&self) -> &'a str {
        self.raw
    }
}

impl<'a> IntoIterator for Object<'a> {
    type Item = (JsonStr<'a>, Value<'a>);
    type IntoIter = Members<'a>;

    fn into_iter(self) -> Members<'a> {
        self.members()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Object<'_> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "{=str}", self.raw)
    }
}

/// A validated JSON array, walked lazily.
///
/// ```
/// let v = benchlink_core::json::parse(r#"["h1","h2"]"#, 4).unwrap();
/// let hosts = v.as_array().unwrap();
/// let mut names = hosts.elements().filter_map(|h| h.as_str());
/// assert!(names.next().is_some_and(|h| h == "h1"));
/// assert_eq!(hosts.get(1).map(|h| h.as_raw()), Some("\"h2\""));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Array<'a> {
    raw: &'a str,
}

impl<'a> Array<'a> {
    /// The array whose text is `raw`, which a validator accepted before (a part of a
    /// message kept since, found again by its offsets).
    pub(crate) fn validated(raw: &'a str) -> Self {
        Array { raw }
    }

    /// An iterator over the elements in order.
    ///
    /// ```
    /// let v = benchlink_core::json::parse("[1,2,3]", 4).unwrap();
    /// let sum: u64 = v.as_array().unwrap().elements().filter_map(|e| e.as_u64()).sum();
    /// assert_eq!(sum, 6);
    /// ```
    pub fn elements(&self) -> Elements<'a> {
        Elements {
            items: Items::new(self.raw, Ends::default()),
        }
    }

    /// The element at `index` (linear: the array is walked from the start).
    ///
    /// ```
    /// let v = benchlink_core::json::parse("[1,2,3]", 4).unwrap();
    /// assert_eq!(v.as_array().unwrap().get(2).and_then(|e| e.as_u64()), Some(3));
    /// ```
    pub fn get(&self, index: usize) -> Option<Value<'a>> {
        self.elements().nth(index)
    }

    /// True for `[]`.
    ///
    /// ```
    /// assert!(benchlink_core::json::parse("[]", 4).unwrap().as_array().unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.elements().next().is_none()
    }

    /// The array's raw JSON text.
    ///
    /// ```
    /// let v = benchlink_core::json::parse("[1]", 4).unwrap();
    /// assert_eq!(v.as_array().unwrap().as_raw(), "[1]");
    /// ```
    pub fn as_raw(&self) -> &'a str {
        self.raw
    }
}

impl<'a> IntoIterator for Array<'a> {
    type Item = Value<'a>;
    type IntoIter = Elements<'a>;

    fn into_iter(self) -> Elements<'a> {
        self.elements()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Array<'_> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "{=str}", self.raw)
    }
}

/// Iterator over an [`Object`]'s members; see [`Object::members`].
#[derive(Debug, Clone)]
pub struct Members<'a> {
    items: Items<'a>,
}

impl<'a> Iterator for Members<'a> {
    type Item = (JsonStr<'a>, Value<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let (key, value) = self.items.next(true)?;
        Some((key?, value))
    }
}

/// Iterator over an [`Array`]'s elements; see [`Array::elements`].
#[derive(Debug, Clone)]
pub struct Elements<'a> {
    items: Items<'a>,
}

impl<'a> Iterator for Elements<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        self.items.next(false).map(|(_, value)| value)
    }
}

/// How many member ends an [`Object`] validated member by member keeps: enough for the
/// bodies of the messaging protocol.
const INDEXED: usize = 4;

/// Where the values of an object's first members end (offsets into the object's text),
/// recorded by the [`Validator`] that validated it, so that walking the object steps over
/// none of them again. Empty for objects found inside other values.
#[derive(Debug, Clone, Copy, Default)]
struct Ends {
    /// How many leading members are recorded.
    len: u8,
    at: [u32; INDEXED],
}

impl Ends {
    /// Records that member `index`'s value ends at `end`, if all members before it are
    /// recorded and there is room.
    fn push(&mut self, index: usize, end: usize) {
        if usize::from(self.len) != index {
            return;
        }
        if let (Some(slot), Ok(end)) = (self.at.get_mut(index), u32::try_from(end)) {
            *slot = end;
            self.len += 1;
        }
    }

    /// Where member `index`'s value ends, if recorded.
    fn get(&self, index: usize) -> Option<usize> {
        let end = self
            .at
            .get(index)
            .filter(|_| index < usize::from(self.len))?;
        usize::try_from(*end).ok()
    }
}

/// The one walker behind [`Members`] and [`Elements`]: it re-scans each item of an
/// already validated container (or takes its end from the container's [`Ends`]), so it
/// can only end, never fail (if the text were somehow malformed it would just stop).
#[derive(Debug, Clone)]
struct Items<'a> {
    text: &'a str,
    /// Just after the opening bracket or the previous item; `text.len()` once finished.
    pos: usize,
    ends: Ends,
    /// The index of the next item.
    index: usize,
}

impl<'a> Items<'a> {
    fn new(container: &'a str, ends: Ends) -> Self {
        Items {
            text: container,
            pos: 1,
            ends,
            index: 0,
        }
    }

    fn next(&mut self, keyed: bool) -> Option<(Option<JsonStr<'a>>, Value<'a>)> {
        let item = self.scan_item(keyed);
        if item.is_none() {
            self.pos = self.text.len();
        }
        item
    }

    fn scan_item(&mut self, keyed: bool) -> Option<(Option<JsonStr<'a>>, Value<'a>)> {
        let mut s = Scanner::new(self.text, self.pos);
        s.skip_ws();
        if s.peek() == Some(b',') {
            s.step();
            s.skip_ws();
        }
        let key = if keyed {
            // The key was validated with its container: only find where it ends.
            if s.peek() != Some(b'"') {
                return None;
            }
            let start = s.pos.saturating_add(1);
            s.skip_validated_string();
            let end = s.pos.saturating_sub(1);
            s.skip_ws();
            if s.peek() != Some(b':') {
                return None;
            }
            s.step();
            Some(JsonStr {
                raw: self.text.get(start..end)?,
            })
        } else {
            None
        };
        s.skip_ws();
        let start = s.pos;
        // The container was validated when it was parsed: its items need no new check.
        if s.peek().is_none() || matches!(s.peek(), Some(b'}' | b']')) {
            return None;
        }
        let end = match self.ends.get(self.index) {
            Some(end) => end,
            None => {
                s.skip_validated();
                s.pos
            }
        };
        self.index = self.index.saturating_add(1);
        self.pos = end;
        Some((key, Value::new(self.text.get(start..end)?)))
    }
}

/// The contents of a JSON string, still escaped exactly as in the input (without the
/// quotes). Compare it with `==` against a `&str`, decode it with [`JsonStr::chars`],
/// print it, or unescape it into a buffer — all without allocating.
///
/// Lone UTF-16 surrogate escapes (`"\ud800"`), which the grammar allows and some encoders
/// emit, decode to U+FFFD instead of failing the whole document.
///
/// ```
/// let v = benchlink_core::json::parse(r#""Dummy print: \"FOO\" \ud83d\ude00""#, 0).unwrap();
/// let s = v.as_str().unwrap();
/// assert!(s == "Dummy print: \"FOO\" 😀");
/// assert_eq!(s.to_string(), "Dummy print: \"FOO\" 😀");
/// let mut buf = [0u8; 32];
/// assert_eq!(s.unescape_into(&mut buf), Ok("Dummy print: \"FOO\" 😀"));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct JsonStr<'a> {
    raw: &'a str,
}

impl<'a> JsonStr<'a> {
    /// The string whose escaped contents are `raw`, which a validator accepted before.
    pub(crate) fn validated(raw: &'a str) -> Self {
        JsonStr { raw }
    }

    /// The escaped contents as they appear in the input.
    ///
    /// ```
    /// let v = benchlink_core::json::parse(r#""a\tb""#, 0).unwrap();
    /// assert_eq!(v.as_str().unwrap().as_raw(), r"a\tb");
    /// ```
    pub fn as_raw(&self) -> &'a str {
        self.raw
    }

    /// The text itself, borrowed, when it has no escapes (the common case for keys,
    /// statuses and names); `None` when decoding is needed.
    ///
    /// ```
    /// let v = benchlink_core::json::parse(r#"["ok","o\u006b"]"#, 1).unwrap();
    /// let mut it = v.as_array().unwrap().elements().filter_map(|e| e.as_str());
    /// assert_eq!(it.next().unwrap().as_plain(), Some("ok"));
    /// assert_eq!(it.next().unwrap().as_plain(), None);
    /// ```
    pub fn as_plain(&self) -> Option<&'a str> {
        (!self.has_escape()).then_some(self.raw)
    }

    /// Whether the raw text has an escape: a byte search (`str::contains` with a `char`
    /// would link the char searcher).
    fn has_escape(&self) -> bool {
        crate::swar::find_byte(self.raw.as_bytes(), b'\\').is_some()
    }

    /// The decoded characters: escapes resolved, `\uXXXX` surrogate pairs combined.
    ///
    /// ```
    /// let v = benchlink_core::json::parse(r#""\u00e9\n""#, 0).unwrap();
    /// assert!(v.as_str().unwrap().chars().eq(['é', '\n']));
    /// ```
    pub fn chars(&self) -> Chars<'a> {
        Chars {
            rest: self.raw.chars(),
        }
    }

    /// The decoded text's UTF-8 bytes: how decoded text is compared (equal characters
    /// have equal encodings) without decoding the UTF-8 around the escapes.
    fn unescaped(&self) -> Unescaped<'a> {
        Unescaped {
            rest: self.raw.as_bytes(),
            pending: 0,
            left: 0,
        }
    }

    /// True for `""`.
    ///
    /// ```
    /// assert!(benchlink_core::json::parse(r#""""#, 0).unwrap().as_str().unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// Writes the decoded text into `buf` and returns it as a `&str`, or fails with
    /// [`EncodeError::BufferTooSmall`] when it does not fit.
    ///
    /// ```
    /// use benchlink_core::http::EncodeError;
    /// let v = benchlink_core::json::parse(r#""a\/b""#, 0).unwrap();
    /// let mut buf = [0u8; 3];
    /// assert_eq!(v.as_str().unwrap().unescape_into(&mut buf), Ok("a/b"));
    /// assert_eq!(v.as_str().unwrap().unescape_into(&mut buf[..2]), Err(EncodeError::BufferTooSmall { capacity: 2 }));
    /// ```
    pub fn unescape_into<'b>(&self, buf: &'b mut [u8]) -> Result<&'b str, EncodeError> {
        let mut out = Cursor::new(&mut *buf);
        for c in self.chars() {
            out.push_str(c.encode_utf8(&mut [0; 4]))?;
        }
        let len = out.len();
        // Only whole UTF-8 encoded chars were written, so this cannot fail.
        Ok(core::str::from_utf8(buf.get(..len).unwrap_or_default()).unwrap_or_default())
    }
}

/// Compares decoded text, so `"\u0041"` equals `"A"`.
impl PartialEq for JsonStr<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw || self.unescaped().eq(other.unescaped())
    }
}

impl Eq for JsonStr<'_> {}

/// Every escape is longer than what it stands for, so the lengths alone settle most
/// comparisons: shorter raw text never matches, raw text of the same length matches only
/// byte for byte and without escapes, and only longer raw text needs decoding.
impl PartialEq<str> for JsonStr<'_> {
    fn eq(&self, other: &str) -> bool {
        match self.raw.len().cmp(&other.len()) {
            core::cmp::Ordering::Less => false,
            core::cmp::Ordering::Equal => self.raw == other && !self.has_escape(),
            // An escape decodes to fewer bytes, so a longer text matches only through
            // one; a first byte that is no backslash decodes to itself and must match
            // (most keys a lookup passes differ there, and then no scan is needed).
            core::cmp::Ordering::Greater => match self.raw.as_bytes().first() {
                Some(&b) if b != b'\\' && other.as_bytes().first() != Some(&b) => false,
                _ => self.has_escape() && self.unescaped().eq(other.bytes()),
            },
        }
    }
}

impl PartialEq<&str> for JsonStr<'_> {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

/// Prints the decoded text.
impl fmt::Display for JsonStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_plain() {
            Some(plain) => f.write_str(plain),
            None => self.chars().try_for_each(|c| f.write_char(c)),
        }
    }
}

/// Logs the raw (still escaped) text: decoding would need a buffer.
#[cfg(feature = "defmt")]
impl defmt::Format for JsonStr<'_> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "{=str}", self.raw)
    }
}

/// Iterator over the decoded characters of a [`JsonStr`].
#[derive(Debug, Clone)]
pub struct Chars<'a> {
    rest: core::str::Chars<'a>,
}

impl Chars<'_> {
    fn escape(&mut self) -> char {
        match self.rest.next() {
            Some('b') => '\u{8}',
            Some('f') => '\u{c}',
            Some('n') => '\n',
            Some('r') => '\r',
            Some('t') => '\t',
            Some('u') => self.unicode_escape(),
            Some(c) => c, // `"`, `\` and `/` stand for themselves
            None => char::REPLACEMENT_CHARACTER,
        }
    }

    /// After `\u`: one code point, or a surrogate pair written as two escapes.
    fn unicode_escape(&mut self) -> char {
        let Some(unit) = self.hex4() else {
            return char::REPLACEMENT_CHARACTER;
        };
        if (0xD800..0xDC00).contains(&unit) {
            let mut ahead = self.clone();
            let low = match (ahead.rest.next(), ahead.rest.next()) {
                (Some('\\'), Some('u')) => ahead.hex4(),
                _ => None,
            };
            if let Some(low @ 0xDC00..=0xDFFF) = low {
                *self = ahead;
                let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                return char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER);
            }
        }
        char::from_u32(unit).unwrap_or(char::REPLACEMENT_CHARACTER)
    }

    fn hex4(&mut self) -> Option<u32> {
        (0..4).try_fold(0, |n, _| Some(n * 16 + self.rest.next()?.to_digit(16)?))
    }
}

impl Iterator for Chars<'_> {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        match self.rest.next()? {
            '\\' => Some(self.escape()),
            c => Some(c),
        }
    }
}

/// A JSON number, kept as its validated text: reading one parses nothing.
///
/// The protocols' numbers are Erlang's: integers (`3`, `2000`) and floats, always with a
/// fraction or exponent (`0.3`, `2.0`, `2.9975917348002614`, `1.0e-5`, `1.0e20`). A number
/// converts only when asked — [`as_i64`](Number::as_i64)/[`as_u64`](Number::as_u64) with
/// the integer parser, [`as_f64`](Number::as_f64) with the float parser — so code that
/// only forwards or compares numbers (an agent republishing samples) links no float
/// parsing (on a Cortex-M that is about 17 KiB of flash) and no float formatting:
/// [`as_str`](Number::as_str) and `Display` give the text exactly as the server wrote it.
///
/// Equality (`==`, `Eq`, `Hash`) compares the **text**: `1.0` is not `1`, and `1e2` is
/// not `100.0`. Compare values with [`as_i64`](Number::as_i64) or
/// [`as_f64`](Number::as_f64). A `Number` also compares with a `&str`.
///
/// ```
/// use benchlink_core::json::Number;
/// let n = Number::parse("2000").unwrap();
/// assert_eq!((n.as_i64(), n.is_integer(), n.as_str()), (Some(2000), true, "2000"));
/// let f = Number::parse("1.0e-5").unwrap();
/// assert_eq!((f.as_i64(), f.is_integer(), f.as_f64()), (None, false, 1.0e-5));
/// assert_eq!(f.to_string(), "1.0e-5"); // as written, not `0.00001`
/// assert!(f == "1.0e-5" && Number::parse("2.0").unwrap() != Number::parse("2").unwrap());
/// assert!(Number::parse("1.").is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Number<'a> {
    /// Always one complete JSON number.
    text: &'a str,
}

impl<'a> Number<'a> {
    /// Checks that `text` is exactly one JSON number (no sign `+`, no leading zeros, no
    /// whitespace, no `inf`/`NaN`) and keeps it. Nothing is converted.
    ///
    /// ```
    /// use benchlink_core::json::{Number, ErrorKind};
    /// assert_eq!(Number::parse("-0.5").map(|n| n.as_f64()), Ok(-0.5));
    /// assert_eq!(Number::parse("NaN").map_err(|e| e.kind), Err(ErrorKind::InvalidNumber));
    /// assert_eq!(Number::parse("01").map_err(|e| e.offset), Err(1));
    /// ```
    pub fn parse(text: &'a str) -> Result<Number<'a>, Error> {
        let mut s = Scanner::new(text, 0);
        s.number()?;
        if s.pos < text.len() {
            return Err(s.error(ErrorKind::InvalidNumber));
        }
        Ok(Number { text })
    }

    /// The number's text, exactly as it appeared in the input (a valid JSON number,
    /// ready to be written into another JSON document as is).
    ///
    /// ```
    /// let v = benchlink_core::json::parse("[1.0e20]", 1).unwrap();
    /// let n = v.as_array().and_then(|a| a.get(0)).and_then(|n| n.as_number());
    /// assert_eq!(n.map(|n| n.as_str()), Some("1.0e20"));
    /// ```
    pub const fn as_str(&self) -> &'a str {
        self.text
    }

    /// True when the number is written without fraction or exponent (`2000`, `-3`), as
    /// Erlang writes integers; `2.0` and `1e3` are not. Says nothing about range: see
    /// [`as_i64`](Number::as_i64).
    ///
    /// ```
    /// use benchlink_core::json::Number;
    /// assert!(Number::parse("-3").unwrap().is_integer());
    /// assert!(!Number::parse("3.0").unwrap().is_integer());
    /// ```
    pub fn is_integer(&self) -> bool {
        is_integer_text(self.text)
    }

    /// The number as an `i64`, if it is an integer ([`is_integer`](Number::is_integer))
    /// in range. Uses only the integer parser.
    ///
    /// ```
    /// use benchlink_core::json::Number;
    /// assert_eq!(Number::parse("-9223372036854775808").unwrap().as_i64(), Some(i64::MIN));
    /// assert_eq!(Number::parse("9223372036854775808").unwrap().as_i64(), None);
    /// assert_eq!(Number::parse("7.0").unwrap().as_i64(), None);
    /// ```
    pub fn as_i64(&self) -> Option<i64> {
        self.integer()
    }

    /// The number as a `u64`, if it is a non-negative integer in range (ids, counts,
    /// Unix seconds). Uses only the integer parser.
    ///
    /// ```
    /// use benchlink_core::json::Number;
    /// assert_eq!(Number::parse("18446744073709551615").unwrap().as_u64(), Some(u64::MAX));
    /// assert_eq!(Number::parse("-1").unwrap().as_u64(), None);
    /// ```
    pub fn as_u64(&self) -> Option<u64> {
        // An integer's text is `-?digits`: a sign makes it no `u64`.
        if self.is_integer() {
            crate::http::parse_decimal(self.text.as_bytes())
        } else {
            None
        }
    }

    fn integer<T: core::str::FromStr>(&self) -> Option<T> {
        if self.is_integer() {
            self.text.parse().ok()
        } else {
            None
        }
    }

    /// The number as an `f64`: the nearest one, so large integers and long fractions
    /// round, and magnitudes beyond `f64` become infinite (`1e400`). Runs the float
    /// parser on each call; it is linked only into programs that call this.
    ///
    /// ```
    /// use benchlink_core::json::Number;
    /// assert_eq!(Number::parse("2.9975917348002614").unwrap().as_f64(), 2.9975917348002614);
    /// assert_eq!(Number::parse("3").unwrap().as_f64(), 3.0);
    /// assert_eq!(Number::parse("-1e400").unwrap().as_f64(), f64::NEG_INFINITY);
    /// ```
    pub fn as_f64(&self) -> f64 {
        // The float parser accepts every JSON number (overflow gives infinity), so the
        // fallback is unreachable.
        self.text.parse().unwrap_or(f64::NAN)
    }
}

/// Prints the text as written: `2.0` stays `2.0`, `1.0e-5` stays `1.0e-5`. No number
/// formatting code is involved.
impl fmt::Display for Number<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text)
    }
}

/// `Number(2.0)`: the text, unquoted.
impl fmt::Debug for Number<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Number(")?;
        f.write_str(self.text)?;
        f.write_str(")")
    }
}

/// Text equality, as for two numbers: `n == "2.0"`.
impl PartialEq<str> for Number<'_> {
    fn eq(&self, other: &str) -> bool {
        self.text == other
    }
}

impl PartialEq<&str> for Number<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.text == *other
    }
}

/// The UTF-8 bytes of a [`JsonStr`]'s decoded text: what [`Chars`] yields, encoded. The
/// bytes around escapes pass through as they are (the raw text is UTF-8 already), so no
/// UTF-8 is decoded: only an escape's character is encoded.
#[derive(Debug, Clone)]
struct Unescaped<'a> {
    rest: &'a [u8],
    /// The continuation bytes of the current escape's character still to come, the
    /// next in the low byte; `left` of them.
    pending: u32,
    left: u8,
}

impl Unescaped<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.rest.split_first()?;
        self.rest = rest;
        Some(b)
    }

    /// After `\u`: one code point, or a surrogate pair written as two escapes, as
    /// [`Chars`] reads it.
    fn unicode_escape(&mut self) -> char {
        let Some(unit) = self.hex4() else {
            return char::REPLACEMENT_CHARACTER;
        };
        if (0xD800..0xDC00).contains(&unit) {
            let mut ahead = self.clone();
            let low = match (ahead.byte(), ahead.byte()) {
                (Some(b'\\'), Some(b'u')) => ahead.hex4(),
                _ => None,
            };
            if let Some(low @ 0xDC00..=0xDFFF) = low {
                self.rest = ahead.rest;
                let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                return char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER);
            }
        }
        char::from_u32(unit).unwrap_or(char::REPLACEMENT_CHARACTER)
    }

    /// Four hex digits; like [`Chars`], a character that is not one is consumed (all
    /// of its bytes).
    fn hex4(&mut self) -> Option<u32> {
        let mut n = 0;
        for _ in 0..4 {
            let b = self.byte()?;
            let Some(digit) = char::from(b).to_digit(16) else {
                while self.rest.first().is_some_and(|&b| b & 0xC0 == 0x80) {
                    self.byte();
                }
                return None;
            };
            n = n * 16 + digit;
        }
        Some(n)
    }
}

impl Iterator for Unescaped<'_> {
    type Item = u8;

    fn next(&mut self) -> Option<u8> {
        if self.left > 0 {
            let b = self.pending as u8;
            self.pending >>= 8;
            self.left -= 1;
            return Some(b);
        }
        let b = self.byte()?;
        if b != b'\\' {
            return Some(b);
        }
        let c = match self.byte() {
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => self.unicode_escape(),
            // `"`, `\` and `/` stand for themselves, as does any other character: its
            // first byte here, the rest as they come.
            Some(b) => return Some(b),
            None => char::REPLACEMENT_CHARACTER,
        };
        // UTF-8 by hand, into a register: six bits per continuation byte, the last
        // ones first.
        let mut v = u32::from(c);
        let n = match v {
            0..0x80 => 0,
            0x80..0x800 => 1,
            0x800..0x1_0000 => 2,
            _ => 3,
        };
        for _ in 0..n {
            self.pending = self.pending << 8 | 0x80 | v & 0x3F;
            v >>= 6;
        }
        self.left = n;
        // The lead byte's length prefix: none, `110`, `1110` or `11110`.
        Some((v | 0xF0E0_C000 >> (8 * n) & 0xFF) as u8)
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Number<'_> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "{=str}", self.text)
    }
}

/// A JSON number written without fraction or exponent.
fn is_integer_text(text: &str) -> bool {
    // Bytes: a `char` pattern would link the char searcher.
    !text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E'))
}

/// Byte-level validator over one text; the single place the grammar lives.
struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str, pos: usize) -> Self {
        Scanner {
            bytes: text.as_bytes(),
            pos,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Steps over the byte a [`peek`](Self::peek) just returned (so not past the end).
    /// Unchecked, unlike [`bump`](Self::bump): the peek's bound check is the one check,
    /// and the step, at some forty call sites, is one add.
    fn step(&mut self) {
        self.pos += 1;
    }

    /// Steps over the next byte, if there is one (never past the end): where no peek
    /// has shown that there is.
    fn bump(&mut self) {
        self.pos = self
            .pos
            .wrapping_add(usize::from(self.pos < self.bytes.len()));
    }

    /// `kind` at the current position, or [`ErrorKind::UnexpectedEnd`] if the input ended.
    fn error(&self, kind: ErrorKind) -> Error {
        let kind = if self.peek().is_none() && kind != ErrorKind::TrailingData {
            ErrorKind::UnexpectedEnd
        } else {
            kind
        };
        Error {
            offset: self.pos,
            kind,
        }
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.step();
        }
    }

    fn digits(&mut self) -> Result<(), Error> {
        if !matches!(self.peek(), Some(b'0'..=b'9')) {
            return Err(self.error(ErrorKind::InvalidNumber));
        }
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.step();
        }
        Ok(())
    }

    fn number(&mut self) -> Result<(), Error> {
        if self.peek() == Some(b'-') {
            self.step();
        }
        match self.peek() {
            Some(b'0') => self.step(),
            _ => self.digits()?,
        }
        if self.peek() == Some(b'.') {
            self.step();
            self.digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.step();
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.step();
            }
            self.digits()?;
        }
        Ok(())
    }

    /// Moves to the first byte at or after the current position that ends a run of
    /// plain string content: a quote, a backslash or (when `controls`) a control
    /// character; to the end if there is none.
    fn skip_plain(&mut self, controls: bool) {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        let run = plain_run(rest, controls);
        self.pos = run.map_or(self.bytes.len(), |n| self.pos.saturating_add(n));
    }

    fn string(&mut self) -> Result<(), Error> {
        self.step(); // the opening quote
        loop {
            self.skip_plain(true);
            match self.peek() {
                Some(b'"') => {
                    self.step();
                    return Ok(());
                }
                Some(b'\\') => {
                    self.step();
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.step(),
                        Some(b'u') => {
                            self.step();
                            for _ in 0..4 {
                                if !matches!(self.peek(), Some(b) if b.is_ascii_hexdigit()) {
                                    return Err(self.error(ErrorKind::InvalidEscape));
                                }
                                self.step();
                            }
                        }
                        _ => return Err(self.error(ErrorKind::InvalidEscape)),
                    }
                }
                Some(0..=0x1F) => return Err(self.error(ErrorKind::ControlCharacter)),
                Some(_) => self.step(),
                None => return Err(self.error(ErrorKind::UnexpectedEnd)),
            }
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), Error> {
        for &expected in word {
            if self.peek() != Some(expected) {
                return Err(self.error(ErrorKind::InvalidLiteral));
            }
            self.step();
        }
        Ok(())
    }

    /// Steps over the value at the current position without checking it: for text
    /// [`Scanner::value`] already validated, which every [`Value`] is. On any other text
    /// it stops somewhere, never past the end.
    fn skip_validated(&mut self) {
        match self.peek() {
            Some(b'"') => self.skip_validated_string(),
            Some(b'{' | b'[') => self.skip_validated_container::<crate::swar::Native>(),
            _ => {
                while !matches!(
                    self.peek(),
                    None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                ) {
                    self.step();
                }
            }
        }
    }

    /// [`skip_validated`](Self::skip_validated) for an object or array: a word at a
    /// time, the brackets inside strings masked out by the quotes before them; words with
    /// a backslash (escapes, which may hide a quote) and the last bytes go byte by byte.
    /// Generic in the word so that the host's tests run the 32-bit word of an MCU too.
    fn skip_validated_container<W: crate::swar::Word>(&mut self) {
        use crate::swar::{bits, eq_bytes, flag_byte, prefix_xor};
        let mut depth = 0usize;
        let mut in_string = false;
        loop {
            let rest = self.bytes.get(self.pos..).unwrap_or_default();
            let Some(w) = W::load(rest) else {
                self.skip_bytes(rest.len(), &mut depth, &mut in_string);
                return;
            };
            if eq_bytes(w, b'\\') != W::ZERO {
                if self.skip_bytes(W::BYTES, &mut depth, &mut in_string) {
                    return;
                }
                continue;
            }
            let mut inside = prefix_xor(eq_bytes(w, b'"'));
            if in_string {
                inside = !inside;
            }
            // `[`/`{` and `]`/`}` differ by 0x20 only.
            let folded = w | W::repeat(0x20);
            let opens = eq_bytes(folded, b'{');
            let mut brackets = (opens | eq_bytes(folded, b'}')) & !inside;
            while brackets != W::ZERO {
                let bit = brackets.lowest();
                brackets = brackets ^ bit;
                if opens & bit != W::ZERO {
                    depth += 1;
                } else if depth > 1 {
                    depth -= 1;
                } else {
                    self.pos += flag_byte(bit) + 1;
                    return;
                }
            }
            in_string = inside >> (bits::<W>() - 1) != W::ZERO;
            self.pos += W::BYTES;
        }
    }

    /// The byte-by-byte steps of [`skip_validated_container`](Self::skip_validated_container)
    /// over (at least) the next `n` bytes; true once the container has ended.
    fn skip_bytes(&mut self, n: usize, depth: &mut usize, in_string: &mut bool) -> bool {
        let end = self.pos.saturating_add(n);
        while self.pos < end {
            let b = self.peek();
            self.bump();
            match b {
                Some(b'\\') => self.bump(),
                Some(b'"') => *in_string = !*in_string,
                Some(b'{' | b'[') if !*in_string => *depth += 1,
                Some(b'}' | b']') if !*in_string => {
                    if *depth <= 1 {
                        return true;
                    }
                    *depth -= 1;
                }
                _ => {}
            }
        }
        false
    }

    fn skip_validated_string(&mut self) {
        self.step(); // the opening quote
        loop {
            self.skip_plain(false);
            match self.peek() {
                Some(b'\\') => {
                    self.step();
                    self.bump();
                }
                Some(_) => {
                    self.step();
                    return;
                }
                None => return,
            }
        }
    }

    /// A member key and its colon, whitespace around the colon included; returns where
    /// the key's contents (inside the quotes) start and end.
    fn key(&mut self) -> Result<(usize, usize), Error> {
        self.skip_ws();
        if self.peek() != Some(b'"') {
            return Err(self.error(ErrorKind::ExpectedKey));
        }
        let start = self.pos.saturating_add(1);
        self.string()?;
        let end = self.pos.saturating_sub(1);
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(self.error(ErrorKind::ExpectedColon));
        }
        self.step();
        Ok((start, end))
    }

    /// One complete value starting here (after optional whitespace), at most `max_depth`
    /// containers deep. Iterative: `open` records, per nesting level, whether the
    /// container there is an object.
    fn value(&mut self, max_depth: usize) -> Result<(), Error> {
        let max_depth = max_depth.min(MAX_DEPTH);
        let mut open = BitStack::default();
        let mut depth = 0usize;
        'value: loop {
            self.skip_ws();
            match self.peek() {
                Some(bracket @ (b'{' | b'[')) => {
                    if depth >= max_depth {
                        return Err(self.error(ErrorKind::TooDeep));
                    }
                    let is_object = bracket == b'{';
                    open.set(depth, is_object);
                    depth += 1;
                    self.step();
                    self.skip_ws();
                    let close = if is_object { b'}' } else { b']' };
                    if self.peek() == Some(close) {
                        self.step();
                        depth -= 1;
                    } else {
                        if is_object {
                            self.key()?;
                        }
                        continue 'value;
                    }
                }
                Some(b'"') => self.string()?,
                Some(b'-' | b'0'..=b'9') => self.number()?,
                Some(b't') => self.literal(b"true")?,
                Some(b'f') => self.literal(b"false")?,
                Some(b'n') => self.literal(b"null")?,
                _ => return Err(self.error(ErrorKind::ExpectedValue)),
            }
            // A value is complete: close containers until one continues with `,`.
            while let Some(level) = depth.checked_sub(1) {
                self.skip_ws();
                let in_object = open.get(level);
                match self.peek() {
                    Some(b',') => {
                        self.step();
                        if in_object {
                            self.key()?;
                        }
                        continue 'value;
                    }
                    Some(b'}') if in_object => self.step(),
                    Some(b']') if !in_object => self.step(),
                    _ => return Err(self.error(ErrorKind::ExpectedCommaOrEnd)),
                }
                depth = level;
            }
            return Ok(());
        }
    }
}

/// One bit per nesting level, up to [`MAX_DEPTH`].
#[derive(Default)]
struct BitStack([usize; MAX_DEPTH / BitStack::BITS]);

impl BitStack {
    /// Bits per word: the target's own word, so a 32-bit MCU shifts in one instruction
    /// instead of calling the 64-bit shift routines.
    const BITS: usize = usize::BITS as usize;

    fn set(&mut self, level: usize, bit: bool) {
        if let Some(word) = self.0.get_mut(level / Self::BITS) {
            let mask = 1usize << (level % Self::BITS);
            *word = if bit { *word | mask } else { *word & !mask };
        }
    }

    fn get(&self, level: usize) -> bool {
        self.0
            .get(level / Self::BITS)
            .is_some_and(|word| word >> (level % Self::BITS) & 1 == 1)
    }
}

/// Fixed-capacity text for unit tests: core is `no_std` even under test, so tests format
/// and build inputs in a stack buffer instead of `String`/`Vec`.
#[cfg(test)]
pub(crate) mod testing {
    use core::fmt;

    /// A byte buffer of capacity `N` that is also a `fmt::Write` target.
    pub struct Buf<const N: usize> {
        bytes: [u8; N],
        len: usize,
    }

    impl<const N: usize> Buf<N> {
        pub fn new() -> Self {
            Buf {
                bytes: [0; N],
                len: 0,
            }
        }

        /// `Display` output of `value`.
        pub fn display(value: impl fmt::Display) -> Self {
            let mut b = Self::new();
            fmt::write(&mut b, format_args!("{value}")).unwrap();
            b
        }

        pub fn push(&mut self, bytes: &[u8]) -> &mut Self {
            self.bytes[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
            self
        }

        pub fn repeat(&mut self, bytes: &[u8], n: usize) -> &mut Self {
            (0..n).for_each(|_| {
                self.push(bytes);
            });
            self
        }

        pub fn insert(&mut self, at: usize, b: u8) {
            self.bytes.copy_within(at..self.len, at + 1);
            self.bytes[at] = b;
            self.len += 1;
        }

        pub fn remove(&mut self, at: usize) {
            self.bytes.copy_within(at + 1..self.len, at);
            self.len -= 1;
        }

        pub fn set(&mut self, at: usize, b: u8) {
            self.bytes[at] = b;
        }

        pub fn len(&self) -> usize {
            self.len
        }

        pub fn as_bytes(&self) -> &[u8] {
            &self.bytes[..self.len]
        }

        pub fn as_str(&self) -> &str {
            core::str::from_utf8(self.as_bytes()).unwrap()
        }
    }

    impl<const N: usize> fmt::Write for Buf<N> {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            if self.len + s.len() > N {
                return Err(fmt::Error);
            }
            self.push(s.as_bytes());
            Ok(())
        }
    }

    impl<const N: usize> fmt::Debug for Buf<N> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            fmt::Debug::fmt(&core::str::from_utf8(self.as_bytes()), f)
        }
    }

    impl<const N: usize> PartialEq<&str> for Buf<N> {
        fn eq(&self, other: &&str) -> bool {
            self.as_bytes() == other.as_bytes()
        }
    }
}

/// The length of the run of plain string content at the start of `bytes`: the offset of
/// the first quote, backslash or (when `controls`) control character, `None` when there
/// is none. A word at a time: the scanner skips string content with it and the writer
/// copies it between escapes.
pub(crate) fn plain_run(bytes: &[u8], controls: bool) -> Option<usize> {
    use crate::swar::{bytes_below, find, zero_bytes, Native, Word};
    let special =
        |w: Native| zero_bytes(w ^ Native::repeat(b'"')) | zero_bytes(w ^ Native::repeat(b'\\'));
    if controls {
        find(
            bytes,
            |w| special(w) | bytes_below(w, 0x20),
            |b| b == b'"' || b == b'\\' || b < 0x20,
        )
    } else {
        find(bytes, special, |b| b == b'"' || b == b'\\')
    }
}

#[cfg(test)]
mod tests;

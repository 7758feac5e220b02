//! Encoding-neutral views of a received PDU's parts: [`Text`], [`Item`], [`Map`] and
//! [`List`]. Each borrows the frame it came from, whatever its encoding, so the client
//! and its handlers read a reply or a subscription's messages the same way on every
//! connection, JSON or CBOR; [`Raw`] hands a value's encoded bytes to a deserializer.

use core::fmt::{self, Write as _};

#[cfg(feature = "cbor")]
use crate::cbor;
use crate::http::{Cursor, EncodeError};
use crate::json::{self, Array, JsonStr, Object, Value};

/// One value exactly as it travelled: JSON text, or CBOR bytes (feature `cbor`).
///
/// ```
/// use benchlink_core::rtm::pdu::{Incoming, Raw};
/// let text = r#"{"action":"rtm/subscription/data","body":{"subscription_id":"c","messages":[{"k":1}]}}"#;
/// let Ok(Incoming::Data(data)) = Incoming::parse(text) else { panic!() };
/// let first = data.messages.elements().next().unwrap();
/// assert_eq!(first.raw(), Raw::Json(r#"{"k":1}"#));
/// assert_eq!(first.raw().as_bytes(), br#"{"k":1}"#);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Raw<'a> {
    /// JSON text.
    Json(&'a str),
    /// One CBOR item.
    Cbor(&'a [u8]),
}

impl<'a> Raw<'a> {
    /// The encoded bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        match self {
            Raw::Json(text) => text.as_bytes(),
            Raw::Cbor(bytes) => bytes,
        }
    }

    /// The JSON text, if the value arrived as JSON.
    pub fn as_json(&self) -> Option<&'a str> {
        match self {
            Raw::Json(text) => Some(text),
            Raw::Cbor(_) => None,
        }
    }
}

/// A received string. Compare it with `==` against a `&str`, decode it with
/// [`Text::chars`], print it, or copy it out with [`Text::unescape_into`] — all without
/// allocating.
///
/// ```
/// use benchlink_core::rtm::pdu::Pdu;
/// let p = Pdu::parse(r#"{"action":"x","body":{"subscription_id":"caf\u00e9"}}"#).unwrap();
/// let s = p.subscription_id().unwrap();
/// assert!(s == "café");
/// assert_eq!(s.as_plain(), None); // escaped in the frame
/// assert_eq!(s.to_string(), "café");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Text<'a>(TextRepr<'a>);

#[derive(Debug, Clone, Copy)]
enum TextRepr<'a> {
    Json(JsonStr<'a>),
    /// Decoded text (a CBOR text string needs no escapes).
    #[cfg(feature = "cbor")]
    Plain(&'a str),
}

impl<'a> From<JsonStr<'a>> for Text<'a> {
    fn from(s: JsonStr<'a>) -> Self {
        Text(TextRepr::Json(s))
    }
}

impl<'a> Text<'a> {
    /// The text as received: still escaped when it came in JSON.
    ///
    /// ```
    /// use benchlink_core::rtm::pdu::Pdu;
    /// let p = Pdu::parse(r#"{"action":"x","body":{"position":"a\tb"}}"#).unwrap();
    /// assert_eq!(p.position().unwrap().as_raw(), r"a\tb");
    /// ```
    pub fn as_raw(&self) -> &'a str {
        match self.0 {
            TextRepr::Json(s) => s.as_raw(),
            #[cfg(feature = "cbor")]
            TextRepr::Plain(s) => s,
        }
    }

    /// The text itself, borrowed, when it needs no decoding; `None` for JSON text with
    /// escapes.
    pub fn as_plain(&self) -> Option<&'a str> {
        match self.0 {
            TextRepr::Json(s) => s.as_plain(),
            #[cfg(feature = "cbor")]
            TextRepr::Plain(s) => Some(s),
        }
    }

    /// The JSON string, when the text arrived as JSON.
    pub fn as_json(&self) -> Option<JsonStr<'a>> {
        match self.0 {
            TextRepr::Json(s) => Some(s),
            #[cfg(feature = "cbor")]
            TextRepr::Plain(_) => None,
        }
    }

    /// The decoded characters.
    pub fn chars(&self) -> Chars<'a> {
        match self.0 {
            TextRepr::Json(s) => Chars(CharsRepr::Json(s.chars())),
            #[cfg(feature = "cbor")]
            TextRepr::Plain(s) => Chars(CharsRepr::Plain(s.chars())),
        }
    }

    /// True for the empty string.
    pub fn is_empty(&self) -> bool {
        self.as_raw().is_empty()
    }

    /// Writes the decoded text into `buf` and returns it, or fails with
    /// [`EncodeError::BufferTooSmall`] when it does not fit.
    ///
    /// ```
    /// use benchlink_core::rtm::pdu::Pdu;
    /// let p = Pdu::parse(r#"{"action":"x","body":{"position":"a\/b"}}"#).unwrap();
    /// let mut buf = [0u8; 8];
    /// assert_eq!(p.position().unwrap().unescape_into(&mut buf), Ok("a/b"));
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

/// Compares decoded text.
impl PartialEq for Text<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (self.as_plain(), other.as_plain()) {
            (Some(a), Some(b)) => a == b,
            _ => self.chars().eq(other.chars()),
        }
    }
}

impl Eq for Text<'_> {}

impl PartialEq<str> for Text<'_> {
    fn eq(&self, other: &str) -> bool {
        match self.0 {
            TextRepr::Json(s) => s == *other,
            #[cfg(feature = "cbor")]
            TextRepr::Plain(s) => s == other,
        }
    }
}

impl PartialEq<&str> for Text<'_> {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

/// Prints the decoded text.
impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_plain() {
            Some(plain) => f.write_str(plain),
            None => self.chars().try_for_each(|c| f.write_char(c)),
        }
    }
}

/// Logs the text as received (decoding would need a buffer).
#[cfg(feature = "defmt")]
impl defmt::Format for Text<'_> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "{=str}", self.as_raw())
    }
}

/// The characters of a [`Text`]; see [`Text::chars`].
#[derive(Debug, Clone)]
pub struct Chars<'a>(CharsRepr<'a>);

#[derive(Debug, Clone)]
enum CharsRepr<'a> {
    Json(json::Chars<'a>),
    #[cfg(feature = "cbor")]
    Plain(core::str::Chars<'a>),
}

impl Iterator for Chars<'_> {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        match &mut self.0 {
            CharsRepr::Json(c) => c.next(),
            #[cfg(feature = "cbor")]
            CharsRepr::Plain(c) => c.next(),
        }
    }
}

/// One received value of any type (a message, a member of a body).
///
/// ```
/// use benchlink_core::rtm::pdu::Pdu;
/// let p = Pdu::parse(r#"{"action":"rtm/read/ok","id":1,"body":{"message":{"n":3,"s":"x"}}}"#).unwrap();
/// let m = p.message().unwrap();
/// assert_eq!(m.get("n").and_then(|n| n.as_u64()), Some(3));
/// assert!(m.get("s").and_then(|s| s.as_text()).is_some_and(|s| s == "x"));
/// assert_eq!(m.raw().as_json(), Some(r#"{"n":3,"s":"x"}"#));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Item<'a>(ItemRepr<'a>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum ItemRepr<'a> {
    Json(Value<'a>),
    #[cfg(feature = "cbor")]
    Cbor(cbor::Item<'a>),
}

impl<'a> From<Value<'a>> for Item<'a> {
    fn from(v: Value<'a>) -> Self {
        Item(ItemRepr::Json(v))
    }
}

#[cfg(feature = "cbor")]
impl<'a> From<cbor::Item<'a>> for Item<'a> {
    fn from(v: cbor::Item<'a>) -> Self {
        Item(ItemRepr::Cbor(v))
    }
}

impl<'a> Item<'a> {
    /// The value's encoded bytes, borrowed from the frame: hand them to a deserializer.
    pub fn raw(&self) -> Raw<'a> {
        match self.0 {
            ItemRepr::Json(v) => Raw::Json(v.as_raw()),
            #[cfg(feature = "cbor")]
            ItemRepr::Cbor(v) => Raw::Cbor(v.as_raw()),
        }
    }

    /// The JSON value, when the item arrived as JSON.
    pub fn as_json(&self) -> Option<Value<'a>> {
        match self.0 {
            ItemRepr::Json(v) => Some(v),
            #[cfg(feature = "cbor")]
            ItemRepr::Cbor(_) => None,
        }
    }

    /// The CBOR item, when the item arrived as CBOR.
    #[cfg(feature = "cbor")]
    pub fn as_cbor(&self) -> Option<cbor::Item<'a>> {
        match self.0 {
            ItemRepr::Cbor(v) => Some(v),
            ItemRepr::Json(_) => None,
        }
    }

    /// True for `null`.
    pub fn is_null(&self) -> bool {
        match self.0 {
            ItemRepr::Json(v) => v.is_null(),
            #[cfg(feature = "cbor")]
            ItemRepr::Cbor(v) => v.is_null(),
        }
    }

    /// The string, if the item is one.
    pub fn as_text(&self) -> Option<Text<'a>> {
        match self.0 {
            ItemRepr::Json(v) => v.as_str().map(Text::from),
            #[cfg(feature = "cbor")]
            ItemRepr::Cbor(v) => v.as_str().map(|s| Text(TextRepr::Plain(s))),
        }
    }

    /// The non-negative integer, if the item is one that fits a `u64`.
    pub fn as_u64(&self) -> Option<u64> {
        match self.0 {
            ItemRepr::Json(v) => v.as_u64(),
            #[cfg(feature = "cbor")]
            ItemRepr::Cbor(v) => v.as_u64(),
        }
    }

    /// The map (JSON object), if the item is one.
    pub fn as_map(&self) -> Option<Map<'a>> {
        match self.0 {
            ItemRepr::Json(v) => v.as_object().map(Map::from),
            #[cfg(feature = "cbor")]
            ItemRepr::Cbor(v) => v.is_map().then_some(Map(MapRepr::Cbor(v))),
        }
    }

    /// The list (JSON array), if the item is one.
    pub fn as_list(&self) -> Option<List<'a>> {
        match self.0 {
            ItemRepr::Json(v) => v.as_array().map(List::from),
            #[cfg(feature = "cbor")]
            ItemRepr::Cbor(v) => v.is_array().then_some(List(ListRepr::Cbor(v))),
        }
    }

    /// The member `key` of a map item (the first of that name).
    pub fn get(&self, key: &str) -> Option<Item<'a>> {
        self.as_map()?.get(key)
    }
}

/// A received map (JSON object) with string keys: a PDU body, or a message that is one.
///
/// ```
/// use benchlink_core::rtm::pdu::Pdu;
/// let p = Pdu::parse(r#"{"action":"rtm/write/ok","id":1,"body":{"position":"1:0"}}"#).unwrap();
/// let body = p.body.unwrap();
/// assert!(body.get("position").is_some() && !body.is_empty());
/// assert_eq!(body.raw().as_json(), Some(r#"{"position":"1:0"}"#));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Map<'a>(MapRepr<'a>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum MapRepr<'a> {
    Json(Object<'a>),
    #[cfg(feature = "cbor")]
    Cbor(cbor::Item<'a>),
}

impl<'a> From<Object<'a>> for Map<'a> {
    fn from(o: Object<'a>) -> Self {
        Map(MapRepr::Json(o))
    }
}

impl<'a> Map<'a> {
    /// The members named `keys`, in that order (the first of each name), found in one
    /// walk over the map: where a reader wants several members, `get` for each would walk
    /// it once per name.
    pub(crate) fn pick<const N: usize>(&self, keys: [&str; N]) -> [Option<Item<'a>>; N] {
        let mut found = [None; N];
        let mut missing = N;
        let mut take = |at: Option<usize>, item: Item<'a>| {
            if let Some(slot @ None) = at.and_then(|i| found.get_mut(i)) {
                *slot = Some(item);
                missing -= 1;
            }
            missing > 0
        };
        match self.0 {
            MapRepr::Json(o) => {
                for (name, value) in o.members() {
                    if !take(keys.iter().position(|k| name == *k), value.into()) {
                        break;
                    }
                }
            }
            #[cfg(feature = "cbor")]
            MapRepr::Cbor(m) => {
                for (name, value) in m.entries() {
                    let at = name
                        .as_str()
                        .and_then(|n| keys.iter().position(|k| n == *k));
                    if !take(at, value.into()) {
                        break;
                    }
                }
            }
        }
        found
    }

    /// The member `key` (the first of that name).
    pub fn get(&self, key: &str) -> Option<Item<'a>> {
        match self.0 {
            MapRepr::Json(o) => o.get(key).map(Item::from),
            #[cfg(feature = "cbor")]
            MapRepr::Cbor(m) => m.get(key).map(Item::from),
        }
    }

    /// True when the map has no members.
    pub fn is_empty(&self) -> bool {
        match self.0 {
            MapRepr::Json(o) => o.is_empty(),
            #[cfg(feature = "cbor")]
            MapRepr::Cbor(m) => m.is_empty(),
        }
    }

    /// The map's encoded bytes.
    pub fn raw(&self) -> Raw<'a> {
        match self.0 {
            MapRepr::Json(o) => Raw::Json(o.as_raw()),
            #[cfg(feature = "cbor")]
            MapRepr::Cbor(m) => Raw::Cbor(m.as_raw()),
        }
    }

    /// The JSON object, when the map arrived as JSON.
    pub fn as_json(&self) -> Option<Object<'a>> {
        match self.0 {
            MapRepr::Json(o) => Some(o),
            #[cfg(feature = "cbor")]
            MapRepr::Cbor(_) => None,
        }
    }
}

/// A received list (JSON array): the `messages` of a subscription's data, a search's
/// channels.
///
/// ```
/// use benchlink_core::rtm::pdu::Pdu;
/// let p = Pdu::parse(r#"{"action":"rtm/search/ok","id":1,"body":{"channels":["a","b"]}}"#).unwrap();
/// let channels = p.channels().unwrap();
/// assert!(channels.elements().filter_map(|c| c.as_text()).eq(["a", "b"].map(|s| s)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct List<'a>(ListRepr<'a>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum ListRepr<'a> {
    Json(Array<'a>),
    #[cfg(feature = "cbor")]
    Cbor(cbor::Item<'a>),
}

impl<'a> From<Array<'a>> for List<'a> {
    fn from(a: Array<'a>) -> Self {
        List(ListRepr::Json(a))
    }
}

impl<'a> List<'a> {
    /// The elements, in order.
    pub fn elements(&self) -> Elements<'a> {
        match self.0 {
            ListRepr::Json(a) => Elements(ElementsRepr::Json(a.elements())),
            #[cfg(feature = "cbor")]
            ListRepr::Cbor(a) => Elements(ElementsRepr::Cbor(a.elements())),
        }
    }

    /// True when the list has no elements.
    pub fn is_empty(&self) -> bool {
        match self.0 {
            ListRepr::Json(a) => a.is_empty(),
            #[cfg(feature = "cbor")]
            ListRepr::Cbor(a) => a.is_empty(),
        }
    }

    /// The list's encoded bytes.
    pub fn raw(&self) -> Raw<'a> {
        match self.0 {
            ListRepr::Json(a) => Raw::Json(a.as_raw()),
            #[cfg(feature = "cbor")]
            ListRepr::Cbor(a) => Raw::Cbor(a.as_raw()),
        }
    }

    /// The JSON array, when the list arrived as JSON.
    pub fn as_json(&self) -> Option<Array<'a>> {
        match self.0 {
            ListRepr::Json(a) => Some(a),
            #[cfg(feature = "cbor")]
            ListRepr::Cbor(_) => None,
        }
    }
}

/// The elements of a [`List`]; see [`List::elements`].
#[derive(Debug, Clone)]
pub struct Elements<'a>(ElementsRepr<'a>);

#[derive(Debug, Clone)]
enum ElementsRepr<'a> {
    Json(json::Elements<'a>),
    #[cfg(feature = "cbor")]
    Cbor(cbor::Children<'a>),
}

impl<'a> Iterator for Elements<'a> {
    type Item = Item<'a>;

    fn next(&mut self) -> Option<Item<'a>> {
        match &mut self.0 {
            ElementsRepr::Json(e) => e.next().map(Item::from),
            #[cfg(feature = "cbor")]
            ElementsRepr::Cbor(e) => e.next().map(Item::from),
        }
    }
}

//! The reader: [`parse`] and the [`Item`] views.
//!
//! ```
//! use benchlink_core::cbor;
//! // {"who": "zebra", "raw": h'00ff'}
//! let bytes = [0xa2, 0x63, b'w', b'h', b'o', 0x65, b'z', b'e', b'b', b'r', b'a', 0x63, b'r', b'a', b'w', 0x42, 0x00, 0xff];
//! let item = cbor::parse(&bytes, cbor::DEFAULT_MAX_DEPTH).unwrap();
//! assert_eq!(item.get("who").and_then(|v| v.as_str()), Some("zebra"));
//! assert_eq!(item.get("raw").and_then(|v| v.as_bytes()), Some(&[0x00, 0xff][..]));
//! assert_eq!(item.as_raw(), &bytes[..]);
//! ```

use minicbor::data::Type;
use minicbor::Decoder;

use super::{Error, ErrorKind};

/// The deepest nesting [`parse`] accepts: its walk keeps one counter per open container
/// on the stack (8 bytes each).
pub const MAX_DEPTH: usize = 64;

/// The nesting limit for RTM PDUs, as for JSON: envelope, body and `messages` array
/// included, which leaves 29 levels to a message.
pub const DEFAULT_MAX_DEPTH: usize = 32;

/// Validates `bytes` as exactly one well-formed CBOR item nested at most `max_depth`
/// containers deep (clamped to [`MAX_DEPTH`]).
///
/// ```
/// use benchlink_core::cbor::{self, Error, ErrorKind};
/// assert_eq!(cbor::parse(&[0x82, 0x01], 4), Err(Error { offset: 2, kind: ErrorKind::Malformed }));
/// assert_eq!(cbor::parse(&[0x81, 0x81, 0x80], 2), Err(Error { offset: 2, kind: ErrorKind::TooDeep }));
/// assert_eq!(cbor::parse(&[0x01, 0x02], 2), Err(Error { offset: 1, kind: ErrorKind::TrailingData }));
/// // An indefinite-length array inside a definite one: [[_ 1, 2]]
/// let item = cbor::parse(&[0x81, 0x9f, 0x01, 0x02, 0xff], 2).unwrap();
/// let inner = item.elements().next().unwrap();
/// assert_eq!(inner.elements().filter_map(|e| e.as_u64()).sum::<u64>(), 3);
/// ```
pub fn parse(bytes: &[u8], max_depth: usize) -> Result<Item<'_>, Error> {
    let mut d = Decoder::new(bytes);
    skip(&mut d, max_depth.min(MAX_DEPTH))?;
    if d.position() < bytes.len() {
        return Err(Error {
            offset: d.position(),
            kind: ErrorKind::TrailingData,
        });
    }
    Ok(Item { raw: bytes })
}

fn malformed(d: &Decoder<'_>) -> Error {
    Error {
        offset: d.position(),
        kind: ErrorKind::Malformed,
    }
}

/// Steps `d` over one item, nested containers included, with one counter per open
/// container (`None` for an indefinite one, which ends at its break byte).
pub(super) fn skip(d: &mut Decoder<'_>, max_depth: usize) -> Result<(), Error> {
    let mut open = [None::<u64>; MAX_DEPTH];
    let mut depth = 0usize;
    loop {
        let at = d.position();
        let ty = d.datatype().map_err(|_| malformed(d))?;
        // The length of a container just opened; `None` for a complete item.
        let opened = match ty {
            Type::Array => Some(d.array().map_err(|_| malformed(d))?),
            Type::Map => Some(
                d.map()
                    .map_err(|_| malformed(d))?
                    .map(|n| n.saturating_mul(2)),
            ),
            Type::ArrayIndef | Type::MapIndef => {
                // One head byte.
                d.set_position(d.position().saturating_add(1));
                Some(None)
            }
            Type::Tag => {
                d.tag().map_err(|_| malformed(d))?;
                continue; // a tag is followed by the item it tags
            }
            Type::Break => {
                let Some(Some(None)) = depth.checked_sub(1).map(|top| open.get(top).copied())
                else {
                    return Err(malformed(d)); // a break outside an indefinite container
                };
                d.set_position(d.position().saturating_add(1));
                depth = depth.saturating_sub(1);
                None
            }
            Type::Unknown(_) => return Err(malformed(d)),
            _ => {
                // Scalars and strings (definite or chunked); never a container here.
                d.skip().map_err(|_| malformed(d))?;
                None
            }
        };
        if let Some(len) = opened {
            // An empty container is a level too, as in JSON.
            if depth >= max_depth {
                return Err(Error {
                    offset: at,
                    kind: ErrorKind::TooDeep,
                });
            }
            if len != Some(0) {
                let slot = open.get_mut(depth).ok_or(malformed(d))?;
                *slot = len;
                depth = depth.saturating_add(1);
                continue;
            }
        }
        // One item is complete: count it in the innermost definite container, closing
        // every container it completes.
        loop {
            let Some(top) = depth.checked_sub(1) else {
                return Ok(());
            };
            match open.get_mut(top) {
                Some(Some(n)) => {
                    *n = n.saturating_sub(1);
                    if *n > 0 {
                        break;
                    }
                    depth = top;
                }
                _ => break, // indefinite: it ends at its break
            }
        }
    }
}

/// One well-formed item, borrowed from the input exactly as encoded. Containers are
/// walked on demand: [`entries`](Self::entries) of a map, [`elements`](Self::elements)
/// of an array, [`get`](Self::get) a map's member by text key.
///
/// ```
/// use benchlink_core::cbor;
/// // {"a": [1, h'ff'], "b": null}
/// let bytes = [0xa2, 0x61, b'a', 0x82, 0x01, 0x41, 0xff, 0x61, b'b', 0xf6];
/// let item = cbor::parse(&bytes, 4).unwrap();
/// assert!(item.is_map() && !item.is_empty());
/// assert_eq!(item.entries().filter_map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["a", "b"]);
/// let a = item.get("a").unwrap();
/// assert!(a.is_array());
/// assert_eq!(a.elements().next().and_then(|e| e.as_u64()), Some(1));
/// assert_eq!(a.elements().nth(1).and_then(|e| e.as_bytes()), Some(&[0xff][..]));
/// assert!(item.get("b").is_some_and(|b| b.is_null()));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Item<'a> {
    raw: &'a [u8],
}

impl<'a> Item<'a> {
    /// The item's encoded bytes, borrowed from the input: hand them to any decoder.
    pub fn as_raw(&self) -> &'a [u8] {
        self.raw
    }

    fn decoder(&self) -> Decoder<'a> {
        Decoder::new(self.raw)
    }

    /// Past any tags.
    fn untagged(&self) -> Decoder<'a> {
        let mut d = self.decoder();
        while let Ok(Type::Tag) = d.datatype() {
            if d.tag().is_err() {
                break;
            }
        }
        d
    }

    /// True for `null` (and `undefined`, which no JSON peer can tell from it).
    ///
    /// ```
    /// assert!(benchlink_core::cbor::parse(&[0xf6], 0).unwrap().is_null());
    /// ```
    pub fn is_null(&self) -> bool {
        matches!(self.untagged().datatype(), Ok(Type::Null | Type::Undefined))
    }

    /// The text of a definite-length text string; `None` for any other item (a chunked
    /// string has no contiguous text to borrow).
    ///
    /// ```
    /// let item = benchlink_core::cbor::parse(&[0x62, b'h', b'i'], 0).unwrap();
    /// assert_eq!(item.as_str(), Some("hi"));
    /// ```
    pub fn as_str(&self) -> Option<&'a str> {
        let mut d = self.untagged();
        match d.datatype() {
            Ok(Type::String) => d.str().ok(),
            _ => None,
        }
    }

    /// The bytes of a definite-length byte string.
    pub fn as_bytes(&self) -> Option<&'a [u8]> {
        let mut d = self.untagged();
        match d.datatype() {
            Ok(Type::Bytes) => d.bytes().ok(),
            _ => None,
        }
    }

    /// A non-negative integer (major type 0, any width).
    ///
    /// ```
    /// assert_eq!(benchlink_core::cbor::parse(&[0x18, 0x2a], 0).unwrap().as_u64(), Some(42));
    /// ```
    pub fn as_u64(&self) -> Option<u64> {
        let mut d = self.untagged();
        match d.datatype() {
            Ok(Type::U8 | Type::U16 | Type::U32 | Type::U64) => d.u64().ok(),
            _ => None,
        }
    }

    /// True for a map (definite or indefinite).
    pub fn is_map(&self) -> bool {
        matches!(self.untagged().datatype(), Ok(Type::Map | Type::MapIndef))
    }

    /// True for an array (definite or indefinite).
    pub fn is_array(&self) -> bool {
        matches!(
            self.untagged().datatype(),
            Ok(Type::Array | Type::ArrayIndef)
        )
    }

    /// The items inside a container (keys and values alternate in a map); empty for
    /// anything else.
    fn children(&self) -> Children<'a> {
        let mut d = self.untagged();
        let left = match d.datatype() {
            Ok(Type::Array) => d.array().ok().flatten(),
            Ok(Type::Map) => d.map().ok().flatten().map(|n| n.saturating_mul(2)),
            Ok(Type::ArrayIndef | Type::MapIndef) => {
                d.set_position(d.position().saturating_add(1));
                None
            }
            _ => Some(0),
        };
        Children { d, left }
    }

    /// The elements of an array; nothing for another item.
    pub fn elements(&self) -> Children<'a> {
        if self.is_array() {
            self.children()
        } else {
            Children {
                d: self.decoder(),
                left: Some(0),
            }
        }
    }

    /// The members of a map as (key, value) pairs; nothing for another item.
    pub fn entries(&self) -> Entries<'a> {
        Entries(if self.is_map() {
            self.children()
        } else {
            Children {
                d: self.decoder(),
                left: Some(0),
            }
        })
    }

    /// The value of the first member whose key is the text string `key`.
    pub fn get(&self, key: &str) -> Option<Item<'a>> {
        self.entries()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }

    /// True for an empty container.
    pub fn is_empty(&self) -> bool {
        self.children().next().is_none()
    }
}

/// The items inside a container, in order; see [`Item::elements`].
#[derive(Debug, Clone)]
pub struct Children<'a> {
    d: Decoder<'a>,
    /// Items left in a definite container; `None` for an indefinite one.
    left: Option<u64>,
}

impl<'a> Iterator for Children<'a> {
    type Item = Item<'a>;

    fn next(&mut self) -> Option<Item<'a>> {
        match self.left {
            Some(0) => return None,
            None if matches!(self.d.datatype(), Ok(Type::Break) | Err(_)) => return None,
            _ => {}
        }
        let start = self.d.position();
        // The container was validated when parsed: this cannot fail, and stops the
        // iteration if it did.
        if skip(&mut self.d, MAX_DEPTH).is_err() {
            self.left = Some(0);
            return None;
        }
        if let Some(n) = self.left.as_mut() {
            *n = n.saturating_sub(1);
        }
        let raw = self.d.input().get(start..self.d.position())?;
        Some(Item { raw })
    }
}

/// The (key, value) pairs of a map; see [`Item::entries`].
#[derive(Debug, Clone)]
pub struct Entries<'a>(Children<'a>);

impl<'a> Iterator for Entries<'a> {
    type Item = (Item<'a>, Item<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        Some((self.0.next()?, self.0.next()?))
    }
}

#[cfg(test)]
mod tests;

//! CBOR (RFC 8949), the binary twin of [`json`](crate::json): the errors of reading it
//! (always, as [`PduError`](crate::rtm::pdu::PduError) names them), and with the `cbor`
//! feature a small zero-copy reader and writer. `parse` checks that bytes hold exactly
//! one well-formed item nested no deeper than a limit, and hands out `Item` views —
//! slices of the input — that are never decoded twice. Scalars and strings are read with
//! `minicbor`; the walk over nested containers is this module's own, bounded by the
//! nesting limit and without recursion, so any input (indefinite-length containers
//! included) is read without allocating. `write` holds the encoder the RTM PDUs are
//! written with, and the transcoder from a JSON value (what a user publishes as text) to
//! its CBOR form. With the `serde` feature too, `typed` writes any `T: Serialize` as CBOR
//! and reads an `Item` into any `T: Deserialize<'a>`, as `json::typed` does for JSON.

use core::fmt;

#[cfg(feature = "cbor")]
mod read;
#[cfg(all(feature = "cbor", feature = "serde"))]
pub mod typed;
#[cfg(feature = "cbor")]
pub mod write;

#[cfg(feature = "cbor")]
pub use read::{parse, Children, Entries, Item, DEFAULT_MAX_DEPTH, MAX_DEPTH};

/// Why bytes are not one acceptable CBOR item, and where.
///
/// See `parse` (feature `cbor`) for examples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Error {
    /// Byte offset where the problem was found (the input length when it ended early).
    pub offset: usize,
    /// What was wrong there.
    pub kind: ErrorKind,
}

/// The kinds of [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ErrorKind {
    /// Not well-formed: truncated, a reserved or invalid head, a stray break, a text
    /// string that is not UTF-8, a chunk of the wrong type in an indefinite string.
    Malformed,
    /// Opening this container would exceed the nesting limit.
    TooDeep,
    /// A complete item is followed by more bytes.
    TrailingData,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            ErrorKind::Malformed => "not well-formed",
            ErrorKind::TooDeep => "nesting too deep",
            ErrorKind::TrailingData => "trailing data after the item",
        };
        write!(f, "CBOR: {what} at byte {}", self.offset)
    }
}

impl core::error::Error for Error {}

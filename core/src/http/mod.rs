//! HTTP/1.1 client codec: everything benchlink needs to speak HTTP without owning a socket.
//!
//! Writers put bytes into caller-provided buffers through [`Cursor`]; decoders are
//! push-style and incremental. Nothing here allocates, reads a clock or panics on input.
//!
//! - Requests: [`RequestHead`] (request line, fixed headers, bearer token), query strings
//!   through [`EncodeQuery`], `multipart/form-data` bodies through [`Boundary`] and
//!   [`Part`], and [`ConnectHead`] for HTTPS proxies.
//! - Responses: [`ResponseDecoder`] turns received bytes into [`Event`]s — the [`Head`],
//!   decoded body slices, the end — for `Content-Length`, chunked and close-delimited
//!   bodies, inflating `deflate` (zlib or raw) and `gzip` into an [`InflateMemory`] window
//!   when the caller provides one (with the `deflate` feature, on by default; without it
//!   no inflate code is built and a compressed body is
//!   [`DecodeError::CompressedBodyUnsupported`]). Failures are [`DecodeError`]s.

mod chunked;
mod content_coding;
mod decode_error;
#[cfg(feature = "deflate")]
mod gzip;
mod multipart;
pub mod query;
mod request;
mod response;

pub use chunked::{Chunked, Next as ChunkedNext};
#[cfg(feature = "deflate")]
pub use content_coding::InflateBuffers;
pub use content_coding::{ContentEncoding, InflateMemory};
pub use decode_error::{DecodeError, GzipError, Section};
/// The low-level inflate state of miniz_oxide, re-exported so callers can allocate it
/// (about 11 KB) for [`InflateMemory`] without depending on miniz_oxide themselves.
#[cfg(feature = "deflate")]
pub use miniz_oxide::inflate::core::DecompressorOxide;
pub use multipart::{Boundary, Part, BOUNDARY_LEN};
pub use query::{EncodeQuery, QueryWriter};
pub(crate) use request::{authority, check_host, header};
pub use request::{Body, ConnectHead, RequestHead};
pub(crate) use response::{list_has, parse_decimal};
pub use response::{Event, Framing, Head, Headers, Limits, ResponseDecoder, Version};

/// The request methods the benchmark-server API uses (`POST` only for `/start` and
/// `/typecheck`), `HEAD` (whose response has no body whatever its headers say, so the
/// response decoder must be told) and `CONNECT` for proxies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Method {
    /// `GET`
    Get,
    /// `POST`
    Post,
    /// `HEAD`: the response carries headers only.
    Head,
    /// `CONNECT`, for tunnelling through an HTTPS proxy.
    Connect,
}

impl Method {
    /// The method as it appears on the request line.
    pub const fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Head => "HEAD",
            Method::Connect => "CONNECT",
        }
    }
}

/// `%XX` with upper-case hex, the percent-escape both query strings and multipart
/// parameters use.
pub(crate) fn percent_escape(b: u8) -> [u8; 3] {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let hex = |n: u8| HEX.get(usize::from(n & 0xF)).copied().unwrap_or(b'0');
    [b'%', hex(b >> 4), hex(b)]
}

/// Failure to encode into a caller buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum EncodeError {
    /// The caller's buffer is too small for what had to be written; `capacity` is its size.
    /// Nothing partial should be sent: retry with a larger buffer.
    BufferTooSmall {
        /// Size of the buffer that was too small.
        capacity: usize,
    },
    /// A value would break the message framing (for example a CR or LF in a header
    /// value, or a quote in a multipart field name).
    InvalidValue {
        /// Which field was rejected.
        field: &'static str,
    },
}

impl core::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            EncodeError::BufferTooSmall { capacity } => {
                write!(f, "encode buffer of {capacity} bytes is too small")
            }
            EncodeError::InvalidValue { field } => write!(f, "invalid characters in {field}"),
        }
    }
}

impl core::error::Error for EncodeError {}

/// An append-only writer over a caller-provided byte buffer: the one way core writers emit
/// bytes. A write that does not fit fails with [`EncodeError::BufferTooSmall`] and leaves
/// the already written prefix untouched.
///
/// ```
/// use benchlink_core::http::Cursor;
/// let mut buf = [0u8; 16];
/// let mut c = Cursor::new(&mut buf);
/// c.push(b"id=").unwrap();
/// c.push_u64(42).unwrap();
/// assert_eq!(c.written(), b"id=42");
/// ```
#[derive(Debug)]
pub struct Cursor<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Cursor { buf, len: 0 }
    }

    /// Appends `bytes`, or fails without writing anything.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), EncodeError> {
        let capacity = self.buf.len();
        let end = self.len.checked_add(bytes.len()).filter(|&e| e <= capacity);
        match end.and_then(|end| self.buf.get_mut(self.len..end)) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.len += bytes.len();
                Ok(())
            }
            None => Err(EncodeError::BufferTooSmall { capacity }),
        }
    }

    /// The bytes written from `start` on, to transform in place (the WebSocket client's
    /// masking).
    pub(crate) fn written_from(&mut self, start: usize) -> &mut [u8] {
        self.buf.get_mut(start..self.len).unwrap_or_default()
    }

    /// Appends each of `parts` in turn: one call (and one error check) for a line written
    /// from pieces. On error the parts before the one that did not fit stay written.
    pub(crate) fn push_all(&mut self, parts: &[&[u8]]) -> Result<(), EncodeError> {
        parts.iter().try_for_each(|part| self.push(part))
    }

    /// Appends a string.
    pub fn push_str(&mut self, s: &str) -> Result<(), EncodeError> {
        self.push(s.as_bytes())
    }

    /// Appends an unsigned integer in decimal without going through `core::fmt`
    /// (which would cost flash on a microcontroller).
    pub fn push_u64(&mut self, n: u64) -> Result<(), EncodeError> {
        // Long division by 10 over 16-bit limbs, most significant first: every step fits
        // 32 bits, so a Cortex-M divides in hardware instead of linking the 64-bit
        // division routine (most of a kilobyte of flash).
        let mut limbs = [
            (n >> 48) as u32,
            (n >> 32) as u32 & 0xffff,
            (n >> 16) as u32 & 0xffff,
            n as u32 & 0xffff,
        ];
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            let mut rem = 0u32;
            for limb in limbs.iter_mut() {
                let x = rem << 16 | *limb;
                *limb = x / 10;
                rem = x % 10;
            }
            i -= 1;
            if let Some(d) = digits.get_mut(i) {
                *d = b'0' + rem as u8;
            }
            if limbs == [0; 4] {
                break;
            }
        }
        self.push(digits.get(i..).unwrap_or_default())
    }

    /// The bytes written so far.
    pub fn written(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }

    /// How many bytes were written so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The size of the buffer: the most this cursor can ever hold.
    ///
    /// ```
    /// let mut buf = [0u8; 8];
    /// assert_eq!(benchlink_core::http::Cursor::new(&mut buf).capacity(), 8);
    /// ```
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// True when nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests;

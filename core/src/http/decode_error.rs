//! What can go wrong while decoding a response: one variant per failure, with the limit or
//! part of the message that failed, so a caller (or a log line on a device) can tell a
//! misbehaving server from a too-small buffer.

use super::content_coding::ContentEncoding;

/// The part of a response where the connection ended too early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Section {
    /// Not a single byte of the response arrived: with a kept-alive connection the server
    /// probably closed it while idle, so an idempotent request can be retried.
    NoResponse,
    /// Inside the status line or headers.
    Head,
    /// Inside a `Content-Length` body or a chunk's data.
    Body,
    /// Inside a chunk-size line or the CRLF after chunk data.
    ChunkFraming,
    /// Inside the trailer section of a chunked body.
    Trailers,
}

/// Failure to decode a response. After an error the decoder keeps returning it until
/// [`ResponseDecoder::reset`](super::ResponseDecoder::reset); the connection should be
/// closed, because its framing can no longer be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum DecodeError {
    /// The status line and headers do not fit in the head buffer of `max` bytes.
    HeadTooLarge {
        /// Size of the caller's head buffer.
        max: usize,
    },
    /// More header lines than the decoder has slots for.
    TooManyHeaders {
        /// The decoder's `MAX_HEADERS`.
        max: usize,
    },
    /// The status line or a header line is not valid HTTP/1.x.
    MalformedHead {
        /// What httparse objected to.
        what: &'static str,
    },
    /// `Content-Length` is not a decimal number, overflows, or appears with different values.
    InvalidContentLength,
    /// A `Transfer-Encoding` other than exactly `chunked`.
    UnsupportedTransferEncoding,
    /// A chunk-size line (size plus extensions) longer than the limit.
    ChunkLineTooLong {
        /// `Limits::max_chunk_line`.
        max: usize,
    },
    /// A chunk size that is not hexadecimal or does not fit in 64 bits.
    InvalidChunkSize,
    /// Chunk data not followed by CRLF.
    InvalidChunkDelimiter,
    /// The trailer section is longer than the limit.
    TrailersTooLarge {
        /// `Limits::max_trailer_bytes`.
        max: usize,
    },
    /// The peer closed the connection before the response was complete.
    UnexpectedEof {
        /// Where the response was cut.
        section: Section,
    },
    /// The decoded body is longer than the limit; exactly `max` bytes were delivered.
    BodyTooLarge {
        /// `Limits::max_body_bytes`.
        max: u64,
    },
    /// The body is compressed but the decoder was built without inflate memory (always
    /// so when `benchlink-core` is built without its `deflate` feature).
    CompressedBodyUnsupported {
        /// The body's content coding.
        encoding: ContentEncoding,
    },
    /// A content coding other than `identity`, `deflate` or `gzip` (or a stack of several).
    UnsupportedContentEncoding,
    /// The zlib header asks for a larger window than the caller's inflate window.
    WindowTooSmall {
        /// Window size the stream was compressed with.
        needed: usize,
        /// Size of the caller's window.
        available: usize,
    },
    /// An inflate window that is not a power of two of at least 256 bytes.
    InvalidWindow {
        /// The rejected length.
        len: usize,
    },
    /// The compressed data is corrupt (bad zlib header, bad deflate block, a distance
    /// reaching before the window).
    InvalidCompressedData {
        /// The body's content coding.
        encoding: ContentEncoding,
    },
    /// The zlib Adler-32 trailer does not match the decoded data.
    ChecksumMismatch,
    /// A bad gzip member header or trailer.
    Gzip(GzipError),
    /// Body bytes after the end of a zlib or raw deflate stream.
    TrailingData,
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DecodeError::HeadTooLarge { max } => write!(f, "response head larger than {max} bytes"),
            DecodeError::TooManyHeaders { max } => {
                write!(f, "response has more than {max} headers")
            }
            DecodeError::MalformedHead { what } => write!(f, "malformed response head: {what}"),
            DecodeError::InvalidContentLength => f.write_str("invalid Content-Length"),
            DecodeError::UnsupportedTransferEncoding => {
                f.write_str("unsupported Transfer-Encoding")
            }
            DecodeError::ChunkLineTooLong { max } => {
                write!(f, "chunk-size line longer than {max} bytes")
            }
            DecodeError::InvalidChunkSize => f.write_str("invalid chunk size"),
            DecodeError::InvalidChunkDelimiter => f.write_str("chunk data not followed by CRLF"),
            DecodeError::TrailersTooLarge { max } => {
                write!(f, "chunked trailers larger than {max} bytes")
            }
            DecodeError::UnexpectedEof { section } => {
                write!(f, "connection closed early ({section:?})")
            }
            DecodeError::BodyTooLarge { max } => write!(f, "decoded body larger than {max} bytes"),
            DecodeError::CompressedBodyUnsupported { encoding } => {
                write!(f, "{encoding:?} body but no inflate memory was provided")
            }
            DecodeError::UnsupportedContentEncoding => f.write_str("unsupported Content-Encoding"),
            DecodeError::WindowTooSmall { needed, available } => {
                write!(
                    f,
                    "stream needs a {needed}-byte window, only {available} available"
                )
            }
            DecodeError::InvalidWindow { len } => {
                write!(
                    f,
                    "inflate window of {len} bytes is not a power of two >= 256"
                )
            }
            DecodeError::InvalidCompressedData { encoding } => {
                write!(f, "corrupt {encoding:?} data")
            }
            DecodeError::ChecksumMismatch => f.write_str("zlib Adler-32 mismatch"),
            DecodeError::Gzip(e) => write!(f, "{e}"),
            DecodeError::TrailingData => f.write_str("data after the end of the compressed stream"),
        }
    }
}

impl core::error::Error for DecodeError {}

impl From<GzipError> for DecodeError {
    fn from(e: GzipError) -> Self {
        DecodeError::Gzip(e)
    }
}

/// Why a gzip wrapper was rejected. (Only produced with the `deflate` feature; the type
/// exists either way so that matching on [`DecodeError`] does not depend on features.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum GzipError {
    /// The member does not start with `1F 8B 08` (magic and the deflate method).
    BadMagic,
    /// Reserved flag bits are set, which RFC 1952 says must be rejected.
    ReservedFlags,
    /// The optional header CRC (FHCRC) does not match the header.
    HeaderCrc,
    /// The trailer's CRC-32 does not match the decompressed data.
    Crc,
    /// The trailer's ISIZE does not match the decompressed length modulo 2^32.
    Size,
}

impl core::fmt::Display for GzipError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            GzipError::BadMagic => "not a gzip member (bad magic or method)",
            GzipError::ReservedFlags => "gzip header has reserved flags set",
            GzipError::HeaderCrc => "gzip header CRC mismatch",
            GzipError::Crc => "gzip trailer CRC-32 mismatch",
            GzipError::Size => "gzip trailer ISIZE mismatch",
        })
    }
}

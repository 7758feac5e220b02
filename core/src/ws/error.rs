//! What can go wrong after the handshake: [`Error`] when the server breaks RFC 6455 (the
//! connection must be failed, RFC 6455, 7.1.7) and [`SendError`] when a frame cannot be
//! sent.

use super::CloseCode;
use crate::http::EncodeError;

/// The server sent something RFC 6455 forbids, or a message larger than the receive
/// buffer. The decoder keeps returning the error; the connection must be closed, after a
/// close frame with [`Error::close_code`] (which [`Session`](super::Session) queues).
///
/// ```
/// use benchlink_core::ws::{CloseCode, Error};
/// let e = Error::MessageTooLarge { len: 70_000, max: 65_536 };
/// assert_eq!(e.close_code(), CloseCode::MESSAGE_TOO_BIG);
/// assert_eq!(e.to_string(), "message of 70000 bytes exceeds the 65536-byte buffer");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// A frame from the server had its MASK bit set; only clients mask (RFC 6455, 5.1).
    MaskedServerFrame,
    /// RSV1–RSV3 bits set (as a 3-bit value, RSV1 highest) although no extension was
    /// negotiated.
    ReservedBits {
        /// The RSV bits, `1..=7`.
        bits: u8,
    },
    /// An opcode RFC 6455 does not define (3–7, 11–15).
    UnknownOpcode {
        /// The 4-bit opcode.
        opcode: u8,
    },
    /// A control frame (close, ping, pong) without FIN: control frames cannot be fragmented.
    FragmentedControl,
    /// A control frame with more than 125 payload bytes.
    ControlTooLong {
        /// Declared payload length.
        len: u64,
    },
    /// A 16- or 64-bit length that would have fit in a shorter form. RFC 6455 (5.2)
    /// requires the minimal encoding; benchlink rejects the rest, because only a broken
    /// or hostile server sends them and accepting them would give two spellings of
    /// every frame.
    NonMinimalLength {
        /// The declared length.
        len: u64,
    },
    /// A continuation frame with no fragmented message in progress.
    UnexpectedContinuation,
    /// A new text or binary frame while a fragmented message was still unfinished.
    ExpectedContinuation,
    /// The message (all fragments so far, plus the frame just announced) does not fit in
    /// the receive buffer. Decided from frame headers, before any payload is stored.
    MessageTooLarge {
        /// Bytes of the message including the announced frame (saturating).
        len: u64,
        /// Size of the receive buffer.
        max: usize,
    },
    /// A text message or a close reason that is not valid UTF-8 (RFC 6455, 8.1).
    InvalidUtf8,
    /// A close frame with a code that may not be sent (see [`CloseCode::is_sendable`]).
    InvalidCloseCode {
        /// The code received.
        code: u16,
    },
    /// A close frame with a 1-byte body: too short for a status code.
    TruncatedCloseCode,
}

impl Error {
    /// The status code to fail the connection with: 1009 for a message too large, 1007 for
    /// invalid UTF-8, 1002 for every other protocol violation.
    ///
    /// ```
    /// use benchlink_core::ws::{CloseCode, Error};
    /// assert_eq!(Error::InvalidUtf8.close_code(), CloseCode::INVALID_PAYLOAD);
    /// assert_eq!(Error::MaskedServerFrame.close_code(), CloseCode::PROTOCOL_ERROR);
    /// ```
    pub const fn close_code(&self) -> CloseCode {
        match self {
            Error::MessageTooLarge { .. } => CloseCode::MESSAGE_TOO_BIG,
            Error::InvalidUtf8 => CloseCode::INVALID_PAYLOAD,
            _ => CloseCode::PROTOCOL_ERROR,
        }
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::MaskedServerFrame => f.write_str("server frame is masked"),
            Error::ReservedBits { bits } => write!(f, "reserved bits {bits:#05b} set"),
            Error::UnknownOpcode { opcode } => write!(f, "unknown opcode {opcode:#x}"),
            Error::FragmentedControl => f.write_str("fragmented control frame"),
            Error::ControlTooLong { len } => {
                write!(f, "control frame of {len} bytes (at most 125 allowed)")
            }
            Error::NonMinimalLength { len } => {
                write!(f, "frame length {len} not in its minimal encoding")
            }
            Error::UnexpectedContinuation => {
                f.write_str("continuation frame without a message to continue")
            }
            Error::ExpectedContinuation => {
                f.write_str("new data frame inside a fragmented message")
            }
            Error::MessageTooLarge { len, max } => {
                write!(f, "message of {len} bytes exceeds the {max}-byte buffer")
            }
            Error::InvalidUtf8 => f.write_str("text is not valid UTF-8"),
            Error::InvalidCloseCode { code } => write!(f, "invalid close code {code}"),
            Error::TruncatedCloseCode => f.write_str("close frame body of 1 byte"),
        }
    }
}

impl core::error::Error for Error {}

/// A frame could not be written. Nothing partial must be sent after this error.
///
/// ```
/// use benchlink_core::http::EncodeError;
/// use benchlink_core::ws::SendError;
/// let e = SendError::from(EncodeError::BufferTooSmall { capacity: 8 });
/// assert_eq!(e.to_string(), "encode buffer of 8 bytes is too small");
/// assert_eq!(SendError::Closed.to_string(), "a close frame was already sent or received");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum SendError {
    /// The output buffer is too small (or the in-place buffer lacks header room).
    Encode(EncodeError),
    /// A ping, pong or close payload of more than 125 bytes.
    ControlTooLong {
        /// The payload length asked for.
        len: usize,
    },
    /// A close reason of more than 123 bytes (125 minus the status code).
    CloseReasonTooLong {
        /// The reason's length.
        len: usize,
    },
    /// A close code that may not be sent (see [`CloseCode::is_sendable`]).
    InvalidCloseCode {
        /// The code asked for.
        code: u16,
    },
    /// Text for a text frame that is not valid UTF-8 (in-place sends take bytes).
    InvalidUtf8,
    /// The session is closing or closed: no frame may follow our close frame
    /// (RFC 6455, 5.5.1).
    Closed,
}

impl From<EncodeError> for SendError {
    fn from(e: EncodeError) -> Self {
        SendError::Encode(e)
    }
}

impl core::fmt::Display for SendError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SendError::Encode(e) => write!(f, "{e}"),
            SendError::ControlTooLong { len } => {
                write!(f, "control payload of {len} bytes (at most 125 allowed)")
            }
            SendError::CloseReasonTooLong { len } => {
                write!(f, "close reason of {len} bytes (at most 123 allowed)")
            }
            SendError::InvalidCloseCode { code } => write!(f, "close code {code} may not be sent"),
            SendError::InvalidUtf8 => f.write_str("text frame payload is not valid UTF-8"),
            SendError::Closed => f.write_str("a close frame was already sent or received"),
        }
    }
}

impl core::error::Error for SendError {}

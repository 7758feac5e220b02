//! Client frames (RFC 6455, 5.2): opcodes, the header writer, masking, and whole-frame
//! encoders for a [`Cursor`] or in place.
//!
//! Every client frame is masked (RFC 6455, 5.3) with a key the caller supplies, because
//! core has no random number generator: [`MaskSource`] is how the session asks for one
//! per frame. A frame header is 6, 8 or 14 bytes: the 7-bit length form below 126
//! bytes, the 16-bit form below 65 536, the 64-bit form from there on (the C SDK once
//! encoded 126-byte frames with the 7-bit form).

use super::{CloseFrame, SendError};
use crate::http::{Cursor, EncodeError};

/// Longest client frame header: 2 bytes, a 64-bit length and a 4-byte masking key.
/// [`encode_in_place`] expects the payload this far into its buffer.
pub const MAX_HEADER_LEN: usize = 14;
/// Longest control-frame payload (RFC 6455, 5.5).
pub const MAX_CONTROL_PAYLOAD: usize = 125;
/// Longest close reason: a control payload minus the 2-byte status code.
pub const MAX_CLOSE_REASON: usize = MAX_CONTROL_PAYLOAD - 2;
/// Longest encoded client control frame: 2-byte header, masking key, 125-byte payload.
pub const MAX_CONTROL_FRAME: usize = 6 + MAX_CONTROL_PAYLOAD;

/// A frame opcode (RFC 6455, 5.2); the values the RFC leaves undefined are decode
/// errors.
///
/// ```
/// use benchlink_core::ws::Opcode;
/// assert_eq!(Opcode::from_bits(0x9), Some(Opcode::Ping));
/// assert_eq!(Opcode::from_bits(0x3), None);
/// assert!(Opcode::Close.is_control() && !Opcode::Text.is_control());
/// assert_eq!(Opcode::Pong.bits(), 0xA);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Opcode {
    /// `0x0`: a later fragment of a text or binary message.
    Continuation,
    /// `0x1`: UTF-8 text (each RTM JSON PDU is one text message).
    Text,
    /// `0x2`: binary data (RTM CBOR PDUs).
    Binary,
    /// `0x8`: close, with an optional status code and reason.
    Close,
    /// `0x9`: ping; the peer must answer with a pong carrying the same payload.
    Ping,
    /// `0xA`: pong.
    Pong,
}

impl Opcode {
    /// The 4-bit wire value.
    pub const fn bits(self) -> u8 {
        match self {
            Opcode::Continuation => 0x0,
            Opcode::Text => 0x1,
            Opcode::Binary => 0x2,
            Opcode::Close => 0x8,
            Opcode::Ping => 0x9,
            Opcode::Pong => 0xA,
        }
    }

    /// The opcode for a 4-bit wire value, `None` for the reserved ones.
    pub const fn from_bits(bits: u8) -> Option<Opcode> {
        Some(match bits {
            0x0 => Opcode::Continuation,
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xA => Opcode::Pong,
            _ => return None,
        })
    }

    /// Close, ping and pong: at most 125 bytes, never fragmented, allowed between the
    /// fragments of a message.
    pub const fn is_control(self) -> bool {
        matches!(self, Opcode::Close | Opcode::Ping | Opcode::Pong)
    }
}

/// Where masking keys come from. RFC 6455 (5.3) asks for a fresh, unpredictable key per
/// frame (so that a malicious page cannot make a client emit chosen bytes through a
/// transparent proxy); core has no RNG, so the adapter provides one — a hardware RNG on
/// a microcontroller, `getrandom` on std. Any `FnMut() -> [u8; 4]` is a mask source.
///
/// ```
/// use benchlink_core::ws::MaskSource;
/// let mut counter = 0u32;
/// let mut source = move || { counter += 1; counter.to_be_bytes() };
/// assert_eq!(source.next_mask(), [0, 0, 0, 1]);
/// assert_eq!(MaskSource::next_mask(&mut source), [0, 0, 0, 2]);
/// ```
pub trait MaskSource {
    /// A fresh masking key for the next frame.
    fn next_mask(&mut self) -> [u8; 4];
}

impl<F: FnMut() -> [u8; 4]> MaskSource for F {
    fn next_mask(&mut self) -> [u8; 4] {
        self()
    }
}

/// The header of a client frame: FIN, opcode and payload length (the mask is passed when
/// encoding, so a header value never carries a stale key).
///
/// ```
/// use benchlink_core::http::Cursor;
/// use benchlink_core::ws::{FrameHeader, Opcode};
/// let header = FrameHeader::new(Opcode::Binary, 256);
/// assert_eq!(header.encoded_len(), 8);
/// let mut buf = [0u8; 14];
/// let mut out = Cursor::new(&mut buf);
/// header.encode([1, 2, 3, 4], &mut out).unwrap();
/// assert_eq!(out.written(), [0x82, 0xFE, 0x01, 0x00, 1, 2, 3, 4]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FrameHeader {
    /// Final fragment of its message (always true for an unfragmented message).
    pub fin: bool,
    /// The opcode.
    pub opcode: Opcode,
    /// Payload length in bytes.
    pub payload_len: u64,
}

impl FrameHeader {
    /// The header of a whole (FIN) frame.
    pub const fn new(opcode: Opcode, payload_len: u64) -> Self {
        FrameHeader {
            fin: true,
            opcode,
            payload_len,
        }
    }

    /// Encoded length of the masked header: 6, 8 or 14 bytes.
    ///
    /// ```
    /// use benchlink_core::ws::{FrameHeader, Opcode};
    /// let len = |n| FrameHeader::new(Opcode::Text, n).encoded_len();
    /// assert_eq!([len(125), len(126), len(65535), len(65536)], [6, 8, 8, 14]);
    /// ```
    pub const fn encoded_len(&self) -> usize {
        match self.payload_len {
            0..=125 => 6,
            126..=0xFFFF => 8,
            _ => 14,
        }
    }

    /// Writes the header with the MASK bit and `mask`; the payload must follow masked
    /// with the same key (see [`apply_mask`]).
    ///
    /// ```
    /// use benchlink_core::http::Cursor;
    /// use benchlink_core::ws::{FrameHeader, Opcode};
    /// let mut buf = [0u8; 14];
    /// let mut out = Cursor::new(&mut buf);
    /// let first = FrameHeader { fin: false, opcode: Opcode::Text, payload_len: 65536 };
    /// first.encode([0; 4], &mut out).unwrap();
    /// assert_eq!(out.written(), [0x01, 0xFF, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    /// ```
    pub fn encode(&self, mask: [u8; 4], out: &mut Cursor<'_>) -> Result<(), EncodeError> {
        let len = self.payload_len;
        let n = self.encoded_len();
        // The extended length: none, 16 or 64 bits, big-endian.
        let ext = n.saturating_sub(6);
        let mut header = [0u8; MAX_HEADER_LEN];
        header[0] = if self.fin { 0x80 } else { 0 } | self.opcode.bits();
        header[1] = 0x80
            | match ext {
                0 => len as u8,
                2 => 126,
                _ => 127,
            };
        let bytes = len.to_be_bytes();
        let ext_bytes = bytes.get(8usize.saturating_sub(ext)..).unwrap_or_default();
        if let Some(slot) = header.get_mut(2..2 + ext) {
            slot.copy_from_slice(ext_bytes);
        }
        if let Some(slot) = header.get_mut(2 + ext..n) {
            slot.copy_from_slice(&mask);
        }
        out.push(header.get(..n).unwrap_or_default())
    }
}

/// XORs `data` with the masking key in place (RFC 6455, 5.3). `offset` is the position
/// of `data[0]` within the frame's payload, so a large payload can be masked piece by
/// piece. Masking twice with the same key and offset restores the data.
///
/// ```
/// use benchlink_core::ws::apply_mask;
/// let mut hello = *b"Hello";
/// apply_mask([0x37, 0xfa, 0x21, 0x3d], 0, &mut hello);
/// assert_eq!(hello, [0x7f, 0x9f, 0x4d, 0x51, 0x58]);
/// let (head, tail) = hello.split_at_mut(3);
/// apply_mask([0x37, 0xfa, 0x21, 0x3d], 0, head);
/// apply_mask([0x37, 0xfa, 0x21, 0x3d], 3, tail);
/// assert_eq!(&hello, b"Hello");
/// ```
pub fn apply_mask(mask: [u8; 4], offset: usize, data: &mut [u8]) {
    // The key as it lines up with `data[0]`: a rotation of its bytes, done on the word
    // (one instruction; a slice rotation links the general `rotate_left`).
    let shift = (offset % 4) as u32 * 8;
    let key = u32::from_be_bytes(mask).rotate_left(shift).to_be_bytes();
    let word = u32::from_ne_bytes(key);
    let mut words = data.chunks_exact_mut(4);
    for chunk in &mut words {
        if let Ok(bytes) = <[u8; 4]>::try_from(&*chunk) {
            chunk.copy_from_slice(&(u32::from_ne_bytes(bytes) ^ word).to_ne_bytes());
        }
    }
    for (b, k) in words.into_remainder().iter_mut().zip(key) {
        *b ^= k;
    }
}

/// Writes a whole (FIN) masked frame: header, then `payload` masked with `mask`. Control
/// payloads over 125 bytes are refused. On error the cursor may hold a partial frame that
/// must not be sent. For a text frame the caller guarantees UTF-8 (the session's
/// `send_text` takes a `&str`).
///
/// ```
/// use benchlink_core::http::Cursor;
/// use benchlink_core::ws::{encode_frame, Opcode};
/// let mut buf = [0u8; 16];
/// let mut out = Cursor::new(&mut buf);
/// encode_frame(Opcode::Text, b"Hello", [0x37, 0xfa, 0x21, 0x3d], &mut out).unwrap();
/// assert_eq!(out.written(), [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58]);
/// ```
pub fn encode_frame(
    opcode: Opcode,
    payload: &[u8],
    mask: [u8; 4],
    out: &mut Cursor<'_>,
) -> Result<(), SendError> {
    check_control(opcode, payload.len())?;
    FrameHeader::new(opcode, payload.len() as u64).encode(mask, out)?;
    // Masked where it was written.
    let start = out.len();
    out.push(payload)?;
    apply_mask(mask, 0, out.written_from(start));
    Ok(())
}

/// Writes a close frame: empty for `None`, else the status code and reason. The code must
/// be sendable and the reason at most 123 bytes.
///
/// ```
/// use benchlink_core::http::Cursor;
/// use benchlink_core::ws::{encode_close, CloseCode, CloseFrame};
/// let mut buf = [0u8; 16];
/// let mut out = Cursor::new(&mut buf);
/// encode_close(Some(CloseFrame { code: CloseCode::NORMAL, reason: "bye" }), [0; 4], &mut out).unwrap();
/// assert_eq!(out.written(), [0x88, 0x85, 0, 0, 0, 0, 0x03, 0xE8, b'b', b'y', b'e']);
/// ```
pub fn encode_close(
    close: Option<CloseFrame<'_>>,
    mask: [u8; 4],
    out: &mut Cursor<'_>,
) -> Result<(), SendError> {
    let mut body = [0u8; MAX_CONTROL_PAYLOAD];
    let mut w = Cursor::new(&mut body);
    if let Some(CloseFrame { code, reason }) = close {
        if !code.is_sendable() {
            return Err(SendError::InvalidCloseCode { code: code.0 });
        }
        if reason.len() > MAX_CLOSE_REASON {
            return Err(SendError::CloseReasonTooLong { len: reason.len() });
        }
        w.push(&code.0.to_be_bytes())?;
        w.push_str(reason)?;
    }
    encode_frame(Opcode::Close, w.written(), mask, out)
}

/// Frames a payload where it already lies, for large sends without a copy: the caller
/// writes `payload_len` bytes at `buf[MAX_HEADER_LEN..]` (a JSON serializer's output, say);
/// this masks them in place, writes the header right before them and returns the whole
/// frame — a subslice of `buf` ending at `MAX_HEADER_LEN + payload_len`.
///
/// ```
/// use benchlink_core::ws::{encode_in_place, Opcode, MAX_HEADER_LEN};
/// let mut buf = [0u8; MAX_HEADER_LEN + 5];
/// buf[MAX_HEADER_LEN..].copy_from_slice(b"Hello");
/// let frame = encode_in_place(Opcode::Text, &mut buf, 5, [0x37, 0xfa, 0x21, 0x3d]).unwrap();
/// assert_eq!(frame, [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58]);
/// ```
pub fn encode_in_place(
    opcode: Opcode,
    buf: &mut [u8],
    payload_len: usize,
    mask: [u8; 4],
) -> Result<&[u8], SendError> {
    check_control(opcode, payload_len)?;
    let capacity = buf.len();
    let too_small = SendError::Encode(EncodeError::BufferTooSmall { capacity });
    let end = MAX_HEADER_LEN
        .checked_add(payload_len)
        .filter(|&end| end <= capacity)
        .ok_or(too_small)?;
    let header = FrameHeader::new(opcode, payload_len as u64);
    let start = MAX_HEADER_LEN.saturating_sub(header.encoded_len());
    let (head, rest) = buf.split_at_mut(MAX_HEADER_LEN.min(capacity));
    apply_mask(mask, 0, rest.get_mut(..payload_len).ok_or(too_small)?);
    header.encode(
        mask,
        &mut Cursor::new(head.get_mut(start..).ok_or(too_small)?),
    )?;
    buf.get(start..end).ok_or(too_small)
}

fn check_control(opcode: Opcode, len: usize) -> Result<(), SendError> {
    if opcode.is_control() && len > MAX_CONTROL_PAYLOAD {
        return Err(SendError::ControlTooLong { len });
    }
    Ok(())
}

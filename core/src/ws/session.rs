//! The connection after the handshake, as a small sans-IO state machine: decoded messages
//! out, automatic pongs and the close handshake (RFC 6455, 5.5 and 7) handled, data
//! frames refused once a close frame was sent.
//!
//! ```text
//!            close()                      peer's close (our reply: nothing more to send)
//!   Open ─────────────▶ Closing ──────────────────────────────────────────▶ Closed(Clean, by_peer: false)
//!    │ peer's close (we echo its code)                                     ▲
//!    ├──────────────────────────────────────────────────────────────────────┘ Closed(Clean, by_peer: true)
//!    │ protocol error (we send 1002/1007/1009)      transport ended first
//!    └──────────────▶ Closed(Failed(error))         ──────────────────────▶ Closed(Abnormal)
//! ```
//!
//! Frames the session produces by itself (pongs, the close frames) wait in a small outbox
//! the caller drains with [`Session::poll_transmit`]; data frames the caller sends are
//! written straight into the caller's buffer. Every frame is whole in either place, so the
//! caller only has to avoid interleaving the bytes of two frames.

use super::decoder::{Decoder, Message};
use super::frame::{self, MaskSource, Opcode, MAX_CONTROL_FRAME, MAX_HEADER_LEN};
use super::{CloseCode, CloseFrame, Error, SendError};
use crate::http::Cursor;

/// Where the session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum State {
    /// Messages flow both ways.
    Open,
    /// We sent (queued) a close frame and wait for the server's; its messages are still
    /// delivered, nothing more may be sent.
    Closing,
    /// Nothing more is sent or delivered. Once [`Session::poll_transmit`] is empty the
    /// transport can be closed (a client should give the server a moment to close TCP
    /// first, RFC 6455, 7.1.1).
    Closed(CloseStatus),
}

/// How the session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CloseStatus {
    /// The close handshake completed.
    Clean {
        /// The code in the server's close frame (`None` if it had no body).
        code: Option<CloseCode>,
        /// The server closed first (we echoed); false when it answered our close.
        by_peer: bool,
    },
    /// The server broke the protocol; a close frame with [`Error::close_code`] was queued
    /// unless ours had already been sent.
    Failed(Error),
    /// The transport ended before the close handshake completed (what RFC 6455, 7.1.5
    /// calls 1006).
    Abnormal,
}

/// Room for a pong that is partly written, the next pong and a close frame: the most the
/// outbox ever holds, since a newer pong replaces an unsent one (RFC 6455, 5.5.3 allows
/// answering only the latest ping) and nothing follows a close.
const OUTBOX: usize = 3 * MAX_CONTROL_FRAME;

/// Control frames waiting to be written, `buf[start..end]`.
struct Outbox {
    buf: [u8; OUTBOX],
    start: usize,
    end: usize,
    /// Offset of a pong of which nothing was handed out yet (so it can be replaced).
    pong_at: Option<usize>,
    close_queued: bool,
}

impl Outbox {
    const EMPTY: Outbox = Outbox {
        buf: [0; OUTBOX],
        start: 0,
        end: 0,
        pong_at: None,
        close_queued: false,
    };

    fn pending(&self) -> &[u8] {
        self.buf.get(self.start..self.end).unwrap_or_default()
    }

    fn advance(&mut self, n: usize) {
        self.start = self.start.saturating_add(n).min(self.end);
        if self.pong_at.is_some_and(|at| at < self.start) {
            self.pong_at = None;
        }
        if self.start == self.end {
            (self.start, self.end, self.pong_at) = (0, 0, None);
        }
    }

    /// Moves the pending bytes to the front, so the capacity argument above holds.
    fn compact(&mut self) {
        self.end = crate::compact::to_front(&mut self.buf, self.start, self.end);
        self.pong_at = self.pong_at.map(|at| at.saturating_sub(self.start));
        self.start = 0;
    }

    /// Writes one frame at `at`, dropping whatever followed; false if it did not fit
    /// (which the capacity makes impossible).
    fn write_at(
        &mut self,
        at: usize,
        frame: impl FnOnce(&mut Cursor<'_>) -> Result<(), SendError>,
    ) -> bool {
        let Some(room) = self.buf.get_mut(at..) else {
            return false;
        };
        let mut out = Cursor::new(room);
        if frame(&mut out).is_err() {
            return false;
        }
        self.end = at.saturating_add(out.len());
        true
    }

    fn push_pong(&mut self, payload: &[u8], mask: [u8; 4]) {
        if self.close_queued {
            return;
        }
        self.compact();
        let at = self.pong_at.unwrap_or(self.end);
        if self.write_at(at, |out| {
            frame::encode_frame(Opcode::Pong, payload, mask, out)
        }) {
            self.pong_at = Some(at);
        }
    }

    fn push_close(&mut self, close: Option<CloseFrame<'_>>, mask: [u8; 4]) {
        self.compact();
        self.pong_at = None;
        self.close_queued = self.write_at(self.end, |out| frame::encode_close(close, mask, out));
    }
}

/// A WebSocket client connection after a successful handshake: feed it received bytes,
/// take whole messages out, send text with [`Session::send_text`], drain its own frames
/// with [`Session::poll_transmit`].
///
/// ```
/// use benchlink_core::http::Cursor;
/// use benchlink_core::ws::{CloseCode, CloseStatus, Message, Session, State};
/// let mut buf = [0u8; 1024];
/// let mut session = Session::new(&mut buf, || [0u8; 4]);
///
/// // A text message and a ping arrive: the text is delivered, the pong is queued.
/// let input = [&[0x81, 0x02][..], b"{}", &[0x89, 0x01, b'p']].concat();
/// let (used, message) = session.handle(&input).unwrap();
/// assert_eq!(message, Some(Message::Text("{}")));
/// let (_, message) = session.handle(&input[used..]).unwrap();
/// assert_eq!(message, Some(Message::Ping(b"p")));
/// assert_eq!(session.poll_transmit(), Some(&[0x8A, 0x81, 0, 0, 0, 0, b'p'][..]));
/// session.advance_transmit(7);
///
/// // Send a text message, then close; the server answers with its close frame.
/// let mut out = [0u8; 64];
/// let mut out = Cursor::new(&mut out);
/// session.send_text("{\"action\":\"rtm/publish\"}", &mut out).unwrap();
/// session.close(CloseCode::NORMAL, "").unwrap();
/// assert_eq!(session.poll_transmit(), Some(&[0x88, 0x82, 0, 0, 0, 0, 0x03, 0xE8][..]));
/// session.advance_transmit(8);
/// session.handle(&[0x88, 0x02, 0x03, 0xE8]).unwrap();
/// let clean = CloseStatus::Clean { code: Some(CloseCode::NORMAL), by_peer: false };
/// assert_eq!(session.state(), State::Closed(clean));
/// ```
pub struct Session<B, M> {
    decoder: Decoder<B>,
    masks: M,
    state: State,
    outbox: Outbox,
}

/// State and pending bytes; the mask source is left out (it may be an RNG or a closure).
impl<B: AsRef<[u8]>, M> core::fmt::Debug for Session<B, M> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Session")
            .field("decoder", &self.decoder)
            .field("state", &self.state)
            .field("pending_transmit", &self.outbox.pending().len())
            .field("close_queued", &self.outbox.close_queued)
            .finish()
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>, M: MaskSource> Session<B, M> {
    /// An open session that accepts messages up to `buf.len()` bytes and masks every frame
    /// it writes with a fresh key from `masks`.
    pub fn new(buf: B, masks: M) -> Self {
        Session {
            decoder: Decoder::new(buf),
            masks,
            state: State::Open,
            outbox: Outbox::EMPTY,
        }
    }

    /// Readies the session for a new connection over the same memory: open, nothing
    /// pending.
    ///
    /// ```
    /// use benchlink_core::ws::{CloseCode, Session, State};
    /// let mut buf = [0u8; 16];
    /// let mut session = Session::new(&mut buf, || [0u8; 4]);
    /// session.close(CloseCode::NORMAL, "").unwrap();
    /// session.reset();
    /// assert_eq!((session.state(), session.poll_transmit()), (State::Open, None));
    /// ```
    pub fn reset(&mut self) {
        self.decoder.reset();
        self.state = State::Open;
        self.outbox = Outbox::EMPTY;
    }

    /// Whether received text messages must be UTF-8; see [`Decoder::set_text_is_utf8`].
    ///
    /// ```
    /// use benchlink_core::ws::{Message, Session};
    /// let mut buf = [0u8; 16];
    /// let mut session = Session::new(&mut buf, || [0u8; 4]);
    /// session.set_text_is_utf8(false);
    /// assert_eq!(session.handle(&[0x81, 0x01, 0xa0]).unwrap(), (3, Some(Message::Binary(&[0xa0]))));
    /// ```
    pub fn set_text_is_utf8(&mut self, on: bool) {
        self.decoder.set_text_is_utf8(on);
    }

    /// See [`Decoder::set_keep_messages`].
    ///
    /// ```
    /// use benchlink_core::ws::{Message, Session};
    /// let mut buf = [0u8; 16];
    /// let mut session = Session::new(&mut buf, || [0u8; 4]);
    /// session.set_keep_messages(true);
    /// assert_eq!(session.handle(&[0x81, 0x01, b'k']).unwrap(), (3, Some(Message::Text("k"))));
    /// assert_eq!(session.last_message(1), b"k");
    /// ```
    pub fn set_keep_messages(&mut self, on: bool) {
        self.decoder.set_keep_messages(on);
    }

    /// See [`Decoder::last_message`] (and the example of
    /// [`set_keep_messages`](Self::set_keep_messages)).
    pub fn last_message(&self, len: usize) -> &[u8] {
        self.decoder.last_message(len)
    }

    /// The mask source, for a caller that draws handshake nonces from the same generator.
    pub(crate) fn masks_mut(&mut self) -> &mut M {
        &mut self.masks
    }

    /// The current state.
    ///
    /// ```
    /// use benchlink_core::ws::{Session, State};
    /// let mut buf = [0u8; 16];
    /// assert_eq!(Session::new(&mut buf, || [0u8; 4]).state(), State::Open);
    /// ```
    pub fn state(&self) -> State {
        self.state
    }

    /// Consumes a prefix of `input` like [`Decoder::decode`]: the bytes used and a whole
    /// message, or `None` when every byte was used. A ping is answered (in `Open`) and
    /// also returned, so a liveness timer can count it; a close frame completes the close
    /// handshake. A protocol error queues a close frame with its code and is returned
    /// again by every later call. Once `Closed` cleanly, input is ignored
    /// (RFC 6455, 5.5.1: nothing follows a close frame).
    ///
    /// ```
    /// use benchlink_core::ws::{CloseCode, CloseStatus, Error, Message, Session, State};
    /// let mut buf = [0u8; 16];
    /// let mut session = Session::new(&mut buf, || [0u8; 4]);
    /// assert_eq!(session.handle(&[0x81, 0x81]), Err(Error::MaskedServerFrame));
    /// assert_eq!(session.state(), State::Closed(CloseStatus::Failed(Error::MaskedServerFrame)));
    /// // The close frame that fails the connection: code 1002.
    /// assert_eq!(session.poll_transmit(), Some(&[0x88, 0x82, 0, 0, 0, 0, 0x03, 0xEA][..]));
    /// ```
    pub fn handle<'s>(
        &'s mut self,
        input: &'s [u8],
    ) -> Result<(usize, Option<Message<'s>>), Error> {
        match self.state {
            State::Closed(CloseStatus::Failed(e)) => return Err(e),
            State::Closed(_) => return Ok((input.len(), None)),
            State::Open | State::Closing => {}
        }
        let open = self.state == State::Open;
        match self.decoder.decode(input) {
            Err(e) => {
                if open {
                    let close = CloseFrame {
                        code: e.close_code(),
                        reason: "",
                    };
                    self.outbox.push_close(Some(close), self.masks.next_mask());
                }
                self.state = State::Closed(CloseStatus::Failed(e));
                Err(e)
            }
            Ok((used, Some(message))) => {
                match message {
                    Message::Ping(payload) if open => {
                        self.outbox.push_pong(payload, self.masks.next_mask());
                    }
                    Message::Close(close) => {
                        if open {
                            // Echo the code only (RFC 6455, 5.5.1): the reason was the
                            // server's.
                            let echo = close.map(|c| CloseFrame {
                                code: c.code,
                                reason: "",
                            });
                            self.outbox.push_close(echo, self.masks.next_mask());
                        }
                        let code = close.map(|c| c.code);
                        self.state = State::Closed(CloseStatus::Clean {
                            code,
                            by_peer: open,
                        });
                    }
                    _ => {}
                }
                Ok((used, Some(message)))
            }
            Ok((used, None)) => Ok((used, None)),
        }
    }

    /// The transport ended (EOF, reset, TLS failure). Without a completed close handshake
    /// the session ends `Abnormal` and drops its unsent frames; a closed session keeps
    /// its status.
    ///
    /// ```
    /// use benchlink_core::ws::{CloseStatus, Session, State};
    /// let mut buf = [0u8; 16];
    /// let mut session = Session::new(&mut buf, || [0u8; 4]);
    /// session.handle_eof();
    /// assert_eq!(session.state(), State::Closed(CloseStatus::Abnormal));
    /// ```
    pub fn handle_eof(&mut self) {
        if let State::Open | State::Closing = self.state {
            self.state = State::Closed(CloseStatus::Abnormal);
            self.outbox = Outbox::EMPTY;
        }
    }

    /// Writes one text message as a single masked frame into `out`. Fails with
    /// [`SendError::Closed`] once a close frame was sent or received.
    ///
    /// ```
    /// use benchlink_core::http::Cursor;
    /// use benchlink_core::ws::Session;
    /// let mut buf = [0u8; 16];
    /// let mut session = Session::new(&mut buf, || [0x37, 0xfa, 0x21, 0x3d]);
    /// let mut out = [0u8; 16];
    /// let mut out = Cursor::new(&mut out);
    /// session.send_text("Hello", &mut out).unwrap();
    /// assert_eq!(out.written(), [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58]);
    /// ```
    pub fn send_text(&mut self, text: &str, out: &mut Cursor<'_>) -> Result<(), SendError> {
        self.send(Opcode::Text, text.as_bytes(), out)
    }

    /// Writes one binary message (RTM's CBOR encoding) as a single masked frame.
    ///
    /// ```
    /// use benchlink_core::http::Cursor;
    /// use benchlink_core::ws::Session;
    /// let mut buf = [0u8; 16];
    /// let mut session = Session::new(&mut buf, || [0u8; 4]);
    /// let mut out = [0u8; 16];
    /// let mut out = Cursor::new(&mut out);
    /// session.send_binary(&[0xa2], &mut out).unwrap();
    /// assert_eq!(out.written(), [0x82, 0x81, 0, 0, 0, 0, 0xa2]);
    /// ```
    pub fn send_binary(&mut self, data: &[u8], out: &mut Cursor<'_>) -> Result<(), SendError> {
        self.send(Opcode::Binary, data, out)
    }

    /// Writes a ping (at most 125 bytes) for a liveness check; the answer arrives as
    /// [`Message::Pong`].
    ///
    /// ```
    /// use benchlink_core::http::Cursor;
    /// use benchlink_core::ws::{SendError, Session};
    /// let mut buf = [0u8; 16];
    /// let mut session = Session::new(&mut buf, || [0u8; 4]);
    /// let mut out = [0u8; 256];
    /// let mut out = Cursor::new(&mut out);
    /// session.send_ping(b"1", &mut out).unwrap();
    /// assert_eq!(out.written(), [0x89, 0x81, 0, 0, 0, 0, b'1']);
    /// assert_eq!(session.send_ping(&[0; 126], &mut out), Err(SendError::ControlTooLong { len: 126 }));
    /// ```
    pub fn send_ping(&mut self, payload: &[u8], out: &mut Cursor<'_>) -> Result<(), SendError> {
        self.send(Opcode::Ping, payload, out)
    }

    /// Frames a text message that the caller wrote at `buf[MAX_HEADER_LEN..]` (see
    /// [`frame::encode_in_place`]), checking that it is UTF-8; returns the frame to send.
    ///
    /// ```
    /// use benchlink_core::ws::{SendError, Session, MAX_HEADER_LEN};
    /// let mut rx = [0u8; 16];
    /// let mut session = Session::new(&mut rx, || [0u8; 4]);
    /// let mut buf = [0u8; MAX_HEADER_LEN + 2];
    /// buf[MAX_HEADER_LEN..].copy_from_slice(b"{}");
    /// assert_eq!(session.send_text_in_place(&mut buf, 2).unwrap(), [0x81, 0x82, 0, 0, 0, 0, b'{', b'}']);
    /// buf[MAX_HEADER_LEN..].copy_from_slice(&[0xff, 0xfe]);
    /// assert_eq!(session.send_text_in_place(&mut buf, 2), Err(SendError::InvalidUtf8));
    /// ```
    pub fn send_text_in_place<'x>(
        &mut self,
        buf: &'x mut [u8],
        payload_len: usize,
    ) -> Result<&'x [u8], SendError> {
        let end = MAX_HEADER_LEN.saturating_add(payload_len);
        if let Some(payload) = buf.get(MAX_HEADER_LEN..end) {
            core::str::from_utf8(payload).map_err(|_| SendError::InvalidUtf8)?;
        }
        self.frame_in_place(Opcode::Text, buf, payload_len)
    }

    /// Frames a binary message that the caller wrote at `buf[MAX_HEADER_LEN..]`.
    ///
    /// ```
    /// use benchlink_core::ws::{Session, MAX_HEADER_LEN};
    /// let mut rx = [0u8; 16];
    /// let mut session = Session::new(&mut rx, || [1u8; 4]);
    /// let mut buf = [0u8; MAX_HEADER_LEN + 1];
    /// buf[MAX_HEADER_LEN] = 0xa0;
    /// assert_eq!(session.send_binary_in_place(&mut buf, 1).unwrap(), [0x82, 0x81, 1, 1, 1, 1, 0xa1]);
    /// ```
    pub fn send_binary_in_place<'x>(
        &mut self,
        buf: &'x mut [u8],
        payload_len: usize,
    ) -> Result<&'x [u8], SendError> {
        self.frame_in_place(Opcode::Binary, buf, payload_len)
    }

    /// Starts the close handshake: queues a close frame with `code` and `reason` (at most
    /// 123 bytes) and moves to `Closing`. Closing a session that is already closing or
    /// closed does nothing.
    ///
    /// ```
    /// use benchlink_core::ws::{CloseCode, SendError, Session, State};
    /// let mut buf = [0u8; 16];
    /// let mut session = Session::new(&mut buf, || [0u8; 4]);
    /// assert_eq!(session.close(CloseCode(1005), ""), Err(SendError::InvalidCloseCode { code: 1005 }));
    /// session.close(CloseCode::GOING_AWAY, "bye").unwrap();
    /// assert_eq!(session.state(), State::Closing);
    /// assert_eq!(session.poll_transmit().map(|f| f.len()), Some(11));
    /// ```
    pub fn close(&mut self, code: CloseCode, reason: &str) -> Result<(), SendError> {
        if !code.is_sendable() {
            return Err(SendError::InvalidCloseCode { code: code.0 });
        }
        if reason.len() > frame::MAX_CLOSE_REASON {
            return Err(SendError::CloseReasonTooLong { len: reason.len() });
        }
        if self.state == State::Open {
            let close = CloseFrame { code, reason };
            self.outbox.push_close(Some(close), self.masks.next_mask());
            self.state = State::Closing;
        }
        Ok(())
    }

    /// Bytes the session wants sent (pongs, close frames), `None` when there are none.
    /// Write them, then report how many with [`Session::advance_transmit`]; a partial write
    /// is fine, the rest is offered again.
    ///
    /// ```
    /// use benchlink_core::ws::{CloseCode, Session};
    /// let mut buf = [0u8; 16];
    /// let mut session = Session::new(&mut buf, || [0u8; 4]);
    /// assert_eq!(session.poll_transmit(), None);
    /// session.close(CloseCode::NORMAL, "").unwrap();
    /// assert_eq!(session.poll_transmit().map(|f| f.len()), Some(8));
    /// ```
    #[must_use]
    pub fn poll_transmit(&self) -> Option<&[u8]> {
        Some(self.outbox.pending()).filter(|p| !p.is_empty())
    }

    /// `n` bytes of [`Session::poll_transmit`] were written.
    ///
    /// ```
    /// use benchlink_core::ws::{CloseCode, Session};
    /// let mut buf = [0u8; 16];
    /// let mut session = Session::new(&mut buf, || [0u8; 4]);
    /// session.close(CloseCode::NORMAL, "").unwrap();
    /// session.advance_transmit(5);
    /// assert_eq!(session.poll_transmit(), Some(&[0, 0x03, 0xE8][..]));
    /// session.advance_transmit(3);
    /// assert_eq!(session.poll_transmit(), None);
    /// ```
    pub fn advance_transmit(&mut self, n: usize) {
        self.outbox.advance(n);
    }

    pub(crate) fn send(
        &mut self,
        opcode: Opcode,
        payload: &[u8],
        out: &mut Cursor<'_>,
    ) -> Result<(), SendError> {
        if self.state != State::Open {
            return Err(SendError::Closed);
        }
        frame::encode_frame(opcode, payload, self.masks.next_mask(), out)
    }

    /// Frames a message the caller wrote at `buf[MAX_HEADER_LEN..]` as it is (see
    /// [`frame::encode_in_place`]); the frame.
    pub(crate) fn frame_in_place<'x>(
        &mut self,
        opcode: Opcode,
        buf: &'x mut [u8],
        payload_len: usize,
    ) -> Result<&'x [u8], SendError> {
        if self.state != State::Open {
            return Err(SendError::Closed);
        }
        frame::encode_in_place(opcode, buf, payload_len, self.masks.next_mask())
    }
}

//! The push-style decoder of server frames: bytes from the socket in, whole messages out.
//!
//! Frames are checked as their headers arrive (mask bit, reserved bits, opcode, control
//! frame rules, minimal lengths, fragment sequencing, the size limit) so that a bad or
//! oversized frame is refused before any of its payload is stored. Fragmented messages are
//! reassembled in a caller-provided buffer, whose length is the largest message accepted;
//! control frames between fragments go to a separate 125-byte buffer inside the decoder, so
//! they never disturb the message being assembled. An unfragmented frame whose payload lies
//! whole in the input is handed out as a slice of the input, without a copy.
//!
//! Any split of the input, down to one byte at a time, gives the same messages and the same
//! errors: every decision depends on frame contents only, never on where a read ended.

use super::frame::{Opcode, MAX_CONTROL_PAYLOAD};
use super::{CloseCode, CloseFrame, Error};

/// A whole message from the server, borrowed from the input or from the decoder's buffers
/// until the next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Message<'s> {
    /// A text message, validated as UTF-8.
    Text(&'s str),
    /// A binary message.
    Binary(&'s [u8]),
    /// A ping; the peer expects a pong with the same payload ([`Session`](super::Session)
    /// sends it).
    Ping(&'s [u8]),
    /// A pong (an answer to our ping, or unsolicited as a heartbeat).
    Pong(&'s [u8]),
    /// A close frame, with its status code and reason when it carried a body.
    Close(Option<CloseFrame<'s>>),
}

/// A frame header, decoded and checked.
#[derive(Debug, Clone, Copy)]
struct FrameInfo {
    fin: bool,
    opcode: Opcode,
    len: u64,
}

/// Header bytes: 2, plus up to 8 of extended length (server frames carry no mask key).
const MAX_SERVER_HEADER: usize = 10;

#[derive(Debug, Clone, Copy)]
enum State {
    /// Gathering a frame header: `filled` bytes so far.
    Header {
        bytes: [u8; MAX_SERVER_HEADER],
        filled: usize,
    },
    /// Copying a frame's payload into the message buffer (data) or the control buffer;
    /// `left` of its `len` bytes still to come. Both fit a `usize`: the header checks
    /// refused any frame longer than the buffer it goes to.
    Payload {
        frame: FrameInfo,
        len: usize,
        left: usize,
    },
    Failed(Error),
}

const HEADER: State = State::Header {
    bytes: [0; MAX_SERVER_HEADER],
    filled: 0,
};

/// The message being reassembled in the caller's buffer.
#[derive(Debug, Clone, Copy)]
struct Assembly {
    text: bool,
    /// Bytes stored so far.
    len: usize,
    /// Bytes known to be valid UTF-8 (it lags `len` by an incomplete character at most).
    checked: usize,
}

/// Where a finished message's bytes are.
#[derive(Debug, Clone, Copy)]
enum Source {
    Input { start: usize, len: usize },
    Buffer { len: usize },
    Control { len: usize },
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Text,
    Binary,
    Ping,
    Pong,
    Close,
}

/// A borrow-free [`Message`], turned into one at the end of a call.
#[derive(Debug, Clone, Copy)]
struct Step {
    kind: Kind,
    source: Source,
}

/// Incremental decoder of the frames a server sends (RFC 6455, 5), reassembling
/// fragmented messages in a caller-provided buffer.
///
/// ```
/// use benchlink_core::ws::{Decoder, Message};
/// let mut buf = [0u8; 64];
/// let mut decoder = Decoder::new(&mut buf);
/// // "Hel" + ping + "lo", as in RFC 6455, 5.4 and 5.7, fed one byte at a time.
/// let wire = [&[0x01, 0x03][..], b"Hel", &[0x89, 0x00], &[0x80, 0x02], b"lo"].concat();
/// let mut seen = Vec::new();
/// for byte in wire.chunks(1) {
///     let mut input = byte;
///     loop {
///         match decoder.decode(input).unwrap() {
///             (_, None) => break,
///             (used, Some(message)) => {
///                 seen.push(format!("{message:?}"));
///                 input = &input[used..];
///             }
///         }
///     }
/// }
/// assert_eq!(seen, ["Ping([])", "Text(\"Hello\")"]);
/// ```
pub struct Decoder<B> {
    buf: B,
    control: [u8; MAX_CONTROL_PAYLOAD],
    state: State,
    message: Option<Assembly>,
    /// Text messages are checked as UTF-8 (the default); off, they come out as binary.
    text_is_utf8: bool,
    /// Every data message is handed out from `buf` (see [`Decoder::set_keep_messages`]).
    keep: bool,
}

/// Sizes and state only: the buffers may hold a whole message.
impl<B: AsRef<[u8]>> core::fmt::Debug for Decoder<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Decoder")
            .field("max_message_len", &self.buf.as_ref().len())
            .field("state", &self.state)
            .field("message", &self.message)
            .finish()
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> Decoder<B> {
    /// A decoder that accepts messages up to `buf.len()` bytes; `buf` is any byte storage
    /// (`&mut [u8]`, an array, a `Box<[u8]>`), so the decoder can borrow or own it. A text message is checked
    /// as UTF-8 fragment by fragment, so an invalid one fails before it is complete.
    pub fn new(buf: B) -> Self {
        Decoder {
            buf,
            control: [0; MAX_CONTROL_PAYLOAD],
            state: HEADER,
            message: None,
            text_is_utf8: true,
            keep: false,
        }
    }

    /// Whether every text or binary message comes out of the decoder's buffer, copied
    /// there when it lay whole in the input (off by default: it is then a slice of the
    /// input, without a copy). On, the last message stays readable after the call, with
    /// [`last_message`](Self::last_message), until the next one: for a caller whose events
    /// borrow it after the input is gone.
    ///
    /// ```
    /// use benchlink_core::ws::{Decoder, Message};
    /// let mut buf = [0u8; 16];
    /// let mut decoder = Decoder::new(&mut buf);
    /// decoder.set_keep_messages(true);
    /// let input = [0x81, 0x02, b'h', b'i'];
    /// assert_eq!(decoder.decode(&input).unwrap(), (4, Some(Message::Text("hi"))));
    /// assert_eq!(decoder.last_message(2), b"hi");
    /// ```
    pub fn set_keep_messages(&mut self, on: bool) {
        self.keep = on;
    }

    /// The first `len` bytes of the message buffer: the last message, `len` bytes long,
    /// when [`set_keep_messages`](Self::set_keep_messages) is on.
    pub fn last_message(&self, len: usize) -> &[u8] {
        self.buf.as_ref().get(..len).unwrap_or_default()
    }

    /// Whether text messages must be UTF-8 (the default, as RFC 6455 requires). Turned
    /// off, a text message is not checked and comes out as [`Message::Binary`]: for a
    /// subprotocol whose peers send binary payloads in text frames (the Python SDK sends
    /// CBOR that way).
    ///
    /// ```
    /// use benchlink_core::ws::{Decoder, Message};
    /// let mut buf = [0u8; 16];
    /// let mut decoder = Decoder::new(&mut buf);
    /// assert!(decoder.decode(&[0x81, 0x01, 0xff]).is_err());
    /// decoder.reset();
    /// decoder.set_text_is_utf8(false);
    /// assert_eq!(decoder.decode(&[0x81, 0x01, 0xff]).unwrap(), (3, Some(Message::Binary(&[0xff]))));
    /// ```
    pub fn set_text_is_utf8(&mut self, on: bool) {
        self.text_is_utf8 = on;
    }

    /// The largest message accepted: the buffer's length.
    ///
    /// ```
    /// use benchlink_core::ws::Decoder;
    /// let mut buf = [0u8; 100];
    /// assert_eq!(Decoder::new(&mut buf).max_message_len(), 100);
    /// ```
    pub fn max_message_len(&self) -> usize {
        self.buf.as_ref().len()
    }

    /// Readies the decoder for a new connection, dropping any partial frame, partial
    /// message or error.
    ///
    /// ```
    /// use benchlink_core::ws::{Decoder, Error};
    /// let mut buf = [0u8; 16];
    /// let mut decoder = Decoder::new(&mut buf);
    /// assert_eq!(decoder.decode(&[0x81, 0x81]).unwrap_err(), Error::MaskedServerFrame);
    /// assert_eq!(decoder.decode(&[0x81, 0x00]).unwrap_err(), Error::MaskedServerFrame);
    /// decoder.reset();
    /// assert!(decoder.decode(&[0x81, 0x00]).unwrap().1.is_some());
    /// ```
    pub fn reset(&mut self) {
        self.state = HEADER;
        self.message = None;
    }

    /// Consumes a prefix of `input`. Returns the bytes used and either a whole message (call
    /// again with the rest of the input) or `None` once every byte was used (feed more).
    /// After an error the decoder keeps returning it until [`Decoder::reset`].
    ///
    /// ```
    /// use benchlink_core::ws::{Decoder, Message};
    /// let mut buf = [0u8; 16];
    /// let mut decoder = Decoder::new(&mut buf);
    /// let two = [0x81, 0x02, b'h', b'i', 0x8A, 0x00];
    /// let (used, first) = decoder.decode(&two).unwrap();
    /// assert_eq!((used, first), (4, Some(Message::Text("hi"))));
    /// assert_eq!(decoder.decode(&two[4..]).unwrap(), (2, Some(Message::Pong(&[]))));
    /// assert_eq!(decoder.decode(&[]).unwrap(), (0, None));
    /// ```
    pub fn decode<'s>(
        &'s mut self,
        input: &'s [u8],
    ) -> Result<(usize, Option<Message<'s>>), Error> {
        match self.run(input) {
            Ok((used, step)) => {
                let step = step.map(|step| self.kept(input, step));
                Ok((used, step.map(|step| self.message(input, step))))
            }
            Err(e) => {
                self.state = State::Failed(e);
                Err(e)
            }
        }
    }

    /// `step`, its payload copied into `buf` when it is a data message from the input and
    /// messages are kept.
    fn kept(&mut self, input: &[u8], step: Step) -> Step {
        let Source::Input { start, len } = step.source else {
            return step;
        };
        if !self.keep || !matches!(step.kind, Kind::Text | Kind::Binary) {
            return step;
        }
        let src = input.get(start..start.saturating_add(len));
        // The header checks refused a message longer than `buf`: it always fits.
        match (self.buf.as_mut().get_mut(..len), src) {
            (Some(dst), Some(src)) => {
                dst.copy_from_slice(src);
                Step {
                    kind: step.kind,
                    source: Source::Buffer { len },
                }
            }
            _ => step,
        }
    }

    fn message<'s>(&'s self, input: &'s [u8], step: Step) -> Message<'s> {
        let bytes = match step.source {
            Source::Input { start, len } => input.get(start..start.saturating_add(len)),
            Source::Buffer { len } => self.buf.as_ref().get(..len),
            Source::Control { len } => self.control.get(..len),
        }
        .unwrap_or_default();
        // Text and close bodies were validated in `run`; the defaults are never taken.
        match step.kind {
            Kind::Text => Message::Text(core::str::from_utf8(bytes).unwrap_or_default()),
            Kind::Binary => Message::Binary(bytes),
            Kind::Ping => Message::Ping(bytes),
            Kind::Pong => Message::Pong(bytes),
            Kind::Close => Message::Close(parse_close(bytes).ok().flatten()),
        }
    }

    fn run(&mut self, input: &[u8]) -> Result<(usize, Option<Step>), Error> {
        let mut used = 0usize;
        loop {
            let rest = input.get(used..).unwrap_or_default();
            match &mut self.state {
                State::Failed(e) => return Err(*e),
                State::Header { bytes, filled } => {
                    let (n, frame) = gather_header(bytes, filled, rest, self.message.as_ref())?;
                    used = used.saturating_add(n);
                    let Some(mut frame) = frame else {
                        return Ok((used, None));
                    };
                    if !self.text_is_utf8 && frame.opcode == Opcode::Text {
                        frame.opcode = Opcode::Binary;
                    }
                    self.check_size(frame)?;
                    let len = usize::try_from(frame.len).unwrap_or(usize::MAX);
                    let whole = input.len().saturating_sub(used) >= len;
                    let unfragmented = frame.opcode.is_control()
                        || (frame.fin && frame.opcode != Opcode::Continuation);
                    if whole && unfragmented {
                        let start = used;
                        used = used.saturating_add(len);
                        self.state = HEADER;
                        let payload = input.get(start..used).unwrap_or_default();
                        let kind = check_whole(frame.opcode, payload)?;
                        let source = Source::Input { start, len };
                        return Ok((used, Some(Step { kind, source })));
                    }
                    if frame.opcode != Opcode::Continuation && !frame.opcode.is_control() {
                        self.message = Some(Assembly {
                            text: frame.opcode == Opcode::Text,
                            len: 0,
                            checked: 0,
                        });
                    }
                    self.state = State::Payload {
                        frame,
                        len,
                        left: len,
                    };
                }
                State::Payload { frame, len, left } => {
                    let (frame, len) = (*frame, *len);
                    if *left == 0 {
                        self.state = HEADER;
                        match self.finish(frame, len)? {
                            Some(step) => return Ok((used, Some(step))),
                            None => continue,
                        }
                    }
                    if rest.is_empty() {
                        return Ok((used, None));
                    }
                    let n = (*left).min(rest.len());
                    let src = rest.get(..n).unwrap_or_default();
                    let at = len.saturating_sub(*left);
                    *left = left.saturating_sub(n);
                    used = used.saturating_add(n);
                    let dst = if frame.opcode.is_control() {
                        self.control.get_mut(at..at.saturating_add(n))
                    } else {
                        let message = self.message.as_mut();
                        let at = message.as_ref().map_or(0, |m| m.len);
                        if let Some(m) = message {
                            m.len = m.len.saturating_add(n);
                        }
                        self.buf.as_mut().get_mut(at..at.saturating_add(n))
                    };
                    // The size checks on the header guarantee room; never fails.
                    if let Some(dst) = dst {
                        dst.copy_from_slice(src);
                    }
                }
            }
        }
    }

    /// Refuses a data frame that would make the message exceed the buffer, before any of
    /// its payload is stored.
    fn check_size(&self, frame: FrameInfo) -> Result<(), Error> {
        if frame.opcode.is_control() {
            return Ok(());
        }
        let so_far = self.message.map_or(0, |m| m.len) as u64;
        let len = so_far.saturating_add(frame.len);
        let max = self.buf.as_ref().len();
        if len > max as u64 {
            return Err(Error::MessageTooLarge { len, max });
        }
        Ok(())
    }

    /// A frame whose payload was stored is complete: a control message, the end of a
    /// message, or a fragment (`None`).
    fn finish(&mut self, frame: FrameInfo, len: usize) -> Result<Option<Step>, Error> {
        if frame.opcode.is_control() {
            let payload = self.control.get(..len).unwrap_or_default();
            let kind = check_whole(frame.opcode, payload)?;
            let source = Source::Control { len };
            return Ok(Some(Step { kind, source }));
        }
        let Some(message) = self.message.as_mut() else {
            return Ok(None);
        };
        if message.text {
            let pending = self.buf.as_ref().get(message.checked..message.len);
            match core::str::from_utf8(pending.unwrap_or_default()) {
                Ok(_) => message.checked = message.len,
                Err(e) if e.error_len().is_none() && !frame.fin => {
                    message.checked = message.checked.saturating_add(e.valid_up_to());
                }
                Err(_) => return Err(Error::InvalidUtf8),
            }
        }
        if !frame.fin {
            return Ok(None);
        }
        let kind = if message.text {
            Kind::Text
        } else {
            Kind::Binary
        };
        let source = Source::Buffer { len: message.len };
        self.message = None;
        Ok(Some(Step { kind, source }))
    }
}

/// Copies header bytes until the header is complete, checking the first two bytes as soon
/// as they are known. Returns the bytes consumed and the frame once complete.
fn gather_header(
    bytes: &mut [u8; MAX_SERVER_HEADER],
    filled: &mut usize,
    input: &[u8],
    message: Option<&Assembly>,
) -> Result<(usize, Option<FrameInfo>), Error> {
    for (i, &b) in input.iter().enumerate() {
        if let Some(slot) = bytes.get_mut(*filled) {
            *slot = b;
        }
        *filled = filled.saturating_add(1);
        let [b0, b1, ext @ ..] = bytes;
        if *filled == 2 {
            check_start(*b0, *b1, message)?;
        }
        let needed = match *b1 & 0x7F {
            126 => 4,
            127 => 10,
            _ => 2,
        };
        if *filled >= 2 && *filled == needed {
            let frame = frame_info(*b0, *b1, ext)?;
            *filled = 0;
            return Ok((i.saturating_add(1), Some(frame)));
        }
    }
    Ok((input.len(), None))
}

/// The checks that need only the first two header bytes.
fn check_start(b0: u8, b1: u8, message: Option<&Assembly>) -> Result<(), Error> {
    let bits = (b0 >> 4) & 0x7;
    if bits != 0 {
        return Err(Error::ReservedBits { bits });
    }
    let opcode = Opcode::from_bits(b0 & 0x0F).ok_or(Error::UnknownOpcode { opcode: b0 & 0x0F })?;
    if b1 & 0x80 != 0 {
        return Err(Error::MaskedServerFrame);
    }
    let fin = b0 & 0x80 != 0;
    match opcode {
        _ if opcode.is_control() && !fin => Err(Error::FragmentedControl),
        Opcode::Continuation if message.is_none() => Err(Error::UnexpectedContinuation),
        Opcode::Text | Opcode::Binary if message.is_some() => Err(Error::ExpectedContinuation),
        _ => Ok(()),
    }
}

/// Decodes the length of a complete header and checks its encoding and the control limit.
fn frame_info(b0: u8, b1: u8, ext: &[u8; 8]) -> Result<FrameInfo, Error> {
    let opcode = Opcode::from_bits(b0 & 0x0F).ok_or(Error::UnknownOpcode { opcode: b0 & 0x0F })?;
    let [e0, e1, ..] = *ext;
    let len = match b1 & 0x7F {
        126 => u64::from(u16::from_be_bytes([e0, e1])),
        127 => u64::from_be_bytes(*ext),
        short => u64::from(short),
    };
    let minimal = match b1 & 0x7F {
        126 => len >= 126,
        127 => len > 0xFFFF,
        _ => true,
    };
    if !minimal {
        return Err(Error::NonMinimalLength { len });
    }
    if opcode.is_control() && len > MAX_CONTROL_PAYLOAD as u64 {
        return Err(Error::ControlTooLong { len });
    }
    Ok(FrameInfo {
        fin: b0 & 0x80 != 0,
        opcode,
        len,
    })
}

/// Validates the payload of a complete unfragmented frame and says what it is.
fn check_whole(opcode: Opcode, payload: &[u8]) -> Result<Kind, Error> {
    Ok(match opcode {
        Opcode::Text => {
            core::str::from_utf8(payload).map_err(|_| Error::InvalidUtf8)?;
            Kind::Text
        }
        // A continuation frame is never whole on its own; it only ends a stored message.
        Opcode::Binary | Opcode::Continuation => Kind::Binary,
        Opcode::Ping => Kind::Ping,
        Opcode::Pong => Kind::Pong,
        Opcode::Close => {
            parse_close(payload)?;
            Kind::Close
        }
    })
}

/// Parses and validates a close body (RFC 6455, 5.5.1 and 7.4): empty, or a sendable
/// code and a UTF-8 reason.
fn parse_close(payload: &[u8]) -> Result<Option<CloseFrame<'_>>, Error> {
    match payload {
        [] => Ok(None),
        [_] => Err(Error::TruncatedCloseCode),
        [hi, lo, reason @ ..] => {
            let code = CloseCode(u16::from_be_bytes([*hi, *lo]));
            if !code.is_sendable() {
                return Err(Error::InvalidCloseCode { code: code.0 });
            }
            let reason = core::str::from_utf8(reason).map_err(|_| Error::InvalidUtf8)?;
            Ok(Some(CloseFrame { code, reason }))
        }
    }
}

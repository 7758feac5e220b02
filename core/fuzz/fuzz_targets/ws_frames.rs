//! `ws::{Decoder, Session}` on server byte streams: arbitrary bytes, and frames built here.
//!
//! Input: `[flags][seed: 4 bytes][payload…]`
//! - flags bit 0: 0 = the payload is the server's byte stream as is; 1 = the payload
//!   describes messages (kinds, contents, fragmentation, interleaved control frames) that
//!   are framed here as a server frames them (unmasked, minimal lengths).
//! - flags bits 1-3 (raw mode): receive buffer 0 / 1 / 7 / 64 / 125 / 126 / 1024 / 65536
//!   bytes. In built mode the buffer is the largest message plus `flags >> 4` bytes.
//! - seed: split points, the outbox writes and when `close()` is called; its first byte
//!   picks the kind of split of the decoder's run (as `chosen_pieces`, at most 256
//!   pieces: the rest of the stream is one last piece; the session's pieces likewise);
//!   bit 0 of its second byte picks the one run of the input: the decoder (clear) or the
//!   `Session` (set); for the decoder, `(second byte >> 1) % 3` picks a fresh decoder (0) or one `reset` after
//!   the stream's first bytes (cut at the third byte) left it dirty (1) or after it failed
//!   mid-message (2). The buffer is allocated once and stays dirty between executions.
//!
//! Properties:
//! - the decoder, in the input's chosen split (fresh or after `reset` of a dirty
//!   decoder), delivers exactly (compared in place) the messages and the error of an
//!   independent whole-input model of RFC 6455's base framing (its section 5: header
//!   checks in the order the decoder documents, minimal lengths, fragment sequencing,
//!   size limit decided from headers, per-fragment UTF-8, close bodies); message sizes are
//!   within the buffer (control payloads ≤ 125, close reasons ≤ 123); errors are sticky;
//!   `None` only once the input is used;
//! - built frames decode to exactly the messages they were built from, under any split;
//! - a `Session` fed the same bytes in pieces (with a `close()` at a random point) never
//!   panics and delivers the model's (built mode: the built) messages up to the first
//!   close (the decoder's, by the property above); everything it puts in its outbox, written out in random partial amounts, is a sequence of whole,
//!   masked, minimal-length client frames — pongs and one final close with a valid body;
//!   a ping received while Open is answered by a pong with its payload as the latest
//!   frame; a peer close is echoed (code only), a protocol error queues a close with
//!   `Error::close_code`, both only while Open; states follow the documented diagram;
//!   `send_text` works exactly while Open; EOF ends an unfinished session `Abnormal`
//!   with an empty outbox.
#![no_main]

use std::borrow::Cow;
use std::sync::LazyLock;

use benchlink_core::http::Cursor;
use benchlink_core::ws::{
    CloseCode, CloseStatus, Decoder, Error, Message, Session, State, MAX_CLOSE_REASON,
    MAX_CONTROL_PAYLOAD,
};
use benchlink_core_fuzz::{chosen_pieces_at_most, random_pieces_at_most, Rng};
use libfuzzer_sys::arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;

thread_local! {
    /// The decoder's / session's buffer, allocated once (as large as the largest buffer an
    /// input may ask for) and left dirty between executions.
    static BUF: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0xA5; 1 << 17]);
    /// The built stream, its capacity reused from one execution to the next.
    static STREAM: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

fuzz_target!(|input: &[u8]| {
    let [flags, s0, s1, s2, s3, payload @ ..] = input else {
        return;
    };
    let seed = [*s0, *s1, *s2, *s3];
    // One run per input: the decoder in the chosen split, or the session.
    let session = s1 & 1 != 0;
    let dirty = (s1 >> 1) % 3;
    let mut built = STREAM.with(|s| std::mem::take(&mut *s.borrow_mut()));
    built.clear();
    let (stream, buf_len, expected) = if flags & 1 == 0 {
        let buf_len = [0, 1, 7, 64, 125, 126, 1024, 65536][usize::from((flags >> 1) & 7)];
        (payload, buf_len, model(payload, buf_len))
    } else {
        let (messages, max) = build(payload, &mut built);
        let expected = Run {
            messages,
            error: None,
        };
        (&built[..], max + usize::from(flags >> 4), expected)
    };
    BUF.with(|buf| {
        let mut buf = buf.borrow_mut();
        let buf = &mut buf[..buf_len];
        if session {
            check_session(stream, buf, &seed, &expected);
        } else {
            let what = if flags & 1 == 0 {
                "the RFC 6455 model"
            } else {
                "the built frames"
            };
            check_decoder(stream, buf, &seed, dirty, &expected, what);
        }
    });
    STREAM.with(|s| *s.borrow_mut() = built);
});

/// Most pieces one run feeds (decoder or session).
const MAX_STEPS: usize = 256;

/// A message, owned, so runs can be compared.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Msg {
    /// Built messages of up to 70 000 bytes borrow [`BIG_TEXT`] / [`BIG_BINARY`].
    Text(Cow<'static, str>),
    Binary(Cow<'static, [u8]>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<(u16, String)>),
}

fn own(m: &Message<'_>, max: usize) -> Msg {
    let control = |p: &[u8]| {
        assert!(
            p.len() <= MAX_CONTROL_PAYLOAD,
            "control payload of {}",
            p.len()
        );
        p.to_vec()
    };
    match *m {
        Message::Text(t) => {
            assert!(t.len() <= max, "text of {} bytes, buffer {max}", t.len());
            Msg::Text(t.to_owned().into())
        }
        Message::Binary(b) => {
            assert!(b.len() <= max, "binary of {} bytes, buffer {max}", b.len());
            Msg::Binary(b.to_vec().into())
        }
        Message::Ping(p) => Msg::Ping(control(p)),
        Message::Pong(p) => Msg::Pong(control(p)),
        Message::Close(c) => Msg::Close(c.map(|c| {
            assert!(c.code.is_sendable(), "close code {} delivered", c.code.0);
            assert!(c.reason.len() <= MAX_CLOSE_REASON);
            (c.code.0, c.reason.to_owned())
        })),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Run {
    messages: Vec<Msg>,
    error: Option<Error>,
}

/// The limits a delivered message keeps (what `own` asserts), and whether it is `e`,
/// compared in place (a message of up to 70 000 bytes is not copied).
fn same(m: &Message<'_>, e: &Msg, max: usize) -> bool {
    let control = |p: &[u8]| {
        assert!(
            p.len() <= MAX_CONTROL_PAYLOAD,
            "control payload of {}",
            p.len()
        );
    };
    match (*m, e) {
        (Message::Text(t), e) => {
            assert!(t.len() <= max, "text of {} bytes, buffer {max}", t.len());
            matches!(e, Msg::Text(s) if s.as_ref() == t)
        }
        (Message::Binary(b), e) => {
            assert!(b.len() <= max, "binary of {} bytes, buffer {max}", b.len());
            matches!(e, Msg::Binary(v) if v.as_ref() == b)
        }
        (Message::Ping(p), e) => {
            control(p);
            matches!(e, Msg::Ping(v) if v == p)
        }
        (Message::Pong(p), e) => {
            control(p);
            matches!(e, Msg::Pong(v) if v == p)
        }
        (Message::Close(_), _) => own(m, max) == *e,
    }
}

/// Feeds `stream` in pieces of `lens` bytes to `dec` as a socket reader would, and checks
/// that it delivers exactly the `expected` messages and error.
fn decode_with<B: AsRef<[u8]> + AsMut<[u8]>>(
    dec: &mut Decoder<B>,
    stream: &[u8],
    lens: &[usize],
    expected: &Run,
    what: &str,
) {
    let max = dec.max_message_len();
    let mut seen = 0;
    let mut offset = 0;
    let mut stalled = 0u32;
    let mut error = None;
    'pieces: for &len in lens {
        let piece = &stream[offset..offset + len];
        offset += len;
        let mut pos = 0;
        loop {
            let rest = &piece[pos..];
            match dec.decode(rest) {
                Err(e) => {
                    assert_eq!(dec.decode(b"\x81\x00").err(), Some(e), "errors are sticky");
                    assert_eq!(dec.decode(&[]).err(), Some(e), "errors are sticky");
                    error = Some(e);
                    break 'pieces;
                }
                Ok((used, None)) => {
                    assert_eq!(used, rest.len(), "None before the input was used");
                    break;
                }
                Ok((used, Some(m))) => {
                    assert!(used <= rest.len(), "used {used} of {}", rest.len());
                    let e = expected.messages.get(seen);
                    assert!(
                        e.is_some_and(|e| same(&m, e, max)),
                        "message {seen}: decoder {m:?}, {what} {e:?}"
                    );
                    seen += 1;
                    pos += used;
                    stalled = if used == 0 { stalled + 1 } else { 0 };
                    assert!(stalled < 3, "messages without consuming input");
                }
            }
        }
    }
    assert_eq!(
        (seen, error),
        (expected.messages.len(), expected.error),
        "messages and error, decoder vs {what}"
    );
}

/// The decoder over `buf` (its whole length), fresh or (`dirty` 1 / 2) after `reset`
/// from the state a prefix of the stream / a failed frame left, fed the stream in the
/// split the seed chooses.
fn check_decoder(
    stream: &[u8],
    buf: &mut [u8],
    seed: &[u8; 4],
    dirty: u8,
    expected: &Run,
    what: &str,
) {
    let buf_len = buf.len();
    let mut dec = Decoder::new(buf);
    assert_eq!(dec.max_message_len(), buf_len);
    match dirty {
        0 => {}
        1 => {
            // Mid-frame, mid-message or failed, as the stream's first bytes leave it.
            let cut = usize::from(seed[2]) % (stream.len() + 1);
            let _ = dec.decode(&stream[..cut.min(stream.len().saturating_sub(1))]);
            dec.reset();
        }
        _ => {
            // Failed (reserved bits), with a text fragment begun.
            let _ = dec.decode(b"\x01\x01a");
            assert!(dec.decode(b"\xf0\x00").is_err());
            dec.reset();
        }
    }
    let mut rng = Rng::from_bytes(seed);
    let lens = chosen_pieces_at_most(stream.len(), seed[0], &mut rng, MAX_STEPS);
    decode_with(&mut dec, stream, &lens, expected, what);
}

/// RFC 6455's base framing (its section 5) on a whole input, written independently of
/// the decoder: the messages up to the first violation, and the violation.
fn model(s: &[u8], max: usize) -> Run {
    let mut messages = Vec::new();
    let mut assembling: Option<(bool, Vec<u8>)> = None;
    let mut pos = 0usize;
    let done = |messages: Vec<Msg>, error| Run { messages, error };
    loop {
        let rest = &s[pos..];
        if rest.len() < 2 {
            return done(messages, None);
        }
        let (b0, b1) = (rest[0], rest[1]);
        let fin = b0 & 0x80 != 0;
        let rsv = (b0 >> 4) & 7;
        let op = b0 & 0x0F;
        if rsv != 0 {
            return done(messages, Some(Error::ReservedBits { bits: rsv }));
        }
        if !matches!(op, 0 | 1 | 2 | 8 | 9 | 10) {
            return done(messages, Some(Error::UnknownOpcode { opcode: op }));
        }
        if b1 & 0x80 != 0 {
            return done(messages, Some(Error::MaskedServerFrame));
        }
        let control = op >= 8;
        if control && !fin {
            return done(messages, Some(Error::FragmentedControl));
        }
        if op == 0 && assembling.is_none() {
            return done(messages, Some(Error::UnexpectedContinuation));
        }
        if (op == 1 || op == 2) && assembling.is_some() {
            return done(messages, Some(Error::ExpectedContinuation));
        }
        let (len, header) = match b1 & 0x7F {
            126 => {
                if rest.len() < 4 {
                    return done(messages, None);
                }
                let len = u64::from(u16::from_be_bytes([rest[2], rest[3]]));
                if len < 126 {
                    return done(messages, Some(Error::NonMinimalLength { len }));
                }
                (len, 4)
            }
            127 => {
                if rest.len() < 10 {
                    return done(messages, None);
                }
                let len = u64::from_be_bytes(rest[2..10].try_into().unwrap());
                if len <= 0xFFFF {
                    return done(messages, Some(Error::NonMinimalLength { len }));
                }
                (len, 10)
            }
            n => (u64::from(n), 2),
        };
        if control && len > 125 {
            return done(messages, Some(Error::ControlTooLong { len }));
        }
        if !control {
            let so_far = assembling.as_ref().map_or(0, |(_, d)| d.len()) as u64;
            let total = so_far.saturating_add(len);
            if total > max as u64 {
                return done(messages, Some(Error::MessageTooLarge { len: total, max }));
            }
        }
        if ((rest.len() - header) as u64) < len {
            return done(messages, None);
        }
        let payload = &rest[header..header + len as usize];
        pos += header + len as usize;
        match op {
            9 => messages.push(Msg::Ping(payload.to_vec())),
            10 => messages.push(Msg::Pong(payload.to_vec())),
            8 => match payload {
                [] => messages.push(Msg::Close(None)),
                [_] => return done(messages, Some(Error::TruncatedCloseCode)),
                [hi, lo, reason @ ..] => {
                    let code = u16::from_be_bytes([*hi, *lo]);
                    if !matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999) {
                        return done(messages, Some(Error::InvalidCloseCode { code }));
                    }
                    let Ok(reason) = std::str::from_utf8(reason) else {
                        return done(messages, Some(Error::InvalidUtf8));
                    };
                    messages.push(Msg::Close(Some((code, reason.to_owned()))));
                }
            },
            _ => {
                if op != 0 {
                    assembling = Some((op == 1, Vec::new()));
                }
                let (text, data) = assembling.as_mut().unwrap();
                data.extend_from_slice(payload);
                if *text {
                    match std::str::from_utf8(data) {
                        Ok(_) => {}
                        Err(e) if e.error_len().is_none() && !fin => {}
                        Err(_) => return done(messages, Some(Error::InvalidUtf8)),
                    }
                }
                if fin {
                    let (text, data) = assembling.take().unwrap();
                    messages.push(if text {
                        Msg::Text(String::from_utf8(data).unwrap().into())
                    } else {
                        Msg::Binary(data.into())
                    });
                }
            }
        }
    }
}

/// A client frame read back from the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ClientFrame {
    opcode: u8,
    payload: Vec<u8>,
}

/// Parses the first whole masked client frame (RFC 6455's frame layout, section 5.2) of
/// `s`: FIN, mask bit, minimal lengths. Returns it with its size, or `None` while `s` holds only part of a frame;
/// panics on anything that is not such a frame.
fn client_frame(s: &[u8]) -> Option<(ClientFrame, usize)> {
    let (&b0, &b1) = (s.first()?, s.get(1)?);
    assert_eq!(
        b0 & 0xF0,
        0x80,
        "client frame not FIN or with RSV bits: {b0:#04x}"
    );
    assert!(b1 & 0x80 != 0, "client frame not masked");
    let (len, header) = match b1 & 0x7F {
        126 => {
            let len = usize::from(u16::from_be_bytes(s.get(2..4)?.try_into().unwrap()));
            assert!(len >= 126, "non-minimal 16-bit length {len}");
            (len, 4)
        }
        127 => {
            let len = u64::from_be_bytes(s.get(2..10)?.try_into().unwrap());
            assert!(len > 0xFFFF, "non-minimal 64-bit length {len}");
            (
                usize::try_from(len).expect("a frame length this machine can hold"),
                10,
            )
        }
        n => (usize::from(n), 2),
    };
    let mask: [u8; 4] = s.get(header..header + 4)?.try_into().unwrap();
    let payload: Vec<u8> = s
        .get(header + 4..header + 4 + len)?
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ mask[i % 4])
        .collect();
    let frame = ClientFrame {
        opcode: b0 & 0x0F,
        payload,
    };
    Some((frame, header + 4 + len))
}

/// Parses whole masked client frames; panics on anything else, including a partial frame
/// at the end.
fn client_frames(mut s: &[u8]) -> Vec<ClientFrame> {
    let mut frames = Vec::new();
    while !s.is_empty() {
        let (frame, size) =
            client_frame(s).unwrap_or_else(|| panic!("partial frame at the end: {s:02x?}"));
        frames.push(frame);
        s = &s[size..];
    }
    frames
}

/// The session's outgoing stream as client frames: the frames written out whole, and the
/// written bytes of the frame being written. Each step parses only what the written tail
/// and the session's pending outbox make (re-parsing all that was written at every step
/// would make the check quadratic in the stream).
#[derive(Default)]
struct Outgoing {
    written: Vec<ClientFrame>,
    tail: Vec<u8>,
}

impl Outgoing {
    /// The adapter wrote `bytes` of the pending outbox.
    fn write(&mut self, bytes: &[u8]) {
        self.tail.extend_from_slice(bytes);
        while let Some((frame, size)) = client_frame(&self.tail) {
            self.written.push(frame);
            self.tail.drain(..size);
        }
    }

    /// The frames still to come: the written tail completed by the session's pending
    /// outbox, which must be whole frames that may follow what was written.
    fn pending<B, M>(&self, session: &Session<B, M>) -> Vec<ClientFrame>
    where
        B: AsRef<[u8]> + AsMut<[u8]>,
        M: FnMut() -> [u8; 4],
    {
        let mut bytes = self.tail.clone();
        if let Some(p) = session.poll_transmit() {
            assert!(!p.is_empty(), "poll_transmit offers an empty slice");
            bytes.extend_from_slice(p);
        }
        let frames = client_frames(&bytes);
        check_outbox_frames(&frames);
        if self.written.last().is_some_and(|f| f.opcode == 0x8) {
            assert!(frames.is_empty(), "a frame after the close frame");
        }
        frames
    }

    /// The latest frame of the whole outgoing stream.
    fn last<'a>(&'a self, pending: &'a [ClientFrame]) -> Option<&'a ClientFrame> {
        pending.last().or(self.written.last())
    }
}

/// The session's own frames: pongs and at most one close, last, with a valid body.
fn check_outbox_frames(frames: &[ClientFrame]) {
    for (i, f) in frames.iter().enumerate() {
        assert!(f.payload.len() <= MAX_CONTROL_PAYLOAD);
        match f.opcode {
            0xA => {}
            0x8 => {
                assert_eq!(i + 1, frames.len(), "a frame after the close frame");
                match f.payload.as_slice() {
                    [] => {}
                    [hi, lo, reason @ ..] => {
                        assert!(CloseCode(u16::from_be_bytes([*hi, *lo])).is_sendable());
                        assert!(std::str::from_utf8(reason).is_ok());
                        assert!(reason.len() <= MAX_CLOSE_REASON);
                    }
                    [_] => panic!("close body of 1 byte"),
                }
            }
            op => panic!("session queued opcode {op:#x}"),
        }
    }
}

fn close_frame(code: u16, reason: &[u8]) -> ClientFrame {
    let mut payload = code.to_be_bytes().to_vec();
    payload.extend_from_slice(reason);
    ClientFrame {
        opcode: 0x8,
        payload,
    }
}

/// Runs a session over `stream` in random pieces and checks it against the decoder's
/// `reference` run.
fn check_session(stream: &[u8], buf: &mut [u8], seed: &[u8], reference: &Run) {
    let buf_len = buf.len();
    let mut rng = Rng::from_bytes(&[seed, b"session"].concat());
    let lens = random_pieces_at_most(stream.len(), &mut rng, 24.max(stream.len() / 64), MAX_STEPS);
    let close_before = if rng.chance(3) {
        Some(rng.below(lens.len() + 1))
    } else {
        None
    };
    let mut mask_state = u32::from_le_bytes(seed.try_into().unwrap());
    let masks = move || {
        mask_state = mask_state
            .wrapping_mul(0x9E37_79B9)
            .wrapping_add(0x7F4A_7C15);
        mask_state.to_be_bytes()
    };
    let mut session = Session::new(buf, masks);
    assert_eq!(session.state(), State::Open);

    // Frames written out so far; they and the pending ones are the outgoing stream, and
    // only the pending ones change while the session handles input.
    let mut outgoing = Outgoing::default();
    let mut messages: Vec<Msg> = Vec::new();
    let mut error = None;
    let mut offset = 0;
    // The pending outbox before a step; the frames are parsed again only when it changed.
    let mut pending_before: Vec<u8> = Vec::new();

    for (piece_index, &len) in lens.iter().enumerate().chain([(lens.len(), &0)]) {
        if close_before == Some(piece_index) {
            let before = session.state();
            let frames_before = outgoing.pending(&session);
            session.close(CloseCode::NORMAL, "bye").unwrap();
            let frames = outgoing.pending(&session);
            if before == State::Open {
                assert_eq!(session.state(), State::Closing);
                assert_eq!(outgoing.last(&frames), Some(&close_frame(1000, b"bye")));
            } else {
                assert_eq!(session.state(), before);
                assert_eq!(
                    frames, frames_before,
                    "close() queued a frame when not Open"
                );
            }
        }
        let piece = &stream[offset..offset + len];
        offset += len;
        let mut pos = 0;
        while pos < piece.len() {
            let rest = &piece[pos..];
            let before = session.state();
            pending_before.clear();
            pending_before.extend_from_slice(session.poll_transmit().unwrap_or_default());
            let result = session
                .handle(rest)
                .map(|(used, m)| (used, m.map(|m| own(&m, buf_len))));
            let after = session.state();
            // The outgoing stream is the frames written, the written tail and the pending
            // outbox; writes only move bytes from the outbox to the tail, so an unchanged
            // outbox is still whole valid frames (checked when it last changed).
            let unchanged = session.poll_transmit().unwrap_or_default() == &pending_before[..];
            let answers = matches!(result, Err(_) | Ok((_, Some(Msg::Ping(_) | Msg::Close(_)))));
            let frames = if unchanged && !answers {
                Vec::new()
            } else {
                outgoing.pending(&session)
            };
            match result {
                Err(e) => {
                    assert_eq!(after, State::Closed(CloseStatus::Failed(e)));
                    if let State::Closed(CloseStatus::Failed(old)) = before {
                        assert_eq!(old, e, "a failed session returns its error");
                        assert!(unchanged);
                    } else {
                        error.get_or_insert(e);
                        if before == State::Open {
                            assert_eq!(
                                outgoing.last(&frames),
                                Some(&close_frame(e.close_code().0, b""))
                            );
                        } else {
                            assert!(unchanged, "a second close frame");
                        }
                    }
                    pos = piece.len();
                }
                Ok((used, None)) => {
                    assert_eq!(used, rest.len());
                    assert_eq!(after, before);
                    assert!(unchanged);
                    pos = piece.len();
                }
                Ok((used, Some(m))) => {
                    assert!(used <= rest.len());
                    assert!(matches!(before, State::Open | State::Closing));
                    pos += used;
                    match &m {
                        Msg::Ping(p) if before == State::Open => {
                            assert_eq!(after, State::Open);
                            let pong = ClientFrame {
                                opcode: 0xA,
                                payload: p.clone(),
                            };
                            assert_eq!(outgoing.last(&frames), Some(&pong), "ping not answered");
                        }
                        Msg::Close(c) => {
                            let code = c.as_ref().map(|(code, _)| CloseCode(*code));
                            let by_peer = before == State::Open;
                            assert_eq!(after, State::Closed(CloseStatus::Clean { code, by_peer }));
                            if by_peer {
                                let echo = match c {
                                    Some((code, _)) => close_frame(*code, b""),
                                    None => ClientFrame {
                                        opcode: 0x8,
                                        payload: Vec::new(),
                                    },
                                };
                                assert_eq!(outgoing.last(&frames), Some(&echo), "close not echoed");
                            } else {
                                assert!(unchanged);
                            }
                        }
                        _ => {
                            assert_eq!(after, before);
                            assert!(unchanged, "a data message changed the outbox");
                        }
                    }
                    messages.push(m);
                }
            }
            // The adapter writes some of what is pending.
            if let Some(p) = session.poll_transmit() {
                let n = rng.below(p.len() + 1);
                outgoing.write(&p[..n]);
                session.advance_transmit(n);
            }
            // Sending works exactly while Open.
            let mut out = [0u8; 16];
            let mut out = Cursor::new(&mut out);
            let sent_text = session.send_text("x", &mut out);
            assert_eq!(
                sent_text.is_ok(),
                session.state() == State::Open,
                "{sent_text:?}"
            );
            if sent_text.is_ok() {
                // One whole client frame: FIN text, masked, length 1, "x" (read in place:
                // this runs at every step).
                let w = out.written();
                assert!(
                    matches!(w, [0x81, 0x81, m, _, _, _, x] if x ^ m == b'x'),
                    "send_text wrote {w:02x?}"
                );
            }
        }
    }

    // The session's messages are the decoder's, up to the first close.
    let cut = reference
        .messages
        .iter()
        .position(|m| matches!(m, Msg::Close(_)))
        .map_or(reference.messages.len(), |i| i + 1);
    let expected_error = if cut < reference.messages.len()
        || reference
            .messages
            .last()
            .is_some_and(|m| matches!(m, Msg::Close(_)))
    {
        None
    } else {
        reference.error
    };
    assert_eq!(messages, reference.messages[..cut], "session messages");
    assert_eq!(error, expected_error, "session error");

    // Drain the rest of the outbox, then the transport ends.
    while let Some(p) = session.poll_transmit() {
        let n = 1 + rng.below(p.len());
        outgoing.write(&p[..n]);
        session.advance_transmit(n);
    }
    assert!(
        outgoing.tail.is_empty(),
        "partial frame at the end: {:02x?}",
        outgoing.tail
    );
    check_outbox_frames(&outgoing.written);
    let before = session.state();
    session.handle_eof();
    match before {
        State::Open | State::Closing => {
            assert_eq!(session.state(), State::Closed(CloseStatus::Abnormal))
        }
        closed => assert_eq!(session.state(), closed),
    }
    assert_eq!(session.poll_transmit(), None);
}

/// Builds unmasked server frames from a description; returns the stream, the messages it
/// must decode to, and the largest data message.
fn build(data: &[u8], stream: &mut Vec<u8>) -> (Vec<Msg>, usize) {
    let mut u = Unstructured::new(data);
    let mut expected = Vec::new();
    let mut max = 0usize;
    let mut big = false;
    let count = u.int_in_range(0..=10u8).unwrap_or(0);
    for _ in 0..count {
        let kind = u.int_in_range(0..=5u8).unwrap_or(0);
        match kind {
            0..=2 => {
                let text = kind != 2;
                let message = if u.ratio(1, 6).unwrap_or(false) && !big {
                    big = true;
                    let len = *u
                        .choose(&[125usize, 126, 127, 65535, 65536, 70000])
                        .unwrap_or(&126);
                    if text {
                        // Whole characters only: cut back to a char boundary.
                        let mut len = len;
                        while !BIG_TEXT.is_char_boundary(len) {
                            len -= 1;
                        }
                        Msg::Text(Cow::Borrowed(&BIG_TEXT[..len]))
                    } else {
                        Msg::Binary(Cow::Borrowed(&BIG_BINARY[..len]))
                    }
                } else if text {
                    let s: String = u.arbitrary().unwrap_or_default();
                    Msg::Text(s.into())
                } else {
                    let b: Vec<u8> = u.arbitrary().unwrap_or_default();
                    Msg::Binary(b.into())
                };
                let payload: &[u8] = match &message {
                    Msg::Text(t) => t.as_bytes(),
                    Msg::Binary(b) => b,
                    _ => unreachable!(),
                };
                max = max.max(payload.len());
                let fragments = u.int_in_range(1..=4usize).unwrap_or(1);
                let mut cuts: Vec<usize> = (1..fragments)
                    .map(|_| u.int_in_range(0..=payload.len()).unwrap_or(0))
                    .collect();
                cuts.sort_unstable();
                cuts.push(payload.len());
                let mut start = 0;
                for (i, &end) in cuts.iter().enumerate() {
                    let fin = i + 1 == cuts.len();
                    let op = if i > 0 {
                        0
                    } else if text {
                        1
                    } else {
                        2
                    };
                    frame(stream, fin, op, &payload[start..end]);
                    start = end;
                    if !fin && u.ratio(1, 3).unwrap_or(false) {
                        control(&mut u, stream, &mut expected, false);
                    }
                }
                expected.push(message);
            }
            3 | 4 => control(&mut u, stream, &mut expected, false),
            _ => control(&mut u, stream, &mut expected, true),
        }
    }
    (expected, max)
}

/// A ping or pong (or a close when `close`) with arbitrary contents.
fn control(u: &mut Unstructured<'_>, stream: &mut Vec<u8>, expected: &mut Vec<Msg>, close: bool) {
    if close {
        let body = if u.ratio(1, 4).unwrap_or(false) {
            None
        } else {
            let codes = [1000u16, 1001, 1002, 1003, 1007, 1011, 1014, 3000, 4999];
            let code = if u.ratio(1, 2).unwrap_or(false) {
                *u.choose(&codes).unwrap_or(&1000)
            } else {
                u.int_in_range(3000..=4999u16).unwrap_or(3000)
            };
            let mut reason: String = u.arbitrary().unwrap_or_default();
            while reason.len() > MAX_CLOSE_REASON {
                reason.pop();
            }
            Some((code, reason))
        };
        let payload = match &body {
            None => Vec::new(),
            Some((code, reason)) => [&code.to_be_bytes()[..], reason.as_bytes()].concat(),
        };
        frame(stream, true, 8, &payload);
        expected.push(Msg::Close(body));
        return;
    }
    let len = u.int_in_range(0..=125usize).unwrap_or(0);
    let payload = u.bytes(len.min(u.len())).unwrap_or_default().to_vec();
    let ping = u.arbitrary::<bool>().unwrap_or(true);
    frame(stream, true, if ping { 9 } else { 10 }, &payload);
    expected.push(if ping {
        Msg::Ping(payload)
    } else {
        Msg::Pong(payload)
    });
}

/// The big built messages: "é€x" / [0, 0xFF, 7] repeated past 70 000 bytes, made once
/// (`repeat` copies in doubling blocks; a byte-wise iterator would run the coverage
/// instrumentation for each byte).
static BIG_TEXT: LazyLock<String> = LazyLock::new(|| "é€x".repeat(70_000 / 6 + 1));
static BIG_BINARY: LazyLock<Vec<u8>> = LazyLock::new(|| [0, 0xFF, 7].repeat(70_000 / 3 + 1));

/// An unmasked server frame with the minimal length encoding.
fn frame(stream: &mut Vec<u8>, fin: bool, op: u8, payload: &[u8]) {
    stream.reserve(10 + payload.len());
    stream.push(if fin { 0x80 } else { 0 } | op);
    match payload.len() {
        n @ 0..=125 => stream.push(n as u8),
        n @ 126..=0xFFFF => {
            stream.push(126);
            stream.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            stream.push(127);
            stream.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    stream.extend_from_slice(payload);
}

//! The core's WebSocket codec (`benchlink_core::ws`) against tungstenite, an independent
//! RFC 6455 implementation, frame by frame and in memory:
//!
//! - what tungstenite writes as a server (text and binary across the 125/126 and
//!   65535/65536 length boundaries, pings, pongs, closes with code and reason, fragmented
//!   messages through its frame API, control frames between fragments) is decoded by the
//!   core's `Decoder` and `Session`, fed in random splits, into the same messages;
//! - what the core encodes (`Session::send_text`, `send_binary`, `send_ping`, `close`) is
//!   read by tungstenite as a server (which insists on masked client frames), fed in
//!   random splits, into the same messages;
//! - malformed server input is refused by both, except where tungstenite is known to be
//!   lenient (non-minimal lengths, close codes it does not allow): those cases assert
//!   tungstenite's actual behaviour, so a change on either side is noticed.
//!
//! Random cases come from a seeded generator: every run is the same.

use std::io::{self, Read, Write};

use benchlink_core::http::Cursor;
use benchlink_core::ws::{CloseCode, Decoder, Error, Message as CoreMessage, Session};
use tungstenite::error::{Error as TError, ProtocolError};
use tungstenite::protocol::frame::coding::{CloseCode as TCloseCode, Data, OpCode};
use tungstenite::protocol::frame::{CloseFrame, Frame};
use tungstenite::protocol::{Role, WebSocket, WebSocketConfig};
use tungstenite::Message as TMessage;

/// xorshift64*: deterministic splits, sizes and contents.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// `n` bytes of UTF-8 text with one-, two-, three- and four-byte characters.
    fn text(&mut self, n: usize) -> String {
        let mut s = String::with_capacity(n);
        while s.len() < n {
            let c = match self.below(8) {
                0 => 'é',
                1 => '€',
                2 => '𝄞',
                _ => char::from(b'a' + (self.below(26) as u8)),
            };
            if s.len() + c.len_utf8() > n {
                s.push('x');
            } else {
                s.push(c);
            }
        }
        s
    }

    fn any_text(&mut self) -> String {
        let n = self.size();
        self.text(n)
    }

    fn any_bytes(&mut self) -> Vec<u8> {
        let n = self.size();
        self.bytes(n)
    }

    /// A size biased towards the length-encoding boundaries.
    fn size(&mut self) -> usize {
        const EDGES: [usize; 10] = [0, 1, 124, 125, 126, 127, 65535, 65536, 65537, 100_000];
        match self.below(3) {
            0 => EDGES[self.below(EDGES.len())],
            1 => self.below(300),
            _ => self.below(70_000),
        }
    }
}

/// A message as both sides see it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Msg {
    Text(String),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<(u16, String)>),
}

impl Msg {
    fn from_core(m: CoreMessage<'_>) -> Msg {
        match m {
            CoreMessage::Text(t) => Msg::Text(t.to_owned()),
            CoreMessage::Binary(b) => Msg::Binary(b.to_vec()),
            CoreMessage::Ping(b) => Msg::Ping(b.to_vec()),
            CoreMessage::Pong(b) => Msg::Pong(b.to_vec()),
            CoreMessage::Close(f) => Msg::Close(f.map(|f| (f.code.0, f.reason.to_owned()))),
        }
    }

    fn from_tungstenite(m: TMessage) -> Msg {
        match m {
            TMessage::Text(t) => Msg::Text(t.as_str().to_owned()),
            TMessage::Binary(b) => Msg::Binary(b.to_vec()),
            TMessage::Ping(b) => Msg::Ping(b.to_vec()),
            TMessage::Pong(b) => Msg::Pong(b.to_vec()),
            TMessage::Close(f) => {
                Msg::Close(f.map(|f| (u16::from(f.code), f.reason.as_str().to_owned())))
            }
            TMessage::Frame(_) => unreachable!("read never returns raw frames"),
        }
    }
}

/// An in-memory transport: reads come from `input` in pieces of at most `max_read` bytes
/// (random when an rng is given), writes go to `output`.
struct Wire {
    input: Vec<u8>,
    at: usize,
    rng: Option<Rng>,
    output: Vec<u8>,
}

impl Wire {
    fn reading(input: Vec<u8>, rng: Option<Rng>) -> Wire {
        Wire {
            input,
            at: 0,
            rng,
            output: Vec::new(),
        }
    }
}

impl Read for Wire {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.input.len() - self.at;
        let mut n = left.min(buf.len());
        if let Some(rng) = self.rng.as_mut() {
            n = n.min(1 + rng.below(3000));
        }
        buf[..n].copy_from_slice(&self.input[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

impl Write for Wire {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn config(max: usize) -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(max))
        .max_frame_size(Some(max.max(125)))
}

// ------------------------------------------------------------------------------------
// tungstenite writes, the core reads
// ------------------------------------------------------------------------------------

/// What the server sends: whole messages, or a data message in fragments with control
/// frames between them.
#[derive(Debug, Clone)]
enum Send {
    Whole(Msg),
    Fragmented {
        text: bool,
        pieces: Vec<Vec<u8>>,
        between: Vec<Option<Msg>>,
    },
}

/// The bytes tungstenite writes as a server for `sends`, and the messages they carry.
fn server_bytes(sends: &[Send]) -> (Vec<u8>, Vec<Msg>) {
    let mut ws = WebSocket::from_raw_socket(
        Wire::reading(Vec::new(), None),
        Role::Server,
        Some(WebSocketConfig::default().write_buffer_size(0)),
    );
    let mut expected = Vec::new();
    let send_control = |ws: &mut WebSocket<Wire>, m: &Msg| {
        let message = match m.clone() {
            Msg::Ping(p) => TMessage::Ping(p.into()),
            Msg::Pong(p) => TMessage::Pong(p.into()),
            Msg::Text(t) => TMessage::text(t),
            Msg::Binary(b) => TMessage::binary(b),
            Msg::Close(c) => TMessage::Close(c.map(|(code, reason)| CloseFrame {
                code: TCloseCode::from(code),
                reason: reason.into(),
            })),
        };
        ws.send(message).expect("tungstenite writes");
    };
    for send in sends {
        match send {
            Send::Whole(m) => {
                send_control(&mut ws, m);
                expected.push(m.clone());
            }
            Send::Fragmented {
                text,
                pieces,
                between,
            } => {
                let whole: Vec<u8> = pieces.concat();
                for (i, piece) in pieces.iter().enumerate() {
                    let opcode = match (i, text) {
                        (0, true) => OpCode::Data(Data::Text),
                        (0, false) => OpCode::Data(Data::Binary),
                        _ => OpCode::Data(Data::Continue),
                    };
                    let fin = i + 1 == pieces.len();
                    let frame = Frame::message(piece.clone(), opcode, fin);
                    ws.send(TMessage::Frame(frame)).expect("tungstenite writes");
                    if let Some(Some(control)) = between.get(i).filter(|_| !fin) {
                        send_control(&mut ws, control);
                        expected.push(control.clone());
                    }
                }
                expected.push(if *text {
                    Msg::Text(String::from_utf8(whole).expect("text pieces make UTF-8"))
                } else {
                    Msg::Binary(whole)
                });
            }
        }
    }
    ws.flush().expect("flush");
    (ws.get_ref().output.clone(), expected)
}

/// Feeds `bytes` in random pieces to a core `Decoder` with a `max`-byte buffer.
fn core_decode(bytes: &[u8], max: usize, rng: &mut Rng) -> Result<Vec<Msg>, (Vec<Msg>, Error)> {
    let mut decoder = Decoder::new(vec![0u8; max]);
    let mut msgs = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = match rng.below(4) {
            0 => 1,
            1 => rest.len(),
            _ => 1 + rng.below(rest.len().min(5000)),
        }
        .min(rest.len());
        let (mut piece, tail) = rest.split_at(n);
        rest = tail;
        loop {
            match decoder.decode(piece) {
                Err(e) => return Err((msgs, e)),
                Ok((used, None)) => {
                    assert_eq!(used, piece.len());
                    break;
                }
                Ok((used, Some(m))) => {
                    msgs.push(Msg::from_core(m));
                    piece = &piece[used..];
                }
            }
        }
    }
    Ok(msgs)
}

fn random_control(rng: &mut Rng) -> Msg {
    let n = rng.below(126);
    match rng.below(3) {
        0 => Msg::Ping(rng.bytes(n)),
        1 => Msg::Pong(rng.bytes(n)),
        _ => Msg::Pong(Vec::new()),
    }
}

fn random_sends(rng: &mut Rng) -> Vec<Send> {
    let mut sends = Vec::new();
    for _ in 0..1 + rng.below(6) {
        let send = match rng.below(6) {
            0 => Send::Whole(Msg::Text(rng.any_text())),
            1 => Send::Whole(Msg::Binary(rng.any_bytes())),
            2 => Send::Whole(random_control(rng)),
            _ => {
                let text = rng.chance(2);
                let whole = if text {
                    rng.any_text().into_bytes()
                } else {
                    rng.any_bytes()
                };
                // Cut anywhere, even inside a character, into 1..=5 pieces (some empty).
                let mut cuts: Vec<usize> = (0..rng.below(5))
                    .map(|_| rng.below(whole.len() + 1))
                    .collect();
                cuts.sort_unstable();
                cuts.push(whole.len());
                let mut pieces = Vec::new();
                let mut start = 0;
                for cut in cuts {
                    pieces.push(whole[start..cut].to_vec());
                    start = cut;
                }
                let between = (0..pieces.len())
                    .map(|_| rng.chance(2).then(|| random_control(rng)))
                    .collect();
                Send::Fragmented {
                    text,
                    pieces,
                    between,
                }
            }
        };
        sends.push(send);
    }
    if rng.chance(3) {
        let reason = {
            let n = rng.below(40);
            rng.text(n)
        };
        sends.push(Send::Whole(Msg::Close(Some((
            1000 + rng.below(4) as u16,
            reason,
        )))));
    }
    sends
}

#[test]
fn tungstenite_server_frames_decode_to_the_same_messages_across_length_boundaries() {
    let mut rng = Rng(0x0DD5_EED5);
    for size in [0, 1, 124, 125, 126, 127, 65535, 65536, 65537, 100_000] {
        let text = rng.text(size);
        let binary = rng.bytes(size);
        let (bytes, expected) = server_bytes(&[
            Send::Whole(Msg::Text(text)),
            Send::Whole(Msg::Binary(binary)),
        ]);
        // The header forms: 7-bit below 126, 16-bit below 65536, 64-bit from there.
        let form = match size {
            0..=125 => size as u8,
            126..=65535 => 126,
            _ => 127,
        };
        assert_eq!(bytes[1], form, "length form for {size} bytes");
        for _ in 0..4 {
            assert_eq!(
                core_decode(&bytes, 100_000, &mut rng),
                Ok(expected.clone()),
                "{size} bytes"
            );
        }
    }
}

#[test]
fn tungstenite_control_frames_and_closes_decode_to_the_same_messages() {
    let mut rng = Rng(0xC0DE);
    let mut sends = vec![
        Send::Whole(Msg::Ping(Vec::new())),
        Send::Whole(Msg::Ping(vec![7; 125])),
        Send::Whole(Msg::Pong(b"pong".to_vec())),
    ];
    for (code, reason) in [(1000, ""), (1001, "going away"), (1011, "é€𝄞"), (4000, "x")] {
        let mut with_close = sends.clone();
        with_close.push(Send::Whole(Msg::Close(Some((code, reason.to_owned())))));
        let (bytes, expected) = server_bytes(&with_close);
        assert_eq!(core_decode(&bytes, 64, &mut rng), Ok(expected));
    }
    // A close without a body.
    sends.push(Send::Whole(Msg::Close(None)));
    let (bytes, expected) = server_bytes(&sends);
    assert_eq!(core_decode(&bytes, 64, &mut rng), Ok(expected));
}

#[test]
fn tungstenite_fragmented_messages_decode_to_the_same_messages() {
    let mut rng = Rng(0xF4A6);
    // "Hel" + ping + "lo" (the RFC's example), then a text cut inside a character.
    let sends = [
        Send::Fragmented {
            text: true,
            pieces: vec![b"Hel".to_vec(), b"lo".to_vec()],
            between: vec![Some(Msg::Ping(b"p".to_vec())), None],
        },
        Send::Fragmented {
            text: true,
            pieces: vec![vec![b'a', 0xE2], vec![0x82], vec![0xAC, b'!']],
            between: vec![None, Some(Msg::Pong(Vec::new())), None],
        },
        Send::Fragmented {
            text: false,
            pieces: vec![Vec::new(), vec![1, 2, 3], Vec::new()],
            between: vec![None, None, None],
        },
    ];
    let (bytes, expected) = server_bytes(&sends);
    assert_eq!(expected[1], Msg::Text("Hello".to_owned()));
    assert_eq!(expected[3], Msg::Text("a€!".to_owned()));
    for _ in 0..20 {
        assert_eq!(core_decode(&bytes, 64, &mut rng), Ok(expected.clone()));
    }
}

#[test]
fn random_tungstenite_streams_decode_to_the_same_messages() {
    let mut rng = Rng(0x5EED_0001);
    for case in 0..150 {
        let sends = random_sends(&mut rng);
        let (bytes, mut expected) = server_bytes(&sends);
        // The decoder goes on after a close; the session stops there.
        let close_at = expected.iter().position(|m| matches!(m, Msg::Close(_)));
        assert_eq!(
            core_decode(&bytes, 100_000, &mut rng),
            Ok(expected.clone()),
            "case {case}"
        );
        // A session delivers the same up to the close, and answers every ping.
        let mut buf = vec![0u8; 100_000];
        let mut session = Session::new(&mut buf[..], || [1, 2, 3, 4]);
        let mut got = Vec::new();
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let (used, m) = session.handle(rest).expect("valid input");
            rest = &rest[used..];
            let Some(m) = m else { break };
            got.push(Msg::from_core(m));
            if let Some(pong) = session.poll_transmit() {
                let n = pong.len();
                session.advance_transmit(n);
            }
        }
        if let Some(at) = close_at {
            expected.truncate(at + 1);
        }
        assert_eq!(got, expected, "case {case} (session)");
    }
}

// ------------------------------------------------------------------------------------
// The core writes, tungstenite reads
// ------------------------------------------------------------------------------------

/// Reads every message tungstenite (server role: masked frames only) finds in `bytes`,
/// fed in random pieces; the error that ended it, if not the end of input.
fn tungstenite_read(
    bytes: Vec<u8>,
    role: Role,
    max: usize,
    rng: Option<Rng>,
) -> (Vec<Msg>, Option<TError>) {
    let mut ws = WebSocket::from_raw_socket(Wire::reading(bytes, rng), role, Some(config(max)));
    let mut msgs = Vec::new();
    loop {
        match ws.read() {
            Ok(m) => {
                let closed = matches!(m, TMessage::Close(_));
                msgs.push(Msg::from_tungstenite(m));
                if closed {
                    return (msgs, None);
                }
            }
            Err(TError::Protocol(ProtocolError::ResetWithoutClosingHandshake)) => {
                return (msgs, None)
            }
            Err(e) => return (msgs, Some(e)),
        }
    }
}

#[derive(Debug, Clone)]
enum Out {
    Text(String),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Close(u16, String),
}

/// What a core `Session` writes for `outs`, and the messages a server must read.
fn core_bytes(outs: &[Out], rng: &mut Rng) -> (Vec<u8>, Vec<Msg>) {
    let mut seed = rng.next() | 1;
    let masks = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed as u32).to_le_bytes()
    };
    let mut rx = [0u8; 16];
    let mut session = Session::new(&mut rx[..], masks);
    let mut wire = Vec::new();
    let mut expected = Vec::new();
    for out in outs {
        let mut buf = vec![0u8; 200_000];
        let mut cursor = Cursor::new(&mut buf);
        match out {
            Out::Text(t) => {
                session.send_text(t, &mut cursor).expect("send_text");
                expected.push(Msg::Text(t.clone()));
            }
            Out::Binary(b) => {
                session.send_binary(b, &mut cursor).expect("send_binary");
                expected.push(Msg::Binary(b.clone()));
            }
            Out::Ping(p) => {
                session.send_ping(p, &mut cursor).expect("send_ping");
                expected.push(Msg::Ping(p.clone()));
            }
            Out::Close(code, reason) => {
                session.close(CloseCode(*code), reason).expect("close");
                let frame = session.poll_transmit().expect("a close frame").to_vec();
                session.advance_transmit(frame.len());
                wire.extend_from_slice(&frame);
                expected.push(Msg::Close(Some((*code, reason.clone()))));
                break;
            }
        }
        wire.extend_from_slice(cursor.written());
    }
    (wire, expected)
}

#[test]
fn core_frames_read_by_tungstenite_as_the_same_messages_across_length_boundaries() {
    let mut rng = Rng(0xB0B);
    for size in [0, 1, 124, 125, 126, 127, 65535, 65536, 65537, 100_000] {
        let outs = [
            Out::Text(rng.text(size)),
            Out::Binary(rng.bytes(size)),
            Out::Ping(rng.bytes(size.min(125))),
        ];
        let (bytes, expected) = core_bytes(&outs, &mut rng);
        assert_eq!(bytes[1] & 0x80, 0x80, "masked");
        let form = match size {
            0..=125 => size as u8,
            126..=65535 => 126,
            _ => 127,
        };
        assert_eq!(bytes[1] & 0x7F, form, "length form for {size} bytes");
        let (got, error) =
            tungstenite_read(bytes, Role::Server, 200_000, Some(Rng(rng.next() | 1)));
        assert!(error.is_none(), "{size} bytes: {error:?}");
        assert_eq!(got, expected, "{size} bytes");
    }
}

#[test]
fn core_closes_read_by_tungstenite() {
    let mut rng = Rng(0xC105E);
    for (code, reason) in [
        (1000, ""),
        (1001, "bye"),
        (1009, "too big"),
        (4999, "é€𝄞"),
        (3000, "r".repeat(123).as_str()),
    ] {
        let outs = [
            Out::Text("{}".to_owned()),
            Out::Close(code, reason.to_owned()),
        ];
        let (bytes, expected) = core_bytes(&outs, &mut rng);
        let (got, error) = tungstenite_read(bytes, Role::Server, 1000, None);
        assert!(error.is_none(), "{code}: {error:?}");
        assert_eq!(got, expected);
    }
}

#[test]
fn random_core_streams_read_by_tungstenite_as_the_same_messages() {
    let mut rng = Rng(0x5EED_0002);
    for case in 0..150 {
        let mut outs = Vec::new();
        for _ in 0..1 + rng.below(8) {
            outs.push(match rng.below(4) {
                0 | 1 => Out::Text(rng.any_text()),
                2 => Out::Binary(rng.any_bytes()),
                _ => Out::Ping({
                    let n = rng.below(126);
                    rng.bytes(n)
                }),
            });
        }
        if rng.chance(3) {
            outs.push(Out::Close(1000 + rng.below(4) as u16, {
                let n = rng.below(60);
                rng.text(n)
            }));
        }
        let (bytes, expected) = core_bytes(&outs, &mut rng);
        let (got, error) =
            tungstenite_read(bytes, Role::Server, 200_000, Some(Rng(rng.next() | 1)));
        assert!(error.is_none(), "case {case}: {error:?}");
        assert_eq!(got, expected, "case {case}");
    }
}

// ------------------------------------------------------------------------------------
// Malformed server input
// ------------------------------------------------------------------------------------

fn frame(first: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![first];
    match payload.len() {
        n if n < 126 => out.push(n as u8),
        n if n < 65536 => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
    out
}

/// The core's decoder (buffer of `max`) on `bytes`, whole and byte by byte: the same
/// messages and error either way.
fn core_error(bytes: &[u8], max: usize) -> (Vec<Msg>, Error) {
    let whole = {
        let mut rng = Rng(1);
        core_decode(bytes, max, &mut rng).expect_err("the core refuses")
    };
    let mut decoder = Decoder::new(vec![0u8; max]);
    let mut msgs = Vec::new();
    for byte in bytes.chunks(1) {
        let mut piece = byte;
        loop {
            match decoder.decode(piece) {
                Err(e) => {
                    assert_eq!((msgs, e), whole, "byte at a time");
                    return whole;
                }
                Ok((_, None)) => break,
                Ok((used, Some(m))) => {
                    msgs.push(Msg::from_core(m));
                    piece = &piece[used..];
                }
            }
        }
    }
    panic!("byte at a time, the core accepts what it refuses whole");
}

#[test]
fn malformed_server_input_is_refused_by_both() {
    let text_a = frame(0x81, b"a");
    let cases: Vec<(&str, Vec<u8>, usize, Error)> = vec![
        (
            "RSV1",
            [text_a.clone(), frame(0xC1, b"b")].concat(),
            64,
            Error::ReservedBits { bits: 4 },
        ),
        (
            "RSV2",
            frame(0xA1, b"b"),
            64,
            Error::ReservedBits { bits: 2 },
        ),
        (
            "RSV3",
            frame(0x91, b"b"),
            64,
            Error::ReservedBits { bits: 1 },
        ),
        (
            "masked server frame",
            vec![0x81, 0x81, 1, 2, 3, 4, b'a' ^ 1],
            64,
            Error::MaskedServerFrame,
        ),
        (
            "bad UTF-8 text",
            frame(0x81, &[0xC3, 0x28]),
            64,
            Error::InvalidUtf8,
        ),
        (
            "UTF-8 truncated at the end of a message",
            [frame(0x01, b"ok\xE2\x82"), frame(0x80, b"")].concat(),
            64,
            Error::InvalidUtf8,
        ),
        (
            "bad UTF-8 inside a fragment",
            [frame(0x01, b"ok\xFF"), frame(0x80, b"x")].concat(),
            64,
            Error::InvalidUtf8,
        ),
        (
            "bad UTF-8 close reason",
            frame(0x88, &[0x03, 0xE8, 0xFF, 0xFE]),
            64,
            Error::InvalidUtf8,
        ),
        (
            "ping of 126 bytes",
            frame(0x89, &[0; 126]),
            64,
            Error::ControlTooLong { len: 126 },
        ),
        (
            "close of 126 bytes",
            frame(0x88, &[&[0x03, 0xE8][..], &[b'r'; 124]].concat()),
            64,
            Error::ControlTooLong { len: 126 },
        ),
        (
            "fragmented ping",
            [frame(0x09, b"p"), frame(0x80, b"")].concat(),
            64,
            Error::FragmentedControl,
        ),
        (
            "continuation without start",
            frame(0x80, b"a"),
            64,
            Error::UnexpectedContinuation,
        ),
        (
            "new message inside a fragmented one",
            [frame(0x01, b"a"), frame(0x81, b"b")].concat(),
            64,
            Error::ExpectedContinuation,
        ),
        (
            "data opcode 3",
            frame(0x83, b"a"),
            64,
            Error::UnknownOpcode { opcode: 3 },
        ),
        (
            "control opcode 0xB",
            frame(0x8B, b""),
            64,
            Error::UnknownOpcode { opcode: 0xB },
        ),
        (
            "close body of 1 byte",
            frame(0x88, &[0x03]),
            64,
            Error::TruncatedCloseCode,
        ),
        (
            "message over the limit",
            frame(0x82, &[0; 65]),
            64,
            Error::MessageTooLarge { len: 65, max: 64 },
        ),
        (
            "fragments over the limit",
            [frame(0x02, &[0; 40]), frame(0x80, &[0; 40])].concat(),
            64,
            Error::MessageTooLarge { len: 80, max: 64 },
        ),
    ];
    for (name, bytes, max, error) in cases {
        let (core_msgs, core_err) = core_error(&bytes, max);
        assert_eq!(core_err, error, "{name}");
        let (t_msgs, t_err) = tungstenite_read(bytes.clone(), Role::Client, max, None);
        assert!(t_err.is_some(), "{name}: tungstenite accepts ({t_msgs:?})");
        assert_eq!(core_msgs, t_msgs, "{name}: messages before the error");
    }
}

#[test]
fn where_tungstenite_is_lenient_the_core_refuses() {
    // Non-minimal lengths: RFC 6455 requires the minimal form; the core refuses the
    // frame, tungstenite takes it.
    let mut short_in_16 = vec![0x81, 126, 0, 5];
    short_in_16.extend_from_slice(b"hello");
    let mut short_in_64 = vec![0x82, 127, 0, 0, 0, 0, 0, 0, 1, 0];
    short_in_64.extend_from_slice(&[9; 256]);
    for (bytes, len) in [(short_in_16, 5), (short_in_64, 256)] {
        assert_eq!(
            core_error(&bytes, 1000),
            (vec![], Error::NonMinimalLength { len })
        );
        let (msgs, error) = tungstenite_read(bytes, Role::Client, 1000, None);
        assert!(error.is_none());
        assert_eq!(msgs.len(), 1);
    }
    // Close codes that may not be sent (1005, 1006, 1015, unassigned, out of range): the
    // core fails the connection; tungstenite reports a 1002 close instead of the frame.
    for code in [0u16, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535] {
        let bytes = frame(0x88, &[&code.to_be_bytes()[..], b"why"].concat());
        assert_eq!(
            core_error(&bytes, 64),
            (vec![], Error::InvalidCloseCode { code })
        );
        let (msgs, error) = tungstenite_read(bytes, Role::Client, 64, None);
        assert!(error.is_none(), "{code}");
        let replaced = Msg::Close(Some((1002, "Protocol violation".to_owned())));
        assert_eq!(msgs, [replaced], "{code}");
    }
    // 1014 (bad gateway) is sendable for the core, not for tungstenite 0.27.
    let bytes = frame(0x88, &[&1014u16.to_be_bytes()[..], b"gw"].concat());
    let mut rng = Rng(3);
    assert_eq!(
        core_decode(&bytes, 64, &mut rng),
        Ok(vec![Msg::Close(Some((1014, "gw".to_owned())))])
    );
    let (msgs, _) = tungstenite_read(bytes, Role::Client, 64, None);
    assert_eq!(
        msgs,
        [Msg::Close(Some((1002, "Protocol violation".to_owned())))]
    );
}

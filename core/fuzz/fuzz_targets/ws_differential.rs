//! Differential: the core's WebSocket `Decoder` against tungstenite (an independent
//! RFC 6455 implementation, client role, reading the same server bytes from memory).
//!
//! Input: `[flags][seed: 4 bytes][payload…]`
//! - flags bits 0-1: receive buffer (the largest message) 16 / 125 / 1000 / 70 000 bytes;
//!   tungstenite gets the same message limit and a frame limit of at least 125.
//! - flags bit 2: 0 = the payload is the byte stream as is; 1 = the payload describes
//!   frames built here (opcode, FIN, reserved bits, mask, minimal or not length form,
//!   length, payload bytes from the input: a frame may be cut short by the end of input).
//! - seed: where the core's input is split; its first byte picks the kind of split
//!   (`chosen_pieces`).
//!
//! Both decoders run until the end of the input, their first error, or the first close
//! frame (after which nothing is decoded: tungstenite refuses frames after a close, the
//! core's `Session` ignores them). Each run ends `Eof`, `Closed` or `Error`, after a list
//! of messages (text, binary, ping, pong, close with code and reason).
//!
//! Property: both accept or both reject, with the same messages before that, except for
//! these precisely delimited leniencies of tungstenite 0.27 (and a timing difference):
//! 1. Non-minimal lengths (a 16-bit length below 126, a 64-bit one below 65 536): the core
//!    rejects the frame (`NonMinimalLength`); tungstenite accepts it. Checked: the core's
//!    messages before it are a prefix of tungstenite's.
//! 2. Close codes tungstenite does not allow (`!CloseCode::is_allowed`: everything the
//!    core refuses, plus 1014): tungstenite does not fail, it delivers
//!    `Close(1002, "Protocol violation")` instead of the peer's frame. Checked: where the
//!    core fails with `InvalidCloseCode`, tungstenite delivers exactly that replacement
//!    close (or fails too, e.g. on a reason that is not UTF-8) after the same messages; a
//!    1014 close delivered by the core is compared as that replacement.
//! 3. Timing, not leniency: the core refuses a frame as soon as its header shows the
//!    fault (reserved bits, mask, opcode, fragmented or long control frame, non-minimal
//!    length, continuation sequencing, size limit); tungstenite reads the whole frame
//!    first, so when the input ends inside that frame it reports end of input. Checked:
//!    tungstenite fed the same input followed by enough zero bytes to complete any frame
//!    rejects it, after the same messages.
//!
//! `WS_DIFFERENTIAL_TRACE=1` prints both runs.
#![no_main]

use std::io::{self, Read, Write};

use benchlink_core::ws::{Decoder, Error as CoreError, Message as CoreMessage};
use benchlink_core_fuzz::{chosen_pieces, Rng};
use libfuzzer_sys::fuzz_target;
use tungstenite::error::{Error as TError, ProtocolError};
use tungstenite::protocol::frame::coding::CloseCode as TCloseCode;
use tungstenite::protocol::{Role, WebSocket, WebSocketConfig};
use tungstenite::Message as TMessage;

const BUFFERS: [usize; 4] = [16, 125, 1000, 70_000];

fuzz_target!(|input: &[u8]| {
    let [flags, s0, s1, s2, s3, payload @ ..] = input else {
        return;
    };
    let max = BUFFERS[usize::from(flags & 3)];
    let built;
    let stream: &[u8] = if flags & 4 != 0 {
        built = build_frames(payload);
        &built
    } else {
        payload
    };
    let mut rng = Rng::from_bytes(&[*s0, *s1, *s2, *s3]);
    let core = run_core(stream, max, *s0, &mut rng);
    let tung = run_tungstenite(stream, max);
    if std::env::var_os("WS_DIFFERENTIAL_TRACE").is_some() {
        eprintln!("core: {core:?}\ntungstenite: {tung:?}");
    }
    compare(stream, max, &core, &tung);
});

/// A message, owned, as both sides report it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Msg {
    Text(String),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<(u16, String)>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum End<E> {
    /// The input ran out (between frames or inside one).
    Eof,
    /// A close frame was delivered (the last message).
    Closed,
    Error(E),
}

#[derive(Debug)]
struct Run<E> {
    msgs: Vec<Msg>,
    end: End<E>,
}

/// tungstenite's view of a close code the core delivers (leniency 2).
fn tung_view(code: u16, reason: String) -> (u16, String) {
    if TCloseCode::from(code).is_allowed() {
        (code, reason)
    } else {
        (1002, "Protocol violation".to_owned())
    }
}

thread_local! {
    /// The core's receive buffer, allocated once and reused dirty (a fresh zeroed 70 KB
    /// allocation per execution cost a fifth of the target's time under ASAN; stale bytes
    /// from earlier inputs must not change what the decoder delivers).
    static RX: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; BUFFERS[3]]);
}

fn run_core(stream: &[u8], max: usize, split: u8, rng: &mut Rng) -> Run<CoreError> {
    RX.with(|rx| run_core_in(&mut rx.borrow_mut()[..max], stream, split, rng))
}

fn run_core_in(buf: &mut [u8], stream: &[u8], split: u8, rng: &mut Rng) -> Run<CoreError> {
    let mut decoder = Decoder::new(buf);
    let mut msgs = Vec::new();
    let mut offset = 0;
    for len in chosen_pieces(stream.len(), split, rng) {
        let mut piece = &stream[offset..offset + len];
        offset += len;
        loop {
            match decoder.decode(piece) {
                Err(e) => {
                    return Run {
                        msgs,
                        end: End::Error(e),
                    }
                }
                Ok((used, None)) => {
                    assert_eq!(used, piece.len());
                    break;
                }
                Ok((used, Some(message))) => {
                    piece = &piece[used..];
                    let msg = match message {
                        CoreMessage::Text(t) => Msg::Text(t.to_owned()),
                        CoreMessage::Binary(b) => Msg::Binary(b.to_vec()),
                        CoreMessage::Ping(b) => Msg::Ping(b.to_vec()),
                        CoreMessage::Pong(b) => Msg::Pong(b.to_vec()),
                        CoreMessage::Close(frame) => {
                            let close = frame.map(|f| tung_view(f.code.0, f.reason.to_owned()));
                            msgs.push(Msg::Close(close));
                            return Run {
                                msgs,
                                end: End::Closed,
                            };
                        }
                    };
                    msgs.push(msg);
                }
            }
        }
    }
    Run {
        msgs,
        end: End::Eof,
    }
}

/// The server's bytes to read, and a sink for what tungstenite answers (pongs, close).
struct Wire<'a> {
    input: &'a [u8],
}

impl Read for Wire<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for Wire<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn run_tungstenite(stream: &[u8], max: usize) -> Run<String> {
    let config = WebSocketConfig::default()
        .read_buffer_size(4096)
        .max_message_size(Some(max))
        .max_frame_size(Some(max.max(125)));
    let mut ws = WebSocket::from_raw_socket(Wire { input: stream }, Role::Client, Some(config));
    let mut msgs = Vec::new();
    loop {
        let msg = match ws.read() {
            Ok(TMessage::Text(t)) => Msg::Text(t.as_str().to_owned()),
            Ok(TMessage::Binary(b)) => Msg::Binary(b.to_vec()),
            Ok(TMessage::Ping(b)) => Msg::Ping(b.to_vec()),
            Ok(TMessage::Pong(b)) => Msg::Pong(b.to_vec()),
            Ok(TMessage::Close(frame)) => {
                let close = frame.map(|f| (u16::from(f.code), f.reason.as_str().to_owned()));
                msgs.push(Msg::Close(close));
                return Run {
                    msgs,
                    end: End::Closed,
                };
            }
            Ok(TMessage::Frame(_)) => unreachable!("read never returns raw frames"),
            Err(TError::Protocol(ProtocolError::ResetWithoutClosingHandshake)) => {
                return Run {
                    msgs,
                    end: End::Eof,
                };
            }
            Err(e) => {
                return Run {
                    msgs,
                    end: End::Error(e.to_string()),
                }
            }
        };
        msgs.push(msg);
    }
}

/// Faults the core finds in a frame header, before the payload.
fn header_level(e: &CoreError) -> bool {
    !matches!(
        e,
        CoreError::InvalidUtf8 | CoreError::InvalidCloseCode { .. } | CoreError::TruncatedCloseCode
    )
}

fn compare(stream: &[u8], max: usize, core: &Run<CoreError>, tung: &Run<String>) {
    let fail = |why: &str| -> ! {
        panic!("{why}\ncore: {core:?}\ntungstenite: {tung:?}");
    };
    match (&core.end, &tung.end) {
        // Leniency 1: tungstenite takes non-minimal lengths.
        (End::Error(CoreError::NonMinimalLength { .. }), _) => {
            if !tung.msgs.starts_with(&core.msgs) {
                fail("messages before a non-minimal length differ");
            }
        }
        // Leniency 2: tungstenite replaces a forbidden close code.
        (End::Error(CoreError::InvalidCloseCode { code }), End::Closed) => {
            let mut expected = core.msgs.clone();
            expected.push(Msg::Close(Some((1002, "Protocol violation".to_owned()))));
            assert!(
                !TCloseCode::from(*code).is_allowed(),
                "tungstenite allows {code}"
            );
            if tung.msgs != expected {
                fail("a forbidden close code is not replaced by 1002");
            }
        }
        // Timing: the core saw the fault in the header of a frame the input cuts short.
        (End::Error(e), End::Eof) if header_level(e) => {
            let mut padded = stream.to_vec();
            padded.resize(stream.len() + max.max(125) + 14, 0);
            let again = run_tungstenite(&padded, max);
            if again.msgs != core.msgs || !matches!(again.end, End::Error(_)) {
                panic!(
                    "tungstenite takes the frame the core refused ({e:?}) once it is complete\n\
                     core: {core:?}\ntungstenite (padded): {again:?}"
                );
            }
        }
        (End::Error(_), End::Error(_)) | (End::Eof, End::Eof) | (End::Closed, End::Closed) => {
            if core.msgs != tung.msgs {
                fail("different messages");
            }
        }
        _ => fail("one accepts what the other rejects"),
    }
}

/// Frames described by the payload; each frame:
/// `[flags][extra bytes as the flags ask][len: 1 or 2 bytes][payload]`, flags:
/// - bits 0-2: continuation, text, binary, close, ping, pong, text, or a raw opcode from
///   the next byte's low nibble;
/// - bit 3: FIN cleared; bit 4: length in a non-minimal form; bit 5: masked (a 4-byte key
///   from the input); bit 6: reserved bits from the next byte; bit 7: 16-bit length.
fn build_frames(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let next = |data: &mut &[u8]| -> u8 {
        let (first, rest) = data.split_first().map_or((0, &[][..]), |(f, r)| (*f, r));
        *data = rest;
        first
    };
    while !data.is_empty() {
        let flags = next(&mut data);
        let opcode = match flags & 7 {
            0 => 0x0,
            1 | 6 => 0x1,
            2 => 0x2,
            3 => 0x8,
            4 => 0x9,
            5 => 0xA,
            _ => next(&mut data) & 0x0F,
        };
        let fin = if flags & 8 == 0 { 0x80 } else { 0 };
        let rsv = if flags & 0x40 != 0 {
            next(&mut data) & 0x70
        } else {
            0
        };
        let mask = (flags & 0x20 != 0).then(|| {
            [
                next(&mut data),
                next(&mut data),
                next(&mut data),
                next(&mut data),
            ]
        });
        let len = if flags & 0x80 != 0 {
            usize::from(u16::from_be_bytes([next(&mut data), next(&mut data)]))
        } else {
            usize::from(next(&mut data))
        };
        out.push(fin | rsv | opcode);
        let masked = if mask.is_some() { 0x80 } else { 0 };
        match (len, flags & 0x10 != 0) {
            (n, false) if n < 126 => out.push(masked | n as u8),
            (n, nonmin) if n < 65536 && !(nonmin && n >= 126) => {
                out.push(masked | 126);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            (n, _) => {
                out.push(masked | 127);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        if let Some(key) = mask {
            out.extend_from_slice(&key);
        }
        let take = len.min(data.len());
        let (payload, rest) = data.split_at(take);
        data = rest;
        match mask {
            Some(key) => out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4])),
            None => out.extend_from_slice(payload),
        }
    }
    out
}

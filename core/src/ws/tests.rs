//! Tests of the WebSocket codec: every input split for the decoder, RFC 6455 examples,
//! length boundaries, every error, the session's replies and the handshake bytes.

use super::*;
use crate::http::{Cursor, EncodeError, Event, Limits, ResponseDecoder};
use std::string::{String, ToString};
use std::vec::Vec;
use std::{format, vec};

/// An owned [`Message`] or the error that ended decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Text(String),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<(u16, String)>),
    Err(Error),
}

impl From<Message<'_>> for Ev {
    fn from(m: Message<'_>) -> Self {
        match m {
            Message::Text(t) => Ev::Text(t.into()),
            Message::Binary(b) => Ev::Binary(b.into()),
            Message::Ping(b) => Ev::Ping(b.into()),
            Message::Pong(b) => Ev::Pong(b.into()),
            Message::Close(c) => Ev::Close(c.map(|c| (c.code.0, c.reason.into()))),
        }
    }
}

fn text(s: &str) -> Ev {
    Ev::Text(s.into())
}

/// Feeds `chunks` to a decoder with a `max`-byte buffer; stops at the first error.
fn run(chunks: &[&[u8]], max: usize) -> Vec<Ev> {
    let mut buf = vec![0u8; max];
    let mut decoder = Decoder::new(&mut buf);
    let mut out = Vec::new();
    for chunk in chunks {
        let mut input = *chunk;
        loop {
            match decoder.decode(input) {
                Err(e) => {
                    out.push(Ev::Err(e));
                    // Errors are sticky.
                    assert_eq!(decoder.decode(b"\x81\x00"), Err(e));
                    return out;
                }
                Ok((used, None)) => {
                    assert_eq!(used, input.len(), "None only once all input is used");
                    break;
                }
                Ok((used, Some(m))) => {
                    out.push(m.into());
                    input = &input[used..];
                }
            }
        }
    }
    out
}

/// The events for `input` whole, checked equal for every two-way split and byte at a
/// time (and every three-way split when `three` is set).
fn every_split(input: &[u8], max: usize, three: bool) -> Vec<Ev> {
    let whole = run(&[input], max);
    for i in 0..=input.len() {
        assert_eq!(run(&[&input[..i], &input[i..]], max), whole, "split at {i}");
        if three {
            for j in i..=input.len() {
                let parts = [&input[..i], &input[i..j], &input[j..]];
                assert_eq!(run(&parts, max), whole, "split at {i}, {j}");
            }
        }
    }
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(run(&bytes, max), whole, "one byte at a time");
    whole
}

/// An unmasked server frame.
fn server_frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![if fin { 0x80 } else { 0 } | opcode];
    match payload.len() {
        n @ 0..=125 => out.push(n as u8),
        n @ 126..=0xFFFF => {
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

/// A client frame parsed independently of the encoder: (fin, opcode, mask, unmasked
/// payload, frame length).
fn parse_client(bytes: &[u8]) -> (bool, u8, [u8; 4], Vec<u8>, usize) {
    assert!(bytes[1] & 0x80 != 0, "client frames are masked");
    let (len, at) = match bytes[1] & 0x7F {
        126 => (u16::from_be_bytes([bytes[2], bytes[3]]) as usize, 4),
        127 => (
            u64::from_be_bytes(bytes[2..10].try_into().unwrap()) as usize,
            10,
        ),
        n => (n as usize, 2),
    };
    let mask: [u8; 4] = bytes[at..at + 4].try_into().unwrap();
    let payload = bytes[at + 4..at + 4 + len]
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ mask[i % 4])
        .collect();
    (
        bytes[0] & 0x80 != 0,
        bytes[0] & 0x0F,
        mask,
        payload,
        at + 4 + len,
    )
}

// ---------------------------------------------------------------------------------------
// Decoder

#[test]
fn rfc_5_7_single_frame_unmasked_text() {
    let wire = [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
    assert_eq!(every_split(&wire, 16, true), [text("Hello")]);
}

#[test]
fn rfc_5_7_masked_frames_from_a_server_are_refused() {
    let hello = [
        0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
    ];
    assert_eq!(
        every_split(&hello, 16, true),
        [Ev::Err(Error::MaskedServerFrame)]
    );
    let pong = [
        0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
    ];
    assert_eq!(
        every_split(&pong, 16, false),
        [Ev::Err(Error::MaskedServerFrame)]
    );
}

#[test]
fn rfc_5_7_fragmented_text() {
    let wire = [0x01, 0x03, 0x48, 0x65, 0x6c, 0x80, 0x02, 0x6c, 0x6f];
    assert_eq!(every_split(&wire, 5, true), [text("Hello")]);
}

#[test]
fn rfc_5_7_unmasked_ping() {
    let wire = [0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
    assert_eq!(every_split(&wire, 0, true), [Ev::Ping(b"Hello".to_vec())]);
}

#[test]
fn rfc_5_7_256_byte_and_64_kib_binary() {
    let payload: Vec<u8> = (0..=255u8).collect();
    let wire = server_frame(true, 2, &payload);
    assert_eq!(wire[..4], [0x82, 0x7E, 0x01, 0x00]);
    assert_eq!(every_split(&wire, 256, false), [Ev::Binary(payload)]);

    let big: Vec<u8> = (0..65536u32).map(|i| (i * 7) as u8).collect();
    let wire = server_frame(true, 2, &big);
    assert_eq!(wire[..10], [0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0]);
    let whole = run(&[&wire], 65536);
    assert_eq!(whole, [Ev::Binary(big.clone())]);
    for i in (0..=12).chain([4096, wire.len() - 1, wire.len()]) {
        assert_eq!(run(&[&wire[..i], &wire[i..]], 65536), whole, "split at {i}");
    }
    let bytes: Vec<&[u8]> = wire.chunks(1).collect();
    assert_eq!(run(&bytes, 65536), whole);
    let uneven: Vec<&[u8]> = wire.chunks(1000).collect();
    assert_eq!(run(&uneven, 65536), whole);
    // One byte short of the buffer it needs.
    assert_eq!(
        run(&[&wire], 65535),
        [Ev::Err(Error::MessageTooLarge {
            len: 65536,
            max: 65535
        })]
    );
}

/// A stream with every kind of frame, a fragmented text message whose fragments split a
/// UTF-8 character, and control frames between the fragments.
fn mixed_stream() -> (Vec<u8>, Vec<Ev>) {
    let mut wire = Vec::new();
    wire.extend(server_frame(true, 1, b"{\"a\":1}"));
    wire.extend(server_frame(false, 1, "H\u{e9}".as_bytes().split_at(2).0)); // "H\xc3"
    wire.extend(server_frame(true, 9, b"ping!"));
    wire.extend(server_frame(false, 0, &[0xa9, b'l']));
    wire.extend(server_frame(true, 10, b""));
    wire.extend(server_frame(false, 0, b""));
    wire.extend(server_frame(true, 0, b"lo"));
    wire.extend(server_frame(true, 2, &[0, 1, 2]));
    wire.extend(server_frame(true, 1, b""));
    wire.extend(server_frame(false, 2, &[9]));
    wire.extend(server_frame(true, 0, &[8]));
    wire.extend(server_frame(true, 8, b"\x03\xe8bye"));
    let expected = vec![
        text("{\"a\":1}"),
        Ev::Ping(b"ping!".to_vec()),
        Ev::Pong(Vec::new()),
        text("H\u{e9}llo"),
        Ev::Binary(vec![0, 1, 2]),
        text(""),
        Ev::Binary(vec![9, 8]),
        Ev::Close(Some((1000, "bye".into()))),
    ];
    (wire, expected)
}

#[test]
fn mixed_stream_every_split() {
    let (wire, expected) = mixed_stream();
    assert_eq!(every_split(&wire, 16, true), expected);
}

#[test]
fn whole_unfragmented_frames_are_borrowed_from_the_input() {
    let wire = server_frame(true, 1, b"zero copy");
    let mut buf = [0u8; 16];
    let mut decoder = Decoder::new(&mut buf);
    let (_, m) = decoder.decode(&wire).unwrap();
    let Some(Message::Text(t)) = m else { panic!() };
    assert_eq!(t.as_ptr(), wire[2..].as_ptr());
    // A message larger than the buffer is refused even when it lies whole in the input.
    let wire = server_frame(true, 1, &[b'x'; 17]);
    decoder.reset();
    assert_eq!(
        decoder.decode(&wire),
        Err(Error::MessageTooLarge { len: 17, max: 16 })
    );
}

#[test]
fn control_frame_limits() {
    let max_ping = server_frame(true, 9, &[7; 125]);
    assert_eq!(every_split(&max_ping, 0, false), [Ev::Ping(vec![7; 125])]);
    // 126 bytes needs the 16-bit form, which a control frame may not use.
    let mut long = vec![0x89, 0x7E, 0x00, 0x7E];
    long.extend([0; 126]);
    assert_eq!(
        every_split(&long, 0, false),
        [Ev::Err(Error::ControlTooLong { len: 126 })]
    );
    assert_eq!(
        run(&[&[0x88, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0]], 0),
        [Ev::Err(Error::ControlTooLong { len: 65536 })]
    );
    assert_eq!(
        every_split(&[0x09, 0x00], 0, false),
        [Ev::Err(Error::FragmentedControl)]
    );
    assert_eq!(
        every_split(&[0x08, 0x00], 0, false),
        [Ev::Err(Error::FragmentedControl)]
    );
}

#[test]
fn header_errors() {
    let cases: [(&[u8], Error); 10] = [
        (&[0xC1, 0x00], Error::ReservedBits { bits: 4 }),
        (&[0x91, 0x00], Error::ReservedBits { bits: 1 }),
        (&[0xF1, 0x00], Error::ReservedBits { bits: 7 }),
        (&[0x83, 0x00], Error::UnknownOpcode { opcode: 3 }),
        (&[0x87, 0x00], Error::UnknownOpcode { opcode: 7 }),
        (&[0x8B, 0x00], Error::UnknownOpcode { opcode: 0xB }),
        (&[0x8F, 0x00], Error::UnknownOpcode { opcode: 0xF }),
        (&[0x80, 0x00], Error::UnexpectedContinuation),
        (&[0x00, 0x01, b'x'], Error::UnexpectedContinuation),
        (&[0x82, 0x80, 0, 0, 0, 0], Error::MaskedServerFrame),
    ];
    for (wire, e) in cases {
        assert_eq!(every_split(wire, 8, false), [Ev::Err(e)], "{wire:02x?}");
    }
}

#[test]
fn non_minimal_lengths_are_refused() {
    let mut short16 = vec![0x82, 0x7E, 0x00, 0x7D];
    short16.extend([0; 125]);
    assert_eq!(
        every_split(&short16, 200, false),
        [Ev::Err(Error::NonMinimalLength { len: 125 })]
    );
    let mut short64 = vec![0x82, 0x7F, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF];
    short64.extend([0; 8]);
    assert_eq!(
        every_split(&short64, 1 << 17, false),
        [Ev::Err(Error::NonMinimalLength { len: 0xFFFF })]
    );
    // The smallest lengths of each form are accepted.
    let mut min16 = vec![0x82, 0x7E, 0x00, 0x7E];
    min16.extend([1; 126]);
    assert_eq!(run(&[&min16], 126), [Ev::Binary(vec![1; 126])]);
    // A 64-bit length with the top bit set can never fit a buffer.
    let huge = [0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        every_split(&huge, 8, false),
        [Ev::Err(Error::MessageTooLarge {
            len: 1 << 63,
            max: 8
        })]
    );
}

#[test]
fn fragment_sequencing_errors() {
    let mut wire = server_frame(false, 1, b"a");
    wire.extend(server_frame(true, 1, b"b"));
    assert_eq!(
        every_split(&wire, 8, true),
        [Ev::Err(Error::ExpectedContinuation)]
    );
    let mut wire = server_frame(false, 2, b"a");
    wire.extend(server_frame(false, 1, b"b"));
    assert_eq!(
        every_split(&wire, 8, true),
        [Ev::Err(Error::ExpectedContinuation)]
    );
    // A control frame between fragments is fine, a finished message resets the sequence.
    let mut wire = server_frame(false, 2, b"a");
    wire.extend(server_frame(true, 9, b""));
    wire.extend(server_frame(true, 0, b"b"));
    wire.extend(server_frame(true, 0, b"c"));
    assert_eq!(
        every_split(&wire, 8, true),
        [
            Ev::Ping(vec![]),
            Ev::Binary(b"ab".to_vec()),
            Ev::Err(Error::UnexpectedContinuation)
        ]
    );
}

#[test]
fn message_size_limit() {
    // Exactly the buffer: accepted, fragmented or not.
    assert_eq!(
        run(&[&server_frame(true, 2, b"abcd")], 4),
        [Ev::Binary(b"abcd".to_vec())]
    );
    let mut wire = server_frame(false, 1, b"abc");
    wire.extend(server_frame(true, 0, b"d"));
    assert_eq!(every_split(&wire, 4, true), [text("abcd")]);
    // One more byte: refused at the header that announces it.
    let wire = server_frame(true, 2, b"abcde");
    assert_eq!(
        every_split(&wire, 4, true),
        [Ev::Err(Error::MessageTooLarge { len: 5, max: 4 })]
    );
    let mut wire = server_frame(false, 1, b"abc");
    wire.extend(server_frame(true, 9, b"p"));
    wire.extend(server_frame(true, 0, b"de"));
    assert_eq!(
        every_split(&wire, 4, true),
        [
            Ev::Ping(b"p".to_vec()),
            Ev::Err(Error::MessageTooLarge { len: 5, max: 4 })
        ]
    );
    // Control frames do not count against the message buffer.
    assert_eq!(
        run(&[&server_frame(true, 9, b"12345")], 0),
        [Ev::Ping(b"12345".to_vec())]
    );
}

#[test]
fn text_must_be_utf8() {
    let wire = server_frame(true, 1, &[b'a', 0xff]);
    assert_eq!(every_split(&wire, 8, true), [Ev::Err(Error::InvalidUtf8)]);
    // Checked per fragment: the error comes before the message is complete.
    let first = server_frame(false, 1, &[0xc3, 0x28]);
    assert_eq!(every_split(&first, 8, true), [Ev::Err(Error::InvalidUtf8)]);
    // A character may straddle fragments, but not end the message.
    let mut cut = server_frame(false, 1, &[b'a', 0xe2, 0x82]);
    assert_eq!(run(&[&cut], 8), []);
    cut.extend(server_frame(true, 0, b""));
    assert_eq!(every_split(&cut, 8, true), [Ev::Err(Error::InvalidUtf8)]);
    let mut euro = server_frame(false, 1, &[b'a', 0xe2]);
    euro.extend(server_frame(false, 0, &[0x82]));
    euro.extend(server_frame(true, 0, &[0xac, b'!']));
    assert_eq!(every_split(&euro, 8, true), [text("a\u{20ac}!")]);
    // Binary messages are not checked.
    assert_eq!(
        run(&[&server_frame(true, 2, &[0xff])], 8),
        [Ev::Binary(vec![0xff])]
    );
}

#[test]
fn close_frames() {
    assert_eq!(every_split(&[0x88, 0x00], 0, false), [Ev::Close(None)]);
    assert_eq!(
        every_split(&[0x88, 0x01, 0x03], 0, false),
        [Ev::Err(Error::TruncatedCloseCode)]
    );
    for code in [
        1000u16, 1001, 1002, 1003, 1007, 1011, 1012, 1014, 3000, 4999,
    ] {
        let mut body = code.to_be_bytes().to_vec();
        body.extend_from_slice("r\u{e9}".as_bytes());
        let wire = server_frame(true, 8, &body);
        assert_eq!(
            run(&[&wire], 0),
            [Ev::Close(Some((code, "r\u{e9}".into())))]
        );
    }
    for code in [0u16, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535] {
        let wire = server_frame(true, 8, &code.to_be_bytes());
        assert_eq!(
            every_split(&wire, 0, false),
            [Ev::Err(Error::InvalidCloseCode { code })]
        );
    }
    let wire = server_frame(true, 8, &[0x03, 0xe8, 0xc3]);
    assert_eq!(every_split(&wire, 0, false), [Ev::Err(Error::InvalidUtf8)]);
}

#[test]
fn reset_drops_a_partial_message() {
    let mut buf = [0u8; 8];
    let mut decoder = Decoder::new(&mut buf);
    assert_eq!(
        decoder.decode(&server_frame(false, 1, b"ab")).unwrap().1,
        None
    );
    assert_eq!(
        decoder.decode(&[0x81, 0x05, b'x']).unwrap_err(),
        Error::ExpectedContinuation
    );
    decoder.reset();
    assert_eq!(decoder.decode(&[0x81, 0x01]).unwrap(), (2, None));
    decoder.reset();
    assert_eq!(
        decoder.decode(&[0x81, 0x01, b'y']).unwrap().1,
        Some(Message::Text("y"))
    );
}

// ---------------------------------------------------------------------------------------
// Encoder

#[test]
fn rfc_5_7_masked_hello() {
    let mut buf = [0u8; 32];
    let mut out = Cursor::new(&mut buf);
    encode_frame(Opcode::Text, b"Hello", [0x37, 0xfa, 0x21, 0x3d], &mut out).unwrap();
    assert_eq!(
        out.written(),
        [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58]
    );
}

#[test]
fn length_boundaries() {
    let mask = [0xde, 0xad, 0xbe, 0xef];
    for (len, header) in [
        (0usize, &[0x82u8, 0x80][..]),
        (125, &[0x82, 0xFD]),
        (126, &[0x82, 0xFE, 0x00, 0x7E]),
        (65535, &[0x82, 0xFE, 0xFF, 0xFF]),
        (65536, &[0x82, 0xFF, 0, 0, 0, 0, 0, 1, 0, 0]),
    ] {
        let payload: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
        let mut buf = vec![0u8; len + MAX_HEADER_LEN];
        let mut out = Cursor::new(&mut buf);
        encode_frame(Opcode::Binary, &payload, mask, &mut out).unwrap();
        let frame = out.written().to_vec();
        assert_eq!(&frame[..header.len()], header, "len {len}");
        assert_eq!(&frame[header.len()..header.len() + 4], mask);
        assert_eq!(frame.len(), header.len() + 4 + len);
        assert_eq!(
            FrameHeader::new(Opcode::Binary, len as u64).encoded_len(),
            header.len() + 4
        );
        let (fin, opcode, got_mask, got, used) = parse_client(&frame);
        assert_eq!((fin, opcode, got_mask, used), (true, 2, mask, frame.len()));
        assert_eq!(got, payload);

        // In place gives the same bytes.
        let mut place = vec![0u8; MAX_HEADER_LEN + len];
        place[MAX_HEADER_LEN..].copy_from_slice(&payload);
        let framed = encode_in_place(Opcode::Binary, &mut place, len, mask).unwrap();
        assert_eq!(framed, &frame[..]);

        // One byte too few for the whole frame.
        let mut small = vec![0u8; frame.len() - 1];
        let capacity = small.len();
        assert_eq!(
            encode_frame(Opcode::Binary, &payload, mask, &mut Cursor::new(&mut small)),
            Err(SendError::Encode(EncodeError::BufferTooSmall { capacity }))
        );
    }
}

#[test]
fn masking_in_pieces_matches_masking_whole() {
    let mask = [1, 2, 3, 250];
    let data: Vec<u8> = (0..=200u8).collect();
    let mut whole = data.clone();
    apply_mask(mask, 0, &mut whole);
    for cut in [0, 1, 2, 3, 5, 64, 199, 201] {
        let mut pieces = data.clone();
        let (a, b) = pieces.split_at_mut(cut);
        apply_mask(mask, 0, a);
        apply_mask(mask, cut, b);
        assert_eq!(pieces, whole, "cut at {cut}");
    }
    apply_mask(mask, 0, &mut whole);
    assert_eq!(whole, data);
}

#[test]
fn control_frame_encoding() {
    let mut buf = [0u8; 256];
    let mut out = Cursor::new(&mut buf);
    encode_frame(Opcode::Ping, &[5; 125], [0; 4], &mut out).unwrap();
    assert_eq!(out.len(), MAX_CONTROL_FRAME);
    let mut out = Cursor::new(&mut buf);
    assert_eq!(
        encode_frame(Opcode::Pong, &[5; 126], [0; 4], &mut out),
        Err(SendError::ControlTooLong { len: 126 })
    );
    let mut place = [0u8; MAX_HEADER_LEN + 126];
    assert_eq!(
        encode_in_place(Opcode::Close, &mut place, 126, [0; 4]),
        Err(SendError::ControlTooLong { len: 126 })
    );
    assert_eq!(
        encode_in_place(Opcode::Text, &mut place, 127, [0; 4]),
        Err(SendError::Encode(EncodeError::BufferTooSmall {
            capacity: MAX_HEADER_LEN + 126
        }))
    );
    let reason = "x".repeat(MAX_CLOSE_REASON);
    let mut out = Cursor::new(&mut buf);
    let close = CloseFrame {
        code: CloseCode(4000),
        reason: &reason,
    };
    encode_close(Some(close), [9; 4], &mut out).unwrap();
    let (_, opcode, _, payload, _) = parse_client(out.written());
    assert_eq!(
        (opcode, payload.len(), &payload[..2]),
        (8, 125, &[0x0f, 0xa0][..])
    );
    let long = "x".repeat(MAX_CLOSE_REASON + 1);
    let close = CloseFrame {
        code: CloseCode::NORMAL,
        reason: &long,
    };
    let mut out = Cursor::new(&mut buf);
    assert_eq!(
        encode_close(Some(close), [0; 4], &mut out),
        Err(SendError::CloseReasonTooLong { len: 124 })
    );
    for code in [1005, 1006, 1015, 999, 5000] {
        let close = CloseFrame {
            code: CloseCode(code),
            reason: "",
        };
        assert_eq!(
            encode_close(Some(close), [0; 4], &mut out),
            Err(SendError::InvalidCloseCode { code })
        );
    }
    let mut out = Cursor::new(&mut buf);
    encode_close(None, [0; 4], &mut out).unwrap();
    assert_eq!(out.written(), [0x88, 0x80, 0, 0, 0, 0]);
}

#[test]
fn fragmented_client_frames_from_headers() {
    let mut buf = [0u8; 32];
    let mut out = Cursor::new(&mut buf);
    FrameHeader {
        fin: false,
        opcode: Opcode::Text,
        payload_len: 3,
    }
    .encode([0; 4], &mut out)
    .unwrap();
    out.push(b"Hel").unwrap();
    FrameHeader {
        fin: true,
        opcode: Opcode::Continuation,
        payload_len: 2,
    }
    .encode([0; 4], &mut out)
    .unwrap();
    out.push(b"lo").unwrap();
    assert_eq!(out.written(), b"\x01\x83\0\0\0\0Hel\x80\x82\0\0\0\0lo");
}

// ---------------------------------------------------------------------------------------
// Endpoint and handshake

#[test]
fn endpoints() {
    let ok = |url: &str| {
        let e = Endpoint::parse(url).unwrap();
        (e.host.to_string(), e.port, e.tls, e.path.to_string())
    };
    let t = |h: &str, p: u16, tls: bool, path: &str| (h.to_string(), p, tls, path.to_string());
    assert_eq!(ok("ws://h"), t("h", 80, false, ""));
    assert_eq!(ok("wss://h"), t("h", 443, true, ""));
    assert_eq!(
        ok("Wss://H.example:8443/a/b/"),
        t("H.example", 8443, true, "/a/b/")
    );
    assert_eq!(ok("ws://h:/x"), t("h", 80, false, "/x"));
    assert_eq!(ok("ws://10.0.0.1:65535"), t("10.0.0.1", 65535, false, ""));
    assert_eq!(ok("wss://[2001:db8::1]"), t("2001:db8::1", 443, true, ""));
    assert_eq!(
        ok("wss://[::ffff:1.2.3.4]:1/p"),
        t("::ffff:1.2.3.4", 1, true, "/p")
    );
    assert_eq!(ok("ws://h/a%20b"), t("h", 80, false, "/a%20b"));

    let err = |url| Endpoint::parse(url).unwrap_err();
    for url in ["http://h", "https://h", "ws:/h", "h", "", "wss:", "ftp://h"] {
        assert_eq!(err(url), UrlError::UnsupportedScheme, "{url}");
    }
    assert_eq!(err("ws://"), UrlError::MissingHost);
    assert_eq!(err("ws:///path"), UrlError::MissingHost);
    assert_eq!(err("ws://:80"), UrlError::MissingHost);
    assert_eq!(err("ws://h h"), UrlError::InvalidHost);
    assert_eq!(err("ws://a:b:c"), UrlError::InvalidHost);
    assert_eq!(err("ws://h\u{e9}"), UrlError::InvalidHost);
    assert_eq!(err("ws://[::1"), UrlError::InvalidHost);
    assert_eq!(err("ws://[]"), UrlError::InvalidHost);
    assert_eq!(err("ws://[zz::1]"), UrlError::InvalidHost);
    assert_eq!(err("ws://[::1]x"), UrlError::InvalidHost);
    assert_eq!(err("ws://h:0"), UrlError::InvalidPort);
    assert_eq!(err("ws://h:65536"), UrlError::InvalidPort);
    assert_eq!(err("ws://h:123456"), UrlError::InvalidPort);
    assert_eq!(err("ws://h:8x"), UrlError::InvalidPort);
    assert_eq!(err("ws://[::1]:-1"), UrlError::InvalidPort);
    assert_eq!(err("ws://u:p@h"), UrlError::UserInfo);
    assert_eq!(err("ws://h?appkey=1"), UrlError::Query);
    assert_eq!(err("ws://h/v2?x#y"), UrlError::Query);
    assert_eq!(err("ws://h/#top"), UrlError::Fragment);
    assert_eq!(err("ws://h/a b"), UrlError::InvalidPath);
    assert_eq!(err("ws://h/\u{e9}"), UrlError::InvalidPath);
    for e in [UrlError::Query, UrlError::InvalidPort] {
        assert!(!e.to_string().is_empty());
    }
}

fn request_bytes(url: &str, appkey: &str) -> Result<String, EncodeError> {
    let key = Key::new(*b"the sample nonce");
    let request = UpgradeRequest {
        endpoint: Endpoint::parse(url).unwrap(),
        appkey,
        key: &key,
        origin: None,
        protocol: None,
        user_agent: None,
    };
    let mut buf = [0u8; 1024];
    let mut out = Cursor::new(&mut buf);
    request.encode(&mut out)?;
    Ok(String::from_utf8(out.written().to_vec()).unwrap())
}

fn request_target(url: &str) -> String {
    let bytes = request_bytes(url, "K").unwrap();
    bytes.split(' ').nth(1).unwrap().to_string()
}

#[test]
fn rfc_1_3_accept_example() {
    let key = Key::new(*b"the sample nonce");
    assert_eq!(key.as_str(), "dGhlIHNhbXBsZSBub25jZQ==");
    assert_eq!(key.accept().as_str(), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

#[test]
fn request_path_rules() {
    for (url, target) in [
        ("ws://h", "/v2?appkey=K"),
        ("ws://h/", "/v2?appkey=K"),
        ("ws://h/foo", "/foo/v2?appkey=K"),
        ("ws://h/foo/", "/foo/v2?appkey=K"),
        ("ws://h/foo/bar", "/foo/bar/v2?appkey=K"),
        ("ws://h/v2", "/v2?appkey=K"),
        ("ws://h/v2/", "/v2?appkey=K"),
        ("ws://h/foo/v2", "/foo/v2?appkey=K"),
        ("ws://h/v1", "/v1/v2?appkey=K"),
        ("ws://h/foov2", "/foov2/v2?appkey=K"),
    ] {
        assert_eq!(request_target(url), target, "{url}");
    }
    let encoded = request_bytes("ws://h", "a b/c&d=\u{e9}").unwrap();
    assert!(encoded.starts_with("GET /v2?appkey=a+b%2Fc%26d%3D%C3%A9 HTTP/1.1\r\n"));
}

#[test]
fn request_bytes_exactly() {
    let key = Key::new(*b"the sample nonce");
    let request = UpgradeRequest {
        endpoint: Endpoint::parse("ws://rtm.local:8080/base/").unwrap(),
        appkey: "AppKey123",
        key: &key,
        origin: Some("ws://rtm.local:8080"),
        protocol: Some("cbor"),
        user_agent: Some("benchlink/0.1"),
    };
    let mut buf = [0u8; 512];
    let mut out = Cursor::new(&mut buf);
    request.encode(&mut out).unwrap();
    assert_eq!(
        std::str::from_utf8(out.written()).unwrap(),
        "GET /base/v2?appkey=AppKey123 HTTP/1.1\r\n\
         Host: rtm.local:8080\r\n\
         Upgrade: websocket\r\n\
         Connection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\n\
         Origin: ws://rtm.local:8080\r\n\
         Sec-WebSocket-Protocol: cbor\r\n\
         User-Agent: benchlink/0.1\r\n\r\n"
    );
    // Default ports are left out of Host, others kept, IPv6 in brackets.
    assert!(request_bytes("wss://h:443", "k")
        .unwrap()
        .contains("\r\nHost: h\r\n"));
    assert!(request_bytes("wss://h:80", "k")
        .unwrap()
        .contains("\r\nHost: h:80\r\n"));
    assert!(request_bytes("ws://[::1]", "k")
        .unwrap()
        .contains("\r\nHost: [::1]\r\n"));
    // Too small a buffer.
    let mut small = [0u8; 100];
    assert_eq!(
        request.encode(&mut Cursor::new(&mut small)),
        Err(EncodeError::BufferTooSmall { capacity: 100 })
    );
}

#[test]
fn request_refuses_values_that_break_the_head() {
    let key = Key::new([7; 16]);
    let base = UpgradeRequest {
        endpoint: Endpoint::parse("ws://h").unwrap(),
        appkey: "k",
        key: &key,
        origin: None,
        protocol: None,
        user_agent: None,
    };
    let with_path = |path| UpgradeRequest {
        endpoint: Endpoint {
            path,
            ..base.endpoint
        },
        ..base
    };
    let with_host = |host| UpgradeRequest {
        endpoint: Endpoint {
            host,
            ..base.endpoint
        },
        ..base
    };
    let cases = [
        (with_path("/a?b"), "path"),
        (with_path("/a#b"), "path"),
        (with_path("/a b"), "path"),
        (with_path("a"), "path"),
        (with_path("/a\r\nX: y"), "path"),
        (with_host(""), "host"),
        (with_host("h/x"), "host"),
        (with_host("h\r\nX: y"), "host"),
        (with_host("u@h"), "host"),
        (
            UpgradeRequest {
                origin: Some("o\r\nX: y"),
                ..base
            },
            "origin",
        ),
        (
            UpgradeRequest {
                protocol: Some("p\n"),
                ..base
            },
            "protocol",
        ),
        (
            UpgradeRequest {
                user_agent: Some("u\0"),
                ..base
            },
            "user_agent",
        ),
    ];
    for (request, field) in cases {
        let mut buf = [0u8; 512];
        assert_eq!(
            request.encode(&mut Cursor::new(&mut buf)),
            Err(EncodeError::InvalidValue { field }),
            "{request:?}"
        );
    }
}

const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

/// Decodes `head` and checks it against the RFC example key.
fn check(head: &str, protocol: Option<&str>) -> Result<Option<String>, HandshakeError> {
    let mut head_buf = [0u8; 1024];
    let mut decoder: ResponseDecoder = ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
    let (used, event) = decoder.decode(head.as_bytes()).unwrap();
    assert_eq!(used, head.len());
    let Event::Head(head) = event else {
        panic!("{event:?}")
    };
    let key = Key::new(*b"the sample nonce");
    check_response(&head, &key, protocol).map(|p| p.map(String::from))
}

fn response(extra: &str) -> String {
    format!("HTTP/1.1 101 Switching Protocols\r\n{extra}\r\n")
}

#[test]
fn response_checks() {
    let good =
        format!("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {ACCEPT}\r\n");
    assert_eq!(check(&response(&good), None), Ok(None));
    let relaxed = format!(
        "upgrade: WebSocket\r\nconnection: keep-alive, UPGRADE\r\nsec-websocket-accept:  {ACCEPT} \r\n"
    );
    assert_eq!(check(&response(&relaxed), None), Ok(None));
    let with_protocol = format!("{good}Sec-WebSocket-Protocol: cbor\r\n");
    assert_eq!(
        check(&response(&with_protocol), Some("cbor")),
        Ok(Some("cbor".into()))
    );
    assert_eq!(check(&response(&good), Some("cbor")), Ok(None));

    let fail = |head: &str, protocol| check(head, protocol).unwrap_err();
    assert_eq!(
        fail(
            "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n",
            None
        ),
        HandshakeError::Status { status: 401 }
    );
    assert_eq!(
        fail("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", None),
        HandshakeError::Status { status: 200 }
    );
    let no_upgrade = format!("Connection: Upgrade\r\nSec-WebSocket-Accept: {ACCEPT}\r\n");
    assert_eq!(
        fail(&response(&no_upgrade), None),
        HandshakeError::UpgradeHeader
    );
    let h2c = format!("Upgrade: h2c\r\n{no_upgrade}");
    assert_eq!(fail(&response(&h2c), None), HandshakeError::UpgradeHeader);
    let no_connection = format!("Upgrade: websocket\r\nSec-WebSocket-Accept: {ACCEPT}\r\n");
    assert_eq!(
        fail(&response(&no_connection), None),
        HandshakeError::ConnectionHeader
    );
    let keep_alive = format!("Connection: keep-alive\r\n{no_connection}");
    assert_eq!(
        fail(&response(&keep_alive), None),
        HandshakeError::ConnectionHeader
    );
    let no_accept = "Upgrade: websocket\r\nConnection: Upgrade\r\n";
    assert_eq!(
        fail(&response(no_accept), None),
        HandshakeError::MissingAccept
    );
    let bad_accept = format!(
        "{no_accept}Sec-WebSocket-Accept: {}\r\n",
        Key::new([0; 16]).accept().as_str()
    );
    assert_eq!(
        fail(&response(&bad_accept), None),
        HandshakeError::BadAccept
    );
    let lower = format!(
        "{no_accept}Sec-WebSocket-Accept: {}\r\n",
        ACCEPT.to_lowercase()
    );
    assert_eq!(fail(&response(&lower), None), HandshakeError::BadAccept);
    assert_eq!(
        fail(&response(&with_protocol), None),
        HandshakeError::UnexpectedProtocol
    );
    assert_eq!(
        fail(&response(&with_protocol), Some("json")),
        HandshakeError::UnexpectedProtocol
    );
    let deflate = format!("{good}Sec-WebSocket-Extensions: permessage-deflate\r\n");
    assert_eq!(
        fail(&response(&deflate), None),
        HandshakeError::UnexpectedExtension
    );
    for e in [
        HandshakeError::Status { status: 400 },
        HandshakeError::BadAccept,
    ] {
        assert!(!e.to_string().is_empty());
    }
}

/// The 101 and the server's first frames in the same reads, for every split: the bytes
/// after the head reach the session (the C SDK shifts them from the wrong offset).
#[test]
fn frames_in_the_same_read_as_the_101_are_not_lost() {
    let mut wire = response(&format!(
        "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {ACCEPT}\r\n"
    ))
    .into_bytes();
    let head_len = wire.len();
    wire.extend(server_frame(
        true,
        1,
        b"{\"action\":\"rtm/subscription/data\"}",
    ));
    wire.extend(server_frame(true, 9, b"hb"));
    let connect = |chunks: &[&[u8]]| -> (Vec<Ev>, Vec<u8>) {
        let key = Key::new(*b"the sample nonce");
        let mut head_buf = [0u8; 512];
        let mut http: ResponseDecoder = ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
        let mut rx = [0u8; 128];
        let mut session = Session::new(&mut rx, || [0u8; 4]);
        let (mut upgraded, mut seen) = (false, Vec::new());
        for chunk in chunks {
            let mut input = *chunk;
            if !upgraded {
                let (used, event) = http.decode(input).unwrap();
                match event {
                    Event::Head(head) => {
                        assert_eq!(check_response(&head, &key, None), Ok(None));
                        upgraded = true;
                        input = &input[used..];
                    }
                    Event::NeedMore => continue,
                    other => panic!("{other:?}"),
                }
            }
            loop {
                match session.handle(input).unwrap() {
                    (_, None) => break,
                    (used, Some(m)) => {
                        seen.push(m.into());
                        input = &input[used..];
                    }
                }
            }
        }
        (seen, session.poll_transmit().unwrap_or_default().to_vec())
    };
    let whole = connect(&[&wire]);
    assert_eq!(
        whole.0,
        [
            text("{\"action\":\"rtm/subscription/data\"}"),
            Ev::Ping(b"hb".to_vec())
        ]
    );
    assert_eq!(whole.1, [0x8A, 0x82, 0, 0, 0, 0, b'h', b'b']);
    for i in 0..=wire.len() {
        assert_eq!(connect(&[&wire[..i], &wire[i..]]), whole, "split at {i}");
    }
    for i in head_len - 3..=head_len + 3 {
        for j in i..=wire.len() {
            let parts = [&wire[..i], &wire[i..j], &wire[j..]];
            assert_eq!(connect(&parts), whole, "split at {i}, {j}");
        }
    }
    let bytes: Vec<&[u8]> = wire.chunks(1).collect();
    assert_eq!(connect(&bytes), whole);
}

// ---------------------------------------------------------------------------------------
// Session

/// A mask source that hands out 1, 2, 3, … as big-endian keys.
fn counter() -> impl FnMut() -> [u8; 4] {
    let mut n = 0u32;
    move || {
        n += 1;
        n.to_be_bytes()
    }
}

/// Drains the outbox into client frames: (opcode, payload, mask).
fn drain<B: AsRef<[u8]> + AsMut<[u8]>, M: MaskSource>(
    session: &mut Session<B, M>,
) -> Vec<(u8, Vec<u8>, [u8; 4])> {
    let mut bytes = Vec::new();
    while let Some(pending) = session.poll_transmit() {
        bytes.extend_from_slice(pending);
        let n = pending.len();
        session.advance_transmit(n);
    }
    frames(&bytes)
}

fn frames(mut bytes: &[u8]) -> Vec<(u8, Vec<u8>, [u8; 4])> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (fin, opcode, mask, payload, used) = parse_client(bytes);
        assert!(fin);
        out.push((opcode, payload, mask));
        bytes = &bytes[used..];
    }
    out
}

/// Feeds `input` whole and returns the messages.
fn feed<B: AsRef<[u8]> + AsMut<[u8]>, M: MaskSource>(
    session: &mut Session<B, M>,
    mut input: &[u8],
) -> Vec<Ev> {
    let mut seen = Vec::new();
    loop {
        match session.handle(input) {
            Err(e) => {
                seen.push(Ev::Err(e));
                return seen;
            }
            Ok((_, None)) => return seen,
            Ok((used, Some(m))) => {
                seen.push(m.into());
                input = &input[used..];
            }
        }
    }
}

#[test]
fn pings_are_answered_with_fresh_masks() {
    let mut rx = [0u8; 64];
    let mut session = Session::new(&mut rx, counter());
    let wire = [server_frame(true, 9, b"one"), server_frame(true, 1, b"x")].concat();
    assert_eq!(
        feed(&mut session, &wire),
        [Ev::Ping(b"one".to_vec()), text("x")]
    );
    assert_eq!(drain(&mut session), [(0xA, b"one".to_vec(), [0, 0, 0, 1])]);
    feed(&mut session, &server_frame(true, 9, b""));
    assert_eq!(drain(&mut session), [(0xA, vec![], [0, 0, 0, 2])]);
    let mut out = [0u8; 64];
    let mut out = Cursor::new(&mut out);
    session.send_text("a", &mut out).unwrap();
    session.send_text("b", &mut out).unwrap();
    let masks: Vec<_> = frames(out.written()).into_iter().map(|f| f.2).collect();
    assert_eq!(masks, [[0, 0, 0, 3], [0, 0, 0, 4]]);
}

#[test]
fn only_the_latest_unsent_pong_is_kept() {
    let mut rx = [0u8; 64];
    let mut session = Session::new(&mut rx, || [0u8; 4]);
    let pings: Vec<u8> = (1..=5u8)
        .flat_map(|i| server_frame(true, 9, &[i; 125]))
        .collect();
    feed(&mut session, &pings);
    assert_eq!(drain(&mut session), [(0xA, vec![5; 125], [0; 4])]);

    // A pong that is partly written cannot be replaced: the next one follows it.
    feed(&mut session, &server_frame(true, 9, b"a"));
    session.advance_transmit(3);
    feed(&mut session, &server_frame(true, 9, b"b"));
    feed(&mut session, &server_frame(true, 9, b"c"));
    session.close(CloseCode::NORMAL, "").unwrap();
    let mut bytes = vec![0x8A, 0x81, 0];
    while let Some(p) = session.poll_transmit() {
        bytes.extend_from_slice(p);
        let n = p.len();
        session.advance_transmit(n);
    }
    let sent: Vec<_> = frames(&bytes).into_iter().map(|f| (f.0, f.1)).collect();
    assert_eq!(
        sent,
        [
            (0xA, b"a".to_vec()),
            (0xA, b"c".to_vec()),
            (0x8, vec![3, 0xe8])
        ]
    );
}

/// Pings, partial writes and a close in a pseudo-random order: the bytes written are
/// always whole frames, every pong answers a ping, the latest ping is always answered, and
/// the close comes last.
#[test]
fn outbox_never_loses_or_corrupts_frames() {
    let mut rng = crate::testing::Xorshift(0x2545_f491_4f6c_dd1d);
    let mut next = move || rng.next();
    for _ in 0..200 {
        let mut rx = [0u8; 8];
        let mut session = Session::new(&mut rx, counter());
        let (mut written, mut last_ping) = (Vec::new(), None);
        let mut closed = false;
        for step in 0..40u8 {
            match next() % 4 {
                0 | 1 if !closed => {
                    let len = (next() % 126) as usize;
                    let payload = vec![step; len];
                    feed(&mut session, &server_frame(true, 9, &payload));
                    last_ping = Some(payload);
                }
                2 => {
                    if let Some(p) = session.poll_transmit() {
                        let n = (next() as usize % p.len()) + 1;
                        written.extend_from_slice(&p[..n]);
                        session.advance_transmit(n);
                    }
                }
                _ if !closed && next() % 8 == 0 => {
                    session.close(CloseCode::GOING_AWAY, "x").unwrap();
                    closed = true;
                }
                _ => {}
            }
        }
        while let Some(p) = session.poll_transmit() {
            written.extend_from_slice(p);
            let n = p.len();
            session.advance_transmit(n);
        }
        let sent = frames(&written);
        let pongs: Vec<_> = sent.iter().filter(|f| f.0 == 0xA).collect();
        if !closed {
            assert_eq!(pongs.last().map(|f| &f.1), last_ping.as_ref());
        }
        assert!(pongs
            .iter()
            .all(|f| f.1.iter().all(|&b| Some(b) == f.1.first().copied())));
        let closes = sent.iter().filter(|f| f.0 == 0x8).count();
        assert_eq!(closes, usize::from(closed));
        if closed {
            assert_eq!(sent.last().unwrap().0, 0x8);
        }
    }
}

#[test]
fn peer_close_is_echoed() {
    let mut rx = [0u8; 64];
    let mut session = Session::new(&mut rx, || [0u8; 4]);
    let wire = server_frame(true, 8, b"\x03\xe9going away");
    assert_eq!(
        feed(&mut session, &wire),
        [Ev::Close(Some((1001, "going away".into())))]
    );
    let status = CloseStatus::Clean {
        code: Some(CloseCode::GOING_AWAY),
        by_peer: true,
    };
    assert_eq!(session.state(), State::Closed(status));
    assert_eq!(drain(&mut session), [(0x8, vec![0x03, 0xe9], [0; 4])]);
    // Nothing more is sent or delivered.
    let mut out = [0u8; 64];
    assert_eq!(
        session.send_text("x", &mut Cursor::new(&mut out)),
        Err(SendError::Closed)
    );
    assert_eq!(
        session.handle(&server_frame(true, 1, b"late")),
        Ok((6, None))
    );
    assert_eq!(session.handle(&[0xff, 0xff]), Ok((2, None)));
    session.close(CloseCode::NORMAL, "").unwrap();
    assert_eq!(session.poll_transmit(), None);
    session.handle_eof();
    assert_eq!(session.state(), State::Closed(status));

    // An empty close is echoed empty.
    let mut rx = [0u8; 64];
    let mut session = Session::new(&mut rx, || [0u8; 4]);
    feed(&mut session, &[0x88, 0x00]);
    let status = CloseStatus::Clean {
        code: None,
        by_peer: true,
    };
    assert_eq!(session.state(), State::Closed(status));
    assert_eq!(drain(&mut session), [(0x8, vec![], [0; 4])]);
}

#[test]
fn our_close_waits_for_the_peer() {
    let mut rx = [0u8; 64];
    let mut session = Session::new(&mut rx, || [0u8; 4]);
    feed(&mut session, &server_frame(true, 9, b"before"));
    session.close(CloseCode::NORMAL, "done").unwrap();
    assert_eq!(session.state(), State::Closing);
    // The pending pong goes out before the close.
    assert_eq!(
        drain(&mut session),
        [
            (0xA, b"before".to_vec(), [0; 4]),
            (0x8, b"\x03\xe8done".to_vec(), [0; 4])
        ]
    );
    // Data still arrives; pings are no longer answered; nothing may be sent.
    let wire = [server_frame(true, 1, b"tail"), server_frame(true, 9, b"p")].concat();
    assert_eq!(
        feed(&mut session, &wire),
        [text("tail"), Ev::Ping(b"p".to_vec())]
    );
    assert_eq!(session.poll_transmit(), None);
    let mut out = [0u8; 64];
    let mut out = Cursor::new(&mut out);
    assert_eq!(session.send_text("x", &mut out), Err(SendError::Closed));
    assert_eq!(session.send_binary(b"x", &mut out), Err(SendError::Closed));
    assert_eq!(session.send_ping(b"x", &mut out), Err(SendError::Closed));
    let mut place = [0u8; MAX_HEADER_LEN + 1];
    assert_eq!(
        session.send_text_in_place(&mut place, 1),
        Err(SendError::Closed)
    );
    assert_eq!(
        session.send_binary_in_place(&mut place, 1),
        Err(SendError::Closed)
    );
    assert!(out.is_empty());
    session.close(CloseCode::GOING_AWAY, "again").unwrap();
    assert_eq!(session.state(), State::Closing);
    // The peer's answer completes the handshake without a second close frame.
    feed(&mut session, &server_frame(true, 8, b"\x03\xe8"));
    let status = CloseStatus::Clean {
        code: Some(CloseCode::NORMAL),
        by_peer: false,
    };
    assert_eq!(session.state(), State::Closed(status));
    assert_eq!(session.poll_transmit(), None);
}

#[test]
fn protocol_errors_fail_the_connection() {
    for (wire, code, max) in [
        (server_frame(true, 1, &[0xff]), 1007u16, 8usize),
        (server_frame(true, 2, &[0; 9]), 1009, 8),
        (vec![0x83, 0x00], 1002, 8),
        (vec![0x81, 0x81, 0, 0, 0, 0, b'x'], 1002, 8),
    ] {
        let mut rx = vec![0u8; max];
        let mut session = Session::new(&mut rx, || [0u8; 4]);
        let Some(Ev::Err(e)) = feed(&mut session, &wire).pop() else {
            panic!()
        };
        assert_eq!(e.close_code(), CloseCode(code));
        assert_eq!(session.state(), State::Closed(CloseStatus::Failed(e)));
        assert_eq!(
            drain(&mut session),
            [(0x8, code.to_be_bytes().to_vec(), [0; 4])]
        );
        assert_eq!(session.handle(b"\x81\x00"), Err(e));
        let mut out = [0u8; 16];
        assert_eq!(
            session.send_text("x", &mut Cursor::new(&mut out)),
            Err(SendError::Closed)
        );
    }
    // While closing, our close frame was already sent: no second one.
    let mut rx = [0u8; 8];
    let mut session = Session::new(&mut rx, || [0u8; 4]);
    session.close(CloseCode::NORMAL, "").unwrap();
    drain(&mut session);
    assert_eq!(
        session.handle(&[0x83, 0x00]),
        Err(Error::UnknownOpcode { opcode: 3 })
    );
    assert_eq!(session.poll_transmit(), None);
}

#[test]
fn transport_end_and_reset() {
    let mut rx = [0u8; 8];
    let mut session = Session::new(&mut rx, || [0u8; 4]);
    feed(&mut session, &server_frame(true, 9, b"p"));
    session.handle_eof();
    assert_eq!(session.state(), State::Closed(CloseStatus::Abnormal));
    assert_eq!(session.poll_transmit(), None);
    assert_eq!(session.handle(b"\x81\x01x"), Ok((3, None)));
    session.reset();
    assert_eq!(session.state(), State::Open);
    assert_eq!(feed(&mut session, b"\x81\x01x"), [text("x")]);
    // Debug shows sizes and state, not buffers, and needs no Debug mask source.
    let debug = format!("{session:?}");
    assert!(
        debug.contains("max_message_len: 8") && debug.contains("state: Open"),
        "{debug}"
    );
    // Closing also ends abnormally if the transport goes first.
    session.close(CloseCode::NORMAL, "").unwrap();
    session.handle_eof();
    assert_eq!(session.state(), State::Closed(CloseStatus::Abnormal));
}

#[test]
fn session_send_errors() {
    let mut rx = [0u8; 8];
    let mut session = Session::new(&mut rx, || [0u8; 4]);
    let mut small = [0u8; 4];
    assert_eq!(
        session.send_text("hi", &mut Cursor::new(&mut small)),
        Err(SendError::Encode(EncodeError::BufferTooSmall {
            capacity: 4
        }))
    );
    let mut place = [0u8; MAX_HEADER_LEN];
    assert_eq!(
        session.send_text_in_place(&mut place, 1),
        Err(SendError::Encode(EncodeError::BufferTooSmall {
            capacity: MAX_HEADER_LEN
        }))
    );
    assert_eq!(
        session.send_binary_in_place(&mut place, 0).unwrap(),
        [0x82, 0x80, 0, 0, 0, 0]
    );
    let long = "r".repeat(124);
    assert_eq!(
        session.close(CloseCode::NORMAL, &long),
        Err(SendError::CloseReasonTooLong { len: 124 })
    );
    assert_eq!(
        session.close(CloseCode(999), ""),
        Err(SendError::InvalidCloseCode { code: 999 })
    );
    assert_eq!(session.state(), State::Open);
    session.advance_transmit(1000);
    assert_eq!(session.poll_transmit(), None);
}

#[test]
fn displays() {
    let errors = [
        Error::MaskedServerFrame,
        Error::ReservedBits { bits: 4 },
        Error::UnknownOpcode { opcode: 3 },
        Error::FragmentedControl,
        Error::ControlTooLong { len: 126 },
        Error::NonMinimalLength { len: 5 },
        Error::UnexpectedContinuation,
        Error::ExpectedContinuation,
        Error::MessageTooLarge { len: 5, max: 4 },
        Error::InvalidUtf8,
        Error::InvalidCloseCode { code: 1005 },
        Error::TruncatedCloseCode,
    ];
    let texts: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(texts[1], "reserved bits 0b100 set");
    assert_eq!(texts[2], "unknown opcode 0x3");
    let mut unique = texts.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), errors.len());
    let send = [
        SendError::ControlTooLong { len: 126 },
        SendError::CloseReasonTooLong { len: 124 },
        SendError::InvalidCloseCode { code: 1005 },
        SendError::InvalidUtf8,
        SendError::Closed,
    ];
    assert!(send.iter().all(|e| !e.to_string().is_empty()));
    assert_eq!(
        CloseFrame {
            code: CloseCode::NORMAL,
            reason: ""
        }
        .to_string(),
        "1000"
    );
}

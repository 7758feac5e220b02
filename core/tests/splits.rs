//! Every split of small inputs decodes as the whole input does: the HTTP response decoder
//! (identity, chunked and compressed bodies, pipelined and close-delimited responses),
//! the line decoders of the benchmark server's streams and the WebSocket frame decoder.
//!
//! The fuzz targets feed each input in one split that the input chooses, so that they run
//! tens of thousands of inputs a second; the exhaustive loops over splits live here, on
//! inputs small enough for them: one byte at a time, every cut into two pieces and, for
//! the shortest inputs, every cut into three.

use std::io::Write;

use benchlink_core::bench::{
    LineDecoder, LineFormat, LineSplitter, LineTooLong, LogLine, MetricLine,
};
use benchlink_core::http::{DecodeError, Event, InflateBuffers, Limits, ResponseDecoder};
use benchlink_core::ws::{Decoder, Error as WsError, Message};

/// Inputs up to this length are also cut into three pieces in every way.
const THREE_PIECES_UP_TO: usize = 128;

/// Every split this file checks of `len` bytes, as piece lengths: one byte at a time,
/// every cut into two and, for short inputs, every cut into three.
fn splits(len: usize) -> Vec<Vec<usize>> {
    let mut all = vec![vec![1; len]];
    for a in 1..len {
        all.push(vec![a, len - a]);
        if len <= THREE_PIECES_UP_TO {
            for b in a + 1..len {
                all.push(vec![a, b - a, len - b]);
            }
        }
    }
    all
}

/// Checks that `decode` gives for every split of `input` what it gives for the whole;
/// returns that.
fn same_for_every_split<T: PartialEq + std::fmt::Debug>(
    input: &[u8],
    mut decode: impl FnMut(&[&[u8]]) -> T,
) -> T {
    let whole = decode(&[input]);
    for lens in splits(input.len()) {
        let mut rest = input;
        let pieces: Vec<&[u8]> = lens
            .iter()
            .map(|&n| {
                let (piece, after) = rest.split_at(n);
                rest = after;
                piece
            })
            .collect();
        assert_eq!(decode(&pieces), whole, "split into {lens:?}");
    }
    whole
}

// ------------------------------------------------------------------------------------
// HTTP responses
// ------------------------------------------------------------------------------------

/// A decoder event, owned; consecutive data merged (its granularity depends on the split).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Http {
    Head(u16, Vec<(String, Vec<u8>)>),
    Data(Vec<u8>),
    End {
        keep_alive: bool,
        coding_complete: bool,
    },
    Error(DecodeError),
}

/// Reads up to `responses` pipelined responses from `pieces` with a fresh decoder (with
/// inflate memory), resetting after each end; `finish` after the last piece when `eof`.
fn http(pieces: &[&[u8]], responses: usize, eof: bool) -> Vec<Http> {
    let mut head_buf = [0u8; 1024];
    let mut inflate = Box::new(InflateBuffers::<32768>::new());
    let mut dec: ResponseDecoder<'_, 16> =
        ResponseDecoder::new(&mut head_buf, Some(inflate.memory()), Limits::DEFAULT);
    let mut events = Vec::new();
    let push = |events: &mut Vec<Http>, event: Http| match (events.last_mut(), event) {
        (Some(Http::Data(before)), Http::Data(more)) => before.extend(more),
        (_, event) => events.push(event),
    };
    for piece in pieces {
        let mut rest = *piece;
        loop {
            let (used, event) = match dec.decode(rest) {
                Ok(ok) => ok,
                Err(e) => {
                    events.push(Http::Error(e));
                    return events;
                }
            };
            rest = &rest[used..];
            match event {
                Event::NeedMore => break,
                Event::Head(h) => {
                    let headers = h
                        .headers()
                        .map(|(n, v)| (n.to_owned(), v.to_vec()))
                        .collect();
                    push(&mut events, Http::Head(h.status, headers));
                }
                Event::Data(d) => push(&mut events, Http::Data(d.to_vec())),
                Event::End {
                    keep_alive,
                    coding_complete,
                } => {
                    push(
                        &mut events,
                        Http::End {
                            keep_alive,
                            coding_complete,
                        },
                    );
                    if events
                        .iter()
                        .filter(|e| matches!(e, Http::End { .. }))
                        .count()
                        == responses
                    {
                        return events;
                    }
                    dec.reset();
                }
            }
        }
    }
    if eof {
        // Each call hands out what the window holds; a few calls empty it.
        for _ in 0..1000 {
            match dec.finish() {
                Ok(Event::Data(d)) => push(&mut events, Http::Data(d.to_vec())),
                Ok(Event::End {
                    keep_alive,
                    coding_complete,
                }) => {
                    push(
                        &mut events,
                        Http::End {
                            keep_alive,
                            coding_complete,
                        },
                    );
                    return events;
                }
                Ok(other) => panic!("finish gave {other:?}"),
                Err(e) => {
                    events.push(Http::Error(e));
                    return events;
                }
            }
        }
        panic!("finish never ends");
    }
    events
}

/// `body` with the given content coding, sync-flushed after `flush_at` bytes (as the
/// server's live log writer does), finished unless `cut`.
fn compressed(coding: &str, body: &[u8], flush_at: usize, cut: bool) -> Vec<u8> {
    fn write<W: Write>(mut w: W, body: &[u8], flush_at: usize) -> W {
        w.write_all(&body[..flush_at]).unwrap();
        w.flush().unwrap();
        w.write_all(&body[flush_at..]).unwrap();
        w.flush().unwrap();
        w
    }
    let level = flate2::Compression::default();
    let (mut out, finished) = match coding {
        "deflate" => {
            let w = write(
                flate2::write::ZlibEncoder::new(Vec::new(), level),
                body,
                flush_at,
            );
            (w.get_ref().clone(), w.finish().unwrap())
        }
        "raw" => {
            let w = write(
                flate2::write::DeflateEncoder::new(Vec::new(), level),
                body,
                flush_at,
            );
            (w.get_ref().clone(), w.finish().unwrap())
        }
        _ => {
            let w = write(
                flate2::write::GzEncoder::new(Vec::new(), level),
                body,
                flush_at,
            );
            (w.get_ref().clone(), w.finish().unwrap())
        }
    };
    if !cut {
        out = finished;
    }
    out
}

/// `body` in chunks of `size` bytes, with the last chunk.
fn chunked(body: &[u8], size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for c in body.chunks(size) {
        out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        out.extend_from_slice(c);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

const NO_CONTENT: &[u8] = b"HTTP/1.1 204 No Content\r\n\r\n";

fn data(events: &[Http]) -> Vec<u8> {
    events
        .iter()
        .filter_map(|e| match e {
            Http::Data(d) => Some(d.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

#[test]
fn identity_and_chunked_responses_every_split() {
    let length = [
        &b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 11\r\nX-A:  b \r\n\r\nhello world"[..],
        NO_CONTENT,
    ]
    .concat();
    let events = same_for_every_split(&length, |p| http(p, 2, false));
    assert_eq!(data(&events), b"hello world");
    assert_eq!(events.len(), 5, "{events:?}");

    let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
        5;ext=\"x\"\r\nhello\r\n001\n \r\n5 \t\r\nworld\r\n0\r\nX-Trailer: t\r\n\r\n";
    let wire = [&chunked[..], NO_CONTENT].concat();
    let events = same_for_every_split(&wire, |p| http(p, 2, false));
    assert_eq!(data(&events), b"hello world");
    assert!(
        matches!(events.last(), Some(Http::End { .. })),
        "{events:?}"
    );

    let close = b"HTTP/1.0 200 OK\r\n\r\n1\tlatency\t3.5\n2\tlat";
    let events = same_for_every_split(close, |p| http(p, 1, true));
    assert_eq!(data(&events), b"1\tlatency\t3.5\n2\tlat");

    let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n";
    let events = same_for_every_split(bad, |p| http(p, 1, false));
    assert!(matches!(events.last(), Some(Http::Error(_))), "{events:?}");
}

#[test]
fn compressed_responses_every_split() {
    let body = b"1700000000\tprint.rps\t1520.5\n1700000001\tprint.rps\t1530\n".repeat(3);
    for coding in ["deflate", "raw", "gzip"] {
        for cut in [false, true] {
            let encoded = compressed(coding, &body, 40, cut);
            let name = if coding == "raw" { "deflate" } else { coding };
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Encoding: {name}\r\nTransfer-Encoding: chunked\r\n\r\n"
            );
            let wire = [head.as_bytes(), &chunked(&encoded, 16), NO_CONTENT].concat();
            let events = same_for_every_split(&wire, |p| http(p, 2, false));
            assert_eq!(data(&events), body, "{coding}, cut {cut}");
            assert!(
                events.contains(&Http::End {
                    keep_alive: true,
                    coding_complete: !cut
                }),
                "{coding}, cut {cut}: {events:?}"
            );
        }
    }
    // A corrupt stream fails the same way under every split.
    let mut encoded = compressed("deflate", &body, 40, false);
    let middle = encoded.len() / 2;
    encoded[middle] ^= 0x55;
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Encoding: deflate\r\nContent-Length: {}\r\n\r\n",
        encoded.len()
    );
    let wire = [head.as_bytes(), &encoded].concat();
    same_for_every_split(&wire, |p| http(p, 1, false));
}

// ------------------------------------------------------------------------------------
// Line decoders
// ------------------------------------------------------------------------------------

/// Lines (or over-long lines) of the stream: `\n`, `\r\n` and `\r` end a line, so a
/// `\r\n` cut between its two bytes is the case that matters.
const LINES: &[u8] = b"1700000000\tprint.rps\t1520.5\r\n\
    1700000001\tlatency.95\t-3e2\r\r\nnot a sample\n\
    a line much longer than the buffer of forty-eight bytes, cut\n\xff\xfe\r\n17\tx\t1";

#[test]
fn line_decoders_every_split() {
    let lines = same_for_every_split(LINES, |pieces| {
        let mut buf = [0u8; 48];
        let mut dec = LineSplitter::new(&mut buf);
        let mut out = Vec::new();
        for piece in pieces {
            let mut input = *piece;
            while let Some(item) = dec.next(&mut input) {
                out.push(item.map(<[u8]>::to_vec));
            }
            assert!(input.is_empty());
        }
        out.extend(dec.finish().map(|item| item.map(<[u8]>::to_vec)));
        out
    });
    assert_eq!(lines.len(), 7, "{lines:?}");
    assert_eq!(lines[2], Ok(Vec::new()), "\\r then \\r\\n is an empty line");
    assert_eq!(lines[4], Err(LineTooLong { max: 48 }));

    let log = same_for_every_split(LINES, decoded_lines::<LogLine>);
    assert_eq!(log.len(), lines.len());
    let samples = same_for_every_split(LINES, decoded_lines::<MetricLine>);
    assert_eq!(samples.len(), lines.len());
}

/// The items (as their `Debug` text) of a line decoder of format `F` with a 48-byte
/// buffer fed `pieces`.
fn decoded_lines<F: LineFormat>(pieces: &[&[u8]]) -> Vec<String>
where
    for<'l> F::Item<'l>: std::fmt::Debug,
    for<'l> F::Error<'l>: std::fmt::Debug,
{
    let mut buf = [0u8; 48];
    let mut dec = LineDecoder::<F>::new(&mut buf);
    let mut out = Vec::new();
    for piece in pieces {
        let mut input = *piece;
        while let Some(item) = dec.next(&mut input) {
            out.push(format!("{item:?}"));
        }
        assert!(input.is_empty());
    }
    out.extend(dec.finish().map(|item| format!("{item:?}")));
    out
}

// ------------------------------------------------------------------------------------
// WebSocket frames
// ------------------------------------------------------------------------------------

/// A server frame: unmasked, minimal length encoding.
fn frame(first: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![first];
    match payload.len() {
        n @ 0..=125 => out.push(n as u8),
        n => {
            out.push(126);
            out.extend_from_slice(&u16::try_from(n).unwrap().to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
    out
}

/// A message, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ws {
    Text(String),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<(u16, String)>),
    Error(WsError),
}

fn ws(pieces: &[&[u8]]) -> Vec<Ws> {
    let mut buf = [0u8; 256];
    let mut dec = Decoder::new(&mut buf[..]);
    let mut out = Vec::new();
    for piece in pieces {
        let mut rest = *piece;
        loop {
            match dec.decode(rest) {
                Err(e) => {
                    out.push(Ws::Error(e));
                    return out;
                }
                Ok((_, None)) => break,
                Ok((used, Some(m))) => {
                    out.push(match m {
                        Message::Text(t) => Ws::Text(t.to_owned()),
                        Message::Binary(b) => Ws::Binary(b.to_vec()),
                        Message::Ping(p) => Ws::Ping(p.to_vec()),
                        Message::Pong(p) => Ws::Pong(p.to_vec()),
                        Message::Close(c) => Ws::Close(c.map(|c| (c.code.0, c.reason.to_owned()))),
                    });
                    rest = &rest[used..];
                }
            }
        }
    }
    out
}

#[test]
fn websocket_frames_every_split() {
    // "héllo €" fragmented inside its multi-byte characters, a ping between fragments,
    // a 16-bit length, a close.
    let text = "héllo €".as_bytes();
    let long = vec![7u8; 130];
    let stream = [
        frame(0x01, &text[..2]),
        frame(0x89, b"ping"),
        frame(0x00, &text[2..9]),
        frame(0x80, &text[9..]),
        frame(0x82, &long),
        frame(0x8A, b""),
        frame(0x88, &[&1000u16.to_be_bytes()[..], b"bye"].concat()),
    ]
    .concat();
    let messages = same_for_every_split(&stream, ws);
    assert_eq!(
        messages,
        [
            Ws::Ping(b"ping".to_vec()),
            Ws::Text("héllo €".to_owned()),
            Ws::Binary(long),
            Ws::Pong(Vec::new()),
            Ws::Close(Some((1000, "bye".to_owned()))),
        ]
    );

    // Invalid UTF-8 across two fragments fails the same way under every split.
    let bad = [frame(0x01, b"ok\xE2\x82"), frame(0x80, b"\x28")].concat();
    let messages = same_for_every_split(&bad, ws);
    assert_eq!(messages, [Ws::Error(WsError::InvalidUtf8)]);
}

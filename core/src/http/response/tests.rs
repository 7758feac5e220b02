use super::super::content_coding::InflateMemory;
use super::super::decode_error::GzipError;
use super::super::gzip::Crc32;
use super::super::DecompressorOxide;
use super::*;
use std::boxed::Box;
use std::format;
use std::vec;
use std::vec::Vec;

/// One normalised event; consecutive `Data` are merged, since their granularity
/// legitimately depends on the split.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Head {
        status: u16,
        framing: Framing,
        encoding: ContentEncoding,
        keep_alive: bool,
    },
    Data(Vec<u8>),
    End {
        keep_alive: bool,
        coding_complete: bool,
    },
    Error(DecodeError),
}

#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    events: Vec<Ev>,
    /// Bytes of input left after the last `End`.
    rest: usize,
}

impl Outcome {
    fn body(&self) -> Vec<u8> {
        self.events
            .iter()
            .filter_map(|e| {
                if let Ev::Data(d) = e {
                    Some(d.as_slice())
                } else {
                    None
                }
            })
            .collect::<Vec<_>>()
            .concat()
    }
    fn end(&self) -> Option<(bool, bool)> {
        self.events.iter().find_map(|e| match e {
            Ev::End {
                keep_alive,
                coding_complete,
            } => Some((*keep_alive, *coding_complete)),
            _ => None,
        })
    }
    fn error(&self) -> Option<DecodeError> {
        self.events
            .iter()
            .find_map(|e| if let Ev::Error(e) = e { Some(*e) } else { None })
    }
}

#[derive(Clone, Copy)]
struct Setup {
    head_buf: usize,
    window: Option<usize>,
    limits: Limits,
    method: Method,
    /// Call `finish` after the last piece.
    eof: bool,
    /// How many responses to read (resetting after each `End`).
    responses: usize,
}

const PLAIN: Setup = Setup {
    head_buf: 512,
    window: None,
    limits: Limits::DEFAULT,
    method: Method::Get,
    eof: false,
    responses: 1,
};
const INFLATE: Setup = Setup {
    window: Some(32768),
    ..PLAIN
};

fn push(events: &mut Vec<Ev>, ev: Ev) {
    if let (Some(Ev::Data(prev)), Ev::Data(more)) = (events.last_mut(), &ev) {
        prev.extend_from_slice(more);
    } else {
        events.push(ev);
    }
}

fn record(events: &mut Vec<Ev>, event: Event<'_>) {
    let ev = match event {
        Event::Head(h) => Ev::Head {
            status: h.status,
            framing: h.framing,
            encoding: h.encoding,
            keep_alive: h.keep_alive,
        },
        Event::Data(d) => {
            assert!(!d.is_empty(), "Data is never empty");
            Ev::Data(d.to_vec())
        }
        Event::End {
            keep_alive,
            coding_complete,
        } => Ev::End {
            keep_alive,
            coding_complete,
        },
        Event::NeedMore => return,
    };
    push(events, ev);
}

/// Feeds `pieces` in order as a socket reader would.
fn run(pieces: &[&[u8]], setup: Setup) -> Outcome {
    let mut head_buf = vec![0u8; setup.head_buf];
    let mut state = Box::new(DecompressorOxide::new());
    let mut window = vec![0u8; setup.window.unwrap_or(256)];
    let memory = setup
        .window
        .map(|_| InflateMemory::new(&mut state, &mut window).unwrap());
    let mut dec: ResponseDecoder<'_, 8> = ResponseDecoder::new(&mut head_buf, memory, setup.limits);
    dec.set_request_method(setup.method);
    let total: usize = pieces.iter().map(|p| p.len()).sum();
    let (mut events, mut fed, mut ends) = (Vec::new(), 0, 0);
    for piece in pieces {
        let mut pos = 0;
        loop {
            match dec.decode(&piece[pos..]) {
                Err(e) => {
                    events.push(Ev::Error(e));
                    // Errors are sticky.
                    assert_eq!(dec.decode(b"x").err(), Some(e));
                    return Outcome { events, rest: 0 };
                }
                Ok((n, event)) => {
                    pos += n;
                    let (end, need_more) = (
                        matches!(event, Event::End { .. }),
                        matches!(event, Event::NeedMore),
                    );
                    record(&mut events, event);
                    if need_more {
                        assert_eq!(pos, piece.len(), "NeedMore only once all input is consumed");
                        break;
                    }
                    if end {
                        ends += 1;
                        if ends == setup.responses {
                            return Outcome {
                                events,
                                rest: total - fed - pos,
                            };
                        }
                        dec.reset();
                    }
                }
            }
        }
        fed += piece.len();
    }
    if setup.eof {
        loop {
            match dec.finish() {
                Err(e) => {
                    events.push(Ev::Error(e));
                    break;
                }
                Ok(Event::End {
                    keep_alive,
                    coding_complete,
                }) => {
                    push(
                        &mut events,
                        Ev::End {
                            keep_alive,
                            coding_complete,
                        },
                    );
                    break;
                }
                Ok(event @ Event::Data(_)) => record(&mut events, event),
                Ok(other) => panic!("finish gave {other:?}"),
            }
        }
    }
    Outcome { events, rest: 0 }
}

/// The outcome of `input` whole, checked to be the same for every split in two and for
/// one byte at a time.
fn every_split(input: &[u8], setup: Setup) -> Outcome {
    let whole = run(&[input], setup);
    for i in 0..=input.len() {
        assert_eq!(
            run(&[&input[..i], &input[i..]], setup),
            whole,
            "split at {i}"
        );
    }
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(run(&bytes, setup), whole, "one byte at a time");
    whole
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// `data` as a chunked body of `size`-byte chunks, with an extension on every other one.
fn chunked(data: &[u8], size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, chunk) in data.chunks(size).enumerate() {
        let ext = if i % 2 == 1 { ";ext=\"v\"" } else { "" };
        out.extend_from_slice(format!("{:x}{ext}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

fn response(head: &str, body: &[u8]) -> Vec<u8> {
    [head.as_bytes(), body].concat()
}

fn log_lines(tag: &str, n: usize, ms: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| {
            format!("14:02:{ms}.{i:03} [info] <0.237.0> Dummy print: \"{tag}\"\n").into_bytes()
        })
        .collect()
}

// Real zlib output (Python's zlib, level 6, the library Erlang uses): the lines of
// `log_lines("FOO", 6, 47)`, a sync flush, then `log_lines("BAR", 4, 48)` and the end.
const ZLIB_A: &str = "789c3234b13230b23231d73330305088cecc4bcb8f55b031d03332068ad829b894e6e6562a141465e695582928b9f9fb2b711922341892aac188540dc6a46a3021558329511a00000000ffff";
const ZLIB_B: &str = "836ab02026949c1c835034100c25740d0443095d03c150026b0000f08d8094";
// Same, but the stream stops after a second sync flush: no final block, no Adler-32.
const ZLIB_B_TRUNCATED: &str = "826ab02026949c1c835034100c25740d0443095d03c150026b00000000ffff";
// Both parts as raw deflate (what some servers send as "deflate").
const RAW: &str = "3334b13230b23231d73330305088cecc4bcb8f55b031d03332068ad829b894e6e6562a141465e695582928b9f9fb2b711922341892aac188540dc6a46a3021558329291a2c88092527c720140d0443095d03c15042d7403094c01a00";
// Both parts gzipped with FNAME "log.txt" (Python's GzipFile, mtime 0).
const GZIP: &str = "1f8b08080000000002ff6c6f672e747874003334b13230b23231d73330305088cecc4bcb8f55b031d03332068ad829b894e6e6562a141465e695582928b9f9fb2b711922341892aac188540dc6a46a3021558329291a2c88092527c720140d86a46a3022558331511a00544e552cea010000";
// The first part with a 512-byte window (zlib header 18 95).
const ZLIB_W9: &str = "18953334b13230b23231d73330305088cecc4bcb8f55b031d03332068ad829b894e6e6562a141465e695582928b9f9fb2b711922341892aac188540dc6a46a3021558329511a0036094d4a";

fn text() -> Vec<u8> {
    [log_lines("FOO", 6, 47), log_lines("BAR", 4, 48)].concat()
}

const DEFLATE_CHUNKED: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-encoding: deflate\r\ntransfer-encoding: chunked\r\n\r\n";

#[test]
fn content_length_body_is_zero_copy_and_leaves_the_next_bytes() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n{\"id\":3,\"status\":\"pending\"}HTTP/1.1";
    let out = every_split(input, PLAIN);
    assert_eq!(
        out.events,
        [
            Ev::Head {
                status: 200,
                framing: Framing::Length(27),
                encoding: ContentEncoding::Identity,
                keep_alive: true
            },
            Ev::Data(b"{\"id\":3,\"status\":\"pending\"}".to_vec()),
            Ev::End {
                keep_alive: true,
                coding_complete: true
            },
        ]
    );
    assert_eq!(out.rest, 8);

    let mut head_buf = [0u8; 128];
    let mut dec: ResponseDecoder = ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
    let (n, _) = dec.decode(input).unwrap();
    let (_, event) = dec.decode(&input[n..]).unwrap();
    let Event::Data(d) = event else {
        panic!("{event:?}")
    };
    assert_eq!(
        d.as_ptr(),
        input[n..].as_ptr(),
        "identity data borrows the input"
    );
}

#[test]
fn chunked_with_extensions_and_trailers() {
    let body = chunked(b"0123456789abcdefghijklmnopqrstuvwxyz", 7);
    let input = response(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        &[
            &body[..body.len() - 2],
            b"Expires: never\r\nX-Checksum: 1\r\n\r\n".as_slice(),
        ]
        .concat(),
    );
    let out = every_split(&input, PLAIN);
    assert_eq!(out.body(), b"0123456789abcdefghijklmnopqrstuvwxyz");
    assert_eq!(out.end(), Some((true, true)));
    assert_eq!(out.rest, 0);
}

#[test]
fn close_delimited_body_ends_at_eof() {
    let input = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end";
    let out = every_split(input, Setup { eof: true, ..PLAIN });
    assert_eq!(out.body(), b"until the end");
    assert_eq!(out.end(), Some((false, true)));
    // Without EOF it just waits.
    assert_eq!(run(&[input], PLAIN).end(), None);
}

#[test]
fn eof_too_early_is_a_typed_error() {
    let eof = Setup { eof: true, ..PLAIN };
    let cases: [(&[u8], Section); 6] = [
        (b"", Section::NoResponse),
        (b"HTTP/1.1 100 Continue\r\n\r\n", Section::Head),
        (b"HTTP/1.1 200 OK\r\nContent-Le", Section::Head),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc",
            Section::Body,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc",
            Section::ChunkFraming,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nA: b\r\n",
            Section::Trailers,
        ),
    ];
    for (input, section) in cases {
        assert_eq!(
            every_split(input, eof).error(),
            Some(DecodeError::UnexpectedEof { section }),
            "{section:?}"
        );
    }
}

#[test]
fn two_pipelined_responses_on_a_kept_alive_connection() {
    let input = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc".as_slice(),
        b"\r\nHTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        &chunked(b"{\"reason\":\"x\"}", 4),
        b"trailing",
    ]
    .concat();
    let out = every_split(
        &input,
        Setup {
            responses: 2,
            ..PLAIN
        },
    );
    assert_eq!(
        out.events,
        [
            Ev::Head {
                status: 200,
                framing: Framing::Length(3),
                encoding: ContentEncoding::Identity,
                keep_alive: true
            },
            Ev::Data(b"abc".to_vec()),
            Ev::End {
                keep_alive: true,
                coding_complete: true
            },
            Ev::Head {
                status: 404,
                framing: Framing::Chunked,
                encoding: ContentEncoding::Identity,
                keep_alive: false
            },
            Ev::Data(b"{\"reason\":\"x\"}".to_vec()),
            Ev::End {
                keep_alive: false,
                coding_complete: true
            },
        ]
    );
    assert_eq!(out.rest, 8);
}

#[test]
fn interim_responses_are_skipped() {
    let input = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let out = every_split(input, PLAIN);
    assert_eq!(
        out.events
            .iter()
            .filter(|e| matches!(e, Ev::Head { .. }))
            .count(),
        1
    );
    assert!(matches!(out.events[0], Ev::Head { status: 200, .. }));
    assert_eq!(out.body(), b"ok");
}

#[test]
fn head_limits_and_malformed_heads() {
    let big = b"HTTP/1.1 200 OK\r\nServer: Cowboy\r\nDate: Tue, 03 Nov 2015 13:39:27 GMT\r\n\r\n";
    let out = every_split(
        big,
        Setup {
            head_buf: 40,
            ..PLAIN
        },
    );
    assert_eq!(out.error(), Some(DecodeError::HeadTooLarge { max: 40 }));
    assert!(every_split(
        big,
        Setup {
            head_buf: big.len(),
            ..PLAIN
        }
    )
    .error()
    .is_none());

    let many: Vec<u8> = [
        b"HTTP/1.1 200 OK\r\n".as_slice(),
        &(0..9)
            .flat_map(|i| format!("X-{i}: v\r\n").into_bytes())
            .collect::<Vec<_>>(),
        b"\r\n",
    ]
    .concat();
    assert_eq!(
        every_split(&many, PLAIN).error(),
        Some(DecodeError::TooManyHeaders { max: 8 })
    );

    let bad: [&[u8]; 3] = [
        b"HTTP/2 200 OK\r\n\r\n",
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nBad Name: v\r\n\r\n",
    ];
    for input in bad {
        assert!(matches!(
            every_split(input, PLAIN).error(),
            Some(DecodeError::MalformedHead { .. })
        ));
    }
}

#[test]
fn framing_rules() {
    let framing = |input: &[u8], method: Method| -> Result<(Framing, bool), DecodeError> {
        let mut head_buf = [0u8; 256];
        let mut dec: ResponseDecoder = ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
        dec.set_request_method(method);
        match dec.decode(input)? {
            (_, Event::Head(h)) => Ok((h.framing, h.keep_alive)),
            other => panic!("{other:?}"),
        }
    };
    let get = Method::Get;
    assert_eq!(
        framing(b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", get),
        Ok((Framing::None, true))
    );
    assert_eq!(
        framing(b"HTTP/1.1 304 Not Modified\r\n\r\n", get),
        Ok((Framing::None, true))
    );
    assert_eq!(
        framing(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
            Method::Head
        ),
        Ok((Framing::None, true))
    );
    assert_eq!(
        framing(b"HTTP/1.1 200 OK\r\n\r\n", Method::Connect),
        Ok((Framing::None, false))
    );
    assert_eq!(
        framing(
            b"HTTP/1.1 407 Auth\r\nContent-Length: 0\r\n\r\n",
            Method::Connect
        ),
        Ok((Framing::Length(0), true))
    );
    assert_eq!(
        framing(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
            get
        ),
        Ok((Framing::None, false))
    );
    assert_eq!(
        framing(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: Chunked\r\n\r\n",
            get
        ),
        Ok((Framing::Chunked, true))
    );
    assert_eq!(
        framing(b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n", get),
        Ok((Framing::Length(5), true))
    );
    assert_eq!(
        framing(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n", get),
        Ok((Framing::Length(5), false))
    );
    assert_eq!(
        framing(
            b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 5\r\n\r\n",
            get
        ),
        Ok((Framing::Length(5), true))
    );
    assert_eq!(
        framing(
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n\r\n",
            get
        ),
        Ok((Framing::Length(5), false))
    );
    assert_eq!(
        framing(b"HTTP/1.1 200 OK\r\n\r\n", get),
        Ok((Framing::Close, false))
    );
    let bad_length = Err(DecodeError::InvalidContentLength);
    assert_eq!(
        framing(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            get
        ),
        bad_length
    );
    assert_eq!(
        framing(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", get),
        bad_length
    );
    assert_eq!(
        framing(
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
            get
        ),
        bad_length
    );
    let unsupported = Err(DecodeError::UnsupportedTransferEncoding);
    assert_eq!(
        framing(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            get
        ),
        unsupported
    );
    assert_eq!(
        framing(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
            get
        ),
        unsupported
    );
}

#[test]
fn tunnel_bytes_after_the_head_are_left_to_the_caller() {
    let input = b"HTTP/1.1 200 Connection established\r\n\r\n\x16\x03\x01";
    let out = every_split(
        input,
        Setup {
            method: Method::Connect,
            ..PLAIN
        },
    );
    assert_eq!(out.end(), Some((false, true)));
    assert_eq!(out.rest, 3);
}

#[test]
fn zlib_sync_flush_delivers_text_immediately() {
    let (a, b) = (hex(ZLIB_A), hex(ZLIB_B));
    assert_eq!(&a[a.len() - 4..], b"\x00\x00\xff\xff");
    // Only the part up to the sync flush has arrived: all of its text is out.
    let first = response(DEFLATE_CHUNKED, &chunked(&a, 10)[..]);
    let first = &first[..first.len() - 5]; // without the last chunk
    let out = every_split(first, INFLATE);
    assert_eq!(out.body(), log_lines("FOO", 6, 47));
    assert_eq!(out.end(), None);
    // The whole body, in 7-byte chunks that ignore deflate boundaries.
    let whole = response(DEFLATE_CHUNKED, &chunked(&[a, b].concat(), 7));
    let out = every_split(&whole, INFLATE);
    assert_eq!(out.body(), text());
    assert_eq!(out.end(), Some((true, true)));
}

#[test]
fn zlib_stream_cut_before_its_trailer_is_tolerated() {
    let body = [hex(ZLIB_A), hex(ZLIB_B_TRUNCATED)].concat();
    let out = every_split(&response(DEFLATE_CHUNKED, &chunked(&body, 100)), INFLATE);
    assert_eq!(out.body(), text());
    assert_eq!(out.end(), Some((true, false)));
    // Cut in the middle of the Adler-32 as well.
    let full = [hex(ZLIB_A), hex(ZLIB_B)].concat();
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Encoding: deflate\r\nContent-Length: {}\r\n\r\n",
        full.len() - 2
    );
    let out = every_split(&response(&head, &full[..full.len() - 2]), INFLATE);
    assert_eq!(out.body(), text());
    assert_eq!(out.end(), Some((true, false)));
}

#[test]
fn zlib_corruption_is_detected() {
    let mut full = [hex(ZLIB_A), hex(ZLIB_B)].concat();
    let last = full.len() - 1;
    full[last] ^= 1;
    let out = every_split(&response(DEFLATE_CHUNKED, &chunked(&full, 50)), INFLATE);
    assert_eq!(out.error(), Some(DecodeError::ChecksumMismatch));
    let trailing = [hex(ZLIB_A), hex(ZLIB_B), b"x".to_vec()].concat();
    let out = every_split(&response(DEFLATE_CHUNKED, &chunked(&trailing, 50)), INFLATE);
    assert_eq!(out.error(), Some(DecodeError::TrailingData));
    let garbage = response(DEFLATE_CHUNKED, &chunked(b"\xff\xff\xff\xff", 50));
    assert!(matches!(
        every_split(&garbage, INFLATE).error(),
        Some(DecodeError::InvalidCompressedData { .. })
    ));
}

#[test]
fn raw_deflate_falls_back_like_urllib3() {
    let out = every_split(&response(DEFLATE_CHUNKED, &chunked(&hex(RAW), 1)), INFLATE);
    assert_eq!(out.body(), text());
    assert_eq!(out.end(), Some((true, true)));
}

#[test]
fn gzip_with_file_name_and_checked_trailer() {
    let head = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n";
    let gz = hex(GZIP);
    assert_eq!(gz[3], 0x08, "FNAME");
    let out = every_split(&response(head, &chunked(&gz, 9)), INFLATE);
    assert_eq!(out.body(), text());
    assert_eq!(out.end(), Some((true, true)));
    // Two members, as concatenated gzip files are.
    let out = every_split(
        &response(head, &chunked(&[gz.clone(), gz.clone()].concat(), 64)),
        INFLATE,
    );
    assert_eq!(out.body(), [text(), text()].concat());
    let mut bad = gz.clone();
    let crc_at = bad.len() - 8;
    bad[crc_at] ^= 1;
    let out = every_split(&response(head, &chunked(&bad, 64)), INFLATE);
    assert_eq!(out.error(), Some(DecodeError::Gzip(GzipError::Crc)));
    let out = every_split(&response(head, &chunked(&gz[..gz.len() - 3], 64)), INFLATE);
    assert_eq!(out.end(), Some((true, false)));
}

#[test]
fn window_size_is_checked_against_the_zlib_header() {
    let a = hex(ZLIB_A);
    let small = Setup {
        window: Some(1024),
        ..PLAIN
    };
    let out = every_split(&response(DEFLATE_CHUNKED, &chunked(&a, 16)), small);
    assert_eq!(
        out.error(),
        Some(DecodeError::WindowTooSmall {
            needed: 32768,
            available: 1024
        })
    );
    let w9 = hex(ZLIB_W9);
    let out = every_split(
        &response(DEFLATE_CHUNKED, &chunked(&w9, 16)),
        Setup {
            window: Some(512),
            ..PLAIN
        },
    );
    assert_eq!(out.body(), log_lines("FOO", 6, 47));
    assert_eq!(out.end(), Some((true, true)));
    let out = every_split(
        &response(DEFLATE_CHUNKED, &chunked(&w9, 16)),
        Setup {
            window: Some(256),
            ..PLAIN
        },
    );
    assert_eq!(
        out.error(),
        Some(DecodeError::WindowTooSmall {
            needed: 512,
            available: 256
        })
    );
}

#[test]
fn body_limit_delivers_exactly_the_limit() {
    let limits = Limits {
        max_body_bytes: 100,
        ..Limits::DEFAULT
    };
    let body = [hex(ZLIB_A), hex(ZLIB_B)].concat();
    let out = every_split(
        &response(DEFLATE_CHUNKED, &chunked(&body, 13)),
        Setup { limits, ..INFLATE },
    );
    assert_eq!(out.body(), &text()[..100]);
    assert_eq!(out.error(), Some(DecodeError::BodyTooLarge { max: 100 }));
    let plain = response(
        "HTTP/1.1 200 OK\r\nContent-Length: 150\r\n\r\n",
        &[b'x'; 150],
    );
    let out = every_split(&plain, Setup { limits, ..PLAIN });
    assert_eq!(out.body().len(), 100);
    assert_eq!(out.error(), Some(DecodeError::BodyTooLarge { max: 100 }));
    let exact = response(
        "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n",
        &[b'x'; 100],
    );
    assert_eq!(
        every_split(&exact, Setup { limits, ..PLAIN }).end(),
        Some((true, true))
    );
}

#[test]
fn compressed_body_without_inflate_memory_is_a_typed_error() {
    let out = every_split(
        &response(DEFLATE_CHUNKED, &chunked(&hex(ZLIB_A), 16)),
        PLAIN,
    );
    assert_eq!(
        out.error(),
        Some(DecodeError::CompressedBodyUnsupported {
            encoding: ContentEncoding::Deflate
        })
    );
    let br = b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 3\r\n\r\nabc";
    assert_eq!(
        every_split(br, INFLATE).error(),
        Some(DecodeError::UnsupportedContentEncoding)
    );
    // No body, no problem.
    let empty = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(every_split(empty, PLAIN).end(), Some((true, true)));
}

/// xorshift64*, enough randomness for split points and bodies.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Compresses `data` with miniz_oxide, sync-flushing at `syncs`.
fn compress(data: &[u8], syncs: &[usize], zlib: bool, finish: bool) -> Vec<u8> {
    use miniz_oxide::deflate::core::{
        compress, create_comp_flags_from_zip_params, CompressorOxide, TDEFLFlush,
    };
    let mut c = CompressorOxide::new(create_comp_flags_from_zip_params(
        6,
        if zlib { 15 } else { -15 },
        0,
    ));
    let mut out = vec![0u8; data.len() * 2 + 1024];
    let (mut written, mut start) = (0, 0);
    for (i, &end) in syncs.iter().chain([data.len()].iter()).enumerate() {
        let flush = if i == syncs.len() && finish {
            TDEFLFlush::Finish
        } else {
            TDEFLFlush::Sync
        };
        let (_, used, n) = compress(&mut c, &data[start..end], &mut out[written..], flush);
        assert_eq!(used, end - start);
        written += n;
        start = end;
    }
    out.truncate(written);
    out
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut crc = Crc32::new();
    crc.update(data);
    let header = [0x1F, 0x8B, 8, 0x18, 0, 0, 0, 0, 0, 3, b'f', 0, b'c', 0];
    let trailer = [crc.value().to_le_bytes(), (data.len() as u32).to_le_bytes()].concat();
    [&header[..], &compress(data, &[], false, true), &trailer].concat()
}

#[test]
fn random_bodies_and_random_splits_give_the_same_result() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for round in 0..150 {
        // A body mixing compressible text and noise, up to 40 KiB: rounds 0-4 of every 25
        // are 40 KiB, one of each kind below, so that every coding wraps the 32 KiB window
        // (the fuzz target wraps only a 1 KiB one, which is the same code).
        let len = if round % 25 < 5 {
            40_000
        } else {
            rng.below(3000)
        };
        let body: Vec<u8> = (0..len)
            .map(|i| {
                if (i / 64) % 3 == 0 {
                    rng.next() as u8
                } else {
                    b"log line\n"[i % 9]
                }
            })
            .collect();
        let mut syncs: Vec<usize> = (0..rng.below(4)).map(|_| rng.below(len + 1)).collect();
        syncs.sort_unstable();
        let chunk = 1 + rng.below(1500);
        let (head, encoded, complete) = match round % 5 {
            0 => (
                format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\n"),
                body.clone(),
                true,
            ),
            1 => (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".into(),
                chunked(&body, chunk),
                true,
            ),
            2 => (
                DEFLATE_CHUNKED.into(),
                chunked(&compress(&body, &syncs, true, true), chunk),
                true,
            ),
            3 => (
                DEFLATE_CHUNKED.into(),
                chunked(&compress(&body, &syncs, false, round % 2 == 0), chunk),
                true,
            ),
            _ => {
                let head = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n";
                (head.into(), chunked(&gzip(&body), chunk), true)
            }
        };
        let input = response(&head, &encoded);
        let setup = Setup {
            window: Some(32768),
            ..PLAIN
        };
        let whole = run(&[&input], setup);
        assert_eq!(whole.body(), body, "round {round}");
        assert!(
            whole
                .end()
                .is_some_and(|(k, c)| k && (c == complete || round % 5 == 3)),
            "round {round}"
        );
        for _ in 0..10 {
            let mut pieces = Vec::new();
            let mut rest = &input[..];
            while !rest.is_empty() {
                let max = if rng.below(2) == 0 { 8 } else { 2000 };
                let n = 1 + rng.below(rest.len().min(max));
                pieces.push(&rest[..n]);
                rest = &rest[n..];
            }
            assert_eq!(run(&pieces, setup), whole, "round {round}");
        }
    }
}

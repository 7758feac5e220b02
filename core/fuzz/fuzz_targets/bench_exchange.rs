//! The benchmark-server exchange machine (`bench::exchange::Conversation` and its
//! `Exchange`s) driven by arbitrary adapter events, server bytes and time.
//!
//! Input (via `arbitrary::Unstructured`): the `tx` and `head` buffer sizes, the timeouts
//! (reply, stream idle, connect; each maybe none), then up to 4 exchanges on one
//! conversation, each a request (`GET /status`, a `POST /start` upload of up to 3
//! fuzz-made files, a `GET /log` stream) and up to 24 operations:
//! - adapter events: connected, connect failed, a write of all / part / none of the
//!   offered bytes, flushed, an I/O error, the peer's end of stream, "the idle kept-alive
//!   connection was closed" (between exchanges);
//! - server bytes: arbitrary, or a valid response (`Content-Length`, chunked or
//!   close-delimited, keep-alive or not, any status), split at fuzz-chosen points;
//! - time: steps forward, `handle_timeout` at `now` or at `poll_timeout()`.
//!
//! After every operation the model adapter drains `poll_output`.
//!
//! Invariants: no panic (overflow checks on); `Connect` only without a connection, and
//! at most twice per exchange, twice only for a `GET` (one retry of a stale connection);
//! `Transmit` non-empty and only on an open connection; every connection's bytes start
//! with the request's head; `Flush` only after the request's last byte; once `outcome()`
//! is there, no more output and the same outcome; a `handle_timeout` at or after
//! `poll_timeout()` ends the exchange with a `Timeout` (or the error of a send that had
//! broken), or starts it over with its deadline due (a stale connection's retry); an
//! exchange that ends `Ok` with the connection kept leaves `is_open()`, and one that
//! ends otherwise leaves no connection.
#![no_main]

use std::ops::ControlFlow;
use std::time::Duration;

use benchlink_core::bench::exchange::{
    ClientError, Conversation, Exchange, Output, ReplyBody, ResponseKind, Server, Sink, StreamBody,
    Timeouts,
};
use benchlink_core::bench::request::{File, Log, Start, Status};
use benchlink_core::bench::LogLine;
use benchlink_core::time::Instant;
use libfuzzer_sys::arbitrary::{Result as ArbResult, Unstructured};
use libfuzzer_sys::fuzz_target;

type Ex<'a, 'b> = Exchange<'a, 'b, u8, u8>;
type Error = ClientError<'static, u8, u8>;

/// The model adapter's view of the transport.
#[derive(Debug, Default)]
struct Wire {
    open: bool,
    connecting: bool,
    /// Bytes written on the current connection.
    written: Vec<u8>,
    connects: usize,
    /// The conversation was told the peer closed the open connection (to be closed).
    peer_closed: bool,
}

fn timeout(u: &mut Unstructured<'_>) -> ArbResult<Option<Duration>> {
    Ok(if u.arbitrary()? {
        Some(Duration::from_millis(u.int_in_range(0..=120_000)?))
    } else {
        None
    })
}

fn response(u: &mut Unstructured<'_>) -> ArbResult<Vec<u8>> {
    if u.ratio(1, 4)? {
        return u.arbitrary::<Vec<u8>>();
    }
    let status: u16 = *u.choose(&[200, 200, 200, 404, 413, 500, 204])?;
    let body: Vec<u8> = if u.arbitrary()? {
        br#"{"status":"running"}"#.to_vec()
    } else {
        u.arbitrary()?
    };
    let close = u.arbitrary::<bool>()?;
    let mut out = format!("HTTP/1.1 {status} X\r\n").into_bytes();
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    match u.int_in_range(0u8..=2)? {
        0 => {
            out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
            out.extend_from_slice(&body);
        }
        1 => {
            out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            for piece in body.chunks(u.int_in_range(1..=16)?) {
                out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                out.extend_from_slice(piece);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
        }
        _ => {
            // Close-delimited (HTTP/1.0 style): ends with the connection.
            out = format!("HTTP/1.0 {status} X\r\n\r\n").into_bytes();
            out.extend_from_slice(&body);
        }
    }
    if u.ratio(1, 8)? {
        out.extend_from_slice(b"HTTP/1.1 200"); // bytes after the response
    }
    Ok(out)
}

/// Acts on every output, checking each.
fn drain(
    ex: &mut Ex<'_, '_>,
    wire: &mut Wire,
    now: Instant,
    u: &mut Unstructured<'_>,
    head: &[u8],
) {
    let done_before = ex.outcome();
    while let Some(output) = ex.poll_output(now) {
        assert!(
            done_before.is_none(),
            "output after the outcome: {output:?}"
        );
        match output {
            Output::Connect { host, port } => {
                assert_eq!((host, port), ("bench", 4800));
                assert!(!wire.open && !wire.connecting, "Connect on a connection");
                wire.connects += 1;
                wire.connecting = true;
                wire.written.clear();
                // Connected now, or reported later by an operation.
                if u.ratio(3, 4).unwrap_or(true) {
                    wire.connecting = false;
                    wire.open = true;
                    ex.handle_connected(now);
                } else {
                    return;
                }
            }
            Output::Transmit(bytes) => {
                assert!(!bytes.is_empty(), "empty Transmit");
                assert!(wire.open, "Transmit without a connection");
                let n = match u.int_in_range(0u8..=3).unwrap_or(0) {
                    0 => 1,
                    1 => return, // would block: offered again at the next drain
                    _ => bytes.len(),
                };
                wire.written.extend_from_slice(&bytes[..n]);
                let len = wire.written.len().min(head.len());
                assert_eq!(&wire.written[..len], &head[..len], "not the request's head");
                ex.transmitted(now, n);
            }
            Output::Flush => {
                assert!(wire.open, "Flush without a connection");
                assert!(
                    wire.written.len() >= head.len(),
                    "Flush before the head is out"
                );
                if u.ratio(1, 8).unwrap_or(false) {
                    return; // the flush is reported later
                }
                ex.flushed(now);
            }
            Output::Close => {
                wire.peer_closed = false;
                wire.open = false;
                wire.connecting = false;
            }
        }
    }
    if let Some(before) = done_before {
        assert_eq!(ex.outcome(), Some(before), "the outcome changed");
    }
}

/// One exchange of up to 24 operations, its response going to `sink`; returns its outcome,
/// if it ended.
fn run(
    ex: &mut Ex<'_, '_>,
    sink: &mut dyn Sink,
    wire: &mut Wire,
    now: &mut Instant,
    u: &mut Unstructured<'_>,
    get: bool,
    head: &[u8],
) -> Option<Result<(), Error>> {
    let connects_before = wire.connects;
    wire.written.clear();
    drain(ex, wire, *now, u, head);
    for _ in 0..u.int_in_range(0..=24).unwrap_or(0) {
        if ex.outcome().is_some() {
            break;
        }
        let mut must_time_out = false;
        match u.int_in_range(0u8..=11).unwrap_or(0) {
            0 if wire.connecting => {
                wire.connecting = false;
                wire.open = true;
                ex.handle_connected(*now);
            }
            1 if wire.connecting => {
                wire.connecting = false;
                ex.handle_connect_failed(*now, 1);
            }
            2 | 3 => ex.flushed(*now),
            4 | 5 => {
                let bytes = response(u).unwrap_or_default();
                let mut rest = &bytes[..];
                while !rest.is_empty() {
                    let cut = u.int_in_range(1..=rest.len()).unwrap_or(rest.len());
                    ex.handle_input(*now, &rest[..cut], sink);
                    rest = &rest[cut..];
                }
            }
            6 => ex.handle_input(*now, &u.arbitrary::<Vec<u8>>().unwrap_or_default(), sink),
            // The peer's end of stream (the adapter closes its end when told to).
            7 => ex.handle_closed(*now, sink),
            8 => ex.handle_io_error(*now, 3),
            9 => {
                let step = u.int_in_range(0..=70_000u64).unwrap_or(0);
                *now = now.saturating_add(Duration::from_millis(step));
                ex.handle_timeout(*now);
            }
            _ => {
                if let Some(at) = ex.poll_timeout() {
                    *now = (*now).max(at);
                    must_time_out = true;
                }
                ex.handle_timeout(*now);
            }
        }
        drain(ex, wire, *now, u, head);
        if must_time_out {
            // It ended (a timeout, or the write's error when the send had broken), or —
            // a broken send on a reused connection counts as stale — it started over, its
            // deadline already due.
            let ended = matches!(
                ex.outcome(),
                Some(Err(ClientError::Timeout { .. } | ClientError::Io(_)))
            );
            assert!(
                ended || ex.poll_timeout().is_some_and(|t| t <= *now),
                "a due handle_timeout did not end the exchange: {:?}",
                ex.outcome()
            );
        }
        let connects = wire.connects - connects_before;
        assert!(connects <= 2, "{connects} connects in one exchange");
        assert!(
            get || connects <= 1,
            "a request other than GET was sent twice"
        );
    }
    ex.outcome()
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(tx_len) = u.int_in_range(32usize..=1024) else {
        return;
    };
    let Ok(head_len) = u.int_in_range(64usize..=2048) else {
        return;
    };
    let (Ok(reply), Ok(stream_idle), Ok(connect)) =
        (timeout(&mut u), timeout(&mut u), timeout(&mut u))
    else {
        return;
    };
    let (mut tx, mut head) = (vec![0u8; tx_len], vec![0u8; head_len]);
    let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    talk.set_timeouts(Timeouts { reply, stream_idle });
    talk.set_connect_timeout(connect);
    let mut wire = Wire::default();
    let mut now = Instant::from_secs(1);
    let files: Vec<(String, Vec<u8>)> = (0..u.int_in_range(0..=3).unwrap_or(0))
        .map(|i| (format!("f{i}.txt"), u.arbitrary().unwrap_or_default()))
        .collect();
    let includes: Vec<File<'_>> = files
        .iter()
        .map(|(n, c)| File {
            name: n,
            content: c,
        })
        .collect();
    for _ in 0..u.int_in_range(1..=4).unwrap_or(1) {
        if talk.is_open() && u.ratio(1, 4).unwrap_or(false) {
            talk.handle_peer_closed();
            wire.peer_closed = true;
        }
        let (mut body, mut line, mut err) = ([0u8; 256], [0u8; 64], [0u8; 64]);
        let kind = u.int_in_range(0u8..=2).unwrap_or(0);
        let status = Status { id: 7 };
        let log = Log { id: 7 };
        let start = Start {
            includes: &includes,
            ..Start::new(File {
                name: "s.bdl",
                content: b"#!benchDL\n",
            })
        };
        let mut reply = ReplyBody::new(&mut body);
        let mut lines =
            StreamBody::<LogLine, _>::new(&mut line, &mut err, |_| ControlFlow::Continue(()));
        let (expected, get): (&[u8], bool) = match kind {
            0 => (b"GET /status?id=7&wait=false HTTP/1.1\r\n", true),
            1 => (b"POST /start", false),
            _ => (b"GET /log?id=7 HTTP/1.1\r\n", true),
        };
        let outcome = {
            let sink: &mut dyn Sink = if kind == 2 { &mut lines } else { &mut reply };
            let mut ex: Ex<'_, '_> = match kind {
                0 => talk.exchange(&status, ResponseKind::Reply, now),
                1 => talk.exchange(&start, ResponseKind::Reply, now),
                _ => talk.exchange(&log, ResponseKind::Stream, now),
            };
            run(&mut ex, sink, &mut wire, &mut now, &mut u, get, expected)
        };
        match outcome {
            // An exchange that ended: the connection is kept only after a success.
            Some(Ok(())) => assert_eq!(talk.is_open(), wire.open, "kept alive, or not"),
            // A request that could not be encoded: a kept-alive connection stays as it was
            // when nothing went out, and is closed when part of the request did.
            Some(Err(ClientError::Encode(_))) => {
                let open = wire.open && !wire.peer_closed;
                assert_eq!(talk.is_open(), open, "an unsendable request's connection")
            }
            Some(Err(_)) => assert!(
                !wire.open && !talk.is_open(),
                "a failure leaves a connection"
            ),
            None => {
                // Abandoned mid-way (the adapter stops driving it): close it, as clients do.
                if talk.close() {
                    wire.peer_closed = false;
                    wire.open = false;
                    wire.connecting = false;
                }
            }
        }
    }
});

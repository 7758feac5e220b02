//! The core on the real target: decodes recorded benchmark-server replies and RTM PDUs,
//! checks the role-secret test vectors and drives the RTM client through a scripted
//! reconnect, printing each check over semihosting. Exit code 0 only if every check
//! passed. Then prints the stack high-water mark.
//!
//! ```text
//! cargo run --release --bin checks                          # from examples/firmware/
//! cargo run --release --bin checks --no-default-features    # without the inflate window
//! ```
#![no_std]
#![no_main]

use benchlink_core::bench::exchange::{Buffers, Server};
use benchlink_core::bench::{
    request, JsonRequest, LogDecoder, MetricDecoder, MetricKind, StatKey, Status,
};
use benchlink_core::blocking::bench::BenchClient;
use benchlink_core::blocking::{embedded_io, Transport};
use benchlink_core::http::{Cursor, Event, Limits, ResponseDecoder};
use benchlink_core::rtm::auth::{role_secret_hash, SPEC_VECTORS};
use benchlink_core::rtm::pdu::{Id, Incoming};
use benchlink_core::rtm::{
    Ack, Bytes, Client, ClientState, Config, Handler, Mode, Outcome, Pending, Slots, SubState,
    SubscribeArgs, SubscriptionSlot, SubscriptionSlots, Ticket, Transmit,
};
use benchlink_core::time::Instant;
use benchlink_core::ws::{check_response, Key, Message, Session};
use benchlink_firmware::{exit, stack, Host};
use cortex_m_rt::entry;

type Check = Result<(), &'static str>;

/// A named check.
type Named = (&'static str, fn() -> Check);

/// Fails the check with `why` unless `cond`.
fn ensure(cond: bool, why: &'static str) -> Check {
    if cond {
        Ok(())
    } else {
        Err(why)
    }
}

#[entry]
fn main() -> ! {
    stack::paint();
    let mut host = Host::open();
    host.str("benchlink firmware checks (mps2-an386, Cortex-M4)\n");
    let checks: &[Named] = &[
        (
            "http: /status reply (content-length, 7-byte reads)",
            status_reply,
        ),
        ("http: /results reply (chunked, spec 4.9.2)", results_reply),
        (
            "http: /data metric lines (chunked, reads of 1..13 bytes)",
            data_lines,
        ),
        ("http: /log stream (chunked, identity)", log_plain),
        #[cfg(feature = "deflate")]
        (
            "http: /log stream (chunked, zlib, 32 KiB window)",
            log_deflate,
        ),
        #[cfg(not(feature = "deflate"))]
        (
            "http: /log stream (zlib) without deflate support is a typed error",
            log_deflate_unsupported,
        ),
        (
            "blocking: BenchClient over an embedded-io transport (7-byte reads)",
            blocking_status,
        ),
        ("rtm: subscription data PDU", pdu_subscription_data),
        ("rtm: publish/ok PDU", pdu_publish_ok),
        ("rtm: role-secret auth, spec 4.3 vectors 1-7", auth_vectors),
        ("ws: upgrade accept and a server frame", ws_upgrade),
        (
            "rtm: client reconnect resubscribes from the tracked position",
            client_reconnect,
        ),
    ];
    let mut failed = 0u64;
    for (name, check) in checks {
        host.str("check ").str(name).str(" ... ");
        match check() {
            Ok(()) => host.str("ok\n"),
            Err(why) => {
                failed += 1;
                host.str("FAILED: ").str(why).str("\n")
            }
        };
    }
    let passed = checks.len() as u64 - failed;
    host.str("peak stack: ")
        .u64(stack::peak() as u64)
        .str(" bytes\n");
    host.u64(passed)
        .str(" passed, ")
        .u64(failed)
        .str(" failed\n");
    exit(failed == 0)
}

// ---------------------------------------------------------------------------------------
// HTTP replies of the benchmark server
// ---------------------------------------------------------------------------------------

/// Feeds `response` to `decoder` in reads of the sizes in `reads` (cycled), handing
/// every decoded body slice to `body`. Returns the status once the response ended.
fn decode_response<const H: usize>(
    decoder: &mut ResponseDecoder<'_, H>,
    response: &[u8],
    reads: &[usize],
    mut body: impl FnMut(&[u8]) -> Check,
) -> Result<u16, &'static str> {
    let mut status = None;
    let mut rest = response;
    let mut k = 0;
    while !rest.is_empty() {
        let n = reads[k % reads.len()].min(rest.len());
        k += 1;
        let (mut read, tail) = rest.split_at(n);
        rest = tail;
        loop {
            let (used, event) = decoder.decode(read).map_err(|_| "HTTP decode error")?;
            read = &read[used..];
            match event {
                Event::Head(head) => status = Some(head.status),
                Event::Data(data) => body(data)?,
                Event::End { .. } => {
                    ensure(read.is_empty() && rest.is_empty(), "bytes after the end")?;
                    return status.ok_or("no head");
                }
                Event::NeedMore => break,
            }
        }
    }
    Err("response did not end")
}

/// Collects a whole (small) body into `buf`.
fn collect<'b>(
    response: &[u8],
    reads: &[usize],
    buf: &'b mut [u8],
) -> Result<(u16, &'b [u8]), &'static str> {
    let mut head_buf = [0u8; 256];
    let mut decoder: ResponseDecoder<'_, 8> =
        ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
    let mut len = 0;
    let status = decode_response(&mut decoder, response, reads, |data| {
        let dst = buf
            .get_mut(len..len + data.len())
            .ok_or("body larger than the buffer")?;
        dst.copy_from_slice(data);
        len += data.len();
        Ok(())
    })?;
    Ok((status, &buf[..len]))
}

fn status_reply() -> Check {
    let mut body = [0u8; 256];
    let (code, body) = collect(
        include_bytes!("../../fixtures/status.http"),
        &[7],
        &mut body,
    )?;
    let reply = request::Status::read_reply(code, body).map_err(|_| "not a status reply")?;
    ensure(reply.status == Status::Complete, "status is not complete")?;
    ensure(reply.status.is_final(), "complete is not final")?;
    let finish = reply.finish_time.ok_or("no finish_time")?;
    ensure(
        finish.unix_seconds() == 1_446_558_087,
        "finish_time is not 2015-11-03T13:41:27Z",
    )?;
    ensure(
        reply.create_time.map(|t| t.unix_seconds()) == Some(1_446_557_960),
        "wrong create_time",
    )
}

/// A recorded server on the other end of an embedded-io byte stream: it takes the
/// request, then answers with `reply` in reads of `step` bytes; its clock advances 1 ms a
/// look.
struct Scripted {
    reply: &'static [u8],
    step: usize,
    request: [u8; 256],
    written: usize,
    now: Instant,
}

impl embedded_io::ErrorType for Scripted {
    type Error = embedded_io::ErrorKind;
}

impl embedded_io::Read for Scripted {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
        let n = self.step.min(buf.len()).min(self.reply.len());
        let (now, rest) = self.reply.split_at(n);
        buf.get_mut(..n)
            .ok_or(embedded_io::ErrorKind::Other)?
            .copy_from_slice(now);
        self.reply = rest;
        Ok(n)
    }
}

impl embedded_io::Write for Scripted {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
        let room = self.request.len() - self.written;
        let n = buf.len().min(room);
        self.request[self.written..self.written + n].copy_from_slice(&buf[..n]);
        self.written += n;
        Ok(n)
    }

    fn flush(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

impl Transport for Scripted {
    fn now(&mut self) -> Instant {
        self.now = self
            .now
            .saturating_add(core::time::Duration::from_millis(1));
        self.now
    }

    fn wait_readable(&mut self, _deadline: Option<Instant>) -> Result<bool, Self::Error> {
        // Everything is there once the request was written; an empty script is EOF.
        Ok(self.written > 0)
    }

    fn connect(&mut self, _host: &str, _port: u16, tls: bool) -> Result<(), Self::Error> {
        if tls {
            return Err(embedded_io::ErrorKind::Unsupported);
        }
        Ok(())
    }

    fn close(&mut self) {}
}

/// Core's blocking benchmark client on the target: the request it writes, the recorded
/// `/status` reply it reads back.
fn blocking_status() -> Check {
    let transport = Scripted {
        reply: include_bytes!("../../fixtures/status.http"),
        step: 7,
        request: [0; 256],
        written: 0,
        now: Instant::ZERO,
    };
    let (mut rx, mut tx, mut head, mut body, mut line) =
        ([0u8; 64], [0u8; 256], [0u8; 512], [0u8; 256], [0u8; 8]);
    let buffers = Buffers {
        rx: &mut rx,
        tx: &mut tx,
        head: &mut head,
        body: &mut body,
        line: &mut line,
    };
    let server = Server::new("bench.local", 4800);
    let mut client = BenchClient::new(transport, server, buffers).map_err(|_| "client")?;
    let complete = client
        .call(&request::Status { id: 9 })
        .map(|reply| reply.status == Status::Complete)
        .map_err(|_| "no status reply")?;
    ensure(complete, "status is not complete")?;
    let sent = client.into_transport();
    ensure(
        sent.request
            .starts_with(b"GET /status?id=9&wait=false HTTP/1.1\r\nHost: bench.local:4800\r\n"),
        "wrong request head",
    )
}

fn results_reply() -> Check {
    let mut body = [0u8; 512];
    let (code, body) = collect(
        include_bytes!("../../fixtures/results.http"),
        &[64, 3],
        &mut body,
    )?;
    let results = request::Results::read_reply(code, body).map_err(|_| "not a results reply")?;
    ensure(results.iter().count() == 2, "expected two metrics")?;
    let print = results.get("print").ok_or("no print metric")?;
    ensure(print.kind == MetricKind::Counter, "print is not a counter")?;
    ensure(
        print.value.and_then(|v| v.as_i64()) == Some(900),
        "print value is not 900",
    )?;
    ensure(
        print
            .stat(StatKey::Percentile("50"))
            .is_some_and(|n| n == "2.99"),
        "print rps p50 is not 2.99",
    )?;
    ensure(
        print.stat(StatKey::Max).is_some_and(|n| n == "3.05"),
        "print rps max is not 3.05",
    )?;
    ensure(print.stats().count() == 5, "print has not 5 rps stats")?;
    let la = results
        .get("systemload.la1.mzb_director49_0")
        .ok_or("no systemload metric")?;
    ensure(la.kind == MetricKind::Gauge, "systemload is not a gauge")?;
    ensure(
        la.stat(StatKey::Min).is_some_and(|n| n == "0.0"),
        "systemload min is not 0.0",
    )
}

fn data_lines() -> Check {
    let mut head_buf = [0u8; 256];
    let mut decoder: ResponseDecoder<'_, 8> =
        ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
    let mut line_buf = [0u8; 64];
    let mut metrics = MetricDecoder::new(&mut line_buf);
    let (mut count, mut print_sum, mut floats) = (0u32, 0i64, 0u32);
    let mut last_ts = 0;
    let code = decode_response(
        &mut decoder,
        include_bytes!("../../fixtures/data.http"),
        &[1, 2, 3, 5, 7, 11, 13],
        |data| {
            // The body slices again in odd pieces: the line decoder keeps partial lines.
            for piece in data.chunks(3) {
                let mut input = piece;
                while let Some(sample) = metrics.next(&mut input) {
                    let sample = sample.map_err(|_| "bad metric line")?;
                    count += 1;
                    last_ts = sample.timestamp;
                    // Integers with the integer parser; the floats through the float
                    // parser (this image checks it on the target) and as text.
                    let (value, int) = (sample.value, sample.value.as_i64());
                    match (sample.name, int) {
                        ("print", Some(n)) => print_sum += n,
                        ("print.rps", None) if count == 2 => {
                            ensure(value.as_f64() == 2.997_591_734_800_261_4, "print.rps value")?;
                            floats += 1;
                        }
                        ("latency.99", None) => {
                            ensure(
                                value.as_f64() == 1.0e-5 && value == "1.0e-5",
                                "1.0e-5 value",
                            )?;
                            floats += 1;
                        }
                        ("metric_merging_time", None) => {
                            ensure(
                                value.as_f64() == 1.0e20 && value == "1.0e20",
                                "1.0e20 value",
                            )?;
                            floats += 1;
                        }
                        _ => {}
                    }
                }
            }
            Ok(())
        },
    )?;
    ensure(code == 200, "status is not 200")?;
    ensure(metrics.finish().is_none(), "unterminated last line")?;
    ensure(count == 10, "expected 10 samples")?;
    ensure(print_sum == 180, "print values do not sum to 180")?;
    ensure(floats == 3, "float samples missing")?;
    ensure(last_ts == 1_439_245_044, "last timestamp")
}

const LOG_FIRST: &str =
    "14:02:00.000 [info] <0.200.0> [ Node ] stage init: line 0 of the system log";
const LOG_LAST: &str =
    "14:02:59.403 [info] <0.319.0> [ Node ] stage running: line 119 of the system log";
/// FNV-1a over every line and its `\n` (fixtures/gen.py).
const LOG_FNV: u32 = 0x372a_c4ee;

/// Counts and hashes the log lines of a `/log` response decoded by `decoder`.
fn check_log(decoder: &mut ResponseDecoder<'_>, response: &[u8], reads: &[usize]) -> Check {
    let mut line_buf = [0u8; 128];
    let mut log = LogDecoder::new(&mut line_buf);
    let (mut lines, mut fnv, mut first_ok, mut last_ok) = (0u32, 0x811c_9dc5u32, false, false);
    let code = decode_response(decoder, response, reads, |data| {
        let mut input = data;
        while let Some(line) = log.next(&mut input) {
            let line = line.map_err(|_| "bad log line")?;
            for &b in line.as_bytes().iter().chain(b"\n") {
                fnv = (fnv ^ u32::from(b)).wrapping_mul(0x0100_0193);
            }
            first_ok |= lines == 0 && line == LOG_FIRST;
            last_ok = line == LOG_LAST;
            lines += 1;
        }
        Ok(())
    })?;
    ensure(code == 200, "status is not 200")?;
    ensure(log.finish().is_none(), "unterminated last line")?;
    ensure(lines == 120, "expected 120 lines")?;
    ensure(first_ok && last_ok, "first or last line differs")?;
    ensure(fnv == LOG_FNV, "log content hash differs")
}

fn log_plain() -> Check {
    let mut head_buf = [0u8; 256];
    let mut decoder: ResponseDecoder<'_> =
        ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
    check_log(
        &mut decoder,
        include_bytes!("../../fixtures/log.http"),
        &[536, 97],
    )
}

#[cfg(feature = "deflate")]
fn log_deflate() -> Check {
    use benchlink_core::http::{DecompressorOxide, InflateMemory};
    use core::mem::MaybeUninit;
    use core::ptr::addr_of_mut;

    // The inflate memory lives in statics (.bss), as on a device: ~11 KB of decompressor
    // state and the 32 KiB window the server's `78 9C` streams need.
    static mut STATE: MaybeUninit<DecompressorOxide> = MaybeUninit::uninit();
    static mut WINDOW: [u8; 32 * 1024] = [0; 32 * 1024];
    // SAFETY: this check runs once, single-threaded, and is the only user of both
    // statics; STATE is initialised before the reference is taken.
    let (state, window) = unsafe {
        let state = &mut *addr_of_mut!(STATE);
        state.write(DecompressorOxide::new());
        (state.assume_init_mut(), &mut *addr_of_mut!(WINDOW))
    };
    let memory = InflateMemory::new(state, window).map_err(|_| "bad window")?;
    let mut head_buf = [0u8; 256];
    let mut decoder = ResponseDecoder::new(&mut head_buf, Some(memory), Limits::DEFAULT);
    check_log(
        &mut decoder,
        include_bytes!("../../fixtures/log.deflate.http"),
        &[13, 64, 5],
    )
}

/// Built without core's `deflate` feature there is no inflate code and no inflate
/// memory: the compressed body must fail with the typed error, not decode as garbage.
#[cfg(not(feature = "deflate"))]
fn log_deflate_unsupported() -> Check {
    use benchlink_core::http::{ContentEncoding, DecodeError};
    let mut head_buf = [0u8; 256];
    let mut decoder: ResponseDecoder<'_, 8> =
        ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
    let mut input = &include_bytes!("../../fixtures/log.deflate.http")[..];
    loop {
        match decoder.decode(input) {
            Ok((used, Event::Head(_))) => input = &input[used..],
            Ok(_) => return Err("the compressed body was not refused"),
            Err(e) => {
                return ensure(
                    e == DecodeError::CompressedBodyUnsupported {
                        encoding: ContentEncoding::Deflate,
                    },
                    "not CompressedBodyUnsupported",
                )
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// RTM
// ---------------------------------------------------------------------------------------

fn pdu_subscription_data() -> Check {
    let text = r#"{"action":"rtm/subscription/data","body":{"subscription_id":"benchmarks.7.metrics","position":"1479315802:3","messages":[{"ts":1439245024,"metric":"print","value":30},"two",null]}}"#;
    let Ok(Incoming::Data(data)) = Incoming::parse(text) else {
        return Err("not classified as subscription data");
    };
    ensure(
        data.subscription_id == "benchmarks.7.metrics",
        "subscription id",
    )?;
    ensure(
        data.position.is_some_and(|p| p == "1479315802:3"),
        "position",
    )?;
    let mut messages = data.messages.elements();
    let first = messages.next().ok_or("no messages")?;
    ensure(
        first.raw().as_json() == Some(r#"{"ts":1439245024,"metric":"print","value":30}"#),
        "first message is not passed through raw",
    )?;
    ensure(
        first.get("value").and_then(|v| v.as_u64()) == Some(30),
        "message value",
    )?;
    ensure(
        messages
            .next()
            .is_some_and(|m| m.raw().as_json() == Some(r#""two""#)),
        "second message",
    )?;
    ensure(
        messages.next().is_some_and(|m| m.is_null()) && messages.next().is_none(),
        "third message",
    )
}

fn pdu_publish_ok() -> Check {
    let text = r#"{"action":"rtm/publish/ok","id":7,"body":{"position":"1479315802:0"}}"#;
    let Ok(Incoming::Reply { id, pdu }) = Incoming::parse(text) else {
        return Err("not classified as a reply");
    };
    ensure(id == Id::Int(7), "id is not 7")?;
    ensure(
        pdu.position().is_some_and(|p| p == "1479315802:0"),
        "position",
    )?;
    ensure(
        matches!(
            Incoming::parse(r#"{"action":"rtm/publish/ok"}"#),
            Err(_) | Ok(Incoming::Ignored(_))
        ),
        "a reply without id is accepted",
    )
}

fn auth_vectors() -> Check {
    const WHICH: [&str; 7] = [
        "vector 1", "vector 2", "vector 3", "vector 4", "vector 5", "vector 6", "vector 7",
    ];
    for (v, which) in SPEC_VECTORS.iter().zip(WHICH) {
        ensure(&role_secret_hash(v.secret, v.nonce) == v.hash, which)?;
    }
    Ok(())
}

fn ws_upgrade() -> Check {
    let key = Key::new(*b"the sample nonce");
    let read = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                 Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n\x81\x05hello";
    let mut head_buf = [0u8; 256];
    let mut http: ResponseDecoder<'_, 8> =
        ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
    let (used, event) = http.decode(read).map_err(|_| "upgrade response")?;
    let Event::Head(head) = event else {
        return Err("no head");
    };
    check_response(&head, &key, None).map_err(|_| "accept check failed")?;
    let mut rx = [0u8; 64];
    let mut session = Session::new(&mut rx, || [1, 2, 3, 4]);
    let (n, message) = session.handle(&read[used..]).map_err(|_| "frame")?;
    ensure(
        n == 7 && message == Some(Message::Text("hello")),
        "text frame",
    )?;
    let mut tx = [0u8; 16];
    let mut out = Cursor::new(&mut tx);
    session.send_text("hi", &mut out).map_err(|_| "send")?;
    ensure(
        out.written() == [0x81, 0x82, 1, 2, 3, 4, b'h' ^ 1, b'i' ^ 2],
        "masked client frame",
    )
}

/// Records what the client reports.
#[derive(Default)]
struct Recorder {
    data: u32,
    acked: u32,
    subscribed: u32,
}

impl Handler for Recorder {
    fn reply(&mut self, _ticket: Ticket, outcome: Outcome<'_>) {
        if let Outcome::Ok(_) = outcome {
            self.acked += 1;
        }
    }
    fn subscription_state(&mut self, _key: &str, _leave: SubState, enter: SubState) {
        if enter == SubState::Subscribed {
            self.subscribed += 1;
        }
    }
    fn subscription_data(
        &mut self,
        _key: &str,
        data: benchlink_core::rtm::pdu::SubscriptionData<'_>,
    ) {
        self.data += data.messages.elements().count() as u32;
    }
}

const CHAN: &str = "benchmarks.7.metrics";

/// Takes one transmit and checks it is `Send` of exactly `expected`.
fn expect_send<S: SubscriptionSlots, P: Slots, Q: Bytes, O: Bytes, A: Bytes>(
    client: &mut Client<S, P, Q, O, A>,
    expected: &str,
    why: &'static str,
) -> Check {
    match client.poll_transmit() {
        Some(Transmit::Send(text)) if text == expected => Ok(()),
        _ => Err(why),
    }
}

/// The resubscribe after a reconnect: ids restart at 0, and the reliable subscription
/// resumes from the position of the last data PDU.
const RESUBSCRIBE: &str = r#"{"action":"rtm/subscribe","id":0,"body":{"channel":"benchmarks.7.metrics","fast_forward":true,"position":"1479315802:6"}}"#;

/// In `Awaiting` with its reconnect deadline at `at`: nothing happens a microsecond
/// before, a `Connect` at `at`; then the connection opens.
/// The client of the reconnect check: 512-byte queue and outbox.
type Small = Client<[SubscriptionSlot; 1], [Pending; 4], [u8; 512], [u8; 512], [u8; 0]>;

fn reconnect_at<H: Handler>(client: &mut Small, h: &mut H, at: Instant) -> Check {
    client.handle_timeout(Instant::from_micros(at.as_micros() - 1), h);
    ensure(client.state() == ClientState::Awaiting, "reconnected early")?;
    ensure(
        client.poll_transmit().is_none(),
        "transmit before the deadline",
    )?;
    client.handle_timeout(at, h);
    ensure(
        client.state() == ClientState::Connecting,
        "not Connecting at the deadline",
    )?;
    ensure(
        client.poll_transmit() == Some(Transmit::Connect),
        "no Connect at the deadline",
    )?;
    ensure(client.poll_transmit().is_none(), "more than Connect")?;
    client.handle_connected(at + core::time::Duration::from_millis(50), h);
    ensure(
        client.state() == ClientState::Connected,
        "not Connected again",
    )
}

fn client_reconnect() -> Check {
    let config = Config {
        jitter_seed: 0, // no jitter: the deadline is exact
        ..Config::default()
    };
    let mut client: Small = Client::new(
        config,
        [SubscriptionSlot::EMPTY; 1],
        [Pending::EMPTY; 4],
        [0; 512],
        [0; 512],
        [],
    );
    let mut h = Recorder::default();
    let ms = Instant::from_millis;

    // Start: the client asks for a connection.
    client.start(ms(0), &mut h);
    ensure(
        client.state() == ClientState::Connecting,
        "start: not Connecting",
    )?;
    ensure(
        client.poll_transmit() == Some(Transmit::Connect),
        "start: no Connect",
    )?;
    ensure(client.poll_transmit().is_none(), "start: more than Connect")?;
    client.handle_connected(ms(100), &mut h);
    ensure(client.state() == ClientState::Connected, "not Connected")?;

    // Subscribe (reliable) and get data with a position.
    client
        .subscribe(
            ms(200),
            CHAN,
            Mode::Reliable,
            SubscribeArgs::default(),
            &mut h,
        )
        .map_err(|_| "subscribe refused")?;
    expect_send(
        &mut client,
        r#"{"action":"rtm/subscribe","id":0,"body":{"channel":"benchmarks.7.metrics","fast_forward":true}}"#,
        "first subscribe PDU",
    )?;
    client.handle_message(
        ms(250),
        r#"{"action":"rtm/subscribe/ok","id":0,"body":{"subscription_id":"benchmarks.7.metrics","position":"1479315802:0"}}"#,
        &mut h,
    );
    ensure(
        client.subscription_state(CHAN) == Some(SubState::Subscribed),
        "not Subscribed",
    )?;
    client.handle_message(
        ms(300),
        r#"{"action":"rtm/subscription/data","body":{"subscription_id":"benchmarks.7.metrics","position":"1479315802:6","messages":[{"v":1},{"v":2}]}}"#,
        &mut h,
    );
    ensure(h.data == 2, "data not delivered")?;
    let ticket = client
        .publish(
            ms(320),
            CHAN,
            r#"{"v":3}"#,
            Ack::Reply { deadline: None },
            &mut h,
        )
        .map_err(|_| "publish refused")?;
    ensure(ticket.is_some(), "publish without ticket")?;
    expect_send(
        &mut client,
        r#"{"action":"rtm/publish","id":1,"body":{"channel":"benchmarks.7.metrics","message":{"v":3}}}"#,
        "publish PDU",
    )?;
    client.handle_message(
        ms(340),
        r#"{"action":"rtm/publish/ok","id":1,"body":{"position":"1479315802:7"}}"#,
        &mut h,
    );
    ensure(h.acked == 1, "publish not acked")?;

    // The connection drops: Awaiting. The connection got replies, so it proved stable and
    // the next attempt is reconnect_interval (1 s) after the start of the last one (t=0).
    client.handle_closed(ms(500), &mut h);
    ensure(
        client.state() == ClientState::Awaiting,
        "not Awaiting after close",
    )?;
    ensure(
        client.subscription_state(CHAN) == Some(SubState::Unsubscribed),
        "subscription not Unsubscribed while disconnected",
    )?;
    ensure(
        client.poll_timeout() == Some(ms(1_000)),
        "reconnect deadline is not t=1 s",
    )?;
    reconnect_at(&mut client, &mut h, ms(1_000))?;

    // Drop again before any reply: a failed attempt, so the delay doubles (2 s from the
    // attempt's start), and the resubscribe still asks for the tracked position.
    expect_send(
        &mut client,
        RESUBSCRIBE,
        "resubscribe PDU without the tracked position",
    )?;
    client.handle_closed(ms(1_100), &mut h);
    ensure(
        client.state() == ClientState::Awaiting,
        "not Awaiting after 2nd close",
    )?;
    ensure(
        client.poll_timeout() == Some(ms(3_000)),
        "backoff did not double to t=3 s",
    )?;
    reconnect_at(&mut client, &mut h, ms(3_000))?;
    expect_send(
        &mut client,
        RESUBSCRIBE,
        "2nd resubscribe PDU without the tracked position",
    )?;
    ensure(
        client.poll_transmit().is_none(),
        "unexpected transmit after resubscribe",
    )?;
    client.handle_message(
        ms(3_100),
        r#"{"action":"rtm/subscribe/ok","id":0,"body":{"subscription_id":"benchmarks.7.metrics","position":"1479315802:6"}}"#,
        &mut h,
    );
    ensure(h.subscribed == 2, "not subscribed twice")?;
    ensure(
        client.subscription_state(CHAN) == Some(SubState::Subscribed),
        "not Subscribed after reconnect",
    )
}

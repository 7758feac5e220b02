//! The firmware benchmark agent, as a device would link it: both protocols through the
//! library's blocking drivers — the benchmark requests through core's
//! [`BenchClient`](benchlink_core::blocking::bench::BenchClient), the messaging link
//! (WebSocket upgrade and accept check, framing, pings, dead-peer detection, reconnect,
//! the RTM client) as core's [`Link`] driven by [`blocking::rtm::run`](rtm_run) — with no
//! TLS and no network driver. The transports are in-memory loopbacks to two scripted
//! servers (the test doubles of `mod loopback`), so the image's flash and RAM are the
//! protocol stack's, and running it in QEMU measures its stack.
//!
//! The flow is the std agent's (`examples/src/bin/agent.rs`): subscribe to
//! `benchmarks.<id>.metrics`, read the benchmark's `/status`, stream `/data` and publish
//! every sample to the channel as `{"ts":…,"metric":…,"value":…}` (the value's text is
//! forwarded as received: no float is parsed or formatted), read `/results`,
//! stream the zlib-compressed `/log` (with the `deflate` feature), and wait until every
//! publish was acknowledged and came back on the subscription. Exit code 0 when it all
//! did; the only output is one summary line (semihosting, no `core::fmt`).
//!
//! Features (each an image of `.ci/size-report`): `serde` publishes the samples with
//! `publish_typed` (without it, their JSON is written with core's object writer and
//! published as text); `cbor` makes the messaging link speak CBOR, the loopback server
//! included.
#![no_std]
#![no_main]

use core::ops::ControlFlow;
use core::time::Duration;

use benchlink_core::bench::exchange::{Buffers, Server};
use benchlink_core::bench::{request, Sample, Status};
use benchlink_core::blocking::bench::BenchClient;
use benchlink_core::blocking::embedded_io::{ErrorKind, ErrorType, Read, Write};
use benchlink_core::blocking::rtm::run as rtm_run;
use benchlink_core::blocking::Transport;
use benchlink_core::http::Cursor;
#[cfg(feature = "serde")]
use benchlink_core::json::typed::RawJson;
use benchlink_core::rtm::pdu::{Action, Encoding, Id, Pdu};
use benchlink_core::rtm::{
    Ack, ClientState, Config, Handler, Link, LinkConfig, Mode, Outcome, Pending, SubState,
    SubscribeArgs, SubscriptionSlot, Ticket,
};
use benchlink_core::time::Instant;
use benchlink_firmware::{exit, stack, Host};
use cortex_m_rt::entry;

type Result<T = ()> = core::result::Result<T, &'static str>;

const BENCH_ID: u64 = 7;
/// The channel's name as a literal, for the loopback's PDUs built with `concat!`.
macro_rules! channel {
    () => {
        "benchmarks.7.metrics"
    };
}
const CHANNEL: &str = channel!();
/// The messaging link: one subscription, 4 requests in flight, 256 bytes of offline
/// queue and of outbox (the largest PDU: the samples' are under 160 bytes).
type RtmLink<'b> = Link<&'b mut [u8], [SubscriptionSlot; 1], [Pending; 4]>;
/// The offline queue and the outbox (the largest PDU sent: a sample publish).
const QUEUE_LEN: usize = 256;
const OUTBOX_LEN: usize = 256;
/// The link's transmit buffer: the upgrade request, then the `101` head in its place
/// (core's minimum), then pings, pongs and the close; PDUs go out from the outbox.
const TX_LEN: usize = benchlink_core::rtm::MIN_TX;
/// The link's receive buffer: the largest message it accepts (the echoed samples are
/// under 220 bytes).
const RX_LEN: usize = 320;
/// How the messaging link's PDUs travel.
#[cfg(not(feature = "cbor"))]
const ENCODING: Encoding = Encoding::Json;
#[cfg(feature = "cbor")]
const ENCODING: Encoding = Encoding::Cbor;

#[entry]
fn main() -> ! {
    stack::paint();
    let outcome = run();
    let peak = stack::peak();
    let mut host = Host::open();
    match outcome {
        Ok(report) => {
            host.str("agent: published ")
                .u64(report.published.into())
                .str(", acked ")
                .u64(report.acked.into())
                .str(", received ")
                .u64(report.received.into())
                .str(", log lines ")
                .u64(report.log_lines.into())
                .str("; peak stack ")
                .u64(peak as u64)
                .str(" bytes\n");
            exit(true)
        }
        Err(why) => {
            host.str("agent FAILED: ").str(why).str("\n");
            exit(false)
        }
    }
}

struct Report {
    published: u32,
    acked: u32,
    received: u32,
    log_lines: u32,
}

fn run() -> Result<Report> {
    // Messaging first: connected and subscribed before the samples flow. The link is
    // built in place and used where it was built (a moved copy would stay in this frame).
    let (mut rx, mut tx) = ([0u8; RX_LEN], [0u8; TX_LEN]);
    let (mut queue, mut outbox) = ([0u8; QUEUE_LEN], [0u8; OUTBOX_LEN]);
    let buffers = benchlink_core::rtm::Buffers {
        rx: &mut rx[..],
        tx: &mut tx[..],
        queue: &mut queue[..],
        outbox: &mut outbox[..],
        // The agent subscribes to a channel: no view, no extra arguments.
        subscription_args: &mut [],
    };
    let mut made = Rtm::new(buffers);
    let rtm = match &mut made {
        Ok(rtm) => rtm,
        Err(e) => return Err(*e),
    };
    rtm.start()?;
    let (published, log_lines) = benchmark(rtm)?;
    rtm.settle();
    let report = Report {
        published,
        acked: rtm.app.acked,
        received: rtm.app.received,
        log_lines,
    };
    if report.published == 0
        || report.acked != report.published
        || report.received != report.published
        || rtm.app.failed
    {
        return Err("a sample did not make the round trip");
    }
    Ok(report)
}

/// The benchmark server's part, out of line (its client and buffers are gone before
/// the last settle): `/status`, `/data` with every sample published as it arrives,
/// `/results`, and the `/log` with the `deflate` feature. Returns the samples published
/// and the log lines read.
#[inline(never)]
fn benchmark(rtm: &mut Rtm<'_>) -> Result<(u32, u32)> {
    // Sized for this server's replies: request heads under 192 bytes, response heads
    // under 160, the largest JSON reply (`/results`, 226 bytes) under 240, lines under
    // 96.
    let (mut rx, mut tx, mut head, mut body, mut line) =
        ([0u8; 96], [0u8; 192], [0u8; 160], [0u8; 240], [0u8; 96]);
    let buffers = Buffers {
        rx: &mut rx,
        tx: &mut tx,
        head: &mut head,
        body: &mut body,
        line: &mut line,
    };
    // Built out of line and used where it was put: no moved copies in this frame.
    let mut made = new_bench(buffers);
    let bench = match &mut made {
        Ok(bench) => bench,
        Err(e) => return Err(*e),
    };

    check_status(bench)?;
    let published = stream_samples(bench, rtm)?;
    check_results(bench)?;

    // The system log, a zlib stream.
    #[allow(unused_mut)]
    let mut log_lines = 0u32;
    #[cfg(feature = "deflate")]
    {
        let mut bad = false;
        bench
            .stream(&request::Log { id: BENCH_ID }, |line| {
                bad |= line.is_err();
                log_lines += 1;
                ControlFlow::Continue(())
            })
            .map_err(|_| "/log")?;
        if bad {
            return Err("bad log line");
        }
    }
    Ok((published, log_lines))
}

/// The benchmark client over the loopback.
type Bench<'b> = BenchClient<'b, loopback::HttpServer>;

/// The benchmark client, with the inflate window under the `deflate` feature.
#[inline(never)]
fn new_bench(buffers: Buffers<'_>) -> Result<Bench<'_>> {
    let server = Server {
        user_agent: "benchlink-firmware/0.1",
        ..Server::new("mzbench.local", 4800)
    };
    let bench = BenchClient::new(loopback::HttpServer::new(), server, buffers)
        .map_err(|_| "bench client")?;
    #[cfg(feature = "deflate")]
    let bench = {
        let (state, window) = inflate_memory().ok_or("inflate memory")?;
        bench
            .with_inflate(state, window)
            .map_err(|_| "inflate memory")?
    };
    Ok(bench)
}

/// Where is the benchmark? Each request in a step of its own, out of line: its reply
/// and request records are in that step's frame only.
#[inline(never)]
fn check_status(bench: &mut Bench<'_>) -> Result {
    let status = bench
        .call(&request::Status { id: BENCH_ID })
        .map_err(|_| "/status")?;
    if !matches!(status.status, Status::Running) && !status.status.is_final() {
        return Err("benchmark not running");
    }
    Ok(())
}

/// Its metric samples, each published as it arrives; how many.
#[inline(never)]
fn stream_samples(bench: &mut Bench<'_>, rtm: &mut Rtm<'_>) -> Result<u32> {
    let mut published = 0u32;
    let mut failed = None;
    bench
        .stream(&request::Data { id: BENCH_ID }, |line| {
            let sent = match line {
                Ok(sample) => rtm.publish_sample(&sample),
                Err(_) => Err("bad metric line"),
            };
            match sent {
                Ok(()) => {
                    published += 1;
                    ControlFlow::Continue(())
                }
                Err(e) => {
                    failed = Some(e);
                    ControlFlow::Break(())
                }
            }
        })
        .map_err(|_| "/data")?;
    match failed {
        Some(e) => Err(e),
        None => Ok(published),
    }
}

/// The final results.
#[inline(never)]
fn check_results(bench: &mut Bench<'_>) -> Result {
    let results = bench
        .call(&request::Results { id: BENCH_ID })
        .map_err(|_| "/results")?;
    if results.get("print").is_none() {
        return Err("no print results");
    }
    Ok(())
}

/// The inflate state and the 32 KiB window the server's `78 9C` streams need, as statics.
#[cfg(feature = "deflate")]
fn inflate_memory() -> Option<(
    &'static mut benchlink_core::http::DecompressorOxide,
    &'static mut [u8],
)> {
    use benchlink_core::http::DecompressorOxide;
    use core::mem::MaybeUninit;
    use core::ptr::addr_of_mut;
    use core::sync::atomic::{AtomicBool, Ordering};
    static mut STATE: MaybeUninit<DecompressorOxide> = MaybeUninit::uninit();
    static mut WINDOW: [u8; 32 * 1024] = [0; 32 * 1024];
    static TAKEN: AtomicBool = AtomicBool::new(false);
    if TAKEN.swap(true, Ordering::Relaxed) {
        return None; // one compressed stream at a time in this agent
    }
    // SAFETY: TAKEN hands the statics out once; STATE is written before it is borrowed.
    unsafe {
        let state = &mut *addr_of_mut!(STATE);
        state.write(DecompressorOxide::new());
        Some((state.assume_init_mut(), &mut *addr_of_mut!(WINDOW)))
    }
}

// ---------------------------------------------------------------------------------------
// Messaging: core's Link over the loopback, driven by core's blocking loop
// ---------------------------------------------------------------------------------------

/// Bytes the driver reads at a time (like one TCP segment).
const CHUNK: usize = 64;

#[derive(Default)]
struct App {
    acked: u32,
    received: u32,
    failed: bool,
}

impl Handler for App {
    fn reply(&mut self, _ticket: Ticket, outcome: Outcome<'_>) {
        match outcome {
            Outcome::Ok(_) => self.acked += 1,
            _ => self.failed = true,
        }
    }
    fn subscription_data(
        &mut self,
        _key: &str,
        data: benchlink_core::rtm::pdu::SubscriptionData<'_>,
    ) {
        self.received += data.messages.elements().count() as u32;
    }
}

struct Rtm<'b> {
    link: RtmLink<'b>,
    net: loopback::RtmServer,
    app: App,
    chunk: [u8; CHUNK],
}

impl<'b> Rtm<'b> {
    /// The messaging state, out of line: built in its caller's place.
    #[inline(never)]
    fn new(buffers: benchlink_core::rtm::Buffers<&'b mut [u8]>) -> Result<Self> {
        let client = Config {
            jitter_seed: 0x5EED_1234,
            encoding: ENCODING,
            ..Config::default()
        };
        let config = LinkConfig {
            user_agent: None,
            seed: 0x9E37_79B9_1234_5678,
            ..LinkConfig::DEFAULT
        };
        let link = Link::new(
            client,
            config,
            "ws://rtm.local:8080",
            "benchlink-firmware",
            buffers,
            [SubscriptionSlot::EMPTY; 1],
            [Pending::EMPTY; 4],
        )
        .map_err(|_| "link")?;
        Ok(Rtm {
            link,
            net: loopback::RtmServer::new(),
            app: App::default(),
            chunk: [0; CHUNK],
        })
    }

    /// Subscribes to the metrics channel, starts the client and runs the link until it
    /// is connected and subscribed. Out of line: the subscription record is built in this
    /// call's frame, gone before the samples flow.
    #[inline(never)]
    fn start(&mut self) -> Result {
        let now = self.net.now();
        let client = self.link.client_mut();
        client
            .subscribe(
                now,
                CHANNEL,
                Mode::Reliable,
                SubscribeArgs::default(),
                &mut self.app,
            )
            .map_err(|_| "subscribe refused")?;
        client.start(now, &mut self.app);
        self.settle();
        let client = self.link.client();
        if client.state() != ClientState::Connected
            || client.subscription_state(CHANNEL) != Some(SubState::Subscribed)
        {
            return Err("not connected and subscribed");
        }
        Ok(())
    }

    /// Runs the link until everything sent was answered (the loopback answers at once):
    /// 10 ms of the loopback's clock.
    fn settle(&mut self) {
        let until = self.net.now().saturating_add(Duration::from_millis(10));
        rtm_run(
            &mut self.link,
            &mut self.net,
            &mut self.chunk,
            &mut self.app,
            until,
        );
    }

    /// Publishes one `/data` sample. The value goes exactly as the server wrote it (a
    /// JSON number, checked but not converted): no float parsing or formatting to
    /// forward it.
    fn publish_sample(&mut self, sample: &Sample<'_>) -> Result {
        let now = self.net.now();
        let ack = Ack::Reply { deadline: None };
        let client = self.link.client_mut();
        // Serialized straight into the client's outbox record: no message buffer here.
        #[cfg(feature = "serde")]
        let sent = {
            #[derive(serde::Serialize)]
            struct Message<'a> {
                ts: u64,
                metric: &'a str,
                value: RawJson<'a>,
            }
            let message = Message {
                ts: sample.timestamp,
                metric: sample.name,
                value: RawJson(sample.value.as_str()),
            };
            client.publish_typed(now, CHANNEL, &message, ack, &mut self.app)
        };
        // The JSON written by hand into a buffer, then published as text.
        #[cfg(not(feature = "serde"))]
        let sent = {
            let mut buf = [0u8; 128];
            let mut out = Cursor::new(&mut buf);
            benchlink_core::json::write::object(&mut out, |o| {
                o.u64("ts", sample.timestamp)?
                    .string("metric", sample.name)?
                    .raw("value", sample.value.as_str())?;
                Ok(())
            })
            .map_err(|_| "sample JSON")?;
            let text = core::str::from_utf8(out.written()).map_err(|_| "sample JSON")?;
            client.publish(now, CHANNEL, text, ack, &mut self.app)
        };
        sent.map_err(|_| "publish refused")?;
        self.settle();
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// The loopback: two scripted servers in memory instead of a network driver
// ---------------------------------------------------------------------------------------

/// The test doubles. Only their server side is here: everything the client does (the
/// HTTP exchange, the WebSocket upgrade and framing, the RTM protocol) is core's.
mod loopback {
    use super::*;
    use benchlink_core::http;
    use benchlink_core::ws::{apply_mask, Key};

    /// Bytes per `read`, like one TCP segment.
    const MSS: usize = 536;

    /// Nothing to read: the clock jumps to the deadline (the loopback never waits).
    fn idle(now: &mut Instant, deadline: Option<Instant>) -> core::result::Result<bool, ErrorKind> {
        if let Some(d) = deadline {
            *now = (*now).max(d);
        }
        Ok(false)
    }

    /// Answers each request with the recorded reply for its path, on one kept-alive
    /// connection.
    pub struct HttpServer {
        reply: &'static [u8],
        now: Instant,
    }

    impl HttpServer {
        pub fn new() -> Self {
            HttpServer {
                reply: &[],
                now: Instant::ZERO,
            }
        }
    }

    impl ErrorType for HttpServer {
        type Error = ErrorKind;
    }

    impl Write for HttpServer {
        /// A request head (the agent's requests have no body).
        fn write(&mut self, request: &[u8]) -> core::result::Result<usize, ErrorKind> {
            // The request line starts `GET /path?` (every request has the id).
            let get = |path: &[u8]| {
                request.get(4..).is_some_and(|r| r.starts_with(path))
                    && request.get(4 + path.len()) == Some(&b'?')
            };
            self.reply = if get(b"/status") {
                include_bytes!("../../fixtures/status.http")
            } else if get(b"/data") {
                include_bytes!("../../fixtures/data.http")
            } else if get(b"/results") {
                include_bytes!("../../fixtures/results.http")
            } else if cfg!(feature = "deflate") && get(b"/log") {
                include_bytes!("../../fixtures/log.deflate.http")
            } else {
                b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"
            };
            Ok(request.len())
        }

        fn flush(&mut self) -> core::result::Result<(), ErrorKind> {
            Ok(())
        }
    }

    impl Read for HttpServer {
        fn read(&mut self, buf: &mut [u8]) -> core::result::Result<usize, ErrorKind> {
            let n = self.reply.len().min(buf.len()).min(MSS);
            let (segment, rest) = self.reply.split_at(n);
            buf[..n].copy_from_slice(segment);
            self.reply = rest;
            Ok(n)
        }
    }

    impl Transport for HttpServer {
        fn now(&mut self) -> Instant {
            self.now
        }

        fn wait_readable(
            &mut self,
            deadline: Option<Instant>,
        ) -> core::result::Result<bool, ErrorKind> {
            if self.reply.is_empty() {
                return idle(&mut self.now, deadline);
            }
            Ok(true)
        }

        fn connect(
            &mut self,
            _host: &str,
            _port: u16,
            tls: bool,
        ) -> core::result::Result<(), ErrorKind> {
            self.reply = &[];
            if tls {
                return Err(ErrorKind::Unsupported);
            }
            Ok(())
        }

        fn close(&mut self) {
            self.reply = &[];
        }
    }

    /// A one-connection RTM server: the upgrade (its `Sec-WebSocket-Accept` computed from
    /// the client's key), then subscribe/ok, publish/ok and each published message echoed
    /// as subscription data; pings answered.
    pub struct RtmServer {
        now: Instant,
        connected: bool,
        upgraded: bool,
        subscribed: bool,
        next_position: u64,
        /// What the client has not read yet (`out[read..out_len]`): at most the upgrade
        /// response, or the replies to one write of the client and their echoes.
        out: [u8; 384],
        out_len: usize,
        read: usize,
    }

    impl RtmServer {
        pub fn new() -> Self {
            RtmServer {
                now: Instant::ZERO,
                connected: false,
                upgraded: false,
                subscribed: false,
                next_position: 0,
                out: [0; 384],
                out_len: 0,
                read: 0,
            }
        }

        fn push(&mut self, bytes: &[u8]) -> core::result::Result<(), ErrorKind> {
            let dst = self
                .out
                .get_mut(self.out_len..self.out_len + bytes.len())
                .ok_or(ErrorKind::OutOfMemory)?;
            dst.copy_from_slice(bytes);
            self.out_len += bytes.len();
            Ok(())
        }

        /// The `101` answer to the upgrade request in `head`.
        fn upgrade(&mut self, head: &[u8]) -> core::result::Result<(), ErrorKind> {
            const FIELD: &[u8] = b"\r\nSec-WebSocket-Key: ";
            let at = head
                .windows(FIELD.len())
                .position(|w| w == FIELD)
                .ok_or(ErrorKind::InvalidData)?;
            let Some(key) = head
                .get(at + FIELD.len()..at + FIELD.len() + 24)
                .and_then(Key::parse)
            else {
                return Err(ErrorKind::InvalidData);
            };
            self.push(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ")?;
            self.push(key.accept().as_str().as_bytes())?;
            self.push(wire::UPGRADE_TAIL)
        }

        /// One server frame (unmasked), its payload written in place by `write`: once
        /// to learn its length, then again after the header that length decides (no
        /// copy of the payload, no second buffer).
        fn push_frame(
            &mut self,
            opcode: u8,
            write: &mut dyn FnMut(&mut Cursor<'_>) -> core::result::Result<(), http::EncodeError>,
        ) -> core::result::Result<(), ErrorKind> {
            let at = self.out_len;
            let mut payload = |header: usize, out: &mut [u8]| {
                let room = out.get_mut(at + header..).ok_or(ErrorKind::OutOfMemory)?;
                let mut cursor = Cursor::new(room);
                write(&mut cursor).map_err(|_| ErrorKind::OutOfMemory)?;
                Ok::<_, ErrorKind>(cursor.len())
            };
            let len = payload(4, &mut self.out)?;
            let header: &[u8] = if len < 126 {
                &[opcode, len as u8]
            } else {
                &[opcode, 126, (len >> 8) as u8, len as u8]
            };
            self.push(header)?;
            payload(header.len(), &mut self.out)?;
            self.out_len = at + header.len() + len;
            Ok(())
        }

        /// One masked client frame at the start of `bytes`: its length, `None` when it
        /// is not all there.
        fn frame(&mut self, bytes: &[u8]) -> core::result::Result<Option<usize>, ErrorKind> {
            let [b0, b1, rest @ ..] = bytes else {
                return Ok(None);
            };
            if b1 & 0x80 == 0 {
                return Err(ErrorKind::InvalidData); // clients mask every frame
            }
            let (len, header) = match b1 & 0x7F {
                126 => match rest {
                    [hi, lo, ..] => (usize::from(*hi) << 8 | usize::from(*lo), 8),
                    _ => return Ok(None),
                },
                127 => return Err(ErrorKind::InvalidData),
                n => (usize::from(n), 6),
            };
            let Some(frame) = bytes.get(..header + len) else {
                return Ok(None);
            };
            let mut mask = [0u8; 4];
            mask.copy_from_slice(&frame[header - 4..header]);
            // Unmasked into a copy: the client's bytes are borrowed.
            let mut payload = [0u8; 256];
            let payload = payload.get_mut(..len).ok_or(ErrorKind::OutOfMemory)?;
            payload.copy_from_slice(&frame[header..]);
            apply_mask(mask, 0, payload);
            match *b0 {
                wire::OPCODE => self.handle_pdu(wire::decode(payload)?)?,
                // A ping: pong with its payload.
                0x89 => self.push_frame(0x8A, &mut |out| out.push(payload))?,
                // Close and pong frames: nothing to answer.
                _ => {}
            }
            Ok(Some(header + len))
        }

        fn handle_pdu(&mut self, pdu: Pdu<'_>) -> core::result::Result<(), ErrorKind> {
            let Some(Id::Int(id)) = pdu.id else {
                return Err(ErrorKind::InvalidData);
            };
            let position = self.next_position;
            match pdu.action {
                Action::Subscribe => {
                    self.push_frame(wire::OPCODE, &mut |out| {
                        wire::reply(out, true, id, position)
                    })?;
                    self.subscribed = true;
                    Ok(())
                }
                Action::Publish => {
                    self.push_frame(wire::OPCODE, &mut |out| {
                        wire::reply(out, false, id, position)
                    })?;
                    self.next_position += 1;
                    if !self.subscribed {
                        return Ok(());
                    }
                    let message = pdu.message().ok_or(ErrorKind::InvalidData)?;
                    self.push_frame(wire::OPCODE, &mut |out| {
                        wire::data(out, position, message.raw().as_bytes())
                    })
                }
                _ => Err(ErrorKind::InvalidData),
            }
        }
    }

    impl ErrorType for RtmServer {
        type Error = ErrorKind;
    }

    impl Write for RtmServer {
        /// The upgrade request, then masked client frames (whole ones are taken).
        fn write(&mut self, bytes: &[u8]) -> core::result::Result<usize, ErrorKind> {
            if !self.connected {
                return Err(ErrorKind::NotConnected);
            }
            if !self.upgraded {
                let end = bytes
                    .windows(4)
                    .position(|w| w == b"\r\n\r\n")
                    .ok_or(ErrorKind::InvalidData)?
                    + 4;
                if !bytes.starts_with(b"GET /v2?appkey=") {
                    return Err(ErrorKind::InvalidData);
                }
                self.upgrade(&bytes[..end])?;
                self.upgraded = true;
                return Ok(end);
            }
            let mut used = 0;
            while let Some(n) = self.frame(&bytes[used..])? {
                used += n;
            }
            Ok(used)
        }

        fn flush(&mut self) -> core::result::Result<(), ErrorKind> {
            Ok(())
        }
    }

    impl Read for RtmServer {
        fn read(&mut self, buf: &mut [u8]) -> core::result::Result<usize, ErrorKind> {
            let unread = &self.out[self.read..self.out_len];
            let n = unread.len().min(buf.len()).min(MSS);
            buf[..n].copy_from_slice(&unread[..n]);
            self.read += n;
            if self.read == self.out_len {
                (self.read, self.out_len) = (0, 0);
            }
            Ok(n)
        }
    }

    impl Transport for RtmServer {
        fn now(&mut self) -> Instant {
            self.now
        }

        fn wait_readable(
            &mut self,
            deadline: Option<Instant>,
        ) -> core::result::Result<bool, ErrorKind> {
            if self.read == self.out_len {
                return idle(&mut self.now, deadline);
            }
            Ok(true)
        }

        fn connect(
            &mut self,
            _host: &str,
            _port: u16,
            tls: bool,
        ) -> core::result::Result<(), ErrorKind> {
            if tls {
                return Err(ErrorKind::Unsupported);
            }
            self.connected = true;
            self.upgraded = false;
            self.subscribed = false;
            (self.read, self.out_len) = (0, 0);
            Ok(())
        }

        fn close(&mut self) {
            self.connected = false;
            self.upgraded = false;
            (self.read, self.out_len) = (0, 0);
        }
    }

    /// The server's PDUs in JSON: text frames.
    #[cfg(not(feature = "cbor"))]
    mod wire {
        use super::*;
        use http::EncodeError;

        pub const OPCODE: u8 = 0x81;
        pub const UPGRADE_TAIL: &[u8] = b"\r\n\r\n";

        pub fn decode(payload: &[u8]) -> core::result::Result<Pdu<'_>, ErrorKind> {
            let text = core::str::from_utf8(payload).map_err(|_| ErrorKind::InvalidData)?;
            Pdu::parse(text).map_err(|_| ErrorKind::InvalidData)
        }

        /// A reply to a subscribe (the subscription id and position in its body) or a
        /// publish (the position). The fixed text comes in as few pieces as it can.
        pub fn reply(
            out: &mut Cursor<'_>,
            subscription: bool,
            id: u64,
            position: u64,
        ) -> core::result::Result<(), EncodeError> {
            let (head, body): (&str, &str) = if subscription {
                (
                    r#"{"action":"rtm/subscribe/ok","id":"#,
                    concat!(
                        r#","body":{"subscription_id":""#,
                        channel!(),
                        r#"","position":"1479315802:"#
                    ),
                )
            } else {
                (
                    r#"{"action":"rtm/publish/ok","id":"#,
                    r#","body":{"position":"1479315802:"#,
                )
            };
            out.push_str(head)?;
            out.push_u64(id)?;
            out.push_str(body)?;
            out.push_u64(position)?;
            out.push(b"\"}}")
        }

        /// The subscription data that echoes one published message.
        pub fn data(
            out: &mut Cursor<'_>,
            position: u64,
            message: &[u8],
        ) -> core::result::Result<(), EncodeError> {
            out.push_str(concat!(
                r#"{"action":"rtm/subscription/data","body":{"subscription_id":""#,
                channel!(),
                r#"","position":"1479315802:"#
            ))?;
            out.push_u64(position)?;
            out.push(br#"","messages":["#)?;
            out.push(message)?;
            out.push(b"]}}")
        }
    }

    /// The server's PDUs in CBOR: binary frames, after selecting the `cbor` subprotocol.
    #[cfg(feature = "cbor")]
    mod wire {
        use super::*;
        use benchlink_core::cbor::write;
        use http::EncodeError;

        pub const OPCODE: u8 = 0x82;
        pub const UPGRADE_TAIL: &[u8] = b"\r\nSec-WebSocket-Protocol: cbor\r\n\r\n";

        pub fn decode(payload: &[u8]) -> core::result::Result<Pdu<'_>, ErrorKind> {
            Pdu::parse_cbor(payload).map_err(|_| ErrorKind::InvalidData)
        }

        /// `"position": "1479315802:<n>"`.
        fn position(out: &mut Cursor<'_>, n: u64) -> core::result::Result<(), EncodeError> {
            let mut buf = [0u8; 32];
            let mut text = Cursor::new(&mut buf);
            text.push(b"1479315802:")?;
            text.push_u64(n)?;
            write::str(out, "position")?;
            write::str(
                out,
                core::str::from_utf8(text.written()).unwrap_or_default(),
            )
        }

        /// The envelope without id, and the body's map head.
        fn head(
            out: &mut Cursor<'_>,
            action: &str,
            id: Option<u64>,
            body_members: u64,
        ) -> core::result::Result<(), EncodeError> {
            write::map(out, if id.is_some() { 3 } else { 2 })?;
            write::str(out, "action")?;
            write::str(out, action)?;
            if let Some(id) = id {
                write::str(out, "id")?;
                write::u64(out, id)?;
            }
            write::str(out, "body")?;
            write::map(out, body_members)
        }

        /// A reply to a subscribe (the subscription id and position in its body) or a
        /// publish (the position).
        pub fn reply(
            out: &mut Cursor<'_>,
            subscription: bool,
            id: u64,
            n: u64,
        ) -> core::result::Result<(), EncodeError> {
            let action = if subscription {
                "rtm/subscribe/ok"
            } else {
                "rtm/publish/ok"
            };
            head(out, action, Some(id), 1 + u64::from(subscription))?;
            if subscription {
                write::str(out, "subscription_id")?;
                write::str(out, CHANNEL)?;
            }
            position(out, n)
        }

        /// The subscription data that echoes one published message.
        pub fn data(
            out: &mut Cursor<'_>,
            n: u64,
            message: &[u8],
        ) -> core::result::Result<(), EncodeError> {
            head(out, "rtm/subscription/data", None, 3)?;
            write::str(out, "subscription_id")?;
            write::str(out, CHANNEL)?;
            position(out, n)?;
            write::str(out, "messages")?;
            write::array(out, 1)?;
            out.push(message)
        }
    }
}

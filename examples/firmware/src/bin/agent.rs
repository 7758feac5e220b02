//! The firmware benchmark agent, as a device would link it: both protocols' client logic
//! (benchmark-server requests and replies; the core's messaging link: the RTM client, the
//! WebSocket upgrade and framing) with
//! no TLS and no network driver. The network is an in-memory loopback to two scripted
//! servers, so the image's flash and RAM are the protocol stack's, and running it in QEMU
//! measures its stack.
//!
//! The flow is the std agent's (`examples/src/bin/agent.rs`): subscribe to
//! `benchmarks.<id>.metrics`, read the benchmark's `/status`, stream `/data` and publish
//! every sample to the channel as `{"ts":…,"metric":…,"value":…}` (the value's text is
//! forwarded as received: no float is parsed or formatted), read `/results`,
//! stream the zlib-compressed `/log` (with the `deflate` feature), and wait until every
//! publish was acknowledged and came back on the subscription. Exit code 0 when it all
//! did; the only output is one summary line (semihosting, no `core::fmt`).
#![no_std]
#![no_main]

use benchlink_core::bench::{request, JsonRequest, LineSplitter, Request, Sample, Status};
use benchlink_core::http::{self, Cursor, Event, Limits, RequestHead, ResponseDecoder};
use benchlink_core::json::write;
use benchlink_core::rtm::pdu::{Action, Id, Pdu};
use benchlink_core::rtm::{
    Ack, ClientState, Config, Handler, Link, LinkConfig, Mode, Outcome, Output, SubState,
    SubscribeArgs, Ticket,
};
use benchlink_core::time::Instant;
use benchlink_core::ws::Key;
use benchlink_firmware::{exit, stack, Host};
use cortex_m_rt::entry;

type Result<T = ()> = core::result::Result<T, &'static str>;

const BENCH_ID: u64 = 7;
const CHANNEL: &str = "benchmarks.7.metrics";
const HOST: &str = "mzbench.local:4800";
/// The messaging link: one subscription, 4 requests in flight, 512 bytes of offline queue
/// and of outbox (the largest PDU); its receive and transmit buffers are borrowed.
type RtmLink<'b> = Link<&'b mut [u8], 1, 4, 512, 512>;
/// One response decoder type for every response (one copy of its code): 12 headers.
type Decoder<'b> = ResponseDecoder<'b, 12>;

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
    // The largest incoming message, and the unsent bytes (the outbox's 512 + 1 KiB for the
    // upgrade request and its answer).
    let mut rx_message = [0u8; 1024];
    let mut tx = [0u8; 512 + 1024];
    let mut rtm = Rtm::new(&mut rx_message, &mut tx)?;
    let mut bench = Bench::new();

    // Messaging first: connected and subscribed before the samples flow.
    rtm.link
        .client_mut()
        .subscribe(
            rtm.now,
            CHANNEL,
            Mode::Reliable,
            SubscribeArgs::default(),
            &mut rtm.app,
        )
        .map_err(|_| "subscribe refused")?;
    rtm.link.client_mut().start(rtm.now, &mut rtm.app);
    rtm.settle()?;
    if rtm.link.client().state() != ClientState::Connected
        || rtm.link.client().subscription_state(CHANNEL) != Some(SubState::Subscribed)
    {
        return Err("not connected and subscribed");
    }

    // Where is the benchmark?
    let mut body = [0u8; 256];
    let (code, len) = bench.collect(&request::Status { id: BENCH_ID }, &mut body)?;
    let status = request::Status::read_reply(code, &body[..len]).map_err(|_| "/status reply")?;
    if !matches!(status.status, Status::Running) && !status.status.is_final() {
        return Err("benchmark not running");
    }

    // Its metric samples, each published as it arrives.
    let mut line_buf = [0u8; 96];
    let mut lines = LineSplitter::new(&mut line_buf);
    let mut published = 0u32;
    bench.stream(&request::Data { id: BENCH_ID }, false, |data| {
        let mut input = data;
        while let Some(line) = lines.next(&mut input) {
            let line = line.map_err(|_| "metric line too long")?;
            rtm.publish_sample(line)?;
            published += 1;
        }
        Ok(())
    })?;

    // Final results.
    let mut body = [0u8; 512];
    let (code, len) = bench.collect(&request::Results { id: BENCH_ID }, &mut body)?;
    let results = request::Results::read_reply(code, &body[..len]).map_err(|_| "/results")?;
    if results.get("print").is_none() {
        return Err("no print results");
    }

    // The system log, a zlib stream.
    #[allow(unused_mut)]
    let mut log_lines = 0u32;
    #[cfg(feature = "deflate")]
    {
        let mut line_buf = [0u8; 128];
        let mut log = LineSplitter::new(&mut line_buf);
        bench.stream(&request::Log { id: BENCH_ID }, true, |data| {
            let mut input = data;
            while let Some(line) = log.next(&mut input) {
                line.map_err(|_| "log line too long")?;
                log_lines += 1;
            }
            Ok(())
        })?;
    }

    rtm.settle()?;
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

// ---------------------------------------------------------------------------------------
// Benchmark server: one keep-alive connection, one request at a time
// ---------------------------------------------------------------------------------------

struct Bench {
    net: loopback::HttpServer,
    head_buf: [u8; 512],
    rx: [u8; loopback::MSS],
}

impl Bench {
    fn new() -> Self {
        Bench {
            net: loopback::HttpServer::new(),
            head_buf: [0; 512],
            rx: [0; loopback::MSS],
        }
    }

    /// Sends `req` and hands every decoded body slice of a 200 reply to `body`.
    fn stream<R: Request>(
        &mut self,
        req: &R,
        inflate: bool,
        mut body: impl FnMut(&[u8]) -> Result,
    ) -> Result<u16> {
        let mut tx = [0u8; 256];
        let mut out = Cursor::new(&mut tx);
        RequestHead {
            method: R::METHOD,
            path: R::PATH,
            host: HOST,
            user_agent: "benchlink-firmware/0.1",
            bearer: None,
            body: http::Body::Empty,
            keep_alive: true,
        }
        .encode(req, &mut out)
        .map_err(|_| "request head")?;
        self.net.send(out.written())?;

        let memory = if inflate { inflate_memory() } else { None };
        let mut decoder: Decoder<'_> =
            ResponseDecoder::new(&mut self.head_buf, memory, Limits::DEFAULT);
        let mut status = 0;
        loop {
            let n = self.net.recv(&mut self.rx);
            if n == 0 {
                return Err("connection closed mid-response");
            }
            let mut input = &self.rx[..n];
            loop {
                let (used, event) = decoder.decode(input).map_err(|_| "HTTP response")?;
                input = &input[used..];
                match event {
                    Event::Head(head) => status = head.status,
                    Event::Data(data) if status == 200 => body(data)?,
                    Event::Data(_) => {}
                    Event::End { .. } => return Ok(status),
                    Event::NeedMore => break,
                }
            }
        }
    }

    /// A small JSON reply, whole, into `buf`: (status, length).
    fn collect<R: Request>(&mut self, req: &R, buf: &mut [u8]) -> Result<(u16, usize)> {
        let mut len = 0;
        let code = self.stream(req, false, |data| {
            buf.get_mut(len..len + data.len())
                .ok_or("reply too large")?
                .copy_from_slice(data);
            len += data.len();
            Ok(())
        })?;
        Ok((code, len))
    }
}

/// The inflate state and the 32 KiB window the server's `78 9C` streams need, as statics.
#[cfg(feature = "deflate")]
fn inflate_memory() -> Option<http::InflateMemory<'static>> {
    use core::mem::MaybeUninit;
    use core::ptr::addr_of_mut;
    use core::sync::atomic::{AtomicBool, Ordering};
    static mut STATE: MaybeUninit<http::DecompressorOxide> = MaybeUninit::uninit();
    static mut WINDOW: [u8; 32 * 1024] = [0; 32 * 1024];
    static TAKEN: AtomicBool = AtomicBool::new(false);
    if TAKEN.swap(true, Ordering::Relaxed) {
        return None; // one compressed stream at a time in this agent
    }
    // SAFETY: TAKEN hands the statics out once; STATE is written before it is borrowed.
    let (state, window) = unsafe {
        let state = &mut *addr_of_mut!(STATE);
        state.write(http::DecompressorOxide::new());
        (state.assume_init_mut(), &mut *addr_of_mut!(WINDOW))
    };
    http::InflateMemory::new(state, window).ok()
}

#[cfg(not(feature = "deflate"))]
fn inflate_memory() -> Option<http::InflateMemory<'static>> {
    None
}

// ---------------------------------------------------------------------------------------
// Messaging: the core's sans-IO link over the loopback
// ---------------------------------------------------------------------------------------

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
    app: App,
    net: loopback::RtmServer,
    now: Instant,
}

impl<'b> Rtm<'b> {
    fn new(rx_message: &'b mut [u8], tx: &'b mut [u8]) -> Result<Self> {
        let client = Config {
            jitter_seed: 0x5EED_1234,
            ..Config::default()
        };
        // A board seeds the WebSocket masks and handshake keys from its RNG.
        let link = LinkConfig {
            user_agent: None,
            seed: 0x9E37_79B9_7F4A_7C15,
            ..LinkConfig::DEFAULT
        };
        let endpoint = "ws://rtm.local:8080";
        Ok(Rtm {
            link: Link::new(client, link, endpoint, "benchlink-firmware", rx_message, tx)
                .map_err(|_| "messaging link")?,
            app: App::default(),
            net: loopback::RtmServer::new(),
            now: Instant::ZERO,
        })
    }

    /// Encodes one `/data` line as the sample message and publishes it.
    fn publish_sample(&mut self, line: &[u8]) -> Result {
        let sample = Sample::parse(line).map_err(|_| "bad metric line")?;
        // The value exactly as the server wrote it (a JSON number, checked but not
        // converted by `Sample::parse`): no float parsing or formatting to forward it.
        let value = sample.value.as_str();
        let mut buf = [0u8; 160];
        let mut out = Cursor::new(&mut buf);
        write::object(&mut out, |o| {
            o.u64("ts", sample.timestamp)?
                .string("metric", sample.name)?
                .raw("value", value)?;
            Ok(())
        })
        .map_err(|_| "sample message")?;
        let message = core::str::from_utf8(out.written()).map_err(|_| "utf8")?;
        self.link
            .client_mut()
            .publish(
                self.now,
                CHANNEL,
                message,
                Ack::Reply { deadline: None },
                &mut self.app,
            )
            .map_err(|_| "publish refused")?;
        self.settle()
    }

    /// Runs the link and the socket until nothing moves: deadlines run, everything it
    /// emitted written, everything the server sent fed back.
    fn settle(&mut self) -> Result {
        for _ in 0..10_000 {
            self.now += core::time::Duration::from_millis(1);
            let mut moved = false;
            if self.link.poll_timeout().is_some_and(|t| t <= self.now) {
                self.link.handle_timeout(self.now, &mut self.app);
                moved = true;
            }
            loop {
                match self.link.poll_output(self.now) {
                    Some(Output::Connect { .. }) => {
                        self.net.connect();
                        self.link.handle_connected(self.now, &mut self.app);
                    }
                    Some(Output::Transmit(bytes)) => {
                        let n = bytes.len();
                        self.net.send(bytes)?;
                        self.link.transmitted(self.now, n);
                    }
                    Some(Output::Close) => {
                        self.net.close();
                        self.link.handle_closed(self.now, &mut self.app);
                    }
                    None => break,
                }
                moved = true;
            }
            let mut rx = [0u8; loopback::MSS];
            let n = self.net.recv(&mut rx);
            if n > 0 {
                self.link.handle_input(self.now, &rx[..n], &mut self.app);
                moved = true;
            }
            if !moved {
                return Ok(());
            }
        }
        Err("messaging did not settle")
    }
}

// ---------------------------------------------------------------------------------------
// The loopback: two scripted servers in memory instead of a network driver
// ---------------------------------------------------------------------------------------

mod loopback {
    use super::*;

    /// Bytes per `recv`, like one TCP segment.
    pub const MSS: usize = 536;

    /// Answers each request with the recorded reply for its path.
    pub struct HttpServer {
        reply: &'static [u8],
    }

    impl HttpServer {
        pub fn new() -> Self {
            HttpServer { reply: &[] }
        }

        pub fn send(&mut self, request: &[u8]) -> Result {
            let path = request.split(|&b| b == b' ').nth(1).ok_or("request line")?;
            let path = path.split(|&b| b == b'?').next().unwrap_or_default();
            self.reply = match path {
                b"/status" => include_bytes!("../../fixtures/status.http"),
                b"/data" => include_bytes!("../../fixtures/data.http"),
                b"/results" => include_bytes!("../../fixtures/results.http"),
                #[cfg(feature = "deflate")]
                b"/log" => include_bytes!("../../fixtures/log.deflate.http"),
                _ => b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            };
            Ok(())
        }

        pub fn recv(&mut self, buf: &mut [u8]) -> usize {
            let n = self.reply.len().min(buf.len());
            buf[..n].copy_from_slice(&self.reply[..n]);
            self.reply = &self.reply[n..];
            n
        }
    }

    /// A one-connection RTM server: the upgrade, then subscribe/ok, publish/ok and each
    /// published message echoed as subscription data.
    pub struct RtmServer {
        upgraded: bool,
        subscribed: bool,
        next_position: u64,
        out: [u8; 1024],
        out_len: usize,
    }

    impl RtmServer {
        pub fn new() -> Self {
            RtmServer {
                upgraded: false,
                subscribed: false,
                next_position: 0,
                out: [0; 1024],
                out_len: 0,
            }
        }

        /// A new connection.
        pub fn connect(&mut self) {
            self.upgraded = false;
            self.subscribed = false;
            self.out_len = 0;
        }

        pub fn close(&mut self) {
            self.upgraded = false;
            self.out_len = 0;
        }

        pub fn recv(&mut self, buf: &mut [u8]) -> usize {
            let n = self.out_len.min(buf.len());
            buf[..n].copy_from_slice(&self.out[..n]);
            self.out.copy_within(n..self.out_len, 0);
            self.out_len -= n;
            n
        }

        fn push(&mut self, bytes: &[u8]) -> Result {
            let dst = self
                .out
                .get_mut(self.out_len..self.out_len + bytes.len())
                .ok_or("server buffer full")?;
            dst.copy_from_slice(bytes);
            self.out_len += bytes.len();
            Ok(())
        }

        /// One unmasked server text frame.
        fn push_text(&mut self, text: &[u8]) -> Result {
            let len = text.len();
            if len < 126 {
                self.push(&[0x81, len as u8])?;
            } else {
                self.push(&[0x81, 126, (len >> 8) as u8, len as u8])?;
            }
            self.push(text)
        }

        pub fn send(&mut self, bytes: &[u8]) -> Result {
            if !self.upgraded {
                if !bytes.starts_with(b"GET /v2?appkey=") || !bytes.ends_with(b"\r\n\r\n") {
                    return Err("bad upgrade request");
                }
                let accept = accept_for(bytes).ok_or("no Sec-WebSocket-Key")?;
                self.upgraded = true;
                self.push(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ")?;
                self.push(accept.as_str().as_bytes())?;
                return self.push(b"\r\n\r\n");
            }
            // Whole masked client frames, as many as the link coalesced.
            let mut bytes = bytes;
            while !bytes.is_empty() {
                let [b0, b1, rest @ ..] = bytes else {
                    return Err("short frame");
                };
                if b1 & 0x80 == 0 {
                    return Err("unmasked client frame");
                }
                let (len, rest) = match b1 & 0x7F {
                    126 => match rest {
                        [hi, lo, rest @ ..] => (usize::from(*hi) << 8 | usize::from(*lo), rest),
                        _ => return Err("short frame"),
                    },
                    127 => return Err("frame too large"),
                    n => (usize::from(n), rest),
                };
                let [m0, m1, m2, m3, rest @ ..] = rest else {
                    return Err("short frame");
                };
                let (payload, rest) = rest.split_at_checked(len).ok_or("short frame")?;
                bytes = rest;
                if *b0 != 0x81 {
                    continue; // control frames: nothing to answer
                }
                let mut text = [0u8; 512];
                let text = text.get_mut(..len).ok_or("frame too large")?;
                let mask = [*m0, *m1, *m2, *m3];
                for (i, (t, p)) in text.iter_mut().zip(payload).enumerate() {
                    *t = p ^ mask[i % 4];
                }
                let text = core::str::from_utf8(text).map_err(|_| "frame not UTF-8")?;
                self.handle_pdu(text)?;
            }
            Ok(())
        }

        fn handle_pdu(&mut self, text: &str) -> Result {
            let pdu = Pdu::parse(text).map_err(|_| "bad PDU")?;
            let Some(Id::Int(id)) = pdu.id else {
                return Err("PDU without id");
            };
            let mut buf = [0u8; 384];
            let mut out = Cursor::new(&mut buf);
            let position = self.next_position;
            let reply = |out: &mut Cursor<'_>, action: &str, sub: bool| {
                out.push(b"{\"action\":\"")?;
                out.push_str(action)?;
                out.push(b"\",\"id\":")?;
                out.push_u64(id)?;
                out.push(b",\"body\":{")?;
                if sub {
                    out.push(b"\"subscription_id\":\"")?;
                    out.push_str(CHANNEL)?;
                    out.push(b"\",")?;
                }
                out.push(b"\"position\":\"1479315802:")?;
                out.push_u64(position)?;
                out.push(b"\"}}")
            };
            match pdu.action {
                Action::Subscribe => {
                    reply(&mut out, "rtm/subscribe/ok", true).map_err(|_| "reply")?;
                    self.subscribed = true;
                    self.push_text(out.written())
                }
                Action::Publish => {
                    reply(&mut out, "rtm/publish/ok", false).map_err(|_| "reply")?;
                    self.next_position += 1;
                    self.push_text(out.written())?;
                    if !self.subscribed {
                        return Ok(());
                    }
                    let message = pdu.message().ok_or("publish without message")?;
                    let mut out = Cursor::new(&mut buf);
                    (|| {
                        out.push(
                            br#"{"action":"rtm/subscription/data","body":{"subscription_id":""#,
                        )?;
                        out.push_str(CHANNEL)?;
                        out.push(br#"","position":"1479315802:"#)?;
                        out.push_u64(position)?;
                        out.push(br#"","messages":["#)?;
                        out.push_str(message.as_raw())?;
                        out.push(b"]}}")
                    })()
                    .map_err(|_| "data PDU")?;
                    self.push_text(out.written())
                }
                _ => Err("unexpected request"),
            }
        }
    }

    /// The `Sec-WebSocket-Accept` for the key in an upgrade request.
    fn accept_for(request: &[u8]) -> Option<benchlink_core::ws::Accept> {
        const KEY: &[u8] = b"Sec-WebSocket-Key: ";
        let at = request.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
        let text = request.get(at..at + 24)?;
        // 24 base64 characters are 16 bytes (the last two characters are padding).
        let mut nonce = [0u8; 16];
        let (mut acc, mut bits, mut n) = (0u32, 0, 0);
        for &c in &text[..22] {
            let v = match c {
                b'A'..=b'Z' => c - b'A',
                b'a'..=b'z' => c - b'a' + 26,
                b'0'..=b'9' => c - b'0' + 52,
                b'+' => 62,
                b'/' => 63,
                _ => return None,
            };
            acc = acc << 6 | u32::from(v);
            bits += 6;
            if bits >= 8 {
                bits -= 8;
                *nonce.get_mut(n)? = (acc >> bits) as u8;
                n += 1;
            }
        }
        Some(Key::new(nonce).accept())
    }
}

//! The firmware benchmark agent, as a device would link it: both protocols' client logic
//! (benchmark-server requests and replies; the RTM client over a WebSocket session) with
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
//!
//! Features (each an image of `.ci/size-report`): `serde` publishes the samples with
//! `publish_typed` (without it, their JSON is written with core's object writer and
//! published as text); `cbor` makes the messaging link speak CBOR, the loopback server
//! included.
#![no_std]
#![no_main]

use benchlink_core::bench::{request, JsonRequest, LineSplitter, Request, Sample, Status};
use benchlink_core::http::{self, Cursor, Event, Limits, RequestHead, ResponseDecoder};
#[cfg(feature = "serde")]
use benchlink_core::json::typed::RawJson;
use benchlink_core::rtm::pdu::{Action, Encoding, Id, Pdu};
use benchlink_core::rtm::{
    Ack, Client, ClientState, Config, Handler, Mode, Outcome, SubState, SubscribeArgs, Ticket,
    Transmit,
};
use benchlink_core::time::Instant;
use benchlink_core::ws::{
    check_response, Endpoint, Key, MaskSource, Message, Session, UpgradeRequest,
};
use benchlink_firmware::{exit, stack, Host};
use cortex_m_rt::entry;

type Result<T = ()> = core::result::Result<T, &'static str>;

const BENCH_ID: u64 = 7;
const CHANNEL: &str = "benchmarks.7.metrics";
const HOST: &str = "mzbench.local:4800";
/// The RTM client's capacities: one subscription, 4 requests in flight, 512 bytes of
/// offline queue and of outbox (the largest PDU).
type RtmClient = Client<1, 4, 512, 512>;
/// One response decoder type for every response (one copy of its code): 12 headers.
type Decoder<'b> = ResponseDecoder<'b, 12>;
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
    let mut rx_message = [0u8; 1024];
    let mut rtm = Rtm::new(&mut rx_message);
    let mut bench = Bench::new();

    // Messaging first: connected and subscribed before the samples flow.
    rtm.subscribe()?;
    rtm.client.start(rtm.now, &mut rtm.app);
    rtm.settle()?;
    if rtm.client.state() != ClientState::Connected
        || rtm.client.subscription_state(CHANNEL) != Some(SubState::Subscribed)
    {
        return Err("not connected and subscribed");
    }

    // Where is the benchmark?
    bench.check_reply(&request::Status { id: BENCH_ID }, &mut |code, body| {
        let status = request::Status::read_reply(code, body).map_err(|_| "/status reply")?;
        if !matches!(status.status, Status::Running) && !status.status.is_final() {
            return Err("benchmark not running");
        }
        Ok(())
    })?;

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
    bench.check_reply(&request::Results { id: BENCH_ID }, &mut |code, body| {
        let results = request::Results::read_reply(code, body).map_err(|_| "/results")?;
        match results.get("print") {
            Some(_) => Ok(()),
            None => Err("no print results"),
        }
    })?;

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
}

impl Bench {
    fn new() -> Self {
        Bench {
            net: loopback::HttpServer::new(),
            head_buf: [0; 512],
        }
    }

    /// Sends `req` and hands every decoded body slice of a 200 reply to `body`.
    fn stream<R: Request>(
        &mut self,
        req: &R,
        inflate: bool,
        mut body: impl FnMut(&[u8]) -> Result,
    ) -> Result<u16> {
        self.exchange(R::METHOD, R::PATH, req, inflate, &mut body)
    }

    /// `stream`'s body, once for every request type and body consumer (each copy would
    /// be flash): sends the request and hands the 200 reply's body to `body`.
    fn exchange(
        &mut self,
        method: http::Method,
        path: &str,
        query: &dyn http::EncodeQuery,
        inflate: bool,
        body: &mut dyn FnMut(&[u8]) -> Result,
    ) -> Result<u16> {
        // The request is encoded into the response head's buffer: it is sent before any
        // reply arrives, so the two never need the memory at once.
        let mut out = Cursor::new(&mut self.head_buf);
        RequestHead {
            method,
            path,
            host: HOST,
            user_agent: "benchlink-firmware/0.1",
            bearer: None,
            body: http::Body::Empty,
            keep_alive: true,
        }
        .encode(query, &mut out)
        .map_err(|_| "request head")?;
        self.net.send(out.written())?;

        let memory = if inflate { inflate_memory() } else { None };
        let mut decoder: Decoder<'_> =
            ResponseDecoder::new(&mut self.head_buf, memory, Limits::DEFAULT);
        let mut status = 0;
        loop {
            // Decoded where the network stack holds it, as embassy-net's `read_with` and
            // smoltcp's `recv` hand out their receive buffer: no copy, no buffer here.
            let mut input = self.net.recv();
            if input.is_empty() {
                return Err("connection closed mid-response");
            }
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

    /// A small JSON reply (`/status`, `/results`), whole, handed to `check` with its
    /// status code.
    fn check_reply<R: Request>(
        &mut self,
        req: &R,
        check: &mut dyn FnMut(u16, &[u8]) -> Result,
    ) -> Result {
        self.collect(R::METHOD, R::PATH, req, check)
    }

    /// `check_reply`'s body, once for both requests, and out of line: the reply's buffer
    /// is in this call's frame only, not on the stack while messaging runs.
    #[inline(never)]
    fn collect(
        &mut self,
        method: http::Method,
        path: &str,
        query: &dyn http::EncodeQuery,
        check: &mut dyn FnMut(u16, &[u8]) -> Result,
    ) -> Result {
        let mut buf = [0u8; 512];
        let mut len = 0;
        let code = self.exchange(method, path, query, false, &mut |data| {
            buf.get_mut(len..len + data.len())
                .ok_or("reply too large")?
                .copy_from_slice(data);
            len += data.len();
            Ok(())
        })?;
        check(code, &buf[..len])
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
// Messaging: the sans-IO client over a WebSocket session
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

/// xorshift32: WebSocket masks and the handshake nonce. A board seeds it from its RNG.
struct Rng(u32);

impl Rng {
    fn next(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        x
    }
}

impl MaskSource for Rng {
    fn next_mask(&mut self) -> [u8; 4] {
        self.next().to_be_bytes()
    }
}

struct Rtm<'b> {
    client: RtmClient,
    app: App,
    net: loopback::RtmServer,
    /// The WebSocket connection; its buffer is the largest message it accepts.
    session: Session<&'b mut [u8], Rng>,
    now: Instant,
    /// Source of the handshake nonces.
    rng: Rng,
}

enum Step {
    Connect,
    Close,
    Sent,
    Idle,
}

impl<'b> Rtm<'b> {
    #[inline(never)]
    fn new(rx_message: &'b mut [u8]) -> Self {
        Rtm {
            client: Client::new(Config {
                jitter_seed: 0x5EED_1234,
                encoding: ENCODING,
                ..Config::default()
            }),
            app: App::default(),
            net: loopback::RtmServer::new(),
            session: Session::new(rx_message, Rng(0x9E37_79B9)),
            now: Instant::ZERO,
            rng: Rng(0x1234_5678),
        }
    }

    /// Subscribes to the metrics channel (sent once connected). Out of line: the
    /// subscription record is built in this call's frame, which is gone before the link
    /// runs.
    #[inline(never)]
    fn subscribe(&mut self) -> Result {
        self.client
            .subscribe(
                self.now,
                CHANNEL,
                Mode::Reliable,
                SubscribeArgs::default(),
                &mut self.app,
            )
            .map(|_| ())
            .map_err(|_| "subscribe refused")
    }

    /// Encodes one `/data` line as the sample message and publishes it. The value goes
    /// exactly as the server wrote it (a JSON number, checked but not converted by
    /// `Sample::parse`): no float parsing or formatting to forward it.
    fn publish_sample(&mut self, line: &[u8]) -> Result {
        let sample = Sample::parse(line).map_err(|_| "bad metric line")?;
        let ack = Ack::Reply { deadline: None };
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
            self.client
                .publish_typed(self.now, CHANNEL, &message, ack, &mut self.app)
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
            self.client
                .publish(self.now, CHANNEL, text, ack, &mut self.app)
        };
        sent.map_err(|_| "publish refused")?;
        self.settle()
    }

    /// Runs the client and the socket until nothing moves: every transmit done, every
    /// received frame handled.
    fn settle(&mut self) -> Result {
        for _ in 0..10_000 {
            self.now += core::time::Duration::from_millis(1);
            let mut moved = false;
            loop {
                let step = match self.client.poll_transmit() {
                    Some(Transmit::Connect) => Step::Connect,
                    Some(Transmit::Close) => Step::Close,
                    Some(Transmit::Send(text)) => {
                        let mut frame = [0u8; 520];
                        let mut out = Cursor::new(&mut frame);
                        self.session
                            .send_text(text, &mut out)
                            .map_err(|_| "ws send")?;
                        let len = out.len();
                        self.net.send(&mut frame[..len])?;
                        Step::Sent
                    }
                    #[cfg(feature = "cbor")]
                    Some(Transmit::Binary(bytes)) => {
                        let mut frame = [0u8; 520];
                        let mut out = Cursor::new(&mut frame);
                        self.session
                            .send_binary(bytes, &mut out)
                            .map_err(|_| "ws send")?;
                        let len = out.len();
                        self.net.send(&mut frame[..len])?;
                        Step::Sent
                    }
                    // A JSON client sends no binary PDU.
                    #[cfg(not(feature = "cbor"))]
                    Some(Transmit::Binary(_)) => return Err("binary PDU"),
                    None => Step::Idle,
                };
                match step {
                    Step::Connect => {
                        self.open()?;
                        self.session.reset();
                        self.client.handle_connected(self.now, &mut self.app);
                    }
                    Step::Close => {
                        self.net.close();
                        self.client.handle_closed(self.now, &mut self.app);
                    }
                    Step::Sent => {}
                    Step::Idle => break,
                }
                moved = true;
            }
            moved |= self.receive()?;
            if self.client.poll_timeout().is_some_and(|t| t <= self.now) {
                self.client.handle_timeout(self.now, &mut self.app);
                moved = true;
            }
            if !moved {
                return Ok(());
            }
        }
        Err("messaging did not settle")
    }

    /// Feeds whatever the server sent to the session, and each text message to the client.
    fn receive(&mut self) -> Result<bool> {
        // Decoded where the loopback holds it, as a network stack hands out its receive
        // buffer (embassy-net's `read_with`): no copy, no buffer here.
        let segment = self.net.segment();
        let n = segment.len();
        if n == 0 {
            return Ok(false);
        }
        let mut input = segment;
        while !input.is_empty() {
            let (used, message) = self.session.handle(input).map_err(|_| "ws frame")?;
            input = &input[used..];
            match message {
                Some(Message::Text(text)) => {
                    self.client.handle_message(self.now, text, &mut self.app)
                }
                #[cfg(feature = "cbor")]
                Some(Message::Binary(bytes)) => {
                    self.client.handle_frame(self.now, bytes, &mut self.app)
                }
                Some(_) => {}
                None => break,
            }
        }
        self.net.consume(n);
        // Pongs and close replies the session queued.
        while let Some(frame) = self.session.poll_transmit() {
            let n = frame.len();
            self.net.send_control(frame)?;
            self.session.advance_transmit(n);
        }
        Ok(true)
    }

    /// TCP connect (loopback), then the WebSocket upgrade.
    #[inline(never)]
    fn open(&mut self) -> Result {
        let mut nonce = [0u8; 16];
        for chunk in nonce.chunks_mut(4) {
            chunk.copy_from_slice(&self.rng.next().to_be_bytes());
        }
        let key = Key::new(nonce);
        self.net.connect(&key);
        let endpoint = Endpoint::parse("ws://rtm.local:8080").map_err(|_| "endpoint")?;
        let mut tx = [0u8; 320];
        let mut out = Cursor::new(&mut tx);
        UpgradeRequest {
            endpoint,
            appkey: "benchlink-firmware",
            key: &key,
            origin: None,
            protocol: ENCODING.subprotocol(),
            user_agent: None,
        }
        .encode(&mut out)
        .map_err(|_| "upgrade request")?;
        let len = out.len();
        self.net.send(&mut tx[..len])?;

        let mut head_buf = [0u8; 256];
        let mut decoder: Decoder<'_> = ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
        let segment = self.net.segment();
        let n = segment.len();
        let (used, event) = decoder.decode(segment).map_err(|_| "upgrade response")?;
        let Event::Head(head) = event else {
            return Err("upgrade response incomplete");
        };
        let selected =
            check_response(&head, &key, ENCODING.subprotocol()).map_err(|_| "upgrade refused")?;
        if selected != ENCODING.subprotocol() {
            return Err("subprotocol not selected");
        }
        if used != n {
            return Err("bytes after the upgrade response");
        }
        self.net.consume(n);
        Ok(())
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

        /// The next segment of the reply (at most `MSS` bytes), in place.
        pub fn recv(&mut self) -> &'static [u8] {
            let (segment, rest) = self.reply.split_at(self.reply.len().min(MSS));
            self.reply = rest;
            segment
        }
    }

    /// A one-connection RTM server: the upgrade, then subscribe/ok, publish/ok and each
    /// published message echoed as subscription data.
    pub struct RtmServer {
        accept: [u8; 28],
        upgraded: bool,
        subscribed: bool,
        next_position: u64,
        /// Frames not yet received by the client: at most the upgrade response, or one
        /// publish reply and its echo (the agent's samples are under 100 bytes).
        out: [u8; 512],
        out_len: usize,
    }

    impl RtmServer {
        pub fn new() -> Self {
            RtmServer {
                accept: [0; 28],
                upgraded: false,
                subscribed: false,
                next_position: 0,
                out: [0; 512],
                out_len: 0,
            }
        }

        /// A new connection from a client that will send `key`.
        pub fn connect(&mut self, key: &Key) {
            self.accept
                .copy_from_slice(key.accept().as_str().as_bytes());
            self.upgraded = false;
            self.subscribed = false;
            self.out_len = 0;
        }

        pub fn close(&mut self) {
            self.upgraded = false;
            self.out_len = 0;
        }

        /// The next segment (at most `MSS` bytes) of what the client has not read, in
        /// place; [`consume`](Self::consume) says how much of it was read.
        pub fn segment(&self) -> &[u8] {
            &self.out[..self.out_len.min(MSS)]
        }

        pub fn consume(&mut self, n: usize) {
            self.out.copy_within(n..self.out_len, 0);
            self.out_len -= n;
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

        /// One unmasked server frame of the link's encoding (text for JSON, binary for
        /// CBOR), its payload written in place by `write` (no second buffer for the PDU:
        /// the header is fitted in once its length is known).
        fn push_frame(
            &mut self,
            write: &mut dyn FnMut(&mut Cursor<'_>) -> core::result::Result<(), http::EncodeError>,
        ) -> Result {
            let at = self.out_len;
            let room = self.out.get_mut(at + 4..).ok_or("server buffer full")?;
            let mut out = Cursor::new(room);
            write(&mut out).map_err(|_| "server buffer full")?;
            let len = out.len();
            if len < 126 {
                self.out[at..at + 2].copy_from_slice(&[wire::OPCODE, len as u8]);
                self.out.copy_within(at + 4..at + 4 + len, at + 2);
                self.out_len = at + 2 + len;
            } else {
                self.out[at..at + 4].copy_from_slice(&[
                    wire::OPCODE,
                    126,
                    (len >> 8) as u8,
                    len as u8,
                ]);
                self.out_len = at + 4 + len;
            }
            Ok(())
        }

        /// A pong or close frame from the client: checked to be masked, nothing to answer.
        pub fn send_control(&mut self, frame: &[u8]) -> Result {
            match frame {
                [_, b1, ..] if b1 & 0x80 != 0 => Ok(()),
                _ => Err("unmasked client frame"),
            }
        }

        /// The upgrade request, then one masked client frame per send, unmasked in place
        /// (the client's frame buffer is the server's receive buffer).
        pub fn send(&mut self, bytes: &mut [u8]) -> Result {
            if !self.upgraded {
                if !bytes.starts_with(b"GET /v2?appkey=") || !bytes.ends_with(b"\r\n\r\n") {
                    return Err("bad upgrade request");
                }
                self.upgraded = true;
                let accept = self.accept;
                self.push(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ")?;
                self.push(&accept)?;
                return self.push(wire::UPGRADE_TAIL);
            }
            // One masked client frame per send.
            let [b0, b1, rest @ ..] = bytes else {
                return Err("short frame");
            };
            if *b1 & 0x80 == 0 {
                return Err("unmasked client frame");
            }
            let (len, rest) = match *b1 & 0x7F {
                126 => match rest {
                    [hi, lo, rest @ ..] => (usize::from(*hi) << 8 | usize::from(*lo), rest),
                    _ => return Err("short frame"),
                },
                127 => return Err("frame too large"),
                n => (usize::from(n), rest),
            };
            let [m0, m1, m2, m3, payload @ ..] = rest else {
                return Err("short frame");
            };
            if *b0 != wire::OPCODE || payload.len() != len {
                return Ok(()); // close and control frames: nothing to answer
            }
            let mask = [*m0, *m1, *m2, *m3];
            for (i, p) in payload.iter_mut().enumerate() {
                *p ^= mask[i % 4];
            }
            self.handle_pdu(wire::decode(payload)?)
        }

        fn handle_pdu(&mut self, pdu: Pdu<'_>) -> Result {
            let Some(Id::Int(id)) = pdu.id else {
                return Err("PDU without id");
            };
            let position = self.next_position;
            match pdu.action {
                Action::Subscribe => {
                    self.push_frame(&mut |out| {
                        wire::reply(out, "rtm/subscribe/ok", id, true, position)
                    })?;
                    self.subscribed = true;
                    Ok(())
                }
                Action::Publish => {
                    self.push_frame(&mut |out| {
                        wire::reply(out, "rtm/publish/ok", id, false, position)
                    })?;
                    self.next_position += 1;
                    if !self.subscribed {
                        return Ok(());
                    }
                    let message = pdu.message().ok_or("publish without message")?;
                    self.push_frame(&mut |out| wire::data(out, position, message.raw().as_bytes()))
                }
                _ => Err("unexpected request"),
            }
        }
    }

    /// The server's PDUs in JSON: text frames.
    #[cfg(not(feature = "cbor"))]
    mod wire {
        use super::*;
        use http::EncodeError;

        pub const OPCODE: u8 = 0x81;
        pub const UPGRADE_TAIL: &[u8] = b"\r\n\r\n";

        pub fn decode(payload: &[u8]) -> Result<Pdu<'_>> {
            let text = core::str::from_utf8(payload).map_err(|_| "frame not UTF-8")?;
            Pdu::parse(text).map_err(|_| "bad PDU")
        }

        /// A reply with the position (and the subscription id) in its body.
        pub fn reply(
            out: &mut Cursor<'_>,
            action: &str,
            id: u64,
            subscription: bool,
            position: u64,
        ) -> core::result::Result<(), EncodeError> {
            out.push(b"{\"action\":\"")?;
            out.push_str(action)?;
            out.push(b"\",\"id\":")?;
            out.push_u64(id)?;
            out.push(b",\"body\":{")?;
            if subscription {
                out.push(b"\"subscription_id\":\"")?;
                out.push_str(CHANNEL)?;
                out.push(b"\",")?;
            }
            out.push(b"\"position\":\"1479315802:")?;
            out.push_u64(position)?;
            out.push(b"\"}}")
        }

        /// The subscription data that echoes one published message.
        pub fn data(
            out: &mut Cursor<'_>,
            position: u64,
            message: &[u8],
        ) -> core::result::Result<(), EncodeError> {
            out.push(br#"{"action":"rtm/subscription/data","body":{"subscription_id":""#)?;
            out.push_str(CHANNEL)?;
            out.push(br#"","position":"1479315802:"#)?;
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

        pub fn decode(payload: &[u8]) -> Result<Pdu<'_>> {
            Pdu::parse_cbor(payload).map_err(|_| "bad PDU")
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

        /// A reply with the position (and the subscription id) in its body.
        pub fn reply(
            out: &mut Cursor<'_>,
            action: &str,
            id: u64,
            subscription: bool,
            n: u64,
        ) -> core::result::Result<(), EncodeError> {
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

//! Messaging throughput of benchlink's std client against a running RTM server, the
//! benchlink side of `.ci/bench-rtm` (which runs the reference Python SDK's side,
//! `examples/bench/rtm_sdk_bench.py`, against the same server and prints both).
//!
//! ```text
//! rtm-bench --endpoint ws://127.0.0.1:8080 --appkey KEY publish-ack  [--count N] [--window W]
//! rtm-bench --endpoint … --appkey … publish-noack [--count N]
//! rtm-bench --endpoint … --appkey … burst        [--count N]
//! rtm-bench --endpoint … --appkey … subscribe     [--count N]   # runs `rtm-bench flood`
//! rtm-bench --endpoint … --appkey … flood --channel C [--count N]
//! ```
//!
//! `rtm-bench --async …` runs publish-ack, publish-noack and subscribe with the async
//! client instead (`on_tokio.rs`).
//!
//! Every scenario uses one connection of the public `benchlink_std::rtm::Client` and
//! prints one JSON line on stdout: the rate, and this process's CPU time (user and
//! system, from `/proc/self/stat`) over the measured interval, per message.
//!
//! - `publish-ack`: `count` publishes, each with a callback, at most `window` of them
//!   unacknowledged at any time (the pipelining style the client documents), the window
//!   kept full (one more publish as each acknowledgement comes); the clock stops at the
//!   last acknowledgement.
//! - `publish-noack`: `count` publishes without callbacks, then one with a callback as
//!   the end marker (the server answers in order, so its reply means all were handled).
//! - `burst`: `count` publishes, each with a callback, as fast as the client takes them
//!   (no window of the benchmark's own: the client's pipeline limit, then its queue,
//!   then `wait_for_room`), from a standing start: the clock starts before the client is
//!   made and stops at the last acknowledgement, so connecting (a TCP and a WebSocket
//!   handshake, two round trips) is in the time. Across a round trip RTT the bound
//!   without a count is three round trips plus the time to send them all.
//! - `subscribe`: subscribes, then starts `rtm-bench flood` (a separate process, so its
//!   CPU is not counted) to publish `count` messages as fast as the server takes them;
//!   the rate is the messages the subscription callback saw, from the first to the last. A server that
//!   cannot queue more for a slow subscriber skips messages (fast-forward); those are
//!   reported as `dropped`.
//! - `flood`: the publisher of `subscribe`, raw: no client library, just a WebSocket
//!   upgrade and then every publish PDU, framed in advance, written in large chunks (so
//!   that the server, not the publisher, sets the pace), the last one with an id; it ends
//!   at that one's reply.
//!
//! Exit code 0 when every request was acknowledged with success, 1 when anything broke
//! (connection, a refused or lost publish, a timeout). Rates are reported, never judged.

mod on_tokio;

use std::io::Read;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use benchlink_core::rtm::RequestError;
use benchlink_std::rtm::{
    Client, ClientOptions, ClientState, Error, Mode, Response, SubscribeOptions, SubscriptionData,
    SubscriptionObserver,
};
use clap::{Parser, Subcommand};
use serde::Serialize;
use serde_json::json;

/// Measures benchlink's RTM client against a running server.
#[derive(Parser)]
#[command(name = "rtm-bench")]
struct Args {
    /// The server, `ws://host:port`.
    #[arg(long)]
    endpoint: String,
    /// Application key.
    #[arg(long)]
    appkey: String,
    /// Messages to publish (or to flood the subscription with).
    #[arg(long, default_value_t = 50_000)]
    count: u64,
    /// Seconds after which a scenario gives up (and fails).
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Prefix of the channel names (a unique suffix is added per scenario).
    #[arg(long, default_value = "bench")]
    channel_prefix: String,
    /// Run the scenario with the async client (`benchlink_std::tokio`) on a tokio
    /// runtime: publish-ack, publish-noack and subscribe.
    #[arg(long = "async")]
    run_async: bool,
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Subcommand)]
enum Scenario {
    /// Publishes with acknowledgements, at most `window` unacknowledged.
    PublishAck {
        /// Publishes in flight at most.
        #[arg(long, default_value_t = 1000)]
        window: u64,
    },
    /// Publishes without acknowledgements (one acknowledged publish ends it).
    PublishNoack,
    /// Acknowledged publishes with no window, connecting included.
    Burst,
    /// Receive rate of a subscription flooded by `rtm-bench flood`.
    Subscribe {
        /// Seconds without data, after the publisher finished, before counting ends.
        #[arg(long, default_value_t = 1.0)]
        idle: f64,
        /// The publisher's binary, run as `FLOOD_BIN … flood` (default: this one).
        #[arg(long)]
        flood_bin: Option<std::path::PathBuf>,
    },
    /// Publishes `count` messages to `channel` over a raw WebSocket, as fast as the
    /// server takes them (for `subscribe`).
    Flood {
        /// The channel.
        #[arg(long)]
        channel: String,
    },
}

/// One small message; its JSON is about 70 bytes, like the Python side's.
#[derive(Serialize)]
struct Message {
    n: u64,
    pad: &'static str,
}

const PAD: &str = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"; // 48 bytes

/// CPU time of this process so far (all threads, children excluded), in seconds of user
/// and system time, from `/proc/self/stat` (clock ticks, usually 10 ms).
fn cpu_times() -> (f64, f64) {
    let tick = 100.0; // USER_HZ, fixed at 100 on Linux whatever the kernel's HZ
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return (f64::NAN, f64::NAN);
    };
    // Fields after the command name (which may contain spaces, so find its closing
    // parenthesis): state is field 3, utime field 14, stime field 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .map_or(f64::NAN, |t| t / tick)
    };
    (ticks(14 - 3), ticks(15 - 3))
}

/// The process's peak resident memory so far, in MiB (`VmHWM` of `/proc/self/status`):
/// what the client's tables, queues and buffers cost, compared with the SDK's.
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<f64>().ok()
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// Wall clock and CPU at the start of a measured interval.
struct Meter {
    wall: Instant,
    cpu: (f64, f64),
}

impl Meter {
    fn start() -> Meter {
        Meter {
            cpu: cpu_times(),
            wall: Instant::now(),
        }
    }

    /// The JSON report of `messages` handled since `start`, with `extra` members.
    fn report(
        &self,
        scenario: &str,
        messages: u64,
        seconds: f64,
        extra: serde_json::Value,
    ) -> serde_json::Value {
        let (user, sys) = cpu_times();
        let (user, sys) = (user - self.cpu.0, sys - self.cpu.1);
        let per = |s: f64| s * 1e6 / messages.max(1) as f64;
        let mut r = json!({
            "client": "benchlink",
            "scenario": scenario,
            "messages": messages,
            "seconds": seconds,
            "rate": messages as f64 / seconds.max(1e-9),
            "cpu_user_s": user,
            "cpu_sys_s": sys,
            "cpu_us_per_msg": per(user + sys),
            "cpu_sys_us_per_msg": per(sys),
            "peak_rss_mib": peak_rss_mib(),
        });
        if let (Some(r), serde_json::Value::Object(extra)) = (r.as_object_mut(), extra) {
            r.extend(extra);
        }
        r
    }
}

/// A started client, connected, with the default options (its pipeline is bounded by
/// `max_in_flight_bytes`, 209,715 requests: deeper than any window the benchmark keeps).
fn connect(args: &Args) -> Result<Client, String> {
    let options = ClientOptions::new(&args.endpoint, &args.appkey);
    let client = Client::new(options).map_err(|e| format!("client: {e}"))?;
    client.start().map_err(|e| format!("start: {e}"))?;
    let state = client.wait_for_state(
        |s| matches!(s, ClientState::Connected | ClientState::Stopped),
        Duration::from_secs(10),
    );
    if state != ClientState::Connected {
        let why = client
            .last_connecting_error()
            .map(|e| e.to_string())
            .unwrap_or_default();
        return Err(format!("could not connect to {}: {why}", args.endpoint));
    }
    Ok(client)
}

fn channel(args: &Args, what: &str) -> String {
    format!("{}.{}.{what}", args.channel_prefix, std::process::id())
}

/// Counts acknowledgements and wakes the publishing thread when it waits for one.
struct Acks {
    done: AtomicU64,
    failed: AtomicU64,
    waiting: AtomicBool,
    /// How many replies the waiting publisher waits for.
    target: AtomicU64,
    publisher: Thread,
    first_failure: std::sync::Mutex<Option<String>>,
}

impl Acks {
    fn new() -> Arc<Acks> {
        Arc::new(Acks {
            done: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            waiting: AtomicBool::new(false),
            target: AtomicU64::new(0),
            publisher: thread::current(),
            first_failure: std::sync::Mutex::new(None),
        })
    }

    /// A publish callback that counts its reply.
    fn callback(self: &Arc<Acks>) -> Box<dyn FnMut(Response) + Send> {
        let acks = self.clone();
        Box::new(move |response| {
            let ok = matches!(&response, Response::Reply(r) if r.is_ok());
            if !ok {
                acks.failed.fetch_add(1, SeqCst);
                if let Ok(mut first) = acks.first_failure.lock() {
                    first.get_or_insert_with(|| format!("{response:?}"));
                }
            }
            let done = acks.done.fetch_add(1, SeqCst) + 1;
            // Only the reply the publisher waits for wakes it.
            if acks.waiting.load(SeqCst) && done >= acks.target.load(SeqCst) {
                acks.publisher.unpark();
            }
        })
    }

    /// Blocks the publishing thread until at least `n` replies came, or `deadline`.
    fn wait_for(&self, n: u64, deadline: Instant) -> Result<(), String> {
        self.target.store(n, SeqCst);
        while self.done.load(SeqCst) < n {
            self.waiting.store(true, SeqCst);
            if self.done.load(SeqCst) < n {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    self.waiting.store(false, SeqCst);
                    return Err(format!(
                        "timed out: {} of {n} acknowledgements",
                        self.done.load(SeqCst)
                    ));
                }
                thread::park_timeout(left);
            }
            self.waiting.store(false, SeqCst);
        }
        Ok(())
    }

    fn check(&self) -> Result<(), String> {
        match self.failed.load(SeqCst) {
            0 => Ok(()),
            n => Err(format!(
                "{n} publishes were not acknowledged with success, the first: {}",
                self.first_failure
                    .lock()
                    .ok()
                    .and_then(|f| f.clone())
                    .unwrap_or_default()
            )),
        }
    }
}

/// Publishes message `n`, with a callback counted by `acks` if given, retrying when the
/// client has room again while it is full (`Full`: `max_queue_size` requests wait to be
/// sent, behind a full outbox or pipeline; `wait_for_room`, as the client documents).
/// Returns how many retries it took.
fn publish(
    client: &Client,
    channel: &str,
    n: u64,
    acks: Option<&Arc<Acks>>,
    deadline: Instant,
) -> Result<u64, String> {
    let message = Message { n, pad: PAD };
    let mut retries = 0;
    loop {
        // A refused request drops its callback uncalled, so each attempt gets its own.
        match client.publish(channel, &message, acks.map(Acks::callback)) {
            Ok(()) => return Ok(retries),
            Err(Error::Request(RequestError::Full)) if Instant::now() < deadline => {
                retries += 1;
                let left = deadline.saturating_duration_since(Instant::now());
                client
                    .wait_for_room(left)
                    .map_err(|e| format!("publish {n}: {e}"))?;
            }
            Err(e) => return Err(format!("publish {n}: {e}")),
        }
    }
}

fn publish_ack(args: &Args, window: u64) -> Result<serde_json::Value, String> {
    let client = connect(args)?;
    let channel = channel(args, "ack");
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let acks = Acks::new();
    let window = window.max(1);
    let mut full = 0u64;
    let meter = Meter::start();
    for n in 0..args.count {
        // The window stays full: each acknowledgement makes room for one more publish
        // (the same rule as the SDK side's semaphore), so that across a slow link the
        // round trip, not a refill pattern, bounds the rate.
        if n >= window {
            acks.wait_for(n + 1 - window, deadline)?;
        }
        full += publish(&client, &channel, n, Some(&acks), deadline)?;
    }
    acks.wait_for(args.count, deadline)?;
    let seconds = meter.wall.elapsed().as_secs_f64();
    let report = meter.report(
        "publish_ack",
        args.count,
        seconds,
        json!({"window": window, "full_retries": full}),
    );
    let _ = client.dispose();
    acks.check()?;
    Ok(report)
}

/// `count` acknowledged publishes from a standing start: the client made, connected,
/// every publish made as fast as it is taken, every acknowledgement received.
fn burst(args: &Args) -> Result<serde_json::Value, String> {
    let meter = Meter::start();
    let client = connect(args)?;
    let connected = meter.wall.elapsed().as_secs_f64();
    let channel = channel(args, "burst");
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let acks = Acks::new();
    let mut full = 0u64;
    for n in 0..args.count {
        full += publish(&client, &channel, n, Some(&acks), deadline)?;
    }
    acks.wait_for(args.count, deadline)?;
    let seconds = meter.wall.elapsed().as_secs_f64();
    let report = meter.report(
        "burst",
        args.count,
        seconds,
        json!({"connect_seconds": connected, "full_retries": full}),
    );
    let _ = client.dispose();
    acks.check()?;
    Ok(report)
}

fn publish_noack(args: &Args) -> Result<serde_json::Value, String> {
    let client = connect(args)?;
    let channel = &channel(args, "noack");
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let acks = Acks::new();
    let mut full = 0;
    let meter = Meter::start();
    for n in 0..args.count {
        full += publish(&client, channel, n, None, deadline)?;
    }
    // The end marker: the server handles one connection's requests in order.
    full += publish(&client, channel, args.count, Some(&acks), deadline)?;
    acks.wait_for(1, deadline)?;
    let seconds = meter.wall.elapsed().as_secs_f64();
    let report = meter.report(
        "publish_noack",
        args.count,
        seconds,
        json!({"full_retries": full}),
    );
    let _ = client.dispose();
    acks.check()?;
    Ok(report)
}

/// What the subscription saw, shared with the measuring thread.
struct Seen {
    messages: AtomicU64,
    /// Nanoseconds after `base` of the first and the last data.
    first: AtomicU64,
    last: AtomicU64,
    base: Instant,
}

struct Counter {
    seen: Arc<Seen>,
    subscribed: mpsc::Sender<Result<(), String>>,
}

impl SubscriptionObserver for Counter {
    fn on_enter_subscribed(&mut self) {
        let _ = self.subscribed.send(Ok(()));
    }
    fn on_enter_failed(&mut self, reason: &str) {
        let _ = self.subscribed.send(Err(reason.to_owned()));
    }
    fn on_subscription_data(&mut self, data: &SubscriptionData) {
        let at = u64::try_from(self.seen.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let _ = self.seen.first.compare_exchange(0, at, SeqCst, SeqCst);
        self.seen.last.store(at, SeqCst);
        self.seen
            .messages
            .fetch_add(data.messages().len() as u64, SeqCst);
    }
}

fn subscribe(
    args: &Args,
    idle: f64,
    flood_bin: Option<&std::path::Path>,
) -> Result<serde_json::Value, String> {
    let client = connect(args)?;
    let channel = channel(args, "sub");
    let seen = Arc::new(Seen {
        messages: AtomicU64::new(0),
        first: AtomicU64::new(0),
        last: AtomicU64::new(0),
        base: Instant::now(),
    });
    let (tx, rx) = mpsc::channel();
    let observer = Counter {
        seen: seen.clone(),
        subscribed: tx,
    };
    client
        .subscribe(
            &channel,
            Mode::Simple,
            observer,
            SubscribeOptions::default(),
        )
        .map_err(|e| format!("subscribe: {e}"))?;
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(())) => {}
        Ok(Err(why)) => return Err(format!("subscription failed: {why}")),
        Err(_) => return Err("not subscribed within 10 s".to_owned()),
    }
    let meter = Meter::start();
    let publisher = flood_process(
        (
            args.endpoint.clone(),
            args.appkey.clone(),
            args.count,
            args.timeout,
        ),
        &channel,
        flood_bin,
    )?;
    // Every message is now queued for us or was skipped: count until all came or the
    // subscription stayed quiet for `idle` seconds.
    let expected = args.count + 1; // with the flood's end marker
    let idle = Duration::from_secs_f64(idle);
    let mut quiet_since = (Instant::now(), seen.messages.load(SeqCst));
    while seen.messages.load(SeqCst) < expected {
        thread::sleep(Duration::from_millis(5));
        let now = seen.messages.load(SeqCst);
        if now != quiet_since.1 {
            quiet_since = (Instant::now(), now);
        } else if quiet_since.0.elapsed() >= idle {
            break;
        }
    }
    let received = seen.messages.load(SeqCst);
    let span = seen
        .last
        .load(SeqCst)
        .saturating_sub(seen.first.load(SeqCst)) as f64
        / 1e9;
    let report = subscribe_report(&meter, received, span, expected, &publisher);
    let _ = client.dispose();
    if received == 0 {
        return Err("the subscription received nothing".to_owned());
    }
    Ok(report)
}

/// The report of a subscription that received `received` of `expected` messages over
/// `span` seconds from the first to the last, while `publisher` (the flood's report)
/// published them. The rate counts from the first message to the last; the first one
/// only starts the clock.
fn subscribe_report(
    meter: &Meter,
    received: u64,
    span: f64,
    expected: u64,
    publisher: &serde_json::Value,
) -> serde_json::Value {
    let mut report = meter.report(
        "subscribe",
        received,
        span,
        json!({
            "published": expected,
            "dropped": expected.saturating_sub(received),
            "publisher_rate": publisher.get("rate"),
        }),
    );
    report["rate"] = json!(received.saturating_sub(1) as f64 / span.max(1e-9));
    report
}

/// Runs `rtm-bench flood` (`exe`, default this binary) publishing `count` messages to
/// `channel` of `(endpoint, appkey, count, timeout)`; its report.
fn flood_process(
    (endpoint, appkey, count, timeout): (String, String, u64, u64),
    channel: &str,
    exe: Option<&std::path::Path>,
) -> Result<serde_json::Value, String> {
    let exe = match exe {
        Some(path) => path.to_owned(),
        None => std::env::current_exe().map_err(|e| format!("own path: {e}"))?,
    };
    let mut flood = Command::new(exe)
        .args(["--endpoint", &endpoint, "--appkey", &appkey])
        .args(["--count", &count.to_string()])
        .args(["--timeout", &timeout.to_string()])
        .args(["flood", "--channel", channel])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("flood publisher: {e}"))?;
    let mut flood_out = String::new();
    if let Some(mut out) = flood.stdout.take() {
        let _ = out.read_to_string(&mut flood_out);
    }
    let status = flood.wait().map_err(|e| format!("flood publisher: {e}"))?;
    if !status.success() {
        return Err(format!("the flood publisher failed ({status})"));
    }
    Ok(serde_json::from_str(flood_out.trim()).unwrap_or(serde_json::Value::Null))
}

/// A masked (with a zero key, which leaves the payload as it is) WebSocket text frame.
fn text_frame(out: &mut Vec<u8>, payload: &[u8]) {
    out.push(0x81);
    match payload.len() {
        n if n < 126 => out.push(0x80 | n as u8),
        n if n <= 0xFFFF => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(payload);
}

/// The publisher of `subscribe`: `count` publishes without acknowledgement and one with,
/// over a plain `ws://` connection of its own, with no client library in the way.
fn flood(args: &Args, channel: &str) -> Result<serde_json::Value, String> {
    use std::io::Write;
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let rest = args
        .endpoint
        .strip_prefix("ws://")
        .ok_or("flood: only ws:// endpoints")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = path.trim_end_matches('/');
    let path = if path == "v2" || path.ends_with("/v2") {
        format!("/{path}")
    } else if path.is_empty() {
        "/v2".to_owned()
    } else {
        format!("/{path}/v2")
    };
    let mut tcp =
        std::net::TcpStream::connect(host).map_err(|e| format!("flood: connect {host}: {e}"))?;
    tcp.set_read_timeout(Some(Duration::from_secs(args.timeout.max(1))))
        .map_err(|e| format!("flood: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let upgrade = format!(
        "GET {path}?appkey={} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\n\r\n",
        args.appkey
    );
    tcp.write_all(upgrade.as_bytes())
        .map_err(|e| format!("flood: {e}"))?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match tcp.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return Err("flood: the upgrade got no complete response".to_owned()),
        }
    }
    if !head.starts_with(b"HTTP/1.1 101") {
        return Err(format!(
            "flood: upgrade refused: {}",
            String::from_utf8_lossy(&head)
                .lines()
                .next()
                .unwrap_or_default()
        ));
    }
    let channel_json = serde_json::to_string(channel).map_err(|e| format!("flood: {e}"))?;
    let mut frames = Vec::new();
    for n in 0..=args.count {
        let id = if n == args.count { r#""id":1,"# } else { "" };
        let pdu = format!(
            r#"{{"action":"rtm/publish",{id}"body":{{"channel":{channel_json},"message":{{"n":{n},"pad":"{PAD}"}}}}}}"#
        );
        text_frame(&mut frames, pdu.as_bytes());
    }
    let meter = Meter::start();
    for chunk in frames.chunks(64 << 10) {
        tcp.write_all(chunk)
            .map_err(|e| format!("flood: write: {e}"))?;
    }
    // The only reply is the last publish's (the server sends nothing else unasked here).
    let mut replies = Vec::new();
    let mut buf = [0u8; 4096];
    let found = |r: &[u8], what: &[u8]| r.windows(what.len()).any(|w| w == what);
    while !found(&replies, b"rtm/publish/ok") {
        if found(&replies, b"/error") || Instant::now() > deadline {
            return Err(format!(
                "flood: the last publish was not acknowledged: {}",
                String::from_utf8_lossy(&replies)
            ));
        }
        match tcp.read(&mut buf) {
            Ok(0) | Err(_) => return Err("flood: the server closed the connection".to_owned()),
            Ok(n) => replies.extend_from_slice(&buf[..n]),
        }
    }
    let seconds = meter.wall.elapsed().as_secs_f64();
    let mut report = meter.report("flood", args.count, seconds, json!({}));
    report["client"] = json!("raw");
    Ok(report)
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = match &args.scenario {
        _ if args.run_async => on_tokio::run(&args),
        Scenario::PublishAck { window } => publish_ack(&args, *window),
        Scenario::PublishNoack => publish_noack(&args),
        Scenario::Burst => burst(&args),
        Scenario::Subscribe { idle, flood_bin } => subscribe(&args, *idle, flood_bin.as_deref()),
        Scenario::Flood { channel } => flood(&args, channel),
    };
    match result {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rtm-bench: error: {e}");
            println!("{}", json!({"client": "benchlink", "error": e}));
            ExitCode::FAILURE
        }
    }
}

//! A load generator for the local RTM server ("the hub") alone, independent of benchlink's
//! RTM client: it measures how many acknowledged publishes per second the hub sustains on
//! one connection, and how much CPU the hub spends per message.
//!
//! ```text
//! cargo run --release -p benchlink-sandbox --example hub_load -- [--messages N] [--window W]
//!     [--batch B] [--body JSON] [--subscribers S] [--runs R]
//!     [--endpoint ws://127.0.0.1:PORT --pid PID]
//! ```
//!
//! It speaks WebSocket by hand over raw TCP: after the upgrade it writes pre-encoded,
//! masked `rtm/publish` frames, `B` at a time in one write, keeping at most `W` publishes
//! unacknowledged, and counts the `rtm/publish/ok` replies (one thread, non-blocking
//! socket, big reads). Optional subscriber connections subscribe to the channel first and
//! count the `rtm/subscription/data` messages they get (the hub's fan-out).
//!
//! Without `--endpoint` the hub runs in this process, and its CPU is the run time of its
//! threads (named `rtm-…`) from `/proc/self/task/*/schedstat`. With `--endpoint` (for
//! example a `benchlink sandbox`), give `--pid` of the hub's process to get its CPU from
//! `/proc/PID/stat`.
//!
//! The generator's own cost is kept low (no encoding or JSON parsing per message, one
//! write per batch), but it shares the machine with the hub: on a small machine the
//! figure to watch is the hub's CPU per message, which does not depend on who else runs.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use benchlink_sandbox::rtm::{RtmServer, RtmServerConfig, DEFAULT_APPKEY};
use clap::Parser;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

/// Load generator for the local RTM server.
#[derive(Debug, Parser)]
struct Args {
    /// Acknowledged publishes to wait for (rounded up to a whole number of batches).
    #[arg(long, default_value_t = 2_000_000)]
    messages: u64,
    /// Most publishes in flight (written, not yet acknowledged).
    #[arg(long, default_value_t = 20_000)]
    window: u64,
    /// Publishes per write.
    #[arg(long, default_value_t = 500)]
    batch: u64,
    /// The `message` of every publish (raw JSON).
    #[arg(long, default_value = r#"{"n":42,"text":"hello"}"#)]
    body: String,
    /// Channel to publish to.
    #[arg(long, default_value = "load")]
    channel: String,
    /// Subscriber connections, each subscribed to the channel before publishing starts.
    #[arg(long, default_value_t = 0)]
    subscribers: usize,
    /// A hub that is already running (`ws://127.0.0.1:PORT`); default: start one here.
    #[arg(long)]
    endpoint: Option<String>,
    /// Appkey for `--endpoint`.
    #[arg(long, default_value = DEFAULT_APPKEY)]
    appkey: String,
    /// Process id of the hub behind `--endpoint`, to measure its CPU.
    #[arg(long)]
    pid: Option<u32>,
    /// Runs (one after another on the same connections), for a median on a noisy
    /// machine.
    #[arg(long, default_value_t = 1)]
    runs: u64,
}

/// The median of `values` (sorted in place).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hub_load: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> io::Result<()> {
    let batch = args.batch.max(1);
    let messages = args.messages.div_ceil(batch) * batch;
    let window = args.window.max(batch);
    let (server, endpoint) = match &args.endpoint {
        Some(e) => (None, e.clone()),
        None => {
            let server = RtmServer::start(RtmServerConfig::default())?;
            let endpoint = server.endpoint();
            (Some(server), endpoint)
        }
    };
    let addr: SocketAddr = endpoint
        .strip_prefix("ws://")
        .and_then(|rest| rest.split('/').next())
        .and_then(|hostport| hostport.parse().ok())
        .ok_or_else(|| io::Error::other(format!("not ws://IP:PORT: {endpoint}")))?;
    let meter: Box<dyn Fn() -> io::Result<Cpu>> = match (&server, args.pid) {
        // Threads of connections that closed meanwhile are not counted: the subscribers
        // and the publisher stay connected until the end.
        (Some(_), _) => Box::new(in_process_hub_cpu),
        (None, Some(pid)) => Box::new(move || process_cpu(pid)),
        (None, None) => Box::new(|| Ok(Cpu::default())),
    };

    // Subscribers first, each with its own counting thread.
    let stop = Arc::new(AtomicBool::new(false));
    let mut subscribers = Vec::new();
    for i in 0..args.subscribers {
        let (mut tcp, leftover) = upgrade(addr, &args.appkey)?;
        let pdu = format!(
            r#"{{"action":"rtm/subscribe","id":"s{i}","body":{{"channel":{}}}}}"#,
            serde_json::Value::String(args.channel.clone())
        );
        tcp.write_all(&masked_text_frame(pdu.as_bytes()))?;
        let count = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicBool::new(false));
        let (c, f, s) = (Arc::clone(&count), Arc::clone(&failed), Arc::clone(&stop));
        thread::Builder::new()
            .name(format!("load-sub-{i}"))
            .spawn(move || count_data(tcp, leftover, &c, &f, &s))?;
        subscribers.push((count, failed));
    }
    // The subscribe/ok comes before any data; a short pause lets every subscribe land.
    if !subscribers.is_empty() {
        thread::sleep(Duration::from_millis(200));
    }

    println!(
        "hub_load: {messages} publishes of {} B messages to {:?}, window {window}, batch {batch}, {} subscriber(s), hub {}",
        args.body.len(),
        args.channel,
        args.subscribers,
        if server.is_some() { "in-process" } else { endpoint.as_str() },
    );
    // The connections stay open until the hub's CPU is read: a closed one takes its
    // threads, and their CPU, away from /proc.
    let (mut tcp, mut leftover) = upgrade(addr, &args.appkey)?;
    let block = publish_block(&args.channel, &args.body, batch);
    let mut rates = Vec::new();
    let mut costs = Vec::new();
    for run in 1..=args.runs.max(1) {
        let before = meter()?;
        let start = Instant::now();
        let acked = publish(
            &mut tcp,
            std::mem::take(&mut leftover),
            &block,
            batch,
            window,
            messages,
        )?;
        let published_in = start.elapsed();
        let deadline = Instant::now() + Duration::from_secs(60);
        for (count, failed) in &subscribers {
            while count.load(Ordering::Relaxed) < run * messages
                && !failed.load(Ordering::Relaxed)
                && Instant::now() < deadline
            {
                thread::sleep(Duration::from_millis(1));
            }
        }
        let elapsed = start.elapsed();
        let after = meter()?;
        let rate = acked as f64 / published_in.as_secs_f64();
        rates.push(rate);
        println!(
            "  run {run}: {acked} acknowledged in {:.3} s: {rate:.0} acked publishes/s",
            published_in.as_secs_f64(),
        );
        for (i, (count, failed)) in subscribers.iter().enumerate() {
            println!(
                "    subscriber {i}: {} messages so far{}",
                count.load(Ordering::Relaxed),
                if failed.load(Ordering::Relaxed) {
                    " (subscription error)"
                } else {
                    ""
                }
            );
        }
        let cpu = after.minus(before);
        if cpu.total_ns > 0 {
            let per = cpu.total_ns as f64 / 1e3 / messages as f64;
            costs.push(per);
            println!(
                "    hub CPU {:.3} s (user {:.2} s, sys {:.2} s) in {:.3} s: {per:.2} µs per publish{}",
                cpu.total_ns as f64 / 1e9,
                cpu.user_ticks as f64 / TICKS_PER_SEC,
                cpu.sys_ticks as f64 / TICKS_PER_SEC,
                elapsed.as_secs_f64(),
                if args.subscribers > 0 {
                    " (including its fan-out)"
                } else {
                    ""
                }
            );
        } else {
            println!("    hub CPU not measured (give --pid with --endpoint)");
        }
    }
    stop.store(true, Ordering::Relaxed);
    drop(tcp);
    if rates.len() > 1 {
        print!(
            "  median of {} runs: {:.0} acked publishes/s",
            rates.len(),
            median(&mut rates)
        );
        if !costs.is_empty() {
            print!(", {:.2} µs hub CPU per publish", median(&mut costs));
        }
        println!();
    }
    if let Some(server) = server {
        server.shutdown();
    }
    Ok(())
}

/// Connects and upgrades; returns the socket and any bytes read past the 101 response.
fn upgrade(addr: SocketAddr, appkey: &str) -> io::Result<(TcpStream, Vec<u8>)> {
    let mut tcp = TcpStream::connect(addr)?;
    tcp.set_nodelay(true)?;
    write!(
        tcp,
        "GET /v2?appkey={appkey} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\n\r\n"
    )?;
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        let n = tcp.read(&mut buf)?;
        if n == 0 {
            return Err(io::Error::other("closed during the upgrade"));
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    if !head.starts_with(b"HTTP/1.1 101") {
        let text = String::from_utf8_lossy(&head[..end]);
        return Err(io::Error::other(format!("upgrade refused: {text}")));
    }
    Ok((tcp, head.split_off(end)))
}

/// A client text frame (masked, as RFC 6455 requires of clients).
fn masked_text_frame(payload: &[u8]) -> Vec<u8> {
    const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];
    let mut out = vec![0x81];
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
    out.extend_from_slice(&MASK);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ MASK[i % 4]));
    out
}

/// `batch` publish frames (ids 0..batch), encoded once and written again and again: the
/// hub echoes ids without checking that they are unique.
fn publish_block(channel: &str, body: &str, batch: u64) -> Vec<u8> {
    let channel = serde_json::Value::String(channel.to_owned());
    let mut block = Vec::new();
    for id in 0..batch {
        let pdu = format!(
            r#"{{"action":"rtm/publish","id":{id},"body":{{"channel":{channel},"message":{body}}}}}"#
        );
        block.extend(masked_text_frame(pdu.as_bytes()));
    }
    block
}

/// Server frames in `buf[..]`: calls `f(payload)` for each complete one and returns how
/// many bytes they took.
fn frames(buf: &[u8], mut f: impl FnMut(&[u8])) -> usize {
    let mut at = 0;
    loop {
        let rest = &buf[at..];
        if rest.len() < 2 {
            return at;
        }
        let (header, len) = match rest[1] & 0x7F {
            126 if rest.len() >= 4 => (4, usize::from(u16::from_be_bytes([rest[2], rest[3]]))),
            127 if rest.len() >= 10 => {
                let mut n = [0u8; 8];
                n.copy_from_slice(&rest[2..10]);
                (10, u64::from_be_bytes(n) as usize)
            }
            126 | 127 => return at,
            n => (2, usize::from(n)),
        };
        if rest.len() < header + len {
            return at;
        }
        f(&rest[header..header + len]);
        at += header + len;
    }
}

/// Publishes until `messages` are acknowledged, `window` at most in flight; returns how
/// many were acknowledged.
fn publish(
    tcp: &mut TcpStream,
    leftover: Vec<u8>,
    block: &[u8],
    batch: u64,
    window: u64,
    messages: u64,
) -> io::Result<u64> {
    const OK: &[u8] = br#"{"action":"rtm/publish/ok""#;
    tcp.set_nonblocking(true)?;
    let mut poll = Poll::new()?;
    poll.registry().register(
        &mut SourceFd(&tcp.as_raw_fd()),
        Token(0),
        Interest::READABLE | Interest::WRITABLE,
    )?;
    let mut events = Events::with_capacity(4);
    let mut inbuf = vec![0u8; 1 << 20];
    inbuf[..leftover.len()].copy_from_slice(&leftover);
    let mut filled = leftover.len();
    let (mut sent, mut acked, mut others) = (0u64, 0u64, 0u64);
    // Bytes of the current block already written (a write may be partial).
    let mut offset = 0usize;
    loop {
        // Write while the window allows (finishing a partial block first).
        loop {
            if offset == 0 && (sent >= messages || sent + batch - acked > window) {
                break;
            }
            match tcp.write(&block[offset..]) {
                Ok(n) => {
                    offset += n;
                    if offset == block.len() {
                        offset = 0;
                        sent += batch;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if acked >= messages {
            break;
        }
        // Read everything there is, counting acks.
        let acked_before = acked;
        loop {
            match tcp.read(&mut inbuf[filled..]) {
                Ok(0) => {
                    return Err(io::Error::other(format!(
                        "the hub closed the connection after {acked} acks"
                    )))
                }
                Ok(n) => {
                    filled += n;
                    let used = frames(&inbuf[..filled], |payload| {
                        if payload.starts_with(OK) {
                            acked += 1;
                        } else {
                            others += 1;
                            if others <= 3 {
                                eprintln!(
                                    "hub_load: unexpected frame: {}",
                                    String::from_utf8_lossy(&payload[..payload.len().min(200)])
                                );
                            }
                        }
                    });
                    inbuf.copy_within(used..filled, 0);
                    filled -= used;
                    if filled == inbuf.len() {
                        return Err(io::Error::other("a frame larger than the read buffer"));
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if acked >= messages {
            break;
        }
        if acked != acked_before {
            // The window moved: write more before waiting.
            continue;
        }
        // Both directions would block (or the window is closed): wait for the socket.
        poll.poll(&mut events, Some(Duration::from_secs(10)))?;
        if events.is_empty() {
            return Err(io::Error::other(format!(
                "no progress for 10 s ({sent} sent, {acked} acked)"
            )));
        }
    }
    Ok(acked)
}

/// A subscriber's reader: counts the messages of `rtm/subscription/data` PDUs (one per
/// PDU on a live subscription).
fn count_data(
    mut tcp: TcpStream,
    leftover: Vec<u8>,
    count: &AtomicU64,
    failed: &AtomicBool,
    stop: &AtomicBool,
) {
    const DATA: &[u8] = br#"{"action":"rtm/subscription/data""#;
    const ERROR: &[u8] = br#"{"action":"rtm/subscription/error""#;
    let _ = tcp.set_read_timeout(Some(Duration::from_millis(200)));
    let mut inbuf = vec![0u8; 1 << 20];
    inbuf[..leftover.len()].copy_from_slice(&leftover);
    let mut filled = leftover.len();
    while !stop.load(Ordering::Relaxed) {
        match tcp.read(&mut inbuf[filled..]) {
            Ok(0) => break,
            Ok(n) => {
                filled += n;
                let mut got = 0;
                let used = frames(&inbuf[..filled], |payload| {
                    if payload.starts_with(DATA) {
                        got += 1;
                    } else if payload.starts_with(ERROR) {
                        failed.store(true, Ordering::Relaxed);
                    }
                });
                count.fetch_add(got, Ordering::Relaxed);
                inbuf.copy_within(used..filled, 0);
                filled -= used;
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
}

/// Kernel clock ticks per second for `/proc/*/stat` times (USER_HZ, 100 on Linux).
const TICKS_PER_SEC: f64 = 100.0;

/// CPU used so far: run time in nanoseconds, and the user/system split in clock ticks.
#[derive(Clone, Copy, Debug, Default)]
struct Cpu {
    total_ns: u64,
    user_ticks: u64,
    sys_ticks: u64,
}

impl Cpu {
    fn minus(self, earlier: Cpu) -> Cpu {
        Cpu {
            total_ns: self.total_ns.saturating_sub(earlier.total_ns),
            user_ticks: self.user_ticks.saturating_sub(earlier.user_ticks),
            sys_ticks: self.sys_ticks.saturating_sub(earlier.sys_ticks),
        }
    }
}

/// utime and stime (clock ticks) from the text of a `/proc/…/stat` file.
fn stat_ticks(stat: &str) -> Option<(u64, u64)> {
    // The command name (field 2) may hold spaces; fields 14 and 15 follow its `)`.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split(' ').skip(11);
    Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
}

/// The CPU of this process's hub threads (named `rtm-…` by the server).
fn in_process_hub_cpu() -> io::Result<Cpu> {
    let mut cpu = Cpu::default();
    for task in std::fs::read_dir("/proc/self/task")? {
        let dir = task?.path();
        let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        if !comm.starts_with("rtm-") {
            continue;
        }
        if let Ok(s) = std::fs::read_to_string(dir.join("schedstat")) {
            cpu.total_ns += s
                .split(' ')
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
        }
        if let Some((u, s)) = std::fs::read_to_string(dir.join("stat"))
            .ok()
            .and_then(|s| stat_ticks(&s))
        {
            cpu.user_ticks += u;
            cpu.sys_ticks += s;
        }
    }
    Ok(cpu)
}

/// The CPU of process `pid`, every thread, finished ones included.
fn process_cpu(pid: u32) -> io::Result<Cpu> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let (u, s) = stat_ticks(&stat).ok_or_else(|| io::Error::other("unreadable stat"))?;
    Ok(Cpu {
        total_ns: (u + s) * (1e9 / TICKS_PER_SEC) as u64,
        user_ticks: u,
        sys_ticks: s,
    })
}

//! Attacks the local RTM server (in this process, default configuration) the way hostile
//! clients can, then measures how it serves a normal client: its limits at full scale,
//! where `tests/rtm_limits.rs` checks each one with small configured limits.
//!
//! ```text
//! cargo run --release -p benchlink-sandbox --example rtm_attack -- [--slow 1000]
//!     [--big 200] [--big-size 900000] [--guessers 20]
//! ```
//!
//! The attack, all at once: `--slow` sockets that send the start of an upgrade request
//! and then nothing (they stay open until the end); `--big` publishes of `--big-size`
//! bytes from four connections, a quarter of them to a channel whose subscriber never
//! reads, the others each to its own channel; `--guessers` connections that guess the superuser's
//! secret until the server closes them. Before and after, a normal client connects
//! and makes acknowledged publishes; the figures are its connect time and median
//! round trip, and the process's memory (the attackers' share is small: one big
//! message, shared).

use std::io::{self, Write};
use std::net::TcpStream;
use std::process::ExitCode;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use benchlink_sandbox::rtm::{RtmServer, RtmServerConfig, DEFAULT_APPKEY, SUPERUSER_ROLE};
use clap::Parser;
use tungstenite::{Message, WebSocket};

/// Hostile clients against the local RTM server.
#[derive(Debug, Parser)]
struct Args {
    /// Sockets that never finish their upgrade.
    #[arg(long, default_value_t = 1000)]
    slow: usize,
    /// Large publishes, each to its own channel.
    #[arg(long, default_value_t = 200)]
    big: usize,
    /// Bytes of each large message.
    #[arg(long, default_value_t = 900_000)]
    big_size: usize,
    /// Connections guessing the superuser's secret.
    #[arg(long, default_value_t = 20)]
    guessers: usize,
}

type Ws = WebSocket<TcpStream>;

fn main() -> ExitCode {
    match run(&Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rtm_attack: {e}");
            ExitCode::FAILURE
        }
    }
}

fn connect(server: &RtmServer) -> io::Result<Ws> {
    let url = format!("{}/v2?appkey={DEFAULT_APPKEY}", server.endpoint());
    let tcp = TcpStream::connect(server.addr())?;
    tcp.set_read_timeout(Some(Duration::from_secs(30)))?;
    tungstenite::client(url, tcp)
        .map(|(ws, _)| ws)
        .map_err(|e| io::Error::other(format!("upgrade: {e}")))
}

/// Sends a request and waits for its reply (the next PDU with an `id`).
fn call(ws: &mut Ws, action: &str, body: &str) -> io::Result<String> {
    let pdu = format!(r#"{{"action":"{action}","id":1,"body":{body}}}"#);
    ws.send(Message::text(pdu)).map_err(io::Error::other)?;
    loop {
        match ws.read().map_err(io::Error::other)? {
            Message::Text(t) if t.contains(r#""id":1"#) => return Ok(t.as_str().to_owned()),
            Message::Close(_) => return Err(io::Error::other("closed")),
            _ => {}
        }
    }
}

/// A normal client: connect time and median publish round trip.
fn normal_client(server: &RtmServer) -> io::Result<(Duration, Duration)> {
    let start = Instant::now();
    let mut ws = connect(server)?;
    let connected = start.elapsed();
    let mut rtts: Vec<Duration> = (0..100)
        .map(|i| {
            let t = Instant::now();
            let body = format!(r#"{{"channel":"normal","message":{i}}}"#);
            call(&mut ws, "rtm/publish", &body).map(|_| t.elapsed())
        })
        .collect::<io::Result<_>>()?;
    rtts.sort();
    Ok((connected, rtts[rtts.len() / 2]))
}

/// A value of `/proc/self/status` (`VmRSS`, `VmHWM` in KiB; `Threads`).
fn status(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(&format!("{field}:")))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn run(args: &Args) -> io::Result<()> {
    let server = RtmServer::start(RtmServerConfig::default())?;
    let (connect_before, rtt_before) = normal_client(&server)?;
    println!(
        "before: connect {connect_before:.1?}, publish round trip {rtt_before:.1?} (median), RSS {} MiB",
        status("VmRSS") / 1024
    );

    let attack = Instant::now();
    let request = format!("GET /v2?appkey={DEFAULT_APPKEY} HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    let mut slow = Vec::new();
    for _ in 0..args.slow {
        let mut tcp = TcpStream::connect(server.addr())?;
        // A socket the server already closed may refuse the bytes.
        let _ = tcp.write_all(request.as_bytes());
        slow.push(tcp);
    }
    let mut lazy = connect(&server)?;
    call(&mut lazy, "rtm/subscribe", r#"{"channel":"big.0"}"#)?;
    let big = Arc::new(format!(
        "\"{}\"",
        "x".repeat(args.big_size.saturating_sub(2))
    ));
    let publishers: Vec<_> = (0..4)
        .map(|p| {
            let mut ws = connect(&server)?;
            let (big, count) = (Arc::clone(&big), args.big);
            Ok(thread::spawn(move || -> io::Result<()> {
                // Publisher 0 sends to the lazy subscriber's channel, the others each
                // message to its own (built one at a time: the attacker's memory is not
                // the point).
                for i in (p..count).step_by(4) {
                    let channel = if p == 0 { 0 } else { i };
                    let pdu = format!(
                        r#"{{"action":"rtm/publish","id":1,"body":{{"channel":"big.{channel}","message":{big}}}}}"#
                    );
                    ws.send(Message::text(pdu)).map_err(io::Error::other)?;
                    while !matches!(ws.read().map_err(io::Error::other)?, Message::Text(t) if t.contains(r#""id":1"#))
                    {
                    }
                }
                Ok(())
            }))
        })
        .collect::<io::Result<_>>()?;
    let guessers: Vec<_> = (0..args.guessers)
        .map(|_| {
            let mut ws = connect(&server)?;
            Ok(thread::spawn(move || {
                let mut guesses = 0u32;
                let handshake =
                    format!(r#"{{"method":"role_secret","data":{{"role":"{SUPERUSER_ROLE}"}}}}"#);
                let guess =
                    r#"{"method":"role_secret","credentials":{"hash":"AAAAAAAAAAAAAAAAAAAAAA=="}}"#;
                while call(&mut ws, "auth/handshake", &handshake).is_ok()
                    && call(&mut ws, "auth/authenticate", guess).is_ok()
                {
                    guesses += 1;
                }
                guesses
            }))
        })
        .collect::<io::Result<_>>()?;
    for p in publishers {
        p.join()
            .map_err(|_| io::Error::other("publisher panicked"))??;
    }
    let guesses: u32 = guessers.into_iter().map(|g| g.join().unwrap_or(0)).sum();
    println!(
        "attack: {} slow sockets, {} publishes of {} KB, {guesses} guesses by {} connections (closed after their last), in {:.1?}",
        args.slow,
        args.big,
        args.big_size / 1000,
        args.guessers,
        attack.elapsed()
    );
    let open_slow = slow
        .iter()
        .filter(|tcp| {
            let _ = tcp.set_nonblocking(true);
            let mut byte = [0u8; 1];
            // WouldBlock: the server has not closed it.
            matches!(tcp.peek(&mut byte), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
        })
        .count();
    let (connect_after, rtt_after) = normal_client(&server)?;
    println!(
        "after: connect {connect_after:.1?}, publish round trip {rtt_after:.1?} (median); RSS {} MiB (peak {} MiB), {} threads, history {} MiB, {open_slow} slow sockets still open",
        status("VmRSS") / 1024,
        status("VmHWM") / 1024,
        status("Threads"),
        server.history_bytes() >> 20,
    );
    drop(lazy);
    drop(slow);
    server.shutdown();
    Ok(())
}

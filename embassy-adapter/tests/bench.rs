//! The async BenchClient over a real embassy-net stack, against the local benchmark
//! server: start → status → /data stream → results → compressed /log, on a clean wire and
//! on one that drops 10% of the frames.

mod common;

use std::ops::ControlFlow;
use std::time::Duration as StdDuration;

use benchlink_core::bench::request::{self, File};
use benchlink_core::http::DecompressorOxide;
use benchlink_embassy::bench::{BenchClient, Buffers, Error, Server, Timeouts, Waiting};
use benchlink_embassy::transport::TcpTransport;
use benchlink_sandbox::bench::Fault;
use benchlink_sandbox::{BenchServer, BenchServerConfig};
use common::{bridge, buf, network, run_test};
use embassy_time::{Duration, Timer};

const SCRIPT: &[u8] = include_bytes!("../../examples/scenarios/hello.bdl");
const DATA: &[u8] = include_bytes!("../../examples/scenarios/data.txt");

/// What one run of the flow saw.
#[derive(Debug, Default)]
struct Seen {
    samples: usize,
    log_lines: usize,
    final_status: String,
    print_metric: bool,
}

/// A client of the gateway's `port` (bridged to a server) over `stack`, inflating, its
/// streams failing after `idle` of silence.
fn client_on(
    stack: embassy_net::Stack<'static>,
    port: u16,
    idle: Duration,
) -> BenchClient<'static, TcpTransport<'static>> {
    let transport = TcpTransport::new(stack, buf(4096), buf(4096));
    let buffers = Buffers {
        rx: buf(1024),
        tx: buf(512),
        head: buf(1024),
        body: buf(8192),
        line: buf(512),
    };
    let state = Box::leak(Box::new(DecompressorOxide::new()));
    BenchClient::new(transport, Server::new("10.0.0.1", port), buffers)
        .unwrap()
        .with_inflate(state, buf(32 * 1024))
        .unwrap()
        .with_timeouts(Timeouts {
            stream_idle: Some(idle),
            ..Timeouts::default()
        })
}

fn bench_flow(drop_percent: u32) -> (Seen, u64) {
    let server = BenchServer::start(BenchServerConfig::fast()).expect("bench server");
    let addr = server.addr();
    let (tx, rx) = std::sync::mpsc::channel();
    run_test(StdDuration::from_secs(45), move |spawner| async move {
        let net = network(spawner);
        net.wire
            .drop_percent
            .store(drop_percent, std::sync::atomic::Ordering::Relaxed);
        bridge(spawner, net.gateway, 4800, addr, 2);
        let mut client = client_on(net.device, 4800, Duration::from_secs(20));
        let mut seen = Seen::default();

        let includes = [File {
            name: "data.txt",
            content: DATA,
        }];
        let start = request::Start {
            includes: &includes,
            ..request::Start::new(File {
                name: "hello.bdl",
                content: SCRIPT,
            })
        };
        let id = client.call(&start).await.expect("start").id;

        // /data answers once the benchmark runs: the client polls /status first.
        client
            .data(id, |sample| {
                if let Ok(sample) = sample {
                    assert!(!sample.name.is_empty());
                    seen.samples += 1;
                }
                ControlFlow::Continue(())
            })
            .await
            .expect("data stream");

        let final_status = loop {
            let status = client.call(&request::Status { id }).await.expect("status");
            if status.status.is_final() {
                break status.status.as_str().to_owned();
            }
            Timer::after_millis(10).await;
        };
        seen.final_status = final_status;
        let results = client
            .call(&request::Results { id })
            .await
            .expect("results");
        seen.print_metric = results.get("print").is_some();

        // zlib-compressed on the server: inflated into the 32 KiB window.
        client
            .stream(&request::Log { id }, |line| {
                if line.is_ok() {
                    seen.log_lines += 1;
                }
                ControlFlow::Continue(())
            })
            .await
            .expect("log stream");

        // The server's typed error, through the same path.
        let missing = client.call(&request::Status { id: 999_999 }).await;
        assert!(
            matches!(missing, Err(Error::Server(_)))
                && missing.unwrap_err().http_status() == Some(404),
        );
        let dropped = net.wire.dropped.load(std::sync::atomic::Ordering::Relaxed);
        tx.send((seen, dropped)).unwrap();
    });
    let result = rx.recv().unwrap();
    drop(server);
    result
}

#[test]
fn bench_flow_over_embassy_net() {
    let (seen, _) = bench_flow(0);
    assert_eq!(seen.final_status, "complete", "{seen:?}");
    assert!(seen.samples > 0, "{seen:?}");
    assert!(seen.log_lines > 0, "{seen:?}");
    assert!(seen.print_metric, "{seen:?}");
}

#[test]
fn bench_flow_survives_a_lossy_wire() {
    let (seen, dropped) = bench_flow(10);
    assert!(dropped > 0, "the wire dropped nothing");
    eprintln!("lossy wire: {dropped} frames dropped, {seen:?}");
    assert_eq!(seen.final_status, "complete", "{seen:?}");
    assert!(seen.samples > 0, "{seen:?}");
    assert!(seen.log_lines > 0, "{seen:?}");
}

/// `with_timeout` bounds a JSON call as a whole: a server that never answers and one that
/// answers a byte at a time both end in `Error::Timeout` after the limit, not later.
#[test]
fn a_silent_or_dripping_server_times_out() {
    let start = |fault| {
        BenchServer::start(BenchServerConfig {
            fault: Some(fault),
            ..BenchServerConfig::fast()
        })
        .expect("bench server")
    };
    let silent = start(Fault::Silent);
    let dripping = start(Fault::Drip(StdDuration::from_millis(200)));
    let (silent_addr, dripping_addr) = (silent.addr(), dripping.addr());
    let (tx, rx) = std::sync::mpsc::channel();
    run_test(StdDuration::from_secs(40), move |spawner| async move {
        let net = network(spawner);
        bridge(spawner, net.gateway, 4800, silent_addr, 1);
        bridge(spawner, net.gateway, 4801, dripping_addr, 1);
        for port in [4800, 4801] {
            let transport = TcpTransport::new(net.device, buf(4096), buf(4096));
            let buffers = Buffers {
                rx: buf(1024),
                tx: buf(512),
                head: buf(1024),
                body: buf(2048),
                line: buf(256),
            };
            // Tried once: the deadline is the outcome (no retry policy).
            let mut client = BenchClient::new(transport, Server::new("10.0.0.1", port), buffers)
                .unwrap()
                .with_timeout(Duration::from_secs(2))
                .with_retry(None);
            let started = std::time::Instant::now();
            let result = client.call(&request::Status { id: 1 }).await.map(|_| ());
            let took = started.elapsed();
            let message = result.as_ref().map_err(ToString::to_string).err();
            let timed_out = matches!(
                result,
                Err(Error::Timeout {
                    waiting: Waiting::Reply,
                    ..
                })
            );
            client.close().await;
            tx.send((port, timed_out, message, took)).unwrap();
        }
    });
    for _ in 0..2 {
        let (port, timed_out, message, took) = rx.recv().unwrap();
        assert!(timed_out, "port {port}: {message:?}");
        assert_eq!(
            message.as_deref(),
            Some("no reply from the server within 2 s"),
            "port {port}"
        );
        // Ended by the deadline: a client that waited for the drip would end with the
        // server's reply (a 404), not this timeout. Not before the deadline.
        assert!(
            took >= StdDuration::from_secs(2),
            "port {port} took {took:?}"
        );
    }
    drop((silent, dripping));
}

/// `/data` of a benchmark that failed is an empty stream: the client learns it from
/// `/status` and never sends `/data`, which the real server would leave unanswered.
#[test]
fn data_of_a_failed_benchmark_is_empty_not_a_hang() {
    let server = BenchServer::start(BenchServerConfig {
        quirks: benchlink_sandbox::bench::Quirks {
            data_hangs_on_failed: true,
            ..Default::default()
        },
        ..BenchServerConfig::fast()
    })
    .expect("bench server");
    let addr = server.addr();
    let server = std::sync::Arc::new(server);
    let crash = std::sync::Arc::clone(&server);
    let (tx, rx) = std::sync::mpsc::channel();
    run_test(StdDuration::from_secs(30), move |spawner| async move {
        let net = network(spawner);
        bridge(spawner, net.gateway, 4800, addr, 1);
        let transport = TcpTransport::new(net.device, buf(4096), buf(4096));
        let buffers = Buffers {
            rx: buf(1024),
            tx: buf(512),
            head: buf(1024),
            body: buf(2048),
            line: buf(256),
        };
        let mut client = BenchClient::new(transport, Server::new("10.0.0.1", 4800), buffers)
            .unwrap()
            .with_timeout(Duration::from_secs(10));
        let start = request::Start::new(File {
            name: "hello.bdl",
            content: SCRIPT,
        });
        let id = client.call(&start).await.expect("start").id;
        assert!(crash.crash_benchmark(id), "crashed");
        let mut samples = 0;
        client
            .data(id, |_| {
                samples += 1;
                ControlFlow::Continue(())
            })
            .await
            .expect("an empty stream");
        tx.send(samples).unwrap();
    });
    assert_eq!(rx.recv().unwrap(), 0);
}

/// `/data` and the zlib `/log` of a live benchmark through a relay that cuts every
/// connection at seeded random intervals: the client resumes both with core's cursors,
/// and what it read is exactly what the server has, read directly once it ended.
#[test]
fn data_and_log_resume_through_a_relay_that_cuts_them() {
    use benchlink_core::bench::resume::{DataCursor, LogCursor, Metrics, Retry};
    use benchlink_sandbox::relay::{CutSchedule, Relay, RelayConfig};

    let server = BenchServer::start(BenchServerConfig {
        speed: BenchServerConfig::default().speed,
        ..BenchServerConfig::fast()
    })
    .expect("bench server");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    println!("relay cut seed {seed}");
    let relay = Relay::start_with(
        "127.0.0.1:0".parse().unwrap(),
        server.addr(),
        RelayConfig {
            delay: std::time::Duration::ZERO,
            cuts: Some(CutSchedule::new(seed, 150, 600)),
        },
    )
    .expect("relay");
    let (relayed, direct) = (relay.addr(), server.addr());
    let (tx, rx) = std::sync::mpsc::channel();
    run_test(StdDuration::from_secs(90), move |spawner| async move {
        let net = network(spawner);
        bridge(spawner, net.gateway, 4800, relayed, 2);
        bridge(spawner, net.gateway, 4801, direct, 2);
        let client = |port: u16| client_on(net.device, port, Duration::from_secs(5));
        let policy = Retry {
            interval: core::time::Duration::from_millis(20),
            attempts: Some(50),
            ..Retry::DEFAULT
        };
        let mut cut = client(4800).with_retry(Some(policy));
        let start = request::Start {
            includes: &[File {
                name: "data.txt",
                content: DATA,
            }],
            ..request::Start::new(File {
                name: "hello.bdl",
                content: SCRIPT,
            })
        };
        let id = loop {
            // A /start cut on its way is not sent again (its outcome is unknown): this
            // test starts its benchmark on the direct port.
            let mut direct = client(4801);
            if let Ok(started) = direct.call(&start).await {
                break started.id;
            }
        };
        let mut samples = Vec::new();
        let mut data = DataCursor::new(Metrics::<64, 64>::new());
        // The caller breaks off once at its 10th sample (as the device agent does when
        // its outbox is full): that sample is not taken, and the next call hands it out.
        let mut broke_off = false;
        loop {
            let mut stopped = false;
            cut.data_resumed(id, &mut data, |s| {
                let s = s.expect("a sample");
                if samples.len() == 10 && !broke_off {
                    (broke_off, stopped) = (true, true);
                    return ControlFlow::Break(());
                }
                samples.push(format!("{}\t{}\t{}", s.timestamp, s.name, s.value.as_str()));
                ControlFlow::Continue(())
            })
            .await
            .expect("data, resumed");
            if !stopped {
                break;
            }
        }
        assert!(broke_off);
        let mut log = Vec::new();
        let mut log_cursor = LogCursor::new();
        cut.resume(&request::Log { id }, &mut log_cursor, |l| {
            log.push(l.expect("a log line").to_owned());
            ControlFlow::Continue(())
        })
        .await
        .expect("log, resumed");

        let mut whole = Vec::new();
        let mut direct = client(4801);
        direct
            .data(id, |s| {
                let s = s.expect("a sample");
                whole.push(format!("{}\t{}\t{}", s.timestamp, s.name, s.value.as_str()));
                ControlFlow::Continue(())
            })
            .await
            .expect("data, direct");
        let mut whole_log = Vec::new();
        direct
            .stream(&request::Log { id }, |l| {
                whole_log.push(l.expect("a log line").to_owned());
                ControlFlow::Continue(())
            })
            .await
            .expect("log, direct");
        tx.send((
            samples,
            whole,
            data.resumptions(),
            log,
            whole_log,
            log_cursor.resumptions(),
        ))
        .unwrap();
    });
    let (mut samples, mut whole, resumed, log, whole_log, log_resumed) = rx.recv().unwrap();
    let cuts = relay.cutter().stats();
    println!("/data resumed {resumed} times, /log {log_resumed} times; relay: {cuts:?}");
    assert!(cuts.connections_cut > 0, "seed {seed}: {cuts:?}");
    samples.sort();
    whole.sort();
    assert_eq!(
        samples, whole,
        "seed {seed}: every sample once ({resumed} resumptions)"
    );
    assert_eq!(
        log, whole_log,
        "seed {seed}: the log once, in order ({log_resumed} resumptions)"
    );
    assert!(!whole.is_empty() && !whole_log.is_empty());
}

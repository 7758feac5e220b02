//! Core's blocking clients (feature `embedded-io`) over std's `TcpStream` through
//! `embedded-io-adapters`, against the local servers: the whole benchmark flow (upload,
//! status, the `/data` stream, results, the compressed log, a typed server error), the
//! messaging link (subscribe, a typed publish that comes back on the subscription, a
//! read reply read into a struct), and the hostile peers: a server that accepts and never
//! answers must make both clients give up at their deadlines.

use std::io::{self, ErrorKind as IoKind};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::ops::ControlFlow;
use std::thread;
use std::time::Duration;

use benchlink_core::bench::exchange::{Buffers, Server, Waiting};
use benchlink_core::bench::request::{self, File};
use benchlink_core::bench::Status;
use benchlink_core::blocking::bench::{BenchClient, Error, Timeouts};
use benchlink_core::blocking::{rtm, Transport};
use benchlink_core::http::DecompressorOxide;
use benchlink_core::rtm::pdu::SubscriptionData;
use benchlink_core::rtm::{
    Ack, ClientState, Config, ConnectError, Disconnect, Handler, Link, LinkConfig, Mode, Outcome,
    Pending, SubState, SubscribeArgs, SubscriptionSlot, Ticket,
};
use benchlink_core::time::Instant;
use benchlink_sandbox::rtm::{SocketFault, DEFAULT_APPKEY};
use benchlink_sandbox::{RtmServer, RtmServerConfig};
use benchlink_tests::{fast_server, server_with, within};
use embedded_io_adapters::std::FromStd;
use serde::{Deserialize, Serialize};

const SCRIPT: &[u8] = include_bytes!("../../examples/scenarios/hello.bdl");
const DATA: &[u8] = include_bytes!("../../examples/scenarios/data.txt");

/// std's `TcpStream` as a blocking transport: `poll()` through a peek with a read
/// timeout, the clock from `std::time::Instant`.
struct StdTransport {
    stream: Option<FromStd<TcpStream>>,
    start: std::time::Instant,
}

impl StdTransport {
    fn new() -> Self {
        StdTransport {
            stream: None,
            start: std::time::Instant::now(),
        }
    }

    fn stream(&mut self) -> io::Result<&mut FromStd<TcpStream>> {
        self.stream
            .as_mut()
            .ok_or_else(|| io::Error::from(IoKind::NotConnected))
    }
}

impl embedded_io::ErrorType for StdTransport {
    type Error = io::Error;
}

impl embedded_io::Read for StdTransport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream()?.read(buf)
    }
}

impl embedded_io::Write for StdTransport {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream()?.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.stream {
            Some(s) => s.flush(),
            None => Ok(()),
        }
    }
}

impl Transport for StdTransport {
    fn now(&mut self) -> Instant {
        Instant::from_micros(self.start.elapsed().as_micros() as u64)
    }

    fn wait_readable(&mut self, deadline: Option<Instant>) -> io::Result<bool> {
        let now = self.now();
        let left = deadline.map(|d| {
            let micros = d.as_micros().saturating_sub(now.as_micros());
            // std refuses a zero timeout.
            Duration::from_micros(micros.max(1))
        });
        let Some(stream) = self.stream.as_mut() else {
            // No connection: nothing can arrive, so this is a sleep.
            thread::sleep(left.unwrap_or(Duration::from_millis(10)));
            return Ok(false);
        };
        let tcp = stream.inner_mut();
        tcp.set_read_timeout(left)?;
        match tcp.peek(&mut [0u8; 1]) {
            Ok(_) => Ok(true),
            Err(e) if matches!(e.kind(), IoKind::WouldBlock | IoKind::TimedOut) => Ok(false),
            // The read reports it.
            Err(_) => Ok(true),
        }
    }

    fn connect(&mut self, host: &str, port: u16, tls: bool) -> io::Result<()> {
        self.stream = None;
        if tls {
            return Err(io::Error::from(IoKind::Unsupported));
        }
        let addr = (host, port)
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::from(IoKind::NotFound))?;
        let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        tcp.set_nodelay(true)?;
        tcp.set_write_timeout(Some(Duration::from_secs(5)))?;
        tcp.set_read_timeout(None)?;
        self.stream = Some(FromStd::new(tcp));
        Ok(())
    }

    fn close(&mut self) {
        self.stream = None;
    }
}

fn buf(n: usize) -> &'static mut [u8] {
    Box::leak(vec![0u8; n].into_boxed_slice())
}

fn buffers() -> Buffers<'static> {
    Buffers {
        rx: buf(1024),
        tx: buf(512),
        head: buf(1024),
        body: buf(8192),
        line: buf(512),
    }
}

/// A blocking benchmark client of the server at `port` on loopback, for JSON calls
/// that must end within `reply` (tried once: the deadline is the outcome).
fn json_client(port: u16, reply: Duration) -> BenchClient<'static, StdTransport> {
    BenchClient::new(
        StdTransport::new(),
        Server::new("127.0.0.1", port),
        buffers(),
    )
    .unwrap()
    .with_timeouts(Timeouts {
        reply: Some(reply),
        stream_idle: None,
    })
    .with_retry(None)
}

#[test]
fn bench_flow_over_std_tcp() {
    let server = fast_server();
    let port = server.addr().port();
    within(Duration::from_secs(60), "blocking bench flow", move || {
        let state = Box::leak(Box::new(DecompressorOxide::new()));
        let mut client = BenchClient::new(
            StdTransport::new(),
            Server::new("127.0.0.1", port),
            buffers(),
        )
        .unwrap()
        .with_inflate(state, buf(32 * 1024))
        .unwrap()
        .with_timeouts(Timeouts {
            reply: Some(Duration::from_secs(10)),
            stream_idle: Some(Duration::from_secs(20)),
        });
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
        let id = client.call(&start).expect("start").id;
        // /data once the benchmark runs (the client polls /status first).
        let mut samples = 0;
        client
            .data(id, |sample| {
                let sample = sample.expect("a metric line");
                assert!(!sample.name.is_empty());
                samples += 1;
                ControlFlow::Continue(())
            })
            .expect("data stream");
        assert!(samples > 0);
        let status = loop {
            let status = client.call(&request::Status { id }).expect("status");
            if status.status.is_final() {
                break status.status;
            }
            thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(status, Status::Complete);
        let results = client.call(&request::Results { id }).expect("results");
        assert!(results.get("print").is_some());
        // zlib-compressed on the server, inflated into the window.
        let mut log_lines = 0;
        client
            .stream(&request::Log { id }, |line| {
                assert!(line.is_ok(), "{line:?}");
                log_lines += 1;
                ControlFlow::Continue(())
            })
            .expect("log stream");
        assert!(log_lines > 0);
        // The server's typed error, through the same path.
        let missing = client.call(&request::Status { id: 999_999 });
        assert!(
            matches!(missing, Err(Error::Server(e)) if e.http_status() == Some(404)),
            "{missing:?}"
        );
    });
}

/// `/data` and the zlib `/log` of a live benchmark through a relay that cuts every
/// connection at seeded random intervals: the blocking client resumes both with core's
/// cursors (breaking off once and going on with the same cursor), and what it read is
/// exactly what the server has.
#[test]
fn data_and_log_resume_through_a_relay_that_cuts_them() {
    use benchlink_core::bench::resume::{DataCursor, LogCursor, Metrics, Retry};
    use benchlink_sandbox::relay::{CutSchedule, Relay, RelayConfig};

    let server = server_with(|c| c.speed = benchlink_tests::live_speed());
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    println!("relay cut seed {seed}");
    let relay = Relay::start_with(
        "127.0.0.1:0".parse().unwrap(),
        server.addr(),
        RelayConfig {
            delay: Duration::ZERO,
            cuts: Some(CutSchedule::new(seed, 150, 600)),
        },
    )
    .expect("relay");
    let (cut_port, direct_port) = (relay.addr().port(), server.addr().port());
    let read = within(Duration::from_secs(90), "resumed streams", move || {
        let client = |port: u16| {
            let state = Box::leak(Box::new(DecompressorOxide::new()));
            BenchClient::new(
                StdTransport::new(),
                Server::new("127.0.0.1", port),
                buffers(),
            )
            .unwrap()
            .with_inflate(state, buf(32 * 1024))
            .unwrap()
            .with_timeouts(Timeouts {
                reply: Some(Duration::from_secs(10)),
                stream_idle: Some(Duration::from_secs(5)),
            })
            .with_retry(Some(Retry {
                interval: Duration::from_millis(20),
                attempts: Some(50),
                ..Retry::DEFAULT
            }))
        };
        let mut direct = client(direct_port);
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
        let id = direct.call(&start).expect("start").id;
        let mut cut = client(cut_port);
        let (mut samples, mut broke_off) = (Vec::new(), false);
        let mut data = DataCursor::new(Metrics::<64, 64>::new());
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
            .expect("data, resumed");
            if !stopped {
                break;
            }
        }
        let mut log = Vec::new();
        let mut log_cursor = LogCursor::new();
        cut.resume(&request::Log { id }, &mut log_cursor, |l| {
            log.push(l.expect("a log line").to_owned());
            ControlFlow::Continue(())
        })
        .expect("log, resumed");
        let mut whole = Vec::new();
        direct
            .data(id, |s| {
                let s = s.expect("a sample");
                whole.push(format!("{}\t{}\t{}", s.timestamp, s.name, s.value.as_str()));
                ControlFlow::Continue(())
            })
            .expect("data, direct");
        let mut whole_log = Vec::new();
        direct
            .stream(&request::Log { id }, |l| {
                whole_log.push(l.expect("a log line").to_owned());
                ControlFlow::Continue(())
            })
            .expect("log, direct");
        (samples, whole, data.resumptions(), log, whole_log)
    });
    let (mut samples, mut whole, resumed, log, whole_log) = read;
    let cuts = relay.cutter().stats();
    println!("/data: {resumed} requests after the first; relay: {cuts:?}");
    assert!(cuts.connections_cut > 0, "seed {seed}: {cuts:?}");
    samples.sort();
    whole.sort();
    assert!(!whole.is_empty() && !whole_log.is_empty());
    assert_eq!(samples, whole, "seed {seed}: every sample once");
    assert_eq!(log, whole_log, "seed {seed}: the log once, in order");
}

/// `/data` of a benchmark that failed is an empty stream: the client learns it from
/// `/status` and never sends `/data`, which the real server would leave unanswered.
#[test]
fn data_of_a_failed_benchmark_is_empty_not_a_hang() {
    let server = server_with(|c| {
        c.speed = benchlink_tests::live_speed();
        c.quirks.data_hangs_on_failed = true;
    });
    let id = {
        let port = server.addr().port();
        let mut client = json_client(port, Duration::from_secs(10));
        let start = request::Start::new(File {
            name: "hello.bdl",
            content: SCRIPT,
        });
        client.call(&start).expect("start").id
    };
    assert!(server.crash_benchmark(id), "crashed");
    let port = server.addr().port();
    within(
        Duration::from_secs(30),
        "data of a failed benchmark",
        move || {
            let mut client = json_client(port, Duration::from_secs(10));
            let mut samples = 0;
            client
                .data(id, |_| {
                    samples += 1;
                    ControlFlow::Continue(())
                })
                .expect("an empty stream");
            assert_eq!(samples, 0);
        },
    );
}

/// A server that refuses an upload before its body is in (413 for a scenario over its
/// limit) and closes: the blocking client reads and reports that reply, as curl does,
/// instead of the broken pipe its unsent body met; the next call opens a new connection.
#[test]
fn an_early_reply_to_an_upload_too_large_is_read_not_lost() {
    let server = server_with(|c| c.max_body = 64 << 10);
    let port = server.addr().port();
    within(Duration::from_secs(60), "early reply", move || {
        let mut client = json_client(port, Duration::from_secs(20));
        // Far more than the server reads and the sockets buffer, so the write breaks.
        let big: &'static [u8] = Box::leak(vec![b'#'; 24 << 20].into_boxed_slice());
        let start = request::Start::new(File {
            name: "big.bdl",
            content: big,
        });
        match client.call(&start) {
            Err(e) => assert_eq!(e.http_status(), Some(413), "{e}"),
            Ok(reply) => panic!("a 24 MiB scenario was accepted as {}", reply.id),
        }
        let missing = client.call(&request::Status { id: 999_999 });
        assert_eq!(
            missing.map(|_| ()).map_err(|e| e.http_status()),
            Err(Some(404))
        );
    });
}

/// A listener that accepts and then says nothing, holding its connections open.
fn silent_server() -> (u16, thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = thread::spawn(move || {
        listener.set_nonblocking(true).unwrap();
        let mut held = Vec::new();
        let until = std::time::Instant::now() + Duration::from_secs(8);
        while std::time::Instant::now() < until {
            match listener.accept() {
                Ok((s, _)) => held.push(s),
                Err(_) => thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    (port, handle)
}

#[test]
fn a_silent_bench_server_times_out_at_the_reply_deadline() {
    let (port, _server) = silent_server();
    within(Duration::from_secs(10), "silent bench server", move || {
        let mut client = json_client(port, Duration::from_millis(300));
        let started = std::time::Instant::now();
        let result = client.call(&request::Status { id: 1 });
        assert!(
            matches!(
                result,
                Err(Error::Timeout {
                    waiting: Waiting::Reply,
                    ..
                })
            ),
            "{result:?}"
        );
        assert!(started.elapsed() >= Duration::from_millis(300));
    });
}

#[test]
fn a_dripping_bench_server_times_out_at_the_reply_deadline_too() {
    // One byte of a valid response every 50 ms: never silent, and never done (a header
    // that does not end, until the client hangs up), however late the client looks.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let _server = thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            use std::io::Write as _;
            let head = b"HTTP/1.1 200 OK\r\nX-Drip: ";
            let started = std::time::Instant::now();
            for b in head.iter().chain(std::iter::repeat(&b'a')) {
                if s.write_all(&[*b]).is_err() || started.elapsed() > Duration::from_secs(30) {
                    break;
                }
                thread::sleep(Duration::from_millis(50));
            }
        }
    });
    within(
        Duration::from_secs(10),
        "dripping bench server",
        move || {
            let mut client = json_client(port, Duration::from_millis(400));
            let result = client.call(&request::Status { id: 1 });
            assert!(
                matches!(
                    result,
                    Err(Error::Timeout {
                        waiting: Waiting::Reply,
                        ..
                    })
                ),
                "{result:?}"
            );
        },
    );
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Sample {
    metric: String,
    value: i64,
}

/// What the messaging tests watch.
#[derive(Default)]
struct Seen {
    state: Option<ClientState>,
    subscribed: bool,
    received: Vec<Sample>,
    acked: Vec<Ticket>,
    read: Option<Sample>,
    /// Messages delivered (only the first few are kept).
    count: usize,
    dead_peer: bool,
}

impl Handler for Seen {
    fn client_state(&mut self, _leave: ClientState, enter: ClientState) {
        self.state = Some(enter);
    }

    fn subscription_state(&mut self, _key: &str, _leave: SubState, enter: SubState) {
        self.subscribed = enter == SubState::Subscribed;
    }

    fn subscription_data(&mut self, _key: &str, data: SubscriptionData<'_>) {
        for m in data.messages.elements() {
            let mut scratch = [0u8; 256];
            let sample = m
                .as_json()
                .expect("JSON")
                .deserialize_unescaped(&mut scratch)
                .expect("a Sample");
            self.count += 1;
            if self.received.len() < 16 {
                self.received.push(sample);
            }
        }
    }

    fn link_closed(&mut self, why: Disconnect<'_>) {
        self.dead_peer |= matches!(why, Disconnect::DeadPeer { .. });
    }

    fn reply(&mut self, ticket: Ticket, outcome: Outcome<'_>) {
        if let Outcome::Ok(pdu) = outcome {
            // The metric name has escapes: unescaped into a scratch buffer (the
            // borrowing `message_as` refuses escaped text for what it would borrow).
            if let Some(message) = pdu.message().filter(|m| !m.is_null()) {
                let mut scratch = [0u8; 256];
                self.read = Some(
                    message
                        .as_json()
                        .expect("JSON")
                        .deserialize_unescaped(&mut scratch)
                        .expect("a Sample"),
                );
            }
            self.acked.push(ticket);
        }
    }
}

type TestLink = Link<Vec<u8>, [SubscriptionSlot; 2], [Pending; 8]>;

fn link(endpoint: &str, config: Config, link: LinkConfig) -> TestLink {
    Link::new(
        config,
        link,
        endpoint,
        DEFAULT_APPKEY,
        benchlink_core::rtm::Buffers {
            rx: vec![0; 8192],
            tx: vec![0; 8192],
            queue: vec![0; 4096],
            outbox: vec![0; 4096],
            subscription_args: vec![0; 512],
        },
        [SubscriptionSlot::EMPTY; 2],
        [Pending::EMPTY; 8],
    )
    .unwrap()
}

/// Runs the link until `done` or `limit`, in slices of 50 ms.
fn run_until(
    link: &mut TestLink,
    t: &mut StdTransport,
    seen: &mut Seen,
    limit: Duration,
    done: impl Fn(&Seen) -> bool,
) {
    let mut chunk = [0u8; 512];
    let end = t.now().saturating_add(limit);
    while !done(seen) && t.now() < end {
        let until = t.now().saturating_add(Duration::from_millis(50));
        rtm::run(link, t, &mut chunk, seen, until);
    }
}

#[test]
fn messaging_over_std_tcp_with_typed_messages() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("RTM server");
    let endpoint = server.endpoint();
    within(Duration::from_secs(30), "blocking messaging", move || {
        let mut t = StdTransport::new();
        let mut link = link(&endpoint, Config::default(), LinkConfig::DEFAULT);
        let mut seen = Seen::default();
        let now = t.now();
        link.client_mut().start(now, &mut seen);
        link.client_mut()
            .subscribe(
                now,
                "samples",
                Mode::Reliable,
                SubscribeArgs::default(),
                &mut seen,
            )
            .unwrap();
        run_until(&mut link, &mut t, &mut seen, Duration::from_secs(10), |s| {
            s.subscribed
        });
        assert_eq!(seen.state, Some(ClientState::Connected));
        assert!(seen.subscribed);

        // A hostile metric name: the typed publish escapes it, and it comes back whole.
        let sample = Sample {
            metric: "rx \"eth0\"\\\n\u{1}".to_owned(),
            value: -42,
        };
        let now = t.now();
        let ticket = link
            .client_mut()
            .publish_typed(
                now,
                "samples",
                &sample,
                Ack::Reply { deadline: None },
                &mut seen,
            )
            .unwrap()
            .unwrap();
        run_until(&mut link, &mut t, &mut seen, Duration::from_secs(10), |s| {
            !s.received.is_empty() && !s.acked.is_empty()
        });
        assert_eq!(seen.received, std::slice::from_ref(&sample));
        assert_eq!(seen.acked, [ticket]);

        // A typed write, then a read whose reply is read into the struct.
        let now = t.now();
        link.client_mut()
            .write_typed(
                now,
                "config",
                &sample,
                Ack::Reply { deadline: None },
                &mut seen,
            )
            .unwrap();
        link.client_mut()
            .read(now, "config", None, None, &mut seen)
            .unwrap();
        run_until(&mut link, &mut t, &mut seen, Duration::from_secs(10), |s| {
            s.read.is_some()
        });
        assert_eq!(seen.read, Some(sample));
    });
}

#[test]
fn a_silent_rtm_server_fails_the_upgrade_at_the_connect_timeout() {
    let (port, _server) = silent_server();
    within(Duration::from_secs(15), "silent RTM server", move || {
        let mut t = StdTransport::new();
        let config = Config {
            connect_timeout: Duration::from_millis(400),
            retry_first_connect: true,
            fail_count_threshold: Some(1),
            reconnect_interval: Duration::from_millis(100),
            ..Config::default()
        };
        let mut link = link(
            &format!("ws://127.0.0.1:{port}"),
            config,
            LinkConfig::DEFAULT,
        );
        let mut seen = Seen::default();
        let now = t.now();
        link.client_mut().start(now, &mut seen);
        let started = std::time::Instant::now();
        run_until(&mut link, &mut t, &mut seen, Duration::from_secs(10), |s| {
            s.state == Some(ClientState::Stopped)
        });
        // The first attempt and its one retry both gave up at the connect timeout,
        // then the client stopped.
        assert_eq!(seen.state, Some(ClientState::Stopped));
        assert_eq!(
            link.client().last_connecting_error(),
            Some(ConnectError::Timeout)
        );
        // Two attempts of 400 ms each, not cut short (a hang ends `run_until` above, and
        // then the client is not Stopped).
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(800), "{took:?}");
    });
}

/// Connects `link` and subscribes to `channel`.
fn subscribed(link: &mut TestLink, t: &mut StdTransport, seen: &mut Seen, channel: &str) {
    let now = t.now();
    link.client_mut().start(now, seen);
    link.client_mut()
        .subscribe(now, channel, Mode::Reliable, SubscribeArgs::default(), seen)
        .unwrap();
    run_until(link, t, seen, Duration::from_secs(10), |s| s.subscribed);
    assert!(seen.subscribed);
}

#[test]
fn a_data_flood_is_taken_in_bounded_reads_and_the_loop_keeps_its_deadlines() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("RTM server");
    let endpoint = server.endpoint();
    let faults = server.faults();
    within(Duration::from_secs(30), "blocking flood", move || {
        let mut t = StdTransport::new();
        let mut link = link(&endpoint, Config::default(), LinkConfig::DEFAULT);
        let mut seen = Seen::default();
        subscribed(&mut link, &mut t, &mut seen, "flood");
        faults.set_socket_fault(Some(SocketFault::DataFlood {
            subscription_id: "flood".to_owned(),
            message: r#"{"metric":"m","value":1}"#.to_owned(),
        }));
        // The server writes as fast as the socket takes it, without end; every call
        // still returns at its deadline (one 512-byte read at a time, the time checked
        // after each). A call that read on instead never returns: the guard of `within`
        // fails the test then; how late a call returned is not asserted.
        let mut chunk = [0u8; 512];
        for _ in 0..10 {
            let until = t.now().saturating_add(Duration::from_millis(100));
            rtm::run(&mut link, &mut t, &mut chunk, &mut seen, until);
            assert!(t.now() >= until, "returned before its deadline");
        }
        assert!(seen.count > 10, "{} messages", seen.count);
        assert_eq!(seen.state, Some(ClientState::Connected));
        // Once the flood stops, the link works as before.
        faults.set_socket_fault(None);
        let sample = Sample {
            metric: "after".to_owned(),
            value: 1,
        };
        let now = t.now();
        let ticket = link
            .client_mut()
            .publish_typed(
                now,
                "flood",
                &sample,
                Ack::Reply { deadline: None },
                &mut seen,
            )
            .unwrap()
            .unwrap();
        run_until(&mut link, &mut t, &mut seen, Duration::from_secs(10), |s| {
            s.acked.contains(&ticket)
        });
        assert!(seen.acked.contains(&ticket));
    });
}

#[test]
fn a_hung_server_is_declared_dead_and_the_link_comes_back() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("RTM server");
    let endpoint = server.endpoint();
    let faults = server.faults();
    within(Duration::from_secs(30), "blocking dead peer", move || {
        let mut t = StdTransport::new();
        let config = LinkConfig {
            ping_interval: Duration::from_millis(200),
            dead_peer_timeout: Duration::from_millis(600),
            ..LinkConfig::DEFAULT
        };
        let client = Config {
            reconnect_interval: Duration::from_millis(100),
            ..Config::default()
        };
        let mut link = link(&endpoint, client, config);
        let mut seen = Seen::default();
        subscribed(&mut link, &mut t, &mut seen, "hung");
        assert_eq!(faults.set_socket_fault(Some(SocketFault::Silent)), 1);
        run_until(&mut link, &mut t, &mut seen, Duration::from_secs(5), |s| {
            s.dead_peer
        });
        assert!(seen.dead_peer, "the silence was noticed");
        faults.set_socket_fault(None);
        seen.subscribed = false;
        run_until(&mut link, &mut t, &mut seen, Duration::from_secs(10), |s| {
            s.subscribed && s.state == Some(ClientState::Connected)
        });
        assert!(seen.subscribed, "reconnected and resubscribed");
    });
}

//! The std client and the `benchlink rtm` command under a hostile server: the local hub's
//! flood faults (pings, subscription data, a message that never ends) and a server that
//! hangs. What is checked: memory stays bounded (the command's peak resident set, read
//! from `/proc`), deadlines fire while the flood goes on (`--timeout`, request timeouts,
//! the dead-peer limit), and the command exits as documented. How late each deadline
//! fired is printed (`cargo test --test flood -- --nocapture`), not asserted: a
//! deadline that never fires meets a hang guard ([`RUN_GUARD`] for a command,
//! [`LATE_GUARD`] past the deadline for the client), as a machine under load may be
//! slow: the figures are not timed tests.

use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use benchlink_sandbox::rtm::{
    ReplyOverride, RtmServer, RtmServerConfig, SocketFault, DEFAULT_APPKEY,
};
use benchlink_std::rtm::{Client, ClientObserver, ClientOptions, ClientState, Error, Mode};
use benchlink_std::rtm::{SubscribeOptions, SubscriptionObserver};
use benchlink_tests::within;

/// The most memory the command may use under any flood.
const MAX_RSS_KIB: u64 = 64 * 1024;

/// How late past a deadline counts as "never fired" (the figure itself is printed): a
/// guard against a deadline starved by the flood, far beyond a loaded machine's delays.
const LATE_GUARD: Duration = Duration::from_secs(10);

/// Peak resident set of a running process, KiB (`VmHWM`), if it is still there.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// How long a command may run before it is killed and the test fails: a hang guard
/// (every command here ends by its own deadline of a few seconds), not a measure.
const RUN_GUARD: Duration = Duration::from_secs(30);

/// Runs `benchlink rtm ARGS` against `server` until it exits (killed after
/// [`RUN_GUARD`]), sampling its peak memory; returns (exit code, elapsed, peak RSS KiB,
/// stderr).
fn run_cli(server: &RtmServer, args: &[&str]) -> (Option<i32>, Duration, u64, String) {
    let started = Instant::now();
    let mut child: Child = Command::new(env!("CARGO_BIN_EXE_benchlink"))
        .arg("rtm")
        .args(args)
        .env("BENCHLINK_RTM_ENDPOINT", server.endpoint())
        .env("BENCHLINK_RTM_APPKEY", DEFAULT_APPKEY)
        .env_remove("BENCHLINK_RTM_ROLE")
        .env_remove("BENCHLINK_RTM_ROLE_SECRET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("benchlink binary");
    let pid = child.id();
    let mut stderr = child.stderr.take().expect("stderr");
    let err = thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let mut peak = 0;
    let status = loop {
        if let Some(kib) = peak_rss_kib(pid) {
            peak = peak.max(kib);
        }
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > RUN_GUARD {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "benchlink rtm {args:?} never ended (its deadline never fired?): {}",
                err.join().unwrap_or_default()
            );
        }
        thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    (status.code(), elapsed, peak, err.join().unwrap_or_default())
}

fn flood_server(fault: SocketFault) -> RtmServer {
    let server = RtmServer::start(RtmServerConfig::default()).expect("hub");
    server.faults().set_socket_fault(Some(fault));
    server
}

fn data_flood(channel: &str) -> SocketFault {
    SocketFault::DataFlood {
        subscription_id: channel.to_owned(),
        message:
            r#"{"metric":"latency","value":12.5,"padding":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}"#
                .to_owned(),
    }
}

#[test]
fn cli_subscribe_timeout_fires_under_a_data_flood_with_bounded_memory() {
    let server = flood_server(data_flood("flood"));
    let (code, elapsed, peak, stderr) = run_cli(&server, &["subscribe", "flood", "--timeout", "3"]);
    println!(
        "subscribe --timeout 3 under a data flood: ended after {elapsed:?}, peak RSS {peak} KiB"
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(elapsed >= Duration::from_secs(3));
    assert!(peak < MAX_RSS_KIB, "peak RSS {peak} KiB");
}

#[test]
fn cli_subscribe_timeout_fires_under_an_endless_message() {
    let server = flood_server(SocketFault::EndlessMessage);
    let (code, elapsed, peak, stderr) = run_cli(&server, &["subscribe", "flood", "--timeout", "3"]);
    println!("subscribe --timeout 3 under an endless message: ended after {elapsed:?}, peak RSS {peak} KiB\n{stderr}");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(elapsed >= Duration::from_secs(3), "{elapsed:?}");
    assert!(peak < MAX_RSS_KIB, "peak RSS {peak} KiB");
    // The message outgrew the receive buffer: the client said why it reconnected.
    assert!(stderr.contains("protocol violation"), "{stderr}");
}

#[test]
fn cli_publish_completes_under_a_ping_flood() {
    let server = flood_server(SocketFault::PingFlood);
    let (code, elapsed, peak, stderr) =
        run_cli(&server, &["publish", "animals", r#"{"who":"zebra"}"#]);
    println!("publish under a ping flood: ended after {elapsed:?}, peak RSS {peak} KiB");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(peak < MAX_RSS_KIB, "peak RSS {peak} KiB");
}

/// A client observer that forwards why connections ended.
struct Why(mpsc::Sender<String>);

impl ClientObserver for Why {
    fn on_link_closed(&mut self, why: &str) {
        let _ = self.0.send(why.to_owned());
    }
}

struct Count(mpsc::Sender<usize>);

impl SubscriptionObserver for Count {
    fn on_subscription_data(&mut self, data: &benchlink_std::rtm::SubscriptionData) {
        let _ = self.0.send(data.messages().len());
    }
}

fn connected(
    server: &RtmServer,
    tweak: impl FnOnce(&mut ClientOptions),
) -> (Client, mpsc::Receiver<String>) {
    let mut options = ClientOptions::new(server.endpoint(), DEFAULT_APPKEY);
    tweak(&mut options);
    let (tx, rx) = mpsc::channel();
    let client = Client::with_observer(options, Some(Box::new(Why(tx)))).expect("client");
    client.start().expect("start");
    let state = client.wait_for_state(|s| s == ClientState::Connected, Duration::from_secs(10));
    assert_eq!(state, ClientState::Connected);
    (client, rx)
}

#[test]
fn request_deadline_fires_while_data_floods_in() {
    let server = flood_server(data_flood("flood"));
    server
        .faults()
        .override_replies("rtm/read", ReplyOverride::Silence, None);
    let (client, _why) = connected(&server, |_| {});
    let (tx, data) = mpsc::channel();
    client
        .subscribe(
            "flood",
            Mode::Simple,
            Count(tx),
            SubscribeOptions::default(),
        )
        .expect("subscribe");
    // The flood is on before the deadline starts.
    let first = data
        .recv_timeout(Duration::from_secs(10))
        .expect("flood data");
    assert!(first > 0);
    let timeout = Duration::from_millis(500);
    // The read is never answered: a deadline the flood starved would hang the call,
    // which the guard turns into a failure.
    let reader = client.clone();
    let (r, took) = within(
        timeout + LATE_GUARD,
        "the read's deadline under a data flood (never fired?)",
        move || {
            let asked = Instant::now();
            let r = reader.read_sync("kv", timeout);
            (r, asked.elapsed())
        },
    );
    let late = took.saturating_sub(timeout);
    let received: usize = data.try_iter().sum();
    println!("read timeout of {timeout:?} under a data flood fired {late:?} late; {received} messages meanwhile");
    assert!(matches!(r, Err(Error::Timeout)), "{r:?}");
    assert!(took >= timeout, "{took:?}");
    assert!(received > 0, "the flood kept coming while the deadline ran");
    client.dispose().unwrap();
}

#[test]
fn a_hanging_server_is_declared_dead_and_the_client_reconnects() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("hub");
    let limit = Duration::from_millis(600);
    let (client, why) = connected(&server, |o| {
        o.ping_interval = Duration::from_millis(200);
        o.dead_peer_timeout = limit;
        o.reconnect_interval = Duration::from_millis(50);
    });
    let hung = Instant::now();
    server.faults().set_socket_fault(Some(SocketFault::Silent));
    let reason = why
        .recv_timeout(limit + LATE_GUARD)
        .expect("the link was never closed: no dead peer declared");
    let late = hung.elapsed().saturating_sub(limit);
    println!("dead peer declared {late:?} after the limit: {reason}");
    assert!(reason.contains("dead peer"), "{reason}");
    server.faults().set_socket_fault(None);
    let state = client.wait_for_state(|s| s == ClientState::Connected, Duration::from_secs(10));
    assert_eq!(state, ClientState::Connected);
    client.dispose().unwrap();
}

/// The figures the command gives at `-v 3` when its deadline fires: how late (µs) and how
/// many data PDUs were waiting for the output then.
fn deadline_figures(stderr: &str) -> Option<(u64, usize)> {
    let line = stderr.lines().find(|l| l.starts_with("deadline: fired "))?;
    let mut words = line.split_whitespace();
    let late = words.nth(2)?.parse().ok()?;
    let waiting = words.nth(5)?.parse().ok()?;
    Some((late, waiting))
}

/// Runs a following command (`subscribe`, `record`) with a 2 s deadline under a data
/// flood that outruns the client (100 messages a PDU, 256 KiB a write), stdout to
/// `/dev/null`: the command ends by itself, at its deadline, although data was still
/// waiting then. How late the deadline fired is printed (`--nocapture`), not asserted.
fn deadline_under_a_fast_flood(what: &str, args: &[&str]) {
    let server = flood_server(data_flood("flood"));
    let mut all = vec!["-v", "3"];
    all.extend_from_slice(args);
    let (code, elapsed, peak, stderr) = run_cli(&server, &all);
    let figures = deadline_figures(&stderr);
    let closed = stderr
        .lines()
        .find_map(|l| l.strip_prefix("closed and disposed in "))
        .unwrap_or("? us");
    println!(
        "{what} under a data flood faster than the client: deadline fired {} us late with {} \
         data PDUs waiting; closed and disposed in {closed}; ended after {elapsed:?}, peak RSS \
         {peak} KiB",
        figures.map_or("?".into(), |f| f.0.to_string()),
        figures.map_or("?".into(), |f| f.1.to_string()),
    );
    assert_eq!(code, Some(0), "{stderr}");
    let (_, waiting) = figures.unwrap_or_else(|| panic!("no deadline line: {stderr}"));
    assert!(
        waiting > 0,
        "the flood did not outrun the client: nothing was waiting\n{stderr}"
    );
    assert!(peak < MAX_RSS_KIB, "peak RSS {peak} KiB");
}

#[test]
fn cli_subscribe_timeout_fires_under_a_flood_faster_than_the_client() {
    deadline_under_a_fast_flood(
        "subscribe --timeout 2",
        &["subscribe", "flood", "--timeout", "2"],
    );
}

#[test]
fn cli_subscribe_jsonl_timeout_fires_under_a_flood_faster_than_the_client() {
    deadline_under_a_fast_flood(
        "subscribe --jsonl --timeout 2",
        &["--jsonl", "subscribe", "flood", "--timeout", "2"],
    );
}

#[test]
fn cli_record_time_limit_fires_under_a_flood_faster_than_the_client() {
    deadline_under_a_fast_flood(
        "record --time_limit_in_seconds 2",
        &["record", "flood", "--time_limit_in_seconds", "2"],
    );
}

/// Issue 21: `subscribe` with a few hundred channels and a timeout hung (the client's
/// thread blocked in the command's observer while the command waited in `subscribe`).
/// 2,000 channels in one command, one of them flooded (so the command's backlog is full
/// while it subscribes), 50 runs: each ends by itself at its `--timeout`.
#[test]
fn cli_subscribe_to_2000_channels_ends_at_its_timeout_every_time() {
    let server = flood_server(data_flood("ch0"));
    let channels: Vec<String> = (0..2000).map(|i| format!("ch{i}")).collect();
    let mut args = vec!["-v", "3", "subscribe"];
    args.extend(channels.iter().map(String::as_str));
    args.extend(["--timeout", "1"]);
    let (mut worst_late, mut worst_elapsed, mut worst_peak) = (0, Duration::ZERO, 0);
    for run in 0..50 {
        let (code, elapsed, peak, stderr) = run_cli(&server, &args);
        assert_eq!(code, Some(0), "run {run}: {stderr}");
        assert!(
            stderr.contains("Subscribing to 2000 channels"),
            "run {run}: {stderr}"
        );
        let (late, _) = deadline_figures(&stderr)
            .unwrap_or_else(|| panic!("run {run}: no deadline line: {stderr}"));
        worst_late = worst_late.max(late);
        worst_elapsed = worst_elapsed.max(elapsed);
        worst_peak = worst_peak.max(peak);
    }
    println!(
        "50 runs of subscribe to 2000 channels --timeout 1 (one flooded): the deadline fired \
         at most {worst_late} us late; the longest run took {worst_elapsed:?}; peak RSS at \
         most {worst_peak} KiB"
    );
    assert!(worst_peak < MAX_RSS_KIB, "peak RSS {worst_peak} KiB");
}

/// `--reply-timeout` fires while pings flood in and the server never answers: `read`
/// (one reply awaited) and `publish` (acknowledgements awaited). How long the command
/// took past its timeout is printed (it includes connecting and closing).
#[test]
fn cli_reply_timeout_fires_under_a_ping_flood() {
    let server = flood_server(SocketFault::PingFlood);
    server
        .faults()
        .override_replies("rtm/read", ReplyOverride::Silence, None);
    server
        .faults()
        .override_replies("rtm/publish", ReplyOverride::Silence, None);
    for (what, args) in [
        ("read", vec!["read", "kv", "--reply-timeout", "1"]),
        (
            "publish",
            vec!["publish", "ch", "1", "--reply-timeout", "1"],
        ),
    ] {
        let (code, elapsed, peak, stderr) = run_cli(&server, &args);
        println!(
            "{what} --reply-timeout 1 under a ping flood, no reply: ended after {elapsed:?}, \
             peak RSS {peak} KiB"
        );
        assert_eq!(code, Some(1), "{what}: {stderr}");
        assert!(
            stderr.contains("timed out") || stderr.contains("unacked"),
            "{what}: {stderr}"
        );
        assert!(peak < MAX_RSS_KIB, "peak RSS {peak} KiB");
    }
}

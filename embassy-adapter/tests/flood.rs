//! The messaging runner under a hostile server: a tiny raw WebSocket server (std threads)
//! completes the upgrade and then floods pings, floods subscription data, or sends one
//! endless fragmented message. The runner's memory is static by construction; these
//! tests check the behaviour that keeps it so: the runner stops reading while the
//! application holds its events (TCP throttles the server), request deadlines fire on
//! time meanwhile, and an oversized message or a silent server ends the connection, which
//! the client then re-opens.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use benchlink_core::rtm::{
    self, ClientState, Disconnect, Event, Events, Mode, Outcome, SubState, SubscribeArgs,
};
use benchlink_embassy::rtm::{Messaging, MessagingConfig, RunnerBuffers};
use benchlink_embassy::transport::TcpTransport;
use common::{bridge, buf, network, run_test, spawn, wait_until, Net, TestRng};
use embassy_executor::Spawner;
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_time::{with_timeout, Duration, Instant};

type Rtm = Messaging<CriticalSectionRawMutex, 4, 8>;

const WAIT: Duration = Duration::from_secs(10);
const PORT: u16 = 8090;
/// How long one of the server's writes waits for room before it counts as a stall.
const STALL: StdDuration = StdDuration::from_millis(50);

/// What the server does after the upgrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flood {
    /// Empty pings, back to back, forever.
    Pings,
    /// Answers a subscribe, then sends `rtm/subscription/data` for it, forever.
    Data,
    /// On the first connection: a text frame without FIN, then continuation frames,
    /// forever. Later connections only answer subscribes.
    Fragments,
    /// On the first connection: nothing at all (pings unanswered). Later connections
    /// only answer subscribes.
    Silent,
}

struct FloodServer {
    addr: SocketAddr,
    /// Upgrades completed.
    connections: Arc<AtomicU32>,
    /// Flood bytes the server managed to write.
    sent: Arc<AtomicU64>,
    /// Flood writes in a row that found no room for [`STALL`] (back to 0 whenever a
    /// byte goes out): the server's own clock ticking while TCP holds it back.
    stalled: Arc<AtomicU64>,
}

fn flood_server(mode: Flood) -> FloodServer {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let connections = Arc::new(AtomicU32::new(0));
    let sent = Arc::new(AtomicU64::new(0));
    let stalled = Arc::new(AtomicU64::new(0));
    let (c, s, st) = (connections.clone(), sent.clone(), stalled.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (c, s, st) = (c.clone(), s.clone(), st.clone());
            std::thread::spawn(move || serve(stream, mode, &c, &s, &st));
        }
    });
    FloodServer {
        addr,
        connections,
        sent,
        stalled,
    }
}

/// Writes all of `bytes`, waiting out full socket buffers ([`STALL`] at a time, the
/// socket's write timeout): `progress` hears of every piece written, `stall` of every
/// wait that found no room.
fn write_fully(
    writer: &Mutex<TcpStream>,
    bytes: &[u8],
    mut progress: impl FnMut(usize),
    mut stall: impl FnMut(),
) -> bool {
    let mut w = writer.lock().unwrap();
    let mut at = 0;
    while at < bytes.len() {
        match w.write(&bytes[at..]) {
            Ok(0) => return false,
            Ok(n) => {
                at += n;
                progress(n);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => stall(),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

fn serve(
    mut stream: TcpStream,
    mode: Flood,
    connections: &AtomicU32,
    sent: &AtomicU64,
    stalled: &AtomicU64,
) {
    let _ = stream.set_nodelay(true);
    let Some(key) = read_upgrade(&mut stream) else {
        return;
    };
    let first = connections.fetch_add(1, Ordering::SeqCst) == 0;
    let accept = benchlink_core::ws::Key::new(key).accept();
    let answer = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        accept.as_str()
    );
    if stream.write_all(answer.as_bytes()).is_err() {
        return;
    }
    let _ = stream.set_write_timeout(Some(STALL));
    let writer = Arc::new(Mutex::new(stream.try_clone().expect("clone")));
    let subscribed = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    {
        let (writer, subscribed, done) = (writer.clone(), subscribed.clone(), done.clone());
        let answer_pings = !(first && mode == Flood::Silent);
        std::thread::spawn(move || {
            read_client(stream, &writer, &subscribed, answer_pings);
            done.store(true, Ordering::SeqCst);
        });
    }
    let flood = match mode {
        Flood::Pings => true,
        Flood::Data => true,
        Flood::Fragments | Flood::Silent => first,
    };
    if !flood || mode == Flood::Silent {
        while !done.load(Ordering::SeqCst) {
            std::thread::sleep(StdDuration::from_millis(10));
        }
        return;
    }
    let mut n = 0u64;
    loop {
        let frame = match mode {
            Flood::Pings => frame(0x9, true, b""),
            Flood::Data => {
                if !subscribed.load(Ordering::SeqCst) {
                    if done.load(Ordering::SeqCst) {
                        return;
                    }
                    std::thread::sleep(StdDuration::from_millis(5));
                    continue;
                }
                n += 1;
                // About 200 bytes a frame: at most six messages in a 1 KiB read.
                let pdu = format!(
                    r#"{{"action":"rtm/subscription/data","body":{{"subscription_id":"flood","position":"1:{n}","messages":[{n}]}},"padding":"{}"}}"#,
                    "x".repeat(100)
                );
                frame(0x1, true, pdu.as_bytes())
            }
            Flood::Fragments => {
                n += 1;
                if n == 1 {
                    frame(0x1, false, b"[")
                } else {
                    frame(0x0, false, &[b' '; 1000])
                }
            }
            Flood::Silent => return,
        };
        let written = write_fully(
            &writer,
            &frame,
            |n| {
                sent.fetch_add(n as u64, Ordering::SeqCst);
                stalled.store(0, Ordering::SeqCst);
            },
            || {
                stalled.fetch_add(1, Ordering::SeqCst);
            },
        );
        if !written {
            return;
        }
    }
}

/// Reads the upgrade request; returns the client's nonce.
fn read_upgrade(stream: &mut TcpStream) -> Option<[u8; 16]> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).ok()?;
    let key = head
        .lines()
        .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))?;
    let bytes = base64_decode(key.trim())?;
    bytes.try_into().ok()
}

/// Decodes the client's frames: answers pings (unless told not to) and subscribes.
fn read_client(
    mut stream: TcpStream,
    writer: &Mutex<TcpStream>,
    subscribed: &AtomicBool,
    answer_pings: bool,
) {
    let mut input = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => input.extend_from_slice(&chunk[..n]),
        }
        while let Some((opcode, payload, used)) = client_frame(&input) {
            input.drain(..used);
            let reply = match opcode {
                0x8 => return,
                0x9 if answer_pings => Some(frame(0xA, true, &payload)),
                0x1 => {
                    let text = String::from_utf8_lossy(&payload);
                    subscribe_ok(&text).map(|pdu| frame(0x1, true, pdu.as_bytes()))
                }
                _ => None,
            };
            if let Some(reply) = reply {
                if !write_fully(writer, &reply, |_| {}, || {}) {
                    return;
                }
                if opcode == 0x1 {
                    subscribed.store(true, Ordering::SeqCst);
                }
            }
        }
    }
}

/// The answer to an `rtm/subscribe` PDU.
fn subscribe_ok(text: &str) -> Option<String> {
    if !text.contains(r#""action":"rtm/subscribe""#) {
        return None;
    }
    let at = text.find(r#""id":"#)? + 5;
    let id: String = text[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    Some(format!(
        r#"{{"action":"rtm/subscribe/ok","id":{id},"body":{{"position":"1:0","subscription_id":"flood"}}}}"#
    ))
}

/// A server frame (unmasked).
fn frame(opcode: u8, fin: bool, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![if fin { 0x80 } else { 0 } | opcode];
    match payload.len() {
        n if n < 126 => out.push(n as u8),
        n => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
    out
}

/// One whole client frame (masked) at the front of `input`: (opcode, payload, length).
fn client_frame(input: &[u8]) -> Option<(u8, Vec<u8>, usize)> {
    let opcode = *input.first()? & 0x0F;
    let (len, at) = match *input.get(1)? & 0x7F {
        126 => (
            u16::from_be_bytes([*input.get(2)?, *input.get(3)?]) as usize,
            4,
        ),
        127 => (
            u64::from_be_bytes(input.get(2..10)?.try_into().ok()?) as usize,
            10,
        ),
        n => (n as usize, 2),
    };
    let mask = input.get(at..at + 4)?;
    let payload = input
        .get(at + 4..at + 4 + len)?
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ mask[i % 4])
        .collect();
    Some((opcode, payload, at + 4 + len))
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes().take_while(|&c| c != b'=') {
        let v = ALPHABET.iter().position(|&a| a == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// The client on the device stack (quick reconnects, pings after 200 ms of silence, a
/// dead peer after `dead_peer`), started.
fn client(spawner: Spawner, net: &Net, dead_peer: Duration) -> &'static Rtm {
    let config = rtm::Config {
        reconnect_interval: core::time::Duration::from_millis(100),
        jitter_seed: 0,
        connect_timeout: core::time::Duration::from_secs(2),
        ..rtm::Config::default()
    };
    let link = MessagingConfig {
        ping_interval: Duration::from_millis(200),
        dead_peer_timeout: dead_peer,
        ..MessagingConfig::new("ws://10.0.0.1:8090", "KEY")
    };
    let buffers = RunnerBuffers {
        rx: buf(4096),
        tx: buf(2048 + 1024),
        queue: buf(2048),
        outbox: buf(2048),
        subscription_args: buf(1024),
    };
    let events = buf(Events::<&mut [u8]>::capacity_for(4, 8, 0));
    let rtm = Rtm::new(config, link, buffers, events, &mut TestRng(7)).unwrap();
    let rtm: &'static Rtm = Box::leak(Box::new(rtm));
    let transport = TcpTransport::new(net.device, buf(4096), buf(4096));
    spawn(spawner, async move {
        rtm.run(transport, buf(2048)).await;
    });
    rtm.start();
    rtm
}

/// What `pick` makes of the first event it accepts, within [`WAIT`].
async fn expect_event<T>(rtm: &Rtm, what: &str, mut pick: impl FnMut(Event<'_>) -> Option<T>) -> T {
    let found = with_timeout(WAIT, async {
        loop {
            if let Some(found) = rtm.next_event(&mut pick).await {
                return found;
            }
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("no {what} within {WAIT:?}"))
}

fn subscribed_to_flood(event: Event<'_>) -> Option<()> {
    let subscribed = matches!(
        event,
        Event::SubscriptionState {
            key: "flood",
            enter: SubState::Subscribed,
            ..
        }
    );
    subscribed.then_some(())
}

fn connected(event: Event<'_>) -> Option<()> {
    matches!(
        event,
        Event::ClientState {
            enter: ClientState::Connected,
            ..
        }
    )
    .then_some(())
}

/// Why the connection ended, as the core's text and whether `is` says it is the
/// expected kind.
fn link_closed(event: Event<'_>, is: impl Fn(&Disconnect<'_>) -> bool) -> Option<(bool, String)> {
    match event {
        Event::LinkClosed(why) => Some((is(&why), why.to_string())),
        _ => None,
    }
}

/// A publish the server never answers times out when its deadline says, flood or not.
async fn deadline_fires_on_time(rtm: &Rtm) {
    let timeout = Duration::from_millis(300);
    let start = Instant::now();
    // The server never answers: a deadline the flood starved would leave the publish
    // waiting, which the guard turns into a failure.
    let timed_out = |o: Outcome<'_>| matches!(o, Outcome::Timeout);
    let reply = with_timeout(WAIT, rtm.publish_acked("ch", "1", Some(timeout), timed_out))
        .await
        .unwrap_or_else(|_| panic!("the publish's deadline of {timeout:?} never fired"))
        .expect("queued");
    let took = start.elapsed();
    assert!(reply, "the outcome is a timeout");
    // Not early.
    assert!(
        took >= timeout,
        "deadline of {timeout:?} fired after {took:?}"
    );
}

#[test]
fn ping_flood_keeps_deadlines_and_the_connection() {
    let server = flood_server(Flood::Pings);
    run_test(StdDuration::from_secs(30), move |spawner| async move {
        let net = network(spawner);
        bridge(spawner, net.gateway, PORT, server.addr, 2);
        let rtm = client(spawner, &net, Duration::from_millis(800));
        with_timeout(WAIT, rtm.wait_for_state(ClientState::Connected))
            .await
            .expect("connected");
        wait_until("the ping flood", || server.sent.load(Ordering::SeqCst) > 0).await;
        for _ in 0..3 {
            deadline_fires_on_time(rtm).await;
        }
        // Pings prove the server alive: no dead-peer verdict, one connection.
        assert_eq!(rtm.state(), ClientState::Connected);
        assert_eq!(server.connections.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn data_flood_is_throttled_by_tcp_while_the_application_holds_its_events() {
    let server = flood_server(Flood::Data);
    run_test(StdDuration::from_secs(30), move |spawner| async move {
        let net = network(spawner);
        bridge(spawner, net.gateway, PORT, server.addr, 2);
        // While the application holds its events the runner reads nothing; the bytes
        // waiting in the socket still prove the server alive (`handle_input_held`), so
        // a dead-peer limit far shorter than the pause below does not fire.
        let rtm = client(spawner, &net, Duration::from_millis(800));
        rtm.subscribe("flood", Mode::Simple, SubscribeArgs::default())
            .unwrap();
        expect_event(rtm, "subscribed", subscribed_to_flood).await;

        // The application takes no events: the runner stops reading, the flood backs up
        // to the server, whose writes find no room once the kernel's buffers are full.
        // Twenty of its writes in a row find none (over a second by its clock, longer
        // than the dead-peer limit): a runner that kept reading would let one through,
        // and the count would start over (the wait then fails).
        wait_until("20 stalled writes in a row", || {
            server.stalled.load(Ordering::SeqCst) >= 20
        })
        .await;
        // Deadlines keep firing meanwhile, and the connection stays up.
        deadline_fires_on_time(rtm).await;
        deadline_fires_on_time(rtm).await;
        assert_eq!(rtm.state(), ClientState::Connected);

        // Taking events lets the flood through again, in order and without losses.
        let mut last = 0u64;
        for _ in 0..2000 {
            rtm.next_event(|event| {
                let Event::SubscriptionData { key, data } = event else {
                    return;
                };
                assert_eq!(key, "flood");
                for message in data.messages.elements() {
                    let n: u64 = message.raw().as_json().unwrap().parse().unwrap();
                    assert!(n > last, "{n} after {last}");
                    if last > 0 {
                        assert_eq!(n, last + 1, "a message was lost");
                    }
                    last = n;
                }
            })
            .await;
        }
        assert!(last >= 1000, "{last}");
        assert_eq!(rtm.lost(), 0);
        assert_eq!(server.connections.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn endless_fragmented_message_ends_the_connection_with_1009_and_the_client_comes_back() {
    let server = flood_server(Flood::Fragments);
    run_test(StdDuration::from_secs(30), move |spawner| async move {
        let net = network(spawner);
        bridge(spawner, net.gateway, PORT, server.addr, 2);
        let rtm = client(spawner, &net, Duration::from_millis(800));
        let (too_large, why) = expect_event(rtm, "disconnected", |e| {
            link_closed(e, |why| {
                matches!(
                    why,
                    Disconnect::Protocol(benchlink_core::ws::Error::MessageTooLarge {
                        max: 4096,
                        ..
                    })
                )
            })
        })
        .await;
        assert!(too_large, "{why}");
        // The text is the core's.
        assert!(why.contains("exceeds the 4096-byte buffer"), "{why}");
        expect_event(rtm, "connected again", connected).await;
        assert_eq!(server.connections.load(Ordering::SeqCst), 2);
        // The second connection serves: a subscribe is answered.
        rtm.subscribe("flood", Mode::Simple, SubscribeArgs::default())
            .unwrap();
        expect_event(rtm, "subscribed", subscribed_to_flood).await;
    });
}

#[test]
fn silent_server_is_a_dead_peer_and_the_client_comes_back() {
    let server = flood_server(Flood::Silent);
    run_test(StdDuration::from_secs(30), move |spawner| async move {
        let net = network(spawner);
        bridge(spawner, net.gateway, PORT, server.addr, 2);
        let rtm = client(spawner, &net, Duration::from_millis(800));
        with_timeout(WAIT, rtm.wait_for_state(ClientState::Connected))
            .await
            .expect("connected");
        let start = Instant::now();
        let (dead, why) = expect_event(rtm, "disconnected", |e| {
            link_closed(
                e,
                |why| matches!(why, Disconnect::DeadPeer { silent } if silent.as_millis() >= 800),
            )
        })
        .await;
        let took = start.elapsed();
        assert!(dead, "{why}");
        assert!(why.contains("dead peer"), "{why}");
        // The upgrade's bytes were the last the server sent: declared 800 ms after them
        // (`silent` above); a detection that never came fails `expect_event` after
        // [`WAIT`]. How long it took is not asserted: a loaded machine may be late.
        println!("dead peer declared after {took:?}");
        expect_event(rtm, "connected again", connected).await;
        assert_eq!(server.connections.load(Ordering::SeqCst), 2);
    });
}

//! The link driven byte by byte against a scripted server: upgrade, frames for one write,
//! pings, dead peers, close handshakes, hostile input.

use core::time::Duration;
use std::string::{String, ToString};
use std::vec::Vec;
use std::{format, vec};

use base64::Engine;

use super::*;
use crate::rtm::{
    pdu, Ack, ClientState, Config, ConnectError, Handler, Mode, Outcome, Pending, SubscribeArgs,
    SubscriptionSlot, Ticket,
};

type TestLink = Link<Vec<u8>, [SubscriptionSlot; 4], Vec<Pending>>;

#[derive(Default, Debug)]
struct Log {
    states: Vec<ClientState>,
    replies: Vec<(Ticket, String)>,
    data: Vec<String>,
    closed: Vec<String>,
}

impl Handler for Log {
    fn client_state(&mut self, _leave: ClientState, enter: ClientState) {
        self.states.push(enter);
    }
    fn reply(&mut self, ticket: Ticket, outcome: Outcome<'_>) {
        let text = match outcome {
            Outcome::Ok(p) => format!(
                "ok {}",
                p.body
                    .map_or("".into(), |b| String::from_utf8_lossy(b.raw().as_bytes()))
            ),
            Outcome::Error(_) => "error".to_string(),
            Outcome::Data(_) => "data".to_string(),
            Outcome::Timeout => "timeout".to_string(),
            Outcome::Disconnected => "disconnected".to_string(),
        };
        self.replies.push((ticket, text));
    }
    fn subscription_data(&mut self, _key: &str, data: pdu::SubscriptionData<'_>) {
        for m in data.messages.elements() {
            self.data
                .push(String::from_utf8_lossy(m.raw().as_bytes()).into_owned());
        }
    }
    fn link_closed(&mut self, why: Disconnect<'_>) {
        self.closed.push(why.to_string());
    }
}

fn config() -> LinkConfig {
    LinkConfig {
        ping_interval: Duration::from_secs(3),
        dead_peer_timeout: Duration::from_secs(10),
        seed: 42,
        ..LinkConfig::DEFAULT
    }
}

fn client_config() -> Config {
    Config {
        jitter_seed: 0,
        retry_first_connect: true,
        ..Config::DEFAULT
    }
}

fn new_link(rx: usize) -> TestLink {
    Link::new(
        client_config(),
        config(),
        "ws://example.test:8080/rtm",
        "K",
        Buffers {
            rx: vec![0; rx],
            tx: vec![0; 1024],
            queue: vec![0; 16384],
            outbox: vec![0; 16 * 1024],
            subscription_args: vec![0; 1024],
        },
        [SubscriptionSlot::EMPTY; 4],
        vec![Pending::EMPTY; 128],
    )
    .unwrap()
}

fn secs(s: u64) -> Instant {
    Instant::from_secs(s)
}

/// A server frame (unmasked).
fn frame(opcode: u8, fin: bool, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![if fin { 0x80 } else { 0 } | opcode];
    match payload.len() {
        n if n < 126 => out.push(n as u8),
        n if n < 65536 => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
    out
}

fn text(payload: &str) -> Vec<u8> {
    frame(0x1, true, payload.as_bytes())
}

/// Client frames (masked) decoded: (opcode, payload).
fn client_frames(mut bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut frames = Vec::new();
    while !bytes.is_empty() {
        let opcode = bytes[0] & 0x0F;
        assert_eq!(bytes[1] & 0x80, 0x80, "client frames are masked");
        let (len, at) = match bytes[1] & 0x7F {
            126 => (u16::from_be_bytes([bytes[2], bytes[3]]) as usize, 4),
            127 => (
                u64::from_be_bytes(bytes[2..10].try_into().unwrap()) as usize,
                10,
            ),
            n => (n as usize, 2),
        };
        let mask = &bytes[at..at + 4];
        let payload = bytes[at + 4..at + 4 + len]
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ mask[i % 4])
            .collect();
        frames.push((opcode, payload));
        bytes = &bytes[at + 4 + len..];
    }
    frames
}

/// Everything the link wants written now, reported as written; `closed` is set when the
/// link then asked for the transport to be closed.
fn drain_and_close(link: &mut TestLink, now: Instant) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    loop {
        match link.poll_output(now) {
            Some(Output::Transmit(bytes)) => {
                out.extend_from_slice(bytes);
                let n = bytes.len();
                link.transmitted(now, n);
            }
            Some(Output::Close) => return (out, true),
            Some(other) => panic!("unexpected {other:?}"),
            None => return (out, false),
        }
    }
}

/// Everything the link wants written now (the link must not ask to close).
fn drain(link: &mut TestLink, now: Instant) -> Vec<u8> {
    let (out, closed) = drain_and_close(link, now);
    assert!(!closed);
    out
}

/// Publishes `1` on `c` at 0 s and has the link offer something to write.
fn publish_offered(link: &mut TestLink, log: &mut Log) {
    link.client_mut()
        .publish(secs(0), "c", "1", Ack::None, log)
        .unwrap();
    assert!(matches!(
        link.poll_output(secs(0)),
        Some(Output::Transmit(_))
    ));
}

/// The server's answer to an upgrade request.
fn answer(request: &[u8]) -> Vec<u8> {
    let request = std::str::from_utf8(request).unwrap();
    let key = request
        .lines()
        .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
        .unwrap();
    let mut nonce = [0u8; 16];
    let n = base64::engine::general_purpose::STANDARD
        .decode_slice(key, &mut nonce)
        .unwrap();
    assert_eq!(n, 16);
    let accept = crate::ws::Key::new(nonce).accept();
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        accept.as_str()
    )
    .into_bytes()
}

/// Start, connect, upgrade: the link is open at `t`.
fn open(link: &mut TestLink, log: &mut Log, t: Instant) {
    link.client_mut().start(t, log);
    assert_eq!(
        link.poll_output(t),
        Some(Output::Connect {
            host: "example.test",
            port: 8080,
            tls: false
        })
    );
    link.handle_connected(t, log);
    let request = drain(link, t);
    assert!(request.starts_with(b"GET /rtm/v2?appkey=K HTTP/1.1\r\nHost: example.test:8080\r\n"));
    link.handle_input(t, &answer(&request), log);
    assert_eq!(link.client().state(), ClientState::Connected);
    assert!(link.is_open());
}

#[test]
fn upgrade_then_frames_in_the_same_read_and_publishes_offered_for_one_write() {
    let mut link = new_link(4096);
    let mut log = Log::default();
    let t = secs(1);
    link.client_mut().start(t, &mut log);
    assert!(matches!(link.poll_output(t), Some(Output::Connect { .. })));
    // Publishes made before the connection exist wait in the client's queue.
    let mut tickets = Vec::new();
    for i in 0..100 {
        let ack = Ack::Reply { deadline: None };
        let msg = format!("{i}");
        tickets.push(
            link.client_mut()
                .publish(t, "c", &msg, ack, &mut log)
                .unwrap()
                .unwrap(),
        );
    }
    link.handle_connected(t, &mut log);
    let request = drain(&mut link, t);
    // The 101 and a first reply arrive in one read, split at every byte.
    let mut wire = answer(&request);
    wire.extend(text(
        r#"{"action":"rtm/publish/ok","id":0,"body":{"position":"1:0"}}"#,
    ));
    for byte in wire.chunks(1) {
        link.handle_input(t, byte, &mut log);
    }
    assert_eq!(link.client().state(), ClientState::Connected);
    // Every queued publish is framed where it was encoded, a piece each of one vectored
    // write, the first of them what `Transmit` offers.
    let first = match link.poll_output(t) {
        Some(Output::Transmit(bytes)) => bytes.to_vec(),
        other => panic!("{other:?}"),
    };
    let pieces: Vec<Vec<u8>> = link.unsent().map(<[u8]>::to_vec).collect();
    assert_eq!(pieces.len(), 100);
    assert_eq!(pieces[0], first);
    let wire = pieces.concat();
    let frames = client_frames(&wire);
    assert_eq!(frames.len(), 100);
    assert_eq!(
        std::str::from_utf8(&frames[99].1).unwrap(),
        r#"{"action":"rtm/publish","id":99,"body":{"channel":"c","message":99}}"#
    );
    // A write that ends inside the 51st frame: the rest of it comes next.
    let cut = pieces[..50].concat().len() + 3;
    link.transmitted(t, cut);
    let rest: Vec<u8> = link.unsent().flatten().copied().collect();
    assert_eq!(rest, wire[cut..]);
    link.transmitted(t, rest.len());
    assert_eq!(link.poll_output(t), None);
    // The reply that came with the 101 answered id 0 before the publish was even sent:
    // the server's reply resolves the request with that id all the same.
    assert_eq!(
        log.replies,
        [(tickets[0], r#"ok {"position":"1:0"}"#.to_string())]
    );
}

/// The one copy: a message is encoded into its outbox record, framed and masked there,
/// and the transport writes it from there; the transmit buffer never sees it.
#[test]
fn a_pdu_is_written_from_the_outbox_record_it_was_encoded_in() {
    let outbox = vec![0u8; 4096];
    let tx = vec![0u8; 1024];
    // A `Vec`'s bytes stay where they are when the `Vec` moves into the link.
    let outbox_range = outbox.as_ptr_range();
    let tx_range = tx.as_ptr_range();
    let mut link: TestLink = Link::new(
        client_config(),
        config(),
        "ws://example.test:8080/rtm",
        "K",
        Buffers {
            rx: vec![0; 4096],
            tx,
            queue: vec![0; 4096],
            outbox,
            subscription_args: vec![0; 1024],
        },
        [SubscriptionSlot::EMPTY; 4],
        vec![Pending::EMPTY; 128],
    )
    .unwrap();
    let mut log = Log::default();
    open(&mut link, &mut log, secs(0));
    let message = r#"{"temperature":21.5,"unit":"C"}"#;
    link.client_mut()
        .publish(secs(0), "c", message, Ack::None, &mut log)
        .unwrap();
    let Some(Output::Transmit(frame)) = link.poll_output(secs(0)) else {
        panic!("a frame to write");
    };
    let at = frame.as_ptr();
    assert!(outbox_range.contains(&at), "written from the outbox");
    assert!(!tx_range.contains(&at));
    let frame = frame.to_vec();
    assert_eq!(
        client_frames(&frame),
        [(
            0x1,
            format!(r#"{{"action":"rtm/publish","body":{{"channel":"c","message":{message}}}}}"#)
                .into_bytes()
        )]
    );
    link.transmitted(secs(0), frame.len());
    assert_eq!(link.poll_output(secs(0)), None);
}

#[test]
fn subscription_data_and_server_pings() {
    let mut link = new_link(4096);
    let mut log = Log::default();
    let t = secs(1);
    open(&mut link, &mut log, t);
    let args = SubscribeArgs::default();
    link.client_mut()
        .subscribe(t, "ch", Mode::Simple, args, &mut log)
        .unwrap();
    let sent = client_frames(&drain(&mut link, t));
    assert_eq!(sent.len(), 1);
    let mut wire = text(
        r#"{"action":"rtm/subscribe/ok","id":0,"body":{"position":"1:0","subscription_id":"ch"}}"#,
    );
    wire.extend(frame(0x9, true, b"hi"));
    wire.extend(text(r#"{"action":"rtm/subscription/data","body":{"subscription_id":"ch","position":"1:1","messages":[{"a":1},"x"]}}"#));
    link.handle_input(t, &wire, &mut log);
    assert_eq!(log.data, [r#"{"a":1}"#, r#""x""#]);
    // The ping is answered with a pong carrying its payload.
    assert_eq!(client_frames(&drain(&mut link, t)), [(0xA, b"hi".to_vec())]);
}

#[test]
fn ping_after_silence_then_dead_peer() {
    let mut link = new_link(4096);
    let mut log = Log::default();
    open(&mut link, &mut log, secs(0));
    assert_eq!(link.poll_timeout(), Some(secs(3)));
    link.handle_timeout(secs(3), &mut log);
    assert_eq!(client_frames(&drain(&mut link, secs(3))), [(0x9, vec![])]);
    assert_eq!(link.poll_timeout(), Some(secs(10)));
    // A pong (any bytes) counts as life.
    link.handle_input(secs(5), &frame(0xA, true, b""), &mut log);
    assert_eq!(link.poll_timeout(), Some(secs(8)));
    link.handle_timeout(secs(8), &mut log);
    assert_eq!(client_frames(&drain(&mut link, secs(8))), [(0x9, vec![])]);
    link.handle_timeout(secs(15), &mut log);
    assert_eq!(
        log.closed,
        ["no data from the server for 10000 ms (dead peer)"]
    );
    assert_eq!(
        log.states[log.states.len() - 2..],
        [ClientState::Awaiting, ClientState::Connecting]
    );
    // No close frame to a dead server: the transport is closed at once.
    assert_eq!(link.poll_output(secs(15)), Some(Output::Close));
    link.handle_closed(secs(15), &mut log);
    // The backoff counts from the start of the last attempt (2 s after 0 s): the
    // reconnect is already due, so the same `handle_timeout` began it and the link hands
    // out the connect as soon as the old transport is closed.
    assert_eq!(link.client().state(), ClientState::Connecting);
    assert!(matches!(
        link.poll_output(secs(15)),
        Some(Output::Connect { .. })
    ));
}

/// Found by the `rtm_link` fuzz target: `handle_timeout(now)` used to run the client's
/// timers before the link's own, so a connection given up for a dead peer left the
/// client Awaiting a reconnect that was already due, and `poll_timeout()` answered a
/// deadline in the past until another `handle_timeout`.
#[test]
fn handle_timeout_leaves_nothing_due() {
    let mut link = new_link(4096);
    let mut log = Log::default();
    open(&mut link, &mut log, secs(0));
    link.handle_timeout(secs(3), &mut log);
    drain(&mut link, secs(3));
    link.handle_timeout(secs(10), &mut log);
    assert_eq!(log.closed.len(), 1);
    assert_eq!(link.client().state(), ClientState::Connecting);
    assert_eq!(link.poll_output(secs(10)), Some(Output::Close));
    assert!(link.poll_timeout().is_none_or(|at| at > secs(10)));
}

#[test]
fn write_stall_is_detected() {
    let mut link = new_link(4096);
    let mut log = Log::default();
    open(&mut link, &mut log, secs(0));
    publish_offered(&mut link, &mut log);
    // The server keeps sending but never reads: the bytes do not move.
    for s in 1..10 {
        link.handle_input(secs(s), &frame(0xA, true, b""), &mut log);
        link.handle_timeout(secs(s), &mut log);
    }
    assert!(log.closed.is_empty());
    link.handle_timeout(secs(10), &mut log);
    assert_eq!(log.closed, ["the server stopped reading (write stalled)"]);
    assert_eq!(link.poll_output(secs(10)), Some(Output::Close));
}

#[test]
fn server_close_frame_is_echoed_and_reported() {
    let mut link = new_link(4096);
    let mut log = Log::default();
    open(&mut link, &mut log, secs(0));
    let mut close = 1001u16.to_be_bytes().to_vec();
    close.extend_from_slice(b"maintenance\x1b[2J");
    link.handle_input(secs(1), &frame(0x8, true, &close), &mut log);
    assert_eq!(
        log.closed,
        [r"the server closed the connection with code 1001: maintenance\u{1b}[2J"]
    );
    assert_eq!(link.client().state(), ClientState::Awaiting);
    let (sent, closed) = drain_and_close(&mut link, secs(1));
    assert_eq!(
        client_frames(&sent),
        [(0x8, 1001u16.to_be_bytes().to_vec())]
    );
    assert!(closed);
}

#[test]
fn endless_fragmented_message_is_refused_with_1009() {
    let mut link = new_link(1024);
    let mut log = Log::default();
    open(&mut link, &mut log, secs(0));
    let mut wire = frame(0x1, false, &[b'a'; 500]);
    for _ in 0..10 {
        wire.extend(frame(0x0, false, &[b'a'; 500]));
    }
    link.handle_input(secs(1), &wire, &mut log);
    assert_eq!(log.closed.len(), 1, "{:?}", log.closed);
    assert!(log.closed[0].starts_with("WebSocket protocol violation"));
    let (sent, closed) = drain_and_close(&mut link, secs(1));
    assert_eq!(
        client_frames(&sent),
        [(0x8, 1009u16.to_be_bytes().to_vec())]
    );
    assert!(closed);
    // Later input on the dying connection is ignored.
    link.handle_input(secs(1), &wire, &mut log);
    assert_eq!(log.closed.len(), 1);
}

#[test]
fn stop_waits_for_replies_and_the_close_handshake() {
    let mut link = new_link(4096);
    let mut log = Log::default();
    open(&mut link, &mut log, secs(0));
    let ack = Ack::Reply { deadline: None };
    let ticket = link
        .client_mut()
        .publish(secs(0), "c", "1", ack, &mut log)
        .unwrap()
        .unwrap();
    drain(&mut link, secs(0));
    link.client_mut().stop(secs(0), &mut log);
    assert_eq!(
        client_frames(&drain(&mut link, secs(0))),
        [(0x8, 1000u16.to_be_bytes().to_vec())]
    );
    assert_eq!(
        link.poll_output(secs(0)),
        None,
        "waits for the server's close"
    );
    let mut wire = text(r#"{"action":"rtm/publish/ok","id":0,"body":{"position":"1:0"}}"#);
    wire.extend(frame(0x8, true, &1000u16.to_be_bytes()));
    link.handle_input(secs(0), &wire, &mut log);
    assert_eq!(
        log.replies,
        [(ticket, r#"ok {"position":"1:0"}"#.to_string())]
    );
    assert_eq!(link.poll_output(secs(0)), Some(Output::Close));
    link.handle_closed(secs(0), &mut log);
    assert_eq!(
        log.closed,
        ["closed by the client (stopped, or after a protocol error it reported)"]
    );
    assert_eq!(link.client().state(), ClientState::Stopped);
}

#[test]
fn stop_gives_up_on_a_silent_server_after_the_close_timeout() {
    let mut link = new_link(4096);
    let mut log = Log::default();
    open(&mut link, &mut log, secs(0));
    link.client_mut().stop(secs(0), &mut log);
    drain(&mut link, secs(0));
    assert_eq!(link.poll_output(secs(0)), None);
    assert_eq!(link.poll_timeout(), Some(secs(1)));
    assert_eq!(link.poll_output(secs(1)), Some(Output::Close));
}

#[test]
fn upgrade_refusals() {
    // A non-101 status, a wrong accept value, a head too large for the buffer.
    let cases: [(Vec<u8>, ConnectError); 3] = [
        (b"HTTP/1.1 503 Busy\r\n\r\n".to_vec(), ConnectError::Rejected { status: 503 }),
        (
            b"HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n\r\n".to_vec(),
            ConnectError::Protocol,
        ),
        ([b"HTTP/1.1 101 OK\r\n".as_slice(), &[b'x'; 20_000]].concat(), ConnectError::Protocol),
    ];
    for (reply, error) in cases {
        let mut link = new_link(4096);
        let mut log = Log::default();
        let t = secs(0);
        link.client_mut().start(t, &mut log);
        let _ = link.poll_output(t);
        link.handle_connected(t, &mut log);
        drain(&mut link, t);
        link.handle_input(t, &reply, &mut log);
        assert_eq!(link.client().last_connecting_error(), Some(error));
        assert_eq!(link.client().state(), ClientState::Awaiting);
        assert_eq!(link.poll_output(t), Some(Output::Close));
        link.handle_closed(t, &mut log);
        assert!(log.closed.is_empty(), "never open: no disconnect to report");
    }
}

#[test]
fn connect_timeout_abandons_the_attempt() {
    let mut link = new_link(4096);
    let mut log = Log::default();
    link.client_mut().start(secs(0), &mut log);
    let _ = link.poll_output(secs(0));
    link.handle_connected(secs(0), &mut log);
    drain(&mut link, secs(0));
    // The server accepted TCP but never answers the upgrade.
    let at = link.poll_timeout().unwrap();
    assert_eq!(at, secs(30));
    link.handle_timeout(at, &mut log);
    assert_eq!(
        link.client().last_connecting_error(),
        Some(ConnectError::Timeout)
    );
    assert_eq!(link.poll_output(at), Some(Output::Close));
    link.handle_closed(at, &mut log);
    // The next attempt was due 2 s after the first one started: it begins at once.
    assert_eq!(link.client().state(), ClientState::Connecting);
    assert!(matches!(link.poll_output(at), Some(Output::Connect { .. })));
}

#[test]
fn transport_eof_reports_and_reconnects() {
    let mut link = new_link(4096);
    let mut log = Log::default();
    open(&mut link, &mut log, secs(0));
    let ack = Ack::Reply { deadline: None };
    let ticket = link
        .client_mut()
        .publish(secs(0), "c", "1", ack, &mut log)
        .unwrap()
        .unwrap();
    drain(&mut link, secs(0));
    link.handle_closed(secs(20), &mut log);
    assert_eq!(
        log.closed,
        ["the connection was closed without a close frame"]
    );
    assert_eq!(log.replies, [(ticket, "disconnected".to_string())]);
    assert_eq!(link.client().state(), ClientState::Awaiting);
    assert_eq!(link.poll_output(secs(20)), None);
    link.handle_timeout(secs(20), &mut log);
    assert!(matches!(
        link.poll_output(secs(20)),
        Some(Output::Connect { .. })
    ));
}

#[test]
fn a_full_outbox_leaves_pdus_in_the_queue() {
    // A 1 KiB outbox holds two of these frames at a time; the rest wait in the queue and
    // follow as frames go out: nothing is lost, order is kept.
    let mut link: Link<Vec<u8>, _, _> = Link::new(
        client_config(),
        config(),
        "ws://h",
        "K",
        Buffers {
            rx: vec![0; 1024],
            tx: vec![0; 2048],
            queue: vec![0; 65536],
            outbox: vec![0; 1024],
            subscription_args: vec![0; 1024],
        },
        [SubscriptionSlot::EMPTY; 1],
        [Pending::EMPTY; 4],
    )
    .unwrap();
    let mut log = Log::default();
    let t = secs(0);
    link.client_mut().start(t, &mut log);
    let _ = link.poll_output(t);
    link.handle_connected(t, &mut log);
    let mut request = Vec::new();
    while let Some(Output::Transmit(b)) = link.poll_output(t) {
        request.extend_from_slice(b);
        let n = b.len();
        link.transmitted(t, n);
    }
    link.handle_input(t, &answer(&request), &mut log);
    let body = "x".repeat(300);
    for _ in 0..20 {
        let msg = format!("\"{body}\"");
        link.client_mut()
            .publish(t, "c", &msg, Ack::None, &mut log)
            .unwrap();
    }
    let mut writes = 0;
    let mut frames = Vec::new();
    while let Some(Output::Transmit(bytes)) = link.poll_output(t) {
        frames.extend(client_frames(bytes));
        let n = bytes.len();
        assert!(link.unsent().count() <= 2);
        link.transmitted(t, n);
        writes += 1;
    }
    assert_eq!(frames.len(), 20);
    assert!(frames.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(writes, 20);
}

#[test]
fn input_held_back_by_the_adapter_keeps_the_server_alive() {
    let mut link = new_link(4096);
    let mut log = Log::default();
    open(&mut link, &mut log, secs(0));
    // The application is slow: the adapter leaves the waiting bytes in the socket.
    for s in 1..=30 {
        link.handle_input_held(secs(s));
        link.handle_timeout(secs(s), &mut log);
    }
    assert!(log.closed.is_empty(), "{:?}", log.closed);
    assert!(link.is_open());
    // Once nothing is waiting any more, silence counts again.
    link.handle_timeout(secs(40), &mut log);
    assert_eq!(log.closed.len(), 1);
}

/// Found by the `rtm_link` fuzz target: a protocol error while the last write had ended
/// inside a frame used to drop that frame's rest and send the close frame in its place,
/// so the server read the close as payload of a corrupt frame.
#[test]
fn a_frame_cut_by_a_partial_write_is_finished_before_the_close_frame() {
    let mut link = new_link(4096);
    let mut log = Log::default();
    open(&mut link, &mut log, secs(0));
    link.client_mut()
        .publish(secs(0), "c", "1", Ack::None, &mut log)
        .unwrap();
    let Some(Output::Transmit(bytes)) = link.poll_output(secs(0)) else {
        panic!("a frame to write");
    };
    // The socket takes 10 bytes of the frame, then a masked frame (forbidden) arrives.
    let mut wire = bytes[..10].to_vec();
    link.transmitted(secs(0), 10);
    link.handle_input(secs(1), &[0x81, 0x80, 0, 0, 0, 0], &mut log);
    assert_eq!(log.closed.len(), 1);
    let (rest, closed) = drain_and_close(&mut link, secs(1));
    assert!(closed);
    wire.extend(rest);
    assert_eq!(
        client_frames(&wire),
        [
            (
                0x1,
                br#"{"action":"rtm/publish","body":{"channel":"c","message":1}}"#.to_vec()
            ),
            (0x8, 1002u16.to_be_bytes().to_vec())
        ]
    );
}

/// A write that ended inside a pong, PDUs framed after it, then a protocol error: the
/// pong's rest and the close frame go out, and no PDU after the close.
#[test]
fn a_control_frame_cut_by_a_partial_write_is_followed_by_the_close_alone() {
    let mut link = new_link(4096);
    let mut log = Log::default();
    open(&mut link, &mut log, secs(0));
    link.handle_input(secs(0), &frame(0x9, true, b"hb"), &mut log);
    let Some(Output::Transmit(pong)) = link.poll_output(secs(0)) else {
        panic!("a pong to write");
    };
    let mut wire = pong[..3].to_vec();
    link.transmitted(secs(0), 3);
    // The pong's rest comes first; the publish is framed behind it.
    publish_offered(&mut link, &mut log);
    assert_eq!(link.unsent().count(), 2);
    link.handle_input(secs(1), &[0x81, 0x80, 0, 0, 0, 0], &mut log);
    let (rest, closed) = drain_and_close(&mut link, secs(1));
    assert!(closed);
    wire.extend(rest);
    assert_eq!(
        client_frames(&wire),
        [(0xA, b"hb".to_vec()), (0x8, 1002u16.to_be_bytes().to_vec())]
    );
}

/// What was not written at all is dropped: the close frame goes out alone and at once.
#[test]
fn unsent_whole_frames_are_dropped_for_the_close_frame() {
    let mut link = new_link(4096);
    let mut log = Log::default();
    open(&mut link, &mut log, secs(0));
    publish_offered(&mut link, &mut log);
    link.handle_input(secs(1), &[0x81, 0x80, 0, 0, 0, 0], &mut log);
    let (wire, closed) = drain_and_close(&mut link, secs(1));
    assert!(closed);
    assert_eq!(
        client_frames(&wire),
        [(0x8, 1002u16.to_be_bytes().to_vec())]
    );
}

#[cfg(feature = "cbor")]
mod cbor {
    use super::*;
    use crate::rtm::pdu::Encoding;

    fn cbor_link() -> TestLink {
        let client = Config {
            encoding: Encoding::Cbor,
            ..client_config()
        };
        Link::new(
            client,
            config(),
            "ws://example.test:8080/rtm",
            "K",
            Buffers {
                rx: vec![0; 4096],
                tx: vec![0; 16 * 1024],
                queue: vec![0; 16384],
                outbox: vec![0; 1024],
                subscription_args: vec![0; 1024],
            },
            [SubscriptionSlot::EMPTY; 4],
            vec![Pending::EMPTY; 128],
        )
        .unwrap()
    }

    /// Starts and connects: the upgrade request, which must offer `cbor`.
    fn upgrade_request(link: &mut TestLink, log: &mut Log, t: Instant) -> Vec<u8> {
        link.client_mut().start(t, log);
        assert!(matches!(link.poll_output(t), Some(Output::Connect { .. })));
        link.handle_connected(t, log);
        let request = drain(link, t);
        let text = std::str::from_utf8(&request).unwrap();
        assert!(
            text.contains("\r\nSec-WebSocket-Protocol: cbor\r\n"),
            "{text}"
        );
        request
    }

    fn selecting(answer: Vec<u8>, protocol: &str) -> Vec<u8> {
        let head = String::from_utf8(answer).unwrap();
        let head = head.strip_suffix("\r\n").unwrap();
        format!("{head}Sec-WebSocket-Protocol: {protocol}\r\n\r\n").into_bytes()
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn json_links_offer_no_subprotocol() {
        let mut link = new_link(4096);
        let mut log = Log::default();
        link.client_mut().start(secs(0), &mut log);
        let _ = link.poll_output(secs(0));
        link.handle_connected(secs(0), &mut log);
        let request = drain(&mut link, secs(0));
        assert!(!String::from_utf8(request)
            .unwrap()
            .contains("Sec-WebSocket-Protocol"));
    }

    #[test]
    fn a_server_that_does_not_select_cbor_fails_the_connection_before_any_cbor() {
        let mut link = cbor_link();
        let mut log = Log::default();
        let t = secs(0);
        // A publish waits in the queue meanwhile: it must never reach that server.
        link.client_mut()
            .publish(t, "ch", "1", Ack::None, &mut log)
            .unwrap();
        let request = upgrade_request(&mut link, &mut log, t);
        link.handle_input(t, &answer(&request), &mut log);
        assert_eq!(
            link.client().last_connecting_error(),
            Some(ConnectError::SubprotocolNotSelected)
        );
        assert_eq!(link.client().state(), ClientState::Awaiting);
        let (sent, closed) = drain_and_close(&mut link, t);
        assert!(
            sent.is_empty() && closed,
            "nothing is sent to a JSON-only server"
        );
        // Selecting another protocol, or more than one, is a protocol error.
        for other in ["json", "cbor, json"] {
            let mut link = cbor_link();
            let request = upgrade_request(&mut link, &mut log, t);
            link.handle_input(t, &selecting(answer(&request), other), &mut log);
            assert_eq!(
                link.client().last_connecting_error(),
                Some(ConnectError::Protocol)
            );
        }
    }

    #[test]
    fn cbor_goes_out_in_binary_frames_and_replies_come_back_in_either_frame() {
        let mut link = cbor_link();
        let mut log = Log::default();
        let t = secs(1);
        let ticket = link
            .client_mut()
            .publish(
                t,
                "ch",
                r#""hello""#,
                Ack::Reply { deadline: None },
                &mut log,
            )
            .unwrap()
            .unwrap();
        let request = upgrade_request(&mut link, &mut log, t);
        link.handle_input(t, &selecting(answer(&request), "cbor"), &mut log);
        assert_eq!(link.client().state(), ClientState::Connected);
        // The queued publish: the SDK's bytes, in a binary frame.
        let sent = client_frames(&drain(&mut link, t));
        assert_eq!(
            sent,
            [(0x2, hex("a366616374696f6e6b72746d2f7075626c6973686269640064626f6479a2676368616e6e656c626368676d6573736167656568656c6c6f"))]
        );
        // Its ack in a binary frame, split at every byte.
        let ack = frame(0x2, true, &hex("a366616374696f6e6e72746d2f7075626c6973682f6f6b6269640064626f6479a168706f736974696f6e6c313530303030303030303a30"));
        for byte in ack.chunks(1) {
            link.handle_input(t, byte, &mut log);
        }
        assert_eq!(log.replies.len(), 1);
        assert_eq!(log.replies[0].0, ticket);

        // Subscription data in a text frame (CBOR is not UTF-8: accepted all the same).
        link.client_mut()
            .subscribe(
                t,
                "animals",
                Mode::Simple,
                SubscribeArgs::default(),
                &mut log,
            )
            .unwrap();
        let sent = client_frames(&drain(&mut link, t));
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].0, 0x2);
        let ok = crate::rtm::pdu::Pdu::parse_cbor(&sent[0].1).unwrap();
        assert_eq!(ok.id, Some(crate::rtm::pdu::Id::Int(1)));
        let subscribed = hex("a366616374696f6e7072746d2f7375627363726962652f6f6b6269640164626f6479a16f737562736372697074696f6e5f696467616e696d616c73");
        link.handle_input(t, &frame(0x2, true, &subscribed), &mut log);
        let data = hex("a266616374696f6e7572746d2f737562736372697074696f6e2f6461746164626f6479a26f737562736372697074696f6e5f696467616e696d616c73686d6573736167657381a1616e07");
        link.handle_input(t, &frame(0x1, true, &data), &mut log);
        assert_eq!(link.client().state(), ClientState::Connected);
        assert_eq!(
            log.data,
            [String::from_utf8_lossy(&[0xa1, 0x61, b'n', 0x07])]
        );
    }

    #[test]
    fn malformed_cbor_or_json_in_a_cbor_connection_reconnects() {
        let deep = [0x81u8; 40]; // nested past the limit
        let mut deep_message = [0xa1, 0x66].to_vec(); // {"action": [[[…]]]}
        deep_message.extend_from_slice(b"action");
        deep_message.extend_from_slice(&[0x9f; 40]);
        for payload in [
            &deep[..],
            &deep_message,
            &[0xa3, 0x66][..],         // truncated
            br#"{"action":"/error"}"#, // JSON text
            &[0x82, 0x01, 0x02],       // not a map
            &[0xbf, 0xff, 0x00],       // trailing bytes
        ] {
            let mut link = cbor_link();
            let mut log = Log::default();
            let t = secs(1);
            let request = upgrade_request(&mut link, &mut log, t);
            link.handle_input(t, &selecting(answer(&request), "CBOR"), &mut log);
            assert_eq!(link.client().state(), ClientState::Connected);
            link.handle_input(t, &frame(0x2, true, payload), &mut log);
            assert_eq!(
                link.client().state(),
                ClientState::Awaiting,
                "{payload:02x?}"
            );
        }
    }
}

#[test]
fn the_smallest_tx_holds_the_request_then_the_head_in_its_place() {
    type Small = Link<Vec<u8>, [SubscriptionSlot; 1], Vec<Pending>>;
    let new = |appkey: &str, tx: usize| {
        Small::new(
            client_config(),
            config(),
            "ws://example.test:8080/rtm",
            appkey,
            Buffers {
                rx: vec![0; 256],
                tx: vec![0; tx],
                queue: vec![0; 64],
                outbox: vec![0; 64],
                subscription_args: vec![0; 1024],
            },
            [SubscriptionSlot::EMPTY; 1],
            vec![Pending::EMPTY; 1],
        )
    };
    // MIN_TX, but a request that does not fit: refused up front.
    let long = "k".repeat(MAX_APPKEY_LEN);
    assert_eq!(
        new(&"\u{e9}".repeat(MAX_APPKEY_LEN / 2), MIN_TX).map(|_| ()),
        Err(LinkError::TxTooSmall {
            min: MAX_UPGRADE_REQUEST
        })
    );
    assert!(new(&long, MIN_TX).is_ok());
    // The head arrives one byte at a time and gathers where the request was.
    let mut link = new("K", MIN_TX).unwrap();
    let (t, log) = (secs(1), &mut Log::default());
    link.client_mut().start(t, log);
    assert!(matches!(link.poll_output(t), Some(Output::Connect { .. })));
    link.handle_connected(t, log);
    let Some(Output::Transmit(request)) = link.poll_output(t) else {
        panic!("no request");
    };
    let request = request.to_vec();
    // Half the request written: an answer now is refused.
    let mut early = new("K", MIN_TX).unwrap();
    early.client_mut().start(t, log);
    let _ = early.poll_output(t);
    early.handle_connected(t, log);
    early.transmitted(t, 10);
    early.handle_input(t, b"HTTP/1.1 101", log);
    assert!(!early.is_open());
    assert_eq!(early.poll_output(t), Some(Output::Close));
    // All of it written, then the answer byte by byte.
    link.transmitted(t, request.len());
    for b in answer(&request) {
        link.handle_input(t, &[b], log);
    }
    assert!(link.is_open());
    assert_eq!(link.client().state(), ClientState::Connected);
}

/// Pull ([`Events`]) against push (a [`Handler`]): one script of server bytes, every
/// kind of event in it, split into reads at random points; the pulled events are the
/// pushed ones, in the same order, field for field.
mod pull {
    use super::*;
    use crate::rtm::{Event, Events, FailReason};

    /// Every event as its `Debug` text, pushed.
    #[derive(Default)]
    struct Trace(Vec<String>);

    impl Trace {
        fn push(&mut self, event: Event<'_>) {
            self.0.push(format!("{event:?}"));
        }
    }

    impl Handler for Trace {
        fn client_state(&mut self, leave: ClientState, enter: ClientState) {
            self.push(Event::ClientState { leave, enter });
        }
        fn reply(&mut self, ticket: Ticket, outcome: Outcome<'_>) {
            self.push(Event::Reply { ticket, outcome });
        }
        fn subscription_state(
            &mut self,
            key: &str,
            leave: crate::rtm::SubState,
            enter: crate::rtm::SubState,
        ) {
            self.push(Event::SubscriptionState { key, leave, enter });
        }
        fn subscription_reply(&mut self, key: &str, reply: pdu::Pdu<'_>) {
            self.push(Event::SubscriptionReply { key, reply });
        }
        fn subscription_failed(&mut self, key: &str, reason: FailReason<'_>) {
            self.push(Event::SubscriptionFailed { key, reason });
        }
        fn subscription_created(&mut self, key: &str) {
            self.push(Event::SubscriptionCreated { key });
        }
        fn subscription_deleted(&mut self, key: &str) {
            self.push(Event::SubscriptionDeleted { key });
        }
        fn subscription_data(&mut self, key: &str, data: pdu::SubscriptionData<'_>) {
            self.push(Event::SubscriptionData { key, data });
        }
        fn fast_forward(&mut self, key: &str, info: pdu::SubscriptionInfo<'_>) {
            self.push(Event::FastForward { key, info });
        }
        fn internal_error(&mut self, error: crate::rtm::InternalError<'_>) {
            self.push(Event::InternalError(error));
        }
        fn auth(&mut self, ticket: Ticket, result: crate::rtm::AuthResult<'_>) {
            self.push(Event::Auth { ticket, result });
        }
        fn link_closed(&mut self, why: Disconnect<'_>) {
            self.push(Event::LinkClosed(why));
        }
    }

    /// Feeds `wire` to `link` in reads of the sizes `cut` gives, each read offered again
    /// for what the link left once `after` took the events; how many reads the link left
    /// part of.
    fn feed<H: Handler>(
        link: &mut TestLink,
        h: &mut H,
        after: &mut impl FnMut(&mut H, &TestLink),
        t: Instant,
        mut wire: &[u8],
        cut: &mut impl FnMut() -> usize,
    ) -> usize {
        let mut held = 0;
        while !wire.is_empty() {
            let mut read = &wire[..cut().min(wire.len())];
            wire = &wire[read.len()..];
            while !read.is_empty() {
                let n = link.handle_input(t, read, h);
                held += usize::from(n < read.len());
                after(h, link);
                read = &read[n..];
            }
        }
        held
    }

    /// The script: three connections, every event kind, every call's events given to
    /// `h` and then to `after`; how many reads the link left part of.
    fn run<H: Handler>(h: &mut H, mut after: impl FnMut(&mut H, &TestLink), seed: u64) -> usize {
        let mut state = seed;
        let mut cut = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            1 + (state >> 33) as usize % 300
        };
        let a = &mut after;
        let mut link = new_link(4096);
        let t = secs(1);
        link.client_mut().start(t, h);
        a(h, &link);
        assert!(matches!(link.poll_output(t), Some(Output::Connect { .. })));
        link.handle_connected(t, h);
        a(h, &link);
        let request = drain(&mut link, t);
        let ack = Ack::Reply { deadline: None };
        let c = link.client_mut();
        c.subscribe(t, "ch", Mode::Simple, SubscribeArgs::default(), h)
            .unwrap();
        c.subscribe(t, "bad", Mode::Simple, SubscribeArgs::default(), h)
            .unwrap();
        c.publish(t, "c", "1", ack, h).unwrap();
        c.publish(t, "c", "2", ack, h).unwrap();
        c.read(t, "c", None, None, h).unwrap();
        c.authenticate(t, "role", b"secret", None, h).unwrap();
        a(h, &link);
        let mut wire = answer(&request);
        for pdu in [
            r#"{"action":"rtm/subscribe/ok","id":0,"body":{"position":"1:0","subscription_id":"ch"}}"#,
            r#"{"action":"rtm/subscribe/error","id":1,"body":{"error":"denied","reason":"no \"bad\""}}"#,
            r#"{"action":"rtm/subscription/data","body":{"subscription_id":"ch","position":"1:1","messages":[{"a":1},"x"]}}"#,
            r#"{"action":"rtm/subscription/data","body":{"subscription_id":"ch","messages":[2]}}"#,
            r#"{"action":"rtm/subscription/info","body":{"subscription_id":"ch","info":"fast_forward","reason":"slow","position":"1:9"}}"#,
            // Members in another order, spaces and escapes: parts found by their offsets
            // must be the parts a parse finds.
            r#" { "body" : {"messages":[ {"q":"\"x\""} , 2 ],"position":"1:\u0035","subscription_id":"ch"} , "action":"rtm/subscription/data" } "#,
            r#"{ "id" : 2 , "body" : { "position" : "1:\u0032" } , "action" : "rtm/publish/ok" }"#,
            r#"{"action":"rtm/publish/error","id":3,"body":{"error":"x","reason":"y"}}"#,
            r#"{"action":"rtm/read/ok","id":4,"body":{"position":"1:3","message":{"v":[1,2]}}}"#,
            r#"{"action":"auth/handshake/ok","id":5,"body":{"data":{"nonce":"MTExMTExMTExMTExMTExMQ=="}}}"#,
            r#"{"action":"auth/authenticate/error","id":6,"body":{"error":"authentication_failed","reason":"wrong"}}"#,
            r#"{"action":"rtm/publish/ok","id":99,"body":{}}"#,
            r#"{"action":"something/new","body":{"k":"v"}}"#,
            r#"{"action":"rtm/subscription/error","body":{"subscription_id":"ch","error":"gone","reason":"moved"}}"#,
        ] {
            wire.extend(text(pdu));
        }
        wire.extend(frame(0x9, true, b"ping"));
        let mut close = 1001u16.to_be_bytes().to_vec();
        close.extend_from_slice(b"bye");
        wire.extend(frame(0x8, true, &close));
        let mut held = feed(&mut link, h, a, t, &wire, &mut cut);
        let _ = link.client_mut().unsubscribe(t, "bad", h);
        a(h, &link);
        let _ = drain_and_close(&mut link, t);
        link.handle_closed(t, h);
        a(h, &link);
        // The second connection: a publish left in flight, then a malformed frame.
        let t = secs(30);
        link.handle_timeout(t, h);
        a(h, &link);
        assert!(matches!(link.poll_output(t), Some(Output::Connect { .. })));
        link.handle_connected(t, h);
        a(h, &link);
        let request = drain(&mut link, t);
        held += feed(&mut link, h, a, t, &answer(&request), &mut cut);
        link.client_mut().publish(t, "c", "3", ack, h).unwrap();
        a(h, &link);
        let _ = drain(&mut link, t);
        held += feed(&mut link, h, a, t, &text("not json"), &mut cut);
        let _ = drain_and_close(&mut link, t);
        link.handle_closed(t, h);
        a(h, &link);
        // A third: a protocol error (a masked server frame).
        let t = secs(60);
        link.handle_timeout(t, h);
        a(h, &link);
        let _ = link.poll_output(t);
        link.handle_connected(t, h);
        a(h, &link);
        let request = drain(&mut link, t);
        let mut wire = answer(&request);
        wire.extend([0x81, 0x81, 0, 0, 0, 0, b'x']);
        held + feed(&mut link, h, a, t, &wire, &mut cut)
    }

    #[test]
    fn pulled_events_are_the_pushed_events() {
        for seed in 0..50 {
            let mut push = Trace::default();
            let held = run(&mut push, |_, _| {}, seed);
            assert_eq!(held, 0, "a pushing handler takes all the input");
            let buf = vec![0; Events::<Vec<u8>>::capacity_for(4, 128, 0)];
            let mut pulled = Trace::default();
            let mut events = Events::new(buf);
            let take = |events: &mut Events<Vec<u8>>, link: &TestLink| {
                while let Some(event) = events.poll_event(link) {
                    pulled.push(event);
                }
            };
            let held = run(&mut events, take, seed);
            assert_eq!(events.lost(), 0);
            assert_eq!(push.0, pulled.0, "seed {seed}");
            assert!(held > 0, "the link held input back while events waited");
            if seed == 0 {
                let all = push.0.join("\n");
                for kind in [
                    "ClientState",
                    "Reply",
                    "SubscriptionState",
                    "SubscriptionReply",
                    "SubscriptionFailed",
                    "SubscriptionCreated",
                    "SubscriptionDeleted",
                    "SubscriptionData",
                    "FastForward",
                    "InternalError(Malformed",
                    "InternalError(UnknownReply",
                    "InternalError(Ignored",
                    "InternalError(DataWithoutPosition",
                    "Auth",
                    "Rejected",
                    "LinkClosed(PeerClosed",
                    "LinkClosed(Protocol",
                    "Disconnected",
                ] {
                    assert!(all.contains(kind), "no {kind} in\n{all}");
                }
            }
        }
    }

    /// Keeping messages, read after every call with the link (`poll_event`), or moved
    /// away (swapped with the empty `Events` read last time) and read only after the
    /// link's next call, which may have received more messages into the buffer they came
    /// from (`poll_kept`): the same events as pushed, none lost, and the link never held
    /// back — how a threaded adapter takes a whole read's events under its lock.
    #[test]
    fn events_keeping_messages_are_the_pushed_events_and_never_hold_input() {
        for seed in 0..50 {
            let mut push = Trace::default();
            run(&mut push, |_, _| {}, seed);
            let size = Events::<Vec<u8>>::capacity_for(4, 128, 0) + (16 << 10);
            let keeping = || Events::new(vec![0; size]).keeping_messages(4096);

            let mut pulled = Trace::default();
            let mut events = keeping();
            let take = |events: &mut Events<Vec<u8>>, link: &TestLink| {
                while let Some(event) = events.poll_event(link) {
                    pulled.push(event);
                }
            };
            let held = run(&mut events, take, seed);
            assert_eq!(events.lost(), 0);
            assert_eq!(held, 0, "seed {seed}: kept messages never hold input back");
            assert_eq!(push.0, pulled.0, "seed {seed}");

            let mut moved = keeping();
            let mut pulled = Trace::default();
            let mut read = |moved: &mut Events<Vec<u8>>| {
                while let Some(event) = moved.poll_kept() {
                    pulled.push(event);
                }
                assert_eq!(moved.lost(), 0);
            };
            let mut events = keeping();
            let held = run(
                &mut events,
                |events, _| {
                    read(&mut moved);
                    core::mem::swap(events, &mut moved);
                },
                seed,
            );
            read(&mut moved);
            assert_eq!(held, 0, "seed {seed}");
            assert_eq!(push.0, pulled.0, "seed {seed}");
        }
    }

    /// Keeping messages in a buffer with room for one message and its events: the link
    /// takes the next message only once the events before it are taken, and none is
    /// lost.
    #[test]
    fn events_keeping_messages_hold_input_back_when_full() {
        let mut push = Trace::default();
        run(&mut push, |_, _| {}, 7);
        // Room for another message of up to `max` only while empty.
        let max = Events::<Vec<u8>>::capacity_for(4, 128, 0);
        let mut pulled = Trace::default();
        let mut events = Events::new(vec![0; max + 600]).keeping_messages(max);
        let take = |events: &mut Events<Vec<u8>>, link: &TestLink| {
            while let Some(event) = events.poll_event(link) {
                pulled.push(event);
            }
        };
        let held = run(&mut events, take, 7);
        assert_eq!(events.lost(), 0);
        assert!(held > 0, "a full buffer held input back");
        assert_eq!(push.0, pulled.0);
    }

    /// Kept by ticket, replies are taken out of turn (newest ticket first here) and the
    /// other events in order: the same events as pushed, none lost, and a reply left
    /// waiting never holds input back unless it borrows the message.
    #[test]
    fn replies_by_ticket_are_taken_out_of_turn() {
        let is_reply = |e: &String| e.starts_with("Reply") || e.starts_with("Auth");
        for seed in 0..50 {
            let mut push = Trace::default();
            run(&mut push, |_, _| {}, seed);
            let (mut want_replies, want_others): (Vec<_>, Vec<_>) =
                push.0.into_iter().partition(is_reply);
            let buf = vec![0; Events::<Vec<u8>>::capacity_for(4, 128, 0)];
            let (mut others, mut replies) = (Trace::default(), Trace::default());
            let mut events = Events::new(buf).replies_by_ticket();
            let take = |events: &mut Events<Vec<u8>>, link: &TestLink| {
                while let Some(event) = events.poll_event(link) {
                    assert!(!is_reply(&format!("{event:?}")), "{event:?}");
                    others.push(event);
                }
                for ticket in (0..16).rev().map(Ticket::from_raw) {
                    while let Some(event) = events.take_reply(link, ticket) {
                        replies.push(event);
                    }
                }
            };
            run(&mut events, take, seed);
            assert_eq!(events.lost(), 0);
            assert_eq!(others.0, want_others, "seed {seed}");
            want_replies.sort();
            replies.0.sort();
            assert_eq!(replies.0, want_replies, "seed {seed}");
        }
    }

    /// When a new event does not fit, the oldest that borrows nothing and is no reply
    /// makes room (counted lost); a reply is never dropped for it.
    #[test]
    fn a_full_buffer_drops_the_oldest_state_changes_first() {
        let link = new_link(4096);
        // Records of 7 bytes (a state change) and 10 (a reply), their headers included.
        let mut events = Events::new(vec![0; 64]).replies_by_ticket();
        let (a, b) = (Ticket::from_raw(1), Ticket::from_raw(2));
        for _ in 0..10 {
            events.client_state(ClientState::Connecting, ClientState::Connected);
        }
        assert_eq!(
            events.lost(),
            1,
            "nine fit, the oldest made room for the tenth"
        );
        events.reply(a, Outcome::Timeout);
        events.reply(b, Outcome::Disconnected);
        assert_eq!(events.lost(), 4, "three more state changes made room");
        assert_eq!(
            events.take_reply(&link, b),
            Some(Event::Reply {
                ticket: b,
                outcome: Outcome::Disconnected
            })
        );
        assert_eq!(
            events.take_reply(&link, a),
            Some(Event::Reply {
                ticket: a,
                outcome: Outcome::Timeout
            })
        );
        let mut states = 0;
        while let Some(event) = events.poll_event(&link) {
            assert!(matches!(event, Event::ClientState { .. }), "{event:?}");
            states += 1;
        }
        assert_eq!(states, 6);
        // Only replies: nothing can make room, so the new one is lost.
        let mut events = Events::new(vec![0; 40]).replies_by_ticket();
        for n in 0..5 {
            events.reply(Ticket::from_raw(n), Outcome::Timeout);
        }
        assert_eq!(events.lost(), 1);
        assert_eq!(events.take_reply(&link, Ticket::from_raw(4)), None);
        assert_eq!(
            events.take_reply(&link, Ticket::from_raw(0)),
            Some(Event::Reply {
                ticket: Ticket::from_raw(0),
                outcome: Outcome::Timeout
            })
        );
    }
}

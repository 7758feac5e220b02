//! The relay: every byte arrives, in order, no earlier than the delay; an end of stream
//! is passed on; a fast sender is held back by the relay's bounded queue, not buffered
//! without limit. Its cuts: a scheduled cut ends a stream while bytes flow, the seeded
//! schedule repeats, `cut_now` closes every connection (both sides), and what arrived
//! before a cut arrived whole and in order. The cut tests wait on what the sockets see
//! (an end of stream, an error); their read timeouts are only guards.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use benchlink_sandbox::relay::{CutSchedule, Relay, RelayConfig};

/// A guard against a hang, never a measure of speed.
const GUARD: Duration = Duration::from_secs(60);

/// A byte pattern whose position can be checked anywhere in the stream.
fn pattern(i: usize) -> u8 {
    (i % 251) as u8
}

#[test]
fn a_stream_arrives_whole_in_order_and_late() {
    let delay = Duration::from_millis(30);
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay = Relay::start(
        "127.0.0.1:0".parse().unwrap(),
        server.local_addr().unwrap(),
        delay,
    )
    .unwrap();
    const LEN: usize = 8 << 20;
    let sink = thread::spawn(move || {
        let (mut s, _) = server.accept().unwrap();
        let mut got = Vec::with_capacity(LEN);
        s.read_to_end(&mut got).unwrap(); // ends with the relayed end of stream
        got
    });
    let mut client = TcpStream::connect(relay.addr()).unwrap();
    let sent_at = Instant::now();
    let data: Vec<u8> = (0..LEN).map(pattern).collect();
    // In pieces of odd sizes, so chunks split anywhere.
    for piece in data.chunks(7919) {
        client.write_all(piece).unwrap();
    }
    client.shutdown(Shutdown::Write).unwrap();
    let got = sink.join().unwrap();
    assert!(sent_at.elapsed() >= delay);
    assert_eq!(got.len(), LEN);
    assert!(
        got.iter().enumerate().all(|(i, &b)| b == pattern(i)),
        "reordered or corrupt"
    );
}

#[test]
fn each_direction_is_delayed() {
    let delay = Duration::from_millis(25);
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay = Relay::start(
        "127.0.0.1:0".parse().unwrap(),
        server.local_addr().unwrap(),
        delay,
    )
    .unwrap();
    let echo = thread::spawn(move || {
        let (mut s, _) = server.accept().unwrap();
        let mut b = [0u8; 1];
        for _ in 0..3 {
            s.read_exact(&mut b).unwrap();
            s.write_all(&b).unwrap();
        }
    });
    let mut client = TcpStream::connect(relay.addr()).unwrap();
    for n in 0..3u8 {
        let started = Instant::now();
        client.write_all(&[n]).unwrap();
        let mut b = [0u8; 1];
        client.read_exact(&mut b).unwrap();
        assert_eq!(b, [n]);
        // There and back: two delays at least (only the lower bound is asserted).
        assert!(started.elapsed() >= 2 * delay, "{:?}", started.elapsed());
    }
    echo.join().unwrap();
}

/// A receiver that does not read: the sender is held back once the relay's queue and the
/// sockets' buffers are full, instead of the relay buffering everything it is sent.
#[test]
fn a_sender_faster_than_the_receiver_is_held_back() {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay = Relay::start(
        "127.0.0.1:0".parse().unwrap(),
        server.local_addr().unwrap(),
        Duration::from_millis(1),
    )
    .unwrap();
    let (mut receiver, _) = {
        let client = TcpStream::connect(relay.addr()).unwrap();
        let accepted = server.accept().unwrap();
        // Send from the client's side while the server's side reads nothing.
        let writer = thread::spawn(move || {
            let mut client = client;
            client
                .set_write_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let block = vec![7u8; 64 * 1024];
            let mut sent = 0usize;
            // Far more than the queue (64 MiB) and the buffers hold.
            while sent < 512 << 20 {
                match client.write(&block) {
                    Ok(n) => sent += n,
                    Err(_) => break, // held back: the write timed out
                }
            }
            sent
        });
        let sent = writer.join().unwrap();
        assert!(
            sent < 512 << 20,
            "nothing held the sender back ({sent} bytes went in)"
        );
        accepted
    };
    // What went in comes out, once read.
    receiver
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut b = [0u8; 1024];
    assert!(receiver.read(&mut b).unwrap() > 0);
}

/// A server that sends the pattern on its first connection until a write fails (the
/// relay closed it); the bytes it got out.
fn endless_sender(server: TcpListener) -> thread::JoinHandle<usize> {
    thread::spawn(move || {
        let (mut s, _) = server.accept().unwrap();
        let block: Vec<u8> = (0..64 * 1024).map(pattern).collect();
        // 64 KiB is a multiple of nothing in 251: send from the right offset each time.
        let mut sent = 0usize;
        loop {
            let from = sent % 251;
            match s.write(&block[from..]) {
                Ok(0) | Err(_) => return sent,
                Ok(n) => sent += n,
            }
        }
    })
}

/// Reads until the end of the stream or a reset, checking every byte's place; the
/// bytes read and whether the end was an error (reset) rather than a clean end.
fn read_until_cut(client: &mut TcpStream, mut on_progress: impl FnMut(usize)) -> usize {
    client.set_read_timeout(Some(GUARD)).unwrap();
    let mut buf = vec![0u8; 16 * 1024];
    let mut got = 0usize;
    loop {
        match client.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => {
                for (i, &b) in buf[..n].iter().enumerate() {
                    assert_eq!(b, pattern(got + i), "byte {} out of order", got + i);
                }
                got += n;
                on_progress(got);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                assert!(
                    !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
                    "no cut within the guard ({got} bytes read)"
                );
                return got; // reset: also a cut
            }
        }
    }
}

#[test]
fn a_scheduled_cut_ends_a_stream_while_it_flows() {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay = Relay::start_with(
        "127.0.0.1:0".parse().unwrap(),
        server.local_addr().unwrap(),
        RelayConfig {
            delay: Duration::ZERO,
            cuts: Some(CutSchedule::new(7, 50, 150)),
        },
    )
    .unwrap();
    let sender = endless_sender(server);
    let mut client = TcpStream::connect(relay.addr()).unwrap();
    // The stream ends although the server never stops sending: only a cut ends it.
    let got = read_until_cut(&mut client, |_| {});
    let sent = sender.join().unwrap();
    assert!(got <= sent, "read {got} bytes, {sent} were sent");
    let stats = relay.cutter().stats();
    assert!(stats.connections_cut >= 1, "{stats:?}");
    assert!(stats.cuts >= 1, "{stats:?}");
}

#[test]
fn the_seeded_schedule_repeats() {
    let a: Vec<Duration> = CutSchedule::new(42, 100, 900)
        .intervals()
        .take(200)
        .collect();
    let b: Vec<Duration> = CutSchedule::new(42, 100, 900)
        .intervals()
        .take(200)
        .collect();
    assert_eq!(a, b);
    assert!(a
        .iter()
        .all(|d| (Duration::from_millis(100)..=Duration::from_millis(900)).contains(d)));
    // Random, not constant, and another seed gives other intervals.
    assert!(a.iter().any(|d| *d != a[0]));
    let c: Vec<Duration> = CutSchedule::new(43, 100, 900)
        .intervals()
        .take(200)
        .collect();
    assert_ne!(a, c);
    // Bounds in either order; equal bounds: a fixed interval.
    assert_eq!(CutSchedule::new(1, 900, 100), CutSchedule::new(1, 100, 900));
    assert!(CutSchedule::new(5, 250, 250)
        .intervals()
        .take(20)
        .all(|d| d == Duration::from_millis(250)));
}

/// `cut_now` with and without a delay: every connection is closed on both sides, the
/// count says so, and the relay goes on relaying new connections.
#[test]
fn cut_now_cuts_every_connection_both_sides() {
    for delay in [Duration::ZERO, Duration::from_millis(20)] {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let relay = Relay::start(
            "127.0.0.1:0".parse().unwrap(),
            server.local_addr().unwrap(),
            delay,
        )
        .unwrap();
        let cutter = relay.cutter();
        let mut pairs = Vec::new();
        for n in 0..3u8 {
            let mut client = TcpStream::connect(relay.addr()).unwrap();
            client.set_read_timeout(Some(GUARD)).unwrap();
            let (mut accepted, _) = server.accept().unwrap();
            accepted.set_read_timeout(Some(GUARD)).unwrap();
            // A byte each way: the connection is relayed (and so registered).
            client.write_all(&[n]).unwrap();
            let mut b = [0u8; 1];
            accepted.read_exact(&mut b).unwrap();
            accepted.write_all(&b).unwrap();
            client.read_exact(&mut b).unwrap();
            assert_eq!(b, [n]);
            pairs.push((client, accepted));
        }
        assert_eq!(cutter.stats().open, 3);
        assert_eq!(cutter.cut_now(), 3);
        for (mut client, mut accepted) in pairs {
            let mut b = [0u8; 1];
            assert!(
                matches!(client.read(&mut b), Ok(0) | Err(_)),
                "the client's side is still open"
            );
            assert!(
                matches!(accepted.read(&mut b), Ok(0) | Err(_)),
                "the server's side is still open"
            );
        }
        let stats = cutter.stats();
        assert_eq!((stats.cuts, stats.connections_cut, stats.open), (1, 3, 0));
        // A cut with nothing open still counts as a cut, closing nothing.
        assert_eq!(cutter.cut_now(), 0);
        assert_eq!(cutter.stats().cuts, 2);
        // New connections are relayed as before.
        let mut client = TcpStream::connect(relay.addr()).unwrap();
        let (mut accepted, _) = server.accept().unwrap();
        client.write_all(b"again").unwrap();
        let mut b = [0u8; 5];
        accepted.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"again");
    }
}

/// A cut in the middle of a fast stream: every byte that arrived before it arrived in
/// order, none after the end, and the server's next write fails.
#[test]
fn bytes_before_a_cut_arrive_in_order() {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay = Relay::start(
        "127.0.0.1:0".parse().unwrap(),
        server.local_addr().unwrap(),
        Duration::ZERO,
    )
    .unwrap();
    let cutter = relay.cutter();
    let sender = endless_sender(server);
    let mut client = TcpStream::connect(relay.addr()).unwrap();
    let mut cut = false;
    let got = read_until_cut(&mut client, |got| {
        // Once a megabyte has come through, cut: the rest of the read is what was
        // already on its way to the client.
        if !cut && got >= 1 << 20 {
            cut = true;
            assert_eq!(cutter.cut_now(), 1);
        }
    });
    assert!(cut && got >= 1 << 20, "read {got} bytes");
    let sent = sender.join().unwrap();
    assert!(got <= sent);
}

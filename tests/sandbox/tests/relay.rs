//! The latency relay: every byte arrives, in order, no earlier than the delay; an end of
//! stream is passed on; a fast sender is held back by the relay's bounded queue, not
//! buffered without limit.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use benchlink_sandbox::relay::Relay;

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

//! A TCP relay that delays every byte by a fixed time in each direction and keeps their
//! order: the network between a client and a server that are not on the same machine,
//! on loopback. `benchlink sandbox --latency 50` puts one in front of each server (a
//! 100 ms round trip); the benchmarks use it to measure what a real link costs.
//!
//! Each direction of a connection is a delay line: a reader takes what arrives, stamps
//! it with the time it is due, and queues it (at most [`MAX_QUEUED`] chunks, so a sender
//! faster than the receiver is held back by TCP, not by memory); a writer sends each
//! chunk when it is due. An end of stream is delayed like data, then passed on as a
//! write shutdown.
//!
//! ```
//! use std::io::{Read, Write};
//! use std::net::{TcpListener, TcpStream};
//! use std::time::{Duration, Instant};
//! use benchlink_sandbox::relay::Relay;
//!
//! let server = TcpListener::bind("127.0.0.1:0")?;
//! let relay = Relay::start("127.0.0.1:0".parse().unwrap(), server.local_addr()?, Duration::from_millis(20))?;
//! let echo = std::thread::spawn(move || {
//!     let (mut s, _) = server.accept().unwrap();
//!     let mut b = [0; 5];
//!     s.read_exact(&mut b).unwrap();
//!     s.write_all(&b).unwrap();
//! });
//! let started = Instant::now();
//! let mut client = TcpStream::connect(relay.addr())?;
//! client.write_all(b"hello")?;
//! let mut back = [0; 5];
//! client.read_exact(&mut back)?;
//! assert_eq!(&back, b"hello");
//! assert!(started.elapsed() >= Duration::from_millis(40)); // there and back again
//! echo.join().unwrap();
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Chunks one direction may hold in flight (each up to [`CHUNK`] bytes).
pub const MAX_QUEUED: usize = 1024;
/// Largest read, and so largest chunk, of a delay line.
const CHUNK: usize = 64 * 1024;

/// A running relay; dropping it stops accepting (connections already relayed run on
/// until either side closes).
pub struct Relay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Relay {
    /// Listens on `listen` (port 0: any free port) and relays every connection to
    /// `target`, each direction delayed by `delay`.
    pub fn start(listen: SocketAddr, target: SocketAddr, delay: Duration) -> io::Result<Relay> {
        let listener = TcpListener::bind(listen)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let accept = thread::Builder::new()
            .name("relay-accept".into())
            .spawn(move || {
                for client in listener.incoming() {
                    if stopping.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(client) = client else { continue };
                    match TcpStream::connect(target) {
                        Ok(server) => {
                            let _ = relay_pair(client, server, delay);
                        }
                        // The client sees the refusal as a closed connection.
                        Err(_) => drop(client),
                    }
                }
            })?;
        Ok(Relay {
            addr,
            stop,
            accept: Some(accept),
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// Both directions of one connection.
fn relay_pair(client: TcpStream, server: TcpStream, delay: Duration) -> io::Result<()> {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    delay_line(client.try_clone()?, server.try_clone()?, delay)?;
    delay_line(server, client, delay)
}

/// What one direction carries: bytes, or the end of the stream; with the time it is due.
type Item = (Instant, Option<Vec<u8>>);

/// One direction: `from`'s bytes reach `to` `delay` after they arrived.
fn delay_line(mut from: TcpStream, mut to: TcpStream, delay: Duration) -> io::Result<()> {
    let (tx, rx): (SyncSender<Item>, Receiver<Item>) = sync_channel(MAX_QUEUED);
    thread::Builder::new()
        .name("relay-read".into())
        .spawn(move || {
            let mut buf = vec![0u8; CHUNK];
            loop {
                let n = match from.read(&mut buf) {
                    Ok(0) | Err(_) => 0,
                    Ok(n) => n,
                };
                let due = Instant::now() + delay;
                let chunk = buf.get(..n).filter(|c| !c.is_empty()).map(<[u8]>::to_vec);
                let end = chunk.is_none();
                if tx.send((due, chunk)).is_err() || end {
                    break;
                }
            }
        })?;
    thread::Builder::new()
        .name("relay-write".into())
        .spawn(move || {
            for (due, chunk) in rx {
                // The delay itself: this thread exists to hold each chunk until it is due.
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    thread::sleep(wait);
                }
                match chunk {
                    Some(bytes) if to.write_all(&bytes).is_ok() => {}
                    _ => break,
                }
            }
            let _ = to.shutdown(Shutdown::Write);
        })?;
    Ok(())
}

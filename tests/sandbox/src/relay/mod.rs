//! A TCP relay that delays every byte by a fixed time in each direction and keeps their
//! order, and that can cut its connections: the network between a client and a server
//! that are not on the same machine, on loopback. `benchlink sandbox --latency 50` puts
//! one in front of each server (a 100 ms round trip); the benchmarks use it to measure
//! what a real link costs. `benchlink sandbox --cut-every 2000-6000` and `.ci/chaos` use
//! its cuts for what a load balancer's idle timeout, a NAT rebinding or a restarted proxy
//! does to a long stream.
//!
//! **Cuts.** A cut closes every connection the relay carries at that moment, both sides
//! at once: a plain close (`shutdown(Both)` on the client's and the server's socket, so
//! each peer reads an end of stream at once, mid-stream if bytes were flowing); the
//! bytes the relay still held are dropped, and a peer that writes after the cut gets a
//! reset from the relay's closed socket. (Not an RST by `SO_LINGER` 0: std cannot set
//! it, and the peers' clients must survive an early end of stream either way.) Cuts
//! come from a [`CutSchedule`] (random intervals from a seed, one schedule for the whole
//! relay, so that the same seed repeats the same intervals whatever connections come and
//! go) and on demand ([`Cutter::cut_now`]); [`Cutter::stats`] counts them.
//!
//! Each direction of a connection is a delay line: a reader takes what arrives, stamps
//! it with the time it is due, and queues it (at most [`MAX_QUEUED`] chunks, so a sender
//! faster than the receiver is held back by TCP, not by memory); a writer sends each
//! chunk when it is due. An end of stream is delayed like data, then passed on as a
//! write shutdown. With no delay, a chunk goes on as soon as it is read (no clock read,
//! no timer wait).
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

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

mod schedule;

pub use schedule::CutSchedule;

/// Chunks one direction may hold in flight (each up to 64 KiB, a delay line's largest read).
pub const MAX_QUEUED: usize = 1024;
/// Largest read, and so largest chunk, of a delay line.
const CHUNK: usize = 64 * 1024;

/// How a relay treats its connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayConfig {
    /// Every byte is held this long in each direction (zero: passed on as read).
    pub delay: Duration,
    /// Cut every connection at random intervals; `None`: only on demand.
    pub cuts: Option<CutSchedule>,
}

/// What a relay has cut so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayStats {
    /// Cuts made (scheduled or on demand), including those that found no connection.
    pub cuts: u64,
    /// Connections those cuts closed.
    pub connections_cut: u64,
    /// Connections relayed since the start.
    pub accepted: u64,
    /// Connections relayed now.
    pub open: usize,
}

/// A running relay; dropping it stops accepting and cutting (connections already
/// relayed run on until either side closes).
pub struct Relay {
    addr: SocketAddr,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

/// Cuts a relay's connections and counts the cuts; cloned freely (the control endpoint
/// holds one per relay).
#[derive(Debug, Clone)]
pub struct Cutter {
    shared: Arc<Shared>,
}

impl Relay {
    /// Listens on `listen` (port 0: any free port) and relays every connection to
    /// `target`, each direction delayed by `delay`; no cuts but on demand.
    pub fn start(listen: SocketAddr, target: SocketAddr, delay: Duration) -> io::Result<Relay> {
        Relay::start_with(listen, target, RelayConfig { delay, cuts: None })
    }

    /// Listens on `listen` and relays every connection to `target` as `config` says.
    pub fn start_with(
        listen: SocketAddr,
        target: SocketAddr,
        config: RelayConfig,
    ) -> io::Result<Relay> {
        let listener = TcpListener::bind(listen)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let accepting = Arc::clone(&shared);
        let mut threads = vec![thread::Builder::new()
            .name("relay-accept".into())
            .spawn(move || accept_loop(&listener, target, config.delay, &accepting))?];
        if let Some(schedule) = config.cuts {
            let cutting = Arc::clone(&shared);
            let spawned = thread::Builder::new()
                .name("relay-cut".into())
                .spawn(move || cut_loop(schedule, &cutting));
            match spawned {
                Ok(cutter) => threads.push(cutter),
                Err(e) => {
                    drop(Relay {
                        addr,
                        shared,
                        threads,
                    });
                    return Err(e);
                }
            }
        }
        Ok(Relay {
            addr,
            shared,
            threads,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A handle that cuts this relay's connections and reads its counts.
    pub fn cutter(&self) -> Cutter {
        Cutter {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Cutter {
    /// Closes every connection relayed now, both sides (see the module's notes); the
    /// number closed. Counts as one cut even when there was none.
    pub fn cut_now(&self) -> usize {
        self.shared.cut()
    }

    /// The cuts so far and the connections relayed.
    pub fn stats(&self) -> RelayStats {
        let open = lock(&self.shared.open);
        RelayStats {
            cuts: self.shared.cuts.load(Ordering::Acquire),
            connections_cut: self.shared.connections_cut.load(Ordering::Acquire),
            accepted: open.next_id,
            open: open.pairs.len(),
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        *lock(&self.shared.stopped) = true;
        self.shared.wake.notify_all();
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// The connections relayed now, by accept number: a clone of each side's socket, so
/// that a cut can close them while the delay lines' threads hold their own.
#[derive(Debug, Default)]
struct Open {
    next_id: u64,
    pairs: BTreeMap<u64, (TcpStream, TcpStream)>,
}

#[derive(Debug, Default)]
struct Shared {
    /// Tells the accept loop to end.
    stop: AtomicBool,
    /// Tells the cut loop to end (with [`Shared::wake`]: it waits for its next cut).
    stopped: Mutex<bool>,
    wake: Condvar,
    open: Mutex<Open>,
    cuts: AtomicU64,
    connections_cut: AtomicU64,
}

impl Shared {
    /// One cut: every open connection closed, both sides.
    fn cut(&self) -> usize {
        let pairs = std::mem::take(&mut lock(&self.open).pairs);
        for (client, server) in pairs.values() {
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
        }
        self.cuts.fetch_add(1, Ordering::AcqRel);
        self.connections_cut
            .fetch_add(pairs.len() as u64, Ordering::AcqRel);
        pairs.len()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn accept_loop(listener: &TcpListener, target: SocketAddr, delay: Duration, shared: &Arc<Shared>) {
    for client in listener.incoming() {
        if shared.stop.load(Ordering::Acquire) {
            break;
        }
        let Ok(client) = client else { continue };
        match TcpStream::connect(target) {
            Ok(server) => {
                let _ = relay_pair(client, server, delay, shared);
            }
            // The client sees the refusal as a closed connection.
            Err(_) => drop(client),
        }
    }
}

/// Cuts at the schedule's intervals until the relay is dropped. The wait is the
/// schedule itself (a condition variable with a deadline, woken early by the drop).
fn cut_loop(schedule: CutSchedule, shared: &Shared) {
    let mut next = Instant::now();
    for interval in schedule.intervals() {
        next += interval;
        let mut stopped = lock(&shared.stopped);
        loop {
            if *stopped {
                return;
            }
            let Some(left) = next
                .checked_duration_since(Instant::now())
                .filter(|l| !l.is_zero())
            else {
                break;
            };
            stopped = shared
                .wake
                .wait_timeout(stopped, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        drop(stopped);
        shared.cut();
    }
}

/// A connection's place in [`Open`]: it leaves when the last of its four threads ends
/// (or when a cut took it out first).
struct Registration {
    id: u64,
    shared: Arc<Shared>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        lock(&self.shared.open).pairs.remove(&self.id);
    }
}

/// Both directions of one connection.
fn relay_pair(
    client: TcpStream,
    server: TcpStream,
    delay: Duration,
    shared: &Arc<Shared>,
) -> io::Result<()> {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    // Registered before a byte flows: once one has gone through, a cut closes it.
    let id = {
        let mut open = lock(&shared.open);
        let id = open.next_id;
        open.next_id += 1;
        open.pairs
            .insert(id, (client.try_clone()?, server.try_clone()?));
        id
    };
    let registration = Arc::new(Registration {
        id,
        shared: Arc::clone(shared),
    });
    delay_line(
        client.try_clone()?,
        server.try_clone()?,
        delay,
        Arc::clone(&registration),
    )?;
    delay_line(server, client, delay, registration)
}

/// What one direction carries: bytes, or the end of the stream; with the time it is due
/// (`None` without a delay).
type Item = (Option<Instant>, Option<Vec<u8>>);

/// One direction: `from`'s bytes reach `to` `delay` after they arrived.
fn delay_line(
    mut from: TcpStream,
    mut to: TcpStream,
    delay: Duration,
    registration: Arc<Registration>,
) -> io::Result<()> {
    let (tx, rx): (SyncSender<Item>, Receiver<Item>) = sync_channel(MAX_QUEUED);
    let reading = Arc::clone(&registration);
    thread::Builder::new()
        .name("relay-read".into())
        .spawn(move || {
            let _registered = reading;
            let mut buf = vec![0u8; CHUNK];
            loop {
                let n = match from.read(&mut buf) {
                    Ok(0) | Err(_) => 0,
                    Ok(n) => n,
                };
                let due = (!delay.is_zero()).then(|| Instant::now() + delay);
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
            let _registered = registration;
            for (due, chunk) in rx {
                // The delay itself: this thread exists to hold each chunk until it is due.
                if let Some(wait) = due.and_then(|d| d.checked_duration_since(Instant::now())) {
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

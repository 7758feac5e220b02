//! A small HTTP control endpoint for the local servers: every runtime fault and
//! observation that the Rust API of [`RtmServer`] (its [`Faults`](crate::rtm::Faults)
//! handle, [`connections`](RtmServer::connections), [`attempts`](RtmServer::attempts),
//! [`history_bytes`](RtmServer::history_bytes)) and of [`BenchServer`]
//! ([`crash_benchmark`](BenchServer::crash_benchmark),
//! [`zombify_benchmark`](BenchServer::zombify_benchmark), [`benchmark`](BenchServer::benchmark),
//! [`stats`](BenchServer::stats), [`email_reports`](BenchServer::email_reports)) offers,
//! one endpoint each, and the cuts of the [relays](crate::relay) in front of them
//! ([`Cutter`]), so that a shell script or a test in any language can drive the
//! servers while they run (`benchlink sandbox --control-port`). `GET /` lists every
//! endpoint with its arguments; replies are JSON; bad arguments get `400` with a
//! message, unknown paths `404`.
//!
//! It has **no authentication**: whoever reaches it can drop every connection and crash
//! every benchmark. It is meant for loopback and test networks only.
//!
//! It serves one operator, so it is small and bounded: at most [`MAX_CONNECTIONS`]
//! connections (more are answered `503` at once), one request per connection, which
//! must arrive whole within [`REQUEST_TIMEOUT`] of the accept (else `408`), with a head
//! of at most [`MAX_HEAD`] bytes (else `400`) and a body of at most [`MAX_BODY`] (else
//! `413`). Requests are read with the benchmark server's incremental request reader.

mod routes;

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::bench::budget::Budget;
use crate::bench::http::response_head;
use crate::bench::request::{Limits, Progress, Reader};
use crate::relay::Cutter;
use crate::{BenchServer, RtmServer};

/// Connections open at once; more are answered `503 Service Unavailable`.
pub const MAX_CONNECTIONS: usize = 4;
/// Time for a whole request (head and body) from the accept, and for writing the reply.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest request head, in bytes.
pub const MAX_HEAD: usize = 8 * 1024;
/// Largest request body (a raw frame to send, a reply to substitute), in bytes.
pub const MAX_BODY: usize = 64 * 1024;

/// After an early answer (`408`, `413`, …), how long and how much of the rest of the
/// request is read and dropped before closing, so that the client sees the answer
/// rather than a reset.
const DRAIN_TIME: Duration = Duration::from_millis(500);
const DRAIN_BYTES: usize = 1 << 20;

/// The servers a control endpoint drives.
#[derive(Debug)]
struct Targets {
    bench: Option<Arc<BenchServer>>,
    rtm: Option<Arc<RtmServer>>,
    relays: Relays,
}

/// The relays in front of the servers, for `POST /relay/cut` and `GET /relay/stats`
/// (listed only when there is one).
#[derive(Debug, Clone, Default)]
pub struct Relays {
    /// The relay clients of the benchmark server go through.
    pub bench: Option<Cutter>,
    /// The relay clients of the RTM server go through.
    pub rtm: Option<Cutter>,
}

impl Relays {
    /// Each relay present, by the name `?server=` takes.
    fn named(&self) -> impl Iterator<Item = (&'static str, &Cutter)> {
        [("bench", &self.bench), ("rtm", &self.rtm)]
            .into_iter()
            .filter_map(|(name, cutter)| cutter.as_ref().map(|c| (name, c)))
    }
}

#[derive(Debug)]
struct Inner {
    targets: Targets,
    stopping: AtomicBool,
    /// Open connections by accept number, so that shutdown can close them.
    open: Mutex<BTreeMap<u64, TcpStream>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    budget: Arc<Budget>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running control endpoint. It shares the servers it drives (an [`Arc`] each) and
/// stops (threads joined, connections closed, port released) on
/// [`ControlServer::shutdown`] or on drop; the servers themselves stop when their last
/// [`Arc`] goes.
///
/// # Example
///
/// ```
/// use std::io::{Read, Write};
/// use std::sync::Arc;
/// use benchlink_sandbox::{BenchServer, BenchServerConfig, ControlServer, RtmServer, RtmServerConfig};
///
/// let bench = Arc::new(BenchServer::start(BenchServerConfig::fast())?);
/// let rtm = Arc::new(RtmServer::start(RtmServerConfig::default())?);
/// let control = ControlServer::start("127.0.0.1:0".parse().unwrap(), Some(bench), Some(rtm))?;
///
/// let mut conn = std::net::TcpStream::connect(control.addr())?;
/// conn.write_all(b"POST /rtm/faults/close-connections?code=4000 HTTP/1.1\r\nHost: x\r\n\r\n")?;
/// let mut reply = String::new();
/// conn.read_to_string(&mut reply)?;
/// assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"));
/// assert!(reply.contains(r#""affected": 0"#), "{reply}");
/// control.shutdown();
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct ControlServer {
    addr: SocketAddr,
    inner: Arc<Inner>,
    acceptor: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Binds `addr` (port 0 = any free port) and serves the endpoints of the servers
    /// given (those of a missing one answer `404`).
    ///
    /// # Errors
    ///
    /// When the port cannot be bound or the accept thread cannot be spawned.
    pub fn start(
        addr: SocketAddr,
        bench: Option<Arc<BenchServer>>,
        rtm: Option<Arc<RtmServer>>,
    ) -> io::Result<ControlServer> {
        ControlServer::start_with_relays(addr, bench, rtm, Relays::default())
    }

    /// As [`ControlServer::start`], and the relays in front of the servers get their
    /// endpoints (`/relay/cut`, `/relay/stats`).
    ///
    /// # Errors
    ///
    /// When the port cannot be bound or the accept thread cannot be spawned.
    pub fn start_with_relays(
        addr: SocketAddr,
        bench: Option<Arc<BenchServer>>,
        rtm: Option<Arc<RtmServer>>,
        relays: Relays,
    ) -> io::Result<ControlServer> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let inner = Arc::new(Inner {
            targets: Targets { bench, rtm, relays },
            stopping: AtomicBool::new(false),
            open: Mutex::new(BTreeMap::new()),
            threads: Mutex::new(Vec::new()),
            budget: Arc::new(Budget::new(MAX_CONNECTIONS * MAX_BODY)),
        });
        let i = Arc::clone(&inner);
        let acceptor = thread::Builder::new()
            .name("control-accept".to_owned())
            .spawn(move || accept_loop(&i, &listener))?;
        log::info!("control endpoint: listening on {addr}");
        Ok(ControlServer {
            addr,
            inner,
            acceptor: Some(acceptor),
        })
    }

    /// The bound address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving: closes every connection and joins every thread.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.inner.stopping.store(true, Ordering::SeqCst);
        // Wake the blocking accept with a connection of our own.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(500));
        let _ = acceptor.join();
        for stream in lock(&self.inner.open).values() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        for handle in std::mem::take(&mut *lock(&self.inner.threads)) {
            let _ = handle.join();
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(inner: &Arc<Inner>, listener: &TcpListener) {
    let mut next_id = 0u64;
    for stream in listener.incoming() {
        if inner.stopping.load(Ordering::SeqCst) {
            break;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                log::warn!("control endpoint: accept failed: {e}");
                thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        lock(&inner.threads).retain(|h| !h.is_finished());
        let admitted = {
            let mut open = lock(&inner.open);
            let room = open.len() < MAX_CONNECTIONS;
            if room {
                if let Ok(clone) = stream.try_clone() {
                    open.insert(next_id, clone);
                }
            }
            room
        };
        if !admitted {
            refuse_busy(&stream);
            continue;
        }
        let (i, id) = (Arc::clone(inner), next_id);
        next_id += 1;
        let spawned = thread::Builder::new()
            .name(format!("control-conn-{id}"))
            .spawn(move || {
                serve(&i, stream);
                lock(&i.open).remove(&id);
            });
        match spawned {
            Ok(handle) => lock(&inner.threads).push(handle),
            Err(e) => {
                log::warn!("control endpoint: cannot spawn a connection thread: {e}");
                lock(&inner.open).remove(&id);
            }
        }
    }
}

/// Answers `503` without waiting for anything (the accept loop must not block): the
/// reply goes into the fresh socket's send buffer, and what the client has already sent
/// is read and dropped first, so that closing does not reset the connection before the
/// client reads the reply.
fn refuse_busy(stream: &TcpStream) {
    let _ = stream.set_nonblocking(true);
    let mut sink = [0u8; 4096];
    for _ in 0..(MAX_HEAD / sink.len() + 1) {
        match (&*stream).read(&mut sink) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
    let body = routes::error_body("busy: too many control connections open");
    let _ = (&*stream).write_all(&response(503, &[], &body));
    let _ = stream.shutdown(Shutdown::Write);
}

/// A whole response: JSON body, `connection: close`.
fn response(status: u16, headers: &[(&str, String)], body: &[u8]) -> Vec<u8> {
    let mut all = vec![
        ("content-type", "application/json".to_owned()),
        ("content-length", body.len().to_string()),
    ];
    all.extend(headers.iter().cloned());
    let mut bytes = response_head(status, &all, false).into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Reads one request within [`REQUEST_TIMEOUT`], answers it and closes.
fn serve(inner: &Inner, mut stream: TcpStream) {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let _ = stream.set_write_timeout(Some(REQUEST_TIMEOUT));
    let _ = stream.set_nodelay(true);
    let limits = Limits {
        max_head: MAX_HEAD,
        max_body: MAX_BODY,
    };
    let mut reader = Reader::new(limits, &inner.budget);
    let mut buf = [0u8; 4096];
    let refused = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break 408;
        }
        let _ = stream.set_read_timeout(Some(left));
        let n = match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(_) => return,
        };
        // Bytes after a complete request are not read: one request per connection.
        match reader.push(buf.get(..n).unwrap_or_default()).1 {
            Progress::NeedMore => {
                if reader.take_continue() {
                    let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
                }
            }
            Progress::Reject(status) => break status,
            Progress::Request(request) => {
                let (status, headers, body) = routes::answer(&inner.targets, &request);
                let _ = stream.write_all(&response(status, &headers, &body));
                let _ = stream.shutdown(Shutdown::Write);
                return;
            }
        }
    };
    let message = match refused {
        408 => "the request did not arrive in time",
        413 => "the request body is too large",
        503 => "out of memory for request bodies",
        _ => "malformed or too large request head",
    };
    let _ = stream.write_all(&response(refused, &[], &routes::error_body(message)));
    let _ = stream.shutdown(Shutdown::Write);
    drain(&mut stream);
}

/// Reads and drops what the client still sends, briefly.
fn drain(stream: &mut TcpStream) {
    let until = Instant::now() + DRAIN_TIME;
    let mut left = DRAIN_BYTES;
    let mut buf = [0u8; 4096];
    while left > 0 {
        let wait = until.saturating_duration_since(Instant::now());
        if wait.is_zero() || stream.set_read_timeout(Some(wait)).is_err() {
            return;
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

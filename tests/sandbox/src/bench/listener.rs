//! The event loop that owns every connection while it is not being answered: it accepts
//! (up to [`max_connections`](super::BenchServerConfig::max_connections), making room by
//! closing the connection that has waited longest for a complete request), reads
//! requests push-style ([`Reader`]) and hands complete ones to the worker pool. Idle,
//! slow and half-sent connections therefore cost a small buffer here, never a thread,
//! and their deadlines (idle, head from its first byte, pauses in a body) are checked on
//! a short tick. One thread, one `mio` poll; sockets stay `std` sockets, registered by
//! file descriptor.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};

use super::budget::Budget;
use super::config::Fault;
use super::http::response_head;
use super::request::{Limits, Progress, Reader};
use super::state::Shared;
use super::workers::{Job, Pool};

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
/// Connection ids start here (they double as poll tokens and are never reused).
const FIRST_ID: u64 = 2;
/// How often deadlines are checked.
const TICK: Duration = Duration::from_millis(25);
/// One read from a socket.
const READ_SIZE: usize = 64 * 1024;
/// Reads from one connection before the others get their turn (a client that sends
/// faster than the loop reads must not keep it to itself).
const READS_PER_TURN: usize = 16;
/// After a refusal (413, 408, …), how long and how much of the rest of the request is
/// read and dropped before closing, so that the client sees the answer rather than a
/// reset.
const DRAIN_TIME: Duration = Duration::from_secs(1);
const DRAIN_BYTES: usize = 1 << 20;

/// Counters of the connection machinery, for [`BenchServer::stats`](super::BenchServer::stats).
#[derive(Debug, Default)]
struct Counters {
    connections: AtomicUsize,
    accepted: AtomicU64,
    evicted: AtomicU64,
    refused: AtomicU64,
    timed_out: AtomicU64,
    body_bytes: AtomicU64,
    held_bytes: AtomicU64,
    sweeps: AtomicU64,
}

/// A connection a worker is done with: `Some((socket, bytes read after its request))`
/// to read the next request, `None` when it was closed.
type Returned = (u64, Option<(TcpStream, Vec<u8>)>);

/// What the loop shares with the workers and the server handle.
#[derive(Debug)]
pub(crate) struct Net {
    pub(crate) budget: Arc<Budget>,
    counters: Counters,
    waker: Waker,
    /// Connections given back by workers: `Some` to read the next request.
    back: Mutex<Vec<Returned>>,
    /// Connections being answered, so that shutdown can unblock their workers.
    busy: Mutex<BTreeMap<u64, TcpStream>>,
}

/// A snapshot of the server's connection accounting, for tests and monitoring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerStats {
    /// Connections open now (read by the event loop or being answered).
    pub connections: usize,
    /// Connections accepted so far, refused ones included: with the requests per path
    /// ([`BenchServer::requests`](super::BenchServer::requests)), what a client's
    /// connection reuse costs the server.
    pub accepted: u64,
    /// Bytes of request bodies held now (buffer capacity, charged to the budget).
    pub body_bytes: usize,
    /// The most body bytes ever held at once.
    pub peak_body_bytes: usize,
    /// Bytes of request bodies read so far, as sent (chunk framing included): each byte
    /// is decoded once, so this is the decoding work.
    pub body_bytes_read: u64,
    /// Connections closed to make room under the connection cap.
    pub evicted: u64,
    /// Connections refused because every connection had a request being served.
    pub refused: u64,
    /// Connections closed by a deadline (idle, head, body).
    pub timed_out: u64,
    /// Bytes read and dropped unanswered under [`Fault::Silent`](super::Fault::Silent):
    /// once a request's bytes are counted here, the server has seen it, so a test that
    /// then finds no answer knows that none is coming (no quiet spell to wait out).
    pub held_bytes: u64,
    /// Deadline sweeps done so far (one a tick): a connection still open after a sweep
    /// that began past its deadline was not closed by it.
    pub sweeps: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Net {
    /// A worker is done with connection `id`.
    pub(crate) fn give_back(&self, id: u64, conn: Option<(TcpStream, Vec<u8>)>) {
        lock(&self.back).push((id, conn));
        let _ = self.waker.wake();
    }

    /// Wakes the loop (to see the shutdown flag).
    pub(crate) fn wake(&self) {
        let _ = self.waker.wake();
    }

    /// Closes every connection being answered (their workers' writes then fail).
    pub(crate) fn shutdown_busy(&self) {
        for stream in lock(&self.busy).values() {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    pub(crate) fn stats(&self) -> ServerStats {
        let c = &self.counters;
        ServerStats {
            connections: c.connections.load(Ordering::SeqCst),
            accepted: c.accepted.load(Ordering::SeqCst),
            body_bytes: self.budget.used(),
            peak_body_bytes: self.budget.peak(),
            body_bytes_read: c.body_bytes.load(Ordering::SeqCst),
            evicted: c.evicted.load(Ordering::SeqCst),
            refused: c.refused.load(Ordering::SeqCst),
            timed_out: c.timed_out.load(Ordering::SeqCst),
            held_bytes: c.held_bytes.load(Ordering::SeqCst),
            sweeps: c.sweeps.load(Ordering::SeqCst),
        }
    }
}

/// What a connection read by the loop is doing.
#[derive(Debug)]
enum Mode {
    /// Reading requests.
    Requests,
    /// [`Fault::Silent`]: reading and dropping everything, answering nothing.
    Hold,
    /// Refused: reading and dropping the rest until `until` or [`DRAIN_BYTES`].
    Drain { until: Instant, left: usize },
}

#[derive(Debug)]
struct Reading {
    stream: TcpStream,
    reader: Reader,
    mode: Mode,
    /// When the current wait began (accepted, or given back after a response).
    since: Instant,
    /// First byte of the current request.
    first_byte: Option<Instant>,
    last_read: Instant,
}

#[derive(Debug)]
enum Slot {
    Reading(Box<Reading>),
    /// With a worker.
    Busy,
}

/// The event loop.
pub(crate) struct Loop {
    shared: Arc<Shared>,
    net: Arc<Net>,
    pool: Arc<Pool>,
    poll: Poll,
    listener: TcpListener,
    slots: HashMap<u64, Slot>,
    next_id: u64,
    limits: Limits,
    retry_accept: bool,
    /// Connections that had more to read when their turn ended.
    again: Vec<u64>,
}

/// Bytes from a socket: what they led to.
enum Fed {
    Wait,
    /// The connection left the loop (to a worker) or was closed.
    Gone,
}

impl Loop {
    /// Sets up the poll; `listener` is bound already.
    pub(crate) fn new(shared: &Arc<Shared>, listener: TcpListener) -> io::Result<Loop> {
        listener.set_nonblocking(true)?;
        let poll = Poll::new()?;
        poll.registry().register(
            &mut SourceFd(&listener.as_raw_fd()),
            LISTENER,
            Interest::READABLE,
        )?;
        let waker = Waker::new(poll.registry(), WAKER)?;
        let config = &shared.config;
        let net = Arc::new(Net {
            budget: Arc::new(Budget::new(config.body_budget)),
            counters: Counters::default(),
            waker,
            back: Mutex::new(Vec::new()),
            busy: Mutex::new(BTreeMap::new()),
        });
        Ok(Loop {
            pool: Arc::new(Pool::new(config.workers)),
            limits: Limits {
                max_head: config.max_head.max(16),
                max_body: config.max_body,
            },
            shared: Arc::clone(shared),
            net,
            poll,
            listener,
            slots: HashMap::new(),
            next_id: FIRST_ID,
            retry_accept: false,
            again: Vec::new(),
        })
    }

    pub(crate) fn net(&self) -> Arc<Net> {
        Arc::clone(&self.net)
    }

    pub(crate) fn pool(&self) -> Arc<Pool> {
        Arc::clone(&self.pool)
    }

    /// Runs until shutdown; then closes every connection it holds.
    pub(crate) fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut scratch = vec![0u8; READ_SIZE];
        let mut next_tick = Instant::now() + TICK;
        while !self.shared.is_shutdown() {
            let timeout = if self.again.is_empty() {
                next_tick.saturating_duration_since(Instant::now())
            } else {
                Duration::ZERO
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    log::warn!("bench server: poll failed: {e}");
                    std::thread::sleep(TICK);
                }
                continue;
            }
            let now = Instant::now();
            for id in std::mem::take(&mut self.again) {
                self.readable(id, &mut scratch, now);
            }
            for event in &events {
                match event.token() {
                    LISTENER => self.accept_all(now),
                    WAKER => {}
                    Token(id) => self.readable(id as u64, &mut scratch, now),
                }
            }
            self.take_back(&mut scratch, now);
            if now >= next_tick {
                if self.retry_accept {
                    self.accept_all(now);
                }
                self.expire(now);
                self.net.counters.sweeps.fetch_add(1, Ordering::SeqCst);
                next_tick = now + TICK;
            }
        }
        let ids: Vec<u64> = self.slots.keys().copied().collect();
        for id in ids {
            self.close(id);
        }
    }

    fn set_count(&self) {
        self.net
            .counters
            .connections
            .store(self.slots.len(), Ordering::SeqCst);
    }

    fn accept_all(&mut self, now: Instant) {
        self.retry_accept = false;
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => self.admit(stream, now),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of file descriptors and the like: try again on the next tick.
                    log::warn!("bench server: accept failed: {e}");
                    self.retry_accept = true;
                    break;
                }
            }
        }
    }

    fn admit(&mut self, mut stream: TcpStream, now: Instant) {
        self.net.counters.accepted.fetch_add(1, Ordering::SeqCst);
        if self.slots.len() >= self.shared.config.max_connections && !self.evict_one() {
            self.net.counters.refused.fetch_add(1, Ordering::SeqCst);
            let _ = stream.set_nonblocking(true);
            let head = response_head(503, &[("content-length", "0".to_owned())], false);
            let _ = stream.write(head.as_bytes());
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        let mode = match self.shared.config.fault {
            Some(Fault::Silent) => Mode::Hold,
            _ => Mode::Requests,
        };
        self.enter(id, stream, mode, now);
    }

    /// Puts a connection under the loop's watch.
    fn enter(&mut self, id: u64, stream: TcpStream, mode: Mode, now: Instant) -> bool {
        let _ = stream.set_nodelay(true);
        let token = usize::try_from(id).map(Token);
        let registered = stream.set_nonblocking(true).and_then(|()| {
            let token = token.map_err(|_| io::Error::other("connection ids exhausted"))?;
            self.poll.registry().register(
                &mut SourceFd(&stream.as_raw_fd()),
                token,
                Interest::READABLE,
            )
        });
        if let Err(e) = registered {
            log::warn!("bench server: cannot watch a connection: {e}");
            self.set_count();
            return false;
        }
        let reading = Reading {
            stream,
            reader: Reader::new(self.limits, &self.net.budget),
            mode,
            since: now,
            first_byte: None,
            last_read: now,
        };
        self.slots.insert(id, Slot::Reading(Box::new(reading)));
        self.set_count();
        true
    }

    /// Closes the connection that has waited longest for a complete request (one being
    /// drained after a refusal first). False if every connection is with a worker.
    fn evict_one(&mut self) -> bool {
        let victim = self
            .slots
            .iter()
            .filter_map(|(id, slot)| match slot {
                Slot::Reading(r) => Some((!matches!(r.mode, Mode::Drain { .. }), r.since, *id)),
                Slot::Busy => None,
            })
            .min();
        let Some((_, _, id)) = victim else {
            return false;
        };
        self.net.counters.evicted.fetch_add(1, Ordering::SeqCst);
        self.close(id);
        true
    }

    fn close(&mut self, id: u64) {
        let slot = self.slots.remove(&id);
        self.set_count();
        if let Some(Slot::Reading(r)) = slot {
            let _ = self
                .poll
                .registry()
                .deregister(&mut SourceFd(&r.stream.as_raw_fd()));
            let _ = r.stream.shutdown(Shutdown::Both);
        }
    }

    /// Reads what connection `id` has until the socket is empty or the connection
    /// leaves the loop.
    fn readable(&mut self, id: u64, scratch: &mut [u8], now: Instant) {
        for _ in 0..READS_PER_TURN {
            let Some(Slot::Reading(r)) = self.slots.get_mut(&id) else {
                return;
            };
            let n = match r.stream.read(scratch) {
                Ok(0) => return self.close(id),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return self.close(id),
            };
            r.last_read = now;
            match &mut r.mode {
                Mode::Requests => {}
                Mode::Hold => {
                    let held = u64::try_from(n).unwrap_or(u64::MAX);
                    self.net
                        .counters
                        .held_bytes
                        .fetch_add(held, Ordering::SeqCst);
                    continue;
                }
                Mode::Drain { left, .. } => {
                    *left = left.saturating_sub(n);
                    if *left == 0 {
                        return self.close(id);
                    }
                    continue;
                }
            }
            if let Fed::Gone = self.feed(id, scratch.get(..n).unwrap_or_default(), now) {
                return;
            }
        }
        // Edge-triggered: no new event comes for what is still unread, so come back.
        if !self.again.contains(&id) {
            self.again.push(id);
        }
    }

    /// Pushes bytes read from connection `id` into its reader.
    fn feed(&mut self, id: u64, data: &[u8], now: Instant) -> Fed {
        let mut used = 0;
        while used < data.len() {
            let Some(Slot::Reading(r)) = self.slots.get_mut(&id) else {
                return Fed::Gone;
            };
            if !matches!(r.mode, Mode::Requests) {
                return Fed::Wait;
            }
            let was_started = r.reader.started();
            let (n, progress) = r.reader.push(data.get(used..).unwrap_or_default());
            used += n;
            if !was_started && r.reader.started() {
                r.first_byte = Some(now);
            }
            self.net
                .counters
                .body_bytes
                .fetch_add(r.reader.take_body_bytes(), Ordering::SeqCst);
            if r.reader.take_continue() {
                let _ = r.stream.write(b"HTTP/1.1 100 Continue\r\n\r\n");
            }
            match progress {
                Progress::NeedMore => {}
                Progress::Reject(status) => {
                    self.refuse(id, status, now);
                    return Fed::Wait;
                }
                Progress::Request(request) => {
                    let pending = data.get(used..).unwrap_or_default().to_vec();
                    self.dispatch(id, request, pending);
                    return Fed::Gone;
                }
            }
        }
        Fed::Wait
    }

    fn dispatch(&mut self, id: u64, request: super::request::Request, pending: Vec<u8>) {
        let Some(Slot::Reading(r)) = self.slots.insert(id, Slot::Busy) else {
            return;
        };
        let _ = self
            .poll
            .registry()
            .deregister(&mut SourceFd(&r.stream.as_raw_fd()));
        if let Ok(clone) = r.stream.try_clone() {
            lock(&self.net.busy).insert(id, clone);
        }
        let job = Job {
            id,
            stream: r.stream,
            request,
            pending,
        };
        self.pool.submit(job, &self.shared, &self.net);
    }

    /// Answers `status` without reading the request further, then drains and closes.
    fn refuse(&mut self, id: u64, status: u16, now: Instant) {
        let Some(Slot::Reading(r)) = self.slots.get_mut(&id) else {
            return;
        };
        let mut headers = vec![("content-length", "0".to_owned())];
        if status == 503 {
            headers.push(("retry-after", "1".to_owned()));
        }
        let head = response_head(status, &headers, false);
        // Drop the half-read body first: its memory goes back to the budget.
        r.reader = Reader::new(self.limits, &self.net.budget);
        // A fresh socket's send buffer takes a short head; a client that filled it
        // without reading gets nothing more.
        let _ = r.stream.write(head.as_bytes());
        let _ = r.stream.shutdown(Shutdown::Write);
        r.mode = Mode::Drain {
            until: now + DRAIN_TIME,
            left: DRAIN_BYTES,
        };
    }

    /// Connections given back by workers: read their next request.
    fn take_back(&mut self, scratch: &mut [u8], now: Instant) {
        let back = std::mem::take(&mut *lock(&self.net.back));
        for (id, conn) in back {
            lock(&self.net.busy).remove(&id);
            self.slots.remove(&id);
            let Some((stream, pending)) = conn else {
                self.set_count();
                continue;
            };
            if self.shared.is_shutdown() || !self.enter(id, stream, Mode::Requests, now) {
                continue;
            }
            if !pending.is_empty() {
                if let Fed::Gone = self.feed(id, &pending, now) {
                    continue;
                }
            }
            self.readable(id, scratch, now);
        }
    }

    /// Applies the deadlines.
    fn expire(&mut self, now: Instant) {
        let config = &self.shared.config;
        let expired = |start: Instant, limit: Duration| now.duration_since(start) >= limit;
        let mut answer_408 = Vec::new();
        let mut close = Vec::new();
        let mut drained = Vec::new();
        for (id, slot) in &self.slots {
            let Slot::Reading(r) = slot else { continue };
            match r.mode {
                Mode::Hold => {}
                Mode::Drain { until, .. } if now >= until => drained.push(*id),
                Mode::Drain { .. } => {}
                Mode::Requests if r.reader.in_body() => {
                    if expired(r.last_read, config.body_timeout) {
                        answer_408.push(*id);
                    }
                }
                Mode::Requests => match r.first_byte {
                    Some(first) if expired(first, config.header_timeout) => answer_408.push(*id),
                    Some(_) => {}
                    None if expired(r.since, config.keep_alive_timeout) => close.push(*id),
                    None => {}
                },
            }
        }
        let timed_out = answer_408.len() + close.len();
        self.net
            .counters
            .timed_out
            .fetch_add(timed_out as u64, Ordering::SeqCst);
        for id in answer_408 {
            self.refuse(id, 408, now);
        }
        for id in close.into_iter().chain(drained) {
            self.close(id);
        }
    }
}

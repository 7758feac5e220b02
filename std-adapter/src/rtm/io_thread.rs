//! The blocking client's runner: one I/O thread per client that moves bytes between a
//! non-blocking socket (mio) and the link, sleeps until the link's next deadline, a
//! caller's wake-up or the socket, and delivers the link's events to observers and
//! callbacks between reads. Connects run on a thread of their own (DNS, TCP, a proxy
//! tunnel and the TLS handshake block), so the I/O thread never waits for them.

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use benchlink_core::rtm::{self as core_rtm, ClientState, Output};
use benchlink_core::time::Instant;
use mio::unix::SourceFd;
use mio::{Events as Ready, Interest, Poll, Token};

use crate::net::Stream;

use super::client::Error;
use super::engine::{
    deliver, finish, take, Core, CoreLink, Delivery, Engine, Journal, Observers, Parts, StateWatch,
    READ_CHUNK, WRITE_PIECES,
};
use super::transport::{open, ConnectError, TransportOptions};

pub(crate) const WAKER: Token = Token(0);
const SOCKET: Token = Token(1);

/// What connect threads report to the I/O thread. API calls never go through it: they
/// lock the link and queue their work in it (see [`Client::call`]).
enum Msg {
    Connected(u64, Stream),
    ConnectFailed(u64, ConnectError),
}

/// What one read of the socket gave.
enum Input {
    Nothing,
    Bytes(usize),
    Closed,
}

/// Bytes read from the socket that the link has not taken yet: it takes them up to the
/// first message with events, which are delivered before it takes more.
struct Inbox {
    buf: Box<[u8]>,
    at: usize,
    end: usize,
}

impl Inbox {
    fn pending(&self) -> &[u8] {
        self.buf.get(self.at..self.end).unwrap_or_default()
    }
}

/// The socket side of the I/O thread.
struct Io {
    poll: Poll,
    transport: TransportOptions,
    socket: Option<Stream>,
    registered: bool,
    /// The socket may have more to read (mio reports edges: read until `WouldBlock`).
    readable: bool,
    /// A write hit `WouldBlock`: wait for the socket to become writable.
    blocked: bool,
    /// Bumped for every connect handed out, so a late result of an abandoned one is
    /// recognised (and its socket dropped).
    generation: u64,
    connecting: bool,
    tx: Sender<Msg>,
    engine: Arc<Engine>,
    inbox: Inbox,
}

impl Io {
    /// Carries out what the link asks for: connect, write, close. Returns with the link
    /// idle, or blocked on a full socket.
    fn flush(&mut self, core: &mut Core) {
        let now = core.now();
        // TLS keeps records it could not send yet: they go first.
        if let Some(socket) = self.socket.as_mut().filter(|_| !self.blocked) {
            let flushed = socket.flush();
            let (link, events) = core.parts();
            self.written(flushed, link, now, events);
        }
        loop {
            let (link, events) = core.parts();
            match link.poll_output(now) {
                None => return,
                Some(Output::Connect { host, port, tls }) => {
                    self.generation += 1;
                    self.connecting = true;
                    let generation = self.generation;
                    let (host, transport) = (host.to_owned(), self.transport.clone());
                    let (tx, engine) = (self.tx.clone(), self.engine.clone());
                    let spawned = thread::Builder::new()
                        .name("benchlink-rtm-connect".into())
                        .spawn(move || {
                            let msg = match open(&host, port, tls, &transport) {
                                Ok(stream) => Msg::Connected(generation, stream),
                                Err(e) => Msg::ConnectFailed(generation, e),
                            };
                            if tx.send(msg).is_ok() {
                                engine.wake_now();
                            }
                        });
                    if spawned.is_err() {
                        self.connecting = false;
                        let code = core_rtm::ConnectError::Other { code: 0 };
                        link.handle_connect_failed(now, code, events);
                    }
                }
                Some(Output::Transmit(_)) => {
                    if self.blocked {
                        return;
                    }
                    let Some(socket) = self.socket.as_mut() else {
                        // Never: the link transmits only on a transport it was told is open.
                        link.handle_closed(now, events);
                        continue;
                    };
                    // Every frame ready, each from where it was encoded, in one call.
                    let mut pieces = [io::IoSlice::new(&[]); WRITE_PIECES];
                    let mut count = 0;
                    for (slot, piece) in pieces.iter_mut().zip(link.unsent()) {
                        *slot = io::IoSlice::new(piece);
                        count += 1;
                    }
                    let written = socket
                        .write_vectored(pieces.get(..count).unwrap_or_default())
                        .and_then(|n| {
                            log::trace!("rtm: wrote {n} bytes");
                            link.transmitted(now, n);
                            socket.flush()
                        });
                    if !self.written(written, link, now, events) {
                        return;
                    }
                }
                Some(Output::Close) => {
                    self.drop_socket();
                    self.connecting = false;
                    link.handle_closed(now, events);
                }
            }
        }
    }

    /// Acts on what a write (or a flush of what TLS holds) came to; `false` when the
    /// socket is full, to wait until it is writable. A failed socket is dropped, and the
    /// link told that its connection closed.
    fn written(
        &mut self,
        result: io::Result<()>,
        link: &mut CoreLink,
        now: Instant,
        events: &mut Journal,
    ) -> bool {
        match result {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.blocked = true;
                false
            }
            Err(e) => {
                log::debug!("rtm: write failed: {e}");
                self.drop_socket();
                link.handle_closed(now, events);
                true
            }
        }
    }

    /// [`flush`](Self::flush) once the link has taken all that was read: what the
    /// events of one read made callbacks send goes out in one write, not one per
    /// message.
    fn flush_when_read(&mut self, core: &mut Core) {
        if self.inbox.pending().is_empty() {
            self.flush(core);
        }
    }

    fn drop_socket(&mut self) {
        if let Some(socket) = self.socket.take() {
            if self.registered {
                let fd = socket.tcp().as_raw_fd();
                let _ = self.poll.registry().deregister(&mut SourceFd(&fd));
            }
        }
        self.registered = false;
        self.readable = false;
        self.blocked = false;
        // What the old connection sent and the link did not take is gone with it.
        self.inbox.at = self.inbox.end;
    }

    /// Reads one chunk, if the socket may have one and the link took the last.
    fn read(&mut self) -> Input {
        if !self.readable || !self.inbox.pending().is_empty() {
            return Input::Nothing;
        }
        let Some(socket) = self.socket.as_mut() else {
            self.readable = false;
            return Input::Nothing;
        };
        match socket.read(&mut self.inbox.buf) {
            Ok(0) => {
                log::debug!("rtm: the server closed the connection");
                Input::Closed
            }
            Ok(n) => Input::Bytes(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.readable = false;
                Input::Nothing
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Input::Nothing,
            Err(e) => {
                log::debug!("rtm: read failed: {e}");
                Input::Closed
            }
        }
    }

    /// Feeds what [`Io::read`] got, with what earlier reads left, to the link, which
    /// takes it up to the first message with events.
    fn feed(&mut self, core: &mut Core, input: Input) {
        let now = core.now();
        let (link, events) = core.parts();
        match input {
            Input::Nothing => {}
            Input::Bytes(n) => (self.inbox.at, self.inbox.end) = (0, n),
            Input::Closed => {
                self.drop_socket();
                link.handle_closed(now, events);
                return;
            }
        }
        let pending = self.inbox.pending();
        if !pending.is_empty() {
            let taken = link.handle_input(now, pending, events);
            self.inbox.at = self.inbox.at.saturating_add(taken);
        }
    }

    /// A connect thread finished.
    fn connected(&mut self, core: &mut Core, msg: Msg) {
        let now = core.now();
        let (link, events) = core.parts();
        match msg {
            Msg::Connected(generation, stream) => {
                if generation != self.generation || !self.connecting {
                    return; // stale: dropping the stream closes it
                }
                self.connecting = false;
                let fd = stream.tcp().as_raw_fd();
                let registered = stream.tcp().set_nonblocking(true).is_ok()
                    && self
                        .poll
                        .registry()
                        .register(
                            &mut SourceFd(&fd),
                            SOCKET,
                            Interest::READABLE | Interest::WRITABLE,
                        )
                        .is_ok();
                if !registered {
                    let code = core_rtm::ConnectError::Other { code: 0 };
                    link.handle_connect_failed(now, code, events);
                    return;
                }
                self.socket = Some(stream);
                self.registered = true;
                // TLS may hold bytes already decrypted: look before waiting for an edge.
                self.readable = true;
                self.blocked = false;
                core.transport_error = None;
                let (link, events) = core.parts();
                link.handle_connected(now, events);
            }
            Msg::ConnectFailed(generation, e) => {
                if generation != self.generation || !self.connecting {
                    return;
                }
                self.connecting = false;
                log::info!("rtm: connect failed: {e}");
                let code = e.code();
                core.transport_error = Some((code, Arc::new(e)));
                let (link, events) = core.parts();
                link.handle_connect_failed(now, code, events);
            }
        }
    }
}

/// Starts the I/O thread of the client in `parts`, connecting as `transport` says.
pub(crate) fn spawn(
    poll: Poll,
    transport: TransportOptions,
    parts: Parts,
) -> Result<JoinHandle<()>, Error> {
    let Parts {
        engine,
        watch,
        observers,
        delivery,
    } = parts;
    let (tx, rx) = mpsc::channel();
    thread::Builder::new()
        .name("benchlink-rtm".into())
        // As a main thread's, for the callbacks.
        .stack_size(8 << 20)
        .spawn(move || {
            let _ = engine.thread.set(thread::current().id());
            let io = Io {
                inbox: Inbox {
                    buf: vec![0; READ_CHUNK].into_boxed_slice(),
                    at: 0,
                    end: 0,
                },
                poll,
                transport,
                socket: None,
                registered: false,
                readable: false,
                blocked: false,
                generation: 0,
                connecting: false,
                tx,
                engine,
            };
            run_loop(io, rx, watch, observers, delivery);
        })
        .map_err(|_| Error::Disposed)
}

/// The I/O thread: API calls and connect results, the link's deadlines, input up to the
/// next message with events, the link's output, then observers; it sleeps only when
/// there is nothing to read and nothing due.
fn run_loop(
    mut io: Io,
    rx: Receiver<Msg>,
    watch: Arc<StateWatch>,
    observers: Observers,
    mut delivery: Delivery,
) {
    let engine = io.engine.clone();
    let observers = RefCell::new(observers);
    let mut ready = Ready::with_capacity(16);
    loop {
        // From here on, a caller that queues work must wake the thread again.
        engine.wake_pending.store(false, Ordering::Release);
        // The read syscall runs with the link unlocked, so callers queueing requests
        // meanwhile do not wait for it.
        let input = io.read();
        let mut core = engine.lock();
        while let Ok(msg) = rx.try_recv() {
            io.connected(&mut core, msg);
        }
        // Deadlines first: a request whose time is up (a timeout of 0 included) fails
        // even if its reply is already waiting in the socket.
        let now = core.now();
        if core.link.poll_timeout().is_some_and(|t| t <= now) {
            let (link, events) = core.parts();
            link.handle_timeout(now, events);
        }
        io.feed(&mut core, input);
        // The link takes the chunk up to each message with events; those are delivered
        // (observers may call the client) before it takes the next. What callbacks queue
        // goes out once the chunk is used up, before the next sleep.
        loop {
            io.flush_when_read(&mut core);
            if !take(&mut core, &mut delivery) {
                break;
            }
            drop(core);
            deliver(&engine, &watch, &observers, &mut delivery);
            core = engine.lock();
            io.feed(&mut core, Input::Nothing);
        }
        let now = core.now();
        let timeout = core
            .link
            .poll_timeout()
            .map(|t| Duration::from_micros(t.as_micros().saturating_sub(now.as_micros())));
        let disposed = core.link.client().state() == ClientState::Disposed;
        // Requests went out or were answered this turn: a caller waiting for room looks.
        engine.room_changed(&mut core);
        drop(core);
        if disposed {
            break;
        }
        let timeout = if io.readable || engine.wake_pending.load(Ordering::Acquire) {
            Some(Duration::ZERO)
        } else {
            timeout
        };
        if let Err(e) = io.poll.poll(&mut ready, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                log::error!("rtm: poll failed: {e}");
                break;
            }
        }
        for event in ready.iter() {
            if event.token() == SOCKET {
                if event.is_readable() || event.is_read_closed() || event.is_error() {
                    io.readable = true;
                }
                if event.is_writable() {
                    io.blocked = false;
                }
            }
        }
    }
    finish(&engine, &watch, &observers, &mut delivery);
}

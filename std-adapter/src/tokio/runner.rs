//! The async client's runner: one tokio task per client that drives the engine the
//! blocking client's I/O thread drives (`crate::rtm::engine`). It opens the socket when
//! the link asks ([`open`]), writes what the link emits (each frame from where it was
//! encoded, several in one vectored write), feeds it what arrives up to each message
//! with events and delivers those events between reads, and sleeps until the link's next
//! deadline, a call's wake-up or the socket. Every protocol decision and timer is the
//! core's.

use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use benchlink_core::rtm::{ClientState, Output};
use benchlink_core::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

use crate::rtm::engine::{
    deliver, finish, take, Core, Delivery, Engine, Observers, Parts, StateWatch, READ_CHUNK,
    WRITE_PIECES,
};
use crate::rtm::{ConnectError, TransportOptions};

use super::transport::{open, Socket};

/// A connect in progress.
type Connecting = Pin<Box<dyn Future<Output = Result<Box<dyn Socket>, ConnectError>> + Send>>;

/// The task that drives the engine: it opens the socket when the link asks, writes what
/// it emits (each frame from where it was encoded, several in one vectored write), feeds
/// it what arrives up to each message with events, delivers those events between reads,
/// and sleeps until the link's next deadline, a call's wake-up or the socket.
pub(crate) struct Runner {
    engine: Arc<Engine>,
    watch: Arc<StateWatch>,
    observers: RefCell<Observers>,
    delivery: Delivery,
    transport: TransportOptions,
    notify: Arc<Notify>,
    socket: Option<Box<dyn Socket>>,
    connecting: Option<Connecting>,
    /// Bytes read that the link has not taken yet: `inbox[at..end]`.
    inbox: Box<[u8]>,
    at: usize,
    end: usize,
    /// TLS may hold written records: flush before sleeping.
    unflushed: bool,
}

/// What the runner waits for after a turn.
struct Turn {
    deadline: Option<Instant>,
    now: Instant,
    write: bool,
    disposed: bool,
}

impl Runner {
    pub(crate) fn new(parts: Parts, transport: TransportOptions, notify: Arc<Notify>) -> Runner {
        Runner {
            engine: parts.engine,
            watch: parts.watch,
            observers: RefCell::new(parts.observers),
            delivery: parts.delivery,
            transport,
            notify,
            socket: None,
            connecting: None,
            inbox: vec![0; READ_CHUNK].into_boxed_slice(),
            at: 0,
            end: 0,
            unflushed: false,
        }
    }

    pub(crate) async fn run(mut self) {
        loop {
            let turn = self.turn();
            if turn.disposed {
                break;
            }
            self.wait(turn).await;
        }
        finish(
            &self.engine,
            &self.watch,
            &self.observers,
            &mut self.delivery,
        );
    }

    /// One turn with the link: due deadlines, the input it can take (delivering the
    /// events of each message before the next), then what it asks for (connect, close).
    fn turn(&mut self) -> Turn {
        self.engine.wake_pending.store(false, Ordering::Release);
        let engine = self.engine.clone();
        let mut core = engine.lock();
        let now = core.now();
        // Input held for a reader that is behind proves the server alive: it is slowed
        // down, not dead (told before the deadlines are looked at).
        if self.at < self.end && self.engine.pressure.load(Ordering::Acquire) > 0 {
            core.link.handle_input_held(now);
        }
        if core.link.poll_timeout().is_some_and(|t| t <= now) {
            let (link, events) = core.parts();
            link.handle_timeout(now, events);
        }
        loop {
            self.feed(&mut core);
            if !take(&mut core, &mut self.delivery) {
                break;
            }
            drop(core);
            deliver(
                &self.engine,
                &self.watch,
                &self.observers,
                &mut self.delivery,
            );
            core = engine.lock();
        }
        let write = self.outputs(&mut core);
        let now = core.now();
        let turn = Turn {
            deadline: core.link.poll_timeout(),
            now,
            write,
            disposed: core.link.client().state() == ClientState::Disposed,
        };
        engine.room_changed(&mut core);
        drop(core);
        let readers = std::mem::take(
            &mut *engine
                .deferred
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        readers.into_iter().for_each(std::task::Waker::wake);
        turn
    }

    /// Feeds the link what was read and not taken, unless a subscription's reader is
    /// behind (then the input waits in the inbox, and no more is read).
    fn feed(&mut self, core: &mut Core) {
        let pending = self.inbox.get(self.at..self.end).unwrap_or_default();
        if pending.is_empty() || self.engine.pressure.load(Ordering::Acquire) > 0 {
            return;
        }
        let now = core.now();
        let (link, events) = core.parts();
        self.at += link.handle_input(now, pending, events);
    }

    /// Acts on the link's output up to its next bytes to send: true when there are.
    fn outputs(&mut self, core: &mut Core) -> bool {
        let now = core.now();
        loop {
            let (link, events) = core.parts();
            match link.poll_output(now) {
                None => return false,
                Some(Output::Transmit(_)) => return self.socket.is_some(),
                Some(Output::Connect { host, port, tls }) => {
                    let (host, transport) = (host.to_owned(), self.transport.clone());
                    self.connecting =
                        Some(Box::pin(
                            async move { open(&host, port, tls, &transport).await },
                        ));
                }
                Some(Output::Close) => {
                    self.drop_socket();
                    link.handle_closed(now, events);
                }
            }
        }
    }

    fn drop_socket(&mut self) {
        self.socket = None;
        self.connecting = None;
        self.unflushed = false;
        // What the old connection sent and the link did not take is gone with it.
        self.at = self.end;
    }

    /// Waits for whatever comes first — a call's wake-up, the deadline, the connect's
    /// end, room in the socket for the link's bytes (written at once), or input (read
    /// into the inbox) — and acts on it.
    async fn wait(&mut self, turn: Turn) {
        let notified = self.notify.clone();
        let mut notified = std::pin::pin!(notified.notified());
        let sleep = turn.deadline.map(|at| {
            let left = at.as_micros().saturating_sub(turn.now.as_micros());
            tokio::time::sleep(std::time::Duration::from_micros(left))
        });
        let mut sleep = std::pin::pin!(sleep);
        let engine = self.engine.clone();
        poll_fn(|cx| {
            // The socket first: while it moves bytes, the next turn comes at once and
            // looks at the deadlines and the callers' work itself, so the timer and the
            // wake-up are armed only when the runner is about to sleep.
            let mut progressed = false;
            if turn.write {
                progressed |= self.poll_write(&engine, cx);
            }
            if self.unflushed {
                progressed |= self.poll_flush(&engine, cx);
            }
            // One chunk is read even while a reader is behind: held, it shows the
            // server alive; no more is read until the link took it.
            if self.at == self.end {
                progressed |= self.poll_read(&engine, cx);
            }
            if let Some(connecting) = self.connecting.as_mut() {
                if let Poll::Ready(result) = connecting.as_mut().poll(cx) {
                    self.connecting = None;
                    self.connected(&engine, result);
                    progressed = true;
                }
            }
            if progressed || notified.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            match sleep.as_mut().as_pin_mut().map(|sleep| sleep.poll(cx)) {
                Some(Poll::Ready(())) => Poll::Ready(()),
                _ => Poll::Pending,
            }
        })
        .await;
    }

    /// A connect ended: the link hears how.
    fn connected(&mut self, engine: &Engine, result: Result<Box<dyn Socket>, ConnectError>) {
        let mut core = engine.lock();
        let now = core.now();
        match result {
            Ok(socket) => {
                self.socket = Some(socket);
                core.transport_error = None;
                let (link, events) = core.parts();
                link.handle_connected(now, events);
            }
            Err(e) => {
                log::info!("rtm: connect failed: {e}");
                let code = e.code();
                core.transport_error = Some((code, Arc::new(e)));
                let (link, events) = core.parts();
                link.handle_connect_failed(now, code, events);
            }
        }
    }

    /// Writes the link's unsent frames as far as the socket takes them; true when it
    /// took some (or failed).
    fn poll_write(&mut self, engine: &Engine, cx: &mut Context<'_>) -> bool {
        let Some(socket) = self.socket.as_mut() else {
            return false;
        };
        let mut core = engine.lock();
        let now = core.now();
        let mut pieces = [IoSlice::new(&[]); WRITE_PIECES];
        let mut count = 0;
        for (slot, piece) in pieces.iter_mut().zip(core.link.unsent()) {
            *slot = IoSlice::new(piece);
            count += 1;
        }
        let pieces = pieces.get(..count).unwrap_or_default();
        match Pin::new(socket).poll_write_vectored(cx, pieces) {
            Poll::Pending => false,
            Poll::Ready(Ok(n)) if n > 0 => {
                core.link.transmitted(now, n);
                self.unflushed = true;
                true
            }
            Poll::Ready(result) => {
                log::debug!("rtm: write failed: {result:?}");
                self.closed(&mut core);
                true
            }
        }
    }

    /// Pushes out what TLS holds of the written frames.
    fn poll_flush(&mut self, engine: &Engine, cx: &mut Context<'_>) -> bool {
        let Some(socket) = self.socket.as_mut() else {
            return false;
        };
        match Pin::new(socket).poll_flush(cx) {
            Poll::Pending => false,
            Poll::Ready(Ok(())) => {
                self.unflushed = false;
                false
            }
            Poll::Ready(Err(e)) => {
                log::debug!("rtm: flush failed: {e}");
                self.closed(&mut engine.lock());
                true
            }
        }
    }

    /// Reads one chunk into the inbox; true when something came (or the socket ended).
    fn poll_read(&mut self, engine: &Engine, cx: &mut Context<'_>) -> bool {
        let Some(socket) = self.socket.as_mut() else {
            return false;
        };
        let mut buf = ReadBuf::new(&mut self.inbox);
        match Pin::new(socket).poll_read(cx, &mut buf) {
            Poll::Pending => false,
            Poll::Ready(Ok(())) if !buf.filled().is_empty() => {
                (self.at, self.end) = (0, buf.filled().len());
                true
            }
            Poll::Ready(result) => {
                log::debug!("rtm: the connection ended: {result:?}");
                self.closed(&mut engine.lock());
                true
            }
        }
    }

    /// The socket ended or failed: the link hears it closed.
    fn closed(&mut self, core: &mut Core) {
        self.drop_socket();
        let now = core.now();
        let (link, events) = core.parts();
        link.handle_closed(now, events);
    }
}

//! A local RTM (Satori-compatible) publish/subscribe server for tests and demos, built
//! to behave as the real service does as far as the reference SDKs and their tests show
//! it.
//!
//! It serves `ws://127.0.0.1:PORT/<any prefix>/v2?appkey=K` with one reader thread and
//! one writer thread per connection around a shared state (channels with a bounded
//! history, subscriptions, key-value values). PDUs are JSON text frames, or CBOR in
//! binary frames for a client that offers the `cbor` subprotocol (the reference Python
//! SDK's `protocol='cbor'`; JSON and CBOR clients share channels); positions follow
//! one model built on a sequence number per channel (`"<generation>:<n>"`, `publish/ok` =
//! the message's own position, data = one past the last message, `subscribe/ok` = where
//! the subscription starts). Role-secret auth, per-role channel permissions, views
//! (stream SQL: `select … from … where … group by …`, aggregated over `period`
//! windows; see the `view` module), `only: value_changes`, `history`, `fast_forward`, legacy search,
//! and [`Faults`] for everything the reference SDK's tests do to a live service, plus
//! socket faults ([`SocketFault`]: ping and data floods, an endless fragmented message,
//! a silent peer) for proving that a client stays bounded and keeps its deadlines.
//!
//! The server is meant to measure clients against, so it must not be their bottleneck:
//! a client that pipelines publishes gets its requests handled in batches (every
//! complete frame of a read, under one take of the state lock) and its replies written
//! with one syscall per batch, and each subscriber gets its data coalesced the same way
//! (see the `conn` and `outbox` modules). It costs about a microsecond of CPU per
//! acknowledged publish; `cargo run --release -p benchlink-sandbox --example hub_load`
//! measures it.
//!
//! # Limits
//!
//! Clients may be hostile (a test of a client's robustness is one); every resource
//! they can make the server hold is bounded, with defaults in [`RtmServerConfig`]:
//! - connections: at most [`max_connections`](RtmServerConfig::max_connections) (256),
//!   then `503`; at most [`max_pending_upgrades`](RtmServerConfig::max_pending_upgrades)
//!   (32) of them before their `101`, a new one closing the oldest, and each has
//!   [`handshake_timeout`](RtmServerConfig::handshake_timeout) (10 s) from its accept
//!   to finish the upgrade: sockets that sit idle or trickle a request byte by byte
//!   neither pile up threads nor lock a normal client out;
//! - history: [`history_len`](RtmServerConfig::history_len) messages and
//!   [`history_bytes`](RtmServerConfig::history_bytes) per channel, and
//!   [`history_total_bytes`](RtmServerConfig::history_total_bytes) (64 MiB) across all
//!   channels, oldest first ([`RtmServer::history_bytes`] shows the count);
//! - authentication: each failed `auth/authenticate` of a connection is answered after
//!   a delay that doubles ([`auth_failure_delay`](RtmServerConfig::auth_failure_delay),
//!   50 ms first), and the connection is closed after
//!   [`max_auth_failures`](RtmServerConfig::max_auth_failures) (5); all connections
//!   together get [`auth_failures_per_second`](RtmServerConfig::auth_failures_per_second)
//!   (20) failures, the rest wait their turn;
//! - what a connection may learn: `rtm/search` lists only channels it may read or
//!   subscribe to;
//! - per connection: [`max_message_size`](RtmServerConfig::max_message_size),
//!   [`max_queued_frames`](RtmServerConfig::max_queued_frames) and
//!   [`max_queued_bytes`](RtmServerConfig::max_queued_bytes) (16 MiB) for a slow client,
//!   [`max_subscriptions`](RtmServerConfig::max_subscriptions); and
//!   [`max_channels`](RtmServerConfig::max_channels) in all, with names of at most
//!   [`MAX_NAME_BYTES`].
//!
//! Choices where the real service's behaviour is not known:
//! - positions are `"<generation>:<n>"`, the generation naming the server's run (its
//!   start in unix milliseconds unless [`RtmServerConfig::generation`] says otherwise);
//!   a position of another run is expired (sequence numbers start again in every run,
//!   so reading its `n` as ours would silently deliver the wrong messages), any other
//!   string than `<digits>:<digits>` is invalid, and a position past the end means
//!   "from now";
//! - `subscribe/ok` carries where the subscription starts (the next sequence number for
//!   a live subscribe); an expired position without `fast_forward` still gets the
//!   `subscribe/ok`, then `rtm/subscription/error` ([`RtmServerConfig::expired_error`]),
//!   and the subscription is gone;
//! - `rtm/write` is `rtm/publish` under the `write` permission; `rtm/read` returns the
//!   channel's latest message (kept when the history expires by age, but not when
//!   [`history_total_bytes`](RtmServerConfig::history_total_bytes) evicts it);
//!   `rtm/delete` clears it without telling subscribers;
//! - the data for a client's own subscription may arrive before its `publish/ok`;
//! - error codes: unknown action `invalid_operation`, non-JSON frame `/error`
//!   `invalid_json` (no id), subscription id in use `already_subscribed` (unless
//!   `force`), unknown subscription `not_subscribed`, auth failure
//!   `authentication_failed` (reason `Unauthenticated`), limits `limit_exceeded`, bad
//!   fields `invalid_format` with `Invalid PDU: '<field>' was invalid`;
//! - the handshake gives any role a nonce; an unknown role fails at `auth/authenticate`,
//!   like a bad secret, and each nonce serves one attempt;
//! - a CBOR byte string reaches JSON clients as a string of its base64 (standard
//!   alphabet, padded), CBOR clients as the byte string; views and `value_changes` work
//!   on the JSON form, so a CBOR subscriber of a view gets the base64 text too; a CBOR
//!   PDU that is not one valid CBOR item, or has a map key that is not text, gets an
//!   id-less `/error` `invalid_cbor`; socket faults ([`SocketFault`]) and
//!   [`Faults::send_raw`] send JSON text frames whatever the client speaks.
//!
//! Not implemented: TLS (tests run over `ws://`).
//!
//! # Example
//!
//! ```
//! use benchlink_sandbox::rtm::{RtmServer, RtmServerConfig, DEFAULT_APPKEY};
//! use tungstenite::Message;
//!
//! let server = RtmServer::start(RtmServerConfig::default())?;
//! let url = format!("{}/v2?appkey={DEFAULT_APPKEY}", server.endpoint());
//! let (mut ws, response) = tungstenite::connect(url).expect("upgrade");
//! assert_eq!(response.status(), 101);
//! ws.send(Message::text(r#"{"action":"rtm/publish","id":0,"body":{"channel":"c","message":42}}"#))
//!     .expect("send");
//! let reply = ws.read().expect("reply").into_text().expect("text");
//! assert!(reply.starts_with(r#"{"action":"rtm/publish/ok","id":0,"body":{"position":""#));
//! server.shutdown();
//! # Ok::<(), std::io::Error>(())
//! ```

mod actions;
mod auth;
mod cbor;
mod config;
mod conn;
mod faults;
mod flood;
mod message;
mod outbox;
mod pdu;
mod records;
mod state;
mod view;

use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

pub use config::{
    Permissions, Role, RtmServerConfig, DEFAULT_APPKEY, MAX_NAME_BYTES, RESTRICTED_PREFIX,
    STORED_MESSAGE_OVERHEAD, SUPERUSER_ROLE, SUPERUSER_SECRET,
};
pub use faults::{ConnectFault, Faults, ReplyOverride, SocketFault};
pub use records::{Attempt, AttemptOutcome, ConnectionInfo};

use message::Message;
use state::Shared;

/// How long a connection's writer waits for room in a full socket before it counts a
/// stall ([`ConnectionInfo::write_stalls`]) and waits again.
pub const WRITE_STALL: Duration = Duration::from_millis(50);

/// A running RTM server. It shuts down (threads joined, connections closed, port
/// released) on [`RtmServer::shutdown`] or on drop.
///
/// # Example
///
/// ```
/// use benchlink_sandbox::rtm::{RtmServer, RtmServerConfig};
///
/// let server = RtmServer::start(RtmServerConfig::default())?;
/// assert!(server.endpoint().starts_with("ws://127.0.0.1:"));
/// let position = server.publish("news", r#"{"headline":"hello"}"#).expect("valid JSON");
/// assert!(position.ends_with(":0"));
/// server.shutdown();
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct RtmServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    /// Where the accept loop listens: `addr`, or the loopback port behind the TLS front.
    accept_addr: SocketAddr,
    acceptor: Option<JoinHandle<()>>,
    /// The TLS front, when the server serves `wss://`.
    front: Option<crate::tls::Front>,
}

impl RtmServer {
    /// Binds `config.listen:config.port` (0 = any free port) and starts serving.
    ///
    /// # Errors
    ///
    /// When the port cannot be bound or the accept thread cannot be spawned.
    pub fn start(config: RtmServerConfig) -> io::Result<RtmServer> {
        let listener = TcpListener::bind(SocketAddr::new(config.listen, config.port))?;
        let addr = listener.local_addr()?;
        // With TLS, the front takes the address and the server a loopback port behind it.
        let (listener, front) = match &config.tls {
            Some(tls) => {
                let inner = crate::tls::inner_listener()?;
                let inner_addr = inner.local_addr()?;
                let front = crate::tls::Front::start(listener, inner_addr, tls.clone(), "rtm")?;
                (inner, Some(front))
            }
            None => (listener, None),
        };
        // Where the accept loop listens (behind the front with TLS).
        let accept_addr = listener.local_addr()?;
        let shared = Arc::new(Shared::new(config));
        let s = Arc::clone(&shared);
        let acceptor = thread::Builder::new()
            .name("rtm-accept".to_owned())
            .spawn(move || accept_loop(&s, &listener))?;
        // Closes the windows of aggregated views; idle while there are none.
        let s = Arc::clone(&shared);
        let clock = thread::Builder::new()
            .name("rtm-views".to_owned())
            .spawn(move || view::clock::run(&s));
        match clock {
            Ok(handle) => shared.track(handle),
            Err(e) => {
                shared.begin_shutdown();
                let _ = TcpStream::connect_timeout(&accept_addr, Duration::from_millis(500));
                let _ = acceptor.join();
                return Err(e);
            }
        }
        log::info!("rtm server: listening on {addr}");
        Ok(RtmServer {
            shared,
            addr,
            accept_addr,
            acceptor: Some(acceptor),
            front,
        })
    }

    /// The bound address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `ws://127.0.0.1:PORT` (`wss://…` with [`RtmServerConfig::tls`]), the endpoint to
    /// give an RTM client (which appends `/v2?appkey=…`).
    #[must_use]
    pub fn endpoint(&self) -> String {
        let scheme = if self.front.is_some() { "wss" } else { "ws" };
        format!("{scheme}://{}", self.addr)
    }

    /// Bytes the stored messages of all channels take now, as counted against
    /// [`RtmServerConfig::history_total_bytes`] (message texts and channel names plus
    /// [`STORED_MESSAGE_OVERHEAD`] each): for checking that bound.
    ///
    /// # Example
    ///
    /// ```
    /// use benchlink_sandbox::rtm::{RtmServer, RtmServerConfig, STORED_MESSAGE_OVERHEAD};
    ///
    /// let config = RtmServerConfig { history_total_bytes: 1000, ..RtmServerConfig::default() };
    /// let server = RtmServer::start(config)?;
    /// for i in 0..100 {
    ///     server.publish(&format!("c{i}"), "\"0123456789\"").expect("stored");
    /// }
    /// let kept = server.history_bytes();
    /// assert!(kept <= 1000 && kept >= 1000 - (14 + STORED_MESSAGE_OVERHEAD), "{kept}");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[must_use]
    pub fn history_bytes(&self) -> usize {
        self.shared.history.bytes()
    }

    /// The fault-injection handle.
    #[must_use]
    pub fn faults(&self) -> Faults {
        Faults {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Publishes `message` (JSON text) to `channel` as if a client had, bypassing
    /// permissions; returns its position. `None` when `message` is not valid JSON or the
    /// channel limit is reached.
    pub fn publish(&self, channel: &str, message: &str) -> Option<String> {
        serde_json::from_str::<serde::de::IgnoredAny>(message).ok()?;
        let positions = self.shared.positions;
        let seq = self.shared.lock().publish(
            &self.shared.config,
            positions,
            channel,
            Arc::new(Message::from_json(message.trim())),
        )?;
        Some(format!("{}:{seq}", positions.epoch))
    }

    /// The TCP connections accepted so far (the newest
    /// [`max_records`](RtmServerConfig::max_records)), oldest first: for checking
    /// reconnect timing.
    #[must_use]
    pub fn attempts(&self) -> Vec<Attempt> {
        self.shared.lock().attempts.iter().cloned().collect()
    }

    /// The upgraded connections so far (the newest
    /// [`max_records`](RtmServerConfig::max_records)), oldest first, with the PDUs
    /// each received.
    #[must_use]
    pub fn connections(&self) -> Vec<ConnectionInfo> {
        self.shared.lock().connection_info()
    }

    /// Waits until `pred` holds for [`connections`](Self::connections), up to `timeout`.
    /// Returns whether it did.
    pub fn wait_for_connections(
        &self,
        timeout: Duration,
        mut pred: impl FnMut(&[ConnectionInfo]) -> bool,
    ) -> bool {
        let start = Instant::now();
        loop {
            if pred(&self.connections()) {
                return true;
            }
            if start.elapsed() >= timeout {
                return false;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stops serving: closes every connection and joins every thread.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        if let Some(front) = &mut self.front {
            front.stop();
        }
        self.shared.begin_shutdown();
        self.shared.view_clock.wake();
        // Wake the blocking accept with a connection of our own.
        let _ = TcpStream::connect_timeout(&self.accept_addr, Duration::from_millis(500));
        let _ = acceptor.join();
        {
            let st = self.shared.lock();
            for socket in st.sockets.values() {
                let _ = socket.shutdown(Shutdown::Both);
            }
            for conn in st.conns.values() {
                conn.outbox.abandon();
            }
        }
        loop {
            let handles = self.shared.take_threads();
            if handles.is_empty() {
                break;
            }
            for h in handles {
                let _ = h.join();
            }
        }
        log::info!("rtm server: {} shut down", self.addr);
    }
}

impl Drop for RtmServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener) {
    for stream in listener.incoming() {
        if shared.is_shutdown() {
            break;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                log::warn!("rtm server: accept failed: {e}");
                // Out of file descriptors and the like: back off instead of spinning.
                thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let (id, fault, room) = {
            let mut st = shared.lock();
            let id = st.new_attempt(shared.config.max_records, Instant::now());
            let fault = st.faults.take_connect();
            let room = fault != Some(ConnectFault::CloseTcp) && st.make_room(&shared.config);
            if fault == Some(ConnectFault::CloseTcp) {
                st.set_outcome(id, AttemptOutcome::Refused);
            } else if !room {
                st.set_outcome(id, AttemptOutcome::Rejected(503));
            } else if let Ok(clone) = stream.try_clone() {
                st.sockets.insert(id, clone);
                st.pending.insert(id);
            }
            (id, fault, room)
        };
        if !room {
            if fault != Some(ConnectFault::CloseTcp) {
                log::debug!("rtm server: connection {id}: over the connection cap");
                refuse_busy(&stream);
            }
            let _ = stream.shutdown(Shutdown::Both);
            continue;
        }
        let s = Arc::clone(shared);
        let spawned = thread::Builder::new()
            .name(format!("rtm-conn-{id}"))
            .spawn(move || conn::serve(&s, id, stream, fault));
        match spawned {
            Ok(handle) => shared.track(handle),
            Err(e) => {
                log::warn!("rtm server: cannot spawn a connection thread: {e}");
                let mut st = shared.lock();
                st.sockets.remove(&id);
                st.set_outcome(id, AttemptOutcome::HandshakeFailed);
            }
        }
    }
}

/// Answers a connection over [`RtmServerConfig::max_connections`] with `503 Service
/// Unavailable` (without reading its request), so that a client sees why. The write
/// never blocks the accept loop: the socket is fresh, and a failed write only means the
/// client sees a closed connection instead.
fn refuse_busy(stream: &TcpStream) {
    let _ = stream.set_nonblocking(true);
    let _ = (&mut &*stream).write_all(
        b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
    );
}

//! Fault injection: what the reference SDK's tests do to a live service, on demand, and
//! the socket faults ([`SocketFault`]) that test how a client holds up against a peer
//! that floods it or goes quiet.

use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::outbox::close_frame;
use super::state::{fast_forward_info, subscription_error, Shared};
use super::view;

/// What to do to incoming connections (see [`Faults::refuse_connections`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectFault {
    /// Close the TCP connection right after accepting it, before reading the upgrade
    /// request (the client sees the connection reset or closed during its upgrade).
    CloseTcp,
    /// Answer the upgrade with this HTTP status (e.g. 503) instead of 101.
    Status(u16),
    /// Complete the upgrade, then close the TCP connection at once, without a frame.
    /// A client that resets its backoff on every successful upgrade then reconnects at a
    /// steady rate (once per reconnect interval, as the Python SDK does) instead of
    /// backing off exponentially.
    CloseAfterUpgrade,
}

/// A replacement for the server's reply to some request (see [`Faults::override_replies`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplyOverride {
    /// Send this text frame instead, with every `{id}` replaced by the request's raw
    /// JSON id (`null` when it had none). For malformed or mistyped replies, e.g.
    /// `{"action":"rtm/publish/ok","id":{id},"body":{}}` to a subscribe. A CBOR client
    /// gets it transcoded, in a binary frame, when it is JSON.
    Raw(String),
    /// Send nothing (the client's request times out).
    Silence,
}

/// A fault that takes over one connection's socket (see [`Faults::set_socket_fault`]).
///
/// The floods exist to prove that a client's memory stays bounded and its deadlines
/// fire when a peer sends without pause. They are bounded on the server's side too: the
/// connection's writer thread writes one chunk (16 KiB, 256 KiB of data) of flood at a time with a
/// blocking write, so a client that reads slowly slows the flood down (TCP backpressure)
/// instead of the server buffering for it. Frames queued for the connection (replies,
/// subscription data, pongs, a close) go out between chunks, so a flooded client can
/// still talk to the server. A flood stops when the fault is cleared or replaced, or the
/// connection closes; the chunk being written when that happens is finished, so the
/// client never sees a cut frame.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SocketFault {
    /// WebSocket pings (payload `flood`) back to back, forever. A client that answers
    /// each one with a pong, or queues each as an event, must not grow with them.
    PingFlood,
    /// Valid `rtm/subscription/data` PDUs for subscription `subscription_id`, 100
    /// messages each, back to back as fast as the socket takes them (256 KiB of PDUs per
    /// write, so the flood outruns the client). `message` is the raw
    /// JSON of every message (e.g. `{"n":1}` or `"x"`), inserted as given. Positions are
    /// valid and increasing: each message takes the next sequence number of the
    /// subscription's channel (the messages are not stored, so other subscribers and
    /// replays never see them), and the subscription's resume position follows. The
    /// flood waits while the connection has no such subscription (it starts with the
    /// subscribe, after its `subscribe/ok`, and pauses after an unsubscribe).
    DataFlood {
        /// The subscription the data is for.
        subscription_id: String,
        /// The raw JSON of each message.
        message: String,
    },
    /// A text message that never ends: a first frame without FIN, then continuation
    /// frames (125 bytes of payload each) without FIN, forever. Its text is the start of
    /// an `rtm/subscription/data` PDU whose only message is a string that never closes.
    /// While it lasts, only control frames (pongs, a close) can reach the client;
    /// other frames wait. When the fault ends, a final fragment closes the string and
    /// the PDU, so the message is then valid JSON and the connection usable.
    EndlessMessage,
    /// The server neither reads from nor writes to the connection, and keeps it open:
    /// a peer that hangs. Frames for the client, and requests from it (which TCP then
    /// holds back), wait until the fault is cleared; nothing is handled meanwhile (the
    /// one read that may already be under way when the fault comes takes up to 256 KiB
    /// from the socket, unhandled).
    /// [`close_connections`](Faults::close_connections) still closes the connection
    /// (with its close frame); [`drop_connections`](Faults::drop_connections) too.
    Silent,
}

#[derive(Clone, Debug)]
struct Override {
    action: String,
    reply: ReplyOverride,
    remaining: Option<usize>,
}

/// The fault switches, inside the state lock.
#[derive(Debug, Default)]
pub(crate) struct FaultState {
    connect: Option<(ConnectFault, Option<usize>)>,
    pub subscribe_ok_delay: Option<Duration>,
    pub reject_subscribes: bool,
    pub reject_auth: bool,
    overrides: Vec<Override>,
    /// The socket fault for every connection (see [`Faults::set_socket_fault`]).
    pub socket: Option<SocketFault>,
}

impl FaultState {
    /// No reply overrides or subscribe delays (the usual case: requests need no look at
    /// them).
    pub(crate) fn is_quiet(&self) -> bool {
        self.overrides.is_empty() && self.subscribe_ok_delay.is_none()
    }

    /// The fault for the connection just accepted, counting it down.
    pub(crate) fn take_connect(&mut self) -> Option<ConnectFault> {
        let (fault, remaining) = self.connect.as_mut()?;
        let fault = *fault;
        if let Some(n) = remaining {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.connect = None;
            }
        }
        Some(fault)
    }

    /// The replacement reply for a request with `action`, counting it down.
    pub(crate) fn take_override(&mut self, action: &str) -> Option<ReplyOverride> {
        let i = self.overrides.iter().position(|o| o.action == action)?;
        let o = &mut self.overrides[i];
        let reply = o.reply.clone();
        if let Some(n) = &mut o.remaining {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.overrides.remove(i);
            }
        }
        Some(reply)
    }
}

/// A handle for injecting faults into a running [`RtmServer`](super::RtmServer); cheap to
/// clone and usable from any thread. Faults on connections act at once; switches stay
/// until changed or [`clear`](Faults::clear)ed.
///
/// # Example
///
/// ```
/// use benchlink_sandbox::rtm::{ConnectFault, RtmServer, RtmServerConfig};
///
/// let server = RtmServer::start(RtmServerConfig::default())?;
/// let faults = server.faults();
/// // The next two upgrades get 503 Service Unavailable, later ones succeed.
/// faults.refuse_connections(ConnectFault::Status(503), Some(2));
/// assert_eq!(faults.drop_connections(), 0);
/// faults.clear();
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Faults {
    pub(crate) shared: Arc<Shared>,
}

impl Faults {
    /// Closes every client's TCP connection at once, without a close frame (like a
    /// network failure or a killed server). Returns how many were dropped.
    pub fn drop_connections(&self) -> usize {
        let st = self.shared.lock();
        for conn in st.conns.values() {
            let _ = conn.socket.shutdown(Shutdown::Both);
            conn.outbox.abandon();
        }
        st.conns.len()
    }

    /// Closes the TCP connection of every client subscribed to `channel` (directly or
    /// through a view). Returns how many were dropped.
    pub fn drop_subscribers(&self, channel: &str) -> usize {
        let st = self.shared.lock();
        let mut n = 0;
        for conn in st.conns.values() {
            if conn.subs.values().any(|s| s.channel == channel) {
                let _ = conn.socket.shutdown(Shutdown::Both);
                conn.outbox.abandon();
                n += 1;
            }
        }
        n
    }

    /// Sends a WebSocket close frame with `code` (e.g. 1001 "going away") to every client,
    /// then closes its TCP connection. Returns how many were closed.
    pub fn close_connections(&self, code: u16) -> usize {
        let st = self.shared.lock();
        for conn in st.conns.values() {
            let _ = conn.outbox.push_frames(&close_frame(code));
            conn.outbox.push_shutdown();
        }
        st.conns.len()
    }

    /// Whether WebSocket pings are answered (the default). When off, pongs are dropped
    /// on their way out, so a client's dead-peer detection fires as long as nothing else
    /// is sent to it.
    pub fn answer_pings(&self, answer: bool) {
        self.shared.mute_pongs.store(!answer, Ordering::SeqCst);
    }

    /// Ends subscription `subscription_id` on every connection that has it, sending
    /// `rtm/subscription/error` with `error` (e.g. `out_of_sync`) and `reason`. Returns
    /// how many subscriptions were ended.
    pub fn inject_subscription_error(
        &self,
        subscription_id: &str,
        error: &str,
        reason: &str,
    ) -> usize {
        let positions = self.shared.positions;
        let mut st = self.shared.lock();
        let mut n = 0;
        for conn in st.conns.values_mut() {
            if let Some(sub) = conn.subs.remove(subscription_id) {
                let pdu = subscription_error(positions, subscription_id, error, reason, sub.next);
                conn.send(&pdu);
                n += 1;
            }
        }
        n
    }

    /// Sends `rtm/subscription/info` `fast_forward` for subscription `subscription_id`
    /// on every connection that has it (the subscription goes on). Returns how many
    /// were sent.
    pub fn inject_fast_forward(&self, subscription_id: &str) -> usize {
        let positions = self.shared.positions;
        let st = self.shared.lock();
        let mut n = 0;
        for conn in st.conns.values() {
            if let Some(sub) = conn.subs.get(subscription_id) {
                let pdu = fast_forward_info(
                    positions,
                    subscription_id,
                    sub.next,
                    "Fast-forwarded (injected)",
                );
                conn.send(&pdu);
                n += 1;
            }
        }
        n
    }

    /// Sends `text` verbatim as a text frame to every client, e.g. non-JSON, a PDU
    /// without `body` or `action`, a reply without or with an unknown id, an unsolicited
    /// `/error`. Returns how many clients it was sent to.
    pub fn send_raw(&self, text: &str) -> usize {
        let st = self.shared.lock();
        for conn in st.conns.values() {
            let _ = conn.outbox.push_text(text.as_bytes());
        }
        st.conns.len()
    }

    /// Sends `text` verbatim as a text frame to connection `id`. False when it is not
    /// open.
    pub fn send_raw_to(&self, id: u64, text: &str) -> bool {
        let st = self.shared.lock();
        match st.conns.get(&id) {
            Some(conn) => {
                let _ = conn.outbox.push_text(text.as_bytes());
                true
            }
            None => false,
        }
    }

    /// Sends `payload` verbatim as a binary frame to every client: for a CBOR client,
    /// e.g. malformed CBOR, a map with byte-string keys, a top level that is not a map.
    /// Returns how many clients it was sent to.
    ///
    /// ```
    /// use std::time::Duration;
    /// use benchlink_sandbox::rtm::{RtmServer, RtmServerConfig, DEFAULT_APPKEY};
    /// use tungstenite::Message;
    ///
    /// let server = RtmServer::start(RtmServerConfig::default())?;
    /// let url = format!("{}/v2?appkey={DEFAULT_APPKEY}", server.endpoint());
    /// let (mut ws, _) = tungstenite::connect(url).expect("upgrade");
    /// assert!(server.wait_for_connections(Duration::from_secs(5), |c| c.len() == 1));
    /// // A map keyed by a byte string.
    /// let bad = b"\xa1\x42\x00\x01\x01";
    /// assert_eq!(server.faults().send_raw_binary(bad), 1);
    /// assert_eq!(ws.read().expect("frame"), Message::binary(&bad[..]));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn send_raw_binary(&self, payload: &[u8]) -> usize {
        let st = self.shared.lock();
        for conn in st.conns.values() {
            let _ = conn
                .outbox
                .push_binary_with(|out| out.extend_from_slice(payload));
        }
        st.conns.len()
    }

    /// Discards every stored message of `channel`, as if they had all expired: a later
    /// subscribe from an older position fast-forwards (with `fast_forward`) or fails
    /// with [`RtmServerConfig::expired_error`](super::RtmServerConfig::expired_error).
    /// False when the channel does not exist.
    pub fn expire_history(&self, channel: &str) -> bool {
        let mut st = self.shared.lock();
        match st.channels.get_mut(channel) {
            Some(ch) => {
                ch.expire_all();
                true
            }
            None => false,
        }
    }

    /// Makes every stored message of `channel` older by `by`, as if that time had passed
    /// since each was published: what a `history.age` or
    /// [`message_ttl`](super::RtmServerConfig::message_ttl) sees next, without a test
    /// waiting for it. False when the channel does not exist (or `by` reaches back past
    /// the clock's origin).
    pub fn age_history(&self, channel: &str, by: Duration) -> bool {
        let mut st = self.shared.lock();
        let Some(ch) = st.channels.get_mut(channel) else {
            return false;
        };
        let aged: Option<Vec<Instant>> = ch.history.iter().map(|s| s.at.checked_sub(by)).collect();
        let Some(aged) = aged else {
            return false;
        };
        for (stored, at) in ch.history.iter_mut().zip(aged) {
            stored.at = at;
        }
        true
    }

    /// Delays the handling of every `rtm/subscribe` (hence its `subscribe/ok`) by
    /// `delay`; `None` restores immediate handling. The delay runs on the connection's
    /// reader thread, so later requests of that connection wait too, and messages
    /// published meanwhile are not delivered unless the subscribe has a position.
    pub fn delay_subscribe_ok(&self, delay: Option<Duration>) {
        self.shared.lock().faults.subscribe_ok_delay = delay;
    }

    /// Whether every `rtm/subscribe` is rejected with `rtm/subscribe/error`
    /// `{"error":"invalid_format","reason":"Invalid PDU: rejected by fault injection"}`.
    pub fn reject_subscribes(&self, reject: bool) {
        self.shared.lock().faults.reject_subscribes = reject;
    }

    /// Whether every `auth/authenticate` fails with `reason: "Unauthenticated"`, whatever
    /// the hash (handshakes still succeed).
    pub fn reject_auth(&self, reject: bool) {
        self.shared.lock().faults.reject_auth = reject;
    }

    /// Replaces the reply to the next `times` requests with `action` (`None`: until
    /// cleared). The request itself is not carried out. A later call for the same
    /// action applies after this one is used up.
    pub fn override_replies(&self, action: &str, reply: ReplyOverride, times: Option<usize>) {
        if times == Some(0) {
            return;
        }
        self.shared.lock().faults.overrides.push(Override {
            action: action.to_owned(),
            reply,
            remaining: times,
        });
    }

    /// Applies `fault` to the next `times` connection attempts (`None`: until cleared),
    /// replacing any earlier connection fault.
    pub fn refuse_connections(&self, fault: ConnectFault, times: Option<usize>) {
        self.shared.lock().faults.connect = (times != Some(0)).then_some((fault, times));
    }

    /// Puts every open connection, and every later one, under socket fault `fault`
    /// (`None`: back to normal), replacing the faults set before, globally or per
    /// connection. Returns how many open connections it was applied to.
    ///
    /// # Example
    ///
    /// ```
    /// use benchlink_sandbox::rtm::{RtmServer, RtmServerConfig, SocketFault};
    ///
    /// let server = RtmServer::start(RtmServerConfig::default())?;
    /// let faults = server.faults();
    /// // Every client that connects from now on is flooded with pings.
    /// assert_eq!(faults.set_socket_fault(Some(SocketFault::PingFlood)), 0);
    /// faults.set_socket_fault(None);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_socket_fault(&self, fault: Option<SocketFault>) -> usize {
        let mut st = self.shared.lock();
        for conn in st.conns.values() {
            conn.outbox.set_fault(fault.clone());
        }
        st.faults.socket = fault;
        st.conns.len()
    }

    /// Puts connection `id` (see [`RtmServer::connections`](super::RtmServer::connections))
    /// under socket fault `fault` (`None`: back to normal), whatever the other
    /// connections do. False when it is not open.
    pub fn set_socket_fault_on(&self, id: u64, fault: Option<SocketFault>) -> bool {
        let st = self.shared.lock();
        match st.conns.get(&id) {
            Some(conn) => {
                conn.outbox.set_fault(fault);
                true
            }
            None => false,
        }
    }

    /// Closes the open window of every aggregated view now, as if its `period` had
    /// ended: each sends its rows (if it has any) at once, so that a test need not wait
    /// for the period. The views' own window ends stay where they were. Returns how many
    /// aggregated views there are.
    ///
    /// # Example
    ///
    /// ```
    /// use benchlink_sandbox::rtm::{RtmServer, RtmServerConfig, DEFAULT_APPKEY};
    /// use tungstenite::Message;
    ///
    /// let server = RtmServer::start(RtmServerConfig::default())?;
    /// let url = format!("{}/v2?appkey={DEFAULT_APPKEY}", server.endpoint());
    /// let (mut ws, _) = tungstenite::connect(url).expect("upgrade");
    /// ws.send(Message::text(
    ///     r#"{"action":"rtm/subscribe","id":1,"body":{"subscription_id":"n","period":60,"filter":"select count(*) as n from c"}}"#,
    /// ))
    /// .expect("send");
    /// assert!(ws.read().expect("ok").into_text().expect("text").contains("subscribe/ok"));
    /// server.publish("c", "{}").expect("JSON");
    /// server.publish("c", "{}").expect("JSON");
    /// assert_eq!(server.faults().close_view_windows(), 1);
    /// let data = ws.read().expect("data").into_text().expect("text");
    /// assert!(data.ends_with(r#""messages":[{"n":2}]}}"#), "{data}");
    /// server.shutdown();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn close_view_windows(&self) -> usize {
        let positions = self.shared.positions;
        view::clock::close_all(&mut self.shared.lock(), positions)
    }

    /// Runs the views' clock now as if `ahead` had passed: every scheduled window end due
    /// by then is handled as the clock's own thread would handle it (live windows close,
    /// send their rows and are scheduled again; the entries of views that are gone are
    /// dropped). A test can then check what was or was not sent without waiting for the
    /// periods to pass.
    pub fn run_view_clock(&self, ahead: Duration) {
        let positions = self.shared.positions;
        view::clock::fire(&mut self.shared.lock(), positions, Instant::now() + ahead);
    }

    /// Clears every switch: connections are accepted, pings answered, subscribes and
    /// auth handled normally, no reply overrides, no socket faults (on any connection).
    pub fn clear(&self) {
        let mut st = self.shared.lock();
        st.faults = FaultState::default();
        for conn in st.conns.values() {
            conn.outbox.set_fault(None);
        }
        drop(st);
        self.answer_pings(true);
    }
}

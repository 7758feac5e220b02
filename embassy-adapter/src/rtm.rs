//! The async messaging (RTM) client: [`Messaging`] holds the core's sans-IO
//! [`Link`] — the whole messaging link: the RTM client, the
//! WebSocket upgrade and framing, pings, dead-peer and stalled-write detection, the
//! connect timeout, the close handshake — behind a blocking mutex, and
//! [`Messaging::run`] is the transport loop that owns the socket.
//!
//! ```text
//!  tasks ── &Messaging: publish / read / write / delete / subscribe / authenticate ──┐
//!    ▲          (lock, call the core, wake the runner)                               │
//!    │                                                                               ▼
//!    └── next_event(): Channel<Event>  ◀── Handler ── core Link ◀──▶ Messaging::run
//!        replies: per-ticket slots + wakers                    Connect  → TCP connect
//!                                                              Transmit → socket write
//!                                                              Close    → socket close
//!                                                              readable → handle_input
//!                                                              deadline → handle_timeout
//! ```
//!
//! A `&Messaging` is the cheap handle: `Copy`, shareable between tasks. The core is the
//! single source of truth (reconnect with backoff, auth restore, resubscription, offline
//! queue, deadlines, every protocol timer); the runner only opens, writes, reads and
//! closes the socket, sleeps until the link's next deadline, and turns the core's
//! borrowed events into owned, fixed-capacity [`Event`]s.
//!
//! Delivery: events go into a bounded channel of `EVENTS` slots. While any subscription
//! exists the runner reads the next chunk from the socket only when at least half the
//! channel is free (so a slow consumer slows the connection down through TCP flow
//! control instead of losing data, and a flooding server is throttled by TCP, not by
//! RAM; the link's deadlines keep firing meanwhile); events that still do not fit (a
//! chunk with more messages than free slots, or state events nobody reads) are counted
//! and reported as [`Event::Lost`]. So: if you subscribe, keep calling
//! [`Messaging::next_event`].

use core::cell::RefCell;
use core::future::poll_fn;
use core::pin::pin;
use core::task::Poll;

use benchlink_core::rtm::{
    self, pdu, Ack, AuthResult, Client, ClientState, Disconnect, FailReason, Handler,
    InternalError, Link, LinkError, Mode, Output, RequestError, SubState, SubscribeArgs, Ticket,
    MAX_ENDPOINT_LEN,
};
use benchlink_core::time::Instant as CoreInstant;
use benchlink_core::ws::{CloseCode, Error as WsError};
use embassy_futures::select::{select3, Either3};
use embassy_sync::blocking_mutex::raw::RawMutex;
use embassy_sync::blocking_mutex::Mutex;
use embassy_sync::channel::Channel;
use embassy_sync::signal::Signal;
use embassy_sync::waitqueue::MultiWakerRegistration;
use embassy_time::{Duration, Instant, Timer};
use heapless::{String, Vec};
use rand_core::RngCore;

use crate::transport::{ConnectError as TransportError, Transport};

/// Longest subscription key (channel name or subscription id) an [`Event`] carries;
/// longer keys are truncated (at a character boundary).
pub const MAX_KEY: usize = 64;

/// Longest failure reason an [`Event::SubscriptionFailed`] carries (truncated).
pub const MAX_REASON: usize = 64;

/// Longest close reason of the server a [`DisconnectReason::PeerClosed`] carries
/// (truncated).
pub const MAX_CLOSE_REASON: usize = 64;

/// Tasks that can wait at once for replies or state changes before they start waking
/// each other spuriously (correct, only slower).
const WAITERS: usize = 8;

/// A subscription key in an [`Event`].
pub type KeyText = String<MAX_KEY>;

/// What the client reports to the application, owned and fixed-size.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Event<const MSG: usize> {
    /// The client entered this state (Connecting, Connected, Awaiting, …).
    State(ClientState),
    /// A subscription entered this state; `Subscribed` again after a reconnect means it
    /// was restored.
    Subscription {
        /// The subscription key.
        key: KeyText,
        /// Its new state.
        state: SubState,
    },
    /// A subscription failed for good (until subscribed again).
    SubscriptionFailed {
        /// The subscription key.
        key: KeyText,
        /// The server's reason (or error code), truncated to [`MAX_REASON`].
        reason: String<MAX_REASON>,
    },
    /// A subscription record is gone (after `unsubscribe`).
    SubscriptionDeleted {
        /// The subscription key.
        key: KeyText,
    },
    /// One message of a subscription, as raw JSON text.
    Data {
        /// The subscription key.
        key: KeyText,
        /// The message (any JSON value), for serde-json-core or the core's JSON reader.
        message: String<MSG>,
    },
    /// A message longer than `MSG` bytes arrived and was dropped.
    MessageTooLarge {
        /// The subscription key.
        key: KeyText,
        /// Its length.
        len: usize,
    },
    /// The server skipped the subscription ahead: messages were lost.
    FastForward {
        /// The subscription key.
        key: KeyText,
    },
    /// The server broke the protocol; `fatal` ones made the client reconnect.
    ProtocolError {
        /// The client dropped the connection because of it.
        fatal: bool,
    },
    /// The connection ended, and why. Reported once per connection, before the
    /// [`Event::State`] it causes.
    Disconnected(DisconnectReason),
    /// This many events did not fit in the channel and were dropped.
    Lost {
        /// How many.
        count: u32,
    },
}

/// Why a connection ended: the core's [`Disconnect`], owned. Its `Display` is the core's
/// text (`no data from the server for 60000 ms (dead peer)`); the formatting code is only
/// linked into firmware that prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DisconnectReason {
    /// The server sent a close frame.
    PeerClosed {
        /// Its status code (`None` when the frame had no body).
        code: Option<CloseCode>,
        /// Its reason text (possibly empty), truncated to [`MAX_CLOSE_REASON`] bytes.
        reason: String<MAX_CLOSE_REASON>,
    },
    /// The server broke the WebSocket protocol (a message larger than the `message`
    /// buffer, say); a close frame with the matching code was sent.
    Protocol(WsError),
    /// Nothing arrived for the dead-peer timeout, an unanswered ping included.
    DeadPeer {
        /// How long the server had been silent, in milliseconds.
        silent_ms: u64,
    },
    /// Bytes waiting to be sent did not move for the dead-peer timeout: the server
    /// stopped reading.
    WriteStalled,
    /// The transport ended (EOF, reset) without a close handshake.
    TransportClosed,
    /// The client closed the connection (stop, or after a protocol error it reported).
    ClientClosed,
}

impl DisconnectReason {
    fn new(why: Disconnect<'_>) -> Self {
        match why {
            Disconnect::PeerClosed { code, reason } => DisconnectReason::PeerClosed {
                code,
                reason: truncated(reason),
            },
            Disconnect::Protocol(e) => DisconnectReason::Protocol(e),
            Disconnect::DeadPeer { silent } => DisconnectReason::DeadPeer {
                silent_ms: u64::try_from(silent.as_millis()).unwrap_or(u64::MAX),
            },
            Disconnect::WriteStalled => DisconnectReason::WriteStalled,
            Disconnect::TransportClosed => DisconnectReason::TransportClosed,
            Disconnect::ClientClosed => DisconnectReason::ClientClosed,
        }
    }

    /// The core's view of it.
    pub fn as_core(&self) -> Disconnect<'_> {
        match self {
            DisconnectReason::PeerClosed { code, reason } => Disconnect::PeerClosed {
                code: *code,
                reason,
            },
            DisconnectReason::Protocol(e) => Disconnect::Protocol(*e),
            DisconnectReason::DeadPeer { silent_ms } => Disconnect::DeadPeer {
                silent: core::time::Duration::from_millis(*silent_ms),
            },
            DisconnectReason::WriteStalled => Disconnect::WriteStalled,
            DisconnectReason::TransportClosed => Disconnect::TransportClosed,
            DisconnectReason::ClientClosed => Disconnect::ClientClosed,
        }
    }
}

impl core::fmt::Display for DisconnectReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.as_core().fmt(f)
    }
}

/// How an acknowledged request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Outcome<const MSG: usize> {
    /// `…/ok`: the reply's body as JSON text (`{}` when it had none; empty for a done
    /// `authenticate`). `rtm/publish/ok` carries `position`, `rtm/read/ok` `message`.
    Ok(String<MSG>),
    /// `…/error`: the body (`error`, `reason`) as JSON text; for `authenticate`, the
    /// reason text.
    Error(String<MSG>),
    /// No reply by the deadline.
    Timeout,
    /// The connection dropped with the request in flight (it may or may not have been
    /// processed).
    Disconnected,
    /// The reply body was longer than `MSG` bytes.
    TooLarge {
        /// Its length.
        len: usize,
    },
}

impl<const MSG: usize> Outcome<MSG> {
    /// True for [`Outcome::Ok`].
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok(_))
    }

    /// Member `name` of an `Ok` or `Error` body as raw JSON text (a string keeps its
    /// quotes): `reply.member("position")`.
    pub fn member(&self, name: &str) -> Option<&str> {
        let (Outcome::Ok(body) | Outcome::Error(body)) = self else {
            return None;
        };
        benchlink_core::json::parse(body, benchlink_core::json::DEFAULT_MAX_DEPTH)
            .ok()?
            .get(name)
            .map(|v| v.as_raw())
    }
}

/// Where the link connects, and its liveness checks; the core's
/// [`rtm::LinkConfig`] with the endpoint and appkey, in embassy durations. The connect
/// timeout (TCP connect, DNS and the WebSocket upgrade together) is the client's:
/// [`rtm::Config::connect_timeout`].
#[derive(Debug, Clone, Copy)]
pub struct MessagingConfig<'a> {
    /// `ws://host[:port][/path]` (`wss://` needs TLS, which this crate does not do: every
    /// attempt fails with [`rtm::ConnectError::Tls`]).
    pub endpoint: &'a str,
    /// The application key.
    pub appkey: &'a str,
    /// A `User-Agent` for the upgrade request.
    pub user_agent: Option<&'static str>,
    /// Send a WebSocket ping after this much silence from the server (default 30 s).
    pub ping_interval: Duration,
    /// Declare the server dead after this much silence, or when bytes waiting to be sent
    /// have not moved for this long, and reconnect (default 60 s).
    pub dead_peer_timeout: Duration,
    /// After the client closes, how long to wait for the server's close frame before
    /// closing the socket anyway (default 1 s).
    pub close_timeout: Duration,
}

impl<'a> MessagingConfig<'a> {
    /// Defaults for `endpoint` and `appkey`.
    pub const fn new(endpoint: &'a str, appkey: &'a str) -> Self {
        MessagingConfig {
            endpoint,
            appkey,
            user_agent: Some(concat!("benchlink-embassy/", env!("CARGO_PKG_VERSION"))),
            ping_interval: Duration::from_secs(30),
            dead_peer_timeout: Duration::from_secs(60),
            close_timeout: Duration::from_secs(1),
        }
    }

    fn core(&self, seed: u64) -> rtm::LinkConfig {
        rtm::LinkConfig {
            ping_interval: std_duration(self.ping_interval),
            dead_peer_timeout: std_duration(self.dead_peer_timeout),
            close_timeout: std_duration(self.close_timeout),
            user_agent: self.user_agent,
            seed,
        }
    }
}

/// The link's memory, kept by [`Messaging`] for its whole life (so `'static`: a
/// `static` array through `static_cell`, or a leaked box in tests), the core's
/// [`Buffers`](rtm::Buffers):
///
/// - `rx`: the largest incoming WebSocket message (a fragmented one is reassembled
///   here; a bigger one ends the connection with close code 1009).
/// - `tx`: bytes waiting to be written, coalesced: at least `outbox` +
///   [`MIN_TX_EXTRA`](rtm::MIN_TX_EXTRA) (512) bytes, and the upgrade request — the
///   request, then the `101` head in its place, use it before the first frame; more
///   lets more PDUs go out in one write.
/// - `queue`: requests waiting for the connection (each its body plus 18 bytes).
/// - `outbox`: PDUs on their way to `tx`; its size less 4 is the largest PDU sent.
/// - `subscription_args`: the views' queries and extra subscribe arguments, an equal
///   slot for each of `SUBS` subscriptions (empty when none has them).
///
/// The runner's own socket chunk is the argument of [`Messaging::run`].
pub type RunnerBuffers = rtm::Buffers<&'static mut [u8]>;

/// The core link with the runner's buffers.
type CoreLink<const SUBS: usize, const PENDING: usize> =
    Link<&'static mut [u8], [rtm::SubscriptionSlot; SUBS], [rtm::Pending; PENDING]>;

/// The core client with the runner's buffers.
type CoreClient<const SUBS: usize, const PENDING: usize> = Client<
    [rtm::SubscriptionSlot; SUBS],
    [rtm::Pending; PENDING],
    &'static mut [u8],
    &'static mut [u8],
    &'static mut [u8],
>;

/// One waiting acknowledged request.
struct Slot<const MSG: usize> {
    ticket: Ticket,
    reply: Option<Outcome<MSG>>,
}

struct Shared<const SUBS: usize, const PENDING: usize, const MSG: usize> {
    link: CoreLink<SUBS, PENDING>,
    slots: Vec<Slot<MSG>, PENDING>,
    waiters: MultiWakerRegistration<WAITERS>,
    subs: usize,
    lost: u32,
}

/// The messaging client shared by the runner and every task: put it in a static
/// (`StaticCell`) and pass `&'static Messaging` around.
///
/// Capacities: `SUBS` subscriptions, `PENDING` acknowledged requests in flight (and
/// tasks awaiting replies) (see [`Client`]); `EVENTS` events buffered for the
/// application, `MSG` bytes
/// of the largest message text delivered in an [`Event::Data`] or [`Outcome`].
/// `M` is the mutex flavour: `CriticalSectionRawMutex` to share across interrupt
/// executors, `NoopRawMutex` when everything runs in one executor.
pub struct Messaging<
    M: RawMutex,
    const SUBS: usize,
    const PENDING: usize,
    const EVENTS: usize,
    const MSG: usize,
> {
    shared: Mutex<M, RefCell<Shared<SUBS, PENDING, MSG>>>,
    events: Channel<M, Event<MSG>, EVENTS>,
    /// A task called into the client, or took an event: the runner has something to
    /// act on (output to write, room for the next chunk).
    wake: Signal<M, ()>,
}

impl<
        M: RawMutex,
        const SUBS: usize,
        const PENDING: usize,
        const EVENTS: usize,
        const MSG: usize,
    > core::fmt::Debug for Messaging<M, SUBS, PENDING, EVENTS, MSG>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Messaging")
            .field("state", &self.state())
            .field("events", &self.events.len())
            .finish_non_exhaustive()
    }
}

/// The core's clock, from embassy's.
fn now() -> CoreInstant {
    CoreInstant::from_micros(Instant::now().as_micros())
}

/// An embassy duration as a `core::time` one.
fn std_duration(d: Duration) -> core::time::Duration {
    core::time::Duration::from_micros(d.as_micros())
}

fn deadline(timeout: Option<Duration>) -> Option<CoreInstant> {
    timeout.map(|t| now().saturating_add(std_duration(t)))
}

/// `text` cut to at most `N` bytes at a character boundary.
fn truncated<const N: usize>(text: &str) -> String<N> {
    let mut end = text.len().min(N);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut s = String::new();
    let _ = s.push_str(text.get(..end).unwrap_or_default());
    s
}

/// The [`Handler`] the core reports to: turns borrowed events into owned ones.
struct EventCopier<'s, M: RawMutex, const PENDING: usize, const EVENTS: usize, const MSG: usize> {
    events: &'s Channel<M, Event<MSG>, EVENTS>,
    slots: &'s mut Vec<Slot<MSG>, PENDING>,
    subs: &'s mut usize,
    lost: &'s mut u32,
    /// Wake the tasks waiting for replies or states.
    notify: bool,
}

impl<M: RawMutex, const PENDING: usize, const EVENTS: usize, const MSG: usize>
    EventCopier<'_, M, PENDING, EVENTS, MSG>
{
    fn push(&mut self, event: Event<MSG>) {
        if *self.lost > 0 {
            if self
                .events
                .try_send(Event::Lost { count: *self.lost })
                .is_err()
            {
                *self.lost = self.lost.saturating_add(1);
                return;
            }
            *self.lost = 0;
        }
        if self.events.try_send(event).is_err() {
            *self.lost = self.lost.saturating_add(1);
        }
    }

    fn fill(&mut self, ticket: Ticket, reply: Outcome<MSG>) {
        if let Some(slot) = self.slots.iter_mut().find(|s| s.ticket == ticket) {
            slot.reply = Some(reply);
            self.notify = true;
        }
    }
}

fn body_reply<const MSG: usize>(pdu: &pdu::Pdu<'_>, ok: bool) -> Outcome<MSG> {
    // This adapter's links speak JSON, so every body is JSON text.
    let body = pdu.body.and_then(|b| b.raw().as_json()).unwrap_or("{}");
    match String::try_from(body) {
        Ok(text) if ok => Outcome::Ok(text),
        Ok(text) => Outcome::Error(text),
        Err(()) => Outcome::TooLarge { len: body.len() },
    }
}

impl<M: RawMutex, const PENDING: usize, const EVENTS: usize, const MSG: usize> Handler
    for EventCopier<'_, M, PENDING, EVENTS, MSG>
{
    fn client_state(&mut self, _leave: ClientState, enter: ClientState) {
        self.notify = true;
        self.push(Event::State(enter));
    }

    fn reply(&mut self, ticket: Ticket, outcome: rtm::Outcome<'_>) {
        let reply = match outcome {
            rtm::Outcome::Ok(pdu) => body_reply(&pdu, true),
            rtm::Outcome::Error(pdu) => body_reply(&pdu, false),
            // Search is not offered by this adapter; its intermediate data is dropped.
            rtm::Outcome::Data(_) => return,
            rtm::Outcome::Timeout => Outcome::Timeout,
            rtm::Outcome::Disconnected => Outcome::Disconnected,
        };
        self.fill(ticket, reply);
    }

    fn subscription_state(&mut self, key: &str, _leave: SubState, enter: SubState) {
        self.push(Event::Subscription {
            key: truncated(key),
            state: enter,
        });
    }

    fn subscription_failed(&mut self, key: &str, reason: FailReason<'_>) {
        self.push(Event::SubscriptionFailed {
            key: truncated(key),
            reason: truncated(reason.reason()),
        });
    }

    fn subscription_created(&mut self, _key: &str) {
        *self.subs = self.subs.saturating_add(1);
    }

    fn subscription_deleted(&mut self, key: &str) {
        *self.subs = self.subs.saturating_sub(1);
        self.push(Event::SubscriptionDeleted {
            key: truncated(key),
        });
    }

    fn subscription_data(&mut self, key: &str, data: pdu::SubscriptionData<'_>) {
        // This adapter's links speak JSON, so every message is JSON text.
        for raw in data.messages.elements().filter_map(|m| m.raw().as_json()) {
            let event = match String::try_from(raw) {
                Ok(message) => Event::Data {
                    key: truncated(key),
                    message,
                },
                Err(()) => Event::MessageTooLarge {
                    key: truncated(key),
                    len: raw.len(),
                },
            };
            self.push(event);
        }
    }

    fn fast_forward(&mut self, key: &str, _info: pdu::SubscriptionInfo<'_>) {
        self.push(Event::FastForward {
            key: truncated(key),
        });
    }

    fn internal_error(&mut self, error: InternalError<'_>) {
        self.push(Event::ProtocolError {
            fatal: error.is_fatal(),
        });
    }

    fn auth(&mut self, ticket: Ticket, result: AuthResult<'_>) {
        let reply = match result {
            AuthResult::Done => Outcome::Ok(String::new()),
            AuthResult::Rejected { error, .. } => {
                let text = error.reason.or(error.error).map(|s| s.as_raw());
                Outcome::Error(truncated(text.unwrap_or("rejected")))
            }
            AuthResult::Timeout => Outcome::Timeout,
            AuthResult::Disconnected => Outcome::Disconnected,
        };
        self.fill(ticket, reply);
    }

    fn link_closed(&mut self, why: Disconnect<'_>) {
        #[cfg(feature = "defmt")]
        defmt::warn!("rtm: connection ended: {}", why);
        self.push(Event::Disconnected(DisconnectReason::new(why)));
    }
}

impl<
        M: RawMutex,
        const SUBS: usize,
        const PENDING: usize,
        const EVENTS: usize,
        const MSG: usize,
    > Messaging<M, SUBS, PENDING, EVENTS, MSG>
{
    /// A client in `Stopped` for `link`'s endpoint, with the core's settings (backoff,
    /// restore, queue size, connect timeout; give every device its own `jitter_seed`).
    /// WebSocket masks and handshake keys come from a generator seeded from `rng` (the
    /// board's RNG peripheral, say).
    ///
    /// This adapter hands messages and reply bodies out as JSON text, so its links speak
    /// JSON whatever `config.encoding` says.
    ///
    /// Fails when the endpoint is not a `ws://` or `wss://` URL, the endpoint or appkey
    /// is too long, or `buffers.tx` is smaller than `buffers.outbox` + 512 bytes or the
    /// upgrade request.
    pub fn new<R: RngCore>(
        config: rtm::Config,
        link: MessagingConfig<'_>,
        buffers: RunnerBuffers,
        rng: &mut R,
    ) -> Result<Self, LinkError> {
        let config = rtm::Config {
            encoding: rtm::pdu::Encoding::Json,
            ..config
        };
        let core = Link::new(
            config,
            link.core(rng.next_u64()),
            link.endpoint,
            link.appkey,
            buffers,
            [rtm::SubscriptionSlot::EMPTY; SUBS],
            [rtm::Pending::EMPTY; PENDING],
        )?;
        Ok(Messaging {
            shared: Mutex::new(RefCell::new(Shared {
                link: core,
                slots: Vec::new(),
                waiters: MultiWakerRegistration::new(),
                subs: 0,
                lost: 0,
            })),
            events: Channel::new(),
            wake: Signal::new(),
        })
    }

    /// Runs `f` on the shared state; `None` only if called re-entrantly (never from
    /// this crate's code paths).
    fn with_shared<R>(&self, f: impl FnOnce(&mut Shared<SUBS, PENDING, MSG>) -> R) -> Option<R> {
        self.shared.lock(|cell| {
            let mut guard = cell.try_borrow_mut().ok()?;
            Some(f(&mut guard))
        })
    }

    /// Runs `f` on the core link with an event sink, then wakes waiting tasks if the
    /// call produced replies or state changes.
    fn with<R>(
        &self,
        f: impl FnOnce(&mut CoreLink<SUBS, PENDING>, &mut EventCopier<'_, M, PENDING, EVENTS, MSG>) -> R,
    ) -> Option<R> {
        self.with_shared(|s| {
            let mut sink = EventCopier {
                events: &self.events,
                slots: &mut s.slots,
                subs: &mut s.subs,
                lost: &mut s.lost,
                notify: false,
            };
            let r = f(&mut s.link, &mut sink);
            if sink.notify {
                s.waiters.wake();
            }
            r
        })
    }

    /// Calls into the client on behalf of a task and lets the runner act on the result.
    fn command<R>(
        &self,
        f: impl FnOnce(
            &mut CoreClient<SUBS, PENDING>,
            &mut EventCopier<'_, M, PENDING, EVENTS, MSG>,
        ) -> Result<R, RequestError>,
    ) -> Result<R, RequestError> {
        let r = self
            .with(|link, h| f(link.client_mut(), h))
            .unwrap_or(Err(RequestError::Full));
        self.wake.signal(());
        r
    }

    /// Start connecting (and reconnecting after drops) — the runner does the work.
    pub fn start(&self) {
        let _ = self.command(|c, h| {
            c.start(now(), h);
            Ok(())
        });
    }

    /// Close the connection and stop reconnecting; queued requests and subscriptions
    /// are kept for the next [`start`](Self::start).
    pub fn stop(&self) {
        let _ = self.command(|c, h| {
            c.stop(now(), h);
            Ok(())
        });
    }

    /// The client's state.
    pub fn state(&self) -> ClientState {
        self.with_shared(|s| s.link.client().state())
            .unwrap_or(ClientState::Stopped)
    }

    /// Waits until the client is in `state`.
    pub async fn wait_for_state(&self, state: ClientState) {
        poll_fn(|cx| {
            let now_in = self.with_shared(|s| {
                let current = s.link.client().state();
                if current != state {
                    s.waiters.register(cx.waker());
                }
                current
            });
            if now_in == Some(state) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// Publish `message_json` (one JSON value) to `channel` without asking for an
    /// acknowledgement. Queued while offline.
    pub fn publish(&self, channel: &str, message_json: &str) -> Result<(), RequestError> {
        self.command(|c, h| {
            c.publish(now(), channel, message_json, Ack::None, h)
                .map(|_| ())
        })
    }

    /// Publish and wait for the server's reply (its body has `position`), or for
    /// `timeout` to pass.
    pub async fn publish_acked(
        &self,
        channel: &str,
        message_json: &str,
        timeout: Option<Duration>,
    ) -> Result<Outcome<MSG>, RequestError> {
        let ack = Ack::Reply {
            deadline: deadline(timeout),
        };
        self.acked(|c, h| c.publish(now(), channel, message_json, ack, h))
            .await
    }

    /// [`publish`](Self::publish) of a typed message (feature `serde`): `message` is
    /// serialized as JSON straight into the core's outbox or offline-queue record, escaped
    /// like every string the core writes (see
    /// [`Client::publish_typed`](benchlink_core::rtm::Client::publish_typed) for the
    /// errors).
    ///
    /// ```
    /// use benchlink_embassy::rtm::{MessagingConfig, Messaging, RunnerBuffers};
    /// use benchlink_embassy::core::rtm::Config;
    /// use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
    ///
    /// #[derive(serde::Serialize)]
    /// struct Sample<'a> { ts: u64, metric: &'a str, value: i32 }
    ///
    /// # struct Rng(u64);
    /// # impl rand_core::RngCore for Rng {
    /// #     fn next_u32(&mut self) -> u32 { self.next_u64() as u32 }
    /// #     fn next_u64(&mut self) -> u64 { self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1); self.0 }
    /// #     fn fill_bytes(&mut self, dst: &mut [u8]) { for b in dst { *b = self.next_u64() as u8 } }
    /// # }
    /// let buf = |n: usize| -> &'static mut [u8] { Box::leak(vec![0; n].into_boxed_slice()) };
    /// let buffers = RunnerBuffers {
    ///     rx: buf(1024), tx: buf(512 + 1024), queue: buf(512), outbox: buf(512), subscription_args: buf(0),
    /// };
    /// let rtm: Messaging<CriticalSectionRawMutex, 1, 4, 4, 256> =
    ///     Messaging::new(Config::default(), MessagingConfig::new("ws://10.0.0.1:8080", "KEY"), buffers, &mut Rng(7))
    ///         .unwrap();
    /// // Not started: queued (already serialized) until the runner connects.
    /// rtm.publish_typed("metrics", &Sample { ts: 1, metric: "rx \"eth0\"", value: 3 }).unwrap();
    /// ```
    #[cfg(feature = "serde")]
    pub fn publish_typed<T: serde::Serialize + ?Sized>(
        &self,
        channel: &str,
        message: &T,
    ) -> Result<(), RequestError> {
        self.command(|c, h| {
            c.publish_typed(now(), channel, message, Ack::None, h)
                .map(|_| ())
        })
    }

    /// [`publish_acked`](Self::publish_acked) of a typed message (feature `serde`),
    /// serialized like [`publish_typed`](Self::publish_typed).
    ///
    /// ```no_run
    /// # use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex as Raw;
    /// # async fn f(rtm: &benchlink_embassy::rtm::Messaging<Raw, 1, 4, 4, 256>) {
    /// let timeout = Some(embassy_time::Duration::from_secs(5));
    /// let reply = rtm.publish_acked_typed("metrics", &("rx", 3), timeout).await;
    /// assert!(reply.is_ok_and(|r| r.is_ok()));
    /// # }
    /// ```
    #[cfg(feature = "serde")]
    pub async fn publish_acked_typed<T: serde::Serialize + ?Sized>(
        &self,
        channel: &str,
        message: &T,
        timeout: Option<Duration>,
    ) -> Result<Outcome<MSG>, RequestError> {
        let ack = Ack::Reply {
            deadline: deadline(timeout),
        };
        self.acked(|c, h| c.publish_typed(now(), channel, message, ack, h))
            .await
    }

    /// [`write`](Self::write) of a typed value (feature `serde`), serialized like
    /// [`publish_typed`](Self::publish_typed).
    ///
    /// ```no_run
    /// # use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex as Raw;
    /// # async fn f(rtm: &benchlink_embassy::rtm::Messaging<Raw, 1, 4, 4, 256>) {
    /// let timeout = Some(embassy_time::Duration::from_secs(5));
    /// let reply = rtm.write_typed("config", &("mode", [1, 2]), timeout).await;
    /// assert!(reply.is_ok_and(|r| r.is_ok()));
    /// # }
    /// ```
    #[cfg(feature = "serde")]
    pub async fn write_typed<T: serde::Serialize + ?Sized>(
        &self,
        channel: &str,
        value: &T,
        timeout: Option<Duration>,
    ) -> Result<Outcome<MSG>, RequestError> {
        let ack = Ack::Reply {
            deadline: deadline(timeout),
        };
        self.acked(|c, h| c.write_typed(now(), channel, value, ack, h))
            .await
    }

    /// Read the value of `channel` (the reply's body has `message`, `null` when never
    /// written).
    pub async fn read(
        &self,
        channel: &str,
        timeout: Option<Duration>,
    ) -> Result<Outcome<MSG>, RequestError> {
        let at = deadline(timeout);
        self.acked(|c, h| c.read(now(), channel, None, at, h).map(Some))
            .await
    }

    /// Write `value_json` as the value of `channel` and wait for the reply.
    pub async fn write(
        &self,
        channel: &str,
        value_json: &str,
        timeout: Option<Duration>,
    ) -> Result<Outcome<MSG>, RequestError> {
        let ack = Ack::Reply {
            deadline: deadline(timeout),
        };
        self.acked(|c, h| c.write(now(), channel, value_json, ack, h))
            .await
    }

    /// Delete the value of `channel` and wait for the reply.
    pub async fn delete(
        &self,
        channel: &str,
        timeout: Option<Duration>,
    ) -> Result<Outcome<MSG>, RequestError> {
        let ack = Ack::Reply {
            deadline: deadline(timeout),
        };
        self.acked(|c, h| c.delete(now(), channel, ack, h)).await
    }

    /// Authenticate as `role` (role-secret authentication: a handshake, then the HMAC-MD5 of the server's nonce). On
    /// success the credentials are replayed after every reconnect. `Outcome::Ok` means
    /// done; `Outcome::Error` carries the server's reason.
    pub async fn authenticate(
        &self,
        role: &str,
        secret: &[u8],
        timeout: Option<Duration>,
    ) -> Result<Outcome<MSG>, RequestError> {
        let at = deadline(timeout);
        self.acked(|c, h| c.authenticate(now(), role, secret, at, h).map(Some))
            .await
    }

    /// Subscribe to `channel_or_id` (with `args.filter`, a view keyed by this id). The
    /// subscription is made whenever connected and restored after reconnects; its data
    /// and state changes arrive as [`Event`]s.
    pub fn subscribe(
        &self,
        channel_or_id: &str,
        mode: Mode,
        args: SubscribeArgs<'_>,
    ) -> Result<(), RequestError> {
        self.command(|c, h| c.subscribe(now(), channel_or_id, mode, args, h))
    }

    /// Unsubscribe; [`Event::SubscriptionDeleted`] reports completion.
    pub fn unsubscribe(&self, channel_or_id: &str) -> Result<(), RequestError> {
        self.command(|c, h| c.unsubscribe(now(), channel_or_id, h))
    }

    /// The next event (subscription data, state changes, problems).
    pub async fn next_event(&self) -> Event<MSG> {
        let event = self.events.receive().await;
        self.wake.signal(());
        event
    }

    /// The next event if one is waiting.
    pub fn try_next_event(&self) -> Option<Event<MSG>> {
        let event = self.events.try_receive().ok()?;
        self.wake.signal(());
        Some(event)
    }

    /// Submits an acknowledged request and waits for its outcome. The reply slot is
    /// reserved first (so a reply can never find no slot) and released if the waiting
    /// future is dropped.
    async fn acked(
        &self,
        submit: impl FnOnce(
            &mut CoreClient<SUBS, PENDING>,
            &mut EventCopier<'_, M, PENDING, EVENTS, MSG>,
        ) -> Result<Option<Ticket>, RequestError>,
    ) -> Result<Outcome<MSG>, RequestError> {
        let ticket = self.command(|c, h| {
            if h.slots.is_full() {
                return Err(RequestError::Full);
            }
            let ticket = submit(c, h)?.ok_or(RequestError::Full)?;
            h.slots
                .push(Slot {
                    ticket,
                    reply: None,
                })
                .map_err(|_| RequestError::Full)?;
            Ok(ticket)
        })?;
        let _release = SlotGuard {
            messaging: self,
            ticket,
        };
        let reply = poll_fn(|cx| {
            let reply = self.with_shared(|s| {
                let at = s.slots.iter().position(|slot| slot.ticket == ticket)?;
                let ready = s.slots.get(at).is_some_and(|slot| slot.reply.is_some());
                if ready {
                    s.slots.swap_remove(at).reply
                } else {
                    s.waiters.register(cx.waker());
                    None
                }
            });
            match reply.flatten() {
                Some(reply) => Poll::Ready(reply),
                None => Poll::Pending,
            }
        })
        .await;
        Ok(reply)
    }
}

/// Frees a reply slot whose waiter went away (the future was dropped).
struct SlotGuard<
    'm,
    M: RawMutex,
    const SUBS: usize,
    const PENDING: usize,
    const EVENTS: usize,
    const MSG: usize,
> {
    messaging: &'m Messaging<M, SUBS, PENDING, EVENTS, MSG>,
    ticket: Ticket,
}

impl<
        M: RawMutex,
        const SUBS: usize,
        const PENDING: usize,
        const EVENTS: usize,
        const MSG: usize,
    > Drop for SlotGuard<'_, M, SUBS, PENDING, EVENTS, MSG>
{
    fn drop(&mut self) {
        let ticket = self.ticket;
        let _ = self
            .messaging
            .with_shared(|s| s.slots.retain(|slot| slot.ticket != ticket));
    }
}

fn connect_error(e: TransportError) -> rtm::ConnectError {
    match e {
        TransportError::Dns => rtm::ConnectError::Resolve,
        TransportError::Refused => rtm::ConnectError::Io { code: 111 },
        TransportError::TimedOut => rtm::ConnectError::Timeout,
        TransportError::NoRoute => rtm::ConnectError::Io { code: 113 },
        TransportError::InvalidState => rtm::ConnectError::Other { code: 1 },
        TransportError::TlsUnsupported => rtm::ConnectError::Tls,
    }
}

/// An instant of the core's clock on embassy's (`None`: never).
fn embassy_instant(at: Option<CoreInstant>) -> Instant {
    at.map_or(Instant::MAX, |t| Instant::from_micros(t.as_micros()))
}

/// What the runner does next, as the link said.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Open the transport to the host the runner copied, this port.
    Connect(u16),
    /// Write the first `n` bytes of the chunk (a copy of the link's unsent bytes).
    Write(usize),
    /// Close the transport.
    Close,
    /// Nothing to write: read (when connected and there is room for events) until the
    /// next deadline or a call.
    Wait,
}

/// How the socket operation the runner waited on ended.
enum Io<E> {
    Wrote(Result<usize, E>),
    Read(Result<usize, E>),
}

impl<
        M: RawMutex,
        const SUBS: usize,
        const PENDING: usize,
        const EVENTS: usize,
        const MSG: usize,
    > Messaging<M, SUBS, PENDING, EVENTS, MSG>
{
    /// The runner: owns `transport` and carries the link's bytes forever — opens the
    /// socket when the link asks, writes what it emits, feeds it what arrives, closes
    /// when it says, and sleeps until its next deadline, the socket or a call. Every
    /// protocol decision and timer is the core's. Run it in its own task; nothing
    /// happens until [`start`](Self::start).
    ///
    /// `chunk` (512 B – 2 KiB; not empty) holds one socket read, or a slice of the
    /// link's unsent bytes on its way to the socket: the transport is used for one
    /// operation at a time. A bigger chunk means fewer wake-ups, and more events from
    /// one read (see the module's notes on delivery).
    pub async fn run<T: Transport>(&self, mut transport: T, chunk: &mut [u8]) -> ! {
        let mut host: String<MAX_ENDPOINT_LEN> = String::new();
        // The transport is open (a connect succeeded and no close followed).
        let mut connected = false;
        // After a write (or a write the socket did not take), input already waiting is
        // read before the next write: a peer sending and receiving at once is served both
        // ways.
        let mut read_first = false;
        loop {
            let (step, wake_at) = self
                .with(|link, h| {
                    let now = now();
                    // Input left in the socket for want of event room proves the server
                    // alive: it is slowed down, not dead.
                    if connected && transport.readable() && !self.room_for_events(*h.subs) {
                        link.handle_input_held(now);
                    }
                    if link.poll_timeout().is_some_and(|at| at <= now) {
                        link.handle_timeout(now, h);
                    }
                    let step = loop {
                        match link.poll_output(now) {
                            Some(Output::Connect { tls: true, .. }) => {
                                link.handle_connect_failed(now, rtm::ConnectError::Tls, h);
                            }
                            Some(Output::Connect {
                                host: name, port, ..
                            }) => {
                                host.clear();
                                // Never too long: it is part of the endpoint.
                                let _ = host.push_str(name);
                                break Step::Connect(port);
                            }
                            Some(Output::Transmit(bytes)) => {
                                if read_first
                                    && transport.readable()
                                    && self.room_for_events(*h.subs)
                                {
                                    break Step::Wait;
                                }
                                let n = bytes.len().min(chunk.len());
                                if let (Some(dst), Some(src)) = (chunk.get_mut(..n), bytes.get(..n))
                                {
                                    dst.copy_from_slice(src);
                                }
                                break Step::Write(n);
                            }
                            Some(Output::Close) => break Step::Close,
                            None => break Step::Wait,
                        }
                    };
                    (step, link.poll_timeout())
                })
                .unwrap_or((Step::Wait, None));
            match step {
                Step::Connect(port) => connected = self.connect(&mut transport, &host, port).await,
                Step::Close => {
                    connected = false;
                    self.closed(&mut transport).await;
                }
                Step::Write(_) | Step::Wait => {
                    let read = connected
                        && self
                            .with_shared(|s| self.room_for_events(s.subs))
                            .unwrap_or(true);
                    let io = async {
                        match step {
                            Step::Write(n) if n > 0 => {
                                let bytes = chunk.get(..n).unwrap_or_default();
                                Io::Wrote(transport.write(bytes).await)
                            }
                            Step::Wait if read => Io::Read(transport.read(chunk).await),
                            // No room: the app takes an event first (a wake). An empty
                            // chunk never writes: the link sees a stalled write.
                            _ => core::future::pending().await,
                        }
                    };
                    match select3(io, Timer::at(embassy_instant(wake_at)), self.wake.wait()).await {
                        Either3::First(Io::Wrote(Ok(n))) if n > 0 => {
                            read_first = true;
                            let _ = self.with(|link, _| link.transmitted(now(), n));
                        }
                        Either3::First(Io::Read(Ok(n))) if n > 0 => {
                            read_first = false;
                            let input = chunk.get(..n).unwrap_or_default();
                            let _ = self.with(|link, h| link.handle_input(now(), input, h));
                        }
                        // End of stream or a socket error.
                        Either3::First(_) => {
                            connected = false;
                            self.closed(&mut transport).await;
                        }
                        // A deadline or a call: the next round acts on it. A write that
                        // did not get through lets waiting input in first.
                        Either3::Second(()) | Either3::Third(()) => {
                            read_first |= matches!(step, Step::Write(_));
                        }
                    }
                }
            }
        }
    }

    /// While at least one subscription exists, the next chunk is read only when half the
    /// event channel is free.
    fn room_for_events(&self, subs: usize) -> bool {
        subs == 0 || self.events.free_capacity() >= EVENTS.div_ceil(2).max(1)
    }

    /// Opens the transport for the link; true when it is open. The attempt is abandoned
    /// when the link gives it up (its connect timeout, or a stop).
    async fn connect<T: Transport>(&self, transport: &mut T, host: &str, port: u16) -> bool {
        let result = {
            let mut attempt = pin!(transport.connect(host, port));
            loop {
                let at = self.with_shared(|s| s.link.poll_timeout()).flatten();
                match select3(
                    &mut attempt,
                    Timer::at(embassy_instant(at)),
                    self.wake.wait(),
                )
                .await
                {
                    Either3::First(result) => break Some(result),
                    Either3::Second(()) | Either3::Third(()) => {
                        let abandon = self.with(|link, h| {
                            let now = now();
                            if link.poll_timeout().is_some_and(|at| at <= now) {
                                link.handle_timeout(now, h);
                            }
                            matches!(link.poll_output(now), Some(Output::Close))
                        });
                        if abandon == Some(true) {
                            break None;
                        }
                    }
                }
            }
        };
        match result {
            Some(Ok(())) => {
                let _ = self.with(|link, h| link.handle_connected(now(), h));
                true
            }
            Some(Err(e)) => {
                transport.close().await;
                let _ = self.with(|link, h| link.handle_connect_failed(now(), connect_error(e), h));
                false
            }
            None => {
                self.closed(transport).await;
                false
            }
        }
    }

    /// Closes the transport (asked for, or it ended by itself) and tells the link.
    async fn closed<T: Transport>(&self, transport: &mut T) {
        transport.close().await;
        let _ = self.with(|link, h| link.handle_closed(now(), h));
    }
}

//! The async messaging (RTM) client: [`Messaging`] holds the core's sans-IO
//! [`Client`](benchlink_core::rtm::Client) behind a blocking mutex, and
//! [`Messaging::run`] is the runner future that owns the socket and drives it.
//!
//! ```text
//!  tasks ── &Messaging: publish / read / write / delete / subscribe / authenticate ──┐
//!    ▲          (lock, call the core, wake the runner)                               │
//!    │                                                                               ▼
//!    └── next_event(): Channel<Event>  ◀── Handler ── core Client ◀── Messaging::run
//!        replies: per-ticket slots + wakers                            (TCP → upgrade → ws::Session,
//!                                                                       timers: embassy_time)
//! ```
//!
//! A `&Messaging` is the cheap handle: `Copy`, shareable between tasks. The core is the
//! single source of truth (reconnect with backoff, auth restore, resubscription, offline
//! queue, deadlines); this module only moves bytes, converts time, and turns the core's
//! borrowed events into owned, fixed-capacity [`Event`]s.
//!
//! Delivery: events go into a bounded channel of `EVENTS` slots. While any subscription
//! exists the runner processes the next WebSocket frame only when at least half the
//! channel is free (so a slow consumer slows the connection down through TCP flow
//! control instead of losing data); events that still do not fit (a frame with more
//! messages than free slots, or state events nobody reads) are counted and reported as
//! [`Event::Lost`]. So: if you subscribe, keep calling [`Messaging::next_event`].

use core::cell::RefCell;
use core::future::poll_fn;
use core::task::Poll;

use benchlink_core::http::{Cursor, Event as HttpEvent, Limits, ResponseDecoder};
use benchlink_core::rtm::{
    self, pdu, Ack, AuthResult, Client, ClientState, FailReason, Handler, InternalError, Mode,
    Outcome, RequestError, SubState, SubscribeArgs, Ticket, Transmit,
};
use benchlink_core::time::Instant as CoreInstant;
use benchlink_core::ws::{
    check_response, CloseCode, Endpoint, HandshakeError, Key, MaskSource, Message, Session,
    State as WsState, UpgradeRequest,
};
use embassy_futures::select::{select3, Either3};
use embassy_sync::blocking_mutex::raw::RawMutex;
use embassy_sync::blocking_mutex::Mutex;
use embassy_sync::channel::Channel;
use embassy_sync::signal::Signal;
use embassy_sync::waitqueue::MultiWakerRegistration;
use embassy_time::{with_timeout, Duration, Instant, Timer};
use heapless::{String, Vec};
use rand_core::RngCore;

use crate::transport::{ConnectError as TransportError, Transport};

/// Longest subscription key (channel name or subscription id) an [`Event`] carries;
/// longer keys are truncated (at a character boundary).
pub const MAX_KEY: usize = 64;

/// Longest failure reason an [`Event::SubscriptionFailed`] carries (truncated).
pub const MAX_REASON: usize = 64;

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
    /// This many events did not fit in the channel and were dropped.
    Lost {
        /// How many.
        count: u32,
    },
}

/// How an acknowledged request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Reply<const MSG: usize> {
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

impl<const MSG: usize> Reply<MSG> {
    /// True for [`Reply::Ok`].
    pub fn is_ok(&self) -> bool {
        matches!(self, Reply::Ok(_))
    }

    /// Member `name` of an `Ok` or `Error` body as raw JSON text (a string keeps its
    /// quotes): `reply.member("position")`.
    pub fn member(&self, name: &str) -> Option<&str> {
        let (Reply::Ok(body) | Reply::Error(body)) = self else {
            return None;
        };
        benchlink_core::json::parse(body, benchlink_core::json::DEFAULT_MAX_DEPTH)
            .ok()?
            .get(name)
            .map(|v| v.as_raw())
    }
}

/// Where and how the runner connects, and its liveness checks.
#[derive(Debug, Clone, Copy)]
pub struct LinkConfig<'a> {
    /// `ws://host[:port][/path]` (`wss://` needs TLS, which this crate does not do).
    pub endpoint: &'a str,
    /// The application key.
    pub appkey: &'a str,
    /// A `User-Agent` for the upgrade request.
    pub user_agent: Option<&'a str>,
    /// DNS, TCP connect and the WebSocket upgrade together (default 10 s).
    pub connect_timeout: Duration,
    /// Send a WebSocket ping after this much silence from the server (default 30 s).
    pub ping_interval: Duration,
    /// Declare the server dead after this much silence and reconnect (default 60 s).
    pub dead_peer_timeout: Duration,
}

impl<'a> LinkConfig<'a> {
    /// Defaults for `endpoint` and `appkey`.
    pub const fn new(endpoint: &'a str, appkey: &'a str) -> Self {
        LinkConfig {
            endpoint,
            appkey,
            user_agent: Some(concat!("benchlink-embassy/", env!("CARGO_PKG_VERSION"))),
            connect_timeout: Duration::from_secs(10),
            ping_interval: Duration::from_secs(30),
            dead_peer_timeout: Duration::from_secs(60),
        }
    }
}

/// The runner's memory:
///
/// - `rx`: socket reads (512 B – 2 KiB).
/// - `tx`: one outgoing frame: at least `OUT` + 14 bytes (and the ~300-byte upgrade
///   request).
/// - `head`: the `101 Switching Protocols` head (512 B).
/// - `message`: the largest incoming WebSocket message (a whole PDU, reassembled).
#[derive(Debug)]
pub struct RunnerBuffers<'a> {
    /// Socket reads.
    pub rx: &'a mut [u8],
    /// Outgoing frames.
    pub tx: &'a mut [u8],
    /// The upgrade response head.
    pub head: &'a mut [u8],
    /// Incoming messages.
    pub message: &'a mut [u8],
}

/// One waiting acknowledged request.
struct Slot<const MSG: usize> {
    ticket: Ticket,
    reply: Option<Reply<MSG>>,
}

struct Shared<
    const SUBS: usize,
    const PENDING: usize,
    const QUEUE: usize,
    const OUT: usize,
    const MSG: usize,
> {
    client: Client<SUBS, PENDING, QUEUE, OUT>,
    slots: Vec<Slot<MSG>, PENDING>,
    waiters: MultiWakerRegistration<WAITERS>,
    subs: usize,
    lost: u32,
}

/// The messaging client shared by the runner and every task: put it in a static
/// (`StaticCell`) and pass `&'static Messaging` around.
///
/// Capacities: `SUBS` subscriptions, `PENDING` acknowledged requests in flight (and
/// tasks awaiting replies), `QUEUE` bytes of offline queue, `OUT` bytes of the largest
/// PDU sent (see [`Client`]); `EVENTS` events buffered for the application, `MSG` bytes
/// of the largest message text delivered in an [`Event::Data`] or [`Reply`].
/// `M` is the mutex flavour: `CriticalSectionRawMutex` to share across interrupt
/// executors, `NoopRawMutex` when everything runs in one executor.
pub struct Messaging<
    M: RawMutex,
    const SUBS: usize,
    const PENDING: usize,
    const QUEUE: usize,
    const OUT: usize,
    const EVENTS: usize,
    const MSG: usize,
> {
    shared: Mutex<M, RefCell<Shared<SUBS, PENDING, QUEUE, OUT, MSG>>>,
    events: Channel<M, Event<MSG>, EVENTS>,
    /// A task called into the client: the runner has output to act on.
    wake: Signal<M, ()>,
    /// The application took an event: the runner may process the next frame.
    space: Signal<M, ()>,
}

impl<
        M: RawMutex,
        const SUBS: usize,
        const PENDING: usize,
        const QUEUE: usize,
        const OUT: usize,
        const EVENTS: usize,
        const MSG: usize,
    > core::fmt::Debug for Messaging<M, SUBS, PENDING, QUEUE, OUT, EVENTS, MSG>
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

fn deadline(timeout: Option<Duration>) -> Option<CoreInstant> {
    timeout.map(|t| now().saturating_add(core::time::Duration::from_micros(t.as_micros())))
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
struct Sink<'s, M: RawMutex, const PENDING: usize, const EVENTS: usize, const MSG: usize> {
    events: &'s Channel<M, Event<MSG>, EVENTS>,
    slots: &'s mut Vec<Slot<MSG>, PENDING>,
    subs: &'s mut usize,
    lost: &'s mut u32,
    /// Wake the tasks waiting for replies or states.
    notify: bool,
}

impl<M: RawMutex, const PENDING: usize, const EVENTS: usize, const MSG: usize>
    Sink<'_, M, PENDING, EVENTS, MSG>
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

    fn fill(&mut self, ticket: Ticket, reply: Reply<MSG>) {
        if let Some(slot) = self.slots.iter_mut().find(|s| s.ticket == ticket) {
            slot.reply = Some(reply);
            self.notify = true;
        }
    }
}

fn body_reply<const MSG: usize>(pdu: &pdu::Pdu<'_>, ok: bool) -> Reply<MSG> {
    let body = pdu.body.map(|b| b.as_raw()).unwrap_or("{}");
    match String::try_from(body) {
        Ok(text) if ok => Reply::Ok(text),
        Ok(text) => Reply::Error(text),
        Err(()) => Reply::TooLarge { len: body.len() },
    }
}

impl<M: RawMutex, const PENDING: usize, const EVENTS: usize, const MSG: usize> Handler
    for Sink<'_, M, PENDING, EVENTS, MSG>
{
    fn client_state(&mut self, _leave: ClientState, enter: ClientState) {
        self.notify = true;
        self.push(Event::State(enter));
    }

    fn reply(&mut self, ticket: Ticket, outcome: Outcome<'_>) {
        let reply = match outcome {
            Outcome::Ok(pdu) => body_reply(&pdu, true),
            Outcome::Error(pdu) => body_reply(&pdu, false),
            // Search is not offered by this adapter; its intermediate data is dropped.
            Outcome::Data(_) => return,
            Outcome::Timeout => Reply::Timeout,
            Outcome::Disconnected => Reply::Disconnected,
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
        for message in data.messages.elements() {
            let raw = message.as_raw();
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
            AuthResult::Done => Reply::Ok(String::new()),
            AuthResult::Rejected { error, .. } => {
                let text = error.reason.or(error.error).map(|s| s.as_raw());
                Reply::Error(truncated(text.unwrap_or("rejected")))
            }
            AuthResult::Timeout => Reply::Timeout,
            AuthResult::Disconnected => Reply::Disconnected,
        };
        self.fill(ticket, reply);
    }
}

/// WebSocket masks from the caller's RNG (shared with the handshake nonce).
struct Masks<'r, R>(&'r RefCell<R>);

impl<R: RngCore> MaskSource for Masks<'_, R> {
    fn next_mask(&mut self) -> [u8; 4] {
        match self.0.try_borrow_mut() {
            Ok(mut rng) => rng.next_u32().to_le_bytes(),
            // Never contended: the runner uses the RNG from one place at a time.
            Err(_) => [0x5a, 0xc3, 0x3c, 0xa5],
        }
    }
}

/// What the runner does after asking the client.
enum Action {
    Idle,
    Connect,
    Write(usize),
    Close,
}

/// The runner's view of the current connection.
struct Link {
    open: bool,
    /// Unprocessed input: `rx[start..end]`.
    start: usize,
    end: usize,
    last_rx: Instant,
    ping_sent: bool,
}

impl<
        M: RawMutex,
        const SUBS: usize,
        const PENDING: usize,
        const QUEUE: usize,
        const OUT: usize,
        const EVENTS: usize,
        const MSG: usize,
    > Messaging<M, SUBS, PENDING, QUEUE, OUT, EVENTS, MSG>
{
    /// A client in `Stopped`, with the core's settings (backoff, restore, queue size;
    /// give every device its own `jitter_seed`).
    pub fn new(config: rtm::Config) -> Self {
        Messaging {
            shared: Mutex::new(RefCell::new(Shared {
                client: Client::new(config),
                slots: Vec::new(),
                waiters: MultiWakerRegistration::new(),
                subs: 0,
                lost: 0,
            })),
            events: Channel::new(),
            wake: Signal::new(),
            space: Signal::new(),
        }
    }

    /// Runs `f` on the shared state; `None` only if called re-entrantly (never from
    /// this crate's code paths).
    fn with_shared<R>(
        &self,
        f: impl FnOnce(&mut Shared<SUBS, PENDING, QUEUE, OUT, MSG>) -> R,
    ) -> Option<R> {
        self.shared.lock(|cell| {
            let mut guard = cell.try_borrow_mut().ok()?;
            Some(f(&mut guard))
        })
    }

    /// Runs `f` on the core client with an event sink, then wakes waiting tasks if the
    /// call produced replies or state changes.
    fn with<R>(
        &self,
        f: impl FnOnce(
            &mut Client<SUBS, PENDING, QUEUE, OUT>,
            &mut Sink<'_, M, PENDING, EVENTS, MSG>,
        ) -> R,
    ) -> Option<R> {
        self.with_shared(|s| {
            let mut sink = Sink {
                events: &self.events,
                slots: &mut s.slots,
                subs: &mut s.subs,
                lost: &mut s.lost,
                notify: false,
            };
            let r = f(&mut s.client, &mut sink);
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
            &mut Client<SUBS, PENDING, QUEUE, OUT>,
            &mut Sink<'_, M, PENDING, EVENTS, MSG>,
        ) -> Result<R, RequestError>,
    ) -> Result<R, RequestError> {
        let r = self.with(f).unwrap_or(Err(RequestError::Full));
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
        self.with_shared(|s| s.client.state())
            .unwrap_or(ClientState::Stopped)
    }

    /// Waits until the client is in `state`.
    pub async fn wait_for_state(&self, state: ClientState) {
        poll_fn(|cx| {
            let now_in = self.with_shared(|s| {
                let current = s.client.state();
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
    ) -> Result<Reply<MSG>, RequestError> {
        let ack = Ack::Reply {
            deadline: deadline(timeout),
        };
        self.acked(|c, h| c.publish(now(), channel, message_json, ack, h))
            .await
    }

    /// Read the value of `channel` (the reply's body has `message`, `null` when never
    /// written).
    pub async fn read(
        &self,
        channel: &str,
        timeout: Option<Duration>,
    ) -> Result<Reply<MSG>, RequestError> {
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
    ) -> Result<Reply<MSG>, RequestError> {
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
    ) -> Result<Reply<MSG>, RequestError> {
        let ack = Ack::Reply {
            deadline: deadline(timeout),
        };
        self.acked(|c, h| c.delete(now(), channel, ack, h)).await
    }

    /// Authenticate as `role` (spec §4: handshake, then the HMAC-MD5 of the nonce). On
    /// success the credentials are replayed after every reconnect. `Reply::Ok` means
    /// done; `Reply::Error` carries the server's reason.
    pub async fn authenticate(
        &self,
        role: &str,
        secret: &[u8],
        timeout: Option<Duration>,
    ) -> Result<Reply<MSG>, RequestError> {
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
        self.space.signal(());
        event
    }

    /// The next event if one is waiting.
    pub fn try_next_event(&self) -> Option<Event<MSG>> {
        let event = self.events.try_receive().ok()?;
        self.space.signal(());
        Some(event)
    }

    /// Submits an acknowledged request and waits for its outcome. The reply slot is
    /// reserved first (so a reply can never find no slot) and released if the waiting
    /// future is dropped.
    async fn acked(
        &self,
        submit: impl FnOnce(
            &mut Client<SUBS, PENDING, QUEUE, OUT>,
            &mut Sink<'_, M, PENDING, EVENTS, MSG>,
        ) -> Result<Option<Ticket>, RequestError>,
    ) -> Result<Reply<MSG>, RequestError> {
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
    const QUEUE: usize,
    const OUT: usize,
    const EVENTS: usize,
    const MSG: usize,
> {
    messaging: &'m Messaging<M, SUBS, PENDING, QUEUE, OUT, EVENTS, MSG>,
    ticket: Ticket,
}

impl<
        M: RawMutex,
        const SUBS: usize,
        const PENDING: usize,
        const QUEUE: usize,
        const OUT: usize,
        const EVENTS: usize,
        const MSG: usize,
    > Drop for SlotGuard<'_, M, SUBS, PENDING, QUEUE, OUT, EVENTS, MSG>
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

/// Writes and flushes one frame. A flush on TCP waits for the peer's acknowledgement, so
/// it is bounded: a peer that does not take a frame within `limit` is dead.
async fn write_frame<T: Transport>(transport: &mut T, bytes: &[u8], limit: Duration) -> bool {
    let write = async {
        embedded_io_async::Write::write_all(transport, bytes)
            .await
            .is_ok()
            && embedded_io_async::Write::flush(transport).await.is_ok()
    };
    with_timeout(limit, write).await.unwrap_or(false)
}

/// TCP, the upgrade request, and its 101; bytes read past the head stay in
/// `rx[link.start..link.end]` for the session.
async fn open<T: Transport, R: RngCore>(
    transport: &mut T,
    rng: &RefCell<R>,
    config: &LinkConfig<'_>,
    rx: &mut [u8],
    tx: &mut [u8],
    head: &mut [u8],
    link: &mut Link,
) -> Result<(), rtm::ConnectError> {
    let endpoint =
        Endpoint::parse(config.endpoint).map_err(|_| rtm::ConnectError::Other { code: 2 })?;
    if endpoint.tls {
        return Err(rtm::ConnectError::Tls);
    }
    transport
        .connect(endpoint.host, endpoint.port)
        .await
        .map_err(connect_error)?;
    let mut nonce = [0u8; 16];
    match rng.try_borrow_mut() {
        Ok(mut rng) => rng.fill_bytes(&mut nonce),
        Err(_) => return Err(rtm::ConnectError::Other { code: 3 }),
    }
    let key = Key::new(nonce);
    let request = UpgradeRequest {
        endpoint,
        appkey: config.appkey,
        key: &key,
        origin: None,
        protocol: None,
        user_agent: config.user_agent,
    };
    let mut out = Cursor::new(tx);
    request
        .encode(&mut out)
        .map_err(|_| rtm::ConnectError::Other { code: 4 })?;
    if !write_frame(transport, out.written(), config.connect_timeout).await {
        return Err(rtm::ConnectError::Closed);
    }
    let mut decoder: ResponseDecoder<'_, 16> = ResponseDecoder::new(head, None, Limits::DEFAULT);
    link.start = 0;
    link.end = 0;
    loop {
        let input = rx.get(link.start..link.end).unwrap_or_default();
        let (used, event) = decoder
            .decode(input)
            .map_err(|_| rtm::ConnectError::Protocol)?;
        link.start += used;
        match event {
            HttpEvent::Head(h) => {
                return match check_response(&h, &key, None) {
                    Ok(_) => Ok(()),
                    Err(HandshakeError::Status { status }) => {
                        Err(rtm::ConnectError::Rejected { status })
                    }
                    Err(_) => Err(rtm::ConnectError::Protocol),
                };
            }
            HttpEvent::NeedMore => {
                let n = embedded_io_async::Read::read(transport, rx)
                    .await
                    .map_err(|_| rtm::ConnectError::Closed)?;
                if n == 0 {
                    return Err(rtm::ConnectError::Closed);
                }
                link.start = 0;
                link.end = n;
            }
            HttpEvent::Data(_) | HttpEvent::End { .. } => return Err(rtm::ConnectError::Protocol),
        }
    }
}

impl<
        M: RawMutex,
        const SUBS: usize,
        const PENDING: usize,
        const QUEUE: usize,
        const OUT: usize,
        const EVENTS: usize,
        const MSG: usize,
    > Messaging<M, SUBS, PENDING, QUEUE, OUT, EVENTS, MSG>
{
    /// The runner: owns `transport` and drives the client forever — connect, upgrade,
    /// frames in and out, pings, reconnect timers. Run it in its own task; nothing
    /// happens until [`start`](Self::start). WebSocket masks and keys come from `rng`.
    pub async fn run<T: Transport, R: RngCore>(
        &self,
        mut transport: T,
        rng: R,
        config: LinkConfig<'_>,
        buffers: RunnerBuffers<'_>,
    ) -> ! {
        let RunnerBuffers {
            rx,
            tx,
            head,
            message,
        } = buffers;
        let rng = RefCell::new(rng);
        let mut session = Session::new(message, Masks(&rng));
        let mut link = Link {
            open: false,
            start: 0,
            end: 0,
            last_rx: Instant::now(),
            ping_sent: false,
        };
        loop {
            // 1. Everything the client asked for, in order.
            loop {
                let action = self
                    .with(|c, _| match c.poll_transmit() {
                        None => Action::Idle,
                        Some(Transmit::Connect) => Action::Connect,
                        Some(Transmit::Close) => Action::Close,
                        Some(Transmit::Send(pdu)) => {
                            let mut out = Cursor::new(tx);
                            match session.send_text(pdu, &mut out) {
                                Ok(()) if link.open => Action::Write(out.len()),
                                // No socket (or a closing one): the core re-sends what
                                // matters after the next connect.
                                _ => Action::Write(0),
                            }
                        }
                    })
                    .unwrap_or(Action::Idle);
                match action {
                    Action::Idle => break,
                    Action::Write(0) => {}
                    Action::Write(n) => {
                        let frame = tx.get(..n).unwrap_or_default();
                        if !write_frame(&mut transport, frame, config.dead_peer_timeout).await {
                            self.lose(&mut transport, &mut session, &mut link).await;
                        }
                    }
                    Action::Close => {
                        if link.open {
                            let _ = session.close(CloseCode::NORMAL, "");
                            if let Some(bytes) = session.poll_transmit() {
                                let _ =
                                    write_frame(&mut transport, bytes, config.dead_peer_timeout)
                                        .await;
                            }
                        }
                        self.lose(&mut transport, &mut session, &mut link).await;
                    }
                    Action::Connect => {
                        if link.open {
                            transport.close().await;
                            link.open = false;
                        }
                        session.reset();
                        let opened = with_timeout(
                            config.connect_timeout,
                            open(&mut transport, &rng, &config, rx, tx, head, &mut link),
                        )
                        .await
                        .unwrap_or(Err(rtm::ConnectError::Timeout));
                        link.last_rx = Instant::now();
                        link.ping_sent = false;
                        if opened.is_ok() {
                            link.open = true;
                        } else {
                            transport.close().await;
                            link.start = 0;
                            link.end = 0;
                        }
                        let _ = self.with(|c, h| match opened {
                            Ok(()) => c.handle_connected(now(), h),
                            Err(e) => c.handle_connect_failed(now(), e, h),
                        });
                    }
                }
            }

            if link.open {
                // 2. Pongs and close replies the session queued.
                if let Some(bytes) = session.poll_transmit() {
                    let n = bytes.len();
                    if write_frame(&mut transport, bytes, config.dead_peer_timeout).await {
                        session.advance_transmit(n);
                    } else {
                        self.lose(&mut transport, &mut session, &mut link).await;
                        continue;
                    }
                }
                // The close handshake is over (or the server broke the protocol).
                if matches!(session.state(), WsState::Closed(_)) {
                    self.lose(&mut transport, &mut session, &mut link).await;
                    continue;
                }
                // 3. Input already read: one frame at a time.
                if link.start < link.end {
                    let subscribed = self.with_shared(|s| s.subs > 0).unwrap_or(false);
                    let want = EVENTS.div_ceil(2).max(1);
                    while subscribed && self.events.free_capacity() < want {
                        self.space.wait().await;
                    }
                    let input = rx.get(link.start..link.end).unwrap_or_default();
                    match session.handle(input) {
                        Ok((used, message)) => {
                            link.start = link.start.saturating_add(used).min(link.end);
                            if let Some(Message::Text(text)) = message {
                                let _ = self.with(|c, h| c.handle_message(now(), text, h));
                            }
                        }
                        Err(_) => link.start = link.end,
                    }
                    continue;
                }
            }

            // 4. Wait for input, a deadline (core or liveness), or a command.
            let mut wake_at = self
                .with_shared(|s| s.client.poll_timeout())
                .flatten()
                .map(|t| Instant::from_micros(t.as_micros()))
                .unwrap_or(Instant::MAX);
            if link.open {
                let quiet = if link.ping_sent {
                    config.dead_peer_timeout
                } else {
                    config.ping_interval
                };
                wake_at = wake_at.min(link.last_rx.saturating_add(quiet));
            }
            let read = async {
                if link.open {
                    embedded_io_async::Read::read(&mut transport, rx).await
                } else {
                    core::future::pending().await
                }
            };
            match select3(read, Timer::at(wake_at), self.wake.wait()).await {
                Either3::First(Ok(n)) if n > 0 => {
                    link.start = 0;
                    link.end = n;
                    link.last_rx = Instant::now();
                    link.ping_sent = false;
                }
                Either3::First(_) => {
                    session.handle_eof();
                    self.lose(&mut transport, &mut session, &mut link).await;
                }
                Either3::Second(()) => {
                    let _ = self.with(|c, h| c.handle_timeout(now(), h));
                    if link.open {
                        let quiet = Instant::now().saturating_duration_since(link.last_rx);
                        if quiet >= config.dead_peer_timeout {
                            self.lose(&mut transport, &mut session, &mut link).await;
                        } else if quiet >= config.ping_interval && !link.ping_sent {
                            let mut out = Cursor::new(tx);
                            if session.send_ping(b"", &mut out).is_ok() {
                                let n = out.len();
                                let frame = tx.get(..n).unwrap_or_default();
                                if !write_frame(&mut transport, frame, config.dead_peer_timeout)
                                    .await
                                {
                                    self.lose(&mut transport, &mut session, &mut link).await;
                                }
                            }
                            link.ping_sent = true;
                        }
                    }
                }
                Either3::Third(()) => {}
            }
        }
    }

    /// The connection is gone (or we closed it): tell the client.
    async fn lose<T: Transport, S: MaskSource>(
        &self,
        transport: &mut T,
        session: &mut Session<&mut [u8], S>,
        link: &mut Link,
    ) {
        session.handle_eof();
        if link.open {
            transport.close().await;
        }
        link.open = false;
        link.start = 0;
        link.end = 0;
        let _ = self.with(|c, h| c.handle_closed(now(), h));
    }
}

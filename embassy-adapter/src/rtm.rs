//! The async messaging (RTM) client: [`Messaging`] holds the core's sans-IO
//! [`Link`] — the whole messaging link: the RTM client, the
//! WebSocket upgrade and framing, pings, dead-peer and stalled-write detection, the
//! connect timeout, the close handshake — and its [`Events`], behind a blocking mutex;
//! [`Messaging::run`] is the transport loop that owns the socket.
//!
//! ```text
//!  tasks ── &Messaging: publish / read / write / delete / subscribe / authenticate ──┐
//!    ▲          (lock, call the core, wake the runner)                               │
//!    │                                                                               ▼
//!    ├── next_event(|event| …) ◀── core Events ◀── core Link ◀──▶ Messaging::run
//!    └── replies: Events::take_reply(ticket)               Connect  → TCP connect
//!                                                          Transmit → socket write
//!                                                          Close    → socket close
//!                                                          readable → handle_input
//!                                                          deadline → handle_timeout
//! ```
//!
//! A `&Messaging` is the cheap handle: `Copy`, shareable between tasks. The core is the
//! single source of truth (reconnect with backoff, auth restore, resubscription, offline
//! queue, deadlines, every protocol timer, the events waiting); the runner only opens,
//! writes, reads and closes the socket and sleeps until the link's next deadline. Nothing
//! is copied out of the link: an event borrows the received message for as long as the
//! closure given to [`next_event`](Messaging::next_event) runs, and a reply is read where
//! it arrived by the task that awaits it.
//!
//! Delivery: an event that borrows the received message (subscription data, a reply, an
//! error) keeps the link from taking the next message until it is taken; the runner then
//! holds the bytes it read and reads no more, so a slow consumer slows the connection down
//! through TCP flow control and a flooding server is throttled by TCP, not by RAM, while
//! the link's deadlines keep firing. So: if you subscribe, keep calling
//! [`next_event`](Messaging::next_event) — in a task of its own, since a reply that
//! arrives behind untaken data waits for it too. State changes borrow nothing: when nobody
//! takes them and the event buffer fills, the oldest are dropped and counted
//! ([`lost`](Messaging::lost)).

use core::cell::RefCell;
use core::future::poll_fn;
use core::ops::Range;
use core::pin::pin;
use core::task::Poll;

use benchlink_core::rtm::{
    self, Ack, AuthResult, Client, ClientState, Event, Events, Link, LinkError, Mode, Outcome,
    Output, RequestError, SubscribeArgs, Ticket, MAX_ENDPOINT_LEN,
};
use benchlink_core::time::Instant as CoreInstant;
use embassy_futures::select::{select3, Either3};
use embassy_sync::blocking_mutex::raw::RawMutex;
use embassy_sync::blocking_mutex::Mutex;
use embassy_sync::signal::Signal;
use embassy_sync::waitqueue::MultiWakerRegistration;
use embassy_time::{Duration, Instant, Timer};
use heapless::{String, Vec};
use rand_core::RngCore;

use crate::transport::{open, ConnectError as TransportError, Transport};

/// Tasks that can wait at once for events, replies or state changes before they start
/// waking each other spuriously (correct, only slower).
const WAITERS: usize = 8;

/// Where the link connects, and its liveness checks; the core's
/// [`rtm::LinkConfig`] with the endpoint and appkey, in embassy durations. The connect
/// timeout (TCP connect, DNS and the WebSocket upgrade together) is the client's:
/// [`rtm::Config::connect_timeout`].
#[derive(Debug, Clone, Copy)]
pub struct MessagingConfig<'a> {
    /// `ws://host[:port][/path]`, or `wss://…` over a transport with TLS (feature `tls`:
    /// `tls::TlsTransport`; any other transport fails every
    /// attempt with [`rtm::ConnectError::Tls`]).
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
/// - `tx`: the link's own bytes: at least [`MIN_TX`](rtm::MIN_TX) (512) and the
///   upgrade request — the request, then the `101` head in its place, use it before the
///   first frame; then pings, pongs and the close frame.
/// - `queue`: requests waiting for the connection (each its body plus 18 bytes).
/// - `outbox`: PDUs, framed where they were encoded and written from there; its size
///   less 18 is the largest PDU sent.
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

/// The link's events, kept in the caller's bytes.
type CoreEvents = Events<&'static mut [u8]>;

/// A request a task awaits the reply of.
struct Awaited {
    ticket: Ticket,
    /// Its task went away (the future was dropped): the reply is taken and dropped when
    /// it comes, so it never holds the link's input.
    abandoned: bool,
}

struct Shared<const SUBS: usize, const PENDING: usize> {
    link: CoreLink<SUBS, PENDING>,
    events: CoreEvents,
    /// One per acknowledged request awaited: at most `PENDING`.
    awaited: Vec<Awaited, PENDING>,
    waiters: MultiWakerRegistration<WAITERS>,
    /// Why the last connection attempt failed (`None` once one succeeds).
    connect_error: Option<TransportError>,
}

/// The messaging client shared by the runner and every task: put it in a static
/// (`StaticCell`) and pass `&'static Messaging` around.
///
/// Capacities: `SUBS` subscriptions, `PENDING` acknowledged requests in flight (and
/// tasks awaiting replies) (see [`Client`]). `M` is the mutex flavour:
/// `CriticalSectionRawMutex` to share across interrupt executors, `NoopRawMutex` when
/// everything runs in one executor.
pub struct Messaging<M: RawMutex, const SUBS: usize, const PENDING: usize> {
    shared: Mutex<M, RefCell<Shared<SUBS, PENDING>>>,
    /// A task called into the client, or took an event: the runner has something to
    /// act on (output to write, held input the link may take now).
    wake: Signal<M, ()>,
}

impl<M: RawMutex, const SUBS: usize, const PENDING: usize> core::fmt::Debug
    for Messaging<M, SUBS, PENDING>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Messaging")
            .field("state", &self.state())
            .field("lost", &self.lost())
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

/// The outcome in a reply event (the only kind [`Events::take_reply`] hands a request
/// other than `authenticate`).
fn outcome(event: Event<'_>) -> Outcome<'_> {
    match event {
        Event::Reply { outcome, .. } => outcome,
        _ => Outcome::Disconnected,
    }
}

/// The result in an `authenticate`'s reply event.
fn auth_result(event: Event<'_>) -> AuthResult<'_> {
    match event {
        Event::Auth { result, .. } => result,
        _ => AuthResult::Disconnected,
    }
}

impl<M: RawMutex, const SUBS: usize, const PENDING: usize> Messaging<M, SUBS, PENDING> {
    /// A client in `Stopped` for `link`'s endpoint, with the core's settings (backoff,
    /// restore, queue size, connect timeout; give every device its own `jitter_seed`).
    /// WebSocket masks and handshake keys come from a generator seeded from `rng` (the
    /// board's RNG peripheral, say). `events` keeps the events until they are taken: at
    /// least [`Events::capacity_for`]`(SUBS, PENDING, 0)` bytes, more to keep state
    /// changes nobody takes.
    ///
    /// This adapter's links speak JSON whatever `config.encoding` says (messages and
    /// reply bodies are read as JSON text).
    ///
    /// Fails when the endpoint is not a `ws://` or `wss://` URL, the endpoint or appkey
    /// is too long, or `buffers.tx` is smaller than 512 bytes or the upgrade request.
    ///
    /// ```
    /// use benchlink_embassy::rtm::{MessagingConfig, Messaging, RunnerBuffers};
    /// use benchlink_embassy::core::rtm::{ClientState, Config, Events};
    /// use embassy_sync::blocking_mutex::raw::NoopRawMutex;
    /// # struct Rng(u64);
    /// # impl rand_core::RngCore for Rng {
    /// #     fn next_u32(&mut self) -> u32 { self.next_u64() as u32 }
    /// #     fn next_u64(&mut self) -> u64 { self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1); self.0 }
    /// #     fn fill_bytes(&mut self, dst: &mut [u8]) { for b in dst { *b = self.next_u64() as u8 } }
    /// # }
    /// let buf = |n: usize| -> &'static mut [u8] { Box::leak(vec![0; n].into_boxed_slice()) };
    /// let buffers = RunnerBuffers {
    ///     rx: buf(1024), tx: buf(1024), queue: buf(512), outbox: buf(512), subscription_args: buf(0),
    /// };
    /// let events = buf(Events::<&mut [u8]>::capacity_for(1, 4, 0));
    /// let link = MessagingConfig::new("ws://10.0.0.1:8080", "KEY");
    /// let rtm: Messaging<NoopRawMutex, 1, 4> =
    ///     Messaging::new(Config::default(), link, buffers, events, &mut Rng(7)).unwrap();
    /// assert_eq!(rtm.state(), ClientState::Stopped);
    /// ```
    pub fn new<R: RngCore>(
        config: rtm::Config,
        link: MessagingConfig<'_>,
        buffers: RunnerBuffers,
        events: &'static mut [u8],
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
                events: Events::new(events).replies_by_ticket(),
                awaited: Vec::new(),
                waiters: MultiWakerRegistration::new(),
                connect_error: None,
            })),
            wake: Signal::new(),
        })
    }

    /// Runs `f` on the shared state; `None` only if called re-entrantly (from inside a
    /// closure given to [`next_event`](Self::next_event), say).
    fn with_shared<R>(&self, f: impl FnOnce(&mut Shared<SUBS, PENDING>) -> R) -> Option<R> {
        self.shared.lock(|cell| {
            let mut guard = cell.try_borrow_mut().ok()?;
            Some(f(&mut guard))
        })
    }

    /// Runs `f` on the shared state (the link and its events), then drops the replies
    /// whose tasks went away and wakes the waiting tasks if events came.
    fn with<R>(&self, f: impl FnOnce(&mut Shared<SUBS, PENDING>) -> R) -> Option<R> {
        self.with_shared(|s| {
            // An event recorded, or one lost (a state change nobody took room for), is
            // news to the waiting tasks.
            let count = |e: &CoreEvents| (e.recorded(), e.lost());
            let before = count(&s.events);
            let r = f(s);
            if count(&s.events) != before {
                let Shared {
                    link,
                    events,
                    awaited,
                    ..
                } = s;
                let before = awaited.len();
                awaited.retain(|a| !(a.abandoned && events.take_reply(link, a.ticket).is_some()));
                if awaited.len() != before {
                    // The runner may feed the link the input these replies held.
                    self.wake.signal(());
                }
                s.waiters.wake();
            }
            r
        })
    }

    /// Calls into the client on behalf of a task and lets the runner act on the result.
    fn command<R>(
        &self,
        f: impl FnOnce(&mut CoreClient<SUBS, PENDING>, &mut CoreEvents) -> Result<R, RequestError>,
    ) -> Result<R, RequestError> {
        let r = self
            .with(|s| f(s.link.client_mut(), &mut s.events))
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

    /// Why the last attempt to open the transport failed, in the transport's words (a
    /// TLS refusal's reason: unknown issuer, wrong name, …); `None` once one succeeded.
    /// The link's own event carries only its kind ([`rtm::ConnectError::Tls`]).
    pub fn last_connect_error(&self) -> Option<TransportError> {
        self.with_shared(|s| s.connect_error).flatten()
    }

    /// Events dropped for want of room (see the module's notes on delivery).
    pub fn lost(&self) -> u32 {
        self.with_shared(|s| s.events.lost()).unwrap_or(0)
    }

    /// Waits until `f` returns `Some` when called under the lock (registering the task to
    /// be woken by the next events otherwise).
    async fn wait<R>(&self, mut f: impl FnMut(&mut Shared<SUBS, PENDING>) -> Option<R>) -> R {
        poll_fn(|cx| {
            self.with_shared(|s| {
                let r = f(s);
                if r.is_none() {
                    s.waiters.register(cx.waker());
                }
                r
            })
            .flatten()
            .map_or(Poll::Pending, Poll::Ready)
        })
        .await
    }

    /// Waits until the client is in `state`.
    pub async fn wait_for_state(&self, state: ClientState) {
        self.wait(|s| (s.link.client().state() == state).then_some(()))
            .await
    }

    /// Waits for the next event (subscription data and states, client states, why a
    /// connection ended, protocol problems) and gives it to `take`, which runs under the
    /// client's lock (a critical section with `CriticalSectionRawMutex`): keep it short,
    /// copy out what you keep, and do not call back into the client from it. Replies are
    /// not among the events: the task that made the request gets its own.
    ///
    /// ```no_run
    /// # use embassy_sync::blocking_mutex::raw::NoopRawMutex as Raw;
    /// use benchlink_embassy::core::rtm::Event;
    /// # async fn f(rtm: &benchlink_embassy::rtm::Messaging<Raw, 1, 4>) {
    /// loop {
    ///     rtm.next_event(|event| {
    ///         if let Event::SubscriptionData { key, data } = event {
    ///             for message in data.messages.elements() {
    ///                 let _ = (key, message.raw().as_json()); // one JSON value each
    ///             }
    ///         }
    ///     })
    ///     .await;
    /// }
    /// # }
    /// ```
    pub async fn next_event<R>(&self, take: impl FnOnce(Event<'_>) -> R) -> R {
        let mut take = Some(take);
        let r = self
            .wait(|s| {
                let event = s.events.poll_event(&s.link)?;
                take.take().map(|take| take(event))
            })
            .await;
        // The link may take the input it held for this event.
        self.wake.signal(());
        r
    }

    /// [`next_event`](Self::next_event) without waiting: `None` when no event waits.
    pub fn try_next_event<R>(&self, take: impl FnOnce(Event<'_>) -> R) -> Option<R> {
        let r = self
            .with_shared(|s| s.events.poll_event(&s.link).map(take))
            .flatten();
        self.wake.signal(());
        r
    }

    /// Publish `message_json` (one JSON value) to `channel` without asking for an
    /// acknowledgement. Queued while offline.
    pub fn publish(&self, channel: &str, message_json: &str) -> Result<(), RequestError> {
        self.command(|c, h| {
            c.publish(now(), channel, message_json, Ack::None, h)
                .map(|_| ())
        })
    }

    /// Publish and wait for the server's reply (`Outcome::Ok`'s body has `position`), or
    /// for `timeout` to pass; `read` gets the outcome (see
    /// [`next_event`](Self::next_event) for what runs under the lock).
    ///
    /// ```no_run
    /// # use embassy_sync::blocking_mutex::raw::NoopRawMutex as Raw;
    /// use benchlink_embassy::core::rtm::Outcome;
    /// # async fn f(rtm: &benchlink_embassy::rtm::Messaging<Raw, 1, 4>) {
    /// let timeout = Some(embassy_time::Duration::from_secs(5));
    /// let ok = rtm.publish_acked("sensors", r#"{"t":21}"#, timeout, |o| matches!(o, Outcome::Ok(_)));
    /// assert_eq!(ok.await, Ok(true));
    /// # }
    /// ```
    pub async fn publish_acked<R>(
        &self,
        channel: &str,
        message_json: &str,
        timeout: Option<Duration>,
        read: impl FnOnce(Outcome<'_>) -> R,
    ) -> Result<R, RequestError> {
        let ack = Ack::Reply {
            deadline: deadline(timeout),
        };
        self.acked(
            |c, h| c.publish(now(), channel, message_json, ack, h),
            |e| read(outcome(e)),
        )
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
    /// use benchlink_embassy::core::rtm::{Config, Events};
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
    ///     rx: buf(1024), tx: buf(1024), queue: buf(512), outbox: buf(512), subscription_args: buf(0),
    /// };
    /// let events = buf(Events::<&mut [u8]>::capacity_for(1, 4, 0));
    /// let link = MessagingConfig::new("ws://10.0.0.1:8080", "KEY");
    /// let rtm: Messaging<CriticalSectionRawMutex, 1, 4> =
    ///     Messaging::new(Config::default(), link, buffers, events, &mut Rng(7)).unwrap();
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
    /// use benchlink_embassy::core::rtm::Outcome;
    /// # async fn f(rtm: &benchlink_embassy::rtm::Messaging<Raw, 1, 4>) {
    /// let timeout = Some(embassy_time::Duration::from_secs(5));
    /// let ok = rtm.publish_acked_typed("metrics", &("rx", 3), timeout, |o| matches!(o, Outcome::Ok(_)));
    /// assert_eq!(ok.await, Ok(true));
    /// # }
    /// ```
    #[cfg(feature = "serde")]
    pub async fn publish_acked_typed<T: serde::Serialize + ?Sized, R>(
        &self,
        channel: &str,
        message: &T,
        timeout: Option<Duration>,
        read: impl FnOnce(Outcome<'_>) -> R,
    ) -> Result<R, RequestError> {
        let ack = Ack::Reply {
            deadline: deadline(timeout),
        };
        self.acked(
            |c, h| c.publish_typed(now(), channel, message, ack, h),
            |e| read(outcome(e)),
        )
        .await
    }

    /// [`write`](Self::write) of a typed value (feature `serde`), serialized like
    /// [`publish_typed`](Self::publish_typed).
    ///
    /// ```no_run
    /// # use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex as Raw;
    /// use benchlink_embassy::core::rtm::Outcome;
    /// # async fn f(rtm: &benchlink_embassy::rtm::Messaging<Raw, 1, 4>) {
    /// let timeout = Some(embassy_time::Duration::from_secs(5));
    /// let ok = rtm.write_typed("config", &("mode", [1, 2]), timeout, |o| matches!(o, Outcome::Ok(_)));
    /// assert_eq!(ok.await, Ok(true));
    /// # }
    /// ```
    #[cfg(feature = "serde")]
    pub async fn write_typed<T: serde::Serialize + ?Sized, R>(
        &self,
        channel: &str,
        value: &T,
        timeout: Option<Duration>,
        read: impl FnOnce(Outcome<'_>) -> R,
    ) -> Result<R, RequestError> {
        let ack = Ack::Reply {
            deadline: deadline(timeout),
        };
        self.acked(
            |c, h| c.write_typed(now(), channel, value, ack, h),
            |e| read(outcome(e)),
        )
        .await
    }

    /// Read the value of `channel`: `read` gets the outcome, whose `Ok` body has
    /// `message` (`null` when never written).
    ///
    /// ```no_run
    /// # use embassy_sync::blocking_mutex::raw::NoopRawMutex as Raw;
    /// use benchlink_embassy::core::rtm::Outcome;
    /// # async fn f(rtm: &benchlink_embassy::rtm::Messaging<Raw, 1, 4>) {
    /// let mut value = heapless::String::<64>::new();
    /// let got = rtm.read("config", None, |o| match o {
    ///     Outcome::Ok(reply) => reply
    ///         .body
    ///         .and_then(|b| b.get("message")?.raw().as_json())
    ///         .is_some_and(|json| value.push_str(json).is_ok()),
    ///     _ => false,
    /// });
    /// assert_eq!(got.await, Ok(true));
    /// # }
    /// ```
    pub async fn read<R>(
        &self,
        channel: &str,
        timeout: Option<Duration>,
        read: impl FnOnce(Outcome<'_>) -> R,
    ) -> Result<R, RequestError> {
        let at = deadline(timeout);
        self.acked(
            |c, h| c.read(now(), channel, None, at, h).map(Some),
            |e| read(outcome(e)),
        )
        .await
    }

    /// Write `value_json` as the value of `channel` and wait for the reply, which `read`
    /// gets.
    pub async fn write<R>(
        &self,
        channel: &str,
        value_json: &str,
        timeout: Option<Duration>,
        read: impl FnOnce(Outcome<'_>) -> R,
    ) -> Result<R, RequestError> {
        let ack = Ack::Reply {
            deadline: deadline(timeout),
        };
        self.acked(
            |c, h| c.write(now(), channel, value_json, ack, h),
            |e| read(outcome(e)),
        )
        .await
    }

    /// Delete the value of `channel` and wait for the reply, which `read` gets.
    pub async fn delete<R>(
        &self,
        channel: &str,
        timeout: Option<Duration>,
        read: impl FnOnce(Outcome<'_>) -> R,
    ) -> Result<R, RequestError> {
        let ack = Ack::Reply {
            deadline: deadline(timeout),
        };
        self.acked(
            |c, h| c.delete(now(), channel, ack, h),
            |e| read(outcome(e)),
        )
        .await
    }

    /// Authenticate as `role` (role-secret authentication: a handshake, then the
    /// HMAC-MD5 of the server's nonce). On success the credentials are replayed after
    /// every reconnect. `read` gets how it ended (`AuthResult::Rejected` carries the
    /// server's reason).
    ///
    /// ```no_run
    /// # use embassy_sync::blocking_mutex::raw::NoopRawMutex as Raw;
    /// # async fn f(rtm: &benchlink_embassy::rtm::Messaging<Raw, 1, 4>) {
    /// let done = rtm.authenticate("role", b"secret", None, |r| r.is_done());
    /// assert_eq!(done.await, Ok(true));
    /// # }
    /// ```
    pub async fn authenticate<R>(
        &self,
        role: &str,
        secret: &[u8],
        timeout: Option<Duration>,
        read: impl FnOnce(AuthResult<'_>) -> R,
    ) -> Result<R, RequestError> {
        let at = deadline(timeout);
        self.acked(
            |c, h| c.authenticate(now(), role, secret, at, h).map(Some),
            |e| read(auth_result(e)),
        )
        .await
    }

    /// Subscribe to `channel_or_id` (with `args.filter`, a view keyed by this id). The
    /// subscription is made whenever connected and restored after reconnects; its data
    /// and state changes arrive as events ([`next_event`](Self::next_event)).
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

    /// Submits an acknowledged request and waits for its reply, which `read` gets where it
    /// arrived (under the lock). The request counts towards `PENDING` awaited requests
    /// from submission; if the waiting future is dropped, its reply is dropped on arrival.
    async fn acked<R>(
        &self,
        submit: impl FnOnce(
            &mut CoreClient<SUBS, PENDING>,
            &mut CoreEvents,
        ) -> Result<Option<Ticket>, RequestError>,
        read: impl FnOnce(Event<'_>) -> R,
    ) -> Result<R, RequestError> {
        let ticket = self
            .with(|s| {
                // Refused up front, so an accepted request always finds its entry.
                if s.awaited.is_full() {
                    return Err(RequestError::Full);
                }
                let ticket =
                    submit(s.link.client_mut(), &mut s.events)?.ok_or(RequestError::Full)?;
                let entry = Awaited {
                    ticket,
                    abandoned: false,
                };
                s.awaited.push(entry).map_err(|_| RequestError::Full)?;
                Ok(ticket)
            })
            .unwrap_or(Err(RequestError::Full));
        self.wake.signal(());
        let ticket = ticket?;
        let mut awaiting = Awaiting {
            messaging: self,
            ticket,
            taken: false,
        };
        let mut read = Some(read);
        let r = self
            .wait(|s| {
                let event = s.events.take_reply(&s.link, ticket)?;
                read.take().map(|read| read(event))
            })
            .await;
        awaiting.taken = true;
        Ok(r)
    }
}

/// An awaited request's entry, released when its future ends either way: the reply
/// taken, or (the future dropped) taken now if it came, else marked to be dropped when
/// it comes.
struct Awaiting<'m, M: RawMutex, const SUBS: usize, const PENDING: usize> {
    messaging: &'m Messaging<M, SUBS, PENDING>,
    ticket: Ticket,
    taken: bool,
}

impl<M: RawMutex, const SUBS: usize, const PENDING: usize> Drop for Awaiting<'_, M, SUBS, PENDING> {
    fn drop(&mut self) {
        let (ticket, taken) = (self.ticket, self.taken);
        let _ = self.messaging.with_shared(|s| {
            let Shared {
                link,
                events,
                awaited,
                ..
            } = s;
            if taken || events.take_reply(link, ticket).is_some() {
                awaited.retain(|a| a.ticket != ticket);
            } else if let Some(a) = awaited.iter_mut().find(|a| a.ticket == ticket) {
                a.abandoned = true;
            }
        });
        // A reply that borrowed the message held the link's input.
        self.messaging.wake.signal(());
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
        #[cfg(feature = "tls")]
        TransportError::Tls(_) => rtm::ConnectError::Tls,
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
    Connect(u16, bool),
    /// Write the link's next unsent bytes, from where they are into the transport.
    Write,
    /// Close the transport.
    Close,
    /// Nothing to write: read (when connected and no input is held) until the next
    /// deadline or a call.
    Wait,
}

/// How the socket operation the runner waited on ended.
enum Io<E> {
    Wrote(Result<usize, E>),
    Read(Result<usize, E>),
}

impl<M: RawMutex, const SUBS: usize, const PENDING: usize> Messaging<M, SUBS, PENDING> {
    /// The runner: owns `transport` and carries the link's bytes forever — opens the
    /// socket when the link asks, writes what it emits, feeds it what arrives, closes
    /// when it says, and sleeps until its next deadline, the socket or a call. Every
    /// protocol decision and timer is the core's. Run it in its own task; nothing
    /// happens until [`start`](Self::start).
    ///
    /// `input` (1–4 KiB) holds a socket read until the link has taken it (it holds back
    /// while an event borrows the last message); a bigger chunk means fewer wake-ups.
    /// Nothing is staged on the way out: [`Transport::write_from`] copies the link's
    /// frames, each from the outbox record its PDU was encoded in, into the socket.
    pub async fn run<T: Transport>(&self, mut transport: T, input: &mut [u8]) -> ! {
        // Bytes read that the link has not taken yet.
        let mut held: Range<usize> = 0..0;
        let mut host: String<MAX_ENDPOINT_LEN> = String::new();
        // The transport is open (a connect succeeded and no close followed).
        let mut connected = false;
        // After a write (or a write the socket did not take), input already waiting is
        // read before the next write: a peer sending and receiving at once is served both
        // ways.
        let mut read_first = false;
        loop {
            let (step, wake_at) = self
                .with(|s| {
                    let (link, events) = (&mut s.link, &mut s.events);
                    let now = now();
                    if let Some(bytes) = input.get(held.clone()).filter(|b| !b.is_empty()) {
                        held.start += link.handle_input(now, bytes, events);
                        // Input waiting for the application's events proves the server
                        // alive: it is slowed down, not dead.
                        if !held.is_empty() {
                            link.handle_input_held(now);
                        }
                    }
                    if link.poll_timeout().is_some_and(|at| at <= now) {
                        link.handle_timeout(now, events);
                    }
                    let step = {
                        match link.poll_output(now) {
                            Some(Output::Connect {
                                host: name,
                                port,
                                tls,
                            }) => {
                                host.clear();
                                // Never too long: it is part of the endpoint.
                                let _ = host.push_str(name);
                                Step::Connect(port, tls)
                            }
                            Some(Output::Transmit(_)) => {
                                if read_first && transport.readable() && held.is_empty() {
                                    Step::Wait
                                } else {
                                    Step::Write
                                }
                            }
                            Some(Output::Close) => Step::Close,
                            None => Step::Wait,
                        }
                    };
                    (step, link.poll_timeout())
                })
                .unwrap_or((Step::Wait, None));
            match step {
                Step::Connect(port, tls) => {
                    connected = self.connect(&mut transport, &host, port, tls).await;
                }
                Step::Close => {
                    (connected, held) = (false, 0..0);
                    self.closed(&mut transport).await;
                }
                Step::Write | Step::Wait => {
                    let read = connected && held.is_empty();
                    let io = async {
                        match step {
                            // Into the socket's send buffer; the link hears how much once
                            // the write is done.
                            Step::Write => Io::Wrote(
                                transport
                                    .write_from(|to| {
                                        self.with_shared(|s| s.link.copy_unsent(to)).unwrap_or(0)
                                    })
                                    .await,
                            ),
                            Step::Wait if read => Io::Read(transport.read(input).await),
                            // Input held: the application takes an event first (a wake).
                            _ => core::future::pending().await,
                        }
                    };
                    match select3(io, Timer::at(embassy_instant(wake_at)), self.wake.wait()).await {
                        Either3::First(Io::Wrote(Ok(n))) if n > 0 => {
                            read_first = true;
                            let _ = self.with(|s| s.link.transmitted(now(), n));
                        }
                        Either3::First(Io::Read(Ok(n))) if n > 0 => {
                            read_first = false;
                            held = 0..n;
                        }
                        // End of stream or a socket error (a write that took nothing: the
                        // link always offers a byte at least).
                        Either3::First(_) => {
                            (connected, held) = (false, 0..0);
                            self.closed(&mut transport).await;
                        }
                        // A deadline or a call: the next round acts on it. A write that
                        // did not get through lets waiting input in first.
                        Either3::Second(()) | Either3::Third(()) => {
                            read_first |= matches!(step, Step::Write);
                        }
                    }
                }
            }
        }
    }

    /// Opens the transport for the link; true when it is open. The attempt is abandoned
    /// when the link gives it up (its connect timeout, or a stop).
    async fn connect<T: Transport>(
        &self,
        transport: &mut T,
        host: &str,
        port: u16,
        tls: bool,
    ) -> bool {
        let result = {
            // `wss://`: TLS (a transport without it refuses with `TlsUnsupported`).
            let mut attempt = pin!(open(transport, host, port, tls));
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
                        let abandon = self.with(|s| {
                            let now = now();
                            if s.link.poll_timeout().is_some_and(|at| at <= now) {
                                s.link.handle_timeout(now, &mut s.events);
                            }
                            matches!(s.link.poll_output(now), Some(Output::Close))
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
                let _ = self.with(|s| {
                    s.connect_error = None;
                    s.link.handle_connected(now(), &mut s.events)
                });
                true
            }
            Some(Err(e)) => {
                transport.close().await;
                let _ = self.with(|s| {
                    s.connect_error = Some(e);
                    s.link
                        .handle_connect_failed(now(), connect_error(e), &mut s.events)
                });
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
        let _ = self.with(|s| s.link.handle_closed(now(), &mut s.events));
    }
}

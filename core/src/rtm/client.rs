//! The RTM client, sans IO: see [`Client`].

use core::fmt;
use core::time::Duration;

use heapless::{String, Vec};

use super::auth::{AuthExchange, AuthMethod, AuthState, AuthStep, RoleSecret};
use super::backoff::Backoff;
use super::events::{
    Ack, AuthResult, ClientState, ConnectError, Handler, InternalError, Mode, Outcome,
    RequestError, SubState, Ticket, Transmit,
};
use super::in_flight::{InFlight, Pending, Slots};
use super::outbox::{Outbox, FRAME_ROOM};
use super::pdu::{
    write_envelope_as, Action, Encoding, Id, Incoming, Outcome as Suffix, Payload, Pdu, PduError,
};
use super::queue::{Bytes, RecordFifo};
use super::requests::{Meta, ReqKind, Submit, Untyped, UserRequest, ENVELOPE};
use super::sub_args::ArgSlots;
use super::sub_table::{SubscriptionSlots, Table};
use super::subscription::{Fate, LinkMode, SubEvent, SubRequest, SubscribeArgs, Subscription};
use crate::http::{Cursor, EncodeError};
use crate::json::WriteError;
use crate::time::{earliest, Instant};

/// The longest role name [`Client::authenticate`] accepts.
pub const MAX_ROLE_LEN: usize = 64;

/// The longest role secret [`Client::authenticate`] accepts (Satori secrets are 32
/// characters).
pub const MAX_SECRET_LEN: usize = 64;

type Exchange = AuthExchange<String<MAX_ROLE_LEN>, Vec<u8, MAX_SECRET_LEN>>;

/// A role and secret with the code that runs their exchange. The code is reached through
/// pointers set only where credentials are made (`authenticate`), so a client that never
/// authenticates links none of it — the request writer and reply handling of the
/// exchange, about 1 KiB of Cortex-M flash — although the client's reply dispatch and
/// pump call it whenever credentials exist.
struct Credentials {
    exchange: Exchange,
    write: fn(&mut Exchange, Encoding, u64, &mut Cursor<'_>) -> Result<bool, WriteError>,
    reply: for<'p> fn(&mut Exchange, &Pdu<'p>) -> AuthStep<'p>,
}

impl Credentials {
    fn new<M: AuthMethod>(identity: String<MAX_ROLE_LEN>, secret: Vec<u8, MAX_SECRET_LEN>) -> Self {
        Credentials {
            exchange: AuthExchange::with_method::<M>(identity, secret),
            write: Exchange::write_request_as,
            reply: Exchange::handle_reply,
        }
    }

    /// A request of the exchange is due (the handshake, or `authenticate` once the nonce
    /// came).
    fn due(&self) -> bool {
        matches!(
            self.exchange.state(),
            AuthState::Idle | AuthState::ReadyToAuthenticate
        )
    }

    fn handle_reply<'p>(&mut self, pdu: &Pdu<'p>) -> AuthStep<'p> {
        (self.reply)(&mut self.exchange, pdu)
    }
}

/// Client settings; `Default` gives the reference (Python) SDK's defaults (1 s base and
/// 300 s cap of the reconnect delay, no attempt limit, 20000 queued requests, 10 s per
/// auth-restore step), plus jitter and a 30 s connect timeout (the reference's socket
/// timeout is 300 s).
///
/// Reconnect delay, measured from the start of the previous attempt:
///
/// ```text
/// base  = min(reconnect_interval · 2^fail_count, max_reconnect_interval)
/// delay = base − uniform[0, base/4]        (no jitter when jitter_seed == 0)
/// ```
///
/// ```
/// use benchlink_core::rtm::Config;
/// use core::time::Duration;
/// let config = Config { fail_count_threshold: Some(3), jitter_seed: 0x1234_5678, ..Config::default() };
/// assert_eq!(config.reconnect_interval, Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Base reconnect delay (default 1 s).
    pub reconnect_interval: Duration,
    /// Cap of the reconnect delay (default 300 s).
    pub max_reconnect_interval: Duration,
    /// Reconnect attempts after a drop before giving up and entering `Stopped`; exactly
    /// this many (`None`, the default: never give up).
    pub fail_count_threshold: Option<u32>,
    /// Replay the last successful `authenticate` on every new connection, before anything
    /// else (default true).
    pub restore_auth_on_reconnect: bool,
    /// Most user requests (publish, read, write, delete, search, authenticate) waiting in
    /// the offline queue to be sent: made while not connected, or behind what must go
    /// first (an auth, a full outbox, a full table of requests in flight). A request that
    /// would wait while this many do is refused at the call with [`RequestError::Full`]
    /// (default 20000, the reference SDK's `max_queue_size`, which counts its
    /// unprocessed local actions); the queue's bytes may refuse earlier. Requests in
    /// flight are not counted here: their table ([`Slots`]) bounds them, as memory (a
    /// request in flight costs the client its entry, not its message).
    pub max_queue_size: usize,
    /// Whether a failed *first* connect after `start()` is retried (per
    /// `fail_count_threshold`) instead of stopping the client. Default false: the
    /// reference SDK's behaviour, where a bad endpoint fails fast.
    pub retry_first_connect: bool,
    /// Whether `reconnect_interval` is waited before the first reconnection attempt after a
    /// stable connection dropped, as the SDK contract describes the interval. Default
    /// false: the reference SDK's timing, where every wait counts from the start of the
    /// previous attempt, so the first reconnect after a long-lived connection is
    /// immediate. Failed attempts back off the same way either way.
    pub wait_before_first_reconnect: bool,
    /// Seed of the jitter generator; give every client its own random seed. `0` disables
    /// jitter (for tests). The default is a fixed non-zero seed.
    pub jitter_seed: u64,
    /// Time allowed for each step of the auth restore on reconnect (default 10 s).
    pub auth_timeout: Duration,
    /// Time allowed from `Connect` to `handle_connected` before the attempt counts as
    /// failed with [`ConnectError::Timeout`] (default 30 s), a safety net for adapters
    /// whose own timeout is longer or absent.
    pub connect_timeout: Duration,
    /// How PDUs travel (default JSON). With `Encoding::Cbor` (feature `cbor`) every
    /// request is written in CBOR, queued ones included, and a [`Link`](super::Link)
    /// offers the `cbor` subprotocol and fails a connection whose server does not select
    /// it ([`ConnectError::SubprotocolNotSelected`]).
    pub encoding: Encoding,
    /// The largest message a publish or write carries: its `message` (or written value)
    /// as the caller hands it over, JSON text or a CBOR item, or as a typed one
    /// serializes. A larger one is refused at the call with [`RequestError::TooLarge`]
    /// and nothing is sent or queued (default `usize::MAX`: only the outbox bounds it,
    /// with room for the envelope and channel name left to spare or not).
    pub max_message_size: usize,
}

impl Config {
    /// The defaults, as a constant: `Config { jitter_seed, ..Config::DEFAULT }` works in a
    /// `const` or `static` initializer (see [`Client::new`]).
    ///
    /// ```
    /// use benchlink_core::rtm::Config;
    /// assert_eq!(Config::DEFAULT, Config::default());
    /// ```
    pub const DEFAULT: Config = Config {
        reconnect_interval: Duration::from_secs(1),
        max_reconnect_interval: Duration::from_secs(300),
        fail_count_threshold: None,
        restore_auth_on_reconnect: true,
        max_queue_size: 20_000,
        retry_first_connect: false,
        wait_before_first_reconnect: false,
        jitter_seed: 0x0BE0_C41E_D5EE_D001,
        auth_timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(30),
        encoding: Encoding::Json,
        max_message_size: usize::MAX,
    };
}

impl Default for Config {
    fn default() -> Self {
        Config::DEFAULT
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Config {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "Config {{ reconnect_interval_ms: {=u64}, max_reconnect_interval_ms: {=u64}, fail_count_threshold: {}, restore_auth_on_reconnect: {=bool}, max_queue_size: {=usize}, retry_first_connect: {=bool} }}",
            u64::try_from(self.reconnect_interval.as_millis()).unwrap_or(u64::MAX),
            u64::try_from(self.max_reconnect_interval.as_millis()).unwrap_or(u64::MAX),
            self.fail_count_threshold,
            self.restore_auth_on_reconnect,
            self.max_queue_size,
            self.retry_first_connect,
        )
    }
}

/// The user's `authenticate`: queued, then in progress.
struct UserAuth {
    ticket: Ticket,
    deadline: Option<Instant>,
    machine: Credentials,
    /// The queue entry was reached and the exchange started on the current connection.
    started: bool,
}

/// What to do with the socket and the unsent PDUs when leaving a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leave {
    /// The adapter reported the socket closed: nothing to close, nothing can be sent.
    Gone,
    /// Close it and drop unsent PDUs (protocol error, dispose, timeout).
    Close,
    /// The Close is already ordered behind the unsent PDUs (stop, then start again).
    Flush,
}

/// The sans-IO RTM client: reconnects with backoff, restores auth and subscriptions,
/// queues requests while offline, and completes every acked request exactly once.
/// The subscription table (`S`, its entries the most subscriptions at once), the table of
/// acked requests in flight (`P`, its entries the most in flight at once), the offline
/// queue (`Q`), the outbox (`O`, whose size bounds the largest PDU it can send) and the
/// subscriptions' arguments (`A`) are storage the caller gives [`new`](Self::new): arrays
/// on a device, heap slices sized by configuration where there is a heap (see
/// [`SubscriptionSlots`], [`Slots`] and [`Bytes`]).
///
/// # Shape
///
/// The adapter owns the WebSocket and the clock. It feeds transport events in
/// (`handle_connected`, `handle_connect_failed`, `handle_message`, `handle_closed`,
/// `handle_timeout`), drains [`Client::poll_transmit`] after every call (`Connect`, `Send`
/// one PDU as a text frame, `Close`), and sleeps until [`Client::poll_timeout`], a
/// received frame or a user command. Events go to the [`Handler`] passed to each call,
/// synchronously.
///
/// ```
/// use benchlink_core::rtm::{Pending, SubscriptionSlot, Ack, Client, ClientState, Config, Handler, Outcome, Ticket, Transmit};
/// use benchlink_core::time::Instant;
///
/// #[derive(Default)]
/// struct App { acked: Vec<Ticket> }
/// impl Handler for App {
///     fn reply(&mut self, ticket: Ticket, outcome: Outcome<'_>) {
///         if let Outcome::Ok(_) = outcome { self.acked.push(ticket) }
///     }
/// }
///
/// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 4], [Pending::EMPTY; 8], [0; 1024], [0; 1024], [0; 1024]);
/// let mut app = App::default();
/// let t = Instant::ZERO;
/// client.start(t, &mut app);
/// assert_eq!(client.poll_transmit(), Some(Transmit::Connect)); // adapter: open the socket
/// client.handle_connected(t, &mut app);
/// assert_eq!(client.state(), ClientState::Connected);
///
/// let ticket = client
///     .publish(t, "chan", r#"{"k":1}"#, Ack::Reply { deadline: None }, &mut app)
///     .unwrap()
///     .unwrap();
/// assert_eq!(
///     client.poll_transmit(),
///     Some(Transmit::Send(r#"{"action":"rtm/publish","id":0,"body":{"channel":"chan","message":{"k":1}}}"#))
/// );
/// assert_eq!(client.poll_transmit(), None);
/// client.handle_message(t, r#"{"action":"rtm/publish/ok","id":0,"body":{"position":"1:0"}}"#, &mut app);
/// assert_eq!(app.acked, [ticket]);
/// ```
///
/// # Semantics (the reference SDK's client state machine, without its bugs)
///
/// - **States** follow the reference SDK's client transition table (every event in
///   every state); events it ignores are ignored. Unlike the reference, where a channel
///   error outside Connected kills the client's loop thread, nothing here is undefined.
///   `ChannelError` is applied to the subscription in any state with an open connection
///   (Connecting during auth restore, Connected, Stopping).
/// - **Backoff** ([`Config`] documents the formula): measured from the start of the
///   previous attempt, doubled per consecutive failure, capped, with jitter. The fail count
///   is reset only when a connection proved stable: it lasted `reconnect_interval` or got
///   a reply to one of our requests. (The reference resets it on every successful
///   upgrade, so an accept-then-close server sees a reconnect every second.) A
///   connection that opens and closes at once counts as a failed attempt, so an
///   accept-then-close server sees a growing backoff.
/// - **Attempt budget**: `fail_count_threshold = Some(n)` allows exactly `n` reconnect
///   attempts after a drop before the client stops (the reference allows one more than
///   its threshold); `None` is unlimited. The budget is refilled when a connection
///   proves stable.
/// - **First connect** after `start()`: retried per the budget only with
///   `retry_first_connect`; by default its failure stops the client (the reference
///   behaviour, there a side effect of starting with a "critical" fail count).
/// - **Restore order** on every connect, as in the reference: the remembered
///   credentials are replayed first (their failure counts as a failed attempt), then
///   every subscription resubscribes in insertion order, then the queued requests are
///   sent, in order. Request ids restart at 0 on every connection. The reference sends
///   drained requests before a user `authenticate` completes; here `authenticate` is a
///   barrier: requests made after it are sent once it completed (so they run with its
///   permissions).
/// - **Offline queue**: publish, read, write, delete, search and authenticate made while
///   not connected (or while the queue is non-empty, an auth is in progress, or the table
///   of requests in flight is full and cannot grow) wait in the queue's buffer. A request
///   that does not fit is refused at the call with [`RequestError::Full`]; nothing is
///   ever dropped silently (the reference keeps only the newest 1000). `max_queue_size`
///   counts exactly the user requests waiting in the queue (the reference also counts
///   inbound events).
/// - **Pipeline**: acked requests in flight (sent, reply awaited) are bounded by the
///   table of requests in flight, not by a count: one entry each, in a table of the
///   caller's size ([`Slots`]; the std client's grows up to a byte limit). When it is
///   full the next requests wait in the queue and go out, in order, as replies,
///   timeouts or a disconnect free entries.
/// - **Exactly once**: every acked request ends with one [`Outcome`] (or [`AuthResult`]):
///   the reply, `Timeout` at its deadline (a deadline of `now` times out at the next
///   `handle_timeout`), or `Disconnected` when the connection is lost or the client
///   stops/disposes while it is in flight (the reference drops such callbacks without a
///   word). Requests still queued survive `stop()` (they are sent after the next
///   `start()`) and end `Disconnected` on `dispose()`.
/// - **Protocol errors**, as the reference SDK treats them: malformed frames,
///   unsolicited `/error`, replies of the wrong type drop the connection and reconnect;
///   unknown unsolicited PDUs, other `subscription/info`, replies with unknown ids and
///   data for unknown subscriptions are reported as non-fatal [`InternalError`]s (or
///   ignored) and the connection stays (the reference reconnects on the first two).
///
/// # Memory
///
/// No heap: the caller's tables (subscription records of
/// [`MAX_SUBSCRIPTION_KEY`](super::MAX_SUBSCRIPTION_KEY) +
/// [`MAX_POSITION_LEN`](super::MAX_POSITION_LEN) + state, in-flight entries of 24 bytes,
/// queue, outbox and arguments bytes) and fixed state including two credential slots of
/// [`MAX_ROLE_LEN`] + [`MAX_SECRET_LEN`]. Measured (with arrays, which the client holds
/// by value):
///
/// | | thumbv7em (32-bit) | x86_64 |
/// |---|---|---|
/// | fixed (`Client<[SubscriptionSlot; 0], [Pending; 0], [u8; 0], [u8; 0], [u8; 0]>`) | 664 B | 720 B |
/// | per subscription ([`SubscriptionSlot`](super::SubscriptionSlot)) | 392 B | 424 B |
/// | per array entry in flight ([`Pending`]) | 24 B | 24 B |
/// | per byte of array queue / outbox | 1 B | 1 B |
/// | `Client<[SubscriptionSlot; 4], [Pending; 8], [u8; 1024], [u8; 2048], [u8; 1024]>` | 5496 B | 5680 B |
///
/// A PDU must fit in the outbox (minus 18 bytes: a record's length and the room for its
/// WebSocket frame header, which the link writes in place); a request waiting
/// offline takes its body plus 18 bytes of the queue. With arrays the client is one value:
/// large capacities belong in heap slices (`Box<[_]>`), which it holds by pointer.
///
/// # Subscriptions (the reference SDK's subscription machine, without its bugs)
///
/// - Every event is defined in every subscription state. A `Failed` subscription is not
///   retried on reconnect: it stays `Failed` until the application unsubscribes (deleted
///   at once, nothing sent) or subscribes again (starts over with the new arguments).
/// - Unsubscribing while disconnected, or from `Failed`, removes the record and reports
///   [`Handler::subscription_deleted`] at once: no leaks.
/// - `out_of_sync` (and `expired_position`): RELIABLE and SIMPLE resubscribe **without**
///   a `position` key (never `null`); ADVANCED enters `Failed`. Other channel errors
///   resubscribe (from the tracked position in RELIABLE/ADVANCED).
/// - SIMPLE sends a user `position` only on its first subscribe, and every mode sends
///   `history` only until the first `subscribe/ok`, so reconnects replay nothing twice.
/// - Data arriving while `Subscribing` is **reported** at once (never dropped) and
///   advances the tracked position; the older `subscribe/ok` position is then ignored.
///   Data without `position` is delivered and reported as
///   [`InternalError::DataWithoutPosition`]; the client stays connected.
/// - A `fast_forward` info with a `position` updates the tracked position (JS behaviour),
///   so a resubscribe does not ask for the expired one again.
/// - Subscribing a live key is refused with [`RequestError::AlreadySubscribed`] (the
///   reference ignores it silently); unsubscribing an unknown key is
///   [`RequestError::UnknownSubscription`].
/// - A channel error for a subscription the application no longer wants (unsubscribed,
///   or cycling to new arguments) ends it instead of resubscribing first.
///
/// # Adapter contract
///
/// Act on [`Transmit`]s in order. After `Close`, close the socket and call
/// [`handle_closed`](Self::handle_closed) once it is closed (a close report that arrives
/// before the next `Connect` is taken is ignored). After `Connect`, report exactly one of
/// [`handle_connected`](Self::handle_connected) or
/// [`handle_connect_failed`](Self::handle_connect_failed) (or `handle_closed`, which counts
/// as a failure). Call [`handle_timeout`](Self::handle_timeout) when
/// [`poll_timeout`](Self::poll_timeout) has passed; waking early is harmless. Handlers
/// cannot re-enter the client: act on events after the call returns.
pub struct Client<S, P, Q, O, A> {
    pub(super) config: Config,
    state: ClientState,
    backoff: Backoff,
    /// Set by `start()` from Stopped until the first connection is established.
    first_connect: bool,
    reconnect_at: Option<Instant>,
    connect_deadline: Option<Instant>,
    last_error: Option<ConnectError>,

    /// A `Connect` is ordered but not yet taken by the adapter.
    connect_pending: bool,
    /// The adapter took `Connect` and has not reported the result.
    opening: bool,
    /// The current socket is open (`handle_connected`) and not given up.
    open: bool,
    /// PDUs may be written for the current socket (open and no Close ordered).
    writable: bool,
    /// A `Close` is ordered behind the PDUs in the outbox.
    close_pending: bool,
    outbox: Outbox<O>,

    connected_at: Option<Instant>,
    got_reply: bool,
    next_id: u32,
    next_ticket: u32,
    /// Auth restore in progress on the current connection, until this deadline.
    restoring: Option<Instant>,
    remembered: Option<Credentials>,
    user_auth: Option<UserAuth>,
    /// Subscriptions may send (they got `Connect` on the current connection).
    subs_connected: bool,
    subs: Table<S>,
    /// The filters and extras of the subscriptions that have them.
    sub_args: ArgSlots<A>,
    pending: InFlight<P>,
    queue: RecordFifo<Q>,
    /// Live (not cancelled) user requests in `queue`.
    queued: usize,
    /// No queued deadline is earlier than this (may be stale-early: a spurious wakeup).
    queue_deadline: Option<Instant>,
}

impl<S: SubscriptionSlots, P: Slots, Q: Bytes, O: Bytes, A: Bytes> fmt::Debug
    for Client<S, P, Q, O, A>
{
    /// State and counters only: never credentials or message contents.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("state", &self.state)
            .field("subscriptions", &self.subs.len())
            .field("in_flight", &self.pending.len())
            .field("queued", &self.queued)
            .field("outbox", &self.outbox)
            .field("authenticated", &self.remembered.is_some())
            .field("last_connecting_error", &self.last_error)
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl<S: SubscriptionSlots, P: Slots, Q: Bytes, O: Bytes, A: Bytes> defmt::Format
    for Client<S, P, Q, O, A>
{
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "Client {{ state: {}, subscriptions: {=usize}, in_flight: {=usize}, queued: {=usize} }}",
            self.state,
            self.subs.len(),
            self.pending.len(),
            self.queued
        )
    }
}

/// What a record holds before the bytes encoded into it.
#[derive(Clone, Copy)]
enum Head<'m> {
    /// An offline-queue record's [`Meta`].
    Meta(&'m Meta),
    /// An outbox record's room for the frame header the link writes in place.
    FrameRoom,
}

/// Writes one record into `fifo` with `encode`, keeping the encoder's error.
fn push_encoded<B: Bytes>(
    fifo: &mut RecordFifo<B>,
    head: Head<'_>,
    mut encode: impl FnMut(&mut Cursor<'_>) -> Result<(), WriteError>,
) -> Result<(), WriteError> {
    push_encoded_dyn(fifo, head, &mut encode)
}

/// `push_encoded`'s body, once for every encoder (called through a trait object, so each
/// request kind does not get its own copy of the prefix and error handling).
fn push_encoded_dyn<B: Bytes>(
    fifo: &mut RecordFifo<B>,
    head: Head<'_>,
    encode: &mut dyn FnMut(&mut Cursor<'_>) -> Result<(), WriteError>,
) -> Result<(), WriteError> {
    let mut error = None;
    let stored = fifo.push_with(|dst| {
        let body_at = match head {
            Head::Meta(meta) => {
                meta.write(dst)?;
                Meta::LEN
            }
            Head::FrameRoom => FRAME_ROOM,
        };
        let mut out = Cursor::new(dst.get_mut(body_at..)?);
        match encode(&mut out) {
            Ok(()) => body_at.checked_add(out.len()),
            Err(e) => {
                error = Some(e);
                None
            }
        }
    });
    match (stored, error) {
        (true, _) => Ok(()),
        (false, Some(e)) => Err(e),
        (false, None) => Err(WriteError::Encode(
            crate::http::EncodeError::BufferTooSmall {
                capacity: fifo.capacity(),
            },
        )),
    }
}

/// The client's next output as the link takes it ([`Client::next_transmit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    /// PDUs: the front of the outbox ([`Client::poll_transmit`]), or every one handed
    /// out and framed ([`Client::frame_outgoing`]).
    Pdu,
    /// Close the connection.
    Close,
    /// Open one.
    Connect,
}

/// Writes a subscription's filter and extras (`parts`) into its arguments slot: `old`
/// when it had one, else a fresh one; none when both are empty (an old slot is given
/// back). Nothing changes when they do not fit a slot.
/// `subs` is the capacity of the subscription table (one arguments slot each).
fn store_args<A: Bytes>(
    slots: &mut ArgSlots<A>,
    subs: usize,
    old: Option<u16>,
    parts: [&str; 2],
) -> Result<Option<u16>, RequestError> {
    let len = parts[0].len().saturating_add(parts[1].len());
    if len == 0 {
        if let Some(slot) = old {
            slots.give_back(slot, subs);
        }
        return Ok(None);
    }
    if len > slots.slot_size(subs) {
        return Err(RequestError::TooLarge);
    }
    let slot = match old {
        Some(slot) => slot,
        None => slots.take(subs).ok_or(RequestError::TooManySubscriptions)?,
    };
    let mut at = 0;
    for part in parts {
        let end = at + part.len();
        if let Some(dst) = slots.get_mut(slot, subs).get_mut(at..end) {
            dst.copy_from_slice(part.as_bytes());
        }
        at = end;
    }
    Ok(Some(slot))
}

impl<S: SubscriptionSlots, P: Slots, Q: Bytes, O: Bytes, A: Bytes> Client<S, P, Q, O, A> {
    /// A client in `Stopped`. Nothing happens until [`start`](Self::start).
    ///
    /// A `const fn`, so firmware can place the client in a `static` (e.g. a
    /// `static_cell::ConstStaticCell` or a `Mutex<RefCell<_>>`) instead of on a stack.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, ClientState, Config};
    /// let client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// assert_eq!(client.state(), ClientState::Stopped);
    /// assert_eq!(client.poll_timeout(), None);
    ///
    /// // Built at compile time:
    /// const INITIAL: Client<[SubscriptionSlot; 1], [Pending; 4], [u8; 512], [u8; 512], [u8; 256]> = Client::new(
    ///     Config { jitter_seed: 0x5EED, ..Config::DEFAULT },
    ///     [SubscriptionSlot::EMPTY; 1], [Pending::EMPTY; 4],
    ///     [0; 512],
    ///     [0; 512],
    ///     [0; 256],
    /// );
    /// assert_eq!(INITIAL.state(), ClientState::Stopped);
    /// ```
    pub const fn new(
        config: Config,
        subscriptions: S,
        in_flight: P,
        queue: Q,
        outbox: O,
        subscription_args: A,
    ) -> Self {
        let mut backoff = Backoff::new(config.jitter_seed);
        backoff.reset(config.fail_count_threshold);
        Client {
            config,
            state: ClientState::Stopped,
            backoff,
            first_connect: false,
            reconnect_at: None,
            connect_deadline: None,
            last_error: None,
            connect_pending: false,
            opening: false,
            open: false,
            writable: false,
            close_pending: false,
            outbox: Outbox::new(outbox),
            connected_at: None,
            got_reply: false,
            next_id: 0,
            next_ticket: 0,
            restoring: None,
            remembered: None,
            user_auth: None,
            subs_connected: false,
            subs: Table::new(subscriptions),
            sub_args: ArgSlots::new(subscription_args),
            pending: InFlight::new(in_flight),
            queue: RecordFifo::new(queue),
            queued: 0,
            queue_deadline: None,
        }
    }

    /// How this client's PDUs travel ([`Config::encoding`]).
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, Config};
    /// use benchlink_core::rtm::pdu::Encoding;
    /// let client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// assert_eq!(client.encoding(), Encoding::Json);
    /// ```
    pub fn encoding(&self) -> Encoding {
        self.config.encoding
    }

    /// The current state.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, ClientState, Config, NoopHandler};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// client.start(Instant::ZERO, &mut NoopHandler);
    /// assert_eq!(client.state(), ClientState::Connecting);
    /// ```
    pub fn state(&self) -> ClientState {
        self.state
    }

    /// True in `Connected`.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, Config};
    /// let client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// assert!(!client.is_connected());
    /// ```
    pub fn is_connected(&self) -> bool {
        self.state == ClientState::Connected
    }

    /// Why the latest connect attempt failed, if one did (kept until the next failure).
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, Config, ConnectError, NoopHandler, Transmit};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// client.start(Instant::ZERO, &mut NoopHandler);
    /// assert_eq!(client.poll_transmit(), Some(Transmit::Connect));
    /// client.handle_connect_failed(Instant::ZERO, ConnectError::Io { code: 111 }, &mut NoopHandler);
    /// assert_eq!(client.last_connecting_error(), Some(ConnectError::Io { code: 111 }));
    /// ```
    pub fn last_connecting_error(&self) -> Option<ConnectError> {
        self.last_error
    }

    /// The state of the subscription `key`, if there is one.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, Config, Mode, NoopHandler, SubState, SubscribeArgs};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// client.subscribe(Instant::ZERO, "chan", Mode::Simple, SubscribeArgs::default(), &mut NoopHandler).unwrap();
    /// assert_eq!(client.subscription_state("chan"), Some(SubState::Unsubscribed));
    /// assert_eq!(client.subscription_state("other"), None);
    /// ```
    pub fn subscription_state(&self, key: &str) -> Option<SubState> {
        self.find_sub(key)
            .and_then(|i| self.subs.get(i))
            .map(Subscription::state)
    }

    /// User requests waiting in the offline queue.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Ack, Client, Config, NoopHandler};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// client.publish(Instant::ZERO, "c", "1", Ack::None, &mut NoopHandler).unwrap();
    /// assert_eq!(client.queued_requests(), 1);
    /// ```
    pub fn queued_requests(&self) -> usize {
        self.queued
    }

    /// Acked user requests sent and waiting for their reply (an `authenticate` in progress
    /// counts as one).
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, Config};
    /// let client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// assert_eq!(client.requests_in_flight(), 0);
    /// ```
    pub fn requests_in_flight(&self) -> usize {
        let auth = usize::from(self.user_auth.as_ref().is_some_and(|a| a.started));
        self.pending.len().saturating_add(auth)
    }

    // ----------------------------------------------------------------------------------
    // Lifecycle commands
    // ----------------------------------------------------------------------------------

    /// Start connecting (Stopped → Connecting), or reconnect now (Awaiting → Connecting;
    /// Stopping → Connecting after the old socket closes). No effect in other states.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, ClientState, Config, NoopHandler, Transmit};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// client.start(Instant::ZERO, &mut NoopHandler);
    /// assert_eq!(client.poll_transmit(), Some(Transmit::Connect));
    /// ```
    pub fn start<H: Handler>(&mut self, now: Instant, h: &mut H) {
        match self.state {
            ClientState::Stopped => {
                self.first_connect = true;
                let budget = if self.config.retry_first_connect {
                    self.config.fail_count_threshold
                } else {
                    Some(0)
                };
                self.backoff.set_attempts(budget);
                self.enter_connecting(now, false, h);
            }
            ClientState::Awaiting => self.enter_connecting(now, false, h),
            ClientState::Stopping => {
                self.set_state(ClientState::Connecting, h);
                self.forget(Leave::Flush, h);
                self.connecting_entry(now, false);
            }
            ClientState::Connecting | ClientState::Connected | ClientState::Disposed => {}
        }
    }

    /// Stop: close the connection (Connected → Stopping → Stopped once closed) or give up
    /// connecting (Connecting/Awaiting → Stopped). Acked requests in flight end
    /// `Disconnected`; queued requests and subscriptions are kept for the next `start`.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, ClientState, Config, NoopHandler, Transmit};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// let t = Instant::ZERO;
    /// client.start(t, &mut NoopHandler);
    /// client.poll_transmit();
    /// client.handle_connected(t, &mut NoopHandler);
    /// client.stop(t, &mut NoopHandler);
    /// assert_eq!(client.state(), ClientState::Stopping);
    /// assert_eq!(client.poll_transmit(), Some(Transmit::Close));
    /// client.handle_closed(t, &mut NoopHandler);
    /// assert_eq!(client.state(), ClientState::Stopped);
    /// ```
    pub fn stop<H: Handler>(&mut self, now: Instant, h: &mut H) {
        let _ = now;
        match self.state {
            ClientState::Connected => {
                self.set_state(ClientState::Stopping, h);
                // Nothing more is written on a closing socket; replies still arrive.
                self.writable = false;
                self.subs_connected = false;
                self.close_pending = true;
            }
            ClientState::Connecting | ClientState::Awaiting => {
                self.enter_stopped(Leave::Close, h);
            }
            ClientState::Stopped | ClientState::Stopping | ClientState::Disposed => {}
        }
    }

    /// Final: close any connection, end every acked request (`Disconnected`), delete every
    /// subscription, refuse every later call.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Ack, Client, ClientState, Config, NoopHandler, RequestError};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// client.dispose(Instant::ZERO, &mut NoopHandler);
    /// assert_eq!(client.state(), ClientState::Disposed);
    /// assert_eq!(client.publish(Instant::ZERO, "c", "1", Ack::None, &mut NoopHandler), Err(RequestError::Disposed));
    /// ```
    pub fn dispose<H: Handler>(&mut self, now: Instant, h: &mut H) {
        let _ = now;
        if self.state == ClientState::Disposed {
            return;
        }
        self.set_state(ClientState::Disposed, h);
        self.forget(Leave::Close, h);
        self.reconnect_at = None;
        // Queued requests can never be sent now.
        let (queue, user_auth, queued) = (&mut self.queue, &mut self.user_auth, &mut self.queued);
        while let Some(record) = queue.front() {
            if let Some((meta, _)) = Meta::read(record) {
                if !meta.cancelled {
                    Self::resolve_queued(meta, user_auth, h, Outcome::Disconnected);
                }
            }
            queue.pop_front();
        }
        *queued = 0;
        self.queue_deadline = None;
        self.user_auth = None;
        for sub in self.subs.iter() {
            h.subscription_deleted(sub.key());
        }
        self.subs.clear();
        self.sub_args.clear();
    }

    // ----------------------------------------------------------------------------------
    // User requests
    // ----------------------------------------------------------------------------------

    /// Publish `message_json` (one JSON value, validated and captured now) to `channel`.
    /// Returns the ticket when `ack` asked for a reply: its [`Outcome::Ok`] carries
    /// `position`.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Ack, Client, Config, NoopHandler, RequestError};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// let t = Instant::ZERO;
    /// assert!(client.publish(t, "chan", "[1,2]", Ack::Reply { deadline: None }, &mut NoopHandler).unwrap().is_some());
    /// assert_eq!(client.publish(t, "chan", "{oops", Ack::None, &mut NoopHandler), Err(RequestError::InvalidJson));
    /// ```
    pub fn publish<H: Handler>(
        &mut self,
        now: Instant,
        channel: &str,
        message_json: &str,
        ack: Ack,
        h: &mut H,
    ) -> Result<Option<Ticket>, RequestError> {
        self.publish_payload(now, channel, Payload::Json(message_json), ack, h)
    }

    /// [`publish`](Self::publish) a [`Payload`]: JSON text, or one CBOR item (feature
    /// `cbor`, e.g. a map with a byte string) for a client whose [`Config::encoding`] is
    /// CBOR. A CBOR item is checked now; on a JSON client it is refused
    /// ([`RequestError::InvalidJson`]: it is no JSON).
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Ack, Client, Config, NoopHandler};
    /// use benchlink_core::rtm::pdu::Payload;
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// assert!(client.publish_payload(Instant::ZERO, "chan", Payload::Json("1"), Ack::None, &mut NoopHandler).is_ok());
    /// ```
    pub fn publish_payload<H: Handler>(
        &mut self,
        now: Instant,
        channel: &str,
        message: Payload<'_>,
        ack: Ack,
        h: &mut H,
    ) -> Result<Option<Ticket>, RequestError> {
        if matches!(message, Payload::Cbor(_)) && self.config.encoding == Encoding::Json {
            return Err(RequestError::InvalidJson);
        }
        if message.len() > self.config.max_message_size {
            return Err(RequestError::TooLarge);
        }
        let req = UserRequest::Publish { channel, message };
        self.submit(now, Untyped::from(req), ack, h)
    }

    /// Read the value of `channel`; `args_json` is a JSON object of extra body members
    /// (e.g. `{"position":"…"}`). The [`Outcome::Ok`] body has `message` (`null` when
    /// never written) and `position`.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, Config, NoopHandler, RequestError};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// assert!(client.read(Instant::ZERO, "kv", None, None, &mut NoopHandler).is_ok());
    /// assert_eq!(client.read(Instant::ZERO, "kv", Some("[1]"), None, &mut NoopHandler), Err(RequestError::InvalidJson));
    /// ```
    pub fn read<H: Handler>(
        &mut self,
        now: Instant,
        channel: &str,
        args_json: Option<&str>,
        deadline: Option<Instant>,
        h: &mut H,
    ) -> Result<Ticket, RequestError> {
        let req = UserRequest::Read {
            channel,
            args: args_json,
        };
        self.submit_acked(now, req, deadline, h)
    }

    /// Write `value_json` as the value of `channel`.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Ack, Client, Config, NoopHandler};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// assert_eq!(client.write(Instant::ZERO, "kv", "42", Ack::None, &mut NoopHandler), Ok(None));
    /// ```
    pub fn write<H: Handler>(
        &mut self,
        now: Instant,
        channel: &str,
        value_json: &str,
        ack: Ack,
        h: &mut H,
    ) -> Result<Option<Ticket>, RequestError> {
        if value_json.len() > self.config.max_message_size {
            return Err(RequestError::TooLarge);
        }
        let req = UserRequest::Write {
            channel,
            value: value_json,
        };
        self.submit(now, Untyped::from(req), ack, h)
    }

    /// Delete the value of `channel`.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Ack, Client, Config, NoopHandler};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// assert!(client.delete(Instant::ZERO, "kv", Ack::Reply { deadline: None }, &mut NoopHandler).unwrap().is_some());
    /// ```
    pub fn delete<H: Handler>(
        &mut self,
        now: Instant,
        channel: &str,
        ack: Ack,
        h: &mut H,
    ) -> Result<Option<Ticket>, RequestError> {
        self.submit(now, Untyped::from(UserRequest::Delete { channel }), ack, h)
    }

    /// Search channels by name prefix (legacy; the service removed it in 2017): zero or
    /// more [`Outcome::Data`] replies, then [`Outcome::Ok`]; collect `channels` from
    /// all of them.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, Config, NoopHandler};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// assert!(client.search(Instant::ZERO, "ch", None, &mut NoopHandler).is_ok());
    /// ```
    pub fn search<H: Handler>(
        &mut self,
        now: Instant,
        prefix: &str,
        deadline: Option<Instant>,
        h: &mut H,
    ) -> Result<Ticket, RequestError> {
        self.submit_acked(now, UserRequest::Search { prefix }, deadline, h)
    }

    /// Send any request PDU `{"action": action, "body": body_json}` — for actions this
    /// client has no method for (the reference `Connection.action`). It is queued while
    /// disconnected like a publish; with an ack, every reply to its id is its outcome
    /// (`…/data` replies keep it pending, `…/ok` and `…/error` end it). Subscriptions made
    /// this way are not tracked: their data is reported as unexpected, not delivered.
    /// An action name must be non-empty and without control characters
    /// ([`RequestError::InvalidJson`] otherwise), the body a JSON object.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Ack, Client, Config, NoopHandler, RequestError};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// let ack = Ack::Reply { deadline: None };
    /// assert!(client.action(Instant::ZERO, "rtm/new_thing", r#"{"x":1}"#, ack, &mut NoopHandler).unwrap().is_some());
    /// assert_eq!(client.action(Instant::ZERO, "rtm/x", "[1]", ack, &mut NoopHandler), Err(RequestError::InvalidJson));
    /// ```
    pub fn action<H: Handler>(
        &mut self,
        now: Instant,
        action: &str,
        body_json: &str,
        ack: Ack,
        h: &mut H,
    ) -> Result<Option<Ticket>, RequestError> {
        if action.is_empty() || action.chars().any(char::is_control) {
            return Err(RequestError::InvalidJson);
        }
        let req = UserRequest::Other {
            action,
            body: body_json,
        };
        if !req.json_is_valid() {
            return Err(RequestError::InvalidJson);
        }
        self.submit(now, Untyped::from(req), ack, h)
    }

    /// Sends `pdu`, a whole PDU the caller serialized (any action, with its own `id` if
    /// it has one), byte for byte: the SDK contract's `Connection.send(payload)`. It is
    /// not tracked: a reply to its id reaches the handler as
    /// [`InternalError::UnknownReply`] (or, if the id is one the client gave its own
    /// request on this connection — ids restart at 0 on every connection — as that
    /// request's reply, as in the reference SDK: choose ids accordingly). It goes out
    /// only behind nothing: while connected, with nothing queued before it (else
    /// [`RequestError::Full`]: try again later); JSON only (a CBOR client refuses it
    /// with [`RequestError::InvalidJson`], as any text that is not a PDU).
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, Config, NoopHandler, RequestError, Transmit};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 1], [Pending::EMPTY; 2], [0; 256], [0; 512], []);
    /// let pdu = r#"{"action":"rtm/read","id":77,"body":{"channel":"kv"}}"#;
    /// assert_eq!(client.send_raw(pdu), Err(RequestError::Full)); // not connected
    /// let (t, h) = (Instant::ZERO, &mut NoopHandler);
    /// client.start(t, h);
    /// assert_eq!(client.poll_transmit(), Some(Transmit::Connect));
    /// client.handle_connected(t, h);
    /// client.send_raw(pdu).unwrap();
    /// assert_eq!(client.poll_transmit(), Some(Transmit::Send(pdu)));
    /// assert_eq!(client.send_raw("not a pdu"), Err(RequestError::InvalidJson));
    /// ```
    pub fn send_raw(&mut self, pdu: &str) -> Result<(), RequestError> {
        if self.state == ClientState::Disposed {
            return Err(RequestError::Disposed);
        }
        if self.config.encoding != Encoding::Json || Pdu::parse(pdu).is_err() {
            return Err(RequestError::InvalidJson);
        }
        if pdu.len() > self.outbox.max_pdu() {
            return Err(RequestError::TooLarge);
        }
        if !self.can_send_now(false) {
            return Err(RequestError::Full);
        }
        push_encoded(self.outbox.records_mut(), Head::FrameRoom, |out| {
            out.push_str(pdu).map_err(WriteError::from)
        })
        .map_err(|_| RequestError::Full)
    }

    /// Authenticate as `role` with its secret (role-secret HMAC-MD5). The result comes
    /// once in [`Handler::auth`]; on success the credentials are remembered and
    /// replayed first on every reconnect. Requests made after this one are sent after
    /// it completes. One at a time ([`RequestError::AuthInProgress`]).
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, Config, NoopHandler, RequestError};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// let t = Instant::ZERO;
    /// assert!(client.authenticate(t, "superuser", b"secret", None, &mut NoopHandler).is_ok());
    /// assert_eq!(client.authenticate(t, "other", b"x", None, &mut NoopHandler), Err(RequestError::AuthInProgress));
    /// ```
    pub fn authenticate<H: Handler>(
        &mut self,
        now: Instant,
        role: &str,
        secret: &[u8],
        deadline: Option<Instant>,
        h: &mut H,
    ) -> Result<Ticket, RequestError> {
        self.authenticate_with::<RoleSecret, H>(now, role, secret, deadline, h)
    }

    /// [`authenticate`](Self::authenticate) with another method (the SDK contract's
    /// custom auth delegate): `identity` goes in the handshake's data, the secret makes
    /// the credentials with the server's reply, and the exchange is remembered and
    /// replayed on reconnects like role-secret's.
    ///
    /// ```
    /// use benchlink_core::rtm::auth::{AuthMethod, MAX_CREDENTIALS_LEN};
    /// use benchlink_core::rtm::pdu::Pdu;
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, Config, NoopHandler, Transmit};
    /// use benchlink_core::time::Instant;
    /// struct Token;
    /// impl AuthMethod for Token {
    ///     const METHOD: &'static str = "token";
    ///     const IDENTITY: &'static str = "user";
    ///     const CREDENTIALS: &'static str = "token";
    ///     fn credentials(secret: &[u8], _: &Pdu<'_>, out: &mut [u8; MAX_CREDENTIALS_LEN]) -> Option<usize> {
    ///         out.get_mut(..secret.len())?.copy_from_slice(secret);
    ///         Some(secret.len())
    ///     }
    /// }
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 1], [Pending::EMPTY; 2], [0; 256], [0; 512], []);
    /// let (t, h) = (Instant::ZERO, &mut NoopHandler);
    /// client.authenticate_with::<Token, _>(t, "ann", b"t0k3n", None, h).unwrap();
    /// client.start(t, h);
    /// assert_eq!(client.poll_transmit(), Some(Transmit::Connect));
    /// client.handle_connected(t, h);
    /// assert_eq!(
    ///     client.poll_transmit(),
    ///     Some(Transmit::Send(r#"{"action":"auth/handshake","id":0,"body":{"method":"token","data":{"user":"ann"}}}"#))
    /// );
    /// ```
    pub fn authenticate_with<M: AuthMethod, H: Handler>(
        &mut self,
        now: Instant,
        identity: &str,
        secret: &[u8],
        deadline: Option<Instant>,
        h: &mut H,
    ) -> Result<Ticket, RequestError> {
        let _ = (now, h);
        if self.state == ClientState::Disposed {
            return Err(RequestError::Disposed);
        }
        if self.user_auth.is_some() {
            return Err(RequestError::AuthInProgress);
        }
        let role_text = String::try_from(identity).map_err(|()| RequestError::TooLarge)?;
        let secret_bytes = Vec::from_slice(secret).map_err(|()| RequestError::TooLarge)?;
        if super::auth::request_bound::<M>(identity) > self.outbox.max_pdu() {
            return Err(RequestError::TooLarge);
        }
        self.check_room()?;
        let ticket = Ticket::from_raw(self.next_ticket);
        let meta = Meta {
            kind: ReqKind::Auth,
            acked: true,
            cancelled: false,
            ticket,
            deadline,
        };
        if !self.queue.push_with(|dst| {
            meta.write(dst)?;
            Some(Meta::LEN)
        }) {
            return Err(self.queue_refusal());
        }
        self.next_ticket = self.next_ticket.wrapping_add(1);
        self.queued = self.queued.saturating_add(1);
        self.queue_deadline = earliest(self.queue_deadline, deadline);
        self.user_auth = Some(UserAuth {
            ticket,
            deadline,
            machine: Credentials::new::<M>(role_text, secret_bytes),
            started: false,
        });
        self.pump();
        Ok(ticket)
    }

    /// Subscribe to `channel_or_id` (a channel, or with `args.filter` a view's
    /// subscription id). The record is created at once ([`Handler::subscription_created`])
    /// and subscribes whenever the client is connected. A live key is refused with
    /// [`RequestError::AlreadySubscribed`] (the reference treats it as a no-op); a key
    /// being unsubscribed takes the new arguments once the old subscription is gone; a
    /// `Failed` key starts over with the new arguments.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, Config, Mode, NoopHandler, RequestError, SubscribeArgs};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// let t = Instant::ZERO;
    /// let view = SubscribeArgs { filter: Some("select * from chan"), ..SubscribeArgs::default() };
    /// client.subscribe(t, "view1", Mode::Simple, view, &mut NoopHandler).unwrap();
    /// assert_eq!(
    ///     client.subscribe(t, "view1", Mode::Simple, view, &mut NoopHandler),
    ///     Err(RequestError::AlreadySubscribed)
    /// );
    /// ```
    pub fn subscribe<H: Handler>(
        &mut self,
        now: Instant,
        channel_or_id: &str,
        mode: Mode,
        args: SubscribeArgs<'_>,
        h: &mut H,
    ) -> Result<(), RequestError> {
        let _ = now;
        if self.state == ClientState::Disposed {
            return Err(RequestError::Disposed);
        }
        let parts = Subscription::args_parts(&args)?;
        if Subscription::pdu_bound(channel_or_id, mode, &args, parts[1]) > self.outbox.max_pdu() {
            return Err(RequestError::TooLarge);
        }
        let connected = self.subs_connected;
        let capacity = self.subs.capacity();
        match self.find_sub(channel_or_id) {
            Some(i) => {
                let Some(sub) = self.subs.get_mut(i) else {
                    return Err(RequestError::UnknownSubscription);
                };
                let event = match (sub.state(), sub.link_mode) {
                    (SubState::Failed, _) => SubEvent::UnsubscribeOk,
                    (_, LinkMode::Linked | LinkMode::Cycle) => {
                        return Err(RequestError::AlreadySubscribed)
                    }
                    (_, LinkMode::Unlinked) => SubEvent::ModeChange,
                };
                let fresh = Subscription::new(channel_or_id, mode, &args, parts)?;
                sub.args = store_args(&mut self.sub_args, capacity, sub.args, parts)?;
                sub.replace_args(fresh);
                sub.link_mode = LinkMode::Cycle;
                let fate = sub.handle(event, connected, h);
                self.apply_fate(i, fate);
            }
            None => {
                if self.subs.is_full() {
                    return Err(RequestError::TooManySubscriptions);
                }
                let fresh = Subscription::new(channel_or_id, mode, &args, parts)?;
                let slot = store_args(&mut self.sub_args, capacity, None, parts)?;
                if !self.subs.push(fresh) {
                    return Err(RequestError::TooManySubscriptions);
                }
                let i = self.subs.len().saturating_sub(1);
                if let Some(sub) = self.subs.get_mut(i) {
                    sub.args = slot;
                    h.subscription_created(sub.key());
                    let fate = sub.handle(SubEvent::ModeChange, connected, h);
                    self.apply_fate(i, fate);
                }
            }
        }
        self.pump();
        Ok(())
    }

    /// Unsubscribe `channel_or_id`. Completion is [`Handler::subscription_deleted`]: at
    /// once when not subscribed on a connection (disconnected, or `Failed`), otherwise
    /// after `rtm/unsubscribe/ok` (an unsubscribe while `Subscribing` waits for the
    /// subscribe reply first). Unsubscribing again retries after an `unsubscribe/error`.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, Config, Mode, NoopHandler, RequestError, SubscribeArgs};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// let t = Instant::ZERO;
    /// client.subscribe(t, "chan", Mode::Reliable, SubscribeArgs::default(), &mut NoopHandler).unwrap();
    /// assert_eq!(client.unsubscribe(t, "chan", &mut NoopHandler), Ok(())); // deleted at once: not connected
    /// assert_eq!(client.unsubscribe(t, "chan", &mut NoopHandler), Err(RequestError::UnknownSubscription));
    /// ```
    pub fn unsubscribe<H: Handler>(
        &mut self,
        now: Instant,
        channel_or_id: &str,
        h: &mut H,
    ) -> Result<(), RequestError> {
        let _ = now;
        if self.state == ClientState::Disposed {
            return Err(RequestError::Disposed);
        }
        let i = self
            .find_sub(channel_or_id)
            .ok_or(RequestError::UnknownSubscription)?;
        let connected = self.subs_connected;
        let Some(sub) = self.subs.get_mut(i) else {
            return Err(RequestError::UnknownSubscription);
        };
        sub.link_mode = LinkMode::Unlinked;
        let fate = match sub.state() {
            SubState::Failed => sub.handle(SubEvent::UnsubscribeOk, connected, h),
            SubState::Unsubscribed => {
                h.subscription_deleted(sub.key());
                Fate::Remove
            }
            _ => sub.handle(SubEvent::ModeChange, connected, h),
        };
        self.apply_fate(i, fate);
        self.pump();
        Ok(())
    }

    // ----------------------------------------------------------------------------------
    // Transport events
    // ----------------------------------------------------------------------------------

    /// The WebSocket ordered by the latest `Connect` is open. Starts the auth restore, or
    /// connects the subscriptions and enters `Connected`. A socket nobody wants any more
    /// (the client stopped meanwhile) is closed again.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, ClientState, Config, NoopHandler};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// client.start(Instant::ZERO, &mut NoopHandler);
    /// client.poll_transmit();
    /// client.handle_connected(Instant::ZERO, &mut NoopHandler);
    /// assert_eq!(client.state(), ClientState::Connected);
    /// ```
    pub fn handle_connected<H: Handler>(&mut self, now: Instant, h: &mut H) {
        match self.state {
            ClientState::Connecting if !self.open && !self.connect_pending => {
                self.opening = false;
                self.open = true;
                self.writable = true;
                self.connect_deadline = None;
                self.connected_at = Some(now);
                self.got_reply = false;
                self.next_id = 0;
                match self.remembered.as_mut() {
                    Some(creds) if self.config.restore_auth_on_reconnect => {
                        creds.exchange.reset();
                        self.restoring = Some(now.saturating_add(self.config.auth_timeout));
                        self.pump();
                    }
                    _ => self.complete_connect(h),
                }
            }
            ClientState::Connected | ClientState::Stopping => {}
            ClientState::Connecting if self.open => {}
            _ => self.close_pending = true,
        }
    }

    /// The latest `Connect` failed. Backs off (Awaiting) or gives up (Stopped) per the
    /// attempt budget; see [`last_connecting_error`](Self::last_connecting_error).
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, ClientState, Config, ConnectError, NoopHandler};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config { retry_first_connect: true, ..Config::default() }, [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// client.start(Instant::ZERO, &mut NoopHandler);
    /// client.poll_transmit();
    /// client.handle_connect_failed(Instant::ZERO, ConnectError::Resolve, &mut NoopHandler);
    /// assert_eq!(client.state(), ClientState::Awaiting);
    /// ```
    pub fn handle_connect_failed<H: Handler>(
        &mut self,
        now: Instant,
        error: ConnectError,
        h: &mut H,
    ) {
        if self.state == ClientState::Connecting && !self.open && !self.connect_pending {
            self.opening = false;
            self.attempt_failed(now, Leave::Gone, Some(error), h);
        }
    }

    /// One received text frame. Events borrow `text` (subscription messages are slices of
    /// it).
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, ClientState, Config, NoopHandler};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// client.start(Instant::ZERO, &mut NoopHandler);
    /// client.poll_transmit();
    /// client.handle_connected(Instant::ZERO, &mut NoopHandler);
    /// client.handle_message(Instant::ZERO, "not json", &mut NoopHandler); // protocol error: reconnect
    /// assert_eq!(client.state(), ClientState::Awaiting);
    /// ```
    pub fn handle_message<H: Handler>(&mut self, now: Instant, text: &str, h: &mut H) {
        match self.config.encoding {
            // Already UTF-8: no second check.
            Encoding::Json => self.handle_incoming(now, || Incoming::parse(text), h),
            #[cfg(feature = "cbor")]
            Encoding::Cbor => self.handle_frame(now, text.as_bytes(), h),
        }
    }

    /// One received frame's payload, text or binary, read in [`Config::encoding`]: the
    /// binary twin of [`handle_message`](Self::handle_message) (a CBOR server sends binary
    /// frames; a lenient one may send CBOR in text frames).
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, ClientState, Config, NoopHandler};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// client.start(Instant::ZERO, &mut NoopHandler);
    /// client.poll_transmit();
    /// client.handle_connected(Instant::ZERO, &mut NoopHandler);
    /// client.handle_frame(Instant::ZERO, b"\xff", &mut NoopHandler); // not UTF-8: reconnect
    /// assert_eq!(client.state(), ClientState::Awaiting);
    /// ```
    pub fn handle_frame<H: Handler>(&mut self, now: Instant, payload: &[u8], h: &mut H) {
        let encoding = self.config.encoding;
        self.handle_incoming(now, || Incoming::decode(encoding, payload), h);
    }

    /// Acts on one received PDU, read by `parse` once the connection is known to be open.
    fn handle_incoming<'p, H: Handler>(
        &mut self,
        now: Instant,
        parse: impl FnOnce() -> Result<Incoming<'p>, PduError>,
        h: &mut H,
    ) {
        if !self.open {
            h.internal_error(InternalError::NotConnected);
            return;
        }
        match parse() {
            Err(e) => self.fatal(now, InternalError::Malformed(e), h),
            Ok(Incoming::Reply { id, pdu }) => self.on_reply(now, id, pdu, h),
            Ok(Incoming::Data(data)) => {
                if let Some(i) = self.find_sub_text(data.subscription_id) {
                    if let Some(sub) = self.subs.get_mut(i) {
                        sub.on_data(data, h);
                    }
                }
            }
            Ok(Incoming::ChannelError(e)) => {
                if let Some(i) = self.find_sub_text(e.subscription_id) {
                    let connected = self.subs_connected;
                    if let Some(sub) = self.subs.get_mut(i) {
                        if matches!(sub.state(), SubState::Subscribed | SubState::Unsubscribing) {
                            let fate = sub.handle(SubEvent::ChannelError(e), connected, h);
                            self.apply_fate(i, fate);
                        } else {
                            h.internal_error(InternalError::UnexpectedForSubscription {
                                key: sub.key(),
                            });
                        }
                    }
                }
            }
            Ok(Incoming::FastForward(info)) => {
                if let Some(i) = self.find_sub_text(info.subscription_id) {
                    if let Some(sub) = self.subs.get_mut(i) {
                        sub.on_fast_forward(info, h);
                    }
                }
            }
            Ok(Incoming::GeneralError(body)) => {
                self.fatal(now, InternalError::GeneralError(body), h)
            }
            Ok(Incoming::Ignored(pdu)) => h.internal_error(InternalError::Ignored(pdu)),
        }
        self.pump();
    }

    /// The socket closed (the server closed it, it broke, or after a `Close`). From
    /// Connected the client backs off and reconnects (or stops, per the attempt budget);
    /// from Stopping it enters Stopped.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, ClientState, Config, NoopHandler};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// let t = Instant::from_secs(10);
    /// client.start(Instant::ZERO, &mut NoopHandler);
    /// client.poll_transmit();
    /// client.handle_connected(Instant::ZERO, &mut NoopHandler);
    /// client.handle_closed(t, &mut NoopHandler); // lived 10 s: stable, reconnect at once
    /// assert_eq!(client.state(), ClientState::Awaiting);
    /// assert_eq!(client.poll_timeout(), Some(t));
    /// ```
    pub fn handle_closed<H: Handler>(&mut self, now: Instant, h: &mut H) {
        match self.state {
            ClientState::Connected => self.connection_lost(now, Leave::Gone, h),
            ClientState::Stopping => self.enter_stopped(Leave::Gone, h),
            ClientState::Connecting if self.open || (self.opening && !self.connect_pending) => {
                self.opening = false;
                self.attempt_failed(now, Leave::Gone, Some(ConnectError::Closed), h);
            }
            _ => {}
        }
    }

    /// Time passed: call it at (or after) [`poll_timeout`](Self::poll_timeout). Ends
    /// requests past their deadline (`Timeout`), fails a stuck connect or auth restore,
    /// and fires the reconnect timer. The reconnect is started whenever its time has come,
    /// without re-checking the clock (the Python SDK once re-checked it and, when the
    /// timer fired slightly early, stayed waiting forever).
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, ClientState, Config, ConnectError, NoopHandler, Transmit};
    /// use benchlink_core::time::Instant;
    /// let config = Config { retry_first_connect: true, jitter_seed: 0, ..Config::default() };
    /// let mut client: Client<_, _, _, _, _> = Client::new(config, [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// client.start(Instant::ZERO, &mut NoopHandler);
    /// client.poll_transmit();
    /// client.handle_connect_failed(Instant::ZERO, ConnectError::Tls, &mut NoopHandler);
    /// let at = client.poll_timeout().unwrap();
    /// assert_eq!(at, Instant::from_secs(2)); // 1 s · 2^1 after the attempt's start
    /// client.handle_timeout(at, &mut NoopHandler);
    /// assert_eq!(client.state(), ClientState::Connecting);
    /// assert_eq!(client.poll_transmit(), Some(Transmit::Connect));
    /// ```
    pub fn handle_timeout<H: Handler>(&mut self, now: Instant, h: &mut H) {
        if self.state == ClientState::Disposed {
            return;
        }
        self.expire_queued(now, h);
        self.pending
            .expire(now, |p| h.reply(p.ticket, Outcome::Timeout));
        if self
            .user_auth
            .as_ref()
            .is_some_and(|a| a.started && a.deadline.is_some_and(|d| d <= now))
        {
            if let Some(auth) = self.user_auth.take() {
                h.auth(auth.ticket, AuthResult::Timeout);
            }
        }
        if self.state == ClientState::Connecting {
            if self.restoring.is_some_and(|d| d <= now) {
                h.internal_error(InternalError::AuthRestoreFailed);
                self.attempt_failed(now, Leave::Close, Some(ConnectError::AuthRestore), h);
            } else if self.connect_deadline.is_some_and(|d| d <= now) {
                self.attempt_failed(now, Leave::Close, Some(ConnectError::Timeout), h);
            }
        }
        if self.state == ClientState::Awaiting && self.reconnect_at.is_some_and(|t| t <= now) {
            self.enter_connecting(now, true, h);
        }
        self.pump();
    }

    // ----------------------------------------------------------------------------------
    // Outputs
    // ----------------------------------------------------------------------------------

    /// The next thing for the adapter to do, in order; `None` when there is nothing.
    /// Drain it after every call into the client. A returned `Send` is consumed by the
    /// next `poll_transmit` call.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, Config, NoopHandler, Transmit};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// assert_eq!(client.poll_transmit(), None);
    /// client.start(Instant::ZERO, &mut NoopHandler);
    /// assert_eq!(client.poll_transmit(), Some(Transmit::Connect));
    /// assert_eq!(client.poll_transmit(), None);
    /// ```
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Transmit<'_>> {
        loop {
            match self.next_transmit()? {
                Next::Pdu => {}
                Next::Close => return Some(Transmit::Close),
                Next::Connect => return Some(Transmit::Connect),
            }
            let pdu = self.outbox.front_pdu().unwrap_or_default();
            // Never false: in JSON the outbox only holds what the JSON writer produced.
            // (Checked, then borrowed again: a borrow returned from inside the loop
            // would hold `self` for the next turn.)
            if self.config.encoding != Encoding::Json || core::str::from_utf8(pdu).is_ok() {
                break;
            }
        }
        let pdu = self.outbox.front_pdu()?;
        match self.config.encoding {
            Encoding::Json => core::str::from_utf8(pdu).ok().map(Transmit::Send),
            #[cfg(feature = "cbor")]
            Encoding::Cbor => Some(Transmit::Binary(pdu)),
        }
    }

    /// What [`poll_transmit`](Self::poll_transmit) hands out next, after dropping the PDU
    /// it handed out before; a PDU stays at the front of the outbox, its bytes as the
    /// writer made them (no second look at JSON text).
    pub(super) fn next_transmit(&mut self) -> Option<Next> {
        self.outbox.drop_handed();
        self.pump();
        if self.outbox.hand_one().is_some() {
            return Some(Next::Pdu);
        }
        self.next_control()
    }

    /// For the link: hands out every PDU that may be written now, each framed in place by
    /// `frame` (given its outbox record, the PDU at [`MAX_HEADER_LEN`](crate::ws::MAX_HEADER_LEN));
    /// they stay in the outbox, written from there, until the link advances past them
    /// ([`Outbox::advance`]). Then the close or connect after them, when one is ordered.
    pub(super) fn frame_outgoing(&mut self, frame: &mut dyn FnMut(&mut [u8])) -> Option<Next> {
        self.pump();
        if self.outbox.hand_framed(frame) > 0 {
            return Some(Next::Pdu);
        }
        self.next_control()
    }

    /// The close or connect ordered, once no PDU waits to be handed out before it.
    fn next_control(&mut self) -> Option<Next> {
        if self.outbox.has_unhanded() {
            return None;
        }
        if self.close_pending {
            self.close_pending = false;
            return Some(Next::Close);
        }
        if self.connect_pending {
            self.connect_pending = false;
            self.opening = true;
            return Some(Next::Connect);
        }
        None
    }

    /// The outbox, whose framed records the link writes.
    pub(super) fn outbox(&self) -> &Outbox<O> {
        &self.outbox
    }

    /// The outbox, to advance past what was written or drop the frames of a lost
    /// transport.
    pub(super) fn outbox_mut(&mut self) -> &mut Outbox<O> {
        &mut self.outbox
    }

    /// The earliest instant at which [`handle_timeout`](Self::handle_timeout) has work:
    /// the reconnect timer, a request deadline, the connect or auth-restore timeout.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Client, Config, NoopHandler};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// let t = Instant::from_secs(5);
    /// client.read(Instant::ZERO, "kv", None, Some(t), &mut NoopHandler).unwrap();
    /// assert_eq!(client.poll_timeout(), Some(t));
    /// ```
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        // A running minimum in microseconds, and whether any deadline counted (so a
        // deadline at `Instant::MAX` still counts): cheaper than merging options.
        let (mut at, mut any) = (u64::MAX, false);
        let mut add = |d: Option<Instant>| {
            if let Some(d) = d {
                at = at.min(d.as_micros());
                any = true;
            }
        };
        add(self.queue_deadline);
        add(self.pending.earliest_deadline());
        if let Some(auth) = self.user_auth.as_ref().filter(|a| a.started) {
            add(auth.deadline);
        }
        match self.state {
            ClientState::Awaiting => add(self.reconnect_at),
            ClientState::Connecting => {
                add(self.restoring);
                add(self.connect_deadline);
            }
            ClientState::Disposed => return None,
            _ => {}
        }
        any.then_some(Instant::from_micros(at))
    }

    // ----------------------------------------------------------------------------------
    // Internals: state transitions
    // ----------------------------------------------------------------------------------

    fn set_state<H: Handler>(&mut self, to: ClientState, h: &mut H) {
        let from = self.state;
        self.state = to;
        h.client_state(from, to);
    }

    /// Awaiting or Stopped → Connecting (a new attempt).
    fn enter_connecting<H: Handler>(&mut self, now: Instant, scheduled: bool, h: &mut H) {
        self.set_state(ClientState::Connecting, h);
        self.connecting_entry(now, scheduled);
    }

    fn connecting_entry(&mut self, now: Instant, scheduled: bool) {
        self.reconnect_at = None;
        self.backoff.attempt_started(now, scheduled);
        self.connect_pending = true;
        self.opening = false;
        self.connect_deadline = Some(now.saturating_add(self.config.connect_timeout));
    }

    fn enter_stopped<H: Handler>(&mut self, leave: Leave, h: &mut H) {
        self.set_state(ClientState::Stopped, h);
        self.forget(leave, h);
        self.backoff.reset(self.config.fail_count_threshold);
        self.reconnect_at = None;
        self.first_connect = false;
    }

    fn enter_awaiting<H: Handler>(&mut self, now: Instant, leave: Leave, h: &mut H) {
        self.set_state(ClientState::Awaiting, h);
        self.forget(leave, h);
        self.reconnect_at = Some(self.backoff.next_attempt_at(
            now,
            self.config.reconnect_interval,
            self.config.max_reconnect_interval,
        ));
    }

    /// Auth restored (or none to restore): ConnectingComplete → Connected.
    fn complete_connect<H: Handler>(&mut self, h: &mut H) {
        self.restoring = None;
        self.set_state(ClientState::Connected, h);
        if self.first_connect {
            self.first_connect = false;
            self.backoff.set_attempts(self.config.fail_count_threshold);
        }
        self.subs_connected = true;
        self.for_each_sub(SubEvent::Connect, h);
        self.pump();
    }

    /// A connect attempt failed: back off, or stop when no attempt is left.
    fn attempt_failed<H: Handler>(
        &mut self,
        now: Instant,
        leave: Leave,
        error: Option<ConnectError>,
        h: &mut H,
    ) {
        if error.is_some() {
            self.last_error = error;
        }
        self.backoff.record_failure();
        if self.backoff.may_retry() {
            self.enter_awaiting(now, leave, h);
        } else {
            self.enter_stopped(leave, h);
        }
    }

    /// An established connection is gone.
    fn connection_lost<H: Handler>(&mut self, now: Instant, leave: Leave, h: &mut H) {
        // Compared in microseconds, as `Instant` counts: a `Duration` built from them
        // would take a 64-bit division (a library routine on a Cortex-M), and
        // `Duration::as_micros` 128-bit arithmetic. An interval past `u64` microseconds
        // is longer than any life.
        let lived_us = self
            .connected_at
            .map_or(0, |t| now.as_micros().saturating_sub(t.as_micros()));
        let stable =
            crate::time::micros(self.config.reconnect_interval).is_some_and(|i| lived_us >= i);
        if self.got_reply || stable {
            self.backoff.reset(self.config.fail_count_threshold);
            if self.config.wait_before_first_reconnect {
                self.backoff.dropped(now);
            }
        } else {
            self.backoff.record_failure();
        }
        if self.backoff.may_retry() {
            self.enter_awaiting(now, leave, h);
        } else {
            self.enter_stopped(leave, h);
        }
    }

    /// A protocol error: report it, then drop the connection like the reference SDK.
    fn fatal<H: Handler>(&mut self, now: Instant, error: InternalError<'_>, h: &mut H) {
        h.internal_error(error);
        match self.state {
            ClientState::Connecting => self.attempt_failed(now, Leave::Close, None, h),
            ClientState::Connected => self.connection_lost(now, Leave::Close, h),
            ClientState::Stopping => self.enter_stopped(Leave::Close, h),
            _ => {}
        }
    }

    /// "Forget connection", as the reference SDK calls it: give up the socket, end what
    /// was in flight on it, disconnect the subscriptions.
    fn forget<H: Handler>(&mut self, leave: Leave, h: &mut H) {
        if leave != Leave::Flush {
            self.outbox.drop_unhanded();
        }
        if leave != Leave::Gone && (self.open || self.opening) {
            self.close_pending = true;
        }
        self.connect_pending = false;
        self.opening = false;
        self.open = false;
        self.writable = false;
        self.restoring = None;
        self.connect_deadline = None;
        self.connected_at = None;
        self.subs_connected = false;
        self.pending
            .drain(|p| h.reply(p.ticket, Outcome::Disconnected));
        if self.user_auth.as_ref().is_some_and(|a| a.started) {
            if let Some(auth) = self.user_auth.take() {
                h.auth(auth.ticket, AuthResult::Disconnected);
            }
        }
        self.for_each_sub(SubEvent::Disconnect, h);
    }

    // ----------------------------------------------------------------------------------
    // Internals: subscriptions
    // ----------------------------------------------------------------------------------

    fn find_sub(&self, key: &str) -> Option<usize> {
        self.subs.iter().position(|s| s.key() == key)
    }

    fn find_sub_text(&self, key: super::pdu::Text<'_>) -> Option<usize> {
        self.subs.iter().position(|s| key == s.key())
    }

    fn apply_fate(&mut self, i: usize, fate: Fate) {
        if fate == Fate::Remove {
            self.remove_sub(i);
        }
    }

    /// Removes subscription `i` (keeping the order of the rest), giving its arguments
    /// slot back.
    fn remove_sub(&mut self, i: usize) {
        if let Some(slot) = self.subs.get(i).and_then(|s| s.args) {
            self.sub_args.give_back(slot, self.subs.capacity());
        }
        self.subs.remove(i);
    }

    /// One event to every subscription, in insertion order.
    fn for_each_sub<H: Handler>(&mut self, event: SubEvent<'_>, h: &mut H) {
        let connected = self.subs_connected;
        let mut i = 0;
        while let Some(sub) = self.subs.get_mut(i) {
            match sub.handle(event, connected, h) {
                Fate::Keep => i = i.saturating_add(1),
                Fate::Remove => self.remove_sub(i),
            }
        }
    }

    // ----------------------------------------------------------------------------------
    // Internals: replies
    // ----------------------------------------------------------------------------------

    fn on_reply<H: Handler>(&mut self, now: Instant, id: Id<'_>, pdu: Pdu<'_>, h: &mut H) {
        let Some(id) = id.as_u64().and_then(|n| u32::try_from(n).ok()) else {
            h.internal_error(InternalError::UnknownReply(pdu));
            return;
        };
        // Auth restore on this connection.
        if self.restoring.is_some() {
            if let Some(creds) = self.remembered.as_mut() {
                match creds.handle_reply(&pdu) {
                    AuthStep::NotForAuth => {}
                    AuthStep::SendNext => {
                        self.got_reply = true;
                        return;
                    }
                    AuthStep::Done => {
                        self.got_reply = true;
                        self.complete_connect(h);
                        return;
                    }
                    AuthStep::Failed { .. } => {
                        h.internal_error(InternalError::AuthRestoreFailed);
                        self.attempt_failed(now, Leave::Close, Some(ConnectError::AuthRestore), h);
                        return;
                    }
                }
            }
        }
        // The user's authenticate.
        if let Some(auth) = self.user_auth.as_mut().filter(|a| a.started) {
            let expected = match auth.machine.exchange.state() {
                AuthState::AwaitingResult { .. } => Action::Authenticate,
                _ => Action::Handshake,
            };
            match auth.machine.handle_reply(&pdu) {
                AuthStep::NotForAuth => {}
                AuthStep::SendNext => {
                    self.got_reply = true;
                    return;
                }
                AuthStep::Done => {
                    self.got_reply = true;
                    if let Some(auth) = self.user_auth.take() {
                        let ticket = auth.ticket;
                        self.remembered = Some(auth.machine);
                        h.auth(ticket, AuthResult::Done);
                    }
                    return;
                }
                AuthStep::Failed { failure, error } => {
                    self.got_reply = true;
                    let wrong_type = failure == super::auth::AuthFailure::UnexpectedReply
                        && pdu.action != Action::GeneralError;
                    if wrong_type {
                        // Ended `Disconnected` by the connection drop.
                        self.fatal(
                            now,
                            InternalError::WrongReply {
                                request: expected,
                                reply: pdu.action,
                            },
                            h,
                        );
                    } else if let Some(auth) = self.user_auth.take() {
                        h.auth(auth.ticket, AuthResult::Rejected { failure, error });
                    }
                    return;
                }
            }
        }
        // A user request in flight.
        if let Some(p) = self.pending.get(id) {
            self.got_reply = true;
            // A raw action takes whatever outcome its id gets.
            let answers = p.kind == ReqKind::Other || pdu.action.request() == p.kind.action();
            // The outcome, and whether it is the request's last reply.
            let outcome = match pdu.action.outcome() {
                Some(Suffix::Ok) if answers => Some((Outcome::Ok(pdu), true)),
                Some(Suffix::Error) if answers || pdu.action == Action::GeneralError => {
                    Some((Outcome::Error(pdu), true))
                }
                Some(Suffix::Data)
                    if answers && matches!(p.kind, ReqKind::Search | ReqKind::Other) =>
                {
                    Some((Outcome::Data(pdu), false))
                }
                _ => None,
            };
            match outcome {
                Some((outcome, last)) => {
                    if last {
                        self.pending.take(id);
                    }
                    h.reply(p.ticket, outcome);
                }
                None => self.fatal(
                    now,
                    InternalError::WrongReply {
                        request: p.kind.action(),
                        reply: pdu.action,
                    },
                    h,
                ),
            }
            return;
        }
        // A subscription's request.
        let found = self
            .subs
            .iter()
            .position(|s| s.in_flight.is_some_and(|(sid, _)| sid == id));
        if let Some(i) = found {
            self.got_reply = true;
            let connected = self.subs_connected;
            let Some(sub) = self.subs.get_mut(i) else {
                return;
            };
            let kind = sub.in_flight.map(|(_, kind)| kind);
            let event = match (kind, pdu.action) {
                (Some(SubRequest::Subscribe), Action::SubscribeOk) => SubEvent::SubscribeOk(pdu),
                (Some(SubRequest::Subscribe), Action::SubscribeError | Action::GeneralError) => {
                    SubEvent::SubscribeError(pdu)
                }
                (Some(SubRequest::Unsubscribe), Action::UnsubscribeOk) => SubEvent::UnsubscribeOk,
                (
                    Some(SubRequest::Unsubscribe),
                    Action::UnsubscribeError | Action::GeneralError,
                ) => SubEvent::UnsubscribeError,
                (kind, reply) => {
                    let request = match kind {
                        Some(SubRequest::Unsubscribe) => Action::Unsubscribe,
                        _ => Action::Subscribe,
                    };
                    self.fatal(now, InternalError::WrongReply { request, reply }, h);
                    return;
                }
            };
            sub.in_flight = None;
            h.subscription_reply(sub.key(), pdu);
            let fate = sub.handle(event, connected, h);
            self.apply_fate(i, fate);
            return;
        }
        h.internal_error(InternalError::UnknownReply(pdu));
    }

    // ----------------------------------------------------------------------------------
    // Internals: requests, queue and outbox
    // ----------------------------------------------------------------------------------

    fn submit_acked<H: Handler>(
        &mut self,
        now: Instant,
        req: UserRequest<'_>,
        deadline: Option<Instant>,
        h: &mut H,
    ) -> Result<Ticket, RequestError> {
        self.submit(now, Untyped::from(req), Ack::Reply { deadline }, h)?
            .ok_or(RequestError::Full)
    }

    /// Refuses a request that must wait when `max_queue_size` user requests wait
    /// already (requests in flight are bounded by the table of requests in flight).
    fn check_room(&self) -> Result<(), RequestError> {
        if self.queued >= self.config.max_queue_size {
            Err(RequestError::Full)
        } else {
            Ok(())
        }
    }

    /// Why the queue refused a record.
    fn queue_refusal(&self) -> RequestError {
        if self.queue.is_empty() {
            RequestError::QueueTooSmall
        } else {
            RequestError::Full
        }
    }

    /// Nothing waits to be written before a new request: it may go straight out.
    fn can_send_now(&mut self, acked: bool) -> bool {
        self.state == ClientState::Connected
            && self.writable
            && self.queue.is_empty()
            && self.user_auth.as_ref().is_none_or(|a| !a.started)
            && self.subs.iter().all(|s| s.to_send.is_none())
            && (!acked || self.pending.make_room())
    }

    pub(super) fn submit<R: Submit, H: Handler>(
        &mut self,
        now: Instant,
        req: R,
        ack: Ack,
        h: &mut H,
    ) -> Result<Option<Ticket>, RequestError> {
        let _ = (now, h);
        if self.state == ClientState::Disposed {
            return Err(RequestError::Disposed);
        }
        if req.pdu_bound() > self.outbox.max_pdu() {
            return Err(RequestError::TooLarge);
        }
        let (acked, deadline) = match ack {
            Ack::None => (false, None),
            Ack::Reply { deadline } => (true, deadline),
        };
        let ticket = Ticket::from_raw(self.next_ticket);
        let mut sent = false;
        if self.can_send_now(acked) {
            let id = self.next_id;
            let encoding = self.config.encoding;
            match push_encoded(self.outbox.records_mut(), Head::FrameRoom, |out| {
                req.encode(encoding, acked.then_some(u64::from(id)), out)
            }) {
                Ok(()) => {
                    sent = true;
                    if acked {
                        self.next_id = self.next_id.wrapping_add(1);
                        let entry = Pending::new(id, ticket, req.kind(), deadline);
                        // `can_send_now` checked there is room.
                        self.pending.push(entry);
                    }
                }
                Err(WriteError::Encode(_)) => {}
                Err(WriteError::TooLarge { .. }) => return Err(RequestError::TooLarge),
                Err(_) => return Err(RequestError::InvalidJson),
            }
        }
        if !sent {
            self.check_room()?;
            let meta = Meta {
                kind: req.kind(),
                acked,
                cancelled: false,
                ticket,
                deadline,
            };
            // A queued body must fit an outbox record once wrapped in its envelope. A
            // typed message's size is only known once written: a body that turned out
            // larger, or that did not fit even that much room, is `TooLarge`.
            let cap = self.outbox.max_pdu().saturating_sub(ENVELOPE);
            let mut too_large = false;
            let write_body = |out: &mut Cursor<'_>| {
                let written = req.encode_queued(self.config.encoding, out);
                if !R::BOUNDED_UPFRONT {
                    let room = out.capacity();
                    too_large |= match written {
                        Ok(()) => out.len() > cap,
                        Err(WriteError::Encode(_)) => room >= cap,
                        Err(_) => false,
                    };
                    if too_large {
                        return Err(WriteError::Encode(EncodeError::BufferTooSmall {
                            capacity: cap,
                        }));
                    }
                }
                written
            };
            match push_encoded(&mut self.queue, Head::Meta(&meta), write_body) {
                Ok(()) => {
                    self.queued = self.queued.saturating_add(1);
                    self.queue_deadline = earliest(self.queue_deadline, deadline);
                }
                Err(WriteError::Encode(_)) if !req.json_is_valid() => {
                    return Err(RequestError::InvalidJson)
                }
                Err(WriteError::Encode(_)) if too_large => return Err(RequestError::TooLarge),
                Err(WriteError::Encode(_)) => return Err(self.queue_refusal()),
                Err(WriteError::TooLarge { .. }) => return Err(RequestError::TooLarge),
                Err(_) => return Err(RequestError::InvalidJson),
            }
        }
        if !acked {
            return Ok(None);
        }
        self.next_ticket = self.next_ticket.wrapping_add(1);
        self.pump();
        Ok(Some(ticket))
    }

    /// Ends a queued request that can no longer be sent.
    fn resolve_queued<H: Handler>(
        meta: Meta,
        user_auth: &mut Option<UserAuth>,
        h: &mut H,
        outcome: Outcome<'_>,
    ) {
        if meta.kind == ReqKind::Auth {
            if user_auth.as_ref().is_some_and(|a| a.ticket == meta.ticket) {
                *user_auth = None;
            }
            let result = match outcome {
                Outcome::Timeout => AuthResult::Timeout,
                _ => AuthResult::Disconnected,
            };
            h.auth(meta.ticket, result);
        } else if meta.acked {
            h.reply(meta.ticket, outcome);
        }
    }

    /// Times out queued requests whose deadline passed.
    fn expire_queued<H: Handler>(&mut self, now: Instant, h: &mut H) {
        if self.queue_deadline.is_none_or(|d| d > now) {
            return;
        }
        // The next deadline as a running minimum, and whether there is one.
        let (mut next, mut any) = (u64::MAX, false);
        let (queue, user_auth, queued) = (&mut self.queue, &mut self.user_auth, &mut self.queued);
        queue.for_each_mut(|record| {
            let Some((meta, _)) = Meta::read(record) else {
                return;
            };
            if meta.cancelled {
                return;
            }
            match meta.deadline {
                Some(d) if d <= now => {
                    Meta::cancel(record);
                    *queued = queued.saturating_sub(1);
                    Self::resolve_queued(meta, user_auth, h, Outcome::Timeout);
                }
                Some(d) => {
                    next = next.min(d.as_micros());
                    any = true;
                }
                None => {}
            }
        });
        self.queue_deadline = any.then_some(Instant::from_micros(next));
    }

    /// Writes everything that may be written now, in protocol order: auth restore, the
    /// user's auth exchange, subscription requests, then queued requests. Stops at the
    /// first thing that does not fit the outbox (order is never broken).
    fn pump(&mut self) {
        if !self.writable {
            return;
        }
        if self.restoring.is_some() {
            if let Some(creds) = self.remembered.as_mut() {
                let id = self.next_id;
                if let Ok(true) =
                    Self::write_auth(&mut self.outbox, self.config.encoding, creds, id)
                {
                    self.next_id = self.next_id.wrapping_add(1);
                }
            }
            return;
        }
        if let Some(auth) = self.user_auth.as_mut().filter(|a| a.started) {
            let id = self.next_id;
            match Self::write_auth(
                &mut self.outbox,
                self.config.encoding,
                &mut auth.machine,
                id,
            ) {
                Ok(true) => self.next_id = self.next_id.wrapping_add(1),
                Ok(false) => {}
                Err(_) => return,
            }
        }
        if self.subs_connected {
            let capacity = self.subs.capacity();
            for sub in self.subs.iter_mut() {
                let Some(kind) = sub.to_send else {
                    continue;
                };
                let id = self.next_id;
                let encoding = self.config.encoding;
                // The request is made where it is encoded: only its two variants are
                // then compiled in, not every request's members.
                let sub_ref = &*sub;
                let args = sub
                    .args
                    .map_or(&[][..], |slot| self.sub_args.get(slot, capacity));
                if push_encoded(self.outbox.records_mut(), Head::FrameRoom, |out| {
                    sub_ref
                        .request(kind, args)
                        .encode_as(encoding, Some(u64::from(id)), out)
                })
                .is_err()
                {
                    return;
                }
                sub.to_send = None;
                sub.in_flight = Some((id, kind));
                self.next_id = self.next_id.wrapping_add(1);
            }
        }
        if self.state != ClientState::Connected {
            return;
        }
        // Requests made after an authenticate wait for it.
        while self.user_auth.as_ref().is_none_or(|a| !a.started) {
            let Some(record) = self.queue.front() else {
                break;
            };
            let Some((meta, body)) = Meta::read(record) else {
                self.queue.pop_front();
                continue;
            };
            if meta.cancelled {
                self.queue.pop_front();
                continue;
            }
            if meta.kind == ReqKind::Auth {
                self.queue.pop_front();
                self.queued = self.queued.saturating_sub(1);
                match self.user_auth.as_mut() {
                    Some(auth) if auth.ticket == meta.ticket => {
                        auth.started = true;
                        auth.machine.exchange.reset();
                        let id = self.next_id;
                        if let Ok(true) = Self::write_auth(
                            &mut self.outbox,
                            self.config.encoding,
                            &mut auth.machine,
                            id,
                        ) {
                            self.next_id = self.next_id.wrapping_add(1);
                        }
                    }
                    // Its slot was already resolved; nothing to run.
                    _ => continue,
                }
                break;
            }
            if meta.acked && !self.pending.make_room() {
                break;
            }
            let id = self.next_id;
            let (action, body) = match meta.kind {
                // `action\n` before the body (an action name has no line feed).
                ReqKind::Other => match body.iter().position(|&b| b == b'\n') {
                    Some(at) => (
                        core::str::from_utf8(body.get(..at).unwrap_or_default()).unwrap_or(""),
                        body.get(at.saturating_add(1)..).unwrap_or_default(),
                    ),
                    None => ("", body),
                },
                kind => (kind.action().as_str(), body),
            };
            let encoding = self.config.encoding;
            let written = push_encoded(self.outbox.records_mut(), Head::FrameRoom, |out| {
                write_envelope_as(
                    encoding,
                    action,
                    meta.acked.then_some(u64::from(id)),
                    body,
                    out,
                )
            });
            if written.is_err() {
                break;
            }
            if meta.acked {
                self.next_id = self.next_id.wrapping_add(1);
                self.pending
                    .push(Pending::new(id, meta.ticket, meta.kind, meta.deadline));
            }
            self.queue.pop_front();
            self.queued = self.queued.saturating_sub(1);
        }
    }

    /// Writes the auth request due now, if any; `Ok(false)` when none is due.
    fn write_auth(
        outbox: &mut Outbox<O>,
        encoding: Encoding,
        machine: &mut Credentials,
        id: u32,
    ) -> Result<bool, WriteError> {
        if !machine.due() {
            return Ok(false);
        }
        push_encoded(outbox.records_mut(), Head::FrameRoom, |out| {
            (machine.write)(&mut machine.exchange, encoding, u64::from(id), out).map(|_| ())
        })?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests;

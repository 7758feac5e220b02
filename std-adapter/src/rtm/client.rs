//! The std messaging client: the core's sans-IO [`Link`](core_rtm::Link) (the whole link:
//! upgrade, frames, pings, reconnects, restore, queues, deadlines) driven by one I/O thread
//! per client that only moves bytes. User calls lock the link and queue their request in
//! it directly, waking the thread only when it was idle; observers and request callbacks
//! run on the I/O thread.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle, ThreadId};
use std::time::{Duration, Instant as StdInstant};

use benchlink_core::rtm::auth;
use benchlink_core::rtm::pdu::{Encoding, History, Payload};
use benchlink_core::rtm::{
    self as core_rtm, Ack, ClientState, Event, Mode, Outcome, Output, RequestError, SubState,
    SubscribeArgs, Ticket,
};
use benchlink_core::time::Instant;
use mio::unix::SourceFd;
use mio::{Events as Ready, Interest, Poll, Token, Waker};

use crate::net::Stream;

use super::observer::{
    text, ClientObserver, Reply, SharedObserver, SubscriptionData, SubscriptionObserver,
};
use super::tickets::Tickets;
use super::transport::{open, ConnectError, TransportOptions};

/// The default of [`ClientOptions::max_subscriptions`]: room for thousands of channels
/// at once (the reference SDK has no limit); any number can be configured.
pub const DEFAULT_MAX_SUBSCRIPTIONS: usize = 4096;
/// Room in the outbox beyond the largest message: the PDU's envelope and the channel
/// name (or a read's arguments), so that a message of exactly
/// [`ClientOptions::max_outgoing_message_size`] goes out with any channel name up to
/// about 64 KiB.
const ENVELOPE_ROOM: usize = 64 << 10;
/// Room in the outbox beyond one largest PDU: small PDUs wait there, framed where they
/// were encoded, and go out up to [`WRITE_PIECES`] in one vectored write.
const TX_BATCH: usize = 512 << 10;
/// Frames per vectored write: enough to fill a socket buffer with small PDUs in a few
/// calls; the array of slices is built on the stack at every write, so no more.
const WRITE_PIECES: usize = 128;
/// The link's own transmit buffer: the upgrade request, then the server's `101` head in
/// its place (a head larger than this is refused), then pings, pongs and the close.
const TX: usize = 16 << 10;
/// One socket read; the link is fed this much at a time, so a flooding server costs at
/// most this (plus the events of one chunk) before timers and user calls run again.
const READ_CHUNK: usize = 64 << 10;
type Subscriptions = Box<[core_rtm::SubscriptionSlot]>;
type CoreLink = core_rtm::Link<Box<[u8]>, Subscriptions, InFlightTable>;
type CoreClient = core_rtm::Client<Subscriptions, InFlightTable, Box<[u8]>, Box<[u8]>, Box<[u8]>>;

/// A table of `n` entries of `entry` (the subscription table); `what` names it in the
/// error when the memory cannot hold it, an error of [`Client::new`], not an abort.
fn table<T: Clone>(n: usize, entry: T, what: &str) -> Result<Box<[T]>, String> {
    let mut table = Vec::new();
    table
        .try_reserve_exact(n)
        .map_err(|_| format!("{what} {n}: no memory for a table that large"))?;
    table.resize(n, entry);
    Ok(table.into_boxed_slice())
}

/// Bytes [`ClientOptions::max_in_flight_bytes`] counts for each acknowledged request in
/// flight: its entry in the table of requests in flight (24) and its callback's pointer
/// in the table of callbacks (16 on a 64-bit host): what the client itself keeps for a
/// request it sent, whatever the size of its message. A limit is a number of requests
/// times this.
///
/// ```
/// use benchlink_std::rtm::{ClientOptions, DEFAULT_MAX_IN_FLIGHT_BYTES, IN_FLIGHT_REQUEST_BYTES};
/// let mut options = ClientOptions::new("ws://127.0.0.1:8080", "key");
/// assert_eq!(options.max_in_flight_bytes, DEFAULT_MAX_IN_FLIGHT_BYTES);
/// // 100,000 acknowledged requests in flight at most:
/// options.max_in_flight_bytes = 100_000 * IN_FLIGHT_REQUEST_BYTES;
/// ```
pub const IN_FLIGHT_REQUEST_BYTES: usize =
    std::mem::size_of::<core_rtm::Pending>() + std::mem::size_of::<Option<Callback>>();

/// The most acknowledged requests `options` lets be in flight at once (at least one).
fn max_in_flight(options: &ClientOptions) -> usize {
    (options.max_in_flight_bytes / IN_FLIGHT_REQUEST_BYTES).max(1)
}

/// The table of requests in flight: empty at first, doubled each time every entry holds
/// a request in flight and another is to be sent, up to `max` entries (the byte limit's
/// worth), so a short pipe costs little and a long one what it holds. At the limit, or
/// when the memory cannot hold more, requests wait in the offline queue for replies to
/// free entries (backpressure, not growth). Kept at its largest: a pipe that was long
/// once is likely to be again.
struct InFlightTable {
    entries: Vec<core_rtm::Pending>,
    max: usize,
}

impl core_rtm::Slots for InFlightTable {
    fn entries(&self) -> &[core_rtm::Pending] {
        &self.entries
    }

    fn entries_mut(&mut self) -> &mut [core_rtm::Pending] {
        &mut self.entries
    }

    fn grow(&mut self) -> bool {
        let len = self.entries.len();
        let to = len.saturating_mul(2).max(1024).min(self.max);
        if to <= len || self.entries.try_reserve_exact(to - len).is_err() {
            return false;
        }
        self.entries.resize(to, core_rtm::Pending::EMPTY);
        true
    }
}

/// The subscription table for `options`: `max_subscriptions` entries.
fn subscriptions(options: &ClientOptions) -> Result<Subscriptions, String> {
    let n = options.max_subscriptions;
    table(n, core_rtm::SubscriptionSlot::EMPTY, "max_subscriptions")
}

/// The link's four buffers for `options`, zeroed heap allocations whose pages the
/// operating system commits only as they are written: a 16 MiB outbox costs memory only
/// when a message that large is sent.
fn buffers(options: &ClientOptions) -> core_rtm::Buffers<Box<[u8]>> {
    let bytes = |n: usize| vec![0u8; n].into_boxed_slice();
    let pdu = options
        .max_outgoing_message_size
        .saturating_add(ENVELOPE_ROOM);
    core_rtm::Buffers {
        rx: bytes(rx_size(options)),
        tx: bytes(TX.max(core_rtm::MIN_TX)),
        // Every request that can be sent can also wait offline.
        queue: bytes(options.queue_bytes.saturating_add(pdu)),
        outbox: bytes(pdu.saturating_add(TX_BATCH)),
        subscription_args: bytes(
            options
                .max_subscriptions
                .saturating_mul(options.max_subscription_args),
        ),
    }
}

/// The link's events between two takes by the I/O thread, each message they borrow
/// kept with them: a call's worst case, a largest message and two reads' worth (zeroed:
/// pages are committed only as events are kept; past a largest message the link waits
/// for the next take).
fn journal(options: &ClientOptions) -> Journal {
    let max_message = rx_size(options);
    let size = Journal::capacity_for(
        options.max_subscriptions,
        max_in_flight(options),
        options.max_queue_size,
    )
    .saturating_add(max_message)
    .saturating_add(2 * READ_CHUNK);
    Journal::new(vec![0u8; size].into_boxed_slice()).keeping_messages(max_message)
}

/// The link's receive buffer: the largest message.
fn rx_size(options: &ClientOptions) -> usize {
    options.transport.max_message_size.max(1024)
}

/// The default of [`ClientOptions::max_in_flight_bytes`], 8 MiB: the client's full rate
/// of acknowledged publishes, about 600,000 a second on loopback (`.ci/bench-rtm`),
/// across a 300 ms round trip is 180,000 requests in flight, 7.2 MB at
/// [`IN_FLIGHT_REQUEST_BYTES`] each; rounded up, 209,715 requests (at 40 bytes).
///
/// ```
/// use benchlink_std::rtm::{DEFAULT_MAX_IN_FLIGHT_BYTES, IN_FLIGHT_REQUEST_BYTES};
/// // A 300 ms round trip at 600,000 acknowledged publishes a second fits.
/// assert!(DEFAULT_MAX_IN_FLIGHT_BYTES / IN_FLIGHT_REQUEST_BYTES >= 180_000);
/// ```
pub const DEFAULT_MAX_IN_FLIGHT_BYTES: usize = 8 << 20;

/// How long [`Client::dispose`] waits for the I/O thread to end.
pub const DISPOSE_WAIT: Duration = Duration::from_secs(10);

const WAKER: Token = Token(0);
const SOCKET: Token = Token(1);

/// Options of [`Client::new`], with the reference SDK's defaults.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Where and how to connect.
    pub transport: TransportOptions,
    /// Wait before the first reconnection attempt after a drop; doubles with each failed
    /// attempt, each wait counted from the start of the attempt before (default 1 s).
    pub reconnect_interval: Duration,
    /// Cap of the wait between attempts (default 300 s).
    pub max_reconnect_interval: Duration,
    /// Reconnect attempts after a drop before giving up (`None`, the default: forever).
    pub fail_count_threshold: Option<u32>,
    /// Replay the last successful authentication after every reconnect (default true).
    pub restore_auth_on_reconnect: bool,
    /// Most requests waiting in the offline queue to be sent: made while not connected,
    /// or behind a full pipeline ([`max_in_flight_bytes`](Self::max_in_flight_bytes))
    /// or outbox. A request that would wait while this many do fails with `Full` at the
    /// call (default 20000, the reference SDK's, which counts its unprocessed local
    /// actions). Requests in flight are not counted here.
    pub max_queue_size: usize,
    /// Bytes of the offline queue, where requests wait for a connection (or for room in
    /// flight), on top of room for one largest outgoing message: each request takes its
    /// body plus 18 bytes, and one that does not fit fails with `Full` at the call
    /// (default 4 MiB: the default `max_queue_size` of 100-byte publishes fit).
    pub queue_bytes: usize,
    /// The memory the pipeline of acknowledged requests in flight (sent, reply
    /// awaited) may take: [`IN_FLIGHT_REQUEST_BYTES`] (40) per request, its entry in the
    /// table of requests in flight and its callback's pointer; what a callback captures
    /// is its own. The table grows as the pipe gets longer (doubling, from 1,024 entries)
    /// up to this; past it the next requests wait in the offline queue until replies
    /// free entries, and then `max_queue_size` refuses with `Full`. Default
    /// [`DEFAULT_MAX_IN_FLIGHT_BYTES`] (8 MiB, 209,715 requests): a 300 ms round trip at
    /// the client's full rate (about 600,000 acknowledged publishes a second on
    /// loopback: 180,000 in flight) fits.
    pub max_in_flight_bytes: usize,
    /// The largest message (the JSON text of a publish's message or a write's value, as
    /// given or as serialized, or a CBOR item) the client sends; one byte more is refused
    /// at the call (`TooLarge`). Default 16 MiB, as [`TransportOptions::max_message_size`] for
    /// incoming messages. The outbox and the queue are sized for it; the memory is
    /// committed only when a message that large is sent.
    pub max_outgoing_message_size: usize,
    /// Retry a failing *first* connect after `start()`, as every other, with
    /// `reconnect_interval` and `fail_count_threshold` (default true: the SDK contract
    /// says an unsuccessful connection attempt is retried, and `last_connecting_error`
    /// tells why it failed). False gives the reference SDK's behaviour, which stops at
    /// once (a command line that should fail fast on a wrong endpoint wants that).
    pub retry_first_connect: bool,
    /// Wait `reconnect_interval` before the first reconnection attempt after a stable
    /// connection dropped, as the SDK contract says (default true). False gives the
    /// reference SDK's timing, where that first attempt is immediate (its wait counts
    /// from the start of the connection's own attempt, long past).
    pub wait_before_first_reconnect: bool,
    /// Report leaving `Subscribed` when the unsubscribe completes (the server's reply, or
    /// the connection's end), as the SDK contract says `on_leave_subscribed` signals the
    /// unsubscribe's completion (default true): until then the observer still sees the
    /// subscription as subscribed and gets the messages that arrive, and at completion it
    /// hears `on_leave_subscribed`, `on_enter_unsubscribing`, `on_leave_unsubscribing` and
    /// what follows, in that order. False gives the reference SDK's order, where
    /// `on_leave_subscribed` comes when the unsubscribe is sent and messages may follow.
    pub leave_subscribed_on_completion: bool,
    /// Shorten each reconnect wait by a random 0–25 %, so that many clients dropped
    /// together do not reconnect in lock-step (default false, as in the reference SDK:
    /// waits are exactly as configured).
    pub reconnect_jitter: bool,
    /// Send a WebSocket ping after this much silence from the server (default 30 s).
    pub ping_interval: Duration,
    /// Declare the server dead after this much silence, then reconnect (default 60 s).
    pub dead_peer_timeout: Duration,
    /// How PDUs travel (default JSON). With [`Encoding::Cbor`] the client offers the
    /// `cbor` subprotocol and a connection whose server does not select it fails
    /// (`last_connecting_error`); messages and replies still reach the API as JSON text,
    /// and [`Client::publish_cbor`] publishes a CBOR item as is.
    pub encoding: Encoding,
    /// Most subscriptions at once; one more is refused at the call
    /// (`TooManySubscriptions`). Default [`DEFAULT_MAX_SUBSCRIPTIONS`] (4096); the table
    /// takes about 430 bytes an entry.
    pub max_subscriptions: usize,
    /// Bytes of one subscription's `filter` (a view's query) and extra subscribe
    /// arguments together; more is refused at the call (`TooLarge`). Default 4 KiB, the
    /// local hub's largest view query. Each subscription the client can hold has a slot
    /// this size in one zeroed allocation, committed only as views are made.
    pub max_subscription_args: usize,
    /// The client observer, as the reference SDK's `observer=` argument (default none).
    /// [`Client::with_observer`]'s observer, when given, takes its place;
    /// [`Client::set_observer`] replaces either later.
    pub observer: Option<SharedObserver>,
}

impl ClientOptions {
    /// Defaults for `endpoint` and `appkey`.
    ///
    /// ```
    /// let o = benchlink_std::rtm::ClientOptions::new("ws://127.0.0.1:8080", "key");
    /// assert_eq!(o.max_queue_size, 20000);
    /// ```
    pub fn new(endpoint: impl Into<String>, appkey: impl Into<String>) -> ClientOptions {
        ClientOptions {
            transport: TransportOptions::new(endpoint, appkey),
            reconnect_interval: Duration::from_secs(1),
            max_reconnect_interval: Duration::from_secs(300),
            fail_count_threshold: None,
            restore_auth_on_reconnect: true,
            max_queue_size: 20000,
            queue_bytes: 4 << 20,
            max_in_flight_bytes: DEFAULT_MAX_IN_FLIGHT_BYTES,
            max_outgoing_message_size: 16 << 20,
            retry_first_connect: true,
            wait_before_first_reconnect: true,
            leave_subscribed_on_completion: true,
            reconnect_jitter: false,
            ping_interval: Duration::from_secs(30),
            dead_peer_timeout: Duration::from_secs(60),
            encoding: Encoding::Json,
            max_subscriptions: DEFAULT_MAX_SUBSCRIPTIONS,
            max_subscription_args: 4 << 10,
            observer: None,
        }
    }
}

/// Why a connection attempt failed, as [`Client::last_connecting_error`] keeps it: the
/// client's reason (refused upgrade, TLS, timeout, auth restore, …) and, when a socket,
/// TLS or proxy error caused it, that error.
///
/// ```
/// use benchlink_std::rtm::{Client, ClientOptions};
/// let client = Client::new(ClientOptions::new("ws://127.0.0.1:9", "key")).unwrap();
/// assert!(client.last_connecting_error().is_none()); // no attempt yet
/// client.dispose().unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct ConnectingError {
    kind: core_rtm::ConnectError,
    transport: Option<Arc<ConnectError>>,
}

impl ConnectingError {
    /// What failed, as the client's state machine saw it.
    pub fn kind(&self) -> core_rtm::ConnectError {
        self.kind
    }

    /// The socket, TLS, proxy or HTTP error behind it, when there was one.
    pub fn transport(&self) -> Option<&ConnectError> {
        self.transport.as_deref()
    }
}

impl fmt::Display for ConnectingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.transport {
            Some(e) => e.fmt(f),
            None => self.kind.fmt(f),
        }
    }
}

impl std::error::Error for ConnectingError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.transport
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// What a call can fail with.
#[derive(Debug)]
pub enum Error {
    /// The core refused the request (`Full`, too large, invalid JSON, …).
    Request(RequestError),
    /// A `_sync` call got no reply in time.
    Timeout,
    /// A `_sync` call's request was in flight when the connection dropped.
    Disconnected,
    /// The server answered with an error PDU.
    Reply(Reply<'static>),
    /// Authentication failed.
    Auth(String),
    /// A `Connection` call before `start()` or after the connection closed.
    NotOpen(&'static str),
    /// `make_client` (or `Connection::start`) could not connect: the last connect error.
    Connect(String),
    /// The client was disposed.
    Disposed,
    /// A blocking call (`…_sync`) inside a callback: its reply would be delivered by
    /// the thread it blocks, so it fails at once instead (use the callback form).
    InCallback,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Request(e) => write!(f, "request refused: {e}"),
            Error::Timeout => f.write_str("no reply in time"),
            Error::Disconnected => f.write_str("connection lost before the reply"),
            Error::Reply(r) => write!(f, "{}: {}", r.action, r.body),
            Error::Auth(why) => write!(f, "authentication failed: {why}"),
            Error::NotOpen(why) => f.write_str(why),
            Error::Connect(why) => write!(f, "client connection error: {why}"),
            Error::Disposed => f.write_str("client disposed"),
            Error::InCallback => f.write_str(
                "a blocking call inside a callback would wait for its own thread: use the \
                 callback form",
            ),
        }
    }
}

impl std::error::Error for Error {}

impl From<RequestError> for Error {
    fn from(e: RequestError) -> Error {
        Error::Request(e)
    }
}

/// How a request ended, as request callbacks see it: a reply borrows from the received
/// frame for the call; [`to_owned`](Self::to_owned) keeps it beyond.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response<'a> {
    /// The server's reply (`…/ok`, `…/error`, or a `…/data` part of a search).
    Reply(Reply<'a>),
    /// The deadline passed.
    Timeout,
    /// The connection dropped with the request in flight.
    Disconnected,
}

impl Response<'_> {
    /// The response with a reply's text copied, to keep beyond the callback (to send it
    /// to another thread, say).
    ///
    /// ```
    /// # use benchlink_std::rtm::{Callback, Response};
    /// let (tx, rx) = std::sync::mpsc::channel::<Response<'static>>();
    /// let callback: Callback = Box::new(move |r| { let _ = tx.send(r.to_owned()); });
    /// # drop((callback, rx));
    /// ```
    pub fn to_owned(&self) -> Response<'static> {
        match self {
            Response::Reply(r) => Response::Reply(r.to_owned()),
            Response::Timeout => Response::Timeout,
            Response::Disconnected => Response::Disconnected,
        }
    }

    /// A callback that sends each response it is given, owned, to the receiver returned
    /// with it: how another thread waits for a request's outcome (every `_sync` call
    /// waits this way).
    ///
    /// ```no_run
    /// use benchlink_std::rtm::{Client, ClientOptions, Error, Response};
    /// let client = Client::new(ClientOptions::new("ws://127.0.0.1:8080", "k"))?;
    /// client.start()?;
    /// let (callback, responses) = Response::channel();
    /// client.read("ch", None, Some(callback))?;
    /// let reply = responses.recv().map_err(|_| Error::Disposed)?.into_result()?;
    /// println!("{}", reply.body);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn channel() -> (Callback, Receiver<Response<'static>>) {
        let (tx, rx) = mpsc::channel();
        let callback: Callback = Box::new(move |r| {
            let _ = tx.send(r.to_owned());
        });
        (callback, rx)
    }
}

impl Response<'static> {
    /// The response as a `_sync` call returns it: the reply when it is `…/ok` (or a
    /// `…/data` part), the [`Error`] it is otherwise.
    ///
    /// ```
    /// use benchlink_std::rtm::{Error, Response};
    /// assert!(matches!(Response::Timeout.into_result(), Err(Error::Timeout)));
    /// ```
    pub fn into_result(self) -> Result<Reply<'static>, Error> {
        match self {
            Response::Reply(r) if r.is_ok() => Ok(r),
            Response::Reply(r) => Err(Error::Reply(r)),
            Response::Timeout => Err(Error::Timeout),
            Response::Disconnected => Err(Error::Disconnected),
        }
    }
}

/// A request callback.
pub type Callback = Box<dyn FnMut(Response<'_>) + Send>;

/// Extra arguments of [`Client::subscribe`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscribeOptions {
    /// Start at this position.
    pub position: Option<String>,
    /// Replay history first: the last `n` messages ([`History::Count`]) or the last `s`
    /// seconds ([`History::Age`]) — one or the other, as the protocol allows.
    pub history: Option<History>,
    /// A view (`select … from channel`); the subscription is then keyed by the id given.
    pub filter: Option<String>,
    /// Aggregation period of a view, seconds (≤ 60).
    pub period: Option<u32>,
    /// Deliver consecutive identical messages once.
    pub only_value_changes: bool,
    /// Any other members for the subscribe body, as a JSON object.
    pub extra: Option<serde_json::Value>,
}

/// A messaging client that reconnects by itself and restores its authentication and
/// subscriptions. Cheap to clone; all clones drive the same connection. Dropping the last
/// clone disposes the client (a clone held by one of its own observers keeps it alive
/// until [`Client::dispose`]).
///
/// ```no_run
/// use benchlink_std::rtm::{Client, ClientOptions, Mode, SubscribeOptions, SubscriptionData, SubscriptionObserver};
/// struct Print;
/// impl SubscriptionObserver for Print {
///     fn on_subscription_data(&mut self, data: &SubscriptionData) {
///         for m in data.messages() { println!("got {m}"); }
///     }
/// }
/// let client = Client::new(ClientOptions::new("ws://127.0.0.1:8080", "appkey"))?;
/// client.start()?;
/// client.subscribe("animals", Mode::Reliable, Print, SubscribeOptions::default())?;
/// client.publish("animals", &serde_json::json!({"who": "zebra"}), None)?;
/// # Ok::<(), benchlink_std::rtm::Error>(())
/// ```
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

/// What the handles own; its drop (the last handle gone) disposes the client.
struct Shared {
    engine: Arc<Engine>,
    watch: Arc<StateWatch>,
    thread: ThreadId,
    join: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Shared {
    /// The last handle is gone and nobody can stop the client any more: dispose it, so
    /// that its thread closes the connection and ends instead of reconnecting forever.
    fn drop(&mut self) {
        self.engine.lock().dispose();
        self.engine.wake();
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}

/// The link and the events it produced, shared by the I/O thread and the callers.
struct Engine {
    core: Mutex<Core>,
    /// A wake-up is on its way (or the thread is busy and will look at the link before
    /// it sleeps): callers skip the syscall.
    wake_pending: AtomicBool,
    waker: Waker,
    thread: ThreadId,
    /// Signalled by the I/O thread after each turn while someone waits for room
    /// ([`Client::wait_for_room`]); waited on with `core`'s lock.
    room: std::sync::Condvar,
    room_waiters: std::sync::atomic::AtomicUsize,
}

impl Engine {
    fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the I/O thread look at the link: a syscall only when it may be asleep.
    fn wake(&self) {
        if thread::current().id() != self.thread && !self.wake_pending.swap(true, Ordering::AcqRel)
        {
            let _ = self.waker.wake();
        }
    }
}

/// The link's events, kept in place until the I/O thread takes them (see [`take`]).
type Journal = core_rtm::Events<Box<[u8]>>;

/// The sans-IO link and what it reported, not yet taken for delivery.
struct Core {
    link: Box<CoreLink>,
    /// The events of every call into the link since the I/O thread last took them.
    events: Journal,
    /// Events taken by the I/O thread so far; `events.recorded()` and `lost()` when it
    /// last took them. With the events recorded since, they count every event (see
    /// [`Core::recorded`]).
    taken: u64,
    recorded_at_take: u32,
    lost_at_take: u32,
    /// What calls registered (request callbacks, observers), each with the count of
    /// events recorded before it: delivered in that order among the events.
    registrations: Vec<(u64, Registration)>,
    /// Subscription records (created and not yet seen deleted), against
    /// `max_subscriptions`.
    subs: usize,
    max_subs: usize,
    epoch: StdInstant,
    /// The transport error behind the client's latest connect failure.
    transport_error: Option<(core_rtm::ConnectError, Arc<ConnectError>)>,
}

impl Core {
    fn now(&self) -> Instant {
        Instant::from_micros(u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX))
    }

    fn parts(&mut self) -> (&mut CoreLink, &mut Journal) {
        (&mut self.link, &mut self.events)
    }

    /// Events recorded so far, ever: the mark [`Client::wait_for_state`] waits for
    /// observers to reach, and where a registration goes among the events.
    fn recorded(&self) -> u64 {
        let since = self.events.recorded().wrapping_sub(self.recorded_at_take);
        self.taken.saturating_add(u64::from(since))
    }

    /// Registers `r` after every event recorded so far.
    fn register(&mut self, r: Registration) {
        let at = self.recorded();
        self.registrations.push((at, r));
    }

    fn dispose(&mut self) {
        let now = self.now();
        let (link, events) = self.parts();
        link.client_mut().dispose(now, events);
    }

    fn last_error(&self) -> Option<ConnectingError> {
        let kind = self.link.client().last_connecting_error()?;
        let transport = match &self.transport_error {
            Some((code, e)) if *code == kind => Some(e.clone()),
            _ => None,
        };
        Some(ConnectingError { kind, transport })
    }
}

/// What connect threads report to the I/O thread. API calls never go through it: they
/// lock the link and queue their work in it (see [`Client::call`]).
enum Msg {
    Connected(u64, Stream),
    ConnectFailed(u64, ConnectError),
}

/// What a call hands the I/O thread besides its request: delivered in order with the
/// events (a request's callback before its replies, say).
enum Registration {
    /// A request's callback.
    Callback(Ticket, Callback),
    /// An `authenticate`'s completion.
    AuthDone(Ticket, AuthDone),
    /// An accepted `subscribe`'s observer (see `Observers`).
    Subscribe(String, Box<dyn SubscriptionObserver>),
    /// `replace_observer`.
    Replace(String, Box<dyn SubscriptionObserver>),
    /// `set_observer`: the client observer from here on.
    Observer(Option<Box<dyn ClientObserver>>),
}

/// The events the I/O thread took from [`Core`], read and delivered with the link
/// unlocked (so observers may call the client).
struct Delivery {
    /// Swapped with the link's: empty whenever it is swapped back. The events keep the
    /// messages they borrow from, so they need the link no longer.
    events: Journal,
    /// The client's encoding (how to show the messages of subscription data).
    encoding: Encoding,
    registrations: VecDeque<(u64, Registration)>,
    /// The count of the next event to deliver, and of the events taken.
    next: u64,
    until: u64,
}

/// Takes the link's events and what calls registered, for delivery with the link
/// unlocked; `false` when there is nothing. The events are swapped out whole, with the
/// messages they keep: the link goes on receiving meanwhile.
fn take(core: &mut Core, d: &mut Delivery) -> bool {
    let until = core.recorded();
    if until == core.taken && core.registrations.is_empty() {
        return false;
    }
    let lost = core.events.lost().wrapping_sub(core.lost_at_take);
    if lost > 0 {
        log::warn!("rtm: {lost} events were dropped: the client's calls made more events than its events buffer holds before the I/O thread took them");
    }
    std::mem::swap(&mut core.events, &mut d.events);
    core.taken = until;
    core.recorded_at_take = core.events.recorded();
    core.lost_at_take = core.events.lost();
    d.registrations.extend(core.registrations.drain(..));
    d.until = until;
    true
}

/// The client state as last reported, for callers that wait for a state.
#[derive(Debug)]
struct StateWatch {
    seen: Mutex<Seen>,
    changed: std::sync::Condvar,
}

/// What observers have been told so far.
#[derive(Debug)]
struct Seen {
    state: ClientState,
    /// Events delivered (see [`Core::taken`]).
    delivered: u64,
    /// The I/O thread has ended.
    ended: bool,
    /// Threads blocked in [`StateWatch::wait`]: a `Condvar` notify is a system call even
    /// with nobody waiting, and the I/O thread would otherwise make one per event.
    waiters: usize,
}

impl StateWatch {
    fn lock(&self) -> MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for a change until `deadline` (`None`: no limit); the guard back either way.
    fn wait<'s>(
        &'s self,
        mut seen: MutexGuard<'s, Seen>,
        deadline: Option<StdInstant>,
    ) -> MutexGuard<'s, Seen> {
        seen.waiters += 1;
        let mut seen = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(StdInstant::now());
                self.changed
                    .wait_timeout(seen, left)
                    .map_or_else(|p| p.into_inner().0, |(s, _)| s)
            }
            None => self
                .changed
                .wait(seen)
                .unwrap_or_else(PoisonError::into_inner),
        };
        seen.waiters -= 1;
        seen
    }

    /// Releases `seen` after a change, waking the threads in [`wait`](Self::wait), if any.
    fn notify(&self, seen: MutexGuard<'_, Seen>) {
        let wake = seen.waiters > 0;
        drop(seen);
        if wake {
            self.changed.notify_all();
        }
    }
}

/// What an `authenticate` caller is told.
type AuthDone = Box<dyn FnOnce(Result<(), String>) + Send>;

/// Observers and callbacks, on the I/O thread only.
#[derive(Default)]
struct Observers {
    client: Option<Box<dyn ClientObserver>>,
    /// `ClientOptions::leave_subscribed_on_completion`.
    hold_leave_subscribed: bool,
    /// Subscriptions whose `Subscribed → Unsubscribing` is held back until the
    /// unsubscribe completes (their next event).
    held: std::collections::HashSet<String>,
    /// The observers registered per subscription key (by `Registration::Subscribe`, in the order
    /// of the core's events), oldest first. The front one gets the key's events until
    /// its `on_deleted`. A `subscribe` while the old record still exists (a cycle) waits
    /// behind it; a `created` leaves only the newest registration, the one the core
    /// created the record for (registrations superseded before that get `on_deleted`).
    /// A slot is empty while its observer runs.
    subs: HashMap<String, VecDeque<Option<Box<dyn SubscriptionObserver>>>>,
    callbacks: Tickets<Callback>,
    auth: Tickets<AuthDone>,
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

impl Client {
    /// Creates a stopped client; nothing connects until [`Client::start`].
    pub fn new(options: ClientOptions) -> Result<Client, Error> {
        Client::with_observer(options, None)
    }

    /// Creates a stopped client with a client observer.
    pub fn with_observer(
        options: ClientOptions,
        observer: Option<Box<dyn ClientObserver>>,
    ) -> Result<Client, Error> {
        let observer = observer.or_else(|| {
            let shared = options.observer.clone()?;
            Some(Box::new(shared) as Box<dyn ClientObserver>)
        });
        let poll = Poll::new().map_err(|_| Error::Disposed)?;
        let waker = Waker::new(poll.registry(), WAKER).map_err(|_| Error::Disposed)?;
        let (tx, rx) = mpsc::channel();
        let watch = Arc::new(StateWatch {
            seen: Mutex::new(Seen {
                state: ClientState::Stopped,
                delivered: 0,
                ended: false,
                waiters: 0,
            }),
            changed: std::sync::Condvar::new(),
        });
        let max_subs = options.max_subscriptions;
        let thread_watch = watch.clone();
        crate::logging::init_from_env();
        let config = core_rtm::Config {
            reconnect_interval: options.reconnect_interval,
            max_reconnect_interval: options.max_reconnect_interval,
            fail_count_threshold: options.fail_count_threshold,
            restore_auth_on_reconnect: options.restore_auth_on_reconnect,
            max_queue_size: options.max_queue_size,
            retry_first_connect: options.retry_first_connect,
            wait_before_first_reconnect: options.wait_before_first_reconnect,
            // A zero seed turns the core's jitter off.
            jitter_seed: if options.reconnect_jitter { seed() } else { 0 },
            connect_timeout: options.transport.connect_timeout,
            encoding: options.encoding,
            max_message_size: options.max_outgoing_message_size,
            ..core_rtm::Config::default()
        };
        let link_config = core_rtm::LinkConfig {
            ping_interval: options.ping_interval,
            dead_peer_timeout: options.dead_peer_timeout,
            user_agent: Some(concat!("benchlink/", env!("CARGO_PKG_VERSION"))),
            seed: seed(),
            ..core_rtm::LinkConfig::DEFAULT
        };
        // The link is built on the I/O thread (its tables are heap slices: the link itself
        // is a few kilobytes), and the engine handed back here.
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let join = thread::Builder::new()
            .name("benchlink-rtm".into())
            // As a main thread's, for the callbacks.
            .stack_size(8 << 20)
            .spawn(move || {
                let (endpoint, appkey) = (&options.transport.endpoint, &options.transport.appkey);
                let built = subscriptions(&options).and_then(|subscriptions| {
                    CoreLink::new(
                        config,
                        link_config,
                        endpoint,
                        appkey,
                        buffers(&options),
                        subscriptions,
                        InFlightTable {
                            entries: Vec::new(),
                            max: max_in_flight(&options),
                        },
                    )
                    .map(Box::new)
                    .map_err(|e| e.to_string())
                });
                let link = match built {
                    Ok(link) => link,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let engine = Arc::new(Engine {
                    core: Mutex::new(Core {
                        link,
                        events: journal(&options),
                        taken: 0,
                        recorded_at_take: 0,
                        lost_at_take: 0,
                        registrations: Vec::new(),
                        subs: 0,
                        max_subs,
                        epoch: StdInstant::now(),
                        transport_error: None,
                    }),
                    wake_pending: AtomicBool::new(false),
                    room: std::sync::Condvar::new(),
                    room_waiters: std::sync::atomic::AtomicUsize::new(0),
                    waker,
                    thread: thread::current().id(),
                });
                if ready_tx.send(Ok(engine.clone())).is_err() {
                    return;
                }
                let delivery = Delivery {
                    events: journal(&options),
                    encoding: options.encoding,
                    registrations: VecDeque::new(),
                    next: 0,
                    until: 0,
                };
                let io = Io {
                    inbox: Inbox {
                        buf: vec![0; READ_CHUNK].into_boxed_slice(),
                        at: 0,
                        end: 0,
                    },
                    poll,
                    transport: options.transport,
                    socket: None,
                    registered: false,
                    readable: false,
                    blocked: false,
                    generation: 0,
                    connecting: false,
                    tx,
                    engine,
                };
                let observers = Observers {
                    client: observer,
                    hold_leave_subscribed: options.leave_subscribed_on_completion,
                    ..Observers::default()
                };
                run_loop(io, rx, thread_watch, observers, delivery);
            })
            .map_err(|_| Error::Disposed)?;
        let thread = join.thread().id();
        let engine = match ready_rx.recv() {
            Ok(Ok(engine)) => engine,
            Ok(Err(e)) => {
                let _ = join.join();
                return Err(Error::Connect(e));
            }
            Err(_) => return Err(Error::Disposed),
        };
        Ok(Client {
            shared: Arc::new(Shared {
                engine,
                watch,
                thread,
                join: Mutex::new(Some(join)),
            }),
        })
    }

    /// Runs `f` with the link locked, on the calling thread, and wakes the I/O thread
    /// (a syscall only when it may be asleep). There is no round trip to the I/O thread:
    /// a call never waits for a callback, so a callback that blocks, or that waits for
    /// another thread's call, cannot deadlock the client. The I/O thread holds the lock
    /// only to feed it one read chunk and flush, never while a callback runs.
    fn call<R>(&self, f: impl FnOnce(&mut Core) -> R) -> Result<R, Error> {
        let r = {
            let mut core = self.shared.engine.lock();
            if core.link.client().state() == ClientState::Disposed {
                return Err(Error::Disposed);
            }
            f(&mut core)
        };
        self.shared.engine.wake();
        Ok(r)
    }

    /// Sends a whole PDU the caller serialized, byte for byte (see the core's
    /// `Client::send_raw`): for [`Connection::send`](super::Connection::send).
    pub(crate) fn send_raw(&self, pdu: &str) -> Result<(), Error> {
        self.call(|core| core.link.client_mut().send_raw(pdu))?
            .map_err(Error::Request)
    }

    /// Connects (in the background) and keeps the connection up until [`Client::stop`].
    pub fn start(&self) -> Result<(), Error> {
        self.call(|core| {
            let now = core.now();
            let (link, ev) = core.parts();
            link.client_mut().start(now, ev);
        })
    }

    /// Closes the connection; requests made while stopped are queued until the next start.
    pub fn stop(&self) -> Result<(), Error> {
        self.call(|core| {
            let now = core.now();
            let (link, ev) = core.parts();
            link.client_mut().stop(now, ev);
        })
    }

    /// Finishes all work, closes the connection and ends the I/O thread; the client is
    /// unusable afterwards (calls return [`Error::Disposed`]). Waits up to
    /// [`DISPOSE_WAIT`] for the thread to end (its last callbacks run first); a thread
    /// still busy in a callback then is left to end by itself.
    pub fn dispose(&self) -> Result<(), Error> {
        self.call(Core::dispose)?;
        if thread::current().id() != self.shared.thread {
            let deadline = StdInstant::now().checked_add(DISPOSE_WAIT);
            let mut seen = self.shared.watch.lock();
            while !seen.ended {
                if deadline.is_some_and(|d| d <= StdInstant::now()) {
                    break;
                }
                seen = self.shared.watch.wait(seen, deadline);
            }
            let ended = seen.ended;
            drop(seen);
            let join = self
                .shared
                .join
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            match join {
                Some(join) if ended => {
                    let _ = join.join();
                }
                Some(_) => log::warn!("rtm: the I/O thread is still in a callback: not waiting"),
                None => {}
            }
        }
        Ok(())
    }

    /// Blocks until the client's state satisfies `wanted` (as observers saw it, after
    /// every event caused so far — by this thread's calls included — was delivered) or
    /// `timeout` passes; returns the state reached. Inside a callback it does not wait:
    /// it returns the state observers have seen.
    ///
    /// ```no_run
    /// # use benchlink_std::rtm::{Client, ClientOptions, ClientState};
    /// # let client = Client::new(ClientOptions::new("ws://127.0.0.1:8080", "k"))?;
    /// client.start()?;
    /// let s = client.wait_for_state(|s| matches!(s, ClientState::Connected | ClientState::Stopped), std::time::Duration::from_secs(10));
    /// # Ok::<(), benchlink_std::rtm::Error>(())
    /// ```
    pub fn wait_for_state(
        &self,
        wanted: impl Fn(ClientState) -> bool,
        timeout: Duration,
    ) -> ClientState {
        if thread::current().id() == self.shared.thread {
            return self.shared.watch.lock().state;
        }
        let mark = self.shared.engine.lock().recorded();
        // A timeout too far to represent is none.
        let deadline = StdInstant::now().checked_add(timeout);
        let mut seen = self.shared.watch.lock();
        while !(seen.ended || seen.delivered >= mark && wanted(seen.state)) {
            if deadline.is_some_and(|d| d <= StdInstant::now()) {
                break;
            }
            seen = self.shared.watch.wait(seen, deadline);
        }
        seen.state
    }

    /// Blocks until a request refused with [`RequestError::Full`] may be accepted: until
    /// fewer requests wait (queued, or sent and not answered) than when called, or none
    /// do. Returns whether that happened before `timeout`. `Full` stays at the call, as
    /// the SDK contract says; this is how a producer waits for room instead of failing
    /// (`benchlink rtm publish` reads its input this way, as fast as the link drains).
    /// Inside a callback it fails with [`Error::InCallback`] (the room would come from
    /// the thread that runs it).
    ///
    /// ```no_run
    /// # use benchlink_std::rtm::{Client, ClientOptions, Error};
    /// # use benchlink_core::rtm::RequestError;
    /// # let client = Client::new(ClientOptions::new("ws://127.0.0.1:8080", "k"))?;
    /// # let wait = std::time::Duration::from_secs(60);
    /// for line in ["1", "2", "3"] {
    ///     loop {
    ///         match client.publish_json("ch", line.to_owned(), None) {
    ///             Err(Error::Request(RequestError::Full)) if client.wait_for_room(wait)? => continue,
    ///             other => break other?,
    ///         }
    ///     }
    /// }
    /// # Ok::<(), Error>(())
    /// ```
    pub fn wait_for_room(&self, timeout: Duration) -> Result<bool, Error> {
        if thread::current().id() == self.shared.thread {
            return Err(Error::InCallback);
        }
        let engine = &self.shared.engine;
        let waiting = |core: &Core| {
            let client = core.link.client();
            client
                .queued_requests()
                .saturating_add(client.requests_in_flight())
        };
        let deadline = StdInstant::now().checked_add(timeout);
        let mut core = engine.lock();
        let at_call = waiting(&core);
        engine.room_waiters.fetch_add(1, Ordering::AcqRel);
        let result = loop {
            if core.link.client().state() == ClientState::Disposed {
                break Err(Error::Disposed);
            }
            let now_waiting = waiting(&core);
            if now_waiting == 0 || now_waiting < at_call {
                break Ok(true);
            }
            let left = deadline.map(|d| d.saturating_duration_since(StdInstant::now()));
            core = match left {
                Some(left) if left.is_zero() => break Ok(false),
                Some(left) => engine
                    .room
                    .wait_timeout(core, left)
                    .map_or_else(|p| p.into_inner().0, |(c, _)| c),
                None => engine
                    .room
                    .wait(core)
                    .unwrap_or_else(PoisonError::into_inner),
            };
        };
        engine.room_waiters.fetch_sub(1, Ordering::AcqRel);
        result
    }

    /// True while connected.
    pub fn is_connected(&self) -> bool {
        self.shared.engine.lock().link.client().is_connected()
    }

    /// Why the last connection attempt failed, if it did: the error itself, as the
    /// reference SDK returns the exception (its text is the message to show; its
    /// [`kind`](ConnectingError::kind) and [`transport`](ConnectingError::transport) say
    /// what failed).
    pub fn last_connecting_error(&self) -> Option<ConnectingError> {
        self.shared.engine.lock().last_error()
    }

    /// Publishes `message`, serialized now (later changes to it are not sent) by core's
    /// serializer straight into the record the PDU leaves from — JSON, or CBOR on a CBOR
    /// client; no intermediate string, no second check of the text. A value with no JSON
    /// form (a map keyed by sequences, say) is `InvalidJson`. It is serialized with the
    /// client locked: its `Serialize` must not call the client. With a callback, the
    /// reply (or timeout/disconnect) is delivered to it.
    pub fn publish(
        &self,
        channel: &str,
        message: &impl serde::Serialize,
        callback: Option<Callback>,
    ) -> Result<(), Error> {
        self.batch(|batch| batch.publish(channel, message, callback))
    }

    /// Publishes a message that is already JSON text (copied into the client's queue, so
    /// a caller refused with `Full` still has it to try again).
    pub fn publish_json(
        &self,
        channel: &str,
        json: impl AsRef<str>,
        callback: Option<Callback>,
    ) -> Result<(), Error> {
        self.batch(|batch| batch.publish_json(channel, json.as_ref(), callback))
    }

    /// Publishes one CBOR item as is (a map with a byte string, say) on a client whose
    /// [`ClientOptions::encoding`] is CBOR; a JSON client refuses it (`InvalidJson`).
    ///
    /// ```no_run
    /// use benchlink_std::rtm::{Client, ClientOptions, Encoding};
    /// let options = ClientOptions { encoding: Encoding::Cbor, ..ClientOptions::new("ws://127.0.0.1:8080", "key") };
    /// let client = Client::new(options).unwrap();
    /// client.start().unwrap();
    /// client.publish_cbor("ch", vec![0x42, 0x00, 0xff], None).unwrap(); // h'00ff'
    /// ```
    pub fn publish_cbor(
        &self,
        channel: &str,
        cbor: Vec<u8>,
        callback: Option<Callback>,
    ) -> Result<(), Error> {
        self.request(None, callback, |client, now, ev, ack| {
            let message = Payload::Cbor(&cbor);
            client.publish_payload(now, channel, message, ack, ev)
        })
    }

    /// Reads the channel's value; `args` are more members for the request (e.g.
    /// `filter`, `position`), and the callback, when given, receives `rtm/read/ok` with
    /// `message` (without one the reply is not delivered, as in the reference SDK).
    pub fn read(
        &self,
        channel: &str,
        args: Option<serde_json::Value>,
        callback: Option<Callback>,
    ) -> Result<(), Error> {
        let args = args.map(|a| a.to_string());
        self.request(None, callback, |client, now, ev, ack| {
            client
                .read(now, channel, args.as_deref(), deadline(ack), ev)
                .map(Some)
        })
    }

    /// Writes the channel's value.
    pub fn write(
        &self,
        channel: &str,
        value: &impl serde::Serialize,
        callback: Option<Callback>,
    ) -> Result<(), Error> {
        self.request(None, callback, |client, now, ev, ack| {
            client.write_typed(now, channel, value, ack, ev)
        })
    }

    /// Deletes the channel's value.
    pub fn delete(&self, channel: &str, callback: Option<Callback>) -> Result<(), Error> {
        self.request(None, callback, |client, now, ev, ack| {
            client.delete(now, channel, ack, ev)
        })
    }

    /// Searches channels by prefix (legacy): the callback runs for every reply
    /// (`rtm/search/data`…, then `rtm/search/ok`), each with a `channels` list.
    pub fn search(&self, prefix: &str, callback: Callback) -> Result<(), Error> {
        self.request(None, Some(callback), |client, now, ev, _| {
            client.search(now, prefix, None, ev).map(Some)
        })
    }

    /// Sends any request PDU `{"action": name, "body": body}` (for actions without a
    /// method here); with a callback, every reply to it is delivered (`…/data` parts,
    /// then the final `…/ok` or `…/error`).
    pub fn action(
        &self,
        name: &str,
        body: &serde_json::Value,
        callback: Option<Callback>,
    ) -> Result<(), Error> {
        let body = body.to_string();
        self.request(None, callback, |client, now, ev, ack| {
            client.action(now, name, &body, ack, ev)
        })
    }

    /// Makes several requests under one lock of the client, waking its I/O thread once,
    /// at the end: for a producer with many messages at hand (lines already read, a
    /// file), the lock and the wake-up are paid once per batch instead of once per
    /// message. The requests are queued in order, each with its own result, exactly as
    /// the same calls one by one would queue them.
    ///
    /// The I/O thread waits while `f` runs: keep a batch to what is at hand (hundreds of
    /// messages, not millions) and never wait inside it — not for input, not for room
    /// (on `Full`, end the batch, then [`wait_for_room`](Self::wait_for_room)).
    ///
    /// ```no_run
    /// # use benchlink_std::rtm::{Client, ClientOptions, Error};
    /// # let client = Client::new(ClientOptions::new("ws://127.0.0.1:8080", "k"))?;
    /// let lines = ["{\"n\":1}", "{\"n\":2}", "{\"n\":3}"];
    /// client.batch(|batch| -> Result<(), Error> {
    ///     for line in lines {
    ///         batch.publish_json("ch", line, None)?;
    ///     }
    ///     Ok(())
    /// })?;
    /// # Ok::<(), Error>(())
    /// ```
    pub fn batch<R>(&self, f: impl FnOnce(&mut Batch<'_>) -> R) -> R {
        let engine = &self.shared.engine;
        let core = engine.lock();
        let now = core.now();
        let result = f(&mut Batch { core, now });
        engine.wake();
        result
    }

    /// Queues a request built by `f` straight into the link, from any thread: no round
    /// trip to the I/O thread, and a wake-up only when it may be asleep (a batch of one).
    fn request(
        &self,
        timeout: Option<Duration>,
        callback: Option<Callback>,
        f: impl MakeRequest,
    ) -> Result<(), Error> {
        self.batch(|batch| batch.request(timeout, callback, f))
    }

    /// Publishes and waits for the reply; returns the message's position.
    pub fn publish_sync(
        &self,
        channel: &str,
        message: &impl serde::Serialize,
        timeout: Duration,
    ) -> Result<String, Error> {
        let reply = self.sync(timeout, |client, now, ev, ack| {
            client.publish_typed(now, channel, message, ack, ev)
        })?;
        Ok(reply.field("position").unwrap_or_default())
    }

    /// Reads and waits; returns the value as JSON (`null` when never written).
    pub fn read_sync(&self, channel: &str, timeout: Duration) -> Result<serde_json::Value, Error> {
        self.read_sync_with(channel, None, timeout)
    }

    /// [`read_sync`](Self::read_sync) with more members for the request, as the
    /// reference SDK's `read_sync(channel, args, timeout)`.
    pub fn read_sync_with(
        &self,
        channel: &str,
        args: Option<serde_json::Value>,
        timeout: Duration,
    ) -> Result<serde_json::Value, Error> {
        let args = args.map(|a| a.to_string());
        let reply = self.sync(timeout, |client, now, ev, ack| {
            client
                .read(now, channel, args.as_deref(), deadline(ack), ev)
                .map(Some)
        })?;
        Ok(reply
            .json()
            .get("message")
            .cloned()
            .unwrap_or(serde_json::Value::Null))
    }

    /// Sends a request with a deadline of `timeout` and blocks for its outcome; inside a
    /// callback it fails with [`Error::InCallback`] (the reply is delivered on the thread
    /// it would block).
    fn sync(&self, timeout: Duration, f: impl MakeRequest) -> Result<Reply<'static>, Error> {
        if thread::current().id() == self.shared.thread {
            return Err(Error::InCallback);
        }
        let (callback, rx) = Response::channel();
        self.request(Some(timeout), Some(callback), f)?;
        rx.recv().map_err(|_| Error::Disposed)?.into_result()
    }

    /// Authenticates with a role and its secret (HMAC-MD5 role-secret auth); `done`
    /// receives `Ok(())` or why it failed. Remembered and replayed after reconnects.
    pub fn authenticate(
        &self,
        role: &str,
        secret: &str,
        done: impl FnOnce(Result<(), String>) + Send + 'static,
    ) -> Result<(), Error> {
        self.authenticate_with::<auth::RoleSecret>(role, secret, done)
    }

    /// [`authenticate`](Self::authenticate) with another method, the SDK contract's
    /// custom auth delegate: `identity` goes in the handshake, the secret and the
    /// server's reply make the credentials ([`auth::AuthMethod`]). Remembered and
    /// replayed on reconnects like role-secret.
    ///
    /// ```no_run
    /// use benchlink_std::rtm::auth::{AuthMethod, MAX_CREDENTIALS_LEN};
    /// use benchlink_std::rtm::pdu::Pdu;
    /// use benchlink_std::rtm::{Client, ClientOptions};
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
    /// let client = Client::new(ClientOptions::new("ws://127.0.0.1:8080", "appkey"))?;
    /// client.authenticate_with::<Token>("ann", "t0k3n", |result| println!("{result:?}"))?;
    /// # Ok::<(), benchlink_std::rtm::Error>(())
    /// ```
    pub fn authenticate_with<M: auth::AuthMethod>(
        &self,
        identity: &str,
        secret: &str,
        done: impl FnOnce(Result<(), String>) + Send + 'static,
    ) -> Result<(), Error> {
        let role = identity.to_owned();
        let secret = secret.to_owned();
        let result = self.call(move |core| {
            let now = core.now();
            let at = core.recorded();
            let (link, ev) = core.parts();
            let r = link.client_mut().authenticate_with::<M, _>(
                now,
                &role,
                secret.as_bytes(),
                None,
                ev,
            );
            if let Ok(ticket) = r {
                let done = Registration::AuthDone(ticket, Box::new(done));
                core.registrations.push((at, done));
            }
            r
        })?;
        result.map(|_| ()).map_err(Error::Request)
    }

    /// Authenticates and waits up to `timeout`.
    pub fn authenticate_sync(
        &self,
        role: &str,
        secret: &str,
        timeout: Duration,
    ) -> Result<(), Error> {
        if thread::current().id() == self.shared.thread {
            return Err(Error::InCallback);
        }
        let (tx, rx) = mpsc::channel();
        self.authenticate(role, secret, move |r| {
            let _ = tx.send(r);
        })?;
        match rx.recv_timeout(timeout) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(Error::Auth(why)),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(Error::Timeout),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(Error::Disposed),
        }
    }

    /// Subscribes to a channel (or, with a `filter`, to a view keyed by
    /// `channel_or_id`) in `mode`; `observer` receives the data and state changes. The
    /// subscription survives reconnects and `stop()`/`start()`.
    pub fn subscribe(
        &self,
        channel_or_id: &str,
        mode: Mode,
        observer: impl SubscriptionObserver + 'static,
        options: SubscribeOptions,
    ) -> Result<(), Error> {
        let key = channel_or_id.to_owned();
        let observer: Box<dyn SubscriptionObserver> = Box::new(observer);
        let result = self.call(move |core| {
            let extras = options.extra.as_ref().map(|v| v.to_string());
            let args = SubscribeArgs {
                position: options.position.as_deref(),
                history: options.history,
                filter: options.filter.as_deref(),
                period: options.period,
                only_value_changes: options.only_value_changes,
                force: false,
                extras: extras.as_deref(),
            };
            let fresh = core.link.client().subscription_state(&key).is_none();
            if fresh && core.subs >= core.max_subs {
                return Err(RequestError::TooManySubscriptions);
            }
            let now = core.now();
            // Registered before the events of this call (`created` among them).
            let at = core.recorded();
            let (link, ev) = core.parts();
            let r = link.client_mut().subscribe(now, &key, mode, args, ev);
            if r.is_ok() {
                core.registrations
                    .push((at, Registration::Subscribe(key, observer)));
                // A new key's record is created at once.
                core.subs += usize::from(fresh);
            }
            r
        })?;
        result.map_err(Error::Request)
    }

    /// Sets the client observer, or removes it with `None` — at any time, as the reference
    /// SDK's `client.observer = …`. It gets the state changes that follow the call, in
    /// order with everything else the client reports (one made inside a callback applies
    /// from the next state change: a transition's leave and enter go to one observer).
    ///
    /// ```
    /// use benchlink_std::rtm::{Client, ClientObserver, ClientOptions};
    /// struct Log;
    /// impl ClientObserver for Log {
    ///     fn on_enter_disposed(&mut self) { println!("disposed"); }
    /// }
    /// let client = Client::new(ClientOptions::new("ws://127.0.0.1:9", "key")).unwrap();
    /// client.set_observer(Some(Box::new(Log))).unwrap();
    /// client.dispose().unwrap(); // prints "disposed"
    /// ```
    pub fn set_observer(&self, observer: Option<Box<dyn ClientObserver>>) -> Result<(), Error> {
        self.call(move |core| core.register(Registration::Observer(observer)))
    }

    /// Replaces the observer of an existing subscription (its state is unchanged).
    pub fn replace_observer(
        &self,
        channel_or_id: &str,
        observer: impl SubscriptionObserver + 'static,
    ) -> Result<(), Error> {
        let key = channel_or_id.to_owned();
        let observer: Box<dyn SubscriptionObserver> = Box::new(observer);
        self.call(move |core| {
            if core.link.client().subscription_state(&key).is_none() {
                return Err(Error::Request(RequestError::UnknownSubscription));
            }
            core.register(Registration::Replace(key, observer));
            Ok(())
        })?
    }

    /// Unsubscribes; completion shows as the observer's `on_leave_subscribed` and then
    /// `on_deleted`.
    pub fn unsubscribe(&self, channel_or_id: &str) -> Result<(), Error> {
        let key = channel_or_id.to_owned();
        self.call(move |core| {
            let now = core.now();
            let (link, ev) = core.parts();
            link.client_mut().unsubscribe(now, &key, ev)
        })?
        .map_err(Error::Request)
    }
}

/// What queues one request in the client (at its time, with the events it reports),
/// given how its reply is wanted: the body of [`Batch::request`].
trait MakeRequest:
    FnOnce(&mut CoreClient, Instant, &mut Journal, Ack) -> Result<Option<Ticket>, RequestError>
{
}

impl<F> MakeRequest for F where
    F: FnOnce(&mut CoreClient, Instant, &mut Journal, Ack) -> Result<Option<Ticket>, RequestError>
{
}

/// Requests made under one lock of the client: see [`Client::batch`].
pub struct Batch<'c> {
    core: MutexGuard<'c, Core>,
    /// The batch's clock reading, shared by its requests.
    now: Instant,
}

impl Batch<'_> {
    /// [`Client::publish`], in the batch.
    pub fn publish(
        &mut self,
        channel: &str,
        message: &impl serde::Serialize,
        callback: Option<Callback>,
    ) -> Result<(), Error> {
        self.request(None, callback, |client, now, ev, ack| {
            client.publish_typed(now, channel, message, ack, ev)
        })
    }

    /// [`Client::publish_json`], in the batch.
    pub fn publish_json(
        &mut self,
        channel: &str,
        json: &str,
        callback: Option<Callback>,
    ) -> Result<(), Error> {
        self.request(None, callback, |client, now, ev, ack| {
            client.publish(now, channel, json, ack, ev)
        })
    }

    /// Queues a request built by `f`. With a callback the request is acked, with a
    /// deadline of `timeout` from now when one is given; the callback is registered among
    /// the events, before any reply to it.
    fn request(
        &mut self,
        timeout: Option<Duration>,
        callback: Option<Callback>,
        f: impl MakeRequest,
    ) -> Result<(), Error> {
        let (core, now) = (&mut *self.core, self.now);
        let ack = match (&callback, timeout) {
            (None, _) => Ack::None,
            (Some(_), t) => Ack::Reply {
                deadline: t.map(|t| now.saturating_add(t)),
            },
        };
        // Registered before the events of this call: a reply may be among them.
        let at = core.recorded();
        let (link, events) = core.parts();
        let result = f(link.client_mut(), now, events, ack);
        if let (Ok(Some(ticket)), Some(cb)) = (&result, callback) {
            core.registrations
                .push((at, Registration::Callback(*ticket, cb)));
        }
        match result {
            Ok(_) => Ok(()),
            Err(RequestError::Disposed) => Err(Error::Disposed),
            Err(e) => Err(Error::Request(e)),
        }
    }
}

fn deadline(ack: Ack) -> Option<Instant> {
    match ack {
        Ack::Reply { deadline } => deadline,
        Ack::None => None,
    }
}

fn seed() -> u64 {
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    u64::from_le_bytes(b) | 1
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
                                engine.wake_pending.store(true, Ordering::Release);
                                let _ = engine.waker.wake();
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
                let code = core_error(&e);
                core.transport_error = Some((code, Arc::new(e)));
                let (link, events) = core.parts();
                link.handle_connect_failed(now, code, events);
            }
        }
    }
}

fn core_error(e: &ConnectError) -> core_rtm::ConnectError {
    match e {
        ConnectError::Url(_) => core_rtm::ConnectError::Protocol,
        ConnectError::Io(io) if io.kind() == io::ErrorKind::TimedOut => {
            core_rtm::ConnectError::Timeout
        }
        ConnectError::Io(io) => core_rtm::ConnectError::Io {
            code: io.raw_os_error().unwrap_or(0),
        },
        ConnectError::Proxy { status } => core_rtm::ConnectError::Proxy { status: *status },
        ConnectError::Http(_) => core_rtm::ConnectError::Protocol,
    }
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
        drop(core);
        // Requests went out or were answered this turn: a caller waiting for room looks.
        if engine.room_waiters.load(Ordering::Acquire) > 0 {
            engine.room.notify_all();
        }
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
    // What a call queued after the last delivery (dispose's own events: the queued
    // requests' `Disconnected`) is delivered before the thread ends.
    while take(&mut engine.lock(), &mut delivery) {
        deliver(&engine, &watch, &observers, &mut delivery);
    }
    // Fail whatever still waits, so no caller blocks forever.
    observers.borrow_mut().callbacks.clear();
    let mut seen = watch.lock();
    seen.ended = true;
    watch.notify(seen);
    engine.room.notify_all();
}

/// Delivers the events [`take`] took, in order, one at a time, with the link unlocked
/// (so callbacks may call the client), and what calls registered among them. A
/// panicking callback stops the client (and is reported), instead of killing the I/O
/// thread.
fn deliver(engine: &Engine, watch: &StateWatch, observers: &RefCell<Observers>, d: &mut Delivery) {
    let Delivery {
        events,
        encoding,
        registrations,
        next,
        until,
    } = d;
    while let Some(event) = events.poll_kept() {
        register(observers, registrations, *next);
        *next = next.saturating_add(1);
        let state = match event {
            Event::ClientState { enter, .. } => Some(enter),
            _ => None,
        };
        if let Event::SubscriptionDeleted { .. } = event {
            // Room for another before its observer hears it (and may subscribe again).
            let mut core = engine.lock();
            core.subs = core.subs.saturating_sub(1);
        }
        let ok = catch_unwind(AssertUnwindSafe(|| tell(observers, event, *encoding))).is_ok();
        if let Some(state) = state {
            let mut seen = watch.lock();
            seen.state = state;
            seen.delivered = *next;
            watch.notify(seen);
        }
        if !ok {
            log::error!("rtm: a callback panicked: stopping the client");
            let mut core = engine.lock();
            let now = core.now();
            let (link, events) = core.parts();
            link.client_mut().stop(now, events);
        }
    }
    // Events dropped for room (logged when taken) are counted as delivered.
    *next = *until;
    register(observers, registrations, *next);
    let mut seen = watch.lock();
    seen.delivered = *until;
    watch.notify(seen);
}

/// Applies the registrations made before event number `next`.
fn register(
    observers: &RefCell<Observers>,
    registrations: &mut VecDeque<(u64, Registration)>,
    next: u64,
) {
    while registrations.front().is_some_and(|(at, _)| *at <= next) {
        let Some((_, r)) = registrations.pop_front() else {
            return;
        };
        let mut obs = observers.borrow_mut();
        match r {
            Registration::Callback(ticket, cb) => obs.callbacks.insert(ticket.get(), cb),
            Registration::AuthDone(ticket, done) => obs.auth.insert(ticket.get(), done),
            Registration::Subscribe(key, observer) => {
                obs.subs.entry(key).or_default().push_back(Some(observer));
            }
            Registration::Observer(observer) => obs.client = observer,
            Registration::Replace(key, observer) => {
                if let Some(slot) = obs.subs.get_mut(&key).and_then(VecDeque::back_mut) {
                    *slot = Some(observer);
                }
            }
        }
    }
}

/// What a request callback is told of `outcome`.
fn response(outcome: Outcome<'_>) -> Response<'_> {
    match outcome {
        Outcome::Ok(p) | Outcome::Error(p) | Outcome::Data(p) => {
            Response::Reply(Reply::from_pdu(&p))
        }
        Outcome::Timeout => Response::Timeout,
        Outcome::Disconnected => Response::Disconnected,
    }
}

/// Calls the observer methods of one event. The observer is taken out of the table while
/// it runs, so it may call the client freely.
fn tell(observers: &RefCell<Observers>, event: Event<'_>, encoding: Encoding) {
    // An unsubscribe's `Subscribed → Unsubscribing` is told when it completes: held until
    // the subscription's next event, then told before it.
    let key = match event {
        Event::SubscriptionState {
            key,
            leave: SubState::Subscribed,
            enter: SubState::Unsubscribing,
        } => {
            let mut obs = observers.borrow_mut();
            if obs.hold_leave_subscribed {
                obs.held.insert(key.to_owned());
                return;
            }
            None
        }
        Event::SubscriptionState { key, .. }
        | Event::SubscriptionFailed { key, .. }
        | Event::SubscriptionDeleted { key } => Some(key),
        _ => None,
    };
    if let Some(key) = key {
        if observers.borrow_mut().held.remove(key) {
            with_sub(observers, key, |o| {
                o.on_leave_subscribed();
                o.on_enter_unsubscribing();
            });
        }
    }
    match event {
        Event::ClientState { leave, enter } => with_client(observers, |o| {
            match leave {
                ClientState::Stopped => o.on_leave_stopped(),
                ClientState::Connecting => o.on_leave_connecting(),
                ClientState::Connected => o.on_leave_connected(),
                ClientState::Stopping => o.on_leave_stopping(),
                ClientState::Awaiting => o.on_leave_awaiting(),
                ClientState::Disposed => {}
            }
            match enter {
                ClientState::Stopped => o.on_enter_stopped(),
                ClientState::Connecting => o.on_enter_connecting(),
                ClientState::Connected => o.on_enter_connected(),
                ClientState::Stopping => o.on_enter_stopping(),
                ClientState::Awaiting => o.on_enter_awaiting(),
                ClientState::Disposed => o.on_enter_disposed(),
            }
        }),
        Event::InternalError(e) => {
            log::warn!("rtm: {e}");
            let e = e.to_string();
            with_client(observers, |o| o.on_internal_error(&e));
        }
        Event::LinkClosed(why) => {
            log::info!("rtm: connection ended: {why}");
            let why = why.to_string();
            with_client(observers, |o| o.on_link_closed(&why));
        }
        Event::FastForward { key, .. } => with_client(observers, |o| o.on_fast_forward(key)),
        Event::Reply { ticket, outcome } => {
            let cb = observers.borrow_mut().callbacks.remove(ticket.get());
            if let Some(mut cb) = cb {
                let last = outcome.is_final();
                cb(response(outcome));
                if !last {
                    observers.borrow_mut().callbacks.insert(ticket.get(), cb);
                }
            }
        }
        Event::Auth { ticket, result } => {
            let done = observers.borrow_mut().auth.remove(ticket.get());
            if let Some(done) = done {
                done(if result.is_done() {
                    Ok(())
                } else {
                    Err(result.to_string())
                });
            }
        }
        Event::SubscriptionCreated { key } => {
            // The record is created for the newest registration; older ones left behind
            // (superseded by an unsubscribe and a new subscribe before the old record
            // was gone) never got a record: they only see `on_deleted`.
            loop {
                let stale = {
                    let mut obs = observers.borrow_mut();
                    match obs.subs.get_mut(key) {
                        Some(slots) if slots.len() > 1 => slots.pop_front(),
                        _ => None,
                    }
                };
                match stale {
                    Some(Some(mut o)) => o.on_deleted(),
                    Some(None) => {}
                    None => break,
                }
            }
            with_sub(observers, key, |o| o.on_created());
        }
        Event::SubscriptionDeleted { key } => {
            // The front observer is done; the next registration (if any) takes over.
            let taken = {
                let mut obs = observers.borrow_mut();
                let front = obs.subs.get_mut(key).and_then(VecDeque::pop_front);
                if obs.subs.get(key).is_some_and(VecDeque::is_empty) {
                    obs.subs.remove(key);
                }
                front.flatten()
            };
            if let Some(mut o) = taken {
                o.on_deleted();
            }
        }
        Event::SubscriptionState { key, leave, enter } => with_sub(observers, key, |o| {
            match leave {
                SubState::Unsubscribed => o.on_leave_unsubscribed(),
                SubState::Subscribing => o.on_leave_subscribing(),
                SubState::Subscribed => o.on_leave_subscribed(),
                SubState::Unsubscribing => o.on_leave_unsubscribing(),
                SubState::Failed => o.on_leave_failed(),
            }
            match enter {
                SubState::Unsubscribed => o.on_enter_unsubscribed(),
                SubState::Subscribing => o.on_enter_subscribing(),
                SubState::Subscribed => o.on_enter_subscribed(),
                SubState::Unsubscribing => o.on_enter_unsubscribing(),
                // Reported with its reason by `SubscriptionFailed`.
                SubState::Failed => {}
            }
        }),
        Event::SubscriptionFailed { key, reason } => {
            let reason = reason
                .reason_text()
                .map_or_else(|| "Unknown error".to_owned(), text);
            with_sub(observers, key, |o| o.on_enter_failed(&reason));
        }
        Event::SubscriptionReply { key, reply } => {
            let reply = Reply::from_pdu(&reply);
            with_sub(observers, key, |o| o.on_reply(&reply));
        }
        Event::SubscriptionData { key, data } => {
            let data = SubscriptionData::from_core(data, encoding);
            with_sub(observers, key, |o| o.on_subscription_data(&data));
        }
        // Events a newer core reports that this client has no observer method for.
        _ => {}
    }
}

/// Runs `f` with the client observer, taken out of the table meanwhile. The observer is
/// kept even when `f` panics (the panic goes on, to stop the client).
fn with_client(observers: &RefCell<Observers>, f: impl FnOnce(&mut dyn ClientObserver)) {
    let taken = observers.borrow_mut().client.take();
    if let Some(mut o) = taken {
        let r = catch_unwind(AssertUnwindSafe(|| f(o.as_mut())));
        observers.borrow_mut().client.get_or_insert(o);
        if let Err(panic) = r {
            resume_unwind(panic);
        }
    }
}

/// Runs `f` with the observer that gets `key`'s events (the front one), taken out of the
/// table meanwhile. The observer is kept even when `f` panics (the panic goes on, to stop
/// the client), unless the callback replaced it.
fn with_sub(
    observers: &RefCell<Observers>,
    key: &str,
    f: impl FnOnce(&mut dyn SubscriptionObserver),
) {
    let taken = observers
        .borrow_mut()
        .subs
        .get_mut(key)
        .and_then(VecDeque::front_mut)
        .and_then(Option::take);
    if let Some(mut o) = taken {
        let r = catch_unwind(AssertUnwindSafe(|| f(o.as_mut())));
        // Nothing is delivered while a callback runs, so the front is still its slot.
        if let Some(slot) = observers
            .borrow_mut()
            .subs
            .get_mut(key)
            .and_then(VecDeque::front_mut)
        {
            slot.get_or_insert(o);
        }
        if let Err(panic) = r {
            resume_unwind(panic);
        }
    }
}

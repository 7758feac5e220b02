//! The std messaging client: the core's sans-IO [`Link`](core_rtm::Link) (the whole link:
//! upgrade, frames, pings, reconnects, restore, queues, deadlines) driven by one I/O thread
//! per client that only moves bytes (`io_thread`). User calls lock the link and queue their
//! request in it directly, waking the thread only when it was idle; observers and request
//! callbacks run on the I/O thread. What the runner and the calls share is `engine`.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle, ThreadId};
use std::time::{Duration, Instant as StdInstant};

use benchlink_core::rtm::auth;
use benchlink_core::rtm::pdu::{Encoding, History, Payload};
use benchlink_core::rtm::{
    self as core_rtm, Ack, ClientState, Mode, RequestError, SubscribeArgs, Ticket,
};
use benchlink_core::time::Instant;
use mio::{Poll, Waker};

use super::engine::{self, Core, CoreClient, Engine, Journal, Registration, StateWatch};
use super::io_thread;
use super::observer::{ClientObserver, Reply, SharedObserver, SubscriptionObserver};
use super::transport::{ConnectError, TransportOptions};

pub use super::engine::{
    DEFAULT_MAX_IN_FLIGHT_BYTES, DEFAULT_MAX_SUBSCRIPTIONS, IN_FLIGHT_REQUEST_BYTES,
};

/// How long [`Client::dispose`] waits for the I/O thread to end.
pub const DISPOSE_WAIT: Duration = Duration::from_secs(10);

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
    pub(crate) kind: core_rtm::ConnectError,
    pub(crate) transport: Option<Arc<ConnectError>>,
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
    /// The I/O thread's, when a thread runs the client (callbacks run there).
    thread: Option<ThreadId>,
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
        let poll = Poll::new().map_err(|_| Error::Disposed)?;
        let waker = Waker::new(poll.registry(), io_thread::WAKER).map_err(|_| Error::Disposed)?;
        let parts = engine::build(
            &options,
            observer,
            Box::new(move || {
                let _ = waker.wake();
            }),
        )?;
        let (engine, watch) = (parts.engine.clone(), parts.watch.clone());
        let join = io_thread::spawn(poll, options.transport, parts)?;
        Ok(Client::from_parts(engine, watch, Some(join)))
    }

    /// A handle of the client whose runner (the I/O thread, `join`, or an async task)
    /// drives `engine`.
    pub(crate) fn from_parts(
        engine: Arc<Engine>,
        watch: Arc<StateWatch>,
        join: Option<JoinHandle<()>>,
    ) -> Client {
        Client {
            shared: Arc::new(Shared {
                thread: join.as_ref().map(|j| j.thread().id()),
                engine,
                watch,
                join: Mutex::new(join),
            }),
        }
    }

    /// Whether the caller runs on the client's I/O thread (in a callback), where a call
    /// that waits for that thread would wait for itself.
    fn in_callback(&self) -> bool {
        self.shared.thread == Some(thread::current().id())
    }

    /// The link and its events, for the async adapter's runner and calls.
    #[cfg(feature = "tokio")]
    pub(crate) fn engine(&self) -> &Arc<Engine> {
        &self.shared.engine
    }

    /// The state observers have seen, for the async adapter's waits.
    #[cfg(feature = "tokio")]
    pub(crate) fn watch(&self) -> &Arc<StateWatch> {
        &self.shared.watch
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
        if !self.in_callback() {
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

    /// Disposes the client without waiting for its runner to end (the async client
    /// waits for that its own way).
    #[cfg(feature = "tokio")]
    pub(crate) fn dispose_now(&self) -> Result<(), Error> {
        self.call(Core::dispose)
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
        if self.in_callback() {
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
        if self.in_callback() {
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
        if self.in_callback() {
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
        if self.in_callback() {
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

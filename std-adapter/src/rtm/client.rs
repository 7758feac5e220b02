//! The std messaging client: the core's sans-IO client driven by one I/O thread per
//! client (mio: socket readiness, a waker for API calls, the core's next deadline), with
//! observers and request callbacks run on that thread.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io;
use std::os::fd::AsRawFd;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle, ThreadId};
use std::time::{Duration, Instant as StdInstant};

use benchlink_core::rtm::{
    self as core_rtm, Ack, AuthResult, ClientState, FailReason, Handler, InternalError, Mode,
    Outcome, RequestError, SubState, SubscribeArgs, Ticket, Transmit,
};
use benchlink_core::time::Instant;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use tungstenite::Message;

use super::observer::{text, ClientObserver, Reply, SubscriptionData, SubscriptionObserver};
use super::transport::{connect, ConnectError, Socket, TransportOptions};

const SUBS: usize = 512;
const PENDING: usize = 2048;
const QUEUE: usize = 512 << 10;
const OUT: usize = 512 << 10;
type Core = core_rtm::Client<SUBS, PENDING, QUEUE, OUT>;

const WAKER: Token = Token(0);
const SOCKET: Token = Token(1);

/// Options of [`Client::new`], with the reference SDK's defaults.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Where and how to connect.
    pub transport: TransportOptions,
    /// Wait before the first reconnect attempt; doubles with each failure (default 1 s).
    pub reconnect_interval: Duration,
    /// Cap of the wait between attempts (default 300 s).
    pub max_reconnect_interval: Duration,
    /// Reconnect attempts after a drop before giving up (`None`, the default: forever).
    pub fail_count_threshold: Option<u32>,
    /// Replay the last successful authentication after every reconnect (default true).
    pub restore_auth_on_reconnect: bool,
    /// Most requests waiting for the connection or a reply; one more fails with
    /// `Full` at the call (default 20000).
    pub max_queue_size: usize,
    /// Retry a failing *first* connect after `start()` (default false: fail fast).
    pub retry_first_connect: bool,
    /// Send a WebSocket ping after this much silence from the server (default 30 s).
    pub ping_interval: Duration,
    /// Declare the server dead after this much silence, then reconnect (default 60 s).
    pub dead_peer_timeout: Duration,
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
            retry_first_connect: false,
            ping_interval: Duration::from_secs(30),
            dead_peer_timeout: Duration::from_secs(60),
        }
    }
}

/// What a call can fail with.
#[derive(Debug)]
pub enum Error {
    /// The core refused the request (`Full`, too large, invalid JSON, …).
    Request(RequestError),
    /// The message could not be serialized.
    Json(serde_json::Error),
    /// A `_sync` call got no reply in time.
    Timeout,
    /// A `_sync` call's request was in flight when the connection dropped.
    Disconnected,
    /// The server answered with an error PDU.
    Reply(Reply),
    /// Authentication failed.
    Auth(String),
    /// A `Connection` call before `start()` or after the connection closed.
    NotOpen(&'static str),
    /// `make_client` (or `Connection::start`) could not connect: the last connect error.
    Connect(String),
    /// The client was disposed.
    Disposed,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Request(e) => write!(f, "request refused: {e}"),
            Error::Json(e) => write!(f, "message is not serializable: {e}"),
            Error::Timeout => f.write_str("no reply in time"),
            Error::Disconnected => f.write_str("connection lost before the reply"),
            Error::Reply(r) => write!(f, "{}: {}", r.action, r.body),
            Error::Auth(why) => write!(f, "authentication failed: {why}"),
            Error::NotOpen(why) => f.write_str(why),
            Error::Connect(why) => write!(f, "client connection error: {why}"),
            Error::Disposed => f.write_str("client disposed"),
        }
    }
}

impl std::error::Error for Error {}

impl From<RequestError> for Error {
    fn from(e: RequestError) -> Error {
        Error::Request(e)
    }
}

/// How a request ended, as request callbacks see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// The server's reply (`…/ok`, `…/error`, or a `…/data` part of a search).
    Reply(Reply),
    /// The deadline passed.
    Timeout,
    /// The connection dropped with the request in flight.
    Disconnected,
}

/// A request callback.
pub type Callback = Box<dyn FnMut(Response) + Send>;

/// Extra arguments of [`Client::subscribe`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscribeOptions {
    /// Start at this position.
    pub position: Option<String>,
    /// Replay the last `count` messages first.
    pub history_count: Option<u64>,
    /// Replay the last `age` seconds first.
    pub history_age: Option<u64>,
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

struct Shared {
    watch: Arc<StateWatch>,
    tx: Sender<Msg>,
    waker: Arc<Waker>,
    thread: ThreadId,
    join: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Shared {
    /// The last handle is gone and nobody can stop the client any more: dispose it, so
    /// that its thread closes the connection and ends instead of reconnecting forever.
    fn drop(&mut self) {
        let job: Job = Box::new(|inner, events| {
            let now = inner.now();
            inner.core.dispose(now, &mut Collect(events));
            Box::new(|| {})
        });
        // Fails when the thread already ended (disposed).
        if self.tx.send(Msg::Job(job)).is_ok() {
            let _ = self.waker.wake();
        }
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}

/// An API call run on the I/O thread; it returns the completion that hands the result to
/// the caller, run only after the call's events were dispatched (so a caller that then
/// waits for a state sees every state change the call caused).
type Job = Box<dyn FnOnce(&mut Inner, &mut Vec<Ev>) -> Box<dyn FnOnce()> + Send>;

enum Msg {
    Job(Job),
    Connected(u64, Box<Socket>),
    ConnectFailed(u64, ConnectError),
}

/// Owned copies of the core's events, dispatched to observers after the core call
/// returned, so observers may call the client again.
enum Ev {
    State(ClientState, ClientState),
    Reply(Ticket, Response, bool),
    Sub(String, SubState, SubState),
    SubFailed(String, String),
    SubCreated(String),
    SubDeleted(String),
    SubData(String, String),
    FastForward(String),
    Internal(String),
    Auth(Ticket, Result<(), String>),
    /// An accepted `subscribe` registers its observer, in event order (see `Observers`).
    Register(String, Box<dyn SubscriptionObserver>),
    /// `replace_observer`.
    Replace(String, Box<dyn SubscriptionObserver>),
}

struct Collect<'e>(&'e mut Vec<Ev>);

impl Handler for Collect<'_> {
    fn client_state(&mut self, leave: ClientState, enter: ClientState) {
        self.0.push(Ev::State(leave, enter));
    }
    fn reply(&mut self, ticket: Ticket, outcome: Outcome<'_>) {
        let last = outcome.is_final();
        let response = match outcome {
            Outcome::Ok(p) | Outcome::Error(p) | Outcome::Data(p) => {
                Response::Reply(Reply::from_pdu(&p))
            }
            Outcome::Timeout => Response::Timeout,
            Outcome::Disconnected => Response::Disconnected,
        };
        self.0.push(Ev::Reply(ticket, response, last));
    }
    fn subscription_state(&mut self, key: &str, leave: SubState, enter: SubState) {
        self.0.push(Ev::Sub(key.to_owned(), leave, enter));
    }
    fn subscription_failed(&mut self, key: &str, reason: FailReason<'_>) {
        self.0.push(Ev::SubFailed(
            key.to_owned(),
            reason
                .reason_text()
                .map_or_else(|| "Unknown error".to_owned(), text),
        ));
    }
    fn subscription_created(&mut self, key: &str) {
        self.0.push(Ev::SubCreated(key.to_owned()));
    }
    fn subscription_deleted(&mut self, key: &str) {
        self.0.push(Ev::SubDeleted(key.to_owned()));
    }
    fn subscription_data(&mut self, key: &str, data: core_rtm::pdu::SubscriptionData<'_>) {
        // One copy of the frame per data PDU; messages are sliced out of it lazily.
        let mut pdu =
            String::from(r#"{"action":"rtm/subscription/data","body":{"subscription_id":"#);
        pdu.push_str(&serde_json::to_string(&text(data.subscription_id)).unwrap_or_default());
        if let Some(p) = data.position {
            pdu.push_str(r#","position":"#);
            pdu.push_str(&serde_json::to_string(&text(p)).unwrap_or_default());
        }
        pdu.push_str(r#","messages":"#);
        pdu.push_str(data.messages.as_raw());
        pdu.push_str("}}");
        self.0.push(Ev::SubData(key.to_owned(), pdu));
    }
    fn fast_forward(&mut self, key: &str, _info: core_rtm::pdu::SubscriptionInfo<'_>) {
        self.0.push(Ev::FastForward(key.to_owned()));
    }
    fn internal_error(&mut self, error: InternalError<'_>) {
        log::warn!("rtm: {error}");
        self.0.push(Ev::Internal(error.to_string()));
    }
    fn auth(&mut self, ticket: Ticket, result: AuthResult<'_>) {
        let r = if result.is_done() {
            Ok(())
        } else {
            Err(result.to_string())
        };
        self.0.push(Ev::Auth(ticket, r));
    }
}

/// The client state as last reported, for callers that wait for a state.
#[derive(Debug)]
struct StateWatch {
    state: std::sync::Mutex<ClientState>,
    changed: std::sync::Condvar,
}

/// What lives on the I/O thread.
struct Inner {
    watch: Arc<StateWatch>,
    core: Box<Core>,
    epoch: StdInstant,
    transport: TransportOptions,
    socket: Option<Box<Socket>>,
    registered: bool,
    want_write: bool,
    generation: u64,
    connecting: bool,
    last_rx: StdInstant,
    ping_sent: bool,
    ping_interval: Duration,
    dead_peer_timeout: Duration,
    last_error: Option<String>,
    stop_requested: bool,
    tx: Sender<Msg>,
    waker: Arc<Waker>,
}

/// What an `authenticate` caller is told.
type AuthDone = Box<dyn FnOnce(Result<(), String>) + Send>;
/// The I/O thread's state and observers, reachable from callbacks on that thread.
type LoopState = (Rc<RefCell<Inner>>, Rc<RefCell<Observers>>);

/// Observers and callbacks, kept apart from `Inner` so that an observer can call the
/// client (which borrows `Inner`) while it runs.
#[derive(Default)]
struct Observers {
    client: Option<Box<dyn ClientObserver>>,
    /// The observers registered per subscription key (by `Ev::Register`, so in the order
    /// of the core's events), oldest first. The front one gets the key's events until
    /// its `on_deleted`. A `subscribe` while the old record still exists (a cycle) waits
    /// behind it; a `created` leaves only the newest registration, the one the core
    /// created the record for (registrations superseded before that get `on_deleted`).
    /// A slot is empty while its observer runs.
    subs: HashMap<String, VecDeque<Option<Box<dyn SubscriptionObserver>>>>,
    callbacks: HashMap<u32, Callback>,
    auth: HashMap<u32, AuthDone>,
    /// Events not delivered yet, in the order the core emitted them. Events of calls made
    /// from a callback wait here until the running callback returned.
    queue: VecDeque<Ev>,
    /// `dispatch` is delivering `queue` (callbacks never run nested).
    delivering: bool,
}

thread_local! {
    static LOOP: RefCell<Option<LoopState>> = const { RefCell::new(None) };
}

impl Inner {
    fn now(&self) -> Instant {
        Instant::from_micros(u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX))
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
        let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(|_| Error::Disposed)?);
        let (tx, rx) = mpsc::channel();
        let thread_waker = waker.clone();
        let thread_tx = tx.clone();
        let watch = Arc::new(StateWatch {
            state: std::sync::Mutex::new(ClientState::Stopped),
            changed: std::sync::Condvar::new(),
        });
        let thread_watch = watch.clone();
        crate::logging::init_from_env();
        let config = core_rtm::Config {
            reconnect_interval: options.reconnect_interval,
            max_reconnect_interval: options.max_reconnect_interval,
            fail_count_threshold: options.fail_count_threshold,
            restore_auth_on_reconnect: options.restore_auth_on_reconnect,
            max_queue_size: options.max_queue_size,
            retry_first_connect: options.retry_first_connect,
            jitter_seed: seed(),
            connect_timeout: options.transport.connect_timeout.saturating_mul(4),
            ..core_rtm::Config::default()
        };
        let join = thread::Builder::new()
            .name("benchlink-rtm".into())
            // The core client's tables are built in place before boxing.
            .stack_size(16 << 20)
            .spawn(move || {
                let inner = Inner {
                    watch: thread_watch,
                    core: Box::new(Core::new(config)),
                    epoch: StdInstant::now(),
                    transport: options.transport,
                    socket: None,
                    registered: false,
                    want_write: false,
                    generation: 0,
                    connecting: false,
                    last_rx: StdInstant::now(),
                    ping_sent: false,
                    ping_interval: options.ping_interval,
                    dead_peer_timeout: options.dead_peer_timeout,
                    last_error: None,
                    stop_requested: false,
                    tx: thread_tx,
                    waker: thread_waker,
                };
                let observers = Observers {
                    client: observer,
                    ..Observers::default()
                };
                run_loop(poll, rx, inner, observers);
            })
            .map_err(|_| Error::Disposed)?;
        let thread = join.thread().id();
        Ok(Client {
            shared: Arc::new(Shared {
                watch,
                tx,
                waker,
                thread,
                join: std::sync::Mutex::new(Some(join)),
            }),
        })
    }

    /// Runs `f` on the I/O thread and returns its result: directly when called from a
    /// callback (already on that thread), else through the queue.
    fn exec<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Inner, &mut Vec<Ev>) -> R + Send + 'static,
    ) -> Result<R, Error> {
        if thread::current().id() == self.shared.thread {
            let state = LOOP.with(|l| l.borrow().clone());
            let Some((inner, observers)) = state else {
                return Err(Error::Disposed);
            };
            let mut events = Vec::new();
            let r = {
                let Ok(mut inner) = inner.try_borrow_mut() else {
                    return Err(Error::Disposed);
                };
                let r = f(&mut inner, &mut events);
                inner.flush(&mut events);
                r
            };
            dispatch(&inner, &observers, events);
            return Ok(r);
        }
        let (rtx, rrx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |inner, events| {
            let r = f(inner, events);
            Box::new(move || {
                let _ = rtx.send(r);
            })
        });
        self.shared
            .tx
            .send(Msg::Job(job))
            .map_err(|_| Error::Disposed)?;
        self.shared.waker.wake().map_err(|_| Error::Disposed)?;
        rrx.recv().map_err(|_| Error::Disposed)
    }

    /// Registers `observers` changes and runs `f` with the core; used by the calls that
    /// attach callbacks.
    fn exec_with_observers<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Inner, &mut Vec<Ev>) -> R + Send + 'static,
        attach: impl FnOnce(&R, &mut Observers) + Send + 'static,
    ) -> Result<R, Error> {
        self.exec(move |inner, events| {
            let r = f(inner, events);
            LOOP.with(|l| {
                if let Some((_, observers)) = l.borrow().as_ref() {
                    attach(&r, &mut observers.borrow_mut());
                }
            });
            r
        })
    }

    /// Connects (in the background) and keeps the connection up until [`Client::stop`].
    pub fn start(&self) -> Result<(), Error> {
        self.exec(|inner, ev| {
            let now = inner.now();
            inner.core.start(now, &mut Collect(ev));
        })
    }

    /// Closes the connection; requests made while stopped are queued until the next start.
    pub fn stop(&self) -> Result<(), Error> {
        self.exec(|inner, ev| {
            let now = inner.now();
            inner.core.stop(now, &mut Collect(ev));
        })
    }

    /// Finishes all work, closes the connection and ends the I/O thread; the client is
    /// unusable afterwards (calls return [`Error::Disposed`]).
    pub fn dispose(&self) -> Result<(), Error> {
        let r = self.exec(|inner, ev| {
            let now = inner.now();
            inner.core.dispose(now, &mut Collect(ev));
        });
        if thread::current().id() != self.shared.thread {
            if let Some(join) = self
                .shared
                .join
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take()
            {
                let _ = join.join();
            }
        }
        r
    }

    /// Blocks until the client's state satisfies `wanted` (as observers saw it) or
    /// `timeout` passes; returns the state reached. Not for use inside callbacks.
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
        let deadline = StdInstant::now() + timeout;
        let mut state = self
            .shared
            .watch
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while !wanted(*state) {
            let left = deadline.saturating_duration_since(StdInstant::now());
            if left.is_zero() {
                break;
            }
            state = match self.shared.watch.changed.wait_timeout(state, left) {
                Ok((s, _)) => s,
                Err(p) => p.into_inner().0,
            };
        }
        *state
    }

    /// True while connected.
    pub fn is_connected(&self) -> bool {
        self.exec(|inner, _| inner.core.is_connected())
            .unwrap_or(false)
    }

    /// Why the last connection attempt failed, if it did.
    pub fn last_connecting_error(&self) -> Option<String> {
        self.exec(|inner, _| inner.last_error.clone())
            .ok()
            .flatten()
    }

    /// Publishes `message` (serialized now, so later changes to it are not sent).
    /// With a callback, the reply (or timeout/disconnect) is delivered to it.
    pub fn publish(
        &self,
        channel: &str,
        message: &impl serde::Serialize,
        callback: Option<Callback>,
    ) -> Result<(), Error> {
        let json = serde_json::to_string(message).map_err(Error::Json)?;
        self.publish_json(channel, json, callback)
    }

    /// Publishes a message that is already JSON text.
    pub fn publish_json(
        &self,
        channel: &str,
        json: String,
        callback: Option<Callback>,
    ) -> Result<(), Error> {
        let channel = channel.to_owned();
        self.request(callback, move |inner, ev, ack| {
            let now = inner.now();
            inner
                .core
                .publish(now, &channel, &json, ack, &mut Collect(ev))
        })
    }

    /// Reads the channel's value; the callback receives `rtm/read/ok` with `message`.
    pub fn read(
        &self,
        channel: &str,
        args: Option<serde_json::Value>,
        callback: Callback,
    ) -> Result<(), Error> {
        let channel = channel.to_owned();
        let args = args.map(|a| a.to_string());
        self.request(Some(callback), move |inner, ev, ack| {
            let now = inner.now();
            let deadline = match ack {
                Ack::Reply { deadline } => deadline,
                Ack::None => None,
            };
            inner
                .core
                .read(now, &channel, args.as_deref(), deadline, &mut Collect(ev))
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
        let channel = channel.to_owned();
        let json = serde_json::to_string(value).map_err(Error::Json)?;
        self.request(callback, move |inner, ev, ack| {
            let now = inner.now();
            inner
                .core
                .write(now, &channel, &json, ack, &mut Collect(ev))
        })
    }

    /// Deletes the channel's value.
    pub fn delete(&self, channel: &str, callback: Option<Callback>) -> Result<(), Error> {
        let channel = channel.to_owned();
        self.request(callback, move |inner, ev, ack| {
            let now = inner.now();
            inner.core.delete(now, &channel, ack, &mut Collect(ev))
        })
    }

    /// Searches channels by prefix (legacy): the callback runs for every reply
    /// (`rtm/search/data`…, then `rtm/search/ok`), each with a `channels` list.
    pub fn search(&self, prefix: &str, callback: Callback) -> Result<(), Error> {
        let prefix = prefix.to_owned();
        self.request(Some(callback), move |inner, ev, _| {
            let now = inner.now();
            inner
                .core
                .search(now, &prefix, None, &mut Collect(ev))
                .map(Some)
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
        let name = name.to_owned();
        let body = body.to_string();
        self.request(callback, move |inner, ev, ack| {
            let now = inner.now();
            inner.core.action(now, &name, &body, ack, &mut Collect(ev))
        })
    }

    fn request(
        &self,
        callback: Option<Callback>,
        f: impl FnOnce(&mut Inner, &mut Vec<Ev>, Ack) -> Result<Option<Ticket>, RequestError>
            + Send
            + 'static,
    ) -> Result<(), Error> {
        self.request_with(None, callback, f)
    }

    /// Sends a request built by `f`; with a callback it is acked, with a deadline of
    /// `timeout` from now (measured on the I/O thread's clock) when one is given.
    fn request_with(
        &self,
        timeout: Option<Duration>,
        callback: Option<Callback>,
        f: impl FnOnce(&mut Inner, &mut Vec<Ev>, Ack) -> Result<Option<Ticket>, RequestError>
            + Send
            + 'static,
    ) -> Result<(), Error> {
        let acked = callback.is_some();
        let result = self.exec_with_observers(
            move |inner, ev| {
                let ack = match (acked, timeout) {
                    (false, _) => Ack::None,
                    (true, t) => Ack::Reply {
                        deadline: t.map(|t| inner.now().saturating_add(t)),
                    },
                };
                f(inner, ev, ack)
            },
            move |r, observers| {
                if let (Ok(Some(ticket)), Some(cb)) = (r, callback) {
                    observers.callbacks.insert(ticket.get(), cb);
                }
            },
        )?;
        result.map(|_| ()).map_err(Error::Request)
    }

    /// Publishes and waits for the reply; returns the message's position.
    pub fn publish_sync(
        &self,
        channel: &str,
        message: &impl serde::Serialize,
        timeout: Duration,
    ) -> Result<String, Error> {
        let channel = channel.to_owned();
        let json = serde_json::to_string(message).map_err(Error::Json)?;
        let reply = self.sync(timeout, move |inner, ev, ack| {
            let now = inner.now();
            inner
                .core
                .publish(now, &channel, &json, ack, &mut Collect(ev))
        })?;
        Ok(reply.field("position").unwrap_or_default())
    }

    /// Reads and waits; returns the value as JSON (`null` when never written).
    pub fn read_sync(&self, channel: &str, timeout: Duration) -> Result<serde_json::Value, Error> {
        let channel = channel.to_owned();
        let reply = self.sync(timeout, move |inner, ev, ack| {
            let now = inner.now();
            let deadline = match ack {
                Ack::Reply { deadline } => deadline,
                Ack::None => None,
            };
            inner
                .core
                .read(now, &channel, None, deadline, &mut Collect(ev))
                .map(Some)
        })?;
        Ok(reply
            .json()
            .get("message")
            .cloned()
            .unwrap_or(serde_json::Value::Null))
    }

    /// Sends a request with a deadline of `timeout` and blocks for its outcome. Must not
    /// be called from a callback (the reply is delivered on the same thread).
    fn sync(
        &self,
        timeout: Duration,
        f: impl FnOnce(&mut Inner, &mut Vec<Ev>, Ack) -> Result<Option<Ticket>, RequestError>
            + Send
            + 'static,
    ) -> Result<Reply, Error> {
        let (tx, rx) = mpsc::channel();
        let callback: Callback = Box::new(move |r| {
            let _ = tx.send(r);
        });
        self.request_with(Some(timeout), Some(callback), f)?;
        match rx.recv() {
            Ok(Response::Reply(r)) if r.is_ok() => Ok(r),
            Ok(Response::Reply(r)) => Err(Error::Reply(r)),
            Ok(Response::Timeout) => Err(Error::Timeout),
            Ok(Response::Disconnected) => Err(Error::Disconnected),
            Err(_) => Err(Error::Disposed),
        }
    }

    /// Authenticates with a role and its secret (HMAC-MD5 role-secret auth); `done`
    /// receives `Ok(())` or why it failed. Remembered and replayed after reconnects.
    pub fn authenticate(
        &self,
        role: &str,
        secret: &str,
        done: impl FnOnce(Result<(), String>) + Send + 'static,
    ) -> Result<(), Error> {
        let role = role.to_owned();
        let secret = secret.to_owned();
        let result = self.exec_with_observers(
            move |inner, ev| {
                let now = inner.now();
                inner
                    .core
                    .authenticate(now, &role, secret.as_bytes(), None, &mut Collect(ev))
            },
            move |r, observers| {
                if let Ok(ticket) = r {
                    observers.auth.insert(ticket.get(), Box::new(done));
                }
            },
        )?;
        result.map(|_| ()).map_err(Error::Request)
    }

    /// Authenticates and waits up to `timeout`.
    pub fn authenticate_sync(
        &self,
        role: &str,
        secret: &str,
        timeout: Duration,
    ) -> Result<(), Error> {
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
        let result = self.exec(move |inner, ev| {
            let extras = options.extra.as_ref().map(|v| v.to_string());
            let history = match (options.history_count, options.history_age) {
                (Some(n), _) => Some(core_rtm::pdu::History::Count(n)),
                (None, Some(s)) => Some(core_rtm::pdu::History::Age(s)),
                (None, None) => None,
            };
            let args = SubscribeArgs {
                position: options.position.as_deref(),
                history,
                filter: options.filter.as_deref(),
                period: options.period,
                only_value_changes: options.only_value_changes,
                force: false,
                extras: extras.as_deref(),
            };
            let now = inner.now();
            let at = ev.len();
            let r = inner
                .core
                .subscribe(now, &key, mode, args, &mut Collect(ev));
            if r.is_ok() {
                // Registered before the events of this call (`created` among them).
                ev.insert(at, Ev::Register(key, observer));
            }
            r
        })?;
        result.map_err(Error::Request)
    }

    /// Replaces the observer of an existing subscription (its state is unchanged).
    pub fn replace_observer(
        &self,
        channel_or_id: &str,
        observer: impl SubscriptionObserver + 'static,
    ) -> Result<(), Error> {
        let key = channel_or_id.to_owned();
        let observer: Box<dyn SubscriptionObserver> = Box::new(observer);
        self.exec(move |inner, ev| {
            if inner.core.subscription_state(&key).is_none() {
                return Err(Error::Request(RequestError::UnknownSubscription));
            }
            ev.push(Ev::Replace(key, observer));
            Ok(())
        })?
    }

    /// Unsubscribes; completion shows as the observer's `on_leave_subscribed` and then
    /// `on_deleted`.
    pub fn unsubscribe(&self, channel_or_id: &str) -> Result<(), Error> {
        let key = channel_or_id.to_owned();
        self.exec(move |inner, ev| {
            let now = inner.now();
            inner.core.unsubscribe(now, &key, &mut Collect(ev))
        })?
        .map_err(Error::Request)
    }
}

fn seed() -> u64 {
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    u64::from_le_bytes(b) | 1
}

impl Inner {
    /// Carries out what the core asked for: connect, send, close.
    fn flush(&mut self, events: &mut Vec<Ev>) {
        if self.stop_requested {
            self.stop_requested = false;
            let now = self.now();
            self.core.stop(now, &mut Collect(events));
        }
        while let Some(t) = self.core.poll_transmit() {
            match t {
                Transmit::Connect => {
                    self.generation += 1;
                    self.connecting = true;
                    let generation = self.generation;
                    let transport = self.transport.clone();
                    let tx = self.tx.clone();
                    let waker = self.waker.clone();
                    let spawned = thread::Builder::new()
                        .name("benchlink-rtm-connect".into())
                        .spawn(move || {
                            let msg = match connect(&transport) {
                                Ok(ws) => Msg::Connected(generation, Box::new(ws)),
                                Err(e) => Msg::ConnectFailed(generation, e),
                            };
                            if tx.send(msg).is_ok() {
                                let _ = waker.wake();
                            }
                        });
                    if spawned.is_err() {
                        let now = self.now();
                        self.core.handle_connect_failed(
                            now,
                            core_rtm::ConnectError::Other { code: 0 },
                            &mut Collect(events),
                        );
                    }
                }
                Transmit::Send(pdu) => {
                    if let Some(ws) = self.socket.as_mut() {
                        log::debug!("rtm > {pdu}");
                        if let Err(e) = ws.write(Message::text(pdu)) {
                            log::debug!("rtm: write failed: {e}");
                        }
                        self.want_write = true;
                    }
                }
                Transmit::Close => {
                    if let Some(ws) = self.socket.as_mut() {
                        let _ = ws.close(None);
                        let _ = ws.flush();
                    }
                    self.drop_socket();
                    let now = self.now();
                    self.core.handle_closed(now, &mut Collect(events));
                }
            }
        }
        if self.want_write {
            if let Some(ws) = self.socket.as_mut() {
                match ws.flush() {
                    Ok(()) => self.want_write = false,
                    Err(tungstenite::Error::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => {
                        log::debug!("rtm: flush failed: {e}");
                        self.lost(events);
                    }
                }
            }
        }
    }

    fn drop_socket(&mut self) {
        self.socket = None;
        self.registered = false;
        self.want_write = false;
    }

    /// The connection broke under us.
    fn lost(&mut self, events: &mut Vec<Ev>) {
        if self.socket.is_some() {
            self.drop_socket();
            let now = self.now();
            self.core.handle_closed(now, &mut Collect(events));
        }
    }

    /// Reads every frame available.
    fn read(&mut self, events: &mut Vec<Ev>) {
        loop {
            let Some(ws) = self.socket.as_mut() else {
                return;
            };
            match ws.read() {
                Ok(msg) => {
                    self.last_rx = StdInstant::now();
                    self.ping_sent = false;
                    match msg {
                        Message::Text(t) => {
                            log::debug!("rtm < {}", t.as_str());
                            let now = self.now();
                            self.core
                                .handle_message(now, t.as_str(), &mut Collect(events));
                        }
                        Message::Binary(_) => {
                            log::warn!("rtm: binary frame ignored (JSON protocol)");
                        }
                        Message::Close(_) => {}
                        Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
                    }
                    // tungstenite queues pongs and close replies: send them.
                    self.want_write = true;
                }
                Err(tungstenite::Error::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    log::debug!("rtm: connection ended: {e}");
                    self.lost(events);
                    return;
                }
            }
        }
    }

    /// Liveness: ping after `ping_interval` of silence, give up after `dead_peer_timeout`.
    fn liveness(&mut self, events: &mut Vec<Ev>) -> Option<Duration> {
        self.socket.as_ref()?;
        let quiet = self.last_rx.elapsed();
        if quiet >= self.dead_peer_timeout {
            log::info!("rtm: no data from the server for {quiet:?}: reconnecting");
            self.lost(events);
            return None;
        }
        if quiet >= self.ping_interval && !self.ping_sent {
            if let Some(ws) = self.socket.as_mut() {
                let _ = ws.write(Message::Ping(Vec::new().into()));
                self.want_write = true;
                self.ping_sent = true;
            }
        }
        let next_ping = if self.ping_sent {
            self.dead_peer_timeout
        } else {
            self.ping_interval
        };
        Some(
            next_ping
                .saturating_sub(quiet)
                .min(self.dead_peer_timeout.saturating_sub(quiet)),
        )
    }
}

fn run_loop(mut poll: Poll, rx: Receiver<Msg>, inner: Inner, observers: Observers) {
    let inner = Rc::new(RefCell::new(inner));
    let observers = Rc::new(RefCell::new(observers));
    LOOP.with(|l| *l.borrow_mut() = Some((inner.clone(), observers.clone())));
    let mut events = Events::with_capacity(16);
    loop {
        let mut evs = Vec::new();
        let timeout = {
            let Ok(mut i) = inner.try_borrow_mut() else {
                break;
            };
            // Register a new socket, or update its interest.
            if let Some(ws) = i.socket.as_ref() {
                let fd = ws.get_ref().tcp().as_raw_fd();
                let interest = if i.want_write {
                    Interest::READABLE | Interest::WRITABLE
                } else {
                    Interest::READABLE
                };
                let r = if i.registered {
                    poll.registry()
                        .reregister(&mut SourceFd(&fd), SOCKET, interest)
                } else {
                    poll.registry()
                        .register(&mut SourceFd(&fd), SOCKET, interest)
                };
                if r.is_ok() {
                    i.registered = true;
                }
            }
            // Liveness and flush may lose the connection (→ Awaiting): ask the core for
            // its deadline after them, or the reconnect timer would be missed.
            let live = i.liveness(&mut evs);
            i.flush(&mut evs);
            let core_timeout = i
                .core
                .poll_timeout()
                .map(|t| Duration::from_micros(t.as_micros().saturating_sub(i.now().as_micros())));
            [core_timeout, live].into_iter().flatten().min()
        };
        dispatch(&inner, &observers, std::mem::take(&mut evs));
        if inner.borrow().core.state() == ClientState::Disposed {
            break;
        }
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                log::error!("rtm: poll failed: {e}");
                break;
            }
        }
        {
            let Ok(mut i) = inner.try_borrow_mut() else {
                break;
            };
            // Deadlines first: a request whose time is up (a timeout of 0 included) fails
            // even if its reply is already waiting in the socket.
            let now = i.now();
            i.core.handle_timeout(now, &mut Collect(&mut evs));
            for event in events.iter() {
                if event.token() == SOCKET {
                    i.read(&mut evs);
                    if event.is_writable() {
                        i.want_write = true;
                    }
                }
            }
            i.flush(&mut evs);
        }
        dispatch(&inner, &observers, std::mem::take(&mut evs));
        // API calls and connect results.
        while let Ok(msg) = rx.try_recv() {
            match msg {
                Msg::Job(job) => {
                    let complete = {
                        let Ok(mut i) = inner.try_borrow_mut() else {
                            break;
                        };
                        let complete = job(&mut i, &mut evs);
                        i.flush(&mut evs);
                        complete
                    };
                    dispatch(&inner, &observers, std::mem::take(&mut evs));
                    complete();
                }
                Msg::Connected(generation, ws) => {
                    let Ok(mut i) = inner.try_borrow_mut() else {
                        break;
                    };
                    if generation != i.generation || !i.connecting {
                        continue; // stale: dropping the socket closes it
                    }
                    i.connecting = false;
                    if ws.get_ref().tcp().set_nonblocking(true).is_err() {
                        let now = i.now();
                        i.core.handle_connect_failed(
                            now,
                            core_rtm::ConnectError::Other { code: 0 },
                            &mut Collect(&mut evs),
                        );
                    } else {
                        i.socket = Some(ws);
                        i.registered = false;
                        i.last_rx = StdInstant::now();
                        i.ping_sent = false;
                        i.last_error = None;
                        let now = i.now();
                        i.core.handle_connected(now, &mut Collect(&mut evs));
                        // Frames may have arrived with the 101 already.
                        i.read(&mut evs);
                    }
                    i.flush(&mut evs);
                }
                Msg::ConnectFailed(generation, e) => {
                    let Ok(mut i) = inner.try_borrow_mut() else {
                        break;
                    };
                    if generation != i.generation || !i.connecting {
                        continue;
                    }
                    i.connecting = false;
                    log::info!("rtm: connect failed: {e}");
                    let code = core_error(&e);
                    i.last_error = Some(e.to_string());
                    let now = i.now();
                    i.core
                        .handle_connect_failed(now, code, &mut Collect(&mut evs));
                    i.flush(&mut evs);
                }
            }
            dispatch(&inner, &observers, std::mem::take(&mut evs));
        }
    }
    // Fail whatever still waits, so no caller blocks forever.
    observers.borrow_mut().callbacks.clear();
    LOOP.with(|l| *l.borrow_mut() = None);
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
        ConnectError::Handshake(benchlink_core::ws::HandshakeError::Status { status }) => {
            core_rtm::ConnectError::Rejected { status: *status }
        }
        ConnectError::Handshake(_) => core_rtm::ConnectError::Protocol,
    }
}

/// Runs the observers and callbacks for `events`, in order, one at a time. Called from a
/// callback (the callback called the client), it only queues them: they run after the
/// events already queued, once the running callback returned, so that observers see
/// every transition in order and never run nested. A panicking callback stops the client
/// (and is reported), instead of killing the I/O thread.
fn dispatch(inner: &Rc<RefCell<Inner>>, observers: &Rc<RefCell<Observers>>, events: Vec<Ev>) {
    {
        let mut o = observers.borrow_mut();
        o.queue.extend(events);
        if o.delivering {
            // A callback called the client: its events follow, after that callback.
            return;
        }
        o.delivering = true;
    }
    loop {
        let next = observers.borrow_mut().queue.pop_front();
        let Some(ev) = next else {
            break;
        };
        if let (Ev::State(_, enter), Ok(i)) = (&ev, inner.try_borrow()) {
            *i.watch
                .state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = *enter;
            i.watch.changed.notify_all();
        }
        let ok = catch_unwind(AssertUnwindSafe(|| deliver(observers, ev))).is_ok();
        if !ok {
            log::error!("rtm: a callback panicked: stopping the client");
            if let Ok(mut i) = inner.try_borrow_mut() {
                i.stop_requested = true;
                let mut more = Vec::new();
                i.flush(&mut more);
                drop(i);
                observers.borrow_mut().queue.extend(more);
            }
        }
    }
    observers.borrow_mut().delivering = false;
}

/// Calls one observer method. The observer is taken out of the table while it runs, so
/// it may call the client freely.
fn deliver(observers: &Rc<RefCell<Observers>>, ev: Ev) {
    match ev {
        Ev::State(leave, enter) => with_client(observers, |o| {
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
        Ev::Internal(e) => with_client(observers, |o| o.on_internal_error(&e)),
        Ev::FastForward(key) => with_client(observers, |o| o.on_fast_forward(&key)),
        Ev::Reply(ticket, response, last) => {
            let cb = observers.borrow_mut().callbacks.remove(&ticket.get());
            if let Some(mut cb) = cb {
                cb(response);
                if !last {
                    observers
                        .borrow_mut()
                        .callbacks
                        .entry(ticket.get())
                        .or_insert(cb);
                }
            }
        }
        Ev::Auth(ticket, result) => {
            let done = observers.borrow_mut().auth.remove(&ticket.get());
            if let Some(done) = done {
                done(result);
            }
        }
        Ev::Register(key, observer) => {
            observers
                .borrow_mut()
                .subs
                .entry(key)
                .or_default()
                .push_back(Some(observer));
        }
        Ev::Replace(key, observer) => {
            if let Some(slot) = observers
                .borrow_mut()
                .subs
                .get_mut(&key)
                .and_then(VecDeque::back_mut)
            {
                *slot = Some(observer);
            }
        }
        Ev::SubCreated(key) => {
            // The record is created for the newest registration; older ones left behind
            // (superseded by an unsubscribe and a new subscribe before the old record
            // was gone) never got a record: they only see `on_deleted`.
            loop {
                let stale = {
                    let mut obs = observers.borrow_mut();
                    match obs.subs.get_mut(&key) {
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
            with_sub(observers, &key, |o| o.on_created());
        }
        Ev::SubDeleted(key) => {
            // The front observer is done; the next registration (if any) takes over.
            let taken = {
                let mut obs = observers.borrow_mut();
                let front = obs.subs.get_mut(&key).and_then(VecDeque::pop_front);
                if obs.subs.get(&key).is_some_and(VecDeque::is_empty) {
                    obs.subs.remove(&key);
                }
                front.flatten()
            };
            if let Some(mut o) = taken {
                o.on_deleted();
            }
        }
        Ev::Sub(key, leave, enter) => with_sub(observers, &key, |o| {
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
                // Reported with its reason by `SubFailed`.
                SubState::Failed => {}
            }
        }),
        Ev::SubFailed(key, reason) => with_sub(observers, &key, |o| o.on_enter_failed(&reason)),
        Ev::SubData(key, pdu) => with_sub(observers, &key, |o| {
            o.on_subscription_data(&SubscriptionData::new(pdu))
        }),
    }
}

/// Runs `f` with the client observer, taken out of the table meanwhile. The observer is
/// kept even when `f` panics (the panic goes on, to stop the client).
fn with_client(observers: &Rc<RefCell<Observers>>, f: impl FnOnce(&mut dyn ClientObserver)) {
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
    observers: &Rc<RefCell<Observers>>,
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

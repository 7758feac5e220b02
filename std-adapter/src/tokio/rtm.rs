//! The messaging client on tokio: the blocking client's engine — core's sans-IO
//! [`Link`](benchlink_core::rtm::Link) with its memory, the registrations of calls and
//! their delivery in order — driven by one tokio task instead of an I/O thread. So the
//! protocol (frames, PDUs, pings, reconnect with backoff, restore of authentication and
//! subscriptions, the offline queue and `Full`, every deadline) is the same code as the
//! blocking client's and the embassy adapter's: this module only moves bytes between a
//! tokio socket and the link and turns callbacks into futures and streams.
//!
//! ```text
//!  tasks ── Client: publish / read / write / delete / search / subscribe / authenticate
//!    │        (lock the link, queue the request in it, wake the runner)
//!    ▼
//!  engine (core Link + events + registrations) ◀──▶ runner task: Connect → transport::open
//!    │                                                   Transmit → socket write
//!    └── replies → the awaiting futures                  readable → handle_input
//!        data    → each Subscription's stream            deadline → handle_timeout
//! ```
//!
//! # Cancel safety
//! Every request is queued in the link when its future first runs (or, for
//! [`Client::try_publish`], at the call). Dropping a future stops the waiting, never the
//! request: one already queued is sent, and its reply, when it comes, is dropped. A
//! future dropped while it waits for room ([`RequestError::Full`]) has queued nothing.
//! Each method says which case it is.
//!
//! # Backpressure
//! A producer faster than the link waits for room ([`Client::wait_for_room`], which the
//! publishing methods use) instead of growing a queue; a [`Subscription`] whose messages
//! are not taken stops the runner reading the socket once
//! [`SubscribeOptions`]-independent [`SUBSCRIPTION_BUFFER`] bytes wait, so TCP slows the
//! server down and memory stays bounded while the link's deadlines go on.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use benchlink_core::rtm::auth::{self, AuthMethod};
use benchlink_core::rtm::{ClientState, Mode, Output, RequestError, SubState};
use futures_core::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{oneshot, Notify};

use crate::rtm::engine::{self, deliver, finish, take, Core, Engine, Parts, READ_CHUNK, WRITE_PIECES};
use crate::rtm::{
    Callback, ClientOptions, ConnectError, ConnectingError, Error, Reply, Response,
    SubscribeOptions, SubscriptionData, SubscriptionObserver, TransportOptions,
};

use super::transport::{open, Socket};

/// Bytes of messages a [`Subscription`] keeps for its reader before the client stops
/// reading the socket (1 MiB; plus at most one read's worth already taken): what a
/// reader that falls behind costs.
pub const SUBSCRIPTION_BUFFER: usize = 1 << 20;

/// A messaging client on tokio that reconnects by itself and restores its
/// authentication and subscriptions, with the options, defaults and behaviour of the
/// blocking [`rtm::Client`](crate::rtm::Client). Cheap to clone; all clones drive the
/// same connection; dropping the last disposes it.
///
/// ```no_run
/// use benchlink_std::rtm::{ClientOptions, Mode, SubscribeOptions};
/// use benchlink_std::tokio::rtm::Client;
///
/// # #[tokio::main] async fn main() -> Result<(), benchlink_std::rtm::Error> {
/// let client = Client::new(ClientOptions::new("ws://127.0.0.1:8080", "appkey"))?;
/// client.start()?;
/// let mut animals = client.subscribe("animals", Mode::Reliable, SubscribeOptions::default()).await?;
/// let position = client.publish("animals", &serde_json::json!({"who": "zebra"})).await?;
/// let message = animals.next_message().await.expect("subscribed");
/// println!("{} at {position}", message.json);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Client {
    client: crate::rtm::Client,
}

impl Client {
    /// A stopped client whose runner is a task of the current tokio runtime (any
    /// flavour); nothing connects until [`start`](Self::start). Fails outside a runtime.
    ///
    /// ```
    /// use benchlink_std::rtm::{ClientOptions, ClientState};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let client = benchlink_std::tokio::rtm::Client::new(ClientOptions::new("ws://127.0.0.1:9", "key")).unwrap();
    /// assert_eq!(client.state(), ClientState::Stopped);
    /// client.dispose().await.unwrap();
    /// # }
    /// ```
    pub fn new(options: ClientOptions) -> Result<Client, Error> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| Error::Connect(format!("the async client needs a tokio runtime: {e}")))?;
        let notify = Arc::new(Notify::new());
        let wake = notify.clone();
        let parts = engine::build(&options, None, Box::new(move || wake.notify_one()))?;
        let client = crate::rtm::Client::from_parts(parts.engine.clone(), parts.watch.clone(), None);
        runtime.spawn(Runner::new(parts, options.transport, notify).run());
        Ok(Client { client })
    }

    /// Connects (in the background) and keeps the connection up until
    /// [`stop`](Self::stop). Not async: it only tells the runner.
    pub fn start(&self) -> Result<(), Error> {
        self.client.start()
    }

    /// Closes the connection; requests made while stopped wait in the offline queue
    /// until the next start.
    pub fn stop(&self) -> Result<(), Error> {
        self.client.stop()
    }

    /// Closes the connection and ends the runner, after the last events are delivered;
    /// the client is unusable afterwards. Waits for the runner's end.
    ///
    /// # Cancel safety
    /// The client is disposed at the first poll; dropping the future stops only the wait
    /// for the runner's end.
    pub async fn dispose(&self) -> Result<(), Error> {
        let r = self.client.dispose_now();
        let watch = self.client.watch();
        poll_fn(|cx| {
            let mut seen = watch.lock();
            if seen.ended {
                return Poll::Ready(());
            }
            seen.wakers.push(cx.waker().clone());
            Poll::Pending
        })
        .await;
        r
    }

    /// The client's state as its events reported it so far.
    pub fn state(&self) -> ClientState {
        self.client.watch().lock().state
    }

    /// Waits until the state satisfies `wanted` (after every event caused so far was
    /// delivered, as [`rtm::Client::wait_for_state`](crate::rtm::Client::wait_for_state)),
    /// or the client ended; returns the state reached. Bound it with `tokio::time::timeout`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    ///
    /// ```no_run
    /// # use benchlink_std::rtm::{ClientOptions, ClientState};
    /// # async fn f(client: benchlink_std::tokio::rtm::Client) {
    /// client.start().unwrap();
    /// let wait = client.wait_for_state(|s| s == ClientState::Connected);
    /// let state = tokio::time::timeout(std::time::Duration::from_secs(10), wait).await;
    /// # }
    /// ```
    pub async fn wait_for_state(&self, wanted: impl Fn(ClientState) -> bool) -> ClientState {
        let mark = self.client.engine().lock().recorded();
        let watch = self.client.watch();
        poll_fn(|cx| {
            let mut seen = watch.lock();
            if seen.ended || seen.delivered >= mark && wanted(seen.state) {
                return Poll::Ready(seen.state);
            }
            seen.wakers.push(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// True while connected.
    pub fn is_connected(&self) -> bool {
        self.client.is_connected()
    }

    /// Why the last connection attempt failed, if it did (with the transport's error).
    pub fn last_connecting_error(&self) -> Option<ConnectingError> {
        self.client.last_connecting_error()
    }

    /// Waits until a request refused with [`RequestError::Full`] may be accepted: fewer
    /// requests wait (queued, or sent and not answered) than when called, or none do.
    /// The publishing methods wait here by themselves.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    pub async fn wait_for_room(&self) -> Result<(), Error> {
        let engine = self.client.engine();
        let waiting = |core: &Core| {
            let client = core.link.client();
            client
                .queued_requests()
                .saturating_add(client.requests_in_flight())
        };
        let at_call = waiting(&engine.lock());
        poll_fn(|cx| {
            let mut core = engine.lock();
            if core.link.client().state() == ClientState::Disposed {
                return Poll::Ready(Err(Error::Disposed));
            }
            let now = waiting(&core);
            if now == 0 || now < at_call {
                return Poll::Ready(Ok(()));
            }
            core.room_wakers.push(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Publishes `message` (serialized by core's serializer straight into the outgoing
    /// record) and waits for the acknowledgement; returns the message's position. Waits
    /// for room first when the queue is full. While disconnected it waits in the
    /// offline queue and goes out after the reconnect.
    ///
    /// # Cancel safety
    /// Dropped while waiting for room: nothing was queued. Dropped later: the message
    /// is published anyway and its acknowledgement dropped.
    pub async fn publish(
        &self,
        channel: &str,
        message: &(impl serde::Serialize + ?Sized),
    ) -> Result<String, Error> {
        let reply = self
            .acked(|cb| self.client.publish(channel, &message, Some(cb)))
            .await?;
        Ok(reply.field("position").unwrap_or_default())
    }

    /// [`publish`](Self::publish) of a message that is already JSON text.
    ///
    /// # Cancel safety
    /// As [`publish`](Self::publish).
    pub async fn publish_json(&self, channel: &str, json: &str) -> Result<String, Error> {
        let reply = self
            .acked(|cb| self.client.publish_json(channel, json, Some(cb)))
            .await?;
        Ok(reply.field("position").unwrap_or_default())
    }

    /// Publishes without asking for an acknowledgement: returns once the message is
    /// queued in the link (after waiting for room if the queue is full).
    ///
    /// # Cancel safety
    /// Dropped while waiting for room: nothing was queued. Once it returned, the
    /// message goes out (after a reconnect, if need be).
    pub async fn publish_unacked(
        &self,
        channel: &str,
        message: &(impl serde::Serialize + ?Sized),
    ) -> Result<(), Error> {
        loop {
            match self.client.publish(channel, &message, None) {
                Err(Error::Request(RequestError::Full)) => self.wait_for_room().await?,
                other => return other,
            }
        }
    }

    /// Queues an acknowledged publish now, without waiting for room: `Full` at the call
    /// as in the blocking client. The returned [`Ack`] resolves to the reply; keep many
    /// in flight and await them later to pipeline.
    ///
    /// # Cancel safety
    /// The message is queued by this call; dropping the [`Ack`] only drops the reply.
    ///
    /// ```no_run
    /// # async fn f(client: benchlink_std::tokio::rtm::Client) -> Result<(), benchlink_std::rtm::Error> {
    /// let acks: Vec<_> = (0..100).map(|n| client.try_publish("ch", &n)).collect::<Result<_, _>>()?;
    /// for ack in acks {
    ///     ack.await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_publish(
        &self,
        channel: &str,
        message: &(impl serde::Serialize + ?Sized),
    ) -> Result<Ack, Error> {
        let (cb, ack) = Ack::callback();
        self.client.publish(channel, &message, Some(cb))?;
        Ok(ack)
    }

    /// Reads the channel's value (`null` when never written).
    ///
    /// # Cancel safety
    /// Dropped while waiting for room: nothing was sent; later: the reply is dropped.
    pub async fn read(&self, channel: &str) -> Result<serde_json::Value, Error> {
        self.read_with(channel, None).await
    }

    /// [`read`](Self::read) with more members for the request (`position`, …).
    ///
    /// # Cancel safety
    /// As [`read`](Self::read).
    pub async fn read_with(
        &self,
        channel: &str,
        args: Option<serde_json::Value>,
    ) -> Result<serde_json::Value, Error> {
        let reply = self
            .acked(|cb| self.client.read(channel, args.clone(), Some(cb)))
            .await?;
        Ok(reply
            .json()
            .get("message")
            .cloned()
            .unwrap_or(serde_json::Value::Null))
    }

    /// Writes the channel's value and waits for the reply (`rtm/write/ok`).
    ///
    /// # Cancel safety
    /// Dropped while waiting for room: nothing was sent; later: the value is written
    /// anyway and the reply dropped.
    pub async fn write(
        &self,
        channel: &str,
        value: &(impl serde::Serialize + ?Sized),
    ) -> Result<Reply<'static>, Error> {
        self.acked(|cb| self.client.write(channel, &value, Some(cb)))
            .await
    }

    /// Deletes the channel's value and waits for the reply.
    ///
    /// # Cancel safety
    /// As [`write`](Self::write).
    pub async fn delete(&self, channel: &str) -> Result<Reply<'static>, Error> {
        self.acked(|cb| self.client.delete(channel, Some(cb))).await
    }

    /// Searches channels by prefix: a stream of the server's `channels` lists, one item
    /// per reply, ending after the last (`rtm/search/ok`).
    ///
    /// # Cancel safety
    /// The request is queued by this call (`Full` when there is no room); dropping the
    /// stream drops the replies that follow.
    pub fn search(&self, prefix: &str) -> Result<Search, Error> {
        let feed = Arc::new(Mutex::new(SearchFeed::default()));
        let sink = feed.clone();
        let callback: Callback = Box::new(move |response: Response<'_>| {
            let item = match response.to_owned().into_result() {
                Ok(reply) => Ok(reply
                    .json()
                    .get("channels")
                    .and_then(|c| serde_json::from_value(c.clone()).ok())
                    .unwrap_or_default()),
                Err(e) => Err(e),
            };
            let last = !matches!(&response, Response::Reply(r) if r.action.ends_with("/data"));
            let mut feed = sink.lock().unwrap_or_else(PoisonError::into_inner);
            feed.items.push_back(item);
            feed.done |= last;
            if let Some(waker) = feed.waker.take() {
                waker.wake();
            }
        });
        self.client.search(prefix, callback)?;
        Ok(Search { feed })
    }

    /// Authenticates with a role and its secret (HMAC-MD5 role-secret); remembered and
    /// replayed after every reconnect.
    ///
    /// # Cancel safety
    /// The handshake is queued at the first poll and goes on when the future is
    /// dropped; its outcome is then dropped (a success is still replayed on reconnects).
    pub async fn authenticate(&self, role: &str, secret: &str) -> Result<(), Error> {
        self.authenticate_with::<auth::RoleSecret>(role, secret)
            .await
    }

    /// [`authenticate`](Self::authenticate) with another [`AuthMethod`] (the custom
    /// authentication of the SDK contract).
    ///
    /// # Cancel safety
    /// As [`authenticate`](Self::authenticate).
    pub async fn authenticate_with<M: AuthMethod>(
        &self,
        identity: &str,
        secret: &str,
    ) -> Result<(), Error> {
        loop {
            let (tx, rx) = oneshot::channel();
            let queued = self.client.authenticate_with::<M>(identity, secret, move |r| {
                let _ = tx.send(r);
            });
            match queued {
                Err(Error::Request(RequestError::Full)) => self.wait_for_room().await?,
                Err(e) => return Err(e),
                Ok(()) => {
                    return match rx.await {
                        Ok(Ok(())) => Ok(()),
                        Ok(Err(why)) => Err(Error::Auth(why)),
                        Err(_) => Err(Error::Disposed),
                    }
                }
            }
        }
    }

    /// Subscribes to a channel (or, with a `filter`, to a view keyed by
    /// `channel_or_id`) in `mode`: the subscription is made whenever connected and
    /// restored after reconnects. Returns at once with its [`Subscription`], a stream of
    /// its messages and state changes that owns what it needs (`'static`).
    ///
    /// # Cancel safety
    /// Dropped while waiting for room: nothing was queued. Once it returned, dropping
    /// the [`Subscription`] unsubscribes.
    pub async fn subscribe(
        &self,
        channel_or_id: &str,
        mode: Mode,
        options: SubscribeOptions,
    ) -> Result<Subscription, Error> {
        loop {
            let feed = Arc::new(Mutex::new(Feed::new(self.client.engine().clone())));
            let observer = FeedObserver(feed.clone());
            match self
                .client
                .subscribe(channel_or_id, mode, observer, options.clone())
            {
                Err(Error::Request(RequestError::Full)) => self.wait_for_room().await?,
                Err(e) => return Err(e),
                Ok(()) => {
                    return Ok(Subscription {
                        key: channel_or_id.to_owned(),
                        client: self.client.clone(),
                        feed,
                        state: SubState::Unsubscribed,
                        unsubscribed: false,
                    })
                }
            }
        }
    }

    /// Unsubscribes `channel_or_id` (what [`Subscription::unsubscribe`] does).
    pub fn unsubscribe(&self, channel_or_id: &str) -> Result<(), Error> {
        self.client.unsubscribe(channel_or_id)
    }

    /// Queues the request `make` builds with a callback (again after waiting for room,
    /// if the queue is full) and waits for its reply.
    async fn acked(
        &self,
        mut make: impl FnMut(Callback) -> Result<(), Error>,
    ) -> Result<Reply<'static>, Error> {
        loop {
            let (cb, ack) = Ack::callback();
            match make(cb) {
                Err(Error::Request(RequestError::Full)) => self.wait_for_room().await?,
                Err(e) => return Err(e),
                Ok(()) => return ack.await,
            }
        }
    }
}

/// The reply to a request queued by [`Client::try_publish`]: a future of the server's
/// `…/ok` (or the request's error, timeout or disconnection).
#[derive(Debug)]
pub struct Ack {
    rx: oneshot::Receiver<Response<'static>>,
}

impl Ack {
    /// A request callback and the future of what it is told (its one final response).
    fn callback() -> (Callback, Ack) {
        let (tx, rx) = oneshot::channel();
        let mut tx = Some(tx);
        let callback: Callback = Box::new(move |response: Response<'_>| {
            if let Some(tx) = tx.take() {
                let _ = tx.send(response.to_owned());
            }
        });
        (callback, Ack { rx })
    }
}

impl Future for Ack {
    type Output = Result<Reply<'static>, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx).poll(cx).map(|r| match r {
            Ok(response) => response.into_result(),
            // The client ended before telling (its callbacks are failed at its end).
            Err(_) => Err(Error::Disposed),
        })
    }
}

/// What a [`Subscription`] yields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Update {
    /// One message of the channel (or view), in order.
    Message(Message),
    /// The subscription entered this state (`Subscribed` after each (re)subscribe;
    /// `Subscribing` after a drop or an `out_of_sync` resubscribe).
    State(SubState),
    /// The server skipped messages it no longer had (`fast_forward`).
    FastForward,
    /// The subscription failed (Advanced mode's `out_of_sync`, a refused subscribe):
    /// the reason in words. It stays failed until unsubscribed or subscribed again.
    Failed(String),
}

/// One received message: its JSON text and the position of the batch it came in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The message, one JSON value as text (parse it with `serde_json::from_str`).
    pub json: String,
    /// The position of its `rtm/subscription/data` (to resume from).
    pub position: Option<Arc<str>>,
}

/// A subscription's messages and state changes, in order: a [`Stream`] of [`Update`]s
/// that ends when the subscription is deleted (unsubscribed) or the client ends.
/// Dropping it unsubscribes. Messages not taken are kept up to
/// [`SUBSCRIPTION_BUFFER`] bytes; past that the client reads no more from the server
/// until they are (other subscriptions and replies wait too, as with a blocking
/// observer that takes its time).
#[derive(Debug)]
pub struct Subscription {
    key: String,
    client: crate::rtm::Client,
    feed: Arc<Mutex<Feed>>,
    state: SubState,
    unsubscribed: bool,
}

impl Subscription {
    /// The channel (or view id) subscribed to.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The state as far as this stream has been read.
    pub fn state(&self) -> SubState {
        self.state
    }

    /// Bytes of messages received and not yet taken from this stream: at most about
    /// [`SUBSCRIPTION_BUFFER`] plus one socket read's worth, however fast the server
    /// sends.
    pub fn buffered_bytes(&self) -> usize {
        self.feed.lock().map_or(0, |f| f.bytes)
    }

    /// The next message, skipping state changes (see [`state`](Self::state)); `None`
    /// when the subscription ended. A failure ends it too: read [`Update::Failed`]
    /// through the [`Stream`] to see why.
    ///
    /// # Cancel safety
    /// Cancel safe: a message is taken only when this returns it.
    pub async fn next_message(&mut self) -> Option<Message> {
        loop {
            match poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await? {
                Update::Message(m) => return Some(m),
                Update::Failed(_) => return None,
                _ => {}
            }
        }
    }

    /// Unsubscribes; the stream ends once the server confirmed (after the messages
    /// that came before).
    pub fn unsubscribe(&mut self) -> Result<(), Error> {
        self.unsubscribed = true;
        self.client.unsubscribe(&self.key)
    }
}

impl Stream for Subscription {
    type Item = Update;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Update>> {
        let next = {
            let mut feed = self.feed.lock().unwrap_or_else(PoisonError::into_inner);
            match feed.pop() {
                Some(update) => Some(update),
                None if feed.ended => return Poll::Ready(None),
                None => {
                    feed.waker = Some(cx.waker().clone());
                    return Poll::Pending;
                }
            }
        };
        if let Some(Update::State(state)) = &next {
            self.state = *state;
        }
        Poll::Ready(next)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.feed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .release();
        let ended = self.feed.lock().map(|f| f.ended).unwrap_or(true);
        if !self.unsubscribed && !ended {
            let _ = self.client.unsubscribe(&self.key);
        }
    }
}

/// What a subscription's observer (on the runner) hands its stream.
struct Feed {
    updates: VecDeque<Update>,
    /// Bytes of the messages in `updates`.
    bytes: usize,
    waker: Option<Waker>,
    ended: bool,
    /// Counted in the engine's `pressure`: past [`SUBSCRIPTION_BUFFER`], until the reader
    /// took half.
    pressing: bool,
    engine: Arc<Engine>,
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed")
            .field("updates", &self.updates.len())
            .field("bytes", &self.bytes)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl Feed {
    fn new(engine: Arc<Engine>) -> Feed {
        Feed {
            updates: VecDeque::new(),
            bytes: 0,
            waker: None,
            ended: false,
            pressing: false,
            engine,
        }
    }

    fn push(&mut self, update: Update) {
        if let Update::Message(m) = &update {
            self.bytes += m.json.len();
            if self.bytes > SUBSCRIPTION_BUFFER && !self.pressing {
                self.pressing = true;
                self.engine.pressure.fetch_add(1, Ordering::AcqRel);
            }
        }
        self.updates.push_back(update);
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }

    fn pop(&mut self) -> Option<Update> {
        let update = self.updates.pop_front()?;
        if let Update::Message(m) = &update {
            self.bytes -= m.json.len();
            if self.bytes <= SUBSCRIPTION_BUFFER / 2 {
                self.release();
            }
        }
        Some(update)
    }

    /// The reader caught up (or went away): the runner may read again.
    fn release(&mut self) {
        if std::mem::take(&mut self.pressing) {
            self.engine.pressure.fetch_sub(1, Ordering::AcqRel);
            self.engine.wake();
        }
    }
}

/// The observer the engine calls for one subscription: it feeds the stream.
struct FeedObserver(Arc<Mutex<Feed>>);

impl FeedObserver {
    fn push(&self, update: Update) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(update);
    }
}

impl SubscriptionObserver for FeedObserver {
    fn on_subscription_data(&mut self, data: &SubscriptionData<'_>) {
        let position: Option<Arc<str>> = data.position().map(Into::into);
        let mut feed = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for json in data.messages() {
            feed.push(Update::Message(Message {
                json: json.to_owned(),
                position: position.clone(),
            }));
        }
    }

    fn on_enter_subscribing(&mut self) {
        self.push(Update::State(SubState::Subscribing));
    }

    fn on_enter_subscribed(&mut self) {
        self.push(Update::State(SubState::Subscribed));
    }

    fn on_enter_unsubscribing(&mut self) {
        self.push(Update::State(SubState::Unsubscribing));
    }

    fn on_enter_unsubscribed(&mut self) {
        self.push(Update::State(SubState::Unsubscribed));
    }

    fn on_enter_failed(&mut self, reason: &str) {
        self.push(Update::Failed(reason.to_owned()));
    }

    fn on_fast_forward(&mut self) {
        self.push(Update::FastForward);
    }

    fn on_deleted(&mut self) {
        let mut feed = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        feed.ended = true;
        if let Some(waker) = feed.waker.take() {
            waker.wake();
        }
    }
}

impl Drop for FeedObserver {
    /// The client ended (or dropped the observer): the stream ends after what it has.
    fn drop(&mut self) {
        self.on_deleted();
    }
}

/// The replies of a [`Client::search`]: each item one reply's `channels`.
#[derive(Debug)]
pub struct Search {
    feed: Arc<Mutex<SearchFeed>>,
}

#[derive(Debug, Default)]
struct SearchFeed {
    items: VecDeque<Result<Vec<String>, Error>>,
    done: bool,
    waker: Option<Waker>,
}

impl Stream for Search {
    type Item = Result<Vec<String>, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut feed = self.feed.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(item) = feed.items.pop_front() {
            return Poll::Ready(Some(item));
        }
        if feed.done {
            return Poll::Ready(None);
        }
        feed.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// A connect in progress.
type Connecting = Pin<Box<dyn Future<Output = Result<Box<dyn Socket>, ConnectError>> + Send>>;

/// The task that drives the engine: it opens the socket when the link asks, writes what
/// it emits (each frame from where it was encoded, several in one vectored write), feeds
/// it what arrives up to each message with events, delivers those events between reads,
/// and sleeps until the link's next deadline, a call's wake-up or the socket.
struct Runner {
    engine: Arc<Engine>,
    watch: Arc<crate::rtm::engine::StateWatch>,
    observers: RefCell<crate::rtm::engine::Observers>,
    delivery: crate::rtm::engine::Delivery,
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
    deadline: Option<benchlink_core::time::Instant>,
    now: benchlink_core::time::Instant,
    write: bool,
    disposed: bool,
}

impl Runner {
    fn new(parts: Parts, transport: TransportOptions, notify: Arc<Notify>) -> Runner {
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

    async fn run(mut self) {
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
            deliver(&self.engine, &self.watch, &self.observers, &mut self.delivery);
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
                    self.connecting = Some(Box::pin(async move {
                        open(&host, port, tls, &transport).await
                    }));
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
            if notified.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            if let Some(sleep) = sleep.as_mut().as_pin_mut() {
                if sleep.poll(cx).is_ready() {
                    return Poll::Ready(());
                }
            }
            if let Some(connecting) = self.connecting.as_mut() {
                if let Poll::Ready(result) = connecting.as_mut().poll(cx) {
                    self.connecting = None;
                    self.connected(&engine, result);
                    return Poll::Ready(());
                }
            }
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
            if progressed {
                Poll::Ready(())
            } else {
                Poll::Pending
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

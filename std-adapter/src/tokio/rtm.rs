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
//! [`SUBSCRIPTION_BUFFER`] bytes wait, so TCP slows the
//! server down and memory stays bounded while the link's deadlines go on.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use benchlink_core::rtm::auth::{self, AuthMethod};
use benchlink_core::rtm::{ClientState, Mode, RequestError};
use tokio::sync::{oneshot, Notify};

use crate::rtm::engine::{self, Core};
use crate::rtm::{
    Callback, ClientOptions, ConnectingError, Error, Reply, Response, SubscribeOptions,
};

use super::runner::Runner;
use super::subscription::SearchFeed;
pub use super::subscription::{Message, Search, Subscription, Update, SUBSCRIPTION_BUFFER};

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
/// println!("{} at {position}", message.json());
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
        let client =
            crate::rtm::Client::from_parts(parts.engine.clone(), parts.watch.clone(), None);
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
        // A producer that never has to wait would keep its worker thread, and the runner
        // woken by its publishes waits on that worker's queue (tokio's LIFO slot is not
        // stolen) until the queue fills: a share of tokio's cooperative budget makes it
        // yield every so often, as tokio's own resources do.
        tokio::task::consume_budget().await;
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
            let queued = self
                .client
                .authenticate_with::<M>(identity, secret, move |r| {
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
            let (subscription, observer) = Subscription::new(channel_or_id, &self.client);
            match self
                .client
                .subscribe(channel_or_id, mode, observer, options.clone())
            {
                Err(Error::Request(RequestError::Full)) => self.wait_for_room().await?,
                Err(e) => return Err(e),
                Ok(()) => return Ok(subscription),
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

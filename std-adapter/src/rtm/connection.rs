//! The low-level API: one WebSocket connection at a time, no reconnect. `start()` blocks
//! until the connection is open (or failed). After `stop()` nothing goes out until
//! `start()` opens a new connection, which has no subscriptions and no authentication of
//! the old one; after a disconnect (the server or the network closed it; the delegate
//! hears `on_connection_closed`) the object is no longer usable and a new `Connection`
//! must be made — the SDK contract's connection life cycle. It is the [`Client`] with
//! reconnection, auth restore and resubscription switched off, so both share every line
//! of protocol code.

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::client::{Callback, Client, ClientOptions, Error, Response, SubscribeOptions};
use super::observer::{ClientObserver, Reply, SubscriptionData, SubscriptionObserver};
use super::{ClientState, Mode, TransportOptions};

/// What a connection tells its owner. Every method has a default that does nothing.
#[allow(unused_variables)]
pub trait ConnectionDelegate: Send {
    /// The connection closed (by `stop()`, the server, or the network). Called once.
    fn on_connection_closed(&mut self) {}
    /// A protocol problem.
    fn on_internal_error(&mut self, error: &str) {}
    /// Messages for a subscription.
    fn on_subscription_data(&mut self, data: &SubscriptionData) {}
    /// The server ended a subscription with an error (or it failed to start).
    fn on_subscription_error(&mut self, subscription_id: &str, reason: &str) {}
    /// The server skipped a subscription ahead.
    fn on_fast_forward(&mut self, subscription_id: &str) {}
}

type SharedDelegate = Arc<Mutex<Option<Box<dyn ConnectionDelegate>>>>;

fn with_delegate(d: &SharedDelegate, f: impl FnOnce(&mut dyn ConnectionDelegate)) {
    if let Some(d) = d.lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
        f(d.as_mut());
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    New,
    Open,
    /// Closed by `stop()`: `start()` may open a new connection.
    Stopped,
    /// Closed by the server or the network: finished.
    Closed,
}

struct Watch {
    delegate: SharedDelegate,
    phase: Arc<Mutex<Phase>>,
}

impl ClientObserver for Watch {
    fn on_enter_connected(&mut self) {
        *self.phase.lock().unwrap_or_else(PoisonError::into_inner) = Phase::Open;
    }
    fn on_leave_connected(&mut self) {
        *self.phase.lock().unwrap_or_else(PoisonError::into_inner) = Phase::Closed;
        with_delegate(&self.delegate, |d| d.on_connection_closed());
    }
    fn on_internal_error(&mut self, error: &str) {
        with_delegate(&self.delegate, |d| d.on_internal_error(error));
    }
    fn on_fast_forward(&mut self, channel: &str) {
        with_delegate(&self.delegate, |d| d.on_fast_forward(channel));
    }
}

/// Forwards one subscription's events to the delegate and completes its callbacks.
struct SubForward {
    key: String,
    delegate: SharedDelegate,
    /// The connection's phase: a subscription deleted without a reply while the
    /// connection is open was deleted locally; otherwise the connection ended first.
    phase: Arc<Mutex<Phase>>,
    subscribed: Option<Callback>,
    unsubscribed: Option<Callback>,
}

impl SubscriptionObserver for SubForward {
    /// The server's reply completes the callback waiting for it, as the SDK contract's
    /// connection does: `rtm/subscribe/ok` with its `position`, or the `…/error` itself.
    /// The callbacks below complete it only when no reply came (a general `/error`, or
    /// the connection's end).
    fn on_reply(&mut self, reply: &Reply<'_>) {
        let waiting = if reply.action.starts_with("rtm/subscribe/") {
            self.subscribed.take()
        } else if reply.action.starts_with("rtm/unsubscribe/") {
            self.unsubscribed.take()
        } else {
            None
        };
        if let Some(mut cb) = waiting {
            cb(Response::Reply(reply.clone()));
        }
    }
    fn on_enter_subscribed(&mut self) {
        if let Some(mut cb) = self.subscribed.take() {
            cb(Response::Reply(ok("rtm/subscribe/ok", &self.key)));
        } else if let Some(mut cb) = self.unsubscribed.take() {
            // Back to Subscribed while an unsubscribe waits: the server refused it
            // (`rtm/unsubscribe/error`), and the subscription goes on.
            cb(Response::Reply(Reply {
                action: "rtm/unsubscribe/error".into(),
                body: serde_json::json!({ "subscription_id": self.key })
                    .to_string()
                    .into(),
            }));
        }
    }
    fn on_enter_failed(&mut self, reason: &str) {
        if let Some(mut cb) = self.subscribed.take() {
            let body =
                serde_json::json!({ "subscription_id": self.key, "reason": reason }).to_string();
            cb(Response::Reply(Reply {
                action: "rtm/subscribe/error".into(),
                body: body.into(),
            }));
        }
        with_delegate(&self.delegate, |d| {
            d.on_subscription_error(&self.key, reason)
        });
    }
    /// Deleted with its unsubscribe's callback still waiting: no reply came. On an open
    /// connection the client deleted it itself (a failed subscription has nothing on
    /// the server to unsubscribe), which completes the unsubscribe; otherwise the
    /// connection ended first, and the callback hears `Disconnected`, like every
    /// request in flight then, never a reply the server did not send.
    fn on_deleted(&mut self) {
        let open = *self.phase.lock().unwrap_or_else(PoisonError::into_inner) == Phase::Open;
        if let Some(mut cb) = self.unsubscribed.take() {
            cb(if open {
                Response::Reply(ok("rtm/unsubscribe/ok", &self.key))
            } else {
                Response::Disconnected
            });
        }
    }
    fn on_subscription_data(&mut self, data: &SubscriptionData) {
        with_delegate(&self.delegate, |d| d.on_subscription_data(data));
    }
}

fn ok(action: &'static str, key: &str) -> Reply<'static> {
    Reply {
        action: action.into(),
        body: serde_json::json!({ "subscription_id": key })
            .to_string()
            .into(),
    }
}

/// One connection to the service.
///
/// ```no_run
/// use benchlink_std::rtm::Connection;
/// let conn = Connection::new("ws://127.0.0.1:8080", "appkey", None, None)?;
/// conn.start()?;
/// let position = conn.publish_sync("animals", &"zebra", std::time::Duration::from_secs(60))?;
/// conn.stop()?;
/// # Ok::<(), benchlink_std::rtm::Error>(())
/// ```
pub struct Connection {
    client: Client,
    delegate: SharedDelegate,
    phase: Arc<Mutex<Phase>>,
    /// The subscriptions made on the current connection: the client would restore them
    /// on the next one, which the reference SDK's connection does not.
    subscribed: Mutex<Vec<String>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("phase", &self.phase())
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// A connection to `endpoint` (`ws://` or `wss://`) with `appkey`, optionally
    /// through an HTTPS proxy `(host, port)`.
    pub fn new(
        endpoint: &str,
        appkey: &str,
        delegate: Option<Box<dyn ConnectionDelegate>>,
        https_proxy: Option<(String, u16)>,
    ) -> Result<Connection, Error> {
        let mut transport = TransportOptions::new(endpoint, appkey);
        transport.https_proxy = https_proxy;
        Connection::with_transport(transport, delegate)
    }

    /// A connection with full transport options (TLS roots, timeouts, …).
    pub fn with_transport(
        transport: TransportOptions,
        delegate: Option<Box<dyn ConnectionDelegate>>,
    ) -> Result<Connection, Error> {
        let mut options = ClientOptions::new(String::new(), String::new());
        options.transport = transport;
        options.fail_count_threshold = Some(0);
        options.restore_auth_on_reconnect = false;
        options.retry_first_connect = false;
        let delegate: SharedDelegate = Arc::new(Mutex::new(delegate));
        let phase = Arc::new(Mutex::new(Phase::New));
        let watch = Watch {
            delegate: delegate.clone(),
            phase: phase.clone(),
        };
        let client = Client::with_observer(options, Some(Box::new(watch)))?;
        Ok(Connection {
            client,
            delegate,
            phase,
            subscribed: Mutex::new(Vec::new()),
        })
    }

    fn phase(&self) -> Phase {
        *self.phase.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn open(&self) -> Result<(), Error> {
        match self.phase() {
            Phase::Open => Ok(()),
            Phase::New => Err(Error::NotOpen("connection is not open yet")),
            Phase::Stopped => Err(Error::NotOpen("connection is stopped")),
            Phase::Closed => Err(Error::NotOpen("connection is closed")),
        }
    }

    /// Replaces the delegate.
    pub fn set_delegate(&self, delegate: Option<Box<dyn ConnectionDelegate>>) {
        *self.delegate.lock().unwrap_or_else(PoisonError::into_inner) = delegate;
    }

    /// Opens the connection, blocking until it is open or failed. While it is open a
    /// second call fails; after `stop()`, this opens a new one (with no subscriptions and
    /// no authentication of the old one); after a disconnect it fails.
    pub fn start(&self) -> Result<(), Error> {
        match self.phase() {
            Phase::Open => return Err(Error::NotOpen("connection is already open")),
            Phase::Closed => {
                return Err(Error::NotOpen(
                    "connection was closed by a disconnect: make a new one",
                ))
            }
            Phase::New | Phase::Stopped => {}
        }
        // The client is stopped: these go without a word to any server.
        let old = std::mem::take(
            &mut *self
                .subscribed
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for key in old {
            let _ = self.client.unsubscribe(&key);
        }
        self.client.start()?;
        let state = self.client.wait_for_state(
            |s| {
                matches!(
                    s,
                    ClientState::Connected | ClientState::Stopped | ClientState::Disposed
                )
            },
            Duration::from_secs(300),
        );
        if state == ClientState::Connected {
            *self.phase.lock().unwrap_or_else(PoisonError::into_inner) = Phase::Open;
            Ok(())
        } else {
            *self.phase.lock().unwrap_or_else(PoisonError::into_inner) = Phase::Closed;
            Err(Error::Connect(
                self.client
                    .last_connecting_error()
                    .map_or_else(|| "not connected".into(), |e| e.to_string()),
            ))
        }
    }

    /// Closes the connection (close code 1000), waiting until it is closed; `start()`
    /// may open a new one. Safe before `start()`, after a disconnect and twice.
    pub fn stop(&self) -> Result<(), Error> {
        if self.phase() != Phase::Open {
            return Ok(());
        }
        let _ = self.client.stop();
        self.client.wait_for_state(
            |s| matches!(s, ClientState::Stopped | ClientState::Disposed),
            Duration::from_secs(10),
        );
        *self.phase.lock().unwrap_or_else(PoisonError::into_inner) = Phase::Stopped;
        Ok(())
    }

    /// Publishes (asynchronous; with a callback, the reply is delivered to it).
    pub fn publish(
        &self,
        channel: &str,
        message: &impl serde::Serialize,
        callback: Option<Callback>,
    ) -> Result<(), Error> {
        self.open()?;
        self.client.publish(channel, message, callback)
    }

    /// Publishes and waits for the reply; returns the position.
    pub fn publish_sync(
        &self,
        channel: &str,
        message: &impl serde::Serialize,
        timeout: Duration,
    ) -> Result<String, Error> {
        self.open()?;
        self.client.publish_sync(channel, message, timeout)
    }

    /// Reads a channel's value (the callback receives `rtm/read/ok` or an error).
    pub fn read(
        &self,
        channel: &str,
        args: Option<serde_json::Value>,
        callback: Option<Callback>,
    ) -> Result<(), Error> {
        self.open()?;
        self.client.read(channel, args, callback)
    }

    /// Reads and waits; returns the value (`null` if none).
    pub fn read_sync(&self, channel: &str, timeout: Duration) -> Result<serde_json::Value, Error> {
        self.read_sync_with(channel, None, timeout)
    }

    /// [`read_sync`](Self::read_sync) with more members for the request (`args`).
    pub fn read_sync_with(
        &self,
        channel: &str,
        args: Option<serde_json::Value>,
        timeout: Duration,
    ) -> Result<serde_json::Value, Error> {
        self.open()?;
        self.client.read_sync_with(channel, args, timeout)
    }

    /// Writes a channel's value.
    pub fn write(
        &self,
        channel: &str,
        value: &impl serde::Serialize,
        callback: Option<Callback>,
    ) -> Result<(), Error> {
        self.open()?;
        self.client.write(channel, value, callback)
    }

    /// Deletes a channel's value; without a callback no reply is asked for.
    pub fn delete(&self, channel: &str, callback: Option<Callback>) -> Result<(), Error> {
        self.open()?;
        self.client.delete(channel, callback)
    }

    /// Searches channel names by prefix (legacy); the callback runs for every reply.
    pub fn search(&self, prefix: &str, callback: Callback) -> Result<(), Error> {
        self.open()?;
        self.client.search(prefix, callback)
    }

    /// Sends any request PDU built from an action name and a body; the callback, if any,
    /// receives its replies.
    pub fn action(
        &self,
        name: &str,
        body: &serde_json::Value,
        callback: Option<Callback>,
    ) -> Result<(), Error> {
        self.open()?;
        self.client.action(name, body, callback)
    }

    /// Sends a PDU the caller serialized, byte for byte, as the SDK contract's
    /// `send(payload)` (an `id` included: the caller correlates its reply, which the
    /// delegate hears as an internal error "reply with an unknown id"; ids the
    /// connection gives its own requests restart at 0, so pick others, as with the
    /// reference SDK). Fails with `Full` while earlier requests still wait to go out,
    /// and with `InvalidJson` for text that is not a PDU. [`Connection::action`] with a
    /// callback is the way to get a reply.
    pub fn send(&self, payload: &str) -> Result<(), Error> {
        self.open()?;
        self.client.send_raw(payload)
    }

    /// Subscribes; `options` are sent as given (no fast-forward is added). Data goes to
    /// the delegate's `on_subscription_data`; the callback receives the outcome.
    pub fn subscribe(
        &self,
        channel_or_id: &str,
        options: SubscribeOptions,
        callback: Option<Callback>,
    ) -> Result<(), Error> {
        self.open()?;
        let forward = SubForward {
            key: channel_or_id.to_owned(),
            delegate: self.delegate.clone(),
            phase: self.phase.clone(),
            subscribed: callback,
            unsubscribed: None,
        };
        self.client
            .subscribe(channel_or_id, Mode::Advanced, forward, options)?;
        self.subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(channel_or_id.to_owned());
        Ok(())
    }

    /// Subscribes and waits for the outcome.
    pub fn subscribe_sync(
        &self,
        channel_or_id: &str,
        options: SubscribeOptions,
        timeout: Duration,
    ) -> Result<(), Error> {
        let (callback, rx) = Response::channel();
        self.subscribe(channel_or_id, options, Some(callback))?;
        wait_ok(&rx, timeout)
    }

    /// Unsubscribes; the callback runs when the server confirmed.
    pub fn unsubscribe(
        &self,
        channel_or_id: &str,
        callback: Option<Callback>,
    ) -> Result<(), Error> {
        self.open()?;
        if let Some(cb) = callback {
            // Re-register the forwarder with the completion callback.
            let forward = SubForward {
                key: channel_or_id.to_owned(),
                delegate: self.delegate.clone(),
                phase: self.phase.clone(),
                subscribed: None,
                unsubscribed: Some(cb),
            };
            self.client.replace_observer(channel_or_id, forward)?;
        }
        self.client.unsubscribe(channel_or_id)
    }

    /// Unsubscribes and waits.
    pub fn unsubscribe_sync(&self, channel_or_id: &str, timeout: Duration) -> Result<(), Error> {
        let (callback, rx) = Response::channel();
        self.unsubscribe(channel_or_id, Some(callback))?;
        wait_ok(&rx, timeout)
    }

    /// Authenticates with a role and its secret; `done` receives the outcome.
    pub fn authenticate(
        &self,
        role: &str,
        secret: &str,
        done: impl FnOnce(Result<(), String>) + Send + 'static,
    ) -> Result<(), Error> {
        self.open()?;
        self.client.authenticate(role, secret, done)
    }

    /// [`authenticate`](Self::authenticate) with another method, the SDK contract's
    /// custom auth delegate (see [`Client::authenticate_with`]).
    pub fn authenticate_with<M: super::auth::AuthMethod>(
        &self,
        identity: &str,
        secret: &str,
        done: impl FnOnce(Result<(), String>) + Send + 'static,
    ) -> Result<(), Error> {
        self.open()?;
        self.client.authenticate_with::<M>(identity, secret, done)
    }
}

/// Waits up to `timeout` for the response a subscription callback sends (the client
/// gives subscribe and unsubscribe no deadline of their own).
fn wait_ok(rx: &Receiver<Response<'static>>, timeout: Duration) -> Result<(), Error> {
    match rx.recv_timeout(timeout) {
        Ok(response) => response.into_result().map(drop),
        Err(RecvTimeoutError::Timeout) => Err(Error::Timeout),
        Err(RecvTimeoutError::Disconnected) => Err(Error::Disposed),
    }
}

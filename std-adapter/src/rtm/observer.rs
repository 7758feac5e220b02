//! Observers: the callbacks of the client and of each subscription. Every method has a
//! default that does nothing, so an observer implements only what it needs. All
//! callbacks run on the client's one I/O thread, in order; they may call the client
//! (even `stop()` from `on_enter_connected`, or `start()` from `on_enter_stopped`). A
//! callback that panics stops the client cleanly.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};

use benchlink_core::json;
use benchlink_core::rtm::pdu::{self, Pdu, Raw};

/// Client state callbacks, named as in the reference (Python) SDK's client observer.
#[allow(unused_variables)]
pub trait ClientObserver: Send {
    /// Entered Stopped.
    fn on_enter_stopped(&mut self) {}
    /// Left Stopped.
    fn on_leave_stopped(&mut self) {}
    /// Entered Connecting.
    fn on_enter_connecting(&mut self) {}
    /// Left Connecting.
    fn on_leave_connecting(&mut self) {}
    /// Entered Connected.
    fn on_enter_connected(&mut self) {}
    /// Left Connected.
    fn on_leave_connected(&mut self) {}
    /// Entered Stopping.
    fn on_enter_stopping(&mut self) {}
    /// Left Stopping.
    fn on_leave_stopping(&mut self) {}
    /// Entered Awaiting (a reconnect is scheduled).
    fn on_enter_awaiting(&mut self) {}
    /// Left Awaiting.
    fn on_leave_awaiting(&mut self) {}
    /// Entered Disposed: the client is finished.
    fn on_enter_disposed(&mut self) {}
    /// A protocol problem; fatal ones also make the client reconnect.
    fn on_internal_error(&mut self, error: &str) {}
    /// The server skipped `channel` ahead: some messages were lost.
    fn on_fast_forward(&mut self, channel: &str) {}
    /// The open connection ended, and why (the server's close code and reason, a
    /// protocol violation, a dead or stalled server, the transport closing, or the client
    /// itself); the state change follows.
    fn on_link_closed(&mut self, why: &str) {}
}

/// A client observer that [`ClientOptions`](super::ClientOptions) can carry: the
/// reference SDK's `Client(..., observer=...)` and `make_client(..., observer=...)`. It is
/// shared (options are `Clone`), so the caller may keep a handle to what it records; its
/// callbacks run on the I/O thread with its lock held, as a boxed observer's would.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use benchlink_std::rtm::{Client, ClientObserver, ClientOptions, SharedObserver};
/// #[derive(Default)]
/// struct Count { disposed: u32 }
/// impl ClientObserver for Count {
///     fn on_enter_disposed(&mut self) { self.disposed += 1; }
/// }
/// let count = Arc::new(Mutex::new(Count::default()));
/// let mut options = ClientOptions::new("ws://127.0.0.1:9", "key");
/// options.observer = Some(SharedObserver::from(count.clone()));
/// Client::new(options).unwrap().dispose().unwrap();
/// assert_eq!(count.lock().unwrap().disposed, 1);
/// ```
#[derive(Clone)]
pub struct SharedObserver(Arc<Mutex<dyn ClientObserver>>);

impl SharedObserver {
    /// Shares `observer`.
    pub fn new(observer: impl ClientObserver + 'static) -> SharedObserver {
        SharedObserver(Arc::new(Mutex::new(observer)))
    }
}

impl<T: ClientObserver + 'static> From<Arc<Mutex<T>>> for SharedObserver {
    fn from(observer: Arc<Mutex<T>>) -> SharedObserver {
        SharedObserver(observer)
    }
}

impl std::fmt::Debug for SharedObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedObserver")
    }
}

/// Each callback forwarded to the shared observer, under its lock.
macro_rules! forward {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {
        impl ClientObserver for SharedObserver {
            $(fn $name(&mut self, $($arg: $ty),*) {
                self.0.lock().unwrap_or_else(PoisonError::into_inner).$name($($arg),*)
            })*
        }
    };
}

forward! {
    on_enter_stopped();
    on_leave_stopped();
    on_enter_connecting();
    on_leave_connecting();
    on_enter_connected();
    on_leave_connected();
    on_enter_stopping();
    on_leave_stopping();
    on_enter_awaiting();
    on_leave_awaiting();
    on_enter_disposed();
    on_internal_error(error: &str);
    on_fast_forward(channel: &str);
    on_link_closed(why: &str);
}

/// Subscription callbacks, named as in the reference (Python) SDK's subscription
/// observer.
#[allow(unused_variables)]
pub trait SubscriptionObserver: Send {
    /// The subscription record was created.
    fn on_created(&mut self) {}
    /// The subscription record was removed (after an unsubscribe completed).
    fn on_deleted(&mut self) {}
    /// Entered Unsubscribed.
    fn on_enter_unsubscribed(&mut self) {}
    /// Left Unsubscribed.
    fn on_leave_unsubscribed(&mut self) {}
    /// Entered Subscribing.
    fn on_enter_subscribing(&mut self) {}
    /// Left Subscribing.
    fn on_leave_subscribing(&mut self) {}
    /// Entered Subscribed.
    fn on_enter_subscribed(&mut self) {}
    /// Left Subscribed (how an unsubscribe's completion shows).
    fn on_leave_subscribed(&mut self) {}
    /// Entered Unsubscribing.
    fn on_enter_unsubscribing(&mut self) {}
    /// Left Unsubscribing.
    fn on_leave_unsubscribing(&mut self) {}
    /// Entered Failed: `reason` is the `reason` of the server's subscribe error (or of
    /// the channel error that ended an ADVANCED subscription), else its `error` code,
    /// else `"Unknown error"`.
    fn on_enter_failed(&mut self, reason: &str) {}
    /// Left Failed.
    fn on_leave_failed(&mut self) {}
    /// Messages arrived.
    fn on_subscription_data(&mut self, data: &SubscriptionData<'_>) {}
    /// The server's reply to this subscription's subscribe or unsubscribe
    /// (`rtm/subscribe/ok` with its `position`, or an `…/error`), as received, before
    /// the state change it causes (benchlink; the reference SDK's observers have no such
    /// callback, its connection's subscribe callback gets the reply).
    fn on_reply(&mut self, reply: &Reply<'_>) {}
    /// The server skipped this subscription past messages it no longer had (its
    /// `rtm/subscription/info` with `fast_forward`); the client observer's
    /// [`on_fast_forward`](ClientObserver::on_fast_forward) hears it too (benchlink).
    fn on_fast_forward(&mut self) {}
}

/// A received `rtm/subscription/data` body: its messages as JSON texts, parsed only if
/// and how the observer wants. On a JSON connection it borrows the received frame, which
/// the core scanned once: nothing is copied for an observer that only looks (keep one
/// past the callback with [`to_owned`](Self::to_owned)). On a CBOR connection the
/// messages are also kept as received ([`cbor_messages`](Self::cbor_messages)), and their
/// JSON text is transcoded (a byte string becomes its base64 text).
#[derive(Debug, Clone)]
pub struct SubscriptionData<'a>(Data<'a>);

#[derive(Debug, Clone)]
enum Data<'a> {
    /// As received on a JSON connection.
    Json(pdu::SubscriptionData<'a>),
    /// Transcoded from CBOR, or kept past the callback.
    Owned(Box<Owned>),
}

#[derive(Debug, Clone)]
struct Owned {
    subscription_id: String,
    position: Option<String>,
    /// The messages' JSON texts, one after the other.
    messages: String,
    /// Each message's byte range in `messages`.
    spans: Vec<(usize, usize)>,
    /// Each message's CBOR bytes, on a CBOR connection.
    cbor: Vec<Vec<u8>>,
}

impl<'a> SubscriptionData<'a> {
    /// The core's view of the body, received in `encoding`: borrowed when it is JSON,
    /// transcoded when CBOR.
    pub(crate) fn from_core(data: pdu::SubscriptionData<'a>, encoding: pdu::Encoding) -> Self {
        if encoding == pdu::Encoding::Json {
            return SubscriptionData(Data::Json(data));
        }
        let mut messages = String::new();
        let mut spans = Vec::new();
        let mut cbor = Vec::new();
        for m in data.messages.elements() {
            let from = messages.len();
            match m.raw() {
                Raw::Json(text) => messages.push_str(text),
                Raw::Cbor(bytes) => {
                    messages.push_str(&super::cbor::to_json(bytes));
                    cbor.push(bytes.to_vec());
                }
            }
            spans.push((from, messages.len()));
        }
        SubscriptionData(Data::Owned(Box::new(Owned {
            subscription_id: text(data.subscription_id),
            position: data.position.map(text),
            messages,
            spans,
            cbor,
        })))
    }

    /// A copy that outlives the callback (to send to another thread, say).
    ///
    /// ```
    /// # use benchlink_std::rtm::SubscriptionData;
    /// # fn keep(data: &SubscriptionData, tx: std::sync::mpsc::Sender<SubscriptionData<'static>>) {
    /// let _ = tx.send(data.to_owned());
    /// # }
    /// ```
    pub fn to_owned(&self) -> SubscriptionData<'static> {
        let owned = match &self.0 {
            Data::Owned(owned) => owned.clone(),
            Data::Json(data) => {
                let mut messages = String::new();
                let spans = self
                    .messages()
                    .into_iter()
                    .map(|m| {
                        let from = messages.len();
                        messages.push_str(m);
                        (from, messages.len())
                    })
                    .collect();
                Box::new(Owned {
                    subscription_id: text(data.subscription_id),
                    position: data.position.map(text),
                    messages,
                    spans,
                    cbor: Vec::new(),
                })
            }
        };
        SubscriptionData(Data::Owned(owned))
    }

    /// Each message as received on a CBOR connection, one CBOR item each (byte strings
    /// and all); empty on a JSON connection.
    pub fn cbor_messages(&self) -> Vec<&[u8]> {
        match &self.0 {
            Data::Json(_) => Vec::new(),
            Data::Owned(owned) => owned.cbor.iter().map(Vec::as_slice).collect(),
        }
    }

    /// The subscription id (the channel, or the view's id).
    pub fn subscription_id(&self) -> String {
        match &self.0 {
            Data::Json(data) => text(data.subscription_id),
            Data::Owned(owned) => owned.subscription_id.clone(),
        }
    }

    /// Where to resume after these messages.
    pub fn position(&self) -> Option<String> {
        match &self.0 {
            Data::Json(data) => data.position.map(text),
            Data::Owned(owned) => owned.position.clone(),
        }
    }

    /// How many messages came.
    ///
    /// ```
    /// # use benchlink_std::rtm::SubscriptionData;
    /// # fn count(data: &SubscriptionData, total: &mut usize) {
    /// *total += data.len();
    /// # }
    /// ```
    #[allow(clippy::len_without_is_empty)] // a data PDU with no messages is still one
    pub fn len(&self) -> usize {
        match &self.0 {
            Data::Json(data) => data.messages.elements().count(),
            Data::Owned(owned) => owned.spans.len(),
        }
    }

    /// Each message as JSON text (as received on a JSON connection).
    ///
    /// ```
    /// # use benchlink_std::rtm::SubscriptionData;
    /// # fn show(data: &SubscriptionData) {
    /// for m in data.messages() { println!("{m}"); }
    /// # }
    /// ```
    pub fn messages(&self) -> Vec<&str> {
        match &self.0 {
            Data::Json(data) => data
                .messages
                .elements()
                .filter_map(|m| m.raw().as_json())
                .collect(),
            Data::Owned(owned) => owned
                .spans
                .iter()
                .filter_map(|&(from, to)| owned.messages.get(from..to))
                .collect(),
        }
    }

    /// Each message deserialized as `T`.
    pub fn messages_as<T: serde::de::DeserializeOwned>(&self) -> Result<Vec<T>, serde_json::Error> {
        self.messages()
            .into_iter()
            .map(serde_json::from_str)
            .collect()
    }
}

/// A reply PDU as a request callback (or [`SubscriptionObserver::on_reply`]) sees it:
/// borrowed from the received frame, for the call (a CBOR body, transcoded to JSON text,
/// is the one thing made for it); [`to_owned`](Self::to_owned) keeps it beyond.
///
/// ```
/// # use benchlink_std::rtm::Reply;
/// let reply = Reply { action: "rtm/publish/ok".into(), body: r#"{"position":"1:2"}"#.into() };
/// assert!(reply.is_ok());
/// assert_eq!(reply.field("position").as_deref(), Some("1:2"));
/// let kept: Reply<'static> = reply.to_owned();
/// # let _ = kept;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply<'a> {
    /// e.g. `rtm/publish/ok`, `rtm/read/error`, `rtm/search/data`.
    pub action: Cow<'a, str>,
    /// The body as JSON text (`{}` when the server sent none; transcoded from CBOR on a
    /// CBOR connection).
    pub body: Cow<'a, str>,
}

impl<'a> Reply<'a> {
    pub(crate) fn from_pdu(pdu: &Pdu<'a>) -> Reply<'a> {
        Reply {
            action: Cow::Borrowed(pdu.action.as_str()),
            body: pdu.body.map_or(Cow::Borrowed("{}"), |b| match b.raw() {
                Raw::Json(text) => Cow::Borrowed(text),
                Raw::Cbor(bytes) => Cow::Owned(super::cbor::to_json(bytes)),
            }),
        }
    }

    /// The reply with its text copied, to keep beyond the callback.
    pub fn to_owned(&self) -> Reply<'static> {
        Reply {
            action: Cow::Owned(String::from(&*self.action)),
            body: Cow::Owned(String::from(&*self.body)),
        }
    }

    /// True for `…/ok` (and `…/data`) replies.
    pub fn is_ok(&self) -> bool {
        self.action.ends_with("/ok") || self.action.ends_with("/data")
    }

    /// The body as a `serde_json::Value`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// A string member of the body (e.g. `position`, `error`, `reason`).
    pub fn field(&self, name: &str) -> Option<String> {
        json::parse(&self.body, json::DEFAULT_MAX_DEPTH)
            .ok()?
            .get(name)?
            .as_str()
            .map(text)
    }
}

/// A received string, decoded.
pub(crate) fn text(s: impl std::fmt::Display) -> String {
    s.to_string()
}

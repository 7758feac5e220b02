//! What goes in and out of the RTM [`Client`](super::Client) besides text: user-facing
//! enums, the [`Handler`] trait that receives events, and the [`Transmit`] orders for the
//! adapter.

use core::fmt;
use core::time::Duration;

use super::pdu::{self, Action, ErrorBody, Pdu, PduError};
use crate::time::Instant;
use crate::ws::{CloseCode, Error as WsError};

/// The client's state, named as in the reference SDK.
///
/// ```
/// use benchlink_core::rtm::ClientState;
/// assert_ne!(ClientState::Stopped, ClientState::Connected);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ClientState {
    /// Not connected and not trying to; the initial state.
    Stopped,
    /// A connect attempt is in progress: WebSocket opening, then auth restore.
    Connecting,
    /// Connected: requests are sent as they are made, subscriptions are live.
    Connected,
    /// `stop()` was called while connected; waiting for the socket to close.
    Stopping,
    /// Connection lost; waiting for the reconnect timer (backoff).
    Awaiting,
    /// `dispose()` was called: final, every call is refused.
    Disposed,
}

/// A subscription's state, named as in the reference SDK.
///
/// ```
/// use benchlink_core::rtm::SubState;
/// assert_ne!(SubState::Subscribing, SubState::Subscribed);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SubState {
    /// Not subscribed on the current connection (or no connection).
    Unsubscribed,
    /// `rtm/subscribe` sent (or about to be); waiting for the reply.
    Subscribing,
    /// Live: messages arrive.
    Subscribed,
    /// `rtm/unsubscribe` sent (or about to be); waiting for the reply.
    Unsubscribing,
    /// The server refused or ended the subscription for good; it stays failed until the
    /// application unsubscribes or subscribes again (the reference SDK retries it on
    /// every reconnect, failing again each time).
    Failed,
}

/// The delivery mode of a subscription: the reference SDK's three modes.
///
/// ```
/// use benchlink_core::rtm::Mode;
/// assert_eq!(Mode::default(), Mode::Reliable);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Mode {
    /// `fast_forward`, no position tracking: after a reconnect the subscription resumes
    /// from "now". A user position or history applies to the first subscribe only.
    Simple,
    /// `fast_forward` plus position tracking: resumes where it left off when the server
    /// still has the messages, fast-forwards otherwise; `out_of_sync` resubscribes
    /// without a position.
    #[default]
    Reliable,
    /// Position tracking without `fast_forward`: never skips silently; `out_of_sync` (or
    /// `expired_position`) makes the subscription [`SubState::Failed`].
    Advanced,
}

/// A user request's handle: every request that asked for a reply gets one, and
/// [`Handler::reply`] (or [`Handler::auth`] for [`authenticate`](super::Client::authenticate))
/// reports its outcome exactly once.
///
/// ```
/// use benchlink_core::rtm::Ticket;
/// assert_eq!(Ticket::from_raw(3).get(), 3);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Ticket(u32);

impl Ticket {
    /// The ticket's number (tickets count up from 0 per client and wrap after 2³²).
    ///
    /// ```
    /// use benchlink_core::rtm::Ticket;
    /// assert_eq!(Ticket::from_raw(7).get(), 7);
    /// ```
    pub const fn get(self) -> u32 {
        self.0
    }

    /// A ticket from its number, for tests and tables keyed by ticket.
    ///
    /// ```
    /// use benchlink_core::rtm::Ticket;
    /// assert_eq!(Ticket::from_raw(1), Ticket::from_raw(1));
    /// ```
    pub const fn from_raw(n: u32) -> Self {
        Ticket(n)
    }
}

/// Whether a publish, write or delete wants a reply (a request without an id gets none
/// from the server, not even an error).
///
/// ```
/// use benchlink_core::rtm::Ack;
/// use benchlink_core::time::Instant;
/// let _fire_and_forget = Ack::None;
/// let _within_a_minute = Ack::Reply { deadline: Some(Instant::from_secs(60)) };
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Ack {
    /// No id, no reply, no ticket.
    None,
    /// An id and a [`Ticket`]; the outcome is [`Outcome::Timeout`] if no reply arrived by
    /// `deadline` (`None`: wait for as long as the connection lasts).
    Reply {
        /// When to give up waiting.
        deadline: Option<Instant>,
    },
}

/// Why a request was refused at the call; nothing was queued or sent.
///
/// ```
/// use benchlink_core::rtm::RequestError;
/// assert_eq!(RequestError::Full.to_string(), "too many requests waiting (max_queue_size or buffer space)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum RequestError {
    /// The request must wait in the offline queue (not connected, or behind an auth, a
    /// full outbox or a full table of requests in flight) and `max_queue_size` user
    /// requests wait there already, or the queue's bytes have no room right now: retry
    /// later (the std client's `wait_for_room` waits for it). Requests in flight are
    /// bounded by their table, not refused by it: past it they wait in the queue.
    Full,
    /// A message, value, argument or extras text is not valid JSON (or not an object where
    /// an object is required).
    InvalidJson,
    /// The request can never be sent: its PDU is larger than the outbox, a
    /// subscription's key exceeds [`MAX_SUBSCRIPTION_KEY`](super::MAX_SUBSCRIPTION_KEY),
    /// a user position exceeds [`MAX_POSITION_LEN`](super::MAX_POSITION_LEN), or a role or
    /// secret exceeds [`MAX_ROLE_LEN`](super::MAX_ROLE_LEN) / [`MAX_SECRET_LEN`](super::MAX_SECRET_LEN).
    TooLarge,
    /// The request must wait (not connected, or behind other requests) and it is larger
    /// than the whole offline queue.
    QueueTooSmall,
    /// A subscribe `position` containing characters that need JSON escapes (quotes,
    /// backslashes, control characters): positions are opaque server strings.
    InvalidPosition,
    /// `subscribe` on a key that already has a live subscription: nothing changed.
    AlreadySubscribed,
    /// `unsubscribe` of a key with no subscription.
    UnknownSubscription,
    /// The subscription table (the client's [`SubscriptionSlots`](super::SubscriptionSlots)) is full.
    TooManySubscriptions,
    /// Another `authenticate` is still queued or in progress.
    AuthInProgress,
    /// The client was disposed.
    Disposed,
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RequestError::Full => "too many requests waiting (max_queue_size or buffer space)",
            RequestError::InvalidJson => "invalid JSON",
            RequestError::TooLarge => "request too large for the configured buffers",
            RequestError::QueueTooSmall => "request larger than the offline queue",
            RequestError::InvalidPosition => "invalid position",
            RequestError::AlreadySubscribed => "already subscribed",
            RequestError::UnknownSubscription => "no such subscription",
            RequestError::TooManySubscriptions => "subscription table full",
            RequestError::AuthInProgress => "authentication already in progress",
            RequestError::Disposed => "client disposed",
        })
    }
}

impl core::error::Error for RequestError {}

/// Why the adapter could not open the WebSocket (or why the core gave up on an attempt).
///
/// ```
/// use benchlink_core::rtm::ConnectError;
/// let e = ConnectError::Rejected { status: 401 };
/// assert_eq!(e.to_string(), "WebSocket upgrade rejected with HTTP status 401");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ConnectError {
    /// The host name did not resolve.
    Resolve,
    /// A socket error; `code` is the OS error number when known, else 0.
    Io {
        /// OS error number (errno), 0 when unknown.
        code: i32,
    },
    /// TLS failed (certificate, handshake).
    Tls,
    /// The HTTPS proxy refused the `CONNECT` (any status but 200).
    Proxy {
        /// The proxy's HTTP status.
        status: u16,
    },
    /// The server answered the upgrade with another status than 101 (the service
    /// rejects an invalid appkey this way).
    Rejected {
        /// The HTTP status.
        status: u16,
    },
    /// The upgrade response was not a valid WebSocket accept.
    Protocol,
    /// The server accepted the upgrade without selecting the subprotocol the client
    /// offered for its encoding (`cbor`): a JSON-only server. The client never sends
    /// CBOR to it.
    SubprotocolNotSelected,
    /// The attempt took longer than the adapter's or the client's `connect_timeout`.
    Timeout,
    /// The socket opened but closed before the client was ready (during auth restore).
    Closed,
    /// Replaying the remembered credentials failed on the new connection: rejected,
    /// timed out or malformed.
    AuthRestore,
    /// Anything else; `code` is adapter-defined.
    Other {
        /// Adapter-defined detail.
        code: i32,
    },
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Resolve => f.write_str("host name did not resolve"),
            ConnectError::Io { code } => write!(f, "socket error (os error {code})"),
            ConnectError::Tls => f.write_str("TLS failed"),
            ConnectError::Proxy { status } => {
                write!(f, "proxy refused CONNECT with HTTP status {status}")
            }
            ConnectError::Rejected { status } => {
                write!(f, "WebSocket upgrade rejected with HTTP status {status}")
            }
            ConnectError::Protocol => f.write_str("invalid WebSocket upgrade response"),
            ConnectError::SubprotocolNotSelected => {
                f.write_str("the server did not select the offered subprotocol (cbor)")
            }
            ConnectError::Timeout => f.write_str("connect timed out"),
            ConnectError::Closed => f.write_str("connection closed before it was ready"),
            ConnectError::AuthRestore => f.write_str("auth restore failed"),
            ConnectError::Other { code } => write!(f, "connect failed ({code})"),
        }
    }
}

impl core::error::Error for ConnectError {}

/// What the adapter must do next, from [`Client::poll_transmit`](super::Client::poll_transmit).
/// Act on them in order.
///
/// ```
/// use benchlink_core::rtm::Transmit;
/// assert_eq!(Transmit::Send("{}"), Transmit::Send("{}"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Transmit<'a> {
    /// Drop any previous socket and open the WebSocket; report the result with
    /// `handle_connected` or `handle_connect_failed`.
    Connect,
    /// Send this PDU as one text frame on the current socket.
    Send(&'a str),
    /// Send this PDU as one binary frame on the current socket: only a client whose
    /// encoding is CBOR (feature `cbor`) hands these out.
    Binary(&'a [u8]),
    /// Close the current socket (a close frame, then the TCP close) and report
    /// `handle_closed` when it is closed; a no-op when there is no socket.
    Close,
}

/// How an acked request ended (or progressed), in [`Handler::reply`].
///
/// ```
/// use benchlink_core::rtm::Outcome;
/// assert!(Outcome::Timeout.is_final());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Outcome<'a> {
    /// `…/ok`: success; the reply PDU (its body: position, message, channels…).
    Ok(Pdu<'a>),
    /// `…/error` (or `/error` with the request's id): the reply PDU with `error`/`reason`.
    Error(Pdu<'a>),
    /// `rtm/search/data`: one intermediate reply of a search; more follow, then `Ok`.
    Data(Pdu<'a>),
    /// No reply by the request's deadline. A late reply is reported as
    /// [`InternalError::UnknownReply`] and otherwise ignored.
    Timeout,
    /// The connection was lost (or the client stopped or disposed) before the reply
    /// arrived. Whether the server processed the request is unknown.
    Disconnected,
}

impl Outcome<'_> {
    /// True for every outcome but [`Outcome::Data`]: the ticket is done.
    ///
    /// ```
    /// use benchlink_core::rtm::Outcome;
    /// assert!(Outcome::Disconnected.is_final());
    /// ```
    pub fn is_final(&self) -> bool {
        !matches!(self, Outcome::Data(_))
    }
}

/// How an [`authenticate`](super::Client::authenticate) ended, in [`Handler::auth`].
///
/// ```
/// use benchlink_core::rtm::AuthResult;
/// assert!(AuthResult::Done.is_done());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AuthResult<'a> {
    /// Authenticated; the credentials are remembered and replayed on every reconnect
    /// (when `restore_auth_on_reconnect`).
    Done,
    /// The server refused (`auth/handshake/error` or `auth/authenticate/error`, reason
    /// `Unauthenticated`) or its handshake reply carried no nonce.
    Rejected {
        /// Which step failed.
        failure: super::auth::AuthFailure,
        /// The server's `error`/`reason`, when it sent an error reply.
        error: ErrorBody<'a>,
    },
    /// No verdict by the deadline.
    Timeout,
    /// The connection was lost (or the client stopped or disposed) first.
    Disconnected,
}

impl AuthResult<'_> {
    /// True only for [`AuthResult::Done`] (the reference SDK's `Done` check).
    ///
    /// ```
    /// use benchlink_core::rtm::AuthResult;
    /// assert!(!AuthResult::Timeout.is_done());
    /// ```
    pub fn is_done(&self) -> bool {
        matches!(self, AuthResult::Done)
    }
}

/// Why a subscription entered [`SubState::Failed`], in [`Handler::subscription_failed`].
///
/// ```
/// use benchlink_core::rtm::FailReason;
/// use benchlink_core::rtm::pdu::Pdu;
/// let pdu = Pdu::parse(r#"{"action":"rtm/subscribe/error","id":0,"body":{}}"#).unwrap();
/// assert_eq!(FailReason::SubscribeError(pdu).reason(), "Unknown error");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FailReason<'a> {
    /// The server answered the subscribe with an error (e.g. `invalid_format`, "Invalid
    /// PDU: 'position' was invalid").
    SubscribeError(Pdu<'a>),
    /// The server ended an ADVANCED subscription with `out_of_sync` or `expired_position`.
    ChannelError(pdu::ChannelError<'a>),
}

impl<'a> FailReason<'a> {
    /// The reference SDK's failure text: `reason`, else `error`, else `"Unknown error"`
    /// (raw JSON string content, escapes not resolved).
    ///
    /// ```
    /// use benchlink_core::rtm::FailReason;
    /// use benchlink_core::rtm::pdu::Pdu;
    /// let pdu = Pdu::parse(r#"{"action":"rtm/subscribe/error","id":0,"body":{"error":"invalid_format"}}"#).unwrap();
    /// assert_eq!(FailReason::SubscribeError(pdu).reason(), "invalid_format");
    /// ```
    pub fn reason(&self) -> &'a str {
        self.reason_text()
            .map(|s| s.as_raw())
            .unwrap_or("Unknown error")
    }

    /// `reason`, else `error`, as a JSON string whose escapes can be decoded
    /// (`chars()`, `Display`); `None` means the reference text `"Unknown error"`.
    ///
    /// ```
    /// use benchlink_core::rtm::FailReason;
    /// use benchlink_core::rtm::pdu::Pdu;
    /// let pdu = Pdu::parse(r#"{"action":"rtm/subscribe/error","id":0,"body":{"reason":"caf\u00e9 \"x\""}}"#).unwrap();
    /// let text: String = FailReason::SubscribeError(pdu).reason_text().unwrap().chars().collect();
    /// assert_eq!(text, "café \"x\"");
    /// ```
    pub fn reason_text(&self) -> Option<pdu::Text<'a>> {
        let (error, reason) = match self {
            FailReason::SubscribeError(pdu) => {
                let e = pdu.error();
                (e.error, e.reason)
            }
            FailReason::ChannelError(e) => (e.error, e.reason),
        };
        reason.or(error)
    }

    /// The error code (`out_of_sync`, `invalid_format`, …), if any.
    ///
    /// ```
    /// use benchlink_core::rtm::FailReason;
    /// use benchlink_core::rtm::pdu::Pdu;
    /// let pdu = Pdu::parse(r#"{"action":"rtm/subscribe/error","id":0,"body":{"error":"invalid_format"}}"#).unwrap();
    /// assert_eq!(FailReason::SubscribeError(pdu).error(), Some("invalid_format"));
    /// ```
    pub fn error(&self) -> Option<&'a str> {
        match self {
            FailReason::SubscribeError(pdu) => pdu.error().error,
            FailReason::ChannelError(e) => e.error,
        }
        .map(|s| s.as_raw())
    }
}

/// Something wrong with what the server sent, or worth logging. The
/// [fatal](InternalError::is_fatal) ones make the client drop the connection and
/// reconnect, like the reference SDK; the others are reported and otherwise ignored
/// (the reference SDK reconnects on those too).
///
/// ```
/// use benchlink_core::rtm::InternalError;
/// use benchlink_core::rtm::pdu::{Pdu, PduError};
/// assert!(InternalError::Malformed(PduError::NotAnObject { offset: 0 }).is_fatal());
/// let odd = Pdu::parse(r#"{"action":"rtm/new_thing","body":{}}"#).unwrap();
/// assert!(!InternalError::Ignored(odd).is_fatal());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum InternalError<'a> {
    /// Fatal: not JSON, not an object, no `action`, no `body` where one is required, a
    /// known reply action without `id`, or an unsolicited body missing required members.
    Malformed(PduError),
    /// Fatal: an unsolicited `/error` ("General error").
    GeneralError(ErrorBody<'a>),
    /// Fatal: a reply whose action does not answer the request with that id (e.g. a
    /// `rtm/publish/ok` for a subscribe).
    WrongReply {
        /// The request that id belongs to.
        request: Action<'a>,
        /// The reply received.
        reply: Action<'a>,
    },
    /// Fatal for the connection attempt: restoring the remembered credentials failed
    /// (rejected, timed out or malformed); the client backs off and retries.
    AuthRestoreFailed,
    /// Not fatal: an unsolicited PDU of an unknown kind, or `rtm/subscription/info` other
    /// than `fast_forward`.
    Ignored(Pdu<'a>),
    /// Not fatal: a reply whose id matches no request (a reply after its request timed
    /// out, or a string id). The reference SDK ignores these silently.
    UnknownReply(Pdu<'a>),
    /// Not fatal: `rtm/subscription/data` without `position`: the messages were delivered,
    /// the tracked position was not updated (such a PDU stops the reference SDK's
    /// client).
    DataWithoutPosition {
        /// The subscription.
        key: &'a str,
    },
    /// Not fatal: a position longer than [`MAX_POSITION_LEN`](super::MAX_POSITION_LEN)
    /// or containing JSON escapes; the previous position is kept.
    PositionNotTracked {
        /// The subscription.
        key: &'a str,
    },
    /// Not fatal: data or an error for a subscription that is not subscribed (unsubscribed
    /// or failed); it was not delivered.
    UnexpectedForSubscription {
        /// The subscription.
        key: &'a str,
    },
    /// Not fatal: a frame arrived while the client had no open connection (a late frame
    /// from a socket it already gave up); it was not processed.
    NotConnected,
}

impl InternalError<'_> {
    /// Whether the client dropped the connection because of it.
    ///
    /// ```
    /// use benchlink_core::rtm::InternalError;
    /// assert!(!InternalError::NotConnected.is_fatal());
    /// ```
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            InternalError::Malformed(_)
                | InternalError::GeneralError(_)
                | InternalError::WrongReply { .. }
                | InternalError::AuthRestoreFailed
        )
    }
}

/// Receives the client's events. Every call into the [`Client`](super::Client) that
/// causes events delivers them synchronously to the handler passed to that call, before
/// it returns. All methods have empty defaults: implement what you need.
///
/// Order: a state change is reported first ([`Handler::client_state`]), then what entering
/// the state caused (`Disconnected` outcomes, subscription transitions), in table order.
/// A handler cannot call back into the client (the client is mutably borrowed); record
/// what to do and do it after the call returns.
///
/// ```
/// use benchlink_core::rtm::{ClientState, Handler};
/// #[derive(Default)]
/// struct Log { connected: bool }
/// impl Handler for Log {
///     fn client_state(&mut self, _leave: ClientState, enter: ClientState) {
///         self.connected = enter == ClientState::Connected;
///     }
/// }
/// let mut log = Log::default();
/// log.client_state(ClientState::Connecting, ClientState::Connected);
/// assert!(log.connected);
/// ```
pub trait Handler {
    /// The client left `leave` and entered `enter`.
    fn client_state(&mut self, leave: ClientState, enter: ClientState) {
        let _ = (leave, enter);
    }

    /// An acked request's outcome: exactly one final outcome per [`Ticket`], possibly
    /// preceded by [`Outcome::Data`] replies (search).
    fn reply(&mut self, ticket: Ticket, outcome: Outcome<'_>) {
        let _ = (ticket, outcome);
    }

    /// The subscription `key` left `leave` and entered `enter` (`leave == enter` when a
    /// subscribe is re-sent from Subscribing after a cycle).
    fn subscription_state(&mut self, key: &str, leave: SubState, enter: SubState) {
        let _ = (key, leave, enter);
    }

    /// The server's reply to subscription `key`'s subscribe or unsubscribe (`…/ok` with
    /// the subscribe's `position`, or `…/error`), as received, before the state change it
    /// causes: for callers that hand the reply itself on (the SDK contract's connection
    /// callbacks receive the response PDU).
    fn subscription_reply(&mut self, key: &str, reply: Pdu<'_>) {
        let _ = (key, reply);
    }

    /// The subscription `key` just entered [`SubState::Failed`], and why.
    fn subscription_failed(&mut self, key: &str, reason: FailReason<'_>) {
        let _ = (key, reason);
    }

    /// A subscription record was created (by `subscribe`, or when an unsubscribe +
    /// subscribe cycle resolved).
    fn subscription_created(&mut self, key: &str) {
        let _ = key;
    }

    /// A subscription record was removed; no more events for it (until created again).
    fn subscription_deleted(&mut self, key: &str) {
        let _ = key;
    }

    /// Messages for subscription `key`: each element of `data.messages` is raw JSON text
    /// borrowed from the received frame.
    fn subscription_data(&mut self, key: &str, data: pdu::SubscriptionData<'_>) {
        let _ = (key, data);
    }

    /// The server skipped subscription `key` ahead (`rtm/subscription/info` with
    /// `fast_forward`): messages were lost.
    fn fast_forward(&mut self, key: &str, info: pdu::SubscriptionInfo<'_>) {
        let _ = (key, info);
    }

    /// A protocol problem (see [`InternalError::is_fatal`]).
    fn internal_error(&mut self, error: InternalError<'_>) {
        let _ = error;
    }

    /// How an `authenticate` ended: exactly once per its [`Ticket`].
    fn auth(&mut self, ticket: Ticket, result: AuthResult<'_>) {
        let _ = (ticket, result);
    }

    /// Why the open connection ended, from a [`Link`](super::Link): once per connection,
    /// before the client's own state change.
    fn link_closed(&mut self, why: Disconnect<'_>) {
        let _ = why;
    }

    /// Whether [`Link::handle_input`](super::Link::handle_input) may go on to the next
    /// received message in the same call (the default: it takes all the input). A handler
    /// that keeps events for later says no while it holds some: the link then leaves the
    /// rest of the input to the caller, and the events' borrowed parts stay valid
    /// ([`Events`](super::Events), the pull API, does this).
    fn ready_for_input(&mut self) -> bool {
        true
    }

    /// [`Link::handle_input`](super::Link::handle_input) received `message`, a whole
    /// WebSocket message in `encoding` that the link keeps until the next one, and is
    /// about to report its events: a handler that records where their parts lie in it
    /// (as [`Events`](super::Events) does, to read them back without parsing again) takes
    /// its place here. The default does nothing.
    fn received(&mut self, message: &[u8], encoding: super::pdu::Encoding) {
        let _ = (message, encoding);
    }
}

/// One event of the client or its link, borrowed from the link (see
/// [`Events::poll_event`](super::Events::poll_event)): the [`Handler`] methods as values, one
/// variant each, with the same arguments.
///
/// ```
/// use benchlink_core::rtm::{ClientState, Event, Handler};
/// #[derive(Default)]
/// struct Last(Option<ClientState>);
/// impl Handler for Last {
///     fn client_state(&mut self, _leave: ClientState, enter: ClientState) {
///         self.0 = Some(enter);
///     }
/// }
/// let mut last = Last::default();
/// Event::ClientState { leave: ClientState::Stopped, enter: ClientState::Connecting }.deliver(&mut last);
/// assert_eq!(last.0, Some(ClientState::Connecting));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event<'a> {
    /// [`Handler::client_state`].
    ClientState {
        /// The state left.
        leave: ClientState,
        /// The state entered.
        enter: ClientState,
    },
    /// [`Handler::reply`].
    Reply {
        /// The request's ticket.
        ticket: Ticket,
        /// Its outcome.
        outcome: Outcome<'a>,
    },
    /// [`Handler::subscription_state`].
    SubscriptionState {
        /// The subscription.
        key: &'a str,
        /// The state left.
        leave: SubState,
        /// The state entered.
        enter: SubState,
    },
    /// [`Handler::subscription_reply`].
    SubscriptionReply {
        /// The subscription.
        key: &'a str,
        /// The server's reply.
        reply: Pdu<'a>,
    },
    /// [`Handler::subscription_failed`].
    SubscriptionFailed {
        /// The subscription.
        key: &'a str,
        /// Why.
        reason: FailReason<'a>,
    },
    /// [`Handler::subscription_created`].
    SubscriptionCreated {
        /// The subscription.
        key: &'a str,
    },
    /// [`Handler::subscription_deleted`].
    SubscriptionDeleted {
        /// The subscription.
        key: &'a str,
    },
    /// [`Handler::subscription_data`].
    SubscriptionData {
        /// The subscription.
        key: &'a str,
        /// Its messages.
        data: pdu::SubscriptionData<'a>,
    },
    /// [`Handler::fast_forward`].
    FastForward {
        /// The subscription.
        key: &'a str,
        /// The server's notice.
        info: pdu::SubscriptionInfo<'a>,
    },
    /// [`Handler::internal_error`].
    InternalError(InternalError<'a>),
    /// [`Handler::auth`].
    Auth {
        /// The `authenticate`'s ticket.
        ticket: Ticket,
        /// How it ended.
        result: AuthResult<'a>,
    },
    /// [`Handler::link_closed`].
    LinkClosed(Disconnect<'a>),
}

impl Event<'_> {
    /// Calls the [`Handler`] method this event stands for: a handler is the pull API
    /// drained into callbacks.
    pub fn deliver<H: Handler + ?Sized>(self, h: &mut H) {
        match self {
            Event::ClientState { leave, enter } => h.client_state(leave, enter),
            Event::Reply { ticket, outcome } => h.reply(ticket, outcome),
            Event::SubscriptionState { key, leave, enter } => {
                h.subscription_state(key, leave, enter)
            }
            Event::SubscriptionReply { key, reply } => h.subscription_reply(key, reply),
            Event::SubscriptionFailed { key, reason } => h.subscription_failed(key, reason),
            Event::SubscriptionCreated { key } => h.subscription_created(key),
            Event::SubscriptionDeleted { key } => h.subscription_deleted(key),
            Event::SubscriptionData { key, data } => h.subscription_data(key, data),
            Event::FastForward { key, info } => h.fast_forward(key, info),
            Event::InternalError(error) => h.internal_error(error),
            Event::Auth { ticket, result } => h.auth(ticket, result),
            Event::LinkClosed(why) => h.link_closed(why),
        }
    }
}

/// A handler that ignores everything.
///
/// ```
/// use benchlink_core::rtm::{Handler, NoopHandler, ClientState};
/// NoopHandler.client_state(ClientState::Stopped, ClientState::Connecting);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopHandler;

impl Handler for NoopHandler {}

/// Writes `: <reason>` (else `: <error>`) of an error body, unescaped, if it has one.
fn write_error_body(f: &mut fmt::Formatter<'_>, body: &ErrorBody<'_>) -> fmt::Result {
    match body.reason.or(body.error) {
        Some(text) => write!(f, ": {text}"),
        None => Ok(()),
    }
}

impl fmt::Display for AuthResult<'_> {
    /// ```
    /// use benchlink_core::rtm::AuthResult;
    /// assert_eq!(AuthResult::Timeout.to_string(), "authentication timed out");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthResult::Done => f.write_str("authenticated"),
            AuthResult::Rejected { failure, error } => {
                f.write_str(match failure {
                    super::auth::AuthFailure::HandshakeRejected => "handshake rejected",
                    super::auth::AuthFailure::AuthenticateRejected => "authentication rejected",
                    super::auth::AuthFailure::MissingNonce => "handshake reply without a nonce",
                    super::auth::AuthFailure::UnexpectedReply => {
                        "unexpected reply to an auth request"
                    }
                })?;
                write_error_body(f, error)
            }
            AuthResult::Timeout => f.write_str("authentication timed out"),
            AuthResult::Disconnected => f.write_str("disconnected during authentication"),
        }
    }
}

impl fmt::Display for InternalError<'_> {
    /// ```
    /// use benchlink_core::rtm::InternalError;
    /// assert_eq!(InternalError::NotConnected.to_string(), "frame received without an open connection (ignored)");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InternalError::Malformed(e) => write!(f, "malformed PDU: {e}"),
            InternalError::GeneralError(body) => {
                f.write_str("general error from the server")?;
                write_error_body(f, body)
            }
            InternalError::WrongReply { request, reply } => {
                write!(f, "reply {reply} does not answer the request {request}")
            }
            InternalError::AuthRestoreFailed => f.write_str("restoring authentication failed"),
            InternalError::Ignored(pdu) => write!(f, "unexpected PDU {} (ignored)", pdu.action),
            InternalError::UnknownReply(pdu) => {
                write!(f, "reply {} for no pending request (ignored)", pdu.action)
            }
            InternalError::DataWithoutPosition { key } => {
                write!(
                    f,
                    "data for {key} without a position (position not tracked)"
                )
            }
            InternalError::PositionNotTracked { key } => {
                write!(f, "position for {key} too long or escaped (not tracked)")
            }
            InternalError::UnexpectedForSubscription { key } => {
                write!(
                    f,
                    "data or error for {key}, which is not subscribed (ignored)"
                )
            }
            InternalError::NotConnected => {
                f.write_str("frame received without an open connection (ignored)")
            }
        }
    }
}

/// Why an open connection ended, reported once per connection through
/// [`Handler::link_closed`] before the client's own state change. New reasons may come
/// (a newer protocol, a newer transport): match with a catch-all arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Disconnect<'a> {
    /// The server sent a close frame.
    PeerClosed {
        /// Its status code (`None` when the frame had no body).
        code: Option<CloseCode>,
        /// Its reason text (possibly empty).
        reason: &'a str,
    },
    /// The server broke the WebSocket protocol; a close frame with the matching code was
    /// sent (e.g. 1009 for a message larger than the receive buffer).
    Protocol(WsError),
    /// Nothing arrived for [`LinkConfig::dead_peer_timeout`](super::LinkConfig::dead_peer_timeout), an unanswered ping included.
    DeadPeer {
        /// How long the server had been silent.
        silent: Duration,
    },
    /// Bytes waiting to be sent did not move for [`LinkConfig::dead_peer_timeout`](super::LinkConfig::dead_peer_timeout): the
    /// server stopped reading.
    WriteStalled,
    /// The transport ended (EOF, reset, TLS error) without a close handshake.
    TransportClosed,
    /// The client closed the connection (stop, dispose, or a protocol error it reported
    /// as an internal error).
    ClientClosed,
}

impl fmt::Display for Disconnect<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Disconnect::PeerClosed { code: None, .. } => {
                write!(f, "the server closed the connection")
            }
            Disconnect::PeerClosed {
                code: Some(code),
                reason,
            } => {
                write!(f, "the server closed the connection with code {code}")?;
                if !reason.is_empty() {
                    write!(f, ": {}", reason.escape_debug())?;
                }
                Ok(())
            }
            Disconnect::Protocol(e) => write!(f, "WebSocket protocol violation by the server: {e}"),
            Disconnect::DeadPeer { silent } => write!(
                f,
                "no data from the server for {} ms (dead peer)",
                silent.as_millis()
            ),
            Disconnect::WriteStalled => write!(f, "the server stopped reading (write stalled)"),
            Disconnect::TransportClosed => {
                write!(f, "the connection was closed without a close frame")
            }
            Disconnect::ClientClosed => write!(
                f,
                "closed by the client (stopped, or after a protocol error it reported)"
            ),
        }
    }
}

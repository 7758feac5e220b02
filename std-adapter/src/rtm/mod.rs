//! The real-time messaging (Satori RTM-compatible) client for std.
//!
//! [`Client`] reconnects by itself, restores its authentication and subscriptions, and
//! runs every observer and callback on one I/O thread. The protocol logic — PDUs,
//! role-secret auth, the client and subscription state machines, backoff, queues — is
//! `benchlink_core::rtm`; this module moves bytes and calls observers.
//!
//! ```no_run
//! use benchlink_std::rtm::{Client, ClientOptions, Mode, SubscribeOptions, SubscriptionData, SubscriptionObserver};
//! struct Print;
//! impl SubscriptionObserver for Print {
//!     fn on_subscription_data(&mut self, data: &SubscriptionData) {
//!         for m in data.messages() { println!("{m}"); } // raw JSON text
//!     }
//! }
//! let client = Client::new(ClientOptions::new("ws://127.0.0.1:8080", "appkey"))?;
//! client.start()?;
//! client.subscribe("animals", Mode::Reliable, Print, SubscribeOptions::default())?;
//! client.publish_sync("animals", &serde_json::json!({"who": "zebra"}), std::time::Duration::from_secs(5))?;
//! # Ok::<(), benchlink_std::rtm::Error>(())
//! ```
//!
//! # Observers
//! A [`ClientObserver`] hears the client's states (Stopped, Connecting, Connected,
//! Stopping, Awaiting, Disposed: `on_enter_…`/`on_leave_…`), internal errors and
//! fast-forwards; a [`SubscriptionObserver`] hears one subscription's states
//! (Unsubscribed, Subscribing, Subscribed, Unsubscribing, Failed), `on_created`,
//! `on_deleted` and its data. Every method defaults to doing nothing. Callbacks run on the
//! client's I/O thread, in order, after the call that caused them returned; they may
//! call the client again, and a panicking callback stops the client cleanly. No call
//! waits for the I/O thread, so a callback that blocks (or waits for another thread's
//! call) holds up only the events after it, never a caller; a `…_sync` call inside a
//! callback fails at once ([`Error::InCallback`]).
//!
//! # Subscriptions
//! At most [`ClientOptions::max_subscriptions`] at once (default
//! [`DEFAULT_MAX_SUBSCRIPTIONS`], 4096; any number). Request callbacks receive exactly one final [`Response`]:
//! the reply, `Timeout`, or `Disconnected`.
//!
//! # Modes
//! - [`Mode::Simple`]: after a reconnect, resume from "now"; messages published while
//!   disconnected are skipped.
//! - [`Mode::Reliable`]: resume from the last position seen; if it expired
//!   (`out_of_sync`), resubscribe from "now".
//! - [`Mode::Advanced`]: resume from the last position; if it expired, the subscription
//!   fails instead of skipping.
//!
//! [`Connection`] is the low-level API (one connection, no reconnect); [`make_client`]
//! scopes a connected, optionally authenticated client to a closure.

mod cbor;
mod client;
mod connection;
pub(crate) mod engine;
mod io_thread;
mod observer;
mod scoped;
mod tickets;
mod transport;

/// Authentication methods ([`auth::AuthMethod`], the SDK contract's auth delegates;
/// [`auth::RoleSecret`] is the one every server has), as the core defines them.
pub use benchlink_core::rtm::auth;
/// The PDU views an [`auth::AuthMethod`] reads the server's handshake reply with.
pub use benchlink_core::rtm::pdu;
pub use benchlink_core::rtm::pdu::{Encoding, History};
pub use benchlink_core::rtm::{ClientState, Mode, RequestError, SubState};
pub use client::{
    Batch, Callback, Client, ClientOptions, ConnectingError, Error, Response, SubscribeOptions,
    DEFAULT_MAX_IN_FLIGHT_BYTES, DEFAULT_MAX_SUBSCRIPTIONS, DISPOSE_WAIT, IN_FLIGHT_REQUEST_BYTES,
};
pub use connection::{Connection, ConnectionDelegate};
pub use observer::{ClientObserver, Reply, SharedObserver, SubscriptionData, SubscriptionObserver};
pub use scoped::{make_client, AUTH_WAIT, CONNECT_WAIT};
pub use transport::{open, ConnectError, TransportOptions};

//! The real-time messaging (Satori RTM-compatible) client for std.
//!
//! [`Client`] reconnects by itself, restores its authentication and subscriptions, and
//! runs every observer and callback on one I/O thread. The protocol logic — PDUs,
//! role-secret auth, the client and subscription state machines, backoff, queues — is
//! `benchlink_core::rtm`; this module moves bytes and calls observers.

mod client;
mod connection;
mod observer;
mod scoped;
mod transport;

pub use benchlink_core::rtm::{ClientState, Mode, SubState};
pub use client::{Callback, Client, ClientOptions, Error, Response, SubscribeOptions};
pub use connection::{Connection, ConnectionDelegate};
pub use observer::{ClientObserver, Reply, SubscriptionData, SubscriptionObserver};
pub use scoped::{make_client, AUTH_WAIT, CONNECT_WAIT};
pub use transport::{connect, ConnectError, Socket, TransportOptions};

//! The Satori real-time messaging (RTM) protocol, sans IO.
//!
//! - [`pdu`]: the JSON envelope, every request as a typed [`pdu::Request`] written into a
//!   caller buffer, and a zero-copy [`pdu::Pdu`] reader with the [`pdu::Incoming`]
//!   classification of received frames.
//! - [`auth`]: role-secret authentication — the HMAC-MD5 hash and a step machine that
//!   produces the two requests and consumes the two replies.
//! - [`Client`]: the client state machine — reconnect with backoff, auth and subscription
//!   restore, offline queue, request deadlines, subscription modes and positions — driven
//!   by an adapter through `handle_*` inputs, [`Client::poll_transmit`] and
//!   [`Client::poll_timeout`].
//! - [`Link`]: the client joined to the WebSocket transport; its events reach a
//!   [`Handler`] during each call, or wait in [`Events`] to be pulled as [`Event`]s.

pub mod auth;
pub mod pdu;

pub(crate) mod backoff;
mod client;
mod events;
mod events_journal;
mod in_flight;
mod link;
mod outbox;
mod queue;
mod requests;
mod sub_args;
mod sub_table;
mod subscription;
#[cfg(feature = "serde")]
mod typed;

pub use client::{Client, Config, MAX_ROLE_LEN, MAX_SECRET_LEN};
pub use events::{
    Ack, AuthResult, ClientState, ConnectError, Disconnect, Event, FailReason, Handler,
    InternalError, Mode, NoopHandler, Outcome, RequestError, SubState, Ticket, Transmit,
};
pub use events_journal::Events;
pub use in_flight::{Pending, Slots};
pub use link::{
    Buffers, Link, LinkConfig, LinkError, Output, MAX_APPKEY_LEN, MAX_ENDPOINT_LEN, MIN_TX,
};
pub use queue::Bytes;
pub use sub_table::{SubscriptionSlot, SubscriptionSlots};
pub use subscription::{SubscribeArgs, MAX_POSITION_LEN, MAX_SUBSCRIPTION_KEY};

//! The real-time messaging (RTM) protocol of spec `rtm-protocol.md`, sans IO.
//!
//! - [`pdu`]: the JSON envelope, every request as a typed [`pdu::Request`] written into a
//!   caller buffer, and a zero-copy [`pdu::Pdu`] reader with the [`pdu::Incoming`]
//!   classification of received frames.
//! - [`auth`]: role-secret authentication — the HMAC-MD5 hash and a step machine that
//!   produces the two requests and consumes the two replies.

pub mod auth;
pub mod pdu;

//! benchlink-std: the std side of benchlink.
//!
//! - [`bench`](mod@bench): a blocking benchmark-server client over `std::net` (http, and https with
//!   rustls), built on `benchlink-core`'s codecs.
//! - [`rtm`]: the real-time messaging client (reconnects, restores auth and subscriptions).
//! - `tokio` (feature `tokio`): the same clients as async loops on tokio.
//! - [`net`]: plain and TLS byte streams shared by the clients.
//! - [`logging`] turns on verbose logs to stderr with `DEBUG_BENCHLINK_SDK=debug` (or
//!   the reference SDK's `DEBUG_SATORI_SDK=debug`).
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod bench;
mod http;
pub mod logging;
pub mod net;
pub mod rtm;
#[cfg(feature = "tokio")]
pub mod tokio;

/// This crate's README: its Rust examples compile (and, where they need no server, run)
/// as doc tests, so that what it shows keeps building. Its async section needs feature
/// `tokio` (the workspace's test run has it: `cargo test -p benchlink-std --features
/// tokio --doc`).
#[cfg(all(doctest, feature = "tokio"))]
#[doc = include_str!("../README.md")]
pub struct Readme;

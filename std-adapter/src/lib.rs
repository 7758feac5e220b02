//! benchlink-std: the std side of benchlink.
//!
//! - [`bench`]: a blocking benchmark-server client over `std::net` (http, and https with
//!   rustls), built on `benchlink-core`'s codecs.
//! - [`sandbox`]: local servers that behave like the real ones, for tests and demos.
//! - [`cli`]: the `benchlink` command line.
//! - [`net`]: plain and TLS byte streams shared by the clients.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod bench;
pub mod cli;
mod http;
pub mod net;
pub mod rtm;
pub mod sandbox;

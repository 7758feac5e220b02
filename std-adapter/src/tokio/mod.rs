//! The same clients as async loops on tokio (feature `tokio`): the third adapter over
//! core's sans-IO machines, beside the blocking clients and the embassy adapter.
//!
//! - [`rtm`]: the messaging client. Its link is core's [`Link`](benchlink_core::rtm::Link)
//!   driven by one tokio task over a tokio `TcpStream` (TLS through tokio-rustls, an
//!   HTTPS proxy's `CONNECT` tunnel); requests are `async fn`s, a subscription is a
//!   [`Stream`](futures_core::Stream).
//! - [`bench`](mod@bench): the benchmark-server client, every endpoint as an `async fn` and the
//!   log and metric streams as `Stream`s that resume after a cut.

pub mod bench;

pub mod rtm;
mod runner;
mod subscription;
mod transport;

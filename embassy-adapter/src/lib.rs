//! # benchlink-embassy
//!
//! Both benchlink protocols on a microcontroller: async clients over embassy-net TCP
//! sockets and embassy-time timers, driving the same sans-IO core
//! ([`benchlink_core`]) as the std adapter. `no_std`, no allocator: every buffer is the
//! caller's (`&mut [u8]` or a const-generic capacity), sized for the device.
//!
//! - [`bench`](mod@bench): [`BenchClient`](bench::BenchClient) — every endpoint of
//!   [`benchlink_core::bench::request`] through [`call`](bench::BenchClient::call) (typed
//!   JSON replies) and [`stream`](bench::BenchClient::stream) (log and metric lines to a
//!   callback as they arrive, chunked and deflate/gzip decoded into an optional
//!   caller-provided window), one kept-alive connection, bearer token, typed errors.
//! - [`rtm`]: [`Messaging`](rtm::Messaging) — the messaging client: the core's whole
//!   messaging link ([`benchlink_core::rtm::Link`]: WebSocket upgrade and frames, pings,
//!   dead-peer detection, reconnect with backoff, auth and subscription restore) behind a
//!   handle. Its [`run`](rtm::Messaging::run) future is the transport loop that owns the
//!   socket; `&Messaging` is the handle tasks publish, read, write, delete, subscribe and
//!   take the core's [`Event`](benchlink_core::rtm::Event)s with (borrowed where they
//!   arrived, never copied).
//! - [`transport`]: the [`Transport`](transport::Transport) trait both run over, and
//!   [`TcpTransport`](transport::TcpTransport) for an embassy-net `TcpSocket` (names
//!   resolved with `stack.dns_query`; feature `dns`, on by default).
//!
//! With the `defmt` feature every public type implements `defmt::Format` (secrets print
//! as redacted).
//!
//! # Example
//!
//! A task runs the messaging runner, another publishes:
//!
//! ```no_run
//! use benchlink_embassy::core::rtm::{Config, Events, Outcome};
//! use benchlink_embassy::rtm::{MessagingConfig, Messaging, RunnerBuffers};
//! use benchlink_embassy::transport::TcpTransport;
//! use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
//! use embassy_time::{Duration, Timer};
//! # type BoardRng = rand_core::UnwrapErr<rand_core::OsRng>; // the board's RNG peripheral
//! # fn static_bytes<const N: usize>() -> &'static mut [u8] { Box::leak(Box::new([0; N])) }
//!
//! // 4 subscriptions, 8 requests in flight.
//! type Rtm = Messaging<CriticalSectionRawMutex, 4, 8>;
//!
//! /// Put it in a `StaticCell` and hand out `&'static Rtm`.
//! fn messaging(rng: &mut BoardRng) -> Rtm {
//!     // The link keeps its memory ('static: a `ConstStaticCell` each on a device): the
//!     // largest incoming message, the transmit buffer (at least the outbox + 1 KiB), the
//!     // offline queue, and the outbox (its size is the largest PDU sent).
//!     let buffers = RunnerBuffers {
//!         rx: static_bytes::<1024>(),
//!         tx: static_bytes::<2048>(),
//!         queue: static_bytes::<1024>(),
//!         outbox: static_bytes::<1024>(),
//!         // Views' queries and extra subscribe arguments: 256 bytes for each of 4.
//!         subscription_args: static_bytes::<1024>(),
//!     };
//!     // The events waiting to be taken (about 5 KiB: room for keys of up to 256 bytes).
//!     let events = static_bytes::<{ Events::<&mut [u8]>::capacity_for(4, 8, 0) }>();
//!     let link = MessagingConfig::new("ws://10.0.0.1:8080", "APPKEY");
//!     Rtm::new(Config::default(), link, buffers, events, rng).expect("a valid endpoint")
//! }
//!
//! #[embassy_executor::task]
//! async fn rtm_runner(rtm: &'static Rtm, socket: TcpTransport<'static>) -> ! {
//!     let mut chunk = [0; 2048]; // half for a socket read, half for a write
//!     rtm.run(socket, &mut chunk).await
//! }
//!
//! #[embassy_executor::task]
//! async fn publisher(rtm: &'static Rtm) {
//!     rtm.start();
//!     for n in 0u32.. {
//!         let mut text = heapless::String::<32>::new();
//!         let _ = core::fmt::write(&mut text, format_args!("{{\"n\":{n}}}"));
//!         let timeout = Some(Duration::from_secs(5));
//!         let _ = rtm.publish_acked("sensors", &text, timeout, |o| matches!(o, Outcome::Ok(_))).await;
//!         Timer::after(Duration::from_secs(1)).await;
//!     }
//! }
//! # fn main() {}
//! ```
//!
//! (`BoardRng` is any `rand_core::RngCore`: the MCU's RNG peripheral, or a seeded PRNG;
//! it seeds the WebSocket masks and handshake keys. The runner's chunk lives in its
//! task's future, so it counts towards the task's static size.) The benchmark client is
//! a plain value owned by one task; see [`bench::BenchClient`].
#![no_std]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

pub mod bench;
pub mod rtm;
#[cfg(feature = "tls")]
pub mod tls;
pub mod transport;

/// The protocol core this crate drives, re-exported so firmware needs one dependency.
pub use benchlink_core as core;

/// This crate's README: its Rust examples compile (and, where they need no server, run)
/// as doc tests, so that what it shows keeps building.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct Readme;

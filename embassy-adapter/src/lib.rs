//! # benchlink-embassy
//!
//! Both benchlink protocols on a microcontroller: async clients over embassy-net TCP
//! sockets and embassy-time timers, driving the same sans-IO core
//! ([`benchlink_core`]) as the std adapter. `no_std`, no allocator: every buffer is the
//! caller's (`&mut [u8]` or a const-generic capacity), sized for the device.
//!
//! - [`bench`]: [`BenchClient`](bench::BenchClient) — every endpoint of
//!   [`benchlink_core::bench::request`] through [`call`](bench::BenchClient::call) (typed
//!   JSON replies) and [`stream`](bench::BenchClient::stream) (log and metric lines to a
//!   callback as they arrive, chunked and deflate/gzip decoded into an optional
//!   caller-provided window), one kept-alive connection, bearer token, typed errors.
//! - [`rtm`]: [`Messaging`](rtm::Messaging) — the messaging client. Its
//!   [`run`](rtm::Messaging::run) future owns the socket (connect, WebSocket upgrade,
//!   frames, pings, reconnect with the core's backoff on embassy timers, auth and
//!   subscription restore); `&Messaging` is the handle tasks publish, read, write,
//!   delete, subscribe and receive [`Event`](rtm::Event)s with.
//! - [`transport`]: the [`Transport`](transport::Transport) trait both run over, and
//!   [`TcpTransport`](transport::TcpTransport) for an embassy-net `TcpSocket` (names
//!   resolved with `stack.dns_query`).
//!
//! With the `defmt` feature every public type implements `defmt::Format` (secrets print
//! as redacted).
//!
//! # Example
//!
//! A task runs the messaging runner, another publishes:
//!
//! ```no_run
//! use benchlink_embassy::rtm::{LinkConfig, Messaging, RunnerBuffers};
//! use benchlink_embassy::transport::TcpTransport;
//! use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
//! use embassy_time::{Duration, Timer};
//! # type BoardRng = rand_core::UnwrapErr<rand_core::OsRng>; // the board's RNG peripheral
//!
//! // 4 subscriptions, 8 requests in flight, 1 KiB offline queue and PDUs, 8 events of 256 B.
//! type Rtm = Messaging<CriticalSectionRawMutex, 4, 8, 1024, 1024, 8, 256>;
//!
//! #[embassy_executor::task]
//! async fn rtm_runner(rtm: &'static Rtm, socket: TcpTransport<'static>, rng: BoardRng) -> ! {
//!     let (mut rx, mut tx, mut head, mut message) = ([0; 1024], [0; 1100], [0; 512], [0; 1024]);
//!     let buffers = RunnerBuffers { rx: &mut rx, tx: &mut tx, head: &mut head, message: &mut message };
//!     rtm.run(socket, rng, LinkConfig::new("ws://10.0.0.1:8080", "APPKEY"), buffers).await
//! }
//!
//! #[embassy_executor::task]
//! async fn publisher(rtm: &'static Rtm) {
//!     rtm.start();
//!     for n in 0u32.. {
//!         let mut text = heapless::String::<32>::new();
//!         let _ = core::fmt::write(&mut text, format_args!("{{\"n\":{n}}}"));
//!         let _ = rtm.publish_acked("sensors", &text, Some(Duration::from_secs(5))).await;
//!         Timer::after(Duration::from_secs(1)).await;
//!     }
//! }
//! # fn main() {}
//! ```
//!
//! (`BoardRng` is any `rand_core::RngCore`: the MCU's RNG peripheral, or a seeded PRNG.
//! The runner's buffers live in its task's future, so they count towards the task's
//! static size.) The benchmark client is a plain value owned by one task; see
//! [`bench::BenchClient`].
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
pub mod transport;

/// The protocol core this crate drives, re-exported so firmware needs one dependency.
pub use benchlink_core as core;

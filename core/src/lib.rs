//! # benchlink-core
//!
//! The protocol logic of benchlink with no I/O, no clock, no heap and no panics on input:
//! bytes in, bytes and typed events out. Adapters (`benchlink-std`, `benchlink-embassy`)
//! own sockets and timers; this crate is what they share, and what fuzzers and unit tests
//! drive directly.
//!
//! - [`http`]: HTTP/1.1 client codec — request heads, query and multipart encoding, a
//!   push-style response decoder (Content-Length, chunked, close-delimited) with
//!   incremental `deflate`/`gzip` decoding into a caller-provided window.
//! - [`bench`](mod@bench): the benchmark-server (MZBench) API — one typed request per endpoint,
//!   typed zero-copy replies, and streaming metric-line and log-line decoders.
//! - [`cbor`]: its binary twin's errors, and (feature `cbor`) a zero-copy CBOR reader
//!   and writer.
//! - [`json`]: a small zero-copy JSON reader that the typed replies are built on, and
//!   the escaping writer the RTM PDUs are written with.
//! - [`rtm`]: the real-time messaging protocol — PDUs, role-secret auth.
//! - `blocking` (feature `embedded-io`): blocking clients of both protocols over any
//!   `embedded_io::{Read, Write}` transport, each a small loop around the machines above.
//! - [`ws`]: RFC 6455 WebSocket client codec — upgrade request and accept check, masked
//!   frames, a push-style frame decoder with reassembly, and a ping/pong/close session.
// The library is `no_std` (the thumbv7em build in the test command proves it); unit tests
// run on the host with std, like any test harness.
#![cfg_attr(not(test), no_std)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

#[macro_use]
mod text_enum;

mod compact;

pub mod bench;
#[cfg(feature = "embedded-io")]
pub mod blocking;
pub mod cbor;
pub mod http;
pub mod json;
pub mod rtm;
mod swar;
#[cfg(test)]
mod testing;
pub mod time;
pub mod ws;

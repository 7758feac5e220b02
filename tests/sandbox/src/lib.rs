//! Local servers for tests and demos.
//!
//! [`bench`](mod@bench) is an emulator of the MZBench benchmark server's HTTP API, built from the
//! project's specification of the real server's behaviour. It lets the client, the CLI
//! and the examples run against a real socket without an Erlang installation.
//!
//! [`rtm`] is a local RTM (Satori-compatible) publish/subscribe server over WebSocket,
//! with fault injection for porting the reference SDK's tests.
//!
//! [`control`] is an HTTP endpoint that drives both while they run: every runtime fault
//! and observation of their Rust API, for scripts and tests in any language.
//!
//! [`relay`] delays every connection's bytes by a fixed time each way, keeping their
//! order, and cuts its connections at seeded random intervals or on demand: a server
//! across a real (and unreliable) network, on loopback.
//!
//! [`tls`] serves either server over TLS (`https://`, `wss://`), an option of its config.

pub mod bench;
pub mod control;
pub mod relay;
pub mod rtm;
pub mod tls;

pub use bench::{
    BenchServer, BenchServerConfig, BenchmarkInfo, EmailReport, LogCompression, Quirks, Speed,
};
pub use control::ControlServer;
pub use rtm::{RtmServer, RtmServerConfig};

/// This crate's README: its Rust examples compile (and, where they need no server, run)
/// as doc tests, so that what it shows keeps building.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct Readme;

//! Local servers for tests and demos.
//!
//! [`bench`](mod@bench) is an emulator of the MZBench benchmark server's HTTP API, built from the
//! project's specification of the real server's behaviour. It lets the client, the CLI
//! and the examples run against a real socket without an Erlang installation.
//!
//! [`rtm`] is a local RTM (Satori-compatible) publish/subscribe server over WebSocket,
//! with fault injection for porting the reference SDK's tests.

pub mod bench;
pub mod rtm;

pub use bench::{
    BenchServer, BenchServerConfig, BenchmarkInfo, EmailReport, LogCompression, Quirks, Speed,
};
pub use rtm::{RtmServer, RtmServerConfig};

//! Local servers for tests and demos.
//!
//! [`bench`](mod@bench) is an emulator of the MZBench benchmark server's HTTP API, built from the
//! project's specification of the real server's behaviour. It lets the client, the CLI
//! and the examples run against a real socket without an Erlang installation.

pub mod bench;

pub use bench::{
    BenchServer, BenchServerConfig, BenchmarkInfo, EmailReport, LogCompression, Quirks, Speed,
};

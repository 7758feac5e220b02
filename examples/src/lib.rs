//! Runnable benchlink programs.
//!
//! - [`agent`] (binary `agent`, the workspace's default `cargo run`): runs a benchmark
//!   and streams its metrics through the messaging service, on local servers unless
//!   real ones are given; [`agent_async`] (`cargo run -- --async`) is the same agent
//!   written against the async API on tokio.
//! - binary `rtm-bench`: messaging throughput of the std client against a running RTM
//!   server, benchlink's side of `.ci/bench-rtm` (the reference Python SDK's side is
//!   `examples/bench/rtm_sdk_bench.py`).
//! - [`chat`] (binaries `chat-bot` and `chat`): the reference Python SDK's chat examples
//!   (`bot.py`, `interactive.py`), ported; see `examples/README.md`.

pub mod agent;
pub mod agent_async;
pub mod chat;

/// `examples/README.md`, so that `cargo test --doc -p benchlink-examples` checks what it
/// shows.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

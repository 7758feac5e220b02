//! Runnable benchlink programs.
//!
//! - [`agent`] (binary `agent`, the workspace's default `cargo run`): runs a benchmark
//!   and streams its metrics through the messaging service, on local servers unless
//!   real ones are given.
//! - binary `rtm-bench`: messaging throughput of the std client against a running RTM
//!   server, benchlink's side of `.ci/bench-rtm` (the reference Python SDK's side is
//!   `examples/bench/rtm_sdk_bench.py`).

pub mod agent;

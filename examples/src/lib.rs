//! Runnable benchlink programs.
//!
//! - [`agent`] (binary `agent`, the workspace's default `cargo run`): runs a benchmark
//!   and streams its metrics through the messaging service, on local servers unless
//!   real ones are given.

pub mod agent;

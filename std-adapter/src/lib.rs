//! benchlink-std: blocking clients over `std::net`, the CLI, and local servers.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod bench;
pub mod net;
pub mod sandbox;

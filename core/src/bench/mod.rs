//! The benchmark-server (MZBench) API.

pub mod timestamp;

pub use timestamp::{Timestamp, TimestampError};

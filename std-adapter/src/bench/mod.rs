//! The benchmark-server client for std: server addresses, the official token file,
//! scenario files with their includes, and the blocking client.

pub mod address;
pub mod scenario;
pub mod token;

pub use address::{ServerAddress, HOST_ENV};
pub use scenario::Scenario;

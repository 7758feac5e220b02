//! The benchmark-server client for std: a blocking [`BenchClient`] with one method per
//! endpoint, server addresses, the official token file, and scenario files with their
//! includes.
//!
//! ```no_run
//! use benchlink_std::bench::{BenchClient, Scenario, StartOptions};
//! let mut client = BenchClient::from_env()?; // $MZBENCH_API_HOST or localhost:4800
//! let id = client.start(&Scenario::from_file("examples/scenarios/hello.bdl")?, &StartOptions::default())?;
//! for sample in client.data(id)? {
//!     let s = sample?;
//!     println!("{} {} {}", s.timestamp, s.name, s.value);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod address;
mod client;
mod error;
mod model;
pub mod scenario;
pub mod token;

pub use address::{ServerAddress, HOST_ENV};
pub use benchlink_core::bench::resume::Retry;
#[cfg(feature = "tokio")]
pub(crate) use client::Settings;
pub use client::{
    Available, BenchClient, LineStream, OwnedLine, StartOptions, DEFAULT_HOST, DEFAULT_TIMEOUT,
};
pub use error::{Error, ErrorKind, Escaped, Waiting};
pub use model::{ClusterInfo, MetricResult, Results, Sample, StatusInfo, Value};
pub use scenario::Scenario;

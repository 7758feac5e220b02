//! The benchmark-server (MZBench) API, sans I/O.
//!
//! - [`request`]: one typed request per endpoint. Each writes its exact request target
//!   (path and query, byte for byte what the official client sends) and says how its
//!   reply is read: [`JsonRequest::Reply`] or [`StreamRequest::Format`].
//! - Replies, zero-copy over the body: [`Started`], [`BenchStatus`] with [`Status`],
//!   [`Results`], [`Clusters`], the acknowledgements [`Stopped`], [`EnvSet`],
//!   [`CommandSent`], [`TypecheckOk`], [`Empty`]; [`read_reply`] turns a status code and
//!   body into the reply or a typed [`Error`].
//! - Streams: [`LineSplitter`] (the one line-splitting mechanism, with a caller-sized
//!   buffer as the line-length limit) under [`LogDecoder`] and [`MetricDecoder`].
//! - [`resume`]: the cursors that resume `/data`, `/log`, `/userlog` and `/server_logs`
//!   exactly after a cut, and the [`resume::Retry`] policy of the clients around them.
//! - [`Timestamp`]: the server's `YYYY-MM-DDTHH:MM:SSZ` times as Unix seconds.
//!
//! - [`exchange`]: one request and its response as a sans-IO machine
//!   ([`exchange::Conversation`]: keep-alive reuse, the stale-connection retry, early
//!   replies, the request, connect and stream-idle deadlines) and the wait for a
//!   running benchmark before `/data` ([`exchange::DataWait`]). The adapters own the
//!   sockets and the clocks, and only move bytes and wait.
//!
//! ```
//! use benchlink_core::bench::{request, JsonRequest, MetricDecoder, Status};
//!
//! // A /status reply.
//! let reply = request::Status::read_reply(200, br#"{"create_time":"2015-11-03T13:39:20Z","finish_time":"2015-11-03T13:41:27Z","start_time":"2015-11-03T13:39:21Z","status":"complete"}"#).unwrap();
//! assert!(reply.status == Status::Complete && reply.status.is_final());
//! assert_eq!(reply.finish_time.unwrap().to_string(), "2015-11-03T13:41:27Z");
//!
//! // A /data stream, in whatever pieces the connection delivers.
//! let mut line_buf = [0u8; 256];
//! let mut metrics = MetricDecoder::new(&mut line_buf);
//! let mut total = 0.0;
//! for chunk in [&b"1439245024\tprint\t3"[..], b"0\n1439245034\tprint.rps\t2.99", b"75917348002614\n"] {
//!     let mut input = chunk;
//!     while let Some(sample) = metrics.next(&mut input) {
//!         total += sample.unwrap().value.as_f64();
//!     }
//! }
//! assert!(metrics.finish().is_none());
//! assert_eq!(total, 30.0 + 2.9975917348002614);
//! ```

mod clusters;
mod error;
pub mod exchange;
mod lines;
mod reply;
pub mod request;
mod results;
pub mod resume;
mod samples;
mod status;
mod timestamp;

pub use crate::json::Number;
pub use clusters::{Cluster, ClusterState, Clusters, ClustersIter, Hosts, HostsIter};
pub use error::{Error, ReasonCode, ServerError, MAX_BODY_VIEW};
pub use lines::{
    LineDecoder, LineFormat, LineSplitter, LineTooLong, LogDecoder, LogLine, LogLineError,
};
pub use reply::{read_reply, CommandSent, Empty, EnvSet, FromReply, Started, Stopped, TypecheckOk};
pub use request::{Body, JsonRequest, Request, StreamRequest};
pub use results::{Metric, MetricKind, Results, ResultsIter, StatKey, Stats};
pub use samples::{MetricDecoder, MetricLine, Sample, SampleError};
pub use status::{BenchStatus, Status};
pub use timestamp::{Timestamp, TimestampError};

#[cfg(test)]
mod tests;

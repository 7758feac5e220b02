//! An emulator of the MZBench benchmark server's HTTP API, for tests and demos.
//!
//! It speaks HTTP/1.1 on `127.0.0.1` (or [`BenchServerConfig::listen`]) and walks every
//! benchmark through the real server's pipeline stages on a thread of its own, with
//! timings from [`Speed`]. Replies copy the real server byte for byte where clients can
//! see it: compact JSON with sorted keys, the status codes and texts of its errors
//! (including the odd 500s), `/log` as one zlib stream with sync flushes, `/data` as one
//! chunk per tab-separated line with Erlang-style floats. [`Quirks`] switches the
//! behaviours that are hostile to tests; [`Fault`] and [`BenchFault`] make the server or
//! its benchmarks misbehave on purpose.
//!
//! Hostile clients meet explicit limits (fields of [`BenchServerConfig`]): one event loop
//! reads every connection until it has a complete request, so idle and slow clients
//! hold no thread; a bounded pool of workers answers complete requests; connections are
//! capped (the one that waited longest for a complete request makes room); a head must
//! be complete within a deadline counted from its first byte; bodies are decoded as
//! they arrive (chunked bodies with the core's incremental decoder, in linear time),
//! with a per-request limit (413) and a budget for all connections together (503).
//! [`BenchServer::stats`] shows the accounting.
//!
//! # Example
//!
//! ```
//! use std::io::{Read, Write};
//! use benchlink_sandbox::{BenchServer, BenchServerConfig};
//!
//! let server = BenchServer::start(BenchServerConfig::fast())?;
//! let mut conn = std::net::TcpStream::connect(server.addr())?;
//! write!(conn, "GET /status?id=0 HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", server.host())?;
//! let mut reply = String::new();
//! conn.read_to_string(&mut reply)?;
//! assert!(reply.starts_with("HTTP/1.1 404 Not Found\r\n"));
//! assert!(reply.ends_with(r#"{"reason":"Benchmark 0 is not found","reason_code":"not_found"}"#));
//! server.shutdown();
//! # Ok::<(), std::io::Error>(())
//! ```

pub(crate) mod budget;
mod clock;
mod config;
mod endpoints;
mod erlang;
mod error;
pub(crate) mod http;
mod json;
mod listener;
mod logfile;
mod metrics;
mod multipart;
mod params;
mod pipeline;
pub(crate) mod query;
pub(crate) mod request;
mod results;
mod scenario;
mod server_log;
mod state;
mod streams;
mod workers;

use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, PoisonError};
use std::thread::{self, JoinHandle};

pub use config::{
    BenchFault, BenchServerConfig, Fault, LogCompression, Quirks, Speed, User, TOKEN_LOGIN,
};
pub use listener::ServerStats;
pub use pipeline::STAGES;
pub use state::EmailReport;

use listener::{Loop, Net};
use state::Shared;
use workers::Pool;

/// A snapshot of one benchmark's server-side record, for tests that check what the
/// server understood from a request (the HTTP API does not show all of it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenchmarkInfo {
    /// The id.
    pub id: u64,
    /// Current status (`init` … `complete`, `failed`, `stopped`).
    pub status: String,
    /// `benchmark_name`, or the script's file name.
    pub name: String,
    /// The login of the user who started it (`anonymous` without authentication).
    pub author: String,
    /// The `bench` part's file name.
    pub script_name: String,
    /// The scenario text.
    pub script: String,
    /// `include` parts: file name and content.
    pub includes: Vec<(String, Vec<u8>)>,
    /// Environment variables, sorted by name, including `mzb_script_name` and
    /// `mzb_bench_id`.
    pub env: Vec<(String, String)>,
    /// Tags, in order.
    pub tags: Vec<String>,
    /// The benchmark this one was restarted (cloned) from.
    pub parent: Option<i64>,
    /// `email` addresses given at start.
    pub emails: Vec<String>,
    /// `exclusive` labels.
    pub exclusive: Vec<String>,
    /// Commands accepted by `/run_command`.
    pub commands: Vec<String>,
    /// Whether the benchmark's process still runs (streams end when it is gone).
    pub process_alive: bool,
    /// How many times the `wait_exclusive` stage looked at the exclusive labels (once
    /// on entry, then at every wake-up or poll): the tick a test waits for to see that
    /// a waiting benchmark looked again and still waits.
    pub exclusive_checks: u64,
    /// How many times a `/data` request looked for a status with data and waited for
    /// one (see [`Quirks::data_hangs_on_failed`]): the tick a test waits for to see that
    /// the request still hangs.
    pub data_waits: u64,
}

/// A running emulated benchmark server. It shuts down (threads joined, connections
/// closed, port released) on [`BenchServer::shutdown`] or on drop.
///
/// # Example
///
/// ```
/// use benchlink_sandbox::{BenchServer, BenchServerConfig};
/// let server = BenchServer::start(BenchServerConfig::fast())?;
/// assert!(server.host().starts_with("127.0.0.1:"));
/// server.shutdown();
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct BenchServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    net: Arc<Net>,
    pool: Arc<Pool>,
    event_loop: Option<JoinHandle<()>>,
    /// The TLS front, when the server serves `https://`.
    front: Option<crate::tls::Front>,
}

impl BenchServer {
    /// Binds `config.listen:config.port` (port 0 = any free port) and starts serving.
    ///
    /// # Errors
    ///
    /// When the port cannot be bound or the server's thread cannot be spawned.
    pub fn start(config: BenchServerConfig) -> io::Result<BenchServer> {
        let listener = TcpListener::bind(SocketAddr::new(config.listen, config.port))?;
        let addr = listener.local_addr()?;
        // With TLS, the front takes the address and the server a loopback port behind it.
        let (listener, front) = match &config.tls {
            Some(tls) => {
                let inner = crate::tls::inner_listener()?;
                let inner_addr = inner.local_addr()?;
                let front = crate::tls::Front::start(listener, inner_addr, tls.clone(), "bench")?;
                (inner, Some(front))
            }
            None => (listener, None),
        };
        let shared = Arc::new(Shared::new(config));
        {
            let mut st = shared.lock();
            st.log(
                server_log::Severity::Info,
                &format!("[ API ] Listening on {addr}"),
            );
        }
        let event_loop = Loop::new(&shared, listener)?;
        let (net, pool) = (event_loop.net(), event_loop.pool());
        let event_loop = thread::Builder::new()
            .name("bench-loop".to_owned())
            .spawn(move || event_loop.run())?;
        Ok(BenchServer {
            shared,
            addr,
            net,
            pool,
            event_loop: Some(event_loop),
            front,
        })
    }

    /// The bound address (with TLS, where the TLS clients connect).
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `ADDRESS:PORT` (`127.0.0.1:PORT` by default), the form the official client takes
    /// as `host`.
    #[must_use]
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// `http://ADDRESS:PORT`, or `https://…` when the server serves TLS
    /// ([`BenchServerConfig::tls`]).
    #[must_use]
    pub fn url(&self) -> String {
        let scheme = if self.front.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// The connection and memory accounting: open connections, body bytes held now and
    /// at most, body bytes decoded, connections evicted, refused and timed out.
    ///
    /// ```
    /// use benchlink_sandbox::{BenchServer, BenchServerConfig};
    /// let server = BenchServer::start(BenchServerConfig::fast())?;
    /// assert_eq!(server.stats().body_bytes, 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[must_use]
    pub fn stats(&self) -> ServerStats {
        self.net.stats()
    }

    /// How many requests the server handled so far, by path (`/status`, `/data`, …): the
    /// round trips a client cost, for tests that count them.
    #[must_use]
    pub fn requests(&self) -> BTreeMap<String, u64> {
        self.shared.lock().requests.clone()
    }

    /// Reports the server would have e-mailed, oldest first (mail is never sent).
    #[must_use]
    pub fn email_reports(&self) -> Vec<EmailReport> {
        self.shared.lock().email_reports.clone()
    }

    /// The server-side record of benchmark `id`, if it exists.
    #[must_use]
    pub fn benchmark(&self, id: u64) -> Option<BenchmarkInfo> {
        let st = self.shared.lock();
        let b = st.benches.get(&i64::try_from(id).ok()?)?;
        Some(BenchmarkInfo {
            id,
            status: b.status.to_owned(),
            name: b.name.clone(),
            author: b.author.clone(),
            script_name: b.params.script_name.clone(),
            script: b.params.script.clone(),
            includes: b.params.includes.clone(),
            env: b.env.clone(),
            tags: b.tags.clone(),
            parent: b.params.parent,
            emails: b.params.emails.clone(),
            exclusive: b.params.exclusive.clone(),
            commands: b.commands.clone(),
            process_alive: b.process_alive,
            exclusive_checks: b.exclusive_checks,
            data_waits: b.data_waits,
        })
    }

    /// Makes benchmark `id` behave as if its process had died without reporting:
    /// `/status` then answers `{"reason":"crashed","status":"failed"}` and its streams
    /// end. Returns false for an unknown or already finished benchmark.
    pub fn crash_benchmark(&self, id: u64) -> bool {
        self.kill(id, false)
    }

    /// Makes benchmark `id` look like one that was in flight when the server died:
    /// its status becomes `zombie` (forever) with `start_time` = `finish_time` =
    /// `create_time`. Returns false for an unknown or already finished benchmark.
    pub fn zombify_benchmark(&self, id: u64) -> bool {
        self.kill(id, true)
    }

    fn kill(&self, id: u64, zombie: bool) -> bool {
        i64::try_from(id).is_ok_and(|id| self.shared.kill(id, zombie))
    }

    /// Stops serving: wakes and joins every thread and closes every connection.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(event_loop) = self.event_loop.take() else {
            return;
        };
        if let Some(front) = &mut self.front {
            front.stop();
        }
        self.shared.begin_shutdown();
        self.net.wake();
        let _ = event_loop.join();
        self.net.shutdown_busy();
        for worker in self.pool.stop() {
            let _ = worker.join();
        }
        loop {
            let handles: Vec<JoinHandle<()>> = std::mem::take(
                &mut *self
                    .shared
                    .threads
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            if handles.is_empty() {
                break;
            }
            for h in handles {
                let _ = h.join();
            }
        }
    }
}

impl Drop for BenchServer {
    fn drop(&mut self) {
        self.stop();
    }
}

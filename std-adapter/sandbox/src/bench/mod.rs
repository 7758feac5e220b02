//! An emulator of the MZBench benchmark server's HTTP API, for tests and demos.
//!
//! It speaks HTTP/1.1 on `127.0.0.1` with one thread per connection and walks every
//! benchmark through the real server's pipeline stages on a thread of its own, with
//! timings from [`Speed`]. Replies copy the real server byte for byte where clients can
//! see it: compact JSON with sorted keys, the status codes and texts of its errors
//! (including the odd 500s), `/log` as one zlib stream with sync flushes, `/data` as one
//! chunk per tab-separated line with Erlang-style floats. [`Quirks`] switches the
//! behaviours that are hostile to tests.
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

mod clock;
mod config;
mod endpoints;
mod erlang;
mod error;
mod http;
mod json;
mod logfile;
mod metrics;
mod multipart;
mod params;
mod pipeline;
mod query;
mod results;
mod scenario;
mod server_log;
mod state;
mod streams;

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

pub use config::{BenchServerConfig, Fault, LogCompression, Quirks, Speed};
pub use state::EmailReport;

use http::{Conn, Flow, Next};
use state::Shared;

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
}

/// Open connections, so that shutdown can unblock threads stuck in a write.
type Registry = Arc<Mutex<BTreeMap<u64, TcpStream>>>;

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
    registry: Registry,
    acceptor: Option<JoinHandle<()>>,
}

impl BenchServer {
    /// Binds `127.0.0.1:config.port` (0 = any free port) and starts serving.
    ///
    /// # Errors
    ///
    /// When the port cannot be bound or the accept thread cannot be spawned.
    pub fn start(config: BenchServerConfig) -> io::Result<BenchServer> {
        let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, config.port))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::new(config));
        let registry: Registry = Arc::new(Mutex::new(BTreeMap::new()));
        {
            let mut st = shared.lock();
            st.log(
                server_log::Severity::Info,
                &format!("[ API ] Listening on {addr}"),
            );
        }
        let (s, r) = (Arc::clone(&shared), Arc::clone(&registry));
        let acceptor = thread::Builder::new()
            .name("bench-accept".to_owned())
            .spawn(move || accept_loop(&s, &listener, &r))?;
        Ok(BenchServer {
            shared,
            addr,
            registry,
            acceptor: Some(acceptor),
        })
    }

    /// The bound address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `127.0.0.1:PORT`, the form the official client takes as `host`.
    #[must_use]
    pub fn host(&self) -> String {
        self.addr.to_string()
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
        let Ok(id) = i64::try_from(id) else {
            return false;
        };
        let mut st = self.shared.lock();
        let Some(b) = st.benches.get_mut(&id) else {
            return false;
        };
        if !b.process_alive || state::is_final(b.status) {
            return false;
        }
        b.abort = true;
        if zombie {
            b.status = "zombie";
            b.start_time = Some(b.create_time);
            b.finish_time = Some(b.create_time);
        } else {
            b.crashed = true;
            b.status = "failed";
        }
        st.exclusive.retain(|_, holder| *holder != id);
        self.shared.notify();
        true
    }

    /// Stops serving: wakes and joins every thread and closes every connection.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.shared.begin_shutdown();
        // Wake the blocking accept with a connection of our own.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(500));
        let _ = acceptor.join();
        for stream in self
            .registry
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            let _ = stream.shutdown(std::net::Shutdown::Both);
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

fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener, registry: &Registry) {
    let mut next_conn = 0u64;
    for stream in listener.incoming() {
        if shared.is_shutdown() {
            break;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                log::warn!("bench server: accept failed: {e}");
                // Out of file descriptors and the like: back off instead of spinning.
                thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        next_conn += 1;
        let conn_id = next_conn;
        if let Ok(clone) = stream.try_clone() {
            registry
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(conn_id, clone);
        }
        let (s, r) = (Arc::clone(shared), Arc::clone(registry));
        let spawned = thread::Builder::new()
            .name(format!("bench-conn-{conn_id}"))
            .spawn(move || {
                serve(&s, stream);
                r.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&conn_id);
            });
        match spawned {
            Ok(handle) => shared.track(handle),
            Err(e) => {
                log::warn!("bench server: cannot spawn a connection thread: {e}");
                registry
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&conn_id);
            }
        }
    }
}

/// Serves one connection until it closes.
fn serve(shared: &Arc<Shared>, stream: TcpStream) {
    let drip = match shared.config.fault {
        Some(Fault::Silent) => {
            Conn::new(stream, None).hold(shared);
            return;
        }
        Some(Fault::Drip(pause)) => Some(pause),
        None => None,
    };
    let mut conn = Conn::new(stream, drip);
    loop {
        match conn.next_request(shared) {
            Next::Request(req) => match endpoints::handle(shared, &mut conn, &req) {
                Ok(Flow::KeepAlive) if req.keep_alive && !shared.is_shutdown() => {}
                _ => break,
            },
            Next::Closed => break,
            Next::Bad(status) => {
                conn.close_after();
                let _ = conn.respond(status, &[], b"", false);
                break;
            }
        }
    }
    conn.shutdown();
}

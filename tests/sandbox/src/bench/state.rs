//! The server's shared state: benchmarks, clusters, exclusive labels, the server log and
//! sent reports, under one mutex with one condition variable that every change
//! notifies (streams and pipelines wait on it with a timeout and a shutdown flag, so
//! nothing spins).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use super::clock;
use super::config::BenchServerConfig;
use super::json::Json;
use super::logfile::LogFile;
use super::metrics::Metrics;
use super::params::StartParams;
use super::scenario::Scenario;
use super::server_log::{ServerLog, Severity};

/// Process id of the API server in log lines.
pub(crate) const API_PID: &str = "<0.214.0>";

/// State shared by the listener, connections and benchmark pipelines.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: BenchServerConfig,
    state: Mutex<State>,
    changed: Condvar,
    shutdown: AtomicBool,
    pub(crate) threads: Mutex<Vec<JoinHandle<()>>>,
    /// The generated `/data` lines of [`BenchServerConfig::data_flood`], chunk-framed.
    flood: OnceLock<Arc<Vec<u8>>>,
}

impl Shared {
    /// Fresh state for `config`.
    pub(crate) fn new(config: BenchServerConfig) -> Shared {
        Shared {
            config,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            shutdown: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
            flood: OnceLock::new(),
        }
    }

    /// The `data_flood` lines, one HTTP chunk each, generated on first use: 16 metrics
    /// interleaved, integers and floats, about 38 bytes per line on the wire.
    pub(crate) fn data_flood(&self) -> Arc<Vec<u8>> {
        Arc::clone(self.flood.get_or_init(|| {
            use std::io::Write;
            let n = self.config.data_flood;
            let mut out = Vec::with_capacity(n.saturating_mul(40));
            let mut line = Vec::with_capacity(64);
            for i in 0..n {
                line.clear();
                let ts = 1_700_000_000 + i / 16;
                let _ = if i % 4 == 3 {
                    writeln!(line, "{ts}\tflood.{}.count\t{}.5", i % 16, i % 1000)
                } else {
                    writeln!(line, "{ts}\tflood.{}.count\t{}", i % 16, i % 1_000_000)
                };
                let _ = write!(out, "{:x}\r\n", line.len());
                out.extend_from_slice(&line);
                out.extend_from_slice(b"\r\n");
            }
            Arc::new(out)
        }))
    }

    /// Locks the state. A panicking thread cannot leave it half-updated in a way that
    /// matters to an emulator, so a poisoned lock is simply taken over.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes every waiter after a change.
    pub(crate) fn notify(&self) {
        self.changed.notify_all();
    }

    /// Waits for a change or `timeout`.
    pub(crate) fn wait<'a>(
        &self,
        guard: MutexGuard<'a, State>,
        timeout: Duration,
    ) -> MutexGuard<'a, State> {
        self.changed
            .wait_timeout(guard, timeout)
            .map_or_else(|e| e.into_inner().0, |(g, _)| g)
    }

    /// Whether the server is shutting down.
    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    /// Starts shutting down and wakes every waiter.
    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        let _guard = self.lock();
        self.notify();
    }

    /// Makes benchmark `id` crash (its process dies without reporting) or turn zombie
    /// (as if the server had died under it). False for an unknown or finished one.
    pub(crate) fn kill(&self, id: i64, zombie: bool) -> bool {
        let mut st = self.lock();
        let Some(b) = st.benches.get_mut(&id) else {
            return false;
        };
        if !b.process_alive || is_final(b.status) {
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
        self.notify();
        true
    }

    /// Keeps a thread to join at shutdown, dropping handles of finished ones.
    pub(crate) fn track(&self, handle: JoinHandle<()>) {
        let mut threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
        threads.retain(|t| !t.is_finished());
        threads.push(handle);
    }
}

/// A cluster record of `/clusters_info`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cluster {
    pub(crate) id: i64,
    pub(crate) bench_id: i64,
    pub(crate) n: i64,
    pub(crate) state: &'static str,
    pub(crate) timestamp: u64,
    pub(crate) provider: String,
    pub(crate) hosts: Option<Vec<String>>,
    pub(crate) reason: Option<String>,
}

impl Cluster {
    /// The JSON object: `hosts` only once allocated, `reason` only in the failure states.
    pub(crate) fn to_json(&self) -> Json {
        let mut fields = vec![
            ("bench_id", Json::int(self.bench_id)),
            ("id", Json::int(self.id)),
            ("n", Json::int(self.n)),
            ("provider", Json::str(self.provider.clone())),
            ("state", Json::str(self.state)),
            (
                "timestamp",
                Json::int(i64::try_from(self.timestamp).unwrap_or(i64::MAX)),
            ),
        ];
        if let Some(hosts) = &self.hosts {
            fields.push((
                "hosts",
                Json::Arr(hosts.iter().map(|h| Json::str(h.clone())).collect()),
            ));
        }
        if let Some(reason) = &self.reason {
            fields.push(("reason", Json::str(reason.clone())));
        }
        Json::obj(fields)
    }
}

/// An e-mail report the server would have sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmailReport {
    /// The benchmark reported on.
    pub bench_id: u64,
    /// Recipients, as given (a comma-separated `addr` is one address, like the real
    /// server).
    pub addresses: Vec<String>,
    /// `/email_report` (true) or the `email` option of `/start` at finalize (false).
    pub on_request: bool,
}

/// One benchmark.
#[derive(Debug)]
pub(crate) struct Bench {
    pub(crate) id: i64,
    pub(crate) params: StartParams,
    pub(crate) scenario: Scenario,
    pub(crate) name: String,
    pub(crate) author: String,
    pub(crate) status: &'static str,
    pub(crate) crashed: bool,
    pub(crate) create_time: u64,
    pub(crate) start_time: Option<u64>,
    pub(crate) finish_time: Option<u64>,
    pub(crate) tags: Vec<String>,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) stop_requested: bool,
    pub(crate) abort: bool,
    pub(crate) process_alive: bool,
    pub(crate) director_connected: bool,
    pub(crate) log: LogFile,
    pub(crate) user_log: LogFile,
    pub(crate) metrics: Metrics,
    pub(crate) results: Option<Json>,
    pub(crate) commands: Vec<String>,
    pub(crate) pid: String,
    /// How many times `wait_exclusive` looked at the labels (and waited again).
    pub(crate) exclusive_checks: u64,
    /// How many times a `/data` request looked for a status with data (and waited).
    pub(crate) data_waits: u64,
}

/// Final statuses: the pipeline is over (finalize may still run).
pub(crate) fn is_final(status: &str) -> bool {
    matches!(status, "complete" | "failed" | "stopped" | "zombie")
}

impl Bench {
    /// A line of the system log written by the server: `HH:MM:SS.mmm [sev] [ API ] <pid> msg`.
    pub(crate) fn api_log(&mut self, severity: Severity, message: &str) {
        let now = clock::now_ms();
        let line = format!(
            "{} [{}] [ API ] {} {}",
            clock::time_of_day(now),
            severity.name(),
            self.pid,
            message
        );
        self.log.write_line(&line, now);
    }

    /// A lager line from a node into the system log.
    pub(crate) fn node_log(&mut self, severity: Severity, pid: &str, message: &str) {
        let now = clock::now_ms();
        let line = format!(
            "{} [{}] {} {}",
            clock::time_of_day(now),
            severity.name(),
            pid,
            message
        );
        self.log.write_line(&line, now);
    }

    /// A lager line from a worker into the user log.
    pub(crate) fn user_log_line(&mut self, pid: &str, message: &str) {
        let now = clock::now_ms();
        let line = format!("{} [info] {} {}", clock::time_of_day(now), pid, message);
        self.user_log.write_line(&line, now);
    }

    /// The `/status` object.
    pub(crate) fn status_json(&self) -> Json {
        if self.crashed {
            return Json::obj([
                ("reason", Json::str("crashed")),
                ("status", Json::str("failed")),
            ]);
        }
        let time = |t: u64| Json::str(clock::iso(t));
        let mut fields = vec![
            ("create_time", time(self.create_time)),
            ("status", Json::str(self.status)),
        ];
        if let Some(t) = self.start_time {
            fields.push(("start_time", time(t)));
        }
        if let Some(t) = self.finish_time {
            fields.push(("finish_time", time(t)));
        }
        Json::obj(fields)
    }

    /// Sets a final status (and `finish_time`) unless one is already set.
    pub(crate) fn finish(&mut self, status: &'static str) {
        if !is_final(self.status) {
            self.status = status;
            self.finish_time = Some(clock::now_secs());
        }
    }
}

/// Everything behind the mutex.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) next_id: i64,
    pub(crate) benches: BTreeMap<i64, Bench>,
    pub(crate) clusters: BTreeMap<i64, Cluster>,
    pub(crate) next_cluster_id: i64,
    pub(crate) exclusive: BTreeMap<String, i64>,
    pub(crate) server_log: ServerLog,
    pub(crate) email_reports: Vec<EmailReport>,
    /// Requests handled so far, by path (for [`BenchServer::requests`](super::BenchServer::requests)).
    pub(crate) requests: BTreeMap<String, u64>,
}

impl State {
    /// Logs a server message (what `/server_logs` streams).
    pub(crate) fn log(&mut self, severity: Severity, message: &str) {
        let line = self.server_log.push(severity, API_PID, message);
        if severity >= Severity::Warning {
            log::warn!("bench server: {line}");
        } else {
            log::debug!("bench server: {line}");
        }
    }
}

//! Configuration of the emulated benchmark server: timings, compression, auth, quirks,
//! faults and the limits that keep it standing against hostile clients.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

/// How long the emulated benchmark takes in each phase.
///
/// The real server needs minutes (provisioning nodes over SSH, metric reports every
/// 10 s); tests need a whole benchmark in a fraction of a second and demos want
/// something a human can watch. Every wait of the emulator comes from here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Speed {
    /// Duration of each pipeline stage other than `running` (and of `wait_exclusive`
    /// once the labels are free).
    pub stage: Duration,
    /// Real time that one scenario second takes: `loop(time = 10 sec, …)` runs for
    /// `10 * scenario_second`.
    pub scenario_second: Duration,
    /// Running time of a scenario without a `loop(time = …)`.
    pub default_running: Duration,
    /// Upper bound on the running phase, whatever the scenario asks for.
    pub max_running: Duration,
    /// Interval between two metric reports while running (the real server's
    /// `metric_update_interval_ms`, 10 s by default). A benchmark's own
    /// `metric_update_interval_ms` scales it (10000 ms = this value).
    pub metric_interval: Duration,
    /// Interval of the log writer's time-based sync flush (10 s on the real server).
    pub log_flush_interval: Duration,
    /// Poll interval of the streaming endpoints (`bench_poll_timeout`, 1 s on the real
    /// server). Streams also wake up early when new data arrives.
    pub poll: Duration,
    /// Total duration of the finalize stages, during which the final status is already
    /// visible but the streams are still open.
    pub finalize: Duration,
}

impl Speed {
    /// Timings close to a small real benchmark: one second per stage, real scenario
    /// time, metric reports every 10 s, 1 s stream polling.
    #[must_use]
    pub fn realistic() -> Speed {
        Speed {
            stage: Duration::from_secs(1),
            scenario_second: Duration::from_secs(1),
            default_running: Duration::from_secs(60),
            max_running: Duration::from_secs(3600),
            metric_interval: Duration::from_secs(10),
            log_flush_interval: Duration::from_secs(10),
            poll: Duration::from_secs(1),
            finalize: Duration::from_secs(3),
        }
    }

    /// A benchmark of a few seconds whose stages a human can watch go by: 250 ms per
    /// stage, a scenario second in 300 ms (capped at 15 s of running), a metric report
    /// and a log flush every second.
    #[must_use]
    pub fn demo() -> Speed {
        Speed {
            stage: Duration::from_millis(250),
            scenario_second: Duration::from_millis(300),
            default_running: Duration::from_secs(3),
            max_running: Duration::from_secs(15),
            metric_interval: Duration::from_millis(1000),
            log_flush_interval: Duration::from_millis(1000),
            poll: Duration::from_millis(250),
            finalize: Duration::from_millis(500),
        }
    }

    /// For tests: a whole benchmark (stages, a 10-second loop, finalize) in roughly
    /// 0.3 s, with several metric reports and log flushes on the way.
    #[must_use]
    pub fn fast() -> Speed {
        Speed {
            stage: Duration::from_millis(5),
            scenario_second: Duration::from_millis(15),
            default_running: Duration::from_millis(150),
            max_running: Duration::from_millis(600),
            metric_interval: Duration::from_millis(25),
            log_flush_interval: Duration::from_millis(40),
            poll: Duration::from_millis(20),
            finalize: Duration::from_millis(30),
        }
    }
}

impl Default for Speed {
    fn default() -> Speed {
        Speed::demo()
    }
}

/// How `/log` and `/userlog` files are stored and served (the real server's
/// `bench_log_compression`, captured per benchmark at creation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogCompression {
    /// One zlib stream with sync flushes, served with `content-encoding: deflate`
    /// (the real server's default).
    #[default]
    Deflate,
    /// Plain text, served with `content-encoding: identity`.
    Identity,
}

/// Switches between the real server's odd behaviour (faithful) and friendlier answers.
///
/// The defaults are what a client meets on a modern real server, except where a
/// faithful answer would hang a test forever (`data_hangs_on_failed`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quirks {
    /// A missing required query parameter (`id`, `tags`, `addr`, `command`, `pool`,
    /// `percent`) gives 500 `internal_error`, as on OTP ≥ 19. When false: 400 `badarg`
    /// `Missing <name> argument`, as on OTP 17.
    pub missing_param_500: bool,
    /// `/data` on a `failed` benchmark never answers, like the real server. When false
    /// (default) it answers like for a finished benchmark.
    pub data_hangs_on_failed: bool,
    /// `/server_logs` answers 404 `Wrong endpoint`, as the latest real server does
    /// (the endpoint was removed upstream in 2017). When false (default) it streams the
    /// server log as the seed document promises.
    pub server_logs_removed: bool,
    /// `/change_env` before `running` gives 500 (the real server's central process
    /// crashes). When false: 400 `not_running`.
    pub change_env_not_running_500: bool,
    /// Close the connection after every `/typecheck` reply, like the real server.
    pub typecheck_closes_connection: bool,
    /// `/email_report` takes each `addr` value as one address, as the real server does
    /// (`addr` repeated for several). When false (default) a value is a comma-separated
    /// list, as the seed document says.
    pub email_addr_not_split: bool,
    /// `/remove_cluster_info` answers `200 {}` for an unknown cluster too, as the real
    /// server does (it swallows the error). When false (default) it is 404 `not_found`,
    /// as the seed document says.
    pub remove_unknown_cluster_ok: bool,
}

impl Default for Quirks {
    fn default() -> Quirks {
        Quirks {
            missing_param_500: true,
            data_hangs_on_failed: false,
            server_logs_removed: false,
            change_env_not_running_500: true,
            typecheck_closes_connection: true,
            email_addr_not_split: false,
            remove_unknown_cluster_ok: false,
        }
    }
}

/// A misbehaving server, for testing what a client does when the network or the server
/// lets it down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Reads every request and never answers; the connection stays open until the client
    /// closes it (or the connection cap needs its room).
    Silent,
    /// Answers correctly but sends each byte of every response on its own, with this
    /// pause before the next one (one byte a second: `Drip(Duration::from_secs(1))`).
    Drip(Duration),
}

/// A benchmark-level fault: every benchmark meets it when its pipeline reaches `stage`
/// (one of the stage names `/status` shows, e.g. `running`). The same as calling
/// [`BenchServer::crash_benchmark`](super::BenchServer::crash_benchmark) or
/// [`BenchServer::zombify_benchmark`](super::BenchServer::zombify_benchmark) at that
/// moment, for when the server runs in another process (`benchlink sandbox`).
///
/// # Example
///
/// ```
/// use benchlink_sandbox::bench::{BenchFault, BenchServerConfig, STAGES};
/// let config = BenchServerConfig {
///     bench_fault: Some(BenchFault::Crash { stage: "running".to_owned() }),
///     ..BenchServerConfig::fast()
/// };
/// assert!(config.bench_fault.is_some_and(|f| STAGES.contains(&f.stage())));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BenchFault {
    /// The benchmark's process dies without reporting: `/status` answers
    /// `{"reason":"crashed","status":"failed"}` and its streams end.
    Crash {
        /// The stage at which it dies.
        stage: String,
    },
    /// The benchmark is left as if the server had died under it: status `zombie`.
    Zombie {
        /// The stage at which it happens.
        stage: String,
    },
}

impl BenchFault {
    /// The stage that triggers the fault.
    #[must_use]
    pub fn stage(&self) -> &str {
        match self {
            BenchFault::Crash { stage } | BenchFault::Zombie { stage } => stage,
        }
    }
}

/// A token user of the authenticated mode: requests with `Authorization: Bearer <token>`
/// act as `login`, which becomes the `author` of the benchmarks they start. The token is
/// kept out of `Debug` output.
///
/// # Example
///
/// ```
/// use benchlink_sandbox::bench::User;
/// let alice = User::new("alice", "alice-token");
/// assert!(!format!("{alice:?}").contains("alice-token"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct User {
    /// The login (the real server's user name, e.g. an e-mail address).
    pub login: String,
    /// Its bearer token.
    pub token: String,
    /// Whether the user is in the server's `admin_list`: admins may stop, change and
    /// command every benchmark, not only their own.
    pub admin: bool,
}

impl User {
    /// A user who is not an admin.
    #[must_use]
    pub fn new(login: &str, token: &str) -> User {
        User {
            login: login.to_owned(),
            token: token.to_owned(),
            admin: false,
        }
    }
}

impl fmt::Debug for User {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("User")
            .field("login", &self.login)
            .field("token", &"<redacted>")
            .field("admin", &self.admin)
            .finish()
    }
}

/// The login of the bare tokens of [`BenchServerConfig::token_users`].
pub const TOKEN_LOGIN: &str = "user";

/// Configuration of a [`BenchServer`](super::BenchServer).
///
/// # Example
///
/// ```
/// use benchlink_sandbox::{BenchServerConfig, Speed};
/// let config = BenchServerConfig { speed: Speed::fast(), ..BenchServerConfig::default() };
/// assert_eq!(config.port, 0);
/// ```
#[derive(Clone, Debug)]
pub struct BenchServerConfig {
    /// Address to listen on: `127.0.0.1` (the default, like the real server's
    /// `network_interface`), `0.0.0.0` for boards on the LAN, or one interface's address.
    pub listen: IpAddr,
    /// TCP port; 0 picks a free one (the real server uses 4800).
    pub port: u16,
    /// How long the phases of a benchmark take.
    pub speed: Speed,
    /// Storage and `content-encoding` of `/log` and `/userlog`.
    pub log_compression: LogCompression,
    /// Token users when authentication is on; `None` = anonymous mode (the real server's
    /// default), where everyone is `anonymous`. With `Some`, a request without a known
    /// token gets 403, and `/stop`, `/change_env` and `/run_command` on a benchmark
    /// started by another user get 403 too unless the user is an admin (404 for an
    /// unknown id), as on the real server. `/restart`, `/add_tags` and `/remove_tags`
    /// are open to every user there, and here.
    pub users: Option<Vec<User>>,
    /// Faithful-or-friendly switches.
    pub quirks: Quirks,
    /// Cloud names accepted by the `cloud` parameter besides `local`; all of them
    /// allocate `127.0.0.1` with the dummy plugin.
    pub clouds: Vec<String>,
    /// Stats keys of `/results` (`final_metrics_percentiles`): `min`, `max`, `mean`,
    /// `median` or a percentile such as `50`.
    pub result_percentiles: Vec<String>,
    /// Finished benchmarks older than `next_id - max_bench_num` are deleted unless
    /// tagged `favorites` (housekeeping; 1000 on the real server).
    pub max_bench_num: u64,
    /// Idle time after which a connection that has not started a request is closed:
    /// after it is accepted, and between keep-alive requests (Cowboy: 5 s).
    pub keep_alive_timeout: Duration,
    /// Time from the first byte of a request to the end of its head. It is not reset by
    /// each byte, so a client that trickles its head (slowloris) is cut off with 408 when
    /// it runs out. Default 10 s.
    pub header_timeout: Duration,
    /// Longest pause between two reads of a request body; then 408 and close. Default 10 s.
    pub body_timeout: Duration,
    /// Longest request head (request line and headers); more gives 400. Default 64 KiB.
    pub max_head: usize,
    /// Largest request body, as sent (Content-Length) or decoded (chunked); a larger one
    /// gets 413 and the connection is closed. Default 16 MiB.
    pub max_body: usize,
    /// Memory for request bodies of all connections together. A body that would go over
    /// it is refused with 503 (and `retry-after: 1`) and its connection closed, rather
    /// than waiting: bodies are buffered whole before they are parsed, and uploads that
    /// wait for each other's memory could wait forever. Default 64 MiB.
    pub body_budget: usize,
    /// Open connections at most. When a new one would go over, the connection that has
    /// waited longest for a complete request (idle keep-alive, a trickled head or body)
    /// is closed to make room; if every connection has a request being served, the new
    /// one is closed at once. Default 1024.
    pub max_connections: usize,
    /// Threads that serve complete requests (started as needed). Slow or idle clients
    /// never hold one: requests are read by one event loop and handed over whole. A
    /// streaming reply (`/log`, `/data`) holds its worker until it ends; requests beyond
    /// the pool wait for a free worker in arrival order. Default 128.
    pub workers: usize,
    /// Longest a response write may block on a client that does not read; then the
    /// connection is dropped and its worker freed. Default 30 s.
    pub write_timeout: Duration,
    /// Misbehave on every connection (`None`: behave).
    pub fault: Option<Fault>,
    /// Make every benchmark crash or turn zombie at a stage (`None`: they run through).
    pub bench_fault: Option<BenchFault>,
    /// For throughput measurements: every `/data` reply starts with this many generated
    /// metric lines (`<timestamp>\tflood.<k>.count\t<value>`, one chunk each, as the
    /// real server frames them) before the benchmark's own. Generated once, when the
    /// first reply needs them, and then sent from memory as fast as the socket takes them.
    pub data_flood: usize,
    /// Serve `https://` instead of `http://` (`None`, the default: plaintext). See
    /// [`tls`](crate::tls) for how: every other field holds under TLS as it is, counted
    /// from the end of the TLS handshake.
    pub tls: Option<crate::tls::ServerTls>,
}

impl Default for BenchServerConfig {
    fn default() -> BenchServerConfig {
        BenchServerConfig {
            listen: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            speed: Speed::default(),
            log_compression: LogCompression::Deflate,
            users: None,
            quirks: Quirks::default(),
            clouds: Vec::new(),
            result_percentiles: ["min", "50", "90", "95", "max"]
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            max_bench_num: 1000,
            keep_alive_timeout: Duration::from_secs(5),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            max_head: 64 * 1024,
            max_body: 16 << 20,
            body_budget: 64 << 20,
            max_connections: 1024,
            workers: 128,
            write_timeout: Duration::from_secs(30),
            fault: None,
            bench_fault: None,
            data_flood: 0,
            tls: None,
        }
    }
}

impl BenchServerConfig {
    /// The test preset: port 0 and [`Speed::fast`].
    #[must_use]
    pub fn fast() -> BenchServerConfig {
        BenchServerConfig {
            speed: Speed::fast(),
            ..BenchServerConfig::default()
        }
    }

    /// Turns authentication on with one user per token, all with the login
    /// [`TOKEN_LOGIN`] (so they may act on each other's benchmarks).
    ///
    /// ```
    /// use benchlink_sandbox::BenchServerConfig;
    /// let config = BenchServerConfig::fast().token_users(&["secret"]);
    /// assert_eq!(config.users.map(|u| u.len()), Some(1));
    /// ```
    #[must_use]
    pub fn token_users(mut self, tokens: &[&str]) -> BenchServerConfig {
        let users = tokens.iter().map(|t| User::new(TOKEN_LOGIN, t));
        self.users.get_or_insert_with(Vec::new).extend(users);
        self
    }
}

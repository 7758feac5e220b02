//! The benchmark-server client on tokio: every endpoint of the blocking
//! [`bench::BenchClient`](crate::bench::BenchClient) as an `async fn`, and its log and
//! metric streams as [`Stream`](futures_core::Stream)s.
//!
//! Why it runs the blocking client on tokio's blocking pool
//! ([`spawn_blocking`](tokio::task::spawn_blocking)) rather than loops of its own: the
//! orchestration of a call (retrying what changes nothing, never resending what changes
//! state and saying its outcome is unknown, waiting for a benchmark to run before its
//! `/data`, resuming a cut stream exactly) then exists once, tested once. The price is
//! a blocking-pool thread per call in flight, which suits a client that makes a few
//! calls at a time; the protocol work itself is core's either way.
//!
//! Calls made at once run at once: the client keeps a pool of blocking clients with
//! the same settings, each with its own kept-alive connection; a call takes one (or
//! makes one) and gives it back when it is done. The client is a cheap handle
//! ([`Clone`]) over that pool.
//!
//! # Cancel safety
//!
//! Dropping a call's future stops the waiting, not the request: a request already
//! handed to the blocking pool completes there and its reply is dropped, so a request
//! that changes state (`start`, `stop`, the tags…) may still take effect. Dropping a
//! stream stops its reading and closes its connection; the blocking thread that reads
//! it notices when its next line arrives, so a quiet live tail (`server_logs`) keeps its
//! thread and connection until the server writes again.
//!
//! ```no_run
//! use benchlink_std::bench::{Scenario, StartOptions};
//! use benchlink_std::tokio::bench::BenchClient;
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let client = BenchClient::from_env()?; // $MZBENCH_API_HOST or localhost:4800
//!     let scenario = Scenario::from_file("examples/scenarios/hello.bdl")?;
//!     let id = client.start(&scenario, &StartOptions::default()).await?;
//!     let mut data = client.data(id).await?; // a futures_core::Stream
//!     while let Some(sample) = data.next().await {
//!         let s = sample?;
//!         println!("{} {} {}", s.timestamp, s.name, s.value);
//!     }
//!     println!("{:?}", client.results(id).await?);
//!     Ok(())
//! }
//! ```

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::task::JoinError;

use crate::bench::{
    self as blocking, ClusterInfo, Error, ErrorKind, Results, Sample, Scenario, ServerAddress,
    Settings, StartOptions, StatusInfo,
};

mod stream;
pub use stream::LineStream;

/// Idle blocking clients kept (with their connections) for the next calls; more are
/// made while more calls run at once, and dropped when they come back to a full pool.
const MAX_IDLE: usize = 8;

/// An async client of one benchmark server (see the [module docs](self)).
///
/// ```no_run
/// # async fn f() -> Result<(), benchlink_std::bench::Error> {
/// use benchlink_std::tokio::bench::BenchClient;
/// let client = BenchClient::from_host("localhost:4800")?;
/// // Two calls at once, each on its own connection.
/// let (a, b) = tokio::join!(client.status(1), client.status(2));
/// println!("{} {}", a?.status_text, b?.status_text);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct BenchClient {
    pool: Arc<Pool>,
}

/// The blocking clients not in use, and how to make another.
#[derive(Debug)]
struct Pool {
    settings: Settings,
    address: ServerAddress,
    idle: Mutex<Vec<blocking::BenchClient>>,
}

impl Pool {
    fn idle(&self) -> MutexGuard<'_, Vec<blocking::BenchClient>> {
        // Nothing panics while holding it: a poisoned pool is still a valid list.
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn take(&self) -> blocking::BenchClient {
        let idle = self.idle().pop();
        idle.unwrap_or_else(|| self.settings.client())
    }

    fn give_back(&self, client: blocking::BenchClient) {
        let mut idle = self.idle();
        if idle.len() < MAX_IDLE {
            idle.push(client);
        }
    }

    /// The error of a call whose blocking task ended without a result.
    fn lost(&self, e: JoinError, path: &str) -> Error {
        let what = if e.is_panic() {
            "its task on the blocking pool panicked"
        } else {
            "its task on the blocking pool was cancelled (the runtime is shutting down)"
        };
        Error::from(ErrorKind::Task(what.to_owned()))
            .with_request(self.address.authority.clone(), path)
    }
}

impl From<blocking::BenchClient> for BenchClient {
    fn from(blocking: blocking::BenchClient) -> BenchClient {
        BenchClient::new(blocking)
    }
}

/// One `async fn` for a blocking call: `$call` on a pooled client, with owned copies of
/// the arguments moved to the blocking pool.
macro_rules! calls {
    ($(
        $(#[$doc:meta])*
        fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty = $path:literal,
            |$c:ident| $call:expr;
    )*) => {$(
        $(#[$doc])*
        pub async fn $name(&self $(, $arg: $ty)*) -> Result<$ret, Error> {
            $(let $arg = Owned::own($arg);)*
            self.call($path, move |$c| $call).await
        }
    )*};
}

impl BenchClient {
    /// The async face of `blocking`: its settings (address, token, TLS, proxy,
    /// timeouts, retry policy) are made on it before it is wrapped, and every client
    /// of the pool has them. Its connection, if open, serves the first call.
    ///
    /// ```
    /// use std::time::Duration;
    /// use benchlink_std::{bench, tokio::bench::BenchClient};
    /// let blocking = bench::BenchClient::from_host("127.0.0.1:4800")?
    ///     .with_token("secret")
    ///     .with_timeout(Duration::from_secs(5));
    /// let client = BenchClient::new(blocking);
    /// assert_eq!(client.address().port, 4800);
    /// # Ok::<(), bench::Error>(())
    /// ```
    pub fn new(blocking: blocking::BenchClient) -> BenchClient {
        let pool = Pool {
            settings: blocking.settings(),
            address: blocking.address().clone(),
            idle: Mutex::new(vec![blocking]),
        };
        BenchClient {
            pool: Arc::new(pool),
        }
    }

    /// A client of `host` (`host:port` or a URL) with the official token file's token
    /// for it, if any, as [`bench::BenchClient::from_host`](blocking::BenchClient::from_host).
    ///
    /// ```
    /// let client = benchlink_std::tokio::bench::BenchClient::from_host("127.0.0.1:4800")?;
    /// # Ok::<(), benchlink_std::bench::Error>(())
    /// ```
    pub fn from_host(host: &str) -> Result<BenchClient, Error> {
        blocking::BenchClient::from_host(host).map(BenchClient::new)
    }

    /// A client of `$MZBENCH_API_HOST`, or of `localhost:4800`, like the official CLI.
    ///
    /// ```
    /// let client = benchlink_std::tokio::bench::BenchClient::from_env()?;
    /// # Ok::<(), benchlink_std::bench::Error>(())
    /// ```
    pub fn from_env() -> Result<BenchClient, Error> {
        blocking::BenchClient::from_env().map(BenchClient::new)
    }

    /// The server this client talks to.
    pub fn address(&self) -> &ServerAddress {
        &self.pool.address
    }

    /// Runs `f` on a pooled client on the blocking pool; `path` names the request if
    /// the task ends without a result.
    async fn call<T, F>(&self, path: &'static str, f: F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: FnOnce(&mut blocking::BenchClient) -> Result<T, Error> + Send + 'static,
    {
        let pool = Arc::clone(&self.pool);
        let task = tokio::task::spawn_blocking(move || {
            let mut client = pool.take();
            let result = f(&mut client);
            pool.give_back(client);
            result
        });
        task.await.map_err(|e| self.pool.lost(e, path))?
    }

    calls! {
        /// Starts `scenario` (`POST /start`) and returns the new benchmark's id.
        ///
        /// # Cancel safety
        /// Dropping the future does not stop the request: the benchmark may start.
        ///
        /// ```no_run
        /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
        /// use benchlink_std::bench::{Scenario, StartOptions};
        /// let client = benchlink_std::tokio::bench::BenchClient::from_env()?;
        /// let scenario = Scenario::from_file("examples/scenarios/hello.bdl")?;
        /// let options = StartOptions { tags: vec!["nightly".into()], ..StartOptions::default() };
        /// let id = client.start(&scenario, &options).await?;
        /// # Ok(()) }
        /// ```
        fn start(&self, scenario: &Scenario, options: &StartOptions) -> u64 = "POST /start",
            |c| c.start(&scenario, &options);
        /// Checks `scenario` on the server without starting it (`POST /typecheck`).
        ///
        /// # Cancel safety
        /// Dropping the future drops the answer; nothing changes on the server.
        fn typecheck(&self, scenario: &Scenario) -> () = "POST /typecheck",
            |c| c.typecheck(&scenario);
        /// The benchmark's status.
        ///
        /// # Cancel safety
        /// Dropping the future drops the answer; nothing changes on the server.
        fn status(&self, id: u64) -> StatusInfo = "GET /status", |c| c.status(id);
        /// Stops the benchmark (a no-op for a finished one).
        ///
        /// # Cancel safety
        /// Dropping the future does not stop the request: the benchmark may stop.
        fn stop(&self, id: u64) -> () = "GET /stop", |c| c.stop(id);
        /// Starts a clone of benchmark `id`; returns the clone's id.
        ///
        /// # Cancel safety
        /// Dropping the future does not stop the request: the clone may start.
        fn restart(&self, id: u64) -> u64 = "GET /restart", |c| c.restart(id);
        /// Changes environment variables of a running benchmark.
        ///
        /// # Cancel safety
        /// Dropping the future does not stop the request: the change may take effect.
        fn change_env(&self, id: u64, env: &[(&str, &str)]) -> () = "GET /change_env",
            |c| c.change_env(id, &env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect::<Vec<_>>());
        /// Runs a BDL statement on `percent` % of the workers of pool `pool` (from 1).
        ///
        /// # Cancel safety
        /// Dropping the future does not stop the request: the statement may run.
        fn run_command(&self, id: u64, pool: u32, percent: u32, command: &str) -> ()
            = "GET /run_command", |c| c.run_command(id, pool, percent, &command);
        /// The final results (empty while the benchmark runs).
        ///
        /// # Cancel safety
        /// Dropping the future drops the answer; nothing changes on the server.
        fn results(&self, id: u64) -> Results = "GET /results", |c| c.results(id);
        /// E-mails the finished benchmark's report to `addrs`.
        ///
        /// # Cancel safety
        /// Dropping the future does not stop the request: the mail may go out.
        fn email_report(&self, id: u64, addrs: &[&str]) -> () = "GET /email_report",
            |c| c.email_report(id, &strs(&addrs));
        /// Every cluster the server knows.
        ///
        /// # Cancel safety
        /// Dropping the future drops the answer; nothing changes on the server.
        fn clusters_info(&self) -> Vec<ClusterInfo> = "GET /clusters_info",
            |c| c.clusters_info();
        /// Deallocates cluster `id` (a cluster id, not a benchmark id).
        ///
        /// # Cancel safety
        /// Dropping the future does not stop the request: the cluster may go.
        fn deallocate_cluster(&self, id: u64) -> () = "GET /deallocate_cluster",
            |c| c.deallocate_cluster(id);
        /// Forgets cluster `id` without deallocating it.
        ///
        /// # Cancel safety
        /// Dropping the future does not stop the request: the cluster may be forgotten.
        fn remove_cluster_info(&self, id: u64) -> () = "GET /remove_cluster_info",
            |c| c.remove_cluster_info(id);
        /// Adds tags (none may contain a comma or a space: the server splits on them).
        ///
        /// # Cancel safety
        /// Dropping the future does not stop the request: the tags may be added.
        fn add_tags(&self, id: u64, tags: &[&str]) -> () = "GET /add_tags",
            |c| c.add_tags(id, &strs(&tags));
        /// Removes one occurrence of each tag.
        ///
        /// # Cancel safety
        /// Dropping the future does not stop the request: the tags may be removed.
        fn remove_tags(&self, id: u64, tags: &[&str]) -> () = "GET /remove_tags",
            |c| c.remove_tags(id, &strs(&tags));
    }

    /// Polls the status every `poll` (a [`tokio::time::sleep`] between two polls) until
    /// it is final (`complete`, `failed`, `stopped` or `zombie`), calling `progress`
    /// with every status seen.
    ///
    /// # Cancel safety
    /// Dropping the future stops the polling; nothing changes on the server.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), benchlink_std::bench::Error> {
    /// use std::time::Duration;
    /// let client = benchlink_std::tokio::bench::BenchClient::from_env()?;
    /// let end = client.wait(7, Duration::from_secs(3), |s| eprintln!("{}", s.status_text)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait(
        &self,
        id: u64,
        poll: Duration,
        mut progress: impl FnMut(&StatusInfo),
    ) -> Result<StatusInfo, Error> {
        loop {
            let status = self.status(id).await?;
            progress(&status);
            if status.status().is_final() {
                return Ok(status);
            }
            tokio::time::sleep(poll).await;
        }
    }

    /// The benchmark's metric samples as they are reported, until its process ends,
    /// resumed after cuts with nothing lost or repeated; as the blocking
    /// [`data`](blocking::BenchClient::data), it first waits until the benchmark runs
    /// (a failed one gives an empty stream). Errors before the first sample (an
    /// unknown id, say) are this call's.
    ///
    /// # Cancel safety
    /// Dropping the future or the stream stops the stream (see the [module docs](self)).
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), benchlink_std::bench::Error> {
    /// let client = benchlink_std::tokio::bench::BenchClient::from_env()?;
    /// let mut data = client.data(7).await?;
    /// while let Some(sample) = data.next().await {
    ///     println!("{:?}", sample?);
    /// }
    /// println!("resumed {} times", data.resumptions());
    /// # Ok(()) }
    /// ```
    pub async fn data(&self, id: u64) -> Result<LineStream<Sample>, Error> {
        stream::open(&self.pool, "GET /data", move |c| c.data(id)).await
    }

    /// [`data`](Self::data) for a caller that has just read the status (`known`): no
    /// `/status` round trip before `/data` when it says running or ended (see the
    /// blocking [`data_with_status`](blocking::BenchClient::data_with_status)).
    ///
    /// # Cancel safety
    /// As [`data`](Self::data).
    pub async fn data_with_status(
        &self,
        id: u64,
        known: &StatusInfo,
    ) -> Result<LineStream<Sample>, Error> {
        let known = known.clone();
        stream::open(&self.pool, "GET /data", move |c| {
            c.data_with_status(id, &known)
        })
        .await
    }

    /// The benchmark's system log, line by line as it is written, until the benchmark's
    /// process ends (resumed after cuts; compressed logs inflated on the fly).
    ///
    /// # Cancel safety
    /// As [`data`](Self::data).
    pub async fn log(&self, id: u64) -> Result<LineStream<String>, Error> {
        stream::open(&self.pool, "GET /log", move |c| c.log(id)).await
    }

    /// The benchmark's worker log, like [`log`](Self::log).
    ///
    /// # Cancel safety
    /// As [`data`](Self::data).
    pub async fn userlog(&self, id: u64) -> Result<LineStream<String>, Error> {
        stream::open(&self.pool, "GET /userlog", move |c| c.userlog(id)).await
    }

    /// The server's own log from now on, at `severity` or above (default `info`); it
    /// never ends by itself. After a cut, the lines logged in between are an error item
    /// (see the blocking [`server_logs`](blocking::BenchClient::server_logs)).
    ///
    /// # Cancel safety
    /// As [`data`](Self::data); on a quiet server the reading thread notices the drop
    /// only with the server's next line.
    pub async fn server_logs(&self, severity: Option<&str>) -> Result<LineStream<String>, Error> {
        let severity = severity.map(str::to_owned);
        stream::open(&self.pool, "GET /server_logs", move |c| {
            c.server_logs(severity.as_deref())
        })
        .await
    }
}

/// Owned copies of borrowed arguments, for the blocking pool.
trait Owned {
    type Owned: Send + 'static;
    fn own(self) -> Self::Owned;
}

/// `impl Owned for $borrowed { type Owned = $owned; … }`, converting with `$own`.
macro_rules! owned {
    ($($t:ty => $o:ty, $own:expr;)*) => {$(
        impl Owned for $t {
            type Owned = $o;
            fn own(self) -> $o {
                $own(self)
            }
        }
    )*};
}

owned! {
    u64 => u64, std::convert::identity;
    u32 => u32, std::convert::identity;
    &str => String, str::to_owned;
    &[&str] => Vec<String>, |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect();
    &[(&str, &str)] => Vec<(String, String)>,
        |v: &[(&str, &str)]| v.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
}

impl<T: Clone + Send + 'static> Owned for &T {
    type Owned = T;
    fn own(self) -> T {
        self.clone()
    }
}

/// Borrowed views of owned strings, for the blocking calls.
fn strs(owned: &[String]) -> Vec<&str> {
    owned.iter().map(String::as_str).collect()
}

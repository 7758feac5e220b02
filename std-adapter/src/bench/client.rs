//! The blocking benchmark-server client: one method per endpoint over one kept-alive
//! connection, every request and reply going through the core codec.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io;
use std::ops::ControlFlow;
use std::time::Duration;

use benchlink_core::bench::exchange::{
    ClientError, Conversation, DataStep, DataWait, Paused, ResponseKind, Server, Sink, Timeouts,
    Waiting,
};
use benchlink_core::bench::request::{self, File, Nodes};
use benchlink_core::bench::resume::{
    hand_out, DataCursor, Fault, LogCursor, MetricTable, Progress, Resumption, Retry, Retrying,
    StreamCursor, TailCursor, Untracked,
};
use benchlink_core::bench::{
    Error as CoreError, JsonRequest, LineDecoder, LineFormat, LogLine, LogLineError, MetricLine,
    Request, StreamRequest,
};
use benchlink_core::http::DecodeError;
use benchlink_core::time::Instant as CoreInstant;

use super::address::{ServerAddress, HOST_ENV};
use super::error::{Error, ErrorKind};
use super::model::{ClusterInfo, Results, Sample, StatusInfo};
use super::scenario::Scenario;
use super::token;
use crate::http::{self, head_too_large, Buffers, Driven, Endpoint, Ex, Failure, Link, Until};
use crate::net::{Tls, TlsOptions};

/// The server the official CLI talks to when nothing else is said.
pub const DEFAULT_HOST: &str = "localhost:4800";
/// The longest JSON reply read (results of a benchmark with very many metrics).
const MAX_JSON_REPLY: usize = 64 << 20;
/// The longest error body read from a stream endpoint before giving up on it.
const MAX_ERROR_BODY: usize = 1 << 20;
/// The longest log or metric line; longer ones are reported and skipped.
const MAX_LINE: usize = 64 << 10;
/// How long a JSON call may take by default, from connecting to the reply's last byte.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// A bearer token that never shows up in `Debug` output or logs.
#[derive(Clone, PartialEq, Eq)]
struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Options of `/start` (and of `benchlink bench start`); everything unset is left to
/// the server's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StartOptions {
    /// A node count (`"3"`) or a comma-separated host list (`"h1,h2"`).
    pub nodes: Option<String>,
    /// `Some(false)` keeps the nodes after the benchmark.
    pub deallocate_after_bench: Option<bool>,
    /// `Some(false)` skips installing the benchmark software on the nodes.
    pub provision_nodes: Option<bool>,
    /// Benchmark name (server default: the script's file name).
    pub benchmark_name: Option<String>,
    /// Cloud to allocate nodes from.
    pub cloud: Option<String>,
    /// Tags to put on the benchmark.
    pub tags: Vec<String>,
    /// Exclusive labels.
    pub exclusive: Option<String>,
    /// Commit or branch of the benchmark software for the nodes.
    pub node_commit: Option<String>,
    /// Addresses to e-mail a report to at the end.
    pub emails: Vec<String>,
    /// Scenario environment variables.
    pub env: Vec<(String, String)>,
}

/// A blocking client of one benchmark server.
///
/// ```no_run
/// use benchlink_std::bench::{BenchClient, Scenario, StartOptions};
/// let mut client = BenchClient::from_host("localhost:4800")?;
/// let id = client.start(&Scenario::from_file("examples/scenarios/hello.bdl")?, &StartOptions::default())?;
/// let status = client.wait(id, std::time::Duration::from_secs(3), |s| eprintln!("{}", s.status_text))?;
/// println!("{} {:?}", status.status_text, client.results(id)?.get("print"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct BenchClient {
    address: ServerAddress,
    identity: Identity,
    transport: Transport,
    line_buf: Box<[u8]>,
    /// How streams resume and idempotent calls are tried again (`None`: never).
    retry: Option<Retry>,
}

/// What every request carries.
#[derive(Debug, Clone)]
struct Identity {
    host: String,
    /// Path prefix of a server behind a reverse proxy.
    prefix: String,
    user_agent: String,
    token: Option<Secret>,
    limits: Timeouts,
}

impl Identity {
    /// The server as core's conversations see it: reached at `address`, named as the
    /// user wrote it (`Host`), under the path prefix.
    fn server<'a>(&'a self, address: &'a ServerAddress) -> Server<'a> {
        Server {
            authority: Some(&self.host),
            prefix: &self.prefix,
            token: self.token.as_ref().map(|t| t.0.as_str()),
            user_agent: &self.user_agent,
            ..Server::new(&address.host, address.port)
        }
    }
}

/// The kept-alive connection and the conversations' memory.
#[derive(Debug)]
struct Transport {
    endpoint: Endpoint,
    link: Link,
    bufs: Buffers,
}

/// A client's configuration without its connection and memory: what makes more clients
/// of the same server with the same settings (the async client's pool of blocking
/// clients, one per call in flight).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    address: ServerAddress,
    identity: Identity,
    endpoint: Endpoint,
    retry: Option<Retry>,
}

impl Settings {
    /// A new client with these settings, a connection of its own (opened on its first
    /// request) and its own jitter of the retry waits (clients cut together do not come
    /// back together), unless the jitter is off (seed 0).
    pub(crate) fn client(&self) -> BenchClient {
        let retry = self.retry.map(|r| match r.jitter_seed {
            0 => r,
            _ => Retry {
                jitter_seed: random_seed(),
                ..r
            },
        });
        BenchClient {
            transport: Transport {
                endpoint: self.endpoint.clone(),
                link: Link::new(),
                bufs: Buffers::new(),
            },
            identity: self.identity.clone(),
            address: self.address.clone(),
            line_buf: vec![0; MAX_LINE].into_boxed_slice(),
            retry,
        }
    }
}

impl BenchClient {
    /// A client of `address`, without a token; https uses the default TLS options
    /// (verification against the bundled Mozilla roots).
    ///
    /// ```
    /// use benchlink_std::bench::{BenchClient, ServerAddress};
    /// let client = BenchClient::new(ServerAddress::parse("localhost:4800").unwrap()).unwrap();
    /// assert_eq!(client.address().port, 4800);
    /// ```
    pub fn new(address: ServerAddress) -> Result<BenchClient, Error> {
        let tls = if address.tls {
            Some(Tls::new(&TlsOptions::default())?)
        } else {
            None
        };
        let settings = Settings {
            endpoint: Endpoint {
                tls,
                connect_timeout: Duration::from_secs(10),
                proxy: None,
            },
            identity: Identity {
                host: address.authority.clone(),
                prefix: address.prefix.clone(),
                user_agent: concat!("benchlink/", env!("CARGO_PKG_VERSION")).to_owned(),
                token: None,
                limits: Timeouts {
                    reply: Some(DEFAULT_TIMEOUT),
                    stream_idle: None,
                },
            },
            address,
            retry: Some(Retry::DEFAULT),
        };
        Ok(settings.client())
    }

    /// A client of `host` (`host:port` or a URL) with the official token file's token
    /// for it, if any.
    ///
    /// ```
    /// let client = benchlink_std::bench::BenchClient::from_host("127.0.0.1:4800").unwrap();
    /// # let _ = client;
    /// ```
    pub fn from_host(host: &str) -> Result<BenchClient, Error> {
        Ok(BenchClient::new(ServerAddress::parse(host)?)?.with_token_file())
    }

    /// A client of `$MZBENCH_API_HOST`, or of `localhost:4800`, like the official CLI.
    ///
    /// ```
    /// let client = benchlink_std::bench::BenchClient::from_env().unwrap();
    /// # let _ = client;
    /// ```
    pub fn from_env() -> Result<BenchClient, Error> {
        BenchClient::from_host(&std::env::var(HOST_ENV).unwrap_or_else(|_| DEFAULT_HOST.to_owned()))
    }

    /// Sends `Authorization: Bearer <token>` with every request.
    pub fn with_token(mut self, token: impl Into<String>) -> BenchClient {
        self.identity.token = Some(Secret(token.into()));
        self
    }

    /// Uses the token the official token file gives for this server, if any.
    pub fn with_token_file(mut self) -> BenchClient {
        if let Some(t) = token::read_default(&self.address.authority) {
            self.identity.token = Some(Secret(t));
        }
        self
    }

    /// TLS options for an https server (extra roots, or no verification).
    pub fn with_tls(mut self, options: TlsOptions) -> Result<BenchClient, Error> {
        if self.address.tls {
            self.transport.endpoint.tls = Some(Tls::new(&options)?);
            self.transport.link.close();
        }
        Ok(self)
    }

    /// Reaches the server through an HTTPS proxy's `CONNECT` tunnel (`benchlink bench
    /// --https-proxy`), as the messaging client does; TLS to an https server stays end to
    /// end. A proxy that refuses is a connect error that names its status.
    ///
    /// ```
    /// let client = benchlink_std::bench::BenchClient::from_host("https://mzbench.example")
    ///     .unwrap()
    ///     .with_https_proxy("proxy.example", 3128);
    /// # let _ = client;
    /// ```
    pub fn with_https_proxy(mut self, host: impl Into<String>, port: u16) -> BenchClient {
        self.transport.endpoint.proxy = Some((host.into(), port));
        self.transport.link.close();
        self
    }

    /// The deadlines of `benchlink bench --timeout`: `timeout` is both the whole-request
    /// limit of JSON calls ([`BenchClient::with_reply_timeout`]) and the idle limit of
    /// streams ([`BenchClient::with_stream_idle_timeout`]). A request past it fails with
    /// [`ErrorKind::Timeout`] ("no reply from HOST:PORT within 5 s").
    ///
    /// ```
    /// use std::time::Duration;
    /// let client = benchlink_std::bench::BenchClient::from_host("127.0.0.1:4800")
    ///     .unwrap()
    ///     .with_timeout(Duration::from_secs(5));
    /// # let _ = client;
    /// ```
    pub fn with_timeout(self, timeout: Duration) -> BenchClient {
        self.with_reply_timeout(Some(timeout))
            .with_stream_idle_timeout(Some(timeout))
    }

    /// How long a JSON call may take, all of it — connecting, sending, waiting for the
    /// reply and reading it — (default [`DEFAULT_TIMEOUT`], 60 s; `None`: no limit). For
    /// a stream, the limit on its response head.
    pub fn with_reply_timeout(mut self, timeout: Option<Duration>) -> BenchClient {
        self.identity.limits.reply = timeout;
        self
    }

    /// How long a log or data stream may stay silent before it fails (default: no limit,
    /// since a running benchmark's log can be quiet for long).
    pub fn with_stream_idle_timeout(mut self, timeout: Option<Duration>) -> BenchClient {
        self.identity.limits.stream_idle = timeout;
        self
    }

    /// How streams resume after a cut (see [`LineStream`]): the waits between tries
    /// and how many consecutive failed tries end them (default [`Retry::DEFAULT`]:
    /// 200 ms doubling up to 5 s, 20 tries, jittered); `None` turns resumption off, and
    /// a stream then ends with the error that cut it. A stream silent past its idle
    /// limit ([`with_stream_idle_timeout`](Self::with_stream_idle_timeout)) counts as
    /// cut.
    ///
    /// ```
    /// use benchlink_std::bench::{BenchClient, Retry};
    /// use std::time::Duration;
    /// let client = BenchClient::from_host("127.0.0.1:4800")
    ///     .unwrap()
    ///     .with_retry(Some(Retry { attempts: None, max_interval: Duration::from_secs(30), ..Retry::DEFAULT }));
    /// let no_resume = BenchClient::from_host("127.0.0.1:4800").unwrap().with_retry(None);
    /// # let _ = (client, no_resume);
    /// ```
    pub fn with_retry(mut self, retry: Option<Retry>) -> BenchClient {
        self.retry = retry;
        self
    }

    /// The server this client talks to.
    pub fn address(&self) -> &ServerAddress {
        &self.address
    }

    /// Another client of the same server with the same settings (token, TLS, proxy,
    /// limits, retries) and a connection of its own: what a program that follows
    /// several streams at once gives each of its threads.
    ///
    /// ```
    /// use benchlink_std::bench::BenchClient;
    /// let client = BenchClient::from_host("localhost:4800")?;
    /// let other = client.another();
    /// assert_eq!(other.address(), client.address());
    /// # Ok::<(), benchlink_std::bench::Error>(())
    /// ```
    pub fn another(&self) -> BenchClient {
        self.settings().client()
    }

    /// This client's settings, to make more clients like it ([`Settings::client`]).
    pub(crate) fn settings(&self) -> Settings {
        Settings {
            address: self.address.clone(),
            identity: self.identity.clone(),
            endpoint: self.transport.endpoint.clone(),
            retry: self.retry,
        }
    }

    /// Starts `scenario` (`POST /start`) and returns the new benchmark's id.
    pub fn start(&mut self, scenario: &Scenario, options: &StartOptions) -> Result<u64, Error> {
        let includes: Vec<File<'_>> = scenario
            .includes
            .iter()
            .map(|(name, content)| File { name, content })
            .collect();
        let hosts: Vec<&str>;
        let nodes = match options.nodes.as_deref() {
            None => None,
            Some(n) => match n.trim().parse() {
                Ok(count) => Some(Nodes::Count(count)),
                Err(_) => {
                    hosts = n
                        .split(',')
                        .map(str::trim)
                        .filter(|h| !h.is_empty())
                        .collect();
                    Some(Nodes::Hosts(&hosts))
                }
            },
        };
        let tags: Vec<&str> = options.tags.iter().map(String::as_str).collect();
        let emails: Vec<&str> = options.emails.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = options
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let req = request::Start {
            script: File {
                name: &scenario.name,
                content: &scenario.script,
            },
            includes: &includes,
            nodes,
            deallocate_after_bench: options.deallocate_after_bench,
            provision_nodes: options.provision_nodes,
            benchmark_name: options.benchmark_name.as_deref(),
            cloud: options.cloud.as_deref(),
            tags: &tags,
            exclusive: options.exclusive.as_deref(),
            node_commit: options.node_commit.as_deref(),
            emails: &emails,
            env: &env,
        };
        self.call(&req, |r| r.id)
    }

    /// Checks `scenario` on the server without starting it (`POST /typecheck`).
    pub fn typecheck(&mut self, scenario: &Scenario) -> Result<(), Error> {
        let req = request::Typecheck {
            script: File {
                name: &scenario.name,
                content: &scenario.script,
            },
        };
        self.call(&req, |_| ())
    }

    /// The benchmark's status.
    pub fn status(&mut self, id: u64) -> Result<StatusInfo, Error> {
        self.call(&request::Status { id }, |s| StatusInfo::from(s))
    }

    /// Polls the status every `poll` until it is final (`complete`, `failed`, `stopped`
    /// or `zombie` — unlike the official CLI, which loops forever on `zombie`), calling
    /// `progress` with every status seen.
    pub fn wait(
        &mut self,
        id: u64,
        poll: Duration,
        mut progress: impl FnMut(&StatusInfo),
    ) -> Result<StatusInfo, Error> {
        loop {
            let status = self.status(id)?;
            progress(&status);
            if status.status().is_final() {
                return Ok(status);
            }
            std::thread::sleep(poll);
        }
    }

    /// Stops the benchmark (a no-op for a finished one).
    pub fn stop(&mut self, id: u64) -> Result<(), Error> {
        self.call(&request::Stop { id }, |_| ())
    }

    /// Starts a clone of benchmark `id`; returns the clone's id.
    pub fn restart(&mut self, id: u64) -> Result<u64, Error> {
        self.call(&request::Restart { id }, |r| r.id)
    }

    /// Changes environment variables of a running benchmark.
    pub fn change_env(&mut self, id: u64, env: &[(&str, &str)]) -> Result<(), Error> {
        self.call(&request::ChangeEnv { id, env }, |_| ())
    }

    /// Runs a BDL statement on `percent` % of the workers of pool `pool` (from 1).
    pub fn run_command(
        &mut self,
        id: u64,
        pool: u32,
        percent: u32,
        command: &str,
    ) -> Result<(), Error> {
        let percent = u8::try_from(percent)
            .ok()
            .filter(|p| (1..=100).contains(p))
            .ok_or_else(|| {
                Error::from(ErrorKind::Reply(format!("percent {percent} is not 1..100")))
            })?;
        self.call(
            &request::RunCommand {
                id,
                pool,
                percent,
                command,
            },
            |_| (),
        )
    }

    /// The final results (empty while the benchmark runs).
    pub fn results(&mut self, id: u64) -> Result<Results, Error> {
        self.call(&request::Results { id }, |r| Results::from(r))
    }

    /// E-mails the finished benchmark's report to `addrs`.
    pub fn email_report(&mut self, id: u64, addrs: &[&str]) -> Result<(), Error> {
        self.call(&request::EmailReport { id, addrs }, |_| ())
    }

    /// Every cluster the server knows.
    pub fn clusters_info(&mut self) -> Result<Vec<ClusterInfo>, Error> {
        self.call(&request::ClustersInfo, |c| {
            c.iter().map(ClusterInfo::from).collect()
        })
    }

    /// Deallocates cluster `id` (a cluster id, not a benchmark id).
    pub fn deallocate_cluster(&mut self, id: u64) -> Result<(), Error> {
        self.call(&request::DeallocateCluster { id }, |_| ())
    }

    /// Forgets cluster `id` without deallocating it.
    pub fn remove_cluster_info(&mut self, id: u64) -> Result<(), Error> {
        self.call(&request::RemoveClusterInfo { id }, |_| ())
    }

    /// Adds tags (none may contain a comma or a space: the server splits on them).
    pub fn add_tags(&mut self, id: u64, tags: &[&str]) -> Result<(), Error> {
        self.call(&request::AddTags { id, tags }, |_| ())
    }

    /// Removes one occurrence of each tag.
    pub fn remove_tags(&mut self, id: u64, tags: &[&str]) -> Result<(), Error> {
        self.call(&request::RemoveTags { id, tags }, |_| ())
    }

    /// The benchmark's system log, line by line as it is written, until the benchmark's
    /// process ends. Compressed logs are inflated on the fly.
    pub fn log(&mut self, id: u64) -> Result<LineStream<'_, LogLine>, Error> {
        self.log_stream(Resend::Log(id), Box::new(LogCursor::new()))
    }

    /// The benchmark's worker log, like [`BenchClient::log`].
    pub fn userlog(&mut self, id: u64) -> Result<LineStream<'_, LogLine>, Error> {
        self.log_stream(Resend::Userlog(id), Box::new(LogCursor::new()))
    }

    /// The server's own log from now on, at `severity` or above (default `info`). It
    /// never ends by itself: drop the iterator to stop. A live tail cannot be resumed
    /// exactly: after a cut it goes on from the new request's moment, and the lines
    /// logged in between are missing; that gap is an error item
    /// ([`LogLineError::Resume`](benchlink_core::bench::LogLineError::Resume) as
    /// [`ErrorKind::Reply`]) before the new lines.
    pub fn server_logs(
        &mut self,
        severity: Option<&str>,
    ) -> Result<LineStream<'_, LogLine>, Error> {
        let request = Resend::ServerLogs(severity.map(str::to_owned));
        self.log_stream(request, Box::new(TailCursor::new()))
    }

    /// The benchmark's metric samples as they are reported, until its process ends.
    ///
    /// The real server answers `/data` only once the benchmark is `running` (or ended),
    /// and never for a `failed` one (it polls for a status it will never see). So this
    /// first waits, polling `/status` with a growing interval (20 ms up to 1 s), until the
    /// benchmark runs or ended; a failed benchmark then gives an empty stream instead of
    /// a hang. That first `/status` is one round trip before the stream: a caller that
    /// already read the status (it follows the benchmark) saves it with
    /// [`data_with_status`](Self::data_with_status).
    pub fn data(&mut self, id: u64) -> Result<LineStream<'_, MetricLine>, Error> {
        self.data_once_ready(id, None)
    }

    /// [`data`](Self::data) for a caller that has just read the benchmark's status
    /// (`known`): when that says running or ended, `/data` goes out at once, with no
    /// `/status` round trip before it; a failed benchmark gives an empty stream without
    /// a request; a stage before `running` is polled as `data` polls it.
    ///
    /// Why the caller passes the status: the callers that care about round trips have
    /// it anyway (the CLI's `bench run` waited for the end, `bench plot` and `report`
    /// read it to choose their patience), so the guard costs them nothing. The
    /// alternatives cost more: guessing from how long the `/data` response head takes
    /// is a timing heuristic, and pipelining `/status` with `/data` leaves, for a
    /// benchmark that is not running, a request the real server holds forever on the
    /// kept-alive connection, which then has to be closed.
    pub fn data_with_status(
        &mut self,
        id: u64,
        known: &StatusInfo,
    ) -> Result<LineStream<'_, MetricLine>, Error> {
        self.data_once_ready(id, Some(known))
    }

    /// `/data` once the benchmark runs or ended, starting from `known` if given, else
    /// from a fresh `/status` (see [`data`](Self::data)): core's [`DataWait`] says when
    /// to ask again, the same wait as the blocking and embassy clients'.
    fn data_once_ready(
        &mut self,
        id: u64,
        known: Option<&StatusInfo>,
    ) -> Result<LineStream<'_, MetricLine>, Error> {
        let cursor = Box::new(DataCursor::new(AnyMetrics::default()));
        let mut stream = self.open_stream(Resend::Data(id), cursor)?;
        let ready = match stream.open.as_mut() {
            Some(open) => open.wait_for_data(id, known.cloned()),
            None => Ok(false),
        };
        match ready {
            Ok(true) => stream.start()?,
            Ok(false) => stream.open = None,
            Err(failed) => stream.retry(failed)?,
        }
        Ok(stream)
    }

    /// Sends `req` and reads its JSON reply, converting the borrowed view with `own`.
    /// A request that changes nothing ([`Request::IDEMPOTENT`]) is tried again after a
    /// failure worth it (a cut, a reset, a refused connection, a deadline, a 5xx) as the
    /// client's [`Retry`] policy says; one that changes state is sent once, and when it
    /// fails after it went out the error says its outcome is unknown and how to check.
    fn call<R, T>(
        &mut self,
        req: &R,
        own: impl for<'a> FnOnce(R::Reply<'a>) -> T,
    ) -> Result<T, Error>
    where
        R: JsonRequest,
    {
        if R::IDEMPOTENT {
            let retry = self.retry.map(Retrying::new);
            self.call_retrying(req, own, retry, None)
        } else {
            self.call_retrying(req, own, None, Some(outcome_check(R::PATH)))
        }
    }

    /// [`call`](Self::call) tried again as `retry` says; a request that changes state
    /// has `unknown_outcome`, how to check whether it was carried out when it fails
    /// after it went out.
    fn call_retrying<R, T>(
        &mut self,
        req: &R,
        own: impl for<'a> FnOnce(R::Reply<'a>) -> T,
        mut retry: Option<Retrying>,
        unknown_outcome: Option<&'static str>,
    ) -> Result<T, Error>
    where
        R: JsonRequest,
    {
        let mut body = Gather::new(MAX_JSON_REPLY);
        loop {
            let replied = self.exchange(req, &mut body).and_then(|()| body.whole());
            let fault = match &replied {
                Err(e) => fault(e),
                Ok(()) if body.status >= 500 => Fault::Transient,
                Ok(()) => Fault::Final,
            };
            let (now, reached) = (self.transport.link.now(), self.transport.link.reached());
            match retry
                .as_mut()
                .and_then(|r| r.may_try_again(now, fault, reached))
            {
                Some(at) => {
                    std::thread::sleep(at.saturating_duration_since(now));
                    body = Gather::new(MAX_JSON_REPLY);
                }
                None => {
                    replied.map_err(|e| {
                        let sent = may_have_arrived(&e);
                        let error = Context::of(&self.identity, req).attach(e);
                        match unknown_outcome {
                            Some(check) if sent => error.with_unknown_outcome(check),
                            _ => error,
                        }
                    })?;
                    break;
                }
            }
        }
        let context = || Context::of(&self.identity, req);
        let reply = R::read_reply(body.status, &body.bytes).map_err(|e| context().attach(e))?;
        Ok(own(reply))
    }

    /// Sends `req` and reads its whole response into `sink`: core's exchange over the
    /// kept-alive connection or a new one, in a conversation over the client's memory.
    fn exchange<R: Request>(&mut self, req: &R, sink: &mut dyn Sink) -> Result<(), Failure> {
        let p = self.parts();
        fit_head(p.bufs, p.server, p.link, p.limits, p.endpoint, req)?;
        let connect_timeout = p.endpoint.connect_timeout;
        let mut talk = p
            .bufs
            .conversation(p.server, p.link, p.limits, connect_timeout)?;
        p.link.check_idle(&mut talk);
        let mut ex: Ex<'_, '_> = talk.exchange(req, ResponseKind::Reply, p.link.now());
        if let Some(Err(e)) = ex.outcome() {
            return Err(p.link.failure(e));
        }
        let ended = finish(p.link, p.endpoint, &mut ex, sink);
        p.link.keep(&talk);
        ended
    }

    /// What a request borrows of the client at once: the server as core's exchange sees
    /// it, the limits, the transport's parts and the line buffer of a stream.
    fn parts(&mut self) -> Parts<'_> {
        let BenchClient {
            address,
            identity,
            transport,
            line_buf,
            retry: _,
        } = self;
        Parts {
            server: identity.server(address),
            limits: identity.limits,
            endpoint: &transport.endpoint,
            link: &mut transport.link,
            bufs: &mut transport.bufs,
            line_buf,
        }
    }

    /// A stream of `request` (not sent yet) over the client's connection and memory,
    /// its lines classified by `cursor`, resumed after a cut as the client's
    /// [`Retry`] policy says.
    fn open_stream<F: OwnedLine>(
        &mut self,
        request: Resend,
        cursor: Box<dyn StreamCursor<F> + Send>,
    ) -> Result<LineStream<'_, F>, Error> {
        let context = request.context(&self.identity);
        let status = match request {
            Resend::Data(id) => Some(Context::of(&self.identity, &request::Status { id })),
            _ => None,
        };
        let mut resumption = Resumption::new(self.retry);
        if self.transport.link.reached() {
            resumption.reached();
        }
        let mut parts = self.parts();
        let fitted = request.with(|req| req.fit(&mut parts));
        fitted.map_err(|e| context.attach(e))?;
        let Parts {
            server,
            limits,
            endpoint,
            link,
            bufs,
            line_buf,
        } = parts;
        let connect_timeout = endpoint.connect_timeout;
        let talk = bufs
            .conversation(server, link, limits, connect_timeout)
            .map_err(|e| context.attach(e))?;
        Ok(LineStream {
            open: Some(Open {
                talk,
                paused: None,
                link,
                endpoint,
                status,
            }),
            early: Vec::new(),
            done: false,
            lines: LineDecoder::new(line_buf),
            pending: VecDeque::new(),
            context,
            resume: Resume {
                request,
                cursor,
                resumption,
                resumed: 0,
                silence_ends: false,
            },
        })
    }

    /// A log-like stream: sent at once, resumed after a cut.
    fn log_stream(
        &mut self,
        request: Resend,
        cursor: Box<dyn StreamCursor<LogLine> + Send>,
    ) -> Result<LineStream<'_, LogLine>, Error> {
        let mut stream = self.open_stream(request, cursor)?;
        stream.start()?;
        Ok(stream)
    }
}

/// Whether a request that failed with `e` may have reached the server (and been carried
/// out): its connection broke, or a deadline passed, after it was opened.
fn may_have_arrived(e: &Failure) -> bool {
    match e {
        ClientError::Connect(_)
        | ClientError::Encode(_)
        | ClientError::Timeout {
            waiting: Waiting::Connect,
            ..
        } => false,
        ClientError::Io(_) | ClientError::Timeout { .. } => true,
        ClientError::Decode(e) => matches!(e, DecodeError::UnexpectedEof { .. }),
        ClientError::BodyTooLarge { .. } | ClientError::Server(_) => false,
    }
}

/// How to learn whether a request to `path` that changes the server's state was
/// carried out.
fn outcome_check(path: &str) -> &'static str {
    match path {
        "/start" => {
            "look for the benchmark by the name or tags given to it (ids are sequential: \
             ask /status of the newest ids) before starting it again"
        }
        "/restart" => {
            "ask /status of the ids after the original benchmark's for one whose parent it \
             is before restarting it again"
        }
        _ => {
            "ask /status (or /clusters_info) whether the change took effect before sending it again"
        }
    }
}

/// A seed for the retry jitter, different in every client (so that clients cut
/// together do not come back together).
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
        | 1
}

/// See [`BenchClient::parts`].
struct Parts<'c> {
    server: Server<'c>,
    limits: Timeouts,
    endpoint: &'c Endpoint,
    link: &'c mut Link,
    bufs: &'c mut Buffers,
    line_buf: &'c mut [u8],
}

/// Makes `tx` large enough for `req`'s request head: a head that does not fit is refused
/// before anything is sent, so a conversation that sends nothing tries it, and `tx` grows
/// (up to its limit) until it fits. The connection is left as it was.
fn fit_head<R: Request>(
    bufs: &mut Buffers,
    server: Server<'_>,
    link: &Link,
    limits: Timeouts,
    endpoint: &Endpoint,
    req: &R,
) -> Result<(), Failure> {
    loop {
        let mut talk = bufs.conversation(server, link, limits, endpoint.connect_timeout)?;
        let ex: Ex<'_, '_> = talk.exchange(req, ResponseKind::Reply, link.now());
        let too_large = head_too_large(ex.outcome());
        drop(talk);
        if !(too_large && bufs.tx_can_grow()) {
            return Ok(());
        }
        bufs.grow_tx();
    }
}

/// Drives `ex` to its outcome.
fn finish(
    link: &mut Link,
    endpoint: &Endpoint,
    ex: &mut Ex<'_, '_>,
    sink: &mut dyn Sink,
) -> Result<(), Failure> {
    loop {
        if let Driven::Over(ended) = link.drive(endpoint, ex, sink, Until::End) {
            return ended;
        }
    }
}

/// Sets `ex` aside between two reads of its response; one that cannot be (its
/// response is not being read) is driven to its end instead, into `sink`.
fn pause(
    link: &mut Link,
    endpoint: &Endpoint,
    ex: Ex<'_, '_>,
    sink: &mut dyn Sink,
) -> Result<Paused<(), ()>, Result<(), Failure>> {
    ex.pause()
        .map_err(|mut ex| finish(link, endpoint, &mut ex, sink))
}

/// A response gathered whole: a JSON reply, or the error body of a stream.
#[derive(Debug)]
struct Gather {
    status: u16,
    bytes: Vec<u8>,
    max: usize,
    too_large: bool,
}

impl Gather {
    fn new(max: usize) -> Gather {
        Gather {
            status: 0,
            bytes: Vec::new(),
            max,
            too_large: false,
        }
    }

    /// Whether it all fitted.
    fn whole(&self) -> Result<(), Failure> {
        if self.too_large {
            let max = self.max as u64;
            return Err(Failure::Decode(DecodeError::BodyTooLarge { max }));
        }
        Ok(())
    }
}

impl Sink for Gather {
    fn head(&mut self, status: u16) -> ControlFlow<()> {
        self.status = status;
        ControlFlow::Continue(())
    }

    fn data(&mut self, data: &[u8]) -> ControlFlow<()> {
        if self.bytes.len() + data.len() > self.max {
            self.too_large = true;
            return ControlFlow::Break(());
        }
        self.bytes.extend_from_slice(data);
        ControlFlow::Continue(())
    }
}

/// The server and the request, for the errors of one exchange.
#[derive(Debug, Clone)]
struct Context {
    server: String,
    request: String,
}

impl Context {
    /// `req` as the errors name it (`GET /prefix/status?id=7`): written again only for
    /// an error or a stream, never for what is sent.
    fn of<R: Request>(identity: &Identity, req: &R) -> Context {
        let target = http::encode_to_vec(|c| req.write_target(c))
            .ok()
            .and_then(|t| String::from_utf8(t).ok())
            .unwrap_or_else(|| R::PATH.to_owned());
        Context {
            server: identity.host.clone(),
            request: format!("{} {}{target}", R::METHOD.as_str(), identity.prefix),
        }
    }

    /// No request to name (never used for what is sent).
    fn unnamed() -> Context {
        Context {
            server: String::new(),
            request: String::new(),
        }
    }

    fn attach(&self, e: impl Into<Error>) -> Error {
        e.into()
            .with_request(self.server.clone(), self.request.clone())
    }
}

/// A stream request as it is sent again after a cut.
#[derive(Debug, Clone)]
enum Resend {
    Data(u64),
    Log(u64),
    Userlog(u64),
    ServerLogs(Option<String>),
}

impl Resend {
    /// Calls `f` with the typed request.
    fn with<T>(&self, f: impl FnOnce(&dyn StreamTarget) -> T) -> T {
        match self {
            Resend::Data(id) => f(&request::Data { id: *id }),
            Resend::Log(id) => f(&request::Log { id: *id }),
            Resend::Userlog(id) => f(&request::Userlog { id: *id }),
            Resend::ServerLogs(severity) => f(&request::ServerLogs {
                severity: severity.as_deref(),
            }),
        }
    }

    fn context(&self, identity: &Identity) -> Context {
        self.with(|req| req.context(identity))
    }
}

/// What a stream does with its request, whichever it is: one object-safe face of the
/// typed stream requests, so that a stream keeps one [`Resend`] and not a type.
trait StreamTarget {
    fn context(&self, identity: &Identity) -> Context;
    fn exchange<'a, 'b>(&'a self, talk: &'a mut Conversation<'b>, now: CoreInstant) -> Ex<'a, 'b>;
    /// Makes `tx` large enough for the request head ([`fit_head`]).
    fn fit(&self, p: &mut Parts<'_>) -> Result<(), Failure>;
}

impl<R: StreamRequest> StreamTarget for R {
    fn context(&self, identity: &Identity) -> Context {
        Context::of(identity, self)
    }

    fn exchange<'a, 'b>(&'a self, talk: &'a mut Conversation<'b>, now: CoreInstant) -> Ex<'a, 'b> {
        talk.exchange(self, ResponseKind::Stream, now)
    }

    fn fit(&self, p: &mut Parts<'_>) -> Result<(), Failure> {
        fit_head(p.bufs, p.server, p.link, p.limits, p.endpoint, self)
    }
}

/// Per-metric progress of a `/data` stream on std: any number of metrics, names of any
/// length.
#[derive(Debug, Default)]
struct AnyMetrics(HashMap<Box<str>, Progress>);

impl MetricTable for AnyMetrics {
    fn progress(&mut self, name: &str) -> Result<&mut Progress, Untracked> {
        if !self.0.contains_key(name) {
            self.0.insert(name.into(), Progress::NEW);
        }
        self.0.get_mut(name).ok_or(Untracked::TableFull {
            capacity: usize::MAX,
        })
    }

    fn for_each(&mut self, each: &mut dyn FnMut(&mut Progress)) {
        self.0.values_mut().for_each(each);
    }
}

/// Why a try at a stream's response failed, and how the retry policy sees it.
struct Failed {
    error: Error,
    fault: Fault,
}

impl Failed {
    fn of(context: &Context, e: Failure) -> Failed {
        Failed {
            fault: fault(&e),
            error: context.attach(e),
        }
    }

    /// The server's error reply with `status`: worth trying again when a 5xx.
    fn refused(status: u16, error: Error) -> Failed {
        Failed {
            fault: if status >= 500 {
                Fault::Transient
            } else {
                Fault::Final
            },
            error,
        }
    }
}

/// How the retry policy sees `e`: core's view, except that a TLS refusal (a
/// certificate, an alert: data the TLS layer found invalid) or an invalid server name
/// fails again the same way.
fn fault(e: &Failure) -> Fault {
    match e {
        ClientError::Connect(io) | ClientError::Io(io)
            if matches!(
                io.kind(),
                io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput
            ) =>
        {
            Fault::Final
        }
        e => Fault::of(e),
    }
}

/// A stream's conversation (over the client's memory) and the connection it reads
/// from, with its exchange paused between two reads while a response is being read.
struct Open<'c> {
    talk: Conversation<'c>,
    paused: Option<Paused<(), ()>>,
    link: &'c mut Link,
    endpoint: &'c Endpoint,
    /// A `/data` stream's `/status` request, as its errors name it.
    status: Option<Context>,
}

impl Open<'_> {
    /// Resumes the exchange and drives it as far as `until`, pausing it again if it
    /// goes on.
    fn drive(&mut self, sink: &mut dyn Sink, until: Until) -> Driven {
        let Some(paused) = self.paused.take() else {
            return Driven::Over(Ok(()));
        };
        let mut ex = self.talk.resume(paused);
        match self.link.drive(self.endpoint, &mut ex, sink, until) {
            Driven::Going => match pause(self.link, self.endpoint, ex, sink) {
                Ok(paused) => {
                    self.paused = Some(paused);
                    Driven::Going
                }
                Err(ended) => Driven::Over(ended),
            },
            over => over,
        }
    }

    /// Sends `req` and reads its response head: the body bytes that came with it, the
    /// exchange paused here while more come; a non-200 reply is the server's error.
    fn send(&mut self, req: &dyn StreamTarget, context: &Context) -> Result<Vec<u8>, Failed> {
        self.paused = None;
        self.link.check_idle(&mut self.talk);
        let mut head = Gather::new(MAX_ERROR_BODY);
        let now = self.link.now();
        let mut ex = req.exchange(&mut self.talk, now);
        let mut driven = self
            .link
            .drive(self.endpoint, &mut ex, &mut head, Until::Head);
        // An error reply is read whole (its body says why).
        if head.status != 200 && matches!(driven, Driven::Going) {
            driven = Driven::Over(finish(self.link, self.endpoint, &mut ex, &mut head));
        }
        let ended = match driven {
            Driven::Going => match pause(self.link, self.endpoint, ex, &mut head) {
                Ok(paused) => {
                    self.paused = Some(paused);
                    Ok(())
                }
                Err(ended) => ended,
            },
            Driven::Over(ended) => ended,
        };
        ended
            .and_then(|()| head.whole())
            .map_err(|e| Failed::of(context, e))?;
        if head.status != 200 {
            self.paused = None;
            let error = context.attach(CoreError::from_reply(head.status, &head.bytes));
            return Err(Failed::refused(head.status, error));
        }
        Ok(head.bytes)
    }

    /// Waits, as core's [`DataWait`] says, until benchmark `id` runs or ended (true) or
    /// failed (false: its stream is empty), from `known` if given, else from `/status`.
    fn wait_for_data(&mut self, id: u64, mut known: Option<StatusInfo>) -> Result<bool, Failed> {
        let mut wait = DataWait::new();
        loop {
            let status = match known.take() {
                Some(status) => status,
                None => self.status(id)?,
            };
            match wait.handle_status(self.link.now(), &status.status()) {
                DataStep::SendData => return Ok(true),
                DataStep::Empty => return Ok(false),
                DataStep::PollStatusAt(at) => {
                    std::thread::sleep(at.saturating_duration_since(self.link.now()));
                }
            }
        }
    }

    /// `/status` of `id`, on this conversation.
    fn status(&mut self, id: u64) -> Result<StatusInfo, Failed> {
        let req = request::Status { id };
        let context = self.status.clone().unwrap_or_else(Context::unnamed);
        let mut body = Gather::new(MAX_JSON_REPLY);
        self.link.check_idle(&mut self.talk);
        let now = self.link.now();
        let mut ex: Ex<'_, '_> = self.talk.exchange(&req, ResponseKind::Reply, now);
        let ended = match ex.outcome() {
            Some(Err(e)) => Err(self.link.failure(e)),
            _ => finish(self.link, self.endpoint, &mut ex, &mut body),
        };
        ended
            .and_then(|()| body.whole())
            .map_err(|e| Failed::of(&context, e))?;
        match request::Status::read_reply(body.status, &body.bytes) {
            Ok(reply) => Ok(StatusInfo::from(reply)),
            Err(e) => Err(Failed::refused(
                e.http_status().unwrap_or(200),
                context.attach(e),
            )),
        }
    }
}

impl Drop for Open<'_> {
    /// The next conversation goes on from here: a stream left before its end has its
    /// connection closed then (core's rule for a paused exchange's connection).
    fn drop(&mut self) {
        self.link.keep(&self.talk);
    }
}

/// How a stream resumes: its request, what was taken, the retry policy.
struct Resume<F: LineFormat> {
    request: Resend,
    cursor: Box<dyn StreamCursor<F> + Send>,
    /// Core's decisions around the requests (retrying off: [`BenchClient::with_retry`]).
    resumption: Resumption,
    resumed: u32,
    /// A silence past the idle limit ends the stream ([`LineStream::silence_ends`]).
    silence_ends: bool,
}

/// Lines of a log or metric stream as they arrive: owned, one at a time, through
/// [`Iterator`]; or borrowed, all that the connection has at once, through
/// [`LineStream::read_available`] (no allocation per line). A line that cannot be decoded
/// is an `Err` item and the stream goes on; a failed connection is a last `Err`.
///
/// A stream resumes by itself after a cut, a truncated body, a reset, a refused
/// connection, a 5xx or a silence past the idle limit, under the client's
/// [`Retry`] policy ([`BenchClient::with_retry`]): the server restreams from the
/// first line and the stream skips, per metric, what it already handed out (core's
/// [`resume`](benchlink_core::bench::resume) cursors), so no line is lost or repeated.
/// What cannot be resumed exactly (a benchmark restarted under the same id, a live
/// tail's gap) is an `Err` item, never a guess. [`resumptions`](LineStream::resumptions)
/// counts the times it resumed.
pub struct LineStream<'c, F: OwnedLine> {
    /// `None`: an empty stream (a failed benchmark's `/data`).
    open: Option<Open<'c>>,
    /// Body bytes that came with the head, not handed out yet.
    early: Vec<u8>,
    /// The last line was handed out.
    done: bool,
    lines: LineDecoder<'c, F>,
    pending: VecDeque<Result<F::Owned, Error>>,
    context: Context,
    resume: Resume<F>,
}

/// What [`LineStream::read_available`] ended on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Available {
    /// Every line received so far was handed out and the connection has nothing more
    /// to read right now: the moment to flush output. More may come.
    Idle,
    /// The stream ended (its last line was handed out).
    End,
    /// The line callback asked to stop; the stream is closed.
    Stopped,
}

impl<F: OwnedLine> fmt::Debug for LineStream<'_, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LineStream")
            .field(
                "open",
                &self.open.as_ref().is_some_and(|o| o.paused.is_some()),
            )
            .field("resumed", &self.resume.resumed)
            .finish_non_exhaustive()
    }
}

/// A stream's body as lines, classified by its cursor, the new ones handed to `each`
/// until it breaks.
struct Lines<'s, 'l, F: LineFormat, E> {
    lines: &'s mut LineDecoder<'l, F>,
    cursor: &'s mut (dyn StreamCursor<F> + Send),
    resumption: &'s mut Resumption,
    each: E,
    stopped: bool,
}

impl<F, E> Lines<'_, '_, F, E>
where
    F: LineFormat,
    E: for<'l> FnMut(Result<F::Item<'l>, F::Error<'l>>) -> ControlFlow<()>,
{
    /// The response ended normally: its last line, and whether it had every line taken
    /// before.
    fn end(&mut self) {
        let Lines {
            lines,
            cursor,
            resumption,
            each,
            stopped,
        } = self;
        if let Some(last) = lines.finish() {
            *stopped |= hand_out(&mut **cursor, last, each).is_break();
            if *stopped {
                return;
            }
        }
        resumption.end(&mut **cursor, each);
    }
}

/// `each` as a line callback (the closure's signature, for every line lifetime).
fn line_callback<F, E>(each: E) -> E
where
    F: LineFormat,
    E: for<'l> FnMut(Result<F::Item<'l>, F::Error<'l>>) -> ControlFlow<()>,
{
    each
}

impl<F, E> Sink for Lines<'_, '_, F, E>
where
    F: LineFormat,
    E: for<'l> FnMut(Result<F::Item<'l>, F::Error<'l>>) -> ControlFlow<()>,
{
    fn head(&mut self, _status: u16) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }

    fn data(&mut self, mut data: &[u8]) -> ControlFlow<()> {
        let Lines {
            lines,
            cursor,
            each,
            stopped,
            ..
        } = self;
        while let Some(line) = lines.next(&mut data) {
            *stopped |= hand_out(&mut **cursor, line, each).is_break();
            if *stopped {
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }
}

impl<'c, F: OwnedLine> LineStream<'c, F> {
    /// Sends the request the first time (a `/data` stream's caller waited for the
    /// benchmark already); a failure worth trying again is retried (not counted as a
    /// resumption: nothing was taken yet).
    fn start(&mut self) -> Result<(), Error> {
        match self.send(false) {
            Ok(()) => Ok(()),
            Err(failed) => self.retry(failed),
        }
    }

    /// Sends the stream's request (for `/data` with `wait`, once the benchmark runs: a
    /// failed one ends the stream).
    fn send(&mut self, wait: bool) -> Result<(), Failed> {
        let Some(open) = self.open.as_mut() else {
            return Ok(());
        };
        if let (Resend::Data(id), true) = (&self.resume.request, wait) {
            if !open.wait_for_data(*id, None)? {
                self.open = None;
                return Ok(());
            }
        }
        let context = &self.context;
        self.early = self.resume.request.with(|req| open.send(req, context))?;
        Ok(())
    }

    /// After `failed`: waits as the policy says and sends the request again, until it
    /// streams or the failure is final.
    fn retry(&mut self, mut failed: Failed) -> Result<(), Error> {
        loop {
            let at = self.try_again_at(&failed).ok_or(failed.error)?;
            self.sleep_until(at);
            match self.send(true) {
                Ok(()) => return Ok(()),
                Err(again) => failed = again,
            }
        }
    }

    /// When to try again after `failed`, as core's [`Resumption`] says.
    fn try_again_at(&mut self, failed: &Failed) -> Option<CoreInstant> {
        let open = self.open.as_ref()?;
        if open.link.reached() {
            self.resume.resumption.reached();
        }
        let now = open.link.now();
        let cursor = &mut *self.resume.cursor;
        self.resume.resumption.failed(cursor, now, failed.fault)
    }

    fn sleep_until(&self, at: CoreInstant) {
        if let Some(open) = self.open.as_ref() {
            std::thread::sleep(at.saturating_duration_since(open.link.now()));
        }
    }

    /// The response failed with `e` after it began: resumed from where the stream was
    /// (a live tail's gap reported to `each` first: `Break` when `each` stopped there),
    /// or the error.
    fn resume_after<E>(&mut self, e: Failure, each: &mut E) -> Result<ControlFlow<()>, Error>
    where
        E: for<'l> FnMut(Result<F::Item<'l>, F::Error<'l>>) -> ControlFlow<()>,
    {
        let silent = matches!(
            e,
            ClientError::Timeout {
                waiting: Waiting::StreamData,
                ..
            }
        );
        let mut failed = Failed::of(&self.context, e);
        if silent && self.resume.silence_ends {
            failed.fault = Fault::Final;
        }
        // Progress since the last request counts before the new one begins.
        let at = self.try_again_at(&failed).ok_or(failed.error)?;
        // The partial line of the failed response goes with it; it comes again whole.
        let _ = self.lines.finish();
        self.early.clear();
        let cursor = &mut *self.resume.cursor;
        if self.resume.resumption.begin(cursor, each).is_break() {
            return Ok(ControlFlow::Break(()));
        }
        self.sleep_until(at);
        if let Err(again) = self.send(true) {
            self.retry(again)?;
        }
        self.resume.resumed += 1;
        Ok(ControlFlow::Continue(()))
    }

    /// Makes a silence past the idle limit
    /// ([`with_stream_idle_timeout`](BenchClient::with_stream_idle_timeout)) end the
    /// stream with its timeout error instead of resuming it: for a caller that reads a
    /// running benchmark's samples up to now and takes a quiet stream as caught up
    /// (`benchlink bench plot`). Cuts are still resumed.
    ///
    /// ```no_run
    /// let mut client = benchlink_std::bench::BenchClient::from_env()?
    ///     .with_stream_idle_timeout(Some(std::time::Duration::from_secs(3)));
    /// let so_far: Vec<_> = client.data(7)?.silence_ends().map_while(Result::ok).collect();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn silence_ends(mut self) -> Self {
        self.resume.silence_ends = true;
        self
    }

    /// Times the stream was cut and resumed.
    ///
    /// ```no_run
    /// let mut client = benchlink_std::bench::BenchClient::from_env()?;
    /// let mut data = client.data(7)?;
    /// let samples = data.by_ref().filter(Result::is_ok).count();
    /// println!("{samples} samples, /data resumed {} times", data.resumptions());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resumptions(&self) -> u32 {
        self.resume.resumed
    }

    /// Reads as far as `until` into `sink`, resuming after a failure: Going, or the end
    /// (the stream's error when it could not be resumed).
    fn read<E>(&mut self, each: &mut E, until: Until) -> Result<Driven, Error>
    where
        E: for<'l> FnMut(Result<F::Item<'l>, F::Error<'l>>) -> ControlFlow<()>,
    {
        loop {
            let mut sink = Lines {
                lines: &mut self.lines,
                cursor: &mut *self.resume.cursor,
                resumption: &mut self.resume.resumption,
                each: &mut *each,
                stopped: false,
            };
            // Body bytes that came with the head are this read's first bytes.
            let early = std::mem::take(&mut self.early);
            let until = match until {
                _ if early.is_empty() => until,
                Until::Read => {
                    let _ = sink.data(&early);
                    return Ok(Driven::Going);
                }
                _ => {
                    let _ = sink.data(&early);
                    Until::Drained { waited: true }
                }
            };
            if sink.stopped {
                return Ok(Driven::Over(Ok(())));
            }
            let driven = match self.open.as_mut() {
                Some(open) => open.drive(&mut sink, until),
                None => Driven::Over(Ok(())),
            };
            if sink.stopped {
                return Ok(Driven::Over(Ok(())));
            }
            match driven {
                Driven::Going => return Ok(Driven::Going),
                Driven::Over(Ok(())) => {
                    sink.end();
                    return Ok(Driven::Over(Ok(())));
                }
                Driven::Over(Err(e)) => {
                    if self.resume_after(e, each)?.is_break() {
                        return Ok(Driven::Over(Ok(())));
                    }
                }
            }
        }
    }

    /// Waits (up to the stream's idle limit) until lines arrive, then hands `each` every
    /// line the connection delivers without waiting again, borrowed from the receive
    /// buffers, and returns [`Available::Idle`] when the socket has nothing more to
    /// read right now; [`Available::End`] once the stream ended. Lines go out at the
    /// network's pace: when the server is slow each comes as soon as it arrives, when
    /// it is fast they come in large batches with one return per batch.
    ///
    /// A line callback that returns `Break` closes the stream ([`Available::Stopped`]).
    /// Lines the iterator already decoded but did not return are not handed out here.
    ///
    /// ```no_run
    /// use std::ops::ControlFlow;
    /// use benchlink_std::bench::{Available, BenchClient};
    /// let mut client = BenchClient::from_env()?;
    /// let mut data = client.data(7)?;
    /// let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    /// use std::io::Write;
    /// loop {
    ///     let state = data.read_available(|line| {
    ///         if let Ok(s) = line {
    ///             let _ = writeln!(out, "{},{},{}", s.name, s.timestamp, s.value);
    ///         }
    ///         ControlFlow::Continue(())
    ///     })?;
    ///     out.flush()?;
    ///     if state != Available::Idle {
    ///         break;
    ///     }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_available(
        &mut self,
        mut each: impl for<'l> FnMut(Result<F::Item<'l>, F::Error<'l>>) -> ControlFlow<()>,
    ) -> Result<Available, Error> {
        if self.done {
            return Ok(Available::End);
        }
        let mut stopped = false;
        let mut each = line_callback::<F, _>(|line| {
            let flow = each(line);
            stopped |= flow.is_break();
            flow
        });
        let driven = self.read(&mut each, Until::Drained { waited: false });
        match driven {
            Ok(Driven::Going) => Ok(Available::Idle),
            Ok(Driven::Over(_)) => {
                self.open = None;
                self.done = true;
                Ok(if stopped {
                    Available::Stopped
                } else {
                    Available::End
                })
            }
            Err(e) => {
                self.open = None;
                self.done = true;
                Err(e)
            }
        }
    }
}

impl<F: OwnedLine> Iterator for LineStream<'_, F> {
    type Item = Result<F::Owned, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some(item);
            }
            if self.done {
                return None;
            }
            let mut pending = std::mem::take(&mut self.pending);
            let context = self.context.clone();
            let mut each = line_callback::<F, _>(|line| {
                pending.push_back(F::own(line).map_err(|e| context.attach(e)));
                ControlFlow::Continue(())
            });
            let driven = self.read(&mut each, Until::Read);
            self.pending = pending;
            match driven {
                Ok(Driven::Going) => {}
                Ok(Driven::Over(_)) => {
                    self.open = None;
                    self.done = true;
                }
                Err(e) => {
                    self.open = None;
                    self.done = true;
                    self.pending.push_back(Err(e));
                }
            }
        }
    }
}

/// How a stream's decoded lines become owned items.
pub trait OwnedLine: LineFormat {
    /// The owned item.
    type Owned;
    /// Converts one decoded line (or its error).
    fn own(line: Result<Self::Item<'_>, Self::Error<'_>>) -> Result<Self::Owned, Error>;
}

impl OwnedLine for LogLine {
    type Owned = String;

    /// Log text that is not UTF-8 is shown lossily rather than dropped.
    fn own(line: Result<&str, LogLineError<'_>>) -> Result<String, Error> {
        match line {
            Ok(text) => Ok(text.to_owned()),
            Err(LogLineError::NotUtf8 { line }) => Ok(String::from_utf8_lossy(line).into_owned()),
            Err(e) => Err(ErrorKind::Reply(e.to_string()).into()),
        }
    }
}

impl OwnedLine for MetricLine {
    type Owned = Sample;

    fn own(
        line: Result<benchlink_core::bench::Sample<'_>, benchlink_core::bench::SampleError>,
    ) -> Result<Sample, Error> {
        line.map(Sample::from)
            .map_err(|e| ErrorKind::Reply(e.to_string()).into())
    }
}

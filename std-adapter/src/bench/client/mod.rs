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

mod stream;
use self::stream::{fault, StreamTarget};
pub use self::stream::{Available, LineStream, OwnedLine};

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

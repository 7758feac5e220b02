//! One typed request per endpoint of the benchmark server.
//!
//! A request knows its method, its path, its query (through
//! [`EncodeQuery`], encoded exactly as the official Python client was recorded encoding
//! it) and its body, and names how its reply is read: [`JsonRequest::Reply`] for JSON
//! replies, [`StreamRequest::Format`] for line streams. All strings are borrowed; ids
//! are `u64`.
//!
//! The request and reply types share names (`Status`, `Results`), so requests live in
//! this module and are used with their path:
//!
//! ```
//! use benchlink_core::bench::{request, JsonRequest, Request, Status};
//! use benchlink_core::http::{Cursor, Method};
//! let mut buf = [0u8; 64];
//! let mut target = Cursor::new(&mut buf);
//! request::Status { id: 7 }.write_target(&mut target).unwrap();
//! assert_eq!((request::Status::METHOD, target.written()), (Method::Get, &b"/status?id=7&wait=false"[..]));
//! let reply = request::Status::read_reply(200, br#"{"status":"running","create_time":"2015-11-03T13:39:20Z"}"#).unwrap();
//! assert_eq!(reply.status, Status::Running);
//! ```

use super::clusters::Clusters;
use super::error::Error;
use super::lines::{LineFormat, LogLine};
use super::reply::{
    read_reply, CommandSent, Empty, EnvSet, FromReply, Started, Stopped, TypecheckOk,
};
use super::results::Results as ResultsReply;
use super::samples::MetricLine;
use super::status::BenchStatus;
use crate::http::{Cursor, EncodeError, EncodeQuery, Method, QueryWriter};

/// What every endpoint has in common: how to put it on the wire.
pub trait Request: EncodeQuery {
    /// The HTTP method (`POST` only for `/start` and `/typecheck`; the server answers
    /// 404 to any other method on a path).
    const METHOD: Method;
    /// The path, e.g. `/status`.
    const PATH: &'static str;
    /// Whether the request changes nothing on the server, so that a client may send it
    /// again when it does not know whether it arrived (a stale kept-alive connection,
    /// its [`Retry`](super::resume::Retry) policy): the status, the results, the
    /// clusters, a type check, the streams. The requests that change state (`/start`,
    /// `/restart`, `/stop`, the tags, the environment, commands, clusters, reports) are
    /// never sent again once their bytes went out, whatever their method.
    ///
    /// ```
    /// use benchlink_core::bench::{request, Request};
    /// assert!(request::Status::IDEMPOTENT && !request::Stop::IDEMPOTENT);
    /// ```
    const IDEMPOTENT: bool = false;

    /// The request body: empty except for the scenario uploads.
    ///
    /// ```
    /// use benchlink_core::bench::{request, Request, Body};
    /// assert_eq!(request::Stop { id: 1 }.body(), Body::Empty);
    /// ```
    fn body(&self) -> Body<'_> {
        Body::Empty
    }

    /// Writes the request target: the path and, if there are parameters, `?` and the
    /// query.
    ///
    /// ```
    /// use benchlink_core::bench::{request, Request};
    /// use benchlink_core::http::Cursor;
    /// let mut buf = [0u8; 32];
    /// let mut out = Cursor::new(&mut buf);
    /// request::ClustersInfo.write_target(&mut out).unwrap();
    /// assert_eq!(out.written(), b"/clusters_info");
    /// ```
    fn write_target(&self, out: &mut Cursor<'_>) -> Result<(), EncodeError> {
        out.push_str(Self::PATH)?;
        QueryWriter::write(out, self)
    }
}

/// An endpoint whose 200 reply is one JSON document.
pub trait JsonRequest: Request {
    /// The typed reply.
    type Reply<'a>: FromReply<'a>;

    /// Reads the reply: the typed body on 200, the typed error otherwise.
    ///
    /// ```
    /// use benchlink_core::bench::{request, Error, JsonRequest};
    /// assert!(request::Stop::read_reply(200, br#"{"status":"stopped"}"#).is_ok());
    /// assert_eq!(request::Stop::read_reply(500, b"").unwrap_err().http_status(), Some(500));
    /// ```
    fn read_reply(status: u16, body: &[u8]) -> Result<Self::Reply<'_>, Error<'_>> {
        read_reply(status, body)
    }
}

/// An endpoint whose 200 reply is a stream of lines, read with
/// [`LineDecoder<F>`](super::LineDecoder) for its `Format`. Check the status first: an
/// error reply is one JSON object, for [`Error::from_reply`].
pub trait StreamRequest: Request {
    /// How each line is decoded.
    type Format: LineFormat;
}

/// A request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Body<'a> {
    /// No body.
    Empty,
    /// `multipart/form-data` of file parts (every part must have a filename or the server
    /// answers 500): the scenario as part `bench`, then each resource as part `include`.
    Multipart {
        /// The scenario, sent as the part named `bench`; its file name becomes the
        /// default benchmark name.
        bench: File<'a>,
        /// Resources the scenario includes, each sent as a part named `include`, named
        /// exactly as in the scenario's `include_resource`.
        includes: &'a [File<'a>],
    },
}

/// A file to upload as one multipart part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct File<'a> {
    /// The part's `filename`.
    pub name: &'a str,
    /// The file's bytes.
    pub content: &'a [u8],
}

/// `nodes` of `/start`: how many to allocate from the cloud, or which hosts to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Nodes<'a> {
    /// Allocate this many worker nodes (plus one director) from the cloud.
    Count(u64),
    /// Use these preallocated hosts (`host` or `user@host`, at least two, one user),
    /// sent joined with `,`.
    Hosts(&'a [&'a str]),
}

/// `POST /start`: run a scenario. Reply: [`Started`].
///
/// Parameters are written in the official client's order: `nodes`,
/// `deallocate_after_bench`, `provision_nodes`, `benchmark_name`, `cloud`, `tags`,
/// `exclusive`, `node_commit`, each `email`, then every `env` pair. Unset options are
/// left out, so the server's defaults apply. Test hooks such as
/// `emulate_bench_crash=true` are reserved parameter names: pass them as `env` pairs and
/// the server takes them as the parameter, not as an environment variable.
///
/// ```
/// use benchlink_core::bench::request::{File, Nodes, Start};
/// use benchlink_core::bench::Request;
/// use benchlink_core::http::Cursor;
/// let script = File { name: "small.bdl", content: b"#!benchDL\n" };
/// let start = Start {
///     nodes: Some(Nodes::Hosts(&["h1", "h2", "h3"])),
///     deallocate_after_bench: Some(false),
///     provision_nodes: Some(false),
///     benchmark_name: Some("my bench"),
///     cloud: Some("local"),
///     tags: &["a", "b"],
///     exclusive: Some("lbl"),
///     node_commit: Some("abc123"),
///     emails: &["x@y.z", "u@v.w"],
///     env: &[("message", "zzz"), ("rate", "5")],
///     ..Start::new(script)
/// };
/// let mut buf = [0u8; 256];
/// let mut out = Cursor::new(&mut buf);
/// start.write_target(&mut out).unwrap();
/// assert_eq!(
///     core::str::from_utf8(out.written()).unwrap(),
///     "/start?nodes=h1%2Ch2%2Ch3&deallocate_after_bench=false&provision_nodes=false\
///      &benchmark_name=my+bench&cloud=local&tags=a%2Cb&exclusive=lbl&node_commit=abc123\
///      &email=x%40y.z&email=u%40v.w&message=zzz&rate=5"
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Start<'a> {
    /// The scenario (BDL starting with `#!benchDL`, or Erlang terms).
    pub script: File<'a>,
    /// Resources the scenario includes.
    pub includes: &'a [File<'a>],
    /// Node count or host list (server default: 1 node).
    pub nodes: Option<Nodes<'a>>,
    /// `false` keeps the nodes after the run (server default `true`).
    pub deallocate_after_bench: Option<bool>,
    /// `false` skips installing the benchmark software (server default `true`).
    pub provision_nodes: Option<bool>,
    /// Display name (server default: the script's file name).
    pub benchmark_name: Option<&'a str>,
    /// Cloud plugin to allocate from (server default: its first configured cloud).
    pub cloud: Option<&'a str>,
    /// Tags, sent joined with `,` as one `tags` value; the server splits on commas and
    /// spaces, so a tag cannot contain either. Empty: no `tags` parameter.
    pub tags: &'a [&'a str],
    /// Labels (comma- or space-separated) that serialize benchmarks sharing them.
    pub exclusive: Option<&'a str>,
    /// Commit or branch of the benchmark software to install on the nodes.
    pub node_commit: Option<&'a str>,
    /// Addresses to mail a report to at the end, one `email` parameter each.
    pub emails: &'a [&'a str],
    /// Scenario environment variables, one `name=value` parameter each.
    pub env: &'a [(&'a str, &'a str)],
}

impl<'a> Start<'a> {
    /// A start of `script` with every option left to the server's defaults.
    ///
    /// ```
    /// use benchlink_core::bench::request::{File, Start};
    /// use benchlink_core::bench::Request;
    /// use benchlink_core::http::Cursor;
    /// let mut buf = [0u8; 16];
    /// let mut out = Cursor::new(&mut buf);
    /// Start::new(File { name: "s.bdl", content: b"" }).write_target(&mut out).unwrap();
    /// assert_eq!(out.written(), b"/start");
    /// ```
    pub fn new(script: File<'a>) -> Self {
        Start {
            script,
            includes: &[],
            nodes: None,
            deallocate_after_bench: None,
            provision_nodes: None,
            benchmark_name: None,
            cloud: None,
            tags: &[],
            exclusive: None,
            node_commit: None,
            emails: &[],
            env: &[],
        }
    }
}

impl EncodeQuery for Start<'_> {
    fn encode_query(&self, q: &mut QueryWriter<'_, '_>) -> Result<(), EncodeError> {
        match self.nodes {
            Some(Nodes::Count(n)) => q.pair_u64("nodes", n)?,
            Some(Nodes::Hosts(hosts)) => q.pair_joined("nodes", hosts.iter().copied(), ",")?,
            None => {}
        }
        for (key, value) in [
            ("deallocate_after_bench", self.deallocate_after_bench),
            ("provision_nodes", self.provision_nodes),
        ] {
            if let Some(value) = value {
                q.pair_bool(key, value)?;
            }
        }
        for (key, value) in [
            ("benchmark_name", self.benchmark_name),
            ("cloud", self.cloud),
        ] {
            if let Some(value) = value {
                q.pair(key, value)?;
            }
        }
        if !self.tags.is_empty() {
            q.pair_joined("tags", self.tags.iter().copied(), ",")?;
        }
        for (key, value) in [
            ("exclusive", self.exclusive),
            ("node_commit", self.node_commit),
        ] {
            if let Some(value) = value {
                q.pair(key, value)?;
            }
        }
        self.emails
            .iter()
            .try_for_each(|addr| q.pair("email", addr))?;
        self.env.encode_query(q)
    }
}

impl Request for Start<'_> {
    const METHOD: Method = Method::Post;
    const PATH: &'static str = "/start";

    fn body(&self) -> Body<'_> {
        Body::Multipart {
            bench: self.script,
            includes: self.includes,
        }
    }
}

impl JsonRequest for Start<'_> {
    type Reply<'a> = Started<'a>;
}

/// `POST /typecheck`: check a scenario without running it. Reply: [`TypecheckOk`], or
/// a 400 error with [`ReasonCode::Error`](super::ReasonCode::Error) naming the problem.
/// The server closes the connection after replying.
///
/// ```
/// use benchlink_core::bench::request::{File, Typecheck};
/// use benchlink_core::bench::{Body, Request};
/// let t = Typecheck { script: File { name: "s.bdl", content: b"#!benchDL\n" } };
/// assert!(matches!(t.body(), Body::Multipart { includes: &[], .. }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Typecheck<'a> {
    /// The scenario, sent as the part named `bench`.
    pub script: File<'a>,
}

impl EncodeQuery for Typecheck<'_> {
    fn encode_query(&self, _: &mut QueryWriter<'_, '_>) -> Result<(), EncodeError> {
        Ok(())
    }
}

impl Request for Typecheck<'_> {
    const METHOD: Method = Method::Post;
    const PATH: &'static str = "/typecheck";
    const IDEMPOTENT: bool = true;

    fn body(&self) -> Body<'_> {
        Body::Multipart {
            bench: self.script,
            includes: &[],
        }
    }
}

impl JsonRequest for Typecheck<'_> {
    type Reply<'a> = TypecheckOk;
}

/// Defines a `GET` request that takes only an `id` (plus fixed parameters), with its
/// doc example checking the exact request target.
macro_rules! id_request {
    (
        $(#[$doc:meta])*
        $name:ident, $path:literal, idempotent: $idempotent:literal, id: $id_doc:literal
        $(, $key:literal = $value:literal)* => $target:literal
    ) => {
        $(#[$doc])*
        #[doc = concat!(
            "\n\n```\nuse benchlink_core::bench::{request::", stringify!($name), ", Request};\n",
            "use benchlink_core::http::Cursor;\n",
            "let mut buf = [0u8; 64];\nlet mut out = Cursor::new(&mut buf);\n",
            stringify!($name), " { id: 7 }.write_target(&mut out).unwrap();\n",
            "assert_eq!(out.written(), b\"", $target, "\");\n```"
        )]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub struct $name {
            #[doc = $id_doc]
            pub id: u64,
        }

        impl EncodeQuery for $name {
            fn encode_query(&self, q: &mut QueryWriter<'_, '_>) -> Result<(), EncodeError> {
                q.pair_u64("id", self.id)?;
                $( q.pair($key, $value)?; )*
                Ok(())
            }
        }

        impl Request for $name {
            const METHOD: Method = Method::Get;
            const PATH: &'static str = $path;
            const IDEMPOTENT: bool = $idempotent;
        }
    };
}

id_request! {
    /// `GET /status`: where a benchmark is. Reply: [`BenchStatus`]. Sends `wait=false`
    /// like the official client; the server ignores `wait`, so waiting means polling.
    Status, "/status", idempotent: true, id: "The benchmark id.", "wait" = "false" => "/status?id=7&wait=false"
}

impl JsonRequest for Status {
    type Reply<'a> = BenchStatus<'a>;
}

id_request! {
    /// `GET /results`: final statistics. Reply: [`Results`](super::Results) (`{}` until
    /// computed). Sends `wait=false` like the official client (ignored by the server).
    Results, "/results", idempotent: true, id: "The benchmark id.", "wait" = "false" => "/results?id=7&wait=false"
}

impl JsonRequest for Results {
    type Reply<'a> = ResultsReply<'a>;
}

id_request! {
    /// `GET /stop`: stop a benchmark at once (finalize stages still run). Reply:
    /// [`Stopped`], also for an already finished benchmark.
    Stop, "/stop", idempotent: false, id: "The benchmark id." => "/stop?id=7"
}

impl JsonRequest for Stop {
    type Reply<'a> = Stopped;
}

id_request! {
    /// `GET /restart`: start a clone of an earlier benchmark under a new id. Reply:
    /// [`Started`].
    Restart, "/restart", idempotent: false, id: "The id of the benchmark to clone." => "/restart?id=7"
}

impl JsonRequest for Restart {
    type Reply<'a> = Started<'a>;
}

id_request! {
    /// `GET /log`: the benchmark's system log as lines, streamed until the benchmark
    /// process exits; `deflate` (zlib) encoded by default whatever Accept-Encoding says.
    Log, "/log", idempotent: true, id: "The benchmark id." => "/log?id=7"
}

impl StreamRequest for Log {
    type Format = LogLine;
}

id_request! {
    /// `GET /userlog`: the workers' log as lines, streamed like [`Log`].
    Userlog, "/userlog", idempotent: true, id: "The benchmark id." => "/userlog?id=7"
}

impl StreamRequest for Userlog {
    type Format = LogLine;
}

id_request! {
    /// `GET /data`: metric samples as `ts\tname\tvalue` lines, streamed until the
    /// benchmark process exits. The server does not answer at all for a `failed`
    /// benchmark: use a timeout, or check `/status` first.
    Data, "/data", idempotent: true, id: "The benchmark id." => "/data?id=7"
}

impl StreamRequest for Data {
    type Format = MetricLine;
}

id_request! {
    /// `GET /deallocate_cluster`: destroy a cluster's nodes and drop its record. Reply:
    /// [`Empty`]; 404 `Cluster not found` / `Cluster is not allocated` otherwise.
    DeallocateCluster, "/deallocate_cluster", idempotent: false, id: "The cluster id (from `/clusters_info`), not a benchmark id."
        => "/deallocate_cluster?id=7"
}

impl JsonRequest for DeallocateCluster {
    type Reply<'a> = Empty;
}

id_request! {
    /// `GET /remove_cluster_info`: drop a cluster record without deallocating. Reply:
    /// [`Empty`], always (even for unknown ids).
    RemoveClusterInfo, "/remove_cluster_info", idempotent: false, id: "The cluster id (from `/clusters_info`), not a benchmark id."
        => "/remove_cluster_info?id=7"
}

impl JsonRequest for RemoveClusterInfo {
    type Reply<'a> = Empty;
}

/// `GET /clusters_info`: every cluster record. Reply: [`Clusters`].
///
/// ```
/// use benchlink_core::bench::{request::ClustersInfo, Request};
/// use benchlink_core::http::Cursor;
/// let mut buf = [0u8; 32];
/// let mut out = Cursor::new(&mut buf);
/// ClustersInfo.write_target(&mut out).unwrap();
/// assert_eq!(out.written(), b"/clusters_info");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ClustersInfo;

impl EncodeQuery for ClustersInfo {
    fn encode_query(&self, _: &mut QueryWriter<'_, '_>) -> Result<(), EncodeError> {
        Ok(())
    }
}

impl Request for ClustersInfo {
    const METHOD: Method = Method::Get;
    const PATH: &'static str = "/clusters_info";
    const IDEMPOTENT: bool = true;
}

impl JsonRequest for ClustersInfo {
    type Reply<'a> = Clusters<'a>;
}

/// `GET /change_env`: set scenario environment variables of a running benchmark.
/// Reply: [`EnvSet`]. The pairs come first and `id` last, as the official client sends
/// them. Before `running` or after the end the server answers 500.
///
/// ```
/// use benchlink_core::bench::{request::ChangeEnv, Request};
/// use benchlink_core::http::Cursor;
/// let mut buf = [0u8; 64];
/// let mut out = Cursor::new(&mut buf);
/// ChangeEnv { id: 7, env: &[("rate", "5"), ("message", "a b&c")] }.write_target(&mut out).unwrap();
/// assert_eq!(out.written(), b"/change_env?rate=5&message=a+b%26c&id=7");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ChangeEnv<'a> {
    /// The benchmark id.
    pub id: u64,
    /// `name=value` pairs (a name of `id` would clash with the benchmark id).
    pub env: &'a [(&'a str, &'a str)],
}

impl EncodeQuery for ChangeEnv<'_> {
    fn encode_query(&self, q: &mut QueryWriter<'_, '_>) -> Result<(), EncodeError> {
        self.env.encode_query(q)?;
        q.pair_u64("id", self.id)
    }
}

impl Request for ChangeEnv<'_> {
    const METHOD: Method = Method::Get;
    const PATH: &'static str = "/change_env";
}

impl JsonRequest for ChangeEnv<'_> {
    type Reply<'a> = EnvSet;
}

/// `GET /run_command`: run one BDL statement on a share of a pool's workers. Reply:
/// [`CommandSent`]; 400 `not_running` before the benchmark runs. Parameters in the
/// order of the official client under Python 3: `id`, `pool`, `percent`, `command`.
///
/// ```
/// use benchlink_core::bench::{request::RunCommand, Request};
/// use benchlink_core::http::Cursor;
/// let mut buf = [0u8; 80];
/// let mut out = Cursor::new(&mut buf);
/// RunCommand { id: 7, pool: 1, percent: 50, command: "print(\"zz\")" }.write_target(&mut out).unwrap();
/// assert_eq!(out.written(), b"/run_command?id=7&pool=1&percent=50&command=print%28%22zz%22%29");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RunCommand<'a> {
    /// The benchmark id.
    pub id: u64,
    /// The worker pool, counted from 1 (the official CLI's default is 1).
    pub pool: u32,
    /// Share of the pool's workers, 1 to 100 (the official CLI's default is 100).
    pub percent: u8,
    /// One BDL statement, e.g. `print("x")`.
    pub command: &'a str,
}

impl EncodeQuery for RunCommand<'_> {
    fn encode_query(&self, q: &mut QueryWriter<'_, '_>) -> Result<(), EncodeError> {
        q.pair_u64("id", self.id)?;
        q.pair_u64("pool", u64::from(self.pool))?;
        q.pair_u64("percent", u64::from(self.percent))?;
        q.pair("command", self.command)
    }
}

impl Request for RunCommand<'_> {
    const METHOD: Method = Method::Get;
    const PATH: &'static str = "/run_command";
}

impl JsonRequest for RunCommand<'_> {
    type Reply<'a> = CommandSent;
}

/// `GET /email_report`: mail a finished benchmark's report. Reply: [`Empty`]; 400
/// while it still runs.
///
/// Each address is its own `addr` parameter. The upstream documentation (and the
/// promise this library started from) says `addr` is a comma-separated list, but the
/// server does not split it: `a@b,c@d` is one (invalid) address. Repeated `addr` works
/// on every server version, so that is what is sent.
///
/// ```
/// use benchlink_core::bench::{request::EmailReport, Request};
/// use benchlink_core::http::Cursor;
/// let mut buf = [0u8; 64];
/// let mut out = Cursor::new(&mut buf);
/// EmailReport { id: 7, addrs: &["a@b.c", "d@e.f"] }.write_target(&mut out).unwrap();
/// assert_eq!(out.written(), b"/email_report?id=7&addr=a%40b.c&addr=d%40e.f");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EmailReport<'a> {
    /// The benchmark id.
    pub id: u64,
    /// Recipients (at least one, or the server answers 500).
    pub addrs: &'a [&'a str],
}

impl EncodeQuery for EmailReport<'_> {
    fn encode_query(&self, q: &mut QueryWriter<'_, '_>) -> Result<(), EncodeError> {
        q.pair_u64("id", self.id)?;
        self.addrs.iter().try_for_each(|addr| q.pair("addr", addr))
    }
}

impl Request for EmailReport<'_> {
    const METHOD: Method = Method::Get;
    const PATH: &'static str = "/email_report";
}

impl JsonRequest for EmailReport<'_> {
    type Reply<'a> = Empty;
}

/// `GET /server_logs`: the server's own log from now on, as lines that never end by
/// themselves. Removed from the reference server in 2017 (it answers 404 there); the
/// local server provides it as the seed promised.
///
/// ```
/// use benchlink_core::bench::{request::ServerLogs, Request};
/// use benchlink_core::http::Cursor;
/// let mut buf = [0u8; 64];
/// let mut out = Cursor::new(&mut buf);
/// ServerLogs { severity: Some("info") }.write_target(&mut out).unwrap();
/// assert_eq!(out.written(), b"/server_logs?severity=info");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ServerLogs<'a> {
    /// Minimum severity: `debug`, `info` (the default), `warning` or `error`.
    pub severity: Option<&'a str>,
}

impl EncodeQuery for ServerLogs<'_> {
    fn encode_query(&self, q: &mut QueryWriter<'_, '_>) -> Result<(), EncodeError> {
        self.severity.map_or(Ok(()), |s| q.pair("severity", s))
    }
}

impl Request for ServerLogs<'_> {
    const METHOD: Method = Method::Get;
    const PATH: &'static str = "/server_logs";
    const IDEMPOTENT: bool = true;
}

impl StreamRequest for ServerLogs<'_> {
    type Format = LogLine;
}

/// Defines a tag request: `id`, then the tags joined with `,` as one `tags` value.
macro_rules! tags_request {
    ($(#[$doc:meta])* $name:ident, $path:literal => $target:literal) => {
        $(#[$doc])*
        ///
        /// Tags are joined with `,` into one `tags` value; the server splits on commas
        /// and spaces, so a tag cannot contain either. No tags at all makes the server
        /// answer 500.
        #[doc = concat!(
            "\n\n```\nuse benchlink_core::bench::{request::", stringify!($name), ", Request};\n",
            "use benchlink_core::http::Cursor;\n",
            "let mut buf = [0u8; 64];\nlet mut out = Cursor::new(&mut buf);\n",
            stringify!($name), " { id: 7, tags: &[\"a\", \"b c\"] }.write_target(&mut out).unwrap();\n",
            "assert_eq!(out.written(), b\"", $target, "\");\n```"
        )]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub struct $name<'a> {
            /// The benchmark id.
            pub id: u64,
            /// The tags.
            pub tags: &'a [&'a str],
        }

        impl EncodeQuery for $name<'_> {
            fn encode_query(&self, q: &mut QueryWriter<'_, '_>) -> Result<(), EncodeError> {
                q.pair_u64("id", self.id)?;
                q.pair_joined("tags", self.tags.iter().copied(), ",")
            }
        }

        impl Request for $name<'_> {
            const METHOD: Method = Method::Get;
            const PATH: &'static str = $path;
        }

        impl JsonRequest for $name<'_> {
            type Reply<'a> = Empty;
        }
    };
}

tags_request! {
    /// `GET /add_tags`: add tags to a benchmark (ones it has are skipped). Reply:
    /// [`Empty`].
    AddTags, "/add_tags" => "/add_tags?id=7&tags=a%2Cb+c"
}

tags_request! {
    /// `GET /remove_tags`: remove one occurrence of each tag. Reply: [`Empty`].
    RemoveTags, "/remove_tags" => "/remove_tags?id=7&tags=a%2Cb+c"
}

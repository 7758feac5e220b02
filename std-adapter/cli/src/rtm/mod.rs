//! `benchlink rtm …`: the messaging service from the command line over [`Client`], with
//! the commands, options, configuration, output and recording format of satori-rtm-cli
//! 1.5.3, so its users' habits and scripts carry over; `search` and a few options are
//! benchlink's own (marked "(benchlink)" in the help).
//!
//! Every command connects (failing fast when the first connection fails), authenticates
//! when a role and its secret are given, does its work and disconnects. Values are
//! printed as satori-rtm-cli prints them (Python's `json.dumps`: `<channel>: {"a": 1}`);
//! `--jsonl` prints benchlink's JSON lines instead (`{"channel":…,"message":…}`), for
//! `jq`.
//!
//! Where benchlink departs from satori-rtm-cli on purpose, it is to stop a silent
//! surprise: contradictory or invalid options and input lines that look like JSON but
//! are not are refused with a message before anything is sent, and a refused publish or
//! a failed subscription exits 1 (satori-rtm-cli exits 0 or 130, by a race).
//!
//! Without `--endpoint` (and `BENCHLINK_RTM_ENDPOINT`, `SATORI_ENDPOINT`, the config
//! file) a local RTM server is used: see [`target`].

use std::borrow::Cow;
use std::fmt::{self, Display};
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::mpsc::{self, RecvTimeoutError, Sender, SyncSender};
use std::time::{Duration, Instant, SystemTime};

use clap::{Args, Subcommand, ValueEnum};
use serde_json::value::RawValue;

use benchlink_core::ws::Endpoint;

use self::meter::Meter;
use self::pipeline::{Lines, Published, Publisher};
use self::pyjson::Style;
use self::recording::{BadRecord, Loops, Rate, Schedule};
use self::target::{Settings, Target};
use crate::fail::{Fail, EXIT_INVALID};
use benchlink_sandbox::rtm::RtmServer;
use benchlink_std::net::{parse_proxy, TlsOptions};
use benchlink_std::rtm::{
    Callback, Client, ClientObserver, ClientOptions, ClientState, Encoding, Error, History, Mode,
    Reply, Response, SubscribeOptions, SubscriptionData, SubscriptionObserver,
};

mod meter;
mod pipeline;
mod pyjson;
mod recording;
mod target;

/// How long the first connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the last requests and the close may take to go out at the end.
const STOP_WAIT: Duration = Duration::from_secs(5);
/// How long the close may take at the end of a following command (subscribe, view,
/// record): nothing of theirs waits to go out.
const FOLLOW_STOP_WAIT: Duration = Duration::from_millis(50);

/// A role secret: never shown by `Debug`.
#[derive(Clone)]
pub(crate) struct Secret(pub(super) String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Secret, Self::Err> {
        Ok(Secret(s.to_owned()))
    }
}

/// satori-rtm-cli's verbosity: what goes to stderr. 0 errors only, 1 warnings (the
/// default: `Connecting…`, `Connected`, `Disconnected`), 2 info, 3 debug.
#[derive(Debug, Clone, Copy)]
pub(super) struct Log(u8);

impl Log {
    fn at(self, level: u8, message: impl Display) {
        if self.0 >= level {
            eprintln!("{message}");
        }
    }
    pub(super) fn error(self, message: impl Display) {
        self.at(0, message);
    }
    pub(super) fn warn(self, message: impl Display) {
        self.at(1, message);
    }
    pub(super) fn info(self, message: impl Display) {
        self.at(2, message);
    }
    pub(super) fn debug(self, message: impl Display) {
        self.at(3, message);
    }
}

#[derive(Debug, Args)]
#[command(
    infer_long_args = true,
    next_help_heading = "Service and output (any subcommand, anywhere on the line)",
    after_long_help = DIFFERENCES
)]
pub(super) struct RtmArgs {
    /// Stderr detail: 0 errors, 1 warnings (default), 2 info, 3 debug.
    #[arg(short, long, global = true, value_name = "0-3",
          value_parser = clap::value_parser!(u8).range(0..=3))]
    verbosity: Option<u8>,
    /// Service endpoint, `ws://host[:port]` or `wss://…`. Else BENCHLINK_RTM_ENDPOINT,
    /// SATORI_ENDPOINT, the config file, then ws://127.0.0.1:8080 when a server answers
    /// there (`benchlink sandbox`); else a throw-away in-process server.
    #[arg(short, long, global = true, env = "BENCHLINK_RTM_ENDPOINT")]
    pub(super) endpoint: Option<String>,
    /// Application key (else BENCHLINK_RTM_APPKEY, SATORI_APPKEY, the config file; the
    /// local servers' key for a local server).
    #[arg(short, long, global = true, env = "BENCHLINK_RTM_APPKEY")]
    pub(super) appkey: Option<String>,
    /// Authenticate as this role (needs its secret; else BENCHLINK_RTM_ROLE,
    /// SATORI_ROLE_NAME, the config file).
    #[arg(
        short = 'n',
        long = "role_name",
        global = true,
        env = "BENCHLINK_RTM_ROLE",
        visible_alias = "role",
        alias = "role-name"
    )]
    pub(super) role: Option<String>,
    /// The role's secret (else BENCHLINK_RTM_ROLE_SECRET, SATORI_ROLE_SECRET, the config
    /// file).
    #[arg(
        short = 's',
        long = "role_secret",
        global = true,
        env = "BENCHLINK_RTM_ROLE_SECRET",
        hide_env_values = true,
        alias = "role-secret"
    )]
    pub(super) role_secret: Option<Secret>,
    /// Delivery mode of subscribe, view and record: simple (after a reconnect, resume from
    /// now), reliable (resume where it left off, else skip ahead), advanced (default:
    /// resume where it left off, fail rather than skip).
    #[arg(short = 'd', long, global = true, value_enum, alias = "mode")]
    delivery: Option<ModeArg>,
    /// satori-rtm-cli's config file: TOML whose keys are the long options' names
    /// (`appkey = "…"`, `delivery = "simple"`, `prettify_json = true`, which benchlink
    /// honours and satori-rtm-cli ignores), or its JSON credentials form; default
    /// `$XDG_CONFIG_HOME/satori/rtm-cli.config` (`~/.config/…`).
    #[arg(short = 'c', long, global = true, value_name = "FILE")]
    pub(super) config: Option<PathBuf>,
    /// (benchlink) How long to wait for each reply of the server, in seconds.
    #[arg(long, global = true, default_value = "10", value_parser = parse_secs,
          alias = "reply_timeout")]
    reply_timeout: Duration,
    /// (benchlink) Most requests waiting to be sent at once (the SDK's `max_queue_size`),
    /// and, publishing from stdin, most publishes waiting for their acknowledgement (the
    /// pipe's window): the input waits for room at these bounds instead of failing.
    #[arg(long, global = true, default_value = "20000", value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..), alias = "max_queue_size")]
    max_queue_size: u64,
    /// (benchlink) Also trust the certificates of this PEM file for wss:// (a private CA,
    /// or the server's own certificate, trusted as itself even when it is a CA's, as curl
    /// does); SSL_CERT_FILE is honoured too.
    #[arg(long, global = true, value_name = "PEM")]
    cacert: Option<PathBuf>,
    /// (benchlink) Do not verify the server's certificate (wss:// stays encrypted, not
    /// authenticated).
    #[arg(long, global = true, alias = "no_cert_check")]
    no_cert_check: bool,
    /// (benchlink) Reach the service through this HTTPS proxy, `[http://]host:port`
    /// (CONNECT tunnel).
    #[arg(
        long,
        global = true,
        env = "HTTPS_PROXY",
        value_name = "HOST:PORT",
        alias = "https_proxy"
    )]
    https_proxy: Option<String>,
    /// (benchlink) benchlink's JSON lines instead of satori-rtm-cli's output:
    /// subscribe/view `{"channel":…,"message":…}`, publish one
    /// `{"channel":…,"position":…}` per acknowledged message, write/delete the reply,
    /// replay a summary; no `Sending input…` banner.
    #[arg(long, global = true)]
    jsonl: bool,
    /// (benchlink) How PDUs travel: JSON text, or CBOR (the server must select the `cbor` WebSocket
    /// subprotocol). Messages are printed and read as JSON either way. An extension:
    /// satori-rtm-cli always speaks JSON.
    #[arg(long, global = true, value_enum, default_value = "json")]
    protocol: ProtocolArg,
    #[command(subcommand)]
    command: RtmCommand,
}

/// Where `benchlink rtm` departs from satori-rtm-cli 1.5.3 on purpose (its `--help`).
const DIFFERENCES: &str = "\
Differences from satori-rtm-cli 1.5.3:
  - An invalid value (of an option or a config file key) exits 4, not 1, with the
    message on stderr; usage errors exit 1 as there. Size limits refuse what they do
    not understand (`1.5k`) instead of dropping it.
  - --count with --age exits 1 for subscribe and record, from the config file too
    (a --count or --age on the command line replaces both of the file's).
  - A publish line (or write value) that starts with {, [ or \" must be valid JSON,
    else the command stops with exit 4 before sending it; --string sends text as is.
    Input lines are limited to 16 MiB.
  - A refused publish, a failed subscription, or acknowledgements still missing after
    --reply-timeout exit 1; satori-rtm-cli exits 0 or 130.
  - Record limits stop right after the line that reaches them (no overshoot).
  - Replay: a JSON line that is not a record exits 4 (satori-rtm-cli exits 0);
    --loop with stdin is refused; rate 0x is refused; a bare factor (2) is a rate.
  - A role name without its secret (or the reverse) exits 1 instead of skipping auth.
  - prettify_json and disable_acks in the config file are honoured.
  - The role secret read from the config file is echoed as ***.
  - Subcommand options go after the subcommand word (global ones go anywhere).
  - Ctrl-C ends a command by the signal (status 130 in a shell), not with 0; record
    flushes every line, so the file stays valid.
  - No endpoint anywhere: a local server (see --endpoint), not open-data.api.satori.com.
  - (benchlink) search, --jsonl, --only, --max, --timeout, --string, a MESSAGE
    argument for publish, TLS and proxy options; replay reads benchlink's older
    {\"t_ms\",\"channel\",\"message\"} recordings too.";

#[derive(Debug, Subcommand)]
enum RtmCommand {
    /// Print the messages of channels, `<channel>: <json>` per message, until
    /// interrupted (or --max, --timeout).
    #[command(infer_long_args = true)]
    Subscribe(SubscribeArgs),
    /// Subscribe to a view (stream SQL, `select * from CHANNEL …`) and print its output,
    /// `view: <json>` per message.
    #[command(infer_long_args = true)]
    View(ViewArgs),
    /// Publish each line of stdin (or MESSAGE): JSON when it is JSON, else a string. A
    /// line that starts like JSON ({, [ or ") must be valid JSON (else exit 4); --string
    /// publishes lines as text.
    #[command(infer_long_args = true)]
    Publish(PublishArgs),
    /// Print a key's value (`null` when never written).
    #[command(infer_long_args = true)]
    Read(ReadArgs),
    /// Write a key's value: JSON when it is JSON, else a string.
    #[command(infer_long_args = true)]
    Write(WriteArgs),
    /// Delete a key's value.
    #[command(infer_long_args = true)]
    Delete(DeleteArgs),
    /// Record the messages of channels in satori-rtm-cli's format: one JSON line per
    /// batch received, `{"subscription_id", "position", "messages", "timestamp"}`.
    #[command(infer_long_args = true)]
    Record(RecordArgs),
    /// Publish a recording again (satori-rtm-cli's format, or benchlink's older one) from
    /// -i FILE or stdin, keeping its relative timing. Lines that are not JSON are
    /// reported and skipped; a JSON line that is not a record stops the replay (exit 4).
    #[command(infer_long_args = true)]
    Replay(ReplayArgs),
    /// (benchlink) Print the channels whose names start with PREFIX, as a JSON array.
    #[command(infer_long_args = true)]
    Search(SearchArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ProtocolArg {
    /// JSON in text frames (the default).
    Json,
    /// CBOR in binary frames.
    Cbor,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModeArg {
    /// Resume from "now" after a reconnect.
    Simple,
    /// Resume where it left off when possible, else fast-forward.
    Reliable,
    /// Resume where it left off, fail rather than skip messages.
    Advanced,
}

impl FromStr for ModeArg {
    type Err = String;
    fn from_str(s: &str) -> Result<ModeArg, String> {
        <ModeArg as ValueEnum>::from_str(s, false)
            .map_err(|_| format!("Invalid delivery mode {s} (simple, reliable or advanced)"))
    }
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Simple => Mode::Simple,
            ModeArg::Reliable => Mode::Reliable,
            ModeArg::Advanced => Mode::Advanced,
        }
    }
}

/// What the protocol's `only` can ask for.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Only {
    /// Skip a message equal to the channel's previous one.
    #[value(name = "value_changes")]
    ValueChanges,
}

/// Where a subscription starts and what it delivers (subscribe, view, record).
#[derive(Debug, Args)]
struct StartArgs {
    /// Start at this position (`publish --jsonl` prints them); for every channel.
    #[arg(long)]
    position: Option<String>,
    /// Begin with the last N messages (subscribe and record: not with --age).
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// Begin with the messages of the last S seconds (view: wins over --count).
    #[arg(long, value_name = "S")]
    age: Option<u64>,
    /// (benchlink) `--only value_changes`: deliver a message only when it differs from
    /// the channel's previous one (the protocol's `only` field).
    #[arg(long, value_enum, value_name = "value_changes")]
    only: Option<Only>,
}

/// How subscribe and view print.
#[derive(Debug, Args)]
struct ShowArgs {
    /// Indent each printed value by 2 spaces.
    #[arg(short = 'j', long = "prettify_json", alias = "prettify-json")]
    prettify_json: bool,
    /// (benchlink) Stop after N messages.
    #[arg(long, value_name = "N")]
    max: Option<u64>,
    /// (benchlink) Stop after S seconds; with --max, ending before N messages exits 1.
    #[arg(long, value_name = "S", value_parser = parse_secs)]
    timeout: Option<Duration>,
}

#[derive(Debug, Args)]
struct SubscribeArgs {
    /// The channels (messages of several channels interleave in arrival order).
    #[arg(required = true)]
    channels: Vec<String>,
    #[command(flatten)]
    start: StartArgs,
    #[command(flatten)]
    show: ShowArgs,
    /// (benchlink, older form of `view`) A view under the one subscription id given.
    #[arg(long, value_name = "QUERY")]
    filter: Option<String>,
}

#[derive(Debug, Args)]
struct ViewArgs {
    /// The query, e.g. "select * from `animals` where who = 'zebra'".
    query: String,
    /// Aggregate over this many seconds.
    #[arg(short, long, value_name = "S")]
    period: Option<u32>,
    #[command(flatten)]
    start: StartArgs,
    #[command(flatten)]
    show: ShowArgs,
}

/// Whether requests ask for a reply.
#[derive(Debug, Args)]
struct AcksArg {
    /// Send without asking for acknowledgements (fire and forget: refusals go unseen).
    #[arg(short = 'q', long = "disable_acks", alias = "disable-acks")]
    disable_acks: bool,
}

#[derive(Debug, Args)]
struct PublishArgs {
    /// The channel.
    channel: String,
    /// (benchlink) Publish this one message instead of reading stdin (`-`: stdin).
    message: Option<String>,
    #[command(flatten)]
    acks: AcksArg,
    /// (benchlink) Publish every line (or MESSAGE) as a JSON string, as it is.
    #[arg(long)]
    string: bool,
}

#[derive(Debug, Args)]
struct ReadArgs {
    /// The key (a channel).
    key: String,
    /// Indent the value by 2 spaces.
    #[arg(short = 'j', long = "prettify_json", alias = "prettify-json")]
    prettify_json: bool,
}

#[derive(Debug, Args)]
struct WriteArgs {
    /// The key (a channel).
    key: String,
    /// The value: JSON when it is JSON, else a string.
    value: String,
    #[command(flatten)]
    acks: AcksArg,
    /// (benchlink) Write VALUE as a JSON string, as it is.
    #[arg(long)]
    string: bool,
}

#[derive(Debug, Args)]
struct DeleteArgs {
    /// The key (a channel).
    key: String,
    #[command(flatten)]
    acks: AcksArg,
}

#[derive(Debug, Args)]
struct SearchArgs {
    /// The start of the channel names.
    prefix: String,
}

#[derive(Debug, Args)]
struct RecordArgs {
    /// The channels (lines of several channels interleave in arrival order).
    #[arg(required = true)]
    channels: Vec<String>,
    /// The recording (default and `-`: stdout); replaced if it exists.
    #[arg(short, long = "output_file", alias = "output", value_name = "FILE")]
    output_file: Option<PathBuf>,
    /// Stop once the lines written add up to this many bytes (e.g. 500k, 1M).
    #[arg(long = "size_limit_in_bytes", value_name = "SIZE")]
    size_limit: Option<Size>,
    /// Stop after this many seconds (e.g. 60, 1k).
    #[arg(
        long = "time_limit_in_seconds",
        alias = "duration",
        value_name = "SIZE"
    )]
    time_limit: Option<Size>,
    /// Stop once this many messages are recorded (a line may hold several).
    #[arg(long = "message_count_limit", alias = "max", value_name = "SIZE")]
    count_limit: Option<Size>,
    #[command(flatten)]
    start: StartArgs,
}

#[derive(Debug, Args)]
struct ReplayArgs {
    /// The recording to play (default and `-`: stdin).
    #[arg(short, long = "input_file", value_name = "FILE")]
    input_file: Option<PathBuf>,
    /// (benchlink, older form of -i) The recording.
    #[arg(value_name = "FILE", conflicts_with = "input_file")]
    file: Option<PathBuf>,
    /// Play the file N times (or inf); needs a file, stdin is read once.
    #[arg(short, long = "loop", value_name = "N|inf")]
    loops: Option<Loops>,
    /// Speed: `<factor>x` (2x twice as fast, 0.5x half), or `unlimited` (no waiting).
    #[arg(short, long, value_name = "RATE", alias = "speed")]
    rate: Option<Rate>,
    /// Publish everything to this channel instead of each record's own.
    #[arg(
        long = "override_channel",
        alias = "override-channel",
        value_name = "CHANNEL"
    )]
    override_channel: Option<String>,
    /// (benchlink) Publish to P + each record's channel.
    #[arg(long, default_value = "", value_name = "P", alias = "channel_prefix")]
    channel_prefix: String,
    #[command(flatten)]
    acks: AcksArg,
}

/// A limit of `record`, in satori-rtm-cli's size syntax (digits and k, m, g).
#[derive(Debug, Clone, Copy)]
struct Size(u64);

impl FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Size, String> {
        recording::parse_size(s).map(Size)
    }
}

fn parse_secs(s: &str) -> Result<Duration, String> {
    s.parse::<f64>()
        .ok()
        .and_then(|x| Duration::try_from_secs_f64(x).ok())
        .ok_or_else(|| format!("expected seconds (a number ≥ 0), got {s:?}"))
}

pub(super) fn run(args: RtmArgs) -> ExitCode {
    match execute(args) {
        Ok(code) => ExitCode::from(code),
        Err(Fail(code, message)) => {
            eprintln!("error: {message}");
            ExitCode::from(code)
        }
    }
}

/// How a line of input or a value argument becomes a message: text that starts like
/// JSON (`{`, `[`, `"`) must be JSON; other text is itself when it is JSON (`42`,
/// `true`), else a JSON string of it; with `as_string`, always a string.
///
/// JSON is checked by the same validator the client checks a message with before it
/// sends it (`benchlink_core::json`), so a line is read once, and a valid line is
/// passed on as it is, without a copy.
fn message_json(text: &str, as_string: bool) -> Result<Cow<'_, str>, String> {
    if as_string {
        return Ok(Cow::Owned(serde_json::Value::from(text).to_string()));
    }
    let trimmed = text.trim();
    match benchlink_core::json::parse(trimmed, benchlink_core::json::MAX_DEPTH) {
        Ok(_) => Ok(Cow::Borrowed(trimmed)),
        Err(e) if trimmed.starts_with(['{', '[', '"']) => Err(format!(
            "{text:?} is not valid JSON ({e}); --string publishes text as it is"
        )),
        Err(_) => Ok(Cow::Owned(serde_json::Value::from(text).to_string())),
    }
}

/// The command line merged with the config file, checked before anything is sent.
struct Ctx {
    log: Log,
    mode: Mode,
    timeout: Duration,
    jsonl: bool,
    /// Most publishes waiting for their acknowledgement at once: the client's
    /// `max_queue_size` (`--max-queue-size`, the SDK contract's 20,000 by default), so
    /// that the pipe stays full across a slow link (the rate is this window over the
    /// round trip); past it the producer waits.
    window: usize,
}

fn execute(args: RtmArgs) -> Result<u8, Fail> {
    let config = Settings::read(args.config.as_deref());
    let verbosity = config.or(args.verbosity, "verbosity")?.unwrap_or(1);
    if verbosity > 3 {
        return Err(Fail(
            EXIT_INVALID,
            format!("Unexpected verbosity value {verbosity} (0 to 3)"),
        ));
    }
    let ctx = Ctx {
        log: Log(verbosity),
        mode: config
            .or(args.delivery, "delivery")?
            .unwrap_or(ModeArg::Advanced)
            .into(),
        timeout: args.reply_timeout,
        jsonl: args.jsonl,
        window: usize::try_from(args.max_queue_size).unwrap_or(usize::MAX),
    };
    let connect = || Session::connect(&args, &config, ctx.log);
    match &args.command {
        RtmCommand::Subscribe(a) => {
            let wanted = subscriptions(&a.channels, &a.start, a.filter.as_deref(), &config)?;
            show(connect, wanted, &a.show, &config, &ctx)
        }
        RtmCommand::View(a) => {
            let mut options = subscribe_options(&a.start, true, &config)?;
            options.filter = Some(a.query.clone());
            options.period = config.or(a.period, "period")?;
            let wanted = vec![("view".to_owned(), options)];
            show(connect, wanted, &a.show, &config, &ctx)
        }
        RtmCommand::Publish(a) => publish(connect, a, &config, &ctx),
        RtmCommand::Read(a) => {
            let pretty = config.flag(a.prettify_json, "prettify_json")?;
            let session = connect()?;
            let client = &session.client;
            let reply = call("read", ctx.timeout, |cb| {
                client.read(&a.key, None, Some(cb))
            })?;
            #[derive(serde::Deserialize)]
            struct Body<'a> {
                #[serde(borrow)]
                message: Option<&'a RawValue>,
            }
            let body: Body<'_> = serde_json::from_str(&reply.body)
                .map_err(|e| Fail(1, format!("a read reply without a message: {e}")))?;
            let value = body.message.map_or("null", RawValue::get);
            let text = if ctx.jsonl {
                one_line(value)
            } else {
                pretty_value(value, pretty).map_err(|e| Fail(1, e.to_string()))?
            };
            println!("{text}");
            Ok(0)
        }
        RtmCommand::Write(a) => {
            let value = message_json(&a.value, a.string)
                .and_then(|v| RawValue::from_string(v.into_owned()).map_err(|e| e.to_string()))
                .map_err(|e| Fail(EXIT_INVALID, e))?;
            let acks = !config.flag(a.acks.disable_acks, "disable_acks")?;
            change(connect, "write", &a.key, acks, &ctx, |client, cb| {
                client.write(&a.key, &value, cb)
            })
        }
        RtmCommand::Delete(a) => {
            let acks = !config.flag(a.acks.disable_acks, "disable_acks")?;
            change(connect, "delete", &a.key, acks, &ctx, |client, cb| {
                client.delete(&a.key, cb)
            })
        }
        RtmCommand::Search(a) => {
            let session = connect()?;
            let channels = session.search(&a.prefix, ctx.timeout)?;
            println!("{}", serde_json::Value::from(channels));
            Ok(0)
        }
        RtmCommand::Record(a) => record(connect, a, &config, &ctx),
        RtmCommand::Replay(a) => replay(connect, a, &config, &ctx),
    }
}

/// `write` and `delete`: one request, acknowledged unless `acks` is off; prints nothing
/// (with --jsonl, the reply).
fn change(
    connect: impl FnOnce() -> Result<Session, Fail>,
    op: &str,
    key: &str,
    acks: bool,
    ctx: &Ctx,
    send: impl FnOnce(&Client, Option<Callback>) -> Result<(), Error>,
) -> Result<u8, Fail> {
    let session = connect()?;
    if acks {
        let reply = call(op, ctx.timeout, |cb| send(&session.client, Some(cb)))?;
        if ctx.jsonl {
            print_reply(key, &reply);
        }
    } else {
        send(&session.client, None)?;
    }
    Ok(0)
}

/// The subscribe options of `start`, the config file filling in what the command line
/// leaves out (`--count`/`--age` from the file only when the command line has neither).
fn subscribe_options(
    start: &StartArgs,
    count_with_age: bool,
    config: &Settings,
) -> Result<SubscribeOptions, Fail> {
    let (count, age) = if start.count.is_some() || start.age.is_some() {
        (start.count, start.age)
    } else {
        (config.or(None, "count")?, config.or(None, "age")?)
    };
    let history = match (count, age) {
        (Some(_), Some(_)) if !count_with_age => {
            return Err(Fail(
                1,
                "--count and --age cannot be used together: choose one (satori-rtm-cli \
                 refuses both too; `view` takes both, and the age wins)"
                    .into(),
            ))
        }
        (_, Some(age)) => Some(History::Age(age)),
        (Some(count), None) => Some(History::Count(count)),
        (None, None) => None,
    };
    Ok(SubscribeOptions {
        position: config.or(start.position.clone(), "position")?,
        history,
        only_value_changes: start.only.is_some(),
        ..SubscribeOptions::default()
    })
}

/// The subscriptions of subscribe and record: one per channel, or one view.
fn subscriptions(
    channels: &[String],
    start: &StartArgs,
    filter: Option<&str>,
    config: &Settings,
) -> Result<Vec<(String, SubscribeOptions)>, Fail> {
    let options = subscribe_options(start, false, config)?;
    if let Some(filter) = filter {
        let [id] = channels else {
            return Err(Fail(1, "--filter needs exactly one subscription id".into()));
        };
        let options = SubscribeOptions {
            filter: Some(filter.to_owned()),
            ..options
        };
        return Ok(vec![(id.clone(), options)]);
    }
    Ok(channels
        .iter()
        .map(|c| (c.clone(), options.clone()))
        .collect())
}

/// A value as satori-rtm-cli prints it.
fn pretty_value(json: &str, indent: bool) -> Result<String, serde_json::Error> {
    pyjson::dumps(json, if indent { Style::Indent } else { Style::Line })
}

/// `subscribe` and `view`.
fn show(
    connect: impl FnOnce() -> Result<Session, Fail>,
    wanted: Vec<(String, SubscribeOptions)>,
    a: &ShowArgs,
    config: &Settings,
    ctx: &Ctx,
) -> Result<u8, Fail> {
    let pretty = config.flag(a.prettify_json, "prettify_json")?;
    let session = connect()?;
    // A deadline too far to represent is no deadline.
    let deadline = a.timeout.and_then(|t| Instant::now().checked_add(t));
    let max = a.max.unwrap_or(u64::MAX);
    let mut count = 0u64;
    let out = &mut io::stdout().lock();
    let ended = if max == 0 {
        Ended::Stopped
    } else {
        session.follow(wanted, ctx, deadline, |data| {
            let id = data.subscription_id();
            for m in data.messages() {
                if ctx.jsonl {
                    writeln!(out, "{}", data_line(&id, m))?;
                } else {
                    let value = pretty_value(m, pretty).map_err(io::Error::other)?;
                    writeln!(out, "{id}: {value}")?;
                }
                count += 1;
                if count == max {
                    break;
                }
            }
            out.flush()?;
            Ok(if count == max { Flow::Stop } else { Flow::Go })
        })?
    };
    match (ended, a.max) {
        (Ended::Deadline, Some(max)) if count < max => {
            Err(Fail(1, format!("timed out with {count} of {max} messages")))
        }
        // Stdout closed (`| head`): the reader has what it wanted.
        _ => Ok(0),
    }
}

/// `publish`.
fn publish(
    connect: impl FnOnce() -> Result<Session, Fail>,
    a: &PublishArgs,
    config: &Settings,
    ctx: &Ctx,
) -> Result<u8, Fail> {
    let as_string = a.string;
    let single = match a.message.as_deref().filter(|m| *m != "-") {
        Some(m) => Some(
            message_json(m, as_string)
                .map_err(|e| Fail(EXIT_INVALID, e))?
                .into_owned(),
        ),
        None => None,
    };
    let acks = !config.flag(a.acks.disable_acks, "disable_acks")?;
    let session = connect()?;
    let channel = a.channel.clone();
    if single.is_none() && !ctx.jsonl {
        println!("Sending input to {channel}, press C-d or C-c to stop");
        let _ = io::stdout().flush();
    }
    let log = ctx.log;
    let produce = move |p: &mut Publisher| match single {
        Some(json) => p.publish(&channel, &json),
        None => {
            let mut meter = Meter::start("published");
            let mut input = Lines::new(io::stdin().lock(), "stdin");
            while !p.refused() {
                match p.publish_lines(&mut input, &channel, as_string)? {
                    Some(n) => meter.add(usize::try_from(n).unwrap_or(usize::MAX)),
                    None => break,
                }
            }
            meter.finish(log);
            Ok(())
        }
    };
    // Acknowledgements printed as they settle (`--jsonl`), one write per burst.
    let published = session.pipeline(ctx, acks, ctx.jsonl, produce);
    Ok(u8::from(published?.failed > 0))
}

/// `record`.
fn record(
    connect: impl FnOnce() -> Result<Session, Fail>,
    a: &RecordArgs,
    config: &Settings,
    ctx: &Ctx,
) -> Result<u8, Fail> {
    let wanted = subscriptions(&a.channels, &a.start, None, config)?;
    let size = config.or(a.size_limit, "size_limit_in_bytes")?;
    let time = config.or(a.time_limit, "time_limit_in_seconds")?;
    let messages = config.or(a.count_limit, "message_count_limit")?;
    let path = config
        .or(a.output_file.clone(), "output_file")?
        .filter(|p| p.as_os_str() != "-");
    let name = path
        .as_ref()
        .map_or("stdout".into(), |p| p.display().to_string());
    let mut out: Box<dyn Write> = match &path {
        None => Box::new(io::stdout()),
        Some(p) => Box::new(BufWriter::new(
            File::create(p).map_err(|e| Fail(1, format!("{name}: {e}")))?,
        )),
    };
    let session = connect()?;
    let log = ctx.log;
    if let Some(Size(n)) = size {
        log.info(format_args!("Log size limit: {n} bytes"));
    }
    if let Some(Size(n)) = messages {
        log.info(format_args!("Log size limit: {n} messages"));
    }
    if let Some(Size(n)) = time {
        log.info(format_args!("Time limit: {n} seconds"));
    }
    let deadline = time.and_then(|Size(s)| Instant::now().checked_add(Duration::from_secs(s)));
    let (mut bytes_left, mut messages_left) = (size.map(|s| s.0), messages.map(|s| s.0));
    let mut meter = Meter::start("recorded");
    let ended = session.follow(wanted, ctx, deadline, |data| {
        let timestamp = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let batch = data.messages();
        let line = recording::line(
            &data.subscription_id(),
            data.position().as_deref(),
            &batch,
            timestamp,
        )
        .map_err(io::Error::other)?;
        writeln!(out, "{line}")?;
        out.flush()?;
        meter.add(batch.len());
        // Stops right after the line that reaches a limit (satori-rtm-cli overshoots).
        let spend = |left: &mut Option<u64>, used: usize, why: &str| {
            let Some(left) = left else { return false };
            *left = left.saturating_sub(used as u64);
            if *left == 0 {
                log.info(why);
            }
            *left == 0
        };
        let full = spend(
            &mut messages_left,
            batch.len(),
            "Message count limit reached",
        ) | spend(&mut bytes_left, line.len(), "Log size limit reached");
        Ok(if full { Flow::Stop } else { Flow::Go })
    })?;
    meter.finish(log);
    match ended {
        Ended::Output(e) => Err(Fail(1, format!("{name}: {e}"))),
        Ended::Deadline => {
            log.info("Time limit reached");
            Ok(0)
        }
        Ended::Stopped => Ok(0),
    }
}

/// Where `replay` reads.
#[derive(Clone)]
enum Input {
    Stdin,
    File(PathBuf),
}

impl Input {
    fn open(&self) -> Result<Lines<Box<dyn Read>>, Fail> {
        let input: Box<dyn Read> = match self {
            Input::Stdin => Box::new(io::stdin().lock()),
            Input::File(p) => {
                Box::new(File::open(p).map_err(|e| Fail(1, format!("{}: {e}", p.display())))?)
            }
        };
        Ok(Lines::new(input, self.name()))
    }

    fn name(&self) -> String {
        match self {
            Input::Stdin => "stdin".into(),
            Input::File(p) => p.display().to_string(),
        }
    }
}

/// `replay`.
fn replay(
    connect: impl FnOnce() -> Result<Session, Fail>,
    a: &ReplayArgs,
    config: &Settings,
    ctx: &Ctx,
) -> Result<u8, Fail> {
    let input = match config.or(a.input_file.clone().or(a.file.clone()), "input_file")? {
        Some(p) if p.as_os_str() != "-" => Input::File(p),
        _ => Input::Stdin,
    };
    let loops = config.or(a.loops, "loop")?;
    if matches!(input, Input::Stdin) && loops.is_some_and(|l| l != Loops::Times(1)) {
        // satori-rtm-cli accepts it and plays stdin once.
        return Err(Fail(
            1,
            "--loop needs --input_file: stdin is read once".into(),
        ));
    }
    let loops = loops.unwrap_or(Loops::Times(1));
    let rate = config.or(a.rate, "rate")?.unwrap_or(Rate::Times(1.0));
    let target = config.or(a.override_channel.clone(), "override_channel")?;
    let prefix = a.channel_prefix.clone();
    let acks = !config.flag(a.acks.disable_acks, "disable_acks")?;
    if let Input::File(p) = &input {
        // Said now rather than after connecting.
        File::open(p).map_err(|e| Fail(1, format!("{}: {e}", p.display())))?;
    }
    let session = connect()?;
    let log = ctx.log;
    let started = Instant::now();
    let produce = move |p: &mut Publisher| {
        let name = input.name();
        let mut cycle = 0u64;
        while loops != Loops::Times(cycle) {
            let mut schedule = Schedule::new(rate);
            let mut lines = input.open()?;
            while let Some(line) = lines.next_line() {
                if p.refused() {
                    return Ok(());
                }
                let (n, line) = line?;
                let at = || format!("{name}:{n}");
                let record = match recording::parse(line) {
                    Ok(r) => r,
                    Err(BadRecord::NotJson) => {
                        log.error(format_args!("Bad line: {line}"));
                        continue;
                    }
                    Err(BadRecord::Invalid(why)) => {
                        return Err(Fail(
                            EXIT_INVALID,
                            format!("Exception: {}: not a recording line: {why}", at()),
                        ))
                    }
                };
                let channel = match (&target, record.channel) {
                    (Some(t), _) => t.clone(),
                    (None, Some(c)) => format!("{prefix}{c}"),
                    (None, None) => {
                        return Err(Fail(
                            EXIT_INVALID,
                            format!(
                                "Exception: {}: no \"subscription_id\" (and no \
                                 --override_channel)",
                                at()
                            ),
                        ))
                    }
                };
                let wait = schedule.wait(record.timestamp, Instant::now());
                if !wait.is_zero() {
                    std::thread::sleep(wait);
                }
                for m in record.messages {
                    p.publish(&channel, m.get())?;
                }
            }
            cycle += 1;
            if matches!(input, Input::Stdin) {
                break;
            }
            log.warn(format_args!("Messages published: {}", p.sent));
            match loops {
                Loops::Times(n) if n > cycle => {
                    log.warn(format_args!("Playback cycle finished, {} to go", n - cycle));
                }
                Loops::Forever => log.warn("Playback cycle finished"),
                Loops::Times(_) => {}
            }
        }
        Ok(())
    };
    let published = session.pipeline(ctx, acks, false, produce)?;
    let took = started.elapsed();
    log.warn(format_args!(
        "Playback finished, total time: {:.2} seconds",
        took.as_secs_f64()
    ));
    if ctx.jsonl {
        let summary = serde_json::json!({
            "published": published.sent - published.failed,
            "failed": published.failed,
            "duration_ms": u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        });
        println!("{summary}");
    }
    Ok(u8::from(published.failed > 0))
}

/// `message` on one line (JSON allows raw newlines only as whitespace).
fn one_line(message: &str) -> String {
    if message.contains(['\n', '\r']) {
        serde_json::from_str::<serde_json::Value>(message)
            .map(|v| v.to_string())
            .unwrap_or_else(|_| message.replace(['\n', '\r'], " "))
    } else {
        message.to_owned()
    }
}

/// `{"channel":…,"message":…}` with the message's JSON as received.
fn data_line(channel: &str, message: &str) -> String {
    format!(
        "{{\"channel\":{},\"message\":{}}}",
        serde_json::Value::from(channel),
        one_line(message)
    )
}

/// Prints a reply's body with the channel added.
fn print_reply(channel: &str, reply: &Reply) {
    let mut body = match reply.json() {
        serde_json::Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    body.insert("channel".into(), channel.into());
    println!("{}", serde_json::Value::Object(body));
}

/// Sends one `rtm/<op>` request with a callback and waits up to `timeout` for its reply;
/// failures say so as satori-rtm-cli does (`rtm/read operation failed: …`).
fn call(
    op: &str,
    timeout: Duration,
    send: impl FnOnce(Callback) -> Result<(), Error>,
) -> Result<Reply<'static>, Fail> {
    let (callback, rx) = Response::channel();
    send(callback)?;
    let failed = |why: String| Fail(1, format!("rtm/{op} operation {why}"));
    match rx.recv_timeout(timeout) {
        Ok(Response::Reply(r)) if r.is_ok() => Ok(r),
        Ok(Response::Reply(r)) => Err(failed(format!("failed: {}", r.body))),
        Ok(Response::Timeout) | Err(RecvTimeoutError::Timeout) => Err(failed("timed out".into())),
        Ok(Response::Disconnected) => Err(failed("failed: the connection was lost".into())),
        Err(RecvTimeoutError::Disconnected) => Err(Error::Disposed.into()),
    }
}

/// Connection state changes the command waits for.
enum Conn {
    Connected,
    Stopped,
}

/// Says on stderr what the connection does, as satori-rtm-cli does (`Connected`,
/// `Disconnected`), with the reason of a drop; tells the command when it is connected.
struct Watch {
    states: Sender<Conn>,
    log: Log,
    /// Why the last connection ended, until the reconnect is announced.
    why: Option<String>,
}

impl ClientObserver for Watch {
    fn on_enter_connected(&mut self) {
        self.log.warn("Connected");
        let _ = self.states.send(Conn::Connected);
    }
    fn on_leave_connected(&mut self) {
        self.log.warn("Disconnected");
    }
    fn on_link_closed(&mut self, why: &str) {
        self.log.debug(format_args!("connection closed: {why}"));
        self.why = Some(why.to_owned());
    }
    fn on_enter_awaiting(&mut self) {
        match self.why.take() {
            Some(why) => self.log.warn(format_args!(
                "Reconnecting: the connection was lost ({why})"
            )),
            None => self.log.warn("Reconnecting: the connection was lost"),
        }
    }
    fn on_enter_stopped(&mut self) {
        let _ = self.states.send(Conn::Stopped);
    }
    fn on_fast_forward(&mut self, channel: &str) {
        self.log.warn(format_args!(
            "the server skipped messages of {channel} (fast-forward)"
        ));
    }
}

/// A connected (and authenticated) client, and the local server it talks to when no
/// endpoint was given.
struct Session {
    client: Client,
    _local: Option<RtmServer>,
    log: Log,
    /// How long the close may take at the end.
    stop_wait: std::cell::Cell<Duration>,
}

impl Drop for Session {
    fn drop(&mut self) {
        // Stop first: its close goes out behind the requests not yet written (those sent
        // without acknowledgement included), where dispose alone would drop them. Then,
        // before the local server goes, dispose and join the I/O thread.
        let started = Instant::now();
        if self.client.stop().is_ok() {
            self.client
                .wait_for_state(|s| s == ClientState::Stopped, self.stop_wait.get());
        }
        let _ = self.client.dispose();
        self.log.debug(format_args!(
            "closed and disposed in {} us",
            started.elapsed().as_micros()
        ));
    }
}

/// What a subscribing command's output says after each batch.
enum Flow {
    Go,
    Stop,
}

/// How [`Session::follow`] ended.
enum Ended {
    /// The output said stop.
    Stopped,
    /// The deadline passed.
    Deadline,
    /// The output failed (stdout closed, disk full).
    Output(io::Error),
}

impl Session {
    /// Runs `produce` on its own thread with a [`Publisher`], `ctx.window` publishes in
    /// flight at most (see [`pipeline::run`]); with `print_acks`, every acknowledgement
    /// is printed in order as `{"channel":…,"position":…}`.
    fn pipeline(
        &self,
        ctx: &Ctx,
        acks: bool,
        print_acks: bool,
        produce: impl FnOnce(&mut Publisher) -> Result<(), Fail> + Send + 'static,
    ) -> Result<Published, Fail> {
        pipeline::run(
            &self.client,
            ctx.window,
            ctx.timeout,
            acks,
            print_acks,
            produce,
        )
    }

    fn connect(args: &RtmArgs, config: &Settings, log: Log) -> Result<Session, Fail> {
        let Target {
            endpoint,
            appkey,
            auth,
            local,
        } = Target::resolve(args, config, log)?;
        if let Err(e) = Endpoint::parse(&endpoint) {
            return Err(Fail(EXIT_INVALID, format!("--endpoint {endpoint:?}: {e}")));
        }
        let proxy = args
            .https_proxy
            .clone()
            .or_else(|| std::env::var("https_proxy").ok())
            .filter(|p| !p.is_empty());
        let mut options = ClientOptions::new(endpoint.clone(), appkey.clone());
        // A command fails at once on an endpoint that does not answer (as satori-rtm-cli
        // does), instead of retrying until its connect timeout.
        options.retry_first_connect = false;
        options.max_queue_size = usize::try_from(args.max_queue_size).unwrap_or(usize::MAX);
        options.encoding = match args.protocol {
            ProtocolArg::Json => Encoding::Json,
            ProtocolArg::Cbor => Encoding::Cbor,
        };
        options.transport.https_proxy = match proxy {
            Some(p) => Some(parse_proxy(&p).map_err(|e| Fail(EXIT_INVALID, e))?),
            None => None,
        };
        options.transport.tls =
            TlsOptions::from_command_line(args.cacert.as_deref(), args.no_cert_check)
                .map_err(|e| Fail(1, e.to_string()))?;
        log.warn(format_args!(
            "Connecting to {endpoint} using appkey {appkey}"
        ));
        let (tx, rx) = mpsc::channel();
        let watch = Watch {
            states: tx,
            log,
            why: None,
        };
        let client = Client::with_observer(options, Some(Box::new(watch)))?;
        let session = Session {
            client,
            _local: local,
            log,
            stop_wait: std::cell::Cell::new(STOP_WAIT),
        };
        session.client.start()?;
        match rx.recv_timeout(CONNECT_TIMEOUT) {
            Ok(Conn::Connected) => {}
            Ok(Conn::Stopped) | Err(RecvTimeoutError::Disconnected) => {
                let why = session
                    .client
                    .last_connecting_error()
                    .map_or_else(|| "connection closed".into(), |e| e.to_string());
                return Err(Fail(1, format!("could not connect to {endpoint}: {why}")));
            }
            Err(RecvTimeoutError::Timeout) => {
                return Err(Fail(
                    1,
                    format!("could not connect to {endpoint} within {CONNECT_TIMEOUT:?}"),
                ))
            }
        }
        if let Some((role, Secret(secret))) = &auth {
            session
                .client
                .authenticate_sync(role, secret, args.reply_timeout)
                .map_err(|e| {
                    let why = match e {
                        Error::Auth(why) => why,
                        other => other.to_string(),
                    };
                    Fail(1, format!("authentication as role {role:?} failed: {why}"))
                })?;
        }
        Ok(session)
    }

    fn search(&self, prefix: &str, timeout: Duration) -> Result<Vec<String>, Fail> {
        let (callback, rx) = Response::channel();
        self.client.search(prefix, callback)?;
        let mut channels = Vec::new();
        // One deadline for the whole search, however many parts arrive meanwhile.
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let left = deadline.map_or(timeout, |d| d.saturating_duration_since(Instant::now()));
            let next = if left.is_zero() {
                Err(RecvTimeoutError::Timeout)
            } else {
                rx.recv_timeout(left)
            };
            let reply = match next {
                Ok(response) => response.into_result()?,
                Err(RecvTimeoutError::Timeout) => return Err(Error::Timeout.into()),
                Err(RecvTimeoutError::Disconnected) => return Err(Error::Disposed.into()),
            };
            if let Some(list) = reply.json().get("channels").and_then(|c| c.as_array()) {
                channels.extend(list.iter().filter_map(|c| c.as_str().map(str::to_owned)));
            }
            if reply.action.ends_with("/ok") {
                return Ok(channels);
            }
        }
    }

    /// Opens the subscriptions `wanted` (key, options) and hands every batch of
    /// messages to `output` until it says stop, the deadline passes, or a subscription
    /// fails (an error).
    fn follow(
        &self,
        wanted: Vec<(String, SubscribeOptions)>,
        ctx: &Ctx,
        deadline: Option<Instant>,
        mut output: impl FnMut(&SubscriptionData) -> io::Result<Flow>,
    ) -> Result<Ended, Fail> {
        // Nothing of a following command waits to go out at the end: the close (which
        // a flooding server answers behind megabytes of data) is not waited for long.
        self.stop_wait.set(FOLLOW_STOP_WAIT);
        // Bounded: when the output is slower than the server, the client's thread waits
        // here, stops reading the socket, and TCP slows the server down (nothing grows).
        // Leaving this function drops the receiver, which releases a waiting sender.
        let (tx, rx) = mpsc::sync_channel(FOLLOW_BACKLOG);
        match wanted.as_slice() {
            [(key, _)] => ctx
                .log
                .info(format_args!("Subscribing to {key}, press C-c to stop")),
            many => ctx.log.info(format_args!(
                "Subscribing to {} channels, press C-c to stop",
                many.len()
            )),
        }
        for (key, options) in wanted {
            let observer = Sub {
                key: key.clone(),
                tx: tx.clone(),
            };
            self.client
                .subscribe(&key, ctx.mode, observer, options)
                .map_err(|e| Fail(1, format!("subscribing to {key}: {e}")))?;
        }
        drop(tx);
        loop {
            // The deadline is looked at before every event, not only when none is
            // waiting: a server faster than the output keeps the backlog full forever.
            let event = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    let next = if left.is_zero() {
                        Err(RecvTimeoutError::Timeout)
                    } else {
                        rx.recv_timeout(left)
                    };
                    match next {
                        Ok(e) => e,
                        Err(RecvTimeoutError::Timeout) => {
                            let late = Instant::now().saturating_duration_since(d);
                            let waiting = rx.try_iter().take(FOLLOW_BACKLOG).count();
                            ctx.log.debug(format_args!(
                                "deadline: fired {} us after it was due, {waiting} data PDUs \
                                 waiting",
                                late.as_micros()
                            ));
                            return Ok(Ended::Deadline);
                        }
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
                None => match rx.recv() {
                    Ok(e) => e,
                    Err(_) => break,
                },
            };
            match event {
                SubEvent::Subscribed => ctx.log.info("Subscription became active"),
                SubEvent::Failed(key, reason) => {
                    return Err(Fail(
                        1,
                        format!("Subscription failed because: {reason} ({key})"),
                    ))
                }
                SubEvent::Data(data) => match output(&data) {
                    Ok(Flow::Go) => {}
                    Ok(Flow::Stop) => return Ok(Ended::Stopped),
                    Err(e) => return Ok(Ended::Output(e)),
                },
            }
        }
        Err(Fail(1, "the client stopped".into()))
    }
}

enum SubEvent {
    Subscribed,
    Failed(String, String),
    Data(SubscriptionData<'static>),
}

/// Data PDUs a subscribing command holds between the client's thread and its output.
const FOLLOW_BACKLOG: usize = 256;

struct Sub {
    key: String,
    tx: SyncSender<SubEvent>,
}

impl SubscriptionObserver for Sub {
    fn on_enter_subscribed(&mut self) {
        let _ = self.tx.send(SubEvent::Subscribed);
    }
    fn on_enter_failed(&mut self, reason: &str) {
        let _ = self
            .tx
            .send(SubEvent::Failed(self.key.clone(), reason.to_owned()));
    }
    fn on_subscription_data(&mut self, data: &SubscriptionData) {
        let _ = self.tx.send(SubEvent::Data(data.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_from_input_lines() {
        assert_eq!(message_json(r#"{"a": 1}"#, false).unwrap(), r#"{"a": 1}"#);
        assert_eq!(message_json("42", false).unwrap(), "42");
        assert_eq!(message_json(" true ", false).unwrap(), "true");
        assert_eq!(message_json("hello", false).unwrap(), r#""hello""#);
        assert_eq!(message_json(r#""quoted""#, false).unwrap(), r#""quoted""#);
        assert_eq!(
            message_json(r#"say "hi""#, false).unwrap(),
            r#""say \"hi\"""#
        );
        assert_eq!(message_json("", false).unwrap(), r#""""#);
        for bad in [r#"{"who":"#, "[1,", r#""open"#, r#"  {"a" 1}"#] {
            assert!(message_json(bad, false).is_err(), "{bad}");
        }
        assert_eq!(message_json(r#"{"who":"#, true).unwrap(), r#""{\"who\":""#);
        assert_eq!(message_json("42", true).unwrap(), r#""42""#);
    }

    #[test]
    fn data_lines_are_single_lines() {
        assert_eq!(
            data_line("c", "{\n\"a\": 1\n}"),
            r#"{"channel":"c","message":{"a":1}}"#
        );
        assert_eq!(data_line("c\"", "3"), r#"{"channel":"c\"","message":3}"#);
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let s: Secret = "hunter2".parse().unwrap_or_else(|e| match e {});
        assert!(!format!("{s:?}").contains("hunter2"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_secs("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_secs("-1").is_err());
        assert!(parse_secs("x").is_err());
    }
}

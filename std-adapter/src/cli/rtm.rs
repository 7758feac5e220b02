//! `benchlink rtm …`: the messaging service from the command line over [`Client`].
//!
//! Every command connects (failing fast when the first connection fails), authenticates
//! when a role and its secret are given, does its work and disconnects. Output is JSON,
//! one value per line, so it pipes into `jq` and back into `benchlink rtm publish -`.
//!
//! Without `--endpoint` (and `BENCHLINK_RTM_ENDPOINT`) a local RTM server is started
//! in-process for the length of the command: `subscribe` and `record` then only see
//! what the same process publishes (nothing), so the local mode is for trying the
//! commands out; `benchlink sandbox` runs a server that other processes can share.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand, ValueEnum};
use serde_json::value::RawValue;

use benchlink_core::ws::Endpoint;

use super::rtm_target::Target;
use crate::net::{parse_proxy, TlsOptions};
use crate::rtm::{
    Callback, Client, ClientObserver, ClientOptions, Encoding, Error, Mode, Reply, Response,
    SubscribeOptions, SubscriptionData, SubscriptionObserver,
};
use benchlink_sandbox::rtm::RtmServer;

/// Exit code of an invalid argument value (as `benchlink bench`).
pub(super) const EXIT_INVALID: u8 = 4;
/// How long the first connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Most publishes waiting for their acknowledgement at once.
const WINDOW: usize = 1000;

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

#[derive(Debug, Args)]
pub(super) struct RtmArgs {
    /// Service endpoint, `ws://host[:port]` or `wss://…`. Else BENCHLINK_RTM_ENDPOINT,
    /// SATORI_ENDPOINT, satori-rtm-cli's config file, then ws://127.0.0.1:8080 when a
    /// server answers there (`benchlink sandbox`); else a throw-away in-process server.
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
        long,
        global = true,
        env = "BENCHLINK_RTM_ROLE",
        visible_alias = "role_name",
        alias = "role-name"
    )]
    pub(super) role: Option<String>,
    /// The role's secret (else BENCHLINK_RTM_ROLE_SECRET, SATORI_ROLE_SECRET, the config
    /// file).
    #[arg(
        short = 's',
        long,
        global = true,
        env = "BENCHLINK_RTM_ROLE_SECRET",
        hide_env_values = true,
        visible_alias = "role_secret"
    )]
    pub(super) role_secret: Option<Secret>,
    /// satori-rtm-cli's config file (TOML, or its JSON credentials form); default
    /// `$XDG_CONFIG_HOME/satori/rtm-cli.config` (`~/.config/…`).
    #[arg(short = 'c', long, global = true, value_name = "FILE")]
    pub(super) config: Option<PathBuf>,
    /// How long to wait for each reply of the server, in seconds.
    #[arg(long, global = true, default_value = "10", value_parser = parse_secs)]
    reply_timeout: Duration,
    /// Also trust the certificates of this PEM file for wss:// (a private CA, a test
    /// server's own certificate); SSL_CERT_FILE is honoured too.
    #[arg(long, global = true, value_name = "PEM")]
    cacert: Option<PathBuf>,
    /// Do not verify the server's certificate (wss:// stays encrypted, not authenticated).
    #[arg(long, global = true, alias = "no_cert_check")]
    no_cert_check: bool,
    /// Reach the service through this HTTPS proxy, `[http://]host:port` (CONNECT tunnel).
    #[arg(long, global = true, env = "HTTPS_PROXY", value_name = "HOST:PORT")]
    https_proxy: Option<String>,
    /// How PDUs travel: JSON text, or CBOR (the server must select the `cbor` WebSocket
    /// subprotocol). Messages are printed and read as JSON either way. An extension:
    /// satori-rtm-cli always speaks JSON.
    #[arg(long, global = true, value_enum, default_value = "json")]
    protocol: ProtocolArg,
    #[command(subcommand)]
    command: RtmCommand,
}

#[derive(Debug, Subcommand)]
enum RtmCommand {
    /// Publish MESSAGE (JSON, else a JSON string), or each line of stdin with `-` or no
    /// MESSAGE; print each message's position once acknowledged.
    Publish(PublishArgs),
    /// Print the messages of channels as JSON lines `{"channel":…,"message":…}`.
    Subscribe(SubscribeArgs),
    /// Print a channel's value (`null` when never written).
    Read(ChannelArg),
    /// Write a channel's value (JSON, else a JSON string).
    Write(WriteArgs),
    /// Delete a channel's value.
    Delete(ChannelArg),
    /// Print the channels whose names start with PREFIX, as a JSON array.
    Search(SearchArgs),
    /// Record the messages of channels to a file of JSON lines
    /// `{"t_ms":…,"channel":…,"message":…}` (milliseconds since the recording began).
    Record(RecordArgs),
    /// Publish a recording again, keeping its relative timing.
    Replay(ReplayArgs),
}

#[derive(Debug, Args)]
struct ChannelArg {
    channel: String,
}

#[derive(Debug, Args)]
struct PublishArgs {
    channel: String,
    /// The message; `-` or none reads one message per line of stdin (blank lines are
    /// skipped).
    message: Option<String>,
}

#[derive(Debug, Args)]
struct WriteArgs {
    channel: String,
    value: String,
}

#[derive(Debug, Args)]
struct SearchArgs {
    prefix: String,
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

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Simple => Mode::Simple,
            ModeArg::Reliable => Mode::Reliable,
            ModeArg::Advanced => Mode::Advanced,
        }
    }
}

/// How to subscribe (shared by `subscribe` and `record`).
#[derive(Debug, Args)]
struct SubscriptionArgs {
    /// Channels (with --filter: the one subscription id).
    #[arg(required = true)]
    channels: Vec<String>,
    #[arg(long, value_enum, default_value = "reliable")]
    mode: ModeArg,
    /// Start at this position (as printed by `publish`).
    #[arg(long)]
    position: Option<String>,
    /// Replay the last N messages first.
    #[arg(long)]
    count: Option<u64>,
    /// Replay the last S seconds of messages first.
    #[arg(long)]
    age: Option<u64>,
    /// A view, `select * from CHANNEL …`; needs exactly one subscription id.
    #[arg(long)]
    filter: Option<String>,
    /// Stop after N messages (over all channels).
    #[arg(long)]
    max: Option<u64>,
}

#[derive(Debug, Args)]
struct SubscribeArgs {
    #[command(flatten)]
    sub: SubscriptionArgs,
    /// Stop after SECS seconds; with --max, ending before N messages is an error.
    #[arg(long, value_parser = parse_secs)]
    timeout: Option<Duration>,
}

#[derive(Debug, Args)]
struct RecordArgs {
    #[command(flatten)]
    sub: SubscriptionArgs,
    /// The recording (`-`: stdout); replaced if it exists.
    #[arg(short, long)]
    output: PathBuf,
    /// Stop after S seconds.
    #[arg(long, value_parser = parse_secs)]
    duration: Option<Duration>,
}

#[derive(Debug, Args)]
struct ReplayArgs {
    /// A file written by `record`.
    file: PathBuf,
    /// Play X times faster (0.5: half as fast).
    #[arg(long, default_value_t = 1.0, value_parser = parse_speed)]
    speed: f64,
    /// Publish to P + the recorded channel.
    #[arg(long, default_value = "")]
    channel_prefix: String,
}

/// One line of a recording.
#[derive(serde::Serialize, serde::Deserialize)]
struct Recorded<'a> {
    t_ms: u64,
    #[serde(borrow)]
    channel: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    message: &'a RawValue,
}

fn parse_secs(s: &str) -> Result<Duration, String> {
    s.parse::<f64>()
        .ok()
        .and_then(|x| Duration::try_from_secs_f64(x).ok())
        .ok_or_else(|| format!("expected seconds (a number ≥ 0), got {s:?}"))
}

fn parse_speed(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x > 0.0)
        .ok_or_else(|| format!("expected a speed factor > 0, got {s:?}"))
}

/// A failure with the exit code it maps to.
pub(super) struct Fail(pub(super) u8, pub(super) String);

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail(1, e.to_string())
    }
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

/// The text of a message given on the command line: itself when it is JSON, else a
/// JSON string of it.
fn message_json(s: &str) -> String {
    if serde_json::from_str::<serde::de::IgnoredAny>(s).is_ok() {
        s.trim().to_owned()
    } else {
        serde_json::Value::from(s).to_string()
    }
}

fn execute(args: RtmArgs) -> Result<u8, Fail> {
    if let RtmCommand::Subscribe(SubscribeArgs { sub, .. })
    | RtmCommand::Record(RecordArgs { sub, .. }) = &args.command
    {
        if sub.filter.is_some() && sub.channels.len() != 1 {
            return Err(Fail(
                EXIT_INVALID,
                "--filter needs exactly one subscription id".into(),
            ));
        }
    }
    let timeout = args.reply_timeout;
    let session = Session::connect(&args)?;
    let out = &mut io::stdout().lock();
    match args.command {
        RtmCommand::Publish(a) => {
            let channel = a.channel;
            let single = a.message.filter(|m| m != "-").map(|m| message_json(&m));
            let produce = move |p: &mut Publisher| match single {
                Some(json) => p.publish(&channel, json),
                None => {
                    for line in io::stdin().lock().lines() {
                        let line = line.map_err(|e| Fail(1, format!("reading stdin: {e}")))?;
                        if !line.trim().is_empty() {
                            p.publish(&channel, message_json(&line))?;
                        }
                    }
                    Ok(())
                }
            };
            let failed = session.pipeline(timeout, produce, |_, channel, position| {
                let line = serde_json::json!({ "channel": channel, "position": position });
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            })?;
            return Ok(u8::from(failed > 0));
        }
        RtmCommand::Subscribe(a) => {
            let deadline = a.timeout.map(|t| Instant::now() + t);
            let ended = session.follow(&a.sub, deadline, |channel, _, message| {
                writeln!(out, "{}", data_line(channel, message))?;
                out.flush()
            })?;
            if let (Some(max), Some(got)) = (a.sub.max, ended.timed_out) {
                return Err(Fail(1, format!("timed out with {got} of {max} messages")));
            }
        }
        RtmCommand::Read(a) => {
            let value = session.client.read_sync(&a.channel, timeout)?;
            let _ = writeln!(out, "{value}");
        }
        RtmCommand::Write(a) => {
            let value = RawValue::from_string(message_json(&a.value))
                .map_err(|e| Fail(EXIT_INVALID, e.to_string()))?;
            let client = &session.client;
            let reply = call(timeout, |cb| client.write(&a.channel, &value, Some(cb)))?;
            print_reply(out, &a.channel, &reply);
        }
        RtmCommand::Delete(a) => {
            let client = &session.client;
            let reply = call(timeout, |cb| client.delete(&a.channel, Some(cb)))?;
            print_reply(out, &a.channel, &reply);
        }
        RtmCommand::Search(a) => {
            let channels = session.search(&a.prefix, timeout)?;
            let _ = writeln!(out, "{}", serde_json::Value::from(channels));
        }
        RtmCommand::Record(a) => {
            let start = Instant::now();
            let mut file: Box<dyn Write> = if a.output.as_os_str() == "-" {
                Box::new(io::stdout())
            } else {
                let f = File::create(&a.output)
                    .map_err(|e| Fail(1, format!("{}: {e}", a.output.display())))?;
                Box::new(BufWriter::new(f))
            };
            let deadline = a.duration.map(|d| start + d);
            let ended = session.follow(&a.sub, deadline, |channel, at, message| {
                let message = RawValue::from_string(one_line(message)).map_err(io::Error::other)?;
                let line = Recorded {
                    t_ms: u64::try_from(at.saturating_duration_since(start).as_millis())
                        .unwrap_or(u64::MAX),
                    channel: channel.into(),
                    message: &message,
                };
                let text = serde_json::to_string(&line).map_err(io::Error::other)?;
                writeln!(file, "{text}")?;
                file.flush()
            })?;
            file.flush()
                .map_err(|e| Fail(1, format!("{}: {e}", a.output.display())))?;
            if let Some(e) = ended.write_error {
                return Err(Fail(1, format!("{}: {e}", a.output.display())));
            }
            eprintln!("recorded {} messages", ended.count);
        }
        RtmCommand::Replay(a) => return session.replay(&a, timeout),
    }
    Ok(0)
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
fn print_reply(out: &mut impl Write, channel: &str, reply: &Reply) {
    let mut body = match reply.json() {
        serde_json::Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    body.insert("channel".into(), channel.into());
    let _ = writeln!(out, "{}", serde_json::Value::Object(body));
}

/// Sends one request with a callback and waits up to `timeout` for its reply.
fn call(
    timeout: Duration,
    send: impl FnOnce(Callback) -> Result<(), Error>,
) -> Result<Reply, Fail> {
    let (tx, rx) = mpsc::channel();
    send(Box::new(move |r| {
        let _ = tx.send(r);
    }))?;
    match rx.recv_timeout(timeout) {
        Ok(Response::Reply(r)) if r.is_ok() => Ok(r),
        Ok(Response::Reply(r)) => Err(Error::Reply(r).into()),
        Ok(Response::Timeout) | Err(RecvTimeoutError::Timeout) => Err(Error::Timeout.into()),
        Ok(Response::Disconnected) => Err(Error::Disconnected.into()),
        Err(RecvTimeoutError::Disconnected) => Err(Error::Disposed.into()),
    }
}

/// Connection state changes the command waits for.
enum Conn {
    Connected,
    Stopped,
}

/// Tells the command about connection changes; says on stderr why a connection dropped.
struct Watch {
    states: Sender<Conn>,
    /// Why the last connection ended, until the reconnect is announced.
    why: Option<String>,
}

impl Watch {
    fn new(states: Sender<Conn>) -> Watch {
        Watch { states, why: None }
    }
}

impl ClientObserver for Watch {
    fn on_enter_connected(&mut self) {
        let _ = self.states.send(Conn::Connected);
    }
    fn on_link_closed(&mut self, why: &str) {
        self.why = Some(why.to_owned());
    }
    fn on_enter_awaiting(&mut self) {
        match self.why.take() {
            Some(why) => eprintln!("warning: connection lost ({why}); reconnecting"),
            None => eprintln!("warning: connection lost; reconnecting"),
        }
    }
    fn on_enter_stopped(&mut self) {
        let _ = self.states.send(Conn::Stopped);
    }
    fn on_fast_forward(&mut self, channel: &str) {
        eprintln!("warning: the server skipped messages of {channel} (fast-forward)");
    }
}

/// A connected (and authenticated) client, and the local server it talks to when no
/// endpoint was given.
struct Session {
    client: Client,
    _local: Option<RtmServer>,
}

impl Drop for Session {
    fn drop(&mut self) {
        // Before the local server goes: close cleanly and join the I/O thread.
        let _ = self.client.dispose();
    }
}

impl Session {
    fn connect(args: &RtmArgs) -> Result<Session, Fail> {
        let Target {
            endpoint,
            appkey,
            auth,
            local,
        } = Target::resolve(args)?;
        if let Err(e) = Endpoint::parse(&endpoint) {
            return Err(Fail(EXIT_INVALID, format!("--endpoint {endpoint:?}: {e}")));
        }
        let proxy = args
            .https_proxy
            .clone()
            .or_else(|| std::env::var("https_proxy").ok())
            .filter(|p| !p.is_empty());
        let mut options = ClientOptions::new(endpoint.clone(), appkey);
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
        let (tx, rx) = mpsc::channel();
        let client = Client::with_observer(options, Some(Box::new(Watch::new(tx))))?;
        let session = Session {
            client,
            _local: local,
        };
        session.client.start()?;
        match rx.recv_timeout(CONNECT_TIMEOUT) {
            Ok(Conn::Connected) => {}
            Ok(Conn::Stopped) | Err(RecvTimeoutError::Disconnected) => {
                let why = session
                    .client
                    .last_connecting_error()
                    .unwrap_or_else(|| "connection closed".into());
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
        let (tx, rx) = mpsc::channel();
        self.client.search(
            prefix,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        )?;
        let mut channels = Vec::new();
        loop {
            let reply = match rx.recv_timeout(timeout) {
                Ok(Response::Reply(r)) if r.is_ok() => r,
                Ok(Response::Reply(r)) => return Err(Error::Reply(r).into()),
                Ok(Response::Timeout) | Err(RecvTimeoutError::Timeout) => {
                    return Err(Error::Timeout.into())
                }
                Ok(Response::Disconnected) => return Err(Error::Disconnected.into()),
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

    /// Subscribes as `args` says and hands every message to `sink` (channel, arrival
    /// time, raw JSON) until `--max` messages, the deadline, or a failed sink.
    fn follow(
        &self,
        args: &SubscriptionArgs,
        deadline: Option<Instant>,
        mut sink: impl FnMut(&str, Instant, &str) -> io::Result<()>,
    ) -> Result<Followed, Fail> {
        // Bounded: when the output is slower than the server, the client's thread waits
        // here, stops reading the socket, and TCP slows the server down (nothing grows).
        // Leaving this function drops the receiver, which releases a waiting sender.
        let (tx, rx) = mpsc::sync_channel(FOLLOW_BACKLOG);
        for channel in &args.channels {
            let options = SubscribeOptions {
                position: args.position.clone(),
                history_count: args.count,
                history_age: args.age,
                filter: args.filter.clone(),
                ..SubscribeOptions::default()
            };
            let observer = Sub {
                channel: channel.clone(),
                tx: tx.clone(),
                subscribed: false,
            };
            self.client
                .subscribe(channel, args.mode.into(), observer, options)
                .map_err(|e| Fail(1, format!("subscribing to {channel}: {e}")))?;
        }
        drop(tx);
        let mut ended = Followed {
            count: 0,
            timed_out: None,
            write_error: None,
        };
        if args.max == Some(0) {
            return Ok(ended);
        }
        loop {
            let event = match deadline {
                Some(d) => match rx.recv_timeout(d.saturating_duration_since(Instant::now())) {
                    Ok(e) => e,
                    Err(RecvTimeoutError::Timeout) => {
                        ended.timed_out = Some(ended.count);
                        return Ok(ended);
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                },
                None => match rx.recv() {
                    Ok(e) => e,
                    Err(_) => break,
                },
            };
            match event {
                SubEvent::Subscribed(channel) => eprintln!("subscribed to {channel}"),
                SubEvent::Failed(channel, reason) => {
                    return Err(Fail(
                        1,
                        format!("subscription to {channel} failed: {reason}"),
                    ))
                }
                SubEvent::Data(channel, at, messages) => {
                    for m in messages {
                        if let Err(e) = sink(&channel, at, &m) {
                            ended.write_error = Some(e);
                            return Ok(ended);
                        }
                        ended.count += 1;
                        if Some(ended.count) == args.max {
                            return Ok(ended);
                        }
                    }
                }
            }
        }
        Err(Fail(1, "the client stopped".into()))
    }

    /// Runs `produce` on its own thread with a [`Publisher`]; `on_ok` receives every
    /// acknowledged message in order (sequence number, channel, position). Failed
    /// messages are reported on stderr; returns how many failed.
    fn pipeline(
        &self,
        timeout: Duration,
        produce: impl FnOnce(&mut Publisher) -> Result<(), Fail> + Send + 'static,
        mut on_ok: impl FnMut(u64, &str, &str),
    ) -> Result<u64, Fail> {
        let (tx, rx) = mpsc::channel();
        let inflight = Arc::new(Inflight::default());
        let mut publisher = Publisher {
            client: self.client.clone(),
            tx,
            inflight: Arc::clone(&inflight),
            next: 0,
            timeout,
        };
        std::thread::Builder::new()
            .name("benchlink-publish".into())
            .spawn(move || {
                let result = produce(&mut publisher);
                let _ = publisher.tx.send(PubEvent::Done(publisher.next, result));
            })
            .map_err(|e| Fail(1, format!("cannot spawn a thread: {e}")))?;
        collect_acks(
            &rx,
            &inflight,
            timeout,
            |seq, channel, outcome| match outcome {
                Ok(position) => on_ok(seq, channel, position),
                Err(e) => eprintln!("error: message {} to {channel}: {e}", seq + 1),
            },
        )
    }

    /// `benchlink rtm replay`.
    fn replay(&self, a: &ReplayArgs, timeout: Duration) -> Result<u8, Fail> {
        let text = std::fs::read_to_string(&a.file)
            .map_err(|e| Fail(1, format!("{}: {e}", a.file.display())))?;
        let mut lines = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let r: Recorded<'_> = serde_json::from_str(line).map_err(|e| {
                Fail(
                    EXIT_INVALID,
                    format!("{}:{}: not a recording line: {e}", a.file.display(), n + 1),
                )
            })?;
            lines.push((
                r.t_ms,
                format!("{}{}", a.channel_prefix, r.channel),
                r.message.get().to_owned(),
            ));
        }
        let speed = a.speed;
        let total = lines.len();
        let started = Instant::now();
        let failed = self.pipeline(
            timeout,
            move |p| {
                let t0 = lines.first().map_or(0, |l| l.0);
                for (t, channel, message) in lines {
                    let offset = Duration::from_millis(t.saturating_sub(t0)).div_f64(speed);
                    let due = started + offset;
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                    p.publish(&channel, message)?;
                }
                Ok(())
            },
            |_, _, _| {},
        )?;
        let summary = serde_json::json!({
            "published": total as u64 - failed,
            "failed": failed,
            "duration_ms": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        });
        println!("{summary}");
        Ok(u8::from(failed > 0))
    }
}

/// How [`Session::follow`] ended.
struct Followed {
    count: u64,
    /// The deadline passed, with this many messages.
    timed_out: Option<u64>,
    /// The sink failed (stdout closed, disk full).
    write_error: Option<io::Error>,
}

enum SubEvent {
    Subscribed(String),
    Failed(String, String),
    Data(String, Instant, Vec<String>),
}

/// Data PDUs a subscribing command holds between the client's thread and its output.
const FOLLOW_BACKLOG: usize = 256;

struct Sub {
    channel: String,
    tx: SyncSender<SubEvent>,
    subscribed: bool,
}

impl SubscriptionObserver for Sub {
    fn on_enter_subscribed(&mut self) {
        if !self.subscribed {
            self.subscribed = true;
            let _ = self.tx.send(SubEvent::Subscribed(self.channel.clone()));
        }
    }
    fn on_enter_failed(&mut self, reason: &str) {
        let _ = self
            .tx
            .send(SubEvent::Failed(self.channel.clone(), reason.to_owned()));
    }
    fn on_subscription_data(&mut self, data: &SubscriptionData) {
        let messages = data.messages().into_iter().map(str::to_owned).collect();
        let _ = self.tx.send(SubEvent::Data(
            self.channel.clone(),
            Instant::now(),
            messages,
        ));
    }
}

/// Publishes waiting for their acknowledgement.
#[derive(Default)]
struct Inflight {
    n: Mutex<usize>,
    changed: Condvar,
}

impl Inflight {
    fn count(&self) -> usize {
        *self.n.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn release(&self) {
        let mut n = self.n.lock().unwrap_or_else(PoisonError::into_inner);
        *n = n.saturating_sub(1);
        self.changed.notify_all();
    }

    /// Takes a slot, waiting while [`WINDOW`] publishes are unacknowledged.
    fn acquire(&self, timeout: Duration) -> bool {
        let mut n = self.n.lock().unwrap_or_else(PoisonError::into_inner);
        let start = Instant::now();
        while *n >= WINDOW {
            let Some(left) = timeout.checked_sub(start.elapsed()) else {
                return false;
            };
            n = self
                .changed
                .wait_timeout(n, left)
                .map_or_else(|e| e.into_inner().0, |(g, _)| g);
        }
        *n += 1;
        true
    }
}

enum PubEvent {
    Ack(u64, String, Response),
    /// The producer finished after publishing this many messages.
    Done(u64, Result<(), Fail>),
}

/// The producer's side of [`Session::pipeline`].
struct Publisher {
    client: Client,
    tx: Sender<PubEvent>,
    inflight: Arc<Inflight>,
    next: u64,
    timeout: Duration,
}

impl Publisher {
    fn publish(&mut self, channel: &str, json: String) -> Result<(), Fail> {
        if !self.inflight.acquire(self.timeout) {
            return Err(Fail(
                1,
                format!("{WINDOW} messages unacknowledged for {:?}", self.timeout),
            ));
        }
        let seq = self.next;
        let mut once = Some((
            self.tx.clone(),
            Arc::clone(&self.inflight),
            channel.to_owned(),
        ));
        let callback: Callback = Box::new(move |response| {
            if let Some((tx, inflight, channel)) = once.take() {
                inflight.release();
                let _ = tx.send(PubEvent::Ack(seq, channel, response));
            }
        });
        if let Err(e) = self.client.publish_json(channel, json, Some(callback)) {
            // Refused at the call: the callback was dropped unused.
            self.inflight.release();
            return Err(Fail(1, format!("publishing to {channel}: {e}")));
        }
        self.next += 1;
        Ok(())
    }
}

/// Receives acknowledgements until the producer is done and every message it published
/// is acknowledged; hands them to `each` in publication order. Returns how many failed.
fn collect_acks(
    rx: &Receiver<PubEvent>,
    inflight: &Inflight,
    timeout: Duration,
    mut each: impl FnMut(u64, &str, Result<&str, String>),
) -> Result<u64, Fail> {
    let mut pending = BTreeMap::new();
    let mut next = 0u64;
    let mut failed = 0u64;
    let mut done: Option<(u64, Result<(), Fail>)> = None;
    loop {
        if let Some((total, _)) = &done {
            if next >= *total {
                break;
            }
        }
        match rx.recv_timeout(timeout) {
            Ok(PubEvent::Ack(seq, channel, response)) => {
                pending.insert(seq, (channel, response));
                while let Some((channel, response)) = pending.remove(&next) {
                    let outcome = match response {
                        Response::Reply(r) if r.is_ok() => {
                            Ok(r.field("position").unwrap_or_default())
                        }
                        Response::Reply(r) => Err(format!("{}: {}", r.action, r.body)),
                        Response::Timeout => Err("no reply in time".to_owned()),
                        Response::Disconnected => {
                            Err("connection lost before the acknowledgement".to_owned())
                        }
                    };
                    if outcome.is_err() {
                        failed += 1;
                    }
                    each(next, &channel, outcome.as_deref().map_err(Clone::clone));
                    next += 1;
                }
            }
            Ok(PubEvent::Done(total, result)) => done = Some((total, result)),
            Err(RecvTimeoutError::Timeout) if inflight.count() == 0 => {}
            Err(RecvTimeoutError::Timeout) => {
                return Err(Fail(
                    1,
                    format!(
                        "{} messages not acknowledged within {timeout:?}",
                        inflight.count()
                    ),
                ))
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(Fail(1, "the publisher ended unexpectedly".into()))
            }
        }
    }
    match done {
        Some((_, Err(e))) => Err(e),
        _ => Ok(failed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_from_the_command_line() {
        assert_eq!(message_json(r#"{"a": 1}"#), r#"{"a": 1}"#);
        assert_eq!(message_json("42"), "42");
        assert_eq!(message_json(" true "), "true");
        assert_eq!(message_json("hello"), r#""hello""#);
        assert_eq!(message_json(r#"say "hi""#), r#""say \"hi\"""#);
        assert_eq!(message_json(""), r#""""#);
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
    fn durations_and_speeds() {
        assert_eq!(parse_secs("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_secs("-1").is_err());
        assert!(parse_secs("x").is_err());
        assert!(parse_speed("0").is_err());
        assert!(parse_speed("inf").is_err());
        assert_eq!(parse_speed("2"), Ok(2.0));
    }
}

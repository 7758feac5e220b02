//! The benchmark agent: runs a benchmark on a benchmark server and streams its metric
//! samples through a messaging service, checking on the way that they arrive.
//!
//! It uses both protocols at once:
//!
//! 1. starts the scenario on the benchmark server ([`BenchClient::start`]);
//! 2. follows its status on a second connection, printing every stage change;
//! 3. reads its live `/data` samples and publishes each one to the channel
//!    `benchmarks.<id>.metrics` as `{"ts":…,"metric":…,"value":…,"seq":…}` (`seq`
//!    numbers the samples from 0), with an RTM client; a cut `/data` is resumed by the
//!    library, exactly;
//! 4. a second RTM client in the same process, subscribed to that channel before the
//!    first sample, counts what comes back, each `seq` once;
//! 5. prints the final results and the summary line
//!    `published N samples, subscriber received N (/data resumed K times, reconnected R
//!    times)`.
//!
//! With no servers given, both run in-process: a [`BenchServer`] at its demo pace (a
//! benchmark of a few seconds whose stages can be watched) and a default [`RtmServer`].

use std::collections::HashSet;
use std::fmt;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use benchlink_cli::dashboard::{Board, Dashboard, Meta};
use benchlink_core::bench::Status;
use benchlink_sandbox::bench::{BenchServer, BenchServerConfig};
use benchlink_sandbox::rtm::{RtmServer, RtmServerConfig, DEFAULT_APPKEY};
use benchlink_std::bench::{
    BenchClient, Results, Scenario, ServerAddress, StartOptions, StatusInfo,
};
use benchlink_std::net::TlsOptions;
use benchlink_std::rtm::{
    Client, ClientObserver, ClientOptions, Error as RtmError, Mode, Response, SubscribeOptions,
    SubscriptionData, SubscriptionObserver,
};

/// How long to wait for an RTM connection, a subscription, or acknowledgements.
pub(crate) const RTM_PATIENCE: Duration = Duration::from_secs(10);
/// How long the subscriber may go without receiving, once every sample is published,
/// before the missing ones count as lost: longer than a reconnection can take (the
/// reconnect wait's 8 s cap, a connect of up to [`RTM_PATIENCE`], the resubscription's
/// catch-up), since a subscriber cut just before the end is between reconnections then.
/// (It was 5 s: a chaos run with a 100 ms round trip, seed 358277073, ended while the
/// subscriber waited to reconnect, and its 31 samples still on their way counted as
/// lost.) A run whose samples all arrive ends as soon as the last one does.
pub(crate) const SUBSCRIBER_PATIENCE: Duration = Duration::from_secs(30);

/// The scenario run when none is given: `examples/scenarios/hello.bdl`.
///
/// ```
/// assert!(benchlink_examples::agent::default_scenario().ends_with("hello.bdl"));
/// ```
pub fn default_scenario() -> PathBuf {
    let relative = PathBuf::from("examples/scenarios/hello.bdl");
    if relative.is_file() {
        relative
    } else {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/hello.bdl"))
    }
}

/// A messaging service to publish to.
#[derive(Clone)]
pub struct RtmTarget {
    /// `ws://…` or `wss://…`.
    pub endpoint: String,
    /// The application key.
    pub appkey: String,
    /// A role and its secret to authenticate with (both clients).
    pub role: Option<(String, String)>,
}

impl fmt::Debug for RtmTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RtmTarget")
            .field("endpoint", &self.endpoint)
            .field("appkey", &self.appkey)
            .field("role", &self.role.as_ref().map(|(r, _)| r))
            .finish()
    }
}

/// What the agent runs, and where.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// The scenario file (its `include_resource` files are read relative to it).
    pub scenario: PathBuf,
    /// The benchmark server (`host:port` or a URL); `None` starts a local one.
    pub host: Option<String>,
    /// Bearer token for the benchmark server (else the official token file's).
    pub token: Option<String>,
    /// The messaging service; `None` starts a local one.
    pub rtm: Option<RtmTarget>,
    /// Scenario environment variables.
    pub env: Vec<(String, String)>,
    /// How often to poll the benchmark's status.
    pub status_poll: Duration,
    /// A live dashboard to show the run on: its status, and its samples as the
    /// subscriber receives them (those that made the round trip, each once).
    pub dashboard: Option<Arc<Dashboard>>,
}

impl AgentOptions {
    /// The default scenario on local servers.
    ///
    /// ```
    /// let o = benchlink_examples::agent::AgentOptions::local();
    /// assert!(o.host.is_none() && o.rtm.is_none());
    /// ```
    pub fn local() -> AgentOptions {
        AgentOptions {
            scenario: default_scenario(),
            host: None,
            token: None,
            rtm: None,
            env: Vec::new(),
            status_poll: Duration::from_millis(100),
            dashboard: None,
        }
    }
}

/// Why the agent could not finish.
#[derive(Debug)]
pub struct AgentError(pub(crate) String);

impl fmt::Display for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AgentError {}

/// Adds what the agent was doing to an error.
pub(crate) fn ctx<E: fmt::Display>(what: &str) -> impl FnOnce(E) -> AgentError + '_ {
    move |e| AgentError(format!("{what}: {e}"))
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The benchmark's id.
    pub id: u64,
    /// The channel the samples went to.
    pub channel: String,
    /// Its final status.
    pub status: StatusInfo,
    /// Its final results.
    pub results: Results,
    /// Samples read from `/data`.
    pub samples: u64,
    /// Samples the messaging service acknowledged.
    pub published: u64,
    /// Distinct samples the subscriber received.
    pub received: u64,
    /// Copies the subscriber received of a sample it had already (a publish sent again
    /// after a drop whose first copy had arrived): each sample carries its sequence
    /// number, `seq`, and counts once, so a copy neither fails the run nor hides a loss.
    pub duplicated: u64,
    /// Times the `/data` stream was cut and resumed (by the library, exactly).
    pub resumed: u32,
    /// Times the two messaging clients connected again after their first connection.
    pub reconnected: u64,
}

impl Summary {
    /// `published N samples, subscriber received M (/data resumed K times, reconnected
    /// R times)`: what made the round trip, and what was survived on the way.
    ///
    /// ```
    /// # use benchlink_examples::agent::Summary;
    /// # use benchlink_std::bench::{Results, StatusInfo};
    /// let s = Summary {
    ///     id: 1, channel: "benchmarks.1.metrics".into(), results: Results::default(),
    ///     status: StatusInfo { status_text: "complete".into(), create_time: None, start_time: None, finish_time: None, reason: None },
    ///     samples: 12, published: 12, received: 12, duplicated: 0, resumed: 2, reconnected: 1,
    /// };
    /// assert_eq!(s.line(), "published 12 samples, subscriber received 12 (/data resumed 2 times, reconnected 1 times)");
    /// assert_eq!(s.exit_code(), 0);
    /// ```
    pub fn line(&self) -> String {
        format!(
            "published {} samples, subscriber received {} (/data resumed {} times, reconnected {} times)",
            self.published, self.received, self.resumed, self.reconnected
        )
    }

    /// 0 when the benchmark completed and every sample read was published and
    /// received (each counted once); 3 when the benchmark did not complete (as
    /// `benchlink bench run`); 1 when samples were lost.
    pub fn exit_code(&self) -> u8 {
        if self.status.status() != Status::Complete {
            3
        } else if self.published != self.samples || self.received != self.published {
            1
        } else {
            0
        }
    }
}

/// Runs the agent, writing its progress (server addresses, stage changes) to `out`.
///
/// ```no_run
/// use benchlink_examples::agent::{run, AgentOptions};
///
/// let summary = run(&AgentOptions::local(), &mut std::io::stdout())?;
/// println!("{}", summary.line());
/// std::process::exit(summary.exit_code().into());
/// # Ok::<(), benchlink_examples::agent::AgentError>(())
/// ```
pub fn run(options: &AgentOptions, out: &mut dyn Write) -> Result<Summary, AgentError> {
    let scenario = Scenario::from_file(&options.scenario)
        .map_err(ctx(&options.scenario.display().to_string()))?;

    // The servers: given, or local for the length of the run.
    let (host, target, _local) = servers(options, out)?;

    let mut bench = bench_client(&host, options.token.as_deref())?;
    let start = StartOptions {
        env: options.env.clone(),
        ..StartOptions::default()
    };
    let id = bench
        .start(&scenario, &start)
        .map_err(ctx("starting the benchmark"))?;
    let channel = format!("benchmarks.{id}.metrics");
    let _ = writeln!(
        out,
        "started benchmark {id} ({}) on {host}; publishing its metrics to {channel}",
        scenario.name
    );
    let board = options.dashboard.as_ref().map(|dashboard| {
        dashboard.board().add_fed(
            id,
            Meta {
                name: Some(scenario.name.clone()),
                tags: Vec::new(),
                env: options.env.clone(),
            },
        );
        dashboard.follow_log(&bench, id);
        let _ = writeln!(out, "dashboard: {}", dashboard.benchmark_url(id));
        Arc::clone(dashboard.board())
    });

    // The messaging side: the subscriber is listening before the first sample goes out.
    let publisher = Rtm::connect(&target)?;
    let subscriber = Rtm::connect(&target)?;
    let (sub_tx, sub_rx) = mpsc::channel();
    subscriber
        .client
        .subscribe(
            &channel,
            Mode::Reliable,
            Counter {
                tx: sub_tx,
                dashboard: board.clone().map(|b| (b, id, HashSet::new())),
            },
            SubscribeOptions::default(),
        )
        .map_err(ctx("subscribing"))?;
    match sub_rx.recv_timeout(RTM_PATIENCE) {
        Ok(Counted::Subscribed) => {}
        Ok(Counted::Failed(why)) => return Err(AgentError(format!("subscribing: {why}"))),
        _ => return Err(AgentError("subscribing: no answer in time".into())),
    }

    // The samples, on a connection of their own: read live and published as they come
    // (acknowledged in the background).
    // A stream silent for a minute is dead (the real server reports every 10 s).
    let mut data_client = bench_client(&host, options.token.as_deref())?
        .with_stream_idle_timeout(Some(Duration::from_secs(60)));
    let publishing = publisher.client.clone();
    let data_channel: Arc<str> = channel.as_str().into();
    let (ack_tx, ack_rx) = mpsc::channel::<bool>();
    let data_thread = thread::Builder::new()
        .name("agent-data".into())
        .spawn(move || -> Result<(u64, u32), AgentError> {
            let mut samples = 0u64;
            let mut data = data_client.data(id).map_err(ctx("reading /data"))?;
            for sample in data.by_ref() {
                let sample = sample.map_err(ctx("reading /data"))?;
                let message = serde_json::json!({
                    "ts": sample.timestamp,
                    "metric": sample.name,
                    "value": sample.value_json(),
                    "seq": samples,
                });
                publish_sample(
                    &publishing,
                    &data_channel,
                    Arc::new(message),
                    ack_tx.clone(),
                )
                .map_err(ctx("publishing"))?;
                samples += 1;
            }
            Ok((samples, data.resumptions()))
        })
        .map_err(ctx("spawning the data thread"))?;

    // The status, followed here until it is final.
    let began = Instant::now();
    let mut last = String::new();
    let status = bench
        .wait(id, options.status_poll, |s| {
            if let Some(board) = &board {
                board.set_status(id, s.clone());
            }
            if s.status_text != last {
                last.clone_from(&s.status_text);
                let _ = writeln!(
                    out,
                    "status: {last:<24} {:>5.1} s",
                    began.elapsed().as_secs_f64()
                );
            }
        })
        .map_err(ctx("following the status"))?;
    let (samples, resumed) = data_thread
        .join()
        .map_err(|_| AgentError("the data thread panicked".into()))??;

    let mut published = 0u64;
    let deadline = Instant::now() + RTM_PATIENCE;
    for _ in 0..samples {
        match ack_rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(true) => published += 1,
            Ok(false) => {}
            Err(_) => break,
        }
    }

    // Each sample once: a sequence number seen again is a duplicate.
    let mut tally = Tally::default();
    let mut last_progress = Instant::now();
    while (tally.seen.len() as u64) < published && last_progress.elapsed() < SUBSCRIBER_PATIENCE {
        match sub_rx.recv_timeout(SUBSCRIBER_PATIENCE.saturating_sub(last_progress.elapsed())) {
            Ok(Counted::Messages { seqs, invalid }) => {
                tally.count(seqs);
                if invalid > 0 {
                    let _ = writeln!(out, "warning: {invalid} messages of another shape");
                }
                last_progress = Instant::now();
            }
            Ok(Counted::Failed(why)) => {
                return Err(AgentError(format!("the subscription failed: {why}")))
            }
            Ok(Counted::Subscribed) => {}
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
        }
    }
    // Anything that arrived beyond the count (duplicates) counts too.
    for c in sub_rx.try_iter() {
        if let Counted::Messages { seqs, .. } = c {
            tally.count(seqs);
        }
    }
    let received = tally.seen.len() as u64;
    let duplicated = tally.duplicated;
    let reconnected = publisher.reconnects() + subscriber.reconnects();

    let results = bench.results(id).map_err(ctx("reading the results"))?;
    if let Some(board) = &board {
        board.set_status(id, status.clone());
        board.set_results(id, results.clone());
    }
    drop(publisher);
    drop(subscriber);
    Ok(Summary {
        id,
        channel,
        status,
        results,
        samples,
        published,
        received,
        duplicated,
        resumed,
        reconnected,
    })
}

/// The local servers of a run, running while this is kept.
pub(crate) type LocalServers = (Option<BenchServer>, Option<RtmServer>);

/// The servers of a run: the given ones, or local ones (kept running by the returned
/// guards) where none is given.
pub(crate) fn servers(
    options: &AgentOptions,
    out: &mut dyn Write,
) -> Result<(String, RtmTarget, LocalServers), AgentError> {
    let (host, local_bench) = match &options.host {
        Some(h) => (h.clone(), None),
        None => {
            let server = BenchServer::start(BenchServerConfig::default())
                .map_err(ctx("starting the local benchmark server"))?;
            let _ = writeln!(out, "local benchmark server at http://{}", server.host());
            (server.host(), Some(server))
        }
    };
    let (target, local_rtm) = match &options.rtm {
        Some(t) => (t.clone(), None),
        None => {
            let server = RtmServer::start(RtmServerConfig::default())
                .map_err(ctx("starting the local RTM server"))?;
            let _ = writeln!(out, "local RTM server at {}", server.endpoint());
            let target = RtmTarget {
                endpoint: server.endpoint(),
                appkey: DEFAULT_APPKEY.to_owned(),
                role: None,
            };
            (target, Some(server))
        }
    };
    Ok((host, target, (local_bench, local_rtm)))
}

/// The samples the subscriber received, each `seq` once: a sequence number seen again
/// is a copy (a publish sent again after a drop whose first copy had arrived).
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) seen: HashSet<u64>,
    pub(crate) duplicated: u64,
}

impl Tally {
    pub(crate) fn count(&mut self, seqs: impl IntoIterator<Item = u64>) {
        for seq in seqs {
            if !self.seen.insert(seq) {
                self.duplicated += 1;
            }
        }
    }
}

/// Publishes a sample's `message`, telling `acks` whether the hub acknowledged it. A
/// publish whose connection dropped before its reply may or may not have reached the
/// hub, so it is published again (the client queues it until it has reconnected); the
/// subscriber counts each `seq` once, so a copy that did arrive twice is not counted
/// twice, and a lost one is not hidden.
fn publish_sample(
    client: &Client,
    channel: &Arc<str>,
    message: Arc<serde_json::Value>,
    acks: Sender<bool>,
) -> Result<(), RtmError> {
    let mut again = Some((client.clone(), Arc::clone(channel), Arc::clone(&message)));
    client.publish(
        channel,
        &*message,
        Some(Box::new(move |r| match r {
            Response::Disconnected => {
                if let Some((client, channel, message)) = again.take() {
                    if publish_sample(&client, &channel, message, acks.clone()).is_err() {
                        let _ = acks.send(false);
                    }
                }
            }
            r => {
                let _ = acks.send(matches!(&r, Response::Reply(reply) if reply.is_ok()));
            }
        })),
    )
}

pub(crate) fn bench_client(host: &str, token: Option<&str>) -> Result<BenchClient, AgentError> {
    let address = ServerAddress::parse(host).map_err(ctx("benchmark server address"))?;
    let tls = tls()?;
    let client = BenchClient::new(address)
        .and_then(|c| c.with_tls(tls))
        .map_err(ctx("benchmark client"))?;
    Ok(match token {
        Some(t) => client.with_token(t),
        None => client.with_token_file(),
    })
}

/// The agent's TLS (for https and wss servers): verification on, with the roots of the
/// PEM file named by `SSL_CERT_FILE` trusted too, as curl and Python trust them (a
/// private CA, the local servers' `--tls-cert`).
pub(crate) fn tls() -> Result<TlsOptions, AgentError> {
    TlsOptions::default()
        .with_env_roots()
        .map_err(ctx("trusted certificates"))
}

/// A connected (and authenticated) RTM client, disposed on drop.
struct Rtm {
    client: Client,
    /// Connections made, the first included.
    connects: Arc<AtomicU64>,
}

impl Drop for Rtm {
    fn drop(&mut self) {
        let _ = self.client.dispose();
    }
}

struct Connected(Sender<bool>, Arc<AtomicU64>);

impl ClientObserver for Connected {
    fn on_enter_connected(&mut self) {
        self.1.fetch_add(1, Ordering::Relaxed);
        let _ = self.0.send(true);
    }
    fn on_enter_stopped(&mut self) {
        let _ = self.0.send(false);
    }
}

impl Rtm {
    fn connect(target: &RtmTarget) -> Result<Rtm, AgentError> {
        let (tx, rx) = mpsc::channel();
        // An agent's run lasts minutes: reconnect waits capped at 8 s (the SDK's 300 s
        // cap would leave it idle for minutes after a string of refused upgrades).
        let mut options = ClientOptions {
            max_reconnect_interval: Duration::from_secs(8),
            ..ClientOptions::new(target.endpoint.clone(), target.appkey.clone())
        };
        options.transport.tls = tls()?;
        let connects = Arc::new(AtomicU64::new(0));
        let observer = Connected(tx, Arc::clone(&connects));
        let client =
            Client::with_observer(options, Some(Box::new(observer))).map_err(ctx("RTM client"))?;
        let rtm = Rtm { client, connects };
        rtm.client.start().map_err(ctx("RTM client"))?;
        if rx.recv_timeout(RTM_PATIENCE) != Ok(true) {
            let why = rtm
                .client
                .last_connecting_error()
                .map_or_else(|| "no connection in time".into(), |e| e.to_string());
            return Err(AgentError(format!(
                "connecting to {}: {why}",
                target.endpoint
            )));
        }
        if let Some((role, secret)) = &target.role {
            rtm.client
                .authenticate_sync(role, secret, RTM_PATIENCE)
                .map_err(ctx(&format!("authenticating as {role}")))?;
        }
        Ok(rtm)
    }

    /// Connections made after the first.
    fn reconnects(&self) -> u64 {
        self.connects.load(Ordering::Relaxed).saturating_sub(1)
    }
}

/// What the subscriber tells the agent.
enum Counted {
    Subscribed,
    Failed(String),
    /// The sequence numbers of the samples of one delivery, and how many messages were
    /// not samples.
    Messages {
        seqs: Vec<u64>,
        invalid: u64,
    },
}

/// The shape of a published sample.
#[derive(serde::Deserialize)]
pub(crate) struct Metric {
    pub(crate) ts: u64,
    pub(crate) metric: String,
    pub(crate) value: serde_json::Value,
    pub(crate) seq: u64,
}

/// The subscriber's observer: counts the samples for the summary and, with a
/// dashboard, shows each one the first time it arrives.
struct Counter {
    tx: Sender<Counted>,
    /// The dashboard's board, the benchmark, and the samples already shown.
    dashboard: Option<(Arc<Board>, u64, HashSet<u64>)>,
}

impl SubscriptionObserver for Counter {
    fn on_enter_subscribed(&mut self) {
        let _ = self.tx.send(Counted::Subscribed);
    }
    fn on_enter_failed(&mut self, reason: &str) {
        let _ = self.tx.send(Counted::Failed(reason.to_owned()));
    }
    fn on_subscription_data(&mut self, data: &SubscriptionData) {
        let (mut seqs, mut invalid) = (Vec::new(), 0);
        let mut shown = Vec::new();
        for m in data.messages() {
            match serde_json::from_str::<Metric>(m) {
                Ok(metric) => {
                    seqs.push(metric.seq);
                    if let Some((_, _, seen)) = &mut self.dashboard {
                        if seen.insert(metric.seq) {
                            shown.push(metric);
                        }
                    }
                }
                Err(_) => invalid += 1,
            }
        }
        if let Some((board, id, _)) = &self.dashboard {
            board.push_samples(
                *id,
                shown
                    .iter()
                    .filter_map(|m| Some((m.metric.as_str(), m.ts, m.value.as_f64()?))),
            );
        }
        let _ = self.tx.send(Counted::Messages { seqs, invalid });
    }
}

//! The benchmark agent as firmware, for every board: [`run`] it on an embassy-net
//! [`Stack`] and it does the whole main job of the project over both protocols.
//!
//! 1. The messaging link starts connecting (it reconnects by itself from then on, with
//!    backoff, and restores its authentication and subscription).
//! 2. `POST /start` of the scenario in [`Settings`]; subscribe to
//!    `benchmarks.<id>.metrics` (reliable mode: a restored subscription resumes from its
//!    last position, so nothing published meanwhile is missed).
//! 3. `/status` until the benchmark runs, then `/data`: every metric sample is published
//!    to the channel as `{"n":…,"ts":…,"metric":…,"value":…}`, its value forwarded as the
//!    server wrote it (no float is parsed or formatted).
//! 4. Every publish is acknowledged; one that was in flight when the connection dropped is
//!    published again (it may or may not have reached the hub). The subscriber side
//!    counts distinct sample numbers ([`roundtrip`]), so a duplicate cannot hide a loss.
//! 5. A `/data` stream that breaks (dropped connection, silent server) is resumed by the
//!    benchmark client exactly where it was, per metric
//!    ([`BenchClient::data_resumed`] with core's
//!    [`DataCursor`](benchlink_core::bench::resume::DataCursor)); the agent also breaks
//!    it off itself while its publish queue is full (the messaging service is away), and
//!    goes on with the same cursor once there is room, so nothing is dropped and memory
//!    stays fixed.
//! 6. `/status` until final, `/results`, and a [`Summary`]: `published N samples,
//!    subscriber received N (/data resumed K times, reconnected R times)` when every
//!    sample made the round trip.
//!
//! The board supplies the network stack, a seed, the settings and a [`Report`] (where
//! progress goes: semihosting, defmt, a display). All memory is one [`Memory`] the board
//! puts in a static; the agent allocates nothing and spawns nothing: the messaging
//! runner, the event reader and the flow run as one future.
#![no_std]
#[cfg(test)]
extern crate std;

pub mod outbox;
pub mod roundtrip;

use core::cell::{Cell, RefCell};
use core::ops::ControlFlow;

use benchlink_core::bench::request::{self, File};
use benchlink_core::bench::resume::{DataCursor, Metrics, Retry};
use benchlink_core::bench::{Sample, Status};
use benchlink_core::http::Cursor as Out;
use benchlink_core::json::write;
use benchlink_core::rtm::{
    ClientState, Disconnect, Event, Events, LinkError, Mode, Outcome, RequestError, SubState,
    SubscribeArgs,
};
use benchlink_embassy::bench::{BenchClient, Buffers, Error as BenchError, Server, Timeouts};
use benchlink_embassy::rtm::{Messaging, MessagingConfig, RunnerBuffers};
use benchlink_embassy::transport::{ConnectError, TcpTransport};
use embassy_futures::join::join_array;
use embassy_futures::select::{select, select3, Either, Either3};
use embassy_net::Stack;
use embassy_sync::blocking_mutex::raw::NoopRawMutex;
use embassy_sync::signal::Signal;
use embassy_time::{with_timeout, Duration, Instant, Timer};
use heapless::String;

pub use benchlink_core::rtm::Config as ClientConfig;

/// Acknowledged publishes in flight at once (the messaging client's in-flight table, and
/// the number of publishing loops).
const IN_FLIGHT: usize = 4;
/// The messaging client: 1 subscription, [`IN_FLIGHT`] acknowledged requests (its
/// queue and outbox, in [`Memory`]: 1 KiB of offline queue, where the publishes in
/// flight wait while disconnected, one per publishing loop, and 512-byte PDUs). The
/// agent takes each event as it comes, where it lies in the link's buffer; the runner
/// reads no more from the socket until it has. Everything runs in one task, so no
/// critical sections.
type Rtm = Messaging<NoopRawMutex, 1, IN_FLIGHT>;
/// Bytes for the messaging events not yet taken.
const EVENTS: usize = Events::<&mut [u8]>::capacity_for(1, IN_FLIGHT, 0);
/// Longest sample message (`{"n":…,"ts":…,"metric":…,"value":…}` with a 64-byte name).
const MESSAGE: usize = 192;
/// Bytes of samples read from `/data` and not yet published: a burst of the server's
/// reports (about 30 samples of about 100 bytes) with room to spare.
const OUTBOX: usize = 4096;
/// Metrics a benchmark may have (the resume table; `hello.bdl` has about 30).
const METRICS: usize = 48;
/// The longest metric name the resume table keeps (the server's names are dotted paths
/// such as `workers.pool1.started.rps`); a longer one is reported, never guessed.
const MAX_NAME: usize = 64;
/// How `/data` is resumed and calls that change nothing are tried again after a break:
/// the library's default waits (200 ms doubling to 5 s, 20 tries in a row before the
/// agent hears of it), and a device that boots before its server keeps trying to
/// connect, as its messaging link does.
const RETRY: Retry = Retry {
    retry_first_connect: true,
    ..Retry::DEFAULT
};
/// The TCP receive windows. With TLS the record buffer holds what arrived (16 KiB), so
/// the sockets' own windows are halved to keep the image within its RAM budget.
const SOCKET_RX: usize = if cfg!(feature = "tls") { 1024 } else { 2048 };
/// Distinct sample numbers the subscriber can tell apart (256 words: 8,192 samples).
const SEEN_WORDS: usize = 256;

/// Where the agent connects and what it runs.
#[derive(Debug, Clone, Copy)]
pub struct Settings<'a> {
    /// The benchmark server (host, port, bearer token).
    pub bench: Server<'a>,
    /// The messaging endpoint (`ws://host:port`), appkey and liveness checks.
    pub link: MessagingConfig<'a>,
    /// The messaging client's reconnect policy and limits (default: the SDK's, with
    /// reconnect waits capped at 8 s). The agent sets its own `jitter_seed` (from the
    /// board's seed) and `retry_first_connect` (a device keeps trying).
    pub messaging: ClientConfig,
    /// Role and secret: when set, the client authenticates before the run (and again
    /// after every reconnect).
    pub role: Option<(&'a str, &'a [u8])>,
    /// The scenario uploaded with `/start`.
    pub script: File<'a>,
    /// Resources the scenario includes.
    pub includes: &'a [File<'a>],
    /// The benchmark's display name.
    pub benchmark_name: Option<&'a str>,
    /// Silence allowed inside the `/data` stream before it counts as broken and is
    /// requested again (the real server reports every 10 s).
    pub stream_idle: Duration,
    /// After `/data` ended, how long the agent waits for the last samples to come back
    /// on its subscription.
    pub round_trip_wait: Duration,
    /// The benchmark server speaks TLS (an `https://` URL).
    pub bench_tls: bool,
    /// Names with fixed addresses for both connections (see `TcpTransport::with_hosts`;
    /// feature `tls`, where the name is what a certificate is checked for).
    #[cfg(feature = "tls")]
    pub hosts: &'a [(&'a str, embassy_net::IpAddress)],
    /// The certificates TLS connections are checked against (feature `tls`).
    #[cfg(feature = "tls")]
    pub trust: benchlink_embassy::tls::TrustAnchors<'a>,
}

impl<'a> Settings<'a> {
    /// Defaults for a benchmark server, a messaging endpoint and a scenario.
    pub const fn new(bench: Server<'a>, link: MessagingConfig<'a>, script: File<'a>) -> Self {
        Settings {
            bench,
            link,
            // An agent's run lasts minutes: waits between reconnects capped at 8 s (the
            // SDK's 300 s cap left the device idle for minutes after a string of
            // refused upgrades in the chaos run), the rest the SDK's defaults.
            messaging: ClientConfig {
                max_reconnect_interval: core::time::Duration::from_secs(8),
                ..ClientConfig::DEFAULT
            },
            role: None,
            script,
            includes: &[],
            benchmark_name: None,
            stream_idle: Duration::from_secs(60),
            round_trip_wait: Duration::from_secs(30),
            bench_tls: false,
            #[cfg(feature = "tls")]
            hosts: &[],
            #[cfg(feature = "tls")]
            trust: benchlink_embassy::tls::TrustAnchors::new(&[]),
        }
    }
}

/// Every buffer of the agent: both sockets' TCP windows, the messaging link's and the
/// benchmark client's. About 22 KiB; put it in a static (`ConstStaticCell`).
pub struct Memory {
    rtm_message: [u8; 2048],
    rtm_tx: [u8; 1024],
    rtm_queue: [u8; 1024],
    rtm_outbox: [u8; 512],
    rtm_events: [u8; EVENTS],
    rtm_chunk: [u8; 512],
    rtm_socket_rx: [u8; SOCKET_RX],
    rtm_socket_tx: [u8; 2048],
    bench_socket_rx: [u8; SOCKET_RX],
    bench_socket_tx: [u8; 2048],
    bench_read: [u8; 512],
    bench_request: [u8; 512],
    bench_head: [u8; 1024],
    bench_body: [u8; 4096],
    bench_line: [u8; 256],
    #[cfg(feature = "tls")]
    tls: TlsMemory,
}

/// The TLS records of both connections: a whole incoming record each (any server may
/// send 16 KiB records; see `benchlink_embassy::tls`), 1 KiB outgoing (writes are cut
/// into records of up to 896 bytes of plaintext; every request and PDU of the agent fits
/// in one or two).
#[cfg(feature = "tls")]
struct TlsMemory {
    bench_rx: [u8; benchlink_embassy::tls::MAX_RECORD],
    bench_tx: [u8; 1024],
    rtm_rx: [u8; benchlink_embassy::tls::MAX_RECORD],
    rtm_tx: [u8; 1024],
}

impl Memory {
    /// Zeroed buffers, for a `static` initializer.
    pub const fn new() -> Self {
        Memory {
            rtm_message: [0; 2048],
            rtm_tx: [0; 1024],
            rtm_queue: [0; 1024],
            rtm_outbox: [0; 512],
            rtm_events: [0; EVENTS],
            rtm_chunk: [0; 512],
            rtm_socket_rx: [0; SOCKET_RX],
            rtm_socket_tx: [0; 2048],
            bench_socket_rx: [0; SOCKET_RX],
            bench_socket_tx: [0; 2048],
            bench_read: [0; 512],
            bench_request: [0; 512],
            bench_head: [0; 1024],
            bench_body: [0; 4096],
            bench_line: [0; 256],
            #[cfg(feature = "tls")]
            tls: TlsMemory {
                bench_rx: [0; benchlink_embassy::tls::MAX_RECORD],
                bench_tx: [0; 1024],
                rtm_rx: [0; benchlink_embassy::tls::MAX_RECORD],
                rtm_tx: [0; 1024],
            },
        }
    }
}

impl Default for Memory {
    fn default() -> Self {
        Self::new()
    }
}

/// What the agent tells the board as it goes.
///
/// Errors come as the library's own types ([`Problem`], [`Disconnect`]), so a
/// board logs them as it likes: with `defmt` (every one is `defmt::Format` with the
/// `defmt` features), with `Display`, or by their [`Problem::kind`] name, which links no
/// formatting code at all.
#[derive(Clone, Copy)]
pub enum Progress<'a> {
    /// The messaging client entered this state.
    Messaging(ClientState),
    /// The messaging connection ended, and why.
    Disconnected(Disconnect<'a>),
    /// The subscription to the metrics channel is live (again, after a reconnect).
    Subscribed,
    /// The benchmark was started with this id.
    Started(u64),
    /// The benchmark entered this stage.
    Stage(&'a str),
    /// `/data` broke and is requested again; `taken` samples were read so far.
    DataResumed {
        /// Samples taken before the break.
        taken: u32,
        /// Why: the benchmark client's error, or `None` when the agent broke it off
        /// because its outbox was full.
        cause: Option<Problem<'a>>,
    },
    /// The hub acknowledged a sample: this many so far.
    Acknowledged(u32),
    /// A publish that was in flight when the connection dropped is sent again.
    Republished(u32),
    /// Something went wrong that the agent works around or reports at the end.
    Problem {
        /// What the agent was doing.
        during: &'static str,
        /// What went wrong.
        problem: Problem<'a>,
    },
    /// The benchmark's final results arrived, with this many metrics.
    Results(usize),
}

/// What went wrong.
#[derive(Clone, Copy)]
pub enum Problem<'a> {
    /// The benchmark client's error.
    Bench(&'a BenchError<'a>),
    /// A messaging call was refused.
    Request(RequestError),
    /// The messaging settings were refused.
    Link(LinkError),
    /// The hub's own words (a subscription's failure reason).
    Hub(&'a str),
    /// Something the agent noticed, in words.
    Note(&'static str),
    /// A connection could not be opened (a TLS refusal says why).
    Connect(ConnectError),
}

impl Problem<'_> {
    /// A few words for what went wrong (the error's kind, without its details).
    pub fn kind(&self) -> &'static str {
        match self {
            Problem::Bench(e) => match e {
                BenchError::Connect(_) => "cannot connect to the benchmark server",
                BenchError::Io(_) => "the benchmark server's connection failed",
                BenchError::Timeout { .. } => "the benchmark server did not answer in time",
                BenchError::Encode(_) => "the request does not fit its buffer",
                BenchError::Decode(_) => "the response is not valid HTTP or was cut short",
                BenchError::BodyTooLarge { .. } => "a reply larger than the body buffer",
                BenchError::Server(_) => "the benchmark server answered with an error",
            },
            Problem::Request(RequestError::Full) => "the messaging queue is full",
            Problem::Request(_) => "the messaging client refused the request",
            Problem::Link(_) => "the messaging settings were refused",
            Problem::Hub(_) => "the hub refused",
            Problem::Note(text) => text,
            Problem::Connect(e) => e.as_str(),
        }
    }

    /// The reason in words when there is one beyond [`kind`](Self::kind): why a
    /// connection could not be opened (a refused certificate: unknown issuer, wrong
    /// name, expired, …).
    pub fn detail(&self) -> Option<&'static str> {
        match self {
            Problem::Bench(BenchError::Connect(e)) => Some(e.as_str()),
            _ => None,
        }
    }
}

impl core::fmt::Display for Problem<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Problem::Bench(e) => e.fmt(f),
            Problem::Request(e) => e.fmt(f),
            Problem::Link(e) => e.fmt(f),
            Problem::Connect(e) => e.fmt(f),
            Problem::Hub(text) | Problem::Note(text) => f.write_str(text),
        }
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Problem<'_> {
    fn format(&self, f: defmt::Formatter<'_>) {
        match self {
            Problem::Bench(e) => defmt::write!(f, "{}", e),
            Problem::Request(e) => defmt::write!(f, "{}", e),
            Problem::Link(e) => defmt::write!(f, "{}", e),
            Problem::Hub(text) => defmt::write!(f, "{=str}", text),
            Problem::Note(text) => defmt::write!(f, "{=str}", text),
            Problem::Connect(e) => defmt::write!(f, "{}", e),
        }
    }
}

/// A few words for why a messaging connection ended (the kind of
/// [`Disconnect`], without its details), for boards that format nothing.
pub fn disconnect_kind(why: &Disconnect<'_>) -> &'static str {
    match why {
        Disconnect::PeerClosed { .. } => "the hub closed the connection",
        Disconnect::Protocol(_) => "the hub broke the WebSocket protocol",
        Disconnect::DeadPeer { .. } => "no data from the hub (dead peer)",
        Disconnect::WriteStalled => "the hub stopped reading (writes stalled)",
        Disconnect::TransportClosed => "the connection closed without a close frame",
        Disconnect::ClientClosed => "closed by the client",
        _ => "the connection ended",
    }
}

/// Where progress goes: the board's log.
pub trait Report {
    /// One step of the run.
    fn progress(&mut self, progress: Progress<'_>);
}

/// How the run went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// The benchmark's id, once started.
    pub id: Option<u64>,
    /// Samples read from `/data` and acknowledged by the hub.
    pub published: u32,
    /// Distinct samples that came back on the subscription.
    pub received: u32,
    /// Samples that came back more than once (after a republish).
    pub duplicates: u32,
    /// Publishes sent again after a dropped connection.
    pub republished: u32,
    /// Times `/data` was requested again and resumed (by the benchmark client after a
    /// break, or by the agent after breaking it off itself).
    pub resumed: u32,
    /// Times the messaging link connected again after its first connection.
    pub reconnected: u32,
    /// Publishes the hub refused (an `rtm/publish/error`), and samples the agent could
    /// not publish or track (a message too large, a metric table or sample-number space
    /// full).
    pub refused: u32,
    /// The benchmark ended `complete`.
    pub complete: bool,
}

impl Summary {
    /// Every sample made the round trip and the benchmark completed.
    pub fn success(&self) -> bool {
        self.complete && self.published > 0 && self.received == self.published && self.refused == 0
    }
}

/// Runs the agent to the end of the benchmark: see the crate docs. `seed` seeds the
/// WebSocket masks and keys and the reconnect jitter (a hardware RNG's output on a real
/// board).
pub async fn run<R: Report>(
    stack: Stack<'_>,
    settings: &Settings<'_>,
    memory: &'static mut Memory,
    seed: u64,
    report: &mut R,
) -> Summary {
    let mut rng = XorShift(seed | 1);
    run_with_rng(stack, settings, memory, &mut rng, report).await
}

/// [`run`] with randomness from `rng`, the board's RNG (its RNG peripheral, or the
/// host's entropy handed in at start). Without `tls` the agent draws three words from
/// it: the multipart boundaries, the retry jitter and the seed of the messaging link's
/// WebSocket masks and keys (core's generator). With `tls`, each TLS connection's key
/// exchange also gets a ChaCha20 generator seeded from it, so `rng` must then be
/// cryptographic; the plain image links no ChaCha20.
pub async fn run_with_rng<R: Report, G: rand_core::RngCore>(
    stack: Stack<'_>,
    settings: &Settings<'_>,
    memory: &'static mut Memory,
    rng: &mut G,
    report: &mut R,
) -> Summary {
    let seed = rng.next_u64();
    #[cfg(feature = "tls")]
    let (bench_rng, rtm_rng) = {
        use rand_chacha::rand_core::SeedableRng;
        (
            rand_chacha::ChaCha20Rng::from_rng(&mut *rng),
            rand_chacha::ChaCha20Rng::from_rng(&mut *rng),
        )
    };
    let Memory {
        rtm_message,
        rtm_tx,
        rtm_queue,
        rtm_outbox,
        rtm_events,
        rtm_chunk,
        rtm_socket_rx,
        rtm_socket_tx,
        bench_socket_rx,
        bench_socket_tx,
        bench_read,
        bench_request,
        bench_head,
        bench_body,
        bench_line,
        #[cfg(feature = "tls")]
        tls,
    } = memory;
    let config = ClientConfig {
        jitter_seed: rng.next_u64() | 1,
        retry_first_connect: true,
        ..settings.messaging
    };
    let buffers = RunnerBuffers {
        rx: rtm_message,
        tx: rtm_tx,
        queue: rtm_queue,
        outbox: rtm_outbox,
        // One channel subscription: no view, no extra arguments.
        subscription_args: &mut [],
    };
    let rtm: Rtm = match Messaging::new(config, settings.link, buffers, rtm_events, rng) {
        Ok(rtm) => rtm,
        Err(e) => {
            report.progress(Progress::Problem {
                during: "setting up the messaging link",
                problem: Problem::Link(e),
            });
            return Summary::default();
        }
    };
    let bench_socket = TcpTransport::new(stack, bench_socket_rx, bench_socket_tx);
    #[cfg(feature = "tls")]
    let bench_socket = benchlink_embassy::tls::TlsTransport::new(
        bench_socket.with_hosts(settings.hosts),
        benchlink_embassy::tls::TlsBuffers {
            rx: &mut tls.bench_rx,
            tx: &mut tls.bench_tx,
        },
        settings.trust,
        bench_rng,
    );
    let buffers = Buffers {
        rx: bench_read,
        tx: bench_request,
        head: bench_head,
        body: bench_body,
        line: bench_line,
    };
    let bench = match BenchClient::new(bench_socket, settings.bench, buffers) {
        Ok(bench) => bench
            .with_timeouts(Timeouts {
                stream_idle: Some(settings.stream_idle),
                ..Timeouts::default()
            })
            .with_retry(Some(RETRY))
            .with_tls(settings.bench_tls)
            .with_seed(seed),
        Err(e) => {
            report.progress(Progress::Problem {
                during: "setting up the benchmark client",
                problem: Problem::Bench(&e),
            });
            return Summary::default();
        }
    };
    let agent = Agent {
        rtm: &rtm,
        report: RefCell::new(report),
        seen: RefCell::new(roundtrip::Seen::new()),
        subscribed: Signal::new(),
        arrived: Signal::new(),
        channel: RefCell::new(String::new()),
        outbox: RefCell::new(outbox::Outbox::new()),
        queued: Signal::new(),
        room: Signal::new(),
        reading: Cell::new(true),
        summary: Cell::new(Summary::default()),
        connected_once: Cell::new(false),
    };
    rtm.start();
    let rtm_socket = TcpTransport::new(stack, rtm_socket_rx, rtm_socket_tx);
    #[cfg(feature = "tls")]
    let rtm_socket = benchlink_embassy::tls::TlsTransport::new(
        rtm_socket.with_hosts(settings.hosts),
        benchlink_embassy::tls::TlsBuffers {
            rx: &mut tls.rtm_rx,
            tx: &mut tls.rtm_tx,
        },
        settings.trust,
        rtm_rng,
    );
    let summary = match select3(
        rtm.run(rtm_socket, rtm_chunk),
        agent.events(),
        agent.flow(bench, settings),
    )
    .await
    {
        Either3::First(never) | Either3::Second(never) => match never {},
        Either3::Third(summary) => summary,
    };
    rtm.stop();
    summary
}

/// The agent's state, shared by the futures of one task.
struct Agent<'r, R> {
    rtm: &'r Rtm,
    report: RefCell<&'r mut R>,
    seen: RefCell<roundtrip::Seen<SEEN_WORDS>>,
    /// The subscription became live.
    subscribed: Signal<NoopRawMutex, ()>,
    /// A sample came back.
    arrived: Signal<NoopRawMutex, ()>,
    /// `benchmarks.<id>.metrics`, once started.
    channel: RefCell<String<48>>,
    /// Samples taken from `/data`, not yet handed to a publishing loop.
    outbox: RefCell<outbox::Outbox<OUTBOX>>,
    /// The outbox has a sample, or the reader is done.
    queued: Signal<NoopRawMutex, ()>,
    /// A publish was acknowledged: the outbox may have room.
    room: Signal<NoopRawMutex, ()>,
    /// `/data` is still being read.
    reading: Cell<bool>,
    summary: Cell<Summary>,
    /// The messaging link has connected once (later connections are reconnections).
    connected_once: Cell<bool>,
}

impl<R: Report> Agent<'_, R> {
    fn report(&self, progress: Progress<'_>) {
        if let Ok(mut report) = self.report.try_borrow_mut() {
            report.progress(progress);
        }
    }

    fn problem(&self, during: &'static str, problem: Problem<'_>) {
        self.report(Progress::Problem { during, problem });
    }

    fn count(&self, f: impl FnOnce(&mut Summary)) {
        let mut s = self.summary.get();
        f(&mut s);
        self.summary.set(s);
    }

    /// Reads the messaging client's events forever: states, the subscription, and the
    /// samples coming back.
    async fn events(&self) -> ! {
        loop {
            self.rtm.next_event(|event| self.event(event)).await;
        }
    }

    /// One messaging event, where it lies in the link's buffer.
    fn event(&self, event: Event<'_>) {
        match event {
            Event::ClientState { enter, .. } => {
                if enter == ClientState::Connected && self.connected_once.replace(true) {
                    self.count(|s| s.reconnected += 1);
                }
                self.report(Progress::Messaging(enter));
            }
            Event::LinkClosed(why) => self.report(Progress::Disconnected(why)),
            Event::SubscriptionState {
                enter: SubState::Subscribed,
                ..
            } => {
                self.report(Progress::Subscribed);
                self.subscribed.signal(());
            }
            Event::SubscriptionData { data, .. } => {
                for message in data.messages.elements() {
                    let n = message
                        .get("n")
                        .and_then(|n| n.as_u64())
                        .and_then(|n| u32::try_from(n).ok());
                    match n.and_then(|n| self.seen.borrow_mut().mark(n)) {
                        Some(_) => self.arrived.signal(()),
                        None => {
                            self.problem("reading a sample back", Problem::Note("no sample number"))
                        }
                    }
                }
            }
            Event::SubscriptionFailed { reason, .. } => {
                self.problem("subscribing", Problem::Hub(reason.reason()));
            }
            Event::FastForward { .. } => {
                self.problem(
                    "receiving",
                    Problem::Note("the hub skipped the subscription ahead"),
                );
            }
            _ => {}
        }
    }

    /// The main job, from `/start` to the summary.
    async fn flow<T: benchlink_embassy::transport::Transport>(
        &self,
        mut bench: BenchClient<'_, T>,
        settings: &Settings<'_>,
    ) -> Summary {
        // Connected, or refused for good (a TLS certificate or handshake the hub's
        // server will present again): checked every 100 ms for 30 s.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let connected = with_timeout(
                Duration::from_millis(100),
                self.rtm.wait_for_state(ClientState::Connected),
            )
            .await;
            if connected.is_ok() {
                break;
            }
            #[cfg(feature = "tls")]
            if let Some(e @ ConnectError::Tls(_)) = self.rtm.last_connect_error() {
                self.problem("connecting to the hub", Problem::Connect(e));
                return self.summary.get();
            }
            if Instant::now() >= deadline {
                self.problem(
                    "connecting",
                    Problem::Note("messaging not connected after 30 s (retrying)"),
                );
                break;
            }
        }
        if let Some((role, secret)) = settings.role {
            match self
                .rtm
                .authenticate(role, secret, Some(Duration::from_secs(10)), |r| r.is_done())
                .await
            {
                Ok(true) => {}
                Ok(false) => {
                    self.problem(
                        "authenticating",
                        Problem::Note("the hub refused the role and secret"),
                    );
                    return self.summary.get();
                }
                Err(e) => {
                    self.problem("authenticating", Problem::Request(e));
                    return self.summary.get();
                }
            }
        }

        // 1. Start the benchmark and listen on its channel before any sample goes out.
        let start = request::Start {
            includes: settings.includes,
            benchmark_name: settings.benchmark_name,
            ..request::Start::new(settings.script)
        };
        let id = match bench.call(&start).await {
            Ok(started) => started.id,
            Err(e) => {
                self.problem("starting the benchmark", Problem::Bench(&e));
                return self.summary.get();
            }
        };
        self.count(|s| s.id = Some(id));
        self.report(Progress::Started(id));
        {
            let mut channel = self.channel.borrow_mut();
            let mut buf = [0u8; 48];
            let Some(name) = metrics_channel(id, &mut buf) else {
                return self.summary.get();
            };
            let _ = channel.push_str(name);
            if let Err(e) = self
                .rtm
                .subscribe(name, Mode::Reliable, SubscribeArgs::default())
            {
                self.problem("subscribing", Problem::Request(e));
                return self.summary.get();
            }
        }
        if with_timeout(Duration::from_secs(30), self.subscribed.wait())
            .await
            .is_err()
        {
            self.problem(
                "subscribing",
                Problem::Note("no subscribe reply in 30 s (it is retried)"),
            );
        }

        // 2. Its stages, until it runs (`/data` never answers for a failed benchmark).
        let mut stage = Stage::default();
        if self.wait_status(&mut bench, id, &mut stage, true).await {
            // 3. The samples: read, published, acknowledged.
            let publishers = join_array([(); IN_FLIGHT].map(|()| self.publisher()));
            let _ = embassy_futures::join::join(self.read_data(&mut bench, id), publishers).await;
        }

        // 4. The final status, the results, and every sample back.
        let complete = self.wait_status(&mut bench, id, &mut stage, false).await;
        self.count(|s| s.complete = complete);
        match bench.call(&request::Results { id }).await {
            Ok(results) => self.report(Progress::Results(results.iter().count())),
            Err(e) => self.problem("reading the results", Problem::Bench(&e)),
        }
        bench.close().await;
        let deadline = Instant::now() + settings.round_trip_wait;
        let published = self.summary.get().published;
        while self.seen.borrow().distinct() < published {
            if let Either::Second(()) = select(self.arrived.wait(), Timer::at(deadline)).await {
                break;
            }
        }
        let seen = self.seen.borrow();
        self.count(|s| {
            s.received = seen.distinct();
            s.duplicates = seen.duplicates();
        });
        self.summary.get()
    }

    /// Polls `/status` once a second until the benchmark runs (`until_running`) or ends;
    /// true when it runs, or, at the end, when it completed.
    async fn wait_status<T: benchlink_embassy::transport::Transport>(
        &self,
        bench: &mut BenchClient<'_, T>,
        id: u64,
        stage: &mut Stage,
        until_running: bool,
    ) -> bool {
        loop {
            match bench.call(&request::Status { id }).await {
                Ok(status) => {
                    if stage.changed(status.status.as_str()) {
                        self.report(Progress::Stage(status.status.as_str()));
                    }
                    if until_running && status.status == Status::Running {
                        return true;
                    }
                    if status.status.is_final() {
                        return !until_running && status.status == Status::Complete;
                    }
                }
                Err(e) => self.problem("reading the status", Problem::Bench(&e)),
            }
            Timer::after(Duration::from_secs(1)).await;
        }
    }

    /// Reads `/data` to its end, resuming it after every break, into the outbox.
    async fn read_data<T: benchlink_embassy::transport::Transport>(
        &self,
        bench: &mut BenchClient<'_, T>,
        id: u64,
    ) {
        let mut cursor = DataCursor::new(Metrics::<METRICS, MAX_NAME>::new());
        // Samples numbered in the order taken, over every request.
        let mut taken = 0u32;
        loop {
            let mut full = false;
            let streamed = bench
                .data_resumed(id, &mut cursor, |line| {
                    let sample = match line {
                        Ok(sample) => sample,
                        // A bad line, or one that cannot be resumed exactly: counted, not
                        // published.
                        Err(_) => {
                            self.count(|s| s.refused += 1);
                            return ControlFlow::Continue(());
                        }
                    };
                    match self.enqueue(&sample, taken) {
                        Enqueued::Yes => taken += 1,
                        Enqueued::Refused => {
                            taken += 1;
                            self.count(|s| s.refused += 1);
                        }
                        Enqueued::Full => {
                            full = true;
                            return ControlFlow::Break(());
                        }
                    }
                    ControlFlow::Continue(())
                })
                .await;
            let resumed = cursor.resumptions();
            self.count(|s| s.resumed = resumed);
            match streamed {
                Ok(()) if !full => break,
                Ok(()) => {
                    self.report(Progress::DataResumed { taken, cause: None });
                    // Resume once the publishers emptied the outbox.
                    while !self.outbox.borrow().is_empty() {
                        self.room.wait().await;
                    }
                }
                // The client's retries were used up (a server away for long): the agent
                // does not give up on its samples.
                Err(e) => self.report(Progress::DataResumed {
                    taken,
                    cause: Some(Problem::Bench(&e)),
                }),
            }
        }
        self.reading.set(false);
        self.queued.signal(());
    }

    /// Puts sample number `n` into the outbox as its message.
    fn enqueue(&self, sample: &Sample<'_>, n: u32) -> Enqueued {
        let mut buf = [0u8; MESSAGE];
        let Some(message) = sample_message(n, sample, &mut buf) else {
            return Enqueued::Refused;
        };
        if !self.outbox.borrow_mut().push(n, message) {
            return Enqueued::Full;
        }
        self.queued.signal(());
        Enqueued::Yes
    }

    /// One publishing loop: takes a sample from the outbox, publishes it acknowledged,
    /// and publishes it again while the connection drops under it. Ends when `/data`
    /// was read to its end and the outbox is empty.
    async fn publisher(&self) {
        let mut message: String<MESSAGE> = String::new();
        loop {
            let next = self.outbox.borrow_mut().pop(&mut message);
            let Some(n) = next else {
                if !self.reading.get() {
                    // Wake the other loops, which may be waiting too.
                    self.queued.signal(());
                    return;
                }
                self.queued.wait().await;
                continue;
            };
            self.room.signal(());
            if !self.outbox.borrow().is_empty() {
                // Another loop may be waiting: the signal holds one wake-up.
                self.queued.signal(());
            }
            self.publish(n, &message).await;
        }
    }

    /// Publishes sample `n` until the hub acknowledges it (or refuses it).
    async fn publish(&self, n: u32, message: &str) {
        let channel = self.channel.borrow().clone();
        loop {
            let reply = self
                .rtm
                .publish_acked(&channel, message, None, |o| match o {
                    Outcome::Ok(_) => Reply::Acknowledged,
                    Outcome::Disconnected | Outcome::Timeout => Reply::Unknown,
                    Outcome::Error(_) | Outcome::Data(_) => Reply::Refused,
                });
            match reply.await {
                Ok(Reply::Acknowledged) => {
                    self.count(|s| s.published += 1);
                    self.report(Progress::Acknowledged(self.summary.get().published));
                    return;
                }
                Ok(Reply::Unknown) => {
                    self.count(|s| s.republished += 1);
                    self.report(Progress::Republished(n));
                }
                Ok(Reply::Refused) => {
                    self.problem("publishing", Problem::Note("the hub refused a sample"));
                    self.count(|s| s.refused += 1);
                    return;
                }
                Err(e) => {
                    // The queue is full for now (a reconnect is under way): wait for it.
                    self.problem("publishing", Problem::Request(e));
                    self.rtm.wait_for_state(ClientState::Connected).await;
                    Timer::after(Duration::from_millis(100)).await;
                }
            }
        }
    }
}

/// What the hub said to a published sample.
enum Reply {
    Acknowledged,
    /// Nothing before the connection dropped (or the deadline): published again.
    Unknown,
    Refused,
}

/// What became of a sample offered to the outbox.
enum Enqueued {
    Yes,
    /// No room now: break the stream off, resume it later.
    Full,
    /// Its message cannot be written (a name or value too long for [`MESSAGE`]).
    Refused,
}

/// `benchmarks.<id>.metrics`, the std agent's channel name.
fn metrics_channel(id: u64, buf: &mut [u8]) -> Option<&str> {
    let mut out = Out::new(&mut *buf);
    out.push_str("benchmarks.").ok()?;
    out.push_u64(id).ok()?;
    out.push_str(".metrics").ok()?;
    let len = out.len();
    core::str::from_utf8(buf.get(..len)?).ok()
}

/// `{"n":…,"ts":…,"metric":…,"value":…}`, the value's text as the server wrote it (a
/// checked JSON number: no float is parsed or formatted).
fn sample_message<'b>(n: u32, sample: &Sample<'_>, buf: &'b mut [u8]) -> Option<&'b str> {
    let mut out = Out::new(&mut *buf);
    write::object(&mut out, |o| {
        o.u64("n", n.into())?
            .u64("ts", sample.timestamp)?
            .string("metric", sample.name)?
            .raw("value", sample.value.as_str())?;
        Ok(())
    })
    .ok()?;
    let len = out.len();
    core::str::from_utf8(buf.get(..len)?).ok()
}

/// The benchmark's last reported stage, to report each change once.
#[derive(Default)]
struct Stage {
    text: String<24>,
}

impl Stage {
    fn changed(&mut self, status: &str) -> bool {
        if self.text == status {
            return false;
        }
        self.text.clear();
        let _ = self.text.push_str(status);
        true
    }
}

/// xorshift64, for the messaging link's masks and keys from the board's seed.
struct XorShift(u64);

impl rand_core::RngCore for XorShift {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

/// `host[:port]` split, the port defaulting to the benchmark server's 4800: the form of
/// `MZBENCH_API_HOST`, which boards read at build time.
///
/// ```
/// use benchlink_device_agent::host_port;
/// assert_eq!(host_port("10.0.2.100:4801"), Some(("10.0.2.100", 4801)));
/// assert_eq!(host_port("bench.local"), Some(("bench.local", 4800)));
/// assert_eq!(host_port("bench.local:48OO"), None);
/// ```
pub fn host_port(api: &str) -> Option<(&str, u16)> {
    match api.rsplit_once(':') {
        Some((host, port)) => Some((host, port.parse().ok()?)),
        None => Some((api, 4800)),
    }
}

//! The networked device agent on QEMU's mps2-an386: the board (LAN9118, embassy-net with
//! DHCP) and the device agent (`benchlink-device-agent`, the same crate the NUCLEO-F767ZI
//! runs), its progress printed over semihosting as `agent: …` lines, its exit code 0 only
//! when the benchmark completed and every sample made the round trip.
//!
//! `bash .ci/device-agent` builds it and runs it against `benchlink sandbox` (or servers
//! given on its command line) through `run-in-qemu --fwd 4800=… --fwd 8080=…`: the device
//! sees the benchmark server at `10.0.2.100:4800` and the hub at `ws://10.0.2.100:8080`.
//! Build-time settings (`option_env!`, as on the NUCLEO): `BENCHLINK_RTM_APPKEY`,
//! `BENCHLINK_TOKEN`, `BENCHLINK_RTM_ROLE` and `BENCHLINK_RTM_ROLE_SECRET`; and the
//! scenario, `BENCHLINK_SCENARIO` (a file, read by `build.rs`; default `hello.bdl`).
#![no_std]
#![no_main]

use benchlink_core::bench::request::File;
use benchlink_core::rtm::ClientState;
use benchlink_device_agent::{disconnect_kind, Memory, Progress, Report, Settings};
use benchlink_embassy::bench::Server;
use benchlink_embassy::core::rtm::Disconnect;
use benchlink_embassy::rtm::MessagingConfig;
use benchlink_firmware::stack;
use benchlink_mps2_an386::{self as board, exit, Host};
use embassy_executor::Spawner;
use embassy_time::{Duration, Instant};
use static_cell::ConstStaticCell;

/// The benchmark server, as the device sees it: a `run-in-qemu --fwd 4800=PORT` forward.
#[cfg(not(feature = "tls"))]
const BENCH_HOST: &str = "10.0.2.100";
const BENCH_PORT: u16 = 4800;
/// The hub, as the device sees it (`--fwd 8080=PORT`).
#[cfg(not(feature = "tls"))]
const RTM_ENDPOINT: &str = "ws://10.0.2.100:8080";
/// The application key (`BENCHLINK_RTM_APPKEY`; the default is `benchlink sandbox`'s).
const RTM_APPKEY: &str = match option_env!("BENCHLINK_RTM_APPKEY") {
    Some(appkey) => appkey,
    None => "benchlink-test-appkey",
};
const BENCH_TOKEN: Option<&str> = option_env!("BENCHLINK_TOKEN");
const RTM_ROLE: Option<&str> = option_env!("BENCHLINK_RTM_ROLE");
const RTM_ROLE_SECRET: Option<&str> = option_env!("BENCHLINK_RTM_ROLE_SECRET");

/// The scenario chosen at build time (`BENCHLINK_SCENARIO`, else `hello.bdl`: see
/// `build.rs`), and the resource `hello.bdl` includes (sent with any scenario: one that
/// does not include it ignores it).
const SCENARIO: File<'static> = File {
    name: env!("BENCHLINK_SCENARIO_NAME"),
    content: include_bytes!(concat!(env!("OUT_DIR"), "/scenario")),
};
const INCLUDES: &[File<'static>] = &[File {
    name: "data.txt",
    content: include_bytes!("../../../../scenarios/data.txt"),
}];

/// Liveness on a LAN: a ping after 2 s of silence, the hub declared dead after 5 s.
const PING_INTERVAL: Duration = Duration::from_secs(2);
const DEAD_PEER_TIMEOUT: Duration = Duration::from_secs(5);

/// The TLS image's servers, by the name their certificates give (`BENCHLINK_TLS_HOST`:
/// `localhost`, the default, or `127.0.0.1`), which [`HOSTS`] maps to the guestfwd
/// address: `https://localhost:4800` and `wss://localhost:8080`.
#[cfg(feature = "tls")]
const TLS_HOST: &str = match option_env!("BENCHLINK_TLS_HOST") {
    Some(host) => host,
    None => "localhost",
};
/// The host machine's loopback names, as the device reaches them (QEMU's guestfwd): the
/// names the TLS image's certificates are checked for (the plain image uses the address).
#[cfg(feature = "tls")]
const HOSTS: &[(&str, embassy_net::IpAddress)] = &[
    ("localhost", embassy_net::IpAddress::Ipv4(board::HOST)),
    ("127.0.0.1", embassy_net::IpAddress::Ipv4(board::HOST)),
];

#[cfg(feature = "tls")]
mod anchors {
    include!(concat!(env!("OUT_DIR"), "/trust_anchors.rs"));
}

/// When the image was built: the device is later than that, whatever it is told.
#[cfg(feature = "tls")]
const BUILD_UNIX_TIME: &str = env!("BENCHLINK_BUILD_UNIX_TIME");

#[embassy_executor::main(entry = "cortex_m_rt::entry", executor = "board::Executor")]
async fn main(spawner: Spawner) {
    // Before any interrupt is enabled: the painter writes below the live stack.
    stack::paint();
    let mut host = Host::open();
    // The host's entropy, fresh at every start (run-in-qemu): the board has no RNG.
    let Some(seed) = board::host_seed() else {
        host.str("agent: no entropy from the host (start the image with run-in-qemu, which loads a fresh seed)\n");
        exit(false)
    };
    // With TLS a CSPRNG (each connection's key exchange is seeded from it); without, the
    // host's words as they are (see `SeedWords`: no ChaCha20 in the plain image).
    #[cfg(feature = "tls")]
    let mut rng = <rand_chacha::ChaCha20Rng as rand_core::SeedableRng>::from_seed(seed.entropy);
    #[cfg(not(feature = "tls"))]
    let mut rng = board::SeedWords::new(&seed.entropy);
    #[cfg(feature = "tls")]
    {
        benchlink_embassy::tls::set_unix_time_floor(BUILD_UNIX_TIME.parse().unwrap_or(0));
        benchlink_embassy::tls::set_unix_time(seed.unix_time);
    }
    let config = embassy_net::Config::dhcpv4(Default::default());
    let stack_seed = rand_core::RngCore::next_u64(&mut rng);
    let stack = match board::init(spawner, config, stack_seed).await {
        Ok(stack) => stack,
        Err(e) => {
            host.str("agent: ").str(e.as_str()).str("\n");
            exit(false)
        }
    };
    host.str("agent: network up\n");

    #[cfg(feature = "tls")]
    let (bench_host, rtm_endpoint) = {
        let mut url = heapless::String::<80>::new();
        let _ = url.push_str("wss://");
        let _ = url.push_str(TLS_HOST);
        let _ = url.push_str(":8080");
        (TLS_HOST, url)
    };
    #[cfg(feature = "tls")]
    let rtm_endpoint = rtm_endpoint.as_str();
    #[cfg(not(feature = "tls"))]
    let (bench_host, rtm_endpoint) = (BENCH_HOST, RTM_ENDPOINT);
    let mut link = MessagingConfig::new(rtm_endpoint, RTM_APPKEY);
    link.ping_interval = PING_INTERVAL;
    link.dead_peer_timeout = DEAD_PEER_TIMEOUT;
    let mut settings = Settings::new(
        Server {
            token: BENCH_TOKEN,
            ..Server::new(bench_host, BENCH_PORT)
        },
        link,
        SCENARIO,
    );
    settings.includes = INCLUDES;
    #[cfg(feature = "tls")]
    {
        settings.hosts = HOSTS;
        settings.bench_tls = true;
        settings.trust = benchlink_embassy::tls::TrustAnchors::new(anchors::TRUST_ANCHORS);
    }
    settings.benchmark_name = Some("benchlink-device-qemu");
    // The sandbox's benchmarks report every second or so.
    settings.stream_idle = Duration::from_secs(20);
    if let (Some(role), Some(secret)) = (RTM_ROLE, RTM_ROLE_SECRET) {
        settings.role = Some((role, secret.as_bytes()));
    }

    static MEMORY: ConstStaticCell<Memory> = ConstStaticCell::new(Memory::new());
    let started = Instant::now();
    let mut log = Log { host: Host::open() };
    let summary =
        benchlink_device_agent::run_with_rng(stack, &settings, MEMORY.take(), &mut rng, &mut log)
            .await;
    let peak = stack::peak();
    host.str("agent: published ")
        .u64(summary.published.into())
        .str(" samples, subscriber received ")
        .u64(summary.received.into())
        .str(" (/data resumed ")
        .u64(summary.resumed.into())
        .str(" times, reconnected ")
        .u64(summary.reconnected.into())
        .str(" times)\nagent: duplicates ")
        .u64(summary.duplicates.into())
        .str(", republished ")
        .u64(summary.republished.into())
        .str(", refused ")
        .u64(summary.refused.into())
        .str(", benchmark complete: ")
        .str(if summary.complete { "yes" } else { "no" })
        .str("\nagent: ")
        .u64(started.elapsed().as_millis())
        .str(" ms; peak stack ")
        .u64(peak as u64)
        .str(" bytes\n");
    exit(summary.success())
}

/// The agent's progress as `agent: …` lines on the host's terminal, written without
/// `core::fmt` (errors by their kind: the image links no formatting code).
struct Log {
    host: Host,
}

impl Report for Log {
    fn progress(&mut self, progress: Progress<'_>) {
        // Every 25th acknowledgement (and the first, which the fault runs wait for).
        if matches!(progress, Progress::Acknowledged(n) if n != 1 && n % 25 != 0) {
            return;
        }
        let host = self.host.str("agent: ");
        match progress {
            Progress::Messaging(state) => host.str("messaging ").str(state_name(state)),
            Progress::Disconnected(why) => {
                host.str("messaging disconnected: ")
                    .str(disconnect_kind(&why));
                if let Disconnect::DeadPeer { silent } = why {
                    let ms = u64::try_from(silent.as_millis()).unwrap_or(u64::MAX);
                    host.str(" after ").u64(ms).str(" ms of silence");
                }
                host
            }
            Progress::Subscribed => host.str("subscribed"),
            Progress::Started(id) => host.str("started benchmark ").u64(id),
            Progress::Stage(stage) => host.str("benchmark ").str(stage),
            Progress::Acknowledged(n) => host.str("acknowledged ").u64(n.into()).str(" "),
            Progress::DataResumed { taken, cause } => {
                host.str("/data broke after ")
                    .u64(taken.into())
                    .str(" samples (");
                host.str(cause.map_or("outbox full", |c| c.kind()))
                    .str("): resuming")
            }
            Progress::Republished(n) => host.str("sample ").u64(n.into()).str(" published again"),
            Progress::Problem { during, problem } => {
                host.str(during).str(": ").str(problem.kind());
                if let Some(detail) = problem.detail() {
                    host.str(": ").str(detail);
                }
                host
            }
            Progress::Results(metrics) => host.str("results: ").u64(metrics as u64).str(" metrics"),
        };
        self.host.str("\n");
    }
}

/// The client state's name.
fn state_name(state: ClientState) -> &'static str {
    match state {
        ClientState::Stopped => "stopped",
        ClientState::Connecting => "connecting",
        ClientState::Connected => "connected",
        ClientState::Stopping => "stopping",
        ClientState::Awaiting => "awaiting a reconnect",
        ClientState::Disposed => "disposed",
    }
}

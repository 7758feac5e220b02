//! The benchmark agent on a NUCLEO-F767ZI: the STM32F767ZI's Ethernet MAC and the board's
//! LAN8742A PHY, embassy-net with DHCP, and the device agent (`benchlink-device-agent`,
//! `examples/device/agent/`) over it: the same agent that `.ci/device-agent` runs on an
//! emulated Cortex-M4 in CI, so what CI runs is what this board runs. This file is only
//! the board: clocks, RNG, Ethernet, the network stack, and where the agent's progress
//! goes (defmt over RTT; `probe-rs run` prints it).
//!
//! With the feature `tls` the same agent speaks `https://` and `wss://` (the URLs
//! choose) through the embassy adapter's `TlsTransport`, verifying the servers against
//! the CA certificates compiled in from `BENCHLINK_CA_PEM` (`build.rs`). Every random
//! byte — the TLS key exchange, the WebSocket masks and keys, the network stack's seed —
//! comes from the STM32's RNG peripheral, a true random source; nothing is a constant
//! of the image.
//!
//! The servers and credentials are build-time settings: see [`BENCH_API`] and README.md.
#![no_std]
#![no_main]

use benchlink_core::bench::request::File;
use benchlink_device_agent::{Memory, Problem, Progress, Report, Settings};
use benchlink_embassy::bench::{parse_url, Server};
use benchlink_embassy::rtm::MessagingConfig;
use defmt::{error, info, warn};
use embassy_executor::Spawner;
use embassy_net::StackResources;
use embassy_stm32::eth::{self, Ethernet, GenericPhy, PacketQueue, Sma};
use embassy_stm32::peripherals::{ETH, ETH_SMA, RNG};
use embassy_stm32::rng::{self, Rng};
use embassy_stm32::time::Hertz;
use embassy_stm32::{bind_interrupts, Config};
use static_cell::ConstStaticCell;
use {defmt_rtt as _, panic_probe as _};

// ---- Build-time settings (the std agent's environment variables, read by `option_env!`).

/// The benchmark server (`MZBENCH_API_HOST`): `host[:port]` (plain HTTP, port 4800 by
/// default), `http://host[:port]` or, with the feature `tls`, `https://host[:port]` (port
/// 443 by default). A name is resolved through the DNS server DHCP announced.
const BENCH_API: &str = match option_env!("MZBENCH_API_HOST") {
    Some(host) => host,
    None if cfg!(feature = "tls") => "https://192.168.1.10:4800",
    None => "192.168.1.10:4800",
};
/// Bearer token for the benchmark server (`BENCHLINK_TOKEN`), if it wants one.
const BENCH_TOKEN: Option<&str> = option_env!("BENCHLINK_TOKEN");
/// The messaging service (`BENCHLINK_RTM_ENDPOINT`): `ws://host[:port][/path]`, or with
/// the feature `tls` also `wss://…`.
const RTM_ENDPOINT: &str = match option_env!("BENCHLINK_RTM_ENDPOINT") {
    Some(endpoint) => endpoint,
    None if cfg!(feature = "tls") => "wss://192.168.1.10:8080",
    None => "ws://192.168.1.10:8080",
};
/// The application key (`BENCHLINK_RTM_APPKEY`; the default is `benchlink sandbox`'s).
const RTM_APPKEY: &str = match option_env!("BENCHLINK_RTM_APPKEY") {
    Some(appkey) => appkey,
    None => "benchlink-test-appkey",
};
/// Role and secret (`BENCHLINK_RTM_ROLE`, `BENCHLINK_RTM_ROLE_SECRET`): when both are set
/// the client authenticates first (and again after every reconnect).
const RTM_ROLE: Option<&str> = option_env!("BENCHLINK_RTM_ROLE");
const RTM_ROLE_SECRET: Option<&str> = option_env!("BENCHLINK_RTM_ROLE_SECRET");

/// The repository's example scenario (two workers printing a line once a second for
/// 10 s) and the resource it includes, as `benchlink bench run` uploads them.
const SCENARIO: File<'static> = File {
    name: "hello.bdl",
    content: include_bytes!("../../../scenarios/hello.bdl"),
};
const INCLUDES: &[File<'static>] = &[File {
    name: "data.txt",
    content: include_bytes!("../../../scenarios/data.txt"),
}];

/// The CA certificates the TLS image trusts (DER), from `BENCHLINK_CA_PEM` (`build.rs`).
#[cfg(feature = "tls")]
mod anchors {
    include!(concat!(env!("OUT_DIR"), "/trust_anchors.rs"));
}

/// When the image was built: the board is later than that, whatever else it knows (it has
/// no set clock: certificates that expired before the build are refused, `notBefore` is
/// not checked; see README.md).
#[cfg(feature = "tls")]
const BUILD_UNIX_TIME: &str = env!("BENCHLINK_BUILD_UNIX_TIME");

/// Locally administered unicast MAC; give every board its own.
const MAC: [u8; 6] = [0x02, 0x00, 0xbe, 0x4c, 0x14, 0x01];

type Device = Ethernet<'static, ETH, GenericPhy<Sma<'static, ETH_SMA>>>;

bind_interrupts!(struct Irqs {
    ETH => eth::InterruptHandler;
    RNG => rng::InterruptHandler<RNG>;
});

#[embassy_executor::task]
async fn net_task(mut runner: embassy_net::Runner<'static, Device>) -> ! {
    runner.run().await
}

/// The agent's progress, logged with defmt.
struct Log;

impl Report for Log {
    fn progress(&mut self, progress: Progress<'_>) {
        match progress {
            Progress::Messaging(state) => info!("messaging: {}", state),
            Progress::Disconnected(why) => warn!("messaging disconnected: {}", why),
            Progress::Subscribed => info!("subscribed to the metrics channel"),
            Progress::Started(id) => info!("started benchmark {=u64}", id),
            Progress::Stage(stage) => info!("benchmark: {=str}", stage),
            Progress::DataResumed { taken, cause } => match cause {
                Some(e) => warn!("/data broke after {=u32} samples ({}): resuming", taken, e),
                None => info!(
                    "/data paused after {=u32} samples (publish queue full)",
                    taken
                ),
            },
            Progress::Acknowledged(n) => defmt::debug!("{=u32} samples acknowledged", n),
            Progress::Republished(n) => warn!("sample {=u32} published again", n),
            // A connection's refusal in words (a TLS certificate: `certificate refused:
            // unknown issuer (not signed by a trusted CA)`, wrong name, expired, …).
            Progress::Problem { during, problem } => match (problem.detail(), problem) {
                (Some(why), _) => error!("{=str}: {=str}: {=str}", during, problem.kind(), why),
                (None, Problem::Connect(e)) => error!("{=str}: {=str}", during, e.as_str()),
                (None, _) => warn!("{=str}: {}", during, problem),
            },
            Progress::Results(metrics) => info!("results: {=usize} metrics", metrics),
        }
    }
}

#[embassy_executor::main]
async fn main(spawner: Spawner) {
    let p = embassy_stm32::init(clocks());
    info!("benchlink agent on a NUCLEO-F767ZI");

    // The STM32's true RNG (`rand_core` 0.9 `RngCore + CryptoRng`): the network stack's
    // seed here; the agent draws the seed of the WebSocket masks and keys, the retry
    // jitter and the multipart boundaries from it, and with `tls` seeds a ChaCha20
    // generator from it for each TLS connection's key exchange.
    let mut rng = Rng::new(p.RNG, Irqs);
    let net_seed = rng.next_u64();
    #[cfg(feature = "tls")]
    benchlink_embassy::tls::set_unix_time_floor(BUILD_UNIX_TIME.parse().unwrap_or(0));

    // RMII wiring of the NUCLEO-144 boards (UM1974, solder bridges as shipped).
    static PACKETS: ConstStaticCell<PacketQueue<4, 4>> = ConstStaticCell::new(PacketQueue::new());
    let device = Ethernet::new(
        PACKETS.take(),
        p.ETH,
        Irqs,
        p.PA1,  // REF_CLK
        p.PA7,  // CRS_DV
        p.PC4,  // RXD0
        p.PC5,  // RXD1
        p.PG13, // TXD0
        p.PB13, // TXD1
        p.PG11, // TX_EN
        MAC,
        p.ETH_SMA,
        p.PA2, // MDIO
        p.PC1, // MDC
    );

    // DHCP, DNS and the two TCP sockets (benchmark server, messaging).
    static RESOURCES: ConstStaticCell<StackResources<4>> =
        ConstStaticCell::new(StackResources::new());
    let config = embassy_net::Config::dhcpv4(Default::default());
    let (stack, runner) = embassy_net::new(device, config, RESOURCES.take(), net_seed);
    spawner.spawn(defmt::unwrap!(net_task(runner)));

    info!("waiting for the link and a DHCP lease");
    stack.wait_config_up().await;
    if let Some(config) = stack.config_v4() {
        info!("address {}, gateway {}", config.address, config.gateway);
    }

    let Some((host, port, bench_tls)) = parse_url(BENCH_API) else {
        error!(
            "MZBENCH_API_HOST is not [http[s]://]host[:port]: {=str}",
            BENCH_API
        );
        return;
    };
    if cfg!(not(feature = "tls")) && (bench_tls || RTM_ENDPOINT.starts_with("wss://")) {
        error!("https:// and wss:// need the image built with `--features tls`");
        return;
    }
    let mut settings = Settings::new(
        Server {
            token: BENCH_TOKEN,
            ..Server::new(host, port)
        },
        MessagingConfig::new(RTM_ENDPOINT, RTM_APPKEY),
        SCENARIO,
    );
    settings.includes = INCLUDES;
    settings.benchmark_name = Some("benchlink-nucleo-f767zi");
    settings.bench_tls = bench_tls;
    #[cfg(feature = "tls")]
    {
        settings.trust = benchlink_embassy::tls::TrustAnchors::new(anchors::TRUST_ANCHORS);
    }
    if let (Some(role), Some(secret)) = (RTM_ROLE, RTM_ROLE_SECRET) {
        settings.role = Some((role, secret.as_bytes()));
    }

    static MEMORY: ConstStaticCell<Memory> = ConstStaticCell::new(Memory::new());
    let summary =
        benchlink_device_agent::run_with_rng(stack, &settings, MEMORY.take(), &mut rng, &mut Log)
            .await;
    info!(
        "published {=u32} samples, subscriber received {=u32} (/data resumed {=u32} times, reconnected {=u32} times)",
        summary.published, summary.received, summary.resumed, summary.reconnected
    );
    if summary.success() {
        info!("agent: OK");
    } else {
        error!(
            "agent: benchmark complete: {=bool}, refused {=u32}, lost {=u32}",
            summary.complete,
            summary.refused,
            summary.published.saturating_sub(summary.received)
        );
    }
}

/// 216 MHz from the ST-LINK's 8 MHz MCO (HSE bypass), 48 MHz on PLL Q for the RNG.
fn clocks() -> Config {
    use embassy_stm32::rcc::{
        AHBPrescaler, APBPrescaler, Hse, HseMode, Pll, PllMul, PllPDiv, PllPreDiv, PllQDiv,
        PllSource, Sysclk,
    };
    let mut config = Config::default();
    config.rcc.hse = Some(Hse {
        freq: Hertz(8_000_000),
        mode: HseMode::Bypass,
    });
    config.rcc.pll_src = PllSource::HSE;
    config.rcc.pll = Some(Pll {
        prediv: PllPreDiv::DIV4,
        mul: PllMul::MUL216,
        divp: Some(PllPDiv::DIV2), // 8 MHz / 4 × 216 / 2 = 216 MHz
        divq: Some(PllQDiv::DIV9), // 432 MHz / 9 = 48 MHz
        divr: None,
    });
    config.rcc.ahb_pre = AHBPrescaler::DIV1;
    config.rcc.apb1_pre = APBPrescaler::DIV4;
    config.rcc.apb2_pre = APBPrescaler::DIV2;
    config.rcc.sys = Sysclk::PLL1_P;
    config
}

//! The benchmark agent on a NUCLEO-F767ZI: the STM32F767ZI's Ethernet MAC and the board's
//! LAN8742A PHY, embassy-net with DHCP, and both benchlink protocols over it.
//!
//! The flow is the std agent's (`examples/src/bin/agent.rs`) on a microcontroller:
//!
//! 1. Ethernet up, an address from DHCP; the messaging runner starts connecting.
//! 2. `POST /start` of the scenario embedded below ([`SCENARIO`]).
//! 3. Subscribe to `benchmarks.<id>.metrics` (to count the samples back), poll `/status`
//!    until the benchmark runs.
//! 4. Stream `/data`; every metric sample is published to the channel as
//!    `{"ts":…,"metric":…,"value":…}`, the value forwarded as the server wrote it (no
//!    float formatting in the image).
//! 5. `/status` until final, `/results`, and the summary line
//!    `published N samples, subscriber received M`.
//!
//! Everything is logged with defmt over RTT (`probe-rs run` prints it). The servers and
//! credentials are build-time settings: see [`BENCH_API`] and README.md.
#![no_std]
#![no_main]

use core::ops::ControlFlow;
use core::sync::atomic::{AtomicU32, Ordering};

use benchlink_core::bench::request::{self, File};
use benchlink_core::bench::{Sample, Status};
use benchlink_core::http::Cursor;
use benchlink_core::json::write;
use benchlink_core::rtm::{ClientState, Config as RtmConfig, Mode, SubState, SubscribeArgs};
use benchlink_embassy::bench::{BenchClient, Buffers, Server, Timeouts};
use benchlink_embassy::rtm::{Event, LinkConfig, Messaging, RunnerBuffers};
use benchlink_embassy::transport::TcpTransport;
use defmt::{error, info, warn};
use embassy_executor::Spawner;
use embassy_net::StackResources;
use embassy_stm32::eth::{self, Ethernet, GenericPhy, PacketQueue, Sma};
use embassy_stm32::peripherals::{ETH, ETH_SMA, RNG};
use embassy_stm32::rng::{self, Rng};
use embassy_stm32::time::Hertz;
use embassy_stm32::{bind_interrupts, Config};
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::signal::Signal;
use embassy_time::{with_timeout, Duration, Instant, Timer};
use static_cell::{ConstStaticCell, StaticCell};
use {defmt_rtt as _, panic_probe as _};

// ---- Build-time settings (the std agent's environment variables, read by `option_env!`).

/// The benchmark server, `host[:port]` (`MZBENCH_API_HOST`; the port defaults to 4800).
/// A name is resolved through the DNS server DHCP announced.
const BENCH_API: &str = match option_env!("MZBENCH_API_HOST") {
    Some(host) => host,
    None => "192.168.1.10:4800",
};
/// Bearer token for the benchmark server (`BENCHLINK_TOKEN`), if it wants one.
const BENCH_TOKEN: Option<&str> = option_env!("BENCHLINK_TOKEN");
/// The messaging service (`BENCHLINK_RTM_ENDPOINT`): `ws://host[:port][/path]` (no TLS).
const RTM_ENDPOINT: &str = match option_env!("BENCHLINK_RTM_ENDPOINT") {
    Some(endpoint) => endpoint,
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

/// The scenario, uploaded as `board.bdl`: one worker printing a line once a second for
/// 20 s, so the `/data` stream carries a few dozen samples.
const SCENARIO: &str = "#!benchDL
# benchlink hardware example (NUCLEO-F767ZI): one dummy worker, 1 rps for 20 s.
pool(size = 1,
     worker_type = dummy_worker):
        loop(time = 20 sec,
             rate = 1 rps):
            print(\"hello from an STM32F767\")
";

/// Locally administered unicast MAC; give every board its own.
const MAC: [u8; 6] = [0x02, 0x00, 0xbe, 0x4c, 0x14, 0x01];

// ---- Memory: capacities of the messaging client and the buffers of both clients.

/// 1 subscription, 4 acknowledged requests in flight, 4 KiB of queue (the samples of one
/// 512-byte `/data` read, about 180 bytes each as queued PDUs, are published before the
/// runner sends any: twice that fits), 512-byte PDUs, 16 events of 256-byte messages.
type Rtm = Messaging<CriticalSectionRawMutex, 1, 4, 4096, 512, 16, 256>;
/// The samples that came back on the subscription.
static RECEIVED: AtomicU32 = AtomicU32::new(0);
/// The subscription is live.
static SUBSCRIBED: Signal<CriticalSectionRawMutex, ()> = Signal::new();

type Device = Ethernet<'static, ETH, GenericPhy<Sma<'static, ETH_SMA>>>;

bind_interrupts!(struct Irqs {
    ETH => eth::InterruptHandler;
    RNG => rng::InterruptHandler<RNG>;
});

#[embassy_executor::task]
async fn net_task(mut runner: embassy_net::Runner<'static, Device>) -> ! {
    runner.run().await
}

/// The messaging runner: owns its TCP socket and carries the link's bytes (the link in
/// `Rtm` connects, upgrades, pings, reconnects).
#[embassy_executor::task]
async fn rtm_task(rtm: &'static Rtm, transport: TcpTransport<'static>) -> ! {
    // One socket read, or a slice of the unsent bytes on its way to the socket.
    static CHUNK: ConstStaticCell<[u8; 1024]> = ConstStaticCell::new([0; 1024]);
    rtm.run(transport, CHUNK.take()).await
}

/// The messaging client's events: states are logged, the channel's messages counted.
#[embassy_executor::task]
async fn events_task(rtm: &'static Rtm) -> ! {
    loop {
        match rtm.next_event().await {
            Event::State(state) => info!("messaging: {}", state),
            Event::Subscription { key, state } => {
                info!("subscription {=str}: {}", key.as_str(), state);
                if state == SubState::Subscribed {
                    SUBSCRIBED.signal(());
                }
            }
            Event::Data { .. } => {
                RECEIVED.fetch_add(1, Ordering::Relaxed);
            }
            other => warn!("messaging: {}", other),
        }
    }
}

#[embassy_executor::main]
async fn main(spawner: Spawner) {
    let p = embassy_stm32::init(clocks());
    info!("benchlink agent on a NUCLEO-F767ZI");

    let mut rng = Rng::new(p.RNG, Irqs);
    let mut seeds = [0u8; 16];
    rng.fill_bytes(&mut seeds);
    let [net_seed, jitter_seed] = [&seeds[..8], &seeds[8..]].map(|s| {
        let mut b = [0u8; 8];
        b.copy_from_slice(s);
        u64::from_le_bytes(b)
    });

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

    // Messaging: the runner task owns one socket; this task and the events task use the
    // handle. A device keeps retrying its first connect too.
    // The link's memory: the largest incoming message, and the unsent bytes (at least the
    // 512-byte PDUs + 1 KiB for the upgrade request and its answer).
    static MESSAGE: ConstStaticCell<[u8; 2048]> = ConstStaticCell::new([0; 2048]);
    static TX: ConstStaticCell<[u8; 1536]> = ConstStaticCell::new([0; 1536]);
    let buffers = RunnerBuffers {
        message: MESSAGE.take(),
        tx: TX.take(),
    };
    let config = RtmConfig {
        jitter_seed: jitter_seed | 1,
        retry_first_connect: true,
        ..RtmConfig::default()
    };
    let link = LinkConfig::new(RTM_ENDPOINT, RTM_APPKEY);
    let rtm = match Rtm::new(config, link, buffers, &mut rng) {
        Ok(rtm) => rtm,
        Err(e) => {
            error!("BENCHLINK_RTM_ENDPOINT or _APPKEY refused: {}", e);
            return;
        }
    };
    static RTM: StaticCell<Rtm> = StaticCell::new();
    let rtm: &'static Rtm = RTM.init(rtm);
    static RTM_RX: ConstStaticCell<[u8; 2048]> = ConstStaticCell::new([0; 2048]);
    static RTM_TX: ConstStaticCell<[u8; 2048]> = ConstStaticCell::new([0; 2048]);
    let rtm_socket = TcpTransport::new(stack, RTM_RX.take(), RTM_TX.take());
    spawner.spawn(defmt::unwrap!(rtm_task(rtm, rtm_socket)));
    spawner.spawn(defmt::unwrap!(events_task(rtm)));
    rtm.start();

    // The benchmark client: a plain value owned by this task.
    static BENCH_RX: ConstStaticCell<[u8; 2048]> = ConstStaticCell::new([0; 2048]);
    static BENCH_TX: ConstStaticCell<[u8; 2048]> = ConstStaticCell::new([0; 2048]);
    // Socket reads of 512 B: one read carries at most a dozen `/data` lines, all of which
    // are published before the messaging runner gets to send (see `Rtm`).
    static READ: ConstStaticCell<[u8; 512]> = ConstStaticCell::new([0; 512]);
    static REQUEST: ConstStaticCell<[u8; 512]> = ConstStaticCell::new([0; 512]);
    static HEAD: ConstStaticCell<[u8; 1024]> = ConstStaticCell::new([0; 1024]);
    static BODY: ConstStaticCell<[u8; 4096]> = ConstStaticCell::new([0; 4096]);
    static LINE: ConstStaticCell<[u8; 256]> = ConstStaticCell::new([0; 256]);
    let bench_socket = TcpTransport::new(stack, BENCH_RX.take(), BENCH_TX.take());
    let buffers = Buffers {
        rx: READ.take(),
        tx: REQUEST.take(),
        head: HEAD.take(),
        body: BODY.take(),
        line: LINE.take(),
    };
    let (host, port) = host_port(BENCH_API);
    let server = Server {
        token: BENCH_TOKEN,
        ..Server::new(host, port)
    };
    let Ok(bench) = BenchClient::new(bench_socket, server, buffers) else {
        error!("MZBENCH_API_HOST is too long: {=str}", BENCH_API);
        return;
    };
    // The real server reports metrics every 10 s: a minute of silence is a dead stream.
    let mut bench = bench.with_timeouts(Timeouts {
        stream_idle: Some(Duration::from_secs(60)),
        ..Timeouts::default()
    });

    match with_timeout(
        Duration::from_secs(30),
        rtm.wait_for_state(ClientState::Connected),
    )
    .await
    {
        Ok(()) => info!("messaging connected to {=str}", RTM_ENDPOINT),
        Err(_) => warn!("messaging not connected yet: samples wait in its queue"),
    }
    if let (Some(role), Some(secret)) = (RTM_ROLE, RTM_ROLE_SECRET) {
        match rtm
            .authenticate(role, secret.as_bytes(), Some(Duration::from_secs(10)))
            .await
        {
            Ok(reply) if reply.is_ok() => info!("authenticated as {=str}", role),
            Ok(reply) => {
                error!("authentication as {=str} failed: {}", role, reply);
                return;
            }
            Err(e) => {
                error!("authentication as {=str} refused: {}", role, e);
                return;
            }
        }
    }

    // 1. Start the benchmark.
    let start = request::Start {
        benchmark_name: Some("benchlink-nucleo-f767zi"),
        ..request::Start::new(File {
            name: "board.bdl",
            content: SCENARIO.as_bytes(),
        })
    };
    let id = match bench.call(&start).await {
        Ok(started) => started.id,
        Err(e) => {
            error!("starting the benchmark on {=str}: {}", BENCH_API, e);
            return;
        }
    };
    let mut channel_buf = [0u8; 48];
    let Some(channel) = metrics_channel(id, &mut channel_buf) else {
        return;
    };
    info!(
        "started benchmark {=u64}; publishing its metrics to {=str}",
        id, channel
    );

    // 2. Listen on the channel before the first sample goes out.
    match rtm.subscribe(channel, Mode::Reliable, SubscribeArgs::default()) {
        Ok(()) => {
            if with_timeout(Duration::from_secs(10), SUBSCRIBED.wait())
                .await
                .is_err()
            {
                warn!("no subscribe reply in 10 s: counting what arrives anyway");
            }
        }
        Err(e) => warn!("subscribing to {=str}: {}", channel, e),
    }

    // 3. Its stages, until it runs (`/data` does not answer for a failed benchmark).
    let mut stage = Stage::default();
    let running = loop {
        match bench.call(&request::Status { id }).await {
            Ok(status) => {
                stage.report(status.status.as_str());
                if status.status == Status::Running {
                    break true;
                }
                if status.status.is_final() {
                    break false;
                }
            }
            Err(e) => warn!("status: {}", e),
        }
        Timer::after(Duration::from_secs(1)).await;
    };

    // 4. The samples, published as they arrive.
    let (mut published, mut refused) = (0u32, 0u32);
    if running {
        let streamed = bench
            .stream(&request::Data { id }, |line| {
                let Ok(sample) = line else {
                    warn!("skipping a bad /data line");
                    return ControlFlow::Continue(());
                };
                let mut buf = [0u8; 192];
                match sample_message(&sample, &mut buf) {
                    Some(message) => match rtm.publish(channel, message) {
                        Ok(()) => published += 1,
                        Err(e) => {
                            refused += 1;
                            warn!("publish refused: {}", e);
                        }
                    },
                    None => refused += 1,
                }
                ControlFlow::Continue(())
            })
            .await;
        if let Err(e) = streamed {
            warn!("/data ended with an error: {}", e);
        }
        info!("/data ended after {=u32} samples", published + refused);
    }

    // 5. The final status and the results.
    let complete = loop {
        match bench.call(&request::Status { id }).await {
            Ok(status) => {
                stage.report(status.status.as_str());
                if status.status.is_final() {
                    break status.status == Status::Complete;
                }
            }
            Err(e) => warn!("status: {}", e),
        }
        Timer::after(Duration::from_secs(1)).await;
    };
    match bench.call(&request::Results { id }).await {
        Ok(results) => {
            for (name, metric) in &results {
                info!("result {}: {} {}", name, metric.kind, metric.value);
            }
        }
        Err(e) => warn!("results: {}", e),
    }
    bench.close().await;

    // Every sample makes the round trip through the messaging service (give it 10 s).
    let deadline = Instant::now() + Duration::from_secs(10);
    while RECEIVED.load(Ordering::Relaxed) < published && Instant::now() < deadline {
        Timer::after(Duration::from_millis(100)).await;
    }
    let received = RECEIVED.load(Ordering::Relaxed);
    info!(
        "published {=u32} samples, subscriber received {=u32}",
        published, received
    );
    if complete && refused == 0 && received == published {
        info!("agent: OK");
    } else {
        error!(
            "agent: benchmark complete: {=bool}, refused {=u32}, lost {=u32}",
            complete,
            refused,
            published.saturating_sub(received)
        );
    }
    rtm.stop();
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

/// `host[:port]` split, the port defaulting to the server's 4800.
fn host_port(api: &str) -> (&str, u16) {
    match api.rsplit_once(':') {
        Some((host, port)) => (host, port.parse().unwrap_or(4800)),
        None => (api, 4800),
    }
}

/// `benchmarks.<id>.metrics`, the std agent's channel name.
fn metrics_channel(id: u64, buf: &mut [u8]) -> Option<&str> {
    let mut out = Cursor::new(&mut *buf);
    out.push_str("benchmarks.").ok()?;
    out.push_u64(id).ok()?;
    out.push_str(".metrics").ok()?;
    let len = out.len();
    core::str::from_utf8(buf.get(..len)?).ok()
}

/// `{"ts":…,"metric":…,"value":…}`, the value's text as the server wrote it (a checked
/// JSON number: no float is parsed or formatted).
fn sample_message<'b>(sample: &Sample<'_>, buf: &'b mut [u8]) -> Option<&'b str> {
    let mut out = Cursor::new(&mut *buf);
    write::object(&mut out, |o| {
        o.u64("ts", sample.timestamp)?
            .string("metric", sample.name)?
            .raw("value", sample.value.as_str())?;
        Ok(())
    })
    .ok()?;
    let len = out.len();
    core::str::from_utf8(buf.get(..len)?).ok()
}

/// The benchmark's last reported stage, to log each change once.
#[derive(Default)]
struct Stage {
    text: [u8; 24],
    len: usize,
}

impl Stage {
    fn report(&mut self, status: &str) {
        if self.text.get(..self.len) == Some(status.as_bytes()) {
            return;
        }
        info!("benchmark: {=str}", status);
        let n = status.len().min(self.text.len());
        self.text[..n].copy_from_slice(&status.as_bytes()[..n]);
        self.len = n;
    }
}

//! `benchlink sandbox`: the local servers in the foreground — the benchmark server and the
//! RTM server — for demos and for pointing other clients (the official `mzbench` CLI, an
//! RTM SDK, other `benchlink` processes, a board on the LAN) at. Everything the servers
//! can do from Rust is a flag here: the listen address, token users, the real server's
//! quirks, the faults, the limits. The faults and observations that only make sense
//! while the servers run (drop connections now, crash benchmark 3, who is connected)
//! are on the control endpoint (`--control-port`). `--latency` and `--cut-every` put
//! both servers behind relays (`benchlink_sandbox::relay`): a long link, one that cuts.
//! `--tls-cert`/`--tls-key` make both servers TLS servers (`https://`, `wss://`) on their
//! ports (`benchlink_sandbox::tls`).

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};

use benchlink_sandbox::bench::{
    BenchFault, BenchServer, BenchServerConfig, Fault, LogCompression, Speed, User, STAGES,
};
use benchlink_sandbox::control::{ControlServer, Relays};
use benchlink_sandbox::relay::{CutSchedule, Relay, RelayConfig};
use benchlink_sandbox::rtm::{
    RtmServer, RtmServerConfig, SocketFault, DEFAULT_APPKEY, SUPERUSER_ROLE, SUPERUSER_SECRET,
};
use benchlink_sandbox::tls::ServerTls;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Pace {
    /// Stages take about a quarter of a second, a benchmark a few seconds.
    Demo,
    /// Everything in milliseconds, for tests.
    Fast,
    /// Close to a small real benchmark: a second per stage, real scenario time.
    Realistic,
}

/// A misbehaving benchmark server, to see what clients do about it.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum FaultArg {
    /// Never answer (connections stay open).
    Silent,
    /// Answer one byte at a time (see --drip-ms).
    Drip,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Compression {
    /// One zlib stream with sync flushes, like the real server.
    Deflate,
    /// Plain text.
    Identity,
}

/// A misbehaving RTM server (applied to every connection).
#[derive(Debug, Clone, Copy, ValueEnum)]
enum RtmFaultArg {
    /// WebSocket pings back to back, forever.
    PingFlood,
    /// `rtm/subscription/data` back to back for --rtm-flood-subscription.
    DataFlood,
    /// A text message that never ends (continuation frames forever).
    EndlessMessage,
    /// Neither read nor write; keep the connection open.
    Silent,
}

#[derive(Debug, Args)]
#[allow(clippy::struct_excessive_bools)] // one switch per quirk of the real server
pub(super) struct SandboxArgs {
    /// Address both servers listen on (0.0.0.0: every interface, for boards on the LAN).
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST), value_name = "ADDR")]
    listen: IpAddr,
    /// Port of the benchmark server (0 picks any free port).
    #[arg(long, default_value_t = 4800)]
    port: u16,
    /// How fast benchmarks run.
    #[arg(long, value_enum, default_value = "demo")]
    pace: Pace,
    /// Require `Authorization: Bearer <token>` with this token, for the login `user`
    /// (repeatable).
    #[arg(long)]
    token: Vec<String>,
    /// Require tokens, and accept this one for this login (repeatable). Users may stop,
    /// change and command only the benchmarks they started (else 403).
    #[arg(long, value_name = "LOGIN=TOKEN", value_parser = parse_user)]
    user: Vec<User>,
    /// Make this --user login an admin, who may act on every benchmark (repeatable).
    #[arg(long, value_name = "LOGIN")]
    admin: Vec<String>,
    /// Behave like the real server where the default is friendlier or follows the seed
    /// document: `/data` never answers for a failed benchmark, `/server_logs` is 404,
    /// `/email_report` does not split a comma-separated `addr`, `/remove_cluster_info` of
    /// an unknown cluster is `200 {}`.
    #[arg(long)]
    faithful: bool,
    /// `/data` on a failed benchmark never answers (like the real server).
    #[arg(long)]
    data_hangs_on_failed: bool,
    /// `/server_logs` answers 404 (like the latest real server).
    #[arg(long)]
    server_logs_removed: bool,
    /// A missing required parameter gives 400 `badarg`, as on OTP 17 (default: 500).
    #[arg(long)]
    missing_param_400: bool,
    /// `/change_env` before `running` gives 400 `not_running` (default: 500).
    #[arg(long)]
    change_env_not_running_400: bool,
    /// Keep the connection after a `/typecheck` reply (the real server closes it).
    #[arg(long)]
    typecheck_keeps_connection: bool,
    /// Storage and content-encoding of `/log` and `/userlog`.
    #[arg(long, value_enum, default_value = "deflate")]
    log_compression: Compression,
    /// Make the benchmark server misbehave on every connection.
    #[arg(long, value_enum)]
    fault: Option<FaultArg>,
    /// Delay every byte of every connection to either server by MS milliseconds in each
    /// direction (a round trip of 2×MS), keeping their order: a server across a real
    /// network, for benchmarks. The servers then listen on free ports behind relays that
    /// take the advertised ones.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    latency: u64,
    /// Cut every connection to either server at random intervals of MIN_MS to MAX_MS
    /// milliseconds (each server's relay its own schedule; a cut closes all it carries,
    /// both sides): what load balancers, NAT rebinding and restarted proxies do to long
    /// streams. The servers then listen on free ports behind relays that take the
    /// advertised ones; the banner prints both addresses.
    #[arg(long, value_name = "MIN_MS-MAX_MS", value_parser = parse_range)]
    cut_every: Option<(u64, u64)>,
    /// Seed of the --cut-every schedules (the benchmark server's relay uses SEED, the RTM
    /// server's SEED+1): the same seed, the same intervals. Default: random; always printed.
    #[arg(long, value_name = "N", requires = "cut_every")]
    seed: Option<u64>,
    /// Pause after each byte with --fault drip, in milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    drip_ms: u64,
    /// Every benchmark crashes (status failed, reason crashed) when it reaches STAGE.
    #[arg(long, value_name = "STAGE", value_parser = parse_stage, conflicts_with = "zombie_at")]
    crash_at: Option<String>,
    /// Every benchmark turns zombie (as if the server had died) when it reaches STAGE.
    #[arg(long, value_name = "STAGE", value_parser = parse_stage)]
    zombie_at: Option<String>,
    /// For throughput measurements: every `/data` reply starts with this many generated
    /// metric lines, one chunk each, sent from memory.
    #[arg(long, default_value_t = 0, value_name = "LINES")]
    data_flood: usize,
    /// Open connections at most (the one waiting longest for a request makes room).
    #[arg(long, default_value_t = BenchServerConfig::default().max_connections, value_name = "N")]
    max_connections: usize,
    /// Threads answering requests (each stream holds one while it lasts).
    #[arg(long, default_value_t = BenchServerConfig::default().workers, value_name = "N")]
    workers: usize,
    /// Time for a request head from its first byte, in milliseconds (then 408).
    #[arg(long, default_value_t = ms(BenchServerConfig::default().header_timeout), value_name = "MS")]
    header_timeout_ms: u64,
    /// Time a connection may stay silent before a request or between keep-alive
    /// requests, in milliseconds (then it is closed).
    #[arg(long, default_value_t = ms(BenchServerConfig::default().keep_alive_timeout), value_name = "MS")]
    idle_timeout_ms: u64,
    /// Longest pause inside a request body, in milliseconds (then 408).
    #[arg(long, default_value_t = ms(BenchServerConfig::default().body_timeout), value_name = "MS")]
    body_timeout_ms: u64,
    /// Largest request body in bytes (then 413).
    #[arg(long, default_value_t = BenchServerConfig::default().max_body, value_name = "BYTES")]
    max_body: usize,
    /// Memory for the request bodies of all connections together, in bytes (then 503).
    #[arg(long, default_value_t = BenchServerConfig::default().body_budget, value_name = "BYTES")]
    body_budget: usize,
    /// Port of the RTM (messaging) server (0 picks any free port).
    #[arg(long, default_value_t = 8080)]
    rtm_port: u16,
    /// Make the RTM server misbehave on every connection.
    #[arg(long, value_enum, requires_if("data-flood", "rtm_flood_subscription"))]
    rtm_fault: Option<RtmFaultArg>,
    /// The subscription id that --rtm-fault data-flood floods.
    #[arg(long, value_name = "ID")]
    rtm_flood_subscription: Option<String>,
    /// The raw JSON of each message of --rtm-fault data-flood.
    #[arg(long, default_value = r#"{"n":1}"#, value_name = "JSON")]
    rtm_flood_message: String,
    /// Serve the control endpoint on this port (0 picks any free port): HTTP endpoints
    /// for the runtime faults and observations of both servers (`curl
    /// http://ADDR:PORT/` lists them). It has no authentication: keep it on loopback or
    /// a test network.
    #[arg(long, value_name = "PORT")]
    control_port: Option<u16>,
    /// Serve TLS on both ports with this certificate chain (PEM: the server's
    /// certificate first, then any intermediates; needs --tls-key): the benchmark server
    /// is then `https://`, the RTM server `wss://` (TLS 1.3 and 1.2). Clients trust the
    /// CA that issued it (`--cacert CA.pem`), or this file itself. A handshake must end
    /// within 10 s; a client that connects and says nothing holds up no one else. The
    /// control endpoint stays plain HTTP.
    #[arg(long, value_name = "CERT.pem", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8 `PRIVATE KEY`, SEC1 `EC PRIVATE KEY` or
    /// `RSA PRIVATE KEY`).
    #[arg(long, value_name = "KEY.pem", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn parse_range(text: &str) -> Result<(u64, u64), String> {
    let bad = || format!("expected MIN_MS-MAX_MS (e.g. 2000-6000), got {text:?}");
    let (min, max) = text.split_once('-').ok_or_else(bad)?;
    let (min, max): (u64, u64) = (
        min.parse().map_err(|_| bad())?,
        max.parse().map_err(|_| bad())?,
    );
    if min == 0 || min > max {
        return Err(format!("need 0 < MIN_MS <= MAX_MS, got {text:?}"));
    }
    Ok((min, max))
}

/// A seed nobody chose: the standard library's per-process random hasher keys.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

fn parse_user(text: &str) -> Result<User, String> {
    match text.split_once('=') {
        Some((login, token)) if !login.is_empty() && !token.is_empty() => {
            Ok(User::new(login, token))
        }
        _ => Err("expected LOGIN=TOKEN".to_owned()),
    }
}

fn parse_stage(text: &str) -> Result<String, String> {
    if STAGES.contains(&text) {
        Ok(text.to_owned())
    } else {
        Err(format!("not a stage; one of: {}", STAGES.join(", ")))
    }
}

/// The benchmark server's configuration from the flags.
fn bench_config(args: &SandboxArgs) -> Result<BenchServerConfig, String> {
    let mut config = match args.pace {
        Pace::Demo => BenchServerConfig::default(),
        Pace::Fast => BenchServerConfig::fast(),
        Pace::Realistic => BenchServerConfig {
            speed: Speed::realistic(),
            ..BenchServerConfig::default()
        },
    };
    config.listen = args.listen;
    // Behind a relay, the server takes any free port and the relay the advertised one.
    config.port = if relayed(args) { 0 } else { args.port };
    config.data_flood = args.data_flood;
    config.log_compression = match args.log_compression {
        Compression::Deflate => LogCompression::Deflate,
        Compression::Identity => LogCompression::Identity,
    };
    config.fault = args.fault.map(|f| match f {
        FaultArg::Silent => Fault::Silent,
        FaultArg::Drip => Fault::Drip(Duration::from_millis(args.drip_ms)),
    });
    config.bench_fault = match (&args.crash_at, &args.zombie_at) {
        (Some(stage), _) => Some(BenchFault::Crash {
            stage: stage.clone(),
        }),
        (None, Some(stage)) => Some(BenchFault::Zombie {
            stage: stage.clone(),
        }),
        (None, None) => None,
    };
    let q = &mut config.quirks;
    q.data_hangs_on_failed = args.faithful || args.data_hangs_on_failed;
    q.server_logs_removed = args.faithful || args.server_logs_removed;
    q.missing_param_500 = !args.missing_param_400;
    q.change_env_not_running_500 = !args.change_env_not_running_400;
    q.typecheck_closes_connection = !args.typecheck_keeps_connection;
    q.email_addr_not_split = args.faithful;
    q.remove_unknown_cluster_ok = args.faithful;
    config.max_connections = args.max_connections;
    config.workers = args.workers;
    config.header_timeout = Duration::from_millis(args.header_timeout_ms);
    config.keep_alive_timeout = Duration::from_millis(args.idle_timeout_ms);
    config.body_timeout = Duration::from_millis(args.body_timeout_ms);
    config.max_body = args.max_body;
    config.body_budget = args.body_budget;
    let tokens: Vec<&str> = args.token.iter().map(String::as_str).collect();
    if !tokens.is_empty() {
        config = config.token_users(&tokens);
    }
    if !args.user.is_empty() {
        config
            .users
            .get_or_insert_with(Vec::new)
            .extend(args.user.iter().cloned());
    }
    for admin in &args.admin {
        let users = config.users.iter_mut().flatten();
        let mut found = false;
        for user in users.filter(|u| &u.login == admin) {
            user.admin = true;
            found = true;
        }
        if !found {
            return Err(format!("--admin {admin}: no --user with that login"));
        }
    }
    Ok(config)
}

/// The servers' TLS from --tls-cert and --tls-key, if given; an error names the file.
fn server_tls(args: &SandboxArgs) -> Result<Option<ServerTls>, String> {
    match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => ServerTls::from_pem_files(cert, key)
            .map(Some)
            .map_err(|e| format!("--tls-cert/--tls-key: {e}")),
        _ => Ok(None),
    }
}

/// Whether the servers sit behind relays (a latency, cuts, or both).
fn relayed(args: &SandboxArgs) -> bool {
    args.latency > 0 || args.cut_every.is_some()
}

pub(super) fn run(args: SandboxArgs) -> ExitCode {
    let (mut config, tls) = match bench_config(&args).and_then(|c| Ok((c, server_tls(&args)?))) {
        Ok(configs) => configs,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    config.tls.clone_from(&tls);
    let (http, ws) = if tls.is_some() {
        ("https", "wss")
    } else {
        ("http", "ws")
    };
    let bench = match BenchServer::start(config) {
        Ok(server) => server,
        Err(e) => {
            eprintln!(
                "error: could not start the benchmark server on {}:{}: {e}",
                args.listen, args.port
            );
            return ExitCode::FAILURE;
        }
    };
    let rtm = match RtmServer::start(RtmServerConfig {
        listen: args.listen,
        port: if relayed(&args) { 0 } else { args.rtm_port },
        tls,
        ..RtmServerConfig::default()
    }) {
        Ok(server) => server,
        Err(e) => {
            eprintln!(
                "error: could not start the RTM server on {}:{}: {e}",
                args.listen, args.rtm_port
            );
            return ExitCode::FAILURE;
        }
    };
    let rtm_fault = args.rtm_fault.map(|f| match f {
        RtmFaultArg::PingFlood => SocketFault::PingFlood,
        RtmFaultArg::DataFlood => SocketFault::DataFlood {
            subscription_id: args.rtm_flood_subscription.clone().unwrap_or_default(),
            message: args.rtm_flood_message.clone(),
        },
        RtmFaultArg::EndlessMessage => SocketFault::EndlessMessage,
        RtmFaultArg::Silent => SocketFault::Silent,
    });
    if rtm_fault.is_some() {
        rtm.faults().set_socket_fault(rtm_fault);
    }
    let (bench, rtm) = (Arc::new(bench), Arc::new(rtm));
    // Behind relays (a latency, cuts), the relays take the advertised ports and clients
    // reach the servers through them.
    let seed = args
        .cut_every
        .map(|_| args.seed.unwrap_or_else(random_seed));
    let (bench_addr, rtm_addr, relays) = if relayed(&args) {
        let delay = Duration::from_millis(args.latency);
        let relay = |port: u16, target: SocketAddr, seed: Option<u64>| {
            let cuts = args
                .cut_every
                .zip(seed)
                .map(|((min, max), seed)| CutSchedule::new(seed, min, max));
            Relay::start_with(
                SocketAddr::new(args.listen, port),
                target,
                RelayConfig { delay, cuts },
            )
            .map_err(|e| format!("could not start the relay on {}:{port}: {e}", args.listen))
        };
        match (
            relay(args.port, bench.addr(), seed),
            relay(args.rtm_port, rtm.addr(), seed.map(|s| s.wrapping_add(1))),
        ) {
            (Ok(b), Ok(r)) => (b.addr(), r.addr(), vec![b, r]),
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        (bench.addr(), rtm.addr(), Vec::new())
    };
    let cutters = match relays.as_slice() {
        [b, r] => Relays {
            bench: Some(b.cutter()),
            rtm: Some(r.cutter()),
        },
        _ => Relays::default(),
    };
    let control = match args.control_port {
        Some(port) => {
            let addr = SocketAddr::new(args.listen, port);
            match ControlServer::start_with_relays(
                addr,
                Some(Arc::clone(&bench)),
                Some(Arc::clone(&rtm)),
                cutters,
            ) {
                Ok(control) => Some(control),
                Err(e) => {
                    eprintln!("error: could not start the control endpoint on {addr}: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        None => None,
    };
    // With TLS, the clients are told to trust the certificate file (its first
    // certificate, trusted as itself, as curl does) unless they know the CA.
    let cacert = args
        .tls_cert
        .as_ref()
        .map(|cert| format!(" --cacert {}", cert.display()))
        .unwrap_or_default();
    let bench_host = if args.tls_cert.is_some() {
        format!("https://{bench_addr}")
    } else {
        bench_addr.to_string()
    };
    let mut banner = format!(
        "benchmark server listening on {http}://{bench_addr}\n\
         try: MZBENCH_API_HOST={bench_host} benchlink bench{cacert} run examples/scenarios/hello.bdl\n\
         RTM server listening on {endpoint}\n  \
         appkey: {DEFAULT_APPKEY}\n  \
         role:   {SUPERUSER_ROLE} (secret {SUPERUSER_SECRET})\n\
         try: BENCHLINK_RTM_ENDPOINT={endpoint} BENCHLINK_RTM_APPKEY={DEFAULT_APPKEY} benchlink rtm{cacert} subscribe animals\n",
        endpoint = format!("{ws}://{rtm_addr}"),
    );
    if args.latency > 0 {
        banner.push_str(&format!(
            "latency: every byte delayed {} ms each way (a {} ms round trip)\n",
            args.latency,
            2 * args.latency
        ));
    }
    if relayed(&args) {
        banner.push_str(&format!(
            "direct (not relayed): benchmark server {}, RTM server {}\n",
            bench.url(),
            rtm.endpoint()
        ));
    }
    if let (Some((min, max)), Some(seed)) = (args.cut_every, seed) {
        banner.push_str(&format!(
            "cuts: every connection to either server closed at random every {min}-{max} ms (seed {seed}; again: --cut-every {min}-{max} --seed {seed})\n"
        ));
    }
    let mut warning = String::new();
    if let Some(control) = &control {
        let addr = control.addr();
        banner.push_str(&format!(
            "control endpoint listening on http://{addr}\ntry: curl http://{addr}/\n"
        ));
        if !args.listen.is_loopback() {
            warning = format!(
                "warning: the control endpoint has no authentication: anyone who reaches {addr} can drop connections and crash benchmarks; keep it on loopback or a test network\n"
            );
        }
    }
    // In one write, and without failing: the servers keep running when whoever started
    // them stops reading (a script that read the addresses and closed the pipe).
    let _ = io::stdout().write_all(banner.as_bytes());
    let _ = io::stdout().flush();
    let _ = io::stderr().write_all(warning.as_bytes());
    // The servers run on their own threads until the process is killed.
    let _servers = (bench, rtm, control, relays);
    loop {
        std::thread::park();
    }
}

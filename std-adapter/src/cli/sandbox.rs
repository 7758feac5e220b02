//! `benchlink sandbox`: the local servers in the foreground — the benchmark server and the
//! RTM server — for demos and for pointing other clients (the official `mzbench` CLI, an
//! RTM SDK, other `benchlink` processes) at.

use std::process::ExitCode;

use clap::{Args, ValueEnum};

use benchlink_sandbox::bench::{BenchServer, BenchServerConfig, Fault};
use benchlink_sandbox::rtm::{
    RtmServer, RtmServerConfig, DEFAULT_APPKEY, SUPERUSER_ROLE, SUPERUSER_SECRET,
};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Pace {
    /// Stages take about a second, like a small real benchmark.
    Demo,
    /// Everything in milliseconds, for tests.
    Fast,
}

/// A misbehaving benchmark server, to see what clients do about it.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum FaultArg {
    /// Never answer (connections stay open).
    Silent,
    /// Answer one byte a second.
    Drip,
}

#[derive(Debug, Args)]
pub(super) struct SandboxArgs {
    /// Port of the benchmark server (0 picks any free port).
    #[arg(long, default_value_t = 4800)]
    port: u16,
    /// How fast benchmarks run.
    #[arg(long, value_enum, default_value = "demo")]
    pace: Pace,
    /// Require `Authorization: Bearer <token>` with this token (repeatable).
    #[arg(long)]
    token: Vec<String>,
    /// Port of the RTM (messaging) server (0 picks any free port).
    #[arg(long, default_value_t = 8080)]
    rtm_port: u16,
    /// For throughput measurements: every `/data` reply starts with this many generated
    /// metric lines, one chunk each, sent from memory.
    #[arg(long, default_value_t = 0, value_name = "LINES")]
    data_flood: usize,
    /// Make the benchmark server misbehave on every connection.
    #[arg(long, value_enum)]
    fault: Option<FaultArg>,
}

pub(super) fn run(args: SandboxArgs) -> ExitCode {
    let mut config = match args.pace {
        Pace::Demo => BenchServerConfig::default(),
        Pace::Fast => BenchServerConfig::fast(),
    };
    config.port = args.port;
    config.data_flood = args.data_flood;
    config.fault = args.fault.map(|f| match f {
        FaultArg::Silent => Fault::Silent,
        FaultArg::Drip => Fault::Drip(std::time::Duration::from_secs(1)),
    });
    if !args.token.is_empty() {
        let tokens: Vec<&str> = args.token.iter().map(String::as_str).collect();
        config = config.token_users(&tokens);
    }
    let bench = match BenchServer::start(config) {
        Ok(server) => server,
        Err(e) => {
            eprintln!(
                "error: could not start the benchmark server on port {}: {e}",
                args.port
            );
            return ExitCode::FAILURE;
        }
    };
    let rtm = match RtmServer::start(RtmServerConfig {
        port: args.rtm_port,
        ..RtmServerConfig::default()
    }) {
        Ok(server) => server,
        Err(e) => {
            eprintln!(
                "error: could not start the RTM server on port {}: {e}",
                args.rtm_port
            );
            return ExitCode::FAILURE;
        }
    };
    println!("benchmark server listening on http://{}", bench.host());
    println!(
        "try: MZBENCH_API_HOST={} benchlink bench run examples/scenarios/hello.bdl",
        bench.host()
    );
    println!("RTM server listening on {}", rtm.endpoint());
    println!("  appkey: {DEFAULT_APPKEY}");
    println!("  role:   {SUPERUSER_ROLE} (secret {SUPERUSER_SECRET})");
    println!(
        "try: BENCHLINK_RTM_ENDPOINT={} BENCHLINK_RTM_APPKEY={DEFAULT_APPKEY} benchlink rtm subscribe animals",
        rtm.endpoint()
    );
    // The servers run on their own threads until the process is killed.
    let _servers = (bench, rtm);
    loop {
        std::thread::park();
    }
}

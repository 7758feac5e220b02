//! `benchlink sandbox`: the local servers in the foreground, for demos and for pointing
//! other clients (the official `mzbench` CLI included) at.

use std::process::ExitCode;

use clap::{Args, ValueEnum};

use crate::sandbox::bench::{BenchServer, BenchServerConfig};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Pace {
    /// Stages take about a second, like a small real benchmark.
    Demo,
    /// Everything in milliseconds, for tests.
    Fast,
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
}

pub(super) fn run(args: SandboxArgs) -> ExitCode {
    let mut config = match args.pace {
        Pace::Demo => BenchServerConfig::default(),
        Pace::Fast => BenchServerConfig::fast(),
    };
    config.port = args.port;
    if !args.token.is_empty() {
        config.tokens = Some(args.token);
    }
    match BenchServer::start(config) {
        Ok(server) => {
            println!("benchmark server listening on http://{}", server.host());
            println!(
                "try: MZBENCH_API_HOST={} benchlink bench run examples/scenarios/hello.bdl",
                server.host()
            );
            loop {
                std::thread::park();
            }
        }
        Err(e) => {
            eprintln!(
                "error: could not start the benchmark server on port {}: {e}",
                args.port
            );
            ExitCode::FAILURE
        }
    }
}

//! The benchmark agent: runs a scenario on a benchmark server, publishes its live metric
//! samples to the messaging channel `benchmarks.<id>.metrics`, reads them back with a
//! second client, and prints the results and `published N samples, subscriber received N`.
//!
//! ```text
//! cargo run                                    # hello.bdl on local in-process servers
//! cargo run -- --async                         # the same, written against the async API
//! cargo run -- --dashboard                     # the same, shown live in the browser
//! cargo run -- path/to/scenario.bdl --host mzbench:4800 \
//!     --endpoint wss://rtm.example --appkey K [--role R --role-secret S]
//! ```
//!
//! https:// and wss:// servers are verified against the Mozilla roots and, as curl and
//! Python do, the PEM file named by `SSL_CERT_FILE` (a private CA).
//!
//! Exit code: 0 when the benchmark completed and every sample made the round trip, 3 when
//! the benchmark did not complete, 1 on errors or lost samples.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use benchlink_examples::agent::{self, AgentOptions, RtmTarget};
use clap::Parser;

/// Runs a benchmark and streams its metrics through a messaging service.
#[derive(Parser)]
#[command(name = "agent", version)]
struct Args {
    /// The scenario (default: examples/scenarios/hello.bdl).
    scenario: Option<PathBuf>,
    /// Benchmark server, `host:port` or `http(s)://…`; without it (and without
    /// MZBENCH_API_HOST) a local server runs in-process.
    #[arg(long, env = "MZBENCH_API_HOST")]
    host: Option<String>,
    /// Bearer token of the benchmark server (else the official token file's).
    #[arg(long, env = "BENCHLINK_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Messaging endpoint, `ws(s)://…`; without it (and without BENCHLINK_RTM_ENDPOINT)
    /// a local server runs in-process.
    #[arg(long, env = "BENCHLINK_RTM_ENDPOINT")]
    endpoint: Option<String>,
    /// Application key (required with --endpoint).
    #[arg(long, env = "BENCHLINK_RTM_APPKEY")]
    appkey: Option<String>,
    /// Authenticate as this role (needs --role-secret).
    #[arg(long, env = "BENCHLINK_RTM_ROLE", requires = "role_secret")]
    role: Option<String>,
    /// The role's secret.
    #[arg(
        long,
        env = "BENCHLINK_RTM_ROLE_SECRET",
        hide_env_values = true,
        requires = "role"
    )]
    role_secret: Option<String>,
    /// Scenario environment variable K=V (repeatable).
    #[arg(long = "env", value_parser = parse_pair)]
    env: Vec<(String, String)>,
    /// Status poll interval, in milliseconds.
    #[arg(long, default_value_t = 100)]
    poll_ms: u64,
    /// Run the agent written against the async API (benchlink_std::tokio) on a tokio
    /// runtime: the same job and output.
    #[arg(long = "async", conflicts_with = "dashboard")]
    run_async: bool,
    /// Serve a live dashboard of the run in the browser (its address is printed at the
    /// start), fed by what the subscriber receives; it stays up after the run until
    /// Ctrl-C.
    #[arg(long)]
    dashboard: bool,
    /// With --dashboard: where it listens (port 0: any free one).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:0",
        requires = "dashboard"
    )]
    listen: std::net::SocketAddr,
}

fn parse_pair(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("expected K=V, got {s:?}"))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let rtm = match (args.endpoint, args.appkey) {
        (Some(endpoint), Some(appkey)) => Some(RtmTarget {
            endpoint,
            appkey,
            role: args.role.zip(args.role_secret),
        }),
        (Some(_), None) => {
            eprintln!(
                "agent: error: --appkey (or BENCHLINK_RTM_APPKEY) is required with --endpoint"
            );
            return ExitCode::from(4);
        }
        (None, _) => None,
    };
    let dashboard = if args.dashboard {
        match benchlink_cli::dashboard::Dashboard::serve(args.listen) {
            Ok(dashboard) => Some(std::sync::Arc::new(dashboard)),
            Err(e) => {
                eprintln!(
                    "agent: error: serving the dashboard on {}: {e}",
                    args.listen
                );
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    let options = AgentOptions {
        scenario: args.scenario.unwrap_or_else(agent::default_scenario),
        host: args.host,
        token: args.token,
        rtm,
        env: args.env,
        status_poll: Duration::from_millis(args.poll_ms.max(10)),
        dashboard: dashboard.clone(),
    };
    let mut out = std::io::stdout();
    let ran = if args.run_async {
        match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => {
                runtime.block_on(benchlink_examples::agent_async::run(&options, &mut out))
            }
            Err(e) => {
                eprintln!("agent: error: starting the tokio runtime: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        agent::run(&options, &mut out)
    };
    match ran {
        Ok(summary) => {
            let results = serde_json::to_string_pretty(&summary.results)
                .unwrap_or_else(|e| format!("\"unprintable: {e}\""));
            println!("final status: {}", summary.status.status_text);
            println!("results: {results}");
            if summary.samples != summary.published {
                eprintln!(
                    "agent: {} of {} samples were not acknowledged",
                    summary.samples - summary.published.min(summary.samples),
                    summary.samples
                );
            }
            if summary.duplicated > 0 {
                // Publishes sent again after a drop whose first copy had arrived: counted
                // once (at-least-once delivery, told apart by `seq`).
                println!(
                    "agent: {} samples were received twice (published again after a drop), counted once",
                    summary.duplicated
                );
            }
            println!("{}", summary.line());
            if let Some(dashboard) = &dashboard {
                println!(
                    "dashboard: still served at {} until Ctrl-C",
                    dashboard.benchmark_url(summary.id)
                );
                loop {
                    std::thread::park();
                }
            }
            ExitCode::from(summary.exit_code())
        }
        Err(e) => {
            eprintln!("agent: error: {e}");
            ExitCode::FAILURE
        }
    }
}

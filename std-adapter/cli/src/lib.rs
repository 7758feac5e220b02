//! The `benchlink` command line: `benchlink bench …` speaks the benchmark-server API with
//! the commands of the official `mzbench` CLI; `benchlink rtm …` publishes, subscribes,
//! reads, writes, records and replays on the messaging service; `benchlink sandbox` runs
//! the local servers.
//!
//! With no `--host` and no `MZBENCH_API_HOST`, `bench` commands talk to the server
//! answering on localhost:4800 (`benchlink sandbox`, a local MZBench), else to one
//! started in-process, so a newcomer's first `benchlink bench run` works anywhere; `rtm`
//! commands likewise without `--endpoint` and `BENCHLINK_RTM_ENDPOINT`.
//!
//! As a library it offers what other programs embed: [`main`], the command line itself,
//! and the live [`dashboard`], which a program that runs a benchmark feeds with what it
//! sees (the agent's `--dashboard`).

mod bench;
mod fail;
mod rtm;
mod sandbox;

pub use bench::dashboard;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Examples and environment variables, after the command list of `benchlink --help`.
const AFTER_HELP: &str = "\
Examples:
  benchlink sandbox &                              local servers (benchmark :4800, RTM :8080)
  benchlink bench run --plot metrics.svg examples/scenarios/hello.bdl
  benchlink bench start --nodes 2 --env rate=5 examples/scenarios/hello.bdl
  benchlink bench status --wait 0
  benchlink bench plot 0 -o print.svg --target print --target print.rps
  benchlink bench report 0 -o report.html
  benchlink bench data --format csv 0
  benchlink rtm --help; benchlink bench run --help     every command's options

Environment:
  MZBENCH_API_HOST        benchmark server (as --host); unset: localhost:4800 if something
                          answers there, else a throw-away in-process server
  BENCHLINK_BENCH_PROBE   where to look instead of localhost:4800 (HOST:PORT), or `off`
  BENCHLINK_TOKEN         benchmark server token (as --token)
  MZBENCHTOKEN            token file (default ~/.config/mzbench/token)
  BENCHLINK_RTM_ENDPOINT, BENCHLINK_RTM_APPKEY, BENCHLINK_RTM_ROLE, BENCHLINK_RTM_ROLE_SECRET
                          messaging service and role (as the rtm options); then
                          satori-rtm-cli's SATORI_ENDPOINT, SATORI_APPKEY, SATORI_ROLE_NAME,
                          SATORI_ROLE_SECRET
  HTTPS_PROXY             proxy for `rtm` over wss

Exit codes: 0 ok, 1 error, 2 missing scenario or nodes file, 3 failed benchmark (`bench run`,
`bench status --wait`), 4 invalid or contradictory options, 130 interrupted.";

/// Command-line arguments of `benchlink`.
#[derive(Debug, Parser)]
#[command(
    name = "benchlink",
    version,
    about = "Benchmark-server and real-time messaging client",
    after_help = AFTER_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Drive a benchmark server (MZBench HTTP API).
    Bench(Box<bench::BenchArgs>),
    /// Use a real-time messaging service (Satori RTM protocol).
    Rtm(Box<rtm::RtmArgs>),
    /// Run the local benchmark and RTM servers in the foreground.
    Sandbox(Box<sandbox::SandboxArgs>),
}

/// Runs the command line with the process arguments; the exit code follows the official
/// CLI (1 error or bad usage, 2 missing script, 3 failed benchmark after `bench run` or
/// `bench status --wait` — not `results --wait`, which prints the results of any
/// ending —, 4 invalid value, 130 interrupted).
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     benchlink_cli::main()
/// }
/// ```
pub fn main() -> ExitCode {
    match Cli::try_parse() {
        Ok(cli) => run(cli),
        Err(e) => {
            // clap exits 2 for every usage error; the official CLI's 2 means "script
            // missing" and 4 "invalid value", so map them.
            let code = match e.kind() {
                clap::error::ErrorKind::InvalidValue | clap::error::ErrorKind::ValueValidation => 4,
                _ if e.exit_code() == 0 => 0, // --help, --version
                _ => 1,
            };
            let _ = e.print();
            ExitCode::from(code)
        }
    }
}

/// Runs parsed arguments.
fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Bench(args) => bench::run(*args),
        Command::Rtm(args) => rtm::run(*args),
        Command::Sandbox(args) => sandbox::run(*args),
    }
}

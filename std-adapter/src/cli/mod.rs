//! The `benchlink` command line: `benchlink bench …` speaks the benchmark-server API with
//! the commands of the official `mzbench` CLI; `benchlink sandbox` runs the local servers.
//!
//! With no `--host` and no `MZBENCH_API_HOST`, `bench` commands talk to a local server
//! started in-process, so a newcomer's first `benchlink bench run` works anywhere.

mod bench;
mod sandbox;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Command-line arguments of `benchlink`.
#[derive(Debug, Parser)]
#[command(
    name = "benchlink",
    version,
    about = "Benchmark-server and real-time messaging client"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Drive a benchmark server (MZBench HTTP API).
    Bench(Box<bench::BenchArgs>),
    /// Run the local benchmark server in the foreground.
    Sandbox(sandbox::SandboxArgs),
}

/// Runs the command line with the process arguments; the exit code follows the official
/// CLI (1 error, 2 missing script, 3 failed benchmark after `--wait`, 4 invalid value).
pub fn main() -> ExitCode {
    run(Cli::parse())
}

/// Runs parsed arguments (the entry point tests use).
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Bench(args) => bench::run(*args),
        Command::Sandbox(args) => sandbox::run(args),
    }
}

//! The `benchlink` command: see the crate's library ([`benchlink_cli::main`]).

use std::process::ExitCode;

fn main() -> ExitCode {
    benchlink_cli::main()
}

//! The `benchlink` command line; see `benchlink --help`.

fn main() -> std::process::ExitCode {
    benchlink_std::cli::main()
}

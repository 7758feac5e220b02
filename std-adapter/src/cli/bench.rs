//! `benchlink bench …`: the official `mzbench` CLI's commands over [`BenchClient`].

use std::collections::HashMap;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand, ValueEnum};

use benchlink_core::bench::{LogLineError, Sample, SampleError, Status};

use crate::bench::{
    Available, BenchClient, Error, Escaped, LineStream, OwnedLine, Scenario, ServerAddress,
    StartOptions, StatusInfo,
};
use crate::net::TlsOptions;
use benchlink_sandbox::bench::{BenchServer, BenchServerConfig};

/// Exit code of a benchmark that ended `failed` under `--wait` (as the official CLI).
const EXIT_FAILED_BENCH: u8 = 3;

#[derive(Debug, Args)]
pub(super) struct BenchArgs {
    /// Server as `host:port` or `http(s)://host[:port]`; without it (and without
    /// MZBENCH_API_HOST) a local server is started in-process.
    #[arg(long, global = true, env = "MZBENCH_API_HOST")]
    host: Option<String>,
    /// Bearer token; without it the official token file ($MZBENCHTOKEN or
    /// ~/.config/mzbench/token) is read.
    #[arg(long, global = true, env = "BENCHLINK_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Do not verify the server's TLS certificate.
    #[arg(long, global = true, alias = "no_cert_check")]
    no_cert_check: bool,
    /// Trust the CA certificates of this PEM file too.
    #[arg(long, global = true)]
    cacert: Option<PathBuf>,
    /// Give up on a request after this many seconds (default 60), and on a log or data
    /// stream after this many seconds without data (default: never).
    #[arg(long, global = true, value_name = "SECONDS", value_parser = parse_seconds)]
    timeout: Option<Duration>,
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Start a benchmark; print its id.
    Start(StartArgs),
    /// Start a benchmark and wait until it ends (exit 3 if it failed).
    Run(StartArgs),
    /// Print a benchmark's status.
    Status(WaitArgs),
    /// Print a benchmark's results.
    Results(WaitArgs),
    /// Stop a benchmark.
    Stop(IdArg),
    /// Start a clone of a benchmark under a new id.
    Restart(IdArg),
    /// Stream a benchmark's system log.
    Log(IdArg),
    /// Stream a benchmark's worker log.
    Userlog(IdArg),
    /// Stream a benchmark's metric samples.
    Data(DataArgs),
    /// Change environment variables of a running benchmark.
    #[command(alias = "change_env")]
    ChangeEnv(ChangeEnvArgs),
    /// Run a BDL statement on a running benchmark's workers.
    #[command(alias = "run_command")]
    RunCommand(RunCommandArgs),
    /// Add comma-separated tags to a benchmark.
    #[command(alias = "add_tags")]
    AddTags(TagsArgs),
    /// Remove comma-separated tags from a benchmark.
    #[command(alias = "remove_tags")]
    RemoveTags(TagsArgs),
    /// List the clusters of nodes.
    #[command(alias = "clusters_info")]
    ClustersInfo,
    /// Deallocate a cluster (by cluster id).
    #[command(alias = "deallocate_cluster")]
    DeallocateCluster(IdArg),
    /// Forget a cluster without deallocating it.
    #[command(alias = "remove_cluster_info")]
    RemoveClusterInfo(IdArg),
    /// E-mail a finished benchmark's report.
    #[command(alias = "email_report")]
    EmailReport(EmailArgs),
    /// Stream the server's own log.
    #[command(alias = "server_logs")]
    ServerLogs(ServerLogsArgs),
    /// Check a scenario on the server without starting it.
    Typecheck(ScriptArg),
}

#[derive(Debug, Args)]
struct IdArg {
    id: u64,
}

#[derive(Debug, Args)]
struct WaitArgs {
    /// Poll until the benchmark ends, showing its progress on stderr.
    #[arg(long)]
    wait: bool,
    id: u64,
}

#[derive(Debug, Args)]
struct ScriptArg {
    script: PathBuf,
}

#[derive(Debug, Args)]
struct StartArgs {
    /// Node count, or a comma-separated list of preallocated hosts.
    #[arg(long)]
    nodes: Option<String>,
    /// Scenario environment variable K=V (repeatable).
    #[arg(long = "env", value_parser = parse_pair)]
    env: Vec<(String, String)>,
    /// E-mail a report to this address at the end (repeatable).
    #[arg(long)]
    email: Vec<String>,
    /// Benchmark name (default: the script's file name).
    #[arg(long)]
    name: Option<String>,
    /// Cloud to allocate nodes from.
    #[arg(long)]
    cloud: Option<String>,
    /// Comma-separated tags.
    #[arg(long)]
    tags: Option<String>,
    /// Exclusive label: benchmarks sharing one run one at a time.
    #[arg(long)]
    exclusive: Option<String>,
    /// Commit or branch of the benchmark software to install on the nodes.
    #[arg(long, alias = "node_commit")]
    node_commit: Option<String>,
    /// Deallocate the nodes when the benchmark ends.
    #[arg(long, alias = "deallocate_after_bench", action = clap::ArgAction::Set)]
    deallocate_after_bench: Option<bool>,
    /// Install the benchmark software on the nodes.
    #[arg(long, alias = "provision_nodes", action = clap::ArgAction::Set)]
    provision_nodes: Option<bool>,
    /// The scenario file; files it includes are read relative to it.
    script: PathBuf,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum DataFormat {
    /// Graphite-style JSON, printed when the stream ends.
    Json,
    /// `name,timestamp,value` rows as they arrive.
    Csv,
    /// The server's `timestamp<TAB>name<TAB>value` lines as they arrive.
    Tsv,
}

#[derive(Debug, Args)]
struct DataArgs {
    #[arg(long, value_enum, default_value = "json")]
    format: DataFormat,
    /// Only these metrics (repeatable).
    #[arg(long)]
    target: Vec<String>,
    id: u64,
}

#[derive(Debug, Args)]
struct ChangeEnvArgs {
    id: u64,
    /// K=V pairs.
    #[arg(value_parser = parse_pair)]
    vars: Vec<(String, String)>,
    /// K=V (repeatable; the official CLI's spelling).
    #[arg(long = "env", value_parser = parse_pair)]
    env: Vec<(String, String)>,
}

#[derive(Debug, Args)]
struct RunCommandArgs {
    /// Worker pool, counted from 1.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pool: u32,
    /// Percentage of the pool's workers, 1 to 100.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100))]
    percent: u32,
    id: u64,
    /// The BDL statement.
    command: String,
}

#[derive(Debug, Args)]
struct TagsArgs {
    id: u64,
    /// Comma-separated tags.
    tags: String,
}

#[derive(Debug, Args)]
struct EmailArgs {
    id: u64,
    #[arg(required = true)]
    addrs: Vec<String>,
}

#[derive(Debug, Args)]
struct ServerLogsArgs {
    /// Lowest severity to show (debug, info, warning, error).
    #[arg(long)]
    severity: Option<String>,
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0 && *v < 1e9)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("expected a number of seconds above 0, got {s:?}"))
}

fn parse_pair(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("expected K=V, got {s:?}"))
}

/// A failure with the exit code it maps to; an empty message prints nothing.
struct Fail(u8, String);

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        let mut message = e.to_string();
        if e.http_status() == Some(403) {
            let server = e.server().unwrap_or("HOST:PORT");
            message.push_str(&format!(
                "\nhint: the server wants a valid token: pass --token TOKEN (or set \
                 BENCHLINK_TOKEN), or add the line `{server} TOKEN` to the token file \
                 ($MZBENCHTOKEN, else ~/.config/mzbench/token)"
            ));
        }
        Fail(1, message)
    }
}

impl Fail {
    /// A write to stdout failed: a closed stdout (`| head`) ends the command quietly.
    fn output(e: io::Error) -> Fail {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Fail(0, String::new())
        } else {
            Fail(1, format!("cannot write the output: {e}"))
        }
    }
}

pub(super) fn run(args: BenchArgs) -> ExitCode {
    match execute(args) {
        Ok(code) => ExitCode::from(code),
        Err(Fail(code, message)) => {
            if !message.is_empty() {
                eprintln!("error: {message}");
            }
            ExitCode::from(code)
        }
    }
}

fn execute(args: BenchArgs) -> Result<u8, Fail> {
    // Keep the in-process server alive for as long as the command runs.
    let (mut client, _local) = client(&args)?;
    let out = &mut BufWriter::with_capacity(OUT_BUF, std::io::stdout().lock());
    let code = command(args.command, &mut client, out)?;
    out.flush().map_err(Fail::output)?;
    Ok(code)
}

/// Output is written in pieces of this size (or when a stream has nothing more to read).
const OUT_BUF: usize = 64 * 1024;

fn command(
    command: BenchCommand,
    client: &mut BenchClient,
    out: &mut impl Write,
) -> Result<u8, Fail> {
    match command {
        BenchCommand::Start(a) => {
            let id = client.start(&scenario(&a.script)?, &start_options(&a))?;
            print_json(out, &serde_json::json!({ "id": id, "status": "pending" }));
        }
        BenchCommand::Run(a) => {
            let id = client.start(&scenario(&a.script)?, &start_options(&a))?;
            eprintln!("started benchmark {id} on {}", client.address());
            let status = wait(client, id)?;
            print_json(out, &status);
            return Ok(exit_for(&status));
        }
        BenchCommand::Status(a) => {
            let status = if a.wait {
                wait(client, a.id)?
            } else {
                client.status(a.id)?
            };
            print_json(out, &status);
            if a.wait {
                return Ok(exit_for(&status));
            }
        }
        BenchCommand::Results(a) => {
            if a.wait {
                wait(client, a.id)?;
            }
            print_json(out, &client.results(a.id)?);
        }
        BenchCommand::Stop(a) => {
            client.stop(a.id)?;
            print_json(out, &serde_json::json!({ "status": "stopped" }));
        }
        BenchCommand::Restart(a) => {
            let id = client.restart(a.id)?;
            print_json(out, &serde_json::json!({ "id": id, "status": "pending" }));
        }
        BenchCommand::Log(a) => print_log(out, client, a.id, false)?,
        BenchCommand::Userlog(a) => print_log(out, client, a.id, true)?,
        BenchCommand::Data(a) => print_data(out, client, &a)?,
        BenchCommand::ChangeEnv(a) => {
            let vars: Vec<(&str, &str)> = a
                .vars
                .iter()
                .chain(&a.env)
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            if vars.is_empty() {
                return Err(Fail(4, "change-env needs at least one K=V".into()));
            }
            client.change_env(a.id, &vars)?;
            print_json(out, &serde_json::json!({ "status": "set" }));
        }
        BenchCommand::RunCommand(a) => {
            client.run_command(a.id, a.pool, a.percent, &a.command)?;
            print_json(out, &serde_json::json!({ "status": "ok" }));
        }
        BenchCommand::AddTags(a) => {
            client.add_tags(a.id, &split_tags(&a.tags))?;
            print_json(out, &serde_json::json!({}));
        }
        BenchCommand::RemoveTags(a) => {
            client.remove_tags(a.id, &split_tags(&a.tags))?;
            print_json(out, &serde_json::json!({}));
        }
        BenchCommand::ClustersInfo => print_json(out, &client.clusters_info()?),
        BenchCommand::DeallocateCluster(a) => {
            client.deallocate_cluster(a.id)?;
            print_json(out, &serde_json::json!({}));
        }
        BenchCommand::RemoveClusterInfo(a) => {
            client.remove_cluster_info(a.id)?;
            print_json(out, &serde_json::json!({}));
        }
        BenchCommand::EmailReport(a) => {
            let addrs: Vec<&str> = a.addrs.iter().map(String::as_str).collect();
            client.email_report(a.id, &addrs)?;
            print_json(out, &serde_json::json!({}));
        }
        BenchCommand::ServerLogs(a) => {
            let mut lines = client.server_logs(a.severity.as_deref())?;
            print_lines(&mut lines, out, |out, line| {
                write_log_line(out, line, false)
            })?;
        }
        BenchCommand::Typecheck(a) => {
            client.typecheck(&scenario(&a.script)?)?;
            print_json(out, &serde_json::json!({ "result": "ok" }));
        }
    }
    Ok(0)
}

fn client(args: &BenchArgs) -> Result<(BenchClient, Option<BenchServer>), Fail> {
    let (address, local) = match &args.host {
        Some(host) => (
            ServerAddress::parse(host).map_err(|e| Fail(1, e.to_string()))?,
            None,
        ),
        None => {
            let server = BenchServer::start(BenchServerConfig::default()).map_err(|e| {
                Fail(
                    1,
                    format!("could not start the local benchmark server: {e}"),
                )
            })?;
            eprintln!(
                "no --host or MZBENCH_API_HOST: using a local benchmark server at {}",
                server.host()
            );
            let address =
                ServerAddress::parse(&server.host()).map_err(|e| Fail(1, e.to_string()))?;
            (address, Some(server))
        }
    };
    let tls = TlsOptions::from_command_line(args.cacert.as_deref(), args.no_cert_check)
        .map_err(|e| Fail(1, e.to_string()))?;
    let mut client = BenchClient::new(address)?.with_tls(tls)?;
    if let Some(timeout) = args.timeout {
        client = client.with_timeout(timeout);
    }
    let client = match &args.token {
        Some(token) => client.with_token(token.clone()),
        None => client.with_token_file(),
    };
    Ok((client, local))
}

fn scenario(path: &PathBuf) -> Result<Scenario, Fail> {
    Scenario::from_file(path).map_err(|e| Fail(2, format!("{}: {e}", path.display())))
}

fn start_options(a: &StartArgs) -> StartOptions {
    StartOptions {
        nodes: a.nodes.clone(),
        deallocate_after_bench: a.deallocate_after_bench,
        provision_nodes: a.provision_nodes,
        benchmark_name: a.name.clone(),
        cloud: a.cloud.clone(),
        tags: a
            .tags
            .as_deref()
            .map(split_tags)
            .unwrap_or_default()
            .into_iter()
            .map(str::to_owned)
            .collect(),
        exclusive: a.exclusive.clone(),
        node_commit: a.node_commit.clone(),
        emails: a.email.clone(),
        env: a.env.clone(),
    }
}

fn split_tags(tags: &str) -> Vec<&str> {
    tags.split([',', ' ']).filter(|t| !t.is_empty()).collect()
}

fn exit_for(status: &StatusInfo) -> u8 {
    if status.status() == Status::Failed {
        EXIT_FAILED_BENCH
    } else {
        0
    }
}

/// Polls every 3 s (the official CLI's pace) until the benchmark ends; progress goes to
/// stderr, rewritten in place on a terminal.
fn wait(client: &mut BenchClient, id: u64) -> Result<StatusInfo, Fail> {
    let started = Instant::now();
    let tty = std::io::stderr().is_terminal();
    let mut last = String::new();
    let status = client.wait(id, Duration::from_secs(3), |s| {
        let elapsed = started.elapsed().as_secs();
        let line = format!(
            "status: {:<22}{:02}:{:02}",
            Escaped::cut(s.status().as_str(), 64).to_string(),
            elapsed / 60,
            elapsed % 60
        );
        if tty {
            eprint!("\r{line}");
        } else if s.status().as_str() != last {
            eprintln!("{line}");
        }
        last = s.status().as_str().to_owned();
    })?;
    if tty {
        eprintln!();
    }
    Ok(status)
}

fn print_json(out: &mut impl Write, value: &impl serde::Serialize) {
    let text =
        serde_json::to_string_pretty(value).unwrap_or_else(|e| format!("\"unprintable: {e}\""));
    let _ = writeln!(out, "{text}");
}

/// Why printing a stream stopped early.
enum Stop {
    /// Writing to stdout failed.
    Output(io::Error),
    /// A line the command does not accept.
    Line(Fail),
}

/// Prints a stream at the network's pace: `line` writes each line into the buffered
/// `out`, which is flushed whenever the connection has nothing more to read right now,
/// so lines show up as soon as they arrive from a slow server and go out in large
/// writes from a fast one. A closed stdout ends it quietly.
fn print_lines<F: OwnedLine, W: Write>(
    stream: &mut LineStream<'_, F>,
    out: &mut W,
    mut line: impl for<'l> FnMut(&mut W, Result<F::Item<'l>, F::Error<'l>>) -> Result<(), Stop>,
) -> Result<(), Fail> {
    loop {
        let mut stopped = None;
        let state = stream.read_available(|item| match line(out, item) {
            Ok(()) => ControlFlow::Continue(()),
            Err(stop) => {
                stopped = Some(stop);
                ControlFlow::Break(())
            }
        });
        let flushed = out.flush();
        match stopped {
            Some(Stop::Output(e)) => return Err(Fail::output(e)),
            Some(Stop::Line(fail)) => {
                flushed.map_err(Fail::output)?;
                return Err(fail);
            }
            None => flushed.map_err(Fail::output)?,
        }
        match state? {
            Available::Idle => {}
            Available::End | Available::Stopped => return Ok(()),
        }
    }
}

/// One log line, control characters (but tabs) escaped; red on a terminal when it is
/// an error.
fn write_log_line(
    out: &mut impl Write,
    line: Result<&str, LogLineError<'_>>,
    red: bool,
) -> Result<(), Stop> {
    let lossy;
    let text = match line {
        Ok(text) => text,
        Err(LogLineError::NotUtf8 { line }) => {
            lossy = String::from_utf8_lossy(line);
            &lossy
        }
        Err(e @ LogLineError::TooLong { .. }) => {
            return Err(Stop::Line(Fail(1, e.to_string())));
        }
    };
    let written = if red && text.contains("[error]") {
        out.write_all(b"\x1b[31m")
            .and_then(|()| write_escaped_text(out, text))
            .and_then(|()| out.write_all(b"\x1b[0m\n"))
    } else {
        write_escaped_text(out, text).and_then(|()| out.write_all(b"\n"))
    };
    written.map_err(Stop::Output)
}

/// `text` with control characters other than tab escaped (`\u{1b}`); plain text is
/// written as is, in one piece.
fn write_escaped_text(out: &mut impl Write, text: &str) -> io::Result<()> {
    let clean = !text
        .bytes()
        .any(|b| (b < 0x20 && b != b'\t') || b == 0x7f || b == 0xc2);
    if clean {
        return out.write_all(text.as_bytes());
    }
    let mut run = 0;
    for (i, c) in text.char_indices() {
        if c.is_control() && c != '\t' {
            out.write_all(text.get(run..i).unwrap_or_default().as_bytes())?;
            write!(out, "{}", Escaped::new(c.encode_utf8(&mut [0; 4])))?;
            run = i + c.len_utf8();
        }
    }
    out.write_all(text.get(run..).unwrap_or_default().as_bytes())
}

fn print_log(
    out: &mut impl Write,
    client: &mut BenchClient,
    id: u64,
    user: bool,
) -> Result<(), Fail> {
    let what = if user { "user log" } else { "log" };
    let mut lines = if user {
        client.userlog(id)?
    } else {
        client.log(id)?
    };
    let red = std::io::stdout().is_terminal();
    writeln!(out, "Start of {what} for bench {id}").map_err(Fail::output)?;
    print_lines(&mut lines, out, |out, line| write_log_line(out, line, red))?;
    writeln!(out, "End of {what} for bench {id}").map_err(Fail::output)
}

/// `/data` as csv or tsv rows, written as they arrive without allocating per line.
struct Rows {
    format: DataFormat,
    row: Vec<u8>,
    /// The last timestamp and its digits: consecutive samples mostly share one.
    timestamp: Option<u64>,
    digits: Vec<u8>,
}

impl Rows {
    fn new(format: DataFormat) -> Rows {
        Rows {
            format,
            row: Vec::with_capacity(256),
            timestamp: None,
            digits: Vec::with_capacity(20),
        }
    }

    fn write(&mut self, out: &mut impl Write, s: &Sample<'_>) -> io::Result<()> {
        if self.timestamp != Some(s.timestamp) {
            let mut buf = [0u8; 20];
            self.digits.clear();
            self.digits
                .extend_from_slice(decimal(s.timestamp, &mut buf));
            self.timestamp = Some(s.timestamp);
        }
        let row = &mut self.row;
        row.clear();
        let name = |row: &mut Vec<u8>| {
            // Printable ASCII goes as is (checked without branching per byte).
            let unusual = s
                .name
                .bytes()
                .fold(false, |acc, b| acc | !(0x20..0x7f).contains(&b));
            if unusual {
                // Written into the row through the escaping writer (never fails on a Vec).
                let _ = write_escaped_text(row, s.name);
            } else {
                row.extend_from_slice(s.name.as_bytes());
            }
        };
        match self.format {
            DataFormat::Csv => {
                name(row);
                row.push(b',');
                row.extend_from_slice(&self.digits);
                row.push(b',');
            }
            _ => {
                row.extend_from_slice(&self.digits);
                row.push(b'\t');
                name(row);
                row.push(b'\t');
            }
        }
        row.extend_from_slice(s.value.as_str().as_bytes());
        row.push(b'\n');
        out.write_all(row)
    }
}

/// `n` in decimal, in `buf`.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[at..]
}

/// The samples of one metric, for the JSON output: timestamps, and the values' text
/// end to end (no per-point allocation).
#[derive(Debug, Default)]
struct Series {
    timestamps: Vec<u64>,
    values: String,
    ends: Vec<usize>,
}

impl Series {
    fn push(&mut self, s: &Sample<'_>) {
        self.timestamps.push(s.timestamp);
        self.values.push_str(s.value.as_str());
        self.ends.push(self.values.len());
    }

    fn points(&self) -> impl Iterator<Item = (&str, u64)> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        self.ends
            .iter()
            .zip(starts)
            .zip(&self.timestamps)
            .map(|((&end, start), &t)| (self.values.get(start..end).unwrap_or("0"), t))
    }
}

/// Graphite-style JSON, as the official CLI prints it (here sorted by name):
/// `[{"target": NAME, "datapoints": [[VALUE, TIMESTAMP], …]}, …]`, values as the
/// server wrote them.
fn write_graphite(out: &mut impl Write, series: &HashMap<Box<str>, Series>) -> io::Result<()> {
    let mut names: Vec<&str> = series.keys().map(|n| &**n).collect();
    names.sort_unstable();
    if names.is_empty() {
        return out.write_all(b"[]\n");
    }
    out.write_all(b"[\n")?;
    for (i, name) in names.iter().enumerate() {
        out.write_all(b"  {\n    \"target\": ")?;
        write_json_string(out, name)?;
        out.write_all(b",\n    \"datapoints\": [")?;
        let mut digits = [0u8; 20];
        for (j, (value, t)) in series
            .get(*name)
            .into_iter()
            .flat_map(Series::points)
            .enumerate()
        {
            out.write_all(if j == 0 { b"\n      [" } else { b",\n      [" })?;
            out.write_all(value.as_bytes())?;
            out.write_all(b", ")?;
            out.write_all(decimal(t, &mut digits))?;
            out.write_all(b"]")?;
        }
        out.write_all(b"\n    ]\n  }")?;
        out.write_all(if i + 1 == names.len() { b"\n" } else { b",\n" })?;
    }
    out.write_all(b"]\n")
}

/// A JSON string with every control character escaped (C1 codes and DEL too).
fn write_json_string(out: &mut impl Write, s: &str) -> io::Result<()> {
    out.write_all(b"\"")?;
    let mut run = 0;
    for (i, c) in s.char_indices() {
        let escape = match c {
            '"' => Some("\\\"".to_owned()),
            '\\' => Some("\\\\".to_owned()),
            c if c.is_control() => Some(format!("\\u{:04x}", u32::from(c))),
            _ => None,
        };
        if let Some(e) = escape {
            out.write_all(s.get(run..i).unwrap_or_default().as_bytes())?;
            out.write_all(e.as_bytes())?;
            run = i + c.len_utf8();
        }
    }
    out.write_all(s.get(run..).unwrap_or_default().as_bytes())?;
    out.write_all(b"\"")
}

fn print_data(out: &mut impl Write, client: &mut BenchClient, a: &DataArgs) -> Result<(), Fail> {
    let server = client.address().authority.clone();
    let mut stream = client.data(a.id)?;
    let wanted = |name: &str| a.target.is_empty() || a.target.iter().any(|t| t == name);
    let bad_line = |e: SampleError| {
        let message = format!("bad /data line from {server}: {e} (GET /data?id={})", a.id);
        Stop::Line(Fail(1, message))
    };
    match a.format {
        DataFormat::Csv | DataFormat::Tsv => {
            let mut rows = Rows::new(a.format);
            print_lines(&mut stream, out, |out, line| match line {
                Ok(s) if wanted(s.name) => rows.write(out, &s).map_err(Stop::Output),
                Ok(_) => Ok(()),
                Err(e) => Err(bad_line(e)),
            })
        }
        DataFormat::Json => {
            let mut series: HashMap<Box<str>, Series> = HashMap::new();
            // Nothing is written while the stream runs, so flushing is a no-op; the
            // JSON goes out at the end, or before the error if the stream fails.
            let result = print_lines(&mut stream, &mut io::sink(), |_, line| {
                let s = line.map_err(bad_line)?;
                if wanted(s.name) {
                    match series.get_mut(s.name) {
                        Some(points) => points.push(&s),
                        None => series.entry(s.name.into()).or_default().push(&s),
                    }
                }
                Ok(())
            });
            drop(stream);
            write_graphite(out, &series)
                .and_then(|()| out.flush())
                .map_err(Fail::output)?;
            result
        }
    }
}

//! `benchlink bench …`: the official `mzbench` CLI's commands over [`BenchClient`].

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand, ValueEnum};

use benchlink_core::bench::Status;

use crate::bench::{BenchClient, Error, Scenario, ServerAddress, StartOptions, StatusInfo};
use crate::net::TlsOptions;
use crate::sandbox::bench::{BenchServer, BenchServerConfig};

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

fn parse_pair(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("expected K=V, got {s:?}"))
}

/// A failure with the exit code it maps to.
struct Fail(u8, String);

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail(1, e.to_string())
    }
}

pub(super) fn run(args: BenchArgs) -> ExitCode {
    match execute(args) {
        Ok(code) => ExitCode::from(code),
        Err(Fail(code, message)) => {
            eprintln!("error: {message}");
            ExitCode::from(code)
        }
    }
}

fn execute(args: BenchArgs) -> Result<u8, Fail> {
    // Keep the in-process server alive for as long as the command runs.
    let (mut client, _local) = client(&args)?;
    let out = &mut std::io::stdout().lock();
    match args.command {
        BenchCommand::Start(a) => {
            let id = client.start(&scenario(&a.script)?, &start_options(&a))?;
            print_json(out, &serde_json::json!({ "id": id, "status": "pending" }));
        }
        BenchCommand::Run(a) => {
            let id = client.start(&scenario(&a.script)?, &start_options(&a))?;
            eprintln!("started benchmark {id} on {}", client.address());
            let status = wait(&mut client, id)?;
            print_json(out, &status);
            return Ok(exit_for(&status));
        }
        BenchCommand::Status(a) => {
            let status = if a.wait {
                wait(&mut client, a.id)?
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
                wait(&mut client, a.id)?;
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
        BenchCommand::Log(a) => print_log(out, &mut client, a.id, false)?,
        BenchCommand::Userlog(a) => print_log(out, &mut client, a.id, true)?,
        BenchCommand::Data(a) => print_data(out, &mut client, &a)?,
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
            for line in client.server_logs(a.severity.as_deref())? {
                let line = line?;
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
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
    let client = BenchClient::new(address)?.with_tls(tls)?;
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
            s.status().as_str(),
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

fn print_log(
    out: &mut impl Write,
    client: &mut BenchClient,
    id: u64,
    user: bool,
) -> Result<(), Fail> {
    let what = if user { "user log" } else { "log" };
    let lines = if user {
        client.userlog(id)?
    } else {
        client.log(id)?
    };
    let red = std::io::stdout().is_terminal();
    let _ = writeln!(out, "Start of {what} for bench {id}");
    for line in lines {
        let line = line?;
        if red && line.contains("[error]") {
            let _ = writeln!(out, "\x1b[31m{line}\x1b[0m");
        } else {
            let _ = writeln!(out, "{line}");
        }
        let _ = out.flush();
    }
    let _ = writeln!(out, "End of {what} for bench {id}");
    Ok(())
}

fn print_data(out: &mut impl Write, client: &mut BenchClient, a: &DataArgs) -> Result<(), Fail> {
    let mut series: BTreeMap<String, Vec<(serde_json::Value, u64)>> = BTreeMap::new();
    for sample in client.data(a.id)? {
        let sample = sample?;
        if !a.target.is_empty() && !a.target.contains(&sample.name) {
            continue;
        }
        match a.format {
            DataFormat::Json => series
                .entry(sample.name.clone())
                .or_default()
                .push((sample.value_json(), sample.timestamp)),
            DataFormat::Csv => {
                let _ = writeln!(out, "{},{},{}", sample.name, sample.timestamp, sample.value);
            }
            DataFormat::Tsv => {
                let _ = writeln!(
                    out,
                    "{}\t{}\t{}",
                    sample.timestamp, sample.name, sample.value
                );
            }
        }
        let _ = out.flush();
    }
    if let DataFormat::Json = a.format {
        let graphite: Vec<_> = series
            .into_iter()
            .map(|(target, points)| {
                let points: Vec<_> = points
                    .into_iter()
                    .map(|(v, t)| serde_json::json!([v, t]))
                    .collect();
                serde_json::json!({ "target": target, "datapoints": points })
            })
            .collect();
        print_json(out, &graphite);
    }
    Ok(())
}

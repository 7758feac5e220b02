//! `benchlink bench …`: the official `mzbench` CLI's commands over [`BenchClient`].

use std::collections::HashMap;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use benchlink_core::bench::{LogLineError, Sample, SampleError, Status};

use self::plot::{plot, Drawn};
use self::progress::{wait, Interrupts};
use self::report::report;
use self::target::Target;
use crate::fail::{Fail, EXIT_FAILED_BENCH, EXIT_INVALID, EXIT_MISSING_FILE};
use benchlink_std::bench::{
    Available, BenchClient, Escaped, LineStream, OwnedLine, Retry, Scenario, StartOptions,
    StatusInfo,
};
use benchlink_std::net::{parse_proxy, TlsOptions};

mod charts;
pub mod dashboard;
mod plot;
mod progress;
mod report;
mod target;

#[derive(Debug, Args)]
pub(super) struct BenchArgs {
    /// Server as `host:port` or `http(s)://host[:port]`. Without it (and without
    /// MZBENCH_API_HOST), a server answering at localhost:4800 (`benchlink sandbox`, a
    /// local MZBench) is used — BENCHLINK_BENCH_PROBE=HOST:PORT looks elsewhere, `off`
    /// not at all — and else a throw-away server started in-process.
    #[arg(long, global = true, env = "MZBENCH_API_HOST")]
    host: Option<String>,
    /// Bearer token; without it the official token file ($MZBENCHTOKEN or
    /// ~/.config/mzbench/token) is read.
    #[arg(long, global = true, env = "BENCHLINK_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Do not verify the server's TLS certificate.
    #[arg(long, global = true, alias = "no_cert_check")]
    no_cert_check: bool,
    /// Trust the certificates of this PEM file too (a private CA, or the server's own
    /// certificate, trusted as itself even when it is a CA's, as curl does); SSL_CERT_FILE
    /// is honoured too.
    #[arg(long, global = true)]
    cacert: Option<PathBuf>,
    /// Reach the server through this HTTPS proxy, `[http://]host:port` (a CONNECT
    /// tunnel; TLS stays end to end). HTTPS_PROXY is honoured for https:// servers.
    #[arg(long, global = true, value_name = "HOST:PORT", alias = "https_proxy")]
    https_proxy: Option<String>,
    /// Give up on a try at a request after this many seconds (default 60), and on a
    /// try at a log or data stream after this many seconds without data (default:
    /// never); see --retries.
    #[arg(long, global = true, value_name = "SECONDS", value_parser = parse_seconds)]
    timeout: Option<Duration>,
    /// Tries after a failure worth trying again (a cut, a reset, a refused connection, a
    /// timeout, a 5xx), 200 ms doubling to 5 s apart: streams resume where they were
    /// (`data`, `log`, `userlog`, `server-logs`, `run`, `report`…), and calls that change
    /// nothing (`status`, `results`, `clusters-info`…) are sent again; one that changes
    /// state is never sent twice. 0 turns it off.
    #[arg(long, global = true, value_name = "N", default_value_t = 20)]
    retries: u32,
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Start a benchmark; print its id.
    Start(StartArgs),
    /// Start a benchmark and wait until it ends, showing its stage; print the final
    /// status (exit 3 if it failed, 130 after Ctrl-C).
    Run(RunArgs),
    /// Print a benchmark's status (with --wait: exit 3 if it failed, 130 after Ctrl-C).
    Status(WaitArgs),
    /// Print a benchmark's results (with --wait: once it ended, whatever the outcome,
    /// exit 0 as the official CLI; 130 after Ctrl-C).
    Results(WaitArgs),
    /// Draw a benchmark's metrics (finished or running) into an SVG file, grouped into
    /// charts as MZBench's dashboard groups them.
    Plot(PlotArgs),
    /// Write one self-contained HTML page about a benchmark: its status timeline, its
    /// results table and its metric charts.
    Report(ReportArgs),
    /// Serve a live dashboard of the server's benchmarks in the browser: the list, a
    /// page per benchmark with its charts growing while it runs, and comparisons.
    Dashboard(DashboardArgs),
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
    /// Benchmark id (cluster id for the cluster commands).
    id: u64,
}

#[derive(Debug, Args)]
struct WaitArgs {
    /// Poll until the benchmark ends, showing its stage and elapsed time on stderr.
    #[arg(long)]
    wait: bool,
    /// With --wait: on Ctrl-C, stop the benchmark without asking (the default when
    /// there is no terminal to ask on).
    #[arg(long, alias = "stop_on_interrupt")]
    stop_on_interrupt: bool,
    /// Benchmark id.
    id: u64,
}

#[derive(Debug, Args)]
struct ScriptArg {
    /// The scenario file; files it includes are read relative to it.
    script: PathBuf,
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    start: StartArgs,
    /// On Ctrl-C, stop the benchmark without asking (the default when there is no
    /// terminal to ask on).
    #[arg(long, alias = "stop_on_interrupt")]
    stop_on_interrupt: bool,
    /// When the benchmark ended, draw its metrics into this SVG file (as `bench plot`).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Serve the live dashboard of this benchmark (and the server's others) while it
    /// runs; its address is printed at the start.
    #[arg(long)]
    dashboard: bool,
    /// With --dashboard: where it listens (port 0: any free one).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:0",
        requires = "dashboard"
    )]
    listen: SocketAddr,
}

#[derive(Debug, Args)]
struct DashboardArgs {
    /// Where to listen: loopback unless you mean to show the benchmarks to whoever can
    /// reach this machine (it is read-only and has no login).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:4880")]
    listen: SocketAddr,
    /// Benchmarks to follow from the start (the newest ones and new ones are shown too).
    ids: Vec<u64>,
}

#[derive(Debug, Args)]
struct PlotArgs {
    /// The SVG file to write.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Only these metrics (repeatable).
    #[arg(long)]
    target: Vec<String>,
    /// Benchmark id.
    id: u64,
}

#[derive(Debug, Args)]
struct ReportArgs {
    /// The HTML file to write.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Benchmark id.
    id: u64,
}

#[derive(Debug, Args)]
struct StartArgs {
    /// Node count, or a comma-separated list of preallocated hosts (`[user@]host`).
    #[arg(long)]
    nodes: Option<String>,
    /// Preallocated hosts, one per line (instead of --nodes).
    #[arg(long, alias = "nodes_file", value_name = "FILE")]
    nodes_file: Option<PathBuf>,
    /// Allocate enough nodes for this many workers each: the scenario's pool sizes
    /// added up, divided by this, rounded up (instead of --nodes).
    #[arg(long, alias = "workers_per_node", value_name = "N")]
    workers_per_node: Option<u64>,
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
    /// Git repository of the benchmark software for the nodes (a `/start` parameter the
    /// official CLI does not offer).
    #[arg(long, alias = "node_git", value_name = "URL")]
    node_git: Option<String>,
    /// Erlang VM argument for the nodes (repeatable; a `/start` parameter the official CLI
    /// does not offer).
    #[arg(long, alias = "vm_args", value_name = "ARG")]
    vm_args: Vec<String>,
    /// Interval of the nodes' metric reports, at least 1000 (a `/start` parameter the
    /// official CLI does not offer).
    #[arg(long, alias = "metric_update_interval_ms", value_name = "MS",
          value_parser = clap::value_parser!(u64).range(1000..))]
    metric_update_interval_ms: Option<u64>,
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
    /// Output format.
    #[arg(long, value_enum, default_value = "json")]
    format: DataFormat,
    /// Only these metrics (repeatable).
    #[arg(long)]
    target: Vec<String>,
    /// Benchmark id.
    id: u64,
}

#[derive(Debug, Args)]
struct ChangeEnvArgs {
    /// Benchmark id.
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
    /// Benchmark id.
    id: u64,
    /// The BDL statement.
    command: String,
}

#[derive(Debug, Args)]
struct TagsArgs {
    /// Benchmark id.
    id: u64,
    /// Comma-separated tags.
    tags: String,
}

#[derive(Debug, Args)]
struct EmailArgs {
    /// Benchmark id.
    id: u64,
    /// Addresses to send the report to.
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
    // Refuse contradictions before anything is resolved, started or sent.
    validate(&args)?;
    // The in-process server (if any) lives as long as `target`, i.e. the command.
    let target = Target::resolve(args.host.as_deref(), Target::probe_from_env().as_deref())?;
    let client = client(&args, &target)?;
    let out = &mut BufWriter::with_capacity(OUT_BUF, std::io::stdout().lock());
    let code = command(args.command, client, out);
    out.flush().map_err(Fail::output)?;
    code.map_err(|Fail(code, mut message)| {
        if target.local.is_some() && message.contains("not found") {
            message.push_str(
                "\nhint: this command's own in-process server knows only what the command \
                 did; run `benchlink sandbox` (or give --host) so that commands share a server",
            );
        }
        Fail(code, message)
    })
}

/// Output is written in pieces of this size (or when a stream has nothing more to read).
const OUT_BUF: usize = 64 * 1024;

/// Option combinations that cannot mean anything, refused with [`EXIT_INVALID`].
fn validate(args: &BenchArgs) -> Result<(), Fail> {
    let invalid = |m: &str| Err(Fail(EXIT_INVALID, m.to_owned()));
    if args.no_cert_check && args.cacert.is_some() {
        return invalid("--cacert means nothing with --no_cert_check (nothing is verified)");
    }
    match &args.command {
        BenchCommand::Start(a) | BenchCommand::Run(RunArgs { start: a, .. }) => {
            let given = [
                a.nodes.is_some(),
                a.nodes_file.is_some(),
                a.workers_per_node.is_some(),
            ];
            if given.iter().filter(|g| **g).count() > 1 {
                return invalid("--nodes, --nodes_file and --workers_per_node exclude each other");
            }
            if a.workers_per_node == Some(0) {
                return invalid("invalid value for --workers_per_node: 0");
            }
            if let Some(nodes) = &a.nodes {
                check_nodes(nodes).map_err(|m| Fail(EXIT_INVALID, m))?;
            }
            if a.env.iter().any(|(k, _)| k.is_empty()) {
                return invalid("--env needs a name before `=`");
            }
        }
        BenchCommand::Status(a) | BenchCommand::Results(a) if a.stop_on_interrupt && !a.wait => {
            return invalid("--stop-on-interrupt only applies with --wait");
        }
        _ => {}
    }
    Ok(())
}

/// A dashboard on `listen`, with a warning when that is not loopback.
fn serve_dashboard(listen: SocketAddr) -> Result<dashboard::Dashboard, Fail> {
    if !listen.ip().is_loopback() {
        eprintln!(
            "warning: the dashboard has no login: anyone who reaches {listen} sees the \
             benchmarks, their logs and environment; keep it on loopback unless you mean that"
        );
    }
    dashboard::Dashboard::serve(listen)
        .map_err(|e| Fail(1, format!("cannot serve the dashboard on {listen}: {e}")))
}

/// The name the server gives a benchmark: the one asked for, else the script's file
/// name.
fn scenario_name(options: &StartOptions, start: &StartArgs) -> String {
    options.benchmark_name.clone().unwrap_or_else(|| {
        start
            .script
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    })
}

/// Says on stderr what a plot drew and where.
fn plotted(drawn: Drawn, path: &Path) {
    eprintln!(
        "plotted {} metrics in {} charts into {}",
        drawn.metrics,
        drawn.charts,
        path.display()
    );
}

/// A `--nodes` value the server can use: a count above 0, or at least two hosts that
/// all have the same user (the server would otherwise fail the benchmark later, at
/// `allocating_hosts`).
fn check_nodes(nodes: &str) -> Result<(), String> {
    if let Ok(count) = nodes.trim().parse::<u64>() {
        return if count == 0 {
            Err("invalid value for --nodes: 0 (a count is at least 1)".into())
        } else {
            Ok(())
        };
    }
    let hosts: Vec<&str> = nodes
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .collect();
    if hosts.len() < 2 {
        return Err(format!(
            "invalid value for --nodes: {nodes:?} (a host list needs at least 2 hosts, one \
             of them the director)"
        ));
    }
    let user = |h: &str| h.split_once('@').map(|(u, _)| u.to_owned());
    let first = hosts.first().and_then(|h| user(h));
    if hosts.iter().any(|h| user(h) != first) {
        return Err(format!(
            "invalid value for --nodes: {nodes:?} (every host needs the same user)"
        ));
    }
    Ok(())
}

fn command(
    command: BenchCommand,
    mut client: BenchClient,
    out: &mut impl Write,
) -> Result<u8, Fail> {
    match command {
        BenchCommand::Start(a) => {
            let (scenario, options) = start_request(&a)?;
            let id = client.start(&scenario, &options)?;
            print_json(out, &serde_json::json!({ "id": id, "status": "pending" }));
        }
        BenchCommand::Run(a) => {
            let (scenario, options) = start_request(&a.start)?;
            // Caught from before `/start`, so that no Ctrl-C orphans the benchmark.
            let interrupts = Interrupts::catch(a.stop_on_interrupt)?;
            let id = client.start(&scenario, &options)?;
            eprintln!("started benchmark {id} on {}", client.address());
            let _dashboard = if a.dashboard {
                let dashboard = serve_dashboard(a.listen)?;
                dashboard.board().add(
                    id,
                    dashboard::Meta {
                        name: Some(scenario_name(&options, &a.start)),
                        tags: options.tags.clone(),
                        env: options.env.clone(),
                    },
                );
                dashboard.watch(client.another(), &[id]);
                eprintln!("dashboard: {}", dashboard.benchmark_url(id));
                Some(dashboard)
            } else {
                None
            };
            let status = wait(&mut client, id, &interrupts)?;
            print_json(out, &status);
            let code = exit_for(&status);
            if let Some(path) = &a.plot {
                out.flush().map_err(Fail::output)?;
                match plot(client, id, &status, &[], path) {
                    Ok(drawn) => plotted(drawn, path),
                    // A failed benchmark's exit code says more than the missing plot.
                    Err(Fail(_, m)) if code != 0 => eprintln!("error: {m}"),
                    Err(fail) => return Err(fail),
                }
            }
            return Ok(code);
        }
        BenchCommand::Status(a) => {
            let status = if a.wait {
                wait(&mut client, a.id, &Interrupts::catch(a.stop_on_interrupt)?)?
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
                wait(&mut client, a.id, &Interrupts::catch(a.stop_on_interrupt)?)?;
            }
            print_json(out, &client.results(a.id)?);
        }
        BenchCommand::Plot(a) => {
            let status = client.status(a.id)?;
            plotted(
                plot(client, a.id, &status, &a.target, &a.output)?,
                &a.output,
            );
        }
        BenchCommand::Report(a) => {
            let charts = report(client, a.id, &a.output)?;
            eprintln!(
                "wrote the report of benchmark {} ({charts} charts) into {}",
                a.id,
                a.output.display()
            );
        }
        BenchCommand::Dashboard(a) => {
            let dashboard = serve_dashboard(a.listen)?;
            dashboard.watch(client, &a.ids);
            eprintln!("dashboard: {} (Ctrl-C ends it)", dashboard.url());
            loop {
                std::thread::park();
            }
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

fn client(args: &BenchArgs, target: &Target) -> Result<BenchClient, Fail> {
    let tls = TlsOptions::from_command_line(args.cacert.as_deref(), args.no_cert_check)
        .map_err(|e| Fail(1, e.to_string()))?;
    let mut client = BenchClient::new(target.address.clone())?.with_tls(tls)?;
    // The proxy variables are for https (an http server on the local network is reached
    // directly), the flag for any server.
    let proxy_env = || {
        ["HTTPS_PROXY", "https_proxy"]
            .into_iter()
            .find_map(|name| std::env::var(name).ok())
    };
    let proxy = match &args.https_proxy {
        Some(p) => Some(p.clone()),
        None if target.address.tls => proxy_env(),
        None => None,
    };
    if let Some(p) = proxy.filter(|p| !p.is_empty()) {
        let (host, port) = parse_proxy(&p).map_err(|e| Fail(EXIT_INVALID, e))?;
        client = client.with_https_proxy(host, port);
    }
    if let Some(timeout) = args.timeout {
        client = client.with_timeout(timeout);
    }
    client = client.with_retry((args.retries > 0).then_some(Retry {
        attempts: Some(args.retries),
        ..Retry::DEFAULT
    }));
    Ok(match &args.token {
        Some(token) => client.with_token(token.clone()),
        None => client.with_token_file(),
    })
}

fn scenario(path: &Path) -> Result<Scenario, Fail> {
    Scenario::from_file(path)
        .map_err(|e| Fail(EXIT_MISSING_FILE, format!("{}: {e}", path.display())))
}

/// The scenario and `/start` options of `start` / `run`, with the nodes worked out from
/// `--nodes_file` or `--workers_per_node` as the official CLI does.
fn start_request(a: &StartArgs) -> Result<(Scenario, StartOptions), Fail> {
    let scenario = scenario(&a.script)?;
    let nodes = match (&a.nodes, &a.nodes_file, a.workers_per_node) {
        (_, Some(file), _) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| Fail(EXIT_MISSING_FILE, format!("{}: {e}", file.display())))?;
            let hosts: Vec<&str> = text
                .lines()
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .collect();
            let hosts = hosts.join(",");
            check_nodes(&hosts)
                .map_err(|m| Fail(EXIT_INVALID, format!("{}: {m}", file.display())))?;
            Some(hosts)
        }
        (_, None, Some(per_node)) => {
            let script = String::from_utf8_lossy(&scenario.script);
            let workers = pool_workers(&script).ok_or_else(|| {
                Fail(
                    EXIT_INVALID,
                    format!(
                        "--workers_per_node: cannot add up the pool sizes of {} (each pool \
                         needs a literal `size`); give --nodes instead",
                        a.script.display()
                    ),
                )
            })?;
            Some(workers.div_ceil(per_node).max(1).to_string())
        }
        (nodes, None, None) => nodes.clone(),
    };
    let mut options = StartOptions {
        nodes,
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
    };
    // The server takes a query key named like one of its parameters as that parameter,
    // never as an environment variable, so these travel with the environment.
    let params = a
        .node_git
        .iter()
        .map(|g| ("node_git", g.clone()))
        .chain(a.vm_args.iter().map(|v| ("vm_args", v.clone())))
        .chain(
            a.metric_update_interval_ms
                .map(|ms| ("metric_update_interval_ms", ms.to_string())),
        );
    options.env.extend(params.map(|(k, v)| (k.to_owned(), v)));
    Ok((scenario, options))
}

/// The scenario's workers: its pools' sizes added up, or `None` when a pool's size is
/// not a literal number. Pools are `pool(size = N, …)` in BDL and
/// `{pool, [{size, N}, …], …}` in Erlang terms.
fn pool_workers(script: &str) -> Option<u64> {
    let code: String = script
        .lines()
        .map(|l| l.split(['#', '%']).next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    let bdl = compact.starts_with("!benchDL") || script.starts_with("#!benchDL");
    let (pool, size) = if bdl {
        ("pool(", "size=")
    } else {
        ("{pool,", "{size,")
    };
    let pools = compact.match_indices(pool).count();
    let sizes: Vec<u64> = compact
        .match_indices(size)
        .map(|(at, m)| {
            let rest = compact.get(at + m.len()..).unwrap_or_default();
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u64>().ok()
        })
        .collect::<Option<_>>()?;
    (pools > 0 && sizes.len() == pools).then(|| sizes.iter().sum())
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
        // A live tail's gap after a cut, or a log that could not be resumed exactly:
        // said on stderr, and the stream goes on.
        Err(e @ LogLineError::Resume(_)) => {
            eprintln!("benchlink: {e}");
            return Ok(());
        }
        Err(e) => {
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

#[cfg(test)]
mod tests {
    use super::pool_workers;
    use clap::CommandFactory;

    /// Every command and argument of `benchlink bench` says what it is in `--help`.
    #[test]
    fn every_argument_has_a_description() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let builtin = matches!(arg.get_id().as_str(), "help" | "version");
                if !builtin && arg.get_help().is_none() {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.get_name() != "help" && sub.get_about().is_none() {
                    missing.push(format!("{path} {}", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let top = crate::Cli::command();
        let bench = top.find_subcommand("bench").expect("bench command");
        let mut missing = Vec::new();
        walk(bench, "bench", &mut missing);
        assert!(missing.is_empty(), "without a description: {missing:?}");
        let help = top.clone().render_long_help().to_string();
        for needed in ["Examples:", "MZBENCH_API_HOST", "BENCHLINK_BENCH_PROBE"] {
            assert!(help.contains(needed), "{needed} in benchlink --help");
        }
    }

    #[test]
    fn workers_of_bdl_and_erlang_scenarios() {
        let bdl = "#!benchDL\npool(size = 3, worker_type = dummy_worker):\n  print(\"a\")\n\
                   pool(size = 2,\n     worker_type = dummy_worker):\n  print(\"b\")\n";
        assert_eq!(pool_workers(bdl), Some(5));
        let erlang = "% two pools\n[{pool, [{size, 4}, {worker_type, dummy_worker}], []},\n \
                      {pool, [{size, 1}], []}].\n";
        assert_eq!(pool_workers(erlang), Some(5));
        let variable = "#!benchDL\npool(size = numvar(\"workers\", 3), worker_type = w):\n";
        assert_eq!(pool_workers(variable), None, "not a literal size");
        assert_eq!(pool_workers("#!benchDL\n"), None, "no pool");
    }
}

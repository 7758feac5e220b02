//! The life of one benchmark, run on its own thread like the real server's benchmark
//! process: the pipeline stages (each visible in `/status`), the running phase with its
//! metric reports and worker log lines, then the finalize stages that run after the
//! final status is visible and before the streams end.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::clock;
use super::config::BenchFault;
use super::erlang;
use super::metrics::Generator;
use super::params::Nodes;
use super::results;
use super::scenario::{self, PrintArg};
use super::server_log::Severity;
use super::state::{is_final, Cluster, EmailReport, Shared};

/// The pipeline stages in order; each becomes the benchmark's `/status` while it runs
/// (the stages a [`BenchFault`](super::BenchFault) can name).
pub const STAGES: [&str; 13] = [
    "init",
    "checking_script",
    "wait_exclusive",
    "allocating_hosts",
    "provisioning",
    "connect_nodes",
    "starting_collectors",
    "uploading_script",
    "uploading_includes",
    "pre_hooks",
    "starting",
    "running",
    "post_hooks",
];

/// Finalize stages; they do not change the status.
const FINALIZE: [&str; 6] = [
    "saving_bench_results",
    "sending_email_report",
    "stopping_collectors",
    "cleaning_nodes",
    "deallocating_hosts",
    "release_exclusive",
];

/// Largest `nodes=<int>` the dummy cloud allocates (each host is a record entry).
const MAX_NODES: i64 = 10_000;

/// Most worker log lines written per metric report (the counters still count all).
const MAX_PRINTS_PER_REPORT: i64 = 50;

/// How a stage ended.
enum Outcome {
    Done,
    Stopped,
    Failed(String),
    /// Server shutdown or simulated crash: no finalize.
    Aborted,
}

/// Starts the benchmark's thread.
pub(crate) fn spawn(shared: &Arc<Shared>, id: i64) {
    let s = Arc::clone(shared);
    match thread::Builder::new()
        .name(format!("bench-{id}"))
        .spawn(move || run(&s, id))
    {
        Ok(handle) => shared.track(handle),
        Err(e) => {
            let mut st = shared.lock();
            if let Some(b) = st.benches.get_mut(&id) {
                b.crashed = true;
                b.finish("failed");
                b.process_alive = false;
            }
            st.log(
                Severity::Error,
                &format!("Failed to start benchmark #{id}: {e}"),
            );
            shared.notify();
        }
    }
}

/// `t + dur`, saturating far in the future instead of panicking on overflow (the
/// durations come from configuration and scenarios, which may be absurd).
fn later(t: Instant, dur: Duration) -> Instant {
    t.checked_add(dur)
        .unwrap_or_else(|| t + Duration::from_secs(86_400 * 365))
}

/// `d × factor`, saturating instead of panicking on overflow or a negative factor.
fn scale(d: Duration, factor: f64) -> Duration {
    Duration::try_from_secs_f64(d.as_secs_f64() * factor).unwrap_or(if factor > 0.0 {
        Duration::MAX
    } else {
        Duration::ZERO
    })
}

/// Sleeps for `dur` unless stopped (when `stoppable`), aborted or shut down; flushes
/// the logs on time meanwhile.
fn pause(shared: &Shared, id: i64, dur: Duration, stoppable: bool) -> Outcome {
    let deadline = later(Instant::now(), dur);
    let flush = shared.config.speed.log_flush_interval;
    let flush_ms = u64::try_from(flush.as_millis()).unwrap_or(u64::MAX);
    let mut st = shared.lock();
    loop {
        if shared.is_shutdown() {
            return Outcome::Aborted;
        }
        let Some(b) = st.benches.get_mut(&id) else {
            return Outcome::Aborted;
        };
        if b.abort {
            return Outcome::Aborted;
        }
        if stoppable && b.stop_requested {
            return Outcome::Stopped;
        }
        let now_ms = clock::now_ms();
        b.log.tick(now_ms, flush_ms);
        b.user_log.tick(now_ms, flush_ms);
        let now = Instant::now();
        if now >= deadline {
            return Outcome::Done;
        }
        st = shared.wait(
            st,
            (deadline - now).min(flush.max(Duration::from_millis(1))),
        );
    }
}

fn run(shared: &Arc<Shared>, id: i64) {
    let mut outcome = Outcome::Done;
    for stage in STAGES {
        {
            let mut st = shared.lock();
            let Some(b) = st.benches.get_mut(&id) else {
                return;
            };
            if b.stop_requested {
                outcome = Outcome::Stopped;
                break;
            }
            if !is_final(b.status) {
                b.status = stage;
            }
            b.api_log(
                Severity::Info,
                &format!("Stage 'pipeline - {stage}': started"),
            );
            st.log(
                Severity::Info,
                &format!("[ API ] Benchmark #{id}: stage 'pipeline - {stage}' started"),
            );
            shared.notify();
        }
        if let Some(fault) = shared.config.bench_fault.as_ref() {
            if fault.stage() == stage {
                // The stage then sees the abort at once, like a process that died in it.
                shared.kill(id, matches!(fault, BenchFault::Zombie { .. }));
            }
        }
        outcome = run_stage(shared, id, stage);
        let mut st = shared.lock();
        let Some(b) = st.benches.get_mut(&id) else {
            return;
        };
        match &outcome {
            Outcome::Done => b.api_log(
                Severity::Info,
                &format!("Stage 'pipeline - {stage}': finished"),
            ),
            Outcome::Failed(reason) => {
                b.api_log(
                    Severity::Error,
                    &format!("Stage 'pipeline - {stage}': failed\n{reason}"),
                );
                b.finish("failed");
                st.log(
                    Severity::Error,
                    &format!("[ API ] Benchmark #{id} failed at stage {stage}: {reason}"),
                );
            }
            Outcome::Stopped => b.api_log(
                Severity::Info,
                &format!("Stage 'pipeline - {stage}': stopped"),
            ),
            Outcome::Aborted => {}
        }
        shared.notify();
        if !matches!(outcome, Outcome::Done) {
            break;
        }
    }
    if !matches!(outcome, Outcome::Aborted) {
        let mut st = shared.lock();
        if let Some(b) = st.benches.get_mut(&id) {
            if matches!(outcome, Outcome::Done) {
                b.finish("complete");
            }
            let status = b.status;
            b.api_log(Severity::Info, &format!("Bench final status: {status}"));
            st.log(
                Severity::Info,
                &format!("[ API ] Benchmark #{id} finished with status {status}"),
            );
        }
        shared.notify();
        drop(st);
        finalize(shared, id);
    }
    let mut st = shared.lock();
    if let Some(b) = st.benches.get_mut(&id) {
        let now = clock::now_ms();
        b.log.close(now);
        b.user_log.close(now);
        b.process_alive = false;
    }
    st.exclusive.retain(|_, holder| *holder != id);
    shared.notify();
}

fn run_stage(shared: &Arc<Shared>, id: i64, stage: &str) -> Outcome {
    let step = shared.config.speed.stage;
    match stage {
        "init" => {
            let crash = shared
                .lock()
                .benches
                .get(&id)
                .is_some_and(|b| b.params.emulate_bench_crash);
            match pause(shared, id, step, true) {
                Outcome::Done if crash => Outcome::Failed("emulated_bench_crash".to_owned()),
                other => other,
            }
        }
        "checking_script" => {
            let script = shared
                .lock()
                .benches
                .get(&id)
                .map(|b| b.params.script.clone())
                .unwrap_or_default();
            match pause(shared, id, step, true) {
                Outcome::Done => match scenario::check(&script) {
                    Ok(_) => Outcome::Done,
                    Err(reason) => Outcome::Failed(reason),
                },
                other => other,
            }
        }
        "wait_exclusive" => wait_exclusive(shared, id),
        "allocating_hosts" => allocate(shared, id),
        "connect_nodes" => {
            let r = pause(shared, id, step, true);
            if matches!(r, Outcome::Done) {
                let mut st = shared.lock();
                if let Some(b) = st.benches.get_mut(&id) {
                    b.director_connected = true;
                    b.node_log(Severity::Info, "<0.211.0>", "Director node connected");
                }
            }
            r
        }
        "starting" => {
            let r = pause(shared, id, step, true);
            if matches!(r, Outcome::Done) {
                let mut st = shared.lock();
                if let Some(b) = st.benches.get_mut(&id) {
                    Generator::new(&b.scenario, id).declare(&mut b.metrics);
                }
            }
            r
        }
        "running" => running(shared, id),
        _ => pause(shared, id, step, true),
    }
}

fn wait_exclusive(shared: &Arc<Shared>, id: i64) -> Outcome {
    let poll = shared.config.speed.poll;
    let mut st = shared.lock();
    loop {
        if shared.is_shutdown() {
            return Outcome::Aborted;
        }
        let Some(b) = st.benches.get_mut(&id) else {
            return Outcome::Aborted;
        };
        if b.abort {
            return Outcome::Aborted;
        }
        if b.stop_requested {
            return Outcome::Stopped;
        }
        b.exclusive_checks += 1;
        let labels = b.params.exclusive.clone();
        // The lowest waiting id goes first among benchmarks that share a label.
        let blocked = labels
            .iter()
            .any(|l| st.exclusive.get(l).is_some_and(|holder| *holder != id))
            || st.benches.values().any(|other| {
                other.id < id
                    && other.status == "wait_exclusive"
                    && !other.stop_requested
                    && other.params.exclusive.iter().any(|l| labels.contains(l))
            });
        if !blocked {
            for l in labels {
                st.exclusive.insert(l, id);
            }
            break;
        }
        st = shared.wait(st, poll);
    }
    drop(st);
    let r = pause(shared, id, shared.config.speed.stage, true);
    if matches!(r, Outcome::Done) {
        if let Some(b) = shared.lock().benches.get_mut(&id) {
            b.start_time = Some(clock::now_secs());
        }
        shared.notify();
    }
    r
}

/// `allocating_hosts`: unstoppable; a stop only takes effect once it is over.
fn allocate(shared: &Arc<Shared>, id: i64) -> Outcome {
    let step = shared.config.speed.stage;
    let (nodes, cloud) = match shared.lock().benches.get(&id) {
        Some(b) => (b.params.nodes.clone(), b.params.cloud.clone()),
        None => return Outcome::Aborted,
    };
    let cloud = cloud.unwrap_or_else(|| "local".to_owned());
    match nodes {
        Nodes::Count(n) if n > MAX_NODES => {
            fail_after(shared, id, format!("{{too_many_nodes,{n}}}"))
        }
        Nodes::Count(n) if n <= 0 => fail_after(shared, id, format!("{{invalid_nodes,{n}}}")),
        Nodes::Repeated(list) => fail_after(shared, id, format!("{{invalid_nodes,{list:?}}}")),
        Nodes::Hosts(list) => {
            let hosts: Vec<&str> = list.split(',').filter(|h| !h.is_empty()).collect();
            let users: Vec<&str> = hosts
                .iter()
                .map(|h| h.split_once('@').map_or("root", |(u, _)| u))
                .collect();
            if hosts.len() < 2 {
                fail_after(shared, id, "{not_enough_hosts,1}".to_owned())
            } else if users.iter().any(|u| Some(u) != users.first()) {
                fail_after(shared, id, "{different_users_on_hosts}".to_owned())
            } else {
                pause(shared, id, step, false)
            }
        }
        Nodes::Count(n) => {
            if cloud != "local" && !shared.config.clouds.contains(&cloud) {
                return fail_after(shared, id, format!("{{unknown_cloud,{cloud}}}"));
            }
            let cluster_id = {
                let mut st = shared.lock();
                let cluster_id = st.next_cluster_id;
                st.next_cluster_id += 1;
                st.clusters.insert(
                    cluster_id,
                    Cluster {
                        id: cluster_id,
                        bench_id: id,
                        n: n + 1,
                        state: "registered",
                        timestamp: clock::now_secs(),
                        provider: "mzb_dummycloud_plugin".to_owned(),
                        hosts: None,
                        reason: None,
                    },
                );
                st.log(
                    Severity::Info,
                    &format!(
                        "[ API ] Allocating {} hosts in {cloud} cloud for benchmark #{id}",
                        n + 1
                    ),
                );
                shared.notify();
                cluster_id
            };
            let r = pause(shared, id, step, false);
            let mut st = shared.lock();
            if let Some(c) = st.clusters.get_mut(&cluster_id) {
                c.state = "allocated";
                c.timestamp = clock::now_secs();
                c.hosts = Some(vec![
                    "127.0.0.1".to_owned();
                    usize::try_from(n + 1).unwrap_or(1)
                ]);
            }
            st.log(
                Severity::Info,
                &format!("[ API ] Cluster {cluster_id} allocated for benchmark #{id}"),
            );
            shared.notify();
            r
        }
    }
}

fn fail_after(shared: &Arc<Shared>, id: i64, reason: String) -> Outcome {
    match pause(shared, id, shared.config.speed.stage, false) {
        Outcome::Done => Outcome::Failed(reason),
        other => other,
    }
}

/// The text a `print` statement prints.
fn print_text(
    arg: &PrintArg,
    resources: &[(String, String)],
    includes: &[(String, Vec<u8>)],
) -> String {
    match arg {
        PrintArg::Literal(s) => erlang::string(s),
        PrintArg::Resource(name) => {
            let path = resources
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, p)| p.as_str());
            let content = path
                .and_then(|p| includes.iter().find(|(f, _)| f == p))
                .map(|(_, c)| String::from_utf8_lossy(c).into_owned());
            erlang::string(&content.unwrap_or_default())
        }
        PrintArg::Other(s) => s.clone(),
    }
}

fn running(shared: &Arc<Shared>, id: i64) -> Outcome {
    let speed = &shared.config.speed;
    let (mut generator, run_for, interval) = {
        let st = shared.lock();
        let Some(b) = st.benches.get(&id) else {
            return Outcome::Aborted;
        };
        let run_for = b
            .scenario
            .loop_secs
            .map_or(speed.default_running, |s| scale(speed.scenario_second, s))
            .min(speed.max_running);
        let factor = b.params.metric_update_interval_ms.map_or(1.0, |ms| {
            #[allow(clippy::cast_precision_loss)] // an interval in ms
            let ms = ms as f64;
            ms / 10_000.0
        });
        let interval = scale(speed.metric_interval, factor).max(Duration::from_millis(1));
        (Generator::new(&b.scenario, id), run_for, interval)
    };
    {
        let mut st = shared.lock();
        if let Some(b) = st.benches.get_mut(&id) {
            let workers: u64 = b.scenario.pools.iter().map(|p| p.size).sum();
            b.node_log(
                Severity::Info,
                "<0.280.0>",
                &format!("Starting {workers} workers"),
            );
        }
    }
    let started = Instant::now();
    let mut next_report = started;
    let mut printed = 0i64;
    let mut logs_written = 0i64;
    loop {
        next_report = later(next_report, interval);
        let until = next_report.min(later(started, run_for));
        let r = pause(
            shared,
            id,
            until.saturating_duration_since(Instant::now()),
            true,
        );
        if matches!(r, Outcome::Aborted) {
            return r;
        }
        let elapsed = started.elapsed().min(run_for);
        let done = elapsed >= run_for;
        let t = elapsed.as_secs_f64() / speed.scenario_second.as_secs_f64().max(1e-9);
        let mut st = shared.lock();
        let Some(b) = st.benches.get_mut(&id) else {
            return Outcome::Aborted;
        };
        if generator.prints() {
            let due = generator.iterations(t);
            let lines = (due - printed).clamp(0, MAX_PRINTS_PER_REPORT);
            for i in 0..lines {
                let arg = b
                    .scenario
                    .prints
                    .first()
                    .cloned()
                    .unwrap_or(PrintArg::Other(String::new()));
                let text = print_text(&arg, &b.scenario.resources, &b.params.includes);
                let pid = format!("<0.{}.0>", 300 + (printed + i) % 7);
                b.user_log_line(&pid, &format!("Dummy print: {text}"));
            }
            logs_written += lines;
            printed = due;
        }
        let last = done || matches!(r, Outcome::Stopped);
        generator.report(&mut b.metrics, t, clock::now_secs(), logs_written, last);
        shared.notify();
        if matches!(r, Outcome::Stopped) {
            return r;
        }
        if done {
            b.node_log(Severity::Info, "<0.280.0>", "All workers have ended");
            b.results = Some(results::compute(
                &b.metrics,
                &shared.config.result_percentiles,
            ));
            return Outcome::Done;
        }
    }
}

fn finalize(shared: &Arc<Shared>, id: i64) {
    let each = shared.config.speed.finalize / u32::try_from(FINALIZE.len()).unwrap_or(1);
    for stage in FINALIZE {
        {
            let mut st = shared.lock();
            let Some(b) = st.benches.get_mut(&id) else {
                return;
            };
            b.api_log(
                Severity::Info,
                &format!("Stage 'finalize - {stage}': started"),
            );
            match stage {
                "saving_bench_results" if b.results.is_none() && b.director_connected => {
                    b.results = Some(results::compute(
                        &b.metrics,
                        &shared.config.result_percentiles,
                    ));
                }
                "sending_email_report" if !b.params.emails.is_empty() => {
                    let report = EmailReport {
                        bench_id: u64::try_from(id).unwrap_or(0),
                        addresses: b.params.emails.clone(),
                        on_request: false,
                    };
                    st.email_reports.push(report);
                }
                "deallocating_hosts" if b.params.deallocate_after_bench => {
                    let mine: Vec<i64> = st
                        .clusters
                        .values()
                        .filter(|c| c.bench_id == id && c.state == "allocated")
                        .map(|c| c.id)
                        .collect();
                    for c in mine {
                        st.clusters.remove(&c);
                        st.log(Severity::Info, &format!("[ API ] Cluster {c} deallocated"));
                    }
                }
                "release_exclusive" => st.exclusive.retain(|_, holder| *holder != id),
                _ => {}
            }
            shared.notify();
        }
        if matches!(pause(shared, id, each, false), Outcome::Aborted) {
            return;
        }
        if let Some(b) = shared.lock().benches.get_mut(&id) {
            b.api_log(
                Severity::Info,
                &format!("Stage 'finalize - {stage}': finished"),
            );
        }
    }
}

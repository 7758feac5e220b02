//! `BenchClient` against the local benchmark server, endpoint by endpoint: what the
//! server understood from each request (checked on the server's own record), the reply
//! shapes, the typed errors of every id-taking endpoint, and token authentication.

use std::collections::BTreeSet;
use std::time::Duration;

use benchlink_core::bench::ReasonCode;
use benchlink_sandbox::bench::{EmailReport, Quirks, Speed};
use benchlink_std::bench::{BenchClient, Error, ErrorKind, Scenario, StartOptions, StatusInfo};
use benchlink_tests::{
    client, fast_server, hello, live_server, scenario, scenario_path, server_with, wait_final,
    wait_process_gone, wait_running, within, PATIENCE,
};

/// The pipeline stages in order, then the final statuses.
const STAGES: [&str; 13] = [
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

/// Asserts that `result` is the server's error with this HTTP status and reason code.
#[track_caller]
fn assert_server_error<T: std::fmt::Debug>(
    result: Result<T, Error>,
    status: u16,
    code: ReasonCode<'_>,
    what: &str,
) -> String {
    match result {
        Err(e) if matches!(e.kind(), ErrorKind::Server { .. }) => {
            assert_eq!(e.http_status(), Some(status), "{what}: {e}");
            assert_eq!(e.reason_code(), Some(code), "{what}: {e}");
            e.reason().unwrap_or_default().to_owned()
        }
        other => panic!("{what}: expected server error {status} {code}, got {other:?}"),
    }
}

fn options() -> StartOptions {
    StartOptions::default()
}

#[test]
fn start_uploads_includes_and_sends_every_option() {
    let server = fast_server();
    let mut c = client(&server.host());
    let opts = StartOptions {
        nodes: Some("2".into()),
        deallocate_after_bench: Some(false),
        provision_nodes: Some(false),
        benchmark_name: Some("hello & friends=1%".into()),
        cloud: Some("local".into()),
        tags: vec!["alpha".into(), "beta".into()],
        exclusive: Some("lab".into()),
        node_commit: Some("abc123".into()),
        emails: vec!["ops@example.com".into(), "dev+x@example.com".into()],
        env: vec![
            ("rate".into(), "5".into()),
            ("greeting".into(), "hi there & bye=1% ünï".into()),
        ],
    };
    let id = c.start(&hello(), &opts).expect("start");
    let info = server
        .benchmark(id)
        .expect("the server knows the new benchmark");
    assert_eq!(info.name, "hello & friends=1%");
    assert_eq!(info.script_name, "hello.bdl");
    assert_eq!(
        info.script.as_bytes(),
        std::fs::read(scenario_path("hello.bdl")).expect("hello.bdl")
    );
    let data = std::fs::read(scenario_path("data.txt")).expect("data.txt");
    assert_eq!(info.includes, vec![("data.txt".to_owned(), data)]);
    for pair in [
        ("greeting", "hi there & bye=1% ünï".to_owned()),
        ("rate", "5".to_owned()),
        ("mzb_script_name", "hello.bdl".to_owned()),
        ("mzb_bench_id", id.to_string()),
    ] {
        assert!(
            info.env.contains(&(pair.0.to_owned(), pair.1.clone())),
            "env {pair:?} missing from {:?}",
            info.env
        );
    }
    assert_eq!(info.tags, ["alpha", "beta"]);
    assert_eq!(info.emails, ["ops@example.com", "dev+x@example.com"]);
    assert_eq!(info.exclusive, ["lab"]);
    assert_eq!(info.parent, None);

    assert_eq!(wait_final(&mut c, id).status_text, "complete");
    wait_process_gone(&server, id);
    // The `email` option: a report at finalize, not on request.
    assert!(
        server.email_reports().contains(&EmailReport {
            bench_id: id,
            addresses: opts.emails.clone(),
            on_request: false,
        }),
        "{:?}",
        server.email_reports()
    );
    // `nodes=2` allocates 2 + 1 hosts; `deallocate_after_bench=false` keeps them.
    let clusters = c.clusters_info().expect("clusters_info");
    let mine: Vec<_> = clusters
        .iter()
        .filter(|cl| cl.bench_id == Some(id))
        .collect();
    assert_eq!(mine.len(), 1, "{clusters:?}");
    let cluster = mine[0];
    assert_eq!(cluster.n, Some(3));
    assert_eq!(cluster.state.as_deref(), Some("allocated"));
    assert_eq!(cluster.hosts, vec!["127.0.0.1"; 3]);
    assert_eq!(cluster.provider.as_deref(), Some("mzb_dummycloud_plugin"));
    assert!(cluster.timestamp.is_some_and(|t| t > 1_600_000_000));
}

#[test]
fn nodes_as_host_list_and_default_deallocation() {
    let server = fast_server();
    let mut c = client(&server.host());
    // A host list (spaces after commas are the user's, not the server's business).
    let listed = c
        .start(
            &hello(),
            &StartOptions {
                nodes: Some("root@h1, root@h2".into()),
                ..options()
            },
        )
        .expect("start with hosts");
    // One host is not enough: the benchmark fails at allocating_hosts.
    let single = c
        .start(
            &hello(),
            &StartOptions {
                nodes: Some("h1".into()),
                ..options()
            },
        )
        .expect("start with one host");
    // Default: one node from the cloud, deallocated at the end.
    let default = c.start(&hello(), &options()).expect("start");
    assert_eq!(wait_final(&mut c, listed).status_text, "complete");
    assert_eq!(wait_final(&mut c, single).status_text, "failed");
    assert_eq!(wait_final(&mut c, default).status_text, "complete");
    for id in [listed, single, default] {
        wait_process_gone(&server, id);
    }
    let clusters = c.clusters_info().expect("clusters_info");
    assert!(
        clusters.iter().all(|cl| cl.bench_id != Some(listed)
            && cl.bench_id != Some(single)
            && cl.bench_id != Some(default)),
        "preallocated hosts make no cluster and the default cluster is deallocated: {clusters:?}"
    );
}

#[test]
fn clusters_deallocate_and_remove() {
    let server = fast_server();
    let mut c = client(&server.host());
    assert_eq!(c.clusters_info().expect("clusters_info"), vec![]);
    let keep = StartOptions {
        deallocate_after_bench: Some(false),
        ..options()
    };
    let a = c.start(&hello(), &keep).expect("start a");
    let b = c.start(&hello(), &keep).expect("start b");
    wait_final(&mut c, a);
    wait_final(&mut c, b);
    let clusters = c.clusters_info().expect("clusters_info");
    assert_eq!(clusters.len(), 2, "{clusters:?}");
    let cluster_of = |bench: u64| {
        clusters
            .iter()
            .find(|cl| cl.bench_id == Some(bench))
            .unwrap_or_else(|| panic!("no cluster for {bench}: {clusters:?}"))
            .id
    };
    let (ca, cb) = (cluster_of(a), cluster_of(b));
    assert_ne!(ca, cb);

    c.deallocate_cluster(ca).expect("deallocate");
    let left: Vec<u64> = c
        .clusters_info()
        .expect("clusters_info")
        .iter()
        .map(|cl| cl.id)
        .collect();
    assert_eq!(left, [cb]);
    let reason = assert_server_error(
        c.deallocate_cluster(ca),
        404,
        ReasonCode::NotFound,
        "deallocating twice",
    );
    assert_eq!(reason, "Cluster not found");

    c.remove_cluster_info(cb).expect("remove_cluster_info");
    assert_eq!(c.clusters_info().expect("clusters_info"), vec![]);
    // The seed: an unknown cluster is `not_found` (the real server swallows the error
    // and answers `{}`: `benchlink sandbox --faithful`).
    assert_server_error(
        c.remove_cluster_info(cb),
        404,
        ReasonCode::NotFound,
        "remove_cluster_info again",
    );
    assert_server_error(
        c.remove_cluster_info(987_654),
        404,
        ReasonCode::NotFound,
        "remove unknown cluster",
    );
}

#[test]
fn status_progression_timestamps_and_wait() {
    // Slow stages so that the very first status is `init` and every stage can be seen.
    let server = server_with(|c| {
        c.speed = Speed {
            stage: Duration::from_millis(50),
            ..Speed::fast()
        }
    });
    let mut c = client(&server.host());
    let id = c.start(&hello(), &options()).expect("start");
    let first = c.status(id).expect("status");
    assert_eq!(first.status_text, "init", "{first:?}");
    assert!(first.create_time.is_some());
    assert_eq!(first.start_time, None, "not past wait_exclusive yet");
    assert_eq!(first.finish_time, None);
    assert_eq!(first.reason, None);

    let (c, seen, last) = within(PATIENCE, "BenchClient::wait", move || {
        let mut seen: Vec<StatusInfo> = Vec::new();
        let last = c
            .wait(id, Duration::from_millis(2), |s| seen.push(s.clone()))
            .expect("wait");
        (c, seen, last)
    });
    drop(c);
    assert_eq!(last.status_text, "complete");
    assert_eq!(
        seen.last(),
        Some(&last),
        "progress sees the final status too"
    );
    assert!(seen.len() >= 5, "polled every 2 ms: {seen:?}");

    // Statuses only move forward through the pipeline.
    let rank = |s: &StatusInfo| {
        STAGES
            .iter()
            .position(|st| *st == s.status_text)
            .unwrap_or(STAGES.len())
    };
    for pair in seen.windows(2) {
        assert!(rank(&pair[0]) <= rank(&pair[1]), "{pair:?}");
    }
    let distinct: BTreeSet<&str> = seen.iter().map(|s| s.status_text.as_str()).collect();
    for stage in ["checking_script", "allocating_hosts", "running", "complete"] {
        assert!(
            distinct.contains(stage),
            "{stage} never seen in {distinct:?}"
        );
    }
    // start_time appears once wait_exclusive is over; finish_time with the final status.
    for s in &seen {
        let past_wait = rank(s) > 2;
        assert_eq!(s.start_time.is_some(), past_wait, "{s:?}");
        assert_eq!(s.finish_time.is_some(), s.status().is_final(), "{s:?}");
        assert_eq!(s.create_time, first.create_time, "{s:?}");
    }
    let (create, start, finish) = (
        last.create_time.expect("create_time"),
        last.start_time.expect("start_time"),
        last.finish_time.expect("finish_time"),
    );
    assert!(create <= start && start <= finish, "{last:?}");
}

#[test]
fn results_shapes_after_completion() {
    let server = fast_server();
    let mut c = client(&server.host());
    let id = c.start(&hello(), &options()).expect("start");
    // Results are empty while the benchmark runs.
    let early = c.results(id).expect("results while running");
    if !c.status(id).expect("status").status().is_final() {
        assert!(early.0.is_empty(), "{early:?}");
    }
    assert_eq!(wait_final(&mut c, id).status_text, "complete");
    let results = c.results(id).expect("results");
    let print = results.get("print").expect("a print counter");
    assert_eq!(print.kind, "counter");
    let value = print
        .value
        .as_ref()
        .expect("a counter has a value")
        .to_string();
    assert!(
        value.parse::<f64>().is_ok_and(|v| v > 0.0),
        "print counted something: {value}"
    );
    assert!(!print.stats.is_empty(), "rps stats: {print:?}");
    for key in ["min", "max"] {
        assert!(print.stats.contains_key(key), "rps.{key} in {print:?}");
    }
    let dummy = results.get("dummy").expect("the dummy worker's histogram");
    assert_eq!(dummy.kind, "histogram");
    assert_eq!(dummy.value, None);
    let keys: BTreeSet<&str> = dummy.stats.keys().map(String::as_str).collect();
    assert_eq!(keys, BTreeSet::from(["min", "50", "90", "95", "max"]));
    // Serialized back in the server's shapes.
    let json = serde_json::to_value(&results).expect("serialize");
    assert_eq!(json["print"]["type"], "counter");
    assert!(json["print"]["rps"].is_object());
    assert!(json["print"]["value"].is_number());
    assert_eq!(json["dummy"]["type"], "histogram");
    assert!(json["dummy"]["percentiles"]["95"].is_number());
    // Stopping a complete benchmark is a no-op that still answers `stopped`.
    c.stop(id).expect("stop after the end");
    assert_eq!(c.status(id).expect("status").status_text, "complete");
    assert_eq!(c.results(id).expect("results"), results);
}

#[test]
fn stop_restart_change_env_run_command_while_running() {
    let server = live_server();
    let mut c = client(&server.host());
    let opts = StartOptions {
        env: vec![("keep".into(), "me".into())],
        tags: vec!["t1".into()],
        ..options()
    };
    let id = c.start(&hello(), &opts).expect("start");
    // Before `running`: run_command is `not_running` (400); change_env crashes the
    // real server's central process (500).
    let st = c.status(id).expect("status");
    if st.status_text != "running" && !st.status().is_final() {
        assert_server_error(
            c.run_command(id, 1, 100, "print(\"early\")"),
            400,
            ReasonCode::NotRunning,
            "run_command before running",
        );
    }
    wait_running(&mut c, id);

    c.change_env(id, &[("rate", "7"), ("new var", "a&b=c")])
        .expect("change_env");
    let env = server.benchmark(id).expect("bench").env;
    assert!(env.contains(&("rate".into(), "7".into())), "{env:?}");
    assert!(env.contains(&("new var".into(), "a&b=c".into())), "{env:?}");
    assert!(env.contains(&("keep".into(), "me".into())), "{env:?}");

    c.run_command(id, 1, 50, "print(\"from the test\")")
        .expect("run_command");
    assert_eq!(
        server.benchmark(id).expect("bench").commands,
        ["print(\"from the test\")"]
    );
    let reason = assert_server_error(
        c.run_command(id, 1, 100, ""),
        500,
        ReasonCode::InternalError,
        "empty command",
    );
    assert!(reason.contains("nonempty"), "{reason}");
    assert_server_error(
        c.run_command(id, 9, 100, "print(\"x\")"),
        500,
        ReasonCode::InternalError,
        "no pool 9",
    );

    c.stop(id).expect("stop");
    assert_eq!(c.status(id).expect("status").status_text, "stopped");
    // Stopping a finished benchmark is a no-op.
    c.stop(id).expect("stop again");
    assert_eq!(c.status(id).expect("status").status_text, "stopped");

    // Finished: change_env is 500 (`finished` is unmapped), run_command 400 badarg.
    assert_server_error(
        c.change_env(id, &[("rate", "1")]),
        500,
        ReasonCode::InternalError,
        "change_env after the end",
    );
    let reason = assert_server_error(
        c.run_command(id, 1, 100, "print(\"late\")"),
        400,
        ReasonCode::Badarg,
        "run_command after the end",
    );
    assert_eq!(reason, format!("Benchmark {id} is finished"));

    // Restart: a new id with the same script, includes, env and parameters.
    let clone = c.restart(id).expect("restart");
    assert_ne!(clone, id);
    let (old, new) = (
        server.benchmark(id).expect("old"),
        server.benchmark(clone).expect("clone"),
    );
    assert_eq!(new.parent, Some(i64::try_from(id).expect("id")));
    assert_eq!(new.script, old.script);
    assert_eq!(new.script_name, old.script_name);
    assert_eq!(new.includes, old.includes);
    assert_eq!(new.tags, ["t1"]);
    assert!(new.env.contains(&("keep".into(), "me".into())));
    assert!(new
        .env
        .contains(&("mzb_bench_id".into(), clone.to_string())));
    c.stop(clone).expect("stop the clone");
    assert_eq!(wait_final(&mut c, clone).status_text, "stopped");
}

#[test]
fn change_env_and_run_command_before_running() {
    // Long stages: the benchmark sits in early stages for a while.
    let quirky = server_with(|c| {
        c.speed = Speed {
            stage: Duration::from_millis(500),
            ..Speed::fast()
        }
    });
    let friendly = server_with(|c| {
        c.speed = Speed {
            stage: Duration::from_millis(500),
            ..Speed::fast()
        };
        c.quirks = Quirks {
            change_env_not_running_500: false,
            ..Quirks::default()
        };
    });
    for (server, code, status) in [
        (&quirky, ReasonCode::InternalError, 500),
        (&friendly, ReasonCode::NotRunning, 400),
    ] {
        let mut c = client(&server.host());
        let id = c.start(&hello(), &options()).expect("start");
        assert_server_error(
            c.change_env(id, &[("a", "b")]),
            status,
            code,
            "change_env in init",
        );
        assert_server_error(
            c.run_command(id, 1, 100, "print(\"x\")"),
            400,
            ReasonCode::NotRunning,
            "run_command in init",
        );
        c.stop(id).expect("stop");
    }
}

#[test]
fn run_command_percent_out_of_range_is_refused_locally() {
    let server = live_server();
    let mut c = client(&server.host());
    let id = c.start(&hello(), &options()).expect("start");
    wait_running(&mut c, id);
    for percent in [0, 101, 1000] {
        match c.run_command(id, 1, percent, "print(\"x\")") {
            Err(e) if matches!(e.kind(), ErrorKind::Reply(_)) => {
                assert!(e.to_string().contains("1..100"), "{e}")
            }
            other => panic!("percent {percent} should be refused before sending: {other:?}"),
        }
    }
    c.run_command(id, 1, 100, "print(\"x\")")
        .expect("100 % is fine");
    assert_eq!(server.benchmark(id).expect("bench").commands.len(), 1);
    c.stop(id).expect("stop");
}

#[test]
fn tags_add_and_remove() {
    let server = fast_server();
    let mut c = client(&server.host());
    let id = c
        .start(
            &hello(),
            &StartOptions {
                tags: vec!["a".into()],
                ..options()
            },
        )
        .expect("start");
    c.add_tags(id, &["b", "c"]).expect("add_tags");
    assert_eq!(server.benchmark(id).expect("bench").tags, ["a", "b", "c"]);
    // Tags it already has are skipped.
    c.add_tags(id, &["a", "d"]).expect("add_tags");
    assert_eq!(
        server.benchmark(id).expect("bench").tags,
        ["a", "b", "c", "d"]
    );
    c.remove_tags(id, &["b", "d", "zzz"]).expect("remove_tags");
    assert_eq!(server.benchmark(id).expect("bench").tags, ["a", "c"]);
    // Also on a finished benchmark.
    wait_final(&mut c, id);
    c.add_tags(id, &["favorites"])
        .expect("add_tags after the end");
    assert_eq!(
        server.benchmark(id).expect("bench").tags,
        ["a", "c", "favorites"]
    );
    // No tags at all: the server's `nonempty` check crashes (500).
    assert_server_error(
        c.add_tags(id, &[]),
        500,
        ReasonCode::InternalError,
        "add_tags without tags",
    );
}

#[test]
fn email_report_only_after_the_end() {
    let server = live_server();
    let mut c = client(&server.host());
    let id = c.start(&hello(), &options()).expect("start");
    let reason = assert_server_error(
        c.email_report(id, &["a@example.com"]),
        400,
        ReasonCode::Badarg,
        "email_report while running",
    );
    assert_eq!(reason, "Benchmark in not ended yet");
    assert!(server.email_reports().is_empty());
    c.stop(id).expect("stop");
    c.email_report(id, &["a@example.com", "b@example.com,c@example.com"])
        .expect("email_report");
    assert_eq!(
        server.email_reports(),
        [EmailReport {
            bench_id: id,
            // The client repeats `addr`; a comma-separated value is a list too, as the
            // seed says (the real server keeps it whole: `benchlink sandbox --faithful`).
            addresses: vec![
                "a@example.com".into(),
                "b@example.com".into(),
                "c@example.com".into(),
            ],
            on_request: true,
        }]
    );
}

#[test]
fn typecheck_ok_and_error_then_the_connection_is_reused_safely() {
    let server = fast_server();
    let mut c = client(&server.host());
    c.typecheck(&hello()).expect("hello.bdl typechecks");
    // The real server closes the connection after every /typecheck; the next call
    // must not trip over it.
    c.clusters_info().expect("a call after typecheck");
    let reason = assert_server_error(
        c.typecheck(&scenario("broken.bdl")),
        400,
        ReasonCode::Error,
        "typecheck of broken.bdl",
    );
    assert!(!reason.is_empty());
    c.typecheck(&Scenario::new(
        "inline.bdl",
        "#!benchDL\npool(size = 1, worker_type = dummy_worker):\n    print(\"x\")\n",
    ))
    .expect("inline scenario typechecks");
    let unbalanced = Scenario::new("bad.bdl", "#!benchDL\npool(size = 1,\n");
    assert_server_error(
        c.typecheck(&unbalanced),
        400,
        ReasonCode::Error,
        "unbalanced brackets",
    );
    c.status(0).expect_err("no benchmark 0 yet");
}

#[test]
fn broken_scenario_starts_then_fails() {
    let server = fast_server();
    let mut c = client(&server.host());
    let id = c.start(&scenario("broken.bdl"), &options()).expect("start");
    let status = wait_final(&mut c, id);
    assert_eq!(status.status_text, "failed");
    assert!(status.finish_time.is_some());
    // Crash hook: the status loses its times and says why.
    let other = c.start(&hello(), &options()).expect("start");
    assert!(
        server.crash_benchmark(other),
        "benchmark {other} already over?"
    );
    let crashed = c.status(other).expect("status");
    assert_eq!(crashed.status_text, "failed");
    assert_eq!(crashed.reason.as_deref(), Some("crashed"));
    assert_eq!(crashed.create_time, None);
}

#[test]
fn server_logs_dropped_midway_does_not_hang_the_client() {
    let server = fast_server();
    let host = server.host();
    let (lines, status) = within(PATIENCE, "server_logs then status", move || {
        let mut c = client(&host);
        let mut activity = client(&host);
        let lines: Vec<String> = {
            let stream = c.server_logs(None).expect("server_logs");
            // Something to log: a benchmark started by another client.
            let id = activity.start(&hello(), &options()).expect("start");
            let lines = stream
                .take(3)
                .collect::<Result<Vec<_>, _>>()
                .expect("lines");
            activity.stop(id).expect("stop");
            lines
        };
        // The stream was dropped before its end: the same client goes on.
        let status = c.status(0).expect("status after dropping server_logs");
        (lines, status)
    });
    assert_eq!(lines.len(), 3);
    assert!(
        lines
            .iter()
            .all(|l| l.contains("[info]") || l.contains("[error]")),
        "{lines:?}"
    );
    assert!(lines[0].contains("Starting benchmark #0"), "{lines:?}");
    assert!(!status.status_text.is_empty());

    // A bad severity is the server's typed error.
    let mut c = client(&server.host());
    assert_server_error(
        c.server_logs(Some("loud")).map(|_| ()),
        400,
        ReasonCode::Badarg,
        "server_logs with a bad severity",
    );
}

#[test]
fn unknown_id_is_not_found_everywhere() {
    let server = fast_server();
    let mut c = client(&server.host());
    let id = 4242;
    let not_found =
        |c: &mut BenchClient, what: &str, call: &dyn Fn(&mut BenchClient) -> Result<(), Error>| {
            let reason = assert_server_error(call(c), 404, ReasonCode::NotFound, what);
            assert_eq!(reason, format!("Benchmark {id} is not found"), "{what}");
        };
    not_found(&mut c, "status", &|c| c.status(id).map(drop));
    not_found(&mut c, "stop", &|c| c.stop(id));
    not_found(&mut c, "restart", &|c| c.restart(id).map(drop));
    not_found(&mut c, "change_env", &|c| c.change_env(id, &[("a", "b")]));
    not_found(&mut c, "run_command", &|c| {
        c.run_command(id, 1, 100, "print(\"x\")")
    });
    not_found(&mut c, "results", &|c| c.results(id).map(drop));
    not_found(&mut c, "email_report", &|c| {
        c.email_report(id, &["a@example.com"])
    });
    not_found(&mut c, "add_tags", &|c| c.add_tags(id, &["x"]));
    not_found(&mut c, "remove_tags", &|c| c.remove_tags(id, &["x"]));
    not_found(&mut c, "log", &|c| c.log(id).map(drop));
    not_found(&mut c, "userlog", &|c| c.userlog(id).map(drop));
    not_found(&mut c, "data", &|c| c.data(id).map(drop));
    // Cluster ids: their own message.
    let reason = assert_server_error(
        c.deallocate_cluster(id),
        404,
        ReasonCode::NotFound,
        "deallocate_cluster",
    );
    assert_eq!(reason, "Cluster not found");
    // After all those errors the connection still works.
    assert_eq!(c.clusters_info().expect("clusters_info"), vec![]);
    // The error's Display says what the server said, naming the server and the request.
    let e = c.status(id).expect_err("404");
    assert_eq!(
        e.to_string(),
        format!(
            "{} answered GET /status?id={id}&wait=false with 404 not_found: Benchmark {id} is not found",
            server.host()
        )
    );
    assert_eq!(e.server(), Some(server.host().as_str()));
}

#[test]
fn token_protected_server() {
    let server = server_with(|c| {
        c.users = Some(vec![benchlink_sandbox::bench::User::new(
            "user",
            "right-token",
        )])
    });
    let host = server.host();
    let mut anonymous = client(&host);
    let mut wrong = client(&host).with_token("wrong-token");
    let mut right = client(&host).with_token("right-token");
    for (c, who) in [(&mut anonymous, "no token"), (&mut wrong, "wrong token")] {
        assert_server_error(
            c.start(&hello(), &options()),
            403,
            ReasonCode::Forbidden,
            who,
        );
        assert_server_error(c.status(0), 403, ReasonCode::Forbidden, who);
        assert_server_error(c.clusters_info(), 403, ReasonCode::Forbidden, who);
        assert_server_error(c.log(0).map(drop), 403, ReasonCode::Forbidden, who);
        assert_server_error(c.typecheck(&hello()), 403, ReasonCode::Forbidden, who);
    }
    assert!(server.benchmark(0).is_none(), "nothing was started");
    let id = right
        .start(&hello(), &options())
        .expect("start with the token");
    assert_eq!(wait_final(&mut right, id).status_text, "complete");
    assert!(right.results(id).expect("results").get("print").is_some());
    let lines = within(PATIENCE, "log with a token", move || {
        right
            .log(id)
            .expect("log")
            .collect::<Result<Vec<_>, _>>()
            .expect("log lines")
    });
    assert!(!lines.is_empty());
    // The token never shows in Debug output.
    let debug = format!("{:?}", client(&host).with_token("right-token"));
    assert!(!debug.contains("right-token"), "{debug}");
}

/// A server that refuses a request before its body is in (413 for a scenario over its
/// limit) and closes: the client reads and reports that reply, as curl does, instead of
/// the broken pipe its unsent body met.
#[test]
fn an_early_reply_to_a_request_too_large_is_read_not_lost() {
    let server = server_with(|c| c.max_body = 64 << 10);
    let mut c = client(&server.host());
    let big = Scenario::new("big.bdl", vec![b'#'; 24 << 20]);
    match c.start(&big, &options()) {
        Err(e) => assert_eq!(e.http_status(), Some(413), "{e}"),
        Ok(id) => panic!("a 24 MiB scenario was accepted as {id}"),
    }
    // The client goes on with a new connection.
    c.status(1).expect_err("no benchmark 1");
}

#[test]
fn a_start_whose_query_outgrows_the_first_head_buffer_goes_out_whole() {
    // 600 variables: a query of about 30 KiB, beyond the 16 KiB the client's request
    // head buffer starts with (it grows before anything is sent).
    let server = fast_server();
    let mut c = client(&server.host());
    let env: Vec<(String, String)> = (0..600)
        .map(|i| (format!("var_{i:04}"), format!("value number {i:04} & more")))
        .collect();
    let opts = StartOptions {
        env: env.clone(),
        ..options()
    };
    let id = c.start(&hello(), &opts).expect("start");
    let info = server
        .benchmark(id)
        .expect("the server knows the new benchmark");
    for pair in [&env[0], &env[599]] {
        assert!(info.env.contains(pair), "env {pair:?} missing");
    }
    assert_eq!(wait_final(&mut c, id).status_text, "complete");
    // The connection goes on carrying requests.
    c.status(id).expect("status after the large start");
}

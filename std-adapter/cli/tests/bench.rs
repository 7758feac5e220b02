//! The `benchlink` binary as a user runs it: `benchlink bench …` against a local server
//! started by the test (and, without `--host`, against a probed or the in-process one),
//! checking stdout, stderr and the exit codes of the official CLI (0 ok, 1 error,
//! 2 missing script, 3 failed benchmark under `run` or `status --wait`, 4 invalid value,
//! 130 interrupted).

use std::io::Read;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use benchlink_sandbox::bench::{Fault, Speed};
use benchlink_std::bench::StartOptions;
use benchlink_tests::{
    client, fast_server, hello, live_server, live_speed, repo_root, server_with, wait_final,
    wait_process_gone, wait_running, TlsProxy,
};

/// The `benchlink` binary cargo built for these tests.
fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_benchlink")
}

/// How long one run of the binary may take.
const CLI_PATIENCE: Duration = Duration::from_secs(30);

/// What one run printed and how it exited.
#[derive(Debug)]
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }

    #[track_caller]
    fn expect_code(self, code: i32) -> Out {
        assert_eq!(self.code, code, "exit code of {self:#?}");
        self
    }
}

/// A `host:port` on 127.0.0.1 where nothing listens (bound, then released).
fn closed_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("local address");
    drop(listener);
    addr.to_string()
}

/// Runs the binary in the repository root with a clean environment (no host, no token,
/// no token file, no server probed on localhost:4800 whatever runs there), `adjust`ed;
/// kills it and fails after [`CLI_PATIENCE`].
fn benchlink_with(args: &[&str], adjust: impl FnOnce(&mut Command)) -> Out {
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .current_dir(repo_root())
        .env_remove("MZBENCH_API_HOST")
        .env_remove("BENCHLINK_TOKEN")
        .env("BENCHLINK_BENCH_PROBE", closed_port())
        .env("MZBENCHTOKEN", repo_root().join("no-such-token-file"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    adjust(&mut cmd);
    let mut child = cmd.spawn().expect("spawning benchlink");
    let pipe = |r: Option<Box<dyn Read + Send>>| {
        let mut r = r.expect("piped");
        thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let stdout = pipe(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let stderr = pipe(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + CLI_PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for benchlink") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("benchlink {args:?} still running after {CLI_PATIENCE:?}");
        }
        thread::sleep(Duration::from_millis(20));
    };
    Out {
        code: status.code().unwrap_or(-1),
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

/// `benchlink bench --host <host> <args…>`.
fn bench(host: &str, args: &[&str]) -> Out {
    let mut all = vec!["bench", "--host", host];
    all.extend_from_slice(args);
    benchlink_with(&all, |_| {})
}

#[test]
fn run_hello_completes() {
    let server = fast_server();
    let out = bench(&server.host(), &["run", "examples/scenarios/hello.bdl"]).expect_code(0);
    let status = out.json();
    assert_eq!(status["status"], "complete", "{out:?}");
    for time in ["create_time", "start_time", "finish_time"] {
        assert!(
            status[time].as_str().is_some_and(|t| t.ends_with('Z')),
            "{time} in {status}"
        );
    }
    assert!(
        out.stderr
            .contains(&format!("started benchmark 0 on http://{}", server.host())),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("status: "), "progress: {}", out.stderr);
    let info = server.benchmark(0).expect("benchmark 0");
    assert_eq!(info.includes.len(), 1, "data.txt uploaded");
}

#[test]
fn run_of_a_failing_benchmark_exits_3() {
    let server = fast_server();
    let host = server.host();
    let h = host.clone();
    let crash = thread::spawn(move || {
        bench(
            &h,
            &[
                "run",
                "--env",
                "emulate_bench_crash=true",
                "examples/scenarios/hello.bdl",
            ],
        )
    });
    let broken = bench(&host, &["run", "examples/scenarios/broken.bdl"]).expect_code(3);
    assert_eq!(broken.json()["status"], "failed");
    let crash = crash.join().expect("crash run").expect_code(3);
    assert_eq!(crash.json()["status"], "failed");
    // `status --wait` of a failed benchmark exits 3 too; without --wait it is 0.
    bench(&host, &["status", "--wait", "0"]).expect_code(3);
    let plain = bench(&host, &["status", "0"]).expect_code(0);
    assert_eq!(plain.json()["status"], "failed");
}

#[test]
fn errors_exit_1_with_the_servers_reason() {
    let server = fast_server();
    let host = server.host();
    let out = bench(&host, &["status", "999"]).expect_code(1);
    assert!(
        out.stderr.contains("Benchmark 999 is not found"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{out:?}");
    let out = bench(&host, &["log", "999"]).expect_code(1);
    assert!(out.stderr.contains("not_found"), "{}", out.stderr);
    let out = bench(&host, &["typecheck", "examples/scenarios/broken.bdl"]).expect_code(1);
    assert!(out.stderr.contains("error"), "{}", out.stderr);
    let out = bench(&host, &["deallocate-cluster", "5"]).expect_code(1);
    assert!(out.stderr.contains("Cluster not found"), "{}", out.stderr);
    let out = bench(&host, &["server-logs", "--severity", "loud"]).expect_code(1);
    assert!(out.stderr.contains("Invalid severity"), "{}", out.stderr);
    // Nobody listening.
    let unused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").to_string()
    };
    let out = bench(&unused, &["status", "0"]).expect_code(1);
    assert!(
        out.stderr
            .contains(&format!("could not connect to {unused}")),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("GET /status?id=0"), "{}", out.stderr);
}

#[test]
fn missing_script_exits_2() {
    let server = fast_server();
    let out = bench(&server.host(), &["start", "examples/scenarios/nope.bdl"]).expect_code(2);
    assert!(out.stderr.contains("nope.bdl"), "{}", out.stderr);
    // A missing include is a missing script too.
    let dir = std::env::temp_dir().join(format!("benchlink-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let script = dir.join("needs.bdl");
    std::fs::write(
        &script,
        "#!benchDL\ninclude_resource(r, \"absent.txt\", text)\npool(size = 1, worker_type = dummy_worker):\n    print(resource(r))\n",
    )
    .expect("write scenario");
    let out = bench(
        &server.host(),
        &["start", script.to_str().expect("utf-8 path")],
    )
    .expect_code(2);
    assert!(out.stderr.contains("absent.txt"), "{}", out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(server.benchmark(0).is_none(), "nothing was started");
}

#[test]
fn invalid_values_exit_4() {
    let server = live_server();
    let host = server.host();
    let mut c = client(&host);
    let id = c
        .start(&hello(), &StartOptions::default())
        .expect("start")
        .to_string();
    let out = bench(&host, &["change-env", &id]).expect_code(4);
    assert!(out.stderr.contains("K=V"), "{}", out.stderr);
    // The official CLI: `invalid value for --percent: 200`, exit 4.
    let out = bench(
        &host,
        &["run-command", "--percent", "200", &id, "print(\"x\")"],
    );
    assert_eq!(out.code, 4, "--percent 200: {out:#?}");
    let out = bench(&host, &["run-command", "--pool", "0", &id, "print(\"x\")"]);
    assert_eq!(out.code, 4, "--pool 0: {out:#?}");
    let out = bench(
        &host,
        &[
            "start",
            "--deallocate_after_bench=maybe",
            "examples/scenarios/hello.bdl",
        ],
    );
    assert_eq!(out.code, 4, "--deallocate_after_bench=maybe: {out:#?}");
    assert!(server.benchmark(1).is_none(), "nothing else was started");
    c.stop(id.parse().expect("id")).expect("stop");
}

#[test]
fn start_passes_every_option() {
    let server = fast_server();
    let out = bench(
        &server.host(),
        &[
            "start",
            "--name",
            "named by cli",
            "--tags",
            "a,b c",
            "--env",
            "greeting=hi=there",
            "--env",
            "rate=2",
            "--email",
            "x@example.com",
            "--nodes",
            "2",
            "--deallocate_after_bench",
            "false",
            "--provision-nodes",
            "false",
            "--exclusive",
            "lab",
            "--node_commit",
            "abc",
            "--cloud",
            "local",
            "--node_git",
            "https://example.org/mzbench.git",
            "--vm-args",
            "+K true",
            "--metric_update_interval_ms=2000",
            "examples/scenarios/hello.bdl",
        ],
    )
    .expect_code(0);
    let reply = out.json();
    assert_eq!(reply["status"], "pending");
    let id = reply["id"].as_u64().expect("an id");
    let info = server.benchmark(id).expect("started");
    assert_eq!(info.name, "named by cli");
    assert_eq!(info.tags, ["a", "b", "c"]);
    assert!(info.env.contains(&("greeting".into(), "hi=there".into())));
    for param in ["node_git", "vm_args", "metric_update_interval_ms"] {
        assert!(
            info.env.iter().all(|(k, _)| k != param),
            "{param} is taken as a parameter: {:?}",
            info.env
        );
    }
    assert!(info.env.contains(&("rate".into(), "2".into())));
    assert_eq!(info.emails, ["x@example.com"]);
    assert_eq!(info.exclusive, ["lab"]);
    assert_eq!(info.includes.len(), 1);
    let mut c = client(&server.host());
    assert_eq!(wait_final(&mut c, id).status_text, "complete");
    wait_process_gone(&server, id);

    // The cluster it kept, through the CLI.
    let clusters = bench(&server.host(), &["clusters-info"])
        .expect_code(0)
        .json();
    let list = clusters.as_array().expect("a JSON array");
    assert_eq!(list.len(), 1, "{clusters}");
    assert_eq!(list[0]["bench_id"], id);
    assert_eq!(list[0]["n"], 3);
    assert_eq!(list[0]["state"], "allocated");
    let cluster = list[0]["id"].as_u64().expect("cluster id").to_string();
    let out = bench(&server.host(), &["clusters_info"]).expect_code(0);
    assert_eq!(out.json(), clusters, "underscore alias");
    bench(&server.host(), &["deallocate_cluster", &cluster]).expect_code(0);
    let after = bench(&server.host(), &["clusters-info"])
        .expect_code(0)
        .json();
    assert_eq!(after, serde_json::json!([]));
    // Its record went with it: the seed's answer for an unknown cluster is `not_found`.
    let out = bench(&server.host(), &["remove_cluster_info", &cluster]).expect_code(1);
    assert!(out.stderr.contains("404 not_found"), "{}", out.stderr);
}

#[test]
fn data_log_results_of_a_finished_benchmark() {
    let server = fast_server();
    let host = server.host();
    let mut c = client(&host);
    let id = c.start(&hello(), &StartOptions::default()).expect("start");
    wait_final(&mut c, id);
    wait_process_gone(&server, id);
    let id_s = id.to_string();

    // csv: name,timestamp,value
    let csv = bench(&host, &["data", "--format", "csv", &id_s]).expect_code(0);
    let rows: Vec<Vec<&str>> = csv.stdout.lines().map(|l| l.split(',').collect()).collect();
    assert!(rows.len() > 10, "{}", csv.stdout);
    for row in &rows {
        assert_eq!(row.len(), 3, "{row:?}");
        assert!(row[1].parse::<u64>().is_ok(), "timestamp in {row:?}");
        assert!(row[2].parse::<f64>().is_ok(), "value in {row:?}");
    }
    assert!(rows.iter().any(|r| r[0] == "print"));
    assert!(rows.iter().any(|r| r[0] == "print.rps"));
    // tsv: the server's own line format.
    let tsv = bench(&host, &["data", "--format", "tsv", &id_s]).expect_code(0);
    assert_eq!(tsv.stdout.lines().count(), rows.len());
    assert!(tsv
        .stdout
        .lines()
        .all(|l| l.split('\t').count() == 3 && l.split('\t').nth(1).is_some()));
    // json (default), filtered to one target.
    let json = bench(&host, &["data", "--target", "print", &id_s])
        .expect_code(0)
        .json();
    let series = json.as_array().expect("array");
    assert_eq!(series.len(), 1, "{json}");
    assert_eq!(series[0]["target"], "print");
    let points = series[0]["datapoints"].as_array().expect("datapoints");
    assert_eq!(
        points.len(),
        rows.iter().filter(|r| r[0] == "print").count()
    );
    assert!(points
        .iter()
        .all(|p| p[0].is_number() && p[1].as_u64().is_some()));

    // log: framed by the official CLI's lines, the server's lines in between.
    let log = bench(&host, &["log", &id_s]).expect_code(0);
    let lines: Vec<&str> = log.stdout.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some(format!("Start of log for bench {id}").as_str())
    );
    assert_eq!(
        lines.last().copied(),
        Some(format!("End of log for bench {id}").as_str())
    );
    let direct = c
        .log(id)
        .expect("log")
        .collect::<Result<Vec<_>, _>>()
        .expect("lines");
    assert_eq!(lines[1..lines.len() - 1], direct[..]);
    let userlog = bench(&host, &["userlog", &id_s]).expect_code(0);
    assert!(userlog
        .stdout
        .starts_with(&format!("Start of user log for bench {id}\n")));
    assert!(userlog
        .stdout
        .ends_with(&format!("End of user log for bench {id}\n")));
    assert!(userlog.stdout.contains("Dummy print:"));

    // results: the server's metric shapes.
    let results = bench(&host, &["results", &id_s]).expect_code(0).json();
    assert_eq!(results["print"]["type"], "counter", "{results}");
    assert!(results["print"]["value"].is_number());
    assert!(results["print"]["rps"]["max"].is_number());
    assert_eq!(results["dummy"]["type"], "histogram");
    assert!(results["dummy"]["percentiles"]["95"].is_number());
    let waited = bench(&host, &["results", "--wait", &id_s])
        .expect_code(0)
        .json();
    assert_eq!(waited, results);

    // email-report, restart, stop (a no-op on a finished one), typecheck.
    bench(&host, &["email-report", &id_s, "a@example.com"]).expect_code(0);
    assert_eq!(server.email_reports().len(), 1);
    let restarted = bench(&host, &["restart", &id_s]).expect_code(0).json();
    let clone = restarted["id"].as_u64().expect("new id");
    assert_ne!(clone, id);
    assert_eq!(restarted["status"], "pending");
    let stopped = bench(&host, &["stop", &clone.to_string()]).expect_code(0);
    assert_eq!(stopped.json(), serde_json::json!({ "status": "stopped" }));
    let tc = bench(&host, &["typecheck", "examples/scenarios/hello.bdl"]).expect_code(0);
    assert_eq!(tc.json(), serde_json::json!({ "result": "ok" }));
}

#[test]
fn commands_on_a_running_benchmark_with_underscore_aliases() {
    // Ten seconds of running: time enough for a dozen runs of the binary; stopped below.
    let server = server_with(|c| {
        c.speed = Speed {
            scenario_second: Duration::from_secs(1),
            max_running: Duration::from_secs(30),
            ..live_speed()
        }
    });
    let host = server.host();
    let mut c = client(&host);
    let id = c.start(&hello(), &StartOptions::default()).expect("start");
    wait_running(&mut c, id);
    let id_s = id.to_string();
    let out = bench(&host, &["change_env", &id_s, "rate=3", "mode=fast"]).expect_code(0);
    assert_eq!(out.json(), serde_json::json!({ "status": "set" }));
    let out = bench(&host, &["change-env", "--env", "extra=1", &id_s]).expect_code(0);
    assert_eq!(out.json()["status"], "set");
    let env = server.benchmark(id).expect("bench").env;
    for pair in [("rate", "3"), ("mode", "fast"), ("extra", "1")] {
        assert!(
            env.contains(&(pair.0.into(), pair.1.into())),
            "{pair:?} in {env:?}"
        );
    }
    bench(&host, &["add_tags", &id_s, "x,y"]).expect_code(0);
    bench(&host, &["add-tags", &id_s, "z"]).expect_code(0);
    bench(&host, &["remove_tags", &id_s, "y"]).expect_code(0);
    assert_eq!(server.benchmark(id).expect("bench").tags, ["x", "z"]);
    let out = bench(
        &host,
        &[
            "run_command",
            "--pool",
            "1",
            "--percent",
            "50",
            &id_s,
            "print(\"cli\")",
        ],
    )
    .expect_code(0);
    assert_eq!(out.json(), serde_json::json!({ "status": "ok" }));
    assert_eq!(
        server.benchmark(id).expect("bench").commands,
        ["print(\"cli\")"]
    );
    // email-report while running: the server's 400.
    let out = bench(&host, &["email_report", &id_s, "a@example.com"]).expect_code(1);
    assert!(out.stderr.contains("not ended"), "{}", out.stderr);
    bench(&host, &["stop", &id_s]).expect_code(0);
    assert_eq!(c.status(id).expect("status").status_text, "stopped");
}

#[test]
fn tokens_and_https() {
    let server = server_with(|c| {
        c.users = Some(vec![benchlink_sandbox::bench::User::new(
            "user",
            "cli-token",
        )])
    });
    let host = server.host();
    let out = bench(&host, &["clusters-info"]).expect_code(1);
    assert!(out.stderr.contains("forbidden"), "{}", out.stderr);
    assert!(out.stderr.contains("--token"), "a hint: {}", out.stderr);
    assert!(out.stderr.contains("token file"), "a hint: {}", out.stderr);
    let out = benchlink_with(&["bench", "--host", &host, "clusters-info"], |c| {
        c.env("BENCHLINK_TOKEN", "cli-token");
    })
    .expect_code(0);
    assert_eq!(out.json(), serde_json::json!([]));
    // The official token file, for this host.
    let file = std::env::temp_dir().join(format!("benchlink-cli-token-{}", std::process::id()));
    std::fs::write(&file, format!("other:1 nope\n{host} cli-token\n")).expect("token file");
    let out = benchlink_with(&["bench", "--host", &host, "clusters-info"], |c| {
        c.env("MZBENCHTOKEN", &file);
    });
    let _ = std::fs::remove_file(&file);
    out.expect_code(0);

    // https through a TLS proxy: refused without the CA, fine with --cacert or
    // --no-cert-check.
    let proxy = TlsProxy::start(server.addr());
    let url = format!("https://localhost:{}", proxy.port());
    let out = bench(&url, &["--token", "cli-token", "clusters-info"]).expect_code(1);
    assert!(out.stderr.contains("certificate"), "{}", out.stderr);
    let pem = std::env::temp_dir().join(format!("benchlink-cli-ca-{}.pem", std::process::id()));
    std::fs::write(&pem, proxy.cert_pem()).expect("pem");
    let out = bench(
        &url,
        &[
            "--token",
            "cli-token",
            "--cacert",
            pem.to_str().expect("utf-8"),
            "clusters-info",
        ],
    );
    let _ = std::fs::remove_file(&pem);
    assert_eq!(out.expect_code(0).json(), serde_json::json!([]));
    bench(
        &url,
        &["--token", "cli-token", "--no-cert-check", "clusters-info"],
    )
    .expect_code(0);
    bench(
        &url,
        &["--token", "cli-token", "--no_cert_check", "clusters-info"],
    )
    .expect_code(0);
}

/// The slowest test (demo timings, a few seconds): its name sorts first so that it starts
/// first and runs alongside the others.
#[test]
fn a_run_without_host_uses_the_in_process_server() {
    let out =
        benchlink_with(&["bench", "run", "examples/scenarios/hello.bdl"], |_| {}).expect_code(0);
    assert!(
        out.stderr.contains("local benchmark server")
            && out.stderr.contains("nothing answers at")
            && out.stderr.contains("end with this command"),
        "{}",
        out.stderr
    );
    assert_eq!(out.json()["status"], "complete", "{out:?}");
}

/// A server that never answers, and one that answers a byte a second: `--timeout`
/// bounds the whole request, and the message says which server did not answer.
#[test]
fn a_silent_or_dripping_server_times_out() {
    let runs: Vec<_> = [Fault::Silent, Fault::Drip(Duration::from_secs(1))]
        .into_iter()
        .map(|fault| {
            thread::spawn(move || {
                let server = server_with(|c| c.fault = Some(fault));
                let started = Instant::now();
                let out = bench(
                    &server.host(),
                    &["--retries", "0", "--timeout", "3", "status", "1"],
                );
                (fault, server.host(), out, started.elapsed())
            })
        })
        .collect();
    for run in runs {
        let (fault, host, out, took) = run.join().expect("run");
        let out = out.expect_code(1);
        assert!(out.stdout.is_empty(), "{fault:?}: {out:?}");
        assert!(
            out.stderr
                .contains(&format!("reply from {host} within 3 s")),
            "{fault:?}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains("GET /status?id=1"),
            "{fault:?}: {}",
            out.stderr
        );
        // Ends by the deadline, not by the server: the message says so, and a command
        // that waited for the drip (a byte a second: the response takes minutes) would
        // meet the kill guard of `bench` ([`CLI_PATIENCE`]). Not before the deadline.
        assert!(took >= Duration::from_secs(3), "{fault:?} took {took:?}");
    }
}

/// `--timeout` is the idle limit of a stream: a quiet `server-logs` ends with a message.
#[test]
fn a_quiet_stream_ends_after_the_timeout() {
    let server = fast_server();
    let host = server.host();
    let out = bench(
        &host,
        &[
            "--retries",
            "0",
            "--timeout",
            "0.5",
            "server-logs",
            "--severity",
            "error",
        ],
    )
    .expect_code(1);
    assert!(
        out.stderr
            .contains(&format!("no data from {host} for 500 ms")),
        "{}",
        out.stderr
    );
}

/// `benchlink bench data … | head`: a closed stdout ends the command at once, quietly.
#[test]
fn a_closed_stdout_ends_data_quietly() {
    let server = server_with(|c| c.data_flood = 300_000);
    let host = server.host();
    let mut c = client(&host);
    let id = c.start(&hello(), &StartOptions::default()).expect("start");
    wait_final(&mut c, id);
    wait_process_gone(&server, id);
    let mut child = Command::new(bin())
        .args([
            "bench",
            "--host",
            &host,
            "data",
            "--format",
            "csv",
            &id.to_string(),
        ])
        .env("MZBENCHTOKEN", repo_root().join("no-such-token-file"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning benchlink");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut first = [0u8; 4096];
    stdout.read_exact(&mut first).expect("some rows");
    assert!(first.starts_with(b"flood.0.count,1700000000,0\n"));
    drop(stdout);
    let deadline = Instant::now() + CLI_PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("benchlink data kept running after its stdout was closed");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    let _ = child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr);
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "quietly: {stderr}");
}

/// The csv and tsv paths keep every line of a large, fast stream, in order.
#[test]
fn data_of_a_large_stream_keeps_every_line() {
    let server = server_with(|c| c.data_flood = 50_000);
    let host = server.host();
    let mut c = client(&host);
    let id = c.start(&hello(), &StartOptions::default()).expect("start");
    wait_final(&mut c, id);
    wait_process_gone(&server, id);
    let id_s = id.to_string();
    let csv = bench(&host, &["data", "--format", "csv", &id_s]).expect_code(0);
    let tsv = bench(&host, &["data", "--format", "tsv", &id_s]).expect_code(0);
    let flood: Vec<&str> = csv.stdout.lines().take(50_000).collect();
    assert_eq!(flood.len(), 50_000);
    for (i, row) in flood.iter().enumerate() {
        let value = if i % 4 == 3 {
            format!("{}.5", i % 1000)
        } else {
            (i % 1_000_000).to_string()
        };
        assert_eq!(
            *row,
            format!("flood.{}.count,{},{value}", i % 16, 1_700_000_000 + i / 16)
        );
    }
    assert_eq!(csv.stdout.lines().count(), tsv.stdout.lines().count());
    let json = bench(&host, &["data", "--target", "flood.3.count", &id_s])
        .expect_code(0)
        .json();
    let points = json[0]["datapoints"].as_array().expect("datapoints");
    assert_eq!(points.len(), 50_000 / 16);
    assert_eq!(points[1], serde_json::json!([19.5, 1_700_000_001u64]));
}

/// A scripted server on 127.0.0.1: `/status` answers `status_body`; every other request
/// is handed to `respond` with its head, which writes the reply. Connections live until
/// `respond` returns `Break` or the client goes away.
fn scripted_server(
    status_body: &'static str,
    respond: fn(&str, &mut std::net::TcpStream) -> std::ops::ControlFlow<()>,
) -> String {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let host = listener.local_addr().expect("addr").to_string();
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { break };
            thread::spawn(move || {
                let mut buf = Vec::new();
                let mut byte = [0u8; 1];
                loop {
                    buf.clear();
                    while !buf.ends_with(b"\r\n\r\n") {
                        match conn.read(&mut byte) {
                            Ok(1) => buf.push(byte[0]),
                            _ => return,
                        }
                    }
                    let head = String::from_utf8_lossy(&buf).into_owned();
                    if head.starts_with("GET /status") {
                        let _ = write!(
                            conn,
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\ncontent-type: application/json\r\n\r\n{status_body}",
                            status_body.len()
                        );
                        continue;
                    }
                    if respond(&head, &mut conn).is_break() {
                        return;
                    }
                }
            });
        }
    });
    host
}

/// A scripted server: `/status` says complete; `/data?id=1` has a malformed line after
/// three good ones, `/data?id=2` is cut off after three lines.
fn scripted_data_server() -> String {
    scripted_server(
        r#"{"create_time":"2015-11-03T13:39:20Z","finish_time":"2015-11-03T13:41:27Z","start_time":"2015-11-03T13:39:21Z","status":"complete"}"#,
        |head, conn| {
            use std::io::Write;
            let mut reply = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
            let mut lines = vec![
                "1439245024\tprint\t3\n",
                "1439245034\tprint\t30\n",
                "1439245034\tprint.rps\t2.9975917348002614\n",
            ];
            let cut = head.starts_with("GET /data?id=2");
            if !cut {
                lines.extend(["oops\n", "1439245044\tprint\t60\n"]);
            }
            for line in lines {
                reply.extend_from_slice(format!("{:x}\r\n{line}\r\n", line.len()).as_bytes());
            }
            if !cut {
                reply.extend_from_slice(b"0\r\n\r\n");
            }
            let _ = conn.write_all(&reply);
            std::ops::ControlFlow::Break(()) // cut: the connection closes mid-body
        },
    )
}

/// The JSON format prints what it collected before the error, for a malformed line and
/// for a connection cut mid-stream; exit 1.
#[test]
fn json_data_prints_what_it_collected_before_the_error() {
    let host = scripted_data_server();
    for (id, error) in [("1", "bad /data line"), ("2", "closed early")] {
        // Resumption off: the cut is the command's error (with it on, the scripted
        // server's same cut would be met again on every try).
        let out = bench(&host, &["--retries", "0", "data", id]).expect_code(1);
        let json = out.json();
        let print = json
            .as_array()
            .and_then(|a| a.iter().find(|s| s["target"] == "print"))
            .unwrap_or_else(|| panic!("id {id}: {out:?}"));
        assert_eq!(
            print["datapoints"],
            serde_json::json!([[3, 1439245024u64], [30, 1439245034u64]]),
            "id {id}"
        );
        assert!(
            out.stderr.to_lowercase().contains(error),
            "id {id}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains(&host),
            "names the server: {}",
            out.stderr
        );
    }
}

/// `benchlink sandbox &`, then `bench start`, then `bench status`, all without `--host`:
/// both commands find the server already answering at the probed address (the default
/// is localhost:4800; the test moves it to its own server) instead of each starting a
/// throw-away one.
#[test]
fn commands_without_host_meet_at_the_running_server() {
    let server = fast_server();
    let probe = server.host();
    let at = |args: &[&str]| {
        benchlink_with(args, |cmd| {
            cmd.env("BENCHLINK_BENCH_PROBE", &probe);
        })
    };
    let out = at(&["bench", "start", "examples/scenarios/hello.bdl"]).expect_code(0);
    let id = out.json()["id"].as_u64().expect("an id");
    assert!(
        out.stderr
            .contains(&format!("using the server answering at {probe}")),
        "{}",
        out.stderr
    );
    assert!(
        server.benchmark(id).is_some(),
        "started on the running server"
    );
    let out = at(&["bench", "status", "--wait", &id.to_string()]).expect_code(0);
    assert_eq!(out.json()["status"], "complete", "{out:?}");
    // MZBENCH_API_HOST wins over the probe.
    let other = fast_server();
    let out = benchlink_with(&["bench", "start", "examples/scenarios/hello.bdl"], |cmd| {
        cmd.env("BENCHLINK_BENCH_PROBE", &probe)
            .env("MZBENCH_API_HOST", other.host());
    })
    .expect_code(0);
    assert!(other.benchmark(0).is_some(), "{out:?}");
    assert!(!out.stderr.contains("answering at"), "{}", out.stderr);
    // Nothing answers at the probe: a throw-away server, and a 404 says why.
    let out = benchlink_with(&["bench", "status", "0"], |_| {}).expect_code(1);
    assert!(
        out.stderr.contains("not found")
            && out
                .stderr
                .contains("hint: this command's own in-process server"),
        "{}",
        out.stderr
    );
}

/// A short benchmark is followed closely (polling starts at 100 ms and doubles, rather
/// than the official fixed 3 s), with one plain progress line per stage when stderr is
/// not a terminal.
#[test]
fn a_fast_run_reports_promptly_with_a_line_per_stage() {
    // `running` lasts about 1.2 s on this server (the stages before it, 10 ms each):
    // polls at 0.1, 0.3 and 0.7 s see it, where the official first poll at 3 s would
    // see only `complete`. Seen in the output, not measured by the clock.
    let server = live_server();
    let out = bench(&server.host(), &["run", "examples/scenarios/hello.bdl"]).expect_code(0);
    assert_eq!(out.json()["status"], "complete");
    let stages: Vec<&str> = out
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("status: "))
        .map(|l| l.split_whitespace().next().unwrap_or_default())
        .collect();
    assert_eq!(stages.last(), Some(&"complete"), "{}", out.stderr);
    assert!(
        stages.contains(&"running"),
        "followed while running: {}",
        out.stderr
    );
    let mut unique = stages.clone();
    unique.dedup();
    assert_eq!(unique, stages, "one line per stage change: {}", out.stderr);
    assert!(!out.stderr.contains('\r'), "no redrawing off a terminal");
}

/// The official CLI's `--nodes_file` (one host per line) and `--workers_per_node` (pool
/// sizes added up, divided, rounded up), and the contradictions refused with exit 4
/// before anything is sent.
#[test]
fn nodes_file_workers_per_node_and_contradictions() {
    let server = fast_server();
    let host = server.host();
    let dir = std::env::temp_dir().join(format!("benchlink-cli-nodes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write nodes file");
        path.to_str().expect("utf-8 path").to_owned()
    };
    let hosts = file("hosts", "h1\n\nh2\n");
    let one = file("one", "h1\n");
    let mixed = file("mixed", "a@h1\nb@h2\n");
    let hello = "examples/scenarios/hello.bdl";

    for bad in [
        vec!["start", "--nodes", "2", "--nodes_file", &hosts, hello],
        vec!["start", "--nodes", "2", "--workers_per_node", "1", hello],
        vec!["run", "--workers_per_node", "0", hello],
        vec!["start", "--nodes", "0", hello],
        vec!["start", "--nodes", "h1", hello],
        vec!["start", "--nodes_file", &one, hello],
        vec!["start", "--nodes-file", &mixed, hello],
        vec!["start", "--env", "=x", hello],
        vec!["status", "--stop-on-interrupt", "0"],
        vec!["start", "--metric-update-interval-ms", "999", hello],
        vec!["--no_cert_check", "--cacert", "x.pem", "status", "0"],
    ] {
        let out = bench(&host, &bad);
        assert_eq!(out.code, 4, "{bad:?}: {out:#?}");
        assert!(!out.stderr.is_empty(), "{bad:?} says why");
    }
    assert!(server.benchmark(0).is_none(), "nothing was sent");
    let missing = dir.join("absent");
    let out = bench(
        &host,
        &[
            "start",
            "--nodes_file",
            missing.to_str().expect("utf-8"),
            hello,
        ],
    )
    .expect_code(2);
    assert!(out.stderr.contains("absent"), "{}", out.stderr);

    // Two hosts from the file: the benchmark runs on them.
    let out = bench(&host, &["run", "--nodes_file", &hosts, hello]).expect_code(0);
    assert_eq!(out.json()["status"], "complete", "{out:?}");
    // hello.bdl has one pool of 2 workers: 1 per node is 2 nodes, a cluster of 3 hosts
    // with the director (kept, so that it can be looked at).
    let out = bench(
        &host,
        &[
            "run",
            "--workers_per_node=1",
            "--deallocate_after_bench=false",
            hello,
        ],
    )
    .expect_code(0);
    assert_eq!(out.json()["status"], "complete", "{out:?}");
    let clusters = bench(&host, &["clusters-info"]).expect_code(0).json();
    let list = clusters.as_array().expect("a JSON array");
    assert_eq!(list.len(), 1, "{clusters}");
    assert_eq!(list[0]["n"], 3, "{clusters}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `results --wait` prints the results of a benchmark whatever its outcome and exits 0
/// (as the official CLI); `status --wait` exits 3 for a failed one.
#[test]
fn results_wait_exits_0_status_wait_3_for_a_failed_benchmark() {
    let server = fast_server();
    let host = server.host();
    let id = client(&host)
        .start(
            &hello(),
            &StartOptions {
                env: vec![("emulate_bench_crash".into(), "true".into())],
                ..StartOptions::default()
            },
        )
        .expect("start")
        .to_string();
    let out = bench(&host, &["results", "--wait", &id]).expect_code(0);
    assert!(out.json().is_object(), "{out:?}");
    let out = bench(&host, &["status", "--wait", &id]).expect_code(3);
    assert_eq!(out.json()["status"], "failed");
}

/// Text of every `<text>` element of an SVG, trimmed.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = t.split_once('>')?.1;
            Some(body.split_once("</text>")?.0.trim().to_owned())
        })
        .collect()
}

/// `run --plot` groups the metrics into charts as MZBench's dashboard does (a chart per
/// histogram, counter or gauge, titled with its name and kind; the all-zero ones named
/// in one line); `plot --target` draws only those; `report` writes one page with the
/// status, the results and the same charts, that loads nothing from elsewhere.
#[test]
fn plots_and_reports_group_metrics_as_the_dashboard_does() {
    let server = fast_server();
    let host = server.host();
    let dir = std::env::temp_dir().join(format!("benchlink-cli-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let all = dir.join("all.svg");
    let out = bench(
        &host,
        &[
            "run",
            "--plot",
            all.to_str().expect("utf-8"),
            "examples/scenarios/hello.bdl",
        ],
    )
    .expect_code(0);
    assert_eq!(out.json()["status"], "complete");
    let csv = bench(&host, &["data", "--format", "csv", "0"]).expect_code(0);
    let mut series: Vec<&str> = csv
        .stdout
        .lines()
        .filter_map(|l| l.split(',').next())
        .collect();
    series.sort_unstable();
    series.dedup();
    let results = bench(&host, &["results", "0"]).expect_code(0).json();
    let kinds: Vec<(String, String)> = results
        .as_object()
        .expect("results by metric")
        .iter()
        .map(|(name, m)| (name.clone(), m["type"].as_str().expect("a type").to_owned()))
        .collect();
    assert!(
        kinds.contains(&("dummy".into(), "histogram".into())),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("print".into(), "counter".into())),
        "{kinds:?}"
    );

    let svg = std::fs::read_to_string(&all).expect("the SVG was written");
    assert!(svg.trim_start().starts_with("<svg"), "{}", &svg[..80]);
    assert!(svg.trim_end().ends_with("</svg>"));
    let texts = svg_texts(&svg);
    let all_zero = texts
        .iter()
        .find_map(|t| t.strip_prefix("all zero: "))
        .unwrap_or_default();
    let mut charts = 0;
    for (name, kind) in &kinds {
        let title = format!("{name} ({kind})");
        let drawn = texts.iter().filter(|t| **t == title).count();
        let folded = all_zero.split(", ").any(|n| n == name);
        assert!(
            drawn + usize::from(folded) == 1,
            "{name}: one chart ({drawn}) or named all zero ({folded}): {texts:?}"
        );
        charts += drawn;
    }
    assert!(charts >= 2, "{texts:?}");
    let axes = texts.iter().filter(|t| *t == "elapsed (mm:ss)").count();
    assert_eq!(axes, charts, "one time axis per chart");
    assert!(
        out.stderr.contains(&format!(
            "plotted {} metrics in {charts} charts",
            series.len()
        )),
        "{}",
        out.stderr
    );

    let two = dir.join("two.svg");
    let out = bench(
        &host,
        &[
            "plot",
            "0",
            "-o",
            two.to_str().expect("utf-8"),
            "--target",
            "print",
            "--target",
            "print.rps",
        ],
    )
    .expect_code(0);
    assert!(
        out.stderr.contains("plotted 2 metrics in 1 charts"),
        "{}",
        out.stderr
    );
    let texts = svg_texts(&std::fs::read_to_string(&two).expect("written"));
    let titles: Vec<&String> = texts
        .iter()
        .filter(|t| {
            ["(histogram)", "(counter)", "(gauge)"]
                .iter()
                .any(|k| t.ends_with(k))
        })
        .collect();
    assert_eq!(titles, ["print (counter)"], "{texts:?}");
    assert!(texts.iter().any(|t| t == "total") && texts.iter().any(|t| t == "rate (per second)"));
    let out = bench(
        &host,
        &[
            "plot",
            "0",
            "-o",
            two.to_str().expect("utf-8"),
            "--target",
            "nope",
        ],
    )
    .expect_code(1);
    assert!(out.stderr.contains("no metric nope"), "{}", out.stderr);

    let page = dir.join("report.html");
    let out = bench(&host, &["report", "0", "-o", page.to_str().expect("utf-8")]).expect_code(0);
    assert!(
        out.stderr.contains(&format!(
            "wrote the report of benchmark 0 ({charts} charts)"
        )),
        "{}",
        out.stderr
    );
    let html = std::fs::read_to_string(&page).expect("the page was written");
    assert!(html.starts_with("<!DOCTYPE html>"), "{}", &html[..80]);
    assert!(html.contains("<h1>Benchmark 0: complete</h1>"));
    assert!(html.contains("<h2>Status timeline</h2>") && html.contains("<td>complete</td>"));
    for (name, kind) in &kinds {
        let row = format!("<tr><td>{name}</td><td>{kind}</td>");
        assert!(html.contains(&row), "{row}");
    }
    assert_eq!(
        html.matches("<svg").count(),
        charts,
        "the charts, inline, one each"
    );
    let chart_texts = svg_texts(&html);
    assert_eq!(
        chart_texts
            .iter()
            .filter(|t| *t == "elapsed (mm:ss)")
            .count(),
        charts
    );
    // The dashboard's page frozen: its one script (the pointer readout) inside it, and
    // nothing from elsewhere.
    assert_eq!(html.matches("<script").count(), 1, "one script");
    assert!(html.contains("<script>\n"), "inline");
    for outside in ["<link", "<img", "src=", "href=", "url(", "@import"] {
        assert!(!html.contains(outside), "{outside} in the page");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ctrl-C during `run` without a terminal stops the benchmark and says so (exit 130),
/// instead of leaving it running with nobody watching.
#[cfg(unix)]
#[test]
fn ctrl_c_during_run_stops_the_benchmark() {
    use std::io::{BufRead, BufReader};
    let server = live_server();
    let mut child = Command::new(bin())
        .args([
            "bench",
            "--host",
            &server.host(),
            "run",
            "examples/scenarios/hello.bdl",
        ])
        .current_dir(repo_root())
        .env("MZBENCHTOKEN", repo_root().join("no-such-token-file"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning benchlink");
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().expect("piped"));
    thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    let deadline = Instant::now() + CLI_PATIENCE;
    while !seen
        .iter()
        .any(|l: &String| l.starts_with("started benchmark"))
    {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => seen.push(line),
            Err(_) => {
                let _ = child.kill();
                panic!("never started: {seen:?}");
            }
        }
    }
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(sent.success());
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("benchlink did not end after Ctrl-C: {seen:?}");
        }
        thread::sleep(Duration::from_millis(20));
    };
    seen.extend(rx.iter());
    assert_eq!(status.code(), Some(130), "{seen:?}");
    let said = seen.join("\n");
    assert!(said.contains("stopping benchmark 0"), "{said}");
    assert!(said.contains("stopped benchmark 0"), "{said}");
    let mut c = client(&server.host());
    assert_eq!(wait_final(&mut c, 0).status_text, "stopped");
}

/// A hostile server for `plot`: `/status` says running; `/data?id=1` trickles an old
/// sample every 100 ms (never quiet, never caught up), `/data?id=2` sends its headers
/// and then nothing.
fn trickling_data_server() -> String {
    scripted_server(
        r#"{"create_time":"2015-11-03T13:39:20Z","start_time":"2015-11-03T13:39:21Z","status":"running"}"#,
        |head, conn| {
            use std::io::Write;
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
            if head.starts_with("GET /data?id=2") {
                thread::sleep(Duration::from_secs(10));
                return std::ops::ControlFlow::Break(());
            }
            // Bounded: a minute at most, ended earlier by the client hanging up.
            for i in 0..600u64 {
                let line = format!("{}\tprint\t{i}\n", 1_439_245_024 + i);
                let chunk = format!("{:x}\r\n{line}\r\n", line.len());
                if conn.write_all(chunk.as_bytes()).is_err() {
                    break;
                }
                thread::sleep(Duration::from_millis(100));
            }
            std::ops::ControlFlow::Break(())
        },
    )
}

/// `plot` of a running benchmark against a server that trickles forever, or says
/// nothing: the time budget and the quiet limit end it, with what came.
#[test]
fn plot_of_a_trickling_or_silent_stream_ends() {
    let host = trickling_data_server();
    let dir = std::env::temp_dir().join(format!("benchlink-cli-trickle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let svg = dir.join("trickle.svg");
    let path = svg.to_str().expect("utf-8");
    let out = bench(&host, &["plot", "1", "-o", path]).expect_code(0);
    assert!(
        out.stderr.contains("warning: plotting what"),
        "{}",
        out.stderr
    );
    let texts = svg_texts(&std::fs::read_to_string(&svg).expect("written"));
    assert!(texts.iter().any(|t| t == "print (gauge)"), "{texts:?}");
    let out = bench(&host, &["plot", "2", "-o", path]).expect_code(1);
    assert!(out.stderr.contains("no metric samples"), "{}", out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// On a terminal (`script` provides one), `run` redraws its progress line in place and
/// Ctrl-C asks "Stop the bench before quitting? [y/N]"; `y` stops it (exit 130).
#[cfg(unix)]
#[test]
fn ctrl_c_on_a_terminal_asks_before_stopping() {
    use std::io::Write;
    use std::sync::{Arc, Mutex};
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` to provide a terminal");
        return;
    }
    // Slow stages, so that the benchmark is still going when the answer comes.
    let server = server_with(|c| {
        c.speed = live_speed();
        c.speed.stage = Duration::from_millis(300);
    });
    let line = format!(
        "'{}' bench --host {} run examples/scenarios/hello.bdl",
        bin(),
        server.host()
    );
    let mut child = Command::new("script")
        .args(["-qfec", &line, "/dev/null"])
        .current_dir(repo_root())
        .env("MZBENCHTOKEN", repo_root().join("no-such-token-file"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawning script");
    let seen = Arc::new(Mutex::new(String::new()));
    let mut stdout = child.stdout.take().expect("piped");
    let sink = Arc::clone(&seen);
    thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = stdout.read(&mut buf) {
            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
            sink.lock().expect("lock").push_str(&text);
        }
    });
    let deadline = Instant::now() + CLI_PATIENCE;
    let child = KillOnDrop(&mut child);
    let wait_for = |what: &str| {
        while !seen.lock().expect("lock").contains(what) {
            assert!(
                Instant::now() < deadline,
                "never saw {what:?} in {:?}",
                seen.lock().expect("lock")
            );
            thread::sleep(Duration::from_millis(20));
        }
    };
    wait_for("status: init");
    let stdin = child.0.stdin.as_mut().expect("piped");
    stdin.write_all(b"\x03").expect("Ctrl-C");
    stdin.flush().expect("flush");
    wait_for("Stop the bench before quitting? [y/N]");
    stdin.write_all(b"y\r").expect("answer");
    stdin.flush().expect("flush");
    wait_for("stopped benchmark 0");
    let status = loop {
        if let Some(status) = child.0.try_wait().expect("waiting") {
            break status;
        }
        assert!(Instant::now() < deadline, "benchlink did not end");
        thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130), "{:?}", seen.lock().expect("lock"));
    let text = seen.lock().expect("lock").clone();
    assert!(text.contains("\r\x1b[2K"), "redrawn in place: {text:?}");
    let mut c = client(&server.host());
    assert_eq!(wait_final(&mut c, 0).status_text, "stopped");
}

/// Kills the child when the test fails before it ended.
struct KillOnDrop<'a>(&'a mut std::process::Child);

impl Drop for KillOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `--https-proxy` sends the requests through the proxy's `CONNECT` tunnel; a bad proxy
/// address is an invalid value.
#[test]
fn https_proxy_tunnels_the_requests() {
    let server = fast_server();
    let proxy = benchlink_tests::ConnectProxy::start();
    let via = proxy.addr().to_string();
    let out = bench(&server.host(), &["--https-proxy", &via, "clusters-info"]).expect_code(0);
    assert_eq!(out.json(), serde_json::json!([]), "{out:?}");
    assert_eq!(proxy.targets(), [server.host()]);
    bench(
        &server.host(),
        &["--https-proxy", "no-port", "clusters-info"],
    )
    .expect_code(4);
}

/// `bench plot` and `bench report` read the status once (they need it) and stream `/data`
/// (and the report its log) without asking for it again, each on one connection: counted
/// by the server.
#[test]
fn plot_and_report_ask_for_the_status_once() {
    let server = fast_server();
    let host = server.host();
    let mut c = client(&host);
    let id = c.start(&hello(), &StartOptions::default()).expect("start");
    wait_final(&mut c, id);
    wait_process_gone(&server, id);
    let dir = std::env::temp_dir().join(format!("benchlink-cli-trips-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let id = id.to_string();
    for (command, file, paths) in [
        ("plot", "p.svg", &["/data", "/status"][..]),
        (
            "report",
            "r.html",
            &["/data", "/log", "/results", "/status"][..],
        ),
    ] {
        let (requests, connections) = (server.requests(), server.stats().accepted);
        let output = dir.join(file);
        bench(
            &host,
            &[command, "--output", output.to_str().expect("utf-8"), &id],
        )
        .expect_code(0);
        let after = server.requests();
        let new: Vec<(&str, u64)> = after
            .iter()
            .filter_map(|(path, n)| {
                let n = n - requests.get(path).copied().unwrap_or(0);
                (n > 0).then_some((path.as_str(), n))
            })
            .collect();
        let once: Vec<(&str, u64)> = paths.iter().map(|p| (*p, 1)).collect();
        assert_eq!(new, once, "{command}: one request each");
        assert_eq!(
            server.stats().accepted,
            connections + 1,
            "{command}: one connection"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

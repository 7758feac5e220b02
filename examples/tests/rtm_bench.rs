//! The messaging benchmark's clients (`rtm-bench`, and the Python SDK's twin when
//! `BENCHLINK_PY_SDK` is set) run every scenario to the end on a few messages against a
//! local RTM server and report what they did. Only that they work is checked: their
//! figures are for `.ci/bench-rtm` to print, never asserted.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use benchlink_sandbox::rtm::{RtmServer, RtmServerConfig, DEFAULT_APPKEY};

const COUNT: u64 = 300;
const PATIENCE: Duration = Duration::from_secs(60);

/// Runs `program args…` from the workspace root, kills it after [`PATIENCE`], and returns
/// its report (the last line of its stdout, JSON) after checking that it succeeded.
fn report(program: &Path, args: &[String]) -> serde_json::Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let mut child = Command::new(program)
        .args(args)
        .current_dir(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("benchmark client");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{} {args:?} ran for more than {PATIENCE:?}",
                program.display()
            );
        }
        thread::sleep(Duration::from_millis(20));
    };
    let (out, err) = (
        out.join().expect("stdout reader"),
        err.join().expect("stderr reader"),
    );
    assert!(
        status.success(),
        "{} {args:?}: {status}\nstdout: {out}\nstderr: {err}",
        program.display()
    );
    let line = out.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("report {line:?}: {e}\nstderr: {err}"))
}

/// Every scenario of one client: `command` is its program and leading arguments.
fn all_scenarios(server: &RtmServer, client: &str, command: &[PathBuf]) {
    let (program, lead) = command.split_first().expect("a program");
    let mut base: Vec<String> = lead.iter().map(|p| p.display().to_string()).collect();
    base.extend(
        [
            "--endpoint",
            &server.endpoint(),
            "--appkey",
            DEFAULT_APPKEY,
            "--count",
            &COUNT.to_string(),
            "--timeout",
            "30",
        ]
        .map(String::from),
    );
    let flood = env!("CARGO_BIN_EXE_rtm-bench");
    let scenarios: [(&str, &[&str]); 4] = [
        ("publish_ack", &["publish-ack", "--window", "50"]),
        ("publish_noack", &["publish-noack"]),
        ("burst", &["burst"]),
        (
            "subscribe",
            &["subscribe", "--flood-bin", flood, "--idle", "0.5"],
        ),
    ];
    for (name, extra) in scenarios {
        let mut args = base.clone();
        args.extend(extra.iter().map(|s| s.to_string()));
        let r = report(program, &args);
        assert_eq!(r["client"], client, "{r}");
        assert_eq!(r["scenario"], name, "{r}");
        let messages = r["messages"].as_u64().expect("messages");
        if name == "subscribe" {
            // The flood's messages and its end marker, unless the server skipped some.
            assert!(messages > 0 && messages <= COUNT + 1, "{r}");
            assert_eq!(r["published"], COUNT + 1, "{r}");
        } else {
            assert_eq!(messages, COUNT, "{r}");
        }
        for key in ["rate", "seconds", "cpu_us_per_msg", "cpu_sys_us_per_msg"] {
            assert!(r[key].is_number(), "{key} in {r}");
        }
    }
}

#[test]
fn rtm_bench_runs_every_scenario() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("rtm server");
    all_scenarios(
        &server,
        "benchlink",
        &[PathBuf::from(env!("CARGO_BIN_EXE_rtm-bench"))],
    );
    server.shutdown();
}

#[test]
fn sdk_bench_runs_every_scenario() {
    // The SDK's venv comes from `.ci/python-sdk`; `.ci/test` exports it (the interop
    // tests insist on it under CI).
    let Some(python) = benchlink_tests::reference_sdk("the messaging benchmark's SDK side") else {
        return;
    };
    let server = RtmServer::start(RtmServerConfig::default()).expect("rtm server");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/rtm_sdk_bench.py");
    all_scenarios(&server, "sdk", &[python, script]);
    server.shutdown();
}

//! `benchlink rtm …` and the RTM side of `benchlink sandbox`, run as a user runs them:
//! the built binary against an RTM server started by the test, checking stdout, stderr
//! and exit codes (0 ok, 1 error, 4 invalid value). Every run is killed after
//! [`PATIENCE`], so a hanging command fails its test instead of hanging it.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use benchlink_sandbox::rtm::{
    ConnectionInfo, RtmServer, RtmServerConfig, DEFAULT_APPKEY, SUPERUSER_ROLE, SUPERUSER_SECRET,
};

const PATIENCE: Duration = Duration::from_secs(20);

/// What a finished run printed and returned.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// `benchlink rtm ARGS` for `server` (endpoint and appkey in the environment, as a
/// user's shell would have them), nothing else from the test's environment.
fn rtm(server: &RtmServer, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_benchlink"));
    c.arg("rtm")
        .args(args)
        .env("BENCHLINK_RTM_ENDPOINT", server.endpoint())
        .env("BENCHLINK_RTM_APPKEY", DEFAULT_APPKEY)
        .env_remove("BENCHLINK_RTM_ROLE")
        .env_remove("BENCHLINK_RTM_ROLE_SECRET")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn spawn(mut command: Command) -> Child {
    command.spawn().expect("benchlink binary")
}

/// Waits for `child` (killing it after [`PATIENCE`]) and collects its output.
fn finish(mut child: Child) -> Run {
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
                "benchlink ran for more than {PATIENCE:?}; stderr:\n{}",
                err.join().unwrap_or_default()
            );
        }
        thread::sleep(Duration::from_millis(10));
    };
    Run {
        code: status.code(),
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

fn run(command: Command) -> Run {
    finish(spawn(command))
}

/// Runs with `input` on stdin.
fn run_with_stdin(mut command: Command, input: &str) -> Run {
    command.stdin(Stdio::piped());
    let mut child = spawn(command);
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).expect("write stdin");
    drop(stdin);
    finish(child)
}

fn ok(run: Run) -> Run {
    assert_eq!(run.code, Some(0), "{run:?}");
    run
}

/// Waits until an open connection is subscribed to every channel of `channels`.
fn wait_subscribed(server: &RtmServer, channels: &[&str]) {
    let subscribed = |conns: &[ConnectionInfo]| {
        conns.iter().any(|c| {
            c.open
                && channels
                    .iter()
                    .all(|ch| c.subscriptions.iter().any(|s| s == ch))
        })
    };
    assert!(
        server.wait_for_connections(PATIENCE, subscribed),
        "no subscription to {channels:?}: {:?}",
        server.connections()
    );
}

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

fn server() -> RtmServer {
    RtmServer::start(RtmServerConfig::default()).expect("rtm server")
}

#[test]
fn publish_reaches_a_subscriber() {
    let server = server();
    let subscriber = spawn(rtm(
        &server,
        &["subscribe", "animals", "--max", "1", "--timeout", "15"],
    ));
    wait_subscribed(&server, &["animals"]);
    let published = ok(run(rtm(
        &server,
        &["publish", "animals", r#"{"who": "zebra"}"#],
    )));
    let acks = json_lines(&published.stdout);
    assert_eq!(acks.len(), 1, "{published:?}");
    assert_eq!(acks[0]["channel"], "animals");
    assert!(
        acks[0]["position"]
            .as_str()
            .is_some_and(|p| p.ends_with(":0")),
        "{published:?}"
    );
    let received = ok(finish(subscriber));
    assert_eq!(
        received.stdout,
        "{\"channel\":\"animals\",\"message\":{\"who\": \"zebra\"}}\n"
    );
    assert!(
        received.stderr.contains("subscribed to animals"),
        "{received:?}"
    );
}

#[test]
fn publish_from_stdin_then_replay_history() {
    let server = server();
    let published = ok(run_with_stdin(
        rtm(&server, &["publish", "lines", "-"]),
        "{\"n\":1}\n\nplain text\n42\n",
    ));
    let positions: Vec<String> = json_lines(&published.stdout)
        .iter()
        .map(|a| a["position"].as_str().expect("position").to_owned())
        .collect();
    assert_eq!(positions.len(), 3, "blank lines are skipped: {published:?}");
    assert!(positions[2].ends_with(":2"), "{positions:?}");
    // The history brings them back in order, non-JSON as a JSON string.
    let history = ok(run(rtm(
        &server,
        &[
            "subscribe",
            "lines",
            "--count",
            "3",
            "--max",
            "3",
            "--timeout",
            "15",
        ],
    )));
    let messages: Vec<_> = json_lines(&history.stdout)
        .into_iter()
        .map(|l| l["message"].clone())
        .collect();
    assert_eq!(
        messages,
        [
            serde_json::json!({"n": 1}),
            serde_json::json!("plain text"),
            serde_json::json!(42)
        ]
    );
    // From a position: the last one only.
    let from = ok(run(rtm(
        &server,
        &[
            "subscribe",
            "lines",
            "--position",
            &positions[2],
            "--max",
            "1",
            "--timeout",
            "15",
        ],
    )));
    assert_eq!(json_lines(&from.stdout)[0]["message"], 42);
}

#[test]
fn read_write_delete_round_trip() {
    let server = server();
    assert_eq!(ok(run(rtm(&server, &["read", "kv"]))).stdout, "null\n");
    let written = ok(run(rtm(&server, &["write", "kv", r#"{"v":[1,2]}"#])));
    assert_eq!(json_lines(&written.stdout)[0]["channel"], "kv");
    assert_eq!(
        ok(run(rtm(&server, &["read", "kv"]))).stdout,
        "{\"v\":[1,2]}\n"
    );
    ok(run(rtm(&server, &["write", "kv", "just words"])));
    assert_eq!(
        ok(run(rtm(&server, &["read", "kv"]))).stdout,
        "\"just words\"\n"
    );
    let deleted = ok(run(rtm(&server, &["delete", "kv"])));
    assert_eq!(json_lines(&deleted.stdout)[0]["channel"], "kv");
    assert_eq!(ok(run(rtm(&server, &["read", "kv"]))).stdout, "null\n");
}

#[test]
fn search_lists_channels_by_prefix() {
    let server = server();
    for channel in ["fleet.a", "fleet.b", "other"] {
        server.publish(channel, "1").expect("publish");
    }
    let found = ok(run(rtm(&server, &["search", "fleet."])));
    let mut channels: Vec<String> = serde_json::from_str(found.stdout.trim()).expect("array");
    channels.sort();
    assert_eq!(channels, ["fleet.a", "fleet.b"]);
    let none = ok(run(rtm(&server, &["search", "nothing"])));
    assert_eq!(none.stdout, "[]\n");
}

#[test]
fn record_then_replay_keeps_order_and_timing() {
    let server = server();
    let dir = std::env::temp_dir().join(format!("benchlink-cli-rtm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("recording.jsonl");
    let file_arg = file.to_str().expect("utf-8 path");

    let recorder = spawn(rtm(
        &server,
        &[
            "record",
            "rec.a",
            "rec.b",
            "-o",
            file_arg,
            "--max",
            "3",
            "--duration",
            "15",
        ],
    ));
    wait_subscribed(&server, &["rec.a", "rec.b"]);
    server.publish("rec.a", r#"{"step":1}"#).expect("publish");
    thread::sleep(Duration::from_millis(300));
    server.publish("rec.b", r#""two""#).expect("publish");
    thread::sleep(Duration::from_millis(300));
    server.publish("rec.a", "3").expect("publish");
    let recorded = ok(finish(recorder));
    assert!(
        recorded.stderr.contains("recorded 3 messages"),
        "{recorded:?}"
    );

    let lines = json_lines(&std::fs::read_to_string(&file).expect("recording"));
    assert_eq!(lines.len(), 3);
    let channels: Vec<_> = lines.iter().map(|l| l["channel"].clone()).collect();
    assert_eq!(channels, ["rec.a", "rec.b", "rec.a"]);
    assert_eq!(lines[0]["message"], serde_json::json!({"step": 1}));
    assert_eq!(lines[1]["message"], "two");
    let t: Vec<u64> = lines
        .iter()
        .map(|l| l["t_ms"].as_u64().expect("t_ms"))
        .collect();
    assert!(t[0] <= t[1] && t[1] <= t[2], "{t:?}");
    let span = t[2] - t[0];
    assert!(span >= 550, "the gaps were ~600 ms: {t:?}");

    // Replayed twice as fast under a prefix, to a subscriber of the copies.
    let copies = spawn(rtm(
        &server,
        &[
            "subscribe",
            "copy.rec.a",
            "copy.rec.b",
            "--max",
            "3",
            "--timeout",
            "15",
        ],
    ));
    wait_subscribed(&server, &["copy.rec.a", "copy.rec.b"]);
    let started = Instant::now();
    let replayed = ok(run(rtm(
        &server,
        &[
            "replay",
            file_arg,
            "--speed",
            "2",
            "--channel-prefix",
            "copy.",
        ],
    )));
    let took = started.elapsed();
    let summary = &json_lines(&replayed.stdout)[0];
    assert_eq!(summary["published"], 3, "{replayed:?}");
    assert_eq!(summary["failed"], 0, "{replayed:?}");
    assert!(
        took >= Duration::from_millis(span / 2),
        "replayed in {took:?}, recording spans {span} ms"
    );
    let received: Vec<_> = json_lines(&ok(finish(copies)).stdout)
        .into_iter()
        .map(|l| (l["channel"].clone(), l["message"].clone()))
        .collect();
    assert_eq!(
        received,
        [
            (
                serde_json::json!("copy.rec.a"),
                serde_json::json!({"step": 1})
            ),
            (serde_json::json!("copy.rec.b"), serde_json::json!("two")),
            (serde_json::json!("copy.rec.a"), serde_json::json!(3)),
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn replay_rejects_a_file_that_is_not_a_recording() {
    let server = server();
    let file = std::env::temp_dir().join(format!("benchlink-bad-{}.jsonl", std::process::id()));
    std::fs::write(
        &file,
        "{\"t_ms\":0,\"channel\":\"c\",\"message\":1}\nnot json\n",
    )
    .expect("write");
    let r = run(rtm(&server, &["replay", file.to_str().expect("utf-8")]));
    let _ = std::fs::remove_file(&file);
    assert_eq!(r.code, Some(4), "{r:?}");
    assert!(r.stderr.contains(":2: not a recording line"), "{r:?}");
}

#[test]
fn superuser_auth_opens_restricted_channels_and_a_bad_secret_exits_1() {
    let server = server();
    let denied = run(rtm(&server, &["publish", "restricted.x", "1"]));
    assert_eq!(denied.code, Some(1), "{denied:?}");
    assert!(denied.stderr.contains("authorization_denied"), "{denied:?}");

    let allowed = ok(run(rtm(
        &server,
        &[
            "--role",
            SUPERUSER_ROLE,
            "--role-secret",
            SUPERUSER_SECRET,
            "publish",
            "restricted.x",
            "1",
        ],
    )));
    assert_eq!(json_lines(&allowed.stdout)[0]["channel"], "restricted.x");
    assert!(server
        .connections()
        .iter()
        .any(|c| c.role.as_deref() == Some(SUPERUSER_ROLE)));

    // From the environment, with a wrong secret: nothing is published.
    let mut bad = rtm(&server, &["publish", "open", "1"]);
    bad.env("BENCHLINK_RTM_ROLE", SUPERUSER_ROLE)
        .env("BENCHLINK_RTM_ROLE_SECRET", "not-the-secret");
    let bad = run(bad);
    assert_eq!(bad.code, Some(1), "{bad:?}");
    assert!(bad.stderr.contains("authentication as role"), "{bad:?}");
    assert!(bad.stdout.is_empty(), "{bad:?}");
    assert!(!bad.stderr.contains("not-the-secret"), "{bad:?}");
}

#[test]
fn usage_errors_and_unreachable_servers() {
    let server = server();
    // An endpoint without an appkey.
    let mut no_key = rtm(&server, &["read", "c"]);
    no_key.env_remove("BENCHLINK_RTM_APPKEY");
    let r = run(no_key);
    assert_eq!(r.code, Some(4), "{r:?}");
    // A role without its secret.
    let r = run(rtm(&server, &["--role", "x", "read", "c"]));
    assert_eq!(r.code, Some(4), "{r:?}");
    // A view needs exactly one subscription id.
    let r = run(rtm(
        &server,
        &["subscribe", "a", "b", "--filter", "select * from a"],
    ));
    assert_eq!(r.code, Some(4), "{r:?}");
    // A wrong appkey: the upgrade is refused.
    let r = run(rtm(&server, &["--appkey", "wrong", "read", "c"]));
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("could not connect"), "{r:?}");
    // Nobody publishes: --max is not reached before --timeout.
    let r = run(rtm(
        &server,
        &["subscribe", "quiet", "--max", "1", "--timeout", "0.3"],
    ));
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("timed out with 0 of 1"), "{r:?}");
    // Without --max, the timeout is a normal end.
    let r = ok(run(rtm(
        &server,
        &["subscribe", "quiet", "--timeout", "0.3"],
    )));
    assert!(r.stdout.is_empty(), "{r:?}");
    // Nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let r = run(rtm(
        &server,
        &["--endpoint", &format!("ws://127.0.0.1:{port}"), "read", "c"],
    ));
    assert_eq!(r.code, Some(1), "{r:?}");
}

/// `benchlink rtm ARGS` with no service settings at all: no `BENCHLINK_RTM_*`, no
/// `SATORI_*`, and an empty config directory.
fn rtm_unconfigured(args: &[&str], config_home: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_benchlink"));
    c.arg("rtm").args(args).env("XDG_CONFIG_HOME", config_home);
    for var in [
        "BENCHLINK_RTM_ENDPOINT",
        "BENCHLINK_RTM_APPKEY",
        "BENCHLINK_RTM_ROLE",
        "BENCHLINK_RTM_ROLE_SECRET",
        "SATORI_ENDPOINT",
        "SATORI_APPKEY",
        "SATORI_ROLE_NAME",
        "SATORI_ROLE_SECRET",
    ] {
        c.env_remove(var);
    }
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("benchlink-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn without_an_endpoint_a_local_server_is_used() {
    let home = temp_dir("no-config");
    let r = ok(run(rtm_unconfigured(&["publish", "c", "1"], &home)));
    // (Unless something answers on 127.0.0.1:8080, as `benchlink sandbox` would.)
    assert!(
        r.stderr.contains("using a local RTM server") || r.stderr.contains("127.0.0.1:8080"),
        "{r:?}"
    );
    assert_eq!(json_lines(&r.stdout)[0]["channel"], "c");
}

#[test]
fn satori_environment_and_config_file_name_the_service() {
    let server = server();
    let home = temp_dir("satori-config");
    // satori-rtm-cli's variables.
    let mut c = rtm_unconfigured(&["write", "k", "1"], &home);
    c.env("SATORI_ENDPOINT", server.endpoint())
        .env("SATORI_APPKEY", DEFAULT_APPKEY);
    ok(run(c));
    // Its TOML config file, at the default place; the role secret is not echoed.
    let dir = home.join("satori");
    std::fs::create_dir_all(&dir).expect("config dir");
    std::fs::write(
        dir.join("rtm-cli.config"),
        format!(
            "endpoint = \"{}\"\nappkey = \"{DEFAULT_APPKEY}\"\nrole_name = \"{SUPERUSER_ROLE}\"\nrole_secret = \"{SUPERUSER_SECRET}\"\n",
            server.endpoint()
        ),
    )
    .expect("config file");
    let r = ok(run(rtm_unconfigured(&["read", "k"], &home)));
    assert_eq!(r.stdout.trim(), "1");
    assert!(
        r.stderr.contains("From config file: endpoint = ws://"),
        "{r:?}"
    );
    assert!(
        r.stderr.contains("From config file: role_secret = ***"),
        "{r:?}"
    );
    assert!(!r.stderr.contains(SUPERUSER_SECRET), "{r:?}");
    // The JSON credentials form, named with -c; the command line still wins.
    let json = home.join("credentials.json");
    std::fs::write(
        &json,
        format!(r#"{{"endpoint": "ws://127.0.0.1:1", "appkey": "{DEFAULT_APPKEY}"}}"#),
    )
    .expect("json config");
    let r = ok(run(rtm_unconfigured(
        &[
            "-c",
            json.to_str().expect("path"),
            "-e",
            &server.endpoint(),
            "read",
            "k",
        ],
        &home,
    )));
    assert_eq!(r.stdout.trim(), "1");
    // A config file that is neither TOML nor JSON is said, and ignored.
    std::fs::write(&json, "not = [valid").expect("bad config");
    let mut c = rtm_unconfigured(&["-c", json.to_str().expect("path"), "read", "k"], &home);
    c.env("SATORI_ENDPOINT", server.endpoint())
        .env("SATORI_APPKEY", DEFAULT_APPKEY);
    let r = ok(run(c));
    assert!(r.stderr.contains("Invalid config file at"), "{r:?}");
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn sandbox_serves_rtm_too() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_benchlink"))
        .args(["sandbox", "--port", "0", "--rtm-port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("benchlink sandbox");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut banner = Vec::new();
    while !banner.iter().any(|l: &String| l.contains("role:")) {
        match rx.recv_timeout(PATIENCE) {
            Ok(line) => banner.push(line),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no RTM banner: {banner:?}");
            }
        }
    }
    let endpoint = banner
        .iter()
        .find_map(|l| l.strip_prefix("RTM server listening on "))
        .map(str::to_owned);
    let text = banner.join("\n");
    let published = endpoint.as_ref().map(|e| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_benchlink"));
        c.args(["rtm", "--endpoint", e, "--appkey", DEFAULT_APPKEY])
            .args(["--role", SUPERUSER_ROLE, "--role-secret", SUPERUSER_SECRET])
            .args(["publish", "restricted.sandbox", "1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        run(c)
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        endpoint.is_some_and(|e| e.starts_with("ws://127.0.0.1:")),
        "{text}"
    );
    assert!(text.contains(DEFAULT_APPKEY), "{text}");
    assert!(text.contains(SUPERUSER_SECRET), "{text}");
    assert!(
        text.contains("benchmark server listening on http://"),
        "{text}"
    );
    let published = published.expect("published");
    assert_eq!(published.code, Some(0), "{published:?}");
}

/// `--protocol cbor`: the same commands over CBOR, printing the same JSON; a JSON
/// subscriber sees what a CBOR publisher sent.
#[test]
fn the_cbor_protocol_prints_the_same_json() {
    let server = server();
    let cbor = |args: &[&str]| {
        let mut all = vec!["--protocol", "cbor"];
        all.extend_from_slice(args);
        ok(run(rtm(&server, &all)))
    };
    let subscriber = spawn(rtm(
        &server,
        &["subscribe", "animals", "--max", "1", "--timeout", "15"],
    ));
    wait_subscribed(&server, &["animals"]);
    let published = cbor(&["publish", "animals", r#"{"who": "zebra", "n": 1.5}"#]);
    assert_eq!(json_lines(&published.stdout)[0]["channel"], "animals");
    assert_eq!(
        ok(finish(subscriber)).stdout,
        "{\"channel\":\"animals\",\"message\":{\"who\":\"zebra\",\"n\":1.5}}\n"
    );
    cbor(&["write", "kv", r#"{"v":[1,null]}"#]);
    assert_eq!(cbor(&["read", "kv"]).stdout, "{\"v\":[1,null]}\n");
    cbor(&["delete", "kv"]);
    assert_eq!(cbor(&["read", "kv"]).stdout, "null\n");
    // It asks for CBOR for real: a server that does not select it is refused.
    let json_only = RtmServer::start(RtmServerConfig {
        cbor: false,
        ..RtmServerConfig::default()
    })
    .expect("rtm server");
    let refused = run(rtm(&json_only, &["--protocol", "cbor", "read", "kv"]));
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("did not select the offered subprotocol"),
        "{refused:?}"
    );
    assert_eq!(ok(run(rtm(&json_only, &["read", "kv"]))).stdout, "null\n");
}

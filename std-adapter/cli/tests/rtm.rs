//! `benchlink rtm …` and the RTM side of `benchlink sandbox`, run as a user runs them:
//! the built binary against an RTM server started by the test, checking stdout, stderr,
//! exit codes (0 ok, 1 error or bad usage, 4 invalid value) and the PDUs the server
//! received. The commands and their output follow satori-rtm-cli 1.5.3, whose
//! recordings replay here and the other way round. Every run is killed after
//! [`PATIENCE`], so a hanging command fails its test instead of hanging it.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use benchlink_sandbox::rtm::{
    ConnectionInfo, ReplyOverride, RtmServer, RtmServerConfig, DEFAULT_APPKEY, SUPERUSER_ROLE,
    SUPERUSER_SECRET,
};
use benchlink_tests::wait_until;

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
/// user's shell would have them), nothing else from the test's environment or config.
fn rtm(server: &RtmServer, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_benchlink"));
    c.arg("rtm")
        .args(args)
        .env("BENCHLINK_RTM_ENDPOINT", server.endpoint())
        .env("BENCHLINK_RTM_APPKEY", DEFAULT_APPKEY)
        .env_remove("BENCHLINK_RTM_ROLE")
        .env_remove("BENCHLINK_RTM_ROLE_SECRET")
        .env_remove("SATORI_ROLE_NAME")
        .env_remove("SATORI_ROLE_SECRET")
        // No config file of the user's.
        .env("XDG_CONFIG_HOME", "/nonexistent/benchlink-test")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn spawn(mut command: Command) -> Child {
    command.spawn().expect("benchlink binary")
}

/// Waits for `child` (killing it after [`PATIENCE`]) and collects its output (stdout
/// only if it was not taken: see [`Lines`]).
fn finish(mut child: Child) -> Run {
    let stdout = child.stdout.take();
    let mut stderr = child.stderr.take().expect("stderr");
    let out = thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut stdout) = stdout {
            let _ = stdout.read_to_string(&mut s);
        }
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

/// The stdout of a running child, line by line as it prints them, so that a test can
/// wait for what the command has done so far.
struct Lines {
    rx: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Lines {
    /// Takes `child`'s stdout ([`finish`] then leaves `Run::stdout` empty).
    fn of(child: &mut Child) -> Lines {
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines {
            rx,
            seen: Vec::new(),
        }
    }

    /// Waits (up to [`PATIENCE`]) until the command has printed `line`.
    fn wait_for(&mut self, line: &str) {
        while !self.seen.iter().any(|l| l == line) {
            match self.rx.recv_timeout(PATIENCE) {
                Ok(l) => self.seen.push(l),
                Err(e) => panic!("never printed {line:?} ({e}); printed {:?}", self.seen),
            }
        }
    }

    /// The next line printed, waiting for it (up to [`PATIENCE`]).
    fn next(&mut self) -> String {
        match self.rx.recv_timeout(PATIENCE) {
            Ok(l) => {
                self.seen.push(l.clone());
                l
            }
            Err(e) => panic!("printed nothing more ({e}); printed {:?}", self.seen),
        }
    }

    /// Everything printed, once the command has ended: the lines and a newline each.
    fn rest(mut self) -> String {
        while let Ok(l) = self.rx.recv_timeout(PATIENCE) {
            self.seen.push(l);
        }
        self.seen.iter().map(|l| format!("{l}\n")).collect()
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
    // A command that refuses its arguments exits without reading: a broken pipe here.
    let _ = stdin.write_all(input.as_bytes());
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

/// The wall clock as a recording's timestamps count it: seconds since 1970.
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs_f64()
}

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

fn server() -> RtmServer {
    RtmServer::start(RtmServerConfig::default()).expect("rtm server")
}

/// The last `n` messages of `channel`, as `subscribe` prints them.
fn history(server: &RtmServer, channel: &str, n: usize) -> Vec<String> {
    let n = n.to_string();
    let r = ok(run(rtm(
        server,
        &[
            "-v",
            "0",
            "subscribe",
            channel,
            "--count",
            &n,
            "--max",
            &n,
            "--timeout",
            "10",
        ],
    )));
    r.stdout.lines().map(str::to_owned).collect()
}

/// Every PDU the server received whose text contains `needle`.
fn received(server: &RtmServer, needle: &str) -> Vec<serde_json::Value> {
    server
        .connections()
        .iter()
        .flat_map(|c| c.received.clone())
        .filter(|pdu| pdu.contains(needle))
        .map(|pdu| serde_json::from_str(&pdu).expect("a JSON PDU"))
        .collect()
}

fn write_file(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write file");
    path.to_str().expect("utf-8 path").to_owned()
}

/// satori-rtm-cli's own recording of two channels (its documentation's example).
const REFERENCE_RECORDING: &str = r#"{"subscription_id": "ch1", "position": "1500000000:1", "messages": ["hello"], "timestamp": 1795454096.6010952}
{"subscription_id": "ch1", "position": "1500000000:2", "messages": [{"a": [1, 2.5, "\u00e9"], "b": null}], "timestamp": 1795454096.6012354}
{"subscription_id": "ch2", "position": "1500000000:1", "messages": ["x"], "timestamp": 1795454096.8103144}
{"subscription_id": "ch1", "position": "1500000000:4", "messages": [42, "two messages in one batch"], "timestamp": 1795454097.9}
"#;

#[test]
fn publish_reaches_a_subscriber_printed_as_satori_rtm_cli_prints() {
    let server = server();
    let subscriber = spawn(rtm(
        &server,
        &[
            "-v",
            "2",
            "subscribe",
            "animals",
            "--max",
            "1",
            "--timeout",
            "15",
        ],
    ));
    wait_subscribed(&server, &["animals"]);
    let published = ok(run(rtm(
        &server,
        &["publish", "animals", r#"{"who":"zébra","n":[1,2.50]}"#],
    )));
    assert!(published.stdout.is_empty(), "{published:?}");
    assert!(
        published.stderr.contains("Connecting to ws://"),
        "{published:?}"
    );
    assert!(published.stderr.contains("Connected\n"), "{published:?}");
    let received = ok(finish(subscriber));
    assert_eq!(
        received.stdout,
        "animals: {\"who\": \"z\\u00e9bra\", \"n\": [1, 2.5]}\n"
    );
    for info in [
        "Subscribing to animals, press C-c to stop",
        "Subscription became active",
    ] {
        assert!(received.stderr.contains(info), "{received:?}");
    }
}

#[test]
fn jsonl_keeps_benchlinks_json_lines() {
    let server = server();
    let subscriber = spawn(rtm(
        &server,
        &[
            "--jsonl",
            "subscribe",
            "animals",
            "--max",
            "1",
            "--timeout",
            "15",
        ],
    ));
    wait_subscribed(&server, &["animals"]);
    let published = ok(run(rtm(
        &server,
        &["publish", "--jsonl", "animals", r#"{"who": "zebra"}"#],
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
    assert_eq!(
        ok(finish(subscriber)).stdout,
        "{\"channel\":\"animals\",\"message\":{\"who\": \"zebra\"}}\n"
    );
    let written = ok(run(rtm(&server, &["--jsonl", "write", "kv", "1"])));
    assert_eq!(json_lines(&written.stdout)[0]["channel"], "kv");
}

#[test]
fn publish_reads_stdin_line_by_line() {
    let server = server();
    let published = ok(run_with_stdin(
        rtm(&server, &["publish", "lines"]),
        "{\"n\":1}\n\nplain text  \n  42\n",
    ));
    assert_eq!(
        published.stdout,
        "Sending input to lines, press C-d or C-c to stop\n"
    );
    // An empty line is "", trailing spaces go, JSON stays JSON.
    assert_eq!(
        history(&server, "lines", 4),
        [
            "lines: {\"n\": 1}",
            "lines: \"\"",
            "lines: \"plain text\"",
            "lines: 42"
        ]
    );
}

/// Publishing from stdin counts what went out: off a terminal (here) nothing is drawn
/// while it runs, and `-v 2` gives one plain summary line with the rate.
#[test]
fn publish_from_stdin_summarises_its_count_at_info_level() {
    let server = server();
    let input = "1\n2\n3\n4\n5\n";
    let quiet = ok(run_with_stdin(rtm(&server, &["publish", "counted"]), input));
    assert!(!quiet.stderr.contains("published"), "{quiet:?}");
    let told = ok(run_with_stdin(
        rtm(&server, &["-v", "2", "publish", "counted"]),
        input,
    ));
    assert!(
        told.stderr
            .lines()
            .any(|l| l.contains("published 5 messages in ") && l.ends_with("/s)")),
        "{told:?}"
    );
    assert!(
        !told.stderr.contains('\r'),
        "no redraws off a terminal: {told:?}"
    );
}

#[test]
fn a_line_that_looks_like_json_must_be_json_unless_string() {
    let server = server();
    let r = run_with_stdin(
        rtm(&server, &["publish", "strict"]),
        "1\n{\"who\":\nnever sent\n",
    );
    assert_eq!(r.code, Some(4), "{r:?}");
    assert!(r.stderr.contains("stdin:2: "), "{r:?}");
    assert!(r.stderr.contains("is not valid JSON"), "{r:?}");
    assert!(r.stderr.contains("--string"), "{r:?}");
    let sent = received(&server, "rtm/publish");
    assert_eq!(sent.len(), 1, "only the line before: {sent:?}");
    assert_eq!(sent[0]["body"]["message"], 1);
    // The same lines as text, on purpose.
    ok(run_with_stdin(
        rtm(&server, &["publish", "--string", "strict"]),
        "{\"who\":\n42\n",
    ));
    assert_eq!(
        history(&server, "strict", 3),
        ["strict: 1", "strict: \"{\\\"who\\\":\"", "strict: \"42\""]
    );
    // A value argument too.
    let r = run(rtm(&server, &["write", "k", "[1,"]));
    assert_eq!(r.code, Some(4), "{r:?}");
    let r = run(rtm(&server, &["publish", "strict", "\"open"]));
    assert_eq!(r.code, Some(4), "{r:?}");
}

#[test]
fn read_write_delete_round_trip() {
    let server = server();
    assert_eq!(ok(run(rtm(&server, &["read", "kv"]))).stdout, "null\n");
    let written = ok(run(rtm(
        &server,
        &["write", "kv", r#"{"v":[1,2],"a":"é"}"#],
    )));
    assert!(written.stdout.is_empty(), "{written:?}");
    assert_eq!(
        ok(run(rtm(&server, &["read", "kv"]))).stdout,
        "{\"v\": [1, 2], \"a\": \"\\u00e9\"}\n"
    );
    assert_eq!(
        ok(run(rtm(&server, &["read", "-j", "kv"]))).stdout,
        "{\n  \"v\": [\n    1,\n    2\n  ],\n  \"a\": \"\\u00e9\"\n}\n"
    );
    ok(run(rtm(&server, &["write", "kv", "just words"])));
    assert_eq!(
        ok(run(rtm(&server, &["read", "kv"]))).stdout,
        "\"just words\"\n"
    );
    let deleted = ok(run(rtm(&server, &["delete", "kv"])));
    assert!(deleted.stdout.is_empty(), "{deleted:?}");
    assert_eq!(ok(run(rtm(&server, &["read", "kv"]))).stdout, "null\n");
}

#[test]
fn disable_acks_sends_requests_without_ids() {
    let server = server();
    let subscriber = spawn(rtm(
        &server,
        &[
            "-v",
            "0",
            "subscribe",
            "quiet.acks",
            "--max",
            "2",
            "--timeout",
            "15",
        ],
    ));
    wait_subscribed(&server, &["quiet.acks"]);
    ok(run_with_stdin(
        rtm(&server, &["publish", "-q", "quiet.acks"]),
        "1\n2\n",
    ));
    assert_eq!(
        ok(finish(subscriber)).stdout,
        "quiet.acks: 1\nquiet.acks: 2\n"
    );
    ok(run(rtm(
        &server,
        &["write", "--disable_acks", "quiet.kv", "7"],
    )));
    ok(run(rtm(&server, &["delete", "-q", "quiet.gone"])));
    // Nothing waits for a reply: the server may still be reading the last requests.
    let started = Instant::now();
    while received(&server, "quiet.").len() < 5 && started.elapsed() < PATIENCE {
        thread::sleep(Duration::from_millis(10));
    }
    let sent = received(&server, "quiet.");
    let actions: Vec<_> = sent.iter().map(|p| p["action"].clone()).collect();
    assert_eq!(
        actions,
        [
            "rtm/subscribe",
            "rtm/publish",
            "rtm/publish",
            "rtm/write",
            "rtm/delete"
        ]
    );
    for pdu in &sent[1..] {
        assert!(pdu.get("id").is_none(), "{pdu}");
    }
    assert_eq!(ok(run(rtm(&server, &["read", "quiet.kv"]))).stdout, "7\n");
}

#[test]
fn subscribe_flags_reach_the_server() {
    let server = server();
    for m in ["1", "2", "3"] {
        server.publish("flags", m).expect("publish");
    }
    // -j indents; --count brings history; -d simple asks for fast_forward.
    let r = ok(run(rtm(
        &server,
        &[
            "-d",
            "simple",
            "subscribe",
            "flags",
            "-j",
            "--count",
            "2",
            "--max",
            "2",
            "--timeout",
            "10",
        ],
    )));
    assert_eq!(r.stdout, "flags: 2\nflags: 3\n");
    // Unique prefixes of long options, as satori-rtm-cli (docopt) takes them.
    let position = server.publish("flags", r#"{"k":[true]}"#).expect("publish");
    let r = ok(run(rtm(
        &server,
        &[
            "--verb",
            "0",
            "subscribe",
            "flags",
            "--pos",
            &position,
            "-j",
            "--max",
            "1",
            "--timeout",
            "10",
        ],
    )));
    assert_eq!(r.stdout, "flags: {\n  \"k\": [\n    true\n  ]\n}\n");
    assert!(r.stderr.is_empty(), "-v 0: {r:?}");
    let subscribes = received(&server, "rtm/subscribe");
    assert_eq!(
        subscribes[0]["body"]["fast_forward"], true,
        "{subscribes:?}"
    );
    assert_eq!(
        subscribes[0]["body"]["history"]["count"], 2,
        "{subscribes:?}"
    );
    assert_eq!(subscribes[1]["body"]["position"], position.as_str());
    assert!(
        subscribes[1]["body"].get("fast_forward").is_none(),
        "advanced by default"
    );
}

#[test]
fn count_with_age_is_refused_but_view_takes_both() {
    let server = server();
    for args in [
        &["subscribe", "c", "--count", "1", "--age", "5"][..],
        &["record", "c", "--count", "1", "--age", "5"],
    ] {
        let r = run(rtm(&server, args));
        assert_eq!(r.code, Some(1), "{r:?}");
        assert!(
            r.stderr
                .contains("--count and --age cannot be used together"),
            "{r:?}"
        );
    }
    assert!(
        received(&server, "rtm/subscribe").is_empty(),
        "nothing was sent"
    );
    // view: the age wins, as in satori-rtm-cli.
    ok(run(rtm(
        &server,
        &[
            "view",
            "select * from c",
            "--count",
            "1",
            "--age",
            "5",
            "-p",
            "2",
            "--timeout",
            "0.3",
        ],
    )));
    let view = &received(&server, "rtm/subscribe")[0]["body"];
    assert_eq!(view["subscription_id"], "view");
    assert_eq!(view["filter"], "select * from c");
    assert_eq!(view["period"], 2);
    assert_eq!(view["history"], serde_json::json!({"age": 5}));
}

#[test]
fn view_prints_under_the_view_id() {
    let server = server();
    let viewer = spawn(rtm(
        &server,
        &["view", "select * from zoo", "--max", "2", "--timeout", "15"],
    ));
    wait_subscribed(&server, &["view"]);
    server.publish("zoo", r#"{"who":"lion"}"#).expect("publish");
    // A view sees structured messages only: the number is not delivered.
    server.publish("zoo", "7").expect("publish");
    server
        .publish("zoo", r#"{"who":"tiger"}"#)
        .expect("publish");
    assert_eq!(
        ok(finish(viewer)).stdout,
        "view: {\"who\": \"lion\"}\nview: {\"who\": \"tiger\"}\n"
    );
}

#[test]
fn only_value_changes_skips_repeats() {
    let server = server();
    let subscriber = spawn(rtm(
        &server,
        &[
            "subscribe",
            "temp",
            "--only",
            "value_changes",
            "--max",
            "3",
            "--timeout",
            "15",
        ],
    ));
    wait_subscribed(&server, &["temp"]);
    for m in ["20", "20", "21", "21", "20"] {
        server.publish("temp", m).expect("publish");
    }
    assert_eq!(
        ok(finish(subscriber)).stdout,
        "temp: 20\ntemp: 21\ntemp: 20\n"
    );
    assert_eq!(
        received(&server, "rtm/subscribe")[0]["body"]["only"],
        "value_changes"
    );
    let r = run(rtm(&server, &["subscribe", "temp", "--only", "everything"]));
    assert_eq!(r.code, Some(4), "{r:?}");
}

#[test]
fn record_then_replay_gives_a_subscriber_the_same_messages() {
    let server = server();
    let dir = temp_dir("record-replay");
    let file = dir.join("recording.jsonl");
    let file_arg = file.to_str().expect("utf-8 path");
    let recorder = spawn(rtm(
        &server,
        &[
            "-v",
            "2",
            "record",
            "rec.a",
            "rec.b",
            "-o",
            file_arg,
            "--message_count_limit",
            "3",
            "--time_limit_in_seconds",
            "15",
        ],
    ));
    wait_subscribed(&server, &["rec.a", "rec.b"]);
    // Each message published once the recorder has written the one before (the lines
    // come in publishing order), between two readings of the clock: the recorded
    // timestamp must fall between them.
    let mut clock_around = Vec::new();
    for (n, (channel, message)) in [
        ("rec.a", r#"{"step":1,"é":2.50}"#),
        ("rec.b", r#""two""#),
        ("rec.a", "3"),
    ]
    .into_iter()
    .enumerate()
    {
        let before = unix_now();
        server.publish(channel, message).expect("publish");
        wait_until(&format!("the recorder to write message {}", n + 1), || {
            std::fs::read_to_string(&file).is_ok_and(|text| text.matches('\n').count() > n)
        });
        clock_around.push((before, unix_now()));
    }
    let recorded = ok(finish(recorder));
    for info in [
        "Log size limit: 3 messages",
        "Time limit: 15 seconds",
        "Message count limit reached",
        // Off a terminal the count is one plain summary line at -v 2.
        "recorded 3 messages in ",
    ] {
        assert!(recorded.stderr.contains(info), "{recorded:?}");
    }

    // satori-rtm-cli's lines: the data body as received plus a float timestamp.
    let text = std::fs::read_to_string(&file).expect("recording");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].starts_with(r#"{"subscription_id": "rec.a", "position": "#)
            && lines[0].contains(r#""messages": [{"step": 1, "\u00e9": 2.5}], "timestamp": "#),
        "{text}"
    );
    let records = json_lines(&text);
    let t: Vec<f64> = records
        .iter()
        .map(|r| r["timestamp"].as_f64().expect("float"))
        .collect();
    assert!(t[0] <= t[1] && t[1] <= t[2], "{t:?}");
    // The clock when the message came (a millisecond's room for the float's digits).
    for (t, (before, after)) in t.iter().zip(&clock_around) {
        assert!(
            before - 1e-3 <= *t && *t <= after + 1e-3,
            "recorded at {t}, received between {before} and {after}"
        );
    }
    let span = t[2] - t[0];

    // Replayed twice as fast to the recorded channels (the pace itself is checked on
    // gaps of a known length: `replay_keeps_the_recorded_gaps_divided_by_its_rate`).
    let subscriber = spawn(rtm(
        &server,
        &[
            "-v",
            "0",
            "subscribe",
            "rec.a",
            "rec.b",
            "--max",
            "3",
            "--timeout",
            "15",
        ],
    ));
    wait_subscribed(&server, &["rec.a", "rec.b"]);
    let started = Instant::now();
    let replayed = ok(run(rtm(
        &server,
        &["replay", "-i", file_arg, "--rate", "2x"],
    )));
    let took = started.elapsed();
    assert!(
        replayed.stderr.contains("Playback finished, total time: "),
        "{replayed:?}"
    );
    assert!(
        replayed.stderr.contains("Messages published: 3"),
        "{replayed:?}"
    );
    assert!(
        took >= Duration::from_secs_f64(span / 2.0),
        "replayed in {took:?}, recording spans {span} s"
    );
    assert_eq!(
        ok(finish(subscriber)).stdout,
        "rec.a: {\"step\": 1, \"\\u00e9\": 2.5}\nrec.b: \"two\"\nrec.a: 3\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn replay_keeps_the_recorded_gaps_divided_by_its_rate() {
    let server = server();
    // Three records 300 ms apart: 600 ms of recording, played in 300 ms at 2x.
    let spaced = "{\"subscription_id\": \"paced\", \"messages\": [1], \"timestamp\": 100.0}\n\
                  {\"subscription_id\": \"paced\", \"messages\": [2], \"timestamp\": 100.3}\n\
                  {\"subscription_id\": \"paced\", \"messages\": [3], \"timestamp\": 100.6}\n";
    let started = Instant::now();
    ok(run_with_stdin(
        rtm(&server, &["replay", "--rate", "2x"]),
        spaced,
    ));
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(300), "replayed in {took:?}");
    assert_eq!(
        history(&server, "paced", 3),
        ["paced: 1", "paced: 2", "paced: 3"]
    );
}

#[test]
fn satori_rtm_cli_recordings_replay_and_record_back_the_same() {
    let server = server();
    let dir = temp_dir("reference-recording");
    let file = write_file(&dir, "reference.jsonl", REFERENCE_RECORDING);
    // Record what the replay publishes: the same batches come back, byte for byte
    // except positions and timestamps (the server's and the clock's).
    let recorder = spawn(rtm(
        &server,
        &[
            "-v",
            "0",
            "record",
            "ch1",
            "ch2",
            "--message_count_limit",
            "5",
            "--time_limit_in_seconds",
            "15",
        ],
    ));
    wait_subscribed(&server, &["ch1", "ch2"]);
    ok(run(rtm(
        &server,
        &["replay", "-i", &file, "-r", "unlimited"],
    )));
    let recorded = ok(finish(recorder));
    let strip = |line: &str| -> String {
        let v: serde_json::Value = serde_json::from_str(line).expect("json");
        let messages = line
            .split_once(r#""messages": "#)
            .and_then(|(_, rest)| rest.rsplit_once(r#", "timestamp": "#))
            .map(|(m, _)| m.to_owned())
            .expect("messages then timestamp");
        format!("{} {messages}", v["subscription_id"])
    };
    let expected: Vec<String> = REFERENCE_RECORDING.lines().map(strip).collect();
    let mut got: Vec<String> = recorded.stdout.lines().map(strip).collect();
    // One PDU per publish here: the two-message batch comes back as two lines.
    assert_eq!(got.len(), 5, "{recorded:?}");
    let last = got.split_off(3);
    assert_eq!(got, expected[..3]);
    assert_eq!(
        last,
        [r#""ch1" [42]"#, r#""ch1" ["two messages in one batch"]"#]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn replay_reads_stdin_overrides_the_channel_and_loops() {
    let server = server();
    let dir = temp_dir("replay-options");
    // Records 1000 s apart: only `unlimited` plays them within the test's patience.
    let slow = "{\"subscription_id\": \"a\", \"messages\": [1], \"timestamp\": 0}\n\
                {\"subscription_id\": \"b\", \"messages\": [2, 3], \"timestamp\": 1000.0}\n";
    let subscriber = spawn(rtm(
        &server,
        &[
            "-v",
            "0",
            "subscribe",
            "merged",
            "--max",
            "3",
            "--timeout",
            "15",
        ],
    ));
    wait_subscribed(&server, &["merged"]);
    ok(run_with_stdin(
        rtm(
            &server,
            &[
                "replay",
                "--override_channel",
                "merged",
                "--rate",
                "unlimited",
            ],
        ),
        slow,
    ));
    assert_eq!(
        ok(finish(subscriber)).stdout,
        "merged: 1\nmerged: 2\nmerged: 3\n"
    );

    let file = write_file(&dir, "slow.jsonl", slow);
    let subscriber = spawn(rtm(
        &server,
        &[
            "-v",
            "0",
            "subscribe",
            "looped",
            "--max",
            "6",
            "--timeout",
            "15",
        ],
    ));
    wait_subscribed(&server, &["looped"]);
    let r = ok(run(rtm(
        &server,
        &[
            "replay",
            "-i",
            &file,
            "--loop",
            "2",
            "-r",
            "unlimited",
            "--override_channel",
            "looped",
        ],
    )));
    assert!(
        r.stderr.contains("Playback cycle finished, 1 to go"),
        "{r:?}"
    );
    assert!(r.stderr.contains("Messages published: 6"), "{r:?}");
    assert_eq!(
        ok(finish(subscriber)).stdout,
        "looped: 1\nlooped: 2\nlooped: 3\nlooped: 1\nlooped: 2\nlooped: 3\n"
    );
    // --loop 0 plays nothing; stdin cannot loop.
    let before = received(&server, "rtm/publish").len();
    ok(run(rtm(
        &server,
        &["replay", "-i", &file, "-l", "0", "-r", "unlimited"],
    )));
    assert_eq!(received(&server, "rtm/publish").len(), before);
    let r = run_with_stdin(rtm(&server, &["replay", "--loop", "2"]), slow);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("--loop needs --input_file"), "{r:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn replay_skips_lines_that_are_not_json_and_stops_at_a_bad_record() {
    let server = server();
    let r = ok(run_with_stdin(
        rtm(&server, &["replay", "-r", "unlimited"]),
        "garbage\n\n{\"subscription_id\": \"skips\", \"messages\": [1], \"timestamp\": 0}\n",
    ));
    assert!(r.stderr.contains("Bad line: garbage"), "{r:?}");
    assert_eq!(history(&server, "skips", 1), ["skips: 1"]);
    let r = run_with_stdin(
        rtm(&server, &["replay", "-r", "unlimited"]),
        "{\"subscription_id\": \"stops\", \"messages\": [1], \"timestamp\": 0}\n\
         {\"subscription_id\": \"stops\", \"messages\": [2]}\n\
         {\"subscription_id\": \"stops\", \"messages\": [3], \"timestamp\": 0}\n",
    );
    assert_eq!(r.code, Some(4), "{r:?}");
    assert!(
        r.stderr
            .contains("stdin:2: not a recording line: no \"timestamp\""),
        "{r:?}"
    );
    let sent = received(&server, "\"stops\"");
    assert_eq!(sent.len(), 1, "{sent:?}");
    // Rates are checked before connecting.
    for rate in ["0x", "fast", "-1x"] {
        let r = run(rtm(&server, &["replay", &format!("--rate={rate}")]));
        assert_eq!(r.code, Some(4), "{rate}: {r:?}");
    }
}

#[test]
fn benchlinks_earlier_spellings_still_work() {
    let server = server();
    let dir = temp_dir("old-spellings");
    let file = dir.join("old.jsonl");
    let file_arg = file.to_str().expect("utf-8 path");
    let recorder = spawn(rtm(
        &server,
        &[
            "--mode",
            "simple",
            "record",
            "old",
            "-o",
            file_arg,
            "--max",
            "2",
            "--duration",
            "15",
        ],
    ));
    wait_subscribed(&server, &["old"]);
    server.publish("old", "1").expect("publish");
    server.publish("old", "2").expect("publish");
    ok(finish(recorder));
    assert_eq!(
        json_lines(&std::fs::read_to_string(&file).expect("file")).len(),
        2
    );
    // The old positional file, --speed, --channel-prefix; and the old format.
    let copies = spawn(rtm(
        &server,
        &["subscribe", "copy.old", "--max", "3", "--timeout", "15"],
    ));
    wait_subscribed(&server, &["copy.old"]);
    ok(run(rtm(
        &server,
        &[
            "replay",
            file_arg,
            "--speed",
            "10",
            "--channel-prefix",
            "copy.",
        ],
    )));
    let old_format = write_file(
        &dir,
        "t_ms.jsonl",
        "{\"t_ms\":0,\"channel\":\"old\",\"message\":{\"n\":3}}\n",
    );
    ok(run(rtm(
        &server,
        &["replay", &old_format, "--channel-prefix", "copy."],
    )));
    assert_eq!(
        ok(finish(copies)).stdout,
        "copy.old: 1\ncopy.old: 2\ncopy.old: {\"n\": 3}\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
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

/// With `--jsonl`, an acknowledgement is printed as soon as it comes, while the input is
/// still open: a line typed gets its position back before the next one is typed (the
/// output is not held until a buffer fills or the input ends).
#[test]
fn publish_prints_each_acknowledgement_while_the_input_is_open() {
    let server = server();
    let mut command = rtm(&server, &["--jsonl", "publish", "live"]);
    command.stdin(Stdio::piped());
    let mut child = spawn(command);
    let mut stdin = child.stdin.take().expect("stdin");
    let mut printed = Lines::of(&mut child);
    let mut positions = Vec::new();
    for n in 0..3 {
        writeln!(stdin, "{{\"n\":{n}}}").expect("stdin");
        stdin.flush().expect("stdin");
        let ack: serde_json::Value = serde_json::from_str(&printed.next()).expect("a JSON line");
        assert_eq!(ack["channel"], "live", "{ack}");
        positions.push(ack["position"].as_str().expect("a position").to_owned());
    }
    drop(stdin);
    let run = finish(child);
    assert_eq!(run.code, Some(0), "{run:?}");
    let mut distinct = positions.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "{positions:?}");
    assert_eq!(history(&server, "live", 3).len(), 3);
}

#[test]
fn a_refused_publish_exits_1() {
    let server = server();
    let denied = run(rtm(&server, &["publish", "restricted.x", "1"]));
    assert_eq!(denied.code, Some(1), "{denied:?}");
    assert!(
        denied.stderr.contains("Publish failed: restricted.x"),
        "{denied:?}"
    );
    assert!(denied.stderr.contains("authorization_denied"), "{denied:?}");
    // Refused reads and subscriptions exit 1 too (satori-rtm-cli: 0 for a subscription).
    let r = run(rtm(&server, &["read", "restricted.x"]));
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("rtm/read operation failed: {"), "{r:?}");
    let r = run(rtm(&server, &["subscribe", "restricted.x"]));
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Subscription failed because: "), "{r:?}");
    // A server that never answers: the reply timeout, then exit 1.
    server
        .faults()
        .override_replies("rtm/write", ReplyOverride::Silence, Some(1));
    let r = run(rtm(&server, &["--reply-timeout", "0.3", "write", "k", "1"]));
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("rtm/write operation timed out"), "{r:?}");
}

#[test]
fn superuser_auth_opens_restricted_channels_and_a_bad_secret_exits_1() {
    let server = server();
    ok(run(rtm(
        &server,
        &[
            "-n",
            SUPERUSER_ROLE,
            "-s",
            SUPERUSER_SECRET,
            "publish",
            "restricted.x",
            "1",
        ],
    )));
    // benchlink's earlier spellings.
    ok(run(rtm(
        &server,
        &[
            "--role",
            SUPERUSER_ROLE,
            "--role-secret",
            SUPERUSER_SECRET,
            "publish",
            "restricted.x",
            "2",
        ],
    )));
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
    // An endpoint without an appkey: satori-rtm-cli's message, exit 1.
    let mut no_key = rtm(&server, &["read", "c"]);
    no_key
        .env_remove("BENCHLINK_RTM_APPKEY")
        .env_remove("SATORI_APPKEY");
    let r = run(no_key);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(r.stderr.contains("Missing --appkey parameter"), "{r:?}");
    // A role without its secret.
    let r = run(rtm(&server, &["--role_name", "x", "read", "c"]));
    assert_eq!(r.code, Some(1), "{r:?}");
    // A view needs exactly one subscription id.
    let r = run(rtm(
        &server,
        &["subscribe", "a", "b", "--filter", "select * from a"],
    ));
    assert_eq!(r.code, Some(1), "{r:?}");
    // Options where satori-rtm-cli does not take them either.
    for args in [
        &["publish", "c", "-j"][..],
        &["read", "c", "-q"],
        &["subscribe", "c", "-i", "f"],
    ] {
        let r = run(rtm(&server, args));
        assert_eq!(r.code, Some(1), "{args:?}: {r:?}");
    }
    // Invalid values.
    for args in [
        &["-d", "sometimes", "read", "c"][..],
        &["-v", "4", "read", "c"],
        &["record", "c", "--size_limit_in_bytes", "1.5k"],
        &["replay", "--loop", "twice"],
    ] {
        let r = run(rtm(&server, args));
        assert_eq!(r.code, Some(4), "{args:?}: {r:?}");
    }
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

#[test]
fn every_argument_has_a_description() {
    let server = server();
    let mut described = 0;
    for command in [
        "subscribe",
        "view",
        "publish",
        "read",
        "write",
        "delete",
        "record",
        "replay",
        "search",
    ] {
        let help = ok(run(rtm(&server, &[command, "--help"]))).stdout;
        let lines: Vec<&str> = help.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            // An argument's line ("  -j, --prettify_json", "  <KEY>"), then its text.
            let is_arg = line.starts_with("  ")
                && !line.starts_with("   ")
                && line.trim_start().starts_with(['-', '<', '[']);
            if is_arg {
                let next = lines.get(i + 1).copied().unwrap_or_default();
                assert!(
                    next.starts_with("          ") && !next.trim().is_empty(),
                    "{command}: {line:?} has no description:\n{help}"
                );
                described += 1;
            }
        }
    }
    assert!(described > 80, "{described}");
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
    let r = ok(run(rtm_unconfigured(
        &["--jsonl", "publish", "c", "1"],
        &home,
    )));
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

#[test]
fn the_config_file_sets_any_option_and_the_command_line_wins() {
    let server = server();
    let home = temp_dir("config-options");
    let config = |extra: &str| {
        write_file(
            &home,
            "rtm-cli.config",
            &format!(
                "endpoint = \"{}\"\nappkey = \"{DEFAULT_APPKEY}\"\nverbosity = 0\n\
                 prettify_json = true\ndelivery = \"reliable\"\ncount = 1\n{extra}",
                server.endpoint()
            ),
        )
    };
    server.publish("cfg", "1").expect("publish");
    server.publish("cfg", r#"{"last":true}"#).expect("publish");
    let file = config("");
    let r = ok(run(rtm_unconfigured(
        &[
            "-c",
            &file,
            "subscribe",
            "cfg",
            "--max",
            "1",
            "--timeout",
            "10",
        ],
        &home,
    )));
    assert_eq!(r.stdout, "cfg: {\n  \"last\": true\n}\n", "{r:?}");
    // Verbosity 0: only the file's echo.
    assert!(
        r.stderr
            .lines()
            .all(|l| l.starts_with("From config file: ")),
        "{r:?}"
    );
    let body = &received(&server, "rtm/subscribe")[0]["body"];
    assert_eq!(body["fast_forward"], true, "reliable: {body}");
    assert_eq!(body["history"], serde_json::json!({"count": 1}));
    // --age on the command line replaces the file's count instead of contradicting it.
    ok(run(rtm_unconfigured(
        &[
            "-c",
            &file,
            "subscribe",
            "cfg",
            "--age",
            "60",
            "--max",
            "2",
            "--timeout",
            "10",
        ],
        &home,
    )));
    let body = &received(&server, "rtm/subscribe")[1]["body"];
    assert_eq!(body["history"], serde_json::json!({"age": 60}));
    // Both in the file: refused like on the command line; a bad value exits 4.
    let file = config("age = 5\n");
    let r = run(rtm_unconfigured(&["-c", &file, "subscribe", "cfg"], &home));
    assert_eq!(r.code, Some(1), "{r:?}");
    let file = config("rate = \"fast\"\n");
    let r = run(rtm_unconfigured(&["-c", &file, "replay"], &home));
    assert_eq!(r.code, Some(4), "{r:?}");
    assert!(r.stderr.contains("config file: rate = fast"), "{r:?}");
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn endless_input_lines_are_refused_not_buffered() {
    let server = server();
    // 17 MiB without a newline: more than any line is allowed to be.
    let endless = "1".repeat(17 << 20);
    for args in [&["publish", "endless"][..], &["replay"]] {
        let r = run_with_stdin(rtm(&server, args), &endless);
        assert_eq!(r.code, Some(4), "{args:?}: {r:?}");
        assert!(r.stderr.contains("stdin:1: a line longer than"), "{r:?}");
    }
    assert!(received(&server, "rtm/publish").is_empty());
}

#[test]
fn a_dropped_connection_is_said_and_the_subscription_comes_back() {
    let server = server();
    let mut subscriber = spawn(rtm(
        &server,
        &["subscribe", "drops", "--max", "2", "--timeout", "15"],
    ));
    let mut printed = Lines::of(&mut subscriber);
    wait_subscribed(&server, &["drops"]);
    server.publish("drops", "1").expect("publish");
    // The first message is through once the command printed it; then cut.
    printed.wait_for("drops: 1");
    assert!(server.faults().drop_connections() >= 1);
    // Back on a second connection, subscribed again from where it was.
    assert!(
        server.wait_for_connections(PATIENCE, |c| c.len() == 2
            && c[1].open
            && c[1].subscriptions.iter().any(|s| s == "drops")),
        "never subscribed again: {:?}",
        server.connections()
    );
    server.publish("drops", "2").expect("publish");
    let r = ok(finish(subscriber));
    let stdout = printed.rest();
    assert_eq!(stdout, "drops: 1\ndrops: 2\n", "{stdout:?} {r:?}");
    let said: Vec<&str> = r.stderr.lines().collect();
    let connected = said.iter().filter(|l| **l == "Connected").count();
    let disconnected = said.iter().filter(|l| **l == "Disconnected").count();
    assert_eq!((connected, disconnected), (2, 2), "{r:?}");
    assert!(
        r.stderr.contains("Reconnecting: the connection was lost ("),
        "{r:?}"
    );
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
    let published = cbor(&[
        "--jsonl",
        "publish",
        "animals",
        r#"{"who": "zebra", "n": 1.5}"#,
    ]);
    assert_eq!(json_lines(&published.stdout)[0]["channel"], "animals");
    assert_eq!(
        ok(finish(subscriber)).stdout,
        "animals: {\"who\": \"zebra\", \"n\": 1.5}\n"
    );
    cbor(&["write", "kv", r#"{"v":[1,null]}"#]);
    assert_eq!(cbor(&["read", "kv"]).stdout, "{\"v\": [1, null]}\n");
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

/// Piping more lines than the client's queue holds (`--max-queue-size` requests waiting
/// for the connection or a reply; 8 here, so every run meets the bound) sends every one:
/// the command reads its input only as fast as the link drains, where it used to stop
/// with "request refused: too many requests waiting". Checked by the channel's sequence:
/// the server's own publish afterwards takes the next number.
#[test]
fn publish_waits_for_room_and_sends_every_line() {
    let server = server();
    const LINES: usize = 20_000;
    let input = "{\"a\":1}\n".repeat(LINES);
    for (args, channel) in [
        (
            &["--max-queue-size", "8", "publish", "-q", "fill.quiet"][..],
            "fill.quiet",
        ),
        (
            &["--max-queue-size", "8", "publish", "fill.acked"][..],
            "fill.acked",
        ),
    ] {
        let r = run_with_stdin(rtm(&server, args), &input);
        assert_eq!(r.code, Some(0), "{args:?}: {}", r.stderr);
        let next = server.publish(channel, "\"last\"").expect("a position");
        assert!(
            next.ends_with(&format!(":{LINES}")),
            "{args:?}: the next position is {next}, so not every line arrived"
        );
    }
}

/// The acknowledged pipeline is as deep as `--max-queue-size`, not a constant: against a
/// server that stops acknowledging, exactly that many publishes go out, then the command
/// gives up once the oldest waited `--reply-timeout`, and says how many were waiting.
#[test]
fn the_publish_window_is_max_queue_size() {
    let server = server();
    server
        .faults()
        .override_replies("rtm/publish", ReplyOverride::Silence, None);
    let input = "{\"a\":1}\n".repeat(100);
    let args = [
        "--max-queue-size",
        "7",
        "--reply-timeout",
        "0.5",
        "publish",
        "deep",
    ];
    let r = run_with_stdin(rtm(&server, &args), &input);
    assert_eq!(r.code, Some(1), "{r:?}");
    assert!(
        r.stderr.contains("7 publishes remain unacked"),
        "{}",
        r.stderr
    );
    let published = server
        .connections()
        .iter()
        .flat_map(|c| c.received.iter())
        .filter(|p| p.contains("\"rtm/publish\""))
        .count();
    assert_eq!(published, 7, "the pipeline's depth");
}

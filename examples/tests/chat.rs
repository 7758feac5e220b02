//! The chat examples side by side with their Python originals: the Rust ports
//! (`chat-bot`, `chat`) and the reference SDK's `bot.py` and `interactive.py` (unmodified
//! copies in `examples/reference-chat/`, run by the SDK 1.5.0 of `BENCHLINK_PY_SDK`) each
//! chat in a channel of their own on one local hub, while a Rust client subscribed to
//! that channel before the program started records what it published. Both sides must
//! publish the same messages and print the same lines. The reference SDK's own test of
//! the examples (alice and bob in one channel) runs with a Rust alice and a Python bob;
//! the port's `/emulate_disconnect`, and the original's failure there, have a test each.
//!
//! The Python examples import `test.utils.get_test_endpoint_and_appkey` (the SDK test
//! suite's, which reads `credentials.json`): the test writes a `test/utils.py` of that
//! name, and the hub's `credentials.json`, into a temporary directory that is the
//! script's working directory and is on its `PYTHONPATH`.
//!
//! Without `BENCHLINK_PY_SDK` the Python halves are skipped with a notice, except under
//! `CI`, where that is a failure (as in `tests/tests/py_sdk`). Every wait is on an event
//! (a line of output, an exit, a message); [`PATIENCE`] only bounds a hang.
//!
//! ```text
//! export BENCHLINK_PY_SDK="$(bash .ci/python-sdk)"
//! cargo test -p benchlink-examples --test chat
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use benchlink_sandbox::rtm::{RtmServer, RtmServerConfig, DEFAULT_APPKEY};
use benchlink_std::rtm::{
    Client, ClientOptions, Mode, SubscribeOptions, SubscriptionData, SubscriptionObserver,
};

/// The guard against a hang: any one wait (a line, an exit, a message).
const PATIENCE: Duration = Duration::from_secs(60);

/// The venv's python, or `None` after a notice when the SDK is not installed and this is
/// not CI (under CI: a failure saying what is missing).
fn python() -> Option<PathBuf> {
    let path = benchlink_tests::reference_sdk("the chat examples (examples/tests/chat.rs)")?;
    for module in ["satori.rtm.client", "six"] {
        let ok = Command::new(&path)
            .args(["-c", &format!("import {module}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "{} cannot import {module}, which the reference chat examples need; run `bash \
             .ci/python-sdk`",
            path.display()
        );
    }
    Some(path)
}

/// The reference SDK's chat examples, as published (BSD licence beside them).
fn reference(script: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("reference-chat")
        .join(script);
    assert!(path.exists(), "{} is missing", path.display());
    path
}

/// A fresh channel name per use, so that runs never share one.
fn channel(what: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "chat-{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A directory that holds the Python examples' `test/utils.py` stand-in and the hub's
/// `credentials.json`; removed when dropped.
struct Shim(PathBuf);

impl Shim {
    fn new(endpoint: &str) -> Shim {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "benchlink-chat-shim-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(dir.join("test")).expect("shim dir");
        // A package of its own: on PYTHONPATH it comes before the standard library's
        // `test` package.
        std::fs::write(dir.join("test/__init__.py"), "").expect("shim");
        std::fs::write(
            dir.join("test/utils.py"),
            "# The reference SDK test suite's get_test_endpoint_and_appkey, for its chat\n\
             # examples: the endpoint and appkey of the test's hub, from credentials.json.\n\
             import json\n\n\n\
             def get_test_endpoint_and_appkey(config_path='credentials.json'):\n\
             \x20   with open(config_path) as f:\n\
             \x20       creds = json.load(f)\n\
             \x20   return creds['endpoint'], creds['appkey']\n",
        )
        .expect("shim");
        let credentials = serde_json::json!({"endpoint": endpoint, "appkey": DEFAULT_APPKEY});
        std::fs::write(dir.join("credentials.json"), credentials.to_string()).expect("shim");
        Shim(dir)
    }
}

impl Drop for Shim {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How to start one side's program.
enum Side<'a> {
    Rust { hub: &'a RtmServer },
    Python { python: &'a Path, shim: &'a Shim },
}

impl Side<'_> {
    fn name(&self) -> &'static str {
        match self {
            Side::Rust { .. } => "rust",
            Side::Python { .. } => "python",
        }
    }

    /// `bot` (`chat-bot` / `bot.py`) or `interactive` (`chat` / `interactive.py`).
    fn spawn(&self, program: &str, args: &[&str]) -> Proc {
        let mut command = match self {
            Side::Rust { hub } => {
                let bin = match program {
                    "bot" => env!("CARGO_BIN_EXE_chat-bot"),
                    _ => env!("CARGO_BIN_EXE_chat"),
                };
                let mut c = Command::new(bin);
                c.args(["--endpoint", &hub.endpoint(), "--appkey", DEFAULT_APPKEY]);
                c
            }
            Side::Python { python, shim } => {
                let mut c = Command::new(python);
                c.arg(reference(&format!("{program}.py")))
                    .current_dir(&shim.0)
                    .env("PYTHONPATH", &shim.0)
                    .env("PYTHONUNBUFFERED", "1")
                    .env("PYTHONDONTWRITEBYTECODE", "1");
                c
            }
        };
        command
            .args(args)
            .env_remove("BENCHLINK_RTM_ENDPOINT")
            .env_remove("BENCHLINK_RTM_APPKEY");
        Proc::spawn(command)
    }
}

/// A running program: its stdout lines arrive on a channel, its stderr is kept for
/// failure messages; killed when dropped.
struct Proc {
    command: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    seen: Vec<String>,
    stderr: Arc<Mutex<String>>,
}

impl Proc {
    fn spawn(mut command: Command) -> Proc {
        let text = format!("{command:?}");
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {text}: {e}"));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let lines = benchlink_tests::lines_of(stdout);
        let (stderr, _) = benchlink_tests::gather(child.stderr.take().expect("stderr"));
        Proc {
            command: text,
            child,
            stdin,
            lines,
            seen: Vec::new(),
            stderr,
        }
    }

    fn fail(&mut self, why: &str) -> ! {
        let _ = self.child.kill();
        let status = self.child.wait();
        // What is left of the output, for a short while.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(500)) {
            self.seen.push(line);
        }
        let stderr = self
            .stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        panic!(
            "{why}\n--- command: {}\n--- exit: {status:?}\n--- stdout:\n{}\n--- stderr:\n{stderr}",
            self.command,
            self.seen.join("\n")
        )
    }

    /// The next stdout line, or `None` at its end.
    fn next_line(&mut self) -> Option<String> {
        match self.lines.recv_timeout(PATIENCE) {
            Ok(line) => {
                self.seen.push(line.clone());
                Some(line)
            }
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => self.fail("no output for too long"),
        }
    }

    /// Waits for the next stdout line and checks that it is `want`.
    fn expect_line(&mut self, want: &str) {
        match self.next_line() {
            Some(line) if line == want => {}
            Some(line) => self.fail(&format!("expected the line {want:?}, got {line:?}")),
            None => self.fail(&format!("the output ended before {want:?}")),
        }
    }

    fn say(&mut self, line: &str) {
        let pipe = self.stdin.as_mut().expect("stdin");
        if let Err(e) = pipe.write_all(format!("{line}\n").as_bytes()) {
            self.fail(&format!("writing {line:?} to stdin: {e}"));
        }
        let _ = pipe.flush();
    }

    /// Reads stdout to its end and waits for the exit; returns every stdout line and the
    /// exit status.
    fn finish(mut self) -> (Vec<String>, ExitStatus) {
        drop(self.stdin.take());
        while self.next_line().is_some() {}
        let deadline = Instant::now() + PATIENCE;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return (std::mem::take(&mut self.seen), status),
                Ok(None) if Instant::now() >= deadline => self.fail("it did not exit"),
                // Stdout is closed: the exit is a moment away.
                Ok(None) => thread::sleep(Duration::from_millis(10)),
                Err(e) => self.fail(&format!("waiting for it: {e}")),
            }
        }
    }

    /// [`Proc::finish`] for a program that must succeed.
    fn finish_ok(self) -> Vec<String> {
        let stderr = Arc::clone(&self.stderr);
        let command = self.command.clone();
        let (lines, status) = self.finish();
        assert!(
            status.success(),
            "{command}: {status}\n--- stdout:\n{}\n--- stderr:\n{}",
            lines.join("\n"),
            stderr.lock().unwrap_or_else(PoisonError::into_inner)
        );
        lines
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends each received message's JSON text.
struct Record {
    subscribed: mpsc::Sender<()>,
    messages: mpsc::Sender<String>,
}

impl SubscriptionObserver for Record {
    fn on_enter_subscribed(&mut self) {
        let _ = self.subscribed.send(());
    }
    fn on_subscription_data(&mut self, data: &SubscriptionData) {
        for m in data.messages() {
            let _ = self.messages.send(m.to_owned());
        }
    }
}

/// A Rust client subscribed to a channel (before the program under test starts), which
/// records what is published there.
struct Observer {
    client: Client,
    channel: String,
    messages: Receiver<String>,
}

impl Observer {
    fn new(hub: &RtmServer, channel: &str) -> Observer {
        let client =
            Client::new(ClientOptions::new(hub.endpoint(), DEFAULT_APPKEY)).expect("client");
        client.start().expect("start");
        let (subscribed, on_subscribed) = mpsc::channel();
        let (tx, messages) = mpsc::channel();
        client
            .subscribe(
                channel,
                Mode::Reliable,
                Record {
                    subscribed,
                    messages: tx,
                },
                SubscribeOptions::default(),
            )
            .expect("subscribe");
        on_subscribed
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|e| panic!("the observer's subscription to {channel}: {e}"));
        Observer {
            client,
            channel: channel.to_owned(),
            messages,
        }
    }

    /// The next `n` messages published to the channel, decoded (the chats publish JSON
    /// strings).
    fn take(&self, n: usize) -> Vec<serde_json::Value> {
        (0..n)
            .map(|i| {
                let m = self.messages.recv_timeout(PATIENCE).unwrap_or_else(|e| {
                    panic!("message {} of {n} on {}: {e}", i + 1, self.channel)
                });
                serde_json::from_str(&m).unwrap_or_else(|e| panic!("{m}: {e}"))
            })
            .collect()
    }

    /// Nothing more was published (checked after a round trip of the observer's own: a
    /// publish of its own that comes back to it).
    fn nothing_more(&self) {
        self.client
            .publish_sync(&self.channel, &"(end)", PATIENCE)
            .expect("publish the end marker");
        let next = self
            .messages
            .recv_timeout(PATIENCE)
            .expect("the end marker");
        assert_eq!(next, "\"(end)\"", "more was published to {}", self.channel);
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        let _ = self.client.dispose();
    }
}

/// What a chat prints for its own run, split at the one line that may race: the
/// deterministic lines, and whether the trailing "left" line came.
///
/// A chat prints every message of its channel until it is unsubscribed, and unsubscribes
/// only after its "left" publish is acknowledged. Whether that message reaches it first is
/// up to the server: the protocol does not order a publisher's acknowledgement against
/// the delivery of its message to the publisher's own subscription (this hub queues the
/// delivery first, so here it always comes; a real server may acknowledge first and drop
/// the message with the subscription). Everything before it was acknowledged, and so
/// delivered, while the chat was still subscribed and still running, and the chat waited
/// for each acknowledgement before the next publish: those lines and their order are
/// deterministic, and only they are asserted; the "left" line may only be the last line.
fn split_left(program: &str, lines: &[String], left: &str) -> (Vec<String>, bool) {
    match lines.split_last() {
        Some((last, before)) if last == left => (before.to_vec(), true),
        _ => {
            assert!(
                !lines.iter().any(|l| l == left),
                "{program}: {left:?} is not the last line: {lines:?}"
            );
            (lines.to_vec(), false)
        }
    }
}

fn strings(lines: &[&str]) -> Vec<serde_json::Value> {
    lines.iter().map(|l| serde_json::json!(l)).collect()
}

/// One bot run with chattiness 0: what it published (recorded by the observer) and what
/// it printed.
fn bot_run(side: &Side<'_>, hub: &RtmServer) -> (Vec<serde_json::Value>, Vec<String>, bool) {
    let channel = channel(&format!("bot-{}", side.name()));
    let observer = Observer::new(hub, &channel);
    let printed = side.spawn("bot", &["bot", &channel, "0"]).finish_ok();
    let published = observer.take(4);
    observer.nothing_more();
    let (printed, left) = split_left(side.name(), &printed, "bot left the channel");
    (published, printed, left)
}

#[test]
fn bots_publish_and_print_the_same() {
    let hub = RtmServer::start(RtmServerConfig::default()).expect("hub");
    let python = python();
    let want_published = strings(&[
        "bot joined the channel",
        "bot> Hi!",
        "bot> Bye.",
        "bot left the channel",
    ]);
    let want_printed = ["bot joined the channel", "bot> Hi!", "bot> Bye."];

    let rust = bot_run(&Side::Rust { hub: &hub }, &hub);
    assert_eq!(rust.0, want_published, "what chat-bot published");
    assert_eq!(rust.1, want_printed, "what chat-bot printed");
    println!("rust bot: the last line, \"left\", was printed: {}", rust.2);

    if let Some(python) = python {
        let shim = Shim::new(&hub.endpoint());
        let py = bot_run(
            &Side::Python {
                python: &python,
                shim: &shim,
            },
            &hub,
        );
        assert_eq!(py.0, rust.0, "bot.py and chat-bot published differently");
        assert_eq!(py.1, rust.1, "bot.py and chat-bot printed differently");
        println!("python bot: the last line, \"left\", was printed: {}", py.2);
    }
    hub.shutdown();
}

/// The interactive chat driven through stdin: a message of another client (a JSON
/// object, which Python prints as its `repr`), two lines, `/quit`. Returns what it
/// printed before the racy "left" line.
fn interactive_run(side: &Side<'_>, hub: &RtmServer) -> Vec<String> {
    let channel = channel(&format!("interactive-{}", side.name()));
    let observer = Observer::new(hub, &channel);
    let mut chat = side.spawn("interactive", &["alice", &channel]);
    chat.expect_line("alice joined the channel");
    observer
        .client
        .publish_json(
            &channel,
            r#"{"who":"zebra","n":[1,2.5,null,true,false,1e-7],"q":"it's"}"#,
            None,
        )
        .expect("publish an object");
    chat.expect_line(r#"{'who': 'zebra', 'n': [1, 2.5, None, True, False, 1e-07], 'q': "it's"}"#);
    chat.say("Hello there");
    chat.expect_line("alice> Hello there");
    chat.say("second line, with 'quotes'");
    chat.expect_line("alice> second line, with 'quotes'");
    chat.say("/quit");
    let printed = chat.finish_ok();
    let published = observer.take(5);
    assert_eq!(
        published[0..1],
        strings(&["alice joined the channel"])[..],
        "{}",
        side.name()
    );
    assert_eq!(
        published[2..],
        strings(&[
            "alice> Hello there",
            "alice> second line, with 'quotes'",
            "alice left the channel"
        ])[..],
        "{}",
        side.name()
    );
    observer.nothing_more();
    split_left(side.name(), &printed, "alice left the channel").0
}

#[test]
fn interactive_chats_say_and_print_the_same() {
    let hub = RtmServer::start(RtmServerConfig::default()).expect("hub");
    let python = python();
    let rust = interactive_run(&Side::Rust { hub: &hub }, &hub);
    assert_eq!(rust.len(), 4, "{rust:?}");
    if let Some(python) = python {
        let shim = Shim::new(&hub.endpoint());
        let py = interactive_run(
            &Side::Python {
                python: &python,
                shim: &shim,
            },
            &hub,
        );
        assert_eq!(py, rust, "interactive.py and chat printed differently");
    }
    hub.shutdown();
}

/// The port's `/emulate_disconnect` (a stop and a start; see `src/bin/chat.rs`): the
/// connection is replaced, the subscription restored, the join announced again, and the
/// chat goes on. Rust only: the Python original fails there with the SDK 1.5.0 (its
/// `Client` has no `connection`).
#[test]
fn emulate_disconnect_reconnects_and_rejoins() {
    let hub = RtmServer::start(RtmServerConfig::default()).expect("hub");
    let channel = channel("disconnect");
    let observer = Observer::new(&hub, &channel);
    let mut chat = Side::Rust { hub: &hub }.spawn("interactive", &["carol", &channel]);
    chat.expect_line("carol joined the channel");
    let connections = hub.attempts().len();
    chat.say("/emulate_disconnect");
    chat.expect_line("carol joined the channel");
    assert!(
        hub.attempts().len() > connections,
        "no new connection after /emulate_disconnect"
    );
    chat.say("still here");
    chat.expect_line("carol> still here");
    chat.say("/quit");
    chat.finish_ok();
    assert_eq!(
        observer.take(4),
        strings(&[
            "carol joined the channel",
            "carol joined the channel",
            "carol> still here",
            "carol left the channel",
        ])
    );
    observer.nothing_more();
    hub.shutdown();
}

/// Both print the Python usage line on stdout and exit 1 on a wrong number of arguments.
#[test]
fn usage_errors_match() {
    let hub = RtmServer::start(RtmServerConfig::default()).expect("hub");
    let python = python();
    let shim = Shim::new(&hub.endpoint());
    let mut sides = vec![Side::Rust { hub: &hub }];
    if let Some(python) = &python {
        sides.push(Side::Python {
            python,
            shim: &shim,
        });
    }
    for side in &sides {
        for (program, args, usage) in [
            ("bot", &["bot", "ch"][..], "<name> <channel> <chattiness>"),
            ("interactive", &["alice"][..], "<name> <channel>"),
        ] {
            let (lines, status) = side.spawn(program, args).finish();
            assert_eq!(
                status.code(),
                Some(1),
                "{} {program}: {lines:?}",
                side.name()
            );
            let [line] = &lines[..] else {
                panic!("{} {program}: {lines:?}", side.name())
            };
            assert!(
                line.starts_with("Usage: ") && line.ends_with(&format!(" {usage}")),
                "{} {program}: {line:?}",
                side.name()
            );
        }
    }
    hub.shutdown();
}

/// The Python original's `/emulate_disconnect` with the SDK 1.5.0, for the record (the
/// port's comment says it): `platform.connection` does not exist there, so the command
/// raises `AttributeError`; the chat still leaves (`in_chat`'s `finally`) and the program
/// exits 1.
#[test]
fn python_emulate_disconnect_fails_on_sdk_1_5_0() {
    let Some(python) = python() else { return };
    let hub = RtmServer::start(RtmServerConfig::default()).expect("hub");
    let shim = Shim::new(&hub.endpoint());
    let channel = channel("disconnect-python");
    let observer = Observer::new(&hub, &channel);
    let mut chat = Side::Python {
        python: &python,
        shim: &shim,
    }
    .spawn("interactive", &["dave", &channel]);
    chat.expect_line("dave joined the channel");
    chat.say("/emulate_disconnect");
    let stderr = Arc::clone(&chat.stderr);
    let (_, status) = chat.finish();
    let stderr = stderr
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("AttributeError: 'Client' object has no attribute 'connection'"),
        "{stderr}"
    );
    assert_eq!(
        observer.take(2),
        strings(&["dave joined the channel", "dave left the channel"])
    );
    observer.nothing_more();
    hub.shutdown();
}

/// The reference SDK's own test of these examples (`test/chat_example.py`), with alice
/// the Rust `chat` and bob the Python `interactive.py` in one channel: each sees the
/// other's join and lines, and bob sees alice leave (he is still subscribed, so that line
/// does not race).
#[test]
fn rust_and_python_chat_together() {
    let Some(python) = python() else { return };
    let hub = RtmServer::start(RtmServerConfig::default()).expect("hub");
    let shim = Shim::new(&hub.endpoint());
    let channel = channel("together");
    let mut alice = Side::Rust { hub: &hub }.spawn("interactive", &["alice", &channel]);
    alice.expect_line("alice joined the channel");
    let mut bob = Side::Python {
        python: &python,
        shim: &shim,
    }
    .spawn("interactive", &["bob", &channel]);
    for person in [&mut alice, &mut bob] {
        person.expect_line("bob joined the channel");
    }
    alice.say("Hi!");
    for person in [&mut alice, &mut bob] {
        person.expect_line("alice> Hi!");
    }
    bob.say("Welcome!");
    for person in [&mut alice, &mut bob] {
        person.expect_line("bob> Welcome!");
    }
    alice.say("kthxbye");
    for person in [&mut alice, &mut bob] {
        person.expect_line("alice> kthxbye");
    }
    alice.say("/quit");
    bob.expect_line("alice left the channel");
    bob.say("oh well");
    bob.expect_line("bob> oh well");
    bob.say("/quit");
    alice.finish_ok();
    bob.finish_ok();
    hub.shutdown();
}

//! The Python side of the interop tests: finding the reference SDK's venv and running
//! the scripts of `tests/interop/` under deadlines (shared by `interop_python.rs` and
//! `interop_cbor.rs`).
//!
//! Without `BENCHLINK_PY_SDK` the tests fail when `CI` is set (interop must not be skipped
//! silently there) and print a notice and pass otherwise.
//!
//! Every Python process is bounded twice: the script's own `--timeout` (with a watchdog
//! that ends it) and a deadline here after which it is killed. A failure prints the
//! script's command line, what it printed and its stderr.

// Each test crate that includes this module uses a part of it.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use benchlink_sandbox::rtm::{RtmServer, DEFAULT_APPKEY};
use serde_json::{json, Value};

/// What each script is given as its `--timeout`.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(12);
/// After this the driver kills a script (its own watchdog fires at timeout + 2 s).
const KILL_AFTER: Duration = Duration::from_secs(16);
/// How long an exited script's output pipes may take to reach their end.
const DRAIN: Duration = Duration::from_secs(5);

/// The venv's python, or `None` (after a notice) when the SDK is not installed and this
/// is not CI.
pub fn python() -> Option<PathBuf> {
    benchlink_tests::reference_sdk("the Python SDK interop tests")
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("interop")
        .join(name)
}

/// A running interop script: its JSON stdout lines arrive on a channel, its stderr is
/// collected for failure messages, and it is killed when dropped.
pub struct Py {
    command: String,
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
    stderr: Arc<Mutex<String>>,
    /// Disconnected once the stderr reader has read everything (the pipe closed).
    stderr_done: Receiver<()>,
    deadline: Instant,
    reported: bool,
}

impl Py {
    /// Starts `tests/interop/<name>` with the common arguments plus `extra`, writing
    /// `stdin` (one JSON value per line) to it.
    pub fn spawn(
        python: &Path,
        name: &str,
        server: &RtmServer,
        channel: &str,
        extra: &[&str],
        stdin: &[Value],
    ) -> Py {
        let timeout = SCRIPT_TIMEOUT.as_secs().to_string();
        let endpoint = server.endpoint();
        let mut args = vec![
            "--endpoint",
            endpoint.as_str(),
            "--appkey",
            DEFAULT_APPKEY,
            "--channel",
            channel,
            "--timeout",
            timeout.as_str(),
        ];
        args.extend_from_slice(extra);
        let path = script(name);
        let command = format!("{} {} {}", python.display(), path.display(), args.join(" "));
        let mut child = Command::new(python)
            .arg(&path)
            .args(&args)
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning `{command}`: {e}"));
        let input: String = stdin.iter().map(|v| format!("{v}\n")).collect();
        let mut pipe = child.stdin.take().expect("stdin");
        thread::spawn(move || {
            let _ = pipe.write_all(input.as_bytes());
        });
        let lines = benchlink_tests::lines_of(child.stdout.take().expect("stdout"));
        let (stderr, stderr_done) = benchlink_tests::gather(child.stderr.take().expect("stderr"));
        Py {
            command,
            child,
            lines,
            seen: Vec::new(),
            stderr,
            stderr_done,
            deadline: Instant::now() + KILL_AFTER,
            reported: false,
        }
    }

    /// The command line, what the script printed and its stderr; called once the script
    /// has exited: waits until the reader threads reach the end of its pipes (for a few
    /// seconds at most, should something else hold them open).
    pub fn transcript(&mut self) -> String {
        let deadline = Instant::now() + DRAIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    self.seen.push("(stdout still open)".to_owned());
                    break;
                }
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let open = matches!(
            self.stderr_done.recv_timeout(left),
            Err(RecvTimeoutError::Timeout)
        );
        let mut stderr = self
            .stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if open {
            stderr.push_str("(stderr still open)");
        }
        format!(
            "--- command: {}\n--- stdout:\n{}\n--- stderr:\n{stderr}",
            self.command,
            self.seen.join("\n"),
        )
    }

    /// Fails the test with everything the script said.
    pub fn fail(&mut self, why: &str) -> ! {
        let _ = self.child.kill();
        let status = self.child.wait();
        self.reported = true;
        panic!("{why}\n--- exit: {status:?}\n{}", self.transcript())
    }

    /// The next stdout line as JSON, or `None` at end of output; fails at the deadline.
    pub fn next(&mut self) -> Option<Value> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) => {
                self.seen.push(line.clone());
                match serde_json::from_str(&line) {
                    Ok(v) => Some(v),
                    Err(e) => self.fail(&format!("stdout line is not JSON ({e}): {line}")),
                }
            }
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => self.fail("the script ran past its deadline"),
        }
    }

    /// Waits for the line `{"event": event, …}`, failing on an `error` event or the end.
    pub fn expect(&mut self, event: &str) -> Value {
        loop {
            match self.next() {
                Some(v) if v["event"] == event => return v,
                Some(v) if v["event"] == "error" => {
                    self.fail(&format!("the script failed while we waited for `{event}`"))
                }
                Some(_) => {}
                None => self.fail(&format!("the script ended without printing `{event}`")),
            }
        }
    }

    /// Reads the rest of stdout and waits for a successful exit; returns the events.
    pub fn finish(mut self) -> Vec<Value> {
        let mut events = Vec::new();
        while let Some(v) = self.next() {
            events.push(v);
        }
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => {
                    // Shown by the test harness only if the test fails later.
                    println!("{}", self.transcript());
                    self.reported = true;
                    return events;
                }
                Ok(Some(status)) => self.fail(&format!("the script exited with {status}")),
                Ok(None) if Instant::now() >= self.deadline => {
                    self.fail("the script did not exit before its deadline")
                }
                Ok(None) => thread::sleep(Duration::from_millis(20)),
                Err(e) => self.fail(&format!("waiting for the script: {e}")),
            }
        }
    }

    /// Like [`Py::finish`], for a script that must fail: returns its stdout events.
    pub fn finish_failing(mut self) -> Vec<Value> {
        let mut events = Vec::new();
        while let Some(v) = self.next() {
            events.push(v);
        }
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => {
                    self.fail("the script succeeded but should have failed")
                }
                Ok(Some(_)) => {
                    println!("{}", self.transcript());
                    self.reported = true;
                    return events;
                }
                Ok(None) if Instant::now() >= self.deadline => {
                    self.fail("the script did not exit before its deadline")
                }
                Ok(None) => thread::sleep(Duration::from_millis(20)),
                Err(e) => self.fail(&format!("waiting for the script: {e}")),
            }
        }
    }
}

impl Drop for Py {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if thread::panicking() && !self.reported {
            println!(
                "a Python script was running when the test failed:\n{}",
                self.transcript()
            );
        }
    }
}

/// The `message` members of the `message` events, in order.
pub fn messages_of(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["event"] == "message")
        .map(|e| e["message"].clone())
        .collect()
}

/// Every kind of JSON value (as in the SDK's `message_types.py`), non-ASCII and escapes
/// included.
pub fn message_types() -> Vec<Value> {
    vec![
        Value::Null,
        json!(42),
        json!(-7),
        json!(0),
        json!(9_007_199_254_740_993_u64),
        json!(0.1),
        json!(6.022_140_76e23),
        json!(-0.5),
        json!(1e-7),
        json!(2.5e100),
        json!(""),
        json!("hello"),
        json!("Привет, мир! Ёжик"),
        json!("quotes \" and 'single' and \\ backslash / slash"),
        json!("control \n\t\r\u{1} chars"),
        json!("emoji 🎉 and 中文 and é"),
        json!(true),
        json!(false),
        json!([]),
        json!({}),
        json!([1, "two", 3.5, null, [true, [false]], {"k": []}]),
        json!({"a": {"b": {"c": [1, {"d": "е"}]}}, "ключ": "значение", "e": null, "q\"k": 1}),
    ]
}

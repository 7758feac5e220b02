//! A headless browser for tests: Debian's `chromium`, driven over the Chrome DevTools
//! Protocol (CDP) from blocking Rust, so that a `#[test]` can open a page the code under
//! test serves, wait for what it draws, read it back with JavaScript, move the mouse over
//! it, take a screenshot and check that nothing went wrong on the page (console errors,
//! uncaught exceptions, failed loads) or went to another origin.
//!
//! The CDP client is a small one of our own over `tungstenite` (already the workspace's
//! reference WebSocket) and `serde_json`: one WebSocket per page, commands answered in
//! line, and every event read on the way recorded into the page's log. The crates that
//! wrap CDP bring a second `tungstenite`, generated bindings for the whole protocol and,
//! without their default features, a download of the protocol at build time; the dozen
//! commands a test needs are not worth that.
//!
//! Nothing here sleeps to synchronise: the browser says when it listens (its stderr),
//! when a page has loaded (a lifecycle event of that navigation), and [`Page::wait_for`]
//! waits inside the page, on DOM mutations and animation frames. Every wait has a
//! deadline, only as a guard against a hung browser; the error then says what was
//! awaited.
//!
//! [`require`] is the entry point of a test: it gives a running [`Browser`], or, where
//! chromium is missing, fails the test under CI and skips it (saying why) elsewhere.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::io::{self, BufRead, BufReader, Cursor, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tungstenite::{Message, WebSocket};

/// How long chromium may take to start listening: a cold start on a loaded 2-core
/// machine (the test suite builds and runs beside it) takes seconds, not minutes.
const START_GUARD: Duration = Duration::from_secs(60);
/// The guard on one CDP command (and on [`Page::eval`], promises included): generous, as
/// a guard should be; a command that takes this long means the browser is stuck.
const COMMAND_GUARD: Duration = Duration::from_secs(30);
/// The guard on a navigation, from `Page.navigate` to the load event.
const LOAD_GUARD: Duration = Duration::from_secs(30);
/// How long the browser gets to close by itself on drop before it is killed.
const CLOSE_GUARD: Duration = Duration::from_secs(10);

/// The names chromium goes by, in the order they are tried on `PATH`: Debian's package
/// installs `chromium`; the others are what other systems call the same browser.
const NAMES: [&str; 4] = [
    "chromium",
    "chromium-browser",
    "google-chrome-stable",
    "google-chrome",
];

/// A running headless chromium with a throw-away profile, for one test.
///
/// Dropping it closes the browser (`Browser.close`, then a kill if it does not go within
/// a guard), waits for the process and removes the profile, so a test leaves no process
/// and no directory behind, whether it passes or panics. Each test launches its own:
/// tests run in parallel threads, and a browser shared between them would mix their
/// pages' logs.
pub struct Browser {
    /// The browser-wide CDP connection: opens and closes tabs. A mutex so that
    /// [`Browser::open`] takes `&self` and pages can borrow the browser.
    conn: Mutex<Conn>,
    /// `127.0.0.1:port` of the DevTools endpoint, where each page gets its own WebSocket.
    addr: SocketAddr,
    /// Declared last, so dropped last: the process is killed and the profile removed only
    /// after the connection is closed.
    process: Process,
}

/// Why [`Browser`] could not start, kept apart so that [`require`] can tell a machine
/// without chromium (install it) from a chromium that fails (a bug to look at).
enum LaunchError {
    NotFound,
    Failed(String),
}

impl Browser {
    /// Starts chromium headless (`--headless=new`) on a fresh temporary profile, with
    /// DevTools on a free loopback port (`--remote-debugging-port=0`, read back from its
    /// stderr), `--no-sandbox` when running as root (the sandbox refuses root, as in a
    /// container), and the background services that would reach the network off, so the
    /// only requests are those the pages make.
    ///
    /// `BENCHLINK_CHROMIUM`, when set, is the executable to run instead of the first of
    /// `chromium`, `chromium-browser`, `google-chrome-stable`, `google-chrome` on `PATH`.
    pub fn launch() -> Result<Browser, String> {
        launch().map_err(|e| match e {
            LaunchError::NotFound => not_found_message(),
            LaunchError::Failed(why) => why,
        })
    }

    /// Opens a new tab with a `width` × `height` CSS-pixel viewport (device scale factor
    /// 1, so screenshots have exactly that many pixels), navigates it to `url` and returns
    /// once that navigation's load event has fired. A navigation the browser reports as
    /// failed (connection refused, bad URL) is an `Err` with its text.
    ///
    /// The page records console errors and requests from before the navigation starts,
    /// so [`Page::console_errors`] and [`Page::requested_urls`] see everything the page
    /// did.
    pub fn open(&self, url: &str, (width, height): (u32, u32)) -> Result<Page<'_>, String> {
        let target = self
            .call(
                "Target.createTarget",
                json!({ "url": "about:blank" }),
                "opening a tab",
            )?
            .get("targetId")
            .and_then(Value::as_str)
            .ok_or("Target.createTarget gave no targetId")?
            .to_owned();
        // From here on the tab exists: a `Page` closes it on drop, on error included.
        let conn = match Conn::connect(
            self.addr,
            &format!("/devtools/page/{target}"),
            COMMAND_GUARD,
        ) {
            Ok(conn) => conn,
            Err(e) => {
                let _ = self.call(
                    "Target.closeTarget",
                    json!({ "targetId": target }),
                    "closing a tab",
                );
                return Err(e);
            }
        };
        let page = Page {
            browser: self,
            target,
            inner: RefCell::new(PageInner {
                conn,
                seen: Seen::default(),
            }),
        };
        for method in [
            "Runtime.enable",
            "Log.enable",
            "Network.enable",
            "Page.enable",
        ] {
            page.call(method, json!({}), COMMAND_GUARD, method)?;
        }
        page.call(
            "Page.setLifecycleEventsEnabled",
            json!({ "enabled": true }),
            COMMAND_GUARD,
            "enabling lifecycle events",
        )?;
        page.call(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": false }),
            COMMAND_GUARD,
            "setting the viewport",
        )?;
        page.navigate(url)?;
        Ok(page)
    }

    /// The browser's process id: for a test that checks the process is gone once the
    /// browser is dropped.
    pub fn pid(&self) -> u32 {
        self.process.child.id()
    }

    /// One command on the browser-wide connection; its events (none are asked for) are
    /// dropped.
    fn call(&self, method: &str, params: Value, what: &str) -> Result<Value, String> {
        let mut conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        conn.call(
            method,
            params,
            Instant::now() + COMMAND_GUARD,
            what,
            &mut |_, _| {},
        )
    }
}

impl Drop for Browser {
    /// Asks the browser to close and waits, up to a guard, for its connection to end
    /// (which it does when the browser exits); the process then is killed if still there
    /// and reaped, and the profile removed (`Process`'s drop).
    fn drop(&mut self) {
        let conn = self.conn.get_mut().unwrap_or_else(PoisonError::into_inner);
        if conn.send("Browser.close", json!({})).is_ok() {
            let deadline = Instant::now() + CLOSE_GUARD;
            while let Ok(Some(_)) = conn.next(deadline) {}
        }
    }
}

/// The chromium process and its profile directory, killed, reaped and removed on drop:
/// the part of a [`Browser`] that must not leak even when starting it fails halfway.
struct Process {
    child: Child,
    profile: PathBuf,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A helper process of the browser may still be writing its last file; a second
        // attempt removes what the first one raced with.
        if std::fs::remove_dir_all(&self.profile).is_err() {
            let _ = std::fs::remove_dir_all(&self.profile);
        }
    }
}

/// The executable to run: `BENCHLINK_CHROMIUM`, else the first of [`NAMES`] on `PATH`.
fn find_chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("BENCHLINK_CHROMIUM").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    NAMES.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// Whether this process runs as root, where chromium's sandbox refuses to start.
fn running_as_root() -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// A fresh, empty profile directory under the system's temporary directory, unique
/// across the threads and processes of a test run.
fn new_profile() -> Result<PathBuf, String> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    loop {
        let dir = std::env::temp_dir().join(format!(
            "benchlink-chromium-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("creating a profile at {}: {e}", dir.display())),
        }
    }
}

fn launch() -> Result<Browser, LaunchError> {
    let exe = find_chromium().ok_or(LaunchError::NotFound)?;
    let profile = new_profile().map_err(LaunchError::Failed)?;
    let mut command = Command::new(&exe);
    command
        .args([
            "--headless=new",
            "--remote-debugging-port=0",
            "--no-first-run",
            "--no-default-browser-check",
            // No traffic of the browser's own: updates, sync, safe browsing, metrics,
            // translation, crash reports. The pages' requests are the only ones.
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-default-apps",
            "--disable-extensions",
            "--disable-sync",
            "--disable-domain-reliability",
            "--disable-client-side-phishing-detection",
            "--disable-breakpad",
            "--no-pings",
            "--metrics-recording-only",
            "--password-store=basic",
            "--use-mock-keychain",
            "--disable-features=Translate,OptimizationHints,MediaRouter,\
             DialMediaRouteProvider,AutofillServerCommunication,\
             CertificateTransparencyComponentUpdater",
            // A tab that is not in front still runs its timers and animation frames, so
            // a test with two pages can wait on either.
            "--disable-background-timer-throttling",
            "--disable-backgrounding-occluded-windows",
            "--disable-renderer-backgrounding",
            // Screenshots: the colours a page asks for (no display profile to convert
            // into), no scroll bars over the content.
            "--force-color-profile=srgb",
            "--hide-scrollbars",
            "--mute-audio",
            // Containers often have a small /dev/shm; chromium then uses /tmp instead.
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.display()));
    if running_as_root() {
        command.arg("--no-sandbox");
    }
    command
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&profile);
            return Err(if e.kind() == io::ErrorKind::NotFound {
                LaunchError::NotFound
            } else {
                LaunchError::Failed(format!("running {}: {e}", exe.display()))
            });
        }
    };
    let stderr = child.stderr.take();
    let process = Process { child, profile };
    let stderr = stderr.ok_or_else(|| LaunchError::Failed("chromium's stderr".into()))?;
    let endpoint = devtools_endpoint(stderr)
        .map_err(|why| LaunchError::Failed(format!("{} did not start: {why}", exe.display())))?;
    let (addr, path) = split_ws_url(&endpoint).map_err(LaunchError::Failed)?;
    let conn = Conn::connect(addr, &path, COMMAND_GUARD).map_err(LaunchError::Failed)?;
    Ok(Browser {
        conn: Mutex::new(conn),
        addr,
        process,
    })
}

/// Reads chromium's stderr until it announces its DevTools WebSocket
/// (`DevTools listening on ws://…`), and gives that URL. A thread reads, because stderr
/// must keep being drained for as long as the browser runs (a full pipe would block
/// it); the thread ends when the browser does. If the browser exits first, the error is
/// the tail of what it printed.
fn devtools_endpoint(stderr: impl io::Read + Send + 'static) -> Result<String, String> {
    let (tx, rx) = mpsc::channel();
    thread::Builder::new()
        .name("chromium-stderr".into())
        .spawn(move || {
            let mut tail: Vec<String> = Vec::new();
            let mut announced = false;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if announced {
                    continue;
                }
                if let Some(at) = line.find("ws://") {
                    if line.contains("DevTools listening on") {
                        announced = true;
                        let _ = tx.send(Ok(line[at..].trim().to_owned()));
                        continue;
                    }
                }
                tail.push(line);
                if tail.len() > 20 {
                    tail.remove(0);
                }
            }
            if !announced {
                let _ = tx.send(Err(format!(
                    "it exited without opening DevTools; its stderr ended with:\n{}",
                    tail.join("\n")
                )));
            }
        })
        .map_err(|e| format!("spawning the stderr reader: {e}"))?;
    match rx.recv_timeout(START_GUARD) {
        Ok(result) => result,
        Err(_) => Err(format!(
            "no `DevTools listening on` line within {START_GUARD:?}"
        )),
    }
}

/// `ws://127.0.0.1:PORT/devtools/browser/ID` → the socket address and the path.
fn split_ws_url(url: &str) -> Result<(SocketAddr, String), String> {
    let rest = url
        .strip_prefix("ws://")
        .ok_or_else(|| format!("unexpected DevTools URL {url}"))?;
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let addr = host
        .parse()
        .map_err(|e| format!("DevTools address {host} in {url}: {e}"))?;
    Ok((addr, path.to_owned()))
}

/// One CDP WebSocket: commands numbered from 1, read with deadlines (the socket's read
/// timeout set to what is left, so a silent browser cannot hang a test).
struct Conn {
    ws: WebSocket<TcpStream>,
    next_id: u64,
}

impl Conn {
    fn connect(addr: SocketAddr, path: &str, guard: Duration) -> Result<Conn, String> {
        let stream = TcpStream::connect_timeout(&addr, guard)
            .map_err(|e| format!("connecting to DevTools at {addr}: {e}"))?;
        stream
            .set_read_timeout(Some(guard))
            .and_then(|()| stream.set_write_timeout(Some(guard)))
            .and_then(|()| stream.set_nodelay(true))
            .map_err(|e| format!("DevTools socket options: {e}"))?;
        let (ws, _) = tungstenite::client::client(format!("ws://{addr}{path}"), stream)
            .map_err(|e| format!("DevTools WebSocket handshake at {addr}{path}: {e}"))?;
        Ok(Conn { ws, next_id: 1 })
    }

    /// Sends a command and gives its id, without waiting for the answer.
    fn send(&mut self, method: &str, params: Value) -> Result<u64, String> {
        let id = self.next_id;
        self.next_id += 1;
        let text = json!({ "id": id, "method": method, "params": params }).to_string();
        self.ws
            .send(Message::text(text))
            .map_err(|e| format!("sending {method} to chromium: {e}"))?;
        Ok(id)
    }

    /// The next JSON message, `None` when `deadline` passes first. A closed connection
    /// is an error (the browser or the tab has gone).
    fn next(&mut self, deadline: Instant) -> Result<Option<Value>, String> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.ws
                .get_ref()
                .set_read_timeout(Some(left))
                .map_err(|e| format!("DevTools socket: {e}"))?;
            match self.ws.read() {
                Ok(Message::Text(text)) => {
                    return serde_json::from_str(text.as_str())
                        .map(Some)
                        .map_err(|e| format!("chromium sent bad JSON ({e}): {text}"));
                }
                Ok(_) => continue, // pings (answered by tungstenite), pongs
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    continue; // the deadline check above decides
                }
                Err(e) => return Err(format!("DevTools connection: {e}")),
            }
        }
    }

    /// Sends a command and reads until its answer, giving every event read on the way
    /// to `on_event` (method, params). An answer to an earlier command that was given up
    /// on (its guard passed) is skipped. `what` names the command in errors.
    fn call(
        &mut self,
        method: &str,
        params: Value,
        deadline: Instant,
        what: &str,
        on_event: &mut dyn FnMut(&str, &Value),
    ) -> Result<Value, String> {
        let started = Instant::now();
        let id = self.send(method, params)?;
        loop {
            let Some(message) = self.next(deadline)? else {
                return Err(format!(
                    "{what}: chromium did not answer {method} within {:?}",
                    deadline.saturating_duration_since(started)
                ));
            };
            if let Some(event) = message.get("method").and_then(Value::as_str) {
                on_event(event, message.get("params").unwrap_or(&Value::Null));
            } else if message.get("id").and_then(Value::as_u64) == Some(id) {
                if let Some(error) = message.get("error") {
                    let text = error.get("message").and_then(Value::as_str);
                    return Err(format!(
                        "{what}: {method} failed: {}",
                        text.map_or_else(|| error.to_string(), str::to_owned)
                    ));
                }
                return Ok(message.get("result").cloned().unwrap_or(Value::Null));
            }
        }
    }
}

/// A tab of a [`Browser`] (which it borrows, so it cannot outlive it), with the log of
/// what it did since it opened. Closed on drop.
///
/// Its methods take `&self`; the connection is inside a `RefCell`, so a page belongs to
/// one thread, like the test that opened it.
pub struct Page<'b> {
    browser: &'b Browser,
    target: String,
    inner: RefCell<PageInner>,
}

struct PageInner {
    conn: Conn,
    seen: Seen,
}

/// What the page's events told, recorded as they are read (every command reads them).
#[derive(Default)]
struct Seen {
    errors: Vec<String>,
    urls: Vec<String>,
    /// `requestId` → URL, for naming the URL of a failed load.
    requests: HashMap<String, String>,
    /// The `loaderId`s of the navigations whose load event has fired.
    loaded: HashSet<String>,
}

impl Seen {
    fn record(&mut self, method: &str, params: &Value) {
        let str_at = |pointer: &str| params.pointer(pointer).and_then(Value::as_str);
        match method {
            "Runtime.consoleAPICalled" if matches!(str_at("/type"), Some("error" | "assert")) => {
                let args = params.get("args").and_then(Value::as_array);
                let text: Vec<String> = args.into_iter().flatten().map(describe).collect();
                self.errors
                    .push(format!("console.error: {}", text.join(" ")));
            }
            "Runtime.exceptionThrown" => {
                let details = params.get("exceptionDetails").unwrap_or(&Value::Null);
                self.errors
                    .push(format!("uncaught exception: {}", exception_text(details)));
            }
            "Log.entryAdded" if str_at("/entry/level") == Some("error") => {
                self.errors.push(format!(
                    "{} error: {}{}",
                    str_at("/entry/source").unwrap_or("browser"),
                    str_at("/entry/text").unwrap_or(""),
                    str_at("/entry/url").map_or(String::new(), |u| format!(" ({u})"))
                ));
            }
            "Network.requestWillBeSent" => {
                if let Some(url) = str_at("/request/url") {
                    self.urls.push(url.to_owned());
                    if let Some(id) = str_at("/requestId") {
                        self.requests.insert(id.to_owned(), url.to_owned());
                    }
                }
            }
            // A WebSocket has no `requestWillBeSent`; its URL counts as a request too.
            "Network.webSocketCreated" => {
                if let Some(url) = str_at("/url") {
                    self.urls.push(url.to_owned());
                }
            }
            // A load the page itself cancelled (a navigation away, an aborted fetch) is
            // not an error of the page.
            "Network.loadingFailed" if params.get("canceled") != Some(&Value::Bool(true)) => {
                let url = str_at("/requestId").and_then(|id| self.requests.get(id));
                self.errors.push(format!(
                    "failed to load {}: {}",
                    url.map_or("(unknown URL)", String::as_str),
                    str_at("/errorText").unwrap_or("")
                ));
            }
            "Page.lifecycleEvent" if str_at("/name") == Some("load") => {
                if let Some(loader) = str_at("/loaderId") {
                    self.loaded.insert(loader.to_owned());
                }
            }
            "Inspector.targetCrashed" => self.errors.push("the page crashed".into()),
            _ => {}
        }
    }
}

/// A console argument as text: its value when it has one (strings unquoted), else
/// the description the DevTools console would show.
fn describe(object: &Value) -> String {
    match object.get("value") {
        Some(Value::String(s)) => s.clone(),
        Some(value) => value.to_string(),
        None => ["description", "unserializableValue", "type"]
            .iter()
            .find_map(|key| object.get(*key).and_then(Value::as_str))
            .unwrap_or("?")
            .to_owned(),
    }
}

/// An exception's text: the error's description (`Error: message` and its stack) when
/// there is one, else the summary CDP gives (`Uncaught`, …).
fn exception_text(details: &Value) -> String {
    details
        .pointer("/exception/description")
        .and_then(Value::as_str)
        .or_else(|| details.get("text").and_then(Value::as_str))
        .unwrap_or("(no text)")
        .to_owned()
}

impl Page<'_> {
    fn call(
        &self,
        method: &str,
        params: Value,
        guard: Duration,
        what: &str,
    ) -> Result<Value, String> {
        let inner = &mut *self.inner.borrow_mut();
        let seen = &mut inner.seen;
        inner
            .conn
            .call(method, params, Instant::now() + guard, what, &mut |m, p| {
                seen.record(m, p)
            })
    }

    /// Navigates and waits for the load event of this navigation (its `loaderId`), not
    /// of whatever the tab showed before.
    fn navigate(&self, url: &str) -> Result<(), String> {
        let what = format!("opening {url}");
        let deadline = Instant::now() + LOAD_GUARD;
        let result = self.call("Page.navigate", json!({ "url": url }), LOAD_GUARD, &what)?;
        if let Some(error) = result.get("errorText").and_then(Value::as_str) {
            return Err(format!("{what}: {error}"));
        }
        // A navigation within the document has no loader and no load event.
        let Some(loader) = result.get("loaderId").and_then(Value::as_str) else {
            return Ok(());
        };
        let inner = &mut *self.inner.borrow_mut();
        while !inner.seen.loaded.contains(loader) {
            match inner.conn.next(deadline)? {
                Some(message) => {
                    if let Some(method) = message.get("method").and_then(Value::as_str) {
                        let params = message.get("params").unwrap_or(&Value::Null);
                        inner.seen.record(method, params);
                    }
                }
                None => {
                    return Err(format!(
                        "{what}: no load event within {LOAD_GUARD:?} (seen so far: {:?})",
                        inner.seen.errors
                    ))
                }
            }
        }
        Ok(())
    }

    /// Evaluates `js` as a script in the page and gives the value of its last expression
    /// as JSON; a promise is awaited (for `await`, write an async function and call it:
    /// `(async () => { … })()`). A thrown exception (or a rejected promise) is an `Err`
    /// with its text (`Error: message` and the stack). `undefined`, and values JSON
    /// cannot hold, are `Null`; a DOM node comes back as `{}`. Top-level `let`/`const`
    /// outlive the call (it is a script); wrap statements in a block to keep them local.
    ///
    /// Guarded by 30 s: a promise that may take longer belongs in [`Page::wait_for`].
    pub fn eval(&self, js: &str) -> Result<Value, String> {
        self.evaluate(js, COMMAND_GUARD, "eval")
    }

    fn evaluate(&self, js: &str, guard: Duration, what: &str) -> Result<Value, String> {
        let result = self.call(
            "Runtime.evaluate",
            json!({
                "expression": js,
                "awaitPromise": true,
                "returnByValue": true,
                "userGesture": true,
            }),
            guard,
            what,
        )?;
        if let Some(details) = result.get("exceptionDetails") {
            return Err(format!("{what}: {}", exception_text(details)));
        }
        Ok(result
            .pointer("/result/value")
            .cloned()
            .unwrap_or(Value::Null))
    }

    /// Waits until the JavaScript expression `condition` is truthy and gives its value
    /// (as [`Page::eval`] would).
    ///
    /// The waiting happens in the page: a promise checks the expression at once, then on
    /// every DOM mutation (a `MutationObserver` on the whole document) and every animation
    /// frame, and, for a condition on state that neither touches (a variable set by a
    /// WebSocket message in a tab that does not paint), every 100 ms. It resolves on the
    /// first truthy value, so the test goes on as soon as the page is there. `guard` only
    /// bounds a page that never gets there: the error then names the condition. An
    /// exception thrown by the condition ends the wait with that exception (write
    /// `document.querySelector('#x')?.textContent`, not `….querySelector('#x').textContent`,
    /// for an element still to come).
    pub fn wait_for(&self, condition: &str, guard: Duration) -> Result<Value, String> {
        let source = serde_json::to_string(condition).unwrap_or_default();
        let guard_ms = guard.as_millis();
        let js = format!(
            r#"new Promise((resolve, reject) => {{
  const check = () => (
{condition}
  );
  let done = false;
  const observer = new MutationObserver(() => test());
  const finish = (settle, value) => {{
    if (done) return;
    done = true;
    observer.disconnect();
    clearInterval(interval);
    clearTimeout(timer);
    settle(value);
  }};
  const test = () => {{
    if (done) return;
    let value;
    try {{ value = check(); }} catch (e) {{ finish(reject, e); return; }}
    if (value) finish(resolve, value);
  }};
  const frame = () => {{ if (!done) {{ test(); requestAnimationFrame(frame); }} }};
  observer.observe(document, {{ subtree: true, childList: true, attributes: true, characterData: true }});
  const interval = setInterval(test, 100);
  const timer = setTimeout(() => finish(reject, new Error(
    "timed out after {guard_ms} ms waiting for " + {source})), {guard_ms});
  requestAnimationFrame(frame);
  test();
}})"#
        );
        // The page's own timer reports the timeout with the condition's text; the Rust
        // side's guard is longer, for a page (or browser) that hangs altogether.
        let what = format!("waiting for `{condition}`");
        self.evaluate(&js, guard + COMMAND_GUARD, &what)
    }

    /// Console errors (`console.error`, failed `console.assert`), uncaught exceptions
    /// and unhandled rejections, browser log entries of level error (a resource answered
    /// 404, a blocked request) and failed network loads, since the page opened, in the
    /// order seen.
    ///
    /// Events are read as commands are answered; a round trip to the page first
    /// (`Runtime.evaluate` of `0`) reads what had arrived before it. An error still on its
    /// way (a request not yet answered) is not there yet: wait for the page state that
    /// follows it first ([`Page::wait_for`]), then ask.
    pub fn console_errors(&self) -> Vec<String> {
        self.flush();
        self.inner.borrow().seen.errors.clone()
    }

    /// Every URL the page requested (`Network.requestWillBeSent`): the document, its
    /// resources, `fetch`es and event streams, and the URLs of the WebSockets it opened
    /// (`Network.webSocketCreated`), in order, so a test can check that nothing went to
    /// another origin. Read after a round trip, as for [`Page::console_errors`].
    pub fn requested_urls(&self) -> Vec<String> {
        self.flush();
        self.inner.borrow().seen.urls.clone()
    }

    /// A round trip to the page, so that the events sent before its answer are recorded.
    /// A failed one (a browser gone) leaves what was recorded, which is what remains to
    /// report.
    fn flush(&self) {
        let _ = self.call(
            "Runtime.evaluate",
            json!({ "expression": "0" }),
            COMMAND_GUARD,
            "reading the page's events",
        );
    }

    /// Moves the mouse to (`x`, `y`), in CSS pixels from the viewport's top-left corner:
    /// the page gets `mousemove` (and `mouseover`/`mouseenter` as the pointer enters
    /// elements), as from a real mouse. Returns when the browser has dispatched it.
    pub fn mouse_move(&self, x: f64, y: f64) -> Result<(), String> {
        self.call(
            "Input.dispatchMouseEvent",
            json!({ "type": "mouseMoved", "x": x, "y": y }),
            COMMAND_GUARD,
            &format!("moving the mouse to ({x}, {y})"),
        )
        .map(drop)
    }

    /// A PNG of the viewport as it is painted now, one pixel per CSS pixel.
    pub fn screenshot_png(&self) -> Result<Vec<u8>, String> {
        let result = self.call(
            "Page.captureScreenshot",
            json!({ "format": "png", "fromSurface": true }),
            COMMAND_GUARD,
            "taking a screenshot",
        )?;
        let data = result
            .get("data")
            .and_then(Value::as_str)
            .ok_or("Page.captureScreenshot gave no data")?;
        data_encoding::BASE64
            .decode(data.as_bytes())
            .map_err(|e| format!("the screenshot's base64: {e}"))
    }

    /// [`Page::screenshot_png`] written to `path`: for looking at what a failing test
    /// saw.
    pub fn screenshot_to(&self, path: impl AsRef<Path>) -> Result<(), String> {
        let path = path.as_ref();
        let png = self.screenshot_png()?;
        std::fs::write(path, png).map_err(|e| format!("writing {}: {e}", path.display()))
    }
}

impl Drop for Page<'_> {
    /// Closes the tab, so a test that opens many pages does not keep them all running.
    fn drop(&mut self) {
        let _ = self.browser.call(
            "Target.closeTarget",
            json!({ "targetId": self.target }),
            "closing a tab",
        );
    }
}

/// The browser for a browser test, under the rule of no silent skips: when chromium is
/// missing or does not start, under CI (`CI` set to anything but empty, `0` or `false`)
/// the test fails with what is missing (`chromium not found: install Debian's chromium
/// (.ci/test does)`); elsewhere it prints, past the test harness's capture, that this
/// test is skipped and why, and gives `None`:
///
/// ```no_run
/// let Some(browser) = benchlink_tests::browser::require() else { return };
/// ```
pub fn require() -> Option<Browser> {
    let why = match launch() {
        Ok(browser) => return Some(browser),
        Err(LaunchError::NotFound) => not_found_message(),
        Err(LaunchError::Failed(why)) => format!("chromium failed to start: {why}"),
    };
    assert!(!under_ci(), "{why}");
    let test = thread::current()
        .name()
        .unwrap_or("a browser test")
        .to_owned();
    let _ = writeln!(io::stderr(), "NOTICE: skipping {test}: {why}");
    None
}

fn not_found_message() -> String {
    format!(
        "chromium not found: install Debian's chromium (.ci/test does), or set \
         BENCHLINK_CHROMIUM to a Chromium or Chrome executable (looked for {} on PATH)",
        NAMES.join(", ")
    )
}

/// Whether this is a CI run, where a missing tool fails a test rather than skipping it.
fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false" | "FALSE"))
}

/// A decoded screenshot, for checking that colours are on screen: a chart's series
/// drawn, a highlight shown.
pub struct Picture {
    width: u32,
    height: u32,
    /// Row-major RGB, three bytes a pixel (alpha dropped: screenshots are opaque).
    rgb: Vec<u8>,
}

impl Picture {
    /// Decodes a PNG of any colour type and depth (palettes expanded, 16 bits cut to 8).
    pub fn from_png(png: &[u8]) -> Result<Picture, String> {
        let mut decoder = png::Decoder::new(Cursor::new(png));
        decoder.set_transformations(png::Transformations::normalize_to_color8());
        let mut reader = decoder
            .read_info()
            .map_err(|e| format!("PNG header: {e}"))?;
        let size = reader
            .output_buffer_size()
            .ok_or("PNG too large to decode")?;
        let mut buf = vec![0; size];
        let info = reader
            .next_frame(&mut buf)
            .map_err(|e| format!("PNG data: {e}"))?;
        let channels = match info.color_type {
            png::ColorType::Grayscale => 1,
            png::ColorType::GrayscaleAlpha => 2,
            png::ColorType::Rgb => 3,
            png::ColorType::Rgba => 4,
            other => return Err(format!("unexpected PNG colour type {other:?}")),
        };
        let (width, height) = (info.width, info.height);
        let mut rgb = Vec::with_capacity(width as usize * height as usize * 3);
        for row in buf.chunks(info.line_size).take(height as usize) {
            for px in row.chunks_exact(channels).take(width as usize) {
                rgb.extend_from_slice(&match channels {
                    1 | 2 => [px[0]; 3],
                    _ => [px[0], px[1], px[2]],
                });
            }
        }
        Ok(Picture { width, height, rgb })
    }

    /// Width in pixels.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Height in pixels.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// The colour at (`x`, `y`), `None` outside the picture.
    pub fn pixel(&self, x: u32, y: u32) -> Option<[u8; 3]> {
        if x >= self.width || y >= self.height {
            return None;
        }
        let at = (y as usize * self.width as usize + x as usize) * 3;
        Some([self.rgb[at], self.rgb[at + 1], self.rgb[at + 2]])
    }

    /// How many pixels are within `tolerance` of `rgb` in each channel. A tolerance of a
    /// few units absorbs rounding in the rasteriser; anti-aliased edges blend with the
    /// background and mostly fall outside it, so count on a shape's inside.
    pub fn count_near(&self, rgb: [u8; 3], tolerance: u8) -> usize {
        self.rgb
            .chunks_exact(3)
            .filter(|px| px.iter().zip(rgb).all(|(&a, b)| a.abs_diff(b) <= tolerance))
            .count()
    }
}

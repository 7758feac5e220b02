//! The headless-browser harness (`benchlink_tests::browser`) against a page of its own:
//! a tiny HTTP server on loopback serves one HTML page whose inline script misbehaves on
//! request (`?bad`: a console error, `?throw`: an uncaught exception, `?missing`: an image
//! that is not there, `?ws`: a WebSocket the server refuses), adds an element after a timer, draws an SVG rectangle of a known
//! colour and shows where the mouse last moved. Each test launches its own browser
//! through `require()`, so without chromium they skip (and fail under CI).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use benchlink_tests::browser::{require, Picture};
use serde_json::json;

/// The rectangle's colour (matplotlib's first series colour, like a chart's).
const RECT: [u8; 3] = [0x1f, 0x77, 0xb4];
/// The viewport of every page here.
const VIEWPORT: (u32, u32) = (400, 300);
/// A guard on waits that finish in milliseconds when things work.
const GUARD: Duration = Duration::from_secs(20);

const PAGE: &str = r##"<!doctype html>
<html><head><meta charset="utf-8"><title>harness</title>
<link rel="icon" href="data:,">
<style>html, body { margin: 0; background: #fff; font: 16px sans-serif; }</style>
</head><body>
<svg width="200" height="100"><rect x="10" y="10" width="120" height="60" fill="#1f77b4"/></svg>
<div id="moved">none</div>
<script>
  const query = location.search;
  if (query.includes('bad')) console.error('bad page:', 42);
  if (query.includes('missing')) {
    const img = document.createElement('img');
    img.src = '/missing.png';
    document.body.appendChild(img);
  }
  setTimeout(() => {
    const p = document.createElement('p');
    p.id = 'late';
    p.textContent = 'arrived late';
    document.body.appendChild(p);
  }, 300);
  document.addEventListener('mousemove', (e) => {
    document.getElementById('moved').textContent = e.clientX + ',' + e.clientY;
  });
  if (query.includes('ws')) {
    const ws = new WebSocket('ws://' + location.host + '/socket');
    ws.onclose = () => { window.wsClosed = true; };
  }
  if (query.includes('throw')) throw new Error('thrown on purpose');
</script>
</body></html>
"##;

/// Serves `PAGE` at `/` (any query) and 404 elsewhere, one thread per connection, until
/// dropped.
struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Server {
    fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the page server");
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(stream) = stream {
                    thread::spawn(move || answer(stream));
                }
            }
        });
        Server { addr, stop }
    }

    fn url(&self, query: &str) -> String {
        format!("http://{}/{query}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr); // wakes the accept loop
    }
}

/// Answers the requests of one connection (keep-alive) until the browser closes it.
fn answer(stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header == "\r\n" || header == "\n" {
                break;
            }
        }
        let path = request_line.split_whitespace().nth(1).unwrap_or("/");
        let (status, body) = if path == "/" || path.starts_with("/?") {
            ("200 OK", PAGE)
        } else {
            ("404 Not Found", "not here")
        };
        let response = format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n\
             Content-Length: {}\r\nCache-Control: no-store\r\n\r\n{body}",
            body.len()
        );
        if out.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

#[test]
fn eval_and_wait_for() {
    let Some(browser) = require() else { return };
    let server = Server::start();
    let page = browser.open(&server.url(""), VIEWPORT).unwrap();

    assert_eq!(page.eval("1 + 2").unwrap(), json!(3));
    assert_eq!(page.eval("document.title").unwrap(), json!("harness"));
    assert_eq!(
        page.eval("new Promise((r) => setTimeout(() => r({ ok: [1, 'two'] }), 10))")
            .unwrap(),
        json!({ "ok": [1, "two"] })
    );
    assert_eq!(page.eval("undefined").unwrap(), json!(null));
    let thrown = page.eval("throw new Error('no such thing')").unwrap_err();
    assert!(thrown.contains("no such thing"), "{thrown}");
    let rejected = page
        .eval("Promise.reject(new Error('said no'))")
        .unwrap_err();
    assert!(rejected.contains("said no"), "{rejected}");

    let late = page
        .wait_for("document.getElementById('late')?.textContent", GUARD)
        .unwrap();
    assert_eq!(late, json!("arrived late"));

    let never = page
        .wait_for("window.neverSet", Duration::from_millis(300))
        .unwrap_err();
    assert!(
        never.contains("window.neverSet") && never.contains("timed out"),
        "{never}"
    );
    let broken = page
        .wait_for("document.getElementById('none').textContent", GUARD)
        .unwrap_err();
    assert!(broken.contains("TypeError"), "{broken}");

    assert_eq!(page.console_errors(), Vec::<String>::new());
}

#[test]
fn console_errors_and_requests() {
    let Some(browser) = require() else { return };
    let server = Server::start();

    let good = browser.open(&server.url(""), VIEWPORT).unwrap();
    good.wait_for("document.getElementById('late')", GUARD)
        .unwrap();
    assert_eq!(good.console_errors(), Vec::<String>::new());
    let urls = good.requested_urls();
    assert!(urls.contains(&server.url("")), "{urls:?}");
    for url in &urls {
        assert!(
            url.starts_with(&format!("http://{}/", server.addr)),
            "a request left loopback: {url} (all: {urls:?})"
        );
    }
    drop(good);

    let bad = browser.open(&server.url("?bad"), VIEWPORT).unwrap();
    let errors = bad.console_errors();
    assert!(
        errors.iter().any(|e| e.contains("bad page: 42")),
        "{errors:?}"
    );

    let thrown = browser.open(&server.url("?throw"), VIEWPORT).unwrap();
    let errors = thrown.console_errors();
    assert!(
        errors.iter().any(|e| e.contains("thrown on purpose")),
        "{errors:?}"
    );

    let missing = browser.open(&server.url("?missing"), VIEWPORT).unwrap();
    // The image is requested by the script; its failure is logged once it is answered.
    missing
        .wait_for("document.querySelector('img')?.complete", GUARD)
        .unwrap();
    let errors = missing.console_errors();
    assert!(
        errors.iter().any(|e| e.contains("404")),
        "no error for the missing image: {errors:?}"
    );
    let urls = missing.requested_urls();
    assert!(urls.iter().any(|u| u.ends_with("/missing.png")), "{urls:?}");

    // A WebSocket is a request too (the server refuses it: a 404 to the upgrade).
    let ws = browser.open(&server.url("?ws"), VIEWPORT).unwrap();
    ws.wait_for("window.wsClosed", GUARD).unwrap();
    let socket = format!("ws://{}/socket", server.addr);
    let urls = ws.requested_urls();
    assert!(urls.contains(&socket), "{urls:?}");
    let errors = ws.console_errors();
    assert!(errors.iter().any(|e| e.contains(&socket)), "{errors:?}");
}

#[test]
fn screenshot_and_mouse() {
    let Some(browser) = require() else { return };
    let server = Server::start();
    let page = browser.open(&server.url(""), VIEWPORT).unwrap();

    let png = page.screenshot_png().unwrap();
    let picture = Picture::from_png(&png).unwrap();
    assert_eq!((picture.width(), picture.height()), VIEWPORT);
    // The 120 × 60 rectangle, its edges perhaps blended.
    let blue = picture.count_near(RECT, 4);
    assert!(
        (118 * 58..=122 * 62).contains(&blue),
        "{blue} pixels of the rect"
    );
    assert_eq!(picture.pixel(70, 40), Some(RECT));
    assert_eq!(picture.count_near([255, 0, 0], 4), 0);
    assert!(picture.count_near([255, 255, 255], 0) > 100_000);

    let file = std::env::temp_dir().join(format!("benchlink-shot-{}.png", std::process::id()));
    page.screenshot_to(&file).unwrap();
    let written = std::fs::read(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    assert_eq!(&written[..8], b"\x89PNG\r\n\x1a\n");

    page.mouse_move(50.0, 40.0).unwrap();
    assert_eq!(
        page.eval("document.getElementById('moved').textContent")
            .unwrap(),
        json!("50,40")
    );
    // A mouse event's coordinates are whole pixels, whatever CDP is given.
    page.mouse_move(120.4, 80.0).unwrap();
    assert_eq!(
        page.eval("document.getElementById('moved').textContent")
            .unwrap(),
        json!("120,80")
    );
}

#[test]
fn nothing_left_behind() {
    let Some(browser) = require() else { return };
    let pid = browser.pid();
    let server = Server::start();
    let page = browser.open(&server.url(""), VIEWPORT).unwrap();
    assert_eq!(page.eval("2 * 21").unwrap(), json!(42));
    drop(page);
    assert!(
        browser.open("http://127.0.0.1:1/", VIEWPORT).is_err(),
        "a refused connection opens no page"
    );
    drop(browser);
    // Reaped, not a zombie: the process table has no entry for it any more.
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "chromium {pid} is still there"
    );
}

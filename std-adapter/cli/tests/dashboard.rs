//! `benchlink bench dashboard` and `bench run --dashboard` as a user sees them: in a
//! real browser (Debian's chromium, headless, driven over CDP by benchlink-tests'
//! harness) against local benchmark servers. The pages load without a console error
//! and without asking any other origin; a running benchmark's charts gain points while
//! the test watches; the pointer readout shows values; a comparison overlays two
//! benchmarks; hostile names, tags and environment values stay text. Then, without a
//! browser, the dashboard's HTTP server against hostile peers: a trickled head, an
//! endless one, a flood of connections, a write.
//!
//! The screenshots the tests take are kept under `target/dashboard-screenshots/` (the
//! README's pictures are copies of them).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use benchlink_cli::dashboard::{Dashboard, Meta};
use benchlink_sandbox::bench::BenchServer;
use benchlink_std::bench::{StartOptions, StatusInfo};
use benchlink_tests::browser::{require, Picture};
use benchlink_tests::{
    client, hello, lines_of, live_speed, repo_root, server_with, wait_final, wait_running,
};

/// Guard on any wait in the browser: generous, a guard against hanging only.
const GUARD: Duration = Duration::from_secs(60);
/// The window the pages are looked at in.
const WINDOW: (u32, u32) = (1280, 900);
/// The first two series colours of the charts (charts::PALETTE).
const BLUE: [u8; 3] = [31, 119, 180];
const ORANGE: [u8; 3] = [255, 127, 14];

/// A server whose benchmarks run until stopped (`hello.bdl`'s ten scenario seconds take
/// 30 s), reporting metrics every 100 ms.
fn long_running_server() -> BenchServer {
    server_with(|c| {
        c.speed = live_speed();
        c.speed.scenario_second = Duration::from_secs(3);
        c.speed.default_running = Duration::from_secs(30);
        c.speed.max_running = Duration::from_secs(30);
    })
}

/// A `benchlink` child process, killed on drop.
struct Running {
    child: Child,
    stderr: mpsc::Receiver<String>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Running {
    /// Starts `benchlink` with `args` against `host`.
    fn start(host: &str, args: &[&str]) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_benchlink"))
            .arg("bench")
            .args(["--host", host])
            .args(args)
            .current_dir(repo_root())
            .env("MZBENCHTOKEN", repo_root().join("no-such-token-file"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning benchlink");
        let stderr = lines_of(child.stderr.take().expect("piped stderr"));
        Running { child, stderr }
    }

    /// The first URL printed after `dashboard: `.
    fn url(&self) -> String {
        loop {
            let line = self
                .stderr
                .recv_timeout(GUARD)
                .expect("benchlink printed its dashboard's address");
            if let Some(rest) = line.strip_prefix("dashboard: ") {
                return rest.split_whitespace().next().expect("a URL").to_owned();
            }
        }
    }
}

/// The origin of `url` (`http://127.0.0.1:PORT`).
fn origin(url: &str) -> String {
    let rest = url.strip_prefix("http://").expect("an http URL");
    format!("http://{}", rest.split('/').next().expect("an authority"))
}

fn screenshots() -> PathBuf {
    let dir = repo_root().join("target/dashboard-screenshots");
    std::fs::create_dir_all(&dir).expect("the screenshots' folder");
    dir
}

/// The points drawn on the page's charts, summed.
const POINTS: &str = "Array.from(document.querySelectorAll('figure.chart'))\
    .reduce((n, f) => n + Number(f.dataset.points), 0)";

#[test]
fn a_running_benchmark_grows_live_in_the_browser_with_a_pointer_readout() {
    let Some(browser) = require() else { return };
    let server = long_running_server();
    let host = server.host();
    let mut c = client(&host);
    let id = c
        .start(&hello(), &StartOptions::default())
        .expect("started");
    wait_running(&mut c, id);
    let dashboard = Running::start(&host, &["dashboard", "--listen", "127.0.0.1:0"]);
    let url = dashboard.url();

    // The list: the benchmark, running.
    let list = browser.open(&url, WINDOW).expect("the list page");
    list.wait_for(
        &format!("document.querySelector('a[href=\"/benchmarks/{id}\"]') && document.querySelector('td.running')"),
        GUARD,
    )
    .expect("the running benchmark listed");
    list.screenshot_to(screenshots().join("list.png"))
        .expect("a screenshot");

    // Its page: charts that gain points while we watch.
    let page = browser
        .open(&format!("{url}benchmarks/{id}"), WINDOW)
        .expect("the benchmark page");
    let first = page
        .wait_for(&format!("(n => n > 0 && n)({POINTS})"), GUARD)
        .expect("charts drawn")
        .as_f64()
        .expect("a count");
    let later = page
        .wait_for(&format!("(n => n > {first} && n)({POINTS})"), GUARD)
        .expect("the charts gained points");
    assert!(later.as_f64() > Some(first));
    // Five seconds of samples, for a picture with lines in it.
    page.wait_for(
        "JSON.parse(document.querySelector('figure.chart').dataset.readout).span >= 5",
        GUARD,
    )
    .expect("five seconds of samples");
    page.screenshot_to(screenshots().join("benchmark-top.png"))
        .expect("a screenshot");

    // The pointer over the middle of the first chart's plot: a time and values.
    let spot = page
        .eval(
            "(() => { const f = document.querySelector('figure.chart'); \
             const d = JSON.parse(f.dataset.readout); const b = f.querySelector('svg').getBoundingClientRect(); \
             f.scrollIntoView(); const c = f.querySelector('svg').getBoundingClientRect(); \
             return [c.left + (d.x[0] + d.x[1]) / 2 / d.width * c.width, c.top + c.height / 2]; })()",
        )
        .expect("the chart's place");
    let (x, y) = (spot[0].as_f64().expect("x"), spot[1].as_f64().expect("y"));
    page.mouse_move(x, y).expect("the pointer moved");
    let readout = page
        .wait_for(
            "(t => /^\\d\\d:\\d\\d/.test(t) && t)(document.querySelector('figure.chart .readout').textContent)",
            GUARD,
        )
        .expect("a readout");
    let readout = readout.as_str().expect("text");
    assert!(
        readout.chars().any(|c| c.is_ascii_digit()) && readout.len() > 6,
        "the readout names a time and values: {readout:?}"
    );
    page.screenshot_to(screenshots().join("benchmark-running.png"))
        .expect("a screenshot");
    let picture = Picture::from_png(&page.screenshot_png().expect("a screenshot")).expect("a PNG");
    assert!(
        picture.count_near(BLUE, 30) > 100,
        "the first series' colour on screen"
    );
    assert!(
        picture.count_near(ORANGE, 30) > 100,
        "the second series' colour on screen"
    );
    let legend = page
        .eval("document.querySelector('figure.chart svg').textContent")
        .expect("the first chart's text");
    for entry in ["min", "p50", "p99.9", "mean"] {
        assert!(
            legend.as_str().is_some_and(|t| t.contains(entry)),
            "the legend names {entry}: {legend}"
        );
    }

    for p in [&list, &page] {
        assert_eq!(
            p.console_errors(),
            Vec::<String>::new(),
            "no console errors"
        );
        let elsewhere: Vec<String> = p
            .requested_urls()
            .into_iter()
            .filter(|u| !u.starts_with(&origin(&url)))
            .collect();
        assert!(
            elsewhere.is_empty(),
            "requests to other origins: {elsewhere:?}"
        );
    }
    c.stop(id).expect("stopped");
}

#[test]
fn a_comparison_overlays_two_benchmarks_over_their_own_time() {
    let Some(browser) = require() else { return };
    // Benchmarks of five seconds, reporting every 100 ms.
    let server = server_with(|c| {
        c.speed = live_speed();
        c.speed.scenario_second = Duration::from_millis(500);
    });
    let host = server.host();
    let mut c = client(&host);
    let ids: Vec<u64> = (0..2)
        .map(|_| {
            let id = c
                .start(&hello(), &StartOptions::default())
                .expect("started");
            wait_final(&mut c, id);
            id
        })
        .collect();
    let dashboard = Running::start(&host, &["dashboard", "--listen", "127.0.0.1:0"]);
    let url = dashboard.url();
    let page = browser
        .open(&format!("{url}compare?ids={},{}", ids[0], ids[1]), WINDOW)
        .expect("the comparison");
    // A chart whose readout has a line per benchmark, labelled with their ids.
    let labels = page
        .wait_for(
            "(f => f && JSON.parse(f.dataset.readout).lines.map(l => l.label))\
             (Array.from(document.querySelectorAll('figure.chart'))\
              .find(f => JSON.parse(f.dataset.readout).lines.length === 2))",
            GUARD,
        )
        .expect("a chart with both benchmarks");
    assert_eq!(
        labels,
        serde_json::json!([format!("#{}", ids[0]), format!("#{}", ids[1])])
    );
    let legend = page
        .eval("document.querySelector('figure.chart svg').textContent")
        .expect("the legend");
    assert!(legend
        .as_str()
        .is_some_and(|t| t.contains(&format!("#{}", ids[1]))));
    page.screenshot_to(screenshots().join("compare.png"))
        .expect("a screenshot");
    let picture = Picture::from_png(&page.screenshot_png().expect("a screenshot")).expect("a PNG");
    assert!(
        picture.count_near(BLUE, 30) > 100,
        "the first benchmark's colour"
    );
    assert!(
        picture.count_near(ORANGE, 30) > 100,
        "the second benchmark's colour"
    );
    assert_eq!(page.console_errors(), Vec::<String>::new());
}

#[test]
fn hostile_names_tags_and_environment_stay_text() {
    let Some(browser) = require() else { return };
    let server = long_running_server();
    let host = server.host();
    let name = "<img src=x onerror=window.pwned=1>";
    let tag = "<img src=x onerror=window.pwned=2>";
    let value = "</td><script>window.pwned=3</script>";
    let run = Running::start(
        &host,
        &[
            "run",
            "--dashboard",
            "--name",
            name,
            "--tags",
            &format!("{tag},plain"),
            "--env",
            &format!("k={value}"),
            "examples/scenarios/hello.bdl",
        ],
    );
    let url = run.url();
    let page = browser.open(&url, WINDOW).expect("the benchmark page");
    page.wait_for(
        "document.querySelector('#s-about td') && document.querySelector('#s-head .name')",
        GUARD,
    )
    .expect("the name shown");
    let root = origin(&url);
    let list = browser.open(&format!("{root}/"), WINDOW).expect("the list");
    list.wait_for("document.querySelector('span.tag')", GUARD)
        .expect("the tags listed");
    for p in [&page, &list] {
        let seen = p
            .eval(
                "({ images: document.querySelectorAll('img').length, \
                    scripts: document.querySelectorAll('script:not([src])').length, \
                    pwned: window.pwned === undefined ? null : window.pwned, \
                    text: document.body.textContent })",
            )
            .expect("the page's state");
        assert_eq!(seen["images"], 0, "no element made of a name");
        assert_eq!(seen["scripts"], 0, "no script made of a value");
        assert_eq!(seen["pwned"], serde_json::Value::Null, "nothing ran");
        let text = seen["text"].as_str().expect("text");
        assert!(text.contains(name), "the name shown as text");
        assert!(text.contains(tag), "the tag shown as text");
    }
    let text = page.eval("document.body.textContent").expect("text");
    assert!(
        text.as_str().is_some_and(|t| t.contains(value)),
        "the value shown as text"
    );
    assert_eq!(page.console_errors(), Vec::<String>::new());
}

/// One request to `addr`, its reply's status code.
fn status_of(addr: &str, request: &[u8]) -> u16 {
    let mut s = TcpStream::connect(addr).expect("connected");
    s.set_read_timeout(Some(GUARD)).expect("a read guard");
    s.write_all(request).expect("sent");
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    let text = String::from_utf8_lossy(&reply);
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"))
}

#[test]
fn hostile_peers_get_bounded_answers_and_the_pages_stay_served() {
    let dashboard = Dashboard::serve("127.0.0.1:0".parse().expect("an address")).expect("served");
    let addr = dashboard
        .url()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    // An endless head: cut at its limit.
    let mut endless = b"GET / HTTP/1.1\r\nX-Long: ".to_vec();
    endless.extend(std::iter::repeat_n(b'a', 64 * 1024));
    assert_eq!(status_of(&addr, &endless), 431);
    // Writes and other methods: the dashboard is read-only.
    assert_eq!(
        status_of(&addr, b"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n"),
        405
    );
    assert_eq!(status_of(&addr, b"GET /nowhere HTTP/1.1\r\n\r\n"), 404);
    // Silent peers hold every connection the dashboard serves at once: the next one
    // is told so at once, and once they go, pages are served again.
    let silent: Vec<TcpStream> = (0..64)
        .map(|_| TcpStream::connect(&addr).expect("connected"))
        .collect();
    // The dashboard counts a connection when it accepts it: wait until the 64th is
    // accepted by asking (each refusal is answered at once, so this is no sleep).
    let mut busy = 0;
    while busy == 0 {
        match status_of(&addr, b"GET / HTTP/1.1\r\n\r\n") {
            503 => busy += 1,
            200 => {}
            other => panic!("unexpected {other}"),
        }
    }
    drop(silent);
    let mut served = false;
    while !served {
        served = status_of(&addr, b"GET / HTTP/1.1\r\n\r\n") == 200;
    }
    // A trickled head is answered once it is whole.
    let mut s = TcpStream::connect(&addr).expect("connected");
    s.set_read_timeout(Some(GUARD)).expect("a read guard");
    for b in b"GET /dashboard.css HTTP/1.1\r\n\r\n" {
        s.write_all(&[*b]).expect("a byte");
    }
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains("Content-Security-Policy: default-src 'none'"));
}

#[test]
fn the_page_of_a_fed_benchmark_escapes_metric_names_and_costs_what_the_readme_says() {
    // 100 metrics sampled every second for an hour, fed directly (as the agent does).
    let dashboard = Dashboard::serve("127.0.0.1:0".parse().expect("an address")).expect("served");
    let board = dashboard.board();
    board.add_fed(
        1,
        Meta {
            name: Some("an hour".into()),
            ..Meta::default()
        },
    );
    let hour_ago = 1_800_000_000u64;
    board.set_status(
        1,
        StatusInfo {
            status_text: "running".into(),
            create_time: None,
            start_time: None,
            finish_time: None,
            reason: None,
        },
    );
    let names: Vec<String> = (0..99)
        .map(|i| format!("metric{i:02}"))
        .chain(["<b>hostile</b>".to_owned()])
        .collect();
    for t in 0..3600u64 {
        board.push_samples(
            1,
            names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.as_str(), hour_ago + t, ((t + i as u64) % 97) as f64 + 0.5)),
        );
    }
    let addr = dashboard
        .url()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let get = |path: &str, deflate: bool| -> Vec<u8> {
        let mut s = TcpStream::connect(&addr).expect("connected");
        s.set_read_timeout(Some(GUARD)).expect("a read guard");
        let encoding = if deflate {
            "Accept-Encoding: deflate\r\n"
        } else {
            ""
        };
        write!(s, "GET {path} HTTP/1.1\r\n{encoding}\r\n").expect("sent");
        let mut reply = Vec::new();
        s.read_to_end(&mut reply).expect("a reply");
        let at = reply
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a head")
            + 4;
        reply.split_off(at)
    };
    let rendered = std::time::Instant::now();
    let page = String::from_utf8(get("/benchmarks/1", false)).expect("utf-8");
    let rendered = rendered.elapsed();
    assert_eq!(page.matches("<figure class=\"chart\"").count(), 100);
    assert!(
        page.contains("&lt;b&gt;hostile&lt;/b&gt;"),
        "escaped in the figure's name"
    );
    assert!(!page.contains("<b>hostile"), "never markup");
    let packed = get("/benchmarks/1", true);
    // Size targets, not timings: the thinning keeps a page of 100 charts over an hour
    // under 4 MB as text and 1 MB on the wire.
    assert!(page.len() < 4 << 20, "{} bytes", page.len());
    assert!(packed.len() < 1 << 20, "{} bytes deflated", packed.len());
    // Figures for the README, printed (never asserted): what the page costs the
    // dashboard (its answer, made and sent) and the browser (loaded and drawn).
    let mut figures = format!(
        "page cost: 100 metrics x 3600 samples: {} bytes of HTML, {} deflated; answered in {} ms",
        page.len(),
        packed.len(),
        rendered.as_millis()
    );
    if let Some(browser) = require() {
        let tab = browser
            .open(&format!("{}benchmarks/1", dashboard.url()), WINDOW)
            .expect("the page");
        let times = tab
            .eval(
                "(() => { const n = performance.getEntriesByType('navigation')[0];                  const p = performance.getEntriesByType('paint')                    .find(e => e.name === 'first-contentful-paint');                  return [n.responseEnd, p ? p.startTime : null, n.loadEventEnd,                    document.querySelectorAll('figure.chart svg').length]; })()",
            )
            .expect("the page's timings");
        assert_eq!(times[3], 100, "every chart drawn");
        figures.push_str(&format!(
            "; in chromium: received at {:.0} ms, first paint at {:.0} ms, loaded with its 100 charts at {:.0} ms",
            times[0].as_f64().unwrap_or(f64::NAN),
            times[1].as_f64().unwrap_or(f64::NAN),
            times[2].as_f64().unwrap_or(f64::NAN)
        ));
    }
    println!("{figures}");
}

/// How long a sample takes from the board to the screen (printed for the README, never
/// asserted): the page's request for news is answered when the sample arrives, after
/// the dashboard's settling pause, and the page swaps the charts in.
#[test]
fn a_new_sample_reaches_the_screen() {
    let Some(browser) = require() else { return };
    let dashboard = Dashboard::serve("127.0.0.1:0".parse().expect("an address")).expect("served");
    let board = dashboard.board();
    board.add_fed(7, Meta::default());
    let t0 = 1_800_000_000u64;
    board.push_samples(7, [("m", t0, 1.0)]);
    let page = browser
        .open(&dashboard.benchmark_url(7), WINDOW)
        .expect("the page");
    page.wait_for(&format!("{POINTS} === 1"), GUARD)
        .expect("the first sample drawn");
    let mut delays = Vec::new();
    for i in 1..=5u64 {
        let pushed = std::time::Instant::now();
        board.push_samples(7, [("m", t0 + i, (i + 1) as f64)]);
        page.wait_for(&format!("{POINTS} === {}", i + 1), GUARD)
            .expect("the sample drawn");
        delays.push(pushed.elapsed());
    }
    delays.sort();
    assert_eq!(page.console_errors(), Vec::<String>::new());
    println!(
        "a new sample on screen after {} ms (median of 5; 300 ms of it the dashboard's wait \
         for the changes that come together)",
        delays[2].as_millis()
    );
}

/// Told to listen beyond loopback, the dashboard warns before anything else. (The address
/// is one of TEST-NET's, which no machine has: the warning comes, then the refusal to
/// bind, and nothing is ever exposed by the test.)
#[test]
fn listening_beyond_loopback_is_warned_about() {
    let server = server_with(|_| {});
    let dashboard = Running::start(&server.host(), &["dashboard", "--listen", "192.0.2.1:0"]);
    let warning = loop {
        let line = dashboard
            .stderr
            .recv_timeout(GUARD)
            .expect("benchlink's next line");
        if line.starts_with("warning:") {
            break line;
        }
        assert!(
            !line.starts_with("dashboard:"),
            "served without a warning first"
        );
    };
    assert!(
        warning.contains("no login") && warning.contains("192.0.2.1"),
        "{warning}"
    );
    let refusal = dashboard.stderr.recv_timeout(GUARD).expect("the refusal");
    assert!(
        refusal.starts_with("error: cannot serve the dashboard on 192.0.2.1:0"),
        "{refusal}"
    );
}

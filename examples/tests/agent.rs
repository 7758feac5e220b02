//! The agent binary end to end on its local in-process servers: a benchmark runs, its
//! samples make the round trip through the messaging server, and the exit code says how
//! it went.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// A run takes about 7 s at the demo pace.
const PATIENCE: Duration = Duration::from_secs(60);

/// Runs the agent with `args` from the workspace root, without any server settings
/// from the environment; kills it after [`PATIENCE`].
fn agent(args: &[&str]) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent"))
        .args(args)
        .current_dir(root)
        .env_remove("MZBENCH_API_HOST")
        .env_remove("BENCHLINK_TOKEN")
        .env_remove("BENCHLINK_RTM_ENDPOINT")
        .env_remove("BENCHLINK_RTM_APPKEY")
        .env_remove("BENCHLINK_RTM_ROLE")
        .env_remove("BENCHLINK_RTM_ROLE_SECRET")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agent binary");
    // Drain the pipes on threads so a chatty child never blocks on a full pipe.
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let err = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the agent ran for more than {PATIENCE:?}");
        }
        thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

/// `published N samples, subscriber received M (/data resumed K times, reconnected R
/// times)` → (N, M).
fn summary(stdout: &str) -> (u64, u64) {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("published "))
        .unwrap_or_else(|| panic!("no summary line in:\n{stdout}"));
    let numbers: Vec<u64> = line.split(' ').filter_map(|w| w.parse().ok()).collect();
    assert_eq!(numbers.len(), 4, "{line}");
    assert_eq!(
        line,
        format!(
            "published {} samples, subscriber received {} (/data resumed {} times, reconnected {} times)",
            numbers[0], numbers[1], numbers[2], numbers[3]
        )
    );
    (numbers[0], numbers[1])
}

#[test]
fn hello_round_trips_every_sample() {
    // `agent` kills the run after PATIENCE: the only bound on its time.
    let output = agent(&[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    let (published, received) = summary(&stdout);
    assert!(published > 0, "{stdout}");
    assert_eq!(published, received, "{stdout}");
    for stage in [
        "status: running",
        "status: complete",
        "final status: complete",
    ] {
        assert!(stdout.contains(stage), "no {stage:?} in:\n{stdout}");
    }
    assert!(
        stdout.contains("publishing its metrics to benchmarks."),
        "{stdout}"
    );
    // The results of hello.bdl: its `print` counter counted 2 workers × 10 prints.
    assert!(stdout.contains("\"print\""), "{stdout}");
}

/// The same main job written against the async API (`agent --async`): the same output,
/// every sample round-tripped, each once.
#[test]
fn the_async_agent_round_trips_every_sample() {
    let output = agent(&["--async"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    let (published, received) = summary(&stdout);
    assert!(published > 0 && published == received, "{stdout}");
    for stage in ["status: running", "final status: complete", "\"print\""] {
        assert!(stdout.contains(stage), "no {stage:?} in:\n{stdout}");
    }
}

#[test]
fn a_failing_benchmark_exits_3() {
    let output = agent(&["examples/scenarios/broken.bdl"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("final status: failed"), "{stdout}");
    assert_eq!(summary(&stdout), (0, 0));
}

#[test]
fn a_missing_scenario_is_an_error() {
    let output = agent(&["no/such/scenario.bdl"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no/such/scenario.bdl"), "{stderr}");
}

#[test]
fn an_unreachable_messaging_service_is_an_error() {
    // A port nothing listens on: bind one, then free it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let endpoint = format!("ws://127.0.0.1:{port}");
    let output = agent(&["--endpoint", &endpoint, "--appkey", "k"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&endpoint), "{stderr}");
}

/// The std agent against a benchmark server behind a relay that cuts every connection
/// at seeded random intervals (what a load balancer's idle timeout or a NAT rebinding
/// does): `/data` is resumed by the library and every sample makes the round trip once.
#[test]
fn the_agent_survives_a_relay_that_cuts_its_connections() {
    use benchlink_sandbox::bench::{BenchServer, BenchServerConfig};
    use benchlink_sandbox::relay::{CutSchedule, Relay, RelayConfig};

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    println!("relay cut seed {seed}");
    let server = BenchServer::start(BenchServerConfig::default()).expect("server");
    let relay = Relay::start_with(
        "127.0.0.1:0".parse().unwrap(),
        server.host().parse().unwrap(),
        RelayConfig {
            delay: Duration::ZERO,
            cuts: Some(CutSchedule::new(seed, 300, 900)),
        },
    )
    .expect("relay");
    let host = relay.addr().to_string();
    let output = agent(&["--host", &host]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "seed {seed}: exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    let (published, received) = summary(&stdout);
    assert!(
        published > 0 && published == received,
        "seed {seed}: {stdout}"
    );
    let cuts = relay.cutter().stats();
    assert!(
        cuts.connections_cut > 0,
        "seed {seed}: no connection was cut: {cuts:?}"
    );
}

/// `agent --dashboard`: the address printed once at the start, and after the run the
/// page shows every sample the subscriber received, once, in its charts.
#[test]
fn the_dashboard_shows_the_samples_that_made_the_round_trip() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent"))
        .arg("--dashboard")
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .env_remove("MZBENCH_API_HOST")
        .env_remove("BENCHLINK_RTM_ENDPOINT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawning the agent");
    let lines = benchlink_tests::lines_of(child.stdout.take().expect("piped"));
    let mut stdout = String::new();
    let mut next = || {
        let line = lines.recv_timeout(PATIENCE).expect("the agent's next line");
        stdout.push_str(&line);
        stdout.push('\n');
        line
    };
    let url = loop {
        if let Some(url) = next().strip_prefix("dashboard: ") {
            break url.to_owned();
        }
    };
    while !next().starts_with("dashboard: still served") {}
    let (_, received) = summary(&stdout);
    let page = get(&url);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        stdout.matches("dashboard: http").count(),
        1,
        "the address printed once: {stdout}"
    );
    assert!(page.contains("<h1>Benchmark 0: complete</h1>"), "{page}");
    assert!(page.contains("<td>hello.bdl</td>"), "its name");
    assert!(
        page.contains(&format!("{received} samples of ")),
        "the page counts the {received} samples received"
    );
    assert!(page.contains("<figure class=\"chart\""), "charts");
    assert!(
        page.contains("<h2>Results</h2>\n<div class=\"wide\">"),
        "results"
    );
}

/// The body of `GET url` (an `http://127.0.0.1:PORT/…` URL).
fn get(url: &str) -> String {
    use std::io::Write;
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut s = std::net::TcpStream::connect(authority).expect("connected");
    s.set_read_timeout(Some(PATIENCE)).expect("a read guard");
    write!(s, "GET {path} HTTP/1.1\r\nHost: {authority}\r\n\r\n").expect("sent");
    let mut reply = String::new();
    s.read_to_string(&mut reply).expect("a reply");
    reply
}

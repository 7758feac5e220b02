//! `benchlink sandbox --control-port 0`, run as a user runs it: the built binary prints
//! the control endpoint's real address in its banner, on the `--listen` address, and
//! the endpoint drives both servers of that process (a crashed benchmark, a refused RTM
//! upgrade). The run is killed at the end of the test and every wait is bounded.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use benchlink_sandbox::rtm::DEFAULT_APPKEY;

const PATIENCE: Duration = Duration::from_secs(20);

/// A running `benchlink sandbox`, killed on drop.
struct Sandbox {
    child: Child,
    bench: String,
    rtm: String,
    control: String,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sandbox() -> Sandbox {
    let mut child = Command::new(env!("CARGO_BIN_EXE_benchlink"))
        .args(["sandbox", "--listen", "127.0.0.2", "--pace", "demo"])
        .args(["--port", "0", "--rtm-port", "0", "--control-port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("benchlink sandbox");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut s = Sandbox {
        child,
        bench: String::new(),
        rtm: String::new(),
        control: String::new(),
    };
    while s.control.is_empty() {
        let line = rx.recv_timeout(PATIENCE).expect("banner");
        if let Some(host) = line.strip_prefix("benchmark server listening on http://") {
            s.bench = host.to_owned();
        }
        if let Some(endpoint) = line.strip_prefix("RTM server listening on ws://") {
            s.rtm = endpoint.to_owned();
        }
        if let Some(host) = line.strip_prefix("control endpoint listening on http://") {
            s.control = host.to_owned();
        }
    }
    s
}

/// Sends `request` on a fresh connection; the status and body of the reply.
fn exchange(addr: &str, request: &str) -> (u16, String) {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(PATIENCE)).unwrap();
    conn.write_all(request.as_bytes()).unwrap();
    let mut reply = String::new();
    let _ = conn.read_to_string(&mut reply);
    let (head, body) = reply
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no reply: {reply:?}"));
    (head[9..12].parse().unwrap(), body.to_owned())
}

fn control(s: &Sandbox, method: &str, target: &str) -> (u16, serde_json::Value) {
    let (status, body) = exchange(
        &s.control,
        &format!("{method} {target} HTTP/1.1\r\nHost: x\r\n\r\n"),
    );
    (status, serde_json::from_str(&body).unwrap())
}

fn start(bench: &str) -> u64 {
    let script = "#!benchDL\npool(size = 1, worker_type = dummy_worker):\n    loop(time = 100 sec, rate = 1 rps):\n        print(\"x\")\n";
    let body = format!("--b0\r\nContent-Disposition: form-data; name=\"bench\"; filename=\"a.bdl\"\r\n\r\n{script}\r\n--b0--\r\n");
    let (status, reply) = exchange(
        bench,
        &format!("POST /start HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: multipart/form-data; boundary=b0\r\nContent-Length: {}\r\n\r\n{body}", body.len()),
    );
    assert_eq!(status, 200, "{reply}");
    let id = reply.split("\"id\":").nth(1).unwrap();
    id[..id.find(',').unwrap()].parse().unwrap()
}

#[test]
fn control_endpoint_drives_both_servers_of_the_process() {
    let s = sandbox();
    // The real port of --control-port 0, on the --listen address only.
    assert!(s.control.starts_with("127.0.0.2:"), "{}", s.control);
    let port = s.control.rsplit(':').next().unwrap();
    assert_ne!(port, "0");
    assert!(TcpStream::connect(format!("127.0.0.1:{port}")).is_err());

    let (status, index) = control(&s, "GET", "/");
    assert_eq!(status, 200);
    let index = index.to_string();
    for path in ["/rtm/faults/socket-fault", "/bench/benchmarks/{id}/crash"] {
        assert!(index.contains(path), "{path} not in {index}");
    }
    assert_eq!(control(&s, "GET", "/nowhere").0, 404);
    assert_eq!(
        control(&s, "POST", "/rtm/faults/close-connections?code=x").0,
        400
    );

    // A benchmark of this process, crashed from the endpoint.
    let id = start(&s.bench);
    let (status, reply) = control(&s, "POST", &format!("/bench/benchmarks/{id}/crash"));
    assert_eq!((status, &reply["affected"]), (200, &serde_json::json!(1)));
    let (status, body) = exchange(
        &s.bench,
        &format!("GET /status?id={id} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
    );
    assert_eq!(
        (status, body.as_str()),
        (200, r#"{"reason":"crashed","status":"failed"}"#)
    );

    // The RTM server of this process: the next upgrade is refused with 503, and the
    // attempt is on record.
    let (status, _) = control(
        &s,
        "POST",
        "/rtm/faults/refuse-connections?kind=status&status=503&times=1",
    );
    assert_eq!(status, 200);
    let upgrade = format!(
        "GET /v2?appkey={DEFAULT_APPKEY} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        s.rtm
    );
    assert_eq!(exchange(&s.rtm, &upgrade).0, 503);
    let started = Instant::now();
    loop {
        let (_, attempts) = control(&s, "GET", "/rtm/attempts");
        if attempts.to_string().contains(r#""status":503"#) {
            break;
        }
        assert!(started.elapsed() < PATIENCE, "{attempts}");
        thread::sleep(Duration::from_millis(20));
    }
}

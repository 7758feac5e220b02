//! The benchmark server's limits against hostile clients over 127.0.0.1: slowloris
//! sockets beside a normal client, the head deadline under a trickle, idle connections,
//! chunked bodies in tiny chunks, parallel big uploads, over-limit bodies, and the
//! author rules of token users.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use benchlink_sandbox::bench::User;
use benchlink_sandbox::{BenchServer, BenchServerConfig};

/// A guard against a hang, far beyond every deadline these tests provoke: never a
/// measure of how fast something happened.
const GUARD: Duration = Duration::from_secs(30);

/// Status and body of the first response on `conn`, read until the connection closes
/// or the body is complete (Content-Length).
fn response(conn: &mut TcpStream) -> (u16, String) {
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&data).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .map(|l| l.parse::<usize>().unwrap());
            if len.is_some_and(|len| body.len() >= len) {
                let status = head[9..12].parse().unwrap();
                return (status, body.to_owned());
            }
        }
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&data).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no response: {text:?}"));
    (head[9..12].parse().unwrap(), body.to_owned())
}

/// One request on a fresh connection.
fn request(addr: SocketAddr, req: &str) -> (u16, String) {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.write_all(req.as_bytes()).unwrap();
    response(&mut conn)
}

/// A GET on a fresh connection, with `Authorization: Bearer <token>` unless `token` is
/// empty.
fn get(addr: SocketAddr, target: &str, token: &str) -> (u16, String) {
    let auth = if token.is_empty() {
        String::new()
    } else {
        format!("Authorization: Bearer {token}\r\n")
    };
    request(
        addr,
        &format!("GET {target} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"),
    )
}

/// Whether the server has closed `conn` (reads EOF or a reset within `within`).
fn closed_within(conn: &mut TcpStream, within: Duration) -> bool {
    conn.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match conn.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) => {
                return !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                )
            }
        }
    }
}

/// Whether `pred` holds within 5 s (the server frees a request's memory just after its
/// response goes out).
fn eventually(mut pred: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if pred() {
            return true;
        }
        thread::sleep(Duration::from_millis(10));
    }
    pred()
}

/// Resident memory of this process (server and test clients), in bytes.
fn rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap();
    kb * 1024
}

#[test]
fn slowloris_sockets_do_not_lock_out_a_normal_client() {
    // No deadline can free a slot during the test (the head deadline is an hour away):
    // the normal client is served because of the connection cap's evictions, or never.
    let server = BenchServer::start(BenchServerConfig {
        max_connections: 64,
        workers: 2,
        header_timeout: Duration::from_secs(3600),
        ..BenchServerConfig::fast()
    })
    .unwrap();
    let addr = server.addr();
    // 300 sockets that each start a head and then trickle it, a byte now and then.
    let mut attackers: Vec<TcpStream> = (0..300)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            let _ = s.write_all(b"GET /status?id=0 HTTP/1.1\r\nX-Slow: ");
            s
        })
        .collect();
    for round in 0..3 {
        for s in &mut attackers {
            let _ = s.write_all(b"a");
        }
        // A normal client, served while the attack goes on: no attacker was timed out
        // to make room (a client left waiting fails at the read timeout of `response`).
        let (status, body) = get(addr, "/status?id=0", "");
        assert_eq!(status, 404, "round {round}: {body}");
        let stats = server.stats();
        assert!(stats.connections <= 64, "{stats:?}");
        assert_eq!(stats.timed_out, 0, "{stats:?}");
    }
    let stats = server.stats();
    assert!(stats.evicted >= 236, "{stats:?}");
    // Idle keep-alive connections hold no worker: with two workers, ten idle clients
    // after a request each leave room for an eleventh.
    let idle: Vec<TcpStream> = (0..10)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /clusters_info HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            assert_eq!(response(&mut s).0, 200);
            s
        })
        .collect();
    assert_eq!(get(addr, "/clusters_info", "").0, 200);
    drop((attackers, idle));
}

#[test]
fn head_deadline_counts_from_the_first_byte_though_bytes_trickle() {
    let server = BenchServer::start(BenchServerConfig {
        header_timeout: Duration::from_millis(600),
        keep_alive_timeout: Duration::from_secs(30),
        ..BenchServerConfig::fast()
    })
    .unwrap();
    let mut conn = TcpStream::connect(server.addr()).unwrap();
    conn.write_all(b"GET /status?id=0 HTTP/1.1\r\nX-Slow: ")
        .unwrap();
    let started = Instant::now();
    // A byte every 50 ms: each would reset an idle timer, none resets the deadline.
    let mut cut = false;
    let mut answered = false;
    while started.elapsed() < GUARD {
        thread::sleep(Duration::from_millis(50));
        if conn.write_all(b"a").is_err() {
            cut = true;
            break;
        }
        conn.set_nonblocking(true).unwrap();
        let mut probe = [0u8; 64];
        answered = matches!(conn.peek(&mut probe), Ok(n) if n > 0);
        conn.set_nonblocking(false).unwrap();
        if answered {
            break;
        }
    }
    let elapsed = started.elapsed();
    // Ended by the server (a 408 or the close), not by the guard of the loop.
    assert!(
        cut || answered,
        "no deadline: still trickling after {elapsed:?}"
    );
    assert!(
        elapsed >= Duration::from_millis(500),
        "too early: {elapsed:?}"
    );
    if !cut {
        assert_eq!(response(&mut conn).0, 408);
    }
    assert!(closed_within(&mut conn, Duration::from_secs(5)));
    assert_eq!(server.stats().timed_out, 1);
}

#[test]
fn idle_connections_are_closed() {
    let server = BenchServer::start(BenchServerConfig {
        keep_alive_timeout: Duration::from_millis(300),
        ..BenchServerConfig::fast()
    })
    .unwrap();
    let mut silent = TcpStream::connect(server.addr()).unwrap();
    let mut kept = TcpStream::connect(server.addr()).unwrap();
    kept.write_all(b"GET /clusters_info HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert_eq!(response(&mut kept).0, 200);
    assert!(closed_within(&mut silent, GUARD));
    assert!(closed_within(&mut kept, GUARD));
    // Closed by the idle deadline.
    assert!(eventually(|| server.stats().connections == 0));
    assert_eq!(server.stats().timed_out, 2);
}

/// `size` bytes of body as chunks of `chunk` bytes, with the terminating chunk.
fn chunked_body(size: usize, chunk: usize) -> Vec<u8> {
    let mut wire = Vec::with_capacity(size + size / chunk * 8 + 16);
    let data = vec![b'x'; chunk];
    for _ in 0..size / chunk {
        wire.extend_from_slice(format!("{chunk:x}\r\n").as_bytes());
        wire.extend_from_slice(&data);
        wire.extend_from_slice(b"\r\n");
    }
    wire.extend_from_slice(b"0\r\n\r\n");
    wire
}

#[test]
fn chunked_upload_in_tiny_chunks_decodes_each_byte_once() {
    let server = BenchServer::start(BenchServerConfig {
        max_body: 16 << 20,
        ..BenchServerConfig::fast()
    })
    .unwrap();
    let body = chunked_body(16 << 20, 256);
    let mut conn = TcpStream::connect(server.addr()).unwrap();
    conn.write_all(
        b"POST /typecheck HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .unwrap();
    let mut writer = conn.try_clone().unwrap();
    let wire_len = body.len() as u64;
    let sender = thread::spawn(move || writer.write_all(&body).is_ok());
    // The whole body was read (the endpoint answers only then): it is not a script.
    let (status, reply) = response(&mut conn);
    assert!(sender.join().unwrap());
    assert_eq!(status, 400, "{reply}");
    assert!(reply.contains("Missing script file"), "{reply}");
    // The work: every byte sent went through the decoder exactly once.
    // (What the test measures is this count, not time: a decoder stuck on the body
    // fails at the read timeout of `response`.)
    assert_eq!(server.stats().body_bytes_read, wire_len);
    // The body's memory went back to the budget with the request.
    assert!(eventually(|| server.stats().body_bytes == 0));
}

#[test]
fn parallel_big_uploads_stay_within_the_budget() {
    let budget = 24 << 20;
    let server = BenchServer::start(BenchServerConfig {
        max_body: 16 << 20,
        body_budget: budget,
        ..BenchServerConfig::fast()
    })
    .unwrap();
    let addr = server.addr();
    let before = rss();
    let body = Arc::new(vec![b'x'; 12 << 20]);
    let uploads: Vec<_> = (0..10)
        .map(|_| {
            let body = Arc::clone(&body);
            thread::spawn(move || {
                let mut conn = TcpStream::connect(addr).unwrap();
                let head = format!("POST /typecheck HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n", body.len());
                conn.write_all(head.as_bytes()).unwrap();
                let mut writer = conn.try_clone().unwrap();
                let sender = thread::spawn(move || {
                    let _ = writer.write_all(&body);
                });
                let status = response(&mut conn).0;
                let _ = sender.join();
                status
            })
        })
        .collect();
    let statuses: Vec<u16> = uploads.into_iter().map(|t| t.join().unwrap()).collect();
    // Each was served whole (400: not a script) or refused for lack of memory (503).
    assert!(
        statuses.iter().all(|s| matches!(s, 400 | 503)),
        "{statuses:?}"
    );
    let stats = server.stats();
    assert!(stats.peak_body_bytes <= budget, "{stats:?}");
    assert!(stats.peak_body_bytes >= 12 << 20, "{stats:?}");
    assert!(eventually(|| server.stats().body_bytes == 0));
    // The process (server and clients) grew by less than the bodies sent in parallel.
    let grown = rss().saturating_sub(before);
    assert!(grown < 256 << 20, "grew by {grown} bytes");
    // And it answers normally afterwards.
    assert_eq!(get(addr, "/clusters_info", "").0, 200);
}

#[test]
fn over_limit_bodies_get_413_and_the_connection_closes() {
    let server = BenchServer::start(BenchServerConfig {
        max_body: 1 << 20,
        ..BenchServerConfig::fast()
    })
    .unwrap();
    let addr = server.addr();
    // Announced too large: refused before any of it is sent.
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.write_all(b"POST /start HTTP/1.1\r\nHost: x\r\nContent-Length: 62914560\r\n\r\n")
        .unwrap();
    assert_eq!(response(&mut conn).0, 413);
    assert!(closed_within(&mut conn, Duration::from_secs(5)));
    // Chunked: refused once the decoded body goes over.
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.write_all(b"POST /start HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        .unwrap();
    let mut writer = conn.try_clone().unwrap();
    let body = chunked_body(2 << 20, 4096);
    let sender = thread::spawn(move || {
        let _ = writer.write_all(&body);
    });
    assert_eq!(response(&mut conn).0, 413);
    assert!(closed_within(&mut conn, Duration::from_secs(5)));
    sender.join().unwrap();
    assert!(eventually(|| server.stats().body_bytes == 0));
    // Within the limit: served.
    assert_eq!(get(addr, "/clusters_info", "").0, 200);
}

const SCRIPT: &str = "#!benchDL\npool(size = 1, worker_type = dummy_worker):\n    loop(time = 100 sec, rate = 1 rps):\n        print(\"x\")\n";

/// Starts a benchmark as the holder of `token`; returns its id.
fn start(addr: SocketAddr, token: &str) -> u64 {
    let boundary = "b0undary";
    let body = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"bench\"; filename=\"a.bdl\"\r\n\r\n{SCRIPT}\r\n--{boundary}--\r\n");
    let (status, reply) = request(
        addr,
        &format!("POST /start HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\nContent-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {}\r\n\r\n{body}", body.len()),
    );
    assert_eq!(status, 200, "{reply}");
    let json: serde_json::Value = serde_json::from_str(&reply).unwrap();
    json["id"].as_u64().unwrap()
}

#[test]
fn token_users_may_change_only_their_own_benchmarks() {
    let mut admin = User::new("carol", "carol-token");
    admin.admin = true;
    let server = BenchServer::start(BenchServerConfig {
        users: Some(vec![
            User::new("alice", "alice-token"),
            User::new("bob", "bob-token"),
            admin,
        ]),
        ..BenchServerConfig::default()
    })
    .unwrap();
    let addr = server.addr();
    let forbidden = r#"{"reason":"Operation is forbidden","reason_code":"forbidden"}"#;
    let id = start(addr, "alice-token");
    assert_eq!(server.benchmark(id).unwrap().author, "alice");
    // Anyone with a token may look, tag and restart.
    assert_eq!(get(addr, &format!("/status?id={id}"), "bob-token").0, 200);
    let tags = get(addr, &format!("/add_tags?id={id}&tags=mine"), "bob-token");
    assert_eq!(tags.0, 200);
    // Bob may not stop, change or command Alice's benchmark.
    for target in [
        format!("/stop?id={id}"),
        format!("/change_env?id={id}&x=1"),
        format!("/run_command?id={id}&pool=1&percent=10&command=print(1)"),
    ] {
        assert_eq!(get(addr, &target, "bob-token"), (403, forbidden.to_owned()));
    }
    // An unknown id is 404 during that check.
    assert_eq!(get(addr, "/stop?id=999", "bob-token").0, 404);
    // Bob's restart is Bob's: he may stop it.
    let (status, reply) = get(addr, &format!("/restart?id={id}"), "bob-token");
    assert_eq!(status, 200, "{reply}");
    let clone = serde_json::from_str::<serde_json::Value>(&reply).unwrap()["id"]
        .as_u64()
        .unwrap();
    assert_eq!(server.benchmark(clone).unwrap().author, "bob");
    assert_eq!(get(addr, &format!("/stop?id={clone}"), "bob-token").0, 200);
    assert_eq!(
        get(addr, &format!("/stop?id={clone}"), "alice-token").0,
        403
    );
    // Alice stops her own; the admin may stop anyone's.
    assert_eq!(get(addr, &format!("/stop?id={id}"), "alice-token").0, 200);
    let third = start(addr, "alice-token");
    assert_eq!(
        get(addr, &format!("/stop?id={third}"), "carol-token").0,
        200
    );
    assert_eq!(server.benchmark(third).unwrap().status, "stopped");
    // No token at all: 403 everywhere.
    assert_eq!(get(addr, "/clusters_info", "").0, 403);
}

/// Writes `unit` again and again until the server cuts the connection (true) or
/// `limit` passes (false).
fn flood_until_cut(
    mut conn: TcpStream,
    unit: &[u8],
    limit: Duration,
    flowing: mpsc::Sender<()>,
) -> bool {
    let started = Instant::now();
    conn.set_write_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    while started.elapsed() < limit {
        match conn.write(unit) {
            Ok(_) => {
                let _ = flowing.send(());
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
    }
    false
}

#[test]
fn floods_of_empty_lines_and_endless_heads_are_cut_off() {
    let server = BenchServer::start(BenchServerConfig {
        keep_alive_timeout: Duration::from_millis(500),
        max_head: 8 * 1024,
        ..BenchServerConfig::fast()
    })
    .unwrap();
    let addr = server.addr();
    // Empty lines (skipped before a request, like Cowboy) as fast as loopback takes
    // them: the loop still serves others, and the idle deadline ends it.
    let blank = TcpStream::connect(addr).unwrap();
    let lines = vec![b'\n'; 64 * 1024];
    let (flowing, first_write) = mpsc::channel();
    let flood = thread::spawn(move || flood_until_cut(blank, &lines, GUARD, flowing));
    // The flood is under way (its first write went through) while another is served.
    first_write
        .recv_timeout(GUARD)
        .expect("the flood never started");
    assert_eq!(get(addr, "/clusters_info", "").0, 200);
    assert!(
        flood.join().unwrap(),
        "the empty-line flood was never cut off"
    );
    // A header that never ends: 400 at the head limit.
    let mut endless = TcpStream::connect(addr).unwrap();
    endless
        .write_all(b"GET /clusters_info HTTP/1.1\r\nX-Endless: ")
        .unwrap();
    let mut writer = endless.try_clone().unwrap();
    let flood = thread::spawn(move || {
        let _ = writer.write_all(&[b'a'; 16 * 1024]);
    });
    assert_eq!(response(&mut endless).0, 400);
    flood.join().unwrap();
}

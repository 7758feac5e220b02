//! Streams that resume by themselves: each cause of a resumption produced by a server
//! or a relay that does it (a cut in the middle of a body, a 5xx, a silence past the
//! idle limit, a cut of a zlib log, connections closed by a relay again and again), and
//! each case that cannot be resumed exactly (a file that changed, a shorter file, a
//! live tail's gap) reported, never guessed. Lines are neither lost nor repeated.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use benchlink_sandbox::bench::LogCompression;
use benchlink_std::bench::{Available, BenchClient, Retry, ServerAddress, StartOptions};
use benchlink_tests::{
    client, hello, live_speed, server_with, wait_final, wait_process_gone, wait_until, within,
    CountingProxy, PATIENCE,
};

/// What a scripted server does after the bytes of one reply.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Then {
    /// Closes the connection (a cut, when the body was not all there).
    Close,
    /// Keeps the connection open and sends nothing more.
    Hang,
}

/// A server that answers `/status` with `running` and every other request with the
/// next scripted reply, recording the request lines.
struct Scripted {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
}

fn scripted(replies: Vec<(Vec<u8>, Then)>) -> Scripted {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&requests);
    let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let (seen, replies) = (Arc::clone(&seen), Arc::clone(&replies));
            thread::spawn(move || serve(conn, &seen, &replies));
        }
    });
    Scripted { addr, requests }
}

fn serve(
    mut conn: TcpStream,
    seen: &Mutex<Vec<String>>,
    replies: &Mutex<VecDeque<(Vec<u8>, Then)>>,
) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        head.clear();
        while !head.ends_with(b"\r\n\r\n") {
            match conn.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                _ => return,
            }
        }
        let line = String::from_utf8_lossy(&head);
        let line = line.lines().next().unwrap_or_default().to_owned();
        seen.lock().unwrap().push(line.clone());
        if line.contains("/status") {
            let body = br#"{"status":"running"}"#;
            let reply = [
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes(),
                body,
            ]
            .concat();
            if conn.write_all(&reply).is_err() {
                return;
            }
            continue;
        }
        let Some((bytes, then)) = replies.lock().unwrap().pop_front() else {
            return;
        };
        if conn.write_all(&bytes).is_err() {
            return;
        }
        match then {
            Then::Close => return,
            Then::Hang => {
                // Until the client gives up on it and closes.
                let _ = conn.read(&mut byte);
                return;
            }
        }
    }
}

/// A chunked 200 head, then each line as a chunk; `end` adds the last chunk.
fn chunked(lines: &[&str], end: bool) -> Vec<u8> {
    let mut out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for line in lines {
        out.extend_from_slice(format!("{:x}\r\n{line}\n\r\n", line.len() + 1).as_bytes());
    }
    if end {
        out.extend_from_slice(b"0\r\n\r\n");
    }
    out
}

/// The first `n` bytes of `bytes` (a reply cut there).
fn cut(bytes: Vec<u8>, n: usize) -> Vec<u8> {
    bytes[..n.min(bytes.len())].to_vec()
}

fn quick_retry() -> Retry {
    Retry {
        interval: Duration::from_millis(1),
        max_interval: Duration::from_millis(5),
        attempts: Some(5),
        jitter_seed: 0,
        retry_first_connect: false,
    }
}

fn client_of(addr: SocketAddr) -> BenchClient {
    BenchClient::new(ServerAddress::parse(&addr.to_string()).unwrap())
        .unwrap()
        .with_reply_timeout(Some(PATIENCE))
        .with_stream_idle_timeout(Some(Duration::from_millis(300)))
        .with_retry(Some(quick_retry()))
}

const DATA: [&str; 6] = [
    "1\ta\t1", "1\tb\t10", "2\ta\t2", "2\tb\t20", "3\ta\t3", "3\tb\t30",
];

/// Reads `/data?id=1` from `addr` whole: the lines (or errors) as text, and the
/// resumptions.
fn read_data(c: &mut BenchClient) -> (Vec<String>, u32) {
    let mut stream = c.data(1).expect("data");
    let items = stream
        .by_ref()
        .map(|item| match item {
            Ok(s) => format!("{}\t{}\t{}", s.timestamp, s.name, s.value),
            Err(e) => format!("error: {e}"),
        })
        .collect();
    (items, stream.resumptions())
}

#[test]
fn data_resumes_after_a_cut_a_5xx_and_a_silence_without_loss_or_repeat() {
    let full = chunked(&DATA, true);
    let first = chunked(&DATA[..3], false);
    let server = scripted(vec![
        // Three lines and half of the fourth, then the connection is cut.
        (cut(full.clone(), first.len() + 5), Then::Close),
        // The server fails for a moment.
        (
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\n\r\n{}".to_vec(),
            Then::Close,
        ),
        // Four lines again, then silence past the idle limit.
        (chunked(&DATA[..4], false), Then::Hang),
        // Then the whole stream.
        (full, Then::Close),
    ]);
    let addr = server.addr;
    let (items, resumed) = within(PATIENCE, "a resumed /data", move || {
        read_data(&mut client_of(addr))
    });
    assert_eq!(items, DATA, "every line once, in order");
    assert_eq!(resumed, 2, "after the cut, and after the silence");
    let requests = server.requests.lock().unwrap();
    let data = requests.iter().filter(|r| r.contains("/data")).count();
    assert_eq!(data, 4, "{requests:?}");
    // Each resumption asked for the status first (the benchmark may have failed).
    assert!(requests.iter().filter(|r| r.contains("/status")).count() >= 3);
}

#[test]
fn a_file_that_changed_under_the_stream_is_reported_not_guessed() {
    let server = scripted(vec![
        (chunked(&DATA[..3], false), Then::Close),
        // The benchmark was restarted: a's second line is another one.
        (
            chunked(&["1\ta\t1", "1\tb\t10", "9\ta\t7", "9\ta\t8"], true),
            Then::Close,
        ),
    ]);
    let addr = server.addr;
    let (items, resumed) = within(PATIENCE, "a diverged /data", move || {
        read_data(&mut client_of(addr))
    });
    assert_eq!(resumed, 1);
    assert_eq!(&items[..3], &DATA[..3]);
    assert_eq!(items.len(), 5, "{items:?}");
    for item in &items[3..] {
        assert!(item.contains("cannot resume exactly"), "{item}");
        assert!(item.contains("differs from what was read before"), "{item}");
    }
}

#[test]
fn a_shorter_file_is_reported_at_its_end() {
    let server = scripted(vec![
        (chunked(&DATA[..3], false), Then::Close),
        (chunked(&DATA[..1], true), Then::Close),
    ]);
    let addr = server.addr;
    let (items, _) = within(PATIENCE, "a shorter /data", move || {
        read_data(&mut client_of(addr))
    });
    assert_eq!(&items[..3], &DATA[..3]);
    assert_eq!(items.len(), 4, "{items:?}");
    assert!(items[3].contains("ended 2 line(s) short"), "{}", items[3]);
}

#[test]
fn a_live_tail_reports_its_gap_before_the_new_lines() {
    let server = scripted(vec![
        (chunked(&["12:00 one", "12:01 two"], false), Then::Close),
        (chunked(&["12:05 three"], true), Then::Close),
    ]);
    let addr = server.addr;
    let items = within(PATIENCE, "a resumed /server_logs", move || {
        let mut c = client_of(addr);
        let mut tail = c.server_logs(None).expect("server_logs");
        let items: Vec<String> = tail
            .by_ref()
            .map(|l| l.unwrap_or_else(|e| format!("error: {e}")))
            .collect();
        assert_eq!(tail.resumptions(), 1);
        items
    });
    assert_eq!(items.len(), 4, "{items:?}");
    assert_eq!(&items[..2], ["12:00 one", "12:01 two"]);
    assert!(items[2].contains("resumed after line 2"), "{}", items[2]);
    assert_eq!(items[3], "12:05 three");
}

#[test]
fn attempts_used_up_end_the_stream_with_the_last_failure() {
    let unavailable = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\n\r\n{}".to_vec();
    let mut replies = vec![(chunked(&DATA[..2], false), Then::Close)];
    replies.extend((0..10).map(|_| (unavailable.clone(), Then::Close)));
    let server = scripted(replies);
    let addr = server.addr;
    let (items, resumed) = within(PATIENCE, "a /data that cannot be resumed", move || {
        read_data(&mut client_of(addr))
    });
    assert_eq!(&items[..2], &DATA[..2]);
    assert_eq!(items.len(), 3, "{items:?}");
    assert!(items[2].contains("503"), "{}", items[2]);
    assert_eq!(resumed, 0, "tried, never resumed");
    let requests = server.requests.lock().unwrap();
    // The first request, then the 5 tries the policy allows.
    assert_eq!(requests.iter().filter(|r| r.contains("/data")).count(), 6);
}

#[test]
fn with_resumption_off_a_cut_is_the_streams_error() {
    let server = scripted(vec![(chunked(&DATA[..2], false), Then::Close)]);
    let addr = server.addr;
    let (items, resumed) = within(PATIENCE, "a cut /data", move || {
        read_data(&mut client_of(addr).with_retry(None))
    });
    assert_eq!(&items[..2], &DATA[..2]);
    assert_eq!(items.len(), 3, "{items:?}");
    assert!(items[2].contains("closed early"), "{}", items[2]);
    assert_eq!(resumed, 0);
}

/// The local server's live benchmark read through a relay that cuts every connection
/// each time the reader has taken a few more lines: the lines read are exactly the
/// server's own, read directly once the benchmark ended.
fn read_through_cuts(log: bool) {
    let server = server_with(|c| {
        c.speed = live_speed();
        c.log_compression = LogCompression::Deflate;
    });
    let proxy = CountingProxy::start(server.host().parse().unwrap());
    let mut direct = client(&server.host());
    let id = direct
        .start(&hello(), &StartOptions::default())
        .expect("start");
    let read = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&read);
    let relayed = proxy.host();
    let reader = thread::spawn(move || {
        let mut c = client(&relayed).with_retry(Some(quick_retry()));
        let mut lines = Vec::new();
        let resumed = if log {
            let mut s = c.log(id).expect("log");
            for l in s.by_ref() {
                lines.push(l.expect("a log line"));
                count.fetch_add(1, Ordering::SeqCst);
            }
            s.resumptions()
        } else {
            let mut s = c.data(id).expect("data");
            for l in s.by_ref() {
                let l = l.expect("a sample");
                lines.push(format!("{}\t{}\t{}", l.timestamp, l.name, l.value));
                count.fetch_add(1, Ordering::SeqCst);
            }
            s.resumptions()
        };
        (lines, resumed)
    });
    let mut cuts = 0;
    for n in [1, 5, 12] {
        wait_until(&format!("{n} lines read"), || {
            read.load(Ordering::SeqCst) >= n || reader.is_finished()
        });
        if reader.is_finished() {
            break;
        }
        proxy.close_all();
        cuts += 1;
    }
    let (lines, resumed) = reader.join().expect("reader");
    wait_final(&mut direct, id);
    wait_process_gone(&server, id);
    let whole: Vec<String> = if log {
        direct
            .log(id)
            .expect("log")
            .map(|l| l.expect("line"))
            .collect()
    } else {
        direct
            .data(id)
            .expect("data")
            .map(|l| l.expect("sample"))
            .map(|l| format!("{}\t{}\t{}", l.timestamp, l.name, l.value))
            .collect()
    };
    assert!(cuts > 0 && resumed > 0, "cuts {cuts}, resumed {resumed}");
    if log {
        assert_eq!(lines, whole, "the log exactly once, in order");
    } else {
        // Each metric's lines in order; metrics interleave differently per request.
        let mut sorted = lines.clone();
        sorted.sort();
        let mut want = whole.clone();
        want.sort();
        assert_eq!(sorted, want, "every sample exactly once");
    }
}

#[test]
fn data_of_a_live_benchmark_survives_a_relay_that_cuts_it() {
    read_through_cuts(false);
}

#[test]
fn a_zlib_log_of_a_live_benchmark_survives_a_relay_that_cuts_it() {
    read_through_cuts(true);
}

#[test]
fn a_cut_stream_is_not_an_error_of_the_callback_api_either() {
    let full = chunked(&DATA, true);
    let first = chunked(&DATA[..3], false);
    let server = scripted(vec![
        (cut(full.clone(), first.len() + 5), Then::Close),
        (full, Then::Close),
    ]);
    let addr = server.addr;
    let got = within(PATIENCE, "read_available across a cut", move || {
        let mut c = client_of(addr);
        let mut s = c.data(1).expect("data");
        let mut got = Vec::new();
        while s
            .read_available(|l| {
                let l = l.expect("sample");
                got.push(format!("{}\t{}\t{}", l.timestamp, l.name, l.value));
                std::ops::ControlFlow::Continue(())
            })
            .expect("read")
            == Available::Idle
        {}
        assert_eq!(s.resumptions(), 1);
        got
    });
    assert_eq!(got, DATA);
}

/// A server that reads one request and closes without answering, `n` times, then
/// answers as `scripted` does.
#[test]
fn a_status_call_is_tried_again_and_a_stop_is_not() {
    let unanswered = || (Vec::new(), Then::Close);
    let server = scripted(vec![unanswered(), unanswered()]);
    let addr = server.addr;
    let (status, stop) = within(PATIENCE, "a status and a stop", move || {
        let mut c = client_of(addr);
        // `/status` is answered by the script; `/stop` meets the two closes.
        let status = c.status(1).map(|s| s.status_text);
        (status, c.stop(1))
    });
    assert_eq!(status.expect("status"), "running");
    let stop = stop.expect_err("a stop whose reply never came");
    assert!(stop.outcome_unknown(), "{stop}");
    let text = stop.to_string();
    assert!(text.contains("may have carried it out"), "{text}");
    assert!(text.contains("it is not sent again"), "{text}");
    let requests = server.requests.lock().unwrap();
    assert_eq!(
        requests.iter().filter(|r| r.contains("/stop")).count(),
        1,
        "never sent again: {requests:?}"
    );
}

#[test]
fn an_idempotent_call_is_tried_again_after_a_cut_and_a_5xx() {
    // The scripted server answers `/status` itself; `/results` meets a close, a 503,
    // then its reply.
    let body = br#"{"print":{"type":"counter","value":20}}"#;
    let reply = [
        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes(),
        body,
    ]
    .concat();
    let server = scripted(vec![
        (Vec::new(), Then::Close),
        (
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\n\r\n{}".to_vec(),
            Then::Close,
        ),
        (reply, Then::Close),
    ]);
    let addr = server.addr;
    let results = within(PATIENCE, "results", move || client_of(addr).results(1));
    let results = results.expect("results, tried again");
    assert!(results.get("print").is_some(), "{results:?}");
    let requests = server.requests.lock().unwrap();
    assert_eq!(
        requests.iter().filter(|r| r.contains("/results")).count(),
        3
    );
}

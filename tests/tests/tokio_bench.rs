//! The async benchmark client (`benchlink_std::tokio::bench`, feature `tokio`) against
//! the local benchmark server over real sockets: the calls, `wait`, the data and log
//! streams (whole, and resumed through a relay that cuts them), calls in flight at
//! once, a dropped stream closing its connection, and the server's errors naming the
//! request. Every wait is on an event; the timeouts only guard against a hang.

use std::future::Future;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use benchlink_core::bench::ReasonCode;
use benchlink_std::bench::{Retry, Sample, StartOptions};
use benchlink_std::tokio::bench::BenchClient;
use benchlink_tests::{
    client, fast_server, hello, live_server, wait_final, wait_process_gone, CountingProxy, PATIENCE,
};
use tokio::sync::{mpsc, watch};

/// The async face of the tests' blocking client of `host` (every read times out).
fn async_client(host: &str) -> BenchClient {
    BenchClient::new(client(host))
}

/// `fut`, failing the test if it is not done after a generous limit (a hang guard).
async fn guard<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(PATIENCE * 3, fut).await {
        Ok(value) => value,
        Err(_) => panic!("{what}: still not done after {:?} (hung?)", PATIENCE * 3),
    }
}

fn line(s: &Sample) -> String {
    format!("{}\t{}\t{}", s.timestamp, s.name, s.value)
}

/// Every sample of benchmark `id` as the blocking client reads it once the benchmark's
/// process is gone, sorted (metrics interleave differently per request).
fn server_data(host: &str, id: u64) -> Vec<String> {
    let mut direct = client(host);
    let mut lines: Vec<String> = direct
        .data(id)
        .expect("data")
        .map(|s| line(&s.expect("a sample")))
        .collect();
    lines.sort();
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_status_wait_and_results() {
    let server = fast_server();
    let host = server.host();
    let c = async_client(&host);
    let id = guard("start", c.start(&hello(), &StartOptions::default()))
        .await
        .expect("start");
    let status = guard("status", c.status(id)).await.expect("status");
    assert!(!status.status_text.is_empty());
    let mut seen = Vec::new();
    let end = guard(
        "wait",
        c.wait(id, Duration::from_millis(5), |s| {
            seen.push(s.status_text.clone())
        }),
    )
    .await
    .expect("wait");
    assert_eq!(end.status_text, "complete");
    assert_eq!(
        seen.last().map(String::as_str),
        Some("complete"),
        "{seen:?}"
    );
    let results = guard("results", c.results(id)).await.expect("results");
    assert!(results.get("print").is_some(), "{results:?}");
    assert_eq!(
        results,
        client(&host).results(id).expect("blocking results")
    );
    // The state-changing calls go through too.
    guard("add_tags", c.add_tags(id, &["async", "tokio"]))
        .await
        .expect("add_tags");
    guard("remove_tags", c.remove_tags(id, &["tokio"]))
        .await
        .expect("remove_tags");
    guard("stop", c.stop(id)).await.expect("stop after the end");
    let clusters = guard("clusters", c.clusters_info())
        .await
        .expect("clusters");
    assert!(
        clusters.iter().any(|k| k.bench_id == Some(id)),
        "the benchmark's cluster in {clusters:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_stream_yields_every_sample_of_a_live_run() {
    let server = live_server();
    let host = server.host();
    let c = async_client(&host);
    let id = c
        .start(&hello(), &StartOptions::default())
        .await
        .expect("start");
    let mut data = guard("data", c.data(id)).await.expect("data");
    let mut lines = Vec::new();
    while let Some(s) = guard("a sample", data.next()).await {
        lines.push(line(&s.expect("a sample")));
    }
    assert_eq!(data.resumptions(), 0);
    wait_process_gone(&server, id);
    lines.sort();
    let whole = server_data(&host, id);
    assert!(!whole.is_empty());
    assert_eq!(lines, whole, "every sample of /data, once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_stream_yields_the_whole_log() {
    let server = live_server();
    let host = server.host();
    let c = async_client(&host);
    let id = c
        .start(&hello(), &StartOptions::default())
        .await
        .expect("start");
    let mut log = guard("log", c.log(id)).await.expect("log");
    let mut lines = Vec::new();
    while let Some(l) = guard("a log line", log.next()).await {
        lines.push(l.expect("a log line"));
    }
    wait_process_gone(&server, id);
    let whole: Vec<String> = client(&host)
        .log(id)
        .expect("log")
        .map(|l| l.expect("line"))
        .collect();
    assert!(!whole.is_empty());
    assert_eq!(lines, whole, "the log exactly once, in order");
}

/// The quick retry policy of the resumption tests (no jitter: reproducible).
fn quick_retry() -> Retry {
    Retry {
        interval: Duration::from_millis(1),
        max_interval: Duration::from_millis(5),
        attempts: Some(5),
        jitter_seed: 0,
        retry_first_connect: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_stream_cut_by_a_relay_resumes_without_loss_or_repeat() {
    let server = live_server();
    let host = server.host();
    let proxy = CountingProxy::start(host.parse().expect("address"));
    let id = client(&host)
        .start(&hello(), &StartOptions::default())
        .expect("start");
    let c = BenchClient::new(client(&proxy.host()).with_retry(Some(quick_retry())));
    let mut data = guard("data", c.data(id)).await.expect("data");
    // The reader reports how many samples it took; the test cuts after 1, 5 and 12.
    let (count, mut taken) = watch::channel(0usize);
    let reader = tokio::spawn(async move {
        let mut lines = Vec::new();
        while let Some(s) = data.next().await {
            lines.push(line(&s.expect("a sample")));
            count.send_replace(lines.len());
        }
        (lines, data.resumptions())
    });
    let mut cuts = 0;
    for n in [1, 5, 12] {
        let reached = guard("samples read", taken.wait_for(|&read| read >= n)).await;
        if reached.is_err() {
            break; // The reader ended (fewer samples than n): no more cuts.
        }
        proxy.close_all();
        cuts += 1;
    }
    let (mut lines, resumed) = guard("the reader", reader).await.expect("reader");
    wait_process_gone(&server, id);
    assert!(cuts > 0 && resumed >= 1, "cuts {cuts}, resumed {resumed}");
    lines.sort();
    assert_eq!(lines, server_data(&host, id), "every sample exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_in_flight_at_once_each_have_a_connection() {
    let server = live_server();
    let proxy = CountingProxy::start(server.host().parse().expect("address"));
    let c = async_client(&proxy.host());
    let id = c
        .start(&hello(), &StartOptions::default())
        .await
        .expect("start");
    // A stream holds its connection until its end; the other calls meanwhile need one
    // more, and run at once on it and a third.
    let mut data = guard("data", c.data(id)).await.expect("data");
    let first = guard("a sample", data.next()).await;
    assert!(matches!(first, Some(Ok(_))), "{first:?}");
    let (status, results) = guard("two calls at once", async {
        tokio::join!(c.status(id), c.results(id))
    })
    .await;
    assert!(!status.expect("status").status_text.is_empty());
    results.expect("results while running");
    let (end, rest) = guard("wait and the stream at once", async {
        tokio::join!(c.wait(id, Duration::from_millis(5), |_| {}), async {
            let mut n = 0;
            while let Some(s) = data.next().await {
                s.expect("a sample");
                n += 1;
            }
            n
        })
    })
    .await;
    assert!(end.expect("wait").status().is_final());
    assert!(rest > 0);
    let opened = proxy.accepted();
    assert!((2..=3).contains(&opened), "{opened} connections");
    // Back in the pool: the next call reuses a kept-alive connection.
    c.status(id).await.expect("status");
    assert_eq!(proxy.accepted(), opened, "no new connection");
}

/// A relay to `upstream` that reports on `closed` each time a client closes its side
/// of a connection (the event a dropped stream must cause).
fn closing_relay(upstream: SocketAddr, closed: mpsc::UnboundedSender<()>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    thread::spawn(move || {
        for conn in listener.incoming() {
            let (Ok(mut from), Ok(mut to)) = (conn, TcpStream::connect(upstream)) else {
                return;
            };
            let (Ok(mut back_from), Ok(mut back_to)) = (to.try_clone(), from.try_clone()) else {
                return;
            };
            thread::spawn(move || {
                let _ = std::io::copy(&mut back_from, &mut back_to);
            });
            let closed = closed.clone();
            thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = from.read(&mut buf) {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = to.shutdown(Shutdown::Both);
                let _ = closed.send(());
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_stream_closes_its_connection() {
    let server = live_server();
    let (closed_tx, mut closed) = mpsc::unbounded_channel();
    let relay = closing_relay(server.host().parse().expect("address"), closed_tx);
    let c = async_client(&relay.to_string());
    let id = client(&server.host())
        .start(&hello(), &StartOptions::default())
        .expect("start");
    let mut data = guard("data", c.data(id)).await.expect("data");
    for _ in 0..2 {
        let s = guard("a sample", data.next()).await;
        assert!(matches!(s, Some(Ok(_))), "{s:?}");
    }
    drop(data);
    // The reading thread sees the drop at its next sample and closes the connection,
    // while the benchmark still runs.
    guard("the stream's connection closed", closed.recv())
        .await
        .expect("the relay reports");
    let status = client(&server.host()).status(id).expect("status");
    assert_eq!(
        status.status_text, "running",
        "closed by the drop, not the end"
    );
    wait_final(&mut client(&server.host()), id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_name_the_request_and_come_from_the_call() {
    let server = fast_server();
    let host = server.host();
    let c = async_client(&host);
    let e = guard("status", c.status(4242)).await.expect_err("404");
    assert_eq!(
        e.to_string(),
        format!(
            "{host} answered GET /status?id=4242&wait=false with 404 not_found: Benchmark 4242 is not found"
        )
    );
    assert_eq!(e.reason_code(), Some(ReasonCode::NotFound));
    // A stream that cannot open fails the call itself, not a first item.
    for (what, e) in [
        ("log", c.log(4242).await.err()),
        ("data", c.data(4242).await.err()),
    ] {
        let e = e.unwrap_or_else(|| panic!("{what} of an unknown id opened"));
        assert_eq!(e.http_status(), Some(404), "{what}: {e}");
        assert!(e.request().is_some(), "{what}: {e}");
    }
    let e = c.server_logs(Some("loud")).await.expect_err("bad severity");
    assert_eq!(e.reason_code(), Some(ReasonCode::Badarg), "{e}");
    // After the errors the pooled connections still serve.
    assert_eq!(c.clusters_info().await.expect("clusters"), vec![]);
}

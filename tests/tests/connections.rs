//! Connection handling of `BenchClient`, seen through a TCP proxy that counts
//! connections: keep-alive across JSON calls, uploads, errors and finished streams; a
//! fresh connection after the server (or anything on the way) closed an idle one; and
//! no harm from a stream dropped half-way.

use std::time::Duration;

use benchlink_core::bench::ReasonCode;
use benchlink_std::bench::StartOptions;
use benchlink_tests::{
    client, fast_server, hello, live_speed, server_with, wait_final, wait_process_gone,
    wait_running, wait_until, within, CountingProxy, PATIENCE,
};

#[test]
fn sequential_calls_share_one_connection() {
    let server = fast_server();
    let proxy = CountingProxy::start(server.addr());
    let mut c = client(&proxy.host());
    let id = c.start(&hello(), &StartOptions::default()).expect("start");
    for _ in 0..5 {
        c.status(id).expect("status");
    }
    c.add_tags(id, &["x"]).expect("add_tags");
    c.remove_tags(id, &["x"]).expect("remove_tags");
    c.clusters_info().expect("clusters_info");
    // Error replies keep the connection too.
    let e = c.status(999).expect_err("404");
    assert_eq!(e.reason_code(), Some(ReasonCode::NotFound));
    c.email_report(id, &["a@example.com"]).ok();
    wait_final(&mut c, id);
    c.results(id).expect("results");
    // A second upload on the same connection.
    let clone = c.restart(id).expect("restart");
    let again = c.start(&hello(), &StartOptions::default()).expect("start");
    wait_final(&mut c, clone);
    wait_final(&mut c, again);
    // Streams read to their end leave the connection reusable (Content-Length and
    // chunked replies alike).
    wait_process_gone(&server, id);
    let lines = c.log(id).expect("log").count();
    assert!(lines > 10);
    let samples = c.data(id).expect("data").count();
    assert!(samples > 10);
    c.status(id).expect("status after streams");
    assert_eq!(
        proxy.accepted(),
        1,
        "every call on one kept-alive connection"
    );
}

#[test]
fn live_stream_read_to_its_end_keeps_the_connection() {
    let server = server_with(|c| c.speed = live_speed());
    let proxy = CountingProxy::start(server.addr());
    let host = proxy.host();
    let (lines, c) = within(PATIENCE, "a live log to its end", move || {
        let mut c = client(&host);
        let id = c.start(&hello(), &StartOptions::default()).expect("start");
        let lines = c.userlog(id).expect("userlog").count();
        c.status(id).expect("status");
        (lines, c)
    });
    drop(c);
    assert!(lines > 3, "{lines}");
    assert_eq!(proxy.accepted(), 1);
}

#[test]
fn idle_connection_closed_by_the_server_is_replaced() {
    let server = server_with(|c| c.keep_alive_timeout = Duration::from_millis(100));
    let proxy = CountingProxy::start(server.addr());
    let mut c = client(&proxy.host());
    let id = c.start(&hello(), &StartOptions::default()).expect("start");
    for round in 1..=3 {
        // The server closes the kept-alive connection at its idle deadline; the proxy
        // has passed the close on to the client.
        wait_until("the server's idle close", || proxy.server_closed() >= round);
        c.status(id)
            .unwrap_or_else(|e| panic!("round {round}: status on a stale connection: {e}"));
        assert_eq!(proxy.accepted(), 1 + round);
    }
    // An upload after the idle close: sent again on a fresh connection, exactly once.
    wait_until("the server's idle close", || proxy.server_closed() >= 4);
    let next = c
        .start(&hello(), &StartOptions::default())
        .expect("start on a stale connection");
    assert_eq!(next, id + 1);
    assert!(server.benchmark(next + 1).is_none(), "started twice");
    assert_eq!(proxy.accepted(), 5);
    // Without the proxy, straight to the server.
    let mut direct = client(&server.host());
    direct.status(id).expect("status");
    // Every connection closed at the server's idle deadline, the direct one too (the
    // client keeps it open: only the server can close it).
    wait_until("the server's idle close of every connection", || {
        server.stats().connections == 0
    });
    direct
        .status(id)
        .expect("status after the server's idle close");
}

#[test]
fn connection_cut_on_the_way_is_replaced() {
    let server = fast_server();
    let proxy = CountingProxy::start(server.addr());
    let mut c = client(&proxy.host());
    c.clusters_info().expect("clusters_info");
    for round in 1..=3 {
        proxy.close_all();
        wait_until("the cut to reach the client", || {
            proxy.server_closed() >= round
        });
        c.clusters_info()
            .unwrap_or_else(|e| panic!("round {round}: after a cut: {e}"));
        assert_eq!(proxy.accepted(), 1 + round);
    }
}

#[test]
fn streams_dropped_midway_do_not_break_the_next_call() {
    let server = server_with(|c| c.speed = live_speed());
    let proxy = CountingProxy::start(server.addr());
    let host = proxy.host();
    let (id, c) = within(PATIENCE, "dropping streams", move || {
        let mut c = client(&host);
        let id = c.start(&hello(), &StartOptions::default()).expect("start");
        wait_running(&mut c, id);
        for round in 0..2 {
            let first = c.log(id).expect("log").next();
            assert!(matches!(first, Some(Ok(_))), "round {round}: {first:?}");
            assert_eq!(c.status(id).expect("status").status_text, "running");
            let first = c.data(id).expect("data").next();
            assert!(matches!(first, Some(Ok(_))), "round {round}: {first:?}");
            c.add_tags(id, &["still-fine"]).expect("add_tags");
        }
        (id, c)
    });
    let mut c = c;
    assert_eq!(
        server.benchmark(id).expect("bench").tags,
        ["still-fine"],
        "add_tags skips tags the benchmark has"
    );
    // Each abandoned stream costs its connection, nothing more: the JSON call after it
    // opened one fresh connection and kept it.
    assert_eq!(proxy.accepted(), 5, "1 + 4 abandoned streams");
    c.stop(id).expect("stop");
    assert_eq!(proxy.accepted(), 5);
}

#[test]
fn typecheck_closes_the_connection_and_the_client_copes() {
    let server = fast_server();
    let proxy = CountingProxy::start(server.addr());
    let mut c = client(&proxy.host());
    c.typecheck(&hello()).expect("typecheck");
    c.clusters_info().expect("clusters_info");
    c.typecheck(&hello()).expect("typecheck");
    c.clusters_info().expect("clusters_info");
    assert_eq!(
        proxy.accepted(),
        3,
        "the server closes after each /typecheck: the call after it needs a new connection"
    );
}

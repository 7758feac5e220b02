//! `BenchClient` over https: a TLS-terminating proxy (rustls, a self-signed certificate
//! for `localhost`) in front of the local benchmark server, as a server behind a load
//! balancer looks. Verification is on by default; extra roots and the explicit
//! `insecure_skip_verify` switch are the ways in.

use std::time::Duration;

use benchlink_std::bench::{BenchClient, ErrorKind, ServerAddress, StartOptions};
use benchlink_std::net::TlsOptions;
use benchlink_tests::{
    fast_server, hello, server_with, wait_process_gone, wait_until, within, ConnectProxy, TlsProxy,
    PATIENCE,
};

fn https_client(url: &str, tls: TlsOptions) -> BenchClient {
    BenchClient::new(ServerAddress::parse(url).expect("address"))
        .expect("client")
        .with_tls(tls)
        .expect("tls options")
        .with_reply_timeout(Some(PATIENCE))
        .with_stream_idle_timeout(Some(PATIENCE))
}

fn trusting(proxy: &TlsProxy) -> TlsOptions {
    TlsOptions {
        extra_roots: vec![proxy.cert()],
        ..TlsOptions::default()
    }
}

#[test]
fn https_with_the_certificate_as_extra_root() {
    let server = fast_server();
    let proxy = TlsProxy::start(server.addr());
    let url = format!("https://localhost:{}", proxy.port());
    let mut c = https_client(&url, trusting(&proxy));
    assert!(c.address().tls);
    let id = c
        .start(&hello(), &StartOptions::default())
        .expect("start over https");
    let info = server.benchmark(id).expect("the upload arrived");
    assert_eq!(info.includes.len(), 1);
    let (status, c) = within(PATIENCE, "wait over https", move || {
        let s = c.wait(id, Duration::from_millis(10), |_| {}).expect("wait");
        (s, c)
    });
    let mut c = c;
    assert_eq!(status.status_text, "complete");
    let results = c.results(id).expect("results");
    assert!(results.get("print").is_some(), "{results:?}");
    // The zlib-compressed log through TLS, live and then whole.
    wait_process_gone(&server, id);
    let (lines, c) = within(PATIENCE, "log over https", move || {
        let lines = c
            .log(id)
            .expect("log")
            .collect::<Result<Vec<_>, _>>()
            .expect("lines");
        (lines, c)
    });
    let mut c = c;
    assert!(
        lines
            .iter()
            .any(|l| l.contains("Bench final status: complete")),
        "{lines:?}"
    );
    let samples = c.data(id).expect("data").count();
    assert!(samples > 10);
    c.clusters_info().expect("clusters_info");
    assert_eq!(proxy.accepted(), 1, "one kept-alive TLS connection");
}

#[test]
fn https_verification_is_on_by_default() {
    let server = fast_server();
    let proxy = TlsProxy::start(server.addr());
    let url = format!("https://localhost:{}", proxy.port());
    // Default options: only the bundled public roots.
    let mut c = https_client(&url, TlsOptions::default());
    match c.status(0).map_err(|e| e.into_kind()) {
        Err(ErrorKind::Io(e)) => {
            let text = e.to_string().to_lowercase();
            assert!(
                text.contains("certificate") || text.contains("issuer"),
                "{e}"
            );
        }
        other => panic!("an untrusted certificate must fail: {other:?}"),
    }
    // The same through `new` alone (https defaults).
    let mut plain = BenchClient::new(ServerAddress::parse(&url).expect("address"))
        .expect("client")
        .with_reply_timeout(Some(PATIENCE));
    assert!(matches!(
        plain.clusters_info().map_err(|e| e.into_kind()),
        Err(ErrorKind::Io(_))
    ));
    // The right certificate for the wrong name: 127.0.0.1 is not `localhost`.
    let by_ip = format!("https://127.0.0.1:{}", proxy.port());
    let mut c = https_client(&by_ip, trusting(&proxy));
    assert!(
        matches!(
            c.clusters_info().map_err(|e| e.into_kind()),
            Err(ErrorKind::Io(_))
        ),
        "name mismatch must fail"
    );
    assert!(server.benchmark(0).is_none());
}

#[test]
fn https_without_verification_when_asked() {
    let server = fast_server();
    let proxy = TlsProxy::start(server.addr());
    let url = format!("https://localhost:{}", proxy.port());
    let mut c = https_client(
        &url,
        TlsOptions {
            insecure_skip_verify: true,
            ..TlsOptions::default()
        },
    );
    let id = c.start(&hello(), &StartOptions::default()).expect("start");
    c.status(id).expect("status");
    // Even by IP address.
    let by_ip = format!("https://127.0.0.1:{}", proxy.port());
    let mut c = https_client(
        &by_ip,
        TlsOptions {
            insecure_skip_verify: true,
            ..TlsOptions::default()
        },
    );
    c.status(id).expect("status by IP");
}

#[test]
fn https_idle_connection_closed_with_close_notify_is_replaced() {
    let server = server_with(|c| c.keep_alive_timeout = Duration::from_millis(100));
    let proxy = TlsProxy::start(server.addr());
    let mut c = https_client(
        &format!("https://localhost:{}", proxy.port()),
        trusting(&proxy),
    );
    c.clusters_info().expect("clusters_info");
    wait_until("the server's idle close", || proxy.server_closed() >= 1);
    c.clusters_info()
        .expect("clusters_info after the idle close (close_notify)");
    assert_eq!(proxy.accepted(), 2);
}

#[test]
fn https_idle_connection_closed_without_close_notify_is_replaced() {
    // Some load balancers close idle TLS connections without a close_notify; rustls
    // reports that as an unexpected EOF. Before any byte of a response on a reused
    // connection it is still a stale connection, safe to retry.
    let server = server_with(|c| c.keep_alive_timeout = Duration::from_millis(100));
    let proxy = TlsProxy::start(server.addr());
    proxy.set_close_notify(false);
    let mut c = https_client(
        &format!("https://localhost:{}", proxy.port()),
        trusting(&proxy),
    );
    c.clusters_info().expect("clusters_info");
    wait_until("the server's idle close", || proxy.server_closed() >= 1);
    c.clusters_info()
        .expect("clusters_info after a bare TCP close of an idle TLS connection");
    assert_eq!(proxy.accepted(), 2);
}

/// Through an HTTPS proxy's `CONNECT` tunnel, TLS end to end: the proxy sees only the
/// target, the certificate is still checked against the server's name.
#[test]
fn https_through_a_connect_proxy() {
    let server = fast_server();
    let tls = TlsProxy::start(server.addr());
    let proxy = ConnectProxy::start();
    let url = format!("https://localhost:{}", tls.port());
    let mut c =
        https_client(&url, trusting(&tls)).with_https_proxy("127.0.0.1", proxy.addr().port());
    let id = c
        .start(&hello(), &StartOptions::default())
        .expect("start through the proxy");
    assert!(server.benchmark(id).is_some());
    c.status(id).expect("status on the same tunnel");
    assert_eq!(proxy.targets(), [format!("localhost:{}", tls.port())]);

    // The tunnel carries TLS: without the certificate as a root, verification fails.
    let mut untrusting = https_client(&url, TlsOptions::default())
        .with_https_proxy("127.0.0.1", proxy.addr().port());
    assert!(untrusting.status(id).is_err());
}

/// A proxy that refuses `CONNECT` (here: it can not reach the target) is a connect
/// error that says what the proxy answered, not a hang or a decode error.
#[test]
fn a_refusing_proxy_is_a_connect_error_with_its_status() {
    let proxy = ConnectProxy::start();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let mut c = BenchClient::new(
        ServerAddress::parse(&format!("http://127.0.0.1:{port}")).expect("address"),
    )
    .expect("client")
    .with_https_proxy("127.0.0.1", proxy.addr().port())
    .with_reply_timeout(Some(PATIENCE));
    let e = c.status(1).expect_err("refused");
    assert!(matches!(e.kind(), ErrorKind::Connect(_)), "{e:?}");
    assert!(
        e.to_string().contains("proxy answered CONNECT with 502"),
        "{e}"
    );
}

//! The messaging client over `wss://` and through an HTTPS proxy: the local RTM server
//! behind a TLS-terminating proxy (rustls, a certificate for `localhost` made by the
//! test), and a `CONNECT` proxy made by the test. The client's socket is non-blocking:
//! these runs push thousands of messages through TLS both ways, so partial TLS writes and
//! records buffered inside rustls are exercised, not only a handshake.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use benchlink_sandbox::rtm::{RtmServer, RtmServerConfig, DEFAULT_APPKEY};
use benchlink_std::net::TlsOptions;
use benchlink_std::rtm::{
    Client, ClientObserver, ClientOptions, ClientState, Mode, Response, SubscribeOptions,
    SubscriptionData, SubscriptionObserver,
};
use benchlink_tests::{benchlink_bin, within, ConnectProxy, TlsProxy, PATIENCE};

struct Forward(mpsc::Sender<String>);

impl SubscriptionObserver for Forward {
    fn on_subscription_data(&mut self, data: &SubscriptionData) {
        for m in data.messages() {
            let _ = self.0.send(m.to_owned());
        }
    }
}

fn wss_options(proxy: &TlsProxy, tls: TlsOptions) -> ClientOptions {
    let mut o = ClientOptions::new(format!("wss://localhost:{}", proxy.port()), DEFAULT_APPKEY);
    o.transport.tls = tls;
    o
}

fn trusting(proxy: &TlsProxy) -> TlsOptions {
    TlsOptions {
        extra_roots: vec![proxy.cert()],
        ..TlsOptions::default()
    }
}

fn connect(options: ClientOptions) -> Client {
    let client = Client::new(options).expect("client");
    client.start().expect("start");
    let state = client.wait_for_state(|s| s != ClientState::Connecting, PATIENCE);
    assert_eq!(
        state,
        ClientState::Connected,
        "{:?}",
        client.last_connecting_error()
    );
    client
}

/// Publishes `n` messages of `size` bytes with acks, and checks that a subscriber on the
/// same client gets every one, in order.
fn round_trip(client: &Client, channel: &str, n: usize, size: usize) {
    let (tx, rx) = mpsc::channel();
    client
        .subscribe(
            channel,
            Mode::Reliable,
            Forward(tx),
            SubscribeOptions::default(),
        )
        .expect("subscribe");
    // The subscription is live once a first message comes back.
    client
        .publish_sync(channel, &"ready", PATIENCE)
        .expect("first publish");
    assert_eq!(rx.recv_timeout(PATIENCE).expect("ready"), r#""ready""#);
    let acked = Arc::new(AtomicUsize::new(0));
    let padding = "p".repeat(size);
    for i in 0..n {
        let acked = Arc::clone(&acked);
        let message = serde_json::json!({ "i": i, "padding": padding });
        client
            .publish(
                channel,
                &message,
                Some(Box::new(move |r| {
                    if matches!(r, Response::Reply(ref reply) if reply.is_ok()) {
                        acked.fetch_add(1, Ordering::SeqCst);
                    }
                })),
            )
            .expect("publish");
    }
    for i in 0..n {
        let text = rx.recv_timeout(PATIENCE).expect("message back");
        let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(value["i"], i, "in order");
    }
    client
        .publish_sync(channel, &"done", PATIENCE)
        .expect("last publish");
    assert_eq!(acked.load(Ordering::SeqCst), n);
}

#[test]
fn wss_round_trip_with_the_certificate_as_extra_root() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("server");
    let proxy = TlsProxy::start(server.addr());
    let client = connect(wss_options(&proxy, trusting(&proxy)));
    // Small messages in bulk, then large ones (several TLS records each).
    round_trip(&client, "small", 3000, 50);
    round_trip(&client, "large", 40, 100_000);
    assert_eq!(proxy.accepted(), 1, "one connection throughout");
    client.dispose().expect("dispose");
}

#[test]
fn wss_refuses_an_unknown_certificate_unless_told_not_to_check() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("server");
    let proxy = TlsProxy::start(server.addr());
    let options = ClientOptions {
        retry_first_connect: false,
        ..wss_options(&proxy, TlsOptions::default())
    };
    let client = Client::new(options).expect("client");
    client.start().expect("start");
    let state = client.wait_for_state(|s| s == ClientState::Stopped, PATIENCE);
    assert_eq!(state, ClientState::Stopped);
    let error = client.last_connecting_error().expect("an error is kept");
    assert!(
        error.to_string().to_lowercase().contains("certificate"),
        "{error}"
    );
    client.dispose().expect("dispose");

    let insecure = TlsOptions {
        insecure_skip_verify: true,
        ..TlsOptions::default()
    };
    let client = connect(wss_options(&proxy, insecure));
    assert!(client.publish_sync("c", &1, PATIENCE).is_ok());
    client.dispose().expect("dispose");
}

#[test]
fn ws_through_an_https_proxy() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("server");
    let proxy = ConnectProxy::start();
    let mut options = ClientOptions::new(server.endpoint(), DEFAULT_APPKEY);
    options.transport.https_proxy = Some(("127.0.0.1".to_owned(), proxy.addr().port()));
    let client = connect(options);
    round_trip(&client, "proxied", 500, 50);
    assert_eq!(proxy.targets(), [server.addr().to_string()]);
    client.dispose().expect("dispose");
}

#[test]
fn wss_through_an_https_proxy() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("server");
    let tls = TlsProxy::start(server.addr());
    let proxy = ConnectProxy::start();
    let mut options = wss_options(&tls, trusting(&tls));
    options.transport.https_proxy = Some(("127.0.0.1".to_owned(), proxy.addr().port()));
    let client = connect(options);
    round_trip(&client, "proxied", 500, 50);
    assert_eq!(proxy.targets(), [format!("localhost:{}", tls.port())]);
    client.dispose().expect("dispose");
}

/// Counts the client's connections.
struct Connects(mpsc::Sender<()>);

impl ClientObserver for Connects {
    fn on_enter_connected(&mut self) {
        let _ = self.0.send(());
    }
}

#[test]
fn wss_reconnects_after_the_server_drops_the_connection() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("server");
    let proxy = TlsProxy::start(server.addr());
    let mut options = wss_options(&proxy, trusting(&proxy));
    options.reconnect_interval = Duration::from_millis(20);
    let (connects, connected) = mpsc::channel();
    let client =
        Client::with_observer(options, Some(Box::new(Connects(connects)))).expect("client");
    client.start().expect("start");
    connected.recv_timeout(PATIENCE).expect("connected");
    let (tx, rx) = mpsc::channel();
    client
        .subscribe(
            "cut",
            Mode::Reliable,
            Forward(tx),
            SubscribeOptions::default(),
        )
        .expect("subscribe");
    client.publish_sync("cut", &1, PATIENCE).expect("publish");
    assert_eq!(rx.recv_timeout(PATIENCE).expect("message"), "1");
    server.faults().drop_connections();
    // Back over a new TLS connection, resubscribed from the position it had.
    connected.recv_timeout(PATIENCE).expect("reconnected");
    client
        .publish_sync("cut", &2, PATIENCE)
        .expect("publish after the cut");
    assert_eq!(rx.recv_timeout(PATIENCE).expect("message"), "2");
    assert!(proxy.accepted() >= 2);
    client.dispose().expect("dispose");
}

/// `benchlink rtm ARGS` with a clean environment plus `env`; (exit code, stdout, stderr).
fn cli(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = std::process::Command::new(benchlink_bin());
    command
        .arg("rtm")
        .args(args)
        .env_remove("BENCHLINK_RTM_ENDPOINT")
        .env_remove("BENCHLINK_RTM_APPKEY")
        .env_remove("SSL_CERT_FILE")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    let out = within(PATIENCE * 3, "benchlink rtm", move || {
        command.output().expect("benchlink")
    });
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_wss_trusts_cacert_or_ssl_cert_file_and_refuses_otherwise() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("server");
    let proxy = TlsProxy::start(server.addr());
    let dir = std::env::temp_dir().join(format!("benchlink-wss-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let pem = dir.join("cert.pem");
    std::fs::write(&pem, proxy.cert_pem()).expect("cert file");
    let pem = pem.to_str().expect("utf-8 path");
    let endpoint = format!("wss://localhost:{}", proxy.port());
    let base = ["--endpoint", endpoint.as_str(), "--appkey", DEFAULT_APPKEY];
    let publish = |extra: &[&str], env: &[(&str, &str)]| {
        let args: Vec<&str> = base
            .iter()
            .chain(extra)
            .chain(&["--jsonl", "publish", "secure", "{\"n\":1}"])
            .copied()
            .collect();
        cli(&args, env)
    };

    let (code, stdout, stderr) = publish(&["--cacert", pem], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\"position\""), "{stdout}");

    let (code, _, stderr) = publish(&[], &[("SSL_CERT_FILE", pem)]);
    assert_eq!(code, 0, "{stderr}");

    let (code, _, stderr) = publish(&[], &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.to_lowercase().contains("certificate"), "{stderr}");

    let (code, _, stderr) = publish(&["--no-cert-check"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cli_through_an_https_proxy_by_flag_or_environment() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("server");
    let proxy = ConnectProxy::start();
    let endpoint = server.endpoint();
    let via = format!("http://127.0.0.1:{}", proxy.addr().port());
    let args = ["--endpoint", endpoint.as_str(), "--appkey", DEFAULT_APPKEY];
    let with_flag: Vec<&str> = args
        .iter()
        .chain(&["--https-proxy", via.as_str(), "write", "k", "1"])
        .copied()
        .collect();
    let (code, _, stderr) = cli(&with_flag, &[]);
    assert_eq!(code, 0, "{stderr}");
    let read: Vec<&str> = args.iter().chain(&["read", "k"]).copied().collect();
    let (code, stdout, stderr) = cli(&read, &[("HTTPS_PROXY", via.as_str())]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "1");
    assert_eq!(proxy.targets().len(), 2, "both went through the proxy");

    let bad: Vec<&str> = args
        .iter()
        .chain(&["--https-proxy", "https://127.0.0.1:1", "read", "k"])
        .copied()
        .collect();
    let (code, _, stderr) = cli(&bad, &[]);
    assert_eq!(code, 4, "{stderr}");
}

#[test]
fn cli_refuses_an_endpoint_that_is_not_websocket() {
    let (code, _, stderr) = cli(
        &[
            "--endpoint",
            "http://127.0.0.1:1",
            "--appkey",
            "k",
            "read",
            "k",
        ],
        &[],
    );
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("--endpoint"), "{stderr}");
}

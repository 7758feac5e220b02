//! The messaging client over `wss://` and through an HTTPS proxy: the local RTM server
//! behind a TLS-terminating proxy (rustls, a certificate for `localhost` made by the
//! test), and a `CONNECT` proxy made by the test. The client's socket is non-blocking:
//! these runs push thousands of messages through TLS both ways, so partial TLS writes and
//! records buffered inside rustls are exercised, not only a handshake.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use benchlink_std::net::TlsOptions;
use benchlink_std::rtm::{
    Client, ClientObserver, ClientOptions, ClientState, Mode, Response, SubscribeOptions,
    SubscriptionData, SubscriptionObserver,
};
use benchlink_std::sandbox::rtm::{RtmServer, RtmServerConfig, DEFAULT_APPKEY};
use benchlink_tests::{ConnectProxy, TlsProxy, PATIENCE};

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
fn round_trip(client: &Client, n: usize, size: usize) {
    let (tx, rx) = mpsc::channel();
    client
        .subscribe(
            "tls",
            Mode::Reliable,
            Forward(tx),
            SubscribeOptions::default(),
        )
        .expect("subscribe");
    // The subscription is live once a first message comes back.
    client
        .publish_sync("tls", &"ready", PATIENCE)
        .expect("first publish");
    assert_eq!(rx.recv_timeout(PATIENCE).expect("ready"), r#""ready""#);
    let acked = Arc::new(AtomicUsize::new(0));
    let padding = "p".repeat(size);
    for i in 0..n {
        let acked = Arc::clone(&acked);
        let message = serde_json::json!({ "i": i, "padding": padding });
        client
            .publish(
                "tls",
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
        .publish_sync("tls", &"done", PATIENCE)
        .expect("last publish");
    assert_eq!(acked.load(Ordering::SeqCst), n);
}

#[test]
fn wss_round_trip_with_the_certificate_as_extra_root() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("server");
    let proxy = TlsProxy::start(server.addr());
    let client = connect(wss_options(&proxy, trusting(&proxy)));
    // Small messages in bulk, then large ones (several TLS records each).
    round_trip(&client, 3000, 50);
    client.unsubscribe("tls").expect("unsubscribe");
    round_trip(&client, 40, 100_000);
    assert_eq!(proxy.accepted(), 1, "one connection throughout");
    client.dispose().expect("dispose");
}

#[test]
fn wss_refuses_an_unknown_certificate_unless_told_not_to_check() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("server");
    let proxy = TlsProxy::start(server.addr());
    let client = Client::new(wss_options(&proxy, TlsOptions::default())).expect("client");
    client.start().expect("start");
    let state = client.wait_for_state(|s| s == ClientState::Stopped, PATIENCE);
    assert_eq!(state, ClientState::Stopped);
    let error = client.last_connecting_error().expect("an error is kept");
    assert!(error.to_lowercase().contains("certificate"), "{error}");
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
    round_trip(&client, 500, 50);
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
    round_trip(&client, 500, 50);
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

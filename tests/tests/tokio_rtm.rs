//! The async messaging client (benchlink-std's feature `tokio`) end to end against the
//! local RTM server: the same cases as the blocking client's where they apply —
//! requests and replies, reconnect with restore of auth and subscriptions, the offline
//! queue, a flood with bounded memory, a silent peer, TLS and a proxy — plus what is
//! async's own (cancellation, streams), and interop with the reference Python SDK.
//! Every wait is on an event, bounded by [`WAIT`] only as a guard against hanging.

#[path = "py_sdk/mod.rs"]
mod py_sdk;

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::time::Duration;

use benchlink_sandbox::rtm::{
    RtmServer, RtmServerConfig, SocketFault, DEFAULT_APPKEY, RESTRICTED_PREFIX, SUPERUSER_ROLE,
    SUPERUSER_SECRET,
};
use benchlink_std::net::TlsOptions;
use benchlink_std::rtm::{ClientOptions, ClientState, Error, Mode, SubState, SubscribeOptions};
use benchlink_std::tokio::rtm::{Client, Subscription, Update, SUBSCRIPTION_BUFFER};
use benchlink_tests::{ConnectProxy, TlsProxy};
use futures_core::Stream;
use serde_json::{json, Value};

/// Upper bound of every wait for something that should happen.
const WAIT: Duration = Duration::from_secs(10);

/// `fut`, or a panic naming `what` after [`WAIT`].
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing after {WAIT:?}"))
}

/// The next item of `stream`.
async fn next<S: Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    poll_fn(|cx| Pin::new(&mut *stream).poll_next(cx)).await
}

fn options(server: &RtmServer) -> ClientOptions {
    let mut o = ClientOptions::new(server.endpoint(), DEFAULT_APPKEY);
    o.reconnect_interval = Duration::from_millis(50);
    o
}

async fn connected(options: ClientOptions) -> Client {
    let client = Client::new(options).expect("client");
    client.start().expect("start");
    let state = within(
        "connect",
        client.wait_for_state(|s| s != ClientState::Connecting),
    )
    .await;
    assert_eq!(
        state,
        ClientState::Connected,
        "{:?}",
        client.last_connecting_error()
    );
    client
}

/// Reads `sub` until it is subscribed (its messages before that included).
async fn until_subscribed(sub: &mut Subscription) {
    within("subscribed", async {
        while let Some(update) = next(sub).await {
            if update == Update::State(SubState::Subscribed) {
                return;
            }
        }
        panic!("the subscription ended before it was subscribed");
    })
    .await;
}

/// The next `n` messages of `sub`, parsed.
async fn messages(sub: &mut Subscription, n: usize) -> Vec<Value> {
    let mut got = Vec::new();
    while got.len() < n {
        let m = within("a message", sub.next_message())
            .await
            .expect("subscription ended");
        got.push(serde_json::from_str(m.json()).expect("JSON"));
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_subscribe_read_write_delete_search() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("server");
    let client = connected(options(&server)).await;
    let mut sub = client
        .subscribe("animals", Mode::Reliable, SubscribeOptions::default())
        .await
        .expect("subscribe");
    until_subscribed(&mut sub).await;
    let first = client
        .publish("animals", &json!({"who": "zebra"}))
        .await
        .expect("publish");
    let second = client
        .publish_json("animals", r#"{"who":"<b>\"yak\"</b>"}"#)
        .await
        .expect("publish");
    assert!(
        !first.is_empty() && first != second,
        "positions {first} {second}"
    );
    assert_eq!(
        messages(&mut sub, 2).await,
        [json!({"who": "zebra"}), json!({"who": "<b>\"yak\"</b>"})]
    );

    client
        .write("config", &json!({"mode": [1, 2]}))
        .await
        .expect("write");
    assert_eq!(
        client.read("config").await.expect("read"),
        json!({"mode": [1, 2]})
    );
    client.delete("config").await.expect("delete");
    assert_eq!(client.read("config").await.expect("read"), Value::Null);

    let mut found = Vec::new();
    let mut search = client.search("ani").expect("search");
    while let Some(item) = within("search", next(&mut search)).await {
        found.extend(item.expect("search reply"));
    }
    assert!(found.contains(&"animals".to_owned()), "{found:?}");

    // A refused request is the server's error, not a hang.
    let refused = client.publish(&format!("{RESTRICTED_PREFIX}x"), &1).await;
    assert!(matches!(refused, Err(Error::Reply(_))), "{refused:?}");

    sub.unsubscribe().expect("unsubscribe");
    within("the stream's end", async {
        while next(&mut sub).await.is_some() {}
    })
    .await;
    client.dispose().await.expect("dispose");
    assert_eq!(client.state(), ClientState::Disposed);
    server.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_and_restores_auth_and_subscriptions() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("server");
    let client = connected(options(&server)).await;
    client
        .authenticate(SUPERUSER_ROLE, SUPERUSER_SECRET)
        .await
        .expect("authenticate");
    let channel = format!("{RESTRICTED_PREFIX}restored");
    let mut sub = client
        .subscribe(&channel, Mode::Reliable, SubscribeOptions::default())
        .await
        .expect("subscribe");
    until_subscribed(&mut sub).await;
    client
        .publish(&channel, &1)
        .await
        .expect("publish before the drop");
    assert_eq!(messages(&mut sub, 1).await, [json!(1)]);

    assert!(server.faults().drop_connections() > 0);
    // The subscription goes back to subscribing and is restored; the restricted channel
    // stays open to the client, so its authentication was replayed first.
    within("resubscribed", async {
        let mut left = false;
        while let Some(update) = next(&mut sub).await {
            match update {
                Update::State(SubState::Subscribing) => left = true,
                Update::State(SubState::Subscribed) if left => return,
                _ => {}
            }
        }
    })
    .await;
    client
        .publish(&channel, &2)
        .await
        .expect("publish after the reconnect");
    assert_eq!(messages(&mut sub, 1).await, [json!(2)]);
    assert!(server.connections().len() >= 2, "a second connection");
    client.dispose().await.expect("dispose");
    server.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_while_stopped_and_sends_in_order_on_start() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("server");
    let listener = connected(options(&server)).await;
    let mut sub = listener
        .subscribe("queued", Mode::Reliable, SubscribeOptions::default())
        .await
        .expect("subscribe");
    until_subscribed(&mut sub).await;

    let client = Client::new(options(&server)).expect("client");
    for n in 0..50 {
        client
            .publish_unacked("queued", &json!({"n": n}))
            .await
            .expect("queued");
    }
    // Acknowledged ones wait too; their futures resolve after the start.
    let acks: Vec<_> = (50..60)
        .map(|n| {
            client
                .try_publish("queued", &json!({"n": n}))
                .expect("queued")
        })
        .collect();
    assert_eq!(
        server.connections().len(),
        1,
        "only the listener is connected while the publisher is stopped"
    );
    client.start().expect("start");
    for ack in acks {
        within("ack", ack).await.expect("acknowledged");
    }
    let expected: Vec<Value> = (0..60).map(|n| json!({"n": n})).collect();
    assert_eq!(messages(&mut sub, 60).await, expected);
    client.dispose().await.expect("dispose");
    listener.dispose().await.expect("dispose");
    server.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_makes_publish_wait_for_room_not_grow() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("server");
    let mut o = options(&server);
    o.max_queue_size = 10;
    let client = Client::new(o).expect("client");
    for n in 0..10 {
        client
            .publish_unacked("room", &n)
            .await
            .expect("room for ten");
    }
    let refused = client.try_publish("room", &10);
    assert!(
        matches!(
            refused,
            Err(Error::Request(benchlink_std::rtm::RequestError::Full))
        ),
        "{refused:?}"
    );
    // Waiting for room: the publish resolves once the start drains the queue.
    let waiting = tokio::spawn({
        let client = client.clone();
        async move { client.publish("room", &10).await }
    });
    client.start().expect("start");
    within("a publish that waited for room", waiting)
        .await
        .expect("task")
        .expect("published");
    client.dispose().await.expect("dispose");
    server.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_publish_future_still_publishes() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("server");
    let client = connected(options(&server)).await;
    let mut sub = client
        .subscribe("dropped", Mode::Reliable, SubscribeOptions::default())
        .await
        .expect("subscribe");
    until_subscribed(&mut sub).await;
    {
        // Polled once (queued), then dropped before its acknowledgement.
        let mut publish = std::pin::pin!(client.publish("dropped", &"still sent"));
        let _ = poll_fn(|cx| std::task::Poll::Ready(publish.as_mut().poll(cx))).await;
    }
    assert_eq!(messages(&mut sub, 1).await, [json!("still sent")]);
    client.dispose().await.expect("dispose");
    server.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_nobody_reads_is_held_by_tcp_not_by_memory() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("server");
    let mut o = options(&server);
    // Liveness checks short, so that a runner that stopped serving its deadlines while
    // held would be seen dead (and reconnect) during the test.
    o.ping_interval = Duration::from_millis(200);
    o.dead_peer_timeout = Duration::from_millis(600);
    let client = connected(o).await;
    let mut sub = client
        .subscribe("flood", Mode::Simple, SubscribeOptions::default())
        .await
        .expect("subscribe");
    until_subscribed(&mut sub).await;
    let payload = format!("\"{}\"", "x".repeat(1000));
    server
        .faults()
        .set_socket_fault(Some(SocketFault::DataFlood {
            subscription_id: "flood".into(),
            message: payload,
        }));
    // Nobody reads: the buffer fills to its bound and stops there while the server
    // keeps trying to send (its writes block on a full socket).
    let bound = SUBSCRIPTION_BUFFER + (64 << 10) + (256 << 10);
    within("the buffer to fill", async {
        while sub.buffered_bytes() < SUBSCRIPTION_BUFFER {
            tokio::task::yield_now().await;
        }
    })
    .await;
    // Held for longer than the dead-peer timeout, measured by the client's own request
    // deadlines: each read's reply waits behind the input nobody takes, so each timeout
    // fires; meanwhile the buffer stays within its bound and the connection stays up.
    for _ in 0..4 {
        let read = tokio::time::timeout(Duration::from_millis(200), client.read("elsewhere")).await;
        assert!(read.is_err(), "a reply overtook the held flood: {read:?}");
        assert!(
            sub.buffered_bytes() <= bound,
            "{} buffered",
            sub.buffered_bytes()
        );
    }
    assert!(client.is_connected());
    assert_eq!(
        server.connections().len(),
        1,
        "the held connection was not dropped"
    );
    // Reading resumes the flow: more messages than the buffer held arrive.
    let enough = 2 * SUBSCRIPTION_BUFFER / 1000;
    within("the flood to flow again", async {
        for _ in 0..enough {
            sub.next_message().await.expect("message");
        }
    })
    .await;
    server.faults().set_socket_fault(None);
    drop(sub);
    within("dispose during a flood", client.dispose())
        .await
        .expect("dispose");
    server.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_is_declared_dead_and_left() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("server");
    let mut o = options(&server);
    o.ping_interval = Duration::from_millis(100);
    o.dead_peer_timeout = Duration::from_millis(300);
    let client = connected(o).await;
    server.faults().answer_pings(false);
    within(
        "the dead peer's end",
        client.wait_for_state(|s| s != ClientState::Connected),
    )
    .await;
    server.faults().answer_pings(true);
    let state = within(
        "a reconnect",
        client.wait_for_state(|s| s == ClientState::Connected),
    )
    .await;
    assert_eq!(state, ClientState::Connected);
    client.dispose().await.expect("dispose");
    server.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wss_with_the_blocking_clients_trust_rules_and_through_a_proxy() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("server");
    let tls = TlsProxy::start(server.addr());
    let wss = |roots| {
        let mut o = ClientOptions::new(format!("wss://localhost:{}", tls.port()), DEFAULT_APPKEY);
        o.transport.tls = TlsOptions {
            extra_roots: roots,
            ..TlsOptions::default()
        };
        o
    };
    // Trusted: a round trip through TLS.
    let client = connected(wss(vec![tls.cert()])).await;
    assert_eq!(client.read("nothing").await.expect("read"), Value::Null);
    client.dispose().await.expect("dispose");

    // Not trusted: refused, with the refusal in words.
    let mut refused = wss(Vec::new());
    refused.retry_first_connect = false;
    let client = Client::new(refused).expect("client");
    client.start().expect("start");
    within(
        "the refusal",
        client.wait_for_state(|s| s == ClientState::Stopped),
    )
    .await;
    let why = client
        .last_connecting_error()
        .expect("an error")
        .to_string();
    assert!(
        why.contains("issuer") || why.contains("not trusted"),
        "{why}"
    );
    client.dispose().await.expect("dispose");

    // Through an HTTPS proxy's CONNECT tunnel, TLS end to end.
    let proxy = ConnectProxy::start();
    let mut o = wss(vec![tls.cert()]);
    o.transport.https_proxy = Some(("127.0.0.1".to_owned(), proxy.addr().port()));
    let client = connected(o).await;
    client.publish("tunnelled", &1).await.expect("publish");
    assert_eq!(proxy.targets(), [format!("localhost:{}", tls.port())]);
    client.dispose().await.expect("dispose");
    server.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_and_the_async_client_exchange_messages() {
    let Some(python) = py_sdk::python() else {
        return;
    };
    let server = RtmServer::start(RtmServerConfig::default()).expect("server");
    let client = connected(options(&server)).await;
    let mut sub = client
        .subscribe("py-to-async", Mode::Reliable, SubscribeOptions::default())
        .await
        .expect("subscribe");
    until_subscribed(&mut sub).await;
    let sent = py_sdk::message_types();
    let py = {
        let (python, endpoint_server, sent) = (python.clone(), &server, sent.clone());
        py_sdk::Py::spawn(
            &python,
            "publish.py",
            endpoint_server,
            "py-to-async",
            &[],
            &sent,
        )
    };
    assert_eq!(messages(&mut sub, sent.len()).await, sent);
    tokio::task::block_in_place(|| py.finish());

    let count = sent.len().to_string();
    let py = tokio::task::block_in_place(|| {
        let mut py = py_sdk::Py::spawn(
            &python,
            "subscribe.py",
            &server,
            "async-to-py",
            &["--count", &count],
            &[],
        );
        py.expect("subscribed");
        py
    });
    for m in &sent {
        client.publish("async-to-py", m).await.expect("publish");
    }
    let events = tokio::task::block_in_place(move || py.finish());
    assert_eq!(py_sdk::messages_of(&events), sent);
    client.dispose().await.expect("dispose");
    server.shutdown();
}

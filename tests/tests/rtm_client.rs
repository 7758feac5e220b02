//! The std messaging client against the local RTM server over real sockets.

use std::sync::mpsc;
use std::time::Duration;

use benchlink_sandbox::rtm::{
    RtmServer, RtmServerConfig, DEFAULT_APPKEY, SUPERUSER_ROLE, SUPERUSER_SECRET,
};
use benchlink_std::rtm::{
    Client, ClientOptions, Error, Mode, RequestError, SubscribeOptions, SubscriptionData,
    SubscriptionObserver,
};

const WAIT: Duration = Duration::from_secs(10);

struct Forward(mpsc::Sender<String>);

impl SubscriptionObserver for Forward {
    fn on_subscription_data(&mut self, data: &SubscriptionData) {
        for m in data.messages() {
            let _ = self.0.send(m.to_owned());
        }
    }
}

/// Forwards messages like [`Forward`] and says when the subscription is established.
struct Ready(Forward, mpsc::Sender<()>);

impl SubscriptionObserver for Ready {
    fn on_enter_subscribed(&mut self) {
        let _ = self.1.send(());
    }
    fn on_subscription_data(&mut self, data: &SubscriptionData) {
        self.0.on_subscription_data(data)
    }
}

fn client(server: &RtmServer) -> Client {
    let options = ClientOptions::new(server.endpoint(), DEFAULT_APPKEY);
    Client::new(options).unwrap()
}

#[test]
fn publish_subscribe_read_write() {
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let c = client(&server);
    c.start().unwrap();
    let (tx, rx) = mpsc::channel();
    c.subscribe(
        "animals",
        Mode::Reliable,
        Forward(tx),
        SubscribeOptions::default(),
    )
    .unwrap();
    let position = c
        .publish_sync("animals", &serde_json::json!({"who": "zebra"}), WAIT)
        .unwrap();
    assert!(position.contains(':'), "{position}");
    assert_eq!(rx.recv_timeout(WAIT).unwrap(), r#"{"who":"zebra"}"#);
    assert_eq!(c.read_sync("kv", WAIT).unwrap(), serde_json::Value::Null);
    let (wtx, wrx) = mpsc::channel();
    c.write(
        "kv",
        &42,
        Some(Box::new(move |r| wtx.send(r.to_owned()).unwrap())),
    )
    .unwrap();
    wrx.recv_timeout(WAIT).unwrap();
    assert_eq!(c.read_sync("kv", WAIT).unwrap(), serde_json::json!(42));
    assert!(c.is_connected());
    c.authenticate_sync(SUPERUSER_ROLE, SUPERUSER_SECRET, WAIT)
        .unwrap();
    c.dispose().unwrap();
}

/// A batch queues its requests in order under one lock, each with its own result: a
/// message that is not JSON is refused alone, the others go out, in order, and every
/// callback gets its own acknowledgement.
#[test]
fn a_batch_publishes_in_order_and_refuses_only_what_is_wrong() {
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let c = client(&server);
    c.start().unwrap();
    let (tx, rx) = mpsc::channel();
    let (ok_tx, ok_rx) = mpsc::channel();
    c.subscribe(
        "batched",
        Mode::Simple,
        Ready(Forward(tx), ok_tx),
        SubscribeOptions::default(),
    )
    .unwrap();
    ok_rx.recv_timeout(WAIT).unwrap();
    let (ack_tx, ack_rx) = mpsc::channel();
    let results: Vec<Result<(), Error>> = c.batch(|batch| {
        ["1", "{\"two\":2}", "{not json", "[3]", "\"four\""]
            .iter()
            .enumerate()
            .map(|(i, json)| {
                let ack_tx = ack_tx.clone();
                let callback = Box::new(move |r: benchlink_std::rtm::Response<'_>| {
                    let ok = matches!(&r, benchlink_std::rtm::Response::Reply(r) if r.is_ok());
                    ack_tx.send((i, ok)).unwrap();
                });
                batch.publish_json("batched", json, Some(callback))
            })
            .collect()
    });
    assert!(results[0].is_ok() && results[1].is_ok() && results[3].is_ok() && results[4].is_ok());
    assert!(
        matches!(results[2], Err(Error::Request(RequestError::InvalidJson))),
        "{results:?}"
    );
    let got: Vec<String> = (0..4).map(|_| rx.recv_timeout(WAIT).unwrap()).collect();
    assert_eq!(got, ["1", r#"{"two":2}"#, "[3]", r#""four""#]);
    let acks: Vec<(usize, bool)> = (0..4).map(|_| ack_rx.recv_timeout(WAIT).unwrap()).collect();
    assert_eq!(acks, [(0, true), (1, true), (3, true), (4, true)]);
    c.dispose().unwrap();
}

/// A connection delegate that reports `closed` and every message's JSON text, in order.
struct Events(mpsc::Sender<String>);

impl benchlink_std::rtm::ConnectionDelegate for Events {
    fn on_connection_closed(&mut self) {
        let _ = self.0.send("closed".into());
    }
    fn on_subscription_data(&mut self, data: &SubscriptionData) {
        for m in data.messages() {
            let _ = self.0.send(m.to_owned());
        }
    }
}

/// A `Connection` to `server` (not started) whose delegate is [`Events`].
fn connection(server: &RtmServer) -> (benchlink_std::rtm::Connection, mpsc::Receiver<String>) {
    let (tx, rx) = mpsc::channel();
    let conn = benchlink_std::rtm::Connection::new(
        &server.endpoint(),
        DEFAULT_APPKEY,
        Some(Box::new(Events(tx))),
        None,
    )
    .unwrap();
    (conn, rx)
}

#[test]
fn low_level_connection_sync_calls_and_restart() {
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let (conn, rx) = connection(&server);
    assert!(
        conn.publish_sync("c", &1, WAIT).is_err(),
        "calls before start fail"
    );
    conn.stop().unwrap(); // before start: nothing to close
    conn.start().unwrap();
    assert!(conn.start().is_err(), "a second start while open fails");
    conn.subscribe_sync("c", SubscribeOptions::default(), WAIT)
        .unwrap();
    conn.subscribe_sync("kept", SubscribeOptions::default(), WAIT)
        .unwrap();
    conn.publish_sync("c", &"hi", WAIT).unwrap();
    assert_eq!(rx.recv_timeout(WAIT).unwrap(), "\"hi\"");
    conn.unsubscribe_sync("c", WAIT).unwrap();
    assert!(
        conn.read_sync("missing", Duration::ZERO).is_err(),
        "timeout 0 fails at once"
    );
    conn.stop().unwrap();
    assert_eq!(rx.recv_timeout(WAIT).unwrap(), "closed");
    assert!(
        conn.publish_sync("c", &1, WAIT).is_err(),
        "a stopped connection sends nothing"
    );
    // The SDK contract: after stop(), start() opens a new connection, which has none of
    // the old one's subscriptions.
    conn.start().unwrap();
    conn.publish_sync("kept", &"not for us", WAIT).unwrap();
    conn.subscribe_sync("marker", SubscribeOptions::default(), WAIT)
        .unwrap();
    conn.publish_sync("marker", &"after", WAIT).unwrap();
    assert_eq!(
        rx.recv_timeout(WAIT).unwrap(),
        "\"after\"",
        "the old subscription was not restored"
    );
    // After a disconnect the connection is finished: a new one must be made.
    server.faults().drop_connections();
    assert_eq!(rx.recv_timeout(WAIT).unwrap(), "closed");
    assert!(conn.publish_sync("marker", &1, WAIT).is_err());
    assert!(conn.start().is_err(), "no restart after a disconnect");
    conn.stop().unwrap(); // nothing to close
}

/// A refused unsubscribe ends `unsubscribe_sync` with the error at once (not a timeout),
/// and the subscription goes on.
#[test]
fn connection_unsubscribe_error_reaches_the_caller() {
    use benchlink_sandbox::rtm::ReplyOverride;
    use benchlink_std::rtm::Error;
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let (conn, rx) = connection(&server);
    conn.start().unwrap();
    conn.subscribe_sync("c", SubscribeOptions::default(), WAIT)
        .unwrap();
    server.faults().override_replies(
        "rtm/unsubscribe",
        ReplyOverride::Raw(
            r#"{"action":"rtm/unsubscribe/error","id":{id},"body":{"error":"nope"}}"#.into(),
        ),
        Some(1),
    );
    match conn.unsubscribe_sync("c", WAIT) {
        Err(Error::Reply(r)) => {
            assert_eq!(r.action, "rtm/unsubscribe/error");
            assert_eq!(r.body, r#"{"error":"nope"}"#, "the server's own reply");
        }
        other => panic!("{other:?}"),
    }
    conn.publish_sync("c", &"still", WAIT).unwrap();
    assert_eq!(rx.recv_timeout(WAIT).unwrap(), "\"still\"");
    conn.unsubscribe_sync("c", WAIT).unwrap();
    conn.stop().unwrap();
}

/// A connection's subscribe and unsubscribe callbacks receive the server's replies
/// themselves, as the SDK contract says: `rtm/subscribe/ok` with the subscription's
/// `position`, a refused subscribe's own error body.
#[test]
fn connection_callbacks_receive_the_servers_replies() {
    use benchlink_sandbox::rtm::ReplyOverride;
    use benchlink_std::rtm::Response;
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let (conn, _rx) = connection(&server);
    conn.start().unwrap();
    let reply = |r: Response<'static>| match r {
        Response::Reply(r) => r,
        other => panic!("{other:?}"),
    };
    let (tx, rx) = mpsc::channel();
    let cb = move |r: Response<'_>| tx.send(r.to_owned()).unwrap();
    conn.subscribe("c", SubscribeOptions::default(), Some(Box::new(cb.clone())))
        .unwrap();
    let ok = reply(rx.recv_timeout(WAIT).unwrap());
    assert_eq!(ok.action, "rtm/subscribe/ok");
    let body: serde_json::Value = serde_json::from_str(&ok.body).unwrap();
    assert_eq!(body["subscription_id"], "c");
    assert!(
        body["position"].as_str().is_some_and(|p| p.contains(':')),
        "{body}"
    );
    conn.unsubscribe("c", Some(Box::new(cb.clone()))).unwrap();
    assert_eq!(
        reply(rx.recv_timeout(WAIT).unwrap()).action,
        "rtm/unsubscribe/ok"
    );
    server.faults().override_replies(
        "rtm/subscribe",
        ReplyOverride::Raw(
            r#"{"action":"rtm/subscribe/error","id":{id},"body":{"error":"denied","reason":"because"}}"#
                .into(),
        ),
        Some(1),
    );
    conn.subscribe("d", SubscribeOptions::default(), Some(Box::new(cb)))
        .unwrap();
    let refused = reply(rx.recv_timeout(WAIT).unwrap());
    assert_eq!(refused.action, "rtm/subscribe/error");
    assert_eq!(refused.body, r#"{"error":"denied","reason":"because"}"#);
    assert!(rx.try_recv().is_err(), "one reply per callback");
    conn.stop().unwrap();
}

#[test]
fn make_client_connects_authenticates_and_cleans_up() {
    use benchlink_std::rtm::make_client;
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let options = ClientOptions::new(server.endpoint(), DEFAULT_APPKEY);
    let position = make_client(
        options.clone(),
        Some((SUPERUSER_ROLE, SUPERUSER_SECRET)),
        |c| c.publish_sync("restricted-ops", &"x", WAIT),
    )
    .unwrap()
    .unwrap();
    assert!(position.contains(':'));
    let bad = make_client(options, Some((SUPERUSER_ROLE, "wrong")), |_| ());
    assert!(bad.is_err(), "a bad secret fails make_client");
    // The client retries a refused connection, as the SDK contract says: make_client
    // then fails when its wait ends; without retries it fails at once.
    let refused = make_client(
        ClientOptions {
            retry_first_connect: false,
            ..ClientOptions::new(server.endpoint(), "no-such-appkey")
        },
        None,
        |_| (),
    );
    assert!(
        matches!(refused, Err(benchlink_std::rtm::Error::Connect(_))),
        "{refused:?}"
    );
}

/// The observer given in the options (the SDK's `Client(..., observer=...)`, which
/// `make_client` takes too) hears the whole life of a `make_client` client: the connect
/// before the body runs, then the end, in order.
#[test]
fn make_client_takes_its_observer_from_the_options() {
    use benchlink_std::rtm::{make_client, ClientObserver, SharedObserver};
    use std::sync::{Arc, Mutex};
    #[derive(Default)]
    struct Events(Vec<&'static str>);
    impl ClientObserver for Events {
        fn on_enter_connecting(&mut self) {
            self.0.push("connecting");
        }
        fn on_enter_connected(&mut self) {
            self.0.push("connected");
        }
        fn on_enter_stopped(&mut self) {
            self.0.push("stopped");
        }
        fn on_enter_disposed(&mut self) {
            self.0.push("disposed");
        }
    }
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let events = Arc::new(Mutex::new(Events::default()));
    let mut options = ClientOptions::new(server.endpoint(), DEFAULT_APPKEY);
    options.observer = Some(SharedObserver::from(events.clone()));
    let seen_in_body = make_client(options, None, |_| events.lock().unwrap().0.clone()).unwrap();
    assert_eq!(seen_in_body, ["connecting", "connected"]);
    // The end stops and disposes at once: whether the close handshake finished (Stopped)
    // before the dispose is the server's timing.
    let all = events.lock().unwrap().0.clone();
    assert!(
        all == ["connecting", "connected", "disposed"]
            || all == ["connecting", "connected", "stopped", "disposed"],
        "{all:?}"
    );
}

#[test]
fn raw_actions_and_send() {
    use benchlink_std::rtm::{Connection, Response};
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let conn = Connection::new(&server.endpoint(), DEFAULT_APPKEY, None, None).unwrap();
    conn.start().unwrap();
    // A write through the raw action API, its reply through the callback.
    let (tx, rx) = mpsc::channel();
    let body = serde_json::json!({"channel": "raw", "message": {"v": 7}});
    conn.action(
        "rtm/write",
        &body,
        Some(Box::new(move |r| tx.send(r.to_owned()).unwrap())),
    )
    .unwrap();
    match rx.recv_timeout(WAIT).unwrap() {
        Response::Reply(r) => assert_eq!(r.action, "rtm/write/ok"),
        other => panic!("{other:?}"),
    }
    // An id-less PDU serialized by the caller.
    conn.send(r#"{"action":"rtm/write","body":{"channel":"raw","message":8}}"#)
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    while conn.read_sync("raw", WAIT).unwrap() != serde_json::json!(8) {
        assert!(
            std::time::Instant::now() < deadline,
            "the sent write never landed"
        );
    }
    // A PDU with the caller's own id goes out byte for byte, as the SDK contract's
    // send(payload); its reply is the caller's business.
    let own = r#"{"action":"rtm/write", "id":500,"body":{"channel":"raw","message":9}}"#;
    conn.send(own).unwrap();
    assert!(
        server.wait_for_connections(WAIT, |c| c
            .first()
            .is_some_and(|c| c.received.iter().any(|p| p == own))),
        "the server never got the caller's bytes"
    );
    while conn.read_sync("raw", WAIT).unwrap() != serde_json::json!(9) {
        assert!(
            std::time::Instant::now() < deadline,
            "the sent write never landed"
        );
    }
    assert!(conn.send("not json").is_err());
    conn.stop().unwrap();
}

/// The largest outgoing message is configuration (16 MiB by default, as for incoming
/// ones): a message of exactly that size goes out, through the hub, and back to a
/// subscriber whose incoming limit has room for its envelope; one byte more is refused
/// at the call, whatever the path (publish, publish_sync, write).
#[test]
fn a_message_at_the_outgoing_limit_goes_out_and_one_byte_more_is_refused() {
    const LIMIT: usize = 16 << 20;
    let server = RtmServer::start(RtmServerConfig {
        max_message_size: LIMIT + (64 << 10),
        max_queued_bytes: 4 * LIMIT,
        ..RtmServerConfig::default()
    })
    .unwrap();
    let options = ClientOptions::new(server.endpoint(), DEFAULT_APPKEY);
    assert_eq!(options.max_outgoing_message_size, LIMIT, "the default");
    let mut receiving = ClientOptions::new(server.endpoint(), DEFAULT_APPKEY);
    receiving.transport.max_message_size = LIMIT + (64 << 10);
    let sender = Client::new(options).unwrap();
    let receiver = Client::new(receiving).unwrap();
    sender.start().unwrap();
    receiver.start().unwrap();
    let (tx, rx) = mpsc::channel();
    let (ok_tx, ok_rx) = mpsc::channel();
    let observer = Ready(Forward(tx), ok_tx);
    receiver
        .subscribe("big", Mode::Simple, observer, SubscribeOptions::default())
        .unwrap();
    ok_rx.recv_timeout(WAIT).unwrap();

    // A JSON string of exactly LIMIT bytes, quotes included.
    let at_limit = format!("\"{}\"", "x".repeat(LIMIT - 2));
    let value: serde_json::Value = serde_json::from_str(&at_limit).unwrap();
    let position = sender.publish_sync("big", &value, WAIT);
    assert!(position.is_ok(), "{position:?}");
    let got = rx.recv_timeout(WAIT).unwrap();
    assert_eq!(got.len(), LIMIT);
    assert!(got == at_limit, "the message arrived changed");

    let over = format!("\"{}\"", "x".repeat(LIMIT - 1));
    let refused = |r: Result<(), Error>| {
        assert!(
            matches!(r, Err(Error::Request(RequestError::TooLarge))),
            "{r:?}"
        )
    };
    refused(sender.publish_json("big", &over, None));
    refused(sender.write("big", &"x".repeat(LIMIT - 1), None));
    let value: serde_json::Value = serde_json::from_str(&over).unwrap();
    refused(sender.publish_sync("big", &value, WAIT).map(|_| ()));
    // The refusals cost nothing: the connection still carries a message at the limit.
    let wrote = sender.publish_json("big", &at_limit, None);
    assert!(wrote.is_ok(), "{wrote:?}");
    let again = rx.recv_timeout(WAIT).unwrap();
    assert_eq!(again.len(), LIMIT);
    sender.dispose().unwrap();
    receiver.dispose().unwrap();
}

/// A view's query may be as long as the hub takes (4 KiB) by default: a 4,096-byte query
/// subscribes and its view delivers; one byte more is refused at the call (`TooLarge`),
/// and `max_subscription_args` raises the bound.
#[test]
fn a_view_query_of_four_kib_subscribes_and_one_byte_more_is_refused() {
    const QUERY: usize = 4096;
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let options = ClientOptions::new(server.endpoint(), DEFAULT_APPKEY);
    assert_eq!(options.max_subscription_args, QUERY, "the default");
    let c = Client::new(options).unwrap();
    c.start().unwrap();
    // `select * from big where a = '…'` padded to exactly QUERY bytes.
    let query = |n: usize| format!("select * from big where a = '{}'", "x".repeat(n - 30));
    assert_eq!(query(QUERY).len(), QUERY);
    let view = |q: &str| SubscribeOptions {
        filter: Some(q.to_owned()),
        ..SubscribeOptions::default()
    };
    let refused = c.subscribe(
        "v2",
        Mode::Simple,
        Forward(mpsc::channel().0),
        view(&query(QUERY + 1)),
    );
    assert!(
        matches!(refused, Err(Error::Request(RequestError::TooLarge))),
        "{refused:?}"
    );
    let (tx, rx) = mpsc::channel();
    let (ok_tx, ok_rx) = mpsc::channel();
    c.subscribe(
        "v",
        Mode::Simple,
        Ready(Forward(tx), ok_tx),
        view(&query(QUERY)),
    )
    .unwrap();
    ok_rx
        .recv_timeout(WAIT)
        .expect("the hub took the 4 KiB query");
    let pad = "x".repeat(QUERY - 30);
    c.publish_sync("big", &serde_json::json!({ "a": pad }), WAIT)
        .unwrap();
    c.publish_sync("big", &serde_json::json!({ "a": "other" }), WAIT)
        .unwrap();
    let got: serde_json::Value = serde_json::from_str(&rx.recv_timeout(WAIT).unwrap()).unwrap();
    assert_eq!(
        got["a"],
        serde_json::json!(pad),
        "the view's filter applied"
    );
    c.dispose().unwrap();

    // A larger bound takes a larger query (the hub then refuses it with its own error).
    let mut options = ClientOptions::new(server.endpoint(), DEFAULT_APPKEY);
    options.max_subscription_args = 2 * QUERY;
    let c = Client::new(options).unwrap();
    assert!(c
        .subscribe(
            "v3",
            Mode::Simple,
            Forward(mpsc::channel().0),
            view(&query(QUERY + 1))
        )
        .is_ok());
    c.dispose().unwrap();
}

/// The subscription table is as large as `max_subscriptions` says, past the 4,096 a
/// compile-time table once capped it at: 6,000 channels subscribe through the hub, the
/// 6,001st is refused at the call, and unsubscribing one makes room for another.
#[test]
fn the_subscription_table_is_as_large_as_configured() {
    const N: usize = 6_000;
    /// Says "subscribed" and "deleted".
    struct Count(mpsc::Sender<&'static str>);
    impl SubscriptionObserver for Count {
        fn on_enter_subscribed(&mut self) {
            let _ = self.0.send("subscribed");
        }
        fn on_deleted(&mut self) {
            let _ = self.0.send("deleted");
        }
    }
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let mut options = ClientOptions::new(server.endpoint(), DEFAULT_APPKEY);
    options.max_subscriptions = N;
    let c = Client::new(options).unwrap();
    c.start().unwrap();
    let (tx, rx) = mpsc::channel();
    for i in 0..N {
        c.subscribe(
            &format!("t{i}"),
            Mode::Simple,
            Count(tx.clone()),
            SubscribeOptions::default(),
        )
        .unwrap();
    }
    let extra = |name: &str| {
        c.subscribe(
            name,
            Mode::Simple,
            Count(tx.clone()),
            SubscribeOptions::default(),
        )
    };
    assert!(
        matches!(
            extra("one-more"),
            Err(Error::Request(RequestError::TooManySubscriptions))
        ),
        "the table is full"
    );
    for _ in 0..N {
        assert_eq!(
            rx.recv_timeout(WAIT),
            Ok("subscribed"),
            "every channel subscribed"
        );
    }
    c.unsubscribe("t0").unwrap();
    assert_eq!(rx.recv_timeout(WAIT), Ok("deleted"));
    extra("one-more").expect("room again after an unsubscribe");
    assert_eq!(
        rx.recv_timeout(WAIT),
        Ok("subscribed"),
        "the new one subscribed"
    );
    c.dispose().unwrap();
}

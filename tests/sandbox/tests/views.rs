//! Stream SQL views end to end, over real sockets: the worked transcripts of the view
//! protocol (projection, filtering, two views on a channel, functions, aggregation per
//! window, errors, forced replacement) and how views meet history, `only` and
//! unsubscribe.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use benchlink_sandbox::rtm::{RtmServer, RtmServerConfig, DEFAULT_APPKEY};
use serde_json::{json, Value};
use tungstenite::{Message, WebSocket};

const WAIT: Duration = Duration::from_secs(3);

struct Client {
    ws: WebSocket<TcpStream>,
}

fn connect(server: &RtmServer) -> Client {
    let tcp = TcpStream::connect(server.addr()).unwrap();
    tcp.set_read_timeout(Some(WAIT)).unwrap();
    let url = format!("{}/v2?appkey={DEFAULT_APPKEY}", server.endpoint());
    let (ws, _) = tungstenite::client(url, tcp).unwrap();
    Client { ws }
}

impl Client {
    fn send(&mut self, pdu: &str) {
        self.ws.send(Message::text(pdu)).unwrap();
    }

    fn recv(&mut self) -> Value {
        loop {
            if let Message::Text(t) = self.ws.read().expect("a frame") {
                return serde_json::from_str(t.as_str()).unwrap();
            }
        }
    }

    /// The reply to `pdu`, which must be the next PDU.
    fn call(&mut self, pdu: &str) -> Value {
        self.send(pdu);
        self.recv()
    }

    /// Publishes and waits for the `publish/ok` (views send data to other clients).
    fn publish(&mut self, channel: &str, message: &Value) {
        let pdu = json!({"action": "rtm/publish", "id": 0, "body": {"channel": channel, "message": message}});
        let reply = self.call(&pdu.to_string());
        assert_eq!(reply["action"], "rtm/publish/ok", "{reply}");
    }

    /// The next PDU, which must be data for `sid`: (position's sequence number,
    /// messages).
    fn data(&mut self, sid: &str) -> (u64, Vec<Value>) {
        let pdu = self.recv();
        assert_eq!(pdu["action"], "rtm/subscription/data", "{pdu}");
        assert_eq!(pdu["body"]["subscription_id"], sid, "{pdu}");
        let messages = pdu["body"]["messages"].as_array().unwrap().clone();
        assert!(!messages.is_empty(), "never an empty batch: {pdu}");
        (seq(&pdu["body"]["position"]), messages)
    }

    /// Nothing arrived: the reply to a request sent now is the next PDU (the server
    /// sends this connection everything caused before the request first, so what was
    /// due has come).
    fn quiet(&mut self) {
        let reply = self.call(r#"{"action":"rtm/read","id":99,"body":{"channel":"quiet.marker"}}"#);
        assert_eq!(
            reply["action"], "rtm/read/ok",
            "expected silence, got {reply}"
        );
        assert_eq!(reply["id"], 99, "{reply}");
    }
}

fn seq(position: &Value) -> u64 {
    let (_, n) = position.as_str().unwrap().split_once(':').unwrap();
    n.parse().unwrap()
}

fn subscribe(c: &mut Client, id: u64, body: &Value) -> Value {
    let pdu = json!({"action": "rtm/subscribe", "id": id, "body": body});
    c.call(&pdu.to_string())
}

fn subscribed(c: &mut Client, body: &Value) -> u64 {
    let reply = subscribe(c, 1, body);
    assert_eq!(reply["action"], "rtm/subscribe/ok", "{reply}");
    seq(&reply["body"]["position"])
}

fn start() -> (RtmServer, Client, Client) {
    let server = RtmServer::start(RtmServerConfig::default()).unwrap();
    let (sub, publisher) = (connect(&server), connect(&server));
    (server, sub, publisher)
}

#[test]
fn projection_with_a_missing_field() {
    let (_server, mut c, mut p) = start();
    let ok = subscribe(
        &mut c,
        1,
        &json!({"subscription_id": "filter_test_1", "fast_forward": true, "filter": "select test from filter_test_1"}),
    );
    assert_eq!(ok["action"], "rtm/subscribe/ok");
    assert_eq!(ok["body"]["subscription_id"], "filter_test_1");
    assert_eq!(seq(&ok["body"]["position"]), 0);
    p.publish("filter_test_1", &json!({"test": 42, "unused": 1}));
    assert_eq!(c.data("filter_test_1"), (1, vec![json!({"test": 42})]));
    p.publish("filter_test_1", &json!({"unused": 1}));
    assert_eq!(c.data("filter_test_1"), (2, vec![json!({"test": null})]));
}

#[test]
fn filtering_rows() {
    let (_server, mut c, mut p) = start();
    subscribed(
        &mut c,
        &json!({"subscription_id": "s", "filter": "select * from `ch` where test != 2", "force": true}),
    );
    for t in [1, 2, 3] {
        p.publish("ch", &json!({"test": t}));
    }
    assert_eq!(c.data("s"), (1, vec![json!({"test": 1})]));
    assert_eq!(c.data("s"), (3, vec![json!({"test": 3})]));
    // The publisher's acks are in: every row was filtered or sent by now.
    c.quiet();
}

#[test]
fn two_views_on_one_channel_and_a_function() {
    let (_server, mut c, mut p) = start();
    subscribed(
        &mut c,
        &json!({"subscription_id": "s1", "filter": "select * FROM `ch`"}),
    );
    subscribed(
        &mut c,
        &json!({"subscription_id": "s2", "filter": "select * FROM `ch`"}),
    );
    subscribed(
        &mut c,
        &json!({"subscription_id": "s3", "filter": "select concat(who,'-view') as name from `ch`"}),
    );
    p.publish("ch", &json!({"foo": "bar"}));
    p.publish("ch", &json!({"who": "zebra"}));
    let mut got: Vec<(String, Value)> = Vec::new();
    for _ in 0..6 {
        let pdu = c.recv();
        let sid = pdu["body"]["subscription_id"].as_str().unwrap().to_owned();
        got.push((sid, pdu["body"]["messages"][0].clone()));
    }
    got.sort_by(|a, b| a.0.cmp(&b.0));
    let want = [
        ("s1", json!({"foo": "bar"})),
        ("s1", json!({"who": "zebra"})),
        ("s2", json!({"foo": "bar"})),
        ("s2", json!({"who": "zebra"})),
        ("s3", json!({"name": null})),
        ("s3", json!({"name": "zebra-view"})),
    ];
    assert_eq!(got, want.map(|(s, v)| (s.to_owned(), v)));
}

#[test]
fn aggregated_count_per_group_at_the_window_end() {
    let (server, mut c, mut p) = start();
    let start = subscribed(
        &mut c,
        &json!({"subscription_id": "stats", "filter": "select count(*) as count, who from `animals` group by who"}),
    );
    let subscribed_at = Instant::now();
    p.publish("animals", &json!({"who": "zebra", "where": [34.1, -118.2]}));
    p.publish(
        "animals",
        &json!({"who": "giraffe", "where": [35.0, -117.0]}),
    );
    p.publish("animals", &json!({"who": "zebra", "where": [34.2, -118.1]}));
    p.publish("animals", &json!("not an object"));
    // No period: one second; the rows come together when it ends.
    let (position, rows) = c.data("stats");
    assert!(
        subscribed_at.elapsed() >= Duration::from_millis(500),
        "not before the window ends"
    );
    assert_eq!(position, start + 4, "just after the last consumed message");
    assert_eq!(
        rows,
        [
            json!({"count": 2, "who": "zebra"}),
            json!({"count": 1, "who": "giraffe"})
        ]
    );
    // An empty window sends nothing: its end comes (the clock run ahead), and then nothing
    // arrived.
    server.faults().run_view_clock(Duration::from_millis(1100));
    c.quiet();
    p.publish("animals", &json!({"who": "lion"}));
    assert_eq!(server.faults().close_view_windows(), 1);
    assert_eq!(
        c.data("stats"),
        (start + 5, vec![json!({"count": 1, "who": "lion"})])
    );
}

#[test]
fn unaliased_aggregate_with_a_long_period_closed_by_the_test_hook() {
    let (server, mut c, mut p) = start();
    subscribed(
        &mut c,
        &json!({"subscription_id": "n", "filter": "SELECT COUNT(*) FROM `test`", "period": 5}),
    );
    for m in [json!({"a": 1}), json!({}), json!("string"), json!({"b": 2})] {
        p.publish("test", &m);
    }
    assert_eq!(server.faults().close_view_windows(), 1);
    assert_eq!(c.data("n"), (4, vec![json!({"COUNT(*)": 3})]));
    assert_eq!(server.faults().close_view_windows(), 1);
    c.quiet();
}

#[test]
fn invalid_sql_is_invalid_filter() {
    let (_server, mut c, _p) = start();
    c.send(r#"{"action":"rtm/subscribe","id":2,"body":{"subscription_id":"ch","fast_forward":true,"filter":"wrong_filter"}}"#);
    let reply = c.ws.read().unwrap().into_text().unwrap();
    assert_eq!(
        reply.as_str(),
        r#"{"action":"rtm/subscribe/error","id":2,"body":{"error":"invalid_filter","reason":"Invalid filter: expected SELECT","subscription_id":"ch"}}"#
    );
    for (sql, reason) in [
        (
            "select * from ch order by a",
            "Invalid filter: ORDER BY is not supported",
        ),
        (
            "select nope(a) from ch",
            "Invalid filter: the function nope is not supported",
        ),
        (
            "select * from ch where count(*) > 1",
            "Invalid filter: an aggregate function in WHERE is not supported",
        ),
        (
            "select * from",
            "Invalid filter: expected a channel name after FROM",
        ),
    ] {
        let reply = subscribe(&mut c, 3, &json!({"subscription_id": "v", "filter": sql}));
        assert_eq!(reply["action"], "rtm/subscribe/error");
        assert_eq!(
            reply["body"],
            json!({"error": "invalid_filter", "reason": reason, "subscription_id": "v"}),
            "{sql}"
        );
    }
}

#[test]
fn hostile_queries_are_refused() {
    let (_server, mut c, _p) = start();
    let long = format!("select * from ch where a = '{}'", "x".repeat(100_000));
    let deep = format!("select {}a{} from ch", "(".repeat(1000), ")".repeat(1000));
    let chain = format!("select a{} from ch", " + a".repeat(1000));
    for sql in [long, deep, chain] {
        let reply = subscribe(&mut c, 3, &json!({"subscription_id": "v", "filter": sql}));
        assert_eq!(reply["body"]["error"], "invalid_filter", "{reply}");
    }
    // The connection is still served.
    subscribed(
        &mut c,
        &json!({"subscription_id": "v", "filter": "select * from ch"}),
    );
}

#[test]
fn malformed_view_requests_are_invalid_format() {
    let (_server, mut c, _p) = start();
    let table = [
        (
            json!({"filter": "select * from ch"}),
            "Invalid PDU: 'subscription_id' was missing",
        ),
        (
            json!({"subscription_id": "v", "channel": "other", "filter": "select * from ch"}),
            "Invalid PDU: 'channel' does not match the filter",
        ),
        (
            json!({"subscription_id": "v", "filter": 42}),
            "Invalid PDU: 'filter' was invalid",
        ),
        (
            json!({"subscription_id": "v", "filter": "select * from a", "view": "select * from b"}),
            "Invalid PDU: 'filter' and 'view' differ",
        ),
        (
            json!({"subscription_id": "v", "filter": "select * from ch", "period": 0}),
            "Invalid PDU: 'period' was invalid",
        ),
        (
            json!({"subscription_id": "v", "filter": "select * from ch", "period": 61}),
            "Invalid PDU: 'period' was invalid",
        ),
        (
            json!({"subscription_id": "v", "filter": "select * from ch", "period": -1}),
            "Invalid PDU: 'period' was invalid",
        ),
        (
            json!({"subscription_id": "v", "filter": "select * from ch", "period": 1.5}),
            "Invalid PDU: 'period' was invalid",
        ),
        (
            json!({"subscription_id": "v", "filter": "select * from ch", "period": "1"}),
            "Invalid PDU: 'period' was invalid",
        ),
        // The shape is checked before the SQL.
        (
            json!({"subscription_id": "v", "filter": "wrong", "period": 0}),
            "Invalid PDU: 'period' was invalid",
        ),
    ];
    for (body, reason) in table {
        let reply = subscribe(&mut c, 4, &body);
        assert_eq!(reply["action"], "rtm/subscribe/error", "{body}");
        assert_eq!(reply["body"]["error"], "invalid_format", "{body}");
        assert_eq!(reply["body"]["reason"], reason, "{body}");
        if body.get("subscription_id").is_some() {
            assert_eq!(reply["body"]["subscription_id"], "v");
        }
    }
    // Accepted: the same channel named twice, `period` null, an empty filter (a plain
    // subscription), `period` on a plain subscription, a simple view with a period.
    for body in [
        json!({"subscription_id": "a", "channel": "ch", "filter": "select * from ch"}),
        json!({"subscription_id": "b", "filter": "select * from ch", "period": null}),
        json!({"channel": "ch", "filter": ""}),
        json!({"subscription_id": "p", "channel": "ch", "filter": null, "period": 1}),
        json!({"subscription_id": "s", "filter": "select * from ch", "period": 60}),
    ] {
        subscribed(&mut c, &body);
    }
}

#[test]
fn force_replaces_a_plain_subscription_with_a_view() {
    let (_server, mut c, mut p) = start();
    let start = subscribed(&mut c, &json!({"subscription_id": "C", "channel": "C"}));
    let reply = subscribe(
        &mut c,
        4,
        &json!({"subscription_id": "C", "view": "select concat(who,'-view') as name from `C`"}),
    );
    assert_eq!(
        reply["body"]["error"], "already_subscribed",
        "no force: {reply}"
    );
    let replaced = subscribed(
        &mut c,
        &json!({"subscription_id": "C", "view": "select concat(who,'-view') as name from `C`", "force": true}),
    );
    assert_eq!(replaced, start);
    p.publish("C", &json!({"who": "zebra"}));
    assert_eq!(
        c.data("C"),
        (start + 1, vec![json!({"name": "zebra-view"})])
    );
}

#[test]
fn a_failed_replacement_keeps_the_view_and_a_replacement_drops_the_open_window() {
    let (server, mut c, mut p) = start();
    subscribed(
        &mut c,
        &json!({"subscription_id": "v", "filter": "SELECT COUNT(*) FROM `test`", "period": 60, "force": true}),
    );
    p.publish("test", &json!({}));
    let reply = subscribe(
        &mut c,
        5,
        &json!({"subscription_id": "v", "filter": "select from", "force": true}),
    );
    assert_eq!(reply["body"]["error"], "invalid_filter");
    p.publish("test", &json!({}));
    server.faults().close_view_windows();
    assert_eq!(
        c.data("v").1,
        [json!({"COUNT(*)": 2})],
        "the old view ran on"
    );
    // Replacing it discards its open window.
    p.publish("test", &json!({}));
    subscribed(
        &mut c,
        &json!({"subscription_id": "v", "filter": "SELECT COUNT(*) AS n FROM `test`", "period": 60, "force": true}),
    );
    p.publish("test", &json!({}));
    server.faults().close_view_windows();
    assert_eq!(c.data("v").1, [json!({"n": 1})]);
}

#[test]
fn unsubscribe_discards_the_open_window() {
    let (server, mut c, mut p) = start();
    subscribed(
        &mut c,
        &json!({"subscription_id": "v", "filter": "select count(*) as n from ch", "period": 1}),
    );
    p.publish("ch", &json!({}));
    let reply = c.call(r#"{"action":"rtm/unsubscribe","id":6,"body":{"subscription_id":"v"}}"#);
    assert_eq!(reply["action"], "rtm/unsubscribe/ok");
    assert_eq!(server.faults().close_view_windows(), 0);
    // The discarded window's scheduled end comes (the clock run past it) and sends nothing.
    server.faults().run_view_clock(Duration::from_millis(1100));
    c.quiet();
    let reply = c.call(r#"{"action":"rtm/unsubscribe","id":7,"body":{"subscription_id":"v"}}"#);
    assert_eq!(reply["body"]["error"], "not_subscribed");
}

#[test]
fn history_goes_through_the_view_and_only_value_changes_compares_results() {
    let (server, mut c, _p) = start();
    for m in [
        json!({"who": "a", "n": 1}),
        json!("x"),
        json!({"who": "a", "n": 2}),
        json!(7),
        json!({"who": "b"}),
    ] {
        server.publish("ch", &m.to_string()).unwrap();
    }
    subscribed(
        &mut c,
        &json!({"subscription_id": "v", "filter": "select who from ch", "history": {"count": 5}, "only": "value_changes"}),
    );
    let mut got = Vec::new();
    while got.len() < 2 {
        got.extend(c.data("v").1);
    }
    assert_eq!(got, [json!({"who": "a"}), json!({"who": "b"})]);
    // History replayed into an aggregated view falls into its first window.
    subscribed(
        &mut c,
        &json!({"subscription_id": "n", "filter": "select count(*) as n from ch", "history": {"count": 5}, "period": 60}),
    );
    server.faults().close_view_windows();
    assert_eq!(c.data("n"), (5, vec![json!({"n": 3})]));
}

#[test]
fn a_flood_of_groups_closes_windows_early() {
    // A publisher floods an aggregated view (60 s period) with a new group per message:
    // the window does not grow past its bound of 1000 groups but is sent as soon as it
    // reaches it, without waiting for the period.
    let (_server, mut c, mut p) = start();
    subscribed(
        &mut c,
        &json!({"subscription_id": "g", "filter": "select k, count(*) as n from ch group by k", "period": 60}),
    );
    for k in 0..2500 {
        let pdu = json!({"action": "rtm/publish", "body": {"channel": "ch", "message": {"k": k}}});
        p.send(&pdu.to_string());
    }
    // A window's rows go out in data PDUs of at most 100 rows, all with the position
    // just after the window's last message.
    let mut window = |end: u64| {
        let mut rows = Vec::new();
        while rows.len() < 1000 {
            let (position, some) = c.data("g");
            assert_eq!(position, end);
            assert!(some.len() <= 100);
            rows.extend(some);
        }
        rows
    };
    let first = window(1000);
    assert_eq!(first.len(), 1000);
    assert_eq!(
        (first[0].clone(), first[999].clone()),
        (json!({"k": 0, "n": 1}), json!({"k": 999, "n": 1}))
    );
    let second = window(2000);
    assert_eq!(second[0], json!({"k": 1000, "n": 1}));
    // Every publish handled (an acknowledged one after them), and no third window early.
    p.publish("other", &json!(0));
    c.quiet();
}

#[test]
fn a_view_starts_at_a_position() {
    let (server, mut c, _p) = start();
    let first = server.publish("ch", r#"{"i":0}"#).unwrap();
    for i in 1..3 {
        server.publish("ch", &format!(r#"{{"i":{i}}}"#)).unwrap();
    }
    let at = subscribed(
        &mut c,
        &json!({"subscription_id": "v", "filter": "select i from ch where i > 0", "position": first}),
    );
    assert_eq!(at, 0);
    let mut got = Vec::new();
    while got.len() < 2 {
        let (position, messages) = c.data("v");
        got.extend(messages.into_iter().map(|m| (m, position)));
    }
    // Each result's position is just after the message that produced it (batched
    // results: after the last of the batch).
    assert_eq!(got.last().unwrap(), &(json!({"i": 2}), 3));
    assert_eq!(
        got.iter().map(|g| g.0.clone()).collect::<Vec<_>>(),
        [json!({"i": 1}), json!({"i": 2})]
    );
}

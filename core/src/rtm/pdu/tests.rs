//! PDU tests: byte-exact requests, the protocol's reply and unsolicited shapes,
//! classification.

use super::*;
use crate::http::{Cursor, EncodeError};
use crate::json::testing::Buf;
use crate::json::{ErrorKind, WriteError};

/// The CBOR encoding against the reference SDK's bytes.
#[cfg(feature = "cbor")]
mod cbor;

type Text = Buf<1024>;

fn encoded(req: &Request<'_>, id: Option<u64>) -> Text {
    let mut buf = [0u8; 1024];
    let mut out = Cursor::new(&mut buf);
    req.encode(id, &mut out).unwrap();
    let mut t = Text::new();
    t.push(out.written());
    t
}

fn body(req: &Request<'_>) -> Text {
    let mut buf = [0u8; 1024];
    let mut out = Cursor::new(&mut buf);
    req.encode_body(&mut out).unwrap();
    let mut t = Text::new();
    t.push(out.written());
    t
}

fn text(args: core::fmt::Arguments<'_>) -> Text {
    let mut t = Text::new();
    core::fmt::write(&mut t, args).unwrap();
    t
}

/// Every request with and without id, byte for byte, plus: the PDU parses back to the
/// same action and id, and `encode_body` + `write_envelope` give the same bytes.
#[test]
fn every_request_byte_exact() {
    let cases: [(Request<'_>, &str, &str); 10] = [
        (
            Request::Publish {
                channel: "chan",
                message: r#"{"k": 1}"#.into(),
            },
            "rtm/publish",
            r#"{"channel":"chan","message":{"k": 1}}"#,
        ),
        (
            Request::Subscribe(SubscribeRequest::channel("chan")),
            "rtm/subscribe",
            r#"{"channel":"chan"}"#,
        ),
        (
            Request::Unsubscribe {
                subscription_id: "chan",
            },
            "rtm/unsubscribe",
            r#"{"subscription_id":"chan"}"#,
        ),
        (
            Request::Read {
                channel: "kv",
                position: Some("1:2"),
                extras: None,
            },
            "rtm/read",
            r#"{"channel":"kv","position":"1:2"}"#,
        ),
        (
            Request::Write {
                channel: "kv",
                message: "null".into(),
            },
            "rtm/write",
            r#"{"channel":"kv","message":null}"#,
        ),
        (
            Request::Delete { channel: "kv" },
            "rtm/delete",
            r#"{"channel":"kv"}"#,
        ),
        (
            Request::Handshake {
                method: "role_secret",
                data: ("role", "superuser"),
            },
            "auth/handshake",
            r#"{"method":"role_secret","data":{"role":"superuser"}}"#,
        ),
        (
            Request::Authenticate {
                method: "role_secret",
                credentials: ("hash", "P6COJ5aXJvIRoJO1PaYREw=="),
            },
            "auth/authenticate",
            r#"{"method":"role_secret","credentials":{"hash":"P6COJ5aXJvIRoJO1PaYREw=="}}"#,
        ),
        (
            Request::Search { prefix: "ch" },
            "rtm/search",
            r#"{"prefix":"ch"}"#,
        ),
        (
            Request::Other {
                action: "x/y",
                body: r#" {"a": [1], "b": {}} "#,
            },
            "x/y",
            r#"{"a":[1],"b":{}}"#,
        ),
    ];
    for (req, action, expected_body) in cases {
        assert_eq!(req.action().as_str(), action);
        assert_eq!(body(&req), expected_body);
        for id in [None, Some(0), Some(42), Some(u64::MAX)] {
            let pdu = encoded(&req, id);
            let expected = match id {
                Some(id) => text(format_args!(
                    r#"{{"action":"{action}","id":{id},"body":{expected_body}}}"#
                )),
                None => text(format_args!(
                    r#"{{"action":"{action}","body":{expected_body}}}"#
                )),
            };
            assert_eq!(pdu.as_str(), expected.as_str());
            let parsed = Pdu::parse(pdu.as_str()).unwrap();
            assert_eq!(parsed.action, req.action());
            assert_eq!(parsed.id.and_then(|i| i.as_u64()), id);
            // The offline-queue path gives the same bytes.
            let stored = body(&req);
            let mut buf = [0u8; 1024];
            let mut out = Cursor::new(&mut buf);
            write_envelope(action, id, stored.as_str(), &mut out).unwrap();
            assert_eq!(out.written(), pdu.as_bytes());
        }
    }
}

/// Everything is escaped, channel names included (the Python SDK splices channel names
/// into its JSON unescaped).
#[test]
fn channel_names_and_messages_are_escaped() {
    let channel = "a\"b\\c\n\u{1}\u{1f}é😀/";
    let escaped = r#"a\"b\\c\n\u0001\u001fé😀/"#;
    let message = r#"{"text": "q\"\\ é \u00e9 \n"}"#;
    let publish = Request::Publish {
        channel,
        message: message.into(),
    };
    assert_eq!(
        encoded(&publish, Some(1)),
        text(format_args!(
            r#"{{"action":"rtm/publish","id":1,"body":{{"channel":"{escaped}","message":{message}}}}}"#
        ))
        .as_str()
    );
    // Every request that carries a string: parse back and compare decoded text.
    for req in [
        publish,
        Request::Write {
            channel,
            message: message.into(),
        },
        Request::Delete { channel },
        Request::Read {
            channel,
            position: Some(channel),
            extras: None,
        },
        Request::Subscribe(SubscribeRequest {
            position: Some(channel),
            ..SubscribeRequest::channel(channel)
        }),
        Request::Subscribe(SubscribeRequest::view(channel, channel)),
        Request::Unsubscribe {
            subscription_id: channel,
        },
        Request::Search { prefix: channel },
        Request::Handshake {
            method: "role_secret",
            data: ("role", channel),
        },
        Request::Authenticate {
            method: "role_secret",
            credentials: ("hash", channel),
        },
    ] {
        let pdu = encoded(&req, None);
        let p = Pdu::parse(pdu.as_str()).unwrap();
        let body = p.body.unwrap();
        let mut strings = 0;
        for (key, value) in body.as_json().unwrap().members() {
            let value = match key.as_raw() {
                "data" | "credentials" => value.as_object().unwrap().members().next().unwrap().1,
                _ => value,
            };
            if let Some(s) = value.as_str() {
                if key != "method" {
                    assert!(s == channel, "{pdu:?}");
                    strings += 1;
                }
            }
        }
        assert!(strings >= 1, "{pdu:?}");
        if let Some(m) = p.message() {
            assert_eq!(m.as_json().unwrap().as_raw(), message);
        }
    }
    // Escaped action names too (generic actions).
    assert_eq!(
        encoded(
            &Request::Other {
                action: "a\"",
                body: "{}"
            },
            None
        ),
        r#"{"action":"a\"","body":{}}"#
    );
}

/// The Python SDK's subscribe bodies (its documented examples and those of a recorded
/// session), minus the deliberate differences: compact spacing, and never
/// `"position": null`.
#[test]
fn subscribe_bodies() {
    let ff = |sub: SubscribeRequest<'static>| SubscribeRequest {
        fast_forward: true,
        ..sub
    };
    let cases: [(SubscribeRequest<'_>, &str); 9] = [
        (
            SubscribeRequest {
                position: Some("1479315802:6"),
                ..ff(SubscribeRequest::channel("chan"))
            },
            r#"{"channel":"chan","fast_forward":true,"position":"1479315802:6"}"#,
        ),
        (
            ff(SubscribeRequest::view("view1", "select * from chan")),
            r#"{"subscription_id":"view1","fast_forward":true,"filter":"select * from chan"}"#,
        ),
        (
            ff(SubscribeRequest::channel("chan")),
            r#"{"channel":"chan","fast_forward":true}"#,
        ),
        (SubscribeRequest::channel("adv"), r#"{"channel":"adv"}"#),
        (
            SubscribeRequest {
                position: Some("bad"),
                ..SubscribeRequest::channel("badpos")
            },
            r#"{"channel":"badpos","position":"bad"}"#,
        ),
        (
            SubscribeRequest {
                history: Some(History::Count(1)),
                ..SubscribeRequest::channel("c")
            },
            r#"{"channel":"c","history":{"count":1}}"#,
        ),
        (
            SubscribeRequest {
                history: Some(History::Age(60)),
                period: Some(60),
                force: true,
                only_value_changes: true,
                ..SubscribeRequest::view("v", "select test from ch")
            },
            r#"{"subscription_id":"v","filter":"select test from ch","history":{"age":60},"period":60,"force":true,"only":"value_changes"}"#,
        ),
        // Extras override typed members (position, fast_forward) and add new ones, each
        // key once, last occurrence winning.
        (
            SubscribeRequest {
                position: Some("1:1"),
                extras: Some(r#"{"position":"2:2","x":{"y":[1]},"fast_forward":false,"x":3}"#),
                ..ff(SubscribeRequest::channel("chan"))
            },
            r#"{"channel":"chan","position":"2:2","fast_forward":false,"x":3}"#,
        ),
        // An extra `history` replaces the typed one whatever its shape.
        (
            SubscribeRequest {
                history: Some(History::Count(5)),
                extras: Some(r#"{"history":{"age":1}}"#),
                ..SubscribeRequest::channel("c")
            },
            r#"{"channel":"c","history":{"age":1}}"#,
        ),
    ];
    for (sub, expected) in cases {
        assert_eq!(body(&Request::Subscribe(sub)), expected);
    }
    // The subscribe PDUs of a recorded Python SDK session, compact.
    let sub = SubscribeRequest {
        position: Some("1479315802:6"),
        ..ff(SubscribeRequest::channel("chan"))
    };
    assert_eq!(
        encoded(&Request::Subscribe(sub), Some(2)),
        r#"{"action":"rtm/subscribe","id":2,"body":{"channel":"chan","fast_forward":true,"position":"1479315802:6"}}"#
    );
    assert_eq!(
        encoded(
            &Request::Publish {
                channel: "chan",
                message: r#"{"k": 1}"#.into()
            },
            None
        ),
        r#"{"action":"rtm/publish","body":{"channel":"chan","message":{"k": 1}}}"#
    );
    assert_eq!(
        encoded(
            &Request::Publish {
                channel: "chan",
                message: r#""second""#.into()
            },
            Some(7)
        ),
        r#"{"action":"rtm/publish","id":7,"body":{"channel":"chan","message":"second"}}"#
    );
}

#[test]
fn read_extras_merge() {
    let req = Request::Read {
        channel: "kv",
        position: None,
        extras: Some(r#"{"position":"9:9","extra":true}"#),
    };
    assert_eq!(
        body(&req),
        r#"{"channel":"kv","position":"9:9","extra":true}"#
    );
}

#[test]
fn invalid_pre_serialized_values_are_typed_errors() {
    let mut buf = [0u8; 256];
    let cases: [(Request<'_>, WriteError); 6] = [
        (
            Request::Publish {
                channel: "c",
                message: "{\"a\":".into(),
            },
            WriteError::InvalidJson {
                offset: 5,
                kind: ErrorKind::UnexpectedEnd,
            },
        ),
        (
            Request::Write {
                channel: "c",
                message: "".into(),
            },
            WriteError::InvalidJson {
                offset: 0,
                kind: ErrorKind::UnexpectedEnd,
            },
        ),
        (
            Request::Publish {
                channel: "c",
                message: "1 2".into(),
            },
            WriteError::InvalidJson {
                offset: 2,
                kind: ErrorKind::TrailingData,
            },
        ),
        (
            Request::Subscribe(SubscribeRequest {
                extras: Some("[1]"),
                ..SubscribeRequest::channel("c")
            }),
            WriteError::NotAnObject,
        ),
        (
            Request::Read {
                channel: "c",
                position: None,
                extras: Some("{"),
            },
            WriteError::InvalidJson {
                offset: 1,
                kind: ErrorKind::UnexpectedEnd,
            },
        ),
        (
            Request::Other {
                action: "a",
                body: "\"s\"",
            },
            WriteError::NotAnObject,
        ),
    ];
    for (req, err) in cases {
        assert_eq!(req.encode(Some(1), &mut Cursor::new(&mut buf)), Err(err));
        assert_eq!(req.encode_body(&mut Cursor::new(&mut buf)), Err(err));
    }
    for (body, err) in [
        ("[]", WriteError::NotAnObject),
        (" 1", WriteError::NotAnObject),
        (
            "{",
            WriteError::InvalidJson {
                offset: 1,
                kind: ErrorKind::UnexpectedEnd,
            },
        ),
        (
            "{} x",
            WriteError::InvalidJson {
                offset: 3,
                kind: ErrorKind::TrailingData,
            },
        ),
        // Whitespace that is not JSON's (a no-break space) does not start a value.
        (
            "\u{a0}{}",
            WriteError::InvalidJson {
                offset: 0,
                kind: ErrorKind::ExpectedValue,
            },
        ),
    ] {
        assert_eq!(
            write_envelope("a", None, body, &mut Cursor::new(&mut buf)),
            Err(err)
        );
    }
    // JSON's whitespace around the object is accepted (and left out).
    let mut out = Cursor::new(&mut buf);
    write_envelope("a", None, " \t\r\n{} ", &mut out).unwrap();
    assert_eq!(out.written(), br#"{"action":"a","body":{}}"#);
}

#[test]
fn buffer_too_small_at_every_size() {
    let req = Request::Subscribe(SubscribeRequest {
        position: Some("1:2"),
        history: Some(History::Count(3)),
        extras: Some(r#"{"z":[1]}"#),
        ..SubscribeRequest::view("v\"", "select * from c")
    });
    let full = encoded(&req, Some(12345));
    for cap in 0..full.len() {
        let mut buf = [0u8; 1024];
        assert_eq!(
            req.encode(Some(12345), &mut Cursor::new(&mut buf[..cap])),
            Err(WriteError::Encode(EncodeError::BufferTooSmall {
                capacity: cap
            }))
        );
    }
}

#[test]
fn actions_round_trip() {
    for &a in Action::ALL {
        assert_eq!(Action::parse(a.as_str()), a);
        let req = a.request();
        match a.outcome() {
            Some(_) => assert_ne!(req, a),
            None => assert_eq!(req, a),
        }
    }
    use Action::*;
    for (a, req, outcome) in [
        (PublishOk, Publish, Some(Outcome::Ok)),
        (SearchData, Search, Some(Outcome::Data)),
        (AuthenticateError, Authenticate, Some(Outcome::Error)),
        (
            SubscriptionData,
            Other("rtm/subscription"),
            Some(Outcome::Data),
        ),
        (SubscriptionInfo, SubscriptionInfo, None),
        (Other("a/b/ok/x"), Other("a/b/ok/x"), None),
        (Other("okay"), Other("okay"), None),
        (Other("a/data"), Other("a"), Some(Outcome::Data)),
    ] {
        assert_eq!((a.request(), a.outcome()), (req, outcome), "{a}");
    }
    // Escaped action names are matched after decoding.
    let p = Pdu::parse(r#"{"action":"rtm\/publish\/ok","id":1}"#).unwrap();
    assert_eq!(p.action, PublishOk);
    let p = Pdu::parse(r#"{"action":"x\/y","id":1,"body":{}}"#).unwrap();
    assert_eq!(p.action, Other(r"x\/y"));
}

fn reply(text: &str) -> (Id<'_>, Pdu<'_>) {
    match Incoming::parse(text) {
        Ok(Incoming::Reply { id, pdu }) => (id, pdu),
        other => panic!("{text}: {other:?}"),
    }
}

/// Every reply shape of the protocol, errors included.
#[test]
fn replies() {
    let (id, p) = reply(
        r#"{"action": "rtm/publish/error", "body": {"error": "authorization_denied", "reason": "Unauthorized"}, "id": 0}"#,
    );
    assert_eq!((id, p.action), (Id::Int(0), Action::PublishError));
    assert_eq!(p.action.request(), Action::Publish);
    let e = p.error();
    assert!(e.error.unwrap() == "authorization_denied" && e.reason.unwrap() == "Unauthorized");

    let (_, p) = reply(r#"{"action":"rtm/publish/ok","id":1,"body":{"position":"1479315802:0"}}"#);
    assert!(p.position().unwrap() == "1479315802:0");
    // publish/ok and delete/ok may come without a body (the reference SDK accepts it).
    let (_, p) = reply(r#"{"action":"rtm/publish/ok","id":1}"#);
    assert_eq!((p.body, p.position()), (None, None));
    let (_, p) = reply(r#"{"action":"rtm/delete/ok","id":2}"#);
    assert_eq!(p.action, Action::DeleteOk);

    let (_, p) = reply(
        r#"{"action":"rtm/subscribe/ok","id":3,"body":{"position":"1:5","subscription_id":"chan"}}"#,
    );
    assert!(p.subscription_id().unwrap() == "chan" && p.position().unwrap() == "1:5");
    let (_, p) = reply(
        r#"{"action":"rtm/subscribe/error","id":4,"body":{"error":"invalid_format","reason":"Invalid PDU: 'position' was invalid","subscription_id":"badpos"}}"#,
    );
    assert!(p.error().reason.unwrap() == "Invalid PDU: 'position' was invalid");
    assert!(p.subscription_id().unwrap() == "badpos");
    let (_, p) = reply(
        r#"{"action":"rtm/unsubscribe/ok","id":5,"body":{"position":"1:6","subscription_id":"chan"}}"#,
    );
    assert_eq!(p.action, Action::UnsubscribeOk);

    let (_, p) =
        reply(r#"{"action":"rtm/read/ok","id":6,"body":{"message":null,"position":"1:0"}}"#);
    assert!(p.message().unwrap().is_null());
    let (_, p) = reply(r#"{"action":"rtm/read/ok","id":6,"body":{"message":[1,{"a":"\u00e9"}]}}"#);
    assert_eq!(
        p.message().unwrap().as_json().unwrap().as_raw(),
        r#"[1,{"a":"\u00e9"}]"#
    );
    let (_, p) = reply(r#"{"action":"rtm/write/ok","id":7,"body":{"position":"1:1"}}"#);
    assert!(p.position().unwrap() == "1:1");

    let (_, p) = reply(
        r#"{"action": "auth/handshake/ok", "id": 5, "body": {"data": {"nonce": "yygAiH6XCXtg1g81d3rqwQ=="}}}"#,
    );
    assert!(p.nonce().unwrap() == "yygAiH6XCXtg1g81d3rqwQ==");
    let (_, p) = reply(r#"{"action":"auth/authenticate/ok","id":1,"body":{}}"#);
    assert!(p.body.unwrap().is_empty());
    let (_, p) = reply(
        r#"{"action":"auth/authenticate/error","id":1,"body":{"error":"authentication_failed","reason":"Unauthenticated"}}"#,
    );
    assert!(p.error().reason.unwrap() == "Unauthenticated");

    for (action, outcome) in [
        ("rtm/search/data", Outcome::Data),
        ("rtm/search/ok", Outcome::Ok),
    ] {
        let t = text(format_args!(
            r#"{{"action":"{action}","id":9,"body":{{"channels":["a","b\"c"]}}}}"#
        ));
        let (_, p) = reply(t.as_str());
        assert_eq!(p.action.outcome(), Some(outcome));
        let channels = p.channels().unwrap();
        assert!(channels
            .elements()
            .filter_map(|c| c.as_text())
            .eq(["a", "b\"c"]));
    }

    // Absent members and members of another type read as None.
    let (_, p) = reply(r#"{"action":"rtm/read/ok","id":6,"body":{"position":5,"data":"x"}}"#);
    assert_eq!(
        (p.position(), p.nonce(), p.channels(), p.message()),
        (None, None, None, None)
    );
    assert_eq!(
        p.error(),
        ErrorBody {
            error: None,
            reason: None
        }
    );
}

#[test]
fn ids() {
    let (id, _) = reply(r#"{"action":"rtm/write/ok","id":0,"body":{}}"#);
    assert_eq!(id, Id::Int(0));
    let (id, _) = reply(r#"{"action":"rtm/write/ok","id":18446744073709551615,"body":{}}"#);
    assert_eq!(id.as_u64(), Some(u64::MAX));
    let (id, _) = reply(r#"{"action":"rtm/write/ok","id":"17","body":{}}"#);
    assert!(matches!(id, Id::Str(s) if s == "17"));
    assert_eq!(id.as_u64(), None);
    // Absent is not zero.
    let p = Pdu::parse(r#"{"action":"rtm/write/ok","body":{}}"#).unwrap();
    assert_eq!(p.id, None);
    for (bad, offset) in [
        (r#"{"action":"a","id":-1}"#, 19),
        (r#"{"action":"a","id":1.0}"#, 19),
        (r#"{"action":"a","id":null}"#, 19),
        (r#"{"action":"a","id":[1]}"#, 19),
        (r#"{"action":"a","id":18446744073709551616}"#, 19),
    ] {
        assert_eq!(
            Pdu::parse(bad),
            Err(PduError::InvalidField {
                field: "id",
                offset
            }),
            "{bad}"
        );
    }
}

/// Unsolicited PDUs: subscription data, errors and info, and the general `/error`.
#[test]
fn unsolicited() {
    let Ok(Incoming::Data(d)) = Incoming::parse(
        r#"{"action":"rtm/subscription/data","body":{"subscription_id":"chan","position":"1479315802:7","messages":["second",{"k":1},null]}}"#,
    ) else {
        panic!()
    };
    assert!(d.subscription_id == "chan" && d.position.unwrap() == "1479315802:7");
    assert!(d
        .messages
        .elements()
        .map(|m| m.as_json().unwrap().as_raw())
        .eq([r#""second""#, r#"{"k":1}"#, "null"]));
    // No position: still data (the client reports it for that subscription, and stays
    // connected).
    let Ok(Incoming::Data(d)) = Incoming::parse(
        r#"{"action":"rtm/subscription/data","body":{"subscription_id":"c","messages":[]}}"#,
    ) else {
        panic!()
    };
    assert!(d.position.is_none() && d.messages.is_empty());

    let Ok(Incoming::ChannelError(e)) = Incoming::parse(
        r#"{"action":"rtm/subscription/error","body":{"subscription_id":"chan","error":"out_of_sync","reason":"Too much traffic","position":"1:9"}}"#,
    ) else {
        panic!()
    };
    assert!(e.subscription_id == "chan" && e.error.unwrap() == "out_of_sync");
    assert!(e.reason.unwrap() == "Too much traffic" && e.position.unwrap() == "1:9");
    let Ok(Incoming::ChannelError(e)) = Incoming::parse(
        r#"{"action":"rtm/subscription/error","body":{"subscription_id":"c","error":"expired_position"}}"#,
    ) else {
        panic!()
    };
    assert!(e.reason.is_none() && e.position.is_none());

    let Ok(Incoming::FastForward(i)) = Incoming::parse(
        r#"{"action":"rtm/subscription/info","body":{"subscription_id":"chan","info":"fast_forward","reason":"Subscription was fast-forwarded","position":"1:20"}}"#,
    ) else {
        panic!()
    };
    assert!(
        i.subscription_id == "chan" && i.info == "fast_forward" && i.position.unwrap() == "1:20"
    );

    let Ok(Incoming::GeneralError(e)) =
        Incoming::parse(r#"{"action":"/error","body":{"error":"invalid_pdu","reason":"bad"}}"#)
    else {
        panic!()
    };
    assert!(e.error.unwrap() == "invalid_pdu" && e.reason.unwrap() == "bad");
    assert!(matches!(
        Incoming::parse(r#"{"action":"/error"}"#),
        Ok(Incoming::GeneralError(_))
    ));
}

/// Unknown unsolicited PDUs are ignored, not errors (the reference client reconnects).
#[test]
fn unknown_unsolicited_is_ignored() {
    for t in [
        r#"{"action":"rtm/subscription/info","body":{"subscription_id":"c","info":"something_new"}}"#,
        r#"{"action":"rtm/brand_new","body":{}}"#,
        r#"{"action":"rtm/brand_new"}"#,
        r#"{"action":"x/y/ok","body":{}}"#,
        r#"{"action":"rtm/publish","body":{"channel":"c","message":1}}"#,
        r#"{"action":"","body":{}}"#,
    ] {
        assert!(
            matches!(Incoming::parse(t), Ok(Incoming::Ignored(_))),
            "{t}"
        );
    }
}

/// What the reference client treats as internal errors (and reconnects on).
#[test]
fn malformed() {
    use PduError::*;
    for (t, expected) in [
        (
            "",
            Json(crate::json::Error {
                offset: 0,
                kind: ErrorKind::UnexpectedEnd,
            }),
        ),
        (
            "hello",
            Json(crate::json::Error {
                offset: 0,
                kind: ErrorKind::ExpectedValue,
            }),
        ),
        (
            r#"{"action":"rtm/publish/ok","id":1"#,
            Json(crate::json::Error {
                offset: 33,
                kind: ErrorKind::UnexpectedEnd,
            }),
        ),
        (" [1]", NotAnObject { offset: 1 }),
        ("\"s\"", NotAnObject { offset: 0 }),
        (
            r#"{"id":1,"body":{}}"#,
            MissingField {
                field: "action",
                offset: 0,
            },
        ),
        (
            r#"{"action":null,"id":1}"#,
            InvalidField {
                field: "action",
                offset: 10,
            },
        ),
        (
            r#"{"action":"a","body":[]}"#,
            InvalidField {
                field: "body",
                offset: 21,
            },
        ),
        (
            r#"{"action":"a","body":null}"#,
            InvalidField {
                field: "body",
                offset: 21,
            },
        ),
        // A reply without body (other than publish/ok, delete/ok).
        (
            r#"{"action":"rtm/subscribe/ok","id":1}"#,
            MissingField {
                field: "body",
                offset: 0,
            },
        ),
        (
            r#"{"action":"rtm/read/ok","id":1}"#,
            MissingField {
                field: "body",
                offset: 0,
            },
        ),
        // A solicited-looking reply without id.
        (
            r#"{"action":"rtm/publish/ok","body":{"position":"1:0"}}"#,
            MissingField {
                field: "id",
                offset: 0,
            },
        ),
        (
            r#"{"action":"rtm/publish/error","body":{"error":"e","reason":"r"}}"#,
            MissingField {
                field: "id",
                offset: 0,
            },
        ),
        (
            r#"{"action":"rtm/search/data","body":{"channels":[]}}"#,
            MissingField {
                field: "id",
                offset: 0,
            },
        ),
        (
            r#"{"action":"auth/handshake/ok","body":{}}"#,
            MissingField {
                field: "id",
                offset: 0,
            },
        ),
        // Unsolicited bodies missing what routing needs.
        (
            r#"{"action":"rtm/subscription/data"}"#,
            MissingField {
                field: "body",
                offset: 0,
            },
        ),
        (
            r#"{"action":"rtm/subscription/data","body":{"messages":[]}}"#,
            MissingField {
                field: "subscription_id",
                offset: 41,
            },
        ),
        (
            r#"{"action":"rtm/subscription/data","body":{"subscription_id":"c"}}"#,
            MissingField {
                field: "messages",
                offset: 41,
            },
        ),
        (
            r#"{"action":"rtm/subscription/data","body":{"subscription_id":"c","messages":{}}}"#,
            InvalidField {
                field: "messages",
                offset: 75,
            },
        ),
        (
            r#"{"action":"rtm/subscription/data","body":{"subscription_id":7,"messages":[]}}"#,
            InvalidField {
                field: "subscription_id",
                offset: 60,
            },
        ),
        (
            r#"{"action":"rtm/subscription/data","body":{"subscription_id":"c","position":1,"messages":[]}}"#,
            InvalidField {
                field: "position",
                offset: 75,
            },
        ),
        (
            r#"{"action":"rtm/subscription/error","body":{"error":"out_of_sync"}}"#,
            MissingField {
                field: "subscription_id",
                offset: 42,
            },
        ),
        (
            r#"{"action":"rtm/subscription/info","body":{"info":"fast_forward"}}"#,
            MissingField {
                field: "subscription_id",
                offset: 41,
            },
        ),
        (
            r#"{"action":"rtm/subscription/info","body":{}}"#,
            MissingField {
                field: "info",
                offset: 41,
            },
        ),
    ] {
        assert_eq!(Incoming::parse(t), Err(expected), "{t}");
    }
    // A null position in a data PDU counts as absent.
    assert!(matches!(
        Incoming::parse(
            r#"{"action":"rtm/subscription/data","body":{"subscription_id":"c","position":null,"messages":[]}}"#
        ),
        Ok(Incoming::Data(SubscriptionData { position: None, .. }))
    ));
    // Wrong reply type for an id is the client's check: the reply says which request it answers.
    let (_, p) = reply(r#"{"action":"rtm/publish/ok","id":0}"#);
    assert_ne!(p.action.request(), Action::Subscribe);
    // Not UTF-8.
    assert!(matches!(
        Pdu::parse_bytes(b"{\"action\":\"\xc3\"}"),
        Err(PduError::Json(crate::json::Error {
            offset: 11,
            kind: ErrorKind::InvalidUtf8
        }))
    ));
    // Too deep for the default limit, fine with a larger one.
    let mut deep = Text::new();
    deep.push(br#"{"action":"rtm/subscription/data","body":{"subscription_id":"c","messages":["#)
        .repeat(b"[", 30)
        .repeat(b"]", 30)
        .push(b"]}}");
    assert!(
        matches!(Pdu::parse(deep.as_str()), Err(PduError::Json(e)) if e.kind == ErrorKind::TooDeep)
    );
    assert!(Pdu::parse_with_depth(deep.as_str(), 33).is_ok());
}

/// ~62 KB messages: written and read back without copies on the read side.
#[test]
fn big_messages_zero_copy() {
    const SIZE: usize = 62 * 1024;
    let mut message = Buf::<SIZE>::new();
    message.push(b"{\"blob\":\"");
    while message.len() < SIZE - 16 {
        message.push(b"0123456789abcdef");
    }
    message.push(b"\"}");
    let message = message.as_str();
    let mut buf = [0u8; SIZE + 256];
    let mut out = Cursor::new(&mut buf);
    Request::Publish {
        channel: "big",
        message: message.into(),
    }
    .encode(Some(1), &mut out)
    .unwrap();
    let len = out.len();
    assert!(len > SIZE - 16);
    let written = core::str::from_utf8(&buf[..len]).unwrap();
    let p = Pdu::parse(written).unwrap();
    let m = p.message().unwrap().as_json().unwrap().as_raw();
    assert_eq!(m, message);
    assert_eq!(
        m.as_ptr() as usize - written.as_ptr() as usize,
        written.find("{\"blob").unwrap()
    );

    // A data PDU carrying it: the message slice points into the frame.
    let mut frame = Buf::<{ SIZE + 256 }>::new();
    frame
        .push(br#"{"action":"rtm/subscription/data","body":{"subscription_id":"big","position":"1:2","messages":["#)
        .push(message.as_bytes())
        .push(b",1]}}");
    let Ok(Incoming::Data(d)) = Incoming::parse(frame.as_str()) else {
        panic!()
    };
    let first = d
        .messages
        .elements()
        .next()
        .unwrap()
        .as_json()
        .unwrap()
        .as_raw();
    assert_eq!(first.len(), message.len());
    let range = frame.as_bytes().as_ptr_range();
    assert!(range.contains(&first.as_ptr()));
}

/// The client PDUs of a recorded Python SDK session (its spacing) parse to what
/// benchlink encodes.
#[test]
fn transcript_pdus_parse() {
    let transcript = [
        r#"{"action":"rtm/subscribe","id":0,"body":{"channel": "chan", "fast_forward": true}}"#,
        r#"{"action":"rtm/subscribe","id":3,"body":{"subscription_id": "view1", "fast_forward": true, "filter": "select * from chan"}}"#,
        r#"{"action":"rtm/publish","body":{"channel":"chan","message": {"k": 1}}}"#,
        r#"{"action": "auth/handshake", "body": {"method": "role_secret", "data": {"role": "superuser"}}, "id": 5}"#,
        r#"{"action": "auth/authenticate", "body": {"method": "role_secret", "credentials": {"hash": "CzrVc2jGuqBUt9z5hlUklw=="}}, "id": 6}"#,
        r#"{"action":"rtm/subscribe","id":6,"body":{"channel": "badpos", "position": "bad"}}"#,
    ];
    let ours = [
        encoded(
            &Request::Subscribe(SubscribeRequest {
                fast_forward: true,
                ..SubscribeRequest::channel("chan")
            }),
            Some(0),
        ),
        encoded(
            &Request::Subscribe(SubscribeRequest {
                fast_forward: true,
                ..SubscribeRequest::view("view1", "select * from chan")
            }),
            Some(3),
        ),
        encoded(
            &Request::Publish {
                channel: "chan",
                message: r#"{"k": 1}"#.into(),
            },
            None,
        ),
        encoded(
            &Request::Handshake {
                method: "role_secret",
                data: ("role", "superuser"),
            },
            Some(5),
        ),
        encoded(
            &Request::Authenticate {
                method: "role_secret",
                credentials: ("hash", "CzrVc2jGuqBUt9z5hlUklw=="),
            },
            Some(6),
        ),
        encoded(
            &Request::Subscribe(SubscribeRequest {
                position: Some("bad"),
                ..SubscribeRequest::channel("badpos")
            }),
            Some(6),
        ),
    ];
    for (theirs, ours) in transcript.iter().zip(ours.iter()) {
        let a = Pdu::parse(theirs).unwrap();
        let b = Pdu::parse(ours.as_str()).unwrap();
        assert_eq!((a.action, a.id), (b.action, b.id));
        let (a, b) = (a.body.unwrap(), b.body.unwrap());
        assert_eq!(
            a.as_json().unwrap().members().count(),
            b.as_json().unwrap().members().count()
        );
        for (key, value) in a.as_json().unwrap().members() {
            let other = b
                .as_json()
                .unwrap()
                .members()
                .find(|(k, _)| *k == key)
                .unwrap()
                .1;
            same_json(value, other);
        }
    }
}

/// Structural equality, ignoring whitespace.
fn same_json(a: crate::json::Value<'_>, b: crate::json::Value<'_>) {
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => {
            assert_eq!(a.members().count(), b.members().count());
            for (k, v) in a.members() {
                same_json(v, b.get(k.as_raw()).unwrap());
            }
        }
        _ => assert_eq!(a.as_raw(), b.as_raw()),
    }
}

/// The reader validates while it picks the envelope apart and indexes the body: it must
/// accept and reject exactly what `json::parse` does, with the same errors, and find the
/// same members as a walk over the body's text. Random mutations of real PDUs.
#[test]
fn validation_is_json_parse() {
    let seeds = [
        r#"{"action":"rtm/subscription/data","body":{"position":"1:0","subscription_id":"c","messages":[{"k":[1,"x"]},"two",3,null]}}"#,
        r#" {"id":"7","body":{"a":1,"b":{},"c":[],"d":"\u0064","e":true,"position":"1:2"},"action":"rtm/read/ok","body":2} "#,
        r#"{"action":"x","body":[{"y":1}],"id":1}"#,
    ];
    let mut rng = crate::testing::Xorshift(0x9E37_79B9_7F4A_7C15u64);
    let mut rand = move || rng.next() as usize;
    let alphabet = b"{}[]\",:\\u01.-e tn\n";
    let mut bodies = 0;
    for round in 0..20_000 {
        let mut doc = Text::new();
        doc.push(seeds[round % seeds.len()].as_bytes());
        for _ in 0..rand() % 3 {
            let pos = rand() % (doc.len() + 1);
            let b = alphabet[rand() % alphabet.len()];
            match rand() % 3 {
                0 if pos < doc.len() => doc.set(pos, b),
                1 if pos < doc.len() => doc.remove(pos),
                _ => doc.insert(pos, b),
            }
        }
        let text = doc.as_str();
        let depth = rand() % 7;
        let parsed = Pdu::parse_with_depth(text, depth);
        match crate::json::parse(text, depth) {
            Err(e) => assert_eq!(parsed, Err(PduError::Json(e)), "{text}"),
            Ok(_) => assert!(!matches!(parsed, Err(PduError::Json(_))), "{text}"),
        }
        let Some(body) = parsed.ok().and_then(|p| p.body).and_then(|b| b.as_json()) else {
            continue;
        };
        let plain = crate::json::parse(body.as_raw(), depth).unwrap();
        let plain = plain.as_object().unwrap();
        assert!(body.members().eq(plain.members()), "{text}");
        for key in ["position", "subscription_id", "messages", "e", "z"] {
            assert_eq!(body.get(key), plain.get(key), "{text} {key}");
        }
        bodies += 1;
    }
    assert!(bodies > 2_000, "{bodies} bodies compared");
}

use std::collections::BTreeMap;
use std::string::String;
use std::vec::Vec;

use serde::{Deserialize, Serialize};

use crate::http::{Cursor, EncodeError};
use crate::json::{self, typed, WriteError};
use crate::rtm::pdu::{Incoming, Pdu};
use crate::rtm::{
    Ack, Client, Config, NoopHandler, Pending, RequestError, SubscriptionSlot, Transmit,
};
use crate::time::Instant;

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Sample<'a> {
    ts: u64,
    metric: &'a str,
    value: i64,
}

#[derive(Serialize, Debug)]
enum Shape {
    Unit,
    Newtype(u8),
    Tuple(i8, char),
    Struct { a: Option<bool>, b: () },
}

/// A metric name with every kind of character a JSON string must escape.
const HOSTILE: &str = "a\"b\\c\u{0}\u{1f}\n\r\t\u{8}\u{c}\u{7f}é\"}";

/// The tests' client: one subscription, four requests in flight, an `OUT`-byte outbox.
type TestClient<const OUT: usize> =
    Client<[SubscriptionSlot; 1], [Pending; 4], [u8; 512], [u8; OUT], [u8; 256]>;

/// A stopped client with `config`.
fn offline_client<const OUT: usize>(config: Config) -> TestClient<OUT> {
    Client::new(
        config,
        [SubscriptionSlot::EMPTY; 1],
        [Pending::EMPTY; 4],
        [0; 512],
        [0; OUT],
        [0; 256],
    )
}

fn connected<const OUT: usize>() -> TestClient<OUT> {
    let mut client = offline_client(Config::default());
    client.start(Instant::ZERO, &mut NoopHandler);
    assert_eq!(client.poll_transmit(), Some(Transmit::Connect));
    client.handle_connected(Instant::ZERO, &mut NoopHandler);
    client
}

fn serialized<T: Serialize + ?Sized>(value: &T) -> String {
    let mut buf = [0u8; 512];
    let mut out = Cursor::new(&mut buf);
    typed::serialize(&mut out, value).unwrap();
    String::from_utf8(out.written().to_vec()).unwrap()
}

#[test]
fn serialized_values_match_serde_json() {
    let mut map = BTreeMap::new();
    map.insert(HOSTILE, 1u8);
    let mut int_keys = BTreeMap::new();
    int_keys.insert(-7i32, "x");
    int_keys.insert(3, "y");
    let sample = Sample {
        ts: u64::MAX,
        metric: HOSTILE,
        value: i64::MIN,
    };
    assert_eq!(serialized(&sample), serde_json::to_string(&sample).unwrap());
    assert_eq!(serialized(&map), serde_json::to_string(&map).unwrap());
    assert_eq!(
        serialized(&int_keys),
        serde_json::to_string(&int_keys).unwrap()
    );
    for shape in [
        Shape::Unit,
        Shape::Newtype(9),
        Shape::Tuple(-1, '"'),
        Shape::Struct { a: None, b: () },
        Shape::Struct {
            a: Some(true),
            b: (),
        },
    ] {
        assert_eq!(serialized(&shape), serde_json::to_string(&shape).unwrap());
    }
    let mixed = (
        'é',
        "\u{1}",
        [0.5f32, -1.25],
        Some(3u128),
        -4i128,
        (),
        Vec::<u8>::new(),
    );
    assert_eq!(serialized(&mixed), serde_json::to_string(&mixed).unwrap());
    assert_eq!(serialized(&[f64::NAN, f64::INFINITY]), "[null,null]");
}

#[test]
fn values_without_a_json_form_are_typed_errors() {
    struct Failing;
    impl Serialize for Failing {
        fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("no"))
        }
    }
    let mut array_keys = BTreeMap::new();
    array_keys.insert([1u8], 0);
    let mut buf = [0u8; 64];
    for result in [
        typed::serialize(&mut Cursor::new(&mut buf), &Failing),
        typed::serialize(&mut Cursor::new(&mut buf), &array_keys),
        typed::serialize(&mut Cursor::new(&mut buf), &u128::MAX),
        typed::serialize(&mut Cursor::new(&mut buf), &i128::MIN),
    ] {
        assert_eq!(result, Err(WriteError::Unserializable));
    }
    let mut client = connected::<512>();
    let h = &mut NoopHandler;
    assert_eq!(
        client.publish_typed(Instant::ZERO, "c", &Failing, Ack::None, h),
        Err(RequestError::InvalidJson)
    );
    assert_eq!(
        client.poll_transmit(),
        None,
        "nothing half-written was sent"
    );
}

#[test]
fn every_too_small_buffer_is_an_error_never_a_panic() {
    let sample = Sample {
        ts: 17,
        metric: HOSTILE,
        value: -3,
    };
    let full = serialized(&sample);
    for size in 0..full.len() {
        let mut buf = std::vec![0u8; size];
        assert_eq!(
            typed::serialize(&mut Cursor::new(&mut buf), &sample),
            Err(WriteError::Encode(EncodeError::BufferTooSmall {
                capacity: size
            })),
            "{size}"
        );
    }
    let mut buf = std::vec![0u8; full.len()];
    let mut out = Cursor::new(&mut buf);
    typed::serialize(&mut out, &sample).unwrap();
    assert_eq!(out.written(), full.as_bytes());
}

#[test]
fn a_hostile_metric_name_is_escaped_in_the_sent_pdu() {
    let mut client = connected::<512>();
    let h = &mut NoopHandler;
    let sample = Sample {
        ts: 1,
        metric: HOSTILE,
        value: 2,
    };
    let ticket = client.publish_typed(
        Instant::ZERO,
        "ch\"an",
        &sample,
        Ack::Reply { deadline: None },
        h,
    );
    assert!(ticket.unwrap().is_some());
    let Some(Transmit::Send(pdu)) = client.poll_transmit() else {
        panic!("no PDU")
    };
    let parsed: serde_json::Value = serde_json::from_str(pdu).unwrap();
    assert_eq!(parsed["action"], "rtm/publish");
    assert_eq!(parsed["id"], 0);
    assert_eq!(parsed["body"]["channel"], "ch\"an");
    assert_eq!(parsed["body"]["message"]["metric"], HOSTILE);
    // The client's own reader agrees, and reads the message back typed.
    let ours = Pdu::parse(pdu).unwrap();
    let message = ours.body.and_then(|b| b.get("message")).unwrap();
    let mut scratch = [0u8; 64];
    #[derive(Deserialize)]
    struct Owned {
        metric: String,
    }
    let owned: Owned = message
        .as_json()
        .unwrap()
        .deserialize_unescaped(&mut scratch)
        .unwrap();
    assert_eq!(owned.metric, HOSTILE);
}

#[test]
fn a_queued_typed_request_is_sent_as_the_direct_one_would_be() {
    let h = &mut NoopHandler;
    let sample = Sample {
        ts: 5,
        metric: "m\\",
        value: 6,
    };
    let mut direct = connected::<512>();
    direct
        .write_typed(
            Instant::ZERO,
            "kv",
            &sample,
            Ack::Reply { deadline: None },
            h,
        )
        .unwrap();
    let Some(Transmit::Send(expected)) = direct.poll_transmit() else {
        panic!()
    };

    let mut offline: TestClient<512> = offline_client(Config::default());
    offline
        .write_typed(
            Instant::ZERO,
            "kv",
            &sample,
            Ack::Reply { deadline: None },
            h,
        )
        .unwrap();
    assert_eq!(offline.queued_requests(), 1);
    offline.start(Instant::ZERO, h);
    assert_eq!(offline.poll_transmit(), Some(Transmit::Connect));
    offline.handle_connected(Instant::ZERO, h);
    assert_eq!(offline.poll_transmit(), Some(Transmit::Send(expected)));
}

#[test]
fn too_large_messages_are_refused_whole() {
    let h = &mut NoopHandler;
    let big = &[u64::MAX; 40][..]; // 40 × 21 bytes: more than a 512-byte outbox
    let mut client = connected::<512>();
    assert_eq!(
        client.publish_typed(Instant::ZERO, "c", big, Ack::Reply { deadline: None }, h),
        Err(RequestError::TooLarge)
    );
    assert_eq!(client.poll_transmit(), None);
    assert_eq!(
        (client.queued_requests(), client.requests_in_flight()),
        (0, 0)
    );
    // Offline too: never queued where it could never be sent.
    let mut offline: Client<_, _, _, _, _> = Client::new(
        Config::default(),
        [SubscriptionSlot::EMPTY; 1],
        [Pending::EMPTY; 4],
        [0; 2048],
        [0; 512],
        [0; 256],
    );
    assert_eq!(
        offline.publish_typed(Instant::ZERO, "c", big, Ack::None, h),
        Err(RequestError::TooLarge)
    );
    assert_eq!(offline.queued_requests(), 0);
    // A queue smaller than the message, with a big enough outbox: the queue is too small.
    let mut small_queue: Client<_, _, _, _, _> = Client::new(
        Config::default(),
        [SubscriptionSlot::EMPTY; 1],
        [Pending::EMPTY; 4],
        [0; 64],
        [0; 2048],
        [0; 256],
    );
    assert_eq!(
        small_queue.publish_typed(Instant::ZERO, "c", big, Ack::None, h),
        Err(RequestError::QueueTooSmall)
    );
    // What fits still goes.
    assert_eq!(
        client.publish_typed(Instant::ZERO, "c", &big[..10], Ack::None, h),
        Ok(None)
    );
    assert!(matches!(client.poll_transmit(), Some(Transmit::Send(_))));
}

/// `Config::max_message_size` bounds the message itself, as given or as serialized:
/// exactly at it goes, one byte more is `TooLarge` at the call — connected or offline,
/// typed or not, publish or write — and nothing is sent or queued.
#[test]
fn the_message_size_limit_holds_for_every_message_at_the_byte() {
    let h = &mut NoopHandler;
    let config = Config {
        max_message_size: 10,
        ..Config::default()
    };
    let at = "\"12345678\""; // a JSON string of 10 bytes
    let over = "\"123456789\"";
    let mut offline: TestClient<512> = offline_client(config);
    let mut online: TestClient<512> = offline_client(config);
    online.start(Instant::ZERO, h);
    assert_eq!(online.poll_transmit(), Some(Transmit::Connect));
    online.handle_connected(Instant::ZERO, h);
    for client in [&mut offline, &mut online] {
        let t = Instant::ZERO;
        let refused = Err(RequestError::TooLarge);
        assert_eq!(client.publish(t, "c", over, Ack::None, h), refused);
        assert_eq!(client.write(t, "c", over, Ack::None, h), refused);
        assert_eq!(
            client.publish_typed(t, "c", &over[1..10], Ack::None, h),
            refused
        );
        // `[1234,5678]`: 11 bytes.
        assert_eq!(
            client.write_typed(t, "c", &[1234, 5678], Ack::None, h),
            refused
        );
        assert_eq!(client.queued_requests(), 0);
        assert_eq!(client.poll_transmit(), None);
        assert_eq!(client.publish(t, "c", at, Ack::None, h), Ok(None));
        assert_eq!(
            client.publish_typed(t, "c", &at[1..9], Ack::None, h),
            Ok(None)
        );
        assert_eq!(
            client.write_typed(t, "c", &[123, 5678], Ack::None, h),
            Ok(None)
        );
    }
    assert_eq!(offline.queued_requests(), 3);
    let sent: Vec<_> = core::iter::from_fn(|| match online.poll_transmit() {
        Some(Transmit::Send(pdu)) => Some(String::from(pdu)),
        _ => None,
    })
    .collect();
    assert_eq!(sent.len(), 3);
    assert!(sent[1].contains(r#""message":"12345678""#), "{}", sent[1]);
    assert!(sent[2].contains(r#""message":[123,5678]"#), "{}", sent[2]);
}

/// serde_json's `RawValue` (feature `raw_value`) is spliced in as its text, as
/// serde_json itself writes it, not as the struct it serializes as; invalid text cannot
/// get in (a `RawValue` is valid by construction, a hand-made one is checked).
#[test]
fn a_serde_json_raw_value_is_written_as_its_json_text() {
    use serde_json::value::RawValue;
    #[derive(Serialize)]
    struct Wrapped<'a> {
        id: u8,
        #[serde(borrow)]
        body: &'a RawValue,
    }
    let raw = RawValue::from_string(String::from(r#"{"a": [1, 2.5e3]}"#)).unwrap();
    let wrapped = Wrapped { id: 1, body: &raw };
    assert_eq!(
        serialized(&wrapped),
        serde_json::to_string(&wrapped).unwrap()
    );
    assert_eq!(serialized(&*raw), raw.get());
    // In CBOR, the text is transcoded as a core `RawJson` holding it would be.
    #[cfg(feature = "cbor")]
    {
        #[derive(Serialize)]
        struct Spliced<'a> {
            id: u8,
            body: typed::RawJson<'a>,
        }
        let cbor = |value: &dyn Fn(&mut Cursor<'_>) -> Result<(), WriteError>| {
            let mut buf = [0u8; 64];
            let mut out = Cursor::new(&mut buf);
            value(&mut out).unwrap();
            out.written().to_vec()
        };
        let spliced = Spliced {
            id: 1,
            body: typed::RawJson(raw.get()),
        };
        assert_eq!(
            cbor(&|out| crate::cbor::typed::serialize(out, &wrapped)),
            cbor(&|out| crate::cbor::typed::serialize(out, &spliced))
        );
        let alone = cbor(&|out| crate::cbor::typed::serialize(out, &*raw));
        assert_eq!(alone[0] >> 5, 5, "a CBOR map, not a struct around a string");
    }
}

#[test]
fn received_messages_are_read_borrowing_the_frame() {
    let frame = r#"{"action":"rtm/subscription/data","body":{"subscription_id":"m","position":"1:2","messages":[{"ts":1,"metric":"rx","value":3},{"ts":2,"metric":"t\"x","value":4}]}}"#;
    let Ok(Incoming::Data(data)) = Incoming::parse(frame) else {
        panic!()
    };
    let got: Vec<_> = data.messages_as::<Sample>().collect();
    let first = got[0].as_ref().unwrap();
    assert_eq!(first.metric, "rx");
    let at = first.metric.as_ptr() as usize - frame.as_ptr() as usize;
    assert_eq!(frame.get(at..at + 2), Some("rx"), "borrowed from the frame");
    // An escaped string cannot be borrowed as it is: a typed error, never raw escapes.
    assert_eq!(
        got[1],
        Err(json::typed::DeserializeError::EscapedStringIsTooLong)
    );

    let reply =
        r#"{"action":"rtm/read/ok","id":3,"body":{"message":{"ts":9,"metric":"cpu","value":-1}}}"#;
    let pdu = Pdu::parse(reply).unwrap();
    let sample: Sample = pdu.message_as().unwrap().unwrap();
    assert_eq!(
        sample,
        Sample {
            ts: 9,
            metric: "cpu",
            value: -1
        }
    );
    assert!(Pdu::parse(r#"{"action":"rtm/read/ok","id":3}"#)
        .unwrap()
        .message_as::<Sample>()
        .is_none());
}

#[test]
fn raw_json_members_are_validated_and_spliced_verbatim() {
    use crate::json::typed::RawJson;
    #[derive(Serialize)]
    struct Forward<'a> {
        metric: &'a str,
        value: RawJson<'a>,
    }
    let ok = Forward {
        metric: "m",
        value: RawJson(" -1.25E+3 "),
    };
    assert_eq!(serialized(&ok), r#"{"metric":"m","value":-1.25E+3}"#);
    let mut buf = [0u8; 64];
    for bad in ["1.", "", "{\"a\":}", "1 2"] {
        let value = Forward {
            metric: "m",
            value: RawJson(bad),
        };
        assert!(
            matches!(
                typed::serialize(&mut Cursor::new(&mut buf), &value),
                Err(WriteError::InvalidJson { .. })
            ),
            "{bad:?}"
        );
    }
    let mut client = connected::<512>();
    let bad = Forward {
        metric: "m",
        value: RawJson("nope"),
    };
    assert_eq!(
        client.publish_typed(Instant::ZERO, "c", &bad, Ack::None, &mut NoopHandler),
        Err(RequestError::InvalidJson)
    );
    assert_eq!(client.poll_transmit(), None);
}

/// A connected client whose PDUs travel as CBOR.
#[cfg(feature = "cbor")]
fn cbor_client() -> TestClient<512> {
    let config = Config {
        encoding: crate::rtm::pdu::Encoding::Cbor,
        ..Config::default()
    };
    let mut client = offline_client(config);
    client.start(Instant::ZERO, &mut NoopHandler);
    assert_eq!(client.poll_transmit(), Some(Transmit::Connect));
    client.handle_connected(Instant::ZERO, &mut NoopHandler);
    client
}

/// A typed publish of a CBOR client is the CBOR PDU of its message serialized alone,
/// and reads back typed; queued, it goes out the same once connected.
#[cfg(feature = "cbor")]
#[test]
fn a_cbor_client_publishes_and_writes_typed_messages_as_cbor() {
    use crate::cbor::typed as cbor_typed;
    use crate::rtm::pdu::{Encoding, Payload};
    let h = &mut NoopHandler;
    let ack = Ack::Reply { deadline: None };
    let sample = Sample {
        ts: 7,
        metric: HOSTILE,
        value: -9,
    };
    let mut buf = [0u8; 128];
    let mut out = Cursor::new(&mut buf);
    cbor_typed::serialize(&mut out, &sample).unwrap();
    let message = out.written();

    let mut typed = cbor_client();
    typed
        .publish_typed(Instant::ZERO, "c", &sample, ack, h)
        .unwrap();
    let Some(Transmit::Binary(sent)) = typed.poll_transmit() else {
        panic!("no binary frame")
    };
    let sent = sent.to_vec();
    let mut untyped = cbor_client();
    untyped
        .publish_payload(Instant::ZERO, "c", Payload::Cbor(message), ack, h)
        .unwrap();
    assert_eq!(untyped.poll_transmit(), Some(Transmit::Binary(&sent)));
    let pdu = Pdu::parse_cbor(&sent).unwrap();
    assert_eq!(pdu.message_as::<Sample>(), Some(Ok(sample.clone())));

    // A write waiting offline is the same PDU as one written while connected.
    typed
        .write_typed(Instant::ZERO, "kv", &sample, ack, h)
        .unwrap();
    let Some(Transmit::Binary(direct)) = typed.poll_transmit() else {
        panic!()
    };
    let direct = direct.to_vec();
    let config = Config {
        encoding: Encoding::Cbor,
        ..Config::default()
    };
    let mut offline: TestClient<512> = offline_client(config);
    // Both clients number their publish 0 and their write 1.
    offline
        .publish_typed(Instant::ZERO, "c", &sample, ack, h)
        .unwrap();
    offline
        .write_typed(Instant::ZERO, "kv", &sample, ack, h)
        .unwrap();
    assert_eq!(offline.queued_requests(), 2);
    offline.start(Instant::ZERO, h);
    assert_eq!(offline.poll_transmit(), Some(Transmit::Connect));
    offline.handle_connected(Instant::ZERO, h);
    assert_eq!(offline.poll_transmit(), Some(Transmit::Binary(&sent)));
    assert_eq!(offline.poll_transmit(), Some(Transmit::Binary(&direct)));

    // What CBOR cannot hold either is refused whole.
    assert_eq!(
        typed.publish_typed(Instant::ZERO, "c", &u128::MAX, Ack::None, h),
        Err(RequestError::InvalidJson)
    );
    assert_eq!(typed.poll_transmit(), None);
}

/// CBOR subscription data is read typed, borrowing from the frame; a message of another
/// shape is an error of its own.
#[cfg(feature = "cbor")]
#[test]
fn cbor_messages_are_read_typed() {
    use crate::cbor::write;
    // {"action":"rtm/subscription/data","body":{"subscription_id":"m","messages":[
    //   {"ts":1,"metric":"rx","value":3}, "oops"]}}
    let mut buf = [0u8; 256];
    let mut out = Cursor::new(&mut buf);
    write::json(
        &mut out,
        r#"{"action":"rtm/subscription/data","body":{"subscription_id":"m","messages":[{"ts":1,"metric":"rx","value":3},"oops"]}}"#,
    )
    .unwrap();
    let frame = out.written();
    let Ok(Incoming::Data(data)) = Incoming::decode(crate::rtm::pdu::Encoding::Cbor, frame) else {
        panic!()
    };
    let got: Vec<_> = data.messages_as::<Sample>().collect();
    let first = got[0].as_ref().unwrap();
    assert_eq!((first.ts, first.metric, first.value), (1, "rx", 3));
    let at = first.metric.as_ptr() as usize - frame.as_ptr() as usize;
    assert_eq!(
        frame.get(at..at + 2),
        Some(&b"rx"[..]),
        "borrowed from the frame"
    );
    assert_eq!(got[1], Err(json::typed::DeserializeError::InvalidType));
}

//! The CBOR encoding against the Python SDK 1.5.0's bytes: every client payload it
//! produced is reproduced byte for byte, every server payload it accepted is read.

use super::super::*;
use crate::http::Cursor;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn encoded(req: Request<'_>, id: Option<u64>) -> Vec<u8> {
    let mut buf = [0u8; 256];
    let mut out = Cursor::new(&mut buf);
    req.encode_as(Encoding::Cbor, id, &mut out).unwrap();
    out.written().to_vec()
}

#[test]
fn sdk_client_payloads_byte_for_byte() {
    // Publish "hello" to ch with ack (id 0).
    assert_eq!(
        encoded(Request::Publish { channel: "ch", message: r#""hello""#.into() }, Some(0)),
        hex("a366616374696f6e6b72746d2f7075626c6973686269640064626f6479a2676368616e6e656c626368676d6573736167656568656c6c6f")
    );
    // Publish 42 without ack: a map of two, no id.
    assert_eq!(
        encoded(Request::Publish { channel: "ch", message: "42".into() }, None),
        hex("a266616374696f6e6b72746d2f7075626c69736864626f6479a2676368616e6e656c626368676d657373616765182a")
    );
    // Auth: action, body, id.
    assert_eq!(
        encoded(Request::Handshake { method: "role_secret", data: ("role", "superuser") }, Some(0)),
        hex("a366616374696f6e6e617574682f68616e647368616b6564626f6479a2666d6574686f646b726f6c655f7365637265746464617461a164726f6c656973757065727573657262696400")
    );
    assert_eq!(
        encoded(Request::Authenticate { method: "role_secret", credentials: ("hash", "P6COJ5aXJvIRoJO1PaYREw==") }, Some(1)),
        hex("a366616374696f6e71617574682f61757468656e74696361746564626f6479a2666d6574686f646b726f6c655f7365637265746b63726564656e7469616c73a1646861736878185036434f4a3561584a7649526f4a4f315061595245773d3d62696401")
    );
    // Subscribe in reliable mode with history.count=1.
    let sub = SubscribeRequest {
        fast_forward: true,
        history: Some(History::Count(1)),
        ..SubscribeRequest::channel("ch")
    };
    assert_eq!(
        encoded(Request::Subscribe(sub), Some(2)),
        hex("a366616374696f6e6d72746d2f7375627363726962656269640264626f6479a3676368616e6e656c6263686c666173745f666f7277617264f567686973746f7279a165636f756e7401")
    );
}

#[test]
fn binary_payloads_travel_as_given_and_only_in_cbor() {
    // The SDK's publish of {"who": "zebra", "n": 7, "raw": h'00ff'} to animals, id 1.
    let message = hex("a36377686f657a65627261616e07637261774200ff");
    let req = Request::Publish {
        channel: "animals",
        message: Payload::Cbor(&message),
    };
    assert_eq!(
        encoded(req, Some(1)),
        hex("a366616374696f6e6b72746d2f7075626c6973686269640164626f6479a2676368616e6e656c67616e696d616c73676d657373616765a36377686f657a65627261616e07637261774200ff")
    );
    let mut buf = [0u8; 256];
    assert!(matches!(
        req.encode(Some(1), &mut Cursor::new(&mut buf)),
        Err(crate::json::WriteError::InvalidJson { .. })
    ));
    let broken = Request::Publish {
        channel: "animals",
        message: Payload::Cbor(&message[..4]),
    };
    assert!(matches!(
        broken.encode_as(Encoding::Cbor, Some(1), &mut Cursor::new(&mut buf)),
        Err(crate::json::WriteError::InvalidCbor { .. })
    ));
}

#[test]
fn sdk_server_payloads_are_read() {
    let ack = hex("a366616374696f6e6e72746d2f7075626c6973682f6f6b6269640064626f6479a168706f736974696f6e6c313530303030303030303a30");
    let Ok(Incoming::Reply { id, pdu }) = Incoming::decode(Encoding::Cbor, &ack) else {
        panic!()
    };
    assert_eq!((id, pdu.action), (Id::Int(0), Action::PublishOk));
    assert!(pdu.position().is_some_and(|p| p == "1500000000:0"));

    let data = hex("a266616374696f6e7572746d2f737562736372697074696f6e2f6461746164626f6479a36f737562736372697074696f6e5f696467616e696d616c7368706f736974696f6e6c313530303030303030303a32686d6573736167657381a36377686f657a65627261616e07637261774200ff");
    let Ok(Incoming::Data(d)) = Incoming::decode(Encoding::Cbor, &data) else {
        panic!()
    };
    assert!(d.subscription_id == "animals");
    assert!(d.position.is_some_and(|p| p == "1500000000:2"));
    let messages: Vec<Item<'_>> = d.messages.elements().collect();
    assert_eq!(messages.len(), 1);
    let m = messages[0];
    assert_eq!(
        m.raw(),
        Raw::Cbor(&hex("a36377686f657a65627261616e07637261774200ff"))
    );
    assert!(m
        .get("who")
        .and_then(|w| w.as_text())
        .is_some_and(|w| w == "zebra"));
    assert_eq!(m.get("n").and_then(|n| n.as_u64()), Some(7));
    let raw = m
        .get("raw")
        .and_then(|r| r.as_cbor())
        .and_then(|r| r.as_bytes());
    assert_eq!(raw, Some(&[0x00, 0xff][..]));

    let refused = hex("a366616374696f6e7172746d2f7075626c6973682f6572726f726269640164626f6479a2656572726f7274617574686f72697a6174696f6e5f64656e69656466726561736f6e6c556e617574686f72697a6564");
    let Ok(Incoming::Reply { pdu, .. }) = Incoming::decode(Encoding::Cbor, &refused) else {
        panic!()
    };
    let e = pdu.error();
    assert!(e.error.is_some_and(|s| s == "authorization_denied"));
    assert!(e.reason.is_some_and(|s| s == "Unauthorized"));
}

#[test]
fn lenient_encodings_are_read_and_bad_envelopes_are_typed_errors() {
    // Indefinite-length envelope and body, a non-minimal id, a text id.
    let mut v = vec![0xbf, 0x66];
    v.extend_from_slice(b"action");
    v.push(0x6e);
    v.extend_from_slice(b"rtm/publish/ok");
    v.extend_from_slice(&[0x62, b'i', b'd', 0x18, 0x00, 0x64]);
    v.extend_from_slice(b"body");
    v.extend_from_slice(&[0xbf, 0xff, 0xff]);
    let p = Pdu::parse_cbor(&v).unwrap();
    assert_eq!((p.action, p.id), (Action::PublishOk, Some(Id::Int(0))));
    assert!(p.body.is_some_and(|b| b.is_empty()));

    assert!(matches!(
        Pdu::parse_cbor(&[0x81, 0x01]),
        Err(PduError::NotAnObject { offset: 0 })
    ));
    assert!(matches!(
        Pdu::parse_cbor(&[0xa1, 0x01]),
        Err(PduError::Cbor(_))
    ));
    // Byte-string keys count as no action.
    let bytes_keys = [&[0xa1, 0x46][..], b"action", &[0x61, b'x']].concat();
    assert_eq!(
        Pdu::parse_cbor(&bytes_keys),
        Err(PduError::MissingField {
            field: "action",
            offset: 0
        })
    );
    // action not text, body not a map: the offset of the value.
    let bad_action = [&[0xa1, 0x66][..], b"action", &[0x01]].concat();
    assert_eq!(
        Pdu::parse_cbor(&bad_action),
        Err(PduError::InvalidField {
            field: "action",
            offset: 8
        })
    );
    // A reply without id is a protocol error, as in JSON.
    let no_id = [
        &[0xa2, 0x66][..],
        b"action",
        &[0x6e],
        b"rtm/publish/ok",
        &[0x64],
        b"body",
        &[0xa0],
    ]
    .concat();
    assert!(matches!(
        Incoming::decode(Encoding::Cbor, &no_id),
        Err(PduError::MissingField { field: "id", .. })
    ));
}

#[test]
fn extras_override_typed_members_in_cbor_too() {
    let sub = SubscribeRequest {
        position: Some("1:0"),
        extras: Some(r#"{"position":"2:0","x":[1],"x":{"y":null}}"#),
        ..SubscribeRequest::channel("c")
    };
    let bytes = encoded(Request::Subscribe(sub), Some(3));
    let pdu = Pdu::parse_cbor(&bytes).unwrap();
    let body = pdu.body.unwrap().raw();
    let Raw::Cbor(body) = body else { panic!() };
    let body = crate::cbor::parse(body, 8).unwrap();
    let keys: Vec<_> = body.entries().map(|(k, _)| k.as_str().unwrap()).collect();
    assert_eq!(keys, ["channel", "position", "x"]);
    assert_eq!(body.get("position").unwrap().as_str(), Some("2:0"));
    assert!(body.get("x").unwrap().get("y").unwrap().is_null());
    // The same members as the JSON body, in the same order.
    let mut json = [0u8; 128];
    let mut out = Cursor::new(&mut json);
    Request::Subscribe(sub).encode_body(&mut out).unwrap();
    assert_eq!(
        out.written(),
        br#"{"channel":"c","position":"2:0","x":{"y":null}}"#
    );
}

#[test]
fn queued_bodies_get_their_envelope_later() {
    let req = Request::Write {
        channel: "kv",
        message: r#"{"a":1.5}"#.into(),
    };
    let mut body = [0u8; 64];
    let mut out = Cursor::new(&mut body);
    req.encode_body_as(Encoding::Cbor, &mut out).unwrap();
    let body = out.written().to_vec();
    let mut whole = [0u8; 128];
    let mut out = Cursor::new(&mut whole);
    write_envelope_as(Encoding::Cbor, "rtm/write", Some(4), &body, &mut out).unwrap();
    assert_eq!(out.written(), encoded(req, Some(4)));
    let mut out = Cursor::new(&mut whole);
    assert_eq!(
        write_envelope_as(Encoding::Cbor, "rtm/write", None, &[0x01], &mut out),
        Err(crate::json::WriteError::NotAnObject)
    );
    // Every too-small buffer is an error, never a panic or a short PDU.
    let need = encoded(req, Some(4)).len();
    for size in 0..need {
        let mut buf = vec![0u8; size];
        assert!(req
            .encode_as(Encoding::Cbor, Some(4), &mut Cursor::new(&mut buf))
            .is_err());
    }
}

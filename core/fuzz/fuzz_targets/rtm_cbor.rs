//! CBOR: `cbor::parse` and `Pdu::parse_cbor` on arbitrary bytes, and the JSON → CBOR
//! transcoder on arbitrary text.
//!
//! Input: `[mode][rest…]`
//! - mode & 1 == 0: `rest` is a received CBOR frame;
//! - mode & 1 == 1: `rest` (lossy UTF-8) is a message's JSON text to write as CBOR.
//!
//! Properties:
//! - parsing: never panics; an accepted item is the whole input; every child, entry and
//!   element handed out is a slice of the input that parses again on its own (within the
//!   nesting left) to itself; a PDU's body, messages and strings are slices of the frame;
//!   an error offset is within the input;
//! - transcoding: text that `json::parse` accepts within the CBOR nesting limit writes
//!   to one CBOR item that `cbor::parse` accepts, whose scalars (strings, unsigned
//!   integers, null) are the JSON's, and whose containers have the JSON's sizes; a too
//!   small buffer fails with `BufferTooSmall`.
#![no_main]

use benchlink_core::cbor::{self, Item};
use benchlink_core::http::{Cursor, EncodeError};
use benchlink_core::json::{self, Value, WriteError};
use benchlink_core::rtm::pdu::{Incoming, Pdu, PduError, Raw};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        check_parse(rest);
        check_pdu(rest);
    } else {
        check_transcode(&String::from_utf8_lossy(rest));
    }
});

fn within(outer: &[u8], part: &[u8]) -> bool {
    let (o, p) = (outer.as_ptr() as usize, part.as_ptr() as usize);
    p >= o && p + part.len() <= o + outer.len()
}

fn check_parse(bytes: &[u8]) {
    match cbor::parse(bytes, cbor::DEFAULT_MAX_DEPTH) {
        Ok(item) => {
            assert_eq!(item.as_raw(), bytes);
            walk(bytes, item, cbor::DEFAULT_MAX_DEPTH);
        }
        Err(e) => assert!(e.offset <= bytes.len(), "{e:?}"),
    }
}

/// Every item inside `item` is a slice of `frame` that parses to itself.
fn walk(frame: &[u8], item: Item<'_>, depth: usize) {
    assert!(within(frame, item.as_raw()));
    let again = cbor::parse(item.as_raw(), depth).expect("a handed-out item re-parses");
    assert_eq!(again.as_raw(), item.as_raw());
    let _ = (
        item.as_str(),
        item.as_bytes(),
        item.as_u64(),
        item.is_null(),
    );
    let inner = depth.saturating_sub(1);
    for child in item.elements() {
        walk(frame, child, inner);
    }
    for (key, value) in item.entries() {
        walk(frame, key, inner);
        walk(frame, value, inner);
    }
}

fn check_pdu(bytes: &[u8]) {
    let pdu = match Pdu::parse_cbor(bytes) {
        Ok(pdu) => pdu,
        Err(PduError::Cbor(e)) => return assert!(e.offset <= bytes.len()),
        Err(
            PduError::NotAnObject { offset }
            | PduError::MissingField { offset, .. }
            | PduError::InvalidField { offset, .. },
        ) => return assert!(offset <= bytes.len()),
        Err(e) => panic!("a JSON error from CBOR: {e:?}"),
    };
    if let Some(body) = pdu.body {
        let Raw::Cbor(raw) = body.raw() else {
            panic!("a CBOR body that is not CBOR")
        };
        assert!(within(bytes, raw));
    }
    for text in [pdu.position(), pdu.subscription_id(), pdu.nonce()]
        .into_iter()
        .flatten()
    {
        assert!(within(bytes, text.as_raw().as_bytes()));
        assert_eq!(text.as_plain(), Some(text.as_raw()));
    }
    if let Ok(Incoming::Data(data)) = pdu.classify() {
        for m in data.messages.elements() {
            assert!(within(bytes, m.raw().as_bytes()));
        }
    }
}

fn check_transcode(text: &str) {
    let Ok(value) = json::parse(text, cbor::DEFAULT_MAX_DEPTH) else {
        return;
    };
    let mut buf = vec![0u8; text.len() * 9 + 16];
    let mut out = Cursor::new(&mut buf);
    cbor::write::json(&mut out, text).expect("valid JSON within the limit transcodes");
    let written = out.written().to_vec();
    let item = cbor::parse(&written, cbor::DEFAULT_MAX_DEPTH).expect("the output is CBOR");
    same(value, item);
    // Every smaller buffer fails for lack of room, never with a short item.
    let mut small = vec![0u8; written.len().saturating_sub(1)];
    assert!(matches!(
        cbor::write::json(&mut Cursor::new(&mut small), text),
        Err(WriteError::Encode(EncodeError::BufferTooSmall { .. }))
    ));
}

/// The CBOR item says what the JSON value says.
fn same(value: Value<'_>, item: Item<'_>) {
    if let Some(object) = value.as_object() {
        let members: Vec<_> = object.members().collect();
        let entries: Vec<_> = item.entries().collect();
        assert_eq!(members.len(), entries.len());
        for ((key, v), (k, i)) in members.into_iter().zip(entries) {
            assert!(key == k.as_str().expect("text keys"));
            same(v, i);
        }
    } else if let Some(array) = value.as_array() {
        let elements: Vec<_> = array.elements().collect();
        let items: Vec<_> = item.elements().collect();
        assert_eq!(elements.len(), items.len());
        for (v, i) in elements.into_iter().zip(items) {
            same(v, i);
        }
    } else if let Some(s) = value.as_str() {
        assert!(s == item.as_str().expect("a text string"));
    } else if value.is_null() {
        assert!(item.is_null());
    } else if let Some(n) = value.as_number().filter(|n| n.is_integer()) {
        if let Some(u) = n.as_u64() {
            assert_eq!(item.as_u64(), Some(u));
        }
    }
}

//! CBOR received on a CBOR connection, shown as JSON: the messaging API hands out JSON
//! text (and `serde_json` values) whatever the connection's encoding, with the raw CBOR
//! next to it for what JSON cannot say.
//!
//! The mapping is the local server's: a byte string becomes the JSON string of its
//! standard base64 (with padding); tags are dropped (their content stays); non-finite
//! floats and `undefined` become `null`; a map key that is not text becomes its JSON
//! text.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ciborium::value::Value;
use serde_json::Value as Json;

/// The JSON text of one CBOR item, map members in their order (`null` if it cannot be
/// read, which the core's check of every received PDU rules out).
pub(crate) fn to_json(bytes: &[u8]) -> String {
    let mut out = String::new();
    match ciborium::from_reader::<Value, _>(bytes) {
        Ok(v) => write(&mut out, v),
        Err(_) => out.push_str("null"),
    }
    out
}

fn write(out: &mut String, value: Value) {
    let number = |f: f64| serde_json::Number::from_f64(f).map_or(Json::Null, Json::Number);
    match value {
        Value::Integer(i) => {
            let i = i128::from(i);
            match (u64::try_from(i), i64::try_from(i)) {
                (Ok(u), _) => out.push_str(&u.to_string()),
                (_, Ok(n)) => out.push_str(&n.to_string()),
                _ => out.push_str(&number(i as f64).to_string()),
            }
        }
        Value::Bytes(b) => out.push_str(&Json::String(STANDARD.encode(b)).to_string()),
        Value::Float(f) => out.push_str(&number(f).to_string()),
        Value::Text(s) => out.push_str(&Json::String(s).to_string()),
        Value::Bool(b) => out.push_str(if b { "true" } else { "false" }),
        Value::Tag(_, inner) => write(out, *inner),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(out, item);
            }
            out.push(']');
        }
        Value::Map(members) => {
            out.push('{');
            for (i, (k, v)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let key = match k {
                    Value::Text(s) => s,
                    other => {
                        let mut text = String::new();
                        write(&mut text, other);
                        text
                    }
                };
                out.push_str(&Json::String(key).to_string());
                out.push(':');
                write(out, v);
            }
            out.push('}');
        }
        _ => out.push_str("null"),
    }
}

#[cfg(test)]
mod tests {
    use super::to_json;

    #[test]
    fn byte_strings_become_base64_and_the_rest_maps_one_to_one() {
        // {"who": "zebra", "n": 7, "raw": h'00ff', "f": 1.5, "neg": -2, "t": 1("x"), "u": undefined}
        let bytes = [
            0xa7, 0x63, b'w', b'h', b'o', 0x65, b'z', b'e', b'b', b'r', b'a', 0x61, b'n', 0x07,
            0x63, b'r', b'a', b'w', 0x42, 0x00, 0xff, 0x61, b'f', 0xf9, 0x3e, 0x00, 0x63, b'n',
            b'e', b'g', 0x21, 0x61, b't', 0xc1, 0x61, b'x', 0x61, b'u', 0xf7,
        ];
        assert_eq!(
            to_json(&bytes),
            r#"{"who":"zebra","n":7,"raw":"AP8=","f":1.5,"neg":-2,"t":"x","u":null}"#
        );
        assert_eq!(to_json(&[0xff]), "null");
    }
}

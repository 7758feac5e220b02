//! A published message, in the encodings its readers need.
//!
//! JSON is the form the server works with (history sizes, views, `value_changes`,
//! JSON subscribers), kept exactly as a JSON client published it. A message published
//! over CBOR also keeps its CBOR, which can carry byte strings; for one published as
//! JSON, the CBOR is made at the first CBOR reader's need and kept, so a message fanned
//! out to many CBOR subscribers is transcoded once.

use std::sync::OnceLock;

use super::cbor::json_to_cbor;

/// One message (see the module's notes).
#[derive(Debug)]
pub(crate) struct Message {
    json: Box<str>,
    cbor: OnceLock<Box<[u8]>>,
}

impl Message {
    /// A message published as JSON text (already validated as one JSON value).
    pub(crate) fn from_json(json: &str) -> Message {
        Message {
            json: json.into(),
            cbor: OnceLock::new(),
        }
    }

    /// A message published as CBOR: `cbor` as the CBOR readers get it, `json` its
    /// transcoding.
    pub(crate) fn from_cbor(json: &str, cbor: Vec<u8>) -> Message {
        Message {
            json: json.into(),
            cbor: OnceLock::from(cbor.into_boxed_slice()),
        }
    }

    /// The JSON text.
    pub(crate) fn json(&self) -> &str {
        &self.json
    }

    /// The CBOR.
    pub(crate) fn cbor(&self) -> &[u8] {
        self.cbor.get_or_init(|| {
            let mut out = Vec::with_capacity(self.json.len());
            if json_to_cbor(self.json.as_bytes(), &mut out).is_err() {
                // Only valid JSON is stored; null, should that ever not hold.
                out = vec![0xf6];
            }
            out.into_boxed_slice()
        })
    }

    /// Bytes the message counts for in a channel's history (its JSON).
    pub(crate) fn len(&self) -> usize {
        self.json.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms() {
        let m = Message::from_json(r#"{"n":1.5,"s":"x"}"#);
        assert_eq!(m.cbor(), b"\xa2\x61n\xf9\x3e\x00\x61s\x61x");
        assert_eq!(m.len(), 17);
        let m = Message::from_cbor(r#""AP8=""#, vec![0x42, 0x00, 0xff]);
        assert_eq!((m.json(), m.cbor()), (r#""AP8=""#, &[0x42, 0x00, 0xff][..]));
    }
}

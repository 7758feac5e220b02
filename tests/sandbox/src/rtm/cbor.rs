//! CBOR, the RTM protocol's binary encoding, on the server side.
//!
//! A client asks for it by offering the WebSocket subprotocol `cbor`. On such a
//! connection every PDU is one CBOR map with text keys, in the same shape as the JSON
//! one (`action`, `id`, `body`); the server sends them in binary frames.
//!
//! The actions read requests as JSON and build replies as JSON, so CBOR is a matter of
//! the connection's edges: a request is transcoded to JSON on its way in, and a reply
//! transcoded to CBOR on its way out (see [`Encoding::append_pdu`]). Messages are the
//! exception, because CBOR can say what JSON cannot (byte strings): a message published
//! over CBOR keeps its bytes next to its JSON form (see `message`), and PDUs that carry
//! messages (subscription data, `rtm/read/ok`) are built in CBOR directly for CBOR
//! clients, so CBOR subscribers get a message exactly as it was published (byte strings
//! as byte strings), as JSON subscribers get a JSON message.
//!
//! From CBOR to JSON (what JSON clients, views and `value_changes` see):
//! - a byte string becomes a JSON string of its standard base64 (with padding): the
//!   text an RTM JSON client would most likely expect, and nothing is lost;
//! - tags are dropped (their content stays), non-finite floats become `null`, the
//!   `undefined` simple value becomes `null`;
//! - a map key that is not a text string cannot be expressed: such a PDU is refused
//!   (`invalid_cbor`), like malformed CBOR.

use std::fmt;
use std::ops::Range;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ciborium::value::Value;
use ciborium_ll::{simple, Decoder, Header};

use super::outbox::append_frame;
use super::pdu::{push_quoted, Positions};

/// How PDUs travel on one connection, fixed at the upgrade.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// JSON text in text frames (the default).
    #[default]
    Json,
    /// CBOR in binary frames (the client offered the `cbor` subprotocol).
    Cbor,
}

impl Encoding {
    /// Appends one frame carrying the PDU whose JSON text `write` appends: a text frame
    /// as it is, or a binary frame with its CBOR transcoding. Text that is not JSON (a
    /// fault injected on purpose) goes as a text frame whatever the encoding.
    pub(crate) fn append_pdu(self, out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
        match self {
            Encoding::Json => append_frame(out, 0x1, true, write),
            Encoding::Cbor => {
                let mut json = Vec::new();
                write(&mut json);
                let mut cbor = Vec::with_capacity(json.len());
                if json_to_cbor(&json, &mut cbor).is_ok() {
                    append_frame(out, 0x2, true, |o| o.extend_from_slice(&cbor));
                } else {
                    append_frame(out, 0x1, true, |o| o.extend_from_slice(&json));
                }
            }
        }
    }
}

/// Why a CBOR PDU was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Invalid(String);

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A request PDU received as CBOR, ready for the actions.
#[derive(Debug)]
pub(crate) struct Request {
    /// The PDU transcoded to JSON.
    pub json: String,
    /// The bytes of `body.message`, when the PDU has one: what CBOR subscribers and
    /// readers get back.
    pub message: Option<Vec<u8>>,
}

/// Decodes one request PDU: exactly one CBOR item (any valid encoding: indefinite
/// lengths, half floats, tags, non-minimal integers), whatever frame it came in.
///
/// It is transcoded as it is read, without building a tree: the JSON is at most a few
/// times the size of the CBOR (a byte becomes at most a six-byte escape), and nothing is
/// allocated for lengths the input does not have. Nesting is limited to
/// [`MAX_DEPTH`]. The message is the PDU's own bytes, so a CBOR subscriber gets it as
/// published, like a JSON one gets a JSON message.
pub(crate) fn decode_request(bytes: &[u8]) -> Result<Request, Invalid> {
    let mut t = Transcoder {
        dec: Decoder::from(bytes),
        json: Vec::with_capacity(bytes.len() + bytes.len() / 2),
        message: None,
        scratch: [0; 4096],
    };
    t.item(0, Path::Top)?;
    let end = t.dec.offset();
    if end != bytes.len() {
        return Err(Invalid(format!(
            "Invalid CBOR: {} bytes after the PDU",
            bytes.len() - end
        )));
    }
    let json = String::from_utf8(t.json).map_err(|_| invalid_cbor())?;
    let message = t.message.and_then(|r| bytes.get(r)).map(<[u8]>::to_vec);
    Ok(Request { json, message })
}

/// Nesting of arrays, maps and tags in a request PDU (the JSON side's parser takes 128).
pub(crate) const MAX_DEPTH: usize = 128;

fn invalid_cbor() -> Invalid {
    Invalid("Invalid CBOR".to_owned())
}

/// Where an item is in the PDU: what `body.message` is found by.
#[derive(Clone, Copy, PartialEq)]
enum Path {
    Top,
    Body,
    Other,
}

/// CBOR in, JSON out (see [`decode_request`]).
struct Transcoder<'b> {
    dec: Decoder<&'b [u8]>,
    json: Vec<u8>,
    /// The byte range of the last `body.message` seen.
    message: Option<Range<usize>>,
    scratch: [u8; 4096],
}

impl Transcoder<'_> {
    fn header(&mut self) -> Result<Header, Invalid> {
        self.dec.pull().map_err(|_| invalid_cbor())
    }

    /// Transcodes one item.
    fn item(&mut self, depth: usize, path: Path) -> Result<(), Invalid> {
        let header = self.header()?;
        self.item_from(header, depth, path)
    }

    fn item_from(&mut self, header: Header, depth: usize, path: Path) -> Result<(), Invalid> {
        if depth > MAX_DEPTH {
            return Err(Invalid(format!(
                "Invalid CBOR: nested deeper than {MAX_DEPTH}"
            )));
        }
        match header {
            Header::Positive(n) => self.json.extend_from_slice(n.to_string().as_bytes()),
            Header::Negative(n) => {
                let n = -1 - i128::from(n);
                self.json.extend_from_slice(n.to_string().as_bytes());
            }
            Header::Float(f) if f.is_finite() => {
                // Writing to a Vec cannot fail.
                let _ = serde_json::to_writer(&mut self.json, &f);
            }
            Header::Simple(simple::FALSE) => self.json.extend_from_slice(b"false"),
            Header::Simple(simple::TRUE) => self.json.extend_from_slice(b"true"),
            // null, undefined, other simple values, NaN and the infinities.
            Header::Simple(_) | Header::Float(_) => self.json.extend_from_slice(b"null"),
            Header::Tag(_) => self.item(depth + 1, path)?,
            Header::Bytes(len) => {
                let raw = self.bytes(len)?;
                self.json.push(b'"');
                self.json.extend_from_slice(STANDARD.encode(raw).as_bytes());
                self.json.push(b'"');
            }
            Header::Text(len) => {
                let text = self.text(len)?;
                push_quoted(&mut self.json, &text);
            }
            Header::Array(len) => {
                self.json.push(b'[');
                let mut n = 0;
                while self.next(len, n)? {
                    if n > 0 {
                        self.json.push(b',');
                    }
                    self.item(depth + 1, Path::Other)?;
                    n += 1;
                }
                self.json.push(b']');
            }
            Header::Map(len) => {
                self.json.push(b'{');
                let mut n = 0;
                while self.next(len, n)? {
                    if n > 0 {
                        self.json.push(b',');
                    }
                    let key = match self.header()? {
                        Header::Text(len) => self.text(len)?,
                        _ => return Err(Invalid("Invalid CBOR: map keys must be text".to_owned())),
                    };
                    push_quoted(&mut self.json, &key);
                    self.json.push(b':');
                    let start = self.dec.offset();
                    let inner = match (path, key.as_str()) {
                        (Path::Top, "body") => Path::Body,
                        _ => Path::Other,
                    };
                    self.item(depth + 1, inner)?;
                    if path == Path::Body && key == "message" {
                        self.message = Some(start..self.dec.offset());
                    }
                    n += 1;
                }
                self.json.push(b'}');
            }
            Header::Break => return Err(invalid_cbor()),
        }
        Ok(())
    }

    /// Whether item `n` of a container of `len` items (`None`: until a break) follows.
    fn next(&mut self, len: Option<usize>, n: usize) -> Result<bool, Invalid> {
        match len {
            Some(len) => Ok(n < len),
            None => match self.header()? {
                Header::Break => Ok(false),
                header => {
                    self.dec.push(header);
                    Ok(true)
                }
            },
        }
    }

    /// The content of a byte string whose header was just read.
    fn bytes(&mut self, len: Option<usize>) -> Result<Vec<u8>, Invalid> {
        let mut out = Vec::new();
        let mut segments = self.dec.bytes(len);
        while let Some(mut segment) = segments.pull().map_err(|_| invalid_cbor())? {
            while let Some(chunk) = segment
                .pull(&mut self.scratch)
                .map_err(|_| invalid_cbor())?
            {
                out.extend_from_slice(chunk);
            }
        }
        Ok(out)
    }

    /// The content of a text string whose header was just read.
    fn text(&mut self, len: Option<usize>) -> Result<String, Invalid> {
        let mut out = String::new();
        let mut segments = self.dec.text(len);
        while let Some(mut segment) = segments.pull().map_err(|_| invalid_cbor())? {
            while let Some(chunk) = segment
                .pull(&mut self.scratch)
                .map_err(|_| invalid_cbor())?
            {
                out.push_str(chunk);
            }
        }
        Ok(out)
    }
}

/// Appends the CBOR of JSON text `json` (member order kept, integers as integers,
/// other numbers as floats in their shortest exact width). `Err` when `json` is not one
/// JSON value.
pub(crate) fn json_to_cbor(json: &[u8], out: &mut Vec<u8>) -> Result<(), ()> {
    let value: Value = serde_json::from_slice(json).map_err(|_| ())?;
    ciborium::into_writer(&value, out).map_err(|_| ())
}

/// Appends the head of a data item: major type `major` with argument `n`, minimally.
fn push_head(out: &mut Vec<u8>, major: u8, n: u64) {
    let major = major << 5;
    match n {
        0..=23 => out.push(major | n as u8),
        24..=0xFF => out.extend_from_slice(&[major | 24, n as u8]),
        0x100..=0xFFFF => {
            out.push(major | 25);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        0x1_0000..=0xFFFF_FFFF => {
            out.push(major | 26);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        _ => {
            out.push(major | 27);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

/// Appends a text string.
fn push_text(out: &mut Vec<u8>, text: &str) {
    push_head(out, 3, text.len() as u64);
    out.extend_from_slice(text.as_bytes());
}

/// Appends position `n` (`"<epoch>:<n>"`, always text).
fn push_position(out: &mut Vec<u8>, positions: Positions, n: u64) {
    push_text(out, &format!("{}:{n}", positions.epoch));
}

/// Appends an `rtm/subscription/data` PDU (as its JSON twin in `state`): `messages` are
/// already CBOR.
pub(crate) fn data_pdu<'m>(
    out: &mut Vec<u8>,
    positions: Positions,
    sid: &str,
    last: u64,
    messages: impl ExactSizeIterator<Item = &'m [u8]>,
) {
    push_head(out, 5, 2);
    push_text(out, "action");
    push_text(out, "rtm/subscription/data");
    push_text(out, "body");
    push_head(out, 5, 3);
    push_text(out, "subscription_id");
    push_text(out, sid);
    push_text(out, "position");
    push_position(out, positions, last + 1);
    push_text(out, "messages");
    push_head(out, 4, messages.len() as u64);
    for m in messages {
        out.extend_from_slice(m);
    }
}

/// Appends the reply `{"action": action, "id": id, "body": {"message": message,
/// "position": position}}` of an `rtm/read`; `id` is the request's id as JSON (as the
/// actions keep it), `message` CBOR (`None`: null).
pub(crate) fn read_reply(
    out: &mut Vec<u8>,
    action: &str,
    id: &str,
    message: Option<&[u8]>,
    positions: Positions,
    n: u64,
) {
    push_head(out, 5, 3);
    push_text(out, "action");
    push_text(out, action);
    push_text(out, "id");
    if json_to_cbor(id.as_bytes(), out).is_err() {
        out.push(0xf6);
    }
    push_text(out, "body");
    push_head(out, 5, 2);
    push_text(out, "message");
    out.extend_from_slice(message.unwrap_or(&[0xf6]));
    push_text(out, "position");
    push_position(out, positions, n);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    const POSITIONS: Positions = Positions {
        epoch: 1_500_000_000,
    };

    /// The reference SDK's PDUs, byte for byte, decode to the JSON the actions expect.
    #[test]
    fn sdk_requests() {
        let publish = hex("a366616374696f6e6b72746d2f7075626c6973686269640064626f6479a2676368616e6e656c626368676d6573736167656568656c6c6f");
        let r = decode_request(&publish).unwrap();
        assert_eq!(
            r.json,
            r#"{"action":"rtm/publish","id":0,"body":{"channel":"ch","message":"hello"}}"#
        );
        assert_eq!(r.message.unwrap(), hex("6568656c6c6f"));

        let binary = hex("a366616374696f6e6b72746d2f7075626c6973686269640164626f6479a2676368616e6e656c67616e696d616c73676d657373616765a36377686f657a65627261616e07637261774200ff");
        let r = decode_request(&binary).unwrap();
        assert_eq!(
            r.json,
            r#"{"action":"rtm/publish","id":1,"body":{"channel":"animals","message":{"who":"zebra","n":7,"raw":"AP8="}}}"#
        );
        // The byte string survives for CBOR subscribers.
        assert_eq!(
            r.message.unwrap(),
            hex("a36377686f657a65627261616e07637261774200ff")
        );

        let no_ack = hex("a266616374696f6e6b72746d2f7075626c69736864626f6479a2676368616e6e656c626368676d657373616765182a");
        let r = decode_request(&no_ack).unwrap();
        assert_eq!(
            r.json,
            r#"{"action":"rtm/publish","body":{"channel":"ch","message":42}}"#
        );

        let handshake = hex("a366616374696f6e6e617574682f68616e647368616b6564626f6479a2666d6574686f646b726f6c655f7365637265746464617461a164726f6c656973757065727573657262696400");
        assert_eq!(
            decode_request(&handshake).unwrap().json,
            r#"{"action":"auth/handshake","body":{"method":"role_secret","data":{"role":"superuser"}},"id":0}"#
        );
        let authenticate = hex("a366616374696f6e71617574682f61757468656e74696361746564626f6479a2666d6574686f646b726f6c655f7365637265746b63726564656e7469616c73a1646861736878185036434f4a3561584a7649526f4a4f315061595245773d3d62696401");
        assert_eq!(
            decode_request(&authenticate).unwrap().json,
            r#"{"action":"auth/authenticate","body":{"method":"role_secret","credentials":{"hash":"P6COJ5aXJvIRoJO1PaYREw=="}},"id":1}"#
        );
        let subscribe = hex("a366616374696f6e6d72746d2f7375627363726962656269640264626f6479a3676368616e6e656c6263686c666173745f666f7277617264f567686973746f7279a165636f756e7401");
        let r = decode_request(&subscribe).unwrap();
        assert_eq!(
            r.json,
            r#"{"action":"rtm/subscribe","id":2,"body":{"channel":"ch","fast_forward":true,"history":{"count":1}}}"#
        );
        assert_eq!(r.message, None);
    }

    /// The server's PDUs, byte for byte as the reference SDK accepted them.
    #[test]
    fn server_replies() {
        let mut out = Vec::new();
        json_to_cbor(
            br#"{"action":"rtm/publish/ok","id":0,"body":{"position":"1500000000:0"}}"#,
            &mut out,
        )
        .unwrap();
        assert_eq!(out, hex("a366616374696f6e6e72746d2f7075626c6973682f6f6b6269640064626f6479a168706f736974696f6e6c313530303030303030303a30"));

        out.clear();
        json_to_cbor(
            br#"{"action":"rtm/publish/error","id":1,"body":{"error":"authorization_denied","reason":"Unauthorized"}}"#,
            &mut out,
        )
        .unwrap();
        assert_eq!(out, hex("a366616374696f6e7172746d2f7075626c6973682f6572726f726269640164626f6479a2656572726f7274617574686f72697a6174696f6e5f64656e69656466726561736f6e6c556e617574686f72697a6564"));

        out.clear();
        let message = hex("a36377686f657a65627261616e07637261774200ff");
        data_pdu(
            &mut out,
            POSITIONS,
            "animals",
            1,
            [&message[..]].into_iter(),
        );
        assert_eq!(out, hex("a266616374696f6e7572746d2f737562736372697074696f6e2f6461746164626f6479a36f737562736372697074696f6e5f696467616e696d616c7368706f736974696f6e6c313530303030303030303a32686d6573736167657381a36377686f657a65627261616e07637261774200ff"));
    }

    #[test]
    fn frames_by_encoding() {
        let mut out = Vec::new();
        Encoding::Json.append_pdu(&mut out, |o| o.extend_from_slice(b"{\"a\":1}"));
        assert_eq!(out, b"\x81\x07{\"a\":1}");
        out.clear();
        Encoding::Cbor.append_pdu(&mut out, |o| o.extend_from_slice(b"{\"a\":1}"));
        assert_eq!(out, b"\x82\x04\xa1\x61a\x01");
        // Not JSON (a fault injected on purpose): as it is, in a text frame.
        out.clear();
        Encoding::Cbor.append_pdu(&mut out, |o| o.extend_from_slice(b"{nope"));
        assert_eq!(out, b"\x81\x05{nope");
    }

    #[test]
    fn read_replies() {
        let mut out = Vec::new();
        read_reply(
            &mut out,
            "rtm/read/ok",
            "3",
            Some(&[0x42, 0, 0xff]),
            POSITIONS,
            4,
        );
        let r = decode_request(&out).unwrap();
        assert_eq!(
            r.json,
            r#"{"action":"rtm/read/ok","id":3,"body":{"message":"AP8=","position":"1500000000:4"}}"#
        );
        // The message itself is the byte string it was.
        assert_eq!(r.message.unwrap(), [0x42, 0, 0xff]);
        out.clear();
        read_reply(&mut out, "rtm/read/ok", "\"x\"", None, POSITIONS, 0);
        assert_eq!(
            decode_request(&out).unwrap().json,
            r#"{"action":"rtm/read/ok","id":"x","body":{"message":null,"position":"1500000000:0"}}"#
        );
    }

    #[test]
    fn encodings_json_cannot_carry() {
        // Tags dropped, non-finite floats as null, half floats, indefinite lengths,
        // non-minimal integers.
        let pdu = hex("a2616101616282c11a5f5e1000f97c00");
        assert_eq!(
            decode_request(&pdu).unwrap().json,
            r#"{"a":1,"b":[1600000000,null]}"#
        );
        let pdu = hex("bf6161f93e006162" /* 1.5 */);
        let mut pdu = pdu;
        pdu.extend(hex("9f1800ffff"));
        assert_eq!(decode_request(&pdu).unwrap().json, r#"{"a":1.5,"b":[0]}"#);
        for (bad, why) in [
            ("a142000101", "map keys must be text"),
            ("a2", "Invalid CBOR"),
            ("a0a0", "after the PDU"),
            ("ff", "Invalid CBOR"),
            ("7f61", "Invalid CBOR"),
            ("62ff00", "Invalid CBOR"),
        ] {
            let e = decode_request(&hex(bad)).unwrap_err();
            assert!(e.0.contains(why), "{bad}: {e}");
        }
    }

    /// The message is kept byte for byte (the widths, lengths and tags its publisher
    /// chose), the last of duplicates as on the JSON side, and only at `body.message`.
    #[test]
    fn messages_keep_their_bytes() {
        // {"body": {"message": 1.5 as a 64-bit float, "message": [_ tag 1 (0)]}, "x":
        // {"body": {"message": 1}}}
        let message = "9fc100ff";
        let pdu = hex(&format!(
            "a264626f6479a2676d657373616765fb3ff8000000000000676d657373616765{message}\
             6178a164626f6479a1676d65737361676501"
        ));
        let r = decode_request(&pdu).unwrap();
        assert_eq!(r.message.unwrap(), hex(message));
        assert_eq!(
            r.json,
            r#"{"body":{"message":1.5,"message":[0]},"x":{"body":{"message":1}}}"#
        );
        let r = decode_request(&hex("a164626f6479a1676d657373616765fb3ff8000000000000")).unwrap();
        assert_eq!(r.message.unwrap(), hex("fb3ff8000000000000"));
        // A body that is not a map has no message.
        let r = decode_request(&hex("a164626f647981a1676d65737361676501")).unwrap();
        assert_eq!(r.message, None);
    }

    /// Hostile lengths and nesting fail fast, without allocating what they claim.
    #[test]
    fn hostile_inputs() {
        // An array, a byte string and a map each claiming 2^32 - 1 items or bytes.
        for bad in ["9affffffff00", "5affffffff00", "baffffffff0000"] {
            assert!(decode_request(&hex(bad)).is_err(), "{bad}");
        }
        // 100 000 nested arrays.
        let mut deep = vec![0x81u8; 100_000];
        deep.push(0);
        let e = decode_request(&deep).unwrap_err();
        assert!(e.0.contains("nested deeper"), "{e}");
        let mut ok = vec![0x81u8; MAX_DEPTH];
        ok.push(0);
        assert!(decode_request(&ok).is_ok());
        ok.insert(0, 0x81);
        assert!(decode_request(&ok).is_err());
        // Tags count as nesting too.
        let mut tags = vec![0xc1u8; 1000];
        tags.push(0);
        assert!(decode_request(&tags).is_err());
    }

    #[test]
    fn heads_are_minimal() {
        let mut out = Vec::new();
        for n in [
            0,
            23,
            24,
            255,
            256,
            65_535,
            65_536,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            push_head(&mut out, 0, n);
        }
        assert_eq!(
            out,
            hex(
                "00171818 18ff 190100 19ffff 1a00010000 1affffffff 1bffffffffffffffff"
                    .replace(' ', "")
                    .as_str()
            )
        );
    }
}

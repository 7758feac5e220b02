//! PDUs on the server side: parsing requests, building replies.
//!
//! Requests are parsed into raw JSON pieces (`serde_json::value::RawValue`) so that the
//! request `id` and published messages go back to clients byte for byte, whatever
//! number or string format the client used.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

/// Why a frame could not be read as a request.
#[derive(Debug)]
pub(crate) enum Malformed {
    /// Not JSON, or not a JSON object: answered with an id-less `/error`.
    NotJson(String),
    /// An object without a string `action`: answered with `/error` (with the id, if any).
    NoAction { id: Option<String> },
    /// A request whose `body` is missing or not an object.
    BadBody { action: String, id: Option<String> },
}

/// A request PDU, borrowing from the frame's text: a publish is handled without copying
/// its message or channel name more than the channel's history needs.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    pub action: Cow<'a, str>,
    /// The raw JSON of the id, `None` when absent or `null` (no reply is wanted).
    pub id: Option<&'a str>,
    /// The body's members in order (a later duplicate wins, as in a map).
    pub body: Vec<(Cow<'a, str>, &'a RawValue)>,
}

/// A JSON string, borrowed from the input unless it has escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// The top level of a PDU: the three members the server reads. The body is read in the
/// same pass (it is most of the PDU; reading it raw first would scan it twice).
#[derive(Default)]
struct Top<'a> {
    action: Option<&'a RawValue>,
    id: Option<&'a RawValue>,
    body: Option<Body<'a>>,
}

impl<'de> Deserialize<'de> for Top<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Top<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut top = Top::default();
                while let Some(Text(key)) = map.next_key()? {
                    match key.as_ref() {
                        "action" => top.action = Some(map.next_value()?),
                        "id" => top.id = Some(map.next_value()?),
                        "body" => top.body = Some(map.next_value()?),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(top)
            }
        }
        d.deserialize_map(V)
    }
}

/// A PDU's `body`: the members of an object, raw, or a note that it is not an object
/// (which is the request's fault, not a JSON error).
enum Body<'a> {
    Object(Vec<(Cow<'a, str>, &'a RawValue)>),
    Other,
}

impl<'de> Deserialize<'de> for Body<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Body<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some((Text(key), value)) = map.next_entry()? {
                    members.push((key, value));
                }
                Ok(Body::Object(members))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Body::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Body::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Body::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Body::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Body::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Body::Other)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Body::Other)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'a> Request<'a> {
    /// Parses one text frame.
    pub(crate) fn parse(text: &'a str) -> Result<Request<'a>, Malformed> {
        let top: Top<'a> =
            serde_json::from_str(text).map_err(|e| Malformed::NotJson(e.to_string()))?;
        let id = top.id.map(RawValue::get).filter(|raw| *raw != "null");
        let Some(Text(action)) = top
            .action
            .and_then(|raw| serde_json::from_str::<Text<'a>>(raw.get()).ok())
        else {
            return Err(Malformed::NoAction {
                id: id.map(str::to_owned),
            });
        };
        let Some(Body::Object(body)) = top.body else {
            return Err(Malformed::BadBody {
                action: action.into_owned(),
                id: id.map(str::to_owned),
            });
        };
        Ok(Request { action, id, body })
    }

    /// The raw JSON of body member `name`, if present.
    pub(crate) fn raw(&self, name: &str) -> Option<&'a str> {
        self.body
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.get())
    }

    /// Body member `name` as `T`: `Ok(None)` when absent (or `null`), `Err(())` when it
    /// has the wrong type.
    pub(crate) fn field<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Option<T>, ()> {
        match self.raw(name) {
            None | Some("null") => Ok(None),
            Some(raw) => serde_json::from_str(raw).map(Some).map_err(|_| ()),
        }
    }

    /// A required non-empty string member, borrowed when it has no escapes.
    pub(crate) fn str(&self, name: &str) -> Result<Cow<'a, str>, ()> {
        match self.raw(name).map(serde_json::from_str::<Text<'a>>) {
            Some(Ok(Text(s))) if !s.is_empty() => Ok(s),
            _ => Err(()),
        }
    }

    /// A required non-empty string member.
    pub(crate) fn string(&self, name: &str) -> Result<String, ()> {
        self.str(name).map(Cow::into_owned)
    }
}

/// Appends `text` as a JSON string literal.
pub(crate) fn push_quoted(out: &mut Vec<u8>, text: &str) {
    // Writing to a Vec cannot fail.
    let _ = serde_json::to_writer(out, text);
}

/// Appends the JSON string of position `n` (`"<generation>:<n>"`).
pub(crate) fn push_position(out: &mut Vec<u8>, positions: Positions, n: u64) {
    out.push(b'"');
    push_decimal(out, positions.epoch);
    out.push(b':');
    push_decimal(out, n);
    out.push(b'"');
}

/// Appends `n` in decimal (without the formatting machinery: this is on the path of
/// every reply and every message delivered).
fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// `text` as a JSON string literal.
pub(crate) fn quote(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// A reply `{"action":…,"id":…,"body":…}` (id as raw JSON); without an id, the same
/// envelope without `id` (only for unsolicited PDUs and injected faults).
pub(crate) fn envelope(action: &str, id: Option<&str>, body: &str) -> String {
    match id {
        Some(id) => format!(r#"{{"action":{},"id":{id},"body":{body}}}"#, quote(action)),
        None => format!(r#"{{"action":{},"body":{body}}}"#, quote(action)),
    }
}

/// An error body. Every error carries `reason` (the Python SDK reads it from auth errors
/// without a fallback).
pub(crate) fn error_body(error: &str, reason: &str) -> String {
    format!(r#"{{"error":{},"reason":{}}}"#, quote(error), quote(reason))
}

/// An object body from members whose values are already JSON text.
pub(crate) fn object(members: &[(&str, &str)]) -> String {
    let mut out = String::from("{");
    for (i, (name, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&quote(name));
        out.push(':');
        out.push_str(value);
    }
    out.push('}');
    out
}

/// The reason text of an `invalid_format` error about member `name`, in the style of the
/// real service's `Invalid PDU: 'position' was invalid`.
pub(crate) fn invalid(name: &str) -> String {
    format!("Invalid PDU: '{name}' was invalid")
}

/// Positions are `"<generation>:<n>"` strings, never numbers: the generation names one
/// run of the server (see [`RtmServerConfig::generation`](super::RtmServerConfig::generation)),
/// `n` is a per-channel sequence number. Sequence numbers start again at 0 in every run,
/// so `n` means something only together with the generation it came with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Positions {
    /// This run's generation.
    pub epoch: u64,
}

/// A position a client sent, read against this run of the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Position {
    /// Sequence number `n` of this run.
    Here(u64),
    /// A position of another run (an earlier server on the same port, say): its
    /// sequence number says nothing about this run's messages, so it is handled as an
    /// expired position, never read as one of ours.
    OtherRun,
}

impl Positions {
    /// The JSON string of sequence number `n`.
    pub(crate) fn json(self, n: u64) -> String {
        format!("\"{}:{n}\"", self.epoch)
    }

    /// Reads a position: `<digits>:<digits>`, anything else is invalid (`None`).
    pub(crate) fn parse(self, text: &str) -> Option<Position> {
        let (generation, n) = text.split_once(':')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(generation) || !digits(n) {
            return None;
        }
        let n = n.parse().ok()?;
        Some(match generation.parse::<u64>() {
            Ok(g) if g == self.epoch => Position::Here(n),
            _ => Position::OtherRun,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_requests() {
        let r = Request::parse(
            r#"{"action":"rtm/publish","id":0,"body":{"channel":"c","message": {"k": 1.50}}}"#,
        )
        .unwrap();
        assert_eq!(r.action, "rtm/publish");
        assert_eq!(r.id, Some("0"));
        assert_eq!(r.raw("message"), Some(r#"{"k": 1.50}"#));
        assert_eq!(r.string("channel"), Ok("c".to_owned()));
        assert!(r.string("nope").is_err());
        let r = Request::parse(r#"{"action":"a","id":"7","body":{}}"#).unwrap();
        assert_eq!(r.id, Some(r#""7""#));
        let r = Request::parse(r#"{"action":"a","id":null,"body":{}}"#).unwrap();
        assert_eq!(r.id, None);
        assert!(matches!(Request::parse("nope"), Err(Malformed::NotJson(_))));
        assert!(matches!(Request::parse("[1]"), Err(Malformed::NotJson(_))));
        assert!(matches!(
            Request::parse(r#"{"id":3,"body":{}}"#),
            Err(Malformed::NoAction { id: Some(_) })
        ));
        assert!(matches!(
            Request::parse(r#"{"action":"a","body":[]}"#),
            Err(Malformed::BadBody { id: None, .. })
        ));
        // Escaped names and values, later duplicates win, unknown members are skipped.
        let r = Request::parse(
            r#"{"act\u0069on":"a\/b","x":[1,{"y":2}],"body":{"channel":"x","channel":"y\n"},"id":1,"id":2}"#,
        )
        .unwrap();
        assert_eq!((r.action.as_ref(), r.id), ("a/b", Some("2")));
        assert_eq!(r.string("channel"), Ok("y\n".to_owned()));
        assert!(matches!(r.str("channel"), Ok(Cow::Owned(_))));
        let r = Request::parse(r#"{"action":"a","body":{"channel":"plain","n":1}}"#).unwrap();
        assert!(matches!(r.str("channel"), Ok(Cow::Borrowed("plain"))));
        assert!(r.str("n").is_err());
        assert!(matches!(
            Request::parse(r#"{"action":"a","body":{}} x"#),
            Err(Malformed::NotJson(_))
        ));
        // A body that is not an object is the request's fault; broken JSON is not.
        for body in ["[1,[2]]", "1", "-1", "1.5", "\"s\"", "true", "null"] {
            let text = format!(r#"{{"action":"a","id":1,"body":{body}}}"#);
            assert!(
                matches!(Request::parse(&text), Err(Malformed::BadBody { .. })),
                "{text}"
            );
        }
        assert!(matches!(
            Request::parse(r#"{"action":"a","body":[1,}"#),
            Err(Malformed::NotJson(_))
        ));
    }

    #[test]
    fn appenders() {
        let mut out = Vec::new();
        push_quoted(&mut out, "a\"b");
        out.push(b' ');
        push_position(&mut out, Positions { epoch: 7 }, 42);
        push_position(&mut out, Positions { epoch: 0 }, u64::MAX);
        assert_eq!(out, br#""a\"b" "7:42""0:18446744073709551615""#);
    }

    #[test]
    fn positions() {
        let here = Positions {
            epoch: 1_479_315_802,
        };
        assert_eq!(here.parse("1479315802:6"), Some(Position::Here(6)));
        assert_eq!(here.parse("1479315801:6"), Some(Position::OtherRun));
        assert_eq!(here.parse("01479315802:6"), Some(Position::Here(6)));
        assert_eq!(
            here.parse("99999999999999999999999:6"),
            Some(Position::OtherRun)
        );
        for bad in [
            "bad",
            "1:",
            ":1",
            "1:-1",
            "a:1",
            "1:2:3",
            "1:99999999999999999999999",
        ] {
            assert_eq!(here.parse(bad), None, "{bad}");
        }
        assert_eq!(Positions { epoch: 5 }.json(3), r#""5:3""#);
    }

    #[test]
    fn builders() {
        assert_eq!(
            envelope(
                "rtm/publish/error",
                Some("0"),
                &error_body("authorization_denied", "Unauthorized")
            ),
            r#"{"action":"rtm/publish/error","id":0,"body":{"error":"authorization_denied","reason":"Unauthorized"}}"#
        );
        assert_eq!(
            object(&[("a", "1"), ("b\"", "null")]),
            r#"{"a":1,"b\"":null}"#
        );
    }
}

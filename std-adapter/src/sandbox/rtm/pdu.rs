//! PDUs on the server side: parsing requests, building replies (spec §2.5, §3).
//!
//! Requests are parsed into raw JSON pieces (`serde_json::value::RawValue`) so that the
//! request `id` and published messages go back to clients byte for byte, whatever
//! number or string format the client used.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::Value;

/// One object level: member name → raw JSON text of the member.
pub(crate) type RawObject = BTreeMap<String, Box<RawValue>>;

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

/// A request PDU.
#[derive(Debug)]
pub(crate) struct Request {
    pub action: String,
    /// The raw JSON of the id, `None` when absent or `null` (no reply is wanted).
    pub id: Option<String>,
    pub body: RawObject,
}

impl Request {
    /// Parses one text frame.
    pub(crate) fn parse(text: &str) -> Result<Request, Malformed> {
        let top: RawObject =
            serde_json::from_str(text).map_err(|e| Malformed::NotJson(e.to_string()))?;
        let id = top
            .get("id")
            .map(|raw| raw.get().to_owned())
            .filter(|raw| raw != "null");
        let Some(action) = top
            .get("action")
            .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok())
        else {
            return Err(Malformed::NoAction { id });
        };
        let Some(body) = top
            .get("body")
            .and_then(|raw| serde_json::from_str::<RawObject>(raw.get()).ok())
        else {
            return Err(Malformed::BadBody { action, id });
        };
        Ok(Request { action, id, body })
    }

    /// The raw JSON of body member `name`, if present.
    pub(crate) fn raw(&self, name: &str) -> Option<&str> {
        self.body.get(name).map(|r| r.get())
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

    /// A required non-empty string member.
    pub(crate) fn string(&self, name: &str) -> Result<String, ()> {
        match self.field::<String>(name) {
            Ok(Some(s)) if !s.is_empty() => Ok(s),
            _ => Err(()),
        }
    }
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

/// An error body. Every error carries `reason` (spec §7.1).
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

/// The reason text of an `invalid_format` error about member `name` (spec §7.1 style).
pub(crate) fn invalid(name: &str) -> String {
    format!("Invalid PDU: '{name}' was invalid")
}

/// Positions are `"<epoch>:<n>"` strings (spec §2.8): the epoch is the server's start
/// time in unix seconds, `n` a per-channel sequence number.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Positions {
    pub epoch: u64,
}

impl Positions {
    /// The JSON string of sequence number `n`.
    pub(crate) fn json(self, n: u64) -> String {
        format!("\"{}:{n}\"", self.epoch)
    }

    /// The sequence number of a position. Any `<digits>:<digits>` is accepted (only the
    /// counter counts, so positions survive a client's clock and a server restart's
    /// epoch); anything else is invalid.
    pub(crate) fn parse(text: &str) -> Option<u64> {
        let (epoch, n) = text.split_once(':')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(epoch) || !digits(n) {
            return None;
        }
        n.parse().ok()
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
        assert_eq!(r.id.as_deref(), Some("0"));
        assert_eq!(r.raw("message"), Some(r#"{"k": 1.50}"#));
        assert_eq!(r.string("channel"), Ok("c".to_owned()));
        assert!(r.string("nope").is_err());
        let r = Request::parse(r#"{"action":"a","id":"7","body":{}}"#).unwrap();
        assert_eq!(r.id.as_deref(), Some(r#""7""#));
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
    }

    #[test]
    fn positions() {
        assert_eq!(Positions::parse("1479315802:6"), Some(6));
        for bad in [
            "bad",
            "1:",
            ":1",
            "1:-1",
            "a:1",
            "1:2:3",
            "1:99999999999999999999999",
        ] {
            assert_eq!(Positions::parse(bad), None, "{bad}");
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

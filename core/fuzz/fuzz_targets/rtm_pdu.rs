//! RTM PDUs: `Pdu::parse` / `classify` on arbitrary text, `Request::encode` round trips,
//! and the JSON string escaper. One family per input, so each execution stays cheap.
//!
//! Input: `[mode][rest…]`
//! - mode & 3 == 0 or 3: `rest` is a received frame (bytes; also as `&str` when UTF-8);
//!   mode & 4 picks the checks: the reader's own (clear) or, on a frame it accepts, the
//!   differential against serde_json (set);
//! - mode & 3 == 1: `rest` describes a request (kind, channel/prefix/role strings
//!   with quotes, backslashes, control characters and non-ASCII, messages and extras built
//!   with serde_json from arbitrary values, ids, buffer sizes), encoded once (into a
//!   megabyte buffer reused across executions); `(mode >> 2) % 3` picks the group of
//!   encoding checks below (0 serde_json, 1 read back, 2 buffers and keys);
//! - mode & 3 == 2: `rest` is a string (lossy UTF-8) for `json::write::string`, written
//!   once; mode & 4 picks the checks: the escaping (clear) or the reading back (set).
//!
//! Properties:
//! - parsing: never panics; `parse_bytes` agrees with `parse`; it rejects exactly what
//!   `json::parse` rejects, with the same error; the body's members (found through the
//!   index the reader keeps) are those of its re-parsed text; every accessor (`action`,
//!   `id`, `body`, `position`, `subscription_id`, `nonce`, `message`, `error`, `channels`,
//!   the classified views and each message's `as_raw`) returns slices of the input that
//!   re-parse to themselves; classification follows the documented rules (a reply iff an
//!   id and a body or `publish/ok`/`delete/ok`, unsolicited kinds by action); error
//!   offsets point into the input (at the object that lacks a member / the bad value);
//!   (mode & 4) against serde_json, when it accepts the text and no object has a repeated
//!   key, the action, the integer id and the body agree;
//! - encoding: every request encodes (into at most a megabyte), and
//!   - (check 0) to valid JSON (serde_json) whose `action`, `id` and body are exactly the
//!     request's (strings exact, messages equal as values, extras override typed members,
//!     the last of a repeated extras key wins) and nothing else;
//!   - (check 1) that `Pdu::parse` reads back with the same action, id, `position`,
//!     `subscription_id`, message text, and body members equal (as serde_json values) to
//!     the expected ones, and refuses exactly when nesting exceeds the default depth;
//!   - (check 2) `encode_body` + `write_envelope` give the same bytes; a too small buffer
//!     fails with `BufferTooSmall` leaving a prefix; no key is written twice in the
//!     envelope or the body, and the envelope's body is `encode_body`'s text;
//! - escaping: `json::write::string` output is the C SDK escaping of the input, and one
//!   byte short it fails leaving a prefix; (mode & 4) the output parses with serde_json
//!   and `json::parse` back to the input (`==`, `chars`, `unescape_into`, which fails one
//!   byte short).
#![no_main]

use std::collections::BTreeMap;

use benchlink_core::http::{Cursor, EncodeError};
use benchlink_core::json::{self, Value, WriteError};
use benchlink_core::rtm::pdu::{
    write_envelope, Action, History, Id, Incoming, Pdu, PduError, Request, SubscribeRequest,
    Target, Text,
};
use libfuzzer_sys::arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use serde_json::Value as Json;

fuzz_target!(|input: &[u8]| {
    let [mode, rest @ ..] = input else {
        return;
    };
    // One family per input, and for requests one group of checks (see the header).
    match mode & 3 {
        1 => check_request(&mut Unstructured::new(rest), (mode >> 2) % 3),
        2 => check_string(&String::from_utf8_lossy(rest), mode & 4 != 0),
        _ => check_received(rest, mode & 4 != 0),
    }
});

// ------------------------------------------------------------------------------------
// Received frames
// ------------------------------------------------------------------------------------

/// `part` is a slice of `text`.
fn within(text: &str, part: &str) -> bool {
    let (t, p) = (text.as_ptr() as usize, part.as_ptr() as usize);
    p >= t && p + part.len() <= t + text.len()
}

/// A value handed out by the reader: a slice of the frame that re-parses to itself.
fn check_value(text: &str, v: Value<'_>) {
    assert!(within(text, v.as_raw()), "value outside the frame");
    let again = json::parse(v.as_raw(), json::MAX_DEPTH).expect("a handed-out value re-parses");
    assert_eq!(again.as_raw(), v.as_raw());
}

fn check_str(text: &str, s: Text<'_>) {
    assert!(within(text, s.as_raw()), "string outside the frame");
    let quoted = format!("\"{}\"", s.as_raw());
    let again = json::parse(&quoted, 0).expect("a handed-out string re-parses");
    assert_eq!(again.as_str().map(|a| a.as_raw()), Some(s.as_raw()));
    let decoded: String = s.chars().collect();
    assert!(s == decoded.as_str());
    assert_eq!(s.to_string(), decoded);
}

/// The reader's checks on one frame; with `serde`, only the parse and the differential
/// against serde_json.
fn check_received(bytes: &[u8], serde: bool) {
    let parsed = Pdu::parse_bytes(bytes);
    let Ok(text) = std::str::from_utf8(bytes) else {
        assert!(matches!(parsed, Err(PduError::Json(_))));
        return;
    };
    if serde {
        if let Ok(pdu) = parsed {
            differential(text, &pdu);
        }
        return;
    }
    assert_eq!(Pdu::parse(text), parsed, "parse_bytes and parse disagree");
    assert_eq!(Incoming::parse(text), parsed.and_then(|p| p.classify()));
    match json::parse(text, json::DEFAULT_MAX_DEPTH) {
        Err(e) => assert_eq!(parsed, Err(PduError::Json(e)), "not json::parse's error"),
        Ok(_) => assert!(!matches!(parsed, Err(PduError::Json(_)))),
    }
    let pdu = match parsed {
        Ok(pdu) => pdu,
        Err(e) => {
            check_error_offset(text, e);
            return;
        }
    };
    if let Action::Other(raw) = pdu.action {
        assert!(within(text, raw));
        assert!(!KNOWN_NAMES.iter().any(|n| pdu_action_decodes_to(&pdu, n)));
    }
    if let Some(Id::Str(s)) = pdu.id {
        check_str(text, s);
    }
    if let Some(body) = pdu.body {
        let body = body.as_json().expect("a JSON frame's body is JSON");
        assert!(within(text, body.as_raw()));
        let again = json::parse(body.as_raw(), json::MAX_DEPTH).unwrap();
        check_value(text, again);
        let again = again.as_object().expect("an object");
        assert!(body.members().eq(again.members()), "indexed members differ");
        assert_eq!(
            pdu.position().and_then(|p| p.as_json()),
            body.get("position").and_then(|v| v.as_str())
        );
        assert_eq!(
            pdu.subscription_id().and_then(|s| s.as_json()),
            body.get("subscription_id").and_then(|v| v.as_str())
        );
    } else {
        assert!(pdu.position().is_none() && pdu.message().is_none() && pdu.channels().is_none());
    }
    for s in [pdu.position(), pdu.subscription_id(), pdu.nonce()]
        .into_iter()
        .flatten()
    {
        check_str(text, s);
    }
    let e = pdu.error();
    for s in [e.error, e.reason].into_iter().flatten() {
        check_str(text, s);
    }
    if let Some(m) = pdu.message() {
        check_value(text, m.as_json().expect("JSON"));
    }
    if let Some(channels) = pdu.channels() {
        assert!(within(text, channels.as_json().expect("JSON").as_raw()));
        for c in channels.elements() {
            check_value(text, c.as_json().expect("JSON"));
        }
    }

    match pdu.classify() {
        Err(e) => {
            check_error_offset(text, e);
            match e {
                PduError::MissingField { field: "body", .. } => assert!(pdu.body.is_none()),
                PduError::MissingField { field: "id", .. } => assert!(pdu.id.is_none()),
                _ => assert!(pdu.id.is_none(), "a PDU with id is a reply: {e:?}"),
            }
        }
        Ok(Incoming::Reply { id, pdu: p }) => {
            assert_eq!(Some(id), pdu.id);
            assert_eq!(p, pdu);
            assert!(
                pdu.body.is_some() || matches!(pdu.action, Action::PublishOk | Action::DeleteOk)
            );
        }
        Ok(incoming) => {
            assert!(pdu.id.is_none(), "unsolicited with an id: {incoming:?}");
            match incoming {
                Incoming::Data(d) => {
                    assert_eq!(pdu.action, Action::SubscriptionData);
                    check_str(text, d.subscription_id);
                    d.position.into_iter().for_each(|p| check_str(text, p));
                    assert!(within(text, d.messages.as_json().expect("JSON").as_raw()));
                    for m in d.messages.elements() {
                        check_value(text, m.as_json().expect("JSON"));
                    }
                }
                Incoming::ChannelError(c) => {
                    assert_eq!(pdu.action, Action::SubscriptionError);
                    for s in [Some(c.subscription_id), c.error, c.reason, c.position]
                        .into_iter()
                        .flatten()
                    {
                        check_str(text, s);
                    }
                }
                Incoming::FastForward(i) => {
                    assert_eq!(pdu.action, Action::SubscriptionInfo);
                    assert!(i.info == "fast_forward");
                    for s in [Some(i.subscription_id), i.reason, i.position]
                        .into_iter()
                        .flatten()
                    {
                        check_str(text, s);
                    }
                }
                Incoming::GeneralError(e) => {
                    assert_eq!(pdu.action, Action::GeneralError);
                    assert_eq!(e, pdu.error());
                }
                Incoming::Ignored(p) => {
                    assert_eq!(p, pdu);
                    assert!(!matches!(
                        pdu.action,
                        Action::SubscriptionData | Action::SubscriptionError | Action::GeneralError
                    ));
                }
                Incoming::Reply { .. } => unreachable!(),
                other => panic!("a kind of PDU this target does not check: {other:?}"),
            }
        }
    }
}

const KNOWN_NAMES: &[&str] = &[
    "rtm/publish",
    "rtm/publish/ok",
    "rtm/publish/error",
    "rtm/subscribe",
    "rtm/subscribe/ok",
    "rtm/subscribe/error",
    "rtm/unsubscribe",
    "rtm/unsubscribe/ok",
    "rtm/unsubscribe/error",
    "rtm/read",
    "rtm/read/ok",
    "rtm/read/error",
    "rtm/write",
    "rtm/write/ok",
    "rtm/write/error",
    "rtm/delete",
    "rtm/delete/ok",
    "rtm/delete/error",
    "rtm/search",
    "rtm/search/data",
    "rtm/search/ok",
    "rtm/search/error",
    "auth/handshake",
    "auth/handshake/ok",
    "auth/handshake/error",
    "auth/authenticate",
    "auth/authenticate/ok",
    "auth/authenticate/error",
    "rtm/subscription/data",
    "rtm/subscription/error",
    "rtm/subscription/info",
    "/error",
];

/// Whether an `Other` action's raw text decodes to `name` (then it should have been named).
fn pdu_action_decodes_to(pdu: &Pdu<'_>, name: &str) -> bool {
    let Action::Other(raw) = pdu.action else {
        return false;
    };
    let quoted = format!("\"{raw}\"");
    json::parse(&quoted, 0)
        .ok()
        .and_then(|v| v.as_str())
        .is_some_and(|s| s == name)
}

/// Offsets point into the text; `MissingField` at the object that lacks it,
/// `InvalidField` at the offending value.
fn check_error_offset(text: &str, e: PduError) {
    match e {
        PduError::Json(j) => assert!(j.offset <= text.len()),
        PduError::Cbor(c) => panic!("a CBOR error from JSON text: {c:?}"),
        PduError::NotAnObject { offset } => {
            assert!(offset < text.len());
            assert_ne!(text.as_bytes()[offset], b'{');
        }
        PduError::MissingField { offset, field } => {
            assert_eq!(
                text.as_bytes().get(offset),
                Some(&b'{'),
                "MissingField {field} offset {offset} is not an object's start"
            );
        }
        PduError::InvalidField { offset, .. } => {
            assert!(offset < text.len());
            assert!(!matches!(
                text.as_bytes()[offset],
                b' ' | b'\t' | b'\n' | b'\r' | b',' | b':'
            ));
        }
        other => panic!("an error this target does not check: {other:?}"),
    }
}

/// Keys of an object repeat (after unescaping), here or in a nested object on the path.
fn has_duplicate_keys(obj: json::Object<'_>) -> bool {
    let mut seen = std::collections::HashSet::new();
    obj.members().any(|(k, _)| !seen.insert(k.to_string()))
}

/// Against serde_json, where both must agree: no repeated keys in the envelope or body
/// (serde keeps the last, this reader the first).
fn differential(text: &str, pdu: &Pdu<'_>) {
    let Ok(Json::Object(env)) = serde_json::from_str::<Json>(text) else {
        return;
    };
    let envelope = json::parse(text, json::MAX_DEPTH)
        .unwrap()
        .as_object()
        .unwrap();
    let body = pdu.body.and_then(|b| b.as_json());
    if has_duplicate_keys(envelope) || body.is_some_and(has_duplicate_keys) {
        return;
    }
    let Some(Json::String(action)) = env.get("action") else {
        panic!("serde_json sees no string action in {text:?}");
    };
    match pdu.action {
        Action::Other(_) => assert!(!KNOWN_NAMES.contains(&action.as_str())),
        named => assert_eq!(named.as_str(), action),
    }
    match (pdu.id, env.get("id")) {
        (None, None) => {}
        (Some(Id::Str(s)), Some(Json::String(t))) => assert!(s == t.as_str()),
        (Some(Id::Int(n)), Some(Json::Number(m))) => assert_eq!(Some(n), m.as_u64()),
        (id, other) => panic!("id {id:?} vs serde {other:?}"),
    }
    match (pdu.body, env.get("body")) {
        (None, None) => {}
        (Some(b), Some(Json::Object(m))) => {
            let mine: Json = serde_json::from_str(b.as_json().expect("JSON").as_raw()).unwrap();
            assert_eq!(&mine, &Json::Object(m.clone()));
        }
        (b, other) => panic!("body {b:?} vs serde {other:?}"),
    }
}

// ------------------------------------------------------------------------------------
// Encoding
// ------------------------------------------------------------------------------------

const NASTY: &[&str] = &[
    "",
    "chan",
    "a\"b",
    "a\\b",
    "\\u0041",
    "\u{0}\u{1f}\n\t\r\u{8}\u{c}",
    "é€😀",
    "\u{7f}\u{2028}\u{feff}",
    "</script>",
    "rtm/publish",
];

fn string(u: &mut Unstructured<'_>) -> String {
    if u.ratio(1, 3).unwrap_or(false) {
        u.choose(NASTY).map(|s| s.to_string()).unwrap_or_default()
    } else {
        let s: String = u.arbitrary().unwrap_or_default();
        s.chars().take(40).collect()
    }
}

fn value(u: &mut Unstructured<'_>, depth: u32) -> Json {
    let kind = u.int_in_range(0..=7u8).unwrap_or(0);
    match kind {
        0 => Json::Null,
        1 => Json::Bool(u.arbitrary().unwrap_or(false)),
        2 => Json::from(u.arbitrary::<u64>().unwrap_or(0)),
        3 => Json::from(u.arbitrary::<i64>().unwrap_or(0)),
        // Floats serde_json reads back exactly without `float_roundtrip` (dyadic, short).
        4 => {
            let n = f64::from(u.arbitrary::<i32>().unwrap_or(0));
            let scale = *u.choose(&[1.0, 2.0, 8.0, 1024.0, -4.0]).unwrap_or(&1.0);
            serde_json::Number::from_f64(n / scale).map_or(Json::Null, Json::Number)
        }
        5 => Json::String(string(u)),
        6 if depth > 0 => {
            let n = u.int_in_range(0..=4usize).unwrap_or(0);
            Json::Array((0..n).map(|_| value(u, depth - 1)).collect())
        }
        7 if depth > 0 => {
            let n = u.int_in_range(0..=4usize).unwrap_or(0);
            let mut m = serde_json::Map::new();
            for _ in 0..n {
                m.insert(string(u), value(u, depth - 1));
            }
            Json::Object(m)
        }
        _ => Json::String(string(u)),
    }
}

/// Whether `v` holds a float (serde_json may read its text back one ulp off; other values
/// read back exactly as they are).
fn has_float(v: &Json) -> bool {
    match v {
        Json::Number(n) => n.is_f64(),
        Json::Array(a) => a.iter().any(has_float),
        Json::Object(o) => o.values().any(has_float),
        _ => false,
    }
}

/// A message: an arbitrary value, sometimes pretty-printed or wrapped in whitespace, or a
/// deep chain of arrays around the default nesting limit.
fn message(u: &mut Unstructured<'_>) -> (String, Json) {
    if u.ratio(1, 12).unwrap_or(false) {
        let depth = u.int_in_range(25..=40usize).unwrap_or(30);
        let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let v = serde_json::from_str(&text).unwrap();
        return (text, v);
    }
    let v = value(u, 4);
    let mut text = if u.arbitrary::<bool>().unwrap_or(false) {
        serde_json::to_string_pretty(&v).unwrap()
    } else {
        serde_json::to_string(&v).unwrap()
    };
    if u.ratio(1, 4).unwrap_or(false) {
        text = format!(" \n\t{text}\r ");
    }
    // serde_json (without `float_roundtrip`) may read a float back one ulp off: the
    // value to expect is the text's, as serde_json reads it.
    let v = if has_float(&v) {
        serde_json::from_str(&text).unwrap_or(v)
    } else {
        v
    };
    (text, v)
}

/// A JSON object text with members from a small set of names (repeats allowed), and the
/// members it stands for (the last of a repeated key wins).
fn members(u: &mut Unstructured<'_>) -> (String, Vec<(String, Json)>) {
    const KEYS: &[&str] = &[
        "channel",
        "position",
        "message",
        "subscription_id",
        "history",
        "fast_forward",
        "filter",
        "x",
        "only",
        "prefix",
    ];
    let n = u.int_in_range(0..=4usize).unwrap_or(0);
    let mut pairs = Vec::new();
    for _ in 0..n {
        let key = if u.ratio(1, 4).unwrap_or(false) {
            string(u)
        } else {
            u.choose(KEYS).map(|k| k.to_string()).unwrap_or_default()
        };
        let v = value(u, 2);
        let v = if has_float(&v) {
            serde_json::from_str(&v.to_string()).unwrap_or(v)
        } else {
            v
        };
        pairs.push((key, v));
    }
    let text = format!(
        "{{{}}}",
        pairs
            .iter()
            .map(|(k, v)| format!("{}: {}", Json::String(k.clone()), v))
            .collect::<Vec<_>>()
            .join(" , ")
    );
    (text, pairs)
}

/// The owned inputs of one request.
struct Parts {
    kind: u8,
    a: String,
    b: String,
    msg: (String, Json),
    extras: Option<(String, Vec<(String, Json)>)>,
    position: Option<String>,
    history: Option<History>,
    fast_forward: bool,
    period: Option<u32>,
    force: bool,
    only: bool,
    view: bool,
}

fn parts(u: &mut Unstructured<'_>) -> Parts {
    let kind = u.int_in_range(0..=9u8).unwrap_or(0);
    let a = string(u);
    let b = string(u);
    let msg = message(u);
    let extras = if u.arbitrary::<bool>().unwrap_or(false) {
        Some(members(u))
    } else {
        None
    };
    let position = if u.arbitrary::<bool>().unwrap_or(false) {
        Some(string(u))
    } else {
        None
    };
    let history = match u.int_in_range(0..=2u8).unwrap_or(0) {
        1 => Some(History::Count(u.arbitrary().unwrap_or(0))),
        2 => Some(History::Age(u.arbitrary().unwrap_or(0))),
        _ => None,
    };
    Parts {
        kind,
        a,
        b,
        msg,
        extras,
        position,
        history,
        fast_forward: u.arbitrary().unwrap_or(false),
        period: u.arbitrary().unwrap_or(None),
        force: u.arbitrary().unwrap_or(false),
        only: u.arbitrary().unwrap_or(false),
        view: u.arbitrary().unwrap_or(false),
    }
}

fn obj<const N: usize>(pairs: [(&str, Json); N]) -> serde_json::Map<String, Json> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// The request and the body it must encode to (typed members, then extras over them).
/// `message` is the value of `p.msg` (moved out of it, not copied).
fn request(p: &Parts, message: Json) -> (Request<'_>, serde_json::Map<String, Json>) {
    let s = |s: &str| Json::String(s.to_owned());
    let (req, mut body) = match p.kind {
        0 => (
            Request::Publish {
                channel: &p.a,
                message: p.msg.0.as_str().into(),
            },
            obj([("channel", s(&p.a)), ("message", message)]),
        ),
        1 => (
            Request::Write {
                channel: &p.a,
                message: p.msg.0.as_str().into(),
            },
            obj([("channel", s(&p.a)), ("message", message)]),
        ),
        2 => (
            Request::Unsubscribe {
                subscription_id: &p.a,
            },
            obj([("subscription_id", s(&p.a))]),
        ),
        3 => {
            let mut body = obj([("channel", s(&p.a))]);
            if let Some(pos) = &p.position {
                body.insert("position".into(), s(pos));
            }
            (
                Request::Read {
                    channel: &p.a,
                    position: p.position.as_deref(),
                    extras: p.extras.as_ref().map(|e| e.0.as_str()),
                },
                body,
            )
        }
        4 => (
            Request::Delete { channel: &p.a },
            obj([("channel", s(&p.a))]),
        ),
        // The auth requests of any method: nasty method and member names and values.
        5 => (
            Request::Handshake {
                method: &p.b,
                data: (&p.b, &p.a),
            },
            obj([
                ("method", s(&p.b)),
                ("data", Json::Object(obj([(p.b.as_str(), s(&p.a))]))),
            ]),
        ),
        6 => (
            Request::Authenticate {
                method: "role_secret",
                credentials: (&p.b, &p.a),
            },
            obj([
                ("method", s("role_secret")),
                ("credentials", Json::Object(obj([(p.b.as_str(), s(&p.a))]))),
            ]),
        ),
        7 => (Request::Search { prefix: &p.a }, obj([("prefix", s(&p.a))])),
        8 => {
            let body_text = p.extras.as_ref().map_or("{}", |e| e.0.as_str());
            (
                Request::Other {
                    action: &p.b,
                    body: body_text,
                },
                serde_json::Map::new(),
            )
        }
        _ => {
            let target = if p.view {
                Target::View {
                    subscription_id: &p.a,
                    filter: &p.b,
                }
            } else {
                Target::Channel(&p.a)
            };
            let mut body = serde_json::Map::new();
            match target {
                Target::Channel(c) => body.insert("channel".into(), s(c)),
                Target::View {
                    subscription_id, ..
                } => body.insert("subscription_id".into(), s(subscription_id)),
            };
            if p.fast_forward {
                body.insert("fast_forward".into(), Json::Bool(true));
            }
            if p.view {
                body.insert("filter".into(), s(&p.b));
            }
            if let Some(pos) = &p.position {
                body.insert("position".into(), s(pos));
            }
            if let Some(h) = p.history {
                let (k, n) = match h {
                    History::Count(n) => ("count", n),
                    History::Age(n) => ("age", n),
                };
                body.insert("history".into(), Json::Object(obj([(k, Json::from(n))])));
            }
            if let Some(period) = p.period {
                body.insert("period".into(), Json::from(period));
            }
            if p.force {
                body.insert("force".into(), Json::Bool(true));
            }
            if p.only {
                body.insert("only".into(), s("value_changes"));
            }
            let sub = SubscribeRequest {
                target,
                position: p.position.as_deref(),
                history: p.history,
                fast_forward: p.fast_forward,
                period: p.period,
                force: p.force,
                only_value_changes: p.only,
                extras: p.extras.as_ref().map(|e| e.0.as_str()),
            };
            (Request::Subscribe(sub), body)
        }
    };
    let takes_extras = matches!(p.kind, 3 | 8) || p.kind > 8;
    if takes_extras {
        if let Some((_, pairs)) = &p.extras {
            for (k, v) in pairs {
                body.insert(k.clone(), v.clone());
            }
        }
    }
    (req, body)
}

fn depth(v: &Json) -> usize {
    match v {
        Json::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Json::Object(o) => depth_of_members(o),
        _ => 0,
    }
}

fn depth_of_members(o: &serde_json::Map<String, Json>) -> usize {
    1 + o.values().map(depth).max().unwrap_or(0)
}

thread_local! {
    /// The encoder's output buffer, allocated once: as large as the biggest PDU a request
    /// may make (a megabyte), left dirty between executions (the encoder does not read it).
    static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0u8; 1 << 20]);
}

/// Encodes into the first `cap` bytes of the scratch buffer; returns the result and an
/// owned copy of what was written.
fn encode(req: &Request<'_>, id: Option<u64>, cap: usize) -> (Result<(), WriteError>, Vec<u8>) {
    SCRATCH.with(|buf| {
        let mut buf = buf.borrow_mut();
        let mut out = Cursor::new(&mut buf[..cap]);
        let r = req.encode(id, &mut out);
        (r, out.written().to_vec())
    })
}

/// One request from the input, encoded once, and one group of checks (`check % 3`):
/// 0 = serde_json reads exactly the request; 1 = `Pdu::parse` reads it back;
/// 2 = small buffers, `encode_body` + `write_envelope`, no key written twice.
fn check_request(u: &mut Unstructured<'_>, check: u8) {
    let mut p = parts(u);
    let message = std::mem::take(&mut p.msg.1);
    let id = if u.ratio(1, 4).unwrap_or(false) {
        None
    } else {
        Some(if u.arbitrary().unwrap_or(false) {
            u64::MAX
        } else {
            u.int_in_range(0..=1000u64).unwrap_or(0)
        })
    };
    let small = u.int_in_range(0..=200usize).unwrap_or(0);
    let (req, expected_body) = request(&p, message);

    let (r, out) = encode(&req, id, 1 << 20);
    if let Err(e) = r {
        panic!("{req:?} did not encode into a megabyte: {e:?}");
    }
    let text = std::str::from_utf8(&out).expect("UTF-8 output");
    let action_name = match p.kind {
        8 => p.b.as_str(),
        _ => req.action().as_str(),
    };
    match check {
        0 => check_request_serde(text, id, action_name, &expected_body),
        1 => check_request_read_back(text, id, action_name, &p, expected_body),
        _ => check_request_buffers(&req, id, small, text),
    }
}

/// serde_json reads exactly the request: action, id, nothing else, the expected body.
fn check_request_serde(
    text: &str,
    id: Option<u64>,
    action_name: &str,
    expected_body: &serde_json::Map<String, Json>,
) {
    let v: Json =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("invalid JSON {text:?}: {e}"));
    let env = v.as_object().expect("an object");
    assert_eq!(
        env.get("action"),
        Some(&Json::String(action_name.to_owned()))
    );
    assert_eq!(env.get("id").and_then(Json::as_u64), id);
    assert_eq!(env.contains_key("id"), id.is_some());
    assert_eq!(env.len(), 2 + usize::from(id.is_some()));
    match env.get("body") {
        Some(Json::Object(body)) => assert!(body == expected_body, "{text}"),
        other => panic!("body {other:?} in {text}"),
    }
}

/// `Pdu::parse` reads the request back (refusing exactly when nesting exceeds the default
/// depth): action, id, accessors, and every body member equal to the expected one.
fn check_request_read_back(
    text: &str,
    id: Option<u64>,
    action_name: &str,
    p: &Parts,
    expected_body: serde_json::Map<String, Json>,
) {
    // The envelope is one level above the body.
    let depth = 1 + depth_of_members(&expected_body);
    let within_limit = depth <= json::DEFAULT_MAX_DEPTH;
    let pdu = if within_limit {
        Pdu::parse(text).unwrap_or_else(|e| panic!("depth {depth} of {text}: {e:?}"))
    } else {
        assert!(Pdu::parse(text).is_err(), "depth {depth} of {text}");
        Pdu::parse_with_depth(text, json::MAX_DEPTH).expect("encoded PDU parses")
    };
    let plain = !action_name
        .bytes()
        .any(|b| b < 0x20 || b == b'"' || b == b'\\');
    if plain {
        assert_eq!(pdu.action, Action::parse(action_name));
    } else {
        assert!(matches!(pdu.action, Action::Other(_)));
        assert!(pdu_action_decodes_to(&pdu, action_name));
    }
    assert_eq!(pdu.id, id.map(Id::Int));
    let body = pdu.body.and_then(|b| b.as_json()).expect("a JSON body");
    assert_eq!(body.members().count(), expected_body.len());
    let str_member = |key: &str| match expected_body.get(key) {
        Some(Json::String(s)) => Some(s.as_str()),
        _ => None,
    };
    let check = |got: Option<Text<'_>>, key: &str| match (got, str_member(key)) {
        (Some(g), Some(e)) => assert!(g == e, "{key}: {g:?} vs {e:?}"),
        (None, None) => {}
        (g, e) => panic!("{key}: {g:?} vs {e:?}"),
    };
    check(pdu.position(), "position");
    check(pdu.subscription_id(), "subscription_id");
    match (pdu.message(), expected_body.get("message")) {
        (Some(m), Some(_)) => {
            // Its value is compared with the other members below.
            let m = m.as_json().expect("JSON");
            if matches!(p.kind, 0 | 1) {
                assert_eq!(m.as_raw(), p.msg.0.trim_matches([' ', '\t', '\n', '\r']));
            }
        }
        (None, None) => {}
        (g, e) => panic!("message: {g:?} vs {e:?}"),
    }
    let mut members = BTreeMap::new();
    for (k, v) in body.members() {
        members.insert(
            k.to_string(),
            serde_json::from_str::<Json>(v.as_raw()).unwrap(),
        );
    }
    let expected: BTreeMap<String, Json> = expected_body.into_iter().collect();
    assert_eq!(members, expected);
}

/// A too small buffer fails with `BufferTooSmall` leaving a prefix; `encode_body` +
/// `write_envelope` give the same bytes; no key is written twice, at any level of the
/// envelope and body, and the envelope's body is `encode_body`'s text.
fn check_request_buffers(req: &Request<'_>, id: Option<u64>, small: usize, text: &str) {
    let out = text.as_bytes();
    let (r_small, out_small) = encode(req, id, small);
    if small < out.len() {
        assert_eq!(
            r_small,
            Err(WriteError::Encode(EncodeError::BufferTooSmall {
                capacity: small
            }))
        );
        assert!(
            out.starts_with(&out_small),
            "a failed encode left a non-prefix"
        );
    } else {
        assert_eq!((r_small, &out_small[..]), (Ok(()), out));
    }

    let body_text = SCRATCH.with(|buf| {
        let mut buf = buf.borrow_mut();
        let mut body_out = Cursor::new(&mut buf[..out.len()]);
        req.encode_body(&mut body_out)
            .expect("the body fits where the PDU did");
        std::str::from_utf8(body_out.written()).unwrap().to_owned()
    });
    SCRATCH.with(|buf| {
        let mut buf = buf.borrow_mut();
        let mut env_out = Cursor::new(&mut buf[..out.len()]);
        write_envelope(req.action().as_str(), id, &body_text, &mut env_out).unwrap();
        assert_eq!(
            env_out.written(),
            out,
            "encode_body + write_envelope differ"
        );
    });

    let top = json::parse(text, json::MAX_DEPTH)
        .unwrap()
        .as_object()
        .unwrap();
    assert!(!has_duplicate_keys(top));
    let body_obj = top.get("body").and_then(|b| b.as_object()).unwrap();
    assert!(!has_duplicate_keys(body_obj), "repeated key in {text}");
    assert_eq!(body_obj.as_raw(), body_text);
}

// ------------------------------------------------------------------------------------
// Escaping
// ------------------------------------------------------------------------------------

/// The C SDK's escaping: `"` and `\`, control characters as short escapes or
/// `\u00XX`, everything else verbatim.
fn model_escape(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// With `read_back` clear: the output is the model's escaping, and one byte short fails
/// leaving a prefix; set: serde_json and `json::parse` read the output back to the input.
fn check_string(s: &str, read_back: bool) {
    let model = if read_back {
        None
    } else {
        Some(model_escape(s))
    };
    let written = SCRATCH.with(|buf| {
        let mut buf = buf.borrow_mut();
        let cap = model.as_ref().map_or(buf.len(), |e| e.len());
        let mut out = Cursor::new(&mut buf[..cap]);
        json::write::string(&mut out, s).expect("fits exactly");
        std::str::from_utf8(out.written()).unwrap().to_owned()
    });
    let Some(expected) = model else {
        let back: String = serde_json::from_str(&written).expect("serde_json reads it");
        assert_eq!(back, s);
        let v = json::parse(&written, 0).expect("json::parse reads it");
        let js = v.as_str().expect("a string");
        assert!(js == s);
        assert!(js.chars().eq(s.chars()));
        let mut ubuf = vec![0u8; s.len()];
        assert_eq!(js.unescape_into(&mut ubuf), Ok(s));
        if !s.is_empty() {
            assert!(js.unescape_into(&mut ubuf[..s.len() - 1]).is_err());
        }
        return;
    };
    assert_eq!(written, expected);
    // One byte short fails, leaving a prefix.
    SCRATCH.with(|buf| {
        let mut buf = buf.borrow_mut();
        let mut out = Cursor::new(&mut buf[..expected.len() - 1]);
        assert!(json::write::string(&mut out, s).is_err());
        assert!(expected.as_bytes().starts_with(out.written()));
    });
}

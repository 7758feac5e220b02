//! `json::parse` and the typed benchmark-server replies on arbitrary bodies.
//!
//! Input: `[depth][status][pick][body…]`
//! - depth: the nesting limit, `depth % 48`, or 300 for 255 (clamped to `MAX_DEPTH`).
//! - status: 200 for values below 128, else one of a table of other statuses (bits 0-3);
//!   bits 4-6 pick the reply type(s) that `read_reply` reads (one reply check per input).
//! - pick: which value (in document order, `pick * values / 256`) gets the checks whose
//!   cost grows with the size of the value or of its container.
//!
//! Properties:
//! - `parse`/`parse_bytes` never panic; an error's offset is within the input; if Ok,
//!   `as_raw` is exactly the input without surrounding JSON whitespace, the value's nesting
//!   is within the limit and one less fails with `TooDeep`.
//! - Walking every member, element, string (`chars`, `unescape_into`, `Display`, `==`) and
//!   number never panics and is self-consistent: integers read as `i64`/`u64` exactly
//!   when their text does; for the picked value, its raw text re-parses to itself, `get`
//!   finds the first member with its key, `Array::get(i)` is it as the i-th element.
//! - Differential against serde_json: the same texts are accepted (serde_json's lone-surrogate
//!   and out-of-range-number refusals aside), with the same strings, structure and numbers.
//! - `read_reply` for every reply type with any status: no panic; non-200 is exactly
//!   `Error::from_reply`; invalid JSON is `Error::Json` with the parser's error; a reply's
//!   iterators see every checked item; timestamps round-trip to their text.
//! - `Error::from_reply`: no panic, body view a prefix of at most `MAX_BODY_VIEW` bytes,
//!   `Server` only for an object with string `reason_code` and `reason`; `Display` works.
#![no_main]

use benchlink_core::bench::{
    read_reply, BenchStatus, Clusters, CommandSent, Empty, EnvSet, Error, Results, Started,
    Stopped, TypecheckOk, MAX_BODY_VIEW,
};
use benchlink_core::json::{self, ErrorKind, Kind, Value, MAX_DEPTH};
use libfuzzer_sys::fuzz_target;

const STATUSES: [u16; 16] = [
    404, 400, 500, 403, 503, 501, 502, 0, 199, 201, 204, 301, 65535, 401, 200, 599,
];

fuzz_target!(|input: &[u8]| {
    let [depth, status, pick, body @ ..] = input else {
        return;
    };
    let max_depth = if *depth == 255 {
        300
    } else {
        usize::from(*depth % 48)
    };
    let reply = (*status >> 4) & 7;
    let status = if *status < 128 {
        200
    } else {
        STATUSES[usize::from(*status % 16)]
    };
    check_json(body, max_depth, *pick);
    check_replies(status, body, reply);
});

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn check_json(body: &[u8], max_depth: usize, pick: u8) {
    let parsed = json::parse_bytes(body, max_depth);
    let text = std::str::from_utf8(body);
    if let Ok(text) = text {
        assert_eq!(json::parse(text, max_depth), parsed, "parse vs parse_bytes");
    }
    let value = match parsed {
        Err(e) => {
            assert!(
                e.offset <= body.len(),
                "error offset {} past {}",
                e.offset,
                body.len()
            );
            assert!(!e.to_string().is_empty());
            if e.kind == ErrorKind::InvalidUtf8 {
                assert!(text.is_err());
            }
            differential(body, None);
            return;
        }
        Ok(v) => v,
    };
    let start = body.iter().position(|&b| !is_ws(b)).unwrap_or(body.len());
    let end = body
        .iter()
        .rposition(|&b| !is_ws(b))
        .map_or(start, |e| e + 1);
    assert_eq!(
        value.as_raw().as_bytes(),
        &body[start..end],
        "as_raw is the trimmed input"
    );

    let mut pick = Pick {
        at: count_values(value) * usize::from(pick) / 256,
        seen: 0,
    };
    let depth = walk(value, &mut pick);
    assert!(
        depth <= max_depth.min(MAX_DEPTH),
        "nesting {depth} past the limit {max_depth}"
    );
    if depth > 0 {
        let e = json::parse_bytes(body, depth - 1).expect_err("one level less must fail");
        assert_eq!(e.kind, ErrorKind::TooDeep);
    }
    differential(body, Some((value, depth)));
}

/// Values in the tree, the root included.
fn count_values(v: Value<'_>) -> usize {
    let children: usize = match v.kind() {
        Kind::Object => v
            .as_object()
            .expect("object")
            .members()
            .map(|(_, m)| count_values(m))
            .sum(),
        Kind::Array => v
            .as_array()
            .expect("array")
            .elements()
            .map(count_values)
            .sum(),
        _ => 0,
    };
    1 + children
}

/// The one value (by its index in document order) that gets the checks costing time in
/// the size of the value or of its container: running them on every value would make a
/// walk quadratic in the input, so the input picks one.
struct Pick {
    at: usize,
    seen: usize,
}

impl Pick {
    /// Whether the value about to be walked is the picked one.
    fn next_is_picked(&self) -> bool {
        self.seen == self.at
    }
}

/// Walks the whole value, checking the accessors; returns its nesting depth.
fn walk(v: Value<'_>, pick: &mut Pick) -> usize {
    if pick.next_is_picked() {
        // Its text is itself valid JSON.
        let again = json::parse(v.as_raw(), MAX_DEPTH).expect("a value's raw text re-parses");
        assert_eq!(again.as_raw(), v.as_raw());
    }
    pick.seen += 1;
    let kind = v.kind();
    assert_eq!(v.as_object().is_some(), kind == Kind::Object);
    assert_eq!(v.as_array().is_some(), kind == Kind::Array);
    assert_eq!(v.as_str().is_some(), kind == Kind::String);
    assert_eq!(v.as_bool().is_some(), kind == Kind::Bool);
    assert_eq!(v.is_null(), kind == Kind::Null);
    assert_eq!(v.as_number().is_some(), kind == Kind::Number);
    match kind {
        Kind::Object => {
            let obj = v.as_object().expect("object");
            let members: Vec<_> = obj.members().collect();
            assert_eq!(obj.is_empty(), members.is_empty());
            assert_eq!(obj.as_raw(), v.as_raw());
            let mut depth = 0;
            for (i, (key, value)) in members.iter().enumerate() {
                let decoded = check_str(*key);
                if pick.next_is_picked() {
                    let first = members
                        .iter()
                        .position(|(k, _)| *k == *key)
                        .expect("itself");
                    assert!(first <= i);
                    assert_eq!(
                        obj.get(&decoded).map(|v| v.as_raw()),
                        Some(members[first].1.as_raw())
                    );
                }
                depth = depth.max(walk(*value, pick));
            }
            depth + 1
        }
        Kind::Array => {
            let arr = v.as_array().expect("array");
            let elements: Vec<_> = arr.elements().collect();
            assert_eq!(arr.is_empty(), elements.is_empty());
            assert_eq!(arr.as_raw(), v.as_raw());
            assert_eq!(arr.get(elements.len()), None);
            let mut depth = 0;
            for (i, e) in elements.iter().enumerate() {
                if pick.next_is_picked() {
                    assert_eq!(arr.get(i), Some(*e));
                }
                depth = depth.max(walk(*e, pick));
            }
            depth + 1
        }
        Kind::String => {
            check_str(v.as_str().expect("string"));
            0
        }
        Kind::Number => {
            let raw = v.as_raw();
            let integer = !raw.contains(['.', 'e', 'E']);
            assert_eq!(v.as_i64(), if integer { raw.parse().ok() } else { None });
            assert_eq!(v.as_u64(), if integer { raw.parse().ok() } else { None });
            let f = v.as_f64().expect("number");
            let parsed: f64 = raw.parse().expect("JSON numbers parse as f64");
            assert_eq!(f.to_bits(), parsed.to_bits());
            // The number is its text: nothing converted, nothing lost.
            let n = v.as_number().expect("number");
            assert_eq!(n.as_str(), raw);
            assert_eq!(n.is_integer(), integer);
            assert_eq!((n.as_i64(), n.as_u64()), (v.as_i64(), v.as_u64()));
            assert_eq!(n.as_f64().to_bits(), f.to_bits());
            assert_eq!(json::Number::parse(raw), Ok(n));
            assert_eq!(n.to_string(), raw);
            0
        }
        Kind::Bool | Kind::Null => 0,
    }
}

/// Decodes a string every way there is and checks they agree; returns the text.
fn check_str(s: json::JsonStr<'_>) -> String {
    let decoded: String = s.chars().collect();
    assert_eq!(s.to_string(), decoded, "Display vs chars");
    #[allow(clippy::eq_op)] // `PartialEq` is written by hand: it must hold for itself
    let reflexive = s == s;
    assert!(
        reflexive && s == decoded.as_str(),
        "a string equals itself and its text"
    );
    assert_eq!(s.is_empty(), s.as_raw().is_empty());
    if let Some(plain) = s.as_plain() {
        assert_eq!(plain, decoded);
    }
    let mut buf = vec![0u8; decoded.len()];
    assert_eq!(s.unescape_into(&mut buf), Ok(decoded.as_str()));
    if !decoded.is_empty() {
        let mut short = vec![0u8; decoded.len() - 1];
        assert!(
            s.unescape_into(&mut short).is_err(),
            "unescaped into a too-small buffer"
        );
    }
    decoded
}

/// Compares with serde_json: same acceptance and, when both accept, the same tree.
fn differential(body: &[u8], ours: Option<(Value<'_>, usize)>) {
    let theirs = serde_json::from_slice::<serde_json::Value>(body);
    match (ours, theirs) {
        (Some((value, _)), Ok(theirs)) => same(value, &theirs),
        (Some((_, depth)), Err(e)) => {
            let msg = e.to_string();
            // serde_json refuses lone surrogate escapes (we decode them to U+FFFD), floats
            // out of f64 range (we make them infinite), and nests beyond 128 levels.
            assert!(
                msg.contains("surrogate")
                    || msg.contains("hex escape")
                    || msg.contains("out of range")
                    || depth > 127,
                "serde_json rejects what we accepted: {msg}"
            );
        }
        (None, Ok(theirs)) => {
            // We may refuse only for the nesting limit.
            let e = json::parse_bytes(body, MAX_DEPTH).err();
            assert!(
                e.is_none() || serde_depth(&theirs) > MAX_DEPTH,
                "we reject what serde_json accepts: {e:?}"
            );
        }
        (None, Err(_)) => {}
    }
}

fn serde_depth(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::Array(a) => 1 + a.iter().map(serde_depth).max().unwrap_or(0),
        serde_json::Value::Object(o) => 1 + o.values().map(serde_depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn same(ours: Value<'_>, theirs: &serde_json::Value) {
    use serde_json::Value as J;
    match (ours.kind(), theirs) {
        (Kind::Null, J::Null) => {}
        (Kind::Bool, J::Bool(b)) => assert_eq!(ours.as_bool(), Some(*b)),
        (Kind::String, J::String(s)) => {
            let decoded: String = ours.as_str().expect("string").chars().collect();
            assert_eq!(&decoded, s);
        }
        (Kind::Number, J::Number(n)) => {
            let a = ours.as_f64().expect("number");
            let b = n.as_f64().expect("serde number as f64");
            let tolerance = 1e-12 * a.abs().max(b.abs());
            assert!(
                a == b || (a - b).abs() <= tolerance,
                "number {a} vs serde_json {b}"
            );
            if let Some(i) = n.as_i64() {
                assert_eq!(ours.as_i64(), Some(i));
            }
        }
        (Kind::Array, J::Array(items)) => {
            let elements: Vec<_> = ours.as_array().expect("array").elements().collect();
            assert_eq!(elements.len(), items.len());
            for (a, b) in elements.iter().zip(items) {
                same(*a, b);
            }
        }
        (Kind::Object, J::Object(map)) => {
            // serde_json keeps the last of duplicate keys.
            let mut last = std::collections::BTreeMap::new();
            for (k, v) in ours.as_object().expect("object").members() {
                last.insert(k.chars().collect::<String>(), v);
            }
            assert_eq!(last.len(), map.len());
            for (k, v) in &last {
                same(*v, map.get(k).expect("same keys"));
            }
        }
        (kind, other) => panic!("{kind:?} vs serde_json {other:?}"),
    }
}

/// `shown`: the errors already formatted; formatting an equal one again proves nothing.
/// (`Display` is written by hand and formatted; `Debug` is derived and is not.)
fn check_error<'a>(e: &Error<'a>, status: u16, body: &[u8], shown: &mut Vec<Error<'a>>) {
    if !shown.contains(e) {
        let _ = e.to_string();
        shown.push(*e);
    }
    let _ = std::error::Error::source(e);
    if status != 200 {
        assert_eq!(*e, Error::from_reply(status, body));
        assert_eq!(e.http_status(), Some(status));
    }
}

#[allow(clippy::no_effect)] // `reply!` with nothing to check is the unit expression
fn check_replies(status: u16, body: &[u8], reply: u8) {
    // from_reply
    let e = Error::from_reply(status, body);
    let _ = e.to_string();
    let mut shown = vec![e];
    match e {
        Error::Http {
            status: s,
            body: view,
            body_len,
        } => {
            assert_eq!((s, body_len), (status, body.len()));
            assert!(view.len() <= MAX_BODY_VIEW && body.starts_with(view));
            assert_eq!(view.len(), body.len().min(MAX_BODY_VIEW));
        }
        Error::Server(se) => {
            assert_eq!(se.http_status, status);
            let v = json::parse_bytes(body, 16).expect("a server error is JSON");
            assert!(v.get("reason_code").and_then(|c| c.as_str()).is_some());
            assert!(v.get("reason").and_then(|r| r.as_str()) == Some(se.reason));
            let _ = se.reason.to_string();
            let _ = se.reason_code.as_str();
        }
        other => panic!("from_reply made {other:?}"),
    }

    let json_error = if status == 200 {
        json::parse_bytes(body, 16).err()
    } else {
        None
    };
    macro_rules! reply {
        ($t:ty, |$r:ident| $check:expr) => {
            match read_reply::<$t>(status, body) {
                Ok($r) => {
                    assert_eq!(status, 200);
                    $check;
                }
                Err(e) => {
                    check_error(&e, status, body, &mut shown);
                    if let Some(j) = json_error {
                        assert_eq!(e, Error::Json(j));
                    }
                }
            }
        };
    }
    // One reply type per input (two for the last group of trivial replies).
    match reply {
        0 => {
            reply!(BenchStatus<'_>, |s| {
                let v = json::parse_bytes(body, 16).expect("valid");
                for (t, key) in [
                    (s.create_time, "create_time"),
                    (s.start_time, "start_time"),
                    (s.finish_time, "finish_time"),
                ] {
                    if let Some(t) = t {
                        let raw = v
                            .get(key)
                            .and_then(|x| x.as_str())
                            .expect("present")
                            .as_raw();
                        assert_eq!(t.to_string(), raw, "timestamp round trip");
                    }
                }
                let _ = s.status.as_str();
                let _ = s.status.is_final();
                let _ = s.reason.map(|r| r.to_string());
            });
        }
        1 => {
            reply!(Results<'_>, |r| {
                let v = json::parse_bytes(body, 16).expect("valid");
                let count = v.as_object().expect("object").members().count();
                assert_eq!(r.iter().count(), count, "every checked metric is iterated");
                assert_eq!(r.is_empty(), count == 0);
                for (name, metric) in &r {
                    let name = name.to_string();
                    assert!(r.get(&name).is_some());
                    let _ = metric.kind.as_str();
                    for (key, n) in metric.stats() {
                        assert!(metric.stat(key).is_some());
                        let _ = n.as_f64();
                    }
                }
            });
        }
        2 => {
            reply!(Clusters<'_>, |c| {
                let v = json::parse_bytes(body, 16).expect("valid");
                let count = v.as_array().expect("array").elements().count();
                assert_eq!(c.iter().count(), count, "every checked cluster is iterated");
                assert_eq!(c.is_empty(), count == 0);
                for cluster in &c {
                    if let Some(hosts) = cluster.hosts {
                        for h in hosts {
                            let _ = h.to_string();
                        }
                    }
                    let _ = cluster.timestamp.map(|t| t.to_string());
                    let _ = cluster.state.map(|s| s.as_str());
                    let _ = cluster.provider.map(|p| p.to_string());
                    let _ = cluster.reason.map(|p| p.to_string());
                }
            });
        }
        3 => {
            reply!(Started<'_>, |s| {
                let v = json::parse_bytes(body, 16).expect("valid");
                assert_eq!(v.get("id").and_then(|i| i.as_u64()), Some(s.id));
            });
        }
        4 => {
            reply!(Empty, |_e| assert!(json::parse_bytes(body, 16)
                .expect("valid")
                .as_object()
                .is_some()));
        }
        5 => {
            reply!(Stopped, |_s| ());
        }
        6 => {
            reply!(EnvSet, |_s| ());
        }
        _ => {
            reply!(CommandSent, |_s| ());
            reply!(TypecheckOk, |_s| ());
        }
    }
}

//! The JSON the real server emits (jiffy): compact, keys in alphabetical order (Erlang
//! term order of small maps), no trailing newline, floats in Erlang style.

use std::collections::BTreeMap;

use super::erlang::{format_float, Num};

/// A JSON value with sorted object keys.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Json {
    /// A string.
    Str(String),
    /// A number (integer or Erlang-style float).
    Num(Num),
    /// An array.
    Arr(Vec<Json>),
    /// An object; the `BTreeMap` keeps jiffy's key order.
    Obj(BTreeMap<String, Json>),
}

impl Json {
    /// An object from key/value pairs.
    pub(crate) fn obj<'a>(pairs: impl IntoIterator<Item = (&'a str, Json)>) -> Json {
        Json::Obj(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    }

    /// The empty object `{}`.
    pub(crate) fn empty() -> Json {
        Json::Obj(BTreeMap::new())
    }

    /// A string value.
    pub(crate) fn str(s: impl Into<String>) -> Json {
        Json::Str(s.into())
    }

    /// An integer value.
    pub(crate) fn int(i: i64) -> Json {
        Json::Num(Num::Int(i))
    }

    /// Compact encoding.
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Json::Str(s) => write_str(out, s),
            Json::Num(Num::Int(i)) => out.push_str(&i.to_string()),
            Json::Num(Num::Float(f)) => out.push_str(&format_float(*f)),
            Json::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Json::Obj(map) => {
                out.push('{');
                for (i, (k, v)) in map.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_str(out, k);
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_sorted() {
        let j = Json::obj([("status", Json::str("pending")), ("id", Json::int(3))]);
        assert_eq!(j.encode(), r#"{"id":3,"status":"pending"}"#);
        let e = Json::obj([
            ("reason", Json::str("a\"b\n")),
            ("reason_code", Json::str("x")),
        ]);
        assert_eq!(e.encode(), r#"{"reason":"a\"b\n","reason_code":"x"}"#);
        assert_eq!(Json::Num(Num::Float(1.0e-5)).encode(), "1.0e-5");
    }
}

//! Query strings parsed like cowlib's `cow_qs:parse_qs`: `+` is a space, `%XX` is
//! decoded, a key without `=` has the value `true` (an atom, not a string), and repeated
//! keys are all kept in order.

/// One query value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum QValue {
    /// `key=value`, decoded.
    Str(String),
    /// A bare `key` (the Erlang atom `true`).
    True,
}

impl QValue {
    /// The value as the real server would turn it into a string (`true` for a bare key).
    pub(crate) fn text(&self) -> &str {
        match self {
            QValue::Str(s) => s,
            QValue::True => "true",
        }
    }
}

/// A parsed query string.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Query {
    /// The pairs in request order.
    pub(crate) pairs: Vec<(String, QValue)>,
}

impl Query {
    /// Parses the part after `?` (without the `?`).
    pub(crate) fn parse(qs: &str) -> Query {
        let pairs = qs
            .split('&')
            .filter(|piece| !piece.is_empty())
            .map(|piece| match piece.split_once('=') {
                Some((k, v)) => (decode(k), QValue::Str(decode(v))),
                None => (decode(piece), QValue::True),
            })
            .collect();
        Query { pairs }
    }

    /// Every value of `key`, in order.
    pub(crate) fn all(&self, key: &str) -> Vec<&QValue> {
        self.pairs
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v)
            .collect()
    }

    /// The first value of `key` (single-value parameters use only the first occurrence).
    pub(crate) fn first(&self, key: &str) -> Option<&QValue> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// `application/x-www-form-urlencoded` decoding; invalid escapes are kept as they are
/// and invalid UTF-8 is replaced (the real server keeps raw binaries).
pub(crate) fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok());
                if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    out.push(v);
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            _ => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cowlib_rules() {
        let q = Query::parse("id=7&message=a+b%26c&flag&id=8&x=%zz");
        assert_eq!(q.all("id").len(), 2);
        assert_eq!(q.first("message"), Some(&QValue::Str("a b&c".into())));
        assert_eq!(q.first("flag"), Some(&QValue::True));
        assert_eq!(q.first("x"), Some(&QValue::Str("%zz".into())));
        assert!(Query::parse("").pairs.is_empty());
    }
}

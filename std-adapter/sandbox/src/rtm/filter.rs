//! Views: the `filter` of a subscribe, `select <fields|*> from <channel>`.
//!
//! Only projections are supported: no `where`, aliases, functions or grouping. A filter
//! with anything else is rejected as `invalid_format`, so a test never silently gets
//! unfiltered data.

use serde_json::{Map, Value};

/// A parsed `select … from …`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Filter {
    /// The channel after `from`.
    pub channel: String,
    /// The selected fields, or `None` for `*`.
    pub fields: Option<Vec<String>>,
}

impl Filter {
    /// Parses `select a, b from chan` (keywords in any case; names may be quoted with
    /// backticks or double quotes). `None` when the text is not such a select.
    pub(crate) fn parse(text: &str) -> Option<Filter> {
        let mut tokens = Tokens { rest: text };
        if !tokens.keyword("select") {
            return None;
        }
        let fields = if tokens.punct('*') {
            None
        } else {
            let mut fields = vec![tokens.name()?];
            while tokens.punct(',') {
                fields.push(tokens.name()?);
            }
            Some(fields)
        };
        if !tokens.keyword("from") {
            return None;
        }
        let channel = tokens.name()?;
        tokens.skip_space();
        if !tokens.rest.is_empty() {
            return None;
        }
        Some(Filter { channel, fields })
    }

    /// The view of one message: the selected fields of an object (missing ones as
    /// `null`); for a message that is not an object every selected field is `null`.
    pub(crate) fn project(&self, message: &Value) -> Value {
        let Some(fields) = &self.fields else {
            return message.clone();
        };
        let mut out = Map::new();
        for f in fields {
            let v = message.get(f.as_str()).cloned().unwrap_or(Value::Null);
            out.insert(f.clone(), v);
        }
        Value::Object(out)
    }
}

struct Tokens<'a> {
    rest: &'a str,
}

impl Tokens<'_> {
    fn skip_space(&mut self) {
        self.rest = self.rest.trim_start();
    }

    fn keyword(&mut self, kw: &str) -> bool {
        self.skip_space();
        let Some(head) = self.rest.get(..kw.len()) else {
            return false;
        };
        let after = self.rest[kw.len()..].chars().next();
        if head.eq_ignore_ascii_case(kw) && after.is_none_or(char::is_whitespace) {
            self.rest = &self.rest[kw.len()..];
            true
        } else {
            false
        }
    }

    fn punct(&mut self, c: char) -> bool {
        self.skip_space();
        match self.rest.strip_prefix(c) {
            Some(r) => {
                self.rest = r;
                true
            }
            None => false,
        }
    }

    /// A bare name (up to whitespace or a comma) or a quoted one.
    fn name(&mut self) -> Option<String> {
        self.skip_space();
        let first = self.rest.chars().next()?;
        if first == '`' || first == '"' {
            let body = &self.rest[1..];
            let end = body.find(first)?;
            let name = &body[..end];
            self.rest = &body[end + 1..];
            return (!name.is_empty()).then(|| name.to_owned());
        }
        let end = self
            .rest
            .find(|c: char| c.is_whitespace() || c == ',')
            .unwrap_or(self.rest.len());
        let name = &self.rest[..end];
        if name.is_empty() || name == "*" {
            return None;
        }
        self.rest = &self.rest[end..];
        Some(name.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses() {
        let f = Filter::parse("select test from ch").unwrap();
        assert_eq!(f.channel, "ch");
        assert_eq!(f.fields, Some(vec!["test".to_owned()]));
        let f = Filter::parse("  SELECT a ,b,`c d` FROM \"my chan\"  ").unwrap();
        assert_eq!(f.channel, "my chan");
        assert_eq!(
            f.fields,
            Some(vec!["a".to_owned(), "b".to_owned(), "c d".to_owned()])
        );
        assert_eq!(Filter::parse("select * from x.y").unwrap().fields, None);
        for bad in [
            "",
            "select",
            "select from ch",
            "select a from",
            "select a from ch where a > 1",
            "selecta from ch",
            "select a fromch",
            "select `a from ch",
            "select a, from ch",
        ] {
            assert_eq!(Filter::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn projects() {
        let f = Filter::parse("select test from ch").unwrap();
        assert_eq!(
            f.project(&json!({"test": 42, "unused": 1})),
            json!({"test": 42})
        );
        assert_eq!(f.project(&json!({"unused": 1})), json!({"test": null}));
        assert_eq!(f.project(&json!(7)), json!({"test": null}));
        let all = Filter::parse("select * from ch").unwrap();
        assert_eq!(all.project(&json!([1])), json!([1]));
    }
}

//! JSON printed the way Python's `json.dumps` prints it, because that is what
//! satori-rtm-cli prints and records, and what its users diff against: `", "` and
//! `": "` between items (or an indent of 2 spaces), every non-ASCII character as a
//! `\uXXXX` escape (surrogate pairs above the BMP), floats in their shortest round-trip
//! form with Python's exponent rules (`1e-05`, `1e+20`, `2.0`), integers of any size and
//! object keys exactly as received (nothing is re-ordered).
//!
//! The input is raw JSON text as the server sent it; it is checked first (which also
//! bounds its nesting), then re-printed token by token without building a value tree.

use std::fmt::Write as _;

/// One line with spaces after separators, or an indent of 2 spaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Style {
    /// `{"a": [1, 2]}`.
    Line,
    /// One element per line, indented by 2 spaces per level.
    Indent,
}

/// `json` re-printed in `style`; an error when `json` is not one JSON value.
pub(super) fn dumps(json: &str, style: Style) -> Result<String, serde_json::Error> {
    // Checks the syntax and bounds the depth (serde_json stops at 128 levels), so the
    // recursive printer below only ever walks valid, shallow-enough text.
    serde_json::from_str::<serde::de::IgnoredAny>(json)?;
    let mut printer = Printer {
        text: json.as_bytes(),
        at: 0,
        out: String::with_capacity(json.len() + json.len() / 4),
        style,
    };
    printer.value(0);
    Ok(printer.out)
}

/// A float as Python's `repr` writes it (what `json.dumps` uses): shortest round-trip
/// digits, positional between 1e-4 and 1e16, else `d.ddde±XX`; `NaN`, `Infinity`.
pub(super) fn float(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits too: "1.5e20", "-2e-5", "0e0".
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let decpt = exp + 1;
    let len = i32::try_from(digits.len()).unwrap_or(i32::MAX);
    let mut s = String::from(sign);
    if -4 < decpt && decpt <= 16 {
        if decpt <= 0 {
            s.push_str("0.");
            s.extend(std::iter::repeat_n('0', decpt.unsigned_abs() as usize));
            s.push_str(&digits);
        } else if decpt >= len {
            s.push_str(&digits);
            s.extend(std::iter::repeat_n('0', (decpt - len) as usize));
            s.push_str(".0");
        } else {
            let (int, frac) = digits.split_at(decpt as usize);
            let _ = write!(s, "{int}.{frac}");
        }
    } else {
        let (first, rest) = digits.split_at(1);
        s.push_str(first);
        if !rest.is_empty() {
            let _ = write!(s, ".{rest}");
        }
        let _ = write!(
            s,
            "e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.unsigned_abs()
        );
    }
    s
}

/// A string as a JSON string literal, escaped as Python's `json.dumps` does with
/// `ensure_ascii`: only printable ASCII stays as it is.
pub(super) fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_string(&mut out, s);
    out
}

fn push_string(out: &mut String, s: &str) {
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
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// Walks checked JSON text and writes it out again.
struct Printer<'a> {
    text: &'a [u8],
    at: usize,
    out: String,
    style: Style,
}

impl Printer<'_> {
    fn peek(&self) -> u8 {
        self.text.get(self.at).copied().unwrap_or(b'\0')
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), b' ' | b'\t' | b'\n' | b'\r') {
            self.at += 1;
        }
    }

    fn newline(&mut self, depth: usize) {
        self.out.push('\n');
        self.out.extend(std::iter::repeat_n(' ', depth * 2));
    }

    fn value(&mut self, depth: usize) {
        self.skip_ws();
        match self.peek() {
            b'{' => self.container(depth, b'}'),
            b'[' => self.container(depth, b']'),
            b'"' => self.string(),
            _ => self.scalar(),
        }
    }

    /// An object or an array, from its opening bracket to its closing one.
    fn container(&mut self, depth: usize, close: u8) {
        self.out.push(char::from(self.peek()));
        self.at += 1;
        self.skip_ws();
        if self.peek() == close {
            self.at += 1;
            self.out.push(char::from(close));
            return;
        }
        loop {
            if self.style == Style::Indent {
                self.newline(depth + 1);
            }
            if close == b'}' {
                self.skip_ws();
                self.string();
                self.skip_ws();
                self.at += 1; // ':'
                self.out.push_str(": ");
            }
            self.value(depth + 1);
            self.skip_ws();
            let next = self.peek();
            self.at += 1;
            if next != b',' {
                break;
            }
            self.out
                .push_str(if self.style == Style::Line { ", " } else { "," });
        }
        if self.style == Style::Indent {
            self.newline(depth);
        }
        self.out.push(char::from(close));
    }

    fn string(&mut self) {
        let start = self.at;
        self.at += 1;
        while self.at < self.text.len() {
            match self.peek() {
                b'\\' => self.at += 2,
                b'"' => {
                    self.at += 1;
                    break;
                }
                _ => self.at += 1,
            }
        }
        let raw = std::str::from_utf8(self.text.get(start..self.at).unwrap_or_default())
            .unwrap_or_default();
        match serde_json::from_str::<String>(raw) {
            Ok(s) => push_string(&mut self.out, &s),
            // A lone surrogate escape (valid JSON text, not a Rust string): as received.
            Err(_) => self.out.push_str(raw),
        }
    }

    /// A number, `true`, `false` or `null`.
    fn scalar(&mut self) {
        let start = self.at;
        while !matches!(
            self.peek(),
            b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r' | b'\0'
        ) {
            self.at += 1;
        }
        let raw = std::str::from_utf8(self.text.get(start..self.at).unwrap_or_default())
            .unwrap_or_default();
        let is_float = raw.bytes().any(|b| matches!(b, b'.' | b'e' | b'E'));
        match raw.parse::<f64>() {
            Ok(x) if is_float => self.out.push_str(&float(x)),
            _ => self.out.push_str(raw),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_python_repr() {
        for (x, py) in [
            (2.5, "2.5"),
            (1e-5, "1e-05"),
            (1e20, "1e+20"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (0.0001, "0.0001"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (2.0, "2.0"),
            (-1.5e-7, "-1.5e-07"),
            (1_795_454_096.601_095_2, "1795454096.6010952"),
            (1.234_567_890_123_456_8e17, "1.2345678901234568e+17"),
            (f64::INFINITY, "Infinity"),
            (f64::NAN, "NaN"),
        ] {
            assert_eq!(float(x), py, "{x:e}");
        }
    }

    #[test]
    fn one_line_as_json_dumps() {
        assert_eq!(
            dumps(r#"{"a":[1,2.50,"é"],"b":null}"#, Style::Line).unwrap(),
            r#"{"a": [1, 2.5, "\u00e9"], "b": null}"#
        );
        assert_eq!(
            dumps(" [ ] ", Style::Line).unwrap(),
            "[]",
            "empty containers"
        );
        assert_eq!(dumps("{}", Style::Line).unwrap(), "{}");
        assert_eq!(
            dumps(r#""tab\t\u0001 😀 \/""#, Style::Line).unwrap(),
            r#""tab\t\u0001 \ud83d\ude00 /""#
        );
        assert_eq!(
            dumps("123456789012345678901234567890", Style::Line).unwrap(),
            "123456789012345678901234567890",
            "integers of any size"
        );
        assert_eq!(
            dumps(r#"{ "z" : 1 , "a":2 }"#, Style::Line).unwrap(),
            r#"{"z": 1, "a": 2}"#,
            "keys in the order received"
        );
        assert!(dumps("{\"a\":", Style::Line).is_err());
        assert!(dumps(&"[".repeat(10_000), Style::Line).is_err());
    }

    #[test]
    fn indented_as_json_dumps_indent_2() {
        assert_eq!(
            dumps(r#"{"a":[1,2.5,"é"],"b":null,"c":{}}"#, Style::Indent).unwrap(),
            "{\n  \"a\": [\n    1,\n    2.5,\n    \"\\u00e9\"\n  ],\n  \"b\": null,\n  \"c\": {}\n}"
        );
        assert_eq!(dumps("7", Style::Indent).unwrap(), "7");
    }
}

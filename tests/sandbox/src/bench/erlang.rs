//! How the real server renders Erlang terms: numbers in `/data` and JSON, and the
//! `~p` rendering of binaries inside error texts.

use std::fmt::Write as _;

/// A metric value: Erlang keeps integers and floats apart, and so do `/data` lines and
/// `/results` (`max` of counts stays an integer, averages are floats).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Num {
    /// An Erlang integer.
    Int(i64),
    /// An Erlang float.
    Float(f64),
}

impl Num {
    /// The value as a float, for sorting and averaging.
    pub(crate) fn as_f64(self) -> f64 {
        match self {
            #[allow(clippy::cast_precision_loss)] // metric counts are far below 2^53
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

impl std::fmt::Display for Num {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Num::Int(i) => write!(f, "{i}"),
            Num::Float(x) => f.write_str(&format_float(*x)),
        }
    }
}

/// Formats a float like Erlang's `~p` (`io_lib_format:fwrite_g/1`): the shortest digits
/// that round-trip, always with a `.`, switching to an exponent (`1.0e-5`, `1.0e20`,
/// `1.0e3`) when that is shorter. Clients parse these with `f64::from_str`.
pub(crate) fn format_float(x: f64) -> String {
    if !x.is_finite() {
        // Erlang has no NaN or infinity; never produced by the emulator.
        return "0.0".to_owned();
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0.0".to_owned()
        } else {
            "0.0".to_owned()
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "2.9975917348002614e0".
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exp: i64 = exp.parse().unwrap_or(0);
    // Erlang's `insert_decimal(Place, Digits)`: value = 0.Digits × 10^Place.
    let place = exp + 1;
    let len = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    let mut out = String::new();
    if x < 0.0 {
        out.push('-');
    }
    if place == 0 {
        out.push_str("0.");
        out.push_str(&digits);
    } else if place < 0 || place >= len {
        let exp_l = (place - 1).to_string();
        let exp_dot = if len == 1 { 2 } else { 1 };
        let exp_cost = i64::try_from(exp_l.len()).unwrap_or(0) + 1 + exp_dot;
        if place < 0 && 2 - place <= exp_cost {
            out.push_str("0.");
            out.extend(std::iter::repeat_n(
                '0',
                usize::try_from(-place).unwrap_or(0),
            ));
            out.push_str(&digits);
        } else if place >= len && place - len + 2 <= exp_cost {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n(
                '0',
                usize::try_from(place - len).unwrap_or(0),
            ));
            out.push_str(".0");
        } else {
            let mut chars = digits.chars();
            if let Some(first) = chars.next() {
                out.push(first);
            }
            let rest: String = chars.collect();
            out.push('.');
            out.push_str(if rest.is_empty() { "0" } else { &rest });
            out.push('e');
            out.push_str(&exp_l);
        }
    } else {
        let (int_part, frac) =
            digits.split_at(usize::try_from(place).unwrap_or(0).min(digits.len()));
        out.push_str(int_part);
        out.push('.');
        out.push_str(frac);
    }
    out
}

/// The `~p` rendering of an Erlang binary, as it appears in error texts such as
/// `Wrong endpoint: <<"GET">> <<"/foo">>` and `Invalid severity: <<"x">>`.
pub(crate) fn binary(bytes: &[u8]) -> String {
    let printable = bytes
        .iter()
        .all(|&b| (0x20..0x7f).contains(&b) || matches!(b, b'\n' | b'\r' | b'\t'));
    let mut out = String::from("<<");
    if printable {
        out.push('"');
        for &b in bytes {
            match b {
                b'"' => out.push_str("\\\""),
                b'\\' => out.push_str("\\\\"),
                b'\n' => out.push_str("\\n"),
                b'\r' => out.push_str("\\r"),
                b'\t' => out.push_str("\\t"),
                _ => out.push(char::from(b)),
            }
        }
        out.push('"');
    } else {
        for (i, b) in bytes.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{b}");
        }
    }
    out.push_str(">>");
    out
}

/// The `~p` rendering of an Erlang string (a list of characters), as the dummy worker
/// prints it: `"hello\nworld\n"`.
pub(crate) fn string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_like_erlang() {
        for (x, s) in [
            (0.3, "0.3"),
            (2.0, "2.0"),
            (2.997_591_734_800_261_4, "2.9975917348002614"),
            (1.0e-5, "1.0e-5"),
            (1.0e20, "1.0e20"),
            (100.0, "100.0"),
            (1000.0, "1.0e3"),
            (0.001, "0.001"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-5"),
            (-1.5, "-1.5"),
            (0.0, "0.0"),
            (123.456, "123.456"),
        ] {
            assert_eq!(format_float(x), s, "{x}");
            assert_eq!(s.parse::<f64>().ok(), Some(x));
        }
    }

    #[test]
    fn binaries_like_erlang() {
        assert_eq!(binary(b"GET"), "<<\"GET\">>");
        assert_eq!(binary(b"/a\"b"), "<<\"/a\\\"b\">>");
        assert_eq!(binary(&[0, 255]), "<<0,255>>");
    }
}

//! satori-rtm-cli's recording format, which `benchlink rtm record` writes and
//! `benchlink rtm replay` reads, so recordings move between the two tools both ways.
//!
//! A recording is JSON Lines: each line is the body of one `rtm/subscription/data` PDU
//! (`subscription_id`, `position`, the `messages` batch) plus a `timestamp`, the Unix
//! time in seconds (a float) at which the recorder took it. Lines are printed as
//! Python's `json.dumps` prints them, as satori-rtm-cli's are. Replay publishes every
//! message of a line to its `subscription_id` (or one channel for all), keeping the
//! gaps between timestamps divided by a rate; only the relative timing matters.
//!
//! Replay also reads benchlink's earlier format, `{"t_ms":…,"channel":…,"message":…}`
//! (milliseconds since the recording began, one message per line), so recordings made
//! with earlier versions still play.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use serde_json::value::RawValue;

use super::pyjson::{self, Style};

/// One line of a recording for the batch `messages` (raw JSON texts) of
/// `subscription_id`, taken at `timestamp` (Unix seconds).
///
/// `line("ch1", Some("1500000000:1"), &["\"hello\""], 1.5)` is
/// `{"subscription_id": "ch1", "position": "1500000000:1", "messages": ["hello"], "timestamp": 1.5}`.
pub(super) fn line(
    subscription_id: &str,
    position: Option<&str>,
    messages: &[&str],
    timestamp: f64,
) -> Result<String, serde_json::Error> {
    let mut out = format!("{{\"subscription_id\": {}", pyjson::string(subscription_id));
    if let Some(position) = position {
        out.push_str(", \"position\": ");
        out.push_str(&pyjson::string(position));
    }
    out.push_str(", \"messages\": [");
    for (i, m) in messages.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&pyjson::dumps(m, Style::Line)?);
    }
    out.push_str("], \"timestamp\": ");
    out.push_str(&pyjson::float(timestamp));
    out.push('}');
    Ok(out)
}

/// A line of a recording, read.
#[derive(Debug)]
pub(super) struct Record<'a> {
    /// When it was recorded, in seconds (only differences matter).
    pub timestamp: f64,
    /// Where it was recorded (absent in a line that names none).
    pub channel: Option<Cow<'a, str>>,
    /// The messages, as raw JSON.
    pub messages: Vec<&'a RawValue>,
}

/// Why a line is not a record.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum BadRecord {
    /// Not JSON at all (an empty line included): skipped, as satori-rtm-cli does.
    NotJson,
    /// JSON, but not a record: a key is missing or has the wrong type.
    Invalid(String),
}

/// The members replay reads, of both formats.
#[derive(serde::Deserialize)]
struct Members<'a> {
    #[serde(borrow, default)]
    subscription_id: Option<Cow<'a, str>>,
    #[serde(default)]
    timestamp: Option<f64>,
    #[serde(borrow, default)]
    messages: Option<Vec<&'a RawValue>>,
    #[serde(default)]
    t_ms: Option<u64>,
    #[serde(borrow, default)]
    channel: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
}

/// Reads one line (its line ending already removed).
pub(super) fn parse(line: &str) -> Result<Record<'_>, BadRecord> {
    let m: Members<'_> = serde_json::from_str(line.trim_end()).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => BadRecord::Invalid(e.to_string()),
        _ => BadRecord::NotJson,
    })?;
    if let (None, None, Some(t_ms), Some(message)) = (m.timestamp, &m.messages, m.t_ms, m.message) {
        return Ok(Record {
            timestamp: t_ms as f64 / 1000.0,
            channel: m.channel,
            messages: vec![message],
        });
    }
    let missing = |key: &str| BadRecord::Invalid(format!("no {key:?}"));
    Ok(Record {
        timestamp: m.timestamp.ok_or_else(|| missing("timestamp"))?,
        channel: m.subscription_id,
        messages: m.messages.ok_or_else(|| missing("messages"))?,
    })
}

/// How fast to replay: `<factor>x` (`2x` twice as fast, `0.5x` half as fast; a bare
/// factor is accepted too) or `unlimited` (no waiting at all).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Rate {
    /// Gaps divided by this factor (finite, > 0).
    Times(f64),
    /// No gaps.
    Unlimited,
}

impl FromStr for Rate {
    type Err = String;
    fn from_str(s: &str) -> Result<Rate, String> {
        if s == "unlimited" {
            return Ok(Rate::Unlimited);
        }
        s.strip_suffix('x')
            .unwrap_or(s)
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0)
            .map(Rate::Times)
            .ok_or_else(|| format!("Invalid rate {s} (expected e.g. 1x, 2.5x, 0.5x or unlimited)"))
    }
}

/// How many times to play a file: a count or `inf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Loops {
    /// This many times (0: not at all).
    Times(u64),
    /// Until interrupted.
    Forever,
}

impl FromStr for Loops {
    type Err = String;
    fn from_str(s: &str) -> Result<Loops, String> {
        if s == "inf" {
            return Ok(Loops::Forever);
        }
        s.parse()
            .map(Loops::Times)
            .map_err(|_| format!("expected a count or inf, got {s:?}"))
    }
}

impl fmt::Display for Loops {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Loops::Times(n) => write!(f, "{n}"),
            Loops::Forever => f.write_str("inf"),
        }
    }
}

/// A limit of `record` in satori-rtm-cli's size syntax: digits, then any number of `k`,
/// `m`, `g` (either case), each multiplying by 10^3, 10^6, 10^9 (`3kk` = 3 000 000).
/// Anything else is refused (satori-rtm-cli silently drops it: `1.5k` is 1000 there).
pub(super) fn parse_size(s: &str) -> Result<u64, String> {
    let bad =
        || format!("expected digits and optional k, m, g suffixes (e.g. 500, 24k, 1M), got {s:?}");
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, suffixes) = s.split_at(digits_end);
    let mut n: u64 = digits.parse().map_err(|_| bad())?;
    for c in suffixes.chars() {
        let factor: u64 = match c.to_ascii_lowercase() {
            'k' => 1_000,
            'm' => 1_000_000,
            'g' => 1_000_000_000,
            _ => return Err(bad()),
        };
        n = n
            .checked_mul(factor)
            .ok_or_else(|| format!("{s:?} is too large"))?;
    }
    Ok(n)
}

/// When each record of one pass over a recording is due: the first at once, each later
/// one at `start + (timestamp - first timestamp) / rate`, so slow publishing never adds
/// drift and late or out-of-order records go at once.
#[derive(Debug)]
pub(super) struct Schedule {
    rate: Rate,
    first: Option<(f64, Instant)>,
}

impl Schedule {
    /// A new pass.
    pub(super) fn new(rate: Rate) -> Schedule {
        Schedule { rate, first: None }
    }

    /// How long to wait before sending a record stamped `timestamp`, at `now`.
    pub(super) fn wait(&mut self, timestamp: f64, now: Instant) -> Duration {
        let Some((t0, start)) = self.first else {
            self.first = Some((timestamp, now));
            return Duration::ZERO;
        };
        let Rate::Times(rate) = self.rate else {
            return Duration::ZERO;
        };
        let offset = Duration::try_from_secs_f64((timestamp - t0) / rate).unwrap_or_default();
        offset.saturating_sub(now.saturating_duration_since(start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// satori-rtm-cli's own recording of two channels.
    const REFERENCE: &str = r#"{"subscription_id": "ch1", "position": "1500000000:1", "messages": ["hello"], "timestamp": 1795454096.6010952}
{"subscription_id": "ch1", "position": "1500000000:2", "messages": [{"a": [1, 2.5, "\u00e9"], "b": null}], "timestamp": 1795454096.6012354}
{"subscription_id": "ch2", "position": "1500000000:1", "messages": ["x"], "timestamp": 1795454096.8103144}
{"subscription_id": "ch1", "position": "1500000000:4", "messages": [42, "two messages in one batch"], "timestamp": 1795454097.9}
"#;

    #[test]
    fn the_reference_recording_reads_and_writes_back_byte_for_byte() {
        for text in REFERENCE.lines() {
            let r = parse(text).unwrap();
            let position = serde_json::from_str::<serde_json::Value>(text).unwrap()["position"]
                .as_str()
                .map(str::to_owned);
            let messages: Vec<&str> = r.messages.iter().map(|m| m.get()).collect();
            let written = line(
                r.channel.as_deref().unwrap(),
                position.as_deref(),
                &messages,
                r.timestamp,
            )
            .unwrap();
            assert_eq!(written, text);
        }
        let last = parse(REFERENCE.lines().nth(3).unwrap()).unwrap();
        assert_eq!(last.channel.as_deref(), Some("ch1"));
        assert_eq!(last.messages.len(), 2);
        assert_eq!(last.timestamp, 1_795_454_097.9);
    }

    #[test]
    fn minimal_old_and_bad_records() {
        let r = parse(r#"{"subscription_id": "c", "messages": [1], "timestamp": 0}"#).unwrap();
        assert_eq!((r.timestamp, r.channel.as_deref()), (0.0, Some("c")));
        let r = parse(r#"{"messages": [], "timestamp": 1.0}"#).unwrap();
        assert_eq!((r.channel, r.messages.len()), (None, 0));
        let old = parse(r#"{"t_ms":1500,"channel":"c","message":{"a":1}}"#).unwrap();
        assert_eq!(old.timestamp, 1.5);
        assert_eq!(old.messages[0].get(), r#"{"a":1}"#);
        assert!(matches!(parse(""), Err(BadRecord::NotJson)));
        assert!(matches!(parse("{\"who\":"), Err(BadRecord::NotJson)));
        assert!(
            matches!(parse(r#"{"subscription_id": "c", "messages": [1]}"#), Err(BadRecord::Invalid(e)) if e.contains("timestamp"))
        );
        assert!(
            matches!(parse(r#"{"subscription_id": "c", "timestamp": 1}"#), Err(BadRecord::Invalid(e)) if e.contains("messages"))
        );
        assert!(matches!(
            parse(r#"{"timestamp": "soon", "messages": []}"#),
            Err(BadRecord::Invalid(_))
        ));
        assert!(matches!(parse("42"), Err(BadRecord::Invalid(_))));
    }

    #[test]
    fn rates_loops_and_sizes() {
        assert_eq!("2x".parse(), Ok(Rate::Times(2.0)));
        assert_eq!("0.5x".parse(), Ok(Rate::Times(0.5)));
        assert_eq!("1.41x".parse(), Ok(Rate::Times(1.41)));
        assert_eq!("3".parse(), Ok(Rate::Times(3.0)));
        assert_eq!("unlimited".parse(), Ok(Rate::Unlimited));
        for bad in ["0x", "-1x", "fast", "x", "infx", ""] {
            assert!(bad.parse::<Rate>().is_err(), "{bad}");
        }
        assert_eq!("inf".parse(), Ok(Loops::Forever));
        assert_eq!("2".parse(), Ok(Loops::Times(2)));
        assert!("two".parse::<Loops>().is_err());
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("24k"), Ok(24_000));
        assert_eq!(parse_size("1M"), Ok(1_000_000));
        assert_eq!(parse_size("3kk"), Ok(3_000_000));
        assert_eq!(parse_size("2g"), Ok(2_000_000_000));
        for bad in ["", "k", "1.5k", "5x", "-1", "99999999999g"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_schedule_keeps_relative_time_from_the_first_record() {
        let start = Instant::now();
        let mut s = Schedule::new(Rate::Times(2.0));
        assert_eq!(s.wait(100.0, start), Duration::ZERO);
        assert_eq!(s.wait(101.0, start), Duration::from_millis(500));
        // Half a second late already: the remaining 750 ms of 102.5 s at 2x.
        assert_eq!(
            s.wait(102.5, start + Duration::from_millis(500)),
            Duration::from_millis(750)
        );
        // Earlier than the first: at once, not reordered.
        assert_eq!(s.wait(99.0, start), Duration::ZERO);
        // Centuries apart: a long wait, not an overflow.
        assert!(s.wait(1e18, start) > Duration::from_secs(1_000_000));
        let mut u = Schedule::new(Rate::Unlimited);
        assert_eq!(u.wait(1.0, start), Duration::ZERO);
        assert_eq!(u.wait(1000.0, start), Duration::ZERO);
    }
}

//! The `/data` metric stream: one `<unix seconds>\t<metric name>\t<value>` line per
//! sample, metrics interleaved in any order. Values are Erlang numbers: integers
//! (`3`, `2000`) or floats (`0.3`, `2.0`, `2.9975917348002614`, `1.0e-5`, `1.0e20`), all
//! of which are JSON numbers, so the JSON number grammar checks them. The value stays
//! text (a [`Number`]): forwarding a sample parses no float.

use core::fmt;

use super::lines::{LineDecoder, LineFormat, LineTooLong};
use super::resume::Report;
use crate::json::Number;
#[cfg(target_pointer_width = "64")]
use crate::swar::{decimal, digit_run, find_byte};

/// One metric sample.
///
/// ```
/// use benchlink_core::bench::Sample;
/// let s = Sample::parse(b"1439245024\tworkers.pool1.started.rps\t0.3").unwrap();
/// assert_eq!((s.timestamp, s.name), (1439245024, "workers.pool1.started.rps"));
/// assert_eq!((s.value.as_str(), s.value.as_f64()), ("0.3", 0.3));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Sample<'a> {
    /// When the director node reported it, in Unix seconds.
    pub timestamp: u64,
    /// The metric name as expanded by the node (`print`, `print.rps`, `latency.95`, …).
    pub name: &'a str,
    /// The value, as the server wrote it (converted only on request).
    pub value: Number<'a>,
}

impl<'a> Sample<'a> {
    /// Parses one line without its line end.
    ///
    /// ```
    /// use benchlink_core::bench::{Sample, SampleError};
    /// assert_eq!(Sample::parse(b"1439245024\tprint"), Err(SampleError::FieldCount { found: 2 }));
    /// assert_eq!(Sample::parse(b"14392x\tprint\t1"), Err(SampleError::InvalidTimestamp));
    /// assert_eq!(Sample::parse(b"1\tprint\t1,5"), Err(SampleError::InvalidValue));
    /// ```
    pub fn parse(line: &'a [u8]) -> Result<Self, SampleError> {
        // One pass for the usual line; anything unusual takes the field-by-field path,
        // which also decides which error a bad line gets. The one pass is a desktop's
        // throughput (its byte searches work a 64-bit word at a time): on a 32-bit
        // target, a microcontroller streaming a few samples a second, every line takes
        // the field-by-field path, with the same result (the two are checked to agree)
        // and 548 bytes less flash.
        #[cfg(target_pointer_width = "64")]
        if let Some(sample) = Self::parse_fast(line) {
            return Ok(sample);
        }
        Self::parse_fields(line)
    }

    /// Digits, tab, then name and value checked as UTF-8 at once; `None` for anything
    /// else (including every bad line).
    #[cfg(target_pointer_width = "64")]
    fn parse_fast(line: &'a [u8]) -> Option<Self> {
        let tab = find_byte(line, b'\t')?;
        let digits = line.get(..tab)?;
        // Up to 19 digits can not overflow a u64.
        if digits.is_empty() || digits.len() > 19 {
            return None;
        }
        if digit_run(digits) != digits.len() {
            return None;
        }
        let timestamp = decimal(digits);
        let rest = line.get(tab + 1..)?;
        let tab = find_byte(rest, b'\t')?;
        let text = core::str::from_utf8(rest).ok()?;
        let name = text.get(..tab).filter(|n| !n.is_empty())?;
        // A tab in the value (a fourth field) fails the number grammar.
        let value = Number::parse(text.get(tab + 1..)?).ok()?;
        Some(Sample {
            timestamp,
            name,
            value,
        })
    }

    pub(crate) fn parse_fields(line: &'a [u8]) -> Result<Self, SampleError> {
        let tabs = line.iter().filter(|&&b| b == b'\t').count();
        if tabs != 2 {
            return Err(SampleError::FieldCount { found: tabs + 1 });
        }
        let tab = |text: &'a [u8]| {
            let at = text.iter().position(|&b| b == b'\t').unwrap_or(text.len());
            (
                text.get(..at).unwrap_or_default(),
                text.get(at + 1..).unwrap_or_default(),
            )
        };
        let (timestamp, rest) = tab(line);
        let (name, value) = tab(rest);
        let timestamp =
            crate::http::parse_decimal(timestamp).ok_or(SampleError::InvalidTimestamp)?;
        let name = core::str::from_utf8(name)
            .ok()
            .filter(|n| !n.is_empty())
            .ok_or(SampleError::InvalidName)?;
        let value = core::str::from_utf8(value)
            .ok()
            .and_then(|v| Number::parse(v).ok())
            .ok_or(SampleError::InvalidValue)?;
        Ok(Sample {
            timestamp,
            name,
            value,
        })
    }
}

/// Why a `/data` line is not a sample. Decoding continues with the next line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SampleError {
    /// Longer than the decoder's buffer; dropped.
    LineTooLong {
        /// The limit.
        max: usize,
    },
    /// Not exactly three tab-separated fields (the official CLI rejects these too).
    FieldCount {
        /// How many fields the line has.
        found: usize,
    },
    /// The first field is not unsigned decimal Unix seconds.
    InvalidTimestamp,
    /// The name is empty or not UTF-8.
    InvalidName,
    /// The value is not an integer or float in Erlang/JSON notation.
    InvalidValue,
    /// A stream resumed after a cut could not be resumed exactly here (see
    /// [`resume`](super::resume)).
    Resume(Report),
}

impl From<Report> for SampleError {
    fn from(r: Report) -> Self {
        SampleError::Resume(r)
    }
}

impl From<LineTooLong> for SampleError {
    fn from(e: LineTooLong) -> Self {
        SampleError::LineTooLong { max: e.max }
    }
}

impl fmt::Display for SampleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SampleError::LineTooLong { max } => write!(f, "metric line longer than {max} bytes"),
            SampleError::FieldCount { found } => write!(f, "metric line has {found} fields, not 3"),
            SampleError::InvalidTimestamp => f.write_str("metric line has an invalid timestamp"),
            SampleError::InvalidName => f.write_str("metric line has an invalid name"),
            SampleError::InvalidValue => f.write_str("metric line has an invalid value"),
            SampleError::Resume(r) => write!(f, "metrics: {r}"),
        }
    }
}

impl core::error::Error for SampleError {}

/// The `/data` line format: each line a [`Sample`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricLine;

impl LineFormat for MetricLine {
    type Item<'l> = Sample<'l>;
    type Error<'l> = SampleError;

    fn parse(line: &[u8]) -> Result<Sample<'_>, SampleError> {
        Sample::parse(line)
    }
}

/// Decoder for the `/data` stream.
pub type MetricDecoder<'b> = LineDecoder<'b, MetricLine>;

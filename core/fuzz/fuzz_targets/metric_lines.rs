//! `LineSplitter`, `LogDecoder` and `MetricDecoder` on arbitrary byte streams.
//!
//! Input: `[buffer size][seed: 4 bytes][stream…]`
//! - buffer size: the line buffer (line-length limit), 0-254 bytes, or 4096 for 255.
//! - seed: split points; its first byte picks the kind of split (`chosen_pieces`), its
//!   second the decoder: `LineSplitter` (`% 3 == 0`), `LogDecoder` (1), `MetricDecoder` (2).
//!
//! Properties: the items (owned copies) of the chosen decoder in the chosen split equal a
//! plain model of Python's `bytes.splitlines()` with the
//! length limit (each over-long line one `TooLong`, the final unterminated line from
//! `finish`); every line handed out fits the buffer; log lines are exactly the UTF-8 lines;
//! samples are what `Sample::parse` makes of each line, and a parsed sample's fields
//! are consistent with its line.
#![no_main]

use benchlink_core::bench::{
    LineFormat, LineSplitter, LineTooLong, LogDecoder, LogLine, LogLineError, MetricDecoder,
    Number, Sample, SampleError,
};
use benchlink_core_fuzz::{chosen_pieces, Rng};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Line {
    Ok(Vec<u8>),
    TooLong(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Log {
    Ok(String),
    TooLong(usize),
    NotUtf8(Vec<u8>),
}

/// A sample with the value's bits, so NaN-free comparison is exact.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Metric {
    Ok {
        timestamp: u64,
        name: String,
        /// The value's text, as the line had it.
        value: String,
    },
    Err(SampleError),
}

fn log_item(item: Result<&str, LogLineError<'_>>) -> Log {
    match item {
        Ok(s) => Log::Ok(s.to_owned()),
        Err(LogLineError::TooLong { max }) => Log::TooLong(max),
        Err(LogLineError::NotUtf8 { line }) => Log::NotUtf8(line.to_vec()),
    }
}

fn metric_item(item: Result<Sample<'_>, SampleError>) -> Metric {
    match item {
        Ok(s) => Metric::Ok {
            timestamp: s.timestamp,
            name: s.name.to_owned(),
            value: s.value.as_str().to_owned(),
        },
        Err(e) => Metric::Err(e),
    }
}

fn split_lines(stream: &[u8], lens: &[usize], buf: &mut [u8]) -> Vec<Line> {
    let max = buf.len();
    let mut lines = LineSplitter::new(buf);
    assert_eq!(lines.max_line_len(), max);
    let mut out = Vec::new();
    let mut offset = 0;
    for &len in lens {
        let mut input = &stream[offset..offset + len];
        while let Some(item) = lines.next(&mut input) {
            out.push(match item {
                Ok(line) => {
                    assert!(
                        line.len() <= max,
                        "line of {} bytes past the {max}-byte limit",
                        line.len()
                    );
                    Line::Ok(line.to_vec())
                }
                Err(LineTooLong { max: m }) => {
                    assert_eq!(m, max);
                    Line::TooLong(m)
                }
            });
        }
        assert!(
            input.is_empty(),
            "next returned None before consuming the input"
        );
        offset += len;
    }
    if let Some(item) = lines.finish() {
        out.push(match item {
            Ok(line) => Line::Ok(line.to_vec()),
            Err(LineTooLong { max }) => Line::TooLong(max),
        });
    }
    assert!(lines.finish().is_none(), "finish twice");
    out
}

fn log_lines(stream: &[u8], lens: &[usize], buf: &mut [u8]) -> Vec<Log> {
    let mut dec = LogDecoder::new(buf);
    let mut out = Vec::new();
    let mut offset = 0;
    for &len in lens {
        let mut input = &stream[offset..offset + len];
        while let Some(item) = dec.next(&mut input) {
            out.push(log_item(item));
        }
        assert!(input.is_empty());
        offset += len;
    }
    if let Some(item) = dec.finish() {
        out.push(log_item(item));
    }
    out
}

fn metric_lines(stream: &[u8], lens: &[usize], buf: &mut [u8]) -> Vec<Metric> {
    let mut dec = MetricDecoder::new(buf);
    let mut out = Vec::new();
    let mut offset = 0;
    for &len in lens {
        let mut input = &stream[offset..offset + len];
        while let Some(item) = dec.next(&mut input) {
            out.push(metric_item(item));
        }
        assert!(input.is_empty());
        offset += len;
    }
    if let Some(item) = dec.finish() {
        out.push(metric_item(item));
    }
    out
}

/// Python's `bytes.splitlines()` with the length limit.
fn model(stream: &[u8], max: usize) -> Vec<Line> {
    let mut out = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        let end = rest
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
            .unwrap_or(rest.len());
        let line = &rest[..end];
        out.push(if line.len() <= max {
            Line::Ok(line.to_vec())
        } else {
            Line::TooLong(max)
        });
        let mut next = end;
        if rest.get(end) == Some(&b'\r') && rest.get(end + 1) == Some(&b'\n') {
            next += 1;
        }
        rest = rest.get(next + 1..).unwrap_or_default();
    }
    out
}

fuzz_target!(|input: &[u8]| {
    let [size, s0, s1, s2, s3, stream @ ..] = input else {
        return;
    };
    let max = if *size == 255 {
        4096
    } else {
        usize::from(*size)
    };
    let mut buf = vec![0u8; max];
    let mut rng = Rng::from_bytes(&[*s0, *s1, *s2, *s3]);
    let lens = chosen_pieces(stream.len(), *s0, &mut rng);

    let expected = model(stream, max);
    // One decoder per input (the second seed byte picks it), so that each execution
    // decodes the stream once; every decoder starts on a dirty buffer.
    buf.fill(0xA5);
    match s1 % 3 {
        0 => assert_eq!(
            split_lines(stream, &lens, &mut buf),
            expected,
            "lines, split {lens:?}"
        ),
        1 => {
            let expected_log: Vec<Log> = expected
                .iter()
                .map(|l| match l {
                    Line::Ok(b) => log_item(LogLine::parse(b)),
                    Line::TooLong(m) => Log::TooLong(*m),
                })
                .collect();
            assert_eq!(
                log_lines(stream, &lens, &mut buf),
                expected_log,
                "log, split {lens:?}"
            );
        }
        _ => {
            let expected_metrics: Vec<Metric> = expected
                .iter()
                .map(|l| match l {
                    Line::Ok(b) => {
                        check_sample(b);
                        metric_item(Sample::parse(b))
                    }
                    Line::TooLong(m) => Metric::Err(SampleError::LineTooLong { max: *m }),
                })
                .collect();
            assert_eq!(
                metric_lines(stream, &lens, &mut buf),
                expected_metrics,
                "metrics, split {lens:?}"
            );
        }
    }
});

/// A parsed sample agrees with its line: three tab-separated fields, the timestamp is the
/// first field's decimal value, the name the second field, the value the third field's
/// number (an integer exactly when written without `.`/`e` and in range).
fn check_sample(line: &[u8]) {
    let Ok(sample) = Sample::parse(line) else {
        return;
    };
    let fields: Vec<&[u8]> = line.split(|&b| b == b'\t').collect();
    assert_eq!(fields.len(), 3);
    let ts = std::str::from_utf8(fields[0]).expect("timestamp is ASCII");
    assert!(
        !ts.is_empty() && ts.bytes().all(|b| b.is_ascii_digit()),
        "timestamp {ts:?}"
    );
    assert_eq!(ts.parse::<u64>().ok(), Some(sample.timestamp), "timestamp");
    assert_eq!(fields[1], sample.name.as_bytes());
    let text = std::str::from_utf8(fields[2]).expect("value is UTF-8");
    // The value is the field's text, unconverted; its conversions agree with std's.
    let value = sample.value;
    assert_eq!(value.as_str(), text);
    assert_eq!(Number::parse(text), Ok(value));
    let integer = !text.contains(['.', 'e', 'E']);
    assert_eq!(value.is_integer(), integer);
    assert_eq!(
        value.as_i64(),
        if integer {
            text.parse::<i64>().ok()
        } else {
            None
        }
    );
    let parsed: f64 = text.parse().expect("a JSON number parses as f64");
    assert_eq!(value.as_f64().to_bits(), parsed.to_bits());
}

//! `LineSplitter`, `LogDecoder` and `MetricDecoder` on arbitrary byte streams.
//!
//! Input: `[buffer size][seed: 4 bytes][stream…]`
//! - buffer size: the line buffer (line-length limit), 0-254 bytes, or 4096 for 255.
//! - seed: split points; its first byte picks the kind of split (as `chosen_pieces`:
//!   whole, pieces of at most 1 / 3 / 16 / 64 / 1500 bytes or a third of the stream, or
//!   two pieces; at most 256 pieces, the rest of the stream one last piece), its second
//!   the decoder: `LineSplitter` (`% 3 == 0`), `LogDecoder` (1), `MetricDecoder` (2).
//!   The decoder's buffer is allocated once and stays dirty between executions.
//!
//! Properties: the items of the chosen decoder in the chosen split equal (compared as
//! they come) a plain model of Python's `bytes.splitlines()` with the length limit (each
//! over-long line one `TooLong`, the final unterminated line from `finish`, nothing after
//! it); every line handed out fits the buffer; log lines are exactly the UTF-8 lines;
//! samples are what `Sample::parse` makes of each line, and a parsed sample's fields are
//! consistent with its line.
#![no_main]

use benchlink_core::bench::{
    LineFormat, LineSplitter, LineTooLong, LogDecoder, LogLine, LogLineError, MetricDecoder,
    Number, Sample, SampleError,
};
use benchlink_core_fuzz::{chosen_pieces_at_most, Rng};
use libfuzzer_sys::fuzz_target;

/// Most pieces one split has: tiny pieces cost a few hundred decoder calls at most per
/// execution and still cover the stream's first hundreds of bytes (core's tests feed
/// small inputs byte at a time and cut them in every way into two and three pieces).
const MAX_PIECES: usize = 256;

/// A line of the model: a slice of the stream, or one too long for the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line<'a> {
    Ok(&'a [u8]),
    TooLong(usize),
}

/// Python's `bytes.splitlines()` with the length limit.
fn model(stream: &[u8], max: usize) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        let end = rest
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
            .unwrap_or(rest.len());
        let line = &rest[..end];
        out.push(if line.len() <= max {
            Line::Ok(line)
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

/// Compares a decoder's items, as they come, with the expected ones.
struct Expect<'e, T> {
    items: &'e [T],
    seen: usize,
}

impl<'e, T: std::fmt::Debug> Expect<'e, T> {
    fn next<U: std::fmt::Debug>(&mut self, got: U, same: impl FnOnce(&U, &T) -> bool) {
        let want = self.items.get(self.seen);
        assert!(
            want.is_some_and(|w| same(&got, w)),
            "item {}: decoder {got:?}, model {want:?}",
            self.seen
        );
        self.seen += 1;
    }

    fn done(&self) {
        assert_eq!(self.seen, self.items.len(), "items missing");
    }
}

/// Feeds the pieces to a decoder's `next`, each item compared as it comes; then `finish`
/// (a second `finish` gives nothing).
macro_rules! feed {
    ($dec:expr, $stream:expr, $lens:expr, $want:expr, $same:expr) => {{
        let mut offset = 0;
        for &len in $lens {
            let mut input = &$stream[offset..offset + len];
            while let Some(item) = $dec.next(&mut input) {
                $want.next(item, $same);
            }
            assert!(
                input.is_empty(),
                "next returned None before consuming the input"
            );
            offset += len;
        }
        if let Some(item) = $dec.finish() {
            $want.next(item, $same);
        }
        assert!($dec.finish().is_none(), "finish twice");
    }};
}

/// What a sample result is compared by.
fn key<'a>(s: &Result<Sample<'a>, SampleError>) -> Result<(u64, &'a str, &'a str), SampleError> {
    s.map(|s| (s.timestamp, s.name, s.value.as_str()))
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
    let mut rng = Rng::from_bytes(&[*s0, *s1, *s2, *s3]);
    let lens = chosen_pieces_at_most(stream.len(), *s0, &mut rng, MAX_PIECES);
    let expected = model(stream, max);
    // One decoder per input (the second seed byte picks it), so that each execution
    // decodes the stream once; every decoder starts on a dirty buffer.
    BUF.with(|buf| {
        let buf = &mut buf.borrow_mut()[..max];
        let mut want = Expect {
            items: &expected,
            seen: 0,
        };
        match s1 % 3 {
            0 => {
                let mut lines = LineSplitter::new(buf);
                assert_eq!(lines.max_line_len(), max);
                let same = |got: &Result<&[u8], LineTooLong>, want: &Line<'_>| match got {
                    Ok(line) => {
                        assert!(
                            line.len() <= max,
                            "line of {} bytes past the {max}-byte limit",
                            line.len()
                        );
                        *want == Line::Ok(line)
                    }
                    Err(LineTooLong { max: m }) => *want == Line::TooLong(*m) && *m == max,
                };
                feed!(lines, stream, &lens, want, same);
            }
            1 => {
                let mut dec = LogDecoder::new(buf);
                let same = |got: &Result<&str, LogLineError<'_>>, want: &Line<'_>| {
                    *got == match *want {
                        Line::Ok(b) => LogLine::parse(b),
                        Line::TooLong(m) => Err(LogLineError::TooLong { max: m }),
                    }
                };
                feed!(dec, stream, &lens, want, same);
            }
            _ => {
                let mut dec = MetricDecoder::new(buf);
                let same = |got: &Result<Sample<'_>, SampleError>, want: &Line<'_>| {
                    key(got)
                        == key(&match *want {
                            Line::Ok(b) => check_sample(b),
                            Line::TooLong(m) => Err(SampleError::LineTooLong { max: m }),
                        })
                };
                feed!(dec, stream, &lens, want, same);
            }
        }
        want.done();
    });
});

thread_local! {
    static BUF: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0xA5; 4096]);
}

/// A parsed sample agrees with its line: three tab-separated fields, the timestamp is the
/// first field's decimal value, the name the second field, the value the third field's
/// number (an integer exactly when written without `.`/`e` and in range).
fn check_sample(line: &[u8]) -> Result<Sample<'_>, SampleError> {
    let sample = Sample::parse(line)?;
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
    Ok(sample)
}

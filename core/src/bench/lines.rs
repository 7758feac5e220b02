//! Splitting a streamed body into lines, whatever the chunking.
//!
//! `/log`, `/userlog`, `/server_logs` and `/data` are line streams whose HTTP chunks (and,
//! for the logs, whose zlib output) bear no relation to line ends. [`LineSplitter`] is the
//! one mechanism that turns arbitrary pieces into whole lines: a line that lies entirely in
//! the current input is handed out as a slice of it (no copy); only a line that straddles
//! inputs is assembled in the caller's buffer, whose size is the line-length limit.
//! [`LineDecoder`] puts a [`LineFormat`] (log text, metric samples) on top.

use core::fmt;
use core::marker::PhantomData;

use super::resume::Report;

/// A line longer than the splitter's buffer. The line is dropped (reported once) and
/// splitting resumes after its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LineTooLong {
    /// The limit: the size of the caller's buffer.
    pub max: usize,
}

impl fmt::Display for LineTooLong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line longer than {} bytes", self.max)
    }
}

impl core::error::Error for LineTooLong {}

/// Splits bytes into lines like Python's `bytes.splitlines()`, which is what the official
/// client does: `\n`, `\r` and `\r\n` each end a line, the ends are stripped, empty lines
/// are kept, and a `\r` at the end of one input followed by `\n` at the start of the next
/// is one line end. A final line without an end comes out of [`LineSplitter::finish`].
///
/// Any split of the same bytes into inputs gives the same lines and errors.
///
/// ```
/// use benchlink_core::bench::LineSplitter;
/// let mut buf = [0u8; 64];
/// let mut lines = LineSplitter::new(&mut buf);
/// let mut seen = Vec::new();
/// for chunk in [&b"12:00 [info] sta"[..], b"rted\r", b"\nnext\n", b"tail"] {
///     let mut input = chunk;
///     while let Some(line) = lines.next(&mut input) {
///         seen.push(String::from_utf8(line.unwrap().to_vec()).unwrap());
///     }
/// }
/// if let Some(line) = lines.finish() {
///     seen.push(String::from_utf8(line.unwrap().to_vec()).unwrap());
/// }
/// assert_eq!(seen, ["12:00 [info] started", "next", "tail"]);
/// ```
#[derive(Debug)]
pub struct LineSplitter<'b> {
    buf: &'b mut [u8],
    /// Bytes of a partial line held in `buf`.
    len: usize,
    /// The last line ended with `\r`: a `\n` right after it belongs to that end.
    skip_lf: bool,
    /// The current line was too long and reported; drop bytes until its end.
    discarding: bool,
}

impl<'b> LineSplitter<'b> {
    /// A splitter whose longest line is `buf.len()` bytes (line end not counted).
    ///
    /// ```
    /// let mut buf = [0u8; 4];
    /// let lines = benchlink_core::bench::LineSplitter::new(&mut buf);
    /// assert_eq!(lines.max_line_len(), 4);
    /// ```
    pub fn new(buf: &'b mut [u8]) -> Self {
        LineSplitter {
            buf,
            len: 0,
            skip_lf: false,
            discarding: false,
        }
    }

    /// The line-length limit.
    ///
    /// ```
    /// let mut buf = [0u8; 1024];
    /// assert_eq!(benchlink_core::bench::LineSplitter::new(&mut buf).max_line_len(), 1024);
    /// ```
    pub fn max_line_len(&self) -> usize {
        self.buf.len()
    }

    /// The next complete line, consuming `input` up to and including its end; `None` once
    /// `input` is used up (a partial line is then kept for the next call). Call again
    /// until `None` before fetching more input. A line longer than the limit gives one
    /// `Err(LineTooLong)` instead of the line.
    ///
    /// ```
    /// use benchlink_core::bench::{LineSplitter, LineTooLong};
    /// let mut buf = [0u8; 3];
    /// let mut lines = LineSplitter::new(&mut buf);
    /// let mut input = &b"abc\ntoo long\n\nx"[..];
    /// assert_eq!(lines.next(&mut input), Some(Ok(&b"abc"[..])));
    /// assert_eq!(lines.next(&mut input), Some(Err(LineTooLong { max: 3 })));
    /// assert_eq!(lines.next(&mut input), Some(Ok(&b""[..])));
    /// assert_eq!(lines.next(&mut input), None);
    /// assert!(input.is_empty());
    /// assert_eq!(lines.finish(), Some(Ok(&b"x"[..])));
    /// ```
    pub fn next<'s, 'i: 's>(
        &'s mut self,
        input: &mut &'i [u8],
    ) -> Option<Result<&'s [u8], LineTooLong>> {
        loop {
            if self.skip_lf {
                let (&first, rest) = input.split_first()?;
                self.skip_lf = false;
                if first == b'\n' {
                    *input = rest;
                }
            }
            let data: &'i [u8] = input;
            let Some(end) = find_line_end(data) else {
                *input = &[];
                if data.is_empty() || self.discarding || self.append(data) {
                    return None;
                }
                self.len = 0;
                self.discarding = true;
                return Some(Err(self.too_long()));
            };
            let line = data.get(..end).unwrap_or_default();
            self.skip_lf = data.get(end) == Some(&b'\r');
            *input = data.get(end.saturating_add(1)..).unwrap_or_default();
            if self.discarding {
                self.discarding = false;
                continue;
            }
            if self.len == 0 {
                return Some(if line.len() <= self.buf.len() {
                    Ok(line)
                } else {
                    Err(self.too_long())
                });
            }
            if !self.append(line) {
                self.len = 0;
                return Some(Err(self.too_long()));
            }
            let len = core::mem::take(&mut self.len);
            return Some(Ok(self.buf.get(..len).unwrap_or_default()));
        }
    }

    /// Ends the stream: the last line if it had no line end (an over-long one was already
    /// reported). Afterwards the splitter starts afresh.
    ///
    /// ```
    /// let mut buf = [0u8; 8];
    /// let mut lines = benchlink_core::bench::LineSplitter::new(&mut buf);
    /// let mut input = &b"a\nb"[..];
    /// while lines.next(&mut input).is_some() {}
    /// assert_eq!(lines.finish(), Some(Ok(&b"b"[..])));
    /// assert_eq!(lines.finish(), None);
    /// ```
    pub fn finish(&mut self) -> Option<Result<&[u8], LineTooLong>> {
        self.skip_lf = false;
        self.discarding = false;
        match core::mem::take(&mut self.len) {
            0 => None,
            len => Some(Ok(self.buf.get(..len).unwrap_or_default())),
        }
    }

    /// Adds `bytes` to the partial line; false if that would exceed the limit.
    fn append(&mut self, bytes: &[u8]) -> bool {
        let end = self.len.checked_add(bytes.len());
        match end.and_then(|end| Some((end, self.buf.get_mut(self.len..end)?))) {
            Some((end, dst)) => {
                dst.copy_from_slice(bytes);
                self.len = end;
                true
            }
            None => false,
        }
    }

    fn too_long(&self) -> LineTooLong {
        LineTooLong {
            max: self.buf.len(),
        }
    }
}

/// The index of the first `\n` or `\r` in `data`, looking at a word at a time.
fn find_line_end(data: &[u8]) -> Option<usize> {
    use crate::swar::{find, zero_bytes, Native, Word};
    find(
        data,
        |w: Native| zero_bytes(w ^ Native::repeat(b'\n')) | zero_bytes(w ^ Native::repeat(b'\r')),
        |b| b == b'\n' || b == b'\r',
    )
}

/// How one line of a stream is decoded: log text, metric samples.
pub trait LineFormat {
    /// A decoded line, borrowing the line's bytes (a view: copying it copies no text).
    type Item<'l>: Copy;
    /// Why a line could not be decoded (including it being too long).
    type Error<'l>: From<LineTooLong> + From<Report> + Copy;

    /// Decodes one line (without its line end).
    ///
    /// ```
    /// use benchlink_core::bench::{LineFormat, LogLine};
    /// assert_eq!(LogLine::parse(b"14:02:47.080 [info] <0.237.0> hi"), Ok("14:02:47.080 [info] <0.237.0> hi"));
    /// ```
    fn parse(line: &[u8]) -> Result<Self::Item<'_>, Self::Error<'_>>;
}

/// A [`LineSplitter`] whose lines are decoded with `F`: the push-style decoder for a
/// stream endpoint ([`LogDecoder`] for logs, [`MetricDecoder`](super::MetricDecoder) for `/data`). Same
/// calling pattern as the splitter; a bad line is an error item and decoding continues.
///
/// ```
/// use benchlink_core::bench::{LogDecoder, LogLineError};
/// let mut buf = [0u8; 32];
/// let mut log = LogDecoder::new(&mut buf);
/// let mut input = &b"ok\n\xff\n"[..];
/// assert_eq!(log.next(&mut input), Some(Ok("ok")));
/// assert_eq!(log.next(&mut input), Some(Err(LogLineError::NotUtf8 { line: b"\xff" })));
/// assert_eq!(log.next(&mut input), None);
/// assert_eq!(log.finish(), None);
/// ```
#[derive(Debug)]
pub struct LineDecoder<'b, F> {
    lines: LineSplitter<'b>,
    format: PhantomData<fn() -> F>,
}

impl<'b, F: LineFormat> LineDecoder<'b, F> {
    /// A decoder whose longest line is `buf.len()` bytes.
    ///
    /// ```
    /// let mut buf = [0u8; 256];
    /// let _metrics = benchlink_core::bench::MetricDecoder::new(&mut buf);
    /// ```
    pub fn new(buf: &'b mut [u8]) -> Self {
        LineDecoder {
            lines: LineSplitter::new(buf),
            format: PhantomData,
        }
    }

    /// The next decoded line from `input`; see [`LineSplitter::next`].
    ///
    /// ```
    /// use benchlink_core::bench::MetricDecoder;
    /// let mut buf = [0u8; 64];
    /// let mut metrics = MetricDecoder::new(&mut buf);
    /// let mut input = &b"1439245024\tprint\t30\n"[..];
    /// let sample = metrics.next(&mut input).unwrap().unwrap();
    /// assert_eq!((sample.timestamp, sample.name, sample.value.as_i64()), (1439245024, "print", Some(30)));
    /// ```
    pub fn next<'s, 'i: 's>(
        &'s mut self,
        input: &mut &'i [u8],
    ) -> Option<Result<F::Item<'s>, F::Error<'s>>> {
        Some(
            self.lines
                .next(input)?
                .map_err(F::Error::from)
                .and_then(F::parse),
        )
    }

    /// The last, unterminated line at the end of the stream; see [`LineSplitter::finish`].
    ///
    /// ```
    /// use benchlink_core::bench::LogDecoder;
    /// let mut buf = [0u8; 16];
    /// let mut log = LogDecoder::new(&mut buf);
    /// let mut input = &b"last words"[..];
    /// assert_eq!(log.next(&mut input), None);
    /// assert_eq!(log.finish(), Some(Ok("last words")));
    /// ```
    pub fn finish(&mut self) -> Option<Result<F::Item<'_>, F::Error<'_>>> {
        Some(
            self.lines
                .finish()?
                .map_err(F::Error::from)
                .and_then(F::parse),
        )
    }
}

/// Log streams (`/log`, `/userlog`, `/server_logs`): each line as `&str`.
///
/// Lines that are not UTF-8 are not silently mangled: they come as
/// [`LogLineError::NotUtf8`] with the raw bytes, so the caller can show them lossily
/// (`String::from_utf8_lossy`) or skip them, and decoding continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLine;

impl LineFormat for LogLine {
    type Item<'l> = &'l str;
    type Error<'l> = LogLineError<'l>;

    fn parse(line: &[u8]) -> Result<&str, LogLineError<'_>> {
        core::str::from_utf8(line).map_err(|_| LogLineError::NotUtf8 { line })
    }
}

/// Decoder for log streams.
pub type LogDecoder<'b> = LineDecoder<'b, LogLine>;

/// A log line that could not be handed out as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LogLineError<'l> {
    /// Longer than the decoder's buffer; dropped.
    TooLong {
        /// The limit.
        max: usize,
    },
    /// Not UTF-8; here are the raw bytes.
    NotUtf8 {
        /// The line's bytes, without its line end.
        line: &'l [u8],
    },
    /// A stream resumed after a cut could not be resumed exactly here (see
    /// [`resume`](super::resume)).
    Resume(Report),
}

impl From<Report> for LogLineError<'_> {
    fn from(r: Report) -> Self {
        LogLineError::Resume(r)
    }
}

impl From<LineTooLong> for LogLineError<'_> {
    fn from(e: LineTooLong) -> Self {
        LogLineError::TooLong { max: e.max }
    }
}

impl fmt::Display for LogLineError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogLineError::TooLong { max } => write!(f, "log line longer than {max} bytes"),
            LogLineError::NotUtf8 { line } => {
                write!(f, "log line of {} bytes is not UTF-8", line.len())
            }
            LogLineError::Resume(r) => write!(f, "log: {r}"),
        }
    }
}

impl core::error::Error for LogLineError<'_> {}

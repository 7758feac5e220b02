//! The chunked transfer coding (RFC 9112, 7.1), as a byte-at-a-time state machine so that
//! any split of the input gives the same result. Chunk data is never copied: the decoder
//! only says where in the caller's input the next data bytes are and how many, and the
//! caller reports how many it used (a content decoder may take fewer than offered).
//!
//! Chunk extensions are skipped and trailer fields are skipped after a size check: the
//! benchmark server sends neither, and nothing in benchlink needs them. Both are bounded.
//! A bare LF is accepted wherever CRLF is expected, as most clients do.

use super::decode_error::{DecodeError, Section};

/// Position in the chunked framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading the hex digits of a chunk size; `digits` seen so far.
    Size { size: u64, digits: u8, line: usize },
    /// After the digits: optional whitespace, then an extension or the line end.
    SizeRest {
        size: u64,
        in_ext: bool,
        line: usize,
    },
    /// Saw the CR of the size line; expecting LF.
    SizeLf { size: u64 },
    /// Inside chunk data.
    Data { left: u64 },
    /// After chunk data: expecting CR or LF.
    DataCr,
    /// After chunk data and CR: expecting LF.
    DataLf,
    /// In the trailer section; `line` bytes (CR excluded) in the current line, `total`
    /// bytes in the section.
    Trailer { line: usize, total: usize },
    /// The last chunk and the trailer section are complete.
    Done,
}

/// What the framing has for the caller next (exported as `ChunkedNext`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// This many data bytes are available right after the framing bytes consumed.
    Data(usize),
    /// All input was consumed and more is needed.
    NeedMore,
    /// The body is complete; input after the consumed bytes belongs to the next response.
    End,
}

/// Incremental chunked-body decoder, for response bodies here and for request bodies in
/// the local benchmark server: each input byte is looked at once, whatever the split, so
/// a body sent in tiny chunks costs linear time.
///
/// # Example
///
/// ```
/// use benchlink_core::http::{Chunked, ChunkedNext};
///
/// let mut decoder = Chunked::new(64, 1024);
/// let mut body = [0u8; 16];
/// let mut len = 0;
/// for piece in [&b"5\r\nhel"[..], b"lo\r\n0\r\n\r\nNEXT"] {
///     let mut input = piece;
///     loop {
///         let (used, next) = decoder.next(input)?;
///         input = input.get(used..).unwrap_or_default();
///         match next {
///             ChunkedNext::Data(n) => {
///                 body[len..len + n].copy_from_slice(&input[..n]);
///                 len += n;
///                 decoder.consume(n);
///                 input = &input[n..];
///             }
///             ChunkedNext::NeedMore => break,
///             ChunkedNext::End => {
///                 assert_eq!(input, b"NEXT");
///                 break;
///             }
///         }
///     }
/// }
/// assert_eq!(&body[..len], b"hello");
/// # Ok::<(), benchlink_core::http::DecodeError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Chunked {
    state: State,
    max_line: usize,
    max_trailers: usize,
}

impl Chunked {
    /// A decoder at the start of a body: size lines (with extensions) of at most
    /// `max_line` bytes, trailer sections of at most `max_trailers` bytes.
    #[must_use]
    pub const fn new(max_line: usize, max_trailers: usize) -> Self {
        Chunked {
            state: State::Size {
                size: 0,
                digits: 0,
                line: 0,
            },
            max_line,
            max_trailers,
        }
    }

    /// Consumes framing bytes from the front of `input`; returns how many, and what follows.
    ///
    /// # Errors
    ///
    /// Malformed framing (a bad size or delimiter) and lines or trailers over the limits.
    pub fn next(&mut self, input: &[u8]) -> Result<(usize, Next), DecodeError> {
        if let Some((used, size)) = self.whole_size_line(input) {
            self.state = State::Data { left: size };
            let avail = input.len().saturating_sub(used);
            let n = usize::try_from(size).map_or(avail, |size| size.min(avail));
            return Ok((used, Next::Data(n)));
        }
        for (i, &b) in input.iter().enumerate() {
            match self.state {
                State::Data { left } => {
                    let avail = input.len().saturating_sub(i);
                    let n = usize::try_from(left).map_or(avail, |left| left.min(avail));
                    return Ok((i, Next::Data(n)));
                }
                State::Done => return Ok((i, Next::End)),
                _ => self.byte(b)?,
            }
        }
        Ok((
            input.len(),
            if self.state == State::Done {
                Next::End
            } else {
                Next::NeedMore
            },
        ))
    }

    /// The common case in one step: at the start of a size line (or at the CRLF ending
    /// the previous chunk's data), a complete `[CRLF]HEX CRLF` with a non-zero size and
    /// no extension. Returns the bytes it spans and the size; anything else (a split
    /// line, an extension, the last chunk, an error) is left to the byte-at-a-time path.
    fn whole_size_line(&self, input: &[u8]) -> Option<(usize, u64)> {
        let start = match self.state {
            State::DataCr => match input {
                [b'\r', b'\n', ..] => 2,
                _ => return None,
            },
            State::Size {
                size: 0,
                digits: 0,
                line: 0,
            } => 0,
            _ => return None,
        };
        let mut size = 0u64;
        // Fifteen hex digits can not overflow a u64; longer sizes take the slow path.
        for (i, &b) in input.iter().enumerate().skip(start).take(16) {
            let digit = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                b'A'..=b'F' => b - b'A' + 10,
                b'\r' => {
                    let digits = i - start;
                    let ok = digits > 0
                        && digits < self.max_line
                        && size > 0
                        && input.get(i + 1) == Some(&b'\n');
                    return ok.then_some((i + 2, size));
                }
                _ => return None,
            };
            if i - start == 15 {
                return None;
            }
            size = size << 4 | u64::from(digit);
        }
        None
    }

    /// Records that the caller used `n` of the data bytes [`Chunked::next`] offered.
    pub fn consume(&mut self, n: usize) {
        if let State::Data { left } = self.state {
            let left = left.saturating_sub(n as u64);
            self.state = if left == 0 {
                State::DataCr
            } else {
                State::Data { left }
            };
        }
    }

    /// Where the body stands if the connection ends now.
    #[must_use]
    pub fn eof_section(&self) -> Section {
        match self.state {
            State::Data { .. } => Section::Body,
            State::Trailer { .. } => Section::Trailers,
            _ => Section::ChunkFraming,
        }
    }

    fn line(&self, line: usize) -> Result<usize, DecodeError> {
        match line.checked_add(1) {
            Some(line) if line <= self.max_line => Ok(line),
            _ => Err(DecodeError::ChunkLineTooLong { max: self.max_line }),
        }
    }

    fn byte(&mut self, b: u8) -> Result<(), DecodeError> {
        self.state = match self.state {
            State::Size { size, digits, line } => {
                let line = self.line(line)?;
                match (char::from(b).to_digit(16), b) {
                    (Some(d), _) => {
                        let size = size
                            .checked_mul(16)
                            .and_then(|s| s.checked_add(u64::from(d)));
                        let size = size.ok_or(DecodeError::InvalidChunkSize)?;
                        State::Size {
                            size,
                            digits: digits.saturating_add(1),
                            line,
                        }
                    }
                    (None, _) if digits == 0 => return Err(DecodeError::InvalidChunkSize),
                    (None, b'\r') => State::SizeLf { size },
                    (None, b'\n') => Self::after_size(size),
                    (None, b' ' | b'\t') => State::SizeRest {
                        size,
                        in_ext: false,
                        line,
                    },
                    (None, b';') => State::SizeRest {
                        size,
                        in_ext: true,
                        line,
                    },
                    (None, _) => return Err(DecodeError::InvalidChunkSize),
                }
            }
            State::SizeRest { size, in_ext, line } => {
                let line = self.line(line)?;
                match b {
                    b'\r' => State::SizeLf { size },
                    b'\n' => Self::after_size(size),
                    b';' => State::SizeRest {
                        size,
                        in_ext: true,
                        line,
                    },
                    b' ' | b'\t' => State::SizeRest { size, in_ext, line },
                    _ if in_ext && b != 0x7F && b >= b' ' => State::SizeRest { size, in_ext, line },
                    _ => return Err(DecodeError::InvalidChunkSize),
                }
            }
            State::SizeLf { size } if b == b'\n' => Self::after_size(size),
            State::SizeLf { .. } => return Err(DecodeError::InvalidChunkSize),
            State::DataCr if b == b'\r' => State::DataLf,
            State::DataCr | State::DataLf if b == b'\n' => State::Size {
                size: 0,
                digits: 0,
                line: 0,
            },
            State::DataCr | State::DataLf => return Err(DecodeError::InvalidChunkDelimiter),
            State::Trailer { line, total } => {
                let total = total.checked_add(1).filter(|&t| t <= self.max_trailers);
                let total = total.ok_or(DecodeError::TrailersTooLarge {
                    max: self.max_trailers,
                })?;
                match b {
                    b'\n' if line == 0 => State::Done,
                    b'\n' => State::Trailer { line: 0, total },
                    b'\r' => State::Trailer { line, total },
                    _ => State::Trailer {
                        line: line.saturating_add(1),
                        total,
                    },
                }
            }
            // `next` hands data bytes to the caller and stops at Done.
            state @ (State::Data { .. } | State::Done) => state,
        };
        Ok(())
    }

    fn after_size(size: u64) -> State {
        if size == 0 {
            State::Trailer { line: 0, total: 0 }
        } else {
            State::Data { left: size }
        }
    }
}

#[cfg(test)]
mod tests;

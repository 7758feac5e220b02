//! The push-style response decoder: bytes from the socket in, a head, decoded body slices
//! and an end marker out.
//!
//! It never reads a socket and never buffers the body. The head is gathered in a
//! caller-provided buffer (whose size is the header-bytes limit) and parsed with httparse;
//! identity body bytes are handed out as slices of the caller's own input (zero copy), and
//! inflated bytes as slices of the caller's inflate window. Any split of the input, down to
//! one byte at a time, gives the same events with the same bytes: the decoder is a state
//! machine over bytes and keeps no look-ahead.
//!
//! The contract with the caller:
//! - [`Event::NeedMore`] is returned only once all of `input` has been consumed, so a
//!   caller never has to keep unconsumed bytes around, except after [`Event::End`]: bytes
//!   after the end of a response belong to the next one (keep-alive, pipelining), and the
//!   consumed count says where it starts.
//! - When the peer closes the connection, call [`ResponseDecoder::finish`]: it ends a
//!   close-delimited body and is a typed error anywhere else.
//! - After `End`, [`ResponseDecoder::reset`] readies the decoder for the next response.

use super::chunked::{Chunked, Next};
use super::content_coding::{ContentDecoder, ContentEncoding, InflateMemory, Output};
use super::decode_error::{DecodeError, Section};
use super::Method;

/// The explicit bounds of a response, besides the head buffer's size (header bytes) and
/// `MAX_HEADERS` (header count).
///
/// ```
/// use benchlink_core::http::Limits;
/// let limits = Limits { max_body_bytes: 1 << 20, ..Limits::DEFAULT };
/// assert_eq!(limits.max_chunk_line, 1024);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Limits {
    /// Longest chunk-size line, extensions included.
    pub max_chunk_line: usize,
    /// Longest trailer section of a chunked body (it is skipped, not stored).
    pub max_trailer_bytes: usize,
    /// Most decoded body bytes (after decompression) of one response: the defence against
    /// decompression bombs for callers that collect a body. Exactly this many bytes are
    /// delivered before [`DecodeError::BodyTooLarge`].
    pub max_body_bytes: u64,
}

impl Limits {
    /// 1 KiB chunk lines, 4 KiB trailers, and no body limit: log and metric streams are
    /// unbounded by design, and the decoder itself never stores the body.
    pub const DEFAULT: Limits = Limits {
        max_chunk_line: 1024,
        max_trailer_bytes: 4096,
        max_body_bytes: u64::MAX,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// HTTP version of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Version {
    /// HTTP/1.0
    Http10,
    /// HTTP/1.1
    Http11,
}

/// How the end of the body is found (RFC 9112, 6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Framing {
    /// No body: 1xx, 204, 304, the answer to `HEAD`, and the start of a tunnel (101, or
    /// 2xx to `CONNECT`) after which the connection carries another protocol.
    None,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the server closes the connection.
    Close,
}

/// What the decoder keeps of a parsed head; the text stays in the head buffer.
#[derive(Debug, Clone, Copy)]
struct HeadInfo {
    len: usize,
    status: u16,
    version: Version,
    framing: Framing,
    encoding: ContentEncoding,
    keep_alive: bool,
}

/// A response head: parsed essentials, plus lookup of any header in the raw head.
///
/// ```
/// use benchlink_core::http::{Event, Framing, ResponseDecoder, Limits};
/// let mut head_buf = [0u8; 256];
/// let mut dec: ResponseDecoder = ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
/// let input = b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nX-Id: 7\r\nContent-Length: 2\r\n\r\n{}";
/// let (used, event) = dec.decode(input).unwrap();
/// let Event::Head(head) = event else { panic!() };
/// assert_eq!((head.status, head.reason, head.framing), (404, "Not Found", Framing::Length(2)));
/// assert_eq!(head.content_type(), Some(&b"application/json"[..]));
/// assert_eq!(head.header("x-id"), Some(&b"7"[..]));
/// assert_eq!(head.headers().count(), 3);
/// assert_eq!(used, input.len() - 2);
/// ```
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Head<'s> {
    /// Status code.
    pub status: u16,
    /// Reason phrase (empty if absent or not UTF-8).
    pub reason: &'s str,
    /// HTTP version.
    pub version: Version,
    /// Body framing.
    pub framing: Framing,
    /// Body content coding.
    pub encoding: ContentEncoding,
    /// Whether the connection can carry another request after this response: HTTP/1.1
    /// unless `Connection: close`, HTTP/1.0 only with `Connection: keep-alive`, and never
    /// after a close-delimited body or the start of a tunnel.
    pub keep_alive: bool,
    raw: &'s [u8],
}

impl<'s> Head<'s> {
    fn new(info: &HeadInfo, raw: &'s [u8]) -> Self {
        let raw = raw.get(..info.len).unwrap_or_default();
        let status_line = raw.split(|&b| b == b'\n').next().unwrap_or_default();
        let status_line = without_cr(status_line);
        // "HTTP/1.1 200" is 12 bytes; httparse has validated the line.
        let reason = trim(status_line.get(12..).unwrap_or_default());
        Head {
            status: info.status,
            reason: core::str::from_utf8(reason).unwrap_or_default(),
            version: info.version,
            framing: info.framing,
            encoding: info.encoding,
            keep_alive: info.keep_alive,
            raw,
        }
    }

    /// Parses `raw`, a complete head up to and including its blank line, as the answer to
    /// a `GET` (at most 32 header lines). For callers that find the end of the head
    /// themselves, such as the WebSocket upgrade, where nothing but the head is HTTP.
    ///
    /// ```
    /// use benchlink_core::http::Head;
    /// let head = Head::parse(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n").unwrap();
    /// assert_eq!((head.status, head.header("upgrade")), (101, Some(&b"websocket"[..])));
    /// assert!(Head::parse(b"HTTP/1.1 101 Switching").is_err());
    /// ```
    pub fn parse(raw: &'s [u8]) -> Result<Head<'s>, DecodeError> {
        let info = parse_head::<32>(raw, Method::Get)?;
        Ok(Head::new(&info, raw))
    }

    /// The value of the first header called `name` (case-insensitive), trimmed.
    ///
    /// ```
    /// # use benchlink_core::http::{Event, ResponseDecoder, Limits};
    /// # let mut head_buf = [0u8; 256];
    /// # let mut dec: ResponseDecoder = ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
    /// let (_, event) = dec.decode(b"HTTP/1.1 204 No Content\r\nServer:  Cowboy \r\n\r\n").unwrap();
    /// let Event::Head(head) = event else { panic!() };
    /// assert_eq!(head.header("SERVER"), Some(&b"Cowboy"[..]));
    /// assert_eq!(head.header("date"), None);
    /// ```
    pub fn header(&self, name: &str) -> Option<&'s [u8]> {
        self.headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// The `Content-Type` value, if any.
    ///
    /// ```
    /// # use benchlink_core::http::{Event, ResponseDecoder, Limits};
    /// # let mut head_buf = [0u8; 256];
    /// # let mut dec: ResponseDecoder = ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
    /// let (_, event) = dec.decode(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\n").unwrap();
    /// let Event::Head(head) = event else { panic!() };
    /// assert_eq!(head.content_type(), Some(&b"text/plain"[..]));
    /// ```
    pub fn content_type(&self) -> Option<&'s [u8]> {
        self.header("content-type")
    }

    /// Every header line as (name, trimmed value), in order, duplicates included.
    ///
    /// ```
    /// # use benchlink_core::http::{Event, ResponseDecoder, Limits};
    /// # let mut head_buf = [0u8; 256];
    /// # let mut dec: ResponseDecoder = ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
    /// let (_, event) = dec.decode(b"HTTP/1.1 204 No Content\r\nA: 1\r\nA: 2\r\n\r\n").unwrap();
    /// let Event::Head(head) = event else { panic!() };
    /// let values: Vec<_> = head.headers().filter(|(n, _)| *n == "A").map(|(_, v)| v).collect();
    /// assert_eq!(values, [b"1", b"2"]);
    /// ```
    pub fn headers(&self) -> Headers<'s> {
        let after_status_line = match self.raw.iter().position(|&b| b == b'\n') {
            Some(i) => self.raw.get(i.saturating_add(1)..).unwrap_or_default(),
            None => &[],
        };
        Headers {
            rest: after_status_line,
        }
    }
}

/// Iterator over the header lines of a [`Head`].
#[derive(Debug, Clone)]
pub struct Headers<'s> {
    rest: &'s [u8],
}

impl<'s> Iterator for Headers<'s> {
    type Item = (&'s str, &'s [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (line, rest) = match self.rest.iter().position(|&b| b == b'\n') {
                Some(i) => (self.rest.get(..i)?, self.rest.get(i.saturating_add(1)..)?),
                None => (self.rest, &[][..]),
            };
            self.rest = rest;
            let line = without_cr(line);
            if line.is_empty() {
                self.rest = &[];
                return None;
            }
            // httparse validated every line as `name: value`; anything else is skipped.
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            let name = line.get(..colon).and_then(|n| core::str::from_utf8(n).ok());
            let value = line.get(colon.saturating_add(1)..).map(trim);
            if let (Some(name), Some(value)) = (name, value) {
                return Some((name, value));
            }
        }
    }
}

/// What [`ResponseDecoder::decode`] found.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Event<'s> {
    /// The final head of the response (1xx interim responses are skipped), once.
    Head(Head<'s>),
    /// Decoded body bytes, never empty: a slice of the input for identity bodies, of the
    /// inflate window for compressed ones.
    Data(&'s [u8]),
    /// The response is complete.
    End {
        /// The connection can carry the next request (see [`Head::keep_alive`]).
        keep_alive: bool,
        /// False when a compressed body ended cleanly at the HTTP level but its stream
        /// lacked its end (final block, Adler-32 or gzip trailer): tolerated, all decodable
        /// data was delivered.
        coding_complete: bool,
    },
    /// All input was consumed; feed more.
    NeedMore,
}

/// The body framing state.
#[derive(Debug, Clone, Copy)]
enum Body {
    None,
    Length(u64),
    Chunked(Chunked),
    Close,
}

impl Body {
    fn next(&mut self, input: &[u8]) -> Result<(usize, Next), DecodeError> {
        let avail = |max: u64| match input.len() {
            0 => Next::NeedMore,
            n => Next::Data(usize::try_from(max).map_or(n, |max| max.min(n))),
        };
        Ok(match self {
            Body::None | Body::Length(0) => (0, Next::End),
            Body::Length(left) => (0, avail(*left)),
            Body::Close => (0, avail(u64::MAX)),
            Body::Chunked(chunked) => return chunked.next(input),
        })
    }

    fn consume(&mut self, n: usize) {
        match self {
            Body::Length(left) => *left = left.saturating_sub(n as u64),
            Body::Chunked(chunked) => chunked.consume(n),
            Body::None | Body::Close => {}
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum State {
    /// Gathering head bytes: `len` in the buffer, `line` non-CR bytes in the current line;
    /// `interim` once a 1xx response was skipped (so the response has begun).
    Head {
        len: usize,
        line: usize,
        interim: bool,
    },
    Body {
        head: HeadInfo,
        body: Body,
        content: ContentDecoder,
    },
    Done {
        head: HeadInfo,
        coding_complete: bool,
    },
    Failed(DecodeError),
}

/// A borrow-free version of [`Event`], turned into one at the end of a call.
#[derive(Debug, Clone, Copy)]
enum Step {
    Head(HeadInfo),
    Data {
        input_start: usize,
        out: Output,
    },
    End {
        keep_alive: bool,
        coding_complete: bool,
    },
    NeedMore,
}

/// Incremental HTTP/1.x response decoder over caller-provided memory.
///
/// `MAX_HEADERS` is how many header lines a head may have; it costs two pointer pairs
/// of stack each while the head is parsed. The head buffer's size bounds the head's bytes.
/// Inflate memory is optional: without it a compressed body is a typed error.
///
/// A std caller reading from a socket (inflating, so with the `deflate` feature):
///
/// ```
/// # #[cfg(feature = "deflate")] {
/// use benchlink_core::http::{Event, InflateBuffers, Limits, ResponseDecoder};
/// use std::io::Read;
///
/// fn get_body(mut sock: impl Read, body: &mut Vec<u8>) -> Result<bool, Box<dyn std::error::Error>> {
///     let mut head_buf = [0u8; 4096];
///     let mut inflate = Box::new(InflateBuffers::<32768>::new());
///     let mut dec: ResponseDecoder = ResponseDecoder::new(&mut head_buf, Some(inflate.memory()), Limits::DEFAULT);
///     let mut buf = [0u8; 1024];
///     loop {
///         let n = sock.read(&mut buf)?;
///         if n == 0 {
///             loop {
///                 match dec.finish()? {
///                     Event::Data(d) => body.extend_from_slice(d),
///                     Event::End { keep_alive, .. } => return Ok(keep_alive),
///                     _ => {}
///                 }
///             }
///         }
///         let mut pos = 0;
///         loop {
///             let (used, event) = dec.decode(&buf[pos..n])?;
///             pos += used;
///             match event {
///                 Event::Head(head) => assert_eq!(head.status, 200),
///                 Event::Data(d) => body.extend_from_slice(d),
///                 Event::End { keep_alive, .. } => return Ok(keep_alive), // buf[pos..n]: next response
///                 Event::NeedMore => break,
///             }
///         }
///     }
/// }
///
/// let wire = &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Encoding: deflate\r\n\r\n\
///               a\r\n\x78\x9c\xcb\x48\xcd\xc9\xc9\xe7\x02\x00\r\n4\r\n\x08\x4b\x02\x1f\r\n0\r\n\r\n"[..];
/// let mut body = Vec::new();
/// assert!(get_body(wire, &mut body).unwrap());
/// assert_eq!(body, b"hello\n");
/// # }
/// ```
pub struct ResponseDecoder<'b, const MAX_HEADERS: usize = 32> {
    head_buf: &'b mut [u8],
    inflate: Option<InflateMemory<'b>>,
    limits: Limits,
    method: Method,
    state: State,
    delivered: u64,
}

impl<const MAX_HEADERS: usize> core::fmt::Debug for ResponseDecoder<'_, MAX_HEADERS> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ResponseDecoder")
            .field("head_buf_len", &self.head_buf.len())
            .field("inflate", &self.inflate)
            .field("limits", &self.limits)
            .field("method", &self.method)
            .field("state", &self.state)
            .field("delivered", &self.delivered)
            .finish()
    }
}

impl<'b, const MAX_HEADERS: usize> ResponseDecoder<'b, MAX_HEADERS> {
    /// A decoder for a response to a `GET` (see [`ResponseDecoder::set_request_method`]).
    ///
    /// Without inflate memory (always, without the `deflate` feature) a compressed body
    /// is a typed error:
    ///
    /// ```
    /// use benchlink_core::http::{ContentEncoding, DecodeError, Event, Limits, ResponseDecoder};
    /// let mut head_buf = [0u8; 1024];
    /// let mut plain: ResponseDecoder<'_, 16> = ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
    /// let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Encoding: gzip\r\n\r\n\x1f\x8b";
    /// let (used, head) = plain.decode(wire).unwrap();
    /// assert!(matches!(head, Event::Head(_)));
    /// let unsupported = DecodeError::CompressedBodyUnsupported { encoding: ContentEncoding::Gzip };
    /// assert_eq!(plain.decode(&wire[used..]).err(), Some(unsupported));
    /// ```
    ///
    /// With the feature, give it the memory to inflate into:
    ///
    /// ```
    /// # #[cfg(feature = "deflate")] {
    /// use benchlink_core::http::{DecompressorOxide, InflateMemory, Limits, ResponseDecoder};
    /// let mut head_buf = [0u8; 1024];
    /// let (mut state, mut window) = (Box::new(DecompressorOxide::new()), vec![0u8; 32768]);
    /// let memory = InflateMemory::new(&mut state, &mut window).unwrap();
    /// let inflating: ResponseDecoder = ResponseDecoder::new(&mut head_buf, Some(memory), Limits::DEFAULT);
    /// # drop(inflating);
    /// # }
    /// ```
    pub fn new(head_buf: &'b mut [u8], inflate: Option<InflateMemory<'b>>, limits: Limits) -> Self {
        ResponseDecoder {
            head_buf,
            inflate,
            limits,
            method: Method::Get,
            state: State::Head {
                len: 0,
                line: 0,
                interim: false,
            },
            delivered: 0,
        }
    }

    /// Inflates compressed bodies into `memory` from the next response on (`None`: a
    /// compressed body is [`DecodeError::CompressedBodyUnsupported`]): for a client
    /// that keeps one decoder for all its responses and is given the memory later.
    ///
    /// ```
    /// use benchlink_core::http::{Limits, ResponseDecoder};
    /// let mut head_buf = [0u8; 256];
    /// let mut dec: ResponseDecoder = ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
    /// dec.set_inflate(None); // (with the `deflate` feature: `Some(InflateMemory::new(..)?)`)
    /// ```
    pub fn set_inflate(&mut self, memory: Option<InflateMemory<'b>>) {
        self.inflate = memory;
    }

    /// Tells the decoder which method the awaited response answers, before feeding it:
    /// the answer to `HEAD` has no body whatever its headers say, and a 2xx answer to
    /// `CONNECT` opens a tunnel. [`ResponseDecoder::reset`] goes back to `GET`.
    ///
    /// ```
    /// use benchlink_core::http::{Event, Framing, Limits, Method, ResponseDecoder};
    /// let mut head_buf = [0u8; 256];
    /// let mut dec: ResponseDecoder = ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
    /// dec.set_request_method(Method::Head);
    /// let (_, event) = dec.decode(b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n").unwrap();
    /// assert!(matches!(event, Event::Head(h) if h.framing == Framing::None));
    /// assert!(matches!(dec.decode(b"").unwrap(), (0, Event::End { keep_alive: true, .. })));
    /// ```
    pub fn set_request_method(&mut self, method: Method) {
        self.method = method;
    }

    /// Consumes a prefix of `input` and says what it found; call again with the rest until
    /// [`Event::NeedMore`] (everything consumed) or [`Event::End`] (the rest belongs to the
    /// next response).
    ///
    /// ```
    /// use benchlink_core::http::{Event, Limits, ResponseDecoder};
    /// let mut head_buf = [0u8; 256];
    /// let mut dec: ResponseDecoder = ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
    /// let input = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    /// let (n, _head) = dec.decode(input).unwrap();
    /// let (m, event) = dec.decode(&input[n..]).unwrap();
    /// assert!(matches!(event, Event::Data(b"hello")));
    /// assert!(matches!(dec.decode(&input[n + m..]).unwrap(), (0, Event::End { keep_alive: true, coding_complete: true })));
    /// ```
    pub fn decode<'s>(&'s mut self, input: &'s [u8]) -> Result<(usize, Event<'s>), DecodeError> {
        self.step(input, false)
    }

    /// The peer closed the connection. Returns the remaining decoded data (call again
    /// until `End`), `End` for a close-delimited body, or
    /// [`DecodeError::UnexpectedEof`] if the response was cut short.
    ///
    /// ```
    /// use benchlink_core::http::{DecodeError, Event, Limits, ResponseDecoder, Section};
    /// let mut head_buf = [0u8; 256];
    /// let mut dec: ResponseDecoder = ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
    /// let input = b"HTTP/1.0 200 OK\r\n\r\nall of it";
    /// let (n, _head) = dec.decode(input).unwrap();
    /// assert!(matches!(dec.decode(&input[n..]).unwrap().1, Event::Data(b"all of it")));
    /// assert!(matches!(dec.finish().unwrap(), Event::End { keep_alive: false, .. }));
    ///
    /// dec.reset();
    /// assert_eq!(dec.finish().err(), Some(DecodeError::UnexpectedEof { section: Section::NoResponse }));
    /// ```
    pub fn finish(&mut self) -> Result<Event<'_>, DecodeError> {
        self.step(&[], true).map(|(_, event)| event)
    }

    /// [`decode`](Self::decode), or [`finish`](Self::finish) at `eof`: one copy of both
    /// (inlined into each, it would be two).
    #[inline(never)]
    fn step<'s>(
        &'s mut self,
        input: &'s [u8],
        eof: bool,
    ) -> Result<(usize, Event<'s>), DecodeError> {
        match self.run(input, eof) {
            Ok((used, step)) => Ok((used, self.event(input, step))),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Readies the decoder for the next response on the same connection (after `End`),
    /// or abandons the current one. The request method goes back to `GET`.
    ///
    /// ```
    /// use benchlink_core::http::{Event, Limits, ResponseDecoder};
    /// let mut head_buf = [0u8; 256];
    /// let mut dec: ResponseDecoder = ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
    /// let two = b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 304 Not Modified\r\n\r\n";
    /// let (n, _) = dec.decode(two).unwrap();
    /// assert!(matches!(dec.decode(&two[n..]).unwrap(), (0, Event::End { .. })));
    /// dec.reset();
    /// assert!(matches!(dec.decode(&two[n..]).unwrap().1, Event::Head(h) if h.status == 304));
    /// ```
    pub fn reset(&mut self) {
        self.state = State::Head {
            len: 0,
            line: 0,
            interim: false,
        };
        self.method = Method::Get;
        self.delivered = 0;
    }

    /// The head of the current response, once it has been decoded.
    ///
    /// ```
    /// use benchlink_core::http::{Limits, ResponseDecoder};
    /// let mut head_buf = [0u8; 256];
    /// let mut dec: ResponseDecoder = ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
    /// assert!(dec.head().is_none());
    /// dec.decode(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n").unwrap();
    /// assert_eq!(dec.head().map(|h| h.status), Some(200));
    /// ```
    pub fn head(&self) -> Option<Head<'_>> {
        match &self.state {
            State::Body { head, .. } | State::Done { head, .. } => {
                Some(Head::new(head, self.head_buf))
            }
            State::Head { .. } | State::Failed(_) => None,
        }
    }

    fn fail(&mut self, e: DecodeError) -> DecodeError {
        self.state = State::Failed(e);
        e
    }

    fn event<'s>(&'s self, input: &'s [u8], step: Step) -> Event<'s> {
        match step {
            Step::Head(info) => Event::Head(Head::new(&info, self.head_buf)),
            Step::Data { input_start, out } => {
                let input = input.get(input_start..).unwrap_or_default();
                Event::Data(ContentDecoder::output(self.inflate.as_ref(), input, out))
            }
            Step::End {
                keep_alive,
                coding_complete,
            } => Event::End {
                keep_alive,
                coding_complete,
            },
            Step::NeedMore => Event::NeedMore,
        }
    }

    fn run(&mut self, input: &[u8], eof: bool) -> Result<(usize, Step), DecodeError> {
        let mut used = 0;
        loop {
            let rest = input.get(used..).unwrap_or_default();
            match &mut self.state {
                State::Failed(e) => return Err(*e),
                State::Done {
                    head,
                    coding_complete,
                } => {
                    return Ok((
                        used,
                        Step::End {
                            keep_alive: head.keep_alive,
                            coding_complete: *coding_complete,
                        },
                    ));
                }
                State::Head { len, line, interim } => {
                    if eof {
                        let section = if *len == 0 && !*interim {
                            Section::NoResponse
                        } else {
                            Section::Head
                        };
                        return Err(DecodeError::UnexpectedEof { section });
                    }
                    let (n, complete) = gather_head(self.head_buf, len, line, rest)?;
                    used += n;
                    if !complete {
                        return Ok((used, Step::NeedMore));
                    }
                    let raw = self.head_buf.get(..*len).unwrap_or_default();
                    let head = parse_head::<MAX_HEADERS>(raw, self.method)?;
                    if (100..200).contains(&head.status) && head.status != 101 {
                        self.state = State::Head {
                            len: 0,
                            line: 0,
                            interim: true,
                        };
                        continue;
                    }
                    let body = match head.framing {
                        Framing::None => Body::None,
                        Framing::Length(n) => Body::Length(n),
                        Framing::Chunked => Body::Chunked(Chunked::new(
                            self.limits.max_chunk_line,
                            self.limits.max_trailer_bytes,
                        )),
                        Framing::Close => Body::Close,
                    };
                    self.state = State::Body {
                        head,
                        body,
                        content: ContentDecoder::new(head.encoding),
                    };
                    return Ok((used, Step::Head(head)));
                }
                State::Body { body, content, .. } => {
                    if content.has_pending() {
                        let (_, out) = content.step(self.inflate.as_mut(), &[])?;
                        if out != Output::None {
                            return self.deliver(used, used, out);
                        }
                    }
                    let (skip, next) = body.next(rest)?;
                    used += skip;
                    match next {
                        Next::Data(n) => {
                            let data = rest.get(skip..skip.saturating_add(n)).unwrap_or_default();
                            let (consumed, out) = if content.passes_through() && !data.is_empty() {
                                (data.len(), Output::Input { len: data.len() })
                            } else {
                                content.step(self.inflate.as_mut(), data)?
                            };
                            body.consume(consumed);
                            let start = used;
                            used += consumed;
                            if out != Output::None {
                                return self.deliver(used, start, out);
                            }
                        }
                        Next::NeedMore if !eof => return Ok((used, Step::NeedMore)),
                        Next::NeedMore => match body {
                            Body::Close => self.end(),
                            Body::Chunked(chunked) => {
                                return Err(DecodeError::UnexpectedEof {
                                    section: chunked.eof_section(),
                                })
                            }
                            Body::None | Body::Length(_) => {
                                return Err(DecodeError::UnexpectedEof {
                                    section: Section::Body,
                                })
                            }
                        },
                        Next::End => self.end(),
                    }
                }
            }
        }
    }

    fn end(&mut self) {
        if let State::Body { head, content, .. } = &self.state {
            self.state = State::Done {
                head: *head,
                coding_complete: content.is_complete(),
            };
        }
    }

    /// Hands out decoded bytes within the body limit: exactly `max_body_bytes` bytes are
    /// delivered, whatever the split of the input, before the decoder fails.
    fn deliver(
        &mut self,
        used: usize,
        input_start: usize,
        out: Output,
    ) -> Result<(usize, Step), DecodeError> {
        let max = self.limits.max_body_bytes;
        let room = max.saturating_sub(self.delivered);
        if room == 0 {
            return Err(DecodeError::BodyTooLarge { max });
        }
        let len = out.len();
        let emit = usize::try_from(room).map_or(len, |room| room.min(len));
        self.delivered = self.delivered.saturating_add(emit as u64);
        if emit < len {
            self.state = State::Failed(DecodeError::BodyTooLarge { max });
        }
        Ok((
            used,
            Step::Data {
                input_start,
                out: out.truncated(emit),
            },
        ))
    }
}

/// Copies head bytes into `buf` up to and including the empty line that ends the head;
/// returns how many input bytes were consumed and whether the head is complete. Empty
/// lines before the status line are skipped, as RFC 9112, 2.2 allows.
fn gather_head(
    buf: &mut [u8],
    len: &mut usize,
    line: &mut usize,
    input: &[u8],
) -> Result<(usize, bool), DecodeError> {
    for (i, &b) in input.iter().enumerate() {
        if *len == 0 && (b == b'\r' || b == b'\n') {
            continue;
        }
        let max = buf.len();
        let slot = buf.get_mut(*len).ok_or(DecodeError::HeadTooLarge { max })?;
        *slot = b;
        *len = len.saturating_add(1);
        match b {
            b'\n' if *line == 0 => return Ok((i.saturating_add(1), true)),
            b'\n' => *line = 0,
            b'\r' => {}
            _ => *line = line.saturating_add(1),
        }
    }
    Ok((input.len(), false))
}

/// Parses a complete head with httparse and derives framing, coding and persistence.
fn parse_head<const MAX_HEADERS: usize>(
    raw: &[u8],
    method: Method,
) -> Result<HeadInfo, DecodeError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    parse_head_with(raw, method, &mut headers)
}

/// [`parse_head`] with the header table as a slice: one copy for every table size (the
/// upgrade response's and each decoder's).
#[inline(never)]
fn parse_head_with<'r>(
    raw: &'r [u8],
    method: Method,
    headers: &mut [httparse::Header<'r>],
) -> Result<HeadInfo, DecodeError> {
    let max = headers.len();
    let mut response = httparse::Response::new(headers);
    match response.parse(raw) {
        Ok(httparse::Status::Complete(n)) if n == raw.len() => {}
        Ok(_) => {
            return Err(DecodeError::MalformedHead {
                what: "incomplete head",
            })
        }
        Err(httparse::Error::TooManyHeaders) => return Err(DecodeError::TooManyHeaders { max }),
        Err(e) => return Err(DecodeError::MalformedHead { what: describe(e) }),
    }
    let status = response.code.unwrap_or(0);
    let version = if response.version == Some(0) {
        Version::Http10
    } else {
        Version::Http11
    };

    let (mut chunked, mut other_coding, mut length) = (0u32, false, None::<u64>);
    let (mut close, mut keep_alive, mut encoding) = (false, false, ContentEncoding::Identity);
    for header in response.headers.iter() {
        let name = header.name;
        if name.eq_ignore_ascii_case("transfer-encoding") {
            for token in tokens(header.value) {
                match token.eq_ignore_ascii_case(b"chunked") {
                    true => chunked = chunked.saturating_add(1),
                    false => other_coding = true,
                }
            }
        } else if name.eq_ignore_ascii_case("content-length") {
            for token in elements(header.value) {
                let value = parse_decimal(token).ok_or(DecodeError::InvalidContentLength)?;
                if length.is_some_and(|l| l != value) {
                    return Err(DecodeError::InvalidContentLength);
                }
                length = Some(value);
            }
        } else if name.eq_ignore_ascii_case("connection") {
            close |= list_has(header.value, b"close");
            keep_alive |= list_has(header.value, b"keep-alive");
        } else if name.eq_ignore_ascii_case("content-encoding") {
            encoding = encoding.then(ContentEncoding::from_header(header.value));
        }
    }

    let tunnel = status == 101 || (method == Method::Connect && (200..300).contains(&status));
    let no_body = tunnel
        || method == Method::Head
        || status == 204
        || status == 304
        || (100..200).contains(&status);
    let framing = match (no_body, chunked, other_coding, length) {
        (true, ..) => Framing::None,
        (false, 1, false, _) => Framing::Chunked,
        (false, 0, false, Some(len)) => Framing::Length(len),
        (false, 0, false, None) => Framing::Close,
        (false, ..) => return Err(DecodeError::UnsupportedTransferEncoding),
    };
    let persistent = match version {
        Version::Http11 => !close,
        Version::Http10 => keep_alive && !close,
    };
    Ok(HeadInfo {
        len: raw.len(),
        status,
        version,
        framing,
        encoding,
        keep_alive: persistent && framing != Framing::Close && !tunnel,
    })
}

fn describe(e: httparse::Error) -> &'static str {
    match e {
        httparse::Error::HeaderName => "invalid header name",
        httparse::Error::HeaderValue => "invalid header value",
        httparse::Error::NewLine => "invalid new line",
        httparse::Error::Status => "invalid status",
        httparse::Error::Token => "invalid token",
        httparse::Error::TooManyHeaders => "too many headers",
        httparse::Error::Version => "invalid version",
    }
}

/// The trimmed elements of a comma-separated header value, empty ones included: the
/// one list splitter of the HTTP code (each `split` with its own closure would be a
/// copy of the slice splitter).
pub(crate) fn elements(value: &[u8]) -> Elements<'_> {
    Elements { rest: Some(value) }
}

/// Iterator of [`elements`].
pub(crate) struct Elements<'v> {
    rest: Option<&'v [u8]>,
}

impl<'v> Iterator for Elements<'v> {
    type Item = &'v [u8];

    fn next(&mut self) -> Option<&'v [u8]> {
        let text = self.rest?;
        let (element, rest) = match text.iter().position(|&b| b == b',') {
            Some(i) => (text.get(..i)?, text.get(i + 1..)),
            None => (text, None),
        };
        self.rest = rest;
        Some(trim(element))
    }
}

/// Non-empty, trimmed, comma-separated list elements.
fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    elements(value).filter(|t| !t.is_empty())
}

/// Whether the comma-separated list `value` has the element `token` (trimmed,
/// case-insensitive).
pub(crate) fn list_has(value: &[u8], token: &[u8]) -> bool {
    elements(value).any(|t| t.eq_ignore_ascii_case(token))
}

/// ASCII digits as a `u64` (`None` when empty, not all digits, or too large): the one
/// decimal reader of the crate (`str::parse` would link a second, generic one).
pub(crate) fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        let d = char::from(d).to_digit(10)?;
        n.checked_mul(10)?.checked_add(u64::from(d))
    })
}

/// A line without the CR of its CRLF.
fn without_cr(line: &[u8]) -> &[u8] {
    match line {
        [rest @ .., b'\r'] => rest,
        _ => line,
    }
}

/// Strips spaces and tabs at both ends (HTTP's optional whitespace).
pub(crate) fn trim(s: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = s.iter().position(|b| !is_ows(b)).unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| !is_ows(b))
        .map_or(start, |e| e.saturating_add(1));
    s.get(start..end).unwrap_or_default()
}

// The decoder's tests build inflate memory throughout, so they run with the `deflate`
// feature (the default); the no-deflate path is checked by the firmware images (QEMU).
#[cfg(all(test, feature = "deflate"))]
mod tests;

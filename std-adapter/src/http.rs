//! One HTTP/1.1 exchange at a time over a kept-alive [`Stream`], driven by the core's
//! push-style codec: this module only moves bytes between the socket and
//! `benchlink_core::http`, which does all the parsing.

use std::io::{self, BufWriter, Read, Write};
use std::time::Duration;

use benchlink_core::http::{
    Body, ContentEncoding, Cursor, DecodeError, EncodeError, Event, InflateBuffers, Limits, Method,
    RequestHead, ResponseDecoder, Section,
};

use crate::net::{Stream, Tls};

/// The size of the buffer socket reads go into.
const READ_BUF: usize = 16 * 1024;
/// The longest response head accepted.
const HEAD_BUF: usize = 16 * 1024;
/// The inflate window: 32 KiB, the largest a zlib or gzip stream may use.
const WINDOW: usize = 32 * 1024;

/// Memory the response decoder borrows: allocated once per client, reused per response.
#[derive(Debug)]
pub(crate) struct Buffers {
    head: Box<[u8]>,
    inflate: Box<InflateBuffers<WINDOW>>,
}

impl Buffers {
    pub(crate) fn new() -> Buffers {
        Buffers {
            head: vec![0; HEAD_BUF].into_boxed_slice(),
            inflate: Box::new(InflateBuffers::new()),
        }
    }
}

/// Why an exchange failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Encoding the request.
    Encode(EncodeError),
    /// The socket.
    Io(io::Error),
    /// The response bytes.
    Decode(DecodeError),
}

impl Failure {
    /// True when the server can not have seen the request, so it is safe to send it
    /// again on a fresh connection: a kept-alive connection the server had already
    /// closed fails on write, or gives EOF / reset before a single response byte.
    fn is_stale_connection(&self) -> bool {
        match self {
            Failure::Io(e) => matches!(
                e.kind(),
                io::ErrorKind::BrokenPipe
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
            ),
            Failure::Decode(DecodeError::UnexpectedEof {
                section: Section::NoResponse,
            }) => true,
            _ => false,
        }
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        Failure::Io(e)
    }
}

impl From<DecodeError> for Failure {
    fn from(e: DecodeError) -> Failure {
        Failure::Decode(e)
    }
}

/// A connection with what was read but not yet decoded.
#[derive(Debug)]
pub(crate) struct Connection {
    stream: Stream,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// Completed at least one exchange: the server may have closed it since.
    reused: bool,
}

impl Connection {
    /// True when the peer closed its side or sent bytes nobody asked for (a TLS alert,
    /// say): either way the connection must not carry another request. A non-blocking
    /// peek, so a live idle connection costs one syscall.
    fn closed_by_peer(&self) -> bool {
        let tcp = self.stream.tcp();
        if tcp.set_nonblocking(true).is_err() {
            return true;
        }
        let mut byte = [0u8; 1];
        let verdict =
            !matches!(tcp.peek(&mut byte), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
        tcp.set_nonblocking(false).is_err() || verdict
    }
}

/// Where to connect and how.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) tls: Option<Tls>,
    pub(crate) connect_timeout: Duration,
}

impl Endpoint {
    fn connect(&self) -> io::Result<Connection> {
        let stream = Stream::connect(
            &self.host,
            self.port,
            self.tls.as_ref(),
            self.connect_timeout,
        )?;
        Ok(Connection {
            stream,
            buf: vec![0; READ_BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            reused: false,
        })
    }
}

/// A request as the exchange sends it: its head fields and a body writer.
pub(crate) struct Outgoing<'a> {
    pub(crate) method: Method,
    /// Path and query, already encoded.
    pub(crate) target: &'a str,
    pub(crate) host: &'a str,
    pub(crate) user_agent: &'a str,
    pub(crate) bearer: Option<&'a str>,
    pub(crate) body: Body<'a>,
    /// Writes the body bytes (nothing for an empty body).
    pub(crate) write_body: &'a dyn Fn(&mut dyn Write) -> io::Result<()>,
}

/// What the caller needs of a response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeadInfo {
    pub(crate) status: u16,
    pub(crate) encoding: ContentEncoding,
}

/// A response being read; the body comes through [`Exchange::pump`].
pub(crate) struct Exchange<'c> {
    conn: &'c mut Option<Connection>,
    decoder: ResponseDecoder<'c>,
    ended: bool,
}

/// Sends `out` on the kept-alive connection (or a new one) and reads the response head.
/// A stale kept-alive connection is replaced and the request sent once more.
pub(crate) fn exchange<'c>(
    endpoint: &Endpoint,
    conn: &'c mut Option<Connection>,
    bufs: &'c mut Buffers,
    out: &Outgoing<'_>,
    reply_timeout: Option<Duration>,
) -> Result<(Exchange<'c>, HeadInfo), Failure> {
    let head_bytes = encode_head(out).map_err(Failure::Encode)?;
    let mut decoder =
        ResponseDecoder::new(&mut bufs.head, Some(bufs.inflate.memory()), Limits::DEFAULT);
    decoder.set_request_method(out.method);
    // A kept-alive connection the server has closed (or is closing) is replaced before
    // anything is sent on it, so a request that is not safe to repeat is sent once.
    if conn.as_ref().is_some_and(Connection::closed_by_peer) {
        *conn = None;
    }
    let idempotent = matches!(out.method, Method::Get | Method::Head);
    let mut attempt = 0;
    loop {
        attempt += 1;
        if conn.is_none() {
            *conn = Some(endpoint.connect()?);
        }
        let result = match conn.as_mut() {
            Some(c) => send_and_read_head(c, &mut decoder, &head_bytes, out, reply_timeout),
            None => continue,
        };
        match result {
            Ok(head) => {
                return Ok((
                    Exchange {
                        conn,
                        decoder,
                        ended: false,
                    },
                    head,
                ))
            }
            Err(e) => {
                let retry = attempt == 1
                    && idempotent
                    && conn.as_ref().is_some_and(|c| c.reused)
                    && e.is_stale_connection();
                *conn = None;
                decoder.reset();
                if !retry {
                    return Err(e);
                }
            }
        }
    }
}

fn encode_head(out: &Outgoing<'_>) -> Result<Vec<u8>, EncodeError> {
    let head = RequestHead {
        method: out.method,
        path: out.target,
        host: out.host,
        user_agent: out.user_agent,
        bearer: out.bearer,
        body: out.body,
        keep_alive: true,
    };
    encode_to_vec(|c| head.encode(&(), c))
}

fn send_and_read_head(
    c: &mut Connection,
    decoder: &mut ResponseDecoder<'_>,
    head: &[u8],
    out: &Outgoing<'_>,
    reply_timeout: Option<Duration>,
) -> Result<HeadInfo, Failure> {
    {
        let mut w = BufWriter::with_capacity(16 * 1024, &mut c.stream);
        w.write_all(head)?;
        (out.write_body)(&mut w)?;
        w.flush()?;
    }
    c.stream.set_read_timeout(reply_timeout)?;
    loop {
        let input = c.buf.get(c.start..c.end).unwrap_or_default();
        let (used, event) = decoder.decode(input)?;
        c.start += used;
        match event {
            Event::Head(h) => {
                return Ok(HeadInfo {
                    status: h.status,
                    encoding: h.encoding,
                })
            }
            Event::NeedMore => {
                if !fill(c)? {
                    decoder.finish()?;
                    return Err(Failure::Decode(DecodeError::UnexpectedEof {
                        section: Section::NoResponse,
                    }));
                }
            }
            Event::Data(_) | Event::End { .. } => {
                return Err(Failure::Decode(DecodeError::MalformedHead {
                    what: "body before head",
                }))
            }
        }
    }
}

/// Reads the next bytes into the (fully consumed) buffer; false at end of stream.
fn fill(c: &mut Connection) -> io::Result<bool> {
    c.start = 0;
    c.end = 0;
    loop {
        match c.stream.read(&mut c.buf) {
            Ok(n) => {
                c.end = n;
                return Ok(n > 0);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

impl Exchange<'_> {
    /// Sets how long a body read may wait for the next bytes (`None`: forever).
    pub(crate) fn set_idle_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        match self.conn.as_ref() {
            Some(c) => c.stream.set_read_timeout(timeout),
            None => Ok(()),
        }
    }

    /// Decodes body bytes until at least one piece of body went to `sink` or the body
    /// ended; returns `true` once it ended. Then the connection is kept for the next
    /// exchange if the server allows it, and dropped otherwise.
    pub(crate) fn pump(&mut self, sink: &mut dyn FnMut(&[u8])) -> Result<bool, Failure> {
        if self.ended {
            return Ok(true);
        }
        let result = self.pump_inner(sink);
        if !matches!(result, Ok(false)) {
            self.ended = true;
        }
        if result.is_err() {
            *self.conn = None;
        }
        result
    }

    fn pump_inner(&mut self, sink: &mut dyn FnMut(&[u8])) -> Result<bool, Failure> {
        let Some(c) = self.conn.as_mut() else {
            return Ok(true);
        };
        loop {
            // The decoder speaks first: a body whose last byte already arrived ends
            // without waiting for more input.
            let input = c.buf.get(c.start..c.end).unwrap_or_default();
            let (used, event) = self.decoder.decode(input)?;
            c.start += used;
            match event {
                Event::Data(d) => {
                    sink(d);
                    return Ok(false);
                }
                Event::End { keep_alive, .. } => {
                    // Bytes the server sent beyond its response would corrupt the next
                    // one: such a connection is not reused.
                    if keep_alive && c.start == c.end {
                        c.reused = true;
                    } else {
                        *self.conn = None;
                    }
                    return Ok(true);
                }
                Event::NeedMore => {
                    if !fill(c)? {
                        // The peer closed: the end of a close-delimited body, or an error.
                        loop {
                            match self.decoder.finish()? {
                                Event::Data(d) => sink(d),
                                Event::End { .. } => {
                                    *self.conn = None;
                                    return Ok(true);
                                }
                                Event::Head(_) | Event::NeedMore => {}
                            }
                        }
                    }
                }
                Event::Head(_) => {}
            }
        }
    }

    /// Reads the rest of the body into `body`, failing past `max` bytes.
    pub(crate) fn read_to_end(&mut self, body: &mut Vec<u8>, max: usize) -> Result<(), Failure> {
        let mut too_large = false;
        while !self.pump(&mut |d| {
            if body.len() + d.len() > max {
                too_large = true;
            } else {
                body.extend_from_slice(d);
            }
        })? {
            if too_large {
                *self.conn = None;
                return Err(Failure::Decode(DecodeError::BodyTooLarge {
                    max: max as u64,
                }));
            }
        }
        Ok(())
    }
}

impl Drop for Exchange<'_> {
    /// A response dropped before its end leaves unread bytes on the connection.
    fn drop(&mut self) {
        if !self.ended {
            *self.conn = None;
        }
    }
}

/// Runs one of core's writers into a fresh `Vec`, growing it until the output fits (up
/// to 1 MiB: heads are small, but a query may carry many environment variables).
pub(crate) fn encode_to_vec(
    write: impl Fn(&mut Cursor<'_>) -> Result<(), EncodeError>,
) -> Result<Vec<u8>, EncodeError> {
    let mut size = 512;
    loop {
        let mut bytes = vec![0; size];
        let mut cursor = Cursor::new(&mut bytes);
        match write(&mut cursor) {
            Ok(()) => {
                let n = cursor.len();
                bytes.truncate(n);
                return Ok(bytes);
            }
            Err(EncodeError::BufferTooSmall { .. }) if size < 1 << 20 => size *= 4,
            Err(e) => return Err(e),
        }
    }
}

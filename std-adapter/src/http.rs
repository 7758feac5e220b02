//! One HTTP/1.1 exchange at a time over a kept-alive [`Stream`], driven by the core's
//! push-style codec: this module only moves bytes between the socket and
//! `benchlink_core::http`, which does all the parsing. What follows each attempt — keep
//! the connection, send a `GET` again after a stale one, read a reply that came before
//! the request was all out — is core's [`Attempts`], the rules of every benchmark
//! client, and its failures are core's [`ClientError`].

use std::io::{self, BufWriter, Read, Write};
use std::time::{Duration, Instant};

use benchlink_core::bench::exchange::{After, Attempts, ClientError, Next, Timeouts, Waiting};
use benchlink_core::http::{
    Body, ContentEncoding, Cursor, DecodeError, EncodeError, Event, InflateBuffers, Limits, Method,
    RequestHead, ResponseDecoder, Section,
};

use crate::net::{tunnel, Stream, Tls};

/// The size of the buffer socket reads go into (a stream at full speed fills it on
/// every read: larger means fewer system calls).
const READ_BUF: usize = 64 * 1024;
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

/// Why an exchange failed: core's error of every benchmark client, the socket's
/// `io::Error`s (connect, and I/O once connected) kept whole for the message. (Only
/// its transport-side variants occur here: the server's answer is read by the caller.)
pub(crate) type Failure = ClientError<'static, io::Error, io::Error>;

/// A connection with what was read but not yet decoded.
#[derive(Debug)]
pub(crate) struct HttpConnection {
    stream: Stream,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// Completed at least one exchange: the server may have closed it since.
    reused: bool,
    /// The current request did not all go out (the server answered early and closed):
    /// the connection cannot carry another.
    unsent: bool,
    /// The socket's mode and read timeout as last set, so that they are changed only
    /// when they have to be (each change is a system call).
    nonblocking: bool,
    read_timeout: Option<Duration>,
}

impl HttpConnection {
    fn new(stream: Stream) -> HttpConnection {
        HttpConnection {
            stream,
            buf: vec![0; READ_BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            reused: false,
            unsent: false,
            nonblocking: false,
            read_timeout: None,
        }
    }

    fn set_nonblocking(&mut self, on: bool) -> io::Result<()> {
        if self.nonblocking != on {
            self.stream.tcp().set_nonblocking(on)?;
            self.nonblocking = on;
        }
        Ok(())
    }

    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        if self.read_timeout != timeout {
            self.stream.set_read_timeout(timeout)?;
            self.read_timeout = timeout;
        }
        Ok(())
    }

    /// True when the peer closed its side or sent bytes nobody asked for (a TLS alert,
    /// say): either way the connection must not carry another request. A non-blocking
    /// peek, so a live idle connection costs one syscall.
    fn closed_by_peer(&mut self) -> bool {
        if self.set_nonblocking(true).is_err() {
            return true;
        }
        let mut byte = [0u8; 1];
        !matches!(self.stream.tcp().peek(&mut byte), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }
}

/// Where to connect and how.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) tls: Option<Tls>,
    pub(crate) connect_timeout: Duration,
    /// An HTTPS proxy `(host, port)` to tunnel through with `CONNECT`.
    pub(crate) proxy: Option<(String, u16)>,
}

impl Endpoint {
    /// Connects within the connect timeout or what is left of the request's deadline,
    /// whichever is shorter.
    fn connect(&self, deadline: &Deadline) -> Result<HttpConnection, Failure> {
        let (timeout, waiting) = match deadline.left() {
            Some(left) if left < self.connect_timeout => (left, deadline.limit),
            _ => (self.connect_timeout, Some(self.connect_timeout)),
        };
        if timeout.is_zero() {
            return Err(deadline.timed_out(Waiting::Connect));
        }
        let stream = match &self.proxy {
            None => Stream::connect(&self.host, self.port, self.tls.as_ref(), timeout),
            Some((proxy_host, proxy_port)) => {
                tunnel(proxy_host, *proxy_port, &self.host, self.port, timeout)
                    .map_err(io::Error::from)
                    .and_then(|tcp| Stream::over(tcp, &self.host, self.tls.as_ref()))
            }
        };
        match stream {
            Ok(stream) => Ok(HttpConnection::new(stream)),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                ) =>
            {
                Err(ClientError::Timeout {
                    after: waiting.unwrap_or(timeout),
                    waiting: Waiting::Connect,
                })
            }
            Err(e) => Err(ClientError::Connect(e)),
        }
    }
}

/// The end of a request's time, if it has one.
#[derive(Debug, Clone, Copy)]
struct Deadline {
    at: Option<Instant>,
    limit: Option<Duration>,
}

impl Deadline {
    fn starting_now(limit: Option<Duration>) -> Deadline {
        Deadline {
            at: limit.and_then(|l| Instant::now().checked_add(l)),
            limit,
        }
    }

    /// The time left (`None`: no deadline).
    fn left(&self) -> Option<Duration> {
        self.at
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    fn timed_out(&self, waiting: Waiting) -> Failure {
        ClientError::Timeout {
            after: self.limit.unwrap_or_default(),
            waiting,
        }
    }
}

/// A request as the exchange sends it: its head fields and a body writer.
pub(crate) struct RequestParts<'a> {
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

/// What one [`Exchange::pump`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pumped {
    /// Body went to the sink (every piece of it the received bytes held).
    Data,
    /// Everything received so far is decoded and the socket has nothing more to read
    /// right now (only when asked not to wait): the moment to flush what was made of it.
    Idle,
    /// The body ended.
    End,
}

/// How a body read may wait for bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Up to the request's deadline (JSON replies).
    Deadline,
    /// Up to the stream's idle limit.
    Idle,
    /// Not at all: [`Pumped::Idle`] when nothing is there.
    No,
}

/// A response being read; the body comes through [`Exchange::pump`].
pub(crate) struct Exchange<'c> {
    conn: &'c mut Option<HttpConnection>,
    decoder: ResponseDecoder<'c>,
    ended: bool,
    deadline: Deadline,
    idle: Option<Duration>,
}

/// Sends `out` on the kept-alive connection (or a new one) and reads the response head,
/// by the rules of core's [`Attempts`] that every benchmark client follows: a stale
/// kept-alive connection is replaced and a `GET` sent once more, and a reply sent
/// before the request was all out is read, not lost.
pub(crate) fn exchange<'c>(
    endpoint: &Endpoint,
    conn: &'c mut Option<HttpConnection>,
    bufs: &'c mut Buffers,
    out: &RequestParts<'_>,
    limits: Timeouts,
) -> Result<(Exchange<'c>, HeadInfo), Failure> {
    let deadline = Deadline::starting_now(limits.reply);
    let head_bytes = encode_head(out).map_err(ClientError::Encode)?;
    let mut decoder =
        ResponseDecoder::new(&mut bufs.head, Some(bufs.inflate.memory()), Limits::DEFAULT);
    decoder.set_request_method(out.method);
    // A kept-alive connection the server has closed (or is closing) is replaced before
    // anything is sent on it, so a request that is not safe to repeat is sent once.
    if conn.as_mut().is_some_and(HttpConnection::closed_by_peer) {
        *conn = None;
    }
    let mut attempts = Attempts::new(out.method);
    loop {
        if conn.is_none() {
            *conn = Some(endpoint.connect(&deadline)?);
        }
        let Some(c) = conn.as_mut() else { continue };
        let reused = c.reused;
        let sent = send(c, &head_bytes, out, &deadline);
        // A server may answer before the body is in and close (413 for a body over its
        // limit, 401, 503): the unsent rest then meets a broken pipe or a reset, but
        // the reply was sent first and is read like any other.
        let mut got_response = false;
        let (received, head) = match Attempts::read_after(&sent)
            .then(|| read_head(c, &mut decoder, &deadline, &mut got_response))
        {
            Some(Ok(head)) => (Some(Ok(After::Keep)), Some(head)),
            Some(Err(e)) => (Some(Err(e)), None),
            None => (None, None),
        };
        match (attempts.next(sent, received, reused, got_response), head) {
            (Next::Done(after), Some(head)) => {
                // `Close`: the request did not all go out, so the connection cannot
                // carry another.
                c.unsent = after == After::Close;
                return Ok((
                    Exchange {
                        conn,
                        decoder,
                        ended: false,
                        deadline,
                        idle: limits.stream_idle,
                    },
                    head,
                ));
            }
            (Next::Retry, _) => {
                *conn = None;
                decoder.reset();
            }
            (Next::Fail(e), _) => {
                *conn = None;
                return Err(e);
            }
            // Not reached: a send is always followed by a read that, when it gives a
            // head, gives `Some`.
            (Next::Done(_), None) => {
                *conn = None;
                return Err(ClientError::Decode(DecodeError::UnexpectedEof {
                    section: Section::NoResponse,
                }));
            }
        }
    }
}

fn encode_head(out: &RequestParts<'_>) -> Result<Vec<u8>, EncodeError> {
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

/// Writes the request, head and body, within the deadline.
fn send(
    c: &mut HttpConnection,
    head: &[u8],
    out: &RequestParts<'_>,
    deadline: &Deadline,
) -> Result<(), Failure> {
    c.set_nonblocking(false).map_err(ClientError::Io)?;
    if let Some(left) = deadline.left() {
        if left.is_zero() {
            return Err(deadline.timed_out(Waiting::Send));
        }
    }
    c.stream
        .tcp()
        .set_write_timeout(deadline.left())
        .map_err(ClientError::Io)?;
    let sent = (|| {
        let mut w = BufWriter::with_capacity(16 * 1024, &mut c.stream);
        w.write_all(head)?;
        (out.write_body)(&mut w)?;
        w.flush()
    })();
    sent.map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => deadline.timed_out(Waiting::Send),
        _ => ClientError::Io(e),
    })
}

/// Reads the response head (the bytes after it stay in the connection's buffer);
/// `got_bytes` tells whether any byte of a response arrived.
fn read_head(
    c: &mut HttpConnection,
    decoder: &mut ResponseDecoder<'_>,
    deadline: &Deadline,
    got_bytes: &mut bool,
) -> Result<HeadInfo, Failure> {
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
            Event::NeedMore => match fill(c, ReadWait::Until(deadline)).map_err(ClientError::Io)? {
                Filled::Bytes => *got_bytes = true,
                Filled::Eof => {
                    decoder.finish()?;
                    return Err(ClientError::Decode(DecodeError::UnexpectedEof {
                        section: Section::NoResponse,
                    }));
                }
                Filled::Nothing | Filled::TimedOut => {
                    return Err(deadline.timed_out(if *got_bytes {
                        Waiting::RestOfReply
                    } else {
                        Waiting::Reply
                    }))
                }
            },
            Event::Data(_) | Event::End { .. } => {
                return Err(ClientError::Decode(DecodeError::MalformedHead {
                    what: "body before head",
                }))
            }
        }
    }
}

/// How [`fill`] may wait.
#[derive(Debug, Clone, Copy)]
enum ReadWait<'d> {
    Until(&'d Deadline),
    For(Option<Duration>),
    No,
}

/// What [`fill`] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Filled {
    Bytes,
    Eof,
    /// Nothing there right now ([`ReadWait::No`]).
    Nothing,
    /// The wait ran out.
    TimedOut,
}

/// Reads the next bytes into the (fully consumed) buffer.
fn fill(c: &mut HttpConnection, wait: ReadWait<'_>) -> io::Result<Filled> {
    c.start = 0;
    c.end = 0;
    match wait {
        ReadWait::No => c.set_nonblocking(true)?,
        ReadWait::For(idle) => {
            c.set_nonblocking(false)?;
            c.set_read_timeout(idle)?;
        }
        ReadWait::Until(deadline) => {
            c.set_nonblocking(false)?;
            let left = deadline.left();
            if left.is_some_and(|l| l.is_zero()) {
                return Ok(Filled::TimedOut);
            }
            c.set_read_timeout(left)?;
        }
    }
    loop {
        match c.stream.read(&mut c.buf) {
            Ok(n) => {
                c.end = n;
                return Ok(if n > 0 { Filled::Bytes } else { Filled::Eof });
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(if c.nonblocking {
                    Filled::Nothing
                } else {
                    Filled::TimedOut
                })
            }
            Err(e) => return Err(e),
        }
    }
}

impl Exchange<'_> {
    /// Decodes body bytes, handing every piece to `sink`, until the bytes received so
    /// far are used up after at least one piece, the body ended, or (with [`Wait::No`])
    /// the socket had nothing more to read; waits for bytes as `wait` says. Once the body ended, the connection is kept for the next
    /// exchange if the server allows it, and dropped otherwise.
    pub(crate) fn pump(
        &mut self,
        sink: &mut dyn FnMut(&[u8]),
        wait: Wait,
    ) -> Result<Pumped, Failure> {
        if self.ended {
            return Ok(Pumped::End);
        }
        let result = self.pump_inner(sink, wait);
        if !matches!(result, Ok(Pumped::Data | Pumped::Idle)) {
            self.ended = true;
        }
        if result.is_err() {
            *self.conn = None;
        }
        result
    }

    fn pump_inner(&mut self, sink: &mut dyn FnMut(&[u8]), wait: Wait) -> Result<Pumped, Failure> {
        let Some(c) = self.conn.as_mut() else {
            return Ok(Pumped::End);
        };
        let mut gave = false;
        loop {
            // The decoder speaks first: a body whose last byte already arrived ends
            // without waiting for more input.
            let input = c.buf.get(c.start..c.end).unwrap_or_default();
            let (used, event) = self.decoder.decode(input)?;
            c.start += used;
            match event {
                Event::Data(d) => {
                    sink(d);
                    gave = true;
                }
                Event::NeedMore if gave => return Ok(Pumped::Data),
                Event::End { keep_alive, .. } => {
                    // Bytes the server sent beyond its response would corrupt the next
                    // one: such a connection is not reused.
                    if keep_alive && c.start == c.end && !c.unsent {
                        c.reused = true;
                    } else {
                        *self.conn = None;
                    }
                    return Ok(Pumped::End);
                }
                Event::NeedMore => {
                    let how = match wait {
                        Wait::Deadline => ReadWait::Until(&self.deadline),
                        Wait::Idle => ReadWait::For(self.idle),
                        Wait::No => ReadWait::No,
                    };
                    match fill(c, how).map_err(ClientError::Io)? {
                        Filled::Bytes => {}
                        Filled::Nothing => return Ok(Pumped::Idle),
                        Filled::TimedOut => {
                            return Err(match wait {
                                Wait::Deadline => self.deadline.timed_out(Waiting::RestOfReply),
                                _ => ClientError::Timeout {
                                    after: self.idle.unwrap_or_default(),
                                    waiting: Waiting::StreamData,
                                },
                            })
                        }
                        Filled::Eof => {
                            // The peer closed: the end of a close-delimited body, or an
                            // error.
                            loop {
                                match self.decoder.finish()? {
                                    Event::Data(d) => sink(d),
                                    Event::End { .. } => {
                                        *self.conn = None;
                                        return Ok(Pumped::End);
                                    }
                                    Event::Head(_) | Event::NeedMore => {}
                                }
                            }
                        }
                    }
                }
                Event::Head(_) => {}
            }
        }
    }

    /// Reads the rest of the body into `body` within the request's deadline, failing
    /// past `max` bytes.
    pub(crate) fn read_to_end(&mut self, body: &mut Vec<u8>, max: usize) -> Result<(), Failure> {
        let mut too_large = false;
        while self.pump(
            &mut |d| {
                if body.len() + d.len() > max {
                    too_large = true;
                } else {
                    body.extend_from_slice(d);
                }
            },
            Wait::Deadline,
        )? != Pumped::End
        {
            if too_large {
                *self.conn = None;
                return Err(ClientError::Decode(DecodeError::BodyTooLarge {
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

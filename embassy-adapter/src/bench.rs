//! The async benchmark-server client: every endpoint of [`benchlink_core::bench::request`]
//! through two generic methods, [`BenchClient::call`] (JSON replies) and
//! [`BenchClient::stream`] (log and metric lines), over one kept-alive connection.
//!
//! All memory is the caller's ([`Buffers`]), so the client's own size is a few hundred
//! bytes. Replies are zero-copy views into the body buffer, which is why they (and
//! [`Error::Server`]) borrow the client until dropped.

use core::ops::ControlFlow;

use benchlink_core::bench::{
    self, Body as BenchBody, JsonRequest, LineDecoder, LineFormat, Request, StreamRequest,
};
#[cfg(feature = "deflate")]
use benchlink_core::http::DecompressorOxide;
use benchlink_core::http::{
    Body, Boundary, Cursor, DecodeError, EncodeError, Event, InflateMemory, Limits, Method, Part,
    RequestHead, ResponseDecoder, Section, BOUNDARY_LEN,
};
use embassy_time::{with_deadline, with_timeout, Duration, Instant};
use embedded_io_async::ErrorKind;
use heapless::String;

use crate::transport::{ConnectError, Transport};

/// Longest `Host` header value: a 253-byte DNS name, brackets, colon and port.
pub const MAX_AUTHORITY: usize = 264;

/// Header lines a response head may have (the benchmark server sends about ten).
const MAX_HEADERS: usize = 24;

/// Where the server is and who the client says it is.
#[derive(Clone, Copy)]
pub struct Server<'b> {
    /// Host name or IPv4 address; names go through the stack's DNS client.
    pub host: &'b str,
    /// TCP port (the real server listens on 4800).
    pub port: u16,
    /// Sent as `Authorization: Bearer <token>` with every request.
    pub token: Option<&'b str>,
    /// The `User-Agent` value.
    pub user_agent: &'b str,
}

impl<'b> Server<'b> {
    /// `host:port` without a token, with this crate's user agent.
    pub const fn new(host: &'b str, port: u16) -> Self {
        Server {
            host,
            port,
            token: None,
            user_agent: concat!("benchlink-embassy/", env!("CARGO_PKG_VERSION")),
        }
    }
}

/// The token is a secret: `Debug` shows only whether there is one.
impl core::fmt::Debug for Server<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Server")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("token", &self.token.map(|_| "<redacted>"))
            .field("user_agent", &self.user_agent)
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Server<'_> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "Server {{ host: {=str}, port: {=u16}, token: {=bool} }}",
            self.host,
            self.port,
            self.token.is_some()
        )
    }
}

/// The client's memory. Each buffer's size is a limit:
///
/// - `rx`: socket reads (512 B – 2 KiB; any size works, larger is fewer reads).
/// - `tx`: the request head and multipart part heads (512 B; grows with query length).
/// - `head`: the response head (1 KiB covers the server's heads).
/// - `body`: a JSON reply, and an error body of a stream (the largest reply you read:
///   `/results` of a benchmark with many metrics is the big one).
/// - `line`: the longest log or metric line of a stream.
#[derive(Debug)]
pub struct Buffers<'b> {
    /// Socket reads.
    pub rx: &'b mut [u8],
    /// Request heads.
    pub tx: &'b mut [u8],
    /// Response heads.
    pub head: &'b mut [u8],
    /// JSON reply bodies.
    pub body: &'b mut [u8],
    /// Stream lines.
    pub line: &'b mut [u8],
}

/// How long each step may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Timeouts {
    /// DNS plus TCP connect (within `reply` too, when that is shorter).
    pub connect: Duration,
    /// The whole request: connecting, sending, the response head and, for a JSON call,
    /// the whole body (`None`: no limit). For a stream, everything up to its head.
    pub reply: Option<Duration>,
    /// Silence allowed inside a log or data stream (`None`, the default: a running
    /// benchmark's log can be quiet for long).
    pub stream_idle: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            reply: Some(Duration::from_secs(60)),
            stream_idle: None,
        }
    }
}

/// What a call can fail with. [`Error::Server`] borrows the client's body buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error<'a> {
    /// Opening the connection failed.
    Connect(ConnectError),
    /// The connection failed while sending or receiving.
    Io(ErrorKind),
    /// A limit of [`Timeouts`] passed.
    Timeout {
        /// The limit.
        after: Duration,
        /// What the client was waiting for.
        waiting: Waiting,
    },
    /// The request does not fit the `tx` buffer, or has a value that would break HTTP.
    Encode(EncodeError),
    /// The response is not valid HTTP, was cut short, or is compressed and the client
    /// has no inflate window ([`DecodeError::CompressedBodyUnsupported`]).
    Decode(DecodeError),
    /// A JSON reply larger than the `body` buffer.
    BodyTooLarge {
        /// The body buffer's size.
        max: usize,
    },
    /// More files in a multipart upload than the client writes (see [`MAX_UPLOAD_FILES`]).
    TooManyFiles,
    /// The server answered, but with an error (its `reason_code` and `reason`), or with
    /// a reply of the wrong shape.
    Server(bench::Error<'a>),
}

impl Error<'_> {
    /// The HTTP status when the server answered with something other than 200.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Error::Server(e) => e.http_status(),
            _ => None,
        }
    }
}

impl core::fmt::Display for Error<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Connect(e) => write!(f, "connect: {e}"),
            Error::Io(kind) => write!(f, "connection failed: {kind:?}"),
            Error::Timeout { after, waiting } => {
                let (s, ms) = (after.as_secs(), after.as_millis() % 1000);
                match waiting {
                    Waiting::Connect => f.write_str("could not connect to the server within ")?,
                    Waiting::Reply => f.write_str("no reply from the server within ")?,
                    Waiting::StreamData => f.write_str("no data from the server for ")?,
                }
                if ms == 0 {
                    write!(f, "{s} s")
                } else {
                    write!(f, "{} ms", after.as_millis())
                }
            }
            Error::Encode(e) => write!(f, "request: {e}"),
            Error::Decode(e) => write!(f, "response: {e:?}"),
            Error::BodyTooLarge { max } => write!(f, "reply larger than {max} bytes"),
            Error::TooManyFiles => f.write_str("too many files to upload"),
            Error::Server(e) => write!(f, "{e}"),
        }
    }
}

impl core::error::Error for Error<'_> {}

/// What a timed-out request was waiting for ([`Error::Timeout`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Waiting {
    /// The connection to open.
    Connect,
    /// The server to take the request or to send (all of) its reply.
    Reply,
    /// The next bytes of a stream.
    StreamData,
}

impl From<EncodeError> for Error<'_> {
    fn from(e: EncodeError) -> Self {
        Error::Encode(e)
    }
}

impl From<DecodeError> for Error<'_> {
    fn from(e: DecodeError) -> Self {
        Error::Decode(e)
    }
}

/// Most files in one upload (`/start`: the scenario and its includes).
pub const MAX_UPLOAD_FILES: usize = 16;

/// One piece of a response, as the exchange hands it to its sink.
enum Piece<'a> {
    Head(u16),
    Data(&'a [u8]),
}

/// The async client of one benchmark server over a [`Transport`].
///
/// ```no_run
/// use benchlink_core::bench::request;
/// use benchlink_embassy::bench::{BenchClient, Buffers, Server};
/// use benchlink_embassy::transport::Transport;
///
/// async fn status_of<T: Transport>(transport: T, id: u64) -> Option<bool> {
///     let (mut rx, mut tx, mut head, mut body, mut line) = ([0; 1024], [0; 512], [0; 1024], [0; 2048], [0; 256]);
///     let buffers = Buffers { rx: &mut rx, tx: &mut tx, head: &mut head, body: &mut body, line: &mut line };
///     let mut client = BenchClient::new(transport, Server::new("10.0.0.1", 4800), buffers).ok()?;
///     let status = client.call(&request::Status { id }).await.ok()?;
///     Some(status.status.is_final())
/// }
/// ```
pub struct BenchClient<'b, T> {
    conn: Conn<'b, T>,
    body: &'b mut [u8],
    line: &'b mut [u8],
}

impl<T> core::fmt::Debug for BenchClient<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BenchClient")
            .field("server", &self.conn.server)
            .field("open", &self.conn.open)
            .field("body_len", &self.body.len())
            .field("line_len", &self.line.len())
            .finish_non_exhaustive()
    }
}

/// The connection half of the client: everything an exchange needs, apart from where
/// the body goes.
struct Conn<'b, T> {
    transport: T,
    server: Server<'b>,
    authority: String<MAX_AUTHORITY>,
    rx: &'b mut [u8],
    start: usize,
    end: usize,
    tx: &'b mut [u8],
    head: &'b mut [u8],
    /// Validated once (`with_inflate`), re-borrowed for each response. Without the
    /// `deflate` feature this is always `None` (the type has no values).
    inflate: Option<InflateMemory<'b>>,
    open: bool,
    /// The open connection completed an exchange: the server may have closed it since.
    reused: bool,
    timeouts: Timeouts,
    /// xorshift state for multipart boundaries.
    seed: u64,
}

impl<'b, T: Transport> BenchClient<'b, T> {
    /// A client of `server`. Fails when the `Host` value would be longer than
    /// [`MAX_AUTHORITY`].
    pub fn new(transport: T, server: Server<'b>, buffers: Buffers<'b>) -> Result<Self, Error<'b>> {
        let authority = authority(server.host, server.port)?;
        let seed = embassy_time::Instant::now().as_ticks() | 1;
        Ok(BenchClient {
            conn: Conn {
                transport,
                server,
                authority,
                rx: buffers.rx,
                start: 0,
                end: 0,
                tx: buffers.tx,
                head: buffers.head,
                inflate: None,
                open: false,
                reused: false,
                timeouts: Timeouts::default(),
                seed,
            },
            body: buffers.body,
            line: buffers.line,
        })
    }

    /// Inflates `deflate` and `gzip` bodies (the server's `/log` and `/userlog` are
    /// zlib-compressed whatever the client asks) into `window`, a power of two of at
    /// least 256 bytes; the server's zlib streams need 32 KiB. Without a window a
    /// compressed body fails with [`DecodeError::CompressedBodyUnsupported`].
    ///
    /// Only with the `deflate` feature (default): without it no inflate code is linked.
    #[cfg(feature = "deflate")]
    pub fn with_inflate(
        mut self,
        state: &'b mut DecompressorOxide,
        window: &'b mut [u8],
    ) -> Result<Self, Error<'b>> {
        // Validated once here; each response re-borrows the same memory.
        self.conn.inflate = Some(InflateMemory::new(state, window)?);
        Ok(self)
    }

    /// Replaces the default [`Timeouts`].
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.conn.timeouts = timeouts;
        self
    }

    /// The std client's and the CLI's `--timeout`: `timeout` is both the whole-request
    /// limit of JSON calls ([`Timeouts::reply`], default 60 s) and the idle limit of
    /// streams ([`Timeouts::stream_idle`], default none).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.conn.timeouts.reply = Some(timeout);
        self.conn.timeouts.stream_idle = Some(timeout);
        self
    }

    /// Seeds the multipart boundary generator (default: the boot-relative clock).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.conn.seed = seed | 1;
        self
    }

    /// The transport, e.g. to close it or reuse it after the client.
    pub fn into_transport(self) -> T {
        self.conn.transport
    }

    /// Closes the kept-alive connection, if any.
    pub async fn close(&mut self) {
        self.conn.drop_connection().await;
    }

    /// Sends `req` and reads its JSON reply: the typed reply, a zero-copy view into the
    /// body buffer, or the server's typed error.
    ///
    /// A kept-alive connection the server closed meanwhile is replaced, and a `GET` that
    /// met a stale connection before any response byte is sent once more.
    pub async fn call<R: JsonRequest>(&mut self, req: &R) -> Result<R::Reply<'_>, Error<'_>> {
        let body = &mut *self.body;
        let max = body.len();
        let mut len = 0usize;
        let mut status = 0u16;
        let mut overflow = false;
        self.conn
            .exchange(req, false, &mut |piece| match piece {
                Piece::Head(s) => {
                    status = s;
                    ControlFlow::Continue(())
                }
                Piece::Data(d) => match len
                    .checked_add(d.len())
                    .and_then(|end| body.get_mut(len..end))
                {
                    Some(dst) => {
                        dst.copy_from_slice(d);
                        len += d.len();
                        ControlFlow::Continue(())
                    }
                    None => {
                        overflow = true;
                        ControlFlow::Break(())
                    }
                },
            })
            .await?;
        let body = self.body.get(..len).unwrap_or_default();
        if overflow && status == 200 {
            return Err(Error::BodyTooLarge { max });
        }
        // An oversized error body is read as far as it fits: enough to classify it.
        R::read_reply(status, body).map_err(Error::Server)
    }

    /// Sends a stream request (`/log`, `/userlog`, `/data`, `/server_logs`) and hands
    /// every line to `on_line` as it arrives (decoded per `R::Format`: `&str` log lines,
    /// typed metric samples; a bad line is an `Err` item and the stream goes on), until
    /// the stream ends or `on_line` breaks (the connection is then dropped). A non-200
    /// answer is the server's typed error.
    ///
    /// The server's `/data` does not answer for a `failed` benchmark: check `/status`
    /// first, or set [`Timeouts::stream_idle`].
    pub async fn stream<R, F>(&mut self, req: &R, mut on_line: F) -> Result<(), Error<'_>>
    where
        R: StreamRequest,
        F: FnMut(
            Result<<R::Format as LineFormat>::Item<'_>, <R::Format as LineFormat>::Error<'_>>,
        ) -> ControlFlow<()>,
    {
        let body = &mut *self.body;
        let mut lines = LineDecoder::<R::Format>::new(self.line);
        let mut err_len = 0usize;
        let mut status = 0u16;
        let mut stopped = false;
        self.conn
            .exchange(req, true, &mut |piece| match piece {
                Piece::Head(s) => {
                    status = s;
                    ControlFlow::Continue(())
                }
                Piece::Data(mut d) if status == 200 => {
                    while let Some(line) = lines.next(&mut d) {
                        if on_line(line).is_break() {
                            stopped = true;
                            return ControlFlow::Break(());
                        }
                    }
                    ControlFlow::Continue(())
                }
                Piece::Data(d) => {
                    // An error reply: keep what fits, for its reason.
                    let room = body.len().saturating_sub(err_len);
                    let take = d.get(..room.min(d.len())).unwrap_or_default();
                    if let Some(dst) = body.get_mut(err_len..err_len + take.len()) {
                        dst.copy_from_slice(take);
                    }
                    err_len += take.len();
                    ControlFlow::Continue(())
                }
            })
            .await?;
        if status != 200 {
            let body = self.body.get(..err_len).unwrap_or_default();
            return Err(Error::Server(bench::Error::from_reply(status, body)));
        }
        if !stopped {
            if let Some(last) = lines.finish() {
                let _ = on_line(last);
            }
        }
        Ok(())
    }
}

/// `host` or `host:port` (with brackets for IPv6), as the `Host` header wants it.
fn authority(host: &str, port: u16) -> Result<String<MAX_AUTHORITY>, EncodeError> {
    let mut buf = [0u8; MAX_AUTHORITY];
    let mut out = Cursor::new(&mut buf);
    let v6 = host.contains(':');
    if v6 {
        out.push(b"[")?;
    }
    out.push_str(host)?;
    if v6 {
        out.push(b"]")?;
    }
    if port != 80 {
        out.push(b":")?;
        out.push_u64(u64::from(port))?;
    }
    let text = core::str::from_utf8(out.written())
        .map_err(|_| EncodeError::InvalidValue { field: "host" })?;
    String::try_from(text).map_err(|()| EncodeError::BufferTooSmall {
        capacity: MAX_AUTHORITY,
    })
}

/// The media type the official client gives a part's file name (it matters only to
/// humans reading the upload; the server ignores it).
fn content_type(filename: &str) -> &'static str {
    let ext = filename.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    let is = |e: &str| ext.eq_ignore_ascii_case(e);
    if is("txt") {
        "text/plain"
    } else if is("json") {
        "application/json"
    } else if is("csv") {
        "text/csv"
    } else {
        "application/octet-stream"
    }
}

/// The files of a multipart body, `bench` first.
fn for_each_file<'a>(
    bench: bench::request::File<'a>,
    includes: &'a [bench::request::File<'a>],
) -> impl Iterator<Item = (&'static str, bench::request::File<'a>)> + 'a {
    core::iter::once(("bench", bench)).chain(includes.iter().map(|f| ("include", *f)))
}

fn part<'a>(name: &'a str, file: &bench::request::File<'a>) -> Part<'a> {
    Part {
        name,
        filename: file.name,
        content_type: content_type(file.name),
        len: file.content.len() as u64,
    }
}

fn io_error<E: embedded_io_async::Error>(e: E) -> Error<'static> {
    Error::Io(e.kind())
}

impl<T: Transport> Conn<'_, T> {
    async fn drop_connection(&mut self) {
        if self.open {
            self.transport.close().await;
        }
        self.open = false;
        self.reused = false;
        self.start = 0;
        self.end = 0;
    }

    /// A boundary that occurs in none of the files (a random one almost never does; the
    /// check makes it certain).
    fn boundary(
        &mut self,
        bench: bench::request::File<'_>,
        includes: &[bench::request::File<'_>],
    ) -> Boundary {
        loop {
            let mut random = [0u8; BOUNDARY_LEN];
            for b in random.iter_mut() {
                self.seed ^= self.seed << 13;
                self.seed ^= self.seed >> 7;
                self.seed ^= self.seed << 17;
                *b = (self.seed >> 24) as u8;
            }
            let boundary = Boundary::from_random(random);
            let needle = boundary.as_str().as_bytes();
            if !for_each_file(bench, includes)
                .any(|(_, f)| f.content.windows(needle.len()).any(|w| w == needle))
            {
                return boundary;
            }
        }
    }

    /// Writes the request head for `req` into `tx`; returns its length and the boundary
    /// of a multipart body.
    fn encode_head<R: Request>(
        &mut self,
        req: &R,
    ) -> Result<(usize, Option<Boundary>), Error<'static>> {
        let (boundary, body) = match req.body() {
            BenchBody::Empty => (None, None),
            BenchBody::Multipart { bench, includes } => {
                if includes.len() >= MAX_UPLOAD_FILES {
                    return Err(Error::TooManyFiles);
                }
                let boundary = self.boundary(bench, includes);
                // content_length is additive over parts apart from the closing
                // delimiter, so parts are measured one at a time (no array of parts).
                let closing = boundary.content_length(&[])?;
                let mut len = closing;
                for (name, file) in for_each_file(bench, includes) {
                    let one = boundary.content_length(&[part(name, &file)])?;
                    len = len.saturating_add(one.saturating_sub(closing));
                }
                (Some(boundary), Some(len))
            }
        };
        let head = RequestHead {
            method: R::METHOD,
            path: R::PATH,
            host: &self.authority,
            user_agent: self.server.user_agent,
            bearer: self.server.token,
            body: match (&boundary, body) {
                (Some(boundary), Some(len)) => Body::Multipart { boundary, len },
                _ => Body::Empty,
            },
            keep_alive: true,
        };
        let mut out = Cursor::new(self.tx);
        head.encode(req, &mut out)?;
        Ok((out.len(), boundary))
    }

    async fn write_all(&mut self, bytes: &[u8]) -> Result<(), Error<'static>> {
        embedded_io_async::Write::write_all(&mut self.transport, bytes)
            .await
            .map_err(io_error)
    }

    /// Sends the head (already in `tx[..head_len]`) and the body.
    async fn send<R: Request>(
        &mut self,
        req: &R,
        head_len: usize,
        boundary: Option<&Boundary>,
    ) -> Result<(), Error<'static>> {
        let head = self.tx.get(..head_len).unwrap_or_default();
        embedded_io_async::Write::write_all(&mut self.transport, head)
            .await
            .map_err(io_error)?;
        if let (BenchBody::Multipart { bench, includes }, Some(boundary)) = (req.body(), boundary) {
            for (name, file) in for_each_file(bench, includes) {
                let mut out = Cursor::new(self.tx);
                boundary.part_head(&part(name, &file), &mut out)?;
                let n = out.len();
                let bytes = self.tx.get(..n).unwrap_or_default();
                embedded_io_async::Write::write_all(&mut self.transport, bytes)
                    .await
                    .map_err(io_error)?;
                self.write_all(file.content).await?;
                self.write_all(b"\r\n").await?;
            }
            let mut out = Cursor::new(self.tx);
            boundary.closing(&mut out)?;
            let n = out.len();
            let bytes = self.tx.get(..n).unwrap_or_default();
            embedded_io_async::Write::write_all(&mut self.transport, bytes)
                .await
                .map_err(io_error)?;
        }
        embedded_io_async::Write::flush(&mut self.transport)
            .await
            .map_err(io_error)
    }

    /// One request and its response, the body going to `sink` piece by piece. Any
    /// failure, or a sink that breaks, drops the connection (its framing is unknown).
    async fn exchange<R: Request>(
        &mut self,
        req: &R,
        stream: bool,
        sink: &mut dyn FnMut(Piece<'_>) -> ControlFlow<()>,
    ) -> Result<(), Error<'static>> {
        let (head_len, boundary) = self.encode_head(req)?;
        if self.open && self.transport.peer_closed() {
            self.drop_connection().await;
        }
        let idempotent = matches!(R::METHOD, Method::Get | Method::Head);
        let mut retried = false;
        let reply = self.timeouts.reply;
        let deadline = reply.map(|t| Instant::now().saturating_add(t));
        let timed_out = |waiting| Error::Timeout {
            after: reply.unwrap_or_default(),
            waiting,
        };
        loop {
            if !self.open {
                let (host, port) = (self.server.host, self.server.port);
                let connect = self.timeouts.connect;
                let by_deadline =
                    deadline.is_some_and(|d| d < Instant::now().saturating_add(connect));
                let connected = match deadline {
                    Some(d) if by_deadline => with_deadline(d, self.transport.connect(host, port))
                        .await
                        .map_err(|_| timed_out(Waiting::Connect))?,
                    _ => with_timeout(connect, self.transport.connect(host, port))
                        .await
                        .map_err(|_| Error::Connect(ConnectError::TimedOut))?,
                };
                connected.map_err(Error::Connect)?;
                self.open = true;
                self.reused = false;
                self.start = 0;
                self.end = 0;
            }
            let reused = self.reused;
            let mut got_response = false;
            // A TCP flush waits for the peer's acknowledgement: bound it like a reply.
            let sent = match deadline {
                Some(d) => with_deadline(d, self.send(req, head_len, boundary.as_ref()))
                    .await
                    .unwrap_or(Err(timed_out(Waiting::Reply))),
                None => self.send(req, head_len, boundary.as_ref()).await,
            };
            let result = match sent {
                Ok(()) => {
                    self.receive(R::METHOD, stream, deadline, sink, &mut got_response)
                        .await
                }
                Err(e) => Err(e),
            };
            match result {
                Ok(After::Keep) => {
                    self.reused = true;
                    return Ok(());
                }
                Ok(After::Close) => {
                    self.drop_connection().await;
                    return Ok(());
                }
                Err(e) => {
                    self.drop_connection().await;
                    let stale = matches!(
                        e,
                        Error::Io(_)
                            | Error::Decode(DecodeError::UnexpectedEof {
                                section: Section::NoResponse
                            })
                    );
                    if retried || !reused || !idempotent || got_response || !stale {
                        return Err(e);
                    }
                    retried = true;
                }
            }
        }
    }

    async fn receive(
        &mut self,
        method: Method,
        stream: bool,
        deadline: Option<Instant>,
        sink: &mut dyn FnMut(Piece<'_>) -> ControlFlow<()>,
        got_response: &mut bool,
    ) -> Result<After, Error<'static>> {
        let Conn {
            transport,
            rx,
            start,
            end,
            head,
            inflate,
            timeouts,
            ..
        } = self;
        let inflate = inflate.as_mut().map(InflateMemory::reborrow);
        let mut decoder: ResponseDecoder<'_, MAX_HEADERS> =
            ResponseDecoder::new(head, inflate, Limits::DEFAULT);
        decoder.set_request_method(method);
        let mut head_seen = false;
        loop {
            let input = rx.get(*start..*end).unwrap_or_default();
            let (used, event) = decoder.decode(input)?;
            *start += used;
            match event {
                Event::Head(h) => {
                    head_seen = true;
                    if sink(Piece::Head(h.status)).is_break() {
                        return Ok(After::Close);
                    }
                }
                Event::Data(d) => {
                    if sink(Piece::Data(d)).is_break() {
                        return Ok(After::Close);
                    }
                }
                Event::End { keep_alive, .. } => {
                    // Bytes beyond the response would corrupt the next one.
                    return Ok(if keep_alive && *start == *end {
                        After::Keep
                    } else {
                        After::Close
                    });
                }
                Event::NeedMore => {
                    // A stream's body may be silent for long (up to its idle limit);
                    // everything else is within the request's deadline.
                    *start = 0;
                    *end = 0;
                    let read = embedded_io_async::Read::read(transport, rx);
                    let n = if stream && head_seen {
                        match timeouts.stream_idle {
                            Some(t) => with_timeout(t, read).await.map_err(|_| Error::Timeout {
                                after: t,
                                waiting: Waiting::StreamData,
                            })?,
                            None => read.await,
                        }
                    } else {
                        match deadline {
                            Some(d) => {
                                with_deadline(d, read).await.map_err(|_| Error::Timeout {
                                    after: timeouts.reply.unwrap_or_default(),
                                    waiting: Waiting::Reply,
                                })?
                            }
                            None => read.await,
                        }
                    }
                    .map_err(io_error)?;
                    *end = n;
                    if n > 0 {
                        *got_response = true;
                        continue;
                    }
                    // The peer closed: the end of a close-delimited body, or an error.
                    loop {
                        match decoder.finish()? {
                            Event::Data(d) => {
                                if sink(Piece::Data(d)).is_break() {
                                    break;
                                }
                            }
                            Event::End { .. } => break,
                            Event::Head(_) | Event::NeedMore => {}
                        }
                    }
                    return Ok(After::Close);
                }
            }
        }
    }
}

/// What happens to the connection after a response.
enum After {
    /// Kept alive for the next request.
    Keep,
    /// Closed: the server said so, the body was close-delimited, or it was abandoned.
    Close,
}

//! The async benchmark-server client: every endpoint of [`benchlink_core::bench::request`]
//! through two generic methods, [`BenchClient::call`] (JSON replies) and
//! [`BenchClient::stream`] (log and metric lines), over one kept-alive connection.
//!
//! All memory is the caller's ([`Buffers`]), so the client's own size is a few hundred
//! bytes. Replies are zero-copy views into the body buffer, which is why they (and
//! [`Error::Server`]) borrow the client until dropped.

use core::ops::ControlFlow;

use benchlink_core::bench::exchange::{
    self as sansio, After, Attempts, Chunk, Next, Outgoing, ReplyBody, Sink, StreamBody,
    MAX_HEADERS,
};
use benchlink_core::bench::{JsonRequest, LineFormat, Request, StreamRequest};
#[cfg(feature = "deflate")]
use benchlink_core::http::DecompressorOxide;
use benchlink_core::http::{Event, InflateMemory, Limits, Method, ResponseDecoder};
use embassy_time::{with_deadline, with_timeout, Duration, Instant};
use embedded_io_async::ErrorKind;
use heapless::String;

use crate::transport::{ConnectError, Transport};

pub use benchlink_core::bench::exchange::{
    Buffers, ClientError, Server, Waiting, MAX_AUTHORITY, MAX_UPLOAD_FILES,
};

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

/// What a call can fail with (see [`ClientError`]): the transport's [`ConnectError`] and
/// I/O [`ErrorKind`]. [`ClientError::Server`] borrows the client's body buffer.
pub type Error<'a> = ClientError<'a, ConnectError, ErrorKind>;

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
        let authority = sansio::authority(server.host, server.port)?;
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
        let mut reply = ReplyBody::new(self.body);
        self.conn.exchange(req, false, &mut reply).await?;
        Ok(reply.finish::<R>()?)
    }

    /// Sends a stream request (`/log`, `/userlog`, `/data`, `/server_logs`) and hands
    /// every line to `on_line` as it arrives (decoded per `R::Format`: `&str` log lines,
    /// typed metric samples; a bad line is an `Err` item and the stream goes on), until
    /// the stream ends or `on_line` breaks (the connection is then dropped). A non-200
    /// answer is the server's typed error.
    ///
    /// The server's `/data` does not answer for a `failed` benchmark: check `/status`
    /// first, or set [`Timeouts::stream_idle`].
    pub async fn stream<R, F>(&mut self, req: &R, on_line: F) -> Result<(), Error<'_>>
    where
        R: StreamRequest,
        F: FnMut(
            Result<<R::Format as LineFormat>::Item<'_>, <R::Format as LineFormat>::Error<'_>>,
        ) -> ControlFlow<()>,
    {
        let mut lines = StreamBody::<R::Format, F>::new(self.line, self.body, on_line);
        self.conn.exchange(req, true, &mut lines).await?;
        lines.finish().map_err(Error::Server)
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

    /// Sends the whole request, chunk by chunk.
    async fn send<R: Request>(&mut self, out: &mut Outgoing<'_, R>) -> Result<(), Error<'static>> {
        let headers = self.server.headers(&self.authority);
        while let Some(chunk) = out.next(&headers, self.tx)? {
            let bytes = match chunk {
                Chunk::Tx(n) => self.tx.get(..n).unwrap_or_default(),
                Chunk::Content(content) => content,
            };
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
        sink: &mut dyn Sink,
    ) -> Result<(), Error<'static>> {
        let headers = self.server.headers(&self.authority);
        let mut outgoing = Outgoing::new(req, &headers, self.seed, self.tx)?;
        // Every upload draws its boundary from a new seed.
        self.seed = self.seed.rotate_left(17) ^ 0x9E37_79B9_7F4A_7C15;
        if self.open && self.transport.peer_closed() {
            self.drop_connection().await;
        }
        let mut attempts = Attempts::new(R::METHOD);
        let reply = self.timeouts.reply;
        let deadline = reply.map(|t| Instant::now().saturating_add(t));
        let timed_out = |waiting| Error::Timeout {
            after: reply.unwrap_or_default().into(),
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
                Some(d) => with_deadline(d, self.send(&mut outgoing))
                    .await
                    .unwrap_or(Err(timed_out(Waiting::Reply))),
                None => self.send(&mut outgoing).await,
            };
            // After a send that broke, the server may have answered early (413…).
            let received = if Attempts::read_after(&sent) {
                let received = self.receive(R::METHOD, stream, deadline, sink, &mut got_response);
                Some(received.await)
            } else {
                None
            };
            match attempts.next(sent, received, reused, got_response) {
                Next::Done(After::Keep) => {
                    self.reused = true;
                    return Ok(());
                }
                Next::Done(After::Close) => {
                    self.drop_connection().await;
                    return Ok(());
                }
                Next::Retry => {
                    self.drop_connection().await;
                    outgoing.restart();
                }
                Next::Fail(e) => {
                    self.drop_connection().await;
                    return Err(e);
                }
            }
        }
    }

    async fn receive(
        &mut self,
        method: Method,
        stream: bool,
        deadline: Option<Instant>,
        sink: &mut dyn Sink,
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
                    if sink.head(h.status).is_break() {
                        return Ok(After::Close);
                    }
                }
                Event::Data(d) => {
                    if sink.data(d).is_break() {
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
                                after: t.into(),
                                waiting: Waiting::StreamData,
                            })?,
                            None => read.await,
                        }
                    } else {
                        match deadline {
                            Some(d) => {
                                with_deadline(d, read).await.map_err(|_| Error::Timeout {
                                    after: timeouts.reply.unwrap_or_default().into(),
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
                                if sink.data(d).is_break() {
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

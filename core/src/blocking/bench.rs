//! The blocking benchmark-server client: every endpoint of
//! [`request`](crate::bench::request) through [`BenchClient::call`] (JSON replies) and
//! [`BenchClient::stream`] (log and metric lines), over one kept-alive connection of a
//! [`Transport`]. Its requests are written from an
//! [`Outgoing`](crate::bench::exchange::Outgoing) and its responses go through core's
//! [`ResponseDecoder`] into a [`ReplyBody`] or [`StreamBody`], exactly as in the async
//! client: only the waiting differs.

use core::ops::ControlFlow;
use core::time::Duration;

use embedded_io::{Error as _, ErrorKind};
use heapless::String;

use super::Transport;
pub use crate::bench::exchange::ClientError;
use crate::bench::exchange::{
    self, After, Attempts, Buffers, Chunk, Next, Parts, ReplyBody, Server, Sink, StreamBody,
    Upload, Waiting, MAX_AUTHORITY, MAX_HEADERS,
};
use crate::bench::{JsonRequest, LineFormat, Request, StreamRequest};
#[cfg(feature = "deflate")]
use crate::http::DecompressorOxide;
use crate::http::{EncodeQuery, Event, InflateMemory, Limits, Method, ResponseDecoder};
use crate::time::Instant;

/// How long a request may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Timeouts {
    /// The whole request: sending, the response head and, for a JSON call, the whole
    /// body (`None`: no limit). For a stream, everything up to its head. (Connecting is
    /// bounded by the transport's own connect timeout.)
    pub reply: Option<Duration>,
    /// Silence allowed inside a log or data stream (`None`, the default: a running
    /// benchmark's log can be quiet for long).
    pub stream_idle: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            reply: Some(Duration::from_secs(60)),
            stream_idle: None,
        }
    }
}

/// What a call can fail with (see [`ClientError`]): a connect error and an I/O error
/// are the transport's [`ErrorKind`]. [`ClientError::Server`] borrows the client's body
/// buffer.
pub type Error<'a> = ClientError<'a, ErrorKind, ErrorKind>;

fn io<E: embedded_io::Error>(e: E) -> Error<'static> {
    Error::Io(e.kind())
}

/// The blocking client of one benchmark server over a [`Transport`].
///
/// ```no_run
/// use benchlink_core::bench::exchange::{Buffers, Server};
/// use benchlink_core::bench::request;
/// use benchlink_core::blocking::{bench::BenchClient, Transport};
///
/// fn is_done<T: Transport>(transport: T, id: u64) -> Option<bool> {
///     let (mut rx, mut tx, mut head, mut body, mut line) = ([0; 1024], [0; 512], [0; 1024], [0; 2048], [0; 256]);
///     let buffers = Buffers { rx: &mut rx, tx: &mut tx, head: &mut head, body: &mut body, line: &mut line };
///     let mut client = BenchClient::new(transport, Server::new("10.0.0.1", 4800), buffers).ok()?;
///     let status = client.call(&request::Status { id }).ok()?;
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
            .finish_non_exhaustive()
    }
}

/// Everything an exchange needs, apart from where the body goes.
struct Conn<'b, T> {
    transport: T,
    server: Server<'b>,
    authority: String<MAX_AUTHORITY>,
    rx: &'b mut [u8],
    start: usize,
    end: usize,
    tx: &'b mut [u8],
    head: &'b mut [u8],
    inflate: Option<InflateMemory<'b>>,
    open: bool,
    /// The open connection completed an exchange: the server may have closed it since.
    reused: bool,
    timeouts: Timeouts,
    seed: u64,
}

impl<'b, T: Transport> BenchClient<'b, T> {
    /// A client of `server`; it connects (through [`Transport::connect`]) at the first
    /// call. Fails when the `Host` value would be longer than
    /// [`MAX_AUTHORITY`].
    pub fn new(transport: T, server: Server<'b>, buffers: Buffers<'b>) -> Result<Self, Error<'b>> {
        let authority = exchange::authority(server.host, server.port)?;
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
                seed: 0x2545_F491_4F6C_DD1D,
            },
            body: buffers.body,
            line: buffers.line,
        })
    }

    /// Inflates `deflate` and `gzip` bodies (the server's `/log` and `/userlog`) into
    /// `window` (32 KiB for the server's zlib streams). Feature `deflate` only.
    #[cfg(feature = "deflate")]
    pub fn with_inflate(
        mut self,
        state: &'b mut DecompressorOxide,
        window: &'b mut [u8],
    ) -> Result<Self, Error<'b>> {
        self.conn.inflate = Some(InflateMemory::new(state, window)?);
        Ok(self)
    }

    /// Replaces the default [`Timeouts`].
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.conn.timeouts = timeouts;
        self
    }

    /// Seeds the multipart boundaries (give every device its own random seed).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.conn.seed = seed;
        self
    }

    /// The transport, e.g. to reuse it after the client.
    pub fn into_transport(self) -> T {
        self.conn.transport
    }

    /// Closes the kept-alive connection, if any.
    pub fn close(&mut self) {
        self.conn.drop_connection();
    }

    /// Sends `req` and reads its JSON reply: the typed reply, a zero-copy view into the
    /// body buffer, or the server's typed error. A `GET` that met a kept-alive
    /// connection the server had closed is sent once more on a new one.
    pub fn call<R: JsonRequest>(&mut self, req: &R) -> Result<R::Reply<'_>, Error<'_>> {
        let mut reply = ReplyBody::new(self.body);
        self.conn.exchange(req, false, &mut reply)?;
        Ok(reply.finish::<R>()?)
    }

    /// Sends a stream request (`/log`, `/userlog`, `/data`, `/server_logs`) and hands
    /// every line to `on_line` as it arrives (a bad line is an `Err` item and the stream
    /// goes on), until the stream ends or `on_line` breaks. A non-200 answer is the
    /// server's typed error.
    pub fn stream<R, F>(&mut self, req: &R, on_line: F) -> Result<(), Error<'_>>
    where
        R: StreamRequest,
        F: FnMut(
            Result<<R::Format as LineFormat>::Item<'_>, <R::Format as LineFormat>::Error<'_>>,
        ) -> ControlFlow<()>,
    {
        let mut lines = StreamBody::<R::Format, F>::new(self.line, self.body, on_line);
        self.conn.exchange(req, true, &mut lines)?;
        lines.finish().map_err(Error::Server)
    }
}

impl<T: Transport> Conn<'_, T> {
    fn drop_connection(&mut self) {
        if self.open {
            self.transport.close();
        }
        self.open = false;
        self.reused = false;
        self.start = 0;
        self.end = 0;
    }

    /// Whether the server closed the kept-alive connection while it was idle (it is
    /// readable with no request out: end of stream, or bytes that belong to nothing).
    fn peer_closed(&mut self) -> bool {
        let now = self.transport.now();
        !matches!(self.transport.wait_readable(Some(now)), Ok(false))
    }

    /// One request and its response into `sink`. Any failure, or a sink that breaks,
    /// drops the connection (its framing is unknown).
    fn exchange<R: Request>(
        &mut self,
        req: &R,
        stream: bool,
        sink: &mut dyn Sink,
    ) -> Result<(), Error<'static>> {
        let upload = Upload::of(req, self.seed)?;
        self.exchange_chunks(R::METHOD, R::PATH, req, upload, stream, sink)
    }

    /// [`exchange`](Self::exchange) after the request's type is known: once for every
    /// request type (each copy would be flash).
    fn exchange_chunks<'r>(
        &mut self,
        method: Method,
        path: &'static str,
        query: &'r dyn EncodeQuery,
        upload: Option<Upload<'r>>,
        stream: bool,
        sink: &mut dyn Sink,
    ) -> Result<(), Error<'static>> {
        let headers = self.server.headers(&self.authority);
        let outgoing = &mut Parts::new(method, path, query, upload, &headers, self.tx)?;
        // Every upload draws its boundary from a new seed.
        self.seed = self.seed.rotate_left(17) ^ 0x9E37_79B9_7F4A_7C15;
        if self.open && self.peer_closed() {
            self.drop_connection();
        }
        let mut attempts = Attempts::new(method);
        let reply = self.timeouts.reply;
        let deadline = reply.map(|t| self.transport.now().saturating_add(t));
        loop {
            if !self.open {
                let (host, port) = (self.server.host, self.server.port);
                self.transport
                    .connect(host, port, false)
                    .map_err(|e| Error::Connect(e.kind()))?;
                self.open = true;
                self.reused = false;
                self.start = 0;
                self.end = 0;
            }
            let reused = self.reused;
            let mut got_response = false;
            let sent = self.send(outgoing);
            let received = Attempts::read_after(&sent)
                .then(|| self.receive(method, stream, deadline, sink, &mut got_response));
            match attempts.next(sent, received, reused, got_response) {
                Next::Done(After::Keep) => {
                    self.reused = true;
                    return Ok(());
                }
                Next::Done(After::Close) => {
                    self.drop_connection();
                    return Ok(());
                }
                Next::Retry => {
                    self.drop_connection();
                    outgoing.restart();
                }
                Next::Fail(e) => {
                    self.drop_connection();
                    return Err(e);
                }
            }
        }
    }

    fn send(&mut self, out: &mut Parts<'_>) -> Result<(), Error<'static>> {
        let headers = self.server.headers(&self.authority);
        while let Some(chunk) = out.next(&headers, self.tx)? {
            let bytes = match chunk {
                Chunk::Tx(n) => self.tx.get(..n).unwrap_or_default(),
                Chunk::Content(content) => content,
            };
            self.transport.write_all(bytes).map_err(io)?;
        }
        self.transport.flush().map_err(io)
    }

    fn receive(
        &mut self,
        method: Method,
        stream: bool,
        deadline: Option<Instant>,
        sink: &mut dyn Sink,
        got_response: &mut bool,
    ) -> Result<After, Error<'static>> {
        let inflate = self.inflate.as_mut().map(InflateMemory::reborrow);
        let mut decoder: ResponseDecoder<'_, MAX_HEADERS> =
            ResponseDecoder::new(self.head, inflate, Limits::DEFAULT);
        decoder.set_request_method(method);
        let mut head_seen = false;
        loop {
            let input = self.rx.get(self.start..self.end).unwrap_or_default();
            let (used, event) = decoder.decode(input)?;
            self.start += used;
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
                    return Ok(if keep_alive && self.start == self.end {
                        After::Keep
                    } else {
                        After::Close
                    });
                }
                Event::NeedMore => {
                    // A stream's body may be silent for long (up to its idle limit);
                    // everything else is within the request's deadline.
                    let timeouts = self.timeouts;
                    let (wait_until, limit) = if stream && head_seen {
                        let idle = timeouts.stream_idle;
                        let waiting = Waiting::StreamData;
                        let after = idle.unwrap_or_default();
                        let until = idle.map(|t| self.transport.now().saturating_add(t));
                        (until, Error::Timeout { after, waiting })
                    } else {
                        let after = timeouts.reply.unwrap_or_default();
                        let waiting = Waiting::Reply;
                        (deadline, Error::Timeout { after, waiting })
                    };
                    let n = fill(&mut self.transport, self.rx, wait_until, limit)?;
                    self.start = 0;
                    self.end = n;
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

/// Waits for bytes until `deadline` (else `limit`), then reads them into `rx`.
fn fill<T: Transport>(
    transport: &mut T,
    rx: &mut [u8],
    deadline: Option<Instant>,
    limit: Error<'static>,
) -> Result<usize, Error<'static>> {
    loop {
        if transport.wait_readable(deadline).map_err(io)? {
            break;
        }
        if deadline.is_some_and(|d| transport.now() >= d) {
            return Err(limit);
        }
    }
    transport.read(rx).map_err(io)
}

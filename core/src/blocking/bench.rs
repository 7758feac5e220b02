//! The blocking benchmark-server client: every endpoint of
//! [`request`](crate::bench::request) through [`BenchClient::call`] (JSON replies) and
//! [`BenchClient::stream`] (log and metric lines), over one kept-alive connection of a
//! [`Transport`], and [`BenchClient::data`] (`/data` once the benchmark runs). It is a
//! loop around core's [`Conversation`], the machine the async client drives too: only
//! the waiting differs.

use core::ops::ControlFlow;

use embedded_io::{Error as _, ErrorKind};

use super::Transport;
use crate::bench::exchange::{
    Buffers, Conversation, DataStep, DataWait, Exchange, Gathered, Output, ReplyBody, ResponseKind,
    Server, Sink, StreamBody,
};
pub use crate::bench::exchange::{ClientError, Timeouts};
use crate::bench::request::{Data, Status};
use crate::bench::resume::{hand_out, CallRetry, Fault, Resumption, Retry, StreamCursor};
use crate::bench::{JsonRequest, LineFormat, MetricLine, Request, StreamRequest};
#[cfg(feature = "deflate")]
use crate::http::{DecompressorOxide, InflateMemory};
use crate::time::Instant;

/// What a call can fail with (see [`ClientError`]): a connect error and an I/O error
/// are the transport's [`ErrorKind`]. [`ClientError::Server`] borrows the client's body
/// buffer.
pub type Error<'a> = ClientError<'a, ErrorKind, ErrorKind>;

/// The blocking client of one benchmark server over a [`Transport`]: a loop around
/// core's [`Conversation`] that moves its bytes and waits for its deadlines.
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
    /// How streams resume and idempotent calls are tried again (`None`: never).
    retry: Option<Retry>,
}

/// Everything an exchange needs, apart from where the body goes.
struct Conn<'b, T> {
    transport: T,
    talk: Conversation<'b>,
    rx: &'b mut [u8],
}

impl<T> core::fmt::Debug for BenchClient<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BenchClient")
            .field("talk", &self.conn.talk)
            .finish_non_exhaustive()
    }
}

impl<'b, T: Transport> BenchClient<'b, T> {
    /// A client of `server`; it connects (through [`Transport::connect`]) at the first
    /// call. Fails when the `Host` value would be longer than
    /// [`MAX_AUTHORITY`](crate::bench::exchange::MAX_AUTHORITY).
    pub fn new(transport: T, server: Server<'b>, buffers: Buffers<'b>) -> Result<Self, Error<'b>> {
        Ok(BenchClient {
            conn: Conn {
                transport,
                talk: Conversation::new(server, buffers.tx, buffers.head)?,
                rx: buffers.rx,
            },
            body: buffers.body,
            line: buffers.line,
            retry: Some(Retry::DEFAULT),
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
        self.conn
            .talk
            .set_inflate(InflateMemory::new(state, window)?);
        Ok(self)
    }

    /// Replaces the default [`Timeouts`]. (Connecting is bounded by the transport's own
    /// connect timeout, and by the reply deadline once it returns.)
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.conn.talk.set_timeouts(timeouts);
        self
    }

    /// Seeds the multipart boundaries and the retry jitter (give every device its own
    /// random seed).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.conn.talk.set_seed(seed);
        if let Some(retry) = self.retry.as_mut() {
            retry.jitter_seed = seed | 1;
        }
        self
    }

    /// How streams resume ([`resume`](Self::resume), [`data_resumed`](Self::data_resumed))
    /// and calls of requests that change nothing are tried again after a failure worth
    /// it (default [`Retry::DEFAULT`]); `None`: never.
    pub fn with_retry(mut self, retry: Option<Retry>) -> Self {
        self.retry = retry;
        self
    }

    /// The transport, e.g. to reuse it after the client.
    pub fn into_transport(self) -> T {
        self.conn.transport
    }

    /// Closes the kept-alive connection, if any.
    pub fn close(&mut self) {
        self.conn.close();
    }

    /// Sends `req` and reads its JSON reply: the typed reply, a zero-copy view into the
    /// body buffer, or the server's typed error. A request that changes nothing
    /// ([`Request::IDEMPOTENT`]) is sent again on a new connection after a stale one,
    /// and after a cut, a reset, a refused connection, a deadline or a 5xx as
    /// [`with_retry`](Self::with_retry) says; one that changes state is sent once.
    pub fn call<R: JsonRequest>(&mut self, req: &R) -> Result<R::Reply<'_>, Error<'_>> {
        let gathered = self.gather(req, R::IDEMPOTENT)?;
        Ok(gathered.finish::<R>(self.body)?)
    }

    /// [`call`](Self::call) up to its reply gathered in the body buffer (read from there
    /// by the caller: the reply borrows it): once for every request type.
    fn gather(
        &mut self,
        req: &dyn Start<'b>,
        idempotent: bool,
    ) -> Result<Gathered, Error<'static>> {
        let mut tries = CallRetry::new(self.retry, idempotent);
        loop {
            let mut reply = ReplyBody::new(self.body);
            let exchanged = self.conn.exchange(req, ResponseKind::Reply, &mut reply);
            let gathered = reply.gathered();
            let outcome = exchanged.as_ref().map(|()| gathered.status());
            match tries.after(self.conn.transport.now(), outcome.map_err(Fault::of)) {
                Some(at) => self.conn.sleep_until(at)?,
                None => {
                    exchanged?;
                    return Ok(gathered);
                }
            }
        }
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
        self.conn.exchange(req, ResponseKind::Stream, &mut lines)?;
        lines.finish().map_err(Error::Server)
    }

    /// The `/data` stream of benchmark `id` once it runs: polls `/status` as core's
    /// [`DataWait`] says (20 ms doubling to 1 s) until the benchmark runs or is over,
    /// then streams its samples to `on_sample` as [`stream`](Self::stream) does. A
    /// benchmark that failed has an empty stream (the server would never answer it).
    ///
    /// ```
    /// use benchlink_core::bench::exchange::{Buffers, Server};
    /// use benchlink_core::blocking::{bench::BenchClient, Transport};
    /// use benchlink_core::time::Instant;
    /// use core::ops::ControlFlow;
    ///
    /// /// A server whose benchmark failed: it answers `/status` and nothing else.
    /// struct Failed { asked: Vec<u8>, answer: &'static [u8] }
    /// impl embedded_io::ErrorType for Failed { type Error = core::convert::Infallible; }
    /// impl embedded_io::Read for Failed {
    ///     fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
    ///         let n = buf.len().min(self.answer.len());
    ///         buf[..n].copy_from_slice(&self.answer[..n]);
    ///         self.answer = &self.answer[n..];
    ///         Ok(n)
    ///     }
    /// }
    /// impl embedded_io::Write for Failed {
    ///     fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> { self.asked.extend_from_slice(buf); Ok(buf.len()) }
    ///     fn flush(&mut self) -> Result<(), Self::Error> { Ok(()) }
    /// }
    /// impl Transport for Failed {
    ///     fn now(&mut self) -> Instant { Instant::ZERO }
    ///     fn wait_readable(&mut self, _: Option<Instant>) -> Result<bool, Self::Error> { Ok(true) }
    ///     fn connect(&mut self, _: &str, _: u16, _: bool) -> Result<(), Self::Error> { Ok(()) }
    ///     fn close(&mut self) {}
    /// }
    ///
    /// let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 19\r\n\r\n{\"status\":\"failed\"}";
    /// let server = Failed { asked: Vec::new(), answer };
    /// let (mut rx, mut tx, mut head, mut body, mut line) = ([0; 512], [0; 512], [0; 512], [0; 512], [0; 128]);
    /// let buffers = Buffers { rx: &mut rx, tx: &mut tx, head: &mut head, body: &mut body, line: &mut line };
    /// let mut client = BenchClient::new(server, Server::new("bench", 4800), buffers).unwrap();
    /// let mut samples = 0;
    /// client.data(7, |_| { samples += 1; ControlFlow::Continue(()) }).unwrap();
    /// assert_eq!(samples, 0);
    /// let asked = client.into_transport().asked;
    /// assert!(asked.starts_with(b"GET /status?id=7") && !asked.windows(5).any(|w| w == b"/data"));
    /// ```
    pub fn data<F>(&mut self, id: u64, on_sample: F) -> Result<(), Error<'_>>
    where
        F: FnMut(
            Result<<MetricLine as LineFormat>::Item<'_>, <MetricLine as LineFormat>::Error<'_>>,
        ) -> ControlFlow<()>,
    {
        match self.wait_for_data(id) {
            Ok(true) => self.stream(&Data { id }, on_sample),
            Ok(false) => Ok(()),
            Err(Try::Failed(e)) => Err(e),
            // The `/status` reply that was not one, read again from the body buffer.
            Err(Try::Refused(gathered)) => gathered
                .finish::<Status>(self.body)
                .map(|_| ())
                .map_err(Error::from),
            Err(Try::Done) => Ok(()),
        }
    }
}

/// How one try at a resumed stream ended.
enum Try {
    /// The stream ended normally, or the caller stopped it.
    Done,
    /// The connection or the exchange failed.
    Failed(Error<'static>),
    /// The server answered with an error (read again from the body buffer).
    Refused(Gathered),
}

impl<'b, T: Transport> BenchClient<'b, T> {
    /// [`stream`](Self::stream), resumed after every failure worth trying again (a cut,
    /// a truncated body, a reset, a refused connection once the server was reached, a
    /// 5xx, a silence past [`Timeouts::stream_idle`]) as
    /// [`with_retry`](Self::with_retry) says, without a line lost or repeated: the
    /// server restreams from the first line and `cursor` (in the caller's memory) skips
    /// what was taken; what cannot be resumed exactly reaches `on_line` as an `Err`
    /// item. A line for which `on_line` returns `Break` is not taken: the next call with
    /// the same cursor hands it out again. The same loop as the embassy client's, around
    /// core's [`Resumption`].
    pub fn resume<R, C, F>(&mut self, req: &R, cursor: &mut C, on_line: F) -> Result<(), Error<'_>>
    where
        R: StreamRequest,
        C: StreamCursor<R::Format>,
        F: FnMut(
            Result<<R::Format as LineFormat>::Item<'_>, <R::Format as LineFormat>::Error<'_>>,
        ) -> ControlFlow<()>,
    {
        self.resume_from(req, None, cursor, on_line)
    }

    /// [`data`](Self::data), resumed as [`resume`](Self::resume) says: each new request
    /// waits for the benchmark as `data` does (a benchmark that failed ends the stream).
    pub fn data_resumed<C, F>(
        &mut self,
        id: u64,
        cursor: &mut C,
        on_sample: F,
    ) -> Result<(), Error<'_>>
    where
        C: StreamCursor<MetricLine>,
        F: FnMut(
            Result<<MetricLine as LineFormat>::Item<'_>, <MetricLine as LineFormat>::Error<'_>>,
        ) -> ControlFlow<()>,
    {
        self.resume_from(&Data { id }, Some(id), cursor, on_sample)
    }

    fn resume_from<R, C, F>(
        &mut self,
        req: &R,
        data_of: Option<u64>,
        cursor: &mut C,
        mut on_line: F,
    ) -> Result<(), Error<'_>>
    where
        R: StreamRequest,
        C: StreamCursor<R::Format>,
        F: FnMut(
            Result<<R::Format as LineFormat>::Item<'_>, <R::Format as LineFormat>::Error<'_>>,
        ) -> ControlFlow<()>,
    {
        let mut resumption = Resumption::new(self.retry);
        // The server's refusal, returned from outside the loop (it borrows the body).
        let refused = loop {
            let tried = self.try_stream(req, data_of, &mut resumption, cursor, &mut on_line);
            let (fault, failure) = match tried {
                Try::Done => return Ok(()),
                Try::Failed(e) => (Fault::of(&e), Ok(e)),
                Try::Refused(gathered) => (Fault::of_status(gathered.status()), Err(gathered)),
            };
            let now = self.conn.transport.now();
            match resumption.failed::<R::Format, _>(cursor, now, fault) {
                Some(at) => self.conn.sleep_until(at)?,
                None => match failure {
                    Ok(e) => return Err(e),
                    Err(gathered) => break gathered,
                },
            }
        };
        Err(ClientError::Server(refused.error(self.body)))
    }

    /// One request of a resumed stream: waits for a `/data` benchmark, then sends the
    /// request with the lines going through core's [`Resumption`].
    fn try_stream<R, C, F>(
        &mut self,
        req: &R,
        data_of: Option<u64>,
        resumption: &mut Resumption,
        cursor: &mut C,
        on_line: &mut F,
    ) -> Try
    where
        R: StreamRequest,
        C: StreamCursor<R::Format>,
        F: FnMut(
            Result<<R::Format as LineFormat>::Item<'_>, <R::Format as LineFormat>::Error<'_>>,
        ) -> ControlFlow<()>,
    {
        if let Some(id) = data_of {
            match self.wait_for_data(id) {
                Ok(true) => {}
                Ok(false) => return Try::Done,
                Err(failed) => return failed,
            }
        }
        if resumption.begin(cursor, on_line).is_break() {
            return Try::Done;
        }
        let mut stopped = false;
        let mut lines = StreamBody::<R::Format, _>::new(self.line, self.body, |line| {
            let flow = hand_out(cursor, line, on_line);
            stopped |= flow.is_break();
            flow
        });
        let exchanged = self.conn.exchange(req, ResponseKind::Stream, &mut lines);
        let gathered = lines.gathered();
        match exchanged {
            Err(e) => Try::Failed(e),
            Ok(()) if gathered.status() != 200 => Try::Refused(gathered),
            Ok(()) => {
                let _ = lines.finish();
                if !stopped {
                    resumption.end(cursor, on_line);
                }
                Try::Done
            }
        }
    }

    /// Polls `/status` of `id` as core's [`DataWait`] says: true once the benchmark
    /// runs or ended, false when it failed.
    fn wait_for_data(&mut self, id: u64) -> Result<bool, Try> {
        let mut wait = DataWait::new();
        loop {
            let mut reply = ReplyBody::new(self.body);
            let exchanged = self
                .conn
                .exchange(&Status { id }, ResponseKind::Reply, &mut reply);
            exchanged.map_err(Try::Failed)?;
            let gathered = reply.gathered();
            let now = self.conn.transport.now();
            let step = gathered
                .finish::<Status>(self.body)
                .map(|status| wait.handle_status(now, &status.status));
            match step {
                Ok(DataStep::PollStatusAt(at)) => self.conn.sleep_until(at).map_err(Try::Failed)?,
                Ok(DataStep::SendData) => return Ok(true),
                Ok(DataStep::Empty) => return Ok(false),
                Err(_) => return Err(Try::Refused(gathered)),
            }
        }
    }
}

impl<'b, T: Transport> Conn<'b, T> {
    fn close(&mut self) {
        if self.talk.close() {
            self.transport.close();
        }
    }

    /// Waits until `at`. An idle kept-alive connection that turns readable meanwhile
    /// was closed by the server (or sent bytes nobody asked for): it is dropped, and
    /// the wait goes on without a connection.
    fn sleep_until(&mut self, at: Instant) -> Result<(), Error<'static>> {
        while self.transport.now() < at {
            if self.transport.wait_readable(Some(at)).map_err(io)? {
                self.close();
            }
        }
        Ok(())
    }

    /// One request and its response into `sink`, over the kept-alive connection or a
    /// new one. Once for every request type (each copy would be flash).
    fn exchange(
        &mut self,
        req: &dyn Start<'b>,
        kind: ResponseKind,
        sink: &mut dyn Sink,
    ) -> Result<(), Error<'static>> {
        // Whether the server closed the kept-alive connection while it was idle (it is
        // readable with no request out: end of stream, or bytes that belong to nothing).
        if self.talk.is_open() {
            let now = self.transport.now();
            if !matches!(self.transport.wait_readable(Some(now)), Ok(false)) {
                self.talk.handle_peer_closed();
            }
        }
        let now = self.transport.now();
        let mut exchange = req.start(&mut self.talk, kind, now);
        run(&mut self.transport, self.rx, &mut exchange, sink)
    }
}

/// A request as a trait object: what starts its exchange, so that the loops around it
/// are not compiled again for every request type.
trait Start<'b> {
    fn start<'a>(
        &'a self,
        talk: &'a mut Conversation<'b>,
        kind: ResponseKind,
        now: Instant,
    ) -> Exchange<'a, 'b, ErrorKind, ErrorKind>;
}

impl<'b, R: Request> Start<'b> for R {
    fn start<'a>(
        &'a self,
        talk: &'a mut Conversation<'b>,
        kind: ResponseKind,
        now: Instant,
    ) -> Exchange<'a, 'b, ErrorKind, ErrorKind> {
        talk.exchange(self, kind, now)
    }
}

fn io<E: embedded_io::Error>(e: E) -> Error<'static> {
    Error::Io(e.kind())
}

/// What the transport did with the exchange's last output.
enum Done {
    Connected(Result<(), ErrorKind>),
    Wrote(Result<usize, ErrorKind>),
    Flushed(Result<(), ErrorKind>),
    Closed,
}

/// Drives `exchange` over `transport` to its outcome: acts on its outputs, reads into
/// `rx` when it has none (the response going to `sink`), and calls it back at its
/// deadlines. Once for every request type (each copy would be flash).
fn run<T: Transport>(
    transport: &mut T,
    rx: &mut [u8],
    exchange: &mut Exchange<'_, '_, ErrorKind, ErrorKind>,
    sink: &mut dyn Sink,
) -> Result<(), Error<'static>> {
    loop {
        let now = transport.now();
        // Blocking writes cannot be bounded here: past the deadline, the next step
        // is the timeout.
        if exchange.poll_timeout().is_some_and(|t| t <= now) {
            exchange.handle_timeout(now);
        }
        if let Some(output) = exchange.poll_output(now) {
            let done = match output {
                Output::Connect { host, port } => {
                    Done::Connected(transport.connect(host, port, false).map_err(|e| e.kind()))
                }
                // A write that takes nothing is a dead connection (and would spin).
                Output::Transmit(bytes) => Done::Wrote(match transport.write(bytes) {
                    Ok(0) => Err(ErrorKind::WriteZero),
                    written => written.map_err(|e| e.kind()),
                }),
                Output::Flush => Done::Flushed(transport.flush().map_err(|e| e.kind())),
                Output::Close => {
                    transport.close();
                    Done::Closed
                }
            };
            let now = transport.now();
            match done {
                Done::Connected(Ok(())) => exchange.handle_connected(now),
                Done::Connected(Err(e)) => exchange.handle_connect_failed(now, e),
                Done::Wrote(Ok(n)) => exchange.transmitted(now, n),
                Done::Flushed(Ok(())) => exchange.flushed(now),
                Done::Wrote(Err(e)) | Done::Flushed(Err(e)) => exchange.handle_io_error(now, e),
                Done::Closed => {}
            }
            continue;
        }
        if let Some(outcome) = exchange.outcome() {
            return outcome;
        }
        match transport.wait_readable(exchange.poll_timeout()) {
            Ok(true) => match transport.read(rx) {
                Ok(0) => exchange.handle_closed(transport.now(), sink),
                Ok(n) => {
                    let input = rx.get(..n).unwrap_or_default();
                    exchange.handle_input(transport.now(), input, sink)
                }
                Err(e) => exchange.handle_io_error(transport.now(), e.kind()),
            },
            // The loop checks the deadline.
            Ok(false) => {}
            Err(e) => exchange.handle_io_error(transport.now(), e.kind()),
        }
    }
}

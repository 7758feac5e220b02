//! The async benchmark-server client: every endpoint of [`benchlink_core::bench::request`]
//! through two generic methods, [`BenchClient::call`] (JSON replies) and
//! [`BenchClient::stream`] (log and metric lines), and [`BenchClient::data`] (`/data`
//! once the benchmark runs), over one kept-alive connection. It is a loop around core's
//! [`benchlink_core::bench::exchange::Conversation`], the machine the
//! blocking client drives too: this module only moves bytes and waits.
//!
//! All memory is the caller's ([`Buffers`]), so the client's own size is a few hundred
//! bytes. Replies are zero-copy views into the body buffer, which is why they (and
//! [`Error::Server`]) borrow the client until dropped.

use core::ops::ControlFlow;

use benchlink_core::bench::exchange::{
    Conversation, DataStep, DataWait, Exchange, Gathered, Output, ReplyBody, ResponseKind, Sink,
    StreamBody, Timeouts as CoreTimeouts,
};
use benchlink_core::bench::request::{Data, Status};
use benchlink_core::bench::resume::{hand_out, CallRetry, Fault, Resumption, Retry, StreamCursor};
use benchlink_core::bench::{JsonRequest, LineFormat, MetricLine, Request, StreamRequest};
#[cfg(feature = "deflate")]
use benchlink_core::http::{DecompressorOxide, InflateMemory};
use benchlink_core::time::Instant as CoreInstant;
use embassy_time::{with_deadline, Duration, Instant, Timer};
use embedded_io_async::{Error as _, ErrorKind};

use crate::transport::{open, ConnectError, Transport};

pub use benchlink_core::bench::exchange::{Buffers, ClientError, Server, Waiting, MAX_AUTHORITY};

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
/// I/O [`ErrorKind`]. [`ClientError::Server`] borrows the client's body buffer. A
/// connect that outlasts [`Timeouts::connect`] is a [`ClientError::Timeout`] waiting
/// for [`Waiting::Connect`].
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
    /// How streams resume and idempotent calls are tried again (`None`: never).
    retry: Option<Retry>,
}

/// `http://host[:port]`, `https://host[:port]` or `host[:port]` (plain HTTP): the host,
/// the port (default 80, 443 with `https://`, 4800 without a scheme, as `mzbench`
/// reads `MZBENCH_API_HOST`) and whether the URL asks for TLS. A path is not allowed
/// (put a reverse proxy's prefix in [`Server::prefix`]); IPv6 literals are not read.
///
/// ```
/// use benchlink_embassy::bench::parse_url;
/// assert_eq!(parse_url("https://bench.example"), Some(("bench.example", 443, true)));
/// assert_eq!(parse_url("http://10.0.0.1:4800"), Some(("10.0.0.1", 4800, false)));
/// assert_eq!(parse_url("10.0.0.1"), Some(("10.0.0.1", 4800, false)));
/// assert_eq!(parse_url("https://h:x"), None);
/// ```
pub fn parse_url(url: &str) -> Option<(&str, u16, bool)> {
    let (rest, tls, default_port) = if let Some(rest) = url.strip_prefix("https://") {
        (rest, true, 443)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (rest, false, 80)
    } else {
        (url, false, 4800)
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() || rest.contains('/') {
        return None;
    }
    match rest.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() => Some((host, port.parse().ok()?, tls)),
        Some(_) => None,
        None => Some((rest, default_port, tls)),
    }
}

impl<T> core::fmt::Debug for BenchClient<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BenchClient")
            .field("talk", &self.conn.talk)
            .field("body_len", &self.body.len())
            .field("line_len", &self.line.len())
            .finish_non_exhaustive()
    }
}

/// The connection half of the client: everything an exchange needs, apart from where
/// the body goes.
struct Conn<'b, T> {
    transport: T,
    /// Connect with TLS (`https://`).
    tls: bool,
    talk: Conversation<'b>,
    rx: &'b mut [u8],
}

impl<'b, T: Transport> BenchClient<'b, T> {
    /// A client of `server`. Fails when the `Host` value would be longer than
    /// [`MAX_AUTHORITY`].
    pub fn new(transport: T, server: Server<'b>, buffers: Buffers<'b>) -> Result<Self, Error<'b>> {
        let mut talk = Conversation::new(server, buffers.tx, buffers.head)?;
        let seed = Instant::now().as_ticks();
        talk.set_seed(seed);
        let mut client = BenchClient {
            conn: Conn {
                transport,
                tls: false,
                talk,
                rx: buffers.rx,
            },
            body: buffers.body,
            line: buffers.line,
            retry: Some(Retry {
                jitter_seed: seed | 1,
                ..Retry::DEFAULT
            }),
        };
        client.set_timeouts(Timeouts::default());
        Ok(client)
    }

    /// Inflates `deflate` and `gzip` bodies (the server's `/log` and `/userlog` are
    /// zlib-compressed whatever the client asks) into `window`, a power of two of at
    /// least 256 bytes; the server's zlib streams need 32 KiB. Without a window a
    /// compressed body fails with [`DecodeError::CompressedBodyUnsupported`].
    ///
    /// Only with the `deflate` feature (default): without it no inflate code is linked.
    ///
    /// [`DecodeError::CompressedBodyUnsupported`]: benchlink_core::http::DecodeError::CompressedBodyUnsupported
    #[cfg(feature = "deflate")]
    pub fn with_inflate(
        mut self,
        state: &'b mut DecompressorOxide,
        window: &'b mut [u8],
    ) -> Result<Self, Error<'b>> {
        // Validated once here; each response re-borrows the same memory.
        self.conn
            .talk
            .set_inflate(InflateMemory::new(state, window)?);
        Ok(self)
    }

    /// Speaks TLS to the server (an `https://` URL, see [`parse_url`]): every connection
    /// is opened with [`Transport::connect_tls`], the certificate checked for
    /// [`Server::host`]. A transport without TLS then fails every connect.
    pub fn with_tls(mut self, tls: bool) -> Self {
        self.conn.tls = tls;
        self
    }

    /// Replaces the default [`Timeouts`].
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.set_timeouts(timeouts);
        self
    }

    fn set_timeouts(&mut self, timeouts: Timeouts) {
        let talk = &mut self.conn.talk;
        talk.set_connect_timeout(Some(timeouts.connect.into()));
        talk.set_timeouts(CoreTimeouts {
            reply: timeouts.reply.map(Into::into),
            stream_idle: timeouts.stream_idle.map(Into::into),
        });
    }

    /// The std client's and the CLI's `--timeout`: `timeout` is both the whole-request
    /// limit of JSON calls ([`Timeouts::reply`], default 60 s) and the idle limit of
    /// streams ([`Timeouts::stream_idle`], default none).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        let timeout = Some(timeout.into());
        self.conn.talk.set_timeouts(CoreTimeouts {
            reply: timeout,
            stream_idle: timeout,
        });
        self
    }

    /// Seeds the multipart boundary generator and the retry jitter (default: the
    /// boot-relative clock; a hardware RNG's output on a real board).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.conn.talk.set_seed(seed);
        if let Some(retry) = self.retry.as_mut() {
            retry.jitter_seed = seed | 1;
        }
        self
    }

    /// How streams resume ([`resume`](Self::resume), [`data_resumed`](Self::data_resumed))
    /// and idempotent calls ([`call`](Self::call) of a request that changes nothing) are
    /// tried again after a failure worth it (default [`Retry::DEFAULT`]: 200 ms doubling
    /// to 5 s, 20 tries in a row, a wrong address failing at once); `None`: never.
    pub fn with_retry(mut self, retry: Option<Retry>) -> Self {
        self.retry = retry;
        self
    }

    /// The transport, e.g. to close it or reuse it after the client.
    pub fn into_transport(self) -> T {
        self.conn.transport
    }

    /// Closes the kept-alive connection, if any.
    pub async fn close(&mut self) {
        self.conn.close().await;
    }

    /// Sends `req` and reads its JSON reply: the typed reply, a zero-copy view into the
    /// body buffer, or the server's typed error.
    ///
    /// A kept-alive connection the server closed meanwhile is replaced. A request that
    /// changes nothing ([`Request::IDEMPOTENT`]: the status, the results, the clusters)
    /// is tried again after a cut, a reset, a refused connection, a deadline or a 5xx as
    /// [`with_retry`](Self::with_retry) says; one that changes state is sent once.
    pub async fn call<R: JsonRequest>(&mut self, req: &R) -> Result<R::Reply<'_>, Error<'_>> {
        let mut tries = CallRetry::new(self.retry, R::IDEMPOTENT);
        // The reply is read from the body buffer once the loop is over (it borrows it).
        let gathered = loop {
            let mut reply = ReplyBody::new(self.body);
            let exchanged = self
                .conn
                .exchange(req, ResponseKind::Reply, &mut reply)
                .await;
            let gathered = reply.gathered();
            let outcome = exchanged.as_ref().map(|()| gathered.status());
            match tries.after(now(), outcome.map_err(fault_of)) {
                Some(at) => Timer::at(embassy_instant(at)).await,
                None => {
                    exchanged?;
                    break gathered;
                }
            }
        };
        Ok(gathered.finish::<R>(self.body)?)
    }

    /// Sends a stream request (`/log`, `/userlog`, `/data`, `/server_logs`) and hands
    /// every line to `on_line` as it arrives (decoded per `R::Format`: `&str` log lines,
    /// typed metric samples; a bad line is an `Err` item and the stream goes on), until
    /// the stream ends or `on_line` breaks (the connection is then dropped). A non-200
    /// answer is the server's typed error.
    ///
    /// The server's `/data` does not answer for a `failed` benchmark: use
    /// [`data`](Self::data), which checks `/status` first, or set
    /// [`Timeouts::stream_idle`].
    pub async fn stream<R, F>(&mut self, req: &R, on_line: F) -> Result<(), Error<'_>>
    where
        R: StreamRequest,
        F: FnMut(
            Result<<R::Format as LineFormat>::Item<'_>, <R::Format as LineFormat>::Error<'_>>,
        ) -> ControlFlow<()>,
    {
        let mut lines = StreamBody::<R::Format, F>::new(self.line, self.body, on_line);
        self.conn
            .exchange(req, ResponseKind::Stream, &mut lines)
            .await?;
        lines.finish().map_err(Error::Server)
    }

    /// The `/data` stream of benchmark `id` once it runs: polls `/status` as core's
    /// [`DataWait`] says (20 ms doubling to 1 s) until the benchmark runs or is over,
    /// then streams its samples to `on_sample` as [`stream`](Self::stream) does. A
    /// benchmark that failed has an empty stream (the server would never answer it).
    ///
    /// ```no_run
    /// use benchlink_embassy::bench::{BenchClient, Error};
    /// use benchlink_embassy::transport::Transport;
    /// use core::ops::ControlFlow;
    ///
    /// /// How many samples benchmark `id` reported (none if it failed).
    /// async fn samples<'c, T: Transport>(client: &'c mut BenchClient<'_, T>, id: u64) -> Result<usize, Error<'c>> {
    ///     let mut n = 0;
    ///     client.data(id, |sample| { n += usize::from(sample.is_ok()); ControlFlow::Continue(()) }).await?;
    ///     Ok(n)
    /// }
    /// ```
    pub async fn data<F>(&mut self, id: u64, on_sample: F) -> Result<(), Error<'_>>
    where
        F: FnMut(
            Result<<MetricLine as LineFormat>::Item<'_>, <MetricLine as LineFormat>::Error<'_>>,
        ) -> ControlFlow<()>,
    {
        match self.wait_for_data(id).await {
            Ok(true) => self.stream(&Data { id }, on_sample).await,
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
    /// [`stream`](Self::stream), resumed after every failure worth trying again (see
    /// [`ClientError::is_transient`]: a cut, a truncated body, a reset, a refused
    /// connection, a 5xx, a silence past [`Timeouts::stream_idle`]) as the client's
    /// [`with_retry`](Self::with_retry) says, without a line lost or repeated: the
    /// server restreams from the first line and `cursor` (core's
    /// [`resume`](benchlink_core::bench::resume) cursors, in the caller's memory) skips
    /// what was taken. What cannot be resumed exactly (a file that changed, a live
    /// tail's gap) reaches `on_line` as an `Err` item
    /// ([`Report`](benchlink_core::bench::resume::Report)). The cursor counts the
    /// requests made after the first; the same cursor goes on where a previous call
    /// (stopped by `on_line`, or failed) left off: a line for which `on_line` returns
    /// `Break` is not taken, and the next call hands it out again.
    ///
    /// ```no_run
    /// use benchlink_core::bench::request::Log;
    /// use benchlink_core::bench::resume::LogCursor;
    /// use benchlink_embassy::bench::{BenchClient, Error};
    /// use benchlink_embassy::transport::Transport;
    /// use core::ops::ControlFlow;
    ///
    /// async fn log_lines<'c, T: Transport>(client: &'c mut BenchClient<'_, T>, id: u64) -> Result<u32, Error<'c>> {
    ///     let mut cursor = LogCursor::new();
    ///     client.resume(&Log { id }, &mut cursor, |_line| ControlFlow::Continue(())).await?;
    ///     Ok(cursor.resumptions())
    /// }
    /// ```
    pub async fn resume<R, C, F>(
        &mut self,
        req: &R,
        cursor: &mut C,
        on_line: F,
    ) -> Result<(), Error<'_>>
    where
        R: StreamRequest,
        C: StreamCursor<R::Format>,
        F: FnMut(
            Result<<R::Format as LineFormat>::Item<'_>, <R::Format as LineFormat>::Error<'_>>,
        ) -> ControlFlow<()>,
    {
        self.resume_from(req, None, cursor, on_line).await
    }

    /// [`data`](Self::data), resumed as [`resume`](Self::resume) says: each new
    /// request waits for the benchmark as `data` does (a benchmark that failed ends the
    /// stream).
    pub async fn data_resumed<C, F>(
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
            .await
    }

    async fn resume_from<R, C, F>(
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
            let tried = self
                .try_stream(req, data_of, &mut resumption, cursor, &mut on_line)
                .await;
            let (fault, failure) = match tried {
                Try::Done => return Ok(()),
                Try::Failed(e) => (fault_of(&e), Ok(e)),
                Try::Refused(gathered) => (Fault::of_status(gathered.status()), Err(gathered)),
            };
            match resumption.failed::<R::Format, _>(cursor, now(), fault) {
                Some(at) => Timer::at(embassy_instant(at)).await,
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
    async fn try_stream<R, C, F>(
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
            match self.wait_for_data(id).await {
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
        let exchanged = self
            .conn
            .exchange(req, ResponseKind::Stream, &mut lines)
            .await;
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
    async fn wait_for_data(&mut self, id: u64) -> Result<bool, Try> {
        let mut wait = DataWait::new();
        loop {
            let mut reply = ReplyBody::new(self.body);
            let exchanged = self
                .conn
                .exchange(&Status { id }, ResponseKind::Reply, &mut reply)
                .await;
            exchanged.map_err(Try::Failed)?;
            let gathered = reply.gathered();
            let step = gathered
                .finish::<Status>(self.body)
                .map(|status| wait.handle_status(now(), &status.status));
            match step {
                Ok(DataStep::PollStatusAt(at)) => Timer::at(embassy_instant(at)).await,
                Ok(DataStep::SendData) => return Ok(true),
                Ok(DataStep::Empty) => return Ok(false),
                Err(_) => return Err(Try::Refused(gathered)),
            }
        }
    }
}

/// How a failure counts for trying again: core's rule, except that a refused TLS
/// certificate or handshake is final (trying again meets the same certificate).
fn fault_of(e: &Error<'_>) -> Fault {
    match e {
        #[cfg(feature = "tls")]
        ClientError::Connect(ConnectError::Tls(_)) => Fault::Final,
        _ => Fault::of(e),
    }
}

/// The time on core's clock.
fn now() -> CoreInstant {
    CoreInstant::from_micros(Instant::now().as_micros())
}

/// A deadline of core's clock on embassy's.
fn embassy_instant(at: CoreInstant) -> Instant {
    Instant::from_micros(at.as_micros())
}

/// `op`, given up at `deadline` (`None` then).
async fn bounded<F: core::future::Future>(
    deadline: Option<CoreInstant>,
    op: F,
) -> Option<F::Output> {
    match deadline {
        Some(at) => with_deadline(embassy_instant(at), op).await.ok(),
        None => Some(op.await),
    }
}

/// What the transport did with the exchange's last output, or with a read; `None`:
/// the exchange's deadline came first.
enum Done {
    Connected(Option<Result<(), ConnectError>>),
    Wrote(Option<Result<usize, ErrorKind>>),
    Flushed(Option<Result<(), ErrorKind>>),
    Read(Option<Result<usize, ErrorKind>>),
    Closed,
}

impl<T: Transport> Conn<'_, T> {
    async fn close(&mut self) {
        if self.talk.close() {
            self.transport.close().await;
        }
    }

    /// One request and its response, the body going to `sink` piece by piece, over the
    /// kept-alive connection or a new one.
    async fn exchange<R: Request>(
        &mut self,
        req: &R,
        kind: ResponseKind,
        sink: &mut dyn Sink,
    ) -> Result<(), Error<'static>> {
        if self.talk.is_open() && self.transport.peer_closed() {
            self.talk.handle_peer_closed();
        }
        let mut exchange = self.talk.exchange(req, kind, now());
        run(&mut self.transport, self.tls, self.rx, &mut exchange, sink).await
    }
}

/// Drives `exchange` over `transport` to its outcome: acts on its outputs, reads into
/// `rx` when it has none (the response going to `sink`), each step bounded by the
/// exchange's next deadline. Once for every request type (each copy would be flash).
async fn run<T: Transport>(
    transport: &mut T,
    tls: bool,
    rx: &mut [u8],
    exchange: &mut Exchange<'_, '_, ConnectError, ErrorKind>,
    sink: &mut dyn Sink,
) -> Result<(), Error<'static>> {
    loop {
        let deadline = exchange.poll_timeout();
        let done = match exchange.poll_output(now()) {
            Some(Output::Connect { host, port }) => {
                Done::Connected(bounded(deadline, open(transport, host, port, tls)).await)
            }
            Some(Output::Transmit(bytes)) => Done::Wrote(
                bounded(deadline, transport.write(bytes))
                    .await
                    .map(|w| w.map_err(|e| e.kind())),
            ),
            Some(Output::Flush) => Done::Flushed(
                bounded(deadline, transport.flush())
                    .await
                    .map(|f| f.map_err(|e| e.kind())),
            ),
            Some(Output::Close) => {
                transport.close().await;
                Done::Closed
            }
            None => match exchange.outcome() {
                Some(outcome) => return outcome,
                None => Done::Read(
                    bounded(deadline, transport.read(rx))
                        .await
                        .map(|r| r.map_err(|e| e.kind())),
                ),
            },
        };
        let now = now();
        match done {
            Done::Connected(Some(Ok(()))) => exchange.handle_connected(now),
            Done::Connected(Some(Err(e))) => exchange.handle_connect_failed(now, e),
            // A write that takes nothing is a dead connection (and would spin).
            Done::Wrote(Some(Ok(0))) => exchange.handle_io_error(now, ErrorKind::WriteZero),
            Done::Wrote(Some(Ok(n))) => exchange.transmitted(now, n),
            Done::Flushed(Some(Ok(()))) => exchange.flushed(now),
            Done::Read(Some(Ok(0))) => exchange.handle_closed(now, sink),
            Done::Read(Some(Ok(n))) => {
                exchange.handle_input(now, rx.get(..n).unwrap_or_default(), sink)
            }
            Done::Wrote(Some(Err(e))) | Done::Flushed(Some(Err(e))) | Done::Read(Some(Err(e))) => {
                exchange.handle_io_error(now, e)
            }
            Done::Connected(None) | Done::Wrote(None) | Done::Flushed(None) | Done::Read(None) => {
                // Timers may wake a tick early on core's microsecond clock.
                let at = exchange.poll_timeout().map_or(now, |t| t.max(now));
                exchange.handle_timeout(at);
            }
            Done::Closed => {}
        }
    }
}

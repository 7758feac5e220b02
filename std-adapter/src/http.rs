//! The std benchmark client's transport: core's [`Exchange`] decides everything — when
//! to connect, reuse or close, what to send, which deadline passed, when a stale
//! connection is retried, how a reply that came before the request was all out is read —
//! and this module only does what it asks over a socket: connect (TCP, TLS, an HTTPS
//! proxy's tunnel), write, flush, close, and read until its next deadline.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use benchlink_core::bench::exchange::{
    ClientError, ConnectionState, Conversation, Exchange, Output, Server, Sink, Timeouts,
};
use benchlink_core::http::{Cursor, EncodeError, InflateBuffers};
use benchlink_core::time::Instant as CoreInstant;

use crate::net::{tunnel, Stream, Tls};

/// The size of the buffer socket reads go into (a stream at full speed fills it on
/// every read: larger means fewer system calls).
const READ_BUF: usize = 64 * 1024;
/// The longest response head accepted.
const HEAD_BUF: usize = 16 * 1024;
/// The inflate window: 32 KiB, the largest a zlib or gzip stream may use.
const WINDOW: usize = 32 * 1024;
/// Request heads and multipart part heads at first (a part head names its file).
const TX_START: usize = 16 * 1024;
/// The largest request head: a query may carry many environment variables (2 MiB, as
/// far as the head written into a growing `Vec` went before).
const TX_MAX: usize = 2 << 20;
/// Small writes gathered into one (the socket has `TCP_NODELAY`).
const WRITE_BUF: usize = 16 * 1024;

/// Why an exchange failed: core's error of every benchmark client, the socket's
/// `io::Error`s (connect, and I/O once connected) kept whole for the message.
pub(crate) type Failure = ClientError<'static, io::Error, io::Error>;

/// The exchange as this transport drives it: core is told *that* a connect or an I/O
/// step failed (`()`), the transport keeps the `io::Error` for the message.
pub(crate) type Ex<'a, 'b> = Exchange<'a, 'b, (), ()>;

/// Memory the conversations borrow: allocated once per client, reused per request.
#[derive(Debug)]
pub(crate) struct Buffers {
    tx: Vec<u8>,
    head: Box<[u8]>,
    inflate: Box<InflateBuffers<WINDOW>>,
}

impl Buffers {
    pub(crate) fn new() -> Buffers {
        Buffers {
            tx: vec![0; TX_START],
            head: vec![0; HEAD_BUF].into_boxed_slice(),
            inflate: Box::new(InflateBuffers::new()),
        }
    }

    /// A conversation with `server` over this memory, going on with `link`'s
    /// connection; fresh boundaries for its uploads.
    pub(crate) fn conversation<'t>(
        &'t mut self,
        server: Server<'t>,
        link: &Link,
        timeouts: Timeouts,
        connect_timeout: Duration,
    ) -> Result<Conversation<'t>, Failure> {
        let mut talk = Conversation::new(server, &mut self.tx, &mut self.head)?;
        talk.set_inflate(self.inflate.memory());
        talk.set_timeouts(timeouts);
        talk.set_connect_timeout(Some(connect_timeout));
        let mut seed = [0u8; 8];
        getrandom::fill(&mut seed).map_err(|e| ClientError::Io(io::Error::other(e.to_string())))?;
        talk.set_seed(u64::from_le_bytes(seed));
        talk.set_connection(link.state);
        Ok(talk)
    }

    /// Whether `tx` may grow (a request head that did not fit is tried again).
    pub(crate) fn tx_can_grow(&self) -> bool {
        self.tx.len() < TX_MAX
    }

    /// Makes `tx` larger after a request head did not fit (nothing was sent).
    pub(crate) fn grow_tx(&mut self) {
        self.tx
            .resize(self.tx.len().saturating_mul(4).min(TX_MAX), 0);
    }
}

/// Whether `outcome` is a request head too large for `tx`: refused before anything was
/// sent, to be tried again with a larger one.
pub(crate) fn head_too_large<C, I>(outcome: Option<Result<(), ClientError<'_, C, I>>>) -> bool {
    matches!(
        outcome,
        Some(Err(ClientError::Encode(EncodeError::BufferTooSmall { .. })))
    )
}

/// Where to connect and how.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub(crate) tls: Option<Tls>,
    pub(crate) connect_timeout: Duration,
    /// An HTTPS proxy `(host, port)` to tunnel through with `CONNECT`.
    pub(crate) proxy: Option<(String, u16)>,
}

impl Endpoint {
    fn connect(&self, host: &str, port: u16, timeout: Duration) -> io::Result<Stream> {
        match &self.proxy {
            None => Stream::connect(host, port, self.tls.as_ref(), timeout),
            Some((proxy_host, proxy_port)) => tunnel(proxy_host, *proxy_port, host, port, timeout)
                .map_err(io::Error::from)
                .and_then(|tcp| Stream::over(tcp, host, self.tls.as_ref())),
        }
    }
}

/// An open connection.
#[derive(Debug)]
struct HttpConnection {
    stream: Stream,
    /// Writes gathered until a flush or until full.
    out: Vec<u8>,
    /// The socket's mode and timeouts as last set, so that they are changed only when
    /// they have to be (each change is a system call).
    nonblocking: bool,
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
}

impl HttpConnection {
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

    /// Blocking writes, each bounded by `timeout`.
    fn writing(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.set_nonblocking(false)?;
        if self.write_timeout != timeout {
            self.stream.tcp().set_write_timeout(timeout)?;
            self.write_timeout = timeout;
        }
        Ok(())
    }

    /// Takes `bytes` (all of them, or some when they go straight to the socket).
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.out.len() + bytes.len() > WRITE_BUF {
            self.write_out()?;
        }
        if bytes.len() >= WRITE_BUF {
            return match self.stream.write(bytes)? {
                0 => Err(io::ErrorKind::WriteZero.into()),
                n => Ok(n),
            };
        }
        self.out.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn write_out(&mut self) -> io::Result<()> {
        let out = std::mem::take(&mut self.out);
        let written = self.stream.write_all(&out);
        self.out = out;
        self.out.clear();
        written
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_out()?;
        self.stream.flush()
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

/// How far [`Link::drive`] takes an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Until {
    /// Its outcome.
    End,
    /// Its response head.
    Head,
    /// A read that brought bytes.
    Read,
    /// A read that brought bytes (at once when `waited`), then every read that does not
    /// wait: until the socket has nothing more right now.
    Drained { waited: bool },
}

/// Where [`Link::drive`] left an exchange.
#[derive(Debug)]
pub(crate) enum Driven {
    /// It is over.
    Over(Result<(), Failure>),
    /// It goes on (as far as [`Until`] asked).
    Going,
}

/// The client's one connection: the socket, its state as core's conversations left it,
/// and the read buffer.
#[derive(Debug)]
pub(crate) struct Link {
    conn: Option<HttpConnection>,
    state: ConnectionState,
    rx: Box<[u8]>,
    /// The `io::Error` behind the last failure reported to core as `()`.
    error: Option<io::Error>,
    /// Core's clock counts from here.
    epoch: Instant,
    /// A connection to the server was opened once: the address is right, so a refused
    /// connection later is an outage worth trying again.
    reached: bool,
}

impl Link {
    pub(crate) fn new() -> Link {
        Link {
            conn: None,
            state: ConnectionState::default(),
            rx: vec![0; READ_BUF].into_boxed_slice(),
            error: None,
            epoch: Instant::now(),
            reached: false,
        }
    }

    /// Drops the connection (new TLS options, a proxy: the next request connects anew).
    pub(crate) fn close(&mut self) {
        self.conn = None;
        self.state = ConnectionState::default();
    }

    /// Keeps what `talk` says of the connection, for the next conversation.
    pub(crate) fn keep(&mut self, talk: &Conversation<'_>) {
        self.state = talk.connection();
    }

    /// Before a new exchange: tells `talk` whether the server closed the idle
    /// kept-alive connection (so that a request not safe to repeat is sent once).
    pub(crate) fn check_idle(&mut self, talk: &mut Conversation<'_>) {
        if talk.is_open()
            && self
                .conn
                .as_mut()
                .is_none_or(HttpConnection::closed_by_peer)
        {
            talk.handle_peer_closed();
        }
    }

    /// Whether a connection to the server was opened once.
    pub(crate) fn reached(&self) -> bool {
        self.reached
    }

    pub(crate) fn now(&self) -> CoreInstant {
        CoreInstant::from_micros(
            u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX),
        )
    }

    /// The time from now to `at` (`None`: no limit; zero: passed).
    fn left(&self, at: Option<CoreInstant>) -> Option<Duration> {
        at.map(|at| at.saturating_duration_since(self.now()))
    }

    /// Does what `ex` asks over the socket, handing its response to `sink`, as far as
    /// `until` says.
    pub(crate) fn drive(
        &mut self,
        endpoint: &Endpoint,
        ex: &mut Ex<'_, '_>,
        sink: &mut dyn Sink,
        until: Until,
    ) -> Driven {
        let mut got = matches!(until, Until::Drained { waited: true });
        loop {
            let now = self.now();
            if ex.poll_timeout().is_some_and(|t| t <= now) {
                ex.handle_timeout(now);
            }
            let left = self.left(ex.poll_timeout());
            let done = match ex.poll_output(now) {
                Some(Output::Connect { host, port }) => {
                    Done::Connected(self.connect(endpoint, host, port, left))
                }
                Some(Output::Transmit(bytes)) => Done::Wrote(self.write(bytes, left)),
                Some(Output::Flush) => Done::Flushed(self.flush(left)),
                Some(Output::Close) => {
                    self.conn = None;
                    continue;
                }
                None => Done::Nothing,
            };
            let now = self.now();
            match done {
                Done::Connected(Ok(())) => ex.handle_connected(now),
                Done::Wrote(Ok(n)) => ex.transmitted(now, n),
                Done::Flushed(Ok(())) => ex.flushed(now),
                Done::Connected(Err(Step::TimedOut))
                | Done::Wrote(Err(Step::TimedOut))
                | Done::Flushed(Err(Step::TimedOut)) => {
                    // The socket's own limit was the exchange's deadline.
                    ex.handle_timeout(ex.poll_timeout().map_or(now, |t| t.max(now)))
                }
                Done::Connected(Err(Step::Failed(e))) => {
                    self.error = Some(e);
                    ex.handle_connect_failed(now, ());
                }
                Done::Wrote(Err(Step::Failed(e))) | Done::Flushed(Err(Step::Failed(e))) => {
                    self.error = Some(e);
                    ex.handle_io_error(now, ());
                }
                Done::Nothing => {
                    if let Some(outcome) = ex.outcome() {
                        return Driven::Over(outcome.map_err(|e| self.failure(e)));
                    }
                    let going = match until {
                        Until::End => false,
                        Until::Head => ex.has_head(),
                        Until::Read => got,
                        Until::Drained { .. } => false,
                    };
                    if going {
                        return Driven::Going;
                    }
                    let wait = match until {
                        Until::Drained { .. } if got => None,
                        _ => Some(self.left(ex.poll_timeout())),
                    };
                    match self.read(wait) {
                        Got::Bytes(n) => {
                            got = true;
                            let input = self.rx.get(..n).unwrap_or_default();
                            ex.handle_input(self.now(), input, sink);
                        }
                        Got::Eof => ex.handle_closed(self.now(), sink),
                        Got::Nothing => return Driven::Going,
                        // The loop's first step: its deadline passed.
                        Got::TimedOut => {
                            let at = ex.poll_timeout().map_or(now, |t| t.max(now));
                            ex.handle_timeout(at);
                        }
                        Got::Failed(e) => {
                            self.error = Some(e);
                            ex.handle_io_error(self.now(), ());
                        }
                    }
                }
            }
        }
    }

    fn connect(
        &mut self,
        endpoint: &Endpoint,
        host: &str,
        port: u16,
        left: Option<Duration>,
    ) -> Result<(), Step> {
        self.conn = None;
        let timeout = left.unwrap_or(endpoint.connect_timeout);
        if timeout.is_zero() {
            return Err(Step::TimedOut);
        }
        let stream = endpoint.connect(host, port, timeout).map_err(Step::from)?;
        self.reached = true;
        self.conn = Some(HttpConnection {
            stream,
            out: Vec::new(),
            nonblocking: false,
            read_timeout: None,
            write_timeout: None,
        });
        Ok(())
    }

    fn write(&mut self, bytes: &[u8], left: Option<Duration>) -> Result<usize, Step> {
        let c = self.writing(left)?;
        c.write(bytes).map_err(Step::from)
    }

    fn flush(&mut self, left: Option<Duration>) -> Result<(), Step> {
        let c = self.writing(left)?;
        c.flush().map_err(Step::from)
    }

    /// The connection, ready for writes bounded by `left`.
    fn writing(&mut self, left: Option<Duration>) -> Result<&mut HttpConnection, Step> {
        if left.is_some_and(|l| l.is_zero()) {
            return Err(Step::TimedOut);
        }
        let c = self.conn.as_mut().ok_or_else(not_connected)?;
        c.writing(left).map_err(Step::Failed)?;
        Ok(c)
    }

    /// Reads into `rx`: waiting up to `wait` (`Some(None)`: no limit), or not at all
    /// (`None`).
    fn read(&mut self, wait: Option<Option<Duration>>) -> Got {
        let Some(c) = self.conn.as_mut() else {
            return Got::Failed(io::Error::from(io::ErrorKind::NotConnected));
        };
        let set = match wait {
            None => c.set_nonblocking(true),
            Some(Some(left)) if left.is_zero() => return Got::TimedOut,
            Some(limit) => c
                .set_nonblocking(false)
                .and_then(|()| c.set_read_timeout(limit)),
        };
        if let Err(e) = set {
            return Got::Failed(e);
        }
        loop {
            return match c.stream.read(&mut self.rx) {
                Ok(0) => Got::Eof,
                Ok(n) => Got::Bytes(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if c.nonblocking {
                        Got::Nothing
                    } else {
                        Got::TimedOut
                    }
                }
                Err(e) => Got::Failed(e),
            };
        }
    }

    /// Core's failure with the `io::Error` behind it.
    pub(crate) fn failure(&mut self, e: ClientError<'static, (), ()>) -> Failure {
        let mut io = || {
            self.error
                .take()
                .unwrap_or_else(|| io::Error::other("the connection failed"))
        };
        match e {
            ClientError::Connect(()) => ClientError::Connect(io()),
            ClientError::Io(()) => ClientError::Io(io()),
            ClientError::Timeout { after, waiting } => ClientError::Timeout { after, waiting },
            ClientError::Encode(e) => ClientError::Encode(e),
            ClientError::Decode(e) => ClientError::Decode(e),
            ClientError::BodyTooLarge { max } => ClientError::BodyTooLarge { max },
            ClientError::Server(e) => ClientError::Server(e),
        }
    }
}

fn not_connected() -> Step {
    Step::Failed(io::ErrorKind::NotConnected.into())
}

/// What the socket did with the exchange's last output.
enum Done {
    Connected(Result<(), Step>),
    Wrote(Result<usize, Step>),
    Flushed(Result<(), Step>),
    /// No output: the exchange reads, or is over.
    Nothing,
}

/// How a connect, write or flush failed.
enum Step {
    /// The socket's limit (the exchange's deadline) ran out.
    TimedOut,
    Failed(io::Error),
}

impl From<io::Error> for Step {
    fn from(e: io::Error) -> Step {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Step::TimedOut,
            _ => Step::Failed(e),
        }
    }
}

/// What a read got.
enum Got {
    Bytes(usize),
    Eof,
    /// Nothing there right now (a read that does not wait).
    Nothing,
    /// The wait ran out.
    TimedOut,
    Failed(io::Error),
}

/// Runs one of core's writers into a fresh `Vec`, growing it until the output fits (up
/// to 1 MiB).
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

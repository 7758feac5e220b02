//! The client's side of the conversation with the benchmark server, as one sans-IO
//! machine: see [`Conversation`] and [`Exchange`].

use core::time::Duration;

use heapless::String;

use super::{
    After, Attempts, Chunk, ClientError, Next, Parts, Server, Sink, Upload, Waiting, MAX_AUTHORITY,
    MAX_HEADERS,
};
use crate::bench::Request;
use crate::http::{EncodeError, Event, InflateMemory, Limits, Method, ResponseDecoder};
use crate::time::{earliest, Instant};

/// How long a request may take.
///
/// ```
/// use benchlink_core::bench::exchange::Timeouts;
/// use core::time::Duration;
/// // The CLI's `--timeout 5`: a JSON call in 5 s, a stream silent for 5 s at most.
/// let five = Some(Duration::from_secs(5));
/// let timeouts = Timeouts { reply: five, stream_idle: five };
/// assert_eq!(Timeouts::default().reply, Some(Duration::from_secs(60)));
/// # let _ = timeouts;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Timeouts {
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
            reply: Some(Duration::from_secs(60)),
            stream_idle: None,
        }
    }
}

/// The state of the client's one connection, between exchanges and during one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum Connection {
    /// None open.
    #[default]
    Closed,
    /// Asked for ([`Output::Connect`]), not confirmed yet.
    Opening,
    /// Open; `reused` once it completed an exchange (the server may have closed it since).
    Open { reused: bool },
    /// Open, but the adapter saw the peer close it while idle: to be closed.
    PeerClosed,
    /// Open, carrying the response of a paused exchange: closed by any other.
    Paused { reused: bool },
}

/// The state of a [`Conversation`]'s connection (none, open and maybe reused, closed
/// by the peer), apart from the conversation: for a client that owns its buffers and
/// builds a conversation over them for each call, to carry the kept-alive connection
/// from one call to the next ([`Conversation::connection`],
/// [`Conversation::set_connection`]). It says nothing the conversation could not;
/// only the conversation changes it.
///
/// ```
/// use benchlink_core::bench::exchange::{ConnectionState, Conversation, Server};
/// let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
/// let talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
/// let kept: ConnectionState = talk.connection(); // Copy, borrows nothing
/// assert_eq!(kept, ConnectionState::default()); // none open yet
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ConnectionState(Connection);

/// What a response is read as.
///
/// ```
/// use benchlink_core::bench::exchange::{Conversation, Output, ResponseKind, Server, StreamBody, Timeouts};
/// use benchlink_core::bench::{request::Log, LogLine};
/// use benchlink_core::time::Instant;
/// use core::{ops::ControlFlow, time::Duration};
/// let (mut tx, mut head, mut line, mut err) = ([0u8; 256], [0u8; 512], [0u8; 64], [0u8; 64]);
/// let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
/// talk.set_timeouts(Timeouts { reply: Some(Duration::from_secs(5)), stream_idle: Some(Duration::from_secs(30)) });
/// let mut log = StreamBody::<LogLine, _>::new(&mut line, &mut err, |_| ControlFlow::Continue(()));
/// let t = Instant::ZERO;
/// let mut ex = talk.exchange::<_, (), ()>(&Log { id: 1 }, ResponseKind::Stream, t);
/// # ex.poll_output(t); ex.handle_connected(t);
/// # while let Some(Output::Transmit(b)) = ex.poll_output(t) { let n = b.len(); ex.transmitted(t, n); }
/// # ex.flushed(t);
/// assert_eq!(ex.poll_timeout(), Some(Instant::from_secs(5))); // the head, by the reply limit
/// ex.handle_input(Instant::from_secs(1), b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", &mut log);
/// assert_eq!(ex.poll_timeout(), Some(Instant::from_secs(31))); // then silences of 30 s
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ResponseKind {
    /// A JSON reply: the whole response within [`Timeouts::reply`].
    Reply,
    /// A log or metric stream: the head within [`Timeouts::reply`], then no silence
    /// longer than [`Timeouts::stream_idle`].
    Stream,
}

/// The client's side of its conversation with one benchmark server: the request and
/// response memory, the one kept-alive connection and the client's timeouts. Every
/// client of the server (blocking, async, std) is a loop around it that moves bytes and
/// waits; it decides everything else — when to connect, reuse or close, what to send,
/// when a stale connection is retried, which deadline passed. Each request is an
/// [`Exchange`], started with [`exchange`](Self::exchange).
///
/// ```
/// use benchlink_core::bench::exchange::{Conversation, Output, ReplyBody, ResponseKind, Server};
/// use benchlink_core::bench::request::Status;
/// use benchlink_core::time::Instant;
///
/// let (mut tx, mut head, mut body) = ([0u8; 256], [0u8; 512], [0u8; 256]);
/// let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
/// let mut reply = ReplyBody::new(&mut body);
/// let now = Instant::ZERO;
/// let mut ex = talk
///     .exchange::<_, (), ()>(&Status { id: 7 }, ResponseKind::Reply, now);
/// assert!(matches!(ex.poll_output(now), Some(Output::Connect { host: "bench", port: 4800 })));
/// ex.handle_connected(now);
/// let Some(Output::Transmit(bytes)) = ex.poll_output(now) else { panic!() };
/// assert!(bytes.starts_with(b"GET /status?id=7&wait=false HTTP/1.1\r\n"));
/// let n = bytes.len();
/// ex.transmitted(now, n);
/// assert!(matches!(ex.poll_output(now), Some(Output::Flush)));
/// ex.flushed(now);
/// assert!(ex.poll_output(now).is_none()); // waiting for the reply, until:
/// assert_eq!(ex.poll_timeout(), Some(Instant::from_secs(60)));
/// ex.handle_input(now, b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n{\"status\":\"running\"}", &mut reply);
/// assert!(ex.poll_output(now).is_none()); // kept alive: nothing to close
/// assert_eq!(ex.outcome(), Some(Ok(())));
/// drop(ex);
/// assert!(talk.is_open());
/// assert!(!reply.finish::<Status>().unwrap().status.is_final());
/// ```
pub struct Conversation<'b> {
    server: Server<'b>,
    /// The `Host` value made from `host` and `port` (empty when the server gives its own).
    authority: String<MAX_AUTHORITY>,
    tx: &'b mut [u8],
    /// One decoder for every response: a paused exchange's state stays in it.
    decoder: ResponseDecoder<'b, MAX_HEADERS>,
    connection: Connection,
    timeouts: Timeouts,
    connect_timeout: Option<Duration>,
    seed: u64,
}

impl core::fmt::Debug for Conversation<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Conversation")
            .field("server", &self.server)
            .field("connection", &self.connection)
            .field("timeouts", &self.timeouts)
            .finish_non_exhaustive()
    }
}

impl<'b> Conversation<'b> {
    /// A conversation with `server`, its request heads written into `tx` and its
    /// response heads gathered in `head` (see [`Buffers`](super::Buffers) for sizes).
    /// Fails when the `Host` value made from `host` and `port` would be longer than
    /// [`MAX_AUTHORITY`] (a server with its own [`Server::authority`] makes none).
    ///
    /// ```
    /// use benchlink_core::bench::exchange::{Conversation, Server};
    /// let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// let talk = Conversation::new(Server::new("10.0.0.1", 4800), &mut tx, &mut head).unwrap();
    /// assert!(!talk.is_open());
    /// ```
    pub fn new(
        server: Server<'b>,
        tx: &'b mut [u8],
        head: &'b mut [u8],
    ) -> Result<Self, EncodeError> {
        let authority = match server.authority {
            Some(_) => String::new(),
            None => super::authority(server.host, server.port)?,
        };
        Ok(Conversation {
            authority,
            server,
            tx,
            decoder: ResponseDecoder::new(head, None, Limits::DEFAULT),
            connection: Connection::Closed,
            timeouts: Timeouts::default(),
            connect_timeout: None,
            seed: 0x2545_F491_4F6C_DD1D,
        })
    }

    /// Inflates `deflate` and `gzip` bodies into `memory` (without it a compressed body
    /// fails with
    /// [`DecodeError::CompressedBodyUnsupported`](crate::http::DecodeError::CompressedBodyUnsupported)).
    ///
    /// ```
    /// # #[cfg(feature = "deflate")] {
    /// use benchlink_core::http::{DecompressorOxide, InflateMemory};
    /// # use benchlink_core::bench::exchange::{Conversation, Server};
    /// # let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// let (mut state, mut window) = (Box::new(DecompressorOxide::new()), vec![0u8; 32 * 1024]);
    /// talk.set_inflate(InflateMemory::new(&mut state, &mut window).unwrap());
    /// # }
    /// ```
    pub fn set_inflate(&mut self, memory: InflateMemory<'b>) {
        self.decoder.set_inflate(Some(memory));
    }

    /// Replaces the [`Timeouts`] (default: [`Timeouts::default`]).
    ///
    /// ```
    /// use benchlink_core::bench::exchange::{Conversation, Server, Timeouts};
    /// let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// let mut talk = Conversation::new(Server::new("h", 80), &mut tx, &mut head).unwrap();
    /// talk.set_timeouts(Timeouts { reply: None, stream_idle: None });
    /// assert_eq!(talk.timeouts().reply, None);
    /// ```
    pub fn set_timeouts(&mut self, timeouts: Timeouts) {
        self.timeouts = timeouts;
    }

    /// The current [`Timeouts`].
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{Conversation, Server};
    /// # let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// assert_eq!(talk.timeouts(), benchlink_core::bench::exchange::Timeouts::default());
    /// ```
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Bounds each connect (within [`Timeouts::reply`] too, when that ends first;
    /// `None`, the default: only the reply deadline and the transport's own limit). A
    /// connect that runs out fails with [`ClientError::Timeout`] waiting for
    /// [`Waiting::Connect`].
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{ReplyBody, ResponseKind};
    /// # use benchlink_core::bench::request::Status;
    /// # use benchlink_core::time::Instant;
    /// # let mut body = [0u8; 64];
    /// # use benchlink_core::bench::exchange::{Conversation, Server};
    /// # let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// talk.set_connect_timeout(Some(core::time::Duration::from_secs(2)));
    /// let ex = talk.exchange::<_, (), ()>(&Status { id: 1 }, ResponseKind::Reply, Instant::ZERO);
    /// assert_eq!(ex.poll_timeout(), Some(Instant::from_secs(2))); // before the 60 s reply limit
    /// ```
    pub fn set_connect_timeout(&mut self, timeout: Option<Duration>) {
        self.connect_timeout = timeout;
    }

    /// Seeds the multipart boundaries (give every device its own random seed).
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{Conversation, Server};
    /// # let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// talk.set_seed(0x5EED); // a random number of the device's own
    /// # let _ = talk;
    /// ```
    pub fn set_seed(&mut self, seed: u64) {
        self.seed = seed | 1;
    }

    /// The server talked to.
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{Conversation, Server};
    /// # let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// assert_eq!((talk.server().host, talk.server().port), ("bench", 4800));
    /// ```
    pub fn server(&self) -> &Server<'b> {
        &self.server
    }

    /// Whether a connection is open between exchanges (kept alive for the next): the
    /// moment for the adapter to check that the peer has not closed it
    /// ([`handle_peer_closed`](Self::handle_peer_closed)).
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{Conversation, Server};
    /// # let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// assert!(!talk.is_open()); // the first exchange connects
    /// ```
    pub fn is_open(&self) -> bool {
        matches!(self.connection, Connection::Open { .. })
    }

    /// The connection's state, to hand to the next conversation over the same
    /// connection (see [`ConnectionState`]).
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{Conversation, Server};
    /// # let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// let talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// assert_eq!(talk.connection(), Default::default());
    /// ```
    pub fn connection(&self) -> ConnectionState {
        ConnectionState(self.connection)
    }

    /// Goes on with the connection a previous conversation left in `state` (the same
    /// transport connection, still there): a new conversation over owned buffers
    /// reuses the kept-alive connection of the last one.
    ///
    /// ```
    /// use benchlink_core::bench::exchange::{Conversation, Output, ReplyBody, ResponseKind, Server};
    /// use benchlink_core::bench::request::Status;
    /// use benchlink_core::time::Instant;
    /// let (mut tx, mut head, mut body) = ([0u8; 256], [0u8; 512], [0u8; 64]);
    /// let t = Instant::ZERO;
    /// let kept = {
    ///     let mut talk = Conversation::new(Server::new("h", 80), &mut tx, &mut head).unwrap();
    ///     let mut ex = talk.exchange::<_, (), ()>(&Status { id: 1 }, ResponseKind::Reply, t);
    ///     # ex.poll_output(t); ex.handle_connected(t);
    ///     # while let Some(Output::Transmit(b)) = ex.poll_output(t) { let n = b.len(); ex.transmitted(t, n); }
    ///     # ex.flushed(t);
    ///     ex.handle_input(t, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", &mut ReplyBody::new(&mut body));
    ///     drop(ex);
    ///     talk.connection()
    /// };
    /// let mut talk = Conversation::new(Server::new("h", 80), &mut tx, &mut head).unwrap();
    /// talk.set_connection(kept);
    /// let mut ex = talk.exchange::<_, (), ()>(&Status { id: 2 }, ResponseKind::Reply, t);
    /// assert!(matches!(ex.poll_output(t), Some(Output::Transmit(_)))); // no connect
    /// ```
    pub fn set_connection(&mut self, state: ConnectionState) {
        self.connection = state.0;
    }

    /// The adapter saw the idle kept-alive connection closed by the peer, or readable
    /// with bytes nobody asked for: it carries no more requests. The next exchange
    /// closes it first ([`Output::Close`]) and opens a new one, so that a request that
    /// is not safe to repeat is never sent on a connection the server gave up.
    ///
    /// ```
    /// use benchlink_core::bench::exchange::{Conversation, Output, ReplyBody, ResponseKind, Server};
    /// use benchlink_core::bench::request::Status;
    /// use benchlink_core::time::Instant;
    /// let (mut tx, mut head, mut body) = ([0u8; 256], [0u8; 512], [0u8; 256]);
    /// let mut talk = Conversation::new(Server::new("h", 80), &mut tx, &mut head).unwrap();
    /// // (an exchange kept the connection open)
    /// # let mut r = ReplyBody::new(&mut body);
    /// # let mut ex = talk.exchange::<_, (), ()>(&Status { id: 1 }, ResponseKind::Reply, Instant::ZERO);
    /// # ex.poll_output(Instant::ZERO); ex.handle_connected(Instant::ZERO);
    /// # while let Some(Output::Transmit(b)) = ex.poll_output(Instant::ZERO) { let n = b.len(); ex.transmitted(Instant::ZERO, n); }
    /// # ex.flushed(Instant::ZERO);
    /// # ex.handle_input(Instant::ZERO, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", &mut r);
    /// # drop(ex);
    /// assert!(talk.is_open());
    /// talk.handle_peer_closed();
    /// assert!(!talk.is_open());
    /// ```
    pub fn handle_peer_closed(&mut self) {
        if self.is_open() {
            self.connection = Connection::PeerClosed;
        }
    }

    /// Forgets the connection; true when there was one for the adapter to close.
    ///
    /// ```
    /// use benchlink_core::bench::exchange::{Conversation, Server};
    /// let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// let mut talk = Conversation::new(Server::new("h", 80), &mut tx, &mut head).unwrap();
    /// assert!(!talk.close());
    /// ```
    pub fn close(&mut self) -> bool {
        let open = self.connection != Connection::Closed;
        self.connection = Connection::Closed;
        open
    }

    /// Starts the exchange of `req` at `now` (the reply deadline counts from here), its
    /// response read as `kind` (into the sink handed to each
    /// [`handle_input`](Exchange::handle_input)). `C` and `I` are the transport's connect
    /// and I/O error types, handed in through
    /// [`handle_connect_failed`](Exchange::handle_connect_failed) and
    /// [`handle_io_error`](Exchange::handle_io_error). A request that cannot be sent at
    /// all (its head does not fit `tx`, too many files) ends at once, before anything is
    /// connected: no output, and its [`outcome`](Exchange::outcome) says why. (No
    /// `Result` here: the machine is returned in place, not copied out of one — a few
    /// hundred bytes of stack on a device.)
    ///
    /// ```
    /// use benchlink_core::bench::exchange::{ClientError, Conversation, ResponseKind, Server};
    /// use benchlink_core::bench::request::Status;
    /// use benchlink_core::http::EncodeError;
    /// use benchlink_core::time::Instant;
    /// let (mut tx, mut head) = ([0u8; 16], [0u8; 512]);
    /// let mut talk = Conversation::new(Server::new("h", 80), &mut tx, &mut head).unwrap();
    /// let mut ex = talk.exchange::<_, (), ()>(&Status { id: 1 }, ResponseKind::Reply, Instant::ZERO);
    /// assert!(ex.poll_output(Instant::ZERO).is_none());
    /// let too_small = ClientError::Encode(EncodeError::BufferTooSmall { capacity: 16 });
    /// assert_eq!(ex.outcome(), Some(Err(too_small)));
    /// ```
    pub fn exchange<'a, R: Request, C: Copy, I: Copy>(
        &'a mut self,
        req: &'a R,
        kind: ResponseKind,
        now: Instant,
    ) -> Exchange<'a, 'b, C, I> {
        let upload = Upload::of(req, self.seed);
        // Every upload draws its boundary from a new seed.
        self.seed = self.seed.rotate_left(17) ^ 0x9E37_79B9_7F4A_7C15;
        let of = Of {
            method: R::METHOD,
            path: R::PATH,
            idempotent: R::IDEMPOTENT,
        };
        self.exchange_parts(of, req, upload, kind, now)
    }

    /// [`exchange`](Self::exchange) once the request's type is known: one copy for every
    /// request type (each copy would be flash).
    fn exchange_parts<'a, C: Copy, I: Copy>(
        &'a mut self,
        Of {
            method,
            path,
            idempotent,
        }: Of,
        query: &'a dyn crate::http::EncodeQuery,
        upload: Result<Option<Upload<'a>>, EncodeError>,
        kind: ResponseKind,
        now: Instant,
    ) -> Exchange<'a, 'b, C, I> {
        let headers = self.server.headers(&self.authority);
        let parts =
            upload.and_then(|upload| Parts::new(method, path, query, upload, &headers, self.tx));
        let (parts, result) = match parts {
            Ok(parts) => (parts, None),
            Err(e) => (
                Parts::unsendable(method, path, query),
                Some(Err(ClientError::Encode(e))),
            ),
        };
        self.decoder.reset();
        self.decoder.set_request_method(method);
        let at = Progress {
            attempts: Attempts::new(idempotent),
            method,
            stream: kind == ResponseKind::Stream,
            deadline: self.timeouts.reply.map(|t| now.saturating_add(t)),
            step_by: self.connect_timeout.map(|t| now.saturating_add(t)),
            phase: Phase::Connect,
            result,
            reused: false,
            got_response: false,
            head_seen: false,
        };
        let mut exchange = Exchange {
            talk: self,
            parts,
            chunk: Chunk::Content(&[]),
            offset: 0,
            at,
        };
        exchange.at.phase = match exchange.talk.connection {
            _ if exchange.at.result.is_some() => Phase::Done,
            Connection::Open { reused } => {
                exchange.begin_attempt(reused);
                Phase::Sending
            }
            Connection::Closed => Phase::Connect,
            Connection::Opening | Connection::PeerClosed | Connection::Paused { .. } => {
                Phase::Close {
                    then: Then::Connect,
                }
            }
        };
        exchange
    }

    /// Goes on with the exchange paused by [`Exchange::pause`] on this conversation (no
    /// other exchange in between: that one would have closed the connection): the
    /// response's rest is read as before. What it borrowed — the request — is not
    /// needed any more.
    ///
    /// ```
    /// use benchlink_core::bench::exchange::{Conversation, Output, ResponseKind, Server, StreamBody};
    /// use benchlink_core::bench::{request::Log, LogLine};
    /// use benchlink_core::time::Instant;
    /// use core::ops::ControlFlow;
    /// let (mut tx, mut head, mut line, mut err) = ([0u8; 256], [0u8; 512], [0u8; 64], [0u8; 64]);
    /// let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// let mut lines = 0;
    /// let mut log = StreamBody::<LogLine, _>::new(&mut line, &mut err, |_| { lines += 1; ControlFlow::Continue(()) });
    /// let t = Instant::ZERO;
    /// let paused = {
    ///     let req = Log { id: 1 }; // gone once the exchange is paused
    ///     let mut ex = talk.exchange::<_, (), ()>(&req, ResponseKind::Stream, t);
    ///     # ex.poll_output(t); ex.handle_connected(t);
    ///     # while let Some(Output::Transmit(b)) = ex.poll_output(t) { let n = b.len(); ex.transmitted(t, n); }
    ///     # ex.flushed(t);
    ///     ex.handle_input(t, b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\none\n", &mut log);
    ///     ex.pause().ok().unwrap()
    /// };
    /// let mut ex = talk.resume(paused);
    /// ex.handle_input(t, b"two\n", &mut log);
    /// assert_eq!(ex.outcome(), Some(Ok(())));
    /// drop(ex);
    /// log.finish().unwrap();
    /// assert_eq!(lines, 2);
    /// ```
    pub fn resume<C: Copy, I: Copy>(&mut self, paused: Paused<C, I>) -> Exchange<'_, 'b, C, I> {
        let Paused(at) = paused;
        if let Connection::Paused { reused } = self.connection {
            self.connection = Connection::Open { reused };
        }
        Exchange {
            parts: Parts::unsendable(at.method, "", &()),
            talk: self,
            chunk: Chunk::Content(&[]),
            offset: 0,
            at,
        }
    }
}

/// What the adapter does next for an [`Exchange`]: connect, write, flush, close — the
/// messaging link's [`Output`](crate::rtm::Output) plus the flush a blocking or TCP
/// write needs to have the request leave. Reading is what it does when there is no
/// output: until [`Exchange::poll_timeout`].
///
/// ```
/// use benchlink_core::bench::exchange::{Conversation, Output, ResponseKind, Server};
/// use benchlink_core::bench::request::Status;
/// use benchlink_core::time::Instant;
/// let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
/// let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
/// let t = Instant::ZERO;
/// let mut ex = talk.exchange::<_, (), ()>(&Status { id: 1 }, ResponseKind::Reply, t);
/// let mut did = Vec::new();
/// while let Some(output) = ex.poll_output(t) {
///     match output {
///         Output::Connect { .. } => { did.push("connect"); ex.handle_connected(t) }
///         Output::Transmit(bytes) => { did.push("write"); let n = bytes.len(); ex.transmitted(t, n) }
///         Output::Flush => { did.push("flush"); ex.flushed(t) }
///         Output::Close => did.push("close"),
///     }
/// }
/// assert_eq!(did, ["connect", "write", "flush"]); // then it reads
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output<'a> {
    /// Open a connection to `host:port` (dropping any), then report
    /// [`handle_connected`](Exchange::handle_connected) or
    /// [`handle_connect_failed`](Exchange::handle_connect_failed).
    Connect {
        /// The server's host name or address.
        host: &'a str,
        /// Its TCP port.
        port: u16,
    },
    /// Write these bytes (all or a part), then report
    /// [`transmitted`](Exchange::transmitted) or
    /// [`handle_io_error`](Exchange::handle_io_error).
    Transmit(&'a [u8]),
    /// The request is all written: flush it, then report
    /// [`flushed`](Exchange::flushed) or [`handle_io_error`](Exchange::handle_io_error).
    Flush,
    /// Close the connection (nothing to report).
    Close,
}

/// What a [`Phase::Close`] goes on with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    Connect,
    Done,
}

/// Where an [`Exchange`] stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// To close the connection, then go on.
    Close { then: Then },
    /// To connect.
    Connect,
    /// Waiting for the connection.
    Connecting,
    /// Writing the request.
    Sending,
    /// To flush it.
    Flush,
    /// Waiting for the flush.
    Flushing,
    /// Reading the response.
    Receiving,
    /// Over: see [`Exchange::outcome`].
    Done,
}

/// One request and its response, as a sans-IO machine: the adapter acts on
/// [`poll_output`](Self::poll_output) (connect, write, flush, close), reads when there
/// is no output, and feeds back what happened — bytes with
/// [`handle_input`](Self::handle_input), an end of stream with
/// [`handle_closed`](Self::handle_closed), a failure with
/// [`handle_io_error`](Self::handle_io_error), and at
/// [`poll_timeout`](Self::poll_timeout) [`handle_timeout`](Self::handle_timeout) —
/// until [`outcome`](Self::outcome) is there. The response goes, as it is decoded, to the
/// [`Sink`] handed to each `handle_input` and `handle_closed`: not one fixed when the
/// exchange starts, so that a client may hand each read of a long stream to whoever
/// asks for its lines then (a line iterator and a batch reader taking turns on one
/// stream), or gather a reply wherever it likes.
///
/// It applies the rules of [`Attempts`]: a `GET` that met a kept-alive connection the
/// server had closed is sent once more on a new one, and a reply sent before the
/// request was all out (413 for an upload too large) is read, not lost.
///
/// ```
/// use benchlink_core::bench::exchange::{Conversation, Output, ReplyBody, ResponseKind, Server};
/// use benchlink_core::bench::request::Status;
/// use benchlink_core::time::Instant;
///
/// /// The whole adapter, over a scripted peer that answers everything at once.
/// fn run(talk: &mut Conversation<'_>, body: &mut [u8], answer: &[u8]) -> Result<(), ()> {
///     let mut reply = ReplyBody::new(body);
///     let now = Instant::ZERO;
///     let mut ex = talk.exchange::<_, (), ()>(&Status { id: 1 }, ResponseKind::Reply, now);
///     loop {
///         match ex.poll_output(now) {
///             Some(Output::Connect { .. }) => ex.handle_connected(now),
///             Some(Output::Transmit(bytes)) => { let n = bytes.len(); ex.transmitted(now, n) }
///             Some(Output::Flush) => ex.flushed(now),
///             Some(Output::Close) => {}
///             None => match ex.outcome() {
///                 Some(outcome) => return outcome.map_err(|_| ()),
///                 None => ex.handle_input(now, answer, &mut reply),
///             },
///         }
///     }
/// }
/// let (mut tx, mut head, mut body) = ([0u8; 256], [0u8; 512], [0u8; 64]);
/// let mut talk = Conversation::new(Server::new("h", 80), &mut tx, &mut head).unwrap();
/// assert!(run(&mut talk, &mut body, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}").is_ok());
/// assert!(talk.is_open());
/// ```
pub struct Exchange<'a, 'b, C, I> {
    talk: &'a mut Conversation<'b>,
    parts: Parts<'a>,
    /// The chunk being written, `offset` bytes of it out already.
    chunk: Chunk<'a>,
    offset: usize,
    at: Progress<C, I>,
}

/// Where an exchange stands, apart from what it borrows: what [`Paused`] keeps.
#[derive(Debug, Clone, Copy)]
struct Progress<C, I> {
    attempts: Attempts,
    method: Method,
    stream: bool,
    /// The end of the whole request ([`Timeouts::reply`]).
    deadline: Option<Instant>,
    /// The end of the current step's own limit: the connect, or a stream's silence.
    step_by: Option<Instant>,
    phase: Phase,
    /// How the attempt's send ended, once it did; then how the exchange ended.
    result: Option<Result<(), ClientError<'static, C, I>>>,
    reused: bool,
    got_response: bool,
    head_seen: bool,
}

/// What an exchange needs of its request's type, as values.
#[derive(Debug, Clone, Copy)]
struct Of {
    method: Method,
    path: &'static str,
    idempotent: bool,
}

/// An exchange whose response is being read, set aside by [`Exchange::pause`] and
/// taken up again by [`Conversation::resume`]: it borrows nothing (not the request,
/// not the conversation), so a client may return between two reads of a long stream
/// while the conversation's memory stays with the response.
///
/// ```
/// use benchlink_core::bench::exchange::Paused;
/// fn keep(paused: Paused<(), ()>) -> Paused<(), ()> { paused } // Copy, no lifetime
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Paused<C, I>(Progress<C, I>);

impl<C, I> core::fmt::Debug for Exchange<'_, '_, C, I> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Exchange")
            .field("method", &self.at.method)
            .field("phase", &self.at.phase)
            .field("connection", &self.talk.connection)
            .finish_non_exhaustive()
    }
}

impl<C: Copy, I: Copy> Exchange<'_, '_, C, I> {
    /// The next thing for the adapter to do, `None` when it is to read (or the exchange
    /// is over: [`outcome`](Self::outcome)). Each is bounded by the
    /// [`poll_timeout`](Self::poll_timeout) read before it.
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{ClientError, Conversation, Output, ResponseKind, Server};
    /// # use benchlink_core::bench::request::Status;
    /// # use benchlink_core::time::Instant;
    /// # let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// # let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// # let t = Instant::ZERO;
    /// let mut ex = talk.exchange::<_, &str, &str>(&Status { id: 1 }, ResponseKind::Reply, t);
    /// assert_eq!(ex.poll_output(t), Some(Output::Connect { host: "bench", port: 4800 }));
    /// assert_eq!(ex.poll_output(t), None); // connecting: nothing to do until it is reported
    /// ```
    pub fn poll_output(&mut self, now: Instant) -> Option<Output<'_>> {
        loop {
            match self.at.phase {
                Phase::Close { then } => {
                    self.talk.connection = Connection::Closed;
                    self.at.phase = match then {
                        Then::Connect => Phase::Connect,
                        Then::Done => Phase::Done,
                    };
                    return Some(Output::Close);
                }
                Phase::Connect => {
                    self.talk.connection = Connection::Opening;
                    self.at.phase = Phase::Connecting;
                    return Some(Output::Connect {
                        host: self.talk.server.host,
                        port: self.talk.server.port,
                    });
                }
                Phase::Sending => {
                    if !self.unsent().is_empty() {
                        break;
                    }
                    let talk = &mut *self.talk;
                    let headers = talk.server.headers(&talk.authority);
                    match self.parts.next(&headers, talk.tx) {
                        Ok(Some(chunk)) => {
                            self.chunk = chunk;
                            self.offset = 0;
                        }
                        Ok(None) => self.at.phase = Phase::Flush,
                        Err(e) => self.send_ended(now, Err(ClientError::Encode(e))),
                    }
                }
                Phase::Flush => {
                    self.at.phase = Phase::Flushing;
                    return Some(Output::Flush);
                }
                Phase::Connecting | Phase::Flushing | Phase::Receiving | Phase::Done => {
                    return None
                }
            }
        }
        Some(Output::Transmit(self.unsent()))
    }

    /// The rest of the chunk being written.
    fn unsent(&self) -> &[u8] {
        let chunk = match self.chunk {
            Chunk::Tx(n) => self.talk.tx.get(..n).unwrap_or_default(),
            Chunk::Content(content) => content,
        };
        chunk.get(self.offset..).unwrap_or_default()
    }

    /// When [`handle_timeout`](Self::handle_timeout) is due: the reply deadline, the
    /// connect limit, or a stream's idle limit (`None`: no limit).
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{ClientError, Conversation, Output, ResponseKind, Server};
    /// # use benchlink_core::bench::request::Status;
    /// # use benchlink_core::time::Instant;
    /// # let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// # let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// # let t = Instant::ZERO;
    /// let mut ex = talk.exchange::<_, &str, &str>(&Status { id: 1 }, ResponseKind::Reply, t);
    /// // The default reply limit, 60 s from the start.
    /// assert_eq!(ex.poll_timeout(), Some(Instant::from_secs(60)));
    /// ```
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.at.phase {
            Phase::Connect | Phase::Connecting => earliest(self.at.deadline, self.at.step_by),
            Phase::Sending | Phase::Flush | Phase::Flushing => self.at.deadline,
            Phase::Receiving if self.at.stream && self.at.head_seen => self.at.step_by,
            Phase::Receiving => self.at.deadline,
            Phase::Close { .. } | Phase::Done => None,
        }
    }

    /// How the exchange ended, once it did and nothing is left to output: `Ok` when its
    /// response went to the sink (whatever its status), or why not.
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{ClientError, Conversation, Output, ReplyBody, ResponseKind, Server};
    /// # use benchlink_core::bench::request::Status;
    /// # use benchlink_core::time::Instant;
    /// # let (mut tx, mut head, mut body) = ([0u8; 256], [0u8; 512], [0u8; 256]);
    /// # let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// # let mut reply = ReplyBody::new(&mut body);
    /// # let t = Instant::ZERO;
    /// let mut ex = talk.exchange::<_, &str, &str>(&Status { id: 1 }, ResponseKind::Reply, t);
    /// # ex.poll_output(t); ex.handle_connected(t);
    /// # while let Some(Output::Transmit(b)) = ex.poll_output(t) { let n = b.len(); ex.transmitted(t, n); }
    /// # ex.flushed(t);
    /// assert_eq!(ex.outcome(), None);
    /// ex.handle_input(t, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", &mut reply);
    /// assert_eq!(ex.outcome(), Some(Ok(())));
    /// ```
    pub fn outcome(&self) -> Option<Result<(), ClientError<'static, C, I>>> {
        match self.at.phase {
            Phase::Done => self.at.result,
            _ => None,
        }
    }

    /// Whether the response head arrived (its status went to the sink): from then on
    /// the exchange may be [`pause`](Self::pause)d.
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{Conversation, Output, ReplyBody, ResponseKind, Server};
    /// # use benchlink_core::bench::request::Status;
    /// # use benchlink_core::time::Instant;
    /// # let (mut tx, mut head, mut body) = ([0u8; 256], [0u8; 512], [0u8; 256]);
    /// # let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// # let mut reply = ReplyBody::new(&mut body);
    /// # let t = Instant::ZERO;
    /// let mut ex = talk.exchange::<_, (), ()>(&Status { id: 1 }, ResponseKind::Reply, t);
    /// # ex.poll_output(t); ex.handle_connected(t);
    /// # while let Some(Output::Transmit(b)) = ex.poll_output(t) { let n = b.len(); ex.transmitted(t, n); }
    /// # ex.flushed(t);
    /// ex.handle_input(t, b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n{", &mut reply);
    /// assert!(ex.has_head());
    /// ```
    pub fn has_head(&self) -> bool {
        self.at.head_seen
    }

    /// Sets the exchange aside between two reads of its response (see [`Paused`]),
    /// once its head arrived and while the rest is read; otherwise (before the head,
    /// when the request might still be sent again, or once it is over) it is handed
    /// back.
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{Conversation, ResponseKind, Server};
    /// # use benchlink_core::bench::request::Status;
    /// # use benchlink_core::time::Instant;
    /// # let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// # let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// let ex = talk.exchange::<_, (), ()>(&Status { id: 1 }, ResponseKind::Reply, Instant::ZERO);
    /// assert!(ex.pause().is_err()); // not even sent
    /// ```
    // Handed back by value as it came (the caller's own exchange, on its stack): no
    // allocation to make it smaller in `no_std` without `alloc`.
    #[allow(clippy::result_large_err)]
    pub fn pause(self) -> Result<Paused<C, I>, Self> {
        if self.at.phase != Phase::Receiving || !self.at.head_seen {
            return Err(self);
        }
        if let Connection::Open { reused } = self.talk.connection {
            self.talk.connection = Connection::Paused { reused };
        }
        Ok(Paused(self.at))
    }

    /// The connection asked for is open.
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{ClientError, Conversation, Output, ResponseKind, Server};
    /// # use benchlink_core::bench::request::Status;
    /// # use benchlink_core::time::Instant;
    /// # let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// # let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// # let t = Instant::ZERO;
    /// let mut ex = talk.exchange::<_, &str, &str>(&Status { id: 1 }, ResponseKind::Reply, t);
    /// # ex.poll_output(t);
    /// ex.handle_connected(t);
    /// assert!(matches!(ex.poll_output(t), Some(Output::Transmit(b)) if b.starts_with(b"GET /status")));
    /// ```
    pub fn handle_connected(&mut self, _now: Instant) {
        if self.at.phase == Phase::Connecting {
            self.talk.connection = Connection::Open { reused: false };
            self.begin_attempt(false);
            self.at.phase = Phase::Sending;
        }
    }

    /// The connection asked for could not be opened: the exchange fails with
    /// [`ClientError::Connect`].
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{ClientError, Conversation, Output, ResponseKind, Server};
    /// # use benchlink_core::bench::request::Status;
    /// # use benchlink_core::time::Instant;
    /// # let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// # let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// # let t = Instant::ZERO;
    /// let mut ex = talk.exchange::<_, &str, &str>(&Status { id: 1 }, ResponseKind::Reply, t);
    /// # ex.poll_output(t);
    /// ex.handle_connect_failed(t, "refused");
    /// assert_eq!(ex.poll_output(t), None);
    /// assert_eq!(ex.outcome(), Some(Err(ClientError::Connect("refused"))));
    /// ```
    pub fn handle_connect_failed(&mut self, _now: Instant, error: C) {
        if self.at.phase == Phase::Connecting {
            self.talk.connection = Connection::Closed;
            self.fail(ClientError::Connect(error));
        }
    }

    /// `n` bytes of the last [`Output::Transmit`] were written.
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{ClientError, Conversation, Output, ResponseKind, Server};
    /// # use benchlink_core::bench::request::Status;
    /// # use benchlink_core::time::Instant;
    /// # let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// # let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// # let t = Instant::ZERO;
    /// let mut ex = talk.exchange::<_, &str, &str>(&Status { id: 1 }, ResponseKind::Reply, t);
    /// # ex.poll_output(t); ex.handle_connected(t);
    /// let Some(Output::Transmit(all)) = ex.poll_output(t) else { panic!() };
    /// let len = all.len();
    /// ex.transmitted(t, 4); // a partial write: the rest comes next
    /// assert!(matches!(ex.poll_output(t), Some(Output::Transmit(rest)) if rest.len() == len - 4));
    /// ```
    pub fn transmitted(&mut self, _now: Instant, n: usize) {
        if self.at.phase == Phase::Sending {
            self.offset = self.offset.saturating_add(n);
        }
    }

    /// The flush of [`Output::Flush`] is done: the response is awaited.
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{ClientError, Conversation, Output, ResponseKind, Server};
    /// # use benchlink_core::bench::request::Status;
    /// # use benchlink_core::time::Instant;
    /// # let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// # let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// # let t = Instant::ZERO;
    /// let mut ex = talk.exchange::<_, &str, &str>(&Status { id: 1 }, ResponseKind::Reply, t);
    /// # ex.poll_output(t); ex.handle_connected(t);
    /// # while let Some(Output::Transmit(b)) = ex.poll_output(t) { let n = b.len(); ex.transmitted(t, n); }
    /// ex.flushed(t);
    /// assert_eq!(ex.poll_output(t), None); // reading now
    /// assert_eq!(ex.outcome(), None);
    /// ```
    pub fn flushed(&mut self, now: Instant) {
        if self.at.phase == Phase::Flushing {
            self.send_ended(now, Ok(()));
        }
    }

    /// Writing, flushing or reading failed. A send that broke still reads the response
    /// (the server may have answered early); a read that broke ends the attempt.
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{ClientError, Conversation, Output, ResponseKind, Server};
    /// # use benchlink_core::bench::request::Status;
    /// # use benchlink_core::time::Instant;
    /// # let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// # let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// # let t = Instant::ZERO;
    /// let mut ex = talk.exchange::<_, &str, &str>(&Status { id: 1 }, ResponseKind::Reply, t);
    /// # ex.poll_output(t); ex.handle_connected(t);
    /// # while let Some(Output::Transmit(b)) = ex.poll_output(t) { let n = b.len(); ex.transmitted(t, n); }
    /// # ex.flushed(t);
    /// // A new connection breaks before any reply: that is the outcome (only a reused
    /// // connection's break is retried).
    /// ex.handle_io_error(t, "reset");
    /// assert_eq!(ex.poll_output(t), Some(Output::Close));
    /// assert_eq!(ex.outcome(), Some(Err(ClientError::Io("reset"))));
    /// ```
    pub fn handle_io_error(&mut self, now: Instant, error: I) {
        match self.at.phase {
            Phase::Sending | Phase::Flush | Phase::Flushing => {
                self.send_ended(now, Err(ClientError::Io(error)));
            }
            Phase::Receiving => self.conclude(now, Some(Err(ClientError::Io(error)))),
            _ => {}
        }
    }

    /// Bytes read from the connection (while reading: ignored otherwise). They all go
    /// to the decoder, and what it decodes of the response to `sink` (the same sink
    /// type all along, or a different one at each call); bytes after the end of the
    /// response close the connection (they would corrupt the next one).
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{ClientError, Conversation, Output, ReplyBody, ResponseKind, Server};
    /// # use benchlink_core::bench::request::Status;
    /// # use benchlink_core::time::Instant;
    /// # let (mut tx, mut head, mut body) = ([0u8; 256], [0u8; 512], [0u8; 256]);
    /// # let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// # let mut reply = ReplyBody::new(&mut body);
    /// # let t = Instant::ZERO;
    /// let mut ex = talk.exchange::<_, &str, &str>(&Status { id: 1 }, ResponseKind::Reply, t);
    /// # ex.poll_output(t); ex.handle_connected(t);
    /// # while let Some(Output::Transmit(b)) = ex.poll_output(t) { let n = b.len(); ex.transmitted(t, n); }
    /// # ex.flushed(t);
    /// // Any split of the response gives the same result.
    /// ex.handle_input(t, b"HTTP/1.1 200 OK\r\nContent-Len", &mut reply);
    /// ex.handle_input(t, b"gth: 2\r\n\r\n{}", &mut reply);
    /// assert_eq!(ex.outcome(), Some(Ok(())));
    /// ```
    pub fn handle_input(&mut self, now: Instant, mut input: &[u8], sink: &mut dyn Sink) {
        if self.at.phase != Phase::Receiving {
            return;
        }
        if !input.is_empty() {
            self.at.got_response = true;
        }
        self.at.step_by = self
            .talk
            .timeouts
            .stream_idle
            .map(|t| now.saturating_add(t));
        loop {
            let step = match self.talk.decoder.decode(input) {
                Err(e) => Err(e),
                Ok((used, event)) => {
                    input = input.get(used..).unwrap_or_default();
                    match event {
                        Event::Head(h) => {
                            self.at.head_seen = true;
                            Ok(sink.head(h.status).is_break().then_some(After::Close))
                        }
                        Event::Data(d) => Ok(sink.data(d).is_break().then_some(After::Close)),
                        Event::End { keep_alive, .. } => {
                            Ok(Some(if keep_alive && input.is_empty() {
                                After::Keep
                            } else {
                                After::Close
                            }))
                        }
                        Event::NeedMore => return,
                    }
                }
            };
            match step {
                Ok(None) => {}
                Ok(Some(after)) => return self.conclude(now, Some(Ok(after))),
                Err(e) => return self.conclude(now, Some(Err(ClientError::Decode(e)))),
            }
        }
    }

    /// The peer ended the stream (a read returned nothing): the end of a close-delimited
    /// body (its last bytes go to `sink`), a response cut short, or — before any
    /// response — a stale connection.
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{ClientError, Conversation, Output, ReplyBody, ResponseKind, Server};
    /// # use benchlink_core::bench::request::Status;
    /// # use benchlink_core::time::Instant;
    /// # let (mut tx, mut head, mut body) = ([0u8; 256], [0u8; 512], [0u8; 256]);
    /// # let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// # let mut reply = ReplyBody::new(&mut body);
    /// # let t = Instant::ZERO;
    /// let mut ex = talk.exchange::<_, &str, &str>(&Status { id: 1 }, ResponseKind::Reply, t);
    /// # ex.poll_output(t); ex.handle_connected(t);
    /// # while let Some(Output::Transmit(b)) = ex.poll_output(t) { let n = b.len(); ex.transmitted(t, n); }
    /// # ex.flushed(t);
    /// // A body delimited by the end of the connection.
    /// ex.handle_input(t, b"HTTP/1.0 200 OK\r\n\r\n{}", &mut reply);
    /// assert_eq!(ex.outcome(), None);
    /// ex.handle_closed(t, &mut reply);
    /// assert_eq!(ex.poll_output(t), Some(Output::Close));
    /// assert_eq!(ex.outcome(), Some(Ok(())));
    /// ```
    pub fn handle_closed(&mut self, now: Instant, sink: &mut dyn Sink) {
        if self.at.phase != Phase::Receiving {
            return;
        }
        let received = loop {
            match self.talk.decoder.finish() {
                Ok(Event::Data(d)) => {
                    if sink.data(d).is_break() {
                        break Ok(After::Close);
                    }
                }
                Ok(Event::Head(h)) => {
                    if sink.head(h.status).is_break() {
                        break Ok(After::Close);
                    }
                }
                Ok(Event::End { .. } | Event::NeedMore) => break Ok(After::Close),
                Err(e) => break Err(ClientError::Decode(e)),
            }
        };
        self.conclude(now, Some(received));
    }

    /// Time passed: at [`poll_timeout`](Self::poll_timeout) (or later) the exchange
    /// fails with [`ClientError::Timeout`]; earlier, nothing happens. The timeout says
    /// what the request was waiting for: the connect, the server taking the request
    /// ([`Waiting::Send`]), a response ([`Waiting::Reply`], until its head is complete),
    /// the rest of a JSON reply ([`Waiting::RestOfReply`]) or a stream's next bytes.
    ///
    /// ```
    /// # use benchlink_core::bench::exchange::{ClientError, Conversation, Output, ResponseKind, Server, Waiting};
    /// # use benchlink_core::bench::request::Status;
    /// # use benchlink_core::time::Instant;
    /// # let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    /// # let mut talk = Conversation::new(Server::new("bench", 4800), &mut tx, &mut head).unwrap();
    /// # let t = Instant::ZERO;
    /// let mut ex = talk.exchange::<_, &str, &str>(&Status { id: 1 }, ResponseKind::Reply, t);
    /// # ex.poll_output(t); ex.handle_connected(t);
    /// # while let Some(Output::Transmit(b)) = ex.poll_output(t) { let n = b.len(); ex.transmitted(t, n); }
    /// # ex.flushed(t);
    /// ex.handle_timeout(Instant::from_secs(59));
    /// assert_eq!(ex.outcome(), None);
    /// ex.handle_timeout(Instant::from_secs(60));
    /// # assert_eq!(ex.poll_output(t), Some(Output::Close));
    /// assert!(matches!(ex.outcome(), Some(Err(ClientError::Timeout { waiting: Waiting::Reply, .. }))));
    /// ```
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.poll_timeout().is_none_or(|t| now < t) {
            return;
        }
        // The reply deadline, named by what it caught the request waiting for.
        let reply = |waiting| ClientError::Timeout {
            after: self.talk.timeouts.reply.unwrap_or_default(),
            waiting,
        };
        match self.at.phase {
            Phase::Connect | Phase::Connecting => {
                let by_reply = self.at.deadline.is_some_and(|d| d <= now);
                let after = match self.talk.connect_timeout {
                    Some(t) if !by_reply => t,
                    _ => self.talk.timeouts.reply.unwrap_or_default(),
                };
                let waiting = Waiting::Connect;
                self.fail(ClientError::Timeout { after, waiting });
            }
            Phase::Sending | Phase::Flush | Phase::Flushing => {
                self.send_ended(now, Err(reply(Waiting::Send)));
            }
            Phase::Receiving if self.at.stream && self.at.head_seen => {
                let after = self.talk.timeouts.stream_idle.unwrap_or_default();
                let waiting = Waiting::StreamData;
                self.conclude(now, Some(Err(ClientError::Timeout { after, waiting })));
            }
            Phase::Receiving => {
                let waiting = if self.at.head_seen {
                    Waiting::RestOfReply
                } else {
                    Waiting::Reply
                };
                self.conclude(now, Some(Err(reply(waiting))));
            }
            Phase::Close { .. } | Phase::Done => {}
        }
    }

    /// A new attempt on an open connection.
    fn begin_attempt(&mut self, reused: bool) {
        self.at.reused = reused;
        self.at.got_response = false;
        self.at.head_seen = false;
        self.at.result = None;
        self.chunk = Chunk::Content(&[]);
        self.offset = 0;
    }

    /// The send ended: read the response, unless it ended in a way that leaves none to
    /// read.
    fn send_ended(&mut self, now: Instant, sent: Result<(), ClientError<'static, C, I>>) {
        let read = Attempts::read_after(&sent);
        self.at.result = Some(sent);
        if read {
            self.at.phase = Phase::Receiving;
        } else {
            self.conclude(now, None);
        }
    }

    /// The attempt is over: done, again on a new connection (its connect limit starting
    /// `now`), or failed.
    fn conclude(
        &mut self,
        now: Instant,
        received: Option<Result<After, ClientError<'static, C, I>>>,
    ) {
        let sent = self.at.result.take().unwrap_or(Ok(()));
        match self
            .at
            .attempts
            .next(sent, received, self.at.reused, self.at.got_response)
        {
            Next::Done(After::Keep) => {
                self.talk.connection = Connection::Open { reused: true };
                self.at.result = Some(Ok(()));
                self.at.phase = Phase::Done;
            }
            Next::Done(After::Close) => {
                self.at.result = Some(Ok(()));
                self.at.phase = Phase::Close { then: Then::Done };
            }
            Next::Retry => {
                self.parts.restart();
                self.talk.decoder.reset();
                self.talk.decoder.set_request_method(self.at.method);
                self.at.step_by = self.talk.connect_timeout.map(|t| now.saturating_add(t));
                self.at.phase = Phase::Close {
                    then: Then::Connect,
                };
            }
            Next::Fail(e) => self.fail(e),
        }
    }

    /// The exchange failed: the connection, if any, is closed (its framing is unknown).
    fn fail(&mut self, e: ClientError<'static, C, I>) {
        self.at.result = Some(Err(e));
        self.at.phase = match self.talk.connection {
            Connection::Closed => Phase::Done,
            _ => Phase::Close { then: Then::Done },
        };
    }
}

#[cfg(test)]
mod tests;

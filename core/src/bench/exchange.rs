//! One request to the benchmark server and its response, sans IO: the pieces every
//! client of the server shares whatever its I/O (async on embassy-net, blocking on
//! `embedded-io`). [`Outgoing`] yields the request's bytes in order — the head, then for
//! an upload each part's head, its file borrowed as it is, and the closing delimiter —
//! and a [`Sink`] ([`ReplyBody`] for JSON calls, [`StreamBody`] for log and metric
//! streams) takes the response as a [`ResponseDecoder`](crate::http::ResponseDecoder)
//! hands it out. A client's own loop only writes chunks, reads bytes and keeps time.
//!
//! ```
//! use benchlink_core::bench::exchange::{Chunk, Headers, Outgoing, ReplyBody, Sink};
//! use benchlink_core::bench::request::Status;
//! use benchlink_core::http::{Event, Limits, ResponseDecoder};
//!
//! let req = Status { id: 7 };
//! let headers = Headers { authority: "bench:4800", prefix: "", user_agent: "doc", bearer: None };
//! let mut tx = [0u8; 256];
//! let mut out = Outgoing::new(&req, &headers, 1, &mut tx).unwrap();
//! let Ok(Some(Chunk::Tx(n))) = out.next(&headers, &mut tx) else { panic!() };
//! assert!(tx[..n].starts_with(b"GET /status?id=7&wait=false HTTP/1.1\r\nHost: bench:4800\r\n"));
//! assert!(matches!(out.next(&headers, &mut tx), Ok(None)));
//!
//! let (mut head, mut body) = ([0u8; 512], [0u8; 128]);
//! let mut decoder: ResponseDecoder<'_, 16> = ResponseDecoder::new(&mut head, None, Limits::DEFAULT);
//! let mut reply = ReplyBody::new(&mut body);
//! let mut input = &b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n{\"status\":\"running\"}"[..];
//! loop {
//!     let (used, event) = decoder.decode(input).unwrap();
//!     input = &input[used..];
//!     match event {
//!         Event::Head(h) => { let _ = reply.head(h.status); }
//!         Event::Data(d) => { let _ = reply.data(d); }
//!         Event::End { .. } => break,
//!         Event::NeedMore => unreachable!("all of it is here"),
//!     }
//! }
//! let status = reply.finish::<Status>().unwrap();
//! assert!(!status.status.is_final());
//! ```

use core::marker::PhantomData;
use core::ops::ControlFlow;

mod attempts;
mod conversation;
mod data_wait;
pub use attempts::{After, Attempts, Next};
pub use conversation::{
    ConnectionState, Conversation, Exchange, Output, Paused, ResponseKind, Timeouts,
};
pub use data_wait::{DataStep, DataWait};

use heapless::String;

use super::request::{Body as BenchBody, File};
use super::{Error, JsonRequest, LineDecoder, LineFormat, Request};
use crate::http::{
    Body, Boundary, Cursor, DecodeError, EncodeError, EncodeQuery, Method, Part, RequestHead,
    BOUNDARY_LEN,
};

/// Longest `Host` header value: a 253-byte DNS name, brackets, colon and port.
pub const MAX_AUTHORITY: usize = 264;

/// Header lines a response head may have (the benchmark server sends about ten).
pub const MAX_HEADERS: usize = 24;

/// `host` or `host:port` (with brackets for IPv6), as the `Host` header wants it.
///
/// ```
/// use benchlink_core::bench::exchange::authority;
/// assert_eq!(authority("10.0.0.1", 4800).unwrap(), "10.0.0.1:4800");
/// assert_eq!(authority("::1", 80).unwrap(), "[::1]");
/// ```
pub fn authority(host: &str, port: u16) -> Result<String<MAX_AUTHORITY>, EncodeError> {
    let mut buf = [0u8; MAX_AUTHORITY];
    let mut out = Cursor::new(&mut buf);
    crate::http::authority(&mut out, host, Some(port).filter(|&p| p != 80))?;
    let text = core::str::from_utf8(out.written())
        .map_err(|_| EncodeError::InvalidValue { field: "host" })?;
    String::try_from(text).map_err(|()| EncodeError::BufferTooSmall {
        capacity: MAX_AUTHORITY,
    })
}

/// Where the server is and who the client says it is.
#[derive(Clone, Copy)]
pub struct Server<'b> {
    /// Host name or IP address, as the transport resolves it.
    pub host: &'b str,
    /// TCP port (the real server listens on 4800).
    pub port: u16,
    /// The `Host` value to send, exactly as the user gave it (`None`: made from `host`
    /// and `port`, see [`authority`]).
    pub authority: Option<&'b str>,
    /// Written before every request path: `""`, or the `/prefix` of a server behind a
    /// reverse proxy (`/mzbench`).
    pub prefix: &'b str,
    /// Sent as `Authorization: Bearer <token>` with every request.
    pub token: Option<&'b str>,
    /// The `User-Agent` value.
    pub user_agent: &'b str,
}

impl<'b> Server<'b> {
    /// `host:port` without a token, with benchlink's user agent, at the root.
    ///
    /// ```
    /// use benchlink_core::bench::exchange::Server;
    /// let server = Server::new("10.0.0.1", 4800);
    /// assert!(server.token.is_none() && server.user_agent.starts_with("benchlink/"));
    /// // A server behind a reverse proxy, named as the user wrote it:
    /// let proxied = Server { authority: Some("bench.example"), prefix: "/mzbench", ..Server::new("bench.example", 80) };
    /// # let _ = proxied;
    /// ```
    pub const fn new(host: &'b str, port: u16) -> Self {
        Server {
            host,
            port,
            authority: None,
            prefix: "",
            token: None,
            user_agent: concat!("benchlink/", env!("CARGO_PKG_VERSION")),
        }
    }
}

/// The token is a secret: `Debug` shows only whether there is one.
impl core::fmt::Debug for Server<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Server")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("authority", &self.authority)
            .field("prefix", &self.prefix)
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

impl<'b> Server<'b> {
    /// The header values of its requests: its own [`authority`](Self::authority), or
    /// else `authority` (from [`authority`]).
    ///
    /// ```
    /// use benchlink_core::bench::exchange::Server;
    /// let server = Server { prefix: "/api", ..Server::new("10.0.0.1", 4800) };
    /// let headers = server.headers("10.0.0.1:4800");
    /// assert_eq!((headers.authority, headers.prefix), ("10.0.0.1:4800", "/api"));
    /// ```
    pub fn headers<'h>(&'h self, authority: &'h str) -> Headers<'h> {
        Headers {
            authority: self.authority.unwrap_or(authority),
            prefix: self.prefix,
            user_agent: self.user_agent,
            bearer: self.token,
        }
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

/// What a timed-out request was waiting for: one list for every client of the server
/// (the std client's errors name it too), so that a timeout reads the same whichever
/// client met it. Non-exhaustive: a client may learn to tell more waits apart.
///
/// ```
/// use benchlink_core::bench::exchange::Waiting;
/// /// A timeout as a client shows it, with its own name for the server and the limit.
/// struct Shown(Waiting);
/// impl core::fmt::Display for Shown {
///     fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
///         self.0.fmt_timeout(f, "bench:4800", &"5 s")
///     }
/// }
/// assert_eq!(Shown(Waiting::Send).to_string(), "bench:4800 did not take the request within 5 s");
/// assert_eq!(Shown(Waiting::StreamData).to_string(), "no data from bench:4800 for 5 s");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Waiting {
    /// The connection to open.
    Connect,
    /// The server to take the request (a write that did not finish in time).
    Send,
    /// The server to send a response: its first byte, or the rest of its head.
    Reply,
    /// The rest of a reply whose head arrived (a server sending its body too slowly).
    RestOfReply,
    /// The next bytes of a stream.
    StreamData,
}

impl Waiting {
    /// Writes what a timeout of this wait says, naming the server `server` and the limit
    /// `after` (each client formats them its own way): the one wording of every client.
    pub fn fmt_timeout(
        self,
        f: &mut core::fmt::Formatter<'_>,
        server: &str,
        after: &dyn core::fmt::Display,
    ) -> core::fmt::Result {
        match self {
            Waiting::Connect => write!(f, "could not connect to {server} within {after}"),
            Waiting::Send => write!(f, "{server} did not take the request within {after}"),
            Waiting::Reply => write!(f, "no reply from {server} within {after}"),
            Waiting::RestOfReply => write!(f, "no complete reply from {server} within {after}"),
            Waiting::StreamData => write!(f, "no data from {server} for {after}"),
        }
    }
}

/// A limit as core's errors show it: `5 s`, or `1500 ms` when not whole seconds.
struct Limit(core::time::Duration);

impl core::fmt::Display for Limit {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.0.subsec_millis() == 0 {
            write!(f, "{} s", self.0.as_secs())
        } else {
            write!(f, "{} ms", self.0.as_millis())
        }
    }
}

/// What a benchmark-server call can fail with, whatever the transport: `C` is the
/// transport's connect error and `I` its I/O error kind, the rest is the protocol's. The
/// embassy and the blocking clients name it `Error` with their own `C` and `I`.
/// [`ClientError::Server`] borrows the client's body buffer.
///
/// ```
/// use benchlink_core::bench::exchange::{ClientError, Waiting};
/// use core::time::Duration;
/// let e: ClientError<'_, &str, &str> =
///     ClientError::Timeout { after: Duration::from_secs(5), waiting: Waiting::Reply };
/// assert_eq!(e.to_string(), "no reply from the server within 5 s");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ClientError<'a, C, I> {
    /// Opening the connection failed.
    Connect(C),
    /// The connection failed while sending or receiving.
    Io(I),
    /// A limit of the client's timeouts passed.
    Timeout {
        /// The limit.
        after: core::time::Duration,
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
    /// The server answered, but with an error (its `reason_code` and `reason`), or with
    /// a reply of the wrong shape.
    Server(Error<'a>),
}

impl<C, I> ClientError<'_, C, I> {
    /// The HTTP status when the server answered with something other than 200.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            ClientError::Server(e) => e.http_status(),
            _ => None,
        }
    }

    /// Whether the same request may succeed if tried again later: a refused or broken
    /// connection, a response cut short, a deadline that passed, a 5xx. What a client
    /// with a [`Retry`](super::resume::Retry) policy tries again (an idempotent call, a
    /// stream); never a request refused as it is (4xx), one that cannot be encoded or
    /// whose reply does not fit, nor a response that is not HTTP.
    ///
    /// ```
    /// use benchlink_core::bench::exchange::{ClientError, Waiting};
    /// use benchlink_core::http::{DecodeError, Section};
    /// type E = ClientError<'static, &'static str, &'static str>;
    /// assert!(E::Io("reset").is_transient());
    /// assert!(E::Decode(DecodeError::UnexpectedEof { section: Section::ChunkFraming }).is_transient());
    /// assert!(!E::BodyTooLarge { max: 10 }.is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Connect(_) | ClientError::Io(_) | ClientError::Timeout { .. } => true,
            ClientError::Decode(e) => matches!(e, DecodeError::UnexpectedEof { .. }),
            ClientError::Server(e) => e.http_status().is_some_and(|s| s >= 500),
            ClientError::Encode(_) | ClientError::BodyTooLarge { .. } => false,
        }
    }
}

impl<C: core::fmt::Display, I: core::fmt::Debug> core::fmt::Display for ClientError<'_, C, I> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ClientError::Connect(e) => write!(f, "connect: {e}"),
            ClientError::Io(kind) => write!(f, "connection failed: {kind:?}"),
            ClientError::Timeout { after, waiting } => {
                waiting.fmt_timeout(f, "the server", &Limit(*after))
            }
            ClientError::Encode(e) => write!(f, "request: {e}"),
            ClientError::Decode(e) => write!(f, "response: {e:?}"),
            ClientError::BodyTooLarge { max } => write!(f, "reply larger than {max} bytes"),
            ClientError::Server(e) => write!(f, "{e}"),
        }
    }
}

impl<C: core::fmt::Display + core::fmt::Debug, I: core::fmt::Debug> core::error::Error
    for ClientError<'_, C, I>
{
}

impl<C, I> From<EncodeError> for ClientError<'_, C, I> {
    fn from(e: EncodeError) -> Self {
        ClientError::Encode(e)
    }
}

impl<C, I> From<DecodeError> for ClientError<'_, C, I> {
    fn from(e: DecodeError) -> Self {
        ClientError::Decode(e)
    }
}

impl<'a, C, I> From<ReplyError<'a>> for ClientError<'a, C, I> {
    fn from(e: ReplyError<'a>) -> Self {
        match e {
            ReplyError::TooLarge { max } => ClientError::BodyTooLarge { max },
            ReplyError::Server(e) => ClientError::Server(e),
        }
    }
}

/// The header values of every request to one server.
#[derive(Clone, Copy)]
pub struct Headers<'a> {
    /// The `Host` value, from [`authority`].
    pub authority: &'a str,
    /// Written before the path (see [`Server::prefix`]).
    pub prefix: &'a str,
    /// The `User-Agent` value.
    pub user_agent: &'a str,
    /// Sent as `Authorization: Bearer <token>`.
    pub bearer: Option<&'a str>,
}

/// The token is a secret: `Debug` shows only whether there is one.
impl core::fmt::Debug for Headers<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Headers")
            .field("authority", &self.authority)
            .field("prefix", &self.prefix)
            .field("user_agent", &self.user_agent)
            .field("bearer", &self.bearer.map(|_| "<redacted>"))
            .finish()
    }
}

/// One piece of a request to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk<'r> {
    /// The first `n` bytes of `tx`.
    Tx(usize),
    /// A file's content, borrowed from the request.
    Content(&'r [u8]),
}

/// Where [`Outgoing`] stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The head is in `tx[..len]` already.
    HeadWritten(usize),
    /// The head is to be written (again).
    Head,
    /// File `i`: its part head, its content, the `\r\n` after it.
    PartHead(usize),
    Content(usize),
    PartEnd(usize),
    Done,
}

/// The bytes of one request, chunk by chunk: see the [module docs](self).
///
/// Only [`new`](Self::new) depends on the request's type: the rest is one copy of
/// its parts for every request type (each copy would be flash).
pub struct Outgoing<'r, R> {
    parts: Parts<'r>,
    req: PhantomData<&'r R>,
}

impl<R> core::fmt::Debug for Outgoing<'_, R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Outgoing")
            .field("method", &self.parts.method)
            .field("path", &self.parts.path)
            .field("upload", &self.parts.upload)
            .field("step", &self.parts.step)
            .finish_non_exhaustive()
    }
}

/// What [`Outgoing`] needs of its request, whatever its type.
pub(crate) struct Parts<'r> {
    method: Method,
    path: &'static str,
    query: &'r dyn EncodeQuery,
    upload: Option<Upload<'r>>,
    step: Step,
}

/// The body of an upload.
#[derive(Debug)]
pub(crate) struct Upload<'r> {
    bench: File<'r>,
    includes: &'r [File<'r>],
    boundary: Boundary,
    /// The upload's `Content-Length`.
    len: u64,
    /// [`Upload::step`], reached through a pointer that only the request types with a
    /// body set: a client that sends none links no multipart writer.
    step: UploadStep<'r>,
    /// [`Upload::head`], likewise.
    head: UploadHead<'r>,
}

type UploadHead<'r> =
    fn(&Parts<'r>, &Upload<'r>, &Headers<'_>, &mut [u8]) -> Result<usize, EncodeError>;

type UploadStep<'r> =
    fn(&Upload<'r>, Step, &mut [u8]) -> Result<(Option<Chunk<'r>>, Step), EncodeError>;

impl<'r, R: Request> Outgoing<'r, R> {
    /// The request `req`, its head written into `tx` now (so what cannot be sent fails
    /// before a connection is opened). An upload gets a boundary that occurs in none of
    /// its files, drawn from `seed` (a random number; any value works).
    ///
    /// `tx` must be handed to [`next`](Self::next) untouched until its first chunk was
    /// written.
    pub fn new(
        req: &'r R,
        headers: &Headers<'_>,
        seed: u64,
        tx: &mut [u8],
    ) -> Result<Self, EncodeError> {
        let upload = Upload::of(req, seed)?;
        Ok(Outgoing {
            parts: Parts::new(R::METHOD, R::PATH, req, upload, headers, tx)?,
            req: PhantomData,
        })
    }

    /// Starts over (to send the request again on a new connection).
    ///
    /// ```
    /// use benchlink_core::bench::exchange::{Chunk, Headers, Outgoing};
    /// use benchlink_core::bench::request::Status;
    /// let headers = Headers { authority: "h", prefix: "", user_agent: "doc", bearer: None };
    /// let mut tx = [0u8; 256];
    /// let mut out = Outgoing::new(&Status { id: 1 }, &headers, 1, &mut tx).unwrap();
    /// let first = out.next(&headers, &mut tx).unwrap();
    /// assert!(out.next(&headers, &mut tx).unwrap().is_none());
    /// out.restart();
    /// assert_eq!(out.next(&headers, &mut tx).unwrap(), first);
    /// ```
    pub fn restart(&mut self) {
        self.parts.restart();
    }

    /// The next chunk to write, `None` once the whole request was handed out. `tx` is
    /// overwritten for every [`Chunk::Tx`]; `headers` are those given to
    /// [`new`](Self::new).
    pub fn next(
        &mut self,
        headers: &Headers<'_>,
        tx: &mut [u8],
    ) -> Result<Option<Chunk<'r>>, EncodeError> {
        self.parts.next(headers, tx)
    }
}

impl<'r> Parts<'r> {
    /// [`Outgoing::new`] without the request's type (its upload drawn already), for a
    /// client loop that exists once for every request type.
    pub(crate) fn new(
        method: Method,
        path: &'static str,
        query: &'r dyn EncodeQuery,
        upload: Option<Upload<'r>>,
        headers: &Headers<'_>,
        tx: &mut [u8],
    ) -> Result<Self, EncodeError> {
        let mut parts = Parts {
            method,
            path,
            query,
            upload,
            step: Step::Head,
        };
        parts.step = Step::HeadWritten(parts.write_head(headers, tx)?);
        Ok(parts)
    }

    /// A request that cannot be sent (its head or upload failed): nothing to write.
    pub(crate) fn unsendable(
        method: Method,
        path: &'static str,
        query: &'r dyn EncodeQuery,
    ) -> Self {
        Parts {
            method,
            path,
            query,
            upload: None,
            step: Step::Done,
        }
    }

    /// See [`Outgoing::restart`].
    pub(crate) fn restart(&mut self) {
        self.step = Step::Head;
    }

    /// See [`Outgoing::next`].
    pub(crate) fn next(
        &mut self,
        headers: &Headers<'_>,
        tx: &mut [u8],
    ) -> Result<Option<Chunk<'r>>, EncodeError> {
        let (chunk, next) = match self.step {
            Step::Done => return Ok(None),
            Step::HeadWritten(n) => (Some(Chunk::Tx(n)), Step::PartHead(0)),
            Step::Head => (
                Some(Chunk::Tx(self.write_head(headers, tx)?)),
                Step::PartHead(0),
            ),
            step => match &self.upload {
                Some(upload) => (upload.step)(upload, step, tx)?,
                None => (None, Step::Done),
            },
        };
        self.step = next;
        Ok(chunk)
    }

    fn write_head(&self, headers: &Headers<'_>, tx: &mut [u8]) -> Result<usize, EncodeError> {
        match &self.upload {
            Some(upload) => (upload.head)(self, upload, headers, tx),
            None => self.write_head_with(Body::Empty, headers, tx),
        }
    }

    /// The head with `body`: an upload's through its pointer, so a client that sends
    /// none links no multipart head either.
    fn write_head_with(
        &self,
        body: Body<'_>,
        headers: &Headers<'_>,
        tx: &mut [u8],
    ) -> Result<usize, EncodeError> {
        let head = RequestHead {
            method: self.method,
            prefix: headers.prefix,
            path: self.path,
            host: headers.authority,
            user_agent: headers.user_agent,
            bearer: headers.bearer,
            body,
            keep_alive: true,
        };
        let mut out = Cursor::new(tx);
        head.encode(self.query, &mut out)?;
        Ok(out.len())
    }
}

impl<'r> Upload<'r> {
    /// The upload of `req`, if it has a body, its boundary drawn from `seed`.
    pub(crate) fn of<R: Request>(req: &'r R, seed: u64) -> Result<Option<Self>, EncodeError> {
        Ok(match req.body() {
            BenchBody::Empty => None,
            BenchBody::Multipart { bench, includes } => Some(Upload::new(bench, includes, seed)?),
        })
    }

    /// Any number of files: they are walked in place, never gathered.
    fn new(bench: File<'r>, includes: &'r [File<'r>], seed: u64) -> Result<Self, EncodeError> {
        let boundary = pick_boundary(seed, bench, includes);
        // content_length is additive over parts apart from the closing delimiter, so
        // parts are measured one at a time (no array of parts).
        let closing = boundary.content_length(&[])?;
        let mut len = closing;
        for (name, file) in files(bench, includes) {
            let one = boundary.content_length(&[part(name, &file)])?;
            len = len.saturating_add(one.saturating_sub(closing));
        }
        Ok(Upload {
            bench,
            includes,
            boundary,
            len,
            step: Upload::step,
            head: Upload::head,
        })
    }

    /// The request head announcing this upload.
    fn head(
        parts: &Parts<'r>,
        upload: &Upload<'r>,
        headers: &Headers<'_>,
        tx: &mut [u8],
    ) -> Result<usize, EncodeError> {
        let body = Body::Multipart {
            boundary: &upload.boundary,
            len: upload.len,
        };
        parts.write_head_with(body, headers, tx)
    }

    /// The chunk of `step` after the head: file `i`'s part head, its content, the `\r\n`
    /// after it, and after the last file the closing delimiter.
    fn step(&self, step: Step, tx: &mut [u8]) -> Result<(Option<Chunk<'r>>, Step), EncodeError> {
        let file = |i: usize| files(self.bench, self.includes).nth(i);
        let mut out = Cursor::new(tx);
        Ok(match step {
            Step::PartHead(i) => match file(i) {
                Some((name, f)) => {
                    self.boundary.part_head(&part(name, &f), &mut out)?;
                    (Some(Chunk::Tx(out.len())), Step::Content(i))
                }
                None => {
                    self.boundary.closing(&mut out)?;
                    (Some(Chunk::Tx(out.len())), Step::Done)
                }
            },
            Step::Content(i) => {
                let content = file(i).map_or(&[][..], |(_, f)| f.content);
                (Some(Chunk::Content(content)), Step::PartEnd(i))
            }
            Step::PartEnd(i) => {
                out.push(b"\r\n")?;
                (
                    Some(Chunk::Tx(out.len())),
                    Step::PartHead(i.saturating_add(1)),
                )
            }
            Step::Head | Step::HeadWritten(_) | Step::Done => (None, Step::Done),
        })
    }
}

/// A boundary that occurs in none of the files (a random one almost never does; the
/// check makes it certain).
fn pick_boundary(seed: u64, bench: File<'_>, includes: &[File<'_>]) -> Boundary {
    let mut seed = seed | 1;
    loop {
        let mut random = [0u8; BOUNDARY_LEN];
        for b in random.iter_mut() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            *b = (seed >> 24) as u8;
        }
        let boundary = Boundary::from_random(random);
        let needle = boundary.as_str().as_bytes();
        if !files(bench, includes)
            .any(|(_, f)| f.content.windows(needle.len()).any(|w| w == needle))
        {
            return boundary;
        }
    }
}

/// The files of an upload, `bench` first.
fn files<'a>(
    bench: File<'a>,
    includes: &'a [File<'a>],
) -> impl Iterator<Item = (&'static str, File<'a>)> + 'a {
    core::iter::once(("bench", bench)).chain(includes.iter().map(|f| ("include", *f)))
}

fn part<'a>(name: &'a str, file: &File<'a>) -> Part<'a> {
    Part {
        name,
        filename: file.name,
        content_type: Part::content_type(file.name),
        len: file.content.len() as u64,
    }
}

/// Where a response goes as it is decoded: its status, then its body piece by piece.
/// Breaking stops the exchange (the connection must then be dropped: its framing is
/// unknown).
pub trait Sink {
    /// The response head arrived with this status.
    fn head(&mut self, status: u16) -> ControlFlow<()>;
    /// The next piece of the body.
    fn data(&mut self, data: &[u8]) -> ControlFlow<()>;
}

/// A JSON reply gathered into a buffer; an error reply as far as it fits (enough to
/// classify it).
#[derive(Debug)]
pub struct ReplyBody<'b> {
    buf: &'b mut [u8],
    len: usize,
    status: u16,
    overflow: bool,
}

/// Why a JSON call failed once its response was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ReplyError<'b> {
    /// A 200 reply larger than the body buffer.
    TooLarge {
        /// The body buffer's size.
        max: usize,
    },
    /// The server's error, or a reply of the wrong shape.
    Server(Error<'b>),
}

impl<'b> ReplyBody<'b> {
    /// Gathers into `buf`, whose size is the largest reply accepted.
    pub fn new(buf: &'b mut [u8]) -> Self {
        ReplyBody {
            buf,
            len: 0,
            status: 0,
            overflow: false,
        }
    }

    /// The typed reply of `R` (a zero-copy view into the buffer), or why there is none.
    pub fn finish<R: JsonRequest>(self) -> Result<R::Reply<'b>, ReplyError<'b>> {
        let gathered = self.gathered();
        let buf: &'b [u8] = self.buf;
        gathered.finish::<R>(buf)
    }

    /// How far it got, apart from the buffer: to read the reply later from the same
    /// buffer (a polling loop cannot return a reply borrowed in one of its rounds; it
    /// returns one read again after the loop).
    ///
    /// ```
    /// use benchlink_core::bench::exchange::{ReplyBody, Sink};
    /// use benchlink_core::bench::request::Status;
    /// let mut buf = [0u8; 64];
    /// let mut reply = ReplyBody::new(&mut buf);
    /// let _ = reply.head(404);
    /// let _ = reply.data(br#"{"reason_code":"not_found","reason":"no"}"#);
    /// let gathered = reply.gathered();
    /// drop(reply);
    /// let error = gathered.finish::<Status>(&buf).unwrap_err();
    /// # let _ = error;
    /// ```
    pub fn gathered(&self) -> Gathered {
        Gathered {
            len: self.len,
            status: self.status,
            overflow: self.overflow,
        }
    }
}

/// What a [`ReplyBody`] gathered, apart from its buffer: see [`ReplyBody::gathered`].
///
/// ```
/// use benchlink_core::bench::exchange::{Gathered, ReplyBody};
/// let mut buf = [0u8; 8];
/// let gathered: Gathered = ReplyBody::new(&mut buf).gathered(); // Copy: it borrows nothing
/// let again = gathered;
/// assert_eq!(again, gathered);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gathered {
    len: usize,
    status: u16,
    overflow: bool,
}

impl Gathered {
    /// The response's HTTP status.
    pub fn status(self) -> u16 {
        self.status
    }

    /// The server's error, read from `buf`, the buffer its body was gathered in (see
    /// [`StreamBody::gathered`]).
    pub fn error(self, buf: &[u8]) -> Error<'_> {
        Error::from_reply(self.status, buf.get(..self.len).unwrap_or_default())
    }

    /// [`ReplyBody::finish`] over `buf`, the buffer the reply was gathered in.
    ///
    /// ```
    /// use benchlink_core::bench::exchange::{ReplyBody, Sink};
    /// use benchlink_core::bench::request::Status;
    /// let mut buf = [0u8; 64];
    /// let mut reply = ReplyBody::new(&mut buf);
    /// let _ = reply.head(200);
    /// let _ = reply.data(br#"{"status":"running"}"#);
    /// let gathered = reply.gathered();
    /// assert!(!gathered.finish::<Status>(&buf).unwrap().status.is_final());
    /// ```
    pub fn finish<R: JsonRequest>(self, buf: &[u8]) -> Result<R::Reply<'_>, ReplyError<'_>> {
        if self.overflow && self.status == 200 {
            return Err(ReplyError::TooLarge { max: buf.len() });
        }
        let body = buf.get(..self.len).unwrap_or_default();
        R::read_reply(self.status, body).map_err(ReplyError::Server)
    }
}

impl Sink for ReplyBody<'_> {
    fn head(&mut self, status: u16) -> ControlFlow<()> {
        self.status = status;
        ControlFlow::Continue(())
    }

    fn data(&mut self, data: &[u8]) -> ControlFlow<()> {
        if keep(self.buf, &mut self.len, data) {
            return ControlFlow::Continue(());
        }
        // An error body is kept as far as it fits; a reply is not read further.
        self.overflow = true;
        ControlFlow::Break(())
    }
}

/// Appends as much of `data` to `buf[..*len]` as fits; whether all of it did.
fn keep(buf: &mut [u8], len: &mut usize, data: &[u8]) -> bool {
    let take = data.len().min(buf.len().saturating_sub(*len));
    let end = len.saturating_add(take);
    if let (Some(dst), Some(src)) = (buf.get_mut(*len..end), data.get(..take)) {
        dst.copy_from_slice(src);
        *len = end;
    }
    take == data.len()
}

/// A stream's lines handed to `on_line` as they arrive (decoded per `F`; a bad line is
/// an `Err` item and the stream goes on), or an error reply kept as far as it fits.
pub struct StreamBody<'b, 'l, F: LineFormat, C> {
    lines: LineDecoder<'l, F>,
    err: &'b mut [u8],
    err_len: usize,
    status: u16,
    stopped: bool,
    on_line: C,
}

impl<F: LineFormat, C> core::fmt::Debug for StreamBody<'_, '_, F, C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StreamBody")
            .field("status", &self.status)
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}

impl<'b, 'l, F, C> StreamBody<'b, 'l, F, C>
where
    F: LineFormat,
    C: FnMut(Result<F::Item<'_>, F::Error<'_>>) -> ControlFlow<()>,
{
    /// Lines of up to `line.len()` bytes; an error body of up to `err.len()`.
    ///
    /// ```
    /// use benchlink_core::bench::exchange::{Sink, StreamBody};
    /// use benchlink_core::bench::MetricLine;
    /// use core::ops::ControlFlow;
    /// let (mut line, mut err) = ([0u8; 64], [0u8; 64]);
    /// let mut names = Vec::new();
    /// let mut body = StreamBody::<MetricLine, _>::new(&mut line, &mut err, |sample| {
    ///     names.push(sample.unwrap().name.to_owned());
    ///     ControlFlow::Continue(())
    /// });
    /// let _ = body.head(200);
    /// let _ = body.data(b"1439245024\tprint\t30\n1439245025\tpr");
    /// let _ = body.data(b"int\t31");
    /// body.finish().unwrap();
    /// assert_eq!(names, ["print", "print"]);
    /// ```
    pub fn new(line: &'l mut [u8], err: &'b mut [u8], on_line: C) -> Self {
        StreamBody {
            lines: LineDecoder::new(line),
            err,
            err_len: 0,
            status: 0,
            stopped: false,
            on_line,
        }
    }

    /// The response's status and its error body's length, apart from the buffers: a
    /// client that must return the server's error from outside a loop over requests
    /// reads it again from the error buffer ([`Gathered::error`]).
    ///
    /// ```
    /// use benchlink_core::bench::exchange::{Sink, StreamBody};
    /// use benchlink_core::bench::LogLine;
    /// use core::ops::ControlFlow;
    /// let (mut line, mut err) = ([0u8; 64], [0u8; 64]);
    /// let mut body = StreamBody::<LogLine, _>::new(&mut line, &mut err, |_| ControlFlow::Continue(()));
    /// let _ = body.head(503);
    /// let _ = body.data(br#"{"reason_code":"service_unavailable","reason":"later"}"#);
    /// let gathered = body.gathered();
    /// drop(body);
    /// assert_eq!(gathered.status(), 503);
    /// assert_eq!(gathered.error(&err).http_status(), Some(503));
    /// ```
    pub fn gathered(&self) -> Gathered {
        Gathered {
            len: self.err_len,
            status: self.status,
            overflow: false,
        }
    }

    /// After the body ended: hands out the last, unterminated line (unless `on_line`
    /// stopped the stream), or returns the server's error.
    pub fn finish(mut self) -> Result<(), Error<'b>> {
        if self.status != 200 {
            let body: &'b [u8] = self.err;
            let body = body.get(..self.err_len).unwrap_or_default();
            return Err(Error::from_reply(self.status, body));
        }
        if !self.stopped {
            if let Some(last) = self.lines.finish() {
                let _ = (self.on_line)(last);
            }
        }
        Ok(())
    }
}

impl<F, C> Sink for StreamBody<'_, '_, F, C>
where
    F: LineFormat,
    C: FnMut(Result<F::Item<'_>, F::Error<'_>>) -> ControlFlow<()>,
{
    fn head(&mut self, status: u16) -> ControlFlow<()> {
        self.status = status;
        ControlFlow::Continue(())
    }

    fn data(&mut self, mut data: &[u8]) -> ControlFlow<()> {
        if self.status == 200 {
            while let Some(line) = self.lines.next(&mut data) {
                if (self.on_line)(line).is_break() {
                    self.stopped = true;
                    return ControlFlow::Break(());
                }
            }
        } else {
            // An error body, kept as far as it fits.
            keep(self.err, &mut self.err_len, data);
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests;

//! Errors of the std benchmark client: every failure says what failed, which server and
//! which request it concerned, and a server's own error keeps its HTTP status,
//! `reason_code` and `reason`. Text that came from the server is shown with its control
//! characters escaped, so a reply can not drive the user's terminal.

use std::fmt;
use std::io;
use std::time::Duration;

use benchlink_core::bench::exchange::ClientError;
/// What a timed-out request was waiting for: core's list, the one every client of the
/// server reports (and words) its timeouts with.
pub use benchlink_core::bench::exchange::Waiting;
use benchlink_core::bench::{self as core_bench, ReasonCode};
use benchlink_core::http::{DecodeError, EncodeError};

use super::address::AddressError;
use super::model::text;

/// The longest piece of a server's text an error message shows.
const MAX_SHOWN: usize = 300;

/// What went wrong ([`Error::kind`]), with the server and the request it happened on.
///
/// ```
/// use benchlink_std::bench::{Error, ErrorKind};
/// let e = Error::from(ErrorKind::Server { status: 404, code: "not_found".into(), reason: "Benchmark 9 is not found".into() })
///     .with_request("127.0.0.1:4800", "GET /status?id=9");
/// assert_eq!(e.to_string(), "127.0.0.1:4800 answered GET /status?id=9 with 404 not_found: Benchmark 9 is not found");
/// assert_eq!(e.server(), Some("127.0.0.1:4800"));
/// ```
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    context: Option<Box<Context>>,
    /// A request that changes the server's state failed after it went out: whether it
    /// was carried out is unknown, and this says how to find out.
    unknown_outcome: Option<&'static str>,
}

/// The server and request an error happened on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Context {
    server: String,
    request: String,
}

/// What went wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The server address could not be parsed.
    Address(AddressError),
    /// The connection could not be opened (name resolution, TCP, refused).
    Connect(io::Error),
    /// Sending or receiving failed on an open connection (TLS errors included).
    Io(io::Error),
    /// A deadline passed: the whole-request limit of a JSON call, or the idle limit of a
    /// stream.
    Timeout {
        /// The limit.
        after: Duration,
        /// What the client was waiting for.
        waiting: Waiting,
    },
    /// The request could not be encoded (a value with CR/LF, say).
    Encode(EncodeError),
    /// The response was not valid HTTP (or exceeded a limit).
    Http(DecodeError),
    /// The server answered with its error object.
    Server {
        /// HTTP status (404, 400, 403, 500, 503…).
        status: u16,
        /// `reason_code` as sent; [`Error::reason_code`] gives the typed value.
        code: String,
        /// `reason`, the human-readable text, as sent (printing the error escapes it).
        reason: String,
    },
    /// A non-200 reply without the server's error object (a proxy page, say).
    Status {
        /// HTTP status.
        status: u16,
        /// The start of the body, for diagnosis.
        body: String,
    },
    /// A 200 reply that is not what the endpoint returns, or a line of a stream that is
    /// not what the stream carries.
    Reply(String),
    /// The task that carried the request on tokio's blocking pool (the async client of
    /// feature `tokio`) ended without a result: it panicked, or the runtime was shutting
    /// down. Whether a request that changes state was carried out is then unknown.
    Task(String),
}

impl Error {
    /// Marks a failure of a request that changes the server's state (`/start`, `/stop`,
    /// the tags…) after its bytes went out: the server may have carried it out, so it
    /// is not sent again, and `check` says how to find out.
    pub(crate) fn with_unknown_outcome(mut self, check: &'static str) -> Error {
        self.unknown_outcome = Some(check);
        self
    }

    /// Whether the request (one that changes the server's state) may have been carried
    /// out although it failed: it went out and the connection broke before the reply.
    /// Such a request is never sent again by the client; the error's text says how to
    /// check.
    ///
    /// ```
    /// use benchlink_std::bench::{Error, ErrorKind};
    /// let e = Error::from(ErrorKind::Reply("x".into()));
    /// assert!(!e.outcome_unknown());
    /// ```
    pub fn outcome_unknown(&self) -> bool {
        self.unknown_outcome.is_some()
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The kind, dropping the context.
    pub fn into_kind(self) -> ErrorKind {
        self.kind
    }

    /// The server (`host:port`) the failed request went to, when known.
    pub fn server(&self) -> Option<&str> {
        self.context.as_deref().map(|c| c.server.as_str())
    }

    /// The failed request (`GET /status?id=3`), when known.
    pub fn request(&self) -> Option<&str> {
        self.context.as_deref().map(|c| c.request.as_str())
    }

    /// Names the server and the request (kept if already named).
    pub fn with_request(mut self, server: impl Into<String>, request: impl Into<String>) -> Error {
        if self.context.is_none() {
            self.context = Some(Box::new(Context {
                server: server.into(),
                request: request.into(),
            }));
        }
        self
    }

    /// The server's typed `reason_code`, when the server sent its error object.
    ///
    /// ```
    /// use benchlink_std::bench::{Error, ErrorKind};
    /// use benchlink_core::bench::ReasonCode;
    /// let e = Error::from(ErrorKind::Server { status: 404, code: "not_found".into(), reason: "Benchmark 9 is not found".into() });
    /// assert_eq!(e.reason_code(), Some(ReasonCode::NotFound));
    /// ```
    pub fn reason_code(&self) -> Option<ReasonCode<'_>> {
        match &self.kind {
            ErrorKind::Server { code, .. } => Some(ReasonCode::parse(code)),
            _ => None,
        }
    }

    /// The HTTP status of a server-side failure.
    pub fn http_status(&self) -> Option<u16> {
        match &self.kind {
            ErrorKind::Server { status, .. } | ErrorKind::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// True when a deadline passed (see [`ErrorKind::Timeout`]).
    pub fn is_timeout(&self) -> bool {
        matches!(self.kind, ErrorKind::Timeout { .. })
    }

    /// The server's `reason` (for a server error), unescaped.
    pub fn reason(&self) -> Option<&str> {
        match &self.kind {
            ErrorKind::Server { reason, .. } => Some(reason),
            _ => None,
        }
    }
}

/// `5 s`, `1.5 s`, `200 ms`.
pub(crate) struct Seconds(pub(crate) Duration);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.subsec_nanos() == 0 {
            write!(f, "{} s", d.as_secs())
        } else if d < Duration::from_secs(1) {
            write!(f, "{} ms", d.as_millis())
        } else {
            write!(f, "{:.1} s", d.as_secs_f64())
        }
    }
}

/// Text from a server, shown with control characters (ESC, CR, BEL, C1 codes…) escaped
/// as `\u{1b}` and cut after `max` characters.
///
/// ```
/// use benchlink_std::bench::Escaped;
/// assert_eq!(Escaped::new("red \x1b[31m!\r").to_string(), "red \\u{1b}[31m!\\r");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a> {
    text: &'a str,
    max: usize,
}

impl<'a> Escaped<'a> {
    /// All of `text`, escaped.
    pub fn new(text: &'a str) -> Escaped<'a> {
        Escaped {
            text,
            max: usize::MAX,
        }
    }

    /// At most `max` characters of `text` (then `…`), escaped.
    pub fn cut(text: &'a str, max: usize) -> Escaped<'a> {
        Escaped { text, max }
    }
}

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.text;
        // Runs of harmless characters go out in one piece.
        let mut run = 0;
        for (count, (i, c)) in text.char_indices().enumerate() {
            if count == self.max {
                f.write_str(text.get(run..i).unwrap_or_default())?;
                return f.write_str("…");
            }
            if c.is_control() {
                f.write_str(text.get(run..i).unwrap_or_default())?;
                match c {
                    '\n' => f.write_str("\\n")?,
                    '\r' => f.write_str("\\r")?,
                    '\t' => f.write_str("\\t")?,
                    c => write!(f, "\\u{{{:x}}}", u32::from(c))?,
                }
                run = i + c.len_utf8();
            }
        }
        f.write_str(text.get(run..).unwrap_or_default())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let server = self.server().unwrap_or("the server");
        let request = self.request();
        match &self.kind {
            ErrorKind::Address(e) => return e.fmt(f),
            ErrorKind::Connect(e) => write!(f, "could not connect to {server}: {e}")?,
            ErrorKind::Io(e) => write!(f, "connection to {server} failed: {e}")?,
            ErrorKind::Timeout { after, waiting } => {
                waiting.fmt_timeout(f, server, &Seconds(*after))?
            }
            ErrorKind::Encode(e) => write!(f, "the request could not be encoded: {e}")?,
            ErrorKind::Http(e) => write!(f, "bad HTTP response from {server}: {e}")?,
            ErrorKind::Server {
                status,
                code,
                reason,
            } => {
                // A 500's reason is a whole Erlang crash report; its first line says it.
                let first = reason.lines().next().unwrap_or_default();
                let (code, first) = (Escaped::cut(code, 64), Escaped::cut(first, MAX_SHOWN));
                return match request {
                    Some(r) => write!(f, "{server} answered {r} with {status} {code}: {first}"),
                    None => write!(f, "server error {status} {code}: {first}"),
                };
            }
            ErrorKind::Status { status, body } => write!(
                f,
                "{server} answered with HTTP {status}: {}",
                Escaped::cut(body.trim(), MAX_SHOWN)
            )?,
            ErrorKind::Reply(what) => write!(
                f,
                "unexpected reply from {server}: {}",
                Escaped::cut(what, MAX_SHOWN)
            )?,
            ErrorKind::Task(what) => write!(f, "the request to {server} was lost: {what}")?,
        }
        if let Some(r) = request {
            write!(f, " ({r})")?;
        }
        match self.unknown_outcome {
            Some(check) => write!(
                f,
                "; the request went out before the connection failed, so the server may \
                 have carried it out (it is not sent again): {check}"
            ),
            None => Ok(()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Address(e) => Some(e),
            ErrorKind::Connect(e) | ErrorKind::Io(e) => Some(e),
            ErrorKind::Encode(e) => Some(e),
            ErrorKind::Http(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Error {
        Error {
            kind,
            context: None,
            unknown_outcome: None,
        }
    }
}

impl From<AddressError> for Error {
    fn from(e: AddressError) -> Error {
        ErrorKind::Address(e).into()
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        ErrorKind::Io(e).into()
    }
}

impl From<EncodeError> for Error {
    fn from(e: EncodeError) -> Error {
        ErrorKind::Encode(e).into()
    }
}

/// Core's error of a benchmark client (the one the blocking and embassy clients
/// return), with the socket's `io::Error`s: the std client's own failures are core's,
/// told with the server and request they happened on.
///
/// ```
/// use benchlink_core::bench::exchange::{ClientError, Waiting};
/// use benchlink_std::bench::Error;
/// use std::{io, time::Duration};
/// let e: ClientError<'_, io::Error, io::Error> =
///     ClientError::Timeout { after: Duration::from_secs(5), waiting: Waiting::Send };
/// let e = Error::from(e).with_request("127.0.0.1:4800", "POST /start");
/// assert_eq!(e.to_string(), "127.0.0.1:4800 did not take the request within 5 s (POST /start)");
/// ```
impl From<ClientError<'_, io::Error, io::Error>> for Error {
    fn from(e: ClientError<'_, io::Error, io::Error>) -> Error {
        match e {
            ClientError::Encode(e) => ErrorKind::Encode(e),
            ClientError::Connect(e) => ErrorKind::Connect(e),
            ClientError::Io(e) => ErrorKind::Io(e),
            ClientError::Decode(e) => ErrorKind::Http(e),
            ClientError::Timeout { after, waiting } => ErrorKind::Timeout { after, waiting },
            ClientError::BodyTooLarge { max } => {
                ErrorKind::Http(DecodeError::BodyTooLarge { max: max as u64 })
            }
            ClientError::Server(e) => return e.into(),
        }
        .into()
    }
}

impl From<core_bench::Error<'_>> for Error {
    fn from(e: core_bench::Error<'_>) -> Error {
        match e {
            core_bench::Error::Server(s) => ErrorKind::Server {
                status: s.http_status,
                code: s.reason_code.as_str().to_owned(),
                reason: text(s.reason),
            },
            core_bench::Error::Http { status, body, .. } => ErrorKind::Status {
                status,
                body: String::from_utf8_lossy(body).into_owned(),
            },
            other => ErrorKind::Reply(other.to_string()),
        }
        .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_text_is_escaped_and_cut() {
        let e = Error::from(ErrorKind::Server {
            status: 500,
            code: "internal\x1b]0;x\x07".into(),
            reason: "\x1b[2J\u{9b}boom\nsecond line".into(),
        })
        .with_request("h:1", "GET /status?id=1");
        assert_eq!(
            e.to_string(),
            "h:1 answered GET /status?id=1 with 500 internal\\u{1b}]0;x\\u{7}: \\u{1b}[2J\\u{9b}boom"
        );
        assert_eq!(Escaped::cut("abcdef", 3).to_string(), "abc…");
        assert_eq!(Escaped::cut("ab\ncd", 3).to_string(), "ab\\n…");
        assert_eq!(Escaped::new("").to_string(), "");
        assert_eq!(Escaped::new("é\u{7f}").to_string(), "é\\u{7f}");
    }

    #[test]
    fn timeouts_say_what_did_not_come() {
        let e = Error::from(ErrorKind::Timeout {
            after: Duration::from_secs(5),
            waiting: Waiting::Reply,
        })
        .with_request("127.0.0.1:4800", "GET /status?id=3");
        assert_eq!(
            e.to_string(),
            "no reply from 127.0.0.1:4800 within 5 s (GET /status?id=3)"
        );
        assert!(e.is_timeout());
        assert_eq!(Seconds(Duration::from_millis(200)).to_string(), "200 ms");
        assert_eq!(Seconds(Duration::from_millis(1500)).to_string(), "1.5 s");
    }
}

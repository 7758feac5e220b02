//! What can go wrong talking to the benchmark server, as one typed error.
//!
//! The server reports failures as `{"reason":…,"reason_code":…}` with the status that
//! goes with the code (see [`ReasonCode`]); anything else that is not a 200 (a proxy's
//! HTML page, a truncated body) is still an error, kept as a bounded view of the raw body
//! so it can be logged without copying or unbounded output.

use core::fmt;

use crate::json::{self, JsonStr};

/// Nesting limit for every reply body: the deepest real reply (`/results`) is 3 levels.
pub(crate) const REPLY_MAX_DEPTH: usize = 16;

/// How much of a non-JSON error body [`Error::Http`] keeps: enough for a proxy's
/// message, never a whole page in a log line.
pub const MAX_BODY_VIEW: usize = 256;

text_enum! {
    /// The server's `reason_code`. There is no `bad_request`: bad or missing parameters
    /// give `internal_error` (500) on a modern server, `badarg` (400) only for checked
    /// values.
    ReasonCode in "bench" (example "not_found" => NotFound) {
        /// 404: unknown benchmark or cluster, or wrong method/path.
        NotFound = "not_found",
        /// 400: a parameter value was rejected, or the benchmark is in the wrong state.
        Badarg = "badarg",
        /// 400: `/run_command` before the benchmark is running.
        NotRunning = "not_running",
        /// 403: authentication or access control refused the request.
        Forbidden = "forbidden",
        /// 503: the server is shutting down.
        ServiceUnavailable = "service_unavailable",
        /// 500: anything unexpected on the server, including missing or non-integer
        /// parameters (its `reason` can be kilobytes of Erlang terms).
        InternalError = "internal_error",
        /// 501: mapped by the server but never raised.
        NotSupported = "not_supported",
        /// 400 from `/typecheck`: the scenario has a type or syntax error.
        Error = "error",
    }
}

/// The server's own error reply.
///
/// ```
/// use benchlink_core::bench::{Error, ReasonCode};
/// let body = br#"{"reason":"Benchmark 12 is not found","reason_code":"not_found"}"#;
/// let Error::Server(e) = Error::from_reply(404, body) else { panic!() };
/// assert_eq!((e.http_status, e.reason_code), (404, ReasonCode::NotFound));
/// assert!(e.reason == "Benchmark 12 is not found");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ServerError<'a> {
    /// The HTTP status of the reply.
    pub http_status: u16,
    /// The `reason_code` field.
    pub reason_code: ReasonCode<'a>,
    /// The `reason` field: human-readable, sometimes very long (500 replies).
    pub reason: JsonStr<'a>,
}

/// Everything a benchmark-server call can fail with once the HTTP exchange itself worked.
/// Borrowed from the reply body, so it lives as long as that buffer.
///
/// ```
/// use benchlink_core::bench::Error;
/// let e = Error::from_reply(502, b"<html>Bad Gateway</html>");
/// assert_eq!(e, Error::Http { status: 502, body: b"<html>Bad Gateway</html>", body_len: 24 });
/// assert_eq!(e.to_string(), "HTTP 502 without a server error object (24 bytes): <html>Bad Gateway</html>");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error<'a> {
    /// The server refused or failed the request and said why.
    Server(ServerError<'a>),
    /// A reply other than 200 whose body is not the server's error object.
    Http {
        /// The HTTP status.
        status: u16,
        /// The start of the body, at most [`MAX_BODY_VIEW`] bytes.
        body: &'a [u8],
        /// The full body length.
        body_len: usize,
    },
    /// A 200 reply whose body is not valid JSON (or not UTF-8).
    Json(json::Error),
    /// A 200 reply with valid JSON of the wrong shape.
    UnexpectedReply {
        /// What was missing or mistyped, e.g. "`status` as a string".
        expected: &'static str,
    },
}

impl<'a> Error<'a> {
    /// Classifies a reply that is not a 200: the server's error object if the body is
    /// one, [`Error::Http`] otherwise. Streaming endpoints (`/log`, `/data`, …) use this
    /// too: check the status *before* treating the body as lines (the official client
    /// does not, and yields a 404's JSON body as a log line).
    ///
    /// ```
    /// use benchlink_core::bench::{Error, ReasonCode};
    /// let body = br#"{"reason":"Wrong endpoint: <<\"GET\">> <<\"/foo\">>","reason_code":"not_found"}"#;
    /// let Error::Server(e) = Error::from_reply(404, body) else { panic!() };
    /// assert_eq!(e.reason.to_string(), r#"Wrong endpoint: <<"GET">> <<"/foo">>"#);
    /// ```
    pub fn from_reply(status: u16, body: &'a [u8]) -> Self {
        let server_error = json::parse_bytes(body, REPLY_MAX_DEPTH).ok().and_then(|v| {
            let reason_code = v.get("reason_code")?.as_str()?;
            Some(ServerError {
                http_status: status,
                reason_code: ReasonCode::from_json(reason_code),
                reason: v.get("reason")?.as_str()?,
            })
        });
        server_error.map_or(
            Error::Http {
                status,
                body: body.get(..MAX_BODY_VIEW).unwrap_or(body),
                body_len: body.len(),
            },
            Error::Server,
        )
    }

    /// The HTTP status behind the error, if the server answered with one other than 200.
    ///
    /// ```
    /// use benchlink_core::bench::Error;
    /// assert_eq!(Error::from_reply(500, b"").http_status(), Some(500));
    /// assert_eq!(Error::UnexpectedReply { expected: "an object" }.http_status(), None);
    /// ```
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Error::Server(e) => Some(e.http_status),
            Error::Http { status, .. } => Some(*status),
            Error::Json(_) | Error::UnexpectedReply { .. } => None,
        }
    }
}

impl fmt::Display for Error<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Server(e) => write!(
                f,
                "server error {} {}: {}",
                e.http_status, e.reason_code, e.reason
            ),
            Error::Http {
                status,
                body,
                body_len,
            } => {
                write!(
                    f,
                    "HTTP {status} without a server error object ({body_len} bytes): "
                )?;
                for chunk in body.utf8_chunks() {
                    f.write_str(chunk.valid())?;
                    if !chunk.invalid().is_empty() {
                        f.write_str("\u{FFFD}")?;
                    }
                }
                Ok(())
            }
            Error::Json(e) => write!(f, "reply is not valid JSON: {e}"),
            Error::UnexpectedReply { expected } => {
                write!(f, "unexpected reply: expected {expected}")
            }
        }
    }
}

impl core::error::Error for Error<'_> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Error::Json(e) => Some(e),
            _ => None,
        }
    }
}

impl From<json::Error> for Error<'_> {
    fn from(e: json::Error) -> Self {
        Error::Json(e)
    }
}

//! Errors of the std benchmark client: every failure says what failed, and a server's
//! own error keeps its HTTP status, `reason_code` and `reason`.

use std::fmt;
use std::io;

use benchlink_core::bench::{self as core_bench, ReasonCode};
use benchlink_core::http::{DecodeError, EncodeError};

use super::address::AddressError;
use super::model::text;
use crate::http::Failure;

/// What went wrong.
#[derive(Debug)]
pub enum Error {
    /// The server address could not be parsed.
    Address(AddressError),
    /// Connecting, sending or receiving failed.
    Io(io::Error),
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
        /// `reason`, the human-readable text.
        reason: String,
    },
    /// A non-200 reply without the server's error object (a proxy page, say).
    Status {
        /// HTTP status.
        status: u16,
        /// The start of the body, for diagnosis.
        body: String,
    },
    /// A 200 reply that is not what the endpoint returns.
    Reply(String),
}

impl Error {
    /// The server's typed `reason_code`, when the server sent its error object.
    ///
    /// ```
    /// use benchlink_std::bench::Error;
    /// use benchlink_core::bench::ReasonCode;
    /// let e = Error::Server { status: 404, code: "not_found".into(), reason: "Benchmark 9 is not found".into() };
    /// assert_eq!(e.reason_code(), Some(ReasonCode::NotFound));
    /// ```
    pub fn reason_code(&self) -> Option<ReasonCode<'_>> {
        match self {
            Error::Server { code, .. } => Some(ReasonCode::parse(code)),
            _ => None,
        }
    }

    /// The HTTP status of a server-side failure.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Error::Server { status, .. } | Error::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Address(e) => e.fmt(f),
            Error::Io(e) => write!(f, "connection failed: {e}"),
            Error::Encode(e) => write!(f, "request could not be encoded: {e}"),
            Error::Http(e) => write!(f, "bad HTTP response: {e}"),
            Error::Server {
                status,
                code,
                reason,
            } => {
                // A 500's reason is a whole Erlang crash report; its first line says it.
                let first = reason.lines().next().unwrap_or_default();
                write!(f, "server error {status} {code}: {first}")
            }
            Error::Status { status, body } => write!(f, "HTTP {status}: {body}"),
            Error::Reply(what) => write!(f, "unexpected reply: {what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Address(e) => Some(e),
            Error::Io(e) => Some(e),
            Error::Encode(e) => Some(e),
            Error::Http(e) => Some(e),
            _ => None,
        }
    }
}

impl From<AddressError> for Error {
    fn from(e: AddressError) -> Error {
        Error::Address(e)
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io(e)
    }
}

impl From<EncodeError> for Error {
    fn from(e: EncodeError) -> Error {
        Error::Encode(e)
    }
}

impl From<Failure> for Error {
    fn from(f: Failure) -> Error {
        match f {
            Failure::Encode(e) => Error::Encode(e),
            Failure::Io(e) => Error::Io(e),
            Failure::Decode(e) => Error::Http(e),
        }
    }
}

impl From<core_bench::Error<'_>> for Error {
    fn from(e: core_bench::Error<'_>) -> Error {
        match e {
            core_bench::Error::Server(s) => Error::Server {
                status: s.http_status,
                code: s.reason_code.as_str().to_owned(),
                reason: text(s.reason),
            },
            core_bench::Error::Http { status, body, .. } => Error::Status {
                status,
                body: String::from_utf8_lossy(body).into_owned(),
            },
            other => Error::Reply(other.to_string()),
        }
    }
}

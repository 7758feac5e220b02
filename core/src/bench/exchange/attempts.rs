//! What a benchmark client does after each attempt at a request, the same for every
//! transport: keep the connection or close it, send the request again on a fresh one,
//! or fail — and whether to read a reply after a send that broke.

use super::ClientError;
use crate::http::{DecodeError, Section};

/// What happens to the connection after a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum After {
    /// Kept alive for the next request.
    Keep,
    /// Closed: the server said so, the body was close-delimited or abandoned, or the
    /// request did not all go out.
    Close,
}

/// What the client does after an attempt ([`Attempts::next`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next<E> {
    /// The response was taken; the connection goes on as said.
    Done(After),
    /// The kept-alive connection was found closed before any response: send the request
    /// again on a new connection (after dropping this one).
    Retry,
    /// The request failed (drop the connection).
    Fail(E),
}

/// The attempts at one request. Two rules every client of the server follows:
///
/// - **Stale connections are retried once.** A kept-alive connection the server closed
///   while it was idle fails the next request with an I/O error or an end of stream
///   before any response. A request that changes nothing on the server
///   ([`Request::IDEMPOTENT`](crate::bench::Request::IDEMPOTENT): not its method, since
///   the benchmark server changes state on `GET`s such as `/stop`) that met that on a
///   reused connection is sent again, once, on a new one; nothing else is repeated.
/// - **Early replies are read, not lost.** A server may answer before the request is all
///   out and close (413 for a scenario over its limit, 401, 503): the rest of the request
///   meets a broken pipe or a reset, but the reply was sent first. After a send that broke
///   ([`read_after`](Self::read_after)) the client reads the response like any other;
///   only when none can be read is the write's error the outcome (as curl does).
///
/// ```
/// use benchlink_core::bench::exchange::{After, Attempts, ClientError, Next};
///
/// type E = ClientError<'static, (), &'static str>;
/// let mut attempts = Attempts::new(true); // a GET /status
/// // The kept-alive connection was closed by the server: retried once…
/// let stale: Result<(), E> = Err(ClientError::Io("reset"));
/// assert!(Attempts::read_after(&stale));
/// let nothing: Result<After, E> = Err(ClientError::Io("reset"));
/// assert_eq!(attempts.next(stale, Some(nothing), true, false), Next::Retry);
/// // …then the new connection's answer is taken.
/// let sent: Result<(), E> = Ok(());
/// assert_eq!(attempts.next(sent, Some(Ok(After::Keep)), false, true), Next::Done(After::Keep));
///
/// // A 413 read after the upload's write broke: the reply, on a connection that closes.
/// let mut upload = Attempts::new(false); // a POST /start
/// let broke: Result<(), E> = Err(ClientError::Io("broken pipe"));
/// assert_eq!(upload.next(broke, Some(Ok(After::Keep)), false, true), Next::Done(After::Close));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempts {
    idempotent: bool,
    retried: bool,
}

impl Attempts {
    /// The attempts at a request; `idempotent`: one that changes nothing on the server,
    /// so that it may be sent again.
    pub fn new(idempotent: bool) -> Self {
        Attempts {
            idempotent,
            retried: false,
        }
    }

    /// Whether to read a response after a send that ended with `sent`: after a complete
    /// send, and after one that an I/O error broke (the server may have answered early);
    /// not after any other failure (a timeout, a request that could not be encoded).
    pub fn read_after<C, I>(sent: &Result<(), ClientError<'_, C, I>>) -> bool {
        matches!(sent, Ok(()) | Err(ClientError::Io(_)))
    }

    /// The outcome of an attempt: how its send ended, what reading the response gave
    /// (`None` when [`read_after`](Self::read_after) said not to read), whether the
    /// connection had carried a request before (`reused`) and whether any byte of a
    /// response arrived.
    pub fn next<'a, C, I>(
        &mut self,
        sent: Result<(), ClientError<'a, C, I>>,
        received: Option<Result<After, ClientError<'a, C, I>>>,
        reused: bool,
        got_response: bool,
    ) -> Next<ClientError<'a, C, I>> {
        let result = match (sent, received) {
            (Ok(()), Some(received)) => received,
            // The request did not all go out: the connection cannot carry another.
            (Err(_), Some(Ok(_))) => Ok(After::Close),
            // No reply could be read after a broken send: the write's error.
            (Err(e), _) => Err(e),
            (Ok(()), None) => Ok(After::Close),
        };
        match result {
            Ok(after) => Next::Done(after),
            Err(e) => {
                let stale = matches!(
                    e,
                    ClientError::Io(_)
                        | ClientError::Decode(DecodeError::UnexpectedEof {
                            section: Section::NoResponse
                        })
                );
                if self.retried || !reused || !self.idempotent || got_response || !stale {
                    Next::Fail(e)
                } else {
                    self.retried = true;
                    Next::Retry
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;

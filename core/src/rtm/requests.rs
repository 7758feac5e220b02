//! Per-request bookkeeping of the client: the user requests it can send, the table of
//! requests in flight (id → ticket, deadline), and the fixed header of an offline-queue
//! record.

use super::events::Ticket;
use super::pdu::{Action, Encoding, Payload, Request};
use crate::http::Cursor;
use crate::json::{self, WriteError};
use crate::time::Instant;

/// Upper bound of the envelope around a request body with the largest id:
/// `{"action":"rtm/subscribe","id":4294967295,"body":` … `}` (51 bytes with the longest
/// action name).
pub(crate) const ENVELOPE: usize = 52;

/// Upper bound of the fixed members of a publish, read, write, delete or search body:
/// `{"channel":"","message":}` (25 bytes; the others are shorter).
pub(crate) const REQUEST_MEMBERS: usize = 26;

/// The length of `s` once written as a JSON string by the escaping writer (without the
/// quotes): control characters take 6 bytes (`\u00XX`) or 2, `"` and `\` take 2.
pub(crate) fn escaped_len(s: &str) -> usize {
    s.bytes().fold(0usize, |n, b| {
        let w = match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0C => 2,
            0..=0x1F => 6,
            _ => 1,
        };
        n.saturating_add(w)
    })
}

/// The kinds of user request that carry a ticket or wait in the offline queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReqKind {
    Publish,
    Read,
    Write,
    Delete,
    Search,
    /// A queued `authenticate`: the credentials wait in the client's single auth slot.
    Auth,
    /// A raw action ([`Client::action`](super::Client::action)); its queue record holds
    /// the action name, a newline, then the body.
    Other,
}

impl ReqKind {
    /// The request action, which the reply's action must answer.
    pub(crate) fn action(self) -> Action<'static> {
        match self {
            ReqKind::Publish => Action::Publish,
            ReqKind::Read => Action::Read,
            ReqKind::Write => Action::Write,
            ReqKind::Delete => Action::Delete,
            ReqKind::Search => Action::Search,
            ReqKind::Auth => Action::Handshake,
            // Not used to match replies: a raw action accepts any outcome of its id.
            ReqKind::Other => Action::Other(""),
        }
    }

    fn to_byte(self) -> u8 {
        match self {
            ReqKind::Publish => 0,
            ReqKind::Read => 1,
            ReqKind::Write => 2,
            ReqKind::Delete => 3,
            ReqKind::Search => 4,
            ReqKind::Auth => 5,
            ReqKind::Other => 6,
        }
    }

    fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            0 => ReqKind::Publish,
            1 => ReqKind::Read,
            2 => ReqKind::Write,
            3 => ReqKind::Delete,
            4 => ReqKind::Search,
            5 => ReqKind::Auth,
            6 => ReqKind::Other,
            _ => return None,
        })
    }
}

/// What the client needs of a user request to send or queue it: a [`UserRequest`] of
/// pre-serialized JSON, or a typed one serialized as it is written.
pub(crate) trait Submit {
    /// [`pdu_bound`](Self::pdu_bound) bounds the whole PDU, so a request that passed it
    /// fits the outbox; otherwise (a typed message) the queued body is measured as it is
    /// written.
    const BOUNDED_UPFRONT: bool;

    fn kind(&self) -> ReqKind;

    /// An upper bound of the encoded PDU's length, checked before anything is written
    /// (for a typed message: without the message, which is bounded as it is written).
    fn pdu_bound(&self) -> usize;

    /// The whole PDU, in `encoding`.
    fn encode(
        &self,
        encoding: Encoding,
        id: Option<u64>,
        out: &mut Cursor<'_>,
    ) -> Result<(), WriteError>;

    /// The offline-queue record after its [`Meta`]: the body in `encoding`, which the
    /// client wraps in an envelope once connected (a raw action's name and a newline
    /// first).
    fn encode_queued(&self, encoding: Encoding, out: &mut Cursor<'_>) -> Result<(), WriteError>;

    /// Whether the pre-serialized parts are valid JSON (used to tell `InvalidJson` from
    /// `Full` when encoding failed for lack of space, before validation could run).
    fn json_is_valid(&self) -> bool;
}

/// A [`UserRequest`] with its PDU, made once.
pub(crate) struct Untyped<'a> {
    req: UserRequest<'a>,
    pdu: Request<'a>,
}

impl<'a> From<UserRequest<'a>> for Untyped<'a> {
    fn from(req: UserRequest<'a>) -> Self {
        Untyped {
            req,
            pdu: req.to_pdu(),
        }
    }
}

impl Submit for Untyped<'_> {
    const BOUNDED_UPFRONT: bool = true;

    fn kind(&self) -> ReqKind {
        self.req.kind()
    }

    fn pdu_bound(&self) -> usize {
        self.req.pdu_bound()
    }

    fn encode(
        &self,
        encoding: Encoding,
        id: Option<u64>,
        out: &mut Cursor<'_>,
    ) -> Result<(), WriteError> {
        self.pdu.encode_as(encoding, id, out)
    }

    fn encode_queued(&self, encoding: Encoding, out: &mut Cursor<'_>) -> Result<(), WriteError> {
        if let UserRequest::Other { action, .. } = self.req {
            out.push_str(action)?;
            out.push(b"\n")?;
        }
        self.pdu.encode_body_as(encoding, out)
    }

    fn json_is_valid(&self) -> bool {
        self.req.json_is_valid()
    }
}

/// A user request as given to the client, before it becomes a PDU.
#[derive(Debug, Clone, Copy)]
pub(crate) enum UserRequest<'a> {
    Publish {
        channel: &'a str,
        message: Payload<'a>,
    },
    Read {
        channel: &'a str,
        args: Option<&'a str>,
    },
    Write {
        channel: &'a str,
        value: &'a str,
    },
    Delete {
        channel: &'a str,
    },
    Search {
        prefix: &'a str,
    },
    Other {
        action: &'a str,
        body: &'a str,
    },
}

impl<'a> UserRequest<'a> {
    pub(crate) fn kind(&self) -> ReqKind {
        match self {
            UserRequest::Publish { .. } => ReqKind::Publish,
            UserRequest::Read { .. } => ReqKind::Read,
            UserRequest::Write { .. } => ReqKind::Write,
            UserRequest::Delete { .. } => ReqKind::Delete,
            UserRequest::Search { .. } => ReqKind::Search,
            UserRequest::Other { .. } => ReqKind::Other,
        }
    }

    pub(crate) fn to_pdu(self) -> Request<'a> {
        match self {
            UserRequest::Publish { channel, message } => Request::Publish { channel, message },
            UserRequest::Read { channel, args } => Request::Read {
                channel,
                position: None,
                extras: args,
            },
            UserRequest::Write { channel, value } => Request::Write {
                channel,
                message: Payload::Json(value),
            },
            UserRequest::Delete { channel } => Request::Delete { channel },
            UserRequest::Search { prefix } => Request::Search { prefix },
            UserRequest::Other { action, body } => Request::Other { action, body },
        }
    }

    /// An upper bound of the encoded PDU's length (pre-serialized JSON is copied verbatim,
    /// at most its own length).
    pub(crate) fn pdu_bound(&self) -> usize {
        let (text, raw) = match *self {
            UserRequest::Publish { channel, message } => (channel, message.len()),
            UserRequest::Read { channel, args } => (channel, args.map_or(0, str::len)),
            UserRequest::Write { channel, value } => (channel, value.len()),
            UserRequest::Delete { channel } => (channel, 0),
            UserRequest::Search { prefix } => (prefix, 0),
            UserRequest::Other { action, body } => (action, body.len()),
        };
        escaped_len(text)
            .saturating_add(raw)
            .saturating_add(ENVELOPE + REQUEST_MEMBERS)
    }

    /// Whether the pre-serialized parts are valid JSON (used to tell `InvalidJson` from
    /// `Full` when encoding failed for lack of space, before validation could run).
    pub(crate) fn json_is_valid(&self) -> bool {
        match *self {
            UserRequest::Publish {
                message: Payload::Json(v),
                ..
            }
            | UserRequest::Write { value: v, .. } => json::parse(v, json::MAX_DEPTH).is_ok(),
            #[cfg(feature = "cbor")]
            UserRequest::Publish {
                message: Payload::Cbor(v),
                ..
            } => crate::cbor::parse(v, crate::cbor::DEFAULT_MAX_DEPTH).is_ok(),
            UserRequest::Read {
                args: Some(args), ..
            } => json::write::parse_object(args).is_ok(),
            UserRequest::Other { body, .. } => json::write::parse_object(body).is_ok(),
            _ => true,
        }
    }
}

/// The fixed header of an offline-queue record, followed by the request body (empty for
/// [`ReqKind::Auth`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) kind: ReqKind,
    pub(crate) acked: bool,
    /// Resolved already (timed out) but not yet at the front: skipped by the drain.
    pub(crate) cancelled: bool,
    pub(crate) ticket: Ticket,
    pub(crate) deadline: Option<Instant>,
}

const ACKED: u8 = 1;
const CANCELLED: u8 = 2;

impl Meta {
    /// kind (1) + flags (1) + ticket (4) + deadline (8, `u64::MAX` = none).
    pub(crate) const LEN: usize = 14;

    pub(crate) fn write(&self, dst: &mut [u8]) -> Option<()> {
        let dst = dst.get_mut(..Self::LEN)?;
        let mut flags = 0;
        if self.acked {
            flags |= ACKED;
        }
        if self.cancelled {
            flags |= CANCELLED;
        }
        let deadline = self.deadline.map_or(u64::MAX, Instant::as_micros);
        let (head, rest) = dst.split_at_mut(2);
        head.copy_from_slice(&[self.kind.to_byte(), flags]);
        let (ticket, deadline_bytes) = rest.split_at_mut(4);
        ticket.copy_from_slice(&self.ticket.get().to_le_bytes());
        deadline_bytes.copy_from_slice(&deadline.to_le_bytes());
        Some(())
    }

    pub(crate) fn read(record: &[u8]) -> Option<(Meta, &[u8])> {
        let (head, body) = (record.get(..Self::LEN)?, record.get(Self::LEN..)?);
        let kind = ReqKind::from_byte(*head.first()?)?;
        let flags = *head.get(1)?;
        let ticket = u32::from_le_bytes(head.get(2..6)?.try_into().ok()?);
        let deadline = u64::from_le_bytes(head.get(6..14)?.try_into().ok()?);
        let meta = Meta {
            kind,
            acked: flags & ACKED != 0,
            cancelled: flags & CANCELLED != 0,
            ticket: Ticket::from_raw(ticket),
            deadline: (deadline != u64::MAX).then_some(Instant::from_micros(deadline)),
        };
        Some((meta, body))
    }

    /// Marks the record in place as resolved.
    pub(crate) fn cancel(record: &mut [u8]) {
        if let Some(flags) = record.get_mut(1) {
            *flags |= CANCELLED;
        }
    }
}

#[cfg(test)]
mod tests;

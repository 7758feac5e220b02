//! Writing request PDUs: one [`Request`] per request action of the protocol, as a whole
//! PDU or as a body alone (for an offline queue that adds action and id at send time).

use super::Action;
use crate::http::Cursor;
use crate::json::write::{self, ObjectWriter};
use crate::json::{Object, WriteError};

/// What a subscription is keyed by: a channel, or a view — a `subscription_id` with an
/// SQL-like `filter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Target<'a> {
    /// `"channel": name`; the subscription id is the channel name.
    Channel(&'a str),
    /// `"subscription_id": id, "filter": filter`.
    View {
        /// The subscription id the server keys the view by.
        subscription_id: &'a str,
        /// The select statement, e.g. `select * from chan`.
        filter: &'a str,
    },
}

/// How much history a subscription replays, backing up from its position (or from now);
/// the server rejects both at once, hence an enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum History {
    /// `{"count": n}`: the last `n` messages.
    Count(u64),
    /// `{"age": s}`: the messages of the last `s` seconds.
    Age(u64),
}

/// The body of `rtm/subscribe`. Build it from [`SubscribeRequest::channel`] or
/// [`SubscribeRequest::view`] and struct-update the options you need. Unset options are
/// left out of the PDU (never written as `null`, which the Python SDK sends after
/// `out_of_sync`); `fast_forward`, `force` and `only_value_changes` are written only
/// when true.
///
/// Members are written in the order `channel`|`subscription_id`, `fast_forward`, `filter`,
/// `position`, `history`, `period`, `force`, `only`, then `extras` — the order of the
/// Python SDK's bodies, though servers must not depend on it (key order and spacing in
/// the Python SDK's JSON are accidents of its implementation).
///
/// ```
/// use benchlink_core::http::Cursor;
/// use benchlink_core::rtm::pdu::{History, Request, SubscribeRequest};
/// let sub = SubscribeRequest {
///     fast_forward: true,
///     position: Some("1479315802:6"),
///     history: Some(History::Count(1)),
///     ..SubscribeRequest::channel("chan")
/// };
/// let mut buf = [0u8; 160];
/// let mut out = Cursor::new(&mut buf);
/// Request::Subscribe(sub).encode(Some(2), &mut out).unwrap();
/// assert_eq!(
///     out.written(),
///     br#"{"action":"rtm/subscribe","id":2,"body":{"channel":"chan","fast_forward":true,"position":"1479315802:6","history":{"count":1}}}"#
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SubscribeRequest<'a> {
    /// Channel or view.
    pub target: Target<'a>,
    /// Where to start (an opaque position string from a previous reply).
    pub position: Option<&'a str>,
    /// History to replay before live messages.
    pub history: Option<History>,
    /// `"fast_forward": true`: skip to the oldest available message instead of failing
    /// when the position has expired.
    pub fast_forward: bool,
    /// `"period"`: aggregation window of a view, in seconds (the server allows at most 60).
    pub period: Option<u32>,
    /// `"force": true`: replace an existing subscription with the same id.
    pub force: bool,
    /// `"only": "value_changes"`: deliver consecutive identical messages once.
    pub only_value_changes: bool,
    /// Caller-supplied members, a JSON object text such as `{"position":"1:2"}`. They
    /// override the typed members of the same name (the Python SDK merges user arguments
    /// last), and each key is written once (its last occurrence wins).
    pub extras: Option<&'a str>,
}

impl<'a> SubscribeRequest<'a> {
    /// A subscription to `channel` with no options.
    ///
    /// ```
    /// use benchlink_core::rtm::pdu::{SubscribeRequest, Target};
    /// assert_eq!(SubscribeRequest::channel("c").target, Target::Channel("c"));
    /// ```
    pub const fn channel(channel: &'a str) -> Self {
        Self::new(Target::Channel(channel))
    }

    /// A view subscription with no options.
    ///
    /// ```
    /// use benchlink_core::rtm::pdu::SubscribeRequest;
    /// let s = SubscribeRequest::view("view1", "select * from chan");
    /// assert!(s.position.is_none() && !s.fast_forward);
    /// ```
    pub const fn view(subscription_id: &'a str, filter: &'a str) -> Self {
        Self::new(Target::View {
            subscription_id,
            filter,
        })
    }

    const fn new(target: Target<'a>) -> Self {
        SubscribeRequest {
            target,
            position: None,
            history: None,
            fast_forward: false,
            period: None,
            force: false,
            only_value_changes: false,
            extras: None,
        }
    }

    fn members(&self, b: &mut ObjectWriter<'_, '_>) -> Result<(), WriteError> {
        match self.target {
            Target::Channel(channel) => b.string("channel", channel)?,
            Target::View {
                subscription_id, ..
            } => b.string("subscription_id", subscription_id)?,
        };
        if self.fast_forward {
            b.bool("fast_forward", true)?;
        }
        if let Target::View { filter, .. } = self.target {
            b.string("filter", filter)?;
        }
        if let Some(position) = self.position {
            b.string("position", position)?;
        }
        if let Some(history) = self.history {
            let (key, n) = match history {
                History::Count(n) => ("count", n),
                History::Age(n) => ("age", n),
            };
            b.object("history", |h| {
                h.u64(key, n)?;
                Ok(())
            })?;
        }
        if let Some(period) = self.period {
            b.u64("period", u64::from(period))?;
        }
        if self.force {
            b.bool("force", true)?;
        }
        if self.only_value_changes {
            b.string("only", "value_changes")?;
        }
        Ok(())
    }
}

/// One request of the protocol. Strings are plain text (escaped when written);
/// `message`, `extras` and `body` fields are pre-serialized JSON, validated when
/// written so the PDU is always valid JSON ([`WriteError::InvalidJson`] otherwise).
/// Serializing the message when the request is encoded is what captures it at call time
/// (the Python SDK once sent messages the caller mutated after `publish()` returned).
///
/// ```
/// use benchlink_core::http::Cursor;
/// use benchlink_core::rtm::pdu::{Action, Request};
/// let req = Request::Delete { channel: "a\"b" };
/// assert_eq!(req.action(), Action::Delete);
/// let mut buf = [0u8; 64];
/// let mut out = Cursor::new(&mut buf);
/// req.encode(None, &mut out).unwrap();
/// assert_eq!(out.written(), br#"{"action":"rtm/delete","body":{"channel":"a\"b"}}"#);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Request<'a> {
    /// `rtm/publish {channel, message}`.
    Publish {
        /// Channel name.
        channel: &'a str,
        /// The message, one JSON value.
        message: &'a str,
    },
    /// `rtm/subscribe`.
    Subscribe(SubscribeRequest<'a>),
    /// `rtm/unsubscribe {subscription_id}` (the channel name for channel subscriptions).
    Unsubscribe {
        /// The subscription to end.
        subscription_id: &'a str,
    },
    /// `rtm/read {channel, [position], …extras}`.
    Read {
        /// Channel name.
        channel: &'a str,
        /// Read the value at this position instead of the latest.
        position: Option<&'a str>,
        /// Extra arguments as a JSON object text; like [`SubscribeRequest::extras`], they
        /// override `channel` and `position` of the same name (unlike Python, which sets
        /// `channel` last — don't pass one).
        extras: Option<&'a str>,
    },
    /// `rtm/write {channel, message}`.
    Write {
        /// Channel name.
        channel: &'a str,
        /// The value, one JSON value.
        message: &'a str,
    },
    /// `rtm/delete {channel}`.
    Delete {
        /// Channel name.
        channel: &'a str,
    },
    /// `auth/handshake {method: "role_secret", data: {role}}`; the reply carries a
    /// nonce.
    Handshake {
        /// The role to authenticate as.
        role: &'a str,
    },
    /// `auth/authenticate {method: "role_secret", credentials: {hash}}`; the hash comes
    /// from [`role_secret_hash`](crate::rtm::auth::role_secret_hash).
    Authenticate {
        /// base64 HMAC-MD5 of the nonce, keyed with the role secret.
        hash: &'a str,
    },
    /// `rtm/search {prefix}` (legacy; the service removed it in 2017): replies are
    /// `rtm/search/data` PDUs and a final `rtm/search/ok`, all with this request's id.
    Search {
        /// Channel name prefix.
        prefix: &'a str,
    },
    /// Any action with a pre-serialized body, which must be a JSON object (written member
    /// by member, a repeated key once).
    Other {
        /// Action name, e.g. `rtm/publish` for a body stored by an offline queue.
        action: &'a str,
        /// The body, a JSON object text.
        body: &'a str,
    },
}

impl<'a> Request<'a> {
    /// The request's action.
    ///
    /// ```
    /// use benchlink_core::rtm::pdu::{Action, Request};
    /// assert_eq!(Request::Search { prefix: "a" }.action(), Action::Search);
    /// assert_eq!(Request::Other { action: "rtm/publish", body: "{}" }.action(), Action::Publish);
    /// ```
    pub fn action(&self) -> Action<'a> {
        match self {
            Request::Publish { .. } => Action::Publish,
            Request::Subscribe(_) => Action::Subscribe,
            Request::Unsubscribe { .. } => Action::Unsubscribe,
            Request::Read { .. } => Action::Read,
            Request::Write { .. } => Action::Write,
            Request::Delete { .. } => Action::Delete,
            Request::Handshake { .. } => Action::Handshake,
            Request::Authenticate { .. } => Action::Authenticate,
            Request::Search { .. } => Action::Search,
            Request::Other { action, .. } => Action::parse(action),
        }
    }

    /// Writes the whole PDU, `{"action":…,"id":…,"body":{…}}`, leaving `id` out when it
    /// is `None` (then the server sends no reply at all, not even an error). On error
    /// the cursor holds a truncated prefix: discard it.
    ///
    /// ```
    /// use benchlink_core::http::Cursor;
    /// use benchlink_core::rtm::pdu::Request;
    /// let mut buf = [0u8; 96];
    /// let mut out = Cursor::new(&mut buf);
    /// Request::Unsubscribe { subscription_id: "chan" }.encode(Some(0), &mut out).unwrap();
    /// assert_eq!(out.written(), br#"{"action":"rtm/unsubscribe","id":0,"body":{"subscription_id":"chan"}}"#);
    /// ```
    pub fn encode(&self, id: Option<u64>, out: &mut Cursor<'_>) -> Result<(), WriteError> {
        let extras = self.extras()?;
        envelope(self.action().as_str(), id, out, |o| {
            o.object_with_extras("body", extras, |b| self.members(b))?;
            Ok(())
        })
    }

    /// Writes the body alone, `{…}`, exactly as [`encode`](Self::encode) would embed it:
    /// an offline queue stores it and wraps it with [`write_envelope`] once an id is known.
    ///
    /// ```
    /// use benchlink_core::http::Cursor;
    /// use benchlink_core::rtm::pdu::Request;
    /// let mut buf = [0u8; 64];
    /// let mut out = Cursor::new(&mut buf);
    /// Request::Write { channel: "kv", message: "42" }.encode_body(&mut out).unwrap();
    /// assert_eq!(out.written(), br#"{"channel":"kv","message":42}"#);
    /// ```
    pub fn encode_body(&self, out: &mut Cursor<'_>) -> Result<(), WriteError> {
        write::object_with_extras(out, self.extras()?, |b| self.members(b))
    }

    /// The caller's pre-serialized members that complete (and override) the typed ones.
    fn extras(&self) -> Result<Option<Object<'a>>, WriteError> {
        let extras = match self {
            Request::Subscribe(sub) => sub.extras,
            Request::Read { extras, .. } => *extras,
            Request::Other { body, .. } => Some(*body),
            _ => None,
        };
        extras.map(write::parse_object).transpose()
    }

    /// The typed body members.
    fn members(&self, b: &mut ObjectWriter<'_, '_>) -> Result<(), WriteError> {
        match *self {
            Request::Publish { channel, message } | Request::Write { channel, message } => {
                b.string("channel", channel)?.raw("message", message)?;
            }
            Request::Subscribe(ref sub) => sub.members(b)?,
            Request::Unsubscribe { subscription_id } => {
                b.string("subscription_id", subscription_id)?;
            }
            Request::Read {
                channel, position, ..
            } => {
                b.string("channel", channel)?;
                if let Some(position) = position {
                    b.string("position", position)?;
                }
            }
            Request::Delete { channel } => {
                b.string("channel", channel)?;
            }
            Request::Handshake { role } => {
                b.string("method", "role_secret")?.object("data", |d| {
                    d.string("role", role)?;
                    Ok(())
                })?;
            }
            Request::Authenticate { hash } => {
                b.string("method", "role_secret")?
                    .object("credentials", |c| {
                        c.string("hash", hash)?;
                        Ok(())
                    })?;
            }
            Request::Search { prefix } => {
                b.string("prefix", prefix)?;
            }
            Request::Other { .. } => {}
        }
        Ok(())
    }
}

/// Writes `{"action":action,"id":id,"body":body}` around a body produced earlier by
/// [`Request::encode_body`] (or any JSON object text: it is validated and copied verbatim),
/// leaving `id` out when it is `None`.
///
/// ```
/// use benchlink_core::http::Cursor;
/// use benchlink_core::rtm::pdu::write_envelope;
/// let mut buf = [0u8; 96];
/// let mut out = Cursor::new(&mut buf);
/// write_envelope("rtm/publish", Some(3), r#"{"channel":"c","message":1}"#, &mut out).unwrap();
/// assert_eq!(out.written(), br#"{"action":"rtm/publish","id":3,"body":{"channel":"c","message":1}}"#);
/// ```
pub fn write_envelope(
    action: &str,
    id: Option<u64>,
    body: &str,
    out: &mut Cursor<'_>,
) -> Result<(), WriteError> {
    // `raw` validates the whole value; a valid value starting with `{` is an object.
    if !body.trim_start().starts_with('{') {
        return Err(write::parse_object(body)
            .err()
            .unwrap_or(WriteError::NotAnObject));
    }
    envelope(action, id, out, |o| {
        o.raw("body", body)?;
        Ok(())
    })
}

/// The envelope shared by every request: action, optional id, then what `body` writes.
pub(crate) fn envelope<F>(
    action: &str,
    id: Option<u64>,
    out: &mut Cursor<'_>,
    body: F,
) -> Result<(), WriteError>
where
    F: FnOnce(&mut ObjectWriter<'_, '_>) -> Result<(), WriteError>,
{
    write::object(out, |o| {
        o.string("action", action)?;
        if let Some(id) = id {
            o.u64("id", id)?;
        }
        body(o)
    })
}

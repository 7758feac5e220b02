//! Writing request PDUs: one [`Request`] per request action of the protocol, as a whole
//! PDU or as a body alone (for an offline queue that adds action and id at send time).

use super::{Action, Encoding};
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

    fn members(&self, w: &mut impl BodyWriter) -> Result<(), WriteError> {
        match self.target {
            Target::Channel(channel) => w.member("channel", Field::Str(channel))?,
            Target::View {
                subscription_id, ..
            } => w.member("subscription_id", Field::Str(subscription_id))?,
        };
        if self.fast_forward {
            w.member("fast_forward", Field::Bool(true))?;
        }
        if let Target::View { filter, .. } = self.target {
            w.member("filter", Field::Str(filter))?;
        }
        if let Some(position) = self.position {
            w.member("position", Field::Str(position))?;
        }
        if let Some(history) = self.history {
            let (key, n) = match history {
                History::Count(n) => ("count", n),
                History::Age(n) => ("age", n),
            };
            w.member("history", Field::Object(key, Scalar::U64(n)))?;
        }
        if let Some(period) = self.period {
            w.member("period", Field::U64(u64::from(period)))?;
        }
        if self.force {
            w.member("force", Field::Bool(true))?;
        }
        if self.only_value_changes {
            w.member("only", Field::Str("value_changes"))?;
        }
        Ok(())
    }
}

/// A message to publish or write: one JSON value as text (written as is on a JSON
/// connection, transcoded on a CBOR one), or one CBOR item (feature `cbor`) — which can
/// hold what JSON cannot, such as a byte string. A CBOR item is checked when written and
/// refused on a JSON connection.
///
/// ```
/// use benchlink_core::rtm::pdu::Payload;
/// assert_eq!(Payload::from("42"), Payload::Json("42"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Payload<'a> {
    /// One JSON value.
    Json(&'a str),
    /// One CBOR item.
    Cbor(&'a [u8]),
}

impl<'a> From<&'a str> for Payload<'a> {
    fn from(json: &'a str) -> Self {
        Payload::Json(json)
    }
}

impl<'a> Payload<'a> {
    /// The length of the encoded value as given.
    ///
    /// ```
    /// assert_eq!(benchlink_core::rtm::pdu::Payload::Json("[1]").len(), 3);
    /// ```
    pub fn len(&self) -> usize {
        match self {
            Payload::Json(text) => text.len(),
            Payload::Cbor(bytes) => bytes.len(),
        }
    }

    /// True for an empty text (which is not a valid value).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn field(self) -> Field<'a> {
        match self {
            Payload::Json(text) => Field::Json(text),
            Payload::Cbor(bytes) => Field::Cbor(bytes),
        }
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
        /// The message.
        message: Payload<'a>,
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
        /// The value.
        message: Payload<'a>,
    },
    /// `rtm/delete {channel}`.
    Delete {
        /// Channel name.
        channel: &'a str,
    },
    /// `auth/handshake {method, data: {name: value}}`: role-secret sends
    /// `{"method": "role_secret", "data": {"role": role}}`, and the reply carries a
    /// nonce (see [`auth`](crate::rtm::auth) for other methods).
    Handshake {
        /// The authentication method.
        method: &'a str,
        /// The one member of `data`: name and value (`("role", role)`).
        data: (&'a str, &'a str),
    },
    /// `auth/authenticate {method, credentials: {name: value}}`: role-secret sends
    /// `{"hash": …}`, from [`role_secret_hash`](crate::rtm::auth::role_secret_hash).
    Authenticate {
        /// The authentication method.
        method: &'a str,
        /// The one member of `credentials`: name and value (`("hash", hash)`).
        credentials: (&'a str, &'a str),
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
    /// Request::Write { channel: "kv", message: "42".into() }.encode_body(&mut out).unwrap();
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

    /// The typed body members, in order, each handed to `visit` (the same list for
    /// every encoding, and for counting them).
    fn members(&self, w: &mut impl BodyWriter) -> Result<(), WriteError> {
        match *self {
            Request::Publish { channel, message } | Request::Write { channel, message } => {
                w.member("channel", Field::Str(channel))?;
                w.member("message", message.field())?;
            }
            Request::Subscribe(ref sub) => sub.members(w)?,
            Request::Unsubscribe { subscription_id } => {
                w.member("subscription_id", Field::Str(subscription_id))?;
            }
            Request::Read {
                channel, position, ..
            } => {
                w.member("channel", Field::Str(channel))?;
                if let Some(position) = position {
                    w.member("position", Field::Str(position))?;
                }
            }
            Request::Delete { channel } => w.member("channel", Field::Str(channel))?,
            Request::Handshake { method, data } => {
                w.member("method", Field::Str(method))?;
                w.member("data", Field::Object(data.0, Scalar::Str(data.1)))?;
            }
            Request::Authenticate {
                method,
                credentials,
            } => {
                w.member("method", Field::Str(method))?;
                w.member(
                    "credentials",
                    Field::Object(credentials.0, Scalar::Str(credentials.1)),
                )?;
            }
            Request::Search { prefix } => w.member("prefix", Field::Str(prefix))?,
            Request::Other { .. } => {}
        }
        Ok(())
    }

    /// Writes the whole PDU in `encoding`: [`encode`](Self::encode) for JSON; for CBOR a
    /// map `action`, `id`, `body` (`action`, `body`, `id` for the auth requests, as the
    /// Python SDK orders them), without `id` when it is `None`.
    ///
    /// ```
    /// use benchlink_core::http::Cursor;
    /// use benchlink_core::rtm::pdu::{Encoding, Request};
    /// let mut buf = [0u8; 96];
    /// let mut out = Cursor::new(&mut buf);
    /// Request::Delete { channel: "c" }.encode_as(Encoding::Json, Some(1), &mut out).unwrap();
    /// assert_eq!(out.written(), br#"{"action":"rtm/delete","id":1,"body":{"channel":"c"}}"#);
    /// ```
    pub fn encode_as(
        &self,
        encoding: Encoding,
        id: Option<u64>,
        out: &mut Cursor<'_>,
    ) -> Result<(), WriteError> {
        match encoding {
            Encoding::Json => self.encode(id, out),
            #[cfg(feature = "cbor")]
            Encoding::Cbor => {
                let extras = self.extras()?;
                let auth = matches!(
                    self,
                    Request::Handshake { .. } | Request::Authenticate { .. }
                );
                cbor_envelope(self.action().as_str(), id, auth, out, |out| {
                    self.cbor_body(extras, out)
                })
            }
        }
    }

    /// Writes the body alone in `encoding`, as [`encode_as`](Self::encode_as) embeds it
    /// (for an offline queue; [`write_envelope_as`] wraps it later).
    ///
    /// ```
    /// use benchlink_core::http::Cursor;
    /// use benchlink_core::rtm::pdu::{Encoding, Request};
    /// let mut buf = [0u8; 64];
    /// let mut out = Cursor::new(&mut buf);
    /// Request::Delete { channel: "c" }.encode_body_as(Encoding::Json, &mut out).unwrap();
    /// assert_eq!(out.written(), br#"{"channel":"c"}"#);
    /// ```
    pub fn encode_body_as(
        &self,
        encoding: Encoding,
        out: &mut Cursor<'_>,
    ) -> Result<(), WriteError> {
        match encoding {
            Encoding::Json => self.encode_body(out),
            #[cfg(feature = "cbor")]
            Encoding::Cbor => self.cbor_body(self.extras()?, out),
        }
    }

    /// The body as a CBOR map: the typed members not overridden by `extras`, then the
    /// extras (each key once, its last occurrence) — the JSON writer's rule. A map's
    /// length comes first, so the members are counted by a first pass over the same list.
    #[cfg(feature = "cbor")]
    fn cbor_body(
        &self,
        extras: Option<Object<'_>>,
        out: &mut Cursor<'_>,
    ) -> Result<(), WriteError> {
        use crate::cbor::write as cbor;
        let last_of_its_key = |i: usize, key| {
            extras.is_some_and(|e| {
                !e.members()
                    .skip(i.saturating_add(1))
                    .any(|(later, _)| later == key)
            })
        };
        let mut counter = CborCount { extras, count: 0 };
        self.members(&mut counter)?;
        let extra_members = extras.into_iter().flat_map(|e| e.members().enumerate());
        let kept = extra_members
            .clone()
            .filter(|&(i, (key, _))| last_of_its_key(i, key));
        cbor::map(
            out,
            counter.count.saturating_add(kept.clone().count() as u64),
        )?;
        self.members(&mut CborMembers {
            out: &mut *out,
            extras,
        })?;
        for (_, (key, value)) in kept {
            cbor::json_str(out, key)?;
            cbor::json_value(out, value, crate::cbor::DEFAULT_MAX_DEPTH)?;
        }
        Ok(())
    }
}

/// A body member's value, as [`Request`]'s member list hands it out.
#[derive(Debug, Clone, Copy)]
enum Field<'v> {
    Str(&'v str),
    U64(u64),
    Bool(bool),
    /// A pre-serialized JSON value (a message), validated when written.
    Json(&'v str),
    /// A pre-serialized CBOR item (a message), validated when written; never JSON (which
    /// refuses it without reading it).
    #[cfg_attr(not(feature = "cbor"), allow(dead_code))]
    Cbor(&'v [u8]),
    /// A nested object of one member (`history`, `data`, `credentials`).
    Object(&'v str, Scalar<'v>),
}

/// The value of a nested object's member.
#[derive(Debug, Clone, Copy)]
enum Scalar<'v> {
    Str(&'v str),
    U64(u64),
}

/// Where a body's members go, one by one: a JSON object, or (feature `cbor`) a CBOR map,
/// whose members are counted by a first pass.
trait BodyWriter {
    fn member(&mut self, key: &str, field: Field<'_>) -> Result<(), WriteError>;
}

impl BodyWriter for ObjectWriter<'_, '_> {
    // Always inlined: each member's `Field` is then known where it is written, and only
    // its own writer call remains (the JSON-only firmware keeps its size).
    #[inline(always)]
    fn member(&mut self, key: &str, field: Field<'_>) -> Result<(), WriteError> {
        json_field(self, key, field)
    }
}

/// Counts the members a CBOR body will have: those `extras` does not override.
#[cfg(feature = "cbor")]
struct CborCount<'e> {
    extras: Option<Object<'e>>,
    count: u64,
}

#[cfg(feature = "cbor")]
impl BodyWriter for CborCount<'_> {
    fn member(&mut self, key: &str, _: Field<'_>) -> Result<(), WriteError> {
        let overridden = self.extras.is_some_and(|e| e.get(key).is_some());
        self.count = self.count.saturating_add(u64::from(!overridden));
        Ok(())
    }
}

/// Writes the members of a CBOR body that `extras` does not override.
#[cfg(feature = "cbor")]
struct CborMembers<'c, 'b, 'e> {
    out: &'c mut Cursor<'b>,
    extras: Option<Object<'e>>,
}

#[cfg(feature = "cbor")]
impl BodyWriter for CborMembers<'_, '_, '_> {
    fn member(&mut self, key: &str, field: Field<'_>) -> Result<(), WriteError> {
        if self.extras.is_some_and(|e| e.get(key).is_some()) {
            return Ok(());
        }
        crate::cbor::write::str(self.out, key)?;
        cbor_field(self.out, field)
    }
}

/// Writes one member into a JSON object.
#[inline(always)]
fn json_field(o: &mut ObjectWriter<'_, '_>, key: &str, field: Field<'_>) -> Result<(), WriteError> {
    match field {
        Field::Str(s) => o.string(key, s)?,
        Field::U64(n) => o.u64(key, n)?,
        Field::Bool(b) => o.bool(key, b)?,
        Field::Json(text) => o.raw(key, text)?,
        // A CBOR item is no JSON value.
        Field::Cbor(_) => {
            return Err(WriteError::InvalidJson {
                offset: 0,
                kind: crate::json::ErrorKind::ExpectedValue,
            })
        }
        Field::Object(k, value) => o.object(key, |inner| {
            match value {
                Scalar::Str(s) => inner.string(k, s)?,
                Scalar::U64(n) => inner.u64(k, n)?,
            };
            Ok(())
        })?,
    };
    Ok(())
}

/// Writes one member's value as CBOR.
#[cfg(feature = "cbor")]
fn cbor_field(out: &mut Cursor<'_>, field: Field<'_>) -> Result<(), WriteError> {
    use crate::cbor::write as cbor;
    match field {
        Field::Str(s) => cbor::str(out, s)?,
        Field::U64(n) => cbor::u64(out, n)?,
        Field::Bool(b) => cbor::bool(out, b)?,
        Field::Json(text) => cbor::json(out, text)?,
        Field::Cbor(bytes) => {
            let item = crate::cbor::parse(bytes, crate::cbor::DEFAULT_MAX_DEPTH)
                .map_err(|e| WriteError::InvalidCbor { offset: e.offset })?;
            out.push(item.as_raw())?;
        }
        Field::Object(k, value) => {
            cbor::map(out, 1)?;
            cbor::str(out, k)?;
            match value {
                Scalar::Str(s) => cbor::str(out, s)?,
                Scalar::U64(n) => cbor::u64(out, n)?,
            }
        }
    }
    Ok(())
}

/// The CBOR envelope: a map of `action`, `id` (left out when `None`) and `body`, with
/// `id` last when `id_last`.
#[cfg(feature = "cbor")]
pub(crate) fn cbor_envelope(
    action: &str,
    id: Option<u64>,
    id_last: bool,
    out: &mut Cursor<'_>,
    body: impl FnOnce(&mut Cursor<'_>) -> Result<(), WriteError>,
) -> Result<(), WriteError> {
    use crate::cbor::write as cbor;
    let write_id = |out: &mut Cursor<'_>| match id {
        Some(id) => {
            cbor::str(out, "id")?;
            cbor::u64(out, id)
        }
        None => Ok(()),
    };
    cbor::map(out, if id.is_some() { 3 } else { 2 })?;
    cbor::str(out, "action")?;
    cbor::str(out, action)?;
    if !id_last {
        write_id(out)?;
    }
    cbor::str(out, "body")?;
    body(out)?;
    if id_last {
        write_id(out)?;
    }
    Ok(())
}

/// [`write_envelope`] in `encoding`: for CBOR, `body` must be one CBOR map (it is checked
/// and copied verbatim).
///
/// ```
/// use benchlink_core::http::Cursor;
/// use benchlink_core::rtm::pdu::{write_envelope_as, Encoding};
/// let mut buf = [0u8; 96];
/// let mut out = Cursor::new(&mut buf);
/// write_envelope_as(Encoding::Json, "rtm/delete", None, br#"{"channel":"c"}"#, &mut out).unwrap();
/// assert_eq!(out.written(), br#"{"action":"rtm/delete","body":{"channel":"c"}}"#);
/// ```
pub fn write_envelope_as(
    encoding: Encoding,
    action: &str,
    id: Option<u64>,
    body: &[u8],
    out: &mut Cursor<'_>,
) -> Result<(), WriteError> {
    match encoding {
        Encoding::Json => {
            let body = core::str::from_utf8(body).map_err(|e| WriteError::InvalidJson {
                offset: e.valid_up_to(),
                kind: crate::json::ErrorKind::InvalidUtf8,
            })?;
            write_envelope(action, id, body, out)
        }
        #[cfg(feature = "cbor")]
        Encoding::Cbor => {
            let map = crate::cbor::parse(body, crate::cbor::MAX_DEPTH)
                .ok()
                .filter(|item| item.is_map())
                .ok_or(WriteError::NotAnObject)?;
            cbor_envelope(action, id, false, out, |out| Ok(out.push(map.as_raw())?))
        }
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
    // JSON's own whitespace only, byte by byte: `str::trim_start` would link Unicode's
    // table, and a `char` pattern the char searcher.
    let first = body
        .bytes()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    if first != Some(b'{') {
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

//! Reading PDUs: the envelope ([`Pdu`]), typed views over bodies, and the classification
//! of what arrives into replies, subscription traffic, general errors, ignorable PDUs
//! and protocol errors ([`Incoming`]).

use core::fmt;

use super::view::{Item, List, Map, Text};
use super::{Action, Encoding};
use crate::json::{self, Value};

/// Why a text frame is not an acceptable PDU, and where (byte offsets into the frame).
///
/// Every variant is a protocol error: the reference client reconnects on each of them
/// (the Python SDK's "internal errors"). Unknown unsolicited PDUs are *not* errors
/// ([`Incoming::Ignored`]), although the reference client reconnects on them too.
///
/// ```
/// use benchlink_core::rtm::pdu::{Pdu, PduError};
/// assert!(matches!(Pdu::parse("not json"), Err(PduError::Json(_))));
/// assert_eq!(Pdu::parse("[]"), Err(PduError::NotAnObject { offset: 0 }));
/// assert_eq!(Pdu::parse(r#"{"body":{}}"#), Err(PduError::MissingField { field: "action", offset: 0 }));
/// assert_eq!(Pdu::parse(r#"{"action":1}"#), Err(PduError::InvalidField { field: "action", offset: 10 }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum PduError {
    /// Not JSON (or not UTF-8, or nested deeper than the limit).
    Json(json::Error),
    /// Not one well-formed CBOR item (or nested deeper than the limit).
    Cbor(crate::cbor::Error),
    /// Valid JSON, but not an object.
    NotAnObject {
        /// Where the value starts.
        offset: usize,
    },
    /// A required member is absent: `action`; `body` (required except for
    /// `rtm/publish/ok` and `rtm/delete/ok`, which servers may send bare); `id` on a
    /// known reply action (a reply that lost its id); `subscription_id` or `messages`
    /// in an unsolicited body.
    MissingField {
        /// The member's name.
        field: &'static str,
        /// Where the object that lacks it starts.
        offset: usize,
    },
    /// A member has the wrong type: `action` not a string, `id` neither a non-negative
    /// integer nor a string, `body` not an object, a string field of an unsolicited body
    /// not a string, `messages` not an array.
    InvalidField {
        /// The member's name.
        field: &'static str,
        /// Where its value starts.
        offset: usize,
    },
}

impl fmt::Display for PduError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PduError::Json(e) => write!(f, "PDU: {e}"),
            PduError::Cbor(e) => write!(f, "PDU: {e}"),
            PduError::NotAnObject { offset } => {
                write!(f, "PDU: not an object/map (value at byte {offset})")
            }
            PduError::MissingField { field, offset } => {
                write!(f, "PDU: no `{field}` in the object at byte {offset}")
            }
            PduError::InvalidField { field, offset } => {
                write!(f, "PDU: `{field}` has the wrong type at byte {offset}")
            }
        }
    }
}

impl core::error::Error for PduError {}

/// A request id as echoed by the server: an integer (what benchlink sends) or a string
/// (the Go SDK numbers its requests with strings, and servers echo them). `0` is a real
/// id, never "absent".
///
/// ```
/// use benchlink_core::rtm::pdu::{Id, Pdu};
/// let p = Pdu::parse(r#"{"action":"rtm/write/ok","id":"1","body":{}}"#).unwrap();
/// assert!(matches!(p.id, Some(Id::Str(s)) if s == "1"));
/// assert_eq!(p.id.and_then(|id| id.as_u64()), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Id<'a> {
    /// `"id": 5`
    Int(u64),
    /// `"id": "5"`
    Str(Text<'a>),
}

impl Id<'_> {
    /// The integer id; `None` for a string id (benchlink never sends those, so a string
    /// echo cannot answer one of its requests).
    ///
    /// ```
    /// assert_eq!(benchlink_core::rtm::pdu::Id::Int(0).as_u64(), Some(0));
    /// ```
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Id::Int(n) => Some(*n),
            Id::Str(_) => None,
        }
    }
}

/// One received PDU, borrowed from the frame's text: nothing is copied or unescaped.
///
/// [`Pdu::parse`] checks the envelope only (an object with a string `action`, an optional
/// integer-or-string `id`, an optional object `body`); [`Pdu::classify`] applies the
/// rules the reference SDK applies to incoming PDUs. Body accessors return `None` when
/// the member is absent or of another type.
///
/// ```
/// use benchlink_core::rtm::pdu::{Action, Id, Pdu};
/// let p = Pdu::parse(r#"{"action": "rtm/read/ok", "id": 0, "body": {"message": null, "position": "1:2"}}"#).unwrap();
/// assert_eq!((p.action, p.id), (Action::ReadOk, Some(Id::Int(0))));
/// assert!(p.message().is_some_and(|m| m.is_null()));
/// assert!(p.position().is_some_and(|pos| pos == "1:2"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Pdu<'a> {
    /// The `action` member.
    pub action: Action<'a>,
    /// The `id` member, if present.
    pub id: Option<Id<'a>>,
    /// The `body` member, if present.
    pub body: Option<Map<'a>>,
    /// The whole frame, to turn borrowed slices into error offsets.
    frame: &'a [u8],
}

impl<'a> Pdu<'a> {
    /// A PDU whose parts were parsed from `frame` before (and found again there).
    pub(crate) fn from_parts(
        action: Action<'a>,
        id: Option<Id<'a>>,
        body: Option<Map<'a>>,
        frame: &'a [u8],
    ) -> Self {
        Pdu {
            action,
            id,
            body,
            frame,
        }
    }

    /// Parses one PDU with nesting limited to [`json::DEFAULT_MAX_DEPTH`] (envelope, body
    /// and `messages` array included, which leaves 29 levels to a message).
    ///
    /// ```
    /// use benchlink_core::rtm::pdu::{Action, Pdu};
    /// let p = Pdu::parse(r#"{"action":"rtm/publish/ok","id":1}"#).unwrap();
    /// assert_eq!(p.action, Action::PublishOk);
    /// assert!(p.body.is_none());
    /// ```
    pub fn parse(text: &'a str) -> Result<Pdu<'a>, PduError> {
        Self::parse_with_depth(text, json::DEFAULT_MAX_DEPTH)
    }

    /// [`parse`](Self::parse) for bytes straight off the wire (a WebSocket text frame):
    /// they must be UTF-8 as well.
    ///
    /// ```
    /// use benchlink_core::rtm::pdu::{Pdu, PduError};
    /// assert!(Pdu::parse_bytes(br#"{"action":"/error"}"#).is_ok());
    /// assert!(matches!(Pdu::parse_bytes(b"\xff"), Err(PduError::Json(_))));
    /// ```
    pub fn parse_bytes(bytes: &'a [u8]) -> Result<Pdu<'a>, PduError> {
        let text = core::str::from_utf8(bytes).map_err(|e| {
            PduError::Json(json::Error {
                offset: e.valid_up_to(),
                kind: json::ErrorKind::InvalidUtf8,
            })
        })?;
        Self::parse(text)
    }

    /// [`parse`](Self::parse) with an explicit nesting limit (clamped to
    /// [`json::MAX_DEPTH`]).
    ///
    /// ```
    /// use benchlink_core::rtm::pdu::{Pdu, PduError};
    /// let deep = r#"{"action":"x","body":{"m":[[1]]}}"#;
    /// assert!(Pdu::parse_with_depth(deep, 4).is_ok());
    /// assert!(matches!(Pdu::parse_with_depth(deep, 3), Err(PduError::Json(_))));
    /// ```
    pub fn parse_with_depth(text: &'a str, max_depth: usize) -> Result<Pdu<'a>, PduError> {
        let at = |v: &str| offset(text.as_bytes(), v.as_bytes());
        let invalid = |field, v: Value<'a>| PduError::InvalidField {
            field,
            offset: at(v.as_raw()),
        };
        // One validating pass that also picks the members out (the first of each name
        // counts, as with `get`) and indexes the body's members: neither the body nor its
        // members are stepped over again to be found.
        let mut json = json::Validator::new(text);
        let (mut action, mut id, mut body) = (None, None, None);
        let envelope = json
            .object(max_depth, |json, key, depth| {
                if key == "body" && body.is_none() {
                    let members =
                        |json: &mut json::Validator<'a>, _, depth| json.value(depth).map(drop);
                    body = Some(match json.object(depth, members)? {
                        Some(object) => Ok(object),
                        None => Err(json.value(depth)?),
                    });
                    return Ok(());
                }
                let v = json.value(depth)?;
                if key == "action" {
                    action.get_or_insert(v);
                } else if key == "id" {
                    id.get_or_insert(v);
                }
                Ok(())
            })
            .map_err(PduError::Json)?;
        let envelope = match envelope {
            Some(envelope) => envelope,
            None => {
                let value = json.value(max_depth).map_err(PduError::Json)?;
                json.end().map_err(PduError::Json)?;
                return Err(PduError::NotAnObject {
                    offset: at(value.as_raw()),
                });
            }
        };
        json.end().map_err(PduError::Json)?;
        let action = action.ok_or(PduError::MissingField {
            field: "action",
            offset: at(envelope.as_raw()),
        })?;
        let action = action
            .as_str()
            .map(Action::from_json)
            .ok_or(invalid("action", action))?;
        let id = match id {
            None => None,
            Some(v) => Some(match (v.as_u64(), v.as_str()) {
                (Some(n), _) => Id::Int(n),
                (None, Some(s)) => Id::Str(s.into()),
                (None, None) => return Err(invalid("id", v)),
            }),
        };
        let body = match body {
            None => None,
            Some(Ok(object)) => Some(object.into()),
            Some(Err(v)) => return Err(invalid("body", v)),
        };
        Ok(Pdu {
            action,
            id,
            body,
            frame: text.as_bytes(),
        })
    }

    /// Parses one PDU in the RTM protocol's CBOR encoding: a map with the text keys
    /// `action` (text), `id` (unsigned integer or text) and `body` (map), nested at most
    /// [`cbor::DEFAULT_MAX_DEPTH`](crate::cbor::DEFAULT_MAX_DEPTH) deep. Bytes after the
    /// item are an error.
    ///
    /// ```
    /// use benchlink_core::rtm::pdu::{Action, Id, Pdu};
    /// // {"action":"rtm/publish/ok","id":0,"body":{"position":"1:0"}}
    /// let bytes = b"\xa3\x66action\x6ertm/publish/ok\x62id\x00\x64body\xa1\x68position\x631:0";
    /// let p = Pdu::parse_cbor(bytes).unwrap();
    /// assert_eq!((p.action, p.id), (Action::PublishOk, Some(Id::Int(0))));
    /// assert!(p.position().is_some_and(|pos| pos == "1:0"));
    /// ```
    #[cfg(feature = "cbor")]
    pub fn parse_cbor(bytes: &'a [u8]) -> Result<Pdu<'a>, PduError> {
        use crate::cbor;
        let envelope = cbor::parse(bytes, cbor::DEFAULT_MAX_DEPTH).map_err(PduError::Cbor)?;
        if !envelope.is_map() {
            return Err(PduError::NotAnObject { offset: 0 });
        }
        let invalid = |field, v: cbor::Item<'a>| PduError::InvalidField {
            field,
            offset: offset(bytes, v.as_raw()),
        };
        let (mut action, mut id, mut body) = (None, None, None);
        for (key, v) in envelope.entries() {
            let slot = match key.as_str() {
                Some("action") => &mut action,
                Some("id") => &mut id,
                Some("body") => &mut body,
                _ => continue,
            };
            slot.get_or_insert(v);
        }
        let action = action.ok_or(PduError::MissingField {
            field: "action",
            offset: 0,
        })?;
        let action = action
            .as_str()
            .map(Action::parse)
            .ok_or(invalid("action", action))?;
        let id = match id {
            None => None,
            Some(v) => Some(match (v.as_u64(), Item::from(v).as_text()) {
                (Some(n), _) => Id::Int(n),
                (None, Some(s)) => Id::Str(s),
                (None, None) => return Err(invalid("id", v)),
            }),
        };
        let body = match body {
            None => None,
            Some(v) => Some(Item::from(v).as_map().ok_or(invalid("body", v))?),
        };
        Ok(Pdu {
            action,
            id,
            body,
            frame: bytes,
        })
    }

    /// Parses one frame's payload in `encoding`: [`parse_bytes`](Self::parse_bytes) for
    /// JSON, `parse_cbor` for CBOR (feature `cbor`).
    ///
    /// ```
    /// use benchlink_core::rtm::pdu::{Encoding, Pdu};
    /// assert!(Pdu::decode(Encoding::Json, br#"{"action":"/error"}"#).is_ok());
    /// ```
    pub fn decode(encoding: Encoding, payload: &'a [u8]) -> Result<Pdu<'a>, PduError> {
        match encoding {
            Encoding::Json => Self::parse_bytes(payload),
            #[cfg(feature = "cbor")]
            Encoding::Cbor => Self::parse_cbor(payload),
        }
    }

    /// Sorts the PDU as the reference SDK does, except that unknown unsolicited PDUs
    /// are ignored instead of forcing a reconnect:
    ///
    /// - with an `id`: a [`Incoming::Reply`] — it must have a body unless it is
    ///   `rtm/publish/ok` or `rtm/delete/ok`;
    /// - without: `rtm/subscription/data` → [`Incoming::Data`], `rtm/subscription/error`
    ///   → [`Incoming::ChannelError`], `rtm/subscription/info` with `info:
    ///   "fast_forward"` → [`Incoming::FastForward`], `/error` → [`Incoming::GeneralError`];
    ///   a known reply action (`rtm/publish/ok`, …) is a reply that lost its id →
    ///   [`PduError::MissingField`] `id`; anything else → [`Incoming::Ignored`].
    ///
    /// ```
    /// use benchlink_core::rtm::pdu::{Incoming, Pdu, PduError};
    /// let ok = Pdu::parse(r#"{"action":"rtm/subscribe/ok","body":{}}"#).unwrap();
    /// assert_eq!(ok.classify(), Err(PduError::MissingField { field: "id", offset: 0 }));
    /// let padded = Pdu::parse(" \n{\"action\":\"rtm/subscription/data\"}").unwrap();
    /// assert_eq!(padded.classify(), Err(PduError::MissingField { field: "body", offset: 2 }));
    /// let info = Pdu::parse(r#"{"action":"rtm/subscription/info","body":{"info":"new_thing"}}"#).unwrap();
    /// assert!(matches!(info.classify(), Ok(Incoming::Ignored(_))));
    /// ```
    pub fn classify(&self) -> Result<Incoming<'a>, PduError> {
        if let Some(id) = self.id {
            if self.body.is_none() && !matches!(self.action, Action::PublishOk | Action::DeleteOk) {
                return Err(self.missing("body", self.envelope()));
            }
            return Ok(Incoming::Reply { id, pdu: *self });
        }
        match self.action {
            // The three subscription PDUs read their members in one pass: the body, `info`
            // (for `info`), the subscription id, then the optional strings in the order
            // each reads them (which decides the error reported first).
            Action::SubscriptionData | Action::SubscriptionError | Action::SubscriptionInfo => {
                let body = self.required_body()?;
                // Every member the three read, found in one walk over the body.
                let [info, subscription_id, error, reason, position, messages] = body.pick([
                    "info",
                    "subscription_id",
                    "error",
                    "reason",
                    "position",
                    "messages",
                ]);
                let info = if self.action == Action::SubscriptionInfo {
                    let info = self.required_str(body, "info", info)?;
                    if info != "fast_forward" {
                        return Ok(Incoming::Ignored(*self));
                    }
                    Some(info)
                } else {
                    None
                };
                let subscription_id =
                    self.required_str(body, "subscription_id", subscription_id)?;
                Ok(match (info, self.action) {
                    (Some(info), _) => Incoming::FastForward(SubscriptionInfo {
                        subscription_id,
                        info,
                        reason: self.optional_str("reason", reason)?,
                        position: self.optional_str("position", position)?,
                    }),
                    (None, Action::SubscriptionData) => Incoming::Data(SubscriptionData {
                        subscription_id,
                        position: self.optional_str("position", position)?,
                        messages: self.required_array(body, "messages", messages)?,
                    }),
                    (None, _) => Incoming::ChannelError(ChannelError {
                        subscription_id,
                        error: self.optional_str("error", error)?,
                        reason: self.optional_str("reason", reason)?,
                        position: self.optional_str("position", position)?,
                    }),
                })
            }
            Action::GeneralError => Ok(Incoming::GeneralError(self.error())),
            action if action.is_known_reply() => Err(self.missing("id", self.envelope())),
            _ => Ok(Incoming::Ignored(*self)),
        }
    }

    fn missing(&self, field: &'static str, object: &[u8]) -> PduError {
        PduError::MissingField {
            field,
            offset: offset(self.frame, object),
        }
    }

    fn required_body(&self) -> Result<Map<'a>, PduError> {
        self.body.ok_or(self.missing("body", self.envelope()))
    }

    /// The envelope's bytes: the frame without the whitespace before it, so a missing
    /// member is reported at the object's `{`.
    fn envelope(&self) -> &'a [u8] {
        self.frame.trim_ascii_start()
    }

    /// `found`, the member `field` of `body`, which must be there.
    fn required(
        &self,
        body: Map<'a>,
        field: &'static str,
        found: Option<Item<'a>>,
    ) -> Result<Item<'a>, PduError> {
        found.ok_or(self.missing(field, body.raw().as_bytes()))
    }

    /// `found`, the member `field`, if it is a string; `null` counts as absent (as the
    /// service treats `"position": null`).
    fn optional_str(
        &self,
        field: &'static str,
        found: Option<Item<'a>>,
    ) -> Result<Option<Text<'a>>, PduError> {
        match found {
            Some(v) if !v.is_null() => self.typed(field, v, v.as_text()).map(Some),
            _ => Ok(None),
        }
    }

    fn required_str(
        &self,
        body: Map<'a>,
        field: &'static str,
        found: Option<Item<'a>>,
    ) -> Result<Text<'a>, PduError> {
        let v = self.required(body, field, found)?;
        self.typed(field, v, v.as_text())
    }

    fn required_array(
        &self,
        body: Map<'a>,
        field: &'static str,
        found: Option<Item<'a>>,
    ) -> Result<List<'a>, PduError> {
        let v = self.required(body, field, found)?;
        self.typed(field, v, v.as_list())
    }

    fn typed<T>(&self, field: &'static str, v: Item<'a>, typed: Option<T>) -> Result<T, PduError> {
        typed.ok_or(PduError::InvalidField {
            field,
            offset: offset(self.frame, v.raw().as_bytes()),
        })
    }

    fn body_member(&self, key: &str) -> Option<Item<'a>> {
        self.body?.get(key)
    }

    /// `body.position` (publish/ok, subscribe/ok, unsubscribe/ok, read/ok, write/ok,
    /// delete/ok): an opaque string (in practice `<unix-seconds>:<counter>`).
    ///
    /// ```
    /// let p = benchlink_core::rtm::pdu::Pdu::parse(r#"{"action":"rtm/write/ok","id":4,"body":{"position":"1:0"}}"#).unwrap();
    /// assert!(p.position().is_some_and(|pos| pos.as_raw() == "1:0"));
    /// ```
    pub fn position(&self) -> Option<Text<'a>> {
        self.body_member("position")?.as_text()
    }

    /// `body.subscription_id` (subscribe/ok, unsubscribe/ok, subscribe/error, …).
    ///
    /// ```
    /// let p = benchlink_core::rtm::pdu::Pdu::parse(r#"{"action":"rtm/subscribe/ok","id":0,"body":{"subscription_id":"chan","position":"1:0"}}"#).unwrap();
    /// assert!(p.subscription_id().is_some_and(|s| s == "chan"));
    /// ```
    pub fn subscription_id(&self) -> Option<Text<'a>> {
        self.body_member("subscription_id")?.as_text()
    }

    /// `body.message` of `rtm/read/ok`; `null` when the channel holds no value.
    ///
    /// ```
    /// let p = benchlink_core::rtm::pdu::Pdu::parse(r#"{"action":"rtm/read/ok","id":1,"body":{"message":{"a":[1]}}}"#).unwrap();
    /// assert_eq!(p.message().and_then(|m| m.raw().as_json()), Some(r#"{"a":[1]}"#));
    /// ```
    pub fn message(&self) -> Option<Item<'a>> {
        self.body_member("message")
    }

    /// `body.data.nonce` of `auth/handshake/ok`, still escaped as received: the hash is
    /// computed over exactly these bytes when they contain no escapes, which is what
    /// servers send (base64 text).
    ///
    /// ```
    /// let p = benchlink_core::rtm::pdu::Pdu::parse(r#"{"action":"auth/handshake/ok","id":0,"body":{"data":{"nonce":"MTI0=="}}}"#).unwrap();
    /// assert!(p.nonce().is_some_and(|n| n == "MTI0=="));
    /// ```
    pub fn nonce(&self) -> Option<Text<'a>> {
        self.body_member("data")?.get("nonce")?.as_text()
    }

    /// `body.error` and `body.reason` of an error reply (each `None` if absent or not a
    /// string).
    ///
    /// ```
    /// let p = benchlink_core::rtm::pdu::Pdu::parse(r#"{"action": "rtm/publish/error", "body": {"error": "authorization_denied", "reason": "Unauthorized"}, "id": 0}"#).unwrap();
    /// let e = p.error();
    /// assert!(e.error.is_some_and(|s| s == "authorization_denied") && e.reason.is_some_and(|s| s == "Unauthorized"));
    /// ```
    pub fn error(&self) -> ErrorBody<'a> {
        let text = |key| self.body_member(key).and_then(|v| v.as_text());
        ErrorBody {
            error: text("error"),
            reason: text("reason"),
        }
    }

    /// `body.channels` of `rtm/search/data` and `rtm/search/ok` (legacy search):
    /// collect it from every reply, the final `ok` included.
    ///
    /// ```
    /// let p = benchlink_core::rtm::pdu::Pdu::parse(r#"{"action":"rtm/search/data","id":9,"body":{"channels":["a","b"]}}"#).unwrap();
    /// assert_eq!(p.channels().map(|c| c.elements().count()), Some(2));
    /// ```
    pub fn channels(&self) -> Option<List<'a>> {
        self.body_member("channels")?.as_list()
    }
}

/// Byte offset of `part` (a slice of `frame`) in `frame`.
fn offset(frame: &[u8], part: &[u8]) -> usize {
    (part.as_ptr() as usize).saturating_sub(frame.as_ptr() as usize)
}

/// `error` (a code such as `authorization_denied`) and `reason` (a human-readable text,
/// such as `Unauthorized`) of an error body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ErrorBody<'a> {
    /// The error code, e.g. `authorization_denied`.
    pub error: Option<Text<'a>>,
    /// The human-readable reason, e.g. `Unauthorized`.
    pub reason: Option<Text<'a>>,
}

/// `rtm/subscription/data`: messages for a subscription, sent without an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SubscriptionData<'a> {
    /// Which subscription the messages belong to.
    pub subscription_id: Text<'a>,
    /// The resume point just past the last message: subscribing from it delivers the
    /// next message, not this batch's last one again. Its absence is a protocol error
    /// for this subscription only (it must not end the connection), hence no error
    /// here.
    pub position: Option<Text<'a>>,
    /// The messages; hand each element's [`Item::raw`] bytes to the user.
    pub messages: List<'a>,
}

/// `rtm/subscription/error`: the server has ended the subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ChannelError<'a> {
    /// The ended subscription.
    pub subscription_id: Text<'a>,
    /// The error code, e.g. `out_of_sync`, `expired_position`.
    pub error: Option<Text<'a>>,
    /// The reason text.
    pub reason: Option<Text<'a>>,
    /// The position at which it ended, if given.
    pub position: Option<Text<'a>>,
}

/// `rtm/subscription/info`: a notice about a subscription; only `info: "fast_forward"`
/// (the server skipped expired messages) is classified as [`Incoming::FastForward`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SubscriptionInfo<'a> {
    /// The subscription concerned.
    pub subscription_id: Text<'a>,
    /// What happened (`fast_forward`).
    pub info: Text<'a>,
    /// The reason text.
    pub reason: Option<Text<'a>>,
    /// The new position, if given.
    pub position: Option<Text<'a>>,
}

/// A received PDU sorted by what the client must do with it; see [`Pdu::classify`].
///
/// ```
/// use benchlink_core::rtm::pdu::Incoming;
/// let text = r#"{"action":"rtm/subscription/data","body":{"subscription_id":"chan","position":"1:3","messages":[{"k":1},"two"]}}"#;
/// let Ok(Incoming::Data(data)) = Incoming::parse(text) else { panic!() };
/// assert!(data.subscription_id == "chan");
/// assert!(data.messages.elements().filter_map(|m| m.raw().as_json()).eq([r#"{"k":1}"#, r#""two""#]));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Incoming<'a> {
    /// A reply: route it by `id` to the pending request (and check that
    /// `pdu.action.request()` is that request's action: a reply of the wrong type is a
    /// protocol error). Unknown ids are ignored, as the reference SDK does.
    Reply {
        /// The echoed id.
        id: Id<'a>,
        /// The reply itself.
        pdu: Pdu<'a>,
    },
    /// Messages for a subscription. Data for an unknown subscription is ignored, as the
    /// reference SDK does.
    Data(SubscriptionData<'a>),
    /// The server ended a subscription.
    ChannelError(ChannelError<'a>),
    /// The server skipped a subscription forward to the oldest available message.
    FastForward(SubscriptionInfo<'a>),
    /// An unsolicited `/error`: the server reports a connection-level problem ("General
    /// error"). The reference client drops the connection and reconnects.
    GeneralError(ErrorBody<'a>),
    /// An unsolicited PDU of an unknown kind (or `subscription/info` other than
    /// `fast_forward`): log it and carry on (the reference client reconnects instead,
    /// so a server that adds a new kind of notification would break it).
    Ignored(Pdu<'a>),
}

impl<'a> Incoming<'a> {
    /// [`Pdu::parse`] then [`Pdu::classify`]: one call per received text frame.
    ///
    /// ```
    /// use benchlink_core::rtm::pdu::{Incoming, PduError};
    /// assert!(matches!(Incoming::parse(r#"{"action":"/error","body":{"error":"e","reason":"r"}}"#), Ok(Incoming::GeneralError(_))));
    /// assert!(matches!(Incoming::parse(r#"{"action":"rtm/publish/ok"}"#), Err(PduError::MissingField { field: "id", .. })));
    /// ```
    pub fn parse(text: &'a str) -> Result<Incoming<'a>, PduError> {
        Pdu::parse(text)?.classify()
    }

    /// [`Pdu::decode`] then [`Pdu::classify`]: one call per received frame in `encoding`.
    ///
    /// ```
    /// use benchlink_core::rtm::pdu::{Encoding, Incoming};
    /// assert!(matches!(Incoming::decode(Encoding::Json, br#"{"action":"/error","body":{}}"#), Ok(Incoming::GeneralError(_))));
    /// ```
    pub fn decode(encoding: Encoding, payload: &'a [u8]) -> Result<Incoming<'a>, PduError> {
        Pdu::decode(encoding, payload)?.classify()
    }
}

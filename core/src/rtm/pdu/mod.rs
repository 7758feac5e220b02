//! RTM PDUs: the JSON envelope `{"action":…,"id":…,"body":{…}}`, every request of the
//! protocol as a typed [`Request`] written into a caller's buffer, and a zero-copy
//! [`Pdu`] reader with typed views over reply and unsolicited bodies plus the
//! [`Incoming`] classification a client needs (reply, subscription traffic, general
//! error, ignorable, malformed).
//!
//! Encoding escapes every string it is given, channel names included (the Python SDK
//! splices channel names into its JSON unescaped), and validates every pre-serialized
//! value (messages, extra arguments), so an encoded PDU is always one valid JSON
//! object. Positions are always written as strings (the C SDK mangles any other type).
//!
//! With the `cbor` feature the same PDUs also travel as CBOR (`Encoding::Cbor`): a map
//! with text keys in the Python SDK's order and widths ([`Request::encode_as`]), read by
//! `Pdu::parse_cbor` into the same encoding-neutral views ([`Map`], [`Item`],
//! [`List`], [`Text`]), whose [`Raw`] bytes are the message as it travelled.
//!
//! ```
//! use benchlink_core::http::Cursor;
//! use benchlink_core::rtm::pdu::{Incoming, Request};
//! let mut buf = [0u8; 128];
//! let mut out = Cursor::new(&mut buf);
//! Request::Publish { channel: "chan", message: r#"{"k": 1}"#.into() }.encode(Some(7), &mut out).unwrap();
//! assert_eq!(
//!     out.written(),
//!     br#"{"action":"rtm/publish","id":7,"body":{"channel":"chan","message":{"k": 1}}}"#
//! );
//! let reply = r#"{"action":"rtm/publish/ok","id":7,"body":{"position":"1479315802:0"}}"#;
//! match Incoming::parse(reply).unwrap() {
//!     Incoming::Reply { id, pdu } => {
//!         assert_eq!(id.as_u64(), Some(7));
//!         assert!(pdu.position().is_some_and(|p| p == "1479315802:0"));
//!     }
//!     other => panic!("{other:?}"),
//! }
//! ```

mod decode;
mod encode;
#[cfg(test)]
mod tests;
mod view;

pub use decode::{
    ChannelError, ErrorBody, Id, Incoming, Pdu, PduError, SubscriptionData, SubscriptionInfo,
};
#[cfg(all(feature = "serde", feature = "cbor"))]
pub(crate) use encode::cbor_envelope;
#[cfg(feature = "serde")]
pub(crate) use encode::envelope;
pub use encode::{
    write_envelope, write_envelope_as, History, Payload, Request, SubscribeRequest, Target,
};
pub use view::{Chars, Elements, Item, List, Map, Raw, Text};

/// How PDUs travel on a connection: JSON text (the protocol's default) or CBOR (feature
/// `cbor`), negotiated as the `cbor` WebSocket subprotocol. Both carry the same PDUs, and
/// received PDUs are read through the same views ([`Pdu`], [`Item`], [`Text`]).
///
/// ```
/// use benchlink_core::rtm::pdu::Encoding;
/// assert_eq!(Encoding::default(), Encoding::Json);
/// assert_eq!(Encoding::Json.subprotocol(), None);
/// ```
///
/// Non-exhaustive: `Cbor` exists only with the `cbor` feature, and enabling a feature must
/// not break a `match` elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Encoding {
    /// JSON in text frames; no subprotocol is offered.
    #[default]
    Json,
    /// CBOR in binary frames, after the server selected the `cbor` subprotocol.
    #[cfg(feature = "cbor")]
    Cbor,
}

impl Encoding {
    /// The WebSocket subprotocol to offer in the upgrade request, if any.
    pub const fn subprotocol(self) -> Option<&'static str> {
        match self {
            Encoding::Json => None,
            #[cfg(feature = "cbor")]
            Encoding::Cbor => Some("cbor"),
        }
    }
}

/// The suffix of a reply action: how the request ended, or that more replies follow.
///
/// ```
/// use benchlink_core::rtm::pdu::{Action, Outcome};
/// assert_eq!(Action::SearchData.outcome(), Some(Outcome::Data));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Outcome {
    /// `…/ok`: the request succeeded; its last reply.
    Ok,
    /// `…/error`: the request failed; its last reply.
    Error,
    /// `…/data`: one of several replies; more follow with the same id (so the request
    /// stays pending).
    Data,
}

text_enum! {
    /// The `action` of a PDU: every action of the protocol by name, anything else as
    /// [`Action::Other`] (unknown actions are data, not errors: a client must tolerate
    /// new unsolicited PDUs).
    ///
    /// ```
    /// use benchlink_core::rtm::pdu::{Action, Outcome};
    /// let a = Action::parse("rtm/subscribe/error");
    /// assert_eq!(a, Action::SubscribeError);
    /// assert_eq!((a.request(), a.outcome()), (Action::Subscribe, Some(Outcome::Error)));
    /// assert_eq!(Action::parse("x/y/ok").request(), Action::Other("x/y"));
    /// assert_eq!(Action::GeneralError.as_str(), "/error");
    /// ```
    Action in "rtm::pdu" (example "auth/handshake/ok" => HandshakeOk) {
        Publish = "rtm/publish",
        PublishOk = "rtm/publish/ok",
        PublishError = "rtm/publish/error",
        Subscribe = "rtm/subscribe",
        SubscribeOk = "rtm/subscribe/ok",
        SubscribeError = "rtm/subscribe/error",
        Unsubscribe = "rtm/unsubscribe",
        UnsubscribeOk = "rtm/unsubscribe/ok",
        UnsubscribeError = "rtm/unsubscribe/error",
        Read = "rtm/read",
        ReadOk = "rtm/read/ok",
        ReadError = "rtm/read/error",
        Write = "rtm/write",
        WriteOk = "rtm/write/ok",
        WriteError = "rtm/write/error",
        Delete = "rtm/delete",
        DeleteOk = "rtm/delete/ok",
        DeleteError = "rtm/delete/error",
        /// Legacy search (the service removed it in 2017).
        Search = "rtm/search",
        /// More search results follow.
        SearchData = "rtm/search/data",
        SearchOk = "rtm/search/ok",
        SearchError = "rtm/search/error",
        Handshake = "auth/handshake",
        HandshakeOk = "auth/handshake/ok",
        HandshakeError = "auth/handshake/error",
        Authenticate = "auth/authenticate",
        AuthenticateOk = "auth/authenticate/ok",
        AuthenticateError = "auth/authenticate/error",
        /// Unsolicited.
        SubscriptionData = "rtm/subscription/data",
        /// Unsolicited.
        SubscriptionError = "rtm/subscription/error",
        /// Unsolicited.
        SubscriptionInfo = "rtm/subscription/info",
        /// A general error not tied to a request.
        GeneralError = "/error",
    }
}

impl<'a> Action<'a> {
    /// The name split at its last `/ok`, `/error` or `/data`, if it ends in one.
    fn split(&self) -> Option<(&'a str, Outcome)> {
        // At the last `/` (found byte by byte), then the suffix compared whole: the
        // outcomes have no `/` of their own.
        let name = self.as_str();
        let at = name.bytes().rposition(|b| b == b'/')?;
        let (head, suffix) = name.split_at_checked(at)?;
        let outcome = match suffix {
            "/ok" => Outcome::Ok,
            "/error" => Outcome::Error,
            "/data" => Outcome::Data,
            _ => return None,
        };
        Some((head, outcome))
    }

    /// The outcome suffix (`/ok`, `/error`, `/data`), if the name ends in one. Note that
    /// the unsolicited `rtm/subscription/data` and `rtm/subscription/error` end in one too:
    /// tell replies from unsolicited PDUs by their id ([`Incoming`]).
    ///
    /// ```
    /// use benchlink_core::rtm::pdu::{Action, Outcome};
    /// assert_eq!(Action::PublishOk.outcome(), Some(Outcome::Ok));
    /// assert_eq!(Action::Publish.outcome(), None);
    /// assert_eq!(Action::GeneralError.outcome(), Some(Outcome::Error));
    /// ```
    pub fn outcome(&self) -> Option<Outcome> {
        self.split().map(|(_, outcome)| outcome)
    }

    /// The request this action answers: the name without its outcome suffix, or the action
    /// itself when it has none. Compare it with the pending request's action to catch a
    /// reply of the wrong type (a protocol error). `/error` answers no request:
    /// `Other("")`.
    ///
    /// ```
    /// use benchlink_core::rtm::pdu::Action;
    /// assert_eq!(Action::HandshakeError.request(), Action::Handshake);
    /// assert_eq!(Action::Write.request(), Action::Write);
    /// assert_eq!(Action::GeneralError.request(), Action::Other(""));
    /// ```
    pub fn request(&self) -> Action<'a> {
        match self.split() {
            Some((head, _)) => Action::parse(head),
            None => *self,
        }
    }

    /// True for the actions a server sends with an id only, in answer to a request of
    /// the protocol (`…/ok`, `…/error`, `…/data` of a known request). Used to tell a
    /// malformed reply without id from an unknown unsolicited PDU.
    fn is_known_reply(&self) -> bool {
        !matches!(self, Action::Other(_))
            && self.outcome().is_some()
            && !matches!(self.request(), Action::Other(_))
    }
}

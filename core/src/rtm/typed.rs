//! Typed messages (feature `serde`): publish and write any `T: Serialize`, serialized
//! straight into the outbox record (or the offline-queue record) the PDU is sent from —
//! no intermediate buffer, no JSON built by hand — and read subscription messages and
//! read replies into any `T: Deserialize<'a>` borrowing from the received frame. Both
//! ways in the client's encoding: JSON ([`json::typed`](crate::json::typed)), or with the
//! `cbor` feature CBOR (`cbor::typed`), whose forms are the JSON ones so that subscribers
//! of either encoding see the same value.

use serde::{Deserialize, Serialize};

use super::events::{Ack, Handler, RequestError, Ticket};
#[cfg(feature = "cbor")]
use super::pdu::cbor_envelope;
use super::pdu::{envelope, Encoding, Item, Pdu, SubscriptionData};
use super::requests::{escaped_len, ReqKind, Submit, ENVELOPE, REQUEST_MEMBERS};
use super::{Bytes, Client, Slots, SubscriptionSlots};
use crate::http::Cursor;
use crate::json::typed::DeserializeError;
use crate::json::write::{self, ObjectWriter};
use crate::json::WriteError;
use crate::time::Instant;

/// A publish or write whose message is serialized as the PDU is written.
struct Typed<'a, T: ?Sized> {
    kind: ReqKind,
    channel: &'a str,
    message: &'a T,
    /// [`Config::max_message_size`](super::Config::max_message_size).
    max: usize,
}

impl<T: Serialize + ?Sized> Typed<'_, T> {
    fn members(&self, b: &mut ObjectWriter<'_, '_>) -> Result<(), WriteError> {
        b.string("channel", self.channel)?
            .member("message", |out| {
                self.within(out, |out| crate::json::typed::serialize(out, self.message))
            })?;
        Ok(())
    }

    /// The body in CBOR: `channel`, then `message` serialized in place.
    #[cfg(feature = "cbor")]
    fn cbor_body(&self, out: &mut Cursor<'_>) -> Result<(), WriteError> {
        use crate::cbor::{typed, write};
        write::map(out, 2)?;
        write::str(out, "channel")?;
        write::str(out, self.channel)?;
        write::str(out, "message")?;
        self.within(out, |out| typed::serialize(out, self.message))
    }

    /// Runs `serialize` (the message's serialization), failing it when it wrote more than
    /// the message limit allows: its length is only known once written.
    fn within(
        &self,
        out: &mut Cursor<'_>,
        serialize: impl FnOnce(&mut Cursor<'_>) -> Result<(), WriteError>,
    ) -> Result<(), WriteError> {
        let start = out.len();
        serialize(out)?;
        if out.len().saturating_sub(start) > self.max {
            return Err(WriteError::TooLarge { max: self.max });
        }
        Ok(())
    }
}

impl<T: Serialize + ?Sized> Submit for Typed<'_, T> {
    const BOUNDED_UPFRONT: bool = false;

    fn kind(&self) -> ReqKind {
        self.kind
    }

    fn pdu_bound(&self) -> usize {
        escaped_len(self.channel).saturating_add(ENVELOPE + REQUEST_MEMBERS)
    }

    fn encode(
        &self,
        encoding: Encoding,
        id: Option<u64>,
        out: &mut Cursor<'_>,
    ) -> Result<(), WriteError> {
        let action = self.kind.action().as_str();
        match encoding {
            Encoding::Json => envelope(action, id, out, |o| {
                o.object("body", |b| self.members(b))?;
                Ok(())
            }),
            #[cfg(feature = "cbor")]
            Encoding::Cbor => cbor_envelope(action, id, false, out, |out| self.cbor_body(out)),
        }
    }

    fn encode_queued(&self, encoding: Encoding, out: &mut Cursor<'_>) -> Result<(), WriteError> {
        match encoding {
            Encoding::Json => write::object(out, |b| self.members(b)),
            #[cfg(feature = "cbor")]
            Encoding::Cbor => self.cbor_body(out),
        }
    }

    fn json_is_valid(&self) -> bool {
        // Serialization fails for lack of room or with `Unserializable`, never silently.
        true
    }
}

impl<S: SubscriptionSlots, P: Slots, Q: Bytes, O: Bytes, A: Bytes> Client<S, P, Q, O, A> {
    /// [`publish`](Self::publish) of a typed message: `message` is serialized in the
    /// client's [`Config::encoding`](super::Config::encoding) — JSON, with the same
    /// escaping as every other string the client writes, or CBOR (feature `cbor`) —
    /// straight into the record the PDU is sent (or queued) from. A message that does not fit the outbox
    /// (less the envelope) is [`RequestError::TooLarge`]; one that must wait and
    /// does not fit the offline queue is [`RequestError::QueueTooSmall`] or
    /// [`RequestError::Full`] (also when it would not fit the outbox either, if the queue
    /// is the smaller: its size is only known as it is written); one the encoding cannot
    /// express ([`WriteError::Unserializable`](crate::json::WriteError::Unserializable))
    /// is [`RequestError::InvalidJson`]. Nothing is sent or queued then.
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Ack, Client, Config, NoopHandler, Transmit};
    /// use benchlink_core::time::Instant;
    ///
    /// #[derive(serde::Serialize)]
    /// struct Sample<'a> { ts: u64, metric: &'a str, value: f64 }
    ///
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 256], [0; 512], [0; 512]);
    /// let (t, h) = (Instant::ZERO, &mut NoopHandler);
    /// client.start(t, h);
    /// assert_eq!(client.poll_transmit(), Some(Transmit::Connect));
    /// client.handle_connected(t, h);
    /// let sample = Sample { ts: 1700000000, metric: "rx \"eth0\"", value: 2.5 };
    /// client.publish_typed(t, "metrics", &sample, Ack::None, h).unwrap();
    /// assert_eq!(
    ///     client.poll_transmit(),
    ///     Some(Transmit::Send(r#"{"action":"rtm/publish","body":{"channel":"metrics","message":{"ts":1700000000,"metric":"rx \"eth0\"","value":2.5}}}"#))
    /// );
    /// ```
    pub fn publish_typed<T: Serialize + ?Sized, H: Handler>(
        &mut self,
        now: Instant,
        channel: &str,
        message: &T,
        ack: Ack,
        h: &mut H,
    ) -> Result<Option<Ticket>, RequestError> {
        let req = Typed {
            kind: ReqKind::Publish,
            channel,
            message,
            max: self.config.max_message_size,
        };
        self.submit(now, req, ack, h)
    }

    /// [`write`](Self::write) of a typed value, serialized in place like
    /// [`publish_typed`](Self::publish_typed).
    ///
    /// ```
    /// use benchlink_core::rtm::{Pending, SubscriptionSlot, Ack, Client, Config, NoopHandler, RequestError};
    /// use benchlink_core::time::Instant;
    /// let mut client: Client<_, _, _, _, _> = Client::new(Config::default(), [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4], [0; 1024], [0; 512], [0; 512]);
    /// let (t, h) = (Instant::ZERO, &mut NoopHandler);
    /// // Not connected: the value waits in the offline queue, already serialized.
    /// assert!(client.write_typed(t, "kv", &[1, 2, 3], Ack::Reply { deadline: None }, h).unwrap().is_some());
    /// assert_eq!(client.queued_requests(), 1);
    /// // 300 × `120,`: more than the 512-byte outbox can ever hold.
    /// assert_eq!(client.write_typed(t, "kv", &[b'x'; 300][..], Ack::None, h), Err(RequestError::TooLarge));
    /// ```
    pub fn write_typed<T: Serialize + ?Sized, H: Handler>(
        &mut self,
        now: Instant,
        channel: &str,
        value: &T,
        ack: Ack,
        h: &mut H,
    ) -> Result<Option<Ticket>, RequestError> {
        let req = Typed {
            kind: ReqKind::Write,
            channel,
            message: value,
            max: self.config.max_message_size,
        };
        self.submit(now, req, ack, h)
    }
}

impl<'a> SubscriptionData<'a> {
    /// Each message read into `T`, borrowing from the received frame, JSON or CBOR (see
    /// [`Value::deserialize`](crate::json::Value::deserialize): a `&'a str` field of a
    /// JSON message must hold no escapes). One result per message: a message of another
    /// shape does not hide the others.
    ///
    /// ```
    /// use benchlink_core::rtm::pdu::Incoming;
    /// #[derive(serde::Deserialize, Debug, PartialEq)]
    /// struct Sample<'a> { metric: &'a str, value: i64 }
    /// let text = r#"{"action":"rtm/subscription/data","body":{"subscription_id":"m","position":"1:2",
    ///     "messages":[{"metric":"rx","value":1},"oops",{"metric":"tx","value":-2}]}}"#;
    /// let Ok(Incoming::Data(data)) = Incoming::parse(text) else { panic!() };
    /// let got: Vec<_> = data.messages_as::<Sample>().collect();
    /// assert_eq!(got[0], Ok(Sample { metric: "rx", value: 1 }));
    /// assert!(got[1].is_err());
    /// assert_eq!(got[2], Ok(Sample { metric: "tx", value: -2 }));
    /// ```
    pub fn messages_as<T: Deserialize<'a>>(
        &self,
    ) -> impl Iterator<Item = Result<T, DeserializeError>> + 'a {
        self.messages.elements().map(|m| from_item(&m))
    }
}

impl<'a> Pdu<'a> {
    /// `body.message` (of `rtm/read/ok`) read into `T`, borrowing from the received frame;
    /// `None` when the reply has no message. A channel never written holds `null`: read it
    /// as an `Option<T>`.
    ///
    /// ```
    /// use benchlink_core::rtm::pdu::Pdu;
    /// #[derive(serde::Deserialize, Debug, PartialEq)]
    /// struct Config<'a> { mode: &'a str, rate: u32 }
    /// let p = Pdu::parse(r#"{"action":"rtm/read/ok","id":1,"body":{"message":{"mode":"fast","rate":9},"position":"1:0"}}"#).unwrap();
    /// assert_eq!(p.message_as::<Config>(), Some(Ok(Config { mode: "fast", rate: 9 })));
    /// let empty = Pdu::parse(r#"{"action":"rtm/read/ok","id":1,"body":{"message":null}}"#).unwrap();
    /// assert_eq!(empty.message_as::<Option<Config>>(), Some(Ok(None)));
    /// ```
    pub fn message_as<T: Deserialize<'a>>(&self) -> Option<Result<T, DeserializeError>> {
        self.message().map(|m| from_item(&m))
    }
}

/// Reads a received item into `T`, in the encoding it arrived in.
fn from_item<'a, T: Deserialize<'a>>(item: &Item<'a>) -> Result<T, DeserializeError> {
    match item.as_json() {
        Some(value) => value.deserialize(),
        #[cfg(feature = "cbor")]
        None => item
            .as_cbor()
            .ok_or(DeserializeError::InvalidType)?
            .deserialize(),
        #[cfg(not(feature = "cbor"))]
        None => Err(DeserializeError::InvalidType),
    }
}

#[cfg(test)]
mod tests;

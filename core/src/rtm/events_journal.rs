//! [`Events`]: the link's events kept, in order, until the caller takes them
//! ([`Events::poll_event`]).
//!
//! The client reports events through a [`Handler`] as they happen; this one writes each
//! as a compact record into a byte FIFO of the caller's sizing. What an event borrows
//! from the received frame (a reply, a subscription's messages, an error body) is not
//! copied: the record says which part of the frame it was, the link keeps the frame
//! until every record is taken, and reading the record finds that part again — by its
//! offsets for the frequent ones in JSON (subscription data, replies: no second parse,
//! only a UTF-8 check of the frame), by reading the frame again for the rest. What it
//! borrows from anywhere else (a subscription key, a close reason) is copied into the
//! record, so a subscription deleted since is still named.

use core::time::Duration;

use super::auth::AuthFailure;
use super::events::{
    AuthResult, ClientState, Disconnect, Event, FailReason, Handler, InternalError, Outcome,
    SubState, Ticket,
};
use super::in_flight::Slots;
use super::link::Link;
use super::pdu::{self, Action, Encoding, Id, Incoming, Pdu};
use super::queue::{Bytes, RecordFifo, RECORD_HEADER};
use super::sub_table::SubscriptionSlots;
use super::subscription::MAX_SUBSCRIPTION_KEY;
use crate::json::{Array, JsonStr, Object};
use crate::ws::{CloseCode, Error as WsError};

/// The events waiting for the caller, in the bytes of `B` (at least
/// [`Events::capacity_for`] the link's tables).
///
/// Pass it as the handler of every call into the [`Link`]; then take the events with
/// [`poll_event`](Self::poll_event) until it returns `None` (and replies by ticket with
/// [`take_reply`](Self::take_reply), if you [keep them so](Self::replies_by_ticket)).
/// While it holds an event that borrows the last message (data, a reply, an error), the
/// link's [`handle_input`](Link::handle_input) takes no further message (it says how
/// many bytes it took): the caller keeps the rest until those events are taken, which is
/// the backpressure that bounds memory under a flood. Events that borrow nothing (state
/// changes, timeouts) never hold input back.
///
/// ```
/// use benchlink_core::rtm::{Buffers, ClientState, Config, Event, Events, Link, LinkConfig, Output, Pending, SubscriptionSlot};
/// use benchlink_core::time::Instant;
///
/// let buffers = Buffers {
///     rx: vec![0; 4096], tx: vec![0; 4096], queue: vec![0; 512], outbox: vec![0; 512],
///     subscription_args: vec![],
/// };
/// let mut link: Link<Vec<u8>, _, _> = Link::new(
///     Config::default(), LinkConfig { seed: 7, ..LinkConfig::DEFAULT },
///     "ws://127.0.0.1:8080", "KEY", buffers, [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4],
/// ).unwrap();
/// let mut events = Events::new(vec![0; Events::<Vec<u8>>::capacity_for(2, 4, 8)]);
/// let t = Instant::ZERO;
/// link.client_mut().start(t, &mut events);
/// assert_eq!(
///     events.poll_event(&link),
///     Some(Event::ClientState { leave: ClientState::Stopped, enter: ClientState::Connecting }),
/// );
/// assert_eq!(events.poll_event(&link), None);
/// assert!(matches!(link.poll_output(t), Some(Output::Connect { .. })));
/// ```
pub struct Events<B> {
    fifo: RecordFifo<B>,
    /// Where the record handed out last starts (its event borrowed it): it is marked
    /// taken at the next call.
    handed: Option<usize>,
    /// Records waiting that borrow the link's last message: input waits until none does.
    borrowing: u32,
    /// Replies wait for [`Events::take_reply`]; [`Events::poll_event`] passes over them.
    by_ticket: bool,
    /// Records that did not fit (the buffer was smaller than
    /// [`Events::capacity_for`], or events were left untaken across calls).
    lost: u32,
    /// Records stored, ever (wrapping).
    recorded: u32,
    /// Where the last message received lies (see [`Handler::received`]), while it is JSON
    /// text: the parts of it that events borrow are recorded as offsets into it.
    json: Option<Received>,
    /// Each message is copied in, as a record of its own before its events, for messages
    /// of up to this many bytes ([`Events::keeping_messages`]).
    keeps: Option<usize>,
    /// The last message received was kept (while [`keeps`](Self::keeps)): its events
    /// can be recorded.
    kept: bool,
    /// The link is between messages (it asked whether it may take the next): the last
    /// one kept gets no more events.
    between: bool,
}

/// The address and length of the message the link received last.
#[derive(Debug, Clone, Copy)]
struct Received {
    at: usize,
    len: usize,
}

/// A part of the last message: its offset and length.
#[derive(Clone, Copy)]
struct Span {
    at: u32,
    len: u32,
}

impl<B: Bytes> core::fmt::Debug for Events<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Events")
            .field("fifo", &self.fifo)
            .field("borrowing", &self.borrowing)
            .field("by_ticket", &self.by_ticket)
            .field("lost", &self.lost)
            .finish()
    }
}

/// Bytes of the largest record that names a subscription (subscription data): its
/// header, a tag, the form byte, where the subscription id, the position (with its
/// presence byte) and the messages lie, and a key of up to [`MAX_SUBSCRIPTION_KEY`]
/// bytes with its length.
const MAX_RECORD: usize = RECORD_HEADER + 1 + 1 + 8 + 1 + 8 + 8 + 2 + MAX_SUBSCRIPTION_KEY;

/// The longest name of a known action a reply record copies (`auth/authenticate/error`
/// has 23 bytes).
const MAX_ACTION: usize = 32;

/// Bytes of the largest record that names no subscription (a reply, a state change): its
/// header, a tag, the ticket, the kind, the form byte, the id, where the body lies (with
/// its presence byte) and the action's name with its length.
const SMALL_RECORD: usize = RECORD_HEADER + 1 + 4 + 1 + 1 + 8 + 1 + 8 + 2 + MAX_ACTION;

impl<B: Bytes> Events<B> {
    /// Events kept in `buf`, of at least [`capacity_for`](Self::capacity_for) bytes for
    /// the link it is used with (its contents do not matter).
    pub fn new(buf: B) -> Self {
        Events {
            fifo: RecordFifo::new(buf),
            handed: None,
            borrowing: 0,
            by_ticket: false,
            lost: 0,
            recorded: 0,
            json: None,
            keeps: None,
            kept: false,
            between: false,
        }
    }

    /// These events with a copy of every message received, of up to `max_message`
    /// bytes (the link's largest), kept with its events until they are taken: the events
    /// borrow their own copy, never the link's buffer. So they never hold the link's
    /// input back while their buffer has room for another message and its events, and
    /// they can be moved away from the link ([`core::mem::swap`] with an empty
    /// `Events`) and read where the link is out of reach
    /// ([`poll_kept`](Self::poll_kept)): a threaded adapter takes the events of a whole
    /// read under its lock and delivers them after releasing it. Each message is copied
    /// once, here; the buffer needs `max_message` bytes, and those of the messages
    /// waiting, beyond [`capacity_for`](Self::capacity_for).
    ///
    /// ```
    /// use benchlink_core::rtm::Events;
    /// let events = Events::new(vec![0u8; 64 << 10]).keeping_messages(16 << 10);
    /// # let _ = events;
    /// ```
    #[must_use]
    pub fn keeping_messages(mut self, max_message: usize) -> Self {
        self.keeps = Some(max_message);
        self
    }

    /// The oldest event not yet taken, read from the message copies of events
    /// [keeping messages](Self::keeping_messages), without the link (these events may
    /// have been moved away from it); like [`poll_event`](Self::poll_event) otherwise.
    /// Without that mode, an event that borrows a message is not found (it is counted
    /// [`lost`](Self::lost)).
    ///
    /// ```
    /// use benchlink_core::rtm::{ClientState, Event, Events, Handler};
    /// let mut at_link = Events::new(vec![0u8; 4096]).keeping_messages(1024);
    /// at_link.client_state(ClientState::Stopped, ClientState::Connecting);
    /// let mut moved = Events::new(vec![0u8; 4096]).keeping_messages(1024);
    /// core::mem::swap(&mut at_link, &mut moved);
    /// assert_eq!(
    ///     moved.poll_kept(),
    ///     Some(Event::ClientState { leave: ClientState::Stopped, enter: ClientState::Connecting }),
    /// );
    /// assert_eq!(moved.poll_kept(), None);
    /// ```
    #[must_use]
    pub fn poll_kept(&mut self) -> Option<Event<'_>> {
        let by_ticket = self.by_ticket;
        self.hand_out_in(&[], Encoding::Json, |record| {
            !(by_ticket && reply_ticket(record).is_some())
        })
    }

    /// These events with the replies ([`Event::Reply`], [`Event::Auth`]) kept for
    /// [`take_reply`](Self::take_reply): [`poll_event`](Self::poll_event) passes over
    /// them. For a caller whose requests each have a waiter of their own (a future, a
    /// blocking call) and whose other events go to one reader.
    ///
    /// ```
    /// use benchlink_core::rtm::Events;
    /// let events = Events::new([0u8; 256]).replies_by_ticket();
    /// # let _ = events;
    /// ```
    #[must_use]
    pub fn replies_by_ticket(mut self) -> Self {
        self.by_ticket = true;
        self
    }

    /// The oldest event not yet taken, `None` when there is none (replies are passed
    /// over when kept [by ticket](Self::replies_by_ticket)). It borrows these events and
    /// the `link` they came from (the message a reply or data came in), until the next
    /// call.
    #[must_use]
    pub fn poll_event<'a, L: Bytes, S: SubscriptionSlots, P: Slots>(
        &'a mut self,
        link: &'a Link<L, S, P>,
    ) -> Option<Event<'a>> {
        let by_ticket = self.by_ticket;
        self.hand_out(link, |record| {
            !(by_ticket && reply_ticket(record).is_some())
        })
    }

    /// The reply to `ticket` ([`Event::Reply`], or [`Event::Auth`] for an
    /// `authenticate`), taken out of turn, when it has come: the oldest one, as a search
    /// has several. Like [`poll_event`](Self::poll_event)'s, it borrows these events and
    /// the `link` until the next call.
    ///
    /// ```
    /// use benchlink_core::rtm::{Event, Events, Handler, Outcome, Ticket};
    /// use benchlink_core::rtm::{Buffers, Config, Link, LinkConfig, Pending, SubscriptionSlot};
    ///
    /// # let buffers = Buffers { rx: vec![0; 1024], tx: vec![0; 1024], queue: vec![0; 256], outbox: vec![0; 256], subscription_args: vec![] };
    /// # let link: Link<Vec<u8>, _, _> = Link::new(Config::default(), LinkConfig::DEFAULT,
    /// #     "ws://127.0.0.1:8080", "KEY", buffers, [SubscriptionSlot::EMPTY; 1], [Pending::EMPTY; 2]).unwrap();
    /// let mut events = Events::new(vec![0; 256]);
    /// let (a, b) = (Ticket::from_raw(1), Ticket::from_raw(2));
    /// events.reply(a, Outcome::Timeout);
    /// events.reply(b, Outcome::Disconnected);
    /// assert_eq!(events.take_reply(&link, b), Some(Event::Reply { ticket: b, outcome: Outcome::Disconnected }));
    /// assert_eq!(events.take_reply(&link, b), None);
    /// assert_eq!(events.poll_event(&link), Some(Event::Reply { ticket: a, outcome: Outcome::Timeout }));
    /// ```
    #[must_use]
    pub fn take_reply<'a, L: Bytes, S: SubscriptionSlots, P: Slots>(
        &'a mut self,
        link: &'a Link<L, S, P>,
        ticket: Ticket,
    ) -> Option<Event<'a>> {
        self.hand_out(link, |record| reply_ticket(record) == Some(ticket))
    }

    /// Hands out the oldest event not yet taken whose record `pick` accepts.
    fn hand_out<'a, L: Bytes, S: SubscriptionSlots, P: Slots>(
        &'a mut self,
        link: &'a Link<L, S, P>,
        pick: impl Fn(&[u8]) -> bool,
    ) -> Option<Event<'a>> {
        self.hand_out_in(link.last_message(), link.client().encoding(), pick)
    }

    /// [`hand_out`](Self::hand_out), its records' parts found in `message` (read in
    /// `encoding`), or in the copy kept before the record.
    fn hand_out_in<'a>(
        &'a mut self,
        message: &'a [u8],
        encoding: Encoding,
        pick: impl Fn(&[u8]) -> bool,
    ) -> Option<Event<'a>> {
        self.settle();
        // The last message kept before the record handed out.
        let mut kept = None;
        let at = self.fifo.position(|at, record| match record.first() {
            Some(&MESSAGE) => {
                kept = Some(at);
                false
            }
            Some(&TAKEN) => false,
            _ => pick(record),
        })?;
        self.handed = Some(at);
        let (message, encoding) = match kept.and_then(|m| self.fifo.record(m)) {
            Some([_, encoding, message @ ..]) => (message, encoding_from(*encoding)?),
            _ => (message, encoding),
        };
        let event = self
            .fifo
            .record(at)
            .and_then(|record| read(record, message, encoding));
        if event.is_none() {
            // A record whose message is gone (never, while the link is used as documented):
            // counted as lost, and marked taken at the next call.
            self.lost = self.lost.saturating_add(1);
        }
        event
    }

    /// Delivers every event waiting to `h`, in order: the pull API drained into a
    /// [`Handler`].
    pub fn dispatch<L: Bytes, S: SubscriptionSlots, P: Slots, H: Handler + ?Sized>(
        &mut self,
        link: &Link<L, S, P>,
        h: &mut H,
    ) {
        while let Some(event) = self.poll_event(link) {
            event.deliver(h);
        }
    }

    /// Marks the record handed out last taken, and drops the taken records at the front.
    fn settle(&mut self) {
        if let Some(tag) = self
            .handed
            .take()
            .and_then(|at| self.fifo.record_mut(at))
            .and_then(|record| record.first_mut())
        {
            if *tag & BORROWS != 0 {
                self.borrowing = self.borrowing.saturating_sub(1);
            }
            *tag = TAKEN;
        }
        loop {
            match self.fifo.front().and_then(|r| r.first()) {
                Some(&TAKEN) => self.fifo.pop_front(),
                Some(&MESSAGE) if self.message_done() => self.fifo.pop_front(),
                _ => return,
            }
        }
    }

    /// Whether the message kept at the front is no longer needed: every record after it
    /// was taken, and another message came after them or the link is between messages
    /// (until then, more events of it may come).
    fn message_done(&self) -> bool {
        // The first record after the front one that was not taken.
        let mut front = true;
        let next = self.fifo.position(|_, record| {
            !core::mem::replace(&mut front, false) && record.first() != Some(&TAKEN)
        });
        match next.and_then(|at| self.fifo.record(at)?.first()) {
            Some(&MESSAGE) => true,
            Some(_) => false,
            None => self.between,
        }
    }

    /// Copies `message` in (while [keeping messages](Self::keeping_messages)), as a
    /// record before its events; `kept` says whether it fit.
    fn keep(&mut self, message: &[u8], encoding: Encoding) {
        self.between = false;
        self.settle();
        self.kept = self.fifo.push_with(|room| {
            let len = message.len().checked_add(2)?;
            let (head, copy) = room.get_mut(..len)?.split_at_mut(2);
            head.copy_from_slice(&[MESSAGE, encoding_byte(encoding)]);
            copy.copy_from_slice(message);
            Some(len)
        });
    }

    /// Bytes enough for the events of any one call into a link with `subscriptions`
    /// subscriptions, `in_flight` acknowledged requests in flight and `queued` requests
    /// queued: a connection lost at the worst moment ends every request (a reply each),
    /// moves every subscription (a state change, a failure and a deletion at most, each
    /// naming it) and reports why, on top of the frame that caused it.
    ///
    /// ```
    /// use benchlink_core::rtm::Events;
    /// let small = Events::<Vec<u8>>::capacity_for(2, 4, 8);
    /// assert!(small > 3 * 2 * 256 && small < 4096);
    /// ```
    pub const fn capacity_for(subscriptions: usize, in_flight: usize, queued: usize) -> usize {
        let small = in_flight.saturating_add(queued).saturating_add(8);
        small
            .saturating_mul(SMALL_RECORD)
            .saturating_add(subscriptions.saturating_mul(3).saturating_mul(MAX_RECORD))
            .saturating_add(MAX_RECORD.saturating_mul(2))
    }

    /// Events dropped because the buffer was full (smaller than
    /// [`capacity_for`](Self::capacity_for), or events left untaken from call to call),
    /// or that could no longer be read (input given to the link while events waited).
    /// When a new event does not fit, the oldest ones waiting that borrow nothing and are
    /// no reply (state changes, say) are dropped to make room first: what is dropped is
    /// what was least recent.
    ///
    /// ```
    /// use benchlink_core::rtm::{ClientState, Events, Handler};
    /// let mut events = Events::new([0u8; 4]); // no room for a record
    /// events.client_state(ClientState::Stopped, ClientState::Connecting);
    /// assert_eq!(events.lost(), 1);
    /// ```
    pub fn lost(&self) -> u32 {
        self.lost
    }

    /// How many events were recorded, ever (wrapping): a change says new events came,
    /// so whoever waits for one can be woken.
    ///
    /// ```
    /// use benchlink_core::rtm::{ClientState, Events, Handler};
    /// let mut events = Events::new([0u8; 64]);
    /// let before = events.recorded();
    /// events.client_state(ClientState::Stopped, ClientState::Connecting);
    /// assert_ne!(events.recorded(), before);
    /// ```
    pub fn recorded(&self) -> u32 {
        self.recorded
    }

    /// Where `part` lies in the last message received, when that was JSON text and `part`
    /// lies in it (parts recorded so are read back without parsing the message again).
    fn span(&self, part: &[u8]) -> Option<Span> {
        let message = self.json?;
        let at = (part.as_ptr() as usize).checked_sub(message.at)?;
        if at.checked_add(part.len())? > message.len {
            return None;
        }
        Some(Span {
            at: u32::try_from(at).ok()?,
            len: u32::try_from(part.len()).ok()?,
        })
    }

    /// Where the parts of a reply PDU lie, or `None`: it is read again. A reply the
    /// client matched has a known action and a numeric id, so those are kept as such.
    fn pdu_spans<'p>(&self, pdu: &Pdu<'p>) -> Option<PduSpans<'p>> {
        let action = match pdu.action {
            Action::Other(_) => return None,
            known => known.as_str(),
        };
        let id = match pdu.id? {
            Id::Int(n) => n,
            Id::Str(_) => return None,
        };
        let body = match pdu.body {
            None => None,
            Some(body) => Some(self.span(body.raw().as_json()?.as_bytes())?),
        };
        Some(PduSpans { action, id, body })
    }

    /// Stores a record: `tag`, then what `fill` writes; `borrows` when its event borrows
    /// from the link's last message (which then stays until it is taken).
    fn push(&mut self, tag: Tag, borrows: bool, fill: impl Fn(&mut Writer<'_>) -> Option<()>) {
        self.settle();
        if borrows && self.keeps.is_some() && !self.kept {
            // Its message did not fit: without it the event cannot be read.
            self.lost = self.lost.saturating_add(1);
            return;
        }
        let first = tag as u8 | if borrows { BORROWS } else { 0 };
        loop {
            let stored = self.fifo.push_with(|room| {
                let mut w = Writer { buf: room, at: 0 };
                w.u8(first)?;
                fill(&mut w)?;
                Some(w.at)
            });
            if stored {
                self.recorded = self.recorded.wrapping_add(1);
                self.borrowing = self.borrowing.saturating_add(u32::from(borrows));
                return;
            }
            self.lost = self.lost.saturating_add(1);
            // Room, if the oldest event waiting can be dropped for it.
            let droppable = self
                .fifo
                .front()
                .and_then(|r| r.first())
                .is_some_and(|&b| b & BORROWS == 0 && !matches!(b, REPLY | AUTH | MESSAGE));
            if !droppable {
                return;
            }
            self.fifo.pop_front();
            self.settle();
        }
    }
}

/// The high bit of a record's first byte: its event borrows the link's last message.
const BORROWS: u8 = 0x80;

/// A record's first byte once its event was taken (in the middle of the FIFO, by
/// [`Events::take_reply`]): passed over, and dropped when it reaches the front.
const TAKEN: u8 = 0x7F;

/// The first byte of a message kept ([`Events::keeping_messages`]), followed by its
/// encoding and its bytes: read for the events after it, never handed out itself.
const MESSAGE: u8 = 0x7E;

/// A kept message's encoding as its byte, and back.
fn encoding_byte(encoding: Encoding) -> u8 {
    match encoding {
        Encoding::Json => 0,
        #[cfg(feature = "cbor")]
        Encoding::Cbor => 1,
    }
}

fn encoding_from(byte: u8) -> Option<Encoding> {
    match byte {
        0 => Some(Encoding::Json),
        #[cfg(feature = "cbor")]
        1 => Some(Encoding::Cbor),
        _ => None,
    }
}

/// The tags of reply records, as bytes (without [`BORROWS`]).
const REPLY: u8 = Tag::Reply as u8;
const AUTH: u8 = Tag::Auth as u8;

/// The ticket of a reply record ([`Tag::Reply`] or [`Tag::Auth`], which both start with
/// it), `None` for any other.
fn reply_ticket(record: &[u8]) -> Option<Ticket> {
    let (&first, rest) = record.split_first()?;
    if !matches!(first & !BORROWS, REPLY | AUTH) {
        return None;
    }
    let ticket = rest.get(..4)?.try_into().ok()?;
    Some(Ticket::from_raw(u32::from_le_bytes(ticket)))
}

/// A reply PDU's parts, for a record: its action's name (copied: a known action's name
/// is not the message's text), its id, and where its body lies.
#[derive(Clone, Copy)]
struct PduSpans<'p> {
    action: &'p str,
    id: u64,
    body: Option<Span>,
}

/// Record kinds, one per [`Handler`] method.
#[derive(Clone, Copy)]
#[repr(u8)]
enum Tag {
    State,
    Reply,
    SubState,
    SubReply,
    SubFailed,
    SubCreated,
    SubDeleted,
    SubData,
    FastForward,
    Internal,
    Auth,
    LinkClosed,
}

impl Tag {
    const ALL: [Tag; 12] = [
        Tag::State,
        Tag::Reply,
        Tag::SubState,
        Tag::SubReply,
        Tag::SubFailed,
        Tag::SubCreated,
        Tag::SubDeleted,
        Tag::SubData,
        Tag::FastForward,
        Tag::Internal,
        Tag::Auth,
        Tag::LinkClosed,
    ];
}

impl<B: Bytes> Handler for Events<B> {
    /// Only while no event waiting borrows the last message: the events that borrow
    /// one message are taken before the next is read (it stays in the link until then).
    /// Keeping messages: while there is room for another message and its events.
    fn ready_for_input(&mut self) -> bool {
        self.between = true;
        self.settle();
        match self.keeps {
            None => self.borrowing == 0,
            Some(max) => {
                self.fifo.is_empty()
                    || self.fifo.free() >= max.saturating_add(RECORD_HEADER + 2 + 4 * MAX_RECORD)
            }
        }
    }

    fn client_state(&mut self, leave: ClientState, enter: ClientState) {
        self.push(Tag::State, false, |w| {
            w.u8(leave as u8)?.u8(enter as u8).map(drop)
        });
    }

    fn received(&mut self, message: &[u8], encoding: Encoding) {
        self.json = (encoding == Encoding::Json).then_some(Received {
            at: message.as_ptr() as usize,
            len: message.len(),
        });
        if self.keeps.is_some() {
            self.keep(message, encoding);
        }
    }

    fn reply(&mut self, ticket: Ticket, outcome: Outcome<'_>) {
        let (kind, pdu) = match outcome {
            Outcome::Ok(pdu) => (0, Some(pdu)),
            Outcome::Error(pdu) => (1, Some(pdu)),
            Outcome::Data(pdu) => (2, Some(pdu)),
            Outcome::Timeout => (3, None),
            Outcome::Disconnected => (4, None),
        };
        let spans = pdu.and_then(|pdu| self.pdu_spans(&pdu));
        self.push(Tag::Reply, pdu.is_some(), |w| {
            let w = w.u32(ticket.get())?.u8(kind)?;
            match pdu {
                Some(_) => w.pdu_spans(spans),
                None => Some(()),
            }
        });
    }

    fn subscription_state(&mut self, key: &str, leave: SubState, enter: SubState) {
        self.push(Tag::SubState, false, |w| {
            w.u8(leave as u8)?.u8(enter as u8)?.str(key)
        });
    }

    fn subscription_reply(&mut self, key: &str, _reply: Pdu<'_>) {
        self.push(Tag::SubReply, true, |w| w.str(key));
    }

    fn subscription_failed(&mut self, key: &str, reason: FailReason<'_>) {
        let kind = match reason {
            FailReason::SubscribeError(_) => 0,
            FailReason::ChannelError(_) => 1,
        };
        self.push(Tag::SubFailed, true, |w| w.u8(kind)?.str(key));
    }

    fn subscription_created(&mut self, key: &str) {
        self.push(Tag::SubCreated, false, |w| w.str(key));
    }

    fn subscription_deleted(&mut self, key: &str) {
        self.push(Tag::SubDeleted, false, |w| w.str(key));
    }

    fn subscription_data(&mut self, key: &str, data: pdu::SubscriptionData<'_>) {
        let text = |t: pdu::Text<'_>| self.span(t.as_json()?.as_raw().as_bytes());
        let spans = (|| {
            let position = match data.position {
                None => None,
                Some(p) => Some(text(p)?),
            };
            let messages = self.span(data.messages.raw().as_json()?.as_bytes())?;
            Some((text(data.subscription_id)?, position, messages))
        })();
        self.push(Tag::SubData, true, |w| {
            match spans {
                None => w.u8(0)?,
                Some((id, position, messages)) => {
                    w.u8(1)?.span(id)?.opt_span(position)?.span(messages)?
                }
            };
            w.str(key)
        });
    }

    fn fast_forward(&mut self, key: &str, _info: pdu::SubscriptionInfo<'_>) {
        self.push(Tag::FastForward, true, |w| w.str(key));
    }

    fn internal_error(&mut self, error: InternalError<'_>) {
        // Parts of the frame (the parse error, the PDU, its action or error body) are
        // found again in the frame; only keys and the request's action are kept.
        let borrows = !matches!(
            error,
            InternalError::AuthRestoreFailed
                | InternalError::DataWithoutPosition { .. }
                | InternalError::PositionNotTracked { .. }
                | InternalError::UnexpectedForSubscription { .. }
                | InternalError::NotConnected
        );
        self.push(Tag::Internal, borrows, |w| match error {
            InternalError::Malformed(_) => w.u8(0).map(drop),
            InternalError::GeneralError(_) => w.u8(1).map(drop),
            InternalError::WrongReply { request, .. } => w.u8(2)?.str(request.as_str()),
            InternalError::AuthRestoreFailed => w.u8(3).map(drop),
            InternalError::Ignored(_) => w.u8(4).map(drop),
            InternalError::UnknownReply(_) => w.u8(5).map(drop),
            InternalError::DataWithoutPosition { key } => w.u8(6)?.str(key),
            InternalError::PositionNotTracked { key } => w.u8(7)?.str(key),
            InternalError::UnexpectedForSubscription { key } => w.u8(8)?.str(key),
            InternalError::NotConnected => w.u8(9).map(drop),
        });
    }

    fn auth(&mut self, ticket: Ticket, result: AuthResult<'_>) {
        let (kind, failure) = match result {
            AuthResult::Done => (0, 0),
            AuthResult::Rejected { failure, .. } => (1, failure as u8),
            AuthResult::Timeout => (2, 0),
            AuthResult::Disconnected => (3, 0),
        };
        self.push(Tag::Auth, kind == 1, |w| {
            w.u32(ticket.get())?.u8(kind)?.u8(failure).map(drop)
        });
    }

    fn link_closed(&mut self, why: Disconnect<'_>) {
        self.push(Tag::LinkClosed, false, |w| match why {
            Disconnect::PeerClosed { code, reason } => {
                let code = code.map_or(0, |c| u32::from(c.0) | 1 << 16);
                w.u8(0)?.u32(code)?.str(reason)
            }
            Disconnect::Protocol(e) => {
                let (kind, a, b) = ws_error(e);
                w.u8(1)?.u8(kind)?.u64(a)?.u64(b).map(drop)
            }
            Disconnect::DeadPeer { silent } => {
                let micros = u64::try_from(silent.as_micros()).unwrap_or(u64::MAX);
                w.u8(2)?.u64(micros).map(drop)
            }
            Disconnect::WriteStalled => w.u8(3).map(drop),
            Disconnect::TransportClosed => w.u8(4).map(drop),
            Disconnect::ClientClosed => w.u8(5).map(drop),
        });
    }
}

/// The event of `record`, the parts of the received frame found again in `frame` (read
/// in `encoding`); `None` for a record this version did not write.
pub(crate) fn read<'a>(record: &'a [u8], frame: &'a [u8], encoding: Encoding) -> Option<Event<'a>> {
    let mut r = Reader { buf: record, at: 0 };
    let tag = *Tag::ALL.get(usize::from(r.u8()? & !BORROWS))?;
    let pdu = || Pdu::decode(encoding, frame).ok();
    let incoming = || Incoming::decode(encoding, frame);
    Some(match tag {
        Tag::State => Event::ClientState {
            leave: nth(&CLIENT_STATES, r.u8()?)?,
            enter: nth(&CLIENT_STATES, r.u8()?)?,
        },
        Tag::Reply => {
            let ticket = Ticket::from_raw(r.u32()?);
            let kind = r.u8()?;
            let mut reply = || match r.pdu(frame)? {
                Some(pdu) => Some(pdu),
                None => pdu(),
            };
            let outcome = match kind {
                0 => Outcome::Ok(reply()?),
                1 => Outcome::Error(reply()?),
                2 => Outcome::Data(reply()?),
                3 => Outcome::Timeout,
                _ => Outcome::Disconnected,
            };
            Event::Reply { ticket, outcome }
        }
        Tag::SubState => {
            let leave = nth(&SUB_STATES, r.u8()?)?;
            let enter = nth(&SUB_STATES, r.u8()?)?;
            Event::SubscriptionState {
                key: r.str()?,
                leave,
                enter,
            }
        }
        Tag::SubReply => Event::SubscriptionReply {
            key: r.str()?,
            reply: pdu()?,
        },
        Tag::SubFailed => {
            let reason = match r.u8()? {
                0 => FailReason::SubscribeError(pdu()?),
                _ => match incoming().ok()? {
                    Incoming::ChannelError(e) => FailReason::ChannelError(e),
                    _ => return None,
                },
            };
            Event::SubscriptionFailed {
                key: r.str()?,
                reason,
            }
        }
        Tag::SubCreated => Event::SubscriptionCreated { key: r.str()? },
        Tag::SubDeleted => Event::SubscriptionDeleted { key: r.str()? },
        Tag::SubData => {
            let data = match r.u8()? {
                0 => match incoming().ok()? {
                    Incoming::Data(data) => data,
                    _ => return None,
                },
                _ => {
                    let text = core::str::from_utf8(frame).ok()?;
                    let subscription_id = JsonStr::validated(r.span_in(text)?).into();
                    let position = match r.u8()? {
                        0 => None,
                        _ => Some(JsonStr::validated(r.span_in(text)?).into()),
                    };
                    let messages = Array::validated(r.span_in(text)?).into();
                    pdu::SubscriptionData {
                        subscription_id,
                        position,
                        messages,
                    }
                }
            };
            Event::SubscriptionData {
                key: r.str()?,
                data,
            }
        }
        Tag::FastForward => match incoming().ok()? {
            Incoming::FastForward(info) => Event::FastForward {
                key: r.str()?,
                info,
            },
            _ => return None,
        },
        Tag::Internal => Event::InternalError(match r.u8()? {
            0 => InternalError::Malformed(incoming().err()?),
            1 => match incoming().ok()? {
                Incoming::GeneralError(body) => InternalError::GeneralError(body),
                _ => return None,
            },
            2 => InternalError::WrongReply {
                request: Action::parse(r.str()?),
                reply: pdu()?.action,
            },
            3 => InternalError::AuthRestoreFailed,
            4 => InternalError::Ignored(pdu()?),
            5 => InternalError::UnknownReply(pdu()?),
            6 => InternalError::DataWithoutPosition { key: r.str()? },
            7 => InternalError::PositionNotTracked { key: r.str()? },
            8 => InternalError::UnexpectedForSubscription { key: r.str()? },
            _ => InternalError::NotConnected,
        }),
        Tag::Auth => {
            let ticket = Ticket::from_raw(r.u32()?);
            let result = match r.u8()? {
                0 => AuthResult::Done,
                1 => AuthResult::Rejected {
                    failure: nth(&AUTH_FAILURES, r.u8()?)?,
                    error: pdu()?.error(),
                },
                2 => AuthResult::Timeout,
                _ => AuthResult::Disconnected,
            };
            Event::Auth { ticket, result }
        }
        Tag::LinkClosed => Event::LinkClosed(match r.u8()? {
            0 => {
                let code = r.u32()?;
                let code = (code >> 16 != 0).then_some(CloseCode(code as u16));
                Disconnect::PeerClosed {
                    code,
                    reason: r.str()?,
                }
            }
            1 => Disconnect::Protocol(ws_error_from(r.u8()?, r.u64()?, r.u64()?)?),
            2 => Disconnect::DeadPeer {
                silent: Duration::from_micros(r.u64()?),
            },
            3 => Disconnect::WriteStalled,
            4 => Disconnect::TransportClosed,
            _ => Disconnect::ClientClosed,
        }),
    })
}

/// Writes a record's fields after its tag.
struct Writer<'b> {
    buf: &'b mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn bytes(&mut self, bytes: &[u8]) -> Option<&mut Self> {
        let end = self.at.checked_add(bytes.len())?;
        self.buf.get_mut(self.at..end)?.copy_from_slice(bytes);
        self.at = end;
        Some(self)
    }

    fn u8(&mut self, v: u8) -> Option<&mut Self> {
        self.bytes(&[v])
    }

    fn u32(&mut self, v: u32) -> Option<&mut Self> {
        self.bytes(&v.to_le_bytes())
    }

    fn u64(&mut self, v: u64) -> Option<&mut Self> {
        self.bytes(&v.to_le_bytes())
    }

    fn span(&mut self, span: Span) -> Option<&mut Self> {
        self.u32(span.at)?.u32(span.len)
    }

    fn opt_span(&mut self, span: Option<Span>) -> Option<&mut Self> {
        match span {
            None => self.u8(0),
            Some(span) => self.u8(1)?.span(span),
        }
    }

    /// A reply PDU's parts: `0` when it is to be read again, else where they lie.
    fn pdu_spans(&mut self, spans: Option<PduSpans<'_>>) -> Option<()> {
        let Some(PduSpans { action, id, body }) = spans else {
            return self.u8(0).map(drop);
        };
        self.u8(1)?.u64(id)?.opt_span(body)?.str(action)
    }

    /// A string of up to 65,535 bytes (keys and close reasons are far shorter).
    fn str(&mut self, s: &str) -> Option<()> {
        let len = u16::try_from(s.len()).ok()?;
        self.bytes(&len.to_le_bytes())?
            .bytes(s.as_bytes())
            .map(drop)
    }
}

/// Reads what a [`Writer`] wrote.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bytes<const N: usize>(&mut self) -> Option<[u8; N]> {
        let end = self.at.checked_add(N)?;
        let bytes = self.buf.get(self.at..end)?.try_into().ok()?;
        self.at = end;
        Some(bytes)
    }

    fn u8(&mut self) -> Option<u8> {
        self.bytes::<1>().map(|[b]| b)
    }

    fn u32(&mut self) -> Option<u32> {
        self.bytes().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.bytes().map(u64::from_le_bytes)
    }

    /// The part of `text` (a whole message) a [`Writer::span`] names.
    fn span_in(&mut self, text: &'a str) -> Option<&'a str> {
        let at = usize::try_from(self.u32()?).ok()?;
        let len = usize::try_from(self.u32()?).ok()?;
        text.get(at..at.checked_add(len)?)
    }

    /// A reply PDU from its parts in `frame` (`Some(None)`: it is to be read again).
    fn pdu(&mut self, frame: &'a [u8]) -> Option<Option<Pdu<'a>>> {
        if self.u8()? == 0 {
            return Some(None);
        }
        let text = core::str::from_utf8(frame).ok()?;
        let id = Id::Int(self.u64()?);
        let body = match self.u8()? {
            0 => None,
            _ => Some(Object::validated(self.span_in(text)?).into()),
        };
        let action = Action::parse(self.str()?);
        Some(Some(Pdu::from_parts(action, Some(id), body, frame)))
    }

    fn str(&mut self) -> Option<&'a str> {
        let len = usize::from(u16::from_le_bytes(self.bytes()?));
        let end = self.at.checked_add(len)?;
        let s = core::str::from_utf8(self.buf.get(self.at..end)?).ok()?;
        self.at = end;
        Some(s)
    }
}

/// The variants of the field-less enums a record holds, in declaration order: a
/// variant's byte is its index (`as u8`), read back by [`nth`].
const CLIENT_STATES: [ClientState; 6] = [
    ClientState::Stopped,
    ClientState::Connecting,
    ClientState::Connected,
    ClientState::Stopping,
    ClientState::Awaiting,
    ClientState::Disposed,
];

const SUB_STATES: [SubState; 5] = [
    SubState::Unsubscribed,
    SubState::Subscribing,
    SubState::Subscribed,
    SubState::Unsubscribing,
    SubState::Failed,
];

const AUTH_FAILURES: [AuthFailure; 4] = [
    AuthFailure::HandshakeRejected,
    AuthFailure::AuthenticateRejected,
    AuthFailure::MissingNonce,
    AuthFailure::UnexpectedReply,
];

/// The variant whose byte is `b` in `table`.
fn nth<T: Copy>(table: &[T], b: u8) -> Option<T> {
    table.get(usize::from(b)).copied()
}

/// A WebSocket error as a kind and two numbers.
fn ws_error(e: WsError) -> (u8, u64, u64) {
    match e {
        WsError::MaskedServerFrame => (0, 0, 0),
        WsError::ReservedBits { bits } => (1, u64::from(bits), 0),
        WsError::UnknownOpcode { opcode } => (2, u64::from(opcode), 0),
        WsError::FragmentedControl => (3, 0, 0),
        WsError::ControlTooLong { len } => (4, len, 0),
        WsError::NonMinimalLength { len } => (5, len, 0),
        WsError::UnexpectedContinuation => (6, 0, 0),
        WsError::ExpectedContinuation => (7, 0, 0),
        WsError::MessageTooLarge { len, max } => (8, len, max as u64),
        WsError::InvalidUtf8 => (9, 0, 0),
        WsError::InvalidCloseCode { code } => (10, u64::from(code), 0),
        WsError::TruncatedCloseCode => (11, 0, 0),
    }
}

fn ws_error_from(kind: u8, a: u64, b: u64) -> Option<WsError> {
    Some(match kind {
        0 => WsError::MaskedServerFrame,
        1 => WsError::ReservedBits { bits: a as u8 },
        2 => WsError::UnknownOpcode { opcode: a as u8 },
        3 => WsError::FragmentedControl,
        4 => WsError::ControlTooLong { len: a },
        5 => WsError::NonMinimalLength { len: a },
        6 => WsError::UnexpectedContinuation,
        7 => WsError::ExpectedContinuation,
        8 => WsError::MessageTooLarge {
            len: a,
            max: usize::try_from(b).unwrap_or(usize::MAX),
        },
        9 => WsError::InvalidUtf8,
        10 => WsError::InvalidCloseCode { code: a as u16 },
        11 => WsError::TruncatedCloseCode,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The records [`Events::capacity_for`] counts are the largest the handler writes:
    /// subscription data with a key of [`MAX_SUBSCRIPTION_KEY`] bytes and every part, a
    /// reply with every part and the longest action name there is.
    #[test]
    fn the_largest_records_fit_the_sizes_capacity_for_counts() {
        let record = |events: &Events<Vec<u8>>| events.fifo.front().map_or(0, <[u8]>::len);
        let key = "k".repeat(MAX_SUBSCRIPTION_KEY);
        let frame = br#"{"action":"rtm/subscription/data","body":{"subscription_id":"k","position":"1:2","messages":[1]}}"#;
        let mut events = Events::new(vec![0; 4096]);
        events.received(frame, Encoding::Json);
        let Ok(Incoming::Data(data)) = Incoming::decode(Encoding::Json, frame) else {
            panic!("a data PDU")
        };
        events.subscription_data(&key, data);
        assert_eq!(RECORD_HEADER + record(&events), MAX_RECORD);

        assert!(Action::ALL.iter().all(|a| a.as_str().len() <= MAX_ACTION));
        let frame = br#"{"action":"auth/authenticate/error","id":4294967295,"body":{"error":"e"}}"#;
        let mut events = Events::new(vec![0; 4096]);
        events.received(frame, Encoding::Json);
        let pdu = Pdu::decode(Encoding::Json, frame).expect("a reply");
        events.reply(Ticket::from_raw(u32::MAX), Outcome::Error(pdu));
        let longest =
            RECORD_HEADER + record(&events) + MAX_ACTION - "auth/authenticate/error".len();
        assert_eq!(longest, SMALL_RECORD);
    }
}

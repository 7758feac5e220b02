//! One subscription record and its state machine, after the reference (Python) SDK's
//! subscription table, without its bugs.
//!
//! The machine is total: [`Subscription::handle`] accepts every [`SubEvent`] in every
//! [`SubState`]; events without a row in the table leave the state alone. Differences
//! from the reference table:
//!
//! - `Failed` + `Disconnect` and `Failed` + `ChannelError` stay `Failed` (a failed
//!   subscription is not retried on every reconnect, and the server cannot end a
//!   subscription that is not live); only the application's `unsubscribe` or
//!   `subscribe` leaves `Failed`.
//! - Reaching `Unsubscribed` while unlinked removes the record and reports it deleted,
//!   wherever it happens (the reference leaks the record, and never reports it deleted,
//!   when unsubscribing while disconnected or from `Failed`).
//! - `out_of_sync` (and `expired_position`, which would otherwise fail again on every
//!   resubscribe) drops the tracked position: RELIABLE and SIMPLE resubscribe **without**
//!   a `position` key (the reference sends `"position": null`), ADVANCED fails.
//! - A channel error on a subscription that is no longer wanted (unlinked, or cycling to
//!   new arguments) ends it instead of resubscribing first.
//! - SIMPLE sends a user `position` and every mode sends `history` only until the first
//!   `subscribe/ok` (the reference re-sends both on every reconnect, replaying
//!   history).
//! - Data arriving while `Subscribing` is **reported** to the application at once (the
//!   reference drops it silently) and advances the tracked position; a later
//!   `subscribe/ok` position, which is older, is then not applied.
//! - `rtm/subscription/info` `fast_forward` with a `position` updates the tracked position
//!   (the JS SDK's behaviour), so a resubscribe does not ask for the expired one again.

use heapless::String;

use super::events::{FailReason, Handler, InternalError, Mode, RequestError, SubState};
use super::pdu::Text;
use super::pdu::{self, History, Pdu, Request, SubscribeRequest, Target};
use super::requests::{escaped_len, ENVELOPE};

/// The longest subscription key: a channel name, or a view's subscription id. A
/// subscription's `filter` and `extras` live apart, in storage the caller sizes (see
/// [`Client::new`](super::Client::new)).
pub const MAX_SUBSCRIPTION_KEY: usize = 256;

/// The longest position a subscription tracks; positions look like `1479315802:6`.
pub const MAX_POSITION_LEN: usize = 64;

/// Options of a [`subscribe`](super::Client::subscribe): the optional fields of the
/// `rtm/subscribe` body. All optional; `Default` is a plain subscription.
///
/// ```
/// use benchlink_core::rtm::SubscribeArgs;
/// use benchlink_core::rtm::pdu::History;
/// let args = SubscribeArgs { history: Some(History::Count(10)), ..SubscribeArgs::default() };
/// assert!(args.filter.is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SubscribeArgs<'a> {
    /// Start at this position (from a `publish/ok`, `subscribe/ok` or data PDU). In SIMPLE
    /// mode it applies to the first subscribe only; in RELIABLE and ADVANCED mode it is
    /// replaced by the tracked position as messages arrive.
    pub position: Option<&'a str>,
    /// Replay history first; sent until the subscription is first established.
    pub history: Option<History>,
    /// A view: an SQL-like `select … from channel`. The subscription is then keyed by the
    /// `channel_or_id` given to `subscribe` as its `subscription_id`.
    pub filter: Option<&'a str>,
    /// Aggregation period of a view, in seconds (at most 60).
    pub period: Option<u32>,
    /// `"only": "value_changes"`: consecutive identical messages arrive once.
    pub only_value_changes: bool,
    /// `"force": true`: replace a subscription with the same id on the server.
    pub force: bool,
    /// More members for the subscribe body, as a JSON object text; they override the
    /// members above with the same name and are sent with every subscribe.
    pub extras: Option<&'a str>,
}

/// Whether the application still wants the subscription (the reference SDK's "link
/// mode", separate from the delivery mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkMode {
    /// Wanted, with the current arguments.
    Linked,
    /// `unsubscribe` was called: delete it once `Unsubscribed`.
    Unlinked,
    /// `unsubscribe` then `subscribe` again: once `Unsubscribed`, start over with the new
    /// arguments (already stored).
    Cycle,
}

/// Which request a subscription has to send or has in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SubRequest {
    Subscribe,
    Unsubscribe,
}

/// Events of the subscription machine.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SubEvent<'a> {
    /// The client connected (after auth restore).
    Connect,
    /// The connection is gone.
    Disconnect,
    /// The link mode changed (subscribe/unsubscribe by the application).
    ModeChange,
    SubscribeOk(Pdu<'a>),
    SubscribeError(Pdu<'a>),
    /// A real `unsubscribe/ok`, or the local one of unsubscribing from `Failed`.
    UnsubscribeOk,
    UnsubscribeError,
    ChannelError(pdu::ChannelError<'a>),
}

/// What the client must do with the record after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) enum Fate {
    Keep,
    /// Deleted: remove it from the table (the `deleted` event was already reported).
    Remove,
}

/// One subscription: its arguments, tracked position, states and pending request.
#[derive(Debug, Clone)]
pub(crate) struct Subscription {
    key: String<MAX_SUBSCRIPTION_KEY>,
    /// The slot holding the filter, then the extras (none when both are absent or
    /// empty); the client sets it.
    pub(crate) args: Option<u16>,
    filter_len: Option<usize>,
    extras_len: Option<usize>,
    position: Option<String<MAX_POSITION_LEN>>,
    mode: Mode,
    history: Option<History>,
    period: Option<u32>,
    only_value_changes: bool,
    force: bool,
    /// A `subscribe/ok` arrived for the current arguments: first-time options are spent.
    established: bool,
    /// Data arrived since the last subscribe was sent.
    data_since_subscribe: bool,
    state: SubState,
    pub(crate) link_mode: LinkMode,
    /// A request to write as soon as the outbox has room.
    pub(crate) to_send: Option<SubRequest>,
    /// The request in flight on the current connection: `(id, kind)`.
    pub(crate) in_flight: Option<(u32, SubRequest)>,
}

impl Subscription {
    /// The filter and the extras (checked: a JSON object, its text trimmed) that a
    /// subscription's arguments slot must hold, in that order.
    pub(crate) fn args_parts<'a>(args: &SubscribeArgs<'a>) -> Result<[&'a str; 2], RequestError> {
        let extras = match args.extras {
            Some(extras) => crate::json::write::parse_object(extras)
                .map_err(|_| RequestError::InvalidJson)?
                .as_raw(),
            None => "",
        };
        Ok([args.filter.unwrap_or(""), extras])
    }

    /// A new linked record in `Unsubscribed`, or why the arguments are unusable; `parts`
    /// are [`args_parts`](Self::args_parts) (the slot holding them is the client's to
    /// set).
    pub(crate) fn new(
        key: &str,
        mode: Mode,
        args: &SubscribeArgs<'_>,
        parts: [&str; 2],
    ) -> Result<Self, RequestError> {
        let key = String::try_from(key).map_err(|()| RequestError::TooLarge)?;
        let position = match args.position {
            // Positions are opaque server strings like `1479315802:6`; one that needs JSON
            // escapes did not come from a server.
            Some(p) if escaped_len(p) != p.len() => return Err(RequestError::InvalidPosition),
            Some(p) => Some(String::try_from(p).map_err(|()| RequestError::TooLarge)?),
            None => None,
        };
        Ok(Subscription {
            key,
            args: None,
            filter_len: args.filter.map(str::len),
            extras_len: args.extras.map(|_| parts[1].len()),
            position,
            mode,
            history: args.history,
            period: args.period,
            only_value_changes: args.only_value_changes,
            force: args.force,
            established: false,
            data_since_subscribe: false,
            state: SubState::Unsubscribed,
            link_mode: LinkMode::Linked,
            to_send: None,
            in_flight: None,
        })
    }

    /// Takes the arguments of `fresh` (a cycle, or a restart from `Failed`), keeping the
    /// state, the link mode, the requests and the arguments slot of `self` (which the
    /// client has rewritten with `fresh`'s).
    pub(crate) fn replace_args(&mut self, fresh: Subscription) {
        let (state, link_mode, to_send, in_flight, args) = (
            self.state,
            self.link_mode,
            self.to_send,
            self.in_flight,
            self.args,
        );
        *self = Subscription {
            state,
            link_mode,
            to_send,
            in_flight,
            args,
            ..fresh
        };
    }

    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// The filter, from the arguments slot's bytes.
    fn filter<'a>(&self, args: &'a [u8]) -> Option<&'a str> {
        let len = self.filter_len?;
        core::str::from_utf8(args.get(..len)?).ok()
    }

    /// The extras, from the arguments slot's bytes.
    fn extras<'a>(&self, args: &'a [u8]) -> Option<&'a str> {
        let len = self.extras_len?;
        let start = self.filter_len.unwrap_or(0);
        core::str::from_utf8(args.get(start..start.checked_add(len)?)?).ok()
    }

    pub(crate) fn state(&self) -> SubState {
        self.state
    }

    fn tracks_position(&self) -> bool {
        self.mode != Mode::Simple
    }

    /// An upper bound of the length of the subscribe PDU (the largest request it sends)
    /// of a subscription to `key` in `mode` with `args` (and `extras`, checked), with room
    /// for the longest position it may track. Computed from the arguments, before any
    /// record is made: the record is then built once, where it stays.
    pub(crate) fn pdu_bound(
        key: &str,
        mode: Mode,
        args: &SubscribeArgs<'_>,
        extras: &str,
    ) -> usize {
        // Member by member, as `SubscribeRequest` writes them (`,"name":` included).
        let target = match args.filter {
            Some(filter) => escaped_len(filter).saturating_add(20 + 12), // "subscription_id":"…" ,"filter":"…"
            None => 12,                                                  // "channel":"…"
        };
        // Flags times lengths: no iterator chain.
        let optional = usize::from(mode != Mode::Advanced) * 20 // ,"fast_forward":true
            + usize::from(args.history.is_some()) * 41 // ,"history":{"count":<u64>}
            + usize::from(args.period.is_some()) * 20 // ,"period":<u32>
            + usize::from(args.force) * 13 // ,"force":true
            + usize::from(args.only_value_changes) * 23; // ,"only":"value_changes"
        let extras = if args.extras.is_some() {
            extras.len().saturating_add(1)
        } else {
            0
        };
        ENVELOPE
            .saturating_add(2) // {}
            .saturating_add(target)
            .saturating_add(escaped_len(key))
            .saturating_add(14 + MAX_POSITION_LEN) // ,"position":"…"
            .saturating_add(optional)
            .saturating_add(extras)
    }

    /// The request `kind` as it must be sent now; `args` are the bytes of its arguments
    /// slot.
    pub(crate) fn request<'a>(&'a self, kind: SubRequest, args: &'a [u8]) -> Request<'a> {
        match kind {
            SubRequest::Unsubscribe => Request::Unsubscribe {
                subscription_id: self.key(),
            },
            SubRequest::Subscribe => {
                let target = match self.filter(args) {
                    Some(filter) => Target::View {
                        subscription_id: self.key(),
                        filter,
                    },
                    None => Target::Channel(self.key()),
                };
                let position = match self.mode {
                    Mode::Simple if self.established => None,
                    _ => self.position.as_deref(),
                };
                Request::Subscribe(SubscribeRequest {
                    position,
                    history: if self.established { None } else { self.history },
                    fast_forward: self.mode != Mode::Advanced,
                    period: self.period,
                    force: self.force,
                    only_value_changes: self.only_value_changes,
                    extras: self.extras(args),
                    target,
                })
            }
        }
    }

    /// Stores a tracked position; false when it cannot be tracked.
    fn track(&mut self, position: Text<'_>) -> bool {
        match position.as_plain().map(String::try_from) {
            Some(Ok(p)) => {
                self.position = Some(p);
                true
            }
            _ => false,
        }
    }

    /// The state machine: one event, with `connected` telling whether subscribe requests
    /// may be sent on the current connection.
    pub(crate) fn handle<H: Handler>(
        &mut self,
        event: SubEvent<'_>,
        connected: bool,
        h: &mut H,
    ) -> Fate {
        use SubEvent as E;
        use SubState as S;
        match (self.state, event) {
            (S::Unsubscribed, E::Connect) if self.link_mode != LinkMode::Unlinked => {
                self.go(S::Subscribing, connected, h)
            }
            (S::Unsubscribed, E::ModeChange)
                if self.link_mode != LinkMode::Unlinked && connected =>
            {
                self.go(S::Subscribing, connected, h)
            }
            (S::Subscribing, E::SubscribeOk(pdu)) => {
                if self.link_mode == LinkMode::Linked {
                    self.established_by(&pdu, h);
                    self.go(S::Subscribed, connected, h)
                } else {
                    self.go(S::Unsubscribing, connected, h)
                }
            }
            (S::Subscribing, E::SubscribeError(pdu)) => match self.link_mode {
                LinkMode::Linked => self.fail(FailReason::SubscribeError(pdu), connected, h),
                LinkMode::Unlinked => self.go(S::Unsubscribed, connected, h),
                LinkMode::Cycle => {
                    self.resolve_cycle(h);
                    self.go(S::Subscribing, connected, h)
                }
            },
            (S::Subscribing | S::Subscribed | S::Unsubscribing, E::Disconnect) => {
                self.go(S::Unsubscribed, connected, h)
            }
            (S::Subscribed, E::ModeChange) if self.link_mode != LinkMode::Linked => {
                self.go(S::Unsubscribing, connected, h)
            }
            (S::Subscribed, E::ChannelError(e)) => {
                let lost_position = e
                    .error
                    .is_some_and(|code| code == "out_of_sync" || code == "expired_position");
                if self.link_mode != LinkMode::Linked {
                    self.go(S::Unsubscribed, connected, h)
                } else if lost_position && self.mode == Mode::Advanced {
                    self.fail(FailReason::ChannelError(e), connected, h)
                } else {
                    if lost_position {
                        self.position = None;
                    }
                    self.go(S::Subscribing, connected, h)
                }
            }
            (S::Unsubscribing, E::UnsubscribeOk | E::ChannelError(_)) => {
                self.go(S::Unsubscribed, connected, h)
            }
            (S::Unsubscribing, E::UnsubscribeError) => self.go(S::Subscribed, connected, h),
            (S::Failed, E::UnsubscribeOk) => self.go(S::Unsubscribed, connected, h),
            _ => Fate::Keep,
        }
    }

    /// `subscribe/ok` for the current arguments.
    fn established_by<H: Handler>(&mut self, pdu: &Pdu<'_>, h: &mut H) {
        self.established = true;
        self.history = None;
        if !self.tracks_position() {
            self.position = None;
        } else if !self.data_since_subscribe {
            if let Some(p) = pdu.position() {
                if !self.track(p) {
                    h.internal_error(InternalError::PositionNotTracked { key: self.key() });
                }
            }
        }
    }

    /// Leave for `to`, report it, run `to`'s entry actions.
    fn go<H: Handler>(&mut self, to: SubState, connected: bool, h: &mut H) -> Fate {
        let from = self.state;
        self.state = to;
        self.to_send = None;
        self.in_flight = None;
        h.subscription_state(self.key(), from, to);
        match to {
            SubState::Subscribing => {
                self.to_send = Some(SubRequest::Subscribe);
                self.data_since_subscribe = false;
                Fate::Keep
            }
            SubState::Unsubscribing => {
                self.to_send = Some(SubRequest::Unsubscribe);
                Fate::Keep
            }
            SubState::Unsubscribed => match self.link_mode {
                LinkMode::Linked => Fate::Keep,
                LinkMode::Unlinked => {
                    h.subscription_deleted(self.key());
                    Fate::Remove
                }
                LinkMode::Cycle => {
                    self.resolve_cycle(h);
                    self.handle(SubEvent::ModeChange, connected, h)
                }
            },
            SubState::Subscribed | SubState::Failed => Fate::Keep,
        }
    }

    fn fail<H: Handler>(&mut self, reason: FailReason<'_>, connected: bool, h: &mut H) -> Fate {
        let fate = self.go(SubState::Failed, connected, h);
        h.subscription_failed(self.key(), reason);
        fate
    }

    /// The old subscription is gone; the new arguments take over (the application
    /// unsubscribed, then subscribed again before the old one was gone).
    fn resolve_cycle<H: Handler>(&mut self, h: &mut H) {
        self.link_mode = LinkMode::Linked;
        h.subscription_deleted(self.key());
        h.subscription_created(self.key());
    }

    /// `rtm/subscription/data` for this key.
    pub(crate) fn on_data<H: Handler>(&mut self, data: pdu::SubscriptionData<'_>, h: &mut H) {
        if !matches!(
            self.state,
            SubState::Subscribing | SubState::Subscribed | SubState::Unsubscribing
        ) {
            h.internal_error(InternalError::UnexpectedForSubscription { key: self.key() });
            return;
        }
        self.data_since_subscribe = true;
        h.subscription_data(self.key(), data);
        match data.position {
            None => h.internal_error(InternalError::DataWithoutPosition { key: self.key() }),
            Some(p) if self.tracks_position() && self.link_mode == LinkMode::Linked => {
                if !self.track(p) {
                    h.internal_error(InternalError::PositionNotTracked { key: self.key() });
                }
            }
            Some(_) => {}
        }
    }

    /// `rtm/subscription/info` `fast_forward` for this key.
    pub(crate) fn on_fast_forward<H: Handler>(
        &mut self,
        info: pdu::SubscriptionInfo<'_>,
        h: &mut H,
    ) {
        h.fast_forward(self.key(), info);
        if let Some(p) = info.position {
            if self.tracks_position() && self.link_mode == LinkMode::Linked && !self.track(p) {
                h.internal_error(InternalError::PositionNotTracked { key: self.key() });
            }
        }
    }
}

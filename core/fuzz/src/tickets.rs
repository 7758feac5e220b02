//! The tickets a messaging target's client hands out, checked the same way by
//! `rtm_client` and `rtm_link`: by number (they count up from 0, at most one per step of
//! the program), each of the right kind, each with at most one final outcome, which
//! answers its request.

use benchlink_core::rtm::pdu::Action;
use benchlink_core::rtm::{Ack, Outcome, RequestError, Ticket};
use benchlink_core::time::Instant;

/// What a ticket was issued for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Publish,
    Read,
    Write,
    Delete,
    Search,
    Auth,
}

impl Kind {
    /// The request's action (an authenticate starts with the handshake).
    pub fn action(self) -> Action<'static> {
        match self {
            Kind::Publish => Action::Publish,
            Kind::Read => Action::Read,
            Kind::Write => Action::Write,
            Kind::Delete => Action::Delete,
            Kind::Search => Action::Search,
            Kind::Auth => Action::Handshake,
        }
    }
}

/// One issued ticket.
#[derive(Debug)]
pub struct TicketInfo {
    pub kind: Kind,
    pub deadline: Option<Instant>,
    /// Final outcomes so far (0 or 1).
    pub finals: u32,
}

/// The tickets issued so far, indexed by number, and how many lack a final outcome.
#[derive(Debug)]
pub struct Tickets {
    by_number: Vec<Option<TicketInfo>>,
    open: usize,
    /// Steps in a program: no ticket number reaches it.
    max: usize,
}

impl Tickets {
    /// No tickets yet, for a program of at most `max` steps.
    pub fn new(max: usize) -> Self {
        Tickets {
            by_number: Vec::new(),
            open: 0,
            max,
        }
    }

    /// Tickets without a final outcome.
    pub fn open(&self) -> usize {
        self.open
    }

    /// Records what a request call returned (`r`, made with `ack`): a ticket exactly for
    /// an acknowledged request that was taken, never one issued before.
    pub fn issue(&mut self, r: Result<Option<Ticket>, RequestError>, kind: Kind, ack: Ack) {
        match (r, ack) {
            (Ok(Some(t)), Ack::Reply { deadline }) => {
                let i = t.get() as usize;
                assert!(i < self.max, "ticket {t:?} out of sequence");
                if self.by_number.len() <= i {
                    self.by_number.resize_with(i + 1, || None);
                }
                let slot = &mut self.by_number[i];
                assert!(slot.is_none(), "ticket {t:?} issued twice");
                *slot = Some(TicketInfo {
                    kind,
                    deadline,
                    finals: 0,
                });
                self.open += 1;
            }
            (Ok(None), Ack::None) | (Err(_), _) => {}
            (r, ack) => panic!("{r:?} for {ack:?}"),
        }
    }

    fn get(&mut self, ticket: Ticket) -> &mut TicketInfo {
        self.by_number
            .get_mut(ticket.get() as usize)
            .and_then(Option::as_mut)
            .unwrap_or_else(|| panic!("outcome for unknown ticket {ticket:?}"))
    }

    /// Checks a reply's `outcome` against its ticket (known, not an authenticate, no final
    /// outcome before, answering its request) and counts it; returns the ticket's kind.
    pub fn reply(&mut self, ticket: Ticket, outcome: &Outcome<'_>) -> Kind {
        let t = self.get(ticket);
        assert_ne!(t.kind, Kind::Auth, "reply() for an authenticate ticket");
        assert_eq!(
            t.finals, 0,
            "{outcome:?} for ticket {ticket:?} after its final outcome"
        );
        let kind = t.kind;
        if outcome.is_final() {
            t.finals += 1;
            self.open -= 1;
        }
        match outcome {
            Outcome::Ok(p) => {
                assert_eq!(
                    p.action.request(),
                    kind.action(),
                    "Ok answers another request"
                );
            }
            Outcome::Error(p) => {
                assert!(
                    p.action.request() == kind.action() || p.action == Action::GeneralError,
                    "Error {:?} for a {kind:?}",
                    p.action
                );
            }
            Outcome::Data(p) => {
                assert_eq!(kind, Kind::Search, "Data for a {kind:?}");
                assert_eq!(p.action, Action::SearchData);
            }
            Outcome::Timeout | Outcome::Disconnected => {}
        }
        kind
    }

    /// Checks and counts an authenticate's result (its only, final outcome).
    pub fn auth(&mut self, ticket: Ticket, result: &impl core::fmt::Debug) {
        let t = self.get(ticket);
        assert_eq!(t.kind, Kind::Auth, "auth() for a {:?} ticket", t.kind);
        assert_eq!(
            t.finals, 0,
            "{result:?} for ticket {ticket:?} after its final outcome"
        );
        t.finals += 1;
        self.open -= 1;
    }

    /// The issued tickets with their numbers.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &TicketInfo)> {
        self.by_number
            .iter()
            .enumerate()
            .filter_map(|(t, i)| i.as_ref().map(|i| (t, i)))
    }
}

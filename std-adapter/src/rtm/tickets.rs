//! [`Tickets`]: what waits for a request's outcome (its callback), by ticket.
//!
//! Tickets are handed out in increasing order and their outcomes mostly arrive in that
//! order too, so a ring indexed from the oldest ticket still waiting takes an insert and
//! a remove in constant time, with no hashing and the entries side by side: with twenty
//! thousand publishes in flight a hash map's remove was a twentieth of the I/O thread's
//! time.
//!
//! A ring is as long as the oldest waiting ticket is old, so one request the server
//! never answers would make it grow with every request after it: once the ring holds
//! mostly empty slots, its oldest values move to a map on the side, and memory stays
//! proportional to what is stored.

use std::collections::{HashMap, VecDeque};

/// Values by ticket number (`u32`, wrapping), oldest first.
#[derive(Debug)]
pub(crate) struct Tickets<T> {
    /// The ticket of `slots[0]`.
    base: u32,
    slots: VecDeque<Option<T>>,
    /// Values stored in `slots`.
    stored: usize,
    /// Values moved out of the ring, by ticket.
    old: HashMap<u32, T>,
}

/// Empty slots the ring may hold beyond twice its values before its oldest values move
/// to the side map.
const SLACK: usize = 4096;

impl<T> Default for Tickets<T> {
    fn default() -> Self {
        Tickets {
            base: 0,
            slots: VecDeque::new(),
            stored: 0,
            old: HashMap::new(),
        }
    }
}

impl<T> Tickets<T> {
    /// Stores `value` for `ticket` unless one is stored already (then `value` is dropped).
    pub(crate) fn insert(&mut self, ticket: u32, value: T) {
        if self.old.contains_key(&ticket) {
            return;
        }
        if self.slots.is_empty() {
            self.base = ticket;
        }
        let ahead = ticket.wrapping_sub(self.base);
        if ahead > u32::MAX / 2 {
            // Older than the oldest stored (a reply that is not the last one, put back
            // after the slots before it were freed): grow at the front.
            let behind = self.base.wrapping_sub(ticket);
            for _ in 0..behind {
                self.slots.push_front(None);
            }
            self.base = ticket;
        }
        let at = ticket.wrapping_sub(self.base) as usize;
        if self.slots.len() <= at {
            self.slots.resize_with(at + 1, || None);
        }
        if let Some(slot @ None) = self.slots.get_mut(at) {
            *slot = Some(value);
            self.stored += 1;
        }
        while self.slots.len() > self.stored.saturating_mul(2).saturating_add(SLACK) {
            if let Some(Some(oldest)) = self.slots.pop_front() {
                self.stored -= 1;
                self.old.insert(self.base, oldest);
            }
            self.base = self.base.wrapping_add(1);
            self.trim();
        }
    }

    /// Takes the value stored for `ticket`.
    pub(crate) fn remove(&mut self, ticket: u32) -> Option<T> {
        let at = ticket.wrapping_sub(self.base) as usize;
        match self.slots.get_mut(at).and_then(Option::take) {
            Some(value) => {
                self.stored -= 1;
                self.trim();
                Some(value)
            }
            None => self.old.remove(&ticket),
        }
    }

    /// Frees the empty slots at the front.
    fn trim(&mut self) {
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.base = self.base.wrapping_add(1);
        }
    }

    /// Drops every value.
    pub(crate) fn clear(&mut self) {
        self.slots.clear();
        self.stored = 0;
        self.old.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::Tickets;

    #[test]
    fn out_of_order_gaps_put_back_and_wrapping() {
        let mut t = Tickets::default();
        for base in [0u32, u32::MAX - 2] {
            let n = |i: u32| base.wrapping_add(i);
            t.insert(n(0), "a");
            t.insert(n(2), "c"); // n(1) has no callback
            t.insert(n(3), "d");
            assert_eq!(t.remove(n(2)), Some("c"));
            assert_eq!(t.remove(n(1)), None);
            assert_eq!(t.remove(n(0)), Some("a"));
            // A search's callback goes back after a data reply, behind the ring's start.
            t.insert(n(0), "a again");
            t.insert(n(0), "not stored: one is");
            assert_eq!(t.remove(n(3)), Some("d"));
            assert_eq!(t.remove(n(0)), Some("a again"));
            assert_eq!(t.remove(n(0)), None);
            assert!(t.slots.is_empty(), "every freed slot is released");
        }
    }

    #[test]
    fn a_request_never_answered_does_not_grow_the_ring() {
        let mut t = Tickets::default();
        t.insert(0, 0u32); // never answered
        for ticket in 1..100_000 {
            t.insert(ticket, ticket);
            assert_eq!(t.remove(ticket), Some(ticket));
            // Two values at most (the unanswered one and the newest): 2 · 2 + SLACK slots.
            assert!(t.slots.len() <= 4 + super::SLACK, "{}", t.slots.len());
        }
        assert_eq!(t.remove(0), Some(0), "kept on the side");
        assert!(t.old.is_empty() && t.slots.is_empty());
    }
}

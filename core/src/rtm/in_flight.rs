//! The table of acked requests in flight on the current connection, found by their
//! PDU id when the reply comes.
//!
//! Ids are handed out in increasing order (wrapping at 2³²) and entries are appended in
//! that order, so the table is a ring sorted by id: a reply is found by binary search,
//! and a request answered out of order leaves a hole that is skipped, not closed by
//! moving its successors. Replies mostly come in order, so the holes are usually at the
//! front, where they are dropped at once; the ring only gathers its live entries (in
//! order) when it is full of holes. Lookups cost `O(log n)` and removals `O(1)`
//! amortized whatever the capacity, and nothing is ever moved with `memmove` (1.5 KiB of
//! flash on a Cortex-M).

use super::events::Ticket;
use super::requests::ReqKind;
use crate::time::Instant;

/// One acknowledged request in flight (24 bytes), an entry of the table the caller gives
/// the client ([`Client::new`](super::Client::new)): `[Pending::EMPTY; N]` on a device,
/// a heap slice sized by configuration on std. Opaque; its contents on entry do not
/// matter.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    pub(crate) id: u32,
    pub(crate) ticket: Ticket,
    pub(crate) kind: ReqKind,
    /// Answered (or timed out) while requests before it are still in flight: a hole.
    done: bool,
    /// Microseconds; `u64::MAX` = no deadline (an `Option<Instant>` would take 16 bytes).
    deadline: u64,
}

impl Pending {
    /// An unused entry, to fill a table with.
    pub const EMPTY: Pending = Pending {
        id: 0,
        ticket: Ticket::from_raw(0),
        kind: ReqKind::Other,
        done: true,
        deadline: u64::MAX,
    };

    pub(crate) fn new(id: u32, ticket: Ticket, kind: ReqKind, deadline: Option<Instant>) -> Self {
        Pending {
            id,
            ticket,
            kind,
            done: false,
            deadline: deadline.map_or(u64::MAX, Instant::as_micros),
        }
    }

    /// Whether its deadline has come at `now` (the raw microseconds compared: no
    /// `Option` made).
    pub(crate) fn expired(&self, now: Instant) -> bool {
        self.deadline != u64::MAX && self.deadline <= now.as_micros()
    }

    /// The deadline as an instant (the tests' view; the client compares the raw
    /// microseconds with [`expired`](Self::expired)).
    #[cfg(test)]
    pub(crate) fn deadline(&self) -> Option<Instant> {
        (self.deadline != u64::MAX).then_some(Instant::from_micros(self.deadline))
    }
}

/// The storage of the table of requests in flight, and so the limit of the pipeline: at
/// most one acked request in flight per entry, so the table's size, not a count in the
/// [`Config`](super::Config), says how many may wait for their replies at once.
///
/// Anything that is a mutable slice of [`Pending`] (`[Pending; N]`, `&mut [Pending]`,
/// `Vec<Pending>`, `Box<[Pending]>`) is a table of fixed size: on a device the caller's
/// array is the limit. Where there is a heap, a storage may start small and grow when
/// every entry is taken and another request is to be sent ([`grow`](Slots::grow)): the
/// std client's grows up to a byte limit, so that a long pipe (hundreds of thousands of
/// publishes across a 300 ms round trip) costs memory only when it is that long. When
/// the table is full and cannot grow, requests wait in the offline queue until replies
/// free entries.
///
/// ```
/// use benchlink_core::rtm::{Pending, Slots};
///
/// /// Entries on the heap, doubled when full, up to `max`.
/// struct Growing { entries: Vec<Pending>, max: usize }
///
/// impl Slots for Growing {
///     fn entries(&self) -> &[Pending] { &self.entries }
///     fn entries_mut(&mut self) -> &mut [Pending] { &mut self.entries }
///     fn grow(&mut self) -> bool {
///         let len = (self.entries.len() * 2).max(1).min(self.max);
///         let grew = len > self.entries.len();
///         self.entries.resize(len, Pending::EMPTY);
///         grew
///     }
/// }
///
/// let mut table = Growing { entries: Vec::new(), max: 4 };
/// assert!(table.grow() && table.entries().len() == 1);
/// assert!(table.grow() && table.grow() && table.entries().len() == 4);
/// // A fixed table never grows.
/// assert!(![Pending::EMPTY; 4].grow());
/// ```
pub trait Slots {
    /// The entries (their contents on entry do not matter).
    fn entries(&self) -> &[Pending];
    /// The entries, to write.
    fn entries_mut(&mut self) -> &mut [Pending];
    /// Adds entries at the end, when every entry holds a request in flight and another
    /// is to be sent; returns whether any were added. The entries already there must
    /// keep their places and contents (the client reorders them itself). The default
    /// never grows: a fixed table.
    fn grow(&mut self) -> bool {
        false
    }
}

impl<T: AsRef<[Pending]> + AsMut<[Pending]> + ?Sized> Slots for T {
    fn entries(&self) -> &[Pending] {
        self.as_ref()
    }
    fn entries_mut(&mut self) -> &mut [Pending] {
        self.as_mut()
    }
}

/// At most as many requests in flight as `P` has entries, in id order.
pub(crate) struct InFlight<P> {
    slots: P,
    /// Index of the oldest slot.
    head: usize,
    /// Slots in use, holes included.
    used: usize,
    /// Live entries (`used` minus the holes).
    live: usize,
    /// Live entries with a deadline: with none, the deadline walks are skipped, so a long
    /// pipe of requests without deadlines (the std client's callbacks) costs no walk of
    /// its table per turn.
    timed: usize,
}

impl<P> InFlight<P> {
    /// An empty table in `slots` (only the entries it writes are ever read).
    pub(crate) const fn new(slots: P) -> Self {
        InFlight {
            slots,
            head: 0,
            used: 0,
            live: 0,
            timed: 0,
        }
    }
}

impl<P: Slots> InFlight<P> {
    /// The table's size.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.entries().len()
    }

    /// Requests in flight.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// Whether one more request may be pushed, growing the table when it is full and
    /// its storage can grow.
    pub(crate) fn make_room(&mut self) -> bool {
        self.live < self.capacity() || self.grow()
    }

    /// Grows the storage; its ring wrapped at the old size, so the oldest entry is
    /// moved first and positions map to entries again.
    fn grow(&mut self) -> bool {
        let before = self.capacity();
        if !self.slots.grow() || self.capacity() <= before {
            return false;
        }
        let head = self.head;
        if let Some(old) = self.slots.entries_mut().get_mut(..before) {
            old.rotate_left(head);
        }
        self.head = 0;
        true
    }

    /// Appends `p`, whose id is above every id in the table; `false` when it is full
    /// (and cannot grow).
    pub(crate) fn push(&mut self, p: Pending) -> bool {
        if !self.make_room() {
            return false;
        }
        if self.used >= self.capacity() {
            self.gather();
        }
        let i = self.index(self.used);
        if let Some(slot) = self.slots.entries_mut().get_mut(i) {
            *slot = p;
            self.used += 1;
            self.live += 1;
            self.timed += usize::from(p.deadline != u64::MAX);
        }
        true
    }

    /// The live request with `id`.
    pub(crate) fn get(&self, id: u32) -> Option<Pending> {
        let at = self.find(id)?;
        self.slots.entries().get(self.index(at)).copied()
    }

    /// Removes and returns the live request with `id`.
    pub(crate) fn take(&mut self, id: u32) -> Option<Pending> {
        let at = self.find(id)?;
        let p = self.slots.entries().get(self.index(at)).copied()?;
        self.end(at);
        Some(p)
    }

    /// Every live request, oldest first (the tests' view of the table; the client only
    /// needs [`earliest_deadline`](Self::earliest_deadline)).
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Pending> {
        (0..self.used)
            .filter_map(|at| self.slots.entries().get(self.index(at)))
            .filter(|p| !p.done)
    }

    /// The earliest deadline of a live request: the raw microseconds' minimum (no
    /// deadline is `u64::MAX`, above every other) over the requests in the window only,
    /// so a large table (the std client's 20,000) costs what it holds, not its size.
    pub(crate) fn earliest_deadline(&self) -> Option<Instant> {
        if self.timed == 0 {
            return None;
        }
        let mut at = u64::MAX;
        for p in (0..self.used)
            .filter_map(|i| self.slots.entries().get(self.index(i)))
            .filter(|p| !p.done)
        {
            at = at.min(p.deadline);
        }
        (at != u64::MAX).then_some(Instant::from_micros(at))
    }

    /// Removes the live requests whose deadline has come at `now`, oldest first, handing
    /// each to `over` as it goes.
    pub(crate) fn expire(&mut self, now: Instant, mut over: impl FnMut(Pending)) {
        let mut at = 0;
        while at < self.used && self.timed > 0 {
            let p = self.slots.entries().get(self.index(at)).copied();
            match p {
                Some(p) if !p.done && p.expired(now) => {
                    let before = self.used;
                    self.end(at);
                    // Ending the front drops it and the holes after it: what follows
                    // moved down by as many positions.
                    at = (at + 1).saturating_sub(before - self.used);
                    over(p);
                }
                _ => at += 1,
            }
        }
    }

    /// Empties the table, handing each live request to `over`, oldest first.
    pub(crate) fn drain(&mut self, mut over: impl FnMut(Pending)) {
        for at in 0..self.used {
            let i = self.index(at);
            if let Some(p) = self.slots.entries_mut().get_mut(i).filter(|p| !p.done) {
                let live = *p;
                p.done = true; // every slot out of the window stays a hole
                over(live);
            }
        }
        (self.head, self.used, self.live, self.timed) = (0, 0, 0, 0);
    }

    /// The slot of position `at` (0 = oldest).
    fn index(&self, at: usize) -> usize {
        // One hardware division on a Cortex-M4; no library routine.
        (self.head + at).checked_rem(self.capacity()).unwrap_or(0)
    }

    /// The position of the live request with `id`: binary search on the ids' distance
    /// from the oldest one (ids increase along the ring, wrapping at 2³²).
    fn find(&self, id: u32) -> Option<usize> {
        let first = self
            .slots
            .entries()
            .get(self.index(0))
            .filter(|_| self.used > 0)?
            .id;
        let key = id.wrapping_sub(first);
        let (mut lo, mut hi) = (0, self.used);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let p = self.slots.entries().get(self.index(mid))?;
            match p.id.wrapping_sub(first).cmp(&key) {
                core::cmp::Ordering::Less => lo = mid + 1,
                core::cmp::Ordering::Greater => hi = mid,
                core::cmp::Ordering::Equal => return (!p.done).then_some(mid),
            }
        }
        None
    }

    /// Marks position `at` answered and drops the holes at the front.
    fn end(&mut self, at: usize) {
        let i = self.index(at);
        if let Some(slot) = self.slots.entries_mut().get_mut(i) {
            slot.done = true;
            self.timed = self
                .timed
                .saturating_sub(usize::from(slot.deadline != u64::MAX));
        }
        self.live = self.live.saturating_sub(1);
        while self.used > 0 && self.slots.entries().get(self.head).is_some_and(|p| p.done) {
            self.head = self.index(1);
            self.used -= 1;
        }
        if self.used == 0 {
            self.head = 0;
        }
    }

    /// Moves the live entries together, in order, from the front: the holes between
    /// them become free slots at the back.
    fn gather(&mut self) {
        let mut kept = 0;
        for at in 0..self.used {
            if self
                .slots
                .entries()
                .get(self.index(at))
                .is_some_and(|p| !p.done)
            {
                // Swapped, not copied: two distinct slots borrowed at once are known
                // apart, so the move is never a `memmove`.
                let (a, b) = (self.index(kept), self.index(at));
                let (low, high) = self.slots.entries_mut().split_at_mut(a.max(b));
                if let (Some(x), Some(y)) = (low.get_mut(a.min(b)), high.first_mut()) {
                    core::mem::swap(x, y);
                }
                kept += 1;
            }
        }
        self.used = kept;
    }
}

#[cfg(test)]
pub(crate) mod tests;

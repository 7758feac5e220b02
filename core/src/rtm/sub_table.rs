//! The table of subscriptions, in storage the caller gives the client: an array on a
//! device, a heap slice sized by configuration on std (so that a desktop client can hold
//! thousands of subscriptions without a table of that size inside the client, built on
//! some thread's stack and moved into place).
//!
//! Live records are the first `len` slots, in the order they were added; a record leaves
//! by swaps with its successors (the order is kept, and nothing is moved with `memmove`,
//! 1.5 KiB of flash on a Cortex-M).

use super::subscription::Subscription;

/// One entry of the subscription table the caller gives the client
/// ([`Client::new`](super::Client::new)): `[SubscriptionSlot::EMPTY; N]` on a device, a
/// heap slice sized by configuration on std; `N` is how many subscriptions the client can
/// hold. Opaque: a subscription's key, position, mode and state while it lives.
#[derive(Debug, Clone)]
pub struct SubscriptionSlot(Option<Subscription>);

impl SubscriptionSlot {
    /// An unused entry, to fill a table with.
    pub const EMPTY: SubscriptionSlot = SubscriptionSlot(None);
}

/// The storage of the subscription table: anything that is a mutable slice of
/// [`SubscriptionSlot`] (`[SubscriptionSlot; N]`, `&mut [SubscriptionSlot]`,
/// `Vec<SubscriptionSlot>`, `Box<[SubscriptionSlot]>`).
pub trait SubscriptionSlots: AsRef<[SubscriptionSlot]> + AsMut<[SubscriptionSlot]> {}

impl<T: AsRef<[SubscriptionSlot]> + AsMut<[SubscriptionSlot]> + ?Sized> SubscriptionSlots for T {}

/// The live subscriptions: the first `len` slots of `slots`, all filled.
pub(crate) struct Table<S> {
    slots: S,
    len: usize,
}

impl<S: SubscriptionSlots> Table<S> {
    /// An empty table over `slots` (their contents on entry do not matter).
    pub(crate) const fn new(slots: S) -> Self {
        Table { slots, len: 0 }
    }

    /// How many subscriptions the table can hold.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.as_ref().len()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_full(&self) -> bool {
        self.len >= self.capacity()
    }

    pub(crate) fn get(&self, i: usize) -> Option<&Subscription> {
        if i >= self.len {
            return None;
        }
        self.slots.as_ref().get(i).and_then(|s| s.0.as_ref())
    }

    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut Subscription> {
        if i >= self.len {
            return None;
        }
        self.slots.as_mut().get_mut(i).and_then(|s| s.0.as_mut())
    }

    /// Appends `sub`; false (and `sub` dropped) when the table is full.
    #[must_use]
    pub(crate) fn push(&mut self, sub: Subscription) -> bool {
        match self.slots.as_mut().get_mut(self.len) {
            Some(slot) => {
                slot.0 = Some(sub);
                self.len += 1;
                true
            }
            None => false,
        }
    }

    /// The live slots.
    fn live(&self) -> &[SubscriptionSlot] {
        self.slots.as_ref().get(..self.len).unwrap_or_default()
    }

    fn live_mut(&mut self) -> &mut [SubscriptionSlot] {
        let len = self.len;
        self.slots.as_mut().get_mut(..len).unwrap_or_default()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Subscription> {
        self.live().iter().filter_map(|s| s.0.as_ref())
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Subscription> {
        self.live_mut().iter_mut().filter_map(|s| s.0.as_mut())
    }

    /// Removes every record.
    pub(crate) fn clear(&mut self) {
        for slot in self.live_mut() {
            slot.0 = None;
        }
        self.len = 0;
    }

    /// Removes record `i`, keeping the order of the rest: it is swapped to the end, one
    /// neighbour at a time, and emptied. Nothing happens when `i` is out of range.
    pub(crate) fn remove(&mut self, i: usize) {
        if i >= self.len {
            return;
        }
        let live = self.live_mut();
        crate::compact::to_end(live, i);
        if let Some(last) = live.last_mut() {
            last.0 = None;
        }
        self.len -= 1;
    }
}

#[cfg(test)]
mod tests;

//! The `filter` and `extras` of the subscriptions that have them, in storage the caller
//! sizes: a view's query can be kilobytes (the local hub takes 4 KiB), while most
//! subscriptions are a channel name and nothing else, and a device may want none.
//!
//! The storage is cut into one equal slot per subscription the client can hold
//! (its subscription table's capacity); a subscription with arguments takes a slot for as long as it lives. Slots
//! are handed out lowest first, and a freed one is reused first, linked into a free list
//! through its own first two bytes, so taking and giving back are O(1) and nothing is
//! ever moved: on std, where the storage is a zeroed heap allocation, only the slots in
//! use are ever written, and so committed.

use super::queue::Bytes;

/// No slot.
const NONE: u16 = u16::MAX;

/// One slot of arguments per subscription the client can hold, in the bytes of `A`.
pub(crate) struct ArgSlots<A> {
    buf: A,
    /// Slots handed out at least once (`0..fresh`); the rest were never written.
    fresh: u16,
    /// The first freed slot, whose first two bytes link to the next ([`NONE`]: none).
    free: u16,
}

impl<A> ArgSlots<A> {
    /// No slot taken.
    pub(crate) const fn new(buf: A) -> Self {
        ArgSlots {
            buf,
            fresh: 0,
            free: NONE,
        }
    }
}

impl<A: Bytes> ArgSlots<A> {
    /// Bytes of one slot when the storage holds `subs` of them: the most a
    /// subscription's `filter` and `extras` may take together. Slots of less than two
    /// bytes cannot hold a free-list link and give no room at all.
    pub(crate) fn slot_size(&self, subs: usize) -> usize {
        match self.buf.as_ref().len().checked_div(subs) {
            Some(n) if n >= 2 => n,
            _ => 0,
        }
    }

    /// Takes a free slot (of [`slot_size`](Self::slot_size) bytes), or `None` when none
    /// is left, which the subscription table's own bound prevents.
    pub(crate) fn take(&mut self, subs: usize) -> Option<u16> {
        if self.free != NONE {
            let slot = self.free;
            self.free = self
                .get(slot, subs)
                .first_chunk::<2>()
                .map_or(NONE, |link| u16::from_le_bytes(*link));
            return Some(slot);
        }
        let limit = u16::try_from(subs).unwrap_or(NONE);
        (self.fresh < limit).then(|| {
            self.fresh += 1;
            self.fresh - 1
        })
    }

    /// Gives `slot` back.
    pub(crate) fn give_back(&mut self, slot: u16, subs: usize) {
        let next = self.free.to_le_bytes();
        if let Some(link) = self.get_mut(slot, subs).get_mut(..2) {
            link.copy_from_slice(&next);
            self.free = slot;
        }
    }

    /// Every slot free again (the subscription table was emptied).
    pub(crate) fn clear(&mut self) {
        self.fresh = 0;
        self.free = NONE;
    }

    /// The bytes of `slot`.
    pub(crate) fn get(&self, slot: u16, subs: usize) -> &[u8] {
        let size = self.slot_size(subs);
        let at = usize::from(slot).saturating_mul(size);
        self.buf
            .as_ref()
            .get(at..at.saturating_add(size))
            .unwrap_or_default()
    }

    /// The bytes of `slot`, to write.
    pub(crate) fn get_mut(&mut self, slot: u16, subs: usize) -> &mut [u8] {
        let size = self.slot_size(subs);
        let at = usize::from(slot).saturating_mul(size);
        self.buf
            .as_mut()
            .get_mut(at..at.saturating_add(size))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;

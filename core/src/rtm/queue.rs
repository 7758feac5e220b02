//! A FIFO of variable-length byte records in one fixed array: the outbox of encoded PDUs
//! and the offline queue of requests waiting for a connection both live in one of these.
//!
//! Why one contiguous array and not a ring: every record must be readable as one `&[u8]`
//! (a PDU handed to the adapter is one `&str`), so records never wrap. When the free space
//! at the tail is too small, the live records are moved to the front once (`copy_within`)
//! and the write is retried. Each record costs a 4-byte length header.

/// Bytes of bookkeeping per record.
pub(crate) const RECORD_HEADER: usize = 4;

/// Records of bytes, first in first out, in `N` bytes.
pub(crate) struct RecordFifo<const N: usize> {
    buf: [u8; N],
    /// Offset of the first live record.
    start: usize,
    /// Offset just past the last live record.
    end: usize,
    /// Number of live records.
    count: usize,
}

impl<const N: usize> core::fmt::Debug for RecordFifo<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // The contents may be credentials-free PDUs, but they can be large: show the shape.
        f.debug_struct("RecordFifo")
            .field("records", &self.count)
            .field("bytes", &self.end.saturating_sub(self.start))
            .field("capacity", &N)
            .finish()
    }
}

impl<const N: usize> RecordFifo<N> {
    pub(crate) const fn new() -> Self {
        RecordFifo {
            buf: [0; N],
            start: 0,
            end: 0,
            count: 0,
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub(crate) fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
        self.count = 0;
    }

    /// The largest record that could ever be stored (when the FIFO is empty).
    pub(crate) const fn max_record() -> usize {
        N.saturating_sub(RECORD_HEADER)
    }

    /// Appends one record written in place by `write`, which gets the free space and
    /// returns how many bytes it used, or `None` when they did not fit. Returns whether
    /// the record was stored; on `false` nothing changed.
    pub(crate) fn push_with<F>(&mut self, mut write: F) -> bool
    where
        F: FnMut(&mut [u8]) -> Option<usize>,
    {
        if self.try_push(&mut write) {
            return true;
        }
        if self.start == 0 {
            return false;
        }
        self.compact();
        self.try_push(&mut write)
    }

    fn try_push<F>(&mut self, write: &mut F) -> bool
    where
        F: FnMut(&mut [u8]) -> Option<usize>,
    {
        let Some(payload_at) = self.end.checked_add(RECORD_HEADER) else {
            return false;
        };
        let Some(room) = self.buf.get_mut(payload_at..) else {
            return false;
        };
        let Some(used) = write(room) else {
            return false;
        };
        let Ok(len) = u32::try_from(used) else {
            return false;
        };
        let Some(new_end) = payload_at.checked_add(used).filter(|&e| e <= N) else {
            return false;
        };
        match self.buf.get_mut(self.end..payload_at) {
            Some(header) => header.copy_from_slice(&len.to_le_bytes()),
            None => return false,
        }
        self.end = new_end;
        self.count = self.count.saturating_add(1);
        true
    }

    /// Appends a copy of `bytes`.
    #[cfg(test)]
    pub(crate) fn push(&mut self, bytes: &[u8]) -> bool {
        self.push_with(|dst| {
            let dst = dst.get_mut(..bytes.len())?;
            dst.copy_from_slice(bytes);
            Some(bytes.len())
        })
    }

    fn compact(&mut self) {
        self.buf.copy_within(self.start..self.end, 0);
        self.end = self.end.saturating_sub(self.start);
        self.start = 0;
    }

    /// `(payload range, next record offset)` of the record at `at`.
    fn record_at(&self, at: usize) -> Option<(core::ops::Range<usize>, usize)> {
        if at >= self.end {
            return None;
        }
        let payload_at = at.checked_add(RECORD_HEADER)?;
        let header: [u8; RECORD_HEADER] = self.buf.get(at..payload_at)?.try_into().ok()?;
        let len = usize::try_from(u32::from_le_bytes(header)).ok()?;
        let next = payload_at.checked_add(len).filter(|&n| n <= self.end)?;
        Some((payload_at..next, next))
    }

    pub(crate) fn front(&self) -> Option<&[u8]> {
        let (range, _) = self.record_at(self.start)?;
        self.buf.get(range)
    }

    #[cfg(test)]
    pub(crate) fn front_mut(&mut self) -> Option<&mut [u8]> {
        let (range, _) = self.record_at(self.start)?;
        self.buf.get_mut(range)
    }

    pub(crate) fn pop_front(&mut self) {
        match self.record_at(self.start) {
            Some((_, next)) if self.count > 1 => {
                self.start = next;
                self.count -= 1;
            }
            _ => self.clear(),
        }
    }

    /// Calls `f` on every record, oldest first.
    pub(crate) fn for_each_mut<F>(&mut self, mut f: F)
    where
        F: FnMut(&mut [u8]),
    {
        let mut at = self.start;
        while let Some((range, next)) = self.record_at(at) {
            if let Some(record) = self.buf.get_mut(range) {
                f(record);
            }
            at = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_order_and_compaction() {
        let mut q = RecordFifo::<32>::new();
        assert_eq!(RecordFifo::<32>::max_record(), 28);
        assert!(q.push(b"0123456789"));
        assert!(q.push(b"abcdefghij"));
        assert!(
            !q.push(b"ABCDEFGHIJ"),
            "4+10+4+10 = 28, no room for 14 more"
        );
        assert_eq!(q.front(), Some(&b"0123456789"[..]));
        q.pop_front();
        // Tail room is 4 bytes; compaction makes 18.
        assert!(q.push(b"ABCDEFGHIJ"));
        assert_eq!(q.len(), 2);
        assert_eq!(q.front(), Some(&b"abcdefghij"[..]));
        q.pop_front();
        assert_eq!(q.front(), Some(&b"ABCDEFGHIJ"[..]));
        q.pop_front();
        assert!(q.is_empty());
        assert_eq!(q.front(), None);
        q.pop_front();
        assert!(q.is_empty());
        assert!(q.push(&[7; 28]));
        assert!(!q.push(b""));
    }

    #[test]
    fn in_place_writes_and_scan() {
        let mut q = RecordFifo::<64>::new();
        assert!(q.push_with(|dst| {
            dst.get_mut(..3)?.copy_from_slice(b"xyz");
            Some(3)
        }));
        assert!(!q.push_with(|_| None));
        assert!(q.push(b"12"));
        let mut seen = 0;
        q.for_each_mut(|r| {
            seen += r.len();
            if let Some(b) = r.first_mut() {
                *b = b'!';
            }
        });
        assert_eq!(seen, 5);
        assert_eq!(q.front(), Some(&b"!yz"[..]));
        if let Some(r) = q.front_mut() {
            r[1] = b'?';
        }
        assert_eq!(q.front(), Some(&b"!?z"[..]));
        q.clear();
        assert!(q.is_empty());
        let tiny = RecordFifo::<2>::new();
        assert_eq!(RecordFifo::<2>::max_record(), 0);
        assert!(tiny.front().is_none());
    }
}

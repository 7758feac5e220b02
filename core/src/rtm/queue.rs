//! A FIFO of variable-length byte records in one caller-sized buffer: the outbox of
//! encoded PDUs and the offline queue of requests waiting for a connection both live in
//! one of these (an array on a device, a heap buffer sized by configuration on std).
//!
//! Why not a plain ring: every record must be readable as one `&[u8]` (a PDU handed to the
//! adapter is one `&str`), so records never wrap. The array holds up to two regions, as in
//! a bip buffer: the older records at `start..end`, and, once the tail has no room for the
//! next record, newer ones from the front of the array (`0..wrap`), in the space the
//! consumer freed. When the first region is used up the second becomes it. Every push and
//! pop is O(1) in the steady state of a full queue drained as fast as it fills; only when
//! neither the tail nor the front gap fits a record but their sum does are the live
//! records moved to the front once. Each record costs a 4-byte length header.

/// Byte storage the caller gives the messaging client for its queue, its outbox and the
/// link's socket buffers: anything that is a mutable byte slice (`[u8; N]`,
/// `&mut [u8]`, `Vec<u8>`, `Box<[u8]>`). Its contents on entry do not matter.
///
/// A device passes arrays or `&'static mut` slices, sized at compile time; a std program
/// passes heap buffers sized by its configuration (zeroed allocations, whose pages the
/// operating system commits only as they are first written).
pub trait Bytes: AsRef<[u8]> + AsMut<[u8]> {}

impl<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized> Bytes for T {}

/// Bytes of bookkeeping per record.
pub(crate) const RECORD_HEADER: usize = 4;

/// Records of bytes, first in first out, in the bytes of `B`.
pub(crate) struct RecordFifo<B> {
    buf: B,
    /// Offset of the first live record of the older region.
    start: usize,
    /// Offset just past the last record of the older region.
    end: usize,
    /// Offset just past the last record of the newer region at the front (`0`: none).
    wrap: usize,
    /// Number of live records.
    count: usize,
}

impl<B: AsRef<[u8]>> core::fmt::Debug for RecordFifo<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // The contents may be credentials-free PDUs, but they can be large: show the shape.
        f.debug_struct("RecordFifo")
            .field("records", &self.count)
            .field(
                "bytes",
                &self
                    .end
                    .saturating_sub(self.start)
                    .saturating_add(self.wrap),
            )
            .field("capacity", &self.buf.as_ref().len())
            .finish()
    }
}

impl<B> RecordFifo<B> {
    /// An empty FIFO in `buf` (whose contents do not matter).
    pub(crate) const fn new(buf: B) -> Self {
        RecordFifo {
            buf,
            start: 0,
            end: 0,
            wrap: 0,
            count: 0,
        }
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> RecordFifo<B> {
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub(crate) fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
        self.wrap = 0;
        self.count = 0;
    }

    /// The buffer's size.
    pub(crate) fn capacity(&self) -> usize {
        self.buf.as_ref().len()
    }

    /// The largest record that could ever be stored (when the FIFO is empty).
    pub(crate) fn max_record(&self) -> usize {
        self.capacity().saturating_sub(RECORD_HEADER)
    }

    /// Appends one record written in place by `write`, which gets the free space and
    /// returns how many bytes it used, or `None` when they did not fit (it may be called
    /// again with another space). Returns whether the record was stored; on `false`
    /// nothing changed.
    pub(crate) fn push_with<F>(&mut self, mut write: F) -> bool
    where
        F: FnMut(&mut [u8]) -> Option<usize>,
    {
        self.push_dyn(&mut write)
    }

    /// `push_with`'s body, once for every writer: the writer is called through a
    /// reference to a trait object, so each caller's closure does not get its own copy of
    /// the wrap-around logic (it matters on firmware, where every copy is flash).
    fn push_dyn(&mut self, write: &mut dyn FnMut(&mut [u8]) -> Option<usize>) -> bool {
        if self.wrap > 0 {
            // Only the front gap, up to the older region, is free for now.
            return self
                .write_at(self.wrap, self.start, write)
                .is_some_and(|e| {
                    self.wrap = e;
                    true
                });
        }
        let capacity = self.capacity();
        if let Some(e) = self.write_at(self.end, capacity, write) {
            self.end = e;
            return true;
        }
        if self.start == 0 {
            return false;
        }
        if let Some(e) = self.write_at(0, self.start, write) {
            self.wrap = e;
            return true;
        }
        // Neither gap fits the record alone: join them.
        self.compact();
        self.write_at(self.end, capacity, write).is_some_and(|e| {
            self.end = e;
            true
        })
    }

    /// Writes a record at `at` within `..limit`; the offset past it, and the count, or
    /// `None` with nothing changed.
    fn write_at(
        &mut self,
        at: usize,
        limit: usize,
        write: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> Option<usize> {
        let payload_at = at.checked_add(RECORD_HEADER)?;
        let room = self.buf.as_mut().get_mut(payload_at..limit)?;
        let used = write(room)?;
        let len = u32::try_from(used).ok()?;
        let new_end = payload_at.checked_add(used).filter(|&e| e <= limit)?;
        self.buf
            .as_mut()
            .get_mut(at..payload_at)?
            .copy_from_slice(&len.to_le_bytes());
        self.count = self.count.saturating_add(1);
        Some(new_end)
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

    /// Moves the older region to the front (only while there is no newer one).
    fn compact(&mut self) {
        self.end = crate::compact::to_front(self.buf.as_mut(), self.start, self.end);
        self.start = 0;
    }

    /// `(payload range, next record offset)` of the record at `at`, in a region ending at
    /// `limit`.
    fn record_at(&self, at: usize, limit: usize) -> Option<(core::ops::Range<usize>, usize)> {
        if at >= limit {
            return None;
        }
        let payload_at = at.checked_add(RECORD_HEADER)?;
        let header: [u8; RECORD_HEADER] = self.buf.as_ref().get(at..payload_at)?.try_into().ok()?;
        let len = usize::try_from(u32::from_le_bytes(header)).ok()?;
        let next = payload_at.checked_add(len).filter(|&n| n <= limit)?;
        Some((payload_at..next, next))
    }

    pub(crate) fn front(&self) -> Option<&[u8]> {
        let (range, _) = self.record_at(self.start, self.end)?;
        self.buf.as_ref().get(range)
    }

    #[cfg(test)]
    pub(crate) fn front_mut(&mut self) -> Option<&mut [u8]> {
        let (range, _) = self.record_at(self.start, self.end)?;
        self.buf.as_mut().get_mut(range)
    }

    pub(crate) fn pop_front(&mut self) {
        match self.record_at(self.start, self.end) {
            Some((_, next)) if self.count > 1 => {
                self.count -= 1;
                self.start = next;
                if self.start == self.end {
                    // The older region is used up: the newer one takes its place.
                    (self.start, self.end, self.wrap) = (0, self.wrap, 0);
                }
            }
            _ => self.clear(),
        }
    }

    /// The payload range of the record after the one `cursor` points at (`None` at the
    /// end), oldest first; a cursor starts as `RecordCursor::default()`. Offsets stay
    /// valid until the FIFO is changed.
    fn step(&self, cursor: &mut RecordCursor) -> Option<core::ops::Range<usize>> {
        loop {
            let (at, limit) = if cursor.newer {
                (cursor.at, self.wrap)
            } else {
                (cursor.at.max(self.start), self.end)
            };
            if let Some((range, next)) = self.record_at(at, limit) {
                cursor.at = next;
                return Some(range);
            }
            if cursor.newer {
                return None;
            }
            *cursor = RecordCursor { at: 0, newer: true };
        }
    }

    /// Calls `f` on every record, oldest first.
    pub(crate) fn for_each_mut<F>(&mut self, mut f: F)
    where
        F: FnMut(&mut [u8]),
    {
        let mut cursor = RecordCursor::default();
        while let Some(range) = self.step(&mut cursor) {
            if let Some(record) = self.buf.as_mut().get_mut(range) {
                f(record);
            }
        }
    }

    /// The records, oldest first.
    pub(crate) fn records(&self) -> impl Iterator<Item = &[u8]> {
        let mut cursor = RecordCursor::default();
        core::iter::from_fn(move || {
            let range = self.step(&mut cursor)?;
            self.buf.as_ref().get(range)
        })
    }

    /// Drops every record after the oldest `keep`.
    pub(crate) fn truncate(&mut self, keep: usize) {
        if keep == 0 {
            self.clear();
            return;
        }
        if keep >= self.count {
            return;
        }
        let mut cursor = RecordCursor::default();
        for _ in 0..keep {
            if self.step(&mut cursor).is_none() {
                return;
            }
        }
        // `cursor.at` is just past the last record kept, in the region it names.
        if cursor.newer {
            self.wrap = cursor.at;
        } else {
            self.end = cursor.at;
            self.wrap = 0;
        }
        self.count = keep;
    }

    /// Where the oldest record for which `pred` holds starts: an offset for
    /// [`record`](Self::record) and [`record_mut`](Self::record_mut), valid until the
    /// FIFO is changed.
    pub(crate) fn position(&self, mut pred: impl FnMut(usize, &[u8]) -> bool) -> Option<usize> {
        let mut cursor = RecordCursor::default();
        while let Some(range) = self.step(&mut cursor) {
            let at = range.start;
            if self.buf.as_ref().get(range).is_some_and(|r| pred(at, r)) {
                return Some(at);
            }
        }
        None
    }

    /// Bytes free for records (one record of this size, less its header, fits after a
    /// compaction at most).
    pub(crate) fn free(&self) -> usize {
        if self.wrap > 0 {
            self.start.saturating_sub(self.wrap)
        } else {
            self.capacity()
                .saturating_sub(self.end)
                .saturating_add(self.start)
        }
    }

    /// The record at `at` (from [`position`](Self::position)).
    pub(crate) fn record(&self, at: usize) -> Option<&[u8]> {
        let (range, _) = self.record_at(at.checked_sub(RECORD_HEADER)?, self.capacity())?;
        self.buf.as_ref().get(range)
    }

    /// The record at `at` (from [`position`](Self::position)), to change in place.
    pub(crate) fn record_mut(&mut self, at: usize) -> Option<&mut [u8]> {
        let (range, _) = self.record_at(at.checked_sub(RECORD_HEADER)?, self.capacity())?;
        self.buf.as_mut().get_mut(range)
    }
}

/// Where a walk over a [`RecordFifo`]'s records is: the offset of the next record, in
/// the older region or (`newer`) the one that wrapped to the front.
#[derive(Default)]
struct RecordCursor {
    at: usize,
    newer: bool,
}

#[cfg(test)]
mod tests;

//! Buffer compaction without `memmove`: the unread bytes of a buffer moved to its front
//! in pieces that never overlap, each a plain copy.
//!
//! Why not `copy_within`: on a Cortex-M the compiler's `memmove` is 1.5 KiB of flash
//! (word-at-a-time loops for both directions and every alignment), and compaction was
//! its only caller in the device images. Moving a region left by `gap` bytes as copies of
//! at most `gap` bytes keeps each copy's source and destination apart, so `memcpy`
//! (linked anyway) does it. Buffers compact when their front has been consumed, so the
//! gap is usually at least the tail and the move is one copy.

/// Moves `buf[start..end]` to the front of `buf` and returns its new end (`end - start`).
/// Out-of-range bounds are clamped to the buffer: the result is always a valid length.
pub(crate) fn to_front(buf: &mut [u8], start: usize, end: usize) -> usize {
    let end = end.min(buf.len());
    let gap = start.min(end);
    let len = end - gap;
    if gap == 0 {
        return len;
    }
    let mut done = 0;
    while done < len {
        let n = gap.min(len - done);
        // `head` ends where the next piece starts: the piece and its destination are
        // `gap` bytes apart and at most `gap` long.
        let (head, tail) = buf.split_at_mut(done + gap);
        if let (Some(dst), Some(src)) = (head.get_mut(done..done + n), tail.get(..n)) {
            dst.copy_from_slice(src);
        }
        done += n;
    }
    len
}

/// Moves element `i` of `v` to the end, keeping the order of the rest (the first half of
/// `Vec::remove`, without its `memmove`): the element is swapped with one neighbour at a
/// time. For the short tables it serves (subscriptions), the swaps cost less flash than
/// the `memmove` would. Nothing happens when `i` is out of range.
pub(crate) fn to_end<T>(v: &mut [T], i: usize) {
    for j in i.saturating_add(1)..v.len() {
        let (before, after) = v.split_at_mut(j);
        if let (Some(a), Some(b)) = (before.last_mut(), after.first_mut()) {
            core::mem::swap(a, b);
        }
    }
}

#[cfg(test)]
mod tests;

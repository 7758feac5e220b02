//! Samples read from `/data` and not yet handed to a publishing loop: numbered message
//! texts, length-prefixed in one byte array.
//!
//! The server reports all of a benchmark's metrics at once (about 30 lines every 10 s
//! for `hello.bdl`), and the stream hands them over in one go, faster than the hub
//! acknowledges them. A burst must fit, or the agent breaks the stream off and requests
//! `/data` again (core's `bench::resume` cursor), which restreams everything from the
//! start. Messages are about 100 bytes against a 192-byte maximum, so packing them by
//! length holds about twice as many as fixed slots in the same memory.

/// Bytes before each message: its sample number (4) and its length (2).
const HEADER: usize = 6;

/// A FIFO of `(sample number, message)` records in `N` bytes.
///
/// ```
/// use benchlink_device_agent::outbox::Outbox;
/// let mut outbox: Outbox<32> = Outbox::new();
/// assert!(outbox.push(7, "{\"n\":7}"));
/// assert!(outbox.push(8, "{\"n\":8}"));
/// assert!(!outbox.push(9, "{\"n\":9,\"too\":\"long for the rest\"}"));
/// let mut text = heapless::String::<16>::new();
/// assert_eq!(outbox.pop(&mut text), Some(7));
/// assert_eq!(text, "{\"n\":7}");
/// ```
pub struct Outbox<const N: usize> {
    buf: [u8; N],
    /// The live records are `buf[start..end]`.
    start: usize,
    end: usize,
}

impl<const N: usize> Default for Outbox<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Outbox<N> {
    /// Empty.
    pub const fn new() -> Self {
        Outbox {
            buf: [0; N],
            start: 0,
            end: 0,
        }
    }

    /// True when no record waits.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Appends sample `n`'s message; false (and nothing stored) when it does not fit.
    pub fn push(&mut self, n: u32, message: &str) -> bool {
        let Ok(len) = u16::try_from(message.len()) else {
            return false;
        };
        let need = HEADER + message.len();
        if N - self.end < need {
            // Room at the front, freed by pops: move the live records there.
            if N - (self.end - self.start) < need {
                return false;
            }
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let Some(record) = self.buf.get_mut(self.end..self.end + need) else {
            return false;
        };
        let (header, text) = record.split_at_mut(HEADER);
        header[..4].copy_from_slice(&n.to_le_bytes());
        header[4..].copy_from_slice(&len.to_le_bytes());
        text.copy_from_slice(message.as_bytes());
        self.end += need;
        true
    }

    /// Takes the oldest record: its message goes into `text` (which holds the largest
    /// message pushed), its sample number is returned.
    pub fn pop<const M: usize>(&mut self, text: &mut heapless::String<M>) -> Option<u32> {
        if self.is_empty() {
            return None;
        }
        let header = self.buf.get(self.start..self.start + HEADER)?;
        let n = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        let len = usize::from(u16::from_le_bytes([header[4], header[5]]));
        let body = self.start + HEADER;
        let message = self.buf.get(body..body + len)?;
        text.clear();
        // Pushed as a `&str`, so UTF-8; a `text` too small leaves it empty.
        let _ = text.push_str(core::str::from_utf8(message).unwrap_or_default());
        self.start = body + len;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_out_in_order_across_compactions() {
        let mut outbox: Outbox<64> = Outbox::new();
        let mut text = heapless::String::<32>::new();
        let mut next_in = 0u32;
        let mut next_out = 0u32;
        for round in 0..200u32 {
            // Push until full, pop a varying number: records straddle every offset.
            while outbox.push(next_in, &std::format!("m{next_in}")) {
                next_in += 1;
            }
            for _ in 0..=(round % 4) {
                match outbox.pop(&mut text) {
                    Some(n) => {
                        assert_eq!(n, next_out);
                        assert_eq!(text, std::format!("m{n}").as_str());
                        next_out += 1;
                    }
                    None => break,
                }
            }
        }
        while let Some(n) = outbox.pop(&mut text) {
            assert_eq!(n, next_out);
            next_out += 1;
        }
        assert_eq!(next_out, next_in);
        assert!(outbox.is_empty());
    }

    #[test]
    fn a_record_larger_than_the_buffer_is_refused() {
        let mut outbox: Outbox<16> = Outbox::new();
        assert!(!outbox.push(1, "0123456789abcdef"));
        assert!(outbox.is_empty());
    }
}

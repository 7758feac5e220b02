//! The queue of frames waiting for one connection's writer thread.
//!
//! Every frame for a client goes through its outbox: replies from its own reader thread,
//! subscription data from publishers' threads, pongs from tungstenite, injected faults.
//! Frames are queued under the server's state lock, so their order is the order of the
//! events that caused them; only the writer thread touches the socket, so a slow client
//! never blocks anyone else.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, PoisonError};

/// An item for the writer.
#[derive(Debug)]
pub(crate) enum Out {
    /// Bytes of one or more complete WebSocket frames.
    Frame(Vec<u8>),
    /// Close the TCP connection after everything queued before.
    Shutdown,
}

#[derive(Debug, Default)]
struct Queue {
    items: VecDeque<Out>,
    closed: bool,
}

/// A bounded queue with one consumer (the writer thread).
#[derive(Debug)]
pub(crate) struct Outbox {
    queue: Mutex<Queue>,
    ready: Condvar,
    /// Frames of subscription data that may wait; replies may use twice as many.
    limit: usize,
}

/// What happened to a pushed frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// Queued (or dropped because the connection is closing, which is the same to the
    /// caller: the client will never see it).
    Ok,
    /// Not queued: the client is too slow.
    Full,
}

impl Outbox {
    pub(crate) fn new(limit: usize) -> Outbox {
        Outbox {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            limit: limit.max(1),
        }
    }

    fn push_within(&self, item: Out, limit: usize) -> Pushed {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if q.closed {
            return Pushed::Ok;
        }
        if q.items.len() >= limit {
            return Pushed::Full;
        }
        q.items.push_back(item);
        self.ready.notify_one();
        Pushed::Ok
    }

    /// Queues subscription data (the bytes of one or more frames, which then count as
    /// one), unless [`limit`](Self::new) items already wait.
    pub(crate) fn push_data(&self, frames: Vec<u8>) -> Pushed {
        self.push_within(Out::Frame(frames), self.limit)
    }

    /// Queues a reply or control frame, unless twice the limit already waits.
    pub(crate) fn push(&self, frame: Vec<u8>) -> Pushed {
        self.push_within(Out::Frame(frame), self.limit.saturating_mul(2))
    }

    /// Queues a close of the TCP connection, after the frames already queued. Always
    /// queued, whatever the limit.
    pub(crate) fn push_shutdown(&self) {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if !q.closed {
            q.items.push_back(Out::Shutdown);
            self.ready.notify_one();
        }
    }

    /// No more frames: the writer sends what is queued and ends.
    pub(crate) fn close(&self) {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        q.closed = true;
        self.ready.notify_all();
    }

    /// Drops everything queued and closes (the socket is gone).
    pub(crate) fn abandon(&self) {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        q.closed = true;
        q.items.clear();
        self.ready.notify_all();
    }

    /// The next item, waiting for one; `None` once closed and drained.
    pub(crate) fn next(&self) -> Option<Out> {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(item) = q.items.pop_front() {
                return Some(item);
            }
            if q.closed {
                return None;
            }
            q = self.ready.wait(q).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// An unmasked, unfragmented server frame with opcode `opcode`.
pub(crate) fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 10);
    out.push(0x80 | opcode);
    match payload.len() {
        n if n < 126 => out.push(n as u8),
        n if n <= 0xFFFF => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
    out
}

/// A text frame.
pub(crate) fn text_frame(payload: &[u8]) -> Vec<u8> {
    frame(0x1, payload)
}

/// A close frame with a status code (and no reason, so it stays within 125 bytes).
pub(crate) fn close_frame(code: u16) -> Vec<u8> {
    frame(0x8, &code.to_be_bytes())
}

/// `bytes` (whole server frames, as tungstenite writes them) without its pong frames.
/// Bytes that do not parse as complete frames are kept as they are.
pub(crate) fn strip_pongs(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(len) = frame_len(rest) {
        let (this, next) = rest.split_at(len);
        if this.first().is_some_and(|b| b & 0x0F != 0xA) {
            out.extend_from_slice(this);
        }
        rest = next;
    }
    out.extend_from_slice(rest);
    out
}

/// Total length of the complete frame at the start of `bytes`, if there is one.
fn frame_len(bytes: &[u8]) -> Option<usize> {
    let b1 = *bytes.get(1)?;
    let masked = b1 & 0x80 != 0;
    let (header, payload) = match b1 & 0x7F {
        126 => (
            4,
            u64::from(u16::from_be_bytes([*bytes.get(2)?, *bytes.get(3)?])),
        ),
        127 => {
            let ext: [u8; 8] = bytes.get(2..10)?.try_into().ok()?;
            (10, u64::from_be_bytes(ext))
        }
        n => (2, u64::from(n)),
    };
    let total = usize::try_from(payload)
        .ok()?
        .checked_add(header + if masked { 4 } else { 0 })?;
    (total <= bytes.len()).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_lengths() {
        assert_eq!(text_frame(b"hi"), b"\x81\x02hi");
        let f = text_frame(&[b'x'; 126]);
        assert_eq!(&f[..4], &[0x81, 126, 0, 126]);
        let f = text_frame(&vec![b'x'; 70_000]);
        assert_eq!(&f[..2], &[0x81, 127]);
        assert_eq!(frame_len(&f), Some(f.len()));
        assert_eq!(frame_len(&f[..f.len() - 1]), None);
        assert_eq!(close_frame(1000), b"\x88\x02\x03\xe8");
    }

    #[test]
    fn pongs_are_stripped() {
        let mut bytes = frame(0xA, b"py");
        bytes.extend(text_frame(b"keep"));
        bytes.extend(frame(0xA, b""));
        bytes.extend(close_frame(1000));
        let mut want = text_frame(b"keep");
        want.extend(close_frame(1000));
        assert_eq!(strip_pongs(&bytes), want);
        assert_eq!(strip_pongs(b"\x8a"), b"\x8a");
    }

    #[test]
    fn queue_limits() {
        let o = Outbox::new(1);
        assert_eq!(o.push_data(vec![0]), Pushed::Ok);
        assert_eq!(o.push_data(vec![0]), Pushed::Full);
        assert_eq!(o.push(vec![1]), Pushed::Ok);
        assert_eq!(o.push(vec![2]), Pushed::Full);
        o.push_shutdown();
        o.close();
        assert!(matches!(o.next(), Some(Out::Frame(_))));
        assert!(matches!(o.next(), Some(Out::Frame(_))));
        assert!(matches!(o.next(), Some(Out::Shutdown)));
        assert!(o.next().is_none());
        assert_eq!(o.push(vec![3]), Pushed::Ok);
        assert!(o.next().is_none());
    }
}

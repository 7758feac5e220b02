//! The outbox: encoded PDUs on their way to the socket, each written with room before it
//! for its WebSocket frame header. The link frames a PDU where the encoder wrote it (the
//! header into that room, the payload masked in place) and the socket writes it from here,
//! so a message is copied once between the caller's bytes and the socket: by the encoder.
//!
//! The front records are *handed out*: framed by the link and waiting to be written (each
//! popped once its last byte went out), or given to a caller of
//! [`Client::poll_transmit`](super::Client::poll_transmit) (popped at its next call). Those
//! belong to whoever took them: the client, giving up a connection, drops only the others;
//! the link drops its frames when the transport goes.

use super::queue::RecordFifo;
use crate::ws::{FrameHeader, Opcode, MAX_HEADER_LEN};

/// Bytes before each PDU for its frame header: the longest masked header. The client
/// writes its records through [`records_mut`](Outbox::records_mut), the PDU after this
/// room.
pub(crate) const FRAME_ROOM: usize = MAX_HEADER_LEN;

/// Records of `[frame room][PDU]` in the bytes of `B`; see the module documentation.
pub(crate) struct Outbox<B> {
    fifo: RecordFifo<B>,
    /// Records at the front handed out.
    handed: usize,
    /// Bytes of the front record's frame already written.
    sent: usize,
}

impl<B: AsRef<[u8]>> core::fmt::Debug for Outbox<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Outbox")
            .field("fifo", &self.fifo)
            .field("handed", &self.handed)
            .finish()
    }
}

/// Where a framed record's frame starts: after the part of the room its header leaves.
fn frame_start(record: &[u8]) -> usize {
    let pdu_len = record.len().saturating_sub(FRAME_ROOM);
    // The header's length depends on the payload's only, not on the opcode.
    let header = FrameHeader::new(Opcode::Text, pdu_len as u64).encoded_len();
    FRAME_ROOM.saturating_sub(header)
}

impl<B> Outbox<B> {
    pub(crate) const fn new(buf: B) -> Self {
        Outbox {
            fifo: RecordFifo::new(buf),
            handed: 0,
            sent: 0,
        }
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> Outbox<B> {
    /// The largest PDU that fits (when the outbox is empty).
    pub(crate) fn max_pdu(&self) -> usize {
        self.fifo.max_record().saturating_sub(FRAME_ROOM)
    }

    /// Whether records wait that were not handed out.
    pub(crate) fn has_unhanded(&self) -> bool {
        self.fifo.len() > self.handed
    }

    /// Whether handed-out records wait (to be written, or popped).
    pub(crate) fn has_handed(&self) -> bool {
        self.handed > 0
    }

    /// The records, to append one: `[FRAME_ROOM bytes][PDU]`.
    pub(crate) fn records_mut(&mut self) -> &mut RecordFifo<B> {
        &mut self.fifo
    }

    /// Drops the records not handed out (a connection given up).
    pub(crate) fn drop_unhanded(&mut self) {
        self.fifo.truncate(self.handed);
    }

    /// Pops the handed-out records: the caller of `poll_transmit` is done with its PDU, or
    /// the transport the link framed them for is gone.
    pub(crate) fn drop_handed(&mut self) {
        for _ in 0..self.handed {
            self.fifo.pop_front();
        }
        self.handed = 0;
        self.sent = 0;
    }

    /// Hands out the next record; its PDU, or `None` when there is none.
    pub(crate) fn hand_one(&mut self) -> Option<&[u8]> {
        let record = self.fifo.records().nth(self.handed)?;
        self.handed = self.handed.saturating_add(1);
        record.get(FRAME_ROOM..)
    }

    /// The PDU of the front record.
    pub(crate) fn front_pdu(&self) -> Option<&[u8]> {
        self.fifo.front()?.get(FRAME_ROOM..)
    }

    /// Hands out every record not yet handed, each framed in place by `frame` (given the
    /// record: its PDU at [`MAX_HEADER_LEN`], the header to be written right before it);
    /// how many.
    pub(crate) fn hand_framed(&mut self, frame: &mut dyn FnMut(&mut [u8])) -> usize {
        let (skip, mut index, mut framed) = (self.handed, 0, 0);
        self.fifo.for_each_mut(|record| {
            if index >= skip {
                frame(record);
                framed += 1;
            }
            index += 1;
        });
        self.handed = self.handed.saturating_add(framed);
        framed
    }

    /// The frames handed out and not yet written, in order (the first from where the last
    /// write ended).
    pub(crate) fn frames(&self) -> impl Iterator<Item = &[u8]> {
        let sent = self.sent;
        self.fifo
            .records()
            .take(self.handed)
            .enumerate()
            .map(move |(i, record)| {
                let skip = if i == 0 { sent } else { 0 };
                record
                    .get(frame_start(record).saturating_add(skip)..)
                    .unwrap_or_default()
            })
    }

    /// Whether a write ended inside the front frame.
    pub(crate) fn torn(&self) -> bool {
        self.sent > 0
    }

    /// `n` bytes of [`frames`](Self::frames) were written: pops the frames that went out
    /// whole. Returns what is left of `n` past the last frame.
    pub(crate) fn advance(&mut self, mut n: usize) -> usize {
        while n > 0 && self.handed > 0 {
            let Some(record) = self.fifo.front() else {
                break;
            };
            let left = record
                .len()
                .saturating_sub(frame_start(record))
                .saturating_sub(self.sent);
            if n < left {
                self.sent = self.sent.saturating_add(n);
                return 0;
            }
            n -= left;
            self.fifo.pop_front();
            self.handed -= 1;
            self.sent = 0;
        }
        n
    }
}

#[cfg(test)]
mod tests;

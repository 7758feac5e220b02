//! The floods of [`SocketFault`]: chunks of frames that a connection's writer thread
//! writes back to back while nothing else is queued.
//!
//! A chunk is built in a buffer that is reused (the ping chunk is built once), so a
//! flood costs the server no memory beyond [`CHUNK`] per flooded connection, and no
//! more CPU than the client's reading lets through.

use std::iter;

use super::faults::SocketFault;
use super::outbox::append_frame;
use super::pdu::{push_quoted, Positions};
use super::state::{data_pdu, Shared, State};

/// Bytes of flood per write (pings, the endless message).
pub(crate) const CHUNK: usize = 16 * 1024;

/// Bytes of data flood per write: many PDUs per syscall, so the server outruns any
/// client (the client's reads, parsing and callbacks cost more per byte than this).
pub(crate) const DATA_CHUNK: usize = 256 * 1024;

/// Messages per data flood PDU (as the issue's peer: 100).
pub(crate) const MESSAGES_PER_PDU: u64 = 100;

/// The payload of every flood ping.
const PING_PAYLOAD: &[u8] = b"flood";

/// Payload bytes of each continuation frame of the endless message (the most a
/// two-byte header holds).
const FRAGMENT: usize = 125;

/// What a connection's writer keeps between flood chunks.
#[derive(Debug)]
pub(crate) struct Flooder {
    positions: Positions,
    chunk: Vec<u8>,
    pings: Vec<u8>,
    /// The endless message has started and not ended.
    in_message: bool,
}

impl Flooder {
    pub(crate) fn new(positions: Positions) -> Flooder {
        Flooder {
            positions,
            chunk: Vec::new(),
            pings: Vec::new(),
            in_message: false,
        }
    }

    /// Whether the writer is inside the endless message (only control frames may go
    /// out until [`end_message`](Self::end_message)).
    pub(crate) fn in_message(&self) -> bool {
        self.in_message
    }

    /// The next chunk of `fault` for connection `id`; `None` when it has nothing to send
    /// for now (a data flood without its subscription); empty when the connection's
    /// queue must be written first.
    pub(crate) fn chunk(&mut self, fault: &SocketFault, shared: &Shared, id: u64) -> Option<&[u8]> {
        match fault {
            SocketFault::PingFlood => {
                if self.pings.is_empty() {
                    while self.pings.len() < CHUNK {
                        append_frame(&mut self.pings, 0x9, true, |o| {
                            o.extend_from_slice(PING_PAYLOAD);
                        });
                    }
                }
                Some(&self.pings)
            }
            SocketFault::DataFlood {
                subscription_id,
                message,
            } => {
                // One PDU of MESSAGES_PER_PDU messages is about this long; a chunk
                // holds as many as fit.
                let per = usize::try_from(MESSAGES_PER_PDU).unwrap_or(1);
                let pdu_len = 100 + subscription_id.len() + (message.len() + 1) * per;
                let pdus = (DATA_CHUNK / pdu_len).max(1) as u64;
                let n = pdus * MESSAGES_PER_PDU;
                let mut st = shared.lock();
                self.chunk.clear();
                // A message published between the writer's look at its queue and this
                // lock is queued with a number below the ones a reservation would take
                // now: the queue goes first (the writer comes back for the flood), or
                // positions would go backwards on the wire.
                if st.conns.get(&id).is_some_and(|c| c.outbox.has_queued()) {
                    return Some(&self.chunk);
                }
                let first = reserve(&mut st, id, subscription_id, n)?;
                drop(st);
                for pdu in 0..pdus {
                    // The PDU's messages take sequence numbers first..=last.
                    let last = first + pdu * MESSAGES_PER_PDU + MESSAGES_PER_PDU - 1;
                    append_frame(&mut self.chunk, 0x1, true, |o| {
                        data_pdu(
                            o,
                            self.positions,
                            subscription_id,
                            last,
                            iter::repeat_n(message.as_str(), per),
                        );
                    });
                }
                Some(&self.chunk)
            }
            SocketFault::EndlessMessage => {
                self.chunk.clear();
                if !self.in_message {
                    self.in_message = true;
                    let positions = self.positions;
                    append_frame(&mut self.chunk, 0x1, false, |o| {
                        o.extend_from_slice(
                            br#"{"action":"rtm/subscription/data","body":{"subscription_id":"endless","position":"#,
                        );
                        push_quoted(o, &format!("{}:0", positions.epoch));
                        o.extend_from_slice(br#","messages":[""#);
                    });
                }
                while self.chunk.len() < CHUNK {
                    append_frame(&mut self.chunk, 0x0, false, |o| {
                        o.resize(o.len() + FRAGMENT, b'x');
                    });
                }
                Some(&self.chunk)
            }
            SocketFault::Silent => None,
        }
    }

    /// The final fragment of the endless message: it closes the string, the array and
    /// the PDU.
    pub(crate) fn end_message(&mut self) -> &[u8] {
        self.in_message = false;
        self.chunk.clear();
        append_frame(&mut self.chunk, 0x0, true, |o| {
            o.extend_from_slice(b"\"]}}")
        });
        &self.chunk
    }
}

/// Takes `n` sequence numbers for a data flood on subscription `sid` of connection
/// `id`: the next ones of its channel, so that flood positions and real ones never
/// collide or go backwards. Returns the first; `None` without the subscription.
fn reserve(st: &mut State, id: u64, sid: &str, n: u64) -> Option<u64> {
    let State {
        conns, channels, ..
    } = st;
    let sub = conns.get_mut(&id)?.subs.get_mut(sid)?;
    let channel = match channels.get_mut(&sub.channel) {
        Some(ch) => ch,
        None => channels.entry(sub.channel.clone()).or_default(),
    };
    let first = channel.next.max(sub.next);
    channel.next = first + n;
    sub.next = first + n;
    Some(first)
}

//! The bytes waiting to be written to one connection.
//!
//! Every frame for a client goes through its outbox: replies from its own reader thread,
//! subscription data from publishers' threads, pongs from tungstenite, injected faults.
//! Frames are queued under the server's state lock, so their order is the order of the
//! events that caused them. Only the connection's own threads write to its socket (its
//! writer, and its reader for its own replies), so a slow client never blocks anyone
//! else.
//!
//! # Why one byte buffer, and why wake-ups wait
//!
//! A client that pipelines publishes gets hundreds of replies per read of its socket.
//! Writing each reply with its own syscall, and waking the writer thread for each, cost
//! far more than handling the request (several microseconds per message, mostly in the
//! kernel). So frames are appended, already encoded, to one growing byte buffer, and
//! whoever writes swaps the whole buffer out and writes it with one syscall: whatever
//! piled up meanwhile leaves together, for replies and fan-out alike. Building a frame
//! in place needs no allocation once the buffers have grown.
//!
//! Who writes: the connection's reader, for the replies of the batch it just handled
//! ([`Outbox::end_batch`]), when the socket is free; otherwise the writer thread. The
//! reader writing its own replies saves a thread hand-off per batch (per request, for a
//! client that waits for each reply). A `writing` token keeps the two apart, so frames
//! never interleave on the wire.
//!
//! Waking the writer is the other half. A thread that holds the state lock (see
//! `Shared::lock`) holds back the wake-ups its pushes cause ([`hold_kicks`]) and sends
//! them when it lets go of the lock ([`release_kicks`]): a reader that handles a batch of
//! requests under one lock wakes every subscriber's writer once per batch instead of
//! once per frame, and each writer then finds the whole batch waiting. Its own outbox
//! needs no wake-up at all while the reader will write it ([`Outbox::begin_batch`]).
//!
//! # Bounds
//!
//! The queue counts frames (a push of several frames at once counts as one) and bytes,
//! and refuses subscription data beyond either [limit](Outbox::new) and anything else
//! beyond twice that. The reader of the connection waits for room
//! ([`Outbox::wait_for_room`]) instead of handling more requests while its own client
//! lets replies pile up, so TCP slows a client that does not read instead of the
//! server's memory growing. Bytes are bounded as well as frames because a frame may be
//! large: a slow subscriber to a channel of 1 MB messages would otherwise hold
//! gigabytes.

use std::cell::RefCell;
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use super::cbor::Encoding;
use super::faults::SocketFault;

/// What the writer thread is to do next (see [`Outbox::next`]).
#[derive(Debug)]
pub(crate) enum Next {
    /// Write the bytes just put in the caller's buffer.
    Bytes,
    /// Nothing is queued and the connection is under this flood: write a chunk of it.
    /// The number is the queue's [`looks`](Queue::looks) at this moment, for
    /// [`Outbox::flood_stalled`].
    Flood(SocketFault, u64),
    /// Finish the endless fragmented message (its final fragment) before anything else.
    EndMessage,
    /// Close the TCP connection: everything there was to write is written.
    End,
}

#[derive(Debug, Default)]
struct Queue {
    /// Complete, encoded frames, oldest first.
    bytes: Vec<u8>,
    /// Pushes in `bytes` (what the limits count).
    frames: usize,
    /// Close the TCP connection once `bytes` is written; later pushes are dropped.
    shutdown: bool,
    /// No more pushes; the writer writes what is queued and ends.
    closed: bool,
    /// The writer waits for a push.
    writer_idle: bool,
    /// The writer has been woken since it last looked (later pushes need not wake it).
    kicked: bool,
    /// The reader waits for room or for the end of a silence.
    reader_waiting: bool,
    /// Someone writes to the socket (the writer thread, or the reader at the end of a
    /// batch): the other must not. The writer thread holds it from its start (through
    /// the pause after the upgrade) until it first looks for work.
    writing: bool,
    /// The reader is handling a batch and will write (or hand over) what is queued at
    /// its end: pushes need not wake the writer thread.
    owner_flushes: bool,
    /// The socket fault of this connection, if any.
    fault: Option<SocketFault>,
    /// Pushes and fault changes so far: each may give a stalled flood something to send.
    looks: u64,
    /// The flood found nothing to send (a data flood whose subscription does not exist)
    /// when [`looks`](Self::looks) was this: it waits until a push or fault change
    /// moves `looks` on. A stamp rather than a flag, so that a push made while the
    /// writer was finding nothing is not lost (with a flag, the writer's "stalled"
    /// overwrote the push's "look again", and the flood never started).
    flood_stalled_at: Option<u64>,
}

/// A bounded queue of frames with one consumer (the writer thread).
#[derive(Debug)]
pub(crate) struct Outbox {
    queue: Mutex<Queue>,
    /// The writer waits here.
    to_writer: Condvar,
    /// The reader waits here (backpressure, silence).
    to_reader: Condvar,
    /// Frames of subscription data that may wait; replies may use twice as many.
    limit: usize,
    /// Bytes of frames that may wait before subscription data is refused; replies may
    /// use twice as many.
    max_bytes: usize,
    /// `Queue::frames`, readable without the lock (the reader checks it per request).
    queued: AtomicUsize,
    /// The length of `Queue::bytes`, likewise.
    queued_bytes: AtomicUsize,
    /// The fault is [`SocketFault::Silent`] (readable without the lock, per request).
    silent: AtomicBool,
    /// How PDUs are framed and encoded for this client.
    encoding: Encoding,
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

thread_local! {
    /// Outboxes whose writer this thread is to wake once it lets go of the state lock,
    /// and how many holds are open (see [`hold_kicks`]).
    static HELD_KICKS: RefCell<(usize, Vec<Arc<Outbox>>)> = const { RefCell::new((0, Vec::new())) };
}

/// From now until the matching [`release_kicks`], wake-ups of writer threads caused by
/// this thread's pushes are held back and sent together at the release.
pub(crate) fn hold_kicks() {
    HELD_KICKS.with(|h| h.borrow_mut().0 += 1);
}

/// Ends a [`hold_kicks`]; the last one wakes every writer that got frames meanwhile.
pub(crate) fn release_kicks() {
    let held = HELD_KICKS.with(|h| {
        let mut h = h.borrow_mut();
        h.0 = h.0.saturating_sub(1);
        (h.0 == 0).then(|| std::mem::take(&mut h.1))
    });
    let Some(mut outboxes) = held else { return };
    for outbox in outboxes.drain(..) {
        outbox.to_writer.notify_one();
    }
    // Keep the allocation for the next batch.
    HELD_KICKS.with(|h| {
        let mut h = h.borrow_mut();
        if h.1.is_empty() {
            h.1 = outboxes;
        }
    });
}

impl Outbox {
    pub(crate) fn new(limit: usize, max_bytes: usize) -> Outbox {
        Outbox {
            queue: Mutex::new(Queue {
                writing: true,
                ..Queue::default()
            }),
            to_writer: Condvar::new(),
            to_reader: Condvar::new(),
            limit: limit.max(1),
            max_bytes: max_bytes.max(1),
            queued: AtomicUsize::new(0),
            queued_bytes: AtomicUsize::new(0),
            silent: AtomicBool::new(false),
            encoding: Encoding::Json,
        }
    }

    /// The same outbox for a client that speaks `encoding` (JSON by default).
    pub(crate) fn with_encoding(self, encoding: Encoding) -> Outbox {
        Outbox { encoding, ..self }
    }

    /// How PDUs are encoded for this client.
    pub(crate) fn encoding(&self) -> Encoding {
        self.encoding
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes the writer if it waits and nobody woke it yet: now, or when this thread
    /// releases its held kicks.
    fn kick(self: &Arc<Self>, q: &mut Queue) {
        q.looks = q.looks.wrapping_add(1);
        if !q.writer_idle || q.kicked || q.owner_flushes {
            return;
        }
        q.kicked = true;
        let held = HELD_KICKS.with(|h| {
            let mut h = h.borrow_mut();
            if h.0 > 0 {
                h.1.push(Arc::clone(self));
                true
            } else {
                false
            }
        });
        if !held {
            self.to_writer.notify_one();
        }
    }

    /// Appends what `write` puts in the buffer (complete frames) as one push, unless
    /// `factor` times the limits (frames or bytes) already wait.
    fn push_within(self: &Arc<Self>, factor: usize, write: impl FnOnce(&mut Vec<u8>)) -> Pushed {
        let mut q = self.lock();
        if q.closed || q.shutdown {
            return Pushed::Ok;
        }
        if q.frames >= self.limit.saturating_mul(factor)
            || q.bytes.len() >= self.max_bytes.saturating_mul(factor)
        {
            return Pushed::Full;
        }
        write(&mut q.bytes);
        q.frames += 1;
        self.count(&q);
        self.kick(&mut q);
        Pushed::Ok
    }

    /// Publishes the queue's size to the lock-free hints.
    fn count(&self, q: &Queue) {
        self.queued.store(q.frames, Ordering::Relaxed);
        self.queued_bytes.store(q.bytes.len(), Ordering::Relaxed);
    }

    /// Queues subscription data: the frames `write` appends count as one push, refused
    /// when the [limits](Self::new) are reached.
    pub(crate) fn push_data_with(self: &Arc<Self>, write: impl FnOnce(&mut Vec<u8>)) -> Pushed {
        self.push_within(1, write)
    }

    /// Queues a reply PDU whose JSON text `write` appends, in the client's encoding (see
    /// [`Encoding::append_pdu`]), unless twice the limit already waits.
    pub(crate) fn push_pdu_with(self: &Arc<Self>, write: impl FnOnce(&mut Vec<u8>)) -> Pushed {
        let encoding = self.encoding;
        self.push_within(2, |out| {
            encoding.append_pdu(out, write);
        })
    }

    /// Queues a binary frame (a reply built in CBOR) whose payload `write` appends,
    /// unless twice the limit already waits.
    pub(crate) fn push_binary_with(self: &Arc<Self>, write: impl FnOnce(&mut Vec<u8>)) -> Pushed {
        self.push_within(2, |out| {
            append_frame(out, 0x2, true, write);
        })
    }

    /// Queues a text frame with payload `text`, as it is whatever the client's encoding
    /// (injected faults), unless twice the limit already waits.
    pub(crate) fn push_text(self: &Arc<Self>, text: &[u8]) -> Pushed {
        self.push_within(2, |out| {
            append_frame(out, 0x1, true, |o| o.extend_from_slice(text));
        })
    }

    /// Queues bytes that already are complete frames (a reply's limit).
    pub(crate) fn push_frames(self: &Arc<Self>, frames: &[u8]) -> Pushed {
        self.push_within(2, |out| {
            out.extend_from_slice(frames);
        })
    }

    /// Queues a close of the TCP connection, after the frames already queued. Always
    /// queued, whatever the limit.
    pub(crate) fn push_shutdown(self: &Arc<Self>) {
        let mut q = self.lock();
        if !q.closed {
            q.shutdown = true;
            self.wake_all(&mut q);
        }
    }

    /// No more frames: the writer sends what is queued and ends.
    pub(crate) fn close(&self) {
        let mut q = self.lock();
        q.closed = true;
        self.wake_all(&mut q);
    }

    /// Drops everything queued and closes (the socket is gone).
    pub(crate) fn abandon(&self) {
        let mut q = self.lock();
        q.closed = true;
        q.bytes = Vec::new();
        q.frames = 0;
        self.count(&q);
        self.wake_all(&mut q);
    }

    fn wake_all(&self, q: &mut Queue) {
        q.looks = q.looks.wrapping_add(1);
        self.to_writer.notify_all();
        self.to_reader.notify_all();
    }

    /// Sets (or clears) the connection's socket fault; it acts at once.
    pub(crate) fn set_fault(&self, fault: Option<SocketFault>) {
        let mut q = self.lock();
        self.silent
            .store(fault == Some(SocketFault::Silent), Ordering::Relaxed);
        q.fault = fault;
        self.wake_all(&mut q);
    }

    /// Pushes waiting (a hint: read without the lock).
    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Whether `limit` pushes or the byte limit wait for the writer (a hint: read
    /// without the lock): the reader is to stop handling requests until
    /// [`wait_for_room`](Self::wait_for_room) returns.
    pub(crate) fn needs_room(&self, limit: usize) -> bool {
        self.queued() >= limit || self.queued_bytes.load(Ordering::Relaxed) >= self.max_bytes
    }

    /// The reader's backpressure: waits while `limit` pushes or more (or the byte limit)
    /// wait for the writer (the client does not read its replies), until the writer has
    /// taken them or the connection ends.
    pub(crate) fn wait_for_room(&self, limit: usize) {
        if !self.needs_room(limit) {
            return;
        }
        let mut q = self.lock();
        while (q.frames >= limit || q.bytes.len() >= self.max_bytes) && !q.closed {
            q.reader_waiting = true;
            q = self
                .to_reader
                .wait(q)
                .unwrap_or_else(PoisonError::into_inner);
        }
        q.reader_waiting = false;
    }

    /// Whether the connection is silenced (a hint: read without the lock).
    pub(crate) fn is_silent(&self) -> bool {
        self.silent.load(Ordering::Relaxed)
    }

    /// The reader's side of [`SocketFault::Silent`]: waits while the connection is
    /// silenced and open.
    pub(crate) fn wait_while_silent(&self) {
        if !self.is_silent() {
            return;
        }
        let mut q = self.lock();
        while q.fault == Some(SocketFault::Silent) && !q.closed && !q.shutdown {
            q.reader_waiting = true;
            q = self
                .to_reader
                .wait(q)
                .unwrap_or_else(PoisonError::into_inner);
        }
        q.reader_waiting = false;
    }

    /// The flood handed out as `Next::Flood(_, looked)` found nothing to send: the
    /// writer waits for the next push or fault change after that hand-out before trying
    /// again (one that came meanwhile lets it try at once).
    pub(crate) fn flood_stalled(&self, looked: u64) {
        self.lock().flood_stalled_at = Some(looked);
    }

    /// Whether frames are queued (checked under the lock).
    pub(crate) fn has_queued(&self) -> bool {
        !self.lock().bytes.is_empty()
    }

    /// What the writer does next, waiting until there is something. `in_message` says
    /// that the writer is inside the endless fragmented message, where only control
    /// frames may be interleaved: data frames then wait for its end. Queued bytes go
    /// before flood chunks, so that replies (and a close) still reach a flooded client.
    pub(crate) fn next(&self, buf: &mut Vec<u8>, in_message: bool) -> Next {
        let mut q = self.lock();
        // The last job is written: the socket is free for the reader too.
        q.writing = false;
        let job = loop {
            if q.writing {
                // The reader writes its batch itself; what is left is ours after that.
                q = self.wait_for_kick(q);
                continue;
            }
            let ending = q.closed || q.shutdown;
            // A silenced connection writes nothing, unless it is being closed on purpose.
            let held = q.fault == Some(SocketFault::Silent) && !q.shutdown;
            if in_message && (ending || q.fault != Some(SocketFault::EndlessMessage)) {
                break Next::EndMessage;
            }
            if held && q.closed {
                return Next::End;
            }
            if !q.bytes.is_empty() && !held {
                if in_message {
                    let moved = take_control_frames(&mut q.bytes, buf);
                    if moved > 0 {
                        q.frames = q.frames.saturating_sub(moved);
                        self.took(&mut q);
                        break Next::Bytes;
                    }
                } else {
                    std::mem::swap(&mut q.bytes, buf);
                    q.frames = 0;
                    self.took(&mut q);
                    break Next::Bytes;
                }
            }
            if ending {
                return Next::End;
            }
            match &q.fault {
                Some(SocketFault::Silent) | None => {}
                Some(_) if q.flood_stalled_at == Some(q.looks) => {}
                Some(fault) => break Next::Flood(fault.clone(), q.looks),
            }
            q = self.wait_for_kick(q);
        };
        q.writing = true;
        job
    }

    fn wait_for_kick<'a>(&self, mut q: MutexGuard<'a, Queue>) -> MutexGuard<'a, Queue> {
        q.writer_idle = true;
        q = self
            .to_writer
            .wait(q)
            .unwrap_or_else(PoisonError::into_inner);
        q.writer_idle = false;
        q.kicked = false;
        q
    }

    /// The reader starts handling requests: pushes to this outbox no longer wake the
    /// writer thread, because the reader will write them itself at
    /// [`end_batch`](Self::end_batch) if it can.
    pub(crate) fn begin_batch(&self) {
        let mut q = self.lock();
        q.owner_flushes = true;
    }

    /// The reader hands what its batch queued so far to the writer thread, and pushes
    /// wake the writer again until the next [`begin_batch`](Self::begin_batch): for a
    /// reader about to wait in the middle of a batch, whose replies so far must not
    /// wait with it.
    pub(crate) fn hand_over(self: &Arc<Self>) {
        let mut q = self.lock();
        q.owner_flushes = false;
        if !q.bytes.is_empty() {
            self.kick(&mut q);
        }
    }

    /// The reader's batch is over: it writes what is queued to `tcp` itself, with one
    /// syscall, when the writer thread is not writing and no socket fault needs the
    /// writer's care; otherwise it wakes the writer. For a client that waits for each
    /// reply, this saves waking another thread for every request.
    ///
    /// `buf` is the reader's spare buffer (it is swapped with the queue's). A failed
    /// write abandons the outbox and shuts the socket down.
    pub(crate) fn end_batch(self: &Arc<Self>, tcp: &TcpStream, buf: &mut Vec<u8>) {
        let mut q = self.lock();
        q.owner_flushes = false;
        if q.bytes.is_empty() {
            return;
        }
        if q.writing || q.fault.is_some() || q.closed || q.shutdown {
            self.kick(&mut q);
            return;
        }
        buf.clear();
        std::mem::swap(&mut q.bytes, buf);
        q.frames = 0;
        self.took(&mut q);
        q.writing = true;
        drop(q);
        let written = (&mut &*tcp).write_all(buf);
        let mut q = self.lock();
        q.writing = false;
        if written.is_err() {
            drop(q);
            self.abandon();
            let _ = tcp.shutdown(Shutdown::Both);
            return;
        }
        // Pushed meanwhile, or something for the writer to do (close, fault).
        if !q.bytes.is_empty() || q.closed || q.shutdown || q.fault.is_some() {
            self.kick(&mut q);
        }
        if buf.capacity() > 4 << 20 {
            *buf = Vec::new();
        }
    }

    /// Pushes were taken by the writer: the reader may go on.
    fn took(&self, q: &mut Queue) {
        self.count(q);
        if q.reader_waiting {
            self.to_reader.notify_all();
        }
    }
}

/// Appends one unmasked server frame with `opcode` (and FIN when `fin`) whose payload
/// `write` appends. The payload is written in place after room for the longest header,
/// then moved up to the real header: no intermediate buffer.
pub(crate) fn append_frame(
    out: &mut Vec<u8>,
    opcode: u8,
    fin: bool,
    write: impl FnOnce(&mut Vec<u8>),
) {
    const ROOM: usize = 10;
    let start = out.len();
    out.resize(start + ROOM, 0);
    write(out);
    let len = out.len() - start - ROOM;
    let mut header = [0u8; ROOM];
    header[0] = if fin { 0x80 } else { 0 } | opcode;
    let header_len = match len {
        n if n < 126 => {
            header[1] = n as u8;
            2
        }
        n if n <= 0xFFFF => {
            header[1] = 126;
            header[2..4].copy_from_slice(&(n as u16).to_be_bytes());
            4
        }
        n => {
            header[1] = 127;
            header[2..10].copy_from_slice(&(n as u64).to_be_bytes());
            10
        }
    };
    out[start..start + header_len].copy_from_slice(&header[..header_len]);
    out.copy_within(start + ROOM.., start + header_len);
    out.truncate(start + header_len + len);
}

/// An unmasked, unfragmented server frame with opcode `opcode`.
pub(crate) fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 10);
    append_frame(&mut out, opcode, true, |o| o.extend_from_slice(payload));
    out
}

/// A text frame.
#[cfg(test)]
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

/// Moves the control frames (ping, pong, close) of `bytes` to the end of `out`, keeping
/// the data frames in order in `bytes`; returns how many frames moved.
fn take_control_frames(bytes: &mut Vec<u8>, out: &mut Vec<u8>) -> usize {
    let mut kept = 0;
    let mut at = 0;
    let mut moved = 0;
    while let Some(len) = frame_len(&bytes[at..]) {
        if bytes[at] & 0x08 != 0 {
            out.extend_from_slice(&bytes[at..at + len]);
            moved += 1;
        } else {
            bytes.copy_within(at..at + len, kept);
            kept += len;
        }
        at += len;
    }
    bytes.copy_within(at.., kept);
    bytes.truncate(kept + (bytes.len() - at));
    moved
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
        assert_eq!(f.len(), 130);
        let f = text_frame(&vec![b'x'; 70_000]);
        assert_eq!(&f[..2], &[0x81, 127]);
        assert_eq!(f.len(), 70_010);
        assert_eq!(frame_len(&f), Some(f.len()));
        assert_eq!(frame_len(&f[..f.len() - 1]), None);
        assert_eq!(close_frame(1000), b"\x88\x02\x03\xe8");
        let mut out = b"ab".to_vec();
        append_frame(&mut out, 0x0, false, |o| o.extend_from_slice(b"xyz"));
        assert_eq!(out, b"ab\x00\x03xyz");
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
    fn control_frames_are_taken_apart() {
        let mut bytes = text_frame(b"one");
        bytes.extend(frame(0xA, b"p"));
        bytes.extend(text_frame(b"two"));
        bytes.extend(close_frame(1000));
        bytes.extend(b"\x81");
        let mut out = Vec::new();
        assert_eq!(take_control_frames(&mut bytes, &mut out), 2);
        let mut want = frame(0xA, b"p");
        want.extend(close_frame(1000));
        assert_eq!(out, want);
        let mut want = text_frame(b"one");
        want.extend(text_frame(b"two"));
        want.extend(b"\x81");
        assert_eq!(bytes, want);
    }

    #[test]
    fn queue_limits() {
        let o = Arc::new(Outbox::new(1, usize::MAX));
        let data = |o: &Arc<Outbox>| o.push_data_with(|b| b.push(0));
        assert_eq!(data(&o), Pushed::Ok);
        assert_eq!(data(&o), Pushed::Full);
        assert_eq!(o.push_text(b"1"), Pushed::Ok);
        assert_eq!(o.push_text(b"2"), Pushed::Full);
        assert_eq!(o.queued(), 2);
        o.push_shutdown();
        assert_eq!(o.push_text(b"3"), Pushed::Ok, "dropped after a shutdown");
        let mut buf = Vec::new();
        assert!(matches!(o.next(&mut buf, false), Next::Bytes));
        assert_eq!(buf, b"\x00\x81\x011");
        assert_eq!(o.queued(), 0);
        buf.clear();
        assert!(matches!(o.next(&mut buf, false), Next::End));
        o.close();
        assert_eq!(o.push_text(b"4"), Pushed::Ok);
        assert!(matches!(o.next(&mut buf, false), Next::End));
    }

    #[test]
    fn byte_limits() {
        let o = Arc::new(Outbox::new(100, 10));
        let data = |o: &Arc<Outbox>, n: usize| o.push_data_with(|b| b.resize(b.len() + n, 0));
        assert_eq!(data(&o, 6), Pushed::Ok);
        assert!(!o.needs_room(100));
        assert_eq!(data(&o, 6), Pushed::Ok, "one push may cross the limit");
        assert!(o.needs_room(100));
        assert_eq!(data(&o, 1), Pushed::Full);
        // Replies may use twice the bytes.
        assert_eq!(o.push_text(b"123456"), Pushed::Ok);
        assert_eq!(o.push_text(b"1"), Pushed::Full);
        let mut buf = Vec::new();
        assert!(matches!(o.next(&mut buf, false), Next::Bytes));
        assert!(!o.needs_room(100));
        assert_eq!(data(&o, 1), Pushed::Ok);
    }

    #[test]
    fn kicks_wait_for_the_release() {
        let o = Arc::new(Outbox::new(10, usize::MAX));
        o.lock().writer_idle = true;
        hold_kicks();
        o.push_text(b"a");
        o.push_text(b"b");
        assert!(o.lock().kicked);
        assert_eq!(HELD_KICKS.with(|h| h.borrow().1.len()), 1, "one wake-up");
        release_kicks();
        assert_eq!(HELD_KICKS.with(|h| h.borrow().1.len()), 0);
    }
}

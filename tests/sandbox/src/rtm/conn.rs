//! One client connection: the upgrade, the reader loop (this thread) and the writer
//! thread that owns the socket's write side.
//!
//! # Batches
//!
//! A client may pipeline: write many requests without waiting for replies. The reader
//! then gets hundreds of requests per read of the socket (tungstenite reads up to
//! [`READ_BUFFER`] at once), and handles all the complete frames of that read as one
//! batch: under one take of the state lock, their replies appended to the outbox as they
//! are made. Only when tungstenite has no complete frame left and would read the socket
//! again does the batch end (the socket then says `WouldBlock` once, see [`WsIo`]): the
//! lock is released and the writer woken once, and it writes all the replies with one
//! syscall. Fan-out to subscribers goes the same way: each subscriber's writer is woken
//! once per batch and writes what piled up in one go. With a client that does not
//! pipeline, a batch is one request, as before.
//!
//! # CBOR
//!
//! A client that offers the subprotocol `cbor` gets it (see `cbor` for the encoding).
//! Its frames are read as CBOR whatever their opcode: the reference Python SDK sends its
//! CBOR in text frames, which are not UTF-8, and tungstenite (which validates the UTF-8
//! of text messages, with no switch to turn that off) would close the connection with
//! 1007. So on such a connection the bytes from the socket pass through
//! [`TextAsBinary`] before tungstenite sees them, which relabels text frames as binary.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tungstenite::http::{HeaderValue, StatusCode};
use tungstenite::protocol::WebSocketConfig;
use tungstenite::{Error as WsError, HandshakeError, Message};

use super::actions;
use super::cbor::{self, Encoding};
use super::faults::ConnectFault;
use super::flood::Flooder;
use super::outbox::{close_frame, strip_pongs, Next, Outbox, Pushed};
use super::pdu::{envelope, error_body};
use super::records::AttemptOutcome;
use super::state::{Batch, Conn, Record, Shared};

/// Bytes tungstenite reads from the socket at once.
const READ_BUFFER: usize = 64 * 1024;

/// Requests handled under one take of the state lock at most, so that other threads
/// (publishers, tests, fault injection) wait no longer than that.
const MAX_BATCH: usize = 1024;

/// The socket as tungstenite sees it: reads come from the TCP stream; writes (the 101
/// response during the upgrade, then pongs and close replies) go straight to the socket
/// until the outbox exists, and through the outbox afterwards, so that they stay in
/// order with everything else the writer sends.
struct WsIo {
    tcp: TcpStream,
    outbox: Option<Arc<Outbox>>,
    shared: Arc<Shared>,
    /// The reader has handled a frame since the last read of the socket: the next read
    /// returns `WouldBlock` instead, which makes tungstenite hand back control when it
    /// has no complete frame left, so that the reader can end its batch before it would
    /// block (tungstenite keeps a partial frame and reads on at the next call).
    yield_before_read: bool,
    /// On a CBOR connection, once upgraded: relabels the client's text frames.
    text_as_binary: Option<TextAsBinary>,
    /// Until the upgrade is done: when it must be done by (none: no limit). Each read
    /// waits only for the time left, so a client that trickles its request byte by
    /// byte cannot stretch it.
    deadline: Option<Instant>,
}

impl Read for WsIo {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if std::mem::take(&mut self.yield_before_read) {
            return Err(ErrorKind::WouldBlock.into());
        }
        if let Some(deadline) = self.deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ErrorKind::TimedOut.into());
            }
            self.tcp.set_read_timeout(Some(left))?;
        }
        if let Some(outbox) = &self.outbox {
            outbox.wait_while_silent();
        }
        let n = self.tcp.read(buf)?;
        if let (Some(relabel), Some(read)) = (&mut self.text_as_binary, buf.get_mut(..n)) {
            relabel.pass(read);
        }
        Ok(n)
    }
}

impl Write for WsIo {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(outbox) = &self.outbox else {
            return self.tcp.write(buf);
        };
        // tungstenite hands over its whole buffer of complete frames in one call, and we
        // take all of it, so frames never split between pushes.
        let pushed = if self.shared.mute_pongs.load(Ordering::SeqCst) {
            let bytes = strip_pongs(buf);
            if bytes.is_empty() {
                Pushed::Ok
            } else {
                outbox.push_frames(&bytes)
            }
        } else {
            outbox.push_frames(buf)
        };
        if pushed == Pushed::Full {
            return Err(io::Error::other("client does not read"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.outbox {
            Some(_) => Ok(()),
            None => self.tcp.flush(),
        }
    }
}

/// Follows the frames of the bytes a client sends and relabels its text frames as binary
/// ones (see the module's "CBOR"): only the opcode of the first frame of a text message
/// changes (continuation and control frames keep theirs), so tungstenite assembles and
/// checks everything else as usual, and a broken frame is still refused by it.
#[derive(Debug, Default)]
struct TextAsBinary {
    /// The header bytes of the current frame seen so far (0: at a frame's start).
    header: [u8; 14],
    have: usize,
    /// Payload bytes of the current frame still to come.
    payload: u64,
}

impl TextAsBinary {
    /// Passes the next bytes from the client (in place).
    fn pass(&mut self, bytes: &mut [u8]) {
        let mut at = 0;
        while let Some(rest) = bytes.get_mut(at..).filter(|r| !r.is_empty()) {
            if self.payload > 0 {
                let skip = usize::try_from(self.payload).map_or(rest.len(), |p| p.min(rest.len()));
                self.payload -= skip as u64;
                at += skip;
                continue;
            }
            let b = &mut rest[0];
            if self.have == 0 && *b & 0x0F == 0x1 {
                *b = (*b & 0xF0) | 0x2;
            }
            self.header[self.have] = *b;
            self.have += 1;
            at += 1;
            if let Some(len) = self.payload_len() {
                self.payload = len;
                self.have = 0;
            }
        }
    }

    /// The payload length, once the whole header is in.
    fn payload_len(&self) -> Option<u64> {
        let h = &self.header[..self.have];
        let b1 = *h.get(1)?;
        let (ext, mask) = (
            match b1 & 0x7F {
                126 => 2,
                127 => 8,
                _ => 0,
            },
            if b1 & 0x80 != 0 { 4 } else { 0 },
        );
        if h.len() < 2 + ext + mask {
            return None;
        }
        Some(match ext {
            0 => u64::from(b1 & 0x7F),
            2 => u64::from(u16::from_be_bytes([h[2], h[3]])),
            _ => u64::from_be_bytes(h[2..10].try_into().ok()?),
        })
    }
}

/// What the upgrade request said.
#[derive(Default)]
struct Upgrade {
    path: String,
    appkey: String,
    rejected: Option<u16>,
    encoding: Encoding,
}

/// The subprotocol to select among those the client offers (in its order of
/// preference): `cbor` if it is enabled, or `json`; tokens compare case-insensitively.
fn select_subprotocol<'a>(offers: impl Iterator<Item = &'a str>, cbor: bool) -> Option<Encoding> {
    offers
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .find_map(|p| {
            if cbor && p.eq_ignore_ascii_case("cbor") {
                Some(Encoding::Cbor)
            } else if p.eq_ignore_ascii_case("json") {
                Some(Encoding::Json)
            } else {
                None
            }
        })
}

/// The value of `name` in a query string, percent-decoded.
fn query_param(query: &str, name: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| percent_decode(v))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn error_response(status: u16, text: &str) -> ErrorResponse {
    let mut resp = ErrorResponse::new(Some(text.to_owned()));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    resp
}

/// Serves connection `id` (already recorded as an attempt) until it closes.
pub(crate) fn serve(shared: &Arc<Shared>, id: u64, tcp: TcpStream, fault: Option<ConnectFault>) {
    let outcome = run(shared, id, tcp, fault);
    let mut st = shared.lock();
    if let Some(outcome) = outcome {
        st.set_outcome(id, outcome);
    }
    st.sockets.remove(&id);
    if let Some(conn) = st.conns.remove(&id) {
        conn.outbox.close();
    }
    if let Some(r) = st.records.get_mut(&id) {
        r.open = false;
    }
}

/// The connection's life; returns the attempt's outcome if the upgrade did not succeed.
fn run(
    shared: &Arc<Shared>,
    id: u64,
    tcp: TcpStream,
    fault: Option<ConnectFault>,
) -> Option<AttemptOutcome> {
    let config = &shared.config;
    // The 101 must leave as its own segment, before any frame: the C SDK misreads a frame
    // that arrives in the same read as the 101.
    let _ = tcp.set_nodelay(true);
    let deadline = Instant::now().checked_add(config.handshake_timeout);
    let Ok(writer_tcp) = tcp.try_clone() else {
        return Some(AttemptOutcome::HandshakeFailed);
    };
    let io = WsIo {
        tcp,
        outbox: None,
        shared: Arc::clone(shared),
        yield_before_read: false,
        text_as_binary: None,
        deadline,
    };
    let mut upgrade = Upgrade::default();
    // The signature is tungstenite's `Callback`; its error type is not ours to shrink.
    #[allow(clippy::result_large_err)]
    let callback = |req: &Request, mut resp: Response| -> Result<Response, ErrorResponse> {
        let uri = req.uri();
        upgrade.path = uri.path().to_owned();
        let appkey = uri.query().and_then(|q| query_param(q, "appkey"));
        upgrade.appkey = appkey.clone().unwrap_or_default();
        let refusal = if let Some(ConnectFault::Status(status)) = fault {
            Some((status, "Refused (fault injection)"))
        } else if upgrade.path != "/v2" && !upgrade.path.ends_with("/v2") {
            Some((404, "Not found: the path must end in /v2"))
        } else if !appkey.is_some_and(|k| config.appkeys.contains(&k)) {
            Some((400, "Invalid appkey"))
        } else {
            None
        };
        // Outcomes are recorded before the response goes out, so that a test that has
        // seen the response also sees the outcome.
        if let Some((status, text)) = refusal {
            upgrade.rejected = Some(status);
            shared
                .lock()
                .set_outcome(id, AttemptOutcome::Rejected(status));
            return Err(error_response(status, text));
        }
        let outcome = match fault {
            Some(ConnectFault::CloseAfterUpgrade) => AttemptOutcome::ClosedAfterUpgrade,
            _ => AttemptOutcome::Upgraded,
        };
        shared.lock().set_outcome(id, outcome);
        // JS clients offer `json` or `cbor` and fail when none is selected; the Python
        // SDK offers `cbor` and reads CBOR only when exactly `cbor` is selected.
        let offers = req.headers().get_all("Sec-WebSocket-Protocol");
        let selected =
            select_subprotocol(offers.iter().filter_map(|v| v.to_str().ok()), config.cbor);
        if let Some(encoding) = selected {
            upgrade.encoding = encoding;
            let token = match encoding {
                Encoding::Json => "json",
                Encoding::Cbor => "cbor",
            };
            resp.headers_mut()
                .insert("Sec-WebSocket-Protocol", HeaderValue::from_static(token));
        }
        Ok(resp)
    };
    let ws_config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .max_message_size(Some(config.max_message_size))
        .max_frame_size(Some(config.max_message_size))
        // The JS SDK sends unmasked frames over `wss://`, against RFC 6455.
        .accept_unmasked_frames(true);
    let mut ws = match tungstenite::accept_hdr_with_config(io, callback, Some(ws_config)) {
        Ok(ws) => ws,
        Err(e) => {
            let e = match e {
                HandshakeError::Failure(e) => e.to_string(),
                HandshakeError::Interrupted(_) => "timed out".to_owned(),
            };
            log::debug!("rtm server: connection {id}: upgrade failed: {e}");
            let _ = writer_tcp.shutdown(Shutdown::Both);
            return Some(match upgrade.rejected {
                Some(status) => AttemptOutcome::Rejected(status),
                None => AttemptOutcome::HandshakeFailed,
            });
        }
    };
    if fault == Some(ConnectFault::CloseAfterUpgrade) {
        let _ = writer_tcp.shutdown(Shutdown::Both);
        return Some(AttemptOutcome::ClosedAfterUpgrade);
    }
    ws.get_mut().deadline = None;
    let _ = ws.get_ref().tcp.set_read_timeout(None);
    let encoding = upgrade.encoding;
    if encoding == Encoding::Cbor {
        // Frames the client sent before it saw the 101 are in tungstenite's buffer
        // already, unrelabelled; the SDKs wait for the 101.
        ws.get_mut().text_as_binary = Some(TextAsBinary::default());
    }
    let outbox = Arc::new(
        Outbox::new(config.max_queued_frames, config.max_queued_bytes).with_encoding(encoding),
    );
    {
        let mut st = shared.lock();
        if shared.is_shutdown() {
            return Some(AttemptOutcome::HandshakeFailed);
        }
        let Ok(socket) = writer_tcp.try_clone() else {
            return Some(AttemptOutcome::HandshakeFailed);
        };
        let (ob, pause, sh) = (
            Arc::clone(&outbox),
            config.upgrade_pause,
            Arc::clone(shared),
        );
        let writer = thread::Builder::new()
            .name(format!("rtm-write-{id}"))
            .spawn(move || write_loop(writer_tcp, &ob, &sh, id, pause));
        match writer {
            Ok(handle) => shared.track(handle),
            Err(e) => {
                log::warn!("rtm server: cannot spawn a writer thread: {e}");
                return Some(AttemptOutcome::HandshakeFailed);
            }
        }
        // A socket fault set for every connection applies to this one from the start.
        if st.faults.socket.is_some() {
            outbox.set_fault(st.faults.socket.clone());
        }
        st.conns.insert(
            id,
            Conn {
                outbox: Arc::clone(&outbox),
                socket,
                role: None,
                pending_auth: None,
                auth_failures: 0,
                subs: Default::default(),
            },
        );
        let record = Record {
            appkey: upgrade.appkey.clone(),
            path: upgrade.path.clone(),
            open: true,
            ..Record::default()
        };
        st.add_record(config.max_records, id, record);
    }
    ws.get_mut().outbox = Some(Arc::clone(&outbox));
    log::debug!(
        "rtm server: connection {id} upgraded ({} appkey {})",
        upgrade.path,
        upgrade.appkey
    );
    let limit = config.max_queued_frames.max(1);
    let mut batch = Batch::new(shared);
    let mut handled = 0;
    // The reader's half of the outbox's double buffer, for writing its own batches.
    let mut spare = Vec::new();
    // Ends the batch: the state lock goes (waking the writers of others that got
    // frames), then this connection's replies are written, by this thread if it can.
    let end = |batch: &mut Batch<'_>, ws: &tungstenite::WebSocket<WsIo>, spare: &mut Vec<u8>| {
        batch.end();
        outbox.end_batch(&ws.get_ref().tcp, spare);
    };
    loop {
        let close = match ws.read() {
            Ok(message) => {
                ws.get_mut().yield_before_read = true;
                if handled == 0 {
                    outbox.begin_batch();
                }
                if outbox.is_silent() {
                    // Silenced while this was read: it waits, unhandled, like the rest
                    // (counted, for the tests to see that it was read and held).
                    batch.state().record_held(id);
                    end(&mut batch, &ws, &mut spare);
                    outbox.wait_while_silent();
                }
                match (encoding, message) {
                    (Encoding::Cbor, Message::Text(text)) => {
                        handle_cbor(&mut batch, id, text.as_bytes());
                    }
                    (Encoding::Cbor, Message::Binary(bytes)) => {
                        handle_cbor(&mut batch, id, &bytes);
                    }
                    (Encoding::Json, Message::Text(text)) => {
                        actions::handle(&mut batch, id, text.as_str(), None);
                    }
                    // The C SDK parses binary frames as JSON text; do the same.
                    (Encoding::Json, Message::Binary(bytes)) => {
                        actions::handle(&mut batch, id, &String::from_utf8_lossy(&bytes), None);
                    }
                    // tungstenite queues the pong itself.
                    (_, Message::Ping(_)) => batch.state().record_ping(id),
                    _ => {}
                }
                handled += 1;
                // The client lets replies pile up (or the batch is long): let the writer
                // catch up, and other threads have the lock.
                if handled >= MAX_BATCH || outbox.needs_room(limit) {
                    handled = 0;
                    end(&mut batch, &ws, &mut spare);
                    outbox.wait_for_room(limit);
                }
                continue;
            }
            // No complete frame left (see `WsIo::yield_before_read`): the batch is over.
            Err(WsError::Io(e))
                if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) =>
            {
                if handled > 0 {
                    handled = 0;
                    end(&mut batch, &ws, &mut spare);
                }
                outbox.wait_for_room(limit);
                continue;
            }
            Err(WsError::Capacity(e)) => {
                log::debug!("rtm server: connection {id}: {e}");
                Some(1009)
            }
            Err(WsError::Protocol(e)) => {
                log::debug!("rtm server: connection {id}: {e}");
                Some(1002)
            }
            Err(WsError::Utf8(e)) => {
                log::debug!("rtm server: connection {id}: {e}");
                Some(1007)
            }
            Err(e) => {
                log::debug!("rtm server: connection {id} closed: {e}");
                None
            }
        };
        end(&mut batch, &ws, &mut spare);
        if let Some(code) = close {
            let _ = outbox.push_frames(&close_frame(code));
            outbox.push_shutdown();
        }
        return None;
    }
}

/// Handles one PDU from a CBOR client: transcoded for the actions, or refused with an
/// id-less `/error` `invalid_cbor` (the counterpart of JSON's `invalid_json`).
fn handle_cbor(batch: &mut Batch<'_>, id: u64, bytes: &[u8]) {
    match cbor::decode_request(bytes) {
        Ok(req) => actions::handle(batch, id, &req.json, req.message.as_deref()),
        Err(e) => {
            let reply = envelope("/error", None, &error_body("invalid_cbor", &e.to_string()));
            if let Some(conn) = batch.state().conns.get(&id) {
                conn.send(&reply);
            }
        }
    }
}

/// Writes the outbox to the socket until it is closed, then closes the socket. Each
/// write takes everything queued (see the module's "Batches"); floods (see
/// [`SocketFault`](super::SocketFault)) fill the gaps, one chunk per write, so the
/// socket's backpressure is their only pace.
fn write_loop(mut tcp: TcpStream, outbox: &Outbox, shared: &Shared, id: u64, pause: Duration) {
    // Nothing may follow the 101 in the same TCP segment: some clients (the C SDK among
    // them) corrupt a frame that shares it.
    thread::sleep(pause);
    // A write that finds no room waits at most this long before it is counted as a stall
    // (and goes on waiting): what lets a test see that a client reads nothing.
    let _ = tcp.set_write_timeout(Some(super::WRITE_STALL));
    let mut buf = Vec::new();
    let mut flooder = Flooder::new(shared.positions);
    loop {
        buf.clear();
        let written = match outbox.next(&mut buf, flooder.in_message()) {
            Next::Bytes => write_all(&mut tcp, &buf, shared, id),
            Next::Flood(fault, looked) => match flooder.chunk(&fault, shared, id) {
                Some(chunk) => write_all(&mut tcp, chunk, shared, id),
                None => {
                    outbox.flood_stalled(looked);
                    Ok(())
                }
            },
            Next::EndMessage => write_all(&mut tcp, flooder.end_message(), shared, id),
            Next::End => break,
        };
        if written.is_err() {
            break;
        }
        // Give back a buffer that a burst made huge.
        if buf.capacity() > 4 << 20 {
            buf = Vec::new();
        }
    }
    outbox.abandon();
    let _ = tcp.shutdown(Shutdown::Both);
}

/// `write_all` that counts each [`WRITE_STALL`](super::WRITE_STALL) spent waiting for room
/// in the socket (the connection's `write_stalls`) and goes on waiting.
fn write_all(tcp: &mut TcpStream, mut bytes: &[u8], shared: &Shared, id: u64) -> io::Result<()> {
    while !bytes.is_empty() {
        match tcp.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = bytes.get(n..).unwrap_or_default(),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                shared.lock().record_write_stall(id);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries() {
        assert_eq!(query_param("appkey=K", "appkey").as_deref(), Some("K"));
        assert_eq!(
            query_param("x=1&appkey=a%2Fb+c", "appkey").as_deref(),
            Some("a/b c")
        );
        assert_eq!(query_param("appkey", "appkey").as_deref(), Some(""));
        assert_eq!(query_param("appkeys=1", "appkey"), None);
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }

    #[test]
    fn subprotocols() {
        let select = |offers: &[&str], cbor| select_subprotocol(offers.iter().copied(), cbor);
        assert_eq!(select(&["cbor"], true), Some(Encoding::Cbor));
        assert_eq!(select(&["CBOR"], true), Some(Encoding::Cbor));
        assert_eq!(select(&["x, Cbor "], true), Some(Encoding::Cbor));
        assert_eq!(select(&["cbor"], false), None);
        assert_eq!(select(&["cbor", "json"], false), Some(Encoding::Json));
        assert_eq!(select(&["json, cbor"], true), Some(Encoding::Json));
        assert_eq!(select(&["cbor2", "xjson"], true), None);
        assert_eq!(select(&[], true), None);
    }

    /// Text frames become binary wherever the reads split the stream; nothing else
    /// changes.
    #[test]
    fn text_frames_read_as_binary() {
        let mut stream = Vec::new();
        let mut want = Vec::new();
        // (first byte, masked, payload length): a masked text frame of 5, an unmasked
        // one of 200 (16-bit length), a ping, a fragmented text message (text without
        // FIN, continuation with FIN), a binary frame of 70 000 (64-bit length), an
        // empty text frame.
        for (b0, masked, len) in [
            (0x81u8, true, 5usize),
            (0x81, false, 200),
            (0x89, true, 2),
            (0x01, true, 3),
            (0x80, true, 4),
            (0x82, true, 70_000),
            (0x81, true, 0),
        ] {
            let mut frame = vec![b0];
            let m = if masked { 0x80 } else { 0 };
            match len {
                0..=125 => frame.push(m | len as u8),
                126..=0xFFFF => {
                    frame.push(m | 126);
                    frame.extend((len as u16).to_be_bytes());
                }
                _ => {
                    frame.push(m | 127);
                    frame.extend((len as u64).to_be_bytes());
                }
            }
            if masked {
                frame.extend([0x81, 0x81, 0x01, 0x81]);
            }
            // Payload bytes that look like text frame headers.
            frame.extend(std::iter::repeat_n(0x81, len));
            stream.extend(&frame);
            if b0 & 0x0F == 1 {
                frame[0] = (b0 & 0xF0) | 2;
            }
            want.extend(frame);
        }
        for chunk in [1, 2, 3, 7, 13, 64, 1000, stream.len()] {
            let mut bytes = stream.clone();
            let mut relabel = TextAsBinary::default();
            for part in bytes.chunks_mut(chunk) {
                relabel.pass(part);
            }
            assert!(bytes == want, "reads of {chunk} bytes");
            assert_eq!((relabel.have, relabel.payload), (0, 0));
        }
    }
}

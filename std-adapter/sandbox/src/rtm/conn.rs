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
use super::faults::ConnectFault;
use super::flood::Flooder;
use super::outbox::{close_frame, strip_pongs, Next, Outbox, Pushed};
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
        self.tcp.read(buf)
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

/// What the upgrade request said.
#[derive(Default)]
struct Upgrade {
    path: String,
    appkey: String,
    rejected: Option<u16>,
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
        // JS clients offer `json` (or `cbor`) and fail when none is selected. CBOR is
        // not implemented, so only `json` is ever selected.
        let offers_json = req
            .headers()
            .get_all("Sec-WebSocket-Protocol")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|p| p.trim() == "json");
        if offers_json {
            resp.headers_mut()
                .insert("Sec-WebSocket-Protocol", HeaderValue::from_static("json"));
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
    let outbox = Arc::new(Outbox::new(
        config.max_queued_frames,
        config.max_queued_bytes,
    ));
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
                    // Silenced while this was read: it waits, unhandled, like the rest.
                    end(&mut batch, &ws, &mut spare);
                    outbox.wait_while_silent();
                }
                match message {
                    Message::Text(text) => actions::handle(&mut batch, id, text.as_str()),
                    // The C SDK parses binary frames as JSON text; do the same.
                    Message::Binary(bytes) => {
                        actions::handle(&mut batch, id, &String::from_utf8_lossy(&bytes));
                    }
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

/// Writes the outbox to the socket until it is closed, then closes the socket. Each
/// write takes everything queued (see the module's "Batches"); floods (see
/// [`SocketFault`](super::SocketFault)) fill the gaps, one chunk per write, so the
/// socket's backpressure is their only pace.
fn write_loop(mut tcp: TcpStream, outbox: &Outbox, shared: &Shared, id: u64, pause: Duration) {
    // Nothing may follow the 101 in the same TCP segment: some clients (the C SDK among
    // them) corrupt a frame that shares it.
    thread::sleep(pause);
    let mut buf = Vec::new();
    let mut flooder = Flooder::new(shared.positions);
    loop {
        buf.clear();
        let written = match outbox.next(&mut buf, flooder.in_message()) {
            Next::Bytes => tcp.write_all(&buf),
            Next::Flood(fault) => match flooder.chunk(&fault, shared, id) {
                Some(chunk) => tcp.write_all(chunk),
                None => {
                    outbox.flood_stalled();
                    Ok(())
                }
            },
            Next::EndMessage => tcp.write_all(flooder.end_message()),
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
}

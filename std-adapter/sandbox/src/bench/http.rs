//! HTTP/1.1 over one `TcpStream` per thread: request heads parsed with `httparse`,
//! bodies by Content-Length or chunked, keep-alive and pipelining, and the response
//! writers (fixed-length, chunked) with Cowboy's header set.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use super::clock;
use super::state::Shared;

/// Largest request head accepted (Cowboy rejects long lines with 400 too).
const MAX_HEAD: usize = 64 * 1024;
/// Largest request body accepted.
const MAX_BODY: usize = 64 * 1024 * 1024;
/// Most request headers parsed.
const MAX_HEADERS: usize = 64;
/// Read timeout, so a blocked read notices shutdown and keep-alive expiry.
const READ_SLICE: Duration = Duration::from_millis(100);

/// One parsed request.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
    pub(crate) keep_alive: bool,
}

impl Request {
    /// The first header named `name` (lower case).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What reading the next request gave.
pub(crate) enum Next {
    Request(Request),
    /// The peer closed, the connection idled out, or the server is shutting down.
    Closed,
    /// A malformed request: answer with this status and close.
    Bad(u16),
}

/// Whether to keep the connection after a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    KeepAlive,
    Close,
}

/// A server-side connection.
pub(crate) struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    close_after: bool,
    /// Chunks written with [`Conn::chunk_buffered`], not yet sent.
    out: Vec<u8>,
    /// Send responses one byte at a time with this pause ([`Fault::Drip`](super::Fault)).
    drip: Option<Duration>,
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        302 => "Found",
        303 => "See Other",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Request Entity Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// Decodes a complete chunked body at the start of `data`: `Ok(Some((body, used)))`,
/// `Ok(None)` if more bytes are needed, `Err(())` if malformed.
fn decode_chunked(data: &[u8]) -> Result<Option<(Vec<u8>, usize)>, ()> {
    let mut body = Vec::new();
    let mut pos = 0;
    loop {
        let Some(line_len) = data
            .get(pos..)
            .and_then(|d| d.windows(2).position(|w| w == b"\r\n"))
        else {
            return if data.len() - pos > 1024 {
                Err(())
            } else {
                Ok(None)
            };
        };
        let line = std::str::from_utf8(data.get(pos..pos + line_len).ok_or(())?).map_err(|_| ())?;
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| ())?;
        pos += line_len + 2;
        if size == 0 {
            // Trailers, then an empty line.
            loop {
                let Some(l) = data
                    .get(pos..)
                    .and_then(|d| d.windows(2).position(|w| w == b"\r\n"))
                else {
                    return Ok(None);
                };
                pos += l + 2;
                if l == 0 {
                    return Ok(Some((body, pos)));
                }
            }
        }
        if size > MAX_BODY.saturating_sub(body.len()) {
            return Err(());
        }
        let Some(chunk) = data.get(pos..pos + size) else {
            return Ok(None);
        };
        body.extend_from_slice(chunk);
        pos += size;
        match data.get(pos..pos + 2) {
            None => return Ok(None),
            Some(b"\r\n") => pos += 2,
            Some(_) => return Err(()),
        }
    }
}

impl Conn {
    /// Wraps an accepted stream.
    pub(crate) fn new(stream: TcpStream, drip: Option<Duration>) -> Conn {
        let _ = stream.set_read_timeout(Some(READ_SLICE));
        let _ = stream.set_nodelay(true);
        Conn {
            stream,
            buf: Vec::new(),
            close_after: false,
            out: Vec::new(),
            drip,
        }
    }

    /// Every byte of a response goes through here.
    fn write_out(&mut self, bytes: &[u8]) -> io::Result<()> {
        let Some(pause) = self.drip else {
            return self.stream.write_all(bytes);
        };
        for byte in bytes.chunks(1) {
            self.stream.write_all(byte)?;
            std::thread::sleep(pause);
        }
        Ok(())
    }

    /// Reads and ignores whatever the peer sends until it closes or the server shuts
    /// down ([`Fault::Silent`](super::Fault)).
    pub(crate) fn hold(&mut self, shared: &Shared) {
        while !shared.is_shutdown() {
            if self.fill().is_err() {
                break;
            }
            self.buf.clear();
        }
        self.shutdown();
    }

    /// Reads more bytes; `Ok(false)` when nothing arrived within the read slice.
    fn fill(&mut self) -> io::Result<bool> {
        let mut tmp = [0u8; 8192];
        match self.stream.read(&mut tmp) {
            Ok(0) => Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                self.buf.extend_from_slice(tmp.get(..n).unwrap_or(&[]));
                Ok(true)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Ok(false)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Reads the next request (head and body).
    pub(crate) fn next_request(&mut self, shared: &Shared) -> Next {
        let idle_limit = shared.config.keep_alive_timeout;
        let mut last_activity = Instant::now();
        let mut sent_continue = false;
        loop {
            if shared.is_shutdown() {
                return Next::Closed;
            }
            if let Some(next) = self.try_parse(&mut sent_continue) {
                return next;
            }
            match self.fill() {
                Ok(true) => last_activity = Instant::now(),
                Ok(false) if last_activity.elapsed() >= idle_limit => {
                    return if self.buf.is_empty() {
                        Next::Closed
                    } else {
                        Next::Bad(408)
                    };
                }
                Ok(false) => {}
                Err(_) => return Next::Closed,
            }
        }
    }

    /// Parses a whole request from the buffer if it is there.
    fn try_parse(&mut self, sent_continue: &mut bool) -> Option<Next> {
        // Cowboy skips empty lines between pipelined requests.
        while self.buf.starts_with(b"\r\n") {
            self.buf.drain(..2);
        }
        if self.buf.is_empty() {
            return None;
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let head_len = match req.parse(&self.buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if self.buf.len() > MAX_HEAD => {
                return Some(Next::Bad(400))
            }
            Ok(httparse::Status::Partial) => return None,
            Err(_) => return Some(Next::Bad(400)),
        };
        let method = req.method.unwrap_or("GET").to_owned();
        let target = req.path.unwrap_or("/");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let (path, query) = (path.to_owned(), query.to_owned());
        let version = req.version.unwrap_or(1);
        let headers: Vec<(String, String)> = req
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_ascii_lowercase(),
                    String::from_utf8_lossy(h.value).trim().to_owned(),
                )
            })
            .collect();
        let find = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let connection = find("connection").unwrap_or("").to_ascii_lowercase();
        let keep_alive = if version == 0 {
            connection.contains("keep-alive")
        } else {
            !connection.contains("close")
        };
        let chunked =
            find("transfer-encoding").is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
        let expect_continue =
            find("expect").is_some_and(|e| e.eq_ignore_ascii_case("100-continue"));
        let rest = self.buf.get(head_len..).unwrap_or(&[]);
        let (body, used) = if chunked {
            match decode_chunked(rest) {
                Ok(Some((body, used))) => (body, used),
                Ok(None) => {
                    self.continue_once(expect_continue, sent_continue, version);
                    return None;
                }
                Err(()) => return Some(Next::Bad(400)),
            }
        } else {
            let len = match find("content-length").map(str::parse::<usize>) {
                None => 0,
                Some(Ok(n)) if n <= MAX_BODY => n,
                Some(Ok(_)) => return Some(Next::Bad(413)),
                Some(Err(_)) => return Some(Next::Bad(400)),
            };
            match rest.get(..len) {
                Some(b) => (b.to_vec(), len),
                None => {
                    self.continue_once(expect_continue, sent_continue, version);
                    return None;
                }
            }
        };
        self.buf.drain(..head_len + used);
        Some(Next::Request(Request {
            method,
            path,
            query,
            headers,
            body,
            keep_alive,
        }))
    }

    /// Answers `Expect: 100-continue` once, as Cowboy does when the body is read.
    fn continue_once(&mut self, expect: bool, sent: &mut bool, version: u8) {
        if expect && !*sent && version == 1 {
            *sent = true;
            let _ = self.write_out(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
    }

    /// Marks the connection to be closed after the current response.
    pub(crate) fn close_after(&mut self) {
        self.close_after = true;
    }

    fn head(&self, status: u16, headers: &[(&str, String)], keep_alive: bool) -> String {
        let mut head = format!("HTTP/1.1 {status} {}\r\n", reason_phrase(status));
        let conn = if keep_alive && !self.close_after {
            "keep-alive"
        } else {
            "close"
        };
        head.push_str(&format!("connection: {conn}\r\n"));
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str(&format!(
            "date: {}\r\nserver: Cowboy\r\n\r\n",
            clock::http_date(clock::now_secs())
        ));
        head
    }

    /// A complete response with a `content-length`.
    pub(crate) fn respond(
        &mut self,
        status: u16,
        headers: &[(&str, String)],
        body: &[u8],
        keep_alive: bool,
    ) -> io::Result<Flow> {
        let mut all: Vec<(&str, String)> = vec![("content-length", body.len().to_string())];
        all.extend(headers.iter().cloned());
        let mut bytes = self.head(status, &all, keep_alive).into_bytes();
        bytes.extend_from_slice(body);
        self.write_out(&bytes)?;
        Ok(if keep_alive && !self.close_after {
            Flow::KeepAlive
        } else {
            Flow::Close
        })
    }

    /// Starts a chunked response.
    pub(crate) fn start_chunked(
        &mut self,
        headers: &[(&str, String)],
        keep_alive: bool,
    ) -> io::Result<()> {
        let mut all: Vec<(&str, String)> = headers.to_vec();
        all.push(("transfer-encoding", "chunked".to_owned()));
        let head = self.head(200, &all, keep_alive);
        self.write_out(head.as_bytes())
    }

    /// One HTTP chunk (empty data writes nothing: an empty chunk would end the body).
    pub(crate) fn chunk(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let mut bytes = format!("{:x}\r\n", data.len()).into_bytes();
        bytes.extend_from_slice(data);
        bytes.extend_from_slice(b"\r\n");
        self.write_out(&bytes)
    }

    /// One HTTP chunk, kept until [`Conn::flush_chunks`] or until enough have gathered
    /// for a large write (the chunk framing stays one chunk per call).
    pub(crate) fn chunk_buffered(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let _ = write!(self.out, "{:x}\r\n", data.len());
        self.out.extend_from_slice(data);
        self.out.extend_from_slice(b"\r\n");
        if self.out.len() >= 64 * 1024 {
            self.flush_chunks()?;
        }
        Ok(())
    }

    /// Bytes already framed as chunks, written as they are (pre-encoded bulk data).
    pub(crate) fn raw_chunks(&mut self, framed: &[u8]) -> io::Result<()> {
        self.flush_chunks()?;
        self.write_out(framed)
    }

    /// Sends the chunks gathered by [`Conn::chunk_buffered`].
    pub(crate) fn flush_chunks(&mut self) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let out = std::mem::take(&mut self.out);
        let written = self.write_out(&out);
        self.out = out;
        self.out.clear();
        written
    }

    /// The terminating chunk.
    pub(crate) fn end_chunked(&mut self, keep_alive: bool) -> io::Result<Flow> {
        self.flush_chunks()?;
        self.write_out(b"0\r\n\r\n")?;
        Ok(if keep_alive && !self.close_after {
            Flow::KeepAlive
        } else {
            Flow::Close
        })
    }

    /// Whether the peer has closed its side (checked while a stream is idle, so that a
    /// never-ending `/server_logs` ends when its client goes away).
    pub(crate) fn peer_gone(&mut self) -> bool {
        let mut probe = [0u8; 1];
        if self.stream.set_nonblocking(true).is_err() {
            return true;
        }
        let gone = match self.stream.peek(&mut probe) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ),
        };
        let _ = self.stream.set_nonblocking(false);
        gone
    }

    /// Closes both directions (used when a stream is cut short).
    pub(crate) fn shutdown(&self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies() {
        assert_eq!(
            decode_chunked(b"3\r\nabc\r\n0\r\n\r\nX"),
            Ok(Some((b"abc".to_vec(), 13)))
        );
        assert_eq!(decode_chunked(b"3\r\nab"), Ok(None));
        assert_eq!(decode_chunked(b"zz\r\n"), Err(()));
    }
}

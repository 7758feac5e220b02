//! The response side of HTTP/1.1: a worker thread writes one response (fixed-length or
//! chunked, with Cowboy's header set) to a connection whose request the event loop has
//! read (see `listener` and `request`).

use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use super::clock;

/// One parsed request (read by the event loop, see `request`).
pub(crate) use super::request::Request;

/// Whether to keep the connection after a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    KeepAlive,
    Close,
}

/// A server-side connection, on a worker thread, for writing one response (or a stream).
pub(crate) struct Conn {
    stream: TcpStream,
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
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Request Entity Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// A response head with Cowboy's header set (`connection`, the given headers, `date`,
/// `server`).
pub(crate) fn response_head(status: u16, headers: &[(&str, String)], keep_alive: bool) -> String {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason_phrase(status));
    let conn = if keep_alive { "keep-alive" } else { "close" };
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

impl Conn {
    /// Takes over a connection whose request the event loop has read: blocking writes,
    /// each bounded by `write_timeout`.
    pub(crate) fn new(stream: TcpStream, drip: Option<Duration>, write_timeout: Duration) -> Conn {
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_write_timeout(Some(write_timeout).filter(|t| !t.is_zero()));
        let _ = stream.set_nodelay(true);
        Conn {
            stream,
            close_after: false,
            out: Vec::new(),
            drip,
        }
    }

    /// The socket back, for the event loop to read the next request.
    pub(crate) fn into_stream(self) -> TcpStream {
        self.stream
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

    /// Marks the connection to be closed after the current response.
    pub(crate) fn close_after(&mut self) {
        self.close_after = true;
    }

    fn head(&self, status: u16, headers: &[(&str, String)], keep_alive: bool) -> String {
        response_head(status, headers, keep_alive && !self.close_after)
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

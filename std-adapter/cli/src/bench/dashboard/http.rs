//! Just enough HTTP/1.1 to serve the dashboard on loopback: GET and HEAD, one request
//! per connection, every limit explicit. A request head is read within
//! [`HEAD_LIMIT`] bytes and [`HEAD_TIMEOUT`] (a peer that trickles or stays silent
//! costs one thread for that long), at most [`MAX_CONNECTIONS`] are served at once and
//! the next ones get a 503, and a reply that the peer does not read is abandoned after
//! [`WRITE_TIMEOUT`].

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Bytes a request head may take.
pub(crate) const HEAD_LIMIT: usize = 8 * 1024;
/// Time a peer has to send its request head.
pub(crate) const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a peer has to take a reply.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections served at once (each page holds one for its news).
pub(crate) const MAX_CONNECTIONS: usize = 64;

/// A request: its path and its query's pairs, decoded.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) path: String,
    pub(crate) query: Vec<(String, String)>,
    /// The peer takes a zlib-wrapped (`deflate`) body.
    pub(crate) deflate: bool,
}

impl Request {
    /// The first value of query parameter `name`.
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A reply.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    pub(crate) fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status,
            content_type,
            body: body.into(),
        }
    }

    pub(crate) fn html(body: String) -> Reply {
        Reply::new(200, "text/html; charset=utf-8", body)
    }

    pub(crate) fn text(status: u16, body: &str) -> Reply {
        Reply::new(status, "text/plain; charset=utf-8", body)
    }
}

/// What the pages may do: their own origin's scripts, styles and requests only (the
/// charts' colour swatches are style attributes). Nothing is loaded from elsewhere, and
/// a script that slipped into a section would not run.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
                      connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; \
                      frame-ancestors 'none'";

/// Serves `listener` until the process ends: each connection on a thread of its own,
/// its request answered by `route`.
pub(crate) fn serve(listener: TcpListener, route: Arc<dyn Fn(&Request) -> Reply + Send + Sync>) {
    let open = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let open = Arc::clone(&open);
        if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
            write_reply(
                &stream,
                &Reply::text(503, "busy: too many connections\n"),
                false,
            );
            open.fetch_sub(1, Ordering::SeqCst);
            continue;
        }
        let route = Arc::clone(&route);
        let spawned = std::thread::Builder::new()
            .name("dashboard-http".into())
            .spawn(move || {
                serve_one(&stream, &*route);
                open.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            // No thread to serve it: the connection is dropped, the count restored
            // (the closure that held it was never run).
            continue;
        }
    }
}

fn serve_one(stream: &TcpStream, route: &(dyn Fn(&Request) -> Reply + Send + Sync)) {
    let _ = stream.set_read_timeout(Some(HEAD_TIMEOUT));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let (request, head_only) = match read_request(stream) {
        Ok(r) => r,
        Err(reply) => {
            write_reply(stream, &reply, false);
            return;
        }
    };
    let mut reply = route(&request);
    if request.deflate && reply.body.len() > 1024 {
        reply.body = miniz_oxide::deflate::compress_to_vec_zlib(&reply.body, 1);
        write_reply_with(stream, &reply, head_only, "Content-Encoding: deflate\r\n");
    } else {
        write_reply(stream, &reply, head_only);
    }
}

/// Reads and parses one request head; a reply to send instead when it is not one the
/// dashboard serves.
fn read_request(mut stream: &TcpStream) -> Result<(Request, bool), Reply> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream
            .read(&mut chunk)
            .map_err(|_| Reply::text(408, "request head too slow\n"))?;
        if n == 0 {
            return Err(Reply::text(
                400,
                "connection closed before the request head ended\n",
            ));
        }
        head.extend_from_slice(&chunk[..n]);
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
        if head.len() > HEAD_LIMIT {
            return Err(Reply::text(431, "request head too large\n"));
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut parsed = httparse::Request::new(&mut headers);
    if !matches!(parsed.parse(&head), Ok(httparse::Status::Complete(_))) {
        return Err(Reply::text(400, "not an HTTP request\n"));
    }
    let head_only = match parsed.method {
        Some("GET") => false,
        Some("HEAD") => true,
        _ => {
            return Err(Reply::text(
                405,
                "the dashboard is read-only: GET and HEAD only\n",
            ))
        }
    };
    let target = parsed.path.unwrap_or("/");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let deflate = parsed.headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("accept-encoding")
            && std::str::from_utf8(h.value).is_ok_and(|v| {
                v.split(',')
                    .any(|e| e.trim().split(';').next() == Some("deflate"))
            })
    });
    Ok((
        Request {
            path: decode(path),
            query: query
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|pair| {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    (decode(k), decode(v))
                })
                .collect(),
            deflate,
        },
        head_only,
    ))
}

/// Percent-decoding (and `+` as a space, as forms send it); bad escapes stay as they
/// are.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => match text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                Some(b) => {
                    out.push(b);
                    i += 2;
                }
                None => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn write_reply(stream: &TcpStream, reply: &Reply, head_only: bool) {
    write_reply_with(stream, reply, head_only, "");
}

fn write_reply_with(mut stream: &TcpStream, reply: &Reply, head_only: bool, extra: &str) {
    let reason = match reply.status {
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    };
    let head = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{extra}\
         Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\
         Content-Security-Policy: {POLICY}\r\nReferrer-Policy: no-referrer\r\n\
         Connection: close\r\n\r\n",
        reply.status,
        reply.content_type,
        reply.body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    if !head_only {
        let _ = stream.write_all(&reply.body);
    }
    let _ = stream.flush();
}

#[cfg(test)]
mod tests {
    use super::decode;

    #[test]
    fn queries_decode_as_forms_send_them() {
        assert_eq!(decode("a+b%3Cc%3e"), "a b<c>");
        assert_eq!(decode("100%"), "100%");
        assert_eq!(decode("%zz%4"), "%zz%4");
    }
}

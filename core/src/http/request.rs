//! Request heads: the request line and the fixed header set every benchlink request sends.
//!
//! The writer refuses any value that could smuggle a second header or a second request
//! (CR, LF, NUL and the other control bytes), because paths, hosts and tokens come from
//! configuration files and command lines, and a header-injection bug would let them rewrite
//! the request. The bearer token is a secret: [`RequestHead`]'s `Debug` prints `<redacted>`.

use super::multipart::Boundary;
use super::query::{EncodeQuery, QueryWriter};
use super::{Cursor, EncodeError, Method};

/// What follows the head, as far as the head has to announce it.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Body<'a> {
    /// No body. A `POST` still says `Content-Length: 0`, because servers (Cowboy among
    /// them) may otherwise wait for a body or answer 411.
    Empty,
    /// `len` bytes of one content type, sent by the caller after the head.
    Sized {
        /// The `Content-Type` value, e.g. `application/json`.
        content_type: &'a str,
        /// Exact number of body bytes the caller will send.
        len: u64,
    },
    /// A `multipart/form-data` body written with [`Boundary`]; `len` comes from
    /// [`Boundary::content_length`].
    Multipart {
        /// The boundary the parts are written with.
        boundary: &'a Boundary,
        /// Exact body length.
        len: u64,
    },
}

/// The head of one request.
///
/// Headers come out in this order: `Host`, `User-Agent`, `Accept: */*`,
/// `Accept-Encoding: deflate, gzip`, `Connection`, then `Content-Length` and
/// `Content-Type` when there is a body (or a `POST`), then `Authorization` last, as the
/// official client sends it. `Accept-Encoding` is sent because the server compresses log
/// streams whatever the client asks and the official client announces it too.
///
/// ```
/// use benchlink_core::http::{Body, Cursor, Method, RequestHead};
/// let head = RequestHead {
///     method: Method::Get,
///     path: "/status",
///     prefix: "",
///     host: "localhost:4800",
///     user_agent: "benchlink/0.1",
///     bearer: Some("TOKEN123"),
///     body: Body::Empty,
///     keep_alive: true,
/// };
/// let mut buf = [0u8; 256];
/// let mut out = Cursor::new(&mut buf);
/// head.encode(&[("id", "7"), ("wait", "false")][..], &mut out).unwrap();
/// assert!(out.written().starts_with(b"GET /status?id=7&wait=false HTTP/1.1\r\nHost: localhost:4800\r\n"));
/// assert!(out.written().ends_with(b"Authorization: Bearer TOKEN123\r\n\r\n"));
/// assert!(!format!("{head:?}").contains("TOKEN123"));
/// ```
#[derive(Clone, Copy)]
pub struct RequestHead<'a> {
    /// The request method.
    pub method: Method,
    /// Written before `path`: `""`, or the `/prefix` of a server behind a reverse proxy
    /// (`/mzbench`), so that the target is written once, in one piece, with no copy.
    pub prefix: &'a str,
    /// The path, starting with `/`, without the query (the query is encoded from typed
    /// parameters by [`RequestHead::encode`]).
    pub path: &'a str,
    /// The `Host` value, `host` or `host:port`.
    pub host: &'a str,
    /// The `User-Agent` value.
    pub user_agent: &'a str,
    /// The token for `Authorization: Bearer <token>`, if the server needs one.
    pub bearer: Option<&'a str>,
    /// The body the caller sends after the head.
    pub body: Body<'a>,
    /// `Connection: keep-alive` when true, `Connection: close` when false.
    pub keep_alive: bool,
}

impl core::fmt::Debug for RequestHead<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RequestHead")
            .field("method", &self.method)
            .field("prefix", &self.prefix)
            .field("path", &self.path)
            .field("host", &self.host)
            .field("user_agent", &self.user_agent)
            .field("bearer", &self.bearer.map(|_| Redacted))
            .field("body", &self.body)
            .field("keep_alive", &self.keep_alive)
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for RequestHead<'_> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "RequestHead {{ method: {}, prefix: {=str}, path: {=str}, host: {=str}, user_agent: {=str}, bearer: {=str}, body: {}, keep_alive: {=bool} }}",
            self.method,
            self.prefix,
            self.path,
            self.host,
            self.user_agent,
            if self.bearer.is_some() { "<redacted>" } else { "None" },
            self.body,
            self.keep_alive
        )
    }
}

/// Stands in for a secret in `Debug` output.
struct Redacted;

impl core::fmt::Debug for Redacted {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl RequestHead<'_> {
    /// Writes the whole head, query included, ending with the empty line. On error the
    /// cursor may hold a partial head that must not be sent.
    ///
    /// ```
    /// use benchlink_core::http::{Body, Cursor, Method, RequestHead};
    /// let head = RequestHead {
    ///     method: Method::Post,
    ///     prefix: "",
    ///     path: "/typecheck",
    ///     host: "h",
    ///     user_agent: "ua",
    ///     bearer: None,
    ///     body: Body::Sized { content_type: "text/plain", len: 3 },
    ///     keep_alive: false,
    /// };
    /// let mut buf = [0u8; 256];
    /// let mut out = Cursor::new(&mut buf);
    /// head.encode(&(), &mut out).unwrap();
    /// assert_eq!(
    ///     out.written(),
    ///     &b"POST /typecheck HTTP/1.1\r\nHost: h\r\nUser-Agent: ua\r\nAccept: */*\r\n\
    ///        Accept-Encoding: deflate, gzip\r\nConnection: close\r\nContent-Length: 3\r\n\
    ///        Content-Type: text/plain\r\n\r\n"[..]
    /// );
    /// ```
    pub fn encode(
        &self,
        query: &(impl EncodeQuery + ?Sized),
        out: &mut Cursor<'_>,
    ) -> Result<(), EncodeError> {
        let bad =
            |part: &str| part.as_bytes().first() != Some(&b'/') || !part.bytes().all(is_path_byte);
        if bad(self.path) || (!self.prefix.is_empty() && bad(self.prefix)) {
            return Err(EncodeError::InvalidValue { field: "path" });
        }
        out.push_all(&[
            self.method.as_str().as_bytes(),
            b" ",
            self.prefix.as_bytes(),
            self.path.as_bytes(),
        ])?;
        QueryWriter::write(out, query)?;
        out.push(b" HTTP/1.1\r\n")?;
        header(out, "Host", "host", self.host)?;
        header(out, "User-Agent", "user_agent", self.user_agent)?;
        out.push(b"Accept: */*\r\nAccept-Encoding: deflate, gzip\r\n")?;
        out.push(if self.keep_alive {
            b"Connection: keep-alive\r\n"
        } else {
            b"Connection: close\r\n"
        })?;
        match self.body {
            Body::Empty if self.method == Method::Post => content_length(out, 0)?,
            Body::Empty => {}
            Body::Sized { content_type, len } => {
                content_length(out, len)?;
                header(out, "Content-Type", "content_type", content_type)?;
            }
            Body::Multipart { boundary, len } => {
                content_length(out, len)?;
                out.push(b"Content-Type: ")?;
                boundary.content_type(out)?;
                out.push(b"\r\n")?;
            }
        }
        if let Some(token) = self.bearer {
            check_value("bearer", token)?;
            out.push_all(&[b"Authorization: Bearer ", token.as_bytes(), b"\r\n"])?;
        }
        out.push(b"\r\n")
    }
}

/// The head of a `CONNECT` request that asks an HTTPS proxy for a tunnel to `host:port`
/// (RFC 9110, 9.3.6). The proxy's answer is decoded with
/// [`ResponseDecoder`](super::ResponseDecoder) told [`Method::Connect`]; after a 2xx the
/// connection is a raw tunnel.
///
/// ```
/// use benchlink_core::http::{ConnectHead, Cursor};
/// let head = ConnectHead { host: "rtm.example.com", port: 443, proxy_authorization: Some("Basic dTpw") };
/// let mut buf = [0u8; 128];
/// let mut out = Cursor::new(&mut buf);
/// head.encode(&mut out).unwrap();
/// assert_eq!(
///     out.written(),
///     &b"CONNECT rtm.example.com:443 HTTP/1.1\r\nHost: rtm.example.com:443\r\n\
///        Proxy-Authorization: Basic dTpw\r\n\r\n"[..]
/// );
/// assert!(!format!("{head:?}").contains("dTpw"));
/// ```
#[derive(Clone, Copy)]
pub struct ConnectHead<'a> {
    /// Target host name or IP address; an IPv6 address is written in brackets.
    pub host: &'a str,
    /// Target port.
    pub port: u16,
    /// The whole `Proxy-Authorization` value (e.g. `Basic …`), a secret kept out of `Debug`.
    pub proxy_authorization: Option<&'a str>,
}

impl core::fmt::Debug for ConnectHead<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ConnectHead")
            .field("host", &self.host)
            .field("port", &self.port)
            .field(
                "proxy_authorization",
                &self.proxy_authorization.map(|_| Redacted),
            )
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for ConnectHead<'_> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "ConnectHead {{ host: {=str}, port: {=u16}, proxy_authorization: {=str} }}",
            self.host,
            self.port,
            if self.proxy_authorization.is_some() {
                "<redacted>"
            } else {
                "None"
            }
        )
    }
}

impl ConnectHead<'_> {
    /// Writes `CONNECT host:port HTTP/1.1`, the same authority as `Host`, and the optional
    /// `Proxy-Authorization`, ending with the empty line.
    ///
    /// ```
    /// use benchlink_core::http::{ConnectHead, Cursor};
    /// let mut buf = [0u8; 128];
    /// let mut out = Cursor::new(&mut buf);
    /// ConnectHead { host: "::1", port: 8443, proxy_authorization: None }.encode(&mut out).unwrap();
    /// assert_eq!(out.written(), b"CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n");
    /// ```
    pub fn encode(&self, out: &mut Cursor<'_>) -> Result<(), EncodeError> {
        check_host(self.host, false)?;
        out.push(b"CONNECT ")?;
        authority(out, self.host, Some(self.port))?;
        out.push(b" HTTP/1.1\r\nHost: ")?;
        authority(out, self.host, Some(self.port))?;
        out.push(b"\r\n")?;
        if let Some(auth) = self.proxy_authorization {
            header(out, "Proxy-Authorization", "proxy_authorization", auth)?;
        }
        out.push(b"\r\n")
    }
}

/// Refuses an empty host and one with bytes that could break the line it is written
/// on or change what it means (spaces, control bytes, `/`, brackets, `@`); with
/// `ascii_only`, any non-ASCII byte too (a WebSocket host must be in its ASCII form).
pub(crate) fn check_host(host: &str, ascii_only: bool) -> Result<(), EncodeError> {
    let bad = |b: u8| {
        b <= b' ' || b == 0x7F || (ascii_only && b > 0x7F) || matches!(b, b'/' | b'[' | b']' | b'@')
    };
    if host.is_empty() || host.bytes().any(bad) {
        return Err(EncodeError::InvalidValue { field: "host" });
    }
    Ok(())
}

/// `host` (an IPv6 address, the one kind with a colon, in brackets), then `:port` when
/// there is one: the one authority writer, for `CONNECT`, the benchmark requests' `Host`
/// and the WebSocket upgrade's.
pub(crate) fn authority(
    out: &mut Cursor<'_>,
    host: &str,
    port: Option<u16>,
) -> Result<(), EncodeError> {
    // A byte search: `str::contains` with a char links the char searcher.
    let ipv6 = host.bytes().any(|b| b == b':');
    if ipv6 {
        out.push(b"[")?;
    }
    out.push_str(host)?;
    if ipv6 {
        out.push(b"]")?;
    }
    if let Some(port) = port {
        out.push(b":")?;
        out.push_u64(u64::from(port))?;
    }
    Ok(())
}

/// Path bytes that cannot end the request line early: no space and no control byte.
fn is_path_byte(b: u8) -> bool {
    b > b' ' && b != 0x7F
}

/// Rejects bytes that would end the header line or that servers treat as errors: every
/// control byte except horizontal tab.
fn check_value(field: &'static str, value: &str) -> Result<(), EncodeError> {
    if value.bytes().any(|b| (b < b' ' && b != b'\t') || b == 0x7F) {
        return Err(EncodeError::InvalidValue { field });
    }
    Ok(())
}

pub(crate) fn header(
    out: &mut Cursor<'_>,
    name: &str,
    field: &'static str,
    value: &str,
) -> Result<(), EncodeError> {
    check_value(field, value)?;
    out.push_all(&[name.as_bytes(), b": ", value.as_bytes(), b"\r\n"])
}

fn content_length(out: &mut Cursor<'_>, len: u64) -> Result<(), EncodeError> {
    out.push(b"Content-Length: ")?;
    out.push_u64(len)?;
    out.push(b"\r\n")
}

#[cfg(test)]
mod tests;

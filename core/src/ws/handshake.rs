//! The opening handshake (RFC 6455, 4.1): the upgrade request to the messaging service
//! and the checks on the server's answer.
//!
//! The request goes to `<endpoint path>/v2?appkey=<appkey>`. Path rule: one trailing `/`
//! is removed (C SDK), then `/v2` is appended unless the path already ends in `/v2` (so
//! `wss://h`, `wss://h/` and `wss://h/v2` all give `/v2`, as in the JS SDK). Other version
//! suffixes are not special: `/v1` gives `/v1/v2`, as in the C SDK — benchlink speaks v2
//! only and does not guess what another version segment meant. The appkey is
//! percent-encoded (the Python SDK appends it raw); an endpoint with a query string is
//! refused by [`Endpoint::parse`] and by the writer.

use super::b64;
use super::Endpoint;
use crate::http::{authority, check_host, header, list_has, query, Cursor, EncodeError, Head};

/// The GUID RFC 6455 appends to the key before hashing it.
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The `Sec-WebSocket-Key`: 16 random bytes in base64. Core has no RNG, so the adapter
/// passes the bytes in; a fresh key per connection keeps caching proxies from replaying an
/// old upgrade.
///
/// ```
/// use benchlink_core::ws::Key;
/// let key = Key::new(*b"the sample nonce");
/// assert_eq!(key.as_str(), "dGhlIHNhbXBsZSBub25jZQ==");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Key {
    text: [u8; 24],
}

impl Key {
    /// The key for 16 caller-provided random bytes.
    pub fn new(nonce: [u8; 16]) -> Key {
        let mut text = [0u8; 24];
        // 16 bytes are always exactly 24 base64 characters.
        b64::encode(&nonce, &mut text);
        Key { text }
    }

    /// A key as a server receives it (24 characters of base64), so that a server — a
    /// test double, a local hub — computes its accept value with this same code.
    /// `None` when it is not 24 base64 characters.
    ///
    /// ```
    /// use benchlink_core::ws::Key;
    /// let key = Key::parse(b"dGhlIHNhbXBsZSBub25jZQ==").unwrap();
    /// assert_eq!(key.accept().as_str(), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    /// assert!(Key::parse(b"short").is_none());
    /// ```
    pub fn parse(text: &[u8]) -> Option<Key> {
        let text: [u8; 24] = text.try_into().ok()?;
        let base64 = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=');
        text.iter().all(base64).then_some(Key { text })
    }

    /// The key as sent in the request.
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.text).unwrap_or_default()
    }

    /// The `Sec-WebSocket-Accept` value the server must answer with:
    /// base64(SHA-1(key + GUID)).
    ///
    /// ```
    /// use benchlink_core::ws::Key;
    /// let key = Key::new(*b"the sample nonce");
    /// assert_eq!(key.accept().as_str(), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    /// ```
    pub fn accept(&self) -> Accept {
        let digest = super::sha1::digest(&[&self.text, GUID]);
        let mut text = [0u8; 28];
        // 20 bytes are always exactly 28 base64 characters.
        b64::encode(&digest, &mut text);
        Accept { text }
    }
}

/// A `Sec-WebSocket-Accept` value (28 base64 characters), from [`Key::accept`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Accept {
    text: [u8; 28],
}

impl Accept {
    /// The value as it appears in the header.
    ///
    /// ```
    /// use benchlink_core::ws::Key;
    /// assert_eq!(Key::new([0; 16]).accept().as_str().len(), 28);
    /// ```
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.text).unwrap_or_default()
    }
}

/// The upgrade request to the messaging service.
///
/// Headers come out in this order: `Host` (`host[:port]`, the port left out when it is the
/// scheme's default, an IPv6 address in brackets), `Upgrade: websocket`,
/// `Connection: Upgrade`, `Sec-WebSocket-Key`, `Sec-WebSocket-Version: 13`, then `Origin`,
/// `Sec-WebSocket-Protocol` and `User-Agent` when given.
///
/// ```
/// use benchlink_core::http::Cursor;
/// use benchlink_core::ws::{Endpoint, Key, UpgradeRequest};
/// let key = Key::new(*b"the sample nonce");
/// let request = UpgradeRequest {
///     endpoint: Endpoint::parse("wss://rtm.example.com/").unwrap(),
///     appkey: "AbC 12",
///     key: &key,
///     origin: None,
///     protocol: None,
///     user_agent: Some("benchlink/0.1"),
/// };
/// let mut buf = [0u8; 512];
/// let mut out = Cursor::new(&mut buf);
/// request.encode(&mut out).unwrap();
/// assert_eq!(
///     out.written(),
///     &b"GET /v2?appkey=AbC+12 HTTP/1.1\r\nHost: rtm.example.com\r\nUpgrade: websocket\r\n\
///        Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
///        Sec-WebSocket-Version: 13\r\nUser-Agent: benchlink/0.1\r\n\r\n"[..]
/// );
/// ```
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UpgradeRequest<'a> {
    /// Where to connect; its path is the base of the request path.
    pub endpoint: Endpoint<'a>,
    /// The application key, percent-encoded into the query.
    pub appkey: &'a str,
    /// This connection's key; keep it to check the answer.
    pub key: &'a Key,
    /// An `Origin` header, for servers that check it (the Python SDK sends
    /// `scheme://host[:port]`).
    pub origin: Option<&'a str>,
    /// A `Sec-WebSocket-Protocol` to ask for, e.g. `cbor` (the service's binary
    /// encoding of the same PDUs).
    pub protocol: Option<&'a str>,
    /// A `User-Agent` header.
    pub user_agent: Option<&'a str>,
}

impl UpgradeRequest<'_> {
    /// Writes the whole request head, ending with the empty line. Refuses a path with a
    /// query, fragment, space or control byte, a host that could break the `Host` line,
    /// and header values with control bytes ([`EncodeError::InvalidValue`]). On error the
    /// cursor may hold a partial request that must not be sent.
    ///
    /// ```
    /// use benchlink_core::http::{Cursor, EncodeError};
    /// use benchlink_core::ws::{Endpoint, Key, UpgradeRequest};
    /// let key = Key::new([0; 16]);
    /// let endpoint = Endpoint::parse("ws://[::1]:8080/rtm/v2/").unwrap();
    /// let mut request = UpgradeRequest { endpoint, appkey: "k", key: &key, origin: None, protocol: Some("cbor"), user_agent: None };
    /// let mut buf = [0u8; 512];
    /// let mut out = Cursor::new(&mut buf);
    /// request.encode(&mut out).unwrap();
    /// assert!(out.written().starts_with(b"GET /rtm/v2?appkey=k HTTP/1.1\r\nHost: [::1]:8080\r\n"));
    /// assert!(out.written().ends_with(b"Sec-WebSocket-Protocol: cbor\r\n\r\n"));
    ///
    /// request.endpoint.path = "/a?b";
    /// let mut out = Cursor::new(&mut buf);
    /// assert_eq!(request.encode(&mut out), Err(EncodeError::InvalidValue { field: "path" }));
    /// ```
    pub fn encode(&self, out: &mut Cursor<'_>) -> Result<(), EncodeError> {
        let Endpoint {
            host, port, path, ..
        } = self.endpoint;
        let path_ok = matches!(path.as_bytes().first(), None | Some(b'/'))
            && path
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'?' && b != b'#');
        if !path_ok {
            return Err(EncodeError::InvalidValue { field: "path" });
        }
        check_host(host, true)?;
        let base = path.strip_suffix("/").unwrap_or(path);
        out.push_all(&[b"GET ", base.as_bytes()])?;
        if !base.ends_with("/v2") {
            out.push(b"/v2")?;
        }
        out.push(b"?appkey=")?;
        query::encode(out, self.appkey)?;
        out.push(b" HTTP/1.1\r\nHost: ")?;
        let port = Some(port).filter(|&p| p != self.endpoint.default_port());
        authority(out, host, port)?;
        out.push_all(&[
            b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ",
            &self.key.text,
            b"\r\nSec-WebSocket-Version: 13\r\n",
        ])?;
        if let Some(origin) = self.origin {
            header(out, "Origin", "origin", origin)?;
        }
        if let Some(protocol) = self.protocol {
            header(out, "Sec-WebSocket-Protocol", "protocol", protocol)?;
        }
        if let Some(user_agent) = self.user_agent {
            header(out, "User-Agent", "user_agent", user_agent)?;
        }
        out.push(b"\r\n")
    }
}

/// Why the server's answer to the upgrade request was refused (the client's checks of
/// RFC 6455, 4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum HandshakeError {
    /// Not `101 Switching Protocols`. The messaging service answers an unknown appkey this
    /// way, so this is usually a configuration error, not a network one.
    Status {
        /// The status code received.
        status: u16,
    },
    /// No `Upgrade` header with the token `websocket`.
    UpgradeHeader,
    /// No `Connection` header with the token `upgrade`.
    ConnectionHeader,
    /// No `Sec-WebSocket-Accept` header.
    MissingAccept,
    /// A `Sec-WebSocket-Accept` that does not match the key: the answer is not for this
    /// request (a caching proxy, or not a WebSocket server).
    BadAccept,
    /// A `Sec-WebSocket-Protocol` other than the one requested (or any, when none was).
    UnexpectedProtocol,
    /// A `Sec-WebSocket-Extensions` header: benchlink requests no extension, so the
    /// server may not select one (frames would use RSV bits it cannot decode).
    UnexpectedExtension,
}

impl core::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            HandshakeError::Status { status } => {
                write!(f, "upgrade refused with status {status} (expected 101)")
            }
            HandshakeError::UpgradeHeader => f.write_str("response lacks Upgrade: websocket"),
            HandshakeError::ConnectionHeader => f.write_str("response lacks Connection: upgrade"),
            HandshakeError::MissingAccept => f.write_str("response lacks Sec-WebSocket-Accept"),
            HandshakeError::BadAccept => {
                f.write_str("Sec-WebSocket-Accept does not match the key sent")
            }
            HandshakeError::UnexpectedProtocol => {
                f.write_str("server selected a subprotocol that was not requested")
            }
            HandshakeError::UnexpectedExtension => {
                f.write_str("server selected an extension that was not requested")
            }
        }
    }
}

impl core::error::Error for HandshakeError {}

/// Checks the response head to an [`UpgradeRequest`] sent with `key` and `protocol`:
/// status 101, `Upgrade: websocket`, `Connection: upgrade` (tokens, case-insensitive), the
/// accept value, and no subprotocol or extension that was not asked for. Returns the
/// subprotocol the server selected (`None` if it selected none; whether that is acceptable
/// is the caller's decision: the Python SDK insists on `cbor` when it asked for it).
///
/// The head comes from [`ResponseDecoder`](crate::http::ResponseDecoder), which treats a
/// 101 as bodiless: the bytes after the head in the same read are the first WebSocket
/// bytes and go to the [`Session`](super::Session) (the C SDK corrupts them).
///
/// ```
/// use benchlink_core::http::{Event, Limits, ResponseDecoder};
/// use benchlink_core::ws::{check_response, HandshakeError, Key};
/// let key = Key::new(*b"the sample nonce");
/// let mut head_buf = [0u8; 512];
/// let mut decoder: ResponseDecoder = ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
/// let (_, event) = decoder.decode(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
///     Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n").unwrap();
/// let Event::Head(head) = event else { unreachable!() };
/// assert_eq!(check_response(&head, &key, None), Ok(None));
/// assert_eq!(check_response(&head, &Key::new([0; 16]), None), Err(HandshakeError::BadAccept));
/// ```
pub fn check_response<'s>(
    head: &Head<'s>,
    key: &Key,
    protocol: Option<&str>,
) -> Result<Option<&'s str>, HandshakeError> {
    if head.status != 101 {
        return Err(HandshakeError::Status {
            status: head.status,
        });
    }
    // One pass over the headers; the first `Sec-WebSocket-Accept` and
    // `Sec-WebSocket-Protocol` count, as with `Head::header`.
    let (mut upgrade, mut connection, mut extension) = (false, false, false);
    let (mut accept, mut selected) = (None, None);
    for (name, value) in head.headers() {
        let is = |known: &str| name.eq_ignore_ascii_case(known);
        if is("upgrade") {
            upgrade |= list_has(value, b"websocket");
        } else if is("connection") {
            connection |= list_has(value, b"upgrade");
        } else if is("sec-websocket-accept") {
            accept = accept.or(Some(value));
        } else if is("sec-websocket-protocol") {
            selected = selected.or(Some(value));
        } else if is("sec-websocket-extensions") {
            extension |= !value.is_empty();
        }
    }
    if !upgrade {
        return Err(HandshakeError::UpgradeHeader);
    }
    if !connection {
        return Err(HandshakeError::ConnectionHeader);
    }
    let accept = accept.ok_or(HandshakeError::MissingAccept)?;
    if accept != key.accept().text {
        return Err(HandshakeError::BadAccept);
    }
    if extension {
        return Err(HandshakeError::UnexpectedExtension);
    }
    match selected {
        None => Ok(None),
        Some(selected) => match (protocol, core::str::from_utf8(selected)) {
            // Compared case-insensitively, as the Python SDK does (`CBOR` selects `cbor`).
            (Some(asked), Ok(selected)) if asked.eq_ignore_ascii_case(selected) => {
                Ok(Some(selected))
            }
            _ => Err(HandshakeError::UnexpectedProtocol),
        },
    }
}

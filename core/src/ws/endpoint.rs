//! `ws://` and `wss://` endpoint URLs (no other scheme): where to open TCP, whether to
//! wrap it in TLS, and the path the upgrade request starts from.

/// Why an endpoint URL was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum UrlError {
    /// A scheme other than `ws://` or `wss://` (the messaging service speaks nothing else).
    UnsupportedScheme,
    /// Nothing between the scheme and the path.
    MissingHost,
    /// A host with characters outside letters, digits and `-._~` (an internationalized
    /// name must be given in its ASCII form), or a malformed bracketed IPv6 address.
    InvalidHost,
    /// A port that is not a decimal number in `1..=65535`.
    InvalidPort,
    /// `user:password@` before the host: never sent, so refused rather than dropped.
    UserInfo,
    /// A query string. The upgrade request appends `?appkey=…` itself, and merging two
    /// queries has no single right answer (the Python SDK builds a broken URL), so it
    /// is refused.
    Query,
    /// A `#fragment`, which has no meaning in a WebSocket URL (RFC 6455, 3).
    Fragment,
    /// A path byte that is not printable ASCII (spaces and non-ASCII must be
    /// percent-encoded).
    InvalidPath,
}

impl core::fmt::Display for UrlError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            UrlError::UnsupportedScheme => "endpoint scheme must be ws:// or wss://",
            UrlError::MissingHost => "endpoint has no host",
            UrlError::InvalidHost => "endpoint host is invalid",
            UrlError::InvalidPort => "endpoint port is not in 1..=65535",
            UrlError::UserInfo => "endpoint must not contain user information",
            UrlError::Query => "endpoint must not contain a query string",
            UrlError::Fragment => "endpoint must not contain a fragment",
            UrlError::InvalidPath => "endpoint path has characters that must be percent-encoded",
        })
    }
}

impl core::error::Error for UrlError {}

/// A parsed `ws://host[:port][/path]` or `wss://…` URL, borrowing from it. The adapters
/// open TCP to (`host`, `port`), wrap it in TLS with SNI `host` when `tls`, and write the
/// upgrade request with [`UpgradeRequest`](super::UpgradeRequest).
///
/// ```
/// use benchlink_core::ws::Endpoint;
/// let e = Endpoint::parse("wss://rtm.example.com/sdk").unwrap();
/// assert_eq!((e.host, e.port, e.tls, e.path), ("rtm.example.com", 443, true, "/sdk"));
/// let e = Endpoint::parse("WS://[::1]:8080").unwrap();
/// assert_eq!((e.host, e.port, e.tls, e.path), ("::1", 8080, false, ""));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Endpoint<'a> {
    /// Host name or IP address; an IPv6 address without its brackets.
    pub host: &'a str,
    /// TCP port: the one given, else 80 for `ws://` and 443 for `wss://`.
    pub port: u16,
    /// `wss://`: TLS over TCP.
    pub tls: bool,
    /// The path, empty or starting with `/`, without query or fragment.
    pub path: &'a str,
}

impl<'a> Endpoint<'a> {
    /// Parses an endpoint URL. The scheme is case-insensitive; user information, a query
    /// string and a fragment are refused (see [`UrlError`]).
    ///
    /// ```
    /// use benchlink_core::ws::{Endpoint, UrlError};
    /// assert_eq!(Endpoint::parse("http://h").unwrap_err(), UrlError::UnsupportedScheme);
    /// assert_eq!(Endpoint::parse("ws://h/?appkey=x").unwrap_err(), UrlError::Query);
    /// assert_eq!(Endpoint::parse("ws://h:0").unwrap_err(), UrlError::InvalidPort);
    /// assert_eq!(Endpoint::parse("ws://h:80/").unwrap().path, "/");
    /// ```
    pub fn parse(url: &'a str) -> Result<Self, UrlError> {
        let (tls, rest) = if let Some(rest) = strip_scheme(url, "ws://") {
            (false, rest)
        } else if let Some(rest) = strip_scheme(url, "wss://") {
            (true, rest)
        } else {
            return Err(UrlError::UnsupportedScheme);
        };
        let split = find(rest, |b| matches!(b, b'/' | b'?' | b'#')).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at_checked(split).unwrap_or_default();
        if find(authority, |b| b == b'@').is_some() {
            return Err(UrlError::UserInfo);
        }
        let (host, port) = split_authority(authority)?;
        let port = match port {
            None | Some("") => {
                if tls {
                    443
                } else {
                    80
                }
            }
            Some(digits) => parse_port(digits)?,
        };
        let path_end = find(tail, |b| b == b'?' || b == b'#').unwrap_or(tail.len());
        match tail.as_bytes().get(path_end) {
            Some(b'?') => return Err(UrlError::Query),
            Some(_) => return Err(UrlError::Fragment),
            None => {}
        }
        if !tail.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(UrlError::InvalidPath);
        }
        Ok(Endpoint {
            host,
            port,
            tls,
            path: tail,
        })
    }

    /// The scheme's default port: 443 with TLS, else 80. `Host` omits the port when it is
    /// this one.
    ///
    /// ```
    /// use benchlink_core::ws::Endpoint;
    /// assert_eq!(Endpoint::parse("wss://h:8443").unwrap().default_port(), 443);
    /// ```
    pub const fn default_port(&self) -> u16 {
        if self.tls {
            443
        } else {
            80
        }
    }
}

fn strip_scheme<'u>(url: &'u str, scheme: &str) -> Option<&'u str> {
    let (head, rest) = url.split_at_checked(scheme.len())?;
    head.eq_ignore_ascii_case(scheme).then_some(rest)
}

/// Splits `host[:port]` or `[v6][:port]`; the port is `None` when absent.
fn split_authority(authority: &str) -> Result<(&str, Option<&str>), UrlError> {
    if authority.is_empty() {
        return Err(UrlError::MissingHost);
    }
    if let Some(bracketed) = authority.strip_prefix('[') {
        let close = find(bracketed, |b| b == b']').ok_or(UrlError::InvalidHost)?;
        let (host, after) = bracketed.split_at_checked(close).unwrap_or_default();
        let after = after.get(1..).unwrap_or_default();
        let ipv6_byte = |b: u8| b.is_ascii_hexdigit() || b == b':' || b == b'.';
        if find(host, |b| b == b':').is_none() || !host.bytes().all(ipv6_byte) {
            return Err(UrlError::InvalidHost);
        }
        return match after {
            "" => Ok((host, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((host, Some(port))),
                None => Err(UrlError::InvalidHost),
            },
        };
    }
    let (host, port) = match authority.bytes().rposition(|b| b == b':') {
        Some(colon) => {
            let (host, port) = authority.split_at_checked(colon).unwrap_or_default();
            (host, port.get(1..))
        }
        None => (authority, None),
    };
    if host.is_empty() {
        return Err(UrlError::MissingHost);
    }
    let host_byte = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
    if !host.bytes().all(host_byte) {
        return Err(UrlError::InvalidHost);
    }
    Ok((host, port))
}

fn parse_port(digits: &str) -> Result<u16, UrlError> {
    if digits.len() > 5 {
        return Err(UrlError::InvalidPort);
    }
    let port = crate::http::parse_decimal(digits.as_bytes()).unwrap_or_default();
    u16::try_from(port)
        .ok()
        .filter(|&p| p != 0)
        .ok_or(UrlError::InvalidPort)
}

/// The first byte that `is` picks out: the URL's delimiters are ASCII, so a byte search
/// finds them (`str::find` with a char pattern links the UTF-8 char searcher).
fn find(text: &str, is: impl Fn(u8) -> bool) -> Option<usize> {
    text.bytes().position(is)
}

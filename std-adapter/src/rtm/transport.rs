//! Opening the transport of an RTM connection: TCP (through an HTTPS proxy's `CONNECT`
//! tunnel when one is configured), and TLS for `wss://`. Everything above the bytes (the
//! upgrade, frames, pings, close) is the core's link, the same for std and embassy.

use std::fmt;
use std::io;
use std::time::Duration;

use benchlink_core::http::DecodeError;
use benchlink_core::rtm as core_rtm;
use benchlink_core::ws::UrlError;

use crate::net::{connect_tcp, tunnel, Stream, Tls, TlsOptions, TunnelError};

/// How to reach the service.
#[derive(Debug, Clone)]
pub struct TransportOptions {
    /// `ws://host[:port][/path]` or `wss://…`.
    pub endpoint: String,
    /// The application key (percent-encoded into the URL by the core).
    pub appkey: String,
    /// An HTTPS proxy `(host, port)` to tunnel through with `CONNECT` (no proxy
    /// authentication, as in the reference SDK).
    pub https_proxy: Option<(String, u16)>,
    /// TLS options for `wss://` (verification on by default).
    pub tls: TlsOptions,
    /// Limit for the whole connect: DNS, TCP, the proxy tunnel, TLS and the WebSocket
    /// upgrade (the link's connect timeout; each blocking step is also bounded by it).
    pub connect_timeout: Duration,
    /// `TCP_NODELAY` (on by default: PDUs are small and latency matters; the reference
    /// SDK leaves Nagle on).
    pub nodelay: bool,
    /// The largest message accepted from the server.
    pub max_message_size: usize,
}

impl TransportOptions {
    /// Options with the defaults: no proxy, verified TLS, 10 s connect timeout,
    /// `TCP_NODELAY`, 16 MiB messages.
    ///
    /// ```
    /// let o = benchlink_std::rtm::TransportOptions::new("ws://127.0.0.1:8080", "key");
    /// assert!(o.https_proxy.is_none());
    /// ```
    pub fn new(endpoint: impl Into<String>, appkey: impl Into<String>) -> TransportOptions {
        TransportOptions {
            endpoint: endpoint.into(),
            appkey: appkey.into(),
            https_proxy: None,
            tls: TlsOptions::default(),
            connect_timeout: Duration::from_secs(10),
            nodelay: true,
            max_message_size: 16 << 20,
        }
    }
}

/// Why a connection attempt failed (kept as the client's `last_connecting_error`).
#[derive(Debug)]
pub enum ConnectError {
    /// The endpoint URL is not `ws://` / `wss://` or is malformed.
    Url(UrlError),
    /// DNS, TCP, TLS (certificate verification included) or a socket error.
    Io(io::Error),
    /// The proxy did not answer `CONNECT` with 200.
    Proxy {
        /// The proxy's status code.
        status: u16,
    },
    /// The response to the upgrade or the `CONNECT` was not valid HTTP.
    Http(DecodeError),
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Url(e) => write!(f, "bad endpoint: {e}"),
            ConnectError::Io(e) => write!(f, "connection failed: {e}"),
            ConnectError::Proxy { status } => write!(f, "proxy answered CONNECT with {status}"),
            ConnectError::Http(e) => write!(f, "bad HTTP response: {e}"),
        }
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConnectError::Url(e) => Some(e),
            ConnectError::Io(e) => Some(e),
            ConnectError::Http(e) => Some(e),
            ConnectError::Proxy { .. } => None,
        }
    }
}

impl ConnectError {
    /// The client state machine's code for this failure.
    pub(crate) fn code(&self) -> core_rtm::ConnectError {
        match self {
            ConnectError::Url(_) => core_rtm::ConnectError::Protocol,
            ConnectError::Io(io) if io.kind() == io::ErrorKind::TimedOut => {
                core_rtm::ConnectError::Timeout
            }
            ConnectError::Io(io) => core_rtm::ConnectError::Io {
                code: io.raw_os_error().unwrap_or(0),
            },
            ConnectError::Proxy { status } => core_rtm::ConnectError::Proxy { status: *status },
            ConnectError::Http(_) => core_rtm::ConnectError::Protocol,
        }
    }
}

impl From<TunnelError> for ConnectError {
    fn from(e: TunnelError) -> ConnectError {
        match e {
            TunnelError::Io(e) => ConnectError::Io(e),
            TunnelError::Refused { status } => ConnectError::Proxy { status },
            TunnelError::Http(e) => ConnectError::Http(e),
        }
    }
}

impl From<io::Error> for ConnectError {
    fn from(e: io::Error) -> ConnectError {
        ConnectError::Io(e)
    }
}

/// Opens the transport to `host:port` for the link: TCP, through the HTTPS proxy's
/// `CONNECT` tunnel when one is configured, then TLS (handshake completed) when `tls`.
/// Blocks for at most about `connect_timeout` per step. The WebSocket upgrade is the
/// link's (`benchlink_core::rtm::Link`), over the returned stream.
///
/// ```no_run
/// use benchlink_std::rtm::{open, TransportOptions};
/// let stream = open("127.0.0.1", 8080, false, &TransportOptions::new("ws://127.0.0.1:8080", "key"))?;
/// # Ok::<(), benchlink_std::rtm::ConnectError>(())
/// ```
pub fn open(
    host: &str,
    port: u16,
    tls: bool,
    options: &TransportOptions,
) -> Result<Stream, ConnectError> {
    let bracketed = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    let timeout = options.connect_timeout;
    let tcp = match &options.https_proxy {
        None => connect_tcp(&bracketed, port, timeout)?,
        Some((proxy_host, proxy_port)) => tunnel(proxy_host, *proxy_port, host, port, timeout)?,
    };
    tcp.set_read_timeout(Some(timeout))?;
    tcp.set_write_timeout(Some(timeout))?;
    let tls = if tls {
        Some(Tls::new(&options.tls)?)
    } else {
        None
    };
    let mut stream = Stream::over(tcp, host, tls.as_ref())?;
    stream.complete_handshake()?;
    stream.tcp().set_nodelay(options.nodelay)?;
    // From here on the socket is driven without blocking.
    stream.tcp().set_read_timeout(None)?;
    stream.tcp().set_write_timeout(None)?;
    Ok(stream)
}

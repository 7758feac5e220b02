//! The byte pipe both clients run over: any `embedded_io_async::Read + Write` that can
//! (re)connect to a host and port, and its embassy-net implementation, [`TcpTransport`].
//!
//! The clients own one transport each and reconnect it in place (keep-alive reuse for the
//! benchmark server, reconnect with backoff for messaging), so the trait is "a connection
//! slot" rather than "a connector that returns connections": that is what lets a
//! `TcpSocket` and its buffers live in one static and be reused forever.

#[cfg(feature = "dns")]
use embassy_net::dns::DnsQueryType;
use embassy_net::tcp::{self, TcpSocket};
use embassy_net::{IpAddress, IpEndpoint, Stack};
use embassy_time::{with_timeout, Duration};
use embedded_io_async::{ErrorType, Read, Write};

/// Why a connection could not be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ConnectError {
    /// The host name did not resolve (no DNS server, no answer, or no IPv4 address; or,
    /// without the `dns` feature, the host is not an IPv4 literal).
    Dns,
    /// The peer refused the connection (RST).
    Refused,
    /// No answer in time.
    TimedOut,
    /// The stack has no route to the host (no address or gateway configured yet).
    NoRoute,
    /// The socket could not be reset for a new connection.
    InvalidState,
    /// The endpoint asks for TLS (`https://`, `wss://`) and the transport has none
    /// (feature `tls`: `tls::TlsTransport`).
    TlsUnsupported,
    /// The TLS handshake failed or the server's certificate was refused, and why.
    #[cfg(feature = "tls")]
    Tls(crate::tls::TlsRefusal),
}

impl ConnectError {
    /// What went wrong, in words (a TLS refusal's reason), without `core::fmt`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ConnectError::Dns => "host name did not resolve",
            ConnectError::Refused => "connection refused",
            ConnectError::TimedOut => "connect timed out",
            ConnectError::NoRoute => "no route to host",
            ConnectError::InvalidState => "socket not reusable",
            ConnectError::TlsUnsupported => "TLS endpoints are not supported by this transport",
            #[cfg(feature = "tls")]
            ConnectError::Tls(why) => why.as_str(),
        }
    }
}

impl core::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl core::error::Error for ConnectError {}

/// A reconnectable byte stream: what [`BenchClient`](crate::bench::BenchClient) and
/// [`Messaging::run`](crate::rtm::Messaging::run) drive.
///
/// `connect`, `read` and `write` must be cancel-safe (dropping a pending read loses no
/// bytes, a dropped write wrote nothing, a dropped connect leaves a transport that the
/// next `connect` or `close` resets): the messaging runner races them against the
/// link's deadlines and the application's calls. embassy-net's `TcpSocket` is.
///
/// `async fn` in a public trait has no `Send` bound on its futures; that is deliberate:
/// embassy executors run tasks on one core and never move them between threads.
#[allow(async_fn_in_trait)]
pub trait Transport: Read + Write {
    /// Opens a connection to `host:port` (a name is resolved first), dropping any previous
    /// one.
    async fn connect(&mut self, host: &str, port: u16) -> Result<(), ConnectError>;

    /// Opens a TLS connection to `host:port` (`https://`, `wss://`), the server's
    /// certificate checked for `host`. The default: [`ConnectError::TlsUnsupported`].
    async fn connect_tls(&mut self, host: &str, port: u16) -> Result<(), ConnectError> {
        let _ = (host, port);
        Err(ConnectError::TlsUnsupported)
    }

    /// Closes the connection (gracefully when the peer cooperates) and leaves the
    /// transport ready for the next [`connect`](Transport::connect).
    async fn close(&mut self);

    /// True when a kept-alive connection cannot carry another request: the peer closed
    /// it or sent bytes nobody asked for. Checked before reusing a connection, so that a
    /// `POST` is never sent on a connection the server already gave up. The default
    /// (`false`) makes the clients find out when they use it.
    fn peer_closed(&self) -> bool {
        false
    }

    /// True when received bytes are waiting to be read now. A hint: the messaging runner
    /// then reads before writing more, so that a peer sending and receiving at once is
    /// served both ways. The default (`false`) writes first.
    fn readable(&self) -> bool {
        false
    }

    /// Writes what `fill` puts at the start of the buffer it is given (it returns how
    /// many bytes, at most the buffer's length), once the transport can take some; how
    /// many went out. Cancel-safe like `write`: a dropped call wrote nothing, and `fill`
    /// only copies, so the caller's bytes are as they were.
    ///
    /// The messaging runner writes the link's frames through it. [`TcpTransport`] gives
    /// `fill` the free part of the socket's send buffer, so a PDU goes from the outbox
    /// record it was encoded in straight into the socket; this default fills a 256-byte
    /// buffer on the stack and writes that (a copy more, fine for a test transport).
    async fn write_from(
        &mut self,
        fill: impl FnOnce(&mut [u8]) -> usize,
    ) -> Result<usize, Self::Error> {
        let mut buf = [0u8; 256];
        let n = fill(&mut buf).min(buf.len());
        if n == 0 {
            return Ok(0);
        }
        self.write(buf.get(..n).unwrap_or_default()).await
    }
}

/// How long [`TcpTransport::close`] waits for the FIN exchange before resetting.
const CLOSE_GRACE: Duration = Duration::from_millis(500);

/// Opens `host:port` on `transport`, with TLS when the URL asked for it (`https://`,
/// `wss://`): the one place both clients make that choice.
pub(crate) async fn open<T: Transport>(
    transport: &mut T,
    host: &str,
    port: u16,
    tls: bool,
) -> Result<(), ConnectError> {
    if tls {
        transport.connect_tls(host, port).await
    } else {
        transport.connect(host, port).await
    }
}

/// [`Transport`] over an embassy-net TCP socket, with names resolved by the stack's DNS
/// client (`stack.dns_query`; an IP literal skips the query; without the `dns` feature,
/// only IPv4 literals connect).
pub struct TcpTransport<'a> {
    /// For its DNS client.
    #[cfg(feature = "dns")]
    stack: Stack<'a>,
    socket: TcpSocket<'a>,
    /// Names with a fixed address, looked up before anything else (feature `tls`).
    #[cfg(feature = "tls")]
    hosts: &'a [(&'a str, IpAddress)],
}

impl core::fmt::Debug for TcpTransport<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TcpTransport")
            .field("state", &self.socket.state())
            .finish()
    }
}

impl<'a> TcpTransport<'a> {
    /// A transport on `stack` whose socket uses `rx_buffer` and `tx_buffer` (the TCP
    /// windows: 1–4 KiB each is plenty for both protocols).
    pub fn new(stack: Stack<'a>, rx_buffer: &'a mut [u8], tx_buffer: &'a mut [u8]) -> Self {
        TcpTransport {
            #[cfg(feature = "dns")]
            stack,
            socket: TcpSocket::new(stack, rx_buffer, tx_buffer),
            #[cfg(feature = "tls")]
            hosts: &[],
        }
    }

    /// Fixed addresses for names (a device's `/etc/hosts`), looked up before the DNS
    /// client or an IP literal's own address: the name stays what TLS checks the
    /// certificate against. QEMU's board maps `localhost` to the host that forwards to
    /// the host machine's loopback, so a certificate for `localhost` is checked as such.
    /// Feature `tls`: without TLS a connection can be given the address itself, and the
    /// plain image does not carry the lookup.
    #[cfg(feature = "tls")]
    pub fn with_hosts(mut self, hosts: &'a [(&'a str, IpAddress)]) -> Self {
        self.hosts = hosts;
        self
    }

    /// `host` in the fixed table.
    #[cfg(feature = "tls")]
    fn fixed(&self, host: &str) -> Option<IpAddress> {
        self.hosts
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(host))
            .map(|(_, addr)| *addr)
    }

    /// The socket, to tune it (`set_keep_alive`, `set_timeout`, `set_nagle_enabled`).
    pub fn socket_mut(&mut self) -> &mut TcpSocket<'a> {
        &mut self.socket
    }

    /// Bytes the socket's send buffer can take now.
    pub fn send_room(&self) -> usize {
        self.socket.send_capacity() - self.socket.send_queue()
    }

    /// The size of the socket's send buffer.
    pub fn send_capacity(&self) -> usize {
        self.socket.send_capacity()
    }

    /// True once the peer ended its side of the stream (FIN or reset).
    pub fn finished(&self) -> bool {
        !self.socket.may_recv()
    }

    /// `host`'s address: an IP literal as it is, a name through the stack's DNS client.
    #[cfg(feature = "dns")]
    async fn resolve(&self, host: &str) -> Result<IpAddress, ConnectError> {
        let addrs = self
            .stack
            .dns_query(host, DnsQueryType::A)
            .await
            .map_err(|_| ConnectError::Dns)?;
        addrs.first().copied().ok_or(ConnectError::Dns)
    }

    /// `host`'s address: without the `dns` feature, only an IPv4 literal has one.
    #[cfg(not(feature = "dns"))]
    async fn resolve(&self, host: &str) -> Result<IpAddress, ConnectError> {
        host.parse::<core::net::Ipv4Addr>()
            .map(IpAddress::Ipv4)
            .map_err(|_| ConnectError::Dns)
    }

    /// Resets the socket to `Closed` so that `connect` accepts it again.
    async fn reset(&mut self) {
        if self.socket.state() != tcp::State::Closed {
            self.socket.abort();
            let _ = with_timeout(CLOSE_GRACE, self.socket.flush()).await;
        }
    }
}

impl ErrorType for TcpTransport<'_> {
    type Error = tcp::Error;
}

impl Read for TcpTransport<'_> {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
        self.socket.read(buf).await
    }
}

impl Write for TcpTransport<'_> {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
        self.socket.write(buf).await
    }

    async fn flush(&mut self) -> Result<(), Self::Error> {
        self.socket.flush().await
    }
}

impl Transport for TcpTransport<'_> {
    async fn connect(&mut self, host: &str, port: u16) -> Result<(), ConnectError> {
        self.reset().await;
        #[cfg(feature = "tls")]
        let fixed = self.fixed(host);
        #[cfg(not(feature = "tls"))]
        let fixed = None;
        let addr = match fixed {
            Some(addr) => addr,
            None => self.resolve(host).await?,
        };
        self.socket
            .connect(IpEndpoint::new(addr, port))
            .await
            .map_err(|e| match e {
                tcp::ConnectError::InvalidState => ConnectError::InvalidState,
                tcp::ConnectError::ConnectionReset => ConnectError::Refused,
                tcp::ConnectError::TimedOut => ConnectError::TimedOut,
                tcp::ConnectError::NoRoute => ConnectError::NoRoute,
            })
    }

    async fn close(&mut self) {
        if self.socket.state() == tcp::State::Closed {
            return;
        }
        // FIN after the queued data; then a reset, so the socket is reusable at once
        // whatever the peer does (the clients never read after closing).
        self.socket.close();
        let _ = with_timeout(CLOSE_GRACE, self.socket.flush()).await;
        self.reset().await;
    }

    fn peer_closed(&self) -> bool {
        !self.socket.may_recv() || self.socket.can_recv()
    }

    async fn write_from(
        &mut self,
        fill: impl FnOnce(&mut [u8]) -> usize,
    ) -> Result<usize, Self::Error> {
        self.socket
            .write_with(|free| {
                let n = fill(free).min(free.len());
                (n, n)
            })
            .await
    }

    fn readable(&self) -> bool {
        self.socket.can_recv()
    }
}

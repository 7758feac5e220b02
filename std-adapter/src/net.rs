//! Byte streams to a server: plain TCP or TLS (rustls with the ring provider), shared by
//! every std client. Certificate verification is on by default against the bundled Mozilla
//! roots (`webpki-roots`); callers may add their own roots (a private CA, a test server's
//! self-signed certificate, trusted as that exact certificate even when it is marked as a
//! CA, as curl and Python trust it) or, explicitly, switch verification off like the
//! official MZBench client's `--no_cert_check`. A refused certificate fails the connection
//! with an `io::Error` holding a [`TlsError`], which says why in words and what to do.

mod trust;

#[cfg(feature = "tokio")]
pub(crate) use trust::explain;
pub use trust::{TlsError, TlsErrorKind};

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use benchlink_core::http::{ConnectHead, DecodeError, Event, Limits, Method, ResponseDecoder};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme,
    StreamOwned,
};

/// How to check a TLS server's certificate.
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// Extra trusted roots, in addition to the bundled Mozilla roots. A server whose
    /// certificate is exactly one of these is trusted even when the certificate is a CA's
    /// (`basicConstraints CA:TRUE`, as `openssl req -x509` makes it) or its issuer is not
    /// given; its names and validity period are still checked.
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// Skip certificate verification entirely. Off by default; meant for test servers
    /// with throw-away certificates, as the official client's `--no_cert_check`.
    pub insecure_skip_verify: bool,
}

impl TlsOptions {
    /// Adds every certificate of a PEM file as a trusted root.
    ///
    /// ```no_run
    /// let tls = benchlink_std::net::TlsOptions::default().with_root_pem_file("ca.pem")?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn with_root_pem_file(mut self, path: impl AsRef<Path>) -> io::Result<Self> {
        for cert in CertificateDer::pem_file_iter(path.as_ref()).map_err(io::Error::other)? {
            self.extra_roots.push(cert.map_err(io::Error::other)?);
        }
        Ok(self)
    }
}

impl TlsOptions {
    /// The environment variable naming a PEM file of extra trusted roots, as OpenSSL,
    /// curl and Python honour it.
    pub const CERT_FILE_ENV: &'static str = "SSL_CERT_FILE";

    /// Adds the roots of the PEM file named by `SSL_CERT_FILE`, when it is set and not
    /// empty (an unreadable file is an error, not silently ignored).
    ///
    /// ```
    /// std::env::remove_var("SSL_CERT_FILE");
    /// let tls = benchlink_std::net::TlsOptions::default().with_env_roots().unwrap();
    /// assert!(tls.extra_roots.is_empty());
    /// ```
    pub fn with_env_roots(self) -> io::Result<Self> {
        match std::env::var_os(Self::CERT_FILE_ENV) {
            Some(path) if !path.is_empty() => self.with_root_pem_file(&path).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "{} ({}): {e}",
                        Self::CERT_FILE_ENV,
                        Path::new(&path).display()
                    ),
                )
            }),
            _ => Ok(self),
        }
    }

    /// What the command line asks for: `--no-cert-check`, the roots of `--cacert` and of
    /// `SSL_CERT_FILE`. Shared by `benchlink bench` and `benchlink rtm`.
    pub fn from_command_line(cacert: Option<&Path>, no_cert_check: bool) -> io::Result<Self> {
        let mut tls = TlsOptions {
            insecure_skip_verify: no_cert_check,
            ..TlsOptions::default()
        }
        .with_env_roots()?;
        if let Some(path) = cacert {
            tls = tls
                .with_root_pem_file(path)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        }
        Ok(tls)
    }
}

/// Parses an HTTPS proxy as `[http://]host:port` (the form of `HTTPS_PROXY`); the proxy
/// is spoken to in plain HTTP and tunnels the TLS of the connection through `CONNECT`.
///
/// ```
/// use benchlink_std::net::parse_proxy;
/// assert_eq!(parse_proxy("http://proxy.example:3128/").unwrap(), ("proxy.example".to_owned(), 3128));
/// assert_eq!(parse_proxy("[::1]:8080").unwrap(), ("::1".to_owned(), 8080));
/// assert!(parse_proxy("https://proxy:443").is_err());
/// assert!(parse_proxy("proxy").is_err());
/// ```
pub fn parse_proxy(text: &str) -> Result<(String, u16), String> {
    let rest = match text.split_once("://") {
        None => text,
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
        Some((scheme, _)) => {
            return Err(format!(
                "proxy {text:?}: scheme {scheme}:// is not supported (use http://host:port)"
            ))
        }
    };
    let authority = rest.trim_end_matches('/');
    if authority.contains(['/', '@', '?']) {
        return Err(format!("proxy {text:?}: expected [http://]host:port"));
    }
    let (host, port) = authority
        .rsplit_once(':')
        .ok_or_else(|| format!("proxy {text:?}: a port is required (host:port)"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| format!("proxy {text:?}: invalid port"))?;
    if host.is_empty() {
        return Err(format!("proxy {text:?}: missing host"));
    }
    Ok((host.to_owned(), port))
}

/// The cryptography behind every TLS connection: the process's default provider when the
/// application installed one (`CryptoProvider::install_default`, say a post-quantum-capable
/// aws-lc-rs build), else *ring*'s.
///
/// Why *ring* and the allowed deprecation: rustls 0.23.48 deprecates
/// `crypto::ring::default_provider` because *ring* has no post-quantum key exchange, yet
/// it names no other way to get the *ring* provider, and *ring* is this project's choice
/// (pure Rust and assembly: no C toolchain or CMake for the users' builds, smaller
/// binaries). The choice is made here, once, for both clients and both adapters; an
/// application that wants post-quantum key exchange installs its provider and gets it.
pub(crate) fn crypto_provider() -> Arc<rustls::crypto::CryptoProvider> {
    if let Some(installed) = rustls::crypto::CryptoProvider::get_default() {
        return installed.clone();
    }
    #[allow(deprecated)]
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A ready TLS client configuration; cheap to clone, built once per client.
#[derive(Debug, Clone)]
pub struct Tls {
    config: Arc<ClientConfig>,
}

impl Tls {
    /// Builds the client configuration for `options`.
    ///
    /// ```
    /// let tls = benchlink_std::net::Tls::new(&Default::default()).unwrap();
    /// # let _ = tls;
    /// ```
    pub fn new(options: &TlsOptions) -> io::Result<Tls> {
        let provider = crypto_provider();
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(io::Error::other)?;
        let config = if options.insecure_skip_verify {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
                .with_no_client_auth()
        } else {
            let mut roots = RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            for cert in &options.extra_roots {
                roots.add(cert.clone()).map_err(io::Error::other)?;
            }
            let verifier = trust::Verifier::new(roots, options.extra_roots.clone(), provider)
                .map_err(io::Error::other)?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth()
        };
        Ok(Tls {
            config: Arc::new(config),
        })
    }

    /// The rustls configuration, for the async adapter's tokio-rustls connector.
    #[cfg(feature = "tokio")]
    pub(crate) fn config(&self) -> Arc<ClientConfig> {
        self.config.clone()
    }
}

/// `host` (a DNS name, or an IP address bare or in brackets) as TLS names it for SNI and
/// verification.
pub(crate) fn server_name(host: &str) -> io::Result<ServerName<'static>> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(bare.to_owned())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// A connected byte stream, plain or encrypted.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Stream {
    /// Connects to `host:port`, trying every resolved address, and wraps the socket in TLS
    /// when `tls` is given (the server name for SNI and verification is `host`).
    ///
    /// ```no_run
    /// let s = benchlink_std::net::Stream::connect("localhost", 4800, None, std::time::Duration::from_secs(5))?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn connect(
        host: &str,
        port: u16,
        tls: Option<&Tls>,
        timeout: Duration,
    ) -> io::Result<Stream> {
        Stream::over(connect_tcp(host, port, timeout)?, host, tls)
    }

    /// Uses an already connected socket (for example a tunnel through an HTTPS proxy),
    /// wrapping it in TLS for `host` when `tls` is given.
    ///
    /// ```no_run
    /// let tcp = std::net::TcpStream::connect("localhost:4800")?;
    /// let s = benchlink_std::net::Stream::over(tcp, "localhost", None)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn over(tcp: TcpStream, host: &str, tls: Option<&Tls>) -> io::Result<Stream> {
        tcp.set_nodelay(true)?;
        match tls {
            None => Ok(Stream::Plain(tcp)),
            Some(tls) => {
                let name = server_name(host)?;
                let conn =
                    ClientConnection::new(tls.config.clone(), name).map_err(io::Error::other)?;
                Ok(Stream::Tls(Box::new(StreamOwned::new(conn, tcp))))
            }
        }
    }

    /// Runs the TLS handshake to its end now (a no-op for plain TCP), so that a socket
    /// switched to non-blocking mode afterwards only ever carries application data.
    pub fn complete_handshake(&mut self) -> io::Result<()> {
        if let Stream::Tls(s) = self {
            while s.conn.is_handshaking() {
                s.conn.complete_io(&mut s.sock).map_err(trust::explain)?;
            }
        }
        Ok(())
    }

    /// The underlying socket, e.g. for timeouts or shutdown.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.get_ref(),
        }
    }

    /// Sets the read timeout of the underlying socket (`None` blocks forever).
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.tcp().set_read_timeout(timeout)
    }
}

/// Why a `CONNECT` tunnel through an HTTPS proxy could not be opened.
#[derive(Debug)]
pub enum TunnelError {
    /// Reaching the proxy, or talking to it, failed (a timeout included).
    Io(io::Error),
    /// The proxy answered `CONNECT` with this status instead of 2xx.
    Refused {
        /// The proxy's status code.
        status: u16,
    },
    /// The proxy's answer was not HTTP, or it sent bytes for the server before the tunnel
    /// was used ([`DecodeError::TrailingData`]).
    Http(DecodeError),
}

impl fmt::Display for TunnelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TunnelError::Io(e) => write!(f, "proxy: {e}"),
            TunnelError::Refused { status } => write!(f, "proxy answered CONNECT with {status}"),
            TunnelError::Http(e) => write!(f, "proxy: bad HTTP response: {e}"),
        }
    }
}

impl std::error::Error for TunnelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TunnelError::Io(e) => Some(e),
            TunnelError::Http(e) => Some(e),
            TunnelError::Refused { .. } => None,
        }
    }
}

impl From<io::Error> for TunnelError {
    fn from(e: io::Error) -> TunnelError {
        TunnelError::Io(e)
    }
}

/// For callers that report connect failures as I/O errors: a refusal or a bad answer is
/// an error of kind `Other` that says what the proxy did.
impl From<TunnelError> for io::Error {
    fn from(e: TunnelError) -> io::Error {
        match e {
            TunnelError::Io(e) => e,
            other => io::Error::other(other),
        }
    }
}

/// Opens a `CONNECT` tunnel to `host:port` through the HTTPS proxy at
/// `proxy_host:proxy_port`, each step within `timeout`; the socket then carries the
/// connection to the server (TLS included, end to end). Both clients use it: the RTM
/// client for `--https-proxy`, the benchmark client likewise.
///
/// ```no_run
/// let tcp = benchlink_std::net::tunnel("proxy.example", 3128, "rtm.example", 443, std::time::Duration::from_secs(5))?;
/// let stream = benchlink_std::net::Stream::over(tcp, "rtm.example", None)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn tunnel(
    proxy_host: &str,
    proxy_port: u16,
    host: &str,
    port: u16,
    timeout: Duration,
) -> Result<TcpStream, TunnelError> {
    let mut tcp = connect_tcp(proxy_host, proxy_port, timeout)?;
    tcp.set_read_timeout(Some(timeout))?;
    tcp.write_all(&connect_request(host, port)?)?;
    let mut head_buf = [0u8; CONNECT_HEAD_MAX];
    let mut reply = ConnectReply::new(&mut head_buf);
    let mut buf = [0u8; 4096];
    loop {
        let n = tcp.read(&mut buf)?;
        if reply.feed(buf.get(..n).unwrap_or_default())? {
            break;
        }
    }
    tcp.set_read_timeout(None)?;
    Ok(tcp)
}

/// The most bytes of a proxy's answer to `CONNECT` kept (its head).
pub(crate) const CONNECT_HEAD_MAX: usize = 8192;

/// The `CONNECT` request for `host:port`, as the core's codec writes it.
pub(crate) fn connect_request(host: &str, port: u16) -> io::Result<Vec<u8>> {
    let head = ConnectHead {
        host,
        port,
        proxy_authorization: None,
    };
    crate::http::encode_to_vec(|c| head.encode(c))
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// The proxy's answer to `CONNECT`, read through the core's response decoder whatever the
/// transport (the blocking tunnel above, the async adapter's).
pub(crate) struct ConnectReply<'b> {
    decoder: ResponseDecoder<'b>,
}

impl<'b> ConnectReply<'b> {
    pub(crate) fn new(head_buf: &'b mut [u8]) -> Self {
        let mut decoder: ResponseDecoder = ResponseDecoder::new(head_buf, None, Limits::DEFAULT);
        decoder.set_request_method(Method::Connect);
        ConnectReply { decoder }
    }

    /// Feeds the next bytes read from the proxy (none: it closed): true once a 2xx head
    /// is complete and the tunnel is open; an error for any other answer, for bytes after
    /// the head (a proxy must not speak for the server before the tunnel is used), or for
    /// an end before the head.
    pub(crate) fn feed(&mut self, input: &[u8]) -> Result<bool, TunnelError> {
        if input.is_empty() {
            return Err(TunnelError::Http(self.decoder.finish().err().unwrap_or(
                DecodeError::UnexpectedEof {
                    section: benchlink_core::http::Section::Head,
                },
            )));
        }
        let mut pos = 0;
        while pos < input.len() {
            let (used, event) = self
                .decoder
                .decode(input.get(pos..).unwrap_or_default())
                .map_err(TunnelError::Http)?;
            pos += used;
            match event {
                Event::Head(head) if (200..300).contains(&head.status) => {
                    if pos < input.len() {
                        return Err(TunnelError::Http(DecodeError::TrailingData));
                    }
                    return Ok(true);
                }
                Event::Head(head) => {
                    return Err(TunnelError::Refused {
                        status: head.status,
                    })
                }
                Event::NeedMore => break,
                Event::Data(_) | Event::End { .. } => {}
            }
        }
        Ok(false)
    }
}

/// Connects a plain TCP socket to `host:port`, trying every resolved address in turn.
pub fn connect_tcp(host: &str, port: u16, timeout: Duration) -> io::Result<TcpStream> {
    let mut last = io::Error::new(
        io::ErrorKind::NotFound,
        format!("{host}:{port} did not resolve"),
    );
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    for addr in (bare, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            // A peer that closes without close_notify is reported as EOF; the HTTP decoder
            // then decides whether the body was complete (it is for Content-Length and
            // chunked bodies, and close-delimited bodies end there by definition).
            Stream::Tls(s) => match s.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                other => other.map_err(trust::explain),
            },
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf).map_err(trust::explain),
        }
    }

    /// Several buffers in one call: one `writev` on plain TCP, one TLS record for all of
    /// them on TLS (rustls's `StreamOwned` would take only the first).
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write_vectored(bufs),
            Stream::Tls(s) => {
                let s = &mut **s;
                rustls::Stream::new(&mut s.conn, &mut s.sock)
                    .write_vectored(bufs)
                    .map_err(trust::explain)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush().map_err(trust::explain),
        }
    }
}

/// Accepts any certificate but still checks handshake signatures, so the connection is
/// encrypted, just not authenticated. Only reachable through `insecure_skip_verify`.
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

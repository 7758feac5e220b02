//! Opening a messaging connection on tokio: TCP (through an HTTPS proxy's `CONNECT`
//! tunnel when one is configured), then TLS for `wss://` by tokio-rustls with the
//! blocking client's rustls configuration ([`Tls`]): the same trust rules (`--cacert`,
//! `SSL_CERT_FILE`, a given certificate trusted as itself) and the same words for a
//! refusal. The `CONNECT` request and the reading of its answer are the blocking
//! tunnel's ([`connect_request`], [`ConnectReply`]). Everything above the bytes is the
//! core's link.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::net::{
    connect_request, explain, server_name, ConnectReply, Tls, TunnelError, CONNECT_HEAD_MAX,
};
use crate::rtm::{ConnectError, TransportOptions};

/// A connected byte stream, plain or TLS.
pub(crate) trait Socket: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Socket for T {}

/// Opens the transport to `host:port` for the link: TCP or the proxy's tunnel, then the
/// TLS handshake when `tls`. Not bounded here: the link's connect timeout covers the
/// whole attempt (the runner drops this future when it passes).
pub(crate) async fn open(
    host: &str,
    port: u16,
    tls: bool,
    options: &TransportOptions,
) -> Result<Box<dyn Socket>, ConnectError> {
    let tcp = match &options.https_proxy {
        None => connect_tcp(host, port).await?,
        Some((proxy_host, proxy_port)) => tunnel(proxy_host, *proxy_port, host, port).await?,
    };
    tcp.set_nodelay(options.nodelay)?;
    if !tls {
        return Ok(Box::new(tcp));
    }
    let connector = TlsConnector::from(Tls::new(&options.tls)?.config());
    let stream = connector
        .connect(server_name(host)?, tcp)
        .await
        .map_err(explain)?;
    Ok(Box::new(stream))
}

/// Connects to `host:port` (a name, or an address bare or in brackets), trying every
/// resolved address in turn.
async fn connect_tcp(host: &str, port: u16) -> io::Result<TcpStream> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let mut last = io::Error::new(
        io::ErrorKind::NotFound,
        format!("{host}:{port} did not resolve"),
    );
    for addr in tokio::net::lookup_host((bare, port)).await? {
        match TcpStream::connect(addr).await {
            Ok(tcp) => return Ok(tcp),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// A `CONNECT` tunnel to `host:port` through the proxy.
async fn tunnel(
    proxy_host: &str,
    proxy_port: u16,
    host: &str,
    port: u16,
) -> Result<TcpStream, TunnelError> {
    let mut tcp = connect_tcp(proxy_host, proxy_port).await?;
    tcp.write_all(&connect_request(host, port)?).await?;
    let mut head_buf = [0u8; CONNECT_HEAD_MAX];
    let mut reply = ConnectReply::new(&mut head_buf);
    let mut buf = [0u8; 4096];
    loop {
        let n = tcp.read(&mut buf).await?;
        if reply.feed(buf.get(..n).unwrap_or_default())? {
            return Ok(tcp);
        }
    }
}

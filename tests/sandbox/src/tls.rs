//! TLS for both servers: `https://` for the benchmark server, `wss://` for the RTM
//! server, with rustls (the ring provider, TLS 1.3 and 1.2), as an option of their
//! configs ([`BenchServerConfig::tls`](crate::BenchServerConfig::tls),
//! [`RtmServerConfig::tls`](crate::RtmServerConfig::tls)).
//!
//! A server with TLS listens on its configured address and port with a TLS front: every
//! accepted connection gets a thread of its own for its handshake (so a client that
//! connects and says nothing never stops the accept loop or anyone else's handshake),
//! which must end within [`ServerTls::handshake_timeout`] (else the connection is
//! closed); at most [`MAX_HANDSHAKES`] handshakes wait at once, a new one closing the
//! oldest. Once the handshake is done the front opens a connection to the very same
//! plaintext server, which listens on a free port of `127.0.0.1` only, and carries the
//! decrypted bytes both ways: every behaviour, limit, fault and count of the plaintext
//! servers holds under TLS as it is, counted from the end of the handshake (a TLS
//! connection whose handshake fails never reaches the server, so it is not in the
//! server's connection counts or attempts). An end of either side is passed on: the
//! server's close becomes a `close_notify` and a TCP close, the client's `close_notify`
//! or close a half-close towards the server.
//!
//! ```
//! use benchlink_sandbox::tls::ServerTls;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = std::env::temp_dir().join(format!("tls-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! # let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
//! # std::fs::write(&cert, "not a certificate")?;
//! # std::fs::write(&key, "not a key")?;
//! // A bad file is an error that names it.
//! let err = ServerTls::from_pem_files(&cert, &key).unwrap_err();
//! assert!(err.to_string().contains("cert.pem"), "{err}");
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection};

/// Handshakes that may be under way at once; one more closes the oldest.
pub const MAX_HANDSHAKES: usize = 64;
/// Default of [`ServerTls::handshake_timeout`].
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// After the server's side ended, how long the client has to close its side before the
/// connection is closed whole (the rest of what it sends is still passed on meanwhile).
const LINGER: Duration = Duration::from_secs(1);
/// Time to reach the plaintext server on loopback.
const INNER_CONNECT: Duration = Duration::from_secs(2);
/// One read from either socket (a TLS record's worth).
const CHUNK: usize = 16 * 1024;

/// A server's TLS: its rustls configuration (certificate chain and key) and the
/// handshake deadline. Cloning shares the configuration; two values are equal when they
/// share it.
#[derive(Clone)]
pub struct ServerTls {
    config: Arc<ServerConfig>,
    /// Time a client has to complete its TLS handshake, from the TCP accept (bytes that
    /// trickle in do not extend it); then the connection is closed. Default 10 s.
    pub handshake_timeout: Duration,
}

impl ServerTls {
    /// A server TLS from a rustls configuration of your own (its ALPN, versions and
    /// certificate resolver as you made them).
    #[must_use]
    pub fn new(config: Arc<ServerConfig>) -> ServerTls {
        ServerTls {
            config,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        }
    }

    /// TLS 1.3 and 1.2 (ring), no client authentication, with `chain` (the server's
    /// certificate first, then any intermediates) and its key.
    ///
    /// # Errors
    ///
    /// When rustls refuses the chain or the key (an unsupported key type, a key that is
    /// not the certificate's).
    pub fn from_der(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Result<ServerTls, rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        Ok(ServerTls::new(Arc::new(config)))
    }

    /// As [`from_der`](Self::from_der), from PEM text: every `CERTIFICATE` block of
    /// `chain_pem` (the server's first) and the first private key of `key_pem` (PKCS#8
    /// `PRIVATE KEY`, SEC1 `EC PRIVATE KEY` or PKCS#1 `RSA PRIVATE KEY`).
    ///
    /// # Errors
    ///
    /// `InvalidData` saying what is wrong (no certificate, no key, bad PEM, a key rustls
    /// refuses).
    pub fn from_pem(chain_pem: &[u8], key_pem: &[u8]) -> io::Result<ServerTls> {
        let chain = read_chain(CertificateDer::pem_slice_iter(chain_pem))?;
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| invalid(format!("no usable private key: {e}")))?;
        ServerTls::from_der(chain, key).map_err(|e| invalid(format!("TLS configuration: {e}")))
    }

    /// As [`from_pem`](Self::from_pem), from files (`benchlink sandbox --tls-cert
    /// --tls-key`).
    ///
    /// # Errors
    ///
    /// Naming the file: one that cannot be read, has no certificate or no private key,
    /// or a chain and key rustls refuses (naming both).
    pub fn from_pem_files(cert: &Path, key: &Path) -> io::Result<ServerTls> {
        let named = |path: &Path, e: &dyn fmt::Display| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        };
        let chain_pem = std::fs::read(cert).map_err(|e| named(cert, &e))?;
        let key_pem = std::fs::read(key).map_err(|e| named(key, &e))?;
        let chain =
            read_chain(CertificateDer::pem_slice_iter(&chain_pem)).map_err(|e| named(cert, &e))?;
        let key_der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
            named(
                key,
                &format!("no usable private key (PKCS#8, SEC1 or RSA PEM): {e}"),
            )
        })?;
        ServerTls::from_der(chain, key_der).map_err(|e| {
            invalid(format!(
                "{} and {}: TLS configuration: {e}",
                cert.display(),
                key.display()
            ))
        })
    }

    /// The handshake deadline, instead of [`DEFAULT_HANDSHAKE_TIMEOUT`].
    #[must_use]
    pub fn with_handshake_timeout(mut self, timeout: Duration) -> ServerTls {
        self.handshake_timeout = timeout;
        self
    }

    /// The rustls configuration.
    #[must_use]
    pub fn config(&self) -> &Arc<ServerConfig> {
        &self.config
    }
}

fn read_chain(
    certs: impl Iterator<Item = Result<CertificateDer<'static>, rustls::pki_types::pem::Error>>,
) -> io::Result<Vec<CertificateDer<'static>>> {
    let chain = certs
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("bad PEM: {e}")))?;
    if chain.is_empty() {
        return Err(invalid("no CERTIFICATE block (PEM) found".to_owned()));
    }
    Ok(chain)
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls")
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

impl PartialEq for ServerTls {
    fn eq(&self, other: &ServerTls) -> bool {
        Arc::ptr_eq(&self.config, &other.config)
            && self.handshake_timeout == other.handshake_timeout
    }
}

impl Eq for ServerTls {}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where a TLS server's plaintext side listens: a free port of `127.0.0.1`, reachable
/// from this machine only.
pub(crate) fn inner_listener() -> io::Result<TcpListener> {
    TcpListener::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0))
}

/// The TLS front of one server (see the module's notes).
pub(crate) struct Front {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    /// Connections in their handshake: the socket and when it was accepted.
    handshaking: Mutex<BTreeMap<u64, (TcpStream, Instant)>>,
    /// Every socket the front holds (client and server sides), to close at shutdown.
    sockets: Mutex<BTreeMap<u64, Vec<TcpStream>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Shared {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    fn hold(&self, id: u64, socket: &TcpStream) {
        if let Ok(clone) = socket.try_clone() {
            lock(&self.sockets).entry(id).or_default().push(clone);
        }
        // A shutdown that began meanwhile missed this socket.
        if self.stopping() {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

impl Front {
    /// Serves TLS on `listener`, passing each connection on to `inner` (`name` names
    /// the threads and log lines).
    pub(crate) fn start(
        listener: TcpListener,
        inner: SocketAddr,
        tls: ServerTls,
        name: &'static str,
    ) -> io::Result<Front> {
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let s = Arc::clone(&shared);
        let acceptor = thread::Builder::new()
            .name(format!("{name}-tls-accept"))
            .spawn(move || accept_loop(&listener, inner, &tls, name, &s))?;
        Ok(Front {
            addr,
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// Stops accepting, closes every connection and joins every thread.
    pub(crate) fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.shared.stop.store(true, Ordering::Release);
        // Wake the blocking accept with a connection of our own.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(500));
        let _ = acceptor.join();
        loop {
            for sockets in lock(&self.shared.sockets).values() {
                for socket in sockets {
                    let _ = socket.shutdown(Shutdown::Both);
                }
            }
            for (socket, _) in lock(&self.shared.handshaking).values() {
                let _ = socket.shutdown(Shutdown::Both);
            }
            let threads = std::mem::take(&mut *lock(&self.shared.threads));
            if threads.is_empty() {
                break;
            }
            for t in threads {
                let _ = t.join();
            }
        }
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        self.stop();
    }
}

impl fmt::Debug for Front {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Front")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

fn accept_loop(
    listener: &TcpListener,
    inner: SocketAddr,
    tls: &ServerTls,
    name: &'static str,
    shared: &Arc<Shared>,
) {
    let mut next_id = 0u64;
    for client in listener.incoming() {
        if shared.stopping() {
            break;
        }
        let client = match client {
            Ok(c) => c,
            Err(e) => {
                log::warn!("{name} tls: accept failed: {e}");
                // Out of file descriptors and the like: back off instead of spinning.
                thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        next_id += 1;
        let id = next_id;
        {
            let mut handshaking = lock(&shared.handshaking);
            if handshaking.len() >= MAX_HANDSHAKES {
                let oldest = handshaking
                    .iter()
                    .min_by_key(|(_, (_, since))| *since)
                    .map(|(id, _)| *id);
                if let Some((socket, _)) = oldest.and_then(|id| handshaking.remove(&id)) {
                    log::debug!("{name} tls: too many handshakes; closing the oldest");
                    let _ = socket.shutdown(Shutdown::Both);
                }
            }
            if let Ok(clone) = client.try_clone() {
                handshaking.insert(id, (clone, Instant::now()));
            }
        }
        let (s, tls) = (Arc::clone(shared), tls.clone());
        let spawned = thread::Builder::new()
            .name(format!("{name}-tls-{id}"))
            .spawn(move || serve(id, client, inner, &tls, name, &s));
        match spawned {
            Ok(handle) => {
                let mut threads = lock(&shared.threads);
                threads.retain(|t| !t.is_finished());
                threads.push(handle);
            }
            Err(e) => {
                log::warn!("{name} tls: cannot spawn a connection thread: {e}");
                lock(&shared.handshaking).remove(&id);
            }
        }
    }
}

/// One TLS connection, on its own thread: the handshake, then the bytes both ways.
fn serve(
    id: u64,
    client: TcpStream,
    inner: SocketAddr,
    tls: &ServerTls,
    name: &str,
    shared: &Arc<Shared>,
) {
    let handshake = handshake(client, tls);
    lock(&shared.handshaking).remove(&id);
    let (mut client, conn) = match handshake {
        Ok(done) => done,
        Err(e) => {
            log::debug!("{name} tls: connection {id}: handshake failed: {e}");
            return;
        }
    };
    shared.hold(id, &client);
    let server = TcpStream::connect_timeout(&inner, INNER_CONNECT);
    let server = match server {
        Ok(server) => server,
        Err(e) => {
            log::warn!("{name} tls: connection {id}: cannot reach the server at {inner}: {e}");
            let mut conn = conn;
            conn.send_close_notify();
            while conn.wants_write() && conn.write_tls(&mut client).is_ok() {}
            let _ = client.shutdown(Shutdown::Both);
            lock(&shared.sockets).remove(&id);
            return;
        }
    };
    shared.hold(id, &server);
    let _ = server.set_nodelay(true);
    let _ = client.set_read_timeout(None);
    let _ = client.set_write_timeout(None);
    carry(client, server, conn);
    lock(&shared.sockets).remove(&id);
}

/// The handshake, within the deadline.
fn handshake(mut client: TcpStream, tls: &ServerTls) -> io::Result<(TcpStream, ServerConnection)> {
    let deadline = Instant::now() + tls.handshake_timeout;
    let _ = client.set_nodelay(true);
    let mut conn = ServerConnection::new(Arc::clone(&tls.config)).map_err(io::Error::other)?;
    let result = (|| {
        while conn.is_handshaking() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the handshake took too long",
                ));
            }
            client.set_read_timeout(Some(left))?;
            client.set_write_timeout(Some(left))?;
            match conn.complete_io(&mut client) {
                Ok(_) => {}
                // The deadline is checked at the top.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(e),
            }
        }
        // The session tickets (TLS 1.3) go out now.
        while conn.wants_write() {
            conn.write_tls(&mut client)?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok((client, conn)),
        Err(e) => {
            let _ = client.shutdown(Shutdown::Both);
            Err(e)
        }
    }
}

/// The TLS state and the client socket's writing side: records are encrypted under
/// `tls` and written in that order under `out`, taken before `tls` is let go, so that
/// neither direction waits on the other's socket writes while it decrypts or encrypts.
struct Pair {
    tls: Mutex<ServerConnection>,
    out: Mutex<TcpStream>,
}

impl Pair {
    /// Runs `f` on the TLS state, then writes the records it produced.
    fn send(&self, f: impl FnOnce(&mut ServerConnection) -> io::Result<()>) -> io::Result<()> {
        let mut tls = lock(&self.tls);
        f(&mut tls)?;
        let mut records = Vec::new();
        while tls.wants_write() {
            tls.write_tls(&mut records)?;
        }
        if records.is_empty() {
            return Ok(());
        }
        let mut out = lock(&self.out);
        drop(tls);
        out.write_all(&records)
    }
}

/// Carries the bytes both ways until both sides ended: the client's records decrypted
/// to the server on this thread, the server's bytes encrypted to the client on another.
fn carry(client: TcpStream, server: TcpStream, conn: ServerConnection) {
    let (Ok(client_out), Ok(server_in)) = (client.try_clone(), server.try_clone()) else {
        let _ = client.shutdown(Shutdown::Both);
        let _ = server.shutdown(Shutdown::Both);
        return;
    };
    let pair = Arc::new(Pair {
        tls: Mutex::new(conn),
        out: Mutex::new(client_out),
    });
    // Server → client.
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let p = Arc::clone(&pair);
    let client_ctl = client.try_clone();
    let server_ctl = server.try_clone();
    let downstream = thread::Builder::new()
        .name("tls-down".to_owned())
        .spawn(move || {
            let (Ok(client_ctl), Ok(server_ctl)) = (client_ctl, server_ctl) else {
                return;
            };
            server_to_client(server_in, &p, &client_ctl, &server_ctl, &done_rx);
        });
    // Client → server, on this thread.
    client_to_server(client, server, &pair);
    let _ = done_tx.send(());
    if let Ok(downstream) = downstream {
        let _ = downstream.join();
    }
}

fn client_to_server(mut client: TcpStream, mut server: TcpStream, pair: &Pair) {
    let mut buf = vec![0u8; CHUNK];
    let mut plain = Vec::new();
    // Application data that came with the handshake's last flight.
    let mut ended = drain_plain(&mut lock(&pair.tls), &mut plain);
    loop {
        if !plain.is_empty() {
            if server.write_all(&plain).is_err() {
                // The server is gone: so is the connection.
                let _ = client.shutdown(Shutdown::Both);
                return;
            }
            plain.clear();
        }
        if ended {
            break;
        }
        let n = match client.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let mut input = buf.get(..n).unwrap_or_default();
        let mut failed = false;
        let sent = pair.send(|tls| {
            while !input.is_empty() {
                tls.read_tls(&mut input)?;
                let processed = tls.process_new_packets();
                ended |= drain_plain(tls, &mut plain);
                if processed.is_err() {
                    // Its alert is written by `send`.
                    failed = true;
                    break;
                }
            }
            Ok(())
        });
        if failed || sent.is_err() {
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
            return;
        }
    }
    // The client ended its side (close_notify or TCP close): the server sees an end of
    // its request stream, as it would from a plaintext client.
    let _ = server.shutdown(Shutdown::Write);
}

/// Takes the plaintext the TLS state has; true when the client sent `close_notify`.
fn drain_plain(tls: &mut ServerConnection, plain: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 4096];
    loop {
        match tls.reader().read(&mut chunk) {
            Ok(0) => return true,
            Ok(n) => plain.extend_from_slice(chunk.get(..n).unwrap_or_default()),
            // WouldBlock: no more for now; an unclean end shows as the TCP close.
            Err(_) => return false,
        }
    }
}

fn server_to_client(
    mut server: TcpStream,
    pair: &Pair,
    client: &TcpStream,
    server_ctl: &TcpStream,
    client_done: &mpsc::Receiver<()>,
) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match server.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let data = buf.get(..n).unwrap_or_default();
        if pair.send(|tls| tls.writer().write_all(data)).is_err() {
            // The client is gone: so is the connection.
            let _ = client.shutdown(Shutdown::Both);
            let _ = server_ctl.shutdown(Shutdown::Both);
            return;
        }
    }
    // The server ended the connection: tell the client, then give it a moment to end
    // its side (what it still sends reaches the server, which may be draining a
    // refused request) before closing.
    let _ = pair.send(|tls| {
        tls.send_close_notify();
        Ok(())
    });
    let _ = client.shutdown(Shutdown::Write);
    let _ = client_done.recv_timeout(LINGER);
    let _ = client.shutdown(Shutdown::Both);
}

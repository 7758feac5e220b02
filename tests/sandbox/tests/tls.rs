//! Both servers over TLS (`BenchServerConfig::tls`, `RtmServerConfig::tls`), with a CA,
//! an intermediate and a leaf for `localhost` and 127.0.0.1 made by this test: a
//! benchmark run end to end over https and a message round trip over wss with
//! benchlink's std clients; a client that does not trust the CA refused while the server
//! goes on serving others; a client that connects and says nothing holding up no one,
//! and closed at the handshake deadline; TLS 1.2 as well as 1.3; bad PEM files named.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use benchlink_sandbox::rtm::{RtmServer, RtmServerConfig, DEFAULT_APPKEY};
use benchlink_sandbox::tls::ServerTls;
use benchlink_sandbox::{BenchServer, BenchServerConfig};
use benchlink_std::bench::{BenchClient, Scenario, ServerAddress, StartOptions};
use benchlink_std::net::TlsOptions;
use benchlink_std::rtm::{
    Client, ClientOptions, ClientState, Mode, SubscribeOptions, SubscriptionData,
    SubscriptionObserver,
};
use common::{returns, wait_until, HANG_GUARD};
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair,
    SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};

/// A throw-away PKI in a directory of its own: a root CA, an intermediate CA it signed,
/// and a leaf for `localhost` and 127.0.0.1 the intermediate signed.
struct Pki {
    dir: PathBuf,
    /// The root CA (what clients trust).
    ca: PathBuf,
    /// The leaf, then the intermediate (what the server serves).
    chain: PathBuf,
    /// The leaf's key, PKCS#8.
    key: PathBuf,
}

fn params(cn: &str, sans: &[&str]) -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    p.distinguished_name = dn;
    p.subject_alt_names = sans
        .iter()
        .map(|s| match s.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName((*s).try_into().expect("a DNS name")),
        })
        .collect();
    p
}

fn ca(cn: &str) -> (Certificate, KeyPair) {
    let mut p = params(cn, &[]);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().expect("CA key");
    let cert = p.self_signed(&key).expect("CA certificate");
    (cert, key)
}

impl Pki {
    fn new(name: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!(
            "benchlink-sandbox-tls-{name}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let (root, root_key) = ca(&format!("benchlink sandbox test root CA {name}"));
        let mut inter = params("benchlink sandbox test intermediate CA", &[]);
        inter.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let inter_key = KeyPair::generate().expect("intermediate key");
        let inter = inter
            .signed_by(&inter_key, &root, &root_key)
            .expect("intermediate");
        let leaf_key = KeyPair::generate().expect("leaf key");
        let leaf = params("localhost", &["localhost", "127.0.0.1"])
            .signed_by(&leaf_key, &inter, &inter_key)
            .expect("leaf");
        let pki = Pki {
            ca: dir.join("ca.pem"),
            chain: dir.join("chain.pem"),
            key: dir.join("key.pem"),
            dir,
        };
        std::fs::write(&pki.ca, root.pem()).unwrap();
        std::fs::write(&pki.chain, leaf.pem() + &inter.pem()).unwrap();
        std::fs::write(&pki.key, leaf_key.serialize_pem()).unwrap();
        pki
    }

    fn server_tls(&self) -> ServerTls {
        ServerTls::from_pem_files(&self.chain, &self.key).expect("server TLS")
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A rustls client trusting the certificates of `ca` (a PEM file), TLS 1.3 and 1.2 or
/// only `versions`.
fn client_config(
    ca: &Path,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// A TLS handshake with `addr` as `localhost`: the connection, or the error.
fn handshake(
    addr: SocketAddr,
    config: Arc<ClientConfig>,
) -> Result<rustls::StreamOwned<ClientConnection, TcpStream>, std::io::Error> {
    let mut tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(HANG_GUARD))?;
    let name = ServerName::try_from("localhost").unwrap();
    let mut conn = ClientConnection::new(config, name).unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp)?;
    }
    Ok(rustls::StreamOwned::new(conn, tcp))
}

/// `GET /clusters_info` over a TLS stream: the status line of the reply.
fn clusters_info<S: Read + Write>(stream: &mut S) -> String {
    stream
        .write_all(b"GET /clusters_info HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut reply = Vec::new();
    // The server's close_notify ends the reply; a bare close would be an error here.
    stream
        .read_to_end(&mut reply)
        .expect("reply and close_notify");
    let reply = String::from_utf8_lossy(&reply).into_owned();
    reply.lines().next().unwrap_or_default().to_owned()
}

fn bench_server(tls: ServerTls) -> BenchServer {
    BenchServer::start(BenchServerConfig {
        tls: Some(tls),
        ..BenchServerConfig::fast()
    })
    .expect("bench server")
}

fn rtm_server(tls: ServerTls) -> RtmServer {
    RtmServer::start(RtmServerConfig {
        tls: Some(tls),
        ..RtmServerConfig::default()
    })
    .expect("rtm server")
}

fn hello() -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios/hello.bdl");
    Scenario::from_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_benchmark_runs_over_https() {
    let pki = Pki::new("bench");
    let server = bench_server(pki.server_tls());
    assert!(
        server.url().starts_with("https://127.0.0.1:"),
        "{}",
        server.url()
    );
    let tls = TlsOptions::default().with_root_pem_file(&pki.ca).unwrap();
    let address = ServerAddress::parse(&server.url()).unwrap();
    let mut client = BenchClient::new(address)
        .unwrap()
        .with_tls(tls)
        .unwrap()
        .with_reply_timeout(Some(HANG_GUARD));
    let id = client
        .start(&hello(), &StartOptions::default())
        .expect("start over https");
    let deadline = Instant::now() + HANG_GUARD;
    let status = client
        .wait(id, Duration::from_millis(20), |_| {
            assert!(Instant::now() < deadline, "benchmark {id} never ended");
        })
        .expect("status over https");
    assert_eq!(status.status_text, "complete", "{status:?}");
    let results = client.results(id).expect("results over https");
    assert!(!results.0.is_empty(), "{results:?}");
    // Requests reached the server through the TLS front, on kept-alive connections.
    let requests = server.requests();
    assert!(
        requests.get("/status").copied().unwrap_or(0) >= 1,
        "{requests:?}"
    );
    returns("the https server's shutdown", move || server.shutdown());
}

/// Forwards every message of a subscription, and its becoming subscribed.
struct Forward(mpsc::Sender<String>);

impl SubscriptionObserver for Forward {
    fn on_enter_subscribed(&mut self) {
        let _ = self.0.send("subscribed".to_owned());
    }
    fn on_subscription_data(&mut self, data: &SubscriptionData<'_>) {
        for m in data.messages() {
            let _ = self.0.send(m.to_string());
        }
    }
}

fn rtm_client(endpoint: &str, ca: &Path) -> Client {
    let mut options = ClientOptions::new(endpoint, DEFAULT_APPKEY);
    options.transport.tls = TlsOptions::default().with_root_pem_file(ca).unwrap();
    let client = Client::new(options).unwrap();
    client.start().unwrap();
    let state = client.wait_for_state(|s| matches!(s, ClientState::Connected), HANG_GUARD);
    assert!(
        matches!(state, ClientState::Connected),
        "{endpoint}: {state:?}, {:?}",
        client.last_connecting_error().map(|e| e.to_string())
    );
    client
}

#[test]
fn a_message_round_trips_over_wss() {
    let pki = Pki::new("rtm");
    let server = rtm_server(pki.server_tls());
    let endpoint = server.endpoint();
    assert!(endpoint.starts_with("wss://127.0.0.1:"), "{endpoint}");
    // One client by IP address, the other by name: both are in the certificate.
    let by_name = endpoint.replace("127.0.0.1", "localhost");
    let subscriber = rtm_client(&endpoint, &pki.ca);
    let publisher = rtm_client(&by_name, &pki.ca);
    let (tx, rx) = mpsc::channel();
    subscriber
        .subscribe(
            "animals",
            Mode::Simple,
            Forward(tx),
            SubscribeOptions::default(),
        )
        .unwrap();
    assert_eq!(rx.recv_timeout(HANG_GUARD).unwrap(), "subscribed");
    publisher
        .publish_sync("animals", &serde_json::json!({"who": "zebra"}), HANG_GUARD)
        .expect("publish over wss");
    let got = rx.recv_timeout(HANG_GUARD).expect("the message over wss");
    assert_eq!(got, r#"{"who":"zebra"}"#);
    wait_until("two connections recorded", || {
        server.connections().len() == 2
    });
    publisher.dispose().unwrap();
    subscriber.dispose().unwrap();
    returns("the wss server's shutdown", move || server.shutdown());
}

#[test]
fn an_untrusting_client_is_refused_and_others_are_served() {
    let pki = Pki::new("refuse");
    let other = Pki::new("refuse-other");
    let bench = bench_server(pki.server_tls());
    let rtm = rtm_server(pki.server_tls());
    for addr in [bench.addr(), rtm.addr()] {
        let refused = handshake(addr, client_config(&other.ca, rustls::ALL_VERSIONS));
        let Err(err) = refused else {
            panic!("{addr}: a client that does not trust the CA was let in");
        };
        let inner = err
            .get_ref()
            .and_then(|e| e.downcast_ref::<rustls::Error>());
        assert!(
            matches!(
                inner,
                Some(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::UnknownIssuer
                ))
            ),
            "{addr}: {err:?}"
        );
        // Plaintext on a TLS port is no request either.
        let mut plain = TcpStream::connect(addr).unwrap();
        plain.set_read_timeout(Some(HANG_GUARD)).unwrap();
        plain
            .write_all(b"GET /clusters_info HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut reply = Vec::new();
        let _ = plain.read_to_end(&mut reply);
        assert!(!reply.starts_with(b"HTTP/"), "{addr}: {reply:?}");
    }
    // The servers go on: a trusting client is served, over TLS 1.3 and over 1.2.
    for versions in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let mut ok = handshake(bench.addr(), client_config(&pki.ca, &[versions])).unwrap();
        assert_eq!(
            ok.conn.protocol_version(),
            Some(versions.version),
            "{versions:?}"
        );
        assert_eq!(clusters_info(&mut ok), "HTTP/1.1 200 OK");
    }
    let _ = rtm_client(&rtm.endpoint(), &pki.ca).dispose();
    // No refused handshake reached either server.
    assert_eq!(rtm.attempts().len(), 1, "{:?}", rtm.attempts());
    assert_eq!(bench.stats().accepted, 2, "{:?}", bench.stats());
}

#[test]
fn a_silent_client_holds_up_no_one_and_is_closed_at_the_deadline() {
    let pki = Pki::new("silent");
    // A deadline longer than the test: the others are served while it has not passed.
    let bench = bench_server(pki.server_tls().with_handshake_timeout(HANG_GUARD * 2));
    let rtm = rtm_server(pki.server_tls().with_handshake_timeout(HANG_GUARD * 2));
    for addr in [bench.addr(), rtm.addr()] {
        let silent: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(addr).unwrap()).collect();
        // A client that sent half a ClientHello and stopped, too.
        let mut half = TcpStream::connect(addr).unwrap();
        half.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
            .unwrap();
        let ok = handshake(addr, client_config(&pki.ca, rustls::ALL_VERSIONS));
        assert!(ok.is_ok(), "{addr}: {:?}", ok.err());
        // The silent ones are still open: the handshake did not wait for their deadline.
        for mut s in silent.into_iter().chain([half]) {
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            let e = s
                .read(&mut [0u8; 16])
                .expect_err("still open, nothing sent");
            assert!(
                matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "{e:?}"
            );
        }
    }
    let mut ok = handshake(bench.addr(), client_config(&pki.ca, rustls::ALL_VERSIONS)).unwrap();
    assert_eq!(clusters_info(&mut ok), "HTTP/1.1 200 OK");
    // Shutdown closes the silent connections the servers still hold.
    returns("shutdown with silent clients", move || {
        bench.shutdown();
        rtm.shutdown();
    });

    // The deadline: a silent client is closed once it passes.
    let deadline = Duration::from_millis(300);
    let bench = bench_server(pki.server_tls().with_handshake_timeout(deadline));
    let rtm = rtm_server(pki.server_tls().with_handshake_timeout(deadline));
    for addr in [bench.addr(), rtm.addr()] {
        let start = Instant::now();
        let mut silent = TcpStream::connect(addr).unwrap();
        silent.set_read_timeout(Some(HANG_GUARD)).unwrap();
        let n = silent.read(&mut [0u8; 16]).unwrap_or(0);
        assert_eq!(n, 0, "{addr}: closed without a word");
        assert!(start.elapsed() >= deadline, "{addr}: {:?}", start.elapsed());
    }
}

#[test]
fn bad_pem_files_are_named() {
    let pki = Pki::new("pem");
    let garbage = pki.file("garbage.pem", "this is not PEM\n");
    let e = ServerTls::from_pem_files(&garbage, &pki.key).unwrap_err();
    assert!(e.to_string().contains("garbage.pem"), "{e}");
    let e = ServerTls::from_pem_files(&pki.chain, &garbage).unwrap_err();
    assert!(e.to_string().contains("garbage.pem"), "{e}");
    let missing = pki.dir.join("missing.pem");
    let e = ServerTls::from_pem_files(&pki.chain, &missing).unwrap_err();
    assert!(e.to_string().contains("missing.pem"), "{e}");
    // A key that is not the certificate's names both.
    let other = Pki::new("pem-other");
    let e = ServerTls::from_pem_files(&pki.chain, &other.key).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("chain.pem") && text.contains("key.pem"),
        "{text}"
    );
    // The same from memory.
    let chain = std::fs::read(&pki.chain).unwrap();
    let key = std::fs::read(&pki.key).unwrap();
    assert!(ServerTls::from_pem(&chain, &key).is_ok());
    assert!(ServerTls::from_pem(b"", &key).is_err());
}

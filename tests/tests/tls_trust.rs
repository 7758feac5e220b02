//! Which server certificates the std clients trust, and the words of a refusal, with
//! certificates made the ways users make them (by this test, at run time): OpenSSL's
//! `req -x509` one-liner (a self-signed certificate that is its own CA, `CA:TRUE`), a
//! leaf signed by a private CA, a wrong name, an expired certificate, one without subject
//! alternative names. Each against `wss://` (the local RTM server) and `https://` (the
//! local benchmark server), both behind a TLS-terminating proxy serving that certificate,
//! through the library and through the `benchlink` CLI with `--cacert` / `SSL_CERT_FILE`.
//!
//! What curl and Python accept is accepted: a certificate given as trusted that is the
//! server's own certificate is trusted as itself, CA or not. Its name and dates are still
//! checked.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;

use benchlink_sandbox::rtm::{RtmServer, RtmServerConfig, DEFAULT_APPKEY};
use benchlink_std::bench::{BenchClient, ErrorKind, ServerAddress};
use benchlink_std::net::{TlsError, TlsErrorKind, TlsOptions};
use benchlink_std::rtm::{Client, ClientOptions, ClientState};
use benchlink_tests::{benchlink_bin, fast_server, within, TlsProxy, PATIENCE};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A server certificate (chain first) with its key, and the PEM a user would give.
struct Served {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    /// The server's own certificate in PEM.
    cert_pem: String,
}

/// Certificate parameters with CN=`cn` and the given subject alternative names.
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

fn key_der(key: &KeyPair) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()))
}

/// What `openssl req -x509 -newkey … -subj /CN=cn -addext subjectAltName=…` makes: a
/// self-signed certificate that is its own CA (`basicConstraints CA:TRUE`).
fn openssl_style(cn: &str, sans: &[&str], adjust: impl FnOnce(&mut CertificateParams)) -> Served {
    let mut p = params(cn, sans);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    adjust(&mut p);
    let key = KeyPair::generate().expect("key");
    let cert = p.self_signed(&key).expect("certificate");
    Served {
        chain: vec![cert.der().clone()],
        key: key_der(&key),
        cert_pem: cert.pem(),
    }
}

/// A private CA (CN=benchlink test CA) and a leaf it signed for `sans`; the leaf's chain
/// is served without the CA (the client must have it). Returns (served leaf, CA PEM).
fn private_ca_leaf(sans: &[&str]) -> (Served, String) {
    let mut ca = params("benchlink test CA", &[]);
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().expect("CA key");
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    let leaf_key = KeyPair::generate().expect("leaf key");
    let leaf = params("localhost", sans)
        .signed_by(&leaf_key, &ca_cert, &ca_key)
        .expect("leaf certificate");
    (
        Served {
            chain: vec![leaf.der().clone()],
            key: key_der(&leaf_key),
            cert_pem: leaf.pem(),
        },
        ca_cert.pem(),
    )
}

/// The local benchmark and RTM servers, each behind a TLS proxy serving `served`.
struct Servers {
    _bench: benchlink_sandbox::bench::BenchServer,
    _rtm: RtmServer,
    https: TlsProxy,
    wss: TlsProxy,
    dir: PathBuf,
}

impl Servers {
    fn start(served: &Served) -> Servers {
        let bench = fast_server();
        let rtm = RtmServer::start(RtmServerConfig::default()).expect("rtm server");
        let proxy = |upstream| {
            TlsProxy::with_certificate(
                upstream,
                served.chain.clone(),
                served.key.clone_key(),
                served.cert_pem.clone(),
            )
        };
        let https = proxy(bench.addr());
        let wss = proxy(rtm.addr());
        let dir = std::env::temp_dir().join(format!(
            "benchlink-tls-trust-{}-{}",
            std::process::id(),
            https.port()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Servers {
            _bench: bench,
            _rtm: rtm,
            https,
            wss,
            dir,
        }
    }

    /// Writes `pem` to a file of this run; its path.
    fn pem_file(&self, name: &str, pem: &str) -> String {
        let path = self.dir.join(name);
        std::fs::write(&path, pem).expect("PEM file");
        path.to_str().expect("utf-8 path").to_owned()
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Trusting the certificates of a PEM text, as `--cacert` reads it.
fn trusting(pem: Option<&str>) -> TlsOptions {
    TlsOptions {
        extra_roots: pem
            .map(|p| {
                CertificateDer::pem_slice_iter(p.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .expect("PEM")
            })
            .unwrap_or_default(),
        ..TlsOptions::default()
    }
}

/// The library's benchmark client over https to `host`: Ok, or the refusal.
fn bench_lib(host: &str, port: u16, tls: TlsOptions) -> Result<(), Box<(TlsError, String)>> {
    let url = format!("https://{host}:{port}");
    let mut c = BenchClient::new(ServerAddress::parse(&url).expect("address"))
        .expect("client")
        .with_tls(tls)
        .expect("tls options")
        .with_reply_timeout(Some(PATIENCE));
    match c.clusters_info() {
        Ok(_) => Ok(()),
        Err(e) => {
            let text = e.to_string();
            let tls = match e.kind() {
                ErrorKind::Io(io) | ErrorKind::Connect(io) => io
                    .get_ref()
                    .and_then(|i| i.downcast_ref::<TlsError>())
                    .cloned(),
                _ => None,
            };
            Err(Box::new((
                tls.unwrap_or_else(|| panic!("not a TlsError: {e:?}")),
                text,
            )))
        }
    }
}

/// The library's messaging client over wss to `host`: Ok, or its connecting error.
fn rtm_lib(host: &str, port: u16, tls: TlsOptions) -> Result<(), String> {
    let mut o = ClientOptions::new(format!("wss://{host}:{port}"), DEFAULT_APPKEY);
    o.transport.tls = tls;
    // One attempt: its outcome is the answer (a refused certificate is not retried).
    o.retry_first_connect = false;
    let client = Client::new(o).expect("client");
    client.start().expect("start");
    let state = client.wait_for_state(
        |s| matches!(s, ClientState::Connected | ClientState::Stopped),
        PATIENCE,
    );
    let outcome = match state {
        ClientState::Connected => Ok(()),
        _ => Err(client
            .last_connecting_error()
            .map_or_else(|| format!("{state:?} without an error"), |e| e.to_string())),
    };
    client.dispose().expect("dispose");
    outcome
}

/// `benchlink ARGS` with a clean environment plus `env`: (exit code, stdout, stderr).
fn cli(args: &[String], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = Command::new(benchlink_bin());
    command
        .args(args)
        .env_remove("SSL_CERT_FILE")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("MZBENCH_API_HOST")
        .env_remove("BENCHLINK_TOKEN")
        .env_remove("BENCHLINK_RTM_ENDPOINT")
        .env_remove("BENCHLINK_RTM_APPKEY")
        .env("MZBENCHTOKEN", "/nonexistent/benchlink-token-file")
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    let out = within(PATIENCE * 3, "benchlink", move || {
        command.output().expect("benchlink")
    });
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `benchlink bench --host https://HOST:PORT [--cacert F] clusters-info`.
fn bench_cli(host: &str, port: u16, cacert: Option<&str>, env: &[(&str, &str)]) -> (i32, String) {
    let mut args = vec![
        "bench".to_owned(),
        "--host".to_owned(),
        format!("https://{host}:{port}"),
    ];
    if let Some(f) = cacert {
        args.extend(["--cacert".to_owned(), f.to_owned()]);
    }
    args.push("clusters-info".to_owned());
    let (code, _, stderr) = cli(&args, env);
    (code, stderr)
}

/// `benchlink rtm --endpoint wss://HOST:PORT --appkey K [--cacert F] write k 1`.
fn rtm_cli(host: &str, port: u16, cacert: Option<&str>, env: &[(&str, &str)]) -> (i32, String) {
    let mut args = vec![
        "rtm".to_owned(),
        "--endpoint".to_owned(),
        format!("wss://{host}:{port}"),
        "--appkey".to_owned(),
        DEFAULT_APPKEY.to_owned(),
    ];
    if let Some(f) = cacert {
        args.extend(["--cacert".to_owned(), f.to_owned()]);
    }
    args.extend(["write".to_owned(), "k".to_owned(), "1".to_owned()]);
    let (code, _, stderr) = cli(&args, env);
    (code, stderr)
}

/// Every way in connects to `host` when `cacert` (a PEM text) is trusted.
fn connects(servers: &Servers, host: &str, cacert: &str) {
    let (https, wss) = (servers.https.port(), servers.wss.port());
    if let Err(refused) = bench_lib(host, https, trusting(Some(cacert))) {
        let (e, text) = *refused;
        panic!("bench over https to {host}: {text} ({:?})", e.rustls());
    }
    if let Err(e) = rtm_lib(host, wss, trusting(Some(cacert))) {
        panic!("rtm over wss to {host}: {e}");
    }
    let file = servers.pem_file("trusted.pem", cacert);
    let (code, stderr) = bench_cli(host, https, Some(&file), &[]);
    assert_eq!(code, 0, "benchlink bench --cacert: {stderr}");
    let (code, stderr) = rtm_cli(host, wss, Some(&file), &[]);
    assert_eq!(code, 0, "benchlink rtm --cacert: {stderr}");
    // SSL_CERT_FILE, as curl and Python honour it.
    let (code, stderr) = bench_cli(host, https, None, &[("SSL_CERT_FILE", &file)]);
    assert_eq!(code, 0, "benchlink bench with SSL_CERT_FILE: {stderr}");
    let (code, stderr) = rtm_cli(host, wss, None, &[("SSL_CERT_FILE", &file)]);
    assert_eq!(code, 0, "benchlink rtm with SSL_CERT_FILE: {stderr}");
}

/// The words of a refusal: exactly `start` or, for sentences that hold the current time,
/// `start`, a `YYYY-MM-DD HH:MM:SS` time, then `end`.
#[derive(Clone, Copy)]
struct Words<'a> {
    start: &'a str,
    end: Option<&'a str>,
}

impl Words<'_> {
    /// The length of the sentence.
    fn len(&self) -> usize {
        self.start.len()
            + self
                .end
                .map_or(0, |e| "2026-01-01 00:00:00".len() + e.len())
    }

    /// Whether `text` is the sentence.
    fn is(&self, text: &str) -> bool {
        text.len() == self.len()
            && text.starts_with(self.start)
            && self.end.is_none_or(|e| text.ends_with(e))
    }

    /// Whether `text` holds the sentence.
    fn in_(&self, text: &str) -> bool {
        text.match_indices(self.start)
            .any(|(at, _)| text.get(at..at + self.len()).is_some_and(|s| self.is(s)))
    }
}

impl std::fmt::Display for Words<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.end {
            None => write!(f, "{}", self.start),
            Some(end) => write!(f, "{}YYYY-MM-DD HH:MM:SS{end}", self.start),
        }
    }
}

/// Every way in refuses `host` with `kind` and `words`, when `cacert` (a PEM text) is
/// trusted: the library's error is the sentence, the clients' errors and the CLI's
/// message hold it.
fn refused_with(
    servers: &Servers,
    host: &str,
    cacert: Option<&str>,
    kind: TlsErrorKind,
    words: Words<'_>,
) {
    let (https, wss) = (servers.https.port(), servers.wss.port());
    let (e, text) = *bench_lib(host, https, trusting(cacert)).expect_err("https must be refused");
    assert_eq!(e.kind(), kind, "{e}");
    assert!(
        words.is(&e.to_string()),
        "library TlsError:\n{e}\nexpected:\n{words}"
    );
    assert!(text.contains(&e.to_string()), "bench error: {text}");
    let error = rtm_lib(host, wss, trusting(cacert)).expect_err("wss must be refused");
    let sentence = error
        .strip_prefix("connection failed: ")
        .unwrap_or_else(|| panic!("rtm connecting error: {error}"));
    assert!(
        words.is(sentence),
        "rtm connecting error:\n{error}\nexpected:\n{words}"
    );

    let file = cacert.map(|pem| servers.pem_file("given.pem", pem));
    for (what, (code, stderr)) in [
        ("bench", bench_cli(host, https, file.as_deref(), &[])),
        ("rtm", rtm_cli(host, wss, file.as_deref(), &[])),
    ] {
        assert_eq!(code, 1, "benchlink {what}: {stderr}");
        assert!(
            words.in_(&stderr),
            "benchlink {what}:\n{stderr}\nexpected:\n{words}"
        );
        assert!(!stderr.contains("OtherError"), "{stderr}");
    }
}

/// As [`refused_with`], the words exactly.
fn refused(servers: &Servers, host: &str, cacert: Option<&str>, kind: TlsErrorKind, words: &str) {
    refused_with(
        servers,
        host,
        cacert,
        kind,
        Words {
            start: words,
            end: None,
        },
    );
}

const LOCALHOST: &str = "127.0.0.1";

/// The case: `openssl req -x509 … -subj /CN=localhost -addext
/// subjectAltName=IP:127.0.0.1,DNS:localhost`, given with `--cacert`, connects by
/// address and by name; not given, it is refused as a CA certificate with the fix.
#[test]
fn a_self_signed_ca_certificate_given_as_trusted_connects() {
    let served = openssl_style("localhost", &["127.0.0.1", "localhost"], |_| {});
    let servers = Servers::start(&served);
    connects(&servers, LOCALHOST, &served.cert_pem);
    connects(&servers, "localhost", &served.cert_pem);
    refused(
        &servers,
        LOCALHOST,
        None,
        TlsErrorKind::CaCertificate,
        "the certificate of the server 127.0.0.1 (CN=localhost) is a CA certificate \
         (basicConstraints CA:TRUE), accepted as a server's certificate only when that exact \
         certificate is given with --cacert or SSL_CERT_FILE: give it there, or serve a \
         certificate issued by the CA",
    );
    // Another certificate given does not make this one trusted.
    let other = openssl_style("localhost", &["127.0.0.1", "localhost"], |_| {});
    refused(
        &servers,
        LOCALHOST,
        Some(&other.cert_pem),
        TlsErrorKind::CaCertificate,
        "the certificate of the server 127.0.0.1 (CN=localhost) is a CA certificate \
         (basicConstraints CA:TRUE), accepted as a server's certificate only when that exact \
         certificate is given with --cacert or SSL_CERT_FILE: give it there, or serve a \
         certificate issued by the CA",
    );
}

/// A leaf signed by a private CA: trusted with the CA given (webpki's chain check), or
/// with the leaf itself given (exact match, as curl's partial chains); refused without,
/// naming the issuer to give.
#[test]
fn a_leaf_of_a_private_ca_connects_with_the_ca_and_says_which_ca_without() {
    let (served, ca_pem) = private_ca_leaf(&["127.0.0.1", "localhost"]);
    let servers = Servers::start(&served);
    connects(&servers, LOCALHOST, &ca_pem);
    connects(&servers, "localhost", &ca_pem);
    connects(&servers, LOCALHOST, &served.cert_pem);
    refused(
        &servers,
        LOCALHOST,
        None,
        TlsErrorKind::UnknownIssuer,
        "the certificate of the server 127.0.0.1 (CN=localhost) was issued by CN=benchlink \
         test CA, which is not a trusted CA: give that CA's certificate (PEM) with --cacert or \
         SSL_CERT_FILE",
    );
    // A self-signed certificate that is not a CA's, not given.
    let plain = openssl_style("localhost", &["127.0.0.1"], |p| p.is_ca = IsCa::NoCa);
    let servers = Servers::start(&plain);
    refused(
        &servers,
        LOCALHOST,
        None,
        TlsErrorKind::UnknownIssuer,
        "the certificate of the server 127.0.0.1 (CN=localhost) is self-signed and not \
         trusted: give that certificate (its PEM file) with --cacert or SSL_CERT_FILE",
    );
    connects(&servers, LOCALHOST, &plain.cert_pem);
}

/// The right certificate for another name: refused, saying the names it has — whether it
/// is trusted as itself (the openssl one-liner for another host) or through its CA.
#[test]
fn a_wrong_name_is_refused_with_the_names_the_certificate_has() {
    let served = openssl_style(
        "bench.example.com",
        &["bench.example.com", "10.1.2.3"],
        |_| {},
    );
    let servers = Servers::start(&served);
    refused(
        &servers,
        LOCALHOST,
        Some(&served.cert_pem),
        TlsErrorKind::NameMismatch,
        "the certificate of the server 127.0.0.1 (CN=bench.example.com) is not valid for the \
         name 127.0.0.1: it is for DNS:bench.example.com, IP:10.1.2.3; connect with one of \
         those names, or reissue the certificate with subjectAltName=IP:127.0.0.1",
    );
    // The logs (DEBUG_BENCHLINK_SDK=debug) say it in the same words.
    let file = servers.pem_file("named.pem", &served.cert_pem);
    let (code, stderr) = rtm_cli(
        LOCALHOST,
        servers.wss.port(),
        Some(&file),
        &[("DEBUG_BENCHLINK_SDK", "debug")],
    );
    assert_eq!(code, 1, "{stderr}");
    let words = "the certificate of the server 127.0.0.1 (CN=bench.example.com) is not valid for \
                 the name 127.0.0.1: it is for DNS:bench.example.com, IP:10.1.2.3; connect with \
                 one of those names, or reissue the certificate with subjectAltName=IP:127.0.0.1";
    for logged in [
        format!("] tls: {words}"),
        format!("] rtm: connect failed: connection failed: {words}"),
    ] {
        assert!(
            stderr.lines().any(|l| l.ends_with(&logged)),
            "{logged}\nin\n{stderr}"
        );
    }

    let (leaf, ca_pem) = private_ca_leaf(&["localhost"]);
    let servers = Servers::start(&leaf);
    refused(
        &servers,
        LOCALHOST,
        Some(&ca_pem),
        TlsErrorKind::NameMismatch,
        "the certificate of the server 127.0.0.1 (CN=localhost) is not valid for the name \
         127.0.0.1: it is for DNS:localhost; connect with one of those names, or reissue the \
         certificate with subjectAltName=IP:127.0.0.1",
    );
    connects(&servers, "localhost", &ca_pem);
}

/// An expired certificate, given as trusted (exact match) or through its CA: refused
/// with its dates.
#[test]
fn an_expired_certificate_is_refused_with_its_dates() {
    let served = openssl_style("localhost", &["127.0.0.1", "localhost"], |p| {
        p.not_before = rcgen::date_time_ymd(2020, 1, 1);
        p.not_after = rcgen::date_time_ymd(2021, 1, 1);
    });
    let servers = Servers::start(&served);
    let start = "the certificate of the server 127.0.0.1 (CN=localhost) expired on 2021-01-01 \
                 00:00:00 UTC (valid from 2020-01-01 00:00:00 UTC); it is now ";
    let end = " UTC: renew the certificate on the server, or set this machine's clock right";
    refused_with(
        &servers,
        LOCALHOST,
        Some(&served.cert_pem),
        TlsErrorKind::Expired,
        Words {
            start,
            end: Some(end),
        },
    );
    // Not yet valid.
    let early = openssl_style("localhost", &["127.0.0.1"], |p| {
        p.not_before = rcgen::date_time_ymd(2999, 1, 1);
        p.not_after = rcgen::date_time_ymd(3000, 1, 1);
    });
    let servers = Servers::start(&early);
    let start = "the certificate of the server 127.0.0.1 (CN=localhost) is not valid before \
                 2999-01-01 00:00:00 UTC (valid until 3000-01-01 00:00:00 UTC); it is now ";
    let end = " UTC: check this machine's clock, or use a certificate valid now";
    refused_with(
        &servers,
        LOCALHOST,
        Some(&early.cert_pem),
        TlsErrorKind::NotValidYet,
        Words {
            start,
            end: Some(end),
        },
    );
}

/// Through a trusted CA, webpki's own expiry check: the same words.
#[test]
fn an_expired_leaf_of_a_trusted_ca_is_refused_with_its_dates() {
    let mut ca = params("benchlink test CA", &[]);
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().expect("CA key");
    let ca_cert = ca.self_signed(&ca_key).expect("CA");
    let leaf_key = KeyPair::generate().expect("key");
    let mut p = params("localhost", &["127.0.0.1"]);
    p.not_before = rcgen::date_time_ymd(2019, 6, 1);
    p.not_after = rcgen::date_time_ymd(2020, 6, 1);
    let leaf = p.signed_by(&leaf_key, &ca_cert, &ca_key).expect("leaf");
    let served = Served {
        chain: vec![leaf.der().clone()],
        key: key_der(&leaf_key),
        cert_pem: leaf.pem(),
    };
    let servers = Servers::start(&served);
    let start = "the certificate of the server 127.0.0.1 (CN=localhost) expired on 2020-06-01 \
                 00:00:00 UTC (valid from 2019-06-01 00:00:00 UTC); it is now ";
    let end = " UTC: renew the certificate on the server, or set this machine's clock right";
    refused_with(
        &servers,
        LOCALHOST,
        Some(&ca_cert.pem()),
        TlsErrorKind::Expired,
        Words {
            start,
            end: Some(end),
        },
    );
}

/// A certificate with its name only in the subject's CN (no subjectAltName): valid for
/// no name, as for curl and Python; the words say how to reissue it.
#[test]
fn a_certificate_without_subject_alternative_names_is_refused_with_the_fix() {
    let served = openssl_style("localhost", &[], |_| {});
    let servers = Servers::start(&served);
    for host in [LOCALHOST, "localhost"] {
        let san = if host == LOCALHOST {
            "IP:127.0.0.1"
        } else {
            "DNS:localhost"
        };
        refused(
            &servers,
            host,
            Some(&served.cert_pem),
            TlsErrorKind::NoSubjectAltNames,
            &format!(
                "the certificate of the server {host} (CN=localhost) has no subject alternative \
                 names, so it is valid for no name (the subject's CN is not used, as in curl and \
                 Python): reissue it with its names, e.g. -addext subjectAltName={san}"
            ),
        );
    }
    // Through a CA too (webpki's own name check).
    let mut ca = params("benchlink test CA", &[]);
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().expect("CA key");
    let ca_cert = ca.self_signed(&ca_key).expect("CA");
    let leaf_key = KeyPair::generate().expect("key");
    let leaf = params("localhost", &[])
        .signed_by(&leaf_key, &ca_cert, &ca_key)
        .expect("leaf");
    let servers = Servers::start(&Served {
        chain: vec![leaf.der().clone()],
        key: key_der(&leaf_key),
        cert_pem: leaf.pem(),
    });
    refused(
        &servers,
        "localhost",
        Some(&ca_cert.pem()),
        TlsErrorKind::NoSubjectAltNames,
        "the certificate of the server localhost (CN=localhost) has no subject alternative \
         names, so it is valid for no name (the subject's CN is not used, as in curl and \
         Python): reissue it with its names, e.g. -addext subjectAltName=DNS:localhost",
    );
}

/// The one-liner itself, with OpenSSL's RSA key and its defaults (SKI/AKI,
/// CA:TRUE), when `openssl` is installed; and the verdict of curl and Python's `ssl`
/// on the same server, when they are.
#[test]
fn the_openssl_one_liner_certificate_connects_as_for_curl_and_python() {
    let dir = std::env::temp_dir().join(format!("benchlink-openssl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (key, cert) = (dir.join("k.pem"), dir.join("c.pem"));
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ])
        .stdin(std::process::Stdio::null())
        .output();
    match made {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!("openssl req: {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => {
            missing_tool("openssl", &e);
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
    }
    let cert_pem = std::fs::read_to_string(&cert).expect("c.pem");
    let served = Served {
        chain: CertificateDer::pem_file_iter(&cert)
            .expect("c.pem")
            .collect::<Result<_, _>>()
            .expect("c.pem"),
        key: PrivateKeyDer::from_pem_file(&key).expect("k.pem"),
        cert_pem: cert_pem.clone(),
    };
    let servers = Servers::start(&served);
    connects(&servers, LOCALHOST, &cert_pem);
    let url = format!("https://127.0.0.1:{}/clusters_info", servers.https.port());
    // The other clients, straight to the server (no proxy from the environment), each
    // within a hang guard; one that is not installed is skipped.
    let other_client = |program: &str, args: Vec<String>| {
        let mut command = Command::new(program);
        command.args(args).stdin(std::process::Stdio::null());
        for proxy in [
            "https_proxy",
            "HTTPS_PROXY",
            "http_proxy",
            "HTTP_PROXY",
            "all_proxy",
            "ALL_PROXY",
        ] {
            command.env_remove(proxy);
        }
        within(PATIENCE * 3, program, move || command.output())
    };
    let cert_path = cert.to_str().expect("utf-8").to_owned();
    let curl = other_client(
        "curl",
        [
            "-sS",
            "--max-time",
            "20",
            "-o",
            "/dev/null",
            "--cacert",
            &cert_path,
            &url,
        ]
        .map(String::from)
        .to_vec(),
    );
    match curl {
        Ok(out) => assert!(
            out.status.success(),
            "curl: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => missing_tool("curl", &e),
    }
    let python = format!(
        "import ssl, urllib.request; urllib.request.urlopen({url:?}, timeout=20, \
         context=ssl.create_default_context(cafile={cert_path:?})).read()"
    );
    match other_client("python3", vec!["-c".to_owned(), python]) {
        Ok(out) => assert!(
            out.status.success(),
            "python: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => missing_tool("python3", &e),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tool this test compares against is not installed: a failure under CI (the test
/// command installs it), a notice elsewhere.
fn missing_tool(tool: &str, error: &dyn std::fmt::Display) {
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!("{tool} is needed by this test and could not be run: {error}");
    }
    eprintln!("NOTICE: skipped the {tool} part: {tool} could not be run ({error})");
}

//! Which server certificates are trusted, and the words for one that is not.
//!
//! Verification is rustls/webpki's ([`WebPkiServerVerifier`]) with one addition, the
//! one curl and Python make: a certificate the user gave explicitly (`--cacert`,
//! `SSL_CERT_FILE`, [`TlsOptions::extra_roots`](super::TlsOptions::extra_roots)) that
//! *is* the server's certificate is trusted as that exact certificate, even when it is
//! marked as a CA (`openssl req -x509 …` makes such certificates) or when its issuer is
//! not given. Its names (against the subject alternative names) and its validity period
//! are still checked, and so are the handshake's signatures; the bundled public roots
//! never get this exact-match trust.
//!
//! A refused certificate is reported as a [`TlsError`], whose `Display` is a sentence
//! that says why and what to do: the CLI, the clients' errors and the logs all show it.

use std::cell::RefCell;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
use x509_parser::time::ASN1Time;

/// webpki's verification plus exact-match trust for the user's own certificates.
#[derive(Debug)]
pub(super) struct Verifier {
    webpki: Arc<WebPkiServerVerifier>,
    /// The certificates the user gave (DER), trusted as themselves.
    given: Vec<CertificateDer<'static>>,
}

impl Verifier {
    pub(super) fn new(
        roots: RootCertStore,
        given: Vec<CertificateDer<'static>>,
        provider: Arc<CryptoProvider>,
    ) -> Result<Verifier, rustls::client::VerifierBuilderError> {
        let webpki =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider).build()?;
        Ok(Verifier { webpki, given })
    }

    /// The checks that still apply to a certificate trusted as itself: validity period,
    /// purpose (when it names purposes), and the server's name.
    fn verify_given(
        end_entity: &CertificateDer<'_>,
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> Result<(), rustls::Error> {
        let (_, cert) = X509Certificate::from_der(end_entity.as_ref())
            .map_err(|_| CertificateError::BadEncoding)?;
        let seconds = |t: i64| {
            UnixTime::since_unix_epoch(std::time::Duration::from_secs(t.max(0).unsigned_abs()))
        };
        let validity = cert.validity();
        let (not_before, not_after) = (
            validity.not_before.timestamp(),
            validity.not_after.timestamp(),
        );
        let now_secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        if now_secs < not_before {
            return Err(CertificateError::NotValidYetContext {
                time: now,
                not_before: seconds(not_before),
            }
            .into());
        }
        if now_secs > not_after {
            return Err(CertificateError::ExpiredContext {
                time: now,
                not_after: seconds(not_after),
            }
            .into());
        }
        match cert.extended_key_usage() {
            Ok(Some(eku)) if !(eku.value.any || eku.value.server_auth) => {
                return Err(CertificateError::InvalidPurpose.into())
            }
            Ok(_) => {}
            Err(_) => return Err(CertificateError::BadEncoding.into()),
        }
        let parsed = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_name(&parsed, server_name)
    }

    fn is_given(&self, end_entity: &CertificateDer<'_>) -> bool {
        self.given.iter().any(|c| c.as_ref() == end_entity.as_ref())
    }
}

/// The refusals that exact-match trust answers: the certificate is a CA's, or its issuer
/// is not among the roots (it is self-signed, or the user gave the server's certificate
/// rather than its CA's).
fn exact_match_may_answer(e: &rustls::Error) -> bool {
    match e {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => true,
        rustls::Error::InvalidCertificate(CertificateError::Other(other)) => matches!(
            other.0.downcast_ref::<webpki::Error>(),
            Some(webpki::Error::CaUsedAsEndEntity)
        ),
        _ => false,
    }
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let refused = match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(verified) => return Ok(verified),
            Err(e) => e,
        };
        let refused = if self.is_given(end_entity) && exact_match_may_answer(&refused) {
            match Verifier::verify_given(end_entity, server_name, now) {
                Ok(()) => {
                    log::debug!(
                        "tls: {} presented the very certificate given as trusted; accepted as itself",
                        server_name.to_str()
                    );
                    return Ok(ServerCertVerified::assertion());
                }
                Err(e) => e,
            }
        } else {
            refused
        };
        let error = TlsError::new(server_name, &refused, Some(end_entity), now);
        log::info!("tls: {error}");
        LAST_REFUSED.with(|last| *last.borrow_mut() = Some(error));
        Err(refused)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }

    fn root_hint_subjects(&self) -> Option<&[rustls::DistinguishedName]> {
        self.webpki.root_hint_subjects()
    }
}

thread_local! {
    /// The last refusal of a verifier on this thread, with what the certificate said.
    /// rustls calls the verifier on the thread that drives the connection, inside the read
    /// or write that then fails, so the stream picks it up right there ([`explain`]).
    static LAST_REFUSED: RefCell<Option<TlsError>> = const { RefCell::new(None) };
}

/// An I/O error from a TLS stream, with a refused certificate explained: the error then
/// holds a [`TlsError`] (same kind). Other errors pass unchanged.
pub(crate) fn explain(e: std::io::Error) -> std::io::Error {
    let Some(rustls::Error::InvalidCertificate(cause)) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    else {
        return e;
    };
    // rustls keeps a failed connection's error and returns it again on later calls: the
    // refusal stays there, compared by what it says (OtherError never compares equal).
    let cause = format!("{cause:?}");
    let known = LAST_REFUSED.with(|last| {
        last.borrow()
            .as_ref()
            .filter(|t| matches!(&*t.source, rustls::Error::InvalidCertificate(c) if format!("{c:?}") == cause))
            .cloned()
    });
    match known {
        Some(t) => std::io::Error::new(e.kind(), t),
        None => e,
    }
}

/// Why a server's certificate was refused ([`TlsError::kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsErrorKind {
    /// Its issuer is not trusted (a private CA, or a self-signed certificate not given).
    UnknownIssuer,
    /// It is not valid for the name the client connected with.
    NameMismatch,
    /// It has no subject alternative names, so it is valid for no name.
    NoSubjectAltNames,
    /// Its validity period ended.
    Expired,
    /// Its validity period has not begun.
    NotValidYet,
    /// It is a CA certificate (`basicConstraints CA:TRUE`) used as the server's and was
    /// not itself given as trusted.
    CaCertificate,
    /// Another refusal (the rustls error says which).
    Other,
}

/// A server's certificate that was refused, explained: [`Display`](fmt::Display) is one
/// sentence with the reason and the fix; [`TlsError::source`](std::error::Error::source)
/// is the rustls error. Carried inside the `io::Error` of a failed TLS connection:
///
/// ```no_run
/// # fn f(e: &std::io::Error) {
/// if let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<benchlink_std::net::TlsError>()) {
///     eprintln!("{:?}: {tls}", tls.kind());
/// }
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct TlsError {
    host: String,
    kind: TlsErrorKind,
    certificate: Option<Box<CertificateFacts>>,
    now: i64,
    source: Box<rustls::Error>,
}

/// What the server's certificate says, for the words.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CertificateFacts {
    subject: String,
    issuer: String,
    /// Subject alternative names as OpenSSL prints them (`DNS:localhost`, `IP:127.0.0.1`).
    names: Vec<String>,
    not_before: i64,
    not_after: i64,
}

impl CertificateFacts {
    fn read(der: &[u8]) -> Option<CertificateFacts> {
        let (_, cert) = X509Certificate::from_der(der).ok()?;
        let names = match cert.subject_alternative_name() {
            Ok(Some(san)) => san.value.general_names.iter().filter_map(name).collect(),
            _ => Vec::new(),
        };
        Some(CertificateFacts {
            subject: cert.subject().to_string(),
            issuer: cert.issuer().to_string(),
            names,
            not_before: cert.validity().not_before.timestamp(),
            not_after: cert.validity().not_after.timestamp(),
        })
    }
}

/// One subject alternative name as OpenSSL prints it.
fn name(n: &GeneralName<'_>) -> Option<String> {
    match n {
        GeneralName::DNSName(d) => Some(format!("DNS:{d}")),
        GeneralName::IPAddress(b) => {
            let ip = match b.len() {
                4 => <[u8; 4]>::try_from(*b).ok().map(IpAddr::from),
                16 => <[u8; 16]>::try_from(*b).ok().map(IpAddr::from),
                _ => None,
            }?;
            Some(format!("IP:{ip}"))
        }
        GeneralName::URI(u) => Some(format!("URI:{u}")),
        GeneralName::RFC822Name(m) => Some(format!("email:{m}")),
        _ => None,
    }
}

impl TlsError {
    fn new(
        server_name: &ServerName<'_>,
        error: &rustls::Error,
        end_entity: Option<&CertificateDer<'_>>,
        now: UnixTime,
    ) -> TlsError {
        let certificate = end_entity
            .and_then(|c| CertificateFacts::read(c.as_ref()))
            .map(Box::new);
        let kind = match error {
            rustls::Error::InvalidCertificate(c) => match c {
                CertificateError::UnknownIssuer => TlsErrorKind::UnknownIssuer,
                CertificateError::NotValidForName => TlsErrorKind::NameMismatch,
                CertificateError::NotValidForNameContext { presented, .. } => {
                    let none = presented.is_empty()
                        && certificate.as_ref().is_none_or(|f| f.names.is_empty());
                    if none {
                        TlsErrorKind::NoSubjectAltNames
                    } else {
                        TlsErrorKind::NameMismatch
                    }
                }
                CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                    TlsErrorKind::Expired
                }
                CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                    TlsErrorKind::NotValidYet
                }
                CertificateError::Other(other)
                    if matches!(
                        other.0.downcast_ref::<webpki::Error>(),
                        Some(webpki::Error::CaUsedAsEndEntity)
                    ) =>
                {
                    TlsErrorKind::CaCertificate
                }
                _ => TlsErrorKind::Other,
            },
            _ => TlsErrorKind::Other,
        };
        TlsError {
            host: server_name.to_str().into_owned(),
            kind,
            certificate,
            now: i64::try_from(now.as_secs()).unwrap_or(i64::MAX),
            source: Box::new(error.clone()),
        }
    }

    /// Why the certificate was refused.
    pub fn kind(&self) -> TlsErrorKind {
        self.kind
    }

    /// The name the client connected with (a DNS name or an IP address).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The subject alternative names of the server's certificate, as OpenSSL prints
    /// them (`DNS:localhost`, `IP:127.0.0.1`); empty when it has none (or could not be
    /// read).
    pub fn certificate_names(&self) -> &[String] {
        self.certificate.as_ref().map_or(&[], |c| &c.names)
    }

    /// The rustls error behind this one.
    pub fn rustls(&self) -> &rustls::Error {
        &self.source
    }

    /// ` (CN=…)` after "the certificate of the server H", when the subject is known.
    fn subject(&self) -> String {
        match &self.certificate {
            Some(c) if !c.subject.is_empty() => format!(" ({})", c.subject),
            _ => String::new(),
        }
    }

    /// `subjectAltName=DNS:h` or `IP:h` for the host.
    fn san_for_host(&self) -> String {
        if self.host.parse::<IpAddr>().is_ok() {
            format!("IP:{}", self.host)
        } else {
            format!("DNS:{}", self.host)
        }
    }
}

/// `2026-01-31 12:00:00 UTC`.
fn utc(seconds: i64) -> String {
    match ASN1Time::from_timestamp(seconds) {
        Ok(t) => {
            let d = t.to_datetime();
            format!(
                "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
                d.year(),
                u8::from(d.month()),
                d.day(),
                d.hour(),
                d.minute(),
                d.second()
            )
        }
        Err(_) => format!("{seconds} s after 1970"),
    }
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = &self.host;
        let subject = self.subject();
        let facts = self.certificate.as_ref();
        match self.kind {
            TlsErrorKind::UnknownIssuer => match facts {
                Some(c) if c.issuer == c.subject => write!(
                    f,
                    "the certificate of the server {host}{subject} is self-signed and not trusted: \
                     give that certificate (its PEM file) with --cacert or SSL_CERT_FILE"
                ),
                Some(c) => write!(
                    f,
                    "the certificate of the server {host}{subject} was issued by {}, which is not \
                     a trusted CA: give that CA's certificate (PEM) with --cacert or SSL_CERT_FILE",
                    c.issuer
                ),
                None => write!(
                    f,
                    "the certificate of the server {host} was issued by a CA that is not trusted: \
                     give that CA's certificate (PEM) with --cacert or SSL_CERT_FILE"
                ),
            },
            TlsErrorKind::NameMismatch => {
                let names = self.certificate_names();
                let names = if names.is_empty() {
                    match &*self.source {
                        rustls::Error::InvalidCertificate(
                            CertificateError::NotValidForNameContext { presented, .. },
                        ) => presented.join(", "),
                        _ => String::new(),
                    }
                } else {
                    names.join(", ")
                };
                write!(
                    f,
                    "the certificate of the server {host}{subject} is not valid for the name {host}: \
                     it is for {names}; connect with one of those names, or reissue the certificate \
                     with subjectAltName={}",
                    self.san_for_host()
                )
            }
            TlsErrorKind::NoSubjectAltNames => write!(
                f,
                "the certificate of the server {host}{subject} has no subject alternative names, \
                 so it is valid for no name (the subject's CN is not used, as in curl and Python): \
                 reissue it with its names, e.g. -addext subjectAltName={}",
                self.san_for_host()
            ),
            TlsErrorKind::Expired => {
                let not_after = match (&*self.source, facts) {
                    (_, Some(c)) => c.not_after,
                    (
                        rustls::Error::InvalidCertificate(CertificateError::ExpiredContext {
                            not_after,
                            ..
                        }),
                        None,
                    ) => i64::try_from(not_after.as_secs()).unwrap_or(i64::MAX),
                    _ => return write!(f, "the certificate of the server {host} has expired: renew it on the server, or set this machine's clock right"),
                };
                write!(
                    f,
                    "the certificate of the server {host}{subject} expired on {}",
                    utc(not_after)
                )?;
                if let Some(c) = facts {
                    write!(f, " (valid from {})", utc(c.not_before))?;
                }
                write!(
                    f,
                    "; it is now {}: renew the certificate on the server, or set this machine's clock right",
                    utc(self.now)
                )
            }
            TlsErrorKind::NotValidYet => {
                let not_before = match (&*self.source, facts) {
                    (_, Some(c)) => c.not_before,
                    (
                        rustls::Error::InvalidCertificate(CertificateError::NotValidYetContext {
                            not_before,
                            ..
                        }),
                        None,
                    ) => i64::try_from(not_before.as_secs()).unwrap_or(i64::MAX),
                    _ => return write!(f, "the certificate of the server {host} is not valid yet: check this machine's clock"),
                };
                write!(
                    f,
                    "the certificate of the server {host}{subject} is not valid before {}",
                    utc(not_before)
                )?;
                if let Some(c) = facts {
                    write!(f, " (valid until {})", utc(c.not_after))?;
                }
                write!(
                    f,
                    "; it is now {}: check this machine's clock, or use a certificate valid now",
                    utc(self.now)
                )
            }
            TlsErrorKind::CaCertificate => write!(
                f,
                "the certificate of the server {host}{subject} is a CA certificate \
                 (basicConstraints CA:TRUE), accepted as a server's certificate only when that \
                 exact certificate is given with --cacert or SSL_CERT_FILE: give it there, or \
                 serve a certificate issued by the CA"
            ),
            TlsErrorKind::Other => write!(
                f,
                "the certificate of the server {host}{subject} was refused: {}",
                self.source
            ),
        }
    }
}

impl std::error::Error for TlsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair, SanType,
    };
    use std::time::{Duration, SystemTime};

    fn cert(
        ca: bool,
        sans: &[SanType],
        adjust: impl FnOnce(&mut CertificateParams),
    ) -> CertificateDer<'static> {
        let mut p = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "localhost");
        p.distinguished_name = dn;
        p.subject_alt_names = sans.to_vec();
        if ca {
            p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        }
        adjust(&mut p);
        let key = KeyPair::generate().expect("key");
        p.self_signed(&key).expect("certificate").der().clone()
    }

    fn localhost_sans() -> Vec<SanType> {
        vec![
            SanType::IpAddress(IpAddr::from([127, 0, 0, 1])),
            SanType::DnsName("localhost".try_into().expect("name")),
        ]
    }

    fn verifier(given: &[CertificateDer<'static>]) -> Verifier {
        let mut roots = RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for c in given {
            roots.add(c.clone()).expect("root");
        }
        Verifier::new(roots, given.to_vec(), crate::net::crypto_provider()).expect("verifier")
    }

    fn now() -> UnixTime {
        UnixTime::since_unix_epoch(
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or(Duration::ZERO),
        )
    }

    /// The verdict for `end_entity` presented as `host`: Ok, or the refusal explained.
    fn verdict(
        v: &Verifier,
        end_entity: &CertificateDer<'_>,
        host: &str,
    ) -> Result<(), Box<TlsError>> {
        let name = ServerName::try_from(host.to_owned()).expect("server name");
        v.verify_server_cert(end_entity, &[], &name, &[], now())
            .map(|_| ())
            .map_err(|e| {
                LAST_REFUSED
                    .with(|l| l.borrow_mut().take())
                    .filter(|t| format!("{:?}", t.rustls()) == format!("{e:?}"))
                    .map(Box::new)
                    .expect("the refusal explained")
            })
    }

    #[test]
    fn a_given_ca_certificate_is_trusted_as_itself_with_its_names_and_dates_checked() {
        let c = cert(true, &localhost_sans(), |_| {});
        let v = verifier(std::slice::from_ref(&c));
        assert!(verdict(&v, &c, "127.0.0.1").is_ok());
        assert!(verdict(&v, &c, "localhost").is_ok());
        let e = verdict(&v, &c, "example.com").expect_err("another name");
        assert_eq!(e.kind(), TlsErrorKind::NameMismatch);
        assert_eq!(e.certificate_names(), ["IP:127.0.0.1", "DNS:localhost"]);
        // Not given: refused as a CA certificate.
        let e = verdict(&verifier(&[]), &c, "localhost").expect_err("not given");
        assert_eq!(e.kind(), TlsErrorKind::CaCertificate);
        // Another certificate given does not make it trusted.
        let other = cert(true, &localhost_sans(), |_| {});
        let e = verdict(&verifier(&[other]), &c, "localhost").expect_err("not this one");
        assert_eq!(e.kind(), TlsErrorKind::CaCertificate);
    }

    #[test]
    fn a_given_certificate_for_another_purpose_or_out_of_date_is_refused() {
        let client_only = cert(true, &localhost_sans(), |p| {
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        });
        let v = verifier(std::slice::from_ref(&client_only));
        let e = verdict(&v, &client_only, "localhost").expect_err("not for servers");
        assert_eq!(e.kind(), TlsErrorKind::Other);
        assert!(
            matches!(
                e.rustls(),
                rustls::Error::InvalidCertificate(CertificateError::InvalidPurpose)
            ),
            "{e}"
        );
        let expired = cert(true, &localhost_sans(), |p| {
            p.not_before = rcgen::date_time_ymd(2000, 1, 1);
            p.not_after = rcgen::date_time_ymd(2001, 2, 3);
        });
        let v = verifier(std::slice::from_ref(&expired));
        let e = verdict(&v, &expired, "localhost").expect_err("expired");
        assert_eq!(e.kind(), TlsErrorKind::Expired);
        assert!(
            e.to_string().starts_with(
                "the certificate of the server localhost (CN=localhost) expired on 2001-02-03 \
                 00:00:00 UTC (valid from 2000-01-01 00:00:00 UTC); it is now "
            ),
            "{e}"
        );
        let no_names = cert(true, &[], |_| {});
        let v = verifier(std::slice::from_ref(&no_names));
        let e = verdict(&v, &no_names, "localhost").expect_err("no SAN");
        assert_eq!(e.kind(), TlsErrorKind::NoSubjectAltNames);
    }

    #[test]
    fn words_without_the_certificate() {
        let name = ServerName::try_from("10.0.0.1").expect("name");
        let at = UnixTime::since_unix_epoch(Duration::from_secs(86_400));
        let mismatch = CertificateError::NotValidForNameContext {
            expected: name.to_owned(),
            presented: vec!["DnsName(\"a.example\")".into()],
        };
        let e = TlsError::new(&name, &mismatch.into(), None, at);
        assert_eq!(
            e.to_string(),
            "the certificate of the server 10.0.0.1 is not valid for the name 10.0.0.1: it is \
             for DnsName(\"a.example\"); connect with one of those names, or reissue the \
             certificate with subjectAltName=IP:10.0.0.1"
        );
        let expired = CertificateError::ExpiredContext {
            time: at,
            not_after: UnixTime::since_unix_epoch(Duration::from_secs(3_600)),
        };
        let e = TlsError::new(&name, &expired.into(), None, at);
        assert_eq!(
            e.to_string(),
            "the certificate of the server 10.0.0.1 expired on 1970-01-01 01:00:00 UTC; it is \
             now 1970-01-02 00:00:00 UTC: renew the certificate on the server, or set this \
             machine's clock right"
        );
        let e = TlsError::new(&name, &CertificateError::UnknownIssuer.into(), None, at);
        assert_eq!(
            e.to_string(),
            "the certificate of the server 10.0.0.1 was issued by a CA that is not trusted: give \
             that CA's certificate (PEM) with --cacert or SSL_CERT_FILE"
        );
    }
}

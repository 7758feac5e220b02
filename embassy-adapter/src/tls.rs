//! TLS 1.3 as a [`Transport`] (feature `tls`): [`TlsTransport`] carries `https://` and
//! `wss://` connections over an embassy-net socket with `embedded-tls` (no_std, no
//! allocator), and plain `http://` / `ws://` ones over the same socket. The URL chooses:
//! the messaging link asks for TLS when its endpoint is `wss://`, the benchmark client
//! when it was made from an `https://` URL ([`bench::parse_url`](crate::bench::parse_url)).
//!
//! **Verification is always on** — there is no switch to turn it off:
//!
//! - the server's chain must lead to one of the [`TrustAnchors`] the firmware was built
//!   with (DER certificates; a board's build script turns PEM files into them): each
//!   certificate is checked with the key of the next one in the chain (which must be a
//!   CA: basicConstraints `cA`), until an anchor's key verifies one;
//! - the leaf's subjectAltName must name the URL's host: a DNS name (`*.` wildcards for
//!   one label), or an IP address when the host is an IP literal; the subject's CN is
//!   not looked at (as rustls and browsers do);
//! - signatures: ECDSA P-256 with SHA-256, in the certificates and in the handshake's
//!   CertificateVerify. Anything else (RSA, P-384) is refused as
//!   [`TlsRefusal::UnsupportedAlgorithm`]: embedded-tls's RSA needs an allocator;
//! - validity dates against [`unix_time`]: the time the board set with
//!   [`set_unix_time`] (QEMU: the host's clock at start; a board with an RTC or SNTP:
//!   that) plus the time since; before a board sets it, only the build-time floor of
//!   [`set_unix_time_floor`] is known, and a certificate that expired before it is
//!   refused, while `notBefore` cannot be checked.
//!
//! A refusal says why, in words ([`TlsRefusal`], in [`ConnectError::Tls`]).
//!
//! **Buffers** are the caller's ([`TlsBuffers`]): `rx` holds one whole TLS record as
//! it arrives (a server may send records of up to 16 KiB of plaintext: 16,640 bytes with
//! the record's overhead, [`MAX_RECORD`]), `tx` one outgoing record (any size from 1 KiB:
//! writes are cut into records that fit it; it also carries the ClientHello). With an
//! `rx` smaller than [`MAX_RECORD`] the client asks for a smaller record size with the
//! `max_fragment_length` extension (RFC 6066; the one embedded-tls sends —
//! `record_size_limit` of RFC 8449 it does not). OpenSSL-based servers (stunnel, nginx)
//! honour it; rustls and many hosted services ignore it, and their first record larger
//! than `rx` fails the connection with [`TlsRefusal::RecordTooLarge`] (during the
//! handshake) or an I/O error (after it). So a buffer of [`MAX_RECORD`] is the one that
//! works with every server.
//!
//! Reads and writes are cancel-safe as the [`Transport`] trait asks: a record is read
//! into `rx` and counted as it arrives (a dropped read goes on where it was), and a
//! record is written only once the TCP socket has room for all of it.

use core::sync::atomic::{AtomicU32, Ordering};

use der::Decode;
use embassy_time::{with_timeout, Duration, Instant};
use embedded_io_async::{ErrorType, Read, Write};
use embedded_tls::der_certificate::{DecodedCertificate, Time, ECDSA_SHA256};
use embedded_tls::{
    Aes128GcmSha256, CertificateRef, CertificateVerifyRef, CryptoProvider, FlushPolicy,
    MaxFragmentLength, SignatureScheme, TlsCipherSuite, TlsConfig, TlsConnection, TlsContext,
    TlsError, TlsVerifier,
};
use heapless::{String, Vec};
use p256::ecdsa::signature::Verifier as _;
use p256::ecdsa::{Signature, VerifyingKey};
use sha2::Digest;

use crate::transport::{ConnectError, TcpTransport, Transport};

/// The largest TLS record a server may send: 16 KiB of plaintext, 256 bytes of
/// expansion and the 5-byte header, rounded as embedded-tls counts it.
pub const MAX_RECORD: usize = 16_640;

/// Bytes of `tx` a record needs beyond its plaintext (embedded-tls's reserve).
const RECORD_OVERHEAD: usize = 128;

/// How long [`TlsTransport::close`] waits to send `close_notify`.
const CLOSE_GRACE: Duration = Duration::from_millis(500);

/// The longest host name the verifier keeps.
const MAX_HOST: usize = 64;

/// Why a TLS connection was refused (or failed while being set up), in words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TlsRefusal {
    /// No trust anchor signed the server's chain (an unrelated or missing CA).
    UnknownIssuer,
    /// The certificate does not name the host of the URL.
    WrongName,
    /// A certificate of the chain expired (or is not valid yet).
    Expired,
    /// A signature did not verify (a certificate's, or the handshake's).
    BadSignature,
    /// The server uses an algorithm the device cannot verify (RSA, P-384, …).
    UnsupportedAlgorithm,
    /// A certificate could not be read (malformed DER, a chain too long, a
    /// non-CA certificate used as an issuer).
    BadCertificate,
    /// The server sent a TLS alert: its description code as TLS 1.3 numbers it (40
    /// handshake failure, 42 bad certificate, 48 unknown CA, …).
    Alert(u8),
    /// A record larger than the receive buffer (the server ignored
    /// `max_fragment_length`, or `rx` is smaller than a record it sends).
    RecordTooLarge,
    /// The connection closed or failed during the handshake.
    Closed,
    /// The handshake failed otherwise (a protocol error, no common cipher suite).
    Handshake,
}

impl TlsRefusal {
    /// What went wrong, in a few words.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsRefusal::UnknownIssuer => {
                "certificate refused: unknown issuer (not signed by a trusted CA)"
            }
            TlsRefusal::WrongName => {
                "certificate refused: wrong name (it does not name the URL's host)"
            }
            TlsRefusal::Expired => "certificate refused: expired or not yet valid",
            TlsRefusal::BadSignature => "certificate refused: bad signature",
            TlsRefusal::UnsupportedAlgorithm => {
                "certificate refused: unsupported algorithm (ECDSA P-256/SHA-256 only)"
            }
            TlsRefusal::BadCertificate => "certificate refused: malformed certificate or chain",
            TlsRefusal::Alert(code) => alert_name(code),
            TlsRefusal::RecordTooLarge => "TLS record larger than the receive buffer",
            TlsRefusal::Closed => "the connection closed during the TLS handshake",
            TlsRefusal::Handshake => "the TLS handshake failed",
        }
    }
}

impl core::fmt::Display for TlsRefusal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The server's alert, in words.
fn alert_name(code: u8) -> &'static str {
    match code {
        0 => "the server sent an alert: close_notify",
        10 => "the server sent an alert: unexpected_message",
        20 => "the server sent an alert: bad_record_mac",
        22 => "the server sent an alert: record_overflow",
        40 => "the server sent an alert: handshake_failure",
        42 => "the server sent an alert: bad_certificate",
        47 => "the server sent an alert: illegal_parameter",
        50 => "the server sent an alert: decode_error",
        51 => "the server sent an alert: decrypt_error",
        70 => "the server sent an alert: protocol_version",
        71 => "the server sent an alert: insufficient_security",
        80 => "the server sent an alert: internal_error",
        109 => "the server sent an alert: missing_extension",
        110 => "the server sent an alert: unsupported_extension",
        112 => "the server sent an alert: unrecognized_name",
        120 => "the server sent an alert: no_application_protocol",
        _ => "the server sent an alert",
    }
}

/// The certificates a device trusts (DER), compiled in.
#[derive(Debug, Clone, Copy)]
pub struct TrustAnchors<'a> {
    certs: &'a [&'a [u8]],
}

impl<'a> TrustAnchors<'a> {
    /// Trust `certs` (DER, one certificate each: CA certificates, or a server's own
    /// self-signed certificate).
    pub const fn new(certs: &'a [&'a [u8]]) -> Self {
        TrustAnchors { certs }
    }
}

/// The buffers of one TLS connection (see the module docs for their sizes).
pub struct TlsBuffers<'a> {
    /// One incoming record: [`MAX_RECORD`] for any server.
    pub rx: &'a mut [u8],
    /// One outgoing record (at least 1 KiB; 2–4 KiB is plenty).
    pub tx: &'a mut [u8],
}

/// Seconds since 1970 at boot (0: not known). 32 bits (until 2106): a Cortex-M has no
/// 64-bit atomics.
static UNIX_AT_BOOT: AtomicU32 = AtomicU32::new(0);
/// A time the device knows it is later than (the firmware's build, say).
static UNIX_FLOOR: AtomicU32 = AtomicU32::new(0);

fn secs32(secs: u64) -> u32 {
    u32::try_from(secs).unwrap_or(u32::MAX)
}

/// Tells the verifier the time: `unix_secs` now (from an RTC, SNTP, or on QEMU the
/// host's clock handed in at start). Certificates' `notBefore` and `notAfter` are then
/// checked against it and the time since.
pub fn set_unix_time(unix_secs: u64) {
    let at_boot = unix_secs.saturating_sub(Instant::now().as_secs());
    UNIX_AT_BOOT.store(secs32(at_boot).max(1), Ordering::Relaxed);
}

/// A time the device is certainly later than (e.g. the firmware's build time), used
/// while [`set_unix_time`] has not been called: a certificate that expired before it is
/// refused.
pub fn set_unix_time_floor(unix_secs: u64) {
    UNIX_FLOOR.store(secs32(unix_secs), Ordering::Relaxed);
}

/// The best time the device has: `(seconds since 1970, exact)`; not exact: only the
/// floor is known (0: nothing).
pub fn unix_time() -> (u64, bool) {
    match UNIX_AT_BOOT.load(Ordering::Relaxed) {
        0 => (UNIX_FLOOR.load(Ordering::Relaxed).into(), false),
        at_boot => (u64::from(at_boot) + Instant::now().as_secs(), true),
    }
}

/// A `rand_core` 0.9 RNG as the 0.6 one embedded-tls takes.
struct Rng06<'r, R>(&'r mut R);

impl<R: rand_core::RngCore> rand_core_06::RngCore for Rng06<'_, R> {
    fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.0.fill_bytes(dest);
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core_06::Error> {
        self.0.fill_bytes(dest);
        Ok(())
    }
}

impl<R: rand_core::CryptoRng> rand_core_06::CryptoRng for Rng06<'_, R> {}

/// Checks the server's certificate chain and handshake signature; keeps why it refused.
struct Verifier<'a> {
    anchors: TrustAnchors<'a>,
    host: String<MAX_HOST>,
    /// The leaf's public key (SEC1, P-256) and the transcript, for CertificateVerify.
    leaf_key: Option<VerifyingKey>,
    transcript: Option<<Aes128GcmSha256 as TlsCipherSuite>::Hash>,
    refusal: Option<TlsRefusal>,
}

impl Verifier<'_> {
    fn refuse(&mut self, why: TlsRefusal) -> TlsError {
        self.refusal = Some(why);
        TlsError::InvalidCertificate
    }
}

impl TlsVerifier<Aes128GcmSha256> for Verifier<'_> {
    fn set_hostname_verification(&mut self, hostname: &str) -> Result<(), TlsError> {
        self.host.clear();
        self.host
            .push_str(hostname)
            .map_err(|()| TlsError::InsufficientSpace)
    }

    fn verify_certificate(
        &mut self,
        transcript: &<Aes128GcmSha256 as TlsCipherSuite>::Hash,
        cert: CertificateRef,
    ) -> Result<(), TlsError> {
        let mut chain: Vec<&[u8], 4> = Vec::new();
        for entry in cert.entries.iter() {
            if let embedded_tls::CertificateEntryRef::X509(der) = entry {
                if chain.push(der).is_err() {
                    return Err(self.refuse(TlsRefusal::BadCertificate));
                }
            }
        }
        match check_chain(&chain, self.anchors, &self.host, unix_time()) {
            Ok(key) => {
                self.leaf_key = Some(key);
                self.transcript = Some(transcript.clone());
                Ok(())
            }
            Err(why) => Err(self.refuse(why)),
        }
    }

    fn verify_signature(&mut self, verify: CertificateVerifyRef) -> Result<(), TlsError> {
        if verify.signature_scheme != SignatureScheme::EcdsaSecp256r1Sha256 {
            return Err(self.refuse(TlsRefusal::UnsupportedAlgorithm));
        }
        let (Some(key), Some(transcript)) = (self.leaf_key.take(), self.transcript.take()) else {
            return Err(self.refuse(TlsRefusal::Handshake));
        };
        // What a TLS 1.3 CertificateVerify signs: 64 spaces, the context string, a zero byte,
        // then the transcript hash.
        let mut message: Vec<u8, 130> = Vec::new();
        let _ = message.resize(64, 0x20);
        let _ = message.extend_from_slice(b"TLS 1.3, server CertificateVerify\x00");
        let _ = message.extend_from_slice(&transcript.finalize());
        let verified = Signature::from_der(verify.signature)
            .is_ok_and(|sig| key.verify(&message, &sig).is_ok());
        if verified {
            Ok(())
        } else {
            Err(self.refuse(TlsRefusal::BadSignature))
        }
    }
}

/// Checks `chain` (leaf first) against `anchors` for `host` at `time`; the leaf's key.
///
/// One certificate is decoded at a time (each decoded certificate is about 2 KiB of
/// stack), in functions of their own whose frames reuse the same stack.
fn check_chain(
    chain: &[&[u8]],
    anchors: TrustAnchors<'_>,
    host: &str,
    time: (u64, bool),
) -> Result<VerifyingKey, TlsRefusal> {
    let leaf_der = chain.first().ok_or(TlsRefusal::BadCertificate)?;
    let (leaf_key, _) = inspect(leaf_der, Some(host), time)?;
    let mut current_der: &[u8] = leaf_der;
    let mut rest = chain.iter().skip(1);
    loop {
        // Issued by a trust anchor (or is one: a pinned self-signed certificate)?
        for anchor_der in anchors.certs {
            if *anchor_der == current_der {
                return Ok(leaf_key);
            }
            let Ok((anchor_key, _)) = inspect(anchor_der, None, time) else {
                continue;
            };
            if signed_by(current_der, &anchor_key)? {
                return Ok(leaf_key);
            }
        }
        // Else by the next certificate of the chain, which must be a CA.
        let Some(next_der) = rest.next() else {
            return Err(TlsRefusal::UnknownIssuer);
        };
        let (next_key, next_is_ca) = inspect(next_der, None, time)?;
        if !signed_by(current_der, &next_key)? {
            return Err(TlsRefusal::UnknownIssuer);
        }
        if !next_is_ca {
            return Err(TlsRefusal::BadCertificate);
        }
        current_der = next_der;
    }
}

/// Decodes one certificate, checks its dates (and, given a host, that it names it):
/// its key and whether it is a CA.
#[inline(never)]
fn inspect(
    der: &[u8],
    host: Option<&str>,
    (now, exact): (u64, bool),
) -> Result<(VerifyingKey, bool), TlsRefusal> {
    let cert = DecodedCertificate::from_der(der).map_err(|_| TlsRefusal::BadCertificate)?;
    if let Some(host) = host {
        if !names_host(&cert, host)? {
            return Err(TlsRefusal::WrongName);
        }
    }
    check_dates(&cert, now, exact)?;
    Ok((public_key(&cert)?, is_ca(&cert)))
}

/// Seconds since 1970 of a certificate time.
fn unix(time: &Time) -> u64 {
    match time {
        Time::UtcTime(t) => t.to_unix_duration().as_secs(),
        Time::GeneralTime(t) => t.to_unix_duration().as_secs(),
    }
}

fn check_dates(cert: &DecodedCertificate<'_>, now: u64, exact: bool) -> Result<(), TlsRefusal> {
    let validity = &cert.tbs_certificate.validity;
    if unix(&validity.not_after) < now || (exact && unix(&validity.not_before) > now) {
        return Err(TlsRefusal::Expired);
    }
    Ok(())
}

/// The P-256 key of `cert`.
fn public_key(cert: &DecodedCertificate<'_>) -> Result<VerifyingKey, TlsRefusal> {
    let key = cert
        .tbs_certificate
        .subject_public_key_info
        .public_key
        .as_bytes()
        .ok_or(TlsRefusal::BadCertificate)?;
    VerifyingKey::from_sec1_bytes(key).map_err(|_| TlsRefusal::UnsupportedAlgorithm)
}

/// Whether `key` verifies the signature of the certificate `cert_der` (an unsupported
/// algorithm is an error, a key that does not verify is `false`).
#[inline(never)]
fn signed_by(cert_der: &[u8], key: &VerifyingKey) -> Result<bool, TlsRefusal> {
    let cert = DecodedCertificate::from_der(cert_der).map_err(|_| TlsRefusal::BadCertificate)?;
    if cert.signature_algorithm != ECDSA_SHA256 {
        return Err(TlsRefusal::UnsupportedAlgorithm);
    }
    let signature = cert
        .signature
        .as_bytes()
        .and_then(|sig| Signature::from_der(sig).ok())
        .ok_or(TlsRefusal::BadCertificate)?;
    let tbs = tbs_bytes(cert_der).ok_or(TlsRefusal::BadCertificate)?;
    Ok(key.verify(tbs, &signature).is_ok())
}

/// The DER of the TBSCertificate inside a certificate's DER (what is signed).
fn tbs_bytes(cert: &[u8]) -> Option<&[u8]> {
    use der::{Reader, SliceReader};
    let mut reader = SliceReader::new(cert).ok()?;
    let outer = der::Header::decode(&mut reader).ok()?;
    outer.tag().assert_eq(der::Tag::Sequence).ok()?;
    reader.tlv_bytes().ok()
}

const BASIC_CONSTRAINTS: der::asn1::ObjectIdentifier =
    der::asn1::ObjectIdentifier::new_unwrap("2.5.29.19");
const SUBJECT_ALT_NAME: der::asn1::ObjectIdentifier =
    der::asn1::ObjectIdentifier::new_unwrap("2.5.29.17");

/// basicConstraints with `cA` true.
fn is_ca(cert: &DecodedCertificate<'_>) -> bool {
    let Some(extensions) = &cert.tbs_certificate.extensions else {
        return false;
    };
    extensions.iter().any(|e| {
        // OCTET STRING { SEQUENCE { BOOLEAN cA, … } }: 30 len 01 01 ff
        e.extn_id == BASIC_CONSTRAINTS
            && matches!(e.extn_value.value(), [0x30, _, 0x01, 0x01, ca, ..] if *ca != 0)
    })
}

/// Whether the subjectAltName of `cert` names `host` (a DNS name, or an IP literal).
fn names_host(cert: &DecodedCertificate<'_>, host: &str) -> Result<bool, TlsRefusal> {
    let ip = host.parse::<core::net::IpAddr>().ok();
    let Some(extensions) = &cert.tbs_certificate.extensions else {
        return Ok(false);
    };
    for ext in extensions.iter().filter(|e| e.extn_id == SUBJECT_ALT_NAME) {
        let mut names = ext.extn_value.value();
        // SEQUENCE OF GeneralName
        let (tag, body, _) = tlv(names).ok_or(TlsRefusal::BadCertificate)?;
        if tag != 0x30 {
            return Err(TlsRefusal::BadCertificate);
        }
        names = body;
        while !names.is_empty() {
            let (tag, value, rest) = tlv(names).ok_or(TlsRefusal::BadCertificate)?;
            names = rest;
            let matched = match (tag, ip) {
                // dNSName [2] IA5String
                (0x82, None) => core::str::from_utf8(value).is_ok_and(|n| dns_matches(n, host)),
                // iPAddress [7] OCTET STRING
                (0x87, Some(core::net::IpAddr::V4(a))) => value == a.octets(),
                (0x87, Some(core::net::IpAddr::V6(a))) => value == a.octets(),
                _ => false,
            };
            if matched {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// One DER TLV with a short or long length: (tag, value, rest).
fn tlv(bytes: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = bytes.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 2 {
            return None;
        }
        let (len_bytes, after) = rest.split_at_checked(n)?;
        rest = after;
        len_bytes.iter().fold(0, |l, b| l << 8 | usize::from(*b))
    };
    let (value, rest) = rest.split_at_checked(len)?;
    Some((tag, value, rest))
}

/// A certificate's DNS name against the host: equal (ignoring ASCII case), or `*.rest`
/// for one more label in front of `rest`.
fn dns_matches(name: &str, host: &str) -> bool {
    if let Some(suffix) = name.strip_prefix("*.") {
        // At least two labels after the wildcard; the wildcard covers exactly one.
        return suffix.contains('.')
            && host.split_once('.').is_some_and(|(label, rest)| {
                !label.is_empty() && rest.eq_ignore_ascii_case(suffix)
            });
    }
    name.eq_ignore_ascii_case(host)
}

/// embedded-tls's crypto: the board's RNG and the verifier.
struct Provider<'p, 'a, R> {
    rng: Rng06<'p, R>,
    verifier: &'p mut Verifier<'a>,
}

impl<R: rand_core::RngCore + rand_core::CryptoRng> CryptoProvider for Provider<'_, '_, R> {
    type CipherSuite = Aes128GcmSha256;
    type Signature = p256::ecdsa::DerSignature;

    fn rng(&mut self) -> impl embedded_tls::CryptoRngCore {
        &mut self.rng
    }

    fn verifier(&mut self) -> Result<&mut impl TlsVerifier<Self::CipherSuite>, TlsError> {
        Ok(&mut *self.verifier)
    }
}

/// The refusal a failed handshake stands for.
fn refusal_of(e: TlsError) -> TlsRefusal {
    match e {
        TlsError::HandshakeAborted(_, description) => TlsRefusal::Alert(description as u8),
        TlsError::InsufficientSpace => TlsRefusal::RecordTooLarge,
        TlsError::ConnectionClosed | TlsError::IoError | TlsError::Io(_) => TlsRefusal::Closed,
        TlsError::InvalidSignatureScheme => TlsRefusal::UnsupportedAlgorithm,
        TlsError::InvalidSignature => TlsRefusal::BadSignature,
        TlsError::InvalidCertificate | TlsError::DecodeError => TlsRefusal::BadCertificate,
        _ => TlsRefusal::Handshake,
    }
}

/// What a failed handshake is to the clients: a refusal ([`ConnectError::Tls`], final for
/// their retries: trying again meets the same certificate), except a connection that
/// closed or failed before the server said anything against it ([`TlsRefusal::Closed`]:
/// a cut in the middle of the handshake, a reset). That one is a failure of the
/// connection, retried as one: reported as [`ConnectError::Refused`] (the connection was
/// not made; `ConnectError` has no variant of its own for it).
fn connect_error(why: TlsRefusal) -> ConnectError {
    match why {
        TlsRefusal::Closed => ConnectError::Refused,
        refused => ConnectError::Tls(refused),
    }
}

/// A [`Transport`] that speaks TLS 1.3 when asked ([`Transport::connect_tls`]: `https://`,
/// `wss://`) and plain TCP otherwise, over one embassy-net socket, with the caller's
/// buffers reused for every connection. `R` is the board's cryptographic RNG (the key
/// exchange's randomness): a hardware RNG, or a CSPRNG seeded from one.
pub struct TlsTransport<'a, R> {
    conn: TlsConnection<'a, TcpTransport<'a>, Aes128GcmSha256>,
    anchors: TrustAnchors<'a>,
    rng: R,
    /// Asked for when `rx` is smaller than [`MAX_RECORD`].
    max_fragment: Option<MaxFragmentLength>,
    /// The most plaintext one write puts in a record.
    max_write: usize,
    /// The open connection is TLS.
    tls: bool,
    /// TLS handshakes completed.
    handshakes: u32,
    /// The open TLS connection has given application data (see [`Transport::readable`]).
    app_data_seen: bool,
}

impl<'a, R: rand_core::RngCore + rand_core::CryptoRng> TlsTransport<'a, R> {
    /// TLS over `tcp`, trusting `anchors`, with `buffers` (see the module docs), keys
    /// from `rng`.
    pub fn new(
        tcp: TcpTransport<'a>,
        buffers: TlsBuffers<'a>,
        anchors: TrustAnchors<'a>,
        rng: R,
    ) -> Self {
        let rx_len = buffers.rx.len();
        let max_write = buffers.tx.len().saturating_sub(RECORD_OVERHEAD).max(1);
        let max_fragment = [
            (4096, MaxFragmentLength::Bits12),
            (2048, MaxFragmentLength::Bits11),
            (1024, MaxFragmentLength::Bits10),
            (512, MaxFragmentLength::Bits9),
        ]
        .into_iter()
        .find(|(len, _)| rx_len >= len + 256 + 5)
        .map(|(_, bits)| bits)
        .filter(|_| rx_len < MAX_RECORD);
        let mut conn = TlsConnection::new(tcp, buffers.rx, buffers.tx);
        conn.set_flush_policy(FlushPolicy::Relaxed);
        TlsTransport {
            conn,
            anchors,
            rng,
            max_fragment,
            max_write,
            tls: false,
            handshakes: 0,
            app_data_seen: false,
        }
    }

    /// TLS handshakes completed so far.
    pub fn handshakes(&self) -> u32 {
        self.handshakes
    }

    /// The TCP transport underneath (to tune its socket).
    pub fn tcp_mut(&mut self) -> &mut TcpTransport<'a> {
        self.conn.delegate_mut()
    }

    /// Waits until the socket can take `n` more bytes at once (so that a record, once
    /// started, is written whole: cancel-safe).
    async fn room_for(&mut self, n: usize) -> Result<(), TlsError> {
        loop {
            let tcp = self.conn.delegate_mut();
            if tcp.send_room() >= n || tcp.send_room() == tcp.send_capacity() {
                return Ok(());
            }
            Write::flush(tcp).await.map_err(|_| TlsError::IoError)?;
        }
    }
}

impl<R> core::fmt::Debug for TlsTransport<'_, R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TlsTransport")
            .field("tls", &self.tls)
            .field("handshakes", &self.handshakes)
            .finish_non_exhaustive()
    }
}

impl<R> ErrorType for TlsTransport<'_, R> {
    type Error = TlsError;
}

impl<R: rand_core::RngCore + rand_core::CryptoRng> Read for TlsTransport<'_, R> {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
        if !self.tls {
            return Read::read(self.conn.delegate_mut(), buf)
                .await
                .map_err(|_| TlsError::IoError);
        }
        match self.conn.read(buf).await {
            // The server's close_notify: the end of the stream.
            Err(TlsError::ConnectionClosed) => Ok(0),
            Ok(n) => {
                self.app_data_seen |= n > 0;
                Ok(n)
            }
            other => other,
        }
    }
}

impl<R: rand_core::RngCore + rand_core::CryptoRng> Write for TlsTransport<'_, R> {
    async fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
        if !self.tls {
            return Write::write(self.conn.delegate_mut(), buf)
                .await
                .map_err(|_| TlsError::IoError);
        }
        let n = buf.len().min(self.max_write);
        // Header, content type and tag: 22 bytes; the rest of the reserve is slack.
        self.room_for(n + RECORD_OVERHEAD).await?;
        let taken = self.conn.write(buf.get(..n).unwrap_or_default()).await?;
        self.conn.flush().await?;
        Ok(taken)
    }

    async fn flush(&mut self) -> Result<(), Self::Error> {
        if self.tls {
            self.conn.flush().await?;
        }
        Write::flush(self.conn.delegate_mut())
            .await
            .map_err(|_| TlsError::IoError)
    }
}

impl<R: rand_core::RngCore + rand_core::CryptoRng> Transport for TlsTransport<'_, R> {
    async fn connect(&mut self, host: &str, port: u16) -> Result<(), ConnectError> {
        self.tls = false;
        self.app_data_seen = false;
        self.conn.delegate_mut().connect(host, port).await
    }

    async fn connect_tls(&mut self, host: &str, port: u16) -> Result<(), ConnectError> {
        self.tls = false;
        self.app_data_seen = false;
        self.conn.delegate_mut().connect(host, port).await?;
        self.conn.reset();
        let mut verifier = Verifier {
            anchors: self.anchors,
            host: String::new(),
            leaf_key: None,
            transcript: None,
            refusal: None,
        };
        let mut config = TlsConfig::new().with_server_name(host);
        if let Some(bits) = self.max_fragment {
            config = config.with_max_fragment_length(bits);
        }
        let provider = Provider {
            rng: Rng06(&mut self.rng),
            verifier: &mut verifier,
        };
        let opened = self.conn.open(TlsContext::new(&config, provider)).await;
        match opened {
            Ok(()) => {
                self.tls = true;
                self.handshakes = self.handshakes.wrapping_add(1);
                Ok(())
            }
            Err(e) => {
                let why = verifier.refusal.unwrap_or(refusal_of(e));
                self.conn.delegate_mut().close().await;
                Err(connect_error(why))
            }
        }
    }

    async fn close(&mut self) {
        if self.tls {
            self.tls = false;
            let _ = with_timeout(CLOSE_GRACE, self.conn.close_notify()).await;
        }
        self.conn.delegate_mut().close().await;
    }

    fn peer_closed(&self) -> bool {
        if self.tls {
            // A TLS server sends session tickets nobody asked for: only the end of the
            // stream counts.
            self.conn.delegate().finished()
        } else {
            self.conn.delegate().peer_closed()
        }
    }

    fn readable(&self) -> bool {
        // Over TLS, bytes waiting may be records that carry no data: the session tickets a
        // TLS 1.3 server sends after the handshake, unasked. Reading them would wait for
        // data the server sends only once asked (the WebSocket upgrade, an HTTP request),
        // so a new connection is not readable until it has given data: the first move is
        // the client's write.
        let readable = self.conn.delegate().readable();
        if self.tls {
            readable && self.app_data_seen
        } else {
            readable
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_cover_one_label() {
        assert!(dns_matches("localhost", "LOCALHOST"));
        assert!(dns_matches("*.example.com", "api.example.com"));
        assert!(!dns_matches("*.example.com", "a.b.example.com"));
        assert!(!dns_matches("*.example.com", "example.com"));
        assert!(!dns_matches("*.com", "example.com"));
        assert!(!dns_matches("example.com", "example.org"));
    }

    #[test]
    fn tlv_reads_short_and_long_lengths() {
        assert_eq!(
            tlv(&[0x82, 2, b'a', b'b', 9]),
            Some((0x82, &b"ab"[..], &[9][..]))
        );
        let mut long = [0u8; 4 + 200];
        long[..4].copy_from_slice(&[0x30, 0x82, 0, 200]);
        assert_eq!(
            tlv(&long).map(|(t, v, r)| (t, v.len(), r.len())),
            Some((0x30, 200, 0))
        );
        assert_eq!(tlv(&[0x30, 5, 1]), None);
    }

    /// Test certificates made here, DER by hand, signed with p256 (no generator crate).
    mod make {
        extern crate std;

        use p256::ecdsa::signature::Signer as _;
        use p256::ecdsa::{Signature, SigningKey};

        pub fn tlv(tag: u8, content: &[u8]) -> std::vec::Vec<u8> {
            let mut out = std::vec![tag];
            let len = content.len();
            if len < 0x80 {
                out.push(len as u8);
            } else if len < 0x100 {
                out.extend([0x81, len as u8]);
            } else {
                out.extend([0x82, (len >> 8) as u8, len as u8]);
            }
            out.extend_from_slice(content);
            out
        }

        fn seq(parts: &[&[u8]]) -> std::vec::Vec<u8> {
            tlv(0x30, &parts.concat())
        }

        const ECDSA_SHA256: &[u8] = &[0x06, 8, 0x2a, 0x86, 0x48, 0xce, 0x3d, 4, 3, 2];
        pub const ECDSA_SHA384: &[u8] = &[0x06, 8, 0x2a, 0x86, 0x48, 0xce, 0x3d, 4, 3, 3];

        fn name(cn: &str) -> std::vec::Vec<u8> {
            let atv = seq(&[&[0x06, 3, 0x55, 4, 3], &tlv(0x0c, cn.as_bytes())]);
            seq(&[&tlv(0x31, &atv)])
        }

        pub fn key(seed: u8) -> SigningKey {
            SigningKey::from_bytes(&[seed; 32].into()).unwrap()
        }

        /// One certificate's parameters; `Default` is a leaf for `localhost` and
        /// 127.0.0.1, valid through 2025 and 2026.
        pub struct Cert<'a> {
            pub subject: &'a str,
            pub key: SigningKey,
            pub issuer: &'a str,
            pub issuer_key: SigningKey,
            pub not_before: &'a str,
            pub not_after: &'a str,
            pub dns: &'a [&'a str],
            pub ips: &'a [[u8; 4]],
            pub ca: bool,
            /// The signature algorithm it claims (and, when not ECDSA/SHA-256, a
            /// signature that is still P-256/SHA-256).
            pub algorithm: &'a [u8],
            /// The subject's key as an SPKI public key instead of `key`'s.
            pub raw_key: Option<&'a [u8]>,
            pub tamper: bool,
        }

        impl Default for Cert<'_> {
            fn default() -> Self {
                Cert {
                    subject: "leaf",
                    key: key(1),
                    issuer: "ca",
                    issuer_key: key(2),
                    not_before: "250101000000Z",
                    not_after: "270101000000Z",
                    dns: &["localhost"],
                    ips: &[[127, 0, 0, 1]],
                    ca: false,
                    algorithm: ECDSA_SHA256,
                    raw_key: None,
                    tamper: false,
                }
            }
        }

        impl Cert<'_> {
            pub fn der(&self) -> std::vec::Vec<u8> {
                let algorithm = seq(&[self.algorithm]);
                let point = self.key.verifying_key().to_encoded_point(false);
                let public = self.raw_key.unwrap_or(point.as_bytes());
                let spki = seq(&[
                    &seq(&[
                        &[0x06, 7, 0x2a, 0x86, 0x48, 0xce, 0x3d, 2, 1],
                        &[0x06, 8, 0x2a, 0x86, 0x48, 0xce, 0x3d, 3, 1, 7],
                    ]),
                    &tlv(0x03, &[&[0u8][..], public].concat()),
                ]);
                let mut names = std::vec::Vec::new();
                for dns in self.dns {
                    names.extend(tlv(0x82, dns.as_bytes()));
                }
                for ip in self.ips {
                    names.extend(tlv(0x87, ip));
                }
                let san = seq(&[&[0x06, 3, 0x55, 0x1d, 0x11], &tlv(0x04, &tlv(0x30, &names))]);
                let basic = seq(&[
                    &[0x06, 3, 0x55, 0x1d, 0x13],
                    &[0x01, 1, 0xff],
                    &tlv(0x04, &seq(&[&[0x01, 1, if self.ca { 0xff } else { 0 }]])),
                ]);
                let tbs = seq(&[
                    &[0xa0, 3, 0x02, 1, 2],
                    &[0x02, 1, 7],
                    &algorithm,
                    &name(self.issuer),
                    &seq(&[
                        &tlv(0x17, self.not_before.as_bytes()),
                        &tlv(0x17, self.not_after.as_bytes()),
                    ]),
                    &name(self.subject),
                    &spki,
                    &tlv(0xa3, &seq(&[&basic, &san])),
                ]);
                let signed: &[u8] = if self.tamper { b"something else" } else { &tbs };
                let signature: Signature = self.issuer_key.sign(signed);
                let signature = signature.to_der();
                seq(&[
                    &tbs,
                    &algorithm,
                    &tlv(0x03, &[&[0u8][..], signature.as_bytes()].concat()),
                ])
            }
        }

        /// A CA certificate, self-signed with `key(seed)`.
        pub fn ca(cn: &str, seed: u8) -> std::vec::Vec<u8> {
            Cert {
                subject: cn,
                key: key(seed),
                issuer: cn,
                issuer_key: key(seed),
                dns: &[],
                ips: &[],
                ca: true,
                ..Cert::default()
            }
            .der()
        }
    }

    use make::{ca, key, Cert};

    /// 2026-01-01, exactly known.
    const NOW: (u64, bool) = (1_767_225_600, true);

    fn check(
        chain: &[&[u8]],
        anchors: &[&[u8]],
        host: &str,
        now: (u64, bool),
    ) -> Result<(), TlsRefusal> {
        check_chain(chain, TrustAnchors::new(anchors), host, now).map(|_| ())
    }

    #[test]
    fn a_leaf_from_a_trusted_ca_is_accepted_by_name_and_by_address() {
        let anchor = ca("ca", 2);
        let leaf = Cert::default().der();
        assert_eq!(check(&[&leaf], &[&anchor], "localhost", NOW), Ok(()));
        assert_eq!(check(&[&leaf], &[&anchor], "LOCALHOST", NOW), Ok(()));
        assert_eq!(check(&[&leaf], &[&anchor], "127.0.0.1", NOW), Ok(()));
        // Through an intermediate CA the server sends.
        let intermediate = Cert {
            subject: "intermediate",
            key: key(3),
            ca: true,
            dns: &[],
            ips: &[],
            ..Cert::default()
        }
        .der();
        let leaf = Cert {
            issuer: "intermediate",
            issuer_key: key(3),
            ..Cert::default()
        }
        .der();
        assert_eq!(
            check(&[&leaf, &intermediate], &[&anchor], "localhost", NOW),
            Ok(())
        );
    }

    #[test]
    fn wrong_names_are_refused_by_dns_name_and_by_ip_address() {
        let anchor = ca("ca", 2);
        let leaf = Cert::default().der();
        assert_eq!(
            check(&[&leaf], &[&anchor], "other.example", NOW),
            Err(TlsRefusal::WrongName)
        );
        assert_eq!(
            check(&[&leaf], &[&anchor], "127.0.0.2", NOW),
            Err(TlsRefusal::WrongName)
        );
        // An IP address is matched against iPAddress entries only, a name against
        // dNSName entries only.
        let by_name = Cert {
            dns: &["127.0.0.1"],
            ips: &[],
            ..Cert::default()
        }
        .der();
        assert_eq!(
            check(&[&by_name], &[&anchor], "127.0.0.1", NOW),
            Err(TlsRefusal::WrongName)
        );
        let no_san = Cert {
            dns: &[],
            ips: &[],
            ..Cert::default()
        }
        .der();
        assert_eq!(
            check(&[&no_san], &[&anchor], "localhost", NOW),
            Err(TlsRefusal::WrongName)
        );
    }

    #[test]
    fn dates_are_checked_expired_and_not_yet_valid() {
        let anchor = ca("ca", 2);
        let expired = Cert {
            not_after: "251231235959Z",
            ..Cert::default()
        }
        .der();
        assert_eq!(
            check(&[&expired], &[&anchor], "localhost", NOW),
            Err(TlsRefusal::Expired)
        );
        let future = Cert {
            not_before: "260601000000Z",
            ..Cert::default()
        }
        .der();
        assert_eq!(
            check(&[&future], &[&anchor], "localhost", NOW),
            Err(TlsRefusal::Expired)
        );
        // With only the build-time floor known, notBefore cannot be checked; notAfter is.
        let floor = (NOW.0, false);
        assert_eq!(check(&[&future], &[&anchor], "localhost", floor), Ok(()));
        assert_eq!(
            check(&[&expired], &[&anchor], "localhost", floor),
            Err(TlsRefusal::Expired)
        );
        // An expired anchor verifies nothing.
        let old_anchor = Cert {
            subject: "ca",
            key: key(2),
            not_after: "251231235959Z",
            ca: true,
            dns: &[],
            ips: &[],
            ..Cert::default()
        }
        .der();
        let leaf = Cert::default().der();
        assert_eq!(
            check(&[&leaf], &[&old_anchor], "localhost", NOW),
            Err(TlsRefusal::UnknownIssuer)
        );
    }

    #[test]
    fn an_unknown_issuer_and_a_bad_signature_are_refused() {
        let leaf = Cert::default().der();
        let other = ca("ca", 9); // same name, another key
        assert_eq!(
            check(&[&leaf], &[&other], "localhost", NOW),
            Err(TlsRefusal::UnknownIssuer)
        );
        assert_eq!(
            check(&[&leaf], &[], "localhost", NOW),
            Err(TlsRefusal::UnknownIssuer)
        );
        // A signature of the right issuer over other bytes: nothing verifies the leaf, so
        // no anchor issued it (a chain cannot tell a forgery from a stranger).
        let tampered = Cert {
            tamper: true,
            ..Cert::default()
        }
        .der();
        let anchor = ca("ca", 2);
        assert_eq!(
            check(&[&tampered], &[&anchor], "localhost", NOW),
            Err(TlsRefusal::UnknownIssuer)
        );
        // An intermediate that is not a CA issues nothing.
        let not_ca = Cert {
            subject: "intermediate",
            key: key(3),
            dns: &[],
            ips: &[],
            ..Cert::default()
        }
        .der();
        let leaf = Cert {
            issuer: "intermediate",
            issuer_key: key(3),
            ..Cert::default()
        }
        .der();
        assert_eq!(
            check(&[&leaf, &not_ca], &[&anchor], "localhost", NOW),
            Err(TlsRefusal::BadCertificate)
        );
    }

    #[test]
    fn unsupported_algorithms_are_refused() {
        let anchor = ca("ca", 2);
        let sha384 = Cert {
            algorithm: make::ECDSA_SHA384,
            ..Cert::default()
        }
        .der();
        assert_eq!(
            check(&[&sha384], &[&anchor], "localhost", NOW),
            Err(TlsRefusal::UnsupportedAlgorithm)
        );
        // A key that is no P-256 point (a P-384 one's length).
        let mut p384 = [0x04u8; 97];
        p384[1..]
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = i as u8);
        let leaf = Cert {
            raw_key: Some(&p384),
            ..Cert::default()
        }
        .der();
        assert_eq!(
            check(&[&leaf], &[&anchor], "localhost", NOW),
            Err(TlsRefusal::UnsupportedAlgorithm)
        );
    }

    #[test]
    fn a_handshake_cut_short_is_a_failed_connection_not_a_refusal() {
        assert_eq!(connect_error(TlsRefusal::Closed), ConnectError::Refused);
        assert_eq!(
            connect_error(TlsRefusal::UnknownIssuer),
            ConnectError::Tls(TlsRefusal::UnknownIssuer)
        );
        assert_eq!(
            connect_error(TlsRefusal::Alert(40)),
            ConnectError::Tls(TlsRefusal::Alert(40))
        );
    }
}

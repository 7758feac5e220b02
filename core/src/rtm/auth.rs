//! Role-secret authentication: the hash, and a sans-IO step machine that produces the
//! two request PDUs and consumes the two replies.
//!
//! The exchange is `auth/handshake {role}` → `auth/handshake/ok {data: {nonce}}` →
//! `auth/authenticate {hash}` → `auth/authenticate/ok`, where
//! `hash = base64(HMAC-MD5(key = secret, message = nonce))`. The secret is borrowed or
//! owned by the caller's type `S` and never appears in `Debug` or `defmt` output.
//!
//! ```
//! use benchlink_core::http::Cursor;
//! use benchlink_core::rtm::auth::{AuthState, AuthStep, RoleSecretAuth};
//! use benchlink_core::rtm::pdu::Pdu;
//! let mut auth = RoleSecretAuth::new("superuser", "FF6FFFCfB2f7F3fe0E627d9fE2DB2EcD");
//! let mut buf = [0u8; 160];
//!
//! let mut out = Cursor::new(&mut buf);
//! assert_eq!(auth.write_request(0, &mut out), Ok(true));
//! assert_eq!(out.written(), br#"{"action":"auth/handshake","id":0,"body":{"method":"role_secret","data":{"role":"superuser"}}}"#);
//!
//! let reply = r#"{"action":"auth/handshake/ok","id":0,"body":{"data":{"nonce":"MTI0Njg4NTAyMjYxMzgxMzgzMg=="}}}"#;
//! assert_eq!(auth.handle_reply(&Pdu::parse(reply).unwrap()), AuthStep::SendNext);
//!
//! let mut out = Cursor::new(&mut buf);
//! assert_eq!(auth.write_request(1, &mut out), Ok(true));
//! assert_eq!(out.written(), br#"{"action":"auth/authenticate","id":1,"body":{"method":"role_secret","credentials":{"hash":"P6COJ5aXJvIRoJO1PaYREw=="}}}"#);
//!
//! let reply = r#"{"action":"auth/authenticate/ok","id":1,"body":{}}"#;
//! assert_eq!(auth.handle_reply(&Pdu::parse(reply).unwrap()), AuthStep::Done);
//! assert_eq!(auth.state(), AuthState::Done);
//! ```

use core::fmt;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use md5::Md5;

use super::pdu::{Action, ErrorBody, Pdu, Request};
use super::pdu::{Encoding, Text};
use crate::http::Cursor;
use crate::json::WriteError;

/// Length of a role-secret hash: base64 of a 16-byte MD5 digest, with padding.
pub const HASH_LEN: usize = 24;

type HmacMd5 = Hmac<Md5>;

/// A role-secret test vector: `role_secret_hash(secret, nonce) == hash`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vector {
    /// The role secret (UTF-8 bytes).
    pub secret: &'static [u8],
    /// The nonce exactly as the server sent it.
    pub nonce: &'static [u8],
    /// The expected base64 hash.
    pub hash: &'static [u8; HASH_LEN],
}

const K65: [u8; 65] = [b'K'; 65];

/// Seven known-answer vectors: the JS and Go SDKs' own unit-test vectors, the Python
/// SDK's test secret with a recorded nonce, an empty nonce, UTF-8 on both sides, and
/// keys of exactly one block and one byte more (hashed first). The same table checks
/// the host build and the firmware on the target.
///
/// ```
/// use benchlink_core::rtm::auth::{role_secret_hash, SPEC_VECTORS};
/// assert!(SPEC_VECTORS.iter().all(|v| &role_secret_hash(v.secret, v.nonce) == v.hash));
/// ```
pub const SPEC_VECTORS: [Vector; 7] = [
    Vector {
        secret: b"B37Ab888CAB4343434bAE98AAAAAABC1",
        nonce: b"nonce",
        hash: b"B510MG+AsMpvUDlm7oFsRg==",
    },
    Vector {
        secret: b"world",
        nonce: b"hello",
        hash: b"GnXQHVYdUXdr82yZa4Jtaw==",
    },
    Vector {
        secret: b"FF6FFFCfB2f7F3fe0E627d9fE2DB2EcD",
        nonce: b"MTI0Njg4NTAyMjYxMzgxMzgzMg==",
        hash: b"P6COJ5aXJvIRoJO1PaYREw==",
    },
    Vector {
        secret: b"FF6FFFCfB2f7F3fe0E627d9fE2DB2EcD",
        nonce: b"",
        hash: b"9K3wAsoK5WeBhqbOPf+JAQ==",
    },
    Vector {
        secret: "sécrèt".as_bytes(),
        nonce: "nönce-привет".as_bytes(),
        hash: b"5mcSwDGRqAh/+YlT79Ymrw==",
    },
    Vector {
        secret: K65.split_at(64).0,
        nonce: b"abc",
        hash: b"G8vE3Kp3T8NXAX/4NlH6Tg==",
    },
    Vector {
        secret: &K65,
        nonce: b"abc",
        hash: b"kxVHVjo/zsPgoctQWkxt8Q==",
    },
];

/// `base64(HMAC-MD5(key = secret, message = nonce))` with the standard alphabet and
/// padding. The nonce is used exactly as received, not base64-decoded.
///
/// ```
/// use benchlink_core::rtm::auth::role_secret_hash;
/// assert_eq!(&role_secret_hash(b"world", b"hello"), b"GnXQHVYdUXdr82yZa4Jtaw==");
/// ```
pub fn role_secret_hash(secret: &[u8], nonce: &[u8]) -> [u8; HASH_LEN] {
    hash_with(secret, |mac| mac.update(nonce))
}

/// The hash over a received nonce: JSON escapes (a server may write `/`
/// as `\/`) are resolved while feeding the MAC, so no buffer is needed.
fn nonce_hash(secret: &[u8], nonce: Text<'_>) -> [u8; HASH_LEN] {
    match nonce.as_plain() {
        Some(plain) => role_secret_hash(secret, plain.as_bytes()),
        None => hash_with(secret, |mac| {
            nonce
                .chars()
                .for_each(|c| mac.update(c.encode_utf8(&mut [0; 4]).as_bytes()));
        }),
    }
}

fn hash_with(secret: &[u8], feed: impl FnOnce(&mut HmacMd5)) -> [u8; HASH_LEN] {
    let mut out = [0u8; HASH_LEN];
    // HMAC takes keys of any length (longer ones are hashed first), so `new_from_slice`
    // cannot fail; and 16 bytes always encode to exactly 24 base64 characters.
    if let Ok(mut mac) = HmacMd5::new_from_slice(secret) {
        feed(&mut mac);
        let digest = mac.finalize().into_bytes();
        let _ = base64::engine::general_purpose::STANDARD.encode_slice(digest, &mut out);
    }
    out
}

/// Where a [`RoleSecretAuth`] exchange stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AuthState {
    /// Nothing sent yet: the next request is the handshake.
    Idle,
    /// The handshake was sent with this id; waiting for the nonce.
    AwaitingNonce {
        /// The handshake's id.
        id: u64,
    },
    /// The nonce arrived and the hash is computed: the next request is `authenticate`.
    ReadyToAuthenticate,
    /// `authenticate` was sent with this id; waiting for the verdict.
    AwaitingResult {
        /// The authenticate request's id.
        id: u64,
    },
    /// Authenticated: the role's permissions apply for the rest of this connection.
    Done,
    /// The exchange failed; [`RoleSecretAuth::reset`] to try again.
    Failed(AuthFailure),
}

/// Why an exchange failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AuthFailure {
    /// `auth/handshake/error` (unknown role, for instance).
    HandshakeRejected,
    /// `auth/authenticate/error` (wrong secret: reason `Unauthenticated`).
    AuthenticateRejected,
    /// `auth/handshake/ok` without a string `body.data.nonce`.
    MissingNonce,
    /// A reply with the pending id but an action that does not answer the pending request.
    UnexpectedReply,
}

/// What [`RoleSecretAuth::handle_reply`] made of a PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AuthStep<'p> {
    /// Not the reply the exchange waits for (another id, or no exchange pending): route
    /// the PDU elsewhere.
    NotForAuth,
    /// The nonce arrived: send the next request ([`RoleSecretAuth::write_request`]).
    SendNext,
    /// Authenticated.
    Done,
    /// The exchange failed; `error` is the server's error body, if it sent one.
    Failed {
        /// Why.
        failure: AuthFailure,
        /// `error` and `reason` of the reply (both `None` unless it was an error reply).
        error: ErrorBody<'p>,
    },
}

/// The role-secret exchange as a step machine: it writes the requests, the caller sends
/// them and feeds the replies back. Ids come from the caller (the connection owns the id
/// sequence). `R` is the role (`&str`, a heapless string, …), `S` the secret's bytes.
///
/// A client that replays the credentials on every new connection keeps the machine and
/// calls [`reset`](Self::reset) on each new connection.
pub struct RoleSecretAuth<R, S> {
    role: R,
    secret: S,
    state: AuthState,
    /// Valid in [`AuthState::ReadyToAuthenticate`]; ASCII base64.
    hash: [u8; HASH_LEN],
    /// [`nonce_hash`], referenced from [`new`](Self::new) only: a firmware that never
    /// authenticates links no HMAC-MD5 (the reply handling is reached from the client's
    /// reply dispatch whether or not a machine was ever made).
    nonce_hash: fn(&[u8], Text<'_>) -> [u8; HASH_LEN],
}

impl<R: AsRef<str>, S: AsRef<[u8]>> RoleSecretAuth<R, S> {
    /// A machine in [`AuthState::Idle`] for `role`, keyed with `secret` (its UTF-8 bytes
    /// for a text secret).
    ///
    /// ```
    /// let auth = benchlink_core::rtm::auth::RoleSecretAuth::new("superuser", b"s3cret");
    /// assert!(!format!("{auth:?}").contains("s3cret"));
    /// ```
    pub fn new(role: R, secret: S) -> Self {
        RoleSecretAuth {
            role,
            secret,
            state: AuthState::Idle,
            hash: [0; HASH_LEN],
            nonce_hash,
        }
    }

    /// Where the exchange stands.
    ///
    /// ```
    /// use benchlink_core::rtm::auth::{AuthState, RoleSecretAuth};
    /// assert_eq!(RoleSecretAuth::new("r", "s").state(), AuthState::Idle);
    /// ```
    pub fn state(&self) -> AuthState {
        self.state
    }

    /// Back to [`AuthState::Idle`], to authenticate again (on a new connection).
    ///
    /// ```
    /// use benchlink_core::http::Cursor;
    /// use benchlink_core::rtm::auth::{AuthState, RoleSecretAuth};
    /// let mut auth = RoleSecretAuth::new("r", "s");
    /// auth.write_request(0, &mut Cursor::new(&mut [0u8; 128])).unwrap();
    /// auth.reset();
    /// assert_eq!(auth.state(), AuthState::Idle);
    /// ```
    pub fn reset(&mut self) {
        self.state = AuthState::Idle;
        self.hash = [0; HASH_LEN];
    }

    /// The request due now, if any: the handshake when idle, `authenticate` once the nonce
    /// arrived. Call [`sent`](Self::sent) after sending it; [`write_request`](Self::write_request)
    /// does both.
    ///
    /// ```
    /// use benchlink_core::rtm::auth::RoleSecretAuth;
    /// use benchlink_core::rtm::pdu::Request;
    /// let auth = RoleSecretAuth::new("superuser", "s");
    /// assert_eq!(auth.next_request(), Some(Request::Handshake { role: "superuser" }));
    /// ```
    pub fn next_request(&self) -> Option<Request<'_>> {
        match self.state {
            AuthState::Idle => Some(Request::Handshake {
                role: self.role.as_ref(),
            }),
            AuthState::ReadyToAuthenticate => Some(Request::Authenticate {
                hash: core::str::from_utf8(&self.hash).unwrap_or_default(),
            }),
            _ => None,
        }
    }

    /// Records that [`next_request`](Self::next_request) went out with `id`; does nothing
    /// when no request was due.
    ///
    /// ```
    /// use benchlink_core::rtm::auth::{AuthState, RoleSecretAuth};
    /// let mut auth = RoleSecretAuth::new("r", "s");
    /// auth.sent(4);
    /// assert_eq!(auth.state(), AuthState::AwaitingNonce { id: 4 });
    /// ```
    pub fn sent(&mut self, id: u64) {
        self.state = match self.state {
            AuthState::Idle => AuthState::AwaitingNonce { id },
            AuthState::ReadyToAuthenticate => AuthState::AwaitingResult { id },
            other => other,
        };
    }

    /// Writes the request due now as a PDU with `id` and records it as sent; `Ok(false)`
    /// when nothing is due. On error nothing is recorded.
    ///
    /// ```
    /// use benchlink_core::http::Cursor;
    /// use benchlink_core::rtm::auth::RoleSecretAuth;
    /// let mut auth = RoleSecretAuth::new("r", "s");
    /// let mut buf = [0u8; 128];
    /// assert_eq!(auth.write_request(0, &mut Cursor::new(&mut buf)), Ok(true));
    /// assert_eq!(auth.write_request(1, &mut Cursor::new(&mut buf)), Ok(false));
    /// ```
    pub fn write_request(&mut self, id: u64, out: &mut Cursor<'_>) -> Result<bool, WriteError> {
        self.write_request_as(Encoding::Json, id, out)
    }

    /// [`write_request`](Self::write_request) in `encoding`.
    ///
    /// ```
    /// use benchlink_core::http::Cursor;
    /// use benchlink_core::rtm::auth::RoleSecretAuth;
    /// use benchlink_core::rtm::pdu::Encoding;
    /// let mut auth = RoleSecretAuth::new("r", "s");
    /// let mut buf = [0u8; 128];
    /// assert_eq!(auth.write_request_as(Encoding::Json, 0, &mut Cursor::new(&mut buf)), Ok(true));
    /// ```
    pub fn write_request_as(
        &mut self,
        encoding: Encoding,
        id: u64,
        out: &mut Cursor<'_>,
    ) -> Result<bool, WriteError> {
        let Some(request) = self.next_request() else {
            return Ok(false);
        };
        request.encode_as(encoding, Some(id), out)?;
        self.sent(id);
        Ok(true)
    }

    /// Consumes a reply. Only a PDU carrying the pending request's integer id concerns the
    /// exchange; anything else is [`AuthStep::NotForAuth`] and leaves the state alone.
    ///
    /// ```
    /// use benchlink_core::http::Cursor;
    /// use benchlink_core::rtm::auth::{AuthFailure, AuthStep, RoleSecretAuth};
    /// use benchlink_core::rtm::pdu::Pdu;
    /// let mut auth = RoleSecretAuth::new("nobody", "s");
    /// auth.write_request(0, &mut Cursor::new(&mut [0u8; 128])).unwrap();
    /// let err = Pdu::parse(r#"{"action":"auth/handshake/error","id":0,"body":{"error":"e","reason":"Unauthenticated"}}"#).unwrap();
    /// let AuthStep::Failed { failure, error } = auth.handle_reply(&err) else { panic!() };
    /// assert_eq!(failure, AuthFailure::HandshakeRejected);
    /// assert!(error.reason.is_some_and(|r| r == "Unauthenticated"));
    /// ```
    pub fn handle_reply<'p>(&mut self, pdu: &Pdu<'p>) -> AuthStep<'p> {
        let pending = match self.state {
            AuthState::AwaitingNonce { id } | AuthState::AwaitingResult { id } => id,
            _ => return AuthStep::NotForAuth,
        };
        if pdu.id.and_then(|id| id.as_u64()) != Some(pending) {
            return AuthStep::NotForAuth;
        }
        let (next, step) = match (self.state, pdu.action) {
            (AuthState::AwaitingNonce { .. }, Action::HandshakeOk) => match pdu.nonce() {
                Some(nonce) => {
                    self.hash = (self.nonce_hash)(self.secret.as_ref(), nonce);
                    (AuthState::ReadyToAuthenticate, AuthStep::SendNext)
                }
                None => fail(AuthFailure::MissingNonce, pdu),
            },
            (AuthState::AwaitingNonce { .. }, Action::HandshakeError) => {
                fail(AuthFailure::HandshakeRejected, pdu)
            }
            (AuthState::AwaitingResult { .. }, Action::AuthenticateOk) => {
                (AuthState::Done, AuthStep::Done)
            }
            (AuthState::AwaitingResult { .. }, Action::AuthenticateError) => {
                fail(AuthFailure::AuthenticateRejected, pdu)
            }
            _ => fail(AuthFailure::UnexpectedReply, pdu),
        };
        self.state = next;
        step
    }
}

fn fail<'p>(failure: AuthFailure, pdu: &Pdu<'p>) -> (AuthState, AuthStep<'p>) {
    (
        AuthState::Failed(failure),
        AuthStep::Failed {
            failure,
            error: pdu.error(),
        },
    )
}

/// Shows the role and the state; the secret (and the hash derived from it) never.
impl<R: AsRef<str>, S> fmt::Debug for RoleSecretAuth<R, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RoleSecretAuth")
            .field("role", &self.role.as_ref())
            .field("secret", &"<redacted>")
            .field("state", &self.state)
            .finish()
    }
}

/// Logs the role and the state; the secret (and the hash derived from it) never.
#[cfg(feature = "defmt")]
impl<R: AsRef<str>, S> defmt::Format for RoleSecretAuth<R, S> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "RoleSecretAuth {{ role: {=str}, secret: <redacted>, state: {} }}",
            self.role.as_ref(),
            self.state
        )
    }
}

#[cfg(test)]
mod tests;

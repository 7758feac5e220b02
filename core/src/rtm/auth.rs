//! Authentication: a sans-IO step machine ([`AuthExchange`]) that produces the two
//! request PDUs and consumes the two replies, for role-secret ([`RoleSecret`]) or any
//! other [`AuthMethod`] (the SDK contract's custom auth delegate).
//!
//! Role-secret's exchange is `auth/handshake {role}` → `auth/handshake/ok {data:
//! {nonce}}` → `auth/authenticate {hash}` → `auth/authenticate/ok`, where
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

use hmac::{Hmac, Mac};
use md5::Md5;

use super::pdu::{Action, ErrorBody, Pdu, Request};
use super::pdu::{Encoding, Text};
use super::requests::{escaped_len, ENVELOPE};
use crate::http::Cursor;
use crate::json::WriteError;

/// Length of a role-secret hash: base64 of a 16-byte MD5 digest, with padding.
pub const HASH_LEN: usize = 24;

/// Room for the credentials value an [`AuthMethod`] computes (role-secret's hash takes
/// [`HASH_LEN`]).
pub const MAX_CREDENTIALS_LEN: usize = 64;

/// A way to authenticate: the SDK contract's *auth delegate*, for the two-step exchange
/// every method shares — `auth/handshake {method, data: {IDENTITY: identity}}`, whose
/// reply carries the server's challenge, then `auth/authenticate {method, credentials:
/// {CREDENTIALS: value}}` with the value computed from the secret and that reply.
/// [`RoleSecret`] is one; a client made with another ([`AuthExchange::with_method`],
/// `Client::authenticate_with`) runs the same machine, restores it on reconnect the same
/// way, and never shows the secret.
///
/// A method is a type (no state: the identity and the secret are the client's to keep);
/// its functions are reached through pointers set where the exchange is made, so a
/// firmware that never authenticates links none of them.
///
/// ```
/// use benchlink_core::rtm::auth::{AuthMethod, MAX_CREDENTIALS_LEN};
/// use benchlink_core::rtm::pdu::Pdu;
///
/// /// A token server: the handshake names the user, the reply carries a `salt`, and the
/// /// credentials are the secret followed by the salt.
/// struct SaltedToken;
/// impl AuthMethod for SaltedToken {
///     const METHOD: &'static str = "salted_token";
///     const IDENTITY: &'static str = "user";
///     const CREDENTIALS: &'static str = "token";
///     fn credentials(secret: &[u8], reply: &Pdu<'_>, out: &mut [u8; MAX_CREDENTIALS_LEN]) -> Option<usize> {
///         let salt = reply.body?.get("data")?.get("salt")?.as_text()?.as_plain()?;
///         let len = secret.len() + salt.len();
///         out.get_mut(..secret.len())?.copy_from_slice(secret);
///         out.get_mut(secret.len()..len)?.copy_from_slice(salt.as_bytes());
///         Some(len)
///     }
/// }
/// ```
pub trait AuthMethod {
    /// The `method` of both requests (`"role_secret"`).
    const METHOD: &'static str;
    /// The name of the handshake's one `data` member, whose value is the identity
    /// (`"role"`).
    const IDENTITY: &'static str;
    /// The name of the one `credentials` member (`"hash"`).
    const CREDENTIALS: &'static str;
    /// The most bytes the credentials value takes once written as a JSON string (its
    /// escapes included): what the client's outbox must have room for. The default
    /// allows any text of [`MAX_CREDENTIALS_LEN`] bytes.
    const CREDENTIALS_BOUND: usize = 6 * MAX_CREDENTIALS_LEN;
    /// Writes the credentials value (UTF-8 text, sent as a JSON string) into `out` from
    /// the secret and the server's `auth/handshake/ok`, and returns its length; `None`
    /// when the reply lacks what the method needs (the exchange then fails with
    /// [`AuthFailure::MissingNonce`]).
    fn credentials(
        secret: &[u8],
        reply: &Pdu<'_>,
        out: &mut [u8; MAX_CREDENTIALS_LEN],
    ) -> Option<usize>;
}

/// Role-secret authentication: `data: {"role": role}`, then `credentials: {"hash":
/// base64(HMAC-MD5(secret, nonce))}` over the `nonce` of the handshake reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoleSecret;

impl AuthMethod for RoleSecret {
    const METHOD: &'static str = "role_secret";
    const IDENTITY: &'static str = "role";
    const CREDENTIALS: &'static str = "hash";
    const CREDENTIALS_BOUND: usize = HASH_LEN;
    fn credentials(
        secret: &[u8],
        reply: &Pdu<'_>,
        out: &mut [u8; MAX_CREDENTIALS_LEN],
    ) -> Option<usize> {
        let hash = nonce_hash(secret, reply.nonce()?);
        out.get_mut(..HASH_LEN)?.copy_from_slice(&hash);
        Some(HASH_LEN)
    }
}

/// An upper bound of the length of either request of method `M` for `identity`, with
/// the largest id: `{"action":"auth/authenticate","id":…,"body":{"method":"…",
/// "credentials":{"…":"…"}}}` (the envelope, 35 bytes of body syntax, the names and the
/// longer of the two values).
pub(crate) fn request_bound<M: AuthMethod>(identity: &str) -> usize {
    let handshake = escaped_len(M::IDENTITY).saturating_add(escaped_len(identity));
    let authenticate = escaped_len(M::CREDENTIALS).saturating_add(M::CREDENTIALS_BOUND);
    ENVELOPE
        .saturating_add(40)
        .saturating_add(escaped_len(M::METHOD))
        .saturating_add(handshake.max(authenticate))
}

/// An [`AuthMethod`] as the exchange keeps it: its names and its function.
#[derive(Clone, Copy)]
struct Method {
    name: &'static str,
    identity: &'static str,
    credentials_member: &'static str,
    credentials: fn(&[u8], &Pdu<'_>, &mut [u8; MAX_CREDENTIALS_LEN]) -> Option<usize>,
}

impl Method {
    fn of<M: AuthMethod>() -> Method {
        Method {
            name: M::METHOD,
            identity: M::IDENTITY,
            credentials_member: M::CREDENTIALS,
            credentials: M::credentials,
        }
    }
}

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
        crate::ws::b64::encode(&digest, &mut out);
    }
    out
}

/// Where an [`AuthExchange`] stands.
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
    /// The exchange failed; [`AuthExchange::reset`] to try again.
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
    /// `auth/handshake/ok` without a string `body.data.nonce` (for another
    /// [`AuthMethod`]: without what it needs to make its credentials).
    MissingNonce,
    /// A reply with the pending id but an action that does not answer the pending request.
    UnexpectedReply,
}

/// What [`AuthExchange::handle_reply`] made of a PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AuthStep<'p> {
    /// Not the reply the exchange waits for (another id, or no exchange pending): route
    /// the PDU elsewhere.
    NotForAuth,
    /// The nonce arrived: send the next request ([`AuthExchange::write_request`]).
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

/// An authentication exchange as a step machine: it writes the requests, the caller
/// sends them and feeds the replies back. Ids come from the caller (the connection owns
/// the id sequence). `R` is the identity (the role: `&str`, a heapless string, …), `S`
/// the secret's bytes; the method is [`RoleSecret`] ([`new`](Self::new)) or any
/// [`AuthMethod`] ([`with_method`](Self::with_method)).
///
/// A client that replays the credentials on every new connection keeps the machine and
/// calls [`reset`](Self::reset) on each new connection.
pub struct AuthExchange<R, S> {
    role: R,
    secret: S,
    state: AuthState,
    /// Valid in [`AuthState::ReadyToAuthenticate`]: `credentials[..credentials_len]`.
    credentials: [u8; MAX_CREDENTIALS_LEN],
    credentials_len: u8,
    /// The method, set where the machine is made: a firmware that never authenticates
    /// links none of its code (HMAC-MD5 for role-secret), although the client's reply
    /// dispatch reaches the reply handling whether or not a machine was ever made.
    method: Method,
}

/// The role-secret exchange: an [`AuthExchange`] made with [`AuthExchange::new`].
pub type RoleSecretAuth<R, S> = AuthExchange<R, S>;

impl<R: AsRef<str>, S: AsRef<[u8]>> AuthExchange<R, S> {
    /// A machine in [`AuthState::Idle`] for `role`, keyed with `secret` (its UTF-8 bytes
    /// for a text secret).
    ///
    /// ```
    /// let auth = benchlink_core::rtm::auth::RoleSecretAuth::new("superuser", b"s3cret");
    /// assert!(!format!("{auth:?}").contains("s3cret"));
    /// ```
    pub fn new(role: R, secret: S) -> Self {
        Self::with_method::<RoleSecret>(role, secret)
    }

    /// A machine in [`AuthState::Idle`] for `identity` and `secret` with method `M`.
    ///
    /// ```
    /// use benchlink_core::http::Cursor;
    /// use benchlink_core::rtm::auth::{AuthExchange, RoleSecret};
    /// let mut auth = AuthExchange::with_method::<RoleSecret>("superuser", b"s");
    /// let mut buf = [0u8; 128];
    /// let mut out = Cursor::new(&mut buf);
    /// auth.write_request(0, &mut out).unwrap();
    /// assert!(out.written().ends_with(br#""body":{"method":"role_secret","data":{"role":"superuser"}}}"#));
    /// ```
    pub fn with_method<M: AuthMethod>(identity: R, secret: S) -> Self {
        AuthExchange {
            role: identity,
            secret,
            state: AuthState::Idle,
            credentials: [0; MAX_CREDENTIALS_LEN],
            credentials_len: 0,
            method: Method::of::<M>(),
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
        self.credentials = [0; MAX_CREDENTIALS_LEN];
        self.credentials_len = 0;
    }

    /// The request due now, if any: the handshake when idle, `authenticate` once the nonce
    /// arrived. Call [`sent`](Self::sent) after sending it; [`write_request`](Self::write_request)
    /// does both.
    ///
    /// ```
    /// use benchlink_core::rtm::auth::RoleSecretAuth;
    /// use benchlink_core::rtm::pdu::Request;
    /// let auth = RoleSecretAuth::new("superuser", "s");
    /// assert_eq!(
    ///     auth.next_request(),
    ///     Some(Request::Handshake { method: "role_secret", data: ("role", "superuser") })
    /// );
    /// ```
    pub fn next_request(&self) -> Option<Request<'_>> {
        let method = self.method.name;
        match self.state {
            AuthState::Idle => Some(Request::Handshake {
                method,
                data: (self.method.identity, self.role.as_ref()),
            }),
            AuthState::ReadyToAuthenticate => {
                let value = self
                    .credentials
                    .get(..usize::from(self.credentials_len))
                    .unwrap_or_default();
                Some(Request::Authenticate {
                    method,
                    credentials: (
                        self.method.credentials_member,
                        core::str::from_utf8(value).unwrap_or_default(),
                    ),
                })
            }
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
            (AuthState::AwaitingNonce { .. }, Action::HandshakeOk) => {
                let len =
                    (self.method.credentials)(self.secret.as_ref(), pdu, &mut self.credentials)
                        .filter(|&n| {
                            self.credentials
                                .get(..n)
                                .is_some_and(|v| core::str::from_utf8(v).is_ok())
                        })
                        .and_then(|n| u8::try_from(n).ok());
                match len {
                    Some(len) => {
                        self.credentials_len = len;
                        (AuthState::ReadyToAuthenticate, AuthStep::SendNext)
                    }
                    None => fail(AuthFailure::MissingNonce, pdu),
                }
            }
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
impl<R: AsRef<str>, S> fmt::Debug for AuthExchange<R, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthExchange")
            .field("method", &self.method.name)
            .field("role", &self.role.as_ref())
            .field("secret", &"<redacted>")
            .field("state", &self.state)
            .finish()
    }
}

/// Logs the role and the state; the secret (and the hash derived from it) never.
#[cfg(feature = "defmt")]
impl<R: AsRef<str>, S> defmt::Format for AuthExchange<R, S> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "AuthExchange {{ method: {=str}, role: {=str}, secret: <redacted>, state: {} }}",
            self.method.name,
            self.role.as_ref(),
            self.state
        )
    }
}

#[cfg(test)]
mod tests;

use super::*;
use crate::json::testing::Buf;

/// All seven known-answer vectors.
#[test]
fn spec_vectors() {
    for v in SPEC_VECTORS {
        assert_eq!(&role_secret_hash(v.secret, v.nonce), v.hash);
    }
}

#[test]
fn escaped_nonce_is_hashed_decoded() {
    let pdu = Pdu::parse(
        r#"{"action":"auth/handshake/ok","id":0,"body":{"data":{"nonce":"n\u00f6nce-\u043f\u0440\u0438\u0432\u0435\u0442"}}}"#,
    )
    .unwrap();
    let nonce = pdu.nonce().unwrap();
    assert_eq!(
        &nonce_hash("sécrèt".as_bytes(), nonce),
        b"5mcSwDGRqAh/+YlT79Ymrw=="
    );
}

fn write<S: AsRef<[u8]>>(auth: &mut AuthExchange<&str, S>, id: u64) -> Buf<256> {
    let mut buf = [0u8; 256];
    let mut out = Cursor::new(&mut buf);
    assert_eq!(auth.write_request(id, &mut out), Ok(true));
    let mut b = Buf::new();
    b.push(out.written());
    b
}

fn reply<'p, S: AsRef<[u8]>>(auth: &mut AuthExchange<&str, S>, text: &'p str) -> AuthStep<'p> {
    auth.handle_reply(&Pdu::parse(text).unwrap())
}

/// The reference exchange for role `superuser` (the Python SDK's test secret and a
/// recorded nonce) byte for byte, then again with the ids 5 and 6 it had in a
/// recorded Python SDK session, as on another connection.
#[test]
fn transcript() {
    let mut auth = RoleSecretAuth::new("superuser", "FF6FFFCfB2f7F3fe0E627d9fE2DB2EcD");
    for (h, a) in [(0, 1), (5, 6)] {
        assert_eq!(auth.state(), AuthState::Idle);
        let mut expected = Buf::<256>::new();
        let _ = core::fmt::write(
            &mut expected,
            format_args!(
                r#"{{"action":"auth/handshake","id":{h},"body":{{"method":"role_secret","data":{{"role":"superuser"}}}}}}"#
            ),
        );
        assert_eq!(write(&mut auth, h), expected.as_str());
        assert_eq!(auth.state(), AuthState::AwaitingNonce { id: h });
        let mut ok = Buf::<256>::new();
        let _ = core::fmt::write(
            &mut ok,
            format_args!(
                r#"{{"action":"auth/handshake/ok","id":{h},"body":{{"data":{{"nonce":"MTI0Njg4NTAyMjYxMzgxMzgzMg=="}}}}}}"#
            ),
        );
        assert_eq!(reply(&mut auth, ok.as_str()), AuthStep::SendNext);
        let mut expected = Buf::<256>::new();
        let _ = core::fmt::write(
            &mut expected,
            format_args!(
                r#"{{"action":"auth/authenticate","id":{a},"body":{{"method":"role_secret","credentials":{{"hash":"P6COJ5aXJvIRoJO1PaYREw=="}}}}}}"#
            ),
        );
        assert_eq!(write(&mut auth, a), expected.as_str());
        let mut done = Buf::<256>::new();
        let _ = core::fmt::write(
            &mut done,
            format_args!(r#"{{"action":"auth/authenticate/ok","id":{a},"body":{{}}}}"#),
        );
        assert_eq!(reply(&mut auth, done.as_str()), AuthStep::Done);
        assert_eq!(auth.state(), AuthState::Done);
        assert_eq!(auth.next_request(), None);
        auth.reset();
    }
}

#[test]
fn failures_and_unrelated_pdus() {
    let mut auth = RoleSecretAuth::new("superuser", "wrong");
    // Nothing pending: every reply is someone else's.
    assert_eq!(
        reply(
            &mut auth,
            r#"{"action":"auth/handshake/ok","id":0,"body":{}}"#
        ),
        AuthStep::NotForAuth
    );
    write(&mut auth, 7);
    for unrelated in [
        r#"{"action":"auth/handshake/ok","id":6,"body":{"data":{"nonce":"x"}}}"#,
        r#"{"action":"auth/handshake/ok","id":"7","body":{"data":{"nonce":"x"}}}"#,
        r#"{"action":"rtm/subscription/data","body":{}}"#,
    ] {
        assert_eq!(reply(&mut auth, unrelated), AuthStep::NotForAuth);
        assert_eq!(auth.state(), AuthState::AwaitingNonce { id: 7 });
    }
    let step = reply(
        &mut auth,
        r#"{"action":"auth/handshake/ok","id":7,"body":{"data":{}}}"#,
    );
    assert!(matches!(
        step,
        AuthStep::Failed {
            failure: AuthFailure::MissingNonce,
            ..
        }
    ));
    assert_eq!(auth.state(), AuthState::Failed(AuthFailure::MissingNonce));
    assert_eq!(auth.next_request(), None);

    auth.reset();
    write(&mut auth, 0);
    let step = reply(&mut auth, r#"{"action":"rtm/publish/ok","id":0}"#);
    assert!(matches!(
        step,
        AuthStep::Failed {
            failure: AuthFailure::UnexpectedReply,
            ..
        }
    ));

    auth.reset();
    write(&mut auth, 0);
    let nonce = r#"{"action":"auth/handshake/ok","id":0,"body":{"data":{"nonce":"abc"}}}"#;
    assert_eq!(reply(&mut auth, nonce), AuthStep::SendNext);
    write(&mut auth, 1);
    let rejected = r#"{"action":"auth/authenticate/error","id":1,"body":{"error":"authentication_failed","reason":"Unauthenticated"}}"#;
    let AuthStep::Failed { failure, error } = reply(&mut auth, rejected) else {
        panic!()
    };
    assert_eq!(failure, AuthFailure::AuthenticateRejected);
    assert!(error.error.unwrap() == "authentication_failed");
    assert!(error.reason.unwrap() == "Unauthenticated");
}

#[test]
fn buffer_too_small_records_nothing() {
    let mut auth = RoleSecretAuth::new("superuser", "s");
    let mut buf = [0u8; 16];
    assert!(auth.write_request(0, &mut Cursor::new(&mut buf)).is_err());
    assert_eq!(auth.state(), AuthState::Idle);
}

#[test]
fn debug_never_shows_the_secret_or_hash() {
    let mut auth = RoleSecretAuth::new("superuser", "FF6FFFCfB2f7F3fe0E627d9fE2DB2EcD");
    write(&mut auth, 0);
    reply(
        &mut auth,
        r#"{"action":"auth/handshake/ok","id":0,"body":{"data":{"nonce":"MTI0Njg4NTAyMjYxMzgxMzgzMg=="}}}"#,
    );
    let shown = Buf::<256>::display(format_args!("{auth:?}"));
    assert!(!shown.as_str().contains("FF6FFF"), "{shown:?}");
    assert!(!shown.as_str().contains("P6CO"), "{shown:?}");
    assert!(shown.as_str().contains("superuser"));
}

/// A method other than role-secret: the token server of the trait's example (the
/// credentials are the secret and the server's salt). Its requests carry its own method
/// and member names, its credentials come from the reply, and a reply without the salt
/// fails the exchange as a missing challenge.
struct SaltedToken;

impl AuthMethod for SaltedToken {
    const METHOD: &'static str = "salted_token";
    const IDENTITY: &'static str = "user";
    const CREDENTIALS: &'static str = "token";
    fn credentials(
        secret: &[u8],
        reply: &Pdu<'_>,
        out: &mut [u8; MAX_CREDENTIALS_LEN],
    ) -> Option<usize> {
        let salt = reply
            .body?
            .get("data")?
            .get("salt")?
            .as_text()?
            .as_plain()?;
        let len = secret.len() + salt.len();
        out.get_mut(..secret.len())?.copy_from_slice(secret);
        out.get_mut(secret.len()..len)?
            .copy_from_slice(salt.as_bytes());
        Some(len)
    }
}

#[test]
fn another_method_runs_the_same_exchange() {
    let mut auth = AuthExchange::with_method::<SaltedToken>("ann", "s3cr\"t");
    assert_eq!(
        write(&mut auth, 3).as_str(),
        r#"{"action":"auth/handshake","id":3,"body":{"method":"salted_token","data":{"user":"ann"}}}"#
    );
    let ok = r#"{"action":"auth/handshake/ok","id":3,"body":{"data":{"salt":"NaCl"}}}"#;
    assert_eq!(reply(&mut auth, ok), AuthStep::SendNext);
    assert_eq!(
        write(&mut auth, 4).as_str(),
        r#"{"action":"auth/authenticate","id":4,"body":{"method":"salted_token","credentials":{"token":"s3cr\"tNaCl"}}}"#
    );
    let done = r#"{"action":"auth/authenticate/ok","id":4,"body":{}}"#;
    assert_eq!(reply(&mut auth, done), AuthStep::Done);
    // Both requests fit the bound the client checks its outbox against.
    assert!(request_bound::<SaltedToken>("ann") >= 120);
    assert!(!format!("{auth:?}").contains("s3cr"), "{auth:?}");

    auth.reset();
    let _ = write(&mut auth, 0);
    let no_salt = r#"{"action":"auth/handshake/ok","id":0,"body":{"data":{"nonce":"x"}}}"#;
    assert!(matches!(
        reply(&mut auth, no_salt),
        AuthStep::Failed {
            failure: AuthFailure::MissingNonce,
            ..
        }
    ));
}

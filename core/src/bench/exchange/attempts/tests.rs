use super::*;

type E = ClientError<'static, (), u8>;

const IO: E = ClientError::Io(1);
const NO_RESPONSE: E = ClientError::Decode(DecodeError::UnexpectedEof {
    section: Section::NoResponse,
});
const TIMEOUT: E = ClientError::Timeout {
    after: core::time::Duration::from_secs(1),
    waiting: super::super::Waiting::Reply,
};

/// A stale kept-alive connection (I/O error or end of stream before any response) is
/// retried once, for idempotent requests only, and never after a response began.
#[test]
fn stale_connections_are_retried_once_for_idempotent_requests() {
    for stale in [IO, NO_RESPONSE] {
        let mut get = Attempts::new(true);
        assert_eq!(get.next(Ok(()), Some(Err(stale)), true, false), Next::Retry);
        assert_eq!(
            get.next(Ok(()), Some(Err(stale)), true, false),
            Next::Fail(stale)
        );
        // Not on a fresh connection, not after response bytes, not for a request that changes state.
        assert_eq!(
            Attempts::new(true).next(Ok(()), Some(Err(stale)), false, false),
            Next::Fail(stale)
        );
        assert_eq!(
            Attempts::new(true).next(Ok(()), Some(Err(stale)), true, true),
            Next::Fail(stale)
        );
        assert_eq!(
            Attempts::new(false).next(Ok(()), Some(Err(stale)), true, false),
            Next::Fail(stale)
        );
    }
    // Other failures are never retried.
    assert_eq!(
        Attempts::new(true).next(Ok(()), Some(Err(TIMEOUT)), true, false),
        Next::Fail(TIMEOUT)
    );
}

/// A reply read after a broken send is the outcome, on a connection that closes; with
/// none, the send's error is.
#[test]
fn a_reply_after_a_broken_send_is_the_outcome() {
    let broke: Result<(), E> = Err(IO);
    assert!(Attempts::read_after(&broke));
    assert!(Attempts::read_after(&Ok::<(), E>(())));
    assert!(!Attempts::read_after(&Err::<(), E>(TIMEOUT)));
    for after in [After::Keep, After::Close] {
        assert_eq!(
            Attempts::new(false).next(broke, Some(Ok(after)), false, true),
            Next::Done(After::Close)
        );
    }
    assert_eq!(
        Attempts::new(false).next(broke, Some(Err(NO_RESPONSE)), false, false),
        Next::Fail(IO)
    );
    assert_eq!(
        Attempts::new(false).next(Err(TIMEOUT), None, false, false),
        Next::Fail(TIMEOUT)
    );
    assert_eq!(
        Attempts::new(true).next::<(), u8>(Ok(()), Some(Ok(After::Keep)), true, true),
        Next::Done(After::Keep)
    );
}

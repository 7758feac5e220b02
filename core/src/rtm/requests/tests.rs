use super::*;

#[test]
fn meta_round_trip() {
    let meta = Meta {
        kind: ReqKind::Search,
        acked: true,
        cancelled: false,
        ticket: Ticket::from_raw(0xDEAD_BEEF),
        deadline: Some(Instant::from_micros(42)),
    };
    let mut rec = [0u8; Meta::LEN + 3];
    assert!(meta.write(&mut rec).is_some());
    rec[Meta::LEN..].copy_from_slice(b"{x}");
    assert_eq!(Meta::read(&rec), Some((meta, &b"{x}"[..])));
    Meta::cancel(&mut rec);
    assert!(Meta::read(&rec).is_some_and(|(m, _)| m.cancelled));
    let none = Meta {
        deadline: None,
        acked: false,
        ..meta
    };
    assert!(none.write(&mut rec).is_some());
    assert_eq!(Meta::read(&rec).map(|(m, _)| m), Some(none));
    assert!(Meta::read(&rec[..5]).is_none());
    rec[0] = 99;
    assert!(Meta::read(&rec).is_none());
    assert!(meta.write(&mut [0u8; 3]).is_none());
}

#[test]
fn bounds_hold_for_the_longest_fields() {
    let channel = "c\"\u{1}";
    let message = r#"{"k": [1, 2]}"#;
    let mut buf = [0u8; 256];
    for req in [
        UserRequest::Publish {
            channel,
            message: message.into(),
        },
        UserRequest::Write {
            channel,
            value: message,
        },
        UserRequest::Read {
            channel,
            args: Some(r#"{"position":"1:2"}"#),
        },
        UserRequest::Delete { channel },
        UserRequest::Search { prefix: channel },
    ] {
        let mut out = crate::http::Cursor::new(&mut buf);
        req.to_pdu()
            .encode(Some(u64::from(u32::MAX)), &mut out)
            .unwrap();
        assert!(
            out.len() <= req.pdu_bound(),
            "{req:?}: {} > {}",
            out.len(),
            req.pdu_bound()
        );
        assert!(
            req.pdu_bound() - out.len() <= 20,
            "{req:?}: bound too loose"
        );
    }
    let mut out = crate::http::Cursor::new(&mut buf);
    Request::Handshake {
        method: "role_secret",
        data: ("role", channel),
    }
    .encode(Some(u64::from(u32::MAX)), &mut out)
    .unwrap();
    assert!(out.len() <= crate::rtm::auth::request_bound::<crate::rtm::auth::RoleSecret>(channel));
    let mut out = crate::http::Cursor::new(&mut buf);
    let hash = "P6COJ5aXJvIRoJO1PaYREw==";
    Request::Authenticate {
        method: "role_secret",
        credentials: ("hash", hash),
    }
    .encode(Some(u64::from(u32::MAX)), &mut out)
    .unwrap();
    assert!(out.len() <= crate::rtm::auth::request_bound::<crate::rtm::auth::RoleSecret>(""));
}

#[test]
fn escaped_length_matches_the_writer() {
    let s = "a\"b\\c\n\u{1}é";
    let mut buf = [0u8; 64];
    let mut out = crate::http::Cursor::new(&mut buf);
    json::write::string(&mut out, s).unwrap();
    assert_eq!(escaped_len(s) + 2, out.len());
}

use super::*;
use crate::bench::request::Start;
use std::vec::Vec;

/// Every chunk of a request, concatenated.
fn wire<R: Request>(out: &mut Outgoing<'_, R>, headers: &Headers<'_>, tx: &mut [u8]) -> Vec<u8> {
    let mut bytes = Vec::new();
    while let Some(chunk) = out.next(headers, tx).unwrap() {
        match chunk {
            Chunk::Tx(n) => bytes.extend_from_slice(&tx[..n]),
            Chunk::Content(c) => bytes.extend_from_slice(c),
        }
    }
    bytes
}

#[test]
fn an_upload_is_written_as_its_content_length_says_and_again_after_restart() {
    let includes = [File {
        name: "data.txt",
        content: b"hello\nworld\n",
    }];
    let start = Start {
        includes: &includes,
        ..Start::new(File {
            name: "s.bdl",
            content: b"#!benchDL\n",
        })
    };
    let headers = Headers {
        authority: "h:1",
        prefix: "",
        user_agent: "t",
        bearer: Some("tok"),
    };
    let mut tx = [0u8; 512];
    let mut out = Outgoing::new(&start, &headers, 42, &mut tx).unwrap();
    let bytes = wire(&mut out, &headers, &mut tx);
    let text = std::string::String::from_utf8(bytes.clone()).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(body.len(), len);
    assert!(head.contains("Authorization: Bearer tok"));
    assert!(body
        .contains("filename=\"data.txt\"\r\nContent-Type: text/plain\r\n\r\nhello\nworld\n\r\n"));
    assert!(body.ends_with("--\r\n"));
    out.restart();
    assert_eq!(wire(&mut out, &headers, &mut tx), bytes);
}

#[test]
fn many_files_go_out_and_a_small_tx_is_refused_before_anything_is_sent() {
    let file = File {
        name: "i",
        content: b"x",
    };
    // No limit on the files: they are walked in place (more than the 16 of old).
    let includes = [file; 40];
    let start = Start {
        includes: &includes,
        ..Start::new(file)
    };
    let headers = Headers {
        authority: "h",
        prefix: "/mzbench",
        user_agent: "t",
        bearer: None,
    };
    let mut tx = [0u8; 512];
    let mut out = Outgoing::new(&start, &headers, 1, &mut tx).unwrap();
    let text = std::string::String::from_utf8(wire(&mut out, &headers, &mut tx)).unwrap();
    assert!(text.starts_with("POST /mzbench/start "));
    assert_eq!(text.matches("filename=\"i\"").count(), 41);
    let mut small = [0u8; 16];
    assert!(matches!(
        Outgoing::new(&Start::new(file), &headers, 1, &mut small),
        Err(EncodeError::BufferTooSmall { capacity: 16 })
    ));
}

#[test]
fn a_reply_larger_than_the_body_buffer_is_a_typed_error() {
    let mut buf = [0u8; 8];
    let mut reply = ReplyBody::new(&mut buf);
    assert!(reply.head(200).is_continue());
    assert!(reply.data(b"{\"status\":").is_break());
    assert_eq!(
        reply.finish::<crate::bench::request::Status>().err(),
        Some(ReplyError::TooLarge { max: 8 })
    );
    // An error body is kept as far as it fits, enough to classify it.
    let mut buf = [0u8; 64];
    let mut reply = ReplyBody::new(&mut buf);
    let _ = reply.head(404);
    let _ = reply.data(br#"{"reason_code":"not_found","reason":"no such benchmark, really"}"#);
    assert!(matches!(
        reply.finish::<crate::bench::request::Status>(),
        Err(ReplyError::Server(e)) if e.http_status() == Some(404)
    ));
}

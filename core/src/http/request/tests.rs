use super::super::multipart::Part;
use super::*;

fn get(path: &str, query: &[(&str, &str)], bearer: Option<&str>) -> ([u8; 512], usize) {
    let mut buf = [0u8; 512];
    let head = RequestHead {
        method: Method::Get,
        prefix: "",
        path,
        host: "localhost:48555",
        user_agent: "python-requests/2.27.1",
        bearer,
        body: Body::Empty,
        keep_alive: true,
    };
    let mut out = Cursor::new(&mut buf);
    head.encode(query, &mut out).unwrap();
    let n = out.len();
    (buf, n)
}

#[test]
fn get_matches_the_recorded_request_line_and_headers() {
    let (buf, n) = get("/status", &[("id", "7"), ("wait", "false")], None);
    assert_eq!(
        core::str::from_utf8(&buf[..n]).unwrap(),
        "GET /status?id=7&wait=false HTTP/1.1\r\nHost: localhost:48555\r\n\
         User-Agent: python-requests/2.27.1\r\nAccept: */*\r\nAccept-Encoding: deflate, gzip\r\n\
         Connection: keep-alive\r\n\r\n"
    );
    let (buf, n) = get("/clusters_info", &[], Some("TOKEN123"));
    assert_eq!(
        core::str::from_utf8(&buf[..n]).unwrap(),
        "GET /clusters_info HTTP/1.1\r\nHost: localhost:48555\r\n\
         User-Agent: python-requests/2.27.1\r\nAccept: */*\r\nAccept-Encoding: deflate, gzip\r\n\
         Connection: keep-alive\r\nAuthorization: Bearer TOKEN123\r\n\r\n"
    );
    let (buf, n) = get(
        "/run_command",
        &[("command", "print(\"zz\")"), ("percent", "50")],
        None,
    );
    assert!(buf[..n]
        .starts_with(b"GET /run_command?command=print%28%22zz%22%29&percent=50 HTTP/1.1\r\n"));
}

#[test]
fn multipart_post_announces_length_and_boundary_then_bearer_last() {
    let boundary = Boundary::new("nojnAe9aq4zz5V9C5ahghcv4Dtx2V0").unwrap();
    let parts = [Part {
        name: "bench",
        filename: "small.bdl",
        content_type: "application/octet-stream",
        len: 1,
    }];
    let len = boundary.content_length(&parts).unwrap();
    let head = RequestHead {
        method: Method::Post,
        prefix: "",
        path: "/start",
        host: "localhost:48555",
        user_agent: "ua",
        bearer: Some("TOKEN123"),
        body: Body::Multipart {
            boundary: &boundary,
            len,
        },
        keep_alive: true,
    };
    let mut buf = [0u8; 512];
    let mut out = Cursor::new(&mut buf);
    head.encode(&[("nodes", "2")][..], &mut out).unwrap();
    let text = core::str::from_utf8(out.written()).unwrap();
    assert!(text.starts_with("POST /start?nodes=2 HTTP/1.1\r\n"));
    assert!(text.ends_with(
        "Connection: keep-alive\r\nContent-Length: 183\r\n\
         Content-Type: multipart/form-data; boundary=nojnAe9aq4zz5V9C5ahghcv4Dtx2V0\r\n\
         Authorization: Bearer TOKEN123\r\n\r\n"
    ));
}

#[test]
fn empty_post_says_content_length_zero() {
    let head = RequestHead {
        method: Method::Post,
        prefix: "",
        path: "/auth",
        host: "h",
        user_agent: "u",
        bearer: None,
        body: Body::Empty,
        keep_alive: false,
    };
    let mut buf = [0u8; 256];
    let mut out = Cursor::new(&mut buf);
    head.encode(&(), &mut out).unwrap();
    assert!(out
        .written()
        .ends_with(b"Connection: close\r\nContent-Length: 0\r\n\r\n"));
}

#[test]
fn header_injection_is_rejected() {
    let base = RequestHead {
        method: Method::Get,
        prefix: "",
        path: "/status",
        host: "h",
        user_agent: "u",
        bearer: None,
        body: Body::Empty,
        keep_alive: true,
    };
    let cases: [(RequestHead<'_>, &str); 6] = [
        (
            RequestHead {
                host: "h\r\nX: y",
                ..base
            },
            "host",
        ),
        (
            RequestHead {
                user_agent: "u\n",
                ..base
            },
            "user_agent",
        ),
        (
            RequestHead {
                bearer: Some("t\0"),
                ..base
            },
            "bearer",
        ),
        (
            RequestHead {
                prefix: "",
                path: "/a b",
                ..base
            },
            "path",
        ),
        (
            RequestHead {
                prefix: "",
                path: "status",
                ..base
            },
            "path",
        ),
        (
            RequestHead {
                body: Body::Sized {
                    content_type: "a\rb",
                    len: 1,
                },
                ..base
            },
            "content_type",
        ),
    ];
    for (head, field) in cases {
        let mut buf = [0u8; 256];
        let mut out = Cursor::new(&mut buf);
        assert_eq!(
            head.encode(&(), &mut out),
            Err(EncodeError::InvalidValue { field })
        );
    }
}

#[test]
fn small_buffer_is_an_error() {
    let head = RequestHead {
        method: Method::Head,
        prefix: "",
        path: "/",
        host: "h",
        user_agent: "u",
        bearer: None,
        body: Body::Empty,
        keep_alive: true,
    };
    let mut buf = [0u8; 20];
    let mut out = Cursor::new(&mut buf);
    assert_eq!(
        head.encode(&(), &mut out),
        Err(EncodeError::BufferTooSmall { capacity: 20 })
    );
}

#[test]
fn connect_rejects_bad_hosts() {
    for host in ["", "a b", "a/b", "x\r\n", "u@h"] {
        let mut buf = [0u8; 128];
        let mut out = Cursor::new(&mut buf);
        let head = ConnectHead {
            host,
            port: 1,
            proxy_authorization: None,
        };
        assert_eq!(
            head.encode(&mut out),
            Err(EncodeError::InvalidValue { field: "host" })
        );
    }
}

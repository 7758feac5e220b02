use super::*;

const SCRIPT: &[u8] = b"#!benchDL\ninclude_resource(text_resource, \"data.txt\", text)\npool(size = 2,\n     worker_type = dummy_worker):\n        loop(time = 10 sec,\n             rate = 1 rps):\n            print(resource(text_resource))\n";
const DATA: &[u8] = b"hello\nworld\n";

/// The body the official client (0.2.5) was recorded sending, byte for byte.
const RECORDED: &[u8] = b"--nojnAe9aq4zz5V9C5ahghcv4Dtx2V0\r\n\
Content-Disposition: form-data; name=\"bench\"; filename=\"small.bdl\"\r\n\
Content-Type: application/octet-stream\r\n\
\r\n\
#!benchDL\ninclude_resource(text_resource, \"data.txt\", text)\npool(size = 2,\n     worker_type = dummy_worker):\n        loop(time = 10 sec,\n             rate = 1 rps):\n            print(resource(text_resource))\n\r\n\
--nojnAe9aq4zz5V9C5ahghcv4Dtx2V0\r\n\
Content-Disposition: form-data; name=\"include\"; filename=\"data.txt\"\r\n\
Content-Type: text/plain\r\n\
\r\n\
hello\nworld\n\r\n\
--nojnAe9aq4zz5V9C5ahghcv4Dtx2V0--\r\n";

#[test]
fn body_is_byte_identical_to_the_official_client_recording() {
    let boundary = Boundary::new("nojnAe9aq4zz5V9C5ahghcv4Dtx2V0").unwrap();
    let files: [(Part<'_>, &[u8]); 2] = [
        (
            Part {
                name: "bench",
                filename: "small.bdl",
                content_type: "application/octet-stream",
                len: SCRIPT.len() as u64,
            },
            SCRIPT,
        ),
        (
            Part {
                name: "include",
                filename: "data.txt",
                content_type: "text/plain",
                len: DATA.len() as u64,
            },
            DATA,
        ),
    ];
    let mut buf = [0u8; 1024];
    let mut out = Cursor::new(&mut buf);
    for (part, content) in &files {
        boundary.part_head(part, &mut out).unwrap();
        out.push(content).unwrap();
        boundary.part_end(&mut out).unwrap();
    }
    boundary.closing(&mut out).unwrap();
    assert_eq!(out.written(), RECORDED);
    assert_eq!(RECORDED.len(), 535);
    let parts = [files[0].0, files[1].0];
    assert_eq!(boundary.content_length(&parts), Ok(535));
}

#[test]
fn escaping_follows_urllib3_html5_and_is_counted() {
    let boundary = Boundary::from_random([0; 30]);
    let part = Part {
        name: "include",
        filename: "a\"b\\c\r\n\x1b\u{e9}.txt",
        content_type: "text/plain",
        len: 0,
    };
    let mut buf = [0u8; 256];
    let mut out = Cursor::new(&mut buf);
    boundary.part_head(&part, &mut out).unwrap();
    let head = core::str::from_utf8(out.written()).unwrap();
    assert!(
        head.contains("filename=\"a%22b\\\\c%0D%0A\x1b\u{e9}.txt\"\r\n"),
        "{head}"
    );
    let written = out.len() as u64;
    let mut closing = [0u8; 64];
    let mut c = Cursor::new(&mut closing);
    boundary.closing(&mut c).unwrap();
    assert_eq!(
        boundary.content_length(&[part]),
        Ok(written + 2 + c.len() as u64)
    );
}

#[test]
fn no_parts_is_just_the_closing_delimiter() {
    assert_eq!(Boundary::from_random([1; 30]).content_length(&[]), Ok(36));
}

#[test]
fn bad_values_are_errors() {
    let boundary = Boundary::from_random([0; 30]);
    let part = Part {
        name: "bench",
        filename: "f",
        content_type: "text/plain\r\nX: y",
        len: 0,
    };
    let mut buf = [0u8; 256];
    let mut out = Cursor::new(&mut buf);
    assert_eq!(
        boundary.part_head(&part, &mut out),
        Err(EncodeError::InvalidValue {
            field: "content_type"
        })
    );
    assert_eq!(
        boundary.content_length(&[part]),
        Err(EncodeError::InvalidValue {
            field: "content_type"
        })
    );
    let huge = Part {
        name: "bench",
        filename: "f",
        content_type: "t",
        len: u64::MAX,
    };
    assert_eq!(
        boundary.content_length(&[huge]),
        Err(EncodeError::InvalidValue { field: "len" })
    );
    assert!(Boundary::new("nojnAe9aq4zz5V9C5ahghcv4Dtx2V-").is_err());
    let mut small = [0u8; 10];
    let mut out = Cursor::new(&mut small);
    assert_eq!(
        boundary.closing(&mut out),
        Err(EncodeError::BufferTooSmall { capacity: 10 })
    );
}

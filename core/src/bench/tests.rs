//! Whole-module tests: every reply shape of the server, errors included, request targets
//! byte for byte against the official client's recorded ones, and the stream decoders
//! under every input split.

use super::request::{self, File, Nodes};
use super::*;
use crate::http::{Cursor, Method};
use crate::json::testing::Buf;
use crate::json::Number;

/// A number as the server writes it (numbers compare as text).
fn num(text: &str) -> Number<'_> {
    Number::parse(text).unwrap()
}

fn target<R: Request>(r: &R) -> Buf<512> {
    let mut bytes = [0u8; 512];
    let mut out = Cursor::new(&mut bytes);
    r.write_target(&mut out).unwrap();
    let mut b = Buf::new();
    b.push(out.written());
    b
}

const SCRIPT: File<'static> = File {
    name: "small.bdl",
    content: b"#!benchDL\n",
};

#[test]
fn request_targets_match_the_official_client() {
    // Recorded from mzbench-api-client 0.2.5.
    let full = request::Start {
        nodes: Some(Nodes::Hosts(&["h1", "h2", "h3"])),
        deallocate_after_bench: Some(false),
        provision_nodes: Some(false),
        benchmark_name: Some("my bench"),
        cloud: Some("local"),
        tags: &["a,b"],
        exclusive: Some("lbl"),
        node_commit: Some("abc123"),
        emails: &["x@y.z", "u@v.w"],
        env: &[("message", "zzz"), ("rate", "5")],
        ..request::Start::new(SCRIPT)
    };
    assert_eq!(
        target(&full),
        "/start?nodes=h1%2Ch2%2Ch3&deallocate_after_bench=false&provision_nodes=false&benchmark_name=my+bench&cloud=local&tags=a%2Cb&exclusive=lbl&node_commit=abc123&email=x%40y.z&email=u%40v.w&message=zzz&rate=5"
    );
    // The CLI recording with a node count.
    let cli = request::Start {
        nodes: Some(Nodes::Count(3)),
        deallocate_after_bench: Some(false),
        provision_nodes: Some(true),
        benchmark_name: Some("nm"),
        cloud: Some("local"),
        tags: &["t1", "t2"],
        exclusive: Some("ex"),
        node_commit: Some("master"),
        emails: &["a@b.c", "d@e.f"],
        env: &[("message", "zzz"), ("rate", "5")],
        ..request::Start::new(SCRIPT)
    };
    assert_eq!(
        target(&cli),
        "/start?nodes=3&deallocate_after_bench=false&provision_nodes=true&benchmark_name=nm&cloud=local&tags=t1%2Ct2&exclusive=ex&node_commit=master&email=a%40b.c&email=d%40e.f&message=zzz&rate=5"
    );
    assert_eq!(
        target(&request::Start {
            nodes: Some(Nodes::Count(2)),
            ..request::Start::new(SCRIPT)
        }),
        "/start?nodes=2"
    );
    assert_eq!(target(&request::Start::new(SCRIPT)), "/start");
    assert_eq!(target(&request::Typecheck { script: SCRIPT }), "/typecheck");
    assert_eq!(
        target(&request::Status { id: 7 }),
        "/status?id=7&wait=false"
    );
    assert_eq!(
        target(&request::Results { id: 7 }),
        "/results?id=7&wait=false"
    );
    assert_eq!(target(&request::Log { id: 7 }), "/log?id=7");
    assert_eq!(target(&request::Userlog { id: 7 }), "/userlog?id=7");
    assert_eq!(target(&request::Data { id: 7 }), "/data?id=7");
    assert_eq!(target(&request::Stop { id: 7 }), "/stop?id=7");
    assert_eq!(target(&request::Restart { id: 7 }), "/restart?id=7");
    assert_eq!(
        target(&request::ChangeEnv {
            id: 7,
            env: &[("rate", "5"), ("message", "a b&c")]
        }),
        "/change_env?rate=5&message=a+b%26c&id=7"
    );
    assert_eq!(
        target(&request::RunCommand {
            id: 7,
            pool: 1,
            percent: 50,
            command: "print(\"zz\")"
        }),
        "/run_command?id=7&pool=1&percent=50&command=print%28%22zz%22%29"
    );
    assert_eq!(
        target(&request::AddTags {
            id: 7,
            tags: &["a,b c"]
        }),
        "/add_tags?id=7&tags=a%2Cb+c"
    );
    assert_eq!(
        target(&request::AddTags {
            id: 7,
            tags: &["a", "b c"]
        }),
        "/add_tags?id=7&tags=a%2Cb+c"
    );
    assert_eq!(
        target(&request::RemoveTags {
            id: 7,
            tags: &["a"]
        }),
        "/remove_tags?id=7&tags=a"
    );
    assert_eq!(target(&request::ClustersInfo), "/clusters_info");
    assert_eq!(
        target(&request::DeallocateCluster { id: 1 }),
        "/deallocate_cluster?id=1"
    );
    assert_eq!(
        target(&request::RemoveClusterInfo { id: 1 }),
        "/remove_cluster_info?id=1"
    );
    // Not in the official client: `/email_report` (one `addr` per address) and the
    // removed `/server_logs`.
    assert_eq!(
        target(&request::EmailReport {
            id: 7,
            addrs: &["a@b", "c@d"]
        }),
        "/email_report?id=7&addr=a%40b&addr=c%40d"
    );
    assert_eq!(
        target(&request::ServerLogs {
            severity: Some("info")
        }),
        "/server_logs?severity=info"
    );
    assert_eq!(
        target(&request::ServerLogs { severity: None }),
        "/server_logs"
    );
}

#[test]
fn methods_and_bodies() {
    assert_eq!(<request::Start as Request>::METHOD, Method::Post);
    assert_eq!(<request::Typecheck as Request>::METHOD, Method::Post);
    assert_eq!(<request::Status as Request>::METHOD, Method::Get);
    assert_eq!(<request::AddTags as Request>::METHOD, Method::Get);
    let include = [File {
        name: "data.txt",
        content: b"hello\nworld\n",
    }];
    let start = request::Start {
        includes: &include,
        ..request::Start::new(SCRIPT)
    };
    assert_eq!(
        start.body(),
        Body::Multipart {
            bench: SCRIPT,
            includes: &include
        }
    );
    assert_eq!(request::Log { id: 1 }.body(), Body::Empty);
}

#[test]
fn a_too_small_target_buffer_is_an_error() {
    let mut bytes = [0u8; 10];
    let mut out = Cursor::new(&mut bytes);
    assert!(request::Status { id: 7 }.write_target(&mut out).is_err());
}

#[test]
fn exact_small_bodies_of_the_spec() {
    // The server's exact small bodies, as jiffy writes them.
    let started = request::Start::read_reply(200, br#"{"id":12,"status":"pending"}"#).unwrap();
    assert_eq!(
        started,
        Started {
            id: 12,
            status: Status::Pending
        }
    );
    assert_eq!(
        request::Restart::read_reply(200, br#"{"status":"pending","id":0}"#)
            .unwrap()
            .id,
        0
    );

    let complete = request::Status::read_reply(
        200,
        br#"{"create_time":"2015-11-03T13:39:20Z","finish_time":"2015-11-03T13:41:27Z","start_time":"2015-11-03T13:39:21Z","status":"complete"}"#,
    )
    .unwrap();
    assert_eq!(complete.status, Status::Complete);
    assert_eq!(
        complete.create_time,
        Some(Timestamp::from_unix_seconds(1_446_557_960))
    );
    assert_eq!(
        complete.start_time,
        Some(Timestamp::from_unix_seconds(1_446_557_961))
    );
    assert_eq!(
        complete.finish_time,
        Some(Timestamp::from_unix_seconds(1_446_558_087))
    );
    assert_eq!(complete.reason, None);

    let early = request::Status::read_reply(
        200,
        br#"{"create_time":"2015-11-03T13:39:20Z","status":"checking_script"}"#,
    )
    .unwrap();
    assert_eq!(
        (early.status, early.start_time, early.finish_time),
        (Status::CheckingScript, None, None)
    );
    assert!(!early.status.is_final());

    let crashed =
        request::Status::read_reply(200, br#"{"reason":"crashed","status":"failed"}"#).unwrap();
    assert!(
        crashed.status == Status::Failed
            && crashed.reason.unwrap() == "crashed"
            && crashed.create_time.is_none()
    );

    assert_eq!(
        request::Stop::read_reply(200, br#"{"status":"stopped"}"#),
        Ok(Stopped)
    );
    assert_eq!(
        request::ChangeEnv::read_reply(200, br#"{"status":"set"}"#),
        Ok(EnvSet)
    );
    assert_eq!(
        request::RunCommand::read_reply(200, br#"{"status":"ok"}"#),
        Ok(CommandSent)
    );
    assert_eq!(
        request::Typecheck::read_reply(200, br#"{"result":"ok"}"#),
        Ok(TypecheckOk)
    );
    for body in [&b"{}"[..], b" { } ", br#"{"future":1}"#] {
        assert_eq!(request::AddTags::read_reply(200, body), Ok(Empty));
        assert_eq!(request::RemoveTags::read_reply(200, body), Ok(Empty));
        assert_eq!(request::EmailReport::read_reply(200, body), Ok(Empty));
        assert_eq!(request::DeallocateCluster::read_reply(200, body), Ok(Empty));
        assert_eq!(request::RemoveClusterInfo::read_reply(200, body), Ok(Empty));
    }
}

#[test]
fn wrong_shapes_are_unexpected_replies() {
    let unexpected = |e: Error<'_>| matches!(e, Error::UnexpectedReply { .. });
    assert!(unexpected(
        request::Stop::read_reply(200, br#"{"status":"set"}"#).unwrap_err()
    ));
    assert!(unexpected(
        request::Stop::read_reply(200, b"[]").unwrap_err()
    ));
    assert!(unexpected(
        request::Start::read_reply(200, br#"{"id":-1,"status":"pending"}"#).unwrap_err()
    ));
    assert!(unexpected(
        request::Start::read_reply(200, br#"{"id":1}"#).unwrap_err()
    ));
    assert!(unexpected(
        request::Status::read_reply(200, br#"{"status":7}"#).unwrap_err()
    ));
    assert!(unexpected(
        request::Status::read_reply(200, br#"{"status":"init","create_time":"yesterday"}"#)
            .unwrap_err()
    ));
    assert!(unexpected(
        request::Results::read_reply(200, br#"{"m":{"value":1}}"#).unwrap_err()
    ));
    assert!(unexpected(
        request::Results::read_reply(200, br#"{"m":{"type":"gauge","value":"1"}}"#).unwrap_err()
    ));
    assert!(unexpected(
        request::Results::read_reply(200, br#"{"m":{"type":"gauge","percentiles":[]}}"#)
            .unwrap_err()
    ));
    assert!(unexpected(
        request::ClustersInfo::read_reply(200, b"{}").unwrap_err()
    ));
    assert!(unexpected(
        request::ClustersInfo::read_reply(200, br#"[{"state":"allocated"}]"#).unwrap_err()
    ));
    assert!(unexpected(
        request::ClustersInfo::read_reply(200, br#"[{"id":1,"hosts":["a",1]}]"#).unwrap_err()
    ));
    // `null` counts as absent.
    let s = request::Status::read_reply(200, br#"{"status":"init","start_time":null}"#).unwrap();
    assert_eq!(s.start_time, None);
    // Bodies that are not JSON at all.
    assert_eq!(
        request::Stop::read_reply(200, br#"{"status":"stopped""#),
        Err(Error::Json(crate::json::Error {
            offset: 19,
            kind: crate::json::ErrorKind::UnexpectedEnd
        }))
    );
    assert!(matches!(
        request::Stop::read_reply(200, b"\xff"),
        Err(Error::Json(_))
    ));
    assert!(matches!(
        request::Stop::read_reply(200, b""),
        Err(Error::Json(_))
    ));
}

#[test]
fn every_status_name() {
    let stages = [
        ("init", Status::Init),
        ("checking_script", Status::CheckingScript),
        ("wait_exclusive", Status::WaitExclusive),
        ("allocating_hosts", Status::AllocatingHosts),
        ("provisioning", Status::Provisioning),
        ("connect_nodes", Status::ConnectNodes),
        ("starting_collectors", Status::StartingCollectors),
        ("uploading_script", Status::UploadingScript),
        ("uploading_includes", Status::UploadingIncludes),
        ("pre_hooks", Status::PreHooks),
        ("starting", Status::Starting),
        ("running", Status::Running),
        ("post_hooks", Status::PostHooks),
        ("pending", Status::Pending),
    ];
    let finals = [
        ("complete", Status::Complete),
        ("failed", Status::Failed),
        ("stopped", Status::Stopped),
        ("zombie", Status::Zombie),
    ];
    for (name, status) in stages {
        assert_eq!(Status::parse(name), status);
        assert_eq!(status.as_str(), name);
        assert!(!status.is_final(), "{name}");
    }
    for (name, status) in finals {
        assert_eq!(Status::parse(name), status);
        assert_eq!(Buf::<32>::display(status), name);
        assert!(status.is_final(), "{name}");
    }
    // Unknown values stay text; escaped known values are still known.
    let s = request::Status::read_reply(200, br#"{"status":"crashed"}"#).unwrap();
    assert_eq!(
        (s.status, s.status.as_str()),
        (Status::Other("crashed"), "crashed")
    );
    let s = request::Status::read_reply(200, br#"{"status":"runn\u0069ng"}"#).unwrap();
    assert_eq!(s.status, Status::Running);
}

#[test]
fn results_example_of_the_spec() {
    // An example body (values made up), with a line break and a space between members.
    let body = br#"{"print":{"rps":{"50":2.99,"90":2.99,"95":2.99,"max":3.05,"min":2.99},"type":"counter","value":900},
 "systemload.la1.mzb_director49_0":{"percentiles":{"50":0.1,"90":0.2,"95":0.2,"max":0.3,"min":0.0},"type":"gauge","value":0.1}}"#;
    let results = request::Results::read_reply(200, body).unwrap();
    assert!(!results.is_empty());
    assert!(results
        .iter()
        .map(|(name, _)| name)
        .eq(["print", "systemload.la1.mzb_director49_0"]));

    let print = results.get("print").unwrap();
    assert_eq!(
        (print.kind, print.value),
        (MetricKind::Counter, Some(num("900")))
    );
    assert!(print.stats().eq([
        (StatKey::Percentile("50"), num("2.99")),
        (StatKey::Percentile("90"), num("2.99")),
        (StatKey::Percentile("95"), num("2.99")),
        (StatKey::Max, num("3.05")),
        (StatKey::Min, num("2.99")),
    ]));
    assert_eq!(print.stat(StatKey::Max), Some(num("3.05")));
    assert_eq!(print.stat(StatKey::Mean), None);

    let la = results.get("systemload.la1.mzb_director49_0").unwrap();
    assert_eq!((la.kind, la.value), (MetricKind::Gauge, Some(num("0.1"))));
    assert_eq!(la.stat(StatKey::Min), Some(num("0.0")));
    assert_eq!(la.stat(StatKey::Percentile("90")), Some(num("0.2")));
    assert_eq!(results.get("missing"), None);
}

#[test]
fn results_shapes() {
    let body = br#"{"dummy":{"percentiles":{"50":5.0,"99.9":9.5,"max":12,"mean":5.5,"median":5.0,"min":1},"type":"histogram"},
        "empty_gauge":{"percentiles":{},"type":"gauge"},
        "empty_counter":{"rps":{},"type":"counter"},
        "legacy":{"type":"undefined","value":3},
        "odd":{"percentiles":{"p99":1,"max":"x","min":2},"type":"gauge"}}"#;
    let results = request::Results::read_reply(200, body).unwrap();
    let dummy = results.get("dummy").unwrap();
    assert_eq!((dummy.kind, dummy.value), (MetricKind::Histogram, None));
    assert_eq!(dummy.stat(StatKey::Max), Some(num("12")));
    assert_eq!(dummy.stat(StatKey::Min), Some(num("1")));
    assert_eq!(dummy.stat(StatKey::Mean), Some(num("5.5")));
    assert_eq!(dummy.stat(StatKey::Median), Some(num("5.0")));
    assert_eq!(dummy.stat(StatKey::Percentile("99.9")), Some(num("9.5")));
    assert_eq!(dummy.stats().count(), 6);
    for name in ["empty_gauge", "empty_counter"] {
        let m = results.get(name).unwrap();
        assert_eq!((m.value, m.stats().count()), (None, 0));
    }
    let legacy = results.get("legacy").unwrap();
    assert_eq!(
        (legacy.kind, legacy.value),
        (MetricKind::Other("undefined"), Some(num("3")))
    );
    assert_eq!(legacy.stats().next(), None);
    // Unknown stat keys and non-numeric stat values are skipped, not fatal.
    assert!(results
        .get("odd")
        .unwrap()
        .stats()
        .eq([(StatKey::Min, num("2"))]));
    assert_eq!(results.iter().count(), 5);

    let empty = request::Results::read_reply(200, b"{}").unwrap();
    assert!(empty.is_empty() && empty.iter().next().is_none());
}

#[test]
fn clusters_example_and_states() {
    let body = br#"[{"bench_id":24,"hosts":["127.0.0.1"],"id":1,"n":2,"provider":"mzb_dummycloud_plugin","state":"allocated","timestamp":1479139259}]"#;
    let clusters = request::ClustersInfo::read_reply(200, body).unwrap();
    let mut it = clusters.iter();
    let c = it.next().unwrap();
    assert_eq!(it.next(), None);
    assert_eq!(c.id, 1);
    assert_eq!(c.state, Some(ClusterState::Allocated));
    assert_eq!((c.n, c.bench_id), (Some(2), Some(24)));
    assert_eq!(
        c.timestamp,
        Some(Timestamp::from_unix_seconds(1_479_139_259))
    );
    assert!(c.provider.unwrap() == "mzb_dummycloud_plugin");
    assert!(c.hosts.unwrap().iter().eq(["127.0.0.1"]));
    assert_eq!(c.reason, None);

    let body = br#"[{"bench_id":5,"id":2,"n":3,"provider":"mzb_api_ec2_plugin","state":"registered","timestamp":10},
        {"id":3,"reason":"{error,{quota,\"x\"}}","state":"allocation_failed"},
        {"id":4,"state":"deallocation_failed","hosts":["a","b"],"reason":"timeout"},
        {"id":5,"state":"resizing"}]"#;
    let clusters = request::ClustersInfo::read_reply(200, body).unwrap();
    let states = clusters.iter().map(|c| c.state);
    assert!(states.eq([
        Some(ClusterState::Registered),
        Some(ClusterState::AllocationFailed),
        Some(ClusterState::DeallocationFailed),
        Some(ClusterState::Other("resizing")),
    ]));
    let failed = clusters.iter().nth(1).unwrap();
    assert_eq!(
        Buf::<64>::display(failed.reason.unwrap()),
        "{error,{quota,\"x\"}}"
    );
    assert_eq!(
        (
            failed.n,
            failed.bench_id,
            failed.timestamp,
            failed.provider,
            failed.hosts
        ),
        (None, None, None, None, None)
    );
    assert_eq!(
        clusters
            .iter()
            .nth(2)
            .unwrap()
            .hosts
            .unwrap()
            .iter()
            .count(),
        2
    );
    assert!(request::ClustersInfo::read_reply(200, b"[]")
        .unwrap()
        .is_empty());
}

#[test]
fn error_replies() {
    let e = request::Stop::read_reply(
        404,
        br#"{"reason":"Wrong endpoint: <<\"GET\">> <<\"/foo\">>","reason_code":"not_found"}"#,
    );
    let Err(Error::Server(e)) = e else {
        panic!("{e:?}")
    };
    assert_eq!((e.http_status, e.reason_code), (404, ReasonCode::NotFound));
    assert_eq!(
        Buf::<64>::display(e.reason),
        r#"Wrong endpoint: <<"GET">> <<"/foo">>"#
    );
    assert_eq!(
        Buf::<128>::display(Error::Server(e)),
        r#"server error 404 not_found: Wrong endpoint: <<"GET">> <<"/foo">>"#
    );

    for (status, code, reason_code) in [
        (404, "not_found", ReasonCode::NotFound),
        (400, "badarg", ReasonCode::Badarg),
        (400, "not_running", ReasonCode::NotRunning),
        (403, "forbidden", ReasonCode::Forbidden),
        (503, "service_unavailable", ReasonCode::ServiceUnavailable),
        (500, "internal_error", ReasonCode::InternalError),
        (501, "not_supported", ReasonCode::NotSupported),
        (400, "error", ReasonCode::Error),
        (418, "teapot", ReasonCode::Other("teapot")),
    ] {
        let mut body = Buf::<128>::new();
        body.push(br#"{"reason":"r","reason_code":""#)
            .push(code.as_bytes())
            .push(br#""}"#);
        let e = Error::from_reply(status, body.as_bytes());
        let Error::Server(s) = e else { panic!("{e:?}") };
        assert_eq!(
            (s.http_status, s.reason_code, s.reason.as_raw()),
            (status, reason_code, "r")
        );
        assert_eq!(reason_code.as_str(), code);
        assert_eq!(e.http_status(), Some(status));
    }
    // Key order does not matter, nor do extra members.
    let e = Error::from_reply(400, br#"{"reason_code":"badarg","extra":[1],"reason":"Invalid value \"x\" for deallocate_after_bench"}"#);
    assert!(matches!(
        e,
        Error::Server(ServerError {
            reason_code: ReasonCode::Badarg,
            ..
        })
    ));

    // Not the error object: a bounded raw view.
    let html = [b'x'; 1000];
    let e = Error::from_reply(502, &html);
    assert_eq!(
        e,
        Error::Http {
            status: 502,
            body: &html[..MAX_BODY_VIEW],
            body_len: 1000
        }
    );
    for body in [
        &b""[..],
        b"{}",
        br#"{"reason":"r"}"#,
        br#"{"reason_code":1,"reason":"r"}"#,
        b"\xff\xfe",
    ] {
        assert!(
            matches!(
                Error::from_reply(500, body),
                Error::Http { status: 500, .. }
            ),
            "{body:?}"
        );
    }
    assert_eq!(
        Buf::<128>::display(Error::from_reply(500, b"bad \xff body")),
        "HTTP 500 without a server error object (10 bytes): bad \u{FFFD} body"
    );
    // A non-200 success-looking body is still an error (streams check first too).
    assert!(matches!(
        request::Stop::read_reply(302, b""),
        Err(Error::Http { status: 302, .. })
    ));
}

/// Feeds `input` to `next` split into pieces at `cuts`, then finishes, and writes a
/// transcript of what came out: `[line]` per line, `!` per error.
fn transcript_of<const N: usize>(input: &[u8], cuts: &[usize], buf: &mut [u8]) -> Buf<N> {
    let mut out = Buf::<N>::new();
    let mut lines = LineSplitter::new(buf);
    let mut start = 0;
    for &end in cuts.iter().chain([input.len()].iter()) {
        let mut piece = &input[start..end];
        start = end;
        while let Some(line) = lines.next(&mut piece) {
            match line {
                Ok(l) => out.push(b"[").push(l).push(b"]"),
                Err(LineTooLong { max }) => out.push(b"!").push(&[b'0' + max as u8]),
            };
        }
        assert!(piece.is_empty());
    }
    if let Some(line) = lines.finish() {
        out.push(b"<").push(line.unwrap()).push(b">");
    }
    out
}

#[test]
fn line_splitter_every_split_gives_the_same_lines() {
    let cases: [(&[u8], &str); 9] = [
        (
            b"a\nbb\r\nccc\rdd\n\n\r\n\ree",
            "[a][bb][ccc][dd][][][]<ee>",
        ),
        (b"\r\n\n\r\r", "[][][][]"),
        (b"12345678\n123456789\nx", "[12345678]!8<x>"),
        (b"123456789abc\r\nok\r", "!8[ok]"),
        (b"123456789", "!8"),
        (b"\r\r\n", "[][]"),
        (b"", ""),
        (b"no end", "<no end>"),
        (b"a\r", "[a]"),
    ];
    for (input, expected) in cases {
        let mut buf = [0u8; 8];
        assert_eq!(
            transcript_of::<128>(input, &[], &mut buf),
            expected,
            "{input:?}"
        );
        // One split at every point.
        for cut in 0..=input.len() {
            assert_eq!(
                transcript_of::<128>(input, &[cut], &mut buf),
                expected,
                "{input:?} at {cut}"
            );
        }
        // Two splits at every pair of points.
        for a in 0..=input.len() {
            for b in a..=input.len() {
                assert_eq!(
                    transcript_of::<128>(input, &[a, b], &mut buf),
                    expected,
                    "{input:?} at {a},{b}"
                );
            }
        }
        // One byte at a time.
        let cuts: [usize; 32] = core::array::from_fn(|i| i.min(input.len()));
        assert_eq!(
            transcript_of::<128>(input, &cuts[..input.len()], &mut buf),
            expected,
            "{input:?} bytewise"
        );
    }
}

#[test]
fn line_splitter_hands_out_input_slices_when_it_can() {
    let mut buf = [0u8; 4];
    let mut lines = LineSplitter::new(&mut buf);
    let data = b"whole line longer than the buffer is still too long\nfits\n";
    let mut input = &data[..];
    assert_eq!(lines.next(&mut input), Some(Err(LineTooLong { max: 4 })));
    let line = lines.next(&mut input).unwrap().unwrap();
    assert_eq!(line, b"fits");
    assert!(
        core::ptr::eq(line.as_ptr(), data[data.len() - 5..].as_ptr()),
        "zero-copy slice of the input"
    );
}

#[test]
fn line_splitter_with_no_buffer_still_splits_empty_lines() {
    let mut lines = LineSplitter::new(&mut []);
    let mut input = &b"\n\nx\n"[..];
    assert_eq!(lines.next(&mut input), Some(Ok(&b""[..])));
    assert_eq!(lines.next(&mut input), Some(Ok(&b""[..])));
    assert_eq!(lines.next(&mut input), Some(Err(LineTooLong { max: 0 })));
    assert_eq!(lines.next(&mut input), None);
    assert_eq!(lines.finish(), None);
}

#[test]
fn log_lines() {
    // A lager line, a server line (`[ API ]`) and a line that is not UTF-8, with CRLF as
    // `/server_logs` writes them.
    let stream = b"14:02:47.080 [info] <0.237.0> Dummy print: \"FOO\"\r\n13:00:00.000 [error] [ API ] <0.1.0> caf\xc3\xa9\r\nbad \xff\r\n";
    for cut in 0..=stream.len() {
        let mut buf = [0u8; 64];
        let mut log = LogDecoder::new(&mut buf);
        let mut out = Buf::<256>::new();
        for mut piece in [&stream[..cut], &stream[cut..]] {
            while let Some(line) = log.next(&mut piece) {
                match line {
                    Ok(text) => out.push(text.as_bytes()).push(b"|"),
                    Err(LogLineError::NotUtf8 { line }) => {
                        out.push(b"?").push(&[line.len() as u8 + b'0']).push(b"|")
                    }
                    Err(LogLineError::TooLong { .. } | LogLineError::Resume(_)) => out.push(b"!|"),
                };
            }
        }
        assert!(log.finish().is_none());
        assert_eq!(
            out,
            "14:02:47.080 [info] <0.237.0> Dummy print: \"FOO\"|13:00:00.000 [error] [ API ] <0.1.0> café|?5|",
            "cut {cut}"
        );
    }
    assert_eq!(
        Buf::<64>::display(LogLineError::TooLong { max: 64 }),
        "log line longer than 64 bytes"
    );
}

#[test]
fn metric_samples() {
    // `/data` lines, among them those behind the official CLI's recorded CSV output, plus
    // bad lines in between.
    let stream: &[u8] = b"1439245024\tworkers.pool1.started\t3\n\
1439245024\tworkers.pool1.started.rps\t0.3\n\
1439245034\tprint\t30\n\
oops\n\
1439245034\tprint.rps\t2.9975917348002614\n\
1439245034\tx\t1,5\n\
1439245044\tlatency.999\t1.0e-5\n\
1439245044\t\t1\n\
-1\tx\t1\n\
1439245044\tbig\t1.0e20\n\
1439245044\tneg\t-2000\n\
1\ta\tb\tc\n\
1439245054\tlast.line\t2.0";
    let expected: [Result<Sample<'_>, SampleError>; 13] = [
        Ok(Sample {
            timestamp: 1_439_245_024,
            name: "workers.pool1.started",
            value: num("3"),
        }),
        Ok(Sample {
            timestamp: 1_439_245_024,
            name: "workers.pool1.started.rps",
            value: num("0.3"),
        }),
        Ok(Sample {
            timestamp: 1_439_245_034,
            name: "print",
            value: num("30"),
        }),
        Err(SampleError::FieldCount { found: 1 }),
        Ok(Sample {
            timestamp: 1_439_245_034,
            name: "print.rps",
            value: num("2.9975917348002614"),
        }),
        Err(SampleError::InvalidValue),
        Ok(Sample {
            timestamp: 1_439_245_044,
            name: "latency.999",
            value: num("1.0e-5"),
        }),
        Err(SampleError::InvalidName),
        Err(SampleError::InvalidTimestamp),
        Ok(Sample {
            timestamp: 1_439_245_044,
            name: "big",
            value: num("1.0e20"),
        }),
        Ok(Sample {
            timestamp: 1_439_245_044,
            name: "neg",
            value: num("-2000"),
        }),
        Err(SampleError::FieldCount { found: 4 }),
        Ok(Sample {
            timestamp: 1_439_245_054,
            name: "last.line",
            value: num("2.0"),
        }),
    ];
    let check = |cuts: &[usize]| {
        let mut buf = [0u8; 48];
        let mut metrics = MetricDecoder::new(&mut buf);
        let mut i = 0;
        let mut start = 0;
        for &end in cuts.iter().chain([stream.len()].iter()) {
            let mut piece = &stream[start..end];
            start = end;
            while let Some(sample) = metrics.next(&mut piece) {
                assert_eq!(sample, expected[i], "item {i}, cuts {cuts:?}");
                i += 1;
            }
        }
        assert_eq!(metrics.finish(), Some(expected[i]), "cuts {cuts:?}");
        assert_eq!(i + 1, expected.len());
    };
    check(&[]);
    for cut in 0..=stream.len() {
        check(&[cut]);
    }
    let mut bytewise = [0usize; 512];
    (0..stream.len()).for_each(|i| bytewise[i] = i);
    check(&bytewise[..stream.len()]);

    let mut buf = [0u8; 8];
    let mut metrics = MetricDecoder::new(&mut buf);
    let mut input = &b"1439245024\tprint\t3\n1\tp\t1\n"[..];
    assert_eq!(
        metrics.next(&mut input),
        Some(Err(SampleError::LineTooLong { max: 8 }))
    );
    assert_eq!(
        metrics.next(&mut input),
        Some(Ok(Sample {
            timestamp: 1,
            name: "p",
            value: num("1")
        }))
    );
    assert_eq!(
        Buf::<64>::display(SampleError::FieldCount { found: 2 }),
        "metric line has 2 fields, not 3"
    );
}

/// Deterministic pseudo-random numbers for the randomized tests below.
fn rng(seed: u64) -> impl FnMut() -> usize {
    let mut rng = crate::testing::Xorshift(seed);
    move || rng.next() as usize
}

#[test]
fn line_splitter_random_streams_and_cuts() {
    let mut rand = rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..3_000 {
        let mut stream = [0u8; 40];
        let len = rand() % stream.len();
        for b in &mut stream[..len] {
            *b = b"ab\r\n"[rand() % 4];
        }
        let input = &stream[..len];
        let cap = rand() % 6;
        let mut cuts = [0usize; 8];
        for c in &mut cuts {
            *c = rand() % (len + 1);
        }
        cuts.sort_unstable();
        let (mut buf_a, mut buf_b) = ([0u8; 6], [0u8; 6]);
        let whole = transcript_of::<256>(input, &[], &mut buf_a[..cap]);
        let split = transcript_of::<256>(input, &cuts, &mut buf_b[..cap]);
        assert_eq!(whole, split.as_str(), "{input:?} cap {cap} cuts {cuts:?}");
    }
}

#[test]
fn stream_requests_name_their_line_format() {
    fn decode<R: StreamRequest>(bytes: &[u8]) -> usize {
        let mut buf = [0u8; 64];
        let mut decoder = LineDecoder::<R::Format>::new(&mut buf);
        let mut input = bytes;
        let mut ok = 0;
        while let Some(item) = decoder.next(&mut input) {
            ok += usize::from(item.is_ok());
        }
        ok
    }
    let data = b"1\tm\t2\nnot a sample\n";
    assert_eq!(decode::<request::Data>(data), 1);
    assert_eq!(decode::<request::Log>(data), 2);
    assert_eq!(decode::<request::Userlog>(data), 2);
    assert_eq!(decode::<request::ServerLogs>(data), 2);
}

/// Mutated reply bodies through every reply type: typed results or typed errors, never a
/// panic, and whatever is accepted iterates completely.
#[test]
fn mutated_replies_never_panic() {
    let seeds: [&[u8]; 6] = [
        br#"{"id":12,"status":"pending"}"#,
        br#"{"create_time":"2015-11-03T13:39:20Z","finish_time":"2015-11-03T13:41:27Z","start_time":"2015-11-03T13:39:21Z","status":"complete"}"#,
        br#"{"print":{"rps":{"50":2.99,"max":3.05},"type":"counter","value":900},"h":{"percentiles":{"99.9":1.0e-5},"type":"histogram"}}"#,
        br#"[{"bench_id":24,"hosts":["127.0.0.1"],"id":1,"n":2,"provider":"p","state":"allocated","timestamp":1479139259}]"#,
        br#"{"reason":"Benchmark 12 is not found","reason_code":"not_found"}"#,
        br#"{"status":"stopped"}"#,
    ];
    let alphabet = b"{}[]\",:\\u0123456789.-eEtrnl aZ\x00\xff";
    let mut rand = rng(0x2545_f491_4f6c_dd1d);
    for round in 0..20_000 {
        let mut body = Buf::<256>::new();
        body.push(seeds[round % seeds.len()]);
        for _ in 0..rand() % 3 + 1 {
            let pos = rand() % (body.len() + 1);
            let b = alphabet[rand() % alphabet.len()];
            match rand() % 3 {
                0 if pos < body.len() => body.set(pos, b),
                1 if pos < body.len() => body.remove(pos),
                _ => body.insert(pos, b),
            }
        }
        let body = body.as_bytes();
        let _ = request::Start::read_reply(200, body);
        let _ = request::Status::read_reply(200, body).map(|s| s.status.is_final());
        let _ = request::Stop::read_reply(200, body);
        let _ = request::AddTags::read_reply(200, body);
        if let Ok(results) = request::Results::read_reply(200, body) {
            for (name, metric) in &results {
                assert!(
                    results.get(name.as_plain().unwrap_or_default()).is_some()
                        || name.as_plain().is_none()
                );
                let _ = metric.stats().count();
            }
        }
        if let Ok(clusters) = request::ClustersInfo::read_reply(200, body) {
            for cluster in &clusters {
                let _ = cluster.hosts.map(|h| h.iter().count());
            }
        }
        let e = Error::from_reply(500, body);
        let _ = Buf::<1024>::display(e);
        let mut buf = [0u8; 16];
        let mut samples = MetricDecoder::new(&mut buf);
        let mut input = body;
        while samples.next(&mut input).is_some() {}
        let _ = samples.finish();
    }
}

#[test]
fn the_fast_sample_parser_agrees_with_the_field_parser() {
    let alphabet: &[u8] = b"0123456789\t\t\t.e-+abx\xc3\xa9\xff ";
    let fixed: [&[u8]; 12] = [
        b"1\tx\t1",
        b"18446744073709551615\tx\t1",
        b"18446744073709551616\tx\t1",
        b"1\t\t1",
        b"\tx\t1",
        b"1\tx\t",
        b"1\tx\t1\t",
        b"1\tx\xff\t1",
        b"1\t\xc3\xa9\t-1.5e3",
        b"12a\tx\t1",
        b"1\tx\t01",
        b"",
    ];
    for line in fixed {
        assert_eq!(
            Sample::parse(line),
            Sample::parse_fields(line),
            "{:?}",
            line.escape_ascii().to_string()
        );
    }
    let mut rng = crate::testing::Xorshift(0x9E37_79B9_7F4A_7C15);
    let mut line = [0u8; 24];
    for _ in 0..50_000 {
        let len = (rng.next() % 24) as usize;
        for b in line.iter_mut().take(len) {
            *b = alphabet[(rng.next() % alphabet.len() as u64) as usize];
        }
        let line = &line[..len];
        assert_eq!(
            Sample::parse(line),
            Sample::parse_fields(line),
            "{:?}",
            line.escape_ascii().to_string()
        );
    }
}

#[test]
fn line_ends_are_found_at_every_offset() {
    let mut rng = crate::testing::Xorshift(0x2545_F491_4F6C_DD1D);
    let mut data = [0u8; 40];
    for _ in 0..20_000 {
        let len = (rng.next() % 40) as usize;
        for b in data.iter_mut().take(len) {
            *b = match rng.next() % 16 {
                0 => b'\n',
                1 => b'\r',
                2 => 0,
                3 => 0x8a,
                4 => 0x0c,
                _ => b'a',
            };
        }
        let data = &data[..len];
        let naive = data.iter().position(|&b| b == b'\n' || b == b'\r');
        let mut buf = [0u8; 64];
        let mut lines = LineSplitter::new(&mut buf);
        let mut input = data;
        let first = lines.next(&mut input).map(|l| l.map(<[u8]>::len));
        match naive {
            Some(end) => assert_eq!(first, Some(Ok(end)), "{data:?}"),
            None => assert_eq!(first, None, "{data:?}"),
        }
    }
}

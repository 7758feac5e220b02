//! The MZBench emulator over real sockets, driven with raw HTTP: the requests recorded
//! from the official client (0.2.5) byte for byte, the lifecycle, errors, streams.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

mod common;
use common::{returns, wait_until, HANG_GUARD};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use benchlink_sandbox::{BenchServer, BenchServerConfig, LogCompression, Quirks, Speed};

const BOUNDARY: &str = "nojnAe9aq4zz5V9C5ahghcv4Dtx2V0";
const SMALL_BDL: &str = "#!benchDL\ninclude_resource(text_resource, \"data.txt\", text)\npool(size = 2,\n     worker_type = dummy_worker):\n        loop(time = 10 sec,\n             rate = 1 rps):\n            print(resource(text_resource))\n";

/// The official client's multipart body for `small.bdl` + `data.txt`, as recorded.
fn official_body(script: &str) -> String {
    format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"bench\"; filename=\"small.bdl\"\r\nContent-Type: application/octet-stream\r\n\r\n{script}\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"include\"; filename=\"data.txt\"\r\nContent-Type: text/plain\r\n\r\nhello\nworld\n\r\n--{BOUNDARY}--\r\n"
    )
}

/// The official client's POST /start request (headers in its order).
fn official_start(target: &str, script: &str, extra_header: &str) -> Vec<u8> {
    let body = official_body(script);
    format!(
        "POST {target} HTTP/1.1\r\nHost: localhost:48555\r\nConnection: keep-alive\r\nAccept-Encoding: gzip, deflate\r\nAccept: */*\r\nUser-Agent: python-requests/2.27.1\r\nContent-Length: {}\r\nContent-Type: multipart/form-data; boundary={BOUNDARY}\r\n{extra_header}\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The official client's GET request.
fn official_get(target: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: localhost:48555\r\nConnection: keep-alive\r\nAccept-Encoding: gzip, deflate\r\nAccept: */*\r\nUser-Agent: python-requests/2.27.1\r\n\r\n").into_bytes()
}

#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

fn read_head(r: &mut impl BufRead) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status = line
        .split(' ')
        .nth(1)
        .unwrap_or_else(|| panic!("bad status line {line:?}"))
        .parse()
        .unwrap();
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').unwrap();
        headers.push((k.to_ascii_lowercase(), v.trim().to_owned()));
    }
    (status, headers)
}

/// One chunk of a chunked body; `None` at the terminating chunk.
fn read_chunk(r: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let size = usize::from_str_radix(line.trim(), 16)
        .unwrap_or_else(|_| panic!("bad chunk size {line:?}"));
    let mut data = vec![0; size + 2];
    r.read_exact(&mut data).unwrap();
    assert_eq!(&data[size..], b"\r\n");
    data.truncate(size);
    (size > 0).then_some(data)
}

fn read_response(r: &mut impl BufRead) -> Resp {
    let (status, headers) = read_head(r);
    let find = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    if find("transfer-encoding").as_deref() == Some("chunked") {
        while let Some(c) = read_chunk(r) {
            body.extend(c);
        }
    } else {
        let len: usize = find("content-length").map_or(0, |l| l.parse().unwrap());
        body.resize(len, 0);
        r.read_exact(&mut body).unwrap();
    }
    Resp {
        status,
        headers,
        body,
    }
}

fn connect(addr: SocketAddr) -> BufReader<TcpStream> {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    BufReader::new(s)
}

fn raw(addr: SocketAddr, request: &[u8]) -> Resp {
    let mut c = connect(addr);
    c.get_mut().write_all(request).unwrap();
    read_response(&mut c)
}

fn get(addr: SocketAddr, target: &str) -> Resp {
    raw(addr, &official_get(target))
}

/// `config` with its connection deadlines (idle, head, body) an hour away, so that
/// nothing but the server's own shutdown can end a connection within [`HANG_GUARD`]
/// (the guard of [`returns`], which a shutdown that waited for them would meet).
fn without_deadlines(config: BenchServerConfig) -> BenchServerConfig {
    let hour = Duration::from_secs(3600);
    BenchServerConfig {
        keep_alive_timeout: hour,
        header_timeout: hour,
        body_timeout: hour,
        ..config
    }
}

fn server(speed: Speed) -> BenchServer {
    BenchServer::start(BenchServerConfig {
        speed,
        ..BenchServerConfig::default()
    })
    .unwrap()
}

fn start(addr: SocketAddr, target: &str, script: &str) -> u64 {
    let r = raw(addr, &official_start(target, script, ""));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["id"].as_u64().unwrap()
}

fn status(addr: SocketAddr, id: u64) -> serde_json::Value {
    get(addr, &format!("/status?id={id}&wait=false")).json()
}

fn wait_status(addr: SocketAddr, id: u64, pred: impl Fn(&str) -> bool) -> serde_json::Value {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        let s = status(addr, id);
        if pred(s["status"].as_str().unwrap()) {
            return s;
        }
        assert!(Instant::now() < deadline, "timed out at {s}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_finished(server: &BenchServer, id: u64) {
    wait_until("the benchmark's process to end", || {
        !server.benchmark(id).unwrap().process_alive
    });
}

fn error_body(reason: &str, code: &str) -> String {
    serde_json::json!({ "reason": reason, "reason_code": code }).to_string()
}

/// A speed where `running` lasts long enough to act on it.
fn slow_running() -> Speed {
    Speed {
        scenario_second: Duration::from_millis(60),
        max_running: Duration::from_secs(3),
        ..Speed::fast()
    }
}

#[test]
fn official_multipart_start_and_full_lifecycle() {
    let s = server(Speed::fast());
    let request = official_start("/start", SMALL_BDL, "");
    let text = String::from_utf8(request.clone()).unwrap();
    assert!(
        text.contains("Content-Length: 535\r\n"),
        "replay must match the recording"
    );
    let r = raw(s.addr(), &request);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, br#"{"id":0,"status":"pending"}"#);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("server"), Some("Cowboy"));
    assert_eq!(r.header("connection"), Some("keep-alive"));
    assert!(r.header("date").unwrap().ends_with(" GMT"));

    let info = s.benchmark(0).unwrap();
    assert_eq!(info.script_name, "small.bdl");
    assert_eq!(info.name, "small.bdl");
    assert_eq!(info.script, SMALL_BDL);
    assert_eq!(
        info.includes,
        vec![("data.txt".to_owned(), b"hello\nworld\n".to_vec())]
    );
    assert_eq!(
        info.env,
        vec![
            ("mzb_bench_id".to_owned(), "0".to_owned()),
            ("mzb_script_name".to_owned(), "small.bdl".to_owned())
        ]
    );

    // Watch the pipeline: stages in order, timestamps at the right moments.
    let stages = [
        "init",
        "checking_script",
        "wait_exclusive",
        "allocating_hosts",
        "provisioning",
        "connect_nodes",
        "starting_collectors",
        "uploading_script",
        "uploading_includes",
        "pre_hooks",
        "starting",
        "running",
        "post_hooks",
        "complete",
    ];
    let mut seen: Vec<String> = Vec::new();
    let deadline = Instant::now() + HANG_GUARD;
    let last = loop {
        let st = status(s.addr(), 0);
        let name = st["status"].as_str().unwrap().to_owned();
        assert!(st["create_time"].as_str().unwrap().ends_with('Z'));
        let pos = stages
            .iter()
            .position(|x| *x == name)
            .unwrap_or_else(|| panic!("unexpected {st}"));
        if pos <= 1 {
            assert!(st.get("start_time").is_none(), "{st}");
        }
        if pos >= 4 {
            assert!(st.get("start_time").is_some(), "{st}");
        }
        assert_eq!(st.get("finish_time").is_some(), name == "complete", "{st}");
        if seen.last() != Some(&name) {
            seen.push(name.clone());
        }
        if name == "complete" {
            break st;
        }
        assert!(Instant::now() < deadline);
    };
    let positions: Vec<usize> = seen
        .iter()
        .map(|n| stages.iter().position(|x| x == n).unwrap())
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    assert!(seen.contains(&"running".to_owned()), "{seen:?}");
    let keys: Vec<&String> = last.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["create_time", "finish_time", "start_time", "status"]);
    let body = get(s.addr(), "/status?id=0&wait=true").text();
    assert!(
        body.starts_with("{\"create_time\":\"") && body.ends_with("\",\"status\":\"complete\"}"),
        "{body}"
    );

    let results = get(s.addr(), "/results?id=0&wait=false").json();
    assert_eq!(results["print"]["type"], "counter");
    assert_eq!(results["print"]["value"], 20, "2 workers × 1 rps × 10 s");
    assert!(results["print"]["rps"]["max"].as_f64().unwrap() > 0.0);
    for k in ["min", "50", "90", "95", "max"] {
        assert!(results["print"]["rps"].get(k).is_some(), "{k}");
    }
    assert_eq!(results["dummy"]["type"], "histogram");
    assert!(results["dummy"]["percentiles"]["max"].as_i64().unwrap() > 0);
    assert_eq!(results["metric_merging_time"]["type"], "gauge");
    assert_eq!(results["workers.pool1.started"]["value"], 2);
    assert_eq!(results["workers.pool1.ended"]["value"], 2);

    wait_finished(&s, 0);
    let log = get(s.addr(), "/userlog?id=0");
    assert!(log.header("content-length").is_some());
    let text = inflate(&log.body);
    assert!(text.contains("Dummy print: \"hello\\nworld\\n\""), "{text}");
    s.shutdown();
}

fn inflate(bytes: &[u8]) -> String {
    let mut out = String::new();
    flate2::read::ZlibDecoder::new(bytes)
        .read_to_string(&mut out)
        .unwrap();
    out
}

#[test]
fn official_query_string_start() {
    let s = server(Speed::fast());
    let target = "/start?nodes=h1%2Ch2%2Ch3&deallocate_after_bench=false&provision_nodes=false&benchmark_name=my+bench&cloud=local&tags=a%2Cb&exclusive=lbl&node_commit=abc123&email=x%40y.z&email=u%40v.w&message=zzz&rate=5";
    let id = start(s.addr(), target, SMALL_BDL);
    let info = s.benchmark(id).unwrap();
    assert_eq!(info.name, "my bench");
    assert_eq!(info.tags, ["a", "b"]);
    assert_eq!(info.exclusive, ["lbl"]);
    assert_eq!(info.emails, ["x@y.z", "u@v.w"]);
    let env: Vec<(&str, &str)> = info
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        env,
        [
            ("message", "zzz"),
            ("mzb_bench_id", "0"),
            ("mzb_script_name", "small.bdl"),
            ("rate", "5")
        ]
    );
    wait_status(s.addr(), id, |st| st == "complete");
    wait_finished(&s, id);
    let reports = s.email_reports();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].addresses, ["x@y.z", "u@v.w"]);
    assert_eq!(
        get(s.addr(), "/clusters_info").body,
        b"[]",
        "host lists create no cluster"
    );

    // The CLI with a token file: `Authorization: Bearer TOKEN123` last.
    let cli = "/start?nodes=3&deallocate_after_bench=false&provision_nodes=true&benchmark_name=nm&cloud=local&tags=t1%2Ct2&exclusive=ex&node_commit=master&email=a%40b.c&email=d%40e.f&message=zzz&rate=5";
    let r = raw(
        s.addr(),
        &official_start(cli, SMALL_BDL, "Authorization: Bearer TOKEN123\r\n"),
    );
    assert_eq!(r.body, br#"{"id":1,"status":"pending"}"#);
    let r = raw(s.addr(), &official_start("/start?nodes=2", SMALL_BDL, ""));
    assert_eq!(r.body, br#"{"id":2,"status":"pending"}"#);
}

#[test]
fn clusters_for_node_counts() {
    let s = server(slow_running());
    let id = start(
        s.addr(),
        "/start?nodes=2&deallocate_after_bench=false",
        SMALL_BDL,
    );
    let kept = start(s.addr(), "/start?nodes=1", SMALL_BDL);
    wait_status(s.addr(), id, |st| st == "running");
    let clusters = get(s.addr(), "/clusters_info").json();
    let list = clusters.as_array().unwrap();
    assert_eq!(list.len(), 2, "{clusters}");
    let mine = list.iter().find(|c| c["bench_id"] == id).unwrap();
    assert_eq!(mine["n"], 3);
    assert_eq!(
        mine["hosts"],
        serde_json::json!(["127.0.0.1", "127.0.0.1", "127.0.0.1"])
    );
    assert_eq!(mine["provider"], "mzb_dummycloud_plugin");
    assert_eq!(mine["state"], "allocated");
    assert!(mine["timestamp"].as_u64().unwrap() > 1_600_000_000);
    let ids: Vec<u64> = list.iter().map(|c| c["id"].as_u64().unwrap()).collect();
    assert!(ids.contains(&0) && ids.contains(&1));
    assert_eq!(get(s.addr(), "/stop?id=0").status, 200);
    assert_eq!(get(s.addr(), "/stop?id=1").status, 200);
    wait_finished(&s, id);
    wait_finished(&s, kept);
    // deallocate_after_bench=false keeps the first; the second was deallocated.
    let list = get(s.addr(), "/clusters_info").json();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    let cid = list[0]["id"].as_u64().unwrap();
    assert_eq!(list[0]["bench_id"], id);
    assert_eq!(
        get(s.addr(), &format!("/deallocate_cluster?id={cid}")).body,
        b"{}"
    );
    let r = get(s.addr(), &format!("/deallocate_cluster?id={cid}"));
    assert_eq!(
        (r.status, r.text()),
        (404, error_body("Cluster not found", "not_found"))
    );
    // The seed: an unknown cluster is `not_found` (the real server's `200 {}` is a quirk).
    let r = get(s.addr(), "/remove_cluster_info?id=77");
    assert_eq!(
        (r.status, r.text()),
        (404, error_body("Cluster 77 is not found", "not_found"))
    );
    assert_eq!(get(s.addr(), "/clusters_info").body, b"[]");
}

#[test]
fn stop_restart_change_env_run_command() {
    let s = server(slow_running());
    let id = start(s.addr(), "/start?message=a", SMALL_BDL);
    // Not running yet: change_env 500, run_command 400 not_running.
    let r = get(s.addr(), &format!("/change_env?x=1&id={id}"));
    assert_eq!(r.status, 500);
    assert_eq!(r.json()["reason_code"], "internal_error");
    let r = get(
        s.addr(),
        &format!("/run_command?command=print%28%22zz%22%29&percent=50&id={id}&pool=1"),
    );
    assert_eq!(
        (r.status, r.text()),
        (
            400,
            error_body("Benchmark is not running yet", "not_running")
        )
    );

    wait_status(s.addr(), id, |st| st == "running");
    let r = get(
        s.addr(),
        &format!("/change_env?rate=5&message=a+b%26c&id={id}"),
    );
    assert_eq!(r.body, br#"{"status":"set"}"#);
    let env = s.benchmark(id).unwrap().env;
    assert!(
        env.contains(&("message".to_owned(), "a b&c".to_owned())),
        "{env:?}"
    );
    assert!(env.contains(&("rate".to_owned(), "5".to_owned())));
    let r = get(
        s.addr(),
        &format!("/run_command?command=print%28%22zz%22%29&percent=50&id={id}&pool=1"),
    );
    assert_eq!(r.body, br#"{"status":"ok"}"#);
    assert_eq!(s.benchmark(id).unwrap().commands, ["print(\"zz\")"]);
    let r = get(
        s.addr(),
        &format!("/run_command?command=x&percent=fifty&id={id}&pool=1"),
    );
    assert_eq!(
        (r.status, r.text()),
        (
            400,
            error_body("Provided percent or pool is not an int", "badarg")
        )
    );
    assert_eq!(
        get(s.addr(), &format!("/run_command?percent=5&id={id}&pool=1")).status,
        500
    );
    let r = get(s.addr(), &format!("/email_report?id={id}&addr=a%40b.c"));
    assert_eq!(
        (r.status, r.text()),
        (400, error_body("Benchmark in not ended yet", "badarg"))
    );
    assert_eq!(get(s.addr(), &format!("/results?id={id}")).body, b"{}");

    let r = get(s.addr(), &format!("/stop?id={id}"));
    assert_eq!(r.body, br#"{"status":"stopped"}"#);
    let st = status(s.addr(), id);
    assert_eq!(st["status"], "stopped");
    assert!(st.get("finish_time").is_some());
    assert_eq!(
        get(s.addr(), &format!("/stop?id={id}")).body,
        br#"{"status":"stopped"}"#
    );
    let r = get(
        s.addr(),
        &format!("/run_command?command=x&percent=5&id={id}&pool=1"),
    );
    assert_eq!(
        (r.status, r.text()),
        (
            400,
            error_body(&format!("Benchmark {id} is finished"), "badarg")
        )
    );
    assert_eq!(
        get(s.addr(), &format!("/change_env?x=1&id={id}")).status,
        500
    );
    wait_finished(&s, id);
    let user = inflate(&get(s.addr(), &format!("/userlog?id={id}")).body);
    assert!(user.contains("Dummy print: \"zz\""), "{user}");
    let results = get(s.addr(), &format!("/results?id={id}")).json();
    assert_eq!(
        results["print"]["type"], "counter",
        "results are saved after a stop: {results}"
    );
    let r = get(
        s.addr(),
        &format!("/email_report?id={id}&addr=a%40b.c,d%40e.f&addr=g%40h.i"),
    );
    assert_eq!(r.body, b"{}");
    let reports = s.email_reports();
    // The seed: `addr` is a comma-separated list (the real server's no-split is a quirk).
    assert_eq!(
        reports.last().unwrap().addresses,
        ["a@b.c", "d@e.f", "g@h.i"]
    );

    let r = get(s.addr(), &format!("/restart?id={id}"));
    let new_id = id + 1;
    assert_eq!(
        r.text(),
        format!("{{\"id\":{new_id},\"status\":\"pending\"}}")
    );
    let info = s.benchmark(new_id).unwrap();
    assert_eq!(info.parent, Some(i64::try_from(id).unwrap()));
    assert_eq!(info.script, SMALL_BDL);
    assert!(info.env.contains(&("message".to_owned(), "a".to_owned())));
    assert!(info
        .env
        .contains(&("mzb_bench_id".to_owned(), new_id.to_string())));
    assert_eq!(get(s.addr(), "/restart?id=99").status, 404);
    assert_eq!(get(s.addr(), &format!("/stop?id={new_id}")).status, 200);
}

#[test]
fn tags() {
    let s = server(Speed::fast());
    let id = start(s.addr(), "/start?tags=t0", SMALL_BDL);
    assert_eq!(
        get(s.addr(), &format!("/add_tags?id={id}&tags=a%2Cb+c")).body,
        b"{}"
    );
    assert_eq!(s.benchmark(id).unwrap().tags, ["t0", "a", "b", "c"]);
    get(s.addr(), &format!("/add_tags?id={id}&tags=a,x,x"));
    assert_eq!(
        s.benchmark(id).unwrap().tags,
        ["t0", "a", "b", "c", "x", "x"]
    );
    get(s.addr(), &format!("/remove_tags?id={id}&tags=x,a,zz"));
    assert_eq!(s.benchmark(id).unwrap().tags, ["t0", "b", "c", "x"]);
    assert_eq!(get(s.addr(), &format!("/add_tags?id={id}")).status, 500);
    assert_eq!(
        get(s.addr(), &format!("/remove_tags?id={id}&tags=")).status,
        500
    );
    assert_eq!(get(s.addr(), "/add_tags?id=42&tags=a").status, 404);
    // Switch: OTP 17 behaviour for missing parameters.
    let lenient = BenchServer::start(BenchServerConfig {
        quirks: Quirks {
            missing_param_500: false,
            ..Quirks::default()
        },
        ..BenchServerConfig::fast()
    })
    .unwrap();
    let r = get(lenient.addr(), "/add_tags?id=0");
    assert_eq!(
        (r.status, r.text()),
        (400, error_body("Missing tags argument", "badarg"))
    );
}

#[test]
fn errors_and_routing() {
    let s = server(Speed::fast());
    let a = s.addr();
    let r = get(a, "/status?id=12");
    assert_eq!(
        (r.status, r.text()),
        (404, error_body("Benchmark 12 is not found", "not_found"))
    );
    for bad in [
        "/status?id=abc",
        "/status?id=",
        "/status?id",
        "/status?id=1&id=1",
        "/clusters_info?id=x",
    ] {
        let r = get(a, bad);
        assert_eq!(r.status, 500, "{bad}");
        assert_eq!(r.json()["reason_code"], "internal_error");
    }
    assert_eq!(get(a, "/status").status, 500, "missing id");
    let r = get(a, "/foo");
    assert_eq!(r.status, 404);
    assert_eq!(
        r.text(),
        r#"{"reason":"Wrong endpoint: <<\"GET\">> <<\"/foo\">>","reason_code":"not_found"}"#
    );
    for path in ["/start", "/logs?id=0", "/logs_user?id=0", "/report.json"] {
        let r = get(a, path);
        assert_eq!(r.status, 404, "{path}");
        assert!(r.text().contains("Wrong endpoint"), "{path}");
    }
    let r = raw(
        a,
        b"POST /status?id=0 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    );
    assert!(r
        .text()
        .contains(r#"Wrong endpoint: <<\"POST\">> <<\"/status\">>"#));
    let r = raw(
        a,
        b"GET /clusters_info HTTP/1.1\r\nHost: x\r\nAuthorization: Basic dTpw\r\n\r\n",
    );
    assert_eq!(r.status, 500);
    let r = raw(
        a,
        b"GET /clusters_info HTTP/1.1\r\nHost: x\r\nAuthorization: bearer x\r\n\r\n",
    );
    assert_eq!(r.status, 500);
    assert_eq!(get(a, "/clusters_info").body, b"[]");

    // /start validation.
    let r = raw(
        a,
        &official_start("/start?deallocate_after_bench=x", SMALL_BDL, ""),
    );
    assert_eq!(
        (r.status, r.text()),
        (
            400,
            error_body("Invalid value \"x\" for deallocate_after_bench", "badarg")
        )
    );
    let r = raw(
        a,
        &official_start("/start?metric_update_interval_ms=999", SMALL_BDL, ""),
    );
    assert_eq!(r.status, 400);
    let r = raw(
        a,
        b"POST /start?parent=x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(
        (r.status, r.text()),
        (400, error_body("Invalid value \"x\" for parent", "badarg")),
        "query first"
    );
    let r = raw(a, b"POST /start HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nabc");
    assert_eq!(
        (r.status, r.text()),
        (400, error_body("Missing script file", "badarg"))
    );
    let field = format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"bench\"\r\n\r\nx\r\n--{BOUNDARY}--\r\n");
    let req = format!(
        "POST /start HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {}\r\n\r\n{field}",
        field.len()
    );
    assert_eq!(raw(a, req.as_bytes()).status, 500, "non-file part");
    // An env var without a value crashes initialisation, but uses up an id.
    assert_eq!(
        raw(a, &official_start("/start?flag", SMALL_BDL, "")).status,
        500
    );
    let r = raw(a, &official_start("/start", SMALL_BDL, ""));
    assert_eq!(r.body, br#"{"id":1,"status":"pending"}"#);

    // /graphs and /typecheck.
    let r = get(a, "/graphs?id=5");
    assert_eq!(
        (r.status, r.header("location")),
        (302, Some("/#/bench/5/overview"))
    );
    let body = official_body(SMALL_BDL);
    let req = format!(
        "POST /typecheck HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut c = connect(a);
    c.get_mut().write_all(req.as_bytes()).unwrap();
    let r = read_response(&mut c);
    assert_eq!(r.body, br#"{"result":"ok"}"#);
    let mut rest = Vec::new();
    assert_eq!(
        c.read_to_end(&mut rest).unwrap(),
        0,
        "connection closed after /typecheck"
    );
    let body = official_body("#!benchDL\npool(size = 1:\n");
    let req = format!(
        "POST /typecheck HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let r = raw(a, req.as_bytes());
    assert_eq!(
        (r.status, r.json()["reason_code"].as_str()),
        (400, Some("error"))
    );
}

#[test]
fn token_auth() {
    let s = BenchServer::start(BenchServerConfig::fast().token_users(&["TOKEN123"])).unwrap();
    let forbidden = error_body("Operation is forbidden", "forbidden");
    let r = get(s.addr(), "/clusters_info");
    assert_eq!((r.status, r.text()), (403, forbidden.clone()));
    let r = raw(
        s.addr(),
        b"GET /clusters_info HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\n\r\n",
    );
    assert_eq!((r.status, r.text()), (403, forbidden));
    let r = raw(
        s.addr(),
        b"GET /clusters_info HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer TOKEN123\r\n\r\n",
    );
    assert_eq!((r.status, r.text()), (200, "[]".to_owned()));
    let r = raw(
        s.addr(),
        &official_start("/start", SMALL_BDL, "Authorization: Bearer TOKEN123\r\n"),
    );
    assert_eq!(r.body, br#"{"id":0,"status":"pending"}"#);
}

#[test]
fn failures_and_exclusive() {
    let s = server(slow_running());
    let a = s.addr();
    let crash = start(a, "/start?emulate_bench_crash=true", SMALL_BDL);
    let broken = start(a, "/start", "this is not a benchmark scenario\n");
    let zero = start(a, "/start?nodes=0", SMALL_BDL);
    let cloud = start(a, "/start?cloud=nowhere", SMALL_BDL);
    let one_host = start(a, "/start?nodes=h1", SMALL_BDL);
    let users = start(a, "/start?nodes=a%40h1,b%40h2", SMALL_BDL);
    let erlang = start(a, "/start", "[{pool, [{size, 1}, {worker_type, dummy_worker}], [{loop, [{time, {2, sec}}, {rate, {1, rps}}], [{print, \"FOO\"}]}]}].\n");
    for (id, stage) in [
        (crash, "init"),
        (broken, "checking_script"),
        (zero, "allocating_hosts"),
        (cloud, "allocating_hosts"),
        (one_host, "allocating_hosts"),
        (users, "allocating_hosts"),
    ] {
        let mut last = String::new();
        let st = loop {
            let st = status(a, id);
            let name = st["status"].as_str().unwrap().to_owned();
            if name == "failed" {
                break st;
            }
            last = name;
        };
        assert!(st.get("finish_time").is_some());
        assert!(
            last.is_empty() || last == stage || last == "init",
            "{id}: last {last}, expected {stage}"
        );
        wait_finished(&s, id);
        let log = inflate(&get(a, &format!("/log?id={id}")).body);
        assert!(
            log.contains(&format!("Stage 'pipeline - {stage}': failed")),
            "{id}: {log}"
        );
        // /data answers for failed benchmarks (switchable quirk), with no data.
        let r = get(a, &format!("/data?id={id}"));
        assert_eq!(r.status, 200);
    }
    wait_status(a, erlang, |st| st == "complete");

    // Exclusive labels serialise benchmarks through wait_exclusive. These run until
    // stopped (a long scenario, no cap), so that a loaded machine's slow polls still
    // see the first one running.
    let s = server(Speed {
        max_running: Duration::from_secs(600),
        ..slow_running()
    });
    let a = s.addr();
    let endless = SMALL_BDL.replace("time = 10 sec", "time = 100000 sec");
    // The second starts once the first holds the labels: started together, either
    // pipeline may reach `wait_exclusive` first on a loaded machine.
    let first = start(a, "/start?exclusive=x,y", &endless);
    wait_status(a, first, |st| st == "running");
    let second = start(a, "/start?exclusive=y", &endless);
    wait_status(a, second, |st| st == "wait_exclusive");
    // The waiting benchmark looks at the labels again (at its poll) and still waits.
    let checks = s.benchmark(second).unwrap().exclusive_checks;
    wait_until("wait_exclusive to look again", || {
        s.benchmark(second).unwrap().exclusive_checks >= checks + 2
    });
    assert_eq!(status(a, first)["status"], "running");
    assert_eq!(status(a, second)["status"], "wait_exclusive");
    assert!(status(a, second).get("start_time").is_none());
    get(a, &format!("/stop?id={first}"));
    wait_status(a, second, |st| st != "wait_exclusive");
    get(a, &format!("/stop?id={second}"));
}

#[test]
fn log_streams_live_and_finished() {
    // Many prints (200 rps × 2 workers) so that the log passes 100 writes and 1 KiB.
    let speed = Speed {
        scenario_second: Duration::from_millis(250),
        ..Speed::fast()
    };
    let s = server(speed);
    let script = SMALL_BDL
        .replace("time = 10 sec", "time = 2 sec")
        .replace("rate = 1 rps", "rate = 200 rps");
    let id = start(s.addr(), "/start", &script);
    let mut c = connect(s.addr());
    c.get_mut()
        .write_all(&official_get(&format!("/userlog?id={id}")))
        .unwrap();
    let (status, headers) = read_head(&mut c);
    assert_eq!(status, 200);
    let h = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(h("transfer-encoding"), Some("chunked"));
    assert_eq!(h("content-encoding"), Some("deflate"));
    assert_eq!(h("content-type"), Some("text/plain"));
    let mut body = Vec::new();
    let mut sizes = Vec::new();
    let mut live_decoded = false;
    while let Some(chunk) = read_chunk(&mut c) {
        assert!(chunk.len() <= 1024);
        sizes.push(chunk.len());
        body.extend(chunk);
        if !live_decoded && s.benchmark(id).unwrap().process_alive {
            // Decode what has arrived so far (no trailer yet) incrementally.
            let mut d = flate2::Decompress::new(true);
            let mut out = vec![0; 1 << 20];
            d.decompress(&body, &mut out, flate2::FlushDecompress::Sync)
                .unwrap();
            let text = String::from_utf8_lossy(&out[..usize::try_from(d.total_out()).unwrap()])
                .into_owned();
            live_decoded = text.contains("Dummy print: \"hello\\nworld\\n\"");
        }
    }
    assert!(
        live_decoded,
        "decoded lines arrived while the benchmark ran"
    );
    assert!(sizes.len() > 2, "{sizes:?}");
    assert_eq!(&body[..2], &[0x78, 0x9c]);
    let text = inflate(&body);
    assert!(text.lines().count() > 100);
    assert!(status_is_final(&s, id));

    let r = get(s.addr(), &format!("/log?id={id}"));
    assert_eq!(
        r.header("content-length"),
        Some(r.body.len().to_string().as_str())
    );
    assert_eq!(r.header("content-encoding"), Some("deflate"));
    let text = inflate(&r.body);
    assert!(text.contains("[info] [ API ] "), "{text}");
    assert!(text.contains("Stage 'pipeline - running': started"));
    assert!(text.contains("Stage 'finalize - release_exclusive': started"));
    let first = text.lines().next().unwrap();
    assert_eq!(&first[2..3], ":", "{first}");
    assert_eq!(&first[8..9], ".", "{first}");
    // Truncated streams decode up to the last sync flush.
    let mut d = flate2::Decompress::new(true);
    let mut out = vec![0; 1 << 20];
    let _ = d.decompress(
        &r.body[..r.body.len() / 2],
        &mut out,
        flate2::FlushDecompress::Sync,
    );
    assert!(d.total_out() > 0);
    let r = get(s.addr(), "/log?id=99");
    assert_eq!(
        (r.status, r.text()),
        (404, error_body("Benchmark 99 is not found", "not_found"))
    );

    let plain = BenchServer::start(BenchServerConfig {
        log_compression: LogCompression::Identity,
        ..BenchServerConfig::fast()
    })
    .unwrap();
    let id = start(plain.addr(), "/start", SMALL_BDL);
    let r = get(plain.addr(), &format!("/log?id={id}"));
    assert_eq!(r.header("content-encoding"), Some("identity"));
    assert!(r.text().contains("Starting benchmark #0"), "{}", r.text());
}

fn status_is_final(s: &BenchServer, id: u64) -> bool {
    let info = s.benchmark(id).unwrap();
    !info.process_alive && info.status == "complete"
}

#[test]
fn data_stream_live() {
    let s = server(slow_running());
    let id = start(s.addr(), "/start", SMALL_BDL);
    let mut c = connect(s.addr());
    c.get_mut()
        .write_all(&official_get(&format!("/data?id={id}")))
        .unwrap();
    let (status, headers) = read_head(&mut c);
    assert_eq!(status, 200);
    assert!(headers.contains(&("transfer-encoding".to_owned(), "chunked".to_owned())));
    assert!(headers.contains(&("content-encoding".to_owned(), "identity".to_owned())));
    let mut lines = Vec::new();
    let mut live = 0;
    while let Some(chunk) = read_chunk(&mut c) {
        let line = String::from_utf8(chunk).unwrap();
        assert!(
            line.ends_with('\n') && line.matches('\n').count() == 1,
            "one line per chunk: {line:?}"
        );
        if s.benchmark(id).unwrap().status == "running" {
            live += 1;
        }
        lines.push(line);
    }
    assert!(live > 0, "lines arrive while running");
    let fields: Vec<Vec<&str>> = lines
        .iter()
        .map(|l| l.trim_end().split('\t').collect())
        .collect();
    assert!(fields
        .iter()
        .all(|f| f.len() == 3 && f[0].parse::<u64>().is_ok() && f[2].parse::<f64>().is_ok()));
    let names: std::collections::BTreeSet<&str> = fields.iter().map(|f| f[1]).collect();
    for n in [
        "workers.pool1.started",
        "workers.pool1.started.rps",
        "print",
        "print.rps",
        "dummy.95",
        "metric_merging_time",
        "errors.user",
        "logs.written",
    ] {
        assert!(names.contains(n), "{n} in {names:?}");
    }
    let rps: Vec<&str> = fields
        .iter()
        .filter(|f| f[1] == "print.rps")
        .map(|f| f[2])
        .collect();
    assert!(
        rps.iter().all(|v| v.contains('.')),
        "floats in Erlang style: {rps:?}"
    );
    let started: Vec<&str> = fields
        .iter()
        .filter(|f| f[1] == "workers.pool1.started")
        .map(|f| f[2])
        .collect();
    assert!(started.iter().all(|v| *v == "2"), "{started:?}");
    assert_eq!(get(s.addr(), "/data?id=99").status, 404);
}

#[test]
fn server_logs_stream() {
    let s = BenchServer::start(without_deadlines(BenchServerConfig::fast())).unwrap();
    let mut c = connect(s.addr());
    c.get_mut()
        .write_all(&official_get("/server_logs?severity=info"))
        .unwrap();
    let (status, headers) = read_head(&mut c);
    assert_eq!(status, 200);
    assert!(headers.iter().all(|(k, _)| k != "content-encoding"));
    let id = start(s.addr(), "/start", SMALL_BDL);
    let mut got = Vec::new();
    while !got
        .iter()
        .any(|l: &String| l.contains(&format!("Benchmark #{id} finished")))
    {
        let line = String::from_utf8(read_chunk(&mut c).unwrap()).unwrap();
        assert!(
            line.ends_with("\r\n") && line.contains(" [info] <0.214.0> "),
            "{line:?}"
        );
        got.push(line);
    }
    assert!(got.iter().any(|l| l.contains("Starting benchmark #0")));
    assert!(got.iter().all(|l| !l.contains("[debug]")));
    let r = get(s.addr(), "/server_logs?severity=x");
    assert_eq!(
        (r.status, r.text()),
        (400, error_body("Invalid severity: <<\"x\">>", "badarg"))
    );
    // Shutting down ends the never-ending stream and releases the port.
    let addr = s.addr();
    returns("shutdown with a never-ending stream", move || s.shutdown());
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
    assert!(std::net::TcpListener::bind(addr).is_ok(), "port released");

    let removed = BenchServer::start(BenchServerConfig {
        quirks: Quirks {
            server_logs_removed: true,
            ..Quirks::default()
        },
        ..BenchServerConfig::fast()
    })
    .unwrap();
    assert_eq!(get(removed.addr(), "/server_logs").status, 404);
}

#[test]
fn keep_alive_pipelining_and_garbage() {
    let s = server(Speed::fast());
    let mut c = connect(s.addr());
    let mut two = official_get("/clusters_info");
    two.extend(official_get("/status?id=3"));
    c.get_mut().write_all(&two).unwrap();
    assert_eq!(read_response(&mut c).body, b"[]");
    assert_eq!(read_response(&mut c).status, 404);
    // Chunked request bodies are accepted.
    let body = official_body(SMALL_BDL);
    let req = format!(
        "POST /start HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: multipart/form-data; boundary={BOUNDARY}\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    );
    c.get_mut().write_all(req.as_bytes()).unwrap();
    assert_eq!(
        read_response(&mut c).body,
        br#"{"id":0,"status":"pending"}"#
    );

    // Garbage must not bring the server down.
    let mut seed = 0x1234_5678_u64;
    for round in 0..40 {
        let mut junk = Vec::new();
        for _ in 0..(round * 37 % 700 + 1) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            junk.push(u8::try_from(seed % 256).unwrap());
        }
        if round % 3 == 0 {
            let mut prefixed = b"GET /status?id=".to_vec();
            prefixed.extend(junk);
            junk = prefixed;
        }
        if round % 5 == 0 {
            junk = format!("POST /start?{round} HTTP/1.1\r\nContent-Length: 5\r\nContent-Type: multipart/form-data; boundary=\r\n\r\n--\r\n\r").into_bytes();
        }
        let mut g = TcpStream::connect(s.addr()).unwrap();
        g.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let _ = g.write_all(&junk);
        let _ = g.write_all(b"\r\n\r\n");
        let mut sink = Vec::new();
        let _ = g.read_to_end(&mut sink);
    }
    assert_eq!(get(s.addr(), "/clusters_info").body, b"[]");
    let r = raw(s.addr(), b"GET /status?id=0 HTTP/1.0\r\n\r\n");
    assert_eq!(r.header("connection"), Some("close"));
}

#[test]
fn crash_zombie_and_housekeeping() {
    let s = BenchServer::start(BenchServerConfig {
        max_bench_num: 2,
        speed: slow_running(),
        ..BenchServerConfig::default()
    })
    .unwrap();
    let a = s.addr();
    let crashed = start(a, "/start", SMALL_BDL);
    let zombie = start(a, "/start?tags=favorites", SMALL_BDL);
    wait_status(a, zombie, |st| st == "running");
    assert!(s.crash_benchmark(crashed));
    assert!(s.zombify_benchmark(zombie));
    assert!(!s.crash_benchmark(zombie), "already final");
    assert_eq!(
        get(a, &format!("/status?id={crashed}")).body,
        br#"{"reason":"crashed","status":"failed"}"#
    );
    let z = status(a, zombie);
    assert_eq!(z["status"], "zombie");
    assert_eq!(z["start_time"], z["create_time"]);
    assert_eq!(z["finish_time"], z["create_time"]);
    wait_finished(&s, crashed);
    wait_finished(&s, zombie);
    // Streams of dead benchmarks end: /data answers for a zombie.
    assert_eq!(get(a, &format!("/data?id={zombie}")).status, 200);
    // Housekeeping: finished benchmarks below next_id - max_bench_num go, favorites stay.
    let two = start(a, "/start", SMALL_BDL);
    start(a, "/start", SMALL_BDL);
    assert_eq!(get(a, &format!("/status?id={crashed}")).status, 404);
    assert_eq!(get(a, &format!("/status?id={zombie}")).status, 200);
    assert_eq!(get(a, &format!("/status?id={two}")).status, 200);
}

#[test]
fn data_hangs_on_failed_when_faithful() {
    let s = BenchServer::start(without_deadlines(BenchServerConfig {
        quirks: Quirks {
            data_hangs_on_failed: true,
            ..Quirks::default()
        },
        ..BenchServerConfig::fast()
    }))
    .unwrap();
    let id = start(s.addr(), "/start?emulate_bench_crash=true", SMALL_BDL);
    wait_status(s.addr(), id, |st| st == "failed");
    let mut c = connect(s.addr());
    c.get_mut()
        .write_all(&official_get(&format!("/data?id={id}")))
        .unwrap();
    // The request looked at the failed status, waited, looked again and still waits:
    // nothing was sent (not even the headers).
    wait_until("the /data request to wait", || {
        s.benchmark(id).unwrap().data_waits >= 2
    });
    c.get_mut().set_nonblocking(true).unwrap();
    let mut buf = [0u8; 16];
    let err = c.get_mut().peek(&mut buf).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock, "{err}");
    c.get_mut().set_nonblocking(false).unwrap();
    // Shutdown is not held up by the hanging request.
    returns("shutdown with a hanging /data request", move || {
        s.shutdown()
    });
}

/// Under the real server's quirks (`benchlink sandbox --faithful`): a comma in `addr` is
/// part of one address, and removing an unknown cluster's info is `200 {}`.
#[test]
fn email_report_and_remove_cluster_info_when_faithful() {
    let s = BenchServer::start(BenchServerConfig {
        quirks: Quirks {
            email_addr_not_split: true,
            remove_unknown_cluster_ok: true,
            ..Quirks::default()
        },
        ..BenchServerConfig::fast()
    })
    .unwrap();
    assert_eq!(get(s.addr(), "/remove_cluster_info?id=77").body, b"{}");
    let id = start(s.addr(), "/start?deallocate_after_bench=false", SMALL_BDL);
    wait_finished(&s, id);
    // A known cluster's record goes, as with the default quirks.
    let clusters = get(s.addr(), "/clusters_info").json();
    let cid = clusters[0]["id"].as_u64().unwrap();
    assert_eq!(
        get(s.addr(), &format!("/remove_cluster_info?id={cid}")).body,
        b"{}"
    );
    assert_eq!(get(s.addr(), "/clusters_info").body, b"[]");
    let r = get(
        s.addr(),
        &format!("/email_report?id={id}&addr=a%40b.c,d%40e.f&addr=g%40h.i"),
    );
    assert_eq!(r.body, b"{}");
    assert_eq!(
        s.email_reports().last().unwrap().addresses,
        ["a@b.c,d@e.f", "g@h.i"]
    );
}

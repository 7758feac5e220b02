//! Throughput of the core's decoders, each next to the well-kept std alternative in the
//! same run: `cargo bench -p benchlink-core --bench decoders` (or `.ci/bench-decoders`,
//! which prints the comparison table). Every group measures bytes of input per second.
//!
//! With `DECODERS_COUNT=1` in the environment the binary skips criterion and runs each
//! case once inside `count` (warmed up once before): under
//! `valgrind --tool=callgrind --collect-atstart=no --toggle-collect=*count* --dump-after=*count*`
//! every case becomes one dump whose total is its instruction count, a figure that other
//! processes on the machine can not disturb. The cases are listed on stdout in order. As
//! with criterion, an argument keeps only the cases whose `group/name` contains it.

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::io::Write;
use std::time::Duration;

use benchlink_core::bench::{request, JsonRequest, MetricDecoder};
use benchlink_core::http::{Event, InflateBuffers, Limits, ResponseDecoder};
use benchlink_core::rtm::pdu::{self, Incoming};
use benchlink_core::rtm::{
    Buffers, Config, Event as RtmEvent, Events, Handler, Link, LinkConfig, Mode, NoopHandler,
    Output, Pending, SubState, SubscribeArgs, SubscriptionSlot,
};
use benchlink_core::time::Instant;
use benchlink_core::ws::Key;
use criterion::{Criterion, Throughput};

/// Socket reads are this large (the std client's read buffer).
const READ: usize = 64 * 1024;

/// `/data` lines as the server writes them: 16 metrics interleaved, integers and
/// Erlang floats.
fn metric_lines(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 40);
    for i in 0..n {
        let ts = 1_700_000_000 + i / 16;
        let _ = match i % 4 {
            0 => writeln!(out, "{ts}\tworkers.pool{}.started\t{}", i % 16, i),
            1 => writeln!(out, "{ts}\tprint.rps\t2.9975917348002614"),
            2 => writeln!(out, "{ts}\tlatency.{}.999\t1.0e-5", i % 16),
            _ => writeln!(out, "{ts}\terrors.system\t{}", i % 1000),
        };
    }
    out
}

/// The same lines as a chunked HTTP response, one chunk per line (the server's framing).
fn chunked_response(lines: &[u8]) -> Vec<u8> {
    let mut out =
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-type: text/plain\r\n\r\n"
            .to_vec();
    for line in lines.split_inclusive(|&b| b == b'\n') {
        let _ = write!(out, "{:x}\r\n", line.len());
        out.extend_from_slice(line);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// A log like `/log`'s, zlib-compressed with a sync flush every 1 KiB (as the server
/// writes it).
fn zlib_log(lines: usize) -> (Vec<u8>, usize) {
    let mut text = Vec::new();
    for i in 0..lines {
        let _ = writeln!(
            text,
            "14:02:{:02}.{:03} [info] <0.{}.0> Worker {} finished iteration {} in {} ms",
            i % 60,
            i % 1000,
            200 + i % 50,
            i % 32,
            i,
            i % 97
        );
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    for piece in text.chunks(1024) {
        let _ = z.write_all(piece);
        let _ = z.flush();
    }
    (z.finish().unwrap_or_default(), text.len())
}

/// A `/results` reply with `n` metrics.
fn results_reply(n: usize) -> Vec<u8> {
    let mut out = b"{".to_vec();
    for i in 0..n {
        if i > 0 {
            out.push(b',');
        }
        if i % 2 == 0 {
            let _ = write!(
                out,
                r#""counter{i}":{{"rps":{{"max":12.5,"mean":9.91,"median":10.0,"min":0.0}},"type":"counter","value":{}}}"#,
                i * 31
            );
        } else {
            let _ = write!(
                out,
                r#""latency{i}":{{"percentiles":{{"50":1.0e-5,"90":2.5,"95":3.0,"max":15.25,"min":0.001}},"type":"histogram"}}"#
            );
        }
    }
    out.push(b'}');
    out
}

/// An RTM `rtm/subscription/data` PDU with `n` messages.
fn subscription_data(n: usize) -> String {
    let messages: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"ts":{},"metric":"workers.pool1.started","value":{}.5,"tags":["a","b"]}}"#,
                1_700_000_000 + i,
                i
            )
        })
        .collect();
    format!(
        r#"{{"action":"rtm/subscription/data","body":{{"position":"1479315802:0","subscription_id":"benchmarks.7.metrics","messages":[{}]}}}}"#,
        messages.join(",")
    )
}

/// One measured function: its group, its name, the bytes one run processes, and the run
/// (returning something derived from the output, so that nothing is optimized away).
struct Case {
    group: &'static str,
    name: &'static str,
    bytes: usize,
    run: Box<dyn FnMut() -> usize>,
}

fn case(
    group: &'static str,
    name: &'static str,
    bytes: usize,
    run: impl FnMut() -> usize + 'static,
) -> Case {
    Case {
        group,
        name,
        bytes,
        run: Box::new(run),
    }
}

/// Decodes a whole HTTP response fed in socket-sized reads; returns the body's length.
fn decode_response(decoder: &mut ResponseDecoder<'_>, response: &[u8]) -> usize {
    let mut body = 0usize;
    for read in response.chunks(READ) {
        let mut input = read;
        loop {
            let Ok((used, event)) = decoder.decode(input) else {
                return body;
            };
            input = input.get(used..).unwrap_or_default();
            match event {
                Event::Data(d) => body += d.len(),
                Event::NeedMore | Event::End { .. } => break,
                Event::Head(_) => {}
            }
        }
    }
    body
}

fn metric_cases(cases: &mut Vec<Case>) {
    let lines = metric_lines(100_000);
    let n = lines.len();
    let (l1, l2, l3) = (lines.clone(), lines.clone(), lines);
    let mut buf1 = vec![0u8; 64 * 1024];
    cases.push(case("metric_lines", "benchlink", n, move || {
        let mut metrics = MetricDecoder::new(&mut buf1);
        let (mut n, mut sum) = (0usize, 0u64);
        for read in black_box(&l1).chunks(READ) {
            let mut input = read;
            while let Some(sample) = metrics.next(&mut input) {
                if let Ok(s) = sample {
                    n += s.name.len() + s.value.as_str().len();
                    sum = sum.wrapping_add(s.timestamp);
                }
            }
        }
        n ^ sum as usize
    }));
    let mut buf2 = vec![0u8; 64 * 1024];
    cases.push(case("metric_lines", "benchlink_as_f64", n, move || {
        let mut metrics = MetricDecoder::new(&mut buf2);
        let (mut n, mut sum) = (0usize, 0.0f64);
        for read in black_box(&l2).chunks(READ) {
            let mut input = read;
            while let Some(sample) = metrics.next(&mut input) {
                if let Ok(s) = sample {
                    n += s.name.len() + s.timestamp as usize;
                    sum += s.value.as_f64();
                }
            }
        }
        n ^ sum as usize
    }));
    cases.push(case(
        "metric_lines",
        "std_lines_split_parse",
        n,
        move || {
            let text = std::str::from_utf8(black_box(&l3)).unwrap_or_default();
            let (mut n, mut sum) = (0usize, 0.0f64);
            for line in text.lines() {
                let mut fields = line.split('\t');
                let (Some(ts), Some(name), Some(value)) =
                    (fields.next(), fields.next(), fields.next())
                else {
                    continue;
                };
                let (Ok(ts), Ok(value)) = (ts.parse::<u64>(), value.parse::<f64>()) else {
                    continue;
                };
                n += name.len() + ts as usize;
                sum += value;
            }
            n ^ sum as usize
        },
    ));
}

fn chunked_cases(cases: &mut Vec<Case>) {
    let response = chunked_response(&metric_lines(100_000));
    let n = response.len();
    let body_start = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(0, |p| p + 4);
    let body = response[body_start..].to_vec();
    let mut head = vec![0u8; 16 * 1024];
    cases.push(case("chunked", "benchlink", n, move || {
        let mut decoder: ResponseDecoder<'_> =
            ResponseDecoder::new(&mut head, None, Limits::DEFAULT);
        decode_response(&mut decoder, black_box(&response))
    }));
    // httparse's chunk-size parser over the same bytes (the whole body in memory: the
    // alternative gets the easier job).
    cases.push(case("chunked", "httparse_chunk_size", n, move || {
        let mut rest = black_box(&body[..]);
        let mut total = 0usize;
        while let Ok(httparse::Status::Complete((used, size))) = httparse::parse_chunk_size(rest) {
            if size == 0 {
                break;
            }
            let size = size as usize;
            total += rest[used..used + size].len();
            rest = &rest[used + size + 2..];
        }
        total
    }));
}

fn inflate_cases(cases: &mut Vec<Case>) {
    let (zlib, plain_len) = zlib_log(60_000);
    let mut response = format!(
        "HTTP/1.1 200 OK\r\ncontent-encoding: deflate\r\ncontent-length: {}\r\n\r\n",
        zlib.len()
    )
    .into_bytes();
    response.extend_from_slice(&zlib);
    let mut head = vec![0u8; 16 * 1024];
    let mut window: Box<InflateBuffers<{ 32 * 1024 }>> = Box::new(InflateBuffers::new());
    cases.push(case("inflate", "benchlink", plain_len, move || {
        let mut decoder: ResponseDecoder<'_> =
            ResponseDecoder::new(&mut head, Some(window.memory()), Limits::DEFAULT);
        decode_response(&mut decoder, black_box(&response))
    }));
    let mut buf = vec![0u8; 32 * 1024];
    cases.push(case("inflate", "flate2_streaming", plain_len, move || {
        let mut z = flate2::Decompress::new(true);
        let mut out = 0usize;
        for read in black_box(&zlib).chunks(READ) {
            let mut input = read;
            loop {
                let before = (z.total_in(), z.total_out());
                if z.decompress(input, &mut buf, flate2::FlushDecompress::None)
                    .is_err()
                {
                    return out;
                }
                let used = (z.total_in() - before.0) as usize;
                let made = (z.total_out() - before.1) as usize;
                out += made;
                input = &input[used..];
                if (input.is_empty() && made < buf.len()) || (used == 0 && made == 0) {
                    break;
                }
            }
        }
        out
    }));
}

fn json_cases(cases: &mut Vec<Case>) {
    let body = results_reply(200);
    let n = body.len();
    let b2 = body.clone();
    cases.push(case("json_results", "benchlink", n, move || {
        let Ok(results) = request::Results::read_reply(200, black_box(&body)) else {
            return 0;
        };
        let mut n = 0usize;
        for (name, metric) in results.iter() {
            n += name.as_raw().len() + metric.stats().count();
        }
        n
    }));
    cases.push(case("json_results", "serde_json_value", n, move || {
        let Ok(serde_json::Value::Object(results)) =
            serde_json::from_slice::<serde_json::Value>(black_box(&b2))
        else {
            return 0;
        };
        let mut n = 0usize;
        for (name, metric) in &results {
            let stats = metric
                .get("rps")
                .or_else(|| metric.get("percentiles"))
                .and_then(|s| s.as_object())
                .map_or(0, |s| s.len());
            n += name.len() + stats;
        }
        n
    }));
}

fn pdu_cases(cases: &mut Vec<Case>) {
    let pdu = subscription_data(20);
    let n = pdu.len();
    let p2 = pdu.clone();
    cases.push(case(
        "rtm_pdu",
        "benchlink",
        n,
        move || match Incoming::parse(black_box(&pdu)) {
            Ok(Incoming::Data(data)) => data
                .messages
                .elements()
                .map(|m| m.raw().as_bytes().len())
                .sum(),
            _ => 0usize,
        },
    ));
    cases.push(case("rtm_pdu", "serde_json_value", n, move || {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(black_box(&p2)) else {
            return 0;
        };
        v.get("body")
            .and_then(|b| b.get("messages"))
            .and_then(|m| m.as_array())
            .map_or(0, |m| m.len())
    }));
}

type BenchLink = Link<Vec<u8>, [SubscriptionSlot; 1], [Pending; 4]>;

/// A link with an open connection (its `101` answered) and subscription `ch` subscribed.
fn open_link() -> BenchLink {
    let buffers = Buffers {
        rx: vec![0; 64 * 1024],
        tx: vec![0; 16 * 1024],
        queue: vec![0; 4096],
        outbox: vec![0; 4096],
        subscription_args: vec![],
    };
    let mut link: BenchLink = Link::new(
        Config::default(),
        LinkConfig::DEFAULT,
        "ws://127.0.0.1:8080",
        "K",
        buffers,
        [SubscriptionSlot::EMPTY; 1],
        [Pending::EMPTY; 4],
    )
    .expect("link");
    let t = Instant::ZERO;
    let h = &mut NoopHandler;
    link.client_mut().start(t, h);
    let _ = link.poll_output(t);
    link.handle_connected(t, h);
    let Some(Output::Transmit(request)) = link.poll_output(t) else {
        panic!("no upgrade request")
    };
    let request = String::from_utf8_lossy(request).into_owned();
    link.transmitted(t, request.len());
    let key = request
        .lines()
        .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
        .and_then(|k| Key::parse(k.as_bytes()))
        .expect("key");
    let answer = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        key.accept().as_str()
    );
    link.handle_input(t, answer.as_bytes(), h);
    let args = SubscribeArgs::default();
    let _ = link.client_mut().subscribe(t, "ch", Mode::Simple, args, h);
    while let Some(Output::Transmit(bytes)) = link.poll_output(t) {
        let n = bytes.len();
        link.transmitted(t, n);
    }
    let ok =
        r#"{"action":"rtm/subscribe/ok","id":0,"body":{"position":"1:0","subscription_id":"ch"}}"#;
    link.handle_input(t, &server_text(ok), h);
    assert_eq!(
        link.client().subscription_state("ch"),
        Some(SubState::Subscribed)
    );
    link
}

/// A server's text frame.
fn server_text(text: &str) -> Vec<u8> {
    let mut out = vec![0x81];
    match text.len() {
        n if n < 126 => out.push(n as u8),
        n => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
    }
    out.extend_from_slice(text.as_bytes());
    out
}

/// Counts the bytes of the messages a subscription receives.
struct Count(usize);

impl Handler for Count {
    fn subscription_data(&mut self, _key: &str, data: pdu::SubscriptionData<'_>) {
        self.0 += data
            .messages
            .elements()
            .map(|m| m.raw().as_bytes().len())
            .sum::<usize>();
    }
}

/// 1,000 subscription data PDUs of one ~70-byte message each, through the whole link:
/// events pushed to a handler during `handle_input`, and the same events kept in
/// `Events` and pulled after it (which finds the messages again in the received frame).
fn link_cases(cases: &mut Vec<Case>) {
    let mut wire = Vec::new();
    for i in 0..1000 {
        let pdu = format!(
            r#"{{"action":"rtm/subscription/data","body":{{"subscription_id":"ch","position":"1:{i}","messages":[{{"n":{i},"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}]}}}}"#
        );
        wire.extend(server_text(&pdu));
    }
    let n = wire.len();
    let (mut push, w1) = (open_link(), wire.clone());
    cases.push(case("rtm_link_events", "push", n, move || {
        let mut count = Count(0);
        push.handle_input(Instant::ZERO, black_box(&w1), &mut count);
        count.0
    }));
    let mut pull = open_link();
    let mut events = Events::new(vec![0; Events::<Vec<u8>>::capacity_for(1, 4, 64)]);
    cases.push(case("rtm_link_events", "pull", n, move || {
        let mut count = Count(0);
        let mut rest = black_box(&wire[..]);
        while !rest.is_empty() {
            let used = pull.handle_input(Instant::ZERO, rest, &mut events);
            while let Some(event) = events.poll_event(&pull) {
                if let RtmEvent::SubscriptionData { key, data } = event {
                    count.subscription_data(key, data);
                }
            }
            rest = &rest[used..];
        }
        count.0
    }));
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    link_cases(&mut cases);
    metric_cases(&mut cases);
    chunked_cases(&mut cases);
    inflate_cases(&mut cases);
    json_cases(&mut cases);
    pdu_cases(&mut cases);
    cases
}

/// One run of `case`, alone in a function that callgrind can toggle on and dump after.
#[inline(never)]
fn count(case: &mut Case) -> usize {
    (case.run)()
}

fn main() {
    let mut cases = cases();
    if std::env::var_os("DECODERS_COUNT").is_some() {
        let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
        for case in &mut cases {
            let id = format!("{}/{}", case.group, case.name);
            if filter.as_ref().is_some_and(|f| !id.contains(f.as_str())) {
                continue;
            }
            black_box((case.run)()); // warm caches and lazy state outside the count
            black_box(count(case));
            println!("{id} {}", case.bytes);
        }
        return;
    }
    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    let mut at = 0;
    while let Some(first) = cases.get(at) {
        let group_name = first.group;
        let mut group = c.benchmark_group(group_name);
        group.throughput(Throughput::Bytes(first.bytes as u64));
        while let Some(case) = cases.get_mut(at).filter(|c| c.group == group_name) {
            let run = &mut case.run;
            group.bench_function(case.name, |b| b.iter(&mut *run));
            at += 1;
        }
        group.finish();
    }
    c.final_summary();
}

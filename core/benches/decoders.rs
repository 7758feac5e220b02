//! Throughput of the core's decoders, each next to the well-kept std alternative in the
//! same run: `cargo bench -p benchlink-core --bench decoders` (or `.ci/bench-decoders`,
//! which prints the comparison table). Every group measures bytes of input per second.

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::io::Write;
use std::time::Duration;

use benchlink_core::bench::{request, JsonRequest, MetricDecoder};
use benchlink_core::http::{Event, InflateBuffers, Limits, ResponseDecoder};
use benchlink_core::rtm::pdu::Incoming;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

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

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

fn metric_line_decoding(c: &mut Criterion) {
    let lines = metric_lines(100_000);
    let mut g = c.benchmark_group("metric_lines");
    g.throughput(Throughput::Bytes(lines.len() as u64));
    let mut line_buf = vec![0u8; 64 * 1024];
    g.bench_function("benchlink", |b| {
        b.iter(|| {
            let mut metrics = MetricDecoder::new(&mut line_buf);
            let (mut n, mut sum) = (0usize, 0u64);
            for read in black_box(&lines).chunks(READ) {
                let mut input = read;
                while let Some(sample) = metrics.next(&mut input) {
                    if let Ok(s) = sample {
                        n += s.name.len() + s.value.as_str().len();
                        sum = sum.wrapping_add(s.timestamp);
                    }
                }
            }
            (n, sum)
        })
    });
    g.bench_function("benchlink_as_f64", |b| {
        b.iter(|| {
            let mut metrics = MetricDecoder::new(&mut line_buf);
            let (mut n, mut sum) = (0usize, 0.0f64);
            for read in black_box(&lines).chunks(READ) {
                let mut input = read;
                while let Some(sample) = metrics.next(&mut input) {
                    if let Ok(s) = sample {
                        n += s.name.len() + s.timestamp as usize;
                        sum += s.value.as_f64();
                    }
                }
            }
            (n, sum)
        })
    });
    g.bench_function("std_lines_split_parse", |b| {
        b.iter(|| {
            let text = std::str::from_utf8(black_box(&lines)).unwrap_or_default();
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
            (n, sum)
        })
    });
    g.finish();
}

fn chunked_decoding(c: &mut Criterion) {
    let response = chunked_response(&metric_lines(100_000));
    let mut g = c.benchmark_group("chunked");
    g.throughput(Throughput::Bytes(response.len() as u64));
    let mut head = vec![0u8; 16 * 1024];
    g.bench_function("benchlink", |b| {
        b.iter(|| {
            let mut decoder: ResponseDecoder<'_> =
                ResponseDecoder::new(&mut head, None, Limits::DEFAULT);
            let mut body = 0usize;
            for read in black_box(&response).chunks(READ) {
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
        })
    });
    // httparse's chunk-size parser over the same bytes (whole body in memory: the
    // alternative gets the easier job).
    let body_start = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(0, |p| p + 4);
    g.bench_function("httparse_chunk_size", |b| {
        b.iter(|| {
            let mut rest = black_box(&response[body_start..]);
            let mut body = 0usize;
            while let Ok(httparse::Status::Complete((used, size))) =
                httparse::parse_chunk_size(rest)
            {
                if size == 0 {
                    break;
                }
                let size = size as usize;
                body += rest[used..used + size].len();
                rest = &rest[used + size + 2..];
            }
            body
        })
    });
    g.finish();
}

fn inflate(c: &mut Criterion) {
    let (zlib, plain_len) = zlib_log(60_000);
    let mut response = format!(
        "HTTP/1.1 200 OK\r\ncontent-encoding: deflate\r\ncontent-length: {}\r\n\r\n",
        zlib.len()
    )
    .into_bytes();
    response.extend_from_slice(&zlib);
    let mut g = c.benchmark_group("inflate");
    g.throughput(Throughput::Bytes(plain_len as u64));
    let mut head = vec![0u8; 16 * 1024];
    let mut window: Box<InflateBuffers<{ 32 * 1024 }>> = Box::new(InflateBuffers::new());
    g.bench_function("benchlink", |b| {
        b.iter(|| {
            let mut decoder: ResponseDecoder<'_> =
                ResponseDecoder::new(&mut head, Some(window.memory()), Limits::DEFAULT);
            let mut out = 0usize;
            for read in black_box(&response).chunks(READ) {
                let mut input = read;
                loop {
                    let Ok((used, event)) = decoder.decode(input) else {
                        return out;
                    };
                    input = input.get(used..).unwrap_or_default();
                    match event {
                        Event::Data(d) => out += d.len(),
                        Event::NeedMore | Event::End { .. } => break,
                        Event::Head(_) => {}
                    }
                }
            }
            out
        })
    });
    let mut buf = vec![0u8; 32 * 1024];
    g.bench_function("flate2_streaming", |b| {
        b.iter(|| {
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
                    if input.is_empty() && made < buf.len() {
                        break;
                    }
                    if used == 0 && made == 0 {
                        break;
                    }
                }
            }
            out
        })
    });
    g.finish();
}

fn json_reply(c: &mut Criterion) {
    let body = results_reply(200);
    let mut g = c.benchmark_group("json_results");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("benchlink", |b| {
        b.iter(|| {
            let Ok(results) = request::Results::read_reply(200, black_box(&body)) else {
                return 0;
            };
            let mut n = 0usize;
            for (name, metric) in results.iter() {
                n += name.as_raw().len() + metric.stats().count();
            }
            n
        })
    });
    g.bench_function("serde_json_value", |b| {
        b.iter(|| {
            let Ok(serde_json::Value::Object(results)) =
                serde_json::from_slice::<serde_json::Value>(black_box(&body))
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
        })
    });
    g.finish();
}

fn rtm_pdu(c: &mut Criterion) {
    let pdu = subscription_data(20);
    let mut g = c.benchmark_group("rtm_pdu");
    g.throughput(Throughput::Bytes(pdu.len() as u64));
    g.bench_function("benchlink", |b| {
        b.iter(|| match Incoming::parse(black_box(&pdu)) {
            Ok(Incoming::Data(data)) => data.messages.elements().map(|m| m.as_raw().len()).sum(),
            _ => 0usize,
        })
    });
    g.bench_function("serde_json_value", |b| {
        b.iter(|| {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(black_box(&pdu)) else {
                return 0;
            };
            v.get("body")
                .and_then(|b| b.get("messages"))
                .and_then(|m| m.as_array())
                .map_or(0, |m| m.len())
        })
    });
    g.finish();
}

criterion_group! {
    name = decoders;
    config = config();
    targets = metric_line_decoding, chunked_decoding, inflate, json_reply, rtm_pdu
}
criterion_main!(decoders);

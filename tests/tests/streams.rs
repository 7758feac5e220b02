//! The streaming endpoints through `BenchClient`: `/log` and `/userlog` while the
//! benchmark runs (zlib-compressed and plain) and after it ended, `/data` samples as
//! they are reported, `/data` on failed benchmarks (which the real server never
//! answers), streams ending on a crash, and the idle timeout.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use benchlink_sandbox::bench::{BenchServer, LogCompression, Quirks, Speed};
use benchlink_std::bench::{ErrorKind, Sample, StartOptions, StatusInfo, Waiting};
use benchlink_tests::{
    client, fast_server, hello, live_speed, scenario, server_with, wait_final, wait_process_gone,
    wait_running, wait_status, wait_until, within, PATIENCE,
};

/// What a reader thread saw of one stream.
#[derive(Debug)]
struct Seen<T> {
    items: Vec<T>,
    /// The status (from a second client) when the first item arrived.
    status_at_first: Option<StatusInfo>,
    /// How many items arrived while the status was not final yet.
    before_final: usize,
    /// The status when the stream ended.
    status_at_end: StatusInfo,
}

/// A reader thread, and how many items it has read so far (so that a test can wait
/// until a stream is flowing).
struct Reading<T> {
    thread: thread::JoinHandle<Seen<T>>,
    read: Arc<AtomicUsize>,
}

impl<T> Reading<T> {
    fn join(self) -> thread::Result<Seen<T>> {
        self.thread.join()
    }

    /// Waits until the reader has read at least `n` items.
    fn wait_items(&self, what: &str, n: usize) {
        wait_until(&format!("{n} items of {what}"), || {
            self.read.load(Ordering::SeqCst) >= n
        });
    }
}

/// Reads `/log` or `/userlog` line by line, probing the status after each line.
fn read_log(host: String, id: u64, user: bool) -> Reading<String> {
    let read = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&read);
    let thread = thread::spawn(move || {
        let mut reader = client(&host);
        let mut probe = client(&host);
        let stream = if user {
            reader.userlog(id)
        } else {
            reader.log(id)
        }
        .expect("open the log stream");
        let mut seen = Seen {
            items: Vec::new(),
            status_at_first: None,
            before_final: 0,
            status_at_end: StatusInfo {
                status_text: String::new(),
                create_time: None,
                start_time: None,
                finish_time: None,
                reason: None,
            },
        };
        let mut final_seen = false;
        for line in stream {
            let line = line.expect("a log line");
            if seen.items.is_empty() || !final_seen {
                let status = probe.status(id).expect("probe status");
                final_seen = status.status().is_final();
                if !final_seen {
                    seen.before_final += 1;
                }
                seen.status_at_first.get_or_insert(status);
            }
            seen.items.push(line);
            count.fetch_add(1, Ordering::SeqCst);
        }
        seen.status_at_end = probe.status(id).expect("status at the end");
        seen
    });
    Reading { thread, read }
}

fn live_logs(compression: LogCompression) {
    let server = server_with(|c| {
        c.speed = live_speed();
        c.log_compression = compression;
    });
    let host = server.host();
    let mut c = client(&host);
    let id = c.start(&hello(), &StartOptions::default()).expect("start");
    let log = read_log(host.clone(), id, false);
    let userlog = read_log(host.clone(), id, true);
    let (log, userlog) = within(PATIENCE, "reading both logs to their end", move || {
        (
            log.join().expect("log reader"),
            userlog.join().expect("userlog reader"),
        )
    });
    let first = log.status_at_first.as_ref().expect("log lines");
    assert!(!first.status().is_final(), "first log line late: {first:?}");
    assert!(log.before_final > 5, "{log:?}");
    let first = userlog.status_at_first.as_ref().expect("userlog lines");
    assert_eq!(
        first.status_text, "running",
        "worker lines come while running"
    );
    assert!(userlog.before_final > 2, "{userlog:?}");
    // The streams end once the benchmark's process is gone, after the final status.
    assert_eq!(log.status_at_end.status_text, "complete");
    assert_eq!(userlog.status_at_end.status_text, "complete");
    assert!(
        log.items[0].contains("Starting benchmark"),
        "{:?}",
        log.items
    );
    assert!(
        log.items
            .iter()
            .any(|l| l.contains("Bench final status: complete")),
        "{:?}",
        log.items
    );
    assert!(
        log.items
            .last()
            .is_some_and(|l| l.contains("finalize - release_exclusive")),
        "{:?}",
        log.items.last()
    );
    assert!(
        userlog
            .items
            .iter()
            .all(|l| l.contains("[info]") && l.contains("Dummy print:")),
        "{:?}",
        userlog.items
    );

    // Finished: the whole file in one Content-Length reply, the same lines.
    wait_process_gone(&server, id);
    let finished = c
        .log(id)
        .expect("finished log")
        .collect::<Result<Vec<_>, _>>()
        .expect("lines");
    assert_eq!(finished, log.items);
    let finished = c
        .userlog(id)
        .expect("finished userlog")
        .collect::<Result<Vec<_>, _>>()
        .expect("lines");
    assert_eq!(finished, userlog.items);
    // And the connection is still good for a JSON call.
    assert_eq!(c.status(id).expect("status").status_text, "complete");
}

#[test]
fn logs_stream_live_compressed() {
    live_logs(LogCompression::Deflate);
}

#[test]
fn logs_stream_live_identity() {
    live_logs(LogCompression::Identity);
}

#[test]
fn run_command_print_shows_in_the_live_userlog() {
    let server = server_with(|c| c.speed = live_speed());
    let host = server.host();
    let mut c = client(&host);
    let id = c.start(&hello(), &StartOptions::default()).expect("start");
    wait_running(&mut c, id);
    let userlog = read_log(host, id, true);
    c.run_command(id, 1, 100, "print(\"marker from the test\")")
        .expect("run_command");
    c.stop(id).expect("stop");
    let seen = within(PATIENCE, "userlog", move || userlog.join().expect("reader"));
    let marked = seen
        .items
        .iter()
        .filter(|l| l.ends_with("Dummy print: \"marker from the test\""))
        .count();
    assert_eq!(marked, 2, "one line per worker of pool 1: {:?}", seen.items);
    assert_eq!(seen.status_at_end.status_text, "stopped");
}

fn read_data(host: String, id: u64) -> Reading<Sample> {
    let read = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&read);
    let thread = thread::spawn(move || {
        let mut reader = client(&host);
        let mut probe = client(&host);
        let stream = reader.data(id).expect("open /data");
        let mut items = Vec::new();
        let mut status_at_first = None;
        let mut before_final = 0;
        let mut final_seen = false;
        for sample in stream {
            let sample = sample.expect("a sample");
            if items.is_empty() || !final_seen {
                let status = probe.status(id).expect("probe status");
                final_seen = status.status().is_final();
                if !final_seen {
                    before_final += 1;
                }
                status_at_first.get_or_insert(status);
            }
            items.push(sample);
            count.fetch_add(1, Ordering::SeqCst);
        }
        Seen {
            items,
            status_at_first,
            before_final,
            status_at_end: probe.status(id).expect("status at the end"),
        }
    });
    Reading { thread, read }
}

#[test]
fn data_streams_live_then_whole() {
    let server = server_with(|c| c.speed = live_speed());
    let host = server.host();
    let mut c = client(&host);
    let id = c.start(&hello(), &StartOptions::default()).expect("start");
    // Opened before `running`: the server holds the reply until there is data.
    let live = read_data(host, id);
    let live = within(PATIENCE, "reading /data to its end", move || {
        live.join().expect("data reader")
    });
    let first = live.status_at_first.as_ref().expect("samples");
    assert_eq!(first.status_text, "running", "{first:?}");
    assert!(
        live.before_final > 10,
        "{} samples early",
        live.before_final
    );
    assert_eq!(live.status_at_end.status_text, "complete");
    let names = |samples: &[Sample]| {
        let mut n: Vec<String> = samples.iter().map(|s| s.name.clone()).collect();
        n.sort();
        n.dedup();
        n
    };
    let live_names = names(&live.items);
    for name in ["print", "print.rps", "dummy.95", "workers.pool1.started"] {
        assert!(
            live_names.iter().any(|n| n == name),
            "{name} missing: {live_names:?}"
        );
    }
    // The print counter only grows.
    let prints: Vec<f64> = live
        .items
        .iter()
        .filter(|s| s.name == "print")
        .map(|s| s.value.to_string().parse().expect("a number"))
        .collect();
    assert!(prints.len() >= 3, "{prints:?}");
    assert!(prints.windows(2).all(|w| w[0] <= w[1]), "{prints:?}");
    assert!(prints.last().is_some_and(|v| *v > 0.0), "{prints:?}");
    assert!(live.items.iter().all(|s| s.timestamp > 1_600_000_000));

    // After the end: every sample at once, the same set.
    wait_process_gone(&server, id);
    let whole = within(PATIENCE, "/data after the end", move || {
        c.data(id)
            .expect("data")
            .collect::<Result<Vec<_>, _>>()
            .expect("samples")
    });
    assert_eq!(names(&whole), live_names);
    assert_eq!(whole.len(), live.items.len());
}

/// A server whose `/data` hangs on failed benchmarks, like the real one.
fn faithful(speed: Speed) -> BenchServer {
    server_with(|c| {
        c.speed = speed;
        c.quirks = Quirks {
            data_hangs_on_failed: true,
            ..Quirks::default()
        };
    })
}

fn data_of(host: &str, id: u64) -> Vec<Sample> {
    let host = host.to_owned();
    within(
        Duration::from_secs(3),
        "data() on a failed benchmark",
        move || {
            let mut c = client(&host);
            let samples = c
                .data(id)
                .expect("data")
                .collect::<Result<Vec<_>, _>>()
                .expect("samples");
            // The client is still usable afterwards.
            c.status(id).expect("status after data");
            samples
        },
    )
}

#[test]
fn data_on_failed_benchmarks_returns_promptly() {
    let server = faithful(Speed::fast());
    let host = server.host();
    let mut c = client(&host);
    // `emulate_bench_crash` is a /start parameter the official CLI passes as --env.
    let crash = StartOptions {
        env: vec![("emulate_bench_crash".into(), "true".into())],
        ..StartOptions::default()
    };
    let emulated = c.start(&hello(), &crash).expect("start");
    let broken = c
        .start(&scenario("broken.bdl"), &StartOptions::default())
        .expect("start broken.bdl");
    assert_eq!(wait_final(&mut c, emulated).status_text, "failed");
    assert_eq!(wait_final(&mut c, broken).status_text, "failed");
    assert_eq!(data_of(&host, emulated), vec![]);
    assert_eq!(data_of(&host, broken), vec![]);
    // A benchmark whose process died: `{"reason":"crashed","status":"failed"}`.
    let crashed = c.start(&hello(), &StartOptions::default()).expect("start");
    assert!(server.crash_benchmark(crashed));
    assert_eq!(
        c.status(crashed).expect("status").reason.as_deref(),
        Some("crashed")
    );
    assert_eq!(data_of(&host, crashed), vec![]);
}

#[test]
fn data_requested_before_the_benchmark_fails_returns_promptly() {
    // The request goes out while the benchmark is still in `init`; it fails afterwards.
    // The real server then never answers, so the client must not just send /data and
    // wait: it has to wait for a status the server will answer for first.
    let server = faithful(Speed {
        stage: Duration::from_millis(300),
        ..Speed::fast()
    });
    let host = server.host();
    let mut c = client(&host);
    let crash = StartOptions {
        env: vec![("emulate_bench_crash".into(), "true".into())],
        ..StartOptions::default()
    };
    let id = c.start(&hello(), &crash).expect("start");
    assert_eq!(c.status(id).expect("status").status_text, "init");
    assert_eq!(data_of(&host, id), vec![]);
}

#[test]
fn streams_end_when_the_benchmark_crashes() {
    let server = server_with(|c| c.speed = live_speed());
    let host = server.host();
    let mut c = client(&host);
    let id = c.start(&hello(), &StartOptions::default()).expect("start");
    wait_running(&mut c, id);
    let log = read_log(host.clone(), id, false);
    let data = read_data(host, id);
    // Both streams flowing, then the crash ends them (the benchmark would otherwise
    // complete, and `reason` below would not be `crashed`).
    log.wait_items("/log", 1);
    data.wait_items("/data", 1);
    assert!(server.crash_benchmark(id));
    let (log, data) = within(PATIENCE, "streams after a crash", move || {
        (log.join().expect("log"), data.join().expect("data"))
    });
    assert!(!log.items.is_empty() && !data.items.is_empty());
    assert_eq!(log.status_at_end.reason.as_deref(), Some("crashed"));
}

#[test]
fn a_silent_stream_times_out_instead_of_hanging() {
    let server = fast_server();
    let host = server.host();
    let (first, rest, took) = within(PATIENCE, "a silent server_logs stream", move || {
        // Resumption off: the idle limit ends the stream with its error.
        let mut c = client(&host)
            .with_stream_idle_timeout(Some(Duration::from_millis(200)))
            .with_retry(None);
        let started = Instant::now();
        let (first, rest) = {
            let mut stream = c.server_logs(Some("error")).expect("server_logs");
            let first = stream.next();
            (first, stream.count())
        };
        let took = started.elapsed();
        // The connection was dropped; the client reconnects for the next call.
        c.status(0).expect_err("no benchmark 0");
        (first, rest, took)
    });
    match first {
        Some(Err(e)) => {
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::Timeout {
                        waiting: Waiting::StreamData,
                        ..
                    }
                ),
                "{e:?}"
            );
            assert!(e.to_string().contains("no data from"), "{e}");
            assert!(e.to_string().contains("/server_logs"), "{e}");
        }
        other => panic!("expected an idle timeout, got {other:?}"),
    }
    assert_eq!(rest, 0, "nothing after the error");
    // Not before the idle timeout (the `within` above guards against a hang; the error's
    // kind shows that the idle timer, not anything else, ended the stream).
    assert!(took >= Duration::from_millis(150), "{took:?}");
}

#[test]
fn stopped_benchmark_streams_end() {
    let server = server_with(|c| c.speed = live_speed());
    let host = server.host();
    let mut c = client(&host);
    let id = c.start(&hello(), &StartOptions::default()).expect("start");
    wait_running(&mut c, id);
    let data = read_data(host.clone(), id);
    let userlog = read_log(host, id, true);
    data.wait_items("/data", 1);
    userlog.wait_items("/userlog", 1);
    c.stop(id).expect("stop");
    let (data, userlog) = within(PATIENCE, "streams of a stopped benchmark", move || {
        (data.join().expect("data"), userlog.join().expect("userlog"))
    });
    assert_eq!(data.status_at_end.status_text, "stopped");
    assert_eq!(userlog.status_at_end.status_text, "stopped");
    let stopped = wait_status(&mut c, id, "stopped", |s| s.status_text == "stopped");
    assert!(stopped.finish_time.is_some());
    assert!(data.items.iter().any(|s| s.name == "print"));
}

//! The cursors against streams restreamed as the server does it: every metric from its
//! first line, interleaved differently on each request, broken off anywhere.

use super::*;
use crate::bench::{LineDecoder, LogLine, MetricLine};

/// Lines of metrics `a`, `b`, `c`, in file order per metric.
const FILE: [&[u8]; 9] = [
    b"1\ta\t0", b"1\tb\t0", b"2\ta\t1", b"1\tc\t0", b"2\tb\t1", b"3\ta\t2", b"2\tc\t1", b"3\tb\t2",
    b"3\tc\t2",
];

/// The lines of `FILE`, interleaved differently for each `round`, each metric's lines
/// still in order.
fn interleaved(round: usize) -> std::vec::Vec<&'static [u8]> {
    let mut order = FILE.to_vec();
    order.sort_by_key(|line| {
        let s = Sample::parse(line).unwrap();
        (s.timestamp, (s.name.as_bytes()[0] as usize + round) % 3)
    });
    order
}

/// Each request breaks off after `per_request` new lines (or is cut there); the union
/// of what was taken is every line once, in each metric's order.
#[test]
fn any_interleaving_and_any_cut_resumes_exactly() {
    for per_request in 1..=9 {
        let mut cursor = DataCursor::new(Metrics::<3, 8>::new());
        let mut got = std::vec::Vec::new();
        for round in 0..20 {
            if round > 0 {
                cursor.restart();
            }
            let mut new = 0;
            let mut ended = true;
            for line in interleaved(round) {
                let s = Sample::parse(line).unwrap();
                match cursor.classify(&s) {
                    Line::Seen => {}
                    Line::New if new < per_request => {
                        cursor.take(&s);
                        got.push(line);
                        new += 1;
                    }
                    Line::New => {
                        ended = false;
                        break;
                    }
                    Line::Unresumable(why) => panic!("{why}"),
                }
            }
            if ended {
                assert_eq!(cursor.finish(), Ok(()));
            }
        }
        let mut want = FILE.to_vec();
        want.sort();
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(sorted, want, "{per_request} a request");
        for name in ["a", "b", "c"] {
            let values: std::vec::Vec<_> = got
                .iter()
                .map(|l| Sample::parse(l).unwrap())
                .filter(|s| s.name == name)
                .map(|s| s.value.as_str().to_owned())
                .collect();
            assert_eq!(values, ["0", "1", "2"]);
        }
        assert_eq!(cursor.taken(), 9);
    }
}

/// The same through a decoder fed the restreamed bytes in every split: a partial line
/// of a cut request is dropped with the request (the decoder is finished without it),
/// and comes again whole.
#[test]
fn a_line_cut_in_half_comes_again_whole() {
    let body: std::vec::Vec<u8> = FILE.iter().flat_map(|l| [*l, b"\n"].concat()).collect();
    for cut in 0..body.len() {
        let mut buf = [0u8; 64];
        let mut lines = LineDecoder::<MetricLine>::new(&mut buf);
        let mut cursor = DataCursor::new(Metrics::<3, 8>::new());
        let mut got = 0;
        let mut input = &body[..cut];
        while let Some(line) = lines.next(&mut input) {
            let line = line.unwrap();
            assert_eq!(cursor.classify(&line), Line::New);
            cursor.take(&line);
            got += 1;
        }
        let _partial = lines.finish();
        cursor.restart();
        let mut input = &body[..];
        while let Some(line) = lines.next(&mut input) {
            let line = line.unwrap();
            match cursor.classify(&line) {
                Line::Seen => {}
                Line::New => {
                    cursor.take(&line);
                    got += 1;
                }
                Line::Unresumable(why) => panic!("{why}"),
            }
        }
        assert_eq!(cursor.finish(), Ok(()));
        assert_eq!(got, 9, "cut at {cut}");
    }
}

#[test]
fn a_restarted_benchmark_is_reported_not_guessed() {
    let mut cursor = DataCursor::new(Metrics::<3, 8>::new());
    for line in &FILE[..3] {
        let s = Sample::parse(line).unwrap();
        assert_eq!(cursor.classify(&s), Line::New);
        cursor.take(&s);
    }
    // Another file: `a`'s second line is not the one taken.
    cursor.restart();
    let first = Sample::parse(b"9\ta\t0").unwrap();
    assert_eq!(cursor.classify(&first), Line::Seen);
    let second = Sample::parse(b"9\ta\t7").unwrap();
    assert_eq!(
        cursor.classify(&second),
        Line::Unresumable(Unresumable::Diverged)
    );
    // Every later line of `a` in this request is reported too, never taken as new.
    let third = Sample::parse(b"10\ta\t8").unwrap();
    assert_eq!(
        cursor.classify(&third),
        Line::Unresumable(Unresumable::Diverged)
    );
    cursor.take(&third);
    // A shorter file: `b` had one line taken, this request has none of it.
    assert_eq!(
        cursor.finish(),
        Err(Shortfall {
            sequences: 1,
            lines: 1
        })
    );
    assert_eq!(cursor.taken(), 3);
}

#[test]
fn an_untracked_metric_is_new_on_the_first_request_and_unresumable_after() {
    let mut cursor = DataCursor::new(Metrics::<1, 4>::new());
    let a = Sample::parse(b"1\ta\t1").unwrap();
    let b = Sample::parse(b"1\tb\t1").unwrap();
    let long = Sample::parse(b"1\tlonger\t1").unwrap();
    assert_eq!(cursor.classify(&a), Line::New);
    cursor.take(&a);
    assert_eq!(cursor.classify(&b), Line::New);
    cursor.take(&b);
    assert_eq!(cursor.classify(&long), Line::New);
    cursor.take(&long);
    assert_eq!(cursor.taken(), 3);
    cursor.restart();
    assert_eq!(cursor.classify(&a), Line::Seen);
    assert_eq!(
        cursor.classify(&b),
        Line::Unresumable(Unresumable::Untracked(Untracked::TableFull { capacity: 1 }))
    );
    assert_eq!(
        cursor.classify(&long),
        Line::Unresumable(Unresumable::Untracked(Untracked::NameTooLong { max: 4 }))
    );
    assert_eq!(cursor.resumptions(), 1);
}

#[test]
fn bad_lines_are_reported_once_over_every_request() {
    let mut buf = [0u8; 16];
    let body = b"1\ta\t1\nnot a sample\n2\ta\t2\n";
    let mut cursor = DataCursor::new(Metrics::<2, 8>::new());
    let mut reported = 0;
    for cut in [13usize, body.len()] {
        let mut lines = LineDecoder::<MetricLine>::new(&mut buf);
        let mut input = &body[..cut];
        while let Some(line) = lines.next(&mut input) {
            match StreamCursor::classify(&mut cursor, &line) {
                Line::New => {
                    StreamCursor::take(&mut cursor, &line);
                    reported += usize::from(line.is_err());
                }
                Line::Seen => {}
                Line::Unresumable(why) => panic!("{why}"),
            }
        }
        StreamCursor::<MetricLine>::restart(&mut cursor);
    }
    assert_eq!((reported, cursor.taken()), (1, 2));
}

#[test]
fn a_log_resumes_after_its_last_line_and_checks_it() {
    let mut buf = [0u8; 32];
    let log = b"one\ntwo\nthree\n";
    let mut cursor = LogCursor::new();
    let mut got = std::vec::Vec::new();
    for cut in [5usize, 9, log.len()] {
        let mut lines = LineDecoder::<LogLine>::new(&mut buf);
        let mut input = &log[..cut];
        while let Some(line) = lines.next(&mut input) {
            match StreamCursor::classify(&mut cursor, &line) {
                Line::New => {
                    StreamCursor::take(&mut cursor, &line);
                    got.push(line.unwrap().to_owned());
                }
                Line::Seen => {}
                Line::Unresumable(why) => panic!("{why}"),
            }
        }
        let _ = lines.finish();
        StreamCursor::<LogLine>::restart(&mut cursor);
    }
    assert_eq!(got, ["one", "two", "three"]);
    assert_eq!((cursor.taken(), cursor.resumptions()), (3, 3));
    // Another log of the same length: its last taken line differs.
    let mut other = LogCursor::new();
    for line in [b"one".as_slice(), b"two"] {
        assert_eq!(other.classify(line), Line::New);
        other.take(line);
    }
    other.restart();
    assert_eq!(other.classify(b"one"), Line::Seen);
    assert_eq!(
        other.classify(b"2"),
        Line::Unresumable(Unresumable::Diverged)
    );
}

#[test]
fn a_tail_reports_each_gap_after_the_lines_taken() {
    let mut tail = TailCursor::new();
    let line: Result<&str, LogLineError<'_>> = Ok("12:00 [info] x");
    assert_eq!(
        StreamCursor::<LogLine>::classify(&mut tail, &line),
        Line::New
    );
    StreamCursor::<LogLine>::take(&mut tail, &line);
    StreamCursor::<LogLine>::take(&mut tail, &line);
    assert_eq!(
        StreamCursor::<LogLine>::restart(&mut tail),
        Some(Gap { after_line: 2 })
    );
    assert_eq!(StreamCursor::<LogLine>::finish(&mut tail), Ok(()));
}

#[test]
fn retries_back_off_to_the_cap_and_give_up_after_the_attempts() {
    let policy = Retry {
        interval: Duration::from_millis(100),
        max_interval: Duration::from_millis(350),
        attempts: Some(4),
        jitter_seed: 0,
        retry_first_connect: false,
    };
    let mut r = Retrying::new(policy);
    let t = Instant::from_secs(1);
    let waits: std::vec::Vec<_> = (0..5)
        .map(|_| r.failed(t).map(|at| (at - t).as_millis()))
        .collect();
    assert_eq!(waits, [Some(100), Some(200), Some(350), Some(350), None]);
    r.progressed();
    assert_eq!(r.failed(t), Some(t + Duration::from_millis(100)));
    // Jitter stays within a quarter below the wait.
    let mut jittered = Retrying::new(Retry {
        attempts: None,
        jitter_seed: 7,
        ..policy
    });
    for _ in 0..100 {
        let wait = jittered.failed(t).unwrap() - t;
        assert!(wait <= policy.max_interval && wait >= policy.interval * 3 / 4);
    }
}

//! The `/data` and log cursors against the server's restreaming, requests cut anywhere.
//!
//! Input: `[seed: 8 bytes][file…]`. The file is up to 8 metrics' lines: each input byte
//! is one line, of metric `byte % metrics` (metrics: 1 + `seed[0] % 8`), value the byte.
//! The seed then drives the requests: each request restreams every metric from its first
//! line, interleaved in an order the seed picks (each metric's lines in file order), and
//! is cut after a number of lines the seed picks (or runs to its end); the caller breaks
//! off at a `New` line now and then without taking it. The metric table holds 4 metrics
//! when `seed[1]` is odd (so some may be untracked), else 16.
//!
//! Properties: no line is taken twice; a line classified `Seen` was taken by an earlier
//! request; nothing is `Diverged`; `Untracked` only after a cut, and only for metrics
//! the table could not keep; a request that ran to its end has no `Shortfall`; and once
//! every metric is tracked, what was taken after the last complete request is the whole
//! file. The log cursor, fed every metric's lines as one log, is held to the same.
#![no_main]

use benchlink_core::bench::resume::{
    DataCursor, Line, LogCursor, MetricTable, Metrics, Unresumable,
};
use benchlink_core::bench::Sample;
use benchlink_core::json::Number;
use benchlink_core_fuzz::Rng;
use libfuzzer_sys::fuzz_target;

const NAMES: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];

/// The values' texts, made once (not per execution).
static VALUES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let Some((seed, file)) = data.split_at_checked(8) else {
        return;
    };
    let file = &file[..file.len().min(512)];
    if seed[1] % 2 == 1 {
        restreamed(seed, file, DataCursor::new(Metrics::<4, 4>::new()));
    } else {
        restreamed(seed, file, DataCursor::new(Metrics::<16, 4>::new()));
    }
});

fn restreamed<T: MetricTable>(seed: &[u8], file: &[u8], mut cursor: DataCursor<T>) {
    let metrics = 1 + usize::from(seed[0] % 8);
    let mut rng = Rng::from_bytes(seed);
    // Each metric's lines: (timestamp, value text) in file order.
    let values = VALUES.get_or_init(|| (0..=255u16).map(|v| v.to_string()).collect());
    let mut lines: Vec<Vec<(u64, &str)>> = vec![Vec::new(); metrics];
    for (i, &b) in file.iter().enumerate() {
        lines[usize::from(b) % metrics].push((i as u64, &values[usize::from(b)]));
    }
    let mut log = LogCursor::new();
    let mut taken = vec![0usize; metrics];
    let mut log_taken = 0usize;
    let mut untracked = vec![false; metrics];
    let mut complete = false;
    for request in 0..12 {
        if request > 0 {
            cursor.restart();
            log.restart();
        }
        let cut_after = if rng.chance(3) {
            usize::MAX
        } else {
            rng.below(file.len() + 1)
        };
        let mut next = vec![0usize; metrics];
        let mut met = 0usize;
        let mut log_met = 0usize;
        let mut ended = true;
        loop {
            let left: Vec<usize> = (0..metrics).filter(|&m| next[m] < lines[m].len()).collect();
            if left.is_empty() {
                break;
            }
            if met == cut_after {
                ended = false;
                break;
            }
            let m = left[rng.below(left.len())];
            let (ts, value) = lines[m][next[m]];
            let position = next[m];
            next[m] += 1;
            met += 1;
            let sample = Sample {
                timestamp: ts,
                name: NAMES[m],
                value: Number::parse(value).expect("a number"),
            };
            let text = [NAMES[m].as_bytes(), value.as_bytes()].concat();
            // The log cursor gets the first metric's lines: one file, restreamed in its
            // order (the interleaving of several metrics differs per request).
            if m == 0 {
                match log.classify(&text) {
                    Line::Seen => assert!(log_met < log_taken, "a log line seen but not taken"),
                    Line::New => {
                        assert_eq!(log_met, log_taken, "a log line taken out of order");
                        log.take(&text);
                        log_taken += 1;
                    }
                    Line::Unresumable(why) => panic!("log: {why}"),
                }
                log_met += 1;
            }
            match cursor.classify(&sample) {
                Line::Seen => assert!(position < taken[m], "seen but never taken"),
                Line::New => {
                    assert!(
                        position == taken[m] || untracked[m],
                        "new out of order: metric {m} line {position}, {} taken",
                        taken[m]
                    );
                    if rng.chance(16) {
                        // Broken off before taking it: the next request meets it again.
                        ended = false;
                        break;
                    }
                    cursor.take(&sample);
                    taken[m] += 1;
                }
                Line::Unresumable(Unresumable::Untracked(_)) => {
                    assert!(request > 0, "untracked on the first request");
                    untracked[m] = true;
                }
                Line::Unresumable(why) => panic!("{why}"),
            }
        }
        if ended {
            assert_eq!(cursor.finish(), Ok(()), "a whole request came up short");
            assert_eq!(log.finish(), Ok(()));
            complete = true;
        }
    }
    for m in 0..metrics {
        assert!(taken[m] <= lines[m].len());
        if complete && !untracked[m] {
            // A tracked metric is whole after a complete request.
            assert!(
                taken[m] == lines[m].len() || untracked[m],
                "metric {m} incomplete"
            );
        }
    }
    if complete {
        assert_eq!(log_taken, lines[0].len());
    }
}

//! Metric series of a benchmark and the generator that fills them while it runs, named as
//! the real server names them: built-in worker/error/log counters (each with `.rps`), the
//! `metric_merging_time` and system-load gauges, the scenario's `print` counter and
//! histograms expanded to `X.min` … `X.999`.

use std::collections::BTreeMap;

use super::erlang::Num;
use super::scenario::Scenario;

/// Declared metric types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Cumulative count; also streamed as `X.rps`.
    Counter,
    /// A sampled value.
    Gauge,
    /// Distribution, streamed as `X.min`, `X.max`, `X.mean` and percentiles.
    Histogram,
}

/// Suffixes of a histogram's streamed names.
pub(crate) const HISTOGRAM_SUFFIXES: [&str; 9] =
    ["min", "max", "mean", "50", "75", "90", "95", "99", "999"];

/// The stored metric files of one benchmark.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    /// Declared metrics (results are keyed by these names).
    pub(crate) declared: Vec<(String, Kind)>,
    /// Streamed series (`<timestamp>\t<value>` files), in declaration order.
    pub(crate) series: Vec<(String, Vec<(u64, Num)>)>,
    /// Every histogram sample, merged for the results (the real server's HDR histogram).
    pub(crate) samples: BTreeMap<String, Vec<i64>>,
}

impl Metrics {
    /// Declares a metric and creates its (empty) streamed series.
    pub(crate) fn declare(&mut self, name: &str, kind: Kind) {
        if self.declared.iter().any(|(n, _)| n == name) {
            return;
        }
        self.declared.push((name.to_owned(), kind));
        match kind {
            Kind::Counter => {
                self.series.push((name.to_owned(), Vec::new()));
                self.series.push((format!("{name}.rps"), Vec::new()));
            }
            Kind::Gauge => self.series.push((name.to_owned(), Vec::new())),
            Kind::Histogram => {
                for suffix in HISTOGRAM_SUFFIXES {
                    self.series.push((format!("{name}.{suffix}"), Vec::new()));
                }
                self.samples.insert(name.to_owned(), Vec::new());
            }
        }
    }

    /// Appends a point to a streamed series.
    pub(crate) fn push(&mut self, name: &str, ts: u64, value: Num) {
        if let Some((_, points)) = self.series.iter_mut().find(|(n, _)| n == name) {
            points.push((ts, value));
        }
    }

    /// The points of a streamed series.
    pub(crate) fn points(&self, name: &str) -> &[(u64, Num)] {
        self.series
            .iter()
            .find(|(n, _)| n == name)
            .map_or(&[], |(_, p)| p.as_slice())
    }
}

/// Produces the periodic metric reports of a running benchmark.
#[derive(Debug)]
pub(crate) struct Generator {
    pools: Vec<u64>,
    iterations_per_sec: f64,
    has_print: bool,
    histograms: Vec<String>,
    director: String,
    last_t: f64,
    last_counts: BTreeMap<String, i64>,
    rng: u64,
}

impl Generator {
    /// A generator for `scenario`, run by benchmark `bench_id`.
    pub(crate) fn new(scenario: &Scenario, bench_id: i64) -> Generator {
        let mut seed = [0u8; 8];
        // Any seed will do; a fixed one if the OS has no randomness to give.
        let rng = getrandom::fill(&mut seed)
            .map_or(0x9e37_79b9_7f4a_7c15, |()| u64::from_le_bytes(seed))
            | 1;
        Generator {
            pools: scenario.pools.iter().map(|p| p.size).collect(),
            #[allow(clippy::cast_precision_loss)] // pool sizes are small
            iterations_per_sec: scenario.pools.iter().map(|p| p.size as f64 * p.rate).sum(),
            has_print: !scenario.prints.is_empty(),
            histograms: scenario.histograms.clone(),
            director: format!("mzb_director{bench_id}_0"),
            last_t: 0.0,
            last_counts: BTreeMap::new(),
            rng,
        }
    }

    /// Declares every metric this benchmark reports (done when it starts).
    pub(crate) fn declare(&self, metrics: &mut Metrics) {
        for i in 1..=self.pools.len() {
            for what in ["started", "ended", "failed"] {
                metrics.declare(&format!("workers.pool{i}.{what}"), Kind::Counter);
            }
        }
        for name in [
            "errors.system",
            "errors.user",
            "blocked.workers",
            "logs.written",
            "logs.dropped.mailbox_overflow",
            "logs.dropped.rate_limiter",
        ] {
            metrics.declare(name, Kind::Counter);
        }
        metrics.declare("metric_merging_time", Kind::Gauge);
        metrics.declare(&format!("systemload.la1.{}", self.director), Kind::Gauge);
        if self.has_print {
            metrics.declare("print", Kind::Counter);
        }
        for h in &self.histograms {
            metrics.declare(h, Kind::Histogram);
        }
    }

    /// Loop iterations done by all workers after `t` scenario seconds.
    pub(crate) fn iterations(&self, t: f64) -> i64 {
        #[allow(clippy::cast_possible_truncation)] // bounded by running time × rate
        let n = (self.iterations_per_sec * t).floor() as i64;
        n.max(0)
    }

    /// Whether the scenario prints.
    pub(crate) fn prints(&self) -> bool {
        self.has_print
    }

    fn random(&mut self) -> u64 {
        // xorshift64: metric noise only.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// One report at scenario time `t` (seconds since running began), wall clock `ts`.
    /// `logs_written` is the number of user log lines so far; `last` marks the report
    /// sent when the workers have ended.
    pub(crate) fn report(
        &mut self,
        metrics: &mut Metrics,
        t: f64,
        ts: u64,
        logs_written: i64,
        last: bool,
    ) {
        let dt = (t - self.last_t).max(1e-3);
        let mut counters: Vec<(String, i64)> = Vec::new();
        for (i, size) in self.pools.iter().enumerate() {
            let size = i64::try_from(*size).unwrap_or(i64::MAX);
            counters.push((format!("workers.pool{}.started", i + 1), size));
            counters.push((
                format!("workers.pool{}.ended", i + 1),
                if last { size } else { 0 },
            ));
            counters.push((format!("workers.pool{}.failed", i + 1), 0));
        }
        for name in ["errors.system", "errors.user", "blocked.workers"] {
            counters.push((name.to_owned(), 0));
        }
        counters.push(("logs.written".to_owned(), logs_written));
        counters.push(("logs.dropped.mailbox_overflow".to_owned(), 0));
        counters.push(("logs.dropped.rate_limiter".to_owned(), 0));
        let iterations = self.iterations(t);
        let new_iterations = iterations - self.last_counts.get("print").copied().unwrap_or(0);
        if self.has_print {
            counters.push(("print".to_owned(), iterations));
        }
        for (name, value) in counters {
            let before = self.last_counts.insert(name.clone(), value).unwrap_or(0);
            metrics.push(&name, ts, Num::Int(value));
            #[allow(clippy::cast_precision_loss)] // small counts
            metrics.push(
                &format!("{name}.rps"),
                ts,
                Num::Float((value - before) as f64 / dt),
            );
        }
        #[allow(clippy::cast_precision_loss)] // small random numbers
        let merging = (20 + self.random() % 400) as f64 / 1_000_000.0;
        metrics.push("metric_merging_time", ts, Num::Float(merging));
        #[allow(clippy::cast_precision_loss)]
        let load = (self.random() % 150) as f64 / 100.0;
        metrics.push(
            &format!("systemload.la1.{}", self.director),
            ts,
            Num::Float(load),
        );
        let samples_now = usize::try_from(new_iterations.clamp(0, 500)).unwrap_or(0);
        for h in self.histograms.clone() {
            let mut values: Vec<i64> = (0..samples_now)
                .map(|_| i64::try_from(80 + self.random() % 2000).unwrap_or(80))
                .collect();
            if values.is_empty() {
                continue;
            }
            values.sort_unstable();
            let pct = |p: f64| {
                #[allow(
                    clippy::cast_precision_loss,
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss
                )]
                let rank =
                    ((p * values.len() as f64 / 100.0).ceil() as usize).clamp(1, values.len());
                #[allow(clippy::cast_precision_loss)]
                values.get(rank - 1).map_or(0.0, |v| *v as f64)
            };
            #[allow(clippy::cast_precision_loss)]
            let mean = values.iter().sum::<i64>() as f64 / values.len() as f64;
            let points = [
                ("min", Num::Int(values.first().copied().unwrap_or(0))),
                ("max", Num::Int(values.last().copied().unwrap_or(0))),
                ("mean", Num::Float(mean)),
                ("50", Num::Float(pct(50.0))),
                ("75", Num::Float(pct(75.0))),
                ("90", Num::Float(pct(90.0))),
                ("95", Num::Float(pct(95.0))),
                ("99", Num::Float(pct(99.0))),
                ("999", Num::Float(pct(99.9))),
            ];
            for (suffix, v) in points {
                metrics.push(&format!("{h}.{suffix}"), ts, v);
            }
            if let Some(all) = metrics.samples.get_mut(&h) {
                all.extend(values);
            }
        }
        self.last_t = t;
    }
}

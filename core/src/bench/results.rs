//! The `/results` reply: final statistics keyed by the metric names the scenario
//! declared. Metric names are data, so this walks the object lazily instead of mapping it
//! into a fixed-capacity structure.

use super::error::Error;
use super::reply::{object, FromReply};
use crate::json::{JsonStr, Members, Number, Object, Value};

/// The `/results` reply: `{}` while the benchmark runs or when nothing was computed.
///
/// Every metric is checked when the reply is read, so iterating cannot fail later.
///
/// ```
/// use benchlink_core::bench::{read_reply, MetricKind, Results, StatKey};
/// let body = br#"{"print":{"rps":{"50":2.99,"max":3.05,"min":2.99},"type":"counter","value":900}}"#;
/// let results: Results = read_reply(200, body).unwrap();
/// let print = results.get("print").unwrap();
/// assert_eq!((print.kind, print.value.and_then(|v| v.as_i64())), (MetricKind::Counter, Some(900)));
/// assert_eq!(print.stat(StatKey::Percentile("50")).map(|n| n.as_f64()), Some(2.99));
/// for (name, metric) in &results {
///     assert!(name == "print" && metric.stats().count() == 3);
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Results<'a> {
    metrics: Object<'a>,
}

impl<'a> Results<'a> {
    /// The metrics in body order, as `(declared name, metric)`.
    ///
    /// ```
    /// use benchlink_core::bench::{read_reply, Results};
    /// let r: Results = read_reply(200, br#"{"a":{"type":"gauge"},"b":{"type":"gauge"}}"#).unwrap();
    /// assert_eq!(r.iter().count(), 2);
    /// ```
    pub fn iter(&self) -> ResultsIter<'a> {
        ResultsIter {
            members: self.metrics.members(),
        }
    }

    /// The metric called `name`.
    ///
    /// ```
    /// use benchlink_core::bench::{read_reply, Results};
    /// let r: Results = read_reply(200, br#"{"dummy":{"percentiles":{"max":12},"type":"histogram"}}"#).unwrap();
    /// assert!(r.get("dummy").is_some() && r.get("print").is_none());
    /// ```
    pub fn get(&self, name: &str) -> Option<Metric<'a>> {
        self.metrics
            .get(name)
            .and_then(|v| Metric::from_value(v).ok())
    }

    /// True for `{}`: no results (yet).
    ///
    /// ```
    /// use benchlink_core::bench::{read_reply, Results};
    /// assert!(read_reply::<Results>(200, b"{}").unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.metrics.is_empty()
    }
}

impl<'a> FromReply<'a> for Results<'a> {
    fn from_value(value: Value<'a>) -> Result<Self, Error<'a>> {
        let metrics = object(value, "an object keyed by metric name")?;
        metrics
            .members()
            .try_for_each(|(_, v)| Metric::from_value(v).map(|_| ()))?;
        Ok(Results { metrics })
    }
}

impl<'a> IntoIterator for &Results<'a> {
    type Item = (JsonStr<'a>, Metric<'a>);
    type IntoIter = ResultsIter<'a>;

    fn into_iter(self) -> ResultsIter<'a> {
        self.iter()
    }
}

/// Iterator over [`Results`]; see [`Results::iter`].
#[derive(Debug, Clone)]
pub struct ResultsIter<'a> {
    members: Members<'a>,
}

impl<'a> Iterator for ResultsIter<'a> {
    type Item = (JsonStr<'a>, Metric<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        // Every member was checked by `Results::from_value`, so nothing is skipped here.
        self.members
            .find_map(|(name, v)| Some((name, Metric::from_value(v).ok()?)))
    }
}

text_enum! {
    /// A metric's `type`. Derived metrics are reported as `gauge`; very old saved
    /// benchmarks have `undefined` (kept as `Other`).
    MetricKind in "bench" (example "counter" => Counter) {
        /// A count: `value` is the last total, stats are over its rate (`rps`).
        Counter = "counter",
        /// A sampled value (also derived metrics): stats in `percentiles`.
        Gauge = "gauge",
        /// An HDR histogram: stats in `percentiles`, no `value`.
        Histogram = "histogram",
    }
}

/// One metric's results.
///
/// ```
/// use benchlink_core::bench::{read_reply, MetricKind, Results, StatKey};
/// let r: Results = read_reply(200, br#"{"la":{"percentiles":{"50":0.1,"min":0.0},"type":"gauge","value":0.1}}"#).unwrap();
/// let la = r.get("la").unwrap();
/// assert_eq!(la.kind, MetricKind::Gauge);
/// // Numbers are the server's text: compare the text, or convert.
/// assert!(la.stat(StatKey::Min).is_some_and(|n| n == "0.0" && n.as_f64() == 0.0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Metric<'a> {
    /// The metric's `type`.
    pub kind: MetricKind<'a>,
    /// The last value (counters and gauges); absent when there was no data and for
    /// histograms.
    pub value: Option<Number<'a>>,
    /// `rps` for counters, `percentiles` for the other kinds.
    stats: Option<Object<'a>>,
}

impl<'a> Metric<'a> {
    fn from_value(value: Value<'a>) -> Result<Self, Error<'a>> {
        let obj = object(value, "each metric as an object")?;
        // One pass over the members (the first of each name counts, as with `get`); a
        // key is compared decoded, escaped or not.
        const KEYS: [&str; 4] = ["type", "value", "rps", "percentiles"];
        let mut found: [Option<Value<'a>>; 4] = [None; 4];
        for (key, v) in obj.members() {
            let at = KEYS.iter().position(|k| key == *k);
            if let Some(slot) = at.and_then(|i| found.get_mut(i)) {
                if slot.is_none() {
                    *slot = Some(v);
                }
            }
        }
        let [kind, number, rps, percentiles] = found;
        let present = |v: Option<Value<'a>>| v.filter(|v| !v.is_null());
        let expected = "`type` of each metric as a string";
        let kind = present(kind)
            .and_then(|v| v.as_str())
            .map(MetricKind::from_json)
            .ok_or(Error::UnexpectedReply { expected })?;
        let stats = match kind {
            MetricKind::Counter => rps,
            _ => percentiles,
        };
        let number = match present(number) {
            None => None,
            Some(v) => Some(v.as_number().ok_or(Error::UnexpectedReply {
                expected: "`value` of a metric as a number",
            })?),
        };
        let stats = match present(stats) {
            None => None,
            Some(v) => Some(v.as_object().ok_or(Error::UnexpectedReply {
                expected: "`rps`/`percentiles` of a metric as an object",
            })?),
        };
        Ok(Metric {
            kind,
            value: number,
            stats,
        })
    }

    /// The statistics (for a counter, of its rate), in body order. Entries whose key is
    /// not a [`StatKey`] or whose value is not a number are skipped.
    ///
    /// ```
    /// use benchlink_core::bench::{read_reply, Results, StatKey};
    /// let r: Results = read_reply(200, br#"{"h":{"percentiles":{"99.9":7.5,"max":9},"type":"histogram"}}"#).unwrap();
    /// let stats: Vec<_> = r.get("h").unwrap().stats().map(|(k, n)| (k, n.as_str())).collect();
    /// assert_eq!(stats, [(StatKey::Percentile("99.9"), "7.5"), (StatKey::Max, "9")]);
    /// ```
    pub fn stats(&self) -> Stats<'a> {
        Stats {
            members: self.stats.map(|o| o.members()),
        }
    }

    /// One statistic. Percentiles are compared as text: `"95"` is not `"95.0"`.
    ///
    /// ```
    /// use benchlink_core::bench::{read_reply, Results, StatKey};
    /// let r: Results = read_reply(200, br#"{"print":{"rps":{"95":3},"type":"counter"}}"#).unwrap();
    /// let p95 = r.get("print").unwrap().stat(StatKey::Percentile("95"));
    /// assert_eq!(p95.and_then(|n| n.as_i64()), Some(3));
    /// assert_eq!(r.get("print").unwrap().value, None);
    /// ```
    pub fn stat(&self, key: StatKey<'_>) -> Option<Number<'a>> {
        self.stats().find(|(k, _)| *k == key).map(|(_, n)| n)
    }
}

/// Which statistic: the keys of `percentiles`/`rps` (configurable on the server:
/// `min`, `max`, `mean`, `median` and numeric percentiles, default `min`, `50`, `90`,
/// `95`, `max`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum StatKey<'a> {
    /// `min`
    Min,
    /// `max`
    Max,
    /// `mean`
    Mean,
    /// `median`
    Median,
    /// A percentile as its decimal text, e.g. `"95"` or `"99.9"`.
    Percentile(&'a str),
}

impl<'a> StatKey<'a> {
    /// The key for a member name: the four named statistics, or digits with at most one
    /// inner `.` as a percentile; anything else is not a statistic.
    ///
    /// ```
    /// use benchlink_core::bench::StatKey;
    /// assert_eq!(StatKey::parse("median"), Some(StatKey::Median));
    /// assert_eq!(StatKey::parse("99.9"), Some(StatKey::Percentile("99.9")));
    /// assert_eq!(StatKey::parse("p99"), None);
    /// ```
    pub fn parse(text: &'a str) -> Option<Self> {
        Some(match text {
            "min" => StatKey::Min,
            "max" => StatKey::Max,
            "mean" => StatKey::Mean,
            "median" => StatKey::Median,
            _ if is_percentile(text) => StatKey::Percentile(text),
            _ => return None,
        })
    }
}

/// `95`, `99.9`: digits, optionally one `.` with digits on both sides.
fn is_percentile(text: &str) -> bool {
    let mut parts = text.split('.');
    let digits =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    digits(parts.next()) && parts.next().is_none_or(|p| digits(Some(p))) && parts.next().is_none()
}

/// Iterator over a metric's statistics; see [`Metric::stats`].
#[derive(Debug, Clone)]
pub struct Stats<'a> {
    members: Option<Members<'a>>,
}

impl<'a> Iterator for Stats<'a> {
    type Item = (StatKey<'a>, Number<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        // Stat keys are plain ASCII; an escaped key is not one the server writes.
        self.members
            .as_mut()?
            .find_map(|(key, v)| Some((StatKey::parse(key.as_plain()?)?, v.as_number()?)))
    }
}

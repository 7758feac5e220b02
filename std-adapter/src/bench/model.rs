//! Owned replies for std users: the core's zero-copy views, copied out of the response
//! buffer once so they can outlive it, be sent between threads and be serialized (the
//! CLI prints them as JSON in the server's own shapes).

use std::collections::BTreeMap;
use std::fmt;

use benchlink_core::bench::{self as core_bench, MetricKind, StatKey, Timestamp};
use benchlink_core::json::{JsonStr, Number};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

pub(crate) fn text(s: JsonStr<'_>) -> String {
    s.chars().collect()
}

/// A benchmark's status (`/status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusInfo {
    /// The status as the server wrote it; see [`StatusInfo::status`] for the typed value.
    #[serde(rename = "status")]
    pub status_text: String,
    /// When the benchmark was created.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "iso")]
    pub create_time: Option<Timestamp>,
    /// When it got past `wait_exclusive`.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "iso")]
    pub start_time: Option<Timestamp>,
    /// When it reached its final status.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "iso")]
    pub finish_time: Option<Timestamp>,
    /// `crashed` when the benchmark's process died without saving a status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl StatusInfo {
    /// The typed status: a pipeline stage, `complete`, `failed`, `stopped`, `zombie`, or
    /// unknown text kept as is.
    ///
    /// ```
    /// # use benchlink_std::bench::StatusInfo;
    /// let s = StatusInfo { status_text: "running".into(), create_time: None, start_time: None, finish_time: None, reason: None };
    /// assert!(!s.status().is_final());
    /// ```
    pub fn status(&self) -> core_bench::Status<'_> {
        core_bench::Status::parse(&self.status_text)
    }
}

impl From<core_bench::BenchStatus<'_>> for StatusInfo {
    fn from(s: core_bench::BenchStatus<'_>) -> StatusInfo {
        StatusInfo {
            status_text: s.status.as_str().to_owned(),
            create_time: s.create_time,
            start_time: s.start_time,
            finish_time: s.finish_time,
            reason: s.reason.map(text),
        }
    }
}

fn iso<S: Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.collect_str(t),
        None => s.serialize_none(),
    }
}

/// A number as the server wrote it: the JSON text, owned (the core's [`Number`], copied
/// out of the response).
///
/// `Display` prints the text as written — integers as integers, floats in the server's
/// Erlang forms (`2.0`, `2.9975917348002614`, `1.0e-5`) — and serialization writes it
/// as the same JSON number (integers through the serializer's integer methods, other
/// numbers as serde_json raw JSON, so serde_json output keeps the server's text). The
/// accessors convert on request. Equality compares the text, like [`Number`]'s.
///
/// ```
/// use benchlink_std::bench::Value;
/// let v: Value = "1.0e-5".parse().unwrap();
/// assert_eq!((v.to_string(), v.as_f64(), v.as_i64()), ("1.0e-5".to_owned(), 1.0e-5, None));
/// assert_eq!(serde_json::to_string(&v).unwrap(), "1.0e-5");
/// let n: Value = "900".parse().unwrap();
/// assert_eq!((n.as_i64(), n.is_integer()), (Some(900), true));
/// assert!("1.".parse::<Value>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Value(Box<str>);

impl Value {
    /// The core view of the text (always `Some`: the text came from a [`Number`]).
    fn number(&self) -> Option<Number<'_>> {
        Number::parse(&self.0).ok()
    }

    /// The text, exactly as the server wrote it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True when written without fraction or exponent (see [`Number::is_integer`]).
    pub fn is_integer(&self) -> bool {
        self.number().is_some_and(|n| n.is_integer())
    }

    /// The number as an `i64`, if it is an integer in range.
    pub fn as_i64(&self) -> Option<i64> {
        self.number()?.as_i64()
    }

    /// The number as a `u64`, if it is a non-negative integer in range.
    pub fn as_u64(&self) -> Option<u64> {
        self.number()?.as_u64()
    }

    /// The nearest `f64` (see [`Number::as_f64`]).
    pub fn as_f64(&self) -> f64 {
        self.number().map_or(f64::NAN, |n| n.as_f64())
    }
}

impl From<Number<'_>> for Value {
    fn from(n: Number<'_>) -> Value {
        Value(n.as_str().into())
    }
}

impl std::str::FromStr for Value {
    type Err = benchlink_core::json::Error;

    /// Accepts exactly one JSON number.
    fn from_str(s: &str) -> Result<Value, Self::Err> {
        Number::parse(s).map(Value::from)
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if let Some(i) = self.as_i64() {
            return s.serialize_i64(i);
        }
        if let Some(u) = self.as_u64() {
            return s.serialize_u64(u);
        }
        let raw: &serde_json::value::RawValue =
            serde_json::from_str(&self.0).map_err(serde::ser::Error::custom)?;
        raw.serialize(s)
    }
}

/// The text as the server wrote it.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One metric of `/results`.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricResult {
    /// `counter`, `gauge`, `histogram`, or what the server wrote.
    pub kind: String,
    /// The last value (counters and gauges with data).
    pub value: Option<Value>,
    /// Rate statistics of a counter (`rps`), or the percentiles of a gauge or histogram,
    /// keyed as on the wire (`min`, `max`, `mean`, `median`, `50`, `95`, …).
    pub stats: BTreeMap<String, Value>,
}

impl Serialize for MetricResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        let stats_key = if self.kind == MetricKind::Counter.as_str() {
            "rps"
        } else {
            "percentiles"
        };
        m.serialize_entry(stats_key, &self.stats)?;
        m.serialize_entry("type", &self.kind)?;
        if let Some(v) = &self.value {
            m.serialize_entry("value", v)?;
        }
        m.end()
    }
}

/// `/results`: every metric the scenario declared, by name. Empty while the benchmark
/// runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Results(pub BTreeMap<String, MetricResult>);

impl Results {
    /// The metric called `name`.
    ///
    /// ```
    /// let r = benchlink_std::bench::Results::default();
    /// assert!(r.get("print").is_none());
    /// ```
    pub fn get(&self, name: &str) -> Option<&MetricResult> {
        self.0.get(name)
    }
}

impl From<core_bench::Results<'_>> for Results {
    fn from(r: core_bench::Results<'_>) -> Results {
        Results(
            r.iter()
                .map(|(name, m)| {
                    let stats = m
                        .stats()
                        .map(|(k, v)| {
                            let key = match k {
                                StatKey::Min => "min",
                                StatKey::Max => "max",
                                StatKey::Mean => "mean",
                                StatKey::Median => "median",
                                StatKey::Percentile(p) => p,
                            };
                            (key.to_owned(), Value::from(v))
                        })
                        .collect();
                    (
                        text(name),
                        MetricResult {
                            kind: m.kind.as_str().to_owned(),
                            value: m.value.map(Value::from),
                            stats,
                        },
                    )
                })
                .collect(),
        )
    }
}

/// One cluster of `/clusters_info`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterInfo {
    /// Cluster id (for `deallocate_cluster` and `remove_cluster_info`).
    pub id: u64,
    /// `registered`, `allocated`, `allocation_failed`, `deallocation_failed`, or other.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Number of hosts requested.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n: Option<u64>,
    /// The benchmark the cluster was allocated for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bench_id: Option<u64>,
    /// Unix seconds of the last state change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<u64>,
    /// Allocation plugin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Host names or addresses, once allocated.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Why allocation or deallocation failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl From<core_bench::Cluster<'_>> for ClusterInfo {
    fn from(c: core_bench::Cluster<'_>) -> ClusterInfo {
        ClusterInfo {
            id: c.id,
            state: c.state.map(|s| s.as_str().to_owned()),
            n: c.n,
            bench_id: c.bench_id,
            timestamp: c.timestamp.map(Timestamp::unix_seconds),
            provider: c.provider.map(text),
            hosts: c
                .hosts
                .map(|h| h.iter().map(text).collect())
                .unwrap_or_default(),
            reason: c.reason.map(text),
        }
    }
}

/// One metric sample of `/data`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Unix seconds.
    pub timestamp: u64,
    /// Metric name (`print`, `print.rps`, `workers.pool1.started`, …).
    pub name: String,
    /// The sample's value.
    pub value: Value,
}

impl Sample {
    /// The value as JSON (integer or float).
    ///
    /// ```
    /// use benchlink_std::bench::{Sample, Value};
    /// let s = Sample { timestamp: 1, name: "x".into(), value: "3".parse().unwrap() };
    /// assert_eq!(s.value_json(), serde_json::json!(3));
    /// let s = Sample { value: "1.0e-5".parse().unwrap(), ..s };
    /// assert_eq!(s.value_json(), serde_json::json!(1.0e-5));
    /// ```
    pub fn value_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.value).unwrap_or(serde_json::Value::Null)
    }
}

impl From<core_bench::Sample<'_>> for Sample {
    fn from(s: core_bench::Sample<'_>) -> Sample {
        Sample {
            timestamp: s.timestamp,
            name: s.name.to_owned(),
            value: Value::from(s.value),
        }
    }
}

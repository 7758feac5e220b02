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

/// A number as the server wrote it: integer or float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Value(pub Number);

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Number::Int(i) => s.serialize_i64(i),
            Number::Float(f) => s.serialize_f64(f),
        }
    }
}

impl fmt::Display for Value {
    /// Integers as integers, floats always with a fraction (`2.0`, not `2`), as the
    /// server and the official CLI print them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Number::Int(i) => write!(f, "{i}"),
            Number::Float(x) if x.is_finite() && x.fract() == 0.0 && x.abs() < 1e16 => {
                write!(f, "{x:.1}")
            }
            Number::Float(x) => write!(f, "{x}"),
        }
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
                            (key.to_owned(), Value(v))
                        })
                        .collect();
                    (
                        text(name),
                        MetricResult {
                            kind: m.kind.as_str().to_owned(),
                            value: m.value.map(Value),
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
    /// let s = Sample { timestamp: 1, name: "x".into(), value: Value(benchlink_core::json::Number::Int(3)) };
    /// assert_eq!(s.value_json(), serde_json::json!(3));
    /// ```
    pub fn value_json(&self) -> serde_json::Value {
        serde_json::to_value(self.value).unwrap_or(serde_json::Value::Null)
    }
}

impl From<core_bench::Sample<'_>> for Sample {
    fn from(s: core_bench::Sample<'_>) -> Sample {
        Sample {
            timestamp: s.timestamp,
            name: s.name.to_owned(),
            value: Value(s.value),
        }
    }
}

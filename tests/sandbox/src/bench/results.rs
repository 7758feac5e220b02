//! `/results`: the final metrics computed when `running` ends, one object per declared
//! metric shaped by its type (a derived metric is typed `"gauge"`, a histogram has no
//! `value`), with nearest-rank percentiles.

use std::collections::BTreeMap;

use super::erlang::Num;
use super::json::Json;
use super::metrics::{Kind, Metrics};

/// Stats over `values` for the configured keys (`min`, `max`, `mean`, `median`, `50`…);
/// `{}` without values.
pub(crate) fn stats(values: &[Num], keys: &[String]) -> Json {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.as_f64().total_cmp(&b.as_f64()));
    let mut out = BTreeMap::new();
    if sorted.is_empty() {
        return Json::Obj(out);
    }
    let nearest_rank = |p: f64| {
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        let rank = ((p * sorted.len() as f64 / 100.0).ceil() as usize).clamp(1, sorted.len());
        sorted.get(rank - 1).copied()
    };
    for key in keys {
        let value = match key.as_str() {
            "min" => sorted.first().copied(),
            "max" => sorted.last().copied(),
            #[allow(clippy::cast_precision_loss)]
            "mean" => Some(Num::Float(
                sorted.iter().map(|v| v.as_f64()).sum::<f64>() / sorted.len() as f64,
            )),
            "median" => nearest_rank(50.0),
            p => p
                .parse::<f64>()
                .ok()
                .filter(|p| (0.0..=100.0).contains(p))
                .and_then(nearest_rank),
        };
        if let Some(v) = value {
            out.insert(key.clone(), Json::Num(v));
        }
    }
    Json::Obj(out)
}

/// The results object for every declared metric.
pub(crate) fn compute(metrics: &Metrics, keys: &[String]) -> Json {
    let mut out = BTreeMap::new();
    for (name, kind) in &metrics.declared {
        let entry = match kind {
            Kind::Counter => {
                let rps: Vec<Num> = metrics
                    .points(&format!("{name}.rps"))
                    .iter()
                    .map(|(_, v)| *v)
                    .collect();
                let mut fields = vec![("rps", stats(&rps, keys)), ("type", Json::str("counter"))];
                if let Some((_, last)) = metrics.points(name).last() {
                    fields.push(("value", Json::Num(*last)));
                }
                Json::obj(fields)
            }
            Kind::Gauge => {
                let values: Vec<Num> = metrics.points(name).iter().map(|(_, v)| *v).collect();
                let mut fields = vec![
                    ("percentiles", stats(&values, keys)),
                    ("type", Json::str("gauge")),
                ];
                if let Some(last) = values.last() {
                    fields.push(("value", Json::Num(*last)));
                }
                Json::obj(fields)
            }
            Kind::Histogram => {
                let Some(samples) = metrics.samples.get(name).filter(|s| !s.is_empty()) else {
                    continue;
                };
                let values: Vec<Num> = samples.iter().map(|v| Num::Int(*v)).collect();
                // HDR histogram results: min/max integers, mean and percentiles floats.
                let Json::Obj(mut st) = stats(&values, keys) else {
                    continue;
                };
                for (k, v) in &mut st {
                    if k != "min" && k != "max" {
                        if let Json::Num(n) = v {
                            *n = Num::Float(n.as_f64());
                        }
                    }
                }
                Json::obj([
                    ("percentiles", Json::Obj(st)),
                    ("type", Json::str("histogram")),
                ])
            }
        };
        out.insert(name.clone(), entry);
    }
    Json::Obj(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let keys: Vec<String> = ["min", "50", "90", "95", "max", "mean"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let values: Vec<Num> = (1..=10).map(Num::Int).collect();
        assert_eq!(
            stats(&values, &keys).encode(),
            r#"{"50":5,"90":9,"95":10,"max":10,"mean":5.5,"min":1}"#
        );
        assert_eq!(stats(&[], &keys).encode(), "{}");
    }

    #[test]
    fn shapes() {
        let keys = vec!["max".to_owned()];
        let mut m = Metrics::default();
        m.declare("print", Kind::Counter);
        m.declare("g", Kind::Gauge);
        m.declare("h", Kind::Histogram);
        assert_eq!(
            compute(&m, &keys).encode(),
            r#"{"g":{"percentiles":{},"type":"gauge"},"print":{"rps":{},"type":"counter"}}"#
        );
        m.push("print", 1, Num::Int(3));
        m.push("print.rps", 1, Num::Float(0.3));
        m.samples.insert("h".into(), vec![5, 7]);
        assert_eq!(
            compute(&m, &keys).encode(),
            r#"{"g":{"percentiles":{},"type":"gauge"},"h":{"percentiles":{"max":7},"type":"histogram"},"print":{"rps":{"max":0.3},"type":"counter","value":3}}"#
        );
    }
}

//! Aggregated views: a window's groups, each with one accumulator per aggregate call
//! of the query and the group's last message, and the rows they give when the window
//! closes.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::ast::{AggFn, Arith, Query};
use super::eval::{canonical, Eval, Num, Scope};
use super::{project, Message, Row, MAX_GROUPS, MAX_WINDOW_BYTES};

/// The running state of one aggregate call over one group.
#[derive(Debug)]
enum Acc {
    Count(i64),
    Distinct(HashSet<String>),
    Sum(Option<Num>),
    Avg { sum: f64, n: u64 },
    Min(Option<Value>),
    Max(Option<Value>),
    Merge(Map<String, Value>),
}

/// `MIN`/`MAX` order: numbers numerically, strings byte-wise, numbers below strings;
/// `None` for values they ignore (null, booleans, arrays, objects).
fn rank(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(_), Value::String(_)) => Some(Ordering::Less),
        (Value::String(_), Value::Number(_)) => Some(Ordering::Greater),
        _ => super::eval::order(a, b),
    }
}

/// Keeps `arg` in `best` if it ranks `want` of it (or `best` is empty).
fn keep(best: &mut Option<Value>, arg: Option<&Value>, want: Ordering) {
    let Some(v) = arg.filter(|v| v.is_number() || v.is_string()) else {
        return;
    };
    if best.as_ref().is_none_or(|b| rank(v, b) == Some(want)) {
        *best = Some(v.clone());
    }
}

/// The argument `COUNT(*)` sees for every message.
static PRESENT: Value = Value::Bool(true);

impl Acc {
    fn new(func: AggFn) -> Acc {
        match func {
            AggFn::CountAll | AggFn::Count => Acc::Count(0),
            AggFn::CountDistinct => Acc::Distinct(HashSet::new()),
            AggFn::Sum => Acc::Sum(None),
            AggFn::Avg => Acc::Avg { sum: 0.0, n: 0 },
            AggFn::Min => Acc::Min(None),
            AggFn::Max => Acc::Max(None),
            AggFn::Merge => Acc::Merge(Map::new()),
        }
    }

    /// Adds one message: `arg` is the call's argument evaluated over it ([`PRESENT`]
    /// for the `(*)` forms), `msg` the message. Returns the bytes of new state it keeps
    /// beyond the message itself.
    fn add(&mut self, arg: Option<&Value>, msg: &Value) -> usize {
        let arg = arg.filter(|v| !v.is_null());
        match self {
            Acc::Count(n) => {
                if arg.is_some() {
                    *n = n.saturating_add(1);
                }
            }
            Acc::Distinct(set) => {
                if let Some(v) = arg {
                    let mut key = String::new();
                    canonical(v, &mut key);
                    let len = key.len();
                    if set.insert(key) {
                        return len;
                    }
                }
            }
            Acc::Sum(total) => {
                if let Some(x) = arg.and_then(Num::of) {
                    *total = Some(match *total {
                        None => x,
                        Some(t) => t.arith(Arith::Add, x).unwrap_or(t),
                    });
                }
            }
            Acc::Avg { sum, n } => {
                if let Some(x) = arg.and_then(Num::of) {
                    *sum += x.float();
                    *n += 1;
                }
            }
            Acc::Min(best) => keep(best, arg, Ordering::Less),
            Acc::Max(best) => keep(best, arg, Ordering::Greater),
            Acc::Merge(merged) => {
                if let Some(object) = msg.as_object() {
                    for (k, v) in object {
                        merged.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        0
    }

    fn result(&self) -> Value {
        match self {
            Acc::Count(n) => Value::from(*n),
            Acc::Distinct(set) => Value::from(set.len()),
            Acc::Sum(total) => total.map_or(Value::Null, Num::value),
            #[allow(clippy::cast_precision_loss)]
            Acc::Avg { sum, n } => {
                if *n == 0 {
                    Value::Null
                } else {
                    Num::Float(*sum / *n as f64).value()
                }
            }
            Acc::Min(v) | Acc::Max(v) => v.clone().unwrap_or(Value::Null),
            Acc::Merge(m) => Value::Object(m.clone()),
        }
    }
}

#[derive(Debug)]
struct Group {
    last: Message,
    accs: Vec<Acc>,
}

/// Whether a window can take more messages.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Fill {
    Open,
    /// It reached [`MAX_GROUPS`] groups or [`MAX_WINDOW_BYTES`]: close it now.
    Full,
}

/// The messages of one period, folded into groups as they arrive.
#[derive(Debug, Default)]
pub(super) struct Window {
    /// In order of each group's first message.
    groups: Vec<Group>,
    index: HashMap<String, usize>,
    bytes: usize,
}

impl Window {
    /// Folds `msg` in if it is an object that passes `WHERE`.
    pub(super) fn add(&mut self, q: &Query, msg: Message) -> Fill {
        if !msg.value.is_object() {
            return Fill::Open;
        }
        let mut eval = Eval::default();
        let mut key = String::new();
        let mut args = Vec::with_capacity(q.aggs.len());
        {
            let scope = Scope {
                msg: &msg.value,
                aggs: &[],
                columns: &[],
            };
            if let Some(w) = &q.filter {
                if !eval.holds(w, &scope) {
                    return Fill::Open;
                }
            }
            for g in &q.group_by {
                canonical(&eval.eval(g, &scope), &mut key);
                key.push(';');
            }
            for call in &q.aggs {
                args.push(call.arg.as_ref().map(|a| eval.eval(a, &scope).into_owned()));
            }
        }
        let existing = self.index.get(&key).copied();
        let mut fresh = Vec::new();
        let accs = match existing {
            Some(n) => &mut self.groups[n].accs,
            None => {
                fresh = q.aggs.iter().map(|c| Acc::new(c.func)).collect();
                &mut fresh
            }
        };
        let mut kept = msg.raw.len();
        for ((acc, call), arg) in accs.iter_mut().zip(&q.aggs).zip(&args) {
            let arg = match call.arg {
                None => Some(&PRESENT),
                Some(_) => arg.as_ref(),
            };
            kept += acc.add(arg, &msg.value);
        }
        match existing {
            Some(n) => self.groups[n].last = msg,
            None => {
                kept += key.len();
                self.index.insert(key, self.groups.len());
                self.groups.push(Group {
                    last: msg,
                    accs: fresh,
                });
            }
        }
        self.bytes += kept;
        if self.groups.len() >= MAX_GROUPS || self.bytes >= MAX_WINDOW_BYTES {
            Fill::Full
        } else {
            Fill::Open
        }
    }

    /// The window's rows (groups in first-seen order, minus those `HAVING` rejects); the
    /// window is empty afterwards.
    pub(super) fn close(&mut self, q: &Query) -> Vec<Row> {
        let groups = std::mem::take(&mut self.groups);
        self.index.clear();
        self.bytes = 0;
        groups
            .into_iter()
            .filter_map(|g| {
                let aggs: Vec<Value> = g.accs.iter().map(Acc::result).collect();
                project(q, &mut Eval::default(), g.last, &aggs)
            })
            .collect()
    }
}

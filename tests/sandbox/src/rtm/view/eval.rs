//! Expression evaluation over one message (or one group's last message and its
//! aggregate results), with SQL's three-valued logic and strict JSON typing: no
//! string↔number coercion, and every runtime type problem yields `null` instead of an
//! error. Work is metered ([`EVAL_FUEL`](super::EVAL_FUEL)) so that one message costs
//! bounded time and memory whatever the query and the message hold.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt::Write as _;

use serde_json::{Number, Value};

use super::ast::{Arith, Cmp, Expr, Scalar};
use super::EVAL_FUEL;

static NULL: Value = Value::Null;

/// What names and aggregate calls refer to while evaluating.
pub(super) struct Scope<'a> {
    /// The message (an object) that field paths read.
    pub msg: &'a Value,
    /// Results of the query's aggregate calls for the current group.
    pub aggs: &'a [Value],
    /// Select-list values of the current row (for `HAVING`).
    pub columns: &'a [Value],
}

/// A metered evaluation: once its fuel is spent, everything evaluates to `null`.
pub(super) struct Eval {
    fuel: usize,
}

/// A JSON number kept as an integer where it is one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    pub(super) fn of(v: &Value) -> Option<Num> {
        let Value::Number(n) = v else { return None };
        Some(match n.as_i64() {
            Some(i) => Num::Int(i),
            None => Num::Float(n.as_f64()?),
        })
    }

    pub(super) fn float(self) -> f64 {
        match self {
            // Precision loss beyond 2^53 is what a float result means here.
            #[allow(clippy::cast_precision_loss)]
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    /// The JSON value; a non-finite float is `null`.
    pub(super) fn value(self) -> Value {
        match self {
            Num::Int(i) => Value::from(i),
            Num::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
        }
    }

    pub(super) fn cmp(self, other: Num) -> Option<Ordering> {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => Some(a.cmp(&b)),
            (a, b) => a.float().partial_cmp(&b.float()),
        }
    }

    /// `+ - * %` stay integers unless they overflow; `/` is always a float; dividing by
    /// zero is `None`.
    pub(super) fn arith(self, op: Arith, other: Num) -> Option<Num> {
        if let (Num::Int(a), Num::Int(b)) = (self, other) {
            let exact = match op {
                Arith::Add => a.checked_add(b),
                Arith::Sub => a.checked_sub(b),
                Arith::Mul => a.checked_mul(b),
                Arith::Rem if b == 0 => return None,
                Arith::Rem => a.checked_rem(b),
                Arith::Div => None,
            };
            if let Some(i) = exact {
                return Some(Num::Int(i));
            }
        }
        let (a, b) = (self.float(), other.float());
        Some(Num::Float(match op {
            Arith::Add => a + b,
            Arith::Sub => a - b,
            Arith::Mul => a * b,
            Arith::Div | Arith::Rem if b == 0.0 => return None,
            Arith::Div => a / b,
            Arith::Rem => a % b,
        }))
    }
}

fn boolean(b: Option<bool>) -> Value {
    b.map_or(Value::Null, Value::Bool)
}

/// Truth value for `AND`/`OR`/`NOT`: anything but a boolean is unknown.
fn truth(v: &Value) -> Option<bool> {
    v.as_bool()
}

/// `=`: numbers numerically, strings and booleans exactly; `null` on either side is
/// unknown; anything else (mixed types, arrays, objects) is not equal.
pub(super) fn equal(a: &Value, b: &Value) -> Option<bool> {
    match (a, b) {
        (Value::Null, _) | (_, Value::Null) => None,
        (Value::Number(_), Value::Number(_)) => {
            Some(Num::of(a)?.cmp(Num::of(b)?) == Some(Ordering::Equal))
        }
        (Value::String(x), Value::String(y)) => Some(x == y),
        (Value::Bool(x), Value::Bool(y)) => Some(x == y),
        _ => Some(false),
    }
}

/// Order of two numbers or two strings (byte-wise); anything else is not comparable.
pub(super) fn order(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => Num::of(a)?.cmp(Num::of(b)?),
        (Value::String(x), Value::String(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        _ => None,
    }
}

fn compare(op: Cmp, a: &Value, b: &Value) -> Option<bool> {
    match op {
        Cmp::Eq => equal(a, b),
        Cmp::Ne => equal(a, b).map(|e| !e),
        // Booleans, arrays and objects have no order, and null is unknown.
        _ if a.is_null() || b.is_null() => None,
        Cmp::Lt => order(a, b).map(Ordering::is_lt),
        Cmp::Le => order(a, b).map(Ordering::is_le),
        Cmp::Gt => order(a, b).map(Ordering::is_gt),
        Cmp::Ge => order(a, b).map(Ordering::is_ge),
    }
}

/// A field path: nested objects; a missing step or a non-object is `null`.
fn lookup<'a>(msg: &'a Value, path: &[String]) -> &'a Value {
    let mut cur = msg;
    for segment in path {
        match cur.as_object().and_then(|o| o.get(segment)) {
            Some(v) => cur = v,
            None => return &NULL,
        }
    }
    cur
}

/// One element of a `LIKE` pattern.
#[derive(Clone, Copy, PartialEq)]
enum Pat {
    /// `%`
    Any,
    /// `_`
    One,
    Char(char),
}

impl Default for Eval {
    fn default() -> Eval {
        Eval { fuel: EVAL_FUEL }
    }
}

impl Eval {
    /// Takes `n` units of fuel; false (and the tank emptied) if there were not enough.
    fn spend(&mut self, n: usize) -> bool {
        match self.fuel.checked_sub(n) {
            Some(left) => {
                self.fuel = left;
                true
            }
            None => {
                self.fuel = 0;
                false
            }
        }
    }

    /// Whether `e` is exactly `true` (the rule for `WHERE` and `HAVING`).
    pub(super) fn holds(&mut self, e: &Expr, s: &Scope<'_>) -> bool {
        *self.eval(e, s) == Value::Bool(true)
    }

    pub(super) fn eval<'a>(&mut self, e: &'a Expr, s: &Scope<'a>) -> Cow<'a, Value> {
        if !self.spend(1) {
            return Cow::Borrowed(&NULL);
        }
        let owned = match e {
            Expr::Lit(v) => return Cow::Borrowed(v),
            Expr::Path(p) => return Cow::Borrowed(lookup(s.msg, p)),
            Expr::Column(n) => return Cow::Borrowed(s.columns.get(*n).unwrap_or(&NULL)),
            Expr::Agg(n) => return Cow::Borrowed(s.aggs.get(*n).unwrap_or(&NULL)),
            Expr::Neg(a) => match Num::of(&self.eval(a, s)) {
                Some(Num::Int(i)) => i
                    .checked_neg()
                    .map_or_else(|| Num::Float(-Num::Int(i).float()).value(), Value::from),
                Some(Num::Float(f)) => Num::Float(-f).value(),
                None => Value::Null,
            },
            Expr::Not(a) => boolean(truth(&self.eval(a, s)).map(|b| !b)),
            Expr::And(a, b) => {
                let l = truth(&self.eval(a, s));
                if l == Some(false) {
                    return Cow::Owned(Value::Bool(false));
                }
                match (l, truth(&self.eval(b, s))) {
                    (_, Some(false)) => Value::Bool(false),
                    (Some(true), Some(true)) => Value::Bool(true),
                    _ => Value::Null,
                }
            }
            Expr::Or(a, b) => {
                let l = truth(&self.eval(a, s));
                if l == Some(true) {
                    return Cow::Owned(Value::Bool(true));
                }
                match (l, truth(&self.eval(b, s))) {
                    (_, Some(true)) => Value::Bool(true),
                    (Some(false), Some(false)) => Value::Bool(false),
                    _ => Value::Null,
                }
            }
            Expr::Cmp(op, a, b) => {
                let (a, b) = (self.eval(a, s), self.eval(b, s));
                if !self.spend(text_len(&a).min(text_len(&b))) {
                    return Cow::Borrowed(&NULL);
                }
                boolean(compare(*op, &a, &b))
            }
            Expr::Arith(op, a, b) => {
                let (a, b) = (self.eval(a, s), self.eval(b, s));
                match (Num::of(&a), Num::of(&b)) {
                    (Some(x), Some(y)) => x.arith(*op, y).map_or(Value::Null, Num::value),
                    _ => Value::Null,
                }
            }
            Expr::IsNull(a, negated) => Value::Bool(self.eval(a, s).is_null() != *negated),
            Expr::Like(a, p, negated) => {
                let (a, p) = (self.eval(a, s), self.eval(p, s));
                match (a.as_str(), p.as_str()) {
                    (Some(text), Some(pattern)) => {
                        boolean(self.like(text, pattern).map(|m| m != *negated))
                    }
                    _ => Value::Null,
                }
            }
            Expr::In(a, list, negated) => {
                let a = self.eval(a, s);
                let mut found = Some(false);
                for item in list {
                    match equal(&a, &self.eval(item, s)) {
                        Some(true) => {
                            found = Some(true);
                            break;
                        }
                        Some(false) => {}
                        None => found = None,
                    }
                }
                boolean(found.map(|f| f != *negated))
            }
            Expr::Between(a, low, high, negated) => {
                let a = self.eval(a, s);
                let ge = compare(Cmp::Ge, &a, &self.eval(low, s));
                let le = compare(Cmp::Le, &a, &self.eval(high, s));
                let within = match (ge, le) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                };
                boolean(within.map(|w| w != *negated))
            }
            Expr::Call(f, args) => self.call(*f, args, s),
        };
        Cow::Owned(owned)
    }

    fn call<'a>(&mut self, f: Scalar, args: &'a [Expr], s: &Scope<'a>) -> Value {
        match f {
            Scalar::Coalesce => {
                for a in args {
                    let v = self.eval(a, s);
                    if !v.is_null() {
                        return v.into_owned();
                    }
                }
                Value::Null
            }
            Scalar::Concat => {
                let mut out = String::new();
                for a in args {
                    let v = self.eval(a, s);
                    let before = out.len();
                    match &*v {
                        Value::String(t) => out.push_str(t),
                        Value::Number(n) => {
                            let _ = write!(out, "{n}");
                        }
                        Value::Bool(b) => {
                            let _ = write!(out, "{b}");
                        }
                        Value::Null | Value::Array(_) | Value::Object(_) => return Value::Null,
                    }
                    if !self.spend(out.len() - before) {
                        return Value::Null;
                    }
                }
                Value::String(out)
            }
            Scalar::Lower | Scalar::Upper | Scalar::Length => {
                let v = args.first().map(|a| self.eval(a, s));
                let Some(text) = v.as_deref().and_then(Value::as_str) else {
                    return Value::Null;
                };
                if !self.spend(text.len()) {
                    return Value::Null;
                }
                match f {
                    Scalar::Lower => Value::String(text.to_lowercase()),
                    Scalar::Upper => Value::String(text.to_uppercase()),
                    _ => Value::from(text.chars().count()),
                }
            }
            Scalar::Abs => {
                let v = args.first().map(|a| self.eval(a, s));
                match v.as_deref().and_then(Num::of) {
                    Some(Num::Int(i)) => i.checked_abs().map_or_else(
                        || Num::Float(Num::Int(i).float().abs()).value(),
                        Value::from,
                    ),
                    Some(Num::Float(x)) => Num::Float(x.abs()).value(),
                    None => Value::Null,
                }
            }
        }
    }

    /// Whole-string `LIKE`: `%` any run, `_` one character, `\x` the character `x`.
    /// Case-sensitive. `None` when the match would cost more than the fuel left.
    fn like(&mut self, text: &str, pattern: &str) -> Option<bool> {
        if !self.spend(text.len() + pattern.len()) {
            return None;
        }
        let mut pat = Vec::new();
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            pat.push(match c {
                '%' => Pat::Any,
                '_' => Pat::One,
                '\\' => Pat::Char(chars.next().unwrap_or('\\')),
                c => Pat::Char(c),
            });
        }
        let text: Vec<char> = text.chars().collect();
        // Greedy match, backtracking only to the last `%` (linear per attempt).
        let (mut t, mut p) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while let Some(&c) = text.get(t) {
            if !self.spend(1) {
                return None;
            }
            match pat.get(p) {
                Some(Pat::One) => (t, p) = (t + 1, p + 1),
                Some(Pat::Char(x)) if *x == c => (t, p) = (t + 1, p + 1),
                Some(Pat::Any) => {
                    star = Some((p + 1, t));
                    p += 1;
                }
                _ => match star {
                    Some((after, from)) => {
                        star = Some((after, from + 1));
                        (t, p) = (from + 1, after);
                    }
                    None => return Some(false),
                },
            }
        }
        Some(pat[p.min(pat.len())..].iter().all(|x| *x == Pat::Any))
    }
}

/// Length of a string value (what comparing it costs); 0 for anything else.
fn text_len(v: &Value) -> usize {
    v.as_str().map_or(0, str::len)
}

/// A text key with one value per equivalence class of [`equal`] extended to arrays and
/// objects (structural, key order ignored): `1` and `1.0` give the same key. Used for
/// `GROUP BY` and `COUNT(DISTINCT …)`.
pub(super) fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push('n'),
        Value::Bool(b) => out.push(if *b { 't' } else { 'f' }),
        Value::Number(_) => match Num::of(v) {
            Some(Num::Int(i)) => {
                let _ = write!(out, "{i}");
            }
            Some(Num::Float(f)) => {
                // An integral float equals the integer (`1.0 = 1`).
                #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
                let int = (f.fract() == 0.0 && f.abs() < 9.0e18).then_some(f as i64);
                match int {
                    Some(i) => {
                        let _ = write!(out, "{i}");
                    }
                    None => {
                        let _ = write!(out, "{f:e}");
                    }
                }
            }
            None => out.push('n'),
        },
        Value::String(s) => {
            out.push_str(&serde_json::to_string(s).unwrap_or_default());
        }
        Value::Array(items) => {
            out.push('[');
            for i in items {
                canonical(i, out);
                out.push(',');
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for k in keys {
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push(':');
                canonical(&map[k], out);
                out.push(',');
            }
            out.push('}');
        }
    }
}

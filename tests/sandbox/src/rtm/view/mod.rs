//! Views (stream SQL): the `filter` (or `view`) of a subscribe, a `SELECT` that picks,
//! reshapes or aggregates the messages of one channel before they reach the subscriber.
//!
//! ```text
//! SELECT * | expr [[AS] alias], …  FROM channel
//!   [WHERE expr] [GROUP BY expr, …] [HAVING expr] [;]
//! ```
//!
//! Expressions: field paths (`a.b`, `` `odd key` ``), literals (`'x'` and `"x"` are both
//! strings, numbers, `TRUE`/`FALSE`/`NULL`), `+ - * / %`, `= == != <> < <= > >=`,
//! `AND OR NOT`, `IS [NOT] NULL`, `[NOT] LIKE`, `[NOT] IN (…)`, `[NOT] BETWEEN`, the
//! scalar functions `CONCAT LOWER UPPER LENGTH ABS COALESCE` and the aggregates
//! `COUNT(*) COUNT(x) COUNT(DISTINCT x) SUM AVG MIN MAX MERGE(*)`. Keywords and function
//! names are case-insensitive; field and channel names are not.
//!
//! Two kinds of view (see [`ActiveView`]):
//! - **simple** (no aggregate, `GROUP BY` or `HAVING`): each channel message that is a
//!   JSON object and passes `WHERE` gives one result, sent at once;
//! - **aggregated**: the messages of each `period` (1–60 s, default 1) are folded into
//!   groups, and when the period ends one data PDU carries a row per group, in the
//!   order the groups first appeared. An empty window sends nothing.
//!
//! Returned messages: `SELECT *` gives the message unchanged (byte for byte for a
//! simple view); a select list gives an object with one key per item, in select-list
//! order: the alias if any, else the field path as written (`a.b` is the one key
//! `"a.b"`), else the item's source text, trimmed (`COUNT(*)`, `count(*)`). A missing
//! field is `null`. Non-object messages (strings, numbers, arrays, …) are dropped by
//! every view.
//!
//! Errors come at subscribe time only: `invalid_filter` with the reason
//! `Invalid filter: <what>`, where a malformed query says what the parser expected
//! (`Invalid filter: expected SELECT`) and a well-formed query using something this
//! engine does not do says `Invalid filter: <construct> is not supported` (`ORDER BY`,
//! `JOIN`, an unknown function, an aggregate in `WHERE`, …). At run time a type
//! problem makes the expression `null`, never an error.
//!
//! Choices where the real service's behaviour is not known:
//! - no string↔number coercion (`n = '5'` does not match `{"n":5}`); `1 = 1.0`; values
//!   of different types are unequal and unordered; anything compared with `null` is
//!   unknown, and `WHERE` keeps a message only when it is exactly `true`;
//! - `LIKE` is case-sensitive and matches the whole string; `\%`, `\_` are literal;
//! - arithmetic is on numbers only (integers stay integers unless they overflow, `/`
//!   gives a float, dividing by zero gives `null`); `+` does not join strings;
//! - `WHERE` and select expressions see the message's fields only; in `GROUP BY` a bare
//!   name that is a select alias means that item's expression; in `HAVING` a bare name
//!   that is a select item's key means that column;
//! - a non-aggregated column of an aggregated view (and `SELECT *` there) takes its
//!   value from the group's last message;
//! - aggregates skip `null`s (except `COUNT(*)`); `MIN`/`MAX` compare numbers and
//!   strings (numbers first) and skip other values; `SUM` stays an integer while it can;
//!   `AVG` is a float; `MERGE(*)` is the union of the group's messages' top-level keys,
//!   later messages winning;
//! - windows are tumbling, aligned to the `subscribe/ok`, and hold the messages the
//!   server processes during them (history replayed at subscribe time falls into the
//!   first); a data PDU's position is just after the last message the window consumed;
//!   unsubscribing or replacing the subscription discards the open window;
//! - a window whose rows do not fit one data PDU (100 messages or 64 KiB, the bounds of
//!   every data PDU of this server, kept so that small clients can take them) goes out
//!   in several PDUs, all with the window's position;
//! - `period` on a simple view is accepted and ignored.
//!
//! Bounds, so that a client cannot make the server grow or spin: a query is at most
//! [`MAX_QUERY_BYTES`] long and nests at most [`MAX_DEPTH`] levels; evaluating one
//! message (or one group's row) costs at most [`EVAL_FUEL`] units of work, past which
//! the rest evaluates to `null`; and a window closes early, emitting what it has, once
//! it holds [`MAX_GROUPS`] groups or [`MAX_WINDOW_BYTES`] of kept messages.

mod aggregate;
mod ast;
pub(crate) mod clock;
mod eval;
mod lexer;
mod parser;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::message::Message as Stored;
use aggregate::{Fill, Window};
use ast::{Query, Select};
use eval::{Eval, Scope};

/// Longest query accepted, in bytes.
pub(crate) const MAX_QUERY_BYTES: usize = 4096;
/// Deepest nesting of an expression (parentheses, operators, function calls).
pub(crate) const MAX_DEPTH: usize = 32;
/// Groups one window holds at most before it closes early.
pub(crate) const MAX_GROUPS: usize = 1000;
/// Bytes of kept messages (plus distinct values and group keys) one window holds at
/// most before it closes early.
pub(crate) const MAX_WINDOW_BYTES: usize = 4 << 20;
/// Work allowed for one message or one row: one unit per expression node and per byte
/// of string handled.
pub(crate) const EVAL_FUEL: usize = 1 << 22;
/// Window length when a subscribe gives no `period`.
pub(crate) const DEFAULT_PERIOD: Duration = Duration::from_secs(1);
/// Longest `period`, in seconds.
pub(crate) const MAX_PERIOD_SECS: u64 = 60;

/// Why a query was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ViewError {
    kind: ErrorKind,
    detail: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ErrorKind {
    /// The text is not stream SQL.
    Syntax,
    /// Well-formed SQL that stream SQL does not have.
    Unsupported,
    /// Over one of the bounds.
    Limit,
}

impl ViewError {
    fn syntax(detail: impl Into<String>) -> ViewError {
        ViewError {
            kind: ErrorKind::Syntax,
            detail: detail.into(),
        }
    }

    fn unsupported(construct: impl Into<String>) -> ViewError {
        ViewError {
            kind: ErrorKind::Unsupported,
            detail: construct.into(),
        }
    }

    fn limit(detail: impl Into<String>) -> ViewError {
        ViewError {
            kind: ErrorKind::Limit,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for ViewError {
    /// The `reason` of the `invalid_filter` error.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ErrorKind::Syntax | ErrorKind::Limit => write!(f, "Invalid filter: {}", self.detail),
            ErrorKind::Unsupported => {
                write!(f, "Invalid filter: {} is not supported", self.detail)
            }
        }
    }
}

/// A channel message as a view sees it: the stored message (its JSON and, for CBOR
/// readers, its CBOR) and its parsed value.
#[derive(Clone, Debug)]
pub(crate) struct Message {
    pub raw: Arc<Stored>,
    pub value: Value,
}

impl Message {
    /// Parses a stored message (validated when published; anything else reads as
    /// `null`, which every view drops).
    pub(crate) fn parse(raw: &Arc<Stored>) -> Message {
        Message {
            raw: Arc::clone(raw),
            value: serde_json::from_str(raw.json()).unwrap_or(Value::Null),
        }
    }
}

/// One returned message.
#[derive(Clone, Debug)]
pub(crate) enum Row {
    /// A message passed through whole (`SELECT *`, or a plain subscription).
    Message(Message),
    /// The select list's columns, in order.
    Columns(Vec<(String, Value)>),
}

impl Row {
    /// The message sent to the client: a message passed through whole goes as it was
    /// published (a CBOR one keeps its byte strings for CBOR readers).
    pub(crate) fn into_message(self) -> Arc<Stored> {
        match self {
            Row::Message(m) => m.raw,
            Row::Columns(_) => Arc::new(Stored::from_json(&self.json())),
        }
    }

    /// The JSON text sent to the client.
    pub(crate) fn json(&self) -> String {
        match self {
            Row::Message(m) => m.raw.json().to_string(),
            Row::Columns(cols) => {
                let mut out = String::from("{");
                for (i, (k, v)) in cols.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::to_string(k).unwrap_or_default());
                    out.push(':');
                    out.push_str(&v.to_string());
                }
                out.push('}');
                out
            }
        }
    }

    /// The value, for comparing results (`only: value_changes`; key order ignored).
    pub(crate) fn value(&self) -> Value {
        match self {
            Row::Message(m) => m.value.clone(),
            Row::Columns(cols) => Value::Object(cols.iter().cloned().collect::<Map<_, _>>()),
        }
    }
}

/// A parsed, checked view.
#[derive(Debug)]
pub(crate) struct View {
    query: Query,
}

impl View {
    /// Parses `text`; the error is the `reason` of an `invalid_filter` reply.
    pub(crate) fn parse(text: &str) -> Result<View, ViewError> {
        parser::parse(text).map(|query| View { query })
    }

    /// The channel after `FROM`.
    pub(crate) fn channel(&self) -> &str {
        &self.query.channel
    }

    /// Whether results come per window rather than per message.
    pub(crate) fn aggregated(&self) -> bool {
        self.query.aggregated()
    }

    /// The result of a simple view for one message, `None` if the view drops it.
    fn select(&self, msg: Message) -> Option<Row> {
        if !msg.value.is_object() {
            return None;
        }
        let mut eval = Eval::default();
        if let Some(w) = &self.query.filter {
            let scope = Scope {
                msg: &msg.value,
                aggs: &[],
                columns: &[],
            };
            if !eval.holds(w, &scope) {
                return None;
            }
        }
        project(&self.query, &mut eval, msg, &[])
    }
}

/// The row of `msg` (a group's last message, with the group's aggregate results), or
/// `None` when `HAVING` rejects it.
fn project(q: &Query, eval: &mut Eval, msg: Message, aggs: &[Value]) -> Option<Row> {
    let values: Vec<Value> = match &q.select {
        Select::All => Vec::new(),
        Select::Items(items) => {
            let scope = Scope {
                msg: &msg.value,
                aggs,
                columns: &[],
            };
            items
                .iter()
                .map(|i| eval.eval(&i.expr, &scope).into_owned())
                .collect()
        }
    };
    if let Some(h) = &q.having {
        let scope = Scope {
            msg: &msg.value,
            aggs,
            columns: &values,
        };
        if !eval.holds(h, &scope) {
            return None;
        }
    }
    match &q.select {
        Select::All => Some(Row::Message(msg)),
        Select::Items(items) => Some(Row::Columns(
            items
                .iter()
                .zip(values)
                .filter(|(i, _)| !i.shadowed)
                .map(|(i, v)| (i.name.clone(), v))
                .collect(),
        )),
    }
}

/// A view as one subscription runs it.
#[derive(Debug)]
pub(crate) struct ActiveView {
    view: View,
    windowing: Option<Windowing>,
}

/// The open window of an aggregated view.
#[derive(Debug)]
struct Windowing {
    window: Window,
    period: Duration,
    /// Tells this view's entries in the [`clock::Schedule`] from stale ones.
    serial: u64,
    /// Sequence number of the last channel message consumed since the window opened.
    last: Option<u64>,
}

impl ActiveView {
    /// Runs `view`; an aggregated one gets windows of `period`, `serial` naming it in
    /// the window schedule.
    pub(crate) fn new(view: View, period: Duration, serial: u64) -> ActiveView {
        let windowing = view.aggregated().then(|| Windowing {
            window: Window::default(),
            period,
            serial,
            last: None,
        });
        ActiveView { view, windowing }
    }

    /// `(serial, period)` of an aggregated view.
    pub(crate) fn windowing(&self) -> Option<(u64, Duration)> {
        self.windowing.as_ref().map(|w| (w.serial, w.period))
    }

    /// Takes channel message `seq`. Returns the rows to send now and the sequence
    /// number of the last message they account for: a simple view's result, or the
    /// rows of a window that had to close early.
    pub(crate) fn consume(&mut self, seq: u64, msg: Message) -> Option<(u64, Vec<Row>)> {
        let Some(w) = &mut self.windowing else {
            return self.view.select(msg).map(|row| (seq, vec![row]));
        };
        w.last = Some(seq);
        match w.window.add(&self.view.query, msg) {
            Fill::Open => None,
            Fill::Full => self.close_window(),
        }
    }

    /// Closes the open window of an aggregated view: its rows, if any, and the sequence
    /// number of the last message it consumed. A new window opens at once.
    pub(crate) fn close_window(&mut self) -> Option<(u64, Vec<Row>)> {
        let w = self.windowing.as_mut()?;
        let last = w.last.take()?;
        let rows = w.window.close(&self.view.query);
        (!rows.is_empty()).then_some((last, rows))
    }
}

#[cfg(test)]
mod tests;

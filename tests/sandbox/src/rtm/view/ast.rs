//! The parsed query: expressions with aggregate calls lifted out into a list (so that
//! a window keeps one accumulator per call), and names already resolved.

use serde_json::Value;

/// A parsed and checked `SELECT`.
#[derive(Debug)]
pub(super) struct Query {
    pub channel: String,
    pub select: Select,
    pub filter: Option<Expr>,
    pub group_by: Vec<Expr>,
    pub having: Option<Expr>,
    /// Every aggregate call of the select list and `HAVING`; [`Expr::Agg`] indexes it.
    pub aggs: Vec<AggCall>,
}

impl Query {
    /// Aggregated: results come per window, not per message.
    pub(super) fn aggregated(&self) -> bool {
        !self.group_by.is_empty() || self.having.is_some() || !self.aggs.is_empty()
    }
}

#[derive(Debug)]
pub(super) enum Select {
    /// `SELECT *`: the message itself.
    All,
    Items(Vec<Item>),
}

/// One select item with the key it gets in the returned message.
#[derive(Debug)]
pub(super) struct Item {
    pub expr: Expr,
    pub name: String,
    /// Whether `name` is an explicit alias (only those are visible to `GROUP BY`).
    pub aliased: bool,
    /// A later item has the same name and wins.
    pub shadowed: bool,
}

#[derive(Clone, Debug)]
pub(super) enum Expr {
    Lit(Value),
    /// A field path in the message.
    Path(Vec<String>),
    /// The value of select item `n` of the current row (names in `HAVING`).
    Column(usize),
    /// The result of aggregate call `n` over the current group.
    Agg(usize),
    Neg(Box<Expr>),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Cmp(Cmp, Box<Expr>, Box<Expr>),
    Arith(Arith, Box<Expr>, Box<Expr>),
    IsNull(Box<Expr>, bool),
    Like(Box<Expr>, Box<Expr>, bool),
    In(Box<Expr>, Vec<Expr>, bool),
    Between(Box<Expr>, Box<Expr>, Box<Expr>, bool),
    Call(Scalar, Vec<Expr>),
}

impl Expr {
    /// Height of the expression tree (a leaf is 1).
    pub(super) fn depth(&self) -> usize {
        let children: Vec<&Expr> = match self {
            Expr::Lit(_) | Expr::Path(_) | Expr::Column(_) | Expr::Agg(_) => vec![],
            Expr::Neg(e) | Expr::Not(e) | Expr::IsNull(e, _) => vec![e],
            Expr::And(a, b) | Expr::Or(a, b) | Expr::Cmp(_, a, b) | Expr::Arith(_, a, b) => {
                vec![a, b]
            }
            Expr::Like(a, b, _) => vec![a, b],
            Expr::In(a, list, _) => std::iter::once(&**a).chain(list).collect(),
            Expr::Between(a, b, c, _) => vec![a, b, c],
            Expr::Call(_, args) => args.iter().collect(),
        };
        1 + children.into_iter().map(Expr::depth).max().unwrap_or(0)
    }

    /// Whether an aggregate call appears in it.
    pub(super) fn has_agg(&self) -> bool {
        match self {
            Expr::Agg(_) => true,
            Expr::Lit(_) | Expr::Path(_) | Expr::Column(_) => false,
            Expr::Neg(e) | Expr::Not(e) | Expr::IsNull(e, _) => e.has_agg(),
            Expr::And(a, b)
            | Expr::Or(a, b)
            | Expr::Cmp(_, a, b)
            | Expr::Arith(_, a, b)
            | Expr::Like(a, b, _) => a.has_agg() || b.has_agg(),
            Expr::In(a, list, _) => a.has_agg() || list.iter().any(Expr::has_agg),
            Expr::Between(a, b, c, _) => a.has_agg() || b.has_agg() || c.has_agg(),
            Expr::Call(_, args) => args.iter().any(Expr::has_agg),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Scalar {
    Concat,
    Lower,
    Upper,
    Length,
    Abs,
    Coalesce,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AggFn {
    /// `COUNT(*)`.
    CountAll,
    Count,
    CountDistinct,
    Sum,
    Avg,
    Min,
    Max,
    /// `MERGE(*)`.
    Merge,
}

/// An aggregate call; the argument is `None` for the `(*)` forms.
#[derive(Debug)]
pub(super) struct AggCall {
    pub func: AggFn,
    pub arg: Option<Expr>,
}

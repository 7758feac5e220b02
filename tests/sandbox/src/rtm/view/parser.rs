//! Recursive descent over the grammar of stream SQL, one function per precedence level
//! (loosest first: `OR`, `AND`, `NOT`, predicates, `+ -`, `* / %`, sign).
//!
//! The parser tells a malformed query (a syntax error) from a well-formed one that uses
//! something this engine does not do (`ORDER BY`, `JOIN`, unknown functions, …), and
//! it keeps recursion within [`MAX_DEPTH`].

use std::collections::VecDeque;

use serde_json::Value;

use super::ast::{AggCall, AggFn, Arith, Cmp, Expr, Item, Query, Scalar, Select};
use super::lexer::{Lexer, Punct, Tok, Token};
use super::{ViewError, MAX_DEPTH, MAX_QUERY_BYTES};

/// Words that cannot be bare identifiers (quote them with backticks).
const RESERVED: &[&str] = &[
    "SELECT", "FROM", "WHERE", "GROUP", "BY", "HAVING", "AS", "AND", "OR", "NOT", "IS", "NULL",
    "LIKE", "IN", "BETWEEN", "TRUE", "FALSE", "DISTINCT", "ORDER", "LIMIT", "JOIN", "UNION",
];

/// Statements other than `SELECT`, named as unsupported rather than as a syntax error.
const STATEMENTS: &[&str] = &[
    "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "TRUNCATE", "REPLACE", "WITH",
];

/// Words that may follow a complete query in SQL but are not part of stream SQL.
const CLAUSES: &[(&str, &str)] = &[
    ("ORDER", "ORDER BY"),
    ("LIMIT", "LIMIT"),
    ("OFFSET", "OFFSET"),
    ("UNION", "UNION"),
    ("INTERSECT", "INTERSECT"),
    ("EXCEPT", "EXCEPT"),
    ("JOIN", "JOIN"),
    ("INNER", "JOIN"),
    ("LEFT", "JOIN"),
    ("RIGHT", "JOIN"),
    ("FULL", "JOIN"),
    ("CROSS", "JOIN"),
    ("WINDOW", "WINDOW"),
];

/// Where aggregate calls may appear.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AggPlace {
    Allowed,
    /// Not here: the clause's name.
    Forbidden(&'static str),
    /// Inside an aggregate's argument.
    Nested,
}

pub(super) fn parse(text: &str) -> Result<Query, ViewError> {
    if text.len() > MAX_QUERY_BYTES {
        return Err(ViewError::limit(format!(
            "the query is longer than {MAX_QUERY_BYTES} bytes"
        )));
    }
    let mut p = Parser {
        lex: Lexer::new(text),
        ahead: VecDeque::new(),
        depth: 0,
        aggs: Vec::new(),
        place: AggPlace::Allowed,
    };
    p.query()
}

struct Parser<'a> {
    lex: Lexer<'a>,
    ahead: VecDeque<Token>,
    depth: usize,
    aggs: Vec<AggCall>,
    place: AggPlace,
}

fn is_word(tok: &Tok, kw: &str) -> bool {
    matches!(tok, Tok::Word(w) if w.eq_ignore_ascii_case(kw))
}

fn reserved(word: &str) -> bool {
    RESERVED.iter().any(|r| r.eq_ignore_ascii_case(word))
}

impl Parser<'_> {
    fn peek_nth(&mut self, n: usize) -> Result<&Tok, ViewError> {
        while self.ahead.len() <= n {
            let t = self.lex.next()?;
            self.ahead.push_back(t);
        }
        Ok(&self.ahead[n].tok)
    }

    fn peek(&mut self) -> Result<&Tok, ViewError> {
        self.peek_nth(0)
    }

    fn next(&mut self) -> Result<Token, ViewError> {
        match self.ahead.pop_front() {
            Some(t) => Ok(t),
            None => self.lex.next(),
        }
    }

    fn keyword(&mut self, kw: &str) -> Result<bool, ViewError> {
        let found = is_word(self.peek()?, kw);
        if found {
            self.next()?;
        }
        Ok(found)
    }

    fn punct(&mut self, p: Punct) -> Result<bool, ViewError> {
        let found = *self.peek()? == Tok::Punct(p);
        if found {
            self.next()?;
        }
        Ok(found)
    }

    fn expect_punct(&mut self, p: Punct, what: &str) -> Result<(), ViewError> {
        if self.punct(p)? {
            Ok(())
        } else {
            Err(self.unexpected(what)?)
        }
    }

    /// "expected X, found Y".
    fn unexpected(&mut self, expected: &str) -> Result<ViewError, ViewError> {
        let found = self.peek()?.describe();
        Ok(ViewError::syntax(format!(
            "expected {expected}, found {found}"
        )))
    }

    /// Where the next token starts (after whitespace).
    fn here(&mut self) -> Result<usize, ViewError> {
        self.peek()?;
        Ok(self.ahead[0].start)
    }

    fn query(&mut self) -> Result<Query, ViewError> {
        if !self.keyword("SELECT")? {
            if let Tok::Word(w) = self.peek()? {
                if let Some(s) = STATEMENTS.iter().find(|s| s.eq_ignore_ascii_case(w)) {
                    return Err(ViewError::unsupported(*s));
                }
            }
            return Err(ViewError::syntax("expected SELECT"));
        }
        if self.keyword("DISTINCT")? {
            return Err(ViewError::unsupported("SELECT DISTINCT"));
        }
        let select = if self.punct(Punct::Star)? {
            Select::All
        } else {
            let mut items = vec![self.item()?];
            while self.punct(Punct::Comma)? {
                items.push(self.item()?);
            }
            for i in 0..items.len() {
                let later = &items[i + 1..];
                let shadowed = later.iter().any(|l| l.name == items[i].name);
                items[i].shadowed = shadowed;
            }
            Select::Items(items)
        };
        if !self.keyword("FROM")? {
            return Err(self.unexpected("FROM")?);
        }
        let channel = self.channel()?;
        let filter = if self.keyword("WHERE")? {
            Some(self.clause_expr(AggPlace::Forbidden("WHERE"))?)
        } else {
            None
        };
        let mut group_by = Vec::new();
        if self.keyword("GROUP")? {
            if !self.keyword("BY")? {
                return Err(self.unexpected("BY")?);
            }
            loop {
                let e = self.clause_expr(AggPlace::Forbidden("GROUP BY"))?;
                group_by.push(resolve_group_alias(e, &select)?);
                if !self.punct(Punct::Comma)? {
                    break;
                }
            }
        }
        let having = if self.keyword("HAVING")? {
            let e = self.clause_expr(AggPlace::Allowed)?;
            Some(resolve_having(e, &select))
        } else {
            None
        };
        self.punct(Punct::Semi)?;
        match self.peek()? {
            Tok::End => {}
            Tok::Word(w) => {
                return Err(match CLAUSES.iter().find(|c| c.0.eq_ignore_ascii_case(w)) {
                    Some((_, name)) => ViewError::unsupported(*name),
                    None => self.unexpected("the end of the query")?,
                })
            }
            _ => return Err(self.unexpected("the end of the query")?),
        }
        Ok(Query {
            channel,
            select,
            filter,
            group_by,
            having,
            aggs: std::mem::take(&mut self.aggs),
        })
    }

    fn item(&mut self) -> Result<Item, ViewError> {
        let start = self.here()?;
        let expr = self.clause_expr(AggPlace::Allowed)?;
        let end = self
            .lex
            .pos
            .min(self.ahead.front().map_or(usize::MAX, |t| t.start));
        let alias = if self.keyword("AS")? {
            Some(
                self.alias()?
                    .ok_or_else(|| ViewError::syntax("expected an alias after AS"))?,
            )
        } else {
            self.alias()?
        };
        let (name, aliased) = match (alias, &expr) {
            (Some(a), _) => (a, true),
            (None, Expr::Path(segments)) => (segments.join("."), false),
            (None, _) => (self.lex.src[start..end].trim().to_owned(), false),
        };
        Ok(Item {
            expr,
            name,
            aliased,
            shadowed: false,
        })
    }

    /// An alias: a non-reserved word, a quoted identifier or a string literal.
    fn alias(&mut self) -> Result<Option<String>, ViewError> {
        let alias = match self.peek()? {
            Tok::Word(w) if !reserved(w) => w.clone(),
            Tok::Quoted(q) | Tok::Str(q) => q.clone(),
            _ => return Ok(None),
        };
        self.next()?;
        Ok(Some(alias))
    }

    fn channel(&mut self) -> Result<String, ViewError> {
        // The channel is read raw from where the lexer stands: put back what was peeked.
        if let Some(t) = self.ahead.front() {
            self.lex.pos = t.start;
            self.ahead.clear();
        }
        if self.lex.src[self.lex.pos..].trim_start().starts_with('(') {
            return Err(ViewError::unsupported("a sub-query"));
        }
        let channel = self
            .lex
            .channel()?
            .ok_or_else(|| ViewError::syntax("expected a channel name after FROM"))?;
        if self.punct(Punct::Comma)? {
            return Err(ViewError::unsupported("more than one channel in FROM"));
        }
        Ok(channel)
    }

    /// A whole expression of a clause, in which aggregates are allowed or not.
    fn clause_expr(&mut self, place: AggPlace) -> Result<Expr, ViewError> {
        let outer = std::mem::replace(&mut self.place, place);
        let e = self.expr();
        self.place = outer;
        let e = e?;
        if e.depth() > MAX_DEPTH {
            return Err(too_deep());
        }
        Ok(e)
    }

    /// Runs `f` one level deeper, failing past [`MAX_DEPTH`] (keeps the parser's own
    /// recursion bounded; the tree's height is checked once built).
    fn nested<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, ViewError>,
    ) -> Result<T, ViewError> {
        if self.depth >= MAX_DEPTH {
            return Err(too_deep());
        }
        self.depth += 1;
        let r = f(self);
        self.depth -= 1;
        r
    }

    fn expr(&mut self) -> Result<Expr, ViewError> {
        self.nested(|p| {
            let mut e = p.and_expr()?;
            while p.keyword("OR")? {
                e = Expr::Or(Box::new(e), Box::new(p.and_expr()?));
            }
            Ok(e)
        })
    }

    fn and_expr(&mut self) -> Result<Expr, ViewError> {
        let mut e = self.not_expr()?;
        while self.keyword("AND")? {
            e = Expr::And(Box::new(e), Box::new(self.not_expr()?));
        }
        Ok(e)
    }

    fn not_expr(&mut self) -> Result<Expr, ViewError> {
        if self.keyword("NOT")? {
            return self.nested(|p| Ok(Expr::Not(Box::new(p.not_expr()?))));
        }
        self.predicate()
    }

    fn predicate(&mut self) -> Result<Expr, ViewError> {
        let left = self.additive()?;
        let cmp = match self.peek()? {
            Tok::Punct(Punct::Eq) => Some(Cmp::Eq),
            Tok::Punct(Punct::Ne) => Some(Cmp::Ne),
            Tok::Punct(Punct::Lt) => Some(Cmp::Lt),
            Tok::Punct(Punct::Le) => Some(Cmp::Le),
            Tok::Punct(Punct::Gt) => Some(Cmp::Gt),
            Tok::Punct(Punct::Ge) => Some(Cmp::Ge),
            _ => None,
        };
        if let Some(cmp) = cmp {
            self.next()?;
            let right = self.additive()?;
            return Ok(Expr::Cmp(cmp, Box::new(left), Box::new(right)));
        }
        if self.keyword("IS")? {
            let negated = self.keyword("NOT")?;
            if !self.keyword("NULL")? {
                return Err(self.unexpected("NULL")?);
            }
            return Ok(Expr::IsNull(Box::new(left), negated));
        }
        let negated = is_word(self.peek()?, "NOT")
            && ["LIKE", "IN", "BETWEEN"]
                .iter()
                .any(|k| matches!(self.peek_nth(1), Ok(t) if is_word(t, k)));
        if negated {
            self.next()?;
        }
        let left = Box::new(left);
        if self.keyword("LIKE")? {
            if self.keyword("ESCAPE")? {
                return Err(ViewError::unsupported("ESCAPE"));
            }
            let pattern = self.additive()?;
            if self.keyword("ESCAPE")? {
                return Err(ViewError::unsupported("LIKE … ESCAPE"));
            }
            return Ok(Expr::Like(left, Box::new(pattern), negated));
        }
        if self.keyword("IN")? {
            self.expect_punct(Punct::LParen, "'(' after IN")?;
            if is_word(self.peek()?, "SELECT") {
                return Err(ViewError::unsupported("a sub-query"));
            }
            let mut list = vec![self.expr()?];
            while self.punct(Punct::Comma)? {
                list.push(self.expr()?);
            }
            self.expect_punct(Punct::RParen, "')'")?;
            return Ok(Expr::In(left, list, negated));
        }
        if self.keyword("BETWEEN")? {
            let low = self.additive()?;
            if !self.keyword("AND")? {
                return Err(self.unexpected("AND")?);
            }
            let high = self.additive()?;
            return Ok(Expr::Between(left, Box::new(low), Box::new(high), negated));
        }
        Ok(*left)
    }

    fn additive(&mut self) -> Result<Expr, ViewError> {
        let mut e = self.multiplicative()?;
        loop {
            let op = match self.peek()? {
                Tok::Punct(Punct::Plus) => Arith::Add,
                Tok::Punct(Punct::Minus) => Arith::Sub,
                _ => return Ok(e),
            };
            self.next()?;
            e = Expr::Arith(op, Box::new(e), Box::new(self.multiplicative()?));
        }
    }

    fn multiplicative(&mut self) -> Result<Expr, ViewError> {
        let mut e = self.unary()?;
        loop {
            let op = match self.peek()? {
                Tok::Punct(Punct::Star) => Arith::Mul,
                Tok::Punct(Punct::Slash) => Arith::Div,
                Tok::Punct(Punct::Percent) => Arith::Rem,
                _ => return Ok(e),
            };
            self.next()?;
            e = Expr::Arith(op, Box::new(e), Box::new(self.unary()?));
        }
    }

    fn unary(&mut self) -> Result<Expr, ViewError> {
        if self.punct(Punct::Minus)? {
            return self.nested(|p| {
                Ok(match p.unary()? {
                    // A negative literal stays a literal (and i64::MIN fits).
                    Expr::Lit(Value::Number(n)) if n.as_i64().is_some_and(|i| i > 0) => {
                        Expr::Lit(Value::from(-n.as_i64().unwrap_or(0)))
                    }
                    e => Expr::Neg(Box::new(e)),
                })
            });
        }
        if self.punct(Punct::Plus)? {
            return self.nested(Self::unary);
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, ViewError> {
        let token = self.next()?;
        match token.tok {
            Tok::Int(i) => Ok(Expr::Lit(Value::from(i))),
            Tok::Float(f) => Ok(Expr::Lit(
                serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
            )),
            Tok::Str(s) => Ok(Expr::Lit(Value::String(s))),
            Tok::Punct(Punct::LParen) => {
                if is_word(self.peek()?, "SELECT") {
                    return Err(ViewError::unsupported("a sub-query"));
                }
                let e = self.expr()?;
                self.expect_punct(Punct::RParen, "')'")?;
                Ok(e)
            }
            Tok::Quoted(q) => self.path(q),
            Tok::Word(w) => {
                if *self.peek()? == Tok::Punct(Punct::LParen) {
                    self.next()?;
                    return self.nested(|p| p.call(&w));
                }
                match w.to_ascii_uppercase().as_str() {
                    "TRUE" => Ok(Expr::Lit(Value::Bool(true))),
                    "FALSE" => Ok(Expr::Lit(Value::Bool(false))),
                    "NULL" => Ok(Expr::Lit(Value::Null)),
                    "CASE" => Err(ViewError::unsupported("CASE")),
                    // `group.city`: a keyword followed by a dot starts a path.
                    _ if reserved(&w) && *self.peek()? != Tok::Punct(Punct::Dot) => {
                        Err(ViewError::syntax(format!(
                            "unexpected '{w}' (quote field names that are keywords with backticks)"
                        )))
                    }
                    _ => self.path(w),
                }
            }
            other => {
                let found = other.describe();
                Err(ViewError::syntax(format!(
                    "expected an expression, found {found}"
                )))
            }
        }
    }

    /// A field path whose first segment has been read.
    fn path(&mut self, first: String) -> Result<Expr, ViewError> {
        let mut segments = vec![first];
        while self.punct(Punct::Dot)? {
            let t = self.next()?;
            segments.push(match t.tok {
                Tok::Word(w) | Tok::Quoted(w) => w,
                Tok::Int(_) => self.lex.src[t.start..t.end].to_owned(),
                other => {
                    let found = other.describe();
                    return Err(ViewError::syntax(format!(
                        "expected a field name after '.', found {found}"
                    )));
                }
            });
        }
        Ok(Expr::Path(segments))
    }

    /// A function call whose name and `(` have been read.
    fn call(&mut self, name: &str) -> Result<Expr, ViewError> {
        let upper = name.to_ascii_uppercase();
        let scalar = match upper.as_str() {
            "CONCAT" => Some((Scalar::Concat, 1, usize::MAX)),
            "LOWER" => Some((Scalar::Lower, 1, 1)),
            "UPPER" => Some((Scalar::Upper, 1, 1)),
            "LENGTH" => Some((Scalar::Length, 1, 1)),
            "ABS" => Some((Scalar::Abs, 1, 1)),
            "COALESCE" => Some((Scalar::Coalesce, 1, usize::MAX)),
            _ => None,
        };
        if let Some((f, min, max)) = scalar {
            let mut args = Vec::new();
            if !self.punct(Punct::RParen)? {
                args.push(self.expr()?);
                while self.punct(Punct::Comma)? {
                    args.push(self.expr()?);
                }
                self.expect_punct(Punct::RParen, "')'")?;
            }
            if args.len() < min || args.len() > max {
                return Err(ViewError::unsupported(format!(
                    "{upper} with {} arguments",
                    args.len()
                )));
            }
            self.no_over()?;
            return Ok(Expr::Call(f, args));
        }
        let func = match upper.as_str() {
            "COUNT" => AggFn::Count,
            "SUM" => AggFn::Sum,
            "AVG" => AggFn::Avg,
            "MIN" => AggFn::Min,
            "MAX" => AggFn::Max,
            "MERGE" => AggFn::Merge,
            _ => return Err(ViewError::unsupported(format!("the function {name}"))),
        };
        match self.place {
            AggPlace::Forbidden(clause) => {
                return Err(ViewError::unsupported(format!(
                    "an aggregate function in {clause}"
                )))
            }
            AggPlace::Nested => return Err(ViewError::unsupported("a nested aggregate function")),
            AggPlace::Allowed => {}
        }
        let (func, arg) = if self.punct(Punct::Star)? {
            if !matches!(func, AggFn::Count | AggFn::Merge) {
                return Err(ViewError::unsupported(format!("{upper}(*)")));
            }
            let func = if func == AggFn::Count {
                AggFn::CountAll
            } else {
                func
            };
            (func, None)
        } else {
            let distinct = self.keyword("DISTINCT")?;
            if func == AggFn::Merge {
                return Err(ViewError::unsupported("MERGE of an expression"));
            }
            if distinct && func != AggFn::Count {
                return Err(ViewError::unsupported(format!("DISTINCT in {upper}")));
            }
            if *self.peek()? == Tok::Punct(Punct::RParen) {
                return Err(ViewError::unsupported(format!("{upper} with 0 arguments")));
            }
            self.place = AggPlace::Nested;
            let arg = self.expr();
            self.place = AggPlace::Allowed;
            let arg = arg?;
            if self.punct(Punct::Comma)? {
                return Err(ViewError::unsupported(format!(
                    "{upper} with several arguments"
                )));
            }
            (
                if distinct { AggFn::CountDistinct } else { func },
                Some(arg),
            )
        };
        self.expect_punct(Punct::RParen, "')'")?;
        self.no_over()?;
        self.aggs.push(AggCall { func, arg });
        Ok(Expr::Agg(self.aggs.len() - 1))
    }

    fn no_over(&mut self) -> Result<(), ViewError> {
        if is_word(self.peek()?, "OVER") {
            return Err(ViewError::unsupported("OVER"));
        }
        Ok(())
    }
}

fn too_deep() -> ViewError {
    ViewError::limit(format!("expressions nest deeper than {MAX_DEPTH} levels"))
}

/// In `GROUP BY`, a bare name that is an alias of the select list stands for that
/// item's expression (`SELECT group.city AS city … GROUP BY city`).
fn resolve_group_alias(e: Expr, select: &Select) -> Result<Expr, ViewError> {
    let (Expr::Path(segments), Select::Items(items)) = (&e, select) else {
        return Ok(e);
    };
    let [name] = segments.as_slice() else {
        return Ok(e);
    };
    let Some(item) = items.iter().rev().find(|i| i.aliased && i.name == *name) else {
        return Ok(e);
    };
    if item.expr.has_agg() {
        return Err(ViewError::unsupported("an aggregate function in GROUP BY"));
    }
    Ok(item.expr.clone())
}

/// In `HAVING`, a bare name that is a select item's key means that column of the row.
fn resolve_having(e: Expr, select: &Select) -> Expr {
    let Select::Items(items) = select else {
        return e;
    };
    let column = |name: &str| items.iter().rposition(|i| i.name == name);
    map_expr(e, &|e| match e {
        Expr::Path(segments) if segments.len() == 1 => match column(&segments[0]) {
            Some(n) => Expr::Column(n),
            None => Expr::Path(segments),
        },
        other => other,
    })
}

/// Rebuilds `e` bottom-up through `f`.
fn map_expr(e: Expr, f: &dyn Fn(Expr) -> Expr) -> Expr {
    let b = |e: Box<Expr>| Box::new(map_expr(*e, f));
    let mapped = match e {
        Expr::Neg(a) => Expr::Neg(b(a)),
        Expr::Not(a) => Expr::Not(b(a)),
        Expr::IsNull(a, n) => Expr::IsNull(b(a), n),
        Expr::And(x, y) => Expr::And(b(x), b(y)),
        Expr::Or(x, y) => Expr::Or(b(x), b(y)),
        Expr::Cmp(c, x, y) => Expr::Cmp(c, b(x), b(y)),
        Expr::Arith(o, x, y) => Expr::Arith(o, b(x), b(y)),
        Expr::Like(x, y, n) => Expr::Like(b(x), b(y), n),
        Expr::In(x, list, n) => {
            Expr::In(b(x), list.into_iter().map(|e| map_expr(e, f)).collect(), n)
        }
        Expr::Between(x, y, z, n) => Expr::Between(b(x), b(y), b(z), n),
        Expr::Call(s, args) => Expr::Call(s, args.into_iter().map(|e| map_expr(e, f)).collect()),
        leaf @ (Expr::Lit(_) | Expr::Path(_) | Expr::Column(_) | Expr::Agg(_)) => leaf,
    };
    f(mapped)
}

//! Tokens of stream SQL, produced on demand: the `FROM` channel is read raw (a bare
//! channel name may hold `-` and `.`), so the parser asks for it by name instead of
//! getting it from a token stream cut in advance.

use super::ViewError;

/// One token and where it sits in the query (byte offsets), so that an unaliased
/// select item can be named after its source text.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Token {
    pub tok: Tok,
    pub start: usize,
    pub end: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
    /// A bare word: a keyword, function name or identifier (the parser decides).
    Word(String),
    /// A backtick-quoted identifier.
    Quoted(String),
    /// A string literal in single or double quotes.
    Str(String),
    Int(i64),
    Float(f64),
    Punct(Punct),
    End,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Punct {
    Star,
    Comma,
    Dot,
    LParen,
    RParen,
    Semi,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Plus,
    Minus,
    Slash,
    Percent,
}

impl Tok {
    /// How the token reads in an error message.
    pub(super) fn describe(&self) -> String {
        match self {
            Tok::Word(w) => format!("'{w}'"),
            Tok::Quoted(q) => format!("`{q}`"),
            Tok::Str(_) => "a string".to_owned(),
            Tok::Int(_) | Tok::Float(_) => "a number".to_owned(),
            Tok::Punct(_) => "a symbol".to_owned(),
            Tok::End => "the end of the query".to_owned(),
        }
    }
}

pub(super) struct Lexer<'a> {
    pub src: &'a str,
    pub pos: usize,
    /// Where the last identifier ended: a `.` right there is a path dot even when a
    /// digit follows (`a.0`), not the start of a number.
    ident_end: Option<usize>,
}

impl<'a> Lexer<'a> {
    pub(super) fn new(src: &'a str) -> Lexer<'a> {
        Lexer {
            src,
            pos: 0,
            ident_end: None,
        }
    }

    fn rest(&self) -> &'a str {
        self.src.get(self.pos..).unwrap_or("")
    }

    fn skip_space(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start_matches([' ', '\t', '\r', '\n']).len();
    }

    pub(super) fn next(&mut self) -> Result<Token, ViewError> {
        self.skip_space();
        let start = self.pos;
        let rest = self.rest();
        let Some(c) = rest.chars().next() else {
            return Ok(Token {
                tok: Tok::End,
                start,
                end: start,
            });
        };
        let after_ident = self.ident_end == Some(start);
        self.ident_end = None;
        let next_digit = rest[c.len_utf8()..].starts_with(|d: char| d.is_ascii_digit());
        let tok = match c {
            '`' => {
                let text = self.quoted('`')?;
                self.ident_end = Some(self.pos);
                Tok::Quoted(text)
            }
            '\'' | '"' => Tok::Str(self.quoted(c)?),
            c if c.is_ascii_digit() || (c == '.' && next_digit && !after_ident) => self.number(),
            c if c.is_ascii_alphabetic() || c == '_' => {
                let len = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
                    .unwrap_or(rest.len());
                self.pos += len;
                self.ident_end = Some(self.pos);
                Tok::Word(rest[..len].to_owned())
            }
            _ => {
                let two = rest.get(..2).unwrap_or("");
                let (p, len) = match two {
                    "==" => (Punct::Eq, 2),
                    "!=" | "<>" => (Punct::Ne, 2),
                    "<=" => (Punct::Le, 2),
                    ">=" => (Punct::Ge, 2),
                    _ => match c {
                        '*' => (Punct::Star, 1),
                        ',' => (Punct::Comma, 1),
                        '.' => (Punct::Dot, 1),
                        '(' => (Punct::LParen, 1),
                        ')' => (Punct::RParen, 1),
                        ';' => (Punct::Semi, 1),
                        '=' => (Punct::Eq, 1),
                        '<' => (Punct::Lt, 1),
                        '>' => (Punct::Gt, 1),
                        '+' => (Punct::Plus, 1),
                        '-' => (Punct::Minus, 1),
                        '/' => (Punct::Slash, 1),
                        '%' => (Punct::Percent, 1),
                        _ => return Err(ViewError::syntax(format!("unexpected character '{c}'"))),
                    },
                };
                self.pos += len;
                Tok::Punct(p)
            }
        };
        Ok(Token {
            tok,
            start,
            end: self.pos,
        })
    }

    /// The text between `q` delimiters: a doubled delimiter stands for one, and in
    /// string literals `\\`, `\'`, `\"`, `\n`, `\t` are escapes (any other backslash is
    /// kept, so that `'\%'` reaches `LIKE` as an escaped `%`).
    fn quoted(&mut self, q: char) -> Result<String, ViewError> {
        let mut out = String::new();
        let mut chars = self.rest()[1..].char_indices();
        let body = self.pos + 1;
        while let Some((i, c)) = chars.next() {
            if c == q {
                if self.src[body + i + 1..].starts_with(q) {
                    chars.next();
                    out.push(q);
                    continue;
                }
                self.pos = body + i + 1;
                return Ok(out);
            }
            if c == '\\' && q != '`' {
                match chars.next() {
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    Some((_, e @ ('\\' | '\'' | '"'))) => out.push(e),
                    Some((_, other)) => {
                        out.push('\\');
                        out.push(other);
                    }
                    None => break,
                }
                continue;
            }
            out.push(c);
        }
        let what = if q == '`' { "identifier" } else { "string" };
        Err(ViewError::syntax(format!("unterminated quoted {what}")))
    }

    /// `123`, `1.5`, `.5`, `2e3`: an integer if it has neither point nor exponent and
    /// fits in i64, a float otherwise.
    fn number(&mut self) -> Tok {
        let bytes = self.rest().as_bytes();
        let digits = |from: usize| {
            from + bytes
                .get(from..)
                .unwrap_or(&[])
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count()
        };
        let mut len = digits(0);
        let mut float = false;
        if bytes.get(len) == Some(&b'.') {
            float = true;
            len = digits(len + 1);
        }
        if matches!(bytes.get(len), Some(b'e' | b'E')) {
            let sign = usize::from(matches!(bytes.get(len + 1), Some(b'+' | b'-')));
            let exp = digits(len + 1 + sign);
            if exp > len + 1 + sign {
                float = true;
                len = exp;
            }
        }
        let text = &self.rest()[..len];
        self.pos += len;
        match text.parse::<i64>() {
            Ok(i) if !float => Tok::Int(i),
            _ => Tok::Float(text.parse().unwrap_or(f64::INFINITY)),
        }
    }

    /// The channel after `FROM`: a backtick-quoted name, or a run of characters other
    /// than whitespace, `` ` ``, `,`, `;`, `(` and `)`. `None` if there is none.
    pub(super) fn channel(&mut self) -> Result<Option<String>, ViewError> {
        self.skip_space();
        let rest = self.rest();
        if rest.starts_with('`') {
            return self.quoted('`').map(Some);
        }
        let len = rest
            .find(|c: char| c.is_whitespace() || "`,;()".contains(c))
            .unwrap_or(rest.len());
        self.pos += len;
        Ok((len > 0).then(|| rest[..len].to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Tok> {
        let mut lx = Lexer::new(src);
        let mut out = Vec::new();
        loop {
            let t = lx.next().unwrap().tok;
            if t == Tok::End {
                return out;
            }
            out.push(t);
        }
    }

    #[test]
    fn tokens() {
        use Punct::*;
        let w = |s: &str| Tok::Word(s.to_owned());
        let s = |s: &str| Tok::Str(s.to_owned());
        let table: &[(&str, Vec<Tok>)] = &[
            ("a.b", vec![w("a"), Tok::Punct(Dot), w("b")]),
            ("a.0", vec![w("a"), Tok::Punct(Dot), Tok::Int(0)]),
            (
                "`x y`.z",
                vec![Tok::Quoted("x y".into()), Tok::Punct(Dot), w("z")],
            ),
            (
                ".5 1.5 2e3 7 1e",
                vec![
                    Tok::Float(0.5),
                    Tok::Float(1.5),
                    Tok::Float(2000.0),
                    Tok::Int(7),
                    Tok::Int(1),
                    w("e"),
                ],
            ),
            ("99999999999999999999", vec![Tok::Float(1e20)]),
            (
                "'it''s' \"a\\\"b\" 'x\\%' 'n\\n'",
                vec![s("it's"), s("a\"b"), s("x\\%"), s("n\n")],
            ),
            ("`a``b`", vec![Tok::Quoted("a`b".into())]),
            (
                "= == != <> < <= > >=",
                vec![
                    Tok::Punct(Eq),
                    Tok::Punct(Eq),
                    Tok::Punct(Ne),
                    Tok::Punct(Ne),
                    Tok::Punct(Lt),
                    Tok::Punct(Le),
                    Tok::Punct(Gt),
                    Tok::Punct(Ge),
                ],
            ),
            ("a$1_", vec![w("a$1_")]),
            (
                "count(*)",
                vec![
                    w("count"),
                    Tok::Punct(LParen),
                    Tok::Punct(Star),
                    Tok::Punct(RParen),
                ],
            ),
        ];
        for (src, want) in table {
            assert_eq!(&toks(src), want, "{src}");
        }
        for bad in ["'open", "`open", "a # b", "\"x\\"] {
            let mut lx = Lexer::new(bad);
            let err = std::iter::from_fn(|| Some(lx.next())).find_map(|r| match r {
                Err(e) => Some(Some(e)),
                Ok(Token { tok: Tok::End, .. }) => Some(None),
                Ok(_) => None,
            });
            assert!(matches!(err, Some(Some(_))), "{bad}");
        }
    }

    #[test]
    fn channels() {
        for (src, want) in [
            (" test-channel where", Some("test-channel")),
            ("example.in;", Some("example.in")),
            ("`Meetup RSVP`", Some("Meetup RSVP")),
            ("", None),
            ("(select", None),
        ] {
            let mut lx = Lexer::new(src);
            assert_eq!(lx.channel().unwrap().as_deref(), want, "{src}");
        }
    }
}

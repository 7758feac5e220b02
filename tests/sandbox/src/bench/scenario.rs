//! Just enough understanding of a scenario to emulate it: which language it is, whether
//! its brackets balance (the emulator's "type check"), its pools, loop time and rate,
//! what it prints and which metrics it declares. Not a BDL parser.

/// The two scenario languages the real server accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Language {
    /// First line `#!benchDL`.
    Bdl,
    /// Erlang terms: a list, possibly after comments.
    Erlang,
}

/// What one `print` statement prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PrintArg {
    /// A string literal.
    Literal(String),
    /// `resource(name)`: the content of an included file.
    Resource(String),
    /// Anything else, printed as written.
    Other(String),
}

/// One worker pool.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Pool {
    /// Number of workers.
    pub(crate) size: u64,
    /// Loop iterations per second per worker.
    pub(crate) rate: f64,
}

/// The facts the emulator uses.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Scenario {
    /// The language, or `None` when it is neither.
    pub(crate) language: Option<Language>,
    /// Worker pools (at least one).
    pub(crate) pools: Vec<Pool>,
    /// Scenario seconds of the first `loop(time = …)`.
    pub(crate) loop_secs: Option<f64>,
    /// `print` statements.
    pub(crate) prints: Vec<PrintArg>,
    /// `include_resource(name, "path", type)`: (name, path).
    pub(crate) resources: Vec<(String, String)>,
    /// Histogram metrics the workers declare.
    pub(crate) histograms: Vec<String>,
}

/// Loop rate when a scenario gives none (the real dummy worker would spin much faster).
const DEFAULT_RATE: f64 = 10.0;

impl Scenario {
    /// Analyses a script.
    pub(crate) fn analyze(script: &str) -> Scenario {
        let language = language(script);
        let sizes = values_after(script, "size");
        let rates: Vec<f64> = values_after(script, "rate")
            .into_iter()
            .map(|(n, unit)| match unit.as_deref() {
                Some("rpm") => n / 60.0,
                Some("rph") => n / 3600.0,
                _ => n,
            })
            .collect();
        let mut pools: Vec<Pool> = sizes
            .iter()
            .enumerate()
            .map(|(i, (n, _))| Pool {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // clamped first
                size: n.clamp(1.0, 1_000_000.0) as u64,
                rate: rates.get(i).or(rates.first()).copied().unwrap_or(DEFAULT_RATE),
            })
            .collect();
        if pools.is_empty() {
            pools.push(Pool {
                size: 1,
                rate: rates.first().copied().unwrap_or(DEFAULT_RATE),
            });
        }
        let loop_secs = values_after(script, "time")
            .into_iter()
            .next()
            .map(|(n, unit)| match unit.as_deref() {
                Some("ms") => n / 1000.0,
                Some("min" | "m") => n * 60.0,
                Some("h") => n * 3600.0,
                _ => n,
            });
        let mut prints: Vec<PrintArg> = calls(script, "print(", ')')
            .into_iter()
            .map(|a| print_arg(&a))
            .collect();
        prints.extend(
            calls(script, "{print,", '}')
                .into_iter()
                .map(|a| print_arg(&a)),
        );
        let mut resources: Vec<(String, String)> = calls(script, "include_resource(", ')')
            .into_iter()
            .filter_map(|a| resource(&a))
            .collect();
        resources.extend(
            calls(script, "{include_resource,", '}')
                .into_iter()
                .filter_map(|a| resource(&a)),
        );
        let mut histograms = Vec::new();
        if !prints.is_empty() || script.contains("dummy_worker") {
            histograms.push("dummy".to_owned());
        }
        if script.contains("latency") {
            histograms.push("latency".to_owned());
        }
        Scenario {
            language,
            pools,
            loop_secs,
            prints,
            resources,
            histograms,
        }
    }
}

fn language(script: &str) -> Option<Language> {
    let first_line = script.lines().next().unwrap_or("");
    if first_line.trim_end() == "#!benchDL" {
        return Some(Language::Bdl);
    }
    let mut rest = script;
    loop {
        rest = rest.trim_start();
        if rest.starts_with('%') {
            rest = rest.split_once('\n').map_or("", |(_, r)| r);
        } else {
            return rest.starts_with('[').then_some(Language::Erlang);
        }
    }
}

/// The emulator's type check: the language is known and brackets balance outside
/// strings and comments. `Err` carries the real server's reason shape, a location
/// followed by words.
pub(crate) fn check(script: &str) -> Result<Language, String> {
    let Some(lang) = language(script) else {
        return Err(
            "1: syntax error: the script is neither BDL (#!benchDL) nor a list of Erlang terms"
                .to_owned(),
        );
    };
    let comment = if lang == Language::Bdl { '#' } else { '%' };
    let mut stack: Vec<(char, usize)> = Vec::new();
    for (n, line) in script.lines().enumerate() {
        let line_no = n + 1;
        let mut chars = line.chars();
        let mut quote: Option<char> = None;
        while let Some(c) = chars.next() {
            if let Some(q) = quote {
                if c == '\\' {
                    chars.next();
                } else if c == q {
                    quote = None;
                }
                continue;
            }
            match c {
                '"' | '\'' => quote = Some(c),
                c if c == comment => break,
                '(' | '[' | '{' => stack.push((c, line_no)),
                ')' | ']' | '}' => {
                    let want = match c {
                        ')' => '(',
                        ']' => '[',
                        _ => '{',
                    };
                    match stack.pop() {
                        Some((open, _)) if open == want => {}
                        _ => return Err(format!("{line_no}: syntax error before: '{c}'")),
                    }
                }
                _ => {}
            }
        }
    }
    match stack.pop() {
        Some((open, line)) => Err(format!("{line}: unclosed '{open}'")),
        None => Ok(lang),
    }
}

/// Numbers written after `key =` (BDL) or `{key,` (Erlang), with the unit word that
/// follows them: `time = 10 sec` and `{time, {10, sec}}` both give `(10.0, "sec")`.
fn values_after(script: &str, key: &str) -> Vec<(f64, Option<String>)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = script.get(from..).and_then(|s| s.find(key)) {
        let at = from + found;
        from = at + key.len();
        let before_ok = script
            .get(..at)
            .and_then(|s| s.chars().next_back())
            .is_none_or(|c| !is_ident(c));
        let rest = script.get(from..).unwrap_or("");
        let rest = rest.trim_start();
        let Some(rest) = rest.strip_prefix('=').or_else(|| rest.strip_prefix(',')) else {
            continue;
        };
        if !before_ok {
            continue;
        }
        let rest = rest.trim_start();
        let rest = rest.strip_prefix('{').unwrap_or(rest).trim_start();
        let num: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let Ok(value) = num.parse::<f64>() else {
            continue;
        };
        let after = rest.get(num.len()..).unwrap_or("").trim_start();
        let after = after.strip_prefix(',').unwrap_or(after).trim_start();
        let unit: String = after.chars().take_while(|c| is_ident(*c)).collect();
        out.push((value, (!unit.is_empty()).then_some(unit)));
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The argument text of every `opener … close` call, brackets and strings respected.
fn calls(script: &str, opener: &str, close: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = script.get(from..).and_then(|s| s.find(opener)) {
        let start = from + found + opener.len();
        from = start;
        let before_ok = script
            .get(..start - opener.len())
            .and_then(|s| s.chars().next_back())
            .is_none_or(|c| !is_ident(c));
        if !before_ok {
            continue;
        }
        let mut depth = 0usize;
        let mut quote = false;
        let mut escaped = false;
        let mut arg = String::new();
        for c in script.get(start..).unwrap_or("").chars() {
            if quote {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    quote = false;
                }
                arg.push(c);
                continue;
            }
            match c {
                '"' => quote = true,
                '(' | '[' | '{' => depth += 1,
                c2 if c2 == close && depth == 0 => break,
                ')' | ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
            arg.push(c);
        }
        out.push(arg.trim().to_owned());
    }
    out
}

fn print_arg(arg: &str) -> PrintArg {
    if let Some(lit) = arg.strip_prefix('"').and_then(|a| a.strip_suffix('"')) {
        return PrintArg::Literal(lit.replace("\\n", "\n").replace("\\\"", "\""));
    }
    if let Some(name) = arg
        .strip_prefix("resource(")
        .and_then(|a| a.strip_suffix(')'))
    {
        return PrintArg::Resource(name.trim().to_owned());
    }
    if let Some(name) = arg
        .strip_prefix("{resource,")
        .and_then(|a| a.strip_suffix('}'))
    {
        return PrintArg::Resource(name.trim().to_owned());
    }
    PrintArg::Other(arg.to_owned())
}

fn resource(arg: &str) -> Option<(String, String)> {
    let mut pieces = arg.splitn(3, ',');
    let name = pieces.next()?.trim().to_owned();
    let path = pieces.next()?.trim().trim_matches('"').to_owned();
    Some((name, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = "#!benchDL\ninclude_resource(text_resource, \"data.txt\", text)\npool(size = 2,\n     worker_type = dummy_worker):\n        loop(time = 10 sec,\n             rate = 1 rps):\n            print(resource(text_resource))\n";

    #[test]
    fn small_bdl() {
        let s = Scenario::analyze(SMALL);
        assert_eq!(s.language, Some(Language::Bdl));
        assert_eq!(s.pools, vec![Pool { size: 2, rate: 1.0 }]);
        assert_eq!(s.loop_secs, Some(10.0));
        assert_eq!(s.prints, vec![PrintArg::Resource("text_resource".into())]);
        assert_eq!(
            s.resources,
            vec![("text_resource".into(), "data.txt".into())]
        );
        assert_eq!(s.histograms, vec!["dummy".to_owned()]);
        assert_eq!(check(SMALL), Ok(Language::Bdl));
    }

    #[test]
    fn erlang_terms() {
        let script = "% comment\n[{pool, [{size, 3}, {worker_type, dummy_worker}],\n  [{loop, [{time, {500, ms}}, {rate, {120, rpm}}], [{print, \"FOO\"}]}]}].\n";
        let s = Scenario::analyze(script);
        assert_eq!(s.language, Some(Language::Erlang));
        assert_eq!(s.pools, vec![Pool { size: 3, rate: 2.0 }]);
        assert_eq!(s.loop_secs, Some(0.5));
        assert_eq!(s.prints, vec![PrintArg::Literal("FOO".into())]);
        assert!(check(script).is_ok());
    }

    #[test]
    fn rejects() {
        assert!(check("this is not a benchmark scenario\n").is_err());
        assert_eq!(
            check("#!benchDL\npool(size = 1:\n"),
            Err("2: unclosed '('".to_owned())
        );
        assert!(check("#!benchDL\nprint(\"a\"))\n").is_err());
    }
}

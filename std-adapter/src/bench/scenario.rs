//! Scenario files as the official client uploads them: the script itself as the `bench`
//! part and every local file it names with `include_resource(...)` as an `include` part,
//! read relative to the script's directory (URLs are fetched by the server, not uploaded).

use std::io;
use std::path::{Path, PathBuf};

/// A scenario read from disk with its includes, ready for `/start` or `/typecheck`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    /// The script's file name (the `bench` part's filename; the server's default
    /// benchmark name).
    pub name: String,
    /// The script text.
    pub script: Vec<u8>,
    /// `(path as written in the script, content)` for every local include.
    pub includes: Vec<(String, Vec<u8>)>,
}

impl Scenario {
    /// A scenario from memory, with no includes.
    ///
    /// ```
    /// let s = benchlink_std::bench::Scenario::new("a.bdl", "#!benchDL\n");
    /// assert!(s.includes.is_empty());
    /// ```
    pub fn new(name: impl Into<String>, script: impl Into<Vec<u8>>) -> Scenario {
        Scenario {
            name: name.into(),
            script: script.into(),
            includes: Vec::new(),
        }
    }

    /// Reads `path` and the local files it includes (relative to its directory).
    ///
    /// ```no_run
    /// let s = benchlink_std::bench::Scenario::from_file("examples/scenarios/hello.bdl")?;
    /// assert_eq!(s.includes[0].0, "data.txt");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_file(path: impl AsRef<Path>) -> io::Result<Scenario> {
        let path = path.as_ref();
        let script = std::fs::read(path)?;
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let mut includes = Vec::new();
        for include in include_paths(&String::from_utf8_lossy(&script)) {
            let content = std::fs::read(dir.join(&include))
                .map_err(|e| io::Error::new(e.kind(), format!("include {include:?}: {e}")))?;
            includes.push((include, content));
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Scenario {
            name,
            script,
            includes,
        })
    }
}

/// The local resource paths a scenario includes, in order, without duplicates: the second
/// argument of BDL `include_resource(name, "path", type)` and of Erlang-terms
/// `{include_resource, name, "path", type}`. Paths with a URL scheme are left out.
///
/// ```
/// use benchlink_std::bench::scenario::include_paths;
/// let bdl = "#!benchDL\ninclude_resource(r, \"data.txt\", text)\ninclude_resource(u, \"https://x/y\", json)\n";
/// assert_eq!(include_paths(bdl), ["data.txt"]);
/// let erl = "[{include_resource, r, \"a.json\", json}].";
/// assert_eq!(include_paths(erl), ["a.json"]);
/// ```
pub fn include_paths(script: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = script;
    while let Some(at) = rest.find("include_resource") {
        rest = &rest[at + "include_resource".len()..];
        // The path is the first string literal after the resource name.
        let Some(args) = rest.trim_start().strip_prefix(['(', ',']) else {
            continue;
        };
        let Some(open) = args.find('"') else { break };
        if args[..open].contains([')', '}']) {
            continue;
        }
        let lit = &args[open + 1..];
        let Some(close) = lit.find('"') else { break };
        let path = &lit[..close];
        if !path.contains("://") && !out.iter().any(|p| p == path) {
            out.push(path.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::include_paths;

    #[test]
    fn ignores_mentions_without_a_path() {
        assert!(include_paths("# include_resource is great\nprint(\"x\")").is_empty());
        assert_eq!(
            include_paths("include_resource(a, \"x\", t) include_resource(b, \"x\", t)"),
            ["x"]
        );
    }
}

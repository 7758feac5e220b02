//! The official MZBench client's token file: `$MZBENCHTOKEN`, else
//! `~/.config/mzbench/token`. The first matching line wins: a line of two or more words
//! whose first word is the host string exactly as given (`localhost:4800`, no scheme)
//! yields its second word; a line of exactly one word yields that word. Text after `#` is
//! a comment.

use std::path::PathBuf;

/// The environment variable naming the token file.
pub const TOKEN_FILE_ENV: &str = "MZBENCHTOKEN";

/// Where the official client looks for its token file.
pub fn default_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(TOKEN_FILE_ENV) {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config/mzbench/token"))
}

/// The token the file's `contents` give for `authority` (the host string without scheme).
///
/// ```
/// use benchlink_std::bench::token::lookup;
/// let file = "other:1 AAA\nlocalhost:48555 TOKEN123   # per-host token\n";
/// assert_eq!(lookup(file, "localhost:48555"), Some("TOKEN123"));
/// assert_eq!(lookup("JUSTONE # any host\n", "h:1"), Some("JUSTONE"));
/// assert_eq!(lookup(file, "nowhere:1"), None);
/// ```
pub fn lookup<'a>(contents: &'a str, authority: &str) -> Option<&'a str> {
    contents.lines().find_map(|line| {
        let line = line.split('#').next().unwrap_or_default();
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some(only), None, _) => Some(only),
            (Some(host), Some(token), _) if host == authority => Some(token),
            _ => None,
        }
    })
}

/// Reads the token for `authority` from the default token file, if there is one.
pub fn read_default(authority: &str) -> Option<String> {
    let contents = std::fs::read_to_string(default_path()?).ok()?;
    lookup(&contents, authority).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::lookup;

    #[test]
    fn first_matching_line_wins() {
        let f = "# comment only\n\nh:1 FIRST\nh:1 SECOND\n";
        assert_eq!(lookup(f, "h:1"), Some("FIRST"));
        assert_eq!(lookup("GLOBAL\nh:1 SPECIFIC\n", "h:1"), Some("GLOBAL"));
        assert_eq!(lookup("h:1 T\r\n", "h:1"), Some("T"));
        assert_eq!(lookup("", "h:1"), None);
    }
}

//! Where the benchmark server is: the official client's `host` string (`host:port`, or a
//! URL with `http://` / `https://`), read the way `mzbench` reads it.

use std::fmt;

/// The environment variable the official CLI reads its default host from.
pub const HOST_ENV: &str = "MZBENCH_API_HOST";

/// A parsed server address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerAddress {
    /// `https://` was given.
    pub tls: bool,
    /// Host name or IP address (IPv6 in brackets, as in a URL).
    pub host: String,
    /// TCP port (default 80 for http, 443 for https, as a URL without a port means).
    pub port: u16,
    /// Path prefix for servers behind a reverse proxy (`""` or `/prefix`, no trailing `/`).
    pub prefix: String,
    /// The host string without its scheme, exactly as given: the `Host` header value and
    /// the key the official token file uses (`localhost:4800`).
    pub authority: String,
}

/// Why a host string was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressError(String);

impl fmt::Display for AddressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid server address: {}", self.0)
    }
}

impl std::error::Error for AddressError {}

impl ServerAddress {
    /// Parses `localhost:4800`, `http://host:port`, `https://host`, `[::1]:4800` or
    /// `http://host:port/prefix`.
    ///
    /// ```
    /// use benchlink_std::bench::ServerAddress;
    /// let a = ServerAddress::parse("localhost:4800").unwrap();
    /// assert_eq!((a.tls, a.host.as_str(), a.port), (false, "localhost", 4800));
    /// let b = ServerAddress::parse("https://bench.example.com").unwrap();
    /// assert_eq!((b.tls, b.port), (true, 443));
    /// ```
    pub fn parse(s: &str) -> Result<ServerAddress, AddressError> {
        let bad = |why: &str| AddressError(format!("{s:?}: {why}"));
        let s = s.trim();
        let (tls, rest) = if let Some(r) = s.strip_prefix("https://") {
            (true, r)
        } else {
            (false, s.strip_prefix("http://").unwrap_or(s))
        };
        let (authority, prefix) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(bad("no host"));
        }
        let default_port = if tls { 443 } else { 80 };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let end = v6.find(']').ok_or_else(|| bad("unclosed '['"))?;
            let (addr, after) = v6.split_at(end);
            let port = match after.strip_prefix("]:") {
                Some(p) => p.parse().map_err(|_| bad("bad port"))?,
                None if after == "]" => default_port,
                None => return Err(bad("junk after ']'")),
            };
            (format!("[{addr}]"), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), p.parse().map_err(|_| bad("bad port"))?),
                None => (authority.to_owned(), default_port),
            }
        };
        if host.is_empty() || host.contains(|c: char| c.is_whitespace() || c == '@') {
            return Err(bad("bad host"));
        }
        Ok(ServerAddress {
            tls,
            host,
            port,
            prefix: prefix.trim_end_matches('/').to_owned(),
            authority: authority.to_owned(),
        })
    }
}

impl fmt::Display for ServerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { "https" } else { "http" };
        write!(f, "{scheme}://{}{}", self.authority, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_the_official_client_accepts() {
        let a = ServerAddress::parse("http://127.0.0.1:4800/api/").unwrap();
        assert_eq!(a.host, "127.0.0.1");
        assert_eq!(a.port, 4800);
        assert_eq!(a.prefix, "/api");
        assert_eq!(a.authority, "127.0.0.1:4800");
        assert_eq!(a.to_string(), "http://127.0.0.1:4800/api");
        let b = ServerAddress::parse("[::1]:9").unwrap();
        assert_eq!((b.host.as_str(), b.port), ("[::1]", 9));
        assert_eq!(ServerAddress::parse("localhost").unwrap().port, 80);
    }

    #[test]
    fn rejects_nonsense() {
        for s in ["", "http://", "host:port", "[::1", "a b:1", "[::1]x"] {
            assert!(ServerAddress::parse(s).is_err(), "{s}");
        }
    }
}

//! Query strings, encoded exactly as the official MZBench client does (Python's
//! `urlencode`, i.e. `quote_plus`): ASCII letters, digits and `_.-~` pass through, a space
//! becomes `+`, every other byte becomes `%XX` with upper-case hex. So `a,b c` is written
//! `a%2Cb+c` and `x@y.z` is written `x%40y.z`, byte for byte what the server has always seen.

use super::{Cursor, EncodeError};

/// Something that knows its own query parameters: every typed benchmark-server request.
///
/// ```
/// use benchlink_core::http::{Cursor, EncodeQuery, QueryWriter, EncodeError};
/// struct Status { id: u64 }
/// impl EncodeQuery for Status {
///     fn encode_query(&self, q: &mut QueryWriter<'_, '_>) -> Result<(), EncodeError> {
///         q.pair_u64("id", self.id)?;
///         q.pair("wait", "false")
///     }
/// }
/// let mut buf = [0u8; 32];
/// let mut c = Cursor::new(&mut buf);
/// QueryWriter::write(&mut c, &Status { id: 7 }).unwrap();
/// assert_eq!(c.written(), b"?id=7&wait=false");
/// ```
pub trait EncodeQuery {
    /// Writes every parameter, in order, through `q`.
    fn encode_query(&self, q: &mut QueryWriter<'_, '_>) -> Result<(), EncodeError>;
}

/// No parameters at all: the query (and its `?`) is left out.
impl EncodeQuery for () {
    fn encode_query(&self, _: &mut QueryWriter<'_, '_>) -> Result<(), EncodeError> {
        Ok(())
    }
}

/// A plain list of pairs, in order.
impl EncodeQuery for [(&str, &str)] {
    fn encode_query(&self, q: &mut QueryWriter<'_, '_>) -> Result<(), EncodeError> {
        self.iter().try_for_each(|(k, v)| q.pair(k, v))
    }
}

/// Writes `key=value` pairs after the path: `?` before the first, `&` between the others,
/// nothing at all when there are none.
#[derive(Debug)]
pub struct QueryWriter<'c, 'b> {
    out: &'c mut Cursor<'b>,
    pairs: usize,
}

impl<'c, 'b> QueryWriter<'c, 'b> {
    /// Writes the whole query of `params` into `out`.
    pub fn write(
        out: &'c mut Cursor<'b>,
        params: &(impl EncodeQuery + ?Sized),
    ) -> Result<(), EncodeError> {
        let mut q = QueryWriter { out, pairs: 0 };
        params.encode_query(&mut q)
    }

    /// How many pairs were written so far.
    pub fn pairs(&self) -> usize {
        self.pairs
    }

    fn key(&mut self, key: &str) -> Result<(), EncodeError> {
        self.out.push(if self.pairs == 0 { b"?" } else { b"&" })?;
        self.pairs += 1;
        encode(self.out, key)?;
        self.out.push(b"=")
    }

    /// `key=value`, both percent-encoded.
    pub fn pair(&mut self, key: &str, value: &str) -> Result<(), EncodeError> {
        self.key(key)?;
        encode(self.out, value)
    }

    /// `key=<decimal>`.
    pub fn pair_u64(&mut self, key: &str, value: u64) -> Result<(), EncodeError> {
        self.key(key)?;
        self.out.push_u64(value)
    }

    /// `key=true` or `key=false`.
    pub fn pair_bool(&mut self, key: &str, value: bool) -> Result<(), EncodeError> {
        self.pair(key, if value { "true" } else { "false" })
    }

    /// `key=<parts joined by sep>`, encoded as one value (so `["h1","h2"]` joined by `,`
    /// becomes `h1%2Ch2`, as the official client sends a host list).
    pub fn pair_joined<'s>(
        &mut self,
        key: &str,
        parts: impl IntoIterator<Item = &'s str>,
        sep: &str,
    ) -> Result<(), EncodeError> {
        self.key(key)?;
        for (i, part) in parts.into_iter().enumerate() {
            if i > 0 {
                encode(self.out, sep)?;
            }
            encode(self.out, part)?;
        }
        Ok(())
    }
}

/// Percent-encodes `s` the way `quote_plus` does.
pub fn encode(out: &mut Cursor<'_>, s: &str) -> Result<(), EncodeError> {
    for &b in s.as_bytes() {
        let escaped = super::percent_escape(b);
        let one = [b];
        out.push(match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' => &one,
            b' ' => b"+",
            _ => &escaped,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;

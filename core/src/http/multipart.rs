//! Streaming `multipart/form-data` for `POST /start`, laid out byte for byte as the
//! official client (requests/urllib3) was recorded sending it:
//!
//! ```text
//! --<boundary>\r\n
//! Content-Disposition: form-data; name="<name>"; filename="<filename>"\r\n
//! Content-Type: <content type>\r\n
//! \r\n
//! <content>\r\n          (one such part per file)
//! --<boundary>--\r\n
//! ```
//!
//! Only part heads and delimiters pass through a buffer; the caller streams each file's
//! content itself (from flash, a file or memory), so a body never has to fit in RAM. Lengths
//! are known up front, so [`Boundary::content_length`] gives the exact `Content-Length`.
//!
//! Names and filenames are escaped as urllib3's (and browsers') HTML5 rules do rather than
//! rejected, so a file the official client can upload can be uploaded here too and the
//! server sees the same bytes: `"` becomes `%22`, `\` becomes `\\`, and control bytes
//! 0x00–0x1F except ESC become `%XX`. Non-ASCII UTF-8 passes through unchanged.

use super::{Cursor, EncodeError};

/// Number of characters in a boundary, as the official client uses.
pub const BOUNDARY_LEN: usize = 30;

const ALPHANUMERIC: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A multipart boundary of [`BOUNDARY_LEN`] ASCII alphanumerics, and the writer of
/// everything in a multipart body that depends on it.
///
/// Core has no random number generator, so the caller provides the randomness. With 30
/// random alphanumerics (about 178 bits) a collision with file content is not a practical
/// concern, and content is not scanned for it.
///
/// ```
/// use benchlink_core::http::{Boundary, Cursor};
/// let boundary = Boundary::from_random([7u8; 30]);
/// let mut buf = [0u8; 80];
/// let mut out = Cursor::new(&mut buf);
/// boundary.content_type(&mut out).unwrap();
/// assert_eq!(out.written(), b"multipart/form-data; boundary=777777777777777777777777777777");
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Boundary([u8; BOUNDARY_LEN]);

impl core::fmt::Debug for Boundary {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("Boundary").field(&self.as_str()).finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Boundary {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "Boundary({=str})", self.as_str())
    }
}

/// One file part: its form field name, file name, content type and exact content length.
///
/// ```
/// use benchlink_core::http::Part;
/// let bench = Part { name: "bench", filename: "small.bdl", content_type: "application/octet-stream", len: 208 };
/// assert_eq!(bench.len, 208);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Part<'a> {
    /// Form field name: `bench` or `include` for `/start`.
    pub name: &'a str,
    /// File name: the script's base name for `bench`, the path as written in the scenario
    /// for `include`.
    pub filename: &'a str,
    /// Content type of the part (the server ignores it; the official client guesses it
    /// from the file name).
    pub content_type: &'a str,
    /// Exact number of content bytes the caller will stream for this part.
    pub len: u64,
}

impl Part<'_> {
    /// The media type the official client (Python's `mimetypes`) gives a part's file
    /// name, by its extension in any case; `application/octet-stream` for the rest (it
    /// matters only to humans reading the upload: the server ignores it). One table for
    /// every benchmark client.
    ///
    /// ```
    /// use benchlink_core::http::Part;
    /// assert_eq!(Part::content_type("data.CSV"), "text/csv");
    /// assert_eq!(Part::content_type("hello.bdl"), "application/octet-stream");
    /// ```
    pub fn content_type(filename: &str) -> &'static str {
        let ext = filename.rsplit_once('.').map_or("", |(_, e)| e);
        const TYPES: [(&str, &str); 6] = [
            ("txt", "text/plain"),
            ("json", "application/json"),
            ("csv", "text/csv"),
            ("html", "text/html"),
            ("htm", "text/html"),
            ("xml", "application/xml"),
        ];
        TYPES
            .iter()
            .find(|(e, _)| ext.eq_ignore_ascii_case(e))
            .map_or("application/octet-stream", |(_, t)| t)
    }
}

impl Boundary {
    /// A boundary made from 30 random bytes, each mapped onto the 62 alphanumerics (the
    /// slight modulo bias does not matter for a boundary).
    ///
    /// ```
    /// use benchlink_core::http::Boundary;
    /// let b = Boundary::from_random([0, 61, 62, 255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    /// assert!(b.as_str().starts_with("0z07"));
    /// ```
    pub fn from_random(random: [u8; BOUNDARY_LEN]) -> Self {
        Boundary(random.map(|r| {
            ALPHANUMERIC
                .get(usize::from(r) % ALPHANUMERIC.len())
                .copied()
                .unwrap_or(b'0')
        }))
    }

    /// A given boundary, e.g. to reproduce a recorded request; it must be exactly
    /// [`BOUNDARY_LEN`] ASCII alphanumerics.
    ///
    /// ```
    /// use benchlink_core::http::{Boundary, EncodeError};
    /// assert!(Boundary::new("nojnAe9aq4zz5V9C5ahghcv4Dtx2V0").is_ok());
    /// assert_eq!(Boundary::new("short"), Err(EncodeError::InvalidValue { field: "boundary" }));
    /// ```
    pub fn new(boundary: &str) -> Result<Self, EncodeError> {
        let bytes: [u8; BOUNDARY_LEN] = boundary
            .as_bytes()
            .try_into()
            .map_err(|_| EncodeError::InvalidValue { field: "boundary" })?;
        if !bytes.iter().all(u8::is_ascii_alphanumeric) {
            return Err(EncodeError::InvalidValue { field: "boundary" });
        }
        Ok(Boundary(bytes))
    }

    /// The boundary text.
    ///
    /// ```
    /// use benchlink_core::http::Boundary;
    /// assert_eq!(Boundary::from_random([10; 30]).as_str(), "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    /// ```
    pub fn as_str(&self) -> &str {
        // Always ASCII alphanumerics by construction.
        core::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// Writes the `Content-Type` header value `multipart/form-data; boundary=<boundary>`
    /// ([`RequestHead`](super::RequestHead) does this for [`Body::Multipart`](super::Body)).
    ///
    /// ```
    /// use benchlink_core::http::{Boundary, Cursor};
    /// let mut buf = [0u8; 80];
    /// let mut out = Cursor::new(&mut buf);
    /// Boundary::new("nojnAe9aq4zz5V9C5ahghcv4Dtx2V0").unwrap().content_type(&mut out).unwrap();
    /// assert_eq!(out.written(), b"multipart/form-data; boundary=nojnAe9aq4zz5V9C5ahghcv4Dtx2V0");
    /// ```
    pub fn content_type(&self, out: &mut Cursor<'_>) -> Result<(), EncodeError> {
        out.push(b"multipart/form-data; boundary=")?;
        out.push(&self.0)
    }

    /// The exact length of the whole body with these parts, for `Content-Length`: it is
    /// computed by running the very code that writes the part heads, so it cannot drift.
    ///
    /// ```
    /// use benchlink_core::http::{Boundary, Part};
    /// let b = Boundary::new("nojnAe9aq4zz5V9C5ahghcv4Dtx2V0").unwrap();
    /// let parts = [
    ///     Part { name: "bench", filename: "small.bdl", content_type: "application/octet-stream", len: 208 },
    ///     Part { name: "include", filename: "data.txt", content_type: "text/plain", len: 12 },
    /// ];
    /// assert_eq!(b.content_length(&parts), Ok(535));
    /// ```
    pub fn content_length(&self, parts: &[Part<'_>]) -> Result<u64, EncodeError> {
        let mut count = Counter(0);
        for part in parts {
            self.write_part_head(part, &mut count)?;
            count.put(b"\r\n")?;
            count.0 = count
                .0
                .checked_add(part.len)
                .ok_or(EncodeError::InvalidValue { field: "len" })?;
        }
        self.write_closing(&mut count)?;
        Ok(count.0)
    }

    /// Writes the delimiter and headers that open `part`; the caller then sends exactly
    /// `part.len` content bytes followed by [`Boundary::part_end`].
    ///
    /// ```
    /// use benchlink_core::http::{Boundary, Cursor, Part};
    /// let b = Boundary::from_random([10; 30]);
    /// let mut buf = [0u8; 160];
    /// let mut out = Cursor::new(&mut buf);
    /// let part = Part { name: "include", filename: "say \"hi\".txt", content_type: "text/plain", len: 2 };
    /// b.part_head(&part, &mut out).unwrap();
    /// assert_eq!(
    ///     out.written(),
    ///     &b"--AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\n\
    ///        Content-Disposition: form-data; name=\"include\"; filename=\"say %22hi%22.txt\"\r\n\
    ///        Content-Type: text/plain\r\n\r\n"[..]
    /// );
    /// ```
    pub fn part_head(&self, part: &Part<'_>, out: &mut Cursor<'_>) -> Result<(), EncodeError> {
        self.write_part_head(part, out)
    }

    /// Writes the `\r\n` that ends a part's content.
    ///
    /// ```
    /// use benchlink_core::http::{Boundary, Cursor};
    /// let mut buf = [0u8; 2];
    /// let mut out = Cursor::new(&mut buf);
    /// Boundary::from_random([0; 30]).part_end(&mut out).unwrap();
    /// assert_eq!(out.written(), b"\r\n");
    /// ```
    pub fn part_end(&self, out: &mut Cursor<'_>) -> Result<(), EncodeError> {
        out.push(b"\r\n")
    }

    /// Writes the closing delimiter `--<boundary>--\r\n` after the last part.
    ///
    /// ```
    /// use benchlink_core::http::{Boundary, Cursor};
    /// let mut buf = [0u8; 40];
    /// let mut out = Cursor::new(&mut buf);
    /// Boundary::from_random([10; 30]).closing(&mut out).unwrap();
    /// assert_eq!(out.written(), b"--AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA--\r\n");
    /// ```
    pub fn closing(&self, out: &mut Cursor<'_>) -> Result<(), EncodeError> {
        self.write_closing(out)
    }

    fn write_part_head(&self, part: &Part<'_>, out: &mut impl Framing) -> Result<(), EncodeError> {
        if part.content_type.bytes().any(|b| b < b' ' || b == 0x7F) {
            return Err(EncodeError::InvalidValue {
                field: "content_type",
            });
        }
        out.put(b"--")?;
        out.put(&self.0)?;
        out.put(b"\r\nContent-Disposition: form-data; name=\"")?;
        put_escaped(out, part.name)?;
        out.put(b"\"; filename=\"")?;
        put_escaped(out, part.filename)?;
        out.put(b"\"\r\nContent-Type: ")?;
        out.put(part.content_type.as_bytes())?;
        out.put(b"\r\n\r\n")
    }

    fn write_closing(&self, out: &mut impl Framing) -> Result<(), EncodeError> {
        out.put(b"--")?;
        out.put(&self.0)?;
        out.put(b"--\r\n")
    }
}

/// Where multipart framing goes: the real buffer, or a counter for `Content-Length`.
trait Framing {
    fn put(&mut self, bytes: &[u8]) -> Result<(), EncodeError>;
}

impl Framing for Cursor<'_> {
    fn put(&mut self, bytes: &[u8]) -> Result<(), EncodeError> {
        self.push(bytes)
    }
}

struct Counter(u64);

impl Framing for Counter {
    fn put(&mut self, bytes: &[u8]) -> Result<(), EncodeError> {
        let len =
            u64::try_from(bytes.len()).map_err(|_| EncodeError::InvalidValue { field: "len" })?;
        self.0 = self
            .0
            .checked_add(len)
            .ok_or(EncodeError::InvalidValue { field: "len" })?;
        Ok(())
    }
}

/// urllib3's `format_header_param_html5`: the escaping requests applies to `name` and
/// `filename`, so the server receives what it would from the official client.
fn put_escaped(out: &mut impl Framing, s: &str) -> Result<(), EncodeError> {
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let hex;
        let replacement: &[u8] = match b {
            b'"' => b"%22",
            b'\\' => b"\\\\",
            0x1B => continue,
            0..=0x1F => {
                hex = super::percent_escape(b);
                &hex
            }
            _ => continue,
        };
        out.put(bytes.get(start..i).unwrap_or_default())?;
        out.put(replacement)?;
        start = i.saturating_add(1);
    }
    out.put(bytes.get(start..).unwrap_or_default())
}

#[cfg(test)]
mod tests;

//! `multipart/form-data` bodies of `/start` and `/typecheck`, as Cowboy's multipart
//! reader splits them.

/// One part of the body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Part {
    /// The `name` of the Content-Disposition.
    pub(crate) name: String,
    /// The `filename`, present only for file parts.
    pub(crate) filename: Option<String>,
    /// The content.
    pub(crate) body: Vec<u8>,
}

/// Why a body could not be split (the real server crashes: 500).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Malformed(pub(crate) &'static str);

/// The boundary of a `multipart/form-data` Content-Type, or `None` when the type is
/// anything else (the server then answers 400 `Missing script file`).
pub(crate) fn boundary(content_type: Option<&str>) -> Option<String> {
    let ct = content_type?;
    let mut params = ct.split(';');
    let mime = params.next()?.trim();
    if !mime.eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    params.find_map(|p| {
        let (k, v) = p.split_once('=')?;
        if k.trim().eq_ignore_ascii_case("boundary") {
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v);
            (!v.is_empty()).then(|| v.to_owned())
        } else {
            None
        }
    })
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Splits a body into parts.
pub(crate) fn parse(body: &[u8], boundary: &str) -> Result<Vec<Part>, Malformed> {
    let delim = format!("--{boundary}");
    let mut pos = find(body, delim.as_bytes(), 0).ok_or(Malformed("no boundary"))? + delim.len();
    let next_delim = format!("\r\n--{boundary}");
    let mut parts = Vec::new();
    loop {
        let rest = body.get(pos..).ok_or(Malformed("truncated"))?;
        if rest.starts_with(b"--") {
            return Ok(parts);
        }
        // Skip the line end (and any transport padding) after the delimiter.
        let line_end = find(body, b"\r\n", pos).ok_or(Malformed("truncated delimiter line"))?;
        let head_start = line_end + 2;
        let head_end = find(body, b"\r\n\r\n", head_start)
            .map(|p| p + 4)
            .or_else(|| {
                body.get(head_start..)
                    .filter(|r| r.starts_with(b"\r\n"))
                    .map(|_| head_start + 2)
            })
            .ok_or(Malformed("truncated part head"))?;
        let head =
            String::from_utf8_lossy(body.get(head_start..head_end).ok_or(Malformed("head"))?)
                .into_owned();
        let end =
            find(body, next_delim.as_bytes(), head_end).ok_or(Malformed("unterminated part"))?;
        let content = body
            .get(head_end..end)
            .ok_or(Malformed("part body"))?
            .to_vec();
        let (name, filename) = disposition(&head).ok_or(Malformed("no content-disposition"))?;
        parts.push(Part {
            name,
            filename,
            body: content,
        });
        pos = end + next_delim.len();
    }
}

/// `name` and `filename` of the part's `Content-Disposition: form-data` header.
fn disposition(head: &str) -> Option<(String, Option<String>)> {
    let line = head.split("\r\n").find(|l| {
        l.split_once(':')
            .is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case("content-disposition"))
    })?;
    let (_, value) = line.split_once(':')?;
    let mut params = split_params(value);
    let kind = params.first()?.0.clone();
    if !kind.eq_ignore_ascii_case("form-data") {
        return None;
    }
    params.remove(0);
    let get = |key: &str| {
        params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .and_then(|(_, v)| v.clone())
    };
    Some((get("name")?, get("filename")))
}

/// Splits `form-data; name="a;b"; filename=x` into (key, value) pairs, honouring quotes.
fn split_params(s: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace() || *c == ';') {
            chars.next();
        }
        if chars.peek().is_none() {
            return out;
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c == ';' {
                break;
            }
            key.push(c);
            chars.next();
        }
        let mut value = None;
        if chars.peek() == Some(&'=') {
            chars.next();
            let mut v = String::new();
            if chars.peek() == Some(&'"') {
                chars.next();
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => v.extend(chars.next()),
                        c => v.push(c),
                    }
                }
            } else {
                while let Some(&c) = chars.peek() {
                    if c == ';' {
                        break;
                    }
                    v.push(c);
                    chars.next();
                }
                v = v.trim().to_owned();
            }
            value = Some(v);
        }
        out.push((key.trim().to_owned(), value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn official_client_body() {
        let b = "nojnAe9aq4zz5V9C5ahghcv4Dtx2V0";
        assert_eq!(
            boundary(Some(&format!("multipart/form-data; boundary={b}"))).as_deref(),
            Some(b)
        );
        assert_eq!(boundary(Some("text/plain")), None);
        let body = format!(
            "--{b}\r\nContent-Disposition: form-data; name=\"bench\"; filename=\"small.bdl\"\r\nContent-Type: application/octet-stream\r\n\r\n#!benchDL\nx\n\r\n--{b}\r\nContent-Disposition: form-data; name=\"include\"; filename=\"data.txt\"\r\n\r\nhello\n\r\n--{b}--\r\n"
        );
        let parts = parse(body.as_bytes(), b).unwrap_or_default();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].name, "bench");
        assert_eq!(parts[0].filename.as_deref(), Some("small.bdl"));
        assert_eq!(parts[0].body, b"#!benchDL\nx\n");
        assert_eq!(parts[1].body, b"hello\n");
        assert!(parse(b"garbage", b).is_err());
    }
}

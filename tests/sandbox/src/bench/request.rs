//! Requests read incrementally, push-style: the event loop hands over whatever bytes
//! arrived, in any split, and each byte is looked at once. The head is scanned for its
//! end only in the new bytes and parsed once complete (so a head trickled byte by byte
//! costs linear time); the body is decoded as it arrives, by Content-Length or with the
//! core's chunked decoder, into a [`Body`] charged to the shared budget.

use std::sync::Arc;

use benchlink_core::http::{Chunked, ChunkedNext};

use super::budget::{Body, Budget, Refusal};

/// Most request headers parsed.
const MAX_HEADERS: usize = 64;
/// Longest chunk-size line (with extensions) and trailer section of a chunked body.
const MAX_CHUNK_LINE: usize = 1024;
const MAX_TRAILERS: usize = 8 * 1024;

/// One parsed request.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Body,
    pub(crate) keep_alive: bool,
}

impl Request {
    /// The first header named `name` (lower case).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        find(&self.headers, name)
    }
}

fn find<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// The limits a [`Reader`] enforces.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) max_head: usize,
    pub(crate) max_body: usize,
}

/// What the bytes pushed so far amount to.
#[derive(Debug)]
pub(crate) enum Progress {
    /// More bytes are needed.
    NeedMore,
    /// A whole request; the bytes after the ones used belong to the next one.
    Request(Request),
    /// A request that cannot be served: answer with this status and close.
    Reject(u16),
}

/// How the body of the current request is framed.
#[derive(Debug)]
enum Framing {
    Length { left: usize },
    Chunked(Chunked),
}

#[derive(Debug)]
enum Phase {
    /// Reading the head; `scanned` bytes of it are known not to end it.
    Head { scanned: usize },
    /// Reading the body of a request whose head is parsed.
    Body { request: Request, framing: Framing },
}

/// Reads requests from one connection.
#[derive(Debug)]
pub(crate) struct Reader {
    phase: Phase,
    head: Vec<u8>,
    limits: Limits,
    budget: Arc<Budget>,
    /// The head asked for `100 Continue`, not answered yet.
    continue_due: bool,
    /// Bytes of body framing and data taken since the last [`Reader::take_body_bytes`].
    body_bytes: u64,
}

impl Reader {
    pub(crate) fn new(limits: Limits, budget: &Arc<Budget>) -> Reader {
        Reader {
            phase: Phase::Head { scanned: 0 },
            head: Vec::new(),
            limits,
            budget: Arc::clone(budget),
            continue_due: false,
            body_bytes: 0,
        }
    }

    /// The body bytes (as sent, framing included) taken since the last call: each byte
    /// is counted once, which is what keeps a body in tiny chunks linear.
    pub(crate) fn take_body_bytes(&mut self) -> u64 {
        std::mem::take(&mut self.body_bytes)
    }

    /// Whether a request has begun (its first byte arrived).
    pub(crate) fn started(&self) -> bool {
        !self.head.is_empty() || matches!(self.phase, Phase::Body { .. })
    }

    /// Whether the head is done and the body is being read.
    pub(crate) fn in_body(&self) -> bool {
        matches!(self.phase, Phase::Body { .. })
    }

    /// True once after a head with `Expect: 100-continue` whose body is still to come.
    pub(crate) fn take_continue(&mut self) -> bool {
        std::mem::take(&mut self.continue_due)
    }

    /// Pushes received bytes; returns how many were used and what they gave. Bytes after
    /// a complete request are not used.
    pub(crate) fn push(&mut self, input: &[u8]) -> (usize, Progress) {
        let mut used = 0;
        loop {
            let rest = input.get(used..).unwrap_or_default();
            let (n, progress) = match self.phase {
                Phase::Head { .. } => self.push_head(rest),
                Phase::Body { .. } => self.push_body(rest),
            };
            used += n;
            match progress {
                // The head just ended: go on with the body in the same input.
                Some(Progress::NeedMore) if self.in_body() && used < input.len() => {}
                Some(p) => return (used, p),
                None => {}
            }
        }
    }

    /// `None` when the phase changed and the caller should go on.
    fn push_head(&mut self, input: &[u8]) -> (usize, Option<Progress>) {
        let Phase::Head { scanned } = &mut self.phase else {
            return (0, None);
        };
        let mut used = 0;
        // Cowboy skips empty lines before a request.
        if self.head.is_empty() {
            used = input
                .iter()
                .position(|b| !matches!(b, b'\r' | b'\n'))
                .unwrap_or(input.len());
        }
        let input = input.get(used..).unwrap_or_default();
        let room = self.limits.max_head.saturating_sub(self.head.len());
        let start = self.head.len();
        let take = input.get(..room.min(input.len())).unwrap_or_default();
        // Grow by doubling but never past the limit, so an idle half-head costs little.
        if start + take.len() > self.head.capacity() {
            let target = (self.head.capacity() * 2)
                .max(start + take.len())
                .max(256)
                .min(self.limits.max_head);
            self.head.reserve_exact(target.saturating_sub(start));
        }
        self.head.extend_from_slice(take);
        // Scan only the new bytes (with three before them, for a split terminator).
        let from = (*scanned).max(start.saturating_sub(3));
        let end = head_end(&self.head, from);
        let Some(end) = end else {
            *scanned = self.head.len();
            if self.head.len() >= self.limits.max_head {
                return (used + input.len(), Some(Progress::Reject(400)));
            }
            return (used + input.len(), Some(Progress::NeedMore));
        };
        // Give back what followed the head.
        used += end - start;
        self.head.truncate(end);
        let head = std::mem::take(&mut self.head);
        match self.parse_head(&head) {
            Ok(Some(request)) => (used, Some(Progress::Request(request))),
            Ok(None) => (used, Some(Progress::NeedMore)),
            Err(status) => (used, Some(Progress::Reject(status))),
        }
    }

    /// Parses a complete head; `Ok(None)` when a body follows (the phase is then `Body`).
    fn parse_head(&mut self, head: &[u8]) -> Result<Option<Request>, u16> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(head) {
            Ok(httparse::Status::Complete(_)) => {}
            Ok(httparse::Status::Partial) | Err(_) => return Err(400),
        }
        let target = req.path.unwrap_or("/");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let version = req.version.unwrap_or(1);
        let headers: Vec<(String, String)> = req
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_ascii_lowercase(),
                    String::from_utf8_lossy(h.value).trim().to_owned(),
                )
            })
            .collect();
        let connection = find(&headers, "connection")
            .unwrap_or("")
            .to_ascii_lowercase();
        let keep_alive = if version == 0 {
            connection.contains("keep-alive")
        } else {
            !connection.contains("close")
        };
        let chunked = find(&headers, "transfer-encoding")
            .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
        let expect_continue = version == 1
            && find(&headers, "expect").is_some_and(|e| e.eq_ignore_ascii_case("100-continue"));
        let mut body = Body::new(&self.budget);
        let framing = if chunked {
            Framing::Chunked(Chunked::new(MAX_CHUNK_LINE, MAX_TRAILERS))
        } else {
            let left = match find(&headers, "content-length").map(str::parse::<usize>) {
                None => 0,
                Some(Ok(n)) => n,
                Some(Err(_)) => return Err(400),
            };
            body.expect_total(left, self.limits.max_body)
                .map_err(status)?;
            Framing::Length { left }
        };
        let request = Request {
            method: req.method.unwrap_or("GET").to_owned(),
            path: path.to_owned(),
            query: query.to_owned(),
            headers,
            body,
            keep_alive,
        };
        if matches!(framing, Framing::Length { left: 0 }) {
            self.phase = Phase::Head { scanned: 0 };
            return Ok(Some(request));
        }
        self.continue_due = expect_continue;
        self.phase = Phase::Body { request, framing };
        Ok(None)
    }

    fn push_body(&mut self, input: &[u8]) -> (usize, Option<Progress>) {
        let Phase::Body { request, framing } = &mut self.phase else {
            return (0, None);
        };
        let max = self.limits.max_body;
        let mut used = 0;
        let done = match framing {
            Framing::Length { left } => {
                let n = (*left).min(input.len());
                if let Err(r) = request.body.extend(input.get(..n).unwrap_or_default(), max) {
                    return (n, Some(Progress::Reject(status(r))));
                }
                *left -= n;
                used = n;
                *left == 0
            }
            Framing::Chunked(decoder) => loop {
                let rest = input.get(used..).unwrap_or_default();
                let (n, next) = match decoder.next(rest) {
                    Ok(step) => step,
                    Err(_) => return (used, Some(Progress::Reject(400))),
                };
                used += n;
                match next {
                    ChunkedNext::Data(len) => {
                        let data = input.get(used..used + len).unwrap_or_default();
                        if let Err(r) = request.body.extend(data, max) {
                            return (used, Some(Progress::Reject(status(r))));
                        }
                        decoder.consume(len);
                        used += len;
                    }
                    ChunkedNext::NeedMore => break false,
                    ChunkedNext::End => break true,
                }
            },
        };
        self.body_bytes += used as u64;
        if !done {
            return (used, Some(Progress::NeedMore));
        }
        let Phase::Body { request, .. } =
            std::mem::replace(&mut self.phase, Phase::Head { scanned: 0 })
        else {
            return (used, None);
        };
        self.continue_due = false;
        (used, Some(Progress::Request(request)))
    }
}

/// The status for a refused body.
fn status(refusal: Refusal) -> u16 {
    match refusal {
        Refusal::TooLarge => 413,
        Refusal::OverBudget => 503,
    }
}

/// The end of a head (just after its empty line) at or after `from`: CRLF CRLF, or bare
/// LFs as httparse accepts them.
fn head_end(head: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(&b) = head.get(i) {
        if b == b'\n' {
            let before = head.get(..i).unwrap_or_default();
            if before.ends_with(b"\n") || before.ends_with(b"\n\r") {
                return Some(i + 1);
            }
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(max_body: usize) -> Reader {
        let limits = Limits {
            max_head: 1024,
            max_body,
        };
        Reader::new(limits, &Arc::new(Budget::new(1 << 20)))
    }

    /// Pushes `input` split at every position (and byte by byte); each split must give
    /// the same requests (method, path, body) and the same rejection.
    fn every_split(input: &[u8], max_body: usize) -> Vec<Result<(String, Vec<u8>), u16>> {
        let run = |pieces: &[&[u8]]| {
            let mut r = reader(max_body);
            let mut out = Vec::new();
            for piece in pieces {
                let mut pos = 0;
                while pos < piece.len() {
                    let (n, p) = r.push(&piece[pos..]);
                    pos += n;
                    match p {
                        Progress::NeedMore => assert_eq!(pos, piece.len()),
                        Progress::Request(req) => out.push(Ok((req.path, req.body.to_vec()))),
                        Progress::Reject(s) => {
                            out.push(Err(s));
                            return out;
                        }
                    }
                }
            }
            out
        };
        let whole = run(&[input]);
        for i in 0..=input.len() {
            assert_eq!(run(&[&input[..i], &input[i..]]), whole, "split at {i}");
        }
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(run(&bytes), whole, "byte at a time");
        whole
    }

    #[test]
    fn pipelined_requests_with_both_framings() {
        let input = b"\r\nPOST /a HTTP/1.1\r\ncontent-length: 3\r\n\r\nabcPOST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nxy\r\n1;e=1\r\nz\r\n0\r\nT: 1\r\n\r\nGET /c HTTP/1.1\n\n";
        assert_eq!(
            every_split(input, 100),
            [
                Ok(("/a".to_owned(), b"abc".to_vec())),
                Ok(("/b".to_owned(), b"xyz".to_vec())),
                Ok(("/c".to_owned(), Vec::new())),
            ]
        );
    }

    #[test]
    fn limits_and_malformed_input() {
        let big = b"POST /a HTTP/1.1\r\ncontent-length: 101\r\n\r\n";
        assert_eq!(every_split(big, 100), [Err(413)]);
        let chunked = b"POST /a HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n40\r\n";
        let mut input = chunked.to_vec();
        input.extend_from_slice(&[b'x'; 0x40]);
        input.extend_from_slice(b"\r\n40\r\n");
        input.extend_from_slice(&[b'x'; 0x40]);
        assert_eq!(every_split(&input, 100), [Err(413)]);
        let bad = b"POST /a HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n";
        assert_eq!(every_split(bad, 100), [Err(400)]);
        assert_eq!(
            every_split(b"GET / HTTP/1.1\r\nbad header\r\n\r\n", 100),
            [Err(400)]
        );
        let long = [b"GET /".as_slice(), &[b'a'; 2000]].concat();
        assert_eq!(every_split(&long, 100), [Err(400)]);
    }

    #[test]
    fn budget_refusal_is_503() {
        let limits = Limits {
            max_head: 1024,
            max_body: 10_000,
        };
        let budget = Arc::new(Budget::new(5000));
        let mut r = Reader::new(limits, &budget);
        let (_, p) = r.push(b"POST /a HTTP/1.1\r\ncontent-length: 6000\r\n\r\n");
        assert!(matches!(p, Progress::NeedMore));
        // The announced size is not charged up front: only what arrived.
        assert_eq!(budget.used(), 0);
        assert!(matches!(r.push(&[b'x'; 4000]).1, Progress::NeedMore));
        assert_eq!(budget.used(), 4096);
        assert!(matches!(r.push(&[b'x'; 2000]).1, Progress::Reject(503)));
    }
}

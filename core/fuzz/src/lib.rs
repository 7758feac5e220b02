//! Shared machinery of the benchlink-core fuzz targets: a small deterministic PRNG for
//! splits, the recording HTTP driver that turns a [`ResponseDecoder`] run into comparable
//! owned events (checking the decoder's calling contract on the way), and compressors that
//! build zlib / raw deflate / gzip bodies with sync flushes; and the messaging targets'
//! ticket bookkeeping ([`tickets`]).
//!
//! Every target takes a few leading bytes of the fuzz input as parameters (documented in
//! the target) and the rest as payload, so seeds are easy to write by hand.

pub mod tickets;

// The fuzz build must go through `coverage-scope` (named by `.cargo/config.toml` in this
// directory, which cargo reads only when run from here): otherwise every crate is
// instrumented, the targets run at a fraction of their speed and steer by the harness.
#[cfg(all(fuzzing, not(benchlink_coverage_scope)))]
compile_error!(
    "build the fuzz targets from core/fuzz (cd core/fuzz && cargo +nightly fuzz ...), \
     where .cargo/config.toml puts the coverage-scope wrapper in front of rustc"
);

use benchlink_core::http::{
    ContentEncoding, DecodeError, Event, Framing, InflateBuffers, InflateMemory, Limits, Method,
    ResponseDecoder, Version,
};

/// xorshift64*: deterministic, good enough to pick split points and framing details.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded from up to 8 bytes (never the all-zero state).
    pub fn from_bytes(seed: &[u8]) -> Self {
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        for &b in seed.iter().take(8) {
            s = (s ^ u64::from(b)).wrapping_mul(0x100_0000_01B3);
        }
        Rng(s | 1)
    }

    /// The next 64 random bits. (Not an `Iterator`: the stream never ends, and the
    /// targets draw from it by hand.)
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..n` (`0` when `n == 0`).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

/// Most pieces one split may have; past that, the rest of the input is one last piece.
/// Tiny pieces over a long input then cost a few thousand decoder calls at most, which
/// keeps every execution fast; the tiny pieces still cover the input's first kilobytes.
pub const MAX_PIECES: usize = 4096;

/// Splits `len` bytes into pieces of 1..=`max_piece` bytes (random), biased towards a mix
/// of tiny and large pieces; returns the piece lengths (summing to `len`), at most
/// [`MAX_PIECES`] of them.
pub fn random_pieces(len: usize, rng: &mut Rng, max_piece: usize) -> Vec<usize> {
    random_pieces_at_most(len, rng, max_piece, MAX_PIECES)
}

/// [`random_pieces`] with at most `max_count` pieces (the rest of the input one last
/// piece).
pub fn random_pieces_at_most(
    len: usize,
    rng: &mut Rng,
    max_piece: usize,
    max_count: usize,
) -> Vec<usize> {
    let mut lens = Vec::with_capacity(max_count.min(len));
    push_pieces(&mut lens, len, rng, max_piece, max_count);
    lens
}

/// Appends pieces of 1..=`max_piece` bytes summing to `len` to `lens`, the last one
/// taking the rest when `lens` reaches `max_count` pieces.
fn push_pieces(
    lens: &mut Vec<usize>,
    len: usize,
    rng: &mut Rng,
    max_piece: usize,
    max_count: usize,
) {
    let mut left = len;
    let max_piece = max_piece.max(1);
    while left > 0 {
        let cap = if rng.chance(3) { 3 } else { max_piece };
        let n = if lens.len() + 1 >= max_count {
            left
        } else {
            (1 + rng.below(cap.min(max_piece))).min(left)
        };
        lens.push(n);
        left -= n;
    }
}

/// The whole input as one piece (no piece at all for an empty input).
pub fn whole(len: usize) -> Vec<usize> {
    if len == 0 {
        Vec::new()
    } else {
        vec![len]
    }
}

/// The one split an execution feeds its input in, chosen by a byte of the fuzz input:
/// whole, byte at a time, random pieces of at most 3 / 16 / 64 / 1500 bytes or a third
/// of the input, or two pieces cut at a random point. One split per execution, not all
/// of them, keeps the targets fast; the corpus holds inputs for every kind of split, and
/// the tests in `core/tests/` feed small inputs byte at a time and cut in every way into
/// two and three pieces.
pub fn chosen_pieces(len: usize, choice: u8, rng: &mut Rng) -> Vec<usize> {
    chosen_pieces_at_most(len, choice, rng, MAX_PIECES)
}

/// [`chosen_pieces`] with at most `max_count` pieces (the rest of the input one last
/// piece): the tiny pieces then cover only the input's first `max_count` bytes or so,
/// and an execution makes at most that many decoder calls.
pub fn chosen_pieces_at_most(
    len: usize,
    choice: u8,
    rng: &mut Rng,
    max_count: usize,
) -> Vec<usize> {
    match split_choice(len, choice, rng) {
        Ok(max_piece) => random_pieces_at_most(len, rng, max_piece, max_count),
        Err(split) => split,
    }
}

/// What `choice` picks for [`chosen_pieces`] and [`bounded_pieces`]: random pieces of at
/// most this many bytes, or (`Err`) a split made already — whole, or two pieces cut at a
/// random point.
fn split_choice(len: usize, choice: u8, rng: &mut Rng) -> Result<usize, Vec<usize>> {
    Ok(match choice % 8 {
        0 => return Err(whole(len)),
        1 => 1,
        2 => 3,
        3 => 16,
        4 => 64,
        5 => 1500,
        6 => len / 3 + 1,
        _ => {
            let at = rng.below(len + 1);
            return Err([at, len - at].into_iter().filter(|&n| n > 0).collect());
        }
    })
}

/// Most pieces [`bounded_pieces`] returns.
pub const BOUNDED_PIECES: usize = 32;

/// The split of `len` bytes that `choice` picks, like [`chosen_pieces`] (whole, pieces of
/// at most 1 / 3 / 16 / 64 / 1500 bytes or a third of the input, or two pieces), but with
/// at most `max_pieces` pieces (at least 3), so that every execution makes a bounded number of
/// decoder calls: the small pieces cover a run of the input that starts at its beginning
/// (half of the time: heads are there) or at a random offset, and the bytes before and
/// after that run are one piece each. Costs O(`max_pieces`), whatever `len`.
pub fn bounded_pieces(len: usize, choice: u8, rng: &mut Rng, max_pieces: usize) -> Vec<usize> {
    let max_piece = match split_choice(len, choice, rng) {
        Ok(max_piece) => max_piece,
        Err(split) => return split,
    };
    let max_pieces = max_pieces.max(3);
    let start = if rng.chance(2) { 0 } else { rng.below(len) };
    let mut lens = Vec::with_capacity(max_pieces);
    if start > 0 {
        lens.push(start);
    }
    push_pieces(&mut lens, len - start, rng, max_piece, max_pieces);
    lens
}

thread_local! {
    static BIG_WINDOW: std::cell::RefCell<Box<InflateBuffers<32768>>> =
        std::cell::RefCell::new(Box::new(InflateBuffers::new()));
    static SMALL_WINDOW: std::cell::RefCell<Box<InflateBuffers<1024>>> =
        std::cell::RefCell::new(Box::new(InflateBuffers::new()));
}

/// Runs `f` with this thread's 32 KiB inflate buffers, left dirty by earlier executions
/// (the decoder resets the state and clears the window for each stream): allocating
/// them per execution cost ASAN page faults and poisoning.
pub fn with_inflate_32k<R>(f: impl FnOnce(&mut InflateBuffers<32768>) -> R) -> R {
    BIG_WINDOW.with(|b| f(&mut b.borrow_mut()))
}

/// [`with_inflate_32k`] with a 1 KiB window.
pub fn with_inflate_1k<R>(f: impl FnOnce(&mut InflateBuffers<1024>) -> R) -> R {
    SMALL_WINDOW.with(|b| f(&mut b.borrow_mut()))
}

/// One decoder event, owned, so runs over different splits can be compared. Consecutive
/// `Data` are merged: their granularity legitimately depends on the split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ev {
    Head {
        /// Absolute stream offset just after the head.
        at: usize,
        status: u16,
        reason: String,
        version: Version,
        framing: Framing,
        encoding: ContentEncoding,
        keep_alive: bool,
        headers: Vec<(String, Vec<u8>)>,
    },
    Data(Vec<u8>),
    End {
        /// Absolute stream offset where the response ended (the next one starts).
        at: usize,
        keep_alive: bool,
        coding_complete: bool,
    },
    Error(DecodeError),
}

impl Ev {
    pub fn is_data(&self) -> bool {
        matches!(self, Ev::Data(_))
    }
}

/// How the driver feeds one stream.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    /// Size of the head buffer (the header-bytes limit).
    pub head_buf: usize,
    /// Method of the first request (reset goes back to GET).
    pub method: Method,
    pub limits: Limits,
    /// Call `finish` after the last piece (the peer closed the connection).
    pub eof: bool,
    /// How many responses to read, resetting after each `End`.
    pub max_responses: usize,
}

fn push(events: &mut Vec<Ev>, ev: Ev) {
    if let (Some(Ev::Data(prev)), Ev::Data(more)) = (events.last_mut(), &ev) {
        prev.extend_from_slice(more);
    } else {
        events.push(ev);
    }
}

/// Per-response bookkeeping for the contract checks.
#[derive(Default)]
struct Response {
    head: Option<(u16, bool)>,
    delivered: u64,
}

impl Response {
    fn data(&mut self, d: &[u8], limits: &Limits) {
        assert!(self.head.is_some(), "Data before Head");
        assert!(!d.is_empty(), "Data is never empty");
        self.delivered += d.len() as u64;
        assert!(
            self.delivered <= limits.max_body_bytes,
            "delivered {} bytes past max_body_bytes {}",
            self.delivered,
            limits.max_body_bytes
        );
    }

    fn error(&self, e: DecodeError) {
        if let DecodeError::BodyTooLarge { max } = e {
            assert_eq!(
                self.delivered, max,
                "BodyTooLarge after other than exactly max bytes"
            );
        }
    }
}

fn head_event(at: usize, h: &benchlink_core::http::Head<'_>) -> Ev {
    let headers: Vec<(String, Vec<u8>)> = h
        .headers()
        .map(|(n, v)| (n.to_owned(), v.to_vec()))
        .collect();
    // Values are trimmed.
    for (_, value) in &headers {
        assert!(value.first() != Some(&b' ') && value.last() != Some(&b' '));
    }
    // Lookup agrees with iteration: the first header of that name, case-insensitively.
    // Checked for the first and the last header and for `Content-Type` (usually absent):
    // each lookup scans the head, so all of them would be quadratic.
    let first = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    };
    let n = headers.len();
    for i in [0, n.saturating_sub(1)].into_iter().take(n.min(2)) {
        let name = &headers[i].0;
        assert_eq!(h.header(name), first(name));
    }
    assert_eq!(h.content_type(), first("content-type"));
    Ev::Head {
        at,
        status: h.status,
        reason: h.reason.to_owned(),
        version: h.version,
        framing: h.framing,
        encoding: h.encoding,
        keep_alive: h.keep_alive,
        headers,
    }
}

/// Feeds `stream` in pieces of `lens` bytes to a fresh decoder as a socket reader would,
/// reading up to `setup.max_responses` pipelined responses, and records the events.
///
/// Checks the calling contract on the way: `NeedMore` only once the input is consumed,
/// `used` within the input, one `Head` before any `Data`/`End`, `Data` never empty, the
/// body limit held (exactly `max` bytes before `BodyTooLarge`), `End` agreeing with the
/// head's keep-alive, errors sticky until `reset`, `finish` never asking for more.
pub fn run<const H: usize>(
    stream: &[u8],
    lens: &[usize],
    setup: &Setup,
    memory: Option<InflateMemory<'_>>,
) -> Vec<Ev> {
    debug_assert_eq!(lens.iter().sum::<usize>(), stream.len());
    // A zeroed head buffer on the stack (a fresh 4 KiB heap block per run cost ASAN a
    // page fault each time); the heap only for larger sizes.
    let mut stack = [0u8; 4096];
    let mut heap;
    let head_buf: &mut [u8] = if setup.head_buf <= stack.len() {
        &mut stack[..setup.head_buf]
    } else {
        heap = vec![0u8; setup.head_buf];
        &mut heap
    };
    let mut dec: ResponseDecoder<'_, H> = ResponseDecoder::new(head_buf, memory, setup.limits);
    dec.set_request_method(setup.method);
    let mut events = Vec::new();
    let mut responses = 0;
    let mut resp = Response::default();
    let mut offset = 0;
    let mut stalled = 0u32;
    for &len in lens {
        let piece = &stream[offset..offset + len];
        let mut pos = 0;
        loop {
            let rest = &piece[pos..];
            let (used, event) = match dec.decode(rest) {
                Ok(ok) => ok,
                Err(e) => {
                    resp.error(e);
                    events.push(Ev::Error(e));
                    assert_eq!(dec.decode(b"x").err(), Some(e), "errors are sticky");
                    assert_eq!(dec.finish().err(), Some(e), "errors are sticky");
                    return events;
                }
            };
            assert!(used <= rest.len(), "used {used} of {} bytes", rest.len());
            pos += used;
            stalled = if used == 0 { stalled + 1 } else { 0 };
            assert!(stalled < 1_000_000, "decoder makes no progress");
            match event {
                Event::NeedMore => {
                    assert_eq!(used, rest.len(), "NeedMore before all input was consumed");
                    break;
                }
                Event::Head(h) => {
                    assert!(resp.head.is_none(), "second Head in one response");
                    resp.head = Some((h.status, h.keep_alive));
                    let ev = head_event(offset + pos, &h);
                    events.push(ev);
                }
                Event::Data(d) => {
                    resp.data(d, &setup.limits);
                    push(&mut events, Ev::Data(d.to_vec()));
                }
                Event::End {
                    keep_alive,
                    coding_complete,
                } => {
                    let (status, head_keep_alive) = resp.head.expect("End before Head");
                    assert_eq!(keep_alive, head_keep_alive, "End disagrees with the head");
                    assert_eq!(dec.head().map(|h| h.status), Some(status));
                    events.push(Ev::End {
                        at: offset + pos,
                        keep_alive,
                        coding_complete,
                    });
                    responses += 1;
                    if responses >= setup.max_responses {
                        return events;
                    }
                    dec.reset();
                    assert!(dec.head().is_none());
                    resp = Response::default();
                }
            }
        }
        offset += len;
    }
    if setup.eof {
        for _ in 0..10_000_000u32 {
            match dec.finish() {
                Err(e) => {
                    resp.error(e);
                    events.push(Ev::Error(e));
                    assert_eq!(dec.finish().err(), Some(e), "errors are sticky");
                    return events;
                }
                Ok(Event::Data(d)) => {
                    resp.data(d, &setup.limits);
                    push(&mut events, Ev::Data(d.to_vec()));
                }
                Ok(Event::End {
                    keep_alive,
                    coding_complete,
                }) => {
                    let (_, head_keep_alive) = resp.head.expect("End before Head");
                    assert_eq!(keep_alive, head_keep_alive, "End disagrees with the head");
                    events.push(Ev::End {
                        at: stream.len(),
                        keep_alive,
                        coding_complete,
                    });
                    return events;
                }
                Ok(other) => panic!("finish returned {other:?}"),
            }
        }
        panic!("finish never ends");
    }
    events
}

/// The concatenated data of the `n`-th response (0-based) of an event list.
pub fn body_of(events: &[Ev], n: usize) -> Vec<u8> {
    let mut response = 0;
    let mut body = Vec::new();
    for ev in events {
        match ev {
            Ev::Data(d) if response == n => body.extend_from_slice(d),
            Ev::End { .. } => response += 1,
            _ => {}
        }
    }
    body
}

/// Content formats the compressor can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Zlib,
    RawDeflate,
}

/// Where to flush while compressing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    Sync,
    Full,
}

/// Compresses `data` with miniz_oxide at `level` (0..=10) and `strategy` (0..=4),
/// flushing at the given `(offset, kind)` points (sorted), then finishing the stream
/// (`finish`) or only sync-flushing its end, as a live log that is cut off would be.
///
/// The compressor (some 300 KB of state) is kept per thread and parameter set and `reset`
/// before each use: allocating a fresh one per call cost more than compressing.
pub fn compress(
    data: &[u8],
    format: Format,
    level: u8,
    strategy: u8,
    flushes: &[(usize, Flush)],
    finish: bool,
) -> Vec<u8> {
    use miniz_oxide::deflate::core::{
        compress_to_output, create_comp_flags_from_zip_params, CompressorOxide, TDEFLFlush,
        TDEFLStatus,
    };
    use std::cell::RefCell;
    use std::collections::HashMap;
    thread_local! {
        static COMPRESSORS: RefCell<HashMap<u32, Box<CompressorOxide>>> =
            RefCell::new(HashMap::new());
    }
    let window_bits = match format {
        Format::Zlib => 15,
        Format::RawDeflate => -15,
    };
    let flags = create_comp_flags_from_zip_params(
        i32::from(level.min(10)),
        window_bits,
        i32::from(strategy.min(4)),
    );
    COMPRESSORS.with(|cell| {
        let mut cache = cell.borrow_mut();
        let c = cache
            .entry(flags)
            .or_insert_with(|| Box::new(CompressorOxide::new(flags)));
        c.reset();
        let mut out = Vec::with_capacity(data.len() / 2 + 64);
        let mut start = 0;
        let last = (data.len(), if finish { None } else { Some(Flush::Sync) });
        for (end, flush) in flushes
            .iter()
            .map(|&(at, f)| (at.min(data.len()), Some(f)))
            .chain([last])
        {
            let end = end.max(start);
            let mode = match flush {
                None => TDEFLFlush::Finish,
                Some(Flush::Sync) => TDEFLFlush::Sync,
                Some(Flush::Full) => TDEFLFlush::Full,
            };
            let (status, used) = compress_to_output(c, &data[start..end], mode, |bytes| {
                out.extend_from_slice(bytes);
                true
            });
            assert!(
                matches!(status, TDEFLStatus::Okay | TDEFLStatus::Done),
                "compressor failed: {status:?}"
            );
            assert_eq!(used, end - start);
            start = end;
        }
        out
    })
}

/// CRC-32 (IEEE) table, built at compile time.
const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut k = 0;
        while k < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
            k += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// CRC-32 (IEEE), table-driven: for gzip trailers and header CRCs built here.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc = CRC_TABLE[((crc ^ u32::from(b)) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc
}

/// Adler-32 (RFC 1950): the zlib trailer of streams assembled here.
pub fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for block in data.chunks(5552) {
        for &x in block {
            a += u32::from(x);
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    (b << 16) | a
}

/// Optional fields of a gzip member header.
#[derive(Debug, Clone, Default)]
pub struct GzipOptions {
    pub text: bool,
    pub extra: Option<Vec<u8>>,
    pub name: Option<Vec<u8>>,
    pub comment: Option<Vec<u8>>,
    pub header_crc: bool,
    pub mtime: u32,
    pub os: u8,
}

/// One gzip member: header (with the chosen optional fields), the raw deflate stream
/// `deflate` of `data`, and the trailer when `trailer`.
pub fn gzip_member(data: &[u8], deflate: &[u8], opts: &GzipOptions, trailer: bool) -> Vec<u8> {
    let mut flags = 0u8;
    if opts.text {
        flags |= 0x01;
    }
    if opts.header_crc {
        flags |= 0x02;
    }
    if opts.extra.is_some() {
        flags |= 0x04;
    }
    if opts.name.is_some() {
        flags |= 0x08;
    }
    if opts.comment.is_some() {
        flags |= 0x10;
    }
    let mut out = vec![0x1F, 0x8B, 8, flags];
    out.extend_from_slice(&opts.mtime.to_le_bytes());
    out.extend_from_slice(&[0, opts.os]);
    if let Some(extra) = &opts.extra {
        let extra = &extra[..extra.len().min(u16::MAX as usize)];
        out.extend_from_slice(&(extra.len() as u16).to_le_bytes());
        out.extend_from_slice(extra);
    }
    for text in [&opts.name, &opts.comment].into_iter().flatten() {
        out.extend(text.iter().copied().filter(|&b| b != 0));
        out.push(0);
    }
    if opts.header_crc {
        let crc = crc32(&out) as u16;
        out.extend_from_slice(&crc.to_le_bytes());
    }
    out.extend_from_slice(deflate);
    if trailer {
        out.extend_from_slice(&crc32(data).to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    }
    out
}

/// RFC 1950 header check, as the decoder sniffs `deflate` bodies (zlib vs. raw).
pub fn looks_like_zlib(body: &[u8]) -> bool {
    match body {
        [cmf, flg, ..] => {
            cmf & 0x0F == 8
                && cmf >> 4 <= 7
                && flg & 0x20 == 0
                && (u16::from(*cmf) * 256 + u16::from(*flg)) % 31 == 0
        }
        _ => false,
    }
}

/// Wraps `body` in chunked framing with chunks of the given sizes (the rest in chunks of
/// at most 1024 bytes, like the benchmark server), plus the last chunk.
pub fn chunk(body: &[u8], rng: &mut Rng, max_chunk: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + body.len() / max_chunk.max(1) * 8 + 8);
    let mut rest = body;
    while !rest.is_empty() {
        let n = (1 + rng.below(max_chunk.max(1))).min(rest.len());
        let digits = (usize::BITS - n.leading_zeros()).div_ceil(4);
        for d in (0..digits).rev() {
            out.push(b"0123456789abcdef"[(n >> (4 * d)) & 15]);
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&rest[..n]);
        out.extend_from_slice(b"\r\n");
        rest = &rest[n..];
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

//! `deflate` (zlib or raw) and `gzip` bodies: whatever was compressed comes out exactly,
//! under any framing and split; arbitrary compressed bytes never panic, never exceed the
//! body limit and decode the same whole and split.
//!
//! Input: `[f1][f2][f3][seed: 4 bytes][data…]`
//! - f1 bits 0-1: zlib / raw deflate (both as `deflate`) / gzip / two gzip members;
//!   bits 2-3: framing Content-Length / chunked (≤ 1024-byte chunks, like the server) /
//!   close-delimited HTTP/1.0 / chunked (≤ 16-byte chunks); bits 4-7: compression level
//!   (0-10).
//! - f2 bits 0-2: compression strategy; bit 3: the stream is cut after a sync flush (no
//!   final block, no checksum trailer: a live log); bit 4: other spellings of the coding
//!   (`Deflate`, `identity, deflate`, `x-gzip`, `GZIP`); bit 5: a 1 KiB inflate window
//!   instead of 32 KiB; bit 6: `data` is served as the compressed body itself (raw bytes);
//!   bit 7: a body limit (below the data size for compressed bodies, 64 KiB for raw bytes).
//! - f3 (compressed bodies of non-empty `data`): 0xFE: the decoded stream wraps the 1 KiB
//!   window three times, and no back-reference reaches beyond 1 KiB, so the 1 KiB window
//!   must decode it exactly too; else `data` as is. The wrap is built cheaply (see
//!   `Repeated`): `data` (its first KiB) compressed once, then a filler of one random byte
//!   repeated, as one fixed-Huffman block of distance-1 matches, then its compressed
//!   blocks again, straddling the wrap; two gzip members split between parts. Core's
//!   window is a slice of any power-of-two length and its wrap is the same code at every
//!   size, so the 32 KiB window is wrapped by core's unit tests (40 KiB bodies in every
//!   coding, random splits), not here: an input wrapping it decodes 33 KB and cost
//!   ~460 µs, nine plain inputs' worth, while reaching no line of core the 1 KiB wrap
//!   does not.
//! - seed: up to two sync/full flush points, gzip header fields, chunk sizes and split
//!   points; its first byte picks the kind of split (`bounded_pieces`: at most 32 pieces,
//!   the small ones over one run of the stream).
//!
//! One decode per input for compressed data, whose events are known by construction:
//! in the input's chosen split (with this thread's inflate memory, reused dirty), the
//! head is the expected one, the decoded body is exactly the data and `End` comes right
//! after the body with `coding_complete` = not cut (a following pipelined response
//! decodes too); with a limit, exactly `max` bytes then `BodyTooLarge`; a zlib stream
//! announcing a window over 1 KiB is `WindowTooSmall` with the 1 KiB window; raw deflate
//! and gzip with the 1 KiB window give exactly the data when no back-reference reaches
//! beyond 1 KiB (f3 = 0xFE), else a prefix of it and end only with all of it (never
//! silently wrong bytes). Raw bytes (two decodes): the same events whole and in the
//! chosen split, no panic, at most `max_body_bytes` delivered (the driver's checks).
#![no_main]

use benchlink_core::http::{ContentEncoding, DecodeError, Framing, Limits, Method};
use benchlink_core_fuzz::{
    adler32, bounded_pieces, chunk, compress, gzip_member, looks_like_zlib, run, whole,
    with_inflate_1k, with_inflate_32k, Ev, Flush, Format, GzipOptions, Rng, Setup, BOUNDED_PIECES,
};
use libfuzzer_sys::fuzz_target;
use std::borrow::Cow;

const NEXT: &[u8] = b"HTTP/1.1 204 No Content\r\n\r\n";

/// The small inflate window, and the segment length of data that must decode exactly in it.
const SEGMENT: usize = 1024;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Zlib,
    Raw,
    Gzip,
    Gzip2,
}

fuzz_target!(|input: &[u8]| {
    let [f1, f2, f3, s0, s1, s2, s3, data @ ..] = input else {
        return;
    };
    let (f1, f2) = (*f1, *f2);
    let mut rng = Rng::from_bytes(&[f1, f2, *f3, *s0, *s1, *s2, *s3]);
    let kind = [Kind::Zlib, Kind::Raw, Kind::Gzip, Kind::Gzip2][usize::from(f1 & 3)];
    let framing = (f1 >> 2) & 3;
    let level = (f1 >> 4).min(10);
    let strategy = (f2 & 7) % 5;
    let cut = f2 & 8 != 0;
    let spelling = f2 & 16 != 0;
    let small_window = f2 & 32 != 0;
    let raw_bytes = f2 & 64 != 0;
    let limited = f2 & 128 != 0;
    // Expanded data wraps the 1 KiB inflate window, in segments of at most `SEGMENT` bytes
    // that back-references cannot leave.
    let segmented = *f3 == 0xFE && !raw_bytes && !data.is_empty();
    // Sync / full flush points (one or two at most: each flush ends a block, and every
    // block costs a Huffman table on both sides).
    let flushes = |rng: &mut Rng, len: usize| -> Vec<(usize, Flush)> {
        let mut flushes: Vec<(usize, Flush)> = (0..rng.below(3))
            .map(|_| {
                let kind = if rng.chance(4) {
                    Flush::Full
                } else {
                    Flush::Sync
                };
                (rng.below(len + 1), kind)
            })
            .collect();
        flushes.sort_unstable_by_key(|f| f.0);
        flushes
    };

    // The body as the server would send it, and what it must decode to.
    let repeated;
    let (body, data) = if raw_bytes {
        (data.to_vec(), data)
    } else if segmented {
        let r = Repeated::new(data, level, strategy, &mut rng, flushes);
        let body = r.body(kind, level, cut, &mut rng);
        repeated = r;
        (body, &repeated.data[..])
    } else {
        let body = match kind {
            Kind::Zlib | Kind::Raw => {
                let format = if kind == Kind::Zlib {
                    Format::Zlib
                } else {
                    Format::RawDeflate
                };
                let f = flushes(&mut rng, data.len());
                compress(data, format, level, strategy, &f, !cut)
            }
            Kind::Gzip => {
                let f = flushes(&mut rng, data.len());
                let deflate = compress(data, Format::RawDeflate, level, strategy, &f, !cut);
                gzip_member(data, &deflate, &gzip_options(&mut rng), !cut)
            }
            Kind::Gzip2 => {
                let at = rng.below(data.len() + 1);
                let (a, b) = data.split_at(at);
                let first = compress(a, Format::RawDeflate, level, strategy, &[], true);
                let second = compress(b, Format::RawDeflate, level, strategy, &[], !cut);
                [
                    gzip_member(a, &first, &gzip_options(&mut rng), true),
                    gzip_member(b, &second, &gzip_options(&mut rng), !cut),
                ]
                .concat()
            }
        };
        (body, data)
    };

    let coding: &str = match (kind, spelling) {
        (Kind::Zlib | Kind::Raw, false) => "deflate",
        (Kind::Zlib | Kind::Raw, true) => ["Deflate", "identity, deflate"][rng.below(2)],
        (Kind::Gzip | Kind::Gzip2, false) => "gzip",
        (Kind::Gzip | Kind::Gzip2, true) => ["x-gzip", "GZIP", "gzip, identity"][rng.below(3)],
    };
    let (head, framed, close) = match framing {
        0 => (
            format!("HTTP/1.1 200 OK\r\nContent-Encoding: {coding}\r\nContent-Length: {}\r\n\r\n", body.len()),
            Cow::Borrowed(&body[..]),
            false,
        ),
        2 => (
            format!("HTTP/1.0 200 OK\r\nContent-Encoding: {coding}\r\n\r\n"),
            Cow::Borrowed(&body[..]),
            true,
        ),
        n => (
            format!("HTTP/1.1 200 OK\r\nContent-Encoding: {coding}\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Cow::Owned(chunk(&body, &mut rng, if n == 1 { 1024 } else { 16 })),
            false,
        ),
    };
    let wire = [head.as_bytes(), &framed, if close { &[][..] } else { NEXT }].concat();
    let limit = match (limited, raw_bytes) {
        (false, _) => None,
        (true, true) => Some(1u64 << 16),
        (true, false) => Some(rng.below(data.len() + 1) as u64),
    };
    let setup = Setup {
        head_buf: 512,
        method: Method::Get,
        limits: Limits {
            max_body_bytes: limit.unwrap_or(u64::MAX),
            ..Limits::DEFAULT
        },
        eof: close,
        max_responses: 2,
    };

    // Decoding with this thread's inflate memory, left dirty by earlier runs.
    let decode = |lens: &[usize]| {
        if small_window {
            with_inflate_1k(|b| run::<16>(&wire, lens, &setup, Some(b.memory())))
        } else {
            with_inflate_32k(|b| run::<16>(&wire, lens, &setup, Some(b.memory())))
        }
    };
    let lens = bounded_pieces(wire.len(), *s0, &mut rng, BOUNDED_PIECES);
    let events = decode(&lens);
    if raw_bytes {
        // Arbitrary compressed bytes: nothing is known of the result but that it does not
        // depend on the split.
        assert_eq!(decode(&whole(wire.len())), events, "split into {lens:?}");
    }

    let encoding = match kind {
        Kind::Zlib | Kind::Raw => ContentEncoding::Deflate,
        Kind::Gzip | Kind::Gzip2 => ContentEncoding::Gzip,
    };
    let Some(Ev::Head {
        at,
        encoding: got,
        framing: fr,
        ..
    }) = events.first()
    else {
        panic!("no head: {events:?}");
    };
    assert_eq!((*at, *got), (head.len(), encoding));
    assert_eq!(*fr == Framing::Close, close);
    if raw_bytes {
        return; // only the split equality and the driver's limit checks apply
    }
    if kind == Kind::Raw && looks_like_zlib(&body) {
        return; // a raw stream whose first bytes read as a zlib header: ambiguous by design
    }

    let rest = &events[1..];
    let decoded = match rest.first() {
        Some(Ev::Data(d)) => d.as_slice(),
        _ => &[],
    };
    let after = &rest[usize::from(!decoded.is_empty())..];
    if small_window {
        // The zlib header announces the window (level 0 streams announce 256 bytes).
        let needed = 1usize << (usize::from(body[0] >> 4) + 8);
        if kind == Kind::Zlib && needed > 1024 {
            assert_eq!(
                after.first(),
                Some(&Ev::Error(DecodeError::WindowTooSmall {
                    needed,
                    available: 1024
                })),
                "{events:?}"
            );
            assert!(decoded.is_empty());
            return;
        }
        if !segmented {
            // A back-reference beyond the small window must be an error, never wrong bytes.
            assert!(
                data.starts_with(decoded),
                "1 KiB window produced bytes that are not the data"
            );
            if matches!(after.first(), Some(Ev::End { .. })) {
                assert!(decoded == data, "ended early");
            }
            return;
        }
        // Back-references within the window: the checks below, exactly as with 32 KiB.
    }
    if let Some(limit) = limit.filter(|&l| l < data.len() as u64) {
        assert!(
            decoded == &data[..limit as usize],
            "not exactly the limit's bytes"
        );
        assert_eq!(
            after.first(),
            Some(&Ev::Error(DecodeError::BodyTooLarge { max: limit }))
        );
        return;
    }
    assert!(
        decoded == data,
        "decoded body differs from the compressed data"
    );
    let end_at = head.len() + framed.len();
    assert_eq!(
        after.first(),
        Some(&Ev::End {
            at: end_at,
            keep_alive: !close,
            coding_complete: !cut,
        }),
        "{events:?}"
    );
    if !close {
        assert!(
            matches!(after.get(1), Some(Ev::Head { status: 204, .. })),
            "next response: {events:?}"
        );
        assert!(matches!(after.get(2), Some(Ev::End { at, .. }) if *at == wire.len()));
    }
});

/// Data that wraps the 1 KiB inflate window, and its deflate stream, built cheaply: a
/// base (`data`, at most 1 KiB of it) compressed once, ending byte-aligned after a full
/// flush; a filler of one random byte repeated, as one fixed-Huffman block (a literal,
/// then matches at distance 1: about 13 bits per 258 bytes) and an empty stored block back
/// to a byte boundary; the base's blocks again, placed so that they straddle the third
/// wrap of the window. Only the filler's length matters to the checks; its
/// back-references reach 1 byte and none of the base's reaches beyond the base, so the
/// 1 KiB window must decode it exactly.
struct Repeated {
    /// Each part: its deflate blocks (ending byte-aligned, not final) and its bytes.
    parts: Vec<(Vec<u8>, Vec<u8>)>,
    /// The decoded data: the parts' bytes.
    data: Vec<u8>,
}

/// Deflate bits, packed LSB-first.
#[derive(Default)]
struct Bits {
    out: Vec<u8>,
    acc: u32,
    n: u32,
}

impl Bits {
    /// `n` bits of `v`, least significant first (header fields, extra bits).
    fn put(&mut self, v: u32, n: u32) {
        self.acc |= v << self.n;
        self.n += n;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    /// A Huffman code of `n` bits, most significant first.
    fn code(&mut self, code: u32, n: u32) {
        self.put(code.reverse_bits() >> (32 - n), n);
    }

    /// A fixed-Huffman literal/length symbol (0..=287).
    fn symbol(&mut self, v: u32) {
        match v {
            0..=143 => self.code(0x30 + v, 8),
            144..=255 => self.code(0x190 + (v - 144), 9),
            256..=279 => self.code(v - 256, 7),
            _ => self.code(0xC0 + (v - 280), 8),
        }
    }

    /// A match of `len` (3..=258) bytes at distance 1 (distance code 0).
    fn match_1(&mut self, len: usize) {
        const BASE: [u16; 29] = [
            3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99,
            115, 131, 163, 195, 227, 258,
        ];
        let i = BASE.iter().rposition(|&b| usize::from(b) <= len).unwrap();
        let extra = if (8..28).contains(&i) {
            (i as u32 - 4) / 4
        } else {
            0
        };
        self.symbol(257 + i as u32);
        self.put((len - usize::from(BASE[i])) as u32, extra);
        self.code(0, 5);
    }

    /// Pads to a byte boundary.
    fn finish(mut self) -> Vec<u8> {
        if self.n > 0 {
            self.out.push(self.acc as u8);
        }
        self.out
    }
}

/// `len` (≥ 1) copies of `byte` as a non-final fixed-Huffman block, then an empty stored
/// block (a sync flush) so that what follows starts byte-aligned.
fn filler_blocks(byte: u8, len: usize) -> Vec<u8> {
    let mut bits = Bits::default();
    bits.put(0b010, 3); // BFINAL 0, BTYPE 01
    bits.symbol(u32::from(byte));
    let mut left = len - 1;
    while left >= 3 {
        let n = left.min(258);
        bits.match_1(n);
        left -= n;
    }
    for _ in 0..left {
        bits.symbol(u32::from(byte));
    }
    bits.symbol(256); // end of block
    bits.put(0, 3); // BFINAL 0, BTYPE 00
    let mut out = bits.finish();
    out.extend_from_slice(&[0x00, 0x00, 0xFF, 0xFF]);
    out
}

impl Repeated {
    fn new(
        data: &[u8],
        level: u8,
        strategy: u8,
        rng: &mut Rng,
        flushes: impl Fn(&mut Rng, usize) -> Vec<(usize, Flush)>,
    ) -> Self {
        let base = &data[..data.len().min(SEGMENT)];
        let mut f = flushes(rng, base.len());
        f.push((base.len(), Flush::Full));
        let unit = compress(base, Format::RawDeflate, level, strategy, &f, false);
        // The second copy starts 1..=base.len() bytes before the wrap.
        let filler_len = 3 * SEGMENT - base.len() - rng.below(base.len());
        let byte = rng.next() as u8;
        let filler = vec![byte; filler_len];
        let blocks = filler_blocks(byte, filler_len);
        let parts = vec![
            (unit.clone(), base.to_vec()),
            (blocks, filler),
            (unit, base.to_vec()),
        ];
        let data = [&parts[0].1[..], &parts[1].1, &parts[2].1].concat();
        Repeated { parts, data }
    }

    /// Raw deflate of parts `from..to`, ended by a final empty block when `finish`.
    fn deflate(&self, from: usize, to: usize, finish: bool) -> Vec<u8> {
        let mut out = Vec::new();
        for (blocks, _) in &self.parts[from..to] {
            out.extend_from_slice(blocks);
        }
        if finish {
            out.extend_from_slice(&[0x03, 0x00]); // final empty fixed-Huffman block
        }
        out
    }

    /// The bytes parts `from..to` decode to.
    fn bytes(&self, from: usize, to: usize) -> Vec<u8> {
        self.parts[from..to].iter().fold(Vec::new(), |mut v, p| {
            v.extend_from_slice(&p.1);
            v
        })
    }

    fn body(&self, kind: Kind, level: u8, cut: bool, rng: &mut Rng) -> Vec<u8> {
        let n = self.parts.len();
        match kind {
            Kind::Zlib => {
                // The header miniz writes: a 32 KiB window, or 256 bytes at level 0.
                let cmf = if level == 0 { 0x08u8 } else { 0x78 };
                let flevel: u8 = match level {
                    0 | 1 => 0,
                    2..=5 => 1,
                    6 => 2,
                    _ => 3,
                };
                let mut flg = flevel << 6;
                flg += ((31 - (u16::from(cmf) * 256 + u16::from(flg)) % 31) % 31) as u8;
                let mut out = vec![cmf, flg];
                out.extend_from_slice(&self.deflate(0, n, !cut));
                if !cut {
                    out.extend_from_slice(&adler32(&self.data).to_be_bytes());
                }
                out
            }
            Kind::Raw => self.deflate(0, n, !cut),
            Kind::Gzip => gzip_member(
                &self.data,
                &self.deflate(0, n, !cut),
                &gzip_options(rng),
                !cut,
            ),
            Kind::Gzip2 => {
                let k = rng.below(n + 1);
                let (first, a) = (self.deflate(0, k, true), self.bytes(0, k));
                let (second, b) = (self.deflate(k, n, !cut), self.bytes(k, n));
                [
                    gzip_member(&a, &first, &gzip_options(rng), true),
                    gzip_member(&b, &second, &gzip_options(rng), !cut),
                ]
                .concat()
            }
        }
    }
}

fn gzip_options(rng: &mut Rng) -> GzipOptions {
    let mut bytes =
        |max: usize| -> Vec<u8> { (0..rng.below(max)).map(|_| rng.next() as u8).collect() };
    let extra = bytes(300);
    let name = bytes(20);
    let comment = bytes(40);
    GzipOptions {
        text: rng.chance(2),
        extra: rng.chance(3).then_some(extra),
        name: rng.chance(2).then_some(name),
        comment: rng.chance(3).then_some(comment),
        header_crc: rng.chance(2),
        mtime: rng.next() as u32,
        os: rng.next() as u8,
    }
}

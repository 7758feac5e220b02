//! `deflate` (zlib or raw) and `gzip` bodies: whatever was compressed comes out exactly,
//! under any framing and any split; arbitrary compressed bytes never panic and never
//! exceed the body limit.
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
//! - f3: 0xFF: `data` repeated (each copy with one random byte) to 33 KB, so that the
//!   decoded stream wraps the 32 KiB window (rare: it is slow); else bits 1 and 2 set:
//!   repeated to 2 KiB and compressed with a full flush every 1 KiB, so that no
//!   back-reference reaches further and the 1 KiB window, wrapped twice, must decode it
//!   exactly too; else `data` as is.
//! - seed: sync/full flush points, gzip header fields, chunk sizes and split points; its
//!   first byte picks the kind of split (`chosen_pieces`).
//!
//! Properties: the events are the same whole and in the input's chosen split.
//! Compressed data: the decoded body is exactly `data` and `End` comes right after the
//! body with `coding_complete` = not cut (a following pipelined response decodes too);
//! with a limit, exactly `max` bytes then `BodyTooLarge`; a zlib stream announcing a
//! window over 1 KiB is `WindowTooSmall` with the 1 KiB window; raw deflate and gzip with
//! the 1 KiB window give exactly `data` when it was compressed in 1 KiB segments, else a
//! prefix of it and end only with all of it (never silently wrong bytes). Raw bytes: no panic,
//! at most `max_body_bytes` delivered.
#![no_main]

use benchlink_core::http::{ContentEncoding, DecodeError, Framing, Limits, Method};
use benchlink_core_fuzz::{
    adler32, bounded_pieces, chunk, compress, gzip_member, looks_like_zlib, run, whole,
    with_inflate_1k, with_inflate_32k, Ev, Flush, Format, GzipOptions, Rng, Setup, BOUNDED_PIECES,
};
use libfuzzer_sys::fuzz_target;

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
    // Expanded data wraps an inflate window: the 32 KiB one (f3 = 0xFF) or, in segments
    // of at most `SEGMENT` bytes that back-references cannot leave, the 1 KiB one.
    let (wrap32, segmented) = match f3 {
        _ if raw_bytes || data.is_empty() => (false, false),
        0xFF => (true, false),
        f3 => (false, f3 & 6 == 6),
    };
    let expanded;
    let data = if segmented {
        expanded = repeat_to(data, 2 * SEGMENT, &mut rng);
        &expanded[..]
    } else {
        data
    };
    // A full flush resets the compressor's dictionary: with one at least every `SEGMENT`
    // bytes no back-reference reaches further.
    let segments = |len: usize| -> Vec<(usize, Flush)> {
        if segmented {
            (1..=len / SEGMENT)
                .map(|i| (i * SEGMENT, Flush::Full))
                .collect()
        } else {
            Vec::new()
        }
    };
    let mut flushes = |rng: &mut Rng, len: usize| -> Vec<(usize, Flush)> {
        let mut flushes: Vec<(usize, Flush)> = (0..rng.below(6))
            .map(|_| {
                let kind = if rng.chance(4) {
                    Flush::Full
                } else {
                    Flush::Sync
                };
                (rng.below(len + 1), kind)
            })
            .collect();
        flushes.extend(segments(len));
        flushes.sort_unstable_by_key(|f| f.0);
        flushes
    };

    // The body as the server would send it, and what it must decode to.
    let wrapped;
    let (body, data) = if raw_bytes {
        (data.to_vec(), data)
    } else if wrap32 {
        let w = Wrap32::new(data, level, strategy, &mut rng, &mut flushes);
        let body = w.body(kind, level, cut, &mut rng);
        wrapped = w;
        (body, &wrapped.data[..])
    } else {
        let body = match kind {
            Kind::Zlib => compress(
                data,
                Format::Zlib,
                level,
                strategy,
                &flushes(&mut rng, data.len()),
                !cut,
            ),
            Kind::Raw => compress(
                data,
                Format::RawDeflate,
                level,
                strategy,
                &flushes(&mut rng, data.len()),
                !cut,
            ),
            Kind::Gzip => {
                let f = flushes(&mut rng, data.len());
                let deflate = compress(data, Format::RawDeflate, level, strategy, &f, !cut);
                gzip_member(data, &deflate, &gzip_options(&mut rng), !cut)
            }
            Kind::Gzip2 => {
                let at = rng.below(data.len() + 1);
                let (a, b) = data.split_at(at);
                let first = compress(
                    a,
                    Format::RawDeflate,
                    level,
                    strategy,
                    &segments(a.len()),
                    true,
                );
                let second = compress(
                    b,
                    Format::RawDeflate,
                    level,
                    strategy,
                    &segments(b.len()),
                    !cut,
                );
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
            body.clone(),
            false,
        ),
        2 => (
            format!("HTTP/1.0 200 OK\r\nContent-Encoding: {coding}\r\n\r\n"),
            body.clone(),
            true,
        ),
        n => (
            format!("HTTP/1.1 200 OK\r\nContent-Encoding: {coding}\r\nTransfer-Encoding: chunked\r\n\r\n"),
            chunk(&body, &mut rng, if n == 1 { 1024 } else { 16 }),
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

/// `data` repeated, each copy followed by one random byte, to at least `target` bytes.
fn repeat_to(data: &[u8], target: usize, rng: &mut Rng) -> Vec<u8> {
    let mut big = Vec::with_capacity(target + data.len() + 1);
    while big.len() < target {
        big.extend_from_slice(data);
        big.push(rng.next() as u8);
    }
    big
}

/// Over 32 KiB of data that wraps the 32 KiB window, and its deflate stream, built
/// cheaply in three parts: a base of at least 1 KiB (`data` repeated with random bytes)
/// compressed (sync-flushed), 32 KiB of copies of the base with random bytes between
/// them in stored blocks, and the compressed base again, whose blocks and
/// back-references are decoded after the window wrapped.
struct Wrap32 {
    /// Each part: its deflate blocks (ending byte-aligned, not final) and its bytes.
    parts: [(Vec<u8>, Vec<u8>); 3],
    /// The decoded data: the parts' bytes.
    data: Vec<u8>,
}

impl Wrap32 {
    fn new(
        data: &[u8],
        level: u8,
        strategy: u8,
        rng: &mut Rng,
        flushes: &mut impl FnMut(&mut Rng, usize) -> Vec<(usize, Flush)>,
    ) -> Self {
        let base = repeat_to(data, SEGMENT, rng);
        let f = flushes(rng, base.len());
        let unit = compress(&base, Format::RawDeflate, level, strategy, &f, false);
        let filler = repeat_to(&base, 32 * 1024, rng);
        let mut stored = Vec::with_capacity(filler.len() + 10);
        for block in filler.chunks(u16::MAX as usize) {
            let n = block.len() as u16;
            // Stored block, not final (byte-aligned after the sync flush): LEN, NLEN.
            stored.push(0x00);
            stored.extend_from_slice(&n.to_le_bytes());
            stored.extend_from_slice(&(!n).to_le_bytes());
            stored.extend_from_slice(block);
        }
        let data = [&base[..], &filler, &base].concat();
        Wrap32 {
            parts: [(unit.clone(), base.clone()), (stored, filler), (unit, base)],
            data,
        }
    }

    /// Raw deflate of parts `from..to`, ended by a final empty block when `finish`, and
    /// the bytes it decodes to.
    fn deflate(&self, from: usize, to: usize, finish: bool) -> (Vec<u8>, Vec<u8>) {
        let mut out = Vec::new();
        let mut bytes = Vec::new();
        for (blocks, plain) in &self.parts[from..to] {
            out.extend_from_slice(blocks);
            bytes.extend_from_slice(plain);
        }
        if finish {
            out.extend_from_slice(&[0x03, 0x00]); // final empty fixed-Huffman block
        }
        (out, bytes)
    }

    fn body(&self, kind: Kind, level: u8, cut: bool, rng: &mut Rng) -> Vec<u8> {
        match kind {
            Kind::Zlib => {
                let cmf = 0x78u8;
                let flevel: u8 = match level {
                    0 | 1 => 0,
                    2..=5 => 1,
                    6 => 2,
                    _ => 3,
                };
                let mut flg = flevel << 6;
                flg += ((31 - (u16::from(cmf) * 256 + u16::from(flg)) % 31) % 31) as u8;
                let mut out = vec![cmf, flg];
                out.extend_from_slice(&self.deflate(0, 3, !cut).0);
                if !cut {
                    out.extend_from_slice(&adler32(&self.data).to_be_bytes());
                }
                out
            }
            Kind::Raw => self.deflate(0, 3, !cut).0,
            Kind::Gzip => gzip_member(
                &self.data,
                &self.deflate(0, 3, !cut).0,
                &gzip_options(rng),
                !cut,
            ),
            Kind::Gzip2 => {
                let k = rng.below(4);
                let (first, a) = self.deflate(0, k, true);
                let (second, b) = self.deflate(k, 3, !cut);
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

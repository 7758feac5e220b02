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

use benchlink_core::http::{ContentEncoding, DecodeError, Framing, InflateBuffers, Limits, Method};
use benchlink_core_fuzz::{
    chosen_pieces, chunk, compress, gzip_member, looks_like_zlib, run, whole, Ev, Flush, Format,
    GzipOptions, Rng, Setup,
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
    // Expanded data wraps an inflate window: the 32 KiB one (slow, so only for f3 = 0xFF)
    // or, in segments of at most `SEGMENT` bytes that back-references cannot leave, the
    // 1 KiB one.
    let (target, segmented) = match f3 {
        0xFF => (33_000, false),
        f3 if f3 & 6 == 6 => (2 * SEGMENT, true),
        _ => (0, false),
    };
    let expanded;
    let data = if target > 0 && !data.is_empty() {
        let mut big = Vec::with_capacity(target + data.len() + 1);
        while big.len() < target {
            big.extend_from_slice(data);
            big.push(rng.next() as u8);
        }
        expanded = big;
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
    let kind = [Kind::Zlib, Kind::Raw, Kind::Gzip, Kind::Gzip2][usize::from(f1 & 3)];
    let framing = (f1 >> 2) & 3;
    let level = (f1 >> 4).min(10);
    let strategy = (f2 & 7) % 5;
    let cut = f2 & 8 != 0;
    let spelling = f2 & 16 != 0;
    let small_window = f2 & 32 != 0;
    let raw_bytes = f2 & 64 != 0;
    let limited = f2 & 128 != 0;

    // The body as the server would send it, and what it must decode to.
    let body = if raw_bytes {
        data.to_vec()
    } else {
        let mut flushes: Vec<(usize, Flush)> = (0..rng.below(6))
            .map(|_| {
                let kind = if rng.chance(4) {
                    Flush::Full
                } else {
                    Flush::Sync
                };
                (rng.below(data.len() + 1), kind)
            })
            .collect();
        flushes.extend(segments(data.len()));
        flushes.sort_unstable_by_key(|f| f.0);
        match kind {
            Kind::Zlib => compress(data, Format::Zlib, level, strategy, &flushes, !cut),
            Kind::Raw => compress(data, Format::RawDeflate, level, strategy, &flushes, !cut),
            Kind::Gzip => {
                let deflate = compress(data, Format::RawDeflate, level, strategy, &flushes, !cut);
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
        }
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

    // The same events whole and in the input's chosen split, the split run reusing the
    // memory the whole run left dirty.
    let mut big = Box::new(InflateBuffers::<32768>::new());
    let mut small = Box::new(InflateBuffers::<SEGMENT>::new());
    let mut decode = |lens: &[usize]| {
        let memory = if small_window {
            small.memory()
        } else {
            big.memory()
        };
        run::<16>(&wire, lens, &setup, Some(memory))
    };
    let reference = decode(&whole(wire.len()));
    let lens = chosen_pieces(wire.len(), *s0, &mut rng);
    assert_eq!(reference, decode(&lens), "split into {lens:?}");

    let encoding = match kind {
        Kind::Zlib | Kind::Raw => ContentEncoding::Deflate,
        Kind::Gzip | Kind::Gzip2 => ContentEncoding::Gzip,
    };
    let Some(Ev::Head {
        at,
        encoding: got,
        framing: fr,
        ..
    }) = reference.first()
    else {
        panic!("no head: {reference:?}");
    };
    assert_eq!((*at, *got), (head.len(), encoding));
    assert_eq!(*fr == Framing::Close, close);
    if raw_bytes {
        return; // only the split equality and the driver's limit checks apply
    }
    if kind == Kind::Raw && looks_like_zlib(&body) {
        return; // a raw stream whose first bytes read as a zlib header: ambiguous by design
    }

    let rest = &reference[1..];
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
                "{reference:?}"
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
        "{reference:?}"
    );
    if !close {
        assert!(
            matches!(after.get(1), Some(Ev::Head { status: 204, .. })),
            "next response: {reference:?}"
        );
        assert!(matches!(after.get(2), Some(Ev::End { at, .. }) if *at == wire.len()));
    }
});

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

//! Chunked bodies: a syntactically valid chunked encoding of the payload decodes to exactly
//! the payload under any split; raw bytes after a chunked head never panic and decode the
//! same under any split.
//!
//! Input: `[flags][seed: 4 bytes][payload…]`
//! - flags bits 0-1: largest chunk 1024 / 16 / 3 / 4096 bytes (at most 64 chunks, the
//!   last one takes the rest); bit 2: chunk extensions and
//!   whitespace after the size; bit 3: trailer fields; bit 4: bare LF line ends now and
//!   then; bit 5: leading zeros and upper-case hex in sizes; bit 6: a body limit below the
//!   payload size; bit 7: `finish` after the garbage stream.
//! - seed: chunk sizes, framing details and split points; its first byte picks the kind
//!   of split (`bounded_pieces`: at most 32 pieces, the small ones over one run of the
//!   stream), its second the scenario: the structured body (`% 3 == 0`),
//!   garbage after an identity (`1`) or a `deflate` (`2`) chunked head.
//!
//! Properties (structured body, followed by a pipelined `204` response): events are
//! exactly `Head(200, chunked)`, `Data(payload)`, `End` right after the last-chunk and
//! trailer section, then the `204`'s `Head` and `End` — in the input's chosen split;
//! with a body limit, exactly `max` payload bytes and then `BodyTooLarge`.
//! Garbage after a chunked head (identity and `deflate`, with inflate memory reused dirty
//! from earlier executions): the same events whole and in the chosen split.
#![no_main]

use benchlink_core::http::{ContentEncoding, DecodeError, Framing, Limits, Method};
use benchlink_core_fuzz::{
    bounded_pieces, run, whole, with_inflate_32k, Ev, Rng, Setup, BOUNDED_PIECES,
};
use libfuzzer_sys::fuzz_target;

const HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
const NEXT: &[u8] = b"HTTP/1.1 204 No Content\r\n\r\n";

fuzz_target!(|input: &[u8]| {
    let [flags, s0, s1, s2, s3, payload @ ..] = input else {
        return;
    };
    let mut rng = Rng::from_bytes(&[*flags, *s0, *s1, *s2, *s3]);
    // One scenario per input, so that each execution decodes one or two streams.
    match s1 % 3 {
        0 => {
            let body = encode(payload, *flags, &mut rng);
            structured(payload, &body, *flags, *s0, &mut rng);
        }
        coding => garbage(payload, *flags, coding == 2, *s0, &mut rng),
    }
});

/// Appends up to `max` printable bytes (tabs now and then) to `out`.
fn printable(out: &mut Vec<u8>, rng: &mut Rng, max: usize) {
    for _ in 0..rng.below(max + 1) {
        out.push(match rng.below(20) {
            0 => b'\t',
            _ => 0x20 + rng.below(0x5F) as u8,
        });
    }
}

/// Appends `n` in hexadecimal (upper-case digits when `upper`), without leading zeros.
fn hex(out: &mut Vec<u8>, n: usize, upper: bool) {
    let digits: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut shift = (usize::BITS - n.leading_zeros()).div_ceil(4).max(1) * 4;
    while shift > 0 {
        shift -= 4;
        out.push(digits[(n >> shift) & 15]);
    }
}

/// Most chunks an encoding has: the last one takes the rest of the payload, so that
/// every execution decodes a bounded number of chunks.
const MAX_CHUNKS: usize = 64;

/// A chunked encoding of `payload` with the framing variations `flags` allow.
fn encode(payload: &[u8], flags: u8, rng: &mut Rng) -> Vec<u8> {
    let max_chunk = [1024, 16, 3, 4096][usize::from(flags & 3)];
    let (ext, trailers, bare_lf, odd_hex) = (
        flags & 4 != 0,
        flags & 8 != 0,
        flags & 16 != 0,
        flags & 32 != 0,
    );
    let eol = |rng: &mut Rng| -> &'static [u8] {
        if bare_lf && rng.chance(2) {
            b"\n"
        } else {
            b"\r\n"
        }
    };
    let size_line = |out: &mut Vec<u8>, n: usize, rng: &mut Rng| {
        if odd_hex {
            out.extend(std::iter::repeat_n(b'0', rng.below(4)));
        }
        hex(out, n, odd_hex && rng.chance(2));
        if ext {
            if rng.chance(3) {
                out.extend(std::iter::repeat_n(b' ', rng.below(3)));
                out.extend(std::iter::repeat_n(b'\t', rng.below(2)));
            }
            for _ in 0..rng.below(3) {
                out.push(b';');
                printable(out, rng, 24);
            }
        }
        out.extend_from_slice(eol(rng));
    };
    let mut out = Vec::with_capacity(payload.len() + 64);
    let mut rest = payload;
    let mut chunks = 0;
    while !rest.is_empty() {
        chunks += 1;
        let n = if chunks == MAX_CHUNKS {
            rest.len()
        } else {
            (1 + rng.below(max_chunk)).min(rest.len())
        };
        size_line(&mut out, n, rng);
        out.extend_from_slice(&rest[..n]);
        out.extend_from_slice(eol(rng));
        rest = &rest[n..];
    }
    size_line(&mut out, 0, rng);
    if trailers {
        for i in 0..rng.below(4) {
            out.extend_from_slice(b"X-Trailer-");
            out.push(b'0' + i as u8);
            out.push(b':');
            printable(&mut out, rng, 40);
            out.extend_from_slice(eol(rng));
        }
    }
    out.extend_from_slice(eol(rng));
    out
}

fn structured(payload: &[u8], body: &[u8], flags: u8, split: u8, rng: &mut Rng) {
    let wire = [HEAD, body, NEXT].concat();
    let limit = (flags & 64 != 0 && !payload.is_empty()).then(|| rng.below(payload.len()));
    let setup = Setup {
        head_buf: 256,
        method: Method::Get,
        limits: Limits {
            max_body_bytes: limit.map_or(u64::MAX, |l| l as u64),
            ..Limits::DEFAULT
        },
        eof: false,
        max_responses: 2,
    };
    let lens = bounded_pieces(wire.len(), split, rng, BOUNDED_PIECES);
    let events = run::<8>(&wire, &lens, &setup, None);
    let mut it = events.iter();
    assert!(
        matches!(
            it.next(),
            Some(Ev::Head { at, status: 200, framing: Framing::Chunked, encoding: ContentEncoding::Identity, keep_alive: true, .. })
                if *at == HEAD.len()
        ),
        "{events:?}"
    );
    let data: Vec<u8> = match events.get(1) {
        Some(Ev::Data(d)) => {
            it.next();
            d.clone()
        }
        _ => Vec::new(),
    };
    if let Some(limit) = limit {
        assert_eq!(data, &payload[..limit], "not exactly the limit's bytes");
        assert_eq!(
            it.next(),
            Some(&Ev::Error(DecodeError::BodyTooLarge { max: limit as u64 }))
        );
        return;
    }
    assert!(
        data == payload,
        "decoded data differs from the chunk payloads: {events:?}"
    );
    assert_eq!(
        it.next(),
        Some(&Ev::End {
            at: HEAD.len() + body.len(),
            keep_alive: true,
            coding_complete: true
        }),
        "{events:?}"
    );
    assert!(
        matches!(it.next(), Some(Ev::Head { status: 204, framing: Framing::None, at, .. }) if *at == wire.len()),
        "{events:?}"
    );
    assert!(matches!(it.next(), Some(Ev::End { at, .. }) if *at == wire.len()));
    assert_eq!(it.next(), None);
}

fn garbage(payload: &[u8], flags: u8, deflate: bool, split: u8, rng: &mut Rng) {
    let setup = Setup {
        head_buf: 256,
        method: Method::Get,
        limits: Limits::DEFAULT,
        eof: flags & 128 != 0,
        max_responses: 3,
    };
    let head: &[u8] = if deflate {
        b"HTTP/1.1 200 OK\r\nContent-Encoding: deflate\r\nTransfer-Encoding: chunked\r\n\r\n"
    } else {
        HEAD
    };
    let wire = [head, payload].concat();
    let lens = bounded_pieces(wire.len(), split, rng, BOUNDED_PIECES);
    let decode = |lens: &[usize]| {
        if deflate {
            // This thread's inflate memory, left dirty by earlier runs.
            with_inflate_32k(|b| run::<8>(&wire, lens, &setup, Some(b.memory())))
        } else {
            run::<8>(&wire, lens, &setup, None)
        }
    };
    assert_eq!(decode(&whole(wire.len())), decode(&lens), "split {lens:?}");
}

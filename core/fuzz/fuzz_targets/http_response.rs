//! `ResponseDecoder` on arbitrary response streams: any split gives the same events.
//!
//! Input: `[flags][seed: 4 bytes][stream…]`
//! - flags bits 0-1: head buffer 4096 / 512 / 128 / 48 bytes; bits 2-3: first request
//!   method GET / GET / HEAD / CONNECT; bits 4-5: `max_body_bytes` unlimited / unlimited /
//!   0 / 100; bit 6: call `finish` at the end (peer closed); bit 7: 4 header slots
//!   instead of 32.
//! - seed: the first byte picks the kind of split (`bounded_pieces`: at most 32 pieces,
//!   the small ones over one run of the stream), the second whether the split run has
//!   inflate memory (bit 0 clear) or not; all four the split points.
//! - stream: up to 4 pipelined responses (the decoder is `reset` after each `End`).
//!
//! Two decodes per input. The reference: the whole stream with inflate memory (this
//! thread's, reused dirty). The chosen split, with the same memory: identical events
//! (heads with status, framing, coding, keep-alive and headers; concatenated data; end
//! position, keep-alive and coding completeness; or the error). Or, as the input
//! chooses, the chosen split without inflate memory: identical events up to the first
//! compressed body (all of them if there is none), whose bytes never come out as data.
//! Identity `Content-Length` and close-delimited bodies of the reference are exactly the
//! stream's bytes after the head; plus the contract checks of `benchlink_core_fuzz::run`
//! (NeedMore only when consumed, body limit, sticky errors…) on every run.
#![no_main]

use benchlink_core::http::{ContentEncoding, Framing, Limits, Method};
use benchlink_core_fuzz::{
    bounded_pieces, run, whole, with_inflate_32k, Ev, Rng, Setup, BOUNDED_PIECES,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let [flags, s0, s1, s2, s3, stream @ ..] = input else {
        return;
    };
    let setup = Setup {
        head_buf: [4096, 512, 128, 48][usize::from(flags & 3)],
        method: [Method::Get, Method::Get, Method::Head, Method::Connect]
            [usize::from((flags >> 2) & 3)],
        limits: Limits {
            max_body_bytes: [u64::MAX, u64::MAX, 0, 100][usize::from((flags >> 4) & 3)],
            ..Limits::DEFAULT
        },
        eof: flags & 0x40 != 0,
        max_responses: 4,
    };
    let seed = [*s0, *s1, *s2, *s3];
    if flags & 0x80 != 0 {
        check::<4>(stream, &setup, &seed);
    } else {
        check::<32>(stream, &setup, &seed);
    }
});

fn check<const H: usize>(stream: &[u8], setup: &Setup, seed: &[u8]) {
    let len = stream.len();
    let mut rng = Rng::from_bytes(seed);
    let lens = bounded_pieces(len, seed[0], &mut rng, BOUNDED_PIECES);
    // Two decodes per input: the whole stream with inflate memory (this thread's, left
    // dirty by earlier runs), and the chosen split with the same memory or without any.
    let (reference, split) = with_inflate_32k(|b| {
        let reference = run::<H>(stream, &whole(len), setup, Some(b.memory()));
        let split = if seed[1] & 1 == 0 {
            Some(run::<H>(stream, &lens, setup, Some(b.memory())))
        } else {
            None
        };
        (reference, split)
    });
    match split {
        Some(got) => assert_eq!(reference, got, "split into {lens:?}"),
        None => {
            // Without inflate memory: the same up to the first compressed body, whose
            // bytes never come out.
            let plain = run::<H>(stream, &lens, setup, None);
            let compressed = reference.iter().position(|e| {
                matches!(
                    e,
                    Ev::Head {
                        encoding: ContentEncoding::Deflate | ContentEncoding::Gzip,
                        ..
                    }
                )
            });
            match compressed {
                None => assert_eq!(
                    plain, reference,
                    "identity stream split into {lens:?} decoded differently without memory"
                ),
                Some(i) => {
                    assert_eq!(plain[..=i], reference[..=i], "split into {lens:?}");
                    assert!(
                        !plain.get(i + 1).is_some_and(Ev::is_data),
                        "compressed bytes delivered without inflate memory"
                    );
                }
            }
        }
    }

    check_identity_bodies(stream, &reference);
}

/// An identity body framed by `Content-Length` or by the connection's close is exactly
/// the stream's bytes after the head (a prefix of them if the response failed).
fn check_identity_bodies(stream: &[u8], events: &[Ev]) {
    let mut i = 0;
    while i < events.len() {
        let Ev::Head {
            at,
            framing,
            encoding: ContentEncoding::Identity,
            ..
        } = events[i]
        else {
            i += 1;
            continue;
        };
        let (mut body, mut end) = (Vec::new(), None);
        i += 1;
        while i < events.len() {
            match &events[i] {
                Ev::Data(d) => body.extend_from_slice(d),
                Ev::End { at, .. } => {
                    end = Some(*at);
                    break;
                }
                Ev::Error(_) => break,
                Ev::Head { .. } => unreachable!("Head inside a response"),
            }
            i += 1;
        }
        let expected: &[u8] = match framing {
            Framing::None => &[],
            Framing::Length(n) => {
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                &stream[at..at.saturating_add(n).min(stream.len())]
            }
            Framing::Close => &stream[at..],
            Framing::Chunked => continue,
        };
        assert!(
            expected.starts_with(&body),
            "identity body is not the stream's bytes"
        );
        if let Some(end) = end {
            assert_eq!(body, expected, "identity body ended early");
            assert_eq!(end, at + expected.len(), "End not right after the body");
        }
    }
}

//! Base64 (RFC 4648, standard alphabet, padded) for the few short values the protocols
//! send: the `Sec-WebSocket-Key` (16 bytes), the `Sec-WebSocket-Accept` value (20) and
//! the role-secret hash (16). Encoding only.
//!
//! Why not the `base64` crate: its general-purpose engine encodes in unrolled 24-byte
//! blocks for speed, about 650 bytes of Cortex-M flash for values encoded once per
//! connection, where this loop is about 100. It is checked against the crate on random
//! inputs of every length up to 64 bytes in the tests. It is not exported.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Writes the base64 of `input` to the front of `out`, which must hold
/// `input.len().div_ceil(3) * 4` bytes (what does not fit is left out).
pub(crate) fn encode(input: &[u8], out: &mut [u8]) {
    let mut out = out.iter_mut();
    for chunk in input.chunks(3) {
        let byte = |i| chunk.get(i).copied().map_or(0, u32::from);
        let bits = byte(0) << 16 | byte(1) << 8 | byte(2);
        // A chunk of n bytes gives n + 1 characters, then `=` up to 4.
        for i in 0..4 {
            let c = if i <= chunk.len() {
                let six = (bits >> (18 - 6 * i)) & 63;
                ALPHABET.get(six as usize).copied().unwrap_or(b'=')
            } else {
                b'='
            };
            if let Some(o) = out.next() {
                *o = c;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::encode;
    use base64::Engine as _;

    #[test]
    fn the_rfc_examples() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            let mut out = [0u8; 8];
            encode(input.as_bytes(), &mut out);
            assert_eq!(&out[..want.len()], want.as_bytes(), "{input}");
        }
    }

    /// Every length up to 64 bytes, against the `base64` crate; a short `out` keeps
    /// what fits and nothing else is touched.
    #[test]
    fn agrees_with_the_base64_crate() {
        let mut rng = crate::testing::Xorshift(0x9E37_79B9_7F4A_7C15);
        for len in 0..=64usize {
            let data: std::vec::Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let mut buf = [0u8; 96];
            let n = base64::engine::general_purpose::STANDARD
                .encode_slice(&data, &mut buf)
                .unwrap();
            let want = std::str::from_utf8(&buf[..n]).unwrap();
            let mut out = [0xAAu8; 96];
            encode(&data, &mut out);
            assert_eq!(&out[..want.len()], want.as_bytes(), "len {len}");
            assert!(out[want.len()..].iter().all(|&b| b == 0xAA), "len {len}");
            let mut short = [0u8; 5];
            encode(&data, &mut short);
            let n = want.len().min(5);
            assert_eq!(&short[..n], &want.as_bytes()[..n], "len {len}");
        }
    }
}

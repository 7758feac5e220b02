//! SHA-1 (FIPS 180-4) for the one thing WebSocket needs it for: the
//! `Sec-WebSocket-Accept` value, a hash of 60 bytes once per connection.
//!
//! Why not the `sha1` crate: its portable backend unrolls all 80 rounds and the message
//! schedule for speed, about 3 KiB of Cortex-M flash; the device agent's whole budget is
//! 48 KiB, and the handshake hashes two blocks per connection, so speed does not matter
//! here and size does. This is the textbook loop (about 400 bytes), checked against the
//! `sha1` crate on random inputs of every length up to three blocks in the tests.
//! It is not a general-purpose hash and is not exported.

/// SHA-1 of the concatenation of `parts`.
pub(crate) fn digest(parts: &[&[u8]]) -> [u8; 20] {
    let len: usize = parts.iter().map(|part| part.len()).sum();
    // The message, 0x80, zeros, and its length in bits as the last 8 bytes of a block.
    let blocks = (len.saturating_add(8) / 64).saturating_add(1);
    let end = blocks.saturating_mul(64);
    let bits = (len as u64).wrapping_mul(8).to_be_bytes();
    let padded = |i: usize| -> u8 {
        if i < len {
            let mut at = i;
            for part in parts {
                match part.get(at) {
                    Some(&byte) => return byte,
                    None => at = at.saturating_sub(part.len()),
                }
            }
            0
        } else if i == len {
            0x80
        } else {
            let from_end = end.saturating_sub(i);
            bits.get(8usize.wrapping_sub(from_end))
                .copied()
                .unwrap_or(0)
        }
    };
    let mut state: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    for block in 0..blocks {
        let mut w = [0u32; 16];
        for (j, word) in w.iter_mut().enumerate() {
            for k in 0..4 {
                *word = (*word << 8) | u32::from(padded(block * 64 + j * 4 + k));
            }
        }
        compress(&mut state, w);
    }
    let mut out = [0u8; 20];
    for (chunk, word) in out.chunks_exact_mut(4).zip(state) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}

/// One 64-byte block as 16 big-endian words: the window of the message schedule rolls
/// in place.
fn compress(state: &mut [u32; 5], mut w: [u32; 16]) {
    let [mut a, mut b, mut c, mut d, mut e] = *state;
    // Indices are taken mod 16, so `get` never misses (the optimiser drops the check).
    let at = |w: &[u32; 16], j: usize| w.get(j & 15).copied().unwrap_or_default();
    for i in 0..80usize {
        if i >= 16 {
            let x = at(&w, i + 13) ^ at(&w, i + 8) ^ at(&w, i + 2) ^ at(&w, i);
            if let Some(slot) = w.get_mut(i & 15) {
                *slot = x.rotate_left(1);
            }
        }
        let (f, k) = match i / 20 {
            0 => ((b & c) | (!b & d), 0x5A82_7999),
            1 => (b ^ c ^ d, 0x6ED9_EBA1),
            2 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
            _ => (b ^ c ^ d, 0xCA62_C1D6),
        };
        let t = a
            .rotate_left(5)
            .wrapping_add(f)
            .wrapping_add(e)
            .wrapping_add(k)
            .wrapping_add(at(&w, i));
        e = d;
        d = c;
        c = b.rotate_left(30);
        b = a;
        a = t;
    }
    for (h, v) in state.iter_mut().zip([a, b, c, d, e]) {
        *h = h.wrapping_add(v);
    }
}

#[cfg(test)]
mod tests;

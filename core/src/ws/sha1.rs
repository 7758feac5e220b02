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
    let mut hasher = Hasher {
        state: [
            0x6745_2301,
            0xEFCD_AB89,
            0x98BA_DCFE,
            0x1032_5476,
            0xC3D2_E1F0,
        ],
        block: [0; 16],
        fill: 0,
    };
    let mut len = 0u64;
    for part in parts {
        for &byte in *part {
            hasher.byte(byte);
        }
        len = len.wrapping_add(part.len() as u64);
    }
    // The message, 0x80, zeros, and its length in bits as the last 8 bytes of a block.
    hasher.byte(0x80);
    while hasher.fill != 56 {
        hasher.byte(0);
    }
    for &byte in &len.wrapping_mul(8).to_be_bytes() {
        hasher.byte(byte);
    }
    let mut out = [0u8; 20];
    for (chunk, word) in out.chunks_exact_mut(4).zip(&hasher.state) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}

/// The state and the block being filled, one byte at a time (no look-ahead over the
/// parts, no padding buffer).
struct Hasher {
    state: [u32; 5],
    /// The block as 16 big-endian words, `fill` bytes of it so far.
    block: [u32; 16],
    fill: usize,
}

impl Hasher {
    fn byte(&mut self, byte: u8) {
        if let Some(word) = self.block.get_mut((self.fill / 4) & 15) {
            *word = (*word << 8) | u32::from(byte);
        }
        self.fill += 1;
        if self.fill == 64 {
            // The block's words are all replaced before the next compression, so the
            // schedule rolls in them.
            compress(&mut self.state, &mut self.block);
            self.fill = 0;
        }
    }
}

/// One 64-byte block as 16 big-endian words: the window of the message schedule rolls
/// in place.
fn compress(state: &mut [u32; 5], w: &mut [u32; 16]) {
    let [mut a, mut b, mut c, mut d, mut e] = *state;
    // Indices are taken mod 16, so `get` never misses (the optimiser drops the check).
    let at = |w: &[u32; 16], j: usize| w.get(j & 15).copied().unwrap_or_default();
    for i in 0..80usize {
        if i >= 16 {
            let x = at(w, i + 13) ^ at(w, i + 8) ^ at(w, i + 2) ^ at(w, i);
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
            .wrapping_add(at(w, i));
        e = d;
        d = c;
        c = b.rotate_left(30);
        b = a;
        a = t;
    }
    let [h0, h1, h2, h3, h4] = *state;
    *state = [
        h0.wrapping_add(a),
        h1.wrapping_add(b),
        h2.wrapping_add(c),
        h3.wrapping_add(d),
        h4.wrapping_add(e),
    ];
}

#[cfg(test)]
mod tests;

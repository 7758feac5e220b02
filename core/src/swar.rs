//! Byte searches a machine word at a time ("SIMD within a register"), for the hot loops
//! of the line splitter and the JSON scanner. Plain integer arithmetic: no `unsafe`, no
//! target features. The word is the target's own ([`Native`]: four bytes on a Cortex-M,
//! eight on a desktop), so a 32-bit MCU never pays for 64-bit arithmetic done in pairs of
//! instructions (440 bytes of flash in the device agent). The masks are written once,
//! for any [`Word`], and tested at both widths on the host.

use core::ops::{BitAnd, BitOr, BitXor, Not, Shl, Shr};

/// An unsigned machine word the byte masks work on.
pub(crate) trait Word:
    Copy
    + PartialEq
    + BitAnd<Output = Self>
    + BitOr<Output = Self>
    + BitXor<Output = Self>
    + Not<Output = Self>
    + Shl<u32, Output = Self>
    + Shr<u32, Output = Self>
{
    /// Bytes in a word.
    const BYTES: usize;
    const ZERO: Self;
    /// `b` in every byte.
    fn repeat(b: u8) -> Self;
    /// The first `BYTES` bytes of `bytes`, little-endian; `None` when there are fewer.
    fn load(bytes: &[u8]) -> Option<Self>;
    fn wrapping_add(self, other: Self) -> Self;
    fn wrapping_sub(self, other: Self) -> Self;
    fn trailing_zeros(self) -> u32;
    /// The lowest set bit alone.
    fn lowest(self) -> Self;
}

macro_rules! word {
    ($t:ty) => {
        impl Word for $t {
            const BYTES: usize = core::mem::size_of::<$t>();
            const ZERO: Self = 0;
            fn repeat(b: u8) -> Self {
                <$t>::MAX / 0xFF * <$t>::from(b)
            }
            fn load(bytes: &[u8]) -> Option<Self> {
                let word = bytes.get(..Self::BYTES)?.try_into().ok()?;
                Some(<$t>::from_le_bytes(word))
            }
            fn wrapping_add(self, other: Self) -> Self {
                <$t>::wrapping_add(self, other)
            }
            fn wrapping_sub(self, other: Self) -> Self {
                <$t>::wrapping_sub(self, other)
            }
            fn trailing_zeros(self) -> u32 {
                <$t>::trailing_zeros(self)
            }
            fn lowest(self) -> Self {
                self & self.wrapping_neg()
            }
        }
    };
}
word!(u32);
word!(u64);

/// The target's word.
#[cfg(target_pointer_width = "64")]
pub(crate) type Native = u64;
/// The target's word.
#[cfg(not(target_pointer_width = "64"))]
pub(crate) type Native = u32;

/// Bits in a word.
pub(crate) fn bits<W: Word>() -> u32 {
    (W::BYTES * 8) as u32
}

/// The index, in its word, of the byte a flag stands for.
pub(crate) fn flag_byte<W: Word>(flags: W) -> usize {
    (flags.trailing_zeros() / 8) as usize
}

/// Flags (high bit) the zero bytes of `x`. The lowest flag is always right; higher ones
/// may be false alarms from a borrow, which is why callers only use the lowest.
pub(crate) fn zero_bytes<W: Word>(x: W) -> W {
    x.wrapping_sub(W::repeat(1)) & !x & W::repeat(0x80)
}

/// Flags (high bit) the bytes of `x` below `n` (`n` at most 128); lowest flag right.
pub(crate) fn bytes_below<W: Word>(x: W, n: u8) -> W {
    x.wrapping_sub(W::repeat(n)) & !x & W::repeat(0x80)
}

/// Flags (high bit) exactly the bytes of `x` equal to `b`: no false alarms, so every
/// flag may be used, not only the lowest.
pub(crate) fn eq_bytes<W: Word>(x: W, b: u8) -> W {
    let t = x ^ W::repeat(b);
    !((t & W::repeat(0x7f)).wrapping_add(W::repeat(0x7f)) | t) & W::repeat(0x80)
}

/// Each byte's flag (high bit) XOR the flags of the bytes before it: with quotes flagged,
/// the bytes from an opening quote up to (not including) its closing one.
pub(crate) fn prefix_xor<W: Word>(flags: W) -> W {
    let mut x = flags;
    let mut shift = 8;
    while shift < bits::<W>() {
        x = x ^ (x << shift);
        shift *= 2;
    }
    x
}

/// The index of the first byte of `data` that `hits` flags in its word, or that `is`
/// holds for among the last bytes (fewer than a word). `hits` and `is` must agree.
pub(crate) fn find<W: Word>(
    data: &[u8],
    hits: impl Fn(W) -> W,
    is: impl Fn(u8) -> bool,
) -> Option<usize> {
    let mut base = 0usize;
    let mut words = data.chunks_exact(W::BYTES);
    for word in &mut words {
        let Some(w) = W::load(word) else {
            break;
        };
        let h = hits(w);
        if h != W::ZERO {
            return Some(base + flag_byte(h));
        }
        base += W::BYTES;
    }
    words
        .remainder()
        .iter()
        .position(|&b| is(b))
        .map(|i| base + i)
}

/// The index of the first `needle` in `data`.
pub(crate) fn find_byte(data: &[u8], needle: u8) -> Option<usize> {
    find(
        data,
        |w: Native| zero_bytes(w ^ Native::repeat(needle)),
        |b| b == needle,
    )
}

/// Flags (high bit) the bytes of `x` that are not ASCII digits; the lowest flag is right.
// Only the sample parser's one pass uses it, on 64-bit targets (`bench::samples`).
#[cfg_attr(not(target_pointer_width = "64"), allow(dead_code))]
pub(crate) fn non_digits<W: Word>(x: W) -> W {
    (x | x.wrapping_sub(W::repeat(b'0')) | x.wrapping_add(W::repeat(0x7f - b'9'))) & W::repeat(0x80)
}

/// How many ASCII digits `data` starts with.
// Only the sample parser's one pass uses it, on 64-bit targets (`bench::samples`).
#[cfg_attr(not(target_pointer_width = "64"), allow(dead_code))]
pub(crate) fn digit_run(data: &[u8]) -> usize {
    find::<Native>(data, non_digits, |b| !b.is_ascii_digit()).unwrap_or(data.len())
}

/// The value of up to 19 ASCII digits (the caller checked that they are digits), eight
/// at a time.
// Only the sample parser's one pass uses it, on 64-bit targets (`bench::samples`).
#[cfg_attr(not(target_pointer_width = "64"), allow(dead_code))]
pub(crate) fn decimal(digits: &[u8]) -> u64 {
    let mut value = 0u64;
    let mut words = digits.chunks_exact(8);
    for word in &mut words {
        let Ok(bytes) = <[u8; 8]>::try_from(word) else {
            break;
        };
        // Big-endian digit order in a little-endian word: pair, then quad, then octet.
        let x = u64::from_le_bytes(bytes).wrapping_sub(u64::repeat(b'0'));
        let x = (x.wrapping_mul(10) + (x >> 8)) & 0x00ff_00ff_00ff_00ff;
        let x = (x.wrapping_mul(100) + (x >> 16)) & 0x0000_ffff_0000_ffff;
        let x = (x.wrapping_mul(10_000) + (x >> 32)) & 0xffff_ffff;
        value = value.wrapping_mul(100_000_000).wrapping_add(x);
    }
    for &b in words.remainder() {
        value = value
            .wrapping_mul(10)
            .wrapping_add(u64::from(b.wrapping_sub(b'0')));
    }
    value
}

#[cfg(test)]
mod tests;

//! The gzip member wrapper (RFC 1952) around a raw deflate stream: an incremental header
//! parser, the trailer check and CRC-32. miniz_oxide's low-level inflater only knows zlib
//! and raw deflate, so the wrapper is parsed here, one byte at a time, which makes any split
//! of the input trivially give the same result.

use super::decode_error::GzipError;

const FHCRC: u8 = 0x02;
const FEXTRA: u8 = 0x04;
const FNAME: u8 = 0x08;
const FCOMMENT: u8 = 0x10;
const RESERVED: u8 = 0xE0;

/// Where the header parser is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// The 10 fixed bytes; the value is how many were seen.
    Fixed(u8),
    /// The two XLEN bytes (little endian), `seen` of them so far.
    ExtraLen { seen: u8, len: u16 },
    /// Skipping the extra field.
    Extra { left: u16 },
    /// Skipping the zero-terminated file name.
    Name,
    /// Skipping the zero-terminated comment.
    Comment,
    /// The two header CRC bytes, `seen` of them so far.
    HeaderCrc { seen: u8, crc: u16 },
    /// Header complete: deflate data follows.
    Done,
}

/// Incremental RFC 1952 member header parser. Names and comments are skipped, not kept:
/// nothing here grows with the input.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GzipHeader {
    field: Field,
    flags: u8,
    crc: Crc32,
}

impl GzipHeader {
    pub(crate) const fn new() -> Self {
        GzipHeader {
            field: Field::Fixed(0),
            flags: 0,
            crc: Crc32::new(),
        }
    }

    /// True before the first byte of the header: a body may cleanly end here (between
    /// members).
    pub(crate) fn is_untouched(&self) -> bool {
        self.field == Field::Fixed(0)
    }

    /// Feeds header bytes; returns how many were consumed and whether the header is
    /// complete (then the remaining input is deflate data).
    pub(crate) fn push(&mut self, input: &[u8]) -> Result<(usize, bool), GzipError> {
        for (i, &b) in input.iter().enumerate() {
            if self.byte(b)? {
                return Ok((i.saturating_add(1), true));
            }
        }
        Ok((input.len(), false))
    }

    fn byte(&mut self, b: u8) -> Result<bool, GzipError> {
        if !matches!(self.field, Field::HeaderCrc { .. }) {
            self.crc.update(&[b]);
        }
        self.field = match self.field {
            Field::Fixed(n) => {
                match (n, b) {
                    (0, 0x1F) | (1, 0x8B) | (2, 8) => {}
                    (0..=2, _) => return Err(GzipError::BadMagic),
                    (3, flags) if flags & RESERVED != 0 => return Err(GzipError::ReservedFlags),
                    (3, flags) => self.flags = flags,
                    _ => {}
                }
                if n < 9 {
                    Field::Fixed(n.saturating_add(1))
                } else {
                    self.next_field(0)
                }
            }
            Field::ExtraLen { seen: 0, .. } => Field::ExtraLen {
                seen: 1,
                len: u16::from(b),
            },
            Field::ExtraLen { len, .. } => match len | u16::from(b) << 8 {
                0 => self.next_field(1),
                left => Field::Extra { left },
            },
            Field::Extra { left } => match left.saturating_sub(1) {
                0 => self.next_field(1),
                left => Field::Extra { left },
            },
            Field::Name if b == 0 => self.next_field(2),
            Field::Comment if b == 0 => self.next_field(3),
            Field::Name | Field::Comment => self.field,
            Field::HeaderCrc { seen: 0, .. } => Field::HeaderCrc {
                seen: 1,
                crc: u16::from(b),
            },
            Field::HeaderCrc { crc, .. } => {
                let expected = crc | u16::from(b) << 8;
                if expected != (self.crc.value() & 0xFFFF) as u16 {
                    return Err(GzipError::HeaderCrc);
                }
                Field::Done
            }
            Field::Done => Field::Done,
        };
        Ok(self.field == Field::Done)
    }

    /// The first optional field present at or after position `from` in RFC 1952 order
    /// (0 = extra, 1 = name, 2 = comment, 3 = header CRC), or the end of the header.
    fn next_field(&self, from: usize) -> Field {
        [
            (FEXTRA, Field::ExtraLen { seen: 0, len: 0 }),
            (FNAME, Field::Name),
            (FCOMMENT, Field::Comment),
            (FHCRC, Field::HeaderCrc { seen: 0, crc: 0 }),
        ]
        .into_iter()
        .skip(from)
        .find(|(flag, _)| self.flags & flag != 0)
        .map_or(Field::Done, |(_, field)| field)
    }
}

/// The 8-byte member trailer (CRC-32 and ISIZE, little endian), collected incrementally.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GzipTrailer {
    bytes: [u8; 8],
    seen: u8,
}

impl GzipTrailer {
    pub(crate) const fn new() -> Self {
        GzipTrailer {
            bytes: [0; 8],
            seen: 0,
        }
    }

    /// Feeds trailer bytes; returns how many were consumed and, once all 8 are there,
    /// whether they match the decompressed data's `crc` and `size`.
    pub(crate) fn push(
        &mut self,
        input: &[u8],
        crc: u32,
        size: u32,
    ) -> Result<(usize, bool), GzipError> {
        let mut used = 0;
        for &b in input {
            let Some(slot) = self.bytes.get_mut(usize::from(self.seen)) else {
                break;
            };
            *slot = b;
            self.seen = self.seen.saturating_add(1);
            used += 1;
        }
        if usize::from(self.seen) < self.bytes.len() {
            return Ok((used, false));
        }
        let [c0, c1, c2, c3, s0, s1, s2, s3] = self.bytes;
        if u32::from_le_bytes([c0, c1, c2, c3]) != crc {
            return Err(GzipError::Crc);
        }
        if u32::from_le_bytes([s0, s1, s2, s3]) != size {
            return Err(GzipError::Size);
        }
        Ok((used, true))
    }
}

/// CRC-32 (IEEE, reflected, as gzip uses) with a 16-entry table: 64 bytes of flash
/// instead of 1 KiB, fast enough for the rare gzip response.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Crc32(u32);

// Evaluated at compile time, where an out-of-range index could only fail the build.
#[allow(clippy::indexing_slicing)]
const CRC_NIBBLES: [u32; 16] = {
    let mut table = [0u32; 16];
    let mut i = 0;
    while i < 16 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 4 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

impl Crc32 {
    pub(crate) const fn new() -> Self {
        Crc32(0xFFFF_FFFF)
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        let nibble = |c: u32| CRC_NIBBLES.get((c & 0xF) as usize).copied().unwrap_or(0) ^ (c >> 4);
        for &b in bytes {
            self.0 = nibble(nibble(self.0 ^ u32::from(b)));
        }
    }

    pub(crate) fn value(&self) -> u32 {
        !self.0
    }
}

#[cfg(test)]
mod tests;

//! Content codings: `identity` passes through untouched; `deflate` and `gzip` are inflated
//! with miniz_oxide's low-level, allocation-free decompressor into a caller-provided
//! window.
//!
//! - The body is **one** continuous compressed stream, whatever the chunk boundaries (the
//!   benchmark server's live logs are one zlib stream sent in chunks of at most 1024
//!   bytes), so a single decompressor state runs across all of it.
//! - `deflate` means zlib (RFC 1950) per HTTP, but some servers send raw deflate: like
//!   urllib3, the first two bytes decide — a valid zlib header means zlib, anything else
//!   raw deflate. The zlib header's window size (CINFO) is checked against the caller's
//!   window up front, so a too-small window is a typed error rather than corrupt output.
//! - `gzip` members (RFC 1952) are unwrapped here ([`super::gzip`]); the trailer's CRC-32
//!   and length are checked when present, and concatenated members are decoded in turn.
//! - Everything decodable is delivered as soon as its input arrives, which is what makes a
//!   sync flush (`00 00 FF FF`) flush text out to the caller immediately.
//! - A stream that stops before its end (no final block, or no Adler-32/gzip trailer) while
//!   the HTTP body itself ends cleanly is tolerated, as zlib's `decompressobj` and urllib3
//!   tolerate it: the real server's live log streams can end that way. The `End` event says
//!   so with `coding_complete: false`. A body cut short at the HTTP level is still an error.
//!
//! Without the `deflate` feature none of the inflate code (nor miniz_oxide) is built:
//! [`InflateMemory`] has no values, so decoders always run without inflate memory, and a
//! compressed body is [`DecodeError::CompressedBodyUnsupported`].

#[cfg(feature = "deflate")]
use miniz_oxide::inflate::core::inflate_flags::{
    TINFL_FLAG_HAS_MORE_INPUT, TINFL_FLAG_PARSE_ZLIB_HEADER,
};
#[cfg(feature = "deflate")]
use miniz_oxide::inflate::core::{decompress, DecompressorOxide};
#[cfg(feature = "deflate")]
use miniz_oxide::inflate::TINFLStatus;

use super::decode_error::DecodeError;
#[cfg(feature = "deflate")]
use super::gzip::{Crc32, GzipHeader, GzipTrailer};

/// The content coding a response announces in `Content-Encoding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ContentEncoding {
    /// No coding (also: header absent).
    Identity,
    /// `deflate`: zlib, or raw deflate from servers that get it wrong.
    Deflate,
    /// `gzip` or `x-gzip`.
    Gzip,
    /// Anything else, or more than one coding stacked.
    Other,
}

impl ContentEncoding {
    /// The coding named by `Content-Encoding` value(s): a comma-separated list, codings
    /// compared case-insensitively, `identity` entries ignored.
    ///
    /// ```
    /// use benchlink_core::http::ContentEncoding;
    /// assert_eq!(ContentEncoding::from_header(b"Deflate"), ContentEncoding::Deflate);
    /// assert_eq!(ContentEncoding::from_header(b"identity, x-gzip"), ContentEncoding::Gzip);
    /// assert_eq!(ContentEncoding::from_header(b"gzip, br"), ContentEncoding::Other);
    /// ```
    pub fn from_header(value: &[u8]) -> Self {
        let mut found = ContentEncoding::Identity;
        for token in super::response::elements(value) {
            let this = match token {
                t if t.is_empty() || t.eq_ignore_ascii_case(b"identity") => continue,
                t if t.eq_ignore_ascii_case(b"deflate") => ContentEncoding::Deflate,
                t if t.eq_ignore_ascii_case(b"gzip") || t.eq_ignore_ascii_case(b"x-gzip") => {
                    ContentEncoding::Gzip
                }
                _ => ContentEncoding::Other,
            };
            found = if found == ContentEncoding::Identity {
                this
            } else {
                ContentEncoding::Other
            };
        }
        found
    }

    /// Combines the codings of several `Content-Encoding` header lines, applied in order.
    pub(crate) fn then(self, next: ContentEncoding) -> ContentEncoding {
        match (self, next) {
            (ContentEncoding::Identity, c) | (c, ContentEncoding::Identity) => c,
            _ => ContentEncoding::Other,
        }
    }
}

/// Borrowed memory for inflating (with the `deflate` feature): the decompressor state (about 11 KB) and the output
/// window. On a microcontroller they are statics (or one [`InflateBuffers`] in a static
/// cell), on std a `Box`. Decoded data is handed out as slices of the window, so the
/// window is also the only output buffer.
///
/// The window must be a power of two of at least 256 bytes. zlib streams announce their
/// window and are checked against it; the benchmark server's logs need 32 KiB (`78 9C`).
/// gzip and raw deflate announce nothing and may reach back 32 KiB, so a smaller window
/// only works for senders known to use one; a reach beyond it is a typed error.
///
/// ```
/// use benchlink_core::http::{DecompressorOxide, InflateMemory};
/// let mut state = Box::new(DecompressorOxide::new());
/// let mut window = vec![0u8; 32 * 1024];
/// let memory = InflateMemory::new(&mut state, &mut window).unwrap();
/// assert_eq!(memory.window_len(), 32768);
/// assert!(InflateMemory::new(&mut state, &mut [0u8; 1000]).is_err());
/// ```
#[cfg(feature = "deflate")]
pub struct InflateMemory<'m> {
    state: &'m mut DecompressorOxide,
    window: &'m mut [u8],
}

/// Inflate memory, which cannot exist without the `deflate` feature: this type has no
/// values, so the only argument [`ResponseDecoder::new`](super::ResponseDecoder::new)
/// takes for it is `None`, and a compressed body is
/// [`DecodeError::CompressedBodyUnsupported`]. Enable the feature to inflate `deflate`
/// and `gzip` bodies.
#[cfg(not(feature = "deflate"))]
pub struct InflateMemory<'m> {
    never: core::convert::Infallible,
    _memory: core::marker::PhantomData<&'m mut [u8]>,
}

#[cfg(not(feature = "deflate"))]
impl InflateMemory<'_> {
    /// Proof that a value does not exist.
    pub(crate) fn unreachable(&self) -> ! {
        match self.never {}
    }

    /// See the `deflate` build; never called here (there is no value to call it on).
    pub fn reborrow(&mut self) -> InflateMemory<'_> {
        self.unreachable()
    }

    /// See the `deflate` build; never called here (there is no value to call it on).
    pub fn window_len(&self) -> usize {
        self.unreachable()
    }
}

#[cfg(not(feature = "deflate"))]
impl core::fmt::Debug for InflateMemory<'_> {
    fn fmt(&self, _: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.unreachable()
    }
}

#[cfg(feature = "deflate")]
impl core::fmt::Debug for InflateMemory<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("InflateMemory")
            .field("window_len", &self.window.len())
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "deflate")]
impl<'m> InflateMemory<'m> {
    /// Checks that `window` is a power of two of at least 256 bytes and pairs it with a
    /// decompressor state (whose previous content does not matter).
    ///
    /// ```
    /// use benchlink_core::http::{DecodeError, DecompressorOxide, InflateMemory};
    /// let mut state = DecompressorOxide::new();
    /// let mut window = [0u8; 4096];
    /// assert!(InflateMemory::new(&mut state, &mut window).is_ok());
    /// let mut odd = [0u8; 100];
    /// assert_eq!(InflateMemory::new(&mut state, &mut odd).err(), Some(DecodeError::InvalidWindow { len: 100 }));
    /// ```
    pub fn new(
        state: &'m mut DecompressorOxide,
        window: &'m mut [u8],
    ) -> Result<Self, DecodeError> {
        let len = window.len();
        if !len.is_power_of_two() || len < MIN_WINDOW {
            return Err(DecodeError::InvalidWindow { len });
        }
        Ok(InflateMemory { state, window })
    }

    /// Size of the output window.
    ///
    /// ```
    /// use benchlink_core::http::InflateBuffers;
    /// assert_eq!(InflateBuffers::<8192>::new().memory().window_len(), 8192);
    /// ```
    pub fn window_len(&self) -> usize {
        self.window.len()
    }

    /// The same memory, borrowed again for one more decoder: keep one `InflateMemory`
    /// (validated once) and give each response `Some(memory.reborrow())`. Each stream
    /// resets the state and zeroes the window before use, so nothing leaks from one
    /// response into the next.
    ///
    /// ```
    /// use benchlink_core::http::{DecompressorOxide, InflateMemory, Limits, ResponseDecoder};
    /// let (mut state, mut window) = (Box::new(DecompressorOxide::new()), vec![0u8; 32768]);
    /// let mut memory = InflateMemory::new(&mut state, &mut window).unwrap();
    /// let mut head_buf = [0u8; 512];
    /// for _response in 0..2 {
    ///     let dec: ResponseDecoder = ResponseDecoder::new(&mut head_buf, Some(memory.reborrow()), Limits::DEFAULT);
    ///     # drop(dec);
    /// }
    /// assert_eq!(memory.window_len(), 32768);
    /// ```
    pub fn reborrow(&mut self) -> InflateMemory<'_> {
        InflateMemory {
            state: &mut *self.state,
            window: &mut *self.window,
        }
    }
}

#[cfg(feature = "deflate")]
const MIN_WINDOW: usize = 256;

/// Decompressor state and window in one value, for callers that keep them together:
/// `Box::new(InflateBuffers::<32768>::new())` on std, a static cell on a device. `WINDOW`
/// is checked at compile time.
///
/// ```
/// use benchlink_core::http::InflateBuffers;
/// let mut buffers = Box::new(InflateBuffers::<32768>::new());
/// let memory = buffers.memory();
/// assert_eq!(memory.window_len(), 32768);
/// ```
#[cfg(feature = "deflate")]
pub struct InflateBuffers<const WINDOW: usize> {
    state: DecompressorOxide,
    window: [u8; WINDOW],
}

#[cfg(feature = "deflate")]
impl<const WINDOW: usize> core::fmt::Debug for InflateBuffers<WINDOW> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("InflateBuffers")
            .field("window_len", &WINDOW)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "deflate")]
impl<const WINDOW: usize> Default for InflateBuffers<WINDOW> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "deflate")]
impl<const WINDOW: usize> InflateBuffers<WINDOW> {
    const VALID: () = assert!(
        WINDOW.is_power_of_two() && WINDOW >= MIN_WINDOW,
        "window must be a power of two >= 256"
    );

    /// Fresh buffers (on the stack: box or place them in a static right away).
    ///
    /// ```
    /// use benchlink_core::http::InflateBuffers;
    /// let buffers = InflateBuffers::<1024>::new();
    /// # let _ = buffers;
    /// ```
    pub fn new() -> Self {
        let () = Self::VALID;
        InflateBuffers {
            state: DecompressorOxide::new(),
            window: [0; WINDOW],
        }
    }

    /// The memory for [`ResponseDecoder::new`](super::ResponseDecoder::new).
    ///
    /// ```
    /// use benchlink_core::http::InflateBuffers;
    /// let mut buffers = InflateBuffers::<256>::new();
    /// assert_eq!(buffers.memory().window_len(), 256);
    /// ```
    pub fn memory(&mut self) -> InflateMemory<'_> {
        let () = Self::VALID;
        InflateMemory {
            state: &mut self.state,
            window: &mut self.window,
        }
    }
}

/// Where decoded bytes are, relative to what [`ContentDecoder::step`] was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// Nothing yet.
    None,
    /// The first `len` bytes of the input (identity: zero copy).
    Input { len: usize },
    /// `window[start..start + len]`.
    #[cfg(feature = "deflate")]
    Window { start: usize, len: usize },
}

impl Output {
    pub(crate) fn len(self) -> usize {
        match self {
            Output::None => 0,
            Output::Input { len } => len,
            #[cfg(feature = "deflate")]
            Output::Window { len, .. } => len,
        }
    }

    /// The first `max` bytes of the output at most.
    pub(crate) fn truncated(self, max: usize) -> Output {
        match self {
            Output::None => Output::None,
            Output::Input { len } => Output::Input { len: len.min(max) },
            #[cfg(feature = "deflate")]
            Output::Window { start, len } => Output::Window {
                start,
                len: len.min(max),
            },
        }
    }
}

/// Where a compressed stream is.
#[cfg(feature = "deflate")]
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// `identity`: bytes pass through.
    Identity,
    /// `deflate`, waiting for the two bytes that tell zlib from raw deflate.
    Sniff { first: Option<u8> },
    /// The two sniffed bytes, not yet all given to the decompressor.
    Sniffed { bytes: [u8; 2], fed: u8, zlib: bool },
    /// A gzip member header.
    GzipHeader(GzipHeader),
    /// Deflate data; `flags` for miniz, `gzip` to run the CRC and expect a trailer.
    Inflate { flags: u32, gzip: bool },
    /// A gzip member trailer.
    GzipTrailer(GzipTrailer),
    /// A zlib or raw deflate stream ended; nothing more may follow.
    Finished,
}

/// The content-decoding half of a response body: small, the big memory is borrowed.
#[cfg(feature = "deflate")]
#[derive(Debug, Clone, Copy)]
pub(crate) struct ContentDecoder {
    encoding: ContentEncoding,
    phase: Phase,
    /// Write position in the window.
    pos: usize,
    /// The decompressor stopped because the window end was reached: call again even
    /// without input.
    more_output: bool,
    crc: Crc32,
    size: u32,
    /// A failure found in a call that also produced output: the output goes out first,
    /// the error on the next call, so the delivered bytes do not depend on the split.
    failed: Option<DecodeError>,
}

#[cfg(feature = "deflate")]
impl ContentDecoder {
    pub(crate) fn new(encoding: ContentEncoding) -> Self {
        let phase = match encoding {
            ContentEncoding::Deflate => Phase::Sniff { first: None },
            ContentEncoding::Gzip => Phase::GzipHeader(GzipHeader::new()),
            ContentEncoding::Identity | ContentEncoding::Other => Phase::Identity,
        };
        ContentDecoder {
            encoding,
            phase,
            pos: 0,
            more_output: false,
            crc: Crc32::new(),
            size: 0,
            failed: None,
        }
    }

    /// True when decoded output is due even without new input.
    pub(crate) fn has_pending(&self) -> bool {
        self.more_output || self.failed.is_some() || matches!(self.phase, Phase::Sniffed { .. })
    }

    /// True when [`ContentDecoder::step`] would pass any non-empty input through as it
    /// is, so the caller may skip the call (the common, uncompressed case).
    #[inline]
    pub(crate) fn passes_through(&self) -> bool {
        matches!(self.phase, Phase::Identity)
            && self.failed.is_none()
            && self.encoding != ContentEncoding::Other
    }

    /// True when the coded stream ended properly (always, for identity). Meaningful once
    /// no output is pending.
    pub(crate) fn is_complete(&self) -> bool {
        match self.phase {
            Phase::Identity | Phase::Finished | Phase::Sniff { first: None } => true,
            Phase::GzipHeader(h) => h.is_untouched(),
            _ => false,
        }
    }

    /// Decodes from the front of `input` until some output is ready or the input is used
    /// up; returns the bytes consumed and the output. Returns no output only when all of
    /// `input` was consumed.
    pub(crate) fn step(
        &mut self,
        memory: Option<&mut InflateMemory<'_>>,
        input: &[u8],
    ) -> Result<(usize, Output), DecodeError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if let Phase::Identity = self.phase {
            return match self.encoding {
                _ if input.is_empty() => Ok((0, Output::None)),
                ContentEncoding::Other => Err(DecodeError::UnsupportedContentEncoding),
                _ => Ok((input.len(), Output::Input { len: input.len() })),
            };
        }
        let Some(memory) = memory else {
            return match input.is_empty() {
                true => Ok((0, Output::None)),
                false => Err(DecodeError::CompressedBodyUnsupported {
                    encoding: self.encoding,
                }),
            };
        };
        let mut used = 0;
        loop {
            let rest = input.get(used..).unwrap_or_default();
            match self.phase {
                Phase::Inflate { flags, gzip } => {
                    let (n, out) = self.inflate(memory, rest, flags, gzip)?;
                    used += n;
                    if out != Output::None || used == input.len() {
                        return Ok((used, out));
                    }
                    // Otherwise the phase moved on (stream end): loop.
                }
                Phase::Sniffed { bytes, fed, zlib } => {
                    let flags = if zlib {
                        TINFL_FLAG_PARSE_ZLIB_HEADER
                    } else {
                        0
                    };
                    let pending = bytes.get(usize::from(fed)..).unwrap_or_default();
                    let (n, out) = self.inflate(memory, pending, flags, false)?;
                    if let Phase::Sniffed { .. } = self.phase {
                        let fed = usize::from(fed).saturating_add(n);
                        self.phase = match fed >= bytes.len() {
                            true => Phase::Inflate { flags, gzip: false },
                            false => Phase::Sniffed {
                                bytes,
                                fed: fed as u8,
                                zlib,
                            },
                        };
                    }
                    if out != Output::None {
                        return Ok((used, out));
                    }
                }
                _ if rest.is_empty() => return Ok((used, Output::None)),
                Phase::Sniff { first: None } => {
                    self.phase = Phase::Sniff {
                        first: rest.first().copied(),
                    };
                    used += 1;
                }
                Phase::Sniff { first: Some(cmf) } => {
                    let flg = rest.first().copied().unwrap_or(0);
                    used += 1;
                    let zlib = is_zlib_header(cmf, flg);
                    if zlib {
                        let needed = 1usize << (usize::from(cmf >> 4) + 8);
                        if needed > memory.window.len() {
                            return Err(DecodeError::WindowTooSmall {
                                needed,
                                available: memory.window.len(),
                            });
                        }
                    }
                    self.start_stream(memory);
                    self.phase = Phase::Sniffed {
                        bytes: [cmf, flg],
                        fed: 0,
                        zlib,
                    };
                }
                Phase::GzipHeader(mut header) => {
                    let (n, done) = header.push(rest)?;
                    used += n;
                    self.phase = Phase::GzipHeader(header);
                    if done {
                        self.start_stream(memory);
                        self.crc = Crc32::new();
                        self.size = 0;
                        self.phase = Phase::Inflate {
                            flags: 0,
                            gzip: true,
                        };
                    }
                }
                Phase::GzipTrailer(mut trailer) => {
                    let (n, done) = trailer.push(rest, self.crc.value(), self.size)?;
                    used += n;
                    self.phase = match done {
                        true => Phase::GzipHeader(GzipHeader::new()),
                        false => Phase::GzipTrailer(trailer),
                    };
                }
                Phase::Finished => return Err(DecodeError::TrailingData),
                Phase::Identity => return Ok((used, Output::None)),
            }
        }
    }

    /// A new stream starts with a fresh decompressor and a zeroed window, so a corrupt
    /// stream can never echo a previous response's bytes.
    fn start_stream(&mut self, memory: &mut InflateMemory<'_>) {
        memory.state.init();
        memory.window.fill(0);
        self.pos = 0;
        self.more_output = false;
    }

    /// One call into miniz: decodes into the window at the write position, up to the
    /// window end at most.
    fn inflate(
        &mut self,
        memory: &mut InflateMemory<'_>,
        input: &[u8],
        flags: u32,
        gzip: bool,
    ) -> Result<(usize, Output), DecodeError> {
        let corrupt = DecodeError::InvalidCompressedData {
            encoding: self.encoding,
        };
        let (status, used, written) = decompress(
            memory.state,
            input,
            memory.window,
            self.pos,
            flags | TINFL_FLAG_HAS_MORE_INPUT,
        );
        let start = self.pos;
        let produced = memory
            .window
            .get(start..start.saturating_add(written))
            .ok_or(corrupt)?;
        if gzip {
            self.crc.update(produced);
            self.size = self.size.wrapping_add(written as u32);
        }
        // The window length is a power of two: wrap to its start after reaching its end.
        self.pos = start.saturating_add(written) & memory.window.len().saturating_sub(1);
        self.more_output = status == TINFLStatus::HasMoreOutput;
        let failure = match status {
            TINFLStatus::Done => {
                self.phase = if gzip {
                    Phase::GzipTrailer(GzipTrailer::new())
                } else {
                    Phase::Finished
                };
                None
            }
            // Zero progress on non-empty input would spin the caller's loop.
            TINFLStatus::NeedsMoreInput | TINFLStatus::HasMoreOutput => {
                (used == 0 && written == 0 && !input.is_empty()).then_some(corrupt)
            }
            TINFLStatus::Adler32Mismatch => Some(DecodeError::ChecksumMismatch),
            _ => Some(corrupt),
        };
        match (failure, written) {
            (Some(e), 0) => Err(e),
            (failure, _) => {
                self.failed = failure;
                let out = if written == 0 {
                    Output::None
                } else {
                    Output::Window {
                        start,
                        len: written,
                    }
                };
                Ok((used, out))
            }
        }
    }

    /// The decoded bytes `out` refers to, in `input` or the window.
    pub(crate) fn output<'a>(
        memory: Option<&'a InflateMemory<'_>>,
        input: &'a [u8],
        out: Output,
    ) -> &'a [u8] {
        match (out, memory) {
            (Output::Input { len }, _) => input.get(..len).unwrap_or_default(),
            (Output::Window { start, len }, Some(m)) => m
                .window
                .get(start..start.saturating_add(len))
                .unwrap_or_default(),
            _ => &[],
        }
    }
}

/// Without the `deflate` feature: identity bodies pass through, compressed ones are
/// refused as soon as they have a byte.
#[cfg(not(feature = "deflate"))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct ContentDecoder {
    encoding: ContentEncoding,
}

#[cfg(not(feature = "deflate"))]
impl ContentDecoder {
    pub(crate) fn new(encoding: ContentEncoding) -> Self {
        ContentDecoder { encoding }
    }

    pub(crate) fn has_pending(&self) -> bool {
        false
    }

    /// True when [`ContentDecoder::step`] would pass any non-empty input through.
    #[inline]
    pub(crate) fn passes_through(&self) -> bool {
        self.encoding == ContentEncoding::Identity
    }

    pub(crate) fn is_complete(&self) -> bool {
        true
    }

    pub(crate) fn step(
        &mut self,
        memory: Option<&mut InflateMemory<'_>>,
        input: &[u8],
    ) -> Result<(usize, Output), DecodeError> {
        if let Some(m) = memory {
            m.unreachable();
        }
        match self.encoding {
            _ if input.is_empty() => Ok((0, Output::None)),
            ContentEncoding::Identity => Ok((input.len(), Output::Input { len: input.len() })),
            ContentEncoding::Other => Err(DecodeError::UnsupportedContentEncoding),
            encoding => Err(DecodeError::CompressedBodyUnsupported { encoding }),
        }
    }

    pub(crate) fn output<'a>(
        _memory: Option<&'a InflateMemory<'_>>,
        input: &'a [u8],
        out: Output,
    ) -> &'a [u8] {
        match out {
            Output::Input { len } => input.get(..len).unwrap_or_default(),
            Output::None => &[],
        }
    }
}

/// RFC 1950 header check, as zlib and urllib3 decide "is this zlib?": method 8, window
/// at most 32 KiB, no preset dictionary, and the check bits.
#[cfg(feature = "deflate")]
fn is_zlib_header(cmf: u8, flg: u8) -> bool {
    cmf & 0x0F == 8
        && cmf >> 4 <= 7
        && flg & 0x20 == 0
        && (u16::from(cmf) << 8 | u16::from(flg)) % 31 == 0
}

#[cfg(all(test, feature = "deflate"))]
mod tests;

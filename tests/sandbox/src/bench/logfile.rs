//! A benchmark's log file (`log.txt` / `log_user.txt`) as the real server's writer
//! process produces it: one zlib stream (RFC 1950) that grows while the benchmark runs,
//! sync-flushed every 100 writes, every flush interval and at close, then finished
//! with the Adler-32 trailer. Streams serve these bytes verbatim.

use flate2::{Compress, Compression, FlushCompress, Status};

use super::config::LogCompression;

/// Number of writes after which the writer sync-flushes (the real server's constant).
const WRITES_PER_FLUSH: u32 = 100;

/// The stored bytes of one log and the compressor still writing to it.
#[derive(Debug)]
pub(crate) struct LogFile {
    bytes: Vec<u8>,
    compress: Option<Compress>,
    unflushed_writes: u32,
    last_flush_ms: u64,
    closed: bool,
}

impl LogFile {
    /// An empty log; with `Deflate` the zlib header appears with the first flush.
    pub(crate) fn new(compression: LogCompression, now_ms: u64) -> LogFile {
        let compress = match compression {
            LogCompression::Deflate => Some(Compress::new(Compression::default(), true)),
            LogCompression::Identity => None,
        };
        LogFile {
            bytes: Vec::new(),
            compress,
            unflushed_writes: 0,
            last_flush_ms: now_ms,
            closed: false,
        }
    }

    /// Appends one line (a `\n` is added).
    pub(crate) fn write_line(&mut self, line: &str, now_ms: u64) {
        if self.closed {
            return;
        }
        let mut text = String::with_capacity(line.len() + 1);
        text.push_str(line);
        text.push('\n');
        match self.compress.as_mut() {
            Some(c) => {
                run(c, text.as_bytes(), &mut self.bytes, FlushCompress::None);
                self.unflushed_writes += 1;
                if self.unflushed_writes >= WRITES_PER_FLUSH {
                    self.sync(now_ms);
                }
            }
            None => self.bytes.extend_from_slice(text.as_bytes()),
        }
    }

    /// The time-based flush: sync if something was written and `interval_ms` passed.
    pub(crate) fn tick(&mut self, now_ms: u64, interval_ms: u64) {
        if self.unflushed_writes > 0 && now_ms.saturating_sub(self.last_flush_ms) >= interval_ms {
            self.sync(now_ms);
        }
    }

    fn sync(&mut self, now_ms: u64) {
        if let Some(c) = self.compress.as_mut() {
            run(c, &[], &mut self.bytes, FlushCompress::Sync);
        }
        self.unflushed_writes = 0;
        self.last_flush_ms = now_ms;
    }

    /// Closes the writer: a last sync flush, then the zlib trailer.
    pub(crate) fn close(&mut self, now_ms: u64) {
        if self.closed {
            return;
        }
        self.sync(now_ms);
        if let Some(mut c) = self.compress.take() {
            run(&mut c, &[], &mut self.bytes, FlushCompress::Finish);
        }
        self.closed = true;
    }

    /// The stored file so far.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// Feeds `input` to the compressor and appends everything it produces for `flush`.
fn run(c: &mut Compress, input: &[u8], out: &mut Vec<u8>, flush: FlushCompress) {
    let mut input = input;
    // Each round either consumes input or fills the spare capacity, so this ends; the
    // bound only guards against a misbehaving backend.
    for _ in 0..10_000 {
        out.reserve(input.len() + 256);
        let before = c.total_in();
        let status = c.compress_vec(input, out, flush);
        let consumed = usize::try_from(c.total_in() - before).unwrap_or(input.len());
        input = input.get(consumed..).unwrap_or(&[]);
        match status {
            Ok(Status::StreamEnd) | Err(_) => return,
            Ok(_) => {
                let room_left = out.len() < out.capacity();
                if input.is_empty() && room_left && !matches!(flush, FlushCompress::Finish) {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn one_zlib_stream_with_sync_flushes() {
        let mut log = LogFile::new(LogCompression::Deflate, 0);
        for i in 0..250 {
            log.write_line(&format!("line {i}"), 0);
        }
        let live = log.bytes().to_vec();
        assert!(live.starts_with(&[0x78, 0x9c]));
        assert!(live.ends_with(&[0, 0, 0xff, 0xff]));
        log.write_line("last", 1);
        log.tick(20_000, 10_000);
        log.close(20_000);
        let mut text = String::new();
        let mut d = flate2::read::ZlibDecoder::new(log.bytes());
        assert!(d.read_to_string(&mut text).is_ok());
        assert_eq!(text.lines().count(), 251);
        assert!(text.ends_with("last\n"));
    }

    #[test]
    fn identity_is_plain() {
        let mut log = LogFile::new(LogCompression::Identity, 0);
        log.write_line("a", 0);
        log.close(0);
        assert_eq!(log.bytes(), b"a\n");
    }
}

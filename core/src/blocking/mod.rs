//! Blocking clients over `embedded-io` (feature `embedded-io`): for bare-metal stacks
//! with blocking sockets — a W5500, blocking smoltcp, a cellular modem's AT socket,
//! ESP-IDF — and for std through `embedded_io_adapters::std::FromStd`.
//!
//! Each client is a small loop around the sans-IO machines: [`bench::BenchClient`]
//! writes the chunks of a [`bench::exchange::Outgoing`](crate::bench::exchange::Outgoing)
//! and feeds the reply to core's HTTP response decoder; [`rtm::run`] drives a
//! [`Link`](crate::rtm::Link) — connects when it asks, writes what it has, feeds what
//! arrives, and calls it back at its deadlines. Core reads no clock: the transport
//! tells the time ([`Transport::now`]), and blocking reads get a deadline through
//! [`Transport::wait_readable`], the one thing embedded-io's blocking traits lack.

pub mod bench;
pub mod rtm;

/// The embedded-io release the [`Transport`] trait builds on, for implementing it.
pub use embedded_io;
use embedded_io::{Read, Write};

use crate::time::Instant;

/// A byte stream the blocking clients run over: embedded-io's blocking `Read + Write`
/// plus a clock, a wait with a deadline, and (re)connecting.
///
/// The contract, in the terms of a socket API:
///
/// - [`wait_readable`](Self::wait_readable) is `poll()`/`select()` on the socket for
///   reading, with a timeout: after it returned `Ok(true)`, one `read` returns at once
///   (bytes, or 0 at end of stream). A stack without such a call can poll its receive
///   state (a W5500's RX size register, smoltcp's `can_recv`) until the deadline.
/// - Writes block until the stack took the bytes. A peer that stops reading would block
///   them forever: give the socket a send timeout, so a stalled write ends with an error
///   (the client then drops the connection, and the messaging link reconnects).
/// - [`connect`](Self::connect) blocks until connected or failed: bound it with the
///   stack's own connect timeout.
///
/// ```
/// use benchlink_core::blocking::Transport;
/// use benchlink_core::time::Instant;
///
/// /// Bytes scripted in advance, the clock standing still: enough for a unit test.
/// struct Script { input: &'static [u8], written: Vec<u8> }
/// impl embedded_io::ErrorType for Script { type Error = core::convert::Infallible; }
/// impl embedded_io::Read for Script {
///     fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
///         let n = buf.len().min(self.input.len());
///         buf[..n].copy_from_slice(&self.input[..n]);
///         self.input = &self.input[n..];
///         Ok(n)
///     }
/// }
/// impl embedded_io::Write for Script {
///     fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> { self.written.extend_from_slice(buf); Ok(buf.len()) }
///     fn flush(&mut self) -> Result<(), Self::Error> { Ok(()) }
/// }
/// impl Transport for Script {
///     fn now(&mut self) -> Instant { Instant::ZERO }
///     fn wait_readable(&mut self, _deadline: Option<Instant>) -> Result<bool, Self::Error> { Ok(true) }
///     fn connect(&mut self, _host: &str, _port: u16, _tls: bool) -> Result<(), Self::Error> { Ok(()) }
///     fn close(&mut self) {}
/// }
/// let mut t = Script { input: b"", written: Vec::new() };
/// assert!(t.wait_readable(None).unwrap());
/// ```
pub trait Transport: Read + Write {
    /// The current time, on the clock every deadline of the clients is measured with:
    /// a monotonic microsecond count from any fixed start (a hardware timer, say).
    fn now(&mut self) -> Instant;

    /// Waits until a `read` would return without blocking — bytes arrived, or the peer
    /// closed (`Ok(true)`) — or until `deadline` passed (`Ok(false)`). `None` waits
    /// without a limit. Returning early with `Ok(false)` is allowed (the clients check
    /// the time again); returning `Ok(true)` when a read would block is not. Without a
    /// connection nothing can arrive: it sleeps until `deadline` and returns
    /// `Ok(false)` (the messaging link waits for its reconnect this way).
    fn wait_readable(&mut self, deadline: Option<Instant>) -> Result<bool, Self::Error>;

    /// Opens a connection to `host:port` (through TLS when `tls`), dropping any previous
    /// one. A transport without TLS refuses `tls` with an error.
    fn connect(&mut self, host: &str, port: u16, tls: bool) -> Result<(), Self::Error>;

    /// Closes the connection, if there is one.
    fn close(&mut self);
}

//! Drives a messaging [`Link`] over a blocking [`Transport`]: see [`run`].

use super::Transport;
use crate::rtm::{Bytes, ConnectError, Handler, Link, Output, Slots, SubscriptionSlots};
use crate::time::Instant;

/// What the transport did with the link's last output.
enum Done {
    Connected(bool),
    Wrote(Option<usize>),
    Closed,
}

/// Runs `link` over `transport` until `until`, then returns (call it again, and make
/// user calls such as `link.client_mut().publish(…)` between calls). The whole driver:
///
/// - the link's outputs are acted on in order — `Connect` through
///   [`Transport::connect`], `Transmit` through one `write` (a partial write is fine),
///   `Close` through [`Transport::close`] — and each result is reported back;
/// - in between it waits with [`Transport::wait_readable`] until the link's next
///   deadline (or `until`), reads at most `chunk.len()` bytes and feeds them in, so a
///   flooding server is slowed down by TCP flow control, never buffered without bound;
/// - at the link's deadlines it calls [`Link::handle_timeout`] (pings, dead-peer and
///   stalled-write detection, reconnect backoff, request deadlines).
///
/// Transport errors are not returned: a failed connect is a failed attempt, a failed
/// read or write closes the connection, and the link reconnects as configured (the
/// [`Handler`] hears about both). Events reach `h` during the call.
///
/// ```no_run
/// use benchlink_core::blocking::{rtm, Transport};
/// use benchlink_core::rtm::{Ack, Buffers, Config, Link, LinkConfig, NoopHandler, Pending, SubscriptionSlot};
/// use core::time::Duration;
///
/// fn publish_forever<T: Transport>(mut transport: T) -> ! {
///     let (mut rx, mut tx, mut chunk) = ([0u8; 2048], [0u8; 2048], [0u8; 512]);
///     let (mut queue, mut outbox) = ([0u8; 512], [0u8; 1024]);
///     let buffers = Buffers {
///         rx: &mut rx[..], tx: &mut tx[..], queue: &mut queue[..], outbox: &mut outbox[..], subscription_args: &mut [],
///     };
///     let mut link: Link<&mut [u8], _, _> = Link::new(
///         Config::default(), LinkConfig::DEFAULT, "ws://10.0.0.1:8080", "APPKEY", buffers, [SubscriptionSlot::EMPTY; 1], [Pending::EMPTY; 4],
///     ).unwrap();
///     let h = &mut NoopHandler;
///     let now = transport.now();
///     link.client_mut().start(now, h);
///     loop {
///         let now = transport.now();
///         let _ = link.client_mut().publish(now, "metrics", "{\"up\":1}", Ack::None, h);
///         rtm::run(&mut link, &mut transport, &mut chunk, h, now.saturating_add(Duration::from_secs(1)));
///     }
/// }
/// ```
pub fn run<T, B, S, P, H>(
    link: &mut Link<B, S, P>,
    transport: &mut T,
    chunk: &mut [u8],
    h: &mut H,
    until: Instant,
) where
    T: Transport,
    B: Bytes,
    S: SubscriptionSlots,
    P: Slots,
    H: Handler,
{
    loop {
        let mut now = transport.now();
        while let Some(output) = link.poll_output(now) {
            let done = match output {
                Output::Connect { host, port, tls } => {
                    Done::Connected(transport.connect(host, port, tls).is_ok())
                }
                // A write that takes nothing is a dead connection (and would spin).
                Output::Transmit(bytes) => {
                    Done::Wrote(transport.write(bytes).ok().filter(|&n| n > 0))
                }
                Output::Close => {
                    transport.close();
                    Done::Closed
                }
            };
            now = transport.now();
            match done {
                Done::Connected(true) => link.handle_connected(now, h),
                Done::Connected(false) => {
                    link.handle_connect_failed(now, ConnectError::Io { code: 0 }, h)
                }
                Done::Wrote(Some(n)) => link.transmitted(now, n),
                Done::Wrote(None) => closed(link, transport, h),
                Done::Closed => link.handle_closed(now, h),
            }
        }
        if transport.flush().is_err() {
            closed(link, transport, h);
            continue;
        }
        let next = link.poll_timeout();
        if next.is_some_and(|t| t <= now) {
            link.handle_timeout(now, h);
            continue;
        }
        if now >= until {
            return;
        }
        let wake = next.map_or(until, |t| t.min(until));
        match transport.wait_readable(Some(wake)) {
            Ok(true) => match transport.read(chunk) {
                Ok(n) if n > 0 => {
                    let now = transport.now();
                    link.handle_input(now, chunk.get(..n).unwrap_or_default(), h);
                }
                // End of stream, or a broken connection.
                _ => closed(link, transport, h),
            },
            Ok(false) => {}
            Err(_) => closed(link, transport, h),
        }
    }
}

/// The connection ended by itself: close our end and tell the link (a no-op when the
/// link had no connection).
fn closed<T, B, S, P, H>(link: &mut Link<B, S, P>, transport: &mut T, h: &mut H)
where
    T: Transport,
    B: Bytes,
    S: SubscriptionSlots,
    P: Slots,
    H: Handler,
{
    transport.close();
    let now = transport.now();
    link.handle_closed(now, h);
}

#[cfg(test)]
mod tests;

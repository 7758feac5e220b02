//! The whole messaging link as one sans-IO machine: see [`Link`].

use core::fmt;
use core::time::Duration;

use heapless::String;

use super::backoff::splitmix64;
use super::client::Next;
use super::client::{Client, Config};
use super::events::{ClientState, ConnectError, Disconnect, Handler};
use super::in_flight::Slots;
use super::pdu::Encoding;
use super::queue::Bytes;
use super::sub_table::SubscriptionSlots;
use crate::http::{Cursor, EncodeError, Head};
use crate::time::{earliest, Instant};
use crate::ws::{
    check_response, CloseCode, Endpoint, HandshakeError, Key, MaskSource, Message, Opcode, Session,
    State as WsState, UpgradeRequest, UrlError, MAX_HEADER_LEN,
};

/// The longest endpoint URL a [`Link`] keeps.
pub const MAX_ENDPOINT_LEN: usize = 256;

/// The longest application key a [`Link`] keeps.
pub const MAX_APPKEY_LEN: usize = 128;

/// The smallest transmit buffer a [`Link`] accepts: room for the `101` head, which
/// gathers in that buffer once the upgrade request has gone out (the request must fit
/// too: [`Link::new`] checks it). The buffer holds the link's own frames (pings, pongs,
/// the close) after that; PDUs are written from the outbox they were encoded in.
pub const MIN_TX: usize = 512;

/// The `min` of [`LinkError::TxTooSmall`] when the upgrade request does not fit: this
/// holds the request for any endpoint and appkey within [`MAX_ENDPOINT_LEN`] and
/// [`MAX_APPKEY_LEN`] (percent-encoded) with a user agent of up to 200 bytes.
const MAX_UPGRADE_REQUEST: usize = 1024;

/// Liveness and framing settings of a [`Link`]; the client's own settings (backoff,
/// restore, connect timeout) are its [`Config`].
///
/// ```
/// use benchlink_core::rtm::LinkConfig;
/// use core::time::Duration;
/// let config = LinkConfig { seed: 0x1234_5678, ..LinkConfig::DEFAULT };
/// assert_eq!(config.ping_interval, Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkConfig {
    /// Send a WebSocket ping after this much silence from the server (default 30 s).
    pub ping_interval: Duration,
    /// Declare the server dead after this much silence, or when bytes waiting to be sent
    /// have not moved for this long, and reconnect (default 60 s).
    pub dead_peer_timeout: Duration,
    /// After the client closes (stop, or a protocol error it reported), how long to wait
    /// for the server's close frame before closing the transport anyway (default 1 s).
    pub close_timeout: Duration,
    /// A `User-Agent` for the upgrade request.
    pub user_agent: Option<&'static str>,
    /// Seed of the generator of WebSocket masks and handshake keys. Give every link its
    /// own random seed (masks keep proxies from mistaking frames for requests; they are
    /// no secret from the server).
    pub seed: u64,
}

impl LinkConfig {
    /// The defaults, usable in `const` context.
    pub const DEFAULT: LinkConfig = LinkConfig {
        ping_interval: Duration::from_secs(30),
        dead_peer_timeout: Duration::from_secs(60),
        close_timeout: Duration::from_secs(1),
        user_agent: Some(concat!("benchlink/", env!("CARGO_PKG_VERSION"))),
        seed: 0x5DEE_CE66_D1CE_5EED,
    };
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig::DEFAULT
    }
}

/// Why [`Link::new`] refused its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum LinkError {
    /// The endpoint is not a valid `ws://` or `wss://` URL.
    Url(UrlError),
    /// The endpoint URL is longer than [`MAX_ENDPOINT_LEN`].
    EndpointTooLong,
    /// The appkey is longer than [`MAX_APPKEY_LEN`].
    AppkeyTooLong,
    /// The transmit buffer is smaller than [`MIN_TX`] bytes, or than the
    /// upgrade request for this endpoint, appkey and user agent.
    TxTooSmall {
        /// The smallest size accepted.
        min: usize,
    },
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::Url(e) => write!(f, "invalid endpoint: {e}"),
            LinkError::EndpointTooLong => {
                write!(f, "endpoint longer than {MAX_ENDPOINT_LEN} bytes")
            }
            LinkError::AppkeyTooLong => write!(f, "appkey longer than {MAX_APPKEY_LEN} bytes"),
            LinkError::TxTooSmall { min } => {
                write!(f, "transmit buffer too small (at least {min} bytes)")
            }
        }
    }
}

impl core::error::Error for LinkError {}

#[cfg(feature = "defmt")]
impl defmt::Format for Disconnect<'_> {
    fn format(&self, f: defmt::Formatter<'_>) {
        match self {
            Disconnect::PeerClosed { code, reason } => defmt::write!(
                f,
                "PeerClosed {{ code: {=?}, reason: {=str} }}",
                code.map(|c| c.0),
                reason
            ),
            Disconnect::Protocol(e) => defmt::write!(f, "Protocol({})", e),
            Disconnect::DeadPeer { silent } => defmt::write!(
                f,
                "DeadPeer {{ silent_ms: {=u64} }}",
                u64::try_from(silent.as_millis()).unwrap_or(u64::MAX)
            ),
            Disconnect::WriteStalled => defmt::write!(f, "WriteStalled"),
            Disconnect::TransportClosed => defmt::write!(f, "TransportClosed"),
            Disconnect::ClientClosed => defmt::write!(f, "ClientClosed"),
        }
    }
}

/// What the adapter must do next; see [`Link::poll_output`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Output<'a> {
    /// Open a transport to `host:port` (with TLS when `tls`), then report
    /// [`Link::handle_connected`] or [`Link::handle_connect_failed`]. The link writes the
    /// upgrade itself.
    Connect {
        /// Host name or IP address (IPv6 without brackets).
        host: &'a str,
        /// TCP port.
        port: u16,
        /// `wss://`: wrap the socket in TLS for `host`.
        tls: bool,
    },
    /// Write these bytes (the link's own frames, or the next PDU frame, from the outbox
    /// it was encoded in), then report how many went out with [`Link::transmitted`]; a
    /// partial write is fine. [`Link::unsent`] gives everything ready, for a vectored
    /// write.
    Transmit(&'a [u8]),
    /// Close the transport, then report [`Link::handle_closed`].
    Close,
}

/// The WebSocket masks and handshake nonces, from a seeded splitmix64 (the backoff's
/// jitter generator).
#[derive(Debug, Clone)]
struct Entropy(u64);

impl MaskSource for Entropy {
    fn next_mask(&mut self) -> [u8; 4] {
        let [a, b, c, d, ..] = splitmix64(&mut self.0).to_le_bytes();
        [a, b, c, d]
    }
}

impl Entropy {
    fn nonce(&mut self) -> [u8; 16] {
        let mut nonce = [0u8; 16];
        let (lo, hi) = nonce.split_at_mut(8);
        lo.copy_from_slice(&splitmix64(&mut self.0).to_le_bytes());
        hi.copy_from_slice(&splitmix64(&mut self.0).to_le_bytes());
        nonce
    }
}

/// Where the transport stands.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// No transport.
    Idle,
    /// `Connect` was handed out; waiting for the adapter's report.
    Opening,
    /// The upgrade request is `tx[tx_start..tx_end]` until it has gone out; then the
    /// response head gathers in its place, in `tx[..head]`.
    Upgrading { key: Key, head: usize },
    /// WebSocket frames flow.
    Open,
    /// Flushing the last frames (and, when `wait_peer`, waiting for the server's close
    /// frame) before closing the transport, at `deadline` at the latest.
    Closing { wait_peer: bool, deadline: Instant },
    /// `Close` was handed out; waiting for [`Link::handle_closed`].
    Closed,
}

/// The byte buffers of a [`Link`], all of the caller's sizing; their contents on entry do
/// not matter.
pub struct Buffers<B> {
    /// Incoming: the largest message accepted (a fragmented one is reassembled here; an
    /// unfragmented frame is read straight from the input).
    pub rx: B,
    /// The link's own outgoing bytes: at least [`MIN_TX`] bytes, and the upgrade request
    /// (the `101` head then gathers in its place); then pings, pongs and the close frame.
    pub tx: B,
    /// Requests waiting for a connection (or for room in flight): a request takes its
    /// body plus 18 bytes, and one that does not fit is refused at the call.
    pub queue: B,
    /// Encoded PDUs, framed in place and written from here: its size less 18 bytes (a
    /// record's length and the room for its frame header) is the largest PDU sent; more
    /// lets more PDUs wait, and go out in one vectored write.
    pub outbox: B,
    /// The `filter` and `extras` of subscriptions, one equal slot per subscription the
    /// link can hold: a view's query must fit its slot (the local hub takes
    /// 4 KiB); empty when no subscription has them.
    pub subscription_args: B,
}

impl<B: Bytes> fmt::Debug for Buffers<B> {
    /// Sizes only: the buffers may hold messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffers")
            .field("rx", &self.rx.as_ref().len())
            .field("tx", &self.tx.as_ref().len())
            .field("queue", &self.queue.as_ref().len())
            .field("outbox", &self.outbox.as_ref().len())
            .field("subscription_args", &self.subscription_args.as_ref().len())
            .finish()
    }
}

/// The messaging link, sans IO: the [`Client`] (reconnect, restore, queues, deadlines)
/// joined to the WebSocket upgrade, framing, pings and dead-peer detection, with one set
/// of timers and one set of limits for every target.
///
/// `B` is the byte storage of its four [`Buffers`] (`&mut [u8]`, an array, a `Box<[u8]>`),
/// sized by the caller: they bound the largest message each way and the bytes waiting.
/// `S` is the [`Client`]'s subscription table ([`SubscriptionSlots`]) and `P` its table of
/// acknowledged requests in flight ([`Slots`]), also of the caller's sizing.
///
/// # Driving it
///
/// ```text
///  adapter loop:  drain poll_output():  Connect{host,port,tls} → open the transport → handle_connected / handle_connect_failed
///                                       Transmit(bytes)        → write               → transmitted(n)
///                                       Close                  → close               → handle_closed
///                 then wait for: socket readable → handle_input(bytes)
///                                poll_timeout()  → handle_timeout
///                                a user call     → client_mut().publish(…) etc.
/// ```
///
/// Events go to the [`Handler`] passed to each call, synchronously, and borrow the
/// received message until the handler returns; pass an [`Events`](super::Events) to keep
/// them and pull them afterwards ([`Events::poll_event`](super::Events::poll_event)),
/// borrowing the message the link keeps until they are taken. Either way the memory in
/// use is what the caller sized: an adapter that reads a bounded chunk, feeds it, and
/// only then reads again keeps a flooding server in check through TCP flow control, and
/// its deadlines keep firing.
///
/// ```
/// use benchlink_core::rtm::{Ack, Buffers, Config, Link, LinkConfig, NoopHandler, Output, Pending, SubscriptionSlot};
/// use benchlink_core::time::Instant;
///
/// let buffers = Buffers {
///     rx: vec![0; 4096], tx: vec![0; 4096], queue: vec![0; 512], outbox: vec![0; 512],
///     subscription_args: vec![0; 2 * 256], // a 256-byte view query for each subscription
/// };
/// let mut link: Link<Vec<u8>, _, _> = Link::new(
///     Config::default(), LinkConfig { seed: 7, ..LinkConfig::DEFAULT },
///     "ws://127.0.0.1:8080", "KEY", buffers, [SubscriptionSlot::EMPTY; 2], [Pending::EMPTY; 4],
/// ).unwrap();
/// let (t, h) = (Instant::ZERO, &mut NoopHandler);
/// link.client_mut().start(t, h);
/// assert_eq!(link.poll_output(t), Some(Output::Connect { host: "127.0.0.1", port: 8080, tls: false }));
/// link.handle_connected(t, h); // the TCP socket is open
/// let Some(Output::Transmit(request)) = link.poll_output(t) else { panic!() };
/// assert!(request.starts_with(b"GET /v2?appkey=KEY HTTP/1.1\r\n"));
/// let n = request.len();
/// link.transmitted(t, n);
/// // The server's 101 (its accept value is checked against the key) opens the link;
/// // publishes are queued until then.
/// link.client_mut().publish(t, "chan", "1", Ack::None, h).unwrap();
/// assert_eq!(link.poll_output(t), None);
/// ```
pub struct Link<B, S, P> {
    client: Client<S, P, B, B, B>,
    config: LinkConfig,
    endpoint: String<MAX_ENDPOINT_LEN>,
    appkey: String<MAX_APPKEY_LEN>,
    session: Session<B, Entropy>,
    tx: B,
    /// Unsent bytes: `tx[tx_start..tx_end]`.
    tx_start: usize,
    tx_end: usize,
    /// When the unsent bytes last moved (or appeared); `None` when there are none.
    tx_since: Option<Instant>,
    /// A write ended with bytes left: the unsent bytes may begin inside a frame whose
    /// start already went out, so they cannot be dropped without corrupting the stream.
    tx_torn: bool,
    phase: Phase,
    /// The client was told `handle_connected` for the current transport and not yet
    /// `handle_closed`.
    attached: bool,
    /// When bytes last arrived on the open connection.
    last_rx: Instant,
    ping_sent: bool,
    ping_due: bool,
    /// The client asked for a close while no transport was open: the close is done, and
    /// the client hears it (with the caller's handler) at the next call that has one;
    /// [`poll_timeout`](Link::poll_timeout) makes that call due at once.
    close_unreported: bool,
    /// Length of the last message handed to the client, kept at the start of the
    /// session's buffer (see [`Link::last_message`]).
    held: usize,
}

impl<B: Bytes, S: SubscriptionSlots, P: Slots> fmt::Debug for Link<B, S, P> {
    /// State and sizes only: never credentials, the appkey or message contents.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Link")
            .field("client", &self.client)
            .field("phase", &self.phase)
            .field("unsent", &self.tx_end.saturating_sub(self.tx_start))
            .finish_non_exhaustive()
    }
}

impl<B: Bytes, S: SubscriptionSlots, P: Slots> Link<B, S, P> {
    /// A stopped link to `endpoint` (`ws://host[:port][/path]` or `wss://…`) for `appkey`.
    ///
    /// ```
    /// use benchlink_core::rtm::{Buffers, Config, Link, LinkConfig, LinkError, Pending, SubscriptionSlot};
    /// use benchlink_core::ws::UrlError;
    /// let new = |url, tx: usize| {
    ///     let buffers = Buffers {
    ///         rx: vec![0; 64], tx: vec![0; tx], queue: vec![0; 64], outbox: vec![0; 256], subscription_args: vec![],
    ///     };
    ///     Link::<Vec<u8>, _, _>::new(Config::default(), LinkConfig::DEFAULT, url, "k", buffers, [SubscriptionSlot::EMPTY; 1], [Pending::EMPTY; 1])
    ///         .map(|_| ())
    /// };
    /// assert_eq!(new("ws://h", 2048), Ok(()));
    /// assert_eq!(new("http://h", 2048), Err(LinkError::Url(UrlError::UnsupportedScheme)));
    /// assert_eq!(new("ws://h", 100), Err(LinkError::TxTooSmall { min: 512 }));
    /// ```
    pub fn new(
        client: Config,
        config: LinkConfig,
        endpoint: &str,
        appkey: &str,
        buffers: Buffers<B>,
        subscriptions: S,
        in_flight: P,
    ) -> Result<Self, LinkError> {
        let Buffers {
            rx,
            tx,
            queue,
            outbox,
            subscription_args,
        } = buffers;
        Endpoint::parse(endpoint).map_err(LinkError::Url)?;
        let endpoint = String::try_from(endpoint).map_err(|()| LinkError::EndpointTooLong)?;
        let appkey = String::try_from(appkey).map_err(|()| LinkError::AppkeyTooLong)?;
        let min = MIN_TX;
        if tx.as_ref().len() < min {
            return Err(LinkError::TxTooSmall { min });
        }
        // The upgrade request must fit too (the head then gathers in its place).
        let mut tx = tx;
        let request = write_upgrade(
            tx.as_mut(),
            &endpoint,
            &appkey,
            &Key::new([0; 16]),
            client.encoding.subprotocol(),
            config.user_agent,
        );
        if let Err(EncodeError::BufferTooSmall { .. }) = request {
            let min = MAX_UPGRADE_REQUEST;
            return Err(LinkError::TxTooSmall { min });
        }
        // Messages are read from the session's buffer, where the events that borrow one
        // find it again after the input is gone.
        let mut session = Session::new(rx, Entropy(config.seed));
        session.set_keep_messages(true);
        Ok(Link {
            client: Client::new(
                client,
                subscriptions,
                in_flight,
                queue,
                outbox,
                subscription_args,
            ),
            config,
            endpoint,
            appkey,
            session,
            tx,
            tx_start: 0,
            tx_end: 0,
            tx_since: None,
            tx_torn: false,
            phase: Phase::Idle,
            attached: false,
            last_rx: Instant::ZERO,
            ping_sent: false,
            ping_due: false,
            close_unreported: false,
            held: 0,
        })
    }

    /// The client: its state, and every user call (`start`, `stop`, `publish`,
    /// `subscribe`, …). What those calls send goes out through the next
    /// [`poll_output`](Self::poll_output).
    pub fn client(&self) -> &Client<S, P, B, B, B> {
        &self.client
    }

    /// The client, for user calls; see [`client`](Self::client).
    pub fn client_mut(&mut self) -> &mut Client<S, P, B, B, B> {
        &mut self.client
    }

    /// The link's settings.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// True while WebSocket frames flow (the upgrade is done and no close has begun).
    pub fn is_open(&self) -> bool {
        matches!(self.phase, Phase::Open)
    }

    /// The next thing for the adapter to do, `None` when there is nothing now (then wait
    /// for input, [`poll_timeout`](Self::poll_timeout) or a user call). Call it until it
    /// returns `None` after every input.
    #[must_use]
    pub fn poll_output(&mut self, now: Instant) -> Option<Output<'_>> {
        match self.phase {
            Phase::Idle => match self.client.next_transmit() {
                Some(Next::Connect) => {
                    self.phase = Phase::Opening;
                    let endpoint = Endpoint::parse(&self.endpoint).ok()?;
                    Some(Output::Connect {
                        host: endpoint.host,
                        port: endpoint.port,
                        tls: endpoint.tls,
                    })
                }
                // Nothing is open: the close is done at once; the client gets its report
                // at the next call with a handler (one copy of its code, for the
                // caller's handler type). A PDU for no connection is dropped (the client
                // re-sends what matters after the next connect).
                Some(Next::Close) => {
                    self.close_unreported = true;
                    None
                }
                _ => None,
            },
            Phase::Opening | Phase::Upgrading { .. } => {
                // The only thing the client can ask before it was told `connected`: give
                // up the attempt (its connect timeout).
                if let Some(Next::Close) = self.client.next_transmit() {
                    self.phase = Phase::Closed;
                    return Some(Output::Close);
                }
                self.pending_tx()
            }
            Phase::Open => {
                self.fill_tx(now);
                self.pending_tx()
            }
            Phase::Closing {
                wait_peer,
                deadline,
            } => {
                self.copy_control();
                let peer_done = !wait_peer || matches!(self.session.state(), WsState::Closed(_));
                let flushed = self.all_sent();
                if now >= deadline || (flushed && peer_done) {
                    self.phase = Phase::Closed;
                    return Some(Output::Close);
                }
                self.pending_tx()
            }
            Phase::Closed => None,
        }
    }

    /// `n` bytes of the last [`Output::Transmit`] were written (or, after a vectored
    /// write, of [`unsent`](Self::unsent)).
    pub fn transmitted(&mut self, now: Instant, n: usize) {
        if n == 0 {
            return;
        }
        // In the order `unsent` gives; more than was offered (an adapter's mistake) is
        // left over and ignored.
        if self.tx_first() {
            let rest = self.advance_tx(n);
            self.client.outbox_mut().advance(rest);
        } else {
            let rest = self.client.outbox_mut().advance(n);
            self.advance_tx(rest);
        }
        self.tx_since = (!self.all_sent()).then_some(now);
    }

    /// Copies the start of what [`Output::Transmit`] offers into `to` (a socket's send
    /// buffer, say); how many bytes. Report them with [`transmitted`](Self::transmitted)
    /// once they went out. For a transport that takes bytes by copying them into its own
    /// buffer (embassy-net's `write_with`, smoltcp's `send_slice`): the frame goes from the
    /// outbox record it was encoded in straight into that buffer.
    ///
    /// ```
    /// use benchlink_core::rtm::{Buffers, Config, Link, LinkConfig, NoopHandler, Pending, SubscriptionSlot};
    /// use benchlink_core::time::Instant;
    /// # let buffers = Buffers { rx: vec![0; 4096], tx: vec![0; 1024], queue: vec![0; 512], outbox: vec![0; 512], subscription_args: vec![] };
    /// # let mut link: Link<Vec<u8>, _, _> = Link::new(Config::default(), LinkConfig::DEFAULT, "ws://h", "k", buffers, [SubscriptionSlot::EMPTY; 1], [Pending::EMPTY; 1]).unwrap();
    /// let (t, h) = (Instant::ZERO, &mut NoopHandler);
    /// link.client_mut().start(t, h);
    /// let _connect = link.poll_output(t);
    /// link.handle_connected(t, h);
    /// let _request = link.poll_output(t);
    /// let mut socket_buffer = [0u8; 16];
    /// assert_eq!(link.copy_unsent(&mut socket_buffer), 16);
    /// assert_eq!(&socket_buffer[..4], b"GET ");
    /// link.transmitted(t, 16);
    /// ```
    pub fn copy_unsent(&self, to: &mut [u8]) -> usize {
        let piece = self.unsent().next().unwrap_or_default();
        let n = piece.len().min(to.len());
        match (to.get_mut(..n), piece.get(..n)) {
            (Some(dst), Some(src)) => {
                dst.copy_from_slice(src);
                n
            }
            _ => 0,
        }
    }

    /// Everything waiting to be written, in order: the piece [`Output::Transmit`] gives
    /// first, then the frames after it. For a transport that writes several buffers in one
    /// call (`writev`); report the bytes it took with [`transmitted`](Self::transmitted).
    /// Each PDU frame is a piece of its own, written from where the client encoded it.
    ///
    /// ```
    /// use benchlink_core::rtm::{Ack, Buffers, Config, Link, LinkConfig, NoopHandler, Output, Pending, SubscriptionSlot};
    /// use benchlink_core::time::Instant;
    /// # let buffers = Buffers { rx: vec![0; 4096], tx: vec![0; 1024], queue: vec![0; 512], outbox: vec![0; 512], subscription_args: vec![] };
    /// # let mut link: Link<Vec<u8>, _, _> = Link::new(Config::default(), LinkConfig::DEFAULT, "ws://h", "k", buffers, [SubscriptionSlot::EMPTY; 1], [Pending::EMPTY; 1]).unwrap();
    /// let (t, h) = (Instant::ZERO, &mut NoopHandler);
    /// link.client_mut().start(t, h);
    /// assert!(link.poll_output(t).is_some()); // connect
    /// link.handle_connected(t, h);
    /// let Some(Output::Transmit(request)) = link.poll_output(t) else { panic!() };
    /// assert_eq!(link.unsent().count(), 1); // the upgrade request
    /// ```
    pub fn unsent(&self) -> impl Iterator<Item = &[u8]> {
        let tx = self
            .tx
            .as_ref()
            .get(self.tx_start..self.tx_end)
            .unwrap_or_default();
        let (before, after) = if self.tx_first() {
            (Some(tx), None)
        } else {
            (None, Some(tx))
        };
        before
            .into_iter()
            .chain(self.client.outbox().frames())
            .chain(after)
            .filter(|piece| !piece.is_empty())
    }

    /// The transport asked for by [`Output::Connect`] is open: the link writes the
    /// WebSocket upgrade next.
    pub fn handle_connected<H: Handler>(&mut self, now: Instant, h: &mut H) {
        self.report_close(now, h);
        if !matches!(self.phase, Phase::Opening) {
            return;
        }
        let key = Key::new(self.session_entropy().nonce());
        match self.write_upgrade(&key) {
            Ok(request) => {
                self.clear_tx();
                self.tx_end = request;
                self.tx_since = Some(now);
                self.phase = Phase::Upgrading { key, head: 0 };
            }
            // Only an endpoint the URL parser let through but the request writer refuses
            // (a control byte in the path, say) can get here.
            Err(_) => self.fail_upgrade(now, ConnectError::Protocol, h),
        }
    }

    /// The transport asked for by [`Output::Connect`] could not be opened.
    pub fn handle_connect_failed<H: Handler>(
        &mut self,
        now: Instant,
        error: ConnectError,
        h: &mut H,
    ) {
        self.report_close(now, h);
        if matches!(self.phase, Phase::Opening) {
            self.reset_transport();
            self.client.handle_connect_failed(now, error, h);
        }
    }

    /// Bytes read from the transport; returns how many were taken. Events (replies,
    /// subscription data borrowing the received message, state changes) reach `h` before
    /// this returns. A handler that is not [`ready_for_input`](Handler::ready_for_input)
    /// stops the link before the next message: the rest is the caller's to offer again
    /// (with [`Events`](super::Events), once they are taken); any other handler takes all
    /// of it.
    pub fn handle_input<H: Handler>(&mut self, now: Instant, input: &[u8], h: &mut H) -> usize {
        self.report_close(now, h);
        let whole = input.len();
        let mut input = input;
        // What is left untaken, as a count of the bytes taken.
        let taken = |rest: &[u8]| whole.saturating_sub(rest.len());
        if !h.ready_for_input() {
            return 0;
        }
        if let Phase::Upgrading { .. } = self.phase {
            match self.upgrade_input(now, input, h) {
                Some(rest) => input = rest,
                None => return whole,
            }
        }
        let deliver = match self.phase {
            Phase::Open => true,
            // A stopping client still takes the replies to what it sent; one that closed
            // because of a protocol error has moved on.
            Phase::Closing {
                wait_peer: true, ..
            } => self.attached && self.client.state() == ClientState::Stopping,
            _ => return whole,
        };
        if !input.is_empty() {
            self.last_rx = now;
            self.ping_sent = false;
        }
        let binary = self.client.encoding() != Encoding::Json;
        while !input.is_empty() {
            if !h.ready_for_input() {
                return taken(input);
            }
            let outcome = match self.session.handle(input) {
                Ok((used, message)) => {
                    input = input.get(used..).unwrap_or_default();
                    match message {
                        Some(Message::Text(text)) if deliver => {
                            self.held = text.len();
                            h.received(text.as_bytes(), Encoding::Json);
                            self.client.handle_message(now, text, h);
                            None
                        }
                        Some(Message::Binary(payload)) if deliver && binary => {
                            self.held = payload.len();
                            h.received(payload, self.client.encoding());
                            self.client.handle_frame(now, payload, h);
                            None
                        }
                        Some(Message::Close(frame)) => Some(Disconnect::PeerClosed {
                            code: frame.map(|f| f.code),
                            reason: frame.map_or("", |f| f.reason),
                        }),
                        // Pings are answered by the session; pongs and, in JSON, binary
                        // frames only prove the server is alive.
                        Some(_) => None,
                        None => break,
                    }
                }
                Err(e) => Some(Disconnect::Protocol(e)),
            };
            if let Some(why) = outcome {
                if let Phase::Closing { .. } = self.phase {
                    // The answer to our close: done.
                    return whole;
                }
                h.link_closed(why);
                self.end(now, End::Flush, h);
                return whole;
            }
        }
        whole
    }

    /// The last message received, as the client read it: what the parts of the frame in
    /// [`Events`](super::Events) records are found again in.
    pub(crate) fn last_message(&self) -> &[u8] {
        self.session.last_message(self.held)
    }

    /// Bytes are waiting in the transport, but the adapter holds them back because the
    /// application has not taken its events yet (backpressure): the server is alive. Call
    /// it before [`handle_timeout`](Self::handle_timeout) while holding input back, so a
    /// server that is only being slowed down is never declared dead.
    pub fn handle_input_held(&mut self, now: Instant) {
        if let Phase::Open = self.phase {
            self.last_rx = now;
            self.ping_sent = false;
        }
    }

    /// The transport is closed: after [`Output::Close`], or because it ended by itself.
    pub fn handle_closed<H: Handler>(&mut self, now: Instant, h: &mut H) {
        self.report_close(now, h);
        match self.phase {
            Phase::Idle => {}
            Phase::Opening | Phase::Upgrading { .. } => {
                self.reset_transport();
                self.client
                    .handle_connect_failed(now, ConnectError::Closed, h);
            }
            Phase::Open => {
                self.session.handle_eof();
                h.link_closed(Disconnect::TransportClosed);
                self.end(now, End::Gone, h);
            }
            Phase::Closing { .. } | Phase::Closed => {
                self.reset_transport();
                // Still attached only when the client itself asked for the close.
                if self.attached {
                    h.link_closed(Disconnect::ClientClosed);
                }
                self.detach(now, h);
            }
        }
    }

    /// Time passed: call at (or after) [`poll_timeout`](Self::poll_timeout). Runs the
    /// client's deadlines, sends a ping after silence, gives up on a dead or stalled
    /// server.
    pub fn handle_timeout<H: Handler>(&mut self, now: Instant, h: &mut H) {
        self.report_close(now, h);
        if let Phase::Open = self.phase {
            // Compared as instants: the duration is made only for the report.
            let dead = self.config.dead_peer_timeout;
            let stalled = self
                .tx_since
                .is_some_and(|since| since.saturating_add(dead) <= now);
            if self.last_rx.saturating_add(dead) <= now {
                let silent = now.saturating_duration_since(self.last_rx);
                h.link_closed(Disconnect::DeadPeer { silent });
                self.end(now, End::Abandon, h);
            } else if stalled {
                h.link_closed(Disconnect::WriteStalled);
                self.end(now, End::Abandon, h);
            } else if self.last_rx.saturating_add(self.config.ping_interval) <= now
                && !self.ping_sent
            {
                self.ping_due = true;
                self.ping_sent = true;
            }
        }
        // The client's timers last: a connection given up just now may have made its
        // reconnect due already (the backoff counts from the start of the last attempt),
        // and that must not wait for another call.
        self.client.handle_timeout(now, h);
    }

    /// The earliest instant at which [`handle_timeout`](Self::handle_timeout) has work:
    /// the client's timers, the next ping, the dead-peer and stalled-write limits, the end
    /// of a close handshake; at once (`Instant::ZERO`) while the client has not yet been
    /// told of a close done without a transport.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.close_unreported {
            return Some(Instant::ZERO);
        }
        let client = self.client.poll_timeout();
        let link = match self.phase {
            Phase::Open => {
                // The dead-peer limit is always there: plain minimums, no options.
                let mut at = self.last_rx.saturating_add(self.config.dead_peer_timeout);
                if !self.ping_sent {
                    at = at.min(self.last_rx.saturating_add(self.config.ping_interval));
                }
                if let Some(since) = self.tx_since {
                    at = at.min(since.saturating_add(self.config.dead_peer_timeout));
                }
                Some(at)
            }
            Phase::Closing { deadline, .. } => Some(deadline),
            _ => None,
        };
        earliest(client, link)
    }

    // ----------------------------------------------------------------------------------

    /// Tells the client of a close done while no transport was open (see
    /// `close_unreported`).
    fn report_close<H: Handler>(&mut self, now: Instant, h: &mut H) {
        if self.close_unreported {
            self.close_unreported = false;
            self.client.handle_closed(now, h);
        }
    }

    /// Writes the upgrade request with `key` at the start of `tx`; its length.
    fn write_upgrade(&mut self, key: &Key) -> Result<usize, EncodeError> {
        let protocol = self.client.encoding().subprotocol();
        write_upgrade(
            self.tx.as_mut(),
            &self.endpoint,
            &self.appkey,
            key,
            protocol,
            self.config.user_agent,
        )
    }

    fn session_entropy(&mut self) -> &mut Entropy {
        self.session.masks_mut()
    }

    fn pending_tx(&self) -> Option<Output<'_>> {
        self.unsent().next().map(Output::Transmit)
    }

    /// Whether the link's own bytes (`tx`) go out before the client's framed PDUs: when
    /// there are none of those, or when a write ended inside `tx` (a frame is only ever
    /// followed by a whole frame). Otherwise control frames wait behind the PDUs framed
    /// before them, and the close frame is always last.
    fn tx_first(&self) -> bool {
        self.tx_torn || !self.client.outbox().has_handed()
    }

    /// Nothing is waiting to be written.
    fn all_sent(&self) -> bool {
        self.tx_start == self.tx_end && !self.client.outbox().has_handed()
    }

    /// Takes up to `n` written bytes from `tx`; returns the rest of `n`.
    fn advance_tx(&mut self, n: usize) -> usize {
        let took = n.min(self.tx_end.saturating_sub(self.tx_start));
        if took == 0 {
            return n;
        }
        self.tx_start = self.tx_start.saturating_add(took);
        self.tx_torn = self.tx_start < self.tx_end;
        if !self.tx_torn {
            self.tx_start = 0;
            self.tx_end = 0;
        }
        n.saturating_sub(took)
    }

    /// Makes room at the end of `tx` by moving the unsent bytes to the front.
    fn compact_tx(&mut self) {
        if self.tx_start > 0 {
            let (start, end) = (self.tx_start, self.tx_end);
            self.tx_end = crate::compact::to_front(self.tx.as_mut(), start, end);
            self.tx_start = 0;
        }
    }

    fn mark_tx(&mut self, now: Instant, was_empty: bool) {
        if was_empty && !self.all_sent() {
            self.tx_since = Some(now);
        }
    }

    /// Copies the session's own frames (pongs, close frames) into `tx`.
    fn copy_control(&mut self) {
        while let Some(frame) = self.session.poll_transmit() {
            let n = frame.len();
            let at = self.tx_end;
            let Some(dst) = self.tx.as_mut().get_mut(at..at.saturating_add(n)) else {
                self.compact_tx();
                if self.tx.as_ref().len().saturating_sub(self.tx_end) < n {
                    return; // full: offered again once the bytes before it went out
                }
                continue;
            };
            dst.copy_from_slice(frame);
            self.tx_end = at.saturating_add(n);
            self.session.advance_transmit(n);
        }
    }

    /// Readies everything to go out: control frames and a due ping into `tx`; then, once
    /// the PDUs framed before went out, the client's next PDUs, framed where they lie in
    /// its outbox, or its close.
    fn fill_tx(&mut self, now: Instant) {
        let was_empty = self.all_sent();
        self.copy_control();
        if self.ping_due {
            if self.tx.as_ref().len().saturating_sub(self.tx_end) < MAX_HEADER_LEN {
                self.compact_tx();
            }
            let at = self.tx_end;
            let mut out = Cursor::new(self.tx.as_mut().get_mut(at..).unwrap_or_default());
            if self.session.send_ping(b"", &mut out).is_ok() {
                self.tx_end = at.saturating_add(out.len());
                self.ping_due = false;
            }
        }
        if self.client.outbox().has_handed() || self.session.state() != WsState::Open {
            self.mark_tx(now, was_empty);
            return;
        }
        // JSON in text frames, CBOR in binary ones.
        let opcode = match self.client.config.encoding {
            Encoding::Json => Opcode::Text,
            #[cfg(feature = "cbor")]
            Encoding::Cbor => Opcode::Binary,
        };
        let session = &mut self.session;
        let next = self.client.frame_outgoing(&mut |record| {
            let len = record.len().saturating_sub(MAX_HEADER_LEN);
            // Never an error: the session is open, and the record has the header's room.
            let _ = session.frame_in_place(opcode, record, len);
        });
        // A connect is never ordered while open: the client orders one only once it
        // considers this connection gone, after a `Close`.
        if let Some(Next::Close) = next {
            // Replies to what was sent still arrive while the server answers our close; a
            // client that is not stopping no longer wants them.
            let _ = self.session.close(CloseCode::NORMAL, "");
            self.copy_control();
            self.phase = Phase::Closing {
                wait_peer: true,
                deadline: now.saturating_add(self.config.close_timeout),
            };
        }
        self.mark_tx(now, was_empty);
    }

    /// Gathers the `101` head where the upgrade request was; returns the input after the
    /// head once the link is open, `None` while the head is incomplete or after a failure.
    /// Out of line: once a connection, and its parse (a table of 32 headers) would
    /// otherwise sit in the frame of every input call.
    #[inline(never)]
    fn upgrade_input<'i, H: Handler>(
        &mut self,
        now: Instant,
        input: &'i [u8],
        h: &mut H,
    ) -> Option<&'i [u8]> {
        let Phase::Upgrading { key, head } = self.phase else {
            return None;
        };
        if self.tx_start < self.tx_end {
            // An answer before the whole request went out cannot be an honest one.
            self.fail_upgrade(now, ConnectError::Protocol, h);
            return None;
        }
        let room = self.tx.as_ref().len().saturating_sub(head);
        let take = input.len().min(room);
        let at = head;
        if let (Some(dst), Some(src)) = (
            self.tx.as_mut().get_mut(at..at.saturating_add(take)),
            input.get(..take),
        ) {
            dst.copy_from_slice(src);
        }
        let gathered = self
            .tx
            .as_ref()
            .get(..at.saturating_add(take))
            .unwrap_or_default();
        // Search from just before the new bytes: the blank line may straddle two reads.
        let from = head.saturating_sub(3);
        let end = gathered
            .get(from..)
            .and_then(|tail| tail.windows(4).position(|w| w == b"\r\n\r\n"))
            .map(|i| from.saturating_add(i).saturating_add(4));
        let Some(end) = end else {
            if take < input.len() {
                // The head does not fit in what is left of `tx`.
                self.fail_upgrade(now, ConnectError::Protocol, h);
            } else {
                self.phase = Phase::Upgrading {
                    key,
                    head: head.saturating_add(take),
                };
            }
            return None;
        };
        // A server that does not select the encoding's subprotocol speaks JSON only: the
        // connection fails rather than sending it CBOR.
        let offered = self.client.encoding().subprotocol();
        let checked = match Head::parse(gathered.get(..end).unwrap_or_default()) {
            Ok(parsed) => match check_response(&parsed, &key, offered) {
                Ok(selected) if selected.is_none() && offered.is_some() => {
                    Err(ConnectError::SubprotocolNotSelected)
                }
                Ok(_) => Ok(()),
                Err(HandshakeError::Status { status }) => Err(ConnectError::Rejected { status }),
                Err(_) => Err(ConnectError::Protocol),
            },
            Err(_) => Err(ConnectError::Protocol),
        };
        if let Err(e) = checked {
            self.fail_upgrade(now, e, h);
            return None;
        }
        // Bytes after the head are already WebSocket frames.
        let used = end.saturating_sub(head);
        self.clear_tx();
        self.session.reset();
        // CBOR may come in text frames too (lenient servers); JSON must be UTF-8.
        self.session
            .set_text_is_utf8(self.client.encoding() == Encoding::Json);
        self.phase = Phase::Open;
        self.last_rx = now;
        self.ping_sent = false;
        self.ping_due = false;
        self.attached = true;
        self.client.handle_connected(now, h);
        Some(input.get(used..).unwrap_or_default())
    }

    /// The upgrade failed: the client hears why, the transport is closed.
    fn fail_upgrade<H: Handler>(&mut self, now: Instant, error: ConnectError, h: &mut H) {
        self.clear_tx();
        self.phase = Phase::Closing {
            wait_peer: false,
            deadline: now,
        };
        self.client.handle_connect_failed(now, error, h);
    }

    /// The open connection is over (the handler was told why): tell the client, then
    /// close the transport.
    fn end<H: Handler>(&mut self, now: Instant, how: End, h: &mut H) {
        if how == End::Gone {
            self.reset_transport();
        } else {
            // Whatever was waiting is dropped, except the session's close frame (an echo,
            // or the code of the protocol error) which goes out first. When a write ended
            // inside a frame, its rest must go out before the close frame (the server
            // would read the close as that frame's payload), so the unsent bytes stay.
            if how == End::Abandon || !(self.tx_torn || self.client.outbox().torn()) {
                self.clear_tx();
            } else if self.tx_torn {
                // The close frame follows `tx`'s rest at once: the PDU frames waiting
                // behind it, whole, would go after it (data after a close), so they go.
                self.client.outbox_mut().drop_handed();
            }
            if how == End::Abandon {
                self.session.handle_eof();
            }
            self.copy_control();
            self.mark_tx(now, true);
            self.phase = Phase::Closing {
                wait_peer: false,
                deadline: now.saturating_add(self.config.close_timeout),
            };
        }
        self.detach(now, h);
    }

    fn detach<H: Handler>(&mut self, now: Instant, h: &mut H) {
        if self.attached {
            self.attached = false;
            self.client.handle_closed(now, h);
        }
    }

    /// Drops every unsent byte, the client's framed PDUs included. Out of line: its stores
    /// at every caller cost more than the calls.
    #[inline(never)]
    fn clear_tx(&mut self) {
        self.client.outbox_mut().drop_handed();
        self.tx_start = 0;
        self.tx_end = 0;
        self.tx_since = None;
        self.tx_torn = false;
    }

    fn reset_transport(&mut self) {
        self.phase = Phase::Idle;
        self.clear_tx();
        self.ping_sent = false;
        self.ping_due = false;
    }
}

/// How [`Link::end`] leaves a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The transport is already closed.
    Gone,
    /// Send the session's close frame, then close the transport.
    Flush,
    /// The server is dead or not reading: close the transport without a frame.
    Abandon,
}

/// The upgrade request at the start of `tx`; its length. Out of line: `new` and
/// `handle_connected` share its one copy.
#[inline(never)]
fn write_upgrade(
    tx: &mut [u8],
    endpoint: &str,
    appkey: &str,
    key: &Key,
    protocol: Option<&str>,
    user_agent: Option<&str>,
) -> Result<usize, EncodeError> {
    let endpoint =
        Endpoint::parse(endpoint).map_err(|_| EncodeError::InvalidValue { field: "endpoint" })?;
    let request = UpgradeRequest {
        endpoint,
        appkey,
        key,
        origin: None,
        protocol,
        user_agent,
    };
    let mut out = Cursor::new(tx);
    request.encode(&mut out).map(|()| out.len())
}

#[cfg(test)]
mod tests;

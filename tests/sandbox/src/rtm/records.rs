//! What the server records for tests: connection attempts (for backoff timing) and, per
//! connection, the PDUs it received (for transcript checks).

use std::time::Instant;

/// How a connection attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AttemptOutcome {
    /// The upgrade is still in progress.
    Pending,
    /// Closed right after the TCP accept (fault injection).
    Refused,
    /// The upgrade was answered with this non-101 status (unknown appkey, wrong path,
    /// fault injection, or `503` without reading the request: every one of
    /// [`max_connections`](super::RtmServerConfig::max_connections) was upgraded).
    Rejected(u16),
    /// Upgraded, then closed at once (fault injection).
    ClosedAfterUpgrade,
    /// Upgraded; the connection served PDUs.
    Upgraded,
    /// The client sent no valid upgrade request (garbage, it went away, its
    /// [`handshake_timeout`](super::RtmServerConfig::handshake_timeout) ran out, or it
    /// was closed to make room for a newer connection, see
    /// [`max_pending_upgrades`](super::RtmServerConfig::max_pending_upgrades)).
    HandshakeFailed,
}

/// One accepted TCP connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// The connection id (the same as [`ConnectionInfo::id`] when it was upgraded).
    pub id: u64,
    /// When the server accepted the TCP connection.
    pub at: Instant,
    /// What became of it.
    pub outcome: AttemptOutcome,
}

/// A snapshot of one upgraded connection, open or closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// The connection id, in accept order from 1.
    pub id: u64,
    /// The appkey of the upgrade request.
    pub appkey: String,
    /// The path of the upgrade request (without the query).
    pub path: String,
    /// Whether the connection is still open.
    pub open: bool,
    /// The role it authenticated as, if any.
    pub role: Option<String>,
    /// Its live subscription ids (empty once closed).
    pub subscriptions: Vec<String>,
    /// The PDUs it received, as text, in order (binary frames decoded lossily), up to
    /// [`RtmServerConfig::record_bytes`](super::RtmServerConfig::record_bytes).
    pub received: Vec<String>,
    /// How many PDUs it received, including those not kept in `received`.
    pub received_count: usize,
    /// How many WebSocket pings it received (the client's keep-alive ticks, which a
    /// test can wait for instead of sleeping through a ping interval).
    pub pings: usize,
    /// How many times the server's writer found the socket full and waited
    /// ([`WRITE_STALL`](super::WRITE_STALL)) without writing a byte: a client that reads
    /// nothing shows as a count that keeps growing, which a test can wait for instead of
    /// sleeping until a flood has filled the socket buffers.
    pub write_stalls: usize,
    /// How many times the server read a message on it and held the message unhandled
    /// because the connection was silenced ([`SocketFault::Silent`]): a test waits for
    /// this instead of a quiet spell to show that nothing was answered.
    ///
    /// [`SocketFault::Silent`]: super::SocketFault::Silent
    pub held: usize,
}

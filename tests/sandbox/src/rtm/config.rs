//! Configuration of the local RTM server: accepted appkeys, roles and their channel
//! permissions, history and expiry, and the limits that keep its memory bounded.

use std::fmt;
use std::time::Duration;

/// The appkey [`RtmServerConfig::default`] accepts.
pub const DEFAULT_APPKEY: &str = "benchlink-test-appkey";

/// The role [`RtmServerConfig::default`] knows: the one the reference SDK's tests use.
pub const SUPERUSER_ROLE: &str = "superuser";

/// The secret of [`SUPERUSER_ROLE`]: the dummy secret of the reference SDK's tests. With
/// the nonce `MTI0Njg4NTAyMjYxMzgxMzgzMg==` its hash is `P6COJ5aXJvIRoJO1PaYREw==`.
pub const SUPERUSER_SECRET: &str = "FF6FFFCfB2f7F3fe0E627d9fE2DB2EcD";

/// Channels whose names start with this are denied to unauthenticated clients by
/// [`RtmServerConfig::default`] (the "restricted channel" of the reference SDK's tests).
pub const RESTRICTED_PREFIX: &str = "restricted";

/// What a connection may do, per operation, as lists of channel patterns.
///
/// A pattern is `*` (every channel), `prefix*` (every channel starting with `prefix`) or
/// an exact channel name. An operation on a channel is allowed when one of the
/// operation's patterns matches and no pattern in [`deny`](Permissions::deny) does.
/// `rtm/publish` to `$heartbeat` is always allowed: the JS SDK's liveness check needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Permissions {
    /// Channels `rtm/publish` may use.
    pub publish: Vec<String>,
    /// Channels `rtm/subscribe` may use (for a view, the channel of its `filter`).
    pub subscribe: Vec<String>,
    /// Channels `rtm/read` may use.
    pub read: Vec<String>,
    /// Channels `rtm/write` may use.
    pub write: Vec<String>,
    /// Channels `rtm/delete` may use.
    pub delete: Vec<String>,
    /// Channels no operation may use, whatever the lists above say.
    pub deny: Vec<String>,
}

/// An operation that [`Permissions`] rules on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Publish,
    Subscribe,
    Read,
    Write,
    Delete,
}

impl Permissions {
    /// Every operation on every channel.
    #[must_use]
    pub fn all() -> Permissions {
        let every = vec!["*".to_owned()];
        Permissions {
            publish: every.clone(),
            subscribe: every.clone(),
            read: every.clone(),
            write: every.clone(),
            delete: every,
            deny: Vec::new(),
        }
    }

    /// Nothing at all.
    #[must_use]
    pub fn none() -> Permissions {
        Permissions::default()
    }

    /// These permissions with `patterns` added to [`deny`](Permissions::deny).
    #[must_use]
    pub fn denying(mut self, patterns: &[&str]) -> Permissions {
        self.deny.extend(patterns.iter().map(|p| (*p).to_owned()));
        self
    }

    /// Whether `op` is allowed on `channel`.
    pub(crate) fn allows(&self, op: Op, channel: &str) -> bool {
        let list = match op {
            Op::Publish => &self.publish,
            Op::Subscribe => &self.subscribe,
            Op::Read => &self.read,
            Op::Write => &self.write,
            Op::Delete => &self.delete,
        };
        list.iter().any(|p| pattern_matches(p, channel))
            && !self.deny.iter().any(|p| pattern_matches(p, channel))
    }
}

/// `*`, `prefix*` or an exact name (see [`Permissions`]).
fn pattern_matches(pattern: &str, channel: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => channel.starts_with(prefix),
        None => pattern == channel,
    }
}

/// A role for role-secret authentication: after a successful `auth/authenticate` the
/// connection gets the role's permissions, for that connection only.
#[derive(Clone, PartialEq, Eq)]
pub struct Role {
    /// The role name clients send in `auth/handshake`.
    pub name: String,
    /// The role secret: the HMAC-MD5 key. Never printed by `Debug`.
    pub secret: String,
    /// What an authenticated connection may do.
    pub permissions: Permissions,
}

impl Role {
    /// A role with the given name, secret and permissions.
    #[must_use]
    pub fn new(name: &str, secret: &str, permissions: Permissions) -> Role {
        Role {
            name: name.to_owned(),
            secret: secret.to_owned(),
            permissions,
        }
    }
}

// Secrets never appear in Debug output or logs: the secret is printed as `<redacted>`.
impl fmt::Debug for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Role")
            .field("name", &self.name)
            .field("secret", &"<redacted>")
            .field("permissions", &self.permissions)
            .finish()
    }
}

/// The longest channel name `rtm/publish` and `rtm/write` accept, and the longest
/// channel name and subscription id `rtm/subscribe` accepts, in bytes: the server keeps
/// them (a channel for as long as it runs), so their size is bounded like everything
/// else a client can make it keep. Longer ones are `invalid_format`. (The C SDK's own
/// limit for channel names is 256.)
pub const MAX_NAME_BYTES: usize = 1024;

/// What one stored message costs the server beyond its text (its entry in the channel's
/// history, in the eviction order across channels, and its allocation's header), as
/// counted against [`RtmServerConfig::history_total_bytes`]: so that a flood of tiny
/// messages is bounded too.
pub const STORED_MESSAGE_OVERHEAD: usize = 96;

/// Configuration of an [`RtmServer`](super::RtmServer).
///
/// Every limit has a default that is generous for tests and keeps the server's memory
/// bounded when clients misbehave: with the defaults, a flood of large publishes keeps
/// at most 64 MiB of history, at most 256 connections (32 of them before their upgrade,
/// each for at most 10 s) are served, and guessing a role secret costs a connection a
/// growing delay per failure and the connection after the fifth, and all connections
/// together get 20 failures per second.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtmServerConfig {
    /// TCP port (on [`listen`](Self::listen)); 0 picks a free one.
    pub port: u16,
    /// Appkeys the upgrade accepts; any other appkey (or none) gets `400 Bad Request`.
    pub appkeys: Vec<String>,
    /// Roles for role-secret authentication.
    pub roles: Vec<Role>,
    /// Permissions of a connection that has not authenticated.
    pub default_permissions: Permissions,
    /// Messages kept per channel for `position` and `history` replays. Older ones are
    /// discarded (and then count as expired). At least 1 is kept.
    pub history_len: usize,
    /// Bytes of messages kept per channel, on top of [`history_len`](Self::history_len):
    /// the oldest go first (the newest message is always kept).
    pub history_bytes: usize,
    /// Memory all channels' histories may take together, in bytes: each stored message
    /// counts its JSON text and its channel's name plus [`STORED_MESSAGE_OVERHEAD`] for
    /// the server's bookkeeping (its CBOR form, kept once a CBOR client needs it, is not
    /// counted: it is no larger than the JSON, so the memory is at most twice this).
    /// Above it the oldest messages go first, whatever their channel (a channel may lose
    /// its whole history, and with its last message its `rtm/read` value); only the
    /// message just published always stays. Without this bound, what clients publish to
    /// many channels would stay in memory: [`history_len`](Self::history_len) and
    /// [`history_bytes`](Self::history_bytes) are per channel, and there are up to
    /// [`max_channels`](Self::max_channels). Default 64 MiB.
    pub history_total_bytes: usize,
    /// Age after which a stored message expires (`None`: only
    /// [`history_len`](Self::history_len) discards messages). A subscribe from an expired
    /// position fast-forwards or fails, see [`expired_error`](Self::expired_error).
    pub message_ttl: Option<Duration>,
    /// The `error` of the `rtm/subscription/error` sent when a subscribe without
    /// `fast_forward` asks for an expired position: `out_of_sync` (the default; the
    /// Python SDK's ADVANCED mode then fails instead of resubscribing in a loop) or
    /// `expired_position` (what the JS SDK's documentation describes).
    pub expired_error: String,
    /// Whether the legacy `rtm/search` action (removed from the SDKs in 2017) is served.
    /// When off, it is an unknown action.
    pub search: bool,
    /// Channel names per `rtm/search/data` reply (at least 1).
    pub search_batch: usize,
    /// Whether a client that offers the `cbor` subprotocol gets it (the default). When
    /// off, the offer is ignored and the connection speaks JSON, like a JSON-only
    /// server: for testing a client's check of the selected subprotocol.
    pub cbor: bool,
    /// When set, every `auth/handshake` answers this nonce instead of a fresh random one,
    /// so that tests can check a known hash (see [`SUPERUSER_SECRET`]). Never use it
    /// elsewhere.
    pub fixed_nonce: Option<String>,
    /// Largest WebSocket message (and frame) accepted from a client, in bytes. A larger
    /// one closes the connection with code 1009.
    pub max_message_size: usize,
    /// Frames that may wait for a slow client. When a subscription's data would exceed
    /// it, the subscription is fast-forwarded (with `fast_forward`) or ended with
    /// `out_of_sync`. While this many wait, the server reads no more requests from that
    /// client (TCP then slows it down); replies beyond twice this (a safety net: the
    /// server stops reading long before) drop the connection.
    pub max_queued_frames: usize,
    /// Bytes of frames that may wait for a slow client, on top of
    /// [`max_queued_frames`](Self::max_queued_frames) and with the same consequences
    /// (the data of one more push may cross it): a slow subscriber to a channel of large
    /// messages holds at most this much, not that many frames of them. A history replay
    /// is queued at once, so a replay larger than this fast-forwards or fails too.
    /// Default 16 MiB.
    pub max_queued_bytes: usize,
    /// Channels the server keeps; publishing to a new channel beyond this fails with
    /// `limit_exceeded`.
    pub max_channels: usize,
    /// Subscriptions per connection; more fail with `limit_exceeded`.
    pub max_subscriptions: usize,
    /// Pause between the `101 Switching Protocols` response and the first frame, so
    /// that no frame shares a TCP segment with the 101 (the C SDK corrupts such a frame).
    /// The 101 is written with `TCP_NODELAY` before the pause starts.
    pub upgrade_pause: Duration,
    /// Time a client has to complete its upgrade request, counted from the TCP accept
    /// (bytes that trickle in do not extend it): then the socket is closed. Default
    /// 10 s.
    pub handshake_timeout: Duration,
    /// TCP connections served at once, upgraded or not. At the cap a new connection
    /// takes the place of the oldest one still in its upgrade (see
    /// [`max_pending_upgrades`](Self::max_pending_upgrades)); when every connection is
    /// upgraded it gets `503 Service Unavailable` and is closed. Each connection costs
    /// two threads and up to [`max_message_size`](Self::max_message_size) of buffers
    /// while a message arrives. Default 256.
    pub max_connections: usize,
    /// Connections that may be in their upgrade (before the `101`) at once. One more
    /// closes the oldest of them: a normal client upgrades in a round trip, so sockets
    /// that sit there (idle, or trickling a request byte by byte) are the ones to go,
    /// and a thousand of them cannot lock a normal client out. Default 32.
    pub max_pending_upgrades: usize,
    /// Delay of the reply to the first failed `auth/authenticate` on a connection; each
    /// further failure on the same connection waits twice as long as the one before.
    /// The delay holds up that connection's requests only (its reader waits; other
    /// connections go on). Default 50 ms.
    pub auth_failure_delay: Duration,
    /// Failed `auth/authenticate` requests a connection may make: the last one's error
    /// reply is followed by a close (code 1008). With the defaults, 5 guesses take at
    /// least 1.5 s per connection, and [`max_connections`](Self::max_connections)
    /// bounds how many connections guess at once. Default 5.
    pub max_auth_failures: u32,
    /// Failed `auth/authenticate` requests per second across all connections, after a
    /// burst of as many: more wait for their turn (on top of
    /// [`auth_failure_delay`](Self::auth_failure_delay)), so that guessing on many
    /// connections at once is no faster than this. Default 20.
    pub auth_failures_per_second: u32,
    /// The generation of this run: the first half of every position
    /// (`"<generation>:<n>"`). A position of another generation (a client resuming
    /// from an earlier run of a server on the same port) is handled as an expired
    /// position: a subscribe fast-forwards (with `fast_forward`) or fails with
    /// [`expired_error`](Self::expired_error); an `rtm/read` reads from the oldest
    /// stored message. `None` (the default) takes the start time in unix milliseconds,
    /// made larger than every generation this process used before, so that two runs
    /// never share one; tests set it to check positions of another run.
    pub generation: Option<u64>,
    /// Bytes of received PDUs recorded per connection for
    /// [`RtmServer::connections`](super::RtmServer::connections); later PDUs are counted
    /// but not kept.
    pub record_bytes: usize,
    /// Connection records and connection attempts kept (the oldest are forgotten).
    pub max_records: usize,
    /// Address to listen on: `127.0.0.1` by default, `0.0.0.0` for clients on the LAN.
    pub listen: std::net::IpAddr,
    /// Serve `wss://` instead of `ws://` (`None`, the default: plaintext). See
    /// [`tls`](crate::tls) for how: every other field holds under TLS as it is, counted
    /// from the end of the TLS handshake ([`handshake_timeout`](Self::handshake_timeout)
    /// too, after [`ServerTls::handshake_timeout`](crate::tls::ServerTls::handshake_timeout)).
    pub tls: Option<crate::tls::ServerTls>,
}

impl Default for RtmServerConfig {
    /// Any port; appkey [`DEFAULT_APPKEY`]; role [`SUPERUSER_ROLE`] with
    /// [`SUPERUSER_SECRET`] and every permission; unauthenticated clients may do
    /// everything except use channels starting with [`RESTRICTED_PREFIX`]; 1000 messages
    /// (up to 64 MiB) per channel and 64 MiB of history in all, no expiry by age; search
    /// and CBOR on; 256 connections, 32 of them in their upgrade.
    fn default() -> RtmServerConfig {
        RtmServerConfig {
            port: 0,
            appkeys: vec![DEFAULT_APPKEY.to_owned()],
            roles: vec![Role::new(
                SUPERUSER_ROLE,
                SUPERUSER_SECRET,
                Permissions::all(),
            )],
            default_permissions: Permissions::all().denying(&[&format!("{RESTRICTED_PREFIX}*")]),
            history_len: 1000,
            history_bytes: 64 << 20,
            history_total_bytes: 64 << 20,
            message_ttl: None,
            expired_error: "out_of_sync".to_owned(),
            search: true,
            search_batch: 10,
            cbor: true,
            fixed_nonce: None,
            max_message_size: 1 << 20,
            max_queued_frames: 10_000,
            max_queued_bytes: 16 << 20,
            max_channels: 10_000,
            max_subscriptions: 20_000,
            upgrade_pause: Duration::from_millis(10),
            handshake_timeout: Duration::from_secs(10),
            max_connections: 256,
            max_pending_upgrades: 32,
            auth_failure_delay: Duration::from_millis(50),
            max_auth_failures: 5,
            auth_failures_per_second: 20,
            generation: None,
            record_bytes: 256 * 1024,
            max_records: 1000,
            listen: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            tls: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        let p = Permissions::all().denying(&["restricted*", "exact"]);
        assert!(p.allows(Op::Publish, "chan"));
        assert!(!p.allows(Op::Publish, "restricted_x"));
        assert!(!p.allows(Op::Read, "exact"));
        assert!(p.allows(Op::Read, "exactly"));
        let q = Permissions {
            subscribe: vec!["news.*".to_owned(), "one".to_owned()],
            ..Permissions::none()
        };
        assert!(q.allows(Op::Subscribe, "news.a"));
        assert!(q.allows(Op::Subscribe, "one"));
        assert!(!q.allows(Op::Subscribe, "on"));
        assert!(!q.allows(Op::Publish, "news.a"));
    }

    #[test]
    fn role_debug_hides_secret() {
        let r = Role::new("r", "s3cr3t", Permissions::none());
        assert!(!format!("{r:?}").contains("s3cr3t"));
    }
}

//! Close status codes (RFC 6455, 7.4) and the parsed body of a close frame.

/// A close status code. Only codes that may appear on the wire are accepted from a peer or
/// sent: 1000–1003, 1007–1014 and the registered/private ranges 3000–4999. 1005, 1006 and
/// 1015 are reserved for reporting "no code", "no close frame" and "TLS failure" locally
/// and must never be sent (RFC 6455, 7.4.1); everything else below 3000 is unassigned.
///
/// ```
/// use benchlink_core::ws::CloseCode;
/// assert!(CloseCode::NORMAL.is_sendable());
/// assert!(CloseCode(4000).is_sendable());
/// assert!(!CloseCode(1005).is_sendable());
/// assert_eq!(CloseCode::PROTOCOL_ERROR.to_string(), "1002");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CloseCode(pub u16);

impl CloseCode {
    /// 1000: the purpose of the connection was fulfilled.
    pub const NORMAL: CloseCode = CloseCode(1000);
    /// 1001: the endpoint is going away (shutdown, page navigation).
    pub const GOING_AWAY: CloseCode = CloseCode(1001);
    /// 1002: the peer broke the protocol.
    pub const PROTOCOL_ERROR: CloseCode = CloseCode(1002);
    /// 1003: a data type the endpoint cannot accept.
    pub const UNSUPPORTED_DATA: CloseCode = CloseCode(1003);
    /// 1007: a text message (or close reason) that is not UTF-8.
    pub const INVALID_PAYLOAD: CloseCode = CloseCode(1007);
    /// 1008: a policy violation.
    pub const POLICY_VIOLATION: CloseCode = CloseCode(1008);
    /// 1009: a message too big to process.
    pub const MESSAGE_TOO_BIG: CloseCode = CloseCode(1009);
    /// 1011: an unexpected condition on the server.
    pub const INTERNAL_ERROR: CloseCode = CloseCode(1011);

    /// Whether the code may be carried by a close frame, in either direction.
    ///
    /// ```
    /// use benchlink_core::ws::CloseCode;
    /// let ok: Vec<u16> = (999..=1016).filter(|&c| CloseCode(c).is_sendable()).collect();
    /// assert_eq!(ok, [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014]);
    /// assert!(!CloseCode(2999).is_sendable() && CloseCode(3000).is_sendable());
    /// assert!(CloseCode(4999).is_sendable() && !CloseCode(5000).is_sendable());
    /// ```
    pub const fn is_sendable(self) -> bool {
        matches!(self.0, 1000..=1003 | 1007..=1014 | 3000..=4999)
    }
}

impl core::fmt::Display for CloseCode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The body of a close frame that carried one: a status code and a UTF-8 reason of at most
/// [`MAX_CLOSE_REASON`](super::MAX_CLOSE_REASON) bytes (a close frame without a body is
/// `Message::Close(None)`).
///
/// ```
/// use benchlink_core::ws::{CloseCode, CloseFrame};
/// let frame = CloseFrame { code: CloseCode::GOING_AWAY, reason: "restart" };
/// assert_eq!(frame.to_string(), "1001 restart");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CloseFrame<'s> {
    /// The status code.
    pub code: CloseCode,
    /// The reason, possibly empty.
    pub reason: &'s str,
}

impl core::fmt::Display for CloseFrame<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.reason {
            "" => write!(f, "{}", self.code),
            reason => write!(f, "{} {reason}", self.code),
        }
    }
}

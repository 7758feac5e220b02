//! RFC 6455 WebSocket client codec: what the messaging (RTM) client needs to speak
//! WebSocket without owning a socket, a clock or a random number generator.
//!
//! - [`Endpoint`]: parses `ws://` / `wss://` URLs (host, port, TLS flag, path).
//! - [`UpgradeRequest`] writes the upgrade request (`<path>/v2?appkey=…`), and
//!   [`check_response`] checks the answer's head (status 101, `Upgrade`, `Connection`,
//!   `Sec-WebSocket-Accept` computed from the [`Key`]).
//! - Frames: [`FrameHeader`], [`encode_frame`], [`encode_close`], [`encode_in_place`] and
//!   [`apply_mask`] write masked client frames; [`Decoder`] turns server bytes into whole
//!   [`Message`]s, reassembling fragments in a caller-provided buffer.
//! - [`Session`]: the connection after the handshake — automatic pongs, the close
//!   handshake, no data after close — so the layer above only sends and receives whole
//!   messages.
//!
//! Masking keys come from a [`MaskSource`] and the handshake key from 16 random bytes the
//! adapter passes in. Errors: [`UrlError`], [`HandshakeError`], [`Error`] (the server broke
//! the protocol) and [`SendError`].
//!
//! # Connecting
//!
//! The adapter opens TCP (and TLS for `wss://`) to the endpoint, then:
//!
//! ```
//! use benchlink_core::http::{Cursor, Event, Limits, ResponseDecoder};
//! use benchlink_core::ws::{check_response, Endpoint, Key, Message, Session, UpgradeRequest};
//!
//! let endpoint = Endpoint::parse("ws://localhost:8000").unwrap();
//! // 1. Write the upgrade request (16 random bytes make the key).
//! let key = Key::new(*b"the sample nonce");
//! let request = UpgradeRequest {
//!     endpoint, appkey: "APPKEY", key: &key, origin: None, protocol: None, user_agent: None,
//! };
//! let mut tx = [0u8; 512];
//! let mut out = Cursor::new(&mut tx);
//! request.encode(&mut out).unwrap();
//! // ... socket.write_all(out.written())
//!
//! // 2. Read until the response head is complete. Here the server's first frame arrived in
//! //    the same read as the 101.
//! let read = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
//!              Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n\x81\x02{}";
//! let mut head_buf = [0u8; 1024];
//! let mut http: ResponseDecoder = ResponseDecoder::new(&mut head_buf, None, Limits::DEFAULT);
//! let (used, event) = http.decode(read).unwrap();
//! let Event::Head(head) = event else { unreachable!("NeedMore: read more and decode again") };
//! check_response(&head, &key, None).unwrap();
//!
//! // 3. The bytes after the head are WebSocket bytes: they go to the session first.
//! let mut rx = [0u8; 65536];
//! let mut session = Session::new(&mut rx, || [0x12, 0x34, 0x56, 0x78]); // an RNG in practice
//! let leftover = &read[used..];
//! let (n, message) = session.handle(leftover).unwrap();
//! assert_eq!((n, message), (4, Some(Message::Text("{}"))));
//!
//! // 4. From then on: feed every read to `handle` until it returns `None`, write what
//! //    `poll_transmit` offers, send with `send_text`.
//! ```

pub(crate) mod b64;
mod close;
mod decoder;
mod endpoint;
mod error;
mod frame;
mod handshake;
mod session;
mod sha1;

pub use close::{CloseCode, CloseFrame};
pub use decoder::{Decoder, Message};
pub use endpoint::{Endpoint, UrlError};
pub use error::{Error, SendError};
pub use frame::{
    apply_mask, encode_close, encode_frame, encode_in_place, FrameHeader, MaskSource, Opcode,
    MAX_CLOSE_REASON, MAX_CONTROL_FRAME, MAX_CONTROL_PAYLOAD, MAX_HEADER_LEN,
};
pub use handshake::{check_response, Accept, HandshakeError, Key, UpgradeRequest};
pub use session::{CloseStatus, Session, State};

#[cfg(test)]
mod tests;

use super::*;
use crate::bench::exchange::{DataStep, DataWait, ReplyBody, StreamBody};
use crate::bench::request::{File, Start, Status as StatusReq};
use crate::bench::{LogLine, Status};
use crate::http::{DecodeError, Section};
use core::ops::ControlFlow;
use std::vec::Vec;

type E = ClientError<'static, &'static str, &'static str>;
type Ex<'a, 'b> = Exchange<'a, 'b, &'static str, &'static str>;

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n{\"status\":\"running\"}";
const T0: Instant = Instant::ZERO;

/// Acts on every output until the machine waits for input (or is over), writing all of
/// every transmit: what it did, the bytes it sent.
fn drive(ex: &mut Ex<'_, '_>, now: Instant) -> (Vec<&'static str>, Vec<u8>) {
    let (mut did, mut wire) = (Vec::new(), Vec::new());
    loop {
        match ex.poll_output(now) {
            Some(Output::Connect { .. }) => {
                did.push("connect");
                ex.handle_connected(now);
            }
            Some(Output::Transmit(bytes)) => {
                wire.extend_from_slice(bytes);
                let n = bytes.len();
                ex.transmitted(now, n);
            }
            Some(Output::Flush) => {
                did.push("flush");
                ex.flushed(now);
            }
            Some(Output::Close) => did.push("close"),
            None => return (did, wire),
        }
    }
}

fn talk<'b>(tx: &'b mut [u8], head: &'b mut [u8]) -> Conversation<'b> {
    Conversation::new(Server::new("bench", 4800), tx, head).unwrap()
}

#[test]
fn a_kept_alive_connection_carries_the_next_request_without_connecting() {
    let (mut tx, mut head, mut body) = ([0u8; 256], [0u8; 512], [0u8; 128]);
    let mut talk = talk(&mut tx, &mut head);
    for round in 0..2 {
        let mut reply = ReplyBody::new(&mut body);
        let req = StatusReq { id: 7 };
        let mut ex: Ex<'_, '_> = talk.exchange(&req, ResponseKind::Reply, T0);
        let (did, wire) = drive(&mut ex, T0);
        let expected: &[&str] = if round == 0 {
            &["connect", "flush"]
        } else {
            &["flush"]
        };
        assert_eq!(did, expected);
        assert!(wire.starts_with(b"GET /status?id=7&wait=false HTTP/1.1\r\n"));
        ex.handle_input(T0, OK, &mut reply);
        assert_eq!(drive(&mut ex, T0).0, [""; 0]);
        assert_eq!(ex.outcome(), Some(Ok(())));
        assert!(talk.is_open());
        assert_eq!(reply.finish::<StatusReq>().unwrap().status, Status::Running);
    }
}

#[test]
fn bytes_after_the_response_or_connection_close_end_the_connection() {
    let (mut tx, mut head, mut body) = ([0u8; 256], [0u8; 512], [0u8; 128]);
    let mut talk = talk(&mut tx, &mut head);
    let mut reply = ReplyBody::new(&mut body);
    let mut ex: Ex<'_, '_> = talk.exchange(&StatusReq { id: 1 }, ResponseKind::Reply, T0);
    drive(&mut ex, T0);
    let mut input = OK.to_vec();
    input.extend_from_slice(b"HTTP/1.1 200");
    ex.handle_input(T0, &input, &mut reply);
    assert_eq!(drive(&mut ex, T0).0, ["close"]);
    assert_eq!(ex.outcome(), Some(Ok(())));
    assert!(!talk.is_open());
}

/// One `GET /status` answered `200` on a new connection, which is then kept alive.
fn keep_alive(talk: &mut Conversation<'_>, body: &mut [u8]) {
    {
        let mut reply = ReplyBody::new(body);
        let mut ex: Ex<'_, '_> = talk.exchange(&StatusReq { id: 1 }, ResponseKind::Reply, T0);
        drive(&mut ex, T0);
        ex.handle_input(T0, OK, &mut reply);
        assert_eq!(ex.outcome(), Some(Ok(())));
    }
    assert!(talk.is_open());
}

/// An exchange on a kept-alive connection (one completed before).
fn reused<'a, 'b>(talk: &'a mut Conversation<'b>, req: &'a StatusReq) -> Ex<'a, 'b> {
    let mut ex: Ex<'_, '_> = talk.exchange(req, ResponseKind::Reply, T0);
    drive(&mut ex, T0);
    ex
}

#[test]
fn a_get_that_meets_a_stale_connection_is_sent_again_once_on_a_new_one() {
    let (mut tx, mut head, mut body) = ([0u8; 256], [0u8; 512], [0u8; 128]);
    let mut talk = talk(&mut tx, &mut head);
    let req = StatusReq { id: 1 };
    keep_alive(&mut talk, &mut body);
    let mut reply = ReplyBody::new(&mut body);
    let mut ex = reused(&mut talk, &req);
    // The server had closed the idle connection: end of stream before any response.
    ex.handle_closed(T0, &mut reply);
    let (did, wire) = drive(&mut ex, T0);
    assert_eq!(did, ["close", "connect", "flush"]);
    assert!(wire.starts_with(b"GET /status?id=1"));
    // The new connection fails the same way: not retried again (it was not reused).
    ex.handle_io_error(T0, "reset");
    assert_eq!(drive(&mut ex, T0).0, ["close"]);
    assert_eq!(ex.outcome(), Some(Err(ClientError::Io("reset"))));
}

#[test]
fn a_post_on_a_stale_connection_is_not_repeated() {
    let (mut tx, mut head, mut body) = ([0u8; 512], [0u8; 512], [0u8; 128]);
    let mut talk = talk(&mut tx, &mut head);
    keep_alive(&mut talk, &mut body);
    let start = Start::new(File {
        name: "s.bdl",
        content: b"#!benchDL\n",
    });
    let mut reply = ReplyBody::new(&mut body);
    let mut ex: Ex<'_, '_> = talk.exchange(&start, ResponseKind::Reply, T0);
    let (did, wire) = drive(&mut ex, T0);
    assert_eq!(did, ["flush"]);
    assert!(wire.starts_with(b"POST /start"));
    ex.handle_closed(T0, &mut reply);
    assert_eq!(drive(&mut ex, T0).0, ["close"]);
    let no_response = DecodeError::UnexpectedEof {
        section: Section::NoResponse,
    };
    assert_eq!(ex.outcome(), Some(Err(ClientError::Decode(no_response))));
}

#[test]
fn the_peer_closing_an_idle_connection_replaces_it_before_sending() {
    let (mut tx, mut head, mut body) = ([0u8; 256], [0u8; 512], [0u8; 128]);
    let mut talk = talk(&mut tx, &mut head);
    let req = StatusReq { id: 1 };
    keep_alive(&mut talk, &mut body);
    talk.handle_peer_closed();
    let mut ex: Ex<'_, '_> = talk.exchange(&req, ResponseKind::Reply, T0);
    assert_eq!(drive(&mut ex, T0).0, ["close", "connect", "flush"]);
}

#[test]
fn an_early_reply_to_an_upload_is_read_after_its_send_broke() {
    let (mut tx, mut head, mut body) = ([0u8; 512], [0u8; 512], [0u8; 256]);
    let mut talk = talk(&mut tx, &mut head);
    let big = [b'#'; 4096];
    let start = Start::new(File {
        name: "big.bdl",
        content: &big,
    });
    let mut reply = ReplyBody::new(&mut body);
    let mut ex: Ex<'_, '_> = talk.exchange(&start, ResponseKind::Reply, T0);
    assert!(matches!(ex.poll_output(T0), Some(Output::Connect { .. })));
    ex.handle_connected(T0);
    // The head goes out, then part of the body, then the server's reset.
    let Some(Output::Transmit(head_bytes)) = ex.poll_output(T0) else {
        panic!("the head")
    };
    let n = head_bytes.len();
    ex.transmitted(T0, n);
    assert!(matches!(ex.poll_output(T0), Some(Output::Transmit(_))));
    ex.transmitted(T0, 1);
    ex.handle_io_error(T0, "broken pipe");
    assert_eq!(ex.poll_output(T0), None, "reads the reply");
    ex.handle_input(
        T0,
        b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        &mut reply,
    );
    assert_eq!(drive(&mut ex, T0).0, ["close"]);
    assert_eq!(ex.outcome(), Some(Ok(())));
    let e = reply.finish::<Start<'_>>().unwrap_err();
    assert!(matches!(e, super::super::ReplyError::Server(e) if e.http_status() == Some(413)));
    assert!(!talk.is_open());
}

#[test]
fn a_broken_send_without_a_reply_fails_with_the_write_error() {
    let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    let mut talk = talk(&mut tx, &mut head);
    let mut ex: Ex<'_, '_> = talk.exchange(&StatusReq { id: 1 }, ResponseKind::Reply, T0);
    assert!(matches!(ex.poll_output(T0), Some(Output::Connect { .. })));
    ex.handle_connected(T0);
    assert!(matches!(ex.poll_output(T0), Some(Output::Transmit(_))));
    ex.handle_io_error(T0, "broken pipe");
    ex.handle_io_error(T0, "reset");
    assert_eq!(drive(&mut ex, T0).0, ["close"]);
    assert_eq!(ex.outcome(), Some(Err(ClientError::Io("broken pipe"))));
}

#[test]
fn the_reply_deadline_fires_through_handle_timeout() {
    let (mut tx, mut head, mut body) = ([0u8; 256], [0u8; 512], [0u8; 128]);
    let mut talk = talk(&mut tx, &mut head);
    let limit = Duration::from_secs(2);
    talk.set_timeouts(Timeouts {
        reply: Some(limit),
        stream_idle: None,
    });
    let start = Instant::from_secs(10);
    let mut reply = ReplyBody::new(&mut body);
    let mut ex: Ex<'_, '_> = talk.exchange(&StatusReq { id: 1 }, ResponseKind::Reply, start);
    drive(&mut ex, start);
    let deadline = Instant::from_secs(12);
    assert_eq!(ex.poll_timeout(), Some(deadline));
    // Half a response does not move the deadline; an early call changes nothing.
    ex.handle_input(
        Instant::from_secs(11),
        b"HTTP/1.1 200 OK\r\nContent-Len",
        &mut reply,
    );
    assert_eq!(ex.poll_timeout(), Some(deadline));
    ex.handle_timeout(Instant::from_millis(11_999));
    assert_eq!(ex.outcome(), None);
    ex.handle_timeout(deadline);
    assert_eq!(drive(&mut ex, deadline).0, ["close"]);
    let timed_out: E = ClientError::Timeout {
        after: limit,
        waiting: Waiting::Reply,
    };
    assert_eq!(ex.outcome(), Some(Err(timed_out)));
}

/// The reply deadline names what it caught the request waiting for: the server taking
/// the request, the rest of a response head (still `Reply`), or the rest of a body.
#[test]
fn the_reply_deadline_says_what_the_request_was_waiting_for() {
    let limit = Duration::from_secs(2);
    let timeouts = Timeouts {
        reply: Some(limit),
        stream_idle: None,
    };
    let timed_out = |waiting| -> Option<Result<(), E>> {
        Some(Err(ClientError::Timeout {
            after: limit,
            waiting,
        }))
    };
    let (mut tx, mut head, mut body) = ([0u8; 256], [0u8; 512], [0u8; 128]);
    let mut talk = talk(&mut tx, &mut head);
    talk.set_timeouts(timeouts);
    // A request the server does not take.
    let mut ex: Ex<'_, '_> = talk.exchange(&StatusReq { id: 1 }, ResponseKind::Reply, T0);
    assert!(matches!(ex.poll_output(T0), Some(Output::Connect { .. })));
    ex.handle_connected(T0);
    assert!(matches!(ex.poll_output(T0), Some(Output::Transmit(_))));
    ex.handle_timeout(Instant::from_secs(2));
    assert_eq!(drive(&mut ex, Instant::from_secs(2)).0, ["close"]);
    assert_eq!(ex.outcome(), timed_out(Waiting::Send));
    // A head that stops halfway, then a body that stops halfway.
    for (sent, waiting) in [
        (&b"HTTP/1.1 200 OK\r\nContent-Len"[..], Waiting::Reply),
        (&OK[..OK.len() - 3], Waiting::RestOfReply),
    ] {
        let mut reply = ReplyBody::new(&mut body);
        let mut ex: Ex<'_, '_> = talk.exchange(&StatusReq { id: 1 }, ResponseKind::Reply, T0);
        drive(&mut ex, T0);
        ex.handle_input(Instant::from_secs(1), sent, &mut reply);
        ex.handle_timeout(Instant::from_secs(2));
        assert_eq!(drive(&mut ex, Instant::from_secs(2)).0, ["close"]);
        assert_eq!(ex.outcome(), timed_out(waiting));
    }
}

#[test]
fn the_connect_limit_and_the_reply_deadline_bound_connecting() {
    let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    let mut talk = talk(&mut tx, &mut head);
    talk.set_connect_timeout(Some(Duration::from_secs(1)));
    let mut ex: Ex<'_, '_> = talk.exchange(&StatusReq { id: 1 }, ResponseKind::Reply, T0);
    // The limit is known before the connect is asked for, to bound it.
    assert_eq!(ex.poll_timeout(), Some(Instant::from_secs(1)));
    assert!(matches!(ex.poll_output(T0), Some(Output::Connect { .. })));
    assert_eq!(ex.poll_timeout(), Some(Instant::from_secs(1)));
    ex.handle_timeout(Instant::from_secs(1));
    assert_eq!(drive(&mut ex, Instant::from_secs(1)).0, ["close"]);
    let timed_out: E = ClientError::Timeout {
        after: Duration::from_secs(1),
        waiting: Waiting::Connect,
    };
    assert_eq!(ex.outcome(), Some(Err(timed_out)));
}

#[test]
fn a_stream_waits_for_its_head_by_the_deadline_then_by_its_idle_limit() {
    let (mut tx, mut head, mut line, mut err) = ([0u8; 256], [0u8; 512], [0u8; 64], [0u8; 64]);
    let mut talk = talk(&mut tx, &mut head);
    let idle = Duration::from_secs(3);
    talk.set_timeouts(Timeouts {
        reply: Some(Duration::from_secs(60)),
        stream_idle: Some(idle),
    });
    let mut lines = Vec::new();
    let mut body = StreamBody::<LogLine, _>::new(&mut line, &mut err, |l| {
        lines.push(l.map(std::string::String::from).ok());
        ControlFlow::Continue(())
    });
    let req = crate::bench::request::Log { id: 1 };
    let mut ex: Ex<'_, '_> = talk.exchange(&req, ResponseKind::Stream, T0);
    drive(&mut ex, T0);
    assert_eq!(ex.poll_timeout(), Some(Instant::from_secs(60)));
    let at = Instant::from_secs(100);
    let head_at = Instant::from_secs(5);
    ex.handle_input(
        head_at,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nfirst\n\r\n",
        &mut body,
    );
    assert_eq!(ex.poll_timeout(), Some(Instant::from_secs(8)));
    // Silence past the reply deadline is fine while within the idle limit.
    ex.handle_input(Instant::from_secs(59), b"7\r\nsecond\n\r\n", &mut body);
    ex.handle_input(Instant::from_secs(61), b"6\r\nthird\n\r\n", &mut body);
    assert_eq!(ex.poll_timeout(), Some(Instant::from_secs(64)));
    ex.handle_timeout(Instant::from_secs(64));
    assert_eq!(drive(&mut ex, at).0, ["close"]);
    let timed_out: E = ClientError::Timeout {
        after: idle,
        waiting: Waiting::StreamData,
    };
    assert_eq!(ex.outcome(), Some(Err(timed_out)));
    assert_eq!(lines.len(), 3);
}

#[test]
fn data_waits_with_a_doubling_backoff_until_running() {
    let mut wait = DataWait::new();
    let mut now = T0;
    let mut gaps = Vec::new();
    for _ in 0..8 {
        match wait.handle_status(now, &Status::Provisioning) {
            DataStep::PollStatusAt(at) => {
                gaps.push(at.saturating_duration_since(now).as_millis());
                now = at;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(gaps, [20, 40, 80, 160, 320, 640, 1000, 1000]);
    assert_eq!(
        wait.handle_status(now, &Status::Running),
        DataStep::SendData
    );
    assert_eq!(wait.handle_status(now, &Status::Zombie), DataStep::SendData);
    assert_eq!(
        wait.handle_status(now, &Status::Other("new_stage")),
        DataStep::SendData
    );
    assert_eq!(wait.handle_status(now, &Status::Failed), DataStep::Empty);
}

#[test]
fn a_server_named_as_given_under_a_prefix_is_written_once_in_the_head() {
    let (mut tx, mut head) = ([0u8; 256], [0u8; 512]);
    let server = Server {
        authority: Some("Bench.Example:4800"),
        prefix: "/mzbench",
        ..Server::new("10.0.0.9", 4800)
    };
    let mut talk = Conversation::new(server, &mut tx, &mut head).unwrap();
    let mut ex: Ex<'_, '_> = talk.exchange(&StatusReq { id: 3 }, ResponseKind::Reply, T0);
    assert_eq!(
        ex.poll_output(T0),
        Some(Output::Connect {
            host: "10.0.0.9",
            port: 4800
        })
    );
    ex.handle_connected(T0);
    let (_, wire) = drive(&mut ex, T0);
    assert!(wire.starts_with(
        b"GET /mzbench/status?id=3&wait=false HTTP/1.1\r\nHost: Bench.Example:4800\r\n"
    ));
}

#[test]
fn a_paused_stream_resumes_where_it_was_and_its_connection_is_no_one_elses() {
    let (mut tx, mut head, mut line, mut err) = ([0u8; 256], [0u8; 512], [0u8; 64], [0u8; 64]);
    let mut talk = talk(&mut tx, &mut head);
    let mut lines = Vec::new();
    let mut log = StreamBody::<LogLine, _>::new(&mut line, &mut err, |l| {
        lines.push(std::string::String::from(l.unwrap()));
        ControlFlow::Continue(())
    });
    let paused = {
        let mut ex: Ex<'_, '_> = talk.exchange(
            &crate::bench::request::Log { id: 1 },
            ResponseKind::Stream,
            T0,
        );
        drive(&mut ex, T0);
        ex.handle_input(
            T0,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\non",
            &mut log,
        );
        ex.pause().ok().unwrap()
    };
    let kept = talk.connection();
    // Resumed: the decoder is where it was (inside a chunk, inside a line).
    let mut ex = talk.resume(paused);
    ex.handle_input(T0, b"e\n\r\n", &mut log);
    assert_eq!(ex.outcome(), None);
    let paused = ex.pause().ok().unwrap();
    assert_eq!(lines, ["one"]);
    // Another exchange before the stream's end closes the connection it holds first.
    talk.set_connection(kept);
    let mut ex: Ex<'_, '_> = talk.exchange(&StatusReq { id: 1 }, ResponseKind::Reply, T0);
    assert_eq!(ex.poll_output(T0), Some(Output::Close));
    assert!(matches!(ex.poll_output(T0), Some(Output::Connect { .. })));
    let _ = paused;
}

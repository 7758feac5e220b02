//! The RTM actions (publish, subscribe, unsubscribe, read, write, delete, the two auth
//! steps and legacy search), one function each.
//!
//! Replies go to the connection's outbox under the state lock, so a reply and the data
//! it causes keep their order (`subscribe/ok` before the subscription's first data).
//! Only requests with an `id` get a reply, ok or error; malformed frames get a general
//! `/error` (see [`handle`]).

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::auth::{fresh_nonce, hashes_equal, role_secret_hash};
use super::cbor::{self, Encoding};
use super::config::{Op, MAX_NAME_BYTES};
use super::faults::ReplyOverride;
use super::message::Message;
use super::outbox::close_frame;
use super::pdu::{
    envelope, error_body, invalid, object, push_position, push_quoted, quote, Malformed, Position,
    Positions, Request,
};
use super::state::{
    deliver, fast_forward_info, subscription_error, Batch, Channel, Shared, State, Sub,
};
use super::view::{self, ActiveView, View};

/// The channel the JS SDK publishes to as a heartbeat; always allowed.
const HEARTBEAT: &str = "$heartbeat";

/// Handles one PDU from connection `conn`, within the reader's `batch` (which holds the
/// state lock across the frames of one read of the socket): `text` is its JSON, and
/// `cbor_message` the CBOR of its `body.message` when it came as CBOR (see `cbor`).
///
/// Error replies of our own choosing (the real service's texts for them are unknown):
/// - a frame that is not a JSON object: `{"action":"/error","body":{"error":"invalid_json",…}}`;
/// - an object without a string `action`: `/error` with `invalid_format` (with the id, if
///   any);
/// - a request whose `body` is not an object: `<action>/error` `invalid_format`;
/// - an unknown action: `<action>/error` `{"error":"invalid_operation","reason":"Unknown
///   action '<action>'"}`.
pub(crate) fn handle(batch: &mut Batch<'_>, conn: u64, text: &str, cbor_message: Option<&[u8]>) {
    let shared = batch.shared;
    let parsed = Request::parse(text);
    let st = batch.state();
    st.record_received(conn, shared.config.record_bytes, text);
    let req = match parsed {
        Ok(req) => req,
        Err(m) => return malformed(st, conn, m),
    };
    if !st.faults.is_quiet() {
        if let Some(reply) = st.faults.take_override(&req.action) {
            if let ReplyOverride::Raw(text) = reply {
                let text = text.replace("{id}", req.id.unwrap_or("null"));
                send(st, conn, &text);
            }
            return;
        }
        let delay = st.faults.subscribe_ok_delay;
        if let Some(delay) = delay.filter(|_| req.action == "rtm/subscribe") {
            // Not under the lock: other connections go on meanwhile.
            batch.end();
            sleep_unless_shutdown(shared, delay);
        }
    }
    let st = batch.state();
    if !st.conns.contains_key(&conn) {
        return;
    }
    let mut ctx = Ctx {
        shared,
        st,
        conn,
        action: &req.action,
        id: req.id,
        cbor_message,
    };
    let mut failed_auth = None;
    match req.action.as_ref() {
        "rtm/publish" => publish(&mut ctx, &req, Op::Publish),
        "rtm/write" => publish(&mut ctx, &req, Op::Write),
        "rtm/read" => read(&mut ctx, &req),
        "rtm/delete" => delete(&mut ctx, &req),
        "rtm/subscribe" => subscribe(&mut ctx, &req),
        "rtm/unsubscribe" => unsubscribe(&mut ctx, &req),
        "auth/handshake" => handshake(&mut ctx, &req),
        "auth/authenticate" => failed_auth = authenticate(&mut ctx, &req),
        "rtm/search" if shared.config.search => search(&mut ctx, &req),
        other => {
            let reason = format!("Unknown action '{other}'");
            ctx.err("invalid_operation", &reason);
        }
    }
    if let Some(failure) = failed_auth {
        refuse_auth(batch, conn, &req, failure);
    }
}

/// A failed `auth/authenticate`, before its reply goes out (see [`refuse_auth`]).
struct AuthFailure {
    /// How long the reply waits.
    delay: Duration,
    /// The connection has used up its attempts: it is closed after the reply.
    last: bool,
}

/// Answers a failed `auth/authenticate` after its delay, and closes the connection
/// (code 1008) after its last allowed failure, so that guessing a role secret is slow:
/// see [`RtmServerConfig::auth_failure_delay`](super::RtmServerConfig::auth_failure_delay).
/// The connection's reader waits without the state lock, so only this connection is
/// held up.
fn refuse_auth(batch: &mut Batch<'_>, conn: u64, req: &Request<'_>, failure: AuthFailure) {
    let shared = batch.shared;
    let outbox = batch
        .state()
        .conns
        .get(&conn)
        .map(|c| Arc::clone(&c.outbox));
    batch.end();
    // The replies before this one go out now; only this one waits.
    if let Some(outbox) = outbox {
        outbox.hand_over();
    }
    sleep_unless_shutdown(shared, failure.delay);
    let ctx = Ctx {
        shared,
        st: batch.state(),
        conn,
        action: &req.action,
        id: req.id,
        cbor_message: None,
    };
    ctx.err("authentication_failed", "Unauthenticated");
    if let Some(c) = ctx.st.conns.get(&conn).filter(|_| failure.last) {
        log::debug!("rtm server: connection {conn}: too many failed authentications");
        let _ = c.outbox.push_frames(&close_frame(1008));
        c.outbox.push_shutdown();
    }
}

/// Sleeps `delay` in short steps, so that a shutdown is not held up.
fn sleep_unless_shutdown(shared: &Shared, delay: Duration) {
    let start = Instant::now();
    while !shared.is_shutdown() {
        let left = delay.saturating_sub(start.elapsed());
        if left.is_zero() {
            break;
        }
        thread::sleep(left.min(Duration::from_millis(50)));
    }
}

fn send(st: &State, conn: u64, text: &str) {
    if let Some(c) = st.conns.get(&conn) {
        c.send(text);
    }
}

fn malformed(st: &State, conn: u64, m: Malformed) {
    let text = match m {
        Malformed::NotJson(e) => envelope(
            "/error",
            None,
            &error_body("invalid_json", &format!("Invalid JSON: {e}")),
        ),
        Malformed::NoAction { id } => envelope(
            "/error",
            id.as_deref(),
            &error_body(
                "invalid_format",
                "Invalid PDU: 'action' was missing or invalid",
            ),
        ),
        Malformed::BadBody { action, id } => match id {
            Some(id) => envelope(
                &format!("{action}/error"),
                Some(&id),
                &error_body(
                    "invalid_format",
                    "Invalid PDU: 'body' was missing or invalid",
                ),
            ),
            None => return,
        },
    };
    send(st, conn, &text);
}

/// One request being handled, with the state locked.
struct Ctx<'a> {
    shared: &'a Shared,
    st: &'a mut State,
    conn: u64,
    action: &'a str,
    id: Option<&'a str>,
    /// The CBOR of `body.message` of a PDU that came as CBOR.
    cbor_message: Option<&'a [u8]>,
}

impl Ctx<'_> {
    fn positions(&self) -> Positions {
        self.shared.positions
    }

    fn send(&self, text: &str) {
        if let Some(c) = self.st.conns.get(&self.conn) {
            c.send(text);
        }
    }

    /// Replies `<action>/<outcome>` (if the request has an id) with the body `body`
    /// appends, built in place in the outbox.
    fn reply_with(&self, outcome: &str, body: impl FnOnce(&mut Vec<u8>)) {
        let (Some(id), Some(c)) = (self.id, self.st.conns.get(&self.conn)) else {
            return;
        };
        let action = self.action;
        c.send_with(|out| {
            out.extend_from_slice(br#"{"action":"#);
            if action.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
                out.push(b'"');
                out.extend_from_slice(action.as_bytes());
                out.push(b'/');
                out.extend_from_slice(outcome.as_bytes());
                out.push(b'"');
            } else {
                push_quoted(out, &format!("{action}/{outcome}"));
            }
            out.extend_from_slice(br#","id":"#);
            out.extend_from_slice(id.as_bytes());
            out.extend_from_slice(br#","body":"#);
            body(out);
            out.push(b'}');
        });
    }

    fn reply(&self, outcome: &str, body: &str) {
        self.reply_with(outcome, |out| out.extend_from_slice(body.as_bytes()));
    }

    fn ok(&self, body: &str) {
        self.reply("ok", body);
    }

    fn err(&self, error: &str, reason: &str) {
        self.reply("error", &error_body(error, reason));
    }

    fn invalid(&self, name: &str) {
        self.err("invalid_format", &invalid(name));
    }

    /// Checks the connection's permission, answering `authorization_denied` with reason
    /// `Unauthorized`, as the real service does, when it is missing.
    fn permitted(&self, op: Op, channel: &str) -> bool {
        let ok = self.st.allows(&self.shared.config, self.conn, op, channel);
        if !ok {
            self.err("authorization_denied", "Unauthorized");
        }
        ok
    }

    fn conn_mut(&mut self) -> Option<&mut super::state::Conn> {
        self.st.conns.get_mut(&self.conn)
    }
}

/// `rtm/publish` and `rtm/write`: both store the message in the channel's history, make
/// it the channel's value for `rtm/read`, and deliver it to subscribers. The hot path of
/// a publishing client: nothing is copied but the message itself (once, into the
/// history), and the reply is built in place.
fn publish(ctx: &mut Ctx<'_>, req: &Request<'_>, op: Op) {
    let channel = req.str("channel").ok();
    let Some(channel) = channel.filter(|c| c.len() <= MAX_NAME_BYTES) else {
        return ctx.invalid("channel");
    };
    let Some(message) = req.raw("message") else {
        return ctx.err("invalid_format", "Invalid PDU: 'message' was missing");
    };
    let allowed = (op == Op::Publish && channel == HEARTBEAT) || ctx.permitted(op, &channel);
    if !allowed {
        return;
    }
    let positions = ctx.positions();
    let message = match ctx.cbor_message {
        Some(cbor) => Message::from_cbor(message, cbor.to_vec()),
        None => Message::from_json(message),
    };
    match ctx
        .st
        .publish(&ctx.shared.config, positions, &channel, Arc::new(message))
    {
        Some(seq) => ctx.reply_with("ok", |out| {
            out.extend_from_slice(br#"{"position":"#);
            push_position(out, positions, seq);
            out.push(b'}');
        }),
        None => ctx.err("limit_exceeded", "Too many channels"),
    }
}

/// `rtm/read`: the channel's value (`null` if never written or deleted), or with a
/// `position`, the first stored message at or after it (`null` if none).
fn read(ctx: &mut Ctx<'_>, req: &Request<'_>) {
    let Ok(channel) = req.string("channel") else {
        return ctx.invalid("channel");
    };
    // Another run's position reads from the oldest stored message, as an expired one
    // of this run does.
    let position = match req.field::<String>("position") {
        Ok(None) => None,
        Ok(Some(p)) => match ctx.positions().parse(&p) {
            Some(Position::Here(n)) => Some(n),
            Some(Position::OtherRun) => Some(0),
            None => return ctx.invalid("position"),
        },
        Err(()) => return ctx.invalid("position"),
    };
    if !ctx.permitted(Op::Read, &channel) {
        return;
    }
    let positions = ctx.positions();
    let ttl = ctx.shared.config.message_ttl;
    let found: (Option<Arc<Message>>, u64) = match ctx.st.channels.get_mut(&channel) {
        None => (None, 0),
        Some(ch) => match position {
            None => match &ch.value {
                Some((seq, v)) => (Some(Arc::clone(v)), *seq),
                None => (None, ch.next),
            },
            Some(p) => {
                ch.expire(Instant::now(), ttl);
                match ch.history.iter().find(|s| s.seq >= p) {
                    Some(s) => (Some(Arc::clone(&s.message)), s.seq),
                    None => (None, ch.next),
                }
            }
        },
    };
    let (message, seq) = (found.0.as_deref(), found.1);
    let Some(c) = ctx.st.conns.get(&ctx.conn) else {
        return;
    };
    match (c.outbox.encoding(), ctx.id) {
        (_, None) => {}
        // The message as published, byte strings and all.
        (Encoding::Cbor, Some(id)) => c.send_cbor_with(|out| {
            let action = format!("{}/ok", ctx.action);
            cbor::read_reply(out, &action, id, message.map(Message::cbor), positions, seq);
        }),
        (Encoding::Json, Some(_)) => ctx.ok(&object(&[
            ("message", message.map_or("null", Message::json)),
            ("position", &positions.json(seq)),
        ])),
    }
}

/// `rtm/delete`: clears the channel's value. Subscribers see nothing and the history
/// stays; the position is where the next message will go.
fn delete(ctx: &mut Ctx<'_>, req: &Request<'_>) {
    let Ok(channel) = req.string("channel") else {
        return ctx.invalid("channel");
    };
    if !ctx.permitted(Op::Delete, &channel) {
        return;
    }
    let next = match ctx.st.channels.get_mut(&channel) {
        Some(ch) => {
            ch.value = None;
            ch.next
        }
        None => 0,
    };
    let positions = ctx.positions();
    ctx.ok(&object(&[("position", &positions.json(next))]));
}

/// The options of a subscribe, validated.
struct SubscribeArgs {
    sid: String,
    channel: String,
    /// A view and its `period`.
    view: Option<(View, Duration)>,
    position: Option<Position>,
    count: Option<u64>,
    age: Option<u64>,
    fast_forward: bool,
    force: bool,
    value_changes: bool,
}

/// Why a subscribe is refused: the error code and the reason.
type Refusal = (&'static str, String);

fn bad(name: &str) -> Refusal {
    ("invalid_format", invalid(name))
}

/// Validates a subscribe body: its shape first (`invalid_format`), then the view's
/// SQL (`invalid_filter`). A view is a non-empty `filter`, or `view` (the Ruby SDK's
/// key for it); its channel comes from `FROM`.
fn subscribe_args(req: &Request<'_>, positions: Positions) -> Result<SubscribeArgs, Refusal> {
    let text = |name: &str| {
        req.field::<String>(name)
            .map(|t| t.filter(|t| !t.is_empty()))
            .map_err(|()| bad(name))
    };
    let query = match (text("filter")?, text("view")?) {
        (Some(f), Some(v)) if f != v => {
            let reason = "Invalid PDU: 'filter' and 'view' differ".to_owned();
            return Err(("invalid_format", reason));
        }
        (f, v) => f.or(v),
    };
    let (sid, channel, period) = match &query {
        Some(_) => {
            let sid = match req.field::<String>("subscription_id") {
                Ok(Some(s)) if !s.is_empty() => s,
                Ok(None) => {
                    let reason = "Invalid PDU: 'subscription_id' was missing".to_owned();
                    return Err(("invalid_format", reason));
                }
                _ => return Err(bad("subscription_id")),
            };
            let period = match req.field::<u64>("period") {
                Ok(None) => view::DEFAULT_PERIOD,
                Ok(Some(p)) if (1..=view::MAX_PERIOD_SECS).contains(&p) => Duration::from_secs(p),
                _ => return Err(bad("period")),
            };
            let channel = req
                .field::<String>("channel")
                .map_err(|()| bad("channel"))?;
            (sid, channel, period)
        }
        None => {
            let channel = req.string("channel").map_err(|()| bad("channel"))?;
            if channel.len() > MAX_NAME_BYTES {
                return Err(bad("channel"));
            }
            let sid = match req.field::<String>("subscription_id") {
                Ok(None) => channel.clone(),
                Ok(Some(s)) if !s.is_empty() => s,
                _ => return Err(bad("subscription_id")),
            };
            // `period` only means something to a view; within its range it is ignored.
            match req.field::<u64>("period") {
                Ok(None) => {}
                Ok(Some(p)) if p <= view::MAX_PERIOD_SECS => {}
                _ => return Err(bad("period")),
            }
            (sid, Some(channel), Duration::ZERO)
        }
    };
    // Kept as long as the subscription lives (the channel too, checked below).
    if sid.len() > MAX_NAME_BYTES {
        return Err(bad("subscription_id"));
    }
    let position = match req.field::<String>("position") {
        Ok(None) => None,
        Ok(Some(p)) => Some(positions.parse(&p).ok_or_else(|| bad("position"))?),
        Err(()) => return Err(bad("position")),
    };
    let (mut count, mut age) = (None, None);
    match req.field::<Value>("history").map_err(|()| bad("history"))? {
        None => {}
        Some(Value::Object(h)) => {
            let number = |name: &str| match h.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v
                    .as_u64()
                    .map(Some)
                    .ok_or_else(|| bad(&format!("history.{name}"))),
            };
            count = number("count")?;
            age = number("age")?;
            if count.is_some() && age.is_some() {
                let reason = "Invalid PDU: 'history.count' and 'history.age' cannot be combined";
                return Err(("invalid_format", reason.to_owned()));
            }
        }
        Some(_) => return Err(bad("history")),
    }
    let flag = |name: &str| {
        req.field::<bool>(name)
            .map(Option::unwrap_or_default)
            .map_err(|()| bad(name))
    };
    let fast_forward = flag("fast_forward")?;
    let force = flag("force")?;
    let value_changes = match req.field::<String>("only") {
        Ok(None) => false,
        Ok(Some(o)) if o == "value_changes" => true,
        _ => return Err(bad("only")),
    };
    let (channel, view) = match query {
        None => (channel.unwrap_or_default(), None),
        Some(text) => {
            let view = View::parse(&text).map_err(|e| ("invalid_filter", e.to_string()))?;
            if channel.is_some_and(|c| c != view.channel()) {
                let reason = "Invalid PDU: 'channel' does not match the filter".to_owned();
                return Err(("invalid_format", reason));
            }
            (view.channel().to_owned(), Some((view, period)))
        }
    };
    if channel.len() > MAX_NAME_BYTES {
        return Err(bad("channel"));
    }
    Ok(SubscribeArgs {
        sid,
        channel,
        view,
        position,
        count,
        age,
        fast_forward,
        force,
        value_changes,
    })
}

/// `rtm/subscribe`: a position `"<generation>:<n>"` of this run starts the subscription
/// at message `n` (the stored messages from `n` on, then live traffic), and
/// `subscribe/ok` says where it started. A position of another run is expired.
fn subscribe(ctx: &mut Ctx<'_>, req: &Request<'_>) {
    if ctx.st.faults.reject_subscribes {
        return ctx.err("invalid_format", "Invalid PDU: rejected by fault injection");
    }
    let args = match subscribe_args(req, ctx.positions()) {
        Ok(a) => a,
        Err((error, reason)) => {
            // The reply names the subscription when the request did.
            return match req.field::<String>("subscription_id") {
                Ok(Some(sid)) => ctx.reply(
                    "error",
                    &object(&[
                        ("error", &quote(error)),
                        ("reason", &quote(&reason)),
                        ("subscription_id", &quote(&sid)),
                    ]),
                ),
                _ => ctx.err(error, &reason),
            };
        }
    };
    if !ctx.permitted(Op::Subscribe, &args.channel) {
        return;
    }
    let config = &ctx.shared.config;
    let positions = ctx.positions();
    let Some(conn) = ctx.st.conns.get(&ctx.conn) else {
        return;
    };
    if conn.subs.contains_key(&args.sid) {
        if !args.force {
            let reason = format!("Already subscribed to '{}'", args.sid);
            return ctx.err("already_subscribed", &reason);
        }
    } else if conn.subs.len() >= config.max_subscriptions {
        return ctx.err("limit_exceeded", "Too many subscriptions");
    }

    let now = Instant::now();
    let (requested, expired, start, first) = {
        let empty = Channel::default();
        let ch: &Channel = match ctx.st.channels.get_mut(&args.channel) {
            Some(ch) => {
                ch.expire(now, config.message_ttl);
                ch
            }
            None => &empty,
        };
        // Another run's position is expired, whatever its number says.
        let other_run = args.position == Some(Position::OtherRun);
        let requested = args.position.map(|p| match p {
            Position::Here(n) => n.min(ch.next),
            Position::OtherRun => ch.first_available(),
        });
        let expired = other_run || requested.is_some_and(|p| p < ch.expired_before);
        let mut start = requested.unwrap_or(ch.next);
        if let Some(k) = args.count {
            start = start.saturating_sub(k);
        }
        if let Some(age) = args.age {
            let window = Duration::from_secs(age);
            if let Some(s) = ch
                .history
                .iter()
                .find(|s| now.saturating_duration_since(s.at) <= window)
            {
                start = start.min(s.seq);
            }
        }
        // History backs up as far as there is history; only a position can be expired.
        let first = ch.first_available();
        (requested, expired, start.max(first), first)
    };
    let ok_body = |at: u64| {
        object(&[
            ("position", &positions.json(at)),
            ("subscription_id", &quote(&args.sid)),
        ])
    };
    if expired && !args.fast_forward {
        ctx.ok(&ok_body(requested.unwrap_or(start)));
        let pdu = subscription_error(
            positions,
            &args.sid,
            &config.expired_error,
            "The position has expired",
            first,
        );
        ctx.send(&pdu);
        if let Some(conn) = ctx.conn_mut() {
            conn.subs.remove(&args.sid);
        }
        return;
    }
    ctx.ok(&ok_body(start));
    if expired {
        ctx.send(&fast_forward_info(
            positions,
            &args.sid,
            start,
            "The position has expired; fast-forwarded to the oldest available message",
        ));
    }
    let view = args.view.map(|(v, period)| {
        let serial = ctx.st.views.serial();
        (ActiveView::new(v, period, serial), serial, period)
    });
    let window = view
        .as_ref()
        .and_then(|(v, serial, period)| v.windowing().map(|_| (*serial, *period)));
    let mut sub = Sub {
        channel: args.channel.clone(),
        view: view.map(|(v, _, _)| v),
        value_changes: args.value_changes,
        last: None,
        next: start,
        fast_forward: args.fast_forward,
        skipped: false,
    };
    let State {
        channels, conns, ..
    } = &mut *ctx.st;
    let Some(conn) = conns.get_mut(&ctx.conn) else {
        return;
    };
    let replay = channels
        .get(&args.channel)
        .map(|ch| ch.since(start))
        .unwrap_or_default();
    if !deliver(&conn.outbox, positions, &args.sid, &mut sub, &replay) {
        conn.subs.remove(&args.sid);
        return;
    }
    conn.subs.insert(args.sid.clone(), sub);
    if let Some((serial, period)) = window {
        // The first window runs from the `subscribe/ok` for one period.
        let wake = &ctx.shared.view_clock;
        view::clock::start(ctx.st, wake, now + period, serial, ctx.conn, &args.sid);
    }
}

/// `rtm/unsubscribe` by `subscription_id` (or `channel`, for old clients).
fn unsubscribe(ctx: &mut Ctx<'_>, req: &Request<'_>) {
    let sid = match (req.string("subscription_id"), req.string("channel")) {
        (Ok(s), _) | (Err(()), Ok(s)) => s,
        _ => return ctx.invalid("subscription_id"),
    };
    let positions = ctx.positions();
    let removed = ctx.conn_mut().and_then(|c| c.subs.remove(&sid));
    match removed {
        Some(sub) => ctx.ok(&object(&[
            ("position", &positions.json(sub.next)),
            ("subscription_id", &quote(&sid)),
        ])),
        None => {
            let reason = format!("Not subscribed to '{sid}'");
            ctx.err("not_subscribed", &reason);
        }
    }
}

/// `auth/handshake`, the first step: any role gets a fresh nonce, so that an unknown role
/// only shows at `auth/authenticate`, like a bad secret.
fn handshake(ctx: &mut Ctx<'_>, req: &Request<'_>) {
    if req.field::<String>("method") != Ok(Some("role_secret".to_owned())) {
        return ctx.err(
            "invalid_format",
            "Invalid PDU: 'method' must be 'role_secret'",
        );
    }
    let role = match req.field::<Value>("data") {
        Ok(Some(data)) => data.get("role").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    };
    let Some(role) = role else {
        return ctx.invalid("data.role");
    };
    let nonce = ctx
        .shared
        .config
        .fixed_nonce
        .clone()
        .unwrap_or_else(fresh_nonce);
    let body = format!(r#"{{"data":{{"nonce":{}}}}}"#, quote(&nonce));
    if let Some(conn) = ctx.conn_mut() {
        conn.pending_auth = Some((role, nonce));
    }
    ctx.ok(&body);
}

/// `auth/authenticate`, the second step: checks the hash against the nonce of the last
/// handshake (each nonce serves one attempt); on success the role's permissions hold for
/// the rest of the connection. A failure is counted and answered later, by
/// [`refuse_auth`].
fn authenticate(ctx: &mut Ctx<'_>, req: &Request<'_>) -> Option<AuthFailure> {
    if req.field::<String>("method") != Ok(Some("role_secret".to_owned())) {
        ctx.err(
            "invalid_format",
            "Invalid PDU: 'method' must be 'role_secret'",
        );
        return None;
    }
    let hash = match req.field::<Value>("credentials") {
        Ok(Some(c)) => c.get("hash").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    };
    let Some(hash) = hash else {
        ctx.invalid("credentials.hash");
        return None;
    };
    let reject = ctx.st.faults.reject_auth;
    let config = &ctx.shared.config;
    let pending = ctx.conn_mut().and_then(|c| c.pending_auth.take());
    let role = pending.filter(|(role, nonce)| {
        !reject
            && config.roles.iter().any(|r| {
                r.name == *role && hashes_equal(&role_secret_hash(&r.secret, nonce), &hash)
            })
    });
    let Some((role, _)) = role else {
        let turn = ctx.st.auth_failure_turn(config, Instant::now());
        let conn = ctx.conn_mut()?;
        conn.auth_failures = conn.auth_failures.saturating_add(1);
        // The n-th failure of a connection waits first delay × 2^(n-1), and for its
        // turn among all connections' failures.
        let doublings = conn.auth_failures.saturating_sub(1).min(16);
        return Some(AuthFailure {
            delay: (config.auth_failure_delay.saturating_mul(1 << doublings)).max(turn),
            last: conn.auth_failures >= config.max_auth_failures.max(1),
        });
    };
    if let Some(conn) = ctx.conn_mut() {
        conn.role = Some(role.clone());
    }
    if let Some(r) = ctx.st.records.get_mut(&ctx.conn) {
        r.role = Some(role);
    }
    ctx.ok("{}");
    None
}

/// Legacy `rtm/search` (removed from the SDKs in 2017): the channels whose names start
/// with `prefix`, each once, in `rtm/search/data` replies of [`search_batch`] names, the
/// last batch in `rtm/search/ok`. Only channels the connection may read or subscribe to
/// are listed: a name is information too.
///
/// [`search_batch`]: super::RtmServerConfig::search_batch
fn search(ctx: &mut Ctx<'_>, req: &Request<'_>) {
    let Ok(prefix) = req.field::<String>("prefix") else {
        return ctx.invalid("prefix");
    };
    let prefix = prefix.unwrap_or_default();
    let (st, config, conn) = (&*ctx.st, &ctx.shared.config, ctx.conn);
    let visible =
        |c: &str| st.allows(config, conn, Op::Read, c) || st.allows(config, conn, Op::Subscribe, c);
    let names: Vec<String> = st
        .channels
        .keys()
        .filter(|c| c.starts_with(&prefix) && visible(c))
        .map(|c| quote(c))
        .collect();
    let mut batches: Vec<&[String]> = names
        .chunks(ctx.shared.config.search_batch.max(1))
        .collect();
    let last = batches.pop().unwrap_or(&[]);
    for batch in batches {
        ctx.reply("data", &format!(r#"{{"channels":[{}]}}"#, batch.join(",")));
    }
    ctx.ok(&format!(r#"{{"channels":[{}]}}"#, last.join(",")));
}

//! The endpoints: one table that both routes requests and lists itself on `GET /`, so
//! the listing cannot drift from what is served. Each entry names its arguments; a
//! query argument it does not name is a `400`, so that a typo never falls back to a
//! default silently.

use std::str::FromStr;
use std::time::{Duration, Instant};

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::{json, Value};

use super::{Relays, Targets};
use crate::bench::query::{QValue, Query};
use crate::bench::request::Request;
use crate::rtm::{AttemptOutcome, ConnectFault, ReplyOverride, SocketFault};
use crate::{BenchServer, RtmServer};

/// Why a request was not carried out: the status and a message for the operator.
struct Failure {
    status: u16,
    message: String,
}

fn bad(message: impl Into<String>) -> Failure {
    Failure {
        status: 400,
        message: message.into(),
    }
}

type Outcome = Result<Value, Failure>;

/// What serves an endpoint.
enum Run {
    /// The listing of every endpoint.
    Index,
    Rtm(fn(&RtmServer, &Call<'_>) -> Outcome),
    Bench(fn(&BenchServer, &Call<'_>) -> Outcome),
    /// The relays in front of the servers (`benchlink sandbox --cut-every`/`--latency`).
    Relay(fn(&Relays, &Call<'_>) -> Outcome),
}

struct Endpoint {
    method: &'static str,
    /// Segments; `{id}` matches any one segment.
    path: &'static str,
    /// Query arguments: name and meaning.
    args: &'static [(&'static str, &'static str)],
    /// What the body is, when the endpoint takes one.
    body: Option<&'static str>,
    about: &'static str,
    run: Run,
}

const fn rtm(
    method: &'static str,
    path: &'static str,
    args: &'static [(&'static str, &'static str)],
    about: &'static str,
    run: fn(&RtmServer, &Call<'_>) -> Outcome,
) -> Endpoint {
    Endpoint {
        method,
        path,
        args,
        body: None,
        about,
        run: Run::Rtm(run),
    }
}

const fn with_body(endpoint: Endpoint, body: &'static str) -> Endpoint {
    Endpoint {
        body: Some(body),
        ..endpoint
    }
}

const fn bench(
    method: &'static str,
    path: &'static str,
    about: &'static str,
    run: fn(&BenchServer, &Call<'_>) -> Outcome,
) -> Endpoint {
    Endpoint {
        method,
        path,
        args: &[],
        body: None,
        about,
        run: Run::Bench(run),
    }
}

const fn relay(
    method: &'static str,
    path: &'static str,
    args: &'static [(&'static str, &'static str)],
    about: &'static str,
    run: fn(&Relays, &Call<'_>) -> Outcome,
) -> Endpoint {
    Endpoint {
        method,
        path,
        args,
        body: None,
        about,
        run: Run::Relay(run),
    }
}

const CONNECTION: (&str, &str) = (
    "connection",
    "only this connection id (see GET /rtm/connections); default: every connection",
);
const SUBSCRIPTION: (&str, &str) = ("subscription", "the subscription id (required)");
const CHANNEL: (&str, &str) = ("channel", "the channel (required)");

static ENDPOINTS: &[Endpoint] = &[
    Endpoint {
        method: "GET",
        path: "/",
        args: &[],
        body: None,
        about: "This list.",
        run: Run::Index,
    },
    rtm("POST", "/rtm/faults/drop-connections", &[],
        "Close every client's TCP connection without a close frame (a network failure).",
        |s, _| Ok(affected(s.faults().drop_connections()))),
    rtm("POST", "/rtm/faults/drop-subscribers", &[CHANNEL],
        "Close the TCP connection of every client subscribed to the channel.",
        |s, c| Ok(affected(s.faults().drop_subscribers(c.required("channel")?)))),
    rtm("POST", "/rtm/faults/close-connections", &[("code", "the close code (default 1001, going away)")],
        "Send every client a WebSocket close frame with the code, then close its connection.",
        |s, c| Ok(affected(s.faults().close_connections(c.number("code")?.unwrap_or(1001))))),
    rtm("POST", "/rtm/faults/answer-pings", &[("answer", "true (default) or false")],
        "Whether WebSocket pings are answered (false: pongs are dropped, so a client's dead-peer detection fires).",
        |s, c| {
            s.faults().answer_pings(c.switch("answer", true)?);
            Ok(done())
        }),
    rtm("POST", "/rtm/faults/subscription-error",
        &[SUBSCRIPTION, ("error", "the error (default out_of_sync)"), ("reason", "the reason text")],
        "End the subscription on every connection that has it with rtm/subscription/error.",
        |s, c| {
            let error = c.value("error")?.unwrap_or("out_of_sync");
            let reason = c.value("reason")?.unwrap_or("Injected by the control endpoint");
            Ok(affected(s.faults().inject_subscription_error(c.required("subscription")?, error, reason)))
        }),
    rtm("POST", "/rtm/faults/fast-forward", &[SUBSCRIPTION],
        "Send rtm/subscription/info fast_forward for the subscription (it goes on).",
        |s, c| Ok(affected(s.faults().inject_fast_forward(c.required("subscription")?)))),
    with_body(rtm("POST", "/rtm/faults/send-raw", &[CONNECTION],
        "Send the body verbatim as a text frame.",
        |s, c| {
            let text = c.body_text()?;
            Ok(affected(match c.number("connection")? {
                Some(id) => usize::from(s.faults().send_raw_to(id, text)),
                None => s.faults().send_raw(text),
            }))
        }), "the frame's text (UTF-8)"),
    with_body(rtm("POST", "/rtm/faults/send-raw-binary", &[],
        "Send the body verbatim as a binary frame to every client (e.g. malformed CBOR).",
        |s, c| Ok(affected(s.faults().send_raw_binary(c.body)))), "the frame's bytes"),
    rtm("POST", "/rtm/faults/expire-history", &[CHANNEL],
        "Discard every stored message of the channel, as if expired (affected 0: no such channel).",
        |s, c| Ok(affected(usize::from(s.faults().expire_history(c.required("channel")?))))),
    rtm("POST", "/rtm/faults/delay-subscribe-ok", &[("ms", "the delay in milliseconds; 0 ends it (required)")],
        "Delay the handling of every rtm/subscribe.",
        |s, c| {
            let ms: u64 = c.number("ms")?.ok_or_else(|| bad("missing argument: ms"))?;
            s.faults().delay_subscribe_ok((ms > 0).then(|| Duration::from_millis(ms)));
            Ok(done())
        }),
    rtm("POST", "/rtm/faults/reject-subscribes", &[("reject", "true (default) or false")],
        "Whether every rtm/subscribe is rejected with rtm/subscribe/error invalid_format.",
        |s, c| {
            s.faults().reject_subscribes(c.switch("reject", true)?);
            Ok(done())
        }),
    rtm("POST", "/rtm/faults/reject-auth", &[("reject", "true (default) or false")],
        "Whether every auth/authenticate fails (handshakes still succeed).",
        |s, c| {
            s.faults().reject_auth(c.switch("reject", true)?);
            Ok(done())
        }),
    with_body(rtm("POST", "/rtm/faults/override-reply",
        &[("action", "the request action, e.g. rtm/publish (required)"),
          ("times", "how many requests (default: until cleared)"),
          ("silence", "true: send no reply at all (then no body)")],
        "Replace the reply to the next requests with the action (the request is not carried out).",
        override_reply), "the raw reply; every {id} becomes the request's id"),
    rtm("POST", "/rtm/faults/refuse-connections",
        &[("kind", "close-tcp, status or close-after-upgrade (required)"),
          ("status", "with kind=status: the HTTP status (default 503)"),
          ("times", "how many connection attempts (default: until cleared)")],
        "Make the next connection attempts fail.",
        refuse_connections),
    with_body(rtm("POST", "/rtm/faults/socket-fault",
        &[("kind", "ping-flood, data-flood, endless-message, silent or none (required)"),
          ("subscription", "with kind=data-flood: the subscription flooded (required)"),
          CONNECTION],
        "Take over the socket of every connection (and every later one), or of one.",
        socket_fault), "with kind=data-flood: the raw JSON of each message (default {\"n\":1})"),
    rtm("POST", "/rtm/faults/close-view-windows", &[],
        "Close the open window of every aggregated view now (affected: the views).",
        |s, _| Ok(affected(s.faults().close_view_windows()))),
    rtm("POST", "/rtm/faults/clear", &[],
        "Clear every fault switch and socket fault.",
        |s, _| {
            s.faults().clear();
            Ok(done())
        }),
    rtm("GET", "/rtm/connections", &[],
        "The upgraded connections (newest records), with the PDUs each received.",
        |s, _| Ok(s.connections().iter().map(|c| json!({
            "id": c.id,
            "appkey": c.appkey,
            "path": c.path,
            "open": c.open,
            "role": c.role,
            "subscriptions": c.subscriptions,
            "received": c.received,
            "received_count": c.received_count,
        })).collect())),
    rtm("GET", "/rtm/attempts", &[],
        "The TCP connections accepted (newest records), oldest first, with how long ago.",
        |s, _| {
            let now = Instant::now();
            Ok(s.attempts().iter().map(|a| {
                let ago = now.saturating_duration_since(a.at).as_secs_f64() * 1000.0;
                let mut v = json!({"id": a.id, "ago_ms": ago, "outcome": outcome(&a.outcome)});
                if let AttemptOutcome::Rejected(status) = a.outcome {
                    v["status"] = json!(status);
                }
                v
            }).collect())
        }),
    rtm("GET", "/rtm/history-bytes", &[],
        "Bytes the stored messages of all channels take, as counted against the history budget.",
        |s, _| Ok(json!({"bytes": s.history_bytes()}))),
    bench("POST", "/bench/benchmarks/{id}/crash",
        "The benchmark's process dies: status failed, reason crashed (affected 0: unknown or finished).",
        |s, c| Ok(affected(usize::from(s.crash_benchmark(c.id()?))))),
    bench("POST", "/bench/benchmarks/{id}/zombie",
        "The benchmark turns zombie, as if the server had died (affected 0: unknown or finished).",
        |s, c| Ok(affected(usize::from(s.zombify_benchmark(c.id()?))))),
    bench("GET", "/bench/benchmarks/{id}",
        "The server's record of the benchmark (404: unknown).",
        benchmark),
    bench("GET", "/bench/stats",
        "The connection and memory accounting of the benchmark server, and the requests it handled by path.",
        |s, _| {
            let st = s.stats();
            Ok(json!({
                "connections": st.connections,
                "accepted": st.accepted,
                "requests": s.requests(),
                "body_bytes": st.body_bytes,
                "peak_body_bytes": st.peak_body_bytes,
                "body_bytes_read": st.body_bytes_read,
                "evicted": st.evicted,
                "refused": st.refused,
                "timed_out": st.timed_out,
                "held_bytes": st.held_bytes,
                "sweeps": st.sweeps,
            }))
        }),
    bench("GET", "/bench/email-reports",
        "The reports the server would have e-mailed, oldest first.",
        |s, _| Ok(s.email_reports().iter().map(|r| json!({
            "bench_id": r.bench_id,
            "addresses": r.addresses,
            "on_request": r.on_request,
        })).collect())),
    relay("POST", "/relay/cut", &[("server", "bench or rtm: only that server's relay; default: both")],
        "Cut every connection the relays carry now, both sides (affected: the connections closed).",
        cut_relays),
    relay("GET", "/relay/stats", &[],
        "Per relay: cuts so far (scheduled and on demand), connections they closed, connections relayed since the start and open now.",
        |r, _| Ok(r.named().map(|(name, cutter)| {
            let st = cutter.stats();
            (name.to_owned(), json!({
                "cuts": st.cuts,
                "connections_cut": st.connections_cut,
                "accepted": st.accepted,
                "open": st.open,
            }))
        }).collect::<serde_json::Map<_, _>>().into())),
];

fn affected(n: usize) -> Value {
    json!({ "affected": n })
}

fn done() -> Value {
    json!({ "ok": true })
}

fn outcome(o: &AttemptOutcome) -> &'static str {
    match o {
        AttemptOutcome::Pending => "pending",
        AttemptOutcome::Refused => "refused",
        AttemptOutcome::Rejected(_) => "rejected",
        AttemptOutcome::ClosedAfterUpgrade => "closed-after-upgrade",
        AttemptOutcome::Upgraded => "upgraded",
        AttemptOutcome::HandshakeFailed => "handshake-failed",
    }
}

fn override_reply(s: &RtmServer, c: &Call<'_>) -> Outcome {
    let action = c.required("action")?;
    let times = c.times()?;
    let reply = if c.switch("silence", false)? {
        c.no_body("silence=true")?;
        ReplyOverride::Silence
    } else {
        let raw = c.body_text()?;
        if raw.is_empty() {
            return Err(bad(
                "the body is the raw reply (silence=true sends no reply)",
            ));
        }
        ReplyOverride::Raw(raw.to_owned())
    };
    s.faults().override_replies(action, reply, times);
    Ok(done())
}

fn refuse_connections(s: &RtmServer, c: &Call<'_>) -> Outcome {
    let status = c.number::<u16>("status")?;
    let fault = match c.required("kind")? {
        "status" => {
            let status = status.unwrap_or(503);
            if !(100..=999).contains(&status) {
                return Err(bad(format!("status must be an HTTP status, got {status}")));
            }
            ConnectFault::Status(status)
        }
        kind if status.is_some() => {
            return Err(bad(format!(
                "status goes with kind=status, not kind={kind}"
            )))
        }
        "close-tcp" => ConnectFault::CloseTcp,
        "close-after-upgrade" => ConnectFault::CloseAfterUpgrade,
        other => {
            return Err(bad(format!(
                "unknown kind {other}; one of close-tcp, status, close-after-upgrade"
            )))
        }
    };
    s.faults().refuse_connections(fault, c.times()?);
    Ok(done())
}

fn socket_fault(s: &RtmServer, c: &Call<'_>) -> Outcome {
    let kind = c.required("kind")?;
    let subscription = c.value("subscription")?;
    if kind != "data-flood" {
        if subscription.is_some() {
            return Err(bad("subscription goes with kind=data-flood"));
        }
        c.no_body(&format!("kind={kind}"))?;
    }
    let fault = match kind {
        "ping-flood" => Some(SocketFault::PingFlood),
        "data-flood" => {
            let subscription_id = subscription
                .ok_or_else(|| bad("kind=data-flood needs subscription"))?
                .to_owned();
            let message = match c.body_text()? {
                "" => r#"{"n":1}"#,
                text => text,
            };
            Some(SocketFault::DataFlood {
                subscription_id,
                message: message.to_owned(),
            })
        }
        "endless-message" => Some(SocketFault::EndlessMessage),
        "silent" => Some(SocketFault::Silent),
        "none" => None,
        other => {
            return Err(bad(format!(
                "unknown kind {other}; one of ping-flood, data-flood, endless-message, silent, none"
            )))
        }
    };
    Ok(affected(match c.number("connection")? {
        Some(id) => usize::from(s.faults().set_socket_fault_on(id, fault)),
        None => s.faults().set_socket_fault(fault),
    }))
}

fn cut_relays(r: &Relays, c: &Call<'_>) -> Outcome {
    let only = match c.value("server")? {
        None => None,
        Some(name @ ("bench" | "rtm")) => Some(name),
        Some(other) => return Err(bad(format!("unknown server {other}; one of bench, rtm"))),
    };
    let mut chosen = r
        .named()
        .filter(|(name, _)| only.is_none_or(|o| o == *name))
        .peekable();
    if chosen.peek().is_none() {
        return Err(Failure {
            status: 404,
            message: format!("no relay in front of the {} server", only.unwrap_or("")),
        });
    }
    Ok(affected(chosen.map(|(_, cutter)| cutter.cut_now()).sum()))
}

fn benchmark(s: &BenchServer, c: &Call<'_>) -> Outcome {
    let id = c.id()?;
    let Some(b) = s.benchmark(id) else {
        return Err(Failure {
            status: 404,
            message: format!("no benchmark {id}"),
        });
    };
    let pairs = |pairs: &[(String, String)]| -> Value {
        pairs
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let includes: Vec<Value> = b
        .includes
        .iter()
        .map(|(name, content)| json!({"name": name, "content": String::from_utf8_lossy(content)}))
        .collect();
    Ok(json!({
        "id": b.id,
        "status": b.status,
        "name": b.name,
        "author": b.author,
        "script_name": b.script_name,
        "script": b.script,
        "includes": includes,
        "env": pairs(&b.env),
        "tags": b.tags,
        "parent": b.parent,
        "emails": b.emails,
        "exclusive": b.exclusive,
        "commands": b.commands,
        "process_alive": b.process_alive,
    }))
}

/// One request to an endpoint: its arguments.
struct Call<'a> {
    query: Query,
    /// The `{id}` segment of the path.
    id: Option<&'a str>,
    body: &'a [u8],
}

impl Call<'_> {
    /// The text of argument `name`, if given.
    fn value(&self, name: &str) -> Result<Option<&str>, Failure> {
        match self.query.first(name) {
            None => Ok(None),
            Some(QValue::True) => Err(bad(format!("{name} needs a value ({name}=…)"))),
            Some(QValue::Str(s)) => Ok(Some(s)),
        }
    }

    fn required(&self, name: &str) -> Result<&str, Failure> {
        self.value(name)?
            .ok_or_else(|| bad(format!("missing argument: {name}")))
    }

    fn number<T: FromStr>(&self, name: &str) -> Result<Option<T>, Failure> {
        self.value(name)?
            .map(|v| {
                v.parse()
                    .map_err(|_| bad(format!("{name} must be a number in range, got {v:?}")))
            })
            .transpose()
    }

    /// `times`: a count of at least 1, or absent (until cleared).
    fn times(&self) -> Result<Option<usize>, Failure> {
        match self.number("times")? {
            Some(0) => Err(bad(
                "times must be at least 1 (leave it out: until cleared)",
            )),
            times => Ok(times),
        }
    }

    /// A true/false argument; a bare `name` is true.
    fn switch(&self, name: &str, default: bool) -> Result<bool, Failure> {
        match self.query.first(name) {
            None => Ok(default),
            Some(QValue::True) => Ok(true),
            Some(QValue::Str(s)) => match s.as_str() {
                "true" | "1" | "yes" | "on" => Ok(true),
                "false" | "0" | "no" | "off" => Ok(false),
                _ => Err(bad(format!("{name} must be true or false, got {s:?}"))),
            },
        }
    }

    fn body_text(&self) -> Result<&str, Failure> {
        std::str::from_utf8(self.body).map_err(|_| bad("the body must be UTF-8 text"))
    }

    fn no_body(&self, with: &str) -> Result<(), Failure> {
        if self.body.is_empty() {
            Ok(())
        } else {
            Err(bad(format!("no body with {with}")))
        }
    }

    fn id(&self) -> Result<u64, Failure> {
        let id = self.id.unwrap_or_default();
        id.parse()
            .map_err(|_| bad(format!("the benchmark id must be a number, got {id:?}")))
    }
}

/// The `{id}` segment if `path` matches `pattern` (`Some("")` when it has none).
fn matches<'a>(pattern: &str, path: &'a str) -> Option<&'a str> {
    let mut id = "";
    let (mut want, mut got) = (pattern.split('/'), path.split('/'));
    loop {
        match (want.next(), got.next()) {
            (None, None) => return Some(id),
            (Some("{id}"), Some(segment)) if !segment.is_empty() => id = segment,
            (Some(w), Some(g)) if w == g => {}
            _ => return None,
        }
    }
}

fn available(targets: &Targets, endpoint: &Endpoint) -> bool {
    match endpoint.run {
        Run::Index => true,
        Run::Rtm(_) => targets.rtm.is_some(),
        Run::Bench(_) => targets.bench.is_some(),
        Run::Relay(_) => targets.relays.named().next().is_some(),
    }
}

/// The listing on `GET /`, in the table's order, each entry's fields in this order
/// (a `Value` would sort them, putting `about` before `method` and `path`).
#[derive(Serialize)]
struct Index {
    about: &'static str,
    endpoints: Vec<Listed>,
}

#[derive(Serialize)]
struct Listed {
    method: &'static str,
    path: &'static str,
    about: &'static str,
    args: Args,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<&'static str>,
}

/// Arguments as a JSON object, in the order the endpoint declares them.
struct Args(&'static [(&'static str, &'static str)]);

impl Serialize for Args {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, help) in self.0 {
            map.serialize_entry(name, help)?;
        }
        map.end()
    }
}

fn index(targets: &Targets) -> Index {
    Index {
        about: "Control endpoint of the local servers. No authentication: for loopback and test networks only. Arguments go in the query string; replies are JSON.",
        endpoints: ENDPOINTS
            .iter()
            .filter(|e| available(targets, e))
            .map(|e| Listed {
                method: e.method,
                path: e.path,
                about: e.about,
                args: Args(e.args),
                body: e.body,
            })
            .collect(),
    }
}

/// Replies as pretty JSON with a final newline, for people reading them in a terminal.
fn pretty(value: &impl Serialize) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// The body of an error reply.
pub(super) fn error_body(message: &str) -> Vec<u8> {
    pretty(&json!({ "error": message }))
}

/// The status, extra headers and body that answer `request`.
pub(super) fn answer(
    targets: &Targets,
    request: &Request,
) -> (u16, Vec<(&'static str, String)>, Vec<u8>) {
    let found: Vec<(&Endpoint, &str)> = ENDPOINTS
        .iter()
        .filter(|e| available(targets, e))
        .filter_map(|e| matches(e.path, &request.path).map(|id| (e, id)))
        .collect();
    if found.is_empty() {
        let message = format!("no endpoint {}; GET / lists them", request.path);
        return (404, Vec::new(), error_body(&message));
    }
    let Some(&(endpoint, id)) = found.iter().find(|(e, _)| e.method == request.method) else {
        let allow: Vec<&str> = found.iter().map(|(e, _)| e.method).collect();
        let message = format!("{} takes {}", request.path, allow.join(", "));
        return (405, vec![("allow", allow.join(", "))], error_body(&message));
    };
    let call = Call {
        query: Query::parse(&request.query),
        id: Some(id).filter(|id| !id.is_empty()),
        body: &request.body,
    };
    match check(endpoint, &call).and_then(|()| run(targets, endpoint, &call)) {
        Ok(body) => (200, Vec::new(), body),
        Err(f) => (f.status, Vec::new(), error_body(&f.message)),
    }
}

/// Every query argument is one the endpoint takes, once; a body only where it takes one.
fn check(endpoint: &Endpoint, call: &Call<'_>) -> Result<(), Failure> {
    let names: Vec<&str> = endpoint.args.iter().map(|(name, _)| *name).collect();
    for (i, (name, _)) in call.query.pairs.iter().enumerate() {
        if !names.contains(&name.as_str()) {
            let takes = if names.is_empty() {
                "no arguments".to_owned()
            } else {
                names.join(", ")
            };
            return Err(bad(format!(
                "unknown argument {name:?}; {} {} takes: {takes}",
                endpoint.method, endpoint.path
            )));
        }
        if call.query.pairs.iter().skip(i + 1).any(|(n, _)| n == name) {
            return Err(bad(format!("argument {name} given twice")));
        }
    }
    if endpoint.body.is_none() {
        call.no_body(&format!("{} {}", endpoint.method, endpoint.path))?;
    }
    Ok(())
}

/// The body of the reply.
fn run(targets: &Targets, endpoint: &Endpoint, call: &Call<'_>) -> Result<Vec<u8>, Failure> {
    let missing = || Failure {
        status: 404,
        message: "that server is not behind this control endpoint".to_owned(),
    };
    match endpoint.run {
        Run::Index => Ok(pretty(&index(targets))),
        Run::Rtm(f) => f(targets.rtm.as_deref().ok_or_else(missing)?, call).map(|v| pretty(&v)),
        Run::Bench(f) => f(targets.bench.as_deref().ok_or_else(missing)?, call).map(|v| pretty(&v)),
        Run::Relay(f) => f(&targets.relays, call).map(|v| pretty(&v)),
    }
}

//! The chat of the reference Python SDK's examples (`examples/chat/common.py` of
//! satori-rtm-sdk-python, BSD licence; an unmodified copy is in `examples/reference-chat/`),
//! ported to `benchlink_std::rtm`: the logic shared by the binaries `chat-bot` (`bot.py`)
//! and `chat` (`interactive.py`).
//!
//! A [`Chat`] subscribes to its channel in ADVANCED mode with an observer; on entering
//! Subscribed the observer publishes `"<nick> joined the channel"` and joining waits for
//! that publish's acknowledgement; every received message is printed to stdout as Python's
//! `print(message)` prints it ([`python_print`]); [`Chat::say`] publishes
//! `"<nick>> <text>"` and waits for the acknowledgement; [`Chat::leave`] publishes
//! `"<nick> left the channel"`, unsubscribes once that is acknowledged, and waits for the
//! subscription to be Unsubscribed. [`in_chat`] is the Python `in_chat` context manager:
//! it leaves whatever way its body ends.
//!
//! Every wait is the Python one's: 10 s, with its error message.

use std::fmt;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use benchlink_std::rtm::{
    Client, Mode, Response, SubscribeOptions, SubscriptionData, SubscriptionObserver,
};

/// How long joining, saying and leaving wait (`common.py`'s `wait(10)`).
pub const WAIT: Duration = Duration::from_secs(10);

/// The default endpoint: the RTM server of `benchlink sandbox`.
pub const SANDBOX_ENDPOINT: &str = "ws://127.0.0.1:8080";

/// Why a chat operation failed (the text of the Python example's `RuntimeError`, or the
/// client's error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatError(pub String);

impl fmt::Display for ChatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ChatError {}

impl From<benchlink_std::rtm::Error> for ChatError {
    fn from(e: benchlink_std::rtm::Error) -> ChatError {
        ChatError(e.to_string())
    }
}

/// Python's `threading.Event`: a flag to set, clear and wait for.
#[derive(Clone, Default)]
struct Event(Arc<(Mutex<bool>, Condvar)>);

impl Event {
    fn set(&self) {
        let (flag, changed) = &*self.0;
        *flag.lock().unwrap_or_else(PoisonError::into_inner) = true;
        changed.notify_all();
    }

    fn clear(&self) {
        *self.0 .0.lock().unwrap_or_else(PoisonError::into_inner) = false;
    }

    /// Whether the flag was set within `timeout`.
    fn wait(&self, timeout: Duration) -> bool {
        let (flag, changed) = &*self.0;
        let deadline = Instant::now() + timeout;
        let mut set = flag.lock().unwrap_or_else(PoisonError::into_inner);
        while !*set {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            set = changed
                .wait_timeout(set, left)
                .map_or_else(|p| p.into_inner().0, |(s, _)| s);
        }
        true
    }
}

/// The subscription observer (`Chat`'s own methods in the Python example).
struct Observer {
    nick: String,
    channel: String,
    client: Client,
    after_subscribe: Event,
    after_unsubscribe: Event,
}

impl SubscriptionObserver for Observer {
    /// Announces the nick, and lets the joining call return once that is acknowledged
    /// (also after a restored subscription, as in the Python example).
    fn on_enter_subscribed(&mut self) {
        let join_line = format!("{} joined the channel", self.nick);
        let after_subscribe = self.after_subscribe.clone();
        let exit = Box::new(move |ack: Response| {
            if !is_publish_ok(&ack) {
                eprintln!("Failed to publish join message to chat channel");
            }
            after_subscribe.set();
        });
        if let Err(e) = self.client.publish(&self.channel, &join_line, Some(exit)) {
            eprintln!("Failed to publish join message to chat channel: {e}");
            self.after_subscribe.set();
        }
    }

    fn on_subscription_data(&mut self, data: &SubscriptionData) {
        let mut out = std::io::stdout().lock();
        for message in data.messages() {
            // A closed stdout is not the chat's failure: the Python example would raise
            // in the SDK's thread and go on too.
            let _ = writeln!(out, "{}", python_print(message));
        }
        let _ = out.flush();
    }

    fn on_enter_unsubscribed(&mut self) {
        self.after_unsubscribe.set();
    }
}

fn is_publish_ok(ack: &Response) -> bool {
    matches!(ack, Response::Reply(r) if r.action == "rtm/publish/ok")
}

/// One nick in one channel (`common.py`'s `Chat`).
pub struct Chat {
    nick: String,
    channel: String,
    client: Client,
    after_unsubscribe: Event,
}

impl Chat {
    /// Subscribes `client` to `channel` (ADVANCED) and waits until the join line is
    /// acknowledged.
    pub fn join(nick: &str, channel: &str, client: &Client) -> Result<Chat, ChatError> {
        let after_subscribe = Event::default();
        let after_unsubscribe = Event::default();
        let observer = Observer {
            nick: nick.to_owned(),
            channel: channel.to_owned(),
            client: client.clone(),
            after_subscribe: after_subscribe.clone(),
            after_unsubscribe: after_unsubscribe.clone(),
        };
        client.subscribe(
            channel,
            Mode::Advanced,
            observer,
            SubscribeOptions::default(),
        )?;
        if !after_subscribe.wait(WAIT) {
            return Err(ChatError(
                "Timeout while subscribing to chat channel".to_owned(),
            ));
        }
        Ok(Chat {
            nick: nick.to_owned(),
            channel: channel.to_owned(),
            client: client.clone(),
            after_unsubscribe,
        })
    }

    /// The nick.
    pub fn nick(&self) -> &str {
        &self.nick
    }

    /// Publishes `"<nick>> <message>"` and waits for the acknowledgement (whatever it
    /// says, as the Python example).
    pub fn say(&self, message: &str) -> Result<(), ChatError> {
        let chat_line = format!("{}> {message}", self.nick);
        let say_complete = Event::default();
        let done = say_complete.clone();
        self.client.publish(
            &self.channel,
            &chat_line,
            Some(Box::new(move |_ack| done.set())),
        )?;
        if !say_complete.wait(WAIT) {
            return Err(ChatError(format!("Timeout while saying \"{message}\"")));
        }
        Ok(())
    }

    /// Publishes `"<nick> left the channel"`, unsubscribes once that is acknowledged, and
    /// waits until the subscription is Unsubscribed.
    pub fn leave(&self) -> Result<(), ChatError> {
        let leave_line = format!("{} left the channel", self.nick);
        self.after_unsubscribe.clear();
        let client = self.client.clone();
        let channel = self.channel.clone();
        let after_unsubscribe = self.after_unsubscribe.clone();
        let unsub = Box::new(move |ack: Response| {
            if is_publish_ok(&ack) {
                if let Err(e) = client.unsubscribe(&channel) {
                    eprintln!("Failed to unsubscribe from chat channel: {e}");
                    after_unsubscribe.set();
                }
            } else {
                eprintln!("Failed to publish exit message to chat channel");
                after_unsubscribe.set();
            }
        });
        self.client
            .publish(&self.channel, &leave_line, Some(unsub))?;
        if !self.after_unsubscribe.wait(WAIT) {
            return Err(ChatError(
                "Timeout while announcing leaving the chat".to_owned(),
            ));
        }
        Ok(())
    }
}

/// `with in_chat(nick, channel, client) as chat: body(chat)`: joins, runs `body`, and
/// leaves however it ends (a panic included). A failure to leave takes the place of the
/// body's result, as an exception raised in Python's `finally` does.
pub fn in_chat<R>(
    nick: &str,
    channel: &str,
    client: &Client,
    body: impl FnOnce(&Chat) -> R,
) -> Result<R, ChatError> {
    struct Leave<'c>(&'c Chat);
    impl Drop for Leave<'_> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                let _ = self.0.leave();
            }
        }
    }
    let chat = Chat::join(nick, channel, client)?;
    let guard = Leave(&chat);
    let result = body(guard.0);
    std::mem::forget(guard);
    chat.leave()?;
    Ok(result)
}

/// How a chat program ends, from what `make_client(…, |client| in_chat(…, |chat| …))`
/// returned: success, or the error on stderr as `program: error: …` and exit code 1 (where
/// the Python original prints its traceback).
pub fn exit_code(
    program: &str,
    result: Result<Result<Result<(), ChatError>, ChatError>, benchlink_std::rtm::Error>,
) -> std::process::ExitCode {
    match result
        .map_err(ChatError::from)
        .and_then(|joined| joined)
        .and_then(|said| said)
    {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{program}: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// What Python's `print(message)` prints for a received message (JSON text, decoded by
/// the SDK with `json.loads`): a string as it is, anything else as its `repr` — `None`,
/// `True`, `[1, 'a']`, `{'k': 2.5}` (keys in the order received; a repeated key keeps
/// its first place and its last value, as a `dict` does). Not exact in two corners: an
/// integer beyond 64 bits prints as the float serde_json reads it (Python keeps every
/// digit), and which characters `repr` escapes follows Rust's control and whitespace
/// classes, not Python's full `str.isprintable` table.
pub fn python_print(message: &str) -> String {
    match serde_json::from_str::<Py>(message) {
        Ok(Py::Str(s)) => s,
        Ok(Py::Repr(r)) => r,
        // The SDK would not have delivered it; show the text.
        Err(_) => message.to_owned(),
    }
}

/// A decoded JSON value: a string, or the `repr` of anything else.
enum Py {
    Str(String),
    Repr(String),
}

impl Py {
    fn repr(self) -> String {
        match self {
            Py::Str(s) => repr_str(&s),
            Py::Repr(r) => r,
        }
    }
}

impl<'de> serde::Deserialize<'de> for Py {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Py, D::Error> {
        d.deserialize_any(PyVisitor)
    }
}

struct PyVisitor;

impl<'de> serde::de::Visitor<'de> for PyVisitor {
    type Value = Py;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Py, E> {
        Ok(Py::Repr("None".to_owned()))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Py, E> {
        Ok(Py::Repr(if v { "True" } else { "False" }.to_owned()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Py, E> {
        Ok(Py::Repr(v.to_string()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Py, E> {
        Ok(Py::Repr(v.to_string()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Py, E> {
        Ok(Py::Repr(repr_float(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Py, E> {
        Ok(Py::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Py, E> {
        Ok(Py::Str(v))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Py, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Py>()? {
            items.push(item.repr());
        }
        Ok(Py::Repr(format!("[{}]", items.join(", "))))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Py, A::Error> {
        let mut entries: Vec<(String, String)> = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, Py>()? {
            let value = value.repr();
            match entries.iter_mut().find(|(k, _)| *k == key) {
                Some(entry) => entry.1 = value,
                None => entries.push((key, value)),
            }
        }
        let items: Vec<String> = entries
            .into_iter()
            .map(|(k, v)| format!("{}: {v}", repr_str(&k)))
            .collect();
        Ok(Py::Repr(format!("{{{}}}", items.join(", "))))
    }
}

/// Python's `repr(str)`: single quotes unless the text has a single quote and no double
/// one; backslash, the quote, `\t`, `\n`, `\r` escaped, other unprintable characters as
/// `\xNN`, `\uNNNN` or `\UNNNNNNNN`.
fn repr_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            ' ' => out.push(' '),
            c if c.is_control() || c.is_whitespace() || is_format(c) => {
                let n = u32::from(c);
                if n <= 0xff {
                    out.push_str(&format!("\\x{n:02x}"));
                } else if n <= 0xffff {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// The common format characters (Unicode `Cf`) that Python's `repr` escapes.
fn is_format(c: char) -> bool {
    matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{feff}')
}

/// Python's `repr(float)`: the shortest text that reads back the same, in positional
/// notation (with `.0` when integral) for exponents -4 to 15, else as `1e-07`, `2.5e+100`.
fn repr_float(v: f64) -> String {
    if v.is_nan() {
        return "nan".to_owned();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    let sci = format!("{v:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..16).contains(&exponent) {
        let plain = format!("{v}");
        if plain.contains('.') {
            plain
        } else {
            plain + ".0"
        }
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
    }
}

/// Where the chat programs connect: `--endpoint` and `--appkey`, or the environment the
/// repository's other programs read, else `benchlink sandbox`'s RTM server and appkey.
/// (The Python examples take both from `test.utils.get_test_endpoint_and_appkey()`, the
/// SDK test suite's `credentials.json`.)
#[derive(clap::Args, Debug, Clone)]
pub struct Target {
    /// Messaging endpoint, `ws(s)://…` (default: `benchlink sandbox`'s).
    #[arg(long, env = "BENCHLINK_RTM_ENDPOINT", default_value = SANDBOX_ENDPOINT)]
    pub endpoint: String,
    /// Application key (default: `benchlink sandbox`'s).
    #[arg(long, env = "BENCHLINK_RTM_APPKEY", default_value = benchlink_sandbox::rtm::DEFAULT_APPKEY)]
    pub appkey: String,
}

/// Parses the command line as `P`; a usage error prints what the Python example prints,
/// `Usage: <program> <positionals>` on stdout, then the reason on stderr, and exits 1
/// (help and version are clap's).
pub fn parse_args<P: clap::Parser>(positionals: &str) -> P {
    match P::try_parse() {
        Ok(args) => args,
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) =>
        {
            e.exit()
        }
        Err(e) => {
            let program = std::env::args().next().unwrap_or_default();
            println!("Usage: {program} {positionals}");
            let reason = e
                .kind()
                .as_str()
                .map_or_else(|| e.to_string(), str::to_owned);
            eprintln!("{reason}");
            std::process::exit(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::python_print;

    #[test]
    fn prints_as_python_prints_decoded_json() {
        for (json, python) in [
            (r#""alice> Hi!""#, "alice> Hi!"),
            ("null", "None"),
            ("true", "True"),
            ("42", "42"),
            ("-7", "-7"),
            ("1.0", "1.0"),
            ("100.0", "100.0"),
            ("1e2", "100.0"),
            ("0.1", "0.1"),
            ("-0.0", "-0.0"),
            ("0.0001", "0.0001"),
            ("0.00001", "1e-05"),
            ("1e-7", "1e-07"),
            ("1e16", "1e+16"),
            ("1e15", "1000000000000000.0"),
            ("2.5e100", "2.5e+100"),
            ("6.02214076e23", "6.02214076e+23"),
            ("[]", "[]"),
            ("{}", "{}"),
            (
                r#"{"who":"zebra","n":[1,2.5,null,true,false],"q":"it's"}"#,
                r#"{'who': 'zebra', 'n': [1, 2.5, None, True, False], 'q': "it's"}"#,
            ),
            (
                r#"["both ' and \"", "back\\slash"]"#,
                r#"['both \' and "', 'back\\slash']"#,
            ),
            (
                r#"["tab\tnl\ncr\r\u0001", "é 中文 🎉"]"#,
                r"['tab\tnl\ncr\r\x01', 'é 中文 🎉']",
            ),
            (r#"{"k": 1, "j": 2, "k": 3}"#, "{'k': 3, 'j': 2}"),
            (r#""\u00a0\u200b""#, "\u{a0}\u{200b}"),
            (r#"["\u00a0\u200b\u2028"]"#, r"['\xa0\u200b\u2028']"),
        ] {
            assert_eq!(python_print(json), python, "{json}");
        }
    }
}

//! An interactive chat: joins a channel and says each line read from stdin; `/quit` (or
//! the end of the input) leaves. It prints every message of the channel while it is
//! there. A port of the reference Python SDK's `examples/chat/interactive.py` (the chat
//! itself is `benchlink_examples::chat`).
//!
//! ```text
//! chat [--endpoint ws://127.0.0.1:8080] [--appkey KEY] <name> <channel>
//! ```
//!
//! Without `--endpoint`/`--appkey` (or `BENCHLINK_RTM_ENDPOINT`/`_APPKEY`) it talks to
//! `benchlink sandbox`.
//!
//! `/emulate_disconnect`: the Python original calls `platform.connection.stop()`, closing
//! the client's WebSocket under it so that the client notices the drop and reconnects by
//! itself. `benchlink_std::rtm::Client` has no way to drop its own connection (no method,
//! no fault hook: the fault injection is the sandbox server's, `Faults::drop_connections`,
//! not the client's), so this port stops and starts the client instead: the connection
//! closes and a new one opens at once, and the subscription is restored on it (ADVANCED:
//! from the last position seen), so "`<name>` joined the channel" is announced again, as the
//! Python chat does on every entry to Subscribed. The difference: a stop is not a drop
//! (no reconnect wait, no `Awaiting` state). The Python original cannot do it with the
//! SDK 1.5.0 either: its `Client` has no `connection` attribute (it is
//! `client._internal.connection`), so `/emulate_disconnect` raises `AttributeError` there,
//! after which the chat leaves and the program exits with the traceback.
//!
//! The end of the input leaves as `/quit` does (the Python original raises `EOFError`
//! there, leaves, and exits 1 with the traceback).

use std::io::BufRead;
use std::process::ExitCode;

use benchlink_examples::chat::{exit_code, in_chat, parse_args, ChatError, Target};
use benchlink_std::rtm::{make_client, ClientOptions};
use clap::Parser;

/// An interactive chat (a port of the reference SDK's chat example `interactive.py`).
#[derive(Parser)]
#[command(name = "chat", version)]
struct Args {
    #[command(flatten)]
    target: Target,
    /// Your nick.
    name: String,
    /// The chat's channel.
    channel: String,
}

fn main() -> ExitCode {
    let args: Args = parse_args("<name> <channel>");
    let options = ClientOptions::new(args.target.endpoint, args.target.appkey);
    let result = make_client(options, None, |platform| {
        in_chat(&args.name, &args.channel, platform, |chat| {
            let mut stdin = std::io::stdin().lock();
            let mut line = String::new();
            loop {
                line.clear();
                if stdin
                    .read_line(&mut line)
                    .map_err(|e| ChatError(format!("reading stdin: {e}")))?
                    == 0
                {
                    return Ok(());
                }
                // Python's input() drops the newline and nothing else.
                let cmd = line.strip_suffix('\n').unwrap_or(&line);
                if cmd == "/quit" {
                    return Ok(());
                }
                if cmd == "/emulate_disconnect" {
                    // See the module's comment: a stop and a start, not a dropped link.
                    platform.stop()?;
                    platform.start()?;
                    continue;
                }
                chat.say(cmd)?;
            }
        })
    });
    exit_code("chat", result)
}

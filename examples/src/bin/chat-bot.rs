//! A chat bot: joins a channel, says "Hi!", then `chattiness` times, after a pause of 1 to
//! 3 s, "Zero" or "One" at random, then "Bye.", and leaves; it prints every message of
//! the channel while it is there. A port of the reference Python SDK's
//! `examples/chat/bot.py` (the chat itself is `benchlink_examples::chat`).
//!
//! ```text
//! chat-bot [--endpoint ws://127.0.0.1:8080] [--appkey KEY] <name> <channel> <chattiness>
//! ```
//!
//! Without `--endpoint`/`--appkey` (or `BENCHLINK_RTM_ENDPOINT`/`_APPKEY`) it talks to
//! `benchlink sandbox`. Chattiness 0 says only "Hi!" and "Bye.".

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::process::ExitCode;
use std::time::Duration;

use benchlink_examples::chat::{exit_code, in_chat, parse_args, Target};
use benchlink_std::rtm::{make_client, ClientOptions};
use clap::Parser;

/// A chat bot (a port of the reference SDK's chat example `bot.py`).
#[derive(Parser)]
#[command(name = "chat-bot", version)]
struct Args {
    #[command(flatten)]
    target: Target,
    /// The bot's nick.
    name: String,
    /// The chat's channel.
    channel: String,
    /// How many random lines to say between "Hi!" and "Bye.".
    chattiness: u32,
}

/// A random number below `n` (0 when `n` is 0): std's per-process random hash keys, as
/// good as Python's `random` for a bot's pauses and no dependency.
fn random_below(n: u64) -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(n);
    hasher.finish().checked_rem(n).unwrap_or(0)
}

fn main() -> ExitCode {
    let args: Args = parse_args("<name> <channel> <chattiness>");
    let options = ClientOptions::new(args.target.endpoint, args.target.appkey);
    let result = make_client(options, None, |client| {
        in_chat(&args.name, &args.channel, client, |chat| {
            chat.say("Hi!")?;
            for _ in 0..args.chattiness {
                // random.randint(1, 3) seconds.
                std::thread::sleep(Duration::from_secs(1 + random_below(3)));
                chat.say(["Zero", "One"][usize::from(random_below(2) == 1)])?;
            }
            chat.say("Bye.")
        })
    });
    exit_code("chat-bot", result)
}

//! `make_client`: a client for the length of a closure — connected (and authenticated)
//! on entry, stopped and disposed at the end, also when the closure fails or panics.

use std::time::Duration;

use super::client::{Client, ClientOptions, Error};
use super::ClientState;

/// How long `make_client` waits for the connection (as the reference SDK: 70 s).
pub const CONNECT_WAIT: Duration = Duration::from_secs(70);
/// How long `make_client` waits for authentication (reference: 20 s).
pub const AUTH_WAIT: Duration = Duration::from_secs(20);

/// Runs `f` with a connected client, authenticated first when `auth` (role, secret)
/// is given; the client is stopped and disposed afterwards whatever happens.
///
/// ```no_run
/// use benchlink_std::rtm::{make_client, ClientOptions};
/// let position = make_client(ClientOptions::new("ws://127.0.0.1:8080", "appkey"), None, |client| {
///     client.publish_sync("animals", &"zebra", std::time::Duration::from_secs(5))
/// })??;
/// # Ok::<(), benchlink_std::rtm::Error>(())
/// ```
pub fn make_client<R>(
    options: ClientOptions,
    auth: Option<(&str, &str)>,
    f: impl FnOnce(&Client) -> R,
) -> Result<R, Error> {
    let client = Client::new(options)?;
    let guard = Dispose(&client);
    guard.0.start()?;
    let state = guard.0.wait_for_state(
        |s| matches!(s, ClientState::Connected | ClientState::Stopped),
        CONNECT_WAIT,
    );
    if state != ClientState::Connected {
        let why = guard
            .0
            .last_connecting_error()
            .map_or_else(|| format!("still {state:?}"), |e| e.to_string());
        return Err(Error::Connect(why));
    }
    if let Some((role, secret)) = auth {
        guard.0.authenticate_sync(role, secret, AUTH_WAIT)?;
    }
    Ok(f(guard.0))
}

/// Stops and disposes the client when dropped, on every path out of `make_client`.
struct Dispose<'c>(&'c Client);

impl Drop for Dispose<'_> {
    fn drop(&mut self) {
        let _ = self.0.stop();
        let _ = self.0.dispose();
    }
}

//! No deadlock by construction (issue 21): the std client's calls never wait for its I/O
//! thread, so observers that block, or that call the client back, never hold up a caller
//! and its deadline. Each scenario runs 50 times against the local hub; a caller with a
//! deadline (as the CLI's `--timeout`) subscribes to many channels while the observers
//! misbehave, then waits until its deadline. What is asserted is that every run ends by
//! itself (a hang guard of [`GUARD`] per run); how late the caller's deadline fired is
//! measured and printed (`--nocapture`), not asserted.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::thread;
use std::time::{Duration, Instant};

use benchlink_sandbox::rtm::{RtmServer, RtmServerConfig, DEFAULT_APPKEY};
use benchlink_std::rtm::{
    Client, ClientObserver, ClientOptions, ClientState, Error, Mode, Response, SubscribeOptions,
    SubscriptionData, SubscriptionObserver,
};

const RUNS: usize = 50;
const CHANNELS: usize = 2000;
/// The caller's deadline, from its last subscribe.
const DEADLINE: Duration = Duration::from_millis(300);
/// A run that takes longer than this hung.
const GUARD: Duration = Duration::from_secs(30);

/// Runs `f` on a thread; fails if it does not end within [`GUARD`] (or panics).
fn guarded<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    let handle = thread::spawn(move || {
        let r = f();
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(GUARD) {
        Ok(()) => handle.join().unwrap_or_else(|_| panic!("{what} panicked")),
        Err(RecvTimeoutError::Disconnected) => {
            // It panicked: show why.
            match handle.join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        Err(RecvTimeoutError::Timeout) => panic!("{what} hung for {GUARD:?}"),
    }
}

fn connected(server: &RtmServer, observer: Option<Box<dyn ClientObserver>>) -> Client {
    let options = ClientOptions::new(server.endpoint(), DEFAULT_APPKEY);
    let client = Client::with_observer(options, observer).expect("client");
    client.start().expect("start");
    let state = client.wait_for_state(|s| s == ClientState::Connected, Duration::from_secs(10));
    assert_eq!(state, ClientState::Connected);
    client
}

/// The caller's side of a run, as the CLI's `subscribe --timeout`: subscribes every
/// channel (with the observer `make` gives), then takes events until its deadline
/// ([`DEADLINE`] after the last call),
/// looking at the deadline before each. Returns how long the subscribe calls took, how
/// late the deadline fired, and the events taken.
fn follow<O: SubscriptionObserver + 'static>(
    client: &Client,
    run: usize,
    rx: &Receiver<()>,
    mut make: impl FnMut(String) -> O,
) -> (Duration, Duration, usize) {
    let started = Instant::now();
    for i in 0..CHANNELS {
        let channel = format!("r{run}-{i}");
        client
            .subscribe(
                &channel,
                Mode::Simple,
                make(channel.clone()),
                SubscribeOptions::default(),
            )
            .expect("subscribe");
    }
    let calls = started.elapsed();
    let deadline = Instant::now() + DEADLINE;
    let mut taken = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match rx.recv_timeout(left) {
            Ok(()) => taken += 1,
            Err(RecvTimeoutError::Timeout) => break,
            Err(RecvTimeoutError::Disconnected) => panic!("the observers are gone"),
        }
    }
    (
        calls,
        Instant::now().saturating_duration_since(deadline),
        taken,
    )
}

fn nap() {
    thread::sleep(Duration::from_micros(50));
}

/// Sleeps in every callback, and hands `on_enter_subscribed` to the caller through a
/// channel of one slot (blocking while the caller does not take it): the CLI's observer
/// when its output is slow, which deadlocked `subscribe` with a few hundred channels.
struct Sleepy(SyncSender<()>);

impl SubscriptionObserver for Sleepy {
    fn on_created(&mut self) {
        nap();
    }
    fn on_deleted(&mut self) {
        nap();
    }
    fn on_enter_subscribing(&mut self) {
        nap();
    }
    fn on_leave_subscribing(&mut self) {
        nap();
    }
    fn on_enter_subscribed(&mut self) {
        nap();
        let _ = self.0.send(());
    }
    fn on_leave_subscribed(&mut self) {
        nap();
    }
    fn on_enter_unsubscribed(&mut self) {
        nap();
    }
    fn on_leave_unsubscribed(&mut self) {
        nap();
    }
    fn on_subscription_data(&mut self, _data: &SubscriptionData) {
        nap();
    }
}

/// A client observer that sleeps in every callback.
struct SleepyClient;

impl ClientObserver for SleepyClient {
    fn on_enter_connecting(&mut self) {
        nap();
    }
    fn on_enter_connected(&mut self) {
        nap();
    }
    fn on_leave_connected(&mut self) {
        nap();
    }
    fn on_enter_stopped(&mut self) {
        nap();
    }
}

#[test]
fn observers_that_sleep_and_block_never_hold_up_the_caller() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("hub");
    let endpoint = server.endpoint();
    let mut worst = (Duration::ZERO, Duration::ZERO);
    for run in 0..RUNS {
        let client = connected(&server, Some(Box::new(SleepyClient)));
        let (calls, late, taken) = guarded(&format!("run {run}"), move || {
            let (tx, rx) = mpsc::sync_channel(1);
            let figures = follow(&client, run, &rx, |_| Sleepy(tx.clone()));
            // Past the deadline: the caller lets go of its end (the blocked observer's
            // send fails) and closes.
            drop(rx);
            client.stop().expect("stop");
            client.dispose().expect("dispose");
            figures
        });
        assert!(taken <= CHANNELS);
        worst = (worst.0.max(calls), worst.1.max(late));
    }
    println!(
        "{RUNS} runs of {CHANNELS} subscriptions to {endpoint} with sleeping, blocking \
         observers: the subscribe calls took at most {:?}; the caller's deadline fired at \
         most {:?} late",
        worst.0, worst.1
    );
}

/// Calls the client back from its callbacks: publishes (with a callback that reads, and
/// tries a blocking call), subscribes, unsubscribes, waits for a state.
struct Caller {
    client: Client,
    channel: String,
    tx: SyncSender<()>,
    /// What a blocking call inside a callback gave.
    blocking: mpsc::Sender<String>,
}

impl SubscriptionObserver for Caller {
    fn on_enter_subscribed(&mut self) {
        let _ = self.tx.send(());
        let client = self.client.clone();
        let blocking = self.blocking.clone();
        let published = self.client.publish(
            &self.channel,
            &"hello",
            Some(Box::new(move |_response: Response| {
                let r = client.publish_sync("elsewhere", &1, Duration::from_secs(5));
                let _ = blocking.send(match r {
                    Err(Error::InCallback) => "InCallback".to_owned(),
                    other => format!("{other:?}"),
                });
                let _ = client.read("elsewhere", None, Some(Box::new(|_| {})));
                let _ =
                    client.wait_for_state(|s| s == ClientState::Disposed, Duration::from_secs(5));
            })),
        );
        // Events still being delivered after the caller disposed the client call a
        // disposed client.
        assert!(
            matches!(published, Ok(()) | Err(Error::Disposed)),
            "{published:?}"
        );
        let side = format!("{}-side", self.channel);
        let _ = self
            .client
            .subscribe(&side, Mode::Simple, Quiet, SubscribeOptions::default());
        let _ = self.client.unsubscribe(&side);
    }
    fn on_subscription_data(&mut self, _data: &SubscriptionData) {
        let _ = self.client.is_connected();
        let _ = self.client.last_connecting_error();
    }
}

struct Quiet;

impl SubscriptionObserver for Quiet {}

#[test]
fn callbacks_that_call_the_client_never_deadlock() {
    let server = RtmServer::start(RtmServerConfig::default()).expect("hub");
    let mut worst = (Duration::ZERO, Duration::ZERO);
    let mut blocking_calls = Vec::new();
    for run in 0..RUNS {
        let client = connected(&server, None);
        let (blocking_tx, blocking_rx) = mpsc::channel();
        let (calls, late, taken) = guarded(&format!("run {run}"), move || {
            let (tx, rx) = mpsc::sync_channel(1);
            let figures = follow(&client, run, &rx, |channel| Caller {
                client: client.clone(),
                channel,
                tx: tx.clone(),
                blocking: blocking_tx.clone(),
            });
            drop(rx);
            client.stop().expect("stop");
            client.dispose().expect("dispose");
            figures
        });
        assert!(taken <= CHANNELS);
        blocking_calls.extend(blocking_rx.try_iter());
        worst = (worst.0.max(calls), worst.1.max(late));
    }
    println!(
        "{RUNS} runs of {CHANNELS} subscriptions whose callbacks call the client: the \
         subscribe calls took at most {:?}; the caller's deadline fired at most {:?} late; \
         {} blocking calls made inside callbacks",
        worst.0,
        worst.1,
        blocking_calls.len()
    );
    assert!(
        blocking_calls.iter().all(|r| r == "InCallback"),
        "a blocking call inside a callback did not fail at once: {blocking_calls:?}"
    );
}
